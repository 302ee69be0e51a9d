/* Kernels of matmul (kernels/matmul.cl): batched, broadcast over batch dimensions, with transposes, an
 * optional bias over the output's columns, and a scale. GPUs and other devices get the kernel
 * tiled in local memory (work-groups of 16 x 16; a device that cannot run those gets one output
 * per work-item); CPUs get the one blocked in registers with float8, which suits them better
 * (see kernels/matmul.cl). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "device/cl.h"
#include "ops/ops_internal.h"

typedef struct mm_state {
    clrun__kernel_state ks; /* table: per batch entry, A and B offsets in elements; 3-D */
    bool has_bias;
} mm_state;

/* Offsets of A and B for every batch entry, or, when B has no batch and A is not transposed,
 * one entry: A's batch folds into M (a [B, M, K] is a [B*M, K] matrix), one big product. */
static clrun_status batch_offsets(clrun_context *ctx, clrun__matmul_dims *d, mm_state *st, size_t *batches)
{
    uint64_t count = clrun_tensor_elements(&d->batch);
    if (clrun_tensor_elements(&d->batch_b) == 1 && !d->ta && d->M * count <= UINT32_MAX) {
        d->M *= count;
        count = 1;
    }
    uint64_t *offsets = calloc(2 * count, sizeof *offsets);
    if (offsets == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "matmul: %" PRIu64 " batches", count);
    uint64_t sa[CLRUN_MAX_DIMS], sb[CLRUN_MAX_DIMS];
    clrun__broadcast_strides(&d->batch_a, &d->batch, sa);
    clrun__broadcast_strides(&d->batch_b, &d->batch, sb);
    for (uint64_t z = 0; count > 1 && z < count; z++) {
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
    clrun_status s = clrun__table_buffer(ctx, offsets, 2 * count * sizeof *offsets,
                                         &st->ks.table);
    free(offsets);
    *batches = (size_t)count;
    return s;
}

/* The kernel for this device (or the one tests force). */
static clrun__kernel_choice matmul_choice(clrun_context *ctx)
{
    if (clrun__ops_kernels != CLRUN__KERNELS_AUTO)
        return clrun__ops_kernels;
    return strcmp(ctx->info.type, "CPU") == 0 ? CLRUN__KERNELS_VECTOR : CLRUN__KERNELS_TILED;
}

/* Work sizes: tiled, 16 x 16 groups over 64 x 64 tiles; vector, 8 x 8 groups of 4 x 8 blocks;
 * simple, a square-ish group within the device's limit over single outputs. The tiled kernel
 * falls back to the simple one where its groups do not fit. */
static clrun_status pick_kernel(clrun_context *ctx, const clrun__matmul_dims *d, size_t batches, mm_state *st)
{
    static const char *const names[] = {
        [CLRUN__KERNELS_TILED] = "clrun_matmul",
        [CLRUN__KERNELS_VECTOR] = "clrun_matmul_vec",
        [CLRUN__KERNELS_SIMPLE] = "clrun_matmul_naive",
    };
    clrun__kernel_choice choice = matmul_choice(ctx);
    size_t limit = 0;
    clrun_status s = clrun__kernel(ctx, names[choice], &st->ks.kernel);
    if (s == CLRUN_OK)
        s = clrun__local_size(ctx, st->ks.kernel, 256, &limit);
    if (s == CLRUN_OK && choice == CLRUN__KERNELS_TILED && limit < 256) {
        clrun__cl.ReleaseKernel(st->ks.kernel);
        st->ks.kernel = NULL;
        choice = CLRUN__KERNELS_SIMPLE;
        s = clrun__kernel(ctx, names[choice], &st->ks.kernel);
        if (s == CLRUN_OK)
            s = clrun__local_size(ctx, st->ks.kernel, 256, &limit);
    }
    if (s != CLRUN_OK)
        return s;
    size_t cols = (size_t)d->N, rows = (size_t)d->M;
    if (choice == CLRUN__KERNELS_TILED) {
        st->ks.local[0] = st->ks.local[1] = 16;
        cols = (cols + 63) / 64 * 16;
        rows = (rows + 63) / 64 * 16;
    } else {
        if (choice == CLRUN__KERNELS_VECTOR) {
            cols = (cols + 7) / 8;
            rows = (rows + 3) / 4;
        }
        st->ks.local[0] = 1;
        while (st->ks.local[0] * st->ks.local[0] < limit && st->ks.local[0] < 8)
            st->ks.local[0] *= 2;
        st->ks.local[1] = limit / st->ks.local[0] < 8 ? limit / st->ks.local[0] : 8;
    }
    st->ks.local[2] = 1;
    st->ks.global[0] = clrun__round_up(cols, st->ks.local[0]);
    st->ks.global[1] = clrun__round_up(rows, st->ks.local[1]);
    st->ks.global[2] = batches;
    return CLRUN_OK;
}

static clrun_status set_constant_args(clrun_context *ctx, const clrun__matmul_dims *d,
                                      const clrun__op_call *call, mm_state *st)
{
    cl_uint M = (cl_uint)d->M, N = (cl_uint)d->N, K = (cl_uint)d->K;
    /* Strides in elements along m and k of A, k and n of B (a transposed input is stored as
     * [K, M] or [N, K]). */
    cl_ulong a_ms = d->ta ? 1 : d->K, a_ks = d->ta ? d->M : 1;
    cl_ulong b_ks = d->tb ? 1 : d->N, b_ns = d->tb ? d->K : 1;
    cl_int has_bias = st->has_bias;
    cl_float alpha = (cl_float)clrun__attr_float_or(call, "alpha", 1.0);
    struct { size_t size; const void *value; } args[] = {
        {sizeof st->ks.table, &st->ks.table}, {sizeof M, &M}, {sizeof N, &N}, {sizeof K, &K},
        {sizeof a_ms, &a_ms}, {sizeof a_ks, &a_ks}, {sizeof b_ks, &b_ks}, {sizeof b_ns, &b_ns},
        {sizeof has_bias, &has_bias}, {sizeof alpha, &alpha},
    };
    clrun_status s = CLRUN_OK;
    for (cl_uint i = 0; s == CLRUN_OK && i < sizeof args / sizeof args[0]; i++)
        s = clrun__arg(ctx, st->ks.kernel, 4 + i, args[i].size, args[i].value);
    return s;
}

static clrun_status mm_prepare(clrun_context *ctx, const clrun__op *op, const clrun__op_call *call,
                              void **state)
{
    (void)op;
    *state = NULL;
    clrun__matmul_dims d;
    const clrun__infer_error quiet = {"matmul", NULL, 0};
    if (clrun__matmul_dims_of(call, &d, &quiet) != CLRUN_OK)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_GRAPH, "matmul: prepare on types infer refuses");
    mm_state *st = calloc(1, sizeof *st);
    if (st == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "matmul: node state");
    st->has_bias = call->input_count == 3;
    st->ks.inputs = 3;
    st->ks.dims = 3;
    st->ks.what = "matmul";
    size_t batches = 1;
    clrun_status s = batch_offsets(ctx, &d, st, &batches);
    if (s == CLRUN_OK)
        s = pick_kernel(ctx, &d, batches, st);
    if (s == CLRUN_OK)
        s = set_constant_args(ctx, &d, call, st);
    return clrun__kernel_state_done(st, s, state);
}

static clrun_status mm_enqueue(clrun_context *ctx, void *opaque, const clrun__op_call *call,
                               const cl_mem *inputs, const cl_mem *outputs, cl_uint wait_count,
                               const cl_event *wait_list, cl_event *done)
{
    (void)call;
    const mm_state *st = opaque;
    /* Without a bias the kernel never reads argument 2; A stands in for it. */
    const cl_mem buffers[3] = {inputs[0], inputs[1], st->has_bias ? inputs[2] : inputs[0]};
    return clrun__kernel_state_enqueue(ctx, &st->ks, buffers, outputs[0], wait_count, wait_list,
                                       done);
}

static const clrun__op_kernels matmul_kernels = {mm_prepare, mm_enqueue,
                                                 clrun__kernel_state_release};

const clrun__named_kernels clrun__kernels_matmul[] = {{"matmul", &matmul_kernels}, {NULL, NULL}};
