/* splitmix64 for the tests and benchmarks: small, fast, well mixed, and the same numbers on
 * every machine, so a seed printed with a failure replays it. */
#ifndef CLRUN_TESTS_RNG_H
#define CLRUN_TESTS_RNG_H

#include <stdint.h>

/* The next number of the generator whose state is *state. */
static inline uint64_t rng_next(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi] (the modulo bias is irrelevant at the ranges used). */
static inline uint64_t rng_range(uint64_t *state, uint64_t lo, uint64_t hi)
{
    return lo + rng_next(state) % (hi - lo + 1);
}

#endif
