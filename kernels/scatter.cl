/* Scatter ops and index tuples: scatter_elements and scatter_nd copy data into the output
 * (clrun_scatter_copy_*, one work-item per element), then write updates in: without a
 * reduction by element size (u8, u16, u32, u64), with one (add, mul) per dtype (f32, f64, i32 and
 * i64, integers wrapping as unsigned arithmetic does). gather_nd moves elements by element size;
 * top_k_indices compares per dtype. Every write of an update is made by the one work-item that
 * owns its output line (scatter_elements) or column (scatter_nd), in index order, so duplicate
 * indices give the same result on every run: the last update wins, and sums and products are
 * made in index order. An index outside the data writes nothing and lowers bad[0] to its
 * position (at most 0xfffffffe; it starts at 0xffffffff), which the executor reads after the
 * run to fail it, naming the node and the position. Global sizes are rounded up and every
 * kernel checks its index. (Each kernel is spelled out: the host finds kernels by their
 * `__kernel void NAME(` lines.) */

/* reduction: 0 none (the update replaces), 1 add, 2 mul. */
#define APPLY(target, u)                                                                           \
    if (reduction == 1)                                                                            \
        target += (u);                                                                             \
    else if (reduction == 2)                                                                       \
        target *= (u);                                                                             \
    else                                                                                           \
        target = (u);
#define REPLACE(target, u) target = (u);

#define SCATTER_COPY_BODY                                                                          \
    const size_t i = get_global_id(0);                                                             \
    if (i < n)                                                                                     \
        out[i] = data[i];
__kernel void clrun_scatter_copy_u8(__global const uchar *data, __global uchar *out, const ulong n)
{
    SCATTER_COPY_BODY
}
__kernel void clrun_scatter_copy_u16(__global const ushort *data, __global ushort *out,
                                     const ulong n)
{
    SCATTER_COPY_BODY
}
__kernel void clrun_scatter_copy_u32(__global const uint *data, __global uint *out, const ulong n)
{
    SCATTER_COPY_BODY
}
__kernel void clrun_scatter_copy_u64(__global const ulong *data, __global ulong *out, const ulong n)
{
    SCATTER_COPY_BODY
}
/* scatter_elements: work-item l owns one line of the indices along the axis (its coordinates off
 * the axis, which index the output too) and writes updates[c] at the output element of the same
 * coordinates with the axis one replaced by indices[c] (negatives count from the end), for
 * c along the line in order. meta = [rank, axis, index dims[rank], output strides[rank], data's
 * axis length]. */
#define SCATTER_ELEMENTS_BODY(WRITE)                                                               \
    const size_t l = get_global_id(0);                                                             \
    if (l >= lines)                                                                                \
        return;                                                                                    \
    const uint rank = (uint)meta[0], axis = (uint)meta[1];                                         \
    const long axis_dim = (long)meta[2 + 2 * rank];                                                \
    ulong rem = l, out_base = 0, in_base = 0, in_stride = 1, in_axis_stride = 1;                   \
    for (uint d = rank; d-- > 0;) {                                                                \
        const ulong dim = meta[2 + d];                                                             \
        if (d == axis) {                                                                           \
            in_axis_stride = in_stride;                                                            \
        } else {                                                                                   \
            const ulong c = rem % dim;                                                             \
            rem /= dim;                                                                            \
            out_base += c * meta[2 + rank + d];                                                    \
            in_base += c * in_stride;                                                              \
        }                                                                                          \
        in_stride *= dim;                                                                          \
    }                                                                                              \
    const ulong len = meta[2 + axis], out_axis_stride = meta[2 + rank + axis];                     \
    for (ulong j = 0; j < len; j++) {                                                              \
        const ulong at = in_base + j * in_axis_stride;                                             \
        long index = (long)indices[at];                                                            \
        if (index < 0)                                                                             \
            index += axis_dim;                                                                     \
        if (index >= 0 && index < axis_dim) {                                                      \
            WRITE(out[out_base + (ulong)index * out_axis_stride], updates[at])                     \
        } else {                                                                                   \
            atomic_min(bad, (uint)min(at, (ulong)0xfffffffe));                                     \
        }                                                                                          \
    }

#define SCATTER_ELEMENTS_ARGS                                                                      \
    const ulong lines, __global const ulong *meta, const int reduction, volatile __global uint *bad
__kernel void clrun_scatter_elements_u8_i32(__global const int *indices,
                                            __global const uchar *updates, __global uchar *out,
                                            SCATTER_ELEMENTS_ARGS)
{
    SCATTER_ELEMENTS_BODY(REPLACE)
}
__kernel void clrun_scatter_elements_u8_i64(__global const long *indices,
                                            __global const uchar *updates, __global uchar *out,
                                            SCATTER_ELEMENTS_ARGS)
{
    SCATTER_ELEMENTS_BODY(REPLACE)
}
__kernel void clrun_scatter_elements_u16_i32(__global const int *indices,
                                             __global const ushort *updates, __global ushort *out,
                                             SCATTER_ELEMENTS_ARGS)
{
    SCATTER_ELEMENTS_BODY(REPLACE)
}
__kernel void clrun_scatter_elements_u16_i64(__global const long *indices,
                                             __global const ushort *updates, __global ushort *out,
                                             SCATTER_ELEMENTS_ARGS)
{
    SCATTER_ELEMENTS_BODY(REPLACE)
}
__kernel void clrun_scatter_elements_u32_i32(__global const int *indices,
                                             __global const uint *updates, __global uint *out,
                                             SCATTER_ELEMENTS_ARGS)
{
    SCATTER_ELEMENTS_BODY(REPLACE)
}
__kernel void clrun_scatter_elements_u32_i64(__global const long *indices,
                                             __global const uint *updates, __global uint *out,
                                             SCATTER_ELEMENTS_ARGS)
{
    SCATTER_ELEMENTS_BODY(REPLACE)
}
__kernel void clrun_scatter_elements_u64_i32(__global const int *indices,
                                             __global const ulong *updates, __global ulong *out,
                                             SCATTER_ELEMENTS_ARGS)
{
    SCATTER_ELEMENTS_BODY(REPLACE)
}
__kernel void clrun_scatter_elements_u64_i64(__global const long *indices,
                                             __global const ulong *updates, __global ulong *out,
                                             SCATTER_ELEMENTS_ARGS)
{
    SCATTER_ELEMENTS_BODY(REPLACE)
}
__kernel void clrun_scatter_elements_f32_i32(__global const int *indices,
                                             __global const float *updates, __global float *out,
                                             SCATTER_ELEMENTS_ARGS)
{
    SCATTER_ELEMENTS_BODY(APPLY)
}
__kernel void clrun_scatter_elements_f32_i64(__global const long *indices,
                                             __global const float *updates, __global float *out,
                                             SCATTER_ELEMENTS_ARGS)
{
    SCATTER_ELEMENTS_BODY(APPLY)
}
__kernel void clrun_scatter_elements_i32_i32(__global const int *indices,
                                             __global const uint *updates, __global uint *out,
                                             SCATTER_ELEMENTS_ARGS)
{
    SCATTER_ELEMENTS_BODY(APPLY)
}
__kernel void clrun_scatter_elements_i32_i64(__global const long *indices,
                                             __global const uint *updates, __global uint *out,
                                             SCATTER_ELEMENTS_ARGS)
{
    SCATTER_ELEMENTS_BODY(APPLY)
}
__kernel void clrun_scatter_elements_i64_i32(__global const int *indices,
                                             __global const ulong *updates, __global ulong *out,
                                             SCATTER_ELEMENTS_ARGS)
{
    SCATTER_ELEMENTS_BODY(APPLY)
}
__kernel void clrun_scatter_elements_i64_i64(__global const long *indices,
                                             __global const ulong *updates, __global ulong *out,
                                             SCATTER_ELEMENTS_ARGS)
{
    SCATTER_ELEMENTS_BODY(APPLY)
}
/* Only where the device has doubles: the host asks for these kernels only then. */
#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
__kernel void clrun_scatter_elements_f64_i32(__global const int *indices,
                                             __global const double *updates, __global double *out,
                                             SCATTER_ELEMENTS_ARGS)
{
    SCATTER_ELEMENTS_BODY(APPLY)
}
__kernel void clrun_scatter_elements_f64_i64(__global const long *indices,
                                             __global const double *updates, __global double *out,
                                             SCATTER_ELEMENTS_ARGS)
{
    SCATTER_ELEMENTS_BODY(APPLY)
}
#endif
/* Index tuples of k indices into the first k dims of data (after the batch for gather_nd):
 * meta = [k, slice (elements per tuple's slice), tuples per batch, batch stride, dims[k],
 * strides[k]]. The offset of tuple p's slice in its batch, or -1 when an index is outside its
 * dim (negatives count from the end). */
#define TUPLE_OFFSET(p)                                                                            \
    long offset = 0;                                                                               \
    {                                                                                              \
        const uint k = (uint)meta[0];                                                              \
        for (uint c = 0; c < k && offset >= 0; c++) {                                              \
            const long dim = (long)meta[4 + c];                                                    \
            long index = (long)indices[(p) * k + c];                                               \
            if (index < 0)                                                                         \
                index += dim;                                                                      \
            offset = index >= 0 && index < dim ? offset + index * (long)meta[4 + k + c] : -1;      \
        }                                                                                          \
    }

/* scatter_nd: work-item s owns column s of every slice (the output elements slice * t + s) and
 * writes updates[p * slice + s] into tuple p's slice, for p = 0, 1, ... in order. */
#define SCATTER_ND_BODY(WRITE)                                                                     \
    const size_t s = get_global_id(0);                                                             \
    const ulong slice = meta[1], count = meta[2];                                                  \
    if (s >= slice)                                                                                \
        return;                                                                                    \
    for (ulong p = 0; p < count; p++) {                                                            \
        TUPLE_OFFSET(p)                                                                            \
        if (offset >= 0) {                                                                         \
            WRITE(out[(ulong)offset + s], updates[p * slice + s])                                  \
        } else {                                                                                   \
            atomic_min(bad, (uint)min(p, (ulong)0xfffffffe));                                      \
        }                                                                                          \
    }

#define SCATTER_ND_ARGS                                                                            \
    __global const ulong *meta, const int reduction, volatile __global uint *bad
__kernel void clrun_scatter_nd_u8_i32(__global const int *indices, __global const uchar *updates,
                                      __global uchar *out, SCATTER_ND_ARGS)
{
    SCATTER_ND_BODY(REPLACE)
}
__kernel void clrun_scatter_nd_u8_i64(__global const long *indices, __global const uchar *updates,
                                      __global uchar *out, SCATTER_ND_ARGS)
{
    SCATTER_ND_BODY(REPLACE)
}
__kernel void clrun_scatter_nd_u16_i32(__global const int *indices, __global const ushort *updates,
                                       __global ushort *out, SCATTER_ND_ARGS)
{
    SCATTER_ND_BODY(REPLACE)
}
__kernel void clrun_scatter_nd_u16_i64(__global const long *indices, __global const ushort *updates,
                                       __global ushort *out, SCATTER_ND_ARGS)
{
    SCATTER_ND_BODY(REPLACE)
}
__kernel void clrun_scatter_nd_u32_i32(__global const int *indices, __global const uint *updates,
                                       __global uint *out, SCATTER_ND_ARGS)
{
    SCATTER_ND_BODY(REPLACE)
}
__kernel void clrun_scatter_nd_u32_i64(__global const long *indices, __global const uint *updates,
                                       __global uint *out, SCATTER_ND_ARGS)
{
    SCATTER_ND_BODY(REPLACE)
}
__kernel void clrun_scatter_nd_u64_i32(__global const int *indices, __global const ulong *updates,
                                       __global ulong *out, SCATTER_ND_ARGS)
{
    SCATTER_ND_BODY(REPLACE)
}
__kernel void clrun_scatter_nd_u64_i64(__global const long *indices, __global const ulong *updates,
                                       __global ulong *out, SCATTER_ND_ARGS)
{
    SCATTER_ND_BODY(REPLACE)
}
__kernel void clrun_scatter_nd_f32_i32(__global const int *indices, __global const float *updates,
                                       __global float *out, SCATTER_ND_ARGS)
{
    SCATTER_ND_BODY(APPLY)
}
__kernel void clrun_scatter_nd_f32_i64(__global const long *indices, __global const float *updates,
                                       __global float *out, SCATTER_ND_ARGS)
{
    SCATTER_ND_BODY(APPLY)
}
__kernel void clrun_scatter_nd_i32_i32(__global const int *indices, __global const uint *updates,
                                       __global uint *out, SCATTER_ND_ARGS)
{
    SCATTER_ND_BODY(APPLY)
}
__kernel void clrun_scatter_nd_i32_i64(__global const long *indices, __global const uint *updates,
                                       __global uint *out, SCATTER_ND_ARGS)
{
    SCATTER_ND_BODY(APPLY)
}
__kernel void clrun_scatter_nd_i64_i32(__global const int *indices, __global const ulong *updates,
                                       __global ulong *out, SCATTER_ND_ARGS)
{
    SCATTER_ND_BODY(APPLY)
}
__kernel void clrun_scatter_nd_i64_i64(__global const long *indices, __global const ulong *updates,
                                       __global ulong *out, SCATTER_ND_ARGS)
{
    SCATTER_ND_BODY(APPLY)
}
#ifdef cl_khr_fp64
__kernel void clrun_scatter_nd_f64_i32(__global const int *indices, __global const double *updates,
                                       __global double *out, SCATTER_ND_ARGS)
{
    SCATTER_ND_BODY(APPLY)
}
__kernel void clrun_scatter_nd_f64_i64(__global const long *indices, __global const double *updates,
                                       __global double *out, SCATTER_ND_ARGS)
{
    SCATTER_ND_BODY(APPLY)
}
#endif
/* gather_nd: output element i is element i % slice of the slice that index tuple p = i / slice
 * names in its batch p / (tuples per batch); an index outside its dim gives 0 and lowers bad[0]
 * to p. */
#define GATHER_ND_BODY                                                                             \
    const size_t i = get_global_id(0);                                                             \
    if (i >= n)                                                                                    \
        return;                                                                                    \
    const ulong slice = meta[1], p = i / slice;                                                    \
    TUPLE_OFFSET(p)                                                                                \
    if (offset >= 0) {                                                                             \
        out[i] = data[p / meta[2] * meta[3] + (ulong)offset + i % slice];                          \
    } else {                                                                                       \
        out[i] = 0;                                                                                \
        atomic_min(bad, (uint)min(p, (ulong)0xfffffffe));                                          \
    }

#define GATHER_ND_ARGS const ulong n, __global const ulong *meta, volatile __global uint *bad
__kernel void clrun_gather_nd_u8_i32(__global const uchar *data, __global const int *indices,
                                     __global uchar *out, GATHER_ND_ARGS)
{
    GATHER_ND_BODY
}
__kernel void clrun_gather_nd_u8_i64(__global const uchar *data, __global const long *indices,
                                     __global uchar *out, GATHER_ND_ARGS)
{
    GATHER_ND_BODY
}
__kernel void clrun_gather_nd_u16_i32(__global const ushort *data, __global const int *indices,
                                      __global ushort *out, GATHER_ND_ARGS)
{
    GATHER_ND_BODY
}
__kernel void clrun_gather_nd_u16_i64(__global const ushort *data, __global const long *indices,
                                      __global ushort *out, GATHER_ND_ARGS)
{
    GATHER_ND_BODY
}
__kernel void clrun_gather_nd_u32_i32(__global const uint *data, __global const int *indices,
                                      __global uint *out, GATHER_ND_ARGS)
{
    GATHER_ND_BODY
}
__kernel void clrun_gather_nd_u32_i64(__global const uint *data, __global const long *indices,
                                      __global uint *out, GATHER_ND_ARGS)
{
    GATHER_ND_BODY
}
__kernel void clrun_gather_nd_u64_i32(__global const ulong *data, __global const int *indices,
                                      __global ulong *out, GATHER_ND_ARGS)
{
    GATHER_ND_BODY
}
__kernel void clrun_gather_nd_u64_i64(__global const ulong *data, __global const long *indices,
                                      __global ulong *out, GATHER_ND_ARGS)
{
    GATHER_ND_BODY
}
/* top_k_indices over x [outer, len, inner] along the middle axis: work-item l takes line
 * (l / inner, l % inner) and writes the positions of its k best elements, best first: pick t is
 * the best of the elements ranked after pick t - 1, so no scratch is needed (k passes over the
 * line). Ranking: larger first (smaller with !largest), equal values by position, NaN above
 * every number (first when largest, last when smallest), as numpy's sort places it. */
#define BEFORE(a, i, b, j)                                                                         \
    (ISNAN(a) && ISNAN(b) ? (i) < (j)                                                              \
     : ISNAN(a)           ? largest != 0                                                           \
     : ISNAN(b)           ? largest == 0                                                           \
     : (a) == (b)         ? (i) < (j)                                                              \
     : largest            ? (a) > (b)                                                              \
                          : (a) < (b))

#define TOP_K_BODY(T)                                                                              \
    const size_t l = get_global_id(0);                                                             \
    if (l >= lines)                                                                                \
        return;                                                                                    \
    __global const T *line = x + l / inner * len * inner + l % inner;                              \
    __global long *picks = out + l / inner * k * inner + l % inner;                                \
    long prev = -1;                                                                                \
    T pv = 0;                                                                                      \
    for (ulong t = 0; t < k; t++) {                                                                \
        long best = -1;                                                                            \
        T bv = 0;                                                                                  \
        for (ulong j = 0; j < len; j++) {                                                          \
            const T v = line[j * inner];                                                           \
            if (prev >= 0 && !BEFORE(pv, prev, v, (long)j))                                        \
                continue;                                                                          \
            if (best < 0 || BEFORE(v, (long)j, bv, best)) {                                        \
                best = (long)j;                                                                    \
                bv = v;                                                                            \
            }                                                                                      \
        }                                                                                          \
        picks[t * inner] = best;                                                                   \
        prev = best;                                                                               \
        pv = bv;                                                                                   \
    }

#define TOP_K_ARGS                                                                                 \
    const ulong lines, const ulong len, const ulong inner, const ulong k, const int largest

#define ISNAN(v) isnan(v)
__kernel void clrun_top_k_f32(__global const float *x, __global long *out, TOP_K_ARGS)
{
    TOP_K_BODY(float)
}
#undef ISNAN

#define ISNAN(v) false
__kernel void clrun_top_k_i32(__global const int *x, __global long *out, TOP_K_ARGS)
{
    TOP_K_BODY(int)
}

__kernel void clrun_top_k_i64(__global const long *x, __global long *out, TOP_K_ARGS)
{
    TOP_K_BODY(long)
}
#undef ISNAN

#ifdef cl_khr_fp64
#define ISNAN(v) isnan(v)
__kernel void clrun_top_k_f64(__global const double *x, __global long *out, TOP_K_ARGS)
{
    TOP_K_BODY(double)
}
#undef ISNAN
#endif
