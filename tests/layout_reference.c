/* References of the layout, index and resize ops: see layout_reference.h. */
#include "layout_reference.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int64_t ref_count(const ref_shape *s)
{
    int64_t n = 1;
    for (int d = 0; d < s->rank; d++)
        n *= s->dims[d];
    return n;
}

ref_shape ref_shape_of(const clrun_tensor_type *t)
{
    ref_shape s = {t->rank, {0}};
    for (int d = 0; d < t->rank; d++)
        s.dims[d] = t->shape[d];
    return s;
}

/* Row-major coordinates of element i of s. */
static void coords(int64_t i, const ref_shape *s, int64_t *c)
{
    for (int d = s->rank - 1; d >= 0; d--) {
        c[d] = i % s->dims[d];
        i /= s->dims[d];
    }
}

static int64_t flat(const int64_t *c, const ref_shape *s)
{
    int64_t i = 0;
    for (int d = 0; d < s->rank; d++)
        i = i * s->dims[d] + c[d];
    return i;
}

static void put(size_t size, void *out, int64_t i, const void *data, int64_t j)
{
    memcpy((char *)out + (size_t)i * size, (const char *)data + (size_t)j * size, size);
}

static void zero(size_t size, void *out, int64_t i)
{
    memset((char *)out + (size_t)i * size, 0, size);
}

void lref_transpose(size_t size, const ref_shape *x, const void *data, const int64_t *perm,
                    void *out)
{
    ref_shape y = {x->rank, {0}};
    for (int d = 0; d < x->rank; d++)
        y.dims[d] = x->dims[perm[d]];
    for (int64_t i = 0; i < ref_count(&y); i++) {
        int64_t cy[CLRUN_MAX_DIMS] = {0}, cx[CLRUN_MAX_DIMS] = {0};
        coords(i, &y, cy);
        for (int d = 0; d < x->rank; d++)
            cx[perm[d]] = cy[d];
        put(size, out, i, data, flat(cx, x));
    }
}

/* The indices ONNX Slice takes from an axis of n: walked one by one, not counted. */
static int64_t slice_indices(int64_t start, int64_t end, int64_t step, int64_t n, int64_t *picked)
{
    if (start < 0)
        start += n;
    if (end < 0)
        end += n;
    if (step > 0) {
        start = start < 0 ? 0 : start > n ? n : start;
        end = end < 0 ? 0 : end > n ? n : end;
    } else {
        start = start < 0 ? 0 : start > n - 1 ? n - 1 : start;
        end = end < -1 ? -1 : end > n - 1 ? n - 1 : end;
    }
    int64_t count = 0;
    for (__int128 j = start; step > 0 ? j < end : j > end; j += step)
        picked[count++] = (int64_t)j;
    return count;
}

bool lref_slice(size_t size, const ref_shape *x, const void *data, int n, const int64_t *starts,
                const int64_t *ends, const int64_t *axes, const int64_t *steps, ref_shape *y,
                void *out)
{
    int64_t *picked[CLRUN_MAX_DIMS];
    *y = *x;
    for (int d = 0; d < x->rank; d++) {
        picked[d] = malloc((size_t)x->dims[d] * sizeof(int64_t) + 8);
        for (int64_t j = 0; j < x->dims[d]; j++)
            picked[d][j] = j;
    }
    bool empty = false;
    for (int i = 0; i < n; i++) {
        int axis = (int)(axes ? (axes[i] < 0 ? axes[i] + x->rank : axes[i]) : i);
        y->dims[axis] = slice_indices(starts[i], ends[i], steps ? steps[i] : 1, x->dims[axis],
                                      picked[axis]);
        empty = empty || y->dims[axis] == 0;
    }
    for (int64_t i = 0; !empty && i < ref_count(y); i++) {
        int64_t cy[CLRUN_MAX_DIMS] = {0}, cx[CLRUN_MAX_DIMS] = {0};
        coords(i, y, cy);
        for (int d = 0; d < x->rank; d++)
            cx[d] = picked[d][cy[d]];
        put(size, out, i, data, flat(cx, x));
    }
    for (int d = 0; d < x->rank; d++)
        free(picked[d]);
    return !empty;
}

void lref_split(size_t size, const ref_shape *x, const void *data, int axis, int parts,
                const int64_t *sizes, int index, void *out)
{
    (void)parts;
    int64_t offset = 0;
    for (int p = 0; p < index; p++)
        offset += sizes[p];
    ref_shape y = *x;
    y.dims[axis] = sizes[index];
    for (int64_t i = 0; i < ref_count(&y); i++) {
        int64_t c[CLRUN_MAX_DIMS] = {0};
        coords(i, &y, c);
        c[axis] += offset;
        put(size, out, i, data, flat(c, x));
    }
}

void lref_expand(size_t size, const ref_shape *x, const void *data, const ref_shape *y, void *out)
{
    for (int64_t i = 0; i < ref_count(y); i++) {
        int64_t cy[CLRUN_MAX_DIMS], cx[CLRUN_MAX_DIMS] = {0};
        coords(i, y, cy);
        for (int d = 0; d < x->rank; d++) {
            int64_t c = cy[d + y->rank - x->rank];
            cx[d] = x->dims[d] == 1 ? 0 : c;
        }
        put(size, out, i, data, flat(cx, x));
    }
}

void lref_tile(size_t size, const ref_shape *x, const void *data, const int64_t *repeats,
               void *out)
{
    ref_shape y = *x;
    for (int d = 0; d < x->rank; d++)
        y.dims[d] *= repeats[d];
    for (int64_t i = 0; i < ref_count(&y); i++) {
        int64_t c[CLRUN_MAX_DIMS] = {0};
        coords(i, &y, c);
        for (int d = 0; d < x->rank; d++)
            c[d] %= x->dims[d];
        put(size, out, i, data, flat(c, x));
    }
}

void lref_depth_to_space(size_t size, const ref_shape *x, const void *data, int64_t b, bool crd,
                         void *out)
{
    int64_t C = x->dims[1] / (b * b);
    ref_shape y = {4, {x->dims[0], C, x->dims[2] * b, x->dims[3] * b}};
    for (int64_t i = 0; i < ref_count(&y); i++) {
        int64_t c[4] = {0};
        coords(i, &y, c);
        int64_t h = c[2] / b, bi = c[2] % b, w = c[3] / b, bj = c[3] % b;
        int64_t channel = crd ? c[1] * b * b + bi * b + bj : (bi * b + bj) * C + c[1];
        int64_t cx[4] = {c[0], channel, h, w};
        put(size, out, i, data, flat(cx, x));
    }
}

void lref_space_to_depth(size_t size, const ref_shape *x, const void *data, int64_t b, void *out)
{
    int64_t C = x->dims[1];
    ref_shape y = {4, {x->dims[0], C * b * b, x->dims[2] / b, x->dims[3] / b}};
    for (int64_t i = 0; i < ref_count(&y); i++) {
        int64_t c[4] = {0};
        coords(i, &y, c);
        int64_t channel = c[1] % C, block = c[1] / C, bi = block / b, bj = block % b;
        int64_t cx[4] = {c[0], channel, c[2] * b + bi, c[3] * b + bj};
        put(size, out, i, data, flat(cx, x));
    }
}

void lref_gather(size_t size, const ref_shape *x, const void *data, const ref_shape *indices,
                 const int64_t *index, int axis, bool wrap, void *out)
{
    ref_shape y = {0, {0}};
    for (int d = 0; d < axis; d++)
        y.dims[y.rank++] = x->dims[d];
    for (int d = 0; d < indices->rank; d++)
        y.dims[y.rank++] = indices->dims[d];
    for (int d = axis + 1; d < x->rank; d++)
        y.dims[y.rank++] = x->dims[d];
    for (int64_t i = 0; i < ref_count(&y); i++) {
        int64_t cy[CLRUN_MAX_DIMS] = {0}, cx[CLRUN_MAX_DIMS] = {0}, ci[CLRUN_MAX_DIMS] = {0};
        coords(i, &y, cy);
        for (int d = 0; d < axis; d++)
            cx[d] = cy[d];
        for (int d = 0; d < indices->rank; d++)
            ci[d] = cy[axis + d];
        for (int d = axis + 1; d < x->rank; d++)
            cx[d] = cy[d - 1 + indices->rank];
        int64_t k = index[flat(ci, indices)];
        if (k < 0 && wrap)
            k += x->dims[axis];
        if (k < 0 || k >= x->dims[axis]) {
            zero(size, out, i);
            continue;
        }
        cx[axis] = k;
        put(size, out, i, data, flat(cx, x));
    }
}

void lref_gather_elements(size_t size, const ref_shape *x, const void *data,
                          const ref_shape *indices, const int64_t *index, int axis, void *out)
{
    for (int64_t i = 0; i < ref_count(indices); i++) {
        int64_t c[CLRUN_MAX_DIMS] = {0};
        coords(i, indices, c);
        int64_t k = index[i];
        if (k < 0)
            k += x->dims[axis];
        if (k < 0 || k >= x->dims[axis]) {
            zero(size, out, i);
            continue;
        }
        c[axis] = k;
        put(size, out, i, data, flat(c, x));
    }
}

/* numpy's reflect, one mirror at a time. */
static int64_t reflect(int64_t s, int64_t n)
{
    if (n == 1)
        return 0;
    while (s < 0 || s >= n)
        s = s < 0 ? -s : 2 * (n - 1) - s;
    return s;
}

void lref_pad(size_t size, const ref_shape *x, const void *data, const int64_t *pads, int mode,
              const void *value, void *out)
{
    ref_shape y = *x;
    for (int d = 0; d < x->rank; d++)
        y.dims[d] += pads[d] + pads[x->rank + d];
    for (int64_t i = 0; i < ref_count(&y); i++) {
        int64_t c[CLRUN_MAX_DIMS] = {0};
        coords(i, &y, c);
        bool inside = true;
        for (int d = 0; d < x->rank; d++) {
            int64_t s = c[d] - pads[d], n = x->dims[d];
            if (s >= 0 && s < n)
                c[d] = s;
            else if (mode == 1)
                c[d] = reflect(s, n);
            else if (mode == 2)
                c[d] = s < 0 ? 0 : n - 1;
            else
                inside = false;
        }
        if (inside)
            put(size, out, i, data, flat(c, x));
        else
            memcpy((char *)out + (size_t)i * size, value, size);
    }
}

void lref_trilu(size_t size, const ref_shape *x, const void *data, bool upper, int64_t k,
                void *out)
{
    for (int64_t i = 0; i < ref_count(x); i++) {
        int64_t c[CLRUN_MAX_DIMS] = {0};
        coords(i, x, c);
        int64_t row = c[x->rank - 2], col = c[x->rank - 1];
        bool keep = upper ? col - row >= k : col - row <= k;
        if (keep)
            put(size, out, i, data, i);
        else
            zero(size, out, i);
    }
}

/* The positions of line `line` along axis, in the order a cumsum visits them. */
static void line_positions(const ref_shape *x, int axis, int64_t line, bool reverse,
                           int64_t *at)
{
    int64_t inner = 1;
    for (int d = axis + 1; d < x->rank; d++)
        inner *= x->dims[d];
    int64_t n = x->dims[axis], base = line / inner * n * inner + line % inner;
    for (int64_t t = 0; t < n; t++)
        at[t] = base + (reverse ? n - 1 - t : t) * inner;
}

void lref_cumsum_float(const ref_shape *x, const double *data, int axis, bool exclusive,
                       bool reverse, double *out)
{
    int64_t n = x->dims[axis], lines = ref_count(x) / n;
    int64_t *at = malloc((size_t)n * sizeof *at);
    for (int64_t l = 0; l < lines; l++) {
        line_positions(x, axis, l, reverse, at);
        double sum = 0;
        for (int64_t t = 0; t < n; t++) {
            if (exclusive)
                out[at[t]] = sum;
            sum += data[at[t]];
            if (!exclusive)
                out[at[t]] = sum;
        }
    }
    free(at);
}

void lref_cumsum_int(size_t size, const ref_shape *x, const void *data, int axis, bool exclusive,
                     bool reverse, void *out)
{
    int64_t n = x->dims[axis], lines = ref_count(x) / n;
    int64_t *at = malloc((size_t)n * sizeof *at);
    for (int64_t l = 0; l < lines; l++) {
        line_positions(x, axis, l, reverse, at);
        uint64_t sum = 0;
        for (int64_t t = 0; t < n; t++) {
            uint64_t v = 0;
            if (size == 4) {
                uint32_t w;
                memcpy(&w, (const char *)data + at[t] * 4, 4);
                v = (uint64_t)(int64_t)(int32_t)w;
            } else {
                memcpy(&v, (const char *)data + at[t] * 8, 8);
            }
            uint64_t before = sum;
            sum += v;
            uint64_t result = exclusive ? before : sum;
            if (size == 4) {
                uint32_t w = (uint32_t)result;
                memcpy((char *)out + at[t] * 4, &w, 4);
            } else {
                memcpy((char *)out + at[t] * 8, &result, 8);
            }
        }
    }
    free(at);
}

/* ---- resize: a port of the ONNX reference ------------------------------------------------ */

/* get_coeffs of the reference for ratio in (0, 1] (1 when x is an integer). */
static int coefficients(const lref_resize_params *p, double ratio, bool integral, double *c)
{
    if (p->mode == 1) {
        c[0] = 1 - ratio;
        c[1] = ratio;
        return 2;
    }
    if (p->mode == 2) {
        double A = p->cubic_a, s = 1 - ratio;
        c[0] = ((A * (ratio + 1) - 5 * A) * (ratio + 1) + 8 * A) * (ratio + 1) - 4 * A;
        c[1] = ((A + 2) * ratio - (A + 3)) * ratio * ratio + 1;
        c[2] = ((A + 2) * s - (A + 3)) * s * s + 1;
        c[3] = ((A * (s + 1) - 5 * A) * (s + 1) + 8 * A) * (s + 1) - 4 * A;
        return 4;
    }
    if (integral) {
        c[0] = 0, c[1] = 1;
    } else if (p->nearest_mode == 0) {
        c[0] = ratio <= 0.5, c[1] = ratio > 0.5;
    } else if (p->nearest_mode == 1) {
        c[0] = ratio < 0.5, c[1] = ratio >= 0.5;
    } else if (p->nearest_mode == 2) {
        c[0] = 1, c[1] = 0;
    } else {
        c[0] = 0, c[1] = 1;
    }
    return 2;
}

/* interpolate_1d_with_x: the value at output coordinate x of an axis of `width` values. */
static double interpolate_1d(const double *values, int64_t width, double scale, double x,
                             const lref_resize_params *p)
{
    double output_width = scale * (double)width, x_ori;
    switch (p->coordinate_mode) {
    case 1: x_ori = x / scale; break;
    case 2: x_ori = output_width == 1 ? 0 : x * (double)(width - 1) / (output_width - 1); break;
    case 3: x_ori = output_width == 1 ? -0.5 : (x + 0.5) / scale - 0.5; break;
    case 4: x_ori = (x + 0.5) / scale; break;
    default: x_ori = (x + 0.5) / scale - 0.5; break;
    }
    double floor_x = floor(x_ori);
    bool integral = x_ori == floor_x;
    double ratio = integral ? 1 : x_ori - floor_x;
    double c[4];
    int n = coefficients(p, ratio, integral, c);
    /* get_neighbor: the n indices of the edge-padded axis nearest to x, ties to the smaller. */
    int64_t pad = (n + 1) / 2, length = width + 2 * pad;
    double xp = x_ori + (double)pad;
    int64_t idx[4];
    bool *taken = calloc((size_t)length, 1);
    for (int k = 0; k < n; k++) {
        int64_t best = -1;
        for (int64_t j = 0; j < length; j++)
            if (!taken[j] && (best < 0 || fabs(xp - (double)j) < fabs(xp - (double)best)))
                best = j;
        taken[best] = true;
        idx[k] = best;
    }
    free(taken);
    for (int a = 0; a < n; a++) /* ascending */
        for (int b = a + 1; b < n; b++)
            if (idx[b] < idx[a]) {
                int64_t t = idx[a];
                idx[a] = idx[b];
                idx[b] = t;
            }
    double sum = 0, result = 0;
    for (int k = 0; k < n; k++) {
        idx[k] -= pad;
        if (p->exclude_outside && (idx[k] < 0 || idx[k] >= width))
            c[k] = 0;
        sum += c[k];
    }
    for (int k = 0; k < n; k++) {
        int64_t j = idx[k] < 0 ? 0 : idx[k] >= width ? width - 1 : idx[k];
        result += (p->exclude_outside ? c[k] / sum : c[k]) * values[j];
    }
    return result;
}

/* interpolate_nd_with_x: axis d onwards of the block at `offset`. */
static double interpolate_nd(const double *data, const ref_shape *x, const ref_shape *y, int d,
                             int64_t offset, const int64_t *out_coords,
                             const lref_resize_params *p)
{
    int64_t width = x->dims[d], stride = 1;
    for (int e = d + 1; e < x->rank; e++)
        stride *= x->dims[e];
    double *values = malloc((size_t)width * sizeof *values);
    for (int64_t i = 0; i < width; i++)
        values[i] = d == x->rank - 1
                        ? data[offset + i]
                        : interpolate_nd(data, x, y, d + 1, offset + i * stride, out_coords, p);
    double scale = p->scales[d] > 0 ? p->scales[d] : (double)y->dims[d] / (double)width;
    double v = interpolate_1d(values, width, scale, (double)out_coords[d], p);
    free(values);
    return v;
}

void lref_resize(const ref_shape *x, const double *data, const ref_shape *y,
                 const lref_resize_params *p, double *out)
{
    for (int64_t i = 0; i < ref_count(y); i++) {
        int64_t c[CLRUN_MAX_DIMS] = {0};
        coords(i, y, c);
        out[i] = interpolate_nd(data, x, y, 0, 0, c, p);
    }
}
