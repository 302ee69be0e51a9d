/* The vision operators: LRN as a composition (x² averaged over a window of channels by a pool),
 * GridSample and RoiAlign onto their graph ops (lib/graph/infer_sample.c). */
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
