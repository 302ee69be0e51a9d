/* The mask of `dropout` (docs/ops.md): which elements it keeps, a pure function of the seed, the
 * stream and the element's row-major index, so that the gradient (dropout of dy with the same
 * seed, ratio and stream) drops the same elements, on any device and on the host. The kernel
 * (kernels/index.cl, clrun_dropout) computes the same bits; the tests hold it to these. */
#ifndef CLRUN_LIB_GRAPH_DROPOUT_MASK_H
#define CLRUN_LIB_GRAPH_DROPOUT_MASK_H

#include <stdbool.h>
#include <stdint.h>

/* The hash of element `index`: splitmix64's mix (core/util.h: z ^= z >> 30,
 * z *= 0xBF58476D1CE4E5B9, z ^= z >> 27, z *= 0x94D049BB133111EB, z ^= z >> 31) of
 * seed + 0x9E3779B97F4A7C15 * (stream + 1) + index, all wrapping. */
uint64_t clrun__dropout_hash(uint64_t seed, int64_t stream, uint64_t index);

/* floor(ratio * 2^32), at most 2^32 - 1 (0 for ratio 0: every element kept). ratio in [0, 1). */
uint32_t clrun__dropout_threshold(double ratio);

/* 1 / (1 - ratio), computed in double and rounded to float once: what kept elements are
 * multiplied by. */
float clrun__dropout_scale(double ratio);

/* Whether dropout keeps element `index`: the hash's high 32 bits >= the threshold. */
bool clrun__dropout_keep(uint64_t seed, int64_t stream, uint64_t index, double ratio);

#endif
