/* Plain C references of the ops: see op_reference.h. */
#include "op_reference.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

uint64_t ref_elements(const clrun_tensor_type *t)
{
    uint64_t n = 1;
    for (int i = 0; i < t->rank; i++)
        n *= (uint64_t)t->shape[i];
    return n;
}

double ref_unary_f32(const char *op, float xf)
{
    double x = xf;
    if (!strcmp(op, "neg")) return -x;
    if (!strcmp(op, "abs")) return fabs(x);
    if (!strcmp(op, "relu")) return x > 0 ? x : 0;
    if (!strcmp(op, "gelu")) return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    if (!strcmp(op, "gelu_erf")) return 0.5 * x * (1 + erf(x / sqrt(2)));
    if (!strcmp(op, "sigmoid")) return 1 / (1 + exp(-x));
    if (!strcmp(op, "tanh")) return tanh(x);
    if (!strcmp(op, "exp")) return exp(x);
    if (!strcmp(op, "log")) return log(x);
    if (!strcmp(op, "sqrt")) return sqrt(x);
    if (!strcmp(op, "rsqrt")) return 1 / sqrt(x);
    if (!strcmp(op, "copy")) return x;
    abort();
}

int32_t ref_unary_i32(const char *op, int32_t x)
{
    uint32_t u = (uint32_t)x;
    if (!strcmp(op, "neg")) return (int32_t)(0u - u);
    if (!strcmp(op, "abs")) return x < 0 ? (int32_t)(0u - u) : x;
    if (!strcmp(op, "relu")) return x > 0 ? x : 0;
    if (!strcmp(op, "copy")) return x;
    abort();
}

/* The offset in t (right-aligned against out, broadcast dims read index 0) of out's element i. */
static uint64_t broadcast_offset(const clrun_tensor_type *t, const clrun_tensor_type *out, uint64_t i)
{
    uint64_t offset = 0, stride = 1;
    for (int d = out->rank - 1; d >= 0; d--) {
        uint64_t c = i % (uint64_t)out->shape[d];
        i /= (uint64_t)out->shape[d];
        int j = d - (out->rank - t->rank);
        if (j < 0)
            continue;
        if (t->shape[j] != 1)
            offset += c * stride;
        stride *= (uint64_t)t->shape[j];
    }
    return offset;
}

static double binary_double(const char *op, double x, double y)
{
    if (!strcmp(op, "add")) return x + y;
    if (!strcmp(op, "sub")) return x - y;
    if (!strcmp(op, "mul")) return x * y;
    if (!strcmp(op, "div")) return x / y;
    if (!strcmp(op, "maximum")) return x > y ? x : y;
    if (!strcmp(op, "minimum")) return x < y ? x : y;
    abort();
}

void ref_binary_f32(const char *op, const clrun_tensor_type *ta, const float *a,
                    const clrun_tensor_type *tb, const float *b, const clrun_tensor_type *out,
                    double *result)
{
    for (uint64_t i = 0; i < ref_elements(out); i++)
        result[i] = binary_double(op, a[broadcast_offset(ta, out, i)], b[broadcast_offset(tb, out, i)]);
}

void ref_binary_i32(const char *op, const clrun_tensor_type *ta, const int32_t *a,
                    const clrun_tensor_type *tb, const int32_t *b, const clrun_tensor_type *out,
                    int32_t *result)
{
    for (uint64_t i = 0; i < ref_elements(out); i++) {
        int32_t x = a[broadcast_offset(ta, out, i)], y = b[broadcast_offset(tb, out, i)];
        uint32_t ux = (uint32_t)x, uy = (uint32_t)y;
        if (!strcmp(op, "add")) result[i] = (int32_t)(ux + uy);
        else if (!strcmp(op, "sub")) result[i] = (int32_t)(ux - uy);
        else if (!strcmp(op, "mul")) result[i] = (int32_t)(ux * uy);
        else if (!strcmp(op, "maximum")) result[i] = x > y ? x : y;
        else if (!strcmp(op, "minimum")) result[i] = x < y ? x : y;
        else abort();
    }
}

/* The batch part of a type: all but the last two dims. */
static clrun_tensor_type batch_of(const clrun_tensor_type *t)
{
    clrun_tensor_type b = *t;
    b.rank = t->rank - 2;
    return b;
}

void ref_matmul(const clrun_tensor_type *ta, const float *a, const clrun_tensor_type *tb,
                const float *b, const float *bias, bool transpose_a, bool transpose_b,
                double alpha, const clrun_tensor_type *out, double *result, double *scale)
{
    int64_t M = out->shape[out->rank - 2], N = out->shape[out->rank - 1];
    int64_t K = transpose_a ? ta->shape[ta->rank - 2] : ta->shape[ta->rank - 1];
    clrun_tensor_type ba = batch_of(ta), bb = batch_of(tb), bo = batch_of(out);
    for (uint64_t z = 0; z < ref_elements(&bo); z++) {
        const float *az = a + broadcast_offset(&ba, &bo, z) * (uint64_t)(M * K);
        const float *bz = b + broadcast_offset(&bb, &bo, z) * (uint64_t)(K * N);
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                double sum = 0, abs_sum = 0;
                for (int64_t k = 0; k < K; k++) {
                    double x = transpose_a ? az[k * M + m] : az[m * K + k];
                    double y = transpose_b ? bz[n * K + k] : bz[k * N + n];
                    sum += x * y;
                    abs_sum += fabs(x * y);
                }
                uint64_t o = z * (uint64_t)(M * N) + (uint64_t)(m * N + n);
                result[o] = alpha * sum + (bias ? bias[n] : 0);
                scale[o] = fabs(alpha) * abs_sum + (bias ? fabs(bias[n]) : 0);
            }
    }
}

void ref_softmax(const clrun_tensor_type *t, const float *x, bool causal, double *result)
{
    int64_t N = t->shape[t->rank - 1], M = t->rank >= 2 ? t->shape[t->rank - 2] : 1;
    uint64_t rows = ref_elements(t) / (uint64_t)N;
    for (uint64_t r = 0; r < rows; r++) {
        const float *row = x + r * (uint64_t)N;
        double *y = result + r * (uint64_t)N;
        int64_t i = (int64_t)(r % (uint64_t)M), last = causal ? i + N - M : N - 1;
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < N && j <= last; j++)
            mx = row[j] > mx ? row[j] : mx;
        for (int64_t j = 0; j < N && j <= last; j++)
            sum += exp(row[j] - mx);
        for (int64_t j = 0; j < N; j++)
            y[j] = j <= last ? exp(row[j] - mx) / sum : 0;
    }
}

void ref_layernorm(const clrun_tensor_type *t, const float *x, const float *gamma,
                   const float *beta, double eps, double *result, double *scale)
{
    int64_t D = t->shape[t->rank - 1];
    uint64_t rows = ref_elements(t) / (uint64_t)D;
    for (uint64_t r = 0; r < rows; r++) {
        const float *row = x + r * (uint64_t)D;
        double mean = 0, var = 0;
        for (int64_t j = 0; j < D; j++)
            mean += row[j];
        mean /= (double)D;
        for (int64_t j = 0; j < D; j++)
            var += (row[j] - mean) * (row[j] - mean);
        var /= (double)D;
        double inv = 1 / sqrt(var + eps);
        for (int64_t j = 0; j < D; j++) {
            uint64_t o = r * (uint64_t)D + (uint64_t)j;
            result[o] = (row[j] - mean) * inv * gamma[j] + beta[j];
            scale[o] = fabs(gamma[j]) * (fabs(row[j]) + fabs(mean)) * inv + fabs(beta[j]);
        }
    }
}

void ref_reduce(const char *op, const clrun_tensor_type *t, const float *x, const bool *reduced,
                double *result, double *scale)
{
    clrun_tensor_type kept = {CLRUN_F32, 0, {0}};
    uint64_t count = 1;
    for (int d = 0; d < t->rank; d++) {
        if (reduced[d])
            count *= (uint64_t)t->shape[d];
        else
            kept.shape[kept.rank++] = t->shape[d];
    }
    uint64_t outputs = ref_elements(&kept);
    bool is_max = !strcmp(op, "reduce_max");
    for (uint64_t o = 0; o < outputs; o++) {
        result[o] = is_max ? -INFINITY : 0;
        scale[o] = 0;
    }
    for (uint64_t i = 0; i < ref_elements(t); i++) {
        /* Index of i's output: its coordinates on the kept axes. */
        uint64_t rem = i, o = 0, stride = 1;
        for (int d = t->rank - 1; d >= 0; d--) {
            uint64_t c = rem % (uint64_t)t->shape[d];
            rem /= (uint64_t)t->shape[d];
            if (!reduced[d]) {
                o += c * stride;
                stride *= (uint64_t)t->shape[d];
            }
        }
        if (is_max)
            result[o] = x[i] > result[o] ? x[i] : result[o];
        else
            result[o] += x[i];
        scale[o] += fabs(x[i]);
    }
    if (!strcmp(op, "reduce_mean"))
        for (uint64_t o = 0; o < outputs; o++) {
            result[o] /= (double)count;
            scale[o] /= (double)count;
        }
}

void ref_transpose(const clrun_tensor_type *t, const uint32_t *x, const int *perm, uint32_t *out)
{
    uint64_t strides[CLRUN_MAX_DIMS], stride = 1;
    for (int d = t->rank - 1; d >= 0; d--) {
        strides[d] = stride;
        stride *= (uint64_t)t->shape[d];
    }
    for (uint64_t i = 0; i < ref_elements(t); i++) {
        uint64_t rem = i, offset = 0;
        for (int d = t->rank - 1; d >= 0; d--) {
            uint64_t n = (uint64_t)t->shape[perm[d]];
            offset += rem % n * strides[perm[d]];
            rem /= n;
        }
        out[i] = x[offset];
    }
}

void ref_concat(int n, const clrun_tensor_type *types, const uint32_t *const *inputs, int axis,
                uint32_t *out)
{
    uint64_t outer = 1, inner = 1, total = 0;
    for (int d = 0; d < axis; d++)
        outer *= (uint64_t)types[0].shape[d];
    for (int d = axis + 1; d < types[0].rank; d++)
        inner *= (uint64_t)types[0].shape[d];
    for (int i = 0; i < n; i++)
        total += (uint64_t)types[i].shape[axis];
    uint64_t before = 0;
    for (int i = 0; i < n; i++) {
        uint64_t len = (uint64_t)types[i].shape[axis];
        for (uint64_t o = 0; o < outer; o++)
            for (uint64_t j = 0; j < len * inner; j++)
                out[(o * total + before) * inner + j] = inputs[i][o * len * inner + j];
        before += len;
    }
}

void ref_slice(const clrun_tensor_type *t, const uint32_t *x, int axis, int64_t start,
               int64_t end, uint32_t *out)
{
    uint64_t outer = 1, inner = 1, len = (uint64_t)t->shape[axis];
    for (int d = 0; d < axis; d++)
        outer *= (uint64_t)t->shape[d];
    for (int d = axis + 1; d < t->rank; d++)
        inner *= (uint64_t)t->shape[d];
    uint64_t n = (uint64_t)(end - start);
    for (uint64_t o = 0; o < outer; o++)
        for (uint64_t j = 0; j < n * inner; j++)
            out[o * n * inner + j] = x[(o * len + (uint64_t)start) * inner + j];
}

void ref_gather(const clrun_tensor_type *table_type, const uint32_t *table,
                const clrun_tensor_type *index_type, const int32_t *indices, uint32_t *out)
{
    int64_t V = table_type->shape[0], D = table_type->shape[1];
    for (uint64_t i = 0; i < ref_elements(index_type); i++)
        for (int64_t d = 0; d < D; d++)
            out[i * (uint64_t)D + (uint64_t)d] =
                indices[i] >= 0 && indices[i] < V ? table[(uint64_t)indices[i] * (uint64_t)D + (uint64_t)d] : 0;
}

void ref_conv2d(const clrun_tensor_type *tx, const float *x, const clrun_tensor_type *tw,
                const float *w, const float *bias, const ref_conv *conv,
                const clrun_tensor_type *out, double *result, double *scale)
{
    int64_t N = tx->shape[0], C = tx->shape[1], H = tx->shape[2], W = tx->shape[3];
    int64_t O = tw->shape[0], Cg = tw->shape[1], KH = tw->shape[2], KW = tw->shape[3];
    int64_t OH = out->shape[2], OW = out->shape[3], Og = O / conv->groups;
    (void)C;
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < O; o++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    double sum = bias ? bias[o] : 0, abs_sum = bias ? fabs(bias[o]) : 0;
                    int64_t g = o / Og;
                    for (int64_t c = 0; c < Cg; c++)
                        for (int64_t kh = 0; kh < KH; kh++)
                            for (int64_t kw = 0; kw < KW; kw++) {
                                int64_t ih = oh * conv->stride[0] - conv->pad[0] + kh * conv->dilation[0];
                                int64_t iw = ow * conv->stride[1] - conv->pad[1] + kw * conv->dilation[1];
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                                    continue;
                                double v = x[((n * tx->shape[1] + g * Cg + c) * H + ih) * W + iw];
                                double k = w[((o * Cg + c) * KH + kh) * KW + kw];
                                sum += v * k;
                                abs_sum += fabs(v * k);
                            }
                    int64_t i = ((n * O + o) * OH + oh) * OW + ow;
                    result[i] = sum;
                    scale[i] = abs_sum;
                }
}

void ref_conv_transpose2d(const clrun_tensor_type *tx, const float *x, const clrun_tensor_type *tw,
                          const float *w, const float *bias, const ref_conv *conv,
                          const clrun_tensor_type *out, double *result, double *scale)
{
    int64_t N = tx->shape[0], C = tx->shape[1], H = tx->shape[2], W = tx->shape[3];
    int64_t Og = tw->shape[1], KH = tw->shape[2], KW = tw->shape[3], Cg = C / conv->groups;
    int64_t O = out->shape[1], OH = out->shape[2], OW = out->shape[3];
    for (int64_t i = 0; i < N * O * OH * OW; i++) {
        int64_t o = i / (OH * OW) % O;
        result[i] = bias ? bias[o] : 0;
        scale[i] = bias ? fabs(bias[o]) : 0;
    }
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t ih = 0; ih < H; ih++)
                for (int64_t iw = 0; iw < W; iw++)
                    for (int64_t o1 = 0; o1 < Og; o1++)
                        for (int64_t kh = 0; kh < KH; kh++)
                            for (int64_t kw = 0; kw < KW; kw++) {
                                int64_t oh = ih * conv->stride[0] - conv->pad[0] + kh * conv->dilation[0];
                                int64_t ow = iw * conv->stride[1] - conv->pad[1] + kw * conv->dilation[1];
                                if (oh < 0 || oh >= OH || ow < 0 || ow >= OW)
                                    continue;
                                int64_t o = c / Cg * Og + o1;
                                double t = (double)x[((n * C + c) * H + ih) * W + iw] *
                                           (double)w[((c * Og + o1) * KH + kh) * KW + kw];
                                int64_t at = ((n * O + o) * OH + oh) * OW + ow;
                                result[at] += t;
                                scale[at] += fabs(t);
                            }
}

void ref_pool(bool max, const clrun_tensor_type *t, const float *x, const int *kernel,
              const int *stride, const int *pad, const clrun_tensor_type *out, double *result)
{
    int64_t NC = t->shape[0] * t->shape[1], H = t->shape[2], W = t->shape[3];
    int64_t OH = out->shape[2], OW = out->shape[3];
    for (int64_t p = 0; p < NC; p++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                double acc = max ? -INFINITY : 0;
                int count = 0;
                for (int kh = 0; kh < kernel[0]; kh++)
                    for (int kw = 0; kw < kernel[1]; kw++) {
                        int64_t ih = oh * stride[0] - pad[0] + kh, iw = ow * stride[1] - pad[1] + kw;
                        if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                            continue;
                        double v = x[(p * H + ih) * W + iw];
                        acc = max ? (v > acc ? v : acc) : acc + v;
                        count++;
                    }
                result[(p * OH + oh) * OW + ow] = max ? acc : acc / count;
            }
}

void ref_softmax_xent(const clrun_tensor_type *logits, const float *x, const int64_t *labels,
                      bool has_ignore, int64_t ignore, double *loss, double *scale)
{
    int64_t C = logits->shape[logits->rank - 1];
    uint64_t rows = ref_elements(logits) / (uint64_t)C;
    for (uint64_t r = 0; r < rows; r++) {
        const float *row = x + r * (uint64_t)C;
        int64_t label = labels[r];
        scale[r] = 0;
        if (has_ignore && label == ignore) {
            loss[r] = 0;
            continue;
        }
        if (label < 0 || label >= C) {
            loss[r] = NAN;
            continue;
        }
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < C; j++)
            mx = row[j] > mx ? row[j] : mx;
        for (int64_t j = 0; j < C; j++)
            sum += exp(row[j] - mx);
        loss[r] = log(sum) - (row[label] - mx);
        scale[r] = fabs(row[label] - mx) + log(sum) + 1;
    }
}

void ref_softmax_xent_grad(const clrun_tensor_type *logits, const float *x,
                           const int64_t *labels, const float *dloss, bool has_ignore,
                           int64_t ignore, double *result, double *scale)
{
    int64_t C = logits->shape[logits->rank - 1];
    uint64_t rows = ref_elements(logits) / (uint64_t)C;
    for (uint64_t r = 0; r < rows; r++) {
        const float *row = x + r * (uint64_t)C;
        double *y = result + r * (uint64_t)C, *s = scale + r * (uint64_t)C;
        int64_t label = labels[r];
        bool ignored = has_ignore && label == ignore, bad = !ignored && (label < 0 || label >= C);
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < C; j++)
            mx = row[j] > mx ? row[j] : mx;
        for (int64_t j = 0; j < C; j++)
            sum += exp(row[j] - mx);
        for (int64_t j = 0; j < C; j++) {
            double p = exp(row[j] - mx) / sum, onehot = j == label ? 1 : 0;
            y[j] = ignored ? 0 : bad ? NAN : (p - onehot) * dloss[r];
            s[j] = ignored || bad ? 0 : (p + onehot) * fabs(dloss[r]);
        }
    }
}

void ref_gather_grad(const clrun_tensor_type *indices, const int64_t *index_values,
                     const clrun_tensor_type *dy_type, const float *dy, bool with_axis, int axis,
                     const clrun_tensor_type *out, double *result, double *scale)
{
    uint64_t n = ref_elements(out);
    for (uint64_t i = 0; i < n; i++)
        result[i] = scale[i] = 0;
    if (!with_axis)
        axis = 0;
    int64_t size = out->shape[axis];
    /* dy's coordinates [A..., J..., B...]: J the index's position, the output's [A..., v, B...] */
    uint64_t count = ref_elements(dy_type);
    for (uint64_t e = 0; e < count; e++) {
        int64_t c[CLRUN_MAX_DIMS + 1];
        uint64_t rest = e;
        for (int d = dy_type->rank - 1; d >= 0; d--) {
            c[d] = (int64_t)(rest % (uint64_t)dy_type->shape[d]);
            rest /= (uint64_t)dy_type->shape[d];
        }
        uint64_t j = 0;
        for (int d = 0; d < indices->rank; d++)
            j = j * (uint64_t)indices->shape[d] + (uint64_t)c[axis + d];
        int64_t v = index_values[j];
        if (with_axis && v < 0)
            v += size;
        if (v < 0 || v >= size)
            continue;
        uint64_t at = 0;
        for (int d = 0; d < out->rank; d++) {
            int64_t coord = d < axis ? c[d] : d == axis ? v : c[d - 1 + indices->rank];
            at = at * (uint64_t)out->shape[d] + (uint64_t)coord;
        }
        result[at] += dy[e];
        scale[at] += fabs(dy[e]);
    }
}

void ref_conv2d_grad_weight(const clrun_tensor_type *tx, const float *x, const clrun_tensor_type *tdy,
                            const float *dy, const ref_conv *conv, const clrun_tensor_type *tdw,
                            double *result, double *scale)
{
    int64_t N = tx->shape[0], C = tx->shape[1], H = tx->shape[2], W = tx->shape[3];
    int64_t O = tdy->shape[1], OH = tdy->shape[2], OW = tdy->shape[3];
    int64_t Cg = tdw->shape[1], KH = tdw->shape[2], KW = tdw->shape[3], Og = O / conv->groups;
    for (int64_t o = 0; o < O; o++)
        for (int64_t c = 0; c < Cg; c++)
            for (int64_t kh = 0; kh < KH; kh++)
                for (int64_t kw = 0; kw < KW; kw++) {
                    double sum = 0, abs_sum = 0;
                    for (int64_t n = 0; n < N; n++)
                        for (int64_t oh = 0; oh < OH; oh++)
                            for (int64_t ow = 0; ow < OW; ow++) {
                                int64_t ih = oh * conv->stride[0] - conv->pad[0] + kh * conv->dilation[0];
                                int64_t iw = ow * conv->stride[1] - conv->pad[1] + kw * conv->dilation[1];
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                                    continue;
                                double v = x[((n * C + o / Og * Cg + c) * H + ih) * W + iw];
                                double d = dy[((n * O + o) * OH + oh) * OW + ow];
                                sum += v * d;
                                abs_sum += fabs(v * d);
                            }
                    int64_t i = ((o * Cg + c) * KH + kh) * KW + kw;
                    result[i] = sum;
                    scale[i] = abs_sum;
                }
}

void ref_pool_grad(bool max, const clrun_tensor_type *tx, const float *x, const clrun_tensor_type *tdy,
                   const float *dy, const ref_pool_window *p, double *result, double *scale)
{
    int64_t NC = tx->shape[0] * tx->shape[1], H = tx->shape[2], W = tx->shape[3];
    int64_t OH = tdy->shape[2], OW = tdy->shape[3];
    for (int64_t i = 0; i < NC * H * W; i++)
        result[i] = scale[i] = 0;
    /* scatter each window's dy onto its taps: every dx is a sum, so the order is no matter here */
    for (int64_t plane = 0; plane < NC; plane++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                double d = dy[(plane * OH + oh) * OW + ow];
                int64_t taps[64] = {0}, count = 0, padded = 0;
                for (int kh = 0; kh < p->kernel[0]; kh++)
                    for (int kw = 0; kw < p->kernel[1]; kw++) {
                        int64_t ih = oh * p->stride[0] - p->pad[0] + kh * p->dilation[0];
                        int64_t iw = ow * p->stride[1] - p->pad[1] + kw * p->dilation[1];
                        if (ih < H + p->pad_end[0] && iw < W + p->pad_end[1])
                            padded++;
                        if (ih >= 0 && ih < H && iw >= 0 && iw < W && count < 64)
                            taps[count++] = ih * W + iw;
                    }
                const float *xp = x ? x + plane * H * W : NULL;
                if (count == 0) /* the pools' type rules leave no such window */
                    continue;
                if (max) {
                    int64_t best = taps[0];
                    double m = -INFINITY;
                    for (int64_t t = 0; t < count; t++)
                        if (xp[taps[t]] > m || isnan(xp[taps[t]]))
                            m = xp[taps[t]], best = taps[t];
                    result[plane * H * W + best] += d;
                    scale[plane * H * W + best] += fabs(d);
                    continue;
                }
                double share = d / (double)(p->count_include_pad ? padded : count);
                for (int64_t t = 0; t < count; t++) {
                    result[plane * H * W + taps[t]] += share;
                    scale[plane * H * W + taps[t]] += fabs(share);
                }
            }
}

void ref_col2im(const clrun_tensor_type *tcols, const float *cols, const ref_col2im_geometry *p,
                double *result, double *scale)
{
    const int64_t N = tcols->shape[0], taps = (int64_t)p->kernel[0] * p->kernel[1];
    const int64_t rows = tcols->shape[p->transposed ? 2 : 1], L = tcols->shape[p->transposed ? 1 : 2];
    const int64_t C = rows / taps, H = p->image[0], W = p->image[1];
    int64_t extent[2];
    for (int a = 0; a < 2; a++)
        extent[a] = (p->image[a] + p->pad[a] + p->pad_end[a] - p->dilation[a] * (p->kernel[a] - 1) - 1) /
                        p->stride[a] + 1;
    const int64_t OW = extent[1];
    memset(result, 0, (size_t)(N * C * H * W) * sizeof *result);
    memset(scale, 0, (size_t)(N * C * H * W) * sizeof *scale);
    for (int64_t n = 0; n < N; n++)
        for (int64_t r = 0; r < rows; r++) {
            const int64_t c = r / taps, kh = r / p->kernel[1] % p->kernel[0], kw = r % p->kernel[1];
            for (int64_t l = 0; l < L; l++) {
                const int64_t oh = l / OW, ow = l % OW;
                const int64_t ih = oh * p->stride[0] - p->pad[0] + kh * p->dilation[0];
                const int64_t iw = ow * p->stride[1] - p->pad[1] + kw * p->dilation[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                    continue;
                const double v = cols[p->transposed ? (n * L + l) * rows + r : (n * rows + r) * L + l];
                const int64_t at = ((n * C + c) * H + ih) * W + iw;
                result[at] += v;
                scale[at] += fabs(v);
            }
        }
}

/* ---- scatter ops and index tuples -------------------------------------------------------- */

static size_t ref_dtype_size(clrun_dtype t) { return clrun_dtype_size(t); }

/* *target = u, or += u, *= u in the dtype. */
static void ref_apply(clrun_dtype t, void *target, const void *u, int reduction)
{
    size_t size = ref_dtype_size(t);
    if (reduction == 0) {
        memcpy(target, u, size);
        return;
    }
    if (t == CLRUN_F32) {
        float a, b;
        memcpy(&a, target, 4);
        memcpy(&b, u, 4);
        a = (float)(reduction == 1 ? (double)a + b : (double)a * b);
        memcpy(target, &a, 4);
    } else if (t == CLRUN_F64) {
        double a, b;
        memcpy(&a, target, 8);
        memcpy(&b, u, 8);
        a = reduction == 1 ? a + b : a * b;
        memcpy(target, &a, 8);
    } else if (t == CLRUN_I32) {
        uint32_t a, b;
        memcpy(&a, target, 4);
        memcpy(&b, u, 4);
        a = reduction == 1 ? a + b : a * b;
        memcpy(target, &a, 4);
    } else {
        uint64_t a, b;
        memcpy(&a, target, 8);
        memcpy(&b, u, 8);
        a = reduction == 1 ? a + b : a * b;
        memcpy(target, &a, 8);
    }
}

static bool ref_normalize(int64_t *index, int64_t dim)
{
    if (*index < 0)
        *index += dim;
    return *index >= 0 && *index < dim;
}

bool ref_scatter_elements(const clrun_tensor_type *data_type, const void *data,
                          const clrun_tensor_type *index_type, const int64_t *indices,
                          const void *updates, int axis, int reduction, void *out)
{
    size_t size = ref_dtype_size(data_type->dtype);
    memcpy(out, data, ref_elements(data_type) * size);
    int rank = data_type->rank;
    for (uint64_t i = 0; i < ref_elements(index_type); i++) {
        int64_t coords[CLRUN_MAX_DIMS];
        uint64_t rem = i;
        for (int d = rank - 1; d >= 0; d--) {
            coords[d] = (int64_t)(rem % (uint64_t)index_type->shape[d]);
            rem /= (uint64_t)index_type->shape[d];
        }
        int64_t index = indices[i];
        if (!ref_normalize(&index, data_type->shape[axis]))
            return false;
        coords[axis] = index;
        uint64_t at = 0;
        for (int d = 0; d < rank; d++)
            at = at * (uint64_t)data_type->shape[d] + (uint64_t)coords[d];
        ref_apply(data_type->dtype, (char *)out + at * size, (const char *)updates + i * size,
                  reduction);
    }
    return true;
}

/* The element offset of tuple p's slice within its batch, or false. */
static bool ref_tuple(const clrun_tensor_type *data_type, const int64_t *tuple, int k, int batch,
                      uint64_t *offset)
{
    uint64_t at = 0;
    for (int c = 0; c < k; c++) {
        int64_t index = tuple[c];
        if (!ref_normalize(&index, data_type->shape[batch + c]))
            return false;
        at = at * (uint64_t)data_type->shape[batch + c] + (uint64_t)index;
    }
    for (int d = batch + k; d < data_type->rank; d++)
        at *= (uint64_t)data_type->shape[d];
    *offset = at;
    return true;
}

bool ref_scatter_nd(const clrun_tensor_type *data_type, const void *data,
                    const clrun_tensor_type *index_type, const int64_t *indices,
                    const void *updates, int reduction, void *out)
{
    size_t size = ref_dtype_size(data_type->dtype);
    memcpy(out, data, ref_elements(data_type) * size);
    int k = (int)index_type->shape[index_type->rank - 1];
    uint64_t tuples = ref_elements(index_type) / (uint64_t)k, slice = 1;
    for (int d = k; d < data_type->rank; d++)
        slice *= (uint64_t)data_type->shape[d];
    for (uint64_t p = 0; p < tuples; p++) {
        uint64_t at;
        if (!ref_tuple(data_type, indices + p * (uint64_t)k, k, 0, &at))
            return false;
        for (uint64_t s = 0; s < slice; s++)
            ref_apply(data_type->dtype, (char *)out + (at + s) * size,
                      (const char *)updates + (p * slice + s) * size, reduction);
    }
    return true;
}

bool ref_gather_nd(const clrun_tensor_type *data_type, const void *data,
                   const clrun_tensor_type *index_type, const int64_t *indices, int batch,
                   void *out)
{
    size_t size = ref_dtype_size(data_type->dtype);
    int k = (int)index_type->shape[index_type->rank - 1];
    uint64_t tuples = ref_elements(index_type) / (uint64_t)k, slice = 1, batches = 1, batch_size = 1;
    for (int d = batch + k; d < data_type->rank; d++)
        slice *= (uint64_t)data_type->shape[d];
    for (int d = 0; d < batch; d++)
        batches *= (uint64_t)data_type->shape[d];
    for (int d = batch; d < data_type->rank; d++)
        batch_size *= (uint64_t)data_type->shape[d];
    for (uint64_t p = 0; p < tuples; p++) {
        uint64_t at, b = p / (tuples / batches);
        if (!ref_tuple(data_type, indices + p * (uint64_t)k, k, batch, &at))
            return false;
        memcpy((char *)out + p * slice * size, (const char *)data + (b * batch_size + at) * size,
               slice * size);
    }
    return true;
}

/* Whether (a, i) ranks before (b, j). */
static bool ref_ranks_before(double a, int64_t i, double b, int64_t j, bool largest)
{
    if (isnan(a) || isnan(b)) {
        if (isnan(a) && isnan(b))
            return i < j;
        return isnan(a) ? largest : !largest;
    }
    if (a == b)
        return i < j;
    return largest ? a > b : a < b;
}

void ref_top_k(const clrun_tensor_type *x_type, const double *x, int axis, int64_t k,
               bool largest, int64_t *out)
{
    uint64_t len = (uint64_t)x_type->shape[axis], inner = 1, outer = 1;
    for (int d = axis + 1; d < x_type->rank; d++)
        inner *= (uint64_t)x_type->shape[d];
    for (int d = 0; d < axis; d++)
        outer *= (uint64_t)x_type->shape[d];
    int64_t *order = malloc(len * sizeof *order);
    for (uint64_t o = 0; o < outer; o++)
        for (uint64_t in = 0; in < inner; in++) {
            const double *line = x + o * len * inner + in;
            /* insertion sort of the positions by rank */
            for (uint64_t j = 0; j < len; j++) {
                uint64_t at = j;
                while (at > 0 && ref_ranks_before(line[j * inner], (int64_t)j,
                                                  line[(uint64_t)order[at - 1] * inner], order[at - 1],
                                                  largest)) {
                    order[at] = order[at - 1];
                    at--;
                }
                order[at] = (int64_t)j;
            }
            for (int64_t t = 0; t < k; t++)
                out[o * (uint64_t)k * inner + (uint64_t)t * inner + in] = order[t];
        }
    free(order);
}

/* ---- grid_sample, roi_align -------------------------------------------------------------- */

/* x reflected by the near border until it lies in [lo, hi]. */
static double reflect(double x, double lo, double hi)
{
    double range = hi - lo;
    if (!(range > 0))
        return lo;
    if (x < lo) {
        double dx = lo - x, k = floor(dx / range), r = dx - k * range;
        return fmod(k, 2) == 0 ? lo + r : hi - r;
    }
    if (x > hi) {
        double dx = x - hi, k = floor(dx / range), r = dx - k * range;
        return fmod(k, 2) == 0 ? hi - r : lo + r;
    }
    return x;
}

typedef struct gs_image {
    const double *px;
    int64_t H, W;
    int padding;
    double lo_x, hi_x, lo_y, hi_y;
} gs_image;

static double gs_pixel(const gs_image *m, int64_t r, int64_t c)
{
    if (m->padding == 0 && (c < 0 || c >= m->W || r < 0 || r >= m->H))
        return 0;
    if (m->padding == 2) {
        c = (int64_t)reflect((double)c, m->lo_x, m->hi_x);
        r = (int64_t)reflect((double)r, m->lo_y, m->hi_y);
    }
    c = c < 0 ? 0 : c >= m->W ? m->W - 1 : c;
    r = r < 0 ? 0 : r >= m->H ? m->H - 1 : r;
    return m->px[r * m->W + c];
}

static void keys_weights(double t, double *w)
{
    const double A = -0.75, s = 1 - t;
    w[0] = ((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A;
    w[1] = ((A + 2) * t - (A + 3)) * t * t + 1;
    w[2] = ((A + 2) * s - (A + 3)) * s * s + 1;
    w[3] = ((A * (2 - t) - 5 * A) * (2 - t) + 8 * A) * (2 - t) - 4 * A;
}

void ref_grid_sample(const int64_t *dims, const double *x, int64_t HO, int64_t WO, const double *grid,
                     int mode, int padding, bool align, double *result, double *scale)
{
    int64_t N = dims[0], C = dims[1], H = dims[2], W = dims[3];
    for (int64_t b = 0; b < N; b++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t oy = 0; oy < HO; oy++)
                for (int64_t ox = 0; ox < WO; ox++) {
                    const double *g = grid + ((b * HO + oy) * WO + ox) * 2;
                    gs_image m = {x + (b * C + c) * H * W, H, W, padding, -0.5, (double)W - 0.5,
                                  -0.5, (double)H - 0.5};
                    if (align)
                        m.lo_x = m.lo_y = 0, m.hi_x = (double)W - 1, m.hi_y = (double)H - 1;
                    double px = align ? (g[0] + 1) / 2 * (double)(W - 1) : ((g[0] + 1) * (double)W - 1) / 2;
                    double py = align ? (g[1] + 1) / 2 * (double)(H - 1) : ((g[1] + 1) * (double)H - 1) / 2;
                    if (mode == 1)
                        px = nearbyint(px), py = nearbyint(py);
                    if (px < m.lo_x || px > m.hi_x || py < m.lo_y || py > m.hi_y) {
                        if (padding == 1) {
                            px = fmin(fmax(px, 0), (double)W - 1);
                            py = fmin(fmax(py, 0), (double)H - 1);
                        } else if (padding == 2) {
                            px = reflect(px, m.lo_x, m.hi_x);
                            py = reflect(py, m.lo_y, m.hi_y);
                        }
                    }
                    px = fmin(fmax(px, -4), (double)W + 4);
                    py = fmin(fmax(py, -4), (double)H + 4);
                    int64_t i = ((b * C + c) * HO + oy) * WO + ox;
                    double fx = floor(px), fy = floor(py), v = 0, sc = 0;
                    if (mode == 1) {
                        v = gs_pixel(&m, (int64_t)py, (int64_t)px);
                        sc = fabs(v);
                    } else {
                        int taps = mode == 0 ? 2 : 4, first = mode == 0 ? 0 : -1;
                        double wx[4], wy[4];
                        if (mode == 0) {
                            wx[0] = fx + 1 - px, wx[1] = px - fx;
                            wy[0] = fy + 1 - py, wy[1] = py - fy;
                        } else {
                            keys_weights(px - fx, wx);
                            keys_weights(py - fy, wy);
                        }
                        for (int r = 0; r < taps; r++)
                            for (int k = 0; k < taps; k++) {
                                double t = wy[r] * wx[k] *
                                           gs_pixel(&m, (int64_t)fy + first + r, (int64_t)fx + first + k);
                                v += t;
                                sc += fabs(t);
                            }
                    }
                    result[i] = v;
                    scale[i] = sc;
                }
}

void ref_roi_align(const int64_t *dims, const double *x, int64_t R, const double *rois,
                   const int64_t *batch, const ref_roi_params *p, double *result, double *scale)
{
    int64_t C = dims[1], H = dims[2], W = dims[3];
    for (int64_t r = 0; r < R; r++) {
        const double *box = rois + r * 4, off = p->half_pixel ? 0.5 : 0;
        double sw = box[0] * p->spatial_scale - off, sh = box[1] * p->spatial_scale - off;
        double rw = box[2] * p->spatial_scale - off - sw, rh = box[3] * p->spatial_scale - off - sh;
        if (!p->half_pixel) {
            rw = rw < 1 ? 1 : rw;
            rh = rh < 1 ? 1 : rh;
        }
        double bh = rh / (double)p->OH, bw = rw / (double)p->OW;
        double ah = ceil(rh / (double)p->OH), aw = ceil(rw / (double)p->OW);
        int64_t gh = p->ratio > 0 ? p->ratio : !(ah > 0) ? 0 : ah > 1024 ? 1024 : (int64_t)ah;
        int64_t gw = p->ratio > 0 ? p->ratio : !(aw > 0) ? 0 : aw > 1024 ? 1024 : (int64_t)aw;
        double count = gh * gw > 1 ? (double)(gh * gw) : 1;
        for (int64_t c = 0; c < C; c++) {
            const double *img = x + (batch[r] * C + c) * H * W;
            for (int64_t ph = 0; ph < p->OH; ph++)
                for (int64_t pw = 0; pw < p->OW; pw++) {
                    double acc = 0, sc = 0;
                    bool any = false;
                    for (int64_t iy = 0; iy < gh; iy++)
                        for (int64_t ix = 0; ix < gw; ix++) {
                            double yy = sh + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh;
                            double xx = sw + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw;
                            double v[4] = {0, 0, 0, 0};
                            if (yy >= -1 && yy <= (double)H && xx >= -1 && xx <= (double)W) {
                                double y = yy <= 0 ? 0 : yy, xq = xx <= 0 ? 0 : xx;
                                int64_t yl = (int64_t)y, xl = (int64_t)xq, yh, xh;
                                if (yl >= H - 1)
                                    yh = yl = H - 1, y = (double)yl;
                                else
                                    yh = yl + 1;
                                if (xl >= W - 1)
                                    xh = xl = W - 1, xq = (double)xl;
                                else
                                    xh = xl + 1;
                                double ly = y - (double)yl, lx = xq - (double)xl;
                                v[0] = (1 - ly) * (1 - lx) * img[yl * W + xl];
                                v[1] = (1 - ly) * lx * img[yl * W + xh];
                                v[2] = ly * (1 - lx) * img[yh * W + xl];
                                v[3] = ly * lx * img[yh * W + xh];
                            }
                            if (!p->max) {
                                acc += v[0] + v[1] + v[2] + v[3];
                                sc += fabs(v[0]) + fabs(v[1]) + fabs(v[2]) + fabs(v[3]);
                                continue;
                            }
                            for (int k = 0; k < 4; k++) {
                                if (!any || acc < v[k])
                                    acc = v[k];
                                any = true;
                                sc = fmax(sc, fabs(v[k]));
                            }
                        }
                    int64_t i = ((r * C + c) * p->OH + ph) * p->OW + pw;
                    result[i] = p->max ? acc : acc / count;
                    scale[i] = p->max ? sc : sc / count;
                }
        }
    }
}

/* ---- integer products ---------------------------------------------------------------------- */

static int32_t wrap_i32(int64_t v)
{
    return (int32_t)(uint32_t)(uint64_t)v;
}

static int zero_at(const int *zero, int count, int64_t at)
{
    return count == 0 ? 0 : zero[count == 1 ? 0 : at];
}

void ref_matmul_integer(const clrun_tensor_type *ta, const int *a, const clrun_tensor_type *tb,
                        const int *b, const int *a_zero, int a_zero_count, const int *b_zero,
                        int b_zero_count, const clrun_tensor_type *out, int32_t *result)
{
    int64_t M = ta->shape[ta->rank - 2], K = ta->shape[ta->rank - 1], N = tb->shape[tb->rank - 1];
    int batch_rank = out->rank - 2;
    uint64_t batches = 1;
    for (int d = 0; d < batch_rank; d++)
        batches *= (uint64_t)out->shape[d];
    for (uint64_t z = 0; z < batches; z++) {
        /* the batch index of z in a's and b's own batch dims (1s broadcast) */
        uint64_t rem = z, za = 0, zb = 0, sa = 1, sb = 1;
        for (int d = batch_rank - 1; d >= 0; d--) {
            uint64_t c = rem % (uint64_t)out->shape[d];
            rem /= (uint64_t)out->shape[d];
            int da = d - (batch_rank - (ta->rank - 2)), db = d - (batch_rank - (tb->rank - 2));
            if (da >= 0) {
                za += (ta->shape[da] == 1 ? 0 : c) * sa;
                sa *= (uint64_t)ta->shape[da];
            }
            if (db >= 0) {
                zb += (tb->shape[db] == 1 ? 0 : c) * sb;
                sb *= (uint64_t)tb->shape[db];
            }
        }
        const int *ab = a + za * (uint64_t)(M * K), *bb = b + zb * (uint64_t)(K * N);
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                int64_t sum = 0;
                for (int64_t k = 0; k < K; k++)
                    sum += (int64_t)(ab[m * K + k] - zero_at(a_zero, a_zero_count, m)) *
                           (bb[k * N + n] - zero_at(b_zero, b_zero_count, n));
                result[(z * (uint64_t)M + (uint64_t)m) * (uint64_t)N + (uint64_t)n] = wrap_i32(sum);
            }
    }
}

void ref_conv_integer(const clrun_tensor_type *tx, const int *x, const clrun_tensor_type *tw,
                      const int *w, int x_zero, const int *w_zero, int w_zero_count,
                      const ref_conv *conv, const clrun_tensor_type *out,
                      int32_t *result)
{
    int64_t N = tx->shape[0], C = tx->shape[1], H = tx->shape[2], W = tx->shape[3];
    int64_t O = tw->shape[0], CG = tw->shape[1], KH = tw->shape[2], KW = tw->shape[3];
    int64_t OH = out->shape[2], OW = out->shape[3], OG = O / conv->groups;
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < O; o++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    int64_t sum = 0, g = o / OG;
                    for (int64_t c = 0; c < CG; c++)
                        for (int64_t kh = 0; kh < KH; kh++)
                            for (int64_t kw = 0; kw < KW; kw++) {
                                int64_t ih = oh * conv->stride[0] - conv->pad[0] + kh * conv->dilation[0];
                                int64_t iw = ow * conv->stride[1] - conv->pad[1] + kw * conv->dilation[1];
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                                    continue;
                                int xv = x[((n * C + g * CG + c) * H + ih) * W + iw] - x_zero;
                                int wv = w[((o * CG + c) * KH + kh) * KW + kw] - zero_at(w_zero, w_zero_count, o);
                                sum += (int64_t)xv * wv;
                            }
                    result[((n * O + o) * OH + oh) * OW + ow] = wrap_i32(sum);
                }
}
