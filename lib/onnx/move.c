/* Data movement on values of either kind: the same call folds on the host when its input is a
 * host constant and emits a graph node otherwise, so the mappings of layout operators (and the
 * compositions other mappings build from them) fold for free. */
#include <string.h>

#include "graph/op.h"
#include "onnx/host_eval.h"
#include "onnx/map.h"

clrun_status clrun__mv_const(clrun__imp *im, clrun__onode *n, clrun__otensor *t, int out, clrun__value **r)
{
    if (out >= 0) {
        if (r)
            *r = NULL;
        return clrun__define_const(im, n, out, t);
    }
    clrun__value *v = clrun__const_value(im, t);
    if (r)
        *r = v;
    return v ? CLRUN_OK : CLRUN_ERROR_OUT_OF_HOST_MEMORY;
}

clrun_status clrun__mv_empty(clrun__imp *im, clrun__onode *n, int elem, int rank, const int64_t *dims, int out,
                             clrun__value **r)
{
    clrun__otensor t;
    if (!clrun__otensor_alloc(&t, elem, rank, dims))
        return CLRUN__OOM(im);
    return clrun__mv_const(im, n, &t, out, r);
}

clrun_status clrun__mv_expand(clrun__imp *im, clrun__onode *n, clrun__value *x, int rank, const int64_t *dims,
                              int out, clrun__value **r)
{
    if (clrun__is_const(x)) {
        clrun__otensor t;
        if (!clrun__host_expand(&x->c, rank, dims, &t))
            return clrun__host_result_failed(im, x->c.elem, rank, dims);
        return clrun__mv_const(im, n, &t, out, r);
    }
    if (rank == x->c.rank && memcmp(dims, x->c.dims, (size_t)rank * sizeof dims[0]) == 0)
        return clrun__mv_same(im, n, x, out, r);
    clrun_attr a = clrun__mk_ints("shape", dims, rank);
    return clrun__emit1(im, n, "expand", &x, 1, &a, 1, out, r);
}

clrun_status clrun__mv_fill(clrun__imp *im, clrun__onode *n, int elem, double value, int rank, const int64_t *dims,
                            int out, clrun__value **r)
{
    clrun__value *v = clrun__scalar_value(im, elem, value, rank);
    if (v == NULL)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY; /* recorded */
    return clrun__mv_expand(im, n, v, rank, dims, out, r);
}

clrun_status clrun__mv_same(clrun__imp *im, clrun__onode *n, clrun__value *x, int out, clrun__value **r)
{
    if (r)
        *r = x;
    return out >= 0 ? clrun__define_alias(im, n, out, x) : CLRUN_OK;
}

clrun_status clrun__mv_reshape(clrun__imp *im, clrun__onode *n, clrun__value *x, int rank,
                               const int64_t *dims, int out, clrun__value **r)
{
    if (clrun__is_const(x)) {
        clrun__otensor t;
        if (!clrun__host_reshape(&x->c, rank, dims, &t))
            return CLRUN__OOM(im);
        return clrun__mv_const(im, n, &t, out, r);
    }
    bool same = rank == x->c.rank && memcmp(dims, x->c.dims, (size_t)rank * sizeof dims[0]) == 0;
    if (same)
        return clrun__mv_same(im, n, x, out, r);
    return clrun__emit_reshape(im, n, x, rank, dims, out, r);
}

clrun_status clrun__mv_transpose(clrun__imp *im, clrun__onode *n, clrun__value *x, const int *perm,
                                 int out, clrun__value **r)
{
    bool identity = true;
    for (int d = 0; d < x->c.rank; d++)
        identity = identity && perm[d] == d;
    if (identity)
        return clrun__mv_same(im, n, x, out, r);
    if (clrun__is_const(x)) {
        clrun__otensor t;
        if (!clrun__host_transpose(&x->c, perm, &t))
            return CLRUN__OOM(im);
        return clrun__mv_const(im, n, &t, out, r);
    }
    /* Moving only dims of size 1 keeps the element order: a reshape. */
    int64_t dims[CLRUN__ONNX_MAX_RANK], p64[CLRUN__ONNX_MAX_RANK];
    int last = -1;
    bool order_kept = true;
    for (int d = 0; d < x->c.rank; d++) {
        dims[d] = x->c.dims[perm[d]];
        p64[d] = perm[d];
        if (x->c.dims[perm[d]] != 1) {
            order_kept = order_kept && perm[d] > last;
            last = perm[d];
        }
    }
    if (order_kept)
        return clrun__mv_reshape(im, n, x, x->c.rank, dims, out, r);
    return clrun__emit_transpose(im, n, x, p64, out, r);
}

clrun_status clrun__mv_slice(clrun__imp *im, clrun__onode *n, clrun__value *x, int axis, int64_t start,
                             int64_t count, int out, clrun__value **r)
{
    if (start == 0 && count == x->c.dims[axis])
        return clrun__mv_same(im, n, x, out, r);
    if (clrun__is_const(x)) {
        int64_t starts[CLRUN__ONNX_MAX_RANK] = {0}, steps[CLRUN__ONNX_MAX_RANK], counts[CLRUN__ONNX_MAX_RANK];
        for (int d = 0; d < x->c.rank; d++) {
            steps[d] = 1;
            counts[d] = x->c.dims[d];
        }
        starts[axis] = start;
        counts[axis] = count;
        clrun__otensor t;
        if (!clrun__host_slice(&x->c, starts, steps, counts, &t))
            return CLRUN__OOM(im);
        return clrun__mv_const(im, n, &t, out, r);
    }
    if (count < 1) {
        int64_t dims[CLRUN__ONNX_MAX_RANK];
        memcpy(dims, x->c.dims, (size_t)x->c.rank * sizeof dims[0]);
        dims[axis] = 0;
        return clrun__mv_empty(im, n, x->c.elem, x->c.rank, dims, out, r);
    }
    clrun_attr a[3] = {clrun__mk_int("axis", axis), clrun__mk_int("start", start),
                       clrun__mk_int("end", start + count)};
    return clrun__emit1(im, n, "slice", &x, 1, a, 3, out, r);
}

clrun_status clrun__mv_concat(clrun__imp *im, clrun__onode *n, clrun__value *const *xs, int count,
                              int axis, int out, clrun__value **r)
{
    clrun__value *parts[64];
    int k = 0;
    bool all_const = true;
    for (int i = 0; i < count; i++)
        all_const = all_const && clrun__is_const(xs[i]);
    if (all_const) {
        const clrun__otensor *ts[64];
        if (count > 64)
            return clrun__unsupported(im, "Concat of %d constants (at most 64)", count);
        for (int i = 0; i < count; i++)
            ts[i] = &xs[i]->c;
        clrun__otensor t;
        if (!clrun__host_concat(ts, count, axis, &t))
            return CLRUN__OOM(im);
        return clrun__mv_const(im, n, &t, out, r);
    }
    for (int i = 0; i < count; i++) {
        if (xs[i]->c.dims[axis] == 0)
            continue;
        if (k == 64)
            return clrun__unsupported(im, "Concat of more than 64 pieces");
        parts[k++] = xs[i];
    }
    if (k == 1)
        return clrun__mv_same(im, n, parts[0], out, r);
    /* In groups the graph op takes, joined again until one is left. */
    const clrun__op *op = clrun__op_find("concat");
    int most = op && op->max_inputs >= 2 ? op->max_inputs : 2;
    while (k > most) {
        int groups = 0;
        for (int i = 0; i < k; i += most) {
            int m = k - i < most ? k - i : most;
            clrun__value *joined = parts[i];
            if (m > 1) {
                clrun_attr a = clrun__mk_int("axis", axis);
                clrun_status s = clrun__emit1(im, n, "concat", parts + i, m, &a, 1, -1, &joined);
                if (s != CLRUN_OK)
                    return s;
            }
            parts[groups++] = joined;
        }
        k = groups;
    }
    if (k == 1)
        return clrun__mv_same(im, n, parts[0], out, r);
    clrun_attr a = clrun__mk_int("axis", axis);
    return clrun__emit1(im, n, "concat", parts, k, &a, 1, out, r);
}
