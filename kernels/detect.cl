/* Detection kernels: non-maximum suppression (two launches over the node's scratch) and the
 * indices of a max pool's maxima. Contraction off, so an IoU rounds as onnxruntime's C++ does
 * and the same boxes are kept. */
#pragma OPENCL FP_CONTRACT OFF

/* ---- non-maximum suppression ---- */

/* The extents of a box along both axes: corners [y1, x1, y2, x2] in either order, or with
 * center_point_box [x_center, y_center, width, height]. */
void nms_extent(__global const float *b, const int center, float *y0, float *x0, float *y1,
                float *x1)
{
    if (center) {
        const float hw = b[2] / 2.0f, hh = b[3] / 2.0f;
        *x0 = b[0] - hw;
        *x1 = b[0] + hw;
        *y0 = b[1] - hh;
        *y1 = b[1] + hh;
    } else {
        *y0 = fmin(b[0], b[2]);
        *y1 = fmax(b[0], b[2]);
        *x0 = fmin(b[1], b[3]);
        *x1 = fmax(b[1], b[3]);
    }
}

/* Whether box a suppresses box b: their intersection over union exceeds the threshold (an
 * empty intersection, or a box of no area, never does). */
bool nms_suppresses(__global const float *a, __global const float *b, const int center,
                    const float iou_threshold)
{
    float ay0, ax0, ay1, ax1, by0, bx0, by1, bx1;
    nms_extent(a, center, &ay0, &ax0, &ay1, &ax1);
    nms_extent(b, center, &by0, &bx0, &by1, &bx1);
    const float ix0 = fmax(ax0, bx0), ix1 = fmin(ax1, bx1);
    if (ix1 <= ix0)
        return false;
    const float iy0 = fmax(ay0, by0), iy1 = fmin(ay1, by1);
    if (iy1 <= iy0)
        return false;
    const float inter = (ix1 - ix0) * (iy1 - iy0);
    if (inter <= 0.0f)
        return false;
    const float area_a = (ax1 - ax0) * (ay1 - ay0), area_b = (bx1 - bx0) * (by1 - by0);
    const float uni = area_a + area_b - inter;
    if (area_a <= 0.0f || area_b <= 0.0f || uni <= 0.0f)
        return false;
    return inter / uni > iou_threshold;
}

/* First launch: work-item bc = b * C + c greedily selects the boxes of batch b and class c:
 * candidates by descending score, equal scores by ascending index (found by a scan each, so no
 * sort buffer), those at or below the score threshold (when there is one) and NaN skipped; a
 * candidate is kept unless a kept box suppresses it, until per_class are kept. The kept box
 * indices go to sel[bc * per_class ...], their number to counts[bc]. */
__kernel void clrun_nms_select(__global const float *boxes, __global const float *scores,
                               __global int *sel, __global int *counts, const int B, const int C,
                               const int N, const int per_class, const float iou_threshold,
                               const int has_score_threshold, const float score_threshold,
                               const int center)
{
    const int bc = get_global_id(0);
    if (bc >= B * C)
        return;
    const int b = bc / C;
    __global const float *s = scores + (size_t)bc * N;
    __global const float *bx = boxes + (size_t)b * N * 4;
    __global int *kept = sel + (size_t)bc * per_class;
    int count = 0;
    float prev_score = INFINITY;
    int prev_index = -1;
    while (count < per_class) {
        int best = -1;
        float best_score = 0.0f;
        for (int i = 0; i < N; i++) {
            const float v = s[i];
            if (isnan(v) || (has_score_threshold && !(v > score_threshold)))
                continue;
            /* after the previous candidate in (score desc, index asc) order */
            if (!(v < prev_score || (v == prev_score && i > prev_index)))
                continue;
            if (best < 0 || v > best_score) {
                best = i;
                best_score = v;
            }
        }
        if (best < 0)
            break;
        prev_score = best_score;
        prev_index = best;
        bool keep = true;
        for (int k = 0; k < count && keep; k++)
            keep = !nms_suppresses(bx + (size_t)kept[k] * 4, bx + (size_t)best * 4, center,
                                   iou_threshold);
        if (keep)
            kept[count++] = best;
    }
    counts[bc] = count;
}

/* Second launch: work-item r writes row r of the output [capacity, 3]: the r-th kept triple
 * (batch, class, box) in (batch, class, score) order, or -1s past the last. */
__kernel void clrun_nms_rows(__global const int *sel, __global const int *counts,
                             __global long *out, const int BC, const int C, const int per_class,
                             const int capacity)
{
    const int r = get_global_id(0);
    if (r >= capacity)
        return;
    long row[3] = {-1, -1, -1};
    int before = 0;
    for (int bc = 0; bc < BC; bc++) {
        const int n = counts[bc];
        if (r < before + n) {
            row[0] = bc / C;
            row[1] = bc % C;
            row[2] = sel[(size_t)bc * per_class + (r - before)];
            break;
        }
        before += n;
    }
    out[(size_t)r * 3] = row[0];
    out[(size_t)r * 3 + 1] = row[1];
    out[(size_t)r * 3 + 2] = row[2];
}

/* ---- maxpool2d_indices ---- */

/* Geometry of a pooling: {H, W, OH, OW, KH, KW, SH, SW, PH, PW, PHE, PWE, DH, DW,
 * count_include_pad}. The host's indices are CLRUN__POOLING_GEOMETRY in
 * lib/ops/ops_internal.h; tests/test_ops.c checks these against them. */
#define P_H 0
#define P_W 1
#define P_OH 2
#define P_OW 3
#define P_KH 4
#define P_KW 5
#define P_SH 6
#define P_SW 7
#define P_PH 8
#define P_PW 9
#define P_PHE 10
#define P_PWE 11
#define P_DH 12
#define P_DW 13
#define P_INCLUDE_PAD 14

/* Work-item (p, plane): window p = oh * OW + ow of image plane (n * C + c). Its index is the
 * first tap inside the image (row-major) whose value is strictly greater than every tap before
 * it (onnxruntime's rule; NaN never wins, as clrun_pool2d_f32's fmax ignores it; a window of
 * NaN and -inf alone gives its first tap, where onnxruntime gives -1), as a flat
 * index of x: plane H W + h W + w, or with column_major plane H W + w H + h. */
__kernel void clrun_maxpool2d_indices(__global const float *x, __global long *y,
                                      __constant const int *g, const int column_major)
{
    const int OW = g[P_OW], P = g[P_OH] * OW;
    const int p = get_global_id(0);
    const size_t plane = get_global_id(1);
    if (p >= P)
        return;
    const int oh = p / OW, ow = p % OW;
    const int H = g[P_H], W = g[P_W], DH = g[P_DH], DW = g[P_DW];
    const int h0 = oh * g[P_SH] - g[P_PH], w0 = ow * g[P_SW] - g[P_PW];
    __global const float *xp = x + plane * H * W;
    float m = -INFINITY;
    int bh = -1, bw = -1;
    for (int kh = 0; kh < g[P_KH]; kh++) {
        const int h = h0 + kh * DH;
        if (h < 0 || h >= H)
            continue;
        for (int kw = 0; kw < g[P_KW]; kw++) {
            const int w = w0 + kw * DW;
            if (w < 0 || w >= W)
                continue;
            const float v = xp[h * W + w];
            if (bh < 0 || v > m) {
                m = isnan(v) ? -INFINITY : v;
                bh = h;
                bw = w;
            }
        }
    }
    const long at = column_major ? (long)bw * H + bh : (long)bh * W + bw;
    y[plane * P + p] = (long)(plane * H * W) + at;
}
