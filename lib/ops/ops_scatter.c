/* Kernels of the scatter ops and index tuples (kernels/scatter.cl): scatter_elements and
 * scatter_nd (two launches: the data copied into the output, then the updates written in by the
 * work-item that owns each output line or column, in index order), gather_nd (one work-item per
 * output element) and top_k_indices (one per line). Indices outside the data fail the run through
 * the word of ops/ops_index.h. */
#include <stdio.h>
#include <stdlib.h>

#include "device/cl.h"
#include "graph/op_geometry.h"
#include "ops/ops_data.h"
#include "ops/ops_index.h"
#include "ops/ops_internal.h"

static const char *index_suffix(const clrun_tensor_type *indices)
{
    return indices->dtype == CLRUN_I64 ? "i64" : "i32";
}

static const char *dtype_suffix(clrun_dtype dtype)
{
    switch (dtype) {
    case CLRUN_F64: return "f64";
    case CLRUN_I32: return "i32";
    case CLRUN_I64: return "i64";
    default: return "f32";
    }
}

/* Refuses f64 arithmetic on a device without doubles. */
static clrun_status check_fp64(clrun_context *ctx, const clrun__op *op, clrun_dtype dtype)
{
    if (dtype != CLRUN_F64 || ctx->info.fp64)
        return CLRUN_OK;
    return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT,
                       "%s: f64 arithmetic needs a device with cl_khr_fp64, and %s has none",
                       op->name, ctx->info.name);
}

/* The index tuples' table of kernels/scatter.cl (TUPLE_OFFSET): [k, slice, tuples per batch,
 * batch stride, dims[k], strides[k]] for tuples into data's dims [batch, batch + k); and the
 * range the indices must fall in, for the message. */
static clrun_status tuple_table(clrun_context *ctx, clrun__index_state *st,
                                const clrun_tensor_type *data, const clrun_tensor_type *indices,
                                int batch)
{
    int k = (int)indices->shape[indices->rank - 1];
    uint64_t meta[4 + 2 * CLRUN_MAX_DIMS];
    uint64_t tuples = clrun_tensor_elements(indices) / (uint64_t)k;
    meta[0] = (uint64_t)k;
    meta[1] = clrun__dims_product(data, batch + k, data->rank);
    meta[2] = tuples / clrun__dims_product(data, 0, batch);
    meta[3] = clrun__dims_product(data, batch, data->rank);
    uint64_t stride = meta[1];
    for (int c = k - 1; c >= 0; c--) {
        meta[4 + c] = (uint64_t)data->shape[batch + c];
        meta[4 + k + c] = stride;
        stride *= (uint64_t)data->shape[batch + c];
    }
    st->tuples = true;
    size_t used = (size_t)snprintf(st->range, sizeof st->range, "dims [");
    for (int c = 0; c < k && used < sizeof st->range; c++)
        used += (size_t)snprintf(st->range + used, sizeof st->range - used, "%s%lld", c ? ", " : "",
                                 (long long)data->shape[batch + c]);
    if (used < sizeof st->range)
        snprintf(st->range + used, sizeof st->range - used,
                 "] of the data (valid: -dim to dim - 1 in each)");
    return clrun__table_buffer(ctx, meta, (size_t)(4 + 2 * k) * sizeof meta[0], &st->ks.table);
}

/* ---- scatter_elements, scatter_nd -------------------------------------------------------- */

typedef struct scatter_state {
    clrun__index_state ist; /* first: the update pass (indices, updates, then the output) */
    cl_kernel copy;         /* data -> output, first */
    size_t copy_global, copy_local;
} scatter_state;

static void scatter_release(void *state)
{
    scatter_state *st = state;
    if (st && st->copy)
        clrun__cl.ReleaseKernel(st->copy);
    clrun__index_state_release(state);
}

/* The copy and the update kernel (by element size without a reduction, by dtype with one) over
 * `items` work-items, its constant arguments from `first` on: the table, the reduction and the
 * word. */
static clrun_status scatter_kernels(clrun_context *ctx, scatter_state *st, const char *prefix,
                                    const clrun__op_call *call, cl_uint first, uint64_t items)
{
    const clrun_tensor_type *data = &call->inputs[0], *indices = &call->inputs[1];
    cl_int reduction = (cl_int)clrun__attr_int_or(call, "reduction", 0);
    cl_ulong n = clrun_tensor_elements(data);
    clrun_status s;
    if (reduction == 0) {
        s = clrun__element_kernel(ctx, prefix, data->dtype, index_suffix(indices), &st->ist.ks.kernel);
    } else {
        char name[64];
        snprintf(name, sizeof name, "%s_%s_%s", prefix, dtype_suffix(data->dtype), index_suffix(indices));
        s = clrun__kernel(ctx, name, &st->ist.ks.kernel);
    }
    cl_kernel k = st->ist.ks.kernel;
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, k, first, sizeof st->ist.ks.table, &st->ist.ks.table);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, k, first + 1, sizeof reduction, &reduction);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, k, first + 2, sizeof st->ist.bad, &st->ist.bad);
    if (s == CLRUN_OK)
        s = clrun__flat_launch(ctx, &st->ist.ks, items);
    if (s == CLRUN_OK)
        s = clrun__element_kernel(ctx, "clrun_scatter_copy", data->dtype, NULL, &st->copy);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->copy, 2, sizeof n, &n);
    if (s == CLRUN_OK)
        s = clrun__local_size(ctx, st->copy, 256, &st->copy_local);
    st->copy_global = clrun__round_up((size_t)n, st->copy_local);
    return s;
}

static clrun_status scatter_elements_prepare(clrun_context *ctx, const clrun__op *op,
                                             const clrun__op_call *call, void **state)
{
    const clrun_tensor_type *data = &call->inputs[0], *indices = &call->inputs[1];
    bool reduces = clrun__attr_int_or(call, "reduction", 0) != 0;
    clrun_status s = reduces ? check_fp64(ctx, op, data->dtype) : CLRUN_OK;
    scatter_state *st = NULL;
    if (s == CLRUN_OK)
        s = clrun__index_state_new(ctx, op, 2, sizeof *st, (clrun__index_state **)&st);
    if (s != CLRUN_OK)
        return s;
    int rank = data->rank;
    int axis = (int)clrun__normalize_axis(clrun__attr_int_or(call, "axis", 0), rank);
    uint64_t meta[3 + 2 * CLRUN_MAX_DIMS], stride = 1;
    meta[0] = (uint64_t)rank;
    meta[1] = (uint64_t)axis;
    for (int d = rank - 1; d >= 0; d--) {
        meta[2 + d] = (uint64_t)indices->shape[d];
        meta[2 + rank + d] = stride;
        stride *= (uint64_t)data->shape[d];
    }
    meta[2 + 2 * rank] = (uint64_t)data->shape[axis];
    snprintf(st->ist.range, sizeof st->ist.range, "the axis of length %lld (valid: %lld to %lld)",
             (long long)data->shape[axis], -(long long)data->shape[axis],
             (long long)data->shape[axis] - 1);
    cl_ulong lines = clrun_tensor_elements(indices) / (cl_ulong)indices->shape[axis];
    s = clrun__table_buffer(ctx, meta, (size_t)(3 + 2 * rank) * sizeof meta[0], &st->ist.ks.table);
    if (s == CLRUN_OK)
        s = scatter_kernels(ctx, st, "clrun_scatter_elements", call, 4, lines);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->ist.ks.kernel, 3, sizeof lines, &lines);
    return clrun__index_state_done(st, scatter_release, s, state);
}

static clrun_status scatter_nd_prepare(clrun_context *ctx, const clrun__op *op,
                                       const clrun__op_call *call, void **state)
{
    const clrun_tensor_type *data = &call->inputs[0], *indices = &call->inputs[1];
    bool reduces = clrun__attr_int_or(call, "reduction", 0) != 0;
    clrun_status s = reduces ? check_fp64(ctx, op, data->dtype) : CLRUN_OK;
    scatter_state *st = NULL;
    if (s == CLRUN_OK)
        s = clrun__index_state_new(ctx, op, 2, sizeof *st, (clrun__index_state **)&st);
    if (s != CLRUN_OK)
        return s;
    int k = (int)indices->shape[indices->rank - 1];
    s = tuple_table(ctx, &st->ist, data, indices, 0);
    if (s == CLRUN_OK)
        s = scatter_kernels(ctx, st, "clrun_scatter_nd", call, 3,
                            clrun__dims_product(data, k, data->rank));
    return clrun__index_state_done(st, scatter_release, s, state);
}

static clrun_status scatter_enqueue(clrun_context *ctx, void *state, const clrun__op_call *call,
                                    const cl_mem *inputs, const cl_mem *outputs, cl_uint wait_count,
                                    const cl_event *wait_list, cl_event *done)
{
    (void)call;
    scatter_state *st = state;
    clrun_status s = clrun__buffer_args(ctx, st->copy, inputs, 1, outputs[0]);
    if (s == CLRUN_OK)
        s = clrun__buffer_args(ctx, st->ist.ks.kernel, inputs + 1, 2, outputs[0]);
    if (s != CLRUN_OK)
        return s;
    clrun__chain chain;
    clrun__chain_begin(&chain, ctx, wait_count, wait_list, done);
    s = clrun__chain_launch(&chain, st->copy, 1, &st->copy_global, &st->copy_local,
                            st->ist.ks.what);
    if (s == CLRUN_OK)
        s = clrun__chain_launch(&chain, st->ist.ks.kernel, st->ist.ks.dims, st->ist.ks.global,
                                st->ist.ks.local, st->ist.ks.what);
    if (s != CLRUN_OK)
        return s;
    return clrun__chain_end(&chain);
}

/* ---- gather_nd --------------------------------------------------------------------------- */

static clrun_status gather_nd_prepare(clrun_context *ctx, const clrun__op *op,
                                      const clrun__op_call *call, void **state)
{
    clrun__index_state *st;
    clrun_status s = clrun__index_state_new(ctx, op, 2, sizeof *st, &st);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *data = &call->inputs[0], *indices = &call->inputs[1];
    int batch = (int)clrun__attr_int_or(call, "batch_dims", 0);
    cl_ulong n = clrun_tensor_elements(&call->outputs[0]);
    s = tuple_table(ctx, st, data, indices, batch);
    if (s == CLRUN_OK)
        s = clrun__element_kernel(ctx, "clrun_gather_nd", data->dtype, index_suffix(indices),
                                  &st->ks.kernel);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->ks.kernel, 3, sizeof n, &n);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->ks.kernel, 4, sizeof st->ks.table, &st->ks.table);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->ks.kernel, 5, sizeof st->bad, &st->bad);
    if (s == CLRUN_OK)
        s = clrun__flat_launch(ctx, &st->ks, n);
    return clrun__index_state_done(st, clrun__index_state_release, s, state);
}

/* ---- top_k_indices ----------------------------------------------------------------------- */

static clrun_status top_k_prepare(clrun_context *ctx, const clrun__op *op,
                                  const clrun__op_call *call, void **state)
{
    const clrun_tensor_type *x = &call->inputs[0];
    clrun_status s = check_fp64(ctx, op, x->dtype);
    if (s != CLRUN_OK)
        return s;
    clrun__kernel_state *st = calloc(1, sizeof *st);
    if (st == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "%s: node state", op->name);
    st->inputs = 1;
    st->what = op->name;
    int axis = (int)clrun__normalize_axis(clrun__attr_int_or(call, "axis", -1), x->rank);
    cl_ulong len = (cl_ulong)x->shape[axis], inner = clrun__dims_product(x, axis + 1, x->rank);
    cl_ulong lines = clrun__dims_product(x, 0, axis) * inner;
    cl_ulong k = (cl_ulong)clrun__attr_int_or(call, "k", 1);
    cl_int largest = (cl_int)clrun__attr_int_or(call, "largest", 1);
    char name[32];
    snprintf(name, sizeof name, "clrun_top_k_%s", dtype_suffix(x->dtype));
    s = clrun__kernel(ctx, name, &st->kernel);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->kernel, 2, sizeof lines, &lines);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->kernel, 3, sizeof len, &len);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->kernel, 4, sizeof inner, &inner);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->kernel, 5, sizeof k, &k);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->kernel, 6, sizeof largest, &largest);
    if (s == CLRUN_OK)
        s = clrun__flat_launch(ctx, st, lines);
    return clrun__kernel_state_done(st, s, state);
}

/* ---- the table --------------------------------------------------------------------------- */

static const clrun__op_kernels scatter_elements_kernels = {
    .prepare = scatter_elements_prepare,
    .enqueue = scatter_enqueue,
    .release = scatter_release,
    .check = clrun__index_check,
};
static const clrun__op_kernels scatter_nd_kernels = {
    .prepare = scatter_nd_prepare,
    .enqueue = scatter_enqueue,
    .release = scatter_release,
    .check = clrun__index_check,
};
static const clrun__op_kernels gather_nd_kernels = {
    .prepare = gather_nd_prepare,
    .enqueue = clrun__kernel_state_op_enqueue,
    .release = clrun__index_state_release,
    .check = clrun__index_check,
};
static const clrun__op_kernels top_k_kernels = {
    .prepare = top_k_prepare,
    .enqueue = clrun__kernel_state_op_enqueue,
    .release = clrun__kernel_state_release,
};

const clrun__named_kernels clrun__kernels_scatter[] = {
    {"scatter_elements", &scatter_elements_kernels},
    {"scatter_nd", &scatter_nd_kernels},
    {"gather_nd", &gather_nd_kernels},
    {"top_k_indices", &top_k_kernels},
    {NULL, NULL},
};
