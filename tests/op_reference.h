/* Plain C references of the ops in docs/ops.md, written without the library's helpers so that
 * they check it independently. Loops over every output, arithmetic in double, no cleverness.
 * Where a float result needs a tolerance, the reference also gives each output's `scale`: the
 * sum of the absolute values of the terms that made it (rounding error grows with it). */
#ifndef CLRUN_TESTS_OP_REFERENCE_H
#define CLRUN_TESTS_OP_REFERENCE_H

#include <stdbool.h>
#include <stdint.h>

#include <clrun/graph.h>

/* Elements of a shape. */
uint64_t ref_elements(const clrun_tensor_type *t);

/* Unary functions by op name ("relu", "gelu", "gelu_erf", ...); scale is alpha*x+beta. */
double ref_unary_f32(const char *op, float x);
int32_t ref_unary_i32(const char *op, int32_t x);

/* Binary op by name with numpy broadcasting of a and b to `out`'s shape. */
void ref_binary_f32(const char *op, const clrun_tensor_type *ta, const float *a,
                    const clrun_tensor_type *tb, const float *b, const clrun_tensor_type *out,
                    double *result);
void ref_binary_i32(const char *op, const clrun_tensor_type *ta, const int32_t *a,
                    const clrun_tensor_type *tb, const int32_t *b, const clrun_tensor_type *out,
                    int32_t *result);

/* matmul as docs/ops.md defines it; bias may be NULL. */
void ref_matmul(const clrun_tensor_type *ta, const float *a, const clrun_tensor_type *tb,
                const float *b, const float *bias, bool transpose_a, bool transpose_b,
                double alpha, const clrun_tensor_type *out, double *result, double *scale);

/* Softmax over the last axis; causal masks (i, j) for j > i + N - M. Fully masked rows are 0. */
void ref_softmax(const clrun_tensor_type *t, const float *x, bool causal, double *result);

/* Layer normalisation over the last axis. */
void ref_layernorm(const clrun_tensor_type *t, const float *x, const float *gamma,
                   const float *beta, double eps, double *result, double *scale);

/* reduce_sum / reduce_mean / reduce_max over the axes set in `reduced` (a mask per axis);
 * the result is in the order of the kept axes. */
void ref_reduce(const char *op, const clrun_tensor_type *t, const float *x, const bool *reduced,
                double *result, double *scale);

/* Layout ops, on 32-bit words. */
void ref_transpose(const clrun_tensor_type *t, const uint32_t *x, const int *perm, uint32_t *out);
void ref_concat(int n, const clrun_tensor_type *types, const uint32_t *const *inputs, int axis,
                uint32_t *out);
void ref_slice(const clrun_tensor_type *t, const uint32_t *x, int axis, int64_t start,
               int64_t end, uint32_t *out);
void ref_gather(const clrun_tensor_type *table_type, const uint32_t *table,
                const clrun_tensor_type *index_type, const int32_t *indices, uint32_t *out);

/* conv2d (NCHW); bias may be NULL. */
typedef struct ref_conv {
    int stride[2], pad[2], dilation[2], groups;
} ref_conv;
void ref_conv2d(const clrun_tensor_type *tx, const float *x, const clrun_tensor_type *tw,
                const float *w, const float *bias, const ref_conv *conv,
                const clrun_tensor_type *out, double *result, double *scale);

/* The transposed convolution (ONNX's ConvTranspose), x [N, C, H, W], w [C, O/groups, KH, KW],
 * out [N, O, OH, OW] (its extent sets the output padding): out[n, o, oh, ow] sums x[n, c, ih,
 * iw] w[c, o', kh, kw] over the group's c and the taps with oh = ih sh - pad_top + kh dh (and
 * likewise across); conv->pad is the top and left padding. bias may be NULL. scale gets the sum
 * of the terms' absolute values. */
void ref_conv_transpose2d(const clrun_tensor_type *tx, const float *x, const clrun_tensor_type *tw,
                          const float *w, const float *bias, const ref_conv *conv,
                          const clrun_tensor_type *out, double *result, double *scale);

/* maxpool2d (max true) or avgpool2d over windows kernel/stride/pad (avg counts in-bounds). */
void ref_pool(bool max, const clrun_tensor_type *t, const float *x, const int *kernel,
              const int *stride, const int *pad, const clrun_tensor_type *out, double *result);

/* softmax_xent over rows of logits [..., C] with labels[row] (as int64): loss = log sum_j
 * exp(x_j - m) - (x_label - m); 0 where has_ignore and the label is `ignore`; NaN for a label
 * outside [0, C). scale: |x_label - m| + log of the sum + 1. */
void ref_softmax_xent(const clrun_tensor_type *logits, const float *x, const int64_t *labels,
                      bool has_ignore, int64_t ignore, double *loss, double *scale);

/* softmax_xent_grad: (softmax(row) - onehot(label)) * dloss[row], rows of 0 for an ignored
 * label, NaN for one outside [0, C). scale: (softmax + onehot) * |dloss|. */
void ref_softmax_xent_grad(const clrun_tensor_type *logits, const float *x,
                           const int64_t *labels, const float *dloss, bool has_ignore,
                           int64_t ignore, double *result, double *scale);

/* gather_grad: ddata (type `out`) from indices (as int64, type `indices`) and dy (type `dy`):
 * without axis (with_axis false) the embedding form, with it ONNX Gather's along `axis` of the
 * data (negative indices counting from the end); indices still outside add nothing. scale: the
 * sum of |dy| of the terms. */
void ref_gather_grad(const clrun_tensor_type *indices, const int64_t *index_values,
                     const clrun_tensor_type *dy_type, const float *dy, bool with_axis, int axis,
                     const clrun_tensor_type *out, double *result, double *scale);
/* conv2d_grad_weight: dw [O, C/groups, KH, KW] (tdw) from x and dy [N, O, OH, OW], the gradient
 * of sum(dy * conv2d(x, w)) with respect to w; conv->pad is the top and left padding (the
 * bottom and right only decide OH and OW, which dy has). */
void ref_conv2d_grad_weight(const clrun_tensor_type *tx, const float *x, const clrun_tensor_type *tdy,
                            const float *dy, const ref_conv *conv, const clrun_tensor_type *tdw,
                            double *result, double *scale);

/* A pooling window for ref_pool_grad: pad is before (top, left), pad_end after (bottom, right). */
typedef struct ref_pool_window {
    int kernel[2], stride[2], pad[2], pad_end[2], dilation[2];
    bool count_include_pad;
} ref_pool_window;

/* The gradient of maxpool2d (max: each dy to its window's first tap inside the image, replaced
 * by every later tap greater than the maximum so far or NaN, as PyTorch) or of avgpool2d (each dy
 * over its window's taps inside the image, divided by their count, or with count_include_pad by
 * the taps before the padded image's end) with respect to its input: dx [N, C, H, W] (tx's
 * shape) from dy [N, C, OH, OW]; x is read for max only. */
void ref_pool_grad(bool max, const clrun_tensor_type *tx, const float *x, const clrun_tensor_type *tdy,
                   const float *dy, const ref_pool_window *p, double *result, double *scale);

/* A col2im geometry: image [H, W], kernel, stride, pad before (top, left) and after (bottom,
 * right), dilation; transposed: cols are [N, L, C*KH*KW] rather than [N, C*KH*KW, L]. */
typedef struct ref_col2im_geometry {
    int image[2], kernel[2], stride[2], pad[2], pad_end[2], dilation[2];
    bool transposed;
} ref_col2im_geometry;

/* col2im: out [N, C, H, W] from cols (N, C from the type and the kernel), every column element
 * added to the image element its tap lands on (taps outside add nothing); scale: the sum of the
 * absolute values of the terms. */
void ref_col2im(const clrun_tensor_type *tcols, const float *cols, const ref_col2im_geometry *p,
                double *result, double *scale);

/* Scatter ops and index tuples, on elements of any dtype (their bytes; the reductions compute in
 * the dtype: f32 and f64 rounded after each step, i32 and i64 wrapping). Indices as int64, in
 * [-dim, dim) (negatives from the end); the functions return false for one outside. */
/* scatter_elements: out = data, then for each element c of the indices in row-major order
 * out[c with the axis coordinate replaced by indices[c]] = (or +=, *= for reduction 1, 2)
 * updates[c]. */
bool ref_scatter_elements(const clrun_tensor_type *data_type, const void *data,
                          const clrun_tensor_type *index_type, const int64_t *indices,
                          const void *updates, int axis, int reduction, void *out);
/* scatter_nd: out = data, then each update slice applied at the slice its index tuple (the
 * indices' last dim, k) names, tuples in order. */
bool ref_scatter_nd(const clrun_tensor_type *data_type, const void *data,
                    const clrun_tensor_type *index_type, const int64_t *indices,
                    const void *updates, int reduction, void *out);
/* gather_nd: out (indices' dims but the last, data's after batch + k) the slices the tuples
 * name within their batch. */
bool ref_gather_nd(const clrun_tensor_type *data_type, const void *data,
                   const clrun_tensor_type *index_type, const int64_t *indices, int batch,
                   void *out);
/* top_k_indices of x (values as doubles) along axis: out (x's shape with k on the axis) the
 * positions of the k largest (smallest) of each line, best first, equal values by position, NaN
 * above every number; by sorting each line. */
void ref_top_k(const clrun_tensor_type *x_type, const double *x, int axis, int64_t k,
               bool largest, int64_t *out);
/* grid_sample over x [N, C, H, W] (dims) at grid [N, HO, WO, 2], as docs/ops.md says (ONNX
 * GridSample as onnxruntime computes it); mode 0 bilinear, 1 nearest, 2 bicubic; padding 0
 * zeros, 1 border, 2 reflection. scale: the sum of the absolute values of the weighted taps. */
void ref_grid_sample(const int64_t *dims, const double *x, int64_t HO, int64_t WO, const double *grid,
                     int mode, int padding, bool align, double *result, double *scale);

/* roi_align of x [N, C, H, W] (dims) over R boxes [R, 4] from batch[R] (each inside [0, N)):
 * [R, C, OH, OW] as docs/ops.md says; scale as above. */
typedef struct ref_roi_params {
    int64_t OH, OW, ratio;
    double spatial_scale;
    bool half_pixel, max;
} ref_roi_params;
void ref_roi_align(const int64_t *dims, const double *x, int64_t R, const double *rois,
                   const int64_t *batch, const ref_roi_params *p, double *result, double *scale);
/* matmul_integer and conv_integer: 8-bit operands given as ints (u8 or i8 values), zero points
 * as arrays read at [0] (one value), [row], [column] or [channel] per their count (0: none),
 * sums in 64 bits then wrapped to int32 as onnxruntime's accumulators wrap. matmul_integer:
 * a [..., M, K], b [..., K, N], batch dims broadcast to `out`'s. */
void ref_matmul_integer(const clrun_tensor_type *ta, const int *a, const clrun_tensor_type *tb,
                        const int *b, const int *a_zero, int a_zero_count, const int *b_zero,
                        int b_zero_count, const clrun_tensor_type *out, int32_t *result);
/* x [N, C, H, W], w [O, C/groups, KH, KW]; conv.pad is the padding before (top, left), the
 * extent after comes with `out`; taps outside x add nothing. */
void ref_conv_integer(const clrun_tensor_type *tx, const int *x, const clrun_tensor_type *tw,
                      const int *w, int x_zero, const int *w_zero, int w_zero_count,
                      const ref_conv *conv, const clrun_tensor_type *out,
                      int32_t *result);

#endif
