/* Host offload as a rewrite of a graph (graph/offload.h). */
#include "graph/offload.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool clrun__offload_prefers(uint64_t flops, uint64_t bytes, double rate)
{
    return 2.0 * (double)bytes * rate < (double)flops;
}

double clrun__offload_rate_of(double flops, double compute_s, double bytes, double copy_s)
{
    if (!(flops > 0) || !(compute_s > 0) || !(bytes > 0) || !(copy_s > 0))
        return 0;
    double rate = (flops / compute_s) / (bytes / copy_s);
    return isfinite(rate) && rate > 0 ? rate : 0;
}

uint64_t clrun__offload_node_flops(const clrun_graph *g, int32_t n)
{
    const clrun__node *node = &g->nodes[n];
    if (node->output_count < 1)
        return 0;
    uint64_t elements = clrun_tensor_elements(&g->tensors[node->outputs[0]].type);
    const char *op = node->op->name;
    if ((strcmp(op, "matmul") == 0 || strcmp(op, "gemm") == 0) && node->input_count >= 2) {
        const clrun_tensor_type *a = &g->tensors[node->inputs[0]].type;
        bool transposed = false;
        for (int k = 0; k < node->attr_count; k++)
            if (strcmp(node->attrs[k].name, "transpose_a") == 0 || strcmp(node->attrs[k].name, "trans_a") == 0)
                transposed = node->attrs[k].i != 0;
        int64_t reduced = a->rank >= 2 ? a->shape[a->rank - (transposed ? 2 : 1)] : (a->rank ? a->shape[0] : 1);
        return 2 * elements * (uint64_t)(reduced > 0 ? reduced : 1);
    }
    if (strcmp(op, "conv2d") == 0 && node->input_count >= 2) {
        const clrun_tensor_type *w = &g->tensors[node->inputs[1]].type;
        uint64_t taps = w->rank >= 1 && w->shape[0] > 0 ? clrun_tensor_elements(w) / (uint64_t)w->shape[0] : 1;
        return 2 * elements * taps;
    }
    return elements;
}

/* "NAME.suffix", else "NAME.suffix2", ... the first one free. */
static void copy_name(const clrun_graph *g, int32_t t, const char *suffix, char *out, size_t size)
{
    const char *base = g->tensors[t].name;
    snprintf(out, size, "%.200s.%s", base, suffix);
    for (int k = 2; clrun__graph_find_ident(g, out) >= 0; k++)
        snprintf(out, size, "%.200s.%s%d", base, suffix, k);
}

size_t clrun__offload_copy_of(const char *name)
{
    const char *dot = name ? strrchr(name, '.') : NULL;
    if (dot == NULL || dot == name)
        return 0;
    size_t skip = strncmp(dot, ".host", 5) == 0 ? 5 : strncmp(dot, ".reload", 7) == 0 ? 7 : 0;
    if (skip == 0 || strspn(dot + skip, "0123456789") != strlen(dot + skip))
        return 0;
    return (size_t)(dot - name);
}

/* The first node at or after `from` (of the first `nodes`) that reads t, or -1. */
static int32_t first_reader(const clrun_graph *g, int32_t t, int32_t from, int32_t nodes)
{
    for (int32_t k = from; k < nodes; k++)
        for (int i = 0; i < g->nodes[k].input_count; i++)
            if (g->nodes[k].inputs[i] == t)
                return k;
    return -1;
}

clrun_status clrun__graph_offload(clrun_graph *g, int32_t boundary, const int32_t *tensors,
                                  int32_t count, clrun_tensor_id *hosts,
                                  clrun__offload_report *report)
{
    return clrun__graph_offload_lead(g, boundary, tensors, count, 0, hosts, report);
}

clrun_status clrun__graph_offload_lead(clrun_graph *g, int32_t boundary, const int32_t *tensors,
                                       int32_t count, int32_t lead, clrun_tensor_id *hosts,
                                       clrun__offload_report *report)
{
    if (report)
        memset(report, 0, sizeof *report);
    if (g == NULL || (count > 0 && tensors == NULL))
        return clrun__graph_fail(g, CLRUN_ERROR_INVALID_ARGUMENT, "offload: NULL argument");
    if (boundary < 0 || boundary > g->node_count)
        return clrun__graph_fail(g, CLRUN_ERROR_INVALID_ARGUMENT,
                                 "offload: boundary %d is outside the graph's %d nodes",
                                 (int)boundary, (int)g->node_count);
    int32_t nodes0 = g->node_count;
    for (int32_t i = 0; i < count; i++) { /* every tensor checked before anything changes */
        int32_t t = tensors[i];
        if (t < 0 || t >= g->tensor_count)
            return clrun__graph_fail(g, CLRUN_ERROR_INVALID_ARGUMENT, "offload: no tensor %d", (int)t);
        const clrun__tensor *x = &g->tensors[t];
        if (x->kind != CLRUN__TENSOR_INTERMEDIATE || x->is_output || x->producer < 0 ||
            x->producer >= boundary || first_reader(g, t, boundary, nodes0) < 0)
            return clrun__graph_fail(g, CLRUN_ERROR_INVALID_ARGUMENT,
                                     "offload: '%s' is not a tensor written before node %d and "
                                     "read after it (nor an input, a constant or an output)",
                                     x->name, (int)boundary);
        for (int32_t j = 0; j < i; j++)
            if (tensors[j] == t)
                return clrun__graph_fail(g, CLRUN_ERROR_INVALID_ARGUMENT,
                                         "offload: '%s' is named twice", x->name);
    }
    int32_t *anchor = malloc(sizeof *anchor * (size_t)(2 * count + 1));
    if (anchor == NULL)
        return clrun__graph_fail(g, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "offload: out of host memory");
    clrun_status s = CLRUN_OK;
    int32_t added = 0;
    clrun_tensor_id *host = malloc(sizeof *host * (size_t)(count + 1));
    if (host == NULL)
        s = clrun__graph_fail(g, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "offload: out of host memory");
    char name[CLRUN__GRAPH_NAME_MAX + 16];
    const char *names[1] = {name};
    /* the offloads first, then the reloads: where both go before the boundary's node, every
     * offload precedes every reload, so the boundary's node moves by `count` exactly */
    for (int32_t i = 0; s == CLRUN_OK && i < count; i++) {
        int32_t t = tensors[i];
        copy_name(g, t, "host", name, sizeof name);
        s = clrun_graph_add_node(g, "offload", &t, 1, names, 1, NULL, 0, &host[i]);
        if (s == CLRUN_OK)
            anchor[added++] = g->tensors[t].producer + 1; /* right after its writer */
    }
    for (int32_t i = 0; s == CLRUN_OK && i < count; i++) {
        int32_t t = tensors[i];
        int32_t reader = first_reader(g, t, boundary, nodes0);
        clrun_tensor_id back = -1;
        copy_name(g, t, "reload", name, sizeof name);
        s = clrun_graph_add_node(g, "reload", &host[i], 1, names, 1, NULL, 0, &back);
        if (s != CLRUN_OK)
            break;
        /* right before its first reader after the boundary, or `lead` nodes before it but
         * after the boundary's node (a reader at the boundary: right before it) */
        int32_t early = reader - (lead > 0 ? lead : 0);
        anchor[added++] = reader <= boundary ? reader : early > boundary ? early : boundary + 1;
        for (int32_t k = boundary; k < nodes0; k++)
            for (int j = 0; j < g->nodes[k].input_count; j++)
                if (g->nodes[k].inputs[j] == t)
                    g->nodes[k].inputs[j] = back;
        if (report) {
            report->offloaded++;
            report->bytes += clrun_tensor_bytes(&g->tensors[t].type);
            report->added_before++;
        }
    }
    for (int32_t i = 0; s == CLRUN_OK && hosts && i < count; i++)
        hosts[i] = host[i];
    free(host);
    if (s == CLRUN_OK && added > 0)
        s = clrun__graph_place_added(g, nodes0, anchor);
    free(anchor);
    return s;
}

int32_t clrun__offload_crossing(const clrun_graph *g, int32_t boundary, int32_t *out)
{
    int32_t n = 0;
    for (int32_t t = 0; t < g->tensor_count; t++) {
        const clrun__tensor *x = &g->tensors[t];
        if (x->kind == CLRUN__TENSOR_INTERMEDIATE && !x->is_output && x->producer >= 0 &&
            x->producer < boundary && first_reader(g, t, boundary, g->node_count) >= 0)
            out[n++] = t;
    }
    return n;
}
