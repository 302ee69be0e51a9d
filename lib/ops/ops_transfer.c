/* Kernels of the transfer ops (graph/infer_transfer.c): `offload` and `reload` are one
 * clEnqueueCopyBuffer each, between a device buffer and the host-allocated buffer the executor
 * gives an offloaded tensor. No OpenCL C of their own. */
#include <stdlib.h>

#include "device/cl.h"
#include "ops/ops_internal.h"

typedef struct transfer_state {
    uint64_t bytes;
} transfer_state;

static clrun_status transfer_prepare(clrun_context *ctx, const clrun__op *op,
                                     const clrun__op_call *call, void **state)
{
    (void)op;
    transfer_state *st = malloc(sizeof *st);
    if (st == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    st->bytes = clrun_tensor_bytes(&call->inputs[0]);
    *state = st;
    return CLRUN_OK;
}

static clrun_status transfer_enqueue(clrun_context *ctx, void *state, const clrun__op_call *call,
                                     const cl_mem *inputs, const cl_mem *outputs,
                                     cl_uint wait_count, const cl_event *wait_list, cl_event *done)
{
    (void)call;
    const transfer_state *st = state;
    if (done)
        *done = NULL;
    if (inputs[0] == NULL || outputs[0] == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT, "transfer: no buffer");
    cl_event event = NULL;
    bool need = ctx->out_of_order || done != NULL;
    cl_int err = clrun__cl.EnqueueCopyBuffer(ctx->queue, inputs[0], outputs[0], 0, 0,
                                             (size_t)st->bytes, wait_count,
                                             wait_count ? wait_list : NULL, need ? &event : NULL);
    if (err != CL_SUCCESS)
        return clrun__fail_cl(ctx, err, "clEnqueueCopyBuffer", "a host transfer of %llu bytes",
                              (unsigned long long)st->bytes);
    if (done)
        *done = event;
    else if (event)
        clrun__cl.ReleaseEvent(event);
    return CLRUN_OK;
}

static const clrun__op_kernels transfer_kernels = {
    .prepare = transfer_prepare, .enqueue = transfer_enqueue, .release = free};

const clrun__named_kernels clrun__kernels_transfer[] = {
    {"offload", &transfer_kernels},
    {"reload", &transfer_kernels},
    {NULL, NULL},
};
