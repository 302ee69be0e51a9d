/* Gradient rules of the indexing ops and dropout. A gather's table gets dy summed into the rows
 * it read (gather_grad: a deterministic scatter-add); the indices get nothing. Dropout's
 * gradient is dropout of dy with the same seed, ratio and stream: the same mask, since the mask
 * is a pure function of (seed, stream, element). */
#include "grad/grad.h"

static clrun_status gather_rule(clrun__grad *g, const clrun__node *node, const clrun_tensor_id *dy,
                                const bool *want, clrun_tensor_id *dx)
{
    (void)want;
    const clrun_tensor_type *data = clrun__gfwd_type(g, node->inputs[0]);
    const clrun_attr *axis = clrun__gnode_attr(node, "axis");
    clrun_attr attrs[2];
    int n = 0;
    if (axis) {
        int64_t a = axis->i < 0 ? axis->i + data->rank : axis->i;
        attrs[n++] = clrun__gattr_int("axis", a);
        attrs[n++] = clrun__gattr_int("size", data->shape[a]);
    } else {
        attrs[n++] = clrun__gattr_int("size", data->shape[0]);
    }
    clrun_tensor_id in[2] = {node->inputs[1], dy[0]};
    dx[0] = clrun__gemit(g, "gather_grad", in, 2, attrs, n);
    return dx[0] < 0 ? CLRUN_ERROR_INVALID_GRAPH : CLRUN_OK;
}

static clrun_status dropout_rule(clrun__grad *g, const clrun__node *node, const clrun_tensor_id *dy,
                                 const bool *want, clrun_tensor_id *dx)
{
    (void)want;
    clrun_tensor_id in[2] = {dy[0], node->inputs[1]};
    dx[0] = clrun__gemit(g, "dropout", in, 2, node->attrs, node->attr_count);
    return dx[0] < 0 ? CLRUN_ERROR_INVALID_GRAPH : CLRUN_OK;
}

const clrun__grad_rule clrun__grad_rules_index[] = {
    {"gather", gather_rule, 0x1u},
    {"dropout", dropout_rule, 0x1u},
    {NULL, NULL, 0},
};
