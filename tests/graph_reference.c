/* The double-precision graph evaluator of the tests: see graph_reference.h. One function per op
 * family, each a plain loop over its output's elements computing what docs/ops.md defines. */
#include "graph_reference.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"

#define MAX_IO 64 /* inputs of one node (concat takes up to 32) */

/* What one node's evaluation sees. */
typedef struct node_eval {
    const clrun_graph *graph;
    const clrun__node *node;
    int32_t index;                     /* node number, for messages */
    const char *op;
    int nin;
    const clrun_tensor_type *it[MAX_IO]; /* input types */
    const double *in[MAX_IO];          /* input values */
    const clrun_tensor_type *ot;       /* output 0 */
    double *out;
    uint64_t on;                       /* elements of output 0 */
    char *err;
    size_t errlen;
} node_eval;

static void message(char *err, size_t errlen, const char *format, ...) CLRUN__PRINTF(3, 4);
static void message(char *err, size_t errlen, const char *format, ...)
{
    if (err == NULL || errlen == 0)
        return;
    va_list ap;
    va_start(ap, format);
    vsnprintf(err, errlen, format, ap);
    va_end(ap);
}

static int fail(const node_eval *e, const char *format, ...) CLRUN__PRINTF(2, 3);
static int fail(const node_eval *e, const char *format, ...)
{
    char text[512];
    va_list ap;
    va_start(ap, format);
    vsnprintf(text, sizeof text, format, ap);
    va_end(ap);
    const char *name = e->node->output_count > 0
                           ? clrun_graph_tensor_ident(e->graph, e->node->outputs[0]) : "?";
    message(e->err, e->errlen, "graph reference: node %d '%s' (%s): %s", (int)e->index, name,
            e->op, text);
    return -1;
}

/* ---- attributes -------------------------------------------------------------------------- */

static const clrun_attr *find_attr(const node_eval *e, const char *name)
{
    for (int i = 0; i < e->node->attr_count; i++)
        if (e->node->attrs[i].name && strcmp(e->node->attrs[i].name, name) == 0)
            return &e->node->attrs[i];
    return NULL;
}

static int64_t attr_int(const node_eval *e, const char *name, int64_t fallback)
{
    const clrun_attr *a = find_attr(e, name);
    return a && a->kind == CLRUN_ATTR_INT ? a->i : fallback;
}

/* A float attribute; an integer is accepted too. */
static double attr_float(const node_eval *e, const char *name, double fallback)
{
    const clrun_attr *a = find_attr(e, name);
    if (a && a->kind == CLRUN_ATTR_FLOAT)
        return a->f;
    if (a && a->kind == CLRUN_ATTR_INT)
        return (double)a->i;
    return fallback;
}

/* A list attribute into out; one integer is a list of one. Returns its length, 0 if absent. */
static int attr_list(const node_eval *e, const char *name, int64_t *out)
{
    const clrun_attr *a = find_attr(e, name);
    if (a && a->kind == CLRUN_ATTR_INT) {
        out[0] = a->i;
        return 1;
    }
    if (a && a->kind == CLRUN_ATTR_INTS) {
        for (int i = 0; i < a->count; i++)
            out[i] = a->ints[i];
        return a->count;
    }
    return 0;
}

/* A pair ([h, w], or one value for both) or the fallback. */
static void attr_pair(const node_eval *e, const char *name, int64_t fallback0, int64_t fallback1,
                      int64_t *out)
{
    int64_t v[CLRUN_MAX_ATTR_INTS];
    int n = attr_list(e, name, v);
    out[0] = n == 0 ? fallback0 : v[0];
    out[1] = n == 0 ? fallback1 : n == 1 ? v[0] : v[1];
}

/* conv and pool padding: `pads` [top, left, bottom, right], else `pad` on both sides. */
static void attr_pads(const node_eval *e, int64_t *begin, int64_t *end)
{
    int64_t v[CLRUN_MAX_ATTR_INTS];
    if (attr_list(e, "pads", v) == 4) {
        begin[0] = v[0], begin[1] = v[1], end[0] = v[2], end[1] = v[3];
        return;
    }
    attr_pair(e, "pad", 0, 0, begin);
    end[0] = begin[0], end[1] = begin[1];
}

static int64_t norm_axis(int64_t axis, int rank) { return axis < 0 ? axis + rank : axis; }

/* ---- shapes and indices ------------------------------------------------------------------ */

static uint64_t count_of(const clrun_tensor_type *t)
{
    uint64_t n = 1;
    for (int d = 0; d < t->rank; d++)
        n *= (uint64_t)t->shape[d];
    return n;
}

/* Product of dims [from, to). */
static uint64_t dims_product(const clrun_tensor_type *t, int from, int to)
{
    uint64_t n = 1;
    for (int d = from; d < to; d++)
        n *= (uint64_t)t->shape[d];
    return n;
}

static void unravel(const clrun_tensor_type *t, uint64_t i, int64_t *c)
{
    for (int d = t->rank - 1; d >= 0; d--) {
        c[d] = (int64_t)(i % (uint64_t)t->shape[d]);
        i /= (uint64_t)t->shape[d];
    }
}

static uint64_t ravel(const clrun_tensor_type *t, const int64_t *c)
{
    uint64_t i = 0;
    for (int d = 0; d < t->rank; d++)
        i = i * (uint64_t)t->shape[d] + (uint64_t)c[d];
    return i;
}

/* The element of t (right-aligned against `out`, its dims of 1 broadcast) at out's coordinates. */
static uint64_t broadcast_at(const clrun_tensor_type *t, const clrun_tensor_type *out,
                             const int64_t *c)
{
    uint64_t i = 0;
    for (int d = 0; d < t->rank; d++) {
        int64_t cd = c[out->rank - t->rank + d];
        i = i * (uint64_t)t->shape[d] + (uint64_t)(t->shape[d] == 1 ? 0 : cd);
    }
    return i;
}

/* ---- integers ---------------------------------------------------------------------------- */

static bool is_int(clrun_dtype dtype) { return dtype == CLRUN_I32 || dtype == CLRUN_I64; }
static bool is_float(clrun_dtype dtype)
{
    return dtype == CLRUN_F32 || dtype == CLRUN_F64 || dtype == CLRUN_F16;
}

/* A held integer as int64 (saturating, so that no conversion is undefined). */
static int64_t to_i64(double v)
{
    if (v != v)
        return 0;
    if (v >= 9223372036854775807.0)
        return INT64_MAX;
    if (v <= -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)v;
}

/* Two's complement bits as a value of the integer dtype (i32 wraps). */
static double wrap(clrun_dtype dtype, uint64_t bits)
{
    if (dtype == CLRUN_I32) {
        uint32_t u = (uint32_t)bits;
        return u >= UINT32_C(0x80000000) ? (double)u - 4294967296.0 : (double)u;
    }
    return bits >= UINT64_C(0x8000000000000000) ? -(double)(0 - bits) : (double)bits;
}

static double int_div(clrun_dtype dtype, int64_t a, int64_t b)
{
    if (b == 0)
        return 0;
    if (b == -1)
        return wrap(dtype, 0 - (uint64_t)a);
    return (double)(a / b);
}

static double int_pow(clrun_dtype dtype, int64_t a, int64_t b)
{
    if (b < 0)
        return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
    uint64_t r = 1, base = (uint64_t)a, x = (uint64_t)b;
    if (dtype == CLRUN_I32) /* the exponent as i32 bits */
        x = (uint32_t)x;
    while (x != 0) {
        if (x & 1)
            r *= base;
        base *= base;
        x >>= 1;
    }
    return wrap(dtype, r);
}

static double int_mod(int64_t a, int64_t b, bool c_fmod)
{
    if (b == 0 || b == -1)
        return 0;
    int64_t r = a % b;
    if (!c_fmod && r != 0 && ((r < 0) != (b < 0)))
        r += b;
    return (double)r;
}

static double float_mod(double a, double b, bool c_fmod)
{
    double r = fmod(a, b);
    if (c_fmod)
        return r;
    if (r == 0)
        return copysign(0.0, b);
    return (r < 0) != (b < 0) ? r + b : r;
}

/* ---- elementwise ------------------------------------------------------------------------- */

enum unary_code {
    U_NEG, U_ABS, U_RELU, U_SIGN, U_GELU, U_GELU_ERF, U_SIGMOID, U_TANH, U_EXP, U_LOG, U_SQRT,
    U_RSQRT, U_RECIPROCAL, U_FLOOR, U_CEIL, U_ROUND, U_SIN, U_COS, U_ERF, U_SOFTPLUS, U_SOFTSIGN,
    U_HARD_SIGMOID, U_HARD_SWISH, U_LEAKY_RELU, U_ELU, U_CELU, U_SELU, U_CLIP, U_NOT, U_COPY,
    U_SCALE,
};

static const struct { const char *name; enum unary_code code; } unary_ops[] = {
    {"neg", U_NEG}, {"abs", U_ABS}, {"relu", U_RELU}, {"sign", U_SIGN}, {"gelu", U_GELU},
    {"gelu_erf", U_GELU_ERF}, {"sigmoid", U_SIGMOID}, {"tanh", U_TANH}, {"exp", U_EXP},
    {"log", U_LOG}, {"sqrt", U_SQRT}, {"rsqrt", U_RSQRT}, {"reciprocal", U_RECIPROCAL},
    {"floor", U_FLOOR}, {"ceil", U_CEIL}, {"round", U_ROUND}, {"sin", U_SIN}, {"cos", U_COS},
    {"erf", U_ERF}, {"softplus", U_SOFTPLUS}, {"softsign", U_SOFTSIGN},
    {"hard_sigmoid", U_HARD_SIGMOID}, {"hard_swish", U_HARD_SWISH}, {"leaky_relu", U_LEAKY_RELU},
    {"elu", U_ELU}, {"celu", U_CELU}, {"selu", U_SELU}, {"clip", U_CLIP}, {"not", U_NOT},
    {"copy", U_COPY}, {"scale", U_SCALE},
};

static double clip(double x, double lo, double hi)
{
    x = x < lo ? lo : x;
    return x > hi ? hi : x;
}

static double unary_float(enum unary_code code, double x, double p0, double p1)
{
    switch (code) {
    case U_NEG: return -x;
    case U_ABS: return fabs(x);
    case U_RELU: return x < 0 ? 0 : x;
    case U_SIGN: return x > 0 ? 1 : x < 0 ? -1 : x;
    case U_GELU: return 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    case U_GELU_ERF: return 0.5 * x * erfc(-x / sqrt(2.0));
    case U_SIGMOID: return 1 / (1 + exp(-x));
    case U_TANH: return tanh(x);
    case U_EXP: return exp(x);
    case U_LOG: return log(x);
    case U_SQRT: return sqrt(x);
    case U_RSQRT: return 1 / sqrt(x);
    case U_RECIPROCAL: return 1 / x;
    case U_FLOOR: return floor(x);
    case U_CEIL: return ceil(x);
    case U_ROUND: return nearbyint(x); /* the default rounding: half to even */
    case U_SIN: return sin(x);
    case U_COS: return cos(x);
    case U_ERF: return erf(x);
    case U_SOFTPLUS: return x > 40 ? x : log1p(exp(x));
    case U_SOFTSIGN: return x / (1 + fabs(x));
    case U_HARD_SIGMOID: return clip(p0 * x + p1, 0, 1);
    case U_HARD_SWISH: return x * clip(x / 6 + 0.5, 0, 1);
    case U_LEAKY_RELU: return x < 0 ? p0 * x : x;
    case U_ELU: return x < 0 ? p0 * expm1(x) : x;
    case U_CELU: return x > 0 ? x : p0 * expm1(x / p0);
    case U_SELU: return x > 0 ? p1 * x : p1 * (p0 * expm1(x));
    case U_CLIP: return clip(x, p0, p1);
    case U_NOT: return x == 0;
    case U_COPY: return x;
    case U_SCALE: return p0 * x + p1;
    }
    return NAN;
}

static int ev_unary(node_eval *e)
{
    int code = -1;
    for (size_t i = 0; i < sizeof unary_ops / sizeof unary_ops[0]; i++)
        if (strcmp(e->op, unary_ops[i].name) == 0)
            code = (int)unary_ops[i].code;
    double p0 = 0, p1 = 0;
    switch (code) {
    case U_HARD_SIGMOID: p0 = attr_float(e, "alpha", 0.2), p1 = attr_float(e, "beta", 0.5); break;
    case U_LEAKY_RELU: p0 = attr_float(e, "alpha", 0.01); break;
    case U_ELU: case U_CELU: p0 = attr_float(e, "alpha", 1); break;
    case U_SELU:
        p0 = attr_float(e, "alpha", 1.67326319217681884765625);
        p1 = attr_float(e, "gamma", 1.05070102214813232421875);
        break;
    case U_CLIP: p0 = attr_float(e, "min", -INFINITY), p1 = attr_float(e, "max", INFINITY); break;
    case U_SCALE: p0 = attr_float(e, "alpha", 1), p1 = attr_float(e, "beta", 0); break;
    default: break;
    }
    clrun_dtype dtype = e->it[0]->dtype;
    const double *x = e->in[0];
    if (!is_int(dtype)) {
        for (uint64_t i = 0; i < e->on; i++)
            e->out[i] = unary_float((enum unary_code)code, x[i], p0, p1);
        return 0;
    }
    /* Integers: min rounded up and max down for clip; negation wraps. */
    double lo = ceil(p0), hi = floor(p1);
    for (uint64_t i = 0; i < e->on; i++) {
        int64_t v = to_i64(x[i]);
        switch (code) {
        case U_NEG: e->out[i] = wrap(dtype, 0 - (uint64_t)v); break;
        case U_ABS: e->out[i] = v < 0 ? wrap(dtype, 0 - (uint64_t)v) : (double)v; break;
        case U_RELU: e->out[i] = v < 0 ? 0 : (double)v; break;
        case U_SIGN: e->out[i] = v > 0 ? 1 : v < 0 ? -1 : 0; break;
        case U_CLIP: e->out[i] = clip((double)v, lo, hi); break;
        case U_COPY: e->out[i] = (double)v; break;
        default: return fail(e, "no integer form in the reference");
        }
    }
    return 0;
}

static int ev_cast(node_eval *e)
{
    clrun_dtype from = e->it[0]->dtype, to = e->ot->dtype;
    for (uint64_t i = 0; i < e->on; i++) {
        double x = e->in[0][i];
        if (to == CLRUN_BOOL) {
            e->out[i] = x != 0; /* NaN too */
        } else if (!is_int(to)) {
            e->out[i] = x; /* floats are held unrounded */
        } else if (is_float(from)) { /* toward zero, saturating, NaN to 0 */
            double lo = to == CLRUN_I32 ? -2147483648.0 : -9223372036854775808.0;
            double hi = to == CLRUN_I32 ? 2147483647.0 : 9223372036854775807.0;
            e->out[i] = x != x ? 0 : x <= lo ? lo : x >= hi ? hi : trunc(x);
        } else { /* integers and bools: narrowed by wrapping */
            e->out[i] = wrap(to, (uint64_t)to_i64(x));
        }
    }
    return 0;
}

static int ev_binary(node_eval *e)
{
    const char *op = e->op;
    clrun_dtype dtype = e->it[0]->dtype;
    bool fmod_flag = attr_int(e, "fmod", 0) != 0;
    int64_t c[CLRUN_MAX_DIMS];
    for (uint64_t i = 0; i < e->on; i++) {
        unravel(e->ot, i, c);
        double a = e->in[0][broadcast_at(e->it[0], e->ot, c)];
        double b = e->in[1][broadcast_at(e->it[1], e->ot, c)];
        double r;
        if (!strcmp(op, "equal"))
            r = dtype == CLRUN_BOOL ? (a != 0) == (b != 0) : a == b;
        else if (!strcmp(op, "less")) r = a < b;
        else if (!strcmp(op, "greater")) r = a > b;
        else if (!strcmp(op, "less_equal")) r = a <= b;
        else if (!strcmp(op, "greater_equal")) r = a >= b;
        else if (!strcmp(op, "and")) r = (a != 0) && (b != 0);
        else if (!strcmp(op, "or")) r = (a != 0) || (b != 0);
        else if (!strcmp(op, "xor")) r = (a != 0) != (b != 0);
        else if (is_int(dtype)) {
            int64_t x = to_i64(a), y = to_i64(b);
            if (!strcmp(op, "add")) r = wrap(dtype, (uint64_t)x + (uint64_t)y);
            else if (!strcmp(op, "sub")) r = wrap(dtype, (uint64_t)x - (uint64_t)y);
            else if (!strcmp(op, "mul")) r = wrap(dtype, (uint64_t)x * (uint64_t)y);
            else if (!strcmp(op, "div")) r = int_div(dtype, x, y);
            else if (!strcmp(op, "pow")) r = int_pow(dtype, x, y);
            else if (!strcmp(op, "maximum")) r = (double)(x > y ? x : y);
            else if (!strcmp(op, "minimum")) r = (double)(x < y ? x : y);
            else if (!strcmp(op, "mod")) r = int_mod(x, y, fmod_flag);
            else return fail(e, "no integer form in the reference");
        } else {
            if (!strcmp(op, "add")) r = a + b;
            else if (!strcmp(op, "sub")) r = a - b;
            else if (!strcmp(op, "mul")) r = a * b;
            else if (!strcmp(op, "div")) r = a / b;
            else if (!strcmp(op, "pow")) r = pow(a, b);
            else if (!strcmp(op, "maximum")) r = a > b || a != a ? a : b;
            else if (!strcmp(op, "minimum")) r = a < b || a != a ? a : b;
            else if (!strcmp(op, "prelu")) r = a < 0 ? b * a : a;
            else if (!strcmp(op, "mod")) r = float_mod(a, b, fmod_flag);
            else return fail(e, "no float form in the reference");
        }
        e->out[i] = r;
    }
    return 0;
}

static int ev_where(node_eval *e)
{
    int64_t c[CLRUN_MAX_DIMS];
    for (uint64_t i = 0; i < e->on; i++) {
        unravel(e->ot, i, c);
        double cond = e->in[0][broadcast_at(e->it[0], e->ot, c)];
        e->out[i] = cond != 0 ? e->in[1][broadcast_at(e->it[1], e->ot, c)]
                              : e->in[2][broadcast_at(e->it[2], e->ot, c)];
    }
    return 0;
}

/* ---- matmul ------------------------------------------------------------------------------ */

static clrun_tensor_type batch_of(const clrun_tensor_type *t)
{
    clrun_tensor_type b = *t;
    b.rank = t->rank - 2;
    return b;
}

static int ev_matmul(node_eval *e)
{
    const clrun_tensor_type *ta = e->it[0], *tb = e->it[1], *to = e->ot;
    bool trans_a = attr_int(e, "transpose_a", 0) != 0, trans_b = attr_int(e, "transpose_b", 0) != 0;
    double alpha = attr_float(e, "alpha", 1);
    int64_t M = to->shape[to->rank - 2], N = to->shape[to->rank - 1];
    int64_t K = trans_a ? ta->shape[ta->rank - 2] : ta->shape[ta->rank - 1];
    clrun_tensor_type ba = batch_of(ta), bb = batch_of(tb), bo = batch_of(to);
    const double *bias = e->nin > 2 ? e->in[2] : NULL;
    int64_t c[CLRUN_MAX_DIMS];
    for (uint64_t i = 0; i < e->on; i++) {
        uint64_t z = i / (uint64_t)(M * N);
        int64_t m = (int64_t)(i / (uint64_t)N % (uint64_t)M), n = (int64_t)(i % (uint64_t)N);
        unravel(&bo, z, c);
        const double *a = e->in[0] + broadcast_at(&ba, &bo, c) * (uint64_t)(M * K);
        const double *b = e->in[1] + broadcast_at(&bb, &bo, c) * (uint64_t)(K * N);
        double sum = 0;
        for (int64_t k = 0; k < K; k++)
            sum += (trans_a ? a[k * M + m] : a[m * K + k]) * (trans_b ? b[n * K + k] : b[k * N + n]);
        e->out[i] = alpha * sum + (bias ? bias[n] : 0);
    }
    return 0;
}

/* ---- rows: softmax, logsoftmax, layernorm, batchnorm, instancenorm, softmax_xent ---------- */

static int ev_softmax(node_eval *e)
{
    const clrun_tensor_type *t = e->it[0];
    int axis = (int)norm_axis(attr_int(e, "axis", -1), t->rank);
    bool causal = attr_int(e, "causal", 0) != 0, log_form = !strcmp(e->op, "logsoftmax");
    uint64_t outer = dims_product(t, 0, axis), len = (uint64_t)t->shape[axis];
    uint64_t inner = dims_product(t, axis + 1, t->rank);
    int64_t M = t->rank >= 2 ? t->shape[t->rank - 2] : 1, N = t->shape[t->rank - 1];
    for (uint64_t o = 0; o < outer; o++)
        for (uint64_t in = 0; in < inner; in++) {
            const double *x = e->in[0] + o * len * inner + in;
            double *y = e->out + o * len * inner + in;
            /* causal (last axis, inner = 1): row o is position o % M of its matrix */
            int64_t last = causal ? (int64_t)(o % (uint64_t)M) + N - M : (int64_t)len - 1;
            double mx = -INFINITY, sum = 0;
            for (int64_t j = 0; j <= last && j < (int64_t)len; j++)
                mx = x[(uint64_t)j * inner] > mx ? x[(uint64_t)j * inner] : mx;
            for (int64_t j = 0; j <= last && j < (int64_t)len; j++)
                sum += exp(x[(uint64_t)j * inner] - mx);
            for (int64_t j = 0; j < (int64_t)len; j++) {
                double v = x[(uint64_t)j * inner];
                y[(uint64_t)j * inner] = j > last ? 0 : log_form ? v - mx - log(sum) : exp(v - mx) / sum;
            }
        }
    return 0;
}

static int ev_layernorm(node_eval *e)
{
    const clrun_tensor_type *t = e->it[0];
    int axis = (int)norm_axis(attr_int(e, "axis", -1), t->rank);
    double eps = attr_float(e, "eps", 1e-5);
    uint64_t D = dims_product(t, axis, t->rank), rows = e->on / D;
    const double *gamma = e->in[1], *beta = e->nin > 2 ? e->in[2] : NULL;
    for (uint64_t r = 0; r < rows; r++) {
        const double *x = e->in[0] + r * D;
        double mean = 0, var = 0;
        for (uint64_t j = 0; j < D; j++)
            mean += x[j];
        mean /= (double)D;
        for (uint64_t j = 0; j < D; j++)
            var += (x[j] - mean) * (x[j] - mean);
        var /= (double)D;
        for (uint64_t j = 0; j < D; j++)
            e->out[r * D + j] = (x[j] - mean) / sqrt(var + eps) * gamma[j] + (beta ? beta[j] : 0);
    }
    return 0;
}

static int ev_batchnorm(node_eval *e)
{
    const clrun_tensor_type *t = e->it[0];
    double eps = attr_float(e, "eps", 1e-5);
    uint64_t C = (uint64_t)t->shape[1], inner = dims_product(t, 2, t->rank);
    for (uint64_t i = 0; i < e->on; i++) {
        uint64_t c = i / inner % C;
        e->out[i] = (e->in[0][i] - e->in[3][c]) * e->in[1][c] / sqrt(e->in[4][c] + eps) + e->in[2][c];
    }
    return 0;
}

static int ev_instancenorm(node_eval *e)
{
    const clrun_tensor_type *t = e->it[0];
    double eps = attr_float(e, "eps", 1e-5);
    uint64_t C = (uint64_t)t->shape[1], D = dims_product(t, 2, t->rank), planes = e->on / D;
    for (uint64_t p = 0; p < planes; p++) {
        const double *x = e->in[0] + p * D;
        double mean = 0, var = 0;
        for (uint64_t j = 0; j < D; j++)
            mean += x[j];
        mean /= (double)D;
        for (uint64_t j = 0; j < D; j++)
            var += (x[j] - mean) * (x[j] - mean);
        var /= (double)D;
        for (uint64_t j = 0; j < D; j++)
            e->out[p * D + j] = (x[j] - mean) / sqrt(var + eps) * e->in[1][p % C] + e->in[2][p % C];
    }
    return 0;
}

/* logits [..., C], labels [...]: logsumexp of the row less the label's logit; ignore_index
 * rows give 0. */
static int ev_softmax_xent(node_eval *e)
{
    const clrun_tensor_type *t = e->it[0];
    uint64_t C = (uint64_t)t->shape[t->rank - 1], rows = count_of(e->it[1]);
    const clrun_attr *ignore = find_attr(e, "ignore_index");
    for (uint64_t r = 0; r < rows; r++) {
        const double *x = e->in[0] + r * C;
        int64_t label = to_i64(e->in[1][r]);
        if (ignore && ignore->kind == CLRUN_ATTR_INT && label == ignore->i) {
            e->out[r] = 0;
            continue;
        }
        if (label < 0 || (uint64_t)label >= C)
            return fail(e, "label %lld of row %llu is outside [0, %llu)", (long long)label,
                        (unsigned long long)r, (unsigned long long)C);
        double mx = -INFINITY, sum = 0;
        for (uint64_t j = 0; j < C; j++)
            mx = x[j] > mx ? x[j] : mx;
        for (uint64_t j = 0; j < C; j++)
            sum += exp(x[j] - mx);
        e->out[r] = mx + log(sum) - x[label];
    }
    return 0;
}

/* ---- reductions and argmax --------------------------------------------------------------- */

static int ev_reduce(node_eval *e)
{
    const clrun_tensor_type *t = e->it[0];
    const char *op = e->op + strlen("reduce_");
    int64_t axes[CLRUN_MAX_ATTR_INTS];
    int n = attr_list(e, "axes", axes);
    bool reduced[CLRUN_MAX_DIMS];
    for (int d = 0; d < t->rank; d++)
        reduced[d] = n == 0;
    for (int i = 0; i < n; i++)
        reduced[norm_axis(axes[i], t->rank)] = true;
    uint64_t count = 1;
    for (int d = 0; d < t->rank; d++)
        count *= reduced[d] ? (uint64_t)t->shape[d] : 1;
    bool is_max = !strcmp(op, "max"), is_min = !strcmp(op, "min"), is_prod = !strcmp(op, "prod");
    bool squares = !strcmp(op, "l2") || !strcmp(op, "sum_square");
    for (uint64_t o = 0; o < e->on; o++)
        e->out[o] = is_max ? -INFINITY : is_min ? INFINITY : is_prod ? 1 : 0;
    int64_t c[CLRUN_MAX_DIMS];
    for (uint64_t i = 0; i < count_of(t); i++) {
        unravel(t, i, c);
        uint64_t o = 0; /* the kept coordinates, in order (keepdims only adds dims of 1) */
        for (int d = 0; d < t->rank; d++)
            if (!reduced[d])
                o = o * (uint64_t)t->shape[d] + (uint64_t)c[d];
        double x = e->in[0][i];
        if (is_max)
            e->out[o] = x > e->out[o] ? x : e->out[o];
        else if (is_min)
            e->out[o] = x < e->out[o] ? x : e->out[o];
        else if (is_prod)
            e->out[o] *= x;
        else
            e->out[o] += squares ? x * x : x;
    }
    for (uint64_t o = 0; o < e->on; o++) {
        if (!strcmp(op, "mean"))
            e->out[o] /= (double)count;
        else if (!strcmp(op, "l2"))
            e->out[o] = sqrt(e->out[o]);
    }
    return 0;
}

static int ev_argmax(node_eval *e)
{
    const clrun_tensor_type *t = e->it[0];
    int axis = (int)norm_axis(attr_int(e, "axis", 0), t->rank);
    bool last = attr_int(e, "select_last_index", 0) != 0, is_max = !strcmp(e->op, "argmax");
    uint64_t len = (uint64_t)t->shape[axis], inner = dims_product(t, axis + 1, t->rank);
    for (uint64_t o = 0; o < e->on; o++) {
        const double *x = e->in[0] + o / inner * len * inner + o % inner;
        uint64_t best = 0;
        for (uint64_t j = 1; j < len; j++) {
            double v = x[j * inner], b = x[best * inner];
            bool better = is_max ? (last ? v >= b : v > b) : (last ? v <= b : v < b);
            if (better)
                best = j;
        }
        e->out[o] = (double)best;
    }
    return 0;
}

/* ---- layout ------------------------------------------------------------------------------ */

static int ev_copy_all(node_eval *e)
{
    memcpy(e->out, e->in[0], e->on * sizeof(double));
    return 0;
}

static int ev_transpose(node_eval *e)
{
    int64_t perm[CLRUN_MAX_ATTR_INTS], c[CLRUN_MAX_DIMS], ci[CLRUN_MAX_DIMS];
    attr_list(e, "perm", perm);
    for (uint64_t i = 0; i < e->on; i++) {
        unravel(e->ot, i, c);
        for (int d = 0; d < e->ot->rank; d++)
            ci[perm[d]] = c[d];
        e->out[i] = e->in[0][ravel(e->it[0], ci)];
    }
    return 0;
}

static int ev_concat(node_eval *e)
{
    int axis = (int)norm_axis(attr_int(e, "axis", 0), e->ot->rank);
    int64_t c[CLRUN_MAX_DIMS];
    for (uint64_t i = 0; i < e->on; i++) {
        unravel(e->ot, i, c);
        int k = 0;
        while (c[axis] >= e->it[k]->shape[axis])
            c[axis] -= e->it[k++]->shape[axis];
        e->out[i] = e->in[k][ravel(e->it[k], c)];
    }
    return 0;
}

/* Output coordinate c along an axis reads input coordinate start[d] + c * step[d]. */
static int strided_copy(node_eval *e, const int64_t *start, const int64_t *step)
{
    int64_t c[CLRUN_MAX_DIMS];
    for (uint64_t i = 0; i < e->on; i++) {
        unravel(e->ot, i, c);
        for (int d = 0; d < e->ot->rank; d++)
            c[d] = start[d] + c[d] * step[d];
        e->out[i] = e->in[0][ravel(e->it[0], c)];
    }
    return 0;
}

static int ev_slice(node_eval *e)
{
    const clrun_tensor_type *t = e->it[0];
    int64_t start[CLRUN_MAX_DIMS], step[CLRUN_MAX_DIMS];
    for (int d = 0; d < t->rank; d++)
        start[d] = 0, step[d] = 1;
    int64_t starts[CLRUN_MAX_ATTR_INTS], ends[CLRUN_MAX_ATTR_INTS], axes[CLRUN_MAX_ATTR_INTS];
    int64_t steps[CLRUN_MAX_ATTR_INTS];
    int n = attr_list(e, "starts", starts);
    if (find_attr(e, "starts") == NULL) { /* single-axis form */
        int axis = (int)norm_axis(attr_int(e, "axis", 0), t->rank);
        int64_t s = attr_int(e, "start", 0);
        start[axis] = s < 0 ? s + t->shape[axis] : s;
        return strided_copy(e, start, step);
    }
    attr_list(e, "ends", ends);
    bool has_axes = attr_list(e, "axes", axes) > 0, has_steps = attr_list(e, "steps", steps) > 0;
    for (int i = 0; i < n; i++) {
        int axis = (int)norm_axis(has_axes ? axes[i] : i, t->rank);
        int64_t dim = t->shape[axis], st = has_steps ? steps[i] : 1, s = starts[i];
        if (s < 0)
            s += dim;
        if (st > 0)
            s = s < 0 ? 0 : s > dim ? dim : s;
        else
            s = s < 0 ? 0 : s > dim - 1 ? dim - 1 : s;
        (void)ends; /* the end only sets the output's extent, which the graph's type has */
        start[axis] = s;
        step[axis] = st;
    }
    return strided_copy(e, start, step);
}

static int ev_split(node_eval *e)
{
    const clrun_tensor_type *t = e->it[0];
    int axis = (int)norm_axis(attr_int(e, "axis", 0), t->rank);
    int64_t sizes[CLRUN_MAX_ATTR_INTS], start[CLRUN_MAX_DIMS] = {0}, step[CLRUN_MAX_DIMS];
    int64_t index = attr_int(e, "index", 0);
    int n = attr_list(e, "split", sizes);
    for (int d = 0; d < t->rank; d++)
        step[d] = 1;
    if (n > 0)
        for (int64_t i = 0; i < index; i++)
            start[axis] += sizes[i];
    else
        start[axis] = index * (t->shape[axis] / attr_int(e, "parts", 1));
    return strided_copy(e, start, step);
}

static int ev_gather(node_eval *e)
{
    const clrun_tensor_type *data = e->it[0], *idx = e->it[1];
    if (find_attr(e, "axis") == NULL) { /* embedding form: [V, D] by indices, zeros outside */
        uint64_t V = (uint64_t)data->shape[0], D = (uint64_t)data->shape[1];
        for (uint64_t i = 0; i < e->on; i++) {
            int64_t k = to_i64(e->in[1][i / D]);
            e->out[i] = k >= 0 && (uint64_t)k < V ? e->in[0][(uint64_t)k * D + i % D] : 0;
        }
        return 0;
    }
    int axis = (int)norm_axis(attr_int(e, "axis", 0), data->rank);
    uint64_t len = (uint64_t)data->shape[axis], inner = dims_product(data, axis + 1, data->rank);
    uint64_t picks = count_of(idx);
    for (uint64_t i = 0; i < e->on; i++) {
        uint64_t o = i / (picks * inner), p = i / inner % picks;
        int64_t k = to_i64(e->in[1][p]);
        if (k < 0)
            k += (int64_t)len;
        if (k < 0 || (uint64_t)k >= len)
            return fail(e, "index %lld at position %llu is outside an axis of %llu",
                        (long long)to_i64(e->in[1][p]), (unsigned long long)p,
                        (unsigned long long)len);
        e->out[i] = e->in[0][(o * len + (uint64_t)k) * inner + i % inner];
    }
    return 0;
}

static int ev_gather_elements(node_eval *e)
{
    const clrun_tensor_type *data = e->it[0];
    int axis = (int)norm_axis(attr_int(e, "axis", 0), data->rank);
    int64_t c[CLRUN_MAX_DIMS];
    for (uint64_t i = 0; i < e->on; i++) {
        unravel(e->ot, i, c);
        int64_t k = to_i64(e->in[1][i]);
        if (k < 0)
            k += data->shape[axis];
        if (k < 0 || k >= data->shape[axis])
            return fail(e, "index %lld at position %llu is outside an axis of %lld",
                        (long long)to_i64(e->in[1][i]), (unsigned long long)i,
                        (long long)data->shape[axis]);
        c[axis] = k;
        e->out[i] = e->in[0][ravel(data, c)];
    }
    return 0;
}

static int ev_expand(node_eval *e)
{
    int64_t c[CLRUN_MAX_DIMS];
    for (uint64_t i = 0; i < e->on; i++) {
        unravel(e->ot, i, c);
        e->out[i] = e->in[0][broadcast_at(e->it[0], e->ot, c)];
    }
    return 0;
}

static int ev_tile(node_eval *e)
{
    int64_t c[CLRUN_MAX_DIMS];
    for (uint64_t i = 0; i < e->on; i++) {
        unravel(e->ot, i, c);
        for (int d = 0; d < e->ot->rank; d++)
            c[d] %= e->it[0]->shape[d];
        e->out[i] = e->in[0][ravel(e->it[0], c)];
    }
    return 0;
}

/* The input coordinate that output coordinate c (begin padded before) reads in an axis of n,
 * or -1 for the constant. */
static int64_t pad_source(int64_t c, int64_t begin, int64_t n, int64_t mode)
{
    int64_t i = c - begin;
    if (i >= 0 && i < n)
        return i;
    if (mode == 2) /* edge */
        return i < 0 ? 0 : n - 1;
    if (mode != 1)
        return -1;
    if (n == 1) /* reflect: mirror without the edge, again and again, as numpy */
        return 0;
    while (i < 0 || i >= n)
        i = i < 0 ? -i : 2 * (n - 1) - i;
    return i;
}

static int ev_pad(node_eval *e)
{
    const clrun_tensor_type *t = e->it[0];
    int64_t pads[CLRUN_MAX_ATTR_INTS], c[CLRUN_MAX_DIMS];
    attr_list(e, "pads", pads);
    int64_t mode = attr_int(e, "mode", 0);
    double value = attr_float(e, "value", 0);
    if (mode < 0 || mode > 2)
        return fail(e, "pad mode %lld is not one the reference knows", (long long)mode);
    for (uint64_t i = 0; i < e->on; i++) {
        unravel(e->ot, i, c);
        bool inside = true;
        for (int d = 0; d < t->rank && inside; d++) {
            c[d] = pad_source(c[d], pads[d], t->shape[d], mode);
            inside = c[d] >= 0;
        }
        e->out[i] = inside ? e->in[0][ravel(t, c)] : value;
    }
    return 0;
}

static int ev_trilu(node_eval *e)
{
    bool upper = attr_int(e, "upper", 1) != 0;
    int64_t k = attr_int(e, "k", 0), c[CLRUN_MAX_DIMS];
    int r = e->ot->rank;
    for (uint64_t i = 0; i < e->on; i++) {
        unravel(e->ot, i, c);
        int64_t diff = c[r - 1] - c[r - 2];
        e->out[i] = (upper ? diff >= k : diff <= k) ? e->in[0][i] : 0;
    }
    return 0;
}

static int ev_cumsum(node_eval *e)
{
    const clrun_tensor_type *t = e->it[0];
    int axis = (int)norm_axis(attr_int(e, "axis", 0), t->rank);
    bool exclusive = attr_int(e, "exclusive", 0) != 0, reverse = attr_int(e, "reverse", 0) != 0;
    int64_t c[CLRUN_MAX_DIMS];
    for (uint64_t i = 0; i < e->on; i++) {
        unravel(t, i, c);
        int64_t at = c[axis], n = t->shape[axis];
        double sum = 0;
        for (int64_t j = 0; j < n; j++) {
            bool before = reverse ? j > at : j < at;
            if (before || (!exclusive && j == at)) {
                c[axis] = j;
                sum += e->in[0][ravel(t, c)];
            }
        }
        e->out[i] = is_int(t->dtype) ? wrap(t->dtype, (uint64_t)to_i64(sum)) : sum;
    }
    return 0;
}

/* ---- convolution and pooling ------------------------------------------------------------- */

static int ev_conv2d(node_eval *e)
{
    const clrun_tensor_type *tx = e->it[0], *tw = e->it[1];
    int64_t stride[2], dil[2], pad[2], pad_end[2];
    attr_pair(e, "stride", 1, 1, stride);
    attr_pair(e, "dilation", 1, 1, dil);
    attr_pads(e, pad, pad_end);
    int64_t groups = attr_int(e, "groups", 1);
    int64_t C = tx->shape[1], H = tx->shape[2], W = tx->shape[3];
    int64_t O = tw->shape[0], Cg = tw->shape[1], KH = tw->shape[2], KW = tw->shape[3];
    int64_t OH = e->ot->shape[2], OW = e->ot->shape[3], Og = O / groups;
    const double *x = e->in[0], *w = e->in[1], *bias = e->nin > 2 ? e->in[2] : NULL;
    for (uint64_t i = 0; i < e->on; i++) {
        int64_t ow = (int64_t)(i % (uint64_t)OW), oh = (int64_t)(i / (uint64_t)OW % (uint64_t)OH);
        int64_t o = (int64_t)(i / (uint64_t)(OW * OH) % (uint64_t)O);
        int64_t n = (int64_t)(i / (uint64_t)(OW * OH * O)), g = o / Og;
        double sum = bias ? bias[o] : 0;
        for (int64_t c = 0; c < Cg; c++)
            for (int64_t kh = 0; kh < KH; kh++)
                for (int64_t kw = 0; kw < KW; kw++) {
                    int64_t ih = oh * stride[0] - pad[0] + kh * dil[0];
                    int64_t iw = ow * stride[1] - pad[1] + kw * dil[1];
                    if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                        continue;
                    sum += x[((n * C + g * Cg + c) * H + ih) * W + iw] *
                           w[((o * Cg + c) * KH + kh) * KW + kw];
                }
        e->out[i] = sum;
    }
    return 0;
}

/* out[n, o, oh, ow] sums x[n, c, ih, iw] w[c, o - g Og, kh, kw] over the group's c and every
 * tap with oh = ih sh - top + kh dh (and likewise across). */
static int ev_conv_transpose2d(node_eval *e)
{
    const clrun_tensor_type *tx = e->it[0], *tw = e->it[1];
    int64_t stride[2], dil[2], pad[2], pad_end[2];
    attr_pair(e, "stride", 1, 1, stride);
    attr_pair(e, "dilation", 1, 1, dil);
    attr_pads(e, pad, pad_end);
    int64_t groups = attr_int(e, "groups", 1);
    int64_t C = tx->shape[1], H = tx->shape[2], W = tx->shape[3];
    int64_t Og = tw->shape[1], KH = tw->shape[2], KW = tw->shape[3], Cg = C / groups;
    int64_t O = e->ot->shape[1], OH = e->ot->shape[2], OW = e->ot->shape[3];
    const double *x = e->in[0], *w = e->in[1], *bias = e->nin > 2 ? e->in[2] : NULL;
    for (uint64_t i = 0; i < e->on; i++) {
        int64_t ow = (int64_t)(i % (uint64_t)OW), oh = (int64_t)(i / (uint64_t)OW % (uint64_t)OH);
        int64_t o = (int64_t)(i / (uint64_t)(OW * OH) % (uint64_t)O);
        int64_t n = (int64_t)(i / (uint64_t)(OW * OH * O)), g = o / Og;
        double sum = bias ? bias[o] : 0;
        for (int64_t c = g * Cg; c < (g + 1) * Cg; c++)
            for (int64_t kh = 0; kh < KH; kh++)
                for (int64_t kw = 0; kw < KW; kw++) {
                    int64_t th = oh + pad[0] - kh * dil[0], tw_ = ow + pad[1] - kw * dil[1];
                    if (th < 0 || tw_ < 0 || th % stride[0] || tw_ % stride[1])
                        continue;
                    int64_t ih = th / stride[0], iw = tw_ / stride[1];
                    if (ih >= H || iw >= W)
                        continue;
                    sum += x[((n * C + c) * H + ih) * W + iw] *
                           w[((c * Og + (o - g * Og)) * KH + kh) * KW + kw];
                }
        e->out[i] = sum;
    }
    return 0;
}

static int ev_pool(node_eval *e)
{
    const clrun_tensor_type *t = e->it[0];
    bool is_max = !strcmp(e->op, "maxpool2d");
    int64_t kernel[2], stride[2], dil[2], pad[2], pad_end[2];
    attr_pair(e, "kernel", 1, 1, kernel);
    attr_pair(e, "stride", kernel[0], kernel[1], stride);
    attr_pair(e, "dilation", 1, 1, dil);
    attr_pads(e, pad, pad_end);
    bool include_pad = attr_int(e, "count_include_pad", 0) != 0;
    int64_t H = t->shape[2], W = t->shape[3], OH = e->ot->shape[2], OW = e->ot->shape[3];
    for (uint64_t i = 0; i < e->on; i++) {
        int64_t ow = (int64_t)(i % (uint64_t)OW), oh = (int64_t)(i / (uint64_t)OW % (uint64_t)OH);
        const double *x = e->in[0] + i / (uint64_t)(OW * OH) * (uint64_t)(H * W);
        double acc = is_max ? -INFINITY : 0;
        int64_t taps = 0;
        for (int64_t kh = 0; kh < kernel[0]; kh++)
            for (int64_t kw = 0; kw < kernel[1]; kw++) {
                int64_t ih = oh * stride[0] - pad[0] + kh * dil[0];
                int64_t iw = ow * stride[1] - pad[1] + kw * dil[1];
                bool in_image = ih >= 0 && ih < H && iw >= 0 && iw < W;
                bool in_padded = ih >= -pad[0] && ih < H + pad_end[0] && iw >= -pad[1] &&
                                 iw < W + pad_end[1];
                if (in_image)
                    acc = is_max ? (x[ih * W + iw] > acc ? x[ih * W + iw] : acc) : acc + x[ih * W + iw];
                taps += include_pad ? in_padded : in_image;
            }
        e->out[i] = is_max ? acc : acc / (double)taps;
    }
    return 0;
}

static int ev_global_pool(node_eval *e)
{
    const clrun_tensor_type *t = e->it[0];
    bool is_max = !strcmp(e->op, "global_maxpool");
    uint64_t HW = dims_product(t, 2, 4);
    for (uint64_t i = 0; i < e->on; i++) {
        double acc = is_max ? -INFINITY : 0;
        for (uint64_t j = 0; j < HW; j++) {
            double v = e->in[0][i * HW + j];
            acc = is_max ? (v > acc ? v : acc) : acc + v;
        }
        e->out[i] = is_max ? acc : acc / (double)HW;
    }
    return 0;
}

/* ---- dropout ----------------------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* y = keep(i) ? x * s : 0, s = (float)(1 / (1 - p)); keep(i) when the high 32 bits of
 * splitmix64(seed + 0x9E3779B97F4A7C15 (stream + 1) + i) reach floor(p 2^32). */
static int ev_dropout(node_eval *e)
{
    if (e->node->output_count != 1)
        return fail(e, "%d outputs: the reference knows dropout's y alone", e->node->output_count);
    double p = attr_float(e, "ratio", 0.5);
    uint64_t stream = (uint64_t)attr_int(e, "stream", 0);
    uint64_t seed = (uint64_t)to_i64(e->in[1][0]);
    double scaled = floor(p * 4294967296.0);
    uint64_t threshold = scaled >= 4294967295.0 ? UINT64_C(4294967295) : scaled <= 0 ? 0 : (uint64_t)scaled;
    double s = (float)(1 / (1 - p));
    uint64_t base = seed + UINT64_C(0x9E3779B97F4A7C15) * (stream + 1);
    for (uint64_t i = 0; i < e->on; i++) {
        uint64_t h = splitmix64(base + i);
        e->out[i] = (uint32_t)(h >> 32) >= threshold ? e->in[0][i] * s : 0;
    }
    return 0;
}

/* ---- dispatch ---------------------------------------------------------------------------- */

typedef int (*op_eval)(node_eval *e);

static const struct { const char *name; op_eval eval; } op_table[] = {
    {"cast", ev_cast},
    {"add", ev_binary}, {"sub", ev_binary}, {"mul", ev_binary}, {"div", ev_binary},
    {"pow", ev_binary}, {"maximum", ev_binary}, {"minimum", ev_binary}, {"prelu", ev_binary},
    {"mod", ev_binary}, {"equal", ev_binary}, {"less", ev_binary}, {"greater", ev_binary},
    {"less_equal", ev_binary}, {"greater_equal", ev_binary}, {"and", ev_binary},
    {"or", ev_binary}, {"xor", ev_binary},
    {"where", ev_where},
    {"matmul", ev_matmul},
    {"softmax", ev_softmax}, {"logsoftmax", ev_softmax},
    {"layernorm", ev_layernorm}, {"batchnorm", ev_batchnorm}, {"instancenorm", ev_instancenorm},
    {"softmax_xent", ev_softmax_xent},
    {"reduce_sum", ev_reduce}, {"reduce_mean", ev_reduce}, {"reduce_max", ev_reduce},
    {"reduce_min", ev_reduce}, {"reduce_prod", ev_reduce}, {"reduce_l2", ev_reduce},
    {"reduce_sum_square", ev_reduce},
    {"argmax", ev_argmax}, {"argmin", ev_argmax},
    {"transpose", ev_transpose}, {"reshape", ev_copy_all}, {"concat", ev_concat},
    {"slice", ev_slice}, {"split", ev_split}, {"gather", ev_gather},
    {"gather_elements", ev_gather_elements}, {"expand", ev_expand}, {"tile", ev_tile},
    {"pad", ev_pad}, {"trilu", ev_trilu}, {"cumsum", ev_cumsum},
    {"conv2d", ev_conv2d}, {"conv_transpose2d", ev_conv_transpose2d},
    {"maxpool2d", ev_pool}, {"avgpool2d", ev_pool},
    {"global_avgpool", ev_global_pool}, {"global_maxpool", ev_global_pool},
    {"dropout", ev_dropout},
};

static op_eval find_eval(const char *op)
{
    for (size_t i = 0; i < sizeof unary_ops / sizeof unary_ops[0]; i++)
        if (strcmp(op, unary_ops[i].name) == 0)
            return ev_unary;
    for (size_t i = 0; i < sizeof op_table / sizeof op_table[0]; i++)
        if (strcmp(op, op_table[i].name) == 0)
            return op_table[i].eval;
    return NULL;
}

static int eval_node(const clrun_graph *graph, int32_t index, double **values, char *err,
                     size_t errlen)
{
    const clrun__node *node = &graph->nodes[index];
    node_eval e = {.graph = graph, .node = node, .index = index, .op = node->op->name,
                   .nin = node->input_count, .err = err, .errlen = errlen};
    if (node->input_count > MAX_IO || node->output_count < 1)
        return fail(&e, "%d inputs and %d outputs: more than the reference takes",
                    node->input_count, node->output_count);
    for (int i = 0; i < node->input_count; i++) {
        e.it[i] = &graph->tensors[node->inputs[i]].type;
        e.in[i] = values[node->inputs[i]];
    }
    e.ot = &graph->tensors[node->outputs[0]].type;
    e.out = values[node->outputs[0]];
    e.on = count_of(e.ot);
    op_eval eval = find_eval(e.op);
    if (eval == NULL)
        return fail(&e, "an op the graph reference does not know");
    if (node->output_count != 1 && eval != ev_dropout)
        return fail(&e, "%d outputs: the reference knows ops of one", node->output_count);
    return eval(&e);
}

/* ---- the graph --------------------------------------------------------------------------- */

static double half_value(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return (h >> 15) ? -v : v;
}

/* A constant's values (its data or its fill) as doubles. */
static int constant_values(const clrun__tensor *t, double *out)
{
    uint64_t n = count_of(&t->type), bytes = clrun_tensor_bytes(&t->type);
    unsigned char *raw = malloc(bytes ? bytes : 1);
    if (raw == NULL)
        return -1;
    clrun__constant_values(t, raw);
    for (uint64_t i = 0; i < n; i++) {
        switch (t->type.dtype) {
        case CLRUN_F32: { float v; memcpy(&v, raw + 4 * i, 4); out[i] = v; break; }
        case CLRUN_F64: { double v; memcpy(&v, raw + 8 * i, 8); out[i] = v; break; }
        case CLRUN_I32: { int32_t v; memcpy(&v, raw + 4 * i, 4); out[i] = v; break; }
        case CLRUN_I64: { int64_t v; memcpy(&v, raw + 8 * i, 8); out[i] = (double)v; break; }
        case CLRUN_BOOL: out[i] = raw[i] != 0; break;
        case CLRUN_F16: { uint16_t v; memcpy(&v, raw + 2 * i, 2); out[i] = half_value(v); break; }
        case CLRUN_I8: out[i] = (int8_t)raw[i]; break;
        case CLRUN_U8: out[i] = raw[i]; break;
        case CLRUN_I16: { int16_t v; memcpy(&v, raw + 2 * i, 2); out[i] = v; break; }
        case CLRUN_U16: { uint16_t v; memcpy(&v, raw + 2 * i, 2); out[i] = v; break; }
        case CLRUN_U32: { uint32_t v; memcpy(&v, raw + 4 * i, 4); out[i] = v; break; }
        case CLRUN_U64: { uint64_t v; memcpy(&v, raw + 8 * i, 8); out[i] = (double)v; break; }
        case CLRUN_BF16: { uint16_t v; memcpy(&v, raw + 2 * i, 2); out[i] = clrun__bf16_to_f32(v); break; }
        }
    }
    free(raw);
    return 0;
}

void gref_free(const clrun_graph *graph, double **values)
{
    if (values == NULL)
        return;
    for (int32_t t = 0; t < graph->tensor_count; t++)
        free(values[t]);
    free(values);
}

/* Every tensor's storage, the inputs and constants filled; NULL with err on failure. */
static double **start_values(const clrun_graph *graph, const double *const *inputs,
                             const double *const *overrides, char *err, size_t errlen)
{
    double **values = calloc((size_t)graph->tensor_count + 1, sizeof *values);
    if (values == NULL) {
        message(err, errlen, "graph reference: out of memory");
        return NULL;
    }
    for (int32_t t = 0; t < graph->tensor_count; t++) {
        const clrun__tensor *tensor = &graph->tensors[t];
        uint64_t n = count_of(&tensor->type);
        values[t] = malloc(n * sizeof(double));
        if (values[t] == NULL) {
            message(err, errlen, "graph reference: out of memory for '%s'", tensor->name);
            gref_free(graph, values);
            return NULL;
        }
        const double *given = overrides ? overrides[t] : NULL;
        if (given && tensor->kind == CLRUN__TENSOR_INTERMEDIATE) {
            message(err, errlen, "graph reference: '%s' is computed by a node: only inputs and "
                    "constants take overrides", tensor->name);
            gref_free(graph, values);
            return NULL;
        }
        if (tensor->kind == CLRUN__TENSOR_INPUT && given == NULL) {
            for (int32_t i = 0; i < graph->input_count; i++)
                if (graph->inputs[i] == t)
                    given = inputs ? inputs[i] : NULL;
            if (given == NULL) {
                message(err, errlen, "graph reference: no values for input '%s'", tensor->name);
                gref_free(graph, values);
                return NULL;
            }
        }
        if (given)
            memcpy(values[t], given, n * sizeof(double));
        else if (tensor->kind == CLRUN__TENSOR_CONSTANT && constant_values(tensor, values[t]) != 0) {
            message(err, errlen, "graph reference: out of memory for '%s'", tensor->name);
            gref_free(graph, values);
            return NULL;
        }
    }
    return values;
}

/* The nodes in an order that computes every input first. */
static int32_t *node_order(const clrun_graph *graph, char *err, size_t errlen)
{
    int32_t *order = malloc(((size_t)graph->node_count + 1) * sizeof *order);
    if (order == NULL || clrun__graph_order(graph, order) != CLRUN_OK) {
        message(err, errlen, "graph reference: no order of the nodes (a cycle, or out of memory)");
        free(order);
        return NULL;
    }
    return order;
}

int gref_eval(const clrun_graph *graph, const double *const *inputs, const double *const *overrides,
              double ***values, char *err, size_t errlen)
{
    *values = NULL;
    int32_t *order = node_order(graph, err, errlen);
    if (order == NULL)
        return -1;
    double **v = start_values(graph, inputs, overrides, err, errlen);
    for (int32_t k = 0; v && k < graph->node_count; k++)
        if (eval_node(graph, order[k], v, err, errlen) != 0) {
            gref_free(graph, v);
            v = NULL;
        }
    free(order);
    *values = v;
    return v ? 0 : -1;
}

/* The loss at the current values, re-evaluating the selected nodes. */
static int loss_at(const clrun_graph *graph, const int32_t *order, const bool *selected,
                   double **values, clrun_tensor_id loss, double *out, char *err, size_t errlen)
{
    for (int32_t k = 0; k < graph->node_count; k++)
        if (selected[order[k]] && eval_node(graph, order[k], values, err, errlen) != 0)
            return -1;
    *out = values[loss][0];
    return 0;
}

int gref_fd_grad(const clrun_graph *graph, const double *const *inputs, clrun_tensor_id loss,
                 clrun_tensor_id wrt, double step, double *grad, char *err, size_t errlen)
{
    if (loss < 0 || loss >= graph->tensor_count || wrt < 0 || wrt >= graph->tensor_count) {
        message(err, errlen, "graph reference: tensor id out of range (loss %d, wrt %d)", (int)loss,
                (int)wrt);
        return -1;
    }
    const clrun__tensor *w = &graph->tensors[wrt];
    if (count_of(&graph->tensors[loss].type) != 1) {
        message(err, errlen, "graph reference: loss '%s' is not a scalar", graph->tensors[loss].name);
        return -1;
    }
    if (w->kind == CLRUN__TENSOR_INTERMEDIATE || !is_float(w->type.dtype)) {
        message(err, errlen, "graph reference: '%s' is not a float input or constant", w->name);
        return -1;
    }
    double **values = NULL;
    if (gref_eval(graph, inputs, NULL, &values, err, errlen) != 0)
        return -1;
    int32_t *order = node_order(graph, err, errlen);
    bool *depends = calloc((size_t)graph->tensor_count, sizeof *depends);
    bool *needed = calloc((size_t)graph->tensor_count, sizeof *needed);
    bool *selected = calloc((size_t)graph->node_count + 1, sizeof *selected);
    int rc = -1;
    if (order == NULL || depends == NULL || needed == NULL || selected == NULL) {
        message(err, errlen, "graph reference: out of memory");
        goto done;
    }
    /* Nodes downstream of wrt that the loss reads, directly or not. */
    depends[wrt] = true;
    for (int32_t k = 0; k < graph->node_count; k++) {
        const clrun__node *node = &graph->nodes[order[k]];
        bool any = false;
        for (int i = 0; i < node->input_count; i++)
            any = any || depends[node->inputs[i]];
        for (int i = 0; i < node->output_count; i++)
            depends[node->outputs[i]] = any;
    }
    needed[loss] = true;
    for (int32_t k = graph->node_count - 1; k >= 0; k--) {
        const clrun__node *node = &graph->nodes[order[k]];
        bool any = false;
        for (int i = 0; i < node->output_count; i++)
            any = any || needed[node->outputs[i]];
        for (int i = 0; i < node->input_count && any; i++)
            needed[node->inputs[i]] = true;
        selected[order[k]] = any && depends[node->outputs[0]];
    }
    uint64_t n = count_of(&w->type);
    for (uint64_t k = 0; k < n; k++) {
        double w0 = values[wrt][k], h = step * fmax(1.0, fabs(w0));
        double plus = w0 + h, minus = w0 - h, lp, lm;
        values[wrt][k] = plus;
        if (loss_at(graph, order, selected, values, loss, &lp, err, errlen) != 0)
            goto done;
        values[wrt][k] = minus;
        if (loss_at(graph, order, selected, values, loss, &lm, err, errlen) != 0)
            goto done;
        values[wrt][k] = w0;
        grad[k] = (lp - lm) / (plus - minus);
    }
    rc = 0;
done:
    free(order);
    free(depends);
    free(needed);
    free(selected);
    gref_free(graph, values);
    return rc;
}
