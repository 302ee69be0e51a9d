/* Kernels of the loop ops (graph/infer_loop.c): `loop_carry` is one clEnqueueCopyBuffer;
 * `loop_begin` and `loop_end` enqueue nothing: the executor writes their outputs and runs the
 * iterations (lib/exec/exec_loop.c). A Scan's `scan_stack` is one clEnqueueFillBuffer of zeros,
 * its `scan_put` one launch of kernels/scan.cl. */
#include <stdlib.h>

#include "device/cl.h"
#include "ops/ops_data.h"
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

/* scan_stack: its output zeroed (every slice is written by the iterations; zeros keep the
 * bytes defined). Its input only places it before the loop. */
static clrun_status stack_enqueue(clrun_context *ctx, void *state, const clrun__op_call *call,
                                  const cl_mem *inputs, const cl_mem *outputs, cl_uint wait_count,
                                  const cl_event *wait_list, cl_event *done)
{
    (void)state, (void)inputs;
    if (done)
        *done = NULL;
    if (outputs[0] == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT, "scan_stack: no buffer");
    const unsigned char zero = 0;
    size_t bytes = (size_t)clrun_tensor_bytes(&call->outputs[0]);
    cl_event event = NULL;
    bool need = ctx->out_of_order || done != NULL;
    cl_int err = clrun__cl.EnqueueFillBuffer(ctx->queue, outputs[0], &zero, 1, 0, bytes, wait_count,
                                             wait_count ? wait_list : NULL, need ? &event : NULL);
    if (err != CL_SUCCESS)
        return clrun__fail_cl(ctx, err, "clEnqueueFillBuffer", "a stacked scan output of %zu bytes", bytes);
    if (done)
        *done = event;
    else if (event)
        clrun__cl.ReleaseEvent(event);
    return CLRUN_OK;
}

/* scan_put: one work-item per element of the iteration's scan output (inputs: the stacked
 * tensor, written in place, the slice, the iteration number; output: the token). */
static clrun_status put_prepare(clrun_context *ctx, const clrun__op *op, const clrun__op_call *call,
                                void **state)
{
    (void)op;
    *state = NULL;
    const clrun_tensor_type *acc = &call->inputs[0];
    int axis = (int)clrun__attr_int_or(call, "axis", 0);
    cl_ulong n = clrun_tensor_elements(&call->inputs[1]), len = (cl_ulong)acc->shape[axis], inner = 1;
    for (int d = axis + 1; d < acc->rank; d++)
        inner *= (cl_ulong)acc->shape[d];
    cl_int reverse = clrun__attr_int_or(call, "reverse", 0) != 0;
    clrun__kernel_state *st = calloc(1, sizeof *st);
    if (st == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "scan_put: node state");
    st->inputs = 3;
    st->what = "scan_put";
    clrun_status s = clrun__element_kernel(ctx, "clrun_scan_put", acc->dtype, NULL, &st->kernel);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->kernel, 4, sizeof n, &n);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->kernel, 5, sizeof len, &len);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->kernel, 6, sizeof inner, &inner);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->kernel, 7, sizeof reverse, &reverse);
    if (s == CLRUN_OK)
        s = clrun__flat_launch(ctx, st, n);
    return clrun__kernel_state_done(st, s, state);
}

static const clrun__op_kernels stack_kernels = {
    .prepare = bound_prepare, .enqueue = stack_enqueue, .release = free};
static const clrun__op_kernels put_kernels = {
    .prepare = put_prepare, .enqueue = clrun__kernel_state_op_enqueue, .release = clrun__kernel_state_release};
static const clrun__op_kernels carry_kernels = {
    .prepare = carry_prepare, .enqueue = carry_enqueue, .release = free};
static const clrun__op_kernels bound_kernels = {
    .prepare = bound_prepare, .enqueue = bound_enqueue, .release = free};

const clrun__named_kernels clrun__kernels_loop[] = {
    {"loop_carry", &carry_kernels},
    {"loop_begin", &bound_kernels},
    {"loop_end", &bound_kernels},
    {"scan_stack", &stack_kernels},
    {"scan_put", &put_kernels},
    {NULL, NULL},
};
