/* Type rules of the layout ops: transpose, reshape, concat, slice, gather. They move 32-bit
 * words, so f32 and i32 are both accepted. */
#include <inttypes.h>
#include <string.h>

#include "graph/op.h"
#include "graph/op_families.h"
#include "graph/op_geometry.h"
#include "graph/types.h"

/* ---- transpose --------------------------------------------------------------------------- */

static const clrun__attr_spec transpose_attrs[] = {{"perm", CLRUN__WANT_INTS, true}};

static clrun_status transpose_infer(const clrun__op_call *call, clrun_tensor_type *out,
                                    char *errbuf, size_t errlen)
{
    const clrun__infer_error err = {"transpose", errbuf, errlen};
    clrun_status s = clrun__check_input_count(call, 1, 1, &err);
    if (s == CLRUN_OK)
        s = clrun__check_attrs(call, transpose_attrs, 1, &err);
    if (s == CLRUN_OK)
        s = clrun__check_dtype(call, 0, true, &err);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *x = &call->inputs[0];
    int64_t perm[CLRUN_MAX_ATTR_INTS];
    int n = clrun__attr_list(call, "perm", perm, CLRUN_MAX_ATTR_INTS);
    char sx[CLRUN__TYPE_TEXT];
    if (n != x->rank)
        return clrun__refuse(&err, "perm has %d entries for x %s of rank %d", n,
                             clrun__type_format(x, sx, sizeof sx), x->rank);
    bool seen[CLRUN_MAX_DIMS] = {false};
    out[0] = *x;
    for (int d = 0; d < n; d++) {
        if (perm[d] < 0 || perm[d] >= n || seen[perm[d]])
            return clrun__refuse(&err, "perm is not a permutation of 0..%d (entry %d is %" PRId64
                                 ")", n - 1, d, perm[d]);
        seen[perm[d]] = true;
        out[0].shape[d] = x->shape[perm[d]];
    }
    return CLRUN_OK;
}

static const clrun__attr_spec reshape_attrs[] = {{"shape", CLRUN__WANT_INTS, true}};

static clrun_status reshape_infer(const clrun__op_call *call, clrun_tensor_type *out,
                                  char *errbuf, size_t errlen)
{
    const clrun__infer_error err = {"reshape", errbuf, errlen};
    clrun_status s = clrun__check_input_count(call, 1, 1, &err);
    if (s == CLRUN_OK)
        s = clrun__check_attrs(call, reshape_attrs, 1, &err);
    if (s == CLRUN_OK)
        s = clrun__check_dtype(call, 0, true, &err);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *x = &call->inputs[0];
    int64_t shape[CLRUN_MAX_ATTR_INTS];
    int n = clrun__attr_list(call, "shape", shape, CLRUN_MAX_ATTR_INTS);
    char sx[CLRUN__TYPE_TEXT];
    if (n > CLRUN_MAX_DIMS)
        return clrun__refuse(&err, "shape has %d dimensions (at most %d)", n, CLRUN_MAX_DIMS);
    int wild = -1;
    uint64_t known = 1;
    for (int d = 0; d < n; d++) {
        if (shape[d] == -1 && wild < 0) {
            wild = d;
            continue;
        }
        if (shape[d] <= 0)
            return clrun__refuse(&err, "shape entry %d is %" PRId64 " (dimensions are >= 1, one "
                                 "may be -1)", d, shape[d]);
        known *= (uint64_t)shape[d];
    }
    uint64_t total = clrun_tensor_elements(x);
    if (wild >= 0 && total % known == 0)
        shape[wild] = (int64_t)(total / known), known = total;
    if (known != total)
        return clrun__refuse(&err, "cannot reshape %s (%" PRIu64 " elements) to %" PRIu64
                             " elements", clrun__type_format(x, sx, sizeof sx), total, known);
    out[0].dtype = x->dtype;
    out[0].rank = n;
    memcpy(out[0].shape, shape, (size_t)n * sizeof shape[0]);
    return CLRUN_OK;
}

static const clrun__attr_spec concat_attrs[] = {{"axis", CLRUN__WANT_INT, true}};

static bool same_except(const clrun_tensor_type *a, const clrun_tensor_type *b, int axis)
{
    if (a->rank != b->rank || a->dtype != b->dtype)
        return false;
    for (int d = 0; d < a->rank; d++)
        if (d != axis && a->shape[d] != b->shape[d])
            return false;
    return true;
}

static clrun_status concat_infer(const clrun__op_call *call, clrun_tensor_type *out,
                                 char *errbuf, size_t errlen)
{
    const clrun__infer_error err = {"concat", errbuf, errlen};
    clrun_status s = clrun__check_input_count(call, 2, CLRUN__MAX_CONCAT, &err);
    if (s == CLRUN_OK)
        s = clrun__check_attrs(call, concat_attrs, 1, &err);
    for (int i = 0; s == CLRUN_OK && i < call->input_count; i++)
        s = clrun__check_dtype(call, i, true, &err);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *x0 = &call->inputs[0];
    int64_t axis = clrun__normalize_axis(clrun__attr_int_or(call, "axis", 0), x0->rank);
    char s0[CLRUN__TYPE_TEXT], si[CLRUN__TYPE_TEXT];
    if (axis < 0 || axis >= x0->rank)
        return clrun__refuse(&err, "axis %" PRId64 " is out of range for %s",
                             clrun__attr_int_or(call, "axis", 0), clrun__type_format(x0, s0, sizeof s0));
    out[0] = *x0;
    for (int i = 1; i < call->input_count; i++) {
        const clrun_tensor_type *xi = &call->inputs[i];
        if (!same_except(x0, xi, (int)axis))
            return clrun__refuse(&err, "input %d is %s, input 0 is %s: they must agree except on "
                                 "axis %" PRId64, i, clrun__type_format(xi, si, sizeof si),
                                 clrun__type_format(x0, s0, sizeof s0), axis);
        out[0].shape[axis] += xi->shape[axis];
    }
    return CLRUN_OK;
}

static const clrun__attr_spec slice_attrs[] = {
    {"axis", CLRUN__WANT_INT, true},
    {"start", CLRUN__WANT_INT, false},
    {"end", CLRUN__WANT_INT, false},
};

void clrun__slice_range(const clrun__op_call *call, int64_t *axis, int64_t *start, int64_t *end)
{
    const clrun_tensor_type *x = &call->inputs[0];
    *axis = clrun__normalize_axis(clrun__attr_int_or(call, "axis", 0), x->rank);
    int64_t dim = *axis >= 0 && *axis < x->rank ? x->shape[*axis] : 0;
    *start = clrun__attr_int_or(call, "start", 0);
    *end = clrun__attr_int_or(call, "end", dim);
    if (*start < 0)
        *start += dim;
    if (*end < 0)
        *end += dim;
}

static clrun_status slice_infer(const clrun__op_call *call, clrun_tensor_type *out, char *errbuf,
                                size_t errlen)
{
    const clrun__infer_error err = {"slice", errbuf, errlen};
    clrun_status s = clrun__check_input_count(call, 1, 1, &err);
    if (s == CLRUN_OK)
        s = clrun__check_attrs(call, slice_attrs, 3, &err);
    if (s == CLRUN_OK)
        s = clrun__check_dtype(call, 0, true, &err);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *x = &call->inputs[0];
    int64_t axis, start, end;
    clrun__slice_range(call, &axis, &start, &end);
    char sx[CLRUN__TYPE_TEXT];
    if (axis < 0 || axis >= x->rank)
        return clrun__refuse(&err, "axis %" PRId64 " is out of range for %s",
                             clrun__attr_int_or(call, "axis", 0), clrun__type_format(x, sx, sizeof sx));
    if (start < 0 || end > x->shape[axis] || start >= end)
        return clrun__refuse(&err, "range [%" PRId64 ", %" PRId64 ") is empty or outside axis %"
                             PRId64 " of %s", clrun__attr_int_or(call, "start", 0),
                             clrun__attr_int_or(call, "end", x->shape[axis]), axis,
                             clrun__type_format(x, sx, sizeof sx));
    out[0] = *x;
    out[0].shape[axis] = end - start;
    return CLRUN_OK;
}

static clrun_status gather_infer(const clrun__op_call *call, clrun_tensor_type *out, char *errbuf,
                                 size_t errlen)
{
    const clrun__infer_error err = {"gather", errbuf, errlen};
    clrun_status s = clrun__check_input_count(call, 2, 2, &err);
    if (s == CLRUN_OK)
        s = clrun__check_attrs(call, NULL, 0, &err);
    if (s == CLRUN_OK)
        s = clrun__check_dtype(call, 0, true, &err);
    if (s == CLRUN_OK)
        s = clrun__check_dtype(call, 1, true, &err);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *table = &call->inputs[0], *indices = &call->inputs[1];
    char st[CLRUN__TYPE_TEXT], si[CLRUN__TYPE_TEXT];
    if (table->rank != 2)
        return clrun__refuse(&err, "table is %s: expected [V, D]", clrun__type_format(table, st, sizeof st));
    if (indices->dtype != CLRUN_I32)
        return clrun__refuse(&err, "indices are %s: expected i32", clrun__type_format(indices, si, sizeof si));
    if (indices->rank >= CLRUN_MAX_DIMS)
        return clrun__refuse(&err, "indices %s have rank %d: the output would exceed %d "
                             "dimensions", clrun__type_format(indices, si, sizeof si), indices->rank,
                             CLRUN_MAX_DIMS);
    out[0] = *indices;
    out[0].dtype = table->dtype;
    out[0].shape[out[0].rank++] = table->shape[1];
    return CLRUN_OK;
}

static const clrun__op op_transpose = {.name = "transpose", .min_inputs = 1, .max_inputs = 1,
                                       .outputs = 1, .infer = transpose_infer};
/* A reshape moves nothing when its output takes its input's buffer. */
static const clrun__op op_reshape = {.name = "reshape", .min_inputs = 1, .max_inputs = 1,
                                     .outputs = 1, .alias_safe = true, .infer = reshape_infer};
static const clrun__op op_concat = {.name = "concat", .min_inputs = 2,
                                    .max_inputs = CLRUN__MAX_CONCAT, .outputs = 1,
                                    .infer = concat_infer};
static const clrun__op op_slice = {.name = "slice", .min_inputs = 1, .max_inputs = 1,
                                   .outputs = 1, .infer = slice_infer};
static const clrun__op op_gather = {.name = "gather", .min_inputs = 2, .max_inputs = 2,
                                    .outputs = 1, .infer = gather_infer};

const clrun__op *const clrun__ops_layout[] = {
    &op_transpose, &op_reshape, &op_concat, &op_slice, &op_gather, NULL,
};
