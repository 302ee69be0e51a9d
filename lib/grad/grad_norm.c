/* Gradient rules of the normalisations and reductions: softmax, logsoftmax, layernorm, batch
 * norm (inference form: statistics fixed; training rewrites it into batch statistics first),
 * the reductions, global pooling, and the fused loss softmax_xent. Written with reductions and
 * elementwise ops; the statistics a rule needs are computed again from the forward's inputs
 * rather than kept from the forward pass. */
#include <string.h>

#include "grad/grad.h"

static clrun_tensor_id mul(clrun__grad *g, clrun_tensor_id a, clrun_tensor_id b)
{
    return clrun__gemit2(g, "mul", a, b);
}

static clrun_tensor_id sub(clrun__grad *g, clrun_tensor_id a, clrun_tensor_id b)
{
    return clrun__gemit2(g, "sub", a, b);
}

/* A reduction over axes[0..n) keeping them as 1s. */
static clrun_tensor_id reduce(clrun__grad *g, const char *op, clrun_tensor_id x,
                              const int64_t *axes, int n)
{
    clrun_attr attrs[2] = {clrun__gattr_ints("axes", axes, n), clrun__gattr_int("keepdims", 1)};
    return clrun__gemit(g, op, &x, 1, attrs, 2);
}

static int axis_of(const clrun__node *node, int rank, int64_t fallback)
{
    int64_t a = clrun__gnode_int(node, "axis", fallback);
    return (int)(a < 0 ? a + rank : a);
}

static clrun_status softmax_rule(clrun__grad *g, const clrun__node *node, const clrun_tensor_id *dy,
                                 const bool *want, clrun_tensor_id *dx)
{
    (void)want;
    clrun_tensor_id y = node->outputs[0], d = dy[0];
    int rank = clrun__gfwd_type(g, y)->rank;
    int64_t axis = axis_of(node, rank, -1);
    if (strcmp(node->op->name, "softmax") == 0) {
        /* y (dy - sum(dy y)) */
        clrun_tensor_id s = reduce(g, "reduce_sum", mul(g, d, y), &axis, 1);
        dx[0] = mul(g, y, sub(g, d, s));
    } else {
        /* dy - exp(y) sum(dy) */
        clrun_tensor_id s = reduce(g, "reduce_sum", d, &axis, 1);
        dx[0] = sub(g, d, mul(g, clrun__gemit1(g, "exp", y), s));
    }
    return dx[0] < 0 ? CLRUN_ERROR_INVALID_GRAPH : CLRUN_OK;
}

/* A per-feature tensor (gamma, beta) shaped like x's dims axis..rank-1, or [D] for them all. */
static clrun_tensor_id feature_shaped(clrun__grad *g, clrun_tensor_id t, const clrun_tensor_type *x,
                                      int axis)
{
    const clrun_tensor_type *tt = clrun__gtype(g, t);
    if (tt->rank == x->rank - axis)
        return t;
    clrun_tensor_type shaped = {.dtype = tt->dtype, .rank = x->rank - axis};
    for (int d = axis; d < x->rank; d++)
        shaped.shape[d - axis] = x->shape[d];
    return clrun__greshape(g, t, &shaped);
}

static clrun_status layernorm_rule(clrun__grad *g, const clrun__node *node,
                                   const clrun_tensor_id *dy, const bool *want, clrun_tensor_id *dx)
{
    clrun_tensor_id x = node->inputs[0], gamma = node->inputs[1], d = dy[0];
    const clrun_tensor_type *tx = clrun__gfwd_type(g, x);
    int axis = axis_of(node, tx->rank, -1);
    double eps = clrun__gnode_float(node, "eps", 1e-5);
    int64_t axes[CLRUN_MAX_DIMS];
    int n = 0;
    for (int a = axis; a < tx->rank; a++)
        axes[n++] = a;
    clrun_tensor_id mean = reduce(g, "reduce_mean", x, axes, n);
    clrun_tensor_id xc = sub(g, x, mean);
    clrun_tensor_id var = reduce(g, "reduce_mean", mul(g, xc, xc), axes, n);
    clrun_tensor_id rstd = clrun__gemit1(g, "rsqrt", clrun__gscale(g, var, 1.0, eps));
    clrun_tensor_id xhat = mul(g, xc, rstd);
    if (want[0]) {
        clrun_tensor_id dxhat = mul(g, d, feature_shaped(g, gamma, tx, axis));
        clrun_tensor_id m1 = reduce(g, "reduce_mean", dxhat, axes, n);
        clrun_tensor_id m2 = reduce(g, "reduce_mean", mul(g, dxhat, xhat), axes, n);
        dx[0] = mul(g, rstd, sub(g, sub(g, dxhat, m1), mul(g, xhat, m2)));
        if (dx[0] < 0)
            return CLRUN_ERROR_INVALID_GRAPH;
    }
    if (want[1]) {
        const clrun_tensor_type *tg = clrun__gfwd_type(g, gamma);
        clrun_tensor_id prod = mul(g, d, xhat), shaped = feature_shaped(g, gamma, tx, axis);
        clrun_tensor_type target = shaped < 0 ? *tg : *clrun__gtype(g, shaped);
        clrun_tensor_id r = shaped < 0 ? -1 : clrun__gunbroadcast(g, prod, &target);
        dx[1] = clrun__greshape(g, r, tg);
        if (dx[1] < 0)
            return CLRUN_ERROR_INVALID_GRAPH;
    }
    if (node->input_count > 2 && want[2]) {
        clrun_tensor_id beta = node->inputs[2];
        const clrun_tensor_type *tb = clrun__gfwd_type(g, beta);
        clrun_tensor_id shaped = feature_shaped(g, beta, tx, axis);
        clrun_tensor_type target = shaped < 0 ? *tb : *clrun__gtype(g, shaped);
        clrun_tensor_id r = shaped < 0 ? -1 : clrun__gunbroadcast(g, d, &target);
        dx[2] = clrun__greshape(g, r, tb);
        if (dx[2] < 0)
            return CLRUN_ERROR_INVALID_GRAPH;
    }
    return CLRUN_OK;
}

/* A per-channel [C] tensor shaped [C, 1, ...] to broadcast over x [N, C, ...]. */
static clrun_tensor_id per_channel(clrun__grad *g, clrun_tensor_id t, const clrun_tensor_type *x)
{
    clrun_tensor_type shaped = {.dtype = clrun__gtype(g, t)->dtype, .rank = x->rank - 1};
    shaped.shape[0] = x->shape[1];
    for (int d = 1; d < shaped.rank; d++)
        shaped.shape[d] = 1;
    return clrun__greshape(g, t, &shaped);
}

/* batchnorm with its statistics as given (evaluation mode): an affine map per channel. */
static clrun_status batchnorm_rule(clrun__grad *g, const clrun__node *node,
                                   const clrun_tensor_id *dy, const bool *want, clrun_tensor_id *dx)
{
    clrun_tensor_id x = node->inputs[0], scale = node->inputs[1], mean = node->inputs[3];
    clrun_tensor_id var = node->inputs[4], d = dy[0];
    const clrun_tensor_type *tx = clrun__gfwd_type(g, x);
    double eps = clrun__gnode_float(node, "eps", 1e-5);
    clrun_tensor_id rstd = clrun__gemit1(g, "rsqrt", clrun__gscale(g, per_channel(g, var, tx), 1.0, eps));
    if (want[0])
        dx[0] = mul(g, d, mul(g, per_channel(g, scale, tx), rstd));
    if (want[1]) {
        clrun_tensor_id xhat = mul(g, sub(g, x, per_channel(g, mean, tx)), rstd);
        clrun_tensor_id prod = mul(g, d, xhat), shaped = per_channel(g, scale, tx);
        clrun_tensor_type target = shaped < 0 ? *tx : *clrun__gtype(g, shaped);
        clrun_tensor_id r = shaped < 0 ? -1 : clrun__gunbroadcast(g, prod, &target);
        dx[1] = clrun__greshape(g, r, clrun__gfwd_type(g, scale));
    }
    if (want[2]) {
        clrun_tensor_id bias = node->inputs[2];
        clrun_tensor_id shaped = per_channel(g, bias, tx);
        clrun_tensor_type target = shaped < 0 ? *tx : *clrun__gtype(g, shaped);
        clrun_tensor_id r = shaped < 0 ? -1 : clrun__gunbroadcast(g, d, &target);
        dx[2] = clrun__greshape(g, r, clrun__gfwd_type(g, bias));
    }
    for (int i = 0; i < 3; i++)
        if (want[i] && dx[i] < 0)
            return CLRUN_ERROR_INVALID_GRAPH;
    return CLRUN_OK;
}

/* The reduced axes of a reduction node over x's rank: from "axes" (absent or empty: all). */
static int reduced_axes(const clrun__node *node, int rank, bool *reduced)
{
    const clrun_attr *a = clrun__gnode_attr(node, "axes");
    int n = 0;
    for (int d = 0; d < rank; d++)
        reduced[d] = false;
    if (a == NULL || (a->kind == CLRUN_ATTR_INTS && a->count == 0)) {
        for (int d = 0; d < rank; d++)
            reduced[d] = true;
        return rank;
    }
    int count = a->kind == CLRUN_ATTR_INTS ? a->count : 1;
    for (int i = 0; i < count; i++) {
        int64_t v = a->kind == CLRUN_ATTR_INTS ? a->ints[i] : a->i;
        int d = (int)(v < 0 ? v + rank : v);
        if (d >= 0 && d < rank && !reduced[d])
            reduced[d] = true, n++;
    }
    return n;
}

/* dy of a reduction shaped with the reduced axes kept as 1s. */
static clrun_tensor_id kept(clrun__grad *g, clrun_tensor_id d, const clrun_tensor_type *tx,
                            const bool *reduced)
{
    clrun_tensor_type shape = {.dtype = clrun__gtype(g, d)->dtype, .rank = tx->rank};
    for (int k = 0; k < tx->rank; k++)
        shape.shape[k] = reduced[k] ? 1 : tx->shape[k];
    return clrun__greshape(g, d, &shape);
}

static clrun_status reduce_rule(clrun__grad *g, const clrun__node *node, const clrun_tensor_id *dy,
                                const bool *want, clrun_tensor_id *dx)
{
    (void)want;
    const char *op = node->op->name;
    clrun_tensor_id x = node->inputs[0], y = node->outputs[0];
    const clrun_tensor_type *tx = clrun__gfwd_type(g, x);
    bool reduced[CLRUN_MAX_DIMS];
    reduced_axes(node, tx->rank, reduced);
    uint64_t count = 1;
    for (int k = 0; k < tx->rank; k++)
        if (reduced[k])
            count *= (uint64_t)tx->shape[k];
    clrun_tensor_id d = clrun__gexpand(g, kept(g, dy[0], tx, reduced), tx), r = -1;
    if (strcmp(op, "reduce_sum") == 0) {
        r = d;
    } else if (strcmp(op, "reduce_mean") == 0) {
        r = clrun__gscale(g, d, 1.0 / (double)count, 0.0);
    } else if (strcmp(op, "reduce_sum_square") == 0) {
        r = mul(g, d, clrun__gscale(g, x, 2.0, 0.0));
    } else if (strcmp(op, "reduce_l2") == 0) {
        clrun_tensor_id ye = clrun__gexpand(g, kept(g, y, tx, reduced), tx);
        r = mul(g, d, clrun__gemit2(g, "div", x, ye));
    } else {
        /* reduce_max / reduce_min: the elements equal to the extreme. */
        clrun_tensor_id ye = clrun__gexpand(g, kept(g, y, tx, reduced), tx);
        clrun_tensor_id in[3] = {clrun__gemit2(g, "equal", x, ye), d,
                                 clrun__gscalar(g, tx->dtype, 0.0)};
        r = clrun__gemit(g, "where", in, 3, NULL, 0);
    }
    dx[0] = r;
    return r < 0 ? CLRUN_ERROR_INVALID_GRAPH : CLRUN_OK;
}

static clrun_status global_pool_rule(clrun__grad *g, const clrun__node *node,
                                     const clrun_tensor_id *dy, const bool *want, clrun_tensor_id *dx)
{
    (void)want;
    clrun_tensor_id x = node->inputs[0], y = node->outputs[0];
    const clrun_tensor_type *tx = clrun__gfwd_type(g, x);
    bool reduced[CLRUN_MAX_DIMS];
    uint64_t count = 1;
    for (int k = 0; k < tx->rank; k++) {
        reduced[k] = k >= 2;
        if (k >= 2)
            count *= (uint64_t)tx->shape[k];
    }
    clrun_tensor_id d = clrun__gexpand(g, kept(g, dy[0], tx, reduced), tx);
    if (strcmp(node->op->name, "global_avgpool") == 0) {
        dx[0] = clrun__gscale(g, d, 1.0 / (double)count, 0.0);
    } else {
        clrun_tensor_id ye = clrun__gexpand(g, kept(g, y, tx, reduced), tx);
        clrun_tensor_id in[3] = {clrun__gemit2(g, "equal", x, ye), d,
                                 clrun__gscalar(g, tx->dtype, 0.0)};
        dx[0] = clrun__gemit(g, "where", in, 3, NULL, 0);
    }
    return dx[0] < 0 ? CLRUN_ERROR_INVALID_GRAPH : CLRUN_OK;
}

static clrun_status xent_rule(clrun__grad *g, const clrun__node *node, const clrun_tensor_id *dy,
                              const bool *want, clrun_tensor_id *dx)
{
    (void)want;
    clrun_tensor_id in[3] = {node->inputs[0], node->inputs[1], dy[0]};
    const clrun_attr *ignore = clrun__gnode_attr(node, "ignore_index");
    dx[0] = clrun__gemit(g, "softmax_xent_grad", in, 3, ignore, ignore ? 1 : 0);
    return dx[0] < 0 ? CLRUN_ERROR_INVALID_GRAPH : CLRUN_OK;
}

const clrun__grad_rule clrun__grad_rules_norm[] = {
    {"softmax", softmax_rule, 0x1u},
    {"logsoftmax", softmax_rule, 0x1u},
    {"layernorm", layernorm_rule, 0x7u},
    {"batchnorm", batchnorm_rule, 0x7u},
    {"reduce_sum", reduce_rule, 0x1u},
    {"reduce_mean", reduce_rule, 0x1u},
    {"reduce_max", reduce_rule, 0x1u},
    {"reduce_min", reduce_rule, 0x1u},
    {"reduce_l2", reduce_rule, 0x1u},
    {"reduce_sum_square", reduce_rule, 0x1u},
    {"global_avgpool", global_pool_rule, 0x1u},
    {"global_maxpool", global_pool_rule, 0x1u},
    {"softmax_xent", xent_rule, 0x1u},
    {NULL, NULL, 0},
};
