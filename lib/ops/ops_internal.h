/* What the op families (lib/ops_*.c) share: type checks that write the refusal message, the
 * attribute schema check, numpy broadcasting, and kernel launches. Defined in lib/ops.c. */
#ifndef CLRUN_LIB_OPS_INTERNAL_H
#define CLRUN_LIB_OPS_INTERNAL_H

#include <stdarg.h>

#include "device/context.h"
#include "ops/ops.h"

/* The op entries of each family, collected by the registry in lib/ops.c. */
extern const clrun__op *const clrun__ops_elementwise[];
extern const clrun__op *const clrun__ops_matmul[];
extern const clrun__op *const clrun__ops_norm[];
extern const clrun__op *const clrun__ops_layout[];
extern const clrun__op *const clrun__ops_conv[];

/* Which kernels matmul and conv2d use. AUTO picks by device: VECTOR on CPUs (matmul), TILED
 * elsewhere, SIMPLE (one output per work-item) where work-groups of 16 x 16 do not fit. Tests
 * force the others so every kernel runs on the test device; set it before prepare, from one
 * thread. */
typedef enum clrun__kernel_choice {
    CLRUN__KERNELS_AUTO = 0,
    CLRUN__KERNELS_TILED,
    CLRUN__KERNELS_VECTOR,
    CLRUN__KERNELS_SIMPLE,
} clrun__kernel_choice;
extern clrun__kernel_choice clrun__ops_kernels;

/* The int geometry tables of conv2d and the pools: the index of each entry. Each kernel file
 * is built alone and cannot include this header, so kernels/conv.cl (G_*, P_*) and
 * kernels/matmul.cl (G_*, for clrun_conv2d_gemm) repeat the indices as `#define G_C 0` ...;
 * tests/test_ops.c checks every such #define of the embedded sources against these lists, so
 * a mismatch fails the tests instead of corrupting results. Change them together. */
#define CLRUN__CONV_GEOMETRY(X)                                                                    \
    X(G_C) X(G_H) X(G_W) X(G_O) X(G_KH) X(G_KW) X(G_OH) X(G_OW) X(G_SH) X(G_SW) X(G_PH) X(G_PW)    \
    X(G_DH) X(G_DW) X(G_GROUPS)
#define CLRUN__POOL_GEOMETRY(X)                                                                    \
    X(P_H) X(P_W) X(P_OH) X(P_OW) X(P_KH) X(P_KW) X(P_SH) X(P_SW) X(P_PH) X(P_PW)
#define CLRUN__GEOMETRY_INDEX(name) CLRUN__##name,
/* Convolution: {C, H, W, O, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw, groups}. */
enum { CLRUN__CONV_GEOMETRY(CLRUN__GEOMETRY_INDEX) CLRUN__G_COUNT };
/* Pooling: {H, W, OH, OW, KH, KW, SH, SW, PH, PW}. */
enum { CLRUN__POOL_GEOMETRY(CLRUN__GEOMETRY_INDEX) CLRUN__P_COUNT };

/* Where an op's refusal goes: the op's name (prefix of every message) and the caller's buffer. */
typedef struct clrun__infer_error {
    const char *op;
    char *buf;
    size_t size;
} clrun__infer_error;

/* Writes "OP: message" into err and returns CLRUN_ERROR_INVALID_GRAPH. */
clrun_status clrun__refuse(const clrun__infer_error *err, const char *format, ...)
    CLRUN__PRINTF(2, 3);

/* "f32[8,784]" into buf (at least CLRUN__TYPE_STR bytes); returns buf. */
#define CLRUN__TYPE_STR 128
const char *clrun__type_str(const clrun_tensor_type *type, char *buf);

/* Elements of a type (1 for a scalar), and its element count over dims [from, to). */
uint64_t clrun__elements(const clrun_tensor_type *type);
uint64_t clrun__dims_product(const clrun_tensor_type *type, int from, int to);

/* One attribute an op accepts. */
typedef enum clrun__attr_want {
    CLRUN__WANT_INT,   /* an integer */
    CLRUN__WANT_FLOAT, /* a float; an integer is accepted too */
    CLRUN__WANT_INTS,  /* a list of integers; a single integer is accepted as a list of one */
} clrun__attr_want;

typedef struct clrun__attr_spec {
    const char *name;
    clrun__attr_want want;
    bool required;
} clrun__attr_spec;

/* Refuses attributes not in specs[0..count-1], given twice, of the wrong kind, or missing when
 * required. */
clrun_status clrun__check_attrs(const clrun__op_call *call, const clrun__attr_spec *specs,
                                int count, const clrun__infer_error *err);

/* Refuses an input count outside [min, max]. */
clrun_status clrun__check_input_count(const clrun__op_call *call, int min, int max,
                                      const clrun__infer_error *err);

/* Refuses input i unless its dtype is f32, or (i32_ok) i32. f16 gets its own message. */
clrun_status clrun__check_dtype(const clrun__op_call *call, int i, bool i32_ok,
                                const clrun__infer_error *err);

/* Attribute values with defaults, for attributes clrun__check_attrs has accepted. */
int64_t clrun__attr_int_or(const clrun__op_call *call, const char *name, int64_t fallback);
double clrun__attr_float_or(const clrun__op_call *call, const char *name, double fallback);
/* A list attribute into out[0..max-1]; a single integer is a list of one. Returns its length
 * (0 when absent). */
int clrun__attr_list(const clrun__op_call *call, const char *name, int64_t *out, int max);

/* numpy broadcasting of a and b into *out (dtype of a). Refuses incompatible shapes. */
clrun_status clrun__broadcast_shape(const clrun_tensor_type *a, const clrun_tensor_type *b,
                                    clrun_tensor_type *out, const clrun__infer_error *err);

/* Row-major element strides of `type`, broadcast against the output shape `out` (rank >= the
 * type's): the type's dims align to the right, and a dim of 1 against a larger one gets stride 0.
 * strides has out->rank entries. */
void clrun__broadcast_strides(const clrun_tensor_type *type, const clrun_tensor_type *out,
                              uint64_t *strides);

/* A work-group size for a 1-D kernel: the largest power of two <= min(want, the kernel's limit
 * on ctx's device), at least 1. */
clrun_status clrun__local_size(clrun_context *ctx, cl_kernel kernel, size_t want, size_t *out);

/* `n` rounded up to a multiple of `multiple`. */
size_t clrun__round_up(size_t n, size_t multiple);

/* Creates kernel `name` into *out (NULL-safe to release on failure paths). */
clrun_status clrun__kernel(clrun_context *ctx, const char *name, cl_kernel *out);

/* Sets argument `index` of `kernel`, failing with the kernel and argument named. */
clrun_status clrun__arg(clrun_context *ctx, cl_kernel kernel, cl_uint index, size_t size,
                        const void *value);

/* A read-only device buffer holding a copy of `bytes` bytes of `values`: the shapes, strides
 * and offsets a node's kernels read (uint64_t arrays are ulong in kernels: cl_ulong is 64-bit). */
clrun_status clrun__table_buffer(clrun_context *ctx, const void *values, size_t bytes,
                                 cl_mem *out);

/* Sets buffers[0..count-1] as arguments 0..count-1 of `kernel` and `output` as argument
 * `count`: the buffer arguments every kernel here takes first. */
clrun_status clrun__buffer_args(clrun_context *ctx, cl_kernel kernel, const cl_mem *buffers,
                                cl_uint count, cl_mem output);

/* What most nodes keep from prepare to enqueue: one kernel, the read-only table its constant
 * arguments point at, and its launch geometry. A family's node state is one, or puts one first,
 * so that clrun__kernel_state_release serves as the op's release. */
typedef struct clrun__kernel_state {
    cl_kernel kernel;
    cl_mem table;      /* shape, geometry or offset table, or NULL */
    cl_uint inputs;    /* buffer arguments 0..inputs-1; the output follows */
    cl_uint dims;      /* 1 to 3: entries of global and local in use */
    size_t global[3];
    size_t local[3];
    const char *what;  /* names the launch in a failure */
} clrun__kernel_state;

/* Releases the kernel and table of a node state that begins with a clrun__kernel_state, then
 * frees the state. NULL-safe, so it also serves failure paths of prepare. */
void clrun__kernel_state_release(void *state);

/* Hands st to *state, or releases it when s is an error; returns s. */
clrun_status clrun__kernel_state_done(void *st, clrun_status s, void **state);

/* Sets buffers[0..ks->inputs) and output as the buffer arguments (clrun__buffer_args) and
 * launches ks's kernel over its geometry. */
clrun_status clrun__kernel_state_enqueue(clrun_context *ctx, const clrun__kernel_state *ks,
                                         const cl_mem *buffers, cl_mem output, cl_uint wait_count,
                                         const cl_event *wait_list, cl_event *done);

/* The enqueue of an op whose state is a clrun__kernel_state that takes the node's inputs as
 * they come, then its output. */
clrun_status clrun__kernel_state_op_enqueue(clrun_context *ctx, void *state,
                                            const clrun__op_call *call, const cl_mem *inputs,
                                            const cl_mem *outputs, cl_uint wait_count,
                                            const cl_event *wait_list, cl_event *done);

/* The launches of one node. The first launch waits for the node's wait list; on an out-of-order
 * queue each later one waits for the one before. `done` (may be NULL) receives the last
 * launch's event. Use: clrun__chain_begin, clrun__chain_launch..., clrun__chain_end. */
typedef struct clrun__chain {
    clrun_context *ctx;
    cl_uint wait_count;
    const cl_event *wait_list;
    cl_event last;     /* event of the previous launch, when one is needed */
    bool need_events;  /* out-of-order queue, or the caller wants `done` */
    cl_event *done;
} clrun__chain;

void clrun__chain_begin(clrun__chain *chain, clrun_context *ctx, cl_uint wait_count,
                        const cl_event *wait_list, cl_event *done);
/* Enqueues `kernel` over `dims` dimensions; local may be NULL. On failure the chain's events
 * are released. */
clrun_status clrun__chain_launch(clrun__chain *chain, cl_kernel kernel, cl_uint dims,
                                 const size_t *global, const size_t *local, const char *what);
/* Hands the last event to *done (or releases it). With no launch made, *done gets a marker. */
clrun_status clrun__chain_end(clrun__chain *chain);
/* Drops the chain after a failed launch: releases what it holds, hands out nothing. */
void clrun__chain_abort(clrun__chain *chain);

/* Single-launch shorthand. */
clrun_status clrun__launch(clrun_context *ctx, cl_kernel kernel, cl_uint dims,
                           const size_t *global, const size_t *local, cl_uint wait_count,
                           const cl_event *wait_list, cl_event *done, const char *what);

/* Reductions (lib/ops_norm.c), shared with global_avgpool: reduces x over the axes set in
 * `reduced`; code 0 sums, 1 averages, 2 takes the maximum. */
clrun_status clrun__reduce_prepare(clrun_context *ctx, const clrun_tensor_type *x,
                                   const bool *reduced, int code, void **state);
clrun_status clrun__reduce_enqueue(clrun_context *ctx, void *state, const clrun__op_call *call,
                                   const cl_mem *inputs, const cl_mem *outputs, cl_uint wait_count,
                                   const cl_event *wait_list, cl_event *done);
void clrun__reduce_release(void *state);

#endif
