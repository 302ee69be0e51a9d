/* Operators that opsets 18 to 20 added, as graph ops or compositions: Gelu (20) as `gelu_erf`
 * (approximate "none") or `gelu` (approximate "tanh"); Mish (18) as x·tanh(softplus(x));
 * CenterCropPad (18) as a crop or a zero pad of each named axis, centred. GroupNormalization
 * (18, 21) is with the other normalizations (map_norm.c). */
#include <inttypes.h>
#include <string.h>

#include "onnx/map.h"

clrun_status clrun__map_gelu(clrun__imp *im, clrun__onode *n)
{
    char approximate[16];
    clrun_status s = clrun__need_inputs(im, n, 1);
    if (s == CLRUN_OK)
        s = clrun__oattr_string(im, n, "approximate", "none", approximate, sizeof approximate);
    if (s != CLRUN_OK)
        return s;
    bool tanh_form = strcmp(approximate, "tanh") == 0;
    if (!tanh_form && strcmp(approximate, "none") != 0)
        return clrun__invalid(im, "approximate '%s' is not none or tanh", approximate);
    return clrun__emit_unary(im, n, tanh_form ? "gelu" : "gelu_erf", n->in[0], 0, NULL);
}

clrun_status clrun__map_mish(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 1);
    clrun__value *t;
    if (s == CLRUN_OK)
        s = clrun__emit_unary(im, n, "softplus", n->in[0], -1, &t);
    if (s == CLRUN_OK)
        s = clrun__emit_unary(im, n, "tanh", t, -1, &t);
    return s == CLRUN_OK ? clrun__emit_binary(im, n, "mul", n->in[0], t, 0, NULL) : s;
}

/* Each named axis of size dim becomes `shape`'s entry: cropped to its centre when larger
 * (dim - target elements off, the extra one at the end), padded with zeros around it when
 * smaller (the extra one at the end). */
clrun_status clrun__map_center_crop_pad(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 2);
    int64_t shape[CLRUN__ONNX_MAX_RANK], axes[CLRUN__ONNX_MAX_RANK];
    int n_shape = 0, n_axes = -1;
    if (s == CLRUN_OK)
        s = clrun__const_ints(im, n, 1, false, shape, CLRUN__ONNX_MAX_RANK, &n_shape);
    if (s == CLRUN_OK)
        s = clrun__oattr_ints(im, n, "axes", axes, CLRUN__ONNX_MAX_RANK, &n_axes);
    if (s != CLRUN_OK)
        return s;
    clrun__value *x = n->in[0];
    int rank = x->c.rank;
    if (n_axes < 0) {
        n_axes = rank;
        for (int d = 0; d < rank; d++)
            axes[d] = d;
    }
    if (n_shape != n_axes)
        return clrun__invalid(im, "shape has %d entries for %d axes", n_shape, n_axes);
    int64_t before[CLRUN__ONNX_MAX_RANK] = {0}, after[CLRUN__ONNX_MAX_RANK] = {0};
    bool seen[CLRUN__ONNX_MAX_RANK] = {false};
    int last = -1;
    for (int i = 0; i < n_axes; i++) {
        int a;
        if ((s = clrun__norm_axis(im, axes[i], rank, "axes entry", &a)) != CLRUN_OK)
            return s;
        if (seen[a])
            return clrun__invalid(im, "axis %d is named twice in axes", a);
        seen[a] = true;
        if (shape[i] < 1)
            return shape[i] < 0 ? clrun__invalid(im, "shape entry %d is %" PRId64, i, shape[i])
                                : clrun__unsupported(im, "the result would be empty");
        int64_t dim = x->c.dims[a], diff = shape[i] > dim ? shape[i] - dim : dim - shape[i];
        int64_t lead = diff / 2, trail = diff - lead;
        before[a] = shape[i] > dim ? lead : -lead; /* negative: cropped */
        after[a] = shape[i] > dim ? trail : -trail;
        if (diff)
            last = a > last ? a : last;
    }
    if (last < 0)
        return clrun__define_alias(im, n, 0, x);
    for (int d = 0; d <= last; d++) {
        if (before[d] == 0 && after[d] == 0)
            continue;
        s = clrun__pad_axis(im, n, x, d, before[d], after[d], "constant", 0, d == last ? 0 : -1, &x);
        if (s != CLRUN_OK)
            return s;
    }
    return CLRUN_OK;
}
