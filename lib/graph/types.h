/* The one vocabulary of tensor types: dtype names and sizes, element counts, the text form
 * ("f32[8, 784]") that messages and the .graph format share, and the checks every tensor type
 * passes. Pure C: no OpenCL. */
#ifndef CLRUN_LIB_GRAPH_TYPES_H
#define CLRUN_LIB_GRAPH_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <clrun/graph.h>

/* True for f32, f16, bf16 and f64. */
bool clrun__dtype_is_float(clrun_dtype dtype);
/* An integer dtype (i8 .. u64; bool is not one). */
bool clrun__dtype_is_int(clrun_dtype dtype);
/* The least and greatest value of an integer dtype, as doubles (2^63 and 2^64 are how i64's and
 * u64's tops round: a caller converting back clamps them). */
void clrun__int_range(clrun_dtype dtype, double *lo, double *hi);

/* The dtype spelled text[0..length) ("f32"), false if none. */
bool clrun__dtype_parse(const char *text, size_t length, clrun_dtype *out);

/* "f32[8, 784]" into buf; returns buf. CLRUN__TYPE_TEXT bytes always suffice: a dtype name,
 * the brackets and CLRUN_MAX_DIMS dims of at most 20 characters and ", " each. */
#define CLRUN__TYPE_TEXT (8 + 22 * CLRUN_MAX_DIMS)
const char *clrun__type_format(const clrun_tensor_type *type, char *buf, size_t size);

/* Same rank and dimensions (shape_equal), and same dtype too (type_equal). */
bool clrun__shape_equal(const clrun_tensor_type *a, const clrun_tensor_type *b);
bool clrun__type_equal(const clrun_tensor_type *a, const clrun_tensor_type *b);

/* CLRUN_OK for a type a tensor may have (known dtype, rank 0..CLRUN_MAX_DIMS, dims >= 1, byte
 * size within 64 bits); otherwise the reason in err. */
clrun_status clrun__type_check(const clrun_tensor_type *type, char *err, size_t errlen);
/* The same, but an empty type (clrun_tensor_empty) passes too: what a graph input or a
 * constant may have. */
clrun_status clrun__type_check_value(const clrun_tensor_type *type, char *err, size_t errlen);

/* The product of dims [from, to) of a type that passed clrun__type_check (so it cannot
 * overflow); clrun_tensor_elements is the checked count of the whole type. */
uint64_t clrun__dims_product(const clrun_tensor_type *type, int from, int to);

/* IEEE half from float, rounding to nearest even (integer arithmetic only), and back (exact). */
uint16_t clrun__f32_to_f16(float value);
float clrun__f16_to_f32(uint16_t half);
/* bfloat16 (f32's top half) from float, rounding to nearest even, a NaN as the default quiet
 * NaN 0x7fc0 (as the kernels store every NaN); and back (exact). */
uint16_t clrun__f32_to_bf16(float value);
float clrun__bf16_to_f32(uint16_t b);

/* v as one element of dtype at out (clrun_dtype_size(dtype) bytes): floats rounded to nearest
 * (f16 through f32), integers truncated toward zero and clamped to the dtype's range (NaN as 0),
 * bool as v != 0. The one conversion of a double to an element, so that every caller agrees. */
void clrun__dtype_from_double(clrun_dtype dtype, double v, void *out);
/* Whether v is exactly a value of dtype: an integer in range, 0 or 1 for bool, a float that
 * rounds to itself (every NaN and infinity is one). */
bool clrun__dtype_holds(clrun_dtype dtype, double v);

#endif
