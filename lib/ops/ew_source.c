/* Generated elementwise OpenCL C: see ew_source.h. Each element function is the table's
 * expression inside the macros of its dtype (T, F, CLIP, ...), so the text of an op's function
 * is the same in every program that calls it. */
#include "ops/ew_source.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "device/program.h"

static const clrun_dtype ew_dtypes[] = {CLRUN_F32, CLRUN_F64, CLRUN_I32, CLRUN_I64, CLRUN_BOOL};
#define EW_DTYPE_COUNT (sizeof ew_dtypes / sizeof ew_dtypes[0])

const char *clrun__cl_type(clrun_dtype dtype)
{
    switch (dtype) {
    case CLRUN_F32: return "float";
    case CLRUN_F64: return "double";
    case CLRUN_I32: return "int";
    case CLRUN_I64: return "long";
    case CLRUN_BOOL: return "uchar";
    default: return "void";
    }
}

static const char *unsigned_type(clrun_dtype dtype) { return dtype == CLRUN_I64 ? "ulong" : "uint"; }

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
    const char *name = clrun_dtype_name(dtype);
    clrun__strbuf_printf(b, "#define T %s\n", clrun__cl_type(dtype));
    if (dtype == CLRUN_F32 || dtype == CLRUN_F64) {
        clrun__strbuf_printf(b, "#define F(c) c%s\n", dtype == CLRUN_F32 ? "##f" : "");
        bool f32 = dtype == CLRUN_F32;
        clrun__strbuf_printf(b, "#define ERF %s\n#define ERFC %s\n", f32 ? "clrun_erf_f32" : "erf",
                             f32 ? "clrun_erfc_f32" : "erfc");
        clrun__strbuf_printf(b, "#define EXP %s\n#define TANH %s\n", f32 ? "clrun_exp_f32" : "exp",
                             f32 ? "clrun_tanh_f32" : "tanh");
    }
    if (dtype == CLRUN_I32 || dtype == CLRUN_I64) {
        const char *u = unsigned_type(dtype);
        clrun__strbuf_printf(b, "#define UT %s\n#define AS_T as_%s\n#define AS_U as_%s\n", u,
                             clrun__cl_type(dtype), u);
        clrun__strbuf_printf(b, "#define IDIV clrun_div_%s\n#define IPOW clrun_pow_%s\n", name, name);
    }
    if (dtype != CLRUN_BOOL)
        clrun__strbuf_printf(b, "#define CLIP clrun_clip_%s\n#define MOD clrun_mod_%s\n", name, name);
}

static void emit_dtype_unmacros(clrun__strbuf *b)
{
    clrun__strbuf_printf(b, "#undef T\n#undef F\n#undef ERF\n#undef ERFC\n#undef EXP\n#undef TANH\n"
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
 * saturating into integers, NaN to 0), integers narrowed by wrapping, anything nonzero to true. */
static const char *cast_expression(clrun_dtype from, clrun_dtype to)
{
    bool from_float = from == CLRUN_F32 || from == CLRUN_F64;
    if (to == CLRUN_BOOL)
        return "(uchar)(x != 0)";
    if (from == CLRUN_BOOL)
        return to == CLRUN_F32 ? "x != 0 ? 1.0f : 0.0f" : to == CLRUN_F64 ? "x != 0 ? 1.0 : 0.0"
                                                                          : "(T_OUT)(x != 0)";
    if (from == to)
        return "x";
    switch (to) {
    case CLRUN_F32: return "convert_float(x)";
    case CLRUN_F64: return "convert_double(x)";
    /* NaN gives 0, as OpenCL's _sat says; said again because not every implementation does */
    case CLRUN_I32: return from_float ? "isnan(x) ? 0 : convert_int_sat_rtz(x)" : "as_int((uint)as_ulong(x))";
    case CLRUN_I64: return from_float ? "isnan(x) ? 0L : convert_long_sat_rtz(x)" : "(long)x";
    default: return "x";
    }
}

void clrun__ew_emit_function(clrun__strbuf *b, const clrun__ew_def *def, clrun_dtype data,
                             clrun_dtype result)
{
    static const char *const operands[3][3] = {{"x"}, {"a", "b"}, {"c", "a", "b"}};
    char name[64];
    clrun__ew_function_name(def, data, result, name, sizeof name);
    const char *expression = def->result == CLRUN__EW_CAST ? cast_expression(data, result)
                                                           : clrun__ew_expression(def, data);
    emit_dtype_macros(b, data);
    clrun__strbuf_printf(b, "#define T_OUT %s\n", clrun__cl_type(result));
    clrun__strbuf_printf(b, "CLRUN_INLINE %s %s(", clrun__cl_type(result), name);
    for (int i = 0; i < def->arity; i++)
        clrun__strbuf_printf(b, "%sconst %s %s", i ? ", " : "",
                             def->condition && i == 0 ? "uchar" : clrun__cl_type(data),
                             operands[def->arity - 1][i]);
    for (int p = 0; p < def->param_count; p++)
        clrun__strbuf_printf(b, ", const %s p%d", clrun__cl_type(data), p);
    clrun__strbuf_printf(b, ")\n{\n    return (T_OUT)(%s);\n}\n#undef T_OUT\n", expression ? expression : "0");
    emit_dtype_unmacros(b);
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
    if (value <= -2147483648.0)
        clrun__strbuf_printf(b, "(-2147483647 - 1)");
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

void clrun__ew_library_name(const clrun__ew_def *def, char *buf, size_t size)
{
    snprintf(buf, size, "ew_%s", def->name);
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
        clrun__strbuf_printf(b, ", const %s p%d", clrun__cl_type(data), p);
}

/* "clrun_canon_f32(ew_add_f32(in0[o0], in1[o1], p0))": each input read at the output's index
 * (own_index) or at its offset o<k>, the result through the store function. */
static void emit_call(clrun__strbuf *b, const clrun__ew_def *def, clrun_dtype data,
                      clrun_dtype result, bool own_index)
{
    char name[64];
    clrun__ew_function_name(def, data, result, name, sizeof name);
    clrun__strbuf_printf(b, "%s(%s(", clrun__ew_store_function(result), name);
    for (int i = 0; i < def->arity; i++) {
        if (own_index)
            clrun__strbuf_printf(b, "%sin%d[i]", i ? ", " : "", i);
        else
            clrun__strbuf_printf(b, "%sin%d[o%d]", i ? ", " : "", i, i);
    }
    for (int p = 0; p < def->param_count; p++)
        clrun__strbuf_printf(b, ", p%d", p);
    clrun__strbuf_printf(b, "))");
}

static void emit_flat(clrun__strbuf *b, const clrun__ew_def *def, clrun_dtype data, clrun_dtype result)
{
    emit_kernel_head(b, def, data, result, "");
    clrun__strbuf_printf(b, ", const ulong n");
    emit_params(b, def, data);
    clrun__strbuf_printf(b, ")\n{\n    const size_t i = get_global_id(0);\n"
                            "    if (WHOLE_GROUP(n) || i < n)\n        out[i] = ");
    emit_call(b, def, data, result, true);
    clrun__strbuf_printf(b, ";\n}\n");
}

static void emit_broadcast3(clrun__strbuf *b, const clrun__ew_def *def, clrun_dtype data,
                            clrun_dtype result)
{
    emit_kernel_head(b, def, data, result, "_bc");
    clrun__strbuf_printf(b, ", const ulong n0, const ulong n1");
    for (int i = 0; i < def->arity; i++)
        clrun__strbuf_printf(b, ", const ulong s%d0, const ulong s%d1, const ulong s%d2", i, i, i);
    emit_params(b, def, data);
    clrun__strbuf_printf(b, ")\n{\n    const ulong i0 = get_global_id(0);\n    if (i0 >= n0)\n"
                            "        return;\n    const ulong i1 = get_global_id(1), i2 = get_global_id(2);\n");
    for (int i = 0; i < def->arity; i++)
        clrun__strbuf_printf(b, "    const ulong o%d = i0 * s%d0 + i1 * s%d1 + i2 * s%d2;\n", i, i, i, i);
    clrun__strbuf_printf(b, "    out[(i2 * n1 + i1) * n0 + i0] = ");
    emit_call(b, def, data, result, false);
    clrun__strbuf_printf(b, ";\n}\n");
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
    clrun__strbuf_printf(b, "    }\n    out[i] = ");
    emit_call(b, def, data, result, false);
    clrun__strbuf_printf(b, ";\n}\n");
}

static bool dtype_available(clrun_dtype dtype, bool fp64) { return dtype != CLRUN_F64 || fp64; }

char *clrun__ew_library_source(const clrun__ew_def *def, bool fp64)
{
    clrun__strbuf b = {0};
    clrun__ew_emit_prelude(&b, fp64);
    for (size_t i = 0; i < EW_DTYPE_COUNT; i++) {
        clrun_dtype data = ew_dtypes[i];
        if (!(def->dtypes & CLRUN__DT(data)) || !dtype_available(data, fp64))
            continue;
        if (def->result == CLRUN__EW_CAST) {
            for (size_t j = 0; j < EW_DTYPE_COUNT; j++) {
                clrun_dtype to = ew_dtypes[j];
                if (!dtype_available(to, fp64))
                    continue;
                clrun__ew_emit_function(&b, def, data, to);
                emit_flat(&b, def, data, to);
            }
            continue;
        }
        clrun_dtype result = def->result == CLRUN__EW_BOOL ? CLRUN_BOOL : data;
        clrun__ew_emit_function(&b, def, data, result);
        emit_flat(&b, def, data, result);
        if (def->arity > 1) {
            emit_broadcast3(&b, def, data, result);
            emit_broadcast_n(&b, def, data, result);
        }
    }
    return clrun__strbuf_take(&b);
}
