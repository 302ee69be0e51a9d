/* Kernels of the layout ops (kernels/layout.cl). Every op that copies one input through a fixed
 * index map (transpose, reshape, slice, split, expand, tile, depth_to_space, space_to_depth)
 * runs its strided view (graph/layout_geometry.h): as row copies when the view is whole runs of
 * the input, as run copies over two outer dims when it is three dims with a contiguous last
 * (the transposes that split and merge attention heads), else as one element per work-item
 * through a table of dims and strides. Concat is
 * one row copy per input, chained. Kernels exist per element size, so every dtype moves. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/cl.h"
#include "graph/layout_geometry.h"
#include "ops/ops_data.h"
#include "ops/ops_internal.h"

/* ---- what the element-moving families share ---------------------------------------------- */

const char *clrun__element_suffix(clrun_dtype dtype)
{
    switch (clrun_dtype_size(dtype)) {
    case 1: return "u8";
    case 2: return "u16";
    case 8: return "u64";
    default: return "u32";
    }
}

void clrun__element_kernel_name(const char *prefix, clrun_dtype dtype, const char *index_suffix,
                                char *buf, size_t size)
{
    snprintf(buf, size, "%s_%s%s%s", prefix, clrun__element_suffix(dtype),
             index_suffix ? "_" : "", index_suffix ? index_suffix : "");
}

clrun_status clrun__element_kernel(clrun_context *ctx, const char *prefix, clrun_dtype dtype,
                                   const char *index_suffix, cl_kernel *out)
{
    char name[96];
    clrun__element_kernel_name(prefix, dtype, index_suffix, name, sizeof name);
    return clrun__kernel(ctx, name, out);
}

clrun_status clrun__flat_launch(clrun_context *ctx, clrun__kernel_state *st, uint64_t n)
{
    st->dims = 1;
    clrun_status s = clrun__local_size(ctx, st->kernel, 256, &st->local[0]);
    if (s == CLRUN_OK)
        st->global[0] = clrun__round_up((size_t)n, st->local[0]);
    return s;
}

/* ---- views ------------------------------------------------------------------------------- */

/* Runs at least this long go through copy_rows, which needs no division per element; shorter
 * ones would leave work-groups nearly empty. */
#define ROW_COPY_MIN 32
/* The work-group along a run of copy_rows and copy_runs of `length` elements (their items past
 * it idle): 256 from 128 elements on, else the largest power of two within the run. POCL
 * compiles a kernel once per work-group size, and the largest power of two within 256
 * compiled ShuffleNetV2's channel shuffles (runs of 784, 196 and 49) three times; runs of 196
 * copy as fast in groups of 256 as in groups of 128 (16-18 us a [1,2,116,14,14] shuffle, both),
 * where runs of 49 took 2 us more in groups of 256 than in groups of 32. */
static size_t row_copy_group(cl_ulong length)
{
    return length >= 128 ? 256 : (size_t)length;
}

/* Sets a copy_rows kernel's sizes: rows runs of length elements, from src (pitch, offset) to
 * dst; global and local are the launch's. */
static clrun_status copy_rows_args(clrun_context *ctx, cl_kernel kernel, cl_ulong length,
                                   cl_ulong rows, cl_ulong src_pitch, cl_ulong src_offset,
                                   cl_ulong dst_pitch, cl_ulong dst_offset, size_t *global,
                                   size_t *local)
{
    const cl_ulong values[6] = {length, rows, src_pitch, src_offset, dst_pitch, dst_offset};
    clrun_status s = clrun__local_size(ctx, kernel, row_copy_group(length), &local[0]);
    for (cl_uint i = 0; i < 6 && s == CLRUN_OK; i++)
        s = clrun__arg(ctx, kernel, 2 + i, sizeof values[i], &values[i]);
    local[1] = 1;
    global[0] = clrun__round_up((size_t)length, local[0]);
    global[1] = (size_t)rows;
    return s;
}

/* A view of one or two dims whose last is contiguous: rows of the input. */
static bool is_rows(const clrun__view *v)
{
    return v->strides[v->rank - 1] == 1 && v->dims[v->rank - 1] >= ROW_COPY_MIN &&
           (v->rank == 1 || (v->rank == 2 && v->strides[0] >= 0));
}

static clrun_status rows_state(clrun_context *ctx, const clrun__view *v, clrun_dtype dtype,
                               clrun__kernel_state *st)
{
    cl_ulong rows = v->rank == 2 ? (cl_ulong)v->dims[0] : 1;
    cl_ulong length = (cl_ulong)v->dims[v->rank - 1];
    cl_ulong pitch = v->rank == 2 ? (cl_ulong)v->strides[0] : 0;
    st->dims = 2;
    clrun_status s = clrun__element_kernel(ctx, "clrun_copy_rows", dtype, NULL, &st->kernel);
    if (s == CLRUN_OK)
        s = copy_rows_args(ctx, st->kernel, length, rows, pitch, (cl_ulong)v->base, length, 0,
                           st->global, st->local);
    return s;
}

/* A view of three dims whose last is contiguous: runs of the input over two outer dims. */
static bool is_runs(const clrun__view *v)
{
    return v->rank == 3 && v->strides[2] == 1 && v->dims[2] >= ROW_COPY_MIN;
}

static clrun_status runs_state(clrun_context *ctx, const clrun__view *v, clrun_dtype dtype,
                               clrun__kernel_state *st)
{
    const cl_ulong length = (cl_ulong)v->dims[2];
    const cl_long values[3] = {v->strides[0], v->strides[1], v->base};
    st->dims = 3;
    clrun_status s = clrun__element_kernel(ctx, "clrun_copy_runs", dtype, NULL, &st->kernel);
    if (s == CLRUN_OK)
        s = clrun__local_size(ctx, st->kernel, row_copy_group(length), &st->local[0]);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->kernel, 2, sizeof length, &length);
    for (cl_uint i = 0; i < 3 && s == CLRUN_OK; i++)
        s = clrun__arg(ctx, st->kernel, 3 + i, sizeof values[i], &values[i]);
    if (s != CLRUN_OK)
        return s;
    st->local[1] = st->local[2] = 1;
    st->global[0] = clrun__round_up((size_t)length, st->local[0]);
    st->global[1] = (size_t)v->dims[1];
    st->global[2] = (size_t)v->dims[0];
    return CLRUN_OK;
}

static clrun_status strided_state(clrun_context *ctx, const clrun__view *v, clrun_dtype dtype,
                                  clrun__kernel_state *st)
{
    int64_t meta[1 + 2 * CLRUN__VIEW_MAX_RANK];
    uint64_t n = 1;
    meta[0] = v->rank;
    for (int d = 0; d < v->rank; d++) {
        meta[1 + d] = v->dims[d];
        meta[1 + v->rank + d] = v->strides[d];
        n *= (uint64_t)v->dims[d];
    }
    cl_ulong count = n;
    cl_long base = v->base;
    clrun_status s = clrun__element_kernel(ctx, "clrun_strided", dtype, NULL, &st->kernel);
    if (s == CLRUN_OK)
        s = clrun__table_buffer(ctx, meta, (size_t)(1 + 2 * v->rank) * sizeof meta[0], &st->table);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->kernel, 2, sizeof count, &count);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->kernel, 3, sizeof st->table, &st->table);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->kernel, 4, sizeof base, &base);
    if (s == CLRUN_OK)
        s = clrun__flat_launch(ctx, st, n);
    return s;
}

static clrun_status view_prepare(clrun_context *ctx, const clrun__op *op,
                                 const clrun__op_call *call, void **state)
{
    clrun__kernel_state *st = calloc(1, sizeof *st);
    if (st == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "%s: node state", op->name);
    st->inputs = 1;
    st->what = op->name;
    clrun__view v;
    clrun_status s;
    if (!clrun__view_of(op->name, call, &v))
        s = clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT, "%s: not a view op", op->name);
    else if (is_rows(&v))
        s = rows_state(ctx, &v, call->inputs[0].dtype, st);
    else if (is_runs(&v))
        s = runs_state(ctx, &v, call->inputs[0].dtype, st);
    else
        s = strided_state(ctx, &v, call->inputs[0].dtype, st);
    return clrun__kernel_state_done(st, s, state);
}

/* A reshape moves no data when its output takes its input's buffer, as an executor's mostly
 * does; otherwise it is a copy, whose kernel is made at the first copy: made at prepare, it
 * built `layout.cl` on every first run for nothing (0.1 s with empty caches, MobileNetV3's
 * flatten). The executor serialises its runs, so the state is not made twice. */
typedef struct reshape_state {
    const clrun__op *op;
    void *copy; /* view_prepare's state, NULL until a copy is asked */
} reshape_state;

static clrun_status reshape_prepare(clrun_context *ctx, const clrun__op *op,
                                    const clrun__op_call *call, void **state)
{
    clrun__view v;
    if (!clrun__view_of(op->name, call, &v))
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT, "%s: not a view op", op->name);
    reshape_state *st = calloc(1, sizeof *st);
    if (st == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "%s: node state", op->name);
    st->op = op;
    *state = st;
    return CLRUN_OK;
}

static clrun_status reshape_enqueue(clrun_context *ctx, void *state, const clrun__op_call *call,
                                    const cl_mem *inputs, const cl_mem *outputs,
                                    cl_uint wait_count, const cl_event *wait_list, cl_event *done)
{
    reshape_state *st = state;
    if (inputs[0] != outputs[0]) {
        clrun_status s = st->copy ? CLRUN_OK : view_prepare(ctx, st->op, call, &st->copy);
        if (s != CLRUN_OK)
            return s;
        return clrun__kernel_state_op_enqueue(ctx, st->copy, call, inputs, outputs, wait_count,
                                              wait_list, done);
    }
    clrun__chain chain;
    clrun__chain_begin(&chain, ctx, wait_count, wait_list, done);
    return clrun__chain_end(&chain);
}

static void reshape_release(void *state)
{
    reshape_state *st = state;
    if (st != NULL)
        clrun__kernel_state_release(st->copy);
    free(st);
}

/* ---- concat ------------------------------------------------------------------------------ */

/* One copy_rows launch per input; each has its own constant arguments, so its own cl_kernel.
 * Where each input is one run of the output (every dimension before the axis 1), input i
 * belongs `at[i]` bytes into it, and a launch is left out when the executor had the input
 * written there (a concat assembled in place in part, exec/schedule_concat.c). */
typedef struct concat_state {
    cl_kernel kernels[CLRUN__MAX_CONCAT];
    int launches;
    size_t global[CLRUN__MAX_CONCAT][2];
    size_t local[CLRUN__MAX_CONCAT][2];
    bool runs;
    uint64_t at[CLRUN__MAX_CONCAT];
} concat_state;

static void concat_release(void *opaque)
{
    concat_state *st = opaque;
    if (st == NULL)
        return;
    for (int i = 0; i < CLRUN__MAX_CONCAT; i++)
        if (st->kernels[i])
            clrun__cl.ReleaseKernel(st->kernels[i]);
    free(st);
}

static clrun_status concat_prepare(clrun_context *ctx, const clrun__op *op,
                                   const clrun__op_call *call, void **state)
{
    (void)op;
    concat_state *st = calloc(1, sizeof *st);
    if (st == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "concat: node state");
    const clrun_tensor_type *y = &call->outputs[0];
    int axis = (int)clrun__normalize_axis(clrun__attr_int_or(call, "axis", 0), y->rank);
    uint64_t outer = clrun__dims_product(y, 0, axis), inner = clrun__dims_product(y, axis + 1, y->rank);
    uint64_t total = (uint64_t)y->shape[axis] * inner, before = 0;
    clrun_status s = CLRUN_OK;
    st->launches = call->input_count;
    st->runs = outer == 1;
    for (int i = 0; i < call->input_count && s == CLRUN_OK; i++) {
        uint64_t length = (uint64_t)call->inputs[i].shape[axis] * inner;
        st->at[i] = before * clrun_dtype_size(y->dtype);
        s = clrun__element_kernel(ctx, "clrun_copy_rows", y->dtype, NULL, &st->kernels[i]);
        if (s == CLRUN_OK)
            s = copy_rows_args(ctx, st->kernels[i], length, outer, length, 0, total, before,
                               st->global[i], st->local[i]);
        before += length;
    }
    if (s != CLRUN_OK) {
        concat_release(st);
        return s;
    }
    *state = st;
    return CLRUN_OK;
}

/* Launch i reads input i. */
static clrun_status concat_enqueue(clrun_context *ctx, void *opaque, const clrun__op_call *call,
                                   const cl_mem *inputs, const cl_mem *outputs, cl_uint wait_count,
                                   const cl_event *wait_list, cl_event *done)
{
    (void)call;
    concat_state *st = opaque;
    cl_mem root = NULL;
    size_t base = 0;
    bool check = st->runs && outputs[0] != NULL; /* an empty tensor may have no memory */
    cl_int error = check ? clrun__cl_mem_place(outputs[0], &root, &base) : CL_SUCCESS;
    if (error != CL_SUCCESS)
        return clrun__fail_cl(ctx, error, "clGetMemObjectInfo", "where concat's output lies");
    clrun__chain chain;
    clrun__chain_begin(&chain, ctx, wait_count, wait_list, done);
    clrun_status s = CLRUN_OK;
    for (int l = 0; l < st->launches && s == CLRUN_OK; l++) {
        if (check && inputs[l] != NULL) { /* already in its place? */
            cl_mem in_root = NULL;
            size_t in_offset = 0;
            error = clrun__cl_mem_place(inputs[l], &in_root, &in_offset);
            if (error != CL_SUCCESS) {
                s = clrun__fail_cl(ctx, error, "clGetMemObjectInfo", "where concat's input %d lies", l);
                break;
            }
            if (in_root == root && in_offset == base + st->at[l])
                continue;
        }
        s = clrun__buffer_args(ctx, st->kernels[l], &inputs[l], 1, outputs[0]);
        if (s == CLRUN_OK)
            s = clrun__chain_launch(&chain, st->kernels[l], 2, st->global[l], st->local[l],
                                    "concat");
    }
    if (s != CLRUN_OK) {
        clrun__chain_abort(&chain);
        return s;
    }
    return clrun__chain_end(&chain);
}

/* ---- the table --------------------------------------------------------------------------- */

static const clrun__op_kernels view_kernels = {
    .prepare = view_prepare,
    .enqueue = clrun__kernel_state_op_enqueue,
    .release = clrun__kernel_state_release,
};
static const clrun__op_kernels reshape_kernels = {
    .prepare = reshape_prepare, .enqueue = reshape_enqueue, .release = reshape_release};
static const clrun__op_kernels concat_kernels = {
    .prepare = concat_prepare, .enqueue = concat_enqueue, .release = concat_release};

const clrun__named_kernels clrun__kernels_layout[] = {
    {"transpose", &view_kernels},
    {"reshape", &reshape_kernels},
    {"concat", &concat_kernels},
    {"slice", &view_kernels},
    {"split", &view_kernels},
    {"expand", &view_kernels},
    {"tile", &view_kernels},
    {"depth_to_space", &view_kernels},
    {"space_to_depth", &view_kernels},
    {NULL, NULL},
};
