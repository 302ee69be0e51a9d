/* Layout ops: they move elements without looking at them, so their results are exact. Every
 * kernel comes in one version per element size: u8 (bool), u16 (f16), u32 (f32, i32) and u64
 * (i64, f64). Global sizes are rounded up to the work-group size; every kernel checks its
 * indices. (Each kernel is spelled out: the host finds kernels by their `__kernel void NAME(`
 * lines, so a macro may write a body but not a declaration.) */

/* strided: output element i sits at coordinates (c_0 .. c_{rank-1}) of the view's dims and is
 * input element base + sum c_d * strides[d] (strides may be 0 or negative). transpose, slice,
 * split, expand, tile, depth_to_space, space_to_depth and a reshape that copies are all this.
 * meta = [rank, dims[rank], strides[rank]], with dims the host could merge already merged. */
#define STRIDED_BODY                                                                               \
    const size_t i = get_global_id(0);                                                             \
    if (i >= n)                                                                                    \
        return;                                                                                    \
    const uint rank = (uint)meta[0];                                                               \
    ulong rem = i;                                                                                 \
    long offset = base;                                                                            \
    for (uint d = rank; d-- > 0;) {                                                                \
        const ulong dim = (ulong)meta[1 + d];                                                      \
        offset += (long)(rem % dim) * meta[1 + rank + d];                                          \
        rem /= dim;                                                                                \
    }                                                                                              \
    y[i] = x[offset];

__kernel void clrun_strided_u8(__global const uchar *x, __global uchar *y, const ulong n,
                               __global const long *meta, const long base)
{
    STRIDED_BODY
}

__kernel void clrun_strided_u16(__global const ushort *x, __global ushort *y, const ulong n,
                                __global const long *meta, const long base)
{
    STRIDED_BODY
}

__kernel void clrun_strided_u32(__global const uint *x, __global uint *y, const ulong n,
                                __global const long *meta, const long base)
{
    STRIDED_BODY
}

__kernel void clrun_strided_u64(__global const ulong *x, __global ulong *y, const ulong n,
                                __global const long *meta, const long base)
{
    STRIDED_BODY
}

/* Copies `rows` runs of `length` elements: run o goes from src[o * src_pitch + src_offset] to
 * dst[o * dst_pitch + dst_offset]. Concat (one launch per input) is this, and so is every
 * strided view that is whole rows of its input (most slices and splits), without the divisions.
 * Work-item (r, o) copies element r of run o. */
#define COPY_ROWS_BODY                                                                             \
    const size_t r = get_global_id(0), o = get_global_id(1);                                       \
    if (r < length && o < rows)                                                                    \
        dst[o * dst_pitch + dst_offset + r] = src[o * src_pitch + src_offset + r];

__kernel void clrun_copy_rows_u8(__global const uchar *src, __global uchar *dst,
                                 const ulong length, const ulong rows, const ulong src_pitch,
                                 const ulong src_offset, const ulong dst_pitch,
                                 const ulong dst_offset)
{
    COPY_ROWS_BODY
}

__kernel void clrun_copy_rows_u16(__global const ushort *src, __global ushort *dst,
                                  const ulong length, const ulong rows, const ulong src_pitch,
                                  const ulong src_offset, const ulong dst_pitch,
                                  const ulong dst_offset)
{
    COPY_ROWS_BODY
}

__kernel void clrun_copy_rows_u32(__global const uint *src, __global uint *dst,
                                  const ulong length, const ulong rows, const ulong src_pitch,
                                  const ulong src_offset, const ulong dst_pitch,
                                  const ulong dst_offset)
{
    COPY_ROWS_BODY
}

__kernel void clrun_copy_rows_u64(__global const ulong *src, __global ulong *dst,
                                  const ulong length, const ulong rows, const ulong src_pitch,
                                  const ulong src_offset, const ulong dst_pitch,
                                  const ulong dst_offset)
{
    COPY_ROWS_BODY
}

/* Copies a view of three dims whose last is contiguous in the input (a transpose that keeps
 * the innermost axis, as splitting or merging attention heads does; a slice of a 3-D tensor):
 * dst is [outer, middle, length], dst[(o * middle + m) * length + r] = src[base + o * outer_stride
 * + m * middle_stride + r]. Work-item (r, m, o): one element each, no division, and work-items
 * next to each other along r read and write neighbouring elements. */
#define COPY_RUNS_BODY                                                                             \
    const size_t r = get_global_id(0), m = get_global_id(1), o = get_global_id(2);                 \
    if (r < length)                                                                                \
        dst[(o * get_global_size(1) + m) * length + r] =                                           \
            src[base + (long)o * outer_stride + (long)m * middle_stride + (long)r];

__kernel void clrun_copy_runs_u8(__global const uchar *src, __global uchar *dst, const ulong length,
                                 const long outer_stride, const long middle_stride, const long base)
{
    COPY_RUNS_BODY
}

__kernel void clrun_copy_runs_u16(__global const ushort *src, __global ushort *dst, const ulong length,
                                  const long outer_stride, const long middle_stride, const long base)
{
    COPY_RUNS_BODY
}

__kernel void clrun_copy_runs_u32(__global const uint *src, __global uint *dst, const ulong length,
                                  const long outer_stride, const long middle_stride, const long base)
{
    COPY_RUNS_BODY
}

__kernel void clrun_copy_runs_u64(__global const ulong *src, __global ulong *dst, const ulong length,
                                  const long outer_stride, const long middle_stride, const long base)
{
    COPY_RUNS_BODY
}
