/* Small utilities every area uses, each with one home: bit tests, the project's one
 * pseudo-random generator, a monotonic clock, byte counts in words, and array growth. */
#ifndef CLRUN_LIB_CORE_UTIL_H
#define CLRUN_LIB_CORE_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

static inline bool clrun__is_power_of_two(uint64_t x) { return x && !(x & (x - 1)); }

/* splitmix64 (Steele, Lea, Flood 2014): a small, fast, well-mixed generator with the same
 * output on every platform; *state advances by the golden gamma each draw. */
#define CLRUN__GOLDEN_GAMMA 0x9E3779B97F4A7C15ull
static inline uint64_t clrun__splitmix64_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static inline uint64_t clrun__splitmix64(uint64_t *state)
{
    return clrun__splitmix64_mix(*state += CLRUN__GOLDEN_GAMMA);
}

/* Seconds on CLOCK_MONOTONIC. */
double clrun__now(void);

/* malloc for a block that is about to be written whole (a model's weights): from 2 MiB up,
 * aligned to 2 MiB and advised for transparent huge pages where the system has them (Linux's
 * THP in `madvise` or `always` mode), so that filling it takes a page fault per 2 MiB rather
 * than per 4 KiB. Freed with free(); NULL when out of memory. */
void *clrun__alloc_filled_whole(size_t size);

/* Bytes in the one unit style of every message: "512 B", "1.50 MiB" (binary multiples). buf
 * gets at least CLRUN__BYTES_TEXT bytes; returns buf. */
#define CLRUN__BYTES_TEXT 32
const char *clrun__format_bytes(uint64_t bytes, char *buf, size_t size);

/* Numbers read and written in the C locale whatever the program's locale says (the text
 * formats must read back everywhere): enter switches this thread's numeric locale, leave
 * restores it. */
#include <locale.h>
typedef struct clrun__c_numeric {
    locale_t c, previous;
} clrun__c_numeric;
clrun__c_numeric clrun__c_numeric_enter(void);
void clrun__c_numeric_leave(clrun__c_numeric scope);

/* Makes room for `needed` elements of `size` bytes in *array (capacity *capacity), growing
 * geometrically. False, with *array unchanged, when memory runs out or the size overflows. */
bool clrun__grow(void **array, size_t *capacity, size_t needed, size_t size);

#endif
