/* resize: every output coordinate of every axis has taps (input offset, weight) that the host
 * computed from the coordinate transformation and the mode (lib/graph/infer_resize.c), so the
 * kernels only add up products and every mode shares them. One work-item per output element.
 *
 * table = [rank, out dims[rank], taps[rank], start[rank], entries...]: tap j of coordinate c of
 * axis d is the pair at start[d] + 2 * (c * taps[d] + j): the input offset it contributes
 * (index times the axis' stride) and the bits of its float weight. */
#define MAX_RANK 8 /* CLRUN_MAX_DIMS (include/clrun/graph.h) */

/* nearest: one tap per axis, any element size, exact. */
#define NEAREST_BODY                                                                               \
    const size_t i = get_global_id(0);                                                             \
    if (i >= n)                                                                                    \
        return;                                                                                    \
    const uint rank = (uint)table[0];                                                              \
    ulong rem = i, offset = 0;                                                                     \
    for (uint d = rank; d-- > 0;) {                                                                \
        const ulong dim = table[1 + d];                                                            \
        offset += table[table[1 + 2 * rank + d] + 2 * (rem % dim)];                                \
        rem /= dim;                                                                                \
    }                                                                                              \
    y[i] = x[offset];

__kernel void clrun_resize_nearest_u8(__global const uchar *x, __global uchar *y, const ulong n,
                                      __global const ulong *table)
{
    NEAREST_BODY
}

__kernel void clrun_resize_nearest_u16(__global const ushort *x, __global ushort *y,
                                       const ulong n, __global const ulong *table)
{
    NEAREST_BODY
}

__kernel void clrun_resize_nearest_u32(__global const uint *x, __global uint *y, const ulong n,
                                       __global const ulong *table)
{
    NEAREST_BODY
}

__kernel void clrun_resize_nearest_u64(__global const ulong *x, __global ulong *y, const ulong n,
                                       __global const ulong *table)
{
    NEAREST_BODY
}

/* linear and cubic (f32): the sum over every combination of the axes' taps of the product of
 * their weights times the input element they pick, combinations in a fixed order: the last
 * axis' tap varies fastest, each weight the product of the axes' from the last to the first.
 * The combinations are walked as an odometer, and i split into coordinates in 32 bits where
 * n allows (a 64-bit division costs tens of cycles on a CPU). */
__kernel void clrun_resize_interp_f32(__global const float *x, __global float *y, const ulong n,
                                      __global const ulong *table)
{
    const size_t i = get_global_id(0);
    if (i >= n)
        return;
    const uint rank = (uint)table[0];
    ulong entry[MAX_RANK];
    uint taps[MAX_RANK], tap[MAX_RANK];
    uint combinations = 1;
    if (n <= 0xffffffffUL) {
        uint rem = (uint)i;
        for (uint d = rank; d-- > 0;) {
            const uint dim = (uint)table[1 + d];
            taps[d] = (uint)table[1 + rank + d];
            entry[d] = table[1 + 2 * rank + d] + 2 * (ulong)(rem % dim) * taps[d];
            rem /= dim;
        }
    } else {
        ulong rem = i;
        for (uint d = rank; d-- > 0;) {
            const ulong dim = table[1 + d];
            taps[d] = (uint)table[1 + rank + d];
            entry[d] = table[1 + 2 * rank + d] + 2 * (rem % dim) * taps[d];
            rem /= dim;
        }
    }
    for (uint d = 0; d < rank; d++) {
        combinations *= taps[d];
        tap[d] = 0;
    }
    float acc = 0;
    for (uint p = 0; p < combinations; p++) {
        ulong offset = 0;
        float weight = 1;
        for (uint d = rank; d-- > 0;) {
            const ulong e = entry[d] + 2 * tap[d];
            offset += table[e];
            weight *= as_float((uint)table[e + 1]);
        }
        acc += weight * x[offset];
        for (uint d = rank; d-- > 0;) { /* the next combination */
            if (++tap[d] < taps[d])
                break;
            tap[d] = 0;
        }
    }
    y[i] = acc;
}

/* clrun_resize_interp_f32 where every axis but the last two has one tap (an image resized in H
 * and W): work-item (row block, plane) computes rows [b * R, b * R + R) of one output plane,
 * R = ceil(OH / global size 0), every column, with the same combinations, products and sums in
 * the same order as clrun_resize_interp_f32 (the last axis' tap fastest; each weight the last
 * axis' times the next, then the leading axes' one weight each, last to first, skipped where
 * all of them are 1, which changes no bits): the same bits, without decoding each output. */
__kernel void clrun_resize_planes_f32(__global const float *x, __global float *y, const ulong n,
                                      __global const ulong *table)
{
    const uint rank = (uint)table[0];
    const uint hd = rank - 2, wd = rank - 1;
    const ulong OH = table[1 + hd], OW = table[1 + wd];
    const uint th = (uint)table[1 + rank + hd], tw = (uint)table[1 + rank + wd];
    const ulong R = (OH + get_global_size(0) - 1) / get_global_size(0);
    const ulong oh0 = get_global_id(0) * R, oh1 = min(OH, oh0 + R);
    const ulong plane = get_global_id(1);
    /* the leading axes' offset and weights, from the plane's coordinates */
    float lead[MAX_RANK];
    ulong base = 0, rem = plane;
    bool ones = true;
    for (uint d = hd; d-- > 0;) {
        const ulong dim = table[1 + d], e = table[1 + 2 * rank + d] + 2 * (rem % dim);
        rem /= dim;
        base += table[e];
        lead[d] = as_float((uint)table[e + 1]);
        ones = ones && lead[d] == 1.0f;
    }
    __global const ulong *hrow = table + table[1 + 2 * rank + hd];
    __global const ulong *wcol = table + table[1 + 2 * rank + wd];
    __global float *yp = y + plane * OH * OW;
    for (ulong oh = oh0; oh < oh1; oh++) {
        __global const ulong *ht = hrow + 2 * oh * th;
        for (ulong ow = 0; ow < OW; ow++) {
            __global const ulong *wt = wcol + 2 * ow * tw;
            float acc = 0;
            for (uint a = 0; a < th; a++)
                for (uint b = 0; b < tw; b++) {
                    float weight = 1;
                    weight *= as_float((uint)wt[2 * b + 1]);
                    weight *= as_float((uint)ht[2 * a + 1]);
                    for (uint d = hd; !ones && d-- > 0;)
                        weight *= lead[d];
                    acc += weight * x[base + ht[2 * a] + wt[2 * b]];
                }
            yp[oh * OW + ow] = acc;
        }
    }
}

/* One tap of clrun_resize_planes_f32's sum as it writes it: the weight is 1 times the last
 * axis' weight times the row's, then the product added in one statement, as there (which
 * the compiler contracts alike in both). */
#define LINEAR_TAP(w_col, w_row, value)                                                            \
    do {                                                                                           \
        float weight = 1;                                                                          \
        weight *= (w_col);                                                                         \
        weight *= (w_row);                                                                         \
        acc += weight * (value);                                                                   \
    } while (0)

/* clrun_resize_planes_f32 where the last two axes have two taps each and every leading axis'
 * weight is 1 (bilinear resizes of images; the host checks): the same products and sums in the
 * same order, unrolled, so that a row's loop is straight code with no loops over the taps and no
 * tap counts to read (the general kernel took 2.1 ms for an ASPP head's 21 x 32 x 32 -> 21 x 256
 * x 256, this one 0.77; the compiler keeps it scalar: the taps are gathers). */
__kernel void clrun_resize_planes_linear_f32(__global const float *x, __global float *y, const ulong n,
                                             __global const ulong *table)
{
    const uint rank = (uint)table[0];
    const uint hd = rank - 2, wd = rank - 1;
    const ulong OH = table[1 + hd], OW = table[1 + wd];
    const ulong R = (OH + get_global_size(0) - 1) / get_global_size(0);
    const ulong oh0 = get_global_id(0) * R, oh1 = min(OH, oh0 + R);
    const ulong plane = get_global_id(1);
    ulong base = 0, rem = plane;
    for (uint d = hd; d-- > 0;) {
        const ulong dim = table[1 + d];
        base += table[table[1 + 2 * rank + d] + 2 * (rem % dim)];
        rem /= dim;
    }
    __global const ulong *hrow = table + table[1 + 2 * rank + hd];
    __global const ulong *wcol = table + table[1 + 2 * rank + wd];
    __global float *yp = y + plane * OH * OW;
    for (ulong oh = oh0; oh < oh1; oh++) {
        __global const ulong *ht = hrow + 4 * oh;
        __global const float *r0 = x + base + ht[0], *r1 = x + base + ht[2];
        const float wh0 = as_float((uint)ht[1]), wh1 = as_float((uint)ht[3]);
        __global float *yr = yp + oh * OW;
        for (ulong ow = 0; ow < OW; ow++) {
            __global const ulong *wt = wcol + 4 * ow;
            const ulong c0 = wt[0], c1 = wt[2];
            const float ww0 = as_float((uint)wt[1]), ww1 = as_float((uint)wt[3]);
            float acc = 0;
            LINEAR_TAP(ww0, wh0, r0[c0]);
            LINEAR_TAP(ww1, wh0, r0[c1]);
            LINEAR_TAP(ww0, wh1, r1[c0]);
            LINEAR_TAP(ww1, wh1, r1[c1]);
            yr[ow] = acc;
        }
    }
}
