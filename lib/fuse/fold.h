/* Constant folding at load (fold_constants.c): nodes whose inputs are all constants, run once on the
 * device with their own kernels, become constants with the values they computed (the same bits
 * as at every run); and batch normalization after a convolution folded into the convolution's
 * weights and bias (fold_bn.c), the one rewrite that changes bits: computed on the host in
 * double, rounded once to f32, within 1e-5 relative of the unfolded run. */
#ifndef CLRUN_LIB_FUSE_FOLD_H
#define CLRUN_LIB_FUSE_FOLD_H

#include <clrun/status.h>

#include "fuse/draft.h"

typedef struct clrun_context clrun_context; /* <clrun/context.h>: no OpenCL in this header */

/* Folds the draft's constant nodes; *folded gets how many. Errors (a failed OpenCL call, host
 * memory) go to ctx. */
clrun_status clrun__fold_constants(clrun_context *ctx, clrun__arena *arena, clrun_graph *draft,
                                   int32_t *folded);

/* Folds every batchnorm (x, scale, bias, mean, var; eps) that reads, alone, the output of a
 * conv2d with constant weights (and bias), every BN parameter a constant, into that conv2d;
 * *folded gets how many. Only when the op `batchnorm` exists. Out of host memory is the only
 * error. The draft needs room for two tensors per fold (clrun__draft_begin's extra_tensors). */
clrun_status clrun__fold_batchnorm(clrun__arena *arena, clrun_graph *draft, int32_t *folded);

/* Folds every dequantized constant weight (mul(sub(cast(q), zero), scale) or mul(cast(q),
 * scale), q a constant of i8 or u8, per tensor or per output channel) that a matmul (a matrix)
 * or a conv2d alone reads into that product (its attribute dequant, fold_dequant.c): the same
 * bits, q resident at its own width. *folded gets how many. Out of host memory is the only
 * error. The draft needs room for two tensors per fold. */
clrun_status clrun__fold_dequantize(clrun__arena *arena, clrun_graph *draft, int32_t *folded);

#endif
