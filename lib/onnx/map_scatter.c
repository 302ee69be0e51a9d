/* Writing by index and index tuples: Scatter (the deprecated name of ScatterElements),
 * ScatterElements, ScatterND, GatherND and TopK, onto the graph ops of
 * lib/graph/infer_scatter.c (TopK: top_k_indices, then gather_elements for the values). */
#include <inttypes.h>
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

/* The reduction attribute (opset 16 on) as the graph ops' code: 0 none, 1 add, 2 mul. */
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
    if (strcmp(text, "max") == 0 || strcmp(text, "min") == 0)
        return clrun__unsupported(im, "reduction '%s' is not supported (none, add and mul are)", text);
    return clrun__invalid(im, "reduction '%s' is not one of none, add, mul, max, min", text);
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
    clrun_attr at[2] = {clrun__mk_int("axis", a), clrun__mk_int("reduction", reduction)};
    return clrun__emit1(im, n, "scatter_elements", in, 3, at, 2, 0, NULL);
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
    clrun_attr at = clrun__mk_int("reduction", reduction);
    return clrun__emit1(im, n, "scatter_nd", in, 3, &at, 1, 0, NULL);
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
    if (k == 0)
        return clrun__unsupported(im, "k is 0: the outputs would be empty (clrun tensors have no "
                                  "empty dimensions)");
    if (largest != 0 && largest != 1)
        return clrun__invalid(im, "largest is %" PRId64 ": expected 0 or 1", largest);
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
