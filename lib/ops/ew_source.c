/* Generated elementwise OpenCL C: see ew_source.h. Each element function is the table's
 * expression inside the macros of its dtype (T, F, CLIP, ...), so the text of an op's function
 * is the same in every program that calls it. */
#include "ops/ew_source.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "device/program.h"
#include "graph/types.h"

const char *clrun__cl_type(clrun_dtype dtype)
{
    switch (dtype) {
    case CLRUN_F32: return "float";
    case CLRUN_F64: return "double";
    case CLRUN_I32: return "int";
    case CLRUN_I64: return "long";
    case CLRUN_BOOL: return "uchar";
    case CLRUN_I8: return "char";
    case CLRUN_U8: return "uchar";
    case CLRUN_I16: return "short";
    case CLRUN_U16: return "ushort";
    case CLRUN_U32: return "uint";
    case CLRUN_U64: return "ulong";
    case CLRUN_F16: return "half";
    case CLRUN_BF16: return "ushort"; /* its bits: read and written through float */
    default: return "void";
    }
}

/* The type an element is computed in: f16 elements are loaded into and stored from float
 * (vload_half / vstore_half, OpenCL 1.2's core: no cl_khr_fp16 needed). */
static const char *compute_type(clrun_dtype dtype)
{
    return dtype == CLRUN_F16 || dtype == CLRUN_BF16 ? "float" : clrun__cl_type(dtype);
}

/* The unsigned integer type of an integer dtype's width. */
static const char *unsigned_type(clrun_dtype dtype)
{
    switch (clrun_dtype_size(dtype)) {
    case 1: return "uchar";
    case 2: return "ushort";
    case 8: return "ulong";
    default: return "uint";
    }
}

void clrun__ew_emit_prelude(clrun__strbuf *b, bool fp64)
{
    clrun__strbuf_printf(b, "#pragma OPENCL FP_CONTRACT OFF\n");
    if (fp64)
        clrun__strbuf_printf(b, "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"
                                "#define CLRUN_HAVE_FP64 1\n");
    for (size_t i = 0; i < clrun__kernel_source_count; i++)
        if (strcmp(clrun__kernel_sources[i].name, "ew_functions") == 0)
            clrun__strbuf_append(b, clrun__kernel_sources[i].text, clrun__kernel_sources[i].length);
    clrun__strbuf_printf(b, "\n");
}

/* ---- element functions ------------------------------------------------------------------- */

/* The macros an expression of `dtype` sees (graph/elementwise.h), and their removal. */
static void emit_dtype_macros(clrun__strbuf *b, clrun_dtype dtype)
{
    if (dtype == CLRUN_F16 || dtype == CLRUN_BF16) /* computed in float */
        dtype = CLRUN_F32;
    const char *name = clrun_dtype_name(dtype);
    clrun__strbuf_printf(b, "#define T %s\n", clrun__cl_type(dtype));
    if (dtype == CLRUN_F32 || dtype == CLRUN_F64) {
        clrun__strbuf_printf(b, "#define F(c) c%s\n", dtype == CLRUN_F32 ? "##f" : "");
        bool f32 = dtype == CLRUN_F32;
        clrun__strbuf_printf(b, "#define ERF %s\n#define ERFC %s\n", f32 ? "clrun_erf_f32" : "erf",
                             f32 ? "clrun_erfc_f32" : "erfc");
        clrun__strbuf_printf(b, "#define EXP %s\n#define TANH %s\n#define LOG %s\n", f32 ? "clrun_exp_f32" : "exp",
                             f32 ? "clrun_tanh_f32" : "tanh", f32 ? "clrun_log_f32" : "log");
    }
    if (clrun__dtype_is_int(dtype)) {
        /* AS_T takes any integer expression: one of a narrow type is promoted to int, so it is
         * first brought back to UT's width (modular), then reinterpreted. */
        const char *u = unsigned_type(dtype);
        clrun__strbuf_printf(b, "#define UT %s\n#define AS_T(v) as_%s((UT)(v))\n"
                                "#define AS_U(v) as_%s((T)(v))\n", u, clrun__cl_type(dtype), u);
        clrun__strbuf_printf(b, "#define IDIV clrun_div_%s\n#define IPOW clrun_pow_%s\n", name, name);
    }
    if (dtype != CLRUN_BOOL)
        clrun__strbuf_printf(b, "#define CLIP clrun_clip_%s\n#define MOD clrun_mod_%s\n", name, name);
}

static void emit_dtype_unmacros(clrun__strbuf *b)
{
    clrun__strbuf_printf(b, "#undef T\n#undef F\n#undef ERF\n#undef ERFC\n#undef EXP\n#undef TANH\n#undef LOG\n"
                            "#undef UT\n#undef AS_T\n"
                            "#undef AS_U\n#undef IDIV\n#undef IPOW\n#undef CLIP\n#undef MOD\n");
}

void clrun__ew_function_name(const clrun__ew_def *def, clrun_dtype data, clrun_dtype result,
                             char *buf, size_t size)
{
    if (def->result == CLRUN__EW_CAST)
        snprintf(buf, size, "ew_cast_%s_%s", clrun_dtype_name(data), clrun_dtype_name(result));
    else
        snprintf(buf, size, "ew_%s_%s", def->name, clrun_dtype_name(data));
}

/* A cast: conversions that say their rounding (nearest even into floats, toward zero and
 * saturating into integers, NaN to 0), integers converted by wrapping (two's complement, as
 * numpy's astype), anything nonzero to true. The text is written to buf. */
static const char *cast_expression(clrun_dtype from, clrun_dtype to, char *buf, size_t size)
{
    if (from == CLRUN_F16 || from == CLRUN_BF16) /* loaded into a float, exactly */
        from = CLRUN_F32;
    if (to == CLRUN_F16) /* the value as it is (a double from f64): the store rounds it once */
        return clrun__dtype_is_float(from) ? "x" : "convert_float(x)";
    if (to == CLRUN_BF16) { /* a float the store rounds once: from f64 and the integers rounded
                               to odd (toward zero, the last bit set when inexact), which bf16's
                               rounding to nearest even then leaves the value's own rounding */
        if (from == CLRUN_F32 || from == CLRUN_F64)
            return from == CLRUN_F32 ? "x" : "clrun_f64_to_f32_odd(x)";
        if (from == CLRUN_BOOL)
            return "x != 0 ? 1.0f : 0.0f";
        snprintf(buf, size, "clrun_f32_odd(convert_float_rtz(x), convert_%s(convert_float_rtz(x)) != x)",
                 clrun__cl_type(from));
        return buf;
    }
    bool from_float = from == CLRUN_F32 || from == CLRUN_F64;
    if (to == CLRUN_BOOL)
        return "(uchar)(x != 0)";
    if (from == CLRUN_BOOL)
        return to == CLRUN_F32 ? "x != 0 ? 1.0f : 0.0f" : to == CLRUN_F64 ? "x != 0 ? 1.0 : 0.0"
                                                                          : "(T_OUT)(x != 0)";
    if (from == to)
        return "x";
    if (to == CLRUN_F32 || to == CLRUN_F64) {
        snprintf(buf, size, "convert_%s(x)", clrun__cl_type(to));
        return buf;
    }
    const char *t = clrun__cl_type(to), *u = unsigned_type(to);
    if (from_float) /* NaN gives 0, as OpenCL's _sat says; said again as not every one does */
        snprintf(buf, size, "isnan(x) ? (%s)0 : convert_%s_sat_rtz(x)", t, t);
    else /* through ulong: sign-extended, then its low bytes */
        snprintf(buf, size, "as_%s((%s)as_ulong(convert_long(x)))", t, u);
    return buf;
}

/* The dtype an element function of `data` giving `result` computes its value in: the result's,
 * except for an f16 result: the float (double from f64) its store rounds once. */
static clrun_dtype value_dtype(clrun_dtype data, clrun_dtype result)
{
    if (result == CLRUN_BF16)
        return CLRUN_F32;
    return result != CLRUN_F16 ? result : data == CLRUN_F64 ? CLRUN_F64 : CLRUN_F32;
}

void clrun__ew_emit_function(clrun__strbuf *b, const clrun__ew_def *def, clrun_dtype data,
                             clrun_dtype result)
{
    static const char *const operands[3][3] = {{"x"}, {"a", "b"}, {"c", "a", "b"}};
    char name[64];
    clrun__ew_function_name(def, data, result, name, sizeof name);
    char cast[160];
    const char *expression = def->result == CLRUN__EW_CAST
                                 ? cast_expression(data, result, cast, sizeof cast)
                                 : clrun__ew_expression(def, data);
    emit_dtype_macros(b, data);
    const char *out_type = clrun__cl_type(value_dtype(data, result));
    clrun__strbuf_printf(b, "#define T_OUT %s\n", out_type);
    clrun__strbuf_printf(b, "CLRUN_INLINE %s %s(", out_type, name);
    for (int i = 0; i < def->arity; i++)
        clrun__strbuf_printf(b, "%sconst %s %s", i ? ", " : "",
                             def->condition && i == 0 ? "uchar" : compute_type(data),
                             operands[def->arity - 1][i]);
    for (int p = 0; p < def->param_count; p++)
        clrun__strbuf_printf(b, ", const %s p%d", compute_type(data), p);
    clrun__strbuf_printf(b, ")\n{\n    return (T_OUT)(%s);\n}\n#undef T_OUT\n", expression ? expression : "0");
    emit_dtype_unmacros(b);
}

bool clrun__ew_on_vectors(const clrun__ew_def *def)
{
    static const char *const ops[] = {"relu", "leaky_relu", "hard_sigmoid", "hard_swish", "clip",
                                      "neg",  "abs",        "scale",        "add",        "sub",
                                      "mul",  "sigmoid",    "exp",          "tanh",       "gelu"};
    if (def == NULL || def->floats == NULL || def->condition || def->arity > 2)
        return false;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (strcmp(def->name, ops[i]) == 0)
            return true;
    return false;
}

void clrun__ew_emit_vector_function(clrun__strbuf *b, const clrun__ew_def *def, int lanes)
{
    static const char *const operands[2][2] = {{"x"}, {"a", "b"}};
    char name[64];
    clrun__ew_function_name(def, CLRUN_F32, CLRUN_F32, name, sizeof name);
    clrun__strbuf_printf(b, "#define T float%d\n#define T_OUT float%d\n#define F(c) c##f\n"
                            "#define CLIP clrun_clip_f32_v%d\n#define EXP clrun_exp_f32_v%d\n"
                            "#define TANH clrun_tanh_f32_v%d\n",
                         lanes, lanes, lanes, lanes, lanes);
    clrun__strbuf_printf(b, "CLRUN_INLINE float%d %s_v%d(", lanes, name, lanes);
    for (int i = 0; i < def->arity; i++)
        clrun__strbuf_printf(b, "%sconst float%d %s", i ? ", " : "", lanes, operands[def->arity - 1][i]);
    for (int p = 0; p < def->param_count; p++)
        clrun__strbuf_printf(b, ", const float p%d", p);
    clrun__strbuf_printf(b, ")\n{\n    return (T_OUT)(%s);\n}\n#undef T\n#undef T_OUT\n#undef F\n#undef CLIP\n"
                            "#undef EXP\n#undef TANH\n",
                         def->floats);
}

void clrun__ew_emit_vector_helpers(clrun__strbuf *b, bool math)
{
    for (int lanes = 8; lanes <= 16; lanes *= 2) {
        clrun__strbuf_printf(b,
                             "CLRUN_INLINE float%d clrun_clip_f32_v%d(float%d v, const float%d lo, const float%d hi)\n"
                             "{\n    v = v < lo ? lo : v;\n    return v > hi ? hi : v;\n}\n"
                             "CLRUN_INLINE float%d clrun_canon_f32_v%d(const float%d v)\n"
                             "{\n    return isnan(v) ? (float%d)(as_float(0x7fc00000u)) : v;\n}\n",
                             lanes, lanes, lanes, lanes, lanes, lanes, lanes, lanes, lanes);
        if (math)
            clrun__strbuf_printf(b, "CLRUN_EXP_FUNCTIONS(float%d, uint%d, _v%d)\n", lanes, lanes, lanes);
    }
}

const char *clrun__ew_store_function(clrun_dtype dtype)
{
    return dtype == CLRUN_F32 ? "clrun_canon_f32" : dtype == CLRUN_F64 ? "clrun_canon_f64" : "";
}

void clrun__ew_emit_literal(clrun__strbuf *b, clrun_dtype dtype, double value)
{
    if (dtype == CLRUN_F32 || dtype == CLRUN_F64) {
        if (isinf(value)) {
            clrun__strbuf_printf(b, "%s", value < 0 ? "(-INFINITY)" : "INFINITY");
            return;
        }
        double exact = dtype == CLRUN_F32 ? (double)(float)value : value;
        clrun__strbuf_printf(b, "(%a%s)", exact, dtype == CLRUN_F32 ? "f" : "");
        return;
    }
    if (dtype == CLRUN_U64) {
        /* the caller clamped value to the range; 2^64 is how its top rounds in a double */
        if (value >= 18446744073709551615.0)
            clrun__strbuf_printf(b, "18446744073709551615UL");
        else
            clrun__strbuf_printf(b, "(%lluUL)", value <= 0 ? 0ULL : (unsigned long long)value);
        return;
    }
    if (dtype == CLRUN_I64) {
        /* the caller clamped value to the range; 2^63 is how its top rounds in a double */
        if (value <= -9223372036854775808.0)
            clrun__strbuf_printf(b, "(-9223372036854775807L - 1L)");
        else if (value >= 9223372036854775807.0)
            clrun__strbuf_printf(b, "9223372036854775807L");
        else
            clrun__strbuf_printf(b, "(%lldL)", (long long)value);
        return;
    }
    if (dtype == CLRUN_U32) {
        clrun__strbuf_printf(b, "(%lluU)", value <= 0 ? 0ULL : (unsigned long long)value);
        return;
    }
    const char *cast = dtype == CLRUN_I32 || dtype == CLRUN_BOOL ? "" : clrun__cl_type(dtype);
    if (value <= -2147483648.0)
        clrun__strbuf_printf(b, "(-2147483647 - 1)");
    else if (*cast)
        clrun__strbuf_printf(b, "((%s)%lld)", cast, (long long)value);
    else
        clrun__strbuf_printf(b, "(%lld)", (long long)value);
}

/* ---- the unfused kernels ----------------------------------------------------------------- */

void clrun__ew_kernel_name(const clrun__ew_def *def, clrun_dtype data, clrun_dtype result,
                           const char *variant, char *buf, size_t size)
{
    if (def->result == CLRUN__EW_CAST)
        snprintf(buf, size, "clrun_ew_cast_%s_%s%s", clrun_dtype_name(data),
                 clrun_dtype_name(result), variant);
    else
        snprintf(buf, size, "clrun_ew_%s_%s%s", def->name, clrun_dtype_name(data), variant);
}

/* The four arithmetic ops a model that runs them unfused mostly runs together (a transformer's
 * add, sub and mul): their kernels share one program per dtype, so that POCL runs its front end
 * and links its builtins once for them (each program costs it about 0.3 s with an empty cache,
 * 60 ms with a warm one), and compiles only the kernels launched, as for any program. Where the
 * driver compiles each kernel at its first launch (`wide`: POCL), the common activations join
 * them: a program's fixed cost there is about 0.12 s of front end, each op in it some 8 ms, and
 * a convolutional network runs two or three of them unfused beside its arithmetic
 * (MobileNetV3-small: hardswish, relu, mul and add, 0.53 s of builds as three programs, 0.19 s
 * as one). A driver that compiles every kernel of a program at its build keeps them apart. */
static const char *const arith_family[] = {"add", "sub", "mul", "div"};
static const char *const activations[] = {"relu", "hard_swish", "hard_sigmoid", "sigmoid", "clip", "tanh",
                                          "leaky_relu"};

static bool in_arith_family(const clrun__ew_def *def, bool wide)
{
    if (def->result != CLRUN__EW_SAME)
        return false;
    for (size_t k = 0; k < sizeof arith_family / sizeof arith_family[0]; k++)
        if (strcmp(def->name, arith_family[k]) == 0)
            return true;
    for (size_t k = 0; wide && k < sizeof activations / sizeof activations[0]; k++)
        if (strcmp(def->name, activations[k]) == 0)
            return true;
    return false;
}

void clrun__ew_library_name(const clrun__ew_def *def, clrun_dtype data, clrun_dtype result, bool wide,
                            char *buf, size_t size)
{
    if (in_arith_family(def, wide))
        snprintf(buf, size, "ew_arith%s_%s", wide ? "_act" : "", clrun_dtype_name(data));
    else
        clrun__ew_function_name(def, data, result, buf, size); /* "ew_gelu_f32", "ew_cast_u8_f32" */
}

static const char *input_type(const clrun__ew_def *def, int i, clrun_dtype data)
{
    return def->condition && i == 0 ? "uchar" : clrun__cl_type(data);
}

/* "__kernel void NAME(__global const T *in0, ..., __global R *out" */
static void emit_kernel_head(clrun__strbuf *b, const clrun__ew_def *def, clrun_dtype data,
                             clrun_dtype result, const char *variant)
{
    char name[96];
    clrun__ew_kernel_name(def, data, result, variant, name, sizeof name);
    clrun__strbuf_printf(b, "__kernel void %s(", name);
    for (int i = 0; i < def->arity; i++)
        clrun__strbuf_printf(b, "__global const %s *in%d, ", input_type(def, i, data), i);
    clrun__strbuf_printf(b, "__global %s *out", clrun__cl_type(result));
}

static void emit_params(clrun__strbuf *b, const clrun__ew_def *def, clrun_dtype data)
{
    for (int p = 0; p < def->param_count; p++)
        clrun__strbuf_printf(b, ", const %s p%d", compute_type(data), p);
}

/* "out[I] = clrun_canon_f32(ew_add_f32(in0[o0], in1[o1], p0));": each input read at the
 * output's index (own_index) or at its offset o<k>, the result through the store function into
 * out[index]. f16 operands are read with vload_half, an f16 result written by clrun_store_f16
 * (kernels/ew_functions.cl: vstore_half_rte, rounding to nearest even once, NaN canonical). */
static void emit_assign(clrun__strbuf *b, const clrun__ew_def *def, clrun_dtype data,
                        clrun_dtype result, bool own_index, const char *index)
{
    char name[64];
    clrun__ew_function_name(def, data, result, name, sizeof name);
    if (result == CLRUN_F16)
        clrun__strbuf_printf(b, "%s((%s(", data == CLRUN_F64 ? "clrun_store_f16_f64" : "clrun_store_f16",
                             name);
    else if (result == CLRUN_BF16) /* rounded to nearest even once, NaN kept */
        clrun__strbuf_printf(b, "out[%s] = clrun_f32_to_bf16((%s(", index, name);
    else
        clrun__strbuf_printf(b, "out[%s] = %s(%s(", index,
                             clrun__ew_store_function(value_dtype(data, result)), name);
    for (int i = 0; i < def->arity; i++) {
        bool half = data == CLRUN_F16 && !(def->condition && i == 0);
        char at[16];
        snprintf(at, sizeof at, own_index ? "i" : "o%d", i);
        if (half)
            clrun__strbuf_printf(b, "%svload_half(%s, in%d)", i ? ", " : "", at, i);
        else if (data == CLRUN_BF16 && !(def->condition && i == 0))
            clrun__strbuf_printf(b, "%sclrun_bf16_to_f32(in%d[%s])", i ? ", " : "", i, at);
        else
            clrun__strbuf_printf(b, "%sin%d[%s]", i ? ", " : "", i, at);
    }
    for (int p = 0; p < def->param_count; p++)
        clrun__strbuf_printf(b, ", p%d", p);
    if (result == CLRUN_F16)
        clrun__strbuf_printf(b, ")), %s, out);\n", index);
    else if (result == CLRUN_BF16)
        clrun__strbuf_printf(b, ")));\n");
    else
        clrun__strbuf_printf(b, "));\n");
}

/* The assignment under "if (WHOLE_GROUP(n)) ... else if (i < n) ...", the same text twice: with
 * the two tests in one condition POCL vectorizes the loop over a group's work-items with every
 * load and store masked and the indices computed as vectors (SiLU over 401,408 elements: 142
 * us; 109 with a branch of its own for whole groups, whose loop has no mask). `whole` and
 * `inside` are the two conditions' texts. */
static void emit_checked_assign(clrun__strbuf *b, const clrun__ew_def *def, clrun_dtype data,
                                clrun_dtype result, bool own_index, const char *index,
                                const char *whole, const char *inside, const char *indent)
{
    clrun__strbuf_printf(b, "%sif (%s)\n%s    ", indent, whole, indent);
    emit_assign(b, def, data, result, own_index, index);
    clrun__strbuf_printf(b, "%selse if (%s)\n%s    ", indent, inside, indent);
    emit_assign(b, def, data, result, own_index, index);
}

static void emit_flat(clrun__strbuf *b, const clrun__ew_def *def, clrun_dtype data, clrun_dtype result)
{
    emit_kernel_head(b, def, data, result, "");
    clrun__strbuf_printf(b, ", const ulong n");
    emit_params(b, def, data);
    clrun__strbuf_printf(b, ")\n{\n    const size_t i = get_global_id(0);\n");
    emit_checked_assign(b, def, data, result, true, "i", "WHOLE_GROUP(n)", "i < n", "    ");
    clrun__strbuf_printf(b, "}\n");
}

/* In a binary broadcast kernel: operand `row` along the rows (stride 1), the other constant
 * along them (a per-channel scale, a bias): with the strides known, the compiler loads
 * vectors, not gathers. */
static void emit_row_and_constant(clrun__strbuf *b, const clrun__ew_def *def, clrun_dtype data,
                                  clrun_dtype result, int row)
{
    clrun__strbuf_printf(b, "    if (s00 == %d && s10 == %d) {\n"
                            "        const ulong o0 = %si1 * s01 + i2 * s02, o1 = %si1 * s11 + i2 * s12;\n",
                         row == 0, row == 1, row == 0 ? "i0 + " : "", row == 1 ? "i0 + " : "");
    emit_checked_assign(b, def, data, result, false, "(i2 * n1 + i1) * n0 + i0", "WHOLE_GROUP(n0)", "i0 < n0",
                        "        ");
    clrun__strbuf_printf(b, "        return;\n    }\n");
}

static void emit_broadcast3(clrun__strbuf *b, const clrun__ew_def *def, clrun_dtype data,
                            clrun_dtype result)
{
    emit_kernel_head(b, def, data, result, "_bc");
    clrun__strbuf_printf(b, ", const ulong n0, const ulong n1");
    for (int i = 0; i < def->arity; i++)
        clrun__strbuf_printf(b, ", const ulong s%d0, const ulong s%d1, const ulong s%d2", i, i, i);
    emit_params(b, def, data);
    /* as in emit_flat, a work-group wholly inside the row skips the per-element check, so that
     * POCL vectorizes the loop over its work-items */
    clrun__strbuf_printf(b, ")\n{\n    const ulong i0 = get_global_id(0);\n"
                            "    const ulong i1 = get_global_id(1), i2 = get_global_id(2);\n");
    if (def->arity == 2) {
        emit_row_and_constant(b, def, data, result, 0);
        emit_row_and_constant(b, def, data, result, 1);
    }
    for (int i = 0; i < def->arity; i++)
        clrun__strbuf_printf(b, "    const ulong o%d = i0 * s%d0 + i1 * s%d1 + i2 * s%d2;\n", i, i, i, i);
    emit_checked_assign(b, def, data, result, false, "(i2 * n1 + i1) * n0 + i0", "WHOLE_GROUP(n0)", "i0 < n0",
                        "    ");
    clrun__strbuf_printf(b, "}\n");
}

/* A binary broadcast of one operand along rows (stride 1) and the other constant along them (a
 * per-channel scale or bias), a work-item per block of a row: the loop over the row is the
 * work-item's own, which a CPU compiler vectorizes, and the work-groups are one item whatever the
 * row's length, so POCL compiles the kernel once (groups as long as the rows compiled it once per
 * length: MobileNetV3-small's squeeze-and-excitation scales over rows of 256, 196 and 49, about
 * 0.1 s each on an empty cache). Work-item (block, i1, i2) over rows of n0 in blocks of `block`.
 * The same expression per element as _bc: the same bits. */
static void emit_rows(clrun__strbuf *b, const clrun__ew_def *def, clrun_dtype data, clrun_dtype result)
{
    clrun__strbuf_printf(b, "#ifndef ROWS_CHUNK\n#define ROWS_CHUNK 16\n#endif\n");
    emit_kernel_head(b, def, data, result, "_rows");
    clrun__strbuf_printf(b, ", const ulong n0, const ulong n1, const ulong block, const int row, "
                            "const ulong s01, const ulong s02, const ulong s11, const ulong s12");
    emit_params(b, def, data);
    clrun__strbuf_printf(b, ")\n{\n    const ulong i1 = get_global_id(1), i2 = get_global_id(2);\n"
                            "    const ulong first = get_global_id(0) * block, end = min(first + block, n0);\n"
                            "    const ulong at = (i2 * n1 + i1) * n0, b0 = i1 * s01 + i2 * s02, "
                            "b1 = i1 * s11 + i2 * s12;\n");
    /* In chunks of ROWS_CHUNK, the row operand's elements copied into private memory before
     * any is stored: the output may be that operand itself (an executor's in-place scale), and a
     * loop that read and wrote global memory in turn would not vectorize where the two alias.
     * half cannot be declared without cl_khr_fp16: those rows go an element at a time. */
    for (int row = 0; row < 2; row++) {
        const char *at_row = row == 0 ? "o0" : "o1", *other = row == 0 ? "o1" : "o0";
        clrun__strbuf_printf(b, "    %sif (row == %d) {\n        ulong i0 = first;\n", row ? "else " : "", row);
        if (data != CLRUN_F16) {
            clrun__strbuf_printf(b, "        for (; i0 + ROWS_CHUNK <= end; i0 += ROWS_CHUNK) {\n"
                                    "            %s chunk[ROWS_CHUNK];\n"
                                    "            for (int j = 0; j < ROWS_CHUNK; j++)\n"
                                    "                chunk[j] = in%d[b%d + i0 + j];\n"
                                    "            const %s *in%d = chunk;\n"
                                    "            for (int j = 0; j < ROWS_CHUNK; j++) {\n"
                                    "                const ulong %s = j, %s = b%d;\n                ",
                                 clrun__cl_type(data), row, row, clrun__cl_type(data), row, at_row, other,
                                 1 - row);
            emit_assign(b, def, data, result, false, "at + i0 + j");
            clrun__strbuf_printf(b, "            }\n        }\n");
        }
        clrun__strbuf_printf(b, "        for (; i0 < end; i0++) {\n"
                                "            const ulong o0 = b0%s, o1 = b1%s;\n            ",
                             row == 0 ? " + i0" : "", row == 1 ? " + i0" : "");
        emit_assign(b, def, data, result, false, "at + i0");
        clrun__strbuf_printf(b, "        }\n    }\n");
    }
    clrun__strbuf_printf(b, "}\n");
}

static void emit_broadcast_n(clrun__strbuf *b, const clrun__ew_def *def, clrun_dtype data,
                             clrun_dtype result)
{
    emit_kernel_head(b, def, data, result, "_bcn");
    clrun__strbuf_printf(b, ", const ulong n, __global const ulong *table");
    emit_params(b, def, data);
    clrun__strbuf_printf(b, ")\n{\n    const ulong i = get_global_id(0);\n    if (i >= n)\n"
                            "        return;\n    const uint rank = (uint)table[0];\n    ulong rem = i");
    for (int k = 0; k < def->arity; k++)
        clrun__strbuf_printf(b, ", o%d = 0", k);
    clrun__strbuf_printf(b, ";\n    for (uint d = rank; d-- > 0;) {\n        const ulong dim = table[1 + d];\n"
                            "        const ulong c = rem %% dim;\n        rem /= dim;\n");
    for (int k = 0; k < def->arity; k++)
        clrun__strbuf_printf(b, "        o%d += c * table[1 + %d * rank + d];\n", k, k + 1);
    clrun__strbuf_printf(b, "    }\n    ");
    emit_assign(b, def, data, result, false, "i");
    clrun__strbuf_printf(b, "}\n");
}

/* One op's function and unfused kernels (_rows with `rows`). */
static void emit_library_op(clrun__strbuf *b, const clrun__ew_def *def, clrun_dtype data,
                            clrun_dtype result, bool rows)
{
    clrun__ew_emit_function(b, def, data, result);
    emit_flat(b, def, data, result);
    if (def->arity > 1 && def->result != CLRUN__EW_CAST) {
        emit_broadcast3(b, def, data, result);
        emit_broadcast_n(b, def, data, result);
        if (rows && def->arity == 2)
            emit_rows(b, def, data, result);
    }
}

char *clrun__ew_library_source(const clrun__ew_def *def, clrun_dtype data, clrun_dtype result,
                               bool wide, bool rows, bool fp64)
{
    clrun__strbuf b = {0};
    clrun__ew_emit_prelude(&b, fp64);
    if (!in_arith_family(def, wide)) {
        emit_library_op(&b, def, data, result, rows);
        return clrun__strbuf_take(&b);
    }
    /* the family's members in the table's order, whichever of them asks: the same text */
    size_t count = 0;
    const clrun__ew_def *defs = clrun__ew_defs(&count);
    for (size_t k = 0; k < count; k++)
        if (in_arith_family(&defs[k], wide) &&
            (strcmp(defs[k].name, def->name) == 0 || clrun__ew_expression(&defs[k], data) != NULL))
            emit_library_op(&b, &defs[k], data, result, rows);
    return clrun__strbuf_take(&b);
}
