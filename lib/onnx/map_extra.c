/* Operators beyond the core list, each a composition of graph ops that computes what the ONNX
 * spec (or, for those defined as functions, their function body) says: Shrink, ThresholdedRelu,
 * IsNaN, IsInf, EyeLike (a host constant), Hardmax, MeanVarianceNormalization, and the losses
 * NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "onnx/host_eval.h"
#include "core/checked.h"
#include "onnx/map.h"

static clrun__value *scalar_like(clrun__imp *im, const clrun__value *x, double value)
{
    return clrun__scalar_value(im, x->c.elem, value, x->c.rank);
}

/* Shrink: x < -l ? x + b : x > l ? x - b : 0. ThresholdedRelu: x > alpha ? x : 0. */
clrun_status clrun__map_shrink(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 1);
    bool shrink = strcmp(n->op, "Shrink") == 0;
    double l = 0, bias = 0, alpha = 1;
    if (s == CLRUN_OK && shrink)
        s = clrun__oattr_float(im, n, "lambd", 0.5, &l);
    if (s == CLRUN_OK && shrink)
        s = clrun__oattr_float(im, n, "bias", 0, &bias);
    if (s == CLRUN_OK && !shrink)
        s = clrun__oattr_float(im, n, "alpha", 1, &alpha);
    if (s != CLRUN_OK)
        return s;
    clrun__value *x = n->in[0], *zero = scalar_like(im, x, 0), *c = NULL, *t = NULL, *u = NULL;
    if (zero == NULL)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    if (!shrink) {
        clrun__value *a = scalar_like(im, x, alpha);
        if (a == NULL)
            return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        s = clrun__emit_binary(im, n, "greater", x, a, -1, &c);
        clrun__value *in[3] = {c, x, zero};
        return s == CLRUN_OK ? clrun__emit1(im, n, "where", in, 3, NULL, 0, 0, NULL) : s;
    }
    clrun__value *lo = scalar_like(im, x, -l), *hi = scalar_like(im, x, l), *b = scalar_like(im, x, bias);
    if (!lo || !hi || !b)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    clrun__value *below = NULL, *above = NULL;
    s = clrun__emit_binary(im, n, "greater", x, hi, -1, &above);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "sub", x, b, -1, &t);
    clrun__value *in1[3] = {above, t, zero};
    if (s == CLRUN_OK)
        s = clrun__emit1(im, n, "where", in1, 3, NULL, 0, -1, &u);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "less", x, lo, -1, &below);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "add", x, b, -1, &t);
    clrun__value *in2[3] = {below, t, u};
    return s == CLRUN_OK ? clrun__emit1(im, n, "where", in2, 3, NULL, 0, 0, NULL) : s;
}

/* IsNaN: x != x. IsInf: |x| == inf, or one sign of it. */
clrun_status clrun__map_isnan(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 1);
    if (s != CLRUN_OK)
        return s;
    clrun__value *x = n->in[0], *t;
    if (strcmp(n->op, "IsNaN") == 0) {
        s = clrun__emit_binary(im, n, "equal", x, x, -1, &t);
        return s == CLRUN_OK ? clrun__emit_unary(im, n, "not", t, 0, NULL) : s;
    }
    int64_t neg, pos;
    s = clrun__oattr_int(im, n, "detect_negative", 1, &neg);
    if (s == CLRUN_OK)
        s = clrun__oattr_int(im, n, "detect_positive", 1, &pos);
    if (s != CLRUN_OK)
        return s;
    clrun__value *inf = scalar_like(im, x, neg && !pos ? -INFINITY : INFINITY);
    if (inf == NULL)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    if (neg && pos) {
        s = clrun__emit_unary(im, n, "abs", x, -1, &t);
        return s == CLRUN_OK ? clrun__emit_binary(im, n, "equal", t, inf, 0, NULL) : s;
    }
    if (!neg && !pos) { /* detects nothing: all false */
        clrun__otensor f;
        if (!clrun__otensor_alloc(&f, CLRUN__ONNX_BOOL, x->c.rank, x->c.dims))
            return CLRUN__OOM(im);
        return clrun__define_const(im, n, 0, &f);
    }
    return clrun__emit_binary(im, n, "equal", x, inf, 0, NULL);
}

/* EyeLike: ones on diagonal k of a matrix of the input's shape; only the shape is read. */
clrun_status clrun__map_eyelike(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 1);
    int64_t k, dtype;
    if (s == CLRUN_OK)
        s = clrun__oattr_int(im, n, "k", 0, &k);
    if (s == CLRUN_OK)
        s = clrun__oattr_int(im, n, "dtype", n->in[0]->c.elem, &dtype);
    if (s != CLRUN_OK)
        return s;
    const clrun__otensor *x = &n->in[0]->c;
    if (x->rank != 2)
        return clrun__invalid(im, "EyeLike takes a matrix");
    clrun__otensor t;
    if (dtype < 0 || dtype > INT32_MAX || clrun__onnx_elem_size((int)dtype) == 0)
        return clrun__unsupported(im, "EyeLike of data type %" PRId64 " is not supported", dtype);
    if (!clrun__otensor_alloc(&t, (int)dtype, 2, x->dims))
        return clrun__host_result_failed(im, (int)dtype, 2, x->dims);
    int64_t j;
    for (int64_t i = 0; i < x->dims[0]; i++)
        if (clrun__add_i64(i, k, &j) && j >= 0 && j < x->dims[1])
            clrun__otensor_set_int(&t, (uint64_t)(i * x->dims[1] + j), 1);
    return clrun__define_const(im, n, 0, &t);
}

/* Hardmax: 1 at the first maximum along the axis, 0 elsewhere: argmax compared with the
 * positions along the axis, cast to x's type. Before opset 13, over the dims flattened from
 * axis. */
clrun_status clrun__map_hardmax(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 1);
    int64_t axis;
    int a;
    clrun__value *x = n->in[0], *v = x;
    if (s == CLRUN_OK)
        s = clrun__oattr_int(im, n, "axis", n->version >= 13 ? -1 : 1, &axis);
    if (s == CLRUN_OK)
        s = clrun__norm_axis(im, axis, x->c.rank, "axis", &a);
    if (s != CLRUN_OK)
        return s;
    if (n->version < 13) {
        int64_t rows[2] = {1, 1};
        for (int d = 0; d < x->c.rank; d++)
            rows[d < a ? 0 : 1] *= x->c.dims[d];
        if ((s = clrun__mv_reshape(im, n, x, 2, rows, -1, &v)) != CLRUN_OK)
            return s;
        a = 1;
    }
    int64_t dims[CLRUN__ONNX_MAX_RANK];
    for (int d = 0; d < v->c.rank; d++)
        dims[d] = d == a ? v->c.dims[d] : 1;
    clrun__otensor pos;
    if (!clrun__otensor_alloc(&pos, CLRUN__ONNX_INT64, v->c.rank, dims))
        return CLRUN__OOM(im);
    for (int64_t i = 0; i < v->c.dims[a]; i++)
        clrun__otensor_set_int(&pos, (uint64_t)i, i);
    clrun__value *positions = clrun__const_value(im, &pos), *arg, *hit, *y;
    if (positions == NULL)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    clrun_attr at[2] = {clrun__mk_int("axis", a), clrun__mk_int("keepdims", 1)};
    s = clrun__emit1(im, n, "argmax", &v, 1, at, 2, -1, &arg);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "equal", arg, positions, -1, &hit);
    clrun_dtype dtype = CLRUN_F32;
    if (s == CLRUN_OK && !clrun__onnx_elem_dtype(x->c.elem, &dtype))
        s = clrun__unsupported(im, "Hardmax of this data type is not supported");
    clrun_attr to = clrun__mk_int("to", (int64_t)dtype);
    if (s == CLRUN_OK)
        s = clrun__emit1(im, n, "cast", &hit, 1, &to, 1, n->version < 13 ? -1 : 0, &y);
    return s == CLRUN_OK && n->version < 13 ? clrun__mv_reshape(im, n, y, x->c.rank, x->c.dims, 0, NULL) : s;
}

/* MeanVarianceNormalization as its function body: (x - E[x]) / (sqrt(E[x²] - E[x]²) + 1e-9)
 * over axes (default [0, 2, 3]). */
clrun_status clrun__map_mvn(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 1);
    int64_t axes[CLRUN__ONNX_MAX_RANK] = {0, 2, 3};
    int count;
    if (s == CLRUN_OK)
        s = clrun__oattr_ints(im, n, "axes", axes, CLRUN__ONNX_MAX_RANK, &count);
    if (s != CLRUN_OK)
        return s;
    if (count < 0)
        count = 3;
    clrun__value *x = n->in[0], *mean, *sq, *msq, *var, *std, *d, *eps = scalar_like(im, x, 1e-9);
    if (eps == NULL)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    clrun_attr at[2] = {clrun__mk_ints("axes", axes, count), clrun__mk_int("keepdims", 1)};
    s = clrun__emit1(im, n, "reduce_mean", &x, 1, at, 2, -1, &mean);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "mul", x, x, -1, &sq);
    if (s == CLRUN_OK)
        s = clrun__emit1(im, n, "reduce_mean", &sq, 1, at, 2, -1, &msq);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "mul", mean, mean, -1, &sq);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "sub", msq, sq, -1, &var);
    if (s == CLRUN_OK)
        s = clrun__emit_unary(im, n, "sqrt", var, -1, &std);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "add", std, eps, -1, &std);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "sub", x, mean, -1, &d);
    return s == CLRUN_OK ? clrun__emit_binary(im, n, "div", d, std, 0, NULL) : s;
}

/* NegativeLogLikelihoodLoss (input [N, C, d...] of log-probabilities, target [N, d...]) and
 * SoftmaxCrossEntropyLoss (scores, labels: the same of their LogSoftmax over C):
 *   loss[n, d] = -input[n, target[n, d], d] · weight[target[n, d]], 0 where target == ignore_index
 * then none, sum, or mean (the sum over the sum of the weights taken). */
clrun_status clrun__map_nll(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 2);
    bool sce = strcmp(n->op, "SoftmaxCrossEntropyLoss") == 0;
    char reduction[16];
    int64_t ignore = 0;
    bool has_ignore = clrun__oattr_find(im, n, "ignore_index") != NULL;
    if (s == CLRUN_OK)
        s = clrun__oattr_string(im, n, "reduction", "mean", reduction, sizeof reduction);
    if (s == CLRUN_OK)
        s = clrun__oattr_int(im, n, "ignore_index", 0, &ignore);
    if (s != CLRUN_OK)
        return s;
    bool none = strcmp(reduction, "none") == 0, sum = strcmp(reduction, "sum") == 0;
    if (!none && !sum && strcmp(reduction, "mean"))
        return clrun__invalid(im, "reduction '%s' is not none, sum or mean", reduction);
    clrun__value *x = n->in[0], *t = n->in[1], *w = n->n_in > 2 ? n->in[2] : NULL;
    if (x->c.rank < 2 || t->c.rank != x->c.rank - 1)
        return clrun__invalid(im, "input [N, C, d...] and target [N, d...] expected");
    if (sce) { /* log_prob = LogSoftmax over C: also output 1 when named */
        s = clrun__emit_softmax(im, n, x, 1, true, clrun__out(im, n, 1) ? 1 : -1, &x);
        if (s != CLRUN_OK)
            return s;
        if (x == NULL)
            x = clrun__out(im, n, 1);
    }
    /* The target made safe to gather with (ignored positions read class 0), as [N, 1, d...]. */
    clrun__value *safe = t, *keep = NULL, *zero_i, *g, *wt, *loss;
    if (has_ignore) {
        clrun__value *ii = clrun__scalar_value(im, t->c.elem, (double)ignore, t->c.rank), *hit;
        if ((zero_i = clrun__scalar_value(im, t->c.elem, 0, t->c.rank)) == NULL || ii == NULL)
            return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        s = clrun__emit_binary(im, n, "equal", t, ii, -1, &hit);
        clrun__value *in[3] = {hit, zero_i, t};
        if (s == CLRUN_OK)
            s = clrun__emit1(im, n, "where", in, 3, NULL, 0, -1, &safe);
        if (s == CLRUN_OK)
            s = clrun__emit_unary(im, n, "not", hit, -1, &keep);
        if (s != CLRUN_OK)
            return s;
    }
    int64_t dims[CLRUN__ONNX_MAX_RANK];
    dims[0] = t->c.dims[0];
    dims[1] = 1;
    for (int d = 1; d < t->c.rank; d++)
        dims[d + 1] = t->c.dims[d];
    clrun__value *idx;
    s = clrun__mv_reshape(im, n, safe, x->c.rank, dims, -1, &idx);
    clrun__value *in[2] = {x, idx};
    clrun_attr axis1 = clrun__mk_int("axis", 1);
    if (s == CLRUN_OK)
        s = clrun__emit1(im, n, "gather_elements", in, 2, &axis1, 1, -1, &g);
    if (s == CLRUN_OK)
        s = clrun__mv_reshape(im, n, g, t->c.rank, t->c.dims, -1, &g);
    if (s == CLRUN_OK)
        s = clrun__emit_unary(im, n, "neg", g, -1, &loss);
    /* The weight of each position: weight[target], times the kept mask. */
    wt = NULL;
    if (s == CLRUN_OK && w) {
        clrun__value *gin[2] = {w, safe};
        clrun_attr axis0 = clrun__mk_int("axis", 0);
        s = clrun__emit1(im, n, "gather", gin, 2, &axis0, 1, -1, &wt);
    }
    if (s == CLRUN_OK && keep) {
        clrun_dtype dtype;
        if (!clrun__onnx_elem_dtype(x->c.elem, &dtype))
            return clrun__unsupported(im, "loss of this data type is not supported");
        clrun_attr to = clrun__mk_int("to", (int64_t)dtype);
        clrun__value *mask;
        s = clrun__emit1(im, n, "cast", &keep, 1, &to, 1, -1, &mask);
        if (s == CLRUN_OK && wt)
            s = clrun__emit_binary(im, n, "mul", wt, mask, -1, &wt);
        else if (s == CLRUN_OK)
            wt = mask;
    }
    if (s == CLRUN_OK && wt)
        s = clrun__emit_binary(im, n, "mul", loss, wt, none ? 0 : -1, &loss);
    else if (s == CLRUN_OK && none)
        s = clrun__mv_same(im, n, loss, 0, NULL);
    if (s != CLRUN_OK || none)
        return s;
    clrun_attr all[2] = {clrun__mk_ints("axes", NULL, 0), clrun__mk_int("keepdims", 0)};
    clrun__value *total;
    s = clrun__emit1(im, n, "reduce_sum", &loss, 1, all, 2, sum ? 0 : -1, &total);
    if (s != CLRUN_OK || sum)
        return s;
    if (wt == NULL) { /* mean over every position */
        clrun__value *count = clrun__scalar_value(im, total->c.elem, (double)clrun__otensor_count(&t->c), 0);
        return count ? clrun__emit_binary(im, n, "div", total, count, 0, NULL) : CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    clrun__value *weights;
    s = clrun__emit1(im, n, "reduce_sum", &wt, 1, all, 2, -1, &weights);
    return s == CLRUN_OK ? clrun__emit_binary(im, n, "div", total, weights, 0, NULL) : s;
}

/* HannWindow, HammingWindow, BlackmanWindow (opset 17): functions of the size alone, computed on
 * the host in double: w[n] = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), N = size (periodic)
 * or size - 1. */
clrun_status clrun__map_window(clrun__imp *im, clrun__onode *n)
{
    double size_r;
    bool present;
    int64_t periodic, dtype;
    clrun_status s = clrun__const_real(im, n, 0, &size_r, &present);
    if (s == CLRUN_OK && !present)
        s = clrun__invalid(im, "%s needs a size", n->op);
    if (s == CLRUN_OK)
        s = clrun__oattr_int(im, n, "periodic", 1, &periodic);
    if (s == CLRUN_OK)
        s = clrun__oattr_int(im, n, "output_datatype", CLRUN__ONNX_FLOAT, &dtype);
    if (s != CLRUN_OK)
        return s;
    double a0 = 0.5, a1 = 0.5, a2 = 0;
    if (strcmp(n->op, "HammingWindow") == 0)
        a0 = 25.0 / 46.0, a1 = 1 - a0;
    else if (strcmp(n->op, "BlackmanWindow") == 0)
        a0 = 0.42, a1 = 0.5, a2 = 0.08;
    if (!(size_r >= 0 && size_r < 0x1p62)) /* NaN, negative or far too large */
        return clrun__invalid(im, "the window size %g is negative, NaN or too large", size_r);
    int64_t size = (int64_t)size_r;
    clrun__otensor t;
    if (dtype < 0 || dtype > INT32_MAX || clrun__onnx_elem_size((int)dtype) == 0)
        return clrun__unsupported(im, "a window of data type %" PRId64 " is not supported", dtype);
    if (!clrun__otensor_alloc(&t, (int)dtype, 1, &size))
        return clrun__host_result_failed(im, (int)dtype, 1, &size);
    double N = periodic ? (double)size : (double)(size - 1);
    for (int64_t i = 0; i < size; i++) {
        double x = N > 0 ? 2 * M_PI * (double)i / N : 0;
        clrun__otensor_set_real(&t, (uint64_t)i, a0 - a1 * cos(x) + a2 * cos(2 * x));
    }
    return clrun__define_const(im, n, 0, &t);
}

/* OneHot: on where an index (negatives counted from depth) equals the position along the new
 * axis, off elsewhere: indices as int64 compared with the positions [0, depth). */
clrun_status clrun__map_onehot(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 3);
    int64_t axis;
    double depth_r;
    bool present;
    const clrun__otensor *values;
    if (s == CLRUN_OK)
        s = clrun__oattr_int(im, n, "axis", -1, &axis);
    if (s == CLRUN_OK)
        s = clrun__const_real(im, n, 1, &depth_r, &present);
    if (s == CLRUN_OK)
        s = clrun__const_input(im, n, 2, false, &values);
    if (s != CLRUN_OK)
        return s;
    if (clrun__otensor_count(values) != 2)
        return clrun__invalid(im, "values must be [off, on]");
    clrun__value *idx = n->in[0];
    int rank = idx->c.rank + 1, a;
    if ((s = clrun__norm_axis(im, axis, rank, "axis", &a)) != CLRUN_OK)
        return s;
    if (!present || !(depth_r >= 1 && depth_r < 0x1p62))
        return clrun__invalid(im, "depth %g is not a count from 1 to 2^62", present ? depth_r : 0.0);
    int64_t depth = (int64_t)depth_r;
    if (depth < 1 || rank > CLRUN_MAX_DIMS)
        return clrun__unsupported(im, "a depth of %" PRId64 " and rank %d are not supported", depth, rank);
    clrun__value *zero = clrun__scalar_value(im, CLRUN__ONNX_INT64, 0, idx->c.rank),
                 *dep = clrun__scalar_value(im, CLRUN__ONNX_INT64, (double)depth, idx->c.rank);
    clrun__value *off = clrun__scalar_value(im, values->elem, clrun__otensor_get_real(values, 0), rank),
                 *on = clrun__scalar_value(im, values->elem, clrun__otensor_get_real(values, 1), rank);
    int64_t dims[CLRUN__ONNX_MAX_RANK];
    for (int d = 0; d < rank; d++)
        dims[d] = d == a ? depth : 1;
    clrun__otensor pos;
    if (!zero || !dep || !off || !on || !clrun__otensor_alloc(&pos, CLRUN__ONNX_INT64, rank, dims))
        return CLRUN__OOM(im);
    for (int64_t i = 0; i < depth; i++)
        clrun__otensor_set_int(&pos, (uint64_t)i, i);
    clrun__value *positions = clrun__const_value(im, &pos), *neg = NULL, *wrapped = NULL, *eq = NULL;
    if (positions == NULL)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    if (idx->c.elem != CLRUN__ONNX_INT64) {
        clrun_attr to = clrun__mk_int("to", CLRUN_I64);
        if ((s = clrun__emit1(im, n, "cast", &idx, 1, &to, 1, -1, &idx)) != CLRUN_OK)
            return s;
    }
    s = clrun__emit_binary(im, n, "less", idx, zero, -1, &neg);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "add", idx, dep, -1, &wrapped);
    clrun__value *w_in[3] = {neg, wrapped, idx};
    if (s == CLRUN_OK)
        s = clrun__emit1(im, n, "where", w_in, 3, NULL, 0, -1, &idx);
    for (int d = 0, k = 0; d < rank; d++)
        dims[d] = d == a ? 1 : idx->c.dims[k++];
    if (s == CLRUN_OK)
        s = clrun__mv_reshape(im, n, idx, rank, dims, -1, &idx);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "equal", idx, positions, -1, &eq);
    clrun__value *o_in[3] = {eq, on, off};
    return s == CLRUN_OK ? clrun__emit1(im, n, "where", o_in, 3, NULL, 0, 0, NULL) : s;
}
