/* Narrow weights: see clrun/weights.h. Pure C: the new constants are computed here. A weight
 * that only matmul (a matrix) and conv2d read becomes their narrow weight input (with a scale
 * input and the attribute dequant = 1 for i8): their kernels widen it as they read it
 * (lib/graph/op_geometry.h). Any other (conv_transpose2d's) is widened by ordinary cast and mul
 * nodes placed before its first reader. */
#include <clrun/weights.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"

bool clrun__narrow_weights_by_nodes = false;

/* The input a product reads its weight through, or -1 for other nodes. */
static int weight_input(const clrun__node *node)
{
    const char *op = node->op ? node->op->name : "";
    if (strcmp(op, "matmul") == 0 || strcmp(op, "conv2d") == 0 || strcmp(op, "conv_transpose2d") == 0)
        return node->input_count >= 2 ? 1 : -1;
    return -1;
}

static int64_t attr_int(const clrun__node *node, const char *name, int64_t otherwise)
{
    for (int k = 0; k < node->attr_count; k++)
        if (strcmp(node->attrs[k].name, name) == 0)
            return node->attrs[k].i;
    return otherwise;
}

/* The axis of a weight's output channels as its reader uses it: matmul's columns (its last
 * axis, the one before with transpose_b), conv2d's filters (first), conv_transpose2d's second. */
static int channel_axis(const clrun_graph *g, int32_t t, int32_t reader)
{
    const clrun__node *node = &g->nodes[reader];
    int rank = g->tensors[t].type.rank;
    if (strcmp(node->op->name, "conv2d") == 0)
        return 0;
    if (strcmp(node->op->name, "conv_transpose2d") == 0)
        return 1;
    return attr_int(node, "transpose_b", 0) && rank >= 2 ? rank - 2 : rank - 1;
}

typedef struct candidate {
    int32_t first_reader; /* -1: not a candidate */
    int axis;             /* output channels (int8); -1 where readers disagree */
    bool other_use;       /* read otherwise than as a product's weight */
    bool widened;         /* a reader widens no narrow weight itself (conv_transpose2d) */
} candidate;

/* Whether node's kernels read a narrow weight (input 1 of `rank`) themselves. */
static bool reads_narrow(const clrun__node *node, int rank)
{
    if (clrun__narrow_weights_by_nodes)
        return false;
    return strcmp(node->op->name, "conv2d") == 0 || (strcmp(node->op->name, "matmul") == 0 && rank == 2);
}

/* node reads `narrow` as its weight, with `scale` (>= 0: i8) as its last input, dequant = 1. */
static clrun_status retarget(clrun_graph *g, clrun__node *node, int32_t narrow, int32_t scale)
{
    node->inputs[1] = narrow;
    if (scale < 0)
        return CLRUN_OK;
    int32_t *inputs = realloc(node->inputs, sizeof *inputs * (size_t)(node->input_count + 1));
    if (inputs == NULL)
        return clrun__graph_fail(g, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "narrow weights: out of host memory");
    node->inputs = inputs;
    clrun_attr *attrs = realloc(node->attrs, sizeof *attrs * (size_t)(node->attr_count + 1));
    char *name = malloc(sizeof "dequant");
    if (attrs)
        node->attrs = attrs;
    if (attrs == NULL || name == NULL) {
        free(name);
        return clrun__graph_fail(g, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "narrow weights: out of host memory");
    }
    memcpy(name, "dequant", sizeof "dequant");
    node->attrs[node->attr_count++] = (clrun_attr){.name = name, .kind = CLRUN_ATTR_INT, .i = 1};
    node->inputs[node->input_count++] = scale;
    return CLRUN_OK;
}

/* Whether every value fits `to` (finite; within f16's range; bf16 has f32's, but a value that
 * rounds up past its largest becomes inf). */
static bool values_fit(const float *v, uint64_t n, clrun_dtype to)
{
    for (uint64_t i = 0; i < n; i++)
        if (!isfinite(v[i]) || (to == CLRUN_F16 && fabsf(v[i]) > 65504.0f) ||
            (to == CLRUN_BF16 && isinf(clrun__bf16_to_f32(clrun__f32_to_bf16(v[i])))))
            return false;
    return true;
}

/* int8 values of v (shape `type`, channels on `axis`) into q, one scale per channel into s. */
static void quantize(const float *v, const clrun_tensor_type *type, int axis, int8_t *q, float *s)
{
    uint64_t channels = (uint64_t)type->shape[axis], inner = 1, total = clrun_tensor_elements(type);
    for (int d = axis + 1; d < type->rank; d++)
        inner *= (uint64_t)type->shape[d];
    for (uint64_t c = 0; c < channels; c++)
        s[c] = 0;
    for (uint64_t i = 0; i < total; i++) {
        uint64_t c = i / inner % channels;
        float a = fabsf(v[i]);
        if (a > s[c])
            s[c] = a;
    }
    for (uint64_t c = 0; c < channels; c++)
        s[c] = s[c] > 0 ? s[c] / 127.0f : 1.0f;
    for (uint64_t i = 0; i < total; i++) {
        float r = rintf(v[i] / s[i / inner % channels]);
        q[i] = (int8_t)(r > 127 ? 127 : r < -127 ? -127 : r);
    }
}

/* The widening of constant t as new nodes (appended); *widened receives their f32 result. */
static clrun_status narrow_one(clrun_graph *g, int32_t t, clrun_dtype to, int axis, bool fused,
                               clrun_weights_report *r, bool *kept, clrun_tensor_id *widened)
{
    const clrun_tensor_type type = g->tensors[t].type;
    uint64_t n = clrun_tensor_elements(&type);
    char base[201], name[CLRUN__GRAPH_NAME_MAX + 1];
    snprintf(base, sizeof base, "%.200s", g->tensors[t].name);
    float *v = malloc(sizeof *v * (size_t)n);
    void *narrow = malloc((size_t)n * clrun_dtype_size(to));
    float *scales = to == CLRUN_I8 ? malloc(sizeof *scales * (size_t)type.shape[axis]) : NULL;
    if (!v || !narrow || (to == CLRUN_I8 && !scales)) {
        free(v);
        free(narrow);
        free(scales);
        return clrun__graph_fail(g, CLRUN_ERROR_OUT_OF_HOST_MEMORY,
                                 "narrow weights: out of host memory for '%s'", base);
    }
    clrun__constant_values(&g->tensors[t], v);
    *kept = !values_fit(v, n, to);
    clrun_status s = CLRUN_OK;
    if (!*kept) {
        clrun_tensor_type nt = type;
        nt.dtype = to;
        clrun_tensor_id stored = -1, cast_out = -1;
        clrun_attr to_f32 = {.name = "to", .kind = CLRUN_ATTR_INT, .i = CLRUN_F32};
        if (to == CLRUN_F16) {
            for (uint64_t i = 0; i < n; i++)
                ((uint16_t *)narrow)[i] = clrun__f32_to_f16(v[i]);
        } else if (to == CLRUN_BF16) {
            for (uint64_t i = 0; i < n; i++)
                ((uint16_t *)narrow)[i] = clrun__f32_to_bf16(v[i]);
        } else {
            quantize(v, &type, axis, narrow, scales);
        }
        snprintf(name, sizeof name, "%s.%s", base, clrun_dtype_name(to));
        s = clrun_graph_add_constant(g, name, &nt, narrow, CLRUN_FILL_ZEROS, 0, 0, 0, &stored);
        const char *out_name[1] = {name};
        if (s == CLRUN_OK && fused) { /* the readers read it narrow */
            clrun_tensor_id scale = -1;
            clrun_tensor_type st = {.dtype = CLRUN_F32, .rank = 1, .shape = {type.shape[axis]}};
            snprintf(name, sizeof name, "%s.scale", base);
            if (to == CLRUN_I8)
                s = clrun_graph_add_constant(g, name, &st, scales, CLRUN_FILL_ZEROS, 0, 0, 0, &scale);
            for (int32_t k = 0; s == CLRUN_OK && k < g->node_count; k++) {
                clrun__node *node = &g->nodes[k];
                if (weight_input(node) == 1 && node->inputs[1] == t)
                    s = retarget(g, node, stored, scale);
            }
        } else if (s == CLRUN_OK && to != CLRUN_I8) { /* f16, bf16: a cast widens them */
            snprintf(name, sizeof name, "%s.widened", base);
            s = clrun_graph_add_node(g, "cast", &stored, 1, out_name, 1, &to_f32, 1, widened);
        } else if (s == CLRUN_OK) {
            clrun_tensor_type st = {.dtype = CLRUN_F32, .rank = type.rank - axis};
            st.shape[0] = type.shape[axis];
            for (int d = 1; d < st.rank; d++)
                st.shape[d] = 1;
            clrun_tensor_id scale;
            snprintf(name, sizeof name, "%s.scale", base);
            s = clrun_graph_add_constant(g, name, &st, scales, CLRUN_FILL_ZEROS, 0, 0, 0, &scale);
            snprintf(name, sizeof name, "%s.q", base);
            if (s == CLRUN_OK)
                s = clrun_graph_add_node(g, "cast", &stored, 1, out_name, 1, &to_f32, 1, &cast_out);
            snprintf(name, sizeof name, "%s.widened", base);
            clrun_tensor_id in[2] = {cast_out, scale};
            if (s == CLRUN_OK)
                s = clrun_graph_add_node(g, "mul", in, 2, out_name, 1, NULL, 0, widened);
        }
        if (s == CLRUN_OK) {
            r->narrowed++;
            r->bytes_before += clrun_tensor_bytes(&type);
            r->bytes_after += n * clrun_dtype_size(to) +
                              (to == CLRUN_I8 ? sizeof(float) * (uint64_t)type.shape[axis] : 0);
        }
    }
    free(v);
    free(narrow);
    free(scales);
    return s;
}

clrun_status clrun_graph_narrow_weights(clrun_graph *graph, clrun_dtype to, int64_t min_elements,
                                        clrun_weights_report *report)
{
    clrun_weights_report r = {0};
    if (report)
        *report = r;
    if (graph == NULL)
        return CLRUN_ERROR_INVALID_ARGUMENT;
    if (to != CLRUN_F16 && to != CLRUN_BF16 && to != CLRUN_I8)
        return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT,
                                 "narrow weights: to %s: only f16, bf16 and i8 are narrow weights",
                                 clrun_dtype_name(to));
    if (min_elements < 0)
        return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT,
                                 "narrow weights: min_elements %lld is negative", (long long)min_elements);
    clrun_graph *g = graph;
    int32_t tensors0 = g->tensor_count, nodes0 = g->node_count;
    candidate *c = malloc(sizeof *c * ((size_t)tensors0 + 1));
    if (c == NULL)
        return clrun__graph_fail(g, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "narrow weights: out of host memory");
    for (int32_t t = 0; t < tensors0; t++)
        c[t] = (candidate){.first_reader = -1, .axis = -1};
    for (int32_t n = 0; n < nodes0; n++) {
        const clrun__node *node = &g->nodes[n];
        int w = weight_input(node);
        for (int i = 0; i < node->input_count; i++) {
            int32_t t = node->inputs[i];
            if (i != w) {
                c[t].other_use = true;
                continue;
            }
            int axis = channel_axis(g, t, n);
            if (!reads_narrow(node, g->tensors[t].type.rank))
                c[t].widened = true;
            if (c[t].first_reader < 0) {
                c[t].first_reader = n;
                c[t].axis = axis;
            } else if (c[t].axis != axis) {
                c[t].other_use = true; /* one scale per channel needs one meaning of channel */
            }
        }
    }
    /* the widened tensor of each narrowed weight, and the node each added node goes before */
    clrun_tensor_id *widened = malloc(sizeof *widened * ((size_t)tensors0 + 1));
    int32_t *anchor = malloc(sizeof *anchor * (3 * (size_t)tensors0 + 1));
    clrun_status s = widened && anchor ? CLRUN_OK
                                       : clrun__graph_fail(g, CLRUN_ERROR_OUT_OF_HOST_MEMORY,
                                                           "narrow weights: out of host memory");
    for (int32_t t = 0; s == CLRUN_OK && t < tensors0; t++) {
        widened[t] = -1;
        const clrun__tensor *x = &g->tensors[t];
        if (c[t].first_reader < 0 || x->kind != CLRUN__TENSOR_CONSTANT || x->type.dtype != CLRUN_F32)
            continue;
        if ((int64_t)clrun_tensor_elements(&x->type) < min_elements)
            continue;
        if (c[t].other_use || x->is_output || c[t].axis < 0) {
            r.kept++;
            continue;
        }
        int32_t added0 = g->node_count;
        bool kept = false;
        s = narrow_one(g, t, to, c[t].axis, !c[t].widened, &r, &kept, &widened[t]);
        if (kept)
            r.kept++;
        for (int32_t a = added0; a < g->node_count; a++)
            anchor[a - nodes0] = c[t].first_reader;
    }
    if (s == CLRUN_OK && g->node_count > nodes0)
        s = clrun__graph_place_added(g, nodes0, anchor);
    if (s == CLRUN_OK) /* the readers (the original nodes, moved) read the widened tensors */
        for (int32_t n = 0; n < g->node_count; n++) {
            clrun__node *node = &g->nodes[n];
            int w = weight_input(node);
            if (w >= 0 && node->inputs[w] < tensors0 && widened[node->inputs[w]] >= 0)
                node->inputs[w] = widened[node->inputs[w]];
        }
    free(c);
    free(widened);
    free(anchor);
    if (report)
        *report = r;
    return s;
}
