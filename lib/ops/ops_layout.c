/* Kernels of the layout ops (kernels/layout.cl): transpose, reshape, concat, slice, gather. They move 32-bit
 * words, so one kernel serves f32 and i32. Concat is one launch per input, chained. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "device/cl.h"
#include "ops/ops_internal.h"

/* Up to CLRUN__MAX_CONCAT launches of one kernel; each has its own constant arguments, so each gets
 * its own cl_kernel (hence no clrun__kernel_state). */
typedef struct layout_state {
    cl_kernel kernels[CLRUN__MAX_CONCAT];
    int launches;
    cl_mem meta;               /* transpose: the shape table */
    int inputs;                /* buffer arguments per launch: input (or all for gather), out */
    cl_uint dims;              /* 1 or 2 */
    size_t global[CLRUN__MAX_CONCAT][2];
    size_t local[2];
} layout_state;

static void layout_release(void *opaque)
{
    layout_state *st = opaque;
    if (st == NULL)
        return;
    for (int i = 0; i < CLRUN__MAX_CONCAT; i++)
        if (st->kernels[i])
            clrun__cl.ReleaseKernel(st->kernels[i]);
    if (st->meta)
        clrun__cl.ReleaseMemObject(st->meta);
    free(st);
}

static clrun_status layout_alloc(clrun_context *ctx, const char *op, layout_state **out)
{
    *out = calloc(1, sizeof **out);
    if (*out == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "%s: node state", op);
    return CLRUN_OK;
}

static clrun_status layout_done(layout_state *st, clrun_status s, void **state)
{
    if (s != CLRUN_OK) {
        layout_release(st);
        return s;
    }
    *state = st;
    return CLRUN_OK;
}

/* Launch i of a concat reads input i; every other op has one launch over all its inputs. */
static clrun_status layout_enqueue(clrun_context *ctx, void *opaque, const clrun__op_call *call,
                                   const cl_mem *inputs, const cl_mem *outputs, cl_uint wait_count,
                                   const cl_event *wait_list, cl_event *done)
{
    (void)call;
    layout_state *st = opaque;
    clrun__chain chain;
    clrun__chain_begin(&chain, ctx, wait_count, wait_list, done);
    clrun_status s = CLRUN_OK;
    for (int l = 0; l < st->launches && s == CLRUN_OK; l++) {
        cl_kernel k = st->kernels[l];
        const cl_mem *in = st->launches > 1 ? &inputs[l] : inputs;
        s = clrun__buffer_args(ctx, k, in, (cl_uint)st->inputs, outputs[0]);
        if (s == CLRUN_OK)
            s = clrun__chain_launch(&chain, k, st->dims, st->global[l], st->local, "layout");
    }
    if (s != CLRUN_OK) {
        clrun__chain_abort(&chain);
        return s;
    }
    return clrun__chain_end(&chain);
}


/* ---- transpose --------------------------------------------------------------------------- */

/* The shape table: output dims with the input strides they walk, size-1 dims dropped and
 * neighbours merged where the input walks them as one. */
static size_t transpose_table(const clrun__op_call *call, uint64_t *meta)
{
    const clrun_tensor_type *x = &call->inputs[0];
    int64_t perm[CLRUN_MAX_ATTR_INTS];
    clrun__attr_list(call, "perm", perm, CLRUN_MAX_ATTR_INTS);
    uint64_t in_stride[CLRUN_MAX_DIMS], s = 1;
    for (int d = x->rank - 1; d >= 0; d--) {
        in_stride[d] = s;
        s *= (uint64_t)x->shape[d];
    }
    uint64_t dims[CLRUN_MAX_DIMS], strides[CLRUN_MAX_DIMS];
    int rank = 0;
    for (int d = 0; d < x->rank; d++) {
        uint64_t n = (uint64_t)x->shape[perm[d]], stride = in_stride[perm[d]];
        if (n == 1)
            continue;
        if (rank > 0 && strides[rank - 1] == stride * n) {
            dims[rank - 1] *= n;
            strides[rank - 1] = stride;
            continue;
        }
        dims[rank] = n;
        strides[rank++] = stride;
    }
    if (rank == 0) {
        dims[0] = 1;
        strides[0] = 0;
        rank = 1;
    }
    meta[0] = (uint64_t)rank;
    for (int d = 0; d < rank; d++) {
        meta[1 + d] = dims[d];
        meta[1 + rank + d] = strides[d];
    }
    return 1 + 2 * (size_t)rank;
}

/* A one-launch, 1-D state over `n` elements of kernel `name`. */
static clrun_status flat_begin(clrun_context *ctx, const char *name, uint64_t n, layout_state *st)
{
    st->launches = 1;
    st->inputs = 1;
    st->dims = 1;
    clrun_status s = clrun__kernel(ctx, name, &st->kernels[0]);
    if (s == CLRUN_OK)
        s = clrun__local_size(ctx, st->kernels[0], 256, &st->local[0]);
    if (s == CLRUN_OK) {
        st->global[0][0] = clrun__round_up((size_t)n, st->local[0]);
        cl_ulong count = n;
        s = clrun__arg(ctx, st->kernels[0], 2, sizeof count, &count);
    }
    return s;
}

static clrun_status transpose_prepare(clrun_context *ctx, const clrun__op *op,
                                      const clrun__op_call *call, void **state)
{
    (void)op;
    layout_state *st;
    clrun_status s = layout_alloc(ctx, "transpose", &st);
    if (s != CLRUN_OK)
        return s;
    uint64_t meta[1 + 2 * CLRUN_MAX_DIMS];
    size_t count = transpose_table(call, meta);
    s = flat_begin(ctx, "clrun_transpose_u32", clrun_tensor_elements(&call->inputs[0]), st);
    if (s == CLRUN_OK)
        s = clrun__table_buffer(ctx, meta, count * sizeof meta[0], &st->meta);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->kernels[0], 3, sizeof st->meta, &st->meta);
    return layout_done(st, s, state);
}

/* ---- reshape ----------------------------------------------------------------------------- */

/* A reshape moves no data when its output takes its input's buffer; otherwise it is a copy. */
static clrun_status reshape_prepare(clrun_context *ctx, const clrun__op *op,
                                    const clrun__op_call *call, void **state)
{
    (void)op;
    layout_state *st;
    clrun_status s = layout_alloc(ctx, "reshape", &st);
    if (s == CLRUN_OK)
        s = flat_begin(ctx, "clrun_copy_u32", clrun_tensor_elements(&call->inputs[0]), st);
    return layout_done(st, s, state);
}

static clrun_status reshape_enqueue(clrun_context *ctx, void *opaque, const clrun__op_call *call,
                                    const cl_mem *inputs, const cl_mem *outputs,
                                    cl_uint wait_count, const cl_event *wait_list, cl_event *done)
{
    if (inputs[0] != outputs[0])
        return layout_enqueue(ctx, opaque, call, inputs, outputs, wait_count, wait_list, done);
    clrun__chain chain;
    clrun__chain_begin(&chain, ctx, wait_count, wait_list, done);
    return clrun__chain_end(&chain);
}

/* ---- concat and slice -------------------------------------------------------------------- */

/* Sets a copy_rows kernel's sizes: rows runs of length words, from src (pitch, offset) to dst. */
static clrun_status copy_rows_args(clrun_context *ctx, layout_state *st, int l, cl_ulong length,
                                   cl_ulong rows, cl_ulong src_pitch, cl_ulong src_offset,
                                   cl_ulong dst_pitch, cl_ulong dst_offset)
{
    const cl_ulong values[6] = {length, rows, src_pitch, src_offset, dst_pitch, dst_offset};
    clrun_status s = CLRUN_OK;
    for (cl_uint i = 0; i < 6 && s == CLRUN_OK; i++)
        s = clrun__arg(ctx, st->kernels[l], 2 + i, sizeof values[i], &values[i]);
    st->global[l][0] = clrun__round_up((size_t)length, st->local[0]);
    st->global[l][1] = (size_t)rows;
    return s;
}

/* A state of `launches` copy_rows kernels whose runs are about `length` words long. */
static clrun_status copy_rows_begin(clrun_context *ctx, int launches, uint64_t length,
                                    layout_state *st)
{
    st->launches = launches;
    st->inputs = 1;
    st->dims = 2;
    st->local[1] = 1;
    clrun_status s = CLRUN_OK;
    for (int l = 0; l < launches && s == CLRUN_OK; l++)
        s = clrun__kernel(ctx, "clrun_copy_rows_u32", &st->kernels[l]);
    if (s == CLRUN_OK)
        s = clrun__local_size(ctx, st->kernels[0], length < 256 ? (size_t)length : 256,
                              &st->local[0]);
    return s;
}

static clrun_status concat_prepare(clrun_context *ctx, const clrun__op *op,
                                   const clrun__op_call *call, void **state)
{
    (void)op;
    layout_state *st;
    clrun_status s = layout_alloc(ctx, "concat", &st);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *y = &call->outputs[0];
    int axis = (int)clrun__normalize_axis(clrun__attr_int_or(call, "axis", 0), y->rank);
    uint64_t outer = clrun__dims_product(y, 0, axis), inner = clrun__dims_product(y, axis + 1, y->rank);
    uint64_t total = (uint64_t)y->shape[axis] * inner, before = 0;
    s = copy_rows_begin(ctx, call->input_count, (uint64_t)call->inputs[0].shape[axis] * inner, st);
    for (int i = 0; i < call->input_count && s == CLRUN_OK; i++) {
        uint64_t length = (uint64_t)call->inputs[i].shape[axis] * inner;
        s = copy_rows_args(ctx, st, i, length, outer, length, 0, total, before);
        before += length;
    }
    return layout_done(st, s, state);
}

static clrun_status slice_prepare(clrun_context *ctx, const clrun__op *op,
                                  const clrun__op_call *call, void **state)
{
    (void)op;
    layout_state *st;
    clrun_status s = layout_alloc(ctx, "slice", &st);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *x = &call->inputs[0];
    int64_t axis, start, end;
    clrun__slice_range(call, &axis, &start, &end);
    uint64_t outer = clrun__dims_product(x, 0, (int)axis);
    uint64_t inner = clrun__dims_product(x, (int)axis + 1, x->rank);
    uint64_t length = (uint64_t)(end - start) * inner;
    s = copy_rows_begin(ctx, 1, length, st);
    if (s == CLRUN_OK)
        s = copy_rows_args(ctx, st, 0, length, outer, (uint64_t)x->shape[axis] * inner,
                           (uint64_t)start * inner, length, 0);
    return layout_done(st, s, state);
}

/* ---- gather ------------------------------------------------------------------------------ */

static clrun_status gather_prepare(clrun_context *ctx, const clrun__op *op,
                                   const clrun__op_call *call, void **state)
{
    (void)op;
    layout_state *st;
    clrun_status s = layout_alloc(ctx, "gather", &st);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *table = &call->inputs[0];
    cl_ulong V = (cl_ulong)table->shape[0], D = (cl_ulong)table->shape[1];
    cl_ulong count = clrun_tensor_elements(&call->inputs[1]);
    st->launches = 1;
    st->inputs = 2;
    st->dims = 2;
    st->local[1] = 1;
    s = clrun__kernel(ctx, "clrun_gather_u32", &st->kernels[0]);
    if (s == CLRUN_OK)
        s = clrun__local_size(ctx, st->kernels[0], D < 256 ? (size_t)D : 256, &st->local[0]);
    const cl_ulong values[3] = {V, D, count};
    for (cl_uint i = 0; i < 3 && s == CLRUN_OK; i++)
        s = clrun__arg(ctx, st->kernels[0], 3 + i, sizeof values[i], &values[i]);
    st->global[0][0] = clrun__round_up((size_t)D, st->local[0] ? st->local[0] : 1);
    st->global[0][1] = (size_t)count;
    return layout_done(st, s, state);
}

/* ---- the table --------------------------------------------------------------------------- */

static const clrun__op_kernels transpose_kernels = {transpose_prepare, layout_enqueue,
                                                    layout_release};
static const clrun__op_kernels reshape_kernels = {reshape_prepare, reshape_enqueue, layout_release};
static const clrun__op_kernels concat_kernels = {concat_prepare, layout_enqueue, layout_release};
static const clrun__op_kernels slice_kernels = {slice_prepare, layout_enqueue, layout_release};
static const clrun__op_kernels gather_kernels = {gather_prepare, layout_enqueue, layout_release};

const clrun__named_kernels clrun__kernels_layout[] = {
    {"transpose", &transpose_kernels}, {"reshape", &reshape_kernels},
    {"concat", &concat_kernels},       {"slice", &slice_kernels},
    {"gather", &gather_kernels},       {NULL, NULL},
};
