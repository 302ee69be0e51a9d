/* Gradient rules of convolution and pooling. A convolution's input gradient is the transposed
 * convolution of dy by the same weights (output padding restoring rows the stride dropped); its
 * weight gradient is conv2d_grad_weight; its bias gradient dy summed per channel. Pooling routes
 * dy back through maxpool2d_grad and avgpool2d_grad, which recompute the windows. */
#include "grad/grad.h"
#include "graph/op_geometry.h"

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
    if (want[0]) {
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
        if (dx[0] < 0)
            return CLRUN_ERROR_INVALID_GRAPH;
    }
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
        int64_t axes[3] = {0, 2, 3};
        clrun_attr attrs[1] = {clrun__gattr_ints("axes", axes, 3)};
        dx[2] = clrun__gemit(g, "reduce_sum", &d, 1, attrs, 1);
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
