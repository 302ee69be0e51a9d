/* What the graph tests (tests/test_grad.c, tests/test_graph_reference.c) share to build random
 * cases: numbers drawn from a seed, tensor values in any dtype as doubles, random shapes. */
#ifndef CLRUN_TESTS_GRAPH_CASE_H
#define CLRUN_TESTS_GRAPH_CASE_H

#include <stdint.h>
#include <string.h>

#include <clrun/clrun.h>

#include "rng.h"

/* 0 to n - 1. */
static inline int pick(uint64_t *rng, int n) { return (int)(rng_next(rng) % (uint64_t)n); }

/* lo to hi, both included. */
static inline int64_t between(uint64_t *rng, int64_t lo, int64_t hi)
{
    return lo + (int64_t)(rng_next(rng) % (uint64_t)(hi - lo + 1));
}

/* Uniform in [lo, hi), 53 bits. */
static inline double uniform(uint64_t *rng, double lo, double hi)
{
    return lo + (hi - lo) * (double)(rng_next(rng) >> 11) / 9007199254740992.0;
}

/* v as one element of dtype at `at` (f32, f64, i32, i64, bool); false for another dtype. */
static inline bool value_store(clrun_dtype dtype, double v, unsigned char *at)
{
    switch (dtype) {
    case CLRUN_F32: { float f = (float)v; memcpy(at, &f, 4); return true; }
    case CLRUN_F64: memcpy(at, &v, 8); return true;
    case CLRUN_I32: { int32_t i = (int32_t)v; memcpy(at, &i, 4); return true; }
    case CLRUN_I64: { int64_t i = (int64_t)v; memcpy(at, &i, 8); return true; }
    case CLRUN_BOOL: *at = v != 0; return true;
    default: return false;
    }
}

/* The element of dtype at `at` as a double; NaN for a dtype value_store does not take. */
static inline double value_load(clrun_dtype dtype, const unsigned char *at)
{
    switch (dtype) {
    case CLRUN_F32: { float f; memcpy(&f, at, 4); return f; }
    case CLRUN_F64: { double d; memcpy(&d, at, 8); return d; }
    case CLRUN_I32: { int32_t i; memcpy(&i, at, 4); return i; }
    case CLRUN_I64: { int64_t i; memcpy(&i, at, 8); return (double)i; }
    case CLRUN_BOOL: return *at != 0;
    default: return __builtin_nan("");
    }
}

/* A shape of rank min_rank to max_rank, each dimension 1 to max_dim. */
static inline clrun_tensor_type random_type(uint64_t *rng, clrun_dtype dtype, int min_rank,
                                            int max_rank, int max_dim)
{
    clrun_tensor_type t = {dtype, (int)between(rng, min_rank, max_rank), {0}};
    for (int d = 0; d < t.rank; d++)
        t.shape[d] = between(rng, 1, max_dim);
    return t;
}

/* A shape that broadcasts to `out`: right-aligned, fewer dims or dims of 1 (often the full
 * rank). */
static inline clrun_tensor_type broadcastable(uint64_t *rng, const clrun_tensor_type *out,
                                              clrun_dtype dtype)
{
    clrun_tensor_type t = {dtype, (int)between(rng, 0, out->rank), {0}};
    if (pick(rng, 2))
        t.rank = out->rank;
    for (int d = 0; d < t.rank; d++)
        t.shape[d] = pick(rng, 3) == 0 ? 1 : out->shape[out->rank - t.rank + d];
    return t;
}

#endif
