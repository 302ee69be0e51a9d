/* Finding an op's kernels, and what every kernel family shares: kernel creation and arguments,
 * constant tables, node states, and launches chained by events. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clrun/program.h>

#include "device/cl.h"
#include "memory/pool.h"
#include "ops/ops_internal.h"

clrun__kernel_choice clrun__ops_kernels = CLRUN__KERNELS_AUTO;

/* ---- finding kernels --------------------------------------------------------------------- */

static const clrun__named_kernels *const families[] = {
    clrun__kernels_matmul, clrun__kernels_norm, clrun__kernels_layout, clrun__kernels_conv,
    clrun__kernels_index,  clrun__kernels_resize, clrun__kernels_conv_grad,
    clrun__kernels_col2im,
    clrun__kernels_scatter,
    clrun__kernels_sample,
    clrun__kernels_qlinear,
    clrun__kernels_detect,
    clrun__kernels_transfer,
    clrun__kernels_loop,
};

const clrun__op_kernels *clrun__op_kernels_find(const clrun__op *op)
{
    if (op == NULL)
        return NULL;
    if (op->kind == CLRUN__OP_FUSED)
        return &clrun__fused_kernels;
    if (op->kind != CLRUN__OP_OTHER)
        return &clrun__elementwise_kernels;
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
        for (const clrun__named_kernels *k = families[f]; k->op; k++)
            if (strcmp(k->op, op->name) == 0)
                return k->kernels;
    return NULL;
}

clrun__prepare_epilogue_fn clrun__op_epilogue_prepare(const clrun__op *op)
{
    static const clrun__named_epilogue *const lists[] = {clrun__epilogue_matmul, clrun__epilogue_conv,
                                                          clrun__epilogue_conv_grad};
    for (size_t f = 0; op && f < sizeof lists / sizeof lists[0]; f++)
        for (const clrun__named_epilogue *k = lists[f]; k->op; k++)
            if (strcmp(k->op, op->name) == 0)
                return k->prepare;
    return NULL;
}

bool clrun__op_epilogue_in_place(const clrun__op *op)
{
    static const clrun__named_epilogue *const lists[] = {clrun__epilogue_matmul, clrun__epilogue_conv,
                                                          clrun__epilogue_conv_grad};
    for (size_t f = 0; op && f < sizeof lists / sizeof lists[0]; f++)
        for (const clrun__named_epilogue *k = lists[f]; k->op; k++)
            if (strcmp(k->op, op->name) == 0)
                return k->in_place;
    return false;
}

/* ---- a node run on its own ----------------------------------------------------------------- */

clrun_status clrun__node_run_begin(clrun_context *ctx, const clrun__op_kernels *kernels,
                                   const void *state, const cl_mem *outputs, int output_count,
                                   clrun__node_run *run)
{
    memset(run, 0, sizeof *run);
    if (output_count < 0 || output_count > 16)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT, "a node run: %d outputs (at most 16)",
                           output_count);
    for (int o = 0; o < output_count; o++)
        run->outputs[o] = outputs[o];
    int parts = kernels->scratch ? kernels->scratch(state, run->bytes) : 0;
    for (int j = 0; j < parts && j < CLRUN__SCRATCH_MAX; j++) {
        clrun_status s = clrun__pool_create_raw(ctx, run->bytes[j], "the scratch of a node run alone",
                                                &run->scratch[j]);
        if (s != CLRUN_OK) {
            clrun__node_run_end(ctx, run);
            return s;
        }
        run->parts++;
        run->outputs[output_count + j] = run->scratch[j];
    }
    return CLRUN_OK;
}

void clrun__node_run_end(clrun_context *ctx, clrun__node_run *run)
{
    for (int j = 0; j < run->parts; j++)
        clrun__pool_release_raw(ctx, run->scratch[j], run->bytes[j]);
    memset(run, 0, sizeof *run);
}

/* ---- kernels and launches ---------------------------------------------------------------- */

clrun_status clrun__kernel(clrun_context *ctx, const char *name, cl_kernel *out)
{
    *out = NULL;
    return clrun_kernel_create(ctx, name, out);
}

clrun_status clrun__arg(clrun_context *ctx, cl_kernel kernel, cl_uint index, size_t size,
                        const void *value)
{
    cl_int err = clrun__cl.SetKernelArg(kernel, index, size, value);
    if (err == CL_SUCCESS)
        return CLRUN_OK;
    return clrun__fail_cl(ctx, err, "clSetKernelArg", "argument %u (%zu bytes)", index, size);
}

size_t clrun__round_up(size_t n, size_t multiple)
{
    return multiple ? (n + multiple - 1) / multiple * multiple : n; /* 0: a failed size query */
}

clrun_status clrun__local_size(clrun_context *ctx, cl_kernel kernel, size_t want, size_t *out)
{
    size_t limit = 0;
    cl_int err = clrun__cl.GetKernelWorkGroupInfo(kernel, ctx->device, CL_KERNEL_WORK_GROUP_SIZE,
                                                  sizeof limit, &limit, NULL);
    if (err != CL_SUCCESS)
        return clrun__fail_cl(ctx, err, "clGetKernelWorkGroupInfo", "CL_KERNEL_WORK_GROUP_SIZE");
    if (ctx->info.max_work_group && limit > ctx->info.max_work_group)
        limit = ctx->info.max_work_group;
    size_t n = 1;
    while (n * 2 <= want && n * 2 <= limit)
        n *= 2;
    *out = n;
    return CLRUN_OK;
}

size_t clrun__row_group(size_t local, uint64_t n)
{
    return n > 0 && n < local ? (size_t)n : local;
}

clrun_status clrun__table_buffer(clrun_context *ctx, const void *values, size_t bytes,
                                 cl_mem *out)
{
    cl_int err = CL_SUCCESS;
    *out = clrun__cl.CreateBuffer(ctx->cl, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes,
                                  (void *)values, &err);
    if (*out == NULL)
        return clrun__fail_cl(ctx, err, "clCreateBuffer", "shape table of %zu bytes", bytes);
    return CLRUN_OK;
}

void clrun__chain_begin(clrun__chain *chain, clrun_context *ctx, cl_uint wait_count,
                        const cl_event *wait_list, cl_event *done)
{
    chain->ctx = ctx;
    chain->wait_count = wait_count;
    chain->wait_list = wait_count ? wait_list : NULL;
    chain->last = NULL;
    chain->need_events = ctx->out_of_order || done != NULL;
    chain->done = done;
    if (done)
        *done = NULL;
}

clrun_status clrun__chain_launch(clrun__chain *chain, cl_kernel kernel, cl_uint dims,
                                 const size_t *global, const size_t *local, const char *what)
{
    cl_uint wait_count = chain->wait_count;
    const cl_event *wait_list = chain->wait_list;
    if (chain->last) {
        /* An in-order queue orders the launches anyway; only an out-of-order one needs this. */
        wait_count = chain->ctx->out_of_order ? 1 : 0;
        wait_list = chain->ctx->out_of_order ? &chain->last : NULL;
    }
    cl_event event = NULL;
    cl_int err = clrun__cl.EnqueueNDRangeKernel(chain->ctx->queue, kernel, dims, NULL, global,
                                                local, wait_count, wait_list,
                                                chain->need_events ? &event : NULL);
    if (chain->last)
        clrun__cl.ReleaseEvent(chain->last);
    chain->last = err == CL_SUCCESS ? event : NULL;
    if (err != CL_SUCCESS) {
        if (event)
            clrun__cl.ReleaseEvent(event);
        return clrun__fail_cl(chain->ctx, err, "clEnqueueNDRangeKernel", "%s, global %zu x %zu",
                              what, global[0], dims > 1 ? global[1] : 1);
    }
    clrun__log(CLRUN_LOG_DEBUG, "launch %s: global %zu x %zu x %zu, local %zu x %zu x %zu", what,
               global[0], dims > 1 ? global[1] : 1, dims > 2 ? global[2] : 1,
               local ? local[0] : 0, local && dims > 1 ? local[1] : 0,
               local && dims > 2 ? local[2] : 0);
    return CLRUN_OK;
}

clrun_status clrun__chain_end(clrun__chain *chain)
{
    if (chain->last == NULL && (chain->done != NULL || chain->wait_count > 0)) {
        /* Nothing was launched (an empty copy, a view): a marker still stands for the node. It
         * waits for the node's wait list even where no one wants its event: on an in-order
         * queue what comes after it then waits too. A view of a tensor copied back from host
         * memory on the copy queue is the first to be handed that copy's event (exec_offload.c),
         * and the kernels that read the view after it are not. */
        cl_int err = clrun__cl.EnqueueMarkerWithWaitList(chain->ctx->queue, chain->wait_count,
                                                         chain->wait_list, chain->done);
        if (err != CL_SUCCESS)
            return clrun__fail_cl(chain->ctx, err, "clEnqueueMarkerWithWaitList", "empty node");
        return CLRUN_OK;
    }
    if (chain->done == NULL) {
        if (chain->last)
            clrun__cl.ReleaseEvent(chain->last);
        chain->last = NULL;
        return CLRUN_OK;
    }
    *chain->done = chain->last;
    chain->last = NULL;
    return CLRUN_OK;
}

void clrun__chain_abort(clrun__chain *chain)
{
    if (chain->last)
        clrun__cl.ReleaseEvent(chain->last);
    chain->last = NULL;
}

clrun_status clrun__launch(clrun_context *ctx, cl_kernel kernel, cl_uint dims,
                           const size_t *global, const size_t *local, cl_uint wait_count,
                           const cl_event *wait_list, cl_event *done, const char *what)
{
    clrun__chain chain;
    clrun__chain_begin(&chain, ctx, wait_count, wait_list, done);
    clrun_status status = clrun__chain_launch(&chain, kernel, dims, global, local, what);
    if (status != CLRUN_OK)
        return status;
    return clrun__chain_end(&chain);
}

clrun_status clrun__buffer_arg(clrun_context *ctx, cl_kernel kernel, cl_uint index, cl_mem buffer)
{
    if (buffer == NULL) /* an input the executor released (a constant packed away): a bug */
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT, "kernel argument %u: no buffer", index);
    return clrun__arg(ctx, kernel, index, sizeof buffer, &buffer);
}

clrun_status clrun__buffer_args(clrun_context *ctx, cl_kernel kernel, const cl_mem *buffers,
                                cl_uint count, cl_mem output)
{
    clrun_status s = CLRUN_OK;
    for (cl_uint i = 0; s == CLRUN_OK && i < count; i++)
        s = clrun__buffer_arg(ctx, kernel, i, buffers[i]);
    if (s == CLRUN_OK)
        s = clrun__buffer_arg(ctx, kernel, count, output);
    return s;
}

void clrun__kernel_state_release(void *state)
{
    clrun__kernel_state *ks = state;
    if (ks == NULL)
        return;
    if (ks->kernel)
        clrun__cl.ReleaseKernel(ks->kernel);
    if (ks->table)
        clrun__cl.ReleaseMemObject(ks->table);
    free(state);
}

clrun_status clrun__kernel_state_done(void *st, clrun_status s, void **state)
{
    if (s != CLRUN_OK) {
        clrun__kernel_state_release(st);
        return s;
    }
    *state = st;
    return CLRUN_OK;
}

clrun_status clrun__kernel_state_enqueue(clrun_context *ctx, const clrun__kernel_state *ks,
                                         const cl_mem *buffers, cl_mem output, cl_uint wait_count,
                                         const cl_event *wait_list, cl_event *done)
{
    clrun_status s = clrun__buffer_args(ctx, ks->kernel, buffers, ks->inputs, output);
    if (s != CLRUN_OK)
        return s;
    return clrun__launch(ctx, ks->kernel, ks->dims, ks->global, ks->local, wait_count, wait_list,
                         done, ks->what);
}

clrun_status clrun__kernel_state_op_enqueue(clrun_context *ctx, void *state,
                                            const clrun__op_call *call, const cl_mem *inputs,
                                            const cl_mem *outputs, cl_uint wait_count,
                                            const cl_event *wait_list, cl_event *done)
{
    (void)call;
    return clrun__kernel_state_enqueue(ctx, state, inputs, outputs[0], wait_count, wait_list,
                                       done);
}
