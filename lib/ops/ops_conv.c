/* Kernels of convolution and pooling over NCHW images (kernels/conv.cl, and clrun_conv2d_gemm in
 * kernels/matmul.cl). A convolution with at least GEMM_MIN_ROWS output channels per group runs
 * as a tiled product over (image, group) of the weights [O/groups, C/groups*KH*KW] and the
 * image patches, gathered on the fly (implicit GEMM, no scratch buffer). Narrower ones
 * (depthwise above all) take the direct kernel, where a 64-row tile would sit mostly idle. */
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "device/cl.h"
#include "ops/ops_internal.h"

#define GEMM_MIN_ROWS 16

typedef struct conv_state {
    clrun__kernel_state ks; /* table: the kernel's int geometry (CLRUN__G_*, CLRUN__P_*) */
    bool has_bias;
    bool conv;              /* conv2d: x, w[, bias] -> out; pool: x -> out */
} conv_state;

static clrun_status conv_enqueue(clrun_context *ctx, void *opaque, const clrun__op_call *call,
                                 const cl_mem *inputs, const cl_mem *outputs, cl_uint wait_count,
                                 const cl_event *wait_list, cl_event *done)
{
    (void)call;
    const conv_state *st = opaque;
    /* Without a bias the kernel never reads it; x stands in. */
    const cl_mem conv_inputs[3] = {inputs[0], inputs[1], st->has_bias ? inputs[2] : inputs[0]};
    return clrun__kernel_state_enqueue(ctx, &st->ks, st->conv ? conv_inputs : inputs, outputs[0],
                                       wait_count, wait_list, done);
}

/* ---- conv2d ------------------------------------------------------------------------------ */

/* Picks the tiled product or the direct kernel and its work sizes. */
static clrun_status conv_kernel(clrun_context *ctx, const cl_int *geo, uint64_t images,
                                conv_state *st)
{
    size_t P = (size_t)geo[CLRUN__G_OH] * (size_t)geo[CLRUN__G_OW];
    int Og = geo[CLRUN__G_O] / geo[CLRUN__G_GROUPS];
    size_t limit = 0;
    clrun_status s = CLRUN_OK;
    bool gemm = clrun__ops_kernels == CLRUN__KERNELS_AUTO ? Og >= GEMM_MIN_ROWS
                                                          : clrun__ops_kernels != CLRUN__KERNELS_SIMPLE;
    if (gemm) {
        s = clrun__kernel(ctx, "clrun_conv2d_gemm", &st->ks.kernel);
        if (s == CLRUN_OK)
            s = clrun__local_size(ctx, st->ks.kernel, 256, &limit);
        if (s != CLRUN_OK)
            return s;
        if (limit >= 256) {
            st->ks.local[0] = st->ks.local[1] = 16, st->ks.local[2] = 1;
            st->ks.global[0] = (P + 63) / 64 * 16;
            st->ks.global[1] = ((size_t)Og + 63) / 64 * 16;
            st->ks.global[2] = (size_t)images * (size_t)geo[CLRUN__G_GROUPS];
            return CLRUN_OK;
        }
        clrun__cl.ReleaseKernel(st->ks.kernel);
        st->ks.kernel = NULL;
    }
    s = clrun__kernel(ctx, "clrun_conv2d_direct", &st->ks.kernel);
    if (s == CLRUN_OK)
        s = clrun__local_size(ctx, st->ks.kernel, 128, &st->ks.local[0]);
    st->ks.local[1] = st->ks.local[2] = 1;
    st->ks.global[0] = clrun__round_up(P, st->ks.local[0] ? st->ks.local[0] : 1);
    st->ks.global[1] = (size_t)geo[CLRUN__G_O];
    st->ks.global[2] = (size_t)images;
    return s;
}

static clrun_status conv_prepare(clrun_context *ctx, const clrun__op *op, const clrun__op_call *call,
                                void **state)
{
    (void)op;
    *state = NULL;
    clrun__conv_geometry g;
    const clrun__infer_error quiet = {"conv2d", NULL, 0};
    if (clrun__conv_geometry_of(call, &g, &quiet) != CLRUN_OK)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_GRAPH, "conv2d: prepare on types infer refuses");
    const clrun_tensor_type *x = &call->inputs[0], *w = &call->inputs[1];
    const cl_int geo[CLRUN__G_COUNT] = {
        [CLRUN__G_C] = (cl_int)x->shape[1], [CLRUN__G_H] = (cl_int)x->shape[2],
        [CLRUN__G_W] = (cl_int)x->shape[3], [CLRUN__G_O] = (cl_int)w->shape[0],
        [CLRUN__G_KH] = (cl_int)w->shape[2], [CLRUN__G_KW] = (cl_int)w->shape[3],
        [CLRUN__G_OH] = (cl_int)g.oh, [CLRUN__G_OW] = (cl_int)g.ow,
        [CLRUN__G_SH] = (cl_int)g.stride[0], [CLRUN__G_SW] = (cl_int)g.stride[1],
        [CLRUN__G_PH] = (cl_int)g.pad[0], [CLRUN__G_PW] = (cl_int)g.pad[1],
        [CLRUN__G_DH] = (cl_int)g.dilation[0], [CLRUN__G_DW] = (cl_int)g.dilation[1],
        [CLRUN__G_GROUPS] = (cl_int)g.groups,
    };
    conv_state *st = calloc(1, sizeof *st);
    if (st == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "conv2d: node state");
    st->conv = true;
    st->ks.inputs = 3;
    st->ks.dims = 3;
    st->ks.what = "conv2d";
    st->has_bias = call->input_count == 3;
    cl_int has_bias = st->has_bias;
    clrun_status s = conv_kernel(ctx, geo, (uint64_t)x->shape[0], st);
    if (s == CLRUN_OK)
        s = clrun__table_buffer(ctx, geo, sizeof geo, &st->ks.table);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->ks.kernel, 4, sizeof st->ks.table, &st->ks.table);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->ks.kernel, 5, sizeof has_bias, &has_bias);
    return clrun__kernel_state_done(st, s, state);
}

/* ---- pooling ----------------------------------------------------------------------------- */

/* maxpool2d (code 1) and avgpool2d (code 0). */
static clrun_status pool_prepare(clrun_context *ctx, const clrun__op *op, const clrun__op_call *call,
                                 void **state)
{
    bool is_max = op->code == 1;
    *state = NULL;
    clrun__pool_geometry g;
    const clrun__infer_error quiet = {"pool", NULL, 0};
    if (clrun__pool_geometry_of(call, &g, &quiet) != CLRUN_OK)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_GRAPH, "pool: prepare on types infer refuses");
    const clrun_tensor_type *x = &call->inputs[0];
    const cl_int geo[CLRUN__P_COUNT] = {
        [CLRUN__P_H] = (cl_int)x->shape[2], [CLRUN__P_W] = (cl_int)x->shape[3],
        [CLRUN__P_OH] = (cl_int)g.oh, [CLRUN__P_OW] = (cl_int)g.ow,
        [CLRUN__P_KH] = (cl_int)g.kernel[0], [CLRUN__P_KW] = (cl_int)g.kernel[1],
        [CLRUN__P_SH] = (cl_int)g.stride[0], [CLRUN__P_SW] = (cl_int)g.stride[1],
        [CLRUN__P_PH] = (cl_int)g.pad[0], [CLRUN__P_PW] = (cl_int)g.pad[1],
    };
    conv_state *st = calloc(1, sizeof *st);
    if (st == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "pool: node state");
    st->ks.inputs = 1;
    st->ks.dims = 3;
    st->ks.what = "pool";
    cl_int max_flag = is_max;
    clrun_status s = clrun__kernel(ctx, "clrun_pool2d_f32", &st->ks.kernel);
    if (s == CLRUN_OK)
        s = clrun__local_size(ctx, st->ks.kernel, 128, &st->ks.local[0]);
    if (s == CLRUN_OK)
        s = clrun__table_buffer(ctx, geo, sizeof geo, &st->ks.table);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->ks.kernel, 2, sizeof st->ks.table, &st->ks.table);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->ks.kernel, 3, sizeof max_flag, &max_flag);
    if (s == CLRUN_OK) {
        st->ks.local[1] = st->ks.local[2] = 1;
        st->ks.global[0] = clrun__round_up((size_t)(g.oh * g.ow), st->ks.local[0]);
        st->ks.global[1] = (size_t)clrun__dims_product(x, 0, 2);
        st->ks.global[2] = 1;
    }
    return clrun__kernel_state_done(st, s, state);
}

/* ---- global_avgpool: a mean over H and W ------------------------------------------------- */

static clrun_status global_avgpool_prepare(clrun_context *ctx, const clrun__op *op,
                                           const clrun__op_call *call, void **state)
{
    (void)op;
    static const bool over_h_and_w[4] = {false, false, true, true};
    return clrun__reduce_prepare(ctx, &call->inputs[0], over_h_and_w, 1, state);
}

/* ---- the table --------------------------------------------------------------------------- */

static const clrun__op_kernels conv_kernels = {conv_prepare, conv_enqueue,
                                               clrun__kernel_state_release};
static const clrun__op_kernels pool_kernels = {pool_prepare, conv_enqueue,
                                               clrun__kernel_state_release};
static const clrun__op_kernels global_avgpool_kernels = {
    global_avgpool_prepare, clrun__reduce_enqueue, clrun__reduce_release};

const clrun__named_kernels clrun__kernels_conv[] = {
    {"conv2d", &conv_kernels},
    {"maxpool2d", &pool_kernels},
    {"avgpool2d", &pool_kernels},
    {"global_avgpool", &global_avgpool_kernels},
    {NULL, NULL},
};
