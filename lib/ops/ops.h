/* How a device runs each op: the kernels behind an op's definition (graph/op.h), found by the
 * op. The executor knows kernels only through this table. */
#ifndef CLRUN_LIB_OPS_H
#define CLRUN_LIB_OPS_H

#include <CL/cl.h>

#include <clrun/context.h>

#include "graph/op.h"

/* An epilogue: elementwise work that matmul and conv2d apply to each output value in their own
 * kernel, before its single store (XLA's output fusion), so the product's result never makes a
 * round trip through memory before a bias, an activation or a residual add.
 *
 * `expression` is OpenCL C of type float over:
 *   v         float   the output value as the op computes it (alpha, bias included)
 *   i         ulong   the element's index in the output tensor (row-major)
 *   c         uint    its column (matmul: n) or channel (conv2d: o)
 *   x0 .. x7  __global const float *   the extra inputs, in order
 * e.g. "fmax((v) + x0[(i)], 0.0f)" for a residual add then relu. v, i and c are the arguments of
 * a macro, which the kernels pass as expressions ("has_bias ? acc + bias[o] : acc", "at + ow"):
 * an expression parenthesizes them, or hands them to a function in `helpers` as the fusion's
 * generated epilogues do (clrun_epilogue_fn(v, (ulong)(i), (uint)(c), x0, ...)). `helpers` (may
 * be NULL) is OpenCL C placed before the kernels: functions or macros the expression calls. The
 * source is built with FP_CONTRACT OFF, so "(v) + x0[(i)]" rounds exactly as the unfused add
 * kernel does. */
#define CLRUN__EPILOGUE_MAX_EXTRA 8
typedef struct clrun__epilogue {
    const char *expression;
    const char *helpers;
    int extra_inputs; /* 0..CLRUN__EPILOGUE_MAX_EXTRA */
    /* One case of an epilogue set (lib/fuse/epilogue.c): `helpers` and `expression` are the
     * set's, alike for every case, so that the base's kernels build once for all of them. The
     * kernels then take `params` buffers (x0 .. , at least extra_inputs: the set's most) and
     * after them `const uint epi`, the case, which the expression switches on. `index` is the
     * case + 1; 0 (and params 0) for an epilogue alone. */
    int params;
    int index;
} clrun__epilogue;

/* The epilogue arguments of a kernel built with an epilogue, from its first one on: the node's
 * extra inputs, then for a case of a set null buffers up to the set's parameters, and the
 * case. */
typedef struct clrun__epilogue_slots {
    int inputs; /* the node's extra inputs */
    int params; /* the kernel's buffer parameters (>= inputs) */
    int index;  /* 0: no case argument; else the case + 1 */
} clrun__epilogue_slots;

/* The slots of ep (none for NULL). */
clrun__epilogue_slots clrun__epilogue_slots_of(const clrun__epilogue *ep);

/* Buffers of scratch one node may ask for (ops_conv.c: the padded image and the packed weights
 * of a convolution whose weights are not constant). */
#define CLRUN__SCRATCH_MAX 2

/* The kernels of an op. Besides its tensors a node may need device memory of two kinds, and
 * says so here rather than calling clCreateBuffer itself, so that the executor counts it, holds
 * it to CLRUN_POOL_LIMIT, and reuses it like every other buffer:
 *  - scratch: bytes the node writes and reads during one enqueue only (a padded copy of an
 *    image, the packed form of a B that changes between runs). The schedule gives each part a
 *    buffer alive during the node's step alone, so the pooled modes take it before the node and
 *    give it back after it, and the planner lays it out with the tensors;
 *  - packed constants: the node's own copy of constant inputs in the layout its kernels read
 *    (matmul's and conv2d's weights in panels), made once on the host from the constants' values
 *    when the executor is created and uploaded into a resident block, which replaces those
 *    inputs: a constant that no other node reads is then never on the device at all, so a
 *    model's weights cost what they weigh. */
typedef struct clrun__op_kernels {
    /* Creates what one node of `op` needs on the device (kernels, with every argument that does
     * not change between runs already set) into *state. The call's types passed op->infer.
     * Errors via clrun__fail on ctx. */
    clrun_status (*prepare)(clrun_context *ctx, const clrun__op *op, const clrun__op_call *call,
                            void **state);
    /* Enqueues the node on ctx's queue over the given buffers (inputs[i], outputs[j] are
     * cl_mem sub-buffers of exactly the tensors' bytes), waiting for wait_list and, when done is
     * not NULL, returning an event for the node's last command. May be called many times.
     * outputs[call->output_count + j] is part j of the node's scratch (as `scratch` last said),
     * its bytes undefined on entry. inputs[i] is NULL for a constant input that `pack` said it
     * reads no more: the kernels must not use it. */
    clrun_status (*enqueue)(clrun_context *ctx, void *state, const clrun__op_call *call,
                            const cl_mem *inputs, const cl_mem *outputs, cl_uint wait_count,
                            const cl_event *wait_list, cl_event *done);
    /* Frees what prepare made. NULL is accepted. */
    void (*release)(void *state);
    /* Optional (NULL: no scratch). The scratch one enqueue needs, asked once prepare (and pack,
     * when the node packs) is done: up to CLRUN__SCRATCH_MAX parts, bytes[j] bytes each (none
     * 0); returns their number, 0 when the node needs none. */
    int (*scratch)(const void *state, uint64_t bytes[CLRUN__SCRATCH_MAX]);
    /* Optional (NULL: the node packs nothing). The bytes of the node's packed copy of its
     * constant inputs, 0 when it keeps none (nothing is constant, or its kernels read the
     * constants as they are); *replaces gets the mask of the constant inputs (bit i: input i)
     * that the copy stands for. Asked after prepare. */
    uint64_t (*packed_bytes)(const void *state, uint64_t *replaces);
    /* With packed_bytes: writes the packed copy into `host` (packed_bytes bytes) from the values
     * of the inputs in *replaces (inputs[i]: input i's elements as the tensor lays them out, in
     * host memory; NULL for the others). The caller uploads `host` into `packed`, a device
     * buffer of as many bytes that it holds for as long as the state lives (and releases after
     * it), before any enqueue; from then on enqueue reads `packed` in place of the inputs in
     * *replaces and never touches them. Called once with `packed`, before any enqueue (and
     * before that, with `packed` NULL, any number of times: the copy laid out into `host`
     * only, the state unchanged, to compare it with another node's); a pure copy, so the
     * products give the bits they give over a B packed on the device. */
    clrun_status (*pack)(clrun_context *ctx, void *state, const void *const *inputs, void *host,
                         cl_mem packed);
    /* Optional (NULL: nothing to check). Called once the commands of the node's enqueues are
     * complete: CLRUN_OK, or an error set on ctx (naming the node as `node`) when an enqueue
     * since the last check met inputs its op refuses (an index outside its axis), which the
     * kernels cannot report themselves. Forgets what it found, so the next check starts clean. */
    clrun_status (*check)(clrun_context *ctx, void *state, const char *node);
} clrun__op_kernels;

/* Running one node outside an executor (constant folding at load, tests, benchmarks): the
 * scratch its kernels ask for, as driver buffers that the context's pool counts and holds to
 * its limit (clrun__pool_create_raw), set after the node's outputs: `outputs` is what enqueue
 * takes as its outputs. A constant input is then packed at that enqueue, into scratch, like
 * any other (pack is for executors, which keep the packed copy). End it once the node's
 * commands are complete. */
typedef struct clrun__node_run {
    cl_mem outputs[16 + CLRUN__SCRATCH_MAX]; /* the node's outputs, then its scratch */
    cl_mem scratch[CLRUN__SCRATCH_MAX];
    uint64_t bytes[CLRUN__SCRATCH_MAX];
    int parts;
} clrun__node_run;

/* Fills *run for a prepared node (`state` of `kernels`) with `output_count` (at most 16)
 * outputs; on failure nothing stays allocated. */
clrun_status clrun__node_run_begin(clrun_context *ctx, const clrun__op_kernels *kernels,
                                   const void *state, const cl_mem *outputs, int output_count,
                                   clrun__node_run *run);
/* Gives the scratch back. */
void clrun__node_run_end(clrun_context *ctx, clrun__node_run *run);

/* The kernels of `op`; NULL for an op no kernel runs (a test checks that none is missing). */
const clrun__op_kernels *clrun__op_kernels_find(const clrun__op *op);

/* A prepare with the epilogue `ep` applied to every output value, for the ops that take one
 * (matmul, conv2d); the state it makes is run and released by the op's own kernels (enqueue,
 * release). enqueue's `inputs` then holds the call's inputs followed by ep->extra_inputs
 * buffers (x0, x1, ...); `call` is the op's own call, which passed op->infer. An expression that
 * does not build gives CLRUN_ERROR_BUILD_FAILED with the build log, and nothing is left
 * allocated. */
typedef clrun_status (*clrun__prepare_epilogue_fn)(clrun_context *ctx, const clrun__op *op,
                                                   const clrun__op_call *call,
                                                   const clrun__epilogue *ep, void **state);

/* The epilogue prepare of `op`, or NULL where the op takes no epilogue. */
clrun__prepare_epilogue_fn clrun__op_epilogue_prepare(const clrun__op *op);

/* Whether every kernel of `op` under an epilogue writes each output element exactly once, from
 * the one work-item that computed its whole value (no split sums, no partial stores to the
 * output), and reads the epilogue's inputs at element i only in the expression that stores
 * element i: then the output may be written over an extra input read at its own element (a
 * train step's momentum updated in place from the weight gradient the product computes, which
 * is then never stored). */
bool clrun__op_epilogue_in_place(const clrun__op *op);

/* How conv2d's kernel for `call` on ctx's device stores (lib/ops/ops_conv.c), which says the
 * epilogues it takes at no loss: */
typedef enum clrun__conv_store {
    CLRUN__CONV_STORE_ANY,   /* any epilogue: the core, and every kernel off a CPU */
    CLRUN__CONV_STORE_SMALL, /* the small planes' pointwise kernel, lanes from private memory: a
                                cheap one (the fusion pass's judgement: a relu, a clip, a bias or
                                residual add) or one that runs on vectors */
    CLRUN__CONV_STORE_LANES, /* a CPU's kernels with the positions or the channels along the
                                vectors (the pointwise kernel of large planes, a stem's rows,
                                depthwise): one that runs on vectors (clrun__fuse_epilogue_on_vectors),
                                which they apply to each stored vector; a lane at a time any
                                other costs more than its own kernel */
    CLRUN__CONV_STORE_ROWS3, /* a lane kernel, the 3 x 3 depthwise ones along the rows: as LANES,
                                but not an epilogue that computes an exp or a tanh */
} clrun__conv_store;
clrun__conv_store clrun__conv_store_of(clrun_context *ctx, const clrun__op_call *call);

/* Whether conv2d's kernel for `call` stores an epilogue at no loss: `cheap`, `vectors` and
 * `math` (it computes an exp or a tanh) as clrun__conv_store says. When false the fusion pass
 * leaves the group its own kernel. */
bool clrun__conv_epilogue_pays(clrun_context *ctx, const clrun__op_call *call, bool cheap, bool vectors,
                               bool math);

/* Whether conv2d runs `call` on ctx's device as matmul's kernel (lib/ops/ops_conv.c: a 1 x 1
 * product over a 1 x 1 plane, squeeze-and-excitation's): its epilogue then belongs with
 * matmul's (the fusion pass puts it in matmul's set, and judges it as a matmul's). */
bool clrun__conv_runs_as_product(clrun_context *ctx, const clrun__op_call *call);

#endif
