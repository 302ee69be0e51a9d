/* The .graph reader's lexer: tokens, numbers, the token helpers of the parser, and its failure
 * messages ("FILE:LINE:COL: message", the bad token quoted). */
#include "graph/graph_read.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/util.h"

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

bool clrun__gio_is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool starts_number(const lexer *lex)
{
    const char *t = lex->text + lex->pos;
    size_t left = lex->length - lex->pos;
    if (clrun__gio_is_digit(t[0]))
        return true;
    if ((t[0] == '-' || t[0] == '+') && left > 1)
        return clrun__gio_is_digit(t[1]) || (t[1] == '.' && left > 2 && clrun__gio_is_digit(t[2]));
    return t[0] == '.' && left > 1 && clrun__gio_is_digit(t[1]);
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

token clrun__gio_lexer_next(lexer *lex)
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

/* ---- failures ---- */

clrun_status clrun__gio_fail_at(parser *p, int line, int col, clrun_status status, const char *format,
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
const char *clrun__gio_describe(const token *tok, char *buf, size_t size)
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

clrun_status clrun__gio_fail_expected(parser *p, const char *what)
{
    char found[QUOTE_MAX + 16];
    return clrun__gio_fail_at(p, p->tok.line, p->tok.col, CLRUN_ERROR_PARSE, "expected %s, found %s", what,
                   clrun__gio_describe(&p->tok, found, sizeof found));
}

/* ---- token helpers ---- */

clrun_status clrun__gio_advance(parser *p)
{
    p->tok = clrun__gio_lexer_next(&p->lex);
    if (p->tok.kind == TOKEN_BAD) {
        char found[QUOTE_MAX + 16];
        return clrun__gio_fail_at(p, p->tok.line, p->tok.col, CLRUN_ERROR_PARSE, "unexpected %s",
                       clrun__gio_describe(&p->tok, found, sizeof found));
    }
    return CLRUN_OK;
}

bool clrun__gio_at_punct(const parser *p, char c)
{
    return p->tok.kind == TOKEN_PUNCT && p->tok.text[0] == c;
}

bool clrun__gio_at_word(const parser *p, const char *word)
{
    return p->tok.kind == TOKEN_NAME && p->tok.length == strlen(word) &&
           memcmp(p->tok.text, word, p->tok.length) == 0;
}

bool clrun__gio_at_line_end(const parser *p)
{
    return p->tok.kind == TOKEN_NEWLINE || p->tok.kind == TOKEN_END;
}

clrun_status clrun__gio_expect_punct(parser *p, char c)
{
    if (!clrun__gio_at_punct(p, c)) {
        char what[8] = {'\'', c, '\'', '\0'};
        return clrun__gio_fail_expected(p, what);
    }
    return clrun__gio_advance(p);
}

/* The ',' between list items; the message names the closing bracket too. */
clrun_status clrun__gio_expect_separator(parser *p, char closing)
{
    if (!clrun__gio_at_punct(p, ',')) {
        char what[16];
        snprintf(what, sizeof what, "',' or '%c'", closing);
        return clrun__gio_fail_expected(p, what);
    }
    return clrun__gio_advance(p);
}

clrun_status clrun__gio_expect_line_end(parser *p)
{
    return clrun__gio_at_line_end(p) ? CLRUN_OK : clrun__gio_fail_expected(p, "end of line");
}

/* A name token copied out; *out owned by the caller. */
clrun_status clrun__gio_take_name(parser *p, const char *what, name_ref *out)
{
    if (p->tok.kind != TOKEN_NAME)
        return clrun__gio_fail_expected(p, what);
    if (p->tok.length > CLRUN__GRAPH_NAME_MAX)
        return clrun__gio_fail_at(p, p->tok.line, p->tok.col, CLRUN_ERROR_PARSE,
                       "name is too long (at most %d bytes)", CLRUN__GRAPH_NAME_MAX);
    out->name = malloc(p->tok.length + 1);
    if (!out->name)
        return clrun__gio_fail_at(p, p->tok.line, p->tok.col, CLRUN_ERROR_OUT_OF_HOST_MEMORY,
                       "out of host memory");
    memcpy(out->name, p->tok.text, p->tok.length);
    out->name[p->tok.length] = '\0';
    out->line = p->tok.line;
    out->col = p->tok.col;
    clrun_status status = clrun__gio_advance(p);
    if (status != CLRUN_OK) { /* the caller owns a name only on success */
        free(out->name);
        out->name = NULL;
    }
    return status;
}

/* ---- numbers ---- */


/* Decimal with optional sign, or 0x hexadecimal without one; any 64-bit integer. */
number_result clrun__gio_token_int(const token *tok, int64_t *out)
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
        if (clrun__gio_is_digit(*t))
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
bool clrun__gio_token_real(const token *tok, bool as_float, double *out)
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

clrun_status clrun__gio_take_int(parser *p, const char *what, int64_t *out)
{
    if (p->tok.kind != TOKEN_NUMBER)
        return clrun__gio_fail_expected(p, what);
    char found[QUOTE_MAX + 16];
    switch (clrun__gio_token_int(&p->tok, out)) {
    case NUMBER_OK: return clrun__gio_advance(p);
    case NUMBER_NOT_INTEGER:
        return clrun__gio_fail_at(p, p->tok.line, p->tok.col, CLRUN_ERROR_PARSE,
                       "expected an integer, found %s", clrun__gio_describe(&p->tok, found, sizeof found));
    case NUMBER_OUT_OF_RANGE: break;
    }
    return clrun__gio_fail_at(p, p->tok.line, p->tok.col, CLRUN_ERROR_PARSE, "number %s is out of range",
                   clrun__gio_describe(&p->tok, found, sizeof found));
}

clrun_status clrun__gio_take_real(parser *p, const char *what, double *out)
{
    if (p->tok.kind != TOKEN_NUMBER)
        return clrun__gio_fail_expected(p, what);
    if (!clrun__gio_token_real(&p->tok, false, out)) {
        char found[QUOTE_MAX + 16];
        return clrun__gio_fail_at(p, p->tok.line, p->tok.col, CLRUN_ERROR_PARSE, "%s is not a finite number",
                       clrun__gio_describe(&p->tok, found, sizeof found));
    }
    return clrun__gio_advance(p);
}

/* ---- growth ---- */

/* Room for one more element after `count` in an array of *capacity: the array (perhaps moved),
 * or NULL with the old one untouched when memory runs out. */
void *clrun__gio_grow(void *array, int32_t *capacity, int32_t count, size_t size)
{
    size_t room = (size_t)*capacity;
    if (count >= INT32_MAX || !clrun__grow(&array, &room, (size_t)count + 1, size))
        return NULL;
    *capacity = room > INT32_MAX ? INT32_MAX : (int32_t)room;
    return array;
}

clrun_status clrun__gio_out_of_memory(parser *p)
{
    return clrun__gio_fail_at(p, p->tok.line, p->tok.col, CLRUN_ERROR_OUT_OF_HOST_MEMORY,
                   "out of host memory");
}
