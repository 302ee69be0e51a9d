/* Lowerings of a convolution op into a composition of others that runs on faster kernels,
 * written once for every producer of graphs (the ONNX importer, the gradient rules, the
 * benchmarks), each of which supplies its own way to add a node: a clrun__emitter. Pure C. */
#ifndef CLRUN_LIB_GRAPH_CONV_LOWER_H
#define CLRUN_LIB_GRAPH_CONV_LOWER_H

#include "graph/op_geometry.h"

/* How a lowering adds a node: op on inputs (handles the producer gave, or that emit returned)
 * with attrs, one output; its handle (>= 0), or -1 on failure (the producer keeps the reason). */
typedef struct clrun__emitter {
    void *self;
    int32_t (*emit)(void *self, const char *op, const int32_t *inputs, int input_count,
                    const clrun_attr *attrs, int attr_count);
} clrun__emitter;

/* conv_transpose2d of x [N, C, H, W] (handle hx) by w [C, O/G, KH, KW] (handle hw), G =
 * g->groups, into [N, O, g->oh, g->ow] with g's stride, pads and dilation (output padding is
 * implied by oh and ow), as a matrix product and a scatter: cols [N, O*KH*KW, H*W] = w^T x (w
 * [C, O*KH*KW] transposed, x [N, C, H*W]; with groups one product per group, w [G, C/G,
 * O/G*KH*KW] by x [N, G, C/G, H*W]), then col2im adds each column into the output element its
 * tap reaches, reading rows of cols along W (in a DBNet decoder twice as fast as the transposed
 * layout [N, H*W, O*KH*KW], which col2im reads O*KH*KW floats apart). It is also a strided
 * convolution's input gradient (dy as x). The handle of the result; -2 when it does not apply
 * (an output padding of a stride or more, more than 2^31 - 1 elements of cols per image:
 * col2im's limit), -1 when an emit failed. */
/* Whether clrun__lower_conv_transpose applies to these types and geometry (it returns -2 where
 * not), whatever x's batch. */
bool clrun__lower_conv_transpose_applies(const clrun_tensor_type *x, const clrun_tensor_type *w,
                                         const clrun__conv_geometry *g);

int32_t clrun__lower_conv_transpose(const clrun__emitter *e, const clrun_tensor_type *x,
                                    const clrun_tensor_type *w, const clrun__conv_geometry *g,
                                    int32_t hx, int32_t hw);

#endif
