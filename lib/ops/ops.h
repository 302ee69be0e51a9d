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
 * e.g. "fmax(v + x0[i], 0.0f)" for a residual add then relu. `helpers` (may be NULL) is OpenCL C
 * placed before the kernels: functions or macros the expression calls. The source is built with
 * FP_CONTRACT OFF, so "v + x0[i]" rounds exactly as the unfused add kernel does. */
#define CLRUN__EPILOGUE_MAX_EXTRA 8
typedef struct clrun__epilogue {
    const char *expression;
    const char *helpers;
    int extra_inputs; /* 0..CLRUN__EPILOGUE_MAX_EXTRA */
} clrun__epilogue;

typedef struct clrun__op_kernels {
    /* Creates what one node of `op` needs on the device (kernels, with every argument that does
     * not change between runs already set) into *state. The call's types passed op->infer.
     * Errors via clrun__fail on ctx. */
    clrun_status (*prepare)(clrun_context *ctx, const clrun__op *op, const clrun__op_call *call,
                            void **state);
    /* Enqueues the node on ctx's queue over the given buffers (inputs[i], outputs[j] are
     * cl_mem sub-buffers of exactly the tensors' bytes), waiting for wait_list and, when done is
     * not NULL, returning an event for the node's last command. May be called many times. */
    clrun_status (*enqueue)(clrun_context *ctx, void *state, const clrun__op_call *call,
                            const cl_mem *inputs, const cl_mem *outputs, cl_uint wait_count,
                            const cl_event *wait_list, cl_event *done);
    /* Frees what prepare made. NULL is accepted. */
    void (*release)(void *state);
} clrun__op_kernels;

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

#endif
