/* Direct convolution and pooling over NCHW images. Convolutions run as products where they can
 * (matmul_core.cl on CPUs, clrun_conv2d_gemm in matmul.cl elsewhere); this file has the direct
 * kernel (narrow convolutions on devices with local memory, small work-groups), the depthwise
 * kernel (vectorised along rows), conv_transpose2d and the pools. */
#pragma OPENCL FP_CONTRACT OFF

/* The epilogue (lib/ops/ops.h): the host defines CLRUN_EPILOGUE and EPILOGUE_PARAMS before
 * this file when a node has one. */
#ifdef CLRUN_EPILOGUE
#define EPILOGUE(v, i, c) CLRUN_EPILOGUE(v, i, c)
#else
#define EPILOGUE_PARAMS
#define EPILOGUE(v, i, c) (v)
#endif

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

/* Work-item (p, o, n): output position p = oh * OW + ow of channel o of image n. The taps are
 * summed c, kh, kw ascending, one fma each, skipping padding. */
__kernel void clrun_conv2d_direct(__global const float *x, __global const float *w,
                                  __global const float *bias, __global float *out,
                                  __constant const int *g, const int has_bias EPILOGUE_PARAMS)
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
                    acc = fma(xg[((ulong)c * H + ih) * W + iw], wo[(c * KH + kh) * KW + kw], acc);
            }
        }
    }
    const ulong at = ((ulong)n * g[G_O] + o) * P + p;
    out[at] = EPILOGUE(has_bias ? acc + bias[o] : acc, at, o);
}

/* Depthwise (one input channel per group): work-item (ow block, oh, n * O + o) computes 8
 * neighbouring outputs of one row as a float8, the taps kh, kw ascending, one fma each. Rows
 * inside the image with stride 1 or 2 load a vector; the edges gather lane by lane (padding
 * reads 0, which adds nothing). */
__kernel void clrun_conv2d_depthwise(__global const float *x, __global const float *w,
                                     __global const float *bias, __global float *out,
                                     __constant const int *g, const int has_bias EPILOGUE_PARAMS)
{
    const int OW = g[G_OW], OH = g[G_OH], H = g[G_H], W = g[G_W];
    const int ow0 = get_global_id(0) * 8, oh = get_global_id(1);
    const size_t plane = get_global_id(2);
    if (ow0 >= OW || oh >= OH)
        return;
    const int O = g[G_O], o = plane % O, c = o / (O / g[G_GROUPS]);
    const size_t n = plane / O;
    const int KH = g[G_KH], KW = g[G_KW], sw = g[G_SW];
    __global const float *xp = x + ((ulong)n * g[G_C] + c) * H * W;
    __global const float *wo = w + (ulong)o * KH * KW;
    float8 acc = 0.0f;
    for (int kh = 0; kh < KH; kh++) {
        const int ih = oh * g[G_SH] - g[G_PH] + kh * g[G_DH];
        if (ih < 0 || ih >= H)
            continue;
        __global const float *row = xp + (ulong)ih * W;
        for (int kw = 0; kw < KW; kw++) {
            const int iw0 = ow0 * sw - g[G_PW] + kw * g[G_DW];
            float8 v;
            if (sw == 1 && iw0 >= 0 && iw0 + 8 <= W) {
                v = vload8(0, row + iw0);
            } else if (sw == 2 && iw0 >= 0 && iw0 + 16 <= W) {
                v = vload16(0, row + iw0).even;
            } else {
                float lanes[8];
                for (int j = 0; j < 8; j++) {
                    const int iw = iw0 + j * sw;
                    lanes[j] = iw >= 0 && iw < W ? row[iw] : 0.0f;
                }
                v = vload8(0, lanes);
            }
            acc = fma(v, (float8)(wo[kh * KW + kw]), acc);
        }
    }
    const float add = has_bias ? bias[o] : 0.0f;
    float lanes[8];
    vstore8(has_bias ? acc + add : acc, 0, lanes);
    const ulong base = (plane * OH + oh) * OW + ow0;
    for (int j = 0; j < 8 && ow0 + j < OW; j++)
        out[base + j] = EPILOGUE(lanes[j], base + j, o);
}

/* conv_transpose2d: work-item (p, o, n) gathers every (c, kh, kw) whose input position lands on
 * output p: oh = ih * sh - ph + kh * dh. w is [C, O/groups, KH, KW]; G_C and G_O are the input
 * and output channels. */
__kernel void clrun_conv_transpose2d(__global const float *x, __global const float *w,
                                     __global const float *bias, __global float *out,
                                     __constant const int *g, const int has_bias)
{
    const int P = g[G_OH] * g[G_OW];
    const int p = get_global_id(0), o = get_global_id(1);
    const size_t n = get_global_id(2);
    if (p >= P)
        return;
    const int oh = p / g[G_OW], ow = p % g[G_OW];
    const int Cg = g[G_C] / g[G_GROUPS], Og = g[G_O] / g[G_GROUPS], group = o / Og, oo = o % Og;
    const int KH = g[G_KH], KW = g[G_KW], H = g[G_H], W = g[G_W];
    float acc = 0.0f;
    for (int ci = 0; ci < Cg; ci++) {
        const int c = group * Cg + ci;
        __global const float *xc = x + ((ulong)n * g[G_C] + c) * H * W;
        __global const float *wc = w + ((ulong)c * Og + oo) * KH * KW;
        for (int kh = 0; kh < KH; kh++) {
            const int th = oh + g[G_PH] - kh * g[G_DH];
            if (th < 0 || th % g[G_SH] != 0 || th / g[G_SH] >= H)
                continue;
            for (int kw = 0; kw < KW; kw++) {
                const int tw = ow + g[G_PW] - kw * g[G_DW];
                if (tw < 0 || tw % g[G_SW] != 0 || tw / g[G_SW] >= W)
                    continue;
                acc = fma(xc[(th / g[G_SH]) * W + tw / g[G_SW]], wc[kh * KW + kw], acc);
            }
        }
    }
    out[((ulong)n * g[G_O] + o) * P + p] = has_bias ? acc + bias[o] : acc;
}

/* Geometry of a pooling: {H, W, OH, OW, KH, KW, SH, SW, PH, PW, PHE, PWE, DH, DW,
 * count_include_pad}. The host's indices are CLRUN__POOL_GEOMETRY in lib/ops_internal.h;
 * tests/test_ops.c checks these against them. */
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

/* Work-item (p, plane): output position p of image plane (n * C + c). Padding is never read: a
 * max ignores it; an average divides by the taps inside the image, or with count_include_pad
 * by the taps inside the padded image (a window hanging past it, ceil_mode's last, counts
 * less). The host ensures every window holds at least one element of the image. */
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
    const int H = g[P_H], W = g[P_W], DH = g[P_DH], DW = g[P_DW];
    __global const float *xp = x + plane * H * W;
    float acc = is_max ? -INFINITY : 0.0f;
    int count = 0, padded = 0;
    for (int kh = 0; kh < g[P_KH]; kh++) {
        const int ih = h0 + kh * DH;
        const bool in_h = ih >= 0 && ih < H, padded_h = ih < H + g[P_PHE];
        for (int kw = 0; kw < g[P_KW]; kw++) {
            const int iw = w0 + kw * DW;
            if (padded_h && iw < W + g[P_PWE])
                padded++;
            if (!in_h || iw < 0 || iw >= W)
                continue;
            const float v = xp[ih * W + iw];
            acc = is_max ? fmax(acc, v) : acc + v;
            count++;
        }
    }
    y[plane * P + p] = is_max ? acc : acc / (float)(g[P_INCLUDE_PAD] ? padded : count);
}
