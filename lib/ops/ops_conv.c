/* Convolution and pooling over NCHW images (kernels/conv.cl, and clrun_conv2d_gemm in
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

/* A pair attribute ([h, w], or one integer for both) into out, or `fallback` when absent;
 * refuses other lengths and values below `min`. */
static clrun_status pair_attr(const clrun__op_call *call, const char *name, const int64_t *fallback,
                              int64_t min, int64_t *out, const clrun__infer_error *err)
{
    int64_t v[CLRUN_MAX_ATTR_INTS];
    int n = clrun__attr_list(call, name, v, CLRUN_MAX_ATTR_INTS);
    if (n == 0) {
        out[0] = fallback[0], out[1] = fallback[1];
    } else if (n == 1) {
        out[0] = out[1] = v[0];
    } else if (n == 2) {
        out[0] = v[0], out[1] = v[1];
    } else {
        return clrun__refuse(err, "attribute '%s' needs 2 values [h, w], got %d", name, n);
    }
    for (int i = 0; i < 2; i++)
        if (out[i] < min || out[i] > INT_MAX)
            return clrun__refuse(err, "attribute '%s' has %" PRId64 ": must be >= %" PRId64, name,
                                 out[i], min);
    return CLRUN_OK;
}

/* The output extent of a window sweep: (in + 2 pad - span) / stride + 1, or 0 if none fits. */
static int64_t out_extent(int64_t in, int64_t pad, int64_t span, int64_t stride)
{
    int64_t room = in + 2 * pad - span;
    return room < 0 ? 0 : room / stride + 1;
}

/* Refuses an image that is not 4-D, or too large for the kernels' int indexing. */
static clrun_status check_image(const clrun_tensor_type *x, const char *what,
                                const clrun__infer_error *err)
{
    char s[CLRUN__TYPE_STR];
    if (x->rank != 4)
        return clrun__refuse(err, "%s is %s: expected [N, C, H, W]", what, clrun__type_str(x, s));
    if (clrun__dims_product(x, 1, 4) > INT_MAX)
        return clrun__refuse(err, "%s is %s: one image exceeds 2^31 - 1 elements", what,
                             clrun__type_str(x, s));
    return CLRUN_OK;
}

/* ---- conv2d ------------------------------------------------------------------------------ */

static const clrun__attr_spec conv_attrs[] = {
    {"stride", CLRUN__WANT_INTS, false},
    {"pad", CLRUN__WANT_INTS, false},
    {"dilation", CLRUN__WANT_INTS, false},
    {"groups", CLRUN__WANT_INT, false},
};

typedef struct conv_geometry {
    int64_t stride[2], pad[2], dilation[2], groups;
    int64_t oh, ow;
} conv_geometry;

static clrun_status conv_attrs_of(const clrun__op_call *call, conv_geometry *g,
                                  const clrun__infer_error *err)
{
    static const int64_t ones[2] = {1, 1}, zeros[2] = {0, 0};
    clrun_status s = pair_attr(call, "stride", ones, 1, g->stride, err);
    if (s == CLRUN_OK)
        s = pair_attr(call, "pad", zeros, 0, g->pad, err);
    if (s == CLRUN_OK)
        s = pair_attr(call, "dilation", ones, 1, g->dilation, err);
    if (s != CLRUN_OK)
        return s;
    g->groups = clrun__attr_int_or(call, "groups", 1);
    if (g->groups < 1)
        return clrun__refuse(err, "attribute 'groups' is %" PRId64 ": must be >= 1", g->groups);
    return CLRUN_OK;
}

/* Checks the shapes against each other and the attributes; fills the output extent. */
static clrun_status conv_shapes(const clrun__op_call *call, conv_geometry *g,
                                const clrun__infer_error *err)
{
    const clrun_tensor_type *x = &call->inputs[0], *w = &call->inputs[1];
    char sx[CLRUN__TYPE_STR], sw[CLRUN__TYPE_STR];
    clrun_status s = check_image(x, "x", err);
    if (s != CLRUN_OK)
        return s;
    if (w->rank != 4)
        return clrun__refuse(err, "w is %s: expected [O, C/groups, KH, KW]", clrun__type_str(w, sw));
    int64_t C = x->shape[1], O = w->shape[0];
    if (C % g->groups || O % g->groups || w->shape[1] != C / g->groups)
        return clrun__refuse(err, "x is %s, w is %s, groups %" PRId64 ": C and O must divide by "
                             "groups and w's second dimension be C/groups", clrun__type_str(x, sx),
                             clrun__type_str(w, sw), g->groups);
    if (call->input_count == 3 && (call->inputs[2].rank != 1 || call->inputs[2].shape[0] != O))
        return clrun__refuse(err, "bias is %s: expected f32[%" PRId64 "] (O)",
                             clrun__type_str(&call->inputs[2], sx), O);
    g->oh = out_extent(x->shape[2], g->pad[0], g->dilation[0] * (w->shape[2] - 1) + 1, g->stride[0]);
    g->ow = out_extent(x->shape[3], g->pad[1], g->dilation[1] * (w->shape[3] - 1) + 1, g->stride[1]);
    if (g->oh < 1 || g->ow < 1)
        return clrun__refuse(err, "the kernel of w %s (dilated) does not fit x %s with padding "
                             "[%" PRId64 ", %" PRId64 "]", clrun__type_str(w, sw),
                             clrun__type_str(x, sx), g->pad[0], g->pad[1]);
    if (clrun__dims_product(w, 0, 4) > INT_MAX || (uint64_t)O * (uint64_t)(g->oh * g->ow) > INT_MAX)
        return clrun__refuse(err, "x %s, w %s: too large for one convolution",
                             clrun__type_str(x, sx), clrun__type_str(w, sw));
    return CLRUN_OK;
}

static clrun_status conv_infer(const clrun__op_call *call, clrun_tensor_type *out, char *errbuf,
                               size_t errlen)
{
    const clrun__infer_error err = {"conv2d", errbuf, errlen};
    clrun_status s = clrun__check_input_count(call, 2, 3, &err);
    if (s == CLRUN_OK)
        s = clrun__check_attrs(call, conv_attrs, 4, &err);
    for (int i = 0; s == CLRUN_OK && i < call->input_count; i++)
        s = clrun__check_dtype(call, i, false, &err);
    conv_geometry g;
    if (s == CLRUN_OK)
        s = conv_attrs_of(call, &g, &err);
    if (s == CLRUN_OK)
        s = conv_shapes(call, &g, &err);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *x = &call->inputs[0];
    out[0] = *x;
    out[0].shape[1] = call->inputs[1].shape[0];
    out[0].shape[2] = g.oh;
    out[0].shape[3] = g.ow;
    return CLRUN_OK;
}

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

static clrun_status conv_prepare(clrun_context *ctx, const clrun__op_call *call, void **state)
{
    *state = NULL;
    conv_geometry g;
    const clrun__infer_error quiet = {"conv2d", NULL, 0};
    if (conv_attrs_of(call, &g, &quiet) != CLRUN_OK || conv_shapes(call, &g, &quiet) != CLRUN_OK)
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

static const clrun__attr_spec pool_attrs[] = {
    {"kernel", CLRUN__WANT_INTS, true},
    {"stride", CLRUN__WANT_INTS, false},
    {"pad", CLRUN__WANT_INTS, false},
};

typedef struct pool_geometry {
    int64_t kernel[2], stride[2], pad[2], oh, ow;
} pool_geometry;

static clrun_status pool_geometry_of(const clrun__op_call *call, pool_geometry *g,
                                     const clrun__infer_error *err)
{
    static const int64_t zeros[2] = {0, 0};
    clrun_status s = pair_attr(call, "kernel", zeros, 1, g->kernel, err);
    if (s == CLRUN_OK)
        s = pair_attr(call, "stride", g->kernel, 1, g->stride, err);
    if (s == CLRUN_OK)
        s = pair_attr(call, "pad", zeros, 0, g->pad, err);
    if (s == CLRUN_OK)
        s = check_image(&call->inputs[0], "x", err);
    if (s != CLRUN_OK)
        return s;
    /* With pad <= kernel / 2 every window holds an element of the image, so max and average
     * are always defined. */
    for (int i = 0; i < 2; i++)
        if (2 * g->pad[i] > g->kernel[i])
            return clrun__refuse(err, "pad [%" PRId64 ", %" PRId64 "] exceeds half the kernel [%"
                                 PRId64 ", %" PRId64 "]", g->pad[0], g->pad[1], g->kernel[0],
                                 g->kernel[1]);
    const clrun_tensor_type *x = &call->inputs[0];
    g->oh = out_extent(x->shape[2], g->pad[0], g->kernel[0], g->stride[0]);
    g->ow = out_extent(x->shape[3], g->pad[1], g->kernel[1], g->stride[1]);
    if (g->oh < 1 || g->ow < 1) {
        char sx[CLRUN__TYPE_STR];
        return clrun__refuse(err, "kernel [%" PRId64 ", %" PRId64 "] does not fit x %s",
                             g->kernel[0], g->kernel[1], clrun__type_str(x, sx));
    }
    return CLRUN_OK;
}

static clrun_status pool_infer_as(const char *name, const clrun__op_call *call,
                                  clrun_tensor_type *out, char *errbuf, size_t errlen)
{
    const clrun__infer_error err = {name, errbuf, errlen};
    clrun_status s = clrun__check_input_count(call, 1, 1, &err);
    if (s == CLRUN_OK)
        s = clrun__check_attrs(call, pool_attrs, 3, &err);
    if (s == CLRUN_OK)
        s = clrun__check_dtype(call, 0, false, &err);
    pool_geometry g;
    if (s == CLRUN_OK)
        s = pool_geometry_of(call, &g, &err);
    if (s != CLRUN_OK)
        return s;
    out[0] = call->inputs[0];
    out[0].shape[2] = g.oh;
    out[0].shape[3] = g.ow;
    return CLRUN_OK;
}

static clrun_status pool_prepare_as(bool is_max, clrun_context *ctx, const clrun__op_call *call,
                                    void **state)
{
    *state = NULL;
    pool_geometry g;
    const clrun__infer_error quiet = {"pool", NULL, 0};
    if (pool_geometry_of(call, &g, &quiet) != CLRUN_OK)
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

static clrun_status maxpool_infer(const clrun__op_call *call, clrun_tensor_type *out, char *err,
                                  size_t errlen)
{
    return pool_infer_as("maxpool2d", call, out, err, errlen);
}

static clrun_status avgpool_infer(const clrun__op_call *call, clrun_tensor_type *out, char *err,
                                  size_t errlen)
{
    return pool_infer_as("avgpool2d", call, out, err, errlen);
}

static clrun_status maxpool_prepare(clrun_context *ctx, const clrun__op_call *call, void **state)
{
    return pool_prepare_as(true, ctx, call, state);
}

static clrun_status avgpool_prepare(clrun_context *ctx, const clrun__op_call *call, void **state)
{
    return pool_prepare_as(false, ctx, call, state);
}

/* ---- global_avgpool: a mean over H and W ------------------------------------------------- */

static clrun_status global_avgpool_infer(const clrun__op_call *call, clrun_tensor_type *out,
                                         char *errbuf, size_t errlen)
{
    const clrun__infer_error err = {"global_avgpool", errbuf, errlen};
    clrun_status s = clrun__check_input_count(call, 1, 1, &err);
    if (s == CLRUN_OK)
        s = clrun__check_attrs(call, NULL, 0, &err);
    if (s == CLRUN_OK)
        s = clrun__check_dtype(call, 0, false, &err);
    if (s == CLRUN_OK)
        s = check_image(&call->inputs[0], "x", &err);
    if (s != CLRUN_OK)
        return s;
    out[0] = call->inputs[0];
    out[0].rank = 2;
    return CLRUN_OK;
}

static clrun_status global_avgpool_prepare(clrun_context *ctx, const clrun__op_call *call,
                                           void **state)
{
    static const bool over_h_and_w[4] = {false, false, true, true};
    return clrun__reduce_prepare(ctx, &call->inputs[0], over_h_and_w, 1, state);
}

/* ---- the table --------------------------------------------------------------------------- */

static const clrun__op op_conv2d = {"conv2d", 2, 3, 1, false, conv_infer, conv_prepare,
                                    conv_enqueue, clrun__kernel_state_release};
static const clrun__op op_maxpool2d = {"maxpool2d", 1, 1, 1, false, maxpool_infer,
                                       maxpool_prepare, conv_enqueue, clrun__kernel_state_release};
static const clrun__op op_avgpool2d = {"avgpool2d", 1, 1, 1, false, avgpool_infer,
                                       avgpool_prepare, conv_enqueue, clrun__kernel_state_release};
static const clrun__op op_global_avgpool = {"global_avgpool", 1, 1, 1, false,
                                            global_avgpool_infer, global_avgpool_prepare,
                                            clrun__reduce_enqueue, clrun__reduce_release};

const clrun__op *const clrun__ops_conv[] = {
    &op_conv2d, &op_maxpool2d, &op_avgpool2d, &op_global_avgpool, NULL,
};
