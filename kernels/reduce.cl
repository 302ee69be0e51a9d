/* Reductions (reduce_sum, _mean, _max, _min, _prod, _l2, _sum_square, and the global pools
 * through them): a work-group per output with a tree in local memory (devices with real local
 * memory), or a work-item per output along one run (CPUs). A file of their own, apart from
 * kernels/norm.cl's row ops, so that a convolutional network's global pooling builds this small
 * program alone (POCL's front end over norm.cl cost 0.19-0.27 s on an empty cache).
 * lib/ops/ops_norm.c picks the kernel. */
#pragma OPENCL FP_CONTRACT OFF

#ifndef VW
#define VW 8
#endif
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define VEC CAT(float, VW)
#define VLOAD CAT(vload, VW)
#define VSTORE CAT(vstore, VW)

#define MAX_GROUP 256

/* ---- reductions --------------------------------------------------------------------------- */

/* Reduction codes; CLRUN__REDUCE_* in lib/ops/ops_internal.h use the same numbers. */
#define REDUCE_SUM 0
#define REDUCE_MEAN 1
#define REDUCE_MAX 2
#define REDUCE_MIN 3
#define REDUCE_PROD 4
#define REDUCE_L2 5
#define REDUCE_SUM_SQUARE 6

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

/* A reduction's kernel and helpers for element type T (suffix S): its start value, one step,
 * the work-group's fixed tree, and clrun_reduce_S. Output o of a reduction: the kept dimensions
 * locate the box of reduced elements that made it. meta = [kept_rank, reduced_rank, count, kept
 * dims, kept strides, reduced dims, reduced strides], count being the elements per output. */
#define REDUCE_HELPERS(T, S)                                                                       \
    T reduce_start_##S(const int op)                                                               \
    {                                                                                              \
        return op == REDUCE_MAX ? (T)-INFINITY : op == REDUCE_MIN ? (T)INFINITY                    \
               : op == REDUCE_PROD ? (T)1 : (T)0;                                                  \
    }                                                                                              \
    T reduce_step_##S(const int op, const T acc, const T v)                                        \
    {                                                                                              \
        switch (op) {                                                                              \
        case REDUCE_MAX: return fmax(acc, v);                                                      \
        case REDUCE_MIN: return fmin(acc, v);                                                      \
        case REDUCE_PROD: return acc * v;                                                          \
        case REDUCE_L2:                                                                            \
        case REDUCE_SUM_SQUARE: return acc + v * v;                                                \
        default: return acc + v;                                                                   \
        }                                                                                          \
    }                                                                                              \
    T group_reduce_##S(__local T *buf, const int op, const T v)                                    \
    {                                                                                              \
        const uint lid = get_local_id(0);                                                          \
        buf[lid] = v;                                                                              \
        barrier(CLK_LOCAL_MEM_FENCE);                                                              \
        for (uint step = get_local_size(0) / 2; step > 0; step /= 2) {                             \
            if (lid < step) {                                                                      \
                const T a = buf[lid], b = buf[lid + step];                                         \
                buf[lid] = op == REDUCE_MAX ? fmax(a, b) : op == REDUCE_MIN ? fmin(a, b)           \
                         : op == REDUCE_PROD ? a * b : a + b;                                      \
            }                                                                                      \
            barrier(CLK_LOCAL_MEM_FENCE);                                                          \
        }                                                                                          \
        const T total = buf[0];                                                                    \
        barrier(CLK_LOCAL_MEM_FENCE);                                                              \
        return total;                                                                              \
    }

/* The body of clrun_reduce_S over x and y of element type T. */
#define REDUCE_BODY(T, S)                                                                          \
    __local T buf[MAX_GROUP];                                                                      \
    const size_t o = get_group_id(0);                                                              \
    const uint lid = get_local_id(0), size = get_local_size(0);                                    \
    const uint kept_rank = (uint)meta[0], reduced_rank = (uint)meta[1];                            \
    const ulong count = meta[2];                                                                   \
    __global const ulong *kept = meta + 3, *reduced = kept + 2 * kept_rank;                        \
    const ulong base = kept_rank ? box_offset(kept, kept + kept_rank, kept_rank, o) : 0;           \
    T acc = reduce_start_##S(op);                                                                  \
    for (ulong r = lid; r < count; r += size) {                                                    \
        const ulong at =                                                                           \
            reduced_rank ? box_offset(reduced, reduced + reduced_rank, reduced_rank, r) : 0;       \
        acc = reduce_step_##S(op, acc, x[base + at]);                                              \
    }                                                                                              \
    acc = group_reduce_##S(buf, op, acc);                                                          \
    if (lid == 0)                                                                                  \
        y[o] = op == REDUCE_MEAN ? acc / (T)count : op == REDUCE_L2 ? sqrt(acc) : acc;

REDUCE_HELPERS(float, f32)

__kernel void clrun_reduce_f32(__global const float *x, __global float *y,
                               __global const ulong *meta, const int op)
{
    REDUCE_BODY(float, f32)
}

/* One work-item per output (CPUs): the reduced box of clrun_reduce_f32's meta is one run of
 * `count` elements (reduced_rank at most 1) at the run's stride. A contiguous run reads VW floats
 * at a time into four vectors of partial results (loads that do not wait on each other), which
 * combine in a fixed order, lane 0 first, before the tail one float at a time; a strided run
 * reads one float at a time (neighbouring work-items on neighbouring floats). Either way the
 * order is fixed: the same bits on every run. */
#define RR_SUM(a, v) ((a) + (v))
#define RR_SQUARE(a, v) ((a) + (v) * (v))
#define RR_MUL(a, v) ((a) * (v))
#define RR_RUN(STEP, COMBINE)                                                                      \
    do {                                                                                           \
        if (step == 1) {                                                                           \
            VEC a0 = start, a1 = start, a2 = start, a3 = start;                                    \
            for (; j + 4 * VW <= count; j += 4 * VW) {                                             \
                a0 = STEP(a0, VLOAD(0, xr + j));                                                   \
                a1 = STEP(a1, VLOAD(1, xr + j));                                                   \
                a2 = STEP(a2, VLOAD(2, xr + j));                                                   \
                a3 = STEP(a3, VLOAD(3, xr + j));                                                   \
            }                                                                                      \
            for (; j + VW <= count; j += VW)                                                       \
                a0 = STEP(a0, VLOAD(0, xr + j));                                                   \
            float lanes[VW];                                                                       \
            VSTORE(COMBINE(COMBINE(a0, a1), COMBINE(a2, a3)), 0, lanes);                           \
            for (int l = 0; l < VW; l++)                                                           \
                acc = COMBINE(acc, lanes[l]);                                                      \
            for (; j < count; j++)                                                                 \
                acc = STEP(acc, xr[j]);                                                            \
        } else {                                                                                   \
            for (; j < count; j++)                                                                 \
                acc = STEP(acc, xr[j * step]);                                                     \
        }                                                                                          \
    } while (0)

/* A kernel per way of combining (the host picks it by op: lib/ops/ops_norm.c, reduce_rows_kernel), so that
 * a model's mean compiles the sum's loop alone: with every op's loop in one kernel, POCL
 * compiled five copies of them at its first launch (0.25 s with an empty cache). op says what
 * the last step does (a mean divides, L2 takes the root). */
#define RR_BODY(STEP, COMBINE)                                                                     \
    const size_t o = get_global_id(0);                                                             \
    if (o >= outputs) /* the last group's items past the outputs (lib/ops/ops_norm.c) */          \
        return;                                                                                    \
    const uint kept_rank = (uint)meta[0], reduced_rank = (uint)meta[1];                            \
    const ulong count = meta[2];                                                                   \
    __global const ulong *kept = meta + 3;                                                         \
    const ulong step = reduced_rank ? kept[2 * kept_rank + 1] : 1;                                 \
    __global const float *xr = x + (kept_rank ? box_offset(kept, kept + kept_rank, kept_rank, o) : 0); \
    const float start = reduce_start_f32(op);                                                      \
    float acc = start;                                                                             \
    ulong j = 0;                                                                                   \
    RR_RUN(STEP, COMBINE);                                                                         \
    y[o] = op == REDUCE_MEAN ? acc / (float)count : op == REDUCE_L2 ? sqrt(acc) : acc;

__kernel void clrun_reduce_rows_sum_f32(__global const float *x, __global float *y,
                                        __global const ulong *meta, const int op, const ulong outputs)
{
    RR_BODY(RR_SUM, RR_SUM)
}

__kernel void clrun_reduce_rows_max_f32(__global const float *x, __global float *y,
                                        __global const ulong *meta, const int op, const ulong outputs)
{
    RR_BODY(fmax, fmax)
}

__kernel void clrun_reduce_rows_min_f32(__global const float *x, __global float *y,
                                        __global const ulong *meta, const int op, const ulong outputs)
{
    RR_BODY(fmin, fmin)
}

__kernel void clrun_reduce_rows_prod_f32(__global const float *x, __global float *y,
                                         __global const ulong *meta, const int op, const ulong outputs)
{
    RR_BODY(RR_MUL, RR_MUL)
}

__kernel void clrun_reduce_rows_square_f32(__global const float *x, __global float *y,
                                           __global const ulong *meta, const int op, const ulong outputs)
{
    RR_BODY(RR_SQUARE, RR_SUM)
}

#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
REDUCE_HELPERS(double, f64)

__kernel void clrun_reduce_f64(__global const double *x, __global double *y,
                               __global const ulong *meta, const int op)
{
    REDUCE_BODY(double, f64)
}
#endif
