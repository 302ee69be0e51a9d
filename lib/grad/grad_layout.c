/* Gradient rules of the layout ops, which move elements without changing them: each input's
 * gradient is dy moved back (reshape back, the inverse permutation, the slice of a concat, a
 * slice padded with zeros to its input's shape, a broadcast summed back). */
#include <string.h>

#include "grad/grad.h"
#include "graph/layout_geometry.h"

static clrun_status reshape_rule(clrun__grad *g, const clrun__node *node, const clrun_tensor_id *dy,
                                 const bool *want, clrun_tensor_id *dx)
{
    (void)want;
    dx[0] = clrun__greshape(g, dy[0], clrun__gfwd_type(g, node->inputs[0]));
    return dx[0] < 0 ? CLRUN_ERROR_INVALID_GRAPH : CLRUN_OK;
}

static clrun_status transpose_rule(clrun__grad *g, const clrun__node *node,
                                   const clrun_tensor_id *dy, const bool *want, clrun_tensor_id *dx)
{
    (void)want;
    const clrun_attr *perm = clrun__gnode_attr(node, "perm");
    int rank = clrun__gfwd_type(g, node->inputs[0])->rank;
    if (perm == NULL || perm->kind != CLRUN_ATTR_INTS || perm->count != rank)
        return clrun__grad_failed(g, CLRUN_ERROR_INVALID_GRAPH, "gradient: transpose without perm");
    int64_t inverse[CLRUN_MAX_DIMS];
    for (int i = 0; i < rank; i++)
        inverse[perm->ints[i]] = i;
    clrun_attr a = clrun__gattr_ints("perm", inverse, rank);
    dx[0] = clrun__gemit(g, "transpose", &dy[0], 1, &a, 1);
    return dx[0] < 0 ? CLRUN_ERROR_INVALID_GRAPH : CLRUN_OK;
}

static clrun_status expand_rule(clrun__grad *g, const clrun__node *node, const clrun_tensor_id *dy,
                                const bool *want, clrun_tensor_id *dx)
{
    (void)want;
    dx[0] = clrun__gunbroadcast(g, dy[0], clrun__gfwd_type(g, node->inputs[0]));
    return dx[0] < 0 ? CLRUN_ERROR_INVALID_GRAPH : CLRUN_OK;
}

/* dy, the part of x starting at start[] with count[] elements per axis (step 1), padded with
 * zeros back to x's shape. */
static clrun_tensor_id unslice(clrun__grad *g, clrun_tensor_id d, const clrun_tensor_type *tx,
                               const int64_t *start, const int64_t *count)
{
    int64_t pads[2 * CLRUN_MAX_DIMS];
    bool any = false;
    for (int k = 0; k < tx->rank; k++) {
        pads[k] = start[k];
        pads[tx->rank + k] = tx->shape[k] - start[k] - count[k];
        any = any || pads[k] != 0 || pads[tx->rank + k] != 0;
    }
    if (!any)
        return d;
    clrun_attr a = clrun__gattr_ints("pads", pads, 2 * tx->rank);
    return clrun__gemit(g, "pad", &d, 1, &a, 1);
}

static clrun_status slice_rule(clrun__grad *g, const clrun__node *node, const clrun_tensor_id *dy,
                               const bool *want, clrun_tensor_id *dx)
{
    (void)want;
    clrun_tensor_type types[2];
    clrun__op_call call;
    clrun__node_call(g->fwd, node, types, &call);
    clrun__slice_geometry geo;
    char why[256];
    clrun__infer_error err = {node->op->name, why, sizeof why};
    if (clrun__slice_geometry_of(&call, node->op->name, &geo, &err) != CLRUN_OK)
        return clrun__grad_failed(g, CLRUN_ERROR_INVALID_GRAPH, "gradient: %s", why);
    const clrun_tensor_type *tx = &types[0];
    int64_t start[CLRUN_MAX_DIMS];
    for (int k = 0; k < tx->rank; k++) {
        if (geo.step[k] != 1)
            return clrun__grad_failed(g, CLRUN_ERROR_UNSUPPORTED, "gradient: %s with a step of "
                                      "%lld has no gradient rule (only step 1)", node->op->name,
                                      (long long)geo.step[k]);
        start[k] = geo.start[k];
    }
    dx[0] = unslice(g, dy[0], tx, start, geo.count);
    return dx[0] < 0 ? CLRUN_ERROR_INVALID_GRAPH : CLRUN_OK;
}

static clrun_status concat_rule(clrun__grad *g, const clrun__node *node, const clrun_tensor_id *dy,
                                const bool *want, clrun_tensor_id *dx)
{
    const clrun_tensor_type *ty = clrun__gfwd_type(g, node->outputs[0]);
    int64_t axis = clrun__gnode_int(node, "axis", 0);
    if (axis < 0)
        axis += ty->rank;
    int64_t at = 0;
    for (int i = 0; i < node->input_count; i++) {
        int64_t n = clrun__gfwd_type(g, node->inputs[i])->shape[axis];
        if (want[i]) {
            clrun_attr attrs[3] = {clrun__gattr_int("axis", axis), clrun__gattr_int("start", at),
                                   clrun__gattr_int("end", at + n)};
            dx[i] = n == ty->shape[axis] ? dy[0] : clrun__gemit(g, "slice", &dy[0], 1, attrs, 3);
            if (dx[i] < 0)
                return CLRUN_ERROR_INVALID_GRAPH;
        }
        at += n;
    }
    return CLRUN_OK;
}

static clrun_status pad_rule(clrun__grad *g, const clrun__node *node, const clrun_tensor_id *dy,
                             const bool *want, clrun_tensor_id *dx)
{
    (void)want;
    const clrun_tensor_type *tx = clrun__gfwd_type(g, node->inputs[0]);
    const clrun_attr *pads = clrun__gnode_attr(node, "pads");
    if (clrun__gnode_int(node, "mode", 0) != 0 || pads == NULL || pads->kind != CLRUN_ATTR_INTS ||
        pads->count != 2 * tx->rank)
        return clrun__grad_failed(g, CLRUN_ERROR_UNSUPPORTED, "gradient: pad has a gradient rule "
                                  "in constant mode only");
    int64_t starts[CLRUN_MAX_DIMS], ends[CLRUN_MAX_DIMS];
    for (int k = 0; k < tx->rank; k++) {
        if (pads->ints[k] < 0 || pads->ints[tx->rank + k] < 0)
            return clrun__grad_failed(g, CLRUN_ERROR_UNSUPPORTED, "gradient: pad with negative "
                                      "pads (cropping) has no gradient rule");
        starts[k] = pads->ints[k];
        ends[k] = pads->ints[k] + tx->shape[k];
    }
    clrun_attr attrs[2] = {clrun__gattr_ints("starts", starts, tx->rank),
                           clrun__gattr_ints("ends", ends, tx->rank)};
    dx[0] = clrun__gemit(g, "slice", &dy[0], 1, attrs, 2);
    return dx[0] < 0 ? CLRUN_ERROR_INVALID_GRAPH : CLRUN_OK;
}

const clrun__grad_rule clrun__grad_rules_layout[] = {
    {"reshape", reshape_rule, 0x1u},
    {"transpose", transpose_rule, 0x1u},
    {"expand", expand_rule, 0x1u},
    {"slice", slice_rule, 0x1u},
    {"split", slice_rule, 0x1u},
    {"concat", concat_rule, 0xffffffffu},
    {"pad", pad_rule, 0x1u},
    {NULL, NULL, 0},
};
