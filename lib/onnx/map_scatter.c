/* Writing by index and index tuples: Scatter (the deprecated name of ScatterElements),
 * ScatterElements, ScatterND, GatherND and TopK, onto the graph ops of
 * lib/graph/infer_scatter.c (TopK: top_k_indices, then gather_elements for the values). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/map.h"

/* Indices of the ONNX ops: int32 or int64 (ONNX's Tind); the graph ops take both. */
static clrun_status check_indices(clrun__imp *im, const clrun__value *indices)
{
    if (indices->c.elem == CLRUN__ONNX_INT64 || indices->c.elem == CLRUN__ONNX_INT32)
        return CLRUN_OK;
    char name[32];
    return clrun__invalid(im, "indices are %s: expected int32 or int64",
                          clrun__onnx_elem_name(indices->c.elem, name, sizeof name));
}

/* The reduction attribute (opset 16 on) as the graph ops' code: 0 none, 1 add, 2 mul; max and
 * min (opset 18) as 3 and 4, which the mappings compose (scatter_max_min). */
static clrun_status reduction_code(clrun__imp *im, clrun__onode *n, int64_t *code)
{
    *code = 0;
    if (n->version < 16)
        return CLRUN_OK;
    char text[32];
    clrun_status s = clrun__oattr_string(im, n, "reduction", "none", text, sizeof text);
    if (s != CLRUN_OK)
        return s;
    static const char *const names[] = {"none", "add", "mul"};
    for (int i = 0; i < 3; i++)
        if (strcmp(text, names[i]) == 0) {
            *code = i;
            return CLRUN_OK;
        }
    if (n->version >= 18 && (strcmp(text, "max") == 0 || strcmp(text, "min") == 0)) {
        *code = text[1] == 'a' ? 3 : 4;
        return CLRUN_OK;
    }
    if (strcmp(text, "max") == 0 || strcmp(text, "min") == 0)
        return clrun__invalid(im, "reduction '%s' came in opset 18", text);
    return clrun__invalid(im, "reduction '%s' is not one of none, add, mul, max, min", text);
}

static int compare_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Reduction max or min (opset 18) as maximum(data, scatter(data, indices, updates)) (or
 * minimum): exact when no two updates go to the same element, which the indices, known at load,
 * must show; positions[0..count) are their targets as offsets into data (an index out of range
 * fails the run as for any scatter). */
static clrun_status scatter_max_min(clrun__imp *im, clrun__onode *n, const char *op, clrun__value *const *in,
                                    const clrun_attr *at, int n_at, int64_t reduction, int64_t *positions,
                                    uint64_t count)
{
    qsort(positions, count, sizeof *positions, compare_i64);
    for (uint64_t i = 1; i < count; i++)
        if (positions[i] == positions[i - 1]) {
            free(positions);
            return clrun__unsupported(im, "reduction '%s' with two updates of one element is not supported",
                                      reduction == 3 ? "max" : "min");
        }
    free(positions);
    clrun__value *t;
    clrun_status s = clrun__emit1(im, n, op, in, 3, at, n_at, -1, &t);
    return s == CLRUN_OK ? clrun__emit_binary(im, n, reduction == 3 ? "maximum" : "minimum", in[0], t, 0, NULL) : s;
}

/* The indices of a max/min reduction must be known at load; their count, and room for them. */
static clrun_status positions_of(clrun__imp *im, const clrun__onode *n, uint64_t count, int64_t **positions)
{
    *positions = NULL;
    if (!clrun__is_const(n->in[1]))
        return clrun__unsupported(im, "reduction max or min with indices known only at run time is not "
                                  "supported (input 1 '%s' must be a constant)", n->proto->input[1]);
    if ((*positions = malloc((count + 1) * sizeof **positions)) == NULL)
        return CLRUN__OOM(im);
    return CLRUN_OK;
}

/* Index i of t on an axis of dim elements, negatives from the end; -1 when outside it. */
static int64_t index_at(const clrun__otensor *t, uint64_t i, int64_t dim)
{
    int64_t v = clrun__otensor_get_int(t, i);
    if (v < 0 && v >= -dim)
        v += dim;
    return v >= 0 && v < dim ? v : -1;
}

static clrun_status outside(clrun__imp *im, const clrun__onode *n, int64_t *positions, uint64_t i)
{
    free(positions);
    return clrun__invalid(im, "index %" PRId64 " of input 1 '%s' is outside the data", clrun__otensor_get_int(&n->in[1]->c, i),
                          n->proto->input[1]);
}

clrun_status clrun__map_scatter_elements(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 3);
    int64_t axis = 0, reduction = 0;
    int a = 0;
    if (s == CLRUN_OK)
        s = clrun__oattr_int(im, n, "axis", 0, &axis);
    if (s == CLRUN_OK)
        s = clrun__norm_axis(im, axis, n->in[0]->c.rank, "axis", &a);
    if (s == CLRUN_OK && strcmp(n->op, "ScatterElements") == 0)
        s = reduction_code(im, n, &reduction);
    if (s == CLRUN_OK)
        s = check_indices(im, n->in[1]);
    if (s != CLRUN_OK)
        return s;
    clrun__value *in[3] = {n->in[0], n->in[1], n->in[2]};
    clrun_attr at[2] = {clrun__mk_int("axis", a), clrun__mk_int("reduction", reduction > 2 ? 0 : reduction)};
    if (reduction <= 2)
        return clrun__emit1(im, n, "scatter_elements", in, 3, at, 2, 0, NULL);
    const clrun__otensor *data = &n->in[0]->c, *idx = &n->in[1]->c;
    uint64_t count = clrun__otensor_count(idx);
    int64_t *positions;
    if ((s = positions_of(im, n, count, &positions)) != CLRUN_OK)
        return s;
    if (idx->rank != data->rank) {
        free(positions);
        return clrun__invalid(im, "indices have rank %d, the data %d", idx->rank, data->rank);
    }
    for (uint64_t i = 0; i < count; i++) { /* the element's coordinates, axis a replaced */
        uint64_t rest = i;
        int64_t offset = 0, stride = 1;
        for (int d = idx->rank - 1; d >= 0; d--) {
            int64_t c = (int64_t)(rest % (uint64_t)idx->dims[d]);
            rest /= (uint64_t)idx->dims[d];
            if (d == a && (c = index_at(idx, i, data->dims[a])) < 0)
                return outside(im, n, positions, i);
            if (c >= data->dims[d]) { /* indices larger than the data off the axis */
                free(positions);
                return clrun__invalid(im, "indices are larger than the data on axis %d", d);
            }
            offset += c * stride;
            stride *= data->dims[d];
        }
        positions[i] = offset;
    }
    return scatter_max_min(im, n, "scatter_elements", in, at, 2, reduction, positions, count);
}

clrun_status clrun__map_scatter_nd(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 3);
    int64_t reduction = 0;
    if (s == CLRUN_OK)
        s = reduction_code(im, n, &reduction);
    if (s == CLRUN_OK)
        s = check_indices(im, n->in[1]);
    if (s != CLRUN_OK)
        return s;
    clrun__value *in[3] = {n->in[0], n->in[1], n->in[2]};
    clrun_attr at = clrun__mk_int("reduction", reduction > 2 ? 0 : reduction);
    if (reduction <= 2)
        return clrun__emit1(im, n, "scatter_nd", in, 3, &at, 1, 0, NULL);
    const clrun__otensor *data = &n->in[0]->c, *idx = &n->in[1]->c;
    int64_t last = idx->rank ? idx->dims[idx->rank - 1] : 0;
    if (last < 1 || last > data->rank)
        return clrun__invalid(im, "indices' last dimension must be 1 to the data's rank %d", data->rank);
    int k = (int)last;
    uint64_t count = clrun__otensor_count(idx) / (uint64_t)k;
    int64_t *positions;
    if ((s = positions_of(im, n, count, &positions)) != CLRUN_OK)
        return s;
    for (uint64_t i = 0; i < count; i++) { /* the tuple's slice, as an offset over dims 0..k-1 */
        int64_t offset = 0;
        for (int j = 0; j < k; j++) {
            int64_t c = index_at(idx, i * (uint64_t)k + (uint64_t)j, data->dims[j]);
            if (c < 0)
                return outside(im, n, positions, i * (uint64_t)k + (uint64_t)j);
            offset = offset * data->dims[j] + c; /* below the data's element count */
        }
        positions[i] = offset;
    }
    return scatter_max_min(im, n, "scatter_nd", in, &at, 1, reduction, positions, count);
}

clrun_status clrun__map_gather_nd(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 2);
    int64_t batch = 0;
    if (s == CLRUN_OK && n->version >= 12)
        s = clrun__oattr_int(im, n, "batch_dims", 0, &batch);
    if (s == CLRUN_OK)
        s = check_indices(im, n->in[1]);
    if (s != CLRUN_OK)
        return s;
    clrun__value *in[2] = {n->in[0], n->in[1]};
    clrun_attr at = clrun__mk_int("batch_dims", batch);
    return clrun__emit1(im, n, "gather_nd", in, 2, &at, 1, 0, NULL);
}

/* TopK: k an attribute (opset 1) or a constant input K (opset 10 on); largest and sorted from
 * opset 11 (sorted=0 leaves the order unspecified: the sorted order is one). */
clrun_status clrun__map_top_k(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 1);
    int64_t axis = -1, largest = 1, sorted = 1, k = 0;
    int a = 0;
    if (s == CLRUN_OK)
        s = clrun__oattr_int(im, n, "axis", -1, &axis);
    if (s == CLRUN_OK)
        s = clrun__norm_axis(im, axis, n->in[0]->c.rank, "axis", &a);
    if (s == CLRUN_OK && n->version >= 11)
        s = clrun__oattr_int(im, n, "largest", 1, &largest);
    if (s == CLRUN_OK && n->version >= 11)
        s = clrun__oattr_int(im, n, "sorted", 1, &sorted);
    if (s == CLRUN_OK && n->version < 10) {
        if (clrun__oattr_find(im, n, "k") == NULL)
            return clrun__invalid(im, "attribute 'k' is missing");
        s = clrun__oattr_int(im, n, "k", 0, &k);
    } else if (s == CLRUN_OK) {
        int count;
        s = clrun__const_ints(im, n, 1, false, &k, 1, &count);
        if (s == CLRUN_OK && count != 1)
            return clrun__invalid(im, "K has %d values: expected one", count);
    }
    if (s != CLRUN_OK)
        return s;
    (void)sorted;
    const clrun__value *x = n->in[0];
    if (k < 0 || k > x->c.dims[a])
        return clrun__invalid(im, "k is %" PRId64 ": must be 0 to %" PRId64 ", the length of axis %d",
                              k, x->c.dims[a], a);
    if (largest != 0 && largest != 1)
        return clrun__invalid(im, "largest is %" PRId64 ": expected 0 or 1", largest);
    if (k == 0) { /* empty outputs, known at load: no kernel */
        int64_t dims[CLRUN__ONNX_MAX_RANK];
        memcpy(dims, x->c.dims, sizeof dims);
        dims[a] = 0;
        s = n->n_out > 0 && n->out[0] >= 0 ? clrun__mv_empty(im, n, x->c.elem, x->c.rank, dims, 0, NULL) : CLRUN_OK;
        if (s == CLRUN_OK && n->n_out > 1 && n->out[1] >= 0)
            s = clrun__mv_empty(im, n, CLRUN__ONNX_INT64, x->c.rank, dims, 1, NULL);
        return s;
    }
    clrun__value *in[2] = {n->in[0], NULL}, *indices;
    clrun_attr at[3] = {clrun__mk_int("k", k), clrun__mk_int("axis", a),
                        clrun__mk_int("largest", largest)};
    s = clrun__emit1(im, n, "top_k_indices", in, 1, at, 3, 1, &indices);
    if (s != CLRUN_OK)
        return s;
    in[1] = indices;
    clrun_attr ax = clrun__mk_int("axis", a);
    return clrun__emit1(im, n, "gather_elements", in, 2, &ax, 1, 0, NULL);
}
