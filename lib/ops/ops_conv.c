/* Kernels of convolution and pooling over NCHW images (kernels/conv.cl, kernels/matmul_core.cl,
 * and clrun_conv2d_gemm in kernels/matmul.cl).
 *
 * conv2d runs as a product over (image, group) of the image patches and the weights, gathered
 * on the fly (implicit GEMM: no patch matrix): on devices without real local memory the
 * register-blocked core (constant weights packed once into panels, on the host, when the
 * executor is created, others at every run into the node's scratch; over few output positions
 * a chunk of panels at a time, each chunk's product run before the next is packed, or, grouped,
 * read as they are; the variant tuned once per
 * shape; a 1 x 1 convolution is a plain product of x and w; a padded convolution first copies x
 * with its padding as zeros into the node's scratch, a little larger than x, so that the
 * product never checks a bound), elsewhere 64 x 64 tiles in local memory. Depthwise
 * convolutions take their own kernel, vectorised along rows; groups too narrow for a tile on a
 * GPU take the direct kernel. conv2d takes an epilogue (lib/ops/ops.h). */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/cl.h"
#include "ops/matmul_core.h"

#define GEMM_MIN_ROWS 16
/* The most output positions per image for which the core reads weights that are not constant
 * as they are (gathered a value at a time, as matmul's transposed B) rather than packing them
 * into scratch as large as w at every run: a train step's last stages, where a 512-channel
 * 3 x 3 layer's 9 MiB copy set the step's peak, and few rows share each gathered value. */
#define CORE_DIRECT_POSITIONS 64

/* Over those few positions an ungrouped convolution's weights are packed a chunk of panels at a
 * time into scratch of at most this many bytes (at least one panel): the weights' panels are
 * read once per image and row block, which gathered from w ran 3 to 6 times slower than from
 * packed panels (ResNet-18's last three stages at 64 x 64), while a whole packed copy (9 MiB for
 * a 512-channel 3 x 3 layer) set a train step's peak. Tests lower it to get several chunks. */
uint64_t clrun__conv_chunk_bytes = UINT64_C(512) << 10;

/* The conv core's first epilogue argument: after x, w, bias, out, g, has_bias, HP, WP, steps,
 * direct, panel0 (the first panel a launch covers: a chunk's, else 0). */
#define CONV_CORE_PANEL0_AT 10
#define CONV_CORE_EXTRA_AT 11

typedef struct conv_state {
    clrun__kernel_state ks; /* table: the kernel's int geometry (CLRUN__G_*, CLRUN__P_*) */
    clrun__packing pack;    /* the core: the weights in panels, packed once or into scratch */
    clrun__conv_padding pad; /* the core of a padded convolution: x with its padding as zeros
                                into scratch part 0 */
    bool core;
    bool packs;             /* the weights in panels (st->pack): the core, the rows kernel */
    bool direct;            /* the core reads w as it is (not constant, few positions, grouped) */
    clrun__chunking chunks; /* not constant, few positions: w packed a chunk at a time */
    bool has_bias;
    bool conv;              /* conv2d, conv_transpose2d: x, w[, bias] -> out; pool: x -> out */
    clrun__epilogue_slots extra; /* the epilogue's arguments: inputs after the node's own */
    cl_uint extra_index;    /* the first epilogue argument */
    int bw;                 /* conv2d's weights narrow (clrun__narrow_code), else 0: the core
                               reads its packed narrow copy, the other kernels w widened into
                               scratch */
    int dequant;            /* w's scale (and zero point): the node's last inputs */
    clrun__widening widen;  /* the other kernels' widening of narrow weights */
    /* A 1 x 1 plane's product (product_on): matmul's state over product_call, which every
     * callback below hands on to; the call's types and attribute are kept here. */
    void *product;
    clrun__op_call product_call;
    clrun_tensor_type product_types[4]; /* a, b, bias, out */
    clrun_attr product_attr;            /* transpose_b = 1 */
} conv_state;

/* matmul's kernels, for the products conv2d hands on (product_on). */
static const clrun__op_kernels *product_kernels(void) { return clrun__kernels_matmul[0].kernels; }

static void conv_release(void *opaque)
{
    conv_state *st = opaque;
    if (st == NULL)
        return;
    if (st->product)
        product_kernels()->release(st->product);
    clrun__packing_release(&st->pack);
    clrun__chunking_release(&st->chunks);
    clrun__widening_release(&st->widen);
    clrun__conv_padding_release(&st->pad);
    clrun__kernel_state_release(st);
}

/* Scratch of the core: the padded image (part 0, when padded), then the packed weights when
 * they were not packed once. */
static int conv_scratch(const void *opaque, uint64_t bytes[CLRUN__SCRATCH_MAX])
{
    const conv_state *st = opaque;
    if (st->product)
        return product_kernels()->scratch(st->product, bytes);
    int parts = 0;
    if (st->pad.kernel)
        bytes[parts++] = st->pad.bytes;
    if (st->widen.kernel)
        bytes[parts++] = st->widen.bytes;
    else if (st->chunks.kernel)
        bytes[parts++] = clrun__chunking_bytes(&st->chunks);
    else if (st->packs && !st->direct && st->pack.packed == NULL && !st->bw)
        bytes[parts++] = st->pack.bytes;
    return parts;
}

static uint64_t conv_packed_bytes(const void *opaque, uint64_t *replaces)
{
    const conv_state *st = opaque;
    if (st->product)
        return product_kernels()->packed_bytes(st->product, replaces);
    uint64_t bytes = st->packs ? clrun__packing_constant_bytes(&st->pack) : 0;
    *replaces = bytes ? UINT64_C(1) << 1 : 0;
    /* narrow weights' scale and zero point are in their panels too */
    for (int j = 0; bytes && j < st->dequant; j++)
        *replaces |= UINT64_C(1) << (st->has_bias ? 3 + j : 2 + j);
    return bytes;
}

static clrun_status conv_pack(clrun_context *ctx, void *opaque, const void *const *inputs,
                              void *host, cl_mem packed)
{
    conv_state *st = opaque;
    if (st->product)
        return product_kernels()->pack(ctx, st->product, inputs, host, packed);
    if (st->bw) {
        int at = st->has_bias ? 3 : 2;
        return clrun__packing_pack_narrow_host(ctx, &st->pack, inputs[1], st->dequant ? inputs[at] : NULL,
                                               st->dequant == 2 ? inputs[at + 1] : NULL, host, packed);
    }
    return clrun__packing_pack_host(ctx, &st->pack, inputs[1], host, packed);
}

static clrun_status conv_enqueue(clrun_context *ctx, void *opaque, const clrun__op_call *call,
                                 const cl_mem *inputs, const cl_mem *outputs, cl_uint wait_count,
                                 const cl_event *wait_list, cl_event *done)
{
    conv_state *st = opaque;
    if (st->product)
        return product_kernels()->enqueue(ctx, st->product, &st->product_call, inputs, outputs,
                                          wait_count, wait_list, done);
    if (!st->conv)
        return clrun__kernel_state_enqueue(ctx, &st->ks, inputs, outputs[0], wait_count,
                                           wait_list, done);
    const cl_mem *scratch = outputs + call->output_count;
    bool pack_now = st->packs && !st->direct && st->pack.packed == NULL && st->chunks.kernel == NULL;
    if (pack_now && st->bw)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT, "conv2d: %s weights are read only from "
                           "the copy an executor packs", clrun_dtype_name(call->inputs[1].dtype));
    bool padded = st->pad.kernel != NULL, widen = st->widen.kernel != NULL;
    cl_mem x = padded ? scratch[0] : inputs[0];
    cl_mem w = widen ? scratch[padded ? 1 : 0]
               : !st->packs || st->direct ? inputs[1]
               : pack_now || st->chunks.kernel ? scratch[padded ? 1 : 0] : st->pack.packed;
    /* Without a bias the kernel never reads it; x stands in. */
    const cl_mem buffers[3] = {x, w, st->has_bias ? inputs[2] : inputs[0]};
    clrun_status s = clrun__buffer_args(ctx, st->ks.kernel, buffers, 3, outputs[0]);
    if (s == CLRUN_OK && padded)
        s = clrun__buffer_args(ctx, st->pad.kernel, &inputs[0], 1, x);
    if (s == CLRUN_OK)
        s = clrun__epilogue_args(ctx, st->ks.kernel, st->extra_index, &st->extra,
                                 inputs + call->input_count);
    if (s != CLRUN_OK)
        return s;
    clrun__chain chain;
    clrun__chain_begin(&chain, ctx, wait_count, wait_list, done);
    if (pack_now)
        s = clrun__packing_enqueue(ctx, &st->pack, inputs[1], w, &chain);
    if (widen) {
        int at = st->has_bias ? 3 : 2;
        s = clrun__widening_enqueue(ctx, &st->widen, inputs[1], st->dequant ? inputs[at] : NULL,
                                    st->dequant == 2 ? inputs[at + 1] : NULL, w, &chain);
    }
    if (s == CLRUN_OK && padded)
        s = clrun__chain_launch(&chain, st->pad.kernel, 3, st->pad.global, st->pad.local,
                                "conv2d padding");
    if (s == CLRUN_OK && st->chunks.kernel)
        s = clrun__chunking_launch(ctx, &st->chunks, inputs[1], w, st->ks.kernel, CONV_CORE_PANEL0_AT,
                                   st->ks.dims, st->ks.global, st->ks.local, 1, st->ks.what, &chain);
    else if (s == CLRUN_OK)
        s = clrun__chain_launch(&chain, st->ks.kernel, st->ks.dims, st->ks.global, st->ks.local,
                                st->ks.what);
    if (s != CLRUN_OK) {
        clrun__chain_abort(&chain);
        return s;
    }
    return clrun__chain_end(&chain);
}

/* ---- conv2d on the core ------------------------------------------------------------------ */

typedef struct conv_tuning {
    const clrun__core_source *src;
    const clrun__core_variant *variants;
    const cl_int *geo;
    unsigned nr;
    cl_uint hp, wp;
    cl_mem x, packed, out, table;
    clrun__epilogue_slots extra; /* an epilogue's: the scratch output stands in for its inputs */
    bool direct;                 /* w read as it is (the packed buffer stands in for it) */
    clrun__tune_buffers buffers; /* x, packed and out */
} conv_tuning;

static void core_geometry(const clrun_context *ctx, const cl_int *geo, const clrun__core_variant *v,
                          unsigned nr, size_t planes, size_t *global, size_t *local)
{
    size_t P = (size_t)geo[CLRUN__G_OH] * (size_t)geo[CLRUN__G_OW];
    size_t Og = (size_t)(geo[CLRUN__G_O] / geo[CLRUN__G_GROUPS]);
    size_t blocks = (P + v->mr - 1) / v->mr;
    /* One local size for every variant and shape (blocks past P do nothing): POCL compiles a
     * kernel once per local size it is launched with. */
    clrun__core_row_launch(v, clrun__core_group(ctx), blocks, &global[0], &local[0]);
    local[1] = local[2] = 1;
    global[1] = (Og + nr - 1) / nr;
    global[2] = planes;
}


static clrun_status core_kernel(clrun_context *ctx, const clrun__core_source *src, const clrun__core_variant *v,
                                cl_mem table, bool has_bias, bool direct, cl_uint hp, cl_uint wp, int bw,
                                cl_kernel *kernel)
{
    cl_int bias = has_bias, reads_w = direct;
    cl_uint steps = clrun__core_steps(v, clrun__core_group(ctx)), panel0 = 0;
    clrun__core_source one = *src; /* the loops of its weights alone */
    one.path = 1 + direct;
    clrun_status s = clrun__core_kernel_narrow(ctx, &one, v->mr, bw, kernel);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, *kernel, 4, sizeof table, &table);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, *kernel, 5, sizeof bias, &bias);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, *kernel, 6, sizeof hp, &hp);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, *kernel, 7, sizeof wp, &wp);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, *kernel, 8, sizeof steps, &steps);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, *kernel, 9, sizeof reads_w, &reads_w);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, *kernel, CONV_CORE_PANEL0_AT, sizeof panel0, &panel0);
    return s;
}

/* The buffers of the timed runs, over one image and group, made before the first (none when
 * nothing is timed). */
static clrun_status tuning_buffers(clrun_context *ctx, conv_tuning *t)
{
    const cl_int *geo = t->geo;
    uint64_t P = (uint64_t)geo[CLRUN__G_OH] * (uint64_t)geo[CLRUN__G_OW];
    uint64_t groups = (uint64_t)geo[CLRUN__G_GROUPS], Og = (uint64_t)geo[CLRUN__G_O] / groups;
    uint64_t Kc = (uint64_t)geo[CLRUN__G_C] / groups * (uint64_t)(geo[CLRUN__G_KH] * geo[CLRUN__G_KW]);
    uint64_t image = (uint64_t)geo[CLRUN__G_C] * t->hp * t->wp;
    clrun_status s = clrun__tune_buffer(ctx, &t->buffers, (size_t)image * 4, &t->x);
    if (s == CLRUN_OK)
        s = clrun__tune_buffer(ctx, &t->buffers,
                               (size_t)clrun__packed_elements(groups, Kc, Og, t->nr) * 4, &t->packed);
    if (s == CLRUN_OK)
        s = clrun__tune_buffer(ctx, &t->buffers, (size_t)(P * (uint64_t)geo[CLRUN__G_O] * 4), &t->out);
    if (s == CLRUN_OK)
        s = clrun__table_buffer(ctx, geo, CLRUN__G_COUNT * sizeof *geo, &t->table);
    return s;
}

static clrun_status time_variant(clrun_context *ctx, void *user, size_t i, double *seconds)
{
    conv_tuning *t = user;
    cl_kernel kernel = NULL;
    clrun_status s = t->table ? CLRUN_OK : tuning_buffers(ctx, t);
    if (s == CLRUN_OK)
        s = core_kernel(ctx, t->src, &t->variants[i], t->table, false, t->direct, t->hp, t->wp, 0, &kernel);
    size_t global[3], local[3];
    core_geometry(ctx, t->geo, &t->variants[i], t->nr, 1, global, local);
    if (s == CLRUN_OK)
        s = clrun__time_core_run(ctx, kernel, t->x, t->packed, t->out, CONV_CORE_EXTRA_AT, &t->extra, global, local, seconds);
    if (kernel)
        clrun__cl.ReleaseKernel(kernel);
    return s;
}

/* The variant for this geometry, timed once per (device, shape) over one image and group. */
static clrun_status choose_variant(clrun_context *ctx, const clrun__core_source *src, const cl_int *geo,
                                   unsigned nr, cl_uint hp, cl_uint wp, clrun__epilogue_slots extra, bool direct,
                                   const clrun__core_variant **out)
{
    uint64_t P = (uint64_t)geo[CLRUN__G_OH] * (uint64_t)geo[CLRUN__G_OW];
    uint64_t groups = (uint64_t)geo[CLRUN__G_GROUPS], Og = (uint64_t)geo[CLRUN__G_O] / groups;
    uint64_t Kc = (uint64_t)geo[CLRUN__G_C] / groups * (uint64_t)(geo[CLRUN__G_KH] * geo[CLRUN__G_KW]);
    size_t count;
    const clrun__core_variant *variants = clrun__core_candidates(P, true, &count);
    double flops = 2.0 * (double)P * (double)Og * (double)Kc;
    char key[256];
    int used = snprintf(key, sizeof key, "conv2d nr=%u%s", nr, direct ? " direct" : "");
    for (int i = 0; i < CLRUN__G_COUNT && used > 0 && (size_t)used < sizeof key; i++)
        used += snprintf(key + used, sizeof key - (size_t)used, " %d", (int)geo[i]);
    conv_tuning t = {src, variants, geo, nr, hp, wp, NULL, NULL, NULL, NULL, extra, direct, {.what = key}};
    size_t chosen = 0;
    clrun_status s = clrun__core_tune(ctx, key, flops, count, time_variant, &t, &chosen);
    if (t.table)
        clrun__cl.ReleaseMemObject(t.table);
    clrun__tune_buffers_release(ctx, &t.buffers);
    *out = &variants[chosen];
    return s;
}

/* The core's panels are NR = 2 VW output channels wide: on a 16-wide device a convolution of 16
 * channels or fewer a group (U-Net's and DBNet's 32 -> 16 heads at 128 x 128) left half of every
 * panel's columns zero, and it ran at a quarter of the rate 64 -> 32 reached there. At VW 8 the
 * panel is 16 wide: 4.9 -> 1.2 ms for that head. Each output keeps its fma chain over k in the
 * same order, so the same bits (tests/test_ops_kernels.c compares the two widths). Only where
 * the output plane has CORE_NARROW_PIXELS or more: on small planes (the 1 x 1 squeeze-and-
 * excitation products of MobileNetV3 and EfficientNet, 4-16 channels) the half panel costs
 * next to nothing, and the core at the other width is a second program and a second compile
 * on a first run (MobileNetV3-small: 0.16 s to build, 0.3-0.5 s of POCL compiling at launch). */
int clrun__conv_core_narrow = -1;

#define CORE_NARROW_PIXELS 256

static unsigned core_vw(const cl_int *geo, uint64_t images, const clrun__core_device *dev)
{
    bool few = geo[CLRUN__G_O] / geo[CLRUN__G_GROUPS] <= (cl_int)dev->vw && /* one panel at VW / 2 */
               images * (uint64_t)geo[CLRUN__G_OH] * (uint64_t)geo[CLRUN__G_OW] >= CORE_NARROW_PIXELS;
    bool narrow = clrun__conv_core_narrow > 0 || (clrun__conv_core_narrow < 0 && few);
    return dev->vw >= 16 && narrow ? dev->vw / 2 : dev->vw;
}

static clrun_status prepare_core(clrun_context *ctx, const clrun__op_call *call, const cl_int *geo,
                                 const clrun__conv_geometry *g, uint64_t images, unsigned vw,
                                 const clrun__epilogue *ep, conv_state *st)
{
    cl_uint hp, wp;
    bool padded = clrun__conv_padded_extent(geo, g, &hp, &wp);
    unsigned nr = 2 * vw;
    uint64_t groups = (uint64_t)geo[CLRUN__G_GROUPS], Og = (uint64_t)geo[CLRUN__G_O] / groups;
    uint64_t Kc = (uint64_t)geo[CLRUN__G_C] / groups * (uint64_t)(geo[CLRUN__G_KH] * geo[CLRUN__G_KW]);
    uint64_t *sources = calloc(groups, sizeof *sources);
    if (sources == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "conv2d: %" PRIu64 " groups", groups);
    for (uint64_t i = 0; i < groups; i++)
        sources[i] = i * Og * Kc;
    const clrun__core_source src = {CLRUN__CORE_CONV, vw, ep, 0};
    cl_program program = NULL; /* the head: packing and padding */
    clrun_status s = clrun__ops_program(ctx, "matmul_core", vw, NULL, &program);
    st->packs = true;
    /* B[k, o] = w[o, k]: the weights transposed, packed once when they are constant; weights
     * that change, over few positions, packed a chunk at a time (grouped: read as they are). */
    bool constant = (call->constant_inputs >> 1) & 1;
    uint64_t P = (uint64_t)geo[CLRUN__G_OH] * (uint64_t)geo[CLRUN__G_OW];
    bool few = !constant && P <= CORE_DIRECT_POSITIONS && !st->bw;
    st->direct = few && groups > 1;
    if (s == CLRUN_OK && few && groups == 1) {
        s = clrun__chunking_prepare(ctx, program, Og, Kc, nr, clrun__conv_chunk_bytes / (Kc * nr * 4),
                                    &st->chunks);
    }
    if (s == CLRUN_OK && st->bw && !constant)
        s = clrun__fail(ctx, CLRUN_ERROR_INVALID_GRAPH, "conv2d: %s weights must be constant",
                        clrun_dtype_name(call->inputs[1].dtype));
    if (s == CLRUN_OK)
        s = clrun__packing_prepare(ctx, program, groups, sources, Kc, Og, 1, Kc, nr, constant,
                                   &st->pack);
    if (s == CLRUN_OK && st->bw)
        clrun__packing_narrow(&st->pack, st->bw);
    free(sources);
    if (s == CLRUN_OK && padded)
        s = clrun__conv_padding_prepare(ctx, program, st->ks.table, geo, images, hp, wp, &st->pad);
    const clrun__core_variant *v = NULL;
    if (s == CLRUN_OK)
        s = choose_variant(ctx, &src, geo, nr, hp, wp, st->extra, st->direct, &v);
    if (s == CLRUN_OK)
        s = core_kernel(ctx, &src, v, st->ks.table, st->has_bias, st->direct, hp, wp, st->bw,
                        &st->ks.kernel);
    if (s == CLRUN_OK)
        core_geometry(ctx, geo, v, nr, (size_t)(images * groups), st->ks.global, st->ks.local);
    st->extra_index = CONV_CORE_EXTRA_AT;
    return s;
}

/* ---- conv2d elsewhere: tiles, the direct kernel, depthwise ------------------------------- */

/* Depthwise: a work-item per block of rows of one plane, DEPTHWISE_OUTPUTS outputs or more
 * where the plane has them (a small plane whole), so that the weights it holds in registers and
 * its per-row bookkeeping serve many vectors; work-groups of one item (the kernel shares
 * nothing between items, and each is already a few hundred vectors of work). */
#define DEPTHWISE_OUTPUTS 2048
static void depthwise_geometry(const cl_int *geo, uint64_t images, size_t *global, size_t *local)
{
    size_t OH = (size_t)geo[CLRUN__G_OH], OW = (size_t)geo[CLRUN__G_OW];
    size_t rows = (DEPTHWISE_OUTPUTS + OW - 1) / OW;
    rows = rows < OH ? rows : OH;
    size_t planes = (size_t)images * (size_t)geo[CLRUN__G_O];
    global[0] = (OH + rows - 1) / rows;
    global[1] = planes;
    global[2] = 1;
    local[0] = 1;
    local[1] = 1;
    local[2] = 1;
}

/* The lanes of the kernels below that run positions or channels along vectors: 16 on a
 * 16-wide device, else 8. */
static int64_t vector_lanes(const clrun__core_device *dev)
{
    return dev->vw >= 16 ? 16 : 8;
}

/* Which of kernels/conv.cl's depthwise kernels along the rows runs a convolution of `lanes`
 * lanes over `blocks` blocks of rows (depthwise_geometry's global[0]): one kernel per path, so
 * that POCL compiles only the paths a model runs, chosen as the one kernel chose in it (its
 * DW_ROW, DW_PLANE: floats of private memory). A plane of at most two vectors a row whose
 * rows fit DW_ROW goes through private memory: whole where it fits DW_PLANE and one work-item
 * has every row (plane), else a row at a time when no vector of columns lies inside the row
 * (buffered); every other plane reads x, 3 x 3 with its weights in registers and a kernel
 * per stride (1, 2, others). */
#define DEPTHWISE_ROW 128    /* kernels/conv.cl's DW_ROW */
#define DEPTHWISE_PLANE 1024 /* and DW_PLANE */
static const char *depthwise_kernel(const cl_int *geo, int64_t lanes, size_t blocks)
{
    int64_t W = geo[CLRUN__G_W], OW = geo[CLRUN__G_OW], KW = geo[CLRUN__G_KW];
    int64_t sw = geo[CLRUN__G_SW], pw = geo[CLRUN__G_PW], dw = geo[CLRUN__G_DW];
    int64_t lo = (pw + sw - 1) / sw < OW ? (pw + sw - 1) / sw : OW;
    int64_t last = W - 1 + pw - (KW - 1) * dw;
    int64_t hi = last < 0 ? 0 : last / sw + 1 < OW ? last / sw + 1 : OW;
    bool vectors = (hi > lo ? hi : lo) - lo >= lanes;
    int64_t nv = (OW + lanes - 1) / lanes, span = (nv * lanes - 1) * sw + (KW - 1) * dw + 1;
    bool fits = geo[CLRUN__G_H] * span <= DEPTHWISE_PLANE;
    if (nv <= 2 && span <= DEPTHWISE_ROW && (fits || !vectors))
        return blocks == 1 && fits ? "clrun_conv2d_depthwise_plane"
                                   : "clrun_conv2d_depthwise_buffered";
    if (geo[CLRUN__G_KH] != 3 || KW != 3)
        return "clrun_conv2d_depthwise";
    return sw == 1   ? "clrun_conv2d_depthwise_3x3_s1"
           : sw == 2 ? "clrun_conv2d_depthwise_3x3_s2"
                     : "clrun_conv2d_depthwise_3x3";
}

/* Whether conv2d runs on a depthwise kernel: a channel a group. One input channel and one
 * group (an audio front-end's Conv1d, a grayscale stem) is a plain product of K = KH * KW: the
 * depthwise kernel, holding every tap in registers, loses to the core past 3 x 3 (50x on a
 * 400-tap STFT-like Conv1d, 2x at 5 x 5). */
static bool depthwise_on(const cl_int *geo)
{
    return geo[CLRUN__G_C] == geo[CLRUN__G_GROUPS] &&
           (geo[CLRUN__G_GROUPS] > 1 || geo[CLRUN__G_KH] * geo[CLRUN__G_KW] <= 9);
}

/* A depthwise convolution of at most DEPTHWISE_C_TAPS taps on a CPU runs with the channels
 * along the vectors (clrun_conv2d_depthwise_c: every lane busy and no select per tap, where a
 * 7 x 7 plane filled 7 of clrun_conv2d_depthwise's 16 lanes) over a plane of at most
 * DEPTHWISE_C_PLANE positions, whole (28 x 28 and less), and over a larger plane by bands of
 * rows when it has DEPTHWISE_C_BAND_TAPS taps or more; the same taps in the same order, the
 * same bits. Each band's rows are copied in and out transposed: over 56 x 56 and 112 x 112
 * planes 3 x 3 kernels ran 1.1-1.4x faster along the rows, which read x where it lies, and
 * 5 x 5 ones (56 x 56 at stride 2) 2x slower. clrun__conv_depthwise_channels (ops_internal.h):
 * < 0 this choice, 0 never, > 0 on any device and by bands over any plane a band fits. */
#define DEPTHWISE_C_PLANE 1024   /* kernels/conv.cl's DWC_PLANE */
#define DEPTHWISE_C_TAPS 49      /* and DWC_TAPS */
#define DEPTHWISE_C_BAND_TAPS 25
int clrun__conv_depthwise_channels = -1;

/* The most output rows a band of clrun_conv2d_depthwise_c may have: its input rows and its
 * output rows each within DEPTHWISE_C_PLANE positions (0: not one row). */
static int64_t depthwise_band_rows(const cl_int *geo)
{
    int64_t W = geo[CLRUN__G_W], OW = geo[CLRUN__G_OW], OH = geo[CLRUN__G_OH];
    int64_t reach = (int64_t)(geo[CLRUN__G_KH] - 1) * geo[CLRUN__G_DH] + 1; /* input rows of one */
    int64_t by_in = (DEPTHWISE_C_PLANE / W - reach) / geo[CLRUN__G_SH] + 1;
    int64_t rows = DEPTHWISE_C_PLANE / W < reach ? 0 : by_in < DEPTHWISE_C_PLANE / OW ? by_in : DEPTHWISE_C_PLANE / OW;
    return rows < OH ? rows : OH;
}

static bool depthwise_channels_on(const cl_int *geo, const clrun__core_device *dev)
{
    bool chosen = clrun__conv_depthwise_channels > 0 || (clrun__conv_depthwise_channels < 0 && dev->registers);
    int64_t taps = (int64_t)geo[CLRUN__G_KH] * geo[CLRUN__G_KW];
    bool whole = (int64_t)geo[CLRUN__G_H] * geo[CLRUN__G_W] <= DEPTHWISE_C_PLANE;
    return chosen && taps <= DEPTHWISE_C_TAPS && depthwise_band_rows(geo) > 0 &&
           (whole || taps >= DEPTHWISE_C_BAND_TAPS || clrun__conv_depthwise_channels > 0);
}

/* A pointwise convolution (1 x 1, stride 1, no padding, one group) of f32 weights on a CPU
 * runs as W X with the positions along the vectors (kernels/conv.cl's clrun_conv2d_pointwise:
 * whole-vector stores along each plane) where a plane holds POINTWISE_MIN_BLOCKS blocks of
 * positions (8 channels by 2 vectors each): the same fma chain as the core, the same bits, the
 * core's variants then never tried. Tests that force a kernel or a core variant get what they force;
 * clrun__conv_pointwise_forced (ops_internal.h) takes this kernel on any device. */
#define POINTWISE_MR 8
/* Below this many blocks of positions a plane's last block, moved back to end at P, repeats too
 * much of the one before: 7 x 7 planes (49 positions, two blocks of 32) ran 1.3-1.4x slower
 * than on the core, 14 x 14 (196, seven blocks) 0.7-0.8x. */
#define POINTWISE_MIN_BLOCKS 4
/* A work-item takes blocks of 8 channels until it has this many input channels' work (over 16
 * input channels one block is little work for one of POCL's work-groups, and the item's
 * positions stay in cache), as long as the launch keeps POINTWISE_MIN_ITEMS work-items. */
#define POINTWISE_TAPS 256
#define POINTWISE_MIN_ITEMS 32
bool clrun__conv_pointwise_forced;

/* The positions a pointwise work-item covers: 2 vectors of the device's width (16 or 8). */
static int64_t pointwise_block(const clrun__core_device *dev)
{
    return 2 * vector_lanes(dev);
}

/* A plane of at most POINTWISE_SMALL_PLANE positions that takes a pointwise kernel runs on
 * kernels/conv.cl's clrun_conv2d_pointwise_small (vectors of 8, 5 of them by 4 channels a
 * work-item) where its blocks of 40 positions waste fewer lanes than clrun_conv2d_pointwise's
 * blocks of 2 vectors (14 x 14: 200 lanes for 196 positions against 224): MobileNetV3-small's and EfficientNet's
 * expanding 1 x 1 layers at 14 x 14 0.86-0.90x the time (40 -> 240 channels 43.0 -> 38.7 us,
 * 112 -> 672 337 -> 303; medians of 12 runs each, alternating), those that contract level. On
 * 13 x 13 (200 lanes against 192) it ran 1.05-1.09x slower, and over 7 x 7 planes, 7 vectors by
 * 3 channels (56 lanes for 49), lost to the core in the models (MobileNetV3's 96 -> 576 with
 * its hardswish 51 -> 58 us, its epilogue then a kernel of its own; EfficientNet's 192 -> 1152
 * 163 -> 181), though not in chains of one layer: both left out. The same chain, the same
 * bits. Only where the device's vectors are 8 wide: with 16 (AVX-512) the kernel's vectors of 8
 * run at half the rate, and clrun_conv2d_pointwise's blocks of 2 vectors of 16 took 0.55-0.75x
 * its time at 14 x 14 (EfficientNet-B0's 480 -> 112 136-152 -> 82-102 us, 112 -> 672 188 -> 112-119,
 * with its SiLU 266-269 -> 152-154; per-kernel minima of 3 processes) and the model's summed
 * kernel time 8.95-9.20 -> 8.47-8.56 ms. clrun__conv_pointwise_small (ops_internal.h): < 0
 * this choice, 0 never, > 0 on every plane of 8 positions or more that takes a pointwise kernel. */
#define POINTWISE_SMALL_MIN 8 /* one vector of 8 */
#define POINTWISE_SMALL_PLANE 256
#define POINTWISE_SMALL_MR 4  /* kernels/conv.cl's PS_MR */
#define POINTWISE_SMALL_NR 40 /* and PS_NR */
int clrun__conv_pointwise_small = -1;

static bool pointwise_small(const cl_int *geo, const clrun__core_device *dev)
{
    int64_t P = (int64_t)geo[CLRUN__G_OH] * geo[CLRUN__G_OW], nr = pointwise_block(dev);
    int64_t lanes = (P + POINTWISE_SMALL_NR - 1) / POINTWISE_SMALL_NR * POINTWISE_SMALL_NR;
    int64_t wide = (P + nr - 1) / nr * nr; /* 14 x 14: 200 and 224 */
    return P >= POINTWISE_SMALL_MIN &&
           (clrun__conv_pointwise_small > 0 ||
            (clrun__conv_pointwise_small < 0 && vector_lanes(dev) == 8 && P <= POINTWISE_SMALL_PLANE &&
             lanes < wide));
}

static bool pointwise_on(const cl_int *geo, const clrun__core_device *dev, int bw)
{
    int64_t nr = pointwise_block(dev), P = (int64_t)geo[CLRUN__G_OH] * geo[CLRUN__G_OW];
    bool small = pointwise_small(geo, dev);
    bool chosen = clrun__conv_pointwise_forced ||
                  (dev->registers && clrun__ops_kernels == CLRUN__KERNELS_AUTO && clrun__ops_variant < 0 &&
                   P >= POINTWISE_MIN_BLOCKS * nr);
    return chosen && !bw && geo[CLRUN__G_KH] == 1 && geo[CLRUN__G_KW] == 1 && geo[CLRUN__G_SH] == 1 &&
           geo[CLRUN__G_SW] == 1 && geo[CLRUN__G_PH] == 0 && geo[CLRUN__G_PW] == 0 &&
           geo[CLRUN__G_GROUPS] == 1 && geo[CLRUN__G_OH] == geo[CLRUN__G_H] &&
           geo[CLRUN__G_OW] == geo[CLRUN__G_W] && (P >= nr || small);
}

/* A convolution of one group over few taps a channel sum (C KH KW <= ROWS_MAX_TAPS, more than
 * one tap: a 3-channel stem) of f32 weights on a CPU runs with the positions along the vectors
 * (kernels/conv.cl's clrun_conv2d_rows: whole-vector stores along each output row; the core
 * stores each output a plane from the next): the 224 x 224 stem 3 -> 16 at stride 2 with a
 * hardswish took 3.3x onnxruntime's time on the core. Where its rows hold a vector and the
 * input span of a vector fits kernels/conv.cl's CR_SPAN. clrun__conv_rows_forced
 * (ops_internal.h) takes it on any device. */
#define ROWS_MAX_TAPS 32
#define ROWS_SPAN 128 /* kernels/conv.cl's CR_SPAN */
bool clrun__conv_rows_forced;

static bool rows_on(const cl_int *geo, const clrun__core_device *dev, int bw)
{
    int64_t lanes = vector_lanes(dev);
    int64_t taps = (int64_t)geo[CLRUN__G_C] * geo[CLRUN__G_KH] * geo[CLRUN__G_KW];
    int64_t span = (lanes - 1) * geo[CLRUN__G_SW] + (int64_t)(geo[CLRUN__G_KW] - 1) * geo[CLRUN__G_DW] + 1;
    bool chosen = clrun__conv_rows_forced ||
                  (dev->registers && clrun__ops_kernels == CLRUN__KERNELS_AUTO && clrun__ops_variant < 0);
    return chosen && !bw && geo[CLRUN__G_GROUPS] == 1 && taps > geo[CLRUN__G_C] && taps <= ROWS_MAX_TAPS &&
           geo[CLRUN__G_OW] >= lanes && span <= ROWS_SPAN;
}

static clrun_status prepare_other(clrun_context *ctx, const cl_int *geo, uint64_t images,
                                  const clrun__core_device *dev, const clrun__epilogue *ep,
                                  bool pointwise, bool rows, bool constant, conv_state *st)
{
    size_t P = (size_t)geo[CLRUN__G_OH] * (size_t)geo[CLRUN__G_OW];
    int groups = geo[CLRUN__G_GROUPS], Og = geo[CLRUN__G_O] / groups;
    bool depthwise = geo[CLRUN__G_C] == groups && clrun__ops_kernels != CLRUN__KERNELS_SIMPLE &&
                     (dev->registers || Og < GEMM_MIN_ROWS);
    bool gemm = !pointwise && !rows && !depthwise && !dev->registers &&
                (clrun__ops_kernels == CLRUN__KERNELS_AUTO ? Og >= GEMM_MIN_ROWS
                                                           : clrun__ops_kernels == CLRUN__KERNELS_TILED);
    clrun_status s = CLRUN_OK;
    size_t limit = 0;
    st->extra_index = 6;
    if (gemm) {
        s = clrun__ops_kernel(ctx, "matmul", dev->vw, ep, "clrun_conv2d_gemm", &st->ks.kernel);
        if (s == CLRUN_OK)
            s = clrun__local_size(ctx, st->ks.kernel, 256, &limit);
        if (s != CLRUN_OK)
            return s;
        if (limit >= 256) {
            st->ks.local[0] = st->ks.local[1] = 16, st->ks.local[2] = 1;
            st->ks.global[0] = (P + 63) / 64 * 16;
            st->ks.global[1] = ((size_t)Og + 63) / 64 * 16;
            st->ks.global[2] = (size_t)images * (size_t)groups;
            return CLRUN_OK;
        }
        clrun__cl.ReleaseKernel(st->ks.kernel);
        st->ks.kernel = NULL;
    }
    if (s == CLRUN_OK && rows) {
        size_t lanes = (size_t)vector_lanes(dev);
        /* the weights in panels of kernels/conv.cl's CR_MR channels (as many as the vectors'
         * lanes) as the core packs them, once when constant: a tap's weights for a block side
         * by side from one pointer (16 pointers, one a row of w, spilled in the tap loop) */
        uint64_t O = (uint64_t)geo[CLRUN__G_O];
        uint64_t K = (uint64_t)geo[CLRUN__G_C] * (uint64_t)(geo[CLRUN__G_KH] * geo[CLRUN__G_KW]);
        const uint64_t source = 0;
        cl_program program = NULL;
        s = clrun__ops_program(ctx, "matmul_core", dev->vw, NULL, &program);
        if (s == CLRUN_OK)
            s = clrun__packing_prepare(ctx, program, 1, &source, K, O, 1, K, (unsigned)lanes, constant,
                                       &st->pack);
        st->packs = s == CLRUN_OK;
        if (s == CLRUN_OK)
            s = clrun__ops_kernel_of_set(ctx, "conv", dev->vw, ep, "clrun_conv2d_rows", &st->ks.kernel);
        st->ks.global[0] = (size_t)geo[CLRUN__G_OH] * (((size_t)geo[CLRUN__G_OW] + lanes - 1) / lanes);
        st->ks.global[1] = 1; /* every block of channels in one work-item (SqueezeNet's stem 3 -> 64: 1.17 -> 0.62 ms) */
        st->ks.global[2] = (size_t)images;
        st->ks.local[0] = st->ks.local[1] = st->ks.local[2] = 1;
        return s;
    }
    if (s == CLRUN_OK && pointwise) {
        bool small = pointwise_small(geo, dev);
        size_t nr = small ? POINTWISE_SMALL_NR : (size_t)pointwise_block(dev);
        size_t mr = small ? POINTWISE_SMALL_MR : POINTWISE_MR;
        /* blocks of channels per work-item: at least POINTWISE_TAPS input channels' work */
        size_t blocks = ((size_t)geo[CLRUN__G_O] + mr - 1) / mr;
        size_t per = (POINTWISE_TAPS + (size_t)geo[CLRUN__G_C] - 1) / (size_t)geo[CLRUN__G_C];
        size_t most = blocks * ((P + nr - 1) / nr) / POINTWISE_MIN_ITEMS; /* keeps the cores busy */
        per = per < most ? per : most < 1 ? 1 : most;
        s = small ? clrun__ops_kernel(ctx, "conv", dev->vw, ep, "clrun_conv2d_pointwise_small", &st->ks.kernel)
                  : clrun__ops_kernel_of_set(ctx, "conv", dev->vw, ep, "clrun_conv2d_pointwise", &st->ks.kernel);
        st->ks.global[0] = (P + nr - 1) / nr;
        st->ks.global[1] = (blocks + per - 1) / per;
        st->ks.global[2] = (size_t)images;
        st->ks.local[0] = st->ks.local[1] = st->ks.local[2] = 1;
        return s;
    }
    if (s == CLRUN_OK && depthwise && depthwise_channels_on(geo, dev)) {
        size_t lanes = (size_t)vector_lanes(dev);
        int64_t band = depthwise_band_rows(geo);
        s = clrun__ops_kernel_of_set(ctx, "conv", dev->vw, ep, "clrun_conv2d_depthwise_c", &st->ks.kernel);
        st->ks.global[0] = ((size_t)geo[CLRUN__G_O] + lanes - 1) / lanes;
        st->ks.global[1] = (size_t)images;
        st->ks.global[2] = (size_t)((geo[CLRUN__G_OH] + band - 1) / band);
        st->ks.local[0] = st->ks.local[1] = st->ks.local[2] = 1;
        return s;
    }
    if (s == CLRUN_OK && depthwise) {
        depthwise_geometry(geo, images, st->ks.global, st->ks.local);
        return clrun__ops_kernel_of_set(ctx, "conv", dev->vw, ep,
                                        depthwise_kernel(geo, vector_lanes(dev), st->ks.global[0]), &st->ks.kernel);
    }
    if (s == CLRUN_OK)
        s = clrun__ops_kernel(ctx, "conv", dev->vw, ep, "clrun_conv2d_direct", &st->ks.kernel);
    if (s == CLRUN_OK)
        s = clrun__local_size(ctx, st->ks.kernel, 128, &st->ks.local[0]);
    st->ks.local[1] = st->ks.local[2] = 1;
    st->ks.global[0] = clrun__round_up(P, st->ks.local[0]);
    st->ks.global[1] = (size_t)geo[CLRUN__G_O];
    st->ks.global[2] = (size_t)images;
    return s;
}

static void conv_geometry_table(const clrun__op_call *call, const clrun__conv_geometry *g,
                                int64_t in_channels, int64_t out_channels, cl_int *geo)
{
    const clrun_tensor_type *x = &call->inputs[0], *w = &call->inputs[1];
    const cl_int values[CLRUN__G_COUNT] = {
        [CLRUN__G_C] = (cl_int)in_channels, [CLRUN__G_H] = (cl_int)x->shape[2],
        [CLRUN__G_W] = (cl_int)x->shape[3], [CLRUN__G_O] = (cl_int)out_channels,
        [CLRUN__G_KH] = (cl_int)w->shape[2], [CLRUN__G_KW] = (cl_int)w->shape[3],
        [CLRUN__G_OH] = (cl_int)g->oh, [CLRUN__G_OW] = (cl_int)g->ow,
        [CLRUN__G_SH] = (cl_int)g->stride[0], [CLRUN__G_SW] = (cl_int)g->stride[1],
        [CLRUN__G_PH] = (cl_int)g->pad[0], [CLRUN__G_PW] = (cl_int)g->pad[1],
        [CLRUN__G_DH] = (cl_int)g->dilation[0], [CLRUN__G_DW] = (cl_int)g->dilation[1],
        [CLRUN__G_GROUPS] = (cl_int)g->groups,
    };
    memcpy(geo, values, sizeof values);
}

/* A convolution with a 1 x 1 kernel over a 1 x 1 plane, no padding, one group and constant f32
 * weights (squeeze-and-excitation's products: [N, C, 1, 1] by [O, C, 1, 1]) is the product
 * out[n, o] = sum over c of w[o, c] x[n, c], x and out as they lie: where the conv core would
 * run it, it runs as matmul's core instead (the weights packed as a transposed B, its rows the
 * images). The same fma chain over c ascending, then the bias, then the epilogue, called with
 * the same element index and channel: the same bits. On a CPU that kernel (one row) is the one
 * a model's classifier runs, and the fusion pass puts the convolution's epilogues in the
 * classifier's set (clrun__conv_runs_as_product): a first run builds and compiles the core at
 * one row once, where the conv core's one-row variant was another program and another compile
 * at its first launch (MobileNetV3-small and EfficientNet-B0: 0.3 s of POCL's compile). */
int clrun__conv_product = -1;

static bool core_on(const cl_int *geo, const clrun__core_device *dev, int bw)
{
    bool pointwise = pointwise_on(geo, dev, bw);
    return dev->registers && !depthwise_on(geo) && clrun__ops_kernels != CLRUN__KERNELS_SIMPLE &&
           !pointwise && !rows_on(geo, dev, bw);
}

static bool product_on(const clrun__op_call *call, const clrun__conv_geometry *g, const cl_int *geo,
                       const clrun__core_device *dev)
{
    int bw = clrun__narrow_code(call->inputs[1].dtype);
    bool constant = (call->constant_inputs >> 1) & 1;
    return clrun__conv_product != 0 && clrun__ops_variant < 0 && core_on(geo, dev, bw) && !bw &&
           constant && call->inputs[0].dtype == CLRUN_F32 && geo[CLRUN__G_H] == 1 &&
           geo[CLRUN__G_W] == 1 && geo[CLRUN__G_KH] == 1 && geo[CLRUN__G_KW] == 1 &&
           g->pad[0] == 0 && g->pad[1] == 0 && g->pad_end[0] == 0 && g->pad_end[1] == 0 &&
           geo[CLRUN__G_GROUPS] == 1 && geo[CLRUN__G_OH] == 1 && geo[CLRUN__G_OW] == 1;
}

bool clrun__conv_runs_as_product(clrun_context *ctx, const clrun__op_call *call)
{
    clrun__conv_geometry g;
    const clrun__infer_error quiet = {"conv2d", NULL, 0};
    clrun__core_device dev;
    if (clrun__conv_geometry_of(call, &g, &quiet) != CLRUN_OK || clrun__core_device_of(ctx, &dev) != CLRUN_OK)
        return false;
    cl_int geo[CLRUN__G_COUNT];
    conv_geometry_table(call, &g, call->inputs[0].shape[1], call->inputs[1].shape[0], geo);
    return product_on(call, &g, geo, &dev);
}

/* Prepares matmul's kernel for the product of a 1 x 1 plane (product_on) into st->product:
 * a [N, C] by b [O, C] transposed, the bias [O], out [N, O]. */
static clrun_status prepare_product(clrun_context *ctx, const clrun__op *op, const clrun__op_call *call,
                                    const clrun__epilogue *ep, conv_state *st)
{
    int64_t N = call->inputs[0].shape[0], C = call->inputs[0].shape[1], O = call->inputs[1].shape[0];
    st->product_types[0] = (clrun_tensor_type){CLRUN_F32, 2, {N, C}};
    st->product_types[1] = (clrun_tensor_type){call->inputs[1].dtype, 2, {O, C}};
    st->product_types[2] = (clrun_tensor_type){CLRUN_F32, 1, {O}};
    st->product_types[3] = (clrun_tensor_type){CLRUN_F32, 2, {N, O}};
    st->product_attr = (clrun_attr){.name = "transpose_b", .kind = CLRUN_ATTR_INT, .i = 1};
    st->product_call = (clrun__op_call){.inputs = st->product_types,
                                        .input_count = st->has_bias ? 3 : 2,
                                        .outputs = st->product_types + 3,
                                        .output_count = 1,
                                        .attrs = &st->product_attr,
                                        .attr_count = 1,
                                        .constant_inputs = call->constant_inputs};
    return clrun__epilogue_matmul[0].prepare(ctx, op, &st->product_call, ep, &st->product);
}

/* A lane-at-a-time epilogue store (kernels/conv.cl's DW_STORE: each vector spilled, then the
 * epilogue and a store per element; PS_PUT, the small planes' pointwise kernel's, stores the
 * lanes back as one vector) costs more than the pass it saves when
 * the epilogue does real work: on POCL MobileNetV3-small ran 2.6-2.9 ms with no epilogue on
 * these kernels, 3.2-3.5 ms with its hardswishes and relus fused (SqueezeNet 8.9 against 9.6,
 * ShuffleNetV2 5.4-5.5 against 5.7-6.0, the same bits), and a hardswish took MobileNetV3's
 * 40 -> 240 pointwise layer from 30.8 to 44.6 us. A cheap one (a relu, a clip, a bias or
 * residual add: `cheap`, the fusion pass's judgement of the group) pays on the small planes'
 * pointwise kernel only: ShuffleNetV2's 14 x 14 layers 30-36 us and a relu of 1.7 us -> 30-34
 * us fused (per-kernel minima of 7 runs), four 116 -> 116 layers with their relus 0.91x the
 * time (wall, alternating). On the pointwise kernel of large planes (ShuffleNetV2's 28 x 28
 * layers 36 + 3.4 -> 47-49 us; MobileNetV3's 56 x 56 16 -> 72 45 + 11 -> 121), the depthwise
 * kernels (28.6 + 4.4 -> 39.4, 38 + 5 -> 64) and a stem's rows (four 3 -> 24 stems at 224 x
 * 224 with their relus 1.25x the time) it lost even so. Those kernels take an epilogue that runs
 * on vectors instead (DW_STORE applies it to the stored vector): MobileNetV3-small 1.99-2.38
 * -> 1.87-1.92 ms a run with its hardswishes and relus so fused, SqueezeNet 5.11-5.39 ->
 * 5.02-5.06, ShuffleNetV2 level; a residual of the output's shape or a per-channel input is
 * read as a vector there too (lib/fuse/codegen.h): MobileNetV3-small's six residual adds and
 * EfficientNet-B0's, each a kernel of its own after a pointwise layer of 2 vectors. The core's
 * store (ResNet-18, U-Net) came level either way and keeps them all. */
clrun__conv_store clrun__conv_store_of(clrun_context *ctx, const clrun__op_call *call)
{
    clrun__conv_geometry g;
    const clrun__infer_error quiet = {"conv2d", NULL, 0};
    clrun__core_device dev;
    if (clrun__conv_geometry_of(call, &g, &quiet) != CLRUN_OK || clrun__core_device_of(ctx, &dev) != CLRUN_OK)
        return CLRUN__CONV_STORE_ANY; /* prepare says why */
    if (!dev.registers || clrun__ops_kernels == CLRUN__KERNELS_SIMPLE)
        return CLRUN__CONV_STORE_ANY;
    cl_int geo[CLRUN__G_COUNT];
    conv_geometry_table(call, &g, call->inputs[0].shape[1], call->inputs[1].shape[0], geo);
    int bw = clrun__narrow_code(call->inputs[1].dtype);
    bool depthwise = depthwise_on(geo), pointwise = pointwise_on(geo, &dev, bw);
    bool rows = !pointwise && rows_on(geo, &dev, bw);
    if (!depthwise && !pointwise && !rows)
        return CLRUN__CONV_STORE_ANY; /* the core */
    if (pointwise && pointwise_small(geo, &dev))
        return CLRUN__CONV_STORE_SMALL;
    bool rows3 = depthwise && !depthwise_channels_on(geo, &dev) && geo[CLRUN__G_KH] == 3 &&
                 geo[CLRUN__G_KW] == 3 && strncmp(depthwise_kernel(geo, vector_lanes(&dev), SIZE_MAX),
                                                  "clrun_conv2d_depthwise_3x3", 26) == 0;
    return rows3 ? CLRUN__CONV_STORE_ROWS3 : CLRUN__CONV_STORE_LANES;
}

/* An epilogue that computes an exp or a tanh (`math`: SiLU, sigmoid) on the vectors of a 3 x 3
 * depthwise kernel along the rows (a vector's nine fmas, then its exp, each a chain the next
 * waits on) took EfficientNet-B0's 56 x 56 layer to 355 us against 145 + 128 for the pair, and
 * its 112 x 112 ones 1.05-1.1x the pair; computing two vectors at once brought them level but
 * cost 0.25 s of POCL's compile on a first run. The other lane kernels gain: the 1 x 1 layers of
 * large planes 0.75x the pair, the stem's rows 0.7x, the 5 x 5 depthwise ones 0.8-0.9x. */
bool clrun__conv_epilogue_pays(clrun_context *ctx, const clrun__op_call *call, bool cheap, bool vectors,
                               bool math)
{
    switch (clrun__conv_store_of(ctx, call)) {
    case CLRUN__CONV_STORE_SMALL: return cheap || vectors;
    case CLRUN__CONV_STORE_LANES: return vectors;
    case CLRUN__CONV_STORE_ROWS3: return vectors && !math;
    default: return true;
    }
}

static clrun_status conv_prepare_epilogue(clrun_context *ctx, const clrun__op *op,
                                          const clrun__op_call *call, const clrun__epilogue *ep,
                                          void **state)
{
    *state = NULL;
    clrun__conv_geometry g;
    const clrun__infer_error quiet = {"conv2d", NULL, 0};
    if (clrun__conv_geometry_of(call, &g, &quiet) != CLRUN_OK)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_GRAPH, "conv2d: prepare on types infer refuses");
    cl_int geo[CLRUN__G_COUNT];
    conv_geometry_table(call, &g, call->inputs[0].shape[1], call->inputs[1].shape[0], geo);
    clrun__core_device dev;
    clrun_status s = clrun__core_device_of(ctx, &dev);
    if (s != CLRUN_OK)
        return s;
    conv_state *st = calloc(1, sizeof *st);
    if (st == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "conv2d: node state");
    st->conv = true;
    st->ks.inputs = 3;
    st->ks.dims = 3;
    st->ks.what = "conv2d";
    st->dequant = clrun__product_dequant(call, &st->has_bias);
    st->bw = clrun__narrow_code(call->inputs[1].dtype);
    st->extra = clrun__epilogue_slots_of(ep);
    cl_int has_bias = st->has_bias;
    uint64_t images = (uint64_t)call->inputs[0].shape[0];
    if (product_on(call, &g, geo, &dev)) {
        s = prepare_product(ctx, op, call, ep, st);
        if (s != CLRUN_OK) {
            conv_release(st);
            return s;
        }
        *state = st;
        return CLRUN_OK;
    }
    bool pointwise = pointwise_on(geo, &dev, st->bw);
    bool rows = !pointwise && rows_on(geo, &dev, st->bw);
    st->core = core_on(geo, &dev, st->bw);
    s = clrun__table_buffer(ctx, geo, sizeof geo, &st->ks.table);
    if (s == CLRUN_OK)
        s = st->core ? prepare_core(ctx, call, geo, &g, images, core_vw(geo, images, &dev), ep, st)
                     : prepare_other(ctx, geo, images, &dev, ep, pointwise, rows,
                                     (call->constant_inputs >> 1) & 1, st);
    if (s == CLRUN_OK && !st->core)
        s = clrun__arg(ctx, st->ks.kernel, 4, sizeof st->ks.table, &st->ks.table);
    if (s == CLRUN_OK && !st->core)
        s = clrun__arg(ctx, st->ks.kernel, 5, sizeof has_bias, &has_bias);
    uint64_t Kc = (uint64_t)(call->inputs[1].shape[1] * call->inputs[1].shape[2] * call->inputs[1].shape[3]);
    if (s == CLRUN_OK && !st->core && st->bw) /* w widened into scratch, [O, C/groups, KH, KW] */
        s = clrun__widening_prepare(ctx, st->bw, Kc * (uint64_t)call->inputs[1].shape[0], Kc,
                                    (uint64_t)call->inputs[1].shape[0], st->dequant == 2, dev.vw, &st->widen);
    if (s != CLRUN_OK) {
        conv_release(st);
        return s;
    }
    *state = st;
    return CLRUN_OK;
}

static clrun_status conv_prepare(clrun_context *ctx, const clrun__op *op, const clrun__op_call *call,
                                 void **state)
{
    return conv_prepare_epilogue(ctx, op, call, NULL, state);
}

/* Kernel `name` of kernels/conv.cl from the text conv2d's kernels there are built from (after
 * the device's VW, without an epilogue): a model that pools and runs a depthwise convolution
 * builds the file once, where the embedded file and that text were two builds of it (POCL's
 * front end: ShuffleNetV2 0.3 s of an empty-cache first run). */
static clrun_status conv_file_kernel(clrun_context *ctx, const char *name, cl_kernel *out)
{
    clrun__core_device dev;
    cl_program program = NULL;
    clrun_status s = clrun__core_device_of(ctx, &dev);
    if (s == CLRUN_OK)
        s = clrun__ops_program(ctx, "conv", dev.vw, NULL, &program);
    if (s == CLRUN_OK)
        s = clrun__program_kernel(ctx, program, name, 0, out);
    return s;
}

/* ---- conv_transpose2d: one output per work-item ------------------------------------------ */

static clrun_status conv_transpose_prepare(clrun_context *ctx, const clrun__op *op,
                                           const clrun__op_call *call, void **state)
{
    (void)op;
    *state = NULL;
    clrun__conv_geometry g;
    const clrun__infer_error quiet = {"conv_transpose2d", NULL, 0};
    if (clrun__conv_transpose_geometry_of(call, &g, &quiet) != CLRUN_OK)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_GRAPH, "conv_transpose2d: prepare on types infer refuses");
    cl_int geo[CLRUN__G_COUNT];
    conv_geometry_table(call, &g, call->inputs[0].shape[1], call->inputs[1].shape[1] * g.groups, geo);
    conv_state *st = calloc(1, sizeof *st);
    if (st == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "conv_transpose2d: node state");
    st->conv = true;
    st->ks.inputs = 3;
    st->ks.dims = 3;
    st->ks.what = "conv_transpose2d";
    st->has_bias = call->input_count == 3;
    cl_int has_bias = st->has_bias;
    clrun_status s = conv_file_kernel(ctx, "clrun_conv_transpose2d", &st->ks.kernel);
    if (s == CLRUN_OK)
        s = clrun__local_size(ctx, st->ks.kernel, 128, &st->ks.local[0]);
    if (s == CLRUN_OK)
        s = clrun__table_buffer(ctx, geo, sizeof geo, &st->ks.table);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->ks.kernel, 4, sizeof st->ks.table, &st->ks.table);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->ks.kernel, 5, sizeof has_bias, &has_bias);
    st->ks.local[1] = st->ks.local[2] = 1;
    st->ks.global[0] = clrun__round_up((size_t)(g.oh * g.ow), st->ks.local[0]);
    st->ks.global[1] = (size_t)geo[CLRUN__G_O];
    st->ks.global[2] = (size_t)call->inputs[0].shape[0];
    if (s != CLRUN_OK) {
        conv_release(st);
        return s;
    }
    *state = st;
    return CLRUN_OK;
}

/* ---- pooling ----------------------------------------------------------------------------- */

/* maxpool2d (code 1) and avgpool2d (code 0). */
static clrun_status pool_prepare(clrun_context *ctx, const clrun__op *op, const clrun__op_call *call,
                                 void **state)
{
    bool is_max = op->code == 1;
    *state = NULL;
    clrun__pooling_geometry g;
    const clrun__infer_error quiet = {"pool", NULL, 0};
    if (clrun__pooling_geometry_of(call, &g, &quiet) != CLRUN_OK)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_GRAPH, "pool: prepare on types infer refuses");
    const clrun_tensor_type *x = &call->inputs[0];
    const cl_int geo[CLRUN__P_COUNT] = {
        [CLRUN__P_H] = (cl_int)x->shape[2], [CLRUN__P_W] = (cl_int)x->shape[3],
        [CLRUN__P_OH] = (cl_int)g.oh, [CLRUN__P_OW] = (cl_int)g.ow,
        [CLRUN__P_KH] = (cl_int)g.kernel[0], [CLRUN__P_KW] = (cl_int)g.kernel[1],
        [CLRUN__P_SH] = (cl_int)g.stride[0], [CLRUN__P_SW] = (cl_int)g.stride[1],
        [CLRUN__P_PH] = (cl_int)g.pad[0], [CLRUN__P_PW] = (cl_int)g.pad[1],
        [CLRUN__P_PHE] = (cl_int)g.pad_end[0], [CLRUN__P_PWE] = (cl_int)g.pad_end[1],
        [CLRUN__P_DH] = (cl_int)g.dilation[0], [CLRUN__P_DW] = (cl_int)g.dilation[1],
        [CLRUN__P_INCLUDE_PAD] = g.count_include_pad,
    };
    conv_state *st = calloc(1, sizeof *st);
    if (st == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "pool: node state");
    st->ks.inputs = 1;
    st->ks.dims = 3;
    st->ks.what = "pool";
    cl_int max_flag = is_max;
    clrun_status s = conv_file_kernel(ctx, "clrun_pool2d_f32", &st->ks.kernel);
    if (s == CLRUN_OK)
        s = clrun__table_buffer(ctx, geo, sizeof geo, &st->ks.table);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->ks.kernel, 2, sizeof st->ks.table, &st->ks.table);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->ks.kernel, 3, sizeof max_flag, &max_flag);
    if (s == CLRUN_OK) { /* blocks of rows as the depthwise kernel's (depthwise_geometry) */
        size_t rows = (DEPTHWISE_OUTPUTS + (size_t)g.ow - 1) / (size_t)g.ow;
        rows = rows < (size_t)g.oh ? rows : (size_t)g.oh;
        st->ks.global[0] = ((size_t)g.oh + rows - 1) / rows;
        st->ks.global[1] = (size_t)clrun__dims_product(x, 0, 2);
        st->ks.global[2] = 1;
        st->ks.local[0] = st->ks.local[1] = st->ks.local[2] = 1;
    }
    return clrun__kernel_state_done(st, s, state);
}

/* ---- global_avgpool, global_maxpool: a mean or maximum over H and W ---------------------- */

static clrun_status global_pool_prepare(clrun_context *ctx, const clrun__op *op,
                                        const clrun__op_call *call, void **state)
{
    static const bool over_h_and_w[4] = {false, false, true, true};
    bool is_max = strcmp(op->name, "global_maxpool") == 0;
    return clrun__reduce_prepare(ctx, &call->inputs[0], over_h_and_w,
                                 is_max ? CLRUN__REDUCE_MAX : CLRUN__REDUCE_MEAN, state);
}

/* ---- the table --------------------------------------------------------------------------- */

static const clrun__op_kernels conv_kernels = {
    .prepare = conv_prepare,
    .enqueue = conv_enqueue,
    .release = conv_release,
    .scratch = conv_scratch,
    .packed_bytes = conv_packed_bytes,
    .pack = conv_pack,
};
static const clrun__op_kernels conv_transpose_kernels = {
    .prepare = conv_transpose_prepare, .enqueue = conv_enqueue, .release = conv_release};
static const clrun__op_kernels pool_kernels = {
    .prepare = pool_prepare, .enqueue = conv_enqueue, .release = conv_release};
static const clrun__op_kernels global_pool_kernels = {
    .prepare = global_pool_prepare,
    .enqueue = clrun__reduce_enqueue,
    .release = clrun__reduce_release,
};

const clrun__named_epilogue clrun__epilogue_conv[] = {{"conv2d", conv_prepare_epilogue, false}, {NULL, NULL, false}};

const clrun__named_kernels clrun__kernels_conv[] = {
    {"conv2d", &conv_kernels},
    {"conv_transpose2d", &conv_transpose_kernels},
    {"maxpool2d", &pool_kernels},
    {"avgpool2d", &pool_kernels},
    {"global_avgpool", &global_pool_kernels},
    {"global_maxpool", &global_pool_kernels},
    {NULL, NULL},
};
