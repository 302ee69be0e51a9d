/* clrun: the .graph text format (docs/graph-format.md): parser and writer.
 *
 * The parser reads the whole text into statements first, then builds the graph through the
 * public builder in dependency order: a node may use a tensor declared further down, so a cycle,
 * a name nobody defines and an output nobody produces are all reported against the line that
 * shows them. Every failure becomes one "FILE:LINE:COL: message"; the message texts are part of
 * the interface (tests/data/graphs/bad holds the exact ones). The parser never trusts its input:
 * it is run under libFuzzer (tests/fuzz/fuzz_graph.c).
 *
 * Numbers are read and written in the C locale whatever the program's locale says, so a file
 * written in one locale reads back in another. */
#include "graph/graph.h"

#include <errno.h>
#include <inttypes.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "device/context.h"

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

static void lexer_step(lexer *lex)
{
    if (lex->text[lex->pos] == '\n') {
        lex->line += lex->line < INT32_MAX;
        lex->col = 1;
    } else {
        lex->col += lex->col < INT32_MAX;
    }
    lex->pos++;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool starts_number(const lexer *lex)
{
    const char *t = lex->text + lex->pos;
    size_t left = lex->length - lex->pos;
    if (is_digit(t[0]))
        return true;
    if ((t[0] == '-' || t[0] == '+') && left > 1)
        return is_digit(t[1]) || (t[1] == '.' && left > 2 && is_digit(t[2]));
    return t[0] == '.' && left > 1 && is_digit(t[1]);
}

/* A number runs over letters, digits, '.', '_', and a sign right after an exponent 'e'. */
static void lex_number(lexer *lex)
{
    const char *t = lex->text;
    size_t start = lex->pos;
    if (t[lex->pos] == '-' || t[lex->pos] == '+')
        lexer_step(lex);
    bool hex = lex->length - lex->pos > 1 && t[lex->pos] == '0' &&
               (t[lex->pos + 1] == 'x' || t[lex->pos + 1] == 'X');
    while (lex->pos < lex->length) {
        char c = t[lex->pos];
        char before = lex->pos > start ? t[lex->pos - 1] : 0;
        bool sign_of_exponent = (c == '-' || c == '+') && !hex && (before == 'e' || before == 'E');
        if (!clrun__name_char(c) && !sign_of_exponent)
            break;
        lexer_step(lex);
    }
}

static token lexer_next(lexer *lex)
{
    for (;;) {
        while (lex->pos < lex->length &&
               (lex->text[lex->pos] == ' ' || lex->text[lex->pos] == '\t' ||
                lex->text[lex->pos] == '\r'))
            lexer_step(lex);
        if (lex->pos < lex->length && lex->text[lex->pos] == '#') {
            while (lex->pos < lex->length && lex->text[lex->pos] != '\n')
                lexer_step(lex);
            continue;
        }
        break;
    }
    token tok = {TOKEN_END, lex->text + lex->pos, 0, lex->line, lex->col};
    if (lex->pos >= lex->length)
        return tok;
    char c = lex->text[lex->pos];
    size_t start = lex->pos;
    if (c == '\n') {
        tok.kind = TOKEN_NEWLINE;
        lexer_step(lex);
    } else if (c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
        tok.kind = TOKEN_NAME;
        while (lex->pos < lex->length && clrun__name_char(lex->text[lex->pos]))
            lexer_step(lex);
    } else if (starts_number(lex)) {
        tok.kind = TOKEN_NUMBER;
        lex_number(lex);
    } else {
        tok.kind = strchr(":,=()[]", c) && c != '\0' ? TOKEN_PUNCT : TOKEN_BAD;
        lexer_step(lex);
    }
    tok.length = lex->pos - start;
    return tok;
}

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

/* ---- failures ---- */

CLRUN__PRINTF(5, 6)
static clrun_status fail_at(parser *p, int line, int col, clrun_status status, const char *format,
                            ...)
{
    int used = snprintf(p->message, sizeof p->message, "%s:%d:%d: ", p->filename, line, col);
    if (used >= 0 && (size_t)used < sizeof p->message) {
        va_list args;
        va_start(args, format);
        vsnprintf(p->message + used, sizeof p->message - (size_t)used, format, args);
        va_end(args);
    }
    return status;
}

/* How a token reads in a message: 'text' (shortened), end of line, end of file. */
static const char *describe(const token *tok, char *buf, size_t size)
{
    switch (tok->kind) {
    case TOKEN_NEWLINE: return "end of line";
    case TOKEN_END: return "end of file";
    case TOKEN_BAD: {
        unsigned char c = (unsigned char)tok->text[0];
        if (c >= 0x20 && c < 0x7F)
            snprintf(buf, size, "'%c'", c);
        else
            snprintf(buf, size, "byte 0x%02x", c);
        return buf;
    }
    default:
        if (tok->length > QUOTE_MAX)
            snprintf(buf, size, "'%.*s...'", QUOTE_MAX, tok->text);
        else
            snprintf(buf, size, "'%.*s'", (int)tok->length, tok->text);
        return buf;
    }
}

static clrun_status fail_expected(parser *p, const char *what)
{
    char found[QUOTE_MAX + 16];
    return fail_at(p, p->tok.line, p->tok.col, CLRUN_ERROR_PARSE, "expected %s, found %s", what,
                   describe(&p->tok, found, sizeof found));
}

/* ---- token helpers ---- */

static clrun_status advance(parser *p)
{
    p->tok = lexer_next(&p->lex);
    if (p->tok.kind == TOKEN_BAD) {
        char found[QUOTE_MAX + 16];
        return fail_at(p, p->tok.line, p->tok.col, CLRUN_ERROR_PARSE, "unexpected %s",
                       describe(&p->tok, found, sizeof found));
    }
    return CLRUN_OK;
}

static bool at_punct(const parser *p, char c)
{
    return p->tok.kind == TOKEN_PUNCT && p->tok.text[0] == c;
}

static bool at_word(const parser *p, const char *word)
{
    return p->tok.kind == TOKEN_NAME && p->tok.length == strlen(word) &&
           memcmp(p->tok.text, word, p->tok.length) == 0;
}

static bool at_line_end(const parser *p)
{
    return p->tok.kind == TOKEN_NEWLINE || p->tok.kind == TOKEN_END;
}

static clrun_status expect_punct(parser *p, char c)
{
    if (!at_punct(p, c)) {
        char what[8] = {'\'', c, '\'', '\0'};
        return fail_expected(p, what);
    }
    return advance(p);
}

/* The ',' between list items; the message names the closing bracket too. */
static clrun_status expect_separator(parser *p, char closing)
{
    if (!at_punct(p, ',')) {
        char what[16];
        snprintf(what, sizeof what, "',' or '%c'", closing);
        return fail_expected(p, what);
    }
    return advance(p);
}

static clrun_status expect_line_end(parser *p)
{
    return at_line_end(p) ? CLRUN_OK : fail_expected(p, "end of line");
}

/* A name token copied out; *out owned by the caller. */
static clrun_status take_name(parser *p, const char *what, name_ref *out)
{
    if (p->tok.kind != TOKEN_NAME)
        return fail_expected(p, what);
    if (p->tok.length > CLRUN__GRAPH_NAME_MAX)
        return fail_at(p, p->tok.line, p->tok.col, CLRUN_ERROR_PARSE,
                       "name is too long (at most %d bytes)", CLRUN__GRAPH_NAME_MAX);
    out->name = malloc(p->tok.length + 1);
    if (!out->name)
        return fail_at(p, p->tok.line, p->tok.col, CLRUN_ERROR_OUT_OF_HOST_MEMORY,
                       "out of host memory");
    memcpy(out->name, p->tok.text, p->tok.length);
    out->name[p->tok.length] = '\0';
    out->line = p->tok.line;
    out->col = p->tok.col;
    clrun_status status = advance(p);
    if (status != CLRUN_OK) { /* the caller owns a name only on success */
        free(out->name);
        out->name = NULL;
    }
    return status;
}

/* ---- numbers ---- */

typedef enum number_result { NUMBER_OK, NUMBER_NOT_INTEGER, NUMBER_OUT_OF_RANGE } number_result;

/* Decimal with optional sign, or 0x hexadecimal without one; any 64-bit integer. */
static number_result token_int(const token *tok, int64_t *out)
{
    const char *t = tok->text, *end = tok->text + tok->length;
    bool negative = t < end && *t == '-';
    if (t < end && (*t == '-' || *t == '+'))
        t++;
    unsigned base = 10;
    if (end - t > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X') && t == tok->text) {
        base = 16;
        t += 2;
    }
    if (t == end)
        return NUMBER_NOT_INTEGER;
    uint64_t value = 0;
    bool overflow = false;
    for (; t < end; t++) {
        unsigned digit;
        if (is_digit(*t))
            digit = (unsigned)(*t - '0');
        else if (base == 16 && *t >= 'a' && *t <= 'f')
            digit = (unsigned)(*t - 'a' + 10);
        else if (base == 16 && *t >= 'A' && *t <= 'F')
            digit = (unsigned)(*t - 'A' + 10);
        else
            return NUMBER_NOT_INTEGER;
        if (value > (UINT64_MAX - digit) / base)
            overflow = true;
        else
            value = value * base + digit;
    }
    if (overflow)
        return NUMBER_OUT_OF_RANGE;
    if (base == 16) { /* bit patterns: the full unsigned range, read back as two's complement */
        memcpy(out, &value, sizeof value);
        return NUMBER_OK;
    }
    if (value > (uint64_t)INT64_MAX + negative)
        return NUMBER_OUT_OF_RANGE;
    *out = negative ? (int64_t)(0 - value) : (int64_t)value;
    return NUMBER_OK;
}

/* The token as a finite double (or, as_float, a finite float): false when it is not a number
 * or its magnitude overflows. Underflow to a subnormal or zero is accepted: that is the value. */
static bool token_real(const token *tok, bool as_float, double *out)
{
    char text[MAX_NUMBER_TEXT + 1];
    if (tok->kind != TOKEN_NUMBER || tok->length > MAX_NUMBER_TEXT)
        return false;
    memcpy(text, tok->text, tok->length);
    text[tok->length] = '\0';
    char *end = NULL;
    double value = as_float ? (double)strtof(text, &end) : strtod(text, &end);
    if (end != text + tok->length || isinf(value) || isnan(value))
        return false;
    *out = value;
    return true;
}

static clrun_status take_int(parser *p, const char *what, int64_t *out)
{
    if (p->tok.kind != TOKEN_NUMBER)
        return fail_expected(p, what);
    char found[QUOTE_MAX + 16];
    switch (token_int(&p->tok, out)) {
    case NUMBER_OK: return advance(p);
    case NUMBER_NOT_INTEGER:
        return fail_at(p, p->tok.line, p->tok.col, CLRUN_ERROR_PARSE,
                       "expected an integer, found %s", describe(&p->tok, found, sizeof found));
    case NUMBER_OUT_OF_RANGE: break;
    }
    return fail_at(p, p->tok.line, p->tok.col, CLRUN_ERROR_PARSE, "number %s is out of range",
                   describe(&p->tok, found, sizeof found));
}

static clrun_status take_real(parser *p, const char *what, double *out)
{
    if (p->tok.kind != TOKEN_NUMBER)
        return fail_expected(p, what);
    if (!token_real(&p->tok, false, out)) {
        char found[QUOTE_MAX + 16];
        return fail_at(p, p->tok.line, p->tok.col, CLRUN_ERROR_PARSE, "%s is not a finite number",
                       describe(&p->tok, found, sizeof found));
    }
    return advance(p);
}

/* ---- growth ---- */

/* Room for one more element after `count` in an array of *capacity: the array (perhaps moved),
 * or NULL with the old one untouched when memory runs out. */
static void *grow(void *array, int32_t *capacity, int32_t count, size_t size)
{
    if (count < *capacity)
        return array;
    if (*capacity > INT32_MAX / 2 || ((size_t)*capacity * 2 + 8) > SIZE_MAX / size)
        return NULL;
    int32_t bigger = *capacity ? *capacity * 2 : 8;
    void *grown = realloc(array, (size_t)bigger * size);
    if (grown)
        *capacity = bigger;
    return grown;
}

static clrun_status out_of_memory(parser *p)
{
    return fail_at(p, p->tok.line, p->tok.col, CLRUN_ERROR_OUT_OF_HOST_MEMORY,
                   "out of host memory");
}

/* ---- types ---- */

/* DTYPE '[' [DIM {',' DIM}] ']' */
static clrun_status parse_type(parser *p, clrun_tensor_type *type, int *line, int *col)
{
    *line = p->tok.line;
    *col = p->tok.col;
    if (p->tok.kind != TOKEN_NAME)
        return fail_expected(p, "a dtype (f32, i32 or f16)");
    memset(type, 0, sizeof *type);
    if (!clrun__dtype_parse(p->tok.text, p->tok.length, &type->dtype)) {
        char found[QUOTE_MAX + 16];
        return fail_at(p, p->tok.line, p->tok.col, CLRUN_ERROR_PARSE, "unknown dtype %s",
                       describe(&p->tok, found, sizeof found));
    }
    clrun_status status = advance(p);
    if (status == CLRUN_OK)
        status = expect_punct(p, '[');
    while (status == CLRUN_OK && !at_punct(p, ']')) {
        if (type->rank > 0 && (status = expect_separator(p, ']')) != CLRUN_OK)
            break;
        if (type->rank == CLRUN_MAX_DIMS)
            return fail_at(p, p->tok.line, p->tok.col, CLRUN_ERROR_PARSE,
                           "too many dimensions (at most %d)", CLRUN_MAX_DIMS);
        int dim_line = p->tok.line, dim_col = p->tok.col;
        int64_t dim = 0;
        if ((status = take_int(p, "a dimension", &dim)) != CLRUN_OK)
            break;
        if (dim < 1)
            return fail_at(p, dim_line, dim_col, CLRUN_ERROR_PARSE,
                           "dimension must be at least 1, found %" PRId64, dim);
        type->shape[type->rank++] = dim;
    }
    if (status == CLRUN_OK)
        status = advance(p); /* the ']' */
    char reason[256];
    if (status == CLRUN_OK && clrun__type_check(type, reason, sizeof reason) != CLRUN_OK)
        return fail_at(p, *line, *col, CLRUN_ERROR_INVALID_SIZE, "%s", reason);
    return status;
}

/* ---- definitions ---- */

static const char *site_name_of(const void *owner, int32_t entry)
{
    const parser *p = owner;
    const name_site *site = &p->sites[entry];
    return p->statements[site->statement].defs[site->index].name.name;
}

static int32_t find_site(const parser *p, const char *name)
{
    return clrun__name_index_find(&p->site_index, name, site_name_of, p);
}

/* Records that definition `index` of the current (last) statement defines its name. */
static clrun_status define_name(parser *p, int index)
{
    int32_t current = p->statement_count - 1;
    const statement *s = &p->statements[current];
    const name_ref *name = &s->defs[index].name;
    int32_t earlier = find_site(p, name->name);
    if (earlier >= 0) {
        const statement *first = &p->statements[p->sites[earlier].statement];
        if (first->kind == STATEMENT_NODE && s->kind == STATEMENT_NODE)
            return fail_at(p, name->line, name->col, CLRUN_ERROR_INVALID_GRAPH,
                           "'%s' is produced twice (first at line %d)", name->name, first->line);
        return fail_at(p, name->line, name->col, CLRUN_ERROR_INVALID_GRAPH,
                       "'%s' is already defined at line %d", name->name, first->line);
    }
    name_site *sites = grow(p->sites, &p->site_capacity, p->site_count, sizeof *sites);
    if (!sites)
        return out_of_memory(p);
    p->sites = sites;
    if (clrun__name_index_reserve(&p->site_index, p->site_count + 1, site_name_of, p) != CLRUN_OK)
        return out_of_memory(p);
    p->sites[p->site_count] = (name_site){current, index};
    clrun__name_index_add(&p->site_index, name->name, p->site_count);
    p->site_count++;
    return CLRUN_OK;
}

/* A new statement at the end of the list, zeroed, for the keyword under the cursor. */
static statement *new_statement(parser *p, statement_kind kind)
{
    statement *all = grow(p->statements, &p->statement_capacity, p->statement_count, sizeof *all);
    if (!all)
        return NULL;
    p->statements = all;
    statement *s = &p->statements[p->statement_count++];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->line = p->tok.line;
    s->col = p->tok.col;
    return s;
}

/* The one definition of an input or constant: NAME ':' TYPE */
static clrun_status parse_typed_name(parser *p, statement *s)
{
    s->defs = calloc(1, sizeof *s->defs);
    if (!s->defs)
        return out_of_memory(p);
    s->def_count = 1;
    definition *def = &s->defs[0];
    clrun_status status = take_name(p, "a tensor name", &def->name);
    if (status == CLRUN_OK)
        status = define_name(p, 0);
    if (status == CLRUN_OK)
        status = expect_punct(p, ':');
    if (status == CLRUN_OK)
        status = parse_type(p, &def->type, &def->type_line, &def->type_col);
    def->typed = true;
    return status;
}

/* ---- statements ---- */

/* graph NAME */
static clrun_status parse_graph(parser *p)
{
    int line = p->tok.line, col = p->tok.col;
    if (p->graph_name)
        return fail_at(p, line, col, CLRUN_ERROR_PARSE, "second 'graph' header (the first is at line %d)",
                       p->graph_line);
    if (p->seen_statement)
        return fail_at(p, line, col, CLRUN_ERROR_PARSE, "'graph' must come before every other statement");
    name_ref name = {NULL, 0, 0};
    clrun_status status = advance(p);
    if (status == CLRUN_OK)
        status = take_name(p, "a graph name", &name);
    p->graph_name = name.name;
    p->graph_line = line;
    return status == CLRUN_OK ? expect_line_end(p) : status;
}

/* input NAME ':' TYPE ['donated'] */
static clrun_status parse_input(parser *p)
{
    statement *s = new_statement(p, STATEMENT_INPUT);
    if (!s)
        return out_of_memory(p);
    clrun_status status = advance(p);
    if (status == CLRUN_OK)
        status = parse_typed_name(p, s);
    if (status == CLRUN_OK && at_word(p, "donated")) {
        s->donated = true;
        status = advance(p);
    }
    if (status == CLRUN_OK && !at_line_end(p))
        return fail_expected(p, "'donated' or end of line");
    return status;
}

/* '[' VALUE {',' VALUE} ']' of a constant's data into s->data. bits: each value is the
 * element's bit pattern; otherwise its value (an integer for i32). */
static clrun_status parse_data(parser *p, statement *s, bool bits)
{
    const clrun_tensor_type *type = &s->defs[0].type;
    size_t size = clrun_dtype_size(type->dtype);
    uint64_t elements = clrun_tensor_elements(type);
    int bracket_line = p->tok.line, bracket_col = p->tok.col;
    clrun_status status = expect_punct(p, '[');
    unsigned char *bytes = NULL;
    int32_t count = 0, capacity = 0;
    while (status == CLRUN_OK && !at_punct(p, ']')) {
        if (count > 0 && (status = expect_separator(p, ']')) != CLRUN_OK)
            break;
        if ((uint64_t)count == elements) {
            free(bytes);
            return fail_at(p, p->tok.line, p->tok.col, CLRUN_ERROR_PARSE,
                           "more values than the %" PRIu64 " elements of '%s'", elements,
                           s->defs[0].name.name);
        }
        if (p->tok.kind != TOKEN_NUMBER) {
            free(bytes);
            return fail_expected(p, "a value");
        }
        unsigned char *more = grow(bytes, &capacity, count, size);
        if (!more) {
            free(bytes);
            return out_of_memory(p);
        }
        bytes = more;
        unsigned char *slot = bytes + (size_t)count * size;
        int64_t integer = 0;
        double real = 0;
        char found[QUOTE_MAX + 16];
        describe(&p->tok, found, sizeof found);
        if (bits || type->dtype == CLRUN_I32) {
            number_result r = token_int(&p->tok, &integer);
            uint64_t pattern = (uint64_t)integer;
            bool fits = bits ? (size == 2 ? pattern <= 0xFFFF : pattern <= 0xFFFFFFFFu)
                             : integer >= INT32_MIN && integer <= INT32_MAX;
            if (r != NUMBER_OK || !fits) {
                free(bytes);
                return fail_at(p, p->tok.line, p->tok.col, CLRUN_ERROR_PARSE,
                               r == NUMBER_NOT_INTEGER ? "%s is not %s" : "%s does not fit %s",
                               found, bits ? (size == 2 ? "a 16-bit pattern" : "a 32-bit pattern")
                                           : "an i32");
            }
            if (size == 2) {
                uint16_t half = (uint16_t)pattern;
                memcpy(slot, &half, 2);
            } else {
                uint32_t word = (uint32_t)pattern;
                memcpy(slot, &word, 4);
            }
        } else {
            if (!token_real(&p->tok, true, &real)) {
                free(bytes);
                return fail_at(p, p->tok.line, p->tok.col, CLRUN_ERROR_PARSE,
                               "%s is not a finite %s value", found, clrun_dtype_name(type->dtype));
            }
            float value = (float)real;
            if (type->dtype == CLRUN_F16) {
                uint16_t half = clrun__f32_to_f16(value);
                memcpy(slot, &half, 2);
            } else {
                memcpy(slot, &value, 4);
            }
        }
        count++;
        status = advance(p);
    }
    if (status == CLRUN_OK && (uint64_t)count != elements) {
        char text[CLRUN__TYPE_TEXT];
        status = fail_at(p, bracket_line, bracket_col, CLRUN_ERROR_PARSE,
                         "%d value%s given, %s holds %" PRIu64, (int)count, count == 1 ? "" : "s",
                         clrun__type_format(type, text, sizeof text), elements);
    }
    if (status == CLRUN_OK)
        status = advance(p); /* the ']' */
    if (status != CLRUN_OK) {
        free(bytes);
        return status;
    }
    s->data = bytes;
    return CLRUN_OK;
}

/* '(' A ',' B ')' of uniform and normal. */
static clrun_status parse_fill_parameters(parser *p, statement *s)
{
    clrun_status status = expect_punct(p, '(');
    if (status == CLRUN_OK)
        status = take_real(p, "a number", &s->fill_a);
    if (status == CLRUN_OK)
        status = expect_punct(p, ',');
    if (status == CLRUN_OK)
        status = take_real(p, "a number", &s->fill_b);
    return status == CLRUN_OK ? expect_punct(p, ')') : status;
}

/* zeros | ones | uniform(A, B) | normal(MEAN, STD) | data=[...] | bits=[...], then seed=N for the
 * random fills. */
static clrun_status parse_fill(parser *p, statement *s)
{
    s->fill_line = p->tok.line;
    s->fill_col = p->tok.col;
    static const char *const expected =
        "a fill (zeros, ones, uniform(a, b), normal(mean, std), data=[...] or bits=[...])";
    bool random = at_word(p, "uniform") || at_word(p, "normal");
    bool data = at_word(p, "data"), bits = at_word(p, "bits");
    if (!random && !data && !bits && !at_word(p, "zeros") && !at_word(p, "ones"))
        return fail_expected(p, expected);
    s->fill = at_word(p, "ones") ? CLRUN_FILL_ONES
              : at_word(p, "uniform") ? CLRUN_FILL_UNIFORM
              : at_word(p, "normal") ? CLRUN_FILL_NORMAL
                                     : CLRUN_FILL_ZEROS;
    clrun_status status = advance(p);
    if (status == CLRUN_OK && random)
        status = parse_fill_parameters(p, s);
    if (status == CLRUN_OK && (data || bits)) {
        status = expect_punct(p, '=');
        if (status == CLRUN_OK)
            status = parse_data(p, s, bits);
    }
    if (status != CLRUN_OK || !at_word(p, "seed"))
        return status;
    if (!random)
        return fail_at(p, p->tok.line, p->tok.col, CLRUN_ERROR_PARSE,
                       "seed= applies only to uniform and normal fills");
    status = advance(p);
    if (status == CLRUN_OK)
        status = expect_punct(p, '=');
    int64_t seed = 0;
    bool negative = p->tok.kind == TOKEN_NUMBER && p->tok.text[0] == '-';
    int seed_line = p->tok.line, seed_col = p->tok.col;
    if (status == CLRUN_OK)
        status = take_int(p, "a seed", &seed);
    if (status == CLRUN_OK && negative)
        return fail_at(p, seed_line, seed_col, CLRUN_ERROR_PARSE, "a seed cannot be negative");
    s->seed = (uint64_t)seed; /* seeds above 2^63 are written in hex */
    return status;
}

/* const NAME ':' TYPE FILL */
static clrun_status parse_const(parser *p)
{
    statement *s = new_statement(p, STATEMENT_CONST);
    if (!s)
        return out_of_memory(p);
    clrun_status status = advance(p);
    if (status == CLRUN_OK)
        status = parse_typed_name(p, s);
    if (status == CLRUN_OK)
        status = parse_fill(p, s);
    return status == CLRUN_OK ? expect_line_end(p) : status;
}

/* NAME [':' TYPE] {',' NAME [':' TYPE]} before the '=' of a node. */
static clrun_status parse_node_outputs(parser *p, statement *s)
{
    int32_t capacity = 0;
    clrun_status status = CLRUN_OK;
    while (status == CLRUN_OK) {
        if (s->def_count == MAX_NODE_OUTPUTS)
            return fail_at(p, p->tok.line, p->tok.col, CLRUN_ERROR_PARSE,
                           "too many outputs (at most %d)", MAX_NODE_OUTPUTS);
        definition *defs = grow(s->defs, &capacity, s->def_count, sizeof *defs);
        if (!defs)
            return out_of_memory(p);
        s->defs = defs;
        definition *def = &s->defs[s->def_count];
        memset(def, 0, sizeof *def);
        if ((status = take_name(p, "an output name", &def->name)) != CLRUN_OK)
            break;
        s->def_count++;
        if ((status = define_name(p, s->def_count - 1)) != CLRUN_OK)
            break;
        if (at_punct(p, ':')) {
            def->typed = true;
            if ((status = advance(p)) == CLRUN_OK)
                status = parse_type(p, &def->type, &def->type_line, &def->type_col);
        }
        if (status != CLRUN_OK || !at_punct(p, ','))
            break;
        status = advance(p);
    }
    return status;
}

/* '(' [NAME {',' NAME}] ')' */
static clrun_status parse_node_inputs(parser *p, statement *s)
{
    int32_t capacity = 0;
    clrun_status status = expect_punct(p, '(');
    while (status == CLRUN_OK && !at_punct(p, ')')) {
        if (s->input_count > 0 && (status = expect_separator(p, ')')) != CLRUN_OK)
            break;
        if (s->input_count == MAX_NODE_INPUTS)
            return fail_at(p, p->tok.line, p->tok.col, CLRUN_ERROR_PARSE,
                           "too many inputs (at most %d)", MAX_NODE_INPUTS);
        name_ref *inputs = grow(s->inputs, &capacity, s->input_count, sizeof *inputs);
        if (!inputs)
            return out_of_memory(p);
        s->inputs = inputs;
        if ((status = take_name(p, "an input name", &s->inputs[s->input_count])) != CLRUN_OK)
            break;
        s->input_count++;
    }
    return status == CLRUN_OK ? advance(p) : status;
}

/* '[' [INT {',' INT}] ']' */
static clrun_status parse_int_list(parser *p, clrun_attr *attr)
{
    clrun_status status = advance(p);
    attr->kind = CLRUN_ATTR_INTS;
    while (status == CLRUN_OK && !at_punct(p, ']')) {
        if (attr->count > 0 && (status = expect_separator(p, ']')) != CLRUN_OK)
            break;
        if (attr->count == CLRUN_MAX_ATTR_INTS)
            return fail_at(p, p->tok.line, p->tok.col, CLRUN_ERROR_PARSE,
                           "attribute '%s' has more than %d values", attr->name,
                           CLRUN_MAX_ATTR_INTS);
        status = take_int(p, "a list value", &attr->ints[attr->count]);
        attr->count += status == CLRUN_OK;
    }
    return status == CLRUN_OK ? advance(p) : status;
}

/* KEY '=' (INT | FLOAT | '[' INTS ']'): an integer is written without '.' or exponent. */
static clrun_status parse_attribute(parser *p, statement *s)
{
    clrun_attr *attr = &s->attrs[s->attr_count];
    memset(attr, 0, sizeof *attr);
    name_ref key = {NULL, 0, 0};
    clrun_status status = take_name(p, "an attribute or end of line", &key);
    attr->name = key.name;
    if (status != CLRUN_OK)
        return status;
    s->attr_count++;
    for (int i = 0; i < s->attr_count - 1; i++)
        if (strcmp(s->attrs[i].name, key.name) == 0)
            return fail_at(p, key.line, key.col, CLRUN_ERROR_PARSE,
                           "attribute '%s' given twice", key.name);
    if ((status = expect_punct(p, '=')) != CLRUN_OK)
        return status;
    if (at_punct(p, '['))
        return parse_int_list(p, attr);
    if (p->tok.kind != TOKEN_NUMBER)
        return fail_expected(p, "a number or a list");
    int64_t integer;
    number_result r = token_int(&p->tok, &integer);
    if (r == NUMBER_OK) {
        attr->kind = CLRUN_ATTR_INT;
        attr->i = integer;
        return advance(p);
    }
    if (r == NUMBER_OUT_OF_RANGE)
        return take_int(p, "a number", &integer); /* reports the range */
    attr->kind = CLRUN_ATTR_FLOAT;
    return take_real(p, "a number", &attr->f);
}

/* node OUTPUTS '=' OP '(' INPUTS ')' {ATTRIBUTE} */
static clrun_status parse_node(parser *p)
{
    statement *s = new_statement(p, STATEMENT_NODE);
    if (!s)
        return out_of_memory(p);
    clrun_status status = advance(p);
    if (status == CLRUN_OK)
        status = parse_node_outputs(p, s);
    if (status == CLRUN_OK)
        status = expect_punct(p, '=');
    if (status != CLRUN_OK)
        return status;
    if (p->tok.kind != TOKEN_NAME)
        return fail_expected(p, "an op name");
    char op[64] = "";
    if (p->tok.length < sizeof op)
        memcpy(op, p->tok.text, p->tok.length);
    const clrun__op *found = op[0] ? clrun__op_find(op) : NULL;
    if (!found) {
        char name[QUOTE_MAX + 16];
        return fail_at(p, p->tok.line, p->tok.col, CLRUN_ERROR_UNKNOWN_KERNEL, "unknown op %s",
                       describe(&p->tok, name, sizeof name));
    }
    s->op = found->name;
    s->op_line = p->tok.line;
    s->op_col = p->tok.col;
    if ((status = advance(p)) == CLRUN_OK)
        status = parse_node_inputs(p, s);
    if (status == CLRUN_OK)
        s->attrs = calloc(MAX_NODE_ATTRS, sizeof *s->attrs);
    if (status == CLRUN_OK && !s->attrs)
        return out_of_memory(p);
    while (status == CLRUN_OK && !at_line_end(p)) {
        if (s->attr_count == MAX_NODE_ATTRS)
            return fail_at(p, p->tok.line, p->tok.col, CLRUN_ERROR_PARSE,
                           "too many attributes (at most %d)", MAX_NODE_ATTRS);
        status = parse_attribute(p, s);
    }
    return status;
}

/* output NAME {',' NAME} */
static clrun_status parse_output(parser *p)
{
    clrun_status status = advance(p);
    do {
        if (status != CLRUN_OK)
            break;
        name_ref *outputs = grow(p->outputs, &p->output_capacity, p->output_count, sizeof *outputs);
        if (!outputs)
            return out_of_memory(p);
        p->outputs = outputs;
        if ((status = take_name(p, "an output name", &p->outputs[p->output_count])) != CLRUN_OK)
            break;
        p->output_count++;
        if (!at_punct(p, ','))
            break;
        status = advance(p);
    } while (status == CLRUN_OK);
    return status == CLRUN_OK ? expect_line_end(p) : status;
}

static clrun_status parse_statement(parser *p)
{
    if (at_word(p, "graph"))
        return parse_graph(p);
    p->seen_statement = true;
    if (at_word(p, "input"))
        return parse_input(p);
    if (at_word(p, "const"))
        return parse_const(p);
    if (at_word(p, "node"))
        return parse_node(p);
    if (at_word(p, "output"))
        return parse_output(p);
    return fail_expected(p, "a statement (graph, input, const, node or output)");
}

static clrun_status parse_statements(parser *p)
{
    clrun_status status = advance(p);
    while (status == CLRUN_OK && p->tok.kind != TOKEN_END) {
        if (p->tok.kind == TOKEN_NEWLINE)
            status = advance(p);
        else
            status = parse_statement(p);
    }
    return status;
}

/* ---- building ---- */

/* The builder's reason for a failure, at a place in the file. */
static clrun_status fail_from_graph(parser *p, const clrun_graph *graph, int line, int col,
                                    clrun_status status)
{
    return fail_at(p, line, col, status, "%s", clrun_graph_last_error(graph));
}

static clrun_status build_node(parser *p, clrun_graph *graph, statement *s)
{
    clrun_tensor_id inputs[MAX_NODE_INPUTS];
    const char *names[MAX_NODE_OUTPUTS];
    for (int i = 0; i < s->input_count; i++) {
        const name_site *site = &p->sites[find_site(p, s->inputs[i].name)];
        inputs[i] = p->statements[site->statement].ids[site->index];
    }
    for (int o = 0; o < s->def_count; o++)
        names[o] = s->defs[o].name.name;
    clrun_status status = clrun_graph_add_node(graph, s->op, inputs, s->input_count, names,
                                               s->def_count, s->attrs, s->attr_count, s->ids);
    if (status != CLRUN_OK)
        return fail_from_graph(p, graph, s->op_line, s->op_col, status);
    graph->nodes[graph->node_count - 1].line = s->line;
    for (int o = 0; o < s->def_count; o++) {
        const definition *def = &s->defs[o];
        const clrun_tensor_type *inferred = &graph->tensors[s->ids[o]].type;
        if (def->typed && !clrun__type_equal(&def->type, inferred)) {
            char have[CLRUN__TYPE_TEXT], said[CLRUN__TYPE_TEXT];
            return fail_at(p, def->type_line, def->type_col, CLRUN_ERROR_INVALID_GRAPH,
                           "'%s' is %s but its annotation says %s", def->name.name,
                           clrun__type_format(inferred, have, sizeof have),
                           clrun__type_format(&def->type, said, sizeof said));
        }
    }
    return CLRUN_OK;
}

/* Adds one statement whose inputs are all built. */
static clrun_status build_statement(parser *p, clrun_graph *graph, statement *s)
{
    s->ids = calloc((size_t)s->def_count + 1, sizeof *s->ids);
    if (!s->ids)
        return out_of_memory(p);
    clrun_status status;
    const definition *def = &s->defs[0];
    if (s->kind == STATEMENT_NODE) {
        status = build_node(p, graph, s);
    } else if (s->kind == STATEMENT_INPUT) {
        status = clrun_graph_add_input(graph, def->name.name, &def->type, s->donated, s->ids);
        if (status != CLRUN_OK)
            return fail_from_graph(p, graph, def->name.line, def->name.col, status);
    } else {
        status = clrun_graph_add_constant(graph, def->name.name, &def->type, s->data, s->fill,
                                          s->fill_a, s->fill_b, s->seed, s->ids);
        if (status != CLRUN_OK)
            return fail_from_graph(p, graph, s->fill_line, s->fill_col, status);
    }
    for (int o = 0; status == CLRUN_OK && o < s->def_count; o++)
        graph->tensors[s->ids[o]].line = s->line;
    s->state = BUILT;
    return status;
}

/* One level of the depth-first walk: a statement and the next input it waits for. */
typedef struct frame {
    int32_t statement;
    int next_input;
} frame;

/* "cycle: a -> b -> a" for the statements on the stack from `from` to the top, the top one
 * reading `closing` (a tensor of stack[from]'s statement). */
static clrun_status fail_cycle(parser *p, const frame *stack, int32_t from, int32_t top,
                               const name_ref *closing)
{
    char text[512];
    size_t used = (size_t)snprintf(text, sizeof text, "%s", closing->name);
    for (int32_t f = from; f <= top && used < sizeof text; f++) {
        const statement *s = &p->statements[stack[f].statement];
        used += (size_t)snprintf(text + used, sizeof text - used, " -> %s",
                                 s->inputs[stack[f].next_input].name);
    }
    return fail_at(p, closing->line, closing->col, CLRUN_ERROR_INVALID_GRAPH, "cycle: %s", text);
}

/* Builds statement `root` after everything it depends on, with an explicit stack (a long chain
 * of nodes must not exhaust the C stack). */
static clrun_status build_from(parser *p, clrun_graph *graph, int32_t root, frame *stack)
{
    int32_t top = 0;
    stack[0] = (frame){root, 0};
    p->statements[root].state = BUILDING;
    while (top >= 0) {
        frame *f = &stack[top];
        statement *s = &p->statements[f->statement];
        if (f->next_input == s->input_count) {
            clrun_status status = build_statement(p, graph, s);
            if (status != CLRUN_OK)
                return status;
            top--;
            continue;
        }
        const name_ref *input = &s->inputs[f->next_input];
        int32_t site = find_site(p, input->name);
        if (site < 0)
            return fail_at(p, input->line, input->col, CLRUN_ERROR_INVALID_GRAPH,
                           "'%s' is not defined", input->name);
        int32_t needed = p->sites[site].statement;
        if (p->statements[needed].state == BUILT) {
            f->next_input++;
        } else if (p->statements[needed].state == BUILDING) {
            int32_t from = top;
            while (stack[from].statement != needed)
                from--;
            return fail_cycle(p, stack, from, top, input);
        } else {
            p->statements[needed].state = BUILDING;
            stack[++top] = (frame){needed, 0};
        }
    }
    return CLRUN_OK;
}

static clrun_status build_graph(parser *p, clrun_graph *graph)
{
    frame *stack = malloc(((size_t)p->statement_count + 1) * sizeof *stack);
    if (!stack)
        return out_of_memory(p);
    clrun_status status = CLRUN_OK;
    for (int32_t s = 0; status == CLRUN_OK && s < p->statement_count; s++)
        if (p->statements[s].state == NOT_BUILT)
            status = build_from(p, graph, s, stack);
    free(stack);
    return status;
}

static clrun_status mark_outputs(parser *p, clrun_graph *graph)
{
    for (int32_t i = 0; i < p->output_count; i++) {
        const name_ref *name = &p->outputs[i];
        int32_t site = find_site(p, name->name);
        if (site < 0)
            return fail_at(p, name->line, name->col, CLRUN_ERROR_INVALID_GRAPH,
                           "output '%s' is never produced", name->name);
        const name_site *where = &p->sites[site];
        clrun_status status =
            clrun_graph_mark_output(graph, p->statements[where->statement].ids[where->index]);
        if (status != CLRUN_OK)
            return fail_from_graph(p, graph, name->line, name->col, status);
    }
    return CLRUN_OK;
}

static void parser_free(parser *p)
{
    for (int32_t i = 0; i < p->statement_count; i++) {
        statement *s = &p->statements[i];
        for (int d = 0; d < s->def_count; d++)
            free(s->defs[d].name.name);
        for (int k = 0; k < s->input_count; k++)
            free(s->inputs[k].name);
        for (int a = 0; a < s->attr_count; a++)
            free((char *)s->attrs[a].name);
        free(s->defs);
        free(s->inputs);
        free(s->attrs);
        free(s->data);
        free(s->ids);
    }
    for (int32_t i = 0; i < p->output_count; i++)
        free(p->outputs[i].name);
    free(p->statements);
    free(p->sites);
    free(p->outputs);
    free(p->graph_name);
    clrun__name_index_free(&p->site_index);
}

/* Parse, build, mark, validate: the graph or the first failure in p->message. */
static clrun_status parse_and_build(parser *p, clrun_graph **out)
{
    clrun_status status = parse_statements(p);
    if (status != CLRUN_OK)
        return status;
    clrun_graph *graph = NULL;
    status = clrun_graph_create(p->graph_name, &graph);
    if (status != CLRUN_OK)
        return fail_at(p, p->graph_line, 1, status, "%s", clrun_last_error(NULL));
    status = build_graph(p, graph);
    if (status == CLRUN_OK)
        status = mark_outputs(p, graph);
    if (status == CLRUN_OK && (status = clrun_graph_validate(graph)) != CLRUN_OK)
        fail_from_graph(p, graph, p->tok.line, p->tok.col, status); /* at the end: what is missing */
    if (status != CLRUN_OK) {
        clrun_graph_destroy(graph);
        return status;
    }
    *out = graph;
    return CLRUN_OK;
}

/* Runs with LC_NUMERIC "C" for this thread, so strtod and printf agree with the format. */
typedef struct c_numeric {
    locale_t c, previous;
} c_numeric;

static c_numeric c_numeric_enter(void)
{
    c_numeric scope = {newlocale(LC_NUMERIC_MASK, "C", (locale_t)0), (locale_t)0};
    if (scope.c)
        scope.previous = uselocale(scope.c);
    return scope;
}

static void c_numeric_leave(c_numeric scope)
{
    if (!scope.c)
        return;
    uselocale(scope.previous);
    freelocale(scope.c);
}

clrun_status clrun_graph_parse(const char *text, size_t length, const char *filename,
                               clrun_graph **out, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (!out || (!text && length))
        return clrun__fail(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "clrun_graph_parse: %s is NULL",
                           out ? "text" : "out");
    *out = NULL;
    parser p;
    memset(&p, 0, sizeof p);
    p.lex = (lexer){text ? text : "", length, 0, 1, 1};
    p.filename = filename ? filename : "<input>";
    c_numeric scope = c_numeric_enter();
    clrun_status status = parse_and_build(&p, out);
    c_numeric_leave(scope);
    parser_free(&p);
    if (status != CLRUN_OK) {
        if (err && errlen)
            snprintf(err, errlen, "%s", p.message);
        clrun__fail(NULL, status, "%s", p.message);
    }
    return status;
}

/* The whole file in memory: *text (owned, NUL-terminated) and its length. */
static clrun_status read_file(const char *path, char **text, size_t *length)
{
    FILE *file = fopen(path, "rb");
    if (!file)
        return CLRUN_ERROR_IO;
    size_t used = 0, capacity = 4096;
    char *buffer = malloc(capacity);
    clrun_status status = buffer ? CLRUN_OK : CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    while (status == CLRUN_OK) {
        if (capacity - used < 2) {
            char *bigger = capacity <= SIZE_MAX / 2 ? realloc(buffer, capacity * 2) : NULL;
            if (!bigger) {
                status = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
                break;
            }
            buffer = bigger;
            capacity *= 2;
        }
        size_t got = fread(buffer + used, 1, capacity - used - 1, file);
        used += got;
        if (got == 0) {
            if (ferror(file))
                status = CLRUN_ERROR_IO;
            break;
        }
    }
    fclose(file);
    if (status != CLRUN_OK) {
        free(buffer);
        return status;
    }
    buffer[used] = '\0';
    *text = buffer;
    *length = used;
    return CLRUN_OK;
}

clrun_status clrun_graph_load(const char *path, clrun_graph **out, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (!path || !out)
        return clrun__fail(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "clrun_graph_load: %s is NULL",
                           path ? "out" : "path");
    *out = NULL;
    char *text = NULL;
    size_t length = 0;
    errno = 0;
    clrun_status status = read_file(path, &text, &length);
    if (status != CLRUN_OK) {
        char message[1024];
        snprintf(message, sizeof message, "%s: cannot read: %s", path,
                 status == CLRUN_ERROR_IO && errno ? strerror(errno) : clrun_strerror(status));
        if (err && errlen)
            snprintf(err, errlen, "%s", message);
        return clrun__fail(NULL, status, "%s", message);
    }
    status = clrun_graph_parse(text, length, path, out, err, errlen);
    free(text);
    return status;
}

/* ---- writer ---- */

/* The shortest "%.Ng" that reads back to exactly v (v finite). */
static void format_double(double v, char *buf, size_t size)
{
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(buf, size, "%.*g", digits, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

/* The same for a float, read back with strtof. */
static void format_float(float v, char *buf, size_t size)
{
    for (int digits = 1; digits <= 9; digits++) {
        snprintf(buf, size, "%.*g", digits, (double)v);
        if (strtof(buf, NULL) == v)
            return;
    }
}

static void write_type(FILE *out, const clrun_tensor_type *type)
{
    char text[CLRUN__TYPE_TEXT];
    fputs(clrun__type_format(type, text, sizeof text), out);
}

/* data=[...] when every value has a decimal spelling that reads back bit for bit (i32, finite
 * f32); bits=[0x...] otherwise (f16, NaN, infinities). */
static void write_data(FILE *out, const clrun__tensor *tensor)
{
    uint64_t elements = clrun_tensor_elements(&tensor->type);
    const unsigned char *bytes = tensor->data;
    bool decimal = tensor->type.dtype != CLRUN_F16;
    for (uint64_t i = 0; decimal && tensor->type.dtype == CLRUN_F32 && i < elements; i++) {
        float v;
        memcpy(&v, bytes + i * 4, 4);
        decimal = isfinite(v);
    }
    fputs(decimal ? "data=[" : "bits=[", out);
    for (uint64_t i = 0; i < elements; i++) {
        if (i)
            fputs(", ", out);
        if (tensor->type.dtype == CLRUN_F16) {
            uint16_t half;
            memcpy(&half, bytes + i * 2, 2);
            fprintf(out, "0x%04x", (unsigned)half);
            continue;
        }
        uint32_t word;
        memcpy(&word, bytes + i * 4, 4);
        if (!decimal) {
            fprintf(out, "0x%08" PRIx32, word);
        } else if (tensor->type.dtype == CLRUN_I32) {
            int32_t value;
            memcpy(&value, &word, 4);
            fprintf(out, "%" PRId32, value);
        } else {
            float value;
            char text[64];
            memcpy(&value, &word, 4);
            format_float(value, text, sizeof text);
            fputs(text, out);
        }
    }
    fputs("]", out);
}

static void write_fill(FILE *out, const clrun__tensor *tensor)
{
    if (tensor->data) {
        write_data(out, tensor);
        return;
    }
    char a[64], b[64];
    switch (tensor->fill) {
    case CLRUN_FILL_ZEROS: fputs("zeros", out); return;
    case CLRUN_FILL_ONES: fputs("ones", out); return;
    case CLRUN_FILL_UNIFORM:
    case CLRUN_FILL_NORMAL:
        format_double(tensor->fill_a, a, sizeof a);
        format_double(tensor->fill_b, b, sizeof b);
        fprintf(out, "%s(%s, %s) seed=", tensor->fill == CLRUN_FILL_UNIFORM ? "uniform" : "normal",
                a, b);
        /* Seeds above INT64_MAX read back only as hex bit patterns. */
        fprintf(out, tensor->seed > INT64_MAX ? "0x%" PRIx64 : "%" PRIu64, tensor->seed);
        return;
    }
}

static void write_attribute(FILE *out, const clrun_attr *attr)
{
    fprintf(out, " %s=", attr->name);
    if (attr->kind == CLRUN_ATTR_INT) {
        fprintf(out, "%" PRId64, attr->i);
    } else if (attr->kind == CLRUN_ATTR_FLOAT) {
        char text[64];
        format_double(attr->f, text, sizeof text);
        /* A float must not read back as an integer. */
        fprintf(out, "%s%s", text, strpbrk(text, ".eE") ? "" : ".0");
    } else {
        fputs("[", out);
        for (int k = 0; k < attr->count; k++)
            fprintf(out, "%s%" PRId64, k ? ", " : "", attr->ints[k]);
        fputs("]", out);
    }
}

static void write_node(FILE *out, const clrun_graph *graph, const clrun__node *node)
{
    fputs("node ", out);
    for (int o = 0; o < node->output_count; o++) {
        const clrun__tensor *tensor = &graph->tensors[node->outputs[o]];
        fprintf(out, "%s%s: ", o ? ", " : "", tensor->name);
        write_type(out, &tensor->type);
    }
    fprintf(out, " = %s(", node->op->name);
    for (int i = 0; i < node->input_count; i++)
        fprintf(out, "%s%s", i ? ", " : "", graph->tensors[node->inputs[i]].name);
    fputs(")", out);
    for (int k = 0; k < node->attr_count; k++)
        write_attribute(out, &node->attrs[k]);
    fputs("\n", out);
}

/* Declarations in tensor order (the order the builder made them), each node at its first
 * output, so reading back gives every tensor and node the same index. */
static void write_graph(const clrun_graph *graph, FILE *out)
{
    if (graph->name)
        fprintf(out, "graph %s\n", graph->name);
    for (int32_t t = 0; t < graph->tensor_count; t++) {
        const clrun__tensor *tensor = &graph->tensors[t];
        if (tensor->kind == CLRUN__TENSOR_INPUT) {
            fprintf(out, "input %s: ", tensor->name);
            write_type(out, &tensor->type);
            fputs(tensor->donated ? " donated\n" : "\n", out);
        } else if (tensor->kind == CLRUN__TENSOR_CONSTANT) {
            fprintf(out, "const %s: ", tensor->name);
            write_type(out, &tensor->type);
            fputs(" ", out);
            write_fill(out, tensor);
            fputs("\n", out);
        } else if (tensor->producer >= 0 && tensor->producer < graph->node_count &&
                   graph->nodes[tensor->producer].outputs[0] == t) {
            write_node(out, graph, &graph->nodes[tensor->producer]);
        }
    }
    for (int32_t i = 0; i < graph->output_count; i++)
        fprintf(out, "%s%s", i ? ", " : "output ", graph->tensors[graph->outputs[i]].name);
    if (graph->output_count)
        fputs("\n", out);
}

clrun_status clrun_graph_write(const clrun_graph *graph, FILE *out)
{
    if (!graph || !out)
        return clrun__fail(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "clrun_graph_write: %s is NULL",
                           graph ? "out" : "graph");
    c_numeric scope = c_numeric_enter();
    write_graph(graph, out);
    c_numeric_leave(scope);
    if (ferror(out) || fflush(out) != 0)
        return clrun__fail(NULL, CLRUN_ERROR_IO, "writing the graph failed");
    return CLRUN_OK;
}
