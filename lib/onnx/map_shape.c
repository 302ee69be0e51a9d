/* Shape operators: Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat, Split, Slice. Each
 * computes the ONNX semantics of its opset version here, on the host, then moves data with
 * move.c, which folds host constants. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "onnx/host_eval.h"
#include "onnx/map.h"

/* ---- Reshape, Flatten, Squeeze, Unsqueeze ---- */

static clrun_status reshape_target(clrun__imp *im, clrun__onode *n, const clrun__otensor *x,
                                   int *rank, int64_t *dims)
{
    int64_t shape[CLRUN__ONNX_MAX_RANK], allowzero = 0;
    int count;
    clrun_status s;
    if (n->version < 5) {
        clrun__oattr_ignore(im, n, "consumed_inputs");
        s = clrun__oattr_ints(im, n, "shape", shape, CLRUN__ONNX_MAX_RANK, &count);
        if (s == CLRUN_OK && count < 0)
            s = clrun__invalid(im, "attribute 'shape' is required");
    } else {
        s = clrun__const_ints(im, n, 1, false, shape, CLRUN__ONNX_MAX_RANK, &count);
        if (s == CLRUN_OK && n->version >= 14)
            s = clrun__oattr_int(im, n, "allowzero", 0, &allowzero);
    }
    if (s != CLRUN_OK)
        return s;
    int wild = -1;
    uint64_t known = 1, total = clrun__otensor_count(x);
    char dx[128], ds[128];
    for (int d = 0; d < count; d++) {
        if (shape[d] == 0 && !allowzero) {
            if (d >= x->rank)
                return clrun__invalid(im, "shape entry %d is 0 (copy), but the input has rank %d", d, x->rank);
            shape[d] = x->dims[d];
        }
        if (shape[d] == -1 && wild < 0) {
            wild = d;
            continue;
        }
        if (shape[d] < 0)
            return clrun__invalid(im, "shape entry %d is %" PRId64, d, shape[d]);
        if (!clrun__mul_u64(known, (uint64_t)shape[d], &known) || known > INT64_MAX)
            return clrun__invalid(im, "cannot reshape %s to %s: more than 2^63 elements",
                                  clrun__onnx_dims_text(x->rank, x->dims, dx, sizeof dx),
                                  clrun__onnx_dims_text(count, shape, ds, sizeof ds));
    }
    if (wild >= 0) {
        if (known == 0 || total % known)
            return clrun__invalid(im, "cannot infer the -1 entry: %" PRIu64 " elements into parts of %" PRIu64,
                                  total, known);
        shape[wild] = (int64_t)(total / known);
        known = total;
    }
    if (known != total)
        return clrun__invalid(im, "cannot reshape %s (%" PRIu64 " elements) to %s",
                              clrun__onnx_dims_text(x->rank, x->dims, dx, sizeof dx), total,
                              clrun__onnx_dims_text(count, shape, ds, sizeof ds));
    *rank = count;
    memcpy(dims, shape, (size_t)count * sizeof shape[0]);
    return CLRUN_OK;
}

/* The axes of Squeeze and Unsqueeze: the attribute before opset 13, the input since. */
static clrun_status axes_of(clrun__imp *im, clrun__onode *n, int64_t *axes, int *count)
{
    if (n->version >= 13)
        return clrun__const_ints(im, n, 1, true, axes, CLRUN__ONNX_MAX_RANK * 2, count);
    return clrun__oattr_ints(im, n, "axes", axes, CLRUN__ONNX_MAX_RANK * 2, count);
}

static clrun_status squeeze_target(clrun__imp *im, clrun__onode *n, const clrun__otensor *x,
                                   int *rank, int64_t *dims)
{
    int64_t axes[CLRUN__ONNX_MAX_RANK * 2];
    int count;
    clrun_status s = axes_of(im, n, axes, &count);
    if (s != CLRUN_OK)
        return s;
    bool drop[CLRUN__ONNX_MAX_RANK] = {false};
    for (int i = 0; i < count; i++) {
        int a;
        s = clrun__norm_axis(im, axes[i], x->rank, "axis", &a);
        if (s != CLRUN_OK)
            return s;
        if (x->dims[a] != 1)
            return clrun__invalid(im, "axis %d has size %" PRId64 ", not 1", a, x->dims[a]);
        drop[a] = true;
    }
    *rank = 0;
    for (int d = 0; d < x->rank; d++)
        if (!(count > 0 ? drop[d] : x->dims[d] == 1))
            dims[(*rank)++] = x->dims[d];
    return CLRUN_OK;
}

static clrun_status unsqueeze_target(clrun__imp *im, clrun__onode *n, const clrun__otensor *x,
                                     int *rank, int64_t *dims)
{
    int64_t axes[CLRUN__ONNX_MAX_RANK * 2];
    int count;
    clrun_status s = axes_of(im, n, axes, &count);
    if (s != CLRUN_OK)
        return s;
    if (count < 0)
        return clrun__invalid(im, "Unsqueeze needs axes");
    int r = x->rank + count;
    if (r > CLRUN__ONNX_MAX_RANK)
        return clrun__unsupported(im, "the result would have %d dimensions (at most %d)", r, CLRUN__ONNX_MAX_RANK);
    bool added[CLRUN__ONNX_MAX_RANK] = {false};
    for (int i = 0; i < count; i++) {
        int a;
        s = clrun__norm_axis(im, axes[i], r, "axis", &a);
        if (s != CLRUN_OK)
            return s;
        if (added[a])
            return clrun__invalid(im, "axis %d is given twice", a);
        added[a] = true;
    }
    for (int d = 0, k = 0; d < r; d++)
        dims[d] = added[d] ? 1 : x->dims[k++];
    *rank = r;
    return CLRUN_OK;
}

clrun_status clrun__map_reshape(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 1);
    if (s != CLRUN_OK)
        return s;
    clrun__value *x = n->in[0];
    int rank = 0;
    int64_t dims[CLRUN__ONNX_MAX_RANK];
    if (strcmp(n->op, "Reshape") == 0) {
        s = reshape_target(im, n, &x->c, &rank, dims);
    } else if (strcmp(n->op, "Flatten") == 0) {
        int64_t axis;
        int a;
        s = clrun__oattr_int(im, n, "axis", 1, &axis);
        if (s == CLRUN_OK && axis == x->c.rank)
            a = x->c.rank;
        else if (s == CLRUN_OK)
            s = clrun__norm_axis(im, axis, x->c.rank, "axis", &a);
        rank = 2;
        if (s == CLRUN_OK && (!clrun__product_i64(x->c.dims, a, &dims[0]) ||
                              !clrun__product_i64(x->c.dims + a, x->c.rank - a, &dims[1])))
            s = clrun__invalid(im, "the flattened dimensions exceed 2^63 - 1");
    } else if (strcmp(n->op, "Squeeze") == 0) {
        s = squeeze_target(im, n, &x->c, &rank, dims);
    } else {
        s = unsqueeze_target(im, n, &x->c, &rank, dims);
    }
    return s == CLRUN_OK ? clrun__mv_reshape(im, n, x, rank, dims, 0, NULL) : s;
}

/* ---- Transpose ---- */

clrun_status clrun__map_transpose(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 1);
    if (s != CLRUN_OK)
        return s;
    clrun__value *x = n->in[0];
    int64_t perm[CLRUN__ONNX_MAX_RANK];
    int count, p[CLRUN__ONNX_MAX_RANK];
    s = clrun__oattr_ints(im, n, "perm", perm, CLRUN__ONNX_MAX_RANK, &count);
    if (s != CLRUN_OK)
        return s;
    if (count < 0) { /* reversed dims */
        count = x->c.rank;
        for (int d = 0; d < count; d++)
            perm[d] = count - 1 - d;
    }
    bool seen[CLRUN__ONNX_MAX_RANK] = {false};
    if (count != x->c.rank)
        return clrun__invalid(im, "perm has %d entries for rank %d", count, x->c.rank);
    for (int d = 0; d < count; d++) {
        if (perm[d] < 0 || perm[d] >= count || seen[perm[d]])
            return clrun__invalid(im, "perm is not a permutation");
        seen[perm[d]] = true;
        p[d] = (int)perm[d];
    }
    return clrun__mv_transpose(im, n, x, p, 0, NULL);
}

/* ---- Concat, Split ---- */

clrun_status clrun__map_concat(clrun__imp *im, clrun__onode *n)
{
    if (n->n_in < 1)
        return clrun__invalid(im, "Concat needs an input");
    clrun_status s = clrun__need_inputs(im, n, n->n_in);
    if (s != CLRUN_OK)
        return s;
    int64_t axis;
    int a;
    s = clrun__oattr_int(im, n, "axis", 1, &axis);
    if (s == CLRUN_OK && n->version >= 4 && clrun__oattr_find(im, n, "axis") == NULL)
        s = clrun__invalid(im, "attribute 'axis' is required");
    const clrun__otensor *x0 = &n->in[0]->c;
    if (s == CLRUN_OK)
        s = clrun__norm_axis(im, axis, x0->rank, "axis", &a);
    if (s != CLRUN_OK)
        return s;
    for (int i = 1; i < n->n_in; i++) {
        const clrun__otensor *xi = &n->in[i]->c;
        bool fits = xi->rank == x0->rank && xi->elem == x0->elem;
        for (int d = 0; fits && d < x0->rank; d++)
            fits = d == a || xi->dims[d] == x0->dims[d];
        if (!fits) {
            char d0[128], di[128];
            return clrun__invalid(im, "input %d %s does not fit input 0 %s except on axis %d", i,
                                  clrun__onnx_dims_text(xi->rank, xi->dims, di, sizeof di),
                                  clrun__onnx_dims_text(x0->rank, x0->dims, d0, sizeof d0), a);
        }
    }
    return clrun__mv_concat(im, n, n->in, n->n_in, a, 0, NULL);
}

clrun_status clrun__map_split(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 1);
    if (s != CLRUN_OK)
        return s;
    clrun__value *x = n->in[0];
    int64_t axis, split[64];
    int count = -1, a;
    s = clrun__oattr_int(im, n, "axis", 0, &axis);
    if (s == CLRUN_OK)
        s = clrun__norm_axis(im, axis, x->c.rank, "axis", &a);
    if (s == CLRUN_OK && (n->version >= 13 || (n->version < 2 && n->n_in > 1 && n->in[1])))
        s = clrun__const_ints(im, n, 1, true, split, 64, &count);
    else if (s == CLRUN_OK)
        s = clrun__oattr_ints(im, n, "split", split, 64, &count);
    int64_t parts = 0; /* opset 18: num_outputs, the last part smaller when it does not divide */
    if (s == CLRUN_OK && n->version >= 18 && clrun__oattr_find(im, n, "num_outputs")) {
        s = clrun__oattr_int(im, n, "num_outputs", 0, &parts);
        if (s == CLRUN_OK && count >= 0)
            s = clrun__invalid(im, "both the input 'split' and the attribute 'num_outputs' are given");
        else if (s == CLRUN_OK && (parts < 1 || parts != n->n_out))
            s = clrun__invalid(im, "num_outputs is %" PRId64 " for %d outputs", parts, n->n_out);
    }
    if (s == CLRUN_OK && n->n_out > 64)
        s = clrun__unsupported(im, "a split into %d parts (at most 64)", n->n_out);
    if (s != CLRUN_OK)
        return s;
    int64_t dim = x->c.dims[a];
    if (parts > 0) {
        int64_t chunk = dim / parts + (dim % parts != 0); /* ceil: dim >= 0, parts >= 1 */
        /* the last part may be empty (2 in 3: 1, 1, 0), not negative (5 in 4: 2, 2, 2, -1) */
        if ((parts - 1) * chunk > dim)
            return clrun__invalid(im, "num_outputs %" PRId64 " leaves no room for the last part of axis %d of "
                                  "size %" PRId64 " (parts of %" PRId64 ")", parts, a, dim, chunk);
        count = (int)parts;
        for (int i = 0; i < count; i++)
            split[i] = i + 1 < count ? chunk : dim - (parts - 1) * chunk;
    }
    if (count < 0) {
        if (n->n_out < 1 || dim % n->n_out)
            return clrun__invalid(im, "axis %d of size %" PRId64 " does not split into %d equal parts", a, dim, n->n_out);
        count = n->n_out;
        for (int i = 0; i < count; i++)
            split[i] = dim / n->n_out;
    }
    int64_t total = 0;
    for (int i = 0; i < count; i++) {
        if (split[i] < 0)
            return clrun__invalid(im, "split entry %d is %" PRId64, i, split[i]);
        if (!clrun__add_i64(total, split[i], &total) || total > dim)
            return clrun__invalid(im, "split sizes add up to more than axis %d of size %" PRId64, a, dim);
    }
    if (count != n->n_out || total != dim)
        return clrun__invalid(im, "split sizes (%d parts, %" PRId64 " in all) do not fit %d outputs of axis "
                              "%d of size %" PRId64, count, total, n->n_out, a, dim);
    int64_t start = 0;
    for (int i = 0; i < count; i++) {
        if (clrun__out(im, n, i))
            s = clrun__mv_slice(im, n, x, a, start, split[i], i, NULL);
        if (s != CLRUN_OK)
            return s;
        start += split[i];
    }
    return CLRUN_OK;
}

/* ---- Slice ---- */

/* ONNX's clamping of one axis' start/end/step into a first index and a count; no intermediate
 * overflows for any int64 values (a step of INT64_MIN or INT64_MAX takes one element). */
static void slice_axis(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *first, int64_t *count)
{
    if (start < 0)
        start = start < -dim ? 0 - (step < 0) : start + dim;
    if (end < 0)
        end = end < -dim ? -1 : end + dim;
    uint64_t span; /* the distance covered, in [0, dim] after clamping */
    if (step > 0) {
        start = start < 0 ? 0 : start > dim ? dim : start;
        end = end < 0 ? 0 : end > dim ? dim : end;
        span = end > start ? (uint64_t)(end - start) : 0;
    } else {
        start = start < 0 ? -1 : start > dim - 1 ? dim - 1 : start;
        end = end < -1 ? -1 : end > dim - 1 ? dim - 1 : end;
        span = start > end ? (uint64_t)(start - end) : 0;
    }
    uint64_t magnitude = step < 0 ? 0 - (uint64_t)step : (uint64_t)step;
    *count = span == 0 ? 0 : (int64_t)(1 + (span - 1) / magnitude);
    *first = start;
}

clrun_status clrun__map_slice(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 1);
    if (s != CLRUN_OK)
        return s;
    clrun__value *x = n->in[0];
    int rank = x->c.rank;
    int64_t starts[CLRUN__ONNX_MAX_RANK], ends[CLRUN__ONNX_MAX_RANK], axes[CLRUN__ONNX_MAX_RANK],
        steps[CLRUN__ONNX_MAX_RANK];
    int ns, ne, na, nt = -1;
    if (n->version < 10) {
        s = clrun__oattr_ints(im, n, "starts", starts, CLRUN__ONNX_MAX_RANK, &ns);
        if (s == CLRUN_OK)
            s = clrun__oattr_ints(im, n, "ends", ends, CLRUN__ONNX_MAX_RANK, &ne);
        if (s == CLRUN_OK)
            s = clrun__oattr_ints(im, n, "axes", axes, CLRUN__ONNX_MAX_RANK, &na);
    } else {
        s = clrun__const_ints(im, n, 1, false, starts, CLRUN__ONNX_MAX_RANK, &ns);
        if (s == CLRUN_OK)
            s = clrun__const_ints(im, n, 2, false, ends, CLRUN__ONNX_MAX_RANK, &ne);
        if (s == CLRUN_OK)
            s = clrun__const_ints(im, n, 3, true, axes, CLRUN__ONNX_MAX_RANK, &na);
        if (s == CLRUN_OK)
            s = clrun__const_ints(im, n, 4, true, steps, CLRUN__ONNX_MAX_RANK, &nt);
    }
    if (s != CLRUN_OK)
        return s;
    if (ns < 0 || ne != ns || (na >= 0 && na != ns) || (nt >= 0 && nt != ns))
        return clrun__invalid(im, "starts, ends, axes and steps must have one length");
    int64_t first[CLRUN__ONNX_MAX_RANK], step[CLRUN__ONNX_MAX_RANK], count[CLRUN__ONNX_MAX_RANK];
    bool given[CLRUN__ONNX_MAX_RANK] = {false};
    for (int d = 0; d < rank; d++) {
        first[d] = 0;
        step[d] = 1;
        count[d] = x->c.dims[d];
    }
    for (int i = 0; i < ns; i++) {
        int a;
        s = clrun__norm_axis(im, na >= 0 ? axes[i] : i, rank, "axis", &a);
        if (s != CLRUN_OK)
            return s;
        if (given[a])
            return clrun__invalid(im, "axis %d is sliced twice", a);
        given[a] = true;
        step[a] = nt >= 0 ? steps[i] : 1;
        if (step[a] == 0)
            return clrun__invalid(im, "step 0 on axis %d", a);
        slice_axis(x->c.dims[a], starts[i], ends[i], step[a], &first[a], &count[a]);
    }
    if (clrun__is_const(x)) {
        clrun__otensor t;
        if (!clrun__host_slice(&x->c, first, step, count, &t))
            return clrun__host_result_failed(im, x->c.elem, rank, count);
        return clrun__mv_const(im, n, &t, 0, NULL);
    }
    for (int d = 0; d < rank; d++)
        if (count[d] < 1) { /* empty: known whole */
            for (int e = 0; e < rank; e++)
                count[e] = count[e] < 0 ? 0 : count[e];
            return clrun__mv_empty(im, n, x->c.elem, rank, count, 0, NULL);
        }
    /* On the device: one slice per axis that changes, the last into the output. */
    int changed[CLRUN__ONNX_MAX_RANK], k = 0;
    for (int d = 0; d < rank; d++)
        if (step[d] != 1 || first[d] != 0 || count[d] != x->c.dims[d])
            changed[k++] = d;
    if (k == 0)
        return clrun__define_alias(im, n, 0, x);
    clrun__value *cur = x;
    for (int i = 0; i < k; i++) {
        int d = changed[i], out = i == k - 1 ? 0 : -1;
        if (step[d] == 1) {
            s = clrun__mv_slice(im, n, cur, d, first[d], count[d], out, &cur);
        } else { /* the graph slice's ONNX form; an end before index 0 is "to the start" */
            if (count[d] < 1)
                return clrun__unsupported(im, "the result would be empty");
            /* saturated: the graph's slice clamps an end past the axis, as ONNX does */
            int64_t end = clrun__add_sat_i64(first[d], clrun__mul_sat_i64(step[d], count[d])), axis = d;
            if (end < 0)
                end = INT64_MIN;
            clrun_attr a[4] = {clrun__mk_ints("starts", &first[d], 1), clrun__mk_ints("ends", &end, 1),
                               clrun__mk_ints("axes", &axis, 1), clrun__mk_ints("steps", &step[d], 1)};
            s = clrun__emit1(im, n, "slice", &cur, 1, a, 4, out, &cur);
        }
        if (s != CLRUN_OK)
            return s;
    }
    return CLRUN_OK;
}

