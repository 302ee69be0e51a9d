/* The sampling ops: grid_sample (ONNX GridSample, opset 16: an image read at the points of a
 * grid, by bilinear, nearest or bicubic interpolation) and roi_align (ONNX RoiAlign, opsets 10
 * and 16: each region of interest pooled into a fixed grid of bins from bilinear samples). Both
 * compute their coordinates on the device from data (the grid, the boxes), so the type rules
 * only check shapes, dtypes and attributes; kernels/sample.cl has the arithmetic. */
#include <inttypes.h>
#include <math.h>

#include "graph/layout_geometry.h"
#include "graph/op.h"
#include "graph/op_families.h"
#include "graph/op_geometry.h"
#include "graph/types.h"

/* Input i is f32, or f64 (a device with cl_khr_fp64: prepare says so). */
static clrun_status check_float(const clrun__op_call *call, int i, const char *what,
                                const clrun__infer_error *err)
{
    clrun_status s = clrun__check_dims(call, i, err);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *t = &call->inputs[i];
    char st[CLRUN__TYPE_TEXT];
    if (t->dtype != CLRUN_F32 && t->dtype != CLRUN_F64)
        return clrun__refuse(err, "%s is %s: expected f32 or f64", what,
                             clrun__type_format(t, st, sizeof st));
    if (i > 0 && t->dtype != call->inputs[0].dtype)
        return clrun__refuse(err, "%s is %s: expected x's dtype", what,
                             clrun__type_format(t, st, sizeof st));
    return CLRUN_OK;
}

/* ---- grid_sample ------------------------------------------------------------------------- */

static const clrun__attr_spec grid_sample_attrs[] = {
    {"mode", CLRUN__WANT_INT, false},
    {"padding_mode", CLRUN__WANT_INT, false},
    {"align_corners", CLRUN__WANT_INT, false},
};

static clrun_status grid_sample_infer(const clrun__op_call *call, clrun_tensor_type *out,
                                      char *errbuf, size_t errlen)
{
    const clrun__infer_error err = {"grid_sample", errbuf, errlen};
    clrun_status s = clrun__check_input_count(call, 2, 2, &err);
    if (s == CLRUN_OK)
        s = clrun__check_attrs(call, grid_sample_attrs, 3, &err);
    if (s == CLRUN_OK)
        s = check_float(call, 0, "x", &err);
    if (s == CLRUN_OK)
        s = check_float(call, 1, "grid", &err);
    if (s == CLRUN_OK)
        s = clrun__check_int_range(call, "mode", 0, 2, &err);
    if (s == CLRUN_OK)
        s = clrun__check_int_range(call, "padding_mode", 0, 2, &err);
    if (s == CLRUN_OK)
        s = clrun__check_int_range(call, "align_corners", 0, 1, &err);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *x = &call->inputs[0], *g = &call->inputs[1];
    char sx[CLRUN__TYPE_TEXT], sg[CLRUN__TYPE_TEXT];
    if (x->rank != 4)
        return clrun__refuse(&err, "x is %s: expected [N, C, H, W]", clrun__type_format(x, sx, sizeof sx));
    if (g->rank != 4 || g->shape[0] != x->shape[0] || g->shape[3] != 2)
        return clrun__refuse(&err, "grid is %s for x %s: expected [N, H_out, W_out, 2]",
                             clrun__type_format(g, sg, sizeof sg), clrun__type_format(x, sx, sizeof sx));
    if (x->shape[2] > INT32_MAX || x->shape[3] > INT32_MAX || g->shape[1] > INT32_MAX ||
        g->shape[2] > INT32_MAX || x->shape[1] > INT32_MAX)
        return clrun__refuse(&err, "x %s or grid %s has a dimension over 2^31 - 1",
                             clrun__type_format(x, sx, sizeof sx), clrun__type_format(g, sg, sizeof sg));
    out[0] = (clrun_tensor_type){x->dtype, 4, {x->shape[0], x->shape[1], g->shape[1], g->shape[2]}};
    return CLRUN_OK;
}

/* ---- roi_align --------------------------------------------------------------------------- */

static const clrun__attr_spec roi_align_attrs[] = {
    {"mode", CLRUN__WANT_INT, false},
    {"output_height", CLRUN__WANT_INT, false},
    {"output_width", CLRUN__WANT_INT, false},
    {"sampling_ratio", CLRUN__WANT_INT, false},
    {"spatial_scale", CLRUN__WANT_FLOAT, false},
    {"half_pixel", CLRUN__WANT_INT, false},
};

static clrun_status roi_align_infer(const clrun__op_call *call, clrun_tensor_type *out,
                                    char *errbuf, size_t errlen)
{
    const clrun__infer_error err = {"roi_align", errbuf, errlen};
    clrun_status s = clrun__check_input_count(call, 3, 3, &err);
    if (s == CLRUN_OK)
        s = clrun__check_attrs(call, roi_align_attrs, 6, &err);
    if (s == CLRUN_OK)
        s = check_float(call, 0, "x", &err);
    if (s == CLRUN_OK)
        s = check_float(call, 1, "rois", &err);
    if (s == CLRUN_OK)
        s = clrun__check_dims(call, 2, &err);
    if (s == CLRUN_OK)
        s = clrun__check_int_range(call, "mode", 0, 1, &err);
    if (s == CLRUN_OK)
        s = clrun__check_int_range(call, "output_height", 1, INT32_MAX, &err);
    if (s == CLRUN_OK)
        s = clrun__check_int_range(call, "output_width", 1, INT32_MAX, &err);
    if (s == CLRUN_OK)
        s = clrun__check_int_range(call, "sampling_ratio", 0, CLRUN__ROI_MAX_SAMPLES, &err);
    if (s == CLRUN_OK)
        s = clrun__check_int_range(call, "half_pixel", 0, 1, &err);
    if (s != CLRUN_OK)
        return s;
    double scale = clrun__attr_float_or(call, "spatial_scale", 1.0);
    if (!isfinite(scale))
        return clrun__refuse(&err, "attribute 'spatial_scale' is %g: must be finite", scale);
    const clrun_tensor_type *x = &call->inputs[0], *r = &call->inputs[1], *b = &call->inputs[2];
    char sx[CLRUN__TYPE_TEXT], sr[CLRUN__TYPE_TEXT], sb[CLRUN__TYPE_TEXT];
    if (x->rank != 4)
        return clrun__refuse(&err, "x is %s: expected [N, C, H, W]", clrun__type_format(x, sx, sizeof sx));
    if (x->shape[1] > INT32_MAX || x->shape[2] > INT32_MAX || x->shape[3] > INT32_MAX)
        return clrun__refuse(&err, "x is %s: a dimension is over 2^31 - 1",
                             clrun__type_format(x, sx, sizeof sx));
    if (r->rank != 2 || r->shape[1] != 4)
        return clrun__refuse(&err, "rois is %s: expected [num_rois, 4]", clrun__type_format(r, sr, sizeof sr));
    if (b->dtype != CLRUN_I64 || b->rank != 1 || b->shape[0] != r->shape[0])
        return clrun__refuse(&err, "batch_indices is %s for rois %s: expected i64[num_rois]",
                             clrun__type_format(b, sb, sizeof sb), clrun__type_format(r, sr, sizeof sr));
    out[0] = (clrun_tensor_type){x->dtype, 4, {r->shape[0], x->shape[1],
                                               clrun__attr_int_or(call, "output_height", 1),
                                               clrun__attr_int_or(call, "output_width", 1)}};
    return CLRUN_OK;
}

static const clrun__op op_grid_sample = {.name = "grid_sample", .min_inputs = 2, .max_inputs = 2,
                                         .outputs = 1, .infer = grid_sample_infer};
static const clrun__op op_roi_align = {.name = "roi_align", .min_inputs = 3, .max_inputs = 3,
                                       .outputs = 1, .infer = roi_align_infer};

const clrun__op *const clrun__ops_sample[] = {&op_grid_sample, &op_roi_align, NULL};
