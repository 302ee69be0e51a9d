/* The optimizers of domain ai.onnx.preview.training (opset 1): Adagrad, Adam and Momentum, as
 * elementwise graph ops over each tensor they update, in the order of the ONNX spec's pseudo code
 * (and its reference, onnx/backend/test/case/node/{adagrad,adam,momentum}.py).
 *
 * Inputs are R (the learning rate, a float scalar), T (the update count, an int64 scalar), then n
 * of each group: X..., G..., and V... and/or H...; outputs X_new..., then V_new... and/or H_new....
 * The factors that depend on T (Adagrad's R / (1 + T·decay_factor), Adam's bias correction,
 * Momentum's beta at the first update) are computed from T at run time with graph ops (T cast to
 * the tensors' float type, where(greater(T, 0), ...)); when R or T is known at load, what depends
 * only on constants is computed on the host in double, as the reference does, and rounded once. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "onnx/map.h"

/* One optimizer node: its float type and the scalars shared by every tensor it updates. */
typedef struct train {
    clrun__imp *im;
    clrun__onode *n;
    int elem;            /* the float element type of the tensors updated (every X's) */
    int count;           /* tensors updated (n) */
    clrun__value *r;     /* R: a host scalar or a device tensor of rank 0 */
    clrun__value *t;     /* T: a host scalar or a device int64 tensor of rank 0 */
    clrun__value *t_float; /* T cast to the float type, made at its first use */
    bool t_known;
    int64_t t_value;     /* T when known at load */
} train;

/* The scalars (R, T and what is computed from them and the attributes) are host scalars, doubles
 * of rank 0 that fold as the reference computes them, or device tensors of rank 0. The tensors
 * updated are never folded: they go to the device as they are. */
static clrun__value *host(train *c, double value)
{
    return clrun__scalar_value(c->im, CLRUN__ONNX_DOUBLE, value, 0);
}

/* Scalar v in the node's float type: a host scalar rounded once to it (a graph constant at its
 * first use), a device scalar of another type (T, or R of the other float type) cast. */
static clrun_status typed(train *c, clrun__value *v, clrun__value **r)
{
    if (clrun__is_const(v)) {
        *r = clrun__scalar_value(c->im, c->elem, clrun__otensor_get_real(&v->c, 0), 0);
        return *r ? CLRUN_OK : CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    if (v->c.elem == c->elem) {
        *r = v;
        return CLRUN_OK;
    }
    if (v == c->t && c->t_float) {
        *r = c->t_float;
        return CLRUN_OK;
    }
    clrun_dtype to;
    if (!clrun__onnx_elem_dtype(c->elem, &to))
        return clrun__invalid(c->im, "internal: no dtype for the tensors' type");
    clrun_attr a = clrun__mk_int("to", (int64_t)to);
    clrun_status s = clrun__emit1(c->im, c->n, "cast", &v, 1, &a, 1, -1, r);
    if (s == CLRUN_OK && v == c->t)
        c->t_float = *r;
    return s;
}

/* op(a, b) on scalars (b NULL for sqrt): on the host in double when both are host scalars, else
 * a graph node in the node's float type. */
static clrun_status sop(train *c, const char *op, clrun__value *a, clrun__value *b, clrun__value **r)
{
    bool unary = strcmp(op, "sqrt") == 0;
    if (a == NULL || (b == NULL && !unary))
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY; /* a host scalar that could not be made */
    if (clrun__is_const(a) && (unary || clrun__is_const(b))) {
        double x = clrun__otensor_get_real(&a->c, 0), y = unary ? 0 : clrun__otensor_get_real(&b->c, 0);
        double z = strcmp(op, "add") == 0 ? x + y : strcmp(op, "sub") == 0 ? x - y
                 : strcmp(op, "mul") == 0 ? x * y : strcmp(op, "div") == 0 ? x / y
                 : strcmp(op, "pow") == 0 ? pow(x, y) : sqrt(x);
        *r = host(c, z);
        return *r ? CLRUN_OK : CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    clrun__value *ta, *tb = NULL;
    clrun_status s = typed(c, a, &ta);
    if (s == CLRUN_OK && !unary)
        s = typed(c, b, &tb);
    if (s != CLRUN_OK)
        return s;
    return unary ? clrun__emit_unary(c->im, c->n, op, ta, -1, r)
                 : clrun__emit_binary(c->im, c->n, op, ta, tb, -1, r);
}

/* T > 0 ? a : b, for scalars: chosen at load when T is known, else a `where` on the device. */
static clrun_status if_started(train *c, clrun__value *a, clrun__value *b, clrun__value **r)
{
    if (c->t_known) {
        *r = c->t_value > 0 ? a : b;
        return *r ? CLRUN_OK : CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    if (a == NULL || b == NULL)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    clrun__value *zero = clrun__scalar_value(c->im, CLRUN__ONNX_INT64, 0, 0), *in[3] = {NULL, NULL, NULL};
    if (zero == NULL)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    clrun_status s = clrun__emit_binary(c->im, c->n, "greater", c->t, zero, -1, &in[0]);
    if (s == CLRUN_OK)
        s = typed(c, a, &in[1]);
    if (s == CLRUN_OK)
        s = typed(c, b, &in[2]);
    return s == CLRUN_OK ? clrun__emit1(c->im, c->n, "where", in, 3, NULL, 0, -1, r) : s;
}

/* op(a, b) on the tensors, into output `out` of the node or a temporary (-1). */
static clrun_status top(train *c, const char *op, clrun__value *a, clrun__value *b, int out, clrun__value **r)
{
    return b ? clrun__emit_binary(c->im, c->n, op, a, b, out, r)
             : clrun__emit_unary(c->im, c->n, op, a, out, r);
}

/* An attribute's value as a device scalar of the node's float type. */
static clrun_status constant(train *c, double value, clrun__value **r)
{
    clrun__value *h = host(c, value);
    return h ? typed(c, h, r) : CLRUN_ERROR_OUT_OF_HOST_MEMORY;
}

/* A scalar input (R or T) of rank 0: a host scalar when known at load, else a device tensor
 * (reshaped when it is one element of rank > 0). */
static clrun_status scalar_input(train *c, clrun__value *v, clrun__value **r)
{
    static const int64_t none[1] = {1};
    if (clrun__is_const(v)) {
        *r = host(c, clrun__otensor_get_real(&v->c, 0));
        return *r ? CLRUN_OK : CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    if (v->c.rank == 0) {
        *r = v;
        return CLRUN_OK;
    }
    return clrun__mv_reshape(c->im, c->n, v, 0, none, -1, r);
}

/* The inputs: R, T and `groups` groups of n tensors (their names: "X, G, H"), and `out_groups`
 * groups of n outputs; every tensor of group member i has X_i's type and shape. */
static clrun_status begin(train *c, clrun__imp *im, clrun__onode *n, int groups, const char *names,
                          int out_groups)
{
    memset(c, 0, sizeof *c);
    c->im = im;
    c->n = n;
    if (n->n_in < 2 + groups || (n->n_in - 2) % groups != 0)
        return clrun__invalid(im, "%s takes R, T and n each of %s (2 + %d·n inputs, n >= 1): %d inputs "
                              "do not make that", n->op, names, groups, n->n_in);
    c->count = (n->n_in - 2) / groups;
    if (n->n_out != out_groups * c->count)
        return clrun__invalid(im, "%s with n = %d (from its inputs) has %d·n = %d outputs, not %d", n->op,
                              c->count, out_groups, out_groups * c->count, n->n_out);
    clrun_status s = clrun__need_inputs(im, n, n->n_in);
    if (s != CLRUN_OK)
        return s;
    const char *const *in = (const char *const *)n->proto->input;
    const clrun__value *r = n->in[0], *t = n->in[1];
    char e1[32], e2[32], d1[96], d2[96];
    if ((r->c.elem != CLRUN__ONNX_FLOAT && r->c.elem != CLRUN__ONNX_DOUBLE) ||
        clrun__otensor_count(&r->c) != 1)
        return clrun__invalid(im, "input 0 '%s' (R) must be one float or double, not %s %s", in[0],
                              clrun__onnx_elem_name(r->c.elem, e1, sizeof e1),
                              clrun__onnx_dims_text(r->c.rank, r->c.dims, d1, sizeof d1));
    if (t->c.elem != CLRUN__ONNX_INT64 || clrun__otensor_count(&t->c) != 1)
        return clrun__invalid(im, "input 1 '%s' (T) must be one int64, not %s %s", in[1],
                              clrun__onnx_elem_name(t->c.elem, e1, sizeof e1),
                              clrun__onnx_dims_text(t->c.rank, t->c.dims, d1, sizeof d1));
    c->elem = n->in[2]->c.elem;
    for (int i = 0; i < c->count; i++) {
        const clrun__value *x = n->in[2 + i];
        if (x->c.elem != CLRUN__ONNX_FLOAT && x->c.elem != CLRUN__ONNX_DOUBLE)
            return clrun__invalid(im, "input %d '%s' is %s: %s updates float and double tensors", 2 + i,
                                  in[2 + i], clrun__onnx_elem_name(x->c.elem, e1, sizeof e1), n->op);
        if (x->c.elem != c->elem)
            return clrun__invalid(im, "input %d '%s' is %s and input 2 '%s' %s: the tensors one node "
                                  "updates have one type", 2 + i, in[2 + i],
                                  clrun__onnx_elem_name(x->c.elem, e1, sizeof e1), in[2],
                                  clrun__onnx_elem_name(c->elem, e2, sizeof e2));
        for (int g = 1; g < groups; g++) {
            int k = 2 + g * c->count + i;
            const clrun__value *y = n->in[k];
            if (y->c.elem != x->c.elem || y->c.rank != x->c.rank ||
                memcmp(y->c.dims, x->c.dims, (size_t)x->c.rank * sizeof x->c.dims[0]) != 0)
                return clrun__invalid(im, "input %d '%s' is %s %s, but the tensor it goes with, input %d "
                                      "'%s', is %s %s", k, in[k],
                                      clrun__onnx_elem_name(y->c.elem, e1, sizeof e1),
                                      clrun__onnx_dims_text(y->c.rank, y->c.dims, d1, sizeof d1), 2 + i,
                                      in[2 + i], clrun__onnx_elem_name(x->c.elem, e2, sizeof e2),
                                      clrun__onnx_dims_text(x->c.rank, x->c.dims, d2, sizeof d2));
        }
    }
    s = scalar_input(c, n->in[0], &c->r);
    if (s == CLRUN_OK)
        s = scalar_input(c, n->in[1], &c->t);
    if (s != CLRUN_OK)
        return s;
    if (clrun__is_const(c->t)) {
        c->t_known = true;
        c->t_value = clrun__otensor_get_int(&t->c, 0);
    }
    return CLRUN_OK;
}

/* Attribute `name`, which the op requires (Momentum's). */
static clrun_status required_float(clrun__imp *im, clrun__onode *n, const char *name, double *out)
{
    clrun_status s = clrun__oattr_float(im, n, name, 0, out);
    if (s == CLRUN_OK && clrun__oattr_find(im, n, name) == NULL)
        s = clrun__invalid(im, "attribute '%s' is required", name);
    return s;
}

/* G_regularized = norm_coefficient·X + G (norm: the device scalar). */
static clrun_status regularized(train *c, clrun__value *norm, clrun__value *x, clrun__value *g,
                                clrun__value **r)
{
    clrun__value *t;
    clrun_status s = top(c, "mul", norm, x, -1, &t);
    return s == CLRUN_OK ? top(c, "add", t, g, -1, r) : s;
}

/* Adagrad: r = R / (1 + T·decay_factor); G_reg = norm_coefficient·X + G;
 * H_new = H + G_reg·G_reg; X_new = X − r·G_reg / (√H_new + epsilon). */
clrun_status clrun__map_adagrad(clrun__imp *im, clrun__onode *n)
{
    double decay, eps, norm;
    clrun_status s = clrun__oattr_float(im, n, "decay_factor", 0, &decay);
    if (s == CLRUN_OK)
        s = clrun__oattr_float(im, n, "epsilon", 1e-6f, &eps);
    if (s == CLRUN_OK)
        s = clrun__oattr_float(im, n, "norm_coefficient", 0, &norm);
    train c;
    if (s == CLRUN_OK)
        s = begin(&c, im, n, 3, "X, G, H", 2);
    if (s != CLRUN_OK)
        return s;
    clrun__value *td, *den, *rate, *rd, *nd, *ed;
    s = sop(&c, "mul", c.t, host(&c, decay), &td);
    if (s == CLRUN_OK)
        s = sop(&c, "add", host(&c, 1), td, &den);
    if (s == CLRUN_OK)
        s = sop(&c, "div", c.r, den, &rate);
    if (s == CLRUN_OK)
        s = typed(&c, rate, &rd);
    if (s == CLRUN_OK)
        s = constant(&c, norm, &nd);
    if (s == CLRUN_OK)
        s = constant(&c, eps, &ed);
    const int k = c.count;
    for (int i = 0; s == CLRUN_OK && i < k; i++) {
        clrun__value *x = n->in[2 + i], *g = n->in[2 + k + i], *h = n->in[2 + 2 * k + i];
        clrun__value *gr, *gg, *hn, *hs, *step;
        s = regularized(&c, nd, x, g, &gr);
        if (s == CLRUN_OK)
            s = top(&c, "mul", gr, gr, -1, &gg);
        if (s == CLRUN_OK)
            s = top(&c, "add", h, gg, k + i, &hn);
        if (s == CLRUN_OK)
            s = top(&c, "sqrt", hn, NULL, -1, &hs);
        if (s == CLRUN_OK)
            s = top(&c, "add", hs, ed, -1, &hs);
        if (s == CLRUN_OK)
            s = top(&c, "mul", rd, gr, -1, &step);
        if (s == CLRUN_OK)
            s = top(&c, "div", step, hs, -1, &step);
        if (s == CLRUN_OK)
            s = top(&c, "sub", x, step, i, NULL);
    }
    return s;
}

/* Adam: G_reg = norm_coefficient·X + G; V_new = alpha·V + (1 − alpha)·G_reg;
 * H_new = beta·H + (1 − beta)·(G_reg·G_reg); R_adj = T > 0 ? R·√(1 − beta^T) / (1 − alpha^T) : R;
 * X_new = (1 − norm_coefficient_post)·(X − R_adj·(V_new / (√H_new + epsilon))). */
clrun_status clrun__map_adam(clrun__imp *im, clrun__onode *n)
{
    double alpha, beta, eps, norm, post;
    clrun_status s = clrun__oattr_float(im, n, "alpha", 0.9f, &alpha);
    if (s == CLRUN_OK)
        s = clrun__oattr_float(im, n, "beta", 0.999f, &beta);
    if (s == CLRUN_OK)
        s = clrun__oattr_float(im, n, "epsilon", 1e-6f, &eps);
    if (s == CLRUN_OK)
        s = clrun__oattr_float(im, n, "norm_coefficient", 0, &norm);
    if (s == CLRUN_OK)
        s = clrun__oattr_float(im, n, "norm_coefficient_post", 0, &post);
    train c;
    if (s == CLRUN_OK)
        s = begin(&c, im, n, 4, "X, G, V, H", 3);
    if (s != CLRUN_OK)
        return s;
    /* The bias correction, unless T is known to be 0 (or below). */
    clrun__value *corrected = NULL, *u, *w, *rate, *rd;
    if (!(c.t_known && c.t_value <= 0)) {
        s = sop(&c, "pow", host(&c, beta), c.t, &u);
        if (s == CLRUN_OK)
            s = sop(&c, "sub", host(&c, 1), u, &u);
        if (s == CLRUN_OK)
            s = sop(&c, "sqrt", u, NULL, &u);
        if (s == CLRUN_OK)
            s = sop(&c, "mul", c.r, u, &u);
        if (s == CLRUN_OK)
            s = sop(&c, "pow", host(&c, alpha), c.t, &w);
        if (s == CLRUN_OK)
            s = sop(&c, "sub", host(&c, 1), w, &w);
        if (s == CLRUN_OK)
            s = sop(&c, "div", u, w, &corrected);
    }
    if (s == CLRUN_OK)
        s = if_started(&c, corrected, c.r, &rate);
    if (s == CLRUN_OK)
        s = typed(&c, rate, &rd);
    clrun__value *nd, *ad, *a1, *bd, *b1, *ed, *pd = NULL;
    if (s == CLRUN_OK)
        s = constant(&c, norm, &nd);
    if (s == CLRUN_OK)
        s = constant(&c, alpha, &ad);
    if (s == CLRUN_OK)
        s = constant(&c, 1 - alpha, &a1);
    if (s == CLRUN_OK)
        s = constant(&c, beta, &bd);
    if (s == CLRUN_OK)
        s = constant(&c, 1 - beta, &b1);
    if (s == CLRUN_OK)
        s = constant(&c, eps, &ed);
    if (s == CLRUN_OK && post != 0) /* (1 − 0)·x is x: no node without post-update regularization */
        s = constant(&c, 1 - post, &pd);
    const int k = c.count;
    for (int i = 0; s == CLRUN_OK && i < k; i++) {
        clrun__value *x = n->in[2 + i], *g = n->in[2 + k + i], *v = n->in[2 + 2 * k + i];
        clrun__value *h = n->in[2 + 3 * k + i];
        clrun__value *gr, *p, *q, *vn, *gg, *hn, *hs, *d;
        s = regularized(&c, nd, x, g, &gr);
        if (s == CLRUN_OK)
            s = top(&c, "mul", ad, v, -1, &p);
        if (s == CLRUN_OK)
            s = top(&c, "mul", a1, gr, -1, &q);
        if (s == CLRUN_OK)
            s = top(&c, "add", p, q, k + i, &vn);
        if (s == CLRUN_OK)
            s = top(&c, "mul", bd, h, -1, &p);
        if (s == CLRUN_OK)
            s = top(&c, "mul", gr, gr, -1, &gg);
        if (s == CLRUN_OK)
            s = top(&c, "mul", b1, gg, -1, &q);
        if (s == CLRUN_OK)
            s = top(&c, "add", p, q, 2 * k + i, &hn);
        if (s == CLRUN_OK)
            s = top(&c, "sqrt", hn, NULL, -1, &hs);
        if (s == CLRUN_OK)
            s = top(&c, "add", hs, ed, -1, &hs);
        if (s == CLRUN_OK)
            s = top(&c, "div", vn, hs, -1, &d);
        if (s == CLRUN_OK)
            s = top(&c, "mul", rd, d, -1, &d);
        if (s == CLRUN_OK)
            s = top(&c, "sub", x, d, pd ? -1 : i, &d);
        if (s == CLRUN_OK && pd)
            s = top(&c, "mul", pd, d, i, NULL);
    }
    return s;
}

/* Momentum: G_reg = norm_coefficient·X + G; beta_adj = T > 0 ? beta : 1;
 * V_new = alpha·V + beta_adj·G_reg; X_new = X − R·V_new ("standard") or
 * X − R·(G_reg + alpha·V_new) ("nesterov"). */
clrun_status clrun__map_momentum(clrun__imp *im, clrun__onode *n)
{
    double alpha, beta, norm;
    char mode[16];
    clrun_status s = required_float(im, n, "alpha", &alpha);
    if (s == CLRUN_OK)
        s = required_float(im, n, "beta", &beta);
    if (s == CLRUN_OK)
        s = required_float(im, n, "norm_coefficient", &norm);
    if (s == CLRUN_OK)
        s = clrun__oattr_string(im, n, "mode", NULL, mode, sizeof mode);
    if (s == CLRUN_OK && clrun__oattr_find(im, n, "mode") == NULL)
        s = clrun__invalid(im, "attribute 'mode' is required");
    bool nesterov = s == CLRUN_OK && strcmp(mode, "nesterov") == 0;
    if (s == CLRUN_OK && !nesterov && strcmp(mode, "standard") != 0)
        s = clrun__invalid(im, "mode '%s' is not 'standard' or 'nesterov'", mode);
    train c;
    if (s == CLRUN_OK)
        s = begin(&c, im, n, 3, "X, G, V", 2);
    if (s != CLRUN_OK)
        return s;
    clrun__value *badj, *bd, *rd, *nd, *ad;
    s = if_started(&c, host(&c, beta), host(&c, 1), &badj);
    if (s == CLRUN_OK)
        s = typed(&c, badj, &bd);
    if (s == CLRUN_OK)
        s = typed(&c, c.r, &rd);
    if (s == CLRUN_OK)
        s = constant(&c, norm, &nd);
    if (s == CLRUN_OK)
        s = constant(&c, alpha, &ad);
    const int k = c.count;
    for (int i = 0; s == CLRUN_OK && i < k; i++) {
        clrun__value *x = n->in[2 + i], *g = n->in[2 + k + i], *v = n->in[2 + 2 * k + i];
        clrun__value *gr, *p, *q, *vn = NULL, *d;
        s = regularized(&c, nd, x, g, &gr);
        if (s == CLRUN_OK)
            s = top(&c, "mul", ad, v, -1, &p);
        if (s == CLRUN_OK)
            s = top(&c, "mul", bd, gr, -1, &q);
        if (s == CLRUN_OK)
            s = top(&c, "add", p, q, k + i, &vn);
        d = vn;
        if (s == CLRUN_OK && nesterov) {
            s = top(&c, "mul", ad, vn, -1, &p);
            if (s == CLRUN_OK)
                s = top(&c, "add", gr, p, -1, &d);
        }
        if (s == CLRUN_OK)
            s = top(&c, "mul", rd, d, -1, &d);
        if (s == CLRUN_OK)
            s = top(&c, "sub", x, d, i, NULL);
    }
    return s;
}
