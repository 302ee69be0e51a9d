/* Rematerialisation as a rewrite of a graph (include/clrun/remat.h): the policy says which
 * tensors of the first part are kept; every second-part read of one that is not is redirected
 * to a copy of its node, added to the graph, whose inputs are kept tensors or such copies in
 * turn. Each dropped tensor is copied once, before the first second-part node that reads it, and
 * that copy serves every later reader. The copies are then moved into place: the node array is
 * permuted so that declaration order, which the schedule follows, runs each copy right before
 * the node it was made for. */
#include <clrun/remat.h>

#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"
#include "graph/offload.h"
#include "grad/remat_drop.h"

typedef struct remat {
    clrun_graph *g;
    int32_t boundary;
    int32_t nodes0, tensors0; /* the graph's counts before any copy */
    bool *keep;               /* per original tensor */
    int32_t *copy_of;         /* per original tensor: its copy, or -1 */
    int32_t *stack;           /* tensors waiting for their copy (each at most once) */
    int32_t *anchor;          /* per added node: the second-part node it runs before */
    int32_t *ins;             /* one node's inputs, rewritten */
    int32_t ins_capacity;
    int32_t current;          /* the second-part node being served */
    clrun_remat_report report;
} remat;

/* Whether a read of t in the second part must go to a copy. */
static bool dropped(const remat *r, int32_t t)
{
    if (t < 0 || t >= r->tensors0 || r->keep[t])
        return false;
    int32_t p = r->g->tensors[t].producer;
    return p >= 0 && p < r->boundary;
}

static bool is_dot(const char *op)
{
    return strcmp(op, "matmul") == 0 || strcmp(op, "gemm") == 0 || strcmp(op, "conv2d") == 0 ||
           strcmp(op, "conv_transpose2d") == 0;
}

/* Whether tensor t, the single output of first-part node p, may be dropped at all (every
 * policy keeps inputs, constants, graph outputs and multi-output nodes' tensors). */
static bool droppable(const remat *r, int32_t t)
{
    const clrun__tensor *tensor = &r->g->tensors[t];
    int32_t p = tensor->producer;
    return p >= 0 && p < r->boundary && !tensor->is_output && r->g->nodes[p].output_count == 1;
}

/* cuts:K: keep[] of the first part's cuts, about every K nodes. A cut is the output of node p
 * when no droppable tensor made before p is read by a first-part node after p: the part after
 * it is computed from it (and what is kept anyway) alone, so a segment that ends at one is
 * repeated from it without reaching into the segment before (a transformer's residual stream
 * between sublayers, a ResNet block's output; never a tensor a skip connection crosses). Each
 * segment ends at the last cut within K nodes of the previous end, or at the first cut after,
 * where the K nodes hold none; the segment holding `last_read` is kept whole, as sqrt_n keeps it.
 * Segments are at most K nodes where cuts allow, so at least as many tensors are kept as
 * every:K keeps. */
static clrun_status choose_cuts(remat *r, int32_t segment, int32_t last_read)
{
    clrun_graph *g = r->g;
    int32_t n = r->boundary;
    int32_t *reach = malloc(sizeof *reach * (size_t)(g->tensor_count + 1));
    if (reach == NULL)
        return clrun__graph_fail(g, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "remat: out of host memory");
    for (int32_t t = 0; t < r->tensors0; t++)
        reach[t] = -1;
    for (int32_t q = 0; q < n; q++) /* the last first-part reader of each tensor */
        for (int i = 0; i < g->nodes[q].input_count; i++)
            reach[g->nodes[q].inputs[i]] = q;
    int32_t end = -1, candidate = -1, crossing = -1; /* crossing: the furthest read so far */
    for (int32_t p = 0; p < n; p++) {
        int32_t t = g->nodes[p].output_count == 1 ? g->nodes[p].outputs[0] : -1;
        bool cut = t >= 0 && droppable(r, t) && crossing <= p;
        for (int o = 0; o < g->nodes[p].output_count; o++) { /* its outputs, read later */
            int32_t u = g->nodes[p].outputs[o];
            if (droppable(r, u) && reach[u] > crossing)
                crossing = reach[u];
        }
        if (!cut)
            continue;
        if (p - end > segment && candidate > end) { /* the last cut within K nodes ends it */
            r->keep[g->nodes[candidate].outputs[0]] = true;
            end = candidate;
        }
        if (p - end >= segment) { /* a cut K nodes on (or the first past them) */
            r->keep[t] = true;
            end = p;
        }
        candidate = p;
    }
    /* the segment holding the last node the second part reads (whose end it may be), from the
     * last end before it */
    int32_t start = -1;
    for (int32_t p = 0; p < n && p < last_read; p++)
        if (g->nodes[p].output_count == 1 && r->keep[g->nodes[p].outputs[0]] &&
            droppable(r, g->nodes[p].outputs[0]))
            start = p;
    for (int32_t p = start + 1; last_read >= 0 && p < n; p++)
        for (int o = 0; o < g->nodes[p].output_count; o++)
            r->keep[g->nodes[p].outputs[o]] = true;
    free(reach);
    return CLRUN_OK;
}

/* keep[] by the policy; false with the graph's error for a policy that is not one. */
static clrun_status choose(remat *r, const char *policy)
{
    clrun_graph *g = r->g;
    bool names = strncmp(policy, "names:", 6) == 0, except = strncmp(policy, "except:", 7) == 0;
    bool dots = strcmp(policy, "dots_saveable") == 0, nothing = strcmp(policy, "nothing_saveable") == 0;
    bool sqrt_n = strcmp(policy, "sqrt_n") == 0, every = strncmp(policy, "every:", 6) == 0;
    bool cuts = strcmp(policy, "cuts") == 0 || strncmp(policy, "cuts:", 5) == 0;
    if (!names && !except && !dots && !nothing && !sqrt_n && !every && !cuts)
        return clrun__graph_fail(g, CLRUN_ERROR_INVALID_ARGUMENT,
                                 "remat: unknown policy '%s' (none, dots_saveable, "
                                 "nothing_saveable, names:T1,T2, except:T1,T2, sqrt_n, every:K, "
                                 "cuts, cuts:K)", policy);
    int32_t segment = (int32_t)ceil(sqrt((double)(r->boundary > 0 ? r->boundary : 1)));
    if (every || (cuts && policy[4] == ':')) {
        const char *count = policy + (every ? 6 : 5);
        char *end;
        long k = strtol(count, &end, 10);
        if (end == count || *end != '\0' || k < 1 || k > INT32_MAX)
            return clrun__graph_fail(g, CLRUN_ERROR_INVALID_ARGUMENT,
                                     "remat: policy '%s': %s takes a count K >= 1", policy,
                                     every ? "every:K" : "cuts:K");
        segment = (int32_t)k;
        sqrt_n = every; /* the same rule, segments of K */
    }
    /* The last segment (the one holding the last node whose tensor the second part reads and
     * the rule could drop) is kept whole, as Chen et al. keep it: the second part starts right
     * after it and would repeat all of it at once, to reach its last tensor (a model's
     * logits), and hold every tensor that chain repeats of the segments before until their
     * own readers, late in the second part. */
    int32_t read_last = -1;
    for (int32_t n = r->boundary; n < r->nodes0; n++)
        for (int i = 0; i < g->nodes[n].input_count; i++) {
            int32_t p = g->tensors[g->nodes[n].inputs[i]].producer;
            if (p > read_last && droppable(r, g->nodes[n].inputs[i]))
                read_last = p;
        }
    int32_t last = read_last >= 0 ? read_last / segment * segment : INT32_MAX;
    for (int32_t t = 0; t < r->tensors0; t++) {
        const clrun__tensor *tensor = &g->tensors[t];
        int32_t p = tensor->producer;
        r->keep[t] = true;
        if (!droppable(r, t))
            continue;
        if (cuts)
            r->keep[t] = false; /* choose_cuts below */
        else if (dots)
            r->keep[t] = is_dot(g->nodes[p].op->name);
        else if (sqrt_n)
            r->keep[t] = (p + 1) % segment == 0 || p >= last;
        else
            r->keep[t] = except; /* nothing_saveable, names: none kept; except: all; the lists below */
    }
    if (cuts)
        return choose_cuts(r, segment, read_last);
    if (!names && !except)
        return CLRUN_OK;
    const char *list = policy + (names ? 6 : 7);
    if (*list == '\0')
        return clrun__graph_fail(g, CLRUN_ERROR_INVALID_ARGUMENT,
                                 "remat: policy '%s' lists no tensor", policy);
    for (const char *at = list; *at;) {
        const char *end = strchr(at, ',');
        size_t length = end ? (size_t)(end - at) : strlen(at);
        char name[CLRUN__GRAPH_NAME_MAX + 1];
        if (length == 0 || length > CLRUN__GRAPH_NAME_MAX)
            return clrun__graph_fail(g, CLRUN_ERROR_INVALID_ARGUMENT,
                                     "remat: policy '%s': an empty or over-long name", policy);
        memcpy(name, at, length);
        name[length] = '\0';
        clrun_tensor_id t = clrun_graph_find(g, name);
        if (t < 0 || t >= r->tensors0)
            return clrun__graph_fail(g, CLRUN_ERROR_INVALID_ARGUMENT,
                                     "remat: policy names '%s', which the graph has no tensor "
                                     "called", name);
        r->keep[t] = names;
        at += length + (end != NULL);
        if (end != NULL && *at == '\0')
            return clrun__graph_fail(g, CLRUN_ERROR_INVALID_ARGUMENT,
                                     "remat: policy '%s': an empty or over-long name", policy);
    }
    return CLRUN_OK;
}

/* The name of t's copy: "NAME.remat", else "NAME.remat2", ... the first one free. */
static void copy_name(const clrun_graph *g, int32_t t, char *out, size_t size)
{
    const char *base = g->tensors[t].name;
    snprintf(out, size, "%.200s.remat", base);
    for (int k = 2; clrun__graph_find_ident(g, out) >= 0; k++)
        snprintf(out, size, "%.200s.remat%d", base, k);
}

size_t clrun_remat_copy_of(const char *name)
{
    const char *dot = name ? strrchr(name, '.') : NULL;
    if (dot == NULL || dot == name || strncmp(dot, ".remat", 6) != 0 ||
        strspn(dot + 6, "0123456789") != strlen(dot + 6))
        return 0;
    return (size_t)(dot - name);
}

/* Adds the copy of t's node, every input of which is kept or already copied. */
static clrun_status add_copy(remat *r, int32_t t)
{
    clrun_graph *g = r->g;
    const clrun__node *node = &g->nodes[g->tensors[t].producer];
    if (node->input_count > r->ins_capacity) {
        int32_t *grown = realloc(r->ins, sizeof *grown * (size_t)node->input_count);
        if (grown == NULL)
            return clrun__graph_fail(g, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "remat: out of host memory");
        r->ins = grown;
        r->ins_capacity = node->input_count;
    }
    for (int i = 0; i < node->input_count; i++) {
        int32_t u = node->inputs[i];
        r->ins[i] = dropped(r, u) ? r->copy_of[u] : u;
    }
    int32_t added = g->node_count - r->nodes0;
    int32_t *anchor = realloc(r->anchor, sizeof *anchor * (size_t)(added + 1));
    if (anchor == NULL)
        return clrun__graph_fail(g, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "remat: out of host memory");
    r->anchor = anchor;
    char name[CLRUN__GRAPH_NAME_MAX + 16];
    copy_name(g, t, name, sizeof name);
    const char *names[1] = {name};
    clrun_tensor_id out = -1;
    /* the node's fields are read before the add, which may move the node array */
    clrun_status s = clrun_graph_add_node(g, node->op->name, r->ins, node->input_count, names, 1,
                                          node->attrs, node->attr_count, &out);
    if (s != CLRUN_OK)
        return s;
    r->anchor[added] = r->current;
    r->copy_of[t] = out;
    uint64_t bytes = clrun_tensor_bytes(&g->tensors[t].type);
    r->report.dropped++;
    r->report.repeated_nodes++;
    r->report.dropped_bytes += bytes;
    r->report.repeated_flops += clrun__offload_node_flops(g, g->tensors[out].producer);
    return CLRUN_OK;
}

/* The copy of dropped tensor t, made (with the copies its node needs) if it is not yet:
 * depth first over the node's dropped inputs, without recursion. */
static clrun_status copy(remat *r, int32_t t)
{
    int32_t depth = 0;
    r->stack[depth++] = t;
    while (depth > 0) {
        int32_t top = r->stack[depth - 1];
        if (r->copy_of[top] >= 0) {
            depth--;
            continue;
        }
        const clrun__node *node = &r->g->nodes[r->g->tensors[top].producer];
        int32_t missing = -1;
        for (int i = 0; i < node->input_count && missing < 0; i++)
            if (dropped(r, node->inputs[i]) && r->copy_of[node->inputs[i]] < 0)
                missing = node->inputs[i];
        if (missing >= 0) {
            r->stack[depth++] = missing; /* a DAG: never already on the stack */
            continue;
        }
        clrun_status s = add_copy(r, top);
        if (s != CLRUN_OK)
            return s;
        depth--;
    }
    return CLRUN_OK;
}

/* Declaration order with each copy moved before the node it was made for. */
/* Every input of every node made before it: the order the first and second parts mean. */
static bool declared_in_order(const clrun_graph *g)
{
    for (int32_t n = 0; n < g->node_count; n++)
        for (int i = 0; i < g->nodes[n].input_count; i++)
            if (g->tensors[g->nodes[n].inputs[i]].producer >= n)
                return false;
    return true;
}

/* keep[]: every tensor but drop[0..count), each of which must be one a policy could drop. */
static clrun_status choose_ids(remat *r, const int32_t *drop, int32_t count)
{
    for (int32_t t = 0; t < r->tensors0; t++)
        r->keep[t] = true;
    for (int32_t i = 0; i < count; i++) {
        int32_t t = drop[i];
        if (t < 0 || t >= r->tensors0 || !droppable(r, t))
            return clrun__graph_fail(r->g, CLRUN_ERROR_INVALID_ARGUMENT,
                                     "remat: tensor %d is not one the first part alone writes "
                                     "(an intermediate of a single-output node before the boundary)",
                                     (int)t);
        r->keep[t] = false;
    }
    return CLRUN_OK;
}

/* The rewrite, by `policy` or (policy NULL) dropping drop[0..count). */
static clrun_status rewrite(clrun_graph *graph, int32_t boundary, const char *policy,
                            const int32_t *drop, int32_t count, clrun_remat_report *report)
{
    if (report)
        memset(report, 0, sizeof *report);
    if (graph == NULL)
        return clrun__graph_fail(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "clrun_graph_remat: NULL graph");
    if (boundary < 0 || boundary > graph->node_count)
        return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT,
                                 "remat: boundary %d is outside the graph's %d nodes",
                                 (int)boundary, (int)graph->node_count);
    if (policy == NULL ? count == 0 : policy[0] == '\0' || strcmp(policy, "none") == 0)
        return CLRUN_OK;
    if (clrun__graph_has_guards(graph))
        return clrun__graph_fail(graph, CLRUN_ERROR_UNSUPPORTED,
                                 "remat: the graph has guarded nodes (an If whose condition is known only at "
                                 "run time), which rematerialisation would copy unguarded");
    if (!declared_in_order(graph))
        return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT,
                                 "remat: the graph's nodes are not declared in an order that "
                                 "runs (a node reads a tensor declared after it)");
    remat r = {.g = graph, .boundary = boundary, .nodes0 = graph->node_count,
               .tensors0 = graph->tensor_count};
    size_t n = (size_t)graph->tensor_count + 1;
    r.keep = malloc(n * sizeof *r.keep);
    r.copy_of = malloc(n * sizeof *r.copy_of);
    r.stack = malloc(n * sizeof *r.stack);
    clrun_status s = CLRUN_OK;
    if (r.keep == NULL || r.copy_of == NULL || r.stack == NULL)
        s = clrun__graph_fail(graph, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "remat: out of host memory");
    if (s == CLRUN_OK)
        s = policy ? choose(&r, policy) : choose_ids(&r, drop, count);
    for (int32_t t = 0; s == CLRUN_OK && t < r.tensors0; t++)
        r.copy_of[t] = -1;
    for (int32_t node = boundary; s == CLRUN_OK && node < r.nodes0; node++) {
        r.current = node;
        for (int i = 0; s == CLRUN_OK && i < graph->nodes[node].input_count; i++) {
            int32_t t = graph->nodes[node].inputs[i];
            if (!dropped(&r, t))
                continue;
            s = copy(&r, t);
            if (s == CLRUN_OK)
                graph->nodes[node].inputs[i] = r.copy_of[t];
        }
    }
    if (s == CLRUN_OK && graph->node_count > r.nodes0)
        s = clrun__graph_place_added(graph, r.nodes0, r.anchor);
    if (s == CLRUN_OK && report)
        *report = r.report;
    free(r.keep);
    free(r.copy_of);
    free(r.stack);
    free(r.anchor);
    free(r.ins);
    return s;
}

clrun_status clrun_graph_remat(clrun_graph *graph, int32_t boundary, const char *policy,
                               clrun_remat_report *report)
{
    return rewrite(graph, boundary, policy ? policy : "", NULL, 0, report);
}

clrun_status clrun__graph_remat_drop(clrun_graph *graph, int32_t boundary, const int32_t *drop,
                                     int32_t count, clrun_remat_report *report)
{
    if (count < 0 || (count > 0 && drop == NULL))
        return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT,
                                 "remat: %d tensors to drop, none given", (int)count);
    return rewrite(graph, boundary, NULL, drop, count, report);
}
