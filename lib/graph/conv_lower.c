/* Lowerings of convolution ops onto the product and col2im (lib/graph/conv_lower.h). */
#include "graph/conv_lower.h"

#include <limits.h>
#include <string.h>

#include "graph/graph.h"

/* The windows of a convolution over `extent` (col2im's count of positions along one axis), or
 * -1 when the kernel does not fit. */
static int64_t windows(int64_t extent, int64_t before, int64_t after, int64_t span, int64_t stride)
{
    int64_t room = extent + before + after - span - 1;
    return room < 0 ? -1 : room / stride + 1;
}

bool clrun__lower_conv_transpose_applies(const clrun_tensor_type *x, const clrun_tensor_type *w,
                                         const clrun__conv_geometry *g)
{
    if (x->rank != 4 || w->rank != 4 || g->groups < 1 || x->shape[1] % g->groups || w->shape[0] != x->shape[1])
        return false;
    int64_t h = x->shape[2], wd = x->shape[3];
    int64_t groups = g->groups, og = w->shape[1], kh = w->shape[2], kw = w->shape[3];
    /* col2im's geometry is ints: every term of it in [0, 2^31) (stride and dilation from 1) */
    const int64_t terms[12] = {g->oh, g->ow, kh, kw, g->stride[0], g->stride[1], g->dilation[0],
                               g->dilation[1], g->pad[0], g->pad[1], g->pad_end[0], g->pad_end[1]};
    for (int i = 0; i < 12; i++)
        if (terms[i] < (i >= 4 && i < 8 ? 1 : 0) || terms[i] > INT_MAX)
            return false;
    /* every column position must be one of x's: an output padding below the stride (a wider one,
     * allowed below the dilation, gives col2im more windows than x has) */
    if (windows(g->oh, g->pad[0], g->pad_end[0], g->dilation[0] * (kh - 1), g->stride[0]) != h ||
        windows(g->ow, g->pad[1], g->pad_end[1], g->dilation[1] * (kw - 1), g->stride[1]) != wd)
        return false;
    double cols_per_image = (double)(groups * og * kh * kw) * (double)(h * wd);
    if (cols_per_image > (double)INT_MAX)
        return false;
    return true;
}

int32_t clrun__lower_conv_transpose(const clrun__emitter *e, const clrun_tensor_type *x,
                                    const clrun_tensor_type *w, const clrun__conv_geometry *g,
                                    int32_t hx, int32_t hw)
{
    if (!clrun__lower_conv_transpose_applies(x, w, g))
        return -2;
    int64_t n = x->shape[0], c = x->shape[1], h = x->shape[2], wd = x->shape[3];
    int64_t groups = g->groups, cg = c / groups, og = w->shape[1], kh = w->shape[2], kw = w->shape[3];
    /* one group: w [C, O*KH*KW] by x [N, C, H*W]; else w [G, C/G, O/G*KH*KW] by x [N, G, C/G,
     * H*W], a product per (image, group), whose [N, G, O/G*KH*KW, H*W] is [N, O*KH*KW, H*W] */
    int64_t xs[4] = {n, groups, cg, h * wd}, ws[3] = {groups, cg, og * kh * kw};
    bool one = groups == 1;
    clrun_attr a_x = one ? clrun__gattr_ints("shape", (int64_t[]){n, c, h * wd}, 3) : clrun__gattr_ints("shape", xs, 4);
    clrun_attr a_w = one ? clrun__gattr_ints("shape", (int64_t[]){c, og * kh * kw}, 2) : clrun__gattr_ints("shape", ws, 3);
    clrun_attr a_ta = clrun__gattr_int("transpose_a", 1);
    int32_t in[2] = {e->emit(e->self, "reshape", &hw, 1, &a_w, 1), -1};
    if (in[0] < 0 || (in[1] = e->emit(e->self, "reshape", &hx, 1, &a_x, 1)) < 0)
        return -1;
    int32_t cols = e->emit(e->self, "matmul", in, 2, &a_ta, 1);
    clrun_attr a_cols = clrun__gattr_ints("shape", (int64_t[]){n, groups * og * kh * kw, h * wd}, 3);
    if (cols >= 0 && !one)
        cols = e->emit(e->self, "reshape", &cols, 1, &a_cols, 1); /* [N, O*KH*KW, H*W] */
    if (cols < 0)
        return -1;
    int64_t image[2] = {g->oh, g->ow}, kernel[2] = {kh, kw};
    int64_t pads[4] = {g->pad[0], g->pad[1], g->pad_end[0], g->pad_end[1]};
    clrun_attr attrs[5] = {clrun__gattr_ints("image", image, 2), clrun__gattr_ints("kernel", kernel, 2),
                           clrun__gattr_ints("stride", g->stride, 2), clrun__gattr_ints("pads", pads, 4),
                           clrun__gattr_ints("dilation", g->dilation, 2)};
    return e->emit(e->self, "col2im", &cols, 1, attrs, 5);
}
