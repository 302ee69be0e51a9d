/* The matrix-product core for devices without real local memory (CPUs: POCL, Intel's and
 * Arm's CPU runtimes), shared by matmul and conv2d (lib/ops/matmul_core.c builds it).
 *
 * C[m, n] = sum over k of A[m, k] B[k, n]. B is packed first into panels of NR columns:
 * panel j holds B[k, j*NR .. j*NR+NR-1] for k = 0..K-1, NR floats per k, contiguous, columns
 * past N zero (clrun_mm_pack). Constant B (weights) is packed once per executor. A work-item
 * computes MR rows by one panel: MR x NR/VW accumulators of VW floats in registers, one fma
 * chain per output, k ascending from 0, so each output is exactly
 *     acc = fma(A[m, K-1], B[K-1, n], ... fma(A[m, 0], B[0, n], 0))
 * whatever MR, the work-group size or the device: every variant gives the same bits (the tests
 * check it). Then v = alpha * acc, v = v + bias[n], v = EPILOGUE(v, i, c), one store.
 * Rows past M read a clamped (valid) row and are not stored: edge tiles run the same code.
 *
 * The host builds this file in pieces: the head alone (to the PER-MR BODY line: packing and
 * padding), and for each (kind, MR) a variant runs, the head and the body after `#define MR m`,
 * `#define KSUFFIX(name) name##_m` and one of CORE_MM, CORE_CONV, CORE_WGRAD set to 1 (the other
 * kinds' kernels left out), so that a process compiles only the variants it runs: each body costs POCL about
 * a quarter of a second to build. The head's kernels take the panel width as an argument
 * (one head for the core at every width). A body gets VW (the device's float vector width),
 * NR, and optionally CLRUN_EPILOGUE(v, i, c) with EPILOGUE_PARAMS (extra kernel arguments it
 * reads: `, __global const float *x0, ...`). The kernels are declared over two lines so that
 * kernels/embed.sh does not list them: they exist only in the generated program. */
#pragma OPENCL FP_CONTRACT OFF

#ifndef VW
#define VW 8
#endif
#ifndef NR
#define NR (2 * VW)
#endif
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

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define VEC CAT(float, VW)
#define VLOAD CAT(vload, VW)
#define VSTORE CAT(vstore, VW)
#define NV (NR / VW)

/* The geometry of a convolution (as in conv.cl and matmul.cl); CLRUN__CONV_GEOMETRY in
 * lib/ops/ops_internal.h holds the host's indices, tests/test_ops.c checks these. */
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

/* The head's kernels, left out of the per-MR programs (CORE_BODY), so that each of those
 * holds one kernel: a driver that compiles a whole program to give its binary compiles only it. */
#ifndef CORE_BODY
/* Packs B (batch z at offsets[z]; element (k, n) at b[k * b_ks + n * b_ns]) into panels nr
 * wide: bp[z][n / nr][k][n % nr]. Work-item (n, k, z) over n < the panels' padded width. The
 * head's kernels take the panel width as an argument, so that one head serves the core at
 * every width (a model running the core at two builds and compiles the head once). */
__kernel
void clrun_mm_pack(__global const float *b, __global float *bp, __global const ulong *offsets,
                   const uint N, const uint K, const ulong b_ks, const ulong b_ns, const uint nr)
{
    const uint n = get_global_id(0), k = get_global_id(1);
    const size_t z = get_global_id(2);
    const uint panels = (N + nr - 1) / nr;
    if (n >= panels * nr || k >= K)
        return;
    const ulong at = ((ulong)z * panels + n / nr) * K * nr + (ulong)k * nr + n % nr;
    bp[at] = n < N ? b[offsets[z] + k * b_ks + n * b_ns] : 0.0f;
}

/* Panels [n0 / nr, n0 / nr + chunk) of one group's B = w transposed (w [N, K] row-major:
 * B[k, n] = w[n * K + k]), packed as clrun_mm_pack packs them, from bp: bp[n / nr][k][n % nr]
 * over the chunk's columns n (from n0), columns past N zero. A convolution whose weights change
 * between runs packs them a chunk at a time into scratch a chunk large, each chunk's product
 * run before the next is packed (lib/ops/ops_conv.c), and so does a product whose transposed B
 * changes between runs and is too large to pack whole (lib/ops/ops_matmul.c: a backward dY W^T
 * through a large weight). Work-item (n, k) over n < the chunk's width. */
__kernel
void clrun_conv_pack_chunk(__global const float *w, __global float *bp, const uint N, const uint K,
                           const uint n0, const uint width, const uint nr)
{
    const uint n = get_global_id(0), k = get_global_id(1);
    if (n >= width || k >= K)
        return;
    bp[(ulong)(n / nr) * K * nr + (ulong)k * nr + n % nr] = n0 + n < N ? w[(ulong)(n0 + n) * K + k] : 0.0f;
}

/* A narrow weight widened to f32, as the graph's cast (and sub, mul) nodes widen it: for the
 * kernels that read f32 weights only (devices with local memory, depthwise convolutions).
 * bw: 1 f16, 2 bf16 (w = f32(q)), 3 i8, 4 u8 (w = (f32(q) - zero[c]) * scale[c], channel
 * c = i / inner % channels; zero 0 where has_zero is 0). Work-item i. */
__kernel
void clrun_widen_weight(__global const uchar *q, __global const float *scale,
                        __global const float *zero, __global float *w, const int bw,
                        const ulong n, const ulong inner, const uint channels, const int has_zero)
{
    const size_t i = get_global_id(0);
    if (i >= n)
        return;
    if (bw == 1) {
        w[i] = vload_half(i, (__global const half *)q);
    } else if (bw == 2) {
        w[i] = as_float((uint)((__global const ushort *)q)[i] << 16);
    } else {
        const uint c = (uint)(i / inner % channels);
        const float v = bw == 3 ? (float)((__global const char *)q)[i] : (float)q[i];
        w[i] = (v - (has_zero ? zero[c] : 0.0f)) * scale[c];
    }
}

/* The padded image of a convolution: xp[plane][ih][iw] = x[plane][ih - PH][iw - PW] inside x,
 * 0 outside, over HP x WP (what the output's windows reach). Work-item (block of rows, plane),
 * the rows split evenly over get_global_size(0): each row a run of zeros, a copy and zeros,
 * loops a CPU compiler vectorizes. An element per work-item in groups of 32 made POCL run
 * 34 000 work-groups for a 64 x 128 x 128 input, 4 ms of a U-Net's 40. */
__kernel
void clrun_conv_pad(__global const float *x, __global float *xp, __constant const int *g,
                    const uint HP, const uint WP)
{
    const uint per = (HP + (uint)get_global_size(0) - 1) / (uint)get_global_size(0);
    const uint first = (uint)get_global_id(0) * per, end = min(first + per, HP);
    const size_t plane = get_global_id(1);
    const int H = g[G_H], W = g[G_W], PW = g[G_PW];
    const int wp = (int)WP, left = min(PW, wp), right = clamp(PW + W, left, wp);
    for (uint ih = first; ih < end; ih++) {
        __global float *row = xp + (plane * HP + ih) * WP;
        const int h = (int)ih - g[G_PH];
        if (h < 0 || h >= H) {
            for (int i = 0; i < wp; i++)
                row[i] = 0.0f;
            continue;
        }
        __global const float *src = x + (plane * H + h) * W;
        for (int i = 0; i < left; i++)
            row[i] = 0.0f;
        for (int i = left; i < right; i++)
            row[i] = src[i - PW];
        for (int i = right; i < wp; i++)
            row[i] = 0.0f;
    }
}
#endif

/* Repetition over rows (RM_n) and over the vectors of a panel (COLS). */
#define RM_1(X) X(0)
#define RM_2(X) RM_1(X) X(1)
#define RM_3(X) RM_2(X) X(2)
#define RM_4(X) RM_3(X) X(3)
#define RM_5(X) RM_4(X) X(4)
#define RM_6(X) RM_5(X) X(5)
#define RM_7(X) RM_6(X) X(6)
#define RM_8(X) RM_7(X) X(7)
#define RM_9(X) RM_8(X) X(8)
#define RM_10(X) RM_9(X) X(9)
#define RM_11(X) RM_10(X) X(10)
#define RM_12(X) RM_11(X) X(11)
#if NV == 1
#define COLS(X, r) X(r, 0)
#define LOAD_B(p) const VEC bv0 = VLOAD(0, p);
#else
#define COLS(X, r) X(r, 0) X(r, 1)
#define LOAD_B(p) const VEC bv0 = VLOAD(0, p), bv1 = VLOAD(0, (p) + VW);
#endif
/* A panel's NR values at one k of a B read as it is, gathered into registers (column j of the
 * panel at p[j * js], columns past `last` reading column `last`'s value, never stored): the
 * same values as LOAD_B over a packed copy in the columns that are stored. */
#define LOAD_BG(p, js, last)                                                                   \
    float bt[NR];                                                                              \
    for (uint j = 0; j < NR; j++)                                                              \
        bt[j] = (p)[(ulong)min(j, last) * (js)];                                               \
    LOAD_B(bt)
/* A constant B stored narrow (BW: 1 f16, 2 bf16, 3 i8, 4 u8; 0, the default, f32), packed
 * into panels of NR columns as an f32 B is: for i8 and u8 each panel starts with its NR scales
 * and NR zero points (floats, NARROW_HEAD bytes), then K x NR values, NARROW_SIZE bytes each.
 * LOAD_BN widens a k step's NR values in registers, as the graph's cast (sub, mul) nodes widen
 * them: f16 and bf16 exactly, i8 and u8 as (f32(q) - zero) * scale: the same B values, in the
 * same fma chain, as the f32 product over the widened weight: the same bits. */
#ifndef BW
#define BW 0
#endif
#if BW == 1
#define NARROW half
#define NARROW_SIZE 2
#define WIDEN(p, v) CAT(vload_half, VW)(0, (p) + (v) * VW)
#elif BW == 2
#define NARROW ushort
#define NARROW_SIZE 2
#define WIDEN(p, v) CAT(as_float, VW)(CAT(convert_uint, VW)(CAT(vload, VW)(0, (p) + (v) * VW)) << 16)
#elif BW == 3 || BW == 4
#if BW == 3
#define NARROW char
#else
#define NARROW uchar
#endif
#define NARROW_SIZE 1
#define WIDEN(p, v) ((CAT(convert_float, VW)(CAT(vload, VW)(0, (p) + (v) * VW)) - CAT(zv, v)) * CAT(sv, v))
#endif
#if BW >= 3
#define NARROW_HEAD (8 * NR)
#if NV == 1
#define PANEL_SCALES(h) const VEC sv0 = VLOAD(0, h), zv0 = VLOAD(0, (h) + NR);
#else
#define PANEL_SCALES(h) const VEC sv0 = VLOAD(0, h), sv1 = VLOAD(0, (h) + VW), \
                                  zv0 = VLOAD(0, (h) + NR), zv1 = VLOAD(0, (h) + NR + VW);
#endif
#else
#define NARROW_HEAD 0
#define PANEL_SCALES(h)
#endif
#if BW
#if NV == 1
#define LOAD_BN(p) const VEC bv0 = WIDEN(p, 0);
#else
#define LOAD_BN(p) const VEC bv0 = WIDEN(p, 0), bv1 = WIDEN(p, 1);
#endif
/* The panel at byte offset `at` of bp: its scales, and bn, its values. */
#define NARROW_PANEL(bp, at)                                                                   \
    __global const uchar *ph = (__global const uchar *)(bp) + (at);                            \
    PANEL_SCALES((__global const float *)ph)                                                   \
    __global const NARROW *bn = (__global const NARROW *)(ph + NARROW_HEAD);
#endif
#define ACC(r, v) CAT(CAT(acc, r), CAT(_, v))
#define DECL_ACC(r, v) VEC ACC(r, v) = 0.0f;
#define FMA_ACC(r, v) ACC(r, v) = fma(CAT(av, r), CAT(bv, v), ACC(r, v));
/* One k step of row r, whose A element is `value`. */
#define STEP_ROW(r, value) { const VEC CAT(av, r) = (VEC)(value); COLS(FMA_ACC, r) }
#define SPILL_ACC(r, v) VSTORE(ACC(r, v), 0, t + v * VW);

/* ---- PER-MR BODY ---- */

#ifndef MR /* the file built alone, as kernels/embed.sh's program: one variant of each kind */
#define MR 8
#define KSUFFIX(name) name
#define CORE_MM 1
#define CORE_CONV 1
#define CORE_WGRAD 1
#endif
#define ROWS(X) CAT(RM_, MR)(X)

/* ---- matmul: out[z] = alpha * A[z] B[z] (+ bias) ----
 * Work-item (row block, panel, z); batch[2z], batch[2z+1]: A's offset and the packed B's, in
 * elements. A's element (m, k) is at a[m * a_ms + k * a_ks]. Work-groups are taken in blocks
 * of `sp` panels: the groups of one block of rows run its sp panels one after the other, so
 * the rows stay in cache over sp panels and the sp panels over every block of rows (A is read
 * N / (NR sp) times instead of N / NR). The grid's second dimension is padded to a multiple
 * of sp; groups past the last panel do nothing. A group's work-items take `steps` row blocks
 * each, one after the other (see conv's kernel below). bp is B packed (b_panel = K * NR
 * elements a panel, b_k = NR a k step) or, where B is not constant, B itself, row-major
 * (b_panel = NR, b_k = N; a last panel past N gathered, its extra columns never stored) or
 * stored transposed as [N, K] (b_panel = NR K, b_k = 1: a backward dY W^T reads W as it is,
 * each k's NR values gathered): the same values in the same order, so the same bits, without
 * the packed copy. panel0: the first panel a launch covers, bp then that panel's (a chunk of
 * panels packed into scratch, lib/ops/ops_matmul.c), else 0. */
#if CORE_MM
#define MM_DECL(r) COLS(DECL_ACC, r) \
    const ulong CAT(ao, r) = (ulong)min(m0 + r, M - 1) * a_ms;
/* Row-major A: row r's elements run along k. Transposed: each k's rows sit together. Either
 * way one add per load, no multiply (a 64-bit multiply per load halves the rate). */
#define MM_STEP(r) STEP_ROW(r, az[CAT(ao, r) + k])
#define MM_STEP_T(r) STEP_ROW(r, ak[CAT(ao, r)])
/* With an epilogue, a full panel (n0 + NR <= N) scales and adds the bias on whole vectors,
 * then applies the epilogue in a loop of NR steps with no exit, which the compiler vectorizes
 * with the epilogue inlined (the same operations per lane, so the same bits); the last panel
 * of a row goes element by element. Without one, every panel goes element by element: the two
 * paths measure the same there, and the second one costs POCL about 0.3 s more to compile
 * each variant. */
#define SCALE_SPILL(r, v) {                                                                    \
        VEC x = alpha * ACC(r, v);                                                             \
        if (has_bias)                                                                          \
            x = x + VLOAD(0, bias + n0 + v * VW);                                              \
        VSTORE(x, 0, t + v * VW);                                                              \
    }
/* Row r's outputs one element at a time: the last panel of a row, or every panel without an
 * epilogue. */
#define STORE_ELEMENTS(r)                                                                      \
    COLS(SPILL_ACC, r)                                                                         \
    for (uint j = 0; j < NR && n0 + j < N; j++) {                                              \
        float v = alpha * t[j];                                                                \
        if (has_bias)                                                                          \
            v = v + bias[n0 + j];                                                              \
        out[row + n0 + j] = EPILOGUE(v, row + n0 + j, n0 + j);                                 \
    }
#ifdef CLRUN_EPILOGUE
#define MM_STORE(r)                                                                            \
    if (m0 + r < M) {                                                                          \
        float t[NR];                                                                           \
        const ulong row = oz + (ulong)(m0 + r) * N;                                            \
        if (n0 + NR <= N) {                                                                    \
            COLS(SCALE_SPILL, r)                                                               \
            EPILOGUE_SITE(for (uint j = 0; j < NR; j++)                                        \
                              out[row + n0 + j] = EPILOGUE(t[j], row + n0 + j, n0 + j);)       \
        } else {                                                                               \
            STORE_ELEMENTS(r)                                                                  \
        }                                                                                      \
    }
#else
#define MM_STORE(r)                                                                            \
    if (m0 + r < M) {                                                                          \
        float t[NR];                                                                           \
        const ulong row = oz + (ulong)(m0 + r) * N;                                            \
        STORE_ELEMENTS(r)                                                                      \
    }
#endif

__kernel
void KSUFFIX(clrun_mm_core)(__global const float *a, __global const float *bp,
                            __global const float *bias, __global float *out,
                            __global const ulong *batch, const uint M, const uint N,
                            const uint K, const ulong a_ms, const ulong a_ks, const int has_bias,
                            const float alpha, const uint sp, const uint steps,
                            const ulong b_panel, const uint b_k,
                            const uint panel0 EPILOGUE_PARAMS)
{
    const uint groups = get_num_groups(0), span = groups * sp;
    const uint linear = get_group_id(1) * groups + get_group_id(0);
    const uint panel = panel0 + linear / span * sp + linear % span % sp;
    const uint first = linear % span / sp * steps; /* the group's first step of row blocks */
    const size_t z = get_global_id(2);
    if (panel * NR >= N)
        return;
    __global const float *az = a + batch[2 * z];
#if BW
    NARROW_PANEL(bp, (ulong)(panel - panel0) * b_panel)
#else
    __global const float *b = bp + batch[2 * z + 1] + (ulong)(panel - panel0) * b_panel;
#endif
    const ulong oz = (ulong)z * M * N;
    const uint n0 = panel * NR;
    /* B read as it is and gathered: transposed (b_k == 1: a column's k along memory), or
     * row-major in the last panel of an N that panels do not divide (b_k == N != NR), whose
     * columns past N repeat the last one (a packed B has b_k == NR). */
#if !BW
    const bool gather = b_k == 1 || (n0 + NR > N && b_k != NR);
    const uint ks = b_k == 1 ? 1 : b_k, js = b_k == 1 ? K : 1, last = min(N - 1 - n0, (uint)NR - 1);
#endif
    for (uint step = 0; step < steps; step++) {
        const uint m0 = ((first + step) * get_local_size(0) + get_local_id(0)) * MR;
        if (m0 >= M)
            break;
        ROWS(MM_DECL)
#if BW
        /* narrow: a constant B, packed (b_panel: a panel's bytes) */
        if (a_ks == 1) {
            for (uint k = 0; k < K; k++) {
                LOAD_BN(bn + (ulong)k * NR)
                ROWS(MM_STEP)
            }
        } else {
            __global const float *ak = az;
            for (uint k = 0; k < K; k++, ak += a_ks) {
                LOAD_BN(bn + (ulong)k * NR)
                ROWS(MM_STEP_T)
            }
        }
#else
        if (gather && a_ks == 1) {
            for (uint k = 0; k < K; k++) {
                LOAD_BG(b + (ulong)k * ks, js, last)
                ROWS(MM_STEP)
            }
        } else if (gather) {
            __global const float *ak = az;
            for (uint k = 0; k < K; k++, ak += a_ks) {
                LOAD_BG(b + (ulong)k * ks, js, last)
                ROWS(MM_STEP_T)
            }
        } else if (a_ks == 1) {
            for (uint k = 0; k < K; k++) {
                LOAD_B(b + (ulong)k * b_k)
                ROWS(MM_STEP)
            }
        } else {
            __global const float *ak = az;
            for (uint k = 0; k < K; k++, ak += a_ks) {
                LOAD_B(b + (ulong)k * b_k)
                ROWS(MM_STEP_T)
            }
        }
#endif
        ROWS(MM_STORE)
    }
}
#endif /* CORE_MM */

/* ---- conv2d as a product: rows are output positions p of one image and group, columns the
 * group's output channels, k runs over (c, kh, kw) of the group's input channels. The packed
 * B holds the weights transposed (B[k, o] = w[o, k]); A is read from the image through per-row
 * offsets, so no patch matrix is ever stored. The image is x itself when the convolution has
 * no padding, else a copy with its padding written as zeros (clrun_conv_pad, the only scratch:
 * one image plane per input channel, a little larger than x): every tap is then in bounds, and
 * the inner loop has no check. xp is [N, C, HP, WP]. With `direct` (weights that change between
 * runs, few positions) wp is w as it is and each k's panel values are gathered from its rows:
 * the same values in the same fma chain as the packed copy, which is then never made. A pointwise convolution (1 x 1, stride 1,
 * no padding) reads A straight from x: a plain product of w and x. Work-item (position block,
 * panel, image * groups + group); each work-item of a group takes `steps` position blocks,
 * one after the other, strided by the group's size: a variant's LM row blocks per group are
 * clrun__core_group work-items times steps, so that every variant launches with the same local
 * size and POCL, which compiles a kernel once per local size, compiles each kernel once. */
#if CORE_CONV
#define CV_DECL(r) COLS(DECL_ACC, r)                                                          \
    const uint CAT(pos, r) = min(p0 + r, P - 1);                                                 \
    const uint CAT(base, r) = CAT(pos, r) / OW * g[G_SH] * WP + CAT(pos, r) % OW * g[G_SW];
#define CV_STEP_POINTWISE(r) STEP_ROW(r, xk[CAT(pos, r)])
#define CV_STEP(r) STEP_ROW(r, xt[CAT(base, r)])
/* Row r's outputs one element at a time: the last panel of a group, or every panel without an
 * epilogue. */
#define CV_STORE_ELEMENTS(r)                                                                   \
    COLS(SPILL_ACC, r)                                                                         \
    for (uint j = 0; j < NR && n0 + j < Og; j++) {                                             \
        const uint o = group * Og + n0 + j;                                                    \
        const ulong at = ((ulong)image * g[G_O] + o) * P + p0 + r;                             \
        float v = t[j];                                                                        \
        if (has_bias)                                                                          \
            v = v + bias[o];                                                                   \
        out[at] = EPILOGUE(v, at, o);                                                          \
    }
#if defined(CLRUN_EPILOGUE) && defined(CLRUN_EPILOGUE_MATH)
/* With an epilogue that computes an exp or a tanh (the generator defines CLRUN_EPILOGUE_MATH),
 * a full panel (n0 + NR <= Og) adds the bias on whole vectors, applies the epilogue in a loop of
 * NR steps with no exit (vectorized by the compiler, the same operations per lane as the
 * element path: the same bits), then stores its NR channels a plane apart: the math then costs
 * about what a separate vectorized pass does, without the pass's round trip through memory or
 * its launch. Arithmetic epilogues (relu, hardswish) keep the one loop below. */
#define CV_BIAS_SPILL(r, v) {                                                                  \
        VEC x = ACC(r, v);                                                                     \
        if (has_bias)                                                                          \
            x = x + VLOAD(0, bias + group * Og + n0 + v * VW);                                 \
        VSTORE(x, 0, t + v * VW);                                                              \
    }
#define CV_STORE(r)                                                                            \
    if (p0 + r < P) {                                                                          \
        float t[NR];                                                                           \
        const ulong row = ((ulong)image * g[G_O] + group * Og + n0) * P + p0 + r;              \
        if (n0 + NR <= Og) {                                                                   \
            COLS(CV_BIAS_SPILL, r)                                                             \
            for (uint j = 0; j < NR; j++)                                                      \
                t[j] = EPILOGUE(t[j], row + (ulong)j * P, group * Og + n0 + j);                \
            for (uint j = 0; j < NR; j++)                                                      \
                out[row + (ulong)j * P] = t[j];                                                \
        } else {                                                                               \
            CV_STORE_ELEMENTS(r)                                                               \
        }                                                                                      \
    }
#else
#define CV_STORE(r)                                                                            \
    if (p0 + r < P) {                                                                          \
        float t[NR];                                                                           \
        CV_STORE_ELEMENTS(r)                                                                   \
    }
/* A whole tile (MR positions in range, a full panel) is stored a channel at a time: its MR
 * positions are neighbours in memory. Row by row, each row wrote NR channels a plane apart, and
 * planes of 4096 or 16384 positions put those NR lines in one set of a CPU's L1 cache, which
 * then lost every line between one row and the next: a U-Net's 32 -> 64 convolution at 64 x 64
 * (K = 288) ran at a third of the rate of one with K = 1152. The same values with the same bias
 * and epilogue as CV_STORE_ELEMENTS, in another order: the same bits. */
#define CV_TILE_SPILL(r, v) VSTORE(ACC(r, v), 0, tile + (r) * NR + (v) * VW);
#define CV_TILE_ROW(r) COLS(CV_TILE_SPILL, r)
#define CV_STORE_TILE                                                                          \
    {                                                                                          \
        float tile[MR * NR];                                                                   \
        ROWS(CV_TILE_ROW)                                                                      \
        const ulong first = ((ulong)image * g[G_O] + group * Og + n0) * P + p0;                \
        EPILOGUE_SITE(                                                                         \
        for (uint j = 0; j < NR; j++) {                                                        \
            const uint o = group * Og + n0 + j;                                                \
            for (uint r = 0; r < MR; r++) {                                                    \
                const ulong at = first + (ulong)j * P + r;                                     \
                float v = tile[r * NR + j];                                                    \
                if (has_bias)                                                                  \
                    v = v + bias[o];                                                           \
                out[at] = EPILOGUE(v, at, o);                                                  \
            }                                                                                  \
        })                                                                                     \
    }
#endif

__kernel
void KSUFFIX(clrun_conv_core)(__global const float *xp, __global const float *wp,
                              __global const float *bias, __global float *out,
                              __constant const int *g, const int has_bias, const uint HP,
                              const uint WP, const uint steps, const int direct,
                              const uint panel0 EPILOGUE_PARAMS)
{
    const uint OW = g[G_OW], P = g[G_OH] * OW;
    /* panel0: the first panel of a chunk of packed weights (one group), wp its first panel */
    const uint panel = panel0 + get_global_id(1);
    const uint groups = g[G_GROUPS], z = get_global_id(2);
    const uint image = z / groups, group = z % groups;
    const uint Cg = g[G_C] / groups, Og = g[G_O] / groups;
    const uint KH = g[G_KH], KW = g[G_KW], Kc = Cg * KH * KW;
    const uint panels = (Og + NR - 1) / NR, n0 = panel * NR;
    const uint plane = HP * WP, DH = g[G_DH] * WP, DW = g[G_DW];
    __global const float *xz = xp + ((ulong)image * g[G_C] + group * Cg) * plane;
#if BW
    NARROW_PANEL(wp, ((ulong)group * panels + panel) * (NARROW_HEAD + (ulong)Kc * NR * NARROW_SIZE))
#else
    __global const float *b = wp + ((ulong)group * panels + panel - panel0) * Kc * NR;
    /* direct: wp is w itself, [O, Kc]; the panel's column j at bw[j * Kc + k], columns past the
     * group's last repeating it (never stored) */
    __global const float *bw = wp + ((ulong)group * Og + n0) * Kc;
    const uint last = min(Og - 1 - n0, (uint)NR - 1);
#endif
    const bool pointwise = KH == 1 && KW == 1 && g[G_SH] == 1 && g[G_SW] == 1 && plane == P;
#ifdef CONV_PATH_DIRECT
    /* how the host built it (clrun__core_source.path): the other two loops are not compiled */
#define CV_DIRECT CONV_PATH_DIRECT
#else
#define CV_DIRECT direct
#endif
    for (uint step = 0; step < steps; step++) {
        const uint p0 = ((get_group_id(0) * steps + step) * get_local_size(0) + get_local_id(0)) * MR;
        if (p0 >= P)
            break;
        ROWS(CV_DECL)
#if BW
        /* narrow: constant weights, packed */
        if (pointwise) {
            for (uint k = 0; k < Kc; k++) {
                __global const float *xk = xz + (ulong)k * P;
                LOAD_BN(bn + (ulong)k * NR)
                ROWS(CV_STEP_POINTWISE)
            }
        } else {
            uint k = 0;
            for (uint c = 0; c < Cg; c++) {
                for (uint kh = 0; kh < KH; kh++) {
                    __global const float *xh = xz + (ulong)c * plane + kh * DH;
                    for (uint kw = 0; kw < KW; kw++, k++) {
                        __global const float *xt = xh + kw * DW;
                        LOAD_BN(bn + (ulong)k * NR)
                        ROWS(CV_STEP)
                    }
                }
            }
        }
#else
        if (pointwise && CV_DIRECT) {
            for (uint k = 0; k < Kc; k++) {
                __global const float *xk = xz + (ulong)k * P;
                LOAD_BG(bw + k, Kc, last)
                ROWS(CV_STEP_POINTWISE)
            }
        } else if (CV_DIRECT) {
            uint k = 0;
            for (uint c = 0; c < Cg; c++) {
                for (uint kh = 0; kh < KH; kh++) {
                    __global const float *xh = xz + (ulong)c * plane + kh * DH;
                    for (uint kw = 0; kw < KW; kw++, k++) {
                        __global const float *xt = xh + kw * DW;
                        LOAD_BG(bw + k, Kc, last)
                        ROWS(CV_STEP)
                    }
                }
            }
        } else if (pointwise) {
            for (uint k = 0; k < Kc; k++) {
                __global const float *xk = xz + (ulong)k * P;
                LOAD_B(b + (ulong)k * NR)
                ROWS(CV_STEP_POINTWISE)
            }
        } else if (KH == 3 && KW == 3 && DW == 1) {
            /* a 3 x 3 kernel's row of taps unrolled, its three columns one float apart: the
             * loop of 3 over kw with its offsets computed at each step ran the core at half
             * its rate; unrolled, each broadcast takes its column as a constant displacement
             * (ResNet-18 0.85x the time a run, the U-Net decoder 0.92x; 64 -> 64 at 56 x 56
             * alone 1.08-1.32 -> 0.89-1.21 ms). The same taps in the same order. */
            __global const float *bk = b;
            for (uint c = 0; c < Cg; c++) {
                for (uint kh = 0; kh < 3; kh++, bk += 3 * NR) {
                    __global const float *xt = xz + (ulong)c * plane + kh * DH;
                    {
                        LOAD_B(bk)
                        ROWS(CV_STEP)
                    }
                    xt++;
                    {
                        LOAD_B(bk + NR)
                        ROWS(CV_STEP)
                    }
                    xt++;
                    {
                        LOAD_B(bk + 2 * NR)
                        ROWS(CV_STEP)
                    }
                }
            }
        } else {
            uint k = 0;
            for (uint c = 0; c < Cg; c++) {
                for (uint kh = 0; kh < KH; kh++) {
                    __global const float *xh = xz + (ulong)c * plane + kh * DH;
                    for (uint kw = 0; kw < KW; kw++, k++) {
                        __global const float *xt = xh + kw * DW;
                        LOAD_B(b + (ulong)k * NR)
                        ROWS(CV_STEP)
                    }
                }
            }
        }
#endif
#ifdef CV_STORE_TILE
        if (p0 + MR <= P && n0 + NR <= Og)
            CV_STORE_TILE
        else
#endif
        {
            ROWS(CV_STORE)
        }
    }
}
#endif /* CORE_CONV */

/* ---- conv2d's weight gradient as a product: dw[o, k] = sum over images n and output positions
 * p of dy[n, o, p] patch[n, p, k]. Rows are the taps k = (c, kh, kw) of one group's input
 * channels, columns the group's output channels, the sum runs n, then p ascending. The packed B
 * holds dy, B[(n, p), o] = dy[n, group's o, p], panels per (image, group): dyp[n * groups +
 * group][panel][p][NR]; A is read from the image as conv2d's core reads it (xp: x itself, or a
 * copy with its padding as zeros, [N, C, HP, WP]), here one offset per row (tap), the position
 * added as the sum runs. Work-item (tap block, panel, group), `steps` tap blocks each as in
 * conv2d's kernel. dw is [O, C/groups, KH, KW]: the output is stored transposed, each element
 * once through EPILOGUE(v, i, o) (a train step's update of the weight's state: the gradient is
 * then never stored). */
#if CORE_WGRAD
#define WG_DECL(r) COLS(DECL_ACC, r)                                                          \
    const uint CAT(tap, r) = min(m0 + r, Kc - 1);                                                \
    const ulong CAT(base, r) = (ulong)(CAT(tap, r) / KHW) * plane + CAT(tap, r) % KHW / KW * DH + \
                               CAT(tap, r) % KW * DW;
#define WG_STEP(r) STEP_ROW(r, xt[CAT(base, r)])
/* The block's rows spilled (row r's NR values at tr[r * NR]), then stored a column at a time:
 * a column's MR taps are adjacent in dw, where a row's NR channels are Kc apart (each element
 * through the same EPILOGUE either way: the same bits). */
#define WG_SPILL(r) { float *const t = tr + r * NR; COLS(SPILL_ACC, r) }

__kernel
void KSUFFIX(clrun_conv_wgrad_core)(__global const float *xp, __global const float *dyp,
                                    __global float *dw, __constant const int *g, const uint HP,
                                    const uint WP, const uint images,
                                    const uint steps EPILOGUE_PARAMS)
{
    const uint OW = g[G_OW], OH = g[G_OH], P = OH * OW;
    const uint panel = get_global_id(1), group = get_global_id(2), groups = g[G_GROUPS];
    const uint Cg = g[G_C] / groups, Og = g[G_O] / groups;
    const uint KW = g[G_KW], KHW = g[G_KH] * KW, Kc = Cg * KHW;
    const uint panels = (Og + NR - 1) / NR, n0 = panel * NR;
    const uint plane = HP * WP, DH = g[G_DH] * WP, DW = g[G_DW], SH = g[G_SH] * WP, SW = g[G_SW];
    for (uint step = 0; step < steps; step++) {
        const uint m0 = ((get_group_id(0) * steps + step) * get_local_size(0) + get_local_id(0)) * MR;
        if (m0 >= Kc)
            break;
        ROWS(WG_DECL)
        for (uint n = 0; n < images; n++) {
            __global const float *xz = xp + ((ulong)n * g[G_C] + group * Cg) * plane;
            __global const float *b = dyp + (((ulong)n * groups + group) * panels + panel) * P * NR;
            for (uint oh = 0; oh < OH; oh++) {
                __global const float *xr = xz + oh * SH;
                for (uint ow = 0; ow < OW; ow++, b += NR) {
                    __global const float *xt = xr + ow * SW;
                    LOAD_B(b)
                    ROWS(WG_STEP)
                }
            }
        }
        float tr[MR * NR];
        ROWS(WG_SPILL)
        const uint rows = min((uint)MR, Kc - m0);
        for (uint j = 0; j < NR && n0 + j < Og; j++) {
            const uint o = group * Og + n0 + j;
            for (uint r = 0; r < rows; r++) {
                const ulong at = (ulong)o * Kc + m0 + r;
                dw[at] = EPILOGUE(tr[r * NR + j], at, o);
            }
        }
    }
}
#endif /* CORE_WGRAD */

#undef ROWS
