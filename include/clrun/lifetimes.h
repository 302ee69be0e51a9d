/* clrun: the buffer-lifetime CSV format of published memory-planner benchmarks.
 *
 * One buffer per line, alive over the half-open interval [lower, upper):
 *
 *     id,lower,upper,size
 *     0,0,3,1024
 *     1,2,5,4096
 *
 * The header is exactly `id,lower,upper,size`, or `id,lower,upper,size,offset` for a file that
 * also carries a plan (then every row has the fifth field). Fields are unsigned decimal integers
 * that fit in 64 bits: digits only, no sign, no spaces, no quotes. Every row needs
 * upper > lower and size > 0. Ids are kept as read and need not be unique or sorted.
 *
 * Accepted leniencies: CRLF line ends, a missing newline at the end, a UTF-8 byte-order mark
 * before the header, and blank lines (empty, or only spaces, tabs or '\r'), which are skipped
 * and still counted so that line numbers match an editor's. A header with no rows is a valid
 * empty list; a file without even a header is an error.
 *
 * The reader is shared by `clrun plan --csv` and `clrun replay`. */
#ifndef CLRUN_LIFETIMES_H
#define CLRUN_LIFETIMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <clrun/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One row of the file. */
typedef struct clrun_lifetime {
    uint64_t id;     /* the row's id, as written */
    uint64_t lower;  /* first moment the buffer is alive */
    uint64_t upper;  /* first moment it is dead again; > lower */
    uint64_t size;   /* bytes; > 0 */
    uint64_t offset; /* byte offset of a plan; 0 when the file has no offset column */
} clrun_lifetime;

/* A growable array of rows. Zero-initialise it (or call clrun_lifetimes_init) before use and
 * release it with clrun_lifetimes_free. */
typedef struct clrun_lifetimes {
    clrun_lifetime *items; /* rows in file order */
    size_t count;          /* rows in use */
    size_t capacity;       /* rows allocated */
    bool has_offsets;      /* the file had the `offset` column */
} clrun_lifetimes;

/* Makes *list empty without allocating. */
void clrun_lifetimes_init(clrun_lifetimes *list);

/* Frees the rows and leaves *list empty; NULL and an empty list are accepted. */
void clrun_lifetimes_free(clrun_lifetimes *list);

/* Appends a copy of *row, growing the array geometrically. CLRUN_ERROR_OUT_OF_HOST_MEMORY
 * (list unchanged) when memory runs out, CLRUN_ERROR_INVALID_ARGUMENT for NULL arguments. */
clrun_status clrun_lifetimes_push(clrun_lifetimes *list, const clrun_lifetime *row);

/* Reads a whole CSV stream into *out, which must be empty (initialised) on entry.
 *
 * `filename` is used only in messages (NULL reads as "<input>"). On malformed input the answer
 * is CLRUN_ERROR_PARSE and `err` holds exactly one line, without a trailing newline, of the
 * form `FILE:LINE: message` (LINE counts from 1; the header is line 1). CLRUN_ERROR_IO when the
 * stream reports a read error, CLRUN_ERROR_OUT_OF_HOST_MEMORY when memory runs out (both with a
 * message in `err` too), CLRUN_ERROR_INVALID_ARGUMENT for NULL in/out. On any error *out is
 * left empty, with nothing allocated. `err` may be NULL or errlen 0 when no message is wanted;
 * a long message is truncated to fit errlen. */
clrun_status clrun_lifetimes_read(FILE *in, const char *filename, clrun_lifetimes *out, char *err,
                                  size_t errlen);

/* Writes `count` rows as CSV with the header; with `with_offsets` the header and every row get
 * the fifth `offset` column. What it writes reads back to the same rows. CLRUN_ERROR_IO when the
 * stream reports an error, CLRUN_ERROR_INVALID_ARGUMENT for a NULL stream, or NULL rows with
 * count > 0. */
clrun_status clrun_lifetimes_write(FILE *out, const clrun_lifetime *rows, size_t count,
                                   bool with_offsets);

#ifdef __cplusplus
}
#endif
#endif
