/* Type rules of convolution and pooling over NCHW images, and of col2im. */
#include <inttypes.h>
#include <limits.h>
#include <string.h>

#include "core/checked.h"
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
        if (out[i] < min)
            return clrun__refuse(err, "attribute '%s' has %" PRId64 ": must be >= %" PRId64, name,
                                 out[i], min);
        else if (out[i] > INT_MAX)
            return clrun__refuse(err, "attribute '%s' has %" PRId64 ": must be at most %d", name, out[i],
                                 INT_MAX);
    return CLRUN_OK;
}

/* O * oh * ow within INT_MAX (the kernels' index range), without overflowing on the way. */
static bool fits_int(int64_t O, int64_t oh, int64_t ow)
{
    int64_t p;
    return clrun__mul_i64(O, oh, &p) && clrun__mul_i64(p, ow, &p) && p <= INT_MAX;
}

/* The output extent of a window sweep over in + pad + pad_end: floor((room) / stride) + 1, or
 * with ceil_mode rounded up, less a last window that would start past the input and the
 * leading pad (PyTorch's rule, which ONNX's exporters follow); 0 if no window fits. */
static int64_t out_extent(int64_t in, int64_t pad, int64_t pad_end, int64_t span, int64_t stride,
                          bool ceil_mode)
{
    int64_t room = in + pad + pad_end - span;
    if (room < 0)
        return 0;
    int64_t out = (ceil_mode ? (room + stride - 1) / stride : room / stride) + 1;
    if (ceil_mode && (out - 1) * stride >= in + pad)
        out--;
    return out;
}

/* Padding from "pad" ([h, w] or one value, both sides) or "pads" ([top, left, bottom, right]);
 * both at once is refused. */
static clrun_status pads_attr(const clrun__op_call *call, int64_t *begin, int64_t *end,
                              const clrun__infer_error *err)
{
    static const int64_t zeros[2] = {0, 0};
    int64_t v[CLRUN_MAX_ATTR_INTS];
    int n = clrun__attr_list(call, "pads", v, CLRUN_MAX_ATTR_INTS);
    if (n == 0) {
        clrun_status s = pair_attr(call, "pad", zeros, 0, begin, err);
        end[0] = begin[0], end[1] = begin[1];
        return s;
    }
    if (clrun__attr_list(call, "pad", v + 4, 2) > 0)
        return clrun__refuse(err, "attributes 'pad' and 'pads' given together");
    if (n != 4)
        return clrun__refuse(err, "attribute 'pads' needs 4 values [top, left, bottom, right], got %d", n);
    for (int i = 0; i < 4; i++)
        if (v[i] < 0)
            return clrun__refuse(err, "attribute 'pads' has %" PRId64 ": must be >= 0", v[i]);
        else if (v[i] > INT_MAX)
            return clrun__refuse(err, "attribute 'pads' has %" PRId64 ": must be at most %d", v[i], INT_MAX);
    begin[0] = v[0], begin[1] = v[1], end[0] = v[2], end[1] = v[3];
    return CLRUN_OK;
}

/* A 0/1 flag attribute. */
static clrun_status flag_attr(const clrun__op_call *call, const char *name, bool *out,
                              const clrun__infer_error *err)
{
    int64_t v = clrun__attr_int_or(call, name, 0);
    if (v != 0 && v != 1)
        return clrun__refuse(err, "attribute '%s' must be 0 or 1, not %" PRId64, name, v);
    *out = v == 1;
    return CLRUN_OK;
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
    {"pads", CLRUN__WANT_INTS, false},
    {"dilation", CLRUN__WANT_INTS, false},
    {"groups", CLRUN__WANT_INT, false},
    {"output_padding", CLRUN__WANT_INTS, false}, /* conv_transpose2d only */
    {"dequant", CLRUN__WANT_INT, false},         /* conv2d only: its weight narrow */
};

static clrun_status conv_attrs_of(const clrun__op_call *call, clrun__conv_geometry *g,
                                  const clrun__infer_error *err)
{
    static const int64_t ones[2] = {1, 1}, zeros[2] = {0, 0};
    clrun_status s = pair_attr(call, "stride", ones, 1, g->stride, err);
    if (s == CLRUN_OK)
        s = pads_attr(call, g->pad, g->pad_end, err);
    if (s == CLRUN_OK)
        s = pair_attr(call, "dilation", ones, 1, g->dilation, err);
    if (s == CLRUN_OK)
        s = pair_attr(call, "output_padding", zeros, 0, g->output_padding, err);
    if (s != CLRUN_OK)
        return s;
    g->groups = clrun__attr_int_or(call, "groups", 1);
    if (g->groups < 1)
        return clrun__refuse(err, "attribute 'groups' is %" PRId64 ": must be >= 1", g->groups);
    if (g->groups > INT_MAX)
        return clrun__refuse(err, "attribute 'groups' is %" PRId64 ": must be at most %d", g->groups, INT_MAX);
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
    bool has_bias = false;
    clrun__product_dequant(call, &has_bias);
    if (has_bias && (call->inputs[2].rank != 1 || call->inputs[2].shape[0] != O))
        return clrun__refuse(err, "bias is %s: expected f32[%" PRId64 "] (O)",
                             clrun__type_format(&call->inputs[2], sx, sizeof sx), O);
    int64_t span[2];
    for (int i = 0; i < 2; i++)
        if (!clrun__mul_i64(g->dilation[i], w->shape[2 + i] - 1, &span[i]) || span[i] > INT64_MAX / 4 ||
            x->shape[2 + i] > INT64_MAX / 4)
            return clrun__refuse(err, "x %s, w %s: too large for one convolution",
                                 clrun__type_format(x, sx, sizeof sx), clrun__type_format(w, sw, sizeof sw));
    g->oh = out_extent(x->shape[2], g->pad[0], g->pad_end[0], span[0] + 1, g->stride[0], false);
    g->ow = out_extent(x->shape[3], g->pad[1], g->pad_end[1], span[1] + 1, g->stride[1], false);
    if (g->oh < 1 || g->ow < 1)
        return clrun__refuse(err, "the kernel of w %s (dilated) does not fit x %s with padding "
                             "[%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "]",
                             clrun__type_format(w, sw, sizeof sw), clrun__type_format(x, sx, sizeof sx),
                             g->pad[0], g->pad[1], g->pad_end[0], g->pad_end[1]);
    if (clrun__dims_product(w, 0, 4) > INT_MAX || !fits_int(O, g->oh, g->ow))
        return clrun__refuse(err, "x %s, w %s: too large for one convolution",
                             clrun__type_format(x, sx, sizeof sx), clrun__type_format(w, sw, sizeof sw));
    return CLRUN_OK;
}

/* What conv2d and conv_transpose2d check before their geometry: x, w and an optional bias, all
 * f32, and the attributes they share. */
static clrun_status check_conv_call(const clrun__op_call *call, const clrun__infer_error *err)
{
    clrun_status s = clrun__check_input_count(call, 2, 3, err);
    if (s == CLRUN_OK)
        s = clrun__check_attrs(call, conv_attrs, 6, err);
    for (int i = 0; s == CLRUN_OK && i < call->input_count; i++)
        s = clrun__check_dtype(call, i, false, err);
    return s;
}

/* conv2d's: its weight may be narrow (clrun__product_weight_of). */
static clrun_status check_conv2d_call(const clrun__op_call *call, const clrun__infer_error *err)
{
    clrun_status s = clrun__check_input_count(call, 2, 5, err);
    if (s == CLRUN_OK)
        s = clrun__check_attrs(call, conv_attrs, 7, err);
    for (int i = 0; s == CLRUN_OK && i < call->input_count; i++)
        s = clrun__check_dims(call, i, err);
    int dequant = 0;
    bool bias = false;
    if (s == CLRUN_OK)
        s = clrun__product_weight_of(call, call->inputs[1].rank == 4 ? call->inputs[1].shape[0] : -1,
                                     &dequant, &bias, err);
    return s;
}

clrun_status clrun__conv_geometry_of(const clrun__op_call *call, clrun__conv_geometry *g,
                                     const clrun__infer_error *err)
{
    clrun_status s = conv_attrs_of(call, g, err);
    if (s == CLRUN_OK && (g->output_padding[0] || g->output_padding[1]))
        return clrun__refuse(err, "attribute 'output_padding' is for conv_transpose2d");
    return s == CLRUN_OK ? conv_shapes(call, g, err) : s;
}

static clrun_status conv_infer(const clrun__op_call *call, clrun_tensor_type *out, char *errbuf,
                               size_t errlen)
{
    const clrun__infer_error err = {"conv2d", errbuf, errlen};
    clrun__conv_geometry g;
    clrun_status s = check_conv2d_call(call, &err);
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

/* ---- conv_transpose2d: the gradient of conv2d with respect to its input --------------------
 * x [N, C, H, W], w [C, O/groups, KH, KW]: out[n, o, oh, ow] sums x[n, c, ih, iw] w[c, o', kh, kw]
 * over the group's c and every (kh, kw) with oh = ih * sh - pad_top + kh * dh (and likewise
 * for w), so OH = sh (H - 1) + dh (KH - 1) + 1 - pad_top - pad_bottom + output_padding. */

clrun_status clrun__conv_transpose_geometry_of(const clrun__op_call *call, clrun__conv_geometry *g,
                                               const clrun__infer_error *err)
{
    clrun_status s = conv_attrs_of(call, g, err);
    const clrun_tensor_type *x = &call->inputs[0], *w = &call->inputs[1];
    char sx[CLRUN__TYPE_TEXT], sw[CLRUN__TYPE_TEXT];
    if (s == CLRUN_OK)
        s = check_image(x, "x", err);
    if (s != CLRUN_OK)
        return s;
    if (w->rank != 4)
        return clrun__refuse(err, "w is %s: expected [C, O/groups, KH, KW]", clrun__type_format(w, sw, sizeof sw));
    int64_t C = x->shape[1], O;
    if (!clrun__mul_i64(w->shape[1], g->groups, &O))
        return clrun__refuse(err, "w is %s, groups %" PRId64 ": too many output channels",
                             clrun__type_format(w, sw, sizeof sw), g->groups);
    if (w->shape[0] != C || C % g->groups)
        return clrun__refuse(err, "x is %s, w is %s, groups %" PRId64 ": w's first dimension must "
                             "be C and C divide by groups", clrun__type_format(x, sx, sizeof sx),
                             clrun__type_format(w, sw, sizeof sw), g->groups);
    if (call->input_count == 3 && (call->inputs[2].rank != 1 || call->inputs[2].shape[0] != O))
        return clrun__refuse(err, "bias is %s: expected f32[%" PRId64 "] (O)",
                             clrun__type_format(&call->inputs[2], sx, sizeof sx), O);
    for (int i = 0; i < 2; i++)
        if (g->output_padding[i] >= g->stride[i] && g->output_padding[i] >= g->dilation[i])
            return clrun__refuse(err, "output_padding [%" PRId64 ", %" PRId64 "] must be below the "
                                 "stride or the dilation", g->output_padding[0], g->output_padding[1]);
    int64_t extent[2];
    for (int i = 0; i < 2; i++) {
        int64_t grown, span; /* stride (in - 1) + dilation (k - 1) + 1, then the pads */
        if (!clrun__mul_i64(g->stride[i], x->shape[2 + i] - 1, &grown) ||
            !clrun__mul_i64(g->dilation[i], w->shape[2 + i] - 1, &span) || !clrun__add_i64(grown, span, &grown) ||
            !clrun__add_i64(grown, 1 + g->output_padding[i], &grown))
            return clrun__refuse(err, "x %s, w %s: too large for one convolution",
                                 clrun__type_format(x, sx, sizeof sx), clrun__type_format(w, sw, sizeof sw));
        extent[i] = grown - g->pad[i] - g->pad_end[i]; /* pads <= INT_MAX each */
    }
    g->oh = extent[0], g->ow = extent[1];
    if (g->oh < 1 || g->ow < 1)
        return clrun__refuse(err, "x %s, w %s: the padding leaves no output", clrun__type_format(x, sx, sizeof sx),
                             clrun__type_format(w, sw, sizeof sw));
    if (clrun__dims_product(w, 0, 4) > INT_MAX || !fits_int(O, g->oh, g->ow))
        return clrun__refuse(err, "x %s, w %s: too large for one convolution",
                             clrun__type_format(x, sx, sizeof sx), clrun__type_format(w, sw, sizeof sw));
    return CLRUN_OK;
}

static clrun_status conv_transpose_infer(const clrun__op_call *call, clrun_tensor_type *out,
                                         char *errbuf, size_t errlen)
{
    const clrun__infer_error err = {"conv_transpose2d", errbuf, errlen};
    clrun__conv_geometry g;
    clrun_status s = check_conv_call(call, &err);
    if (s == CLRUN_OK)
        s = clrun__conv_transpose_geometry_of(call, &g, &err);
    if (s != CLRUN_OK)
        return s;
    out[0] = call->inputs[0];
    out[0].shape[1] = call->inputs[1].shape[1] * g.groups;
    out[0].shape[2] = g.oh;
    out[0].shape[3] = g.ow;
    return CLRUN_OK;
}

/* ---- pooling ----------------------------------------------------------------------------- */

static const clrun__attr_spec pool_attrs[] = {
    {"kernel", CLRUN__WANT_INTS, true},
    {"stride", CLRUN__WANT_INTS, false},
    {"pad", CLRUN__WANT_INTS, false},
    {"pads", CLRUN__WANT_INTS, false},
    {"ceil_mode", CLRUN__WANT_INT, false},
    {"dilation", CLRUN__WANT_INTS, false},          /* maxpool2d */
    {"count_include_pad", CLRUN__WANT_INT, false},  /* avgpool2d */
};

clrun_status clrun__pooling_geometry_of(const clrun__op_call *call, clrun__pooling_geometry *g,
                                     const clrun__infer_error *err)
{
    static const int64_t zeros[2] = {0, 0}, ones[2] = {1, 1};
    clrun_status s = pair_attr(call, "kernel", zeros, 1, g->kernel, err);
    if (s == CLRUN_OK)
        s = pair_attr(call, "stride", g->kernel, 1, g->stride, err);
    if (s == CLRUN_OK)
        s = pads_attr(call, g->pad, g->pad_end, err);
    if (s == CLRUN_OK)
        s = pair_attr(call, "dilation", ones, 1, g->dilation, err);
    if (s == CLRUN_OK)
        s = flag_attr(call, "ceil_mode", &g->ceil_mode, err);
    if (s == CLRUN_OK)
        s = flag_attr(call, "count_include_pad", &g->count_include_pad, err);
    if (s == CLRUN_OK)
        s = check_image(&call->inputs[0], "x", err);
    if (s != CLRUN_OK)
        return s;
    /* With each pad <= half the (dilated) window every window holds an element of the image, so
     * max and average are always defined. */
    int64_t span[2];
    for (int i = 0; i < 2; i++) {
        span[i] = g->dilation[i] * (g->kernel[i] - 1) + 1;
        if (2 * g->pad[i] > span[i] || 2 * g->pad_end[i] > span[i]) {
            if (g->pad[i] == g->pad_end[i] && g->pad[1 - i] == g->pad_end[1 - i])
                return clrun__refuse(err, "pad [%" PRId64 ", %" PRId64 "] exceeds half the kernel [%"
                                     PRId64 ", %" PRId64 "]", g->pad[0], g->pad[1], g->kernel[0],
                                     g->kernel[1]);
            return clrun__refuse(err, "pads [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "] exceed "
                                 "half the kernel [%" PRId64 ", %" PRId64 "]", g->pad[0], g->pad[1],
                                 g->pad_end[0], g->pad_end[1], g->kernel[0], g->kernel[1]);
        }
    }
    const clrun_tensor_type *x = &call->inputs[0];
    g->oh = out_extent(x->shape[2], g->pad[0], g->pad_end[0], span[0], g->stride[0], g->ceil_mode);
    g->ow = out_extent(x->shape[3], g->pad[1], g->pad_end[1], span[1], g->stride[1], g->ceil_mode);
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
    bool is_max = name[0] == 'm';
    clrun_status s = clrun__check_input_count(call, 1, 1, &err);
    /* maxpool2d takes dilation, avgpool2d count_include_pad: the last entry of the other's. */
    clrun__attr_spec attrs[6];
    memcpy(attrs, pool_attrs, 5 * sizeof attrs[0]);
    attrs[5] = pool_attrs[is_max ? 5 : 6];
    if (s == CLRUN_OK)
        s = clrun__check_attrs(call, attrs, 6, &err);
    if (s == CLRUN_OK)
        s = clrun__check_dtype(call, 0, false, &err);
    clrun__pooling_geometry g;
    if (s == CLRUN_OK)
        s = clrun__pooling_geometry_of(call, &g, &err);
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

/* ---- gradients: conv2d_grad_weight, maxpool2d_grad, avgpool2d_grad -------------------------
 * Each checks dy against the geometry of its forward op, computed by the forward op's own code
 * (conv_shapes, clrun__pooling_geometry_of) over the types the forward op would have seen, so a
 * gradient and its forward op can never disagree on a shape. */

/* Refuses dy unless it is [N, C, OH, OW] for image x's N and the channels and extent given. */
static clrun_status check_dy(const clrun_tensor_type *dy, const clrun_tensor_type *x, int64_t channels,
                             int64_t oh, int64_t ow, const clrun__infer_error *err)
{
    char sd[CLRUN__TYPE_TEXT], sx[CLRUN__TYPE_TEXT];
    if (dy->rank != 4)
        return clrun__refuse(err, "dy is %s: expected [N, C, OH, OW]", clrun__type_format(dy, sd, sizeof sd));
    if (dy->shape[0] != x->shape[0] || dy->shape[1] != channels || dy->shape[2] != oh || dy->shape[3] != ow)
        return clrun__refuse(err, "dy is %s: the forward op's output for x %s with these attributes "
                             "is [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "]",
                             clrun__type_format(dy, sd, sizeof sd), clrun__type_format(x, sx, sizeof sx),
                             x->shape[0], channels, oh, ow);
    return CLRUN_OK;
}

static const clrun__attr_spec conv_grad_weight_attrs[] = {
    {"stride", CLRUN__WANT_INTS, false},
    {"pad", CLRUN__WANT_INTS, false},
    {"pads", CLRUN__WANT_INTS, false},
    {"dilation", CLRUN__WANT_INTS, false},
    {"groups", CLRUN__WANT_INT, false},
    {"kernel", CLRUN__WANT_INTS, true},
};

clrun_status clrun__conv_grad_weight_geometry_of(const clrun__op_call *call, clrun__conv_geometry *g,
                                                 clrun_tensor_type *dw, const clrun__infer_error *err)
{
    static const int64_t zeros[2] = {0, 0};
    const clrun_tensor_type *x = &call->inputs[0], *dy = &call->inputs[1];
    char sx[CLRUN__TYPE_TEXT], sd[CLRUN__TYPE_TEXT];
    int64_t kernel[2];
    clrun_status s = pair_attr(call, "kernel", zeros, 1, kernel, err);
    if (s == CLRUN_OK)
        s = conv_attrs_of(call, g, err);
    if (s == CLRUN_OK)
        s = check_image(x, "x", err);
    if (s != CLRUN_OK)
        return s;
    if (dy->rank != 4)
        return clrun__refuse(err, "dy is %s: expected [N, O, OH, OW]", clrun__type_format(dy, sd, sizeof sd));
    int64_t C = x->shape[1], O = dy->shape[1];
    if (C % g->groups)
        return clrun__refuse(err, "x is %s: its %" PRId64 " channels do not divide by groups %" PRId64,
                             clrun__type_format(x, sx, sizeof sx), C, g->groups);
    if (O % g->groups)
        return clrun__refuse(err, "dy is %s: its %" PRId64 " channels (O) do not divide by groups %" PRId64,
                             clrun__type_format(dy, sd, sizeof sd), O, g->groups);
    /* conv2d's own check, over the w this gradient has the shape of */
    *dw = *x;
    dw->shape[0] = O, dw->shape[1] = C / g->groups, dw->shape[2] = kernel[0], dw->shape[3] = kernel[1];
    const clrun_tensor_type forward[2] = {*x, *dw};
    clrun__op_call conv = *call;
    conv.inputs = forward;
    conv.input_count = 2;
    s = conv_shapes(&conv, g, err);
    return s == CLRUN_OK ? check_dy(dy, x, O, g->oh, g->ow, err) : s;
}

static clrun_status conv_grad_weight_infer(const clrun__op_call *call, clrun_tensor_type *out,
                                           char *errbuf, size_t errlen)
{
    const clrun__infer_error err = {"conv2d_grad_weight", errbuf, errlen};
    clrun_status s = clrun__check_input_count(call, 2, 2, &err);
    if (s == CLRUN_OK)
        s = clrun__check_attrs(call, conv_grad_weight_attrs, 6, &err);
    for (int i = 0; s == CLRUN_OK && i < 2; i++)
        s = clrun__check_dtype(call, i, false, &err);
    clrun__conv_geometry g;
    return s == CLRUN_OK ? clrun__conv_grad_weight_geometry_of(call, &g, &out[0], &err) : s;
}

clrun_status clrun__pooling_grad_geometry_of(const clrun__op_call *call, clrun__pooling_geometry *g,
                                             clrun_tensor_type *x, const clrun__infer_error *err)
{
    const clrun_tensor_type *dy = &call->inputs[call->input_count - 1];
    clrun__op_call pool = *call; /* the forward op's call: x alone */
    pool.input_count = 1;
    if (call->input_count == 2) { /* maxpool2d_grad: x, dy */
        *x = call->inputs[0];
    } else {                      /* avgpool2d_grad: dy and the image's size */
        static const int64_t zeros[2] = {0, 0};
        int64_t size[2];
        char sd[CLRUN__TYPE_TEXT];
        clrun_status s = pair_attr(call, "size", zeros, 1, size, err);
        if (s != CLRUN_OK)
            return s;
        if (dy->rank != 4)
            return clrun__refuse(err, "dy is %s: expected [N, C, OH, OW]", clrun__type_format(dy, sd, sizeof sd));
        *x = *dy;
        x->shape[2] = size[0], x->shape[3] = size[1];
        pool.inputs = x;
    }
    clrun_status s = clrun__pooling_geometry_of(&pool, g, err);
    return s == CLRUN_OK ? check_dy(dy, x, x->shape[1], g->oh, g->ow, err) : s;
}

static clrun_status pool_grad_infer_as(const char *name, const clrun__op_call *call,
                                       clrun_tensor_type *out, char *errbuf, size_t errlen)
{
    const clrun__infer_error err = {name, errbuf, errlen};
    bool is_max = name[0] == 'm';
    int inputs = is_max ? 2 : 1;
    clrun_status s = clrun__check_input_count(call, inputs, inputs, &err);
    /* the forward op's attributes (as in pool_infer_as); avgpool2d_grad adds the image's size */
    clrun__attr_spec attrs[7];
    memcpy(attrs, pool_attrs, 5 * sizeof attrs[0]);
    attrs[5] = pool_attrs[is_max ? 5 : 6];
    attrs[6] = (clrun__attr_spec){"size", CLRUN__WANT_INTS, true};
    if (s == CLRUN_OK)
        s = clrun__check_attrs(call, attrs, is_max ? 6 : 7, &err);
    for (int i = 0; s == CLRUN_OK && i < inputs; i++)
        s = clrun__check_dtype(call, i, false, &err);
    clrun__pooling_geometry g;
    return s == CLRUN_OK ? clrun__pooling_grad_geometry_of(call, &g, &out[0], &err) : s;
}

static clrun_status maxpool_grad_infer(const clrun__op_call *call, clrun_tensor_type *out, char *err,
                                       size_t errlen)
{
    return pool_grad_infer_as("maxpool2d_grad", call, out, err, errlen);
}

static clrun_status avgpool_grad_infer(const clrun__op_call *call, clrun_tensor_type *out, char *err,
                                       size_t errlen)
{
    return pool_grad_infer_as("avgpool2d_grad", call, out, err, errlen);
}

/* ---- global_avgpool: a mean over H and W ------------------------------------------------- */

static clrun_status global_pool_infer_as(const char *name, const clrun__op_call *call,
                                         clrun_tensor_type *out, char *errbuf, size_t errlen)
{
    const clrun__infer_error err = {name, errbuf, errlen};
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

static clrun_status global_avgpool_infer(const clrun__op_call *call, clrun_tensor_type *out,
                                         char *err, size_t errlen)
{
    return global_pool_infer_as("global_avgpool", call, out, err, errlen);
}

static clrun_status global_maxpool_infer(const clrun__op_call *call, clrun_tensor_type *out,
                                         char *err, size_t errlen)
{
    return global_pool_infer_as("global_maxpool", call, out, err, errlen);
}

/* ---- col2im: columns summed back into images --------------------------------------------
 * cols [N, C*KH*KW, L] (ONNX's Col2Im) or, transposed, [N, L, C*KH*KW]: row (c * KH + kh) * KW
 * + kw, position l = oh * OW + ow, adds into out[n, c, oh * sh - top + kh * dh, ow * sw - left +
 * kw * dw] when that lies inside the image [H, W] ("image"). OH and OW are conv2d's over
 * that image, and L must be their product. */

static const clrun__attr_spec col2im_attrs[] = {
    {"image", CLRUN__WANT_INTS, true},
    {"kernel", CLRUN__WANT_INTS, true},
    {"stride", CLRUN__WANT_INTS, false},
    {"pads", CLRUN__WANT_INTS, false},
    {"dilation", CLRUN__WANT_INTS, false},
    {"transposed", CLRUN__WANT_INT, false},
};

clrun_status clrun__col2im_geometry_of(const clrun__op_call *call, clrun__col2im_geometry *g,
                                       const clrun__infer_error *err)
{
    static const int64_t zeros[2] = {0, 0}, ones[2] = {1, 1};
    clrun_status s = pair_attr(call, "image", zeros, 1, g->image, err);
    if (s == CLRUN_OK)
        s = pair_attr(call, "kernel", zeros, 1, g->kernel, err);
    if (s == CLRUN_OK)
        s = pair_attr(call, "stride", ones, 1, g->stride, err);
    if (s == CLRUN_OK)
        s = pads_attr(call, g->pad, g->pad_end, err);
    if (s == CLRUN_OK)
        s = pair_attr(call, "dilation", ones, 1, g->dilation, err);
    if (s == CLRUN_OK)
        s = flag_attr(call, "transposed", &g->transposed, err);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *cols = &call->inputs[0];
    char sc[CLRUN__TYPE_TEXT];
    if (cols->rank != 3)
        return clrun__refuse(err, "cols is %s: expected %s", clrun__type_format(cols, sc, sizeof sc),
                             g->transposed ? "[N, L, C*KH*KW]" : "[N, C*KH*KW, L]");
    int64_t rows = cols->shape[g->transposed ? 2 : 1], L = cols->shape[g->transposed ? 1 : 2];
    int64_t taps = g->kernel[0] * g->kernel[1]; /* each <= INT_MAX: no overflow */
    if (rows % taps)
        return clrun__refuse(err, "cols is %s: its %" PRId64 " rows do not divide by the kernel's "
                             "%" PRId64 " x %" PRId64 " taps", clrun__type_format(cols, sc, sizeof sc),
                             rows, g->kernel[0], g->kernel[1]);
    g->channels = rows / taps;
    int64_t span[2];
    for (int i = 0; i < 2; i++)
        if (!clrun__mul_i64(g->dilation[i], g->kernel[i] - 1, &span[i]) || span[i] > INT64_MAX / 4)
            return clrun__refuse(err, "kernel [%" PRId64 ", %" PRId64 "] with dilation [%" PRId64 ", %"
                                 PRId64 "]: too large", g->kernel[0], g->kernel[1], g->dilation[0],
                                 g->dilation[1]);
    g->oh = out_extent(g->image[0], g->pad[0], g->pad_end[0], span[0] + 1, g->stride[0], false);
    g->ow = out_extent(g->image[1], g->pad[1], g->pad_end[1], span[1] + 1, g->stride[1], false);
    if (g->oh < 1 || g->ow < 1)
        return clrun__refuse(err, "kernel [%" PRId64 ", %" PRId64 "] (dilated) does not fit image [%"
                             PRId64 ", %" PRId64 "] with pads [%" PRId64 ", %" PRId64 ", %" PRId64
                             ", %" PRId64 "]", g->kernel[0], g->kernel[1], g->image[0], g->image[1],
                             g->pad[0], g->pad[1], g->pad_end[0], g->pad_end[1]);
    int64_t windows;
    if (!clrun__mul_i64(g->oh, g->ow, &windows) || L != windows)
        return clrun__refuse(err, "cols is %s: L is %" PRId64 ", but the windows over image [%" PRId64
                             ", %" PRId64 "] number %" PRId64 " x %" PRId64,
                             clrun__type_format(cols, sc, sizeof sc), L, g->image[0], g->image[1],
                             g->oh, g->ow);
    if (!fits_int(g->channels, g->image[0], g->image[1]) || clrun__dims_product(cols, 1, 3) > INT_MAX)
        return clrun__refuse(err, "cols is %s, image [%" PRId64 ", %" PRId64 "]: one image exceeds "
                             "2^31 - 1 elements", clrun__type_format(cols, sc, sizeof sc),
                             g->image[0], g->image[1]);
    return CLRUN_OK;
}

static clrun_status col2im_infer(const clrun__op_call *call, clrun_tensor_type *out, char *errbuf,
                                 size_t errlen)
{
    const clrun__infer_error err = {"col2im", errbuf, errlen};
    clrun_status s = clrun__check_input_count(call, 1, 1, &err);
    if (s == CLRUN_OK)
        s = clrun__check_attrs(call, col2im_attrs, 6, &err);
    if (s == CLRUN_OK)
        s = clrun__check_dtype(call, 0, false, &err);
    clrun__col2im_geometry g;
    if (s == CLRUN_OK)
        s = clrun__col2im_geometry_of(call, &g, &err);
    if (s != CLRUN_OK)
        return s;
    out[0] = call->inputs[0];
    out[0].rank = 4;
    out[0].shape[1] = g.channels;
    out[0].shape[2] = g.image[0];
    out[0].shape[3] = g.image[1];
    return CLRUN_OK;
}

static const clrun__op op_conv2d = {.name = "conv2d", .min_inputs = 2, .max_inputs = 5,
                                    .outputs = 1, .infer = conv_infer};
static const clrun__op op_maxpool2d = {.name = "maxpool2d", .min_inputs = 1, .max_inputs = 1,
                                       .outputs = 1, .code = 1, .infer = maxpool_infer};
static const clrun__op op_avgpool2d = {.name = "avgpool2d", .min_inputs = 1, .max_inputs = 1,
                                       .outputs = 1, .code = 0, .infer = avgpool_infer};
static const clrun__op op_global_avgpool = {.name = "global_avgpool", .min_inputs = 1,
                                            .max_inputs = 1, .outputs = 1,
                                            .infer = global_avgpool_infer};
static const clrun__op op_global_maxpool = {.name = "global_maxpool", .min_inputs = 1,
                                            .max_inputs = 1, .outputs = 1,
                                            .infer = global_maxpool_infer};
static const clrun__op op_conv_transpose2d = {.name = "conv_transpose2d", .min_inputs = 2,
                                              .max_inputs = 3, .outputs = 1,
                                              .infer = conv_transpose_infer};

static const clrun__op op_conv2d_grad_weight = {.name = "conv2d_grad_weight", .min_inputs = 2,
                                                .max_inputs = 2, .outputs = 1,
                                                .infer = conv_grad_weight_infer};
static const clrun__op op_maxpool2d_grad = {.name = "maxpool2d_grad", .min_inputs = 2,
                                            .max_inputs = 2, .outputs = 1, .code = 1,
                                            .infer = maxpool_grad_infer};
static const clrun__op op_avgpool2d_grad = {.name = "avgpool2d_grad", .min_inputs = 1,
                                            .max_inputs = 1, .outputs = 1, .code = 0,
                                            .infer = avgpool_grad_infer};
static const clrun__op op_col2im = {.name = "col2im", .min_inputs = 1, .max_inputs = 1,
                                    .outputs = 1, .infer = col2im_infer};

const clrun__op *const clrun__ops_conv[] = {
    &op_conv2d, &op_conv_transpose2d, &op_maxpool2d, &op_avgpool2d, &op_global_avgpool,
    &op_global_maxpool, &op_conv2d_grad_weight, &op_maxpool2d_grad, &op_avgpool2d_grad, &op_col2im,
    NULL,
};
