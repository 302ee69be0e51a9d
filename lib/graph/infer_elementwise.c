/* The elementwise family (graph/elementwise.h): its table of expressions, the op entries made
 * from it, and their one type rule. Unary ops keep their input's shape; binary and ternary ops
 * broadcast their inputs as numpy does. Every data input has the same dtype; the result is that
 * dtype, bool (comparisons, logic) or the dtype `to` names (cast). */
#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "graph/elementwise.h"
#include "graph/op_families.h"
#include "graph/types.h"

/* f16 and bf16 are storage types: read into float, computed there, rounded once as stored */
#define FLOATS                                                                                     \
    (CLRUN__DT(CLRUN_F32) | CLRUN__DT(CLRUN_F64) | CLRUN__DT(CLRUN_F16) | CLRUN__DT(CLRUN_BF16))
#define INTS                                                                                       \
    (CLRUN__DT(CLRUN_I32) | CLRUN__DT(CLRUN_I64) | CLRUN__DT(CLRUN_I8) | CLRUN__DT(CLRUN_U8) |    \
     CLRUN__DT(CLRUN_I16) | CLRUN__DT(CLRUN_U16) | CLRUN__DT(CLRUN_U32) | CLRUN__DT(CLRUN_U64))
#define UINTS                                                                                      \
    (CLRUN__DT(CLRUN_U8) | CLRUN__DT(CLRUN_U16) | CLRUN__DT(CLRUN_U32) | CLRUN__DT(CLRUN_U64))
#define NUMS (FLOATS | INTS)
#define BOOLS CLRUN__DT(CLRUN_BOOL)
#define ALL (NUMS | BOOLS)

/* Parameter lists of a row: a count, then the specs. */
#define P0 0, {{0}}
#define P1(a) 1, {a}
#define P2(a, b) 2, {a, b}
#define NUM(name, fallback) {name, false, fallback, CLRUN__EW_TRUNC}
#define LOWER(name, fallback) {name, false, fallback, CLRUN__EW_CEIL}
#define UPPER(name, fallback) {name, false, fallback, CLRUN__EW_FLOOR}
#define INT(name, fallback) {name, true, fallback, CLRUN__EW_TRUNC}

/* ONNX's defaults for Selu, as float32 values. */
#define SELU_ALPHA 1.67326319217681884765625
#define SELU_GAMMA 1.05070102214813232421875

/* X(id, kind, alias-safe, arity, condition, dtypes, result, params, floats, ints, bools): one
 * row per op. Comparisons are not alias-safe: a bool output has the bytes of an f32 input of a
 * quarter of its elements, which it reads broadcast, at other elements than its own.
 * NaN as ONNX (onnxruntime) has it: a NaN operand gives NaN in relu, maximum, minimum, clip and
 * the activations, and relu of a negative is +0, the same as the host's folding computes
 * (lib/onnx/host_eval.c). */
#define EW_TABLE(X)                                                                                \
    /* ---- unary ---- */                                                                          \
    X(neg, UNARY, true, 1, false, NUMS, SAME, P0, "-x", "AS_T((UT)0 - AS_U(x))", NULL)             \
    X(abs, UNARY, true, 1, false, NUMS, SAME, P0, "fabs(x)", "AS_T(abs(x))", NULL)                 \
    X(relu, UNARY, true, 1, false, NUMS, SAME, P0, "x < F(0.0) ? F(0.0) : x", "max(x, (T)0)", NULL) \
    X(gelu, UNARY, true, 1, false, FLOATS, SAME, P0,                                               \
      "F(0.5) * x * (F(1.0) + TANH(F(0.7978845608028654) * (x + F(0.044715) * x * x * x)))",       \
      NULL, NULL)                                                                                  \
    X(gelu_erf, UNARY, true, 1, false, FLOATS, SAME, P0,                                           \
      "F(0.5) * x * ERFC(F(-0.7071067811865476) * x)", NULL, NULL)                                 \
    X(sigmoid, UNARY, true, 1, false, FLOATS, SAME, P0, "F(1.0) / (F(1.0) + EXP(-x))", NULL, NULL) \
    X(tanh, UNARY, true, 1, false, FLOATS, SAME, P0, "TANH(x)", NULL, NULL)                        \
    X(exp, UNARY, true, 1, false, FLOATS, SAME, P0, "EXP(x)", NULL, NULL)                          \
    X(log, UNARY, true, 1, false, FLOATS, SAME, P0, "LOG(x)", NULL, NULL)                          \
    X(sqrt, UNARY, true, 1, false, FLOATS, SAME, P0, "sqrt(x)", NULL, NULL)                        \
    X(rsqrt, UNARY, true, 1, false, FLOATS, SAME, P0, "rsqrt(x)", NULL, NULL)                      \
    X(reciprocal, UNARY, true, 1, false, FLOATS, SAME, P0, "F(1.0) / x", NULL, NULL)               \
    X(floor, UNARY, true, 1, false, FLOATS, SAME, P0, "floor(x)", NULL, NULL)                      \
    X(ceil, UNARY, true, 1, false, FLOATS, SAME, P0, "ceil(x)", NULL, NULL)                        \
    X(round, UNARY, true, 1, false, FLOATS, SAME, P0, "rint(x)", NULL, NULL)                       \
    X(sign, UNARY, true, 1, false, NUMS, SAME, P0,                                                 \
      "x > F(0.0) ? F(1.0) : x < F(0.0) ? F(-1.0) : x", "(T)((x > (T)0) - (x < (T)0))", NULL)      \
    X(sin, UNARY, true, 1, false, FLOATS, SAME, P0, "sin(x)", NULL, NULL)                          \
    X(cos, UNARY, true, 1, false, FLOATS, SAME, P0, "cos(x)", NULL, NULL)                          \
    X(tan, UNARY, true, 1, false, FLOATS, SAME, P0, "tan(x)", NULL, NULL)                          \
    X(asin, UNARY, true, 1, false, FLOATS, SAME, P0, "asin(x)", NULL, NULL)                        \
    X(acos, UNARY, true, 1, false, FLOATS, SAME, P0, "acos(x)", NULL, NULL)                        \
    X(atan, UNARY, true, 1, false, FLOATS, SAME, P0, "atan(x)", NULL, NULL)                        \
    X(sinh, UNARY, true, 1, false, FLOATS, SAME, P0, "sinh(x)", NULL, NULL)                        \
    X(cosh, UNARY, true, 1, false, FLOATS, SAME, P0, "cosh(x)", NULL, NULL)                        \
    X(asinh, UNARY, true, 1, false, FLOATS, SAME, P0, "asinh(x)", NULL, NULL)                      \
    X(acosh, UNARY, true, 1, false, FLOATS, SAME, P0, "acosh(x)", NULL, NULL)                      \
    X(atanh, UNARY, true, 1, false, FLOATS, SAME, P0, "atanh(x)", NULL, NULL)                      \
    X(erf, UNARY, true, 1, false, FLOATS, SAME, P0, "ERF(x)", NULL, NULL)                          \
    X(softplus, UNARY, true, 1, false, FLOATS, SAME, P0, "x > F(40.0) ? x : log1p(EXP(x))", NULL,  \
      NULL)                                                                                        \
    X(softsign, UNARY, true, 1, false, FLOATS, SAME, P0, "x / (F(1.0) + fabs(x))", NULL, NULL)     \
    X(hard_sigmoid, UNARY, true, 1, false, FLOATS, SAME, P2(NUM("alpha", 0.2), NUM("beta", 0.5)),  \
      "CLIP(p0 * x + p1, F(0.0), F(1.0))", NULL, NULL)                                             \
    X(hard_swish, UNARY, true, 1, false, FLOATS, SAME, P0,                                         \
      "x * CLIP(x / F(6.0) + F(0.5), F(0.0), F(1.0))", NULL, NULL)                                 \
    X(leaky_relu, UNARY, true, 1, false, FLOATS, SAME, P1(NUM("alpha", 0.01)),                     \
      "x < F(0.0) ? p0 * x : x", NULL, NULL)                                                       \
    X(elu, UNARY, true, 1, false, FLOATS, SAME, P1(NUM("alpha", 1.0)),                             \
      "x < F(0.0) ? p0 * expm1(x) : x", NULL, NULL)                                                \
    X(selu, UNARY, true, 1, false, FLOATS, SAME,                                                   \
      P2(NUM("alpha", SELU_ALPHA), NUM("gamma", SELU_GAMMA)),                                      \
      "x > F(0.0) ? p1 * x : p1 * (p0 * expm1(x))", NULL, NULL)                                    \
    X(celu, UNARY, true, 1, false, FLOATS, SAME, P1(NUM("alpha", 1.0)),                            \
      "x > F(0.0) ? x : p0 * expm1(x / p0)", NULL, NULL)                                           \
    X(clip, UNARY, true, 1, false, NUMS, SAME, P2(LOWER("min", -INFINITY), UPPER("max", INFINITY)), \
      "CLIP(x, p0, p1)", "CLIP(x, p0, p1)", NULL)                                                  \
    X(not, UNARY, true, 1, false, BOOLS, SAME, P0, NULL, NULL, "(uchar)(x == 0)")                  \
    X(cast, UNARY, true, 1, false, ALL, CAST, P0, NULL, NULL, NULL)                                \
    X(copy, COPY, true, 1, false, ALL, SAME, P0, "x", "x", "x")                                    \
    X(scale, SCALE, true, 1, false, FLOATS, SAME, P2(NUM("alpha", 1.0), NUM("beta", 0.0)),         \
      "p0 * x + p1", NULL, NULL)                                                                   \
    /* ---- binary ---- */                                                                         \
    X(add, BINARY, true, 2, false, NUMS, SAME, P0, "a + b", "AS_T(AS_U(a) + AS_U(b))", NULL)       \
    X(sub, BINARY, true, 2, false, NUMS, SAME, P0, "a - b", "AS_T(AS_U(a) - AS_U(b))", NULL)       \
    X(mul, BINARY, true, 2, false, NUMS, SAME, P0, "a * b", "AS_T(AS_U(a) * AS_U(b))", NULL)       \
    X(div, BINARY, true, 2, false, NUMS, SAME, P0, "a / b", "IDIV(a, b)", NULL)                    \
    X(pow, BINARY, true, 2, false, NUMS, SAME, P0, "pow(a, b)", "IPOW(a, b)", NULL)                \
    X(maximum, BINARY, true, 2, false, NUMS, SAME, P0, "a > b || isnan(a) ? a : b", "max(a, b)",   \
      NULL)                                                                                        \
    X(minimum, BINARY, true, 2, false, NUMS, SAME, P0, "a < b || isnan(a) ? a : b", "min(a, b)",   \
      NULL)                                                                                        \
    X(prelu, BINARY, true, 2, false, FLOATS, SAME, P0, "a < F(0.0) ? b * a : a", NULL, NULL)       \
    X(mod, BINARY, true, 2, false, NUMS, SAME, P1(INT("fmod", 0)), "MOD(a, b, p0)",                \
      "MOD(a, b, p0)", NULL)                                                                       \
    X(equal, BINARY, false, 2, false, ALL, BOOL, P0, "(uchar)(a == b)", "(uchar)(a == b)",         \
      "(uchar)((a != 0) == (b != 0))")                                                             \
    X(less, BINARY, false, 2, false, NUMS, BOOL, P0, "(uchar)(a < b)", "(uchar)(a < b)", NULL)     \
    X(greater, BINARY, false, 2, false, NUMS, BOOL, P0, "(uchar)(a > b)", "(uchar)(a > b)", NULL)  \
    X(less_equal, BINARY, false, 2, false, NUMS, BOOL, P0, "(uchar)(a <= b)", "(uchar)(a <= b)",   \
      NULL)                                                                                        \
    X(greater_equal, BINARY, false, 2, false, NUMS, BOOL, P0, "(uchar)(a >= b)",                   \
      "(uchar)(a >= b)", NULL)                                                                     \
    X(and, BINARY, true, 2, false, BOOLS, SAME, P0, NULL, NULL, "(uchar)((a != 0) & (b != 0))")    \
    X(or, BINARY, true, 2, false, BOOLS, SAME, P0, NULL, NULL, "(uchar)((a != 0) | (b != 0))")     \
    X(xor, BINARY, true, 2, false, BOOLS, SAME, P0, NULL, NULL, "(uchar)((a != 0) != (b != 0))")   \
    /* shifts of unsigned integers: a shift by the width or more gives 0 (OpenCL would take the  \
     * count modulo the width) */                                                                 \
    X(shift_left, BINARY, true, 2, false, UINTS, SAME, P0, NULL,                                   \
      "b >= (T)(8 * sizeof(T)) ? (T)0 : (T)(a << b)", NULL)                                        \
    X(shift_right, BINARY, true, 2, false, UINTS, SAME, P0, NULL,                                  \
      "b >= (T)(8 * sizeof(T)) ? (T)0 : (T)(a >> b)", NULL)                                        \
    /* ---- ternary ---- */                                                                        \
    X(where, TERNARY, true, 3, true, ALL, SAME, P0, "c != 0 ? a : b", "c != 0 ? a : b",            \
      "c != 0 ? a : b")                                                                            \
    /* ---- bitwise, of integers (ONNX's Bitwise*, opset 18) ---- */                               \
    X(bitwise_not, UNARY, true, 1, false, INTS, SAME, P0, NULL, "(T)~x", NULL)                     \
    X(bitwise_and, BINARY, true, 2, false, INTS, SAME, P0, NULL, "(T)(a & b)", NULL)               \
    X(bitwise_or, BINARY, true, 2, false, INTS, SAME, P0, NULL, "(T)(a | b)", NULL)                \
    X(bitwise_xor, BINARY, true, 2, false, INTS, SAME, P0, NULL, "(T)(a ^ b)", NULL)

#define EW_ID(id, ...) EW_##id,
enum { EW_TABLE(EW_ID) EW_COUNT };

#define EW_ROW(id, kind_, alias_, arity_, cond_, dtypes_, result_, params_, floats_, ints_, bools_) \
    [EW_##id] = {#id, arity_, cond_, dtypes_, CLRUN__EW_##result_, params_, floats_, ints_, bools_},
static const clrun__ew_def ew_defs[EW_COUNT] = {EW_TABLE(EW_ROW)};

const clrun__ew_def *clrun__ew_defs(size_t *count)
{
    *count = EW_COUNT;
    return ew_defs;
}

const clrun__ew_def *clrun__ew_def_of(const clrun__op *op)
{
    if (op == NULL || op->kind == CLRUN__OP_OTHER || op->code < 0 || op->code >= EW_COUNT)
        return NULL;
    return strcmp(ew_defs[op->code].name, op->name) == 0 ? &ew_defs[op->code] : NULL;
}

const char *clrun__ew_expression(const clrun__ew_def *def, clrun_dtype dtype)
{
    if (!(def->dtypes & CLRUN__DT(dtype)))
        return NULL;
    if (clrun__dtype_is_float(dtype))
        return def->floats;
    return dtype == CLRUN_BOOL ? def->bools : def->ints;
}

/* The cost of one call, by the function's name (len bytes at name). */
static clrun__ew_cost call_cost(const char *name, size_t len)
{
    static const char *const own[] = {"EXP", "TANH", "LOG"};
    /* A few instructions each, or builtins that compile to one (sqrt, rsqrt, rint). */
    static const char *const cheap[] = {"fabs", "fmax", "fmin", "floor", "ceil", "rint", "sqrt", "rsqrt",
                                        "CLIP", "MOD",  "abs",  "max",   "min",  "AS_T", "AS_U", "F",
                                        "IDIV", "IPOW", "isnan"};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        if (strlen(own[i]) == len && strncmp(name, own[i], len) == 0)
            return CLRUN__EW_OWN_MATH;
    for (size_t i = 0; i < sizeof cheap / sizeof cheap[0]; i++)
        if (strlen(cheap[i]) == len && strncmp(name, cheap[i], len) == 0)
            return CLRUN__EW_ARITHMETIC;
    return CLRUN__EW_LIBRARY_MATH; /* log1p, expm1, sin, cos, pow, ERF, ERFC, any other */
}

clrun__ew_cost clrun__ew_float_cost(const clrun__ew_def *def)
{
    clrun__ew_cost cost = CLRUN__EW_ARITHMETIC;
    const char *e = def->floats;
    for (size_t i = 0; e && e[i]; i++) {
        if (!(isalpha((unsigned char)e[i]) || e[i] == '_') || (i > 0 && (isalnum((unsigned char)e[i - 1]) || e[i - 1] == '_')))
            continue;
        size_t len = 0;
        while (isalnum((unsigned char)e[i + len]) || e[i + len] == '_')
            len++;
        if (e[i + len] == '(') {
            clrun__ew_cost c = call_cost(e + i, len);
            cost = c > cost ? c : cost;
        }
        i += len - 1;
    }
    return cost;
}

bool clrun__ew_dtype_supported(clrun_dtype dtype)
{
    return dtype == CLRUN_F32 || dtype == CLRUN_F64 || dtype == CLRUN_F16 || dtype == CLRUN_BOOL ||
           dtype == CLRUN_BF16 || clrun__dtype_is_int(dtype);
}

clrun_dtype clrun__ew_data_dtype(const clrun__ew_def *def, const clrun__op_call *call)
{
    int data = def->condition ? 1 : 0;
    return data < call->input_count ? call->inputs[data].dtype : CLRUN_F32;
}

clrun_dtype clrun__ew_result_dtype(const clrun__ew_def *def, const clrun__op_call *call,
                                   clrun_dtype data)
{
    switch (def->result) {
    case CLRUN__EW_BOOL: return CLRUN_BOOL;
    case CLRUN__EW_CAST: return (clrun_dtype)clrun__attr_int_or(call, "to", CLRUN_F32);
    default: return data;
    }
}

double clrun__ew_param_value(const clrun__ew_def *def, const clrun__op_call *call, int i,
                             clrun_dtype data)
{
    const clrun__ew_param *p = &def->params[i];
    double v = clrun__attr_float_or(call, p->name, p->fallback);
    if (!clrun__dtype_is_int(data))
        return v;
    if (p->round == CLRUN__EW_CEIL)
        v = ceil(v);
    else if (p->round == CLRUN__EW_FLOOR)
        v = floor(v);
    else
        v = trunc(v);
    double lo, hi;
    clrun__int_range(data, &lo, &hi);
    return v < lo ? lo : v > hi ? hi : v;
}

/* ---- the type rule ----------------------------------------------------------------------- */

/* "f32, f64, i32 or i64": the dtypes of a set, for refusals. */
static void dtype_list(unsigned set, char *buf, size_t size)
{
    static const clrun_dtype order[] = {CLRUN_F32, CLRUN_F64, CLRUN_F16, CLRUN_BF16, CLRUN_I8,
                                        CLRUN_U8,  CLRUN_I16, CLRUN_U16, CLRUN_I32, CLRUN_U32,
                                        CLRUN_I64, CLRUN_U64, CLRUN_BOOL};
    const size_t count = sizeof order / sizeof order[0];
    if ((set & INTS) == INTS && set != INTS) { /* every integer: said in one word */
        snprintf(buf, size, "%s%sany integer%s", (set & FLOATS) ? "f32, f64, f16, bf16" : "",
                 (set & FLOATS) ? (set & BOOLS) ? ", " : " or " : "", (set & BOOLS) ? " or bool" : "");
        return;
    }
    int total = 0, done = 0;
    for (size_t k = 0; k < count; k++)
        total += (set & CLRUN__DT(order[k])) != 0;
    size_t used = 0;
    buf[0] = '\0';
    for (size_t k = 0; k < count && used < size; k++) {
        if (!(set & CLRUN__DT(order[k])))
            continue;
        const char *sep = done == 0 ? "" : done == total - 1 ? " or " : ", ";
        used += (size_t)snprintf(buf + used, size - used, "%s%s", sep, clrun_dtype_name(order[k]));
        done++;
    }
}

static clrun_status check_input_dtype(const clrun__ew_def *def, const clrun__op_call *call, int i,
                                      const clrun__infer_error *err)
{
    const clrun_tensor_type *t = &call->inputs[i];
    char s[CLRUN__TYPE_TEXT], list[96];
    bool cond = def->condition && i == 0;
    unsigned set = cond ? BOOLS : def->dtypes;
    if (set & CLRUN__DT(t->dtype))
        return CLRUN_OK;
    dtype_list(set, list, sizeof list);
    return clrun__refuse(err, "input %d is %s: expected %s%s", i, clrun__type_format(t, s, sizeof s),
                         list, cond ? " (the condition)" : "");
}

static clrun_status check_cast_target(const clrun__op_call *call, const clrun__infer_error *err)
{
    int64_t to = clrun__attr_int_or(call, "to", -1);
    if (to >= 0 && to <= 16 && clrun__ew_dtype_supported((clrun_dtype)to))
        return CLRUN_OK;
    return clrun__refuse(err, "attribute 'to' is %lld: not a dtype clrun casts to (f32 = %d, "
                         "i32 = %d, i64 = %d, bool = %d, f64 = %d, i8 = %d, u8 = %d, i16 = %d, "
                         "u16 = %d, u32 = %d, u64 = %d, bf16 = %d)", (long long)to, CLRUN_F32, CLRUN_I32,
                         CLRUN_I64, CLRUN_BOOL, CLRUN_F64, CLRUN_I8, CLRUN_U8, CLRUN_I16, CLRUN_U16,
                         CLRUN_U32, CLRUN_U64, CLRUN_BF16);
}

static clrun_status check_attributes(const clrun__ew_def *def, const clrun__op_call *call,
                                     const clrun__infer_error *err)
{
    clrun__attr_spec specs[CLRUN__EW_MAX_PARAMS + 1];
    int count = 0;
    for (int i = 0; i < def->param_count; i++)
        specs[count++] = (clrun__attr_spec){def->params[i].name,
                                            def->params[i].integer ? CLRUN__WANT_INT
                                                                   : CLRUN__WANT_FLOAT, false};
    if (def->result == CLRUN__EW_CAST)
        specs[count++] = (clrun__attr_spec){"to", CLRUN__WANT_INT, true};
    clrun_status s = clrun__check_attrs(call, specs, count, err);
    if (s == CLRUN_OK && def->result == CLRUN__EW_CAST)
        s = check_cast_target(call, err);
    return s;
}

static clrun_status same_dtypes(const clrun_tensor_type *a, const clrun_tensor_type *b,
                                const clrun__infer_error *err)
{
    if (a->dtype == b->dtype)
        return CLRUN_OK;
    char sa[CLRUN__TYPE_TEXT], sb[CLRUN__TYPE_TEXT];
    return clrun__refuse(err, "dtypes differ: a is %s, b is %s", clrun__type_format(a, sa, sizeof sa),
                         clrun__type_format(b, sb, sizeof sb));
}

static clrun_status ew_infer(const clrun__ew_def *def, const clrun__op_call *call,
                             clrun_tensor_type *out, char *errbuf, size_t errlen)
{
    const clrun__infer_error err = {def->name, errbuf, errlen};
    clrun_status s = clrun__check_input_count(call, def->arity, def->arity, &err);
    if (s == CLRUN_OK)
        s = check_attributes(def, call, &err);
    for (int i = 0; s == CLRUN_OK && i < def->arity; i++)
        s = clrun__check_dims(call, i, &err);
    for (int i = 0; s == CLRUN_OK && i < def->arity; i++)
        s = check_input_dtype(def, call, i, &err);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *in = call->inputs;
    out[0] = in[0];
    if (def->arity == 2) {
        s = same_dtypes(&in[0], &in[1], &err);
        if (s == CLRUN_OK)
            s = clrun__broadcast_shape(&in[0], &in[1], &out[0], &err);
    } else if (def->arity == 3) {
        clrun_tensor_type ca;
        s = same_dtypes(&in[1], &in[2], &err);
        if (s == CLRUN_OK)
            s = clrun__broadcast_shape(&in[1], &in[2], &ca, &err);
        if (s == CLRUN_OK)
            s = clrun__broadcast_shape(&ca, &in[0], &out[0], &err);
    }
    if (s == CLRUN_OK)
        out[0].dtype = clrun__ew_result_dtype(def, call, clrun__ew_data_dtype(def, call));
    return s;
}

/* ---- the op entries ---------------------------------------------------------------------- */

#define EW_OP(id, kind_, alias_, arity_, ...)                                                       \
    static clrun_status infer_##id(const clrun__op_call *call, clrun_tensor_type *out, char *err,  \
                                   size_t errlen)                                                  \
    {                                                                                              \
        return ew_infer(&ew_defs[EW_##id], call, out, err, errlen);                                \
    }                                                                                              \
    static const clrun__op op_##id = {.name = #id,                                                 \
                                      .min_inputs = arity_,                                        \
                                      .max_inputs = arity_,                                        \
                                      .outputs = 1,                                                \
                                      .alias_safe = alias_,                                        \
                                      .kind = CLRUN__OP_##kind_,                                   \
                                      .code = EW_##id,                                             \
                                      .infer = infer_##id};
EW_TABLE(EW_OP)

#define EW_ENTRY(id, ...) &op_##id,
const clrun__op *const clrun__ops_elementwise[] = {EW_TABLE(EW_ENTRY) NULL};
