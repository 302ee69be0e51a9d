/* Operators that never reach the device: Constant, Shape, Size (every shape is known at load),
 * ConstantOfShape and Range (from constant inputs). */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "onnx/map.h"

clrun_status clrun__map_host_only(clrun__imp *im, clrun__onode *n)
{
    for (int i = 0; i < n->n_in; i++)
        if (n->in[i] && !clrun__is_const(n->in[i]))
            return clrun__unsupported(im, "input %d '%s' must be known at load time (a constant, or "
                                      "computed from constants and shapes only)", i, n->proto->input[i]);
    return clrun__unsupported(im, "cannot be evaluated with these inputs");
}

static clrun_status list_tensor(clrun__imp *im, int elem, const void *values, size_t count,
                                size_t size, bool scalar, clrun__otensor *out)
{
    int64_t dim = (int64_t)count;
    if (!clrun__otensor_alloc(out, elem, scalar ? 0 : 1, &dim))
        return CLRUN__OOM(im);
    if (count)
        memcpy(out->data, values, count * size);
    return CLRUN_OK;
}

clrun_status clrun__map_constant(clrun__imp *im, clrun__onode *n)
{
    clrun__otensor t = {0};
    bool found = false;
    clrun_status s = clrun__oattr_tensor(im, n, "value", &t, &found);
    int given = found;
    if (s == CLRUN_OK && n->version >= 11 && clrun__oattr_find(im, n, "sparse_value"))
        return clrun__unsupported(im, "sparse_value is not supported");
    if (s == CLRUN_OK && n->version >= 12) {
        static const char *const strings[] = {"value_string", "value_strings"};
        for (int i = 0; i < 2; i++)
            if (clrun__oattr_find(im, n, strings[i])) {
                clrun__otensor_free(&t);
                return clrun__unsupported(im, "string constants are not supported");
            }
        const Onnx__AttributeProto *a;
        if ((a = clrun__oattr_find(im, n, "value_float")) != NULL && given++ == 0) {
            float f = a->f;
            s = list_tensor(im, CLRUN__ONNX_FLOAT, &f, 1, 4, true, &t);
        }
        if (s == CLRUN_OK && (a = clrun__oattr_find(im, n, "value_floats")) != NULL && given++ == 0)
            s = list_tensor(im, CLRUN__ONNX_FLOAT, a->floats, a->n_floats, 4, false, &t);
        if (s == CLRUN_OK && (a = clrun__oattr_find(im, n, "value_int")) != NULL && given++ == 0) {
            int64_t v = a->i;
            s = list_tensor(im, CLRUN__ONNX_INT64, &v, 1, 8, true, &t);
        }
        if (s == CLRUN_OK && (a = clrun__oattr_find(im, n, "value_ints")) != NULL && given++ == 0)
            s = list_tensor(im, CLRUN__ONNX_INT64, a->ints, a->n_ints, 8, false, &t);
    }
    if (s == CLRUN_OK && given != 1)
        s = clrun__invalid(im, "a Constant needs exactly one value attribute, it has %d", given);
    if (s != CLRUN_OK) {
        clrun__otensor_free(&t);
        return s;
    }
    return clrun__define_const(im, n, 0, &t);
}

clrun_status clrun__map_shape(clrun__imp *im, clrun__onode *n)
{
    if (n->n_in != 1 || n->in[0] == NULL)
        return clrun__invalid(im, "%s takes one input", n->op);
    const clrun__otensor *x = &n->in[0]->c;
    clrun__otensor out;
    if (strcmp(n->op, "Size") == 0) {
        int64_t count = (int64_t)clrun__otensor_count(x);
        clrun_status s = list_tensor(im, CLRUN__ONNX_INT64, &count, 1, 8, true, &out);
        return s == CLRUN_OK ? clrun__define_const(im, n, 0, &out) : s;
    }
    int64_t start = 0, end = x->rank;
    clrun_status s = CLRUN_OK;
    if (n->version >= 15) {
        s = clrun__oattr_int(im, n, "start", 0, &start);
        if (s == CLRUN_OK)
            s = clrun__oattr_int(im, n, "end", x->rank, &end);
    }
    if (s != CLRUN_OK)
        return s;
    /* Negative values count from the end; both are clamped to [0, rank]. */
    if (start < 0)
        start += x->rank;
    if (end < 0)
        end += x->rank;
    start = start < 0 ? 0 : start > x->rank ? x->rank : start;
    end = end < 0 ? 0 : end > x->rank ? x->rank : end;
    size_t count = end > start ? (size_t)(end - start) : 0;
    s = list_tensor(im, CLRUN__ONNX_INT64, x->dims + start, count, 8, false, &out);
    return s == CLRUN_OK ? clrun__define_const(im, n, 0, &out) : s;
}

clrun_status clrun__map_constant_of_shape(clrun__imp *im, clrun__onode *n)
{
    int64_t dims[CLRUN__ONNX_MAX_RANK];
    int rank;
    clrun_status s = clrun__const_ints(im, n, 0, false, dims, CLRUN__ONNX_MAX_RANK, &rank);
    if (s != CLRUN_OK)
        return s;
    for (int d = 0; d < rank; d++)
        if (dims[d] < 0)
            return clrun__invalid(im, "shape entry %d is %" PRId64, d, dims[d]);
    clrun__otensor value = {0}, out;
    bool found;
    s = clrun__oattr_tensor(im, n, "value", &value, &found);
    if (s != CLRUN_OK)
        return s;
    if (found && clrun__otensor_count(&value) != 1) {
        clrun__otensor_free(&value);
        return clrun__invalid(im, "attribute 'value' must hold one element");
    }
    int elem = found ? value.elem : CLRUN__ONNX_FLOAT;
    if (!clrun__otensor_alloc(&out, elem, rank, dims)) {
        clrun__otensor_free(&value);
        return clrun__host_result_failed(im, elem, rank, dims);
    }
    size_t size = clrun__onnx_elem_size(elem);
    uint64_t count = clrun__otensor_count(&out);
    for (uint64_t i = 0; found && i < count; i++)
        memcpy((unsigned char *)out.data + i * size, value.data, size);
    clrun__otensor_free(&value);
    return clrun__define_const(im, n, 0, &out);
}

clrun_status clrun__map_range(clrun__imp *im, clrun__onode *n)
{
    const clrun__otensor *t[3];
    for (int i = 0; i < 3; i++) {
        clrun_status s = clrun__const_input(im, n, i, false, &t[i]);
        if (s != CLRUN_OK)
            return s;
        if (clrun__otensor_count(t[i]) != 1 || t[i]->elem != t[0]->elem)
            return clrun__invalid(im, "start, limit and delta must be scalars of one type");
    }
    int elem = t[0]->elem;
    clrun__otensor out;
    int64_t count;
    if (clrun__onnx_elem_is_float(elem)) {
        double start = clrun__otensor_get_real(t[0], 0), limit = clrun__otensor_get_real(t[1], 0),
               delta = clrun__otensor_get_real(t[2], 0);
        if (delta == 0 || !isfinite(start) || !isfinite(limit) || !isfinite(delta))
            return clrun__invalid(im, "Range needs a finite start, limit and a delta other than 0");
        double c = ceil((limit - start) / delta);
        count = c > 0 ? (c > 1e12 ? -1 : (int64_t)c) : 0;
        if (count < 0 || !clrun__otensor_alloc(&out, elem, 1, &count))
            return clrun__unsupported(im, "a range of %g elements is too large", c);
        /* start + i * delta, as the ONNX reference computes it (no accumulated error). */
        for (int64_t i = 0; i < count; i++)
            clrun__otensor_set_real(&out, (uint64_t)i, start + (double)i * delta);
    } else {
        int64_t start = clrun__otensor_get_int(t[0], 0), limit = clrun__otensor_get_int(t[1], 0),
                delta = clrun__otensor_get_int(t[2], 0);
        if (delta == 0)
            return clrun__invalid(im, "Range needs a delta other than 0");
        /* exact: the span and the step as magnitudes in uint64 (no int64 overflow, no rounding) */
        bool up = delta > 0;
        uint64_t span = up ? (limit > start ? (uint64_t)limit - (uint64_t)start : 0)
                           : (start > limit ? (uint64_t)start - (uint64_t)limit : 0);
        uint64_t step = up ? (uint64_t)delta : 0 - (uint64_t)delta;
        uint64_t c = span == 0 ? 0 : (span - 1) / step + 1;
        count = c > (uint64_t)1e12 ? -1 : (int64_t)c;
        if (count < 0 || !clrun__otensor_alloc(&out, elem, 1, &count))
            return clrun__unsupported(im, "a range of %" PRIu64 " elements is too large", c);
        /* start + i * delta stays inside [start, limit): computed modulo 2^64, it is exact */
        for (int64_t i = 0; i < count; i++)
            clrun__otensor_set_int(&out, (uint64_t)i, (int64_t)((uint64_t)start + (uint64_t)i * (uint64_t)delta));
    }
    return clrun__define_const(im, n, 0, &out);
}
