/* scan_put (lib/graph/infer_loop.c): an ONNX Scan run per iteration writes each iteration's scan
 * output y, viewed as [outer, inner], into slice t of the stacked tensor acc, viewed as
 * [outer, len, inner]: acc[(o * len + t) * inner + k] = y[o * inner + k], with t the iteration
 * number iter[0] (len - 1 - iter[0] when reversed). One work-item per element of y; work-item 0
 * also writes the iteration number into the token loop_end reads. An iteration number outside
 * [0, len) writes nothing. One version per element size, exact.
 * (Each kernel is spelled out: the host finds kernels by their `__kernel void NAME(` lines.) */

#define SCAN_PUT_BODY                                                                              \
    const size_t i = get_global_id(0);                                                             \
    if (i >= n)                                                                                    \
        return;                                                                                    \
    const long at = iter[0];                                                                       \
    if (i == 0)                                                                                    \
        token[0] = at;                                                                             \
    const long t = reverse ? (long)len - 1 - at : at;                                              \
    if (t < 0 || (ulong)t >= len)                                                                  \
        return;                                                                                    \
    const ulong o = i / inner, k = i % inner;                                                      \
    acc[(o * len + (ulong)t) * inner + k] = y[i];

#define SCAN_PUT_ARGS                                                                              \
    __global const long *iter, __global long *token, const ulong n, const ulong len,               \
        const ulong inner, const int reverse

__kernel void clrun_scan_put_u8(__global uchar *acc, __global const uchar *y, SCAN_PUT_ARGS)
{
    SCAN_PUT_BODY
}

__kernel void clrun_scan_put_u16(__global ushort *acc, __global const ushort *y, SCAN_PUT_ARGS)
{
    SCAN_PUT_BODY
}

__kernel void clrun_scan_put_u32(__global uint *acc, __global const uint *y, SCAN_PUT_ARGS)
{
    SCAN_PUT_BODY
}

__kernel void clrun_scan_put_u64(__global ulong *acc, __global const ulong *y, SCAN_PUT_ARGS)
{
    SCAN_PUT_BODY
}
