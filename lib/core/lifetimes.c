/* clrun: reader and writer of the buffer-lifetime CSV format (see clrun/lifetimes.h).
 *
 * The reader takes one line at a time, at most LIFETIMES_LINE_MAX bytes, and a line may hold NUL
 * bytes (they make the field non-numeric rather than cutting the line short). Every
 * failure is turned into one `FILE:LINE: message` line; the message texts are part of the
 * interface: tests compare them exactly. */
#define _POSIX_C_SOURCE 200809L

#include <clrun/lifetimes.h>

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define LIFETIMES_HEADER "id,lower,upper,size"
#define LIFETIMES_HEADER_OFFSET "id,lower,upper,size,offset"
#define LIFETIMES_MAX_FIELDS 5
/* Longest line: a row is five 20-digit numbers; a longer one (or /dev/zero, which has no line
 * end at all) is refused before it fills the host's memory. */
#define LIFETIMES_LINE_MAX 4096
/* A bad field is quoted in its message up to this many bytes, then "...". */
#define LIFETIMES_QUOTE_MAX 32

static const char *const field_names[LIFETIMES_MAX_FIELDS] = {"id", "lower", "upper", "size",
                                                              "offset"};

void clrun_lifetimes_init(clrun_lifetimes *list)
{
    if (list)
        memset(list, 0, sizeof *list);
}

void clrun_lifetimes_free(clrun_lifetimes *list)
{
    if (!list)
        return;
    free(list->items);
    clrun_lifetimes_init(list);
}

clrun_status clrun_lifetimes_push(clrun_lifetimes *list, const clrun_lifetime *row)
{
    if (!list || !row)
        return CLRUN_ERROR_INVALID_ARGUMENT;
    if (list->count == list->capacity) {
        size_t capacity = list->capacity ? list->capacity * 2 : 64;
        if (capacity < list->capacity || capacity > SIZE_MAX / sizeof *list->items)
            return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        clrun_lifetime *items = realloc(list->items, capacity * sizeof *items);
        if (!items)
            return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        list->items = items;
        list->capacity = capacity;
    }
    list->items[list->count++] = *row;
    return CLRUN_OK;
}

/* Where the reader is, for messages. */
typedef struct reader {
    const char *filename; /* as given, or "<input>" */
    size_t line;          /* 1-based number of the line being parsed */
    char *err;            /* caller's message buffer; may be NULL */
    size_t errlen;        /* its size */
} reader;

/* Writes "FILE:LINE: " and the formatted message into the caller's buffer; returns status. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static clrun_status fail(const reader *r, clrun_status status, const char *fmt, ...)
{
    if (!r->err || r->errlen == 0)
        return status;
    int used = snprintf(r->err, r->errlen, "%s:%zu: ", r->filename, r->line);
    if (used < 0 || (size_t)used >= r->errlen)
        return status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err + used, r->errlen - (size_t)used, fmt, ap);
    va_end(ap);
    return status;
}

/* A printable, bounded copy of a field for messages: control bytes become '?'. */
static void quote_field(const char *text, size_t len, char out[LIFETIMES_QUOTE_MAX + 4])
{
    size_t shown = len > LIFETIMES_QUOTE_MAX ? LIFETIMES_QUOTE_MAX : len;
    for (size_t i = 0; i < shown; i++) {
        unsigned char c = (unsigned char)text[i];
        out[i] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    if (shown < len) {
        memcpy(out + shown, "...", 3);
        shown += 3;
    }
    out[shown] = '\0';
}

/* Parses one unsigned decimal field; `index` names it in messages. */
static clrun_status parse_field(const reader *r, size_t index, const char *text, size_t len,
                                uint64_t *value)
{
    const char *name = field_names[index];
    char shown[LIFETIMES_QUOTE_MAX + 4];
    if (len == 0)
        return fail(r, CLRUN_ERROR_PARSE, "field '%s' is empty", name);
    quote_field(text, len, shown);
    /* "-" followed by digits is a negative number; anything else with a non-digit is not a
     * number at all. */
    size_t first_digit = (len > 1 && text[0] == '-') ? 1 : 0;
    for (size_t i = first_digit; i < len; i++) {
        if (text[i] < '0' || text[i] > '9')
            return fail(r, CLRUN_ERROR_PARSE,
                        "field '%s' is not an unsigned decimal integer: '%s'", name, shown);
    }
    if (first_digit == 1)
        return fail(r, CLRUN_ERROR_PARSE, "field '%s' is negative: '%s'", name, shown);
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned digit = (unsigned)(text[i] - '0');
        if (v > (UINT64_MAX - digit) / 10)
            return fail(r, CLRUN_ERROR_PARSE, "field '%s' does not fit in 64 bits: '%s'", name,
                        shown);
        v = v * 10 + digit;
    }
    *value = v;
    return CLRUN_OK;
}

/* Length of the line without its line end ("\n", "\r\n", or stray trailing '\r's). */
static size_t content_length(const char *line, size_t len)
{
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
        len--;
    return len;
}

static bool is_blank(const char *line, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (line[i] != ' ' && line[i] != '\t' && line[i] != '\r')
            return false;
    return true;
}

/* Checks the header line; sets *fields to 4 or 5. */
static clrun_status parse_header(const reader *r, const char *line, size_t len, size_t *fields)
{
    /* A UTF-8 byte-order mark is what spreadsheet exports put first; skip it. */
    if (len >= 3 && memcmp(line, "\xEF\xBB\xBF", 3) == 0) {
        line += 3;
        len -= 3;
    }
    if (len == strlen(LIFETIMES_HEADER) && memcmp(line, LIFETIMES_HEADER, len) == 0) {
        *fields = 4;
        return CLRUN_OK;
    }
    if (len == strlen(LIFETIMES_HEADER_OFFSET) && memcmp(line, LIFETIMES_HEADER_OFFSET, len) == 0) {
        *fields = 5;
        return CLRUN_OK;
    }
    return fail(r, CLRUN_ERROR_PARSE,
                "expected the header '" LIFETIMES_HEADER "' or '" LIFETIMES_HEADER_OFFSET "'");
}

/* Parses one data row of `fields` comma-separated fields into *row. */
static clrun_status parse_row(const reader *r, const char *line, size_t len, size_t fields,
                              clrun_lifetime *row)
{
    size_t found = 1;
    for (size_t i = 0; i < len; i++)
        found += line[i] == ',';
    if (found != fields)
        return fail(r, CLRUN_ERROR_PARSE, "expected %zu fields, got %zu", fields, found);

    uint64_t values[LIFETIMES_MAX_FIELDS] = {0};
    size_t start = 0;
    for (size_t f = 0; f < fields; f++) {
        size_t end = start;
        while (end < len && line[end] != ',')
            end++;
        clrun_status st = parse_field(r, f, line + start, end - start, &values[f]);
        if (st != CLRUN_OK)
            return st;
        start = end + 1;
    }
    *row = (clrun_lifetime){.id = values[0], .lower = values[1], .upper = values[2],
                            .size = values[3], .offset = values[4]};
    if (row->upper <= row->lower)
        return fail(r, CLRUN_ERROR_PARSE, "upper (%" PRIu64 ") must be greater than lower (%" PRIu64 ")",
                    row->upper, row->lower);
    if (row->size == 0)
        return fail(r, CLRUN_ERROR_PARSE, "size must be greater than 0");
    return CLRUN_OK;
}

/* One line into line (LIFETIMES_LINE_MAX + 1 bytes), its '\n' kept: its length, or -1 at the end
 * of the stream. A longer line sets *too_long (the rest is not read). */
static ssize_t read_line(FILE *in, char *line, bool *too_long)
{
    size_t n = 0;
    int c;
    while ((c = getc(in)) != EOF) {
        if (n == LIFETIMES_LINE_MAX) {
            *too_long = true;
            return (ssize_t)n;
        }
        line[n++] = (char)c;
        if (c == '\n')
            break;
    }
    if (n == 0 && c == EOF)
        return -1;
    line[n] = '\0';
    return (ssize_t)n;
}

clrun_status clrun_lifetimes_read(FILE *in, const char *filename, clrun_lifetimes *out, char *err,
                                  size_t errlen)
{
    reader r = {.filename = filename ? filename : "<input>", .line = 0, .err = err,
                .errlen = errlen};
    if (err && errlen > 0)
        err[0] = '\0';
    if (!in || !out)
        return CLRUN_ERROR_INVALID_ARGUMENT;
    clrun_lifetimes_init(out);

    char *line = malloc(LIFETIMES_LINE_MAX + 1);
    size_t fields = 0; /* 0 until the header has been read */
    clrun_status st = line ? CLRUN_OK : fail(&r, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    while (st == CLRUN_OK) {
        bool too_long = false;
        ssize_t got = read_line(in, line, &too_long);
        if (got < 0) {
            if (ferror(in))
                st = fail(&r, CLRUN_ERROR_IO, "read error");
            break;
        }
        r.line++;
        if (too_long) {
            st = fail(&r, CLRUN_ERROR_PARSE, "line longer than %d bytes", LIFETIMES_LINE_MAX);
            break;
        }
        size_t len = content_length(line, (size_t)got);
        if (is_blank(line, len))
            continue;
        if (fields == 0) {
            st = parse_header(&r, line, len, &fields);
        } else {
            clrun_lifetime row;
            st = parse_row(&r, line, len, fields, &row);
            if (st == CLRUN_OK && clrun_lifetimes_push(out, &row) != CLRUN_OK)
                st = fail(&r, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
        }
        if (st != CLRUN_OK)
            break;
    }
    free(line);
    if (st == CLRUN_OK && fields == 0) {
        r.line = 1;
        st = fail(&r, CLRUN_ERROR_PARSE, "empty file: expected the header '" LIFETIMES_HEADER "'");
    }
    if (st != CLRUN_OK) {
        clrun_lifetimes_free(out);
        return st;
    }
    out->has_offsets = fields == 5;
    return CLRUN_OK;
}

clrun_status clrun_lifetimes_write(FILE *out, const clrun_lifetime *rows, size_t count,
                                   bool with_offsets)
{
    if (!out || (!rows && count > 0))
        return CLRUN_ERROR_INVALID_ARGUMENT;
    if (fputs(with_offsets ? LIFETIMES_HEADER_OFFSET "\n" : LIFETIMES_HEADER "\n", out) < 0)
        return CLRUN_ERROR_IO;
    for (size_t i = 0; i < count; i++) {
        const clrun_lifetime *row = &rows[i];
        int n = fprintf(out, "%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64, row->id, row->lower,
                        row->upper, row->size);
        if (n >= 0 && with_offsets)
            n = fprintf(out, ",%" PRIu64, row->offset);
        if (n < 0 || fputc('\n', out) == EOF)
            return CLRUN_ERROR_IO;
    }
    return ferror(out) ? CLRUN_ERROR_IO : CLRUN_OK;
}
