/* Row-wise ops (kernels/norm.cl): softmax, layernorm, and the reductions reduce_sum,
 * reduce_mean, reduce_max (which global_avgpool in ops_conv.c shares). Each launches one
 * work-group per row or output; the group size is a power of two no larger than the row needs. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "device/cl.h"
#include "ops/ops_internal.h"

/* Work-group size limit the kernels' local arrays are sized for (MAX_GROUP in norm.cl). */
#define MAX_GROUP 256


/* A node's state with `name`'s kernel, one dimension over `rows` rows of `length` elements (a
 * work-group per row); reductions add their shape table. */
static clrun_status row_begin(clrun_context *ctx, const char *name, int inputs, uint64_t rows,
                              uint64_t length, clrun__kernel_state **out)
{
    *out = NULL;
    clrun__kernel_state *st = calloc(1, sizeof *st);
    if (st == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "%s: node state", name);
    st->inputs = (cl_uint)inputs;
    st->dims = 1;
    st->what = "row op";
    clrun_status s = clrun__kernel(ctx, name, &st->kernel);
    if (s == CLRUN_OK)
        s = clrun__local_size(ctx, st->kernel, length < MAX_GROUP ? (size_t)length : MAX_GROUP,
                              &st->local[0]);
    if (s != CLRUN_OK) {
        clrun__kernel_state_release(st);
        return s;
    }
    st->global[0] = (size_t)rows * st->local[0];
    *out = st;
    return CLRUN_OK;
}

/* Sets the arguments after the buffers, in order, from (size, value) pairs. */
static clrun_status row_args(clrun_context *ctx, clrun__kernel_state *st, int count, ...)
{
    va_list ap;
    va_start(ap, count);
    clrun_status s = CLRUN_OK;
    for (int i = 0; i < count && s == CLRUN_OK; i++) {
        size_t size = va_arg(ap, size_t);
        const void *value = va_arg(ap, const void *);
        s = clrun__arg(ctx, st->kernel, st->inputs + 1 + (cl_uint)i, size, value);
    }
    va_end(ap);
    return s;
}

/* ---- softmax ----------------------------------------------------------------------------- */

static clrun_status softmax_prepare(clrun_context *ctx, const clrun__op *op,
                                   const clrun__op_call *call, void **state)
{
    (void)op;
    const clrun_tensor_type *x = &call->inputs[0];
    cl_ulong N = (cl_ulong)x->shape[x->rank - 1];
    cl_ulong M = x->rank >= 2 ? (cl_ulong)x->shape[x->rank - 2] : 1;
    cl_int causal = (cl_int)clrun__attr_int_or(call, "causal", 0);
    clrun__kernel_state *st;
    clrun_status s = row_begin(ctx, "clrun_softmax_f32", 1, clrun_tensor_elements(x) / N, N, &st);
    if (s != CLRUN_OK)
        return s;
    s = row_args(ctx, st, 3, sizeof N, &N, sizeof M, &M, sizeof causal, &causal);
    return clrun__kernel_state_done(st, s, state);
}

/* ---- layernorm --------------------------------------------------------------------------- */

static clrun_status layernorm_prepare(clrun_context *ctx, const clrun__op *op,
                                     const clrun__op_call *call, void **state)
{
    (void)op;
    const clrun_tensor_type *x = &call->inputs[0];
    cl_ulong D = (cl_ulong)x->shape[x->rank - 1];
    cl_float eps = (cl_float)clrun__attr_float_or(call, "eps", 1e-5);
    clrun__kernel_state *st;
    clrun_status s = row_begin(ctx, "clrun_layernorm_f32", 3, clrun_tensor_elements(x) / D, D, &st);
    if (s != CLRUN_OK)
        return s;
    s = row_args(ctx, st, 2, sizeof D, &D, sizeof eps, &eps);
    return clrun__kernel_state_done(st, s, state);
}

/* ---- reductions -------------------------------------------------------------------------- */

/* Appends the dims of x with reduced[d] == which, merging neighbours that are contiguous, to
 * dims/strides; returns how many. */
static int box(const clrun_tensor_type *x, const bool *reduced, bool which, uint64_t *dims,
               uint64_t *strides)
{
    uint64_t stride[CLRUN_MAX_DIMS], s = 1;
    for (int d = x->rank - 1; d >= 0; d--) {
        stride[d] = s;
        s *= (uint64_t)x->shape[d];
    }
    int n = 0;
    for (int d = 0; d < x->rank; d++) {
        if (reduced[d] != which || x->shape[d] == 1)
            continue;
        if (n > 0 && strides[n - 1] == stride[d] * (uint64_t)x->shape[d]) {
            dims[n - 1] *= (uint64_t)x->shape[d];
            strides[n - 1] = stride[d];
            continue;
        }
        dims[n] = (uint64_t)x->shape[d];
        strides[n] = stride[d];
        n++;
    }
    return n;
}

clrun_status clrun__reduce_prepare(clrun_context *ctx, const clrun_tensor_type *x,
                                   const bool *reduced, int code, void **state)
{
    *state = NULL;
    uint64_t kd[CLRUN_MAX_DIMS], ks[CLRUN_MAX_DIMS], rd[CLRUN_MAX_DIMS], rs[CLRUN_MAX_DIMS];
    int kept = box(x, reduced, false, kd, ks), red = box(x, reduced, true, rd, rs);
    uint64_t count = 1, outputs = 1;
    for (int i = 0; i < red; i++)
        count *= rd[i];
    for (int i = 0; i < kept; i++)
        outputs *= kd[i];
    uint64_t meta[3 + 4 * CLRUN_MAX_DIMS];
    size_t n = 0;
    meta[n++] = (uint64_t)kept;
    meta[n++] = (uint64_t)red;
    meta[n++] = count;
    for (int i = 0; i < kept; i++) meta[n++] = kd[i];
    for (int i = 0; i < kept; i++) meta[n++] = ks[i];
    for (int i = 0; i < red; i++) meta[n++] = rd[i];
    for (int i = 0; i < red; i++) meta[n++] = rs[i];
    clrun__kernel_state *st;
    clrun_status s = row_begin(ctx, "clrun_reduce_f32", 1, outputs, count, &st);
    if (s != CLRUN_OK)
        return s;
    s = clrun__table_buffer(ctx, meta, n * sizeof meta[0], &st->table);
    cl_int op = code;
    if (s == CLRUN_OK)
        s = row_args(ctx, st, 2, sizeof st->table, &st->table, sizeof op, &op);
    return clrun__kernel_state_done(st, s, state);
}

clrun_status clrun__reduce_enqueue(clrun_context *ctx, void *state, const clrun__op_call *call,
                                   const cl_mem *inputs, const cl_mem *outputs, cl_uint wait_count,
                                   const cl_event *wait_list, cl_event *done)
{
    return clrun__kernel_state_op_enqueue(ctx, state, call, inputs, outputs, wait_count, wait_list,
                                          done);
}

void clrun__reduce_release(void *state) { clrun__kernel_state_release(state); }

/* reduce_sum, reduce_mean and reduce_max: op->code is the reduction (REDUCE_* in norm.cl). */
static clrun_status reduce_prepare(clrun_context *ctx, const clrun__op *op,
                                   const clrun__op_call *call, void **state)
{
    bool reduced[CLRUN_MAX_DIMS];
    const clrun__infer_error quiet = {"reduce", NULL, 0};
    if (clrun__reduced_axes(call, reduced, &quiet) != CLRUN_OK)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_GRAPH, "reduce: prepare on axes infer refuses");
    return clrun__reduce_prepare(ctx, &call->inputs[0], reduced, op->code, state);
}

static const clrun__op_kernels softmax_kernels = {
    softmax_prepare, clrun__kernel_state_op_enqueue, clrun__kernel_state_release};
static const clrun__op_kernels layernorm_kernels = {
    layernorm_prepare, clrun__kernel_state_op_enqueue, clrun__kernel_state_release};
static const clrun__op_kernels reduce_kernels = {
    reduce_prepare, clrun__kernel_state_op_enqueue, clrun__kernel_state_release};

const clrun__named_kernels clrun__kernels_norm[] = {
    {"softmax", &softmax_kernels},       {"layernorm", &layernorm_kernels},
    {"reduce_sum", &reduce_kernels},     {"reduce_mean", &reduce_kernels},
    {"reduce_max", &reduce_kernels},     {NULL, NULL},
};
