/* Host evaluation: data movement (strided walks over any element size) and elementwise
 * arithmetic with broadcasting. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/host_eval.h"

bool clrun__broadcast_dims(int ra, const int64_t *a, int rb, const int64_t *b, int *rank,
                           int64_t *dims)
{
    int r = ra > rb ? ra : rb;
    if (r > CLRUN__ONNX_MAX_RANK)
        return false;
    for (int d = 0; d < r; d++) {
        int64_t x = d - (r - ra) >= 0 ? a[d - (r - ra)] : 1;
        int64_t y = d - (r - rb) >= 0 ? b[d - (r - rb)] : 1;
        if (x != y && x != 1 && y != 1)
            return false;
        dims[d] = x == 1 ? y : x;
    }
    *rank = r;
    return true;
}

/* Row-major strides (in elements) of x seen with the output's rank and dims: broadcast dims
 * (1 against more) get stride 0. */
static void broadcast_strides(const clrun__otensor *x, int rank, const int64_t *dims, int64_t *strides)
{
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        int xd = d - (rank - x->rank);
        int64_t size = xd >= 0 ? x->dims[xd] : 1;
        strides[d] = size == 1 && dims[d] != 1 ? 0 : s;
        s *= size;
    }
}

/* A walk over an output of rank/dims with one input offset per operand, advanced by strides. */
typedef struct walk {
    int rank;
    const int64_t *dims;
    int64_t idx[CLRUN__ONNX_MAX_RANK];
    int operands;
    int64_t strides[3][CLRUN__ONNX_MAX_RANK];
    int64_t offset[3];
} walk;

static void walk_next(walk *w)
{
    for (int d = w->rank - 1; d >= 0; d--) {
        w->idx[d]++;
        for (int k = 0; k < w->operands; k++)
            w->offset[k] += w->strides[k][d];
        if (w->idx[d] < w->dims[d])
            return;
        for (int k = 0; k < w->operands; k++)
            w->offset[k] -= w->strides[k][d] * w->dims[d];
        w->idx[d] = 0;
    }
}

/* Copies the elements of x at the walk's operand-0 offsets into out, in order. */
static void gather_walk(walk *w, const clrun__otensor *x, int64_t base, clrun__otensor *out)
{
    size_t size = clrun__onnx_elem_size(x->elem);
    uint64_t count = clrun__otensor_count(out);
    const unsigned char *src = x->data;
    unsigned char *dst = out->data;
    w->offset[0] = base;
    for (uint64_t i = 0; i < count; i++) {
        memcpy(dst + i * size, src + (size_t)w->offset[0] * size, size);
        walk_next(w);
    }
}

bool clrun__host_reshape(const clrun__otensor *x, int rank, const int64_t *dims, clrun__otensor *out)
{
    if (!clrun__otensor_alloc(out, x->elem, rank, dims))
        return false;
    uint64_t bytes = clrun__otensor_bytes(out);
    if (bytes)
        memcpy(out->data, x->data, (size_t)bytes);
    return true;
}

bool clrun__host_transpose(const clrun__otensor *x, const int *perm, clrun__otensor *out)
{
    int64_t dims[CLRUN__ONNX_MAX_RANK], in_strides[CLRUN__ONNX_MAX_RANK];
    for (int d = 0; d < x->rank; d++)
        dims[d] = x->dims[perm[d]];
    if (!clrun__otensor_alloc(out, x->elem, x->rank, dims))
        return false;
    int64_t s = 1;
    for (int d = x->rank - 1; d >= 0; d--) {
        in_strides[d] = s;
        s *= x->dims[d];
    }
    walk w = {.rank = x->rank, .dims = out->dims, .operands = 1};
    for (int d = 0; d < x->rank; d++)
        w.strides[0][d] = in_strides[perm[d]];
    gather_walk(&w, x, 0, out);
    return true;
}

bool clrun__host_expand(const clrun__otensor *x, int rank, const int64_t *dims, clrun__otensor *out)
{
    if (!clrun__otensor_alloc(out, x->elem, rank, dims))
        return false;
    walk w = {.rank = rank, .dims = out->dims, .operands = 1};
    broadcast_strides(x, rank, dims, w.strides[0]);
    gather_walk(&w, x, 0, out);
    return true;
}

bool clrun__host_slice(const clrun__otensor *x, const int64_t *start, const int64_t *step,
                       const int64_t *count, clrun__otensor *out)
{
    if (!clrun__otensor_alloc(out, x->elem, x->rank, count))
        return false;
    walk w = {.rank = x->rank, .dims = out->dims, .operands = 1};
    int64_t s = 1, base = 0;
    for (int d = x->rank - 1; d >= 0; d--) {
        w.strides[0][d] = s * step[d];
        base += s * start[d];
        s *= x->dims[d];
    }
    if (clrun__otensor_count(out))
        gather_walk(&w, x, base, out);
    return true;
}

bool clrun__host_concat(const clrun__otensor *const *xs, int n, int axis, clrun__otensor *out)
{
    int64_t dims[CLRUN__ONNX_MAX_RANK];
    memcpy(dims, xs[0]->dims, sizeof dims);
    dims[axis] = 0;
    for (int i = 0; i < n; i++)
        dims[axis] += xs[i]->dims[axis];
    if (!clrun__otensor_alloc(out, xs[0]->elem, xs[0]->rank, dims))
        return false;
    size_t size = clrun__onnx_elem_size(out->elem);
    uint64_t outer = 1;
    for (int d = 0; d < axis; d++)
        outer *= (uint64_t)dims[d];
    uint64_t inner = 1;
    for (int d = axis + 1; d < out->rank; d++)
        inner *= (uint64_t)dims[d];
    unsigned char *dst = out->data;
    for (uint64_t o = 0; o < outer && clrun__otensor_count(out); o++)
        for (int i = 0; i < n; i++) {
            size_t chunk = (size_t)((uint64_t)xs[i]->dims[axis] * inner) * size;
            if (chunk) {
                memcpy(dst, (const unsigned char *)xs[i]->data + o * chunk, chunk);
                dst += chunk;
            }
        }
    return true;
}

bool clrun__host_gather(const clrun__otensor *data, const clrun__otensor *indices, int axis,
                        clrun__otensor *out)
{
    int64_t dims[CLRUN__ONNX_MAX_RANK];
    int rank = data->rank - 1 + indices->rank;
    if (rank > CLRUN__ONNX_MAX_RANK)
        return false;
    int r = 0;
    for (int d = 0; d < axis; d++)
        dims[r++] = data->dims[d];
    for (int d = 0; d < indices->rank; d++)
        dims[r++] = indices->dims[d];
    for (int d = axis + 1; d < data->rank; d++)
        dims[r++] = data->dims[d];
    if (!clrun__otensor_alloc(out, data->elem, rank, dims))
        return false;
    size_t size = clrun__onnx_elem_size(data->elem);
    uint64_t outer = 1, inner = 1, n_idx = clrun__otensor_count(indices);
    for (int d = 0; d < axis; d++)
        outer *= (uint64_t)data->dims[d];
    for (int d = axis + 1; d < data->rank; d++)
        inner *= (uint64_t)data->dims[d];
    size_t chunk = (size_t)inner * size;
    unsigned char *dst = out->data;
    for (uint64_t o = 0; o < outer && chunk; o++)
        for (uint64_t k = 0; k < n_idx; k++) {
            int64_t j = clrun__otensor_get_int(indices, k);
            memcpy(dst, (const unsigned char *)data->data + (o * (uint64_t)data->dims[axis] + (uint64_t)j) * chunk, chunk);
            dst += chunk;
        }
    return true;
}

bool clrun__host_cast(const clrun__otensor *x, int elem, clrun__otensor *out)
{
    if (!clrun__otensor_alloc(out, elem, x->rank, x->dims))
        return false;
    uint64_t count = clrun__otensor_count(x);
    bool real = clrun__onnx_elem_is_float(x->elem) || x->elem == CLRUN__ONNX_UINT64;
    for (uint64_t i = 0; i < count; i++) {
        if (real && !(x->elem == CLRUN__ONNX_UINT64 && !clrun__onnx_elem_is_float(elem)))
            clrun__otensor_set_real(out, i, clrun__otensor_get_real(x, i));
        else
            clrun__otensor_set_int(out, i, clrun__otensor_get_int(x, i));
    }
    return true;
}

bool clrun__host_tile(const clrun__otensor *x, const int64_t *repeats, clrun__otensor *out)
{
    int64_t dims[CLRUN__ONNX_MAX_RANK];
    for (int d = 0; d < x->rank; d++)
        dims[d] = x->dims[d] * repeats[d];
    if (!clrun__otensor_alloc(out, x->elem, x->rank, dims))
        return false;
    size_t size = clrun__onnx_elem_size(x->elem);
    uint64_t count = clrun__otensor_count(out);
    int64_t idx[CLRUN__ONNX_MAX_RANK] = {0};
    for (uint64_t i = 0; i < count; i++) {
        uint64_t src = 0;
        for (int d = 0; d < x->rank; d++)
            src = src * (uint64_t)x->dims[d] + (uint64_t)(idx[d] % x->dims[d]);
        memcpy((unsigned char *)out->data + i * size, (const unsigned char *)x->data + src * size, size);
        for (int d = x->rank - 1; d >= 0; d--) {
            if (++idx[d] < dims[d])
                break;
            idx[d] = 0;
        }
    }
    return true;
}

/* ---- arithmetic ---- */

/* Why a result could not be made: too large to fold (the size limit or the folding budget: the
 * device then computes it) or out of memory. */
static clrun__host_fold_result no_room(void)
{
    return clrun__fold_budget_refused() ? CLRUN__FOLD_CANNOT : CLRUN__FOLD_NO_MEMORY;
}

static bool is_integral(int elem)
{
    return !clrun__onnx_elem_is_float(elem);
}

/* Integer ops in int64, wrapping as the element type then does on store. */
static clrun__host_fold_result int_binary(clrun__host_binop op, int64_t a, int64_t b, int64_t *r)
{
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    switch (op) {
    case CLRUN__H_ADD: *r = (int64_t)(ua + ub); break;
    case CLRUN__H_SUB: *r = (int64_t)(ua - ub); break;
    case CLRUN__H_MUL: *r = (int64_t)(ua * ub); break;
    case CLRUN__H_DIV:
        if (b == 0)
            return CLRUN__FOLD_DIV_ZERO;
        *r = (a == INT64_MIN && b == -1) ? INT64_MIN : a / b; /* truncation, as C and onnxruntime */
        break;
    case CLRUN__H_MOD: /* the sign of the divisor, as Python */
        if (b == 0)
            return CLRUN__FOLD_DIV_ZERO;
        *r = (a == INT64_MIN && b == -1) ? 0 : a % b;
        if (*r != 0 && ((*r < 0) != (b < 0)))
            *r += b;
        break;
    case CLRUN__H_FMOD:
        if (b == 0)
            return CLRUN__FOLD_DIV_ZERO;
        *r = (a == INT64_MIN && b == -1) ? 0 : a % b;
        break;
    case CLRUN__H_MIN: *r = a < b ? a : b; break;
    case CLRUN__H_MAX: *r = a > b ? a : b; break;
    case CLRUN__H_POW: {
        if (b < 0)
            return CLRUN__FOLD_CANNOT;
        uint64_t acc = 1, base = ua;
        for (int64_t e = b; e > 0; e >>= 1) {
            if (e & 1)
                acc *= base;
            base *= base;
        }
        *r = (int64_t)acc;
        break;
    }
    case CLRUN__H_EQUAL: *r = a == b; break;
    case CLRUN__H_LESS: *r = a < b; break;
    case CLRUN__H_GREATER: *r = a > b; break;
    case CLRUN__H_LESS_EQUAL: *r = a <= b; break;
    case CLRUN__H_GREATER_EQUAL: *r = a >= b; break;
    case CLRUN__H_AND: *r = a && b; break;
    case CLRUN__H_OR: *r = a || b; break;
    case CLRUN__H_XOR: *r = (a != 0) != (b != 0); break;
    }
    return CLRUN__FOLD_OK;
}

static clrun__host_fold_result real_binary(clrun__host_binop op, double a, double b, double *r)
{
    switch (op) {
    case CLRUN__H_ADD: *r = a + b; break;
    case CLRUN__H_SUB: *r = a - b; break;
    case CLRUN__H_MUL: *r = a * b; break;
    case CLRUN__H_DIV: *r = a / b; break;
    case CLRUN__H_FMOD: *r = fmod(a, b); break;
    case CLRUN__H_MIN: *r = isnan(a) || isnan(b) ? NAN : a < b ? a : b; break;
    case CLRUN__H_MAX: *r = isnan(a) || isnan(b) ? NAN : a > b ? a : b; break;
    case CLRUN__H_EQUAL: *r = a == b; break;
    case CLRUN__H_LESS: *r = a < b; break;
    case CLRUN__H_GREATER: *r = a > b; break;
    case CLRUN__H_LESS_EQUAL: *r = a <= b; break;
    case CLRUN__H_GREATER_EQUAL: *r = a >= b; break;
    default: return CLRUN__FOLD_CANNOT; /* Mod of floats, Pow: not exactly rounded, left to the device */
    }
    return CLRUN__FOLD_OK;
}

static bool bool_result(clrun__host_binop op)
{
    return op >= CLRUN__H_EQUAL;
}

clrun__host_fold_result clrun__host_binary(clrun__host_binop op, const clrun__otensor *a,
                                           const clrun__otensor *b, clrun__otensor *out)
{
    int rank;
    int64_t dims[CLRUN__ONNX_MAX_RANK];
    memset(out, 0, sizeof *out);
    if (a->elem != b->elem || !clrun__onnx_elem_size(a->elem) ||
        !clrun__broadcast_dims(a->rank, a->dims, b->rank, b->dims, &rank, dims))
        return CLRUN__FOLD_CANNOT;
    bool logic = op == CLRUN__H_AND || op == CLRUN__H_OR || op == CLRUN__H_XOR;
    if (logic && a->elem != CLRUN__ONNX_BOOL)
        return CLRUN__FOLD_CANNOT;
    /* uint64 is read as int64: only the ops whose bits wrap alike in both are folded; the order
     * and division of values past 2^63 are left to the device, which has u64. */
    bool wraps_alike = op == CLRUN__H_ADD || op == CLRUN__H_SUB || op == CLRUN__H_MUL ||
                       op == CLRUN__H_EQUAL || op == CLRUN__H_POW;
    if (a->elem == CLRUN__ONNX_UINT64 && !wraps_alike)
        return CLRUN__FOLD_CANNOT;
    if (!clrun__otensor_alloc(out, bool_result(op) ? CLRUN__ONNX_BOOL : a->elem, rank, dims))
        return no_room();
    walk w = {.rank = rank, .dims = out->dims, .operands = 2};
    broadcast_strides(a, rank, dims, w.strides[0]);
    broadcast_strides(b, rank, dims, w.strides[1]);
    uint64_t count = clrun__otensor_count(out);
    bool integral = is_integral(a->elem);
    for (uint64_t i = 0; i < count; i++) {
        clrun__host_fold_result r;
        if (integral) {
            int64_t v = 0;
            r = int_binary(op, clrun__otensor_get_int(a, (uint64_t)w.offset[0]),
                           clrun__otensor_get_int(b, (uint64_t)w.offset[1]), &v);
            if (r == CLRUN__FOLD_OK)
                clrun__otensor_set_int(out, i, v);
        } else {
            double v = 0;
            r = real_binary(op, clrun__otensor_get_real(a, (uint64_t)w.offset[0]),
                            clrun__otensor_get_real(b, (uint64_t)w.offset[1]), &v);
            if (r == CLRUN__FOLD_OK)
                clrun__otensor_set_real(out, i, v);
        }
        if (r != CLRUN__FOLD_OK) {
            clrun__otensor_free(out);
            return r;
        }
        walk_next(&w);
    }
    return CLRUN__FOLD_OK;
}

clrun__host_fold_result clrun__host_unary(clrun__host_unop op, const clrun__otensor *x,
                                          clrun__otensor *out)
{
    memset(out, 0, sizeof *out);
    bool integral = is_integral(x->elem);
    if (op == CLRUN__H_NOT && x->elem != CLRUN__ONNX_BOOL)
        return CLRUN__FOLD_CANNOT;
    if (integral && (op == CLRUN__H_SQRT || op == CLRUN__H_RECIPROCAL))
        return CLRUN__FOLD_CANNOT;
    if (!integral && op == CLRUN__H_RECIPROCAL && x->elem != CLRUN__ONNX_FLOAT && x->elem != CLRUN__ONNX_DOUBLE)
        return CLRUN__FOLD_CANNOT;
    if (!clrun__otensor_alloc(out, x->elem, x->rank, x->dims))
        return no_room();
    uint64_t count = clrun__otensor_count(x);
    for (uint64_t i = 0; i < count; i++) {
        if (integral) {
            int64_t v = clrun__otensor_get_int(x, i), r = v;
            switch (op) {
            case CLRUN__H_NEG: r = (int64_t)(0 - (uint64_t)v); break;
            case CLRUN__H_ABS: r = v < 0 ? (int64_t)(0 - (uint64_t)v) : v; break;
            case CLRUN__H_SIGN: r = (v > 0) - (v < 0); break;
            case CLRUN__H_NOT: r = !v; break;
            case CLRUN__H_RELU: r = v > 0 ? v : 0; break;
            default: break; /* floor, ceil, round, identity: the value */
            }
            clrun__otensor_set_int(out, i, r);
        } else {
            double v = clrun__otensor_get_real(x, i), r = v;
            switch (op) {
            case CLRUN__H_NEG: r = -v; break;
            case CLRUN__H_ABS: r = fabs(v); break;
            case CLRUN__H_SQRT: r = sqrt(v); break;
            case CLRUN__H_FLOOR: r = floor(v); break;
            case CLRUN__H_CEIL: r = ceil(v); break;
            case CLRUN__H_ROUND: r = nearbyint(v); break; /* half to even (default rounding mode) */
            case CLRUN__H_SIGN: r = isnan(v) ? v : (v > 0) - (v < 0); break;
            case CLRUN__H_RELU: r = v < 0 ? 0 : v; break; /* NaN stays NaN, as on the device */
            case CLRUN__H_RECIPROCAL: r = 1.0 / v; break;
            default: break;
            }
            clrun__otensor_set_real(out, i, r);
        }
    }
    return CLRUN__FOLD_OK;
}

bool clrun__host_where(const clrun__otensor *cond, const clrun__otensor *x, const clrun__otensor *y,
                       clrun__otensor *out)
{
    int r1, rank;
    int64_t d1[CLRUN__ONNX_MAX_RANK], dims[CLRUN__ONNX_MAX_RANK];
    memset(out, 0, sizeof *out);
    if (!clrun__broadcast_dims(cond->rank, cond->dims, x->rank, x->dims, &r1, d1) ||
        !clrun__broadcast_dims(r1, d1, y->rank, y->dims, &rank, dims) ||
        !clrun__otensor_alloc(out, x->elem, rank, dims))
        return false;
    walk w = {.rank = rank, .dims = out->dims, .operands = 3};
    broadcast_strides(cond, rank, dims, w.strides[0]);
    broadcast_strides(x, rank, dims, w.strides[1]);
    broadcast_strides(y, rank, dims, w.strides[2]);
    size_t size = clrun__onnx_elem_size(x->elem);
    uint64_t count = clrun__otensor_count(out);
    for (uint64_t i = 0; i < count; i++) {
        bool c = clrun__otensor_get_int(cond, (uint64_t)w.offset[0]) != 0;
        const clrun__otensor *src = c ? x : y;
        memcpy((unsigned char *)out->data + i * size,
               (const unsigned char *)src->data + (size_t)w.offset[c ? 1 : 2] * size, size);
        walk_next(&w);
    }
    return true;
}

clrun__host_fold_result clrun__host_reduce(clrun__host_reduce_op op, const clrun__otensor *x,
                                           const bool *reduced, bool keepdims, clrun__otensor *out)
{
    int64_t dims[CLRUN__ONNX_MAX_RANK], kept[CLRUN__ONNX_MAX_RANK];
    int rank = 0;
    memset(out, 0, sizeof *out);
    for (int d = 0; d < x->rank; d++) {
        kept[d] = reduced[d] ? 1 : x->dims[d];
        if (!reduced[d] || keepdims)
            dims[rank++] = kept[d];
    }
    if (!clrun__otensor_alloc(out, x->elem, rank, dims))
        return no_room();
    uint64_t n_out = clrun__otensor_count(out), n_in = clrun__otensor_count(x);
    bool integral = is_integral(x->elem);
    double *acc = calloc((size_t)n_out + 1, sizeof *acc);
    int64_t *iacc = calloc((size_t)n_out + 1, sizeof *iacc);
    uint64_t *seen = calloc((size_t)n_out + 1, sizeof *seen);
    if (!acc || !iacc || !seen) {
        free(acc);
        free(iacc);
        free(seen);
        clrun__otensor_free(out);
        return CLRUN__FOLD_NO_MEMORY;
    }
    int64_t idx[CLRUN__ONNX_MAX_RANK] = {0};
    for (uint64_t i = 0; i < n_in; i++) {
        uint64_t o = 0;
        for (int d = 0; d < x->rank; d++)
            o = o * (uint64_t)kept[d] + (uint64_t)(reduced[d] ? 0 : idx[d]);
        double v = integral ? 0 : clrun__otensor_get_real(x, i);
        int64_t iv = integral ? clrun__otensor_get_int(x, i) : 0;
        bool first = seen[o]++ == 0;
        switch (op) {
        case CLRUN__H_RSUM: case CLRUN__H_RMEAN:
            acc[o] += v;
            iacc[o] = (int64_t)((uint64_t)iacc[o] + (uint64_t)iv);
            break;
        case CLRUN__H_RPROD:
            acc[o] = first ? v : acc[o] * v;
            iacc[o] = first ? iv : (int64_t)((uint64_t)iacc[o] * (uint64_t)iv);
            break;
        case CLRUN__H_RMIN:
            acc[o] = first || v < acc[o] || isnan(v) ? v : acc[o];
            iacc[o] = first || iv < iacc[o] ? iv : iacc[o];
            break;
        case CLRUN__H_RMAX:
            acc[o] = first || v > acc[o] || isnan(v) ? v : acc[o];
            iacc[o] = first || iv > iacc[o] ? iv : iacc[o];
            break;
        }
        for (int d = x->rank - 1; d >= 0; d--) {
            if (++idx[d] < x->dims[d])
                break;
            idx[d] = 0;
        }
    }
    clrun__host_fold_result result = CLRUN__FOLD_OK;
    for (uint64_t o = 0; o < n_out; o++) {
        if (seen[o] == 0) { /* an empty reduction: the identity; ONNX's ±inf for a float max and
                                min; a mean has none, an integer's extreme is not computed */
            bool extreme = op == CLRUN__H_RMIN || op == CLRUN__H_RMAX;
            if (op == CLRUN__H_RMEAN || (extreme && integral))
                result = CLRUN__FOLD_CANNOT;
            acc[o] = extreme ? (op == CLRUN__H_RMAX ? -INFINITY : INFINITY) : op == CLRUN__H_RPROD;
            iacc[o] = op == CLRUN__H_RPROD;
        }
        if (integral)
            clrun__otensor_set_int(out, o, op == CLRUN__H_RMEAN && seen[o] ? iacc[o] / (int64_t)seen[o] : iacc[o]);
        else
            clrun__otensor_set_real(out, o, op == CLRUN__H_RMEAN && seen[o] ? acc[o] / (double)seen[o] : acc[o]);
    }
    free(acc);
    free(iacc);
    free(seen);
    if (result != CLRUN__FOLD_OK)
        clrun__otensor_free(out);
    return result;
}
