/* How a device runs each op: the kernels behind an op's definition (graph/op.h), found by the
 * op. The executor knows kernels only through this table. */
#ifndef CLRUN_LIB_OPS_H
#define CLRUN_LIB_OPS_H

#include <CL/cl.h>

#include <clrun/context.h>

#include "graph/op.h"

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

#endif
