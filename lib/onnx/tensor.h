/* Host tensors of the ONNX importer: initializers, Constant values and everything folded at load
 * time, in ONNX's own element types (TensorProto.DataType), with dimensions that may be 0 (ONNX
 * shape computations make empty tensors; the device never sees them). Decoding of TensorProto
 * (raw_data, the typed fields, external data files) lives here too. Pure C: no OpenCL. */
#ifndef CLRUN_LIB_ONNX_TENSOR_H
#define CLRUN_LIB_ONNX_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <clrun/graph.h>
#include <clrun/status.h>

/* ONNX TensorProto.DataType values (onnx.proto), the ones the importer names. */
enum {
    CLRUN__ONNX_UNDEFINED = 0,
    CLRUN__ONNX_FLOAT = 1,
    CLRUN__ONNX_UINT8 = 2,
    CLRUN__ONNX_INT8 = 3,
    CLRUN__ONNX_UINT16 = 4,
    CLRUN__ONNX_INT16 = 5,
    CLRUN__ONNX_INT32 = 6,
    CLRUN__ONNX_INT64 = 7,
    CLRUN__ONNX_STRING = 8,
    CLRUN__ONNX_BOOL = 9,
    CLRUN__ONNX_FLOAT16 = 10,
    CLRUN__ONNX_DOUBLE = 11,
    CLRUN__ONNX_UINT32 = 12,
    CLRUN__ONNX_UINT64 = 13,
    CLRUN__ONNX_COMPLEX64 = 14,
    CLRUN__ONNX_COMPLEX128 = 15,
    CLRUN__ONNX_BFLOAT16 = 16,
    /* Opsets 19 to 21 (IR 9, 10): named in refusals; clrun has no such tensors. */
    CLRUN__ONNX_FLOAT8E4M3FN = 17,
    CLRUN__ONNX_FLOAT8E4M3FNUZ = 18,
    CLRUN__ONNX_FLOAT8E5M2 = 19,
    CLRUN__ONNX_FLOAT8E5M2FNUZ = 20,
    CLRUN__ONNX_UINT4 = 21,
    CLRUN__ONNX_INT4 = 22,
    CLRUN__ONNX_FLOAT4E2M1 = 23,
};

/* Host tensors have at most as many dimensions as device ones: arrays of this size hold clrun
 * shapes too. */
#define CLRUN__ONNX_MAX_RANK 8
_Static_assert(CLRUN__ONNX_MAX_RANK >= CLRUN_MAX_DIMS, "host tensors hold every clrun shape");

/* Largest host tensor the importer makes (initializer, Constant or folded value): 4 GiB, about
 * the largest single weight of models that fit a device. The fuzz target builds with less. */
#ifndef CLRUN__ONNX_MAX_TENSOR_BYTES
#define CLRUN__ONNX_MAX_TENSOR_BYTES ((uint64_t)1 << 32)
#endif

/* The host folding budget: the host tensors the importer makes (folded values, copies, the
 * constants mappings build: whatever clrun__otensor_alloc and _copy give) may hold at most this
 * many bytes at once more than the tensors decoded from the model (initializers, Constant
 * values) hold, counted per thread (an import runs on one). Past it, an allocation is refused as
 * too large to fold: host evaluation then leaves the node to the device, or the importer refuses
 * it. A model of a few bytes cannot make the host build gigabytes. */
#ifndef CLRUN__ONNX_FOLD_BUDGET
#define CLRUN__ONNX_FOLD_BUDGET \
    (CLRUN__ONNX_MAX_TENSOR_BYTES < ((uint64_t)1 << 30) ? CLRUN__ONNX_MAX_TENSOR_BYTES : ((uint64_t)1 << 30))
#endif

typedef struct clrun__otensor {
    int elem;                              /* CLRUN__ONNX_* */
    int rank;
    int64_t dims[CLRUN__ONNX_MAX_RANK];    /* each >= 0 */
    void *data;                            /* count * size bytes, little-endian (owned; may be
                                              NULL when count is 0) */
    int64_t counted;                       /* bytes this tensor counts in the folding budget:
                                              > 0 made (alloc, copy), < 0 decoded (raising the
                                              budget); returned by clrun__otensor_free. The tensor
                                              is moved as a whole struct, never duplicated */
    bool graph_owned;                      /* data is a graph constant's own (taken by it, never
                                              written again): read here, freed with the graph */
} clrun__otensor;

/* "float", "int64", ... ("type 42" style text for unknown values goes to buf). */
const char *clrun__onnx_elem_name(int elem, char *buf, size_t size);
/* Bytes per element for the fixed-size types the importer handles; 0 for others (string,
 * complex, undefined, unknown). */
size_t clrun__onnx_elem_size(int elem);
/* The clrun dtype of an element type; false when clrun has none (uint8, string, ...). */
bool clrun__onnx_elem_dtype(int elem, clrun_dtype *out);
/* The element type of a clrun dtype. */
int clrun__onnx_dtype_elem(clrun_dtype dtype);

/* Elements of t (product of dims, 1 for rank 0). */
uint64_t clrun__otensor_count(const clrun__otensor *t);
uint64_t clrun__otensor_bytes(const clrun__otensor *t);

/* A new tensor of the type and shape with zeroed data; false when out of memory, over
 * CLRUN__ONNX_MAX_TENSOR_BYTES or over the folding budget (*t then empty;
 * clrun__fold_budget_refused says which). */
bool clrun__otensor_alloc(clrun__otensor *t, int elem, int rank, const int64_t *dims);
void clrun__otensor_free(clrun__otensor *t);
/* A deep copy; false as clrun__otensor_alloc. */
bool clrun__otensor_copy(clrun__otensor *dst, const clrun__otensor *src);

/* Whether the last clrun__otensor_alloc or _copy of this thread failed because the result was
 * too large (the size limit or the folding budget), not for want of memory. */
bool clrun__fold_budget_refused(void);
/* Sets this thread's folding budget (bytes beyond the decoded tensors; 0: the default,
 * CLRUN__ONNX_FOLD_BUDGET) and returns the previous one. For tests. */
uint64_t clrun__fold_budget_set(uint64_t bytes);
/* Bytes made (alloc, copy) and still alive on this thread. */
uint64_t clrun__fold_budget_used(void);

/* Element i as int64 / double (integers, bool and floats; float16 is converted). */
int64_t clrun__otensor_get_int(const clrun__otensor *t, uint64_t i);
double clrun__otensor_get_real(const clrun__otensor *t, uint64_t i);
/* Stores value into element i, converted as a C cast would (ONNX Cast semantics for the
 * numeric types: floats to integers truncate, out-of-range values wrap). */
void clrun__otensor_set_int(clrun__otensor *t, uint64_t i, int64_t value);
void clrun__otensor_set_real(clrun__otensor *t, uint64_t i, double value);
bool clrun__onnx_elem_is_float(int elem);

/* The clrun type of a host tensor (for a device tensor made of it); false when the element type
 * has no dtype, the rank is above CLRUN_MAX_DIMS or a dimension is 0, with the reason in why. */
bool clrun__otensor_clrun_type(const clrun__otensor *t, clrun_tensor_type *out, char *why,
                               size_t whylen);
/* The same, but a dimension may be 0: the type of an empty tensor, known on the host only (its
 * value is its shape), as a test file or a constant the importer folds may be. */
bool clrun__otensor_host_type(const clrun__otensor *t, clrun_tensor_type *out, char *why, size_t whylen);
/* Data in clrun's layout for that type (the same bytes: both are little-endian row-major). */

/* "[2, 3, 4]" into buf; returns buf. */
const char *clrun__onnx_dims_text(int rank, const int64_t *dims, char *buf, size_t size);

struct Onnx__TensorProto;

/* Decodes a TensorProto: raw_data, the typed field of its type, or external data (location
 * relative to dir, which may be NULL for the current folder; offset and length honoured). On
 * failure the status (CLRUN_ERROR_PARSE for a malformed tensor, CLRUN_ERROR_IO for an external
 * file that cannot be read, CLRUN_ERROR_UNSUPPORTED for strings and complex numbers) and the
 * reason in why (without the tensor's name: the caller says which tensor). */
clrun_status clrun__otensor_decode(const struct Onnx__TensorProto *proto, const char *dir,
                                   clrun__otensor *out, char *why, size_t whylen);
/* clrun__otensor_decode that moves proto's raw bytes (allocated by protobuf-c with malloc) into
 * the tensor instead of copying them: proto has no raw data after it. For a graph decoded once
 * (not a loop body inlined per iteration). */
clrun_status clrun__otensor_decode_take(struct Onnx__TensorProto *proto, const char *dir,
                                        clrun__otensor *out, char *why, size_t whylen);

#endif
