/* The vision operators: LRN as a composition (x² averaged over a window of channels by a pool),
 * GridSample and RoiAlign onto their graph ops (lib/graph/infer_sample.c); and ReverseSequence,
 * a gather along time at indices computed from the lengths. */
#include <string.h>

#include "onnx/map.h"

/* LRN (opsets 1, 13): y = x / (bias + alpha/size · Σ x²)^beta, the sum over the channels
 * c − ⌊(size−1)/2⌋ .. c + ⌈(size−1)/2⌉ that exist. x² as [N, 1, C, rest] is averaged by a
 * `avgpool2d` of [size, 1] over channels padded by zeros (counted), which is that sum / size;
 * then `scale` (·alpha + bias), `pow` and `div`. */
clrun_status clrun__map_lrn(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 1);
    int64_t size = 0;
    double alpha, beta, bias;
    if (s == CLRUN_OK)
        s = clrun__oattr_int(im, n, "size", 0, &size);
    if (s == CLRUN_OK)
        s = clrun__oattr_float(im, n, "alpha", 1e-4, &alpha);
    if (s == CLRUN_OK)
        s = clrun__oattr_float(im, n, "beta", 0.75, &beta);
    if (s == CLRUN_OK)
        s = clrun__oattr_float(im, n, "bias", 1.0, &bias);
    if (s != CLRUN_OK)
        return s;
    clrun__value *x = n->in[0];
    if (clrun__oattr_find(im, n, "size") == NULL || size < 1 || size > INT32_MAX)
        return clrun__invalid(im, "LRN needs a size >= 1");
    if (x->c.rank < 2)
        return clrun__invalid(im, "LRN takes x [N, C, ...] (rank >= 2), not rank %d", x->c.rank);
    int64_t dims[4] = {x->c.dims[0], 1, x->c.dims[1], 1};
    for (int d = 2; d < x->c.rank; d++)
        dims[3] *= x->c.dims[d];
    clrun__window w = {.spatial = 2, .kernel = {size, 1}, .stride = {1, 1}, .dilation = {1, 1},
                       .pad_begin = {(size - 1) / 2, 0}, .pad_end = {size / 2, 0}, .group = 1};
    clrun__value *sq, *avg, *base, *p, *e = clrun__scalar_value(im, x->c.elem, beta, x->c.rank);
    if (e == NULL)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    s = clrun__emit_binary(im, n, "mul", x, x, -1, &sq);
    if (s == CLRUN_OK)
        s = clrun__mv_reshape(im, n, sq, 4, dims, -1, &sq);
    if (s == CLRUN_OK)
        s = clrun__pool2d_core(im, n, sq, &w, false, true, -1, &avg);
    if (s == CLRUN_OK)
        s = clrun__mv_reshape(im, n, avg, x->c.rank, x->c.dims, -1, &avg);
    clrun_attr ab[2] = {clrun__mk_float("alpha", alpha), clrun__mk_float("beta", bias)};
    if (s == CLRUN_OK)
        s = clrun__emit1(im, n, "scale", &avg, 1, ab, 2, -1, &base);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "pow", base, e, -1, &p);
    return s == CLRUN_OK ? clrun__emit_binary(im, n, "div", x, p, 0, NULL) : s;
}

/* GridSample (opsets 16, 20): `grid_sample`, the strings as the op's codes; 4-D only (opset
 * 20's N-D inputs are refused by name; its mode names "linear" and "cubic" are 16's "bilinear"
 * and "bicubic"). */
clrun_status clrun__map_grid_sample(clrun__imp *im, clrun__onode *n)
{
    static const char *const modes[] = {"bilinear", "nearest", "bicubic"};
    static const char *const paddings[] = {"zeros", "border", "reflection"};
    char mode[16], padding[16];
    int64_t align;
    clrun_status s = clrun__need_inputs(im, n, 2);
    if (s == CLRUN_OK)
        s = clrun__oattr_string(im, n, "mode", n->version >= 20 ? "linear" : "bilinear", mode, sizeof mode);
    if (s == CLRUN_OK && n->version >= 20) { /* 20 renamed the modes; the old names are gone */
        if (strcmp(mode, "linear") == 0)
            strcpy(mode, "bilinear");
        else if (strcmp(mode, "cubic") == 0)
            strcpy(mode, "bicubic");
        else if (strcmp(mode, "nearest") != 0)
            return clrun__invalid(im, "mode '%s' is not linear, nearest or cubic (opset 20)", mode);
    }
    if (s == CLRUN_OK)
        s = clrun__oattr_string(im, n, "padding_mode", "zeros", padding, sizeof padding);
    if (s == CLRUN_OK)
        s = clrun__oattr_int(im, n, "align_corners", 0, &align);
    if (s != CLRUN_OK)
        return s;
    int m = 0, p = 0;
    while (m < 3 && strcmp(mode, modes[m]) != 0)
        m++;
    while (p < 3 && strcmp(padding, paddings[p]) != 0)
        p++;
    if (m == 3)
        return clrun__invalid(im, "mode '%s' is not bilinear, nearest or bicubic", mode);
    if (p == 3)
        return clrun__invalid(im, "padding_mode '%s' is not zeros, border or reflection", padding);
    if (align != 0 && align != 1)
        return clrun__invalid(im, "align_corners must be 0 or 1");
    if (n->in[0]->c.rank != 4)
        return clrun__unsupported(im, "GridSample of a rank-%d input is not supported (4-D is)",
                                  n->in[0]->c.rank);
    clrun_attr a[3] = {clrun__mk_int("mode", m), clrun__mk_int("padding_mode", p),
                       clrun__mk_int("align_corners", align)};
    return clrun__emit1(im, n, "grid_sample", n->in, 2, a, 3, 0, NULL);
}

/* RoiAlign (opsets 10, 16): `roi_align`; opset 10 has no coordinate_transformation_mode and
 * behaves as output_half_pixel, 16 defaults to half_pixel. */
clrun_status clrun__map_roi_align(clrun__imp *im, clrun__onode *n)
{
    char mode[8], coords[24];
    int64_t oh, ow, ratio;
    double scale;
    clrun_status s = clrun__need_inputs(im, n, 3);
    if (s == CLRUN_OK)
        s = clrun__oattr_string(im, n, "mode", "avg", mode, sizeof mode);
    if (s == CLRUN_OK && n->version >= 16)
        s = clrun__oattr_string(im, n, "coordinate_transformation_mode", "half_pixel", coords,
                                sizeof coords);
    else
        strcpy(coords, "output_half_pixel");
    if (s == CLRUN_OK)
        s = clrun__oattr_int(im, n, "output_height", 1, &oh);
    if (s == CLRUN_OK)
        s = clrun__oattr_int(im, n, "output_width", 1, &ow);
    if (s == CLRUN_OK)
        s = clrun__oattr_int(im, n, "sampling_ratio", 0, &ratio);
    if (s == CLRUN_OK)
        s = clrun__oattr_float(im, n, "spatial_scale", 1.0, &scale);
    if (s != CLRUN_OK)
        return s;
    bool max = strcmp(mode, "max") == 0, half = strcmp(coords, "half_pixel") == 0;
    if (!max && strcmp(mode, "avg") != 0)
        return clrun__invalid(im, "mode '%s' is not avg or max", mode);
    if (!half && strcmp(coords, "output_half_pixel") != 0)
        return clrun__invalid(im, "coordinate_transformation_mode '%s' is not half_pixel or "
                              "output_half_pixel", coords);
    clrun__value *in[3] = {n->in[0], n->in[1], n->in[2]};
    if (in[2]->c.elem != CLRUN__ONNX_INT64) {
        clrun_attr to = clrun__mk_int("to", CLRUN_I64);
        if ((s = clrun__emit1(im, n, "cast", &in[2], 1, &to, 1, -1, &in[2])) != CLRUN_OK)
            return s;
    }
    clrun_attr a[6] = {clrun__mk_int("mode", max), clrun__mk_int("output_height", oh),
                       clrun__mk_int("output_width", ow), clrun__mk_int("sampling_ratio", ratio),
                       clrun__mk_float("spatial_scale", scale), clrun__mk_int("half_pixel", half)};
    return clrun__emit1(im, n, "roi_align", in, 3, a, 6, 0, NULL);
}

/* ReverseSequence (opset 10): along time_axis, the first sequence_lens[b] elements of each batch
 * entry b reversed, the rest kept: `gather_elements` at index t < len ? len − 1 − t : t, computed
 * on the device from the lengths (`less`, `sub`, `where` over int64) and `expand`ed to x's shape.
 * A length past the time axis reads outside it, which fails the run as gather_elements does. */
clrun_status clrun__map_reverse_sequence(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 2);
    int64_t time_axis, batch_axis;
    if (s == CLRUN_OK)
        s = clrun__oattr_int(im, n, "time_axis", 0, &time_axis);
    if (s == CLRUN_OK)
        s = clrun__oattr_int(im, n, "batch_axis", 1, &batch_axis);
    if (s != CLRUN_OK)
        return s;
    clrun__value *x = n->in[0], *lens = n->in[1];
    int rank = x->c.rank;
    if ((time_axis != 0 && time_axis != 1) || batch_axis != 1 - time_axis)
        return clrun__invalid(im, "time_axis and batch_axis must be 0 and 1, one each");
    if (rank < 2 || lens->c.rank != 1 || lens->c.dims[0] != x->c.dims[batch_axis])
        return clrun__invalid(im, "x must have rank >= 2 and sequence_lens one length per batch entry");
    int64_t tdims[CLRUN__ONNX_MAX_RANK], bdims[CLRUN__ONNX_MAX_RANK], T = x->c.dims[time_axis];
    for (int d = 0; d < rank; d++) {
        tdims[d] = d == time_axis ? T : 1;
        bdims[d] = d == batch_axis ? x->c.dims[batch_axis] : 1;
    }
    clrun__otensor pos;
    if (!clrun__otensor_alloc(&pos, CLRUN__ONNX_INT64, rank, tdims))
        return CLRUN__OOM(im);
    for (int64_t t = 0; t < T; t++)
        clrun__otensor_set_int(&pos, (uint64_t)t, t);
    clrun__value *positions = clrun__const_value(im, &pos), *one = clrun__scalar_value(im, CLRUN__ONNX_INT64, 1, rank);
    if (positions == NULL || one == NULL)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    if (lens->c.elem != CLRUN__ONNX_INT64) {
        clrun_attr to = clrun__mk_int("to", CLRUN_I64);
        if ((s = clrun__emit1(im, n, "cast", &lens, 1, &to, 1, -1, &lens)) != CLRUN_OK)
            return s;
    }
    clrun__value *last = NULL, *rev = NULL, *inside = NULL, *idx = NULL;
    s = clrun__mv_reshape(im, n, lens, rank, bdims, -1, &lens);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "sub", lens, one, -1, &last);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "sub", last, positions, -1, &rev);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "less", positions, lens, -1, &inside);
    clrun__value *w[3] = {inside, rev, positions};
    if (s == CLRUN_OK)
        s = clrun__emit1(im, n, "where", w, 3, NULL, 0, -1, &idx);
    clrun_attr shape = clrun__mk_ints("shape", x->c.dims, rank);
    if (s == CLRUN_OK)
        s = clrun__emit1(im, n, "expand", &idx, 1, &shape, 1, -1, &idx);
    clrun__value *g[2] = {x, idx};
    clrun_attr axis = clrun__mk_int("axis", time_axis);
    return s == CLRUN_OK ? clrun__emit1(im, n, "gather_elements", g, 2, &axis, 1, 0, NULL) : s;
}
