/* Elementwise ops. Each work-item computes one element; global sizes are rounded up to the
 * work-group size, so the last work-group checks its indices against n. Integer arithmetic goes through
 * uint so that overflow wraps (signed overflow is undefined in OpenCL C, as in C). */

/* Binary op codes of the broadcasting kernels; lib/ops_elementwise.c uses the same numbers. */
#define OP_ADD 0
#define OP_SUB 1
#define OP_MUL 2
#define OP_DIV 3
#define OP_MAX 4
#define OP_MIN 5

/* A work-group wholly inside [0, n) skips the per-element check: without a branch per element,
 * CPU compilers (POCL) vectorize the loop over its work-items. Only the last group checks. */
#define WHOLE_GROUP(n) ((get_group_id(0) + 1) * get_local_size(0) <= (n))

#define UNARY(T, EXPR)                                                                             \
    const size_t i = get_global_id(0);                                                             \
    if (WHOLE_GROUP(n) || i < n) {                                                                 \
        const T v = x[i];                                                                          \
        y[i] = (EXPR);                                                                             \
    }

#define BINARY(T, EXPR)                                                                            \
    const size_t i = get_global_id(0);                                                             \
    if (WHOLE_GROUP(n) || i < n) {                                                                 \
        const T x = a[i], y = b[i];                                                                \
        out[i] = (EXPR);                                                                           \
    }

__kernel void clrun_neg_f32(__global const float *x, __global float *y, const ulong n)
{
    UNARY(float, -v)
}

__kernel void clrun_abs_f32(__global const float *x, __global float *y, const ulong n)
{
    UNARY(float, fabs(v))
}

__kernel void clrun_relu_f32(__global const float *x, __global float *y, const ulong n)
{
    UNARY(float, fmax(v, 0.0f))
}

__kernel void clrun_gelu_f32(__global const float *x, __global float *y, const ulong n)
{
    UNARY(float, 0.5f * v * (1.0f + tanh(0.7978845608028654f * (v + 0.044715f * v * v * v))))
}

/* The exact GELU (BERT), x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)), written with erfc: for x far
 * below 0, 1 + erf cancels to a few ulps of 1 while erfc(-x / sqrt 2) keeps full precision. */
__kernel void clrun_gelu_erf_f32(__global const float *x, __global float *y, const ulong n)
{
    UNARY(float, 0.5f * v * erfc(-0.7071067811865476f * v))
}

__kernel void clrun_sigmoid_f32(__global const float *x, __global float *y, const ulong n)
{
    UNARY(float, 1.0f / (1.0f + exp(-v)))
}

__kernel void clrun_tanh_f32(__global const float *x, __global float *y, const ulong n)
{
    UNARY(float, tanh(v))
}

__kernel void clrun_exp_f32(__global const float *x, __global float *y, const ulong n)
{
    UNARY(float, exp(v))
}

__kernel void clrun_log_f32(__global const float *x, __global float *y, const ulong n)
{
    UNARY(float, log(v))
}

__kernel void clrun_sqrt_f32(__global const float *x, __global float *y, const ulong n)
{
    UNARY(float, sqrt(v))
}

__kernel void clrun_rsqrt_f32(__global const float *x, __global float *y, const ulong n)
{
    UNARY(float, rsqrt(v))
}

__kernel void clrun_neg_i32(__global const int *x, __global int *y, const ulong n)
{
    UNARY(int, as_int(0u - as_uint(v)))
}

__kernel void clrun_abs_i32(__global const int *x, __global int *y, const ulong n)
{
    UNARY(int, as_int(abs(v)))
}

__kernel void clrun_relu_i32(__global const int *x, __global int *y, const ulong n)
{
    UNARY(int, max(v, 0))
}

/* alpha * x + beta. */
__kernel void clrun_scale_f32(__global const float *x, __global float *y, const ulong n,
                              const float alpha, const float beta)
{
    UNARY(float, alpha * v + beta)
}

/* Copies n 32-bit words: copy and reshape of any 4-byte dtype, bit for bit. */
__kernel void clrun_copy_u32(__global const uint *x, __global uint *y, const ulong n)
{
    UNARY(uint, v)
}

__kernel void clrun_add_f32(__global const float *a, __global const float *b,
                            __global float *out, const ulong n)
{
    BINARY(float, x + y)
}

__kernel void clrun_add_i32(__global const int *a, __global const int *b,
                            __global int *out, const ulong n)
{
    BINARY(int, as_int(as_uint(x) + as_uint(y)))
}

__kernel void clrun_sub_f32(__global const float *a, __global const float *b,
                            __global float *out, const ulong n)
{
    BINARY(float, x - y)
}

__kernel void clrun_sub_i32(__global const int *a, __global const int *b,
                            __global int *out, const ulong n)
{
    BINARY(int, as_int(as_uint(x) - as_uint(y)))
}

__kernel void clrun_mul_f32(__global const float *a, __global const float *b,
                            __global float *out, const ulong n)
{
    BINARY(float, x * y)
}

__kernel void clrun_mul_i32(__global const int *a, __global const int *b,
                            __global int *out, const ulong n)
{
    BINARY(int, as_int(as_uint(x) * as_uint(y)))
}

__kernel void clrun_div_f32(__global const float *a, __global const float *b,
                            __global float *out, const ulong n)
{
    BINARY(float, x / y)
}

__kernel void clrun_maximum_f32(__global const float *a, __global const float *b,
                                __global float *out, const ulong n)
{
    BINARY(float, fmax(x, y))
}

__kernel void clrun_maximum_i32(__global const int *a, __global const int *b,
                                __global int *out, const ulong n)
{
    BINARY(int, max(x, y))
}

__kernel void clrun_minimum_f32(__global const float *a, __global const float *b,
                                __global float *out, const ulong n)
{
    BINARY(float, fmin(x, y))
}

__kernel void clrun_minimum_i32(__global const int *a, __global const int *b,
                                __global int *out, const ulong n)
{
    BINARY(int, min(x, y))
}
/* Broadcasting: the output's shape and each input's strides (0 along a broadcast dimension)
 * come from meta = [rank, dims[rank], strides_a[rank], strides_b[rank]], with dimensions the
 * host has already merged where it could (so rank is usually 1 to 3). */
void broadcast_offsets(__global const ulong *meta, ulong i, ulong *oa, ulong *ob)
{
    const uint rank = (uint)meta[0];
    ulong rem = i, a = 0, b = 0;
    for (uint d = rank; d-- > 0;) {
        const ulong dim = meta[1 + d];
        const ulong c = rem % dim;
        rem /= dim;
        a += c * meta[1 + rank + d];
        b += c * meta[1 + 2 * rank + d];
    }
    *oa = a;
    *ob = b;
}

float binary_f32(const int op, const float x, const float y)
{
    switch (op) {
    case OP_ADD: return x + y;
    case OP_SUB: return x - y;
    case OP_MUL: return x * y;
    case OP_DIV: return x / y;
    case OP_MAX: return fmax(x, y);
    default: return fmin(x, y);
    }
}

int binary_i32(const int op, const int x, const int y)
{
    switch (op) {
    case OP_ADD: return as_int(as_uint(x) + as_uint(y));
    case OP_SUB: return as_int(as_uint(x) - as_uint(y));
    case OP_MUL: return as_int(as_uint(x) * as_uint(y));
    case OP_MAX: return max(x, y);
    default: return min(x, y);
    }
}

__kernel void clrun_broadcast_f32(__global const float *a, __global const float *b,
                                  __global float *out, const ulong n,
                                  __global const ulong *meta, const int op)
{
    const size_t i = get_global_id(0);
    if (i >= n)
        return;
    ulong oa, ob;
    broadcast_offsets(meta, i, &oa, &ob);
    out[i] = binary_f32(op, a[oa], b[ob]);
}

__kernel void clrun_broadcast_i32(__global const int *a, __global const int *b,
                                  __global int *out, const ulong n,
                                  __global const ulong *meta, const int op)
{
    const size_t i = get_global_id(0);
    if (i >= n)
        return;
    ulong oa, ob;
    broadcast_offsets(meta, i, &oa, &ob);
    out[i] = binary_i32(op, a[oa], b[ob]);
}
