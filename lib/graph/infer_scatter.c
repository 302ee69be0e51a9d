/* Type rules of the ops that write by index or pick by index tuples: scatter_elements and
 * scatter_nd (a copy of the data with updates written, added or multiplied in at the positions
 * the indices name), gather_nd (slices picked by index tuples) and top_k_indices (the positions
 * of the k largest or smallest elements along an axis). Scattering without a reduction and
 * gather_nd move elements of any dtype; the reductions and top_k_indices compute, on f32, f64,
 * i32 and i64. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "graph/layout_geometry.h"
#include "graph/op.h"
#include "graph/op_families.h"
#include "graph/op_geometry.h"
#include "graph/types.h"

static clrun_status check_indices(const clrun_tensor_type *indices, const clrun__infer_error *err)
{
    if (indices->dtype == CLRUN_I32 || indices->dtype == CLRUN_I64)
        return CLRUN_OK;
    char si[CLRUN__TYPE_TEXT];
    return clrun__refuse(err, "indices are %s: expected i32 or i64",
                         clrun__type_format(indices, si, sizeof si));
}

/* The dtypes the arithmetic ops compute on. */
static bool arithmetic(clrun_dtype t)
{
    return t == CLRUN_F32 || t == CLRUN_F64 || t == CLRUN_I32 || t == CLRUN_I64;
}

/* Names a dtype the arithmetic ops refuse: `what` (a reduction, top_k) on it. */
static clrun_status check_arithmetic(const clrun_tensor_type *x, const char *what,
                                     const clrun__infer_error *err)
{
    if (arithmetic(x->dtype))
        return CLRUN_OK;
    char sx[CLRUN__TYPE_TEXT];
    return clrun__refuse(err, "%s of %s: computed on f32, f64, i32 and i64 only", what,
                         clrun__type_format(x, sx, sizeof sx));
}

static const char *const reduction_names[] = {"none", "add", "mul"};

/* The reduction attribute (0 none, 1 add, 2 mul) and the data's dtype it needs. */
static clrun_status check_reduction(const clrun__op_call *call, const clrun__infer_error *err)
{
    clrun_status s = clrun__check_int_range(call, "reduction", 0, 2, err);
    int64_t r = clrun__attr_int_or(call, "reduction", 0);
    if (s != CLRUN_OK || r == 0)
        return s;
    char what[32];
    snprintf(what, sizeof what, "reduction '%s'", reduction_names[r]);
    return check_arithmetic(&call->inputs[0], what, err);
}

static bool same_dims(const clrun_tensor_type *a, const clrun_tensor_type *b)
{
    return a->rank == b->rank &&
           memcmp(a->shape, b->shape, (size_t)a->rank * sizeof a->shape[0]) == 0;
}

/* ---- scatter_elements -------------------------------------------------------------------- */

static const clrun__attr_spec scatter_elements_attrs[] = {
    {"axis", CLRUN__WANT_INT, false},
    {"reduction", CLRUN__WANT_INT, false},
};

/* data, indices, updates -> data with updates[c] written at c with the axis coordinate replaced
 * by indices[c] (ONNX ScatterElements). */
static clrun_status scatter_elements_infer(const clrun__op_call *call, clrun_tensor_type *out,
                                           char *errbuf, size_t errlen)
{
    const clrun__infer_error err = {"scatter_elements", errbuf, errlen};
    clrun_status s = clrun__check_any_call(call, 3, 3, scatter_elements_attrs, 2, &err);
    int axis = 0;
    if (s == CLRUN_OK)
        s = clrun__op_axis(call, 0, &axis, &err);
    if (s == CLRUN_OK)
        s = check_indices(&call->inputs[1], &err);
    if (s == CLRUN_OK)
        s = check_reduction(call, &err);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *data = &call->inputs[0], *indices = &call->inputs[1];
    const clrun_tensor_type *updates = &call->inputs[2];
    char sd[CLRUN__TYPE_TEXT], si[CLRUN__TYPE_TEXT], su[CLRUN__TYPE_TEXT];
    bool fits = indices->rank == data->rank;
    for (int d = 0; fits && d < data->rank; d++)
        fits = d == axis || indices->shape[d] <= data->shape[d];
    if (!fits)
        return clrun__refuse(&err, "indices %s do not fit data %s: same rank, and no larger off "
                             "axis %d", clrun__type_format(indices, si, sizeof si),
                             clrun__type_format(data, sd, sizeof sd), axis);
    if (updates->dtype != data->dtype || !same_dims(updates, indices))
        return clrun__refuse(&err, "updates are %s: expected data's dtype and the indices' shape "
                             "(data %s, indices %s)", clrun__type_format(updates, su, sizeof su),
                             clrun__type_format(data, sd, sizeof sd),
                             clrun__type_format(indices, si, sizeof si));
    out[0] = *data;
    return CLRUN_OK;
}

/* ---- scatter_nd, gather_nd --------------------------------------------------------------- */

/* The tuple length k = indices' last dim, which must be in [1, data's rank - batch]. */
static clrun_status tuple_length(const clrun_tensor_type *data, const clrun_tensor_type *indices,
                                 int batch, int *k, const clrun__infer_error *err)
{
    char sd[CLRUN__TYPE_TEXT], si[CLRUN__TYPE_TEXT];
    if (indices->rank < 1)
        return clrun__refuse(err, "indices are %s: expected [..., k], tuples of k indices",
                             clrun__type_format(indices, si, sizeof si));
    int64_t last = indices->shape[indices->rank - 1];
    if (last > data->rank - batch)
        return clrun__refuse(err, "indices %s hold tuples of %" PRId64 " indices: data %s has %d "
                             "dimensions%s", clrun__type_format(indices, si, sizeof si), last,
                             clrun__type_format(data, sd, sizeof sd), data->rank - batch,
                             batch ? " after its batch dimensions" : "");
    *k = (int)last;
    return CLRUN_OK;
}

static const clrun__attr_spec scatter_nd_attrs[] = {{"reduction", CLRUN__WANT_INT, false}};

/* data, indices [..., k], updates [indices' dims but the last, data's dims after k] -> data
 * with each update slice written at the slice its index tuple names (ONNX ScatterND). */
static clrun_status scatter_nd_infer(const clrun__op_call *call, clrun_tensor_type *out,
                                     char *errbuf, size_t errlen)
{
    const clrun__infer_error err = {"scatter_nd", errbuf, errlen};
    clrun_status s = clrun__check_any_call(call, 3, 3, scatter_nd_attrs, 1, &err);
    if (s == CLRUN_OK)
        s = check_indices(&call->inputs[1], &err);
    if (s == CLRUN_OK)
        s = check_reduction(call, &err);
    const clrun_tensor_type *data = &call->inputs[0], *indices = &call->inputs[1];
    const clrun_tensor_type *updates = &call->inputs[2];
    int k = 0;
    if (s == CLRUN_OK)
        s = tuple_length(data, indices, 0, &k, &err);
    if (s != CLRUN_OK)
        return s;
    clrun_tensor_type want = {data->dtype, 0, {0}};
    for (int d = 0; d < indices->rank - 1; d++)
        want.shape[want.rank++] = indices->shape[d];
    bool too_many = want.rank + data->rank - k > CLRUN_MAX_DIMS;
    for (int d = k; !too_many && d < data->rank; d++)
        want.shape[want.rank++] = data->shape[d];
    char sd[CLRUN__TYPE_TEXT], si[CLRUN__TYPE_TEXT], su[CLRUN__TYPE_TEXT], sw[CLRUN__TYPE_TEXT];
    if (too_many || updates->dtype != data->dtype || !same_dims(updates, &want))
        return clrun__refuse(&err, "updates are %s: data %s and indices %s want %s",
                             clrun__type_format(updates, su, sizeof su),
                             clrun__type_format(data, sd, sizeof sd),
                             clrun__type_format(indices, si, sizeof si),
                             too_many ? "more dimensions than a tensor has"
                                      : clrun__type_format(&want, sw, sizeof sw));
    out[0] = *data;
    return CLRUN_OK;
}

static const clrun__attr_spec gather_nd_attrs[] = {{"batch_dims", CLRUN__WANT_INT, false}};

/* data, indices [..., k] -> [indices' dims but the last, data's dims after batch + k]: the
 * slice of data each index tuple names, within the tuple's batch (ONNX GatherND). */
static clrun_status gather_nd_infer(const clrun__op_call *call, clrun_tensor_type *out,
                                    char *errbuf, size_t errlen)
{
    const clrun__infer_error err = {"gather_nd", errbuf, errlen};
    clrun_status s = clrun__check_any_call(call, 2, 2, gather_nd_attrs, 1, &err);
    if (s == CLRUN_OK)
        s = check_indices(&call->inputs[1], &err);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *data = &call->inputs[0], *indices = &call->inputs[1];
    char sd[CLRUN__TYPE_TEXT], si[CLRUN__TYPE_TEXT];
    int64_t batch = clrun__attr_int_or(call, "batch_dims", 0);
    if (batch < 0 || batch >= data->rank || batch >= indices->rank)
        return clrun__refuse(&err, "attribute 'batch_dims' is %" PRId64 ": must be 0 to less than "
                             "the ranks of data %s and indices %s", batch,
                             clrun__type_format(data, sd, sizeof sd),
                             clrun__type_format(indices, si, sizeof si));
    for (int d = 0; d < batch; d++)
        if (data->shape[d] != indices->shape[d])
            return clrun__refuse(&err, "batch dimension %d differs: data %s, indices %s", d,
                                 clrun__type_format(data, sd, sizeof sd),
                                 clrun__type_format(indices, si, sizeof si));
    int k = 0;
    s = tuple_length(data, indices, (int)batch, &k, &err);
    if (s != CLRUN_OK)
        return s;
    int rank = indices->rank - 1 + data->rank - (int)batch - k;
    if (rank > CLRUN_MAX_DIMS)
        return clrun__refuse(&err, "indices %s on data %s give %d dimensions (at most %d)",
                             clrun__type_format(indices, si, sizeof si),
                             clrun__type_format(data, sd, sizeof sd), rank, CLRUN_MAX_DIMS);
    out[0].dtype = data->dtype;
    out[0].rank = 0;
    for (int d = 0; d < indices->rank - 1; d++)
        out[0].shape[out[0].rank++] = indices->shape[d];
    for (int d = (int)batch + k; d < data->rank; d++)
        out[0].shape[out[0].rank++] = data->shape[d];
    return CLRUN_OK;
}

/* ---- top_k_indices ----------------------------------------------------------------------- */

static const clrun__attr_spec top_k_attrs[] = {
    {"k", CLRUN__WANT_INT, true},
    {"axis", CLRUN__WANT_INT, false},
    {"largest", CLRUN__WANT_INT, false},
};

/* x -> i64, x's shape with k on the axis: the positions of the k largest (or smallest) elements
 * of each line, best first, ties to the lower position. */
static clrun_status top_k_infer(const clrun__op_call *call, clrun_tensor_type *out, char *errbuf,
                                size_t errlen)
{
    const clrun__infer_error err = {"top_k_indices", errbuf, errlen};
    clrun_status s = clrun__check_any_call(call, 1, 1, top_k_attrs, 3, &err);
    if (s == CLRUN_OK)
        s = clrun__check_int_range(call, "largest", 0, 1, &err);
    if (s == CLRUN_OK)
        s = check_arithmetic(&call->inputs[0], "top_k_indices", &err);
    const clrun_tensor_type *x = &call->inputs[0];
    char sx[CLRUN__TYPE_TEXT];
    if (s == CLRUN_OK && x->rank == 0)
        return clrun__refuse(&err, "x is %s: a scalar has no axis", clrun__type_format(x, sx, sizeof sx));
    int axis = 0;
    if (s == CLRUN_OK)
        s = clrun__op_axis(call, -1, &axis, &err);
    if (s != CLRUN_OK)
        return s;
    int64_t k = clrun__attr_int_or(call, "k", 0);
    if (k < 1 || k > x->shape[axis])
        return clrun__refuse(&err, "attribute 'k' is %" PRId64 ": must be 1 to %" PRId64 ", the "
                             "length of axis %d of %s", k, x->shape[axis], axis,
                             clrun__type_format(x, sx, sizeof sx));
    out[0] = *x;
    out[0].dtype = CLRUN_I64;
    out[0].shape[axis] = k;
    return CLRUN_OK;
}

/* ---- the table --------------------------------------------------------------------------- */

/* Not alias safe: a work-item reads updates and indices across the whole tensor. */
static const clrun__op op_scatter_elements = {.name = "scatter_elements", .min_inputs = 3,
                                              .max_inputs = 3, .outputs = 1,
                                              .infer = scatter_elements_infer};
static const clrun__op op_scatter_nd = {.name = "scatter_nd", .min_inputs = 3, .max_inputs = 3,
                                        .outputs = 1, .infer = scatter_nd_infer};
static const clrun__op op_gather_nd = {.name = "gather_nd", .min_inputs = 2, .max_inputs = 2,
                                       .outputs = 1, .infer = gather_nd_infer};
static const clrun__op op_top_k_indices = {.name = "top_k_indices", .min_inputs = 1,
                                           .max_inputs = 1, .outputs = 1, .infer = top_k_infer};

const clrun__op *const clrun__ops_scatter[] = {
    &op_scatter_elements, &op_scatter_nd, &op_gather_nd, &op_top_k_indices, NULL,
};
