/* Kernels of matmul: batched, broadcast over batch dimensions, with transposes, an optional bias
 * over the output's columns, a scale, and an optional epilogue (lib/ops/ops.h).
 *
 * Devices without real local memory (CPUs) run the register-blocked core (kernels/
 * matmul_core.cl): a constant B (the weights) packed into panels once, on the host when the
 * executor is created, into memory the executor holds in place of B; any other B read as it is,
 * row-major or transposed (no copy), MR x NR blocks per work-item, the variant tuned once
 * per (device, shape). Devices with local memory run 64 x 64 tiles in local memory
 * (kernels/matmul.cl), or one output per work-item where work-groups of 16 x 16 do not fit. All
 * sum each output in one fma chain, k ascending: every kernel and variant gives the same bits. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/cl.h"
#include "ops/matmul_core.h"

/* The first epilogue argument of matmul.cl's tiled kernel (a, b, bias, out, batch, M, N, K,
 * a_ms, a_ks, b_ks, b_ns, has_bias, alpha), and of the core's (a, packed B, bias, out, batch,
 * M, N, K, a_ms, a_ks, has_bias, alpha, sp, steps, b_panel, b_k, panel0). */
#define MM_EXTRA_AT 14
#define MM_CORE_PANEL0_AT 16
#define MM_CORE_EXTRA_AT 17
/* Every kernel here (the core, matmul.cl's tiles and one output per item) stores each output
 * once, after its whole sum, through EPILOGUE(v, at, n) at that element alone: an epilogue may
 * write over an extra input it reads at the element (clrun__op_epilogue_in_place). */

/* The most rows of A for which the core reads a transposed B that is not constant as it is. */
#define CORE_GATHER_ROWS 64
/* A transposed B that is not constant, with more rows of A, is packed into scratch at every
 * run: whole where all its batches' panels take at most this many bytes; one matrix larger than
 * that (a weight under a backward dY W^T: BERT-base's feed-forward weights, a language model's
 * head, whose input gradient would otherwise hold a copy of the whole head weight beside its
 * logits' gradient at a train step's peak) a chunk of panels at a time into scratch that large,
 * each chunk's product run before the next is packed; several larger ones (attention's
 * batched scores) are read as they are. Reading a transposed B as it is gathers each k's values
 * a value at a time: BERT-base's train step took 1.6x as long so. */
uint64_t clrun__matmul_chunk_bytes = UINT64_C(1) << 20;

typedef struct mm_state {
    clrun__kernel_state ks; /* the product: kernel, batch table, launch geometry */
    clrun__packing pack;    /* the core's B in panels: packed once, or into scratch */
    bool core;              /* the register-blocked core (else tiles or one output per item) */
    bool direct;            /* the core reads B as it is, row-major or transposed (B not
                               constant): no packed copy in scratch */
    clrun__chunking chunks; /* B transposed, not constant, large: packed a chunk at a time, */
    uint32_t sp;            /* a chunk a whole number of blocks of sp panels (the panels a
                               work-group's block of rows runs one after another) */
    bool has_bias;
    clrun__epilogue_slots extra; /* the epilogue's arguments: inputs after the node's own */
    int bw;                 /* B narrow (clrun__narrow_code), else 0: the core reads its packed
                               narrow copy, the other kernels B widened into scratch */
    int dequant;            /* B's scale (and zero point): the node's last inputs */
    clrun__widening widen;  /* the other kernels' widening of a narrow B */
} mm_state;

static void mm_release(void *opaque)
{
    mm_state *st = opaque;
    if (st == NULL)
        return;
    clrun__packing_release(&st->pack);
    clrun__widening_release(&st->widen);
    clrun__chunking_release(&st->chunks);
    clrun__kernel_state_release(st);
}

/* Batch entries: the product's dimensions with A's batch folded into M where B has none and A is
 * not transposed (a [B, M, K] is a [B*M, K] matrix: one big product). */
static uint64_t fold_batches(clrun__matmul_dims *d)
{
    uint64_t count = clrun_tensor_elements(&d->batch);
    if (clrun_tensor_elements(&d->batch_b) == 1 && !d->ta && d->M * count <= UINT32_MAX) {
        d->M *= count;
        count = 1;
    }
    return count;
}

/* Element offsets of A and B for each batch entry z: offsets[2z], offsets[2z + 1]. The caller
 * frees *out. */
static clrun_status batch_offsets(clrun_context *ctx, const clrun__matmul_dims *d, uint64_t count,
                                  uint64_t **out)
{
    uint64_t *offsets = calloc(2 * count, sizeof *offsets);
    *out = offsets;
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
    return CLRUN_OK;
}

/* ---- the core ---------------------------------------------------------------------------- */

/* Timing of the candidates over scratch buffers of one batch entry. */
typedef struct mm_tuning {
    const clrun__core_source *src;
    const clrun__core_variant *variants;
    const clrun__matmul_dims *d;
    unsigned nr;
    cl_mem a, packed, out, table;
    clrun__epilogue_slots extra; /* an epilogue's: the scratch output stands in for its inputs */
    bool direct;                 /* B read as it is (mm_state.direct) */
    clrun__tune_buffers buffers; /* a, packed and out */
} mm_tuning;

static clrun_status core_kernel(clrun_context *ctx, const clrun__core_source *src, const clrun__matmul_dims *d,
                                const clrun__core_variant *v, float alpha, bool has_bias, bool direct,
                                unsigned nr, cl_mem table, int bw, cl_kernel *kernel)
{
    cl_uint M = (cl_uint)d->M, N = (cl_uint)d->N, K = (cl_uint)d->K;
    cl_ulong a_ms = d->ta ? 1 : d->K, a_ks = d->ta ? d->M : 1;
    cl_int bias = has_bias;
    cl_uint sp = v->sp;
    cl_uint steps = clrun__core_steps(v, clrun__core_group(ctx));
    /* Direct B: row-major (NR columns a panel, N a k step) or transposed (a panel NR rows of
     * K, b_k = 1 telling the kernel so); packed: K NR a panel, NR a k step. */
    cl_ulong b_panel = direct && !d->tb ? nr : (cl_ulong)K * nr;
    cl_uint b_k = direct ? (d->tb ? 1 : N) : nr, panel0 = 0;
    clrun_status s = clrun__core_kernel_narrow(ctx, src, v->mr, bw, kernel);
    struct { size_t size; const void *value; } args[] = {
        {sizeof table, &table}, {sizeof M, &M}, {sizeof N, &N}, {sizeof K, &K},
        {sizeof a_ms, &a_ms}, {sizeof a_ks, &a_ks}, {sizeof bias, &bias}, {sizeof alpha, &alpha},
        {sizeof sp, &sp}, {sizeof steps, &steps}, {sizeof b_panel, &b_panel}, {sizeof b_k, &b_k},
        {sizeof panel0, &panel0},
    };
    for (cl_uint i = 0; s == CLRUN_OK && i < sizeof args / sizeof args[0]; i++)
        s = clrun__arg(ctx, *kernel, 4 + i, args[i].size, args[i].value);
    return s;
}

static void core_geometry(const clrun_context *ctx, const clrun__matmul_dims *d,
                          const clrun__core_variant *v, unsigned nr, size_t batches, size_t *global,
                          size_t *local)
{
    size_t blocks = (size_t)((d->M + v->mr - 1) / v->mr);
    clrun__core_row_launch(v, clrun__core_group(ctx), blocks, &global[0], &local[0]); /* see conv2d's */
    local[1] = local[2] = 1;
    global[1] = clrun__round_up((size_t)((d->N + nr - 1) / nr), v->sp);
    global[2] = batches;
}

/* The buffers of the timed runs, made before the first (none when nothing is timed). */
static clrun_status tuning_buffers(clrun_context *ctx, mm_tuning *t)
{
    const clrun__matmul_dims *d = t->d;
    const uint64_t zero[2] = {0, 0};
    clrun_status s = clrun__tune_buffer(ctx, &t->buffers, (size_t)(d->M * d->K * 4), &t->a);
    if (s == CLRUN_OK)
        s = clrun__tune_buffer(ctx, &t->buffers,
                               (size_t)clrun__packed_elements(1, d->K, d->N, t->nr) * 4, &t->packed);
    if (s == CLRUN_OK)
        s = clrun__tune_buffer(ctx, &t->buffers, (size_t)(d->M * d->N * 4), &t->out);
    if (s == CLRUN_OK)
        s = clrun__table_buffer(ctx, zero, sizeof zero, &t->table);
    return s;
}

static clrun_status time_variant(clrun_context *ctx, void *user, size_t i, double *seconds)
{
    mm_tuning *t = user;
    cl_kernel kernel = NULL;
    clrun_status s = t->table ? CLRUN_OK : tuning_buffers(ctx, t);
    if (s == CLRUN_OK)
        s = core_kernel(ctx, t->src, t->d, &t->variants[i], 1.0f, false, t->direct, t->nr, t->table,
                        0, &kernel);
    size_t global[3], local[3];
    core_geometry(ctx, t->d, &t->variants[i], t->nr, 1, global, local);
    if (s == CLRUN_OK)
        s = clrun__time_core_run(ctx, kernel, t->a, t->packed, t->out, MM_CORE_EXTRA_AT, &t->extra, global,
                                     local, seconds);
    if (kernel)
        clrun__cl.ReleaseKernel(kernel);
    return s;
}

/* Chooses the core's variant for d, timing the candidates once per (device, shape). */
static clrun_status choose_variant(clrun_context *ctx, const clrun__core_source *src,
                                   const clrun__matmul_dims *d, unsigned nr, clrun__epilogue_slots extra, bool direct,
                                   const clrun__core_variant **out)
{
    size_t count;
    const clrun__core_variant *variants = clrun__core_candidates(d->M, false, &count);
    *out = &variants[0];
    double flops = 2.0 * (double)d->M * (double)d->N * (double)d->K;
    char key[160];
    snprintf(key, sizeof key, "matmul M=%" PRIu64 " N=%" PRIu64 " K=%" PRIu64 " ta=%d nr=%u%s",
             d->M, d->N, d->K, d->ta, nr, !direct ? "" : d->tb ? " direct tb" : " direct");
    mm_tuning t = {src, variants, d, nr, NULL, NULL, NULL, NULL, extra, direct, {.what = key}};
    size_t chosen = 0;
    clrun_status s = clrun__core_tune(ctx, key, flops, count, time_variant, &t, &chosen);
    if (t.table)
        clrun__cl.ReleaseMemObject(t.table);
    clrun__tune_buffers_release(ctx, &t.buffers);
    *out = &variants[chosen];
    return s;
}

/* A transposed B that changes between runs, too large to pack whole: packed a chunk of
 * panels at a time, as many panels as clrun__matmul_chunk_bytes holds (at least one), by
 * conv2d's chunk packing (B stored [N, K] as its weights are). A chunk is a whole number of the
 * variant's blocks of sp panels, or one block of fewer (the kernel's sp argument then the
 * chunk's panels: sp orders the work, never a sum, so the bits stay). */
static clrun_status prepare_chunks(clrun_context *ctx, cl_program program, const clrun__matmul_dims *d,
                                   unsigned nr, unsigned sp, mm_state *st)
{
    uint64_t panels = (d->N + nr - 1) / nr, fit = clrun__matmul_chunk_bytes / (d->K * nr * 4);
    fit = fit < 1 ? 1 : fit < panels ? fit : panels;
    st->sp = (uint32_t)(fit < sp ? fit : sp);
    cl_uint chunk_sp = st->sp;
    clrun_status s = clrun__arg(ctx, st->ks.kernel, 12, sizeof chunk_sp, &chunk_sp);
    if (s == CLRUN_OK)
        s = clrun__chunking_prepare(ctx, program, d->N, d->K, nr, fit / st->sp * st->sp, &st->chunks);
    return s;
}

/* The core's state: packing of B, batch table of (A offset, packed B offset), kernel. */
static clrun_status prepare_core(clrun_context *ctx, const clrun__op_call *call, cl_program program,
                                 unsigned vw, const clrun__epilogue *ep, clrun__matmul_dims *d,
                                 mm_state *st)
{
    const clrun__core_source src = {CLRUN__CORE_MM, vw, ep, 0};
    unsigned nr = 2 * vw;
    uint64_t batches = fold_batches(d), *offsets = NULL;
    uint64_t b_batches = clrun_tensor_elements(&d->batch_b);
    clrun_status s = batch_offsets(ctx, d, batches, &offsets);
    uint64_t *sources = s == CLRUN_OK ? calloc(b_batches, sizeof *sources) : NULL;
    if (s == CLRUN_OK && sources == NULL)
        s = clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "matmul: %" PRIu64 " batches", b_batches);
    uint64_t panel_elements = clrun__packed_elements(1, d->K, d->N, nr);
    for (uint64_t zb = 0; s == CLRUN_OK && zb < b_batches; zb++)
        sources[zb] = zb * d->K * d->N;
    bool constant = (call->constant_inputs >> 1) & 1;
    /* A B that changes between runs: read as it is, row-major or transposed, a last panel past
     * N gathered (the same bits). A transposed B is gathered a value at a time by every block
     * of rows, where a packed copy is read a vector at a time: read as it is only for a few
     * blocks of rows (a batch's gradient through a weight), packed into scratch for more
     * (attention's scores: 10 % faster on a BERT-base layer), a chunk at a time where one
     * matrix is too large to pack whole (clrun__matmul_chunk_bytes). */
    if (st->bw && (!constant || b_batches != 1))
        s = clrun__fail(ctx, CLRUN_ERROR_INVALID_GRAPH, "matmul: a %s weight must be a constant matrix",
                        clrun_dtype_name(call->inputs[1].dtype));
    bool packs = !constant && d->tb && d->M > CORE_GATHER_ROWS;
    bool large = b_batches * panel_elements * 4 > clrun__matmul_chunk_bytes;
    bool chunked = packs && large && b_batches == 1;
    st->direct = !constant && (!packs || (large && !chunked));
    for (uint64_t z = 0; s == CLRUN_OK && !st->direct && z < batches; z++)
        offsets[2 * z + 1] = offsets[2 * z + 1] / (d->K * d->N) * panel_elements;
    if (s == CLRUN_OK)
        s = clrun__packing_prepare(ctx, program, b_batches, sources, d->K, d->N, d->tb ? 1 : d->N,
                                   d->tb ? d->K : 1, nr, constant, &st->pack);
    if (s == CLRUN_OK && st->bw)
        clrun__packing_narrow(&st->pack, st->bw);
    if (s == CLRUN_OK)
        s = clrun__table_buffer(ctx, offsets, (size_t)(2 * batches * sizeof *offsets), &st->ks.table);
    free(offsets);
    free(sources);
    const clrun__core_variant *v = NULL;
    if (s == CLRUN_OK)
        s = choose_variant(ctx, &src, d, nr, st->extra, st->direct, &v);
    float alpha = (float)clrun__attr_float_or(call, "alpha", 1.0);
    /* a narrow B's kernel takes the variant an f32 B's timing chose: the same loop */
    if (s == CLRUN_OK)
        s = core_kernel(ctx, &src, d, v, alpha, st->has_bias, st->direct, nr,
                        st->ks.table, st->bw, &st->ks.kernel);
    cl_ulong panel_bytes = st->pack.panel_bytes;
    if (s == CLRUN_OK && st->bw) /* b_panel: a narrow panel's bytes */
        s = clrun__arg(ctx, st->ks.kernel, 14, sizeof panel_bytes, &panel_bytes);
    if (s == CLRUN_OK && chunked)
        s = prepare_chunks(ctx, program, d, nr, v->sp, st);
    if (s == CLRUN_OK)
        core_geometry(ctx, d, v, nr, (size_t)batches, st->ks.global, st->ks.local);
    return s;
}

/* ---- tiles in local memory, or one output per work-item ---------------------------------- */

static clrun_status prepare_tiled(clrun_context *ctx, const clrun__op_call *call, cl_program program,
                                  clrun__matmul_dims *d, mm_state *st)
{
    uint64_t batches = fold_batches(d), *offsets = NULL;
    clrun_status s = batch_offsets(ctx, d, batches, &offsets);
    if (s == CLRUN_OK)
        s = clrun__table_buffer(ctx, offsets, (size_t)(2 * batches * sizeof *offsets), &st->ks.table);
    free(offsets);
    bool tiled = clrun__ops_kernels != CLRUN__KERNELS_SIMPLE;
    size_t limit = 0;
    if (s == CLRUN_OK)
        s = clrun__program_kernel(ctx, program, tiled ? "clrun_matmul" : "clrun_matmul_naive", 0,
                                  &st->ks.kernel);
    if (s == CLRUN_OK)
        s = clrun__local_size(ctx, st->ks.kernel, 256, &limit);
    if (s == CLRUN_OK && tiled && limit < 256) {
        clrun__cl.ReleaseKernel(st->ks.kernel);
        st->ks.kernel = NULL;
        tiled = false;
        s = clrun__program_kernel(ctx, program, "clrun_matmul_naive", 0, &st->ks.kernel);
        if (s == CLRUN_OK)
            s = clrun__local_size(ctx, st->ks.kernel, 256, &limit);
    }
    if (s == CLRUN_OK && st->bw) /* B widened into scratch: laid out as an f32 B */
        s = clrun__widening_prepare(ctx, st->bw, d->K * d->N, d->tb ? d->K : 1, d->N, st->dequant == 2,
                                    4, &st->widen);
    if (s != CLRUN_OK)
        return s;
    size_t cols = (size_t)d->N, rows = (size_t)d->M;
    if (tiled) {
        st->ks.local[0] = st->ks.local[1] = 16;
        cols = (cols + 63) / 64 * 16;
        rows = (rows + 63) / 64 * 16;
    } else {
        st->ks.local[0] = 1;
        while (st->ks.local[0] * st->ks.local[0] < limit && st->ks.local[0] < 8)
            st->ks.local[0] *= 2;
        st->ks.local[1] = limit / st->ks.local[0] < 8 ? limit / st->ks.local[0] : 8;
    }
    st->ks.local[2] = 1;
    st->ks.global[0] = clrun__round_up(cols, st->ks.local[0]);
    st->ks.global[1] = clrun__round_up(rows, st->ks.local[1]);
    st->ks.global[2] = (size_t)batches;
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
    for (cl_uint i = 0; s == CLRUN_OK && i < sizeof args / sizeof args[0]; i++)
        s = clrun__arg(ctx, st->ks.kernel, 4 + i, args[i].size, args[i].value);
    return s;
}

/* ---- the op ------------------------------------------------------------------------------ */

static clrun_status mm_prepare_epilogue(clrun_context *ctx, const clrun__op *op,
                                        const clrun__op_call *call, const clrun__epilogue *ep,
                                        void **state)
{
    (void)op;
    *state = NULL;
    clrun__matmul_dims d;
    const clrun__infer_error quiet = {"matmul", NULL, 0};
    if (clrun__matmul_dims_of(call, &d, &quiet) != CLRUN_OK)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_GRAPH, "matmul: prepare on types infer refuses");
    clrun__core_device dev;
    clrun_status s = clrun__core_device_of(ctx, &dev);
    if (s != CLRUN_OK)
        return s;
    mm_state *st = calloc(1, sizeof *st);
    if (st == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "matmul: node state");
    st->dequant = clrun__product_dequant(call, &st->has_bias);
    st->bw = clrun__narrow_code(call->inputs[1].dtype);
    st->extra = clrun__epilogue_slots_of(ep);
    st->core = dev.registers;
    st->ks.inputs = 3;
    st->ks.dims = 3;
    st->ks.what = "matmul";
    cl_program program = NULL;
    s = clrun__ops_program(ctx, st->core ? "matmul_core" : "matmul", dev.vw, ep, &program);
    if (s == CLRUN_OK)
        s = st->core ? prepare_core(ctx, call, program, dev.vw, ep, &d, st)
                     : prepare_tiled(ctx, call, program, &d, st);
    if (s != CLRUN_OK) {
        mm_release(st);
        return s;
    }
    *state = st;
    return CLRUN_OK;
}

static clrun_status mm_prepare(clrun_context *ctx, const clrun__op *op, const clrun__op_call *call,
                               void **state)
{
    return mm_prepare_epilogue(ctx, op, call, NULL, state);
}

/* The core packs a B that was not packed once into the node's scratch at every run. */
static int mm_scratch(const void *opaque, uint64_t bytes[CLRUN__SCRATCH_MAX])
{
    const mm_state *st = opaque;
    if (st->widen.kernel) {
        bytes[0] = st->widen.bytes;
        return 1;
    }
    if (!st->core || st->pack.packed || st->direct || st->bw)
        return 0;
    bytes[0] = st->chunks.kernel ? clrun__chunking_bytes(&st->chunks) : st->pack.bytes;
    return 1;
}

static uint64_t mm_packed_bytes(const void *opaque, uint64_t *replaces)
{
    const mm_state *st = opaque;
    uint64_t bytes = st->core ? clrun__packing_constant_bytes(&st->pack) : 0;
    *replaces = bytes ? UINT64_C(1) << 1 : 0;
    /* a narrow B's scale and zero point are in its panels too */
    for (int j = 0; bytes && j < st->dequant; j++)
        *replaces |= UINT64_C(1) << (st->has_bias ? 3 + j : 2 + j);
    return bytes;
}

static clrun_status mm_pack(clrun_context *ctx, void *opaque, const void *const *inputs, void *host,
                            cl_mem packed)
{
    mm_state *st = opaque;
    if (st->bw) {
        int at = st->has_bias ? 3 : 2;
        return clrun__packing_pack_narrow_host(ctx, &st->pack, inputs[1], st->dequant ? inputs[at] : NULL,
                                               st->dequant == 2 ? inputs[at + 1] : NULL, host, packed);
    }
    return clrun__packing_pack_host(ctx, &st->pack, inputs[1], host, packed);
}

static clrun_status mm_enqueue(clrun_context *ctx, void *opaque, const clrun__op_call *call,
                               const cl_mem *inputs, const cl_mem *outputs, cl_uint wait_count,
                               const cl_event *wait_list, cl_event *done)
{
    mm_state *st = opaque;
    /* Without a bias the kernels never read argument 2; A stands in for it. */
    const cl_mem bias = st->has_bias ? inputs[2] : inputs[0];
    bool pack_now = st->core && st->pack.packed == NULL && !st->direct;
    if (pack_now && st->bw)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT, "matmul: a %s weight is read only from "
                           "the copy an executor packs", clrun_dtype_name(call->inputs[1].dtype));
    bool widen = st->widen.kernel != NULL;
    cl_mem b = widen ? outputs[call->output_count]
               : !st->core || st->direct ? inputs[1] : pack_now ? outputs[call->output_count] : st->pack.packed;
    const cl_mem buffers[3] = {inputs[0], b, bias};
    clrun_status s = clrun__buffer_args(ctx, st->ks.kernel, buffers, 3, outputs[0]);
    if (s == CLRUN_OK)
        s = clrun__epilogue_args(ctx, st->ks.kernel, st->core ? MM_CORE_EXTRA_AT : MM_EXTRA_AT,
                                 &st->extra, inputs + call->input_count);
    if (s != CLRUN_OK)
        return s;
    clrun__chain chain;
    clrun__chain_begin(&chain, ctx, wait_count, wait_list, done);
    if (pack_now && st->chunks.kernel)
        s = clrun__chunking_launch(ctx, &st->chunks, inputs[1], b, st->ks.kernel, MM_CORE_PANEL0_AT,
                                   st->ks.dims, st->ks.global, st->ks.local, st->sp, st->ks.what, &chain);
    else if (pack_now)
        s = clrun__packing_enqueue(ctx, &st->pack, inputs[1], b, &chain);
    if (widen) {
        int at = st->has_bias ? 3 : 2;
        s = clrun__widening_enqueue(ctx, &st->widen, inputs[1], st->dequant ? inputs[at] : NULL,
                                    st->dequant == 2 ? inputs[at + 1] : NULL, b, &chain);
    }
    if (s == CLRUN_OK && !(pack_now && st->chunks.kernel))
        s = clrun__chain_launch(&chain, st->ks.kernel, st->ks.dims, st->ks.global, st->ks.local,
                                st->ks.what);
    if (s != CLRUN_OK) {
        clrun__chain_abort(&chain);
        return s;
    }
    return clrun__chain_end(&chain);
}

static const clrun__op_kernels matmul_kernels = {
    .prepare = mm_prepare,
    .enqueue = mm_enqueue,
    .release = mm_release,
    .scratch = mm_scratch,
    .packed_bytes = mm_packed_bytes,
    .pack = mm_pack,
};

const clrun__named_kernels clrun__kernels_matmul[] = {{"matmul", &matmul_kernels}, {NULL, NULL}};
const clrun__named_epilogue clrun__epilogue_matmul[] = {{"matmul", mm_prepare_epilogue, true}, {NULL, NULL, false}};
