/* The operator mappings (map_*.c) and host evaluators (host_eval_ops.c) that the operator table
 * (ops.c) names. Each takes the node being imported and defines its outputs. */
#ifndef CLRUN_LIB_ONNX_MAP_H
#define CLRUN_LIB_ONNX_MAP_H

#include "onnx/import.h"

/* map_elementwise.c */
clrun_status clrun__map_unary(clrun__imp *im, clrun__onode *n);      /* Relu Exp ... */
clrun_status clrun__map_binary(clrun__imp *im, clrun__onode *n);     /* Add Sub ... comparisons */
clrun_status clrun__map_variadic(clrun__imp *im, clrun__onode *n);   /* Min Max Sum Mean */
clrun_status clrun__map_activation(clrun__imp *im, clrun__onode *n); /* LeakyRelu Elu HardSigmoid ... */
clrun_status clrun__map_prelu(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_clip(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_where(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_cast(clrun__imp *im, clrun__onode *n);       /* Cast CastLike */
clrun_status clrun__map_identity(clrun__imp *im, clrun__onode *n);   /* Identity Dropout */
clrun_status clrun__map_pow(clrun__imp *im, clrun__onode *n);

/* map_layout.c */
clrun_status clrun__map_reshape(clrun__imp *im, clrun__onode *n);    /* Reshape Flatten Squeeze Unsqueeze */
clrun_status clrun__map_transpose(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_concat(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_split(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_slice(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_gather(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_gather_elements(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_expand(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_tile(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_pad(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_depth_space(clrun__imp *im, clrun__onode *n); /* DepthToSpace SpaceToDepth */
clrun_status clrun__map_trilu(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_cumsum(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_resize(clrun__imp *im, clrun__onode *n);     /* Resize Upsample */

/* map_scatter.c */
clrun_status clrun__map_scatter_elements(clrun__imp *im, clrun__onode *n); /* Scatter ScatterElements */
clrun_status clrun__map_scatter_nd(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_gather_nd(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_top_k(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_compress(clrun__imp *im, clrun__onode *n);  /* map_index.c */
/* map_data_shaped.c: outputs shaped by the input's values, from constants only */
clrun_status clrun__map_nonzero(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_unique(clrun__imp *im, clrun__onode *n);

/* map_nn.c: a convolution's or pool's window; 2-D cores, which 1-D and 3-D build on */
typedef struct clrun__window {
    int spatial;               /* 1, 2 or 3 */
    int64_t kernel[3], stride[3], dilation[3], pad_begin[3], pad_end[3];
    int64_t group;
    bool ceil_mode;
} clrun__window;
clrun_status clrun__conv2d_core(clrun__imp *im, clrun__onode *n, clrun__value *x, clrun__value *wt,
                                clrun__value *bias, const clrun__window *w, int out, clrun__value **r);
/* ConvTranspose of 4-D x and wt (as a product and col2im, else conv_transpose2d): out_pad the
 * output padding of the two axes, w's pads the final ones. */
clrun_status clrun__conv_transpose2d_core(clrun__imp *im, clrun__onode *n, clrun__value *x, clrun__value *wt,
                                          clrun__value *bias, const clrun__window *w, const int64_t *out_pad,
                                          int out, clrun__value **y);
clrun_status clrun__pool2d_core(clrun__imp *im, clrun__onode *n, clrun__value *x, const clrun__window *w,
                                bool max, bool include_pad, int out, clrun__value **r);
/* map_detect.c: NonMaxSuppression (on the host when boxes and scores are known at load),
 * MaxUnpool, and MaxPool's Indices output (for map_nn.c's MaxPool, 1-D and 2-D). */
clrun_status clrun__fold_nms(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_nms(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_max_unpool(clrun__imp *im, clrun__onode *n);
clrun_status clrun__maxpool_indices(clrun__imp *im, clrun__onode *n, clrun__value *x,
                                    const clrun__window *w, int64_t storage_order);
/* map_window3d.c: 3-D convolutions (transposed too) and pools as sums and maxima of 2-D ones
 * over depth. */
clrun_status clrun__conv3d(clrun__imp *im, clrun__onode *n, clrun__value *x, clrun__value *wt,
                           clrun__value *bias, const clrun__window *w);
clrun_status clrun__conv_transpose3d(clrun__imp *im, clrun__onode *n, clrun__value *x, clrun__value *wt,
                                     clrun__value *bias, const clrun__window *w, const int64_t *out_pad);
clrun_status clrun__pool3d(clrun__imp *im, clrun__onode *n, clrun__value *x, const clrun__window *w, bool max,
                           bool include_pad);

clrun_status clrun__map_matmul(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_gemm(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_conv(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_conv_transpose(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_col2im(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_pool(clrun__imp *im, clrun__onode *n);       /* MaxPool AveragePool */
clrun_status clrun__map_global_pool(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_lp_pool(clrun__imp *im, clrun__onode *n);        /* LpPool */
clrun_status clrun__map_global_lp_pool(clrun__imp *im, clrun__onode *n); /* GlobalLpPool */
clrun_status clrun__map_batchnorm(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_instancenorm(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_layernorm(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_softmax(clrun__imp *im, clrun__onode *n);    /* Softmax LogSoftmax */
/* (Log)softmax of x over one axis (opset 13's semantics), into output `out` or a temporary. */
clrun_status clrun__emit_softmax(clrun__imp *im, clrun__onode *n, clrun__value *x, int axis, bool log, int out,
                                 clrun__value **r);

/* map_qlinear.c: the integer products and their requantized forms */
clrun_status clrun__map_matmul_integer(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_conv_integer(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_qlinear_matmul(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_qlinear_conv(clrun__imp *im, clrun__onode *n);

/* map_extra.c: operators beyond the core list, as compositions */
clrun_status clrun__map_shrink(clrun__imp *im, clrun__onode *n);        /* Shrink ThresholdedRelu */
clrun_status clrun__map_isnan(clrun__imp *im, clrun__onode *n);         /* IsNaN IsInf */
clrun_status clrun__map_eyelike(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_hardmax(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_mvn(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_window(clrun__imp *im, clrun__onode *n);        /* Hann, Hamming, Blackman */
clrun_status clrun__map_onehot(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_nll(clrun__imp *im, clrun__onode *n);           /* NegativeLogLikelihoodLoss
                                                                          SoftmaxCrossEntropyLoss */

/* map_spectral.c: DFT and STFT as products with constant matrices of cosines and sines */
clrun_status clrun__map_dft(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_stft(clrun__imp *im, clrun__onode *n);

/* map_einsum.c: Einsum of one or two operands as transposes, diagonals, sums and matmul; Det up
 * to 3 x 3 */
clrun_status clrun__map_einsum(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_det(clrun__imp *im, clrun__onode *n);

/* map_vision.c: LRN as a composition; GridSample, RoiAlign onto their graph ops; ReverseSequence */
clrun_status clrun__map_lrn(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_grid_sample(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_roi_align(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_reverse_sequence(clrun__imp *im, clrun__onode *n);
/* map_quant.c: linear quantization as compositions (f32 arithmetic, as onnxruntime's) */
clrun_status clrun__map_quantize(clrun__imp *im, clrun__onode *n);         /* QuantizeLinear */
clrun_status clrun__map_dequantize(clrun__imp *im, clrun__onode *n);       /* DequantizeLinear */
clrun_status clrun__map_dynamic_quantize(clrun__imp *im, clrun__onode *n); /* DynamicQuantizeLinear */
/* map_recurrent.c: RNN, GRU and LSTM unrolled over the sequence's steps */
clrun_status clrun__map_rnn(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_gru(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_lstm(clrun__imp *im, clrun__onode *n);

/* map_training.c: the optimizers of domain ai.onnx.preview.training */
clrun_status clrun__map_adagrad(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_adam(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_momentum(clrun__imp *im, clrun__onode *n);

/* map_opset18.c: operators opsets 18 to 20 added; GroupNormalization in map_norm.c */
clrun_status clrun__map_gelu(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_mish(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_center_crop_pad(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_groupnorm(clrun__imp *im, clrun__onode *n);

/* map_reduce.c */
clrun_status clrun__map_reduce(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_arg(clrun__imp *im, clrun__onode *n);        /* ArgMax ArgMin */

/* map_misc.c: what needs no device at all */
clrun_status clrun__map_constant(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_shape(clrun__imp *im, clrun__onode *n);      /* Shape Size */
clrun_status clrun__map_constant_of_shape(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_range(clrun__imp *im, clrun__onode *n);
/* Refuses: the operator needs inputs known at load (Range, ConstantOfShape...) or has no device
 * mapping (used as the map of ops that only fold). */
clrun_status clrun__map_host_only(clrun__imp *im, clrun__onode *n);

/* map_control.c: If (its condition known at load, or guarded branches), Scan and Loop unrolled
 * at load */
clrun_status clrun__map_if(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_scan(clrun__imp *im, clrun__onode *n);
clrun_status clrun__map_loop(clrun__imp *im, clrun__onode *n);

/* host_eval_ops.c: host evaluation, when every input is a host constant */
clrun_status clrun__fold(clrun__imp *im, clrun__onode *n);

/* move.c: data movement on either kind of value. With a host constant the result is a host
 * constant (folded), with a device value a graph node; into output `out` of the node (>= 0) or a
 * temporary (-1, *r). */
clrun_status clrun__mv_reshape(clrun__imp *im, clrun__onode *n, clrun__value *x, int rank,
                               const int64_t *dims, int out, clrun__value **r);
clrun_status clrun__mv_transpose(clrun__imp *im, clrun__onode *n, clrun__value *x, const int *perm,
                                 int out, clrun__value **r);
/* One axis, elements [start, start + count) (count 0: an empty constant). */
clrun_status clrun__mv_slice(clrun__imp *im, clrun__onode *n, clrun__value *x, int axis, int64_t start,
                             int64_t count, int out, clrun__value **r);
/* Joins xs[0..count) on axis (pieces with nothing on the axis are dropped). */
clrun_status clrun__mv_concat(clrun__imp *im, clrun__onode *n, clrun__value *const *xs, int count,
                              int axis, int out, clrun__value **r);
/* x itself as output `out` (an alias), or x when out is -1. */
clrun_status clrun__mv_same(clrun__imp *im, clrun__onode *n, clrun__value *x, int out, clrun__value **r);
/* A host tensor as output `out` or a temporary constant (t taken over). */
clrun_status clrun__mv_const(clrun__imp *im, clrun__onode *n, clrun__otensor *t, int out, clrun__value **r);
/* An empty result (a dimension 0 in dims): known whole at load, a constant of no data. It folds
 * on (Concat drops it, Shape reads it); one that must go to the device is refused by name. */
clrun_status clrun__mv_empty(clrun__imp *im, clrun__onode *n, int elem, int rank, const int64_t *dims, int out,
                             clrun__value **r);

/* x broadcast (numpy's rules, x of a rank <= rank) to dims: on the host when x is a constant,
 * else the graph's expand. */
clrun_status clrun__mv_expand(clrun__imp *im, clrun__onode *n, clrun__value *x, int rank, const int64_t *dims,
                              int out, clrun__value **r);
/* A tensor of dims holding `value` everywhere, computed at load: what an op over an empty
 * operand gives where its result is not empty (a padded convolution's zeros, Pad's value). */
clrun_status clrun__mv_fill(clrun__imp *im, clrun__onode *n, int elem, double value, int rank, const int64_t *dims,
                            int out, clrun__value **r);

/* map_layout.c: x with `before` and `after` elements added on axis (negative: removed), in Pad's
 * mode "constant" (with value), "reflect" or "edge". */
clrun_status clrun__pad_axis(clrun__imp *im, clrun__onode *n, clrun__value *x, int axis, int64_t before,
                             int64_t after, const char *mode, double value, int out, clrun__value **r);

/* The failure of a host result of this element type and shape (emit.c): a refusal saying it is
 * too large when it is over the host tensor limit (or its size overflows), else out of memory. */
clrun_status clrun__host_result_failed(clrun__imp *im, int elem, int rank, const int64_t *dims);

/* Shared by mappings: opset-6 style broadcasting of b against a (Add-1/6 with broadcast=1 and
 * axis) as the numpy broadcasting shape of b; map_elementwise.c. */
clrun_status clrun__legacy_broadcast(clrun__imp *im, clrun__onode *n, const clrun__value *a,
                                     const clrun__value *b, int *rank, int64_t *dims, bool *legacy);

#endif
