/* What a node's type rule derives and its kernels need too: the dimensions of a product, the
 * geometry of a convolution or pooling window, the reduced axes. Computed from
 * the op call by the same code that checks it, so the kernels can never disagree with infer. */
#ifndef CLRUN_LIB_GRAPH_OP_GEOMETRY_H
#define CLRUN_LIB_GRAPH_OP_GEOMETRY_H

#include "graph/op.h"

/* matmul: the product's dimensions as read from the inputs' types and the transpose flags.
 * Refuses inner dimensions that differ and batches that do not broadcast. */
typedef struct clrun__matmul_dims {
    bool ta, tb;
    uint64_t M, N, K;
    clrun_tensor_type batch_a, batch_b, batch; /* batch dimensions: a's, b's, broadcast */
} clrun__matmul_dims;
clrun_status clrun__matmul_dims_of(const clrun__op_call *call, clrun__matmul_dims *d,
                                   const clrun__infer_error *err);

/* A product's weight (input 1 of matmul and conv2d) stored narrow and widened by the kernels:
 * f16 or bf16 (exactly), or i8 / u8 read as (f32(q) - zero[c]) * scale[c] per output channel c,
 * the node's attribute "dequant" (1 or 2) saying that its last inputs are scale[C] (f32), then
 * zero[C] (f32) when 2. Checks the weight's dtype, the attribute and those inputs against
 * `channels` (the output channels), and every other input for f32. *dequant receives the
 * attribute (0: none), *bias whether the node has its optional bias (input 2). */
clrun_status clrun__product_weight_of(const clrun__op_call *call, int64_t channels, int *dequant,
                                      bool *bias, const clrun__infer_error *err);
/* The dequantizing inputs and the bias of a node whose types passed infer (no checks). */
int clrun__product_dequant(const clrun__op_call *call, bool *bias);

/* conv2d and conv_transpose2d: attributes and the output extent. pad is the padding before
 * (top, left), pad_end after (bottom, right): "pad" [h, w] pads both sides alike, ONNX's "pads"
 * [top, left, bottom, right] each side alone. */
typedef struct clrun__conv_geometry {
    int64_t stride[2], pad[2], pad_end[2], dilation[2], groups;
    int64_t output_padding[2]; /* conv_transpose2d: added after the bottom and right */
    int64_t oh, ow;
} clrun__conv_geometry;
clrun_status clrun__conv_geometry_of(const clrun__op_call *call, clrun__conv_geometry *g,
                                     const clrun__infer_error *err);
clrun_status clrun__conv_transpose_geometry_of(const clrun__op_call *call, clrun__conv_geometry *g,
                                               const clrun__infer_error *err);

/* maxpool2d, avgpool2d: window, stride, padding before and after, dilation (maxpool), ceil_mode
 * and count_include_pad (avgpool), and the output extent. */
typedef struct clrun__pooling_geometry {
    int64_t kernel[2], stride[2], pad[2], pad_end[2], dilation[2], oh, ow;
    bool ceil_mode, count_include_pad;
} clrun__pooling_geometry;
clrun_status clrun__pooling_geometry_of(const clrun__op_call *call, clrun__pooling_geometry *g,
                                     const clrun__infer_error *err);

/* conv2d_grad_weight: x [N, C, H, W], dy [N, O, OH, OW], conv2d's attributes and "kernel"
 * [KH, KW]. conv2d's geometry (the same code) for w [O, C/groups, KH, KW], that w's type into
 * *dw (the gradient's), and dy checked to be conv2d's output. */
clrun_status clrun__conv_grad_weight_geometry_of(const clrun__op_call *call, clrun__conv_geometry *g,
                                                 clrun_tensor_type *dw, const clrun__infer_error *err);

/* maxpool2d_grad (x, dy) and avgpool2d_grad (dy alone, the image's extent in "size" [H, W]):
 * the forward pool's geometry (the same code) over the image, whose type goes to *x (the
 * gradient's), and dy checked to be the forward pool's output. */
clrun_status clrun__pooling_grad_geometry_of(const clrun__op_call *call, clrun__pooling_geometry *g,
                                             clrun_tensor_type *x, const clrun__infer_error *err);

/* col2im: cols [N, C*KH*KW, L] (transposed: [N, L, C*KH*KW]) summed into images [N, C, H, W]
 * by the windows of a convolution over [H, W] ("image") with "kernel", "stride", "pads" [top,
 * left, bottom, right] and "dilation": L must be the OH * OW windows. */
typedef struct clrun__col2im_geometry {
    int64_t image[2], kernel[2], stride[2], pad[2], pad_end[2], dilation[2];
    int64_t channels; /* C */
    int64_t oh, ow;
    bool transposed;
} clrun__col2im_geometry;
clrun_status clrun__col2im_geometry_of(const clrun__op_call *call, clrun__col2im_geometry *g,
                                       const clrun__infer_error *err);

/* Reductions: the reduced axes of the call as a mask over input 0's dims (no axes, or an empty
 * list: all of them); refuses axes out of range or given twice. */
clrun_status clrun__reduced_axes(const clrun__op_call *call, bool *reduced,
                                 const clrun__infer_error *err);

/* The "axis" attribute of a call (fallback when absent), counted from the end when negative,
 * into *axis; refuses one out of range for input 0. */
clrun_status clrun__op_axis(const clrun__op_call *call, int64_t fallback, int *axis,
                            const clrun__infer_error *err);

/* roi_align: the most samples of a bin along one axis, as sampling_ratio or as its adaptive
 * choice ceil(roi extent / bins), which comes from the boxes' data: a box of absurd extent
 * cannot keep a work-item looping for hours. */
#define CLRUN__ROI_MAX_SAMPLES 1024

/* An axis counted from the end when negative. The layout ops' geometry is in
 * graph/layout_geometry.h. */
static inline int64_t clrun__normalize_axis(int64_t axis, int rank)
{
    return axis < 0 ? axis + rank : axis;
}

/* non_max_suppression: boxes [B, N, 4], scores [B, C, N]; each (batch, class) keeps at most
 * per_class = min(max_output, N) boxes, so the output has capacity = B C per_class rows. */
typedef struct clrun__nms_geometry {
    int64_t batches, classes, boxes, per_class, capacity;
    float iou_threshold;
    double score_threshold;
    bool has_score_threshold, center_point_box;
} clrun__nms_geometry;
clrun_status clrun__nms_geometry_of(const clrun__op_call *call, clrun__nms_geometry *g,
                                    const clrun__infer_error *err);

#endif
