/* clrun: the CLRUN_* environment variables, as a program can list and check them, and the
 * parsers their values go through, so that a tool accepts sizes and booleans the way the
 * library does. */
#ifndef CLRUN_OPTIONS_H
#define CLRUN_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <clrun/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One variable: what it accepts, its default and its current value from the environment. */
typedef struct clrun_option_info {
    const char *name;     /* "CLRUN_ALLOCATOR" */
    const char *accepted; /* "buddy|slab|bump|naive|planned" */
    const char *fallback; /* the default, as text ("" for none) */
    const char *help;     /* one line */
    const char *value;    /* the environment's value, or NULL when unset */
    bool valid;           /* unset, or a value the library accepts */
    char problem[512];    /* when not valid: why, naming the variable and what it accepts */
} clrun_option_info;

/* How many variables there are. */
size_t clrun_option_count(void);

/* Fills *out for the i-th variable; CLRUN_ERROR_INVALID_ARGUMENT past the end or for NULL. */
clrun_status clrun_option_get(size_t i, clrun_option_info *out);

/* The value parsers of the variables: booleans (1/0/true/false/yes/no/on/off, any case) and
 * sizes (bytes with an optional K/M/G/T suffix, binary multiples, optional trailing B or iB).
 * False, with *out unchanged, for text they do not accept; false for a NULL text or out. */
bool clrun_parse_bool(const char *text, bool *out);
bool clrun_parse_size(const char *text, uint64_t *out);

/* True when `name` is a value CLRUN_ALLOCATOR and the context's allocator option accept: a
 * strategy (clrun_strategy_names(), any case), "naive" or "planned". */
bool clrun_allocator_valid(const char *name);

/* Every accepted allocator value, '|'-separated ("buddy|slab|bump|naive|planned"). */
const char *clrun_allocator_names(void);

/* Bytes as every clrun message writes them: "512 B", "1.50 MiB". buf gets at least 32 bytes;
 * returns buf. */
const char *clrun_format_bytes(uint64_t bytes, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif
