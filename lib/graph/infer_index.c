/* Type rules of the ops that pick elements by index or position: gather, gather_elements, pad,
 * trilu, cumsum, and for training gather_grad (gather's gradient for its data) and dropout
 * (which keeps elements by their position: graph/dropout_mask.h). All but cumsum, gather_grad
 * and dropout move elements of any dtype. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "graph/layout_geometry.h"
#include "graph/op.h"
#include "graph/op_families.h"
#include "graph/op_geometry.h"
#include "graph/types.h"

/* Refuses an axis outside [-rank, rank); *axis gets it counted from the front. */
static clrun_status axis_of(const clrun__op_call *call, const clrun_tensor_type *x,
                            int64_t *axis, const clrun__infer_error *err)
{
    int64_t given = clrun__attr_int_or(call, "axis", 0);
    *axis = clrun__normalize_axis(given, x->rank);
    if (*axis >= 0 && *axis < x->rank)
        return CLRUN_OK;
    char sx[CLRUN__TYPE_TEXT];
    return clrun__refuse(err, "axis %" PRId64 " is out of range for %s", given,
                         clrun__type_format(x, sx, sizeof sx));
}

static clrun_status check_indices(const clrun_tensor_type *indices, const clrun__infer_error *err)
{
    if (indices->dtype == CLRUN_I32 || indices->dtype == CLRUN_I64)
        return CLRUN_OK;
    char si[CLRUN__TYPE_TEXT];
    return clrun__refuse(err, "indices are %s: expected i32 or i64",
                         clrun__type_format(indices, si, sizeof si));
}

/* ---- gather ------------------------------------------------------------------------------ */

static const clrun__attr_spec gather_attrs[] = {{"axis", CLRUN__WANT_INT, false}};

/* Without axis: the embedding form, table [V, D] and i32 indices, any index outside [0, V)
 * giving a row of zeros. */
static clrun_status embedding_infer(const clrun__op_call *call, clrun_tensor_type *out,
                                    const clrun__infer_error *err)
{
    const clrun_tensor_type *table = &call->inputs[0], *indices = &call->inputs[1];
    char st[CLRUN__TYPE_TEXT], si[CLRUN__TYPE_TEXT];
    if (table->rank != 2)
        return clrun__refuse(err, "table is %s: expected [V, D]", clrun__type_format(table, st, sizeof st));
    if (indices->dtype != CLRUN_I32)
        return clrun__refuse(err, "indices are %s: expected i32", clrun__type_format(indices, si, sizeof si));
    if (indices->rank >= CLRUN_MAX_DIMS)
        return clrun__refuse(err, "indices %s have rank %d: the output would exceed %d "
                             "dimensions", clrun__type_format(indices, si, sizeof si), indices->rank,
                             CLRUN_MAX_DIMS);
    out[0] = *indices;
    out[0].dtype = table->dtype;
    out[0].shape[out[0].rank++] = table->shape[1];
    return CLRUN_OK;
}

/* With axis: ONNX Gather, data[:axis] + indices + data[axis+1:]. */
static clrun_status gather_infer(const clrun__op_call *call, clrun_tensor_type *out, char *errbuf,
                                 size_t errlen)
{
    const clrun__infer_error err = {"gather", errbuf, errlen};
    clrun_status s = clrun__check_any_call(call, 2, 2, gather_attrs, 1, &err);
    if (s != CLRUN_OK)
        return s;
    int64_t given;
    if (!clrun__attr_int(call, "axis", &given))
        return embedding_infer(call, out, &err);
    const clrun_tensor_type *data = &call->inputs[0], *indices = &call->inputs[1];
    char sd[CLRUN__TYPE_TEXT], si[CLRUN__TYPE_TEXT];
    int64_t axis;
    s = axis_of(call, data, &axis, &err);
    if (s == CLRUN_OK)
        s = check_indices(indices, &err);
    if (s != CLRUN_OK)
        return s;
    int rank = data->rank - 1 + indices->rank;
    if (rank > CLRUN_MAX_DIMS)
        return clrun__refuse(&err, "indices %s on axis %" PRId64 " of %s give %d dimensions (at "
                             "most %d)", clrun__type_format(indices, si, sizeof si), axis,
                             clrun__type_format(data, sd, sizeof sd), rank, CLRUN_MAX_DIMS);
    out[0].dtype = data->dtype;
    out[0].rank = 0;
    for (int d = 0; d < axis; d++)
        out[0].shape[out[0].rank++] = data->shape[d];
    for (int d = 0; d < indices->rank; d++)
        out[0].shape[out[0].rank++] = indices->shape[d];
    for (int d = (int)axis + 1; d < data->rank; d++)
        out[0].shape[out[0].rank++] = data->shape[d];
    return CLRUN_OK;
}

/* ---- gather_grad ------------------------------------------------------------------------- */

static const clrun__attr_spec gather_grad_attrs[] = {
    {"size", CLRUN__WANT_INT, true},
    {"axis", CLRUN__WANT_INT, false},
};

/* dy's dims [from, from + indices' rank) must be the indices' dims. */
static bool indices_dims_at(const clrun_tensor_type *dy, const clrun_tensor_type *indices,
                            int from)
{
    if (from < 0 || from + indices->rank > dy->rank)
        return false;
    for (int d = 0; d < indices->rank; d++)
        if (dy->shape[from + d] != indices->shape[d])
            return false;
    return true;
}

/* indices, dy -> the gradient of gather's data: without axis the embedding form (dy
 * [indices..., D] -> [size, D]), with axis ONNX Gather's (dy [A..., indices..., B...] ->
 * [A..., size, B...], the data having rank dy - indices + 1). */
static clrun_status gather_grad_infer(const clrun__op_call *call, clrun_tensor_type *out,
                                      char *errbuf, size_t errlen)
{
    const clrun__infer_error err = {"gather_grad", errbuf, errlen};
    clrun_status s = clrun__check_input_count(call, 2, 2, &err);
    if (s == CLRUN_OK)
        s = clrun__check_attrs(call, gather_grad_attrs, 2, &err);
    if (s == CLRUN_OK)
        s = clrun__check_any_dtype(call, 0, &err);
    if (s == CLRUN_OK)
        s = check_indices(&call->inputs[0], &err);
    if (s == CLRUN_OK)
        s = clrun__check_dtype(call, 1, false, &err);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *indices = &call->inputs[0], *dy = &call->inputs[1];
    int64_t size = clrun__attr_int_or(call, "size", 0), given = 0;
    if (size < 1)
        return clrun__refuse(&err, "attribute 'size' is %" PRId64 ": must be at least 1", size);
    char si[CLRUN__TYPE_TEXT], sd[CLRUN__TYPE_TEXT];
    bool with_axis = clrun__attr_int(call, "axis", &given);
    int data_rank = with_axis ? dy->rank - indices->rank + 1 : 2;
    int64_t axis = with_axis ? clrun__normalize_axis(given, data_rank) : 0;
    if (!with_axis && (dy->rank != indices->rank + 1 || !indices_dims_at(dy, indices, 0)))
        return clrun__refuse(&err, "dy %s does not fit indices %s: expected [indices..., D]",
                             clrun__type_format(dy, sd, sizeof sd),
                             clrun__type_format(indices, si, sizeof si));
    if (with_axis && data_rank < 1)
        return clrun__refuse(&err, "dy %s has fewer dimensions than indices %s",
                             clrun__type_format(dy, sd, sizeof sd),
                             clrun__type_format(indices, si, sizeof si));
    if (with_axis && data_rank > CLRUN_MAX_DIMS)
        return clrun__refuse(&err, "dy %s and indices %s give data of rank %d (at most %d)",
                             clrun__type_format(dy, sd, sizeof sd),
                             clrun__type_format(indices, si, sizeof si), data_rank, CLRUN_MAX_DIMS);
    if (with_axis && (axis < 0 || axis >= data_rank))
        return clrun__refuse(&err, "axis %" PRId64 " is out of range for data of rank %d (dy %s, "
                             "indices %s)", given, data_rank, clrun__type_format(dy, sd, sizeof sd),
                             clrun__type_format(indices, si, sizeof si));
    if (with_axis && !indices_dims_at(dy, indices, (int)axis))
        return clrun__refuse(&err, "dy %s does not fit indices %s on axis %" PRId64 ": expected "
                             "[A..., indices..., B...] with %" PRId64 " dims before them",
                             clrun__type_format(dy, sd, sizeof sd),
                             clrun__type_format(indices, si, sizeof si), given, axis);
    out[0].dtype = CLRUN_F32;
    out[0].rank = 0;
    for (int d = 0; d < axis; d++)
        out[0].shape[out[0].rank++] = dy->shape[d];
    out[0].shape[out[0].rank++] = size;
    for (int d = (int)axis + indices->rank; d < dy->rank; d++)
        out[0].shape[out[0].rank++] = dy->shape[d];
    return CLRUN_OK;
}

/* ---- dropout ----------------------------------------------------------------------------- */

static const clrun__attr_spec dropout_attrs[] = {
    {"ratio", CLRUN__WANT_FLOAT, false},
    {"stream", CLRUN__WANT_INT, false},
};

/* x (f32), seed (i64, rank 0 or [1]) -> y, x's type. */
static clrun_status dropout_infer(const clrun__op_call *call, clrun_tensor_type *out,
                                  char *errbuf, size_t errlen)
{
    const clrun__infer_error err = {"dropout", errbuf, errlen};
    clrun_status s = clrun__check_input_count(call, 2, 2, &err);
    if (s == CLRUN_OK)
        s = clrun__check_attrs(call, dropout_attrs, 2, &err);
    if (s == CLRUN_OK)
        s = clrun__check_dtype(call, 0, false, &err);
    if (s == CLRUN_OK)
        s = clrun__check_any_dtype(call, 1, &err);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *seed = &call->inputs[1];
    char ss[CLRUN__TYPE_TEXT];
    if (seed->dtype != CLRUN_I64 || seed->rank > 1 || (seed->rank == 1 && seed->shape[0] != 1))
        return clrun__refuse(&err, "seed is %s: expected i64[] or i64[1]",
                             clrun__type_format(seed, ss, sizeof ss));
    double ratio = clrun__attr_float_or(call, "ratio", 0.5);
    if (!(ratio >= 0 && ratio < 1))
        return clrun__refuse(&err, "attribute 'ratio' is %g: must be in [0, 1)", ratio);
    int64_t stream = clrun__attr_int_or(call, "stream", 0);
    if (stream < 0)
        return clrun__refuse(&err, "attribute 'stream' is %" PRId64 ": must be >= 0", stream);
    out[0] = call->inputs[0];
    return CLRUN_OK;
}

/* ---- gather_elements --------------------------------------------------------------------- */

static clrun_status gather_elements_infer(const clrun__op_call *call, clrun_tensor_type *out,
                                          char *errbuf, size_t errlen)
{
    const clrun__infer_error err = {"gather_elements", errbuf, errlen};
    clrun_status s = clrun__check_any_call(call, 2, 2, gather_attrs, 1, &err);
    const clrun_tensor_type *data = &call->inputs[0], *indices = &call->inputs[1];
    int64_t axis = 0;
    if (s == CLRUN_OK)
        s = axis_of(call, data, &axis, &err);
    if (s == CLRUN_OK)
        s = check_indices(indices, &err);
    if (s != CLRUN_OK)
        return s;
    char sd[CLRUN__TYPE_TEXT], si[CLRUN__TYPE_TEXT];
    bool fits = indices->rank == data->rank;
    for (int d = 0; fits && d < data->rank; d++)
        fits = d == axis || indices->shape[d] <= data->shape[d];
    if (!fits)
        return clrun__refuse(&err, "indices %s do not fit data %s: same rank, and no larger off "
                             "axis %" PRId64, clrun__type_format(indices, si, sizeof si),
                             clrun__type_format(data, sd, sizeof sd), axis);
    out[0] = *indices;
    out[0].dtype = data->dtype;
    return CLRUN_OK;
}

/* ---- pad --------------------------------------------------------------------------------- */

static const clrun__attr_spec pad_attrs[] = {
    {"pads", CLRUN__WANT_INTS, true},
    {"mode", CLRUN__WANT_INT, false},
    {"value", CLRUN__WANT_FLOAT, false},
};

int64_t clrun__pad_source(int64_t c, int64_t begin, int64_t n, int mode)
{
    int64_t i = c - begin;
    if (i >= 0 && i < n)
        return i;
    if (mode == CLRUN__PAD_EDGE)
        return i < 0 ? 0 : n - 1;
    if (mode != CLRUN__PAD_REFLECT)
        return -1;
    if (n == 1)
        return 0;
    int64_t period = 2 * (n - 1), m = i % period;
    if (m < 0)
        m += period;
    return m < n ? m : period - m;
}

/* The value as x's dtype, or why it cannot be one. */
static clrun_status check_pad_value(const clrun__op_call *call, const clrun__infer_error *err)
{
    double v = clrun__attr_float_or(call, "value", 0);
    clrun_dtype dtype = call->inputs[0].dtype;
    if (clrun__dtype_is_float(dtype) || clrun__dtype_holds(dtype, v)) /* floats round */
        return CLRUN_OK;
    char sx[CLRUN__TYPE_TEXT];
    return clrun__refuse(err, "value %.17g does not fit %s", v,
                         clrun__type_format(&call->inputs[0], sx, sizeof sx));
}

uint64_t clrun__pad_value_bits(const clrun__op_call *call)
{
    clrun_dtype dtype = call->inputs[0].dtype;
    unsigned char bytes[8] = {0};
    clrun__dtype_from_double(dtype, clrun__attr_float_or(call, "value", 0), bytes);
    switch (clrun_dtype_size(dtype)) {
    case 1: return bytes[0];
    case 2: { uint16_t x; memcpy(&x, bytes, 2); return x; }
    case 4: { uint32_t x; memcpy(&x, bytes, 4); return x; }
    default: { uint64_t x; memcpy(&x, bytes, 8); return x; }
    }
}

static clrun_status pad_infer(const clrun__op_call *call, clrun_tensor_type *out, char *errbuf,
                              size_t errlen)
{
    const clrun__infer_error err = {"pad", errbuf, errlen};
    clrun_status s = clrun__check_any_call(call, 1, 1, pad_attrs, 3, &err);
    if (s == CLRUN_OK)
        s = clrun__check_int_range(call, "mode", 0, 2, &err);
    if (s == CLRUN_OK)
        s = check_pad_value(call, &err);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *x = &call->inputs[0];
    int64_t pads[CLRUN_MAX_ATTR_INTS];
    int n = clrun__attr_list(call, "pads", pads, CLRUN_MAX_ATTR_INTS);
    char sx[CLRUN__TYPE_TEXT];
    if (n != 2 * x->rank)
        return clrun__refuse(&err, "pads has %d entries for x %s of rank %d: expected %d "
                             "([begin..., end...])", n, clrun__type_format(x, sx, sizeof sx),
                             x->rank, 2 * x->rank);
    out[0] = *x;
    for (int d = 0; d < x->rank; d++) {
        int64_t b = pads[d], e = pads[x->rank + d];
        const int64_t limit = INT64_MAX / 4; /* dims of real tensors are far below it */
        if (b > limit || b < -limit || e > limit || e < -limit)
            return clrun__refuse(&err, "pads [%" PRId64 ", %" PRId64 "] of axis %d are too large",
                                 b, e, d);
        int64_t dim = x->shape[d] + b + e;
        if (dim < 1)
            return clrun__refuse(&err, "pads [%" PRId64 ", %" PRId64 "] leave axis %d of %s with %"
                                 PRId64 " elements (at least 1)", b, e, d,
                                 clrun__type_format(x, sx, sizeof sx), dim);
        out[0].shape[d] = dim;
    }
    return CLRUN_OK;
}

/* ---- trilu ------------------------------------------------------------------------------- */

static const clrun__attr_spec trilu_attrs[] = {
    {"upper", CLRUN__WANT_INT, false},
    {"k", CLRUN__WANT_INT, false},
};

static clrun_status trilu_infer(const clrun__op_call *call, clrun_tensor_type *out, char *errbuf,
                                size_t errlen)
{
    const clrun__infer_error err = {"trilu", errbuf, errlen};
    clrun_status s = clrun__check_any_call(call, 1, 1, trilu_attrs, 2, &err);
    if (s == CLRUN_OK)
        s = clrun__check_int_range(call, "upper", 0, 1, &err);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *x = &call->inputs[0];
    char sx[CLRUN__TYPE_TEXT];
    if (x->rank < 2)
        return clrun__refuse(&err, "x is %s: expected [..., M, N]", clrun__type_format(x, sx, sizeof sx));
    out[0] = *x;
    return CLRUN_OK;
}

/* ---- cumsum ------------------------------------------------------------------------------ */

static const clrun__attr_spec cumsum_attrs[] = {
    {"axis", CLRUN__WANT_INT, true},
    {"exclusive", CLRUN__WANT_INT, false},
    {"reverse", CLRUN__WANT_INT, false},
};

static clrun_status cumsum_infer(const clrun__op_call *call, clrun_tensor_type *out, char *errbuf,
                                 size_t errlen)
{
    const clrun__infer_error err = {"cumsum", errbuf, errlen};
    clrun_status s = clrun__check_any_call(call, 1, 1, cumsum_attrs, 3, &err);
    if (s == CLRUN_OK)
        s = clrun__check_int_range(call, "exclusive", 0, 1, &err);
    if (s == CLRUN_OK)
        s = clrun__check_int_range(call, "reverse", 0, 1, &err);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *x = &call->inputs[0];
    char sx[CLRUN__TYPE_TEXT];
    clrun_dtype t = x->dtype;
    if (t != CLRUN_F32 && t != CLRUN_F64 && t != CLRUN_I32 && t != CLRUN_I64)
        return clrun__refuse(&err, "input 0 is %s: expected f32, f64, i32 or i64",
                             clrun__type_format(x, sx, sizeof sx));
    int64_t axis;
    if (x->rank == 0)
        return clrun__refuse(&err, "x is %s: a scalar has no axis", clrun__type_format(x, sx, sizeof sx));
    s = axis_of(call, x, &axis, &err);
    if (s != CLRUN_OK)
        return s;
    out[0] = *x;
    return CLRUN_OK;
}

/* ---- the table --------------------------------------------------------------------------- */

static const clrun__op op_gather = {.name = "gather", .min_inputs = 2, .max_inputs = 2,
                                    .outputs = 1, .infer = gather_infer};
static const clrun__op op_gather_elements = {.name = "gather_elements", .min_inputs = 2,
                                             .max_inputs = 2, .outputs = 1,
                                             .infer = gather_elements_infer};
static const clrun__op op_pad = {.name = "pad", .min_inputs = 1, .max_inputs = 1, .outputs = 1,
                                 .infer = pad_infer};
/* Each work-item reads the one element it writes. */
static const clrun__op op_trilu = {.name = "trilu", .min_inputs = 1, .max_inputs = 1,
                                   .outputs = 1, .alias_safe = true, .infer = trilu_infer};
/* Each work-item runs along one line, reading every element before it writes it, and no
 * work-item touches another's line. */
static const clrun__op op_cumsum = {.name = "cumsum", .min_inputs = 1, .max_inputs = 1,
                                    .outputs = 1, .alias_safe = true, .infer = cumsum_infer};

static const clrun__op op_gather_grad = {.name = "gather_grad", .min_inputs = 2, .max_inputs = 2,
                                         .outputs = 1, .infer = gather_grad_infer};
/* Not alias safe: y may have the bytes of the seed, which every work-item reads. */
static const clrun__op op_dropout = {.name = "dropout", .min_inputs = 2, .max_inputs = 2,
                                     .outputs = 1, .infer = dropout_infer};

const clrun__op *const clrun__ops_index[] = {
    &op_gather, &op_gather_elements, &op_pad,     &op_trilu,
    &op_cumsum, &op_gather_grad,     &op_dropout, NULL,
};
