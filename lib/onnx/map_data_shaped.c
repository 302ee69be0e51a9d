/* Operators whose outputs' shapes depend on their input's values: NonZero and Unique. clrun
 * knows every shape at load, so they are evaluated on the host when the input is known at load
 * (a constant, or folded from constants and shapes), and refused, naming the input, otherwise.
 * (Compress, whose shape depends on its condition only, is in map_index.c.) */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/map.h"

/* The refusal of an input not known at load. */
static clrun_status needs_constant(clrun__imp *im, const clrun__onode *n, int i)
{
    return clrun__unsupported(im, "input %d '%s' must be known at load time (a constant, or "
                              "computed from constants and shapes only): the outputs' shapes "
                              "depend on its values", i, n->proto->input[i]);
}

/* ---- NonZero ---- */

clrun_status clrun__map_nonzero(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 1);
    if (s != CLRUN_OK)
        return s;
    if (!clrun__is_const(n->in[0]))
        return needs_constant(im, n, 0);
    const clrun__otensor *x = &n->in[0]->c;
    if (x->rank == 0)
        return clrun__unsupported(im, "NonZero of a scalar is not supported");
    uint64_t count = clrun__otensor_count(x);
    int64_t dims[2] = {x->rank, 0};
    for (uint64_t i = 0; i < count; i++)
        dims[1] += clrun__otensor_get_real(x, i) != 0;
    clrun__otensor t;
    if (!clrun__otensor_alloc(&t, CLRUN__ONNX_INT64, 2, dims))
        return clrun__host_result_failed(im, CLRUN__ONNX_INT64, 2, dims);
    for (uint64_t i = 0, k = 0; i < count; i++) {
        if (clrun__otensor_get_real(x, i) == 0)
            continue;
        uint64_t rem = i;
        for (int d = x->rank - 1; d >= 0; d--) {
            clrun__otensor_set_int(&t, (uint64_t)d * (uint64_t)dims[1] + k,
                                   (int64_t)(rem % (uint64_t)x->dims[d]));
            rem /= (uint64_t)x->dims[d];
        }
        k++;
    }
    return clrun__define_const(im, n, 0, &t);
}

/* ---- Unique ---- */

/* X as [outer, len, inner] around the axis (without one: [1, count, 1]): slice a is the
 * elements (o, a, i) in row-major order. */
typedef struct slices {
    const clrun__otensor *x;
    uint64_t outer, len, inner;
    bool real; /* compared as doubles (floats), else as int64 */
} slices;

/* -1, 0, 1: slice a against slice b, element by element (NaN above every number and equal to
 * NaN, so the order is total). */
static int slice_compare(const slices *s, uint64_t a, uint64_t b)
{
    for (uint64_t o = 0; o < s->outer; o++)
        for (uint64_t i = 0; i < s->inner; i++) {
            uint64_t ia = (o * s->len + a) * s->inner + i, ib = (o * s->len + b) * s->inner + i;
            if (s->real) {
                double va = clrun__otensor_get_real(s->x, ia), vb = clrun__otensor_get_real(s->x, ib);
                if (isnan(va) || isnan(vb)) {
                    if (isnan(va) != isnan(vb))
                        return isnan(va) ? 1 : -1;
                } else if (va != vb) {
                    return va < vb ? -1 : 1;
                }
            } else {
                int64_t va = clrun__otensor_get_int(s->x, ia), vb = clrun__otensor_get_int(s->x, ib);
                if (va != vb)
                    return va < vb ? -1 : 1;
            }
        }
    return 0;
}

/* Stable merge sort of order[0..n) by key (slices when keys is NULL, else keys[] ascending). */
static void merge_sort(uint64_t *order, uint64_t *tmp, uint64_t n, const slices *s,
                       const uint64_t *keys)
{
    if (n < 2)
        return;
    uint64_t half = n / 2;
    merge_sort(order, tmp, half, s, keys);
    merge_sort(order + half, tmp, n - half, s, keys);
    uint64_t i = 0, j = half, k = 0;
    while (i < half && j < n) {
        bool right = keys ? keys[order[j]] < keys[order[i]] : slice_compare(s, order[j], order[i]) < 0;
        tmp[k++] = right ? order[j++] : order[i++];
    }
    while (i < half)
        tmp[k++] = order[i++];
    while (j < n)
        tmp[k++] = order[j++];
    memcpy(order, tmp, n * sizeof *order);
}

/* The four outputs: Y (the unique slices), indices (each one's first position), inverse_indices
 * (each position's unique), counts. */
static clrun_status unique_outputs(clrun__imp *im, clrun__onode *n, const slices *s, int axis,
                                   const uint64_t *first, uint64_t unique, const uint64_t *group_of,
                                   const uint64_t *counts)
{
    const clrun__otensor *x = s->x;
    clrun__otensor t[4];
    int64_t ydims[CLRUN__ONNX_MAX_RANK], u = (int64_t)unique, len = (int64_t)s->len;
    int yrank = axis < 0 ? 1 : x->rank;
    memcpy(ydims, x->dims, sizeof ydims);
    ydims[axis < 0 ? 0 : axis] = u;
    if (!clrun__otensor_alloc(&t[0], x->elem, yrank, ydims))
        return clrun__host_result_failed(im, x->elem, yrank, ydims);
    bool ok = clrun__otensor_alloc(&t[1], CLRUN__ONNX_INT64, 1, &u);
    ok = ok && clrun__otensor_alloc(&t[2], CLRUN__ONNX_INT64, 1, &len);
    ok = ok && clrun__otensor_alloc(&t[3], CLRUN__ONNX_INT64, 1, &u);
    if (!ok) {
        for (int i = 0; i < 4; i++)
            clrun__otensor_free(&t[i]);
        return CLRUN__OOM(im);
    }
    size_t size = clrun__onnx_elem_size(x->elem);
    for (uint64_t g = 0; g < unique; g++) {
        for (uint64_t o = 0; o < s->outer; o++)
            memcpy((char *)t[0].data + ((o * unique + g) * s->inner) * size,
                   (const char *)x->data + ((o * s->len + first[g]) * s->inner) * size, s->inner * size);
        clrun__otensor_set_int(&t[1], g, (int64_t)first[g]);
        clrun__otensor_set_int(&t[3], g, (int64_t)counts[g]);
    }
    for (uint64_t a = 0; a < s->len; a++)
        clrun__otensor_set_int(&t[2], a, (int64_t)group_of[a]);
    clrun_status st = CLRUN_OK;
    for (int i = 0; i < 4; i++)
        if (st == CLRUN_OK)
            st = clrun__define_const(im, n, i, &t[i]);
        else
            clrun__otensor_free(&t[i]);
    return st;
}

clrun_status clrun__map_unique(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 1);
    if (s != CLRUN_OK)
        return s;
    bool has_axis = clrun__oattr_find(im, n, "axis") != NULL;
    int64_t axis = 0, sorted = 1;
    int a = -1;
    s = clrun__oattr_int(im, n, "axis", 0, &axis);
    if (s == CLRUN_OK)
        s = clrun__oattr_int(im, n, "sorted", 1, &sorted);
    if (s == CLRUN_OK && has_axis)
        s = clrun__norm_axis(im, axis, n->in[0]->c.rank, "axis", &a);
    if (s != CLRUN_OK)
        return s;
    if (!clrun__is_const(n->in[0]))
        return needs_constant(im, n, 0);
    const clrun__otensor *x = &n->in[0]->c;
    if (clrun__onnx_elem_size(x->elem) == 0 || x->elem == CLRUN__ONNX_UINT64) {
        char name[32];
        return clrun__unsupported(im, "Unique of %s is not supported",
                                  clrun__onnx_elem_name(x->elem, name, sizeof name));
    }
    slices sl = {x, 1, clrun__otensor_count(x), 1, clrun__onnx_elem_is_float(x->elem)};
    if (a >= 0) {
        sl.outer = sl.inner = 1;
        for (int d = 0; d < a; d++)
            sl.outer *= (uint64_t)x->dims[d];
        for (int d = a + 1; d < x->rank; d++)
            sl.inner *= (uint64_t)x->dims[d];
        sl.len = (uint64_t)x->dims[a];
    }
    if (sl.len == 0 || sl.outer * sl.inner == 0)
        return clrun__unsupported(im, "Unique of an empty tensor is not supported");
    uint64_t len = sl.len;
    /* order: the slices sorted (stable: equal slices by position), then grouped */
    uint64_t *order = malloc(len * sizeof *order), *tmp = malloc(len * sizeof *tmp);
    uint64_t *group_of = malloc(len * sizeof *group_of), *first = malloc(len * sizeof *first);
    uint64_t *counts = calloc(len, sizeof *counts), *rank_of = malloc(len * sizeof *rank_of);
    if (!order || !tmp || !group_of || !first || !counts || !rank_of) {
        s = CLRUN__OOM(im);
        goto done;
    }
    for (uint64_t i = 0; i < len; i++)
        order[i] = i;
    merge_sort(order, tmp, len, &sl, NULL);
    uint64_t unique = 0;
    for (uint64_t i = 0; i < len; i++) {
        if (i == 0 || slice_compare(&sl, order[i - 1], order[i]) != 0)
            first[unique++] = order[i]; /* the group's first position: stable sort */
        group_of[order[i]] = unique - 1;
    }
    if (!sorted) {
        /* groups in the order of their first positions */
        uint64_t *groups = tmp + 0, *by_first = malloc(unique * sizeof *by_first);
        if (by_first == NULL) {
            s = CLRUN__OOM(im);
            goto done;
        }
        for (uint64_t g = 0; g < unique; g++)
            groups[g] = g;
        merge_sort(groups, by_first, unique, NULL, first);
        for (uint64_t r = 0; r < unique; r++)
            rank_of[groups[r]] = r;
        for (uint64_t r = 0; r < unique; r++)
            by_first[r] = first[groups[r]];
        memcpy(first, by_first, unique * sizeof *first);
        free(by_first);
        for (uint64_t i = 0; i < len; i++)
            group_of[i] = rank_of[group_of[i]];
    }
    for (uint64_t i = 0; i < len; i++)
        counts[group_of[i]]++;
    s = unique_outputs(im, n, &sl, a, first, unique, group_of, counts);
done:
    free(order);
    free(tmp);
    free(group_of);
    free(first);
    free(counts);
    free(rank_of);
    return s;
}
