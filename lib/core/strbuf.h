/* A growing string for generated text (OpenCL C, labels). Appends never fail loudly: a failed
 * allocation marks the buffer failed, later appends do nothing, and the owner checks `failed`
 * once at the end. */
#ifndef CLRUN_LIB_CORE_STRBUF_H
#define CLRUN_LIB_CORE_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

#include "core/log.h" /* CLRUN__PRINTF */

typedef struct clrun__strbuf {
    char *data;      /* NUL-terminated once anything was appended; NULL before */
    size_t length;   /* bytes before the NUL */
    size_t capacity; /* bytes allocated */
    bool failed;     /* an allocation failed: the text is incomplete */
} clrun__strbuf;

/* Appends formatted text. */
void clrun__strbuf_printf(clrun__strbuf *b, const char *format, ...) CLRUN__PRINTF(2, 3);

/* Appends `length` bytes of text. */
void clrun__strbuf_append(clrun__strbuf *b, const char *text, size_t length);

/* Hands the text to the caller (free() it; "" when nothing was appended, NULL when failed) and
 * empties the buffer. */
char *clrun__strbuf_take(clrun__strbuf *b);

/* Frees the text. */
void clrun__strbuf_free(clrun__strbuf *b);

#endif
