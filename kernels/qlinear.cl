/* Integer products: matmul_integer and conv_integer over 8-bit operands (u8 or i8, read as
 * bytes and sign-extended by a flag) less their zero points, summed in 32 bits. Each difference
 * is in [-255, 255] and each product fits an int; the sum is kept in a uint so that it wraps
 * modulo 2^32 as onnxruntime's int32 accumulators do, without signed overflow. The types and
 * geometry are checked by lib/graph/infer_qlinear.c.
 *
 * flags: bit 0 the first operand is signed, bit 1 the second is; bits 2-3 the first operand's
 * zero point form, bits 4-5 the second's: 0 none, 1 one value, 2 one per row (a), column (b) or
 * output channel (w). An absent zero point's buffer is never read. */

/* Element i of an 8-bit tensor as an int, sign-extended when is_signed. */
#define QL_LOAD(p, i, is_signed) ((is_signed) ? (int)as_char((p)[i]) : (int)(p)[i])

/* The zero point of a row, column or channel `at` under form `form`. */
int ql_zero(__global const uchar *z, const int form, const uint at, const int is_signed)
{
    return form == 0 ? 0 : QL_LOAD(z, form == 2 ? at : 0, is_signed);
}

/* y [batch, M, N] = (a - a_zero) (b - b_zero) for each batch entry z, whose a and b start at
 * elements offsets[2z] and offsets[2z + 1] (broadcast batches repeat an offset). Work-groups of
 * T x T items (T = get_local_size(0) = get_local_size(1)) compute a T x T block of the output,
 * item (x, y) element (m0 + y, n0 + x), over tiles of T columns of a and T rows of b staged in
 * local memory (As, Bs: T * T ints each) less their zero points, 0 beyond the matrices' edges;
 * the sum runs k ascending. */
__kernel void clrun_matmul_integer(__global const uchar *a, __global const uchar *b,
                                   __global const uchar *a_zero, __global const uchar *b_zero,
                                   __global int *y, __global const ulong *offsets, const uint M,
                                   const uint N, const uint K, const int flags, __local int *As,
                                   __local int *Bs)
{
    const uint T = get_local_size(0);
    const uint n = get_global_id(0), m = get_global_id(1), z = get_global_id(2);
    const uint lx = get_local_id(0), ly = get_local_id(1);
    const int a_signed = flags & 1, b_signed = (flags >> 1) & 1;
    const ulong ao = offsets[2 * (ulong)z], bo = offsets[2 * (ulong)z + 1];
    const int zr = ql_zero(a_zero, (flags >> 2) & 3, min(m, M - 1), a_signed);
    const int zc = ql_zero(b_zero, (flags >> 4) & 3, min(n, N - 1), b_signed);
    uint acc = 0;
    for (uint k0 = 0; k0 < K; k0 += T) {
        const uint ka = k0 + lx, kb = k0 + ly;
        As[ly * T + lx] = m < M && ka < K ? QL_LOAD(a, ao + (ulong)m * K + ka, a_signed) - zr : 0;
        Bs[ly * T + lx] = n < N && kb < K ? QL_LOAD(b, bo + (ulong)kb * N + n, b_signed) - zc : 0;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint kk = 0; kk < T; kk++)
            acc += (uint)(As[ly * T + kk] * Bs[kk * T + lx]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (m < M && n < N)
        y[((ulong)z * M + m) * N + n] = (int)acc;
}

/* y [N, O, OH, OW] = the convolution of (x - x_zero) [N, C, H, W] with (w - w_zero) [O,
 * C/groups, KH, KW]; padding contributes nothing (ONNX pads with the zero point). Work-item
 * (p, o, n) computes output pixel p of channel o of image n; a work-group shares (o, n) and
 * stages w[o] less its zero point in local memory, `chunk` taps at a time (wl: chunk ints), which
 * every item then walks in order (c, kh, kw ascending). Within one image every index fits an int
 * (infer_conv.c checks). */
__kernel void clrun_conv_integer(__global const uchar *x, __global const uchar *w,
                                 __global const uchar *x_zero, __global const uchar *w_zero,
                                 __global int *y, const int C, const int H, const int W,
                                 const int O, const int KH, const int KW, const int OH,
                                 const int OW, const int sh, const int sw, const int ph,
                                 const int pw, const int dh, const int dw, const int groups,
                                 const int flags, __local int *wl, const int chunk)
{
    const int p = get_global_id(0), o = get_global_id(1), n = get_global_id(2);
    const int lid = get_local_id(0), lsz = get_local_size(0);
    const int x_signed = flags & 1, w_signed = (flags >> 1) & 1;
    const int cg = C / groups, g = o / (O / groups), taps = cg * KH * KW;
    const bool live = p < OH * OW;
    const int oh = live ? p / OW : 0, ow = live ? p % OW : 0;
    const int xz = ql_zero(x_zero, (flags >> 2) & 3, 0, x_signed);
    const int wz = ql_zero(w_zero, (flags >> 4) & 3, (uint)o, w_signed);
    x += ((ulong)n * C + (ulong)g * cg) * H * W;
    w += (ulong)o * taps;
    uint acc = 0;
    int c = 0, kh = 0, kw = 0;
    for (int r0 = 0; r0 < taps; r0 += chunk) {
        const int count = min(chunk, taps - r0);
        for (int i = lid; i < count; i += lsz)
            wl[i] = QL_LOAD(w, r0 + i, w_signed) - wz;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int i = 0; live && i < count; i++) {
            const int ih = oh * sh - ph + kh * dh, iw = ow * sw - pw + kw * dw;
            if (ih >= 0 && ih < H && iw >= 0 && iw < W)
                acc += (uint)((QL_LOAD(x, (c * H + ih) * W + iw, x_signed) - xz) * wl[i]);
            if (++kw == KW) {
                kw = 0;
                if (++kh == KH) {
                    kh = 0;
                    c++;
                }
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (live)
        y[((ulong)n * O + o) * OH * OW + p] = (int)acc;
}
