/* Matrix products, tiled in local memory and blocked in registers.
 *
 * A work-group of 16 x 16 work-items computes a 64 x 64 tile of the output; each work-item
 * holds a 4 x 4 block of it in registers: rows ty + 16 i and columns tx + 16 j, so that
 * neighbouring work-items touch neighbouring columns (coalesced on GPUs, one vector across
 * work-items on POCL). K advances 16 at a time through two local tiles, As[k][m] and Bs[k][n];
 * loads past the edges of the matrices read zeros, stores past them are skipped, so any M, N,
 * K work. Each output is one fma chain, k ascending: the same bits on every run, and the same as
 * matmul_core.cl's.
 *
 * clrun_matmul: out[z] = alpha * A[z] B[z] (+ bias[n]) where A and B are addressed through
 * strides, which covers row-major and transposed inputs, and z picks a batch whose A and B
 * offsets (in elements) come from `batch` (pairs), so any broadcasting of batch dimensions works.
 * clrun_conv2d_gemm: a convolution as the same product (implicit GEMM): A is one group's weights
 * [O/groups, C/groups*KH*KW], B the image patches gathered on the fly, output rows are channels.
 * CPUs take the register-blocked core of matmul_core.cl instead.
 * clrun_matmul_naive: one output per work-item, for devices whose work-groups are too small for
 * the tiled kernel. */

#pragma OPENCL FP_CONTRACT OFF

/* The epilogue (lib/ops/ops.h): the host defines CLRUN_EPILOGUE and EPILOGUE_PARAMS before
 * this file when a node has one. */
#ifdef CLRUN_EPILOGUE
#define EPILOGUE(v, i, c) CLRUN_EPILOGUE(v, i, c)
#else
#define EPILOGUE_PARAMS
#define EPILOGUE(v, i, c) (v)
#endif

/* The value stored for accumulator acc of column (or channel) c at index i: the same steps, in
 * the same order, as matmul_core.cl. */
float mm_finish(const float acc, const float alpha, const int has_bias, __global const float *bias,
                const uint c)
{
    const float v = alpha * acc;
    return has_bias ? v + bias[c] : v;
}

#define TS 64  /* output tile: rows and columns per work-group */
#define TK 16  /* K per step */
#define RTS 16 /* work-items per dimension: TS / 4 */
#define LDS (TS + 1) /* padded row of a local tile: consecutive k fall in different banks */

/* acc += As[k] x Bs[k] over the TK rows of the local tiles. */
void mm_accumulate(__local const float *As, __local const float *Bs, const int tx, const int ty,
                   float acc[4][4])
{
    for (int k = 0; k < TK; k++) {
        float a[4], b[4];
        for (int i = 0; i < 4; i++)
            a[i] = As[k * LDS + ty + RTS * i];
        for (int j = 0; j < 4; j++)
            b[j] = Bs[k * LDS + tx + RTS * j];
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++)
                acc[i][j] = fma(a[i], b[j], acc[i][j]);
    }
}

/* Loads the TK x TS tile of a strided matrix X (element (r, k) at x[r * rs + k * ks], rows < R,
 * k < K) into T[k][r], starting at row r0 and column k0. Work-items walk whichever index is
 * contiguous in memory, so global reads are coalesced in either orientation. */
void mm_load(__global const float *x, const ulong rs, const ulong ks, const uint R, const uint K,
             const uint r0, const uint k0, const int lid, __local float *T)
{
    for (int p = 0; p < (TS * TK) / (RTS * RTS); p++) {
        const int e = lid + p * RTS * RTS;
        int r, k;
        if (ks == 1) {
            k = e % TK;
            r = e / TK;
        } else {
            r = e % TS;
            k = e / TS;
        }
        const uint gr = r0 + r, gk = k0 + k;
        T[k * LDS + r] = gr < R && gk < K ? x[gr * rs + gk * ks] : 0.0f;
    }
}

__attribute__((reqd_work_group_size(16, 16, 1)))
__kernel void clrun_matmul(__global const float *a, __global const float *b,
                           __global const float *bias, __global float *out,
                           __global const ulong *batch, const uint M, const uint N, const uint K,
                           const ulong a_ms, const ulong a_ks, const ulong b_ks, const ulong b_ns,
                           const int has_bias, const float alpha EPILOGUE_PARAMS)
{
    __local float As[TK * LDS];
    __local float Bs[TK * LDS];
    const int tx = get_local_id(0), ty = get_local_id(1), lid = ty * RTS + tx;
    const uint n0 = get_group_id(0) * TS, m0 = get_group_id(1) * TS;
    const size_t z = get_global_id(2);
    __global const float *az = a + batch[2 * z];
    __global const float *bz = b + batch[2 * z + 1];

    float acc[4][4];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            acc[i][j] = 0.0f;
    for (uint k0 = 0; k0 < K; k0 += TK) {
        mm_load(az, a_ms, a_ks, M, K, m0, k0, lid, As);
        mm_load(bz, b_ns, b_ks, N, K, n0, k0, lid, Bs);
        barrier(CLK_LOCAL_MEM_FENCE);
        mm_accumulate(As, Bs, tx, ty, acc);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int i = 0; i < 4; i++) {
        const uint m = m0 + ty + RTS * i;
        for (int j = 0; j < 4; j++) {
            const uint n = n0 + tx + RTS * j;
            const ulong at = (ulong)z * M * N + (ulong)m * N + n;
            if (m < M && n < N)
                out[at] = EPILOGUE(mm_finish(acc[i][j], alpha, has_bias, bias, n), at, n);
        }
    }
}

__kernel void clrun_matmul_naive(__global const float *a, __global const float *b,
                                 __global const float *bias, __global float *out,
                                 __global const ulong *batch, const uint M, const uint N,
                                 const uint K, const ulong a_ms, const ulong a_ks,
                                 const ulong b_ks, const ulong b_ns, const int has_bias,
                                 const float alpha EPILOGUE_PARAMS)
{
    const uint n = get_global_id(0), m = get_global_id(1);
    const size_t z = get_global_id(2);
    if (m >= M || n >= N)
        return;
    __global const float *az = a + batch[2 * z] + m * a_ms;
    __global const float *bz = b + batch[2 * z + 1] + n * b_ns;
    float acc = 0.0f;
    for (uint k = 0; k < K; k++)
        acc = fma(az[k * a_ks], bz[k * b_ks], acc);
    const ulong at = (ulong)z * M * N + (ulong)m * N + n;
    out[at] = EPILOGUE(mm_finish(acc, alpha, has_bias, bias, n), at, n);
}

/* The shape of a convolution: input [N, C, H, W], weights [O, C/groups, KH, KW], output
 * [N, O, OH, OW]. geometry = {C, H, W, O, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw, groups}, as in
 * conv.cl. The host's indices are CLRUN__CONV_GEOMETRY in lib/ops_internal.h; tests/test_ops.c
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

/* Loads the TK x TS tile of the patch matrix (k = (c, kh, kw) of one group, p = (oh, ow)) into
 * T[k][p]: padding reads as zero. x points at the group's first channel of one image. */
void conv_load_patches(__global const float *x, __constant const int *g, const uint Kc,
                       const uint P, const uint k0, const uint p0, const int lid, __local float *T)
{
    const int kk = g[G_KH] * g[G_KW];
    for (int q = 0; q < (TS * TK) / (RTS * RTS); q++) {
        const int e = lid + q * RTS * RTS;
        const int p = e % TS, k = e / TS;
        const uint gp = p0 + p, gk = k0 + k;
        float v = 0.0f;
        if (gp < P && gk < Kc) {
            const int c = gk / kk, r = gk % kk;
            const int oh = gp / g[G_OW], ow = gp % g[G_OW];
            const int ih = oh * g[G_SH] - g[G_PH] + (r / g[G_KW]) * g[G_DH];
            const int iw = ow * g[G_SW] - g[G_PW] + (r % g[G_KW]) * g[G_DW];
            if (ih >= 0 && ih < g[G_H] && iw >= 0 && iw < g[G_W])
                v = x[((ulong)c * g[G_H] + ih) * g[G_W] + iw];
        }
        T[k * LDS + p] = v;
    }
}

/* Work-group (pt, mt, n * groups + group): output channels mt*64.. of that group, positions
 * pt*64.., of image n. */
__attribute__((reqd_work_group_size(16, 16, 1)))
__kernel void clrun_conv2d_gemm(__global const float *x, __global const float *w,
                                __global const float *bias, __global float *out,
                                __constant const int *g, const int has_bias EPILOGUE_PARAMS)
{
    __local float As[TK * LDS];
    __local float Bs[TK * LDS];
    const int tx = get_local_id(0), ty = get_local_id(1), lid = ty * RTS + tx;
    const uint p0 = get_group_id(0) * TS, m0 = get_group_id(1) * TS;
    const uint groups = g[G_GROUPS], z = get_global_id(2);
    const uint image = z / groups, group = z % groups;
    const uint Og = g[G_O] / groups, Cg = g[G_C] / groups;
    const uint Kc = Cg * g[G_KH] * g[G_KW], P = g[G_OH] * g[G_OW];
    __global const float *xz = x + ((ulong)image * g[G_C] + group * Cg) * g[G_H] * g[G_W];
    __global const float *wz = w + (ulong)group * Og * Kc;

    float acc[4][4];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            acc[i][j] = 0.0f;
    for (uint k0 = 0; k0 < Kc; k0 += TK) {
        mm_load(wz, Kc, 1, Og, Kc, m0, k0, lid, As);
        conv_load_patches(xz, g, Kc, P, k0, p0, lid, Bs);
        barrier(CLK_LOCAL_MEM_FENCE);
        mm_accumulate(As, Bs, tx, ty, acc);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int i = 0; i < 4; i++) {
        const uint m = m0 + ty + RTS * i;
        const uint o = group * Og + m;
        for (int j = 0; j < 4; j++) {
            const uint p = p0 + tx + RTS * j;
            const ulong at = ((ulong)image * g[G_O] + o) * P + p;
            if (m < Og && p < P)
                out[at] = EPILOGUE(has_bias ? acc[i][j] + bias[o] : acc[i][j], at, o);
        }
    }
}
