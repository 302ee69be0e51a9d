/* Direct convolution and pooling over NCHW images, one output per work-item. Convolutions with
 * many output channels per group run as a tiled product instead (clrun_conv2d_gemm in
 * matmul.cl); this kernel serves depthwise and narrow ones, and devices with small groups. */

/* Geometry of a convolution, as in matmul.cl:
 * {C, H, W, O, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw, groups}. The host's indices are
 * CLRUN__CONV_GEOMETRY in lib/ops_internal.h; tests/test_ops.c checks these against them. */
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

/* Work-item (p, o, n): output position p = oh * OW + ow of channel o of image n. */
__kernel void clrun_conv2d_direct(__global const float *x, __global const float *w,
                                  __global const float *bias, __global float *out,
                                  __constant const int *g, const int has_bias)
{
    const int P = g[G_OH] * g[G_OW];
    const int p = get_global_id(0), o = get_global_id(1);
    const size_t n = get_global_id(2);
    if (p >= P)
        return;
    const int oh = p / g[G_OW], ow = p % g[G_OW];
    const int Cg = g[G_C] / g[G_GROUPS], Og = g[G_O] / g[G_GROUPS], group = o / Og;
    const int KH = g[G_KH], KW = g[G_KW], H = g[G_H], W = g[G_W];
    __global const float *xg = x + ((ulong)n * g[G_C] + group * Cg) * H * W;
    __global const float *wo = w + (ulong)o * Cg * KH * KW;
    float acc = 0.0f;
    for (int c = 0; c < Cg; c++) {
        for (int kh = 0; kh < KH; kh++) {
            const int ih = oh * g[G_SH] - g[G_PH] + kh * g[G_DH];
            if (ih < 0 || ih >= H)
                continue;
            for (int kw = 0; kw < KW; kw++) {
                const int iw = ow * g[G_SW] - g[G_PW] + kw * g[G_DW];
                if (iw >= 0 && iw < W)
                    acc = mad(xg[((ulong)c * H + ih) * W + iw], wo[(c * KH + kh) * KW + kw], acc);
            }
        }
    }
    out[((ulong)n * g[G_O] + o) * P + p] = acc + (has_bias ? bias[o] : 0.0f);
}

/* Geometry of a pooling: {H, W, OH, OW, KH, KW, SH, SW, PH, PW}. The host's indices are
 * CLRUN__POOL_GEOMETRY in lib/ops_internal.h; tests/test_ops.c checks these against them. */
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

/* Work-item (p, plane): output position p of image plane (n * C + c). Padding is never read: a
 * max ignores it and an average divides by the in-bounds count (the host ensures every window
 * holds at least one in-bounds element). */
__kernel void clrun_pool2d_f32(__global const float *x, __global float *y, __constant const int *g,
                               const int is_max)
{
    const int P = g[P_OH] * g[P_OW];
    const int p = get_global_id(0);
    const size_t plane = get_global_id(1);
    if (p >= P)
        return;
    const int oh = p / g[P_OW], ow = p % g[P_OW];
    const int h0 = oh * g[P_SH] - g[P_PH], w0 = ow * g[P_SW] - g[P_PW];
    const int h1 = min(h0 + g[P_KH], g[P_H]), w1 = min(w0 + g[P_KW], g[P_W]);
    __global const float *xp = x + plane * g[P_H] * g[P_W];
    float acc = is_max ? -INFINITY : 0.0f;
    for (int ih = max(h0, 0); ih < h1; ih++)
        for (int iw = max(w0, 0); iw < w1; iw++) {
            const float v = xp[ih * g[P_W] + iw];
            acc = is_max ? fmax(acc, v) : acc + v;
        }
    const int count = (h1 - max(h0, 0)) * (w1 - max(w0, 0));
    y[plane * P + p] = is_max ? acc : acc / (float)count;
}
