/* Detection operators: NonMaxSuppression, MaxPool's Indices output and MaxUnpool.
 *
 * NonMaxSuppression's output has as many rows as boxes are kept, which only the data decide,
 * and clrun plans every tensor's size at load. With boxes and scores known at load (constants,
 * or inputs fixed with the `constants` option) it is evaluated on the host and its output has
 * exactly the kept rows. Otherwise it runs on the device as graph op non_max_suppression, whose
 * output has a fixed capacity, B C min(max_output_boxes_per_class, N) rows (the most that can be
 * kept): the kept triples first, in onnxruntime's order, then rows of -1. The planner's sizes stay
 * those of the tensors the device writes, nothing is read back in the middle of a run, and the
 * number kept is the number of rows before the first -1 (a -1 gathers the last element, so
 * later Gathers stay within their data). max_output_boxes_per_class, iou_threshold and
 * score_threshold must be known at load (exporters write them as constants).
 *
 * MaxPool's Indices: graph op maxpool2d_indices beside maxpool2d, over the same geometry.
 * MaxUnpool: X's values scattered (scatter_elements, indices in order, so the last of equal
 * indices wins as onnxruntime's loop) into zeros of the unpooled size (what kernel_shape,
 * strides and pads give), flat; a larger output_shape adds zeros at the end of each spatial
 * axis (the indices keep their positions, as the backend suite's case expects). */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/map.h"

/* ---- NonMaxSuppression ---- */

typedef struct nms_params {
    int64_t batches, classes, boxes, max_output;
    float iou_threshold, score_threshold;
    bool has_score_threshold;
    int64_t center_point_box;
} nms_params;

static clrun_status nms_read(clrun__imp *im, clrun__onode *n, nms_params *p)
{
    memset(p, 0, sizeof *p);
    clrun_status s = clrun__need_inputs(im, n, 2);
    if (s == CLRUN_OK)
        s = clrun__oattr_int(im, n, "center_point_box", 0, &p->center_point_box);
    if (s != CLRUN_OK)
        return s;
    if (p->center_point_box != 0 && p->center_point_box != 1)
        return clrun__invalid(im, "center_point_box is %" PRId64 ": must be 0 (corners) or 1 "
                              "(center, width, height)", p->center_point_box);
    const clrun__otensor *boxes = &n->in[0]->c, *scores = &n->in[1]->c;
    char db[128], ds[128];
    if (boxes->rank != 3 || boxes->dims[2] != 4 || scores->rank != 3 ||
        scores->dims[0] != boxes->dims[0] || scores->dims[2] != boxes->dims[1])
        return clrun__invalid(im, "boxes are %s and scores %s: expected boxes [B, N, 4] and scores "
                              "[B, C, N]", clrun__onnx_dims_text(boxes->rank, boxes->dims, db, sizeof db),
                              clrun__onnx_dims_text(scores->rank, scores->dims, ds, sizeof ds));
    if (boxes->elem != CLRUN__ONNX_FLOAT || scores->elem != CLRUN__ONNX_FLOAT) {
        char eb[32], es[32];
        return clrun__unsupported(im, "boxes of %s and scores of %s: float only",
                                  clrun__onnx_elem_name(boxes->elem, eb, sizeof eb),
                                  clrun__onnx_elem_name(scores->elem, es, sizeof es));
    }
    p->batches = boxes->dims[0];
    p->boxes = boxes->dims[1];
    p->classes = scores->dims[1];
    int64_t max_output[1] = {0};
    int count;
    double value;
    bool present;
    s = clrun__const_ints(im, n, 2, true, max_output, 1, &count);
    if (s != CLRUN_OK)
        return s;
    p->max_output = count == 1 ? max_output[0] : 0;
    if (p->max_output < 0)
        return clrun__invalid(im, "max_output_boxes_per_class is %" PRId64 ": must be 0 or more",
                              p->max_output);
    if ((s = clrun__const_real(im, n, 3, &value, &present)) != CLRUN_OK)
        return s;
    p->iou_threshold = present ? (float)value : 0.0f;
    if (!(p->iou_threshold >= 0.0f && p->iou_threshold <= 1.0f))
        return clrun__invalid(im, "iou_threshold is %g: must be 0 to 1", value);
    if ((s = clrun__const_real(im, n, 4, &value, &present)) != CLRUN_OK)
        return s;
    p->has_score_threshold = present;
    p->score_threshold = present ? (float)value : 0.0f;
    return CLRUN_OK;
}

/* Box extents as the kernel computes them (kernels/detect.cl: nms_extent, nms_suppresses),
 * so that host and device keep the same boxes. */
static void nms_extent(const float *b, bool center, float e[4])
{
    if (center) {
        float hw = b[2] / 2.0f, hh = b[3] / 2.0f;
        e[0] = b[1] - hh, e[1] = b[0] - hw, e[2] = b[1] + hh, e[3] = b[0] + hw;
    } else {
        e[0] = fminf(b[0], b[2]), e[1] = fminf(b[1], b[3]);
        e[2] = fmaxf(b[0], b[2]), e[3] = fmaxf(b[1], b[3]);
    }
}

static bool nms_suppresses(const float *a, const float *b, bool center, float threshold)
{
    float ea[4], eb[4];
    nms_extent(a, center, ea);
    nms_extent(b, center, eb);
    float ix0 = fmaxf(ea[1], eb[1]), ix1 = fminf(ea[3], eb[3]);
    if (ix1 <= ix0)
        return false;
    float iy0 = fmaxf(ea[0], eb[0]), iy1 = fminf(ea[2], eb[2]);
    if (iy1 <= iy0)
        return false;
    volatile float inter = (ix1 - ix0) * (iy1 - iy0); /* rounded as the device's, no contraction */
    if (inter <= 0.0f)
        return false;
    volatile float area_a = (ea[3] - ea[1]) * (ea[2] - ea[0]);
    volatile float area_b = (eb[3] - eb[1]) * (eb[2] - eb[0]);
    volatile float sum = area_a + area_b;
    float uni = sum - inter;
    if (area_a <= 0.0f || area_b <= 0.0f || uni <= 0.0f)
        return false;
    return inter / uni > threshold;
}

/* Every input known at load: the kept triples on the host, exactly as many rows as kept. */
clrun_status clrun__fold_nms(clrun__imp *im, clrun__onode *n)
{
    nms_params p;
    clrun_status s = nms_read(im, n, &p);
    if (s != CLRUN_OK)
        return s;
    int64_t per_class = p.max_output < p.boxes ? p.max_output : p.boxes;
    uint64_t pairs = (uint64_t)p.batches * (uint64_t)p.classes, cap = pairs * (uint64_t)per_class;
    const clrun__otensor *bt = &n->in[0]->c, *st = &n->in[1]->c;
    float *boxes = malloc((size_t)(p.batches * p.boxes * 4) * sizeof *boxes + 1);
    float *scores = malloc((size_t)(pairs * (uint64_t)p.boxes) * sizeof *scores + 1);
    int64_t *kept = malloc((size_t)cap * 3 * sizeof *kept + 1);
    if (!boxes || !scores || !kept) {
        free(boxes);
        free(scores);
        free(kept);
        return CLRUN__OOM(im);
    }
    for (uint64_t i = 0; i < clrun__otensor_count(bt); i++)
        boxes[i] = (float)clrun__otensor_get_real(bt, i);
    for (uint64_t i = 0; i < clrun__otensor_count(st); i++)
        scores[i] = (float)clrun__otensor_get_real(st, i);
    int64_t rows = 0;
    for (uint64_t bc = 0; bc < pairs; bc++) {
        const float *sc = scores + bc * (uint64_t)p.boxes;
        const float *bx = boxes + bc / (uint64_t)p.classes * (uint64_t)p.boxes * 4;
        int64_t first = rows, prev = -1;
        float prev_score = INFINITY;
        while (rows - first < per_class) {
            int64_t best = -1;
            float best_score = 0.0f;
            for (int64_t i = 0; i < p.boxes; i++) {
                float v = sc[i];
                if (isnan(v) || (p.has_score_threshold && !(v > p.score_threshold)))
                    continue;
                if (!(v < prev_score || (v == prev_score && i > prev)))
                    continue;
                if (best < 0 || v > best_score)
                    best = i, best_score = v;
            }
            if (best < 0)
                break;
            prev = best;
            prev_score = best_score;
            bool keep = true;
            for (int64_t k = first; k < rows && keep; k++)
                keep = !nms_suppresses(bx + kept[3 * k + 2] * 4, bx + best * 4, p.center_point_box != 0,
                                       p.iou_threshold);
            if (keep) {
                kept[3 * rows] = (int64_t)(bc / (uint64_t)p.classes);
                kept[3 * rows + 1] = (int64_t)(bc % (uint64_t)p.classes);
                kept[3 * rows + 2] = best;
                rows++;
            }
        }
    }
    free(boxes);
    free(scores);
    int64_t dims[2] = {rows, 3};
    clrun__otensor t;
    if (!clrun__otensor_alloc(&t, CLRUN__ONNX_INT64, 2, dims)) {
        free(kept);
        return clrun__host_result_failed(im, CLRUN__ONNX_INT64, 2, dims);
    }
    for (int64_t i = 0; i < rows * 3; i++)
        clrun__otensor_set_int(&t, (uint64_t)i, kept[i]);
    free(kept);
    return clrun__define_const(im, n, 0, &t);
}

clrun_status clrun__map_nms(clrun__imp *im, clrun__onode *n)
{
    nms_params p;
    clrun_status s = nms_read(im, n, &p);
    if (s != CLRUN_OK)
        return s;
    if (p.max_output == 0) { /* nothing kept, whatever the data */
        int64_t dims[2] = {0, 3};
        clrun__otensor t;
        if (!clrun__otensor_alloc(&t, CLRUN__ONNX_INT64, 2, dims))
            return clrun__host_result_failed(im, CLRUN__ONNX_INT64, 2, dims);
        return clrun__define_const(im, n, 0, &t);
    }
    clrun_attr at[4];
    int k = 0;
    at[k++] = clrun__mk_int("max_output", p.max_output < p.boxes ? p.max_output : p.boxes);
    at[k++] = clrun__mk_float("iou_threshold", p.iou_threshold);
    if (p.has_score_threshold)
        at[k++] = clrun__mk_float("score_threshold", p.score_threshold);
    at[k++] = clrun__mk_int("center_point_box", p.center_point_box);
    clrun__value *in[2] = {n->in[0], n->in[1]}, *out = NULL;
    s = clrun__emit1(im, n, "non_max_suppression", in, 2, at, k, 0, &out);
    if (s == CLRUN_OK && out)
        out->capacity_rows = true;
    return s;
}

/* ---- MaxPool with Indices ---- */

clrun_status clrun__maxpool_indices(clrun__imp *im, clrun__onode *n, clrun__value *x,
                                    const clrun__window *w, int64_t storage_order)
{
    if (storage_order != 0 && storage_order != 1)
        return clrun__invalid(im, "storage_order is %" PRId64 ": must be 0 (row major) or 1 "
                              "(column major)", storage_order);
    if (w->spatial == 3)
        return clrun__unsupported(im, "the Indices output of a 3-D MaxPool is not supported");
    if (x->c.elem != CLRUN__ONNX_FLOAT) {
        char e[32];
        return clrun__unsupported(im, "the Indices output of MaxPool over %s is not supported",
                                  clrun__onnx_elem_name(x->c.elem, e, sizeof e));
    }
    /* A ceil_mode window entirely in the padding: onnxruntime counts it, PyTorch (and the
     * graph op) drops it; refused as MaxPool's values are (clrun__pool2d_core). */
    for (int i = 0; w->ceil_mode && i < w->spatial; i++) {
        int64_t in = x->c.dims[2 + i], span = (w->kernel[i] - 1) * w->dilation[i] + 1;
        int64_t room = in + w->pad_begin[i] + w->pad_end[i] - span;
        if (room >= 0 && ((room + w->stride[i] - 1) / w->stride[i]) * w->stride[i] >= in + w->pad_begin[i])
            return clrun__unsupported(im, "ceil_mode=1 with a last window entirely in the padding");
    }
    /* 1-D: [N, C, W] as [N, C, 1, W]; with H = 1 the flat indices are those of x itself. */
    int sp = w->spatial, base = sp == 1 ? 1 : 0;
    int64_t kernel[2] = {1, 1}, stride[2] = {1, 1}, dilation[2] = {1, 1}, pads[4] = {0, 0, 0, 0};
    for (int i = 0; i < sp; i++) {
        kernel[base + i] = w->kernel[i];
        stride[base + i] = w->stride[i];
        dilation[base + i] = w->dilation[i];
        pads[base + i] = w->pad_begin[i];
        pads[2 + base + i] = w->pad_end[i];
    }
    clrun_status s = CLRUN_OK;
    clrun__value *image = x;
    if (sp == 1) {
        int64_t dims[4] = {x->c.dims[0], x->c.dims[1], 1, x->c.dims[2]};
        s = clrun__emit_reshape(im, n, x, 4, dims, -1, &image);
    }
    clrun_attr at[7] = {clrun__mk_ints("kernel", kernel, 2), clrun__mk_ints("stride", stride, 2),
                        clrun__mk_ints("pads", pads, 4), clrun__mk_ints("dilation", dilation, 2),
                        clrun__mk_int("ceil_mode", w->ceil_mode), clrun__mk_int("storage_order", storage_order)};
    if (s == CLRUN_OK && !clrun__op_accepts("maxpool2d", &image, 1, at, 5))
        return clrun__unsupported(im, "the Indices output with this window (pads beyond half the "
                                  "kernel) is not supported");
    clrun__value *y = NULL, *i = NULL;
    bool values = clrun__out(im, n, 0) != NULL; /* Y may be left unnamed */
    if (s == CLRUN_OK && values)
        s = clrun__emit1(im, n, "maxpool2d", &image, 1, at, 5, sp == 1 ? -1 : 0, &y);
    if (s == CLRUN_OK)
        s = clrun__emit1(im, n, "maxpool2d_indices", &image, 1, at, 6, sp == 1 ? -1 : 1, &i);
    if (s != CLRUN_OK || sp == 2)
        return s;
    int64_t out[3] = {i->c.dims[0], i->c.dims[1], i->c.dims[3]};
    if (values)
        s = clrun__emit_reshape(im, n, y, 3, out, 0, NULL);
    return s == CLRUN_OK ? clrun__emit_reshape(im, n, i, 3, out, 1, NULL) : s;
}

/* ---- MaxUnpool ---- */

clrun_status clrun__map_max_unpool(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 2);
    if (s != CLRUN_OK)
        return s;
    clrun__value *x = n->in[0], *idx = n->in[1];
    int rank = x->c.rank, sp = rank - 2;
    char dx[128], di[128];
    if (rank < 3 || idx->c.rank != rank || memcmp(idx->c.dims, x->c.dims, (size_t)rank * sizeof x->c.dims[0]))
        return clrun__invalid(im, "X is %s and I %s: expected [N, C, D...] and I of X's shape",
                              clrun__onnx_dims_text(rank, x->c.dims, dx, sizeof dx),
                              clrun__onnx_dims_text(idx->c.rank, idx->c.dims, di, sizeof di));
    if (idx->c.elem != CLRUN__ONNX_INT64) {
        char e[32];
        return clrun__invalid(im, "I is %s: expected int64", clrun__onnx_elem_name(idx->c.elem, e, sizeof e));
    }
    int64_t kernel[CLRUN__ONNX_MAX_RANK], strides[CLRUN__ONNX_MAX_RANK], pads[2 * CLRUN__ONNX_MAX_RANK];
    int nk, ns, np;
    s = clrun__oattr_ints(im, n, "kernel_shape", kernel, CLRUN__ONNX_MAX_RANK, &nk);
    if (s == CLRUN_OK)
        s = clrun__oattr_ints(im, n, "strides", strides, CLRUN__ONNX_MAX_RANK, &ns);
    if (s == CLRUN_OK)
        s = clrun__oattr_ints(im, n, "pads", pads, 2 * CLRUN__ONNX_MAX_RANK, &np);
    if (s != CLRUN_OK)
        return s;
    if (nk != sp)
        return clrun__invalid(im, "kernel_shape has %d entries: X has %d spatial dimensions", nk < 0 ? 0 : nk, sp);
    if ((ns >= 0 && ns != sp) || (np >= 0 && np != 2 * sp))
        return clrun__invalid(im, "strides or pads do not match X's %d spatial dimensions", sp);
    int64_t dims[CLRUN__ONNX_MAX_RANK] = {x->c.dims[0], x->c.dims[1]};
    for (int d = 0; d < sp; d++) {
        int64_t stride = ns < 0 ? 1 : strides[d], pb = np < 0 ? 0 : pads[d], pe = np < 0 ? 0 : pads[sp + d];
        if (kernel[d] < 1 || stride < 1 || pb < 0 || pe < 0)
            return clrun__invalid(im, "kernel_shape, strides must be positive and pads not negative");
        dims[2 + d] = (x->c.dims[2 + d] - 1) * stride - pb - pe + kernel[d];
    }
    int count;
    int64_t given[CLRUN__ONNX_MAX_RANK], unpooled[CLRUN__ONNX_MAX_RANK];
    memcpy(unpooled, dims, sizeof unpooled);
    s = clrun__const_ints(im, n, 2, true, given, CLRUN__ONNX_MAX_RANK, &count);
    if (s != CLRUN_OK)
        return s;
    if (count >= 0) {
        if (count != rank || given[0] != dims[0] || given[1] != dims[1])
            return clrun__invalid(im, "output_shape %s: expected [%" PRId64 ", %" PRId64 ", D...] of "
                                  "rank %d", clrun__onnx_dims_text(count, given, di, sizeof di),
                                  dims[0], dims[1], rank);
        for (int d = 2; d < rank; d++) {
            if (given[d] < dims[d])
                return clrun__invalid(im, "output_shape %s is smaller than the unpooled %s",
                                      clrun__onnx_dims_text(count, given, di, sizeof di),
                                      clrun__onnx_dims_text(rank, dims, dx, sizeof dx));
            dims[d] = given[d];
        }
    }
    int64_t total = 1, elems = 1;
    for (int d = 0; d < rank; d++) {
        if (unpooled[d] < 1)
            return clrun__invalid(im, "the output %s is empty", clrun__onnx_dims_text(rank, unpooled, dx, sizeof dx));
        total *= unpooled[d];
        elems *= x->c.dims[d];
    }
    clrun__value *zero = clrun__scalar_value(im, x->c.elem, 0.0, 2), *zeros = NULL, *flat_x = NULL,
                 *flat_i = NULL, *y = NULL;
    if (zero == NULL)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY; /* recorded */
    int64_t row[2] = {1, total}, line[2] = {1, elems};
    clrun_attr shape = clrun__mk_ints("shape", row, 2);
    s = clrun__emit1(im, n, "expand", &zero, 1, &shape, 1, -1, &zeros);
    if (s == CLRUN_OK)
        s = clrun__emit_reshape(im, n, x, 2, line, -1, &flat_x);
    if (s == CLRUN_OK)
        s = clrun__emit_reshape(im, n, idx, 2, line, -1, &flat_i);
    if (s != CLRUN_OK)
        return s;
    clrun__value *in[3] = {zeros, flat_i, flat_x};
    clrun_attr at[2] = {clrun__mk_int("axis", 1), clrun__mk_int("reduction", 0)};
    s = clrun__emit1(im, n, "scatter_elements", in, 3, at, 2, -1, &y);
    int last = rank - 1;
    while (last >= 2 && dims[last] == unpooled[last])
        last--;
    if (s == CLRUN_OK)
        s = clrun__emit_reshape(im, n, y, rank, unpooled, last >= 2 ? -1 : 0, &y);
    for (int d = 2; s == CLRUN_OK && d <= last; d++)
        if (dims[d] > unpooled[d])
            s = clrun__pad_axis(im, n, y, d, 0, dims[d] - unpooled[d], "constant", 0, d == last ? 0 : -1, &y);
    return s;
}
