/* Gradient rules of convolution and pooling. A convolution's input gradient is, with stride 1, the
 * convolution of dy by the weights flipped and transposed (unless that copy of the weights
 * would be larger than the columns below); else the columns w^T dy (a matmul,
 * one per group) summed back into the image by col2im; where those columns would be too large
 * for col2im, the transposed convolution of dy by the same weights (output padding restoring
 * rows the stride dropped). Its weight
 * gradient is conv2d_grad_weight; its bias gradient dy summed per channel (over each image's
 * positions, then over the images). Pooling routes dy back
 * through maxpool2d_grad and avgpool2d_grad, which recompute the windows. */
#include <stdint.h>

#include "grad/grad.h"
#include "graph/conv_lower.h"

/* The attributes of a convolution or pooling node that its gradient ops take as they are. */
static int copy_attrs(const clrun__node *node, const char *const *names, int count, clrun_attr *out)
{
    int n = 0;
    for (int i = 0; i < count; i++) {
        const clrun_attr *a = clrun__gnode_attr(node, names[i]);
        if (a)
            out[n++] = *a;
    }
    return n;
}

/* With stride 1, the input's gradient is itself a convolution: of dy by the weights with their
 * input and output channels swapped (within each group) and their taps reversed, padded by the
 * dilated kernel's extent less the forward's padding, on each side. It runs on conv2d's fast
 * path, where conv_transpose2d's kernel is slow. -2 when it does not apply (a stride above 1,
 * or padding wider than the kernel's reach), -1 on failure. */
static clrun_tensor_id unit_stride_input_gradient(clrun__grad *g, const clrun__conv_geometry *geo,
                                                  const int64_t *pads, const clrun_tensor_type *tx,
                                                  const clrun_tensor_type *tw, clrun_tensor_id d,
                                                  clrun_tensor_id w)
{
    int64_t reach[2] = {geo->dilation[0] * (tw->shape[2] - 1), geo->dilation[1] * (tw->shape[3] - 1)};
    int64_t back[4] = {reach[0] - pads[0], reach[1] - pads[1], reach[0] - pads[2], reach[1] - pads[3]};
    if (geo->stride[0] != 1 || geo->stride[1] != 1)
        return -2;
    for (int k = 0; k < 4; k++)
        if (back[k] < 0)
            return -2;
    int64_t groups = geo->groups, o = tw->shape[0], cg = tw->shape[1], kh = tw->shape[2], kw = tw->shape[3];
    /* w [O, C/g, KH, KW] -> [g, O/g, C/g, KH, KW] -> [g, C/g, O/g, KH, KW] -> [C, O/g, KH, KW] */
    int64_t split[5] = {groups, o / groups, cg, kh, kw}, perm[5] = {0, 2, 1, 3, 4};
    int64_t swapped[4] = {groups * cg, o / groups, kh, kw};
    clrun_attr a_split = clrun__gattr_ints("shape", split, 5), a_perm = clrun__gattr_ints("perm", perm, 5);
    clrun_attr a_swapped = clrun__gattr_ints("shape", swapped, 4);
    clrun_tensor_id t = clrun__gemit(g, "reshape", &w, 1, &a_split, 1);
    t = clrun__gemit(g, "transpose", &t, 1, &a_perm, 1);
    t = clrun__gemit(g, "reshape", &t, 1, &a_swapped, 1);
    /* the taps reversed: a slice stepping backwards over both spatial axes */
    int64_t starts[2] = {-1, -1}, ends[2] = {INT64_MIN, INT64_MIN}, axes[2] = {2, 3}, steps[2] = {-1, -1};
    clrun_attr a_flip[4] = {clrun__gattr_ints("starts", starts, 2), clrun__gattr_ints("ends", ends, 2),
                            clrun__gattr_ints("axes", axes, 2), clrun__gattr_ints("steps", steps, 2)};
    t = clrun__gemit(g, "slice", &t, 1, a_flip, 4);
    clrun_attr attrs[3] = {clrun__gattr_ints("pads", back, 4),
                           clrun__gattr_ints("dilation", geo->dilation, 2),
                           clrun__gattr_int("groups", groups)};
    clrun_tensor_id in[2] = {d, t};
    (void)tx;
    return clrun__gemit(g, "conv2d", in, 2, attrs, 3);
}

/* The gradient rules' way to add a node, for the lowerings of lib/graph/conv_lower.c. */
static int32_t grad_emit(void *self, const char *op, const int32_t *inputs, int input_count,
                         const clrun_attr *attrs, int attr_count)
{
    return clrun__gemit(self, op, inputs, input_count, attrs, attr_count);
}

/* The most columns of the product path, in multiples of dx's elements, alive at once: the batch
 * is lowered in chunks of images (dy sliced, the chunks' gradients concatenated) so that a
 * chunk's columns hold at most this (a 3 x 3 kernel's are 9 times dx at stride 1, 2.25 at stride 2). */
#define GEMM_COLUMNS_PER_DX 2
#define GEMM_MAX_CHUNKS 8
/* Up to this many output positions an image, a group's columns come from one product over all
 * the images' positions (rows_input_gradient), where w^T dy image by image would have fewer
 * columns than a panel of the matmul core holds. */
#define ROWS_MAX_POSITIONS 16

/* One group's input gradient of `images` images of dy (handle d, [images, O, OH, OW]) as one
 * product over all of them: dy with its channels last [images * OH * OW, O] by w [O, C*KH*KW]
 * as it is, the columns [images, OH * OW, C*KH*KW] summed into the images by col2im's transposed
 * layout. Where the positions are few (ResNet's last stages: 4 an image), w^T dy image by image
 * has as few columns per product, which the register-blocked core runs at a fraction of its
 * speed; here the product's rows are every image's positions and its columns C*KH*KW. dy's
 * transposed copy is 1/(KH*KW) of the columns. -1 on failure. */
static clrun_tensor_id rows_input_gradient(clrun__grad *g, const clrun__conv_geometry *geo,
                                           const clrun_tensor_type *tx, const clrun_tensor_type *tw,
                                           int64_t images, clrun_tensor_id d, clrun_tensor_id w)
{
    int64_t o = tw->shape[0], kh = tw->shape[2], kw = tw->shape[3];
    int64_t ck = tw->shape[1] * kh * kw, l = geo->oh * geo->ow;
    int64_t perm[4] = {0, 2, 3, 1}, rows[2] = {images * l, o}, wk[2] = {o, ck}, cols[3] = {images, l, ck};
    clrun_attr a_perm = clrun__gattr_ints("perm", perm, 4), a_rows = clrun__gattr_ints("shape", rows, 2);
    clrun_attr a_wk = clrun__gattr_ints("shape", wk, 2), a_cols = clrun__gattr_ints("shape", cols, 3);
    clrun_tensor_id in[2];
    in[0] = clrun__gemit(g, "transpose", &d, 1, &a_perm, 1);
    in[0] = clrun__gemit(g, "reshape", &in[0], 1, &a_rows, 1);
    in[1] = clrun__gemit(g, "reshape", &w, 1, &a_wk, 1);
    clrun_tensor_id t = clrun__gemit(g, "matmul", in, 2, NULL, 0);
    t = clrun__gemit(g, "reshape", &t, 1, &a_cols, 1);
    int64_t image[2] = {tx->shape[2], tx->shape[3]}, kernel[2] = {kh, kw};
    int64_t pads[4] = {geo->pad[0], geo->pad[1], geo->pad_end[0], geo->pad_end[1]};
    clrun_attr attrs[6] = {clrun__gattr_ints("image", image, 2), clrun__gattr_ints("kernel", kernel, 2),
                           clrun__gattr_ints("stride", geo->stride, 2), clrun__gattr_ints("pads", pads, 4),
                           clrun__gattr_ints("dilation", geo->dilation, 2),
                           clrun__gattr_int("transposed", 1)};
    return clrun__gemit(g, "col2im", &t, 1, attrs, 6);
}

/* With any stride and groups, the input's gradient is the transposed convolution of dy by w,
 * lowered to a matrix product (w^T dy, the columns, one product per group) and col2im, which sums each column into
 * the input element its tap reads (lib/graph/conv_lower.c, as ONNX's ConvTranspose). Both run
 * on fast kernels, where conv_transpose2d's gathers every tap per output; cols hold
 * KH·KW/(sh·sw) times x's elements while they live, so a batch whose columns would hold more
 * than GEMM_COLUMNS_PER_DX times dx runs in chunks of images (each image's gradient is its own
 * sums: the same values). -2 when it does not apply, -1 on failure. */
static clrun_tensor_id gemm_input_gradient(clrun__grad *g, const clrun__conv_geometry *geo,
                                           const clrun_tensor_type *tx, const clrun_tensor_type *tw,
                                           clrun_tensor_id d, clrun_tensor_id w)
{
    int64_t n = tx->shape[0];
    clrun_tensor_type tdy = {tx->dtype, 4, {n, tw->shape[0], geo->oh, geo->ow}};
    clrun__conv_geometry back = *geo; /* the transposed convolution: dy's windows over x */
    back.oh = tx->shape[2];
    back.ow = tx->shape[3];
    const clrun__emitter e = {g, grad_emit};
    double cols = (double)tw->shape[1] * (double)geo->groups * (double)(tw->shape[2] * tw->shape[3]) *
                  (double)(geo->oh * geo->ow);
    double dx = (double)tx->shape[1] * (double)(tx->shape[2] * tx->shape[3]);
    int64_t chunks = (int64_t)(cols / (GEMM_COLUMNS_PER_DX * dx)) + 1;
    chunks = chunks < n ? chunks : n;
    chunks = chunks < GEMM_MAX_CHUNKS ? chunks : GEMM_MAX_CHUNKS;
    bool rows = geo->groups == 1 && geo->oh * geo->ow <= ROWS_MAX_POSITIONS;
    if (!clrun__lower_conv_transpose_applies(&tdy, tw, &back))
        return clrun__lower_conv_transpose(&e, &tdy, tw, &back, d, w); /* -2 */
    if (chunks <= 1)
        return rows ? rows_input_gradient(g, geo, tx, tw, n, d, w)
                    : clrun__lower_conv_transpose(&e, &tdy, tw, &back, d, w);
    int64_t per = (n + chunks - 1) / chunks;
    chunks = (n + per - 1) / per;
    clrun_tensor_id parts[GEMM_MAX_CHUNKS];
    for (int64_t c = 0; c < chunks; c++) {
        int64_t starts[1] = {c * per}, ends[1] = {c + 1 < chunks ? (c + 1) * per : n}, axes[1] = {0};
        clrun_attr a_slice[3] = {clrun__gattr_ints("starts", starts, 1), clrun__gattr_ints("ends", ends, 1),
                                 clrun__gattr_ints("axes", axes, 1)};
        clrun_tensor_id dc = clrun__gemit(g, "slice", &d, 1, a_slice, 3);
        if (dc < 0)
            return -1;
        tdy.shape[0] = ends[0] - starts[0];
        parts[c] = rows ? rows_input_gradient(g, geo, tx, tw, tdy.shape[0], dc, w)
                                    : clrun__lower_conv_transpose(&e, &tdy, tw, &back, dc, w);
        if (parts[c] < 0)
            return -1;
    }
    clrun_attr a_axis = clrun__gattr_int("axis", 0);
    return clrun__gemit(g, "concat", parts, (int)chunks, &a_axis, 1);
}

static clrun_status conv_rule(clrun__grad *g, const clrun__node *node, const clrun_tensor_id *dy,
                              const bool *want, clrun_tensor_id *dx)
{
    clrun_tensor_type types[4];
    clrun__op_call call;
    clrun__node_call(g->fwd, node, types, &call);
    clrun__conv_geometry geo;
    char why[256];
    clrun__infer_error err = {"conv2d", why, sizeof why};
    if (clrun__conv_geometry_of(&call, &geo, &err) != CLRUN_OK)
        return clrun__grad_failed(g, CLRUN_ERROR_INVALID_GRAPH, "gradient: %s", why);
    const clrun_tensor_type *tx = &types[0], *tw = &types[1];
    clrun_tensor_id x = node->inputs[0], w = node->inputs[1], d = dy[0];
    int64_t pads[4] = {geo.pad[0], geo.pad[1], geo.pad_end[0], geo.pad_end[1]};
    /* The flipped weights are a copy as large as w; the columns hold N * OH * OW values per
     * weight of a group's output channel. Where the positions are so few that the columns are no
     * more than that copy (ResNet's last two stages: the 9 MiB copy of a 512-channel layer set a
     * train step's peak), the product path reads w as it is, in chunks of images. */
    bool few = tw->shape[0] / geo.groups >= tx->shape[0] * geo.oh * geo.ow;
    if (want[0]) {
        dx[0] = few ? -2 : unit_stride_input_gradient(g, &geo, pads, tx, tw, d, w);
        if (dx[0] == -2)
            dx[0] = gemm_input_gradient(g, &geo, tx, tw, d, w);
    }
    if (want[0] && dx[0] == -2) {
        int64_t outpad[2];
        for (int k = 0; k < 2; k++) {
            int64_t in = tx->shape[2 + k], o = k == 0 ? geo.oh : geo.ow;
            int64_t span = geo.stride[k] * (o - 1) + geo.dilation[k] * (tw->shape[2 + k] - 1) + 1 -
                           pads[k] - pads[2 + k];
            outpad[k] = in - span;
        }
        clrun_attr attrs[5] = {clrun__gattr_ints("stride", geo.stride, 2),
                               clrun__gattr_ints("pads", pads, 4),
                               clrun__gattr_ints("dilation", geo.dilation, 2),
                               clrun__gattr_int("groups", geo.groups),
                               clrun__gattr_ints("output_padding", outpad, 2)};
        clrun_tensor_id in[2] = {d, w};
        dx[0] = clrun__gemit(g, "conv_transpose2d", in, 2, attrs,
                             outpad[0] == 0 && outpad[1] == 0 ? 4 : 5);
    }
    if (want[0] && dx[0] < 0)
        return CLRUN_ERROR_INVALID_GRAPH;
    if (want[1]) {
        int64_t kernel[2] = {tw->shape[2], tw->shape[3]};
        clrun_attr attrs[5] = {clrun__gattr_ints("stride", geo.stride, 2),
                               clrun__gattr_ints("pads", pads, 4),
                               clrun__gattr_ints("dilation", geo.dilation, 2),
                               clrun__gattr_int("groups", geo.groups),
                               clrun__gattr_ints("kernel", kernel, 2)};
        clrun_tensor_id in[2] = {x, d};
        dx[1] = clrun__gemit(g, "conv2d_grad_weight", in, 2, attrs, 5);
        if (dx[1] < 0)
            return CLRUN_ERROR_INVALID_GRAPH;
    }
    if (node->input_count > 2 && want[2]) {
        /* dy summed over each image's positions, then over the images: two reductions over
         * one run each (a work-item per output on CPUs), where one over both axes at once
         * took a work-group per channel (ResNet-18's stem: 6 ms against 0.3) */
        int64_t positions[2] = {2, 3}, images[1] = {0};
        clrun_attr a_positions = clrun__gattr_ints("axes", positions, 2);
        clrun_attr a_images = clrun__gattr_ints("axes", images, 1);
        clrun_tensor_id t = clrun__gemit(g, "reduce_sum", &d, 1, &a_positions, 1);
        dx[2] = t < 0 ? -1 : clrun__gemit(g, "reduce_sum", &t, 1, &a_images, 1);
        if (dx[2] < 0)
            return CLRUN_ERROR_INVALID_GRAPH;
    }
    return CLRUN_OK;
}

static clrun_status maxpool_rule(clrun__grad *g, const clrun__node *node, const clrun_tensor_id *dy,
                                 const bool *want, clrun_tensor_id *dx)
{
    (void)want;
    static const char *const names[] = {"kernel", "stride", "pad", "pads", "ceil_mode", "dilation"};
    clrun_attr attrs[6];
    int n = copy_attrs(node, names, 6, attrs);
    clrun_tensor_id in[2] = {node->inputs[0], dy[0]};
    dx[0] = clrun__gemit(g, "maxpool2d_grad", in, 2, attrs, n);
    return dx[0] < 0 ? CLRUN_ERROR_INVALID_GRAPH : CLRUN_OK;
}

static clrun_status avgpool_rule(clrun__grad *g, const clrun__node *node, const clrun_tensor_id *dy,
                                 const bool *want, clrun_tensor_id *dx)
{
    (void)want;
    static const char *const names[] = {"kernel", "stride", "pad", "pads", "ceil_mode",
                                        "count_include_pad"};
    clrun_attr attrs[7];
    int n = copy_attrs(node, names, 6, attrs);
    const clrun_tensor_type *tx = clrun__gfwd_type(g, node->inputs[0]);
    int64_t size[2] = {tx->shape[2], tx->shape[3]};
    attrs[n++] = clrun__gattr_ints("size", size, 2);
    dx[0] = clrun__gemit(g, "avgpool2d_grad", &dy[0], 1, attrs, n);
    return dx[0] < 0 ? CLRUN_ERROR_INVALID_GRAPH : CLRUN_OK;
}

const clrun__grad_rule clrun__grad_rules_conv[] = {
    {"conv2d", conv_rule, 0x7u},
    {"maxpool2d", maxpool_rule, 0x1u},
    {"avgpool2d", avgpool_rule, 0x1u},
    {NULL, NULL, 0},
};
