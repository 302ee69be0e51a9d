/* Row-wise ops: softmax, layer normalisation and reductions. One work-group handles one row (one
 * output of a reduction): its work-items stride through the row, then combine their partial
 * results with a tree in local memory. The host picks a power-of-two work-group size of at most
 * MAX_GROUP, so the combination order depends only on that size: the same bits on every run. */

#define MAX_GROUP 256

/* The sum over the work-group of each work-item's v, in a fixed tree order. */
float group_sum(__local float *buf, const float v)
{
    const uint lid = get_local_id(0);
    buf[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint step = get_local_size(0) / 2; step > 0; step /= 2) {
        if (lid < step)
            buf[lid] += buf[lid + step];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float total = buf[0];
    barrier(CLK_LOCAL_MEM_FENCE); /* buf may be reused at once */
    return total;
}

float group_max(__local float *buf, const float v)
{
    const uint lid = get_local_id(0);
    buf[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint step = get_local_size(0) / 2; step > 0; step /= 2) {
        if (lid < step)
            buf[lid] = fmax(buf[lid], buf[lid + step]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float total = buf[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return total;
}

/* Softmax over rows of N; with causal, row r (the (r mod M)-th of its [M, N] matrix) keeps
 * columns j <= (r mod M) + N - M and writes 0 to the others; a row with nothing kept is all 0.
 * Subtracting the row's maximum keeps exp from overflowing. */
__kernel void clrun_softmax_f32(__global const float *x, __global float *y, const ulong N,
                                const ulong M, const int causal)
{
    __local float buf[MAX_GROUP];
    const size_t row = get_group_id(0);
    const uint lid = get_local_id(0), size = get_local_size(0);
    __global const float *xr = x + row * N;
    __global float *yr = y + row * N;
    ulong kept = N;
    if (causal) {
        const ulong i = row % M;
        kept = i + N < M ? 0 : min(N, i + N - M + 1);
    }
    float m = -INFINITY;
    for (ulong j = lid; j < kept; j += size)
        m = fmax(m, xr[j]);
    m = group_max(buf, m);
    float s = 0.0f;
    for (ulong j = lid; j < kept; j += size)
        s += exp(xr[j] - m);
    s = group_sum(buf, s);
    for (ulong j = lid; j < N; j += size)
        yr[j] = j < kept ? exp(xr[j] - m) / s : 0.0f;
}

/* y = (x - mean) / sqrt(var + eps) * gamma + beta over rows of D; the variance is taken around
 * the mean in a second pass (no cancellation of E[x^2] - E[x]^2). */
__kernel void clrun_layernorm_f32(__global const float *x, __global const float *gamma,
                                  __global const float *beta, __global float *y, const ulong D,
                                  const float eps)
{
    __local float buf[MAX_GROUP];
    const size_t row = get_group_id(0);
    const uint lid = get_local_id(0), size = get_local_size(0);
    __global const float *xr = x + row * D;
    __global float *yr = y + row * D;
    float s = 0.0f;
    for (ulong j = lid; j < D; j += size)
        s += xr[j];
    const float mean = group_sum(buf, s) / (float)D;
    float v = 0.0f;
    for (ulong j = lid; j < D; j += size) {
        const float d = xr[j] - mean;
        v += d * d;
    }
    const float inv = rsqrt(group_sum(buf, v) / (float)D + eps);
    for (ulong j = lid; j < D; j += size)
        yr[j] = (xr[j] - mean) * inv * gamma[j] + beta[j];
}

/* Reduction codes; lib/ops_norm.c uses the same numbers. */
#define REDUCE_SUM 0
#define REDUCE_MEAN 1
#define REDUCE_MAX 2

/* The offset of element i of a box of `rank` dims (dims[d], strides[d] in elements). */
ulong box_offset(__global const ulong *dims, __global const ulong *strides, const uint rank,
                 ulong i)
{
    if (rank == 1)
        return i * strides[0];
    ulong offset = 0;
    for (uint d = rank; d-- > 0;) {
        offset += i % dims[d] * strides[d];
        i /= dims[d];
    }
    return offset;
}

/* Output o of a reduction: the kept dimensions locate the box of reduced elements that made it.
 * meta = [kept_rank, reduced_rank, count, kept dims, kept strides, reduced dims, reduced
 * strides], count being the elements per output. */
__kernel void clrun_reduce_f32(__global const float *x, __global float *y,
                               __global const ulong *meta, const int op)
{
    __local float buf[MAX_GROUP];
    const size_t o = get_group_id(0);
    const uint lid = get_local_id(0), size = get_local_size(0);
    const uint kept_rank = (uint)meta[0], reduced_rank = (uint)meta[1];
    const ulong count = meta[2];
    __global const ulong *kept = meta + 3, *reduced = kept + 2 * kept_rank;
    const ulong base = kept_rank ? box_offset(kept, kept + kept_rank, kept_rank, o) : 0;
    float acc = op == REDUCE_MAX ? -INFINITY : 0.0f;
    for (ulong r = lid; r < count; r += size) {
        const ulong at = reduced_rank ? box_offset(reduced, reduced + reduced_rank, reduced_rank, r) : 0;
        const float v = x[base + at];
        acc = op == REDUCE_MAX ? fmax(acc, v) : acc + v;
    }
    acc = op == REDUCE_MAX ? group_max(buf, acc) : group_sum(buf, acc);
    if (lid == 0)
        y[o] = op == REDUCE_MEAN ? acc / (float)count : acc;
}
