/* Indexing and layout operators: Gather, GatherElements, Compress, Expand, Tile, Pad,
 * DepthToSpace, SpaceToDepth, Trilu, CumSum, Resize and Upsample. The graph's op where this build
 * takes the attributes, else an exact composition of moves (move.c), which fold host constants. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "graph/layout_geometry.h"
#include "onnx/host_eval.h"
#include "onnx/map.h"

/* ---- Gather ---- */

/* Indices of a constant tensor, normalised into [0, dim); a refusal for one out of range. */
static clrun_status normalized_indices(clrun__imp *im, const clrun__otensor *idx, int64_t dim,
                                       int elem, clrun__otensor *out)
{
    if (clrun__onnx_elem_is_float(idx->elem) || idx->elem == CLRUN__ONNX_BOOL)
        return clrun__invalid(im, "indices must be integers");
    if (!clrun__otensor_alloc(out, elem, idx->rank, idx->dims))
        return CLRUN__OOM(im);
    uint64_t count = clrun__otensor_count(idx);
    for (uint64_t i = 0; i < count; i++) {
        int64_t j = clrun__otensor_get_int(idx, i);
        if (j < -dim || j >= dim) {
            clrun__otensor_free(out);
            return clrun__invalid(im, "index %" PRId64 " is out of range for a dimension of %" PRId64, j, dim);
        }
        clrun__otensor_set_int(out, i, j < 0 ? j + dim : j);
    }
    return CLRUN_OK;
}

/* Gather of constant indices on a device value: a slice for one index, otherwise the graph's
 * gather of rows: data moved so that axis leads and the rest is one row, then back. */
static clrun_status gather_const_indices(clrun__imp *im, clrun__onode *n, clrun__value *data,
                                         clrun__otensor *idx, int axis)
{
    const clrun__otensor *d = &data->c;
    int64_t out_dims[CLRUN__ONNX_MAX_RANK];
    int out_rank = 0;
    for (int k = 0; k < axis; k++)
        out_dims[out_rank++] = d->dims[k];
    for (int k = 0; k < idx->rank; k++)
        out_dims[out_rank++] = idx->dims[k];
    for (int k = axis + 1; k < d->rank; k++)
        out_dims[out_rank++] = d->dims[k];
    clrun_status s;
    clrun__value *cur;
    if (clrun__otensor_count(idx) == 1) {
        s = clrun__mv_slice(im, n, data, axis, clrun__otensor_get_int(idx, 0), 1, -1, &cur);
        clrun__otensor_free(idx);
        return s == CLRUN_OK ? clrun__mv_reshape(im, n, cur, out_rank, out_dims, 0, NULL) : s;
    }
    /* Bring axis to the front: [V, rest...], then rows [V, R]. */
    int perm[CLRUN__ONNX_MAX_RANK], k = 0;
    perm[k++] = axis;
    for (int j = 0; j < d->rank; j++)
        if (j != axis)
            perm[k++] = j;
    int64_t rows[2] = {d->dims[axis], (int64_t)(clrun__otensor_count(d) / (uint64_t)d->dims[axis])};
    /* the indices' shape, which the constant takes over */
    int idx_rank = idx->rank;
    int64_t idx_dims[CLRUN__ONNX_MAX_RANK];
    memcpy(idx_dims, idx->dims, sizeof idx_dims);
    clrun__value *ids = clrun__const_value(im, idx);
    if (ids == NULL)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    s = clrun__mv_transpose(im, n, data, perm, -1, &cur);
    if (s == CLRUN_OK)
        s = clrun__mv_reshape(im, n, cur, 2, rows, -1, &cur);
    clrun__value *in[2] = {cur, ids}, *g;
    if (s == CLRUN_OK)
        s = clrun__emit1(im, n, "gather", in, 2, NULL, 0, -1, &g);
    if (s != CLRUN_OK)
        return s;
    /* g is [indices..., R]: as [indices..., dims before axis..., dims after...], then move the
     * dims before axis in front. */
    int64_t mid[CLRUN__ONNX_MAX_RANK];
    int r = 0;
    for (int j = 0; j < idx_rank; j++)
        mid[r++] = idx_dims[j];
    for (int j = 0; j < d->rank; j++)
        if (j != axis)
            mid[r++] = d->dims[j];
    if (r > CLRUN_MAX_DIMS)
        return clrun__unsupported(im, "the gathered tensor would have %d dimensions", r);
    s = clrun__mv_reshape(im, n, g, r, mid, axis == 0 ? 0 : -1, &cur);
    if (s != CLRUN_OK || axis == 0)
        return s;
    int back[CLRUN__ONNX_MAX_RANK];
    k = 0;
    for (int j = 0; j < axis; j++)
        back[k++] = idx_rank + j;
    for (int j = 0; j < idx_rank; j++)
        back[k++] = j;
    for (int j = idx_rank + axis; j < r; j++)
        back[k++] = j;
    return clrun__mv_transpose(im, n, cur, back, 0, NULL);
}

clrun_status clrun__map_gather(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 2);
    if (s != CLRUN_OK)
        return s;
    clrun__value *data = n->in[0], *indices = n->in[1];
    int64_t axis;
    int a;
    s = clrun__oattr_int(im, n, "axis", 0, &axis);
    if (s == CLRUN_OK)
        s = clrun__norm_axis(im, axis, data->c.rank, "axis", &a);
    if (s != CLRUN_OK)
        return s;
    if (clrun__is_const(indices)) {
        clrun__otensor idx;
        bool on_host = clrun__is_const(data);
        s = normalized_indices(im, &indices->c, data->c.dims[a],
                               on_host ? CLRUN__ONNX_INT64 : CLRUN__ONNX_INT32, &idx);
        if (s != CLRUN_OK)
            return s;
        if (!on_host)
            return gather_const_indices(im, n, data, &idx, a);
        clrun__otensor t;
        bool ok = clrun__host_gather(&data->c, &idx, a, &t);
        if (ok) {
            clrun__otensor_free(&idx);
            return clrun__define_const(im, n, 0, &t);
        }
        int64_t dims[2 * CLRUN__ONNX_MAX_RANK];
        int r = 0;
        for (int k = 0; k < data->c.rank; k++)
            if (k != a)
                dims[r++] = data->c.dims[k];
            else
                for (int j = 0; j < idx.rank; j++)
                    dims[r++] = idx.dims[j];
        clrun__otensor_free(&idx);
        return clrun__host_result_failed(im, data->c.elem, r, dims);
    }
    /* Indices computed on the device: the graph's gather with ONNX semantics (int64 indices,
     * negatives from the end). */
    if (indices->c.elem != CLRUN__ONNX_INT64)
        return clrun__unsupported(im, "indices computed on the device must be int64");
    clrun__value *in[2] = {data, indices};
    clrun_attr at = clrun__mk_int("axis", a);
    return clrun__emit1(im, n, "gather", in, 2, &at, 1, 0, NULL);
}

clrun_status clrun__map_gather_elements(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 2);
    if (s != CLRUN_OK)
        return s;
    int64_t axis;
    int a;
    s = clrun__oattr_int(im, n, "axis", 0, &axis);
    if (s == CLRUN_OK)
        s = clrun__norm_axis(im, axis, n->in[0]->c.rank, "axis", &a);
    if (s != CLRUN_OK)
        return s;
    clrun__value *in[2] = {n->in[0], n->in[1]};
    clrun_attr at = clrun__mk_int("axis", a);
    return clrun__emit1(im, n, "gather_elements", in, 2, &at, 1, 0, NULL);
}

/* ---- Compress ---- */

/* Compress with a condition known at load (its output's shape depends on the condition's
 * values): the gather of the positions the condition keeps, along the axis, or of the flattened
 * data without one. */
clrun_status clrun__map_compress(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 2);
    if (s != CLRUN_OK)
        return s;
    clrun__value *data = n->in[0];
    if (!clrun__is_const(n->in[1]))
        return clrun__unsupported(im, "input 1 '%s' must be known at load time (a constant, or "
                                  "computed from constants and shapes only): the output's shape "
                                  "depends on its values", n->proto->input[1]);
    const clrun__otensor *cond = &n->in[1]->c;
    bool has_axis = clrun__oattr_find(im, n, "axis") != NULL;
    int64_t axis = 0;
    int a = 0;
    s = clrun__oattr_int(im, n, "axis", 0, &axis);
    if (s == CLRUN_OK && has_axis)
        s = clrun__norm_axis(im, axis, data->c.rank, "axis", &a);
    if (s != CLRUN_OK)
        return s;
    if (cond->rank != 1 || clrun__onnx_elem_is_float(cond->elem))
        return clrun__invalid(im, "condition must be a 1-D bool tensor");
    int64_t count = (int64_t)clrun__otensor_count(&data->c);
    int64_t dim = has_axis ? data->c.dims[a] : count, kept = 0, len = cond->dims[0];
    for (int64_t j = 0; j < len; j++)
        if (clrun__otensor_get_int(cond, (uint64_t)j) != 0) {
            if (j >= dim)
                return clrun__invalid(im, "condition keeps position %" PRId64 ", outside the axis of "
                                      "length %" PRId64, j, dim);
            kept++;
        }
    if (kept == 0) { /* an empty output, known at load: no kernel */
        int64_t dims[CLRUN__ONNX_MAX_RANK];
        memcpy(dims, data->c.dims, sizeof dims);
        dims[a] = 0;
        return clrun__mv_empty(im, n, data->c.elem, has_axis ? data->c.rank : 1, dims, 0, NULL);
    }
    clrun__value *flat = data;
    if (!has_axis) {
        s = clrun__mv_reshape(im, n, data, 1, &count, -1, &flat);
        if (s != CLRUN_OK)
            return s;
    }
    bool on_host = clrun__is_const(flat);
    clrun__otensor idx;
    if (!clrun__otensor_alloc(&idx, on_host ? CLRUN__ONNX_INT64 : CLRUN__ONNX_INT32, 1, &kept))
        return CLRUN__OOM(im);
    for (int64_t j = 0, k = 0; j < len; j++)
        if (clrun__otensor_get_int(cond, (uint64_t)j) != 0)
            clrun__otensor_set_int(&idx, (uint64_t)k++, j);
    if (!on_host)
        return gather_const_indices(im, n, flat, &idx, a);
    clrun__otensor t;
    bool ok = clrun__host_gather(&flat->c, &idx, a, &t);
    clrun__otensor_free(&idx);
    if (ok)
        return clrun__define_const(im, n, 0, &t);
    int64_t dims[CLRUN__ONNX_MAX_RANK];
    memcpy(dims, flat->c.dims, sizeof dims);
    dims[a] = kept;
    return clrun__host_result_failed(im, flat->c.elem, flat->c.rank, dims);
}

/* ---- Expand, Tile ---- */

clrun_status clrun__map_expand(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 2);
    if (s != CLRUN_OK)
        return s;
    clrun__value *x = n->in[0];
    int64_t shape[CLRUN__ONNX_MAX_RANK], dims[CLRUN__ONNX_MAX_RANK];
    int count, rank;
    s = clrun__const_ints(im, n, 1, false, shape, CLRUN__ONNX_MAX_RANK, &count);
    if (s != CLRUN_OK)
        return s;
    if (!clrun__broadcast_dims(x->c.rank, x->c.dims, count, shape, &rank, dims)) {
        char dx[128], ds[128];
        return clrun__invalid(im, "%s does not broadcast to %s",
                              clrun__onnx_dims_text(x->c.rank, x->c.dims, dx, sizeof dx),
                              clrun__onnx_dims_text(count, shape, ds, sizeof ds));
    }
    if (clrun__is_const(x)) {
        clrun__otensor t;
        if (!clrun__host_expand(&x->c, rank, dims, &t))
            return clrun__host_result_failed(im, x->c.elem, rank, dims);
        return clrun__define_const(im, n, 0, &t);
    }
    if (rank == x->c.rank && memcmp(dims, x->c.dims, (size_t)rank * sizeof dims[0]) == 0)
        return clrun__define_alias(im, n, 0, x);
    if (clrun__graph_has_op("expand")) {
        clrun_attr a = clrun__mk_ints("shape", dims, rank);
        return clrun__emit1(im, n, "expand", &x, 1, &a, 1, 0, NULL);
    }
    /* x · ones of the target shape: the same values (x · 1 is exact) */
    if (x->c.elem != CLRUN__ONNX_FLOAT && x->c.elem != CLRUN__ONNX_INT32)
        return clrun__unsupported(im, "needs graph op 'expand', which this build of clrun does not have");
    clrun__otensor ones;
    if (!clrun__otensor_alloc(&ones, x->c.elem, rank, dims))
        return clrun__host_result_failed(im, x->c.elem, rank, dims);
    for (uint64_t i = 0; i < clrun__otensor_count(&ones); i++)
        clrun__otensor_set_int(&ones, i, 1);
    clrun__value *one = clrun__const_value(im, &ones);
    if (one == NULL)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    clrun__value *in[2] = {x, one};
    return clrun__emit1(im, n, "mul", in, 2, NULL, 0, 0, NULL);
}

clrun_status clrun__map_tile(clrun__imp *im, clrun__onode *n)
{
    if (n->version < 6)
        return clrun__unsupported(im, "Tile before opset 6 (tiles and axis inputs) is not supported");
    clrun_status s = clrun__need_inputs(im, n, 2);
    if (s != CLRUN_OK)
        return s;
    clrun__value *x = n->in[0];
    int64_t repeats[CLRUN__ONNX_MAX_RANK];
    int count;
    s = clrun__const_ints(im, n, 1, false, repeats, CLRUN__ONNX_MAX_RANK, &count);
    if (s != CLRUN_OK)
        return s;
    if (count != x->c.rank)
        return clrun__invalid(im, "repeats has %d entries for rank %d", count, x->c.rank);
    int64_t tiled[CLRUN__ONNX_MAX_RANK], total;
    for (int d = 0; d < count; d++) {
        if (repeats[d] < 0)
            return clrun__invalid(im, "repeat %d is %" PRId64, d, repeats[d]);
        if (!clrun__mul_i64(x->c.dims[d], repeats[d], &tiled[d]))
            return clrun__unsupported(im, "repeat %d (%" PRId64 ") makes axis %d of size %" PRId64
                                      " larger than 2^63 - 1", d, repeats[d], d, x->c.dims[d]);
    }
    if (!clrun__product_i64(tiled, count, &total))
        return clrun__unsupported(im, "the repeats make a result of more than 2^63 - 1 elements");
    if (clrun__is_const(x)) {
        clrun__otensor t;
        if (!clrun__host_tile(&x->c, repeats, &t))
            return clrun__host_result_failed(im, x->c.elem, count, tiled);
        return clrun__define_const(im, n, 0, &t);
    }
    if (clrun__graph_has_op("tile")) {
        clrun_attr a = clrun__mk_ints("repeats", repeats, count);
        return clrun__emit1(im, n, "tile", &x, 1, &a, 1, 0, NULL);
    }
    int last = -1;
    for (int d = 0; d < count; d++) {
        if (repeats[d] == 0)
            return clrun__unsupported(im, "the result would be empty");
        if (repeats[d] > 1)
            last = d;
    }
    if (last < 0)
        return clrun__define_alias(im, n, 0, x);
    clrun__value *cur = x;
    for (int d = 0; d <= last; d++) {
        if (repeats[d] == 1)
            continue;
        if (repeats[d] > 64)
            return clrun__unsupported(im, "a repeat of %" PRId64 " without a tile kernel", repeats[d]);
        clrun__value *copies[64];
        for (int64_t k = 0; k < repeats[d]; k++)
            copies[k] = cur;
        s = clrun__mv_concat(im, n, copies, (int)repeats[d], d, d == last ? 0 : -1, &cur);
        if (s != CLRUN_OK)
            return s;
    }
    return CLRUN_OK;
}

/* ---- Pad ---- */

clrun_status clrun__pad_axis(clrun__imp *im, clrun__onode *n, clrun__value *x, int axis, int64_t before,
                             int64_t after, const char *mode, double value, int out, clrun__value **r)
{
    int64_t dim = x->c.dims[axis];
    clrun_status s = CLRUN_OK;
    bool copies = strcmp(mode, "constant") != 0; /* reflect, edge, wrap: the axis' own elements */
    if (before <= 0 && after <= 0 && before + after + dim == 0) /* cropped to nothing */
        return clrun__mv_slice(im, n, x, axis, 0, 0, out, r);
    if (dim == 0 && copies && (before > 0 || after > 0))
        return clrun__unsupported(im, "%s pads of %" PRId64 " and %" PRId64 " on the empty axis %d (the spec "
                                  "gives no value to copy)", mode, before, after, axis);
    if (before < 0 || after < 0) { /* negative pads crop */
        /* either side removing the whole axis empties it; otherwise -before and dim + after
         * are in range */
        if (before <= -dim || after <= -dim)
            return clrun__unsupported(im, "the result would be empty");
        int64_t start = before < 0 ? -before : 0, end = after < 0 ? dim + after : dim;
        if (end - start < 1)
            return clrun__unsupported(im, "the result would be empty");
        s = clrun__mv_slice(im, n, x, axis, start, end - start, before <= 0 && after <= 0 ? out : -1, &x);
        if (s == CLRUN_OK && before <= 0 && after <= 0 && r)
            *r = x; /* only cropped: the slice is the result */
        if (s != CLRUN_OK || (before <= 0 && after <= 0))
            return s;
        before = before < 0 ? 0 : before;
        after = after < 0 ? 0 : after;
        dim = x->c.dims[axis];
    }
    if (before == 0 && after == 0)
        return clrun__mv_same(im, n, x, out, r);
    bool reflect = strcmp(mode, "reflect") == 0, edge = strcmp(mode, "edge") == 0;
    if (strcmp(mode, "wrap") == 0) { /* the axis' last `before` elements, x, its first `after` */
        if (before > dim || after > dim)
            return clrun__unsupported(im, "wrap pads of %" PRId64 " and %" PRId64 " on an axis of %" PRId64
                                      " (at most the axis' size)", before, after, dim);
        clrun__value *parts[3];
        int k = 0;
        if (before > 0 && (s = clrun__mv_slice(im, n, x, axis, dim - before, before, -1, &parts[k++])) != CLRUN_OK)
            return s;
        parts[k++] = x;
        if (after > 0 && (s = clrun__mv_slice(im, n, x, axis, 0, after, -1, &parts[k++])) != CLRUN_OK)
            return s;
        return clrun__mv_concat(im, n, parts, k, axis, out, r);
    }
    if (reflect && (before >= dim || after >= dim))
        return clrun__invalid(im, "reflect pads of %" PRId64 " and %" PRId64 " on an axis of %" PRId64,
                              before, after, dim);
    int64_t padded;
    if (!clrun__add_i64(before, after, &padded) || !clrun__add_i64(padded, dim, &padded))
        return clrun__unsupported(im, "pads of %" PRId64 " and %" PRId64 " make axis %d of size %" PRId64
                                  " out of the int64 range", before, after, axis, dim);
    if ((before > 63 || after > 63 || before + after + 1 > 64) && (reflect || edge))
        return clrun__unsupported(im, "pads of %" PRId64 " and %" PRId64 " in %s mode", before, after, mode);
    clrun__value *parts[66];
    int k = 0;
    for (int side = 0; side < 2; side++) {
        int64_t width = side == 0 ? before : after;
        if (width == 0)
            goto middle;
        if (!reflect && !edge) { /* one block of the value */
            clrun__otensor block;
            int64_t dims[CLRUN__ONNX_MAX_RANK];
            memcpy(dims, x->c.dims, sizeof dims);
            dims[axis] = width;
            if (!clrun__otensor_alloc(&block, x->c.elem, x->c.rank, dims))
                return clrun__host_result_failed(im, x->c.elem, x->c.rank, dims);
            for (uint64_t i = 0; i < clrun__otensor_count(&block); i++)
                clrun__otensor_set_real(&block, i, value);
            if ((parts[k++] = clrun__const_value(im, &block)) == NULL)
                return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        } else {
            for (int64_t j = 0; j < width; j++) {
                /* before: outermost first; reflect mirrors around the edge element */
                int64_t src = side == 0 ? (edge ? 0 : width - j) : (edge ? dim - 1 : dim - 2 - j);
                s = clrun__mv_slice(im, n, x, axis, src, 1, -1, &parts[k++]);
                if (s != CLRUN_OK)
                    return s;
            }
        }
    middle:
        if (side == 0)
            parts[k++] = x;
    }
    return clrun__mv_concat(im, n, parts, k, axis, out, r);
}

clrun_status clrun__map_pad(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 1);
    if (s != CLRUN_OK)
        return s;
    clrun__value *x = n->in[0];
    int rank = x->c.rank, count;
    int64_t pads[2 * CLRUN__ONNX_MAX_RANK];
    double value = 0;
    char mode[16];
    s = clrun__oattr_string(im, n, "mode", "constant", mode, sizeof mode);
    if (s != CLRUN_OK)
        return s;
    if (n->version < 11) {
        s = clrun__oattr_ints(im, n, n->version < 2 ? "paddings" : "pads", pads, 2 * CLRUN__ONNX_MAX_RANK, &count);
        if (s == CLRUN_OK)
            s = clrun__oattr_float(im, n, "value", 0, &value);
    } else {
        bool present;
        s = clrun__const_ints(im, n, 1, false, pads, 2 * CLRUN__ONNX_MAX_RANK, &count);
        if (s == CLRUN_OK)
            s = clrun__const_real(im, n, 2, &value, &present);
    }
    /* opset 18: input 3 names the axes the pads are for (the others get none) */
    int64_t axes[CLRUN__ONNX_MAX_RANK];
    int n_axes = -1;
    if (s == CLRUN_OK && n->version >= 18 && n->n_in > 3 && n->in[3])
        s = clrun__const_ints(im, n, 3, true, axes, CLRUN__ONNX_MAX_RANK, &n_axes);
    if (s != CLRUN_OK)
        return s;
    bool wrap = n->version >= 19 && strcmp(mode, "wrap") == 0;
    if (strcmp(mode, "constant") && strcmp(mode, "reflect") && strcmp(mode, "edge") && !wrap)
        return clrun__unsupported(im, "mode '%s' is not supported", mode);
    if (n_axes >= 0) {
        if (count != 2 * n_axes)
            return clrun__invalid(im, "pads has %d entries for %d axes", count, n_axes);
        int64_t full[2 * CLRUN__ONNX_MAX_RANK] = {0};
        bool seen[CLRUN__ONNX_MAX_RANK] = {false};
        for (int i = 0; i < n_axes; i++) {
            int ax;
            if ((s = clrun__norm_axis(im, axes[i], rank, "axes entry", &ax)) != CLRUN_OK)
                return s;
            if (seen[ax])
                return clrun__invalid(im, "axis %d is named twice in axes", ax);
            seen[ax] = true;
            full[ax] = pads[i];
            full[ax + rank] = pads[i + n_axes];
        }
        memcpy(pads, full, sizeof full);
        count = 2 * rank;
    }
    if (count != 2 * rank)
        return clrun__invalid(im, "pads has %d entries for rank %d", count, rank);
    int last = -1;
    for (int d = 0; d < rank; d++) {
        int64_t dim;
        if (!clrun__add_i64(x->c.dims[d], pads[d], &dim) || !clrun__add_i64(dim, pads[d + rank], &dim))
            return clrun__unsupported(im, "pads of %" PRId64 " and %" PRId64 " make axis %d of size %" PRId64
                                      " out of the int64 range", pads[d], pads[d + rank], d, x->c.dims[d]);
        if (dim < 0)
            return clrun__invalid(im, "pads of %" PRId64 " and %" PRId64 " remove more than axis %d of "
                                  "size %" PRId64 " holds", pads[d], pads[d + rank], d, x->c.dims[d]);
        if (pads[d] || pads[d + rank])
            last = d;
    }
    if (last < 0)
        return clrun__define_alias(im, n, 0, x);
    if (!clrun__is_const(x) && !wrap) {
        clrun_attr at[3] = {clrun__mk_ints("pads", pads, count),
                            clrun__mk_int("mode", strcmp(mode, "reflect") == 0 ? 1 : strcmp(mode, "edge") == 0 ? 2 : 0),
                            clrun__mk_float("value", value)};
        if (clrun__op_accepts("pad", &x, 1, at, 3))
            return clrun__emit1(im, n, "pad", &x, 1, at, 3, 0, NULL);
    }
    clrun__value *cur = x;
    for (int d = 0; d <= last; d++) {
        if (pads[d] == 0 && pads[d + rank] == 0)
            continue;
        s = clrun__pad_axis(im, n, cur, d, pads[d], pads[d + rank], mode, value, d == last ? 0 : -1, &cur);
        if (s != CLRUN_OK)
            return s;
    }
    return CLRUN_OK;
}

/* ---- DepthToSpace, SpaceToDepth: a reshape, a transpose and a reshape ---- */

clrun_status clrun__map_depth_space(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 1);
    if (s != CLRUN_OK)
        return s;
    clrun__value *x = n->in[0];
    int64_t b;
    char mode[8] = "DCR";
    bool to_space = strcmp(n->op, "DepthToSpace") == 0;
    s = clrun__oattr_int(im, n, "blocksize", 0, &b);
    if (s == CLRUN_OK && to_space && n->version >= 11)
        s = clrun__oattr_string(im, n, "mode", "DCR", mode, sizeof mode);
    if (s != CLRUN_OK)
        return s;
    const int64_t *d = x->c.dims;
    if (clrun__oattr_find(im, n, "blocksize") == NULL)
        return clrun__invalid(im, "attribute 'blocksize' is required");
    if (x->c.rank != 4)
        return clrun__invalid(im, "needs a rank-4 input, not rank %d", x->c.rank);
    if (b < 1)
        return clrun__invalid(im, "attribute 'blocksize' is %" PRId64 ": must be >= 1", b);
    int64_t N = d[0], C = d[1], H = d[2], W = d[3], six[6], four[4], bb, hb, wb, cbb;
    /* b² and the grown dims: an overflow is a blocksize too large for this input */
    bool fits = clrun__mul_i64(b, b, &bb) &&
                (to_space ? clrun__mul_i64(H, b, &hb) && clrun__mul_i64(W, b, &wb)
                          : clrun__mul_i64(C, bb, &cbb));
    if (!fits || (to_space && C % bb) || (!to_space && (H % b || W % b))) {
        char dx[128];
        return clrun__invalid(im, "attribute 'blocksize' is %" PRId64 ": does not fit input %s", b,
                              clrun__onnx_dims_text(x->c.rank, x->c.dims, dx, sizeof dx));
    }
    int perm[6];
    if (to_space) {
        bool crd = strcmp(mode, "CRD") == 0;
        if (!crd && strcmp(mode, "DCR"))
            return clrun__invalid(im, "mode '%s' is neither DCR nor CRD", mode);
        int64_t c = C / bb;
        int64_t dcr[6] = {N, b, b, c, H, W}, crd6[6] = {N, c, b, b, H, W};
        int pd[6] = {0, 3, 4, 1, 5, 2}, pc[6] = {0, 1, 4, 2, 5, 3};
        memcpy(six, crd ? crd6 : dcr, sizeof six);
        memcpy(perm, crd ? pc : pd, sizeof perm);
        int64_t o[4] = {N, c, hb, wb};
        memcpy(four, o, sizeof four);
    } else {
        int64_t s6[6] = {N, C, H / b, b, W / b, b}, o[4] = {N, cbb, H / b, W / b};
        int p[6] = {0, 3, 5, 1, 2, 4};
        memcpy(six, s6, sizeof six);
        memcpy(perm, p, sizeof perm);
        memcpy(four, o, sizeof four);
    }
    if (!clrun__is_const(x)) {
        clrun_attr at[2] = {clrun__mk_int("blocksize", b), clrun__mk_int("mode", strcmp(mode, "CRD") == 0)};
        const char *op = to_space ? "depth_to_space" : "space_to_depth";
        int k = to_space ? 2 : 1;
        if (clrun__op_accepts(op, &x, 1, at, k))
            return clrun__emit1(im, n, op, &x, 1, at, k, 0, NULL);
    }
    clrun__value *t;
    s = clrun__mv_reshape(im, n, x, 6, six, -1, &t);
    if (s == CLRUN_OK)
        s = clrun__mv_transpose(im, n, t, perm, -1, &t);
    return s == CLRUN_OK ? clrun__mv_reshape(im, n, t, 4, four, 0, NULL) : s;
}

/* ---- device-only ---- */

clrun_status clrun__map_trilu(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 1);
    int64_t upper, k = 0;
    int count = -1;
    if (s == CLRUN_OK)
        s = clrun__oattr_int(im, n, "upper", 1, &upper);
    if (s == CLRUN_OK)
        s = clrun__const_ints(im, n, 1, true, &k, 1, &count);
    if (s != CLRUN_OK)
        return s;
    if (count == 0)
        return clrun__invalid(im, "input 'k' is empty");
    if (count < 0)
        k = 0;
    clrun__value *x = n->in[0];
    if (x->c.rank < 2)
        return clrun__invalid(im, "needs an input of rank >= 2, not %d", x->c.rank);
    /* Diagonals beyond the matrix keep all or nothing: clamped to [-rows, cols] the same, and
     * small enough for any kernel's index arithmetic. */
    int64_t rows = x->c.dims[x->c.rank - 2], cols = x->c.dims[x->c.rank - 1];
    k = k < -rows ? -rows : k > cols ? cols : k;
    clrun_attr a[2] = {clrun__mk_int("upper", upper), clrun__mk_int("k", k)};
    return clrun__emit1(im, n, "trilu", &x, 1, a, 2, 0, NULL);
}

clrun_status clrun__map_cumsum(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 2);
    int64_t exclusive, reverse, axis = 0;
    int a, count = -1;
    if (s == CLRUN_OK)
        s = clrun__oattr_int(im, n, "exclusive", 0, &exclusive);
    if (s == CLRUN_OK)
        s = clrun__oattr_int(im, n, "reverse", 0, &reverse);
    if (s == CLRUN_OK)
        s = clrun__const_ints(im, n, 1, false, &axis, 1, &count);
    if (s == CLRUN_OK && count != 1)
        s = clrun__invalid(im, "input 'axis' must hold one integer");
    if (s == CLRUN_OK)
        s = clrun__norm_axis(im, axis, n->in[0]->c.rank, "axis", &a);
    if (s != CLRUN_OK)
        return s;
    clrun__value *x = n->in[0];
    clrun_attr at[3] = {clrun__mk_int("axis", a), clrun__mk_int("exclusive", exclusive),
                        clrun__mk_int("reverse", reverse)};
    return clrun__emit1(im, n, "cumsum", &x, 1, at, 3, 0, NULL);
}

/* ---- Resize, Upsample ---- */

static int code_of(const char *const *names, int count, const char *name)
{
    for (int i = 0; i < count; i++)
        if (strcmp(names[i], name) == 0)
            return i;
    return -1;
}

/* tf_crop_and_resize: the resize of the region of interest, then, for each axis on which some
 * output's coordinate falls outside the input (the reference gives those outputs the
 * extrapolation value), where(outside, extrapolation, resized) with that axis's constant mask,
 * broadcast over the others: as large as the axis, not as the output. */
static clrun_status crop_and_resize(clrun__imp *im, clrun__onode *n, clrun__value *x, int rank,
                                    const int64_t *sizes, const double *scales, const double *roi,
                                    double extrapolation, clrun_attr *at, int k)
{
    bool *outside[CLRUN__ONNX_MAX_RANK] = {NULL};
    int last = -1; /* the last axis with an output outside */
    bool ok = true;
    for (int d = 0; d < rank; d++) {
        int64_t in = x->c.dims[d];
        double length = scales ? scales[d] * (double)in : (double)sizes[d];
        outside[d] = calloc((size_t)sizes[d], sizeof *outside[d]);
        ok = ok && outside[d];
        for (int64_t c = 0; outside[d] && c < sizes[d]; c++) {
            double at_c = clrun__resize_crop_coordinate(roi[d], roi[rank + d], in, length, sizes[d], c);
            outside[d][c] = !(at_c >= 0 && at_c <= (double)(in - 1));
            last = outside[d][c] ? d : last;
        }
    }
    clrun_status s = ok ? CLRUN_OK : CLRUN__OOM(im);
    clrun__otensor fill = {0};
    clrun__value *y = NULL, *e = NULL;
    if (s == CLRUN_OK && last < 0)
        s = clrun__emit1(im, n, "resize", &x, 1, at, k, 0, NULL);
    else if (s == CLRUN_OK) {
        if (!clrun__otensor_alloc(&fill, x->c.elem, 0, NULL))
            s = CLRUN__OOM(im);
        if (s == CLRUN_OK) {
            clrun__otensor_set_real(&fill, 0, extrapolation);
            if ((e = clrun__const_value(im, &fill)) == NULL)
                s = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        }
        if (s == CLRUN_OK)
            s = clrun__emit1(im, n, "resize", &x, 1, at, k, -1, &y);
    }
    for (int d = 0; s == CLRUN_OK && last >= 0 && d <= last; d++) {
        bool some = false;
        for (int64_t c = 0; c < sizes[d]; c++)
            some = some || outside[d][c];
        if (!some)
            continue;
        int64_t dims[CLRUN__ONNX_MAX_RANK];
        for (int j = 0; j < rank; j++)
            dims[j] = j == d ? sizes[d] : 1;
        clrun__otensor mask = {0};
        if (!clrun__otensor_alloc(&mask, ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, rank, dims))
            s = CLRUN__OOM(im);
        for (int64_t c = 0; s == CLRUN_OK && c < sizes[d]; c++)
            clrun__otensor_set_int(&mask, (uint64_t)c, outside[d][c]);
        clrun__value *m = s == CLRUN_OK ? clrun__const_value(im, &mask) : NULL;
        if (s == CLRUN_OK && m == NULL)
            s = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        clrun__value *in[3] = {m, e, y};
        if (s == CLRUN_OK)
            s = clrun__emit1(im, n, "where", in, 3, NULL, 0, d == last ? 0 : -1, d == last ? NULL : &y);
        clrun__otensor_free(&mask);
    }
    clrun__otensor_free(&fill);
    for (int d = 0; d < rank; d++)
        free(outside[d]);
    return s;
}

clrun_status clrun__map_resize(clrun__imp *im, clrun__onode *n)
{
    static const char *const modes[] = {"nearest", "linear", "cubic"};
    static const char *const coords[] = {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel",
                                         "tf_half_pixel_for_nn", "tf_crop_and_resize"};
    static const char *const nearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    clrun_status s = clrun__need_inputs(im, n, 1);
    if (s != CLRUN_OK)
        return s;
    clrun__value *x = n->in[0];
    int rank = x->c.rank;
    bool legacy = strcmp(n->op, "Upsample") == 0 || n->version < 11;
    char mode[32], coord[32] = "asymmetric", near[32] = "floor";
    double a = -0.75, scales[CLRUN__ONNX_MAX_RANK];
    int64_t exclude = 0, antialias = 0, sizes[CLRUN__ONNX_MAX_RANK], axes[CLRUN__ONNX_MAX_RANK];
    int n_scales = -1, n_sizes = -1, n_axes = -1;
    char policy[16] = "stretch";
    double extrapolation = 0, roi[2 * CLRUN__ONNX_MAX_RANK];
    int n_roi = -1;
    bool resized[CLRUN__ONNX_MAX_RANK] = {false}, keep_sizes = false;
    s = clrun__oattr_string(im, n, "mode", "nearest", mode, sizeof mode);
    if (s == CLRUN_OK && legacy) {
        /* Upsample and Resize-10: asymmetric coordinates, floor for nearest; scales from the
         * attribute (Upsample-7) or input 1. */
        if (strcmp(n->op, "Upsample") == 0 && n->version < 9) {
            s = clrun__oattr_floats(im, n, "scales", scales, CLRUN__ONNX_MAX_RANK, &n_scales);
        } else {
            const clrun__otensor *t;
            s = clrun__const_input(im, n, 1, false, &t);
            if (s == CLRUN_OK) {
                n_scales = (int)clrun__otensor_count(t);
                for (int i = 0; i < n_scales && i < CLRUN__ONNX_MAX_RANK; i++)
                    scales[i] = clrun__otensor_get_real(t, (uint64_t)i);
            }
        }
    } else if (s == CLRUN_OK) {
        s = clrun__oattr_string(im, n, "coordinate_transformation_mode", "half_pixel", coord, sizeof coord);
        if (s == CLRUN_OK)
            s = clrun__oattr_string(im, n, "nearest_mode", "round_prefer_floor", near, sizeof near);
        if (s == CLRUN_OK)
            s = clrun__oattr_float(im, n, "cubic_coeff_a", -0.75, &a);
        if (s == CLRUN_OK)
            s = clrun__oattr_int(im, n, "exclude_outside", 0, &exclude);
        if (s == CLRUN_OK)
            s = clrun__oattr_float(im, n, "extrapolation_value", 0, &extrapolation);
        if (s == CLRUN_OK && n->version >= 18) {
            s = clrun__oattr_int(im, n, "antialias", 0, &antialias);
            if (s == CLRUN_OK)
                s = clrun__oattr_ints(im, n, "axes", axes, CLRUN__ONNX_MAX_RANK, &n_axes);
            if (s == CLRUN_OK)
                s = clrun__oattr_string(im, n, "keep_aspect_ratio_policy", "stretch", policy, sizeof policy);
        }
        const clrun__otensor *t = NULL;
        if (s == CLRUN_OK && n->n_in > 3 && n->in[3])
            s = clrun__const_ints(im, n, 3, true, sizes, CLRUN__ONNX_MAX_RANK, &n_sizes);
        if (s == CLRUN_OK && n->n_in > 2 && n->in[2])
            s = clrun__const_input(im, n, 2, true, &t);
        if (s == CLRUN_OK && t && clrun__otensor_count(t) > 0) {
            n_scales = (int)clrun__otensor_count(t);
            for (int i = 0; i < n_scales && i < CLRUN__ONNX_MAX_RANK; i++)
                scales[i] = clrun__otensor_get_real(t, (uint64_t)i);
        }
        if (n_sizes == 0)
            n_sizes = -1;
        const clrun__otensor *r = NULL;
        if (s == CLRUN_OK && strcmp(coord, "tf_crop_and_resize") == 0)
            s = clrun__const_input(im, n, 1, false, &r);
        if (s == CLRUN_OK && r) {
            if (clrun__otensor_count(r) > 2 * CLRUN__ONNX_MAX_RANK)
                return clrun__invalid(im, "roi has %" PRIu64 " entries", clrun__otensor_count(r));
            n_roi = (int)clrun__otensor_count(r);
            for (int i = 0; i < n_roi; i++)
                roi[i] = clrun__otensor_get_real(r, (uint64_t)i);
        }
    }
    if (s != CLRUN_OK)
        return s;
    if (antialias != 0)
        return clrun__unsupported(im, "antialias=%" PRId64 " is not supported", antialias);
    if (strcmp(policy, "stretch") && strcmp(policy, "not_larger") && strcmp(policy, "not_smaller"))
        return clrun__invalid(im, "keep_aspect_ratio_policy '%s' is not stretch, not_larger or not_smaller",
                              policy);
    if (n_axes >= 0) { /* opset 18: scales or sizes for these axes only; the others stay */
        int given = n_sizes >= 0 ? n_sizes : n_scales;
        if (given >= 0 && given != n_axes)
            return clrun__invalid(im, "%s has %d entries for %d axes", n_sizes >= 0 ? "sizes" : "scales",
                                  given, n_axes);
        double full_scales[CLRUN__ONNX_MAX_RANK];
        int64_t full_sizes[CLRUN__ONNX_MAX_RANK];
        bool seen[CLRUN__ONNX_MAX_RANK] = {false};
        for (int d = 0; d < rank; d++) {
            full_scales[d] = 1;
            full_sizes[d] = x->c.dims[d];
        }
        for (int i = 0; i < n_axes; i++) {
            int ax;
            if ((s = clrun__norm_axis(im, axes[i], rank, "axes entry", &ax)) != CLRUN_OK)
                return s;
            if (seen[ax])
                return clrun__invalid(im, "axis %d is named twice in axes", ax);
            seen[ax] = true;
            resized[ax] = true;
            if (n_scales >= 0)
                full_scales[ax] = scales[i];
            if (n_sizes >= 0)
                full_sizes[ax] = sizes[i];
        }
        if (n_scales >= 0) {
            memcpy(scales, full_scales, sizeof full_scales);
            n_scales = rank;
        }
        if (n_sizes >= 0) {
            memcpy(sizes, full_sizes, sizeof full_sizes);
            n_sizes = rank;
        }
    } else {
        for (int d = 0; d < rank; d++)
            resized[d] = true;
    }
    if (n_roi >= 0) { /* [starts..., ends...] of the axes given (all of them by default) */
        int given = n_axes >= 0 ? n_axes : rank;
        if (n_roi != 2 * given)
            return clrun__invalid(im, "roi has %d entries for %d axes (a start and an end each)", n_roi, given);
        double starts[CLRUN__ONNX_MAX_RANK], ends[CLRUN__ONNX_MAX_RANK];
        for (int d = 0; d < rank; d++) {
            starts[d] = 0;
            ends[d] = 1;
        }
        for (int i = 0; i < given; i++) {
            int ax = i;
            if (n_axes >= 0 && (s = clrun__norm_axis(im, axes[i], rank, "axes entry", &ax)) != CLRUN_OK)
                return s;
            starts[ax] = roi[i];
            ends[ax] = roi[given + i];
            if (!isfinite(starts[ax]) || !isfinite(ends[ax]))
                return clrun__invalid(im, "roi of axis %d is [%g, %g]", ax, starts[ax], ends[ax]);
        }
        for (int d = 0; d < rank; d++) {
            roi[d] = starts[d];
            roi[rank + d] = ends[d];
        }
    }
    if (strcmp(policy, "stretch") != 0 && n_sizes == rank && n_scales < 0) {
        /* one scale for every resized axis, the smallest (not_larger) or largest of
         * sizes / input; sizes then round(scale * input), half up (the spec's round_int) */
        bool larger = strcmp(policy, "not_smaller") == 0, first = true;
        double common = 1;
        for (int d = 0; d < rank; d++) {
            if (!resized[d])
                continue;
            if (x->c.dims[d] == 0)
                return clrun__unsupported(im, "an empty axis %d", d);
            double ratio = (double)sizes[d] / (double)x->c.dims[d];
            if (first || (larger ? ratio > common : ratio < common))
                common = ratio;
            first = false;
        }
        for (int d = 0; d < rank; d++) {
            scales[d] = resized[d] ? common : 1;
            double size = resized[d] ? floor(common * (double)x->c.dims[d] + 0.5) : (double)x->c.dims[d];
            if (!(size < 0x1p63))
                return clrun__unsupported(im, "keep_aspect_ratio_policy makes axis %d larger than 2^63 - 1", d);
            sizes[d] = (int64_t)size;
        }
        n_scales = rank;
        keep_sizes = true;
    }
    if (strcmp(coord, "half_pixel_symmetric") == 0 && n->version >= 19) {
        /* half_pixel shifted by (in/2)(1 - out/(in·scale)): the same as half_pixel where the
         * output's size is exactly the input's times the scale (always so for sizes) */
        for (int d = 0; n_scales >= 0 && d < rank && d < n_scales; d++) {
            double exact = (double)x->c.dims[d] * scales[d];
            if (exact != floor(exact))
                return clrun__unsupported(im, "coordinate_transformation_mode=half_pixel_symmetric with "
                                          "scale %g on axis %d of size %" PRId64 " (a fractional output "
                                          "size) is not supported", scales[d], d, x->c.dims[d]);
        }
        strcpy(coord, "half_pixel");
    }
    int m = code_of(modes, 3, strcmp(mode, "bilinear") == 0 ? "linear" : mode), c = code_of(coords, 6, coord),
        r = code_of(nearest, 4, near);
    if (m < 0 || c < 0 || r < 0)
        return clrun__unsupported(im, "mode %s, coordinates %s, nearest_mode %s: not supported", mode, coord, near);
    if ((n_sizes >= 0) == (n_scales >= 0) && !keep_sizes)
        return clrun__invalid(im, "exactly one of scales and sizes must be given");
    if ((n_sizes >= 0 ? n_sizes : n_scales) != rank)
        return clrun__invalid(im, "%s has %d entries for rank %d", n_sizes >= 0 ? "sizes" : "scales",
                              n_sizes >= 0 ? n_sizes : n_scales, rank);
    bool same = true;
    for (int d = 0; d < rank; d++) {
        if (n_scales >= 0 && !keep_sizes) {
            if (!(scales[d] > 0) || !isfinite(scales[d]))
                return clrun__invalid(im, "scale %d is %g", d, scales[d]);
            double size = floor((double)x->c.dims[d] * scales[d]);
            if (!(size < 0x1p63)) /* 2^63 itself does not convert */
                return clrun__unsupported(im, "scale %d (%g) makes axis %d of size %" PRId64 " larger "
                                          "than 2^63 - 1", d, scales[d], d, x->c.dims[d]);
            sizes[d] = (int64_t)size;
        }
        if (sizes[d] < 0)
            return clrun__invalid(im, "sizes entry %d is %" PRId64, d, sizes[d]);
        same = same && sizes[d] == x->c.dims[d] && (n_scales < 0 || scales[d] == 1);
    }
    bool crop = c == CLRUN__COORD_TF_CROP_AND_RESIZE;
    for (int d = 0; crop && d < rank; d++)
        same = same && roi[d] == 0 && roi[rank + d] == 1;
    if (same)
        return clrun__define_alias(im, n, 0, x);
    clrun_attr at[6 + 3 * CLRUN__ONNX_MAX_RANK];
    int k = 0;
    static const char *const scale_names[CLRUN_MAX_DIMS] = {"scale0", "scale1", "scale2", "scale3",
                                                            "scale4", "scale5", "scale6", "scale7"};
    at[k++] = clrun__mk_ints("sizes", sizes, rank);
    at[k++] = clrun__mk_int("mode", m);
    at[k++] = clrun__mk_int("coordinate_transformation_mode", c);
    at[k++] = clrun__mk_int("nearest_mode", r);
    at[k++] = clrun__mk_float("cubic_coeff_a", a);
    at[k++] = clrun__mk_int("exclude_outside", exclude != 0);
    for (int d = 0; n_scales >= 0 && d < rank && d < CLRUN_MAX_DIMS; d++)
        at[k++] = clrun__mk_float(scale_names[d], scales[d]);
    if (!crop)
        return clrun__emit1(im, n, "resize", &x, 1, at, k, 0, NULL);
    for (int d = 0; d < rank && d < CLRUN_MAX_DIMS; d++) {
        at[k++] = clrun__mk_float(clrun__resize_roi_start_names[d], roi[d]);
        at[k++] = clrun__mk_float(clrun__resize_roi_end_names[d], roi[rank + d]);
    }
    return crop_and_resize(im, n, x, rank, sizes, n_scales >= 0 ? scales : NULL, roi,
                           extrapolation, at, k);
}
