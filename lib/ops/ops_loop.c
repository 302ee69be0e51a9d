/* Kernels of the loop ops (graph/infer_loop.c): `loop_carry` is one clEnqueueCopyBuffer;
 * `loop_begin` and `loop_end` enqueue nothing: the executor writes their outputs and runs the
 * iterations (lib/exec/exec_loop.c). No OpenCL C of their own. */
#include <stdlib.h>

#include "device/cl.h"
#include "ops/ops_internal.h"

typedef struct carry_state {
    uint64_t bytes;
} carry_state;

static clrun_status carry_prepare(clrun_context *ctx, const clrun__op *op, const clrun__op_call *call,
                                  void **state)
{
    (void)op;
    carry_state *st = malloc(sizeof *st);
    if (st == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    st->bytes = clrun_tensor_bytes(&call->inputs[0]);
    *state = st;
    return CLRUN_OK;
}

static clrun_status carry_enqueue(clrun_context *ctx, void *state, const clrun__op_call *call,
                                  const cl_mem *inputs, const cl_mem *outputs, cl_uint wait_count,
                                  const cl_event *wait_list, cl_event *done)
{
    (void)call;
    const carry_state *st = state;
    if (done)
        *done = NULL;
    if (inputs[0] == NULL || outputs[0] == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT, "loop_carry: no buffer");
    cl_event event = NULL;
    bool need = ctx->out_of_order || done != NULL;
    cl_int err = clrun__cl.EnqueueCopyBuffer(ctx->queue, inputs[0], outputs[0], 0, 0, (size_t)st->bytes,
                                             wait_count, wait_count ? wait_list : NULL, need ? &event : NULL);
    if (err != CL_SUCCESS)
        return clrun__fail_cl(ctx, err, "clEnqueueCopyBuffer", "a loop-carried value of %llu bytes",
                              (unsigned long long)st->bytes);
    if (done)
        *done = event;
    else if (event)
        clrun__cl.ReleaseEvent(event);
    return CLRUN_OK;
}

static clrun_status bound_prepare(clrun_context *ctx, const clrun__op *op, const clrun__op_call *call,
                                  void **state)
{
    (void)ctx, (void)op, (void)call;
    *state = NULL;
    return CLRUN_OK;
}

static clrun_status bound_enqueue(clrun_context *ctx, void *state, const clrun__op_call *call,
                                  const cl_mem *inputs, const cl_mem *outputs, cl_uint wait_count,
                                  const cl_event *wait_list, cl_event *done)
{
    (void)ctx, (void)state, (void)call, (void)inputs, (void)outputs, (void)wait_count, (void)wait_list;
    if (done)
        *done = NULL;
    return CLRUN_OK;
}

static const clrun__op_kernels carry_kernels = {
    .prepare = carry_prepare, .enqueue = carry_enqueue, .release = free};
static const clrun__op_kernels bound_kernels = {
    .prepare = bound_prepare, .enqueue = bound_enqueue, .release = free};

const clrun__named_kernels clrun__kernels_loop[] = {
    {"loop_carry", &carry_kernels},
    {"loop_begin", &bound_kernels},
    {"loop_end", &bound_kernels},
    {NULL, NULL},
};
