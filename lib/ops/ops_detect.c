/* Kernels of the detection ops (kernels/detect.cl). non_max_suppression launches twice: one
 * work-item per (batch, class) selects its boxes into the node's scratch (the kept indices,
 * per_class per pair, and their counts), then one per output row gathers the rows in order and
 * pads with -1. maxpool2d_indices is one launch, a work-item per window. */
#include <stdlib.h>

#include "device/cl.h"
#include "ops/ops_data.h"
#include "ops/ops_internal.h"

/* ---- non_max_suppression ----------------------------------------------------------------- */

typedef struct nms_state {
    clrun__kernel_state ks; /* first: the rows, scratch in, the output out */
    cl_kernel select;       /* boxes, scores in; the scratch out */
    size_t select_global, select_local;
    uint64_t sel_bytes, count_bytes;
} nms_state;

static void nms_release(void *opaque)
{
    nms_state *st = opaque;
    if (st && st->select)
        clrun__cl.ReleaseKernel(st->select);
    clrun__kernel_state_release(st);
}

static int nms_scratch(const void *opaque, uint64_t bytes[CLRUN__SCRATCH_MAX])
{
    const nms_state *st = opaque;
    bytes[0] = st->sel_bytes;
    bytes[1] = st->count_bytes;
    return 2;
}

static clrun_status nms_enqueue(clrun_context *ctx, void *opaque, const clrun__op_call *call,
                                const cl_mem *inputs, const cl_mem *outputs, cl_uint wait_count,
                                const cl_event *wait_list, cl_event *done)
{
    nms_state *st = opaque;
    const cl_mem *scratch = outputs + call->output_count;
    clrun_status s = clrun__buffer_args(ctx, st->select, inputs, 2, scratch[0]);
    if (s == CLRUN_OK)
        s = clrun__buffer_arg(ctx, st->select, 3, scratch[1]);
    if (s == CLRUN_OK)
        s = clrun__buffer_args(ctx, st->ks.kernel, scratch, 2, outputs[0]);
    if (s != CLRUN_OK)
        return s;
    clrun__chain chain;
    clrun__chain_begin(&chain, ctx, wait_count, wait_list, done);
    s = clrun__chain_launch(&chain, st->select, 1, &st->select_global, &st->select_local,
                            "non_max_suppression select");
    if (s == CLRUN_OK)
        s = clrun__chain_launch(&chain, st->ks.kernel, 1, st->ks.global, st->ks.local, st->ks.what);
    if (s != CLRUN_OK) {
        clrun__chain_abort(&chain);
        return s;
    }
    return clrun__chain_end(&chain);
}

static clrun_status nms_prepare(clrun_context *ctx, const clrun__op *op, const clrun__op_call *call,
                                void **state)
{
    *state = NULL;
    clrun__nms_geometry g;
    const clrun__infer_error quiet = {op->name, NULL, 0};
    if (clrun__nms_geometry_of(call, &g, &quiet) != CLRUN_OK)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_GRAPH, "%s: prepare on types infer refuses",
                           op->name);
    nms_state *st = calloc(1, sizeof *st);
    if (st == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "%s: node state", op->name);
    st->ks.what = "non_max_suppression rows";
    st->ks.inputs = 2;
    st->sel_bytes = (uint64_t)g.capacity * sizeof(cl_int);
    st->count_bytes = (uint64_t)(g.batches * g.classes) * sizeof(cl_int);
    const cl_int B = (cl_int)g.batches, C = (cl_int)g.classes, N = (cl_int)g.boxes;
    const cl_int BC = B * C, per_class = (cl_int)g.per_class, capacity = (cl_int)g.capacity;
    const cl_float iou = g.iou_threshold, score = (cl_float)g.score_threshold;
    const cl_int has_score = g.has_score_threshold, center = g.center_point_box;
    clrun_status s = clrun__kernel(ctx, "clrun_nms_select", &st->select);
    const struct {
        size_t size;
        const void *value;
    } select_args[] = {{sizeof B, &B},         {sizeof C, &C},
                       {sizeof N, &N},         {sizeof per_class, &per_class},
                       {sizeof iou, &iou},     {sizeof has_score, &has_score},
                       {sizeof score, &score}, {sizeof center, &center}};
    for (cl_uint a = 0; s == CLRUN_OK && a < sizeof select_args / sizeof select_args[0]; a++)
        s = clrun__arg(ctx, st->select, 4 + a, select_args[a].size, select_args[a].value);
    if (s == CLRUN_OK)
        s = clrun__local_size(ctx, st->select, 64, &st->select_local);
    st->select_global = clrun__round_up((size_t)BC, st->select_local);
    if (s == CLRUN_OK)
        s = clrun__kernel(ctx, "clrun_nms_rows", &st->ks.kernel);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->ks.kernel, 3, sizeof BC, &BC);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->ks.kernel, 4, sizeof C, &C);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->ks.kernel, 5, sizeof per_class, &per_class);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->ks.kernel, 6, sizeof capacity, &capacity);
    if (s == CLRUN_OK)
        s = clrun__flat_launch(ctx, &st->ks, (uint64_t)capacity);
    if (s != CLRUN_OK) {
        nms_release(st);
        return s;
    }
    *state = st;
    return CLRUN_OK;
}

/* ---- maxpool2d_indices ------------------------------------------------------------------- */

static clrun_status indices_prepare(clrun_context *ctx, const clrun__op *op,
                                    const clrun__op_call *call, void **state)
{
    *state = NULL;
    clrun__pooling_geometry g;
    const clrun__infer_error quiet = {op->name, NULL, 0};
    if (clrun__pooling_geometry_of(call, &g, &quiet) != CLRUN_OK)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_GRAPH, "%s: prepare on types infer refuses",
                           op->name);
    const clrun_tensor_type *x = &call->inputs[0];
    const cl_int geo[CLRUN__P_COUNT] = {
        [CLRUN__P_H] = (cl_int)x->shape[2], [CLRUN__P_W] = (cl_int)x->shape[3],
        [CLRUN__P_OH] = (cl_int)g.oh, [CLRUN__P_OW] = (cl_int)g.ow,
        [CLRUN__P_KH] = (cl_int)g.kernel[0], [CLRUN__P_KW] = (cl_int)g.kernel[1],
        [CLRUN__P_SH] = (cl_int)g.stride[0], [CLRUN__P_SW] = (cl_int)g.stride[1],
        [CLRUN__P_PH] = (cl_int)g.pad[0], [CLRUN__P_PW] = (cl_int)g.pad[1],
        [CLRUN__P_PHE] = (cl_int)g.pad_end[0], [CLRUN__P_PWE] = (cl_int)g.pad_end[1],
        [CLRUN__P_DH] = (cl_int)g.dilation[0], [CLRUN__P_DW] = (cl_int)g.dilation[1],
        [CLRUN__P_INCLUDE_PAD] = 0,
    };
    clrun__kernel_state *st = calloc(1, sizeof *st);
    if (st == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "%s: node state", op->name);
    st->inputs = 1;
    st->dims = 2;
    st->what = op->name;
    cl_int column_major = clrun__attr_int_or(call, "storage_order", 0) != 0;
    clrun_status s = clrun__kernel(ctx, "clrun_maxpool2d_indices", &st->kernel);
    if (s == CLRUN_OK)
        s = clrun__local_size(ctx, st->kernel, 128, &st->local[0]);
    if (s == CLRUN_OK)
        s = clrun__table_buffer(ctx, geo, sizeof geo, &st->table);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->kernel, 2, sizeof st->table, &st->table);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->kernel, 3, sizeof column_major, &column_major);
    if (s == CLRUN_OK) {
        st->local[1] = 1;
        st->global[0] = clrun__round_up((size_t)(g.oh * g.ow), st->local[0]);
        st->global[1] = (size_t)clrun__dims_product(x, 0, 2);
    }
    return clrun__kernel_state_done(st, s, state);
}

/* ---- the table --------------------------------------------------------------------------- */

static const clrun__op_kernels nms_kernels = {
    .prepare = nms_prepare,
    .enqueue = nms_enqueue,
    .release = nms_release,
    .scratch = nms_scratch,
};
static const clrun__op_kernels indices_kernels = {
    .prepare = indices_prepare,
    .enqueue = clrun__kernel_state_op_enqueue,
    .release = clrun__kernel_state_release,
};

const clrun__named_kernels clrun__kernels_detect[] = {
    {"non_max_suppression", &nms_kernels},
    {"maxpool2d_indices", &indices_kernels},
    {NULL, NULL},
};
