/* Type rules of the detection ops: non_max_suppression (the boxes each class keeps, greedy by
 * score; its output has a fixed capacity, the rows past the selected ones are -1) and
 * maxpool2d_indices (where each window of maxpool2d found its maximum, as ONNX MaxPool's
 * second output). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "graph/layout_geometry.h"
#include "graph/op.h"
#include "graph/op_families.h"
#include "graph/op_geometry.h"
#include "graph/types.h"

/* ---- non_max_suppression ----------------------------------------------------------------- */

static const clrun__attr_spec nms_attrs[] = {
    {"max_output", CLRUN__WANT_INT, true},
    {"iou_threshold", CLRUN__WANT_FLOAT, false},
    {"score_threshold", CLRUN__WANT_FLOAT, false},
    {"center_point_box", CLRUN__WANT_INT, false},
};

clrun_status clrun__nms_geometry_of(const clrun__op_call *call, clrun__nms_geometry *g,
                                    const clrun__infer_error *err)
{
    clrun_status s = clrun__check_input_count(call, 2, 2, err);
    if (s == CLRUN_OK)
        s = clrun__check_attrs(call, nms_attrs, 4, err);
    if (s == CLRUN_OK)
        s = clrun__check_int_range(call, "center_point_box", 0, 1, err);
    if (s == CLRUN_OK)
        s = clrun__check_dtype(call, 0, false, err);
    if (s == CLRUN_OK)
        s = clrun__check_dtype(call, 1, false, err);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *boxes = &call->inputs[0], *scores = &call->inputs[1];
    char sb[CLRUN__TYPE_TEXT], ss[CLRUN__TYPE_TEXT];
    if (boxes->rank != 3 || boxes->shape[2] != 4 || scores->rank != 3 ||
        scores->shape[0] != boxes->shape[0] || scores->shape[2] != boxes->shape[1])
        return clrun__refuse(err, "boxes are %s and scores %s: expected boxes [B, N, 4] and "
                             "scores [B, C, N]", clrun__type_format(boxes, sb, sizeof sb),
                             clrun__type_format(scores, ss, sizeof ss));
    int64_t max_output = clrun__attr_int_or(call, "max_output", 0);
    if (max_output < 1)
        return clrun__refuse(err, "attribute 'max_output' is %" PRId64 ": must be at least 1",
                             max_output);
    g->batches = boxes->shape[0];
    g->classes = scores->shape[1];
    g->boxes = boxes->shape[1];
    g->per_class = max_output < g->boxes ? max_output : g->boxes;
    g->capacity = g->batches * g->classes * g->per_class;
    g->iou_threshold = (float)clrun__attr_float_or(call, "iou_threshold", 0.0);
    g->has_score_threshold = clrun__attr_float(call, "score_threshold", &g->score_threshold);
    g->center_point_box = clrun__attr_int_or(call, "center_point_box", 0) != 0;
    return CLRUN_OK;
}

/* boxes [B, N, 4], scores [B, C, N] -> i64 [B * C * min(max_output, N), 3]: the selected
 * (batch, class, box) triples, by batch, then class, then descending score (equal scores: the
 * lower box first), then rows of -1 up to the capacity. */
static clrun_status nms_infer(const clrun__op_call *call, clrun_tensor_type *out, char *errbuf,
                              size_t errlen)
{
    const clrun__infer_error err = {"non_max_suppression", errbuf, errlen};
    clrun__nms_geometry g;
    clrun_status s = clrun__nms_geometry_of(call, &g, &err);
    if (s != CLRUN_OK)
        return s;
    if (g.capacity > INT32_MAX)
        return clrun__refuse(&err, "%" PRId64 " rows of output exceed what the kernels index",
                             g.capacity);
    memset(&out[0], 0, sizeof out[0]);
    out[0].dtype = CLRUN_I64;
    out[0].rank = 2;
    out[0].shape[0] = g.capacity;
    out[0].shape[1] = 3;
    return CLRUN_OK;
}

/* ---- maxpool2d_indices ------------------------------------------------------------------- */

static const clrun__attr_spec indices_attrs[] = {
    {"kernel", CLRUN__WANT_INTS, true},
    {"stride", CLRUN__WANT_INTS, false},
    {"pad", CLRUN__WANT_INTS, false},
    {"pads", CLRUN__WANT_INTS, false},
    {"ceil_mode", CLRUN__WANT_INT, false},
    {"dilation", CLRUN__WANT_INTS, false},
    {"storage_order", CLRUN__WANT_INT, false},
};

/* x [N, C, H, W] -> i64 [N, C, OH, OW] (maxpool2d's geometry): for each window, the flat index
 * into x of its first tap (row-major) holding the window's maximum, as
 * ((n C + c) H + h) W + w, or with storage_order 1 (n C + c) H W + w H + h. */
static clrun_status maxpool_indices_infer(const clrun__op_call *call, clrun_tensor_type *out,
                                          char *errbuf, size_t errlen)
{
    const clrun__infer_error err = {"maxpool2d_indices", errbuf, errlen};
    clrun_status s = clrun__check_input_count(call, 1, 1, &err);
    if (s == CLRUN_OK)
        s = clrun__check_attrs(call, indices_attrs, 7, &err);
    if (s == CLRUN_OK)
        s = clrun__check_int_range(call, "storage_order", 0, 1, &err);
    if (s == CLRUN_OK)
        s = clrun__check_dtype(call, 0, false, &err);
    clrun__pooling_geometry g;
    if (s == CLRUN_OK)
        s = clrun__pooling_geometry_of(call, &g, &err);
    if (s != CLRUN_OK)
        return s;
    out[0] = call->inputs[0];
    out[0].dtype = CLRUN_I64;
    out[0].shape[2] = g.oh;
    out[0].shape[3] = g.ow;
    return CLRUN_OK;
}

/* ---- the table --------------------------------------------------------------------------- */

static const clrun__op op_nms = {.name = "non_max_suppression", .min_inputs = 2, .max_inputs = 2,
                                 .outputs = 1, .infer = nms_infer};
static const clrun__op op_maxpool_indices = {.name = "maxpool2d_indices", .min_inputs = 1,
                                             .max_inputs = 1, .outputs = 1,
                                             .infer = maxpool_indices_infer};

const clrun__op *const clrun__ops_detect[] = {
    &op_nms, &op_maxpool_indices, NULL,
};
