/* The .graph reader's insides, shared by its files: the lexer (graph_lex.c: tokens, numbers,
 * failures), the statement parser (graph_parse.c) and the builder (graph_build.c). */
#ifndef CLRUN_LIB_GRAPH_READ_H
#define CLRUN_LIB_GRAPH_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph/graph.h"

/* Limits that keep one statement's work small whatever the input. */
#define MAX_NODE_INPUTS 64
#define MAX_NODE_OUTPUTS 64
#define MAX_NODE_ATTRS 64
/* Longest number token; longer ones are refused rather than truncated. */
#define MAX_NUMBER_TEXT 128
/* A bad token is quoted in messages up to this many bytes, then "...". */
#define QUOTE_MAX 32

/* ---- lexer ---- */

typedef enum token_kind {
    TOKEN_NAME,    /* letters, digits, '_', '.', not starting with a digit or '.' */
    TOKEN_NUMBER,  /* digits with optional sign, '.', exponent, 0x prefix */
    TOKEN_PUNCT,   /* one of : , = ( ) [ ] */
    TOKEN_NEWLINE, /* ends a statement */
    TOKEN_END,     /* end of the text */
    TOKEN_BAD,     /* a character the format does not use */
} token_kind;

typedef struct token {
    token_kind kind;
    const char *text; /* into the input */
    size_t length;
    int line, col;    /* 1-based; col counts bytes */
} token;

typedef struct lexer {
    const char *text;
    size_t length;
    size_t pos;
    int line, col;
} lexer;

typedef enum number_result { NUMBER_OK, NUMBER_NOT_INTEGER, NUMBER_OUT_OF_RANGE } number_result;

/* ---- statements, as read ---- */

/* A name as written, with where. */
typedef struct name_ref {
    char *name;
    int line, col;
} name_ref;

/* One tensor a statement defines, with its declared type (required for inputs and constants,
 * an optional annotation on node outputs). */
typedef struct definition {
    name_ref name;
    bool typed;
    clrun_tensor_type type;
    int type_line, type_col;
} definition;

typedef enum statement_kind { STATEMENT_INPUT, STATEMENT_CONST, STATEMENT_NODE } statement_kind;

/* How far the builder has got with a statement. */
typedef enum build_state { NOT_BUILT, BUILDING, BUILT } build_state;

typedef struct statement {
    statement_kind kind;
    int line, col;           /* of the keyword */
    definition *defs;        /* what it defines: one for input and const */
    int def_count;
    bool donated;            /* input */
    clrun_fill fill;         /* const */
    double fill_a, fill_b;
    uint64_t seed;
    void *data;              /* const with data= or bits=: bytes of the type */
    int fill_line, fill_col;
    const char *op;          /* node: the op's own name (static) */
    int op_line, op_col;
    name_ref *inputs;        /* node */
    int input_count;
    clrun_attr *attrs;       /* node; names owned */
    int attr_count;
    build_state state;
    clrun_tensor_id *ids;    /* def_count tensor ids once built */
} statement;

/* Where a name is defined: statement and position among its definitions. */
typedef struct name_site {
    int32_t statement;
    int index;
} name_site;

typedef struct parser {
    lexer lex;
    token tok;                 /* the current token */
    const char *filename;
    char message[1024];        /* "FILE:LINE:COL: ..." of the first failure */
    statement *statements;
    int32_t statement_count, statement_capacity;
    name_site *sites;          /* every defined name */
    int32_t site_count, site_capacity;
    clrun__name_index site_index; /* name -> sites entry */
    name_ref *outputs;         /* `output` names in order */
    int32_t output_count, output_capacity;
    char *graph_name;
    int graph_line;
    bool seen_statement;       /* a statement other than `graph` was read */
} parser;

/* ---- shared functions ---- */

bool clrun__gio_is_digit(char c);

token clrun__gio_lexer_next(lexer *lex);

clrun_status clrun__gio_fail_at(parser *p, int line, int col, clrun_status status, const char *format,
                            ...) CLRUN__PRINTF(5, 6);

/* How a token reads in a message: 'text' (shortened), end of line, end of file. */
const char *clrun__gio_describe(const token *tok, char *buf, size_t size);

clrun_status clrun__gio_fail_expected(parser *p, const char *what);

clrun_status clrun__gio_advance(parser *p);

bool clrun__gio_at_punct(const parser *p, char c);

bool clrun__gio_at_word(const parser *p, const char *word);

bool clrun__gio_at_line_end(const parser *p);

clrun_status clrun__gio_expect_punct(parser *p, char c);

/* The ',' between list items; the message names the closing bracket too. */
clrun_status clrun__gio_expect_separator(parser *p, char closing);

clrun_status clrun__gio_expect_line_end(parser *p);

/* A name token copied out; *out owned by the caller. */
clrun_status clrun__gio_take_name(parser *p, const char *what, name_ref *out);

/* Decimal with optional sign, or 0x hexadecimal without one; any 64-bit integer. */
number_result clrun__gio_token_int(const token *tok, int64_t *out);

/* The token as a finite double (or, as_float, a finite float): false when it is not a number
 * or its magnitude overflows. Underflow to a subnormal or zero is accepted: that is the value. */
bool clrun__gio_token_real(const token *tok, bool as_float, double *out);

clrun_status clrun__gio_take_int(parser *p, const char *what, int64_t *out);

clrun_status clrun__gio_take_real(parser *p, const char *what, double *out);

/* Room for one more element after `count` in an array of *capacity: the array (perhaps moved),
 * or NULL with the old one untouched when memory runs out. */
void *clrun__gio_grow(void *array, int32_t *capacity, int32_t count, size_t size);

clrun_status clrun__gio_out_of_memory(parser *p);

clrun_status clrun__gio_parse_statements(parser *p);
/* The statement defining `name` (an index into p->sites), or -1. */
int32_t clrun__gio_find_site(const parser *p, const char *name);

#endif
