/* Elementwise operators onto the graph's elementwise ops. Where a graph op is missing from this
 * build, a composition of ops that gives the same values is used when one exists (Reciprocal as
 * 1 / x, HardSigmoid as clamps of a scale, LeakyRelu and PRelu as relu(x) + a·min(x, 0)); it
 * never approximates (no log(1 + exp(x)) for Softplus). */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "onnx/host_eval.h"
#include "onnx/map.h"

typedef struct op_pair {
    const char *onnx;
    const char *graph;
} op_pair;

static const op_pair unary_ops[] = {
    {"Relu", "relu"},     {"Sigmoid", "sigmoid"}, {"Tanh", "tanh"},         {"Exp", "exp"},
    {"Log", "log"},       {"Sqrt", "sqrt"},       {"Abs", "abs"},           {"Neg", "neg"},
    {"Erf", "erf"},       {"Sin", "sin"},         {"Cos", "cos"},           {"Floor", "floor"},
    {"Ceil", "ceil"},     {"Round", "round"},     {"Sign", "sign"},         {"Reciprocal", "reciprocal"},
    {"Softplus", "softplus"}, {"Softsign", "softsign"}, {"HardSwish", "hard_swish"},
    {"Not", "not"},       {"Tan", "tan"},         {"Asin", "asin"},         {"Acos", "acos"},
    {"Atan", "atan"},     {"Sinh", "sinh"},       {"Cosh", "cosh"},         {"Asinh", "asinh"},
    {"Acosh", "acosh"},   {"Atanh", "atanh"},   {"BitwiseNot", "bitwise_not"},
};

static const op_pair binary_ops[] = {
    {"Add", "add"},       {"Sub", "sub"},           {"Mul", "mul"},
    {"Div", "div"},       {"Equal", "equal"},       {"Less", "less"},
    {"Greater", "greater"}, {"LessOrEqual", "less_equal"}, {"GreaterOrEqual", "greater_equal"},
    {"And", "and"},       {"Or", "or"},             {"Xor", "xor"},
    {"BitShift", "shift_left"},
    {"Mod", "mod"},
    {"BitwiseAnd", "bitwise_and"}, {"BitwiseOr", "bitwise_or"}, {"BitwiseXor", "bitwise_xor"},
};

/* Bitwise* take integers only: a float or bool input is refused here, by its name. */
static clrun_status bitwise_integers(clrun__imp *im, clrun__onode *n)
{
    if (strncmp(n->op, "Bitwise", 7) != 0)
        return CLRUN_OK;
    for (int i = 0; i < n->n_in; i++) {
        const clrun__value *v = n->in[i];
        if (v && (clrun__onnx_elem_is_float(v->c.elem) || v->c.elem == CLRUN__ONNX_BOOL)) {
            char name[32];
            return clrun__invalid(im, "input %d '%s' is %s: %s takes integers", i,
                                  v->onnx_name ? v->onnx_name : "(temporary)",
                                  clrun__onnx_elem_name(v->c.elem, name, sizeof name), n->op);
        }
    }
    return CLRUN_OK;
}

static const char *graph_op(const op_pair *table, size_t count, const char *onnx)
{
    for (size_t i = 0; i < count; i++)
        if (strcmp(table[i].onnx, onnx) == 0)
            return table[i].graph;
    return NULL;
}

/* A scalar constant of x's element type, with x's rank (all dims 1) so it broadcasts. */
static clrun__value *scalar_like(clrun__imp *im, const clrun__value *x, double value)
{
    return clrun__scalar_value(im, x->c.elem, value, x->c.rank);
}

/* max(0, min(1, alpha·x + beta)) from scale, maximum and minimum. */
static clrun_status hard_sigmoid_composed(clrun__imp *im, const clrun__onode *n, clrun__value *x,
                                          double alpha, double beta, int out, clrun__value **r)
{
    clrun_attr a[2] = {clrun__mk_float("alpha", alpha), clrun__mk_float("beta", beta)};
    clrun__value *t, *lo, *zero = scalar_like(im, x, 0), *one = scalar_like(im, x, 1);
    if (!zero || !one)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    clrun_status s = clrun__emit1(im, n, "scale", &x, 1, a, 2, -1, &t);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "maximum", t, zero, -1, &lo);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "minimum", lo, one, out, r);
    return s;
}

clrun_status clrun__map_unary(clrun__imp *im, clrun__onode *n)
{
    if (n->n_in != 1 || n->in[0] == NULL)
        return clrun__invalid(im, "%s takes one input", n->op);
    if (n->version < 6)
        clrun__oattr_ignore(im, n, "consumed_inputs");
    clrun__value *x = n->in[0];
    clrun_status bits = bitwise_integers(im, n);
    if (bits != CLRUN_OK)
        return bits;
    const char *op = graph_op(unary_ops, sizeof unary_ops / sizeof unary_ops[0], n->op);
    if (op == NULL)
        return clrun__unsupported(im, "no graph op for %s", n->op);
    if (clrun__graph_has_op(op))
        return clrun__emit_unary(im, n, op, x, 0, NULL);
    clrun__value *t, *one;
    if (strcmp(n->op, "Reciprocal") == 0) {
        if ((one = scalar_like(im, x, 1)) == NULL)
            return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        return clrun__emit_binary(im, n, "div", one, x, 0, NULL);
    }
    if (strcmp(n->op, "Softsign") == 0) { /* x / (1 + |x|) */
        clrun__value *d;
        if ((one = scalar_like(im, x, 1)) == NULL)
            return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        clrun_status s = clrun__emit_unary(im, n, "abs", x, -1, &t);
        if (s == CLRUN_OK)
            s = clrun__emit_binary(im, n, "add", t, one, -1, &d);
        return s == CLRUN_OK ? clrun__emit_binary(im, n, "div", x, d, 0, NULL) : s;
    }
    if (strcmp(n->op, "HardSwish") == 0) { /* x · hard_sigmoid(x; 1/6, 1/2) */
        clrun_status s = hard_sigmoid_composed(im, n, x, 1.0 / 6.0, 0.5, -1, &t);
        return s == CLRUN_OK ? clrun__emit_binary(im, n, "mul", x, t, 0, NULL) : s;
    }
    return clrun__emit_unary(im, n, op, x, 0, NULL); /* refused by name */
}

clrun_status clrun__legacy_broadcast(clrun__imp *im, clrun__onode *n, const clrun__value *a,
                                     const clrun__value *b, int *rank, int64_t *dims, bool *legacy)
{
    *legacy = false;
    if (n->version >= 7)
        return CLRUN_OK;
    int64_t broadcast, axis;
    bool has_axis = clrun__oattr_find(im, n, "axis") != NULL;
    clrun_status s = clrun__oattr_int(im, n, "broadcast", 0, &broadcast);
    if (s == CLRUN_OK)
        s = clrun__oattr_int(im, n, "axis", 0, &axis);
    if (s != CLRUN_OK)
        return s;
    const clrun__otensor *ta = &a->c, *tb = &b->c;
    char da[128], db[128];
    if (!broadcast) {
        bool same = ta->rank == tb->rank;
        for (int d = 0; same && d < ta->rank; d++)
            same = ta->dims[d] == tb->dims[d];
        if (!same)
            return clrun__invalid(im, "without broadcast=1, B %s must have A's shape %s",
                                  clrun__onnx_dims_text(tb->rank, tb->dims, db, sizeof db),
                                  clrun__onnx_dims_text(ta->rank, ta->dims, da, sizeof da));
        return CLRUN_OK;
    }
    /* B's shape is a contiguous run of A's, starting at axis (by default, A's last dims). */
    if (has_axis && (axis < -ta->rank || axis >= ta->rank))
        return clrun__invalid(im, "axis %" PRId64 " is out of range for A %s", axis,
                              clrun__onnx_dims_text(ta->rank, ta->dims, da, sizeof da));
    int64_t start = !has_axis ? ta->rank - tb->rank : axis < 0 ? axis + ta->rank : axis;
    if (tb->rank == 1 && tb->dims[0] == 1 && !has_axis)
        return CLRUN_OK; /* a scalar in a list: numpy broadcasting as it is */
    if (start < 0 || start + tb->rank > ta->rank)
        return clrun__invalid(im, "B %s does not fit A %s at axis %" PRId64,
                              clrun__onnx_dims_text(tb->rank, tb->dims, db, sizeof db),
                              clrun__onnx_dims_text(ta->rank, ta->dims, da, sizeof da), start);
    *rank = ta->rank;
    for (int d = 0; d < ta->rank; d++)
        dims[d] = d >= start && d < start + tb->rank ? tb->dims[d - start] : 1;
    *legacy = true;
    return CLRUN_OK;
}

/* b reshaped for legacy broadcasting (or b itself). */
static clrun_status legacy_operand(clrun__imp *im, clrun__onode *n, clrun__value *a, clrun__value *b,
                                   clrun__value **out)
{
    int rank;
    int64_t dims[CLRUN__ONNX_MAX_RANK];
    bool legacy;
    *out = b;
    clrun_status s = clrun__legacy_broadcast(im, n, a, b, &rank, dims, &legacy);
    if (s != CLRUN_OK || !legacy)
        return s;
    if (clrun__is_const(b)) {
        clrun__otensor t;
        if (!clrun__host_reshape(&b->c, rank, dims, &t))
            return CLRUN__OOM(im);
        *out = clrun__const_value(im, &t);
        return *out ? CLRUN_OK : CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    return clrun__emit_reshape(im, n, b, rank, dims, -1, out);
}

clrun_status clrun__map_binary(clrun__imp *im, clrun__onode *n)
{
    if (n->n_in != 2 || n->in[0] == NULL || n->in[1] == NULL)
        return clrun__invalid(im, "%s takes two inputs", n->op);
    if (n->version < 6)
        clrun__oattr_ignore(im, n, "consumed_inputs");
    const char *op = graph_op(binary_ops, sizeof binary_ops / sizeof binary_ops[0], n->op);
    if (op == NULL)
        return clrun__unsupported(im, "no graph op for %s", n->op);
    clrun_status bits = bitwise_integers(im, n);
    if (bits != CLRUN_OK)
        return bits;
    if (strcmp(n->op, "BitShift") == 0) {
        char direction[16];
        clrun_status s = clrun__oattr_string(im, n, "direction", "", direction, sizeof direction);
        if (s != CLRUN_OK)
            return s;
        if (strcmp(direction, "LEFT") != 0 && strcmp(direction, "RIGHT") != 0)
            return clrun__invalid(im, "attribute 'direction' is '%s': LEFT or RIGHT", direction);
        return clrun__emit_binary(im, n, direction[0] == 'L' ? "shift_left" : "shift_right",
                                  n->in[0], n->in[1], 0, NULL);
    }
    if (strcmp(n->op, "Mod") == 0) {
        int64_t fmod;
        clrun_status s = clrun__oattr_int(im, n, "fmod", 0, &fmod);
        if (s != CLRUN_OK)
            return s;
        clrun_attr a = clrun__mk_int("fmod", fmod);
        clrun__value *in[2] = {n->in[0], n->in[1]};
        return clrun__emit1(im, n, op, in, 2, &a, 1, 0, NULL);
    }
    clrun__value *b;
    clrun_status s = legacy_operand(im, n, n->in[0], n->in[1], &b);
    return s == CLRUN_OK ? clrun__emit_binary(im, n, op, n->in[0], b, 0, NULL) : s;
}

clrun_status clrun__map_pow(clrun__imp *im, clrun__onode *n)
{
    if (n->n_in != 2 || n->in[0] == NULL || n->in[1] == NULL)
        return clrun__invalid(im, "Pow takes two inputs");
    clrun__value *x = n->in[0], *y = n->in[1];
    if (n->version < 7) {
        clrun_status s = legacy_operand(im, n, x, y, &y);
        if (s != CLRUN_OK)
            return s;
    }
    if (y->c.elem != x->c.elem) {
        /* Pow-12 takes an exponent of another type: as x's type (exact for the small integral
         * exponents models use; a constant one with a fraction for an integer base is refused). */
        clrun_dtype dtype;
        if (clrun__is_const(y)) {
            clrun__otensor t;
            for (uint64_t i = 0; !clrun__onnx_elem_is_float(x->c.elem) && i < clrun__otensor_count(&y->c); i++) {
                double e = clrun__otensor_get_real(&y->c, i);
                if (e != floor(e))
                    return clrun__unsupported(im, "an integer base with a fractional exponent is not supported");
            }
            if (!clrun__host_cast(&y->c, x->c.elem, &t))
                return CLRUN__OOM(im);
            if ((y = clrun__const_value(im, &t)) == NULL)
                return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        } else if (clrun__onnx_elem_is_float(x->c.elem) && !clrun__onnx_elem_is_float(y->c.elem) &&
                   clrun__onnx_elem_dtype(x->c.elem, &dtype)) {
            clrun_attr to = clrun__mk_int("to", (int64_t)dtype);
            clrun_status s = clrun__emit1(im, n, "cast", &y, 1, &to, 1, -1, &y);
            if (s != CLRUN_OK)
                return s;
        } else if (!clrun__onnx_elem_is_float(x->c.elem) && clrun__onnx_elem_is_float(y->c.elem) &&
                   clrun__onnx_elem_dtype(y->c.elem, &dtype)) {
            /* an integer base, a float exponent: as onnxruntime, the power of the base converted
             * to the exponent's type, truncated back into the base's type */
            clrun_dtype base;
            if (!clrun__onnx_elem_dtype(x->c.elem, &base))
                return clrun__unsupported(im, "Pow of this integer type is not supported");
            clrun_attr to = clrun__mk_int("to", (int64_t)dtype), back = clrun__mk_int("to", (int64_t)base);
            clrun__value *t;
            clrun_status s = clrun__emit1(im, n, "cast", &x, 1, &to, 1, -1, &t);
            if (s == CLRUN_OK)
                s = clrun__emit_binary(im, n, "pow", t, y, -1, &t);
            return s == CLRUN_OK ? clrun__emit1(im, n, "cast", &t, 1, &back, 1, 0, NULL) : s;
        } else {
            return clrun__unsupported(im, "Pow of %s by a computed %s exponent is not supported",
                                      clrun__onnx_elem_is_float(x->c.elem) ? "a float" : "an integer",
                                      clrun__onnx_elem_is_float(y->c.elem) ? "float" : "integer");
        }
    }
    /* A constant exponent of 2 (the exporters' LayerNorm squares with Pow) is x·x, which a
     * correctly rounded pow gives too, and which is a multiply, where a device's pow is a
     * library call (POCL: 200 ns an element, more than the rest of a LayerNorm); onnxruntime
     * squares so too. Without a pow kernel an exponent of 1 is a copy. */
    bool scalar_exponent = clrun__is_const(y) && clrun__otensor_count(&y->c) == 1 &&
                           y->c.rank <= x->c.rank && clrun__onnx_elem_is_float(x->c.elem);
    double e = scalar_exponent ? clrun__otensor_get_real(&y->c, 0) : 0;
    if (scalar_exponent && e == 2)
        return clrun__emit_binary(im, n, "mul", x, x, 0, NULL);
    if (clrun__graph_has_op("pow"))
        return clrun__emit_binary(im, n, "pow", x, y, 0, NULL);
    if (scalar_exponent && e == 1)
        return clrun__emit_copy(im, n, x, 0, NULL);
    return clrun__emit_binary(im, n, "pow", x, y, 0, NULL); /* refused by name */
}

clrun_status clrun__map_variadic(clrun__imp *im, clrun__onode *n)
{
    const char *op = strcmp(n->op, "Min") == 0 ? "minimum" : strcmp(n->op, "Max") == 0 ? "maximum" : "add";
    bool mean = strcmp(n->op, "Mean") == 0;
    if (n->version < 6)
        clrun__oattr_ignore(im, n, "consumed_inputs");
    if (n->n_in < 1)
        return clrun__invalid(im, "%s needs at least one input", n->op);
    for (int i = 0; i < n->n_in; i++)
        if (n->in[i] == NULL)
            return clrun__invalid(im, "input %d of %s is empty", i, n->op);
    if (n->n_in == 1)
        return clrun__define_alias(im, n, 0, n->in[0]);
    clrun__value *acc = n->in[0];
    for (int i = 1; i < n->n_in; i++) {
        bool last = i == n->n_in - 1 && !mean;
        clrun_status s = clrun__emit_binary(im, n, op, acc, n->in[i], last ? 0 : -1, &acc);
        if (s != CLRUN_OK)
            return s;
    }
    if (!mean)
        return CLRUN_OK;
    clrun__value *count = scalar_like(im, acc, n->n_in);
    return count ? clrun__emit_binary(im, n, "div", acc, count, 0, NULL) : CLRUN_ERROR_OUT_OF_HOST_MEMORY;
}

clrun_status clrun__map_activation(clrun__imp *im, clrun__onode *n)
{
    if (n->n_in != 1 || n->in[0] == NULL)
        return clrun__invalid(im, "%s takes one input", n->op);
    clrun__value *x = n->in[0];
    if (n->version < 6)
        clrun__oattr_ignore(im, n, "consumed_inputs");
    double alpha = 0, beta = 0, gamma = 0;
    clrun_status s = CLRUN_OK;
    const char *op;
    clrun_attr attrs[2];
    int n_attrs = 1;
    if (strcmp(n->op, "LeakyRelu") == 0) {
        op = "leaky_relu";
        s = clrun__oattr_float(im, n, "alpha", 0.01, &alpha);
    } else if (strcmp(n->op, "Elu") == 0) {
        op = "elu";
        s = clrun__oattr_float(im, n, "alpha", 1.0, &alpha);
    } else if (strcmp(n->op, "Celu") == 0) {
        op = "celu";
        s = clrun__oattr_float(im, n, "alpha", 1.0, &alpha);
    } else if (strcmp(n->op, "Selu") == 0) {
        op = "selu";
        s = clrun__oattr_float(im, n, "alpha", 1.67326319217681884765625, &alpha);
        if (s == CLRUN_OK)
            s = clrun__oattr_float(im, n, "gamma", 1.05070102214813232421875, &gamma);
        attrs[1] = clrun__mk_float("gamma", gamma);
        n_attrs = 2;
    } else { /* HardSigmoid */
        op = "hard_sigmoid";
        s = clrun__oattr_float(im, n, "alpha", 0.2, &alpha);
        if (s == CLRUN_OK)
            s = clrun__oattr_float(im, n, "beta", 0.5, &beta);
        attrs[1] = clrun__mk_float("beta", beta);
        n_attrs = 2;
    }
    if (s != CLRUN_OK)
        return s;
    attrs[0] = clrun__mk_float("alpha", alpha);
    if (clrun__graph_has_op(op))
        return clrun__emit1(im, n, op, &x, 1, attrs, n_attrs, 0, NULL);
    if (strcmp(op, "hard_sigmoid") == 0)
        return hard_sigmoid_composed(im, n, x, alpha, beta, 0, NULL);
    if (strcmp(op, "leaky_relu") == 0) { /* relu(x) + alpha·min(x, 0): exact */
        clrun__value *pos, *neg, *scaled, *zero = scalar_like(im, x, 0);
        clrun_attr a = clrun__mk_float("alpha", alpha);
        if (zero == NULL)
            return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        s = clrun__emit_unary(im, n, "relu", x, -1, &pos);
        if (s == CLRUN_OK)
            s = clrun__emit_binary(im, n, "minimum", x, zero, -1, &neg);
        if (s == CLRUN_OK)
            s = clrun__emit1(im, n, "scale", &neg, 1, &a, 1, -1, &scaled);
        return s == CLRUN_OK ? clrun__emit_binary(im, n, "add", pos, scaled, 0, NULL) : s;
    }
    return clrun__emit1(im, n, op, &x, 1, attrs, n_attrs, 0, NULL); /* refused by name */
}

/* The slope of PRelu as numpy broadcasting sees it: before opset 7, a [C] slope of an image (and
 * any slope whose length is the channel count) applies per channel, as exporters of the time
 * meant it. */
static clrun_status prelu_slope(clrun__imp *im, clrun__onode *n, clrun__value *x, clrun__value *slope,
                                clrun__value **out)
{
    *out = slope;
    const clrun__otensor *ts = &slope->c, *tx = &x->c;
    if (n->version >= 7 || ts->rank != 1 || tx->rank < 2 || ts->dims[0] != tx->dims[1] ||
        ts->dims[0] == 1 || tx->rank == 2)
        return CLRUN_OK;
    int64_t dims[CLRUN__ONNX_MAX_RANK];
    int rank = tx->rank - 1;
    dims[0] = ts->dims[0];
    for (int d = 1; d < rank; d++)
        dims[d] = 1;
    if (clrun__is_const(slope)) {
        clrun__otensor t;
        if (!clrun__host_reshape(ts, rank, dims, &t))
            return CLRUN__OOM(im);
        *out = clrun__const_value(im, &t);
        return *out ? CLRUN_OK : CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    return clrun__emit_reshape(im, n, slope, rank, dims, -1, out);
}

clrun_status clrun__map_prelu(clrun__imp *im, clrun__onode *n)
{
    if (n->n_in != 2 || n->in[0] == NULL || n->in[1] == NULL)
        return clrun__invalid(im, "PRelu takes two inputs");
    if (n->version < 6)
        clrun__oattr_ignore(im, n, "consumed_inputs");
    clrun__value *x = n->in[0], *slope;
    clrun_status s = prelu_slope(im, n, x, n->in[1], &slope);
    if (s != CLRUN_OK)
        return s;
    int rank;
    int64_t dims[CLRUN__ONNX_MAX_RANK];
    if (!clrun__broadcast_dims(x->c.rank, x->c.dims, slope->c.rank, slope->c.dims, &rank, dims) ||
        rank != x->c.rank || memcmp(dims, x->c.dims, (size_t)rank * sizeof dims[0]) != 0) {
        char dx[128], ds[128];
        return clrun__invalid(im, "slope %s does not broadcast to X %s",
                              clrun__onnx_dims_text(slope->c.rank, slope->c.dims, ds, sizeof ds),
                              clrun__onnx_dims_text(x->c.rank, x->c.dims, dx, sizeof dx));
    }
    if (clrun__graph_has_op("prelu"))
        return clrun__emit_binary(im, n, "prelu", x, slope, 0, NULL);
    clrun__value *pos, *neg, *scaled, *zero = scalar_like(im, x, 0); /* relu(x) + slope·min(x, 0) */
    if (zero == NULL)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    s = clrun__emit_unary(im, n, "relu", x, -1, &pos);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "minimum", x, zero, -1, &neg);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "mul", neg, slope, -1, &scaled);
    return s == CLRUN_OK ? clrun__emit_binary(im, n, "add", pos, scaled, 0, NULL) : s;
}

clrun_status clrun__map_clip(clrun__imp *im, clrun__onode *n)
{
    if (n->n_in < 1 || n->in[0] == NULL)
        return clrun__invalid(im, "Clip needs an input");
    clrun__value *x = n->in[0];
    double lo = -INFINITY, hi = INFINITY;
    bool has_lo = false, has_hi = false;
    clrun_status s = CLRUN_OK;
    clrun__value *lo_v = NULL, *hi_v = NULL;
    if (n->version < 6)
        clrun__oattr_ignore(im, n, "consumed_inputs");
    if (n->version < 11) {
        has_lo = clrun__oattr_find(im, n, "min") != NULL;
        has_hi = clrun__oattr_find(im, n, "max") != NULL;
        s = clrun__oattr_float(im, n, "min", -INFINITY, &lo);
        if (s == CLRUN_OK)
            s = clrun__oattr_float(im, n, "max", INFINITY, &hi);
        if (s != CLRUN_OK)
            return s;
    } else {
        lo_v = n->n_in > 1 ? n->in[1] : NULL;
        hi_v = n->n_in > 2 ? n->in[2] : NULL;
        if (lo_v && clrun__is_const(lo_v)) {
            if (clrun__otensor_count(&lo_v->c) != 1)
                return clrun__invalid(im, "min must be a scalar");
            lo = clrun__otensor_get_real(&lo_v->c, 0), has_lo = true, lo_v = NULL;
        }
        if (hi_v && clrun__is_const(hi_v)) {
            if (clrun__otensor_count(&hi_v->c) != 1)
                return clrun__invalid(im, "max must be a scalar");
            hi = clrun__otensor_get_real(&hi_v->c, 0), has_hi = true, hi_v = NULL;
        }
    }
    if ((has_lo && isnan(lo)) || (has_hi && isnan(hi)))
        return clrun__invalid(im, "%s is NaN", has_lo && isnan(lo) ? "min" : "max");
    /* An infinite bound on its own side clips nothing (a mel front-end clips at +inf); one on
     * the other side makes every element infinite, which the composition below gives. */
    if (has_lo && lo == -INFINITY)
        has_lo = false;
    if (has_hi && hi == INFINITY)
        has_hi = false;
    bool finite = (!has_lo || isfinite(lo)) && (!has_hi || isfinite(hi));
    if (!lo_v && !hi_v && finite) {
        clrun_attr a[2];
        int k = 0;
        if (has_lo)
            a[k++] = clrun__mk_float("min", lo);
        if (has_hi)
            a[k++] = clrun__mk_float("max", hi);
        if (k == 0)
            return clrun__define_alias(im, n, 0, x);
        if (clrun__op_accepts("clip", &x, 1, a, k))
            return clrun__emit1(im, n, "clip", &x, 1, a, k, 0, NULL);
    }
    /* min(max(x, lo), hi) with the bounds as scalars (or the given tensors). */
    if (has_lo && (lo_v = scalar_like(im, x, lo)) == NULL)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    if (has_hi && (hi_v = scalar_like(im, x, hi)) == NULL)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    clrun__value *t = x;
    if (lo_v)
        s = clrun__emit_binary(im, n, "maximum", t, lo_v, hi_v ? -1 : 0, &t);
    if (s == CLRUN_OK && hi_v)
        s = clrun__emit_binary(im, n, "minimum", t, hi_v, 0, &t);
    if (s == CLRUN_OK && !lo_v && !hi_v)
        s = clrun__define_alias(im, n, 0, x);
    return s;
}

clrun_status clrun__map_where(clrun__imp *im, clrun__onode *n)
{
    if (n->n_in != 3 || !n->in[0] || !n->in[1] || !n->in[2])
        return clrun__invalid(im, "Where takes three inputs");
    clrun__value *in[3] = {n->in[0], n->in[1], n->in[2]};
    return clrun__emit1(im, n, "where", in, 3, NULL, 0, 0, NULL);
}

/* The target element type of Cast (its 'to': an int, or before opset 6 a type name). */
static clrun_status cast_target(clrun__imp *im, clrun__onode *n, int *elem)
{
    if (strcmp(n->op, "CastLike") == 0) {
        if (n->n_in != 2 || n->in[1] == NULL)
            return clrun__invalid(im, "CastLike takes two inputs");
        *elem = n->in[1]->c.elem;
        return CLRUN_OK;
    }
    if (n->version >= 6) {
        int64_t to;
        clrun_status s = clrun__oattr_int(im, n, "to", -1, &to);
        if (s == CLRUN_OK && to < 0 && clrun__oattr_find(im, n, "to") == NULL)
            s = clrun__invalid(im, "attribute 'to' is required");
        else if (s == CLRUN_OK && (to < 0 || to > INT32_MAX))
            s = clrun__invalid(im, "attribute 'to' is %" PRId64 ", not a data type", to);
        *elem = s == CLRUN_OK ? (int)to : CLRUN__ONNX_UNDEFINED;
        return s;
    }
    static const struct { const char *name; int elem; } names[] = {
        {"FLOAT", CLRUN__ONNX_FLOAT}, {"UINT8", CLRUN__ONNX_UINT8}, {"INT8", CLRUN__ONNX_INT8},
        {"UINT16", CLRUN__ONNX_UINT16}, {"INT16", CLRUN__ONNX_INT16}, {"INT32", CLRUN__ONNX_INT32},
        {"INT64", CLRUN__ONNX_INT64}, {"BOOL", CLRUN__ONNX_BOOL}, {"FLOAT16", CLRUN__ONNX_FLOAT16},
        {"DOUBLE", CLRUN__ONNX_DOUBLE}, {"UINT32", CLRUN__ONNX_UINT32}, {"UINT64", CLRUN__ONNX_UINT64},
    };
    char to[32];
    clrun_status s = clrun__oattr_string(im, n, "to", "", to, sizeof to);
    if (s != CLRUN_OK)
        return s;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(names[i].name, to) == 0) {
            *elem = names[i].elem;
            return CLRUN_OK;
        }
    return clrun__unsupported(im, "cast to '%s' is not supported", to);
}

clrun_status clrun__map_cast(clrun__imp *im, clrun__onode *n)
{
    int elem = CLRUN__ONNX_UNDEFINED;
    clrun_status s = cast_target(im, n, &elem);
    int64_t saturate = 1; /* opset 19: how float8 targets saturate; clrun has no float8 tensors */
    if (s == CLRUN_OK && n->version >= 19)
        s = clrun__oattr_int(im, n, "saturate", 1, &saturate);
    if (s != CLRUN_OK)
        return s;
    if (n->n_in < 1 || n->in[0] == NULL)
        return clrun__invalid(im, "%s needs an input", n->op);
    clrun__value *x = n->in[0];
    char name[32];
    if (clrun__onnx_elem_size(elem) == 0)
        return clrun__unsupported(im, "cast to %s is not supported", clrun__onnx_elem_name(elem, name, sizeof name));
    if (clrun__is_const(x)) {
        clrun__otensor t;
        if (clrun__onnx_elem_size(x->c.elem) == 0)
            return clrun__unsupported(im, "cast from %s is not supported",
                                      clrun__onnx_elem_name(x->c.elem, name, sizeof name));
        if (!clrun__host_cast(&x->c, elem, &t))
            return CLRUN__OOM(im);
        return clrun__define_const(im, n, 0, &t);
    }
    if (elem == x->c.elem)
        return clrun__define_alias(im, n, 0, x);
    clrun_dtype dtype;
    if (!clrun__onnx_elem_dtype(elem, &dtype))
        return clrun__unsupported(im, "cast to %s: clrun has no such tensors", clrun__onnx_elem_name(elem, name, sizeof name));
    clrun_attr a = clrun__mk_int("to", (int64_t)dtype);
    if (!clrun__op_accepts("cast", &x, 1, &a, 1)) {
        char from[32];
        return clrun__unsupported(im, "cast from %s to %s is not supported on the device",
                                  clrun__onnx_elem_name(x->c.elem, from, sizeof from),
                                  clrun__onnx_elem_name(elem, name, sizeof name));
    }
    return clrun__emit1(im, n, "cast", &x, 1, &a, 1, 0, NULL);
}

clrun_status clrun__map_identity(clrun__imp *im, clrun__onode *n)
{
    if (n->n_in < 1 || n->in[0] == NULL)
        return clrun__invalid(im, "%s needs an input", n->op);
    if (strcmp(n->op, "Dropout") == 0) {
        /* Inference: the input as it is. Before opset 7 is_test said so; a training-mode Dropout
         * (opset 12's training_mode input set) is random and refused. */
        clrun__oattr_ignore(im, n, "ratio");
        clrun__oattr_ignore(im, n, "seed");
        if (n->version < 7)
            clrun__oattr_ignore(im, n, "is_test");
        if (n->version < 6)
            clrun__oattr_ignore(im, n, "consumed_inputs");
        if (n->n_in > 2 && n->in[2]) {
            const clrun__otensor *mode;
            double ratio = 0.5;
            bool given = false;
            clrun_status s = clrun__const_input(im, n, 2, false, &mode);
            if (s == CLRUN_OK && n->n_in > 1 && n->in[1])
                s = clrun__const_real(im, n, 1, &ratio, &given);
            if (s != CLRUN_OK)
                return s;
            /* Training mode drops at random, except with a ratio of 0: the input as it is. */
            if (clrun__otensor_count(mode) != 1 ||
                (clrun__otensor_get_int(mode, 0) != 0 && !(given && ratio == 0)))
                return clrun__unsupported(im, "training mode (random dropout) is not supported");
        }
        clrun__value *mask = clrun__out(im, n, 1);
        if (mask) { /* all kept */
            clrun__otensor t; /* bool from opset 10, the input's type before */
            int elem = n->version >= 10 ? CLRUN__ONNX_BOOL : n->in[0]->c.elem;
            if (!clrun__otensor_alloc(&t, elem, n->in[0]->c.rank, n->in[0]->c.dims))
                return CLRUN__OOM(im);
            for (uint64_t i = 0; i < clrun__otensor_count(&t); i++)
                clrun__otensor_set_real(&t, i, 1);
            clrun_status s = clrun__define_const(im, n, 1, &t);
            if (s != CLRUN_OK)
                return s;
        }
    }
    return clrun__define_alias(im, n, 0, n->in[0]);
}
