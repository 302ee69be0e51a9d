/* The growing string of strbuf.h. */
#include "core/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for `extra` more bytes and the NUL. */
static bool reserve(clrun__strbuf *b, size_t extra)
{
    if (b->failed)
        return false;
    if (b->length + extra + 1 <= b->capacity)
        return true;
    size_t capacity = b->capacity ? b->capacity : 256;
    while (capacity < b->length + extra + 1) {
        if (capacity > ((size_t)-1) / 2) {
            b->failed = true;
            return false;
        }
        capacity *= 2;
    }
    char *grown = realloc(b->data, capacity);
    if (grown == NULL) {
        b->failed = true;
        return false;
    }
    b->data = grown;
    b->capacity = capacity;
    return true;
}

void clrun__strbuf_append(clrun__strbuf *b, const char *text, size_t length)
{
    if (!reserve(b, length))
        return;
    memcpy(b->data + b->length, text, length);
    b->length += length;
    b->data[b->length] = '\0';
}

void clrun__strbuf_printf(clrun__strbuf *b, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    int n = vsnprintf(NULL, 0, format, args);
    va_end(args);
    if (n < 0) {
        b->failed = true;
        return;
    }
    if (!reserve(b, (size_t)n))
        return;
    va_start(args, format);
    vsnprintf(b->data + b->length, (size_t)n + 1, format, args);
    va_end(args);
    b->length += (size_t)n;
}

char *clrun__strbuf_take(clrun__strbuf *b)
{
    char *text = NULL;
    if (!b->failed)
        text = b->data ? b->data : calloc(1, 1);
    else
        free(b->data);
    *b = (clrun__strbuf){NULL, 0, 0, false};
    return text;
}

void clrun__strbuf_free(clrun__strbuf *b)
{
    free(b->data);
    *b = (clrun__strbuf){NULL, 0, 0, false};
}
