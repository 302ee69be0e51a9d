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
 * their weights times the input element they pick, combinations in a fixed order. */
__kernel void clrun_resize_interp_f32(__global const float *x, __global float *y, const ulong n,
                                      __global const ulong *table)
{
    const size_t i = get_global_id(0);
    if (i >= n)
        return;
    const uint rank = (uint)table[0];
    ulong entry[MAX_RANK];
    uint combinations = 1;
    ulong rem = i;
    for (uint d = rank; d-- > 0;) {
        const ulong dim = table[1 + d], taps = table[1 + rank + d];
        entry[d] = table[1 + 2 * rank + d] + 2 * (rem % dim) * taps;
        rem /= dim;
        combinations *= (uint)taps;
    }
    float acc = 0;
    for (uint p = 0; p < combinations; p++) {
        uint q = p;
        ulong offset = 0;
        float weight = 1;
        for (uint d = rank; d-- > 0;) {
            const uint taps = (uint)table[1 + rank + d];
            const ulong e = entry[d] + 2 * (q % taps);
            q /= taps;
            offset += table[e];
            weight *= as_float((uint)table[e + 1]);
        }
        acc += weight * x[offset];
    }
    y[i] = acc;
}
