/* Checked integer arithmetic: the one set of helpers for sums and products of sizes, counts and
 * attribute values that come from a model or a user (never trusted to be small). Each stores the
 * exact result in *out and returns true, or returns false on overflow (*out is then
 * unspecified). Built on the compiler's __builtin_*_overflow (gcc >= 5, clang >= 3.8). */
#ifndef CLRUN_LIB_CORE_CHECKED_H
#define CLRUN_LIB_CORE_CHECKED_H

#include <stdbool.h>
#include <stdint.h>

static inline bool clrun__add_i64(int64_t a, int64_t b, int64_t *out) { return !__builtin_add_overflow(a, b, out); }
static inline bool clrun__sub_i64(int64_t a, int64_t b, int64_t *out) { return !__builtin_sub_overflow(a, b, out); }
static inline bool clrun__mul_i64(int64_t a, int64_t b, int64_t *out) { return !__builtin_mul_overflow(a, b, out); }
static inline bool clrun__add_u64(uint64_t a, uint64_t b, uint64_t *out) { return !__builtin_add_overflow(a, b, out); }
static inline bool clrun__mul_u64(uint64_t a, uint64_t b, uint64_t *out) { return !__builtin_mul_overflow(a, b, out); }

/* The product of dims[0..count) (each >= 0) as a signed count; false when it exceeds INT64_MAX. */
static inline bool clrun__product_i64(const int64_t *dims, int count, int64_t *out)
{
    int64_t p = 1;
    for (int i = 0; i < count; i++)
        if (!clrun__mul_i64(p, dims[i], &p))
            return false;
    *out = p;
    return true;
}

/* a + b, clamped to [INT64_MIN, INT64_MAX] instead of wrapping: for indices that are clamped to
 * a range anyway (ONNX's Slice ends, Trilu's diagonal), where saturating gives the same answer. */
static inline int64_t clrun__add_sat_i64(int64_t a, int64_t b)
{
    int64_t r;
    if (clrun__add_i64(a, b, &r))
        return r;
    return b > 0 ? INT64_MAX : INT64_MIN;
}

/* a * b, clamped the same way. */
static inline int64_t clrun__mul_sat_i64(int64_t a, int64_t b)
{
    int64_t r;
    if (clrun__mul_i64(a, b, &r))
        return r;
    return (a < 0) != (b < 0) ? INT64_MIN : INT64_MAX;
}

#endif
