/* Index ops: gather, gather_elements, pad and trilu move elements (one version per element size:
 * u8, u16, u32, u64) and are exact; cumsum adds along an axis (f32, f64, i32 and i64, integers
 * wrapping); gather_grad adds f32 rows into the positions indices name; dropout keeps f32
 * elements by a hash of their position. One work-item per output element (per line for cumsum,
 * per column for gather_grad); global sizes are rounded up and every kernel checks its index.
 * (Each kernel is spelled out: the host finds kernels by their `__kernel void NAME(` lines.) */

/* gather: the output is [outer, count, inner] over data [outer, axis_dim, inner]: element
 * (o, j, k) is data (o, indices[j], k). A negative index counts from the end when `wrap` (ONNX
 * Gather). An index outside the axis gives 0; with `wrap` (ONNX Gather, where that is an error,
 * unlike the embedding form's padding rule) it also lowers bad[0] to its position j (at most
 * 0xfffffffe; it starts at 0xffffffff): the executor reads it after the run and fails the run,
 * naming the node and the first bad position. */
#define GATHER_BODY                                                                                \
    const size_t i = get_global_id(0);                                                             \
    if (i >= n)                                                                                    \
        return;                                                                                    \
    const ulong row = i / inner, k = i % inner, o = row / count, j = row % count;                  \
    long index = (long)indices[j];                                                                 \
    if (index < 0 && wrap)                                                                         \
        index += (long)axis_dim;                                                                   \
    if (index >= 0 && (ulong)index < axis_dim) {                                                   \
        out[i] = data[(o * axis_dim + (ulong)index) * inner + k];                                  \
    } else {                                                                                       \
        out[i] = 0;                                                                                \
        if (wrap)                                                                                  \
            atomic_min(bad, (uint)min(j, (ulong)0xfffffffe));                                      \
    }

#define GATHER_ARGS                                                                                \
    const ulong n, const ulong axis_dim, const ulong count, const ulong inner, const int wrap,      \
        volatile __global uint *bad

__kernel void clrun_gather_u8_i32(__global const uchar *data, __global const int *indices,
                                  __global uchar *out, GATHER_ARGS)
{
    GATHER_BODY
}

__kernel void clrun_gather_u16_i32(__global const ushort *data, __global const int *indices,
                                   __global ushort *out, GATHER_ARGS)
{
    GATHER_BODY
}

__kernel void clrun_gather_u32_i32(__global const uint *data, __global const int *indices,
                                   __global uint *out, GATHER_ARGS)
{
    GATHER_BODY
}

__kernel void clrun_gather_u64_i32(__global const ulong *data, __global const int *indices,
                                   __global ulong *out, GATHER_ARGS)
{
    GATHER_BODY
}

__kernel void clrun_gather_u8_i64(__global const uchar *data, __global const long *indices,
                                  __global uchar *out, GATHER_ARGS)
{
    GATHER_BODY
}

__kernel void clrun_gather_u16_i64(__global const ushort *data, __global const long *indices,
                                   __global ushort *out, GATHER_ARGS)
{
    GATHER_BODY
}

__kernel void clrun_gather_u32_i64(__global const uint *data, __global const long *indices,
                                   __global uint *out, GATHER_ARGS)
{
    GATHER_BODY
}

__kernel void clrun_gather_u64_i64(__global const ulong *data, __global const long *indices,
                                   __global ulong *out, GATHER_ARGS)
{
    GATHER_BODY
}

/* gather_grad: out [outer, size, inner] is zeroed (clrun_zero_f32, one element per work-item),
 * then work-item c = (o, k) adds dy[o, j, k] into out[o, indices[j], k] for j = 0, 1, ... in
 * order: a negative index counts from the end when `wrap` (ONNX Gather's form), and one outside
 * [0, size) adds nothing. Each column of out belongs to one work-item, so there are no atomics
 * and every run makes the same sums in the same order. */
#define GATHER_GRAD_BODY                                                                           \
    const size_t c = get_global_id(0);                                                             \
    if (c >= columns)                                                                              \
        return;                                                                                    \
    const ulong o = c / inner, k = c % inner;                                                      \
    __global float *col = out + o * size * inner + k;                                              \
    __global const float *src = dy + o * count * inner + k;                                        \
    for (ulong j = 0; j < count; j++) {                                                            \
        long index = (long)indices[j];                                                             \
        if (index < 0 && wrap)                                                                     \
            index += (long)size;                                                                   \
        if (index >= 0 && (ulong)index < size)                                                     \
            col[(ulong)index * inner] += src[j * inner];                                           \
    }

#define GATHER_GRAD_ARGS                                                                           \
    const ulong columns, const ulong size, const ulong count, const ulong inner, const int wrap

__kernel void clrun_gather_grad_i32(__global const int *indices, __global const float *dy,
                                    __global float *out, GATHER_GRAD_ARGS)
{
    GATHER_GRAD_BODY
}

__kernel void clrun_gather_grad_i64(__global const long *indices, __global const float *dy,
                                    __global float *out, GATHER_GRAD_ARGS)
{
    GATHER_GRAD_BODY
}

__kernel void clrun_zero_f32(__global float *out, const ulong n)
{
    const size_t i = get_global_id(0);
    if (i < n)
        out[i] = 0.0f;
}

/* dropout: y[i] = x[i] * scale where the hash of i keeps it, else 0. The hash is splitmix64 of
 * seed + 0x9E3779B97F4A7C15 * (stream + 1) + i (ulong arithmetic, wrapping), kept when its high
 * 32 bits are >= threshold (floor(ratio * 2^32)): lib/graph/dropout_mask.c computes the same on
 * the host, and docs/ops.md says it all. */
ulong splitmix64(ulong z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9UL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBUL;
    return z ^ (z >> 31);
}

__kernel void clrun_dropout(__global const float *x, __global const long *seed, __global float *y,
                            const ulong n, const ulong stream, const uint threshold,
                            const float scale)
{
    const size_t i = get_global_id(0);
    if (i >= n)
        return;
    const ulong h = splitmix64((ulong)seed[0] + 0x9E3779B97F4A7C15UL * (stream + 1) + (ulong)i);
    y[i] = (uint)(h >> 32) >= threshold ? x[i] * scale : 0.0f;
}

/* gather_elements: output element i, at coordinates c of the indices' dims, is data at c with
 * the axis coordinate replaced by indices[i] (negatives count from the end; outside the axis:
 * 0, and bad[0] lowered to i, as gather). meta = [rank, axis, index dims[rank], data strides[rank], data's axis length]. */
#define GATHER_ELEMENTS_BODY                                                                       \
    const size_t i = get_global_id(0);                                                             \
    if (i >= n)                                                                                    \
        return;                                                                                    \
    const uint rank = (uint)meta[0], axis = (uint)meta[1];                                         \
    const long axis_dim = (long)meta[2 + 2 * rank];                                                \
    ulong rem = i, offset = 0;                                                                     \
    for (uint d = rank; d-- > 0;) {                                                                \
        const ulong dim = meta[2 + d];                                                             \
        if (d != axis)                                                                             \
            offset += rem % dim * meta[2 + rank + d];                                              \
        rem /= dim;                                                                                \
    }                                                                                              \
    long index = (long)indices[i];                                                                 \
    if (index < 0)                                                                                 \
        index += axis_dim;                                                                         \
    if (index >= 0 && index < axis_dim) {                                                          \
        out[i] = data[offset + (ulong)index * meta[2 + rank + axis]];                              \
    } else {                                                                                       \
        out[i] = 0;                                                                                \
        atomic_min(bad, (uint)min((ulong)i, (ulong)0xfffffffe));                                   \
    }

#define GATHER_ELEMENTS_ARGS const ulong n, __global const ulong *meta, volatile __global uint *bad

__kernel void clrun_gather_elements_u8_i32(__global const uchar *data, __global const int *indices,
                                           __global uchar *out, GATHER_ELEMENTS_ARGS)
{
    GATHER_ELEMENTS_BODY
}

__kernel void clrun_gather_elements_u16_i32(__global const ushort *data,
                                            __global const int *indices, __global ushort *out,
                                            GATHER_ELEMENTS_ARGS)
{
    GATHER_ELEMENTS_BODY
}

__kernel void clrun_gather_elements_u32_i32(__global const uint *data, __global const int *indices,
                                            __global uint *out, GATHER_ELEMENTS_ARGS)
{
    GATHER_ELEMENTS_BODY
}

__kernel void clrun_gather_elements_u64_i32(__global const ulong *data,
                                            __global const int *indices, __global ulong *out,
                                            GATHER_ELEMENTS_ARGS)
{
    GATHER_ELEMENTS_BODY
}

__kernel void clrun_gather_elements_u8_i64(__global const uchar *data,
                                           __global const long *indices, __global uchar *out,
                                           GATHER_ELEMENTS_ARGS)
{
    GATHER_ELEMENTS_BODY
}

__kernel void clrun_gather_elements_u16_i64(__global const ushort *data,
                                            __global const long *indices, __global ushort *out,
                                            GATHER_ELEMENTS_ARGS)
{
    GATHER_ELEMENTS_BODY
}

__kernel void clrun_gather_elements_u32_i64(__global const uint *data,
                                            __global const long *indices, __global uint *out,
                                            GATHER_ELEMENTS_ARGS)
{
    GATHER_ELEMENTS_BODY
}

__kernel void clrun_gather_elements_u64_i64(__global const ulong *data,
                                            __global const long *indices, __global ulong *out,
                                            GATHER_ELEMENTS_ARGS)
{
    GATHER_ELEMENTS_BODY
}

/* pad: the input index that output index c of an axis (n input elements, `begin` of padding
 * before them) reads, or -1 for padding. Modes: 0 constant, 1 reflect (mirrored without the edge
 * element, periodic for pads wider than the axis, as numpy), 2 edge. Negative pads crop. */
inline long pad_source(const long c, const long begin, const long n, const int mode)
{
    const long i = c - begin;
    if (i >= 0 && i < n)
        return i;
    if (mode == 2)
        return i < 0 ? 0 : n - 1;
    if (mode != 1)
        return -1;
    if (n == 1)
        return 0;
    const long period = 2 * (n - 1);
    long m = i % period;
    if (m < 0)
        m += period;
    return m < n ? m : period - m;
}

/* meta = [rank, out dims[rank], in dims[rank], begins[rank], in strides[rank]]; `value` holds
 * the constant's bits in its low bytes. */
#define PAD_BODY(T)                                                                                \
    const size_t i = get_global_id(0);                                                             \
    if (i >= n)                                                                                    \
        return;                                                                                    \
    const uint rank = (uint)meta[0];                                                               \
    ulong rem = i;                                                                                 \
    long offset = 0;                                                                               \
    bool inside = true;                                                                            \
    for (uint d = rank; d-- > 0;) {                                                                \
        const long dim = meta[1 + d];                                                              \
        const long src = pad_source((long)(rem % (ulong)dim), meta[1 + 2 * rank + d],              \
                                    meta[1 + rank + d], mode);                                     \
        rem /= (ulong)dim;                                                                         \
        inside = inside && src >= 0;                                                               \
        offset += src * meta[1 + 3 * rank + d];                                                    \
    }                                                                                              \
    y[i] = inside ? x[offset] : (T)value;

#define PAD_ARGS const ulong n, __global const long *meta, const int mode, const ulong value

__kernel void clrun_pad_u8(__global const uchar *x, __global uchar *y, PAD_ARGS)
{
    PAD_BODY(uchar)
}

__kernel void clrun_pad_u16(__global const ushort *x, __global ushort *y, PAD_ARGS)
{
    PAD_BODY(ushort)
}

__kernel void clrun_pad_u32(__global const uint *x, __global uint *y, PAD_ARGS)
{
    PAD_BODY(uint)
}

__kernel void clrun_pad_u64(__global const ulong *x, __global ulong *y, PAD_ARGS)
{
    PAD_BODY(ulong)
}

/* trilu: keeps element (r, j) of each [rows, cols] matrix where j - r >= k (upper) or
 * j - r <= k (lower), zeroes the rest. Reads only the element it writes, so it may run in
 * place. */
#define TRILU_BODY                                                                                 \
    const size_t i = get_global_id(0);                                                             \
    if (i >= n)                                                                                    \
        return;                                                                                    \
    const long j = (long)(i % cols), r = (long)(i / cols % rows);                                  \
    const bool keep = upper ? j - r >= k : j - r <= k;                                             \
    y[i] = keep ? x[i] : 0;

#define TRILU_ARGS const ulong n, const ulong rows, const ulong cols, const long k, const int upper

__kernel void clrun_trilu_u8(__global const uchar *x, __global uchar *y, TRILU_ARGS)
{
    TRILU_BODY
}

__kernel void clrun_trilu_u16(__global const ushort *x, __global ushort *y, TRILU_ARGS)
{
    TRILU_BODY
}

__kernel void clrun_trilu_u32(__global const uint *x, __global uint *y, TRILU_ARGS)
{
    TRILU_BODY
}

__kernel void clrun_trilu_u64(__global const ulong *x, __global ulong *y, TRILU_ARGS)
{
    TRILU_BODY
}

/* cumsum over x [outer, len, inner] along the middle axis: work-item l runs along line
 * (l / inner, l % inner), from the end when `reverse`, writing each element's sum of those before
 * it (exclusive) or up to it. Each element is read before it is written and no work-item touches
 * another's line, so it may run in place. Integers add as unsigned: they wrap. */
#define CUMSUM_BODY(ACC)                                                                           \
    const size_t l = get_global_id(0);                                                             \
    if (l >= lines)                                                                                \
        return;                                                                                    \
    const ulong base = l / inner * len * inner + l % inner;                                        \
    ACC acc = 0;                                                                                   \
    for (ulong t = 0; t < len; t++) {                                                              \
        const ulong at = base + (reverse ? len - 1 - t : t) * inner;                               \
        const ACC v = x[at];                                                                       \
        if (exclusive) {                                                                           \
            y[at] = acc;                                                                           \
            acc += v;                                                                              \
        } else {                                                                                   \
            acc += v;                                                                              \
            y[at] = acc;                                                                           \
        }                                                                                          \
    }

#define CUMSUM_ARGS                                                                                \
    const ulong lines, const ulong len, const ulong inner, const int exclusive, const int reverse

__kernel void clrun_cumsum_f32(__global const float *x, __global float *y, CUMSUM_ARGS)
{
    CUMSUM_BODY(float)
}

__kernel void clrun_cumsum_i32(__global const uint *x, __global uint *y, CUMSUM_ARGS)
{
    CUMSUM_BODY(uint)
}

__kernel void clrun_cumsum_i64(__global const ulong *x, __global ulong *y, CUMSUM_ARGS)
{
    CUMSUM_BODY(ulong)
}

/* Only where the device has doubles: the host asks for this kernel only then. */
#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
__kernel void clrun_cumsum_f64(__global const double *x, __global double *y, CUMSUM_ARGS)
{
    CUMSUM_BODY(double)
}
#endif
