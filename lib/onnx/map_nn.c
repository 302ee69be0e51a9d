/* Network operators: MatMul, Gemm, Conv, ConvTranspose, the pools. 1-D
 * convolutions and pools run as 2-D ones of height 1; padding the graph ops cannot express (one
 * side larger than the other) is added explicitly, with zeros for convolutions and -inf for max
 * pools, which gives the same values. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "core/checked.h"
#include "graph/conv_lower.h"
#include "onnx/host_eval.h"
#include "onnx/map.h"

/* ---- MatMul, Gemm ---- */

/* A MatMul with an empty operand, known at load: an empty result when M, N or a batch
 * dimension is 0, else (K = 0) the sums of nothing, zeros. */
static clrun_status empty_matmul(clrun__imp *im, clrun__onode *n, const clrun__value *a, const clrun__value *b)
{
    int ra = a->c.rank, rb = b->c.rank, rank;
    int64_t ka = a->c.dims[ra - 1], kb = rb == 1 ? b->c.dims[0] : b->c.dims[rb - 2];
    int64_t dims[CLRUN__ONNX_MAX_RANK + 2];
    char da[128], db[128];
    if (ka != kb || a->c.elem != b->c.elem ||
        !clrun__broadcast_dims(ra > 2 ? ra - 2 : 0, a->c.dims, rb > 2 ? rb - 2 : 0, b->c.dims, &rank, dims))
        return clrun__invalid(im, "MatMul of %s and %s: the shapes or element types do not fit",
                              clrun__onnx_dims_text(ra, a->c.dims, da, sizeof da),
                              clrun__onnx_dims_text(rb, b->c.dims, db, sizeof db));
    if (ra >= 2)
        dims[rank++] = a->c.dims[ra - 2];
    if (rb >= 2)
        dims[rank++] = b->c.dims[rb - 1];
    if (rank > CLRUN__ONNX_MAX_RANK)
        return clrun__unsupported(im, "MatMul result of rank %d", rank);
    clrun__otensor t; /* zeros, or nothing */
    if (!clrun__otensor_alloc(&t, a->c.elem, rank, dims))
        return clrun__host_result_failed(im, a->c.elem, rank, dims);
    return clrun__mv_const(im, n, &t, 0, NULL);
}

clrun_status clrun__map_matmul(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 2);
    if (s != CLRUN_OK)
        return s;
    clrun__value *a = n->in[0], *b = n->in[1];
    int ra = a->c.rank, rb = b->c.rank;
    if (ra < 1 || rb < 1)
        return clrun__invalid(im, "MatMul inputs need at least one dimension");
    if (clrun__otensor_count(&a->c) == 0 || clrun__otensor_count(&b->c) == 0)
        return empty_matmul(im, n, a, b);
    if (ra >= 2 && rb >= 2)
        return clrun__emit_binary(im, n, "matmul", a, b, 0, NULL);
    /* numpy: a vector a is a row [1, K] whose row is dropped after, a vector b a column [K, 1]. */
    int64_t da[2] = {1, a->c.dims[0]}, db[2] = {b->c.dims[0], 1};
    if (ra == 1 && (s = clrun__mv_reshape(im, n, a, 2, da, -1, &a)) != CLRUN_OK)
        return s;
    if (rb == 1 && (s = clrun__mv_reshape(im, n, b, 2, db, -1, &b)) != CLRUN_OK)
        return s;
    clrun__value *y;
    s = clrun__emit_binary(im, n, "matmul", a, b, -1, &y);
    if (s != CLRUN_OK)
        return s;
    int64_t dims[CLRUN__ONNX_MAX_RANK];
    int rank = 0;
    for (int d = 0; d < y->c.rank; d++) {
        if ((ra == 1 && d == y->c.rank - 2) || (rb == 1 && d == y->c.rank - 1))
            continue;
        dims[rank++] = y->c.dims[d];
    }
    return clrun__mv_reshape(im, n, y, rank, dims, 0, NULL);
}

/* beta·C: scaled on the host when constant, else by the graph's scale. */
static clrun_status scaled_c(clrun__imp *im, clrun__onode *n, double beta, clrun__value **c)
{
    if (beta == 1)
        return CLRUN_OK;
    if (clrun__is_const(*c)) {
        clrun__otensor t;
        if (!clrun__otensor_copy(&t, &(*c)->c))
            return CLRUN__OOM(im);
        for (uint64_t i = 0; i < clrun__otensor_count(&t); i++)
            clrun__otensor_set_real(&t, i, beta * clrun__otensor_get_real(&t, i));
        *c = clrun__const_value(im, &t);
        return *c ? CLRUN_OK : CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    clrun_attr sc = clrun__mk_float("alpha", beta);
    return clrun__emit1(im, n, "scale", c, 1, &sc, 1, -1, c);
}

/* A Gemm with an empty A or B: an empty [M, N] where M or N is 0, else (K = 0) alpha times the
 * sums of nothing, zeros, plus beta·C broadcast to [M, N]. */
static clrun_status empty_gemm(clrun__imp *im, clrun__onode *n, clrun__value *a, clrun__value *b, clrun__value *c,
                               double beta, int64_t ta, int64_t tb)
{
    int64_t dims[2] = {ta ? a->c.dims[1] : a->c.dims[0], tb ? b->c.dims[0] : b->c.dims[1]}, bc[CLRUN__ONNX_MAX_RANK];
    int64_t ka = ta ? a->c.dims[0] : a->c.dims[1], kb = tb ? b->c.dims[1] : b->c.dims[0];
    int rank;
    char da[128], db[128];
    if (ka != kb || a->c.elem != b->c.elem)
        return clrun__invalid(im, "Gemm of %s and %s: the shapes or element types do not fit",
                              clrun__onnx_dims_text(2, a->c.dims, da, sizeof da),
                              clrun__onnx_dims_text(2, b->c.dims, db, sizeof db));
    if (c && (c->c.elem != a->c.elem || !clrun__broadcast_dims(c->c.rank, c->c.dims, 2, dims, &rank, bc) ||
              rank != 2 || bc[0] != dims[0] || bc[1] != dims[1]))
        return clrun__invalid(im, "C %s does not broadcast to [M, N] = %s",
                              clrun__onnx_dims_text(c->c.rank, c->c.dims, da, sizeof da),
                              clrun__onnx_dims_text(2, dims, db, sizeof db));
    if (dims[0] == 0 || dims[1] == 0)
        return clrun__mv_empty(im, n, a->c.elem, 2, dims, 0, NULL);
    if (c == NULL || beta == 0)
        return clrun__mv_fill(im, n, a->c.elem, 0, 2, dims, 0, NULL);
    clrun_status s = scaled_c(im, n, beta, &c);
    return s == CLRUN_OK ? clrun__mv_expand(im, n, c, 2, dims, 0, NULL) : s;
}

clrun_status clrun__map_gemm(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 2);
    double alpha, beta;
    int64_t ta, tb, broadcast = 1;
    if (s == CLRUN_OK)
        s = clrun__oattr_float(im, n, "alpha", 1, &alpha);
    if (s == CLRUN_OK)
        s = clrun__oattr_float(im, n, "beta", 1, &beta);
    if (s == CLRUN_OK)
        s = clrun__oattr_int(im, n, "transA", 0, &ta);
    if (s == CLRUN_OK)
        s = clrun__oattr_int(im, n, "transB", 0, &tb);
    if (s == CLRUN_OK && n->version < 7)
        s = clrun__oattr_int(im, n, "broadcast", 0, &broadcast);
    if (s != CLRUN_OK)
        return s;
    clrun__value *a = n->in[0], *b = n->in[1], *c = n->n_in > 2 ? n->in[2] : NULL;
    if (a->c.rank != 2 || b->c.rank != 2)
        return clrun__invalid(im, "Gemm takes matrices");
    int64_t M = ta ? a->c.dims[1] : a->c.dims[0], N = tb ? b->c.dims[0] : b->c.dims[1];
    if (c && !broadcast && !(c->c.rank == 2 && c->c.dims[0] == M && c->c.dims[1] == N))
        return clrun__invalid(im, "without broadcast, C must be [M, N]");
    if (clrun__otensor_count(&a->c) == 0 || clrun__otensor_count(&b->c) == 0)
        return empty_gemm(im, n, a, b, c, beta, ta, tb);
    clrun_attr at[3] = {clrun__mk_int("transpose_a", ta != 0), clrun__mk_int("transpose_b", tb != 0),
                        clrun__mk_float("alpha", alpha)};
    if (c == NULL || beta == 0)
        return clrun__emit(im, n, "matmul", (clrun__value *[]){a, b}, 2, at, 3, (int[]){0}, 1, NULL);
    /* A [N] or [1, N] C is the matmul's bias. */
    if ((s = scaled_c(im, n, beta, &c)) != CLRUN_OK)
        return s;
    bool row = (c->c.rank == 1 && c->c.dims[0] == N) || (c->c.rank == 2 && c->c.dims[0] == 1 && c->c.dims[1] == N);
    if (row) {
        int64_t dn = N;
        if (c->c.rank == 2 && (s = clrun__mv_reshape(im, n, c, 1, &dn, -1, &c)) != CLRUN_OK)
            return s;
        return clrun__emit(im, n, "matmul", (clrun__value *[]){a, b, c}, 3, at, 3, (int[]){0}, 1, NULL);
    }
    clrun__value *y;
    s = clrun__emit(im, n, "matmul", (clrun__value *[]){a, b}, 2, at, 3, NULL, 1, &y);
    return s == CLRUN_OK ? clrun__emit_binary(im, n, "add", y, c, 0, NULL) : s;
}

/* ---- geometry of convolutions and pools ---- */

typedef clrun__window window;

/* strides, dilations, pads and auto_pad of a node for a given input and kernel extent. */
static clrun_status window_attrs(clrun__imp *im, clrun__onode *n, const clrun__otensor *x, window *w,
                                 bool dilations)
{
    int64_t v[8];
    int count;
    int sp = w->spatial;
    for (int i = 0; i < sp; i++)
        w->stride[i] = w->dilation[i] = 1, w->pad_begin[i] = w->pad_end[i] = 0;
    clrun_status s = clrun__oattr_ints(im, n, "strides", v, 8, &count);
    if (s == CLRUN_OK && count >= 0) {
        if (count != sp)
            return clrun__invalid(im, "strides has %d entries for %d spatial dimensions", count, sp);
        for (int i = 0; i < sp; i++)
            w->stride[i] = v[i];
    }
    if (s == CLRUN_OK && dilations && (s = clrun__oattr_ints(im, n, "dilations", v, 8, &count)) == CLRUN_OK &&
        count >= 0) {
        if (count != sp)
            return clrun__invalid(im, "dilations has %d entries for %d spatial dimensions", count, sp);
        for (int i = 0; i < sp; i++)
            w->dilation[i] = v[i];
    }
    if (s != CLRUN_OK)
        return s;
    for (int i = 0; i < sp; i++)
        if (w->stride[i] < 1 || w->dilation[i] < 1 || w->kernel[i] < 1)
            return clrun__invalid(im, "strides, dilations and kernel sizes must be >= 1");
    /* The window's span and a stride past the input must stay in range for the arithmetic of
     * every output size here and in the graph's type rules. */
    for (int i = 0; i < sp; i++) {
        int64_t span, reach;
        if (!clrun__mul_i64(w->kernel[i] - 1, w->dilation[i], &span) || !clrun__add_i64(span, 1, &span) ||
            !clrun__add_i64(span, x->dims[2 + i], &reach) || !clrun__add_i64(reach, w->stride[i], &reach))
            return clrun__unsupported(im, "kernel %" PRId64 ", dilation %" PRId64 " and stride %" PRId64
                                      " of spatial axis %d are too large", w->kernel[i], w->dilation[i],
                                      w->stride[i], i);
    }
    char pad_mode[16];
    if ((s = clrun__oattr_string(im, n, "auto_pad", "NOTSET", pad_mode, sizeof pad_mode)) != CLRUN_OK)
        return s;
    if ((s = clrun__oattr_ints(im, n, "pads", v, 8, &count)) != CLRUN_OK)
        return s;
    if (strcmp(pad_mode, "NOTSET") == 0) {
        if (count >= 0 && count != 2 * sp)
            return clrun__invalid(im, "pads has %d entries for %d spatial dimensions", count, sp);
        for (int i = 0; count >= 0 && i < sp; i++) {
            w->pad_begin[i] = v[i], w->pad_end[i] = v[i + sp];
            if (v[i] < 0 || v[i + sp] < 0)
                return clrun__invalid(im, "negative pads");
            int64_t reach = (w->kernel[i] - 1) * w->dilation[i] + 1 + x->dims[2 + i] + w->stride[i];
            if (!clrun__add_i64(reach, v[i], &reach) || !clrun__add_i64(reach, v[i + sp], &reach))
                return clrun__unsupported(im, "pads %" PRId64 " and %" PRId64 " of spatial axis %d are too large",
                                          v[i], v[i + sp], i);
        }
    } else if (strcmp(pad_mode, "SAME_UPPER") == 0 || strcmp(pad_mode, "SAME_LOWER") == 0) {
        /* The output is ceil(in / stride); the padding it needs, the odd one at the end (UPPER)
         * or the beginning (LOWER). */
        for (int i = 0; i < sp; i++) {
            int64_t in = x->dims[2 + i], out = (in + w->stride[i] - 1) / w->stride[i];
            int64_t span = (w->kernel[i] - 1) * w->dilation[i] + 1;
            int64_t total = (out - 1) * w->stride[i] + span - in;
            total = total < 0 ? 0 : total;
            w->pad_begin[i] = pad_mode[5] == 'U' ? total / 2 : total - total / 2;
            w->pad_end[i] = total - w->pad_begin[i];
        }
    } else if (strcmp(pad_mode, "VALID") != 0) {
        return clrun__invalid(im, "auto_pad '%s' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID", pad_mode);
    }
    return CLRUN_OK;
}

/* A [N, C, W] value as [N, C, 1, W] (and back), for 1-D windows. */
static clrun_status as_image(clrun__imp *im, clrun__onode *n, clrun__value *x, clrun__value **r)
{
    int64_t dims[4] = {x->c.dims[0], x->c.dims[1], 1, x->c.dims[2]};
    return clrun__mv_reshape(im, n, x, 4, dims, -1, r);
}

/* x [N, C, H, W] padded explicitly by what the symmetric padding leaves over (pad_end beyond
 * pad_begin or the reverse); w's pads then become symmetric. */
static clrun_status pad_extra(clrun__imp *im, clrun__onode *n, clrun__value *x, window *w, double value,
                              int64_t *sym, clrun__value **r)
{
    *r = x;
    for (int i = 0; i < 2; i++) {
        int64_t lo = w->pad_begin[i] < w->pad_end[i] ? w->pad_begin[i] : w->pad_end[i];
        sym[i] = lo;
        int64_t before = w->pad_begin[i] - lo, after = w->pad_end[i] - lo;
        if (before == 0 && after == 0)
            continue;
        clrun_status s = clrun__pad_axis(im, n, *r, 2 + i, before, after, "constant", value, -1, r);
        if (s != CLRUN_OK)
            return s;
    }
    return CLRUN_OK;
}

/* The kernel extents from W [M, C/g, k...] or kernel_shape. */
static clrun_status kernel_of(clrun__imp *im, clrun__onode *n, const clrun__otensor *wt, window *w)
{
    int64_t v[8];
    int count;
    clrun_status s = clrun__oattr_ints(im, n, "kernel_shape", v, 8, &count);
    if (s != CLRUN_OK)
        return s;
    for (int i = 0; i < w->spatial; i++) {
        int64_t k = wt ? wt->dims[2 + i] : (count > i ? v[i] : 0);
        if (count >= 0 && (count != w->spatial || v[i] != k))
            return clrun__invalid(im, "kernel_shape does not match the %s", wt ? "weights" : "rank");
        w->kernel[i] = k;
    }
    return CLRUN_OK;
}

/* The last step of a windowed op: back to [N, C, W] for 1-D. */
static clrun_status finish_window(clrun__imp *im, clrun__onode *n, const window *w, clrun__value *y)
{
    if (w->spatial == 2)
        return clrun__define_alias(im, n, 0, y);
    int64_t dims[3] = {y->c.dims[0], y->c.dims[1], y->c.dims[3]};
    return clrun__mv_reshape(im, n, y, 3, dims, 0, NULL);
}

static clrun_status spatial_of(clrun__imp *im, const clrun__value *x, int *spatial)
{
    if (x->c.rank < 3 || x->c.rank > 5)
        return clrun__unsupported(im, "%d-D windows are not supported (1-D, 2-D and 3-D are)", x->c.rank - 2);
    *spatial = x->c.rank - 2;
    return CLRUN_OK;
}

/* The 2-D view of a 1-D window: height 1. */
static void as_2d(window *w)
{
    w->kernel[1] = w->kernel[0], w->kernel[0] = 1;
    w->stride[1] = w->stride[0], w->stride[0] = 1;
    w->dilation[1] = w->dilation[0], w->dilation[0] = 1;
    w->pad_begin[1] = w->pad_begin[0], w->pad_begin[0] = 0;
    w->pad_end[1] = w->pad_end[0], w->pad_end[0] = 0;
}

/* ---- Conv ---- */

clrun_status clrun__conv2d_core(clrun__imp *im, clrun__onode *n, clrun__value *x, clrun__value *wt,
                                clrun__value *bias, const clrun__window *w2, int out, clrun__value **r)
{
    /* Asymmetric pads as the op's 'pads' where this build has them, else the extra side padded
     * with zeros explicitly. */
    window w = *w2;
    int64_t sym[2], pads[4] = {w.pad_begin[0], w.pad_begin[1], w.pad_end[0], w.pad_end[1]};
    clrun__value *in[3] = {x, wt, bias};
    clrun_attr at[4] = {clrun__mk_ints("stride", w.stride, 2), clrun__mk_ints("pads", pads, 4),
                        clrun__mk_ints("dilation", w.dilation, 2), clrun__mk_int("groups", w.group)};
    bool symmetric = pads[0] == pads[2] && pads[1] == pads[3];
    if (symmetric || !clrun__op_accepts("conv2d", in, bias ? 3 : 2, at, 4)) {
        clrun_status s = pad_extra(im, n, x, &w, 0, sym, &in[0]);
        if (s != CLRUN_OK)
            return s;
        at[1] = clrun__mk_ints("pad", sym, 2);
    }
    return clrun__emit(im, n, "conv2d", in, bias ? 3 : 2, at, 4, &out, 1, r);
}

/* What Conv and ConvTranspose check first: X and W (B optional), X's spatial rank into
 * w->spatial, and W of X's rank. */
static clrun_status conv_operands(clrun__imp *im, clrun__onode *n, window *w)
{
    clrun_status s = clrun__need_inputs(im, n, 2);
    if (s == CLRUN_OK)
        s = spatial_of(im, n->in[0], &w->spatial);
    if (s != CLRUN_OK)
        return s;
    const clrun__otensor *x = &n->in[0]->c, *wt = &n->in[1]->c;
    if (wt->rank != x->rank)
        return clrun__invalid(im, "W has rank %d for an input of rank %d", wt->rank, x->rank);
    return CLRUN_OK;
}

/* The output [N, M, spatial...] of a convolution (transposed or not) where no tap reaches an
 * element of X: empty where a dimension is 0, else the bias per channel broadcast, or zeros. */
static clrun_status sums_of_nothing(clrun__imp *im, clrun__onode *n, int elem, int rank, const int64_t *dims,
                                    clrun__value *bias)
{
    char db[128];
    bool none = false;
    for (int d = 0; d < rank; d++)
        none = none || dims[d] == 0;
    if (none)
        return clrun__mv_empty(im, n, elem, rank, dims, 0, NULL);
    if (bias == NULL)
        return clrun__mv_fill(im, n, elem, 0, rank, dims, 0, NULL);
    if (bias->c.rank != 1 || bias->c.dims[0] != dims[1] || bias->c.elem != elem)
        return clrun__invalid(im, "B %s is not one value per output channel (%" PRId64 ")",
                              clrun__onnx_dims_text(bias->c.rank, bias->c.dims, db, sizeof db), dims[1]);
    int64_t column[CLRUN__ONNX_MAX_RANK];
    for (int d = 0; d < rank - 1; d++)
        column[d] = d == 0 ? dims[1] : 1;
    clrun_status s = clrun__mv_reshape(im, n, bias, rank - 1, column, -1, &bias);
    return s == CLRUN_OK ? clrun__mv_expand(im, n, bias, rank, dims, 0, NULL) : s;
}

/* A Conv whose X or W is empty, its window checked. Its result is empty where N or M is 0;
 * else each output sums nothing (an empty channel axis, or windows over the padding of an
 * empty image alone): the bias per channel, or zeros. */
static clrun_status empty_conv(clrun__imp *im, clrun__onode *n, clrun__value *x, clrun__value *wt, clrun__value *bias,
                               const window *w)
{
    const clrun__otensor *xc = &x->c, *wc = &wt->c;
    int rank = xc->rank;
    int64_t dims[CLRUN__ONNX_MAX_RANK];
    char dx[128], dw[128];
    int64_t channels;
    if (w->group < 1 || xc->elem != wc->elem || !clrun__mul_i64(wc->dims[1], w->group, &channels) ||
        channels != xc->dims[1] || wc->dims[0] % w->group)
        return clrun__invalid(im, "Conv of X %s and W %s in %" PRId64 " groups: the channels or element types do "
                              "not fit", clrun__onnx_dims_text(rank, xc->dims, dx, sizeof dx),
                              clrun__onnx_dims_text(wc->rank, wc->dims, dw, sizeof dw), w->group);
    char mode[16];
    clrun_status s = clrun__oattr_string(im, n, "auto_pad", "NOTSET", mode, sizeof mode);
    if (s != CLRUN_OK)
        return s;
    dims[0] = xc->dims[0];
    dims[1] = wc->dims[0];
    for (int i = 0; i < w->spatial; i++) {
        int64_t span = (w->kernel[i] - 1) * w->dilation[i] + 1; /* in range: window_attrs */
        int64_t room = xc->dims[2 + i] + w->pad_begin[i] + w->pad_end[i] - span;
        if (strncmp(mode, "SAME_", 5) == 0) /* ceil(in / stride): none for an empty axis */
            dims[2 + i] = (xc->dims[2 + i] + w->stride[i] - 1) / w->stride[i];
        else if (room < 0)
            return clrun__invalid(im, "the window of %" PRId64 " on spatial axis %d is larger than the padded "
                                  "input %s", span, i, clrun__onnx_dims_text(rank, xc->dims, dx, sizeof dx));
        else
            dims[2 + i] = room / w->stride[i] + 1;
    }
    return sums_of_nothing(im, n, xc->elem, rank, dims, bias);
}

clrun_status clrun__map_conv(clrun__imp *im, clrun__onode *n)
{
    window w = {0};
    clrun_status s = conv_operands(im, n, &w);
    if (s != CLRUN_OK)
        return s;
    clrun__value *x = n->in[0], *wt = n->in[1], *bias = n->n_in > 2 ? n->in[2] : NULL, *y;
    s = kernel_of(im, n, &wt->c, &w);
    if (s == CLRUN_OK)
        s = window_attrs(im, n, &x->c, &w, true);
    if (s == CLRUN_OK)
        s = clrun__oattr_int(im, n, "group", 1, &w.group);
    if (s != CLRUN_OK)
        return s;
    if (clrun__otensor_count(&x->c) == 0 || clrun__otensor_count(&wt->c) == 0)
        return empty_conv(im, n, x, wt, bias, &w);
    if (w.spatial == 3)
        return clrun__conv3d(im, n, x, wt, bias, &w);
    if (w.spatial == 2)
        return clrun__conv2d_core(im, n, x, wt, bias, &w, 0, NULL);
    s = as_image(im, n, x, &x);
    if (s == CLRUN_OK)
        s = as_image(im, n, wt, &wt);
    if (s != CLRUN_OK)
        return s;
    as_2d(&w);
    s = clrun__conv2d_core(im, n, x, wt, bias, &w, -1, &y);
    w.spatial = 1;
    return s == CLRUN_OK ? finish_window(im, n, &w, y) : s;
}

/* ---- ConvTranspose ---- */

/* ONNX's padding of ConvTranspose for one axis: from output_shape or auto_pad (total padding
 * split by SAME_UPPER, else the larger half first, halves rounded down as ONNX's reference
 * does), or the pads as given. An output_shape beyond the full transposed convolution (a
 * negative total) pads at the end: output padding, rows no tap reaches (bias alone); *out_pad
 * grows by it. */
static clrun_status transpose_pads(clrun__imp *im, const char *mode, int64_t in, int64_t k, int64_t stride,
                                   int64_t dilation, int64_t *out_pad, int64_t wanted, int64_t *begin, int64_t *end)
{
    bool same = strncmp(mode, "SAME_", 5) == 0;
    if (strcmp(mode, "VALID") == 0) {
        *begin = *end = 0;
        return CLRUN_OK;
    }
    if (wanted < 0 && !same)
        return CLRUN_OK; /* the pads as given */
    if (*out_pad < 0)
        return clrun__invalid(im, "output_padding %" PRId64 " is negative", *out_pad);
    int64_t full, total; /* the full output: stride * (in - 1) + out_pad + (k - 1) * dilation + 1 */
    if (!clrun__mul_i64(stride, in - 1, &full) || !clrun__add_i64(full, *out_pad, &full) ||
        !clrun__add_i64(full, (k - 1) * dilation + 1, &full) || (wanted < 0 && !clrun__mul_i64(in, stride, &wanted)))
        return clrun__unsupported(im, "strides, output_padding and the kernel make an output larger than "
                                  "2^63 - 1");
    total = full - wanted; /* both >= 0 */
    int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2); /* floor(total / 2) */
    bool upper = strcmp(mode, "SAME_UPPER") == 0;
    *begin = upper ? half : total - half;
    *end = total - *begin;
    if (*begin < 0)
        return clrun__unsupported(im, "an output starting before the full transposed convolution (padding %"
                                  PRId64 ")", total);
    if (*end < 0) {
        *out_pad -= *end;
        *end = 0;
    }
    return CLRUN_OK;
}

/* The importer's way to add a node for lib/graph/conv_lower.c: handles index the values made. */
typedef struct value_emitter {
    clrun__imp *im;
    clrun__onode *n;
    clrun__value *values[8];
    int32_t count;
    clrun_status status; /* of the emit that failed */
    int col2im_out;      /* where col2im, the lowering's last node, writes: an output or -1 */
} value_emitter;

static int32_t value_emit(void *self, const char *op, const int32_t *inputs, int input_count,
                          const clrun_attr *attrs, int attr_count)
{
    value_emitter *e = self;
    clrun__value *in[4];
    if (e->status == CLRUN_OK && (e->count == 8 || input_count > 4))
        e->status = clrun__unsupported(e->im, "the lowering of %s emits more than this importer holds", e->n->op);
    if (e->status != CLRUN_OK)
        return -1;
    for (int i = 0; i < input_count; i++)
        in[i] = e->values[inputs[i]];
    int out = strcmp(op, "col2im") == 0 ? e->col2im_out : -1;
    e->status = clrun__emit(e->im, e->n, op, in, input_count, attrs, attr_count, &out, 1,
                            &e->values[e->count]);
    if (e->status != CLRUN_OK)
        return -1;
    return e->count++;
}

/* ConvTranspose on float images as a matrix product (one per group) and col2im
 * (lib/graph/conv_lower.c), then the bias added per channel: *y the 4-D result, into output
 * `out` of the node (0) or a temporary (-1), or NULL (and nothing emitted) where that form does
 * not apply, for conv_transpose2d to take. x and wt are 4-D; out_pad the output padding, w's
 * pads the (final) padding. */
static clrun_status transpose_as_product(clrun__imp *im, clrun__onode *n, clrun__value *x, clrun__value *wt,
                                         clrun__value *bias, const window *w, const int64_t *out_pad,
                                         int out, clrun__value **y)
{
    *y = NULL;
    if (w->group < 1 || x->c.dims[1] % w->group || x->c.elem != CLRUN__ONNX_FLOAT || wt->c.elem != CLRUN__ONNX_FLOAT ||
        (bias && bias->c.elem != CLRUN__ONNX_FLOAT) || x->c.rank != 4 || wt->c.rank != 4 ||
        wt->c.dims[0] != x->c.dims[1] || (bias && (bias->c.rank != 1 || bias->c.dims[0] != wt->c.dims[1] * w->group)))
        return CLRUN_OK; /* conv_transpose2d's type rule says why */
    clrun__conv_geometry g = {.groups = w->group};
    for (int i = 0; i < 2; i++) {
        g.stride[i] = w->stride[i], g.dilation[i] = w->dilation[i];
        g.pad[i] = w->pad_begin[i], g.pad_end[i] = w->pad_end[i];
        g.output_padding[i] = out_pad[i];
        if (w->stride[i] < 1 || w->dilation[i] < 1 || x->c.dims[2 + i] < 1 || w->pad_begin[i] < 0 ||
            w->pad_begin[i] > INT32_MAX || w->pad_end[i] < 0 || w->pad_end[i] > INT32_MAX ||
            out_pad[i] < 0 || out_pad[i] > INT32_MAX)
            return CLRUN_OK; /* conv_transpose2d's type rule says why */
        /* stride (in - 1) + dilation (k - 1) + 1 + output padding - pads */
        int64_t grown, span, extent;
        if (!clrun__mul_i64(w->stride[i], x->c.dims[2 + i] - 1, &grown) ||
            !clrun__mul_i64(w->dilation[i], wt->c.dims[2 + i] - 1, &span) || !clrun__add_i64(grown, span, &extent) ||
            !clrun__add_i64(extent, 1 + out_pad[i] - w->pad_begin[i] - w->pad_end[i], &extent) || extent < 1)
            return CLRUN_OK;
        *(i == 0 ? &g.oh : &g.ow) = extent;
    }
    clrun_tensor_type tx = {CLRUN_F32, 4, {0}}, tw = {CLRUN_F32, 4, {0}};
    memcpy(tx.shape, x->c.dims, 4 * sizeof *tx.shape);
    memcpy(tw.shape, wt->c.dims, 4 * sizeof *tw.shape);
    value_emitter ve = {im, n, {x, wt}, 2, CLRUN_OK, bias ? -1 : out};
    const clrun__emitter e = {&ve, value_emit};
    int32_t r = clrun__lower_conv_transpose(&e, &tx, &tw, &g, 0, 1);
    if (r == -2)
        return CLRUN_OK;
    if (r < 0)
        return ve.status; /* the importer has the reason */
    *y = ve.values[r];
    if (bias == NULL)
        return CLRUN_OK;
    int64_t per_channel[3] = {bias->c.dims[0], 1, 1};
    clrun__value *b3;
    clrun_status s = clrun__mv_reshape(im, n, bias, 3, per_channel, -1, &b3);
    return s == CLRUN_OK ? clrun__emit_binary(im, n, "add", *y, b3, out, y) : s;
}

clrun_status clrun__conv_transpose2d_core(clrun__imp *im, clrun__onode *n, clrun__value *x, clrun__value *wt,
                                          clrun__value *bias, const clrun__window *w, const int64_t *out_pad,
                                          int out, clrun__value **y)
{
    int64_t pads[4] = {w->pad_begin[0], w->pad_begin[1], w->pad_end[0], w->pad_end[1]};
    int64_t stride[2] = {w->stride[0], w->stride[1]}, dilation[2] = {w->dilation[0], w->dilation[1]};
    int64_t padding[2] = {out_pad[0], out_pad[1]};
    clrun_status s = transpose_as_product(im, n, x, wt, bias, w, out_pad, out, y);
    if (s != CLRUN_OK || *y != NULL)
        return s;
    clrun_attr at[5] = {clrun__mk_ints("stride", stride, 2), clrun__mk_ints("pads", pads, 4),
                        clrun__mk_ints("dilation", dilation, 2), clrun__mk_int("groups", w->group),
                        clrun__mk_ints("output_padding", padding, 2)};
    if (pads[0] == pads[2] && pads[1] == pads[3])
        at[1] = clrun__mk_ints("pad", pads, 2);
    clrun__value *in[3] = {x, wt, bias};
    return clrun__emit(im, n, "conv_transpose2d", in, bias ? 3 : 2, at, 5, &out, 1, y);
}

/* A ConvTranspose whose X or W is empty, its padding final: no tap reaches an output (an empty
 * image, or an empty channel axis), so each is its channel's bias, or 0. */
static clrun_status empty_conv_transpose(clrun__imp *im, clrun__onode *n, clrun__value *x, clrun__value *wt,
                                         clrun__value *bias, const window *w, const int64_t *out_pad)
{
    const clrun__otensor *xc = &x->c, *wc = &wt->c;
    int rank = xc->rank;
    int64_t dims[CLRUN__ONNX_MAX_RANK];
    char dx[128], dw[128];
    if (w->group < 1 || xc->elem != wc->elem || wc->dims[0] != xc->dims[1] || xc->dims[1] % w->group ||
        !clrun__mul_i64(wc->dims[1], w->group, &dims[1]))
        return clrun__invalid(im, "ConvTranspose of X %s and W %s in %" PRId64 " groups: the channels or element "
                              "types do not fit", clrun__onnx_dims_text(rank, xc->dims, dx, sizeof dx),
                              clrun__onnx_dims_text(wc->rank, wc->dims, dw, sizeof dw), w->group);
    dims[0] = xc->dims[0];
    for (int i = 0; i < w->spatial; i++) { /* stride·(in − 1) + output_padding + span − pads */
        int64_t out;
        if (!clrun__mul_i64(w->stride[i], xc->dims[2 + i] - 1, &out) || !clrun__add_i64(out, out_pad[i], &out) ||
            !clrun__add_i64(out, (w->kernel[i] - 1) * w->dilation[i] + 1, &out) ||
            !clrun__add_i64(out, -w->pad_begin[i], &out) || !clrun__add_i64(out, -w->pad_end[i], &out))
            return clrun__unsupported(im, "an output of spatial axis %d beyond 2^63 - 1", i);
        if (out < 0)
            return clrun__invalid(im, "the output of spatial axis %d has %" PRId64 " elements", i, out);
        dims[2 + i] = out;
    }
    return sums_of_nothing(im, n, xc->elem, rank, dims, bias);
}

clrun_status clrun__map_conv_transpose(clrun__imp *im, clrun__onode *n)
{
    window w = {0};
    clrun_status s = conv_operands(im, n, &w);
    if (s != CLRUN_OK)
        return s;
    clrun__value *x = n->in[0], *wt = n->in[1], *bias = n->n_in > 2 ? n->in[2] : NULL;
    int sp = w.spatial, count, shape_count;
    int64_t v[8], out_pad[3] = {0, 0, 0}, out_shape[8];
    char mode[16];
    s = kernel_of(im, n, &wt->c, &w);
    if (s == CLRUN_OK)
        s = clrun__oattr_int(im, n, "group", 1, &w.group);
    if (s == CLRUN_OK)
        s = clrun__oattr_string(im, n, "auto_pad", "NOTSET", mode, sizeof mode);
    if (s == CLRUN_OK)
        s = clrun__oattr_ints(im, n, "output_shape", out_shape, 8, &shape_count);
    if (s == CLRUN_OK && (s = clrun__oattr_ints(im, n, "output_padding", v, 8, &count)) == CLRUN_OK &&
        count >= 0) {
        if (count != sp)
            return clrun__invalid(im, "output_padding has %d entries", count);
        for (int i = 0; i < sp; i++)
            out_pad[i] = v[i];
    }
    if (s == CLRUN_OK) { /* strides, dilations, explicit pads (auto_pad is ConvTranspose's own) */
        window plain = w;
        s = window_attrs(im, n, &x->c, &plain, true);
        memcpy(w.stride, plain.stride, sizeof w.stride);
        memcpy(w.dilation, plain.dilation, sizeof w.dilation);
        if (strcmp(mode, "NOTSET") == 0) {
            memcpy(w.pad_begin, plain.pad_begin, sizeof w.pad_begin);
            memcpy(w.pad_end, plain.pad_end, sizeof w.pad_end);
        }
    }
    if (s == CLRUN_OK && shape_count >= 0 && shape_count != sp && shape_count != sp + 2)
        return clrun__invalid(im, "output_shape has %d entries", shape_count);
    for (int i = 0; s == CLRUN_OK && i < sp; i++) {
        int64_t wanted = shape_count >= 0 ? out_shape[shape_count - sp + i] : -1;
        s = transpose_pads(im, mode, x->c.dims[2 + i], w.kernel[i], w.stride[i], w.dilation[i], &out_pad[i],
                           wanted, &w.pad_begin[i], &w.pad_end[i]);
    }
    if (s != CLRUN_OK)
        return s;
    if (clrun__otensor_count(&x->c) == 0 || clrun__otensor_count(&wt->c) == 0)
        return empty_conv_transpose(im, n, x, wt, bias, &w, out_pad);
    if (sp == 3)
        return clrun__conv_transpose3d(im, n, x, wt, bias, &w, out_pad);
    if (sp == 1) {
        s = as_image(im, n, x, &x);
        if (s == CLRUN_OK)
            s = as_image(im, n, wt, &wt);
        if (s != CLRUN_OK)
            return s;
        as_2d(&w);
        out_pad[1] = out_pad[0], out_pad[0] = 0;
    }
    clrun__value *y = NULL;
    s = clrun__conv_transpose2d_core(im, n, x, wt, bias, &w, out_pad, sp == 2 ? 0 : -1, &y);
    if (s != CLRUN_OK || sp == 2)
        return s;
    return finish_window(im, n, &w, y);
}

/* ---- Col2Im ---- */

/* input [N, C*KH*KW, L], image_shape [H, W] and block_shape [KH, KW] constant: the graph's col2im,
 * whose type rule checks L and the channels. 2-D only. */
clrun_status clrun__map_col2im(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 3);
    int64_t image[8], block[8], strides[8], dilations[8], pads[8];
    int image_count, block_count, count[3];
    if (s == CLRUN_OK)
        s = clrun__const_ints(im, n, 1, false, image, 8, &image_count);
    if (s == CLRUN_OK)
        s = clrun__const_ints(im, n, 2, false, block, 8, &block_count);
    if (s == CLRUN_OK)
        s = clrun__oattr_ints(im, n, "strides", strides, 8, &count[0]);
    if (s == CLRUN_OK)
        s = clrun__oattr_ints(im, n, "dilations", dilations, 8, &count[1]);
    if (s == CLRUN_OK)
        s = clrun__oattr_ints(im, n, "pads", pads, 8, &count[2]);
    if (s != CLRUN_OK)
        return s;
    if (image_count != block_count)
        return clrun__invalid(im, "image_shape has %d entries, block_shape %d", image_count, block_count);
    if (image_count != 2)
        return clrun__unsupported(im, "%d-D Col2Im is not supported (2-D is)", image_count);
    if ((count[0] >= 0 && count[0] != 2) || (count[1] >= 0 && count[1] != 2) ||
        (count[2] >= 0 && count[2] != 4))
        return clrun__invalid(im, "strides, dilations and pads need 2, 2 and 4 entries for a 2-D image");
    if (n->in[0]->c.rank != 3)
        return clrun__invalid(im, "input has rank %d: expected [N, C * prod(block_shape), L]",
                              n->in[0]->c.rank);
    clrun_attr at[5] = {clrun__mk_ints("image", image, 2), clrun__mk_ints("kernel", block, 2)};
    int na = 2;
    if (count[0] >= 0)
        at[na++] = clrun__mk_ints("stride", strides, 2);
    if (count[1] >= 0)
        at[na++] = clrun__mk_ints("dilation", dilations, 2);
    if (count[2] >= 0)
        at[na++] = clrun__mk_ints("pads", pads, 4);
    return clrun__emit1(im, n, "col2im", &n->in[0], 1, at, na, 0, NULL);
}

/* ---- MaxPool, AveragePool ---- */

/* AveragePool-19 with dilations: a depthwise conv2d of ones over the dilated window, divided by
 * the taps; exact where every window counts all its taps (no pads, or count_include_pad). */
static clrun_status dilated_average(clrun__imp *im, clrun__onode *n, clrun__value *x, const window *w,
                                    bool include_pad)
{
    bool padded = false;
    for (int i = 0; i < w->spatial; i++)
        padded = padded || w->pad_begin[i] || w->pad_end[i];
    if (w->spatial == 3 || w->ceil_mode || (padded && !include_pad))
        return clrun__unsupported(im, "dilations other than 1 for AveragePool are supported in 1-D and 2-D, "
                                  "without ceil_mode, and with pads only when count_include_pad=1");
    window w2 = *w;
    clrun__value *img = x, *y;
    clrun_status s = CLRUN_OK;
    if (w->spatial == 1) {
        if ((s = as_image(im, n, x, &img)) != CLRUN_OK)
            return s;
        as_2d(&w2);
    }
    int64_t channels = img->c.dims[1], dims[4] = {channels, 1, w2.kernel[0], w2.kernel[1]};
    clrun__otensor t;
    if (!clrun__otensor_alloc(&t, x->c.elem, 4, dims))
        return clrun__host_result_failed(im, x->c.elem, 4, dims);
    for (uint64_t i = 0; i < clrun__otensor_count(&t); i++)
        clrun__otensor_set_real(&t, i, 1);
    clrun__value *ones = clrun__const_value(im, &t);
    clrun__value *taps = ones ? clrun__scalar_value(im, x->c.elem, (double)(w2.kernel[0] * w2.kernel[1]), 0) : NULL;
    if (taps == NULL)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    w2.group = channels;
    s = clrun__conv2d_core(im, n, img, ones, NULL, &w2, -1, &y);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "div", y, taps, -1, &y);
    w2.spatial = w->spatial;
    return s == CLRUN_OK ? finish_window(im, n, &w2, y) : s;
}

/* MaxPool of int8 or uint8 (opset 12): f32 holds every such value exactly, and a maximum
 * picks one of its inputs, so the f32 pool between two casts gives the exact integers. */
static clrun_status integer_max_pool(clrun__imp *im, clrun__onode *n, clrun__value *x, const window *w)
{
    window w2 = *w;
    clrun_dtype back;
    if (!clrun__onnx_elem_dtype(x->c.elem, &back) || w->spatial == 3)
        return clrun__unsupported(im, "MaxPool of int8 or uint8 is supported in 1-D and 2-D");
    clrun_attr to = clrun__mk_int("to", (int64_t)CLRUN_F32), from = clrun__mk_int("to", (int64_t)back);
    clrun__value *y;
    clrun_status s = clrun__emit1(im, n, "cast", &x, 1, &to, 1, -1, &x);
    if (s == CLRUN_OK && w2.spatial == 1 && (s = as_image(im, n, x, &x)) == CLRUN_OK)
        as_2d(&w2);
    if (s == CLRUN_OK)
        s = clrun__pool2d_core(im, n, x, &w2, true, false, -1, &y);
    if (s == CLRUN_OK && w->spatial == 1) {
        int64_t dims[3] = {y->c.dims[0], y->c.dims[1], y->c.dims[3]};
        s = clrun__mv_reshape(im, n, y, 3, dims, -1, &y);
    }
    return s == CLRUN_OK ? clrun__emit1(im, n, "cast", &y, 1, &from, 1, 0, NULL) : s;
}

clrun_status clrun__map_pool(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 1);
    window w = {0};
    if (s == CLRUN_OK)
        s = spatial_of(im, n->in[0], &w.spatial);
    if (s != CLRUN_OK)
        return s;
    bool max = strcmp(n->op, "MaxPool") == 0;
    clrun__value *x = n->in[0];
    int64_t ceil_mode = 0, include_pad = 0, storage = 0;
    s = kernel_of(im, n, NULL, &w);
    if (s == CLRUN_OK && w.kernel[0] == 0)
        s = clrun__invalid(im, "kernel_shape is required");
    if (s == CLRUN_OK)
        s = window_attrs(im, n, &x->c, &w, max ? n->version >= 10 : n->version >= 19);
    if (s == CLRUN_OK && n->version >= 10)
        s = clrun__oattr_int(im, n, "ceil_mode", 0, &ceil_mode);
    if (s == CLRUN_OK && !max && n->version >= 7)
        s = clrun__oattr_int(im, n, "count_include_pad", 0, &include_pad);
    if (s == CLRUN_OK && max && n->version >= 8)
        s = clrun__oattr_int(im, n, "storage_order", 0, &storage);
    if (s != CLRUN_OK)
        return s;
    w.ceil_mode = ceil_mode != 0;
    for (int i = 0; !max && i < w.spatial; i++) /* AveragePool's dilations (opset 19) */
        if (w.dilation[i] != 1)
            return dilated_average(im, n, x, &w, include_pad != 0);
    if (max && clrun__out(im, n, 1))
        return clrun__maxpool_indices(im, n, x, &w, storage);
    if (max && (x->c.elem == CLRUN__ONNX_UINT8 || x->c.elem == CLRUN__ONNX_INT8))
        return integer_max_pool(im, n, x, &w);
    if (w.spatial == 3)
        return clrun__pool3d(im, n, x, &w, max, include_pad != 0);
    if (w.spatial == 2)
        return clrun__pool2d_core(im, n, x, &w, max, include_pad != 0, 0, NULL);
    clrun__value *y;
    if ((s = as_image(im, n, x, &x)) != CLRUN_OK)
        return s;
    as_2d(&w);
    s = clrun__pool2d_core(im, n, x, &w, max, include_pad != 0, -1, &y);
    w.spatial = 1;
    return s == CLRUN_OK ? finish_window(im, n, &w, y) : s;
}

/* AveragePool without count_include_pad whose pads the op does not take (asymmetric, or more
 * than half the window): the mean over the whole window of the input padded with zeros, times a
 * constant per output position, its window's taps over the taps inside the input. A window
 * entirely in the padding has no mean and is refused. */
static clrun_status padded_average(clrun__imp *im, clrun__onode *n, clrun__value *x, const window *w, int out,
                                   clrun__value **r)
{
    int64_t outs[2], dims[4] = {1, 1, 0, 0}, none[2] = {0, 0};
    if (w->dilation[0] != 1 || w->dilation[1] != 1)
        return clrun__unsupported(im, "AveragePool with dilations and pads beyond half the window without "
                                  "count_include_pad is not supported");
    for (int i = 0; i < 2; i++) {
        int64_t room = x->c.dims[2 + i] + w->pad_begin[i] + w->pad_end[i] - w->kernel[i];
        outs[i] = room < 0 ? 0 : room / w->stride[i] + 1;
        dims[2 + i] = outs[i];
    }
    clrun__otensor t;
    if (!clrun__otensor_alloc(&t, x->c.elem, 4, dims))
        return clrun__host_result_failed(im, x->c.elem, 4, dims);
    double taps = (double)(w->kernel[0] * w->kernel[1]);
    for (int64_t oy = 0; oy < outs[0]; oy++)
        for (int64_t ox = 0; ox < outs[1]; ox++) {
            int64_t inside = 1, at[2] = {oy, ox};
            for (int i = 0; i < 2; i++) {
                int64_t lo = at[i] * w->stride[i] - w->pad_begin[i], hi = lo + w->kernel[i];
                lo = lo < 0 ? 0 : lo;
                hi = hi > x->c.dims[2 + i] ? x->c.dims[2 + i] : hi;
                inside *= hi > lo ? hi - lo : 0;
            }
            if (inside == 0) {
                clrun__otensor_free(&t);
                return clrun__unsupported(im, "an AveragePool window at output (%" PRId64 ", %" PRId64 ") lies "
                                          "entirely in the padding", oy, ox);
            }
            clrun__otensor_set_real(&t, (uint64_t)(oy * outs[1] + ox), taps / (double)inside);
        }
    clrun__value *scale = clrun__const_value(im, &t), *y;
    if (!scale)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    clrun_status s = CLRUN_OK;
    for (int i = 0; i < 2 && s == CLRUN_OK; i++)
        if (w->pad_begin[i] || w->pad_end[i])
            s = clrun__pad_axis(im, n, x, 2 + i, w->pad_begin[i], w->pad_end[i], "constant", 0, -1, &x);
    clrun_attr at[3] = {clrun__mk_ints("kernel", w->kernel, 2), clrun__mk_ints("stride", w->stride, 2),
                        clrun__mk_ints("pad", none, 2)};
    if (s == CLRUN_OK)
        s = clrun__emit1(im, n, "avgpool2d", &x, 1, at, 3, -1, &y);
    return s == CLRUN_OK ? clrun__emit_binary(im, n, "mul", y, scale, out, r) : s;
}

clrun_status clrun__pool2d_core(clrun__imp *im, clrun__onode *n, clrun__value *x, const clrun__window *w2,
                                bool max, bool include_pad, int out, clrun__value **r)
{
    window w = *w2;
    bool ceil_mode = w.ceil_mode;
    clrun_status s;
    /* ceil_mode counts ceil((in + pads - span) / stride) + 1 windows (ONNX, onnxruntime); one
     * that would start past the input and its front padding (which PyTorch drops) is refused. */
    for (int i = 0; ceil_mode && i < 2; i++) {
        int64_t in = x->c.dims[2 + i], span = (w.kernel[i] - 1) * w.dilation[i] + 1;
        int64_t room = in + w.pad_begin[i] + w.pad_end[i] - span;
        if (room < 0)
            continue;
        int64_t windows = (room + w.stride[i] - 1) / w.stride[i] + 1;
        if ((windows - 1) * w.stride[i] >= in + w.pad_begin[i])
            return clrun__unsupported(im, "ceil_mode=1 with a last window entirely in the padding");
    }
    /* The op with ONNX's attributes where this build takes them (only those that differ from
     * the defaults, so older builds still take plain pools). */
    {
        int64_t pads[4] = {w.pad_begin[0], w.pad_begin[1], w.pad_end[0], w.pad_end[1]};
        clrun_attr at[6];
        int k = 0;
        at[k++] = clrun__mk_ints("kernel", w.kernel, 2);
        at[k++] = clrun__mk_ints("stride", w.stride, 2);
        if (pads[0] == pads[2] && pads[1] == pads[3])
            at[k++] = clrun__mk_ints("pad", pads, 2);
        else
            at[k++] = clrun__mk_ints("pads", pads, 4);
        if (ceil_mode)
            at[k++] = clrun__mk_int("ceil_mode", 1);
        if (w.dilation[0] != 1 || w.dilation[1] != 1)
            at[k++] = clrun__mk_ints("dilation", w.dilation, 2);
        if (!max && include_pad)
            at[k++] = clrun__mk_int("count_include_pad", 1);
        const char *op = max ? "maxpool2d" : "avgpool2d";
        if (clrun__op_accepts(op, &x, 1, at, k)) {
            return clrun__emit1(im, n, op, &x, 1, at, k, out, r);
        }
    }
    if (ceil_mode) {
        /* ceil((in + pads - span) / stride) + 1 outputs: extra padding at the end gives them, and
         * is exact for max pools (-inf never wins a window that starts inside). */
        if (!max)
            return clrun__unsupported(im, "ceil_mode=1 for AveragePool is not supported");
        for (int i = 0; i < 2; i++) {
            int64_t in = x->c.dims[2 + i] + w.pad_begin[i] + w.pad_end[i];
            int64_t span = (w.kernel[i] - 1) * w.dilation[i] + 1;
            if (in < span)
                continue;
            int64_t windows = (in - span + w.stride[i] - 1) / w.stride[i] + 1;
            int64_t needed = (windows - 1) * w.stride[i] + span - in;
            if (needed > 0)
                w.pad_end[i] += needed;
        }
    }
    int64_t sym[2] = {w.pad_begin[0], w.pad_begin[1]};
    bool symmetric = w.pad_begin[0] == w.pad_end[0] && w.pad_begin[1] == w.pad_end[1];
    bool fits = sym[0] <= w.kernel[0] / 2 && sym[1] <= w.kernel[1] / 2; /* 2 * sym <= kernel */
    if (max && (!symmetric || !fits)) {
        /* Explicit -inf padding, never the max of a window that has any element of x. */
        for (int i = 0; i < 2; i++) {
            if (w.pad_begin[i] == 0 && w.pad_end[i] == 0)
                continue;
            s = clrun__pad_axis(im, n, x, 2 + i, w.pad_begin[i], w.pad_end[i], "constant", -INFINITY, -1, &x);
            if (s != CLRUN_OK)
                return s;
        }
        sym[0] = sym[1] = 0;
    } else if (!max && include_pad) {
        /* Zeros that count: explicit padding, then a pool without any. */
        for (int i = 0; i < 2; i++) {
            if (w.pad_begin[i] == 0 && w.pad_end[i] == 0)
                continue;
            s = clrun__pad_axis(im, n, x, 2 + i, w.pad_begin[i], w.pad_end[i], "constant", 0, -1, &x);
            if (s != CLRUN_OK)
                return s;
        }
        sym[0] = sym[1] = 0;
    } else if (!max && (!symmetric || !fits)) {
        return padded_average(im, n, x, &w, out, r);
    }
    clrun_attr at[4] = {clrun__mk_ints("kernel", w.kernel, 2), clrun__mk_ints("stride", w.stride, 2),
                        clrun__mk_ints("pad", sym, 2), clrun__mk_ints("dilation", w.dilation, 2)};
    int n_at = w.dilation[0] != 1 || w.dilation[1] != 1 ? 4 : 3;
    return clrun__emit1(im, n, max ? "maxpool2d" : "avgpool2d", &x, 1, at, n_at, out, r);
}


clrun_status clrun__map_global_pool(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 1);
    if (s != CLRUN_OK)
        return s;
    clrun__value *x = n->in[0];
    if (x->c.rank < 3)
        return clrun__invalid(im, "%s needs [N, C, D...]", n->op);
    int64_t axes[CLRUN__ONNX_MAX_RANK];
    for (int d = 2; d < x->c.rank; d++)
        axes[d - 2] = d;
    clrun_attr at[2] = {clrun__mk_ints("axes", axes, x->c.rank - 2), clrun__mk_int("keepdims", 1)};
    const char *op = strcmp(n->op, "GlobalMaxPool") == 0 ? "reduce_max" : "reduce_mean";
    return clrun__emit1(im, n, op, &x, 1, at, 2, 0, NULL);
}


/* ---- LpPool, GlobalLpPool ---- */

/* The p of an LpPool: a float before opset 2, an integer since; below 1 it is no norm. */
static clrun_status lp_order(clrun__imp *im, clrun__onode *n, double *p)
{
    clrun_status s;
    if (n->version < 2) {
        s = clrun__oattr_float(im, n, "p", 2.0, p);
    } else {
        int64_t v;
        s = clrun__oattr_int(im, n, "p", 2, &v);
        *p = (double)v;
    }
    if (s == CLRUN_OK && !(*p >= 1 && isfinite(*p)))
        return clrun__invalid(im, "attribute 'p' is %g: it must be at least 1", *p);
    if (s == CLRUN_OK && !clrun__onnx_elem_is_float(n->in[0]->c.elem)) {
        char name[32];
        return clrun__invalid(im, "input 0 '%s' is %s: %s takes floats",
                              n->in[0]->onnx_name ? n->in[0]->onnx_name : "(temporary)",
                              clrun__onnx_elem_name(n->in[0]->c.elem, name, sizeof name), n->op);
    }
    return s;
}

/* |x|^p: abs for 1, a product for 2, pow otherwise. */
static clrun_status lp_power(clrun__imp *im, clrun__onode *n, clrun__value *x, double p, clrun__value **r)
{
    if (p == 2)
        return clrun__emit_binary(im, n, "mul", x, x, -1, r);
    clrun__value *a;
    clrun_status s = clrun__emit_unary(im, n, "abs", x, -1, &a);
    if (s != CLRUN_OK || p == 1) {
        *r = a;
        return s;
    }
    clrun__value *e = clrun__scalar_value(im, x->c.elem, p, x->c.rank);
    return e ? clrun__emit_binary(im, n, "pow", a, e, -1, r) : CLRUN_ERROR_OUT_OF_HOST_MEMORY;
}

/* The p-th root of a sum: itself for 1, sqrt for 2, pow by 1/p otherwise. */
static clrun_status lp_root(clrun__imp *im, clrun__onode *n, clrun__value *y, double p, int out,
                            clrun__value **r)
{
    if (p == 1)
        return out == 0 ? clrun__define_alias(im, n, 0, y) : (*r = y, CLRUN_OK);
    if (p == 2)
        return clrun__emit_unary(im, n, "sqrt", y, out, r);
    clrun__value *e = clrun__scalar_value(im, y->c.elem, 1.0 / p, y->c.rank);
    return e ? clrun__emit_binary(im, n, "pow", y, e, out, r) : CLRUN_ERROR_OUT_OF_HOST_MEMORY;
}

/* (sum over the window of |x|^p)^(1/p). The sum is a depthwise conv2d of ones over |x|^p: its
 * zero padding adds nothing, so pads, auto_pad and ceil_mode's extra windows (more zeros at the
 * end) are exact. 1-D and 2-D. */
clrun_status clrun__map_lp_pool(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 1);
    window w = {0};
    double p = 2;
    int64_t ceil_mode = 0;
    if (s == CLRUN_OK)
        s = spatial_of(im, n->in[0], &w.spatial);
    if (s == CLRUN_OK)
        s = lp_order(im, n, &p);
    if (s != CLRUN_OK)
        return s;
    if (w.spatial == 3)
        return clrun__unsupported(im, "3-D LpPool is not supported (1-D and 2-D are)");
    clrun__value *x = n->in[0];
    s = kernel_of(im, n, NULL, &w);
    if (s == CLRUN_OK && w.kernel[0] == 0)
        s = clrun__invalid(im, "kernel_shape is required");
    if (s == CLRUN_OK)
        s = window_attrs(im, n, &x->c, &w, n->version >= 18);
    if (s == CLRUN_OK && n->version >= 18)
        s = clrun__oattr_int(im, n, "ceil_mode", 0, &ceil_mode);
    if (s != CLRUN_OK)
        return s;
    int sp = w.spatial;
    for (int i = 0; ceil_mode && i < sp; i++) {
        int64_t in = x->c.dims[2 + i], span = (w.kernel[i] - 1) * w.dilation[i] + 1;
        int64_t room = in + w.pad_begin[i] + w.pad_end[i] - span;
        if (room < 0)
            continue;
        int64_t windows = (room + w.stride[i] - 1) / w.stride[i] + 1;
        if ((windows - 1) * w.stride[i] >= in + w.pad_begin[i])
            return clrun__unsupported(im, "ceil_mode=1 with a last window entirely in the padding");
        w.pad_end[i] += (windows - 1) * w.stride[i] + span - (in + w.pad_begin[i] + w.pad_end[i]);
    }
    clrun__value *img = x, *t, *y;
    window w2 = w;
    if (sp == 1) {
        if ((s = as_image(im, n, x, &img)) != CLRUN_OK)
            return s;
        as_2d(&w2);
    }
    int64_t channels = img->c.dims[1], dims[4] = {channels, 1, w2.kernel[0], w2.kernel[1]};
    clrun__otensor ones;
    if (!clrun__otensor_alloc(&ones, x->c.elem, 4, dims))
        return clrun__host_result_failed(im, x->c.elem, 4, dims);
    for (uint64_t i = 0; i < clrun__otensor_count(&ones); i++)
        clrun__otensor_set_real(&ones, i, 1);
    clrun__value *wt = clrun__const_value(im, &ones);
    if (wt == NULL)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    w2.group = channels;
    s = lp_power(im, n, img, p, &t);
    if (s == CLRUN_OK)
        s = clrun__conv2d_core(im, n, t, wt, NULL, &w2, -1, &y);
    if (s == CLRUN_OK)
        s = lp_root(im, n, y, p, sp == 2 ? 0 : -1, &y);
    if (s != CLRUN_OK || sp == 2)
        return s;
    w2.spatial = 1;
    return finish_window(im, n, &w2, y);
}

/* (sum over the spatial axes of |x|^p)^(1/p), the spatial axes kept as 1. */
clrun_status clrun__map_global_lp_pool(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 1);
    double p = 2;
    if (s == CLRUN_OK)
        s = lp_order(im, n, &p);
    if (s != CLRUN_OK)
        return s;
    clrun__value *x = n->in[0], *t, *y;
    if (x->c.rank < 3)
        return clrun__invalid(im, "%s needs [N, C, D...]", n->op);
    int64_t axes[CLRUN__ONNX_MAX_RANK];
    for (int d = 2; d < x->c.rank; d++)
        axes[d - 2] = d;
    clrun_attr at[2] = {clrun__mk_ints("axes", axes, x->c.rank - 2), clrun__mk_int("keepdims", 1)};
    s = lp_power(im, n, x, p, &t);
    if (s == CLRUN_OK)
        s = clrun__emit1(im, n, "reduce_sum", &t, 1, at, 2, -1, &y);
    return s == CLRUN_OK ? lp_root(im, n, y, p, 0, NULL) : s;
}
