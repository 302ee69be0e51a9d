/* Bit copies of the copy op and of layout moves (reshape): n elements of 1, 2, 4 or 8 bytes, read
 * and written as unsigned integers so that no NaN payload or denormal can change. The other
 * elementwise kernels are generated from the expressions of lib/graph/infer_elementwise.c
 * (lib/ops/ew_source.c), in front of which go the functions of ew_functions.cl. Global sizes are
 * rounded up to the work-group size, so the last work-group checks its indices against n. */

/* A work-group wholly inside [0, n) skips the per-element check: without a branch per element,
 * CPU compilers (POCL) vectorize the loop over its work-items. Only the last group checks. The
 * store is written twice, under each test apart: under "WHOLE_GROUP(n) || i < n" POCL masks
 * every load and store of the loop (lib/ops/ew_source.c, emit_checked_assign). */
#define WHOLE_GROUP(n) ((get_group_id(0) + 1) * get_local_size(0) <= (n))

#define COPY(T)                                                                                    \
    const size_t i = get_global_id(0);                                                             \
    if (WHOLE_GROUP(n))                                                                            \
        y[i] = x[i];                                                                               \
    else if (i < n)                                                                                \
        y[i] = x[i];

__kernel void clrun_copy_u8(__global const uchar *x, __global uchar *y, const ulong n)
{
    COPY(uchar)
}

__kernel void clrun_copy_u16(__global const ushort *x, __global ushort *y, const ulong n)
{
    COPY(ushort)
}

/* Copies n 32-bit words: copy and reshape of any 4-byte dtype, bit for bit. */
__kernel void clrun_copy_u32(__global const uint *x, __global uint *y, const ulong n)
{
    COPY(uint)
}

__kernel void clrun_copy_u64(__global const ulong *x, __global ulong *y, const ulong n)
{
    COPY(ulong)
}
