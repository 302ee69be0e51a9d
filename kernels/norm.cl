/* Row ops (softmax, logsoftmax, layernorm, instancenorm, batchnorm, softmax_xent and its
 * gradient) and argmax/argmin; the reductions are kernels/reduce.cl.
 *
 * Two shapes of the row kernels (lib/ops/ops_norm.c picks by device). On devices with real
 * local memory one work-group handles one row: its work-items stride through it and combine
 * partial results with a tree in local memory (the group size is a power of two fixed by the
 * host, so the order is fixed: the same bits on every run). On CPUs one work-item handles one
 * row with vector loads of VW floats (the host defines VW, the device's width): VW partial
 * results, combined in a fixed tree, then the tail. Either way each element's exp is computed
 * once. Rows along an axis that is not the last (softmax over axis 1 of [N, C, H, W]) are
 * strided: one work-item per row there, neighbouring work-items on neighbouring elements. */
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

/* ---- combining partial results ------------------------------------------------------------ */

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

/* The lanes of a vector combined pairwise: lo half with hi half, down to one. */
float vec_sum(const VEC v)
{
#if VW == 16
    const float8 a = v.lo + v.hi;
    const float4 b = a.lo + a.hi;
#elif VW == 8
    const float4 b = v.lo + v.hi;
#else
    const float4 b = v;
#endif
    const float2 c = b.lo + b.hi;
    return c.x + c.y;
}

float vec_max(const VEC v)
{
#if VW == 16
    const float8 a = fmax(v.lo, v.hi);
    const float4 b = fmax(a.lo, a.hi);
#elif VW == 8
    const float4 b = fmax(v.lo, v.hi);
#else
    const float4 b = v;
#endif
    const float2 c = fmax(b.lo, b.hi);
    return fmax(c.x, c.y);
}

/* ---- one work-item per contiguous row (CPUs) ---------------------------------------------- */

/* The loops below take 4 vectors a step into 4 partial results (independent chains, so that a
 * step does not wait on the one before), then single vectors, then the tail one float at a
 * time; the partial results combine in a fixed order, so every run gives the same bits. */

/* v where v > m, else m: the maximum that skips NaN (m is never NaN), one compare and blend. */
VEC vec_keep_max(const VEC m, const VEC v) { return select(m, v, v > m); }

/* v stored at p: one vector store where p is aligned to the vector, else vstore (which POCL
 * writes as four 128-bit stores). The same bits either way. */
void store_vec(const VEC v, __global float *p)
{
    if (((ulong)p & (sizeof(VEC) - 1)) == 0)
        *(__global VEC *)p = v;
    else
        VSTORE(v, 0, p);
}

float row_max(__global const float *x, const ulong n)
{
    VEC m0 = -INFINITY, m1 = -INFINITY, m2 = -INFINITY, m3 = -INFINITY;
    ulong j = 0;
    for (; j + 4 * VW <= n; j += 4 * VW) {
        m0 = vec_keep_max(m0, VLOAD(0, x + j));
        m1 = vec_keep_max(m1, VLOAD(1, x + j));
        m2 = vec_keep_max(m2, VLOAD(2, x + j));
        m3 = vec_keep_max(m3, VLOAD(3, x + j));
    }
    for (; j + VW <= n; j += VW)
        m0 = vec_keep_max(m0, VLOAD(0, x + j));
    float r = vec_max(fmax(fmax(m0, m1), fmax(m2, m3)));
    for (; j < n; j++)
        r = fmax(r, x[j]);
    return r;
}

/* Sum of exp(x - m) over the row; with y, each exp is stored there too. */
float row_exp_sum(__global const float *x, __global float *y, const ulong n, const float m)
{
    VEC s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
    ulong j = 0;
    for (; j + 4 * VW <= n; j += 4 * VW) {
        const VEC e0 = exp(VLOAD(0, x + j) - m), e1 = exp(VLOAD(1, x + j) - m);
        const VEC e2 = exp(VLOAD(2, x + j) - m), e3 = exp(VLOAD(3, x + j) - m);
        if (y) {
            store_vec(e0, y + j);
            store_vec(e1, y + j + VW);
            store_vec(e2, y + j + 2 * VW);
            store_vec(e3, y + j + 3 * VW);
        }
        s0 += e0;
        s1 += e1;
        s2 += e2;
        s3 += e3;
    }
    for (; j + VW <= n; j += VW) {
        const VEC e = exp(VLOAD(0, x + j) - m);
        if (y)
            store_vec(e, y + j);
        s0 += e;
    }
    float r = vec_sum((s0 + s1) + (s2 + s3));
    for (; j < n; j++) {
        const float e = exp(x[j] - m);
        if (y)
            y[j] = e;
        r += e;
    }
    return r;
}

/* Sum of (x - c)^2 over the row, or with square 0 of x - c. */
float row_sum_around(__global const float *x, const ulong n, const float c, const int square)
{
    VEC s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
    ulong j = 0;
    if (square) {
        for (; j + 4 * VW <= n; j += 4 * VW) {
            const VEC d0 = VLOAD(0, x + j) - c, d1 = VLOAD(1, x + j) - c;
            const VEC d2 = VLOAD(2, x + j) - c, d3 = VLOAD(3, x + j) - c;
            s0 += d0 * d0;
            s1 += d1 * d1;
            s2 += d2 * d2;
            s3 += d3 * d3;
        }
        for (; j + VW <= n; j += VW) {
            const VEC d = VLOAD(0, x + j) - c;
            s0 += d * d;
        }
    } else {
        for (; j + 4 * VW <= n; j += 4 * VW) {
            s0 += VLOAD(0, x + j) - c;
            s1 += VLOAD(1, x + j) - c;
            s2 += VLOAD(2, x + j) - c;
            s3 += VLOAD(3, x + j) - c;
        }
        for (; j + VW <= n; j += VW)
            s0 += VLOAD(0, x + j) - c;
    }
    float r = vec_sum((s0 + s1) + (s2 + s3));
    for (; j < n; j++) {
        const float d = x[j] - c;
        r += square ? d * d : d;
    }
    return r;
}

/* Softmax (log_form 0) or logsoftmax (1) of rows of N; with causal, row r (the (r mod M)-th
 * of its [M, N] matrix) keeps columns j <= (r mod M) + N - M and writes 0 to the others (a row
 * with nothing kept is all 0). Subtracting the row's maximum keeps exp from overflowing; the
 * exps are stored, then scaled by 1 / their sum. */
__kernel void clrun_softmax_rows(__global const float *x, __global float *y, const ulong N,
                                 const ulong M, const int causal, const int log_form)
{
    const size_t row = get_global_id(0);
    __global const float *xr = x + row * N;
    __global float *yr = y + row * N;
    ulong kept = N;
    if (causal) {
        const ulong i = row % M;
        kept = i + N < M ? 0 : min(N, i + N - M + 1);
    }
    const float m = row_max(xr, kept);
    if (log_form) {
        const float shift = m + log(row_exp_sum(xr, NULL, kept, m));
        ulong j = 0;
        for (; j + VW <= kept; j += VW)
            store_vec(VLOAD(0, xr + j) - shift, yr + j);
        for (; j < kept; j++)
            yr[j] = xr[j] - shift;
    } else {
        const float r = 1.0f / row_exp_sum(xr, yr, kept, m);
        ulong j = 0;
        for (; j + VW <= kept; j += VW)
            store_vec(VLOAD(0, yr + j) * r, yr + j);
        for (; j < kept; j++)
            yr[j] = yr[j] * r;
    }
    for (ulong j = kept; j < N; j++)
        yr[j] = 0.0f;
}

/* y = (x - mean) / sqrt(var + eps) * gamma + beta over rows of D; the variance is taken around
 * the mean in a second pass (no cancellation of E[x^2] - E[x]^2). gamma and beta are per
 * column, or (per_row, instancenorm) per channel: row r's is entry r mod C. No beta: 0. */
__kernel void clrun_layernorm_rows(__global const float *x, __global const float *gamma,
                                   __global const float *beta, __global float *y, const ulong D,
                                   const float eps, const int per_row, const ulong C,
                                   const int has_beta)
{
    const size_t row = get_global_id(0);
    __global const float *xr = x + row * D;
    __global float *yr = y + row * D;
    const float mean = row_sum_around(xr, D, 0.0f, 0) / (float)D;
    const float inv = rsqrt(row_sum_around(xr, D, mean, 1) / (float)D + eps);
    if (per_row) {
        const ulong c = row % C;
        const float g = gamma[c], b = has_beta ? beta[c] : 0.0f;
        ulong j = 0;
        for (; j + VW <= D; j += VW)
            store_vec((VLOAD(0, xr + j) - mean) * inv * g + b, yr + j);
        for (; j < D; j++)
            yr[j] = (xr[j] - mean) * inv * g + b;
        return;
    }
    ulong j = 0;
    for (; j + VW <= D; j += VW) {
        const VEC b = has_beta ? VLOAD(0, beta + j) : (VEC)0.0f;
        store_vec((VLOAD(0, xr + j) - mean) * inv * VLOAD(0, gamma + j) + b, yr + j);
    }
    for (; j < D; j++)
        yr[j] = (xr[j] - mean) * inv * gamma[j] + (has_beta ? beta[j] : 0.0f);
}

/* ---- softmax_xent, softmax_xent_grad -------------------------------------------------------- */

/* Rows of C logits with one label each (a kernel per label type, i32 and i64). A label equal
 * to `ignore` (when has_ignore) gives a loss of 0 and a gradient row of 0s; one outside [0, C)
 * gives NaN (the whole row for the gradient) and lowers bad[0] to the row (at most 0xfffffffe;
 * it starts at 0xffffffff), after which clrun_bad_label_* records that row's label in bad[2]
 * (low word) and bad[3] (high word) for the executor's report. Both ops take the row's maximum
 * m and the sum s of exp(x - m) by the same code in the same order (the row functions above on
 * CPUs, a work-group's tree elsewhere, with one group size for both ops), so that they agree:
 * the loss is log(s) - (x[label] - m), the gradient (exp(x - m) * (1 / s) - onehot) * dloss. */
#define LABEL_OK 0
#define LABEL_IGNORED 1
#define LABEL_BAD 2

int label_kind(const long label, const ulong C, const int has_ignore, const long ignore)
{
    if (has_ignore && label == ignore)
        return LABEL_IGNORED;
    return label >= 0 && (ulong)label < C ? LABEL_OK : LABEL_BAD;
}

void note_bad_label(volatile __global uint *bad, const ulong row)
{
    atomic_min(bad, (uint)min(row, (ulong)0xfffffffe));
}

#define XENT_ARGS                                                                                  \
    const ulong C, const int has_ignore, const long ignore, volatile __global uint *bad

/* One work-item per row (CPUs). */
float xent_row(__global const float *x, const long label, XENT_ARGS)
{
    const size_t row = get_global_id(0);
    const int kind = label_kind(label, C, has_ignore, ignore);
    if (kind == LABEL_IGNORED)
        return 0.0f;
    if (kind == LABEL_BAD) {
        note_bad_label(bad, row);
        return NAN;
    }
    __global const float *xr = x + row * C;
    const float m = row_max(xr, C);
    return log(row_exp_sum(xr, NULL, C, m)) - (xr[label] - m);
}

void xent_grad_row(__global const float *x, const long label, const float g, __global float *y,
                   XENT_ARGS)
{
    const size_t row = get_global_id(0);
    __global const float *xr = x + row * C;
    __global float *yr = y + row * C;
    const int kind = label_kind(label, C, has_ignore, ignore);
    if (kind != LABEL_OK) {
        if (kind == LABEL_BAD)
            note_bad_label(bad, row);
        const float v = kind == LABEL_BAD ? NAN : 0.0f;
        ulong j = 0;
        for (; j + VW <= C; j += VW)
            store_vec((VEC)v, yr + j);
        for (; j < C; j++)
            yr[j] = v;
        return;
    }
    const float m = row_max(xr, C);
    const float r = 1.0f / row_exp_sum(xr, yr, C, m); /* the exps are in yr */
    const float e_label = yr[label];
    ulong j = 0;
    for (; j + VW <= C; j += VW)
        store_vec(VLOAD(0, yr + j) * r * g, yr + j);
    for (; j < C; j++)
        yr[j] = yr[j] * r * g;
    yr[label] = (e_label * r - 1.0f) * g;
}

__kernel void clrun_softmax_xent_rows_i32(__global const float *x, __global const int *labels,
                                          __global float *loss, XENT_ARGS)
{
    const size_t row = get_global_id(0);
    loss[row] = xent_row(x, (long)labels[row], C, has_ignore, ignore, bad);
}

__kernel void clrun_softmax_xent_rows_i64(__global const float *x, __global const long *labels,
                                          __global float *loss, XENT_ARGS)
{
    const size_t row = get_global_id(0);
    loss[row] = xent_row(x, labels[row], C, has_ignore, ignore, bad);
}

__kernel void clrun_softmax_xent_grad_rows_i32(__global const float *x,
                                               __global const int *labels,
                                               __global const float *dloss, __global float *y,
                                               XENT_ARGS)
{
    const size_t row = get_global_id(0);
    xent_grad_row(x, (long)labels[row], dloss[row], y, C, has_ignore, ignore, bad);
}

__kernel void clrun_softmax_xent_grad_rows_i64(__global const float *x,
                                               __global const long *labels,
                                               __global const float *dloss, __global float *y,
                                               XENT_ARGS)
{
    const size_t row = get_global_id(0);
    xent_grad_row(x, labels[row], dloss[row], y, C, has_ignore, ignore, bad);
}

/* One work-group per row (devices with local memory). The label is the group's, so every
 * work-item of a group takes the same branch and meets the same barriers. */
float xent_group(__local float *buf, __global const float *x, const long label, XENT_ARGS)
{
    const size_t row = get_group_id(0);
    const uint lid = get_local_id(0), size = get_local_size(0);
    const int kind = label_kind(label, C, has_ignore, ignore);
    if (kind == LABEL_IGNORED)
        return 0.0f;
    if (kind == LABEL_BAD) {
        if (lid == 0)
            note_bad_label(bad, row);
        return NAN;
    }
    __global const float *xr = x + row * C;
    float m = -INFINITY;
    for (ulong j = lid; j < C; j += size)
        m = fmax(m, xr[j]);
    m = group_max(buf, m);
    float s = 0.0f;
    for (ulong j = lid; j < C; j += size)
        s += exp(xr[j] - m);
    s = group_sum(buf, s);
    return log(s) - (xr[label] - m);
}

void xent_grad_group(__local float *buf, __global const float *x, const long label,
                     const float g, __global float *y, XENT_ARGS)
{
    const size_t row = get_group_id(0);
    const uint lid = get_local_id(0), size = get_local_size(0);
    __global const float *xr = x + row * C;
    __global float *yr = y + row * C;
    const int kind = label_kind(label, C, has_ignore, ignore);
    if (kind != LABEL_OK) {
        if (kind == LABEL_BAD && lid == 0)
            note_bad_label(bad, row);
        const float v = kind == LABEL_BAD ? NAN : 0.0f;
        for (ulong j = lid; j < C; j += size)
            yr[j] = v;
        return;
    }
    float m = -INFINITY;
    for (ulong j = lid; j < C; j += size)
        m = fmax(m, xr[j]);
    m = group_max(buf, m);
    float s = 0.0f;
    for (ulong j = lid; j < C; j += size) {
        const float e = exp(xr[j] - m);
        yr[j] = e;
        s += e;
    }
    const float r = 1.0f / group_sum(buf, s);
    for (ulong j = lid; j < C; j += size)
        yr[j] = (ulong)label == j ? (yr[j] * r - 1.0f) * g : yr[j] * r * g;
}

__kernel void clrun_softmax_xent_f32_i32(__global const float *x, __global const int *labels,
                                         __global float *loss, XENT_ARGS)
{
    __local float buf[MAX_GROUP];
    const size_t row = get_group_id(0);
    const float v = xent_group(buf, x, (long)labels[row], C, has_ignore, ignore, bad);
    if (get_local_id(0) == 0)
        loss[row] = v;
}

__kernel void clrun_softmax_xent_f32_i64(__global const float *x, __global const long *labels,
                                         __global float *loss, XENT_ARGS)
{
    __local float buf[MAX_GROUP];
    const size_t row = get_group_id(0);
    const float v = xent_group(buf, x, labels[row], C, has_ignore, ignore, bad);
    if (get_local_id(0) == 0)
        loss[row] = v;
}

__kernel void clrun_softmax_xent_grad_f32_i32(__global const float *x, __global const int *labels,
                                              __global const float *dloss, __global float *y,
                                              XENT_ARGS)
{
    __local float buf[MAX_GROUP];
    const size_t row = get_group_id(0);
    xent_grad_group(buf, x, (long)labels[row], dloss[row], y, C, has_ignore, ignore, bad);
}

__kernel void clrun_softmax_xent_grad_f32_i64(__global const float *x,
                                              __global const long *labels,
                                              __global const float *dloss, __global float *y,
                                              XENT_ARGS)
{
    __local float buf[MAX_GROUP];
    const size_t row = get_group_id(0);
    xent_grad_group(buf, x, labels[row], dloss[row], y, C, has_ignore, ignore, bad);
}

/* After either op's kernel, one work-item: the label of the first bad row (bad[0], when one
 * was found) into bad[2] and bad[3], so that the report can name it. */
__kernel void clrun_bad_label_i32(__global const int *labels, volatile __global uint *bad,
                                  const ulong rows)
{
    const uint at = bad[0];
    if (at < 0xfffffffeu && at < rows) {
        const ulong v = (ulong)(long)labels[at];
        bad[2] = (uint)v;
        bad[3] = (uint)(v >> 32);
    }
}

__kernel void clrun_bad_label_i64(__global const long *labels, volatile __global uint *bad,
                                  const ulong rows)
{
    const uint at = bad[0];
    if (at < 0xfffffffeu && at < rows) {
        const ulong v = (ulong)labels[at];
        bad[2] = (uint)v;
        bad[3] = (uint)(v >> 32);
    }
}

/* ---- one work-group per row (devices with local memory) ----------------------------------- */

__kernel void clrun_softmax_f32(__global const float *x, __global float *y, const ulong N,
                                const ulong M, const int causal, const int log_form)
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
    for (ulong j = lid; j < kept; j += size) {
        const float e = exp(xr[j] - m);
        if (!log_form)
            yr[j] = e;
        s += e;
    }
    s = group_sum(buf, s);
    const float shift = m + log(s);
    for (ulong j = lid; j < N; j += size)
        yr[j] = j >= kept ? 0.0f : log_form ? xr[j] - shift : yr[j] / s;
}

__kernel void clrun_layernorm_f32(__global const float *x, __global const float *gamma,
                                  __global const float *beta, __global float *y, const ulong D,
                                  const float eps, const int per_row, const ulong C,
                                  const int has_beta)
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
    const ulong c = row % C;
    for (ulong j = lid; j < D; j += size) {
        const ulong p = per_row ? c : j;
        yr[j] = (xr[j] - mean) * inv * gamma[p] + (has_beta ? beta[p] : 0.0f);
    }
}

/* ---- rows along an inner axis: [outer, D, inner], one work-item per (outer, inner) -------- */

__kernel void clrun_softmax_strided(__global const float *x, __global float *y, const ulong D,
                                    const ulong inner, const int log_form)
{
    const size_t id = get_global_id(0);
    const ulong o = id / inner, i = id % inner;
    __global const float *xr = x + o * D * inner + i;
    __global float *yr = y + o * D * inner + i;
    float m = -INFINITY;
    for (ulong d = 0; d < D; d++)
        m = fmax(m, xr[d * inner]);
    float s = 0.0f;
    for (ulong d = 0; d < D; d++) {
        const float e = exp(xr[d * inner] - m);
        if (!log_form)
            yr[d * inner] = e;
        s += e;
    }
    const float shift = m + log(s);
    for (ulong d = 0; d < D; d++)
        yr[d * inner] = log_form ? xr[d * inner] - shift : yr[d * inner] / s;
}

/* argmax (is_min 0) or argmin (1) along the middle axis of [outer, D, inner]: the first index
 * of the extreme value, or the last with select_last. */
__kernel void clrun_arg_extreme(__global const float *x, __global long *y, const ulong D,
                                const ulong inner, const int is_min, const int select_last)
{
    const size_t id = get_global_id(0);
    const ulong o = id / inner, i = id % inner;
    __global const float *xr = x + o * D * inner + i;
    float best = xr[0];
    long at = 0;
    for (ulong d = 1; d < D; d++) {
        const float v = xr[d * inner];
        const bool better = is_min ? (select_last ? v <= best : v < best)
                                   : (select_last ? v >= best : v > best);
        if (better) {
            best = v;
            at = (long)d;
        }
    }
    y[id] = at;
}

/* batchnorm (inference) over [N, C, inner]: work-item (b, plane = n * C + c) normalises the
 * block [b * B, b * B + B) of the plane, B = ceil(inner / global size 0): one element where the
 * host launches one work-item per element (devices with local memory), a few thousand on CPUs,
 * the channel's factor computed once. Every element takes the same expression either way. */
__kernel void clrun_batchnorm(__global const float *x, __global const float *scale,
                              __global const float *bias, __global const float *mean,
                              __global const float *var, __global float *y, const ulong C,
                              const ulong inner, const float eps)
{
    const size_t plane = get_global_id(1);
    const ulong B = (inner + get_global_size(0) - 1) / get_global_size(0);
    const ulong i0 = get_global_id(0) * B, i1 = min(inner, i0 + B);
    if (i0 >= inner)
        return;
    const ulong c = plane % C;
    const float a = scale[c] / sqrt(var[c] + eps), m = mean[c], b = bias[c];
    __global const float *xp = x + plane * inner;
    __global float *yp = y + plane * inner;
    for (ulong i = i0; i < i1; i++)
        yp[i] = (xp[i] - m) * a + b;
}
