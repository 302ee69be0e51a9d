/* What every gradient rule emits nodes with: fresh names, attribute constructors, constants,
 * and the gradient of broadcasting. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "grad/grad.h"
#include "graph/types.h"

clrun_status clrun__grad_failed(clrun__grad *g, clrun_status status, const char *format, ...)
{
    if (g->err && g->errlen && g->err[0] == '\0') {
        va_list args;
        va_start(args, format);
        vsnprintf(g->err, g->errlen, format, args);
        va_end(args);
    }
    return status;
}

const clrun_tensor_type *clrun__gtype(const clrun__grad *g, clrun_tensor_id id)
{
    return &g->out->tensors[id].type;
}

/* A name no tensor of `out` has: "grad.N". */
static void fresh_name(clrun__grad *g, char *name, size_t size)
{
    do
        snprintf(name, size, "grad.%u", (unsigned)g->counter++);
    while (clrun__graph_find_ident(g->out, name) >= 0);
}

/* The forward node being differentiated, for messages. */
static const char *node_label(const clrun__grad *g)
{
    if (g->node < 0 || g->node >= g->fwd->node_count)
        return "the loss";
    const clrun__node *n = &g->fwd->nodes[g->node];
    return clrun__tensor_label(&g->fwd->tensors[n->outputs[0]]);
}

clrun_tensor_id clrun__gemit(clrun__grad *g, const char *op, const clrun_tensor_id *inputs,
                             int input_count, const clrun_attr *attrs, int attr_count)
{
    for (int i = 0; i < input_count; i++)
        if (inputs[i] < 0)
            return -1;
    char name[64];
    fresh_name(g, name, sizeof name);
    const char *names[1] = {name};
    clrun_tensor_id id = -1;
    clrun_status s = clrun_graph_add_node(g->out, op, inputs, input_count, names, 1, attrs,
                                          attr_count, &id);
    if (s != CLRUN_OK) {
        clrun__grad_failed(g, s, "gradient of %s (%s): %s", node_label(g),
                           g->node >= 0 ? g->fwd->nodes[g->node].op->name : "loss",
                           clrun_graph_last_error(g->out));
        return -1;
    }
    return id;
}

clrun_tensor_id clrun__gemit1(clrun__grad *g, const char *op, clrun_tensor_id x)
{
    return clrun__gemit(g, op, &x, 1, NULL, 0);
}

clrun_tensor_id clrun__gemit2(clrun__grad *g, const char *op, clrun_tensor_id a, clrun_tensor_id b)
{
    clrun_tensor_id in[2] = {a, b};
    return clrun__gemit(g, op, in, 2, NULL, 0);
}

clrun_tensor_id clrun__gscale(clrun__grad *g, clrun_tensor_id x, double alpha, double beta)
{
    if (alpha == 1.0 && beta == 0.0)
        return x;
    clrun_attr attrs[2] = {clrun__gattr_float("alpha", alpha), clrun__gattr_float("beta", beta)};
    return clrun__gemit(g, "scale", &x, 1, attrs, beta == 0.0 ? 1 : 2);
}

static clrun_tensor_id constant(clrun__grad *g, const clrun_tensor_type *type, const void *data,
                                clrun_fill fill)
{
    char name[64];
    fresh_name(g, name, sizeof name);
    clrun_tensor_id id = -1;
    clrun_status s = clrun_graph_add_constant(g->out, name, type, data, fill, 0, 0, 0, &id);
    if (s != CLRUN_OK) {
        clrun__grad_failed(g, s, "gradient of %s: %s", node_label(g),
                           clrun_graph_last_error(g->out));
        return -1;
    }
    return id;
}

clrun_tensor_id clrun__gscalar(clrun__grad *g, clrun_dtype dtype, double value)
{
    clrun_tensor_type t = {.dtype = dtype, .rank = 0};
    unsigned char data[8];
    switch (dtype) {
    case CLRUN_F32: {
        float v = (float)value;
        memcpy(data, &v, sizeof v);
        break;
    }
    case CLRUN_F64:
        memcpy(data, &value, sizeof value);
        break;
    case CLRUN_I32: {
        int32_t v = (int32_t)value;
        memcpy(data, &v, sizeof v);
        break;
    }
    case CLRUN_I64: {
        int64_t v = (int64_t)value;
        memcpy(data, &v, sizeof v);
        break;
    }
    default:
        clrun__grad_failed(g, CLRUN_ERROR_INVALID_ARGUMENT, "gradient of %s: no %s scalar",
                           node_label(g), clrun_dtype_name(dtype));
        return -1;
    }
    return constant(g, &t, data, CLRUN_FILL_ZEROS);
}

clrun_tensor_id clrun__gzeros(clrun__grad *g, const clrun_tensor_type *type)
{
    return constant(g, type, NULL, CLRUN_FILL_ZEROS);
}

clrun_tensor_id clrun__greshape(clrun__grad *g, clrun_tensor_id x, const clrun_tensor_type *target)
{
    if (x < 0)
        return -1;
    /* A copy: `target` may point into the graph being built, which each node added moves. */
    const clrun_tensor_type want = *target, *type = &want;
    if (clrun__shape_equal(clrun__gtype(g, x), type))
        return x;
    /* reshape needs at least one dimension in its list: rank 0 is [1] read as a scalar. */
    int64_t shape[CLRUN_MAX_DIMS];
    int n = type->rank;
    for (int d = 0; d < n; d++)
        shape[d] = type->shape[d];
    clrun_attr a = clrun__gattr_ints("shape", shape, n);
    return clrun__gemit(g, "reshape", &x, 1, &a, 1);
}

clrun_tensor_id clrun__gunbroadcast(clrun__grad *g, clrun_tensor_id x, const clrun_tensor_type *target)
{
    if (x < 0)
        return -1;
    const clrun_tensor_type want = *target, *type = &want;
    const clrun_tensor_type *tx = clrun__gtype(g, x);
    if (clrun__shape_equal(tx, type))
        return x;
    int64_t axes[CLRUN_MAX_DIMS];
    int n = 0;
    int lead = tx->rank - type->rank;
    for (int d = 0; d < tx->rank; d++) {
        int td = d - lead;
        if (td < 0 || (type->shape[td] == 1 && tx->shape[d] != 1))
            axes[n++] = d;
    }
    /* Only leading dimensions summed: the sum has type's shape as it is (no reshape after it,
     * which a fused update would read through as a view and so not write in place). */
    bool leading_only = true;
    for (int k = 0; k < n; k++)
        leading_only = leading_only && axes[k] < lead;
    clrun_tensor_id r = x;
    if (n > 0) {
        clrun_attr attrs[2] = {clrun__gattr_ints("axes", axes, n),
                               clrun__gattr_int("keepdims", leading_only ? 0 : 1)};
        r = clrun__gemit(g, "reduce_sum", &x, 1, attrs, 2);
    }
    return clrun__greshape(g, r, type);
}

clrun_tensor_id clrun__gexpand(clrun__grad *g, clrun_tensor_id x, const clrun_tensor_type *target)
{
    if (x < 0)
        return -1;
    const clrun_tensor_type want = *target, *type = &want;
    if (clrun__shape_equal(clrun__gtype(g, x), type))
        return x;
    int64_t shape[CLRUN_MAX_DIMS];
    for (int d = 0; d < type->rank; d++)
        shape[d] = type->shape[d];
    clrun_attr a = clrun__gattr_ints("shape", shape, type->rank);
    return clrun__gemit(g, "expand", &x, 1, &a, 1);
}

const clrun_attr *clrun__gnode_attr(const clrun__node *node, const char *name)
{
    for (int i = 0; i < node->attr_count; i++)
        if (node->attrs[i].name && strcmp(node->attrs[i].name, name) == 0)
            return &node->attrs[i];
    return NULL;
}

int64_t clrun__gnode_int(const clrun__node *node, const char *name, int64_t fallback)
{
    const clrun_attr *a = clrun__gnode_attr(node, name);
    return a && a->kind == CLRUN_ATTR_INT ? a->i : fallback;
}

double clrun__gnode_float(const clrun__node *node, const char *name, double fallback)
{
    const clrun_attr *a = clrun__gnode_attr(node, name);
    if (a == NULL)
        return fallback;
    return a->kind == CLRUN_ATTR_FLOAT ? a->f : a->kind == CLRUN_ATTR_INT ? (double)a->i : fallback;
}
