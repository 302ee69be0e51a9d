/* One kernel's program cut out of a file of kernels (see subset.h). */
#include "device/subset.h"

#include <string.h>

static bool name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* If the line at text[i] declares a kernel, its name's start and length; else 0. */
static size_t kernel_at(const char *text, size_t length, size_t i, size_t *name)
{
    size_t j = i;
    while (j < length && (text[j] == ' ' || text[j] == '\t'))
        j++;
    if (length - j >= 2 && text[j] == '_' && text[j + 1] == '_')
        j += 2;
    static const char *const words[] = {"kernel", "void"};
    for (int w = 0; w < 2; w++) {
        size_t n = strlen(words[w]);
        if (length - j < n + 1 || memcmp(text + j, words[w], n) != 0 ||
            (text[j + n] != ' ' && text[j + n] != '\t' && text[j + n] != '\n'))
            return 0;
        j += n;
        /* `__kernel` may stand on a line of its own, `void NAME(` on the next */
        while (j < length && (text[j] == ' ' || text[j] == '\t' || (w == 0 && text[j] == '\n')))
            j++;
    }
    size_t start = j;
    while (j < length && name_char(text[j]))
        j++;
    if (j == start || (text[start] >= '0' && text[start] <= '9'))
        return 0;
    *name = start;
    return j - start;
}

/* The index just past the brace that closes the body that starts after `from`, skipping
 * comments; 0 when it does not close. */
static size_t body_end(const char *text, size_t length, size_t from)
{
    int depth = 0;
    bool opened = false;
    for (size_t i = from; i < length; i++) {
        if (text[i] == '/' && i + 1 < length && text[i + 1] == '/') {
            while (i < length && text[i] != '\n')
                i++;
        } else if (text[i] == '/' && i + 1 < length && text[i + 1] == '*') {
            const char *end = NULL;
            for (size_t k = i + 2; k + 1 < length; k++)
                if (text[k] == '*' && text[k + 1] == '/') {
                    end = text + k;
                    break;
                }
            if (end == NULL)
                return 0;
            i = (size_t)(end - text) + 1;
        } else if (text[i] == '{') {
            depth++;
            opened = true;
        } else if (text[i] == '}') {
            if (--depth < 0)
                return 0;
            if (depth == 0 && opened)
                return i + 1;
        } else if (text[i] == ';' && !opened) {
            return 0; /* a declaration without a body */
        }
    }
    return 0;
}

bool clrun__kernel_subset(const char *text, size_t length, const char *keep, char *out)
{
    memcpy(out, text, length);
    out[length] = '\0';
    size_t keep_length = strlen(keep);
    bool found = false;
    bool in_comment = false; /* inside a block comment at the start of the line */
    size_t attributes = length; /* where the lines of attributes just above the line start */
    size_t i = 0;
    while (i < length) {
        size_t line_end = i;
        while (line_end < length && text[line_end] != '\n')
            line_end++;
        size_t name = 0, n = in_comment ? 0 : kernel_at(text, length, i, &name);
        size_t next = line_end + (line_end < length);
        if (n > 0) {
            if (n == keep_length && memcmp(text + name, keep, n) == 0) {
                found = true;
            } else {
                size_t end = body_end(text, length, name + n);
                if (end == 0)
                    return false;
                for (size_t k = attributes < i ? attributes : i; k < end; k++)
                    if (out[k] != '\n')
                        out[k] = ' ';
                next = end;
            }
            attributes = length;
        } else {
            size_t j = i;
            while (j < line_end && (text[j] == ' ' || text[j] == '\t'))
                j++;
            bool attribute = !in_comment && line_end - j >= 13 && memcmp(text + j, "__attribute__", 13) == 0;
            if (!attribute)
                attributes = length;
            else if (attributes == length)
                attributes = i; /* a kernel's attributes go with it */
            /* track block comments that span lines, so that a commented-out kernel is left */
            for (size_t k = i; k < line_end; k++) {
                if (!in_comment && text[k] == '/' && k + 1 < line_end && text[k + 1] == '/')
                    break;
                if (!in_comment && text[k] == '/' && k + 1 < line_end && text[k + 1] == '*') {
                    in_comment = true;
                    k++;
                } else if (in_comment && text[k] == '*' && k + 1 < line_end && text[k + 1] == '/') {
                    in_comment = false;
                    k++;
                }
            }
        }
        i = next;
    }
    return found;
}
