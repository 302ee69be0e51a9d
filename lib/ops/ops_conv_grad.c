/* Kernels of the gradients of convolution and pooling (kernels/conv_grad.cl,
 * kernels/matmul_core.cl): conv2d's with respect to its weights, on devices without real local
 * memory (CPUs) a product on the register-blocked core (dy packed into panels, the image read
 * through per-tap offsets as conv2d's core reads it), elsewhere and for groups narrower than a
 * panel one work-item per weight summing over the images and output positions eight columns at
 * a time; the pools' with respect to their input, one work-item per row of dx
 * adding in the windows that hold the row (maxpool2d_grad first writes each window's routing, the
 * position of its maximum, into the node's scratch). No atomics: each output is one sum in a
 * fixed order. The geometry is the forward ops' (lib/graph/infer_conv.c). */
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>

#include "device/cl.h"
#include "ops/matmul_core.h"

/* Creates kernel `kernel` into ks with its table, set as the argument after the buffers
 * (`inputs` of them, then the output). */
static clrun_status kernel_with_table(clrun_context *ctx, clrun__kernel_state *ks, const char *what,
                                      const char *kernel, cl_uint inputs, const void *table,
                                      size_t table_bytes)
{
    ks->inputs = inputs;
    ks->what = what;
    clrun_status s = clrun__kernel(ctx, kernel, &ks->kernel);
    if (s == CLRUN_OK)
        s = clrun__table_buffer(ctx, table, table_bytes, &ks->table);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, ks->kernel, inputs + 1, sizeof ks->table, &ks->table);
    return s;
}

/* ---- conv2d_grad_weight ------------------------------------------------------------------ */

/* Work-groups of up to 32 weights: a group runs on one thread of a CPU, and a small gradient
 * (a depthwise 3x3 has 9 weights per channel) still spreads over the cores. */
#define GRAD_WEIGHT_GROUP 32
/* The core runs groups of at least this many output channels; narrower ones (depthwise) would
 * leave most of each panel's columns empty and take the per-weight kernel. */
#define CORE_MIN_CHANNELS 8
#define CORE_MIN_ITEMS 8

/* Whether the core takes this gradient: groups of CORE_MIN_CHANNELS output channels or more,
 * and at least CORE_MIN_ITEMS work-items (tap blocks of 8 by panels of 16 by groups), so that a
 * gradient with few weights and a long sum (a narrow 1x1 convolution over large images) spreads
 * over the cores as the per-weight kernel spreads it. */
static bool core_pays(const cl_int *geo)
{
    int64_t groups = geo[CLRUN__G_GROUPS], Og = geo[CLRUN__G_O] / groups;
    int64_t Kc = (int64_t)geo[CLRUN__G_C] / groups * geo[CLRUN__G_KH] * geo[CLRUN__G_KW];
    return Og >= CORE_MIN_CHANNELS && (Kc + 7) / 8 * ((Og + 15) / 16) * groups >= CORE_MIN_ITEMS;
}

/* On the core (devices without real local memory): dy packed into panels (clrun_mm_pack) and,
 * for a padded convolution, x copied with its padding as zeros, both into scratch, then the
 * product. Elsewhere, and for narrow groups, the kernel of one work-item per weight. */
typedef struct grad_weight_state {
    clrun__kernel_state ks;  /* first: the product (x or its padded copy, packed dy, dw) */
    clrun__packing pack;     /* dy into panels: scratch part 1 (part 0 without padding) */
    clrun__conv_padding pad; /* x with its padding: scratch part 0 */
    bool core;
    clrun__epilogue_slots extra; /* the epilogue's arguments: inputs after the node's own */
    cl_uint extra_index;     /* the kernel's first epilogue argument */
} grad_weight_state;

static void grad_weight_release(void *opaque)
{
    grad_weight_state *st = opaque;
    if (st == NULL)
        return;
    clrun__packing_release(&st->pack);
    clrun__conv_padding_release(&st->pad);
    clrun__kernel_state_release(st);
}

static int grad_weight_scratch(const void *opaque, uint64_t bytes[CLRUN__SCRATCH_MAX])
{
    const grad_weight_state *st = opaque;
    int parts = 0;
    if (!st->core)
        return 0;
    if (st->pad.kernel)
        bytes[parts++] = st->pad.bytes;
    bytes[parts++] = st->pack.bytes;
    return parts;
}

static clrun_status grad_weight_enqueue(clrun_context *ctx, void *opaque, const clrun__op_call *call,
                                        const cl_mem *inputs, const cl_mem *outputs, cl_uint wait_count,
                                        const cl_event *wait_list, cl_event *done)
{
    grad_weight_state *st = opaque;
    clrun_status s = clrun__epilogue_args(ctx, st->ks.kernel, st->extra_index, &st->extra,
                                          inputs + call->input_count);
    if (s != CLRUN_OK)
        return s;
    if (!st->core)
        return clrun__kernel_state_enqueue(ctx, &st->ks, inputs, outputs[0], wait_count, wait_list,
                                           done);
    const cl_mem *scratch = outputs + call->output_count;
    bool padded = st->pad.kernel != NULL;
    const cl_mem buffers[2] = {padded ? scratch[0] : inputs[0], scratch[padded ? 1 : 0]};
    s = clrun__buffer_args(ctx, st->ks.kernel, buffers, 2, outputs[0]);
    if (s == CLRUN_OK && padded)
        s = clrun__buffer_args(ctx, st->pad.kernel, &inputs[0], 1, buffers[0]);
    if (s != CLRUN_OK)
        return s;
    clrun__chain chain;
    clrun__chain_begin(&chain, ctx, wait_count, wait_list, done);
    if (padded)
        s = clrun__chain_launch(&chain, st->pad.kernel, 3, st->pad.global, st->pad.local,
                                "conv2d_grad_weight padding");
    if (s == CLRUN_OK)
        s = clrun__packing_enqueue(ctx, &st->pack, inputs[1], buffers[1], &chain);
    if (s == CLRUN_OK)
        s = clrun__chain_launch(&chain, st->ks.kernel, 3, st->ks.global, st->ks.local, st->ks.what);
    if (s != CLRUN_OK) {
        clrun__chain_abort(&chain);
        return s;
    }
    return clrun__chain_end(&chain);
}

/* The product on the core: dy [N, O, P] as B (per image and group, K = P rows by Og columns),
 * the variant the default for the taps' count (no tuning: the kernel's cost follows the
 * forward's, whose tuning it does not share). */
static clrun_status grad_weight_core(clrun_context *ctx, const cl_int *geo, const clrun__conv_geometry *g,
                                     uint64_t images, unsigned vw, const clrun__epilogue *ep,
                                     grad_weight_state *st)
{
    cl_uint hp, wp;
    bool padded = clrun__conv_padded_extent(geo, g, &hp, &wp);
    unsigned nr = 2 * vw;
    uint64_t groups = (uint64_t)geo[CLRUN__G_GROUPS], Og = (uint64_t)geo[CLRUN__G_O] / groups;
    uint64_t P = (uint64_t)geo[CLRUN__G_OH] * (uint64_t)geo[CLRUN__G_OW];
    uint64_t Kc = (uint64_t)geo[CLRUN__G_C] / groups * (uint64_t)(geo[CLRUN__G_KH] * geo[CLRUN__G_KW]);
    uint64_t batches = images * groups; /* images <= CL_INT_MAX: the caller checks */
    uint64_t *sources = malloc(batches * sizeof *sources);
    if (sources == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "conv2d_grad_weight: %" PRIu64
                           " images of %" PRIu64 " groups", images, groups);
    for (uint64_t z = 0; z < batches; z++)
        sources[z] = (z / groups * (uint64_t)geo[CLRUN__G_O] + z % groups * Og) * P;
    cl_program program = NULL; /* the core's head: packing and padding */
    clrun_status s = clrun__ops_program(ctx, "matmul_core", vw, NULL, &program);
    /* B[p, o] = dy[n, o, p] */
    if (s == CLRUN_OK)
        s = clrun__packing_prepare(ctx, program, batches, sources, P, Og, 1, P, nr, false, &st->pack);
    free(sources);
    if (s == CLRUN_OK && padded)
        s = clrun__conv_padding_prepare(ctx, program, st->ks.table, geo, images, hp, wp, &st->pad);
    size_t count;
    const clrun__core_variant *v = clrun__core_candidates(Kc, true, &count);
    const clrun__core_source src = {CLRUN__CORE_WGRAD, vw, ep, 0};
    cl_uint n = (cl_uint)images, steps = clrun__core_steps(v, clrun__core_group(ctx));
    if (s == CLRUN_OK)
        s = clrun__core_kernel(ctx, &src, v->mr, &st->ks.kernel);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->ks.kernel, 3, sizeof st->ks.table, &st->ks.table);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->ks.kernel, 4, sizeof hp, &hp);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->ks.kernel, 5, sizeof wp, &wp);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->ks.kernel, 6, sizeof n, &n);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->ks.kernel, 7, sizeof steps, &steps);
    clrun__core_row_launch(v, clrun__core_group(ctx), (size_t)((Kc + v->mr - 1) / v->mr), &st->ks.global[0],
                           &st->ks.local[0]);
    st->ks.global[1] = (size_t)((Og + nr - 1) / nr);
    st->ks.global[2] = (size_t)groups;
    st->ks.local[1] = st->ks.local[2] = 1;
    st->ks.dims = 3;
    st->core = true;
    st->extra_index = 8; /* after xp, dyp, dw, g, HP, WP, images, steps */
    return s;
}

/* conv2d_grad_weight, with the epilogue ep (NULL: none) applied to each weight's gradient before
 * its one store: every kernel stores each element once, from the work-item that summed it, and
 * reads the epilogue's inputs at that element only (clrun__op_epilogue_in_place). */
static clrun_status conv_grad_weight_prepare_epilogue(clrun_context *ctx, const clrun__op *op,
                                                      const clrun__op_call *call,
                                                      const clrun__epilogue *ep, void **state)
{
    (void)op;
    *state = NULL;
    clrun__conv_geometry g;
    clrun_tensor_type dw;
    const clrun__infer_error quiet = {"conv2d_grad_weight", NULL, 0};
    if (clrun__conv_grad_weight_geometry_of(call, &g, &dw, &quiet) != CLRUN_OK)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_GRAPH,
                           "conv2d_grad_weight: prepare on types infer refuses");
    const clrun_tensor_type *x = &call->inputs[0];
    const cl_int geo[CLRUN__G_COUNT] = {
        [CLRUN__G_C] = (cl_int)x->shape[1], [CLRUN__G_H] = (cl_int)x->shape[2],
        [CLRUN__G_W] = (cl_int)x->shape[3], [CLRUN__G_O] = (cl_int)dw.shape[0],
        [CLRUN__G_KH] = (cl_int)dw.shape[2], [CLRUN__G_KW] = (cl_int)dw.shape[3],
        [CLRUN__G_OH] = (cl_int)g.oh, [CLRUN__G_OW] = (cl_int)g.ow,
        [CLRUN__G_SH] = (cl_int)g.stride[0], [CLRUN__G_SW] = (cl_int)g.stride[1],
        [CLRUN__G_PH] = (cl_int)g.pad[0], [CLRUN__G_PW] = (cl_int)g.pad[1],
        [CLRUN__G_DH] = (cl_int)g.dilation[0], [CLRUN__G_DW] = (cl_int)g.dilation[1],
        [CLRUN__G_GROUPS] = (cl_int)g.groups,
    };
    if (x->shape[0] > CL_INT_MAX)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT,
                           "conv2d_grad_weight: %lld images, more than the kernel counts",
                           (long long)x->shape[0]);
    cl_int images = (cl_int)x->shape[0];
    clrun__core_device dev;
    clrun_status s = clrun__core_device_of(ctx, &dev);
    if (s != CLRUN_OK)
        return s;
    grad_weight_state *st = calloc(1, sizeof *st);
    if (st == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "conv2d_grad_weight: node state");
    st->ks.what = "conv2d_grad_weight";
    st->extra = clrun__epilogue_slots_of(ep);
    if (dev.registers && core_pays(geo)) {
        s = clrun__table_buffer(ctx, geo, sizeof geo, &st->ks.table);
        if (s == CLRUN_OK)
            s = grad_weight_core(ctx, geo, &g, (uint64_t)images, dev.vw, ep, st);
    } else if (ep) { /* the program built with the epilogue before it */
        cl_program program = NULL;
        st->ks.inputs = 2;
        st->extra_index = 5; /* after x, dy, dw, g, N */
        s = clrun__ops_program(ctx, "conv_grad", dev.vw, ep, &program);
        if (s == CLRUN_OK)
            s = clrun__program_kernel(ctx, program, "clrun_conv2d_grad_weight", 0, &st->ks.kernel);
        if (s == CLRUN_OK)
            s = clrun__table_buffer(ctx, geo, sizeof geo, &st->ks.table);
        if (s == CLRUN_OK)
            s = clrun__arg(ctx, st->ks.kernel, 3, sizeof st->ks.table, &st->ks.table);
        if (s == CLRUN_OK)
            s = clrun__arg(ctx, st->ks.kernel, 4, sizeof images, &images);
        if (s == CLRUN_OK)
            s = clrun__local_size(ctx, st->ks.kernel, GRAD_WEIGHT_GROUP, &st->ks.local[0]);
        st->ks.dims = 1;
        st->ks.global[0] = clrun__round_up((size_t)clrun__dims_product(&dw, 0, 4), st->ks.local[0]);
    } else {
        s = kernel_with_table(ctx, &st->ks, "conv2d_grad_weight", "clrun_conv2d_grad_weight", 2,
                              geo, sizeof geo);
        if (s == CLRUN_OK)
            s = clrun__arg(ctx, st->ks.kernel, 4, sizeof images, &images);
        if (s == CLRUN_OK)
            s = clrun__local_size(ctx, st->ks.kernel, GRAD_WEIGHT_GROUP, &st->ks.local[0]);
        st->ks.dims = 1;
        st->ks.global[0] = clrun__round_up((size_t)clrun__dims_product(&dw, 0, 4), st->ks.local[0]);
    }
    if (s != CLRUN_OK) {
        grad_weight_release(st);
        return s;
    }
    *state = st;
    return CLRUN_OK;
}

static clrun_status conv_grad_weight_prepare(clrun_context *ctx, const clrun__op *op,
                                             const clrun__op_call *call, void **state)
{
    return conv_grad_weight_prepare_epilogue(ctx, op, call, NULL, state);
}

/* ---- maxpool2d_grad (code 1), avgpool2d_grad (code 0) ------------------------------------ */

/* maxpool2d_grad launches twice: each window's routing (the position of its maximum) into the
 * node's scratch, then the gather over it; avgpool2d_grad once, the gather alone. */
typedef struct pool_grad_state {
    clrun__kernel_state ks; /* first: the gather, (max: the routing and) dy in, dx out */
    cl_kernel argmax;       /* maxpool2d_grad: x in, the routing out */
    size_t argmax_global[2], argmax_local[2];
    uint64_t routing_bytes; /* one int per window */
} pool_grad_state;

static void pool_grad_release(void *opaque)
{
    pool_grad_state *st = opaque;
    if (st && st->argmax)
        clrun__cl.ReleaseKernel(st->argmax);
    clrun__kernel_state_release(st);
}

static int pool_grad_scratch(const void *opaque, uint64_t bytes[CLRUN__SCRATCH_MAX])
{
    const pool_grad_state *st = opaque;
    if (st->argmax == NULL)
        return 0;
    bytes[0] = st->routing_bytes;
    return 1;
}

static clrun_status pool_grad_enqueue(clrun_context *ctx, void *opaque, const clrun__op_call *call,
                                      const cl_mem *inputs, const cl_mem *outputs, cl_uint wait_count,
                                      const cl_event *wait_list, cl_event *done)
{
    pool_grad_state *st = opaque;
    if (st->argmax == NULL)
        return clrun__kernel_state_enqueue(ctx, &st->ks, inputs, outputs[0], wait_count, wait_list,
                                           done);
    const cl_mem routing = outputs[call->output_count];
    const cl_mem gather[2] = {routing, inputs[1]};
    clrun_status s = clrun__buffer_args(ctx, st->argmax, &inputs[0], 1, routing);
    if (s == CLRUN_OK)
        s = clrun__buffer_args(ctx, st->ks.kernel, gather, 2, outputs[0]);
    if (s != CLRUN_OK)
        return s;
    clrun__chain chain;
    clrun__chain_begin(&chain, ctx, wait_count, wait_list, done);
    s = clrun__chain_launch(&chain, st->argmax, 2, st->argmax_global, st->argmax_local,
                            "maxpool2d_grad routing");
    if (s == CLRUN_OK)
        s = clrun__chain_launch(&chain, st->ks.kernel, 2, st->ks.global, st->ks.local, st->ks.what);
    if (s != CLRUN_OK) {
        clrun__chain_abort(&chain);
        return s;
    }
    return clrun__chain_end(&chain);
}

static clrun_status pool_grad_prepare(clrun_context *ctx, const clrun__op *op,
                                      const clrun__op_call *call, void **state)
{
    bool is_max = op->code == 1;
    *state = NULL;
    clrun__pooling_geometry g;
    clrun_tensor_type x;
    const clrun__infer_error quiet = {op->name, NULL, 0};
    if (clrun__pooling_grad_geometry_of(call, &g, &x, &quiet) != CLRUN_OK)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_GRAPH, "%s: prepare on types infer refuses",
                           op->name);
    const cl_int geo[CLRUN__P_COUNT] = {
        [CLRUN__P_H] = (cl_int)x.shape[2], [CLRUN__P_W] = (cl_int)x.shape[3],
        [CLRUN__P_OH] = (cl_int)g.oh, [CLRUN__P_OW] = (cl_int)g.ow,
        [CLRUN__P_KH] = (cl_int)g.kernel[0], [CLRUN__P_KW] = (cl_int)g.kernel[1],
        [CLRUN__P_SH] = (cl_int)g.stride[0], [CLRUN__P_SW] = (cl_int)g.stride[1],
        [CLRUN__P_PH] = (cl_int)g.pad[0], [CLRUN__P_PW] = (cl_int)g.pad[1],
        [CLRUN__P_PHE] = (cl_int)g.pad_end[0], [CLRUN__P_PWE] = (cl_int)g.pad_end[1],
        [CLRUN__P_DH] = (cl_int)g.dilation[0], [CLRUN__P_DW] = (cl_int)g.dilation[1],
        [CLRUN__P_INCLUDE_PAD] = g.count_include_pad,
    };
    pool_grad_state *st = calloc(1, sizeof *st);
    if (st == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "%s: node state", op->name);
    clrun_status s = kernel_with_table(ctx, &st->ks, op->name,
                                       is_max ? "clrun_maxpool2d_grad" : "clrun_avgpool2d_grad",
                                       is_max ? 2 : 1, geo, sizeof geo);
    /* the gather: a work-item per row of dx, work-groups of one plane's rows (up to 16) */
    if (s == CLRUN_OK)
        s = clrun__local_size(ctx, st->ks.kernel, x.shape[2] < 16 ? (size_t)x.shape[2] : 16,
                              &st->ks.local[0]);
    size_t planes = (size_t)clrun__dims_product(&x, 0, 2);
    st->ks.dims = 2;
    st->ks.local[1] = 1;
    st->ks.global[0] = clrun__round_up((size_t)x.shape[2], st->ks.local[0]);
    st->ks.global[1] = planes;
    if (s == CLRUN_OK && is_max) {
        size_t windows = (size_t)(g.oh * g.ow);
        st->routing_bytes = (uint64_t)planes * windows * sizeof(cl_int);
        s = clrun__kernel(ctx, "clrun_maxpool2d_argmax", &st->argmax);
        if (s == CLRUN_OK)
            s = clrun__arg(ctx, st->argmax, 2, sizeof st->ks.table, &st->ks.table);
        if (s == CLRUN_OK)
            s = clrun__local_size(ctx, st->argmax, 128, &st->argmax_local[0]);
        st->argmax_local[1] = 1;
        st->argmax_global[0] = clrun__round_up(windows, st->argmax_local[0]);
        st->argmax_global[1] = planes;
    }
    if (s != CLRUN_OK) {
        pool_grad_release(st);
        return s;
    }
    *state = st;
    return CLRUN_OK;
}

/* ---- the table --------------------------------------------------------------------------- */

static const clrun__op_kernels conv_grad_weight_kernels = {
    .prepare = conv_grad_weight_prepare,
    .enqueue = grad_weight_enqueue,
    .release = grad_weight_release,
    .scratch = grad_weight_scratch,
};
static const clrun__op_kernels pool_grad_kernels = {
    .prepare = pool_grad_prepare,
    .enqueue = pool_grad_enqueue,
    .release = pool_grad_release,
    .scratch = pool_grad_scratch,
};

const clrun__named_epilogue clrun__epilogue_conv_grad[] = {
    {"conv2d_grad_weight", conv_grad_weight_prepare_epilogue, true},
    {NULL, NULL, false},
};

const clrun__named_kernels clrun__kernels_conv_grad[] = {
    {"conv2d_grad_weight", &conv_grad_weight_kernels},
    {"maxpool2d_grad", &pool_grad_kernels},
    {"avgpool2d_grad", &pool_grad_kernels},
    {NULL, NULL},
};
