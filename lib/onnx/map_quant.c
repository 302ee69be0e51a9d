/* Linear quantization: QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear as
 * compositions of elementwise ops and reductions, in f32 as onnxruntime computes them:
 *   dequantize  y = (f32(x) - f32(zero_point)) · scale
 *   quantize    y = saturate(round_half_even(x / scale) + zero_point)
 * A per-axis scale (and zero point) of [C] is reshaped to broadcast along `axis`. Every value in
 * between is an integer of at most 2^24 in magnitude or the product of one with the scale, so
 * each float step is exact but the division and the final multiply, which ONNX's reference
 * rounds the same way. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "onnx/map.h"
#include "onnx/tensor.h"

/* The clrun dtype code of an element type as a cast's `to`. */
static clrun_attr cast_to(int elem)
{
    clrun_dtype dtype = CLRUN_F32;
    clrun__onnx_elem_dtype(elem, &dtype);
    return clrun__mk_int("to", (int64_t)dtype);
}

static clrun_status cast(clrun__imp *im, clrun__onode *n, clrun__value *x, int elem, int out,
                         clrun__value **r)
{
    if (x->c.elem == elem && out < 0) {
        *r = x;
        return CLRUN_OK;
    }
    clrun_attr to = cast_to(elem);
    return clrun__emit1(im, n, "cast", &x, 1, &to, 1, out, r);
}

/* The range of the integer element types a quantized tensor may have. */
static bool quant_range(int elem, double *lo, double *hi)
{
    switch (elem) {
    case CLRUN__ONNX_UINT8: *lo = 0, *hi = 255; return true;
    case CLRUN__ONNX_INT8: *lo = -128, *hi = 127; return true;
    default: return false;
    }
}

/* A scale or zero point v checked against x and made to broadcast with it: a scalar (or [1])
 * stays as it is; a [C] vector with C the size of x's dimension `axis` is reshaped to
 * [1, .., C, .., 1] of x's rank. */
static clrun_status per_axis(clrun__imp *im, clrun__onode *n, const clrun__value *x, clrun__value *v,
                             const char *what, int64_t axis, clrun__value **r)
{
    const clrun__otensor *c = &v->c;
    bool single = c->rank == 0 || (c->rank == 1 && c->dims[0] == 1);
    if (single) {
        *r = v;
        return CLRUN_OK;
    }
    if (c->rank != 1)
        return clrun__invalid(im, "the %s has rank %d: a scalar or a vector of one value per element "
                              "of the axis", what, c->rank);
    int rank = x->c.rank;
    if (axis < -rank || axis >= rank)
        return clrun__invalid(im, "axis %lld is out of range for the input's rank %d", (long long)axis,
                              rank);
    if (axis < 0)
        axis += rank;
    if (c->dims[0] != x->c.dims[axis])
        return clrun__invalid(im, "the %s has %lld values, the input's axis %lld has %lld elements",
                              what, (long long)c->dims[0], (long long)axis, (long long)x->c.dims[axis]);
    int64_t dims[CLRUN__ONNX_MAX_RANK];
    for (int d = 0; d < rank; d++)
        dims[d] = d == axis ? c->dims[0] : 1;
    return clrun__mv_reshape(im, n, v, rank, dims, -1, r);
}

/* The scale's and zero point's checks shared by both directions; *zp is NULL when absent. */
static clrun_status operands(clrun__imp *im, clrun__onode *n, int64_t *axis, clrun__value **scale,
                             clrun__value **zp)
{
    clrun_status s = clrun__need_inputs(im, n, 2);
    int64_t block = 0;
    *axis = 1;
    if (s == CLRUN_OK && n->version >= 13)
        s = clrun__oattr_int(im, n, "axis", 1, axis);
    if (s == CLRUN_OK && n->version >= 21) /* blocked quantization (opset 21) */
        s = clrun__oattr_int(im, n, "block_size", 0, &block);
    if (s == CLRUN_OK && block != 0)
        s = clrun__unsupported(im, "block_size %" PRId64 " (blocked quantization) is not supported", block);
    if (s != CLRUN_OK)
        return s;
    clrun__value *x = n->in[0];
    *zp = n->n_in > 2 ? n->in[2] : NULL;
    if (n->in[1]->c.elem != CLRUN__ONNX_FLOAT)
        return clrun__unsupported(im, "the scale is not float (float16 and bfloat16 scales are "
                                  "not supported)");
    if (*zp != NULL && (*zp)->c.rank != n->in[1]->c.rank)
        return clrun__invalid(im, "the zero point has rank %d, the scale %d: they must have the same "
                              "shape", (*zp)->c.rank, n->in[1]->c.rank);
    if (*zp != NULL && (*zp)->c.rank == 1 && (*zp)->c.dims[0] != n->in[1]->c.dims[0])
        return clrun__invalid(im, "the zero point has %lld values, the scale %lld",
                              (long long)(*zp)->c.dims[0], (long long)n->in[1]->c.dims[0]);
    if (n->version < 13 && n->in[1]->c.rank > 0 && !(n->in[1]->c.rank == 1 && n->in[1]->c.dims[0] == 1))
        return clrun__invalid(im, "opset %lld takes a scalar scale (per-axis scales came in opset 13)",
                              (long long)n->version);
    s = per_axis(im, n, x, n->in[1], "scale", *axis, scale);
    if (s == CLRUN_OK && *zp != NULL)
        s = per_axis(im, n, x, *zp, "zero point", *axis, zp);
    return s;
}

clrun_status clrun__map_dequantize(clrun__imp *im, clrun__onode *n)
{
    int64_t axis;
    clrun__value *scale, *zp, *x, *t;
    clrun_status s = operands(im, n, &axis, &scale, &zp);
    if (s != CLRUN_OK)
        return s;
    x = n->in[0];
    double lo, hi;
    if (!quant_range(x->c.elem, &lo, &hi) && x->c.elem != CLRUN__ONNX_INT32) {
        char name[32];
        return clrun__unsupported(im, "the input is %s: int8, uint8 or int32 is dequantized",
                                  clrun__onnx_elem_name(x->c.elem, name, sizeof name));
    }
    if (zp != NULL && zp->c.elem != x->c.elem)
        return clrun__invalid(im, "the zero point's type differs from the input's");
    s = cast(im, n, x, CLRUN__ONNX_FLOAT, -1, &t);
    if (s == CLRUN_OK && zp != NULL) {
        clrun__value *zf;
        s = cast(im, n, zp, CLRUN__ONNX_FLOAT, -1, &zf);
        if (s == CLRUN_OK)
            s = clrun__emit_binary(im, n, "sub", t, zf, -1, &t);
    }
    return s == CLRUN_OK ? clrun__emit_binary(im, n, "mul", t, scale, 0, NULL) : s;
}

/* saturate(round(xf / scale) + zf) as `elem`, into output `out` (or a temporary). zf may be
 * NULL (zero). */
static clrun_status quantize(clrun__imp *im, clrun__onode *n, clrun__value *xf, clrun__value *scale,
                             clrun__value *zf, int elem, int out, clrun__value **r)
{
    double lo = 0, hi = 255;
    quant_range(elem, &lo, &hi);
    clrun__value *t;
    clrun_attr bounds[2] = {clrun__mk_float("min", lo), clrun__mk_float("max", hi)};
    clrun_status s = clrun__emit_binary(im, n, "div", xf, scale, -1, &t);
    if (s == CLRUN_OK)
        s = clrun__emit_unary(im, n, "round", t, -1, &t);
    if (s == CLRUN_OK && zf != NULL)
        s = clrun__emit_binary(im, n, "add", t, zf, -1, &t);
    if (s == CLRUN_OK)
        s = clrun__emit1(im, n, "clip", &t, 1, bounds, 2, -1, &t);
    return s == CLRUN_OK ? cast(im, n, t, elem, out, r) : s;
}

clrun_status clrun__map_quantize(clrun__imp *im, clrun__onode *n)
{
    int64_t axis;
    clrun__value *scale, *zp, *xf, *zf = NULL;
    clrun_status s = operands(im, n, &axis, &scale, &zp);
    if (s != CLRUN_OK)
        return s;
    clrun__value *x = n->in[0];
    int elem = zp != NULL ? zp->c.elem : CLRUN__ONNX_UINT8;
    double lo, hi;
    char name[32];
    int64_t saturate = 1, output_dtype = 0;
    if (n->version >= 19) /* saturate (19) only concerns float8 outputs, refused below */
        s = clrun__oattr_int(im, n, "saturate", 1, &saturate);
    if (s == CLRUN_OK && n->version >= 21)
        s = clrun__oattr_int(im, n, "output_dtype", 0, &output_dtype);
    if (s != CLRUN_OK)
        return s;
    if (output_dtype != 0 && zp != NULL && output_dtype != zp->c.elem)
        return clrun__invalid(im, "output_dtype %" PRId64 " differs from the zero point's type", output_dtype);
    if (output_dtype != 0 && (output_dtype < 0 || output_dtype > INT32_MAX))
        return clrun__invalid(im, "output_dtype %" PRId64 " is not a data type", output_dtype);
    if (output_dtype != 0)
        elem = (int)output_dtype;
    if (!quant_range(elem, &lo, &hi))
        return clrun__unsupported(im, "the zero point is %s: quantizing to int8 or uint8 is supported",
                                  clrun__onnx_elem_name(elem, name, sizeof name));
    if (x->c.elem != CLRUN__ONNX_FLOAT && x->c.elem != CLRUN__ONNX_INT32)
        return clrun__unsupported(im, "the input is %s: float or int32 is quantized",
                                  clrun__onnx_elem_name(x->c.elem, name, sizeof name));
    s = cast(im, n, x, CLRUN__ONNX_FLOAT, -1, &xf);
    if (s == CLRUN_OK && zp != NULL)
        s = cast(im, n, zp, CLRUN__ONNX_FLOAT, -1, &zf);
    return s == CLRUN_OK ? quantize(im, n, xf, scale, zf, elem, 0, NULL) : s;
}

/* DynamicQuantizeLinear: uint8 with the scale and zero point of x's range extended to 0:
 *   scale = (max(0, max x) - min(0, min x)) / 255, zero point = saturate(round(-min / scale)). */
clrun_status clrun__map_dynamic_quantize(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 1);
    if (s != CLRUN_OK)
        return s;
    clrun__value *x = n->in[0];
    if (x->c.elem != CLRUN__ONNX_FLOAT) {
        char name[32];
        return clrun__unsupported(im, "the input is %s: float is quantized",
                                  clrun__onnx_elem_name(x->c.elem, name, sizeof name));
    }
    clrun__value *zero = clrun__scalar_value(im, CLRUN__ONNX_FLOAT, 0, 0);
    clrun__value *levels = clrun__scalar_value(im, CLRUN__ONNX_FLOAT, 255, 0);
    if (zero == NULL || levels == NULL)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    clrun_attr all = clrun__mk_int("keepdims", 0);
    clrun_attr bounds[2] = {clrun__mk_float("min", 0), clrun__mk_float("max", 255)};
    clrun__value *mn, *mx, *range, *scale, *zf;
    s = clrun__emit1(im, n, "reduce_min", &x, 1, &all, 1, -1, &mn);
    if (s == CLRUN_OK)
        s = clrun__emit1(im, n, "reduce_max", &x, 1, &all, 1, -1, &mx);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "minimum", mn, zero, -1, &mn);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "maximum", mx, zero, -1, &mx);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "sub", mx, mn, -1, &range);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "div", range, levels, 1, &scale);
    /* the zero point: qmin - min / scale, rounded and saturated */
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "div", mn, scale, -1, &zf);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "sub", zero, zf, -1, &zf);
    if (s == CLRUN_OK)
        s = clrun__emit_unary(im, n, "round", zf, -1, &zf);
    if (s == CLRUN_OK)
        s = clrun__emit1(im, n, "clip", &zf, 1, bounds, 2, -1, &zf);
    if (s == CLRUN_OK && clrun__out(im, n, 2) != NULL)
        s = cast(im, n, zf, CLRUN__ONNX_UINT8, 2, NULL);
    return s == CLRUN_OK ? quantize(im, n, x, scale, zf, CLRUN__ONNX_UINT8, 0, NULL) : s;
}
