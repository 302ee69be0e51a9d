/* Type rules of the layout ops that rearrange whole tensors: transpose, reshape, concat, expand,
 * tile, depth_to_space, space_to_depth (slice and split are in infer_slice.c). They move
 * elements without looking at them, so every dtype is accepted. */
#include <inttypes.h>
#include <string.h>

#include "graph/layout_geometry.h"
#include "graph/op.h"
#include "graph/op_families.h"
#include "graph/op_geometry.h"
#include "graph/types.h"

clrun_status clrun__check_any_dtype(const clrun__op_call *call, int i,
                                    const clrun__infer_error *err)
{
    clrun_status s = clrun__check_dims(call, i, err);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *t = &call->inputs[i];
    if (clrun_dtype_size(t->dtype) == 0)
        return clrun__refuse(err, "input %d has an unknown dtype (%d)", i, (int)t->dtype);
    return CLRUN_OK;
}

clrun_status clrun__check_int_range(const clrun__op_call *call, const char *name, int64_t lo,
                                    int64_t hi, const clrun__infer_error *err)
{
    int64_t v;
    if (!clrun__attr_int(call, name, &v) || (v >= lo && v <= hi))
        return CLRUN_OK;
    return clrun__refuse(err, "attribute '%s' is %" PRId64 ": must be %" PRId64 " to %" PRId64,
                         name, v, lo, hi);
}

clrun_status clrun__check_any_call(const clrun__op_call *call, int min_inputs, int max_inputs,
                                   const clrun__attr_spec *specs, int spec_count,
                                   const clrun__infer_error *err)
{
    clrun_status s = clrun__check_input_count(call, min_inputs, max_inputs, err);
    if (s == CLRUN_OK)
        s = clrun__check_attrs(call, specs, spec_count, err);
    for (int i = 0; s == CLRUN_OK && i < call->input_count; i++)
        s = clrun__check_any_dtype(call, i, err);
    return s;
}

/* ---- transpose --------------------------------------------------------------------------- */

static const clrun__attr_spec transpose_attrs[] = {{"perm", CLRUN__WANT_INTS, true}};

static clrun_status transpose_infer(const clrun__op_call *call, clrun_tensor_type *out,
                                    char *errbuf, size_t errlen)
{
    const clrun__infer_error err = {"transpose", errbuf, errlen};
    clrun_status s = clrun__check_any_call(call, 1, 1, transpose_attrs, 1, &err);
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

/* ---- reshape ----------------------------------------------------------------------------- */

/* The start of reshape and expand, which both take x and a target "shape": the common checks,
 * then the shape into shape[0..*n), refused beyond CLRUN_MAX_DIMS. */
static const clrun__attr_spec shape_attrs[] = {{"shape", CLRUN__WANT_INTS, true}};

static clrun_status shape_begin(const clrun__op_call *call, int64_t *shape, int *n,
                                const clrun__infer_error *err)
{
    clrun_status s = clrun__check_any_call(call, 1, 1, shape_attrs, 1, err);
    if (s != CLRUN_OK)
        return s;
    *n = clrun__attr_list(call, "shape", shape, CLRUN_MAX_ATTR_INTS);
    if (*n > CLRUN_MAX_DIMS)
        return clrun__refuse(err, "shape has %d dimensions (at most %d)", *n, CLRUN_MAX_DIMS);
    return CLRUN_OK;
}

static clrun_status reshape_infer(const clrun__op_call *call, clrun_tensor_type *out,
                                  char *errbuf, size_t errlen)
{
    const clrun__infer_error err = {"reshape", errbuf, errlen};
    int64_t shape[CLRUN_MAX_ATTR_INTS];
    int n;
    clrun_status s = shape_begin(call, shape, &n, &err);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *x = &call->inputs[0];
    char sx[CLRUN__TYPE_TEXT];
    int wild = -1;
    uint64_t known = 1, total = clrun_tensor_elements(x);
    for (int d = 0; d < n; d++) {
        if (shape[d] == -1 && wild < 0) {
            wild = d;
            continue;
        }
        if (shape[d] <= 0)
            return clrun__refuse(&err, "shape entry %d is %" PRId64 " (dimensions are >= 1, one "
                                 "may be -1)", d, shape[d]);
        if ((uint64_t)shape[d] > total || known > total / (uint64_t)shape[d])
            known = total + 1; /* more than x holds: refused below, without overflow */
        else
            known *= (uint64_t)shape[d];
    }
    if (wild >= 0 && known <= total && total % known == 0)
        shape[wild] = (int64_t)(total / known), known = total;
    if (known != total)
        return clrun__refuse(&err, "cannot reshape %s (%" PRIu64 " elements) to %s%" PRIu64
                             " elements", clrun__type_format(x, sx, sizeof sx), total,
                             known > total ? "more than " : "", known > total ? total : known);
    out[0].dtype = x->dtype;
    out[0].rank = n;
    memcpy(out[0].shape, shape, (size_t)n * sizeof shape[0]);
    return CLRUN_OK;
}

/* ---- concat ------------------------------------------------------------------------------ */

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
    clrun_status s = clrun__check_any_call(call, 1, CLRUN__MAX_CONCAT, concat_attrs, 1, &err);
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
        out[0].shape[axis] += xi->shape[axis]; /* dims of real tensors: no overflow */
    }
    return CLRUN_OK;
}

/* ---- expand ------------------------------------------------------------------------------ */

/* numpy broadcasting of x against `shape`, as ONNX Expand: the output may keep x's larger dims
 * where shape has 1. */
static clrun_status expand_infer(const clrun__op_call *call, clrun_tensor_type *out,
                                 char *errbuf, size_t errlen)
{
    const clrun__infer_error err = {"expand", errbuf, errlen};
    int64_t shape[CLRUN_MAX_ATTR_INTS];
    int n;
    clrun_status s = shape_begin(call, shape, &n, &err);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *x = &call->inputs[0];
    char sx[CLRUN__TYPE_TEXT];
    int rank = n > x->rank ? n : x->rank;
    out[0].dtype = x->dtype;
    out[0].rank = rank;
    for (int d = 0; d < rank; d++) {
        int ix = d - (rank - x->rank), is = d - (rank - n);
        int64_t dx = ix >= 0 ? x->shape[ix] : 1, ds = is >= 0 ? shape[is] : 1;
        if (ds < 1)
            return clrun__refuse(&err, "shape entry %d is %" PRId64 " (dimensions are >= 1)", is,
                                 ds);
        if (dx != ds && dx != 1 && ds != 1)
            return clrun__refuse(&err, "x %s does not broadcast to the shape (dimension %d: %"
                                 PRId64 " vs %" PRId64 ")", clrun__type_format(x, sx, sizeof sx),
                                 d, dx, ds);
        out[0].shape[d] = dx == 1 ? ds : dx;
    }
    return CLRUN_OK;
}

/* ---- tile -------------------------------------------------------------------------------- */

static const clrun__attr_spec tile_attrs[] = {{"repeats", CLRUN__WANT_INTS, true}};

static clrun_status tile_infer(const clrun__op_call *call, clrun_tensor_type *out, char *errbuf,
                               size_t errlen)
{
    const clrun__infer_error err = {"tile", errbuf, errlen};
    clrun_status s = clrun__check_any_call(call, 1, 1, tile_attrs, 1, &err);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *x = &call->inputs[0];
    int64_t repeats[CLRUN_MAX_ATTR_INTS];
    int n = clrun__attr_list(call, "repeats", repeats, CLRUN_MAX_ATTR_INTS);
    char sx[CLRUN__TYPE_TEXT];
    if (n != x->rank)
        return clrun__refuse(&err, "repeats has %d entries for x %s of rank %d", n,
                             clrun__type_format(x, sx, sizeof sx), x->rank);
    out[0] = *x;
    for (int d = 0; d < n; d++) {
        if (repeats[d] < 1)
            return clrun__refuse(&err, "repeats entry %d is %" PRId64 " (must be >= 1: no empty "
                                 "tensors)", d, repeats[d]);
        if (repeats[d] > INT64_MAX / x->shape[d])
            return clrun__refuse(&err, "repeats entry %d (%" PRId64 ") makes dimension %d too "
                                 "large", d, repeats[d], d);
        out[0].shape[d] = x->shape[d] * repeats[d];
    }
    return CLRUN_OK;
}

/* ---- depth_to_space and space_to_depth --------------------------------------------------- */

static const clrun__attr_spec depth_to_space_attrs[] = {
    {"blocksize", CLRUN__WANT_INT, true},
    {"mode", CLRUN__WANT_INT, false},
};

/* Common checks: x [N, C, H, W] and a blocksize >= 1. */
static clrun_status block_begin(const clrun__op_call *call, int spec_count,
                                const clrun__infer_error *err, int64_t *b)
{
    clrun_status s = clrun__check_any_call(call, 1, 1, depth_to_space_attrs, spec_count, err);
    if (s == CLRUN_OK)
        s = clrun__check_int_range(call, "mode", 0, 1, err);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *x = &call->inputs[0];
    char sx[CLRUN__TYPE_TEXT];
    if (x->rank != 4)
        return clrun__refuse(err, "x is %s: expected [N, C, H, W]",
                             clrun__type_format(x, sx, sizeof sx));
    *b = clrun__attr_int_or(call, "blocksize", 1);
    if (*b < 1)
        return clrun__refuse(err, "attribute 'blocksize' is %" PRId64 ": must be >= 1", *b);
    if (*b > INT32_MAX)
        return clrun__refuse(err, "attribute 'blocksize' is %" PRId64 ": must be at most %d", *b, INT32_MAX);
    return CLRUN_OK;
}

static clrun_status depth_to_space_infer(const clrun__op_call *call, clrun_tensor_type *out,
                                         char *errbuf, size_t errlen)
{
    const clrun__infer_error err = {"depth_to_space", errbuf, errlen};
    int64_t b;
    clrun_status s = block_begin(call, 2, &err, &b);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *x = &call->inputs[0];
    char sx[CLRUN__TYPE_TEXT];
    if (x->shape[1] % (b * b) != 0)
        return clrun__refuse(&err, "x is %s: its %" PRId64 " channels are not a multiple of "
                             "blocksize^2 = %" PRId64, clrun__type_format(x, sx, sizeof sx),
                             x->shape[1], b * b);
    if (x->shape[2] > INT64_MAX / b || x->shape[3] > INT64_MAX / b)
        return clrun__refuse(&err, "x %s is too large for blocksize %" PRId64,
                             clrun__type_format(x, sx, sizeof sx), b);
    out[0] = *x;
    out[0].shape[1] = x->shape[1] / (b * b);
    out[0].shape[2] = x->shape[2] * b;
    out[0].shape[3] = x->shape[3] * b;
    return CLRUN_OK;
}

static clrun_status space_to_depth_infer(const clrun__op_call *call, clrun_tensor_type *out,
                                         char *errbuf, size_t errlen)
{
    const clrun__infer_error err = {"space_to_depth", errbuf, errlen};
    int64_t b;
    clrun_status s = block_begin(call, 1, &err, &b);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *x = &call->inputs[0];
    char sx[CLRUN__TYPE_TEXT];
    if (x->shape[2] % b != 0 || x->shape[3] % b != 0)
        return clrun__refuse(&err, "x is %s: its height and width are not multiples of "
                             "blocksize %" PRId64, clrun__type_format(x, sx, sizeof sx), b);
    if (x->shape[1] > INT64_MAX / (b * b))
        return clrun__refuse(&err, "x %s is too large for blocksize %" PRId64,
                             clrun__type_format(x, sx, sizeof sx), b);
    out[0] = *x;
    out[0].shape[1] = x->shape[1] * b * b;
    out[0].shape[2] = x->shape[2] / b;
    out[0].shape[3] = x->shape[3] / b;
    return CLRUN_OK;
}

/* ---- the table --------------------------------------------------------------------------- */

static const clrun__op op_transpose = {.name = "transpose", .min_inputs = 1, .max_inputs = 1,
                                       .outputs = 1, .infer = transpose_infer};
/* A reshape moves nothing when its output takes its input's buffer. */
static const clrun__op op_reshape = {.name = "reshape", .min_inputs = 1, .max_inputs = 1,
                                     .outputs = 1, .alias_safe = true, .view = true,
                                     .infer = reshape_infer};
static const clrun__op op_concat = {.name = "concat", .min_inputs = 1,
                                    .max_inputs = CLRUN__MAX_CONCAT, .outputs = 1,
                                    .infer = concat_infer};
static const clrun__op op_expand = {.name = "expand", .min_inputs = 1, .max_inputs = 1,
                                    .outputs = 1, .infer = expand_infer};
static const clrun__op op_tile = {.name = "tile", .min_inputs = 1, .max_inputs = 1, .outputs = 1,
                                  .infer = tile_infer};
static const clrun__op op_depth_to_space = {.name = "depth_to_space", .min_inputs = 1,
                                            .max_inputs = 1, .outputs = 1,
                                            .infer = depth_to_space_infer};
static const clrun__op op_space_to_depth = {.name = "space_to_depth", .min_inputs = 1,
                                            .max_inputs = 1, .outputs = 1,
                                            .infer = space_to_depth_infer};

extern const clrun__op clrun__op_slice, clrun__op_split; /* infer_slice.c */

const clrun__op *const clrun__ops_layout[] = {
    &op_transpose, &op_reshape, &op_concat, &clrun__op_slice, &clrun__op_split, &op_expand,
    &op_tile, &op_depth_to_space, &op_space_to_depth, NULL,
};
