/* OpenCL C generated from the elementwise table (graph/elementwise.h): the function that computes
 * one element of an op, and the programs of unfused kernels built from it. The fused kernels of
 * lib/fuse/ call the same functions, so both compute every op with the same operations. Text
 * generation only: no OpenCL call is made here. */
#ifndef CLRUN_LIB_OPS_EW_SOURCE_H
#define CLRUN_LIB_OPS_EW_SOURCE_H

#include <stdbool.h>

#include "core/strbuf.h"
#include "graph/elementwise.h"

/* The OpenCL C type of a dtype's elements: float, double, int, long, uchar, char, ushort, ... */
const char *clrun__cl_type(clrun_dtype dtype);

/* The start of every generated elementwise program: FP_CONTRACT OFF, fp64 where the device has
 * it, and the shared functions of kernels/ew_functions.cl. */
void clrun__ew_emit_prelude(clrun__strbuf *b, bool fp64);

/* The element function of def over data dtype `data` giving `result` (they differ for
 * comparisons and casts): "ew_gelu_f32", "ew_cast_i64_f32". Its parameters are the inputs (the
 * condition first for where, as uchar) then the op's parameters, of the data dtype. */
void clrun__ew_function_name(const clrun__ew_def *def, clrun_dtype data, clrun_dtype result,
                             char *buf, size_t size);
void clrun__ew_emit_function(clrun__strbuf *b, const clrun__ew_def *def, clrun_dtype data,
                             clrun_dtype result);

/* Whether def's f32 element function may run on float vectors as its expression is written
 * (clrun__ew_emit_vector_function): unary or binary arithmetic, comparisons, selects, CLIP and
 * clrun's own EXP and TANH, which act lane by lane as on one float, so a vector gives each lane
 * the scalar function's bits. The ops of convolutions' activations: relu, leaky_relu,
 * hard_sigmoid, hard_swish, clip, neg, abs, scale, add, sub, mul, sigmoid, exp, tanh, gelu. */
bool clrun__ew_on_vectors(const clrun__ew_def *def);

/* The f32 element function of def (clrun__ew_on_vectors) over floatN, lanes 8 or 16:
 * "ew_relu_f32_v16(const float16 x)", its parameters floats as the scalar one's. Calls the
 * vector helpers (clrun__ew_emit_vector_helpers), which the program must hold once before. */
void clrun__ew_emit_vector_function(clrun__strbuf *b, const clrun__ew_def *def, int lanes);

/* The helpers of the vector element functions and stores, for float8 and float16: CLIP's
 * (clrun_clip_f32_v8, ...), clrun_canon_f32_v8 (clrun_canon_f32 lane by lane) and, with `math`
 * (some function calls EXP or TANH), theirs (clrun_exp_f32_v8, clrun_tanh_f32_v8:
 * kernels/ew_functions.cl's CLRUN_EXP_FUNCTIONS), which the others need not compile. */
void clrun__ew_emit_vector_helpers(clrun__strbuf *b, bool math);

/* What a kernel stores a result of `dtype` through: "clrun_canon_f32" (NaNs made canonical,
 * kernels/ew_functions.cl) for floats, "" for the others. */
const char *clrun__ew_store_function(clrun_dtype dtype);

/* `value` as an OpenCL C constant of `dtype`, exactly: 0x1.99999ap-3f, (-INFINITY), 7L. */
void clrun__ew_emit_literal(clrun__strbuf *b, clrun_dtype dtype, double value);

/* The unfused kernels of an op over data dtype `data` giving `result`, in one program (malloc'd
 * text, NULL when out of memory), named by clrun__ew_kernel_name with variant:
 *   ""     inputs of the output's element count, read at its index, 1-D:
 *          (inputs..., out, ulong n, params...)
 *   "_bc"  broadcast over 3 dimensions, innermost first, one per NDRange dimension:
 *          (inputs..., out, ulong n0, ulong n1, then per input ulong s0, s1, s2, params...)
 *   "_bcn" broadcast over more dimensions, 1-D, from the table [rank, dims (outermost first),
 *          per input its strides]: (inputs..., out, ulong n, __global ulong *table, params...)
 *   "_rows" with `rows` (devices where a work-item runs its own loop: CPUs), binary ops only:
 *          one operand along the rows and the other constant along them, a work-item per block
 *          of a row, 3-D (block, i1, i2): (inputs..., out, ulong n0, ulong n1, ulong block,
 *          int row (the operand along the rows), ulong s01, s02, s11, s12, params...)
 * Unary ops and casts have only the first. `wide`: see clrun__ew_library_name. */
char *clrun__ew_library_source(const clrun__ew_def *def, clrun_dtype data, clrun_dtype result,
                               bool wide, bool rows, bool fp64);
void clrun__ew_kernel_name(const clrun__ew_def *def, clrun_dtype data, clrun_dtype result,
                           const char *variant, char *buf, size_t size);

/* "ew_NAME_DTYPE" ("ew_cast_FROM_TO"): the program name of an op's unfused kernels over one
 * data dtype, so that a program compiles only what a node of that dtype uses; add, sub, mul and
 * div share "ew_arith_DTYPE", whose text (clrun__ew_library_source, the same for each of them)
 * holds the four ops' kernels; with `wide` (a driver that compiles each kernel at its first
 * launch: clrun__lazy_driver) the common activations join them in "ew_arith_act_DTYPE". */
void clrun__ew_library_name(const clrun__ew_def *def, clrun_dtype data, clrun_dtype result, bool wide,
                            char *buf, size_t size);

#endif
