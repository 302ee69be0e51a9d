/* numpy .npy files: "\x93NUMPY", a version, a header length, a Python dict literal
 * {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with spaces to an aligned
 * length and ended by '\n', then the elements in C order. The header is parsed strictly as
 * numpy writes it, one key at a time, so a file either reads exactly or is refused by reason. */
#include <clrun/npy.h>

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/file.h"
#include "core/log.h"
#include "graph/types.h"

typedef struct descr_row {
    const char *descr;
    clrun_dtype dtype;
} descr_row;

static const descr_row descrs[] = {
    {"<f4", CLRUN_F32}, {"<f8", CLRUN_F64}, {"<f2", CLRUN_F16}, {"<i4", CLRUN_I32},
    {"<i8", CLRUN_I64}, {"|b1", CLRUN_BOOL}, {"|i1", CLRUN_I8},  {"|u1", CLRUN_U8},
    {"<i2", CLRUN_I16}, {"<u2", CLRUN_U16},  {"<u4", CLRUN_U32}, {"<u8", CLRUN_U64},
};

CLRUN__PRINTF(5, 6)
static clrun_status fail(clrun_status status, char *err, size_t errlen, const char *name,
                         const char *format, ...)
{
    char text[1024];
    va_list args;
    va_start(args, format);
    vsnprintf(text, sizeof text, format, args);
    va_end(args);
    clrun__error_set(NULL, status, "%s: %s", name, text);
    if (err && errlen)
        snprintf(err, errlen, "%s: %s", name, text);
    return status;
}

/* A cursor over the header text. */
typedef struct cursor {
    const char *p, *end;
} cursor;

static void skip_space(cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t'))
        c->p++;
}

static bool take(cursor *c, char ch)
{
    skip_space(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

/* A quoted Python string (no escapes: numpy's keys and descrs have none) into buf. */
static bool quoted(cursor *c, char *buf, size_t size)
{
    skip_space(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
        return false;
    char q = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' || n + 1 >= size)
            return false;
        buf[n++] = *c->p++;
    }
    if (c->p >= c->end)
        return false;
    c->p++;
    buf[n] = '\0';
    return true;
}

static bool word(cursor *c, const char *w)
{
    skip_space(c);
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) >= n && memcmp(c->p, w, n) == 0) {
        c->p += n;
        return true;
    }
    return false;
}

/* "(2, 3)", "(5,)", "()". */
static bool shape_tuple(cursor *c, clrun_tensor_type *type, bool *empty, bool *too_many)
{
    if (!take(c, '('))
        return false;
    type->rank = 0;
    *empty = *too_many = false;
    skip_space(c);
    while (c->p < c->end && *c->p != ')') {
        if (*c->p < '0' || *c->p > '9')
            return false;
        uint64_t v = 0;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
            if (v > (UINT64_C(1) << 50))
                return false;
            v = v * 10 + (uint64_t)(*c->p++ - '0');
        }
        while (c->p < c->end && *c->p == 'L') /* Python 2 longs */
            c->p++;
        if (type->rank == CLRUN_MAX_DIMS)
            *too_many = true;
        else
            type->shape[type->rank++] = (int64_t)v;
        if (v == 0)
            *empty = true;
        if (!take(c, ','))
            break;
        skip_space(c);
    }
    return take(c, ')');
}

/* The magic, version, header length and header of b[0..size): the type, and the offset where
 * the data starts. */
static clrun_status parse_header(const unsigned char *b, size_t size, const char *name, clrun_tensor_type *type,
                                 size_t *offset, char *err, size_t errlen)
{
    if (size < 10 || memcmp(b, "\x93NUMPY", 6) != 0)
        return fail(CLRUN_ERROR_PARSE, err, errlen, name, "not a .npy file (no \\x93NUMPY magic)");
    unsigned major = b[6];
    size_t header_len, start;
    if (major == 1) {
        header_len = (size_t)b[8] | (size_t)b[9] << 8;
        start = 10;
    } else if (major == 2 || major == 3) {
        if (size < 12)
            return fail(CLRUN_ERROR_PARSE, err, errlen, name, "truncated header");
        header_len = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
        start = 12;
    } else {
        return fail(CLRUN_ERROR_UNSUPPORTED, err, errlen, name, ".npy format version %u.%u is not supported",
                    major, b[7]);
    }
    if (header_len > size - start)
        return fail(CLRUN_ERROR_PARSE, err, errlen, name, "the header of %zu bytes runs past the end", header_len);
    cursor c = {(const char *)b + start, (const char *)b + start + header_len};
    char key[32], descr[32] = "";
    bool have_descr = false, have_order = false, have_shape = false, fortran = false;
    bool empty = false, too_many = false;
    clrun_tensor_type t = {0};
    if (!take(&c, '{'))
        return fail(CLRUN_ERROR_PARSE, err, errlen, name, "the header is not a dict");
    while (!take(&c, '}')) {
        if (!quoted(&c, key, sizeof key) || !take(&c, ':'))
            return fail(CLRUN_ERROR_PARSE, err, errlen, name, "malformed header");
        if (strcmp(key, "descr") == 0) {
            skip_space(&c);
            if (c.p < c.end && *c.p == '[')
                return fail(CLRUN_ERROR_UNSUPPORTED, err, errlen, name, "structured arrays are not supported");
            if (!quoted(&c, descr, sizeof descr))
                return fail(CLRUN_ERROR_PARSE, err, errlen, name, "malformed descr");
            have_descr = true;
        } else if (strcmp(key, "fortran_order") == 0) {
            if (word(&c, "True"))
                fortran = true;
            else if (!word(&c, "False"))
                return fail(CLRUN_ERROR_PARSE, err, errlen, name, "fortran_order is neither True nor False");
            have_order = true;
        } else if (strcmp(key, "shape") == 0) {
            if (!shape_tuple(&c, &t, &empty, &too_many))
                return fail(CLRUN_ERROR_PARSE, err, errlen, name, "malformed shape");
            have_shape = true;
        } else {
            return fail(CLRUN_ERROR_PARSE, err, errlen, name, "unknown header key '%s'", key);
        }
        if (!take(&c, ',')) {
            if (!take(&c, '}'))
                return fail(CLRUN_ERROR_PARSE, err, errlen, name, "malformed header");
            break;
        }
    }
    if (!have_descr || !have_order || !have_shape)
        return fail(CLRUN_ERROR_PARSE, err, errlen, name, "the header lacks descr, fortran_order or shape");
    bool found = false;
    for (size_t i = 0; i < sizeof descrs / sizeof descrs[0]; i++)
        if (strcmp(descrs[i].descr, descr) == 0) {
            t.dtype = descrs[i].dtype;
            found = true;
        }
    /* A byte-sized dtype may say '<' or '=' instead of the '|' numpy writes. */
    for (size_t i = 0; !found && i < sizeof descrs / sizeof descrs[0]; i++)
        if (descrs[i].descr[0] == '|' && (descr[0] == '<' || descr[0] == '=') &&
            strcmp(descrs[i].descr + 1, descr + 1) == 0) {
            t.dtype = descrs[i].dtype;
            found = true;
        }
    if (!found) {
        if (descr[0] == '>')
            return fail(CLRUN_ERROR_UNSUPPORTED, err, errlen, name, "big-endian data ('%s') is not supported", descr);
        if (strchr(descr, 'O'))
            return fail(CLRUN_ERROR_UNSUPPORTED, err, errlen, name, "object arrays are not supported");
        return fail(CLRUN_ERROR_UNSUPPORTED, err, errlen, name,
                    "dtype '%s' is not supported (f32 <f4, f64 <f8, f16 <f2, i8 |i1, u8 |u1, "
                    "i16 <i2, u16 <u2, i32 <i4, u32 <u4, i64 <i8, u64 <u8, bool |b1 are)", descr);
    }
    if (fortran)
        return fail(CLRUN_ERROR_UNSUPPORTED, err, errlen, name, "Fortran-order arrays are not supported (save with C order)");
    if (too_many)
        return fail(CLRUN_ERROR_UNSUPPORTED, err, errlen, name, "more than %d dimensions", CLRUN_MAX_DIMS);
    /* an empty array (a dimension 0) is read: no data, a type of 0 bytes (clrun_tensor_empty) */
    if (empty && !clrun_tensor_empty(&t))
        return fail(CLRUN_ERROR_UNSUPPORTED, err, errlen, name, "the empty array's shape is not supported");
    if (!empty && clrun_tensor_bytes(&t) == 0)
        return fail(CLRUN_ERROR_UNSUPPORTED, err, errlen, name, "the array is too large");
    *type = t;
    *offset = start + header_len;
    return CLRUN_OK;
}

/* What the header of a file that starts with b[0..size) spans (magic, version, length and
 * header); size itself when the prefix says nothing (the parse then says what is wrong). */
static uint64_t header_extent(const unsigned char *b, size_t size)
{
    if (size < 10 || memcmp(b, "\x93NUMPY", 6) != 0)
        return size;
    if (b[6] == 1)
        return 10 + ((uint64_t)b[8] | (uint64_t)b[9] << 8);
    if ((b[6] == 2 || b[6] == 3) && size >= 12)
        return 12 + ((uint64_t)b[8] | (uint64_t)b[9] << 8 | (uint64_t)b[10] << 16 | (uint64_t)b[11] << 24);
    return size;
}

/* Bool data as 0 or 1: numpy stores 0/1, but be exact about what the device sees. */
static void normalise(const clrun_tensor_type *t, unsigned char *data, uint64_t nbytes)
{
    if (t->dtype == CLRUN_BOOL)
        for (uint64_t i = 0; i < nbytes; i++)
            data[i] = data[i] != 0;
}

clrun_status clrun_npy_parse(const void *bytes, size_t size, const char *name, clrun_tensor_type *type,
                             void **data, char *err, size_t errlen)
{
    const unsigned char *b = bytes;
    name = name ? name : "<npy>";
    if (data)
        *data = NULL;
    if (!type || !data || (!bytes && size))
        return fail(CLRUN_ERROR_INVALID_ARGUMENT, err, errlen, name, "no file, type or data");
    clrun_tensor_type t;
    size_t offset;
    clrun_status s = parse_header(b, size, name, &t, &offset, err, errlen);
    if (s != CLRUN_OK)
        return s;
    uint64_t nbytes = clrun_tensor_bytes(&t);
    if (size - offset != nbytes)
        return fail(CLRUN_ERROR_PARSE, err, errlen, name, "%zu bytes of data for a shape of %" PRIu64 " bytes",
                    size - offset, nbytes);
    void *copy = malloc((size_t)nbytes + !nbytes); /* an empty array: a valid pointer all the same */
    if (copy == NULL)
        return fail(CLRUN_ERROR_OUT_OF_HOST_MEMORY, err, errlen, name, "out of host memory");
    memcpy(copy, b + offset, (size_t)nbytes);
    normalise(&t, copy, nbytes);
    *type = t;
    *data = copy;
    return CLRUN_OK;
}

/* Largest header read: numpy writes a few hundred bytes (and reads at most 10,000 by default). */
#define MAX_HEADER ((uint64_t)1 << 20)

clrun_status clrun_npy_load(const char *path, clrun_tensor_type *type, void **data, char *err,
                            size_t errlen)
{
    if (data)
        *data = NULL;
    if (path == NULL || !type || !data)
        return fail(CLRUN_ERROR_INVALID_ARGUMENT, err, errlen, path ? path : "<npy>", "no path, type or data");
    /* A regular file only (never a FIFO or a device such as /dev/zero, which could block or never
     * end), read no further than its header declares: the header, then exactly the data. */
    char why[1024];
    clrun_status s = CLRUN_OK;
    uint64_t size = 0;
    int fd = clrun__file_open(path, &size, &s, why, sizeof why);
    if (fd < 0)
        return fail(s, err, errlen, path, "%s", why);
    unsigned char prefix[12], *head = NULL, *copy = NULL;
    size_t got = size < sizeof prefix ? (size_t)size : sizeof prefix;
    uint64_t extent = 0, nbytes = 0;
    size_t offset = 0;
    clrun_tensor_type t;
    if (!clrun__file_read_at(fd, prefix, got, 0)) {
        s = fail(CLRUN_ERROR_IO, err, errlen, path, "cannot read");
        goto done;
    }
    extent = header_extent(prefix, got);
    if (extent > MAX_HEADER) {
        s = fail(CLRUN_ERROR_UNSUPPORTED, err, errlen, path, "a header of %" PRIu64 " bytes (at most %" PRIu64 ")",
                 extent, MAX_HEADER);
        goto done;
    }
    if (extent > size)
        extent = size; /* the parse says that the header runs past the end */
    if ((head = malloc((size_t)extent + 1)) == NULL) {
        s = fail(CLRUN_ERROR_OUT_OF_HOST_MEMORY, err, errlen, path, "out of host memory");
        goto done;
    }
    if (!clrun__file_read_at(fd, head, extent, 0)) {
        s = fail(CLRUN_ERROR_IO, err, errlen, path, "cannot read");
        goto done;
    }
    if ((s = parse_header(head, (size_t)extent, path, &t, &offset, err, errlen)) != CLRUN_OK)
        goto done;
    nbytes = clrun_tensor_bytes(&t);
    if (size - offset != nbytes) {
        s = fail(CLRUN_ERROR_PARSE, err, errlen, path, "%" PRIu64 " bytes of data for a shape of %" PRIu64 " bytes",
                 size - offset, nbytes);
        goto done;
    }
    if (nbytes >= SIZE_MAX || (copy = malloc((size_t)nbytes + !nbytes)) == NULL) {
        s = fail(CLRUN_ERROR_OUT_OF_HOST_MEMORY, err, errlen, path, "out of host memory");
        goto done;
    }
    if (!clrun__file_read_at(fd, copy, nbytes, offset)) {
        s = fail(CLRUN_ERROR_IO, err, errlen, path, "cannot read");
        free(copy);
        goto done;
    }
    normalise(&t, copy, nbytes);
    *type = t;
    *data = copy;
done:
    free(head);
    close(fd);
    return s;
}

clrun_status clrun_npy_save(const char *path, const clrun_tensor_type *type, const void *data,
                            char *err, size_t errlen)
{
    const char *descr = NULL;
    for (size_t i = 0; type && i < sizeof descrs / sizeof descrs[0]; i++)
        if (descrs[i].dtype == type->dtype)
            descr = descrs[i].descr;
    uint64_t bytes = type ? clrun_tensor_bytes(type) : 0;
    if (path && type && type->dtype == CLRUN_BF16)
        return fail(CLRUN_ERROR_UNSUPPORTED, err, errlen, path,
                    "a bf16 tensor has no .npy type (numpy has no bfloat16): cast it to f32");
    if (!path || !descr || (bytes == 0 && !clrun_tensor_empty(type)) || (!data && bytes))
        return fail(CLRUN_ERROR_INVALID_ARGUMENT, err, errlen, path ? path : "<npy>", "no valid tensor to write");
    char header[256];
    int len = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    /* "(5,)" for one dimension, as numpy writes it; "(2, 3)" for more; "()" for a scalar. */
    for (int d = 0; d < type->rank; d++)
        len += snprintf(header + len, sizeof header - (size_t)len, "%" PRId64 "%s", type->shape[d],
                        type->rank == 1 ? "," : d + 1 < type->rank ? ", " : "");
    len += snprintf(header + len, sizeof header - (size_t)len, "), }");
    /* Spaces then '\n', so that magic + version + length + header is a multiple of 64. */
    int total = 10 + len + 1;
    int pad = (64 - total % 64) % 64;
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return fail(CLRUN_ERROR_IO, err, errlen, path, "cannot write: %s", strerror(errno));
    unsigned hl = (unsigned)(len + pad + 1);
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hl & 0xFF),
                             (unsigned char)(hl >> 8)};
    bool ok = fwrite(pre, 1, 10, f) == 10 && fwrite(header, 1, (size_t)len, f) == (size_t)len;
    for (int i = 0; ok && i < pad; i++)
        ok = fputc(' ', f) != EOF;
    ok = ok && fputc('\n', f) != EOF && fwrite(data, 1, (size_t)bytes, f) == bytes;
    ok = fclose(f) == 0 && ok;
    if (!ok)
        return fail(CLRUN_ERROR_IO, err, errlen, path, "cannot write: %s", strerror(errno));
    return CLRUN_OK;
}
