/* Type rules of convolution and pooling over NCHW images. */
#include <inttypes.h>
#include <limits.h>

#include "graph/op.h"
#include "graph/op_families.h"
#include "graph/op_geometry.h"
#include "graph/types.h"

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
    char s[CLRUN__TYPE_TEXT];
    if (x->rank != 4)
        return clrun__refuse(err, "%s is %s: expected [N, C, H, W]", what, clrun__type_format(x, s, sizeof s));
    if (clrun__dims_product(x, 1, 4) > INT_MAX)
        return clrun__refuse(err, "%s is %s: one image exceeds 2^31 - 1 elements", what,
                             clrun__type_format(x, s, sizeof s));
    return CLRUN_OK;
}

/* ---- conv2d ------------------------------------------------------------------------------ */

static const clrun__attr_spec conv_attrs[] = {
    {"stride", CLRUN__WANT_INTS, false},
    {"pad", CLRUN__WANT_INTS, false},
    {"dilation", CLRUN__WANT_INTS, false},
    {"groups", CLRUN__WANT_INT, false},
};

static clrun_status conv_attrs_of(const clrun__op_call *call, clrun__conv_geometry *g,
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
static clrun_status conv_shapes(const clrun__op_call *call, clrun__conv_geometry *g,
                                const clrun__infer_error *err)
{
    const clrun_tensor_type *x = &call->inputs[0], *w = &call->inputs[1];
    char sx[CLRUN__TYPE_TEXT], sw[CLRUN__TYPE_TEXT];
    clrun_status s = check_image(x, "x", err);
    if (s != CLRUN_OK)
        return s;
    if (w->rank != 4)
        return clrun__refuse(err, "w is %s: expected [O, C/groups, KH, KW]", clrun__type_format(w, sw, sizeof sw));
    int64_t C = x->shape[1], O = w->shape[0];
    if (C % g->groups || O % g->groups || w->shape[1] != C / g->groups)
        return clrun__refuse(err, "x is %s, w is %s, groups %" PRId64 ": C and O must divide by "
                             "groups and w's second dimension be C/groups", clrun__type_format(x, sx, sizeof sx),
                             clrun__type_format(w, sw, sizeof sw), g->groups);
    if (call->input_count == 3 && (call->inputs[2].rank != 1 || call->inputs[2].shape[0] != O))
        return clrun__refuse(err, "bias is %s: expected f32[%" PRId64 "] (O)",
                             clrun__type_format(&call->inputs[2], sx, sizeof sx), O);
    g->oh = out_extent(x->shape[2], g->pad[0], g->dilation[0] * (w->shape[2] - 1) + 1, g->stride[0]);
    g->ow = out_extent(x->shape[3], g->pad[1], g->dilation[1] * (w->shape[3] - 1) + 1, g->stride[1]);
    if (g->oh < 1 || g->ow < 1)
        return clrun__refuse(err, "the kernel of w %s (dilated) does not fit x %s with padding "
                             "[%" PRId64 ", %" PRId64 "]", clrun__type_format(w, sw, sizeof sw),
                             clrun__type_format(x, sx, sizeof sx), g->pad[0], g->pad[1]);
    if (clrun__dims_product(w, 0, 4) > INT_MAX || (uint64_t)O * (uint64_t)(g->oh * g->ow) > INT_MAX)
        return clrun__refuse(err, "x %s, w %s: too large for one convolution",
                             clrun__type_format(x, sx, sizeof sx), clrun__type_format(w, sw, sizeof sw));
    return CLRUN_OK;
}

clrun_status clrun__conv_geometry_of(const clrun__op_call *call, clrun__conv_geometry *g,
                                     const clrun__infer_error *err)
{
    clrun_status s = conv_attrs_of(call, g, err);
    return s == CLRUN_OK ? conv_shapes(call, g, err) : s;
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
    clrun__conv_geometry g;
    if (s == CLRUN_OK)
        s = clrun__conv_geometry_of(call, &g, &err);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *x = &call->inputs[0];
    out[0] = *x;
    out[0].shape[1] = call->inputs[1].shape[0];
    out[0].shape[2] = g.oh;
    out[0].shape[3] = g.ow;
    return CLRUN_OK;
}

/* ---- pooling ----------------------------------------------------------------------------- */

static const clrun__attr_spec pool_attrs[] = {
    {"kernel", CLRUN__WANT_INTS, true},
    {"stride", CLRUN__WANT_INTS, false},
    {"pad", CLRUN__WANT_INTS, false},
};

clrun_status clrun__pool_geometry_of(const clrun__op_call *call, clrun__pool_geometry *g,
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
        char sx[CLRUN__TYPE_TEXT];
        return clrun__refuse(err, "kernel [%" PRId64 ", %" PRId64 "] does not fit x %s",
                             g->kernel[0], g->kernel[1], clrun__type_format(x, sx, sizeof sx));
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
    clrun__pool_geometry g;
    if (s == CLRUN_OK)
        s = clrun__pool_geometry_of(call, &g, &err);
    if (s != CLRUN_OK)
        return s;
    out[0] = call->inputs[0];
    out[0].shape[2] = g.oh;
    out[0].shape[3] = g.ow;
    return CLRUN_OK;
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

static const clrun__op op_conv2d = {.name = "conv2d", .min_inputs = 2, .max_inputs = 3,
                                    .outputs = 1, .infer = conv_infer};
static const clrun__op op_maxpool2d = {.name = "maxpool2d", .min_inputs = 1, .max_inputs = 1,
                                       .outputs = 1, .code = 1, .infer = maxpool_infer};
static const clrun__op op_avgpool2d = {.name = "avgpool2d", .min_inputs = 1, .max_inputs = 1,
                                       .outputs = 1, .code = 0, .infer = avgpool_infer};
static const clrun__op op_global_avgpool = {.name = "global_avgpool", .min_inputs = 1,
                                            .max_inputs = 1, .outputs = 1,
                                            .infer = global_avgpool_infer};

const clrun__op *const clrun__ops_conv[] = {
    &op_conv2d, &op_maxpool2d, &op_avgpool2d, &op_global_avgpool, NULL,
};
