/* resize: the type rule and the taps of every output coordinate (graph/layout_geometry.h),
 * following the ONNX Resize reference (opsets 11-17): an output coordinate maps back to an
 * input coordinate x by the coordinate transformation mode, then nearest picks one input
 * element, linear weighs the two around x and cubic the four, every axis independently; taps
 * outside the axis take its edge element (or, with exclude_outside, drop out and the rest are
 * renormalised). The output size is given (`sizes`); an importer that has scales passes them too
 * (`scale0`..`scale7`), since the transformation uses the scale, not sizes / input size. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "graph/layout_geometry.h"
#include "graph/op.h"
#include "graph/op_families.h"
#include "graph/types.h"

static const char *const scale_names[CLRUN_MAX_DIMS] = {"scale0", "scale1", "scale2", "scale3",
                                                        "scale4", "scale5", "scale6", "scale7"};

const char *const clrun__resize_roi_start_names[CLRUN_MAX_DIMS] = {
    "roi_start0", "roi_start1", "roi_start2", "roi_start3", "roi_start4", "roi_start5", "roi_start6", "roi_start7"};
const char *const clrun__resize_roi_end_names[CLRUN_MAX_DIMS] = {"roi_end0", "roi_end1", "roi_end2", "roi_end3",
                                                                 "roi_end4", "roi_end5", "roi_end6", "roi_end7"};

static const clrun__attr_spec resize_attrs[] = {
    {"sizes", CLRUN__WANT_INTS, true},
    {"mode", CLRUN__WANT_INT, false},
    {"coordinate_transformation_mode", CLRUN__WANT_INT, false},
    {"nearest_mode", CLRUN__WANT_INT, false},
    {"cubic_coeff_a", CLRUN__WANT_FLOAT, false},
    {"exclude_outside", CLRUN__WANT_INT, false},
    {"scale0", CLRUN__WANT_FLOAT, false},
    {"scale1", CLRUN__WANT_FLOAT, false},
    {"scale2", CLRUN__WANT_FLOAT, false},
    {"scale3", CLRUN__WANT_FLOAT, false},
    {"scale4", CLRUN__WANT_FLOAT, false},
    {"scale5", CLRUN__WANT_FLOAT, false},
    {"scale6", CLRUN__WANT_FLOAT, false},
    {"scale7", CLRUN__WANT_FLOAT, false},
    {"roi_start0", CLRUN__WANT_FLOAT, false},
    {"roi_start1", CLRUN__WANT_FLOAT, false},
    {"roi_start2", CLRUN__WANT_FLOAT, false},
    {"roi_start3", CLRUN__WANT_FLOAT, false},
    {"roi_start4", CLRUN__WANT_FLOAT, false},
    {"roi_start5", CLRUN__WANT_FLOAT, false},
    {"roi_start6", CLRUN__WANT_FLOAT, false},
    {"roi_start7", CLRUN__WANT_FLOAT, false},
    {"roi_end0", CLRUN__WANT_FLOAT, false},
    {"roi_end1", CLRUN__WANT_FLOAT, false},
    {"roi_end2", CLRUN__WANT_FLOAT, false},
    {"roi_end3", CLRUN__WANT_FLOAT, false},
    {"roi_end4", CLRUN__WANT_FLOAT, false},
    {"roi_end5", CLRUN__WANT_FLOAT, false},
    {"roi_end6", CLRUN__WANT_FLOAT, false},
    {"roi_end7", CLRUN__WANT_FLOAT, false},
};
#define RESIZE_ATTR_COUNT ((int)(sizeof resize_attrs / sizeof resize_attrs[0]))

/* ---- taps -------------------------------------------------------------------------------- */

/* The input coordinate of output coordinate c on an axis of n input elements, under the given
 * scale or out / n. */
/* A scale given for axis d (an integer is accepted too) into *scale. */
static bool given_scale(const clrun__op_call *call, int d, double *scale)
{
    int64_t i;
    if (clrun__attr_float(call, scale_names[d], scale))
        return true;
    if (!clrun__attr_int(call, scale_names[d], &i))
        return false;
    *scale = (double)i;
    return true;
}

static double source_coordinate(const clrun__op_call *call, int axis, int64_t c)
{
    double n = (double)call->inputs[0].shape[axis];
    double scale;
    if (!given_scale(call, axis, &scale))
        scale = (double)call->outputs[0].shape[axis] / n;
    double length = scale * n; /* the reference's output length: not rounded to an integer */
    double x = (double)c;
    switch (clrun__attr_int_or(call, "coordinate_transformation_mode", CLRUN__COORD_HALF_PIXEL)) {
    case CLRUN__COORD_ASYMMETRIC: return x / scale;
    case CLRUN__COORD_ALIGN_CORNERS: return length == 1 ? 0 : x * (n - 1) / (length - 1);
    case CLRUN__COORD_PYTORCH_HALF_PIXEL: return length == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
    case CLRUN__COORD_TF_HALF_PIXEL_FOR_NN: return (x + 0.5) / scale;
    case CLRUN__COORD_TF_CROP_AND_RESIZE:
        return clrun__resize_crop_coordinate(clrun__attr_float_or(call, clrun__resize_roi_start_names[axis], 0),
                                             clrun__attr_float_or(call, clrun__resize_roi_end_names[axis], 1),
                                             call->inputs[0].shape[axis], length,
                                             call->outputs[0].shape[axis], c);
    default: return (x + 0.5) / scale - 0.5;
    }
}

double clrun__resize_crop_coordinate(double start, double end, int64_t n, double length, int64_t count,
                                     int64_t c)
{
    double last = (double)(n - 1);
    if (count > 1)
        return start * last + (double)c * (end - start) * last / (length - 1);
    return 0.5 * (start + end) * last;
}

static int64_t nearest_index(double x, int64_t nearest_mode)
{
    double whole = floor(x), frac = x - whole;
    if (frac == 0)
        return (int64_t)whole;
    switch (nearest_mode) {
    case CLRUN__NEAREST_ROUND_PREFER_CEIL: return (int64_t)whole + (frac >= 0.5);
    case CLRUN__NEAREST_FLOOR: return (int64_t)whole;
    case CLRUN__NEAREST_CEIL: return (int64_t)whole + 1;
    default: return (int64_t)whole + (frac > 0.5);
    }
}

/* Keys' cubic convolution weights of the four taps floor(x) - 1 .. floor(x) + 2, r = x - floor(x),
 * as the reference writes them. */
static void cubic_weights(double r, double A, double *w)
{
    double s = 1 - r;
    w[0] = ((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A;
    w[1] = ((A + 2) * r - (A + 3)) * r * r + 1;
    w[2] = ((A + 2) * s - (A + 3)) * s * s + 1;
    w[3] = ((A * (s + 1) - 5 * A) * (s + 1) + 8 * A) * (s + 1) - 4 * A;
}

/* Clamps the taps into [0, n), merging those that land on one element and dropping zero weights
 * (one tap of weight 0 stays if that is all). */
static void settle_taps(clrun__resize_taps *t, int64_t n)
{
    clrun__resize_taps merged = {0, {0}, {0}};
    for (int i = 0; i < t->count; i++) {
        int64_t index = t->index[i] < 0 ? 0 : t->index[i] >= n ? n - 1 : t->index[i];
        if (t->weight[i] == 0)
            continue;
        int j = 0;
        while (j < merged.count && merged.index[j] != index)
            j++;
        if (j == merged.count) {
            merged.index[j] = index;
            merged.weight[j] = 0;
            merged.count++;
        }
        merged.weight[j] += t->weight[i];
    }
    if (merged.count == 0)
        merged.count = 1; /* index 0, weight 0 */
    *t = merged;
}

void clrun__resize_taps_of(const clrun__op_call *call, int axis, int64_t c, clrun__resize_taps *t)
{
    int64_t n = call->inputs[0].shape[axis];
    double x = source_coordinate(call, axis, c);
    /* A scale that disagrees with sizes can map far outside the axis (or to NaN): every such
     * coordinate lands on an edge anyway, and must convert to int64 without overflow. */
    if (!(x > -0x1p60))
        x = -0x1p60;
    else if (x > 0x1p60)
        x = 0x1p60;
    int64_t mode = clrun__attr_int_or(call, "mode", CLRUN__RESIZE_NEAREST);
    if (mode == CLRUN__RESIZE_NEAREST) {
        t->count = 1;
        t->index[0] = nearest_index(x, clrun__attr_int_or(call, "nearest_mode", 0));
        t->weight[0] = 1;
        settle_taps(t, n);
        return;
    }
    double whole = floor(x), r = x - whole;
    int64_t first = (int64_t)whole;
    if (mode == CLRUN__RESIZE_LINEAR) {
        t->count = 2;
        t->weight[0] = 1 - r;
        t->weight[1] = r;
    } else {
        t->count = 4;
        first -= 1;
        cubic_weights(r, clrun__attr_float_or(call, "cubic_coeff_a", -0.75), t->weight);
    }
    for (int i = 0; i < t->count; i++)
        t->index[i] = first + i;
    if (clrun__attr_int_or(call, "exclude_outside", 0)) {
        double sum = 0;
        for (int i = 0; i < t->count; i++) {
            if (t->index[i] < 0 || t->index[i] >= n)
                t->weight[i] = 0;
            sum += t->weight[i];
        }
        for (int i = 0; i < t->count && sum != 0; i++)
            t->weight[i] /= sum;
    }
    settle_taps(t, n);
}

int clrun__resize_axis_taps(const clrun__op_call *call, int axis)
{
    int most = 1;
    for (int64_t c = 0; c < call->outputs[0].shape[axis]; c++) {
        clrun__resize_taps t;
        clrun__resize_taps_of(call, axis, c, &t);
        if (t.count > most)
            most = t.count;
    }
    return most;
}

/* ---- the type rule ----------------------------------------------------------------------- */

static clrun_status check_scales(const clrun__op_call *call, const clrun__infer_error *err)
{
    for (int d = 0; d < CLRUN_MAX_DIMS; d++) {
        double scale;
        if (!given_scale(call, d, &scale))
            continue;
        if (d >= call->inputs[0].rank)
            return clrun__refuse(err, "attribute '%s' is for an axis that x (rank %d) lacks",
                                 scale_names[d], call->inputs[0].rank);
        if (!(scale > 0) || !isfinite(scale))
            return clrun__refuse(err, "attribute '%s' is %g: must be > 0", scale_names[d], scale);
    }
    return CLRUN_OK;
}

static clrun_status resize_infer(const clrun__op_call *call, clrun_tensor_type *out,
                                 char *errbuf, size_t errlen)
{
    const clrun__infer_error err = {"resize", errbuf, errlen};
    clrun_status s = clrun__check_input_count(call, 1, 1, &err);
    if (s == CLRUN_OK)
        s = clrun__check_attrs(call, resize_attrs, RESIZE_ATTR_COUNT, &err);
    if (s == CLRUN_OK)
        s = clrun__check_any_dtype(call, 0, &err);
    if (s == CLRUN_OK)
        s = clrun__check_int_range(call, "mode", 0, 2, &err);
    if (s == CLRUN_OK)
        s = clrun__check_int_range(call, "coordinate_transformation_mode", 0, 5, &err);
    if (s == CLRUN_OK)
        s = clrun__check_int_range(call, "nearest_mode", 0, 3, &err);
    if (s == CLRUN_OK)
        s = clrun__check_int_range(call, "exclude_outside", 0, 1, &err);
    if (s == CLRUN_OK)
        s = check_scales(call, &err);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *x = &call->inputs[0];
    char sx[CLRUN__TYPE_TEXT];
    if (clrun__attr_int_or(call, "mode", 0) != CLRUN__RESIZE_NEAREST && x->dtype != CLRUN_F32)
        return clrun__refuse(&err, "x is %s: linear and cubic modes take f32",
                             clrun__type_format(x, sx, sizeof sx));
    for (int d = 0; d < CLRUN_MAX_DIMS; d++) {
        double start = clrun__attr_float_or(call, clrun__resize_roi_start_names[d], 0);
        double end = clrun__attr_float_or(call, clrun__resize_roi_end_names[d], 1);
        if (!isfinite(start) || !isfinite(end))
            return clrun__refuse(&err, "the region of interest of axis %d is [%g, %g]: must be finite", d,
                                 start, end);
    }
    double a = clrun__attr_float_or(call, "cubic_coeff_a", -0.75);
    if (!isfinite(a))
        return clrun__refuse(&err, "attribute 'cubic_coeff_a' is %g: must be finite", a);
    int64_t sizes[CLRUN_MAX_ATTR_INTS];
    int n = clrun__attr_list(call, "sizes", sizes, CLRUN_MAX_ATTR_INTS);
    if (n != x->rank)
        return clrun__refuse(&err, "sizes has %d entries for x %s of rank %d", n,
                             clrun__type_format(x, sx, sizeof sx), x->rank);
    out[0] = *x;
    for (int d = 0; d < n; d++) {
        if (sizes[d] < 1)
            return clrun__refuse(&err, "sizes entry %d is %" PRId64 " (dimensions are >= 1)", d,
                                 sizes[d]);
        out[0].shape[d] = sizes[d];
    }
    return CLRUN_OK;
}

static const clrun__op op_resize = {.name = "resize", .min_inputs = 1, .max_inputs = 1,
                                    .outputs = 1, .infer = resize_infer};

const clrun__op *const clrun__ops_resize[] = {&op_resize, NULL};
