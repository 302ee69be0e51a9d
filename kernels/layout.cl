/* Layout ops: they move 32-bit words (f32 or i32 alike) without looking at them, so their
 * results are exact. Global sizes are rounded up to the work-group size; every kernel checks
 * its indices. */

/* transpose: output element i sits at coordinates (c_0 .. c_{r-1}) of the output's dims; the
 * input element is at sum c_d * strides[d], strides being the input's strides permuted.
 * meta = [rank, out dims[rank], permuted input strides[rank]], with runs of dimensions that stay
 * together already merged by the host. */
__kernel void clrun_transpose_u32(__global const uint *x, __global uint *y, const ulong n,
                                  __global const ulong *meta)
{
    const size_t i = get_global_id(0);
    if (i >= n)
        return;
    const uint rank = (uint)meta[0];
    ulong rem = i, offset = 0;
    for (uint d = rank; d-- > 0;) {
        const ulong dim = meta[1 + d];
        offset += rem % dim * meta[1 + rank + d];
        rem /= dim;
    }
    y[i] = x[offset];
}

/* Copies `rows` runs of `length` words: run o goes from src[o * src_pitch + src_offset] to
 * dst[o * dst_pitch + dst_offset]. Concat (one launch per input) and slice are both this.
 * Work-item (r, o) copies word r of run o. */
__kernel void clrun_copy_rows_u32(__global const uint *src, __global uint *dst,
                                  const ulong length, const ulong rows, const ulong src_pitch,
                                  const ulong src_offset, const ulong dst_pitch,
                                  const ulong dst_offset)
{
    const size_t r = get_global_id(0), o = get_global_id(1);
    if (r < length && o < rows)
        dst[o * dst_pitch + dst_offset + r] = src[o * src_pitch + src_offset + r];
}

/* gather: row indices[i] of table [V, D] into out[i]; an index outside [0, V) gives zeros.
 * Work-item (d, i) writes word d of output row i. */
__kernel void clrun_gather_u32(__global const uint *table, __global const int *indices,
                               __global uint *out, const ulong V, const ulong D, const ulong count)
{
    const size_t d = get_global_id(0), i = get_global_id(1);
    if (d >= D || i >= count)
        return;
    const int row = indices[i];
    out[i * D + d] = row >= 0 && (ulong)row < V ? table[(ulong)row * D + d] : 0u;
}
