/* Type rules of slice and split, and the geometry they share: what each takes from every axis.
 *
 * slice has two forms. The single-axis form (axis, start, end) takes a non-empty range inside
 * the axis, negatives counted from the end, and refuses anything else. The ONNX form (starts,
 * ends, optional axes and steps) follows ONNX Slice: negatives count from the end, then starts
 * and ends are clamped into the axis ([0, n] stepping forward, [0, n-1] and [-1, n-1] stepping
 * backward), and the axis keeps ceil((end - start) / step) elements, which must be at least one
 * since OpenCL has no empty buffers. split takes part `index` of an axis cut into parts of the
 * given sizes, or into `parts` equal ones: one node per part, since an op has a fixed number of
 * outputs. */
#include <inttypes.h>
#include <string.h>

#include "graph/layout_geometry.h"
#include "graph/op.h"
#include "graph/op_geometry.h"
#include "graph/types.h"

static bool has_attr(const clrun__op_call *call, const char *name)
{
    for (int i = 0; i < call->attr_count; i++)
        if (call->attrs[i].name && strcmp(call->attrs[i].name, name) == 0)
            return true;
    return false;
}

static void whole_axes(const clrun_tensor_type *x, clrun__slice_geometry *g)
{
    for (int d = 0; d < x->rank; d++) {
        g->start[d] = 0;
        g->step[d] = 1;
        g->count[d] = x->shape[d];
    }
}

/* ---- slice, single-axis form ------------------------------------------------------------- */

static clrun_status single_axis(const clrun__op_call *call, clrun__slice_geometry *g,
                                const clrun__infer_error *err)
{
    const clrun_tensor_type *x = &call->inputs[0];
    char sx[CLRUN__TYPE_TEXT];
    int64_t given_axis;
    if (!clrun__attr_int(call, "axis", &given_axis))
        return clrun__refuse(err, "missing required attribute 'axis' (or 'starts' and 'ends')");
    int64_t axis = clrun__normalize_axis(given_axis, x->rank);
    if (axis < 0 || axis >= x->rank)
        return clrun__refuse(err, "axis %" PRId64 " is out of range for %s", given_axis,
                             clrun__type_format(x, sx, sizeof sx));
    int64_t dim = x->shape[axis];
    int64_t start = clrun__attr_int_or(call, "start", 0), end = clrun__attr_int_or(call, "end", dim);
    int64_t first = start < 0 ? start + dim : start, last = end < 0 ? end + dim : end;
    if (first < 0 || last > dim || first >= last)
        return clrun__refuse(err, "range [%" PRId64 ", %" PRId64 ") is empty or outside axis %"
                             PRId64 " of %s", start, end, axis,
                             clrun__type_format(x, sx, sizeof sx));
    whole_axes(x, g);
    g->start[axis] = first;
    g->count[axis] = last - first;
    return CLRUN_OK;
}

/* ---- slice, ONNX form -------------------------------------------------------------------- */

/* Elements of [start, end) stepping by step (either sign), after ONNX's clamping into an axis
 * of n; *first gets the clamped start. No intermediate overflows for any int64 inputs. */
static int64_t clamped_count(int64_t start, int64_t end, int64_t step, int64_t n, int64_t *first)
{
    if (start < 0)
        start += n; /* n > 0: cannot overflow */
    if (end < 0)
        end += n;
    if (step > 0) {
        start = start < 0 ? 0 : start > n ? n : start;
        end = end < 0 ? 0 : end > n ? n : end;
    } else {
        start = start < 0 ? 0 : start > n - 1 ? n - 1 : start;
        end = end < -1 ? -1 : end > n - 1 ? n - 1 : end;
    }
    *first = start;
    uint64_t magnitude = step < 0 ? 0 - (uint64_t)step : (uint64_t)step;
    uint64_t span = step > 0 ? (end > start ? (uint64_t)(end - start) : 0)
                             : (start > end ? (uint64_t)(start - end) : 0);
    return span == 0 ? 0 : (int64_t)(1 + (span - 1) / magnitude);
}

static clrun_status onnx_form(const clrun__op_call *call, clrun__slice_geometry *g,
                              const clrun__infer_error *err)
{
    const clrun_tensor_type *x = &call->inputs[0];
    char sx[CLRUN__TYPE_TEXT];
    int64_t starts[CLRUN_MAX_ATTR_INTS], ends[CLRUN_MAX_ATTR_INTS], axes[CLRUN_MAX_ATTR_INTS];
    int64_t steps[CLRUN_MAX_ATTR_INTS];
    int n = clrun__attr_list(call, "starts", starts, CLRUN_MAX_ATTR_INTS);
    int n_ends = clrun__attr_list(call, "ends", ends, CLRUN_MAX_ATTR_INTS);
    int n_axes = clrun__attr_list(call, "axes", axes, CLRUN_MAX_ATTR_INTS);
    int n_steps = clrun__attr_list(call, "steps", steps, CLRUN_MAX_ATTR_INTS);
    if (!has_attr(call, "starts") || !has_attr(call, "ends"))
        return clrun__refuse(err, "missing required attribute '%s'",
                             has_attr(call, "starts") ? "ends" : "starts");
    if (n_ends != n)
        return clrun__refuse(err, "starts has %d entries, ends has %d: one each per sliced axis",
                             n, n_ends);
    if (n > x->rank)
        return clrun__refuse(err, "starts has %d entries for x %s of rank %d", n,
                             clrun__type_format(x, sx, sizeof sx), x->rank);
    bool axes_given = has_attr(call, "axes"), steps_given = has_attr(call, "steps");
    if (axes_given && n_axes != n)
        return clrun__refuse(err, "axes has %d entries for %d starts", n_axes, n);
    if (steps_given && n_steps != n)
        return clrun__refuse(err, "steps has %d entries for %d starts", n_steps, n);
    whole_axes(x, g);
    bool seen[CLRUN_MAX_DIMS] = {false};
    for (int i = 0; i < n; i++) {
        int64_t given = axes_given ? axes[i] : i;
        int64_t axis = clrun__normalize_axis(given, x->rank);
        int64_t step = steps_given ? steps[i] : 1;
        if (axis < 0 || axis >= x->rank)
            return clrun__refuse(err, "axis %" PRId64 " is out of range for %s", given,
                                 clrun__type_format(x, sx, sizeof sx));
        if (seen[axis])
            return clrun__refuse(err, "axis %" PRId64 " given twice", given);
        seen[axis] = true;
        if (step == 0)
            return clrun__refuse(err, "steps entry %d is 0", i);
        int64_t first;
        int64_t count = clamped_count(starts[i], ends[i], step, x->shape[axis], &first);
        if (count < 1)
            return clrun__refuse(err, "starts %" PRId64 ", ends %" PRId64 ", step %" PRId64
                                 " select nothing from axis %" PRId64 " of %s (empty tensors do "
                                 "not exist)", starts[i], ends[i], step, axis,
                                 clrun__type_format(x, sx, sizeof sx));
        g->start[axis] = first;
        g->step[axis] = count == 1 ? 1 : step; /* |step| < n when count > 1 */
        g->count[axis] = count;
    }
    return CLRUN_OK;
}

/* ---- split ------------------------------------------------------------------------------- */

static clrun_status split_part(const clrun__op_call *call, clrun__slice_geometry *g,
                               const clrun__infer_error *err)
{
    const clrun_tensor_type *x = &call->inputs[0];
    char sx[CLRUN__TYPE_TEXT];
    int64_t given_axis = clrun__attr_int_or(call, "axis", 0);
    int64_t axis = clrun__normalize_axis(given_axis, x->rank);
    if (axis < 0 || axis >= x->rank)
        return clrun__refuse(err, "axis %" PRId64 " is out of range for %s", given_axis,
                             clrun__type_format(x, sx, sizeof sx));
    int64_t dim = x->shape[axis], index = clrun__attr_int_or(call, "index", 0);
    int64_t sizes[CLRUN_MAX_ATTR_INTS], parts;
    int n = clrun__attr_list(call, "split", sizes, CLRUN_MAX_ATTR_INTS);
    bool have_parts = clrun__attr_int(call, "parts", &parts);
    int64_t offset = 0, size = 0;
    if (n > 0) {
        if (have_parts && parts != n)
            return clrun__refuse(err, "parts is %" PRId64 " but split has %d entries", parts, n);
        int64_t total = 0;
        for (int i = 0; i < n; i++) {
            if (sizes[i] < 1 || sizes[i] > dim)
                return clrun__refuse(err, "split entry %d is %" PRId64 " (parts are 1 to %" PRId64
                                     " long: no empty tensors)", i, sizes[i], dim);
            total += sizes[i]; /* at most 16 entries of at most dim each: no overflow */
        }
        if (total != dim)
            return clrun__refuse(err, "split sizes add up to %" PRId64 ", axis %" PRId64 " of %s "
                                 "has %" PRId64, total, axis, clrun__type_format(x, sx, sizeof sx),
                                 dim);
        parts = n;
        if (index >= 0 && index < parts) {
            for (int i = 0; i < index; i++)
                offset += sizes[i];
            size = sizes[index];
        }
    } else {
        if (!have_parts)
            return clrun__refuse(err, "give the part sizes (split) or their number (parts)");
        if (parts < 1 || dim % parts != 0)
            return clrun__refuse(err, "axis %" PRId64 " of %s (%" PRId64 ") does not split into %"
                                 PRId64 " equal parts", axis, clrun__type_format(x, sx, sizeof sx),
                                 dim, parts);
        size = dim / parts;
        offset = index * size;
    }
    if (index < 0 || index >= parts)
        return clrun__refuse(err, "index %" PRId64 " is out of range for %" PRId64 " parts", index,
                             parts);
    whole_axes(x, g);
    g->start[axis] = offset;
    g->count[axis] = size;
    return CLRUN_OK;
}

/* ---- the ops ----------------------------------------------------------------------------- */

clrun_status clrun__slice_geometry_of(const clrun__op_call *call, const char *op,
                                      clrun__slice_geometry *g, const clrun__infer_error *err)
{
    if (strcmp(op, "split") == 0)
        return split_part(call, g, err);
    bool single = has_attr(call, "axis") || has_attr(call, "start") || has_attr(call, "end");
    bool onnx = has_attr(call, "starts") || has_attr(call, "ends") || has_attr(call, "axes") ||
                has_attr(call, "steps");
    if (single && onnx)
        return clrun__refuse(err, "give axis, start, end or starts, ends, axes, steps, not both");
    return onnx ? onnx_form(call, g, err) : single_axis(call, g, err);
}

static const clrun__attr_spec slice_attrs[] = {
    {"axis", CLRUN__WANT_INT, false},   {"start", CLRUN__WANT_INT, false},
    {"end", CLRUN__WANT_INT, false},    {"starts", CLRUN__WANT_INTS, false},
    {"ends", CLRUN__WANT_INTS, false},  {"axes", CLRUN__WANT_INTS, false},
    {"steps", CLRUN__WANT_INTS, false},
};

static const clrun__attr_spec split_attrs[] = {
    {"axis", CLRUN__WANT_INT, false},
    {"split", CLRUN__WANT_INTS, false},
    {"parts", CLRUN__WANT_INT, false},
    {"index", CLRUN__WANT_INT, true},
};

static clrun_status sliced_infer(const clrun__op_call *call, const char *op,
                                 const clrun__attr_spec *specs, int spec_count,
                                 clrun_tensor_type *out, char *errbuf, size_t errlen)
{
    const clrun__infer_error err = {op, errbuf, errlen};
    clrun_status s = clrun__check_input_count(call, 1, 1, &err);
    if (s == CLRUN_OK)
        s = clrun__check_attrs(call, specs, spec_count, &err);
    if (s == CLRUN_OK)
        s = clrun__check_any_dtype(call, 0, &err);
    clrun__slice_geometry g;
    if (s == CLRUN_OK)
        s = clrun__slice_geometry_of(call, op, &g, &err);
    if (s != CLRUN_OK)
        return s;
    out[0] = call->inputs[0];
    for (int d = 0; d < out[0].rank; d++)
        out[0].shape[d] = g.count[d];
    return CLRUN_OK;
}

static clrun_status slice_infer(const clrun__op_call *call, clrun_tensor_type *out, char *errbuf,
                                size_t errlen)
{
    return sliced_infer(call, "slice", slice_attrs, 7, out, errbuf, errlen);
}

static clrun_status split_infer(const clrun__op_call *call, clrun_tensor_type *out, char *errbuf,
                                size_t errlen)
{
    return sliced_infer(call, "split", split_attrs, 4, out, errbuf, errlen);
}

const clrun__op clrun__op_slice = {.name = "slice", .min_inputs = 1, .max_inputs = 1,
                                   .outputs = 1, .infer = slice_infer};
const clrun__op clrun__op_split = {.name = "split", .min_inputs = 1, .max_inputs = 1,
                                   .outputs = 1, .infer = split_infer};
