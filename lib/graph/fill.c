/* The deterministic fill of constants: seeded values with the same bits on every machine. */
#include "graph/graph.h"

#include <math.h>
#include <string.h>

#include "core/error.h"
#include "core/util.h"
#include "graph/types.h"

/* Fill parameters that describe a real distribution for the dtype. */
clrun_status clrun__check_fill(clrun_graph *graph, const char *name, clrun_dtype dtype,
                               clrun_fill fill, double a, double b)
{
    switch (fill) {
    case CLRUN_FILL_ZEROS:
    case CLRUN_FILL_ONES:
        return CLRUN_OK;
    case CLRUN_FILL_UNIFORM:
    case CLRUN_FILL_NORMAL:
        break;
    default:
        return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT, "'%s': unknown fill %d", name,
                          (int)fill);
    }
    if (!isfinite(a) || !isfinite(b))
        return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT,
                          "'%s': fill parameters must be finite", name);
    if (fill == CLRUN_FILL_NORMAL) {
        if (!clrun__dtype_is_float(dtype))
            return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT,
                              "'%s': normal fill needs a float dtype, not %s", name,
                              clrun_dtype_name(dtype));
        if (b < 0)
            return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT,
                              "'%s': normal(mean, std) needs std >= 0, got %g", name, b);
        return CLRUN_OK;
    }
    if (!(a < b))
        return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT,
                          "'%s': uniform(a, b) needs a < b, got a=%g b=%g", name, a, b);
    if ((dtype == CLRUN_I32 || dtype == CLRUN_I64) &&
        (a != floor(a) || b != floor(b) || a < (double)INT32_MIN || b > (double)INT32_MAX + 1.0))
        return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT,
                          "'%s': uniform bounds of an %s constant must be integers in "
                          "[-2147483648, 2147483648], got a=%g b=%g",
                          name, clrun_dtype_name(dtype), a, b);
    double lo, hi;
    clrun__int_range(dtype, &lo, &hi);
    if (clrun__dtype_is_int(dtype) && dtype != CLRUN_I32 && dtype != CLRUN_I64 &&
        (a != floor(a) || b != floor(b) || a < lo || b > hi + 1.0 || a < (double)INT32_MIN ||
         b > (double)INT32_MAX + 1.0))
        return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT,
                          "'%s': uniform bounds of a %s constant must be integers in [%.0f, %.0f], "
                          "got a=%g b=%g", name, clrun_dtype_name(dtype),
                          lo < (double)INT32_MIN ? (double)INT32_MIN : lo,
                          hi + 1.0 > (double)INT32_MAX + 1.0 ? (double)INT32_MAX + 1.0 : hi + 1.0,
                          a, b);
    if (dtype == CLRUN_BOOL && (a != 0 || b != 2))
        return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT,
                          "'%s': a uniform bool constant is uniform(0, 2), got a=%g b=%g", name,
                          a, b);
    return CLRUN_OK;
}

/* ---- deterministic fill ----
 *
 * Draw d of element i of a constant with seed s is 64 random bits from splitmix64's output
 * function applied to a counter: mix(mix(s) + (16 i + d + 1) * golden); uniform takes draw 0,
 * normal draws 0..11. Counter-based, so any element can be
 * computed alone (and in parallel) and the values do not depend on the order of generation.
 * Everything up to the final scaling is integer arithmetic; the scaling is one IEEE multiply and
 * one add in double (each correctly rounded everywhere), then one rounding to the element type.
 * The product goes through a volatile so that no compiler fuses multiply and add into an FMA
 * (GCC does across statements under -ffp-contract=fast, the default outside ISO modes; an FMA
 * rounds once and would change the last bit on machines that have one), and the sum through
 * another so that x87's extended precision cannot round twice differently. No libm call is
 * involved, so every machine gets the same bits. */


static uint64_t element_bits(uint64_t key, uint64_t index, uint64_t draw)
{
    return clrun__splitmix64_mix(key + (index * 16 + draw + 1) * CLRUN__GOLDEN_GAMMA);
}

/* Uniform in [0, 1) with 24 bits: exact in float and double. */
#define UNIT_BITS 24
#define UNIT_SCALE (1.0 / 16777216.0)

/* The element's value in double, before rounding to the dtype. Normal: Irwin–Hall, the sum of
 * 12 uniforms minus 6 (mean 0, variance 1, tails cut at ±6), summed as integers. */
static double fill_value(const clrun__tensor *tensor, uint64_t key, uint64_t index)
{
    if (tensor->fill == CLRUN_FILL_ZEROS)
        return 0.0;
    if (tensor->fill == CLRUN_FILL_ONES)
        return 1.0;
    if (tensor->fill == CLRUN_FILL_UNIFORM) {
        double unit = (double)(element_bits(key, index, 0) >> (64 - UNIT_BITS)) * UNIT_SCALE;
        double span = tensor->fill_b - tensor->fill_a;
        volatile double scaled = span * unit;
        volatile double value = tensor->fill_a + scaled; /* rounded to double even on x87 */
        return value;
    }
    int64_t sum = 0;
    for (uint64_t draw = 0; draw < 12; draw++)
        sum += (int64_t)(element_bits(key, index, draw) >> (64 - UNIT_BITS));
    double standard = (double)(sum - 6 * (1 << UNIT_BITS)) * UNIT_SCALE;
    volatile double scaled = tensor->fill_b * standard;
    volatile double value = tensor->fill_a + scaled;
    return value;
}

/* Uniform integer in [a, b): the top 32 bits scaled to the range by a 64-bit multiply. */
static int32_t fill_int(const clrun__tensor *tensor, uint64_t key, uint64_t index)
{
    if (tensor->fill != CLRUN_FILL_UNIFORM)
        return tensor->fill == CLRUN_FILL_ONES ? 1 : 0;
    int64_t low = (int64_t)tensor->fill_a, high = (int64_t)tensor->fill_b;
    uint64_t range = (uint64_t)(high - low); /* 1 to 2^32 */
    uint64_t draw = element_bits(key, index, 0) >> 32;
    return (int32_t)(low + (int64_t)((draw * range) >> 32));
}

void clrun__constant_values_range(const clrun__tensor *tensor, uint64_t first, uint64_t count,
                                  void *out)
{
    size_t size = clrun_dtype_size(tensor->type.dtype);
    if (tensor->data) {
        memcpy(out, (const char *)tensor->data + first * size, (size_t)(count * size));
        return;
    }
    uint64_t key = clrun__splitmix64_mix(tensor->seed);
    for (uint64_t n = 0; n < count; n++) {
        uint64_t i = first + n;
        char *slot = (char *)out + n * size;
        clrun_dtype dtype = tensor->type.dtype;
        double value = clrun__dtype_is_float(dtype) ? fill_value(tensor, key, i) : fill_int(tensor, key, i);
        clrun__dtype_from_double(dtype, value, slot);
    }
}

void clrun__constant_values(const clrun__tensor *tensor, void *out)
{
    clrun__constant_values_range(tensor, 0, clrun_tensor_elements(&tensor->type), out);
}

clrun_status clrun_fill_values(const clrun_tensor_type *type, clrun_fill fill, double a, double b,
                               uint64_t seed, void *out, uint64_t bytes)
{
    if (type == NULL || out == NULL)
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "clrun_fill_values: %s is NULL",
                                type ? "out" : "type");
    char reason[256];
    clrun_status status = clrun__type_check(type, reason, sizeof reason);
    if (status != CLRUN_OK)
        return clrun__error_set(NULL, status, "clrun_fill_values: %s", reason);
    if (bytes != clrun_tensor_bytes(type)) {
        char text[CLRUN__TYPE_TEXT];
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_SIZE,
                                "clrun_fill_values: %s holds %llu bytes, not %llu",
                                clrun__type_format(type, text, sizeof text),
                                (unsigned long long)clrun_tensor_bytes(type),
                                (unsigned long long)bytes);
    }
    status = clrun__check_fill(NULL, "clrun_fill_values", type->dtype, fill, a, b);
    if (status != CLRUN_OK)
        return status;
    clrun__tensor tensor = {.type = *type, .kind = CLRUN__TENSOR_CONSTANT, .fill = fill,
                            .fill_a = a, .fill_b = b, .seed = seed};
    clrun__constant_values(&tensor, out);
    return CLRUN_OK;
}
