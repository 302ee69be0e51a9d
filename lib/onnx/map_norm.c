/* Normalisations (BatchNormalization, InstanceNormalization, LayerNormalization) and Softmax,
 * LogSoftmax: the graph's ops where this build has them, compositions that compute the same
 * values otherwise. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "onnx/host_eval.h"
#include "onnx/map.h"

/* ---- normalisations ---- */

/* A per-channel vector [C] as [C, 1, ...] against an input of rank `rank` (channels at 1). */
static clrun_status per_channel(clrun__imp *im, clrun__onode *n, clrun__value *v, int rank, clrun__value **r)
{
    int64_t dims[CLRUN__ONNX_MAX_RANK];
    int k = 0;
    dims[k++] = (int64_t)clrun__otensor_count(&v->c);
    for (int d = 2; d < rank; d++)
        dims[k++] = 1;
    return clrun__mv_reshape(im, n, v, k, dims, -1, r);
}

/* A per-channel vector [C] as [C, 1, ...] against an input of rank `rank` (channels at 1). */
static clrun_status per_channel(clrun__imp *im, clrun__onode *n, clrun__value *v, int rank, clrun__value **r);

/* Training mode (opset 14): the statistics of this batch normalise it, and the running ones
 * move toward them: running = input · momentum + current · (1 - momentum), the variance the
 * biased one (the ONNX reference's). */
static clrun_status batchnorm_training(clrun__imp *im, clrun__onode *n, double eps, double momentum)
{
    clrun__value *x = n->in[0], *scale = n->in[1], *bias = n->in[2], *mean = n->in[3], *var = n->in[4];
    int rank = x->c.rank;
    if (rank < 2)
        return clrun__invalid(im, "BatchNormalization needs [N, C, ...]");
    int64_t axes[CLRUN__ONNX_MAX_RANK];
    int k = 0;
    for (int d = 0; d < rank; d++)
        if (d != 1)
            axes[k++] = d;
    clrun_attr keep[2] = {clrun__mk_ints("axes", axes, k), clrun__mk_int("keepdims", 1)};
    clrun_attr flat[2] = {clrun__mk_ints("axes", axes, k), clrun__mk_int("keepdims", 0)};
    clrun__value *cm, *cmk, *d, *sq, *cv, *cvk, *den, *y, *s_r, *b_r, *t;
    clrun__value *e = clrun__scalar_value(im, x->c.elem, eps, rank);
    if (e == NULL)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    clrun_status s = clrun__emit1(im, n, "reduce_mean", &x, 1, keep, 2, -1, &cmk);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "sub", x, cmk, -1, &d);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "mul", d, d, -1, &sq);
    if (s == CLRUN_OK)
        s = clrun__emit1(im, n, "reduce_mean", &sq, 1, keep, 2, -1, &cvk);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "add", cvk, e, -1, &den);
    if (s == CLRUN_OK)
        s = clrun__emit_unary(im, n, "sqrt", den, -1, &den);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "div", d, den, -1, &y);
    if (s == CLRUN_OK)
        s = per_channel(im, n, scale, rank, &s_r);
    if (s == CLRUN_OK)
        s = per_channel(im, n, bias, rank, &b_r);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "mul", y, s_r, -1, &y);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "add", y, b_r, 0, NULL);
    for (int out = 1; s == CLRUN_OK && out < 3; out++) {
        if (!clrun__out(im, n, out))
            continue;
        clrun__value *input = out == 1 ? mean : var, *m = clrun__scalar_value(im, x->c.elem, momentum, 1),
                     *rest = clrun__scalar_value(im, x->c.elem, 1 - momentum, 1);
        if (!m || !rest)
            return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        s = clrun__emit1(im, n, "reduce_mean", out == 1 ? &x : &sq, 1, flat, 2, -1, out == 1 ? &cm : &cv);
        if (s == CLRUN_OK)
            s = clrun__emit_binary(im, n, "mul", input, m, -1, &t);
        if (s == CLRUN_OK)
            s = clrun__emit_binary(im, n, "mul", out == 1 ? cm : cv, rest, -1, &input);
        if (s == CLRUN_OK)
            s = clrun__emit_binary(im, n, "add", t, input, out, NULL);
    }
    for (int out = 3; s == CLRUN_OK && out < n->n_out; out++)
        if (clrun__out(im, n, out))
            s = clrun__unsupported(im, "output %d (saved statistics of opset < 14) is not supported", out);
    return s;
}

clrun_status clrun__map_batchnorm(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 5);
    double eps, momentum;
    int64_t spatial = 1, training = 0;
    if (s == CLRUN_OK)
        s = clrun__oattr_float(im, n, "epsilon", 1e-5, &eps);
    if (s == CLRUN_OK)
        s = clrun__oattr_float(im, n, "momentum", 0.9, &momentum);
    if (s == CLRUN_OK && n->version < 9 && n->version >= 7)
        s = clrun__oattr_int(im, n, "spatial", 1, &spatial);
    if (s == CLRUN_OK && n->version < 7) {
        clrun__oattr_ignore(im, n, "is_test");
        s = clrun__oattr_int(im, n, "spatial", 1, &spatial);
    }
    if (n->version < 6)
        clrun__oattr_ignore(im, n, "consumed_inputs");
    if (s == CLRUN_OK && n->version >= 14)
        s = clrun__oattr_int(im, n, "training_mode", 0, &training);
    if (s != CLRUN_OK)
        return s;
    if (training)
        return batchnorm_training(im, n, eps, momentum);
    for (int i = 1; i < n->n_out; i++)
        if (clrun__out(im, n, i))
            return clrun__unsupported(im, "the running statistics outputs (training) are not supported");
    clrun__value *x = n->in[0], *scale = n->in[1], *bias = n->in[2], *mean = n->in[3], *var = n->in[4];
    int rank = x->c.rank;
    if (rank < 2)
        return clrun__invalid(im, "BatchNormalization needs [N, C, ...]");
    /* The graph's batchnorm where this build has it: a later pass can fold it into a convolution
     * before it. */
    clrun__value *all[5] = {x, scale, bias, mean, var};
    clrun_attr e_at = clrun__mk_float("eps", eps);
    if (spatial && clrun__op_accepts("batchnorm", all, 5, &e_at, 1))
        return clrun__emit1(im, n, "batchnorm", all, 5, &e_at, 1, 0, NULL);
    /* y = (x - mean) · s + B with s = scale / sqrt(var + eps): folded on the host in double when
     * the statistics are constants (as in every exported model), else computed on the device. */
    clrun__value *s_v;
    if (clrun__is_const(scale) && clrun__is_const(var)) {
        clrun__otensor t;
        if (clrun__otensor_count(&scale->c) != clrun__otensor_count(&var->c) || !clrun__otensor_copy(&t, &scale->c))
            return clrun__otensor_count(&scale->c) != clrun__otensor_count(&var->c)
                       ? clrun__invalid(im, "scale and var differ in size") : CLRUN__OOM(im);
        for (uint64_t i = 0; i < clrun__otensor_count(&t); i++)
            clrun__otensor_set_real(&t, i, clrun__otensor_get_real(&scale->c, i) /
                                               sqrt(clrun__otensor_get_real(&var->c, i) + eps));
        if ((s_v = clrun__const_value(im, &t)) == NULL)
            return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    } else {
        clrun__value *e = clrun__scalar_value(im, var->c.elem, eps, var->c.rank), *t;
        if (e == NULL)
            return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        s = clrun__emit_binary(im, n, "add", var, e, -1, &t);
        if (s == CLRUN_OK)
            s = clrun__emit1(im, n, "sqrt", &t, 1, NULL, 0, -1, &t);
        if (s == CLRUN_OK)
            s = clrun__emit_binary(im, n, "div", scale, t, -1, &s_v);
        if (s != CLRUN_OK)
            return s;
    }
    clrun__value *mean_r, *s_r, *b_r, *t;
    if (spatial) {
        s = per_channel(im, n, mean, rank, &mean_r);
        if (s == CLRUN_OK)
            s = per_channel(im, n, s_v, rank, &s_r);
        if (s == CLRUN_OK)
            s = per_channel(im, n, bias, rank, &b_r);
    } else { /* statistics per activation: [C, D1, ...] already */
        mean_r = mean, s_r = s_v, b_r = bias;
    }
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "sub", x, mean_r, -1, &t);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "mul", t, s_r, -1, &t);
    return s == CLRUN_OK ? clrun__emit_binary(im, n, "add", t, b_r, 0, NULL) : s;
}

/* A constant [d] of ones or zeros. */
static clrun__value *filled(clrun__imp *im, int elem, int64_t d, double value)
{
    clrun__otensor t;
    if (!clrun__otensor_alloc(&t, elem, 1, &d)) {
        CLRUN__OOM(im);
        return NULL;
    }
    for (int64_t i = 0; i < d; i++)
        clrun__otensor_set_real(&t, (uint64_t)i, value);
    return clrun__const_value(im, &t);
}

/* layernorm of x over its dims [axis, rank) with gamma and beta of D elements (values or NULL). */
static clrun_status layernorm_rows(clrun__imp *im, clrun__onode *n, clrun__value *x, int axis,
                                   clrun__value *gamma, clrun__value *beta, double eps, int out,
                                   clrun__value **r)
{
    int64_t rows[2] = {1, 1};
    for (int d = 0; d < x->c.rank; d++)
        rows[d < axis ? 0 : 1] *= x->c.dims[d];
    int64_t D = rows[1];
    clrun_status s = CLRUN_OK;
    if (gamma && clrun__otensor_count(&gamma->c) != (uint64_t)D) {
        if (!clrun__is_const(gamma) || clrun__otensor_count(&gamma->c) != 1)
            return clrun__unsupported(im, "a scale that broadcasts to the normalised shape is not supported");
    }
    if (gamma == NULL && (gamma = filled(im, x->c.elem, D, 1)) == NULL)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    if (beta == NULL && (beta = filled(im, x->c.elem, D, 0)) == NULL)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    if (clrun__otensor_count(&gamma->c) != (uint64_t)D || clrun__otensor_count(&beta->c) != (uint64_t)D)
        return clrun__unsupported(im, "scale and bias must have the normalised shape");
    clrun__value *x2 = x, *y;
    if (s == CLRUN_OK)
        s = clrun__mv_reshape(im, n, x, 2, rows, -1, &x2);
    if (s == CLRUN_OK)
        s = clrun__mv_reshape(im, n, gamma, 1, &D, -1, &gamma);
    if (s == CLRUN_OK)
        s = clrun__mv_reshape(im, n, beta, 1, &D, -1, &beta);
    clrun_attr at = clrun__mk_float("eps", eps);
    clrun__value *in[3] = {x2, gamma, beta};
    if (s == CLRUN_OK)
        s = clrun__emit1(im, n, "layernorm", in, 3, &at, 1, -1, &y);
    return s == CLRUN_OK ? clrun__mv_reshape(im, n, y, x->c.rank, x->c.dims, out, r) : s;
}

clrun_status clrun__map_layernorm(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 2);
    int64_t axis, stash;
    double eps;
    int a;
    if (s == CLRUN_OK)
        s = clrun__oattr_int(im, n, "axis", -1, &axis);
    if (s == CLRUN_OK)
        s = clrun__oattr_float(im, n, "epsilon", 1e-5, &eps);
    if (s == CLRUN_OK)
        s = clrun__oattr_int(im, n, "stash_type", 1, &stash);
    if (s == CLRUN_OK)
        s = clrun__norm_axis(im, axis, n->in[0]->c.rank, "axis", &a);
    if (s != CLRUN_OK)
        return s;
    if (stash != 1)
        return clrun__unsupported(im, "stash_type=%" PRId64 " is not supported", stash);
    s = layernorm_rows(im, n, n->in[0], a, n->in[1], n->n_in > 2 ? n->in[2] : NULL, eps, 0, NULL);
    if (s != CLRUN_OK || (!clrun__out(im, n, 1) && !clrun__out(im, n, 2)))
        return s;
    /* The statistics, as the training graph reads them: the mean and 1 / sqrt(var + eps) over the
     * normalised dims, kept as dims of 1. */
    clrun__value *x = n->in[0], *mean, *d, *var, *t, *one, *e;
    int64_t axes[CLRUN__ONNX_MAX_RANK];
    for (int k = a; k < x->c.rank; k++)
        axes[k - a] = k;
    clrun_attr at[2] = {clrun__mk_ints("axes", axes, x->c.rank - a), clrun__mk_int("keepdims", 1)};
    s = clrun__emit1(im, n, "reduce_mean", &x, 1, at, 2, clrun__out(im, n, 1) ? 1 : -1, &mean);
    if (s != CLRUN_OK || !clrun__out(im, n, 2))
        return s;
    if (!(one = clrun__scalar_value(im, x->c.elem, 1, x->c.rank)) ||
        !(e = clrun__scalar_value(im, x->c.elem, eps, x->c.rank)))
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    s = clrun__emit_binary(im, n, "sub", x, mean, -1, &d);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "mul", d, d, -1, &t);
    if (s == CLRUN_OK)
        s = clrun__emit1(im, n, "reduce_mean", &t, 1, at, 2, -1, &var);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "add", var, e, -1, &t);
    if (s == CLRUN_OK)
        s = clrun__emit1(im, n, "sqrt", &t, 1, NULL, 0, -1, &t);
    return s == CLRUN_OK ? clrun__emit_binary(im, n, "div", one, t, 2, NULL) : s;
}

clrun_status clrun__map_instancenorm(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 3);
    double eps;
    if (n->version < 6)
        clrun__oattr_ignore(im, n, "consumed_inputs");
    if (s == CLRUN_OK)
        s = clrun__oattr_float(im, n, "epsilon", 1e-5, &eps);
    if (s != CLRUN_OK)
        return s;
    clrun__value *x = n->in[0], *scale, *bias, *y;
    int rank = x->c.rank;
    if (rank < 3)
        return clrun__invalid(im, "InstanceNormalization needs [N, C, D...]");
    clrun__value *all[3] = {x, n->in[1], n->in[2]};
    clrun_attr e_at = clrun__mk_float("eps", eps);
    if (clrun__op_accepts("instancenorm", all, 3, &e_at, 1))
        return clrun__emit1(im, n, "instancenorm", all, 3, &e_at, 1, 0, NULL);
    /* Each (n, c) row normalised over the spatial dims, then the channel's scale and bias. */
    s = layernorm_rows(im, n, x, 2, NULL, NULL, eps, -1, &y);
    if (s == CLRUN_OK)
        s = per_channel(im, n, n->in[1], rank, &scale);
    if (s == CLRUN_OK)
        s = per_channel(im, n, n->in[2], rank, &bias);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "mul", y, scale, -1, &y);
    return s == CLRUN_OK ? clrun__emit_binary(im, n, "add", y, bias, 0, NULL) : s;
}

/* ---- Softmax, LogSoftmax ---- */

clrun_status clrun__emit_softmax(clrun__imp *im, clrun__onode *n, clrun__value *x, int a, bool log, int out,
                                 clrun__value **r)
{
    const char *op = log ? "logsoftmax" : "softmax";
    clrun__value *y;
    /* a scalar (clrun__norm_axis takes its axis 0) has no axis to swap: the op's type rule
     * refuses it */
    if (a == x->c.rank - 1 || x->c.rank < 1)
        return clrun__emit1(im, n, op, &x, 1, NULL, 0, out, r);
    clrun_attr at = clrun__mk_int("axis", a);
    if (clrun__op_accepts(op, &x, 1, &at, 1))
        return clrun__emit1(im, n, op, &x, 1, &at, 1, out, r);
    int perm[CLRUN__ONNX_MAX_RANK];
    for (int d = 0; d < x->c.rank; d++)
        perm[d] = d;
    perm[a] = x->c.rank - 1;
    perm[x->c.rank - 1] = a; /* a swap is its own inverse */
    clrun_status s = clrun__mv_transpose(im, n, x, perm, -1, &y);
    if (s == CLRUN_OK)
        s = clrun__emit1(im, n, op, &y, 1, NULL, 0, -1, &y);
    return s == CLRUN_OK ? clrun__mv_transpose(im, n, y, perm, out, r) : s;
}

clrun_status clrun__map_softmax(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 1);
    int64_t axis;
    int a;
    bool log = strcmp(n->op, "LogSoftmax") == 0;
    clrun__value *x = n->in[0], *y;
    if (s == CLRUN_OK)
        s = clrun__oattr_int(im, n, "axis", n->version >= 13 ? -1 : 1, &axis);
    if (s == CLRUN_OK)
        s = clrun__norm_axis(im, axis, x->c.rank, "axis", &a);
    if (s != CLRUN_OK)
        return s;
    if (n->version < 13) { /* over the flattened dims [axis, rank) */
        int64_t rows[2] = {1, 1};
        for (int d = 0; d < x->c.rank; d++)
            rows[d < a ? 0 : 1] *= x->c.dims[d];
        s = clrun__mv_reshape(im, n, x, 2, rows, -1, &y);
        if (s == CLRUN_OK)
            s = clrun__emit_softmax(im, n, y, 1, log, -1, &y);
        return s == CLRUN_OK ? clrun__mv_reshape(im, n, y, x->c.rank, x->c.dims, 0, NULL) : s;
    }
    return clrun__emit_softmax(im, n, x, a, log, 0, NULL);
}

/* ---- GroupNormalization (opsets 18, 21) ---- */

/* x [N, C, D...] as [N, G, C/G·D...] normalised per row, then scaled and shifted: opset 18's
 * scale and bias per group ([G], applied to the rows), 21's per channel ([C]). */
clrun_status clrun__map_groupnorm(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 3);
    int64_t groups = 0, stash = 1;
    double eps;
    if (s == CLRUN_OK)
        s = clrun__oattr_float(im, n, "epsilon", 1e-5, &eps);
    if (s == CLRUN_OK)
        s = clrun__oattr_int(im, n, "num_groups", 0, &groups);
    if (s == CLRUN_OK && clrun__oattr_find(im, n, "num_groups") == NULL)
        s = clrun__invalid(im, "attribute 'num_groups' is required");
    if (s == CLRUN_OK && n->version >= 21)
        s = clrun__oattr_int(im, n, "stash_type", 1, &stash);
    if (s != CLRUN_OK)
        return s;
    if (stash != 1)
        return clrun__unsupported(im, "stash_type %" PRId64 " is not supported (1 is)", stash);
    clrun__value *x = n->in[0], *scale = n->in[1], *bias = n->in[2], *y;
    int rank = x->c.rank;
    if (rank < 2)
        return clrun__invalid(im, "GroupNormalization needs [N, C, ...]");
    int64_t channels = x->c.dims[1];
    if (groups < 1 || channels % groups)
        return clrun__invalid(im, "num_groups %" PRId64 " does not divide %" PRId64 " channels", groups, channels);
    int64_t per = n->version >= 21 ? channels : groups;
    if (clrun__otensor_count(&scale->c) != (uint64_t)per || clrun__otensor_count(&bias->c) != (uint64_t)per)
        return clrun__invalid(im, "scale and bias must have %" PRId64 " elements (%s, opset %d)", per,
                              n->version >= 21 ? "one per channel" : "one per group", n->version);
    int64_t rows[3] = {x->c.dims[0], groups, channels / groups};
    for (int d = 2; d < rank; d++)
        rows[2] *= x->c.dims[d];
    s = clrun__mv_reshape(im, n, x, 3, rows, -1, &y);
    if (s == CLRUN_OK)
        s = layernorm_rows(im, n, y, 2, NULL, NULL, eps, -1, &y);
    if (s != CLRUN_OK)
        return s;
    if (n->version < 21) {
        int64_t col[2] = {groups, 1};
        s = clrun__mv_reshape(im, n, scale, 2, col, -1, &scale);
        if (s == CLRUN_OK)
            s = clrun__mv_reshape(im, n, bias, 2, col, -1, &bias);
        if (s == CLRUN_OK)
            s = clrun__emit_binary(im, n, "mul", y, scale, -1, &y);
        if (s == CLRUN_OK)
            s = clrun__emit_binary(im, n, "add", y, bias, -1, &y);
        return s == CLRUN_OK ? clrun__mv_reshape(im, n, y, rank, x->c.dims, 0, NULL) : s;
    }
    s = clrun__mv_reshape(im, n, y, rank, x->c.dims, -1, &y);
    if (s == CLRUN_OK)
        s = per_channel(im, n, scale, rank, &scale);
    if (s == CLRUN_OK)
        s = per_channel(im, n, bias, rank, &bias);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "mul", y, scale, -1, &y);
    return s == CLRUN_OK ? clrun__emit_binary(im, n, "add", y, bias, 0, NULL) : s;
}
