/* The elementwise family on a real device against plain C references written here: every op of
 * the table, every dtype it takes (f64 where the device has fp64), every kernel variant (own
 * index, broadcast over three dimensions, broadcast over more), special values, attributes, and
 * the refusals of the type rule.
 *
 * Exactness. Integer, bool, comparison, cast, copy and the IEEE-exact float ops (add, sub, mul,
 * div, maximum, minimum, prelu, mod, neg, abs, relu, floor, ceil, round, sign, clip, where) must
 * match bit for bit: their references are computed in the element's own type. The other float
 * functions pass when |d - r| <= tol (|r| + |x|), r computed in double: tol 1e-5 for f32 (OpenCL
 * allows a few ulp, and the fitted erf is within 4e-6), 1e-12 for f64; f32 exp, tanh and log,
 * fits of their own, are checked in ulp as well. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <clrun/clrun.h>

#include "device/program.h"
#include "device_test.h"
#include "graph/elementwise.h"
#include "graph/types.h"
#include "ops/ew_source.h"
#include "ops/ops.h"
#include "rng.h"

static char cache_dir[512];
static clrun_context *ctx;
static bool have_fp64;

/* ---- values of any dtype ----------------------------------------------------------------- */

/* A tensor's elements, kept both as bytes of its dtype and as doubles / integers. */
typedef struct values {
    clrun_tensor_type type;
    uint64_t n;
    unsigned char *bytes;
} values;

static bool is_float(clrun_dtype d)
{
    return d == CLRUN_F32 || d == CLRUN_F64 || d == CLRUN_F16 || d == CLRUN_BF16;
}

/* bf16 of a double, rounded once (to nearest even): through a float rounded to odd, which keeps
 * the information the second rounding needs. NaN as 0x7fc0. */
static uint16_t bf16_of(double x)
{
    if (isnan(x))
        return 0x7fc0;
    float f = (float)x;
    if ((double)f != x) {
        if (fabs((double)f) > fabs(x))
            f = nextafterf(f, 0.0f);
        uint32_t bits;
        memcpy(&bits, &f, 4);
        bits |= 1;
        memcpy(&f, &bits, 4);
    }
    return clrun__f32_to_bf16(f);
}

/* bf16 of an integer (its magnitude m, unsigned), rounded once: the top 8 significant bits, the
 * rest to nearest even. */
static double bf16_of_int(uint64_t m, bool negative)
{
    int top = 63;
    while (top > 0 && !(m >> top))
        top--;
    double v = (double)m;
    if (top >= 8) {
        int drop = top - 7;
        uint64_t keep = m >> drop, rest = m & ((1ull << drop) - 1), half = 1ull << (drop - 1);
        if (rest > half || (rest == half && (keep & 1)))
            keep++;
        v = ldexp((double)keep, drop);
    }
    return negative ? -v : v;
}

/* An f16's value, exactly. */
static double half_value(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return (h >> 15) ? -v : v;
}

static double get_f(const values *v, uint64_t i)
{
    if (v->type.dtype == CLRUN_BF16) {
        uint16_t h;
        memcpy(&h, v->bytes + i * 2, 2);
        return clrun__bf16_to_f32(h);
    }
    if (v->type.dtype == CLRUN_F16) {
        uint16_t h;
        memcpy(&h, v->bytes + i * 2, 2);
        return half_value(h);
    }
    if (v->type.dtype == CLRUN_F32) {
        float f;
        memcpy(&f, v->bytes + i * 4, 4);
        return f;
    }
    double d;
    memcpy(&d, v->bytes + i * 8, 8);
    return d;
}

static bool is_unsigned(clrun_dtype d)
{
    return d == CLRUN_U8 || d == CLRUN_U16 || d == CLRUN_U32 || d == CLRUN_U64;
}

/* u brought to dt's width: sign-extended for signed dtypes, zero-extended for unsigned ones (a
 * u64 keeps its 64 bits, read as int64_t). */
static int64_t wrap(uint64_t u, clrun_dtype dt)
{
    int bits = (int)clrun_dtype_size(dt) * 8;
    if (bits >= 64)
        return (int64_t)u;
    uint64_t mask = (1ull << bits) - 1, m = u & mask;
    if (!is_unsigned(dt) && (m >> (bits - 1)))
        m |= ~mask;
    return (int64_t)m;
}

/* a < b in dt's order (unsigned for the unsigned dtypes). */
static bool less_in(int64_t a, int64_t b, clrun_dtype dt)
{
    return is_unsigned(dt) ? (uint64_t)a < (uint64_t)b : a < b;
}

static int64_t get_i(const values *v, uint64_t i)
{
    clrun_dtype dt = v->type.dtype;
    if (dt == CLRUN_BOOL)
        return v->bytes[i];
    if (is_float(dt))
        return (int64_t)get_f(v, i);
    size_t size = clrun_dtype_size(dt);
    const unsigned char *p = v->bytes + i * size;
    uint64_t u;
    switch (size) {
    case 1: u = *p; break;
    case 2: { uint16_t x; memcpy(&x, p, 2); u = x; break; }
    case 4: { uint32_t x; memcpy(&x, p, 4); u = x; break; }
    default: memcpy(&u, p, 8); break;
    }
    return wrap(u, dt);
}

static void set_f(values *v, uint64_t i, double x)
{
    if (v->type.dtype == CLRUN_BF16) {
        uint16_t h = bf16_of(x);
        memcpy(v->bytes + i * 2, &h, 2);
        return;
    }
    if (v->type.dtype == CLRUN_F16) { /* through float: one rounding for the values used here */
        uint16_t h = clrun__f32_to_f16((float)x);
        memcpy(v->bytes + i * 2, &h, 2);
        return;
    }
    if (v->type.dtype == CLRUN_F32) {
        float f = (float)x;
        memcpy(v->bytes + i * 4, &f, 4);
    } else {
        memcpy(v->bytes + i * 8, &x, 8);
    }
}

static void set_i(values *v, uint64_t i, int64_t x)
{
    clrun_dtype dt = v->type.dtype;
    if (dt == CLRUN_BOOL) {
        v->bytes[i] = (unsigned char)(x != 0);
        return;
    }
    if (is_float(dt)) {
        set_f(v, i, (double)x);
        return;
    }
    size_t size = clrun_dtype_size(dt); /* the low bytes: wrapped to the width */
    unsigned char *p = v->bytes + i * size;
    uint64_t u = (uint64_t)x;
    switch (size) {
    case 1: *p = (unsigned char)u; break;
    case 2: { uint16_t y = (uint16_t)u; memcpy(p, &y, 2); break; }
    case 4: { uint32_t y = (uint32_t)u; memcpy(p, &y, 4); break; }
    default: memcpy(p, &u, 8); break;
    }
}

/* The least and greatest value of an integer dtype, as the int64_t get_i gives. */
static int64_t int_min(clrun_dtype dt)
{
    return is_unsigned(dt) ? 0 : wrap(1ull << (clrun_dtype_size(dt) * 8 - 1), dt);
}

static int64_t int_max(clrun_dtype dt)
{
    return is_unsigned(dt) ? wrap(UINT64_MAX, dt) : wrap((1ull << (clrun_dtype_size(dt) * 8 - 1)) - 1, dt);
}

static clrun_tensor_type type_of(clrun_dtype dtype, const char *dims)
{
    clrun_tensor_type t = {dtype, 0, {0}};
    for (const char *p = dims; *p;) {
        char *end;
        t.shape[t.rank++] = strtoll(p, &end, 10);
        p = *end == ',' ? end + 1 : end;
    }
    return t;
}

static values make(clrun_dtype dtype, const char *dims)
{
    values v = {type_of(dtype, dims), 0, NULL};
    v.n = clrun_tensor_elements(&v.type);
    v.bytes = calloc(v.n * 8 + 8, 1);
    return v;
}

/* Random values: floats uniform in [lo, hi), integers in [lo, hi], bools 0/1. */
static values random_values(clrun_dtype dtype, const char *dims, double lo, double hi, uint64_t seed)
{
    values v = make(dtype, dims);
    uint64_t s = seed;
    for (uint64_t i = 0; i < v.n; i++) {
        double u = (double)(rng_next(&s) >> 11) / 9007199254740992.0;
        if (is_float(dtype))
            set_f(&v, i, lo + (hi - lo) * u);
        else if (dtype == CLRUN_BOOL)
            set_i(&v, i, (int64_t)(u * 2));
        else
            set_i(&v, i, (int64_t)floor(lo + (hi - lo + 1) * u));
    }
    return v;
}

static void values_free(values *v)
{
    free(v->bytes);
    v->bytes = NULL;
}

/* The offset in t (right-aligned against out) of out's element i. */
static uint64_t offset_in(const clrun_tensor_type *t, const clrun_tensor_type *out, uint64_t i)
{
    uint64_t offset = 0, stride = 1;
    for (int d = out->rank - 1; d >= 0; d--) {
        uint64_t c = i % (uint64_t)out->shape[d];
        i /= (uint64_t)out->shape[d];
        int j = d - (out->rank - t->rank);
        if (j < 0)
            continue;
        if (t->shape[j] != 1)
            offset += c * stride;
        stride *= (uint64_t)t->shape[j];
    }
    return offset;
}

/* ---- running one node -------------------------------------------------------------------- */

static clrun_attr attr_f(const char *name, double v)
{
    clrun_attr a = {name, CLRUN_ATTR_FLOAT, 0, v, {0}, 0};
    return a;
}

static clrun_attr attr_i(const char *name, int64_t v)
{
    clrun_attr a = {name, CLRUN_ATTR_INT, v, 0, {0}, 0};
    return a;
}

/* Runs op on inputs[0..count) with attrs; returns the output (its type from infer). */
static values run_op(const char *opname, const values *inputs, int count, const clrun_attr *attrs,
                     int attr_count)
{
    const clrun__op *op = clrun__op_find(opname);
    if (op == NULL)
        fail_msg("no op '%s'", opname);
    clrun_tensor_type in[4], out;
    for (int k = 0; k < count; k++)
        in[k] = inputs[k].type;
    clrun__op_call call = {in, count, &out, 1, attrs, attr_count, 0};
    char err[512] = "";
    if (op->infer(&call, &out, err, sizeof err) != CLRUN_OK)
        fail_msg("%s refused: %s", opname, err);
    const clrun__op_kernels *kernels = clrun__op_kernels_find(op);
    assert_non_null(kernels);
    void *state = NULL;
    if (kernels->prepare(ctx, op, &call, &state) != CLRUN_OK)
        fail_msg("%s prepare: %s", opname, clrun_last_error(ctx));
    cl_mem mems[4], result;
    cl_int e;
    for (int k = 0; k < count; k++) {
        mems[k] = clCreateBuffer(clrun_context_cl(ctx), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                                 (size_t)clrun_tensor_bytes(&in[k]), inputs[k].bytes, &e);
        assert_int_equal(e, CL_SUCCESS);
    }
    values o = {out, clrun_tensor_elements(&out), NULL};
    size_t size = (size_t)clrun_tensor_bytes(&out);
    o.bytes = calloc(o.n * 8 + 8, 1);
    result = clCreateBuffer(clrun_context_cl(ctx), CL_MEM_READ_WRITE, size, NULL, &e);
    assert_int_equal(e, CL_SUCCESS);
    const unsigned char poison = 0xA5; /* a run that writes nothing cannot pass */
    assert_int_equal(clEnqueueFillBuffer(clrun_context_queue(ctx), result, &poison, 1, 0, size, 0,
                                         NULL, NULL), CL_SUCCESS);
    cl_event done = NULL;
    if (kernels->enqueue(ctx, state, &call, mems, &result, 0, NULL, &done) != CLRUN_OK)
        fail_msg("%s enqueue: %s", opname, clrun_last_error(ctx));
    assert_int_equal(clEnqueueReadBuffer(clrun_context_queue(ctx), result, CL_TRUE, 0, size,
                                         o.bytes, 1, &done, NULL), CL_SUCCESS);
    clReleaseEvent(done);
    kernels->release(state);
    for (int k = 0; k < count; k++)
        clReleaseMemObject(mems[k]);
    clReleaseMemObject(result);
    return o;
}

static const char *dims_text(const clrun_tensor_type *t, char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "%s[", clrun_dtype_name(t->dtype));
    for (int d = 0; d < t->rank; d++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", d ? "," : "", (long long)t->shape[d]);
    snprintf(buf + used, size - used, "]");
    return buf;
}

/* ---- comparing --------------------------------------------------------------------------- */

static bool same_float(double got, double want, clrun_dtype dtype)
{
    if (isnan(got) || isnan(want))
        return isnan(got) && isnan(want);
    if (dtype == CLRUN_F16)
        want = half_value(clrun__f32_to_f16((float)want));
    if (dtype == CLRUN_BF16)
        want = clrun__bf16_to_f32(clrun__f32_to_bf16((float)want));
    if (dtype == CLRUN_F32)
        return (float)got == (float)want && !signbit(got) == !signbit((float)want);
    return got == want && !signbit(got) == !signbit(want);
}

static void fail_at(const char *op, const values *out, uint64_t i, const char *got, const char *want,
                    const char *input)
{
    char t[96];
    fail_msg("%s -> %s: element %llu is %s, reference %s (input %s)", op,
             dims_text(&out->type, t, sizeof t), (unsigned long long)i, got, want, input);
}

/* ---- references -------------------------------------------------------------------------- */

/* Rounds to the element's float type, through a volatile so no excess precision survives. */
static double rounded(double x, clrun_dtype dtype)
{
    volatile float f = (float)x;
    if (dtype == CLRUN_F16) /* computed in float, stored as f16 (the float is exact for +-*÷ of
                               f16 operands' double result rounded once, twice innocuously) */
        return half_value(clrun__f32_to_f16(f));
    if (dtype == CLRUN_BF16) /* computed in float, stored as bf16, so as the kernels */
        return clrun__bf16_to_f32(clrun__f32_to_bf16(f));
    return dtype == CLRUN_F32 ? (double)f : x;
}

static double clip(double v, double lo, double hi)
{
    v = v < lo ? lo : v;
    return v > hi ? hi : v;
}

/* The float functions computed in double (the device's result is compared with a tolerance). */
static double ref_float_function(const char *op, double x, double p0, double p1)
{
    if (!strcmp(op, "gelu")) return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    if (!strcmp(op, "gelu_erf")) return 0.5 * x * erfc(-x / sqrt(2));
    if (!strcmp(op, "sigmoid")) return 1 / (1 + exp(-x));
    if (!strcmp(op, "tanh")) return tanh(x);
    if (!strcmp(op, "exp")) return exp(x);
    if (!strcmp(op, "log")) return log(x);
    if (!strcmp(op, "sqrt")) return sqrt(x);
    if (!strcmp(op, "rsqrt")) return 1 / sqrt(x);
    if (!strcmp(op, "reciprocal")) return 1 / x;
    if (!strcmp(op, "sin")) return sin(x);
    if (!strcmp(op, "cos")) return cos(x);
    if (!strcmp(op, "tan")) return tan(x);
    if (!strcmp(op, "asin")) return asin(x);
    if (!strcmp(op, "acos")) return acos(x);
    if (!strcmp(op, "atan")) return atan(x);
    if (!strcmp(op, "sinh")) return sinh(x);
    if (!strcmp(op, "cosh")) return cosh(x);
    if (!strcmp(op, "asinh")) return asinh(x);
    if (!strcmp(op, "acosh")) return acosh(x);
    if (!strcmp(op, "atanh")) return atanh(x);
    if (!strcmp(op, "erf")) return erf(x);
    if (!strcmp(op, "softplus")) return log1p(exp(x));
    if (!strcmp(op, "softsign")) return x / (1 + fabs(x));
    if (!strcmp(op, "hard_sigmoid")) return clip(p0 * x + p1, 0, 1);
    if (!strcmp(op, "hard_swish")) return x * clip(x / 6 + 0.5, 0, 1);
    if (!strcmp(op, "leaky_relu")) return x < 0 ? p0 * x : x;
    if (!strcmp(op, "elu")) return x < 0 ? p0 * expm1(x) : x;
    if (!strcmp(op, "selu")) return x > 0 ? p1 * x : p1 * p0 * expm1(x);
    if (!strcmp(op, "celu")) return x > 0 ? x : p0 * expm1(x / p0);
    if (!strcmp(op, "scale")) return p0 * x + p1;
    fail_msg("no float reference for %s", op);
    return 0;
}

/* The exact float ops, in the element's type. */
static bool ref_float_exact(const char *op, double x, double p0, double p1, clrun_dtype dt, double *r)
{
    if (!strcmp(op, "neg")) *r = -x;
    else if (!strcmp(op, "abs")) *r = fabs(x);
    else if (!strcmp(op, "relu")) *r = x < 0 ? 0.0 : x; /* onnxruntime: NaN and -0 stay */
    else if (!strcmp(op, "floor")) *r = floor(x);
    else if (!strcmp(op, "ceil")) *r = ceil(x);
    else if (!strcmp(op, "round")) *r = nearbyint(x); /* the default mode: half to even */
    else if (!strcmp(op, "sign")) *r = x > 0 ? 1 : x < 0 ? -1 : x;
    else if (!strcmp(op, "clip")) *r = clip(x, rounded(p0, dt), rounded(p1, dt));
    else if (!strcmp(op, "copy")) *r = x;
    else return false;
    return true;
}

/* A bound p (a double: clip's min or max) as an integer of dt: ceil (lower) or floor (upper),
 * clamped to dt's range. */
static int64_t int_bound(double p, bool lower, clrun_dtype dt)
{
    double v = lower ? ceil(p) : floor(p), lo, hi;
    clrun__int_range(dt, &lo, &hi);
    if (v <= lo)
        return int_min(dt);
    if (v >= hi)
        return int_max(dt);
    return v < 0 ? (int64_t)v : wrap((uint64_t)v, dt);
}

static int64_t ref_int_unary(const char *op, int64_t x, double p0, double p1, clrun_dtype dt)
{
    bool negative = !is_unsigned(dt) && x < 0;
    if (!strcmp(op, "neg")) return wrap(0 - (uint64_t)x, dt);
    if (!strcmp(op, "abs")) return negative ? wrap(0 - (uint64_t)x, dt) : x;
    if (!strcmp(op, "relu")) return negative ? 0 : x;
    if (!strcmp(op, "sign")) return negative ? -1 : x != 0;
    if (!strcmp(op, "clip")) {
        int64_t lo = int_bound(p0, true, dt), hi = int_bound(p1, false, dt);
        x = less_in(x, lo, dt) ? lo : x;
        return less_in(hi, x, dt) ? hi : x;
    }
    if (!strcmp(op, "copy")) return x;
    if (!strcmp(op, "bitwise_not")) return wrap(~(uint64_t)x, dt);
    fail_msg("no integer reference for %s", op);
    return 0;
}

static double ref_float_binary(const char *op, double a, double b, double p0, clrun_dtype dt)
{
    volatile double r = 0;
    if (!strcmp(op, "add")) r = rounded(a + b, dt);
    else if (!strcmp(op, "sub")) r = rounded(a - b, dt);
    else if (!strcmp(op, "mul")) r = rounded(a * b, dt);
    else if (!strcmp(op, "div")) r = rounded(a / b, dt);
    else if (!strcmp(op, "maximum")) r = isnan(a) || isnan(b) ? NAN : a > b ? a : b; /* ONNX's Max */
    else if (!strcmp(op, "minimum")) r = isnan(a) || isnan(b) ? NAN : a < b ? a : b;
    else if (!strcmp(op, "prelu")) r = a < 0 ? rounded(b * a, dt) : a;
    else if (!strcmp(op, "mod")) {
        double m = dt == CLRUN_F32 ? (double)fmodf((float)a, (float)b) : fmod(a, b);
        if (p0 == 0)
            m = m == 0 ? copysign(0, b) : ((m < 0) != (b < 0)) ? rounded(m + b, dt) : m;
        r = m;
    } else if (!strcmp(op, "pow")) r = pow(a, b);
    else fail_msg("no float reference for %s", op);
    return r;
}

static int64_t ref_int_binary(const char *op, int64_t a, int64_t b, double p0, clrun_dtype dt)
{
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    bool u = is_unsigned(dt);
    if (!strcmp(op, "add")) return wrap(ua + ub, dt);
    if (!strcmp(op, "sub")) return wrap(ua - ub, dt);
    if (!strcmp(op, "mul")) return wrap(ua * ub, dt);
    if (!strcmp(op, "maximum")) return less_in(b, a, dt) ? a : b;
    if (!strcmp(op, "minimum")) return less_in(a, b, dt) ? a : b;
    if (!strcmp(op, "div")) {
        if (u)
            return b == 0 ? 0 : (int64_t)(ua / ub);
        return b == 0 ? 0 : b == -1 ? wrap(0 - ua, dt) : a / b;
    }
    if (!strcmp(op, "mod")) {
        if (u)
            return b == 0 ? 0 : (int64_t)(ua % ub);
        int64_t r = (b == 0 || b == -1) ? 0 : a % b;
        return p0 != 0 ? r : (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
    }
    if (!strcmp(op, "bitwise_and")) return wrap(ua & ub, dt);
    if (!strcmp(op, "bitwise_or")) return wrap(ua | ub, dt);
    if (!strcmp(op, "bitwise_xor")) return wrap(ua ^ ub, dt);
    if (!strcmp(op, "shift_left")) return ub >= clrun_dtype_size(dt) * 8 ? 0 : wrap(ua << ub, dt);
    if (!strcmp(op, "shift_right")) return ub >= clrun_dtype_size(dt) * 8 ? 0 : wrap(ua >> ub, dt);
    if (!strcmp(op, "pow")) {
        if (!u && b < 0)
            return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
        uint64_t r = 1, base = ua;
        for (uint64_t e = ub; e != 0; e >>= 1, base *= base)
            if (e & 1)
                r *= base;
        return wrap(r, dt);
    }
    fail_msg("no integer reference for %s", op);
    return 0;
}

static int ref_compare(const char *op, double a, double b)
{
    if (!strcmp(op, "equal")) return a == b;
    if (!strcmp(op, "less")) return a < b;
    if (!strcmp(op, "greater")) return a > b;
    if (!strcmp(op, "less_equal")) return a <= b;
    if (!strcmp(op, "greater_equal")) return a >= b;
    fail_msg("no comparison %s", op);
    return 0;
}

static int ref_compare_int(const char *op, int64_t a, int64_t b, clrun_dtype dt)
{
    if (!strcmp(op, "equal")) return a == b;
    if (!strcmp(op, "less")) return less_in(a, b, dt);
    if (!strcmp(op, "greater")) return less_in(b, a, dt);
    if (!strcmp(op, "less_equal")) return !less_in(b, a, dt);
    return !less_in(a, b, dt);
}

/* ---- checks ------------------------------------------------------------------------------ */

static int def_param_count(const char *op)
{
    return clrun__ew_def_of(clrun__op_find(op))->param_count;
}

static double param(const char *op, int i, const clrun_attr *attrs, int count)
{
    const clrun__ew_def *def = clrun__ew_def_of(clrun__op_find(op));
    for (int k = 0; k < count; k++)
        if (!strcmp(attrs[k].name, def->params[i].name))
            return attrs[k].kind == CLRUN_ATTR_INT ? (double)attrs[k].i : attrs[k].f;
    return def->params[i].fallback;
}

/* Checks a unary op's output against its reference. */
static void check_unary(const char *op, const values *x, const values *y, const clrun_attr *attrs,
                        int count)
{
    clrun_dtype dt = x->type.dtype;
    double p0 = def_param_count(op) > 0 ? param(op, 0, attrs, count) : 0;
    double p1 = def_param_count(op) > 1 ? param(op, 1, attrs, count) : 0;
    char got[64], want[64], in[64];
    for (uint64_t i = 0; i < y->n; i++) {
        if (!is_float(dt)) {
            int64_t r = ref_int_unary(op, get_i(x, i), p0, p1, dt), d = get_i(y, i);
            if (r != d) {
                snprintf(got, sizeof got, "%lld", (long long)d);
                snprintf(want, sizeof want, "%lld", (long long)r);
                snprintf(in, sizeof in, "%lld", (long long)get_i(x, i));
                fail_at(op, y, i, got, want, in);
            }
            continue;
        }
        double v = get_f(x, i), d = get_f(y, i), r;
        bool ok;
        if (ref_float_exact(op, v, p0, p1, dt, &r)) {
            ok = same_float(d, r, dt);
        } else {
            r = ref_float_function(op, v, rounded(p0, dt), rounded(p1, dt));
            double tol = dt == CLRUN_F32 ? 1e-5 : dt == CLRUN_F16 ? 1e-3 : dt == CLRUN_BF16 ? 8e-3 : 1e-12;
            ok = (isnan(r) && isnan(d)) || fabs(d - r) <= tol * (fabs(r) + fabs(v)) ||
                 (isinf(r) && d == r);
        }
        if (!ok) {
            snprintf(got, sizeof got, "%.17g", d);
            snprintf(want, sizeof want, "%.17g", r);
            snprintf(in, sizeof in, "%.9g", v);
            fail_at(op, y, i, got, want, in);
        }
    }
}

/* Checks a binary op's output (broadcast) against its reference. */
static void check_binary(const char *op, const values *a, const values *b, const values *y,
                         const clrun_attr *attrs, int count)
{
    clrun_dtype dt = a->type.dtype;
    const clrun__ew_def *def = clrun__ew_def_of(clrun__op_find(op));
    double p0 = def->param_count > 0 ? param(op, 0, attrs, count) : 0;
    char got[64], want[64], in[96];
    for (uint64_t i = 0; i < y->n; i++) {
        uint64_t ia = offset_in(&a->type, &y->type, i), ib = offset_in(&b->type, &y->type, i);
        bool ok;
        if (def->result == CLRUN__EW_BOOL || dt == CLRUN_BOOL) {
            int r;
            if (!strcmp(op, "and")) r = (get_i(a, ia) != 0) && (get_i(b, ib) != 0);
            else if (!strcmp(op, "or")) r = (get_i(a, ia) != 0) || (get_i(b, ib) != 0);
            else if (!strcmp(op, "xor")) r = (get_i(a, ia) != 0) != (get_i(b, ib) != 0);
            else if (dt == CLRUN_BOOL) r = (get_i(a, ia) != 0) == (get_i(b, ib) != 0);
            else if (is_float(dt)) r = ref_compare(op, get_f(a, ia), get_f(b, ib));
            else r = ref_compare_int(op, get_i(a, ia), get_i(b, ib), dt);
            ok = get_i(y, i) == r;
            snprintf(want, sizeof want, "%d", r);
            snprintf(got, sizeof got, "%lld", (long long)get_i(y, i));
        } else if (!is_float(dt)) {
            int64_t r = ref_int_binary(op, get_i(a, ia), get_i(b, ib), p0, dt);
            ok = get_i(y, i) == r;
            snprintf(want, sizeof want, "%lld", (long long)r);
            snprintf(got, sizeof got, "%lld", (long long)get_i(y, i));
        } else {
            double r = ref_float_binary(op, get_f(a, ia), get_f(b, ib), p0, dt), d = get_f(y, i);
            if (!strcmp(op, "pow")) {
                double tol = dt == CLRUN_F32 ? 2e-6 : dt == CLRUN_F16 ? 1e-3 : dt == CLRUN_BF16 ? 8e-3 : 1e-13;
                ok = (isnan(r) && isnan(d)) || fabs(d - r) <= tol * fabs(r) || d == r;
            } else {
                ok = same_float(d, r, dt);
            }
            snprintf(want, sizeof want, "%.17g", r);
            snprintf(got, sizeof got, "%.17g", d);
        }
        if (!ok) {
            if (is_float(dt))
                snprintf(in, sizeof in, "%.9g, %.9g", get_f(a, ia), get_f(b, ib));
            else
                snprintf(in, sizeof in, "%lld, %lld", (long long)get_i(a, ia), (long long)get_i(b, ib));
            fail_at(op, y, i, got, want, in);
        }
    }
}

/* The dtypes to run: those op takes, f64 only with fp64. */
static int dtypes_of(const char *op, clrun_dtype *out)
{
    static const clrun_dtype all[] = {CLRUN_F32, CLRUN_F64, CLRUN_I32, CLRUN_I64,
                                      CLRUN_BOOL, CLRUN_I8,  CLRUN_U8,  CLRUN_I16,
                                      CLRUN_U16, CLRUN_U32, CLRUN_U64, CLRUN_F16,
                                      CLRUN_BF16};
    const clrun__ew_def *def = clrun__ew_def_of(clrun__op_find(op));
    int n = 0;
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
        if ((def->dtypes & CLRUN__DT(all[k])) && (all[k] != CLRUN_F64 || have_fp64))
            out[n++] = all[k];
    return n;
}

/* ---- unary ------------------------------------------------------------------------------- */

/* The range a float op's inputs are drawn from: its domain, within [-8, 8]. */
static void float_domain(const char *op, double *lo, double *hi)
{
    *lo = -8, *hi = 8;
    if (!strcmp(op, "log") || !strcmp(op, "sqrt") || !strcmp(op, "rsqrt") || !strcmp(op, "reciprocal"))
        *lo = 0.01;
    else if (!strcmp(op, "asin") || !strcmp(op, "acos") || !strcmp(op, "atanh"))
        *lo = -0.999, *hi = 0.999;
    else if (!strcmp(op, "acosh"))
        *lo = 1;
    else if (!strcmp(op, "tan")) /* away from its poles */
        *lo = -1.5, *hi = 1.5;
}

static void unary_ops_match_reference_in_every_dtype(void **state)
{
    (void)state;
    size_t count;
    const clrun__ew_def *defs = clrun__ew_defs(&count);
    for (size_t k = 0; k < count; k++) {
        const clrun__ew_def *def = &defs[k];
        if (def->arity != 1 || def->result != CLRUN__EW_SAME || def->dtypes == CLRUN__DT(CLRUN_BOOL))
            continue;
        clrun_dtype dts[16];
        int n = dtypes_of(def->name, dts);
        for (int t = 0; t < n; t++) {
            if (dts[t] == CLRUN_BOOL)
                continue;
            double lo = -100000, hi = 100000;
            if (is_float(dts[t]))
                float_domain(def->name, &lo, &hi);
            values x = random_values(dts[t], "3,5,67", lo, hi, 1000 + k * 10 + (uint64_t)t);
            if (!is_float(dts[t])) {
                set_i(&x, 0, int_min(dts[t]));
                set_i(&x, 1, int_max(dts[t]));
                set_i(&x, 2, 0);
            }
            values y = run_op(def->name, &x, 1, NULL, 0);
            assert_int_equal(y.type.dtype, dts[t]);
            check_unary(def->name, &x, &y, NULL, 0);
            values_free(&x), values_free(&y);
        }
    }
}

/* The fusion pass weighs epilogues by this: clrun's own exp, tanh and log apart from the math
 * library, and both apart from plain arithmetic. */
static void float_cost_follows_the_calls_of_the_expression(void **state)
{
    (void)state;
    const char *const own[] = {"gelu", "sigmoid", "tanh", "exp", "log"};
    const char *const library[] = {"gelu_erf", "sin", "cos", "erf", "softplus", "elu", "selu", "celu", "pow"};
    const char *const arithmetic[] = {"add", "relu", "clip", "sqrt", "rsqrt", "mod", "hard_swish", "where", "scale",
                                      "maximum", "sign", "round", "div"};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        assert_int_equal(clrun__ew_float_cost(clrun__ew_def_of(clrun__op_find(own[i]))), CLRUN__EW_OWN_MATH);
    for (size_t i = 0; i < sizeof library / sizeof library[0]; i++)
        assert_int_equal(clrun__ew_float_cost(clrun__ew_def_of(clrun__op_find(library[i]))), CLRUN__EW_LIBRARY_MATH);
    for (size_t i = 0; i < sizeof arithmetic / sizeof arithmetic[0]; i++)
        assert_int_equal(clrun__ew_float_cost(clrun__ew_def_of(clrun__op_find(arithmetic[i]))), CLRUN__EW_ARITHMETIC);
    size_t count;
    const clrun__ew_def *defs = clrun__ew_defs(&count);
    for (size_t k = 0; k < count; k++) /* ops without a float expression (not, and) cost nothing */
        if (defs[k].floats == NULL)
            assert_int_equal(clrun__ew_float_cost(&defs[k]), CLRUN__EW_ARITHMETIC);
}

static void special_values_keep_their_meaning(void **state)
{
    (void)state;
    const double specials[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1e-40, -1e-40, 0.5, -0.5,
                               1.5, 2.5, -2.5, 3.0, -7.25, 1e30, -1e30, 88.0, -104.0};
    const size_t n = sizeof specials / sizeof specials[0];
    const char *const ops[] = {"neg", "abs", "relu", "floor", "ceil", "round", "sign", "clip",
                               "sigmoid", "tanh", "exp", "softplus", "softsign", "erf", "gelu_erf",
                               "hard_sigmoid", "hard_swish", "leaky_relu", "elu", "selu", "celu"};
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        for (int f64 = 0; f64 <= (int)have_fp64; f64++) {
            char dims[16];
            snprintf(dims, sizeof dims, "%zu", n);
            values x = make(f64 ? CLRUN_F64 : CLRUN_F32, dims);
            for (size_t i = 0; i < n; i++)
                set_f(&x, i, specials[i]);
            values y = run_op(ops[k], &x, 1, NULL, 0);
            check_unary(ops[k], &x, &y, NULL, 0);
            values_free(&x), values_free(&y);
        }
    }
}

static void round_goes_half_to_even(void **state)
{
    (void)state;
    const double in[] = {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 8388609.0};
    const double out[] = {0.0, 2.0, 2.0, -0.0, -2.0, -2.0, 0.0, 8388609.0};
    values x = make(CLRUN_F32, "8");
    for (int i = 0; i < 8; i++)
        set_f(&x, (uint64_t)i, in[i]);
    values y = run_op("round", &x, 1, NULL, 0);
    for (int i = 0; i < 8; i++)
        if (!same_float(get_f(&y, (uint64_t)i), out[i], CLRUN_F32))
            fail_msg("round(%.9g) is %.9g, expected %.9g", in[i], get_f(&y, (uint64_t)i), out[i]);
    values_free(&x), values_free(&y);
}

static void attributes_set_the_parameters(void **state)
{
    (void)state;
    struct { const char *op; clrun_attr attrs[2]; int count; } cases[] = {
        {"leaky_relu", {attr_f("alpha", 0.25)}, 1},
        {"elu", {attr_f("alpha", 2.0)}, 1},
        {"celu", {attr_f("alpha", 0.5)}, 1},
        {"selu", {attr_f("alpha", 1.5), attr_f("gamma", 2.0)}, 2},
        {"hard_sigmoid", {attr_f("alpha", 0.1), attr_i("beta", 1)}, 2},
        {"clip", {attr_f("min", -1.5)}, 1},
        {"clip", {attr_f("max", 2.25)}, 1},
        {"clip", {attr_f("min", 3), attr_f("max", -1)}, 2}, /* min > max gives max, as numpy */
        {"scale", {attr_f("alpha", -2.5), attr_i("beta", 3)}, 2},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        values x = random_values(CLRUN_F32, "257", -5, 5, 2000 + k);
        values y = run_op(cases[k].op, &x, 1, cases[k].attrs, cases[k].count);
        check_unary(cases[k].op, &x, &y, cases[k].attrs, cases[k].count);
        values_free(&x), values_free(&y);
    }
}

static void integer_clip_rounds_its_bounds_inward(void **state)
{
    (void)state;
    const clrun_attr attrs[] = {attr_f("min", -2.5), attr_f("max", 3.5)};
    for (int dt = 0; dt < 2; dt++) {
        values x = make(dt ? CLRUN_I64 : CLRUN_I32, "6");
        const int64_t in[] = {-5, -3, -2, 3, 4, 9};
        const int64_t want[] = {-2, -2, -2, 3, 3, 3};
        for (int i = 0; i < 6; i++)
            set_i(&x, (uint64_t)i, in[i]);
        values y = run_op("clip", &x, 1, attrs, 2);
        for (int i = 0; i < 6; i++)
            if (get_i(&y, (uint64_t)i) != want[i])
                fail_msg("clip(%lld) in [-2.5, 3.5] is %lld, expected %lld", (long long)in[i],
                         (long long)get_i(&y, (uint64_t)i), (long long)want[i]);
        values_free(&x), values_free(&y);
    }
}

static void erf_is_accurate_near_zero_and_in_the_tails(void **state)
{
    (void)state;
    /* relative accuracy near 0 (1e-5 of |x| would hide a constant error), and erfc's tails:
     * gelu_erf(x) for x down to -9 is x erfc(|x| / sqrt 2) / 2, down to 1e-18 (further out the
     * rounding of x / sqrt 2 alone, squared in the exponent, passes 5e-6) */
    values x = make(CLRUN_F32, "3001");
    for (uint64_t i = 0; i < x.n; i++)
        set_f(&x, i, i > 2000 ? -9.0 * (double)(i - 2000) / 1000.0
                              : (i < 1000 ? 1e-4 : 1.0) * ((double)i - 1000.0) / 100.0);
    values y = run_op("erf", &x, 1, NULL, 0);
    for (uint64_t i = 0; i < x.n; i++) {
        double v = get_f(&x, i), r = erf(v), d = get_f(&y, i);
        if (fabs(d - r) > 4e-7 * fabs(r) + 1e-7 * (fabs(v) > 1))
            fail_msg("erf(%.9g) is %.9g, reference %.9g", v, d, r);
    }
    values g = run_op("gelu_erf", &x, 1, NULL, 0);
    for (uint64_t i = 0; i < x.n; i++) {
        double v = get_f(&x, i), r = 0.5 * v * erfc(-v / sqrt(2)), d = get_f(&g, i);
        if (fabs(d - r) > 5e-6 * fabs(r) + 1e-30)
            fail_msg("gelu_erf(%.9g) is %.9g, reference %.9g (relative)", v, d, r);
    }
    values_free(&x), values_free(&y), values_free(&g);
}

/* |d - r| in units in the last place of float at r (2^-149 below the normal range). */
static double ulps_off(double d, double r)
{
    int e;
    frexp(r, &e);
    return fabs(d - r) / fmax(ldexp(1.0, e - 24), ldexp(1.0, -149));
}

static void exp_and_tanh_are_within_a_few_ulp(void **state)
{
    (void)state;
    /* kernels/ew_functions.cl's float exp (at most 1.035 ulp, measured over every third float)
     * and tanh (at most 2.55, over every seventh): a dense sweep of each one's range, and values
     * at its edges. exp's results below 2^-126 are denormals, rounded once; below -103.97 it is
     * 0, above 88.722 +inf. */
    const double edges[] = {88.72283, 88.72284, -87.33654, -87.33655, -103.97, -103.972, -103.98,
                            -100.5, -95.25, 1e-7, -1e-7, 1e-30, 0.34657359, -0.34657359};
    const size_t sweep = 200000, edge_count = sizeof edges / sizeof edges[0];
    values x = make(CLRUN_F32, "200014");
    for (size_t i = 0; i < sweep; i++)
        set_f(&x, i, -104.0 + 193.0 * (double)i / (double)sweep);
    for (size_t i = 0; i < edge_count; i++)
        set_f(&x, sweep + i, edges[i]);
    values y = run_op("exp", &x, 1, NULL, 0);
    for (uint64_t i = 0; i < x.n; i++) {
        double v = get_f(&x, i), r = exp(v), d = get_f(&y, i);
        if (!((isinf((float)r) && d == (float)r) || ulps_off(d, r) <= 1.1))
            fail_msg("exp(%a) is %a, reference %a (%.2f ulp)", v, d, r, ulps_off(d, r));
    }
    for (size_t i = 0; i < sweep; i++)
        set_f(&x, i, -10.0 + 20.0 * (double)i / (double)sweep);
    values t = run_op("tanh", &x, 1, NULL, 0);
    for (uint64_t i = 0; i < x.n; i++) {
        double v = get_f(&x, i), r = tanh(v), d = get_f(&t, i);
        if (ulps_off(d, r) > 2.6)
            fail_msg("tanh(%a) is %a, reference %a (%.2f ulp)", v, d, r, ulps_off(d, r));
    }
    values_free(&x), values_free(&y), values_free(&t);

    /* the specials exactly: exp(+-0) = 1, exp(-inf) = 0, exp(inf) = inf, tanh keeps the sign
     * of zero and goes to +-1, NaN stays NaN */
    const double in[] = {0.0, -0.0, -INFINITY, INFINITY, NAN, 89.0, -104.0, 1000.0, -1000.0};
    const double exp_out[] = {1.0, 1.0, 0.0, INFINITY, NAN, INFINITY, 0.0, INFINITY, 0.0};
    const double tanh_out[] = {0.0, -0.0, -1.0, 1.0, NAN, 1.0, -1.0, 1.0, -1.0};
    values sx = make(CLRUN_F32, "9");
    for (uint64_t i = 0; i < 9; i++)
        set_f(&sx, i, in[i]);
    values se = run_op("exp", &sx, 1, NULL, 0), st = run_op("tanh", &sx, 1, NULL, 0);
    for (uint64_t i = 0; i < 9; i++) {
        if (!same_float(get_f(&se, i), exp_out[i], CLRUN_F32))
            fail_msg("exp(%g) is %g, expected %g", in[i], get_f(&se, i), exp_out[i]);
        if (!same_float(get_f(&st, i), tanh_out[i], CLRUN_F32))
            fail_msg("tanh(%g) is %g, expected %g", in[i], get_f(&st, i), tanh_out[i]);
    }
    values_free(&sx), values_free(&se), values_free(&st);
}

/* ---- binary ------------------------------------------------------------------------------ */

/* Shapes that take each kernel variant: own index, 3-D broadcast (either operand along the
 * rows, the other constant there; both along them), many-dimension broadcast, and a scalar. */
/* The dtypes whose broadcast kernels are run too. The others (i8 .. u64) run the kernel that
 * reads at the output's index: their element functions are what differs, and the index
 * arithmetic of the broadcast variants is the same text for every dtype. Each (op, dtype,
 * variant) is a kernel the driver compiles, so this keeps a cold run of the test short. */
static void log_is_within_one_ulp(void **state)
{
    (void)state;
    /* kernels/ew_functions.cl's float log (at most 0.83 ulp, measured over every fifth positive
     * float): every 2^23-th float's neighbourhood through the whole range (denormals, both sides
     * of each power of two, the reduction's edge at sqrt(1/2)), and the specials exactly. */
    const size_t per = 64, steps = 255, edge_count = 6;
    values x = make(CLRUN_F32, "16326");
    size_t k = 0;
    for (size_t e = 0; e < steps; e++)
        for (size_t i = 0; i < per; i++) {
            uint32_t bits = (uint32_t)(e << 23) + (uint32_t)(i * 131071u) + (e == 0 ? 1u : 0u);
            float v;
            memcpy(&v, &bits, sizeof v);
            set_f(&x, k++, v);
        }
    const double edges[] = {0.70710677, 0.70710683, 1.0000001, 0.99999994, 0x1p-149, 0x1.fffffep127};
    for (size_t i = 0; i < edge_count; i++)
        set_f(&x, k++, edges[i]);
    assert_int_equal(k, x.n);
    values y = run_op("log", &x, 1, NULL, 0);
    for (uint64_t i = 0; i < x.n; i++) {
        double v = get_f(&x, i), r = log(v), d = get_f(&y, i);
        if (ulps_off(d, r) > 0.9)
            fail_msg("log(%a) is %a, reference %a (%.2f ulp)", v, d, r, ulps_off(d, r));
    }
    values_free(&x), values_free(&y);

    const double in[] = {1.0, 0.0, -0.0, -1.0, -INFINITY, INFINITY, NAN, 2.0};
    const size_t n = sizeof in / sizeof in[0];
    values s = make(CLRUN_F32, "8");
    for (size_t i = 0; i < n; i++)
        set_f(&s, i, in[i]);
    values t = run_op("log", &s, 1, NULL, 0);
    assert_true(get_f(&t, 0) == 0.0 && !signbit(get_f(&t, 0)));
    assert_true(get_f(&t, 1) == -INFINITY && get_f(&t, 2) == -INFINITY);
    assert_true(isnan(get_f(&t, 3)) && isnan(get_f(&t, 4)) && isnan(get_f(&t, 6)));
    assert_true(get_f(&t, 5) == INFINITY);
    assert_true(get_f(&t, 7) == (double)0.69314718f);
    values_free(&s), values_free(&t);
}

static bool every_variant(clrun_dtype dt)
{
    return dt == CLRUN_F32 || dt == CLRUN_F64 || dt == CLRUN_I32 || dt == CLRUN_I64 || dt == CLRUN_BOOL ||
           dt == CLRUN_F16 || dt == CLRUN_BF16; /* f16's and bf16's reads (widened) differ */
}

static const char *const shape_cases[][2] = {
    {"3,7,11", "3,7,11"}, {"4,1,5", "3,1"}, {"2,3,37", "37"},
    /* the first operand constant along the rows, the second along them (the case above the
     * other way round: each takes its own path of the 3-D kernel) */
    {"4,3,1", "3,5"},
    {"2,1,3,1,2,1", "1,4,1,3,1,5"}, {"", "5,7"},
    /* ranks 7 and 8 (CLRUN_MAX_DIMS): the operands take turns broadcasting, so no dimension
     * merges and the table holds every one */
    {"2,1,3,1,2,1,3", "1,2,1,3,1,2,1"}, {"2,1,3,1,2,1,3,1", "1,2,1,3,1,2,1,2"},
};
#define SHAPE_CASES (sizeof shape_cases / sizeof shape_cases[0])

static values binary_operand(const char *op, clrun_dtype dt, const char *dims, int which, uint64_t seed)
{
    if (dt == CLRUN_BOOL)
        return random_values(dt, dims, 0, 1, seed);
    if (is_float(dt)) {
        bool positive_base = !strcmp(op, "pow") && which == 0;
        return random_values(dt, dims, positive_base ? 0.1 : -4, 4, seed);
    }
    if (!strncmp(op, "shift_", 6)) /* counts past the width included */
        return random_values(dt, dims, which ? 0 : -50, which ? 70 : 50, seed);
    if (!strcmp(op, "pow")) /* unsigned: no negative exponent (it would wrap to a huge one) */
        return random_values(dt, dims, which ? (is_unsigned(dt) ? 0 : -2) : -5, which ? 12 : 5, seed);
    return random_values(dt, dims, -50, 50, seed); /* zeros included: div and mod by 0 */
}

static void binary_ops_match_reference_on_every_broadcast(void **state)
{
    (void)state;
    size_t count;
    const clrun__ew_def *defs = clrun__ew_defs(&count);
    for (size_t k = 0; k < count; k++) {
        const clrun__ew_def *def = &defs[k];
        if (def->arity != 2)
            continue;
        clrun_dtype dts[16];
        int n = dtypes_of(def->name, dts);
        for (int t = 0; t < n; t++)
            for (size_t c = 0; c < (every_variant(dts[t]) ? SHAPE_CASES : 1); c++)
                for (int fmod_ = 0; fmod_ <= (def->param_count > 0); fmod_++) {
                    uint64_t seed = 3000 + k * 100 + (uint64_t)t * 10 + c;
                    values a = binary_operand(def->name, dts[t], shape_cases[c][0], 0, seed);
                    values b = binary_operand(def->name, dts[t], shape_cases[c][1], 1, seed + 7);
                    values ab[2] = {a, b};
                    clrun_attr attr = attr_i("fmod", fmod_);
                    values y = run_op(def->name, ab, 2, &attr, def->param_count ? 1 : 0);
                    check_binary(def->name, &a, &b, &y, &attr, def->param_count ? 1 : 0);
                    values_free(&a), values_free(&b), values_free(&y);
                }
    }
}

static void integer_division_truncates_and_survives_zero(void **state)
{
    (void)state;
    const int64_t a[] = {7, -7, 7, -7, 5, INT32_MIN, INT32_MIN, 0, 1};
    const int64_t b[] = {2, 2, -2, -2, 0, -1, 1, 0, 3};
    const int64_t q[] = {3, -3, -3, 3, 0, INT32_MIN, INT32_MIN, 0, 0};
    const int64_t m[] = {1, 1, -1, -1, 0, 0, 0, 0, 1};   /* Python's sign: that of b */
    const int64_t f[] = {1, -1, 1, -1, 0, 0, 0, 0, 1};   /* C's: that of a */
    values va = make(CLRUN_I32, "9"), vb = make(CLRUN_I32, "9");
    for (int i = 0; i < 9; i++)
        set_i(&va, (uint64_t)i, a[i]), set_i(&vb, (uint64_t)i, b[i]);
    values ab[2] = {va, vb};
    values vq = run_op("div", ab, 2, NULL, 0);
    clrun_attr floor_mod = attr_i("fmod", 0), c_mod = attr_i("fmod", 1);
    values vm = run_op("mod", ab, 2, &floor_mod, 1), vf = run_op("mod", ab, 2, &c_mod, 1);
    for (int i = 0; i < 9; i++) {
        if (get_i(&vq, (uint64_t)i) != q[i])
            fail_msg("div(%lld, %lld) is %lld, expected %lld", (long long)a[i], (long long)b[i],
                     (long long)get_i(&vq, (uint64_t)i), (long long)q[i]);
        if (get_i(&vm, (uint64_t)i) != m[i] || get_i(&vf, (uint64_t)i) != f[i])
            fail_msg("mod(%lld, %lld) is %lld / fmod %lld, expected %lld / %lld", (long long)a[i],
                     (long long)b[i], (long long)get_i(&vm, (uint64_t)i),
                     (long long)get_i(&vf, (uint64_t)i), (long long)m[i], (long long)f[i]);
    }
    values_free(&va), values_free(&vb), values_free(&vq), values_free(&vm), values_free(&vf);
}

static void comparisons_see_nan_as_unordered(void **state)
{
    (void)state;
    values a = make(CLRUN_F32, "4"), b = make(CLRUN_F32, "4");
    const double av[] = {NAN, 1, -0.0, INFINITY}, bv[] = {NAN, NAN, 0.0, INFINITY};
    for (int i = 0; i < 4; i++)
        set_f(&a, (uint64_t)i, av[i]), set_f(&b, (uint64_t)i, bv[i]);
    values ab[2] = {a, b};
    const char *const ops[] = {"equal", "less", "greater", "less_equal", "greater_equal"};
    for (size_t k = 0; k < 5; k++) {
        values y = run_op(ops[k], ab, 2, NULL, 0);
        assert_int_equal(y.type.dtype, CLRUN_BOOL);
        check_binary(ops[k], &a, &b, &y, NULL, 0);
        values_free(&y);
    }
    values_free(&a), values_free(&b);
}

/* ONNX's semantics, as onnxruntime has them and as the host's folding computes them: a NaN
 * operand gives NaN in relu, maximum, minimum, clip and leaky_relu, relu of a negative is +0
 * and -0 stays -0; of two equal operands maximum and minimum give the second (+-0). Spelled out
 * here, not taken from the references above. */
static void nan_propagates_through_relu_maximum_minimum_and_clip(void **state)
{
    (void)state;
    const double x[] = {NAN, -3.0, 2.0, -0.0, -INFINITY};
    const double relu[] = {NAN, 0.0, 2.0, -0.0, 0.0};
    const double clipped[] = {NAN, -1.0, 1.0, -0.0, -1.0};
    const double leaky[] = {NAN, -0.75, 2.0, -0.0, -INFINITY};
    const double a[] = {NAN, 1.0, NAN, -0.0, 0.0, 2.0, -INFINITY};
    const double b[] = {1.0, NAN, NAN, 0.0, -0.0, -INFINITY, NAN};
    const double max[] = {NAN, NAN, NAN, 0.0, -0.0, 2.0, NAN};
    const double min[] = {NAN, NAN, NAN, 0.0, -0.0, -INFINITY, NAN};
    const clrun_attr clip_attrs[] = {attr_f("min", -1.0), attr_f("max", 1.0)};
    const clrun_attr leaky_attrs[] = {attr_f("alpha", 0.25)};
    struct { const char *op; const double *want; const clrun_attr *attrs; int count; } unary[] = {
        {"relu", relu, NULL, 0}, {"clip", clipped, clip_attrs, 2}, {"leaky_relu", leaky, leaky_attrs, 1},
    };
    for (int f64 = 0; f64 <= (int)have_fp64; f64++) {
        clrun_dtype dt = f64 ? CLRUN_F64 : CLRUN_F32;
        values vx = make(dt, "5");
        for (uint64_t i = 0; i < 5; i++)
            set_f(&vx, i, x[i]);
        for (size_t k = 0; k < sizeof unary / sizeof unary[0]; k++) {
            values y = run_op(unary[k].op, &vx, 1, unary[k].attrs, unary[k].count);
            for (uint64_t i = 0; i < 5; i++)
                if (!same_float(get_f(&y, i), unary[k].want[i], dt))
                    fail_msg("%s %s(%g) is %g, ONNX says %g", clrun_dtype_name(dt), unary[k].op, x[i],
                             get_f(&y, i), unary[k].want[i]);
            values_free(&y);
        }
        values ab[2] = {make(dt, "7"), make(dt, "7")};
        for (uint64_t i = 0; i < 7; i++)
            set_f(&ab[0], i, a[i]), set_f(&ab[1], i, b[i]);
        values ymax = run_op("maximum", ab, 2, NULL, 0), ymin = run_op("minimum", ab, 2, NULL, 0);
        for (uint64_t i = 0; i < 7; i++) {
            if (!same_float(get_f(&ymax, i), max[i], dt))
                fail_msg("%s maximum(%g, %g) is %g, ONNX says %g", clrun_dtype_name(dt), a[i], b[i],
                         get_f(&ymax, i), max[i]);
            if (!same_float(get_f(&ymin, i), min[i], dt))
                fail_msg("%s minimum(%g, %g) is %g, ONNX says %g", clrun_dtype_name(dt), a[i], b[i],
                         get_f(&ymin, i), min[i]);
        }
        values_free(&vx), values_free(&ab[0]), values_free(&ab[1]), values_free(&ymax), values_free(&ymin);
    }
}

/* ---- where and cast ---------------------------------------------------------------------- */

static void where_broadcasts_all_three(void **state)
{
    (void)state;
    const char *const cases[][4] = {
        {"4,3,5", "4,3,5", "4,3,5", "4,3,5"}, {"4,1,5", "3,1", "1", "4,3,5"},
        {"2,1,3,1,2,1", "1,4,1,3,1,5", "2,4,1,1,1,1", "2,4,3,3,2,5"}, {"", "6", "", "6"},
        {"2,1,3,1,2,1,3,1", "1,2,1,3,1,2,1,2", "2,2,1,1,2,1,1,2", "2,2,3,3,2,2,3,2"},
    };
    clrun_dtype dts[16];
    int n = dtypes_of("where", dts);
    for (int t = 0; t < n; t++)
        for (size_t c = 0; c < (every_variant(dts[t]) ? sizeof cases / sizeof cases[0] : 1); c++) {
            uint64_t seed = 5000 + (uint64_t)t * 10 + c;
            values in[3] = {random_values(CLRUN_BOOL, cases[c][0], 0, 1, seed),
                            random_values(dts[t], cases[c][1], -100, 100, seed + 1),
                            random_values(dts[t], cases[c][2], -100, 100, seed + 2)};
            values y = run_op("where", in, 3, NULL, 0);
            char t1[96], t2[96];
            clrun_tensor_type want = type_of(dts[t], cases[c][3]);
            if (!clrun__type_equal(&y.type, &want))
                fail_msg("where -> %s, expected %s", dims_text(&y.type, t1, sizeof t1),
                         dims_text(&want, t2, sizeof t2));
            for (uint64_t i = 0; i < y.n; i++) {
                bool cond = get_i(&in[0], offset_in(&in[0].type, &y.type, i)) != 0;
                const values *src = cond ? &in[1] : &in[2];
                uint64_t o = offset_in(&src->type, &y.type, i);
                size_t size = clrun_dtype_size(dts[t]);
                if (memcmp(y.bytes + i * size, src->bytes + o * size, size) != 0)
                    fail_msg("where (%s, case %zu): element %llu is not the %s input's",
                             clrun_dtype_name(dts[t]), c, (unsigned long long)i, cond ? "a" : "b");
            }
            values_free(&in[0]), values_free(&in[1]), values_free(&in[2]), values_free(&y);
        }
}

/* What cast gives for one value, as docs/ops.md says. */
static void ref_cast(const values *x, uint64_t i, values *y, uint64_t j)
{
    clrun_dtype from = x->type.dtype, to = y->type.dtype;
    if (to == CLRUN_BOOL) {
        set_i(y, j, is_float(from) ? get_f(x, i) != 0 || isnan(get_f(x, i)) : get_i(x, i) != 0);
    } else if (is_float(to)) {
        if (is_float(from))
            set_f(y, j, get_f(x, i));
        else if (to == CLRUN_BF16) /* exactly: no rounding on the way */
            set_f(y, j, is_unsigned(from) || get_i(x, i) >= 0
                            ? bf16_of_int((uint64_t)get_i(x, i), false)
                            : bf16_of_int(0 - (uint64_t)get_i(x, i), true));
        else if (is_unsigned(from)) /* each conversion correctly rounded, once */
            set_f(y, j, to == CLRUN_F32 ? (double)(float)(uint64_t)get_i(x, i) : (double)(uint64_t)get_i(x, i));
        else
            set_f(y, j, to == CLRUN_F32 ? (double)(float)get_i(x, i) : (double)get_i(x, i));
    } else if (is_float(from)) { /* toward zero, saturating, NaN to 0 */
        double v = trunc(get_f(x, i)), lo, hi;
        clrun__int_range(to, &lo, &hi);
        int64_t r = isnan(v) ? 0 : v <= lo ? int_min(to) : v >= hi ? int_max(to)
                  : v < 0 ? (int64_t)v : wrap((uint64_t)v, to);
        set_i(y, j, r);
    } else {
        set_i(y, j, get_i(x, i)); /* set_i wraps to the width */
    }
}

static void cast_converts_between_every_dtype(void **state)
{
    (void)state;
    const clrun_dtype all[] = {CLRUN_F32, CLRUN_F64, CLRUN_I32, CLRUN_I64, CLRUN_BOOL, CLRUN_I8,
                               CLRUN_U8,  CLRUN_I16, CLRUN_U16, CLRUN_U32, CLRUN_U64, CLRUN_F16,
                               CLRUN_BF16};
    const int count = (int)(sizeof all / sizeof all[0]);
    const double floats[] = {0.0, -0.0, 1.5, -1.5, 2.5, -2.99, 16777217.0, 3e9, -3e9, 1e19, -1e19,
                             INFINITY, -INFINITY, NAN, 1e-40, 123456.789};
    const int64_t ints[] = {0, 1, -1, 2, INT32_MAX, INT32_MIN, (int64_t)INT32_MAX + 3, INT64_MIN,
                            INT64_MAX, 16777217, -16777217, 9007199254740993LL, 255, 256, -129, 7};
    for (int f = 0; f < count; f++)
        for (int t = 0; t < count; t++) {
            if ((all[f] == CLRUN_F64 || all[t] == CLRUN_F64) && !have_fp64)
                continue;
            values x = make(all[f], "16");
            for (uint64_t i = 0; i < 16; i++) {
                if (is_float(all[f]))
                    set_f(&x, i, floats[i]);
                else
                    set_i(&x, i, ints[i]);
            }
            clrun_attr to = attr_i("to", all[t]);
            values y = run_op("cast", &x, 1, &to, 1);
            assert_int_equal(y.type.dtype, all[t]);
            values want = make(all[t], "16");
            for (uint64_t i = 0; i < 16; i++)
                ref_cast(&x, i, &want, i);
            size_t size = clrun_dtype_size(all[t]);
            for (uint64_t i = 0; i < 16; i++)
                if (memcmp(y.bytes + i * size, want.bytes + i * size, size) != 0) {
                    bool fx = is_float(all[f]), fy = is_float(all[t]);
                    fail_msg("cast %s -> %s of element %llu (%.17g / %lld): got %.17g / %lld, "
                             "expected %.17g / %lld", clrun_dtype_name(all[f]), clrun_dtype_name(all[t]),
                             (unsigned long long)i, fx ? get_f(&x, i) : 0, fx ? 0 : (long long)get_i(&x, i),
                             fy ? get_f(&y, i) : 0, fy ? 0 : (long long)get_i(&y, i),
                             fy ? get_f(&want, i) : 0, fy ? 0 : (long long)get_i(&want, i));
                }
            values_free(&x), values_free(&y), values_free(&want);
        }
}

/* The bitwise ops on every integer width, spelled out (0x..5a & 0x..0f and so on), broadcast:
 * small, so that oclgrind runs them (CLRUN_TEST_FILTER=bitwise_*). */
static void bitwise_ops_on_every_integer_width(void **state)
{
    (void)state;
    const clrun_dtype ints[] = {CLRUN_I8, CLRUN_U8, CLRUN_I16, CLRUN_U16, CLRUN_I32, CLRUN_U32, CLRUN_I64, CLRUN_U64};
    const int64_t av[] = {0x5a, -1, 0, 0x33, -128, 7}, bv[] = {0x0f, 0x3c};
    const char *const ops[] = {"bitwise_and", "bitwise_or", "bitwise_xor"};
    for (size_t t = 0; t < sizeof ints / sizeof ints[0]; t++) {
        values a = make(ints[t], "3,2"), b = make(ints[t], "2");
        for (uint64_t i = 0; i < 6; i++)
            set_i(&a, i, av[i]);
        for (uint64_t i = 0; i < 2; i++)
            set_i(&b, i, bv[i]);
        values ab[2] = {a, b};
        for (size_t k = 0; k < 3; k++) {
            values y = run_op(ops[k], ab, 2, NULL, 0);
            assert_int_equal(y.type.dtype, ints[t]);
            for (uint64_t i = 0; i < 6; i++) {
                uint64_t x = (uint64_t)get_i(&a, i), z = (uint64_t)get_i(&b, i % 2);
                int64_t want = wrap(k == 0 ? x & z : k == 1 ? x | z : x ^ z, ints[t]);
                if (get_i(&y, i) != want)
                    fail_msg("%s %s element %llu: %lld, expected %lld", clrun_dtype_name(ints[t]), ops[k],
                             (unsigned long long)i, (long long)get_i(&y, i), (long long)want);
            }
            values_free(&y);
        }
        values y = run_op("bitwise_not", &a, 1, NULL, 0);
        for (uint64_t i = 0; i < 6; i++)
            if (get_i(&y, i) != wrap(~(uint64_t)get_i(&a, i), ints[t]))
                fail_msg("%s bitwise_not element %llu: %lld", clrun_dtype_name(ints[t]), (unsigned long long)i,
                         (long long)get_i(&y, i));
        values_free(&y), values_free(&a), values_free(&b);
    }
}

/* bf16 read and written by the elementwise kernels: a broadcast add rounded once to nearest even
 * (1 + 2^-8 is a tie, to the even 1; 1 + 3·2^-8 one, to 1 + 2^-6), NaN as 0x7fc0, and casts to
 * and from f32. Small, for oclgrind (CLRUN_TEST_FILTER=bf16_*). */
static void bf16_elementwise_rounds_once(void **state)
{
    (void)state;
    values a = make(CLRUN_BF16, "2,3"), b = make(CLRUN_BF16, "3");
    const double av[] = {1.0, 1.0, -2.0, 1.0, NAN, 3.0}, bv[] = {0.00390625, 0.01171875, 0.5};
    for (uint64_t i = 0; i < 6; i++)
        set_f(&a, i, av[i]);
    for (uint64_t i = 0; i < 3; i++)
        set_f(&b, i, bv[i]);
    values ab[2] = {a, b};
    values y = run_op("add", ab, 2, NULL, 0);
    const uint16_t want[] = {0x3f80, 0x3f82, 0xbfc0, 0x3f80, 0x7fc0, 0x4060};
    for (uint64_t i = 0; i < 6; i++) {
        uint16_t got;
        memcpy(&got, y.bytes + 2 * i, 2);
        if (got != want[i])
            fail_msg("bf16 add element %llu: 0x%04x, expected 0x%04x", (unsigned long long)i, got, want[i]);
    }
    clrun_attr to_f32 = attr_i("to", CLRUN_F32), to_bf16 = attr_i("to", CLRUN_BF16);
    values wide = run_op("cast", &y, 1, &to_f32, 1), back = run_op("cast", &wide, 1, &to_bf16, 1);
    assert_int_equal(wide.type.dtype, CLRUN_F32);
    assert_memory_equal(back.bytes, y.bytes, 12);
    values_free(&a), values_free(&b), values_free(&y), values_free(&wide), values_free(&back);
}

static void logic_reads_any_nonzero_byte_as_true(void **state)
{
    (void)state;
    values a = make(CLRUN_BOOL, "4"), b = make(CLRUN_BOOL, "4");
    const unsigned char av[] = {0, 2, 0, 255}, bv[] = {0, 0, 7, 1};
    memcpy(a.bytes, av, 4), memcpy(b.bytes, bv, 4);
    values ab[2] = {a, b};
    const char *const ops[] = {"and", "or", "xor", "equal"};
    const int want[4][4] = {{0, 0, 0, 1}, {0, 1, 1, 1}, {0, 1, 1, 0}, {1, 0, 0, 1}};
    for (int k = 0; k < 4; k++) {
        values y = run_op(ops[k], ab, 2, NULL, 0);
        for (int i = 0; i < 4; i++)
            if (y.bytes[i] != want[k][i])
                fail_msg("%s(%d, %d) is %d, expected %d", ops[k], av[i], bv[i], y.bytes[i], want[k][i]);
        values_free(&y);
    }
    values y = run_op("not", &a, 1, NULL, 0);
    const unsigned char nots[] = {1, 0, 1, 0};
    assert_memory_equal(y.bytes, nots, 4);
    values_free(&y), values_free(&a), values_free(&b);
}

/* ---- programs ---------------------------------------------------------------------------- */

static void each_op_is_built_once_per_context(void **state)
{
    (void)state;
    clrun_program_stats before, after;
    values x = random_values(CLRUN_F32, "100", -1, 1, 7);
    values y = run_op("softsign", &x, 1, NULL, 0); /* first use of softsign here: one build */
    clrun_program_stats_get(ctx, &before);
    for (int i = 0; i < 3; i++) {
        values z = run_op("softsign", &x, 1, NULL, 0);
        assert_memory_equal(z.bytes, y.bytes, 400);
        values_free(&z);
    }
    clrun_program_stats_get(ctx, &after);
    assert_int_equal(after.builds_from_source + after.cache_hits,
                     before.builds_from_source + before.cache_hits);
    values_free(&x), values_free(&y);
}

/* add, sub, mul and div share one program per dtype (POCL's front end and builtin linking
 * once for a transformer's unfused arithmetic): the same text whichever asks, holding every
 * kernel of the four, and after one of them the others build nothing. Where kernels compile at
 * their first launch (`wide`), relu, hardswish and sigmoid join them; elsewhere and gelu (in
 * either case) keep programs of their own. The row kernels are there only where asked for. */
static void arithmetic_ops_share_one_program(void **state)
{
    (void)state;
    const char *const family[] = {"add", "sub", "mul", "div", "relu", "hard_swish", "sigmoid"};
    for (int wide = 0; wide < 2; wide++) {
        const clrun__ew_def *add = clrun__ew_def_of(clrun__op_find("add"));
        char *text = clrun__ew_library_source(add, CLRUN_F32, CLRUN_F32, wide, false, false);
        assert_non_null(text);
        assert_null(strstr(text, "clrun_ew_add_f32_rows("));
        free(text);
        text = clrun__ew_library_source(add, CLRUN_F32, CLRUN_F32, wide, true, false);
        assert_non_null(text);
        assert_non_null(strstr(text, "clrun_ew_add_f32_rows("));
        for (size_t i = 0; i < sizeof family / sizeof family[0]; i++) {
            const clrun__ew_def *def = clrun__ew_def_of(clrun__op_find(family[i]));
            bool member = i < 4 || wide;
            char name[64], kernel[96];
            clrun__ew_library_name(def, CLRUN_F32, CLRUN_F32, wide, name, sizeof name);
            if (!member) {
                char own[64];
                snprintf(own, sizeof own, "ew_%s_f32", family[i]);
                assert_string_equal(name, own);
                clrun__ew_kernel_name(def, CLRUN_F32, CLRUN_F32, "", kernel, sizeof kernel);
                strcat(kernel, "(");
                assert_null(strstr(text, kernel));
                continue;
            }
            assert_string_equal(name, wide ? "ew_arith_act_f32" : "ew_arith_f32");
            char *other = clrun__ew_library_source(def, CLRUN_F32, CLRUN_F32, wide, true, false);
            assert_non_null(other);
            assert_string_equal(other, text);
            free(other);
            for (int v = 0; v < (i < 4 ? 3 : 1); v++) { /* unary ops: the flat kernel alone */
                clrun__ew_kernel_name(def, CLRUN_F32, CLRUN_F32, (const char *[]){"", "_bc", "_bcn"}[v], kernel,
                                      sizeof kernel);
                strcat(kernel, "(");
                if (strstr(text, kernel) == NULL)
                    fail_msg("the family's program lacks %s", kernel);
            }
        }
        free(text);
        const clrun__ew_def *gelu = clrun__ew_def_of(clrun__op_find("gelu"));
        char name[64];
        clrun__ew_library_name(gelu, CLRUN_F32, CLRUN_F32, wide, name, sizeof name);
        assert_string_equal(name, "ew_gelu_f32");
        text = clrun__ew_library_source(gelu, CLRUN_F32, CLRUN_F32, wide, true, false);
        assert_non_null(text);
        assert_null(strstr(text, "clrun_ew_add_f32"));
        free(text);
    }

    values x[2] = {random_values(CLRUN_F32, "64", -1, 1, 11), random_values(CLRUN_F32, "64", 1, 2, 12)};
    values y = run_op("add", x, 2, NULL, 0);
    clrun_program_stats before, after;
    clrun_program_stats_get(ctx, &before);
    for (size_t i = 1; i < 4; i++) {
        values z = run_op(family[i], x, 2, NULL, 0);
        values_free(&z);
    }
    clrun_program_stats_get(ctx, &after);
    assert_int_equal(after.builds_from_source + after.cache_hits,
                     before.builds_from_source + before.cache_hits);
    values_free(&x[0]), values_free(&x[1]), values_free(&y);
}

/* ---- refusals ---------------------------------------------------------------------------- */

static void expect_refusal(const char *opname, const clrun_tensor_type *in, int count,
                           const clrun_attr *attrs, int attr_count, const char *want)
{
    const clrun__op *op = clrun__op_find(opname);
    clrun_tensor_type out;
    clrun__op_call call = {in, count, &out, 1, attrs, attr_count, 0};
    char err[512] = "";
    assert_int_equal(op->infer(&call, &out, err, sizeof err), CLRUN_ERROR_INVALID_GRAPH);
    if (strstr(err, want) == NULL)
        fail_msg("%s: message \"%s\" lacks \"%s\"", opname, err, want);
}

static void the_type_rule_refuses_what_no_kernel_takes(void **state)
{
    (void)state;
    clrun_tensor_type f = type_of(CLRUN_F32, "4"), i = type_of(CLRUN_I32, "4"),
                      b = type_of(CLRUN_BOOL, "4"), h = type_of(CLRUN_F16, "4");
    clrun_tensor_type where_in[3] = {f, f, f};
    expect_refusal("where", where_in, 3, NULL, 0,
                   "where: input 0 is f32[4]: expected bool (the condition)");
    clrun_tensor_type mixed[3] = {b, f, i};
    expect_refusal("where", mixed, 3, NULL, 0, "where: dtypes differ: a is f32[4], b is i32[4]");
    clrun_tensor_type logic[2] = {f, f};
    expect_refusal("and", logic, 2, NULL, 0, "and: input 0 is f32[4]: expected bool");
    expect_refusal("not", &i, 1, NULL, 0, "not: input 0 is i32[4]: expected bool");
    expect_refusal("sin", &i, 1, NULL, 0, "sin: input 0 is i32[4]: expected f32, f64, f16 or bf16");
    expect_refusal("neg", &b, 1, NULL, 0, "neg: input 0 is bool[4]: expected f32, f64, f16, bf16 or any integer");
    expect_refusal("not", &h, 1, NULL, 0, "not: input 0 is f16[4]: expected bool");
    clrun_tensor_type shift[2] = {i, i};
    expect_refusal("shift_left", shift, 2, NULL, 0,
                   "shift_left: input 0 is i32[4]: expected u8, u16, u32 or u64");
    clrun_tensor_type bits[2] = {f, f};
    expect_refusal("bitwise_and", bits, 2, NULL, 0,
                   "bitwise_and: input 0 is f32[4]: expected i8, u8, i16, u16, i32, u32, i64 or u64");
    clrun_attr to_12 = attr_i("to", 13), to_bad = attr_i("to", 99), fmod_f = attr_f("fmod", 1);
    expect_refusal("cast", &f, 1, &to_12, 1, "cast: attribute 'to' is 13: not a dtype clrun casts to");
    expect_refusal("cast", &f, 1, &to_bad, 1, "attribute 'to' is 99");
    expect_refusal("cast", &f, 1, NULL, 0, "cast: missing required attribute 'to'");
    clrun_tensor_type two[2] = {f, f};
    expect_refusal("mod", two, 2, &fmod_f, 1, "mod: attribute 'fmod' must be an integer");
    clrun_tensor_type shapes[3] = {b, type_of(CLRUN_F32, "3"), f};
    expect_refusal("where", shapes, 3, NULL, 0, "where: shapes do not broadcast");
}

/* ---- set-up ------------------------------------------------------------------------------ */

static int setup(void **state)
{
    (void)state;
    if (clrun_context_create(NULL, &ctx) != CLRUN_OK) {
        fprintf(stderr, "no context: %s\n", clrun_last_error(NULL));
        return -1;
    }
    have_fp64 = clrun_context_device(ctx)->fp64;
    if (!have_fp64)
        fprintf(stderr, "note: the device has no fp64: f64 kernels are not run\n");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    clrun_context_destroy(ctx);
    return 0;
}

int main(void)
{
    clrun_test_device_environment(cache_dir, sizeof cache_dir);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(unary_ops_match_reference_in_every_dtype),
        cmocka_unit_test(special_values_keep_their_meaning),
        cmocka_unit_test(float_cost_follows_the_calls_of_the_expression),
        cmocka_unit_test(round_goes_half_to_even),
        cmocka_unit_test(attributes_set_the_parameters),
        cmocka_unit_test(integer_clip_rounds_its_bounds_inward),
        cmocka_unit_test(erf_is_accurate_near_zero_and_in_the_tails),
        cmocka_unit_test(exp_and_tanh_are_within_a_few_ulp),
        cmocka_unit_test(log_is_within_one_ulp),
        cmocka_unit_test(binary_ops_match_reference_on_every_broadcast),
        cmocka_unit_test(integer_division_truncates_and_survives_zero),
        cmocka_unit_test(comparisons_see_nan_as_unordered),
        cmocka_unit_test(nan_propagates_through_relu_maximum_minimum_and_clip),
        cmocka_unit_test(where_broadcasts_all_three),
        cmocka_unit_test(cast_converts_between_every_dtype),
        cmocka_unit_test(logic_reads_any_nonzero_byte_as_true),
        cmocka_unit_test(bitwise_ops_on_every_integer_width),
        cmocka_unit_test(bf16_elementwise_rounds_once),
        cmocka_unit_test(each_op_is_built_once_per_context),
        cmocka_unit_test(arithmetic_ops_share_one_program),
        cmocka_unit_test(the_type_rule_refuses_what_no_kernel_takes),
    };
    CLRUN_TEST_FILTERS_FROM_ENVIRONMENT();
    int failed = cmocka_run_group_tests(tests, setup, teardown);
    clrun_test_remove_dir(cache_dir);
    return failed;
}
