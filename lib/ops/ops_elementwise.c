/* Kernels of the elementwise ops (kernels/elementwise.cl): unary functions, scale, copy, and
 * binary ops with numpy broadcasting. Inputs of identical shapes take a kernel that reads both at the output's
 * index; otherwise the shapes are merged into as few dimensions as possible and one kernel per
 * dtype computes each input's offset from the output's index. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/cl.h"
#include "ops/ops_internal.h"

/* ---- prepare ----------------------------------------------------------------------------- */

static bool same_shape(const clrun_tensor_type *a, const clrun_tensor_type *b)
{
    if (a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (a->shape[i] != b->shape[i])
            return false;
    return true;
}

/* The shape table of a broadcast: dimensions of 1 dropped, and neighbours merged where both
 * inputs walk them as one (stride of the outer = stride of the inner x its size). */
static size_t broadcast_table(const clrun__op_call *call, uint64_t *meta)
{
    const clrun_tensor_type *out = &call->outputs[0];
    uint64_t sa[CLRUN_MAX_DIMS], sb[CLRUN_MAX_DIMS];
    clrun__broadcast_strides(&call->inputs[0], out, sa);
    clrun__broadcast_strides(&call->inputs[1], out, sb);
    uint64_t dims[CLRUN_MAX_DIMS], ma[CLRUN_MAX_DIMS], mb[CLRUN_MAX_DIMS];
    int rank = 0;
    for (int d = 0; d < out->rank; d++) {
        uint64_t n = (uint64_t)out->shape[d];
        if (n == 1)
            continue;
        if (rank > 0 && ma[rank - 1] == sa[d] * n && mb[rank - 1] == sb[d] * n) {
            dims[rank - 1] *= n;
            ma[rank - 1] = sa[d];
            mb[rank - 1] = sb[d];
            continue;
        }
        dims[rank] = n;
        ma[rank] = sa[d];
        mb[rank] = sb[d];
        rank++;
    }
    if (rank == 0) {
        dims[0] = 1;
        ma[0] = mb[0] = 0;
        rank = 1;
    }
    meta[0] = (uint64_t)rank;
    for (int d = 0; d < rank; d++) {
        meta[1 + d] = dims[d];
        meta[1 + rank + d] = ma[d];
        meta[1 + 2 * rank + d] = mb[d];
    }
    return 1 + 3 * (size_t)rank;
}

static const char *dtype_suffix(clrun_dtype dtype) { return dtype == CLRUN_I32 ? "i32" : "f32"; }

static void kernel_name(const clrun__op *op, const clrun__op_call *call, bool broadcast,
                        char *name, size_t size)
{
    const char *suffix = dtype_suffix(call->inputs[0].dtype);
    if (op->kind == CLRUN__OP_COPY)
        snprintf(name, size, "clrun_copy_u32");
    else if (broadcast)
        snprintf(name, size, "clrun_broadcast_%s", suffix);
    else
        snprintf(name, size, "clrun_%s_%s", op->name, suffix);
}

/* The arguments after the buffers, which stay the same for every run. */
static clrun_status set_constant_args(clrun_context *ctx, const clrun__op *op,
                                      const clrun__op_call *call, clrun__kernel_state *st,
                                      cl_ulong n)
{
    cl_uint next = st->inputs + 1;
    clrun_status s = clrun__arg(ctx, st->kernel, next++, sizeof n, &n);
    if (s == CLRUN_OK && op->kind == CLRUN__OP_SCALE) {
        cl_float alpha = (cl_float)clrun__attr_float_or(call, "alpha", 1.0);
        cl_float beta = (cl_float)clrun__attr_float_or(call, "beta", 0.0);
        s = clrun__arg(ctx, st->kernel, next++, sizeof alpha, &alpha);
        if (s == CLRUN_OK)
            s = clrun__arg(ctx, st->kernel, next++, sizeof beta, &beta);
    }
    if (s == CLRUN_OK && st->table) {
        cl_int code = op->code;
        s = clrun__arg(ctx, st->kernel, next++, sizeof st->table, &st->table);
        if (s == CLRUN_OK)
            s = clrun__arg(ctx, st->kernel, next++, sizeof code, &code);
    }
    return s;
}

/* The node's state is a clrun__kernel_state: the broadcasting shape table (or none), one
 * dimension over the elements rounded up to the work-group size. */
static clrun_status ew_prepare(clrun_context *ctx, const clrun__op *op, const clrun__op_call *call,
                               void **state)
{
    *state = NULL;
    clrun__kernel_state *st = calloc(1, sizeof *st);
    if (st == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "%s: node state", op->name);
    st->inputs = op->kind == CLRUN__OP_BINARY ? 2 : 1;
    st->dims = 1;
    st->what = "elementwise";
    bool broadcast = op->kind == CLRUN__OP_BINARY && !(same_shape(&call->inputs[0], &call->outputs[0]) &&
                                                same_shape(&call->inputs[1], &call->outputs[0]));
    char name[64];
    kernel_name(op, call, broadcast, name, sizeof name);
    uint64_t n = clrun_tensor_elements(&call->outputs[0]);
    clrun_status s = clrun__kernel(ctx, name, &st->kernel);
    if (s == CLRUN_OK && broadcast) {
        uint64_t meta[1 + 3 * CLRUN_MAX_DIMS];
        size_t count = broadcast_table(call, meta);
        s = clrun__table_buffer(ctx, meta, count * sizeof meta[0], &st->table);
    }
    if (s == CLRUN_OK)
        s = clrun__local_size(ctx, st->kernel, 256, &st->local[0]);
    if (s == CLRUN_OK)
        s = set_constant_args(ctx, op, call, st, n);
    if (s == CLRUN_OK)
        st->global[0] = clrun__round_up((size_t)n, st->local[0]);
    return clrun__kernel_state_done(st, s, state);
}

/* ---- the entry points ------------------------------------------------------------------- */

/* Every op of an elementwise kind (unary, scale, copy, binary) runs here. */
const clrun__op_kernels clrun__elementwise_kernels = {
    ew_prepare, clrun__kernel_state_op_enqueue, clrun__kernel_state_release,
};
