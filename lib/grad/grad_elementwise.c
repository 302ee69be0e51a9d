/* Gradient rules of the elementwise ops: each input's gradient from the output's (dy), written
 * with elementwise ops that fusion joins into one kernel; broadcast inputs get theirs summed
 * back to their shape. Where the derivative has a kink (relu at 0, clip at its bounds) the
 * choice is PyTorch's, so that whole-model gradients agree with it. */
#include <math.h>
#include <string.h>

#include "grad/grad.h"

#define PI 3.14159265358979323846
#define SQRT1_2 0.70710678118654752440

#define X(node) ((node)->inputs[0])
#define Y(node) ((node)->outputs[0])

static clrun_tensor_id zero(clrun__grad *g, clrun_tensor_id like)
{
    return like < 0 ? -1 : clrun__gscalar(g, clrun__gtype(g, like)->dtype, 0.0);
}

static clrun_tensor_id where(clrun__grad *g, clrun_tensor_id c, clrun_tensor_id a, clrun_tensor_id b)
{
    clrun_tensor_id in[3] = {c, a, b};
    return clrun__gemit(g, "where", in, 3, NULL, 0);
}

/* x (op) the scalar v, as a bool mask. */
static clrun_tensor_id compare(clrun__grad *g, const char *op, clrun_tensor_id x, double v)
{
    return clrun__gemit2(g, op, x, clrun__gscalar(g, clrun__gtype(g, x)->dtype, v));
}

static clrun_tensor_id mul(clrun__grad *g, clrun_tensor_id a, clrun_tensor_id b)
{
    return clrun__gemit2(g, "mul", a, b);
}

/* ---- unary ---- */

static clrun_status unary(clrun__grad *g, const clrun__node *node, const clrun_tensor_id *dy,
                          const bool *want, clrun_tensor_id *dx)
{
    (void)want;
    const char *op = node->op->name;
    clrun_tensor_id x = X(node), y = Y(node), d = dy[0], r = -1;
    if (strcmp(op, "neg") == 0) {
        r = clrun__gemit1(g, "neg", d);
    } else if (strcmp(op, "abs") == 0) {
        r = mul(g, d, clrun__gemit1(g, "sign", x));
    } else if (strcmp(op, "relu") == 0) {
        r = where(g, compare(g, "greater", y, 0.0), d, zero(g, d));
    } else if (strcmp(op, "leaky_relu") == 0) {
        double alpha = clrun__gnode_float(node, "alpha", 0.01);
        r = where(g, compare(g, "greater", x, 0.0), d, clrun__gscale(g, d, alpha, 0.0));
    } else if (strcmp(op, "elu") == 0) {
        double alpha = clrun__gnode_float(node, "alpha", 1.0);
        r = where(g, compare(g, "greater", x, 0.0), d, mul(g, d, clrun__gscale(g, y, 1.0, alpha)));
    } else if (strcmp(op, "celu") == 0) {
        double alpha = clrun__gnode_float(node, "alpha", 1.0);
        r = where(g, compare(g, "greater", x, 0.0), d,
                  mul(g, d, clrun__gscale(g, y, 1.0 / alpha, 1.0)));
    } else if (strcmp(op, "selu") == 0) {
        double alpha = clrun__gnode_float(node, "alpha", 1.6732632423543772);
        double gamma = clrun__gnode_float(node, "gamma", 1.0507009873554805);
        r = where(g, compare(g, "greater", x, 0.0), clrun__gscale(g, d, gamma, 0.0),
                  mul(g, d, clrun__gscale(g, y, 1.0, gamma * alpha)));
    } else if (strcmp(op, "sigmoid") == 0) {
        r = mul(g, d, mul(g, y, clrun__gscale(g, y, -1.0, 1.0)));
    } else if (strcmp(op, "tanh") == 0) {
        r = mul(g, d, clrun__gscale(g, mul(g, y, y), -1.0, 1.0));
    } else if (strcmp(op, "exp") == 0) {
        r = mul(g, d, y);
    } else if (strcmp(op, "log") == 0) {
        r = clrun__gemit2(g, "div", d, x);
    } else if (strcmp(op, "sqrt") == 0) {
        r = clrun__gemit2(g, "div", d, clrun__gscale(g, y, 2.0, 0.0));
    } else if (strcmp(op, "rsqrt") == 0) {
        r = mul(g, d, clrun__gscale(g, mul(g, y, mul(g, y, y)), -0.5, 0.0));
    } else if (strcmp(op, "reciprocal") == 0) {
        r = clrun__gemit1(g, "neg", mul(g, d, mul(g, y, y)));
    } else if (strcmp(op, "sin") == 0) {
        r = mul(g, d, clrun__gemit1(g, "cos", x));
    } else if (strcmp(op, "cos") == 0) {
        r = clrun__gemit1(g, "neg", mul(g, d, clrun__gemit1(g, "sin", x)));
    } else if (strcmp(op, "erf") == 0) {
        clrun_tensor_id e = clrun__gemit1(g, "exp", clrun__gemit1(g, "neg", mul(g, x, x)));
        r = mul(g, d, clrun__gscale(g, e, 2.0 / sqrt(PI), 0.0));
    } else if (strcmp(op, "softplus") == 0) {
        r = mul(g, d, clrun__gemit1(g, "sigmoid", x));
    } else if (strcmp(op, "softsign") == 0) {
        clrun_tensor_id den = clrun__gscale(g, clrun__gemit1(g, "abs", x), 1.0, 1.0);
        r = clrun__gemit2(g, "div", d, mul(g, den, den));
    } else if (strcmp(op, "gelu_erf") == 0) {
        /* 0.5 (1 + erf(x / sqrt 2)) + x exp(-x^2 / 2) / sqrt(2 pi) */
        clrun_tensor_id cdf = clrun__gscale(g, clrun__gemit1(g, "erf", clrun__gscale(g, x, SQRT1_2, 0.0)),
                                            0.5, 0.5);
        clrun_tensor_id pdf = clrun__gemit1(g, "exp", clrun__gscale(g, mul(g, x, x), -0.5, 0.0));
        clrun_tensor_id slope = clrun__gemit2(g, "add", cdf,
                                              clrun__gscale(g, mul(g, x, pdf), 1.0 / sqrt(2.0 * PI), 0.0));
        r = mul(g, d, slope);
    } else if (strcmp(op, "gelu") == 0) {
        /* y = 0.5 x (1 + t), t = tanh(c (x + 0.044715 x^3)):
         * y' = 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 * 0.044715 x^2) */
        const double c = sqrt(2.0 / PI);
        clrun_tensor_id x2 = mul(g, x, x);
        clrun_tensor_id u = clrun__gscale(g, mul(g, x, clrun__gscale(g, x2, 0.044715, 1.0)), c, 0.0);
        clrun_tensor_id t = clrun__gemit1(g, "tanh", u);
        clrun_tensor_id left = clrun__gscale(g, t, 0.5, 0.5);
        clrun_tensor_id sech2 = clrun__gscale(g, mul(g, t, t), -1.0, 1.0);
        clrun_tensor_id inner = clrun__gscale(g, x2, 3.0 * 0.044715, 1.0);
        clrun_tensor_id right = clrun__gscale(g, mul(g, mul(g, x, sech2), inner), 0.5 * c, 0.0);
        r = mul(g, d, clrun__gemit2(g, "add", left, right));
    } else if (strcmp(op, "hard_sigmoid") == 0) {
        double alpha = clrun__gnode_float(node, "alpha", 0.2), beta = clrun__gnode_float(node, "beta", 0.5);
        clrun_tensor_id v = clrun__gscale(g, x, alpha, beta);
        clrun_tensor_id inside = clrun__gemit2(g, "and", compare(g, "greater", v, 0.0),
                                               compare(g, "less", v, 1.0));
        r = where(g, inside, clrun__gscale(g, d, alpha, 0.0), zero(g, d));
    } else if (strcmp(op, "hard_swish") == 0) {
        /* PyTorch: 0 below -3, dy (x / 3 + 0.5) up to 3, dy above. */
        clrun_tensor_id mid = where(g, compare(g, "less_equal", x, 3.0),
                                    mul(g, d, clrun__gscale(g, x, 1.0 / 3.0, 0.5)), d);
        r = where(g, compare(g, "less", x, -3.0), zero(g, d), mid);
    } else if (strcmp(op, "clip") == 0) {
        const clrun_attr *lo = clrun__gnode_attr(node, "min"), *hi = clrun__gnode_attr(node, "max");
        clrun_tensor_id keep = -2;
        if (lo)
            keep = compare(g, "greater_equal", x, lo->kind == CLRUN_ATTR_INT ? (double)lo->i : lo->f);
        if (hi) {
            clrun_tensor_id k = compare(g, "less_equal", x, hi->kind == CLRUN_ATTR_INT ? (double)hi->i : hi->f);
            keep = keep == -2 ? k : clrun__gemit2(g, "and", keep, k);
        }
        r = keep == -2 ? d : where(g, keep, d, zero(g, d));
    } else if (strcmp(op, "scale") == 0) {
        r = clrun__gscale(g, d, clrun__gnode_float(node, "alpha", 1.0), 0.0);
    } else if (strcmp(op, "copy") == 0) {
        r = d;
    } else if (strcmp(op, "cast") == 0) {
        clrun_attr to = clrun__gattr_int("to", clrun__gfwd_type(g, x)->dtype);
        r = clrun__gemit(g, "cast", &d, 1, &to, 1);
    } else {
        /* floor, ceil, round, sign: flat almost everywhere. */
        r = clrun__gzeros(g, clrun__gfwd_type(g, x));
    }
    dx[0] = r;
    return r < 0 ? CLRUN_ERROR_INVALID_GRAPH : CLRUN_OK;
}

/* ---- binary ---- */

static clrun_status binary(clrun__grad *g, const clrun__node *node, const clrun_tensor_id *dy,
                           const bool *want, clrun_tensor_id *dx)
{
    const char *op = node->op->name;
    clrun_tensor_id a = node->inputs[0], b = node->inputs[1], y = Y(node), d = dy[0];
    clrun_tensor_id da = -1, db = -1;
    if (strcmp(op, "add") == 0) {
        da = d, db = d;
    } else if (strcmp(op, "sub") == 0) {
        da = d;
        db = want[1] ? clrun__gemit1(g, "neg", d) : -1;
    } else if (strcmp(op, "mul") == 0) {
        da = want[0] ? mul(g, d, b) : -1;
        db = want[1] ? mul(g, d, a) : -1;
    } else if (strcmp(op, "div") == 0) {
        da = want[0] ? clrun__gemit2(g, "div", d, b) : -1;
        db = want[1] ? clrun__gemit1(g, "neg", clrun__gemit2(g, "div", mul(g, d, y), b)) : -1;
    } else if (strcmp(op, "pow") == 0) {
        if (want[0]) {
            clrun_tensor_id bm1 = clrun__gemit2(g, "sub", b, clrun__gscalar(g, clrun__gtype(g, b)->dtype, 1.0));
            da = mul(g, d, mul(g, b, clrun__gemit2(g, "pow", a, bm1)));
        }
        if (want[1]) {
            /* d/db a^b = a^b ln a; PyTorch takes it as 0 where a <= 0 (no real log). */
            clrun_tensor_id pos = compare(g, "greater", a, 0.0);
            clrun_tensor_id safe = where(g, pos, a, clrun__gscalar(g, clrun__gtype(g, a)->dtype, 1.0));
            db = where(g, pos, mul(g, mul(g, d, y), clrun__gemit1(g, "log", safe)), zero(g, d));
        }
    } else if (strcmp(op, "maximum") == 0 || strcmp(op, "minimum") == 0) {
        /* The operand the forward chose gets dy (a on ties, as the forward takes a). */
        clrun_tensor_id pick_a = clrun__gemit2(g, strcmp(op, "maximum") == 0 ? "greater_equal"
                                                                              : "less_equal", a, b);
        da = want[0] ? where(g, pick_a, d, zero(g, d)) : -1;
        db = want[1] ? where(g, pick_a, zero(g, d), d) : -1;
    } else if (strcmp(op, "prelu") == 0) {
        clrun_tensor_id neg = compare(g, "less", a, 0.0);
        da = want[0] ? where(g, neg, mul(g, d, b), d) : -1;
        db = want[1] ? where(g, neg, mul(g, d, a), zero(g, d)) : -1;
    } else {
        return clrun__grad_failed(g, CLRUN_ERROR_UNSUPPORTED, "gradient: op '%s' has no rule", op);
    }
    if (want[0]) {
        dx[0] = clrun__gunbroadcast(g, da, clrun__gfwd_type(g, a));
        if (dx[0] < 0)
            return CLRUN_ERROR_INVALID_GRAPH;
    }
    if (want[1]) {
        dx[1] = clrun__gunbroadcast(g, db, clrun__gfwd_type(g, b));
        if (dx[1] < 0)
            return CLRUN_ERROR_INVALID_GRAPH;
    }
    return CLRUN_OK;
}

static clrun_status where_rule(clrun__grad *g, const clrun__node *node, const clrun_tensor_id *dy,
                               const bool *want, clrun_tensor_id *dx)
{
    clrun_tensor_id c = node->inputs[0], d = dy[0];
    for (int i = 1; i <= 2; i++) {
        if (!want[i])
            continue;
        clrun_tensor_id r = i == 1 ? where(g, c, d, zero(g, d)) : where(g, c, zero(g, d), d);
        dx[i] = clrun__gunbroadcast(g, r, clrun__gfwd_type(g, node->inputs[i]));
        if (dx[i] < 0)
            return CLRUN_ERROR_INVALID_GRAPH;
    }
    return CLRUN_OK;
}

#define UNARY(name) {name, unary, 0x1u}
#define BINARY(name) {name, binary, 0x3u}

const clrun__grad_rule clrun__grad_rules_elementwise[] = {
    UNARY("neg"), UNARY("abs"), UNARY("relu"), UNARY("leaky_relu"), UNARY("elu"), UNARY("celu"),
    UNARY("selu"), UNARY("sigmoid"), UNARY("tanh"), UNARY("exp"), UNARY("log"), UNARY("sqrt"),
    UNARY("rsqrt"), UNARY("reciprocal"), UNARY("sin"), UNARY("cos"), UNARY("erf"),
    UNARY("softplus"), UNARY("softsign"), UNARY("gelu"), UNARY("gelu_erf"),
    UNARY("hard_sigmoid"), UNARY("hard_swish"), UNARY("clip"), UNARY("scale"), UNARY("copy"),
    UNARY("cast"), UNARY("floor"), UNARY("ceil"), UNARY("round"), UNARY("sign"),
    BINARY("add"), BINARY("sub"), BINARY("mul"), BINARY("div"), BINARY("pow"),
    BINARY("maximum"), BINARY("minimum"), BINARY("prelu"),
    {"where", where_rule, 0x6u},
    {NULL, NULL, 0},
};
