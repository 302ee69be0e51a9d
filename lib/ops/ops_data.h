/* What the kernels of the ops that move elements of any dtype share (lib/ops/ops_layout.c,
 * ops_index.c, ops_resize.c): their kernels come in one version per element size, named
 * PREFIX_u8, _u16, _u32, _u64 (then, for ops with indices, _i32 or _i64). Defined in
 * ops_layout.c. */
#ifndef CLRUN_LIB_OPS_DATA_H
#define CLRUN_LIB_OPS_DATA_H

#include "ops/ops_internal.h"

/* "u8", "u16", "u32" or "u64": the version for elements of `dtype`. */
const char *clrun__element_suffix(clrun_dtype dtype);

/* Creates kernel "PREFIX_uN" (with "_" index_suffix after it when not NULL) for elements of
 * `dtype` into *out. */
clrun_status clrun__element_kernel(clrun_context *ctx, const char *prefix, clrun_dtype dtype,
                                   const char *index_suffix, cl_kernel *out);

/* Makes st's launch 1-D over n work-items, rounded up to a work-group size that st->kernel
 * (created already) allows. */
clrun_status clrun__flat_launch(clrun_context *ctx, clrun__kernel_state *st, uint64_t n);

/* The name of a kernel for elements of `dtype`: "PREFIX_uN[_index_suffix]" into buf. */
void clrun__element_kernel_name(const char *prefix, clrun_dtype dtype, const char *index_suffix,
                                char *buf, size_t size);

#endif
