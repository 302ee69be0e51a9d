/* Direct convolution and pooling over NCHW images. Convolutions run as products where they can
 * (matmul_core.cl on CPUs, clrun_conv2d_gemm in matmul.cl elsewhere); this file has the direct
 * kernel (narrow convolutions on devices with local memory, small work-groups), the depthwise
 * kernel (vectorised along rows), conv_transpose2d and the pools. */
#pragma OPENCL FP_CONTRACT OFF
/* A hint to bring the line at p into cache, where the compiler targets a CPU (POCL on x86-64
 * or Arm); nothing elsewhere. A prefetch never faults, so p may lie past the end of a buffer. */
#if defined(__clang__) && (defined(__x86_64__) || defined(__aarch64__))
#define PREFETCH(p) __builtin_prefetch((p), 0, 3)
#else
#define PREFETCH(p) ((void)0)
#endif

/* The epilogue (lib/ops/ops.h): the host defines CLRUN_EPILOGUE and EPILOGUE_PARAMS before
 * this file when a node has one. */
#ifdef CLRUN_EPILOGUE
#define EPILOGUE(v, i, c) CLRUN_EPILOGUE(v, i, c)
#endif
/* A store through an epilogue set (lib/ops/ops.h) runs once per case, the case a constant in
 * it, so that it vectorizes as with one epilogue; elsewhere the case is chosen per element. */
#ifdef CLRUN_EPILOGUE_SWITCH
#define EPILOGUE_SITE(...) CLRUN_EPILOGUE_SWITCH(__VA_ARGS__)
#else
#define EPILOGUE_SITE(...) __VA_ARGS__
#endif
#ifndef CLRUN_EPILOGUE
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

/* Depthwise (one input channel per group): work-item (row block, n * O + o) computes rows
 * [b * R, b * R + R) of one output plane, R = ceil(OH / global size 0), every column. Columns
 * whose taps all lie inside the row run DWN at a time as a vector (the last block may overlap
 * the one before: it computes the same bits again); the columns at the edges run one at a time
 * and skip the padding. Every output sums its taps kh, kw ascending, one fma each, skipping rows
 * and columns outside the image, so every path gives the same bits. 3x3 kernels hold their
 * weights in registers. */
#if VW >= 16
#define DWN 16
#else
#define DWN 8
#endif
#define DWVEC CAT(float, DWN)
#define DWLOAD(p) CAT(vload, DWN)(0, (p))
#define DWSTORE(v, p) CAT(vstore, DWN)((v), 0, (p))
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)

/* DWN floats of a row from p at stride sw (1, 2 or more), reading nothing past the last. */
DWVEC dw_load(__global const float *p, const int sw)
{
    if (sw == 1)
        return DWLOAD(p);
    if (sw == 2)
        return (DWVEC)(DWLOAD(p).even, DWLOAD(p + DWN - 1).odd);
    float lanes[DWN];
    for (int j = 0; j < DWN; j++)
        lanes[j] = p[j * sw];
    return DWLOAD(lanes);
}

/* One output at column ow of a row: the taps inside the image, kh, kw ascending. */
float dw_one(__global const float *xp, __global const float *wo, const int ih0, const int ow,
             __constant const int *g)
{
    const int KH = g[G_KH], KW = g[G_KW], H = g[G_H], W = g[G_W];
    const int iw0 = ow * g[G_SW] - g[G_PW];
    float acc = 0.0f;
    for (int kh = 0; kh < KH; kh++) {
        const int ih = ih0 + kh * g[G_DH];
        if (ih < 0 || ih >= H)
            continue;
        for (int kw = 0; kw < KW; kw++) {
            const int iw = iw0 + kw * g[G_DW];
            if (iw >= 0 && iw < W)
                acc = fma(xp[(ulong)ih * W + iw], wo[kh * KW + kw], acc);
        }
    }
    return acc;
}

/* Stores vector v of outputs from index at, all of channel o (a local of every kernel that
 * stores), through the epilogue (a macro: the epilogue's extra inputs are the kernel's
 * parameters): on the vector where the epilogue may run on one (CLRUN_EPILOGUE_V8/_V16,
 * lib/fuse/codegen.h: lane by lane the scalar epilogue's bits; a residual read as a vector), which
 * costs the store next to nothing (MobileNetV3-small's hardswishes and relus after depthwise and
 * pointwise layers fused this way), else a lane at a time. */
#if defined(CLRUN_EPILOGUE) && defined(CLRUN_EPILOGUE_V8)
#define DW_STORE(v, at) DWSTORE(CAT(CLRUN_EPILOGUE_V, DWN)((v), (at), o), out + (at))
#elif defined(CLRUN_EPILOGUE)
#define DW_STORE(v, at)                                                                            \
    do {                                                                                           \
        float lanes_[DWN];                                                                         \
        DWSTORE((v), lanes_);                                                                      \
        for (int j_ = 0; j_ < DWN; j_++)                                                           \
            out[(at) + j_] = EPILOGUE(lanes_[j_], (at) + j_, o);                                   \
    } while (0)
#else
#define DW_STORE(v, at) DWSTORE((v), out + (at))
#endif

/* Stores the first min(DWN, count) lanes of v from index at: a whole vector where they are all
 * and there is no epilogue, else a lane at a time. */
#define DW_STORE_SOME(v, at, count)                                                                \
    do {                                                                                           \
        if (DW_WHOLE_STORES && (count) >= DWN) {                                                   \
            DW_STORE((v), (at));                                                                   \
            break;                                                                                 \
        }                                                                                          \
        float s_[DWN];                                                                             \
        DWSTORE((v), s_);                                                                          \
        for (int j_ = 0; j_ < min(DWN, (int)(count)); j_++)                                        \
            out[(at) + j_] = EPILOGUE(s_[j_], (at) + j_, o);                                       \
    } while (0)
#if defined(CLRUN_EPILOGUE) && !defined(CLRUN_EPILOGUE_V8)
#define DW_WHOLE_STORES 0
#else
#define DW_WHOLE_STORES 1
#endif

/* With an epilogue on vectors that computes an exp or a tanh (CLRUN_EPILOGUE_MATH: SiLU), the
 * kernels that store many vectors at the end of a work-item (pointwise: 16, a stem's rows: 16)
 * spill them and store them in a loop, so that the epilogue is compiled once per kernel, not
 * once per vector: inlined 16 times it made EfficientNet-B0's first run some 0.2 s longer, and a
 * call instead (spilling the accumulators at each) cost it its fusion's gain. */
#if defined(CLRUN_EPILOGUE) && defined(CLRUN_EPILOGUE_V8) && defined(CLRUN_EPILOGUE_MATH)
#define DW_LOOP_STORES 1
#else
#define DW_LOOP_STORES 0
#endif

/* The 3x3 paths of clrun_conv2d_depthwise_3x3 (macros over its locals): one output at column ow,
 * each tap inside the image or skipped; and the vectors over columns [lo, hi) at stride SW. */
#define DW3_TAP(r, ok, iw, wt, acc)                                                                \
    acc = (ok) && (iw) >= 0 && (iw) < W ? fma((r)[clamp((iw), 0, W - 1)], (wt), (acc)) : (acc)
#define DW3_ONE(ow)                                                                                \
    do {                                                                                           \
        const int i_ = (ow) * sw - pw;                                                             \
        float a_ = 0.0f;                                                                           \
        DW3_TAP(r0, ok0, i_, w0, a_);                                                              \
        DW3_TAP(r0, ok0, i_ + dw, w1, a_);                                                         \
        DW3_TAP(r0, ok0, i_ + 2 * dw, w2, a_);                                                     \
        DW3_TAP(r1, ok1, i_, w3, a_);                                                              \
        DW3_TAP(r1, ok1, i_ + dw, w4, a_);                                                         \
        DW3_TAP(r1, ok1, i_ + 2 * dw, w5, a_);                                                     \
        DW3_TAP(r2, ok2, i_, w6, a_);                                                              \
        DW3_TAP(r2, ok2, i_ + dw, w7, a_);                                                         \
        DW3_TAP(r2, ok2, i_ + 2 * dw, w8, a_);                                                     \
        out[at + (ow)] = EPILOGUE(has_bias ? a_ + add : a_, at + (ow), o);                         \
    } while (0)
#define DW3_ROW(r, ok, wa, wb, wc, SW)                                                             \
    if (ok) {                                                                                      \
        acc = fma(dw_load((r) + i, SW), (DWVEC)(wa), acc);                                         \
        acc = fma(dw_load((r) + i + dw, SW), (DWVEC)(wb), acc);                                    \
        acc = fma(dw_load((r) + i + 2 * dw, SW), (DWVEC)(wc), acc);                                \
    }
#define DW3_VECTORS(SW)                                                                            \
    for (int ow = lo; vectors; ow += DWN) {                                                        \
        ow = min(ow, hi - DWN);                                                                    \
        const int i = ow * (SW) - pw;                                                              \
        DWVEC acc = 0.0f;                                                                          \
        DW3_ROW(r0, ok0, w0, w1, w2, SW)                                                           \
        DW3_ROW(r1, ok1, w3, w4, w5, SW)                                                           \
        DW3_ROW(r2, ok2, w6, w7, w8, SW)                                                           \
        DW_STORE(has_bias ? acc + add : acc, at + ow);                                             \
        if (ow + DWN >= hi)                                                                        \
            break;                                                                                 \
    }

/* Narrow planes (OW <= 2 DWN): an output row is one or two vectors, lane j of vector v column
 * v DWN + j. The input rows are copied into private memory, column iw at iw + pw with zeros
 * around it (span floats a row, at most DW_ROW: (NV DWN - 1) sw + (KW - 1) dw + 1 for NV
 * vectors, what a row's vectors read), the whole plane once where it fits in DW_PLANE floats
 * and the work-item has every row, else each row as a tap needs it; each tap kw loads its DWN
 * inputs from there at once. A lane whose input column lies outside the row keeps its sum (a
 * select, not a product of 0), so every output sums the taps inside the image kh, kw
 * ascending, one fma each: the bits of dw_one. */
#define DW_ROW 128
#define DW_PLANE 1024
#define DWINT CAT(int, DWN)
__constant int dw_lane_ids[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

/* Row `row` of W floats into p as DW_ROW describes, span floats in all. */
void dw_copy_row(float *p, __global const float *row, const int W, const int pw, const int span)
{
    const int n = clamp(span - pw, 0, W); /* a padding wider than the span copies nothing */
    for (int i = 0; i < min(pw, span); i++)
        p[i] = 0.0f;
    for (int i = 0; i < n; i++)
        p[pw + i] = row[i];
    for (int i = pw + n; i < span; i++)
        p[i] = 0.0f;
}

DWVEC dw_load_private(const float *p, const int sw)
{
    if (sw == 1)
        return DWLOAD(p);
    if (sw == 2)
        return (DWVEC)(DWLOAD(p).even, DWLOAD(p + DWN - 1).odd);
    float lanes[DWN];
    for (int j = 0; j < DWN; j++)
        lanes[j] = p[j * sw];
    return DWLOAD(lanes);
}

#define DW_ROWS 4
#define DW_ROWS_OF(X) X(0) X(1) X(2) X(3)
#define DWR_DECL(r) DWVEC CAT(a, r) = 0.0f;
#define DWR_ROW(r)                                                                                 \
    const int CAT(ih, r) = (oh + (r)) * sh - ph + kh * dh;                                         \
    const DWINT CAT(ok, r) = (DWINT)(oh + (r) < oh1 && CAT(ih, r) >= 0 && CAT(ih, r) < H ? -1 : 0); \
    const float *CAT(p, r) = buf + clamp(CAT(ih, r), 0, H - 1) * span + v0 * sw;
#define DWR_TAP(r)                                                                                 \
    CAT(a, r) = select(CAT(a, r), fma(dw_load_private(CAT(p, r) + kw * dw, sw), t, CAT(a, r)),     \
                       in & CAT(ok, r));
#define DWR_STORE(r)                                                                               \
    if (oh + (r) < oh1) {                                                                          \
        const ulong at_ = (plane * OH + oh + (r)) * OW + v0;                                       \
        DW_STORE_SOME(has_bias ? CAT(a, r) + add : CAT(a, r), at_, OW - v0);                        \
    }

/* The depthwise kernels along the rows: one per path, the host choosing it from the shape
 * (lib/ops/ops_conv.c's depthwise_kernel) as one kernel once chose among its paths. POCL
 * compiles a kernel whole at its first launch, every path of it: the one kernel was a compile
 * of 1.2 s on an empty cache (MobileNetV3-small, which ran one of its paths). Each declares
 * what its path reads of the work-item and the geometry (DW_ITEM), and the column and span
 * bounds where it needs them (DW_COLUMNS, DW_SPAN). */
#define DW_PARAMS                                                                                  \
    __global const float *x, __global const float *w, __global const float *bias,                  \
        __global float *out, __constant const int *g, const int has_bias EPILOGUE_PARAMS
#define DW_ITEM                                                                                    \
    const int OW = g[G_OW], OH = g[G_OH], H = g[G_H], W = g[G_W];                                  \
    const int R = (OH + (int)get_global_size(0) - 1) / (int)get_global_size(0);                    \
    const int oh0 = (int)get_global_id(0) * R, oh1 = min(OH, oh0 + R);                             \
    const size_t plane = get_global_id(1);                                                         \
    const int O = g[G_O], o = plane % O, c = o / (O / g[G_GROUPS]);                               \
    const size_t n = plane / O;                                                                    \
    const int KH = g[G_KH], KW = g[G_KW], sh = g[G_SH], sw = g[G_SW], ph = g[G_PH], pw = g[G_PW]; \
    const int dh = g[G_DH], dw = g[G_DW];                                                          \
    __global const float *xp = x + ((ulong)n * g[G_C] + c) * H * W;                                \
    __global const float *wo = w + (ulong)o * KH * KW;                                             \
    const float add = has_bias ? bias[o] : 0.0f;
/* Columns [lo, hi) have every tap inside the row; vectors cover them where DWN fit. */
#define DW_COLUMNS                                                                                 \
    const int lo = min(OW, (pw + sw - 1) / sw);                                                    \
    const int last = W - 1 + pw - (KW - 1) * dw;                                                   \
    const int hi = max(lo, last < 0 ? 0 : min(OW, last / sw + 1));                                 \
    const bool vectors = hi - lo >= DWN;
/* A row's vectors (at most 2 on the paths through private memory) and the floats they read. */
#define DW_SPAN                                                                                    \
    const int NV = (OW + DWN - 1) / DWN;                                                           \
    const int span = (NV * DWN - 1) * sw + (KW - 1) * dw + 1;

/* The whole plane in private memory (it fits DW_PLANE floats; one work-item has every row):
 * DW_ROWS output rows at once, each its own sums (a row's chain of fmas, each waiting on the
 * one before, left the core idle: EfficientNet's 28 x 28, 5 x 5 ran at a twentieth of its
 * rate); a row outside the image, or past the block's last, takes row 0's inputs and keeps its
 * sums (a select, as the lanes). */
__kernel void clrun_conv2d_depthwise_plane(DW_PARAMS)
{
    DW_ITEM
    DW_SPAN
    const DWINT lane = CAT(vload, DWN)(0, dw_lane_ids);
    float buf[DW_PLANE];
    for (int ih = 0; ih < H; ih++)
        dw_copy_row(buf + ih * span, xp + (ulong)ih * W, W, pw, span);
    for (int oh = oh0; oh < oh1; oh += DW_ROWS) {
        for (int v0 = 0; v0 < OW; v0 += DWN) {
            DW_ROWS_OF(DWR_DECL)
            for (int kh = 0; kh < KH; kh++) {
                DW_ROWS_OF(DWR_ROW)
                for (int kw = 0; kw < KW; kw++) {
                    const DWINT iw = (v0 + lane) * sw - pw + kw * dw;
                    const DWINT in = (iw >= 0) & (iw < W);
                    const DWVEC t = (DWVEC)(wo[kh * KW + kw]);
                    DW_ROWS_OF(DWR_TAP)
                }
            }
            DW_ROWS_OF(DWR_STORE)
        }
    }
}

/* A narrow plane that does not fit private memory whole (or is split among work-items), with
 * no vector of columns inside the row: each input row copied as a tap needs it. */
__kernel void clrun_conv2d_depthwise_buffered(DW_PARAMS)
{
    DW_ITEM
    DW_SPAN
    const DWINT lane = CAT(vload, DWN)(0, dw_lane_ids);
    float buf[DW_ROW];
    for (int oh = oh0; oh < oh1; oh++) {
        const int ih0 = oh * sh - ph;
        const ulong at = (plane * OH + oh) * OW;
        for (int v0 = 0; v0 < OW; v0 += DWN) {
            DWVEC acc = 0.0f;
            for (int kh = 0; kh < KH; kh++) {
                const int ih = ih0 + kh * dh;
                if (ih < 0 || ih >= H)
                    continue;
                const float *r = buf + v0 * sw;
                dw_copy_row(buf, xp + (ulong)ih * W, W, pw, span);
                for (int kw = 0; kw < KW; kw++) {
                    const DWINT iw = (v0 + lane) * sw - pw + kw * dw;
                    const DWVEC v = dw_load_private(r + kw * dw, sw);
                    acc = select(acc, fma(v, (DWVEC)(wo[kh * KW + kw]), acc),
                                 (iw >= 0) & (iw < W));
                }
            }
            float lanes[DWN];
            DWSTORE(has_bias ? acc + add : acc, lanes);
            for (int j = 0; j < min(DWN, OW - v0); j++)
                out[at + v0 + j] = EPILOGUE(lanes[j], at + v0 + j, o);
        }
    }
}

/* Any other 3 x 3 plane, read from x: the edge columns one at a time, the inside ones as
 * vectors, the 9 weights in registers; a kernel of its own for stride 1 and for stride 2 (the
 * vectors' loads then fixed), and one for the others (DW3_ROWS(SW): SW the vectors' stride). */
/* The 9 weights of a 3 x 3 plane, in registers */
#define DW3_WEIGHTS                                                                                \
    const float w0 = wo[0], w1 = wo[1], w2 = wo[2];                                                \
    const float w3 = wo[3], w4 = wo[4], w5 = wo[5];                                                \
    const float w6 = wo[6], w7 = wo[7], w8 = wo[8];
/* Output row oh's first index `at` and its three input rows r0..r2, each with whether it lies
 * inside the image (ok0..ok2); rows outside point at row 0: never summed, but read in range. */
#define DW3_ROW_POINTERS                                                                           \
    const int ih0 = oh * sh - ph;                                                                  \
    const ulong at = (plane * OH + oh) * OW;                                                       \
    const bool ok0 = ih0 >= 0 && ih0 < H, ok1 = ih0 + dh >= 0 && ih0 + dh < H;                     \
    const bool ok2 = ih0 + 2 * dh >= 0 && ih0 + 2 * dh < H;                                        \
    __global const float *r0 = ok0 ? xp + (ulong)ih0 * W : xp;                                     \
    __global const float *r1 = ok1 ? xp + (ulong)(ih0 + dh) * W : xp;                             \
    __global const float *r2 = ok2 ? xp + (ulong)(ih0 + 2 * dh) * W : xp;
#define DW3_ROWS(SW)                                                                               \
    DW_ITEM                                                                                        \
    DW_COLUMNS                                                                                     \
    DW3_WEIGHTS                                                                                    \
    for (int oh = oh0; oh < oh1; oh++) {                                                           \
        DW3_ROW_POINTERS                                                                           \
        const int v_lo = vectors ? lo : OW, v_hi = vectors ? hi : OW;                              \
        for (int ow = 0; ow < v_lo; ow++)                                                          \
            DW3_ONE(ow);                                                                           \
        DW3_VECTORS(SW)                                                                            \
        for (int ow = v_hi; ow < OW; ow++)                                                         \
            DW3_ONE(ow);                                                                           \
    }
/* Stride 1 with one column of padding each side and OW == W >= 2 DWN (a 'same' 3 x 3 over a
 * plane of 32 columns or more) runs the edge columns as vectors too: the first vector's left
 * taps are its middle taps' vector moved up a lane, the last one's right taps moved down a lane
 * (shuffles: no load outside the row), and the one lane whose tap lies outside the row keeps
 * its sum (a select); DW3_VECTORS' between them. The taps
 * inside, kh, kw ascending, one fma each: the bits of DW3_ONE. Without the columns one at a time
 * (9 chained taps each, selects and clamps) EfficientNet-B0's 144 channels at 56 x 56 ran in
 * 0.17-0.18 ms against 0.20-0.25, its 32 at 112 x 112 0.12-0.13 against 0.12-0.17 (wall minima
 * alone, 300 runs, 4 alternating rounds). */
#if DWN == 16
#define DW3E_UP(v) shuffle((v), (uint16)(0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14))
#define DW3E_DOWN(v) shuffle((v), (uint16)(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 15))
#else
#define DW3E_UP(v) shuffle((v), (uint8)(0, 0, 1, 2, 3, 4, 5, 6))
#define DW3E_DOWN(v) shuffle((v), (uint8)(1, 2, 3, 4, 5, 6, 7, 7))
#endif
/* The first vector's taps of row r: its left one a select on lane 0 */
#define DW3E_FIRST(r, ok, wa, wb, wc)                                                              \
    if (ok) {                                                                                      \
        const DWVEC m_ = DWLOAD(r), h_ = DWLOAD((r) + 1);                                          \
        acc = select(fma(DW3E_UP(m_), (DWVEC)(wa), acc), acc, first);                              \
        acc = fma(m_, (DWVEC)(wb), acc);                                                           \
        acc = fma(h_, (DWVEC)(wc), acc);                                                           \
    }
/* The last vector's, from column OW - DWN: its right one a select on the last lane */
#define DW3E_LAST(r, ok, wa, wb, wc)                                                               \
    if (ok) {                                                                                      \
        const DWVEC l_ = DWLOAD((r) + OW - DWN - 1), m_ = DWLOAD((r) + OW - DWN);                  \
        acc = fma(l_, (DWVEC)(wa), acc);                                                           \
        acc = fma(m_, (DWVEC)(wb), acc);                                                           \
        acc = select(fma(DW3E_DOWN(m_), (DWVEC)(wc), acc), acc, last);                             \
    }
__kernel void clrun_conv2d_depthwise_3x3_s1(DW_PARAMS)
{
    if (g[G_PW] != 1 || g[G_DW] != 1 || g[G_OW] != g[G_W] || g[G_OW] < 2 * DWN) {
        DW3_ROWS(1)
        return;
    }
    DW_ITEM
    DW3_WEIGHTS
    const DWINT lane = CAT(vload, DWN)(0, dw_lane_ids);
    const DWINT first = lane == 0, last = lane == DWN - 1;
    /* DW3_VECTORS over the columns between the edge vectors: [DWN, OW - DWN), or where that is
     * narrower than a vector the one vector ending at OW - DWN (it repeats columns of the first:
     * the same bits again); none where the edge vectors meet */
    const int hi = OW - DWN, lo = min(DWN, hi - DWN);
    const bool vectors = OW > 2 * DWN;
    for (int oh = oh0; oh < oh1; oh++) {
        DW3_ROW_POINTERS
        {
            DWVEC acc = 0.0f;
            DW3E_FIRST(r0, ok0, w0, w1, w2)
            DW3E_FIRST(r1, ok1, w3, w4, w5)
            DW3E_FIRST(r2, ok2, w6, w7, w8)
            DW_STORE(has_bias ? acc + add : acc, at);
        }
        DW3_VECTORS(1)
        {
            DWVEC acc = 0.0f;
            DW3E_LAST(r0, ok0, w0, w1, w2)
            DW3E_LAST(r1, ok1, w3, w4, w5)
            DW3E_LAST(r2, ok2, w6, w7, w8)
            DW_STORE(has_bias ? acc + add : acc, at + OW - DWN);
        }
    }
}
__kernel void clrun_conv2d_depthwise_3x3_s2(DW_PARAMS)
{
    DW3_ROWS(2)
}
__kernel void clrun_conv2d_depthwise_3x3(DW_PARAMS)
{
    DW3_ROWS(sw)
}

/* Any other plane, read from x: the edge columns one at a time (dw_one), the inside ones as
 * vectors (a tall plane whose rows hold such vectors reads them here: copying each row again
 * for each tap of each output row cost more, EfficientNet's 56 x 56, 5 x 5 at stride 2: 1.8x). */
__kernel void clrun_conv2d_depthwise(DW_PARAMS)
{
    DW_ITEM
    DW_COLUMNS
    for (int oh = oh0; oh < oh1; oh++) {
        const int ih0 = oh * sh - ph;
        const ulong at = (plane * OH + oh) * OW;
        const int v_lo = vectors ? lo : OW, v_hi = vectors ? hi : OW;
        for (int ow = 0; ow < v_lo; ow++) {
            const float v = dw_one(xp, wo, ih0, ow, g);
            out[at + ow] = EPILOGUE(has_bias ? v + add : v, at + ow, o);
        }
        if (vectors) {
            for (int ow = lo;; ow += DWN) {
                ow = min(ow, hi - DWN);
                DWVEC acc = 0.0f;
                for (int kh = 0; kh < KH; kh++) {
                    const int ih = ih0 + kh * dh;
                    if (ih < 0 || ih >= H)
                        continue;
                    __global const float *row = xp + (ulong)ih * W + ow * sw - pw;
                    for (int kw = 0; kw < KW; kw++)
                        acc = fma(dw_load(row + kw * dw, sw), (DWVEC)(wo[kh * KW + kw]), acc);
                }
                DW_STORE(has_bias ? acc + add : acc, at + ow);
                if (ow + DWN >= hi)
                    break;
            }
        }
        for (int ow = v_hi; ow < OW; ow++) {
            const float v = dw_one(xp, wo, ih0, ow, g);
            out[at + ow] = EPILOGUE(has_bias ? v + add : v, at + ow, o);
        }
    }
}

/* Depthwise on CPUs, the channels along the vectors: work-item (channel block, image, band)
 * computes DWN output channels o0 .. o0 + DWN - 1 (lanes past O repeat channel O - 1 and are
 * not stored), output rows [oh0, oh1) of their planes (a band: the whole plane where it fits).
 * The input rows they read are copied once into private memory transposed, position by
 * position a vector of DWN channels (at most DWC_PLANE positions, and as many outputs), and
 * their weights a vector per tap; an output position is then one vector fma per tap inside the
 * image, the taps kh, kw ascending, those outside skipped: the bits of dw_one and of
 * clrun_conv2d_depthwise. A plane of 7 x 7 or 14 x 14 filled 7 or 14 of that kernel's 16
 * lanes, with a select per tap. The taps inside are a range of kh and one of kw (dwc_first,
 * dwc_end), so no tap is tested; the columns run DWC_COLS at a time, where their taps all lie
 * inside the row each tap's weights loaded once for them (a branch per tap and a weight load
 * per fma held this kernel at a tenth of the cores' rate). The outputs are gathered in private
 * memory too and leave transposed, a vector along a plane at a time. */
#define DWC_PLANE 1024
#define DWC_TAPS 49
#define DWC_COLS 4

/* The first tap k of K at i0 + k d that lies inside [0, n), and one past the last. */
int dwc_first(const int i0, const int d)
{
    return i0 >= 0 ? 0 : (-i0 + d - 1) / d;
}
int dwc_end(const int i0, const int d, const int n, const int K)
{
    return i0 > n - 1 ? 0 : min(K, (n - 1 - i0) / d + 1);
}

/* The DWN x DWN block r[0 .. DWN - 1] transposed in place (lane j of r[i] to lane i of r[j]):
 * log2 DWN rounds, each interleaving row i with row i + DWN / 2. The plane copies in and out
 * of this kernel are transposes, which an element at a time were scatters (each a microcoded
 * loop on AMD's cores), half of its time. */
#if DWN == 16
#define DWC_ROUNDS 4
#define DWC_ZIP_LO(a, b)                                                                           \
    (float16)((a).s0, (b).s0, (a).s1, (b).s1, (a).s2, (b).s2, (a).s3, (b).s3, (a).s4, (b).s4,      \
              (a).s5, (b).s5, (a).s6, (b).s6, (a).s7, (b).s7)
#define DWC_ZIP_HI(a, b)                                                                           \
    (float16)((a).s8, (b).s8, (a).s9, (b).s9, (a).sa, (b).sa, (a).sb, (b).sb, (a).sc, (b).sc,      \
              (a).sd, (b).sd, (a).se, (b).se, (a).sf, (b).sf)
#else
#define DWC_ROUNDS 3
#define DWC_ZIP_LO(a, b) (float8)((a).s0, (b).s0, (a).s1, (b).s1, (a).s2, (b).s2, (a).s3, (b).s3)
#define DWC_ZIP_HI(a, b) (float8)((a).s4, (b).s4, (a).s5, (b).s5, (a).s6, (b).s6, (a).s7, (b).s7)
#endif
void dwc_transpose(DWVEC *r)
{
#pragma unroll
    for (int round = 0; round < DWC_ROUNDS; round++) {
        DWVEC t[DWN];
#pragma unroll
        for (int i = 0; i < DWN / 2; i++) {
            t[2 * i] = DWC_ZIP_LO(r[i], r[i + DWN / 2]);
            t[2 * i + 1] = DWC_ZIP_HI(r[i], r[i + DWN / 2]);
        }
#pragma unroll
        for (int i = 0; i < DWN; i++)
            r[i] = t[i];
    }
}

/* Elements i .. i + count - 1 (count <= DWN) of the rows at src + at[j], lane j, into
 * dst[0 .. count - 1]: a whole block read as vectors along the rows and transposed. */
void dwc_block_in(DWVEC *dst, __global const float *src, const ulong *at, const int i, const int count)
{
    if (count < DWN) { /* a block's last few: an element at a time */
        for (int t = 0; t < count; t++) {
            float l[DWN];
            for (int j = 0; j < DWN; j++)
                l[j] = src[at[j] + i + t];
            dst[t] = DWLOAD(l);
        }
        return;
    }
    DWVEC r[DWN];
#pragma unroll
    for (int j = 0; j < DWN; j++)
        r[j] = DWLOAD(src + at[j] + i);
    dwc_transpose(r);
#pragma unroll
    for (int t = 0; t < DWN; t++)
        dst[t] = r[t];
}

#define DWC_EACH(X) X(0) X(1) X(2) X(3)
/* Column c of an edge group: the rest's column e + c, its input column iw and its taps inside
 * [kwa, kwb); past the rest, none (and nothing stored). */
#define DWC_EDGE(c)                                                                                \
    const int CAT(j, c) = e + (c);                                                                 \
    const int CAT(col, c) = CAT(j, c) < left ? CAT(j, c) : CAT(j, c) + inner;                      \
    const int CAT(iw, c) = CAT(col, c) * sw - pw;                                                  \
    const int CAT(kwa, c) = dwc_first(CAT(iw, c), dw);                                             \
    const int CAT(kwb, c) = CAT(j, c) < rest ? dwc_end(CAT(iw, c), dw, W, KW) : 0;                 \
    DWVEC CAT(a, c) = 0.0f;
#define DWC_COLUMN(c)                                                                              \
    for (int kw = CAT(kwa, c); kw < CAT(kwb, c); kw++)                                             \
        CAT(a, c) = fma(xb[r + CAT(iw, c) + kw * dw], wk[kw], CAT(a, c));
#define DWC_PUT(c)                                                                                 \
    if (CAT(j, c) < rest)                                                                          \
        ob[(oh - oh0) * OW + CAT(col, c)] = has_bias ? CAT(a, c) + add : CAT(a, c);

__kernel void clrun_conv2d_depthwise_c(__global const float *x, __global const float *w,
                                       __global const float *bias, __global float *out,
                                       __constant const int *g, const int has_bias EPILOGUE_PARAMS)
{
    const int OW = g[G_OW], OH = g[G_OH], H = g[G_H], W = g[G_W], O = g[G_O], C = g[G_C];
    const int KH = g[G_KH], KW = g[G_KW], sh = g[G_SH], sw = g[G_SW], ph = g[G_PH], pw = g[G_PW];
    const int dh = g[G_DH], dw = g[G_DW], per = O / g[G_GROUPS];
    const int o0 = (int)get_global_id(0) * DWN, stored = min(DWN, O - o0);
    const size_t n = get_global_id(1);
    /* output rows [oh0, oh1): a band of R, from input rows [ih_lo, ih_hi) */
    const int R = (OH + (int)get_global_size(2) - 1) / (int)get_global_size(2);
    const int oh0 = (int)get_global_id(2) * R, oh1 = min(OH, oh0 + R);
    if (oh0 >= oh1)
        return;
    const int ih_lo = clamp(oh0 * sh - ph, 0, H);
    const int ih_hi = clamp((oh1 - 1) * sh - ph + (KH - 1) * dh + 1, ih_lo, H);
    const int P = OH * OW, HW = H * W, in = (ih_hi - ih_lo) * W, outs = (oh1 - oh0) * OW;
    DWVEC xb[DWC_PLANE], ob[DWC_PLANE], wv[DWC_TAPS];
    float lanes[DWN];
    /* the rows and the weights in, a block of DWN positions or taps at a time (the host
     * ensures that a band's input and output rows fit DWC_PLANE) */
    ulong xat[DWN], wat[DWN];
    for (int j = 0; j < DWN; j++) {
        const int o = min(o0 + j, O - 1);
        xat[j] = ((ulong)n * C + o / per) * HW + (ulong)ih_lo * W;
        wat[j] = (ulong)o * KH * KW;
        lanes[j] = has_bias ? bias[o] : 0.0f;
    }
    for (int i = 0; i < in; i += DWN)
        dwc_block_in(xb + i, x, xat, i, min(DWN, in - i));
    for (int k = 0; k < KH * KW; k += DWN)
        dwc_block_in(wv + k, w, wat, k, min(DWN, KH * KW - k));
    const DWVEC add = DWLOAD(lanes);
    /* columns [lo, hi) have every tap inside the row */
    const int lo = min(OW, (pw + sw - 1) / sw);
    const int last = W - 1 + pw - (KW - 1) * dw;
    const int hi = max(lo, last < 0 ? 0 : min(OW, last / sw + 1));
    /* where no block of DWC_COLS fits inside, every column is an edge column: the rest are
     * columns [0, left) and [left + inner, OW) */
    const int inner = hi - lo >= DWC_COLS ? hi - lo : 0, left = inner ? lo : OW, rest = OW - inner;
    for (int oh = oh0; oh < oh1; oh++) {
        const int ih0 = oh * sh - ph, kh0 = dwc_first(ih0, dh), kh1 = dwc_end(ih0, dh, H, KH);
        const int row0 = (ih0 - ih_lo) * W; /* input row ih0 in xb, for the kh inside */
        /* the columns with every tap inside, DWC_COLS at a time, the last block moved back to
         * end at hi (it computes the same bits again) */
        for (int b = lo; inner >= DWC_COLS && b < hi; b += DWC_COLS) {
            const int ow = min(b, hi - DWC_COLS);
            const int iw0 = ow * sw - pw, p = (oh - oh0) * OW + ow;
            DWVEC a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
            for (int kh = kh0; kh < kh1; kh++) {
                const DWVEC *r = xb + (row0 + kh * dh * W + iw0); /* an index >= 0 first */
                const DWVEC *wk = wv + kh * KW;
                for (int kw = 0; kw < KW; kw++) {
                    const DWVEC t = wk[kw];
                    const DWVEC *q = r + kw * dw;
                    a0 = fma(q[0], t, a0);
                    a1 = fma(q[sw], t, a1);
                    a2 = fma(q[2 * sw], t, a2);
                    a3 = fma(q[3 * sw], t, a3);
                }
            }
            ob[p] = has_bias ? a0 + add : a0;
            ob[p + 1] = has_bias ? a1 + add : a1;
            ob[p + 2] = has_bias ? a2 + add : a2;
            ob[p + 3] = has_bias ? a3 + add : a3;
        }
        /* the others (every column where no block fits inside), DWC_COLS at a time, each its
         * taps inside, the columns' sums interleaved by rows. A block took two edge columns
         * with two inside ones, and ran all four on this path: half the blocks of a 14 x 14
         * plane at 5 x 5. */
        for (int e = 0; e < rest; e += DWC_COLS) {
            DWC_EACH(DWC_EDGE)
            for (int kh = kh0; kh < kh1; kh++) {
                const int r = row0 + kh * dh * W; /* r + iw + kw dw >= 0 */
                const DWVEC *wk = wv + kh * KW;
                DWC_EACH(DWC_COLUMN)
            }
            DWC_EACH(DWC_PUT)
        }
    }
    /* the band out, DWN positions at a time where they fill a block, through the epilogue */
    const ulong p0 = (ulong)oh0 * OW;
    int p = 0;
    for (; p + DWN <= outs; p += DWN) {
        DWVEC r[DWN];
        for (int j = 0; j < DWN; j++)
            r[j] = ob[p + j];
        dwc_transpose(r);
        for (int j = 0; j < stored; j++) {
            const int o = o0 + j;
            DW_STORE(r[j], ((ulong)n * O + o) * P + p0 + p);
        }
    }
    for (int j = 0; j < stored; j++) {
        const int o = o0 + j;
        for (int k = p; k < outs; k++) {
            const ulong at = ((ulong)n * O + o) * P + p0 + k;
            out[at] = EPILOGUE(((float *)ob)[k * DWN + j], at, o);
        }
    }
}

/* Pointwise (1 x 1, stride 1, no padding, one group) on CPUs: out[n, o, p] = sum over c of
 * w[o, c] x[n, c, p], the product W X with the positions along the vectors, so that a block's
 * stores are whole vectors along a plane (the core's rows are positions and its columns
 * channels: each output a scalar store a plane from the next, which is most of its time when
 * C is small: 16 -> 96 channels at 112 x 112 ran 4-8x slower than this). Work-item (position
 * block, channel block, image): PW_MR channels by PW_NV DWN positions, PW_MR x PW_NV
 * accumulators; the last block of positions is moved back to end at P (the host ensures P >=
 * PW_NV DWN; the overlap computes the same bits again), channels past O read row O - 1 and are
 * not stored. Every output is acc = fma(w[o, C-1], x[C-1, p], ... fma(w[o, 0], x[0, p], 0)),
 * then + bias[o], then the epilogue: the core's chain for a 1 x 1 convolution, the same bits. */
#define PW_MR 8
#define PW_NV 2
#define PW_NR (PW_NV * DWN)
#define PW_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#define PW_DECL(r)                                                                                 \
    __global const float *CAT(wr, r) = w + (ulong)min(o0 + (r), O - 1) * C;                        \
    DWVEC CAT(a, r) = 0.0f, CAT(b, r) = 0.0f;
#define PW_STEP(r)                                                                                 \
    {                                                                                              \
        const DWVEC s_ = (DWVEC)(CAT(wr, r)[c]);                                                   \
        CAT(a, r) = fma(s_, v0, CAT(a, r));                                                        \
        CAT(b, r) = fma(s_, v1, CAT(b, r));                                                        \
    }
/* Row r's two vectors va and vb stored, its bias added; PW_STORE(r) from its accumulators. */
#define PW_PUT(r, va, vb)                                                                          \
    if (o0 + (r) < O) {                                                                            \
        const int o = o0 + (r);                                                                    \
        const ulong at = ((ulong)n * O + o) * P + p0;                                              \
        const float add = has_bias ? bias[o] : 0.0f;                                               \
        DW_STORE(has_bias ? (va) + add : (va), at);                                                \
        DW_STORE(has_bias ? (vb) + add : (vb), at + DWN);                                          \
    }
#define PW_STORE(r) PW_PUT(r, CAT(a, r), CAT(b, r))
#define PW_SPILL(r) sa[r] = CAT(a, r), sb[r] = CAT(b, r);
/* The input channel PW_AHEAD ahead is asked for as each is read: the block's positions are a
 * short run in each of C planes, which the CPU's prefetchers do not follow, and an input just
 * written by the kernel before sits in the other core's cache or further. SqueezeNet's 256 -> 32
 * layer at 27 x 27 took 140 us in the model against 52 alone; 84-89 with 8 ahead, 78 with 16
 * (per-kernel minima, 3 processes each); its eight such layers and the 512 -> 1000 classifier
 * 0.8x their time. */
#define PW_AHEAD 16
#define PW_PREFETCH(p) PREFETCH(p), PREFETCH((p) + DWN), PREFETCH((p) + PW_NR - 1)

__kernel void clrun_conv2d_pointwise(__global const float *x, __global const float *w,
                                     __global const float *bias, __global float *out,
                                     __constant const int *g, const int has_bias EPILOGUE_PARAMS)
{
    const int C = g[G_C], O = g[G_O];
    const uint P = (uint)(g[G_OH] * g[G_OW]);
    const uint p0 = min((uint)get_global_id(0) * PW_NR, P - PW_NR);
    const size_t n = get_global_id(2);
    /* blocks of PW_MR channels, get_global_size(1) apart (the host gives an item several
     * where C is small: 16 -> 64 channels is too little work for one of POCL's work-groups) */
    for (int o0 = (int)get_global_id(1) * PW_MR; o0 < O; o0 += (int)get_global_size(1) * PW_MR) {
        __global const float *xp = x + (ulong)n * C * P + p0;
        PW_ROWS(PW_DECL)
        for (int c = 0; c < C; c++, xp += P) {
            PW_PREFETCH(xp + PW_AHEAD * P);
            const DWVEC v0 = DWLOAD(xp), v1 = DWLOAD(xp + DWN);
            PW_ROWS(PW_STEP)
        }
#if DW_LOOP_STORES
        DWVEC sa[PW_MR], sb[PW_MR];
        PW_ROWS(PW_SPILL)
#pragma unroll 1
        for (int r = 0; r < PW_MR; r++)
            PW_PUT(r, sa[r], sb[r])
#else
        PW_ROWS(PW_STORE)
#endif
    }
}

/* Pointwise over 14 x 14 planes on CPUs: clrun_conv2d_pointwise's product with the positions
 * along vectors of 8 (AMD's cores run a vector of 16 as two of 8, so a lane costs the same): a
 * work-item PS_NV vectors of positions by PS_MR channels, vector j of a block from min(p0 + 8 j,
 * P - 8), so that 196 positions are 5 blocks of 5 vectors, 200 lanes, where blocks of 2 vectors
 * of 16 took 224; the vectors past P repeat the last (the same bits again; the host ensures P
 * >= 8). Blocks of PS_MR channels get_global_size(1) apart; each output the same fma chain over
 * c ascending, + bias, then the epilogue: the same bits as the pointwise kernel and the core. */
#define PS_MR 4
#define PS_NV 5
#define PS_ROWS(X) X(0) X(1) X(2) X(3)
#define PS_COLS(X, r) X(r, 0) X(r, 1) X(r, 2) X(r, 3) X(r, 4)
#define PS_VECS(X) X(0) X(1) X(2) X(3) X(4)
#define PS_NR (PS_NV * 8)
#define PS_AT(j) const uint CAT(q, j) = min(p0 + 8 * (j), P - 8);
#define PS_ZERO(r, j) float8 CAT(CAT(a, r), j) = 0.0f;
#define PS_DECL(r)                                                                                 \
    __global const float *CAT(wr, r) = w + (ulong)min(o0 + (r), O - 1) * C;                        \
    PS_COLS(PS_ZERO, r)
#define PS_LOAD(j) const float8 CAT(v, j) = vload8(0, xp + CAT(q, j));
#define PS_FMA(r, j) CAT(CAT(a, r), j) = fma(s_, CAT(v, j), CAT(CAT(a, r), j));
#define PS_STEP(r)                                                                                 \
    {                                                                                              \
        const float8 s_ = (float8)(CAT(wr, r)[c]);                                                 \
        PS_COLS(PS_FMA, r)                                                                         \
    }
/* Through an epilogue the lanes are computed into private memory and stored as one vector:
 * ShuffleNetV2's 14 x 14 layers with their relu 40-43 us a lane at a time, 30-34 so, against
 * 30-37 and a relu kernel of 1.7 us apart (per-kernel minima of 7 runs; the pointwise kernel of
 * large planes, DW_STORE, measured the other way: docs/ops.md). */
#if defined(CLRUN_EPILOGUE) && defined(CLRUN_EPILOGUE_V8)
#define PS_PUT(v, at)                                                                              \
    do {                                                                                           \
        EPILOGUE_SITE(vstore8(CLRUN_EPILOGUE_V8((v), (at), o), 0, out + (at));)                    \
    } while (0)
#elif defined(CLRUN_EPILOGUE)
#define PS_PUT(v, at)                                                                              \
    do {                                                                                           \
        float lanes_[8];                                                                           \
        vstore8((v), 0, lanes_);                                                                   \
        EPILOGUE_SITE(for (int j_ = 0; j_ < 8; j_++)                                               \
                          lanes_[j_] = EPILOGUE(lanes_[j_], (at) + j_, o);)                        \
        vstore8(vload8(0, lanes_), 0, out + (at));                                                 \
    } while (0)
#else
#define PS_PUT(v, at) vstore8((v), 0, out + (at))
#endif
#define PS_STORE1(r, j)                                                                            \
    PS_PUT(has_bias ? CAT(CAT(a, r), j) + add : CAT(CAT(a, r), j), at + CAT(q, j));
#define PS_STORE(r)                                                                                \
    if (o0 + (r) < O) {                                                                            \
        const int o = o0 + (r);                                                                    \
        const ulong at = ((ulong)n * O + o) * P;                                                   \
        const float add = has_bias ? bias[o] : 0.0f;                                               \
        PS_COLS(PS_STORE1, r)                                                                      \
    }
__kernel void clrun_conv2d_pointwise_small(__global const float *x, __global const float *w,
                                           __global const float *bias, __global float *out,
                                           __constant const int *g, const int has_bias EPILOGUE_PARAMS)
{
    const int C = g[G_C], O = g[G_O];
    const uint P = (uint)(g[G_OH] * g[G_OW]);
    const uint p0 = (uint)get_global_id(0) * PS_NR;
    const size_t n = get_global_id(2);
    PS_VECS(PS_AT)
    for (int o0 = (int)get_global_id(1) * PS_MR; o0 < O; o0 += (int)get_global_size(1) * PS_MR) {
        __global const float *xp = x + (ulong)n * C * P;
        PS_ROWS(PS_DECL)
        for (int c = 0; c < C; c++, xp += P) {
            PS_VECS(PS_LOAD)
            PS_ROWS(PS_STEP)
        }
        PS_ROWS(PS_STORE)
    }
}

/* Few input channels (a 3-channel stem) on CPUs: the positions along the vectors, as
 * clrun_conv2d_pointwise, so that the stores are whole vectors along a row (the core stores
 * each output alone, a plane from the next, which was most of its time with 27 taps: the
 * 224 x 224 stem of MobileNetV3, 3 -> 16 channels at stride 2, took 3x onnxruntime's time).
 * Work-item (block of DWN columns of output row oh, block of CR_MR channels, image): the
 * last block of a row is moved back to end at OW (the host ensures OW >= DWN; the overlap
 * computes the same bits again). w is packed as the core's panels of CR_MR channels
 * (lib/ops/ops_conv.c): panel o0 / CR_MR holds a tap's CR_MR weights side by side, zeros for
 * the channels past O, which are not stored. The taps
 * run c, kh, kw ascending, one fma each, rows outside the image skipped; a row's DWN inputs
 * per tap are loaded from x where the block's span lies inside the row, else from a private
 * copy of it with zeros outside, as the core's padded copy has them (the core multiplies
 * rows outside too; here they are skipped). Adding a product of 0 and a finite weight keeps
 * acc to the bit, as skipping the tap does, unless acc is -0: it starts at +0 and becomes -0
 * only where every product so far rounded to -0 (underflowed below 2^-150). A weight of inf
 * or NaN on a padded row makes the core's output NaN and not this one's. Then + bias, then
 * the epilogue. */
#define CR_SPAN 128
/* 16 channels a block where the vectors are 16 wide (32 registers: 16 sums, the taps' vector
 * and the gathered halves), each tap's strided load shared by twice the fmas of PW_MR's 8:
 * SqueezeNet's stem 3 -> 64 at stride 2 over 224 x 224, 0.38 -> 0.31 ms */
#if DWN == 16
#define CR_MR 16
#define CR_ROWS(X) PW_ROWS(X) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
#else
#define CR_MR PW_MR
#define CR_ROWS(X) PW_ROWS(X)
#endif
#define CR_DECL(r) DWVEC CAT(a, r) = 0.0f;
#define CR_STEP(r) CAT(a, r) = fma((DWVEC)(wt[r]), v, CAT(a, r));
/* Row r's vector va stored, its bias added; CR_STORE(r) from its accumulator. */
#define CR_PUT(r, va)                                                                              \
    if (o0 + (r) < O) {                                                                            \
        const int o = o0 + (r);                                                                    \
        const ulong at = (((ulong)n * O + o) * OH + oh) * OW + ow0;                                \
        const float add = has_bias ? bias[o] : 0.0f;                                               \
        DW_STORE(has_bias ? (va) + add : (va), at);                                                \
    }
#define CR_STORE(r) CR_PUT(r, CAT(a, r))
#define CR_SPILL(r) sa[r] = CAT(a, r);
__kernel void clrun_conv2d_rows(__global const float *x, __global const float *w,
                                __global const float *bias, __global float *out,
                                __constant const int *g, const int has_bias EPILOGUE_PARAMS)
{
    const int C = g[G_C], H = g[G_H], W = g[G_W], O = g[G_O], OH = g[G_OH], OW = g[G_OW];
    const int KH = g[G_KH], KW = g[G_KW], sh = g[G_SH], sw = g[G_SW], ph = g[G_PH], pw = g[G_PW];
    const int dh = g[G_DH], dw = g[G_DW], CK = C * KH * KW;
    const int blocks = (OW + DWN - 1) / DWN, oh = (int)get_global_id(0) / blocks;
    const int ow0 = min(((int)get_global_id(0) % blocks) * DWN, OW - DWN);
    const size_t n = get_global_id(2);
    const int iw0 = ow0 * sw - pw, span = (DWN - 1) * sw + (KW - 1) * dw + 1;
    const bool inside = iw0 >= 0 && iw0 + span <= W;
    float buf[CR_SPAN];
    /* an edge block's private copy: zeros outside the row, set once; [t0, t1) copied per row
     * as a straight run (a select per element made POCL gather them) */
    const int t0 = clamp(-iw0, 0, span), t1 = clamp(W - iw0, t0, span);
    for (int t = 0; !inside && t < span; t++)
        if (t < t0 || t >= t1)
            buf[t] = 0.0f;
    /* blocks of CR_MR channels, get_global_size(1) apart: a work-item of a stem's few taps is
     * too little work for one of POCL's work-groups, and its input rows stay in cache */
    for (int o0 = (int)get_global_id(1) * CR_MR; o0 < O; o0 += (int)get_global_size(1) * CR_MR) {
    __global const float *wp = w + (ulong)o0 * CK; /* panel o0 / CR_MR: CR_MR weights a tap */
    CR_ROWS(CR_DECL)
    for (int c = 0; c < C; c++) {
        for (int kh = 0; kh < KH; kh++) {
            const int ih = oh * sh - ph + kh * dh;
            if (ih < 0 || ih >= H)
                continue;
            __global const float *row = x + (((ulong)n * C + c) * H + ih) * W;
            const int k = (c * KH + kh) * KW;
            if (inside) {
                /* a loop per stride: dw_load's test of sw inside the loop cost SqueezeNet's
                 * stem (3 -> 64 at stride 2) 0.32 against 0.26 ms (wall minima, alone) */
                __global const float *rp = row + iw0;
                __global const float *wt = wp + (ulong)k * CR_MR; /* the tap's */
                if (sw == 2) {
                    for (int kw = 0; kw < KW; kw++, rp += dw, wt += CR_MR) {
                        const DWVEC v = (DWVEC)(DWLOAD(rp).even, DWLOAD(rp + DWN - 1).odd);
                        CR_ROWS(CR_STEP)
                    }
                } else {
                    for (int kw = 0; kw < KW; kw++, rp += dw, wt += CR_MR) {
                        const DWVEC v = dw_load(rp, sw);
                        CR_ROWS(CR_STEP)
                    }
                }
                continue;
            }
            for (int t = t0; t < t1; t++)
                buf[t] = row[iw0 + t];
            for (int kw = 0; kw < KW; kw++) {
                const DWVEC v = dw_load_private(buf + kw * dw, sw);
                __global const float *wt = wp + (ulong)(k + kw) * CR_MR;
                CR_ROWS(CR_STEP)
            }
        }
    }
#if DW_LOOP_STORES
    DWVEC sa[CR_MR];
    CR_ROWS(CR_SPILL)
#pragma unroll 1
    for (int r = 0; r < CR_MR; r++)
        CR_PUT(r, sa[r])
#else
    CR_ROWS(CR_STORE)
#endif
    }
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
 * count_include_pad}. The host's indices are CLRUN__POOLING_GEOMETRY in lib/ops_internal.h;
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

/* Work-item (row block, plane): rows [b * R, b * R + R) of image plane (n * C + c), R = ceil(OH
 * / global size 0), every column. Each output takes its taps kh, kw ascending; padding is never
 * read: a max ignores it; an average divides by the taps inside the image, or with
 * count_include_pad by the taps inside the padded image (a window hanging past it, ceil_mode's
 * last, counts less). Columns whose taps all lie inside the row skip the column checks and,
 * where there are DWN of them or more, run DWN at a time as a vector (HWN = DWN / 2 where
 * fewer: SqueezeNet's 27 x 27 -> 13 x 13 ran scalar with DWN 16), strided loads as the
 * depthwise kernel's (the same taps in the same order, lane by lane: the same bits). The host
 * ensures every window holds at least one element of the image. */
#if DWN == 16
#define HWN 8
#else
#define HWN 4
#endif
#define HWVEC CAT(float, HWN)
#define HWLOAD(p) CAT(vload, HWN)(0, (p))
#define HWSTORE(v, p) CAT(vstore, HWN)((v), 0, (p))

/* dw_load's HWN lanes */
HWVEC hw_load(__global const float *p, const int sw)
{
    if (sw == 1)
        return HWLOAD(p);
    if (sw == 2)
        return (HWVEC)(HWLOAD(p).even, HWLOAD(p + HWN - 1).odd);
    float lanes[HWN];
    for (int j = 0; j < HWN; j++)
        lanes[j] = p[j * sw];
    return HWLOAD(lanes);
}

/* Columns [lo, hi) of output row oh, N at a time (the last block may overlap the one before). */
#define POOL_VECTORS(N, VEC, LOAD, STORE)                                                          \
    for (int ow = lo;; ow += (N)) {                                                                \
        ow = min(ow, hi - (N));                                                                    \
        const int w0 = ow * SW - PW;                                                               \
        VEC acc = is_max ? -INFINITY : 0.0f;                                                       \
        for (int kh = 0; kh < KH; kh++) {                                                          \
            const int ih = h0 + kh * DH;                                                           \
            if (ih < 0 || ih >= H)                                                                 \
                continue;                                                                          \
            __global const float *r = xp + ih * W + w0;                                            \
            if (is_max)                                                                            \
                for (int kw = 0; kw < KW; kw++)                                                    \
                    {                                                                          \
                        const VEC v_ = LOAD(r + kw * DW, SW);                                  \
                        acc = POOL_MAX(acc, v_);                                               \
                    }                                                                          \
            else                                                                                   \
                for (int kw = 0; kw < KW; kw++)                                                    \
                    acc += LOAD(r + kw * DW, SW);                                                  \
        }                                                                                          \
        if (!is_max)                                                                               \
            acc = acc / (float)(include_pad ? padded_rows * KW : rows * KW);                       \
        STORE(acc, yp + oh * OW + ow);                                                             \
        if (ow + (N) >= hi)                                                                        \
            break;                                                                                 \
    }

/* A max as a compare and a select (one instruction on x86, where fmax's NaN handling took three:
 * SqueezeNet's 64 x 111 x 111 pool 0.23 -> 0.20 ms, 128 x 55 x 55 0.14 -> 0.115): NaN taps
 * skipped, the first of equal taps kept, as fmax gave on POCL and the graph reference does. */
#define POOL_MAX(a, v) ((v) > (a) ? (v) : (a))
#define POOL_TAP(v)                                                                                    do {                                                                                                   const float v_ = (v);                                                                              acc = is_max ? POOL_MAX(acc, v_) : acc + v_;                                                       } while (0)

/* A 3 x 3 max pool at stride 2 (ResNet's, SqueezeNet's, ShuffleNetV2's), DWN outputs of a row
 * at a time: an input row's three taps per output from four loads, each row's maxima shared by
 * the two output rows it belongs to, rows outside the image -inf. The same bits as the taps in
 * kh, kw order: a max keeps the first of equal taps and skips NaN (POOL_MAX), so the max of
 * each row's maximum, rows in order, is the first tap of the largest value in the same order
 * as the running max over all nine (a row of -inf or NaN changes nothing, as a skipped row). */
DWVEC pool_row_max3(__global const float *p)
{
    const DWVEC l0 = DWLOAD(p), l1 = DWLOAD(p + DWN);
    DWVEC h = POOL_MAX((DWVEC)(-INFINITY), (DWVEC)(l0.even, l1.even));
    h = POOL_MAX(h, (DWVEC)(l0.odd, l1.odd));
    return POOL_MAX(h, (DWVEC)(DWLOAD(p + 2).even, DWLOAD(p + DWN + 1).odd));
}
#define POOL_ROW3(ih) ((ih) >= 0 && (ih) < H ? pool_row_max3(xp + (ih) * W + w0) : (DWVEC)(-INFINITY))

__kernel void clrun_pool2d_f32(__global const float *x, __global float *y, __constant const int *g,
                               const int is_max)
{
    const int OH = g[P_OH], OW = g[P_OW], H = g[P_H], W = g[P_W], KH = g[P_KH], KW = g[P_KW];
    const int SH = g[P_SH], SW = g[P_SW], PH = g[P_PH], PW = g[P_PW], DH = g[P_DH], DW = g[P_DW];
    const int HE = H + g[P_PHE], WE = W + g[P_PWE], include_pad = g[P_INCLUDE_PAD];
    const int R = (OH + (int)get_global_size(0) - 1) / (int)get_global_size(0);
    const int oh0 = (int)get_global_id(0) * R, oh1 = min(OH, oh0 + R);
    const size_t plane = get_global_id(1);
    __global const float *xp = x + plane * H * W;
    __global float *yp = y + plane * OH * OW;
    /* columns [lo, hi) have every tap inside the row */
    const int lo = min(OW, (PW + SW - 1) / SW);
    const int last = W - 1 + PW - (KW - 1) * DW;
    const int hi = max(lo, last < 0 ? 0 : min(OW, last / SW + 1));
    const int lanes = hi - lo >= DWN ? DWN : hi - lo >= HWN ? HWN : 0;
    const bool vectors = lanes > 0;
    const bool max3 = is_max && lanes == DWN && KH == 3 && KW == 3 && SH == 2 && SW == 2 &&
                      DH == 1 && DW == 1;
    for (int ow = lo; max3; ow += DWN) { /* down each block of columns */
        ow = min(ow, hi - DWN);
        const int w0 = ow * 2 - PW;
        int have = INT_MIN; /* the input row whose maxima `kept` holds */
        DWVEC kept = -INFINITY;
        for (int oh = oh0; oh < oh1; oh++) {
            const int h0 = oh * 2 - PH;
            const DWVEC top = h0 == have ? kept : POOL_ROW3(h0);
            const DWVEC mid = POOL_ROW3(h0 + 1);
            kept = POOL_ROW3(h0 + 2);
            have = h0 + 2;
            DWSTORE(POOL_MAX(POOL_MAX(POOL_MAX((DWVEC)(-INFINITY), top), mid), kept),
                    yp + oh * OW + ow);
        }
        if (ow + DWN >= hi)
            break;
    }
    for (int oh = oh0; oh < oh1; oh++) {
        const int h0 = oh * SH - PH;
        int rows = 0, padded_rows = 0;
        for (int kh = 0; kh < KH; kh++) {
            const int ih = h0 + kh * DH;
            rows += ih >= 0 && ih < H;
            padded_rows += ih < HE;
        }
        if (max3) {
            /* done above */
        } else if (lanes == DWN) {
            POOL_VECTORS(DWN, DWVEC, dw_load, DWSTORE)
        } else if (lanes == HWN) {
            POOL_VECTORS(HWN, HWVEC, hw_load, HWSTORE)
        }
        for (int ow = 0; ow < OW; ow++) {
            if (vectors && ow == lo)
                ow = hi;
            if (ow >= OW)
                break;
            const int w0 = ow * SW - PW;
            float acc = is_max ? -INFINITY : 0.0f;
            int cols = 0, padded_cols = 0;
            if (ow >= lo && ow < hi) {
                for (int kh = 0; kh < KH; kh++) {
                    const int ih = h0 + kh * DH;
                    if (ih < 0 || ih >= H)
                        continue;
                    __global const float *r = xp + ih * W + w0;
                    if (is_max)
                        for (int kw = 0; kw < KW; kw++)
                            acc = POOL_MAX(acc, r[kw * DW]);
                    else
                        for (int kw = 0; kw < KW; kw++)
                            acc += r[kw * DW];
                }
                cols = padded_cols = KW;
            } else {
                for (int kw = 0; kw < KW; kw++) {
                    const int iw = w0 + kw * DW;
                    cols += iw >= 0 && iw < W;
                    padded_cols += iw < WE;
                }
                for (int kh = 0; kh < KH; kh++) {
                    const int ih = h0 + kh * DH;
                    if (ih < 0 || ih >= H)
                        continue;
                    for (int kw = 0; kw < KW; kw++) {
                        const int iw = w0 + kw * DW;
                        if (iw >= 0 && iw < W)
                            POOL_TAP(xp[ih * W + iw]);
                    }
                }
            }
            yp[oh * OW + ow] =
                is_max ? acc : acc / (float)(include_pad ? padded_rows * padded_cols : rows * cols);
        }
    }
}
