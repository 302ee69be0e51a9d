/* Kernels of the integer products (kernels/qlinear.cl): matmul_integer in tiles of T x T staged
 * in local memory (T = 16 where work-groups of 256 fit, smaller where not), conv_integer direct,
 * one output per work-item with the channel's weights staged in local memory. Both read u8 and
 * i8 operands as bytes (the executor keeps constant weights at their dtype: nothing is widened)
 * and sum exactly in 32 bits, wrapping. The geometry is the type rule's
 * (lib/graph/infer_qlinear.c). */
#include <inttypes.h>
#include <stdlib.h>

#include "device/cl.h"
#include "graph/qlinear_geometry.h"
#include "ops/ops_internal.h"

/* Buffer arguments: the operands, their zero points, then the output. */
#define QL_INPUTS 4

/* Work-items of a conv_integer work-group, and the weights it stages at a time. */
#define QCONV_GROUP 64
#define QCONV_CHUNK 256

static int zero_flags(bool first_signed, bool second_signed, clrun__zero_form first,
                      clrun__zero_form second)
{
    return (first_signed ? 1 : 0) | (second_signed ? 2 : 0) | (int)first << 2 | (int)second << 4;
}

/* The node's inputs as the kernels take them: an absent zero point gets its operand's buffer,
 * which the kernels never read (its form says none). */
static clrun_status ql_enqueue(clrun_context *ctx, void *state, const clrun__op_call *call,
                               const cl_mem *inputs, const cl_mem *outputs, cl_uint wait_count,
                               const cl_event *wait_list, cl_event *done)
{
    cl_mem buffers[QL_INPUTS] = {inputs[0], inputs[1], call->input_count > 2 ? inputs[2] : inputs[0],
                                 call->input_count > 3 ? inputs[3] : inputs[1]};
    return clrun__kernel_state_enqueue(ctx, state, buffers, outputs[0], wait_count, wait_list, done);
}

/* ---- matmul_integer ---------------------------------------------------------------------- */

/* Element offsets of a and b for each batch entry z: offsets[2z], offsets[2z + 1]. The caller
 * frees *out. */
static clrun_status batch_offsets(clrun_context *ctx, const clrun__matmul_dims *d, uint64_t count,
                                  uint64_t **out)
{
    uint64_t *offsets = calloc(2 * count, sizeof *offsets);
    *out = offsets;
    if (offsets == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "matmul_integer: %" PRIu64 " batches",
                           count);
    uint64_t sa[CLRUN_MAX_DIMS], sb[CLRUN_MAX_DIMS];
    clrun__broadcast_strides(&d->batch_a, &d->batch, sa);
    clrun__broadcast_strides(&d->batch_b, &d->batch, sb);
    for (uint64_t z = 0; z < count; z++) {
        uint64_t rem = z, oa = 0, ob = 0;
        for (int i = d->batch.rank - 1; i >= 0; i--) {
            uint64_t c = rem % (uint64_t)d->batch.shape[i];
            rem /= (uint64_t)d->batch.shape[i];
            oa += c * sa[i];
            ob += c * sb[i];
        }
        offsets[2 * z] = oa * d->M * d->K;
        offsets[2 * z + 1] = ob * d->K * d->N;
    }
    return CLRUN_OK;
}

static clrun_status qmm_prepare(clrun_context *ctx, const clrun__op *op, const clrun__op_call *call,
                                void **state)
{
    (void)op;
    *state = NULL;
    clrun__qmatmul_dims q;
    const clrun__infer_error quiet = {"matmul_integer", NULL, 0};
    if (clrun__qmatmul_dims_of(call, &q, &quiet) != CLRUN_OK)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_GRAPH, "matmul_integer: prepare on types infer refuses");
    const clrun__matmul_dims *d = &q.d;
    uint64_t batches = clrun_tensor_elements(&d->batch), *offsets = NULL;
    clrun__kernel_state *st = calloc(1, sizeof *st);
    if (st == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "matmul_integer: node state");
    st->inputs = QL_INPUTS;
    st->what = "matmul_integer";
    clrun_status s = batch_offsets(ctx, d, batches, &offsets);
    if (s == CLRUN_OK)
        s = clrun__table_buffer(ctx, offsets, (size_t)(2 * batches * sizeof *offsets), &st->table);
    free(offsets);
    if (s == CLRUN_OK)
        s = clrun__kernel(ctx, "clrun_matmul_integer", &st->kernel);
    /* T x T work-groups: the largest T <= 16 whose square the kernel allows. */
    size_t items = 0, tile = 1;
    if (s == CLRUN_OK)
        s = clrun__local_size(ctx, st->kernel, 256, &items);
    while (s == CLRUN_OK && tile < 16 && (tile * 2) * (tile * 2) <= items)
        tile *= 2;
    const cl_uint M = (cl_uint)d->M, N = (cl_uint)d->N, K = (cl_uint)d->K;
    const cl_int flags = zero_flags(q.a_signed, q.b_signed, q.a_zero, q.b_zero);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->kernel, 5, sizeof st->table, &st->table);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->kernel, 6, sizeof M, &M);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->kernel, 7, sizeof N, &N);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->kernel, 8, sizeof K, &K);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->kernel, 9, sizeof flags, &flags);
    for (cl_uint i = 10; s == CLRUN_OK && i < 12; i++)
        s = clrun__arg(ctx, st->kernel, i, tile * tile * sizeof(cl_int), NULL);
    st->dims = 3;
    st->local[0] = st->local[1] = tile;
    st->local[2] = 1;
    st->global[0] = clrun__round_up((size_t)d->N, tile);
    st->global[1] = clrun__round_up((size_t)d->M, tile);
    st->global[2] = (size_t)batches;
    return clrun__kernel_state_done(st, s, state);
}

/* ---- conv_integer ------------------------------------------------------------------------ */

static clrun_status qconv_prepare(clrun_context *ctx, const clrun__op *op, const clrun__op_call *call,
                                  void **state)
{
    (void)op;
    *state = NULL;
    clrun__qconv_geometry q;
    const clrun__infer_error quiet = {"conv_integer", NULL, 0};
    if (clrun__qconv_geometry_of(call, &q, &quiet) != CLRUN_OK)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_GRAPH, "conv_integer: prepare on types infer refuses");
    const clrun__conv_geometry *g = &q.g;
    const clrun_tensor_type *x = &call->inputs[0], *w = &call->inputs[1];
    const cl_int args[16] = {
        (cl_int)x->shape[1], (cl_int)x->shape[2], (cl_int)x->shape[3], (cl_int)w->shape[0],
        (cl_int)w->shape[2], (cl_int)w->shape[3], (cl_int)g->oh, (cl_int)g->ow,
        (cl_int)g->stride[0], (cl_int)g->stride[1], (cl_int)g->pad[0], (cl_int)g->pad[1],
        (cl_int)g->dilation[0], (cl_int)g->dilation[1], (cl_int)g->groups,
        zero_flags(q.x_signed, q.w_signed, q.x_zero, q.w_zero),
    };
    const int64_t taps = w->shape[1] * w->shape[2] * w->shape[3];
    const cl_int chunk = (cl_int)(taps < QCONV_CHUNK ? taps : QCONV_CHUNK);
    clrun__kernel_state *st = calloc(1, sizeof *st);
    if (st == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "conv_integer: node state");
    st->inputs = QL_INPUTS;
    st->what = "conv_integer";
    clrun_status s = clrun__kernel(ctx, "clrun_conv_integer", &st->kernel);
    for (cl_uint i = 0; s == CLRUN_OK && i < 16; i++)
        s = clrun__arg(ctx, st->kernel, QL_INPUTS + 1 + i, sizeof args[i], &args[i]);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->kernel, QL_INPUTS + 17, (size_t)chunk * sizeof(cl_int), NULL);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->kernel, QL_INPUTS + 18, sizeof chunk, &chunk);
    const size_t pixels = (size_t)(g->oh * g->ow);
    if (s == CLRUN_OK)
        s = clrun__local_size(ctx, st->kernel, pixels < QCONV_GROUP ? pixels : QCONV_GROUP, &st->local[0]);
    st->dims = 3;
    st->local[1] = st->local[2] = 1;
    st->global[0] = clrun__round_up(pixels, st->local[0]);
    st->global[1] = (size_t)w->shape[0];
    st->global[2] = (size_t)x->shape[0];
    return clrun__kernel_state_done(st, s, state);
}

static const clrun__op_kernels qmm_kernels = {
    .prepare = qmm_prepare,
    .enqueue = ql_enqueue,
    .release = clrun__kernel_state_release,
};

static const clrun__op_kernels qconv_kernels = {
    .prepare = qconv_prepare,
    .enqueue = ql_enqueue,
    .release = clrun__kernel_state_release,
};

const clrun__named_kernels clrun__kernels_qlinear[] = {
    {"matmul_integer", &qmm_kernels},
    {"conv_integer", &qconv_kernels},
    {NULL, NULL},
};
