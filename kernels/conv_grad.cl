/* Gradients of convolution and pooling over NCHW images: conv2d's with respect to its weights,
 * and the pools' with respect to their input. Every output is one work-item that sums its
 * terms in a fixed order (no atomics), so a run gives the same bits every time. */
#pragma OPENCL FP_CONTRACT OFF

/* The epilogue of the weight gradient (lib/ops/ops.h): the host defines CLRUN_EPILOGUE and
 * EPILOGUE_PARAMS before this file when the gradient's reader runs inside its kernel. */
#ifdef CLRUN_EPILOGUE
#define EPILOGUE(v, i, c) CLRUN_EPILOGUE(v, i, c)
#else
#define EPILOGUE_PARAMS
#define EPILOGUE(v, i, c) (v)
#endif

/* Geometry of a convolution: {C, H, W, O, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw, groups}.
 * The host's indices are CLRUN__CONV_GEOMETRY in lib/ops/ops_internal.h; tests/test_ops.c
 * checks these against them. */
#define G_C 0
#define G_H 1
#define G_W 2
#define G_O 3
#define G_KH 4
#define G_KW 5
#define G_OH 6
#define G_OW 7
#define G_SH 8
#define G_SW 9
#define G_PH 10
#define G_PW 11
#define G_DH 12
#define G_DW 13
#define G_GROUPS 14

/* The outputs o in [0, n) whose tap o * s - p + k lands inside [0, extent): [*lo, *hi), empty
 * when none does. */
void tap_range(const int p, const int k, const int s, const int extent, const int n, int *lo,
               int *hi)
{
    const int first = p - k, last = extent - 1 + p - k; /* o * s in [first, last] */
    *lo = first <= 0 ? 0 : min(n, (first + s - 1) / s);
    *hi = last < 0 ? 0 : min(n, last / s + 1);
    *hi = max(*hi, *lo);
}

/* Eight floats of a row from p at stride s, reading nothing past the last. */
float8 load8(__global const float *p, const int s)
{
    if (s == 1)
        return vload8(0, p);
    if (s == 2)
        return (float8)(vload8(0, p).even, vload8(0, p + 7).odd);
    return (float8)(p[0], p[s], p[2 * s], p[3 * s], p[4 * s], p[5 * s], p[6 * s], p[7 * s]);
}

/* dw [O, C/groups, KH, KW] from x [N, C, H, W] and dy [N, O, OH, OW]: work-item i is one weight
 * (o, c, kh, kw), the sum over n, oh, ow of dy[n, o, oh, ow] x[n, group's c, ih, iw], ih = oh sh
 * - ph + kh dh, iw = ow sw - pw + kw dw. Only the (oh, ow) whose tap lands inside the image are
 * visited (a rectangle, found once); along each row eight columns at a time into eight lanes,
 * the columns left over into a ninth sum, all in n, oh, ow order, the lanes added pairwise at the
 * end. Neighbouring work-items are the taps of one (o, c): they read the same rows. */
__kernel void clrun_conv2d_grad_weight(__global const float *x, __global const float *dy,
                                       __global float *dw, __constant const int *g,
                                       const int N EPILOGUE_PARAMS)
{
    const int KH = g[G_KH], KW = g[G_KW], O = g[G_O], Cg = g[G_C] / g[G_GROUPS];
    const int i = get_global_id(0);
    if (i >= O * Cg * KH * KW)
        return;
    const int kw = i % KW, kh = i / KW % KH, ci = i / (KW * KH) % Cg, o = i / (KW * KH * Cg);
    const int c = o / (O / g[G_GROUPS]) * Cg + ci;
    const int H = g[G_H], W = g[G_W], OH = g[G_OH], OW = g[G_OW], sw = g[G_SW];
    const int row0 = kh * g[G_DH] - g[G_PH], col0 = kw * g[G_DW] - g[G_PW]; /* ih, iw at oh, ow 0 */
    int oh_lo, oh_hi, ow_lo, ow_hi;
    tap_range(g[G_PH], kh * g[G_DH], g[G_SH], H, OH, &oh_lo, &oh_hi);
    tap_range(g[G_PW], kw * g[G_DW], sw, W, OW, &ow_lo, &ow_hi);
    const int vectors = (ow_hi - ow_lo) / 8 * 8;
    float8 lanes = 0.0f;
    float rest = 0.0f;
    for (int n = 0; n < N; n++) {
        __global const float *xp = x + ((ulong)n * g[G_C] + c) * H * W;
        __global const float *dyp = dy + ((ulong)n * O + o) * OH * OW;
        for (int oh = oh_lo; oh < oh_hi; oh++) {
            __global const float *dyr = dyp + oh * OW;
            __global const float *xr = xp + (oh * g[G_SH] + row0) * W;
            int ow = ow_lo;
            for (; ow < ow_lo + vectors; ow += 8)
                lanes = fma(vload8(0, dyr + ow), load8(xr + ow * sw + col0, sw), lanes);
            for (; ow < ow_hi; ow++)
                rest = fma(dyr[ow], xr[ow * sw + col0], rest);
        }
    }
    const float4 folded = lanes.lo + lanes.hi;
    const float v = ((folded.x + folded.y) + (folded.z + folded.w)) + rest;
    dw[i] = EPILOGUE(v, (ulong)i, (uint)o);
}

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

/* The windows along one axis (0: rows, 1: columns; the table has each pair of entries in that
 * order) whose span holds input i, o in [*lo, *hi]: o s - p <= i <= o s - p + (k - 1) d. With
 * a dilation d > 1, only those with (i + p - o s) % d == 0 have a tap on i. */
void windows_of(const int i, __constant const int *g, const int axis, int *lo, int *hi)
{
    const int t = i + g[P_PH + axis], s = g[P_SH + axis]; /* t >= 0: i >= 0, p >= 0 */
    const int first = t - (g[P_KH + axis] - 1) * g[P_DH + axis];
    *lo = first <= 0 ? 0 : (first + s - 1) / s;
    *hi = min(t / s, g[P_OH + axis] - 1);
}

/* maxpool2d_grad, first launch: work-item (p, plane) is window p = oh * OW + ow of image plane
 * (n * C + c); into at[plane * OH * OW + p] goes the position (ih * W + iw) its gradient goes
 * to: its first tap inside the image, replaced by every later tap that is strictly greater than
 * the maximum so far or NaN (PyTorch's CPU kernel: `val > maxval || isnan(val)`, from -inf). */
__kernel void clrun_maxpool2d_argmax(__global const float *x, __global int *at,
                                     __constant const int *g)
{
    const int OW = g[P_OW], P = g[P_OH] * OW;
    const int p = get_global_id(0);
    const size_t plane = get_global_id(1);
    if (p >= P)
        return;
    const int oh = p / OW, ow = p % OW;
    const int H = g[P_H], W = g[P_W], DH = g[P_DH], DW = g[P_DW];
    const int h0 = oh * g[P_SH] - g[P_PH], w0 = ow * g[P_SW] - g[P_PW];
    const int h_end = min(h0 + (g[P_KH] - 1) * DH + 1, H), w_end = min(w0 + (g[P_KW] - 1) * DW + 1, W);
    int h_first = h0, w_first = w0;
    while (h_first < 0)
        h_first += DH;
    while (w_first < 0)
        w_first += DW;
    __global const float *xp = x + plane * H * W;
    int best = h_first * W + w_first;
    float m = -INFINITY;
    for (int h = h_first; h < h_end; h += DH)
        for (int w = w_first; w < w_end; w += DW) {
            const float v = xp[h * W + w];
            if (v > m || isnan(v)) {
                m = v;
                best = h * W + w;
            }
        }
    at[plane * P + p] = best;
}

/* maxpool2d_grad, second launch: work-item (ih, plane) is row ih of dx in image plane
 * (n * C + c), which it alone writes: zeros, then the dy of every window that holds the row
 * added where the window routes it (`at`), oh, ow ascending, so each element is one sum in that
 * order. */
__kernel void clrun_maxpool2d_grad(__global const int *at, __global const float *dy,
                                   __global float *dx, __constant const int *g)
{
    const int H = g[P_H], W = g[P_W], OW = g[P_OW];
    const int ih = get_global_id(0);
    const size_t plane = get_global_id(1);
    if (ih >= H)
        return;
    const size_t base = plane * g[P_OH] * OW;
    __global float *row = dx + (plane * H + ih) * W;
    for (int iw = 0; iw < W; iw++)
        row[iw] = 0.0f;
    const int first = ih * W;
    int oh_lo, oh_hi;
    windows_of(ih, g, 0, &oh_lo, &oh_hi);
    for (int oh = oh_lo; oh <= oh_hi; oh++)
        for (int ow = 0; ow < OW; ow++) {
            const int iw = at[base + oh * OW + ow] - first;
            if (iw >= 0 && iw < W)
                row[iw] += dy[base + oh * OW + ow];
        }
}

/* How many taps of avgpool2d's window starting at `start` along one axis (k taps, no dilation)
 * lie inside the image [0, n) (*inside) and before the padded image's end n + pad_end
 * (*padded): what clrun_pool2d_f32 counts, as a product of one count per axis. */
void axis_taps(const int start, const int k, const int n, const int pad_end, int *inside,
               int *padded)
{
    *inside = min(start + k, n) - max(start, 0);
    *padded = min(start + k, n + pad_end) - start;
}

/* avgpool2d_grad: work-item (ih, plane) is row ih of dx in image plane (n * C + c), which it
 * alone writes: zeros, then dy / divisor of every window that holds the row added to the window's
 * taps in it, oh, ow ascending, so each element is one sum in that order. The divisor is
 * avgpool2d's (the taps inside the image, or with count_include_pad inside the padded image).
 * avgpool2d has no dilation: every position of a window's span is a tap. */
__kernel void clrun_avgpool2d_grad(__global const float *dy, __global float *dx,
                                   __constant const int *g)
{
    const int H = g[P_H], W = g[P_W], OW = g[P_OW], KH = g[P_KH], KW = g[P_KW];
    const int ih = get_global_id(0);
    const size_t plane = get_global_id(1);
    if (ih >= H)
        return;
    __global const float *dyp = dy + plane * g[P_OH] * OW;
    __global float *row = dx + (plane * H + ih) * W;
    for (int iw = 0; iw < W; iw++)
        row[iw] = 0.0f;
    const bool include_pad = g[P_INCLUDE_PAD];
    int oh_lo, oh_hi;
    windows_of(ih, g, 0, &oh_lo, &oh_hi);
    for (int oh = oh_lo; oh <= oh_hi; oh++) {
        int rows, padded_rows;
        axis_taps(oh * g[P_SH] - g[P_PH], KH, H, g[P_PHE], &rows, &padded_rows);
        for (int ow = 0; ow < OW; ow++) {
            const int w0 = ow * g[P_SW] - g[P_PW];
            int cols, padded_cols;
            axis_taps(w0, KW, W, g[P_PWE], &cols, &padded_cols);
            const int divisor = include_pad ? padded_rows * padded_cols : rows * cols;
            const float share = dyp[oh * OW + ow] / (float)divisor;
            for (int iw = max(w0, 0); iw < min(w0 + KW, W); iw++)
                row[iw] += share;
        }
    }
}
