/* Gradient rule of matmul: y = alpha op(a) op(b) + bias, op a transpose where asked. Each
 * operand's gradient is another product of the same shapes, its transposes chosen so that it
 * comes out in the operand's stored layout; broadcast batch dimensions are summed back. A 2-D
 * weight under a batched activation gets its gradient as one product over the flattened batch
 * (no per-batch copies to sum). */
#include <stdbool.h>

#include "grad/grad.h"

static clrun_tensor_id product(clrun__grad *g, clrun_tensor_id a, clrun_tensor_id b, bool ta,
                               bool tb, double alpha)
{
    clrun_attr attrs[3];
    int n = 0;
    if (ta)
        attrs[n++] = clrun__gattr_int("transpose_a", 1);
    if (tb)
        attrs[n++] = clrun__gattr_int("transpose_b", 1);
    if (alpha != 1.0)
        attrs[n++] = clrun__gattr_float("alpha", alpha);
    clrun_tensor_id in[2] = {a, b};
    return clrun__gemit(g, "matmul", in, 2, attrs, n);
}

/* t viewed as [rows, last]: every leading dimension flattened. */
static clrun_tensor_id flatten(clrun__grad *g, clrun_tensor_id t)
{
    const clrun_tensor_type *type = clrun__gtype(g, t);
    clrun_tensor_type flat = {.dtype = type->dtype, .rank = 2};
    flat.shape[1] = type->shape[type->rank - 1];
    flat.shape[0] = (int64_t)(clrun_tensor_elements(type) / (uint64_t)flat.shape[1]);
    return clrun__greshape(g, t, &flat);
}

static clrun_status matmul_rule(clrun__grad *g, const clrun__node *node, const clrun_tensor_id *dy,
                                const bool *want, clrun_tensor_id *dx)
{
    clrun_tensor_id a = node->inputs[0], b = node->inputs[1], d = dy[0];
    bool ta = clrun__gnode_int(node, "transpose_a", 0) != 0;
    bool tb = clrun__gnode_int(node, "transpose_b", 0) != 0;
    double alpha = clrun__gnode_float(node, "alpha", 1.0);
    const clrun_tensor_type *type_a = clrun__gfwd_type(g, a), *type_b = clrun__gfwd_type(g, b);
    if (want[0]) {
        clrun_tensor_id r;
        if (!ta)
            r = tb ? product(g, d, b, false, false, alpha) : product(g, d, b, false, true, alpha);
        else
            r = tb ? product(g, b, d, true, true, alpha) : product(g, b, d, false, true, alpha);
        dx[0] = clrun__gunbroadcast(g, r, type_a);
        if (dx[0] < 0)
            return CLRUN_ERROR_INVALID_GRAPH;
    }
    if (want[1]) {
        clrun_tensor_id r;
        if (type_b->rank == 2 && type_a->rank > 2 && !ta) {
            /* A weight under a batch: one product over every row of the batch. */
            clrun_tensor_id fa = flatten(g, a), fd = flatten(g, d);
            r = tb ? product(g, fd, fa, true, false, alpha) : product(g, fa, fd, true, false, alpha);
        } else if (!tb) {
            r = ta ? product(g, a, d, false, false, alpha) : product(g, a, d, true, false, alpha);
        } else {
            r = ta ? product(g, d, a, true, true, alpha) : product(g, d, a, true, false, alpha);
        }
        dx[1] = clrun__gunbroadcast(g, r, type_b);
        if (dx[1] < 0)
            return CLRUN_ERROR_INVALID_GRAPH;
    }
    if (node->input_count > 2 && want[2]) {
        dx[2] = clrun__gunbroadcast(g, d, clrun__gfwd_type(g, node->inputs[2]));
        if (dx[2] < 0)
            return CLRUN_ERROR_INVALID_GRAPH;
    }
    return CLRUN_OK;
}

const clrun__grad_rule clrun__grad_rules_matmul[] = {
    {"matmul", matmul_rule, 0x7u},
    {NULL, NULL, 0},
};
