/* Reductions (ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2,
 * ReduceSumSquare, ReduceLogSum, ReduceLogSumExp) and ArgMax/ArgMin. Those the graph has no
 * op for are compositions that compute the same values: ReduceMin as -max(-x), ReduceL2 as
 * sqrt(sum(x·x)), ReduceLogSumExp as m + log(sum(exp(x - m))) with m the max (no overflow). */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "onnx/host_eval.h"
#include "onnx/map.h"

typedef struct reduce_row {
    const char *onnx;
    const char *graph;  /* the graph op, when it has one */
} reduce_row;

static const reduce_row rows[] = {
    {"ReduceSum", "reduce_sum"},   {"ReduceMean", "reduce_mean"}, {"ReduceMax", "reduce_max"},
    {"ReduceMin", "reduce_min"},   {"ReduceProd", "reduce_prod"}, {"ReduceL1", NULL},
    {"ReduceL2", "reduce_l2"},     {"ReduceSumSquare", "reduce_sum_square"},
    {"ReduceLogSum", NULL},        {"ReduceLogSumExp", NULL},
};

static clrun_status reduce_op(clrun__imp *im, clrun__onode *n, const char *op, clrun__value *x,
                              const int64_t *axes, int count, int64_t keepdims, int out, clrun__value **r)
{
    clrun_attr at[2] = {clrun__mk_ints("axes", axes, count), clrun__mk_int("keepdims", keepdims)};
    return clrun__emit1(im, n, op, &x, 1, at, 2, out, r);
}

static clrun_status fold_reduce(clrun__imp *im, clrun__onode *n, const bool *reduced, int64_t keepdims)
{
    static const struct { const char *op; clrun__host_reduce_op code; } host[] = {
        {"ReduceSum", CLRUN__H_RSUM}, {"ReduceProd", CLRUN__H_RPROD}, {"ReduceMin", CLRUN__H_RMIN},
        {"ReduceMax", CLRUN__H_RMAX}, {"ReduceMean", CLRUN__H_RMEAN},
    };
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++)
        if (strcmp(host[i].op, n->op) == 0) {
            clrun__otensor t;
            clrun__host_fold_result r = clrun__host_reduce(host[i].code, &n->in[0]->c, reduced, keepdims != 0, &t);
            if (r == CLRUN__FOLD_OK)
                return clrun__define_const(im, n, 0, &t);
            if (r == CLRUN__FOLD_NO_MEMORY)
                return CLRUN__OOM(im);
            return CLRUN__NOT_FOLDED;
        }
    return CLRUN__NOT_FOLDED;
}

/* A reduction of an empty x that fold_reduce left: the sums of nothing of ReduceL1, ReduceL2
 * and ReduceSumSquare are 0, the logarithms of ReduceLogSum and ReduceLogSumExp -inf (ONNX's
 * values for an empty set). A mean has none; an integer's minimum or maximum (the spec gives the
 * type's largest or lowest value, opset 18 on) is not computed: both refused by name. */
static clrun_status empty_reduce(clrun__imp *im, clrun__onode *n, const bool *reduced, int64_t keepdims)
{
    static const char *const sums[] = {"ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"};
    const clrun__otensor *x = &n->in[0]->c;
    bool sum = false, logarithm = strncmp(n->op, "ReduceLog", 9) == 0;
    for (size_t i = 0; i < sizeof sums / sizeof sums[0]; i++)
        sum = sum || strcmp(sums[i], n->op) == 0;
    char type[32];
    if (!sum || (logarithm && !clrun__onnx_elem_is_float(x->elem)))
        return clrun__unsupported(im, "%s over an empty axis of %s %s", n->op,
                                  clrun__onnx_elem_name(x->elem, type, sizeof type),
                                  strcmp(n->op, "ReduceMean") == 0 ? "has no value (the mean of nothing)"
                                                                   : "is not supported");
    clrun__otensor t;
    clrun__host_fold_result r = clrun__host_reduce(CLRUN__H_RSUM, x, reduced, keepdims != 0, &t);
    if (r == CLRUN__FOLD_NO_MEMORY)
        return CLRUN__OOM(im);
    if (r != CLRUN__FOLD_OK)
        return clrun__unsupported(im, "%s over an empty axis of %s", n->op,
                                  clrun__onnx_elem_name(x->elem, type, sizeof type));
    for (uint64_t i = 0; logarithm && i < clrun__otensor_count(&t); i++)
        clrun__otensor_set_real(&t, i, -INFINITY);
    return clrun__define_const(im, n, 0, &t);
}

clrun_status clrun__map_reduce(clrun__imp *im, clrun__onode *n)
{
    if (n->n_in < 1 || n->in[0] == NULL)
        return clrun__invalid(im, "%s needs an input", n->op);
    clrun__value *x = n->in[0];
    int rank = x->c.rank, count;
    int64_t keepdims, noop = 0, axes[CLRUN__ONNX_MAX_RANK * 2];
    clrun_status s = clrun__oattr_int(im, n, "keepdims", 1, &keepdims);
    /* axes moved from the attribute to input 1 at 13 for ReduceSum, at 18 for the others */
    bool axes_input = n->version >= 18 || (strcmp(n->op, "ReduceSum") == 0 && n->version >= 13);
    if (s == CLRUN_OK && axes_input) {
        s = clrun__oattr_int(im, n, "noop_with_empty_axes", 0, &noop);
        if (s == CLRUN_OK)
            s = clrun__const_ints(im, n, 1, true, axes, CLRUN__ONNX_MAX_RANK * 2, &count);
    } else if (s == CLRUN_OK) {
        s = clrun__oattr_ints(im, n, "axes", axes, CLRUN__ONNX_MAX_RANK * 2, &count);
    }
    if (s != CLRUN_OK)
        return s;
    if (count <= 0 && noop)
        return clrun__define_alias(im, n, 0, x);
    bool reduced[CLRUN__ONNX_MAX_RANK] = {false};
    int64_t list[CLRUN__ONNX_MAX_RANK];
    int k = 0;
    for (int i = 0; i < count; i++) {
        int a;
        if ((s = clrun__norm_axis(im, axes[i], rank, "axis", &a)) != CLRUN_OK)
            return s;
        reduced[a] = true;
    }
    for (int d = 0; d < rank; d++) {
        if (count <= 0)
            reduced[d] = true;
        if (reduced[d])
            list[k++] = d;
    }
    if (clrun__is_const(x)) {
        s = fold_reduce(im, n, reduced, keepdims);
        if (s != CLRUN__NOT_FOLDED)
            return s;
        if (clrun__otensor_count(&x->c) == 0)
            return empty_reduce(im, n, reduced, keepdims);
    }
    const reduce_row *row = NULL;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (strcmp(rows[i].onnx, n->op) == 0)
            row = &rows[i];
    if (row == NULL)
        return clrun__unsupported(im, "no mapping for %s", n->op);
    if (k == 0) /* nothing to reduce (a scalar): the elementwise part only */
        return clrun__unsupported(im, "a reduction over no axes is not supported");
    if (row->graph && clrun__graph_has_op(row->graph))
        return reduce_op(im, n, row->graph, x, list, k, keepdims, 0, NULL);
    clrun__value *t;
    if (strcmp(n->op, "ReduceMin") == 0) {
        s = clrun__emit_unary(im, n, "neg", x, -1, &t);
        if (s == CLRUN_OK)
            s = reduce_op(im, n, "reduce_max", t, list, k, keepdims, -1, &t);
        return s == CLRUN_OK ? clrun__emit_unary(im, n, "neg", t, 0, NULL) : s;
    }
    if (strcmp(n->op, "ReduceL1") == 0) {
        s = clrun__emit_unary(im, n, "abs", x, -1, &t);
        return s == CLRUN_OK ? reduce_op(im, n, "reduce_sum", t, list, k, keepdims, 0, NULL) : s;
    }
    if (strcmp(n->op, "ReduceL2") == 0 || strcmp(n->op, "ReduceSumSquare") == 0) {
        bool l2 = n->op[6] == 'L';
        s = clrun__emit_binary(im, n, "mul", x, x, -1, &t);
        if (s == CLRUN_OK)
            s = reduce_op(im, n, "reduce_sum", t, list, k, keepdims, l2 ? -1 : 0, &t);
        return s == CLRUN_OK && l2 ? clrun__emit_unary(im, n, "sqrt", t, 0, NULL) : s;
    }
    if (strcmp(n->op, "ReduceLogSum") == 0) {
        s = reduce_op(im, n, "reduce_sum", x, list, k, keepdims, -1, &t);
        return s == CLRUN_OK ? clrun__emit_unary(im, n, "log", t, 0, NULL) : s;
    }
    if (strcmp(n->op, "ReduceLogSumExp") == 0) {
        clrun__value *m, *mk;
        s = reduce_op(im, n, "reduce_max", x, list, k, 1, -1, &mk);
        if (s == CLRUN_OK)
            s = clrun__emit_binary(im, n, "sub", x, mk, -1, &t);
        if (s == CLRUN_OK)
            s = clrun__emit_unary(im, n, "exp", t, -1, &t);
        if (s == CLRUN_OK)
            s = reduce_op(im, n, "reduce_sum", t, list, k, keepdims, -1, &t);
        if (s == CLRUN_OK)
            s = clrun__emit_unary(im, n, "log", t, -1, &t);
        if (s == CLRUN_OK)
            s = clrun__mv_reshape(im, n, mk, t->c.rank, t->c.dims, -1, &m);
        return s == CLRUN_OK ? clrun__emit_binary(im, n, "add", t, m, 0, NULL) : s;
    }
    return reduce_op(im, n, row->graph, x, list, k, keepdims, 0, NULL); /* refused by name */
}

clrun_status clrun__map_arg(clrun__imp *im, clrun__onode *n)
{
    if (n->n_in < 1 || n->in[0] == NULL)
        return clrun__invalid(im, "%s needs an input", n->op);
    int64_t axis, keepdims, last = 0;
    int a;
    clrun_status s = clrun__oattr_int(im, n, "axis", 0, &axis);
    if (s == CLRUN_OK)
        s = clrun__oattr_int(im, n, "keepdims", 1, &keepdims);
    if (s == CLRUN_OK && n->version >= 12)
        s = clrun__oattr_int(im, n, "select_last_index", 0, &last);
    if (s == CLRUN_OK)
        s = clrun__norm_axis(im, axis, n->in[0]->c.rank, "axis", &a);
    if (s != CLRUN_OK)
        return s;
    clrun__value *x = n->in[0];
    clrun_attr at[3] = {clrun__mk_int("axis", a), clrun__mk_int("keepdims", keepdims),
                        clrun__mk_int("select_last_index", last)};
    const char *op = strcmp(n->op, "ArgMax") == 0 ? "argmax" : "argmin";
    return clrun__emit1(im, n, op, &x, 1, at, last ? 3 : 2, 0, NULL);
}
