/* Kernels of the index ops (kernels/index.cl): gather, gather_elements, pad, trilu, cumsum,
 * gather_grad, dropout. One launch each (two for gather_grad: zeroing, then the sums), one
 * work-item per output element (per line for cumsum, per column for gather_grad), with a table
 * of dims and strides where the rank varies. */
#include <stdio.h>
#include <stdlib.h>

#include "device/cl.h"
#include "graph/dropout_mask.h"
#include "graph/layout_geometry.h"
#include "ops/ops_data.h"
#include "ops/ops_index.h"
#include "ops/ops_internal.h"

/* One constant kernel argument: its index, size and value. */
typedef struct arg {
    cl_uint index;
    size_t size;
    const void *value;
} arg;

static clrun_status set_args(clrun_context *ctx, cl_kernel kernel, const arg *args, int count)
{
    clrun_status s = CLRUN_OK;
    for (int i = 0; i < count && s == CLRUN_OK; i++)
        s = clrun__arg(ctx, kernel, args[i].index, args[i].size, args[i].value);
    return s;
}

static clrun_status new_state(clrun_context *ctx, const clrun__op *op, cl_uint inputs,
                              clrun__kernel_state **out)
{
    *out = calloc(1, sizeof **out);
    if (*out == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "%s: node state", op->name);
    (*out)->inputs = inputs;
    (*out)->what = op->name;
    return CLRUN_OK;
}

static const char *index_suffix(const clrun_tensor_type *indices)
{
    return indices->dtype == CLRUN_I64 ? "i64" : "i32";
}

/* ---- indices outside their data ---------------------------------------------------------- */

clrun_status clrun__index_state_new(clrun_context *ctx, const clrun__op *op, cl_uint inputs,
                                    size_t size, clrun__index_state **out)
{
    *out = calloc(1, size);
    if (*out == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "%s: node state", op->name);
    (*out)->ks.inputs = inputs;
    (*out)->ks.what = op->name;
    const cl_uint none = CLRUN__NO_BAD_INDEX;
    cl_int err = CL_SUCCESS;
    (*out)->bad = clrun__cl.CreateBuffer(ctx->cl, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                                         sizeof none, (void *)&none, &err);
    if ((*out)->bad == NULL) {
        free(*out);
        *out = NULL;
        return clrun__fail_cl(ctx, err, "clCreateBuffer", "%s: the word for bad indices", op->name);
    }
    return CLRUN_OK;
}

void clrun__index_state_release(void *state)
{
    clrun__index_state *st = state;
    if (st && st->bad)
        clrun__cl.ReleaseMemObject(st->bad);
    clrun__kernel_state_release(state);
}

clrun_status clrun__index_state_done(void *st, void (*release)(void *), clrun_status s,
                                     void **state)
{
    if (s != CLRUN_OK) {
        release(st);
        return s;
    }
    *state = st;
    return CLRUN_OK;
}

clrun_status clrun__bad_word_take(clrun_context *ctx, cl_mem bad, const char *node, const char *what,
                                  cl_uint *value)
{
    *value = CLRUN__NO_BAD_INDEX;
    cl_int err = clrun__cl.EnqueueReadBuffer(ctx->queue, bad, CL_TRUE, 0, sizeof *value, value, 0,
                                             NULL, NULL);
    if (err != CL_SUCCESS)
        return clrun__fail_cl(ctx, err, "clEnqueueReadBuffer", "%s: the word for %s", node, what);
    if (*value == CLRUN__NO_BAD_INDEX)
        return CLRUN_OK;
    const cl_uint none = CLRUN__NO_BAD_INDEX;
    err = clrun__cl.EnqueueWriteBuffer(ctx->queue, bad, CL_TRUE, 0, sizeof none, &none, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return clrun__fail_cl(ctx, err, "clEnqueueWriteBuffer", "%s: the word for %s", node, what);
    return CLRUN_OK;
}

clrun_status clrun__index_check(clrun_context *ctx, void *state, const char *node)
{
    clrun__index_state *st = state;
    cl_uint bad;
    clrun_status s = clrun__bad_word_take(ctx, st->bad, node, "bad indices", &bad);
    if (s != CLRUN_OK || bad == CLRUN__NO_BAD_INDEX)
        return s;
    return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT,
                       "node '%s' (%s): the index%s at position %s%u of its indices is outside %s; "
                       "the run's outputs are discarded", node, st->ks.what,
                       st->tuples ? " tuple" : "", bad == CLRUN__NO_BAD_INDEX - 1 ? ">= " : "",
                       (unsigned)bad, st->range);
}

/* The range of an axis of length dim, for the message. */
static void axis_range(clrun__index_state *st, int64_t dim)
{
    snprintf(st->range, sizeof st->range, "the axis of length %lld (valid: %lld to %lld)",
             (long long)dim, -(long long)dim, (long long)dim - 1);
}

/* ---- gather ------------------------------------------------------------------------------ */

/* Without an axis attribute, the embedding form: axis 0 of a [V, D] table, negative indices
 * out of range. */
static clrun_status gather_prepare(clrun_context *ctx, const clrun__op *op,
                                   const clrun__op_call *call, void **state)
{
    clrun__index_state *ist;
    clrun_status s = clrun__index_state_new(ctx, op, 2, sizeof *ist, &ist);
    if (s != CLRUN_OK)
        return s;
    clrun__kernel_state *st = &ist->ks;
    const clrun_tensor_type *data = &call->inputs[0], *indices = &call->inputs[1];
    int64_t given;
    cl_int wrap = clrun__attr_int(call, "axis", &given);
    int axis = wrap ? (int)clrun__normalize_axis(given, data->rank) : 0;
    cl_ulong axis_dim = (cl_ulong)data->shape[axis], count = clrun_tensor_elements(indices);
    cl_ulong inner = clrun__dims_product(data, axis + 1, data->rank);
    cl_ulong n = clrun__dims_product(data, 0, axis) * count * inner;
    axis_range(ist, (int64_t)axis_dim);
    const arg args[] = {{3, sizeof n, &n}, {4, sizeof axis_dim, &axis_dim},
                        {5, sizeof count, &count}, {6, sizeof inner, &inner},
                        {7, sizeof wrap, &wrap}, {8, sizeof ist->bad, &ist->bad}};
    s = clrun__element_kernel(ctx, "clrun_gather", data->dtype, index_suffix(indices), &st->kernel);
    if (s == CLRUN_OK)
        s = set_args(ctx, st->kernel, args, 6);
    if (s == CLRUN_OK)
        s = clrun__flat_launch(ctx, st, n);
    return clrun__index_state_done(ist, clrun__index_state_release, s, state);
}

/* ---- gather_elements --------------------------------------------------------------------- */

static clrun_status gather_elements_prepare(clrun_context *ctx, const clrun__op *op,
                                            const clrun__op_call *call, void **state)
{
    clrun__index_state *ist;
    clrun_status s = clrun__index_state_new(ctx, op, 2, sizeof *ist, &ist);
    if (s != CLRUN_OK)
        return s;
    clrun__kernel_state *st = &ist->ks;
    const clrun_tensor_type *data = &call->inputs[0], *indices = &call->inputs[1];
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
    cl_ulong n = clrun_tensor_elements(indices);
    s = clrun__element_kernel(ctx, "clrun_gather_elements", data->dtype, index_suffix(indices),
                              &st->kernel);
    if (s == CLRUN_OK)
        s = clrun__table_buffer(ctx, meta, (size_t)(3 + 2 * rank) * sizeof meta[0], &st->table);
    axis_range(ist, data->shape[axis]);
    const arg args[] = {{3, sizeof n, &n}, {4, sizeof st->table, &st->table},
                        {5, sizeof ist->bad, &ist->bad}};
    if (s == CLRUN_OK)
        s = set_args(ctx, st->kernel, args, 3);
    if (s == CLRUN_OK)
        s = clrun__flat_launch(ctx, st, n);
    return clrun__index_state_done(ist, clrun__index_state_release, s, state);
}

/* ---- pad --------------------------------------------------------------------------------- */

static clrun_status pad_prepare(clrun_context *ctx, const clrun__op *op,
                                const clrun__op_call *call, void **state)
{
    clrun__kernel_state *st;
    clrun_status s = new_state(ctx, op, 1, &st);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *x = &call->inputs[0], *y = &call->outputs[0];
    int rank = x->rank;
    int64_t pads[CLRUN_MAX_ATTR_INTS], meta[1 + 4 * CLRUN_MAX_DIMS], stride = 1;
    clrun__attr_list(call, "pads", pads, CLRUN_MAX_ATTR_INTS);
    meta[0] = rank;
    for (int d = rank - 1; d >= 0; d--) {
        meta[1 + d] = y->shape[d];
        meta[1 + rank + d] = x->shape[d];
        meta[1 + 2 * rank + d] = pads[d];
        meta[1 + 3 * rank + d] = stride;
        stride *= x->shape[d];
    }
    cl_ulong n = clrun_tensor_elements(y), value = clrun__pad_value_bits(call);
    cl_int mode = (cl_int)clrun__attr_int_or(call, "mode", CLRUN__PAD_CONSTANT);
    s = clrun__element_kernel(ctx, "clrun_pad", x->dtype, NULL, &st->kernel);
    if (s == CLRUN_OK)
        s = clrun__table_buffer(ctx, meta, (size_t)(1 + 4 * rank) * sizeof meta[0], &st->table);
    const arg args[] = {{2, sizeof n, &n}, {3, sizeof st->table, &st->table},
                        {4, sizeof mode, &mode}, {5, sizeof value, &value}};
    if (s == CLRUN_OK)
        s = set_args(ctx, st->kernel, args, 4);
    if (s == CLRUN_OK)
        s = clrun__flat_launch(ctx, st, n);
    return clrun__kernel_state_done(st, s, state);
}

/* ---- trilu ------------------------------------------------------------------------------- */

static clrun_status trilu_prepare(clrun_context *ctx, const clrun__op *op,
                                  const clrun__op_call *call, void **state)
{
    clrun__kernel_state *st;
    clrun_status s = new_state(ctx, op, 1, &st);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *x = &call->inputs[0];
    cl_ulong n = clrun_tensor_elements(x);
    cl_ulong rows = (cl_ulong)x->shape[x->rank - 2], cols = (cl_ulong)x->shape[x->rank - 1];
    cl_long k = clrun__attr_int_or(call, "k", 0);
    cl_int upper = (cl_int)clrun__attr_int_or(call, "upper", 1);
    const arg args[] = {{2, sizeof n, &n}, {3, sizeof rows, &rows}, {4, sizeof cols, &cols},
                        {5, sizeof k, &k}, {6, sizeof upper, &upper}};
    s = clrun__element_kernel(ctx, "clrun_trilu", x->dtype, NULL, &st->kernel);
    if (s == CLRUN_OK)
        s = set_args(ctx, st->kernel, args, 5);
    if (s == CLRUN_OK)
        s = clrun__flat_launch(ctx, st, n);
    return clrun__kernel_state_done(st, s, state);
}

/* ---- cumsum ------------------------------------------------------------------------------ */

static clrun_status cumsum_prepare(clrun_context *ctx, const clrun__op *op,
                                   const clrun__op_call *call, void **state)
{
    const clrun_tensor_type *x = &call->inputs[0];
    if (x->dtype == CLRUN_F64 && !ctx->info.fp64)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT,
                           "cumsum: f64 needs a device with cl_khr_fp64, and %s has none",
                           ctx->info.name);
    clrun__kernel_state *st;
    clrun_status s = new_state(ctx, op, 1, &st);
    if (s != CLRUN_OK)
        return s;
    int axis = (int)clrun__normalize_axis(clrun__attr_int_or(call, "axis", 0), x->rank);
    cl_ulong len = (cl_ulong)x->shape[axis], inner = clrun__dims_product(x, axis + 1, x->rank);
    cl_ulong lines = clrun__dims_product(x, 0, axis) * inner;
    cl_int exclusive = (cl_int)clrun__attr_int_or(call, "exclusive", 0);
    cl_int reverse = (cl_int)clrun__attr_int_or(call, "reverse", 0);
    const arg args[] = {{2, sizeof lines, &lines}, {3, sizeof len, &len},
                        {4, sizeof inner, &inner}, {5, sizeof exclusive, &exclusive},
                        {6, sizeof reverse, &reverse}};
    const char *name = x->dtype == CLRUN_F64   ? "clrun_cumsum_f64"
                       : x->dtype == CLRUN_I32 ? "clrun_cumsum_i32"
                       : x->dtype == CLRUN_I64 ? "clrun_cumsum_i64"
                                               : "clrun_cumsum_f32";
    s = clrun__kernel(ctx, name, &st->kernel);
    if (s == CLRUN_OK)
        s = set_args(ctx, st->kernel, args, 5);
    if (s == CLRUN_OK)
        s = clrun__flat_launch(ctx, st, lines);
    return clrun__kernel_state_done(st, s, state);
}

/* ---- gather_grad ------------------------------------------------------------------------- */

typedef struct gather_grad_state {
    clrun__kernel_state ks; /* the sums: indices, dy, then the output; one work-item a column */
    cl_kernel zero;         /* clrun_zero_f32 over the output first */
    size_t zero_global, zero_local;
} gather_grad_state;

static void gather_grad_release(void *state)
{
    gather_grad_state *st = state;
    if (st && st->zero)
        clrun__cl.ReleaseKernel(st->zero);
    clrun__kernel_state_release(state);
}

/* The output is the data's type: [outer, size, inner] around the gathered axis (0 without the
 * axis attribute, the embedding form, where negative indices add nothing). */
static clrun_status gather_grad_prepare(clrun_context *ctx, const clrun__op *op,
                                        const clrun__op_call *call, void **state)
{
    gather_grad_state *st = calloc(1, sizeof *st);
    if (st == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "%s: node state", op->name);
    st->ks.inputs = 2;
    st->ks.what = op->name;
    const clrun_tensor_type *indices = &call->inputs[0], *out = &call->outputs[0];
    int64_t given;
    cl_int wrap = clrun__attr_int(call, "axis", &given);
    int axis = wrap ? (int)clrun__normalize_axis(given, out->rank) : 0;
    cl_ulong size = (cl_ulong)out->shape[axis], count = clrun_tensor_elements(indices);
    cl_ulong inner = clrun__dims_product(out, axis + 1, out->rank);
    cl_ulong columns = clrun__dims_product(out, 0, axis) * inner, n = clrun_tensor_elements(out);
    const arg args[] = {{3, sizeof columns, &columns}, {4, sizeof size, &size},
                        {5, sizeof count, &count}, {6, sizeof inner, &inner},
                        {7, sizeof wrap, &wrap}};
    clrun_status s = clrun__kernel(ctx, indices->dtype == CLRUN_I64 ? "clrun_gather_grad_i64"
                                                                    : "clrun_gather_grad_i32",
                                   &st->ks.kernel);
    if (s == CLRUN_OK)
        s = set_args(ctx, st->ks.kernel, args, 5);
    if (s == CLRUN_OK)
        s = clrun__flat_launch(ctx, &st->ks, columns);
    if (s == CLRUN_OK)
        s = clrun__kernel(ctx, "clrun_zero_f32", &st->zero);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->zero, 1, sizeof n, &n);
    if (s == CLRUN_OK)
        s = clrun__local_size(ctx, st->zero, 256, &st->zero_local);
    st->zero_global = clrun__round_up((size_t)n, st->zero_local);
    if (s != CLRUN_OK) {
        gather_grad_release(st);
        return s;
    }
    *state = st;
    return CLRUN_OK;
}

static clrun_status gather_grad_enqueue(clrun_context *ctx, void *state, const clrun__op_call *call,
                                        const cl_mem *inputs, const cl_mem *outputs,
                                        cl_uint wait_count, const cl_event *wait_list,
                                        cl_event *done)
{
    (void)call;
    gather_grad_state *st = state;
    clrun_status s = clrun__buffer_arg(ctx, st->zero, 0, outputs[0]);
    if (s == CLRUN_OK)
        s = clrun__buffer_args(ctx, st->ks.kernel, inputs, st->ks.inputs, outputs[0]);
    if (s != CLRUN_OK)
        return s;
    clrun__chain chain;
    clrun__chain_begin(&chain, ctx, wait_count, wait_list, done);
    s = clrun__chain_launch(&chain, st->zero, 1, &st->zero_global, &st->zero_local,
                            "gather_grad: zeroing");
    if (s == CLRUN_OK)
        s = clrun__chain_launch(&chain, st->ks.kernel, st->ks.dims, st->ks.global, st->ks.local,
                                st->ks.what);
    if (s != CLRUN_OK)
        return s;
    return clrun__chain_end(&chain);
}

/* ---- dropout ----------------------------------------------------------------------------- */

/* The threshold and scale come from graph/dropout_mask.h, the host's reference of the mask. */
static clrun_status dropout_prepare(clrun_context *ctx, const clrun__op *op,
                                    const clrun__op_call *call, void **state)
{
    clrun__kernel_state *st;
    clrun_status s = new_state(ctx, op, 2, &st);
    if (s != CLRUN_OK)
        return s;
    double ratio = clrun__attr_float_or(call, "ratio", 0.5);
    cl_ulong n = clrun_tensor_elements(&call->inputs[0]);
    cl_ulong stream = (cl_ulong)clrun__attr_int_or(call, "stream", 0);
    cl_uint threshold = clrun__dropout_threshold(ratio);
    cl_float scale = clrun__dropout_scale(ratio);
    const arg args[] = {{3, sizeof n, &n}, {4, sizeof stream, &stream},
                        {5, sizeof threshold, &threshold}, {6, sizeof scale, &scale}};
    s = clrun__kernel(ctx, "clrun_dropout", &st->kernel);
    if (s == CLRUN_OK)
        s = set_args(ctx, st->kernel, args, 4);
    if (s == CLRUN_OK)
        s = clrun__flat_launch(ctx, st, n);
    return clrun__kernel_state_done(st, s, state);
}

/* ---- the table --------------------------------------------------------------------------- */

static const clrun__op_kernels gather_kernels = {
    .prepare = gather_prepare,
    .enqueue = clrun__kernel_state_op_enqueue,
    .release = clrun__index_state_release,
    .check = clrun__index_check,
};
static const clrun__op_kernels gather_elements_kernels = {
    .prepare = gather_elements_prepare,
    .enqueue = clrun__kernel_state_op_enqueue,
    .release = clrun__index_state_release,
    .check = clrun__index_check,
};
static const clrun__op_kernels pad_kernels = {
    .prepare = pad_prepare,
    .enqueue = clrun__kernel_state_op_enqueue,
    .release = clrun__kernel_state_release,
};
static const clrun__op_kernels trilu_kernels = {
    .prepare = trilu_prepare,
    .enqueue = clrun__kernel_state_op_enqueue,
    .release = clrun__kernel_state_release,
};
static const clrun__op_kernels cumsum_kernels = {
    .prepare = cumsum_prepare,
    .enqueue = clrun__kernel_state_op_enqueue,
    .release = clrun__kernel_state_release,
};

static const clrun__op_kernels gather_grad_kernels = {
    .prepare = gather_grad_prepare,
    .enqueue = gather_grad_enqueue,
    .release = gather_grad_release,
};
static const clrun__op_kernels dropout_kernels = {
    .prepare = dropout_prepare,
    .enqueue = clrun__kernel_state_op_enqueue,
    .release = clrun__kernel_state_release,
};

const clrun__named_kernels clrun__kernels_index[] = {
    {"gather", &gather_kernels},           {"gather_elements", &gather_elements_kernels},
    {"pad", &pad_kernels},                 {"trilu", &trilu_kernels},
    {"cumsum", &cumsum_kernels},           {"gather_grad", &gather_grad_kernels},
    {"dropout", &dropout_kernels},         {NULL, NULL},
};
