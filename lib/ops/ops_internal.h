/* What the kernel families (lib/ops/ops_*.c) share: kernel creation and arguments, constant
 * tables, node states and launches chained by events. Defined in lib/ops/ops.c. */
#ifndef CLRUN_LIB_OPS_INTERNAL_H
#define CLRUN_LIB_OPS_INTERNAL_H

#include <stdarg.h>

#include "device/context.h"
#include "graph/op_geometry.h"
#include "graph/types.h"
#include "ops/ops.h"

/* The kernels of each family, found by lib/ops/ops.c: every op of an elementwise kind runs on
 * the elementwise kernels, the others by name. */
extern const clrun__op_kernels clrun__elementwise_kernels;
extern const clrun__op_kernels clrun__fused_kernels; /* every op of kind CLRUN__OP_FUSED */
typedef struct clrun__named_kernels {
    const char *op;
    const clrun__op_kernels *kernels;
} clrun__named_kernels;
extern const clrun__named_kernels clrun__kernels_matmul[];
extern const clrun__named_kernels clrun__kernels_norm[];
extern const clrun__named_kernels clrun__kernels_layout[];
extern const clrun__named_kernels clrun__kernels_conv[];
extern const clrun__named_kernels clrun__kernels_conv_grad[];
extern const clrun__named_kernels clrun__kernels_index[];
extern const clrun__named_kernels clrun__kernels_resize[];
extern const clrun__named_kernels clrun__kernels_col2im[];
extern const clrun__named_kernels clrun__kernels_scatter[];
extern const clrun__named_kernels clrun__kernels_sample[];
extern const clrun__named_kernels clrun__kernels_qlinear[];
extern const clrun__named_kernels clrun__kernels_detect[];
extern const clrun__named_kernels clrun__kernels_transfer[]; /* ops_transfer.c */
extern const clrun__named_kernels clrun__kernels_loop[]; /* ops_loop.c */
/* The ops that take an epilogue (ops.h), by name; in_place as clrun__op_epilogue_in_place. */
typedef struct clrun__named_epilogue {
    const char *op;
    clrun__prepare_epilogue_fn prepare;
    bool in_place;
} clrun__named_epilogue;
extern const clrun__named_epilogue clrun__epilogue_matmul[];
extern const clrun__named_epilogue clrun__epilogue_conv[];
extern const clrun__named_epilogue clrun__epilogue_conv_grad[];

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
/* Tests set it to run every pointwise conv2d of f32 weights whose plane holds two vectors on
 * its own kernel (clrun_conv2d_pointwise), on any device and whatever the choice above. */
extern bool clrun__conv_pointwise_forced;
/* Whether a pointwise conv2d over a small plane takes clrun_conv2d_pointwise_small (vectors of
 * 8): < 0 where lib/ops/ops_conv.c chooses it (14 x 14), 0 never, > 0 on every plane of 8
 * positions or more that runs a pointwise kernel. Tests set it to compare it with the core. */
extern int clrun__conv_pointwise_small;
/* A depthwise conv2d with the channels along the vectors (clrun_conv2d_depthwise_c): < 0 where
 * lib/ops/ops_conv.c chooses it (CPUs), 0 never, > 0 on any device and over any plane a band
 * of rows fits. Tests set it to compare it with the kernel along the rows. */
extern int clrun__conv_depthwise_channels;
/* Tests set it to run every conv2d of one group over few taps (a 3-channel stem) whose rows
 * hold a vector on its own kernel (clrun_conv2d_rows), on any device and whatever the choice
 * above. */
extern bool clrun__conv_rows_forced;
/* A conv2d over a 1 x 1 plane with a 1 x 1 kernel on matmul's core (lib/ops/ops_conv.c): < 0
 * where the conv core would run it, 0 never. Tests set it to compare the two kernels' bits. */
extern int clrun__conv_product;
/* resize's kernels for an interpolation in the last two axes (lib/ops/ops_resize.c): 2 (the
 * default) the fastest that applies, 1 clrun_resize_planes_f32 at most, 0 always the general
 * clrun_resize_interp_f32. Tests set it to compare the kernels' bits. */
extern int clrun__resize_kernels;
/* col2im's rows summed in private memory (lib/ops/ops_col2im.c), where a row fits: 1 (the
 * default) on CPUs, 2 on every device, 0 never. Tests set it to compare the two kernels' bits
 * (and, under oclgrind, whose device is a GPU, to check the private kernel). */
extern int clrun__col2im_phases;
/* conv2d's core on half the device's vector width where a group has at most that many output
 * channels (lib/ops/ops_conv.c): < 0 there on 16-wide devices, 0 never, > 0 on every conv2d
 * the core runs on a 16-wide device. Tests set it to compare the two widths' bits. */
extern int clrun__conv_core_narrow;
/* A binary broadcast with one operand along rows and the other constant along them on the
 * kernel of a work-item per row (lib/ops/ops_elementwise.c): < 0 on CPUs, 0 never, > 0 on any
 * device. Tests set it to run that kernel where they run (oclgrind). */
extern int clrun__ew_rows;

/* The most bytes of scratch into which conv2d's core packs weights that change between runs,
 * over few output positions, a chunk of panels at a time (lib/ops/ops_conv.c; at least one
 * panel). Tests lower it to get several chunks; set it before prepare, from one thread. */
extern uint64_t clrun__conv_chunk_bytes;
/* The most bytes of scratch into which matmul's core packs a transposed B that changes between
 * runs (a weight under a backward dY W^T) at every run: a larger one is packed a chunk of panels
 * at a time, each chunk's product run before the next is packed (lib/ops/ops_matmul.c; at
 * least one panel). Tests lower it; set it before prepare. */
extern uint64_t clrun__matmul_chunk_bytes;

/* The int geometry tables of conv2d and the pools: the index of each entry. Each kernel file
 * is built alone and cannot include this header, so kernels/conv.cl (G_*, P_*) and
 * kernels/matmul.cl (G_*, for clrun_conv2d_gemm) repeat the indices as `#define G_C 0` ...;
 * tests/test_ops.c checks every such #define of the embedded sources against these lists, so
 * a mismatch fails the tests instead of corrupting results. Change them together. */
#define CLRUN__CONV_GEOMETRY(X)                                                                    \
    X(G_C) X(G_H) X(G_W) X(G_O) X(G_KH) X(G_KW) X(G_OH) X(G_OW) X(G_SH) X(G_SW) X(G_PH) X(G_PW)    \
    X(G_DH) X(G_DW) X(G_GROUPS)
#define CLRUN__POOLING_GEOMETRY(X)                                                                    \
    X(P_H) X(P_W) X(P_OH) X(P_OW) X(P_KH) X(P_KW) X(P_SH) X(P_SW) X(P_PH) X(P_PW) X(P_PHE)         \
    X(P_PWE) X(P_DH) X(P_DW) X(P_INCLUDE_PAD)
#define CLRUN__GEOMETRY_INDEX(name) CLRUN__##name,
/* Convolution: {C, H, W, O, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw, groups}. */
enum { CLRUN__CONV_GEOMETRY(CLRUN__GEOMETRY_INDEX) CLRUN__G_COUNT };
/* Pooling: {H, W, OH, OW, KH, KW, SH, SW, PH, PW (pads before), PHE, PWE (after), DH, DW,
 * count_include_pad}. */
enum { CLRUN__POOLING_GEOMETRY(CLRUN__GEOMETRY_INDEX) CLRUN__P_COUNT };

/* A work-group size for a 1-D kernel: the largest power of two <= min(want, the kernel's limit
 * on ctx's device), at least 1. */
clrun_status clrun__local_size(clrun_context *ctx, cl_kernel kernel, size_t want, size_t *out);
/* The work-group size along a row of n elements from `local` (a power of two): the row itself
 * where it is shorter, so that every group is whole (a row of 49 in groups of 64 took POCL 4-8x
 * the time of one of 64: its check per work-item kept the group's loop from being vectorized). */
size_t clrun__row_group(size_t local, uint64_t n);

/* `n` rounded up to a multiple of `multiple` (n itself for 0, which a failed local-size query
 * leaves: the caller returns that failure, never dividing by it). */
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

/* Sets `buffer` as argument `index` of `kernel`; a NULL buffer (an input the executor no longer
 * holds) is refused with CLRUN_ERROR_INVALID_ARGUMENT, never passed to a kernel. */
clrun_status clrun__buffer_arg(clrun_context *ctx, cl_kernel kernel, cl_uint index, cl_mem buffer);

/* Sets buffers[0..count-1] as arguments 0..count-1 of `kernel` and `output` as argument
 * `count` (each by clrun__buffer_arg): the buffer arguments every kernel here takes first. */
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

/* Reductions: the op codes of lib/graph/infer_norm.c and REDUCE_* in kernels/reduce.cl. */
enum {
    CLRUN__REDUCE_SUM = 0,
    CLRUN__REDUCE_MEAN = 1,
    CLRUN__REDUCE_MAX = 2,
    CLRUN__REDUCE_MIN = 3,
    CLRUN__REDUCE_PROD = 4,
    CLRUN__REDUCE_L2 = 5,
    CLRUN__REDUCE_SUM_SQUARE = 6,
};

/* Reductions (lib/ops/ops_norm.c), shared with the global pools: reduces x over the axes set in
 * `reduced` with reduction `code` (CLRUN__REDUCE_*). */
clrun_status clrun__reduce_prepare(clrun_context *ctx, const clrun_tensor_type *x,
                                   const bool *reduced, int code, void **state);
clrun_status clrun__reduce_enqueue(clrun_context *ctx, void *state, const clrun__op_call *call,
                                   const cl_mem *inputs, const cl_mem *outputs, cl_uint wait_count,
                                   const cl_event *wait_list, cl_event *done);
void clrun__reduce_release(void *state);

#endif
