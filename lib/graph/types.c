/* Tensor types: see types.h. Every dtype is one row of DTYPES, so a new dtype is one line here
 * (and kernels that take it). */
#include "graph/types.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define DTYPES(X)                                                                          \
    X(CLRUN_F32, "f32", 4, true) X(CLRUN_I32, "i32", 4, false) X(CLRUN_F16, "f16", 2, true)         \
    X(CLRUN_I64, "i64", 8, false) X(CLRUN_BOOL, "bool", 1, false) X(CLRUN_F64, "f64", 8, true) \
    X(CLRUN_I8, "i8", 1, false) X(CLRUN_U8, "u8", 1, false) X(CLRUN_I16, "i16", 2, false)          \
    X(CLRUN_U16, "u16", 2, false) X(CLRUN_U32, "u32", 4, false) X(CLRUN_U64, "u64", 8, false)  \
    X(CLRUN_BF16, "bf16", 2, true)

typedef struct dtype_row {
    clrun_dtype dtype;
    const char *name;
    size_t size;
    bool is_float;
    char kind; /* 'f' float, 's' signed integer, 'u' unsigned integer, 'b' bool */
} dtype_row;

#define DTYPE_ROW(DTYPE, NAME, SIZE, FLOAT)                                                        \
    {DTYPE, NAME, SIZE, FLOAT,                                                                     \
     FLOAT ? 'f' : DTYPE == CLRUN_BOOL ? 'b' : NAME[0] == 'u' ? 'u' : 's'},
static const dtype_row dtype_rows[] = {DTYPES(DTYPE_ROW)};
#define DTYPE_COUNT (sizeof dtype_rows / sizeof dtype_rows[0])

static const dtype_row *dtype_row_of(clrun_dtype dtype)
{
    for (size_t i = 0; i < DTYPE_COUNT; i++)
        if (dtype_rows[i].dtype == dtype)
            return &dtype_rows[i];
    return NULL;
}

const char *clrun_dtype_name(clrun_dtype dtype)
{
    const dtype_row *row = dtype_row_of(dtype);
    return row ? row->name : "?";
}

size_t clrun_dtype_size(clrun_dtype dtype)
{
    const dtype_row *row = dtype_row_of(dtype);
    return row ? row->size : 0;
}

bool clrun__dtype_is_float(clrun_dtype dtype)
{
    const dtype_row *row = dtype_row_of(dtype);
    return row && row->is_float;
}

bool clrun__dtype_is_int(clrun_dtype dtype)
{
    const dtype_row *row = dtype_row_of(dtype);
    return row && (row->kind == 's' || row->kind == 'u');
}

void clrun__int_range(clrun_dtype dtype, double *lo, double *hi)
{
    const dtype_row *row = dtype_row_of(dtype);
    int bits = row ? (int)row->size * 8 : 32;
    if (row && row->kind == 'u') {
        *lo = 0.0;
        *hi = ldexp(1.0, bits) - 1.0; /* 2^64 for u64 */
    } else {
        *lo = -ldexp(1.0, bits - 1);
        *hi = ldexp(1.0, bits - 1) - 1.0; /* 2^63 for i64 */
    }
}

bool clrun__dtype_parse(const char *text, size_t length, clrun_dtype *out)
{
    for (size_t i = 0; i < DTYPE_COUNT; i++) {
        const char *name = dtype_rows[i].name;
        if (strlen(name) == length && memcmp(name, text, length) == 0) {
            *out = dtype_rows[i].dtype;
            return true;
        }
    }
    return false;
}

uint64_t clrun_tensor_elements(const clrun_tensor_type *type)
{
    if (!type || type->rank < 0 || type->rank > CLRUN_MAX_DIMS)
        return 0;
    uint64_t elements = 1;
    for (int d = 0; d < type->rank; d++) {
        if (type->shape[d] < 1)
            return 0;
        uint64_t dim = (uint64_t)type->shape[d];
        if (elements > UINT64_MAX / dim)
            return 0;
        elements *= dim;
    }
    return elements;
}

uint64_t clrun_tensor_bytes(const clrun_tensor_type *type)
{
    uint64_t elements = clrun_tensor_elements(type);
    uint64_t size = type ? clrun_dtype_size(type->dtype) : 0;
    if (elements == 0 || size == 0 || elements > UINT64_MAX / size)
        return 0;
    return elements * size;
}

const char *clrun__type_format(const clrun_tensor_type *type, char *buf, size_t size)
{
    if (size == 0)
        return buf;
    size_t used = (size_t)snprintf(buf, size, "%s[", clrun_dtype_name(type->dtype));
    int rank = type->rank < 0 ? 0 : type->rank > CLRUN_MAX_DIMS ? CLRUN_MAX_DIMS : type->rank;
    for (int d = 0; d < rank && used < size; d++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", d ? ", " : "",
                                 (long long)type->shape[d]);
    if (used < size)
        snprintf(buf + used, size - used, "]");
    return buf;
}

bool clrun__shape_equal(const clrun_tensor_type *a, const clrun_tensor_type *b)
{
    if (a->rank != b->rank)
        return false;
    for (int d = 0; d < a->rank && d < CLRUN_MAX_DIMS; d++)
        if (a->shape[d] != b->shape[d])
            return false;
    return true;
}

bool clrun__type_equal(const clrun_tensor_type *a, const clrun_tensor_type *b)
{
    return a->dtype == b->dtype && clrun__shape_equal(a, b);
}

clrun_status clrun__type_check(const clrun_tensor_type *type, char *err, size_t errlen)
{
    if (dtype_row_of(type->dtype) == NULL) {
        snprintf(err, errlen, "unknown dtype %d", (int)type->dtype);
        return CLRUN_ERROR_INVALID_ARGUMENT;
    }
    if (type->rank < 0 || type->rank > CLRUN_MAX_DIMS) {
        snprintf(err, errlen, "rank %d is out of range (0 to %d)", type->rank, CLRUN_MAX_DIMS);
        return CLRUN_ERROR_INVALID_ARGUMENT;
    }
    for (int d = 0; d < type->rank; d++)
        if (type->shape[d] < 1) {
            snprintf(err, errlen, "dimension %d is %lld (must be at least 1)", d,
                     (long long)type->shape[d]);
            return CLRUN_ERROR_INVALID_SIZE;
        }
    if (clrun_tensor_bytes(type) == 0) {
        char text[CLRUN__TYPE_TEXT];
        snprintf(err, errlen, "%s is too large (its byte size overflows 64 bits)",
                 clrun__type_format(type, text, sizeof text));
        return CLRUN_ERROR_INVALID_SIZE;
    }
    return CLRUN_OK;
}

bool clrun_tensor_empty(const clrun_tensor_type *type)
{
    if (!type || dtype_row_of(type->dtype) == NULL || type->rank < 0 || type->rank > CLRUN_MAX_DIMS)
        return false;
    bool zero = false;
    for (int d = 0; d < type->rank; d++) {
        if (type->shape[d] < 0)
            return false;
        zero = zero || type->shape[d] == 0;
    }
    return zero;
}

clrun_status clrun__type_check_value(const clrun_tensor_type *type, char *err, size_t errlen)
{
    if (clrun_tensor_empty(type))
        return CLRUN_OK;
    for (int d = 0; dtype_row_of(type->dtype) && type->rank >= 0 && d < type->rank && d < CLRUN_MAX_DIMS; d++)
        if (type->shape[d] < 0) {
            snprintf(err, errlen, "dimension %d is %lld (must be at least 0; 0 makes the tensor empty)", d,
                     (long long)type->shape[d]);
            return CLRUN_ERROR_INVALID_SIZE;
        }
    return clrun__type_check(type, err, errlen);
}

uint64_t clrun__dims_product(const clrun_tensor_type *type, int from, int to)
{
    uint64_t n = 1;
    for (int i = from; i < to; i++)
        n *= (uint64_t)type->shape[i];
    return n;
}

uint16_t clrun__f32_to_f16(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    uint32_t sign = (bits >> 16) & 0x8000u;
    uint32_t exponent = (bits >> 23) & 0xFFu;
    uint32_t mantissa = bits & 0x7FFFFFu;
    if (exponent == 0xFF) /* inf stays inf; NaN keeps a quiet payload bit */
        return (uint16_t)(sign | 0x7C00u | (mantissa ? 0x200u | (mantissa >> 13) : 0));
    int32_t e = (int32_t)exponent - 127 + 15;
    if (e >= 31)
        return (uint16_t)(sign | 0x7C00u);
    if (e <= 0) {
        if (e < -10)
            return (uint16_t)sign;
        /* Subnormal: shift the mantissa with its implicit bit, round to nearest even. */
        uint32_t full = mantissa | 0x800000u;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t half = full >> shift;
        uint32_t rest = full & ((1u << shift) - 1);
        uint32_t midpoint = 1u << (shift - 1);
        if (rest > midpoint || (rest == midpoint && (half & 1)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = sign | ((uint32_t)e << 10) | (mantissa >> 13);
    uint32_t rest = mantissa & 0x1FFFu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1)))
        half++; /* a carry into the exponent is right, up to inf */
    return (uint16_t)half;
}

uint16_t clrun__f32_to_bf16(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x7FFFFFu)) /* NaN: the default quiet one */
        return 0x7FC0u;
    uint32_t rest = bits & 0xFFFFu, top = bits >> 16;
    if (rest > 0x8000u || (rest == 0x8000u && (top & 1)))
        top++; /* a carry into the exponent is right, up to inf */
    return (uint16_t)top;
}

float clrun__bf16_to_f32(uint16_t b)
{
    uint32_t bits = (uint32_t)b << 16;
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

float clrun__f16_to_f32(uint16_t half)
{
    uint32_t sign = (uint32_t)(half & 0x8000u) << 16;
    uint32_t exponent = (half >> 10) & 0x1Fu, mantissa = half & 0x3FFu, bits;
    if (exponent == 0x1F) {
        bits = sign | 0x7F800000u | (mantissa << 13);
    } else if (exponent != 0) {
        bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
    } else if (mantissa == 0) {
        bits = sign;
    } else { /* subnormal: normalise */
        uint32_t e = 113;
        while ((mantissa & 0x400u) == 0) {
            mantissa <<= 1;
            e--;
        }
        bits = sign | (e << 23) | ((mantissa & 0x3FFu) << 13);
    }
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

void clrun__dtype_from_double(clrun_dtype dtype, double v, void *out)
{
    const dtype_row *row = dtype_row_of(dtype);
    if (row == NULL)
        return;
    if (row->kind == 'f') {
        float f = (float)v;
        uint16_t h = dtype == CLRUN_BF16 ? clrun__f32_to_bf16(f) : clrun__f32_to_f16(f);
        memcpy(out, dtype == CLRUN_F64 ? (const void *)&v : row->size == 2 ? (const void *)&h : &f,
               row->size);
        return;
    }
    if (row->kind == 'b') {
        *(uint8_t *)out = v != 0;
        return;
    }
    double lo, hi;
    clrun__int_range(dtype, &lo, &hi);
    double t = v != v ? 0 : v <= lo ? lo : v >= hi ? hi : trunc(v);
    /* hi is 2^63 for i64 and 2^64 for u64: those clamp to the type's top. */
    uint64_t bits = row->kind == 'u' ? (t >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)t)
                    : t >= 9223372036854775807.0 ? (uint64_t)INT64_MAX
                                                 : (uint64_t)(int64_t)t;
    switch (row->size) { /* in range, so the narrowing keeps the value */
    case 1: *(uint8_t *)out = (uint8_t)bits; break;
    case 2: { uint16_t x = (uint16_t)bits; memcpy(out, &x, 2); break; }
    case 4: { uint32_t x = (uint32_t)bits; memcpy(out, &x, 4); break; }
    default: memcpy(out, &bits, 8); break;
    }
}

bool clrun__dtype_holds(clrun_dtype dtype, double v)
{
    const dtype_row *row = dtype_row_of(dtype);
    if (row == NULL)
        return false;
    switch (row->kind) {
    case 'f':
        if (v != v || dtype == CLRUN_F64)
            return true;
        if ((double)(float)v != v)
            return false;
        if (dtype == CLRUN_BF16)
            return (double)clrun__bf16_to_f32(clrun__f32_to_bf16((float)v)) == v;
        return dtype == CLRUN_F32 || (double)clrun__f16_to_f32(clrun__f32_to_f16((float)v)) == v;
    case 'b': return v == 0 || v == 1;
    default: {
        double lo, hi;
        clrun__int_range(dtype, &lo, &hi);
        return v == trunc(v) && v >= lo && v < hi + 1.0; /* hi + 1 rounds to 2^63, 2^64: right */
    }
    }
}
