/* Validation of a whole graph: every tensor produced as its kind says, no cycle, every node's
 * types what its op infers; and the topological order the executor runs, computed once here. */
#include "graph/graph.h"

#include <stdlib.h>
#include <string.h>

/* Every node's tensor ids exist, and every tensor is produced as its kind says: inputs and
 * constants by nobody, intermediates by exactly the node they name. */
static clrun_status validate_production(clrun_graph *graph, int32_t *producers)
{
    for (int32_t n = 0; n < graph->node_count; n++) {
        const clrun__node *node = &graph->nodes[n];
        const char *op = node->op ? node->op->name : "?";
        if (!node->op)
            return clrun__graph_fail(graph, CLRUN_ERROR_UNKNOWN_KERNEL, "node %d has no op", (int)n);
        for (int i = 0; i < node->input_count; i++)
            if (node->inputs[i] < 0 || node->inputs[i] >= graph->tensor_count)
                return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_GRAPH,
                                  "node %d (%s) reads tensor %d, which does not exist", (int)n, op,
                                  (int)node->inputs[i]);
        for (int o = 0; o < node->output_count; o++) {
            int32_t t = node->outputs[o];
            if (t < 0 || t >= graph->tensor_count)
                return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_GRAPH,
                                  "node %d (%s) writes tensor %d, which does not exist", (int)n,
                                  op, (int)t);
            const clrun__tensor *tensor = &graph->tensors[t];
            if (tensor->kind != CLRUN__TENSOR_INTERMEDIATE)
                return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_GRAPH,
                                  "'%s' is produced by node %d (%s) but is a graph %s",
                                  tensor->name, (int)n, op,
                                  tensor->kind == CLRUN__TENSOR_INPUT ? "input" : "constant");
            if (producers[t] >= 0)
                return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_GRAPH,
                                  "'%s' is produced twice: by node %d (%s) and node %d (%s)",
                                  tensor->name, (int)producers[t],
                                  graph->nodes[producers[t]].op->name, (int)n, op);
            if (tensor->producer != n)
                return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_GRAPH,
                                  "'%s' is written by node %d (%s) but records producer %d",
                                  tensor->name, (int)n, op, (int)tensor->producer);
            producers[t] = n;
        }
    }
    return CLRUN_OK;
}

/* The name of a node that reads tensor t, or NULL. */
static const clrun__node *first_reader(const clrun_graph *graph, int32_t t)
{
    for (int32_t n = 0; n < graph->node_count; n++)
        for (int i = 0; i < graph->nodes[n].input_count; i++)
            if (graph->nodes[n].inputs[i] == t)
                return &graph->nodes[n];
    return NULL;
}

static clrun_status validate_unproduced(clrun_graph *graph, const int32_t *producers)
{
    for (int32_t t = 0; t < graph->tensor_count; t++) {
        const clrun__tensor *tensor = &graph->tensors[t];
        if (tensor->kind != CLRUN__TENSOR_INTERMEDIATE || producers[t] >= 0)
            continue;
        if (tensor->is_output)
            return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_GRAPH, "output '%s' is never produced",
                              tensor->name);
        const clrun__node *reader = first_reader(graph, t);
        if (reader)
            return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_GRAPH,
                              "'%s' is read by a node (%s) but nobody produces it", tensor->name,
                              reader->op->name);
        return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_GRAPH, "'%s' is never produced",
                          tensor->name);
    }
    return CLRUN_OK;
}

/* Who reads each tensor, as compressed rows: readers[first[t] .. first[t + 1]) are the nodes
 * reading tensor t (a node reading t twice appears twice). */
typedef struct reader_rows {
    int32_t *first;   /* tensor_count + 1 offsets */
    int32_t *readers; /* node indices */
} reader_rows;

static bool reader_rows_build(const clrun_graph *graph, reader_rows *rows)
{
    size_t edges = 0;
    for (int32_t n = 0; n < graph->node_count; n++)
        edges += (size_t)graph->nodes[n].input_count;
    rows->first = calloc((size_t)graph->tensor_count + 2, sizeof *rows->first);
    rows->readers = malloc((edges + 1) * sizeof *rows->readers);
    if (!rows->first || !rows->readers)
        return false;
    for (int32_t n = 0; n < graph->node_count; n++)
        for (int i = 0; i < graph->nodes[n].input_count; i++)
            rows->first[graph->nodes[n].inputs[i] + 2]++;
    for (int32_t t = 0; t < graph->tensor_count; t++)
        rows->first[t + 2] += rows->first[t + 1];
    /* first[t + 1] is now the start of t's row; filling advances it to the start of t + 1's. */
    for (int32_t n = 0; n < graph->node_count; n++)
        for (int i = 0; i < graph->nodes[n].input_count; i++)
            rows->readers[rows->first[graph->nodes[n].inputs[i] + 1]++] = n;
    return true;
}

/* Writes "cycle: a -> b -> a" (a is computed from b, b from a) for a cycle among the nodes
 * Kahn's algorithm left waiting. Every waiting node has a waiting producer, so walking back
 * from one must repeat a node; the repeat closes the cycle. */
static void describe_cycle(const clrun_graph *graph, const int32_t *waiting, int32_t *seen_at,
                           char *text, size_t size)
{
    int32_t nodes = graph->node_count, n = 0, steps = 0;
    int32_t *path = malloc(((size_t)nodes + 1) * sizeof *path);
    size_t used = (size_t)snprintf(text, size, "cycle:");
    if (!path)
        return;
    while (n < nodes && waiting[n] <= 0)
        n++;
    for (int32_t m = 0; m < nodes; m++)
        seen_at[m] = -1;
    while (n < nodes && seen_at[n] < 0) {
        seen_at[n] = steps;
        path[steps++] = n;
        const clrun__node *node = &graph->nodes[n];
        int32_t next = nodes;
        for (int i = 0; i < node->input_count && next == nodes; i++) {
            int32_t p = graph->tensors[node->inputs[i]].producer;
            if (p >= 0 && waiting[p] > 0)
                next = p;
        }
        n = next;
    }
    for (int32_t s = n < nodes ? seen_at[n] : steps + 1; s <= steps && used < size; s++) {
        int32_t at = path[s < steps ? s : seen_at[n]];
        used += (size_t)snprintf(text + used, size - used, "%s%s", s > seen_at[n] ? " -> " : " ",
                                 graph->tensors[graph->nodes[at].outputs[0]].name);
    }
    free(path);
}

/* Kahn's algorithm into order[0..nodes): a node is ready when every input it reads has been
 * produced; ready nodes are taken first in, first out, so the work is O(N + E). Nodes never
 * ready lie on a cycle or after one: their count of unproduced inputs stays in waiting[] (>0)
 * and the return value is how many were placed. */
static int32_t kahn(const clrun_graph *graph, const reader_rows *rows, int32_t *waiting,
                    int32_t *order)
{
    int32_t nodes = graph->node_count, head = 0, tail = 0;
    for (int32_t n = 0; n < nodes; n++) {
        waiting[n] = 0;
        for (int i = 0; i < graph->nodes[n].input_count; i++)
            waiting[n] += graph->tensors[graph->nodes[n].inputs[i]].producer >= 0;
        if (waiting[n] == 0)
            order[tail++] = n;
    }
    while (head < tail) {
        const clrun__node *node = &graph->nodes[order[head++]];
        for (int o = 0; o < node->output_count; o++) {
            int32_t t = node->outputs[o];
            for (int32_t r = rows->first[t]; r < rows->first[t + 1]; r++)
                if (--waiting[rows->readers[r]] == 0)
                    order[tail++] = rows->readers[r];
        }
    }
    return tail;
}

/* True when declaration order is topological: every input is produced by an earlier node. */
static bool declared_in_order(const clrun_graph *graph)
{
    for (int32_t n = 0; n < graph->node_count; n++)
        for (int i = 0; i < graph->nodes[n].input_count; i++)
            if (graph->tensors[graph->nodes[n].inputs[i]].producer >= n)
                return false;
    return true;
}

clrun_status clrun__graph_order(const clrun_graph *graph, int32_t *order)
{
    if (declared_in_order(graph)) {
        for (int32_t n = 0; n < graph->node_count; n++)
            order[n] = n;
        return CLRUN_OK;
    }
    reader_rows rows = {NULL, NULL};
    int32_t *waiting = malloc(((size_t)graph->node_count + 1) * sizeof *waiting);
    clrun_status status = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    if (waiting && reader_rows_build(graph, &rows))
        status = kahn(graph, &rows, waiting, order) == graph->node_count ? CLRUN_OK
                                                                         : CLRUN_ERROR_INVALID_GRAPH;
    free(waiting), free(rows.first), free(rows.readers);
    return status;
}

static clrun_status validate_acyclic(clrun_graph *graph)
{
    int32_t nodes = graph->node_count;
    if (declared_in_order(graph))
        return CLRUN_OK;
    reader_rows rows = {NULL, NULL};
    int32_t *waiting = malloc(((size_t)nodes + 1) * sizeof *waiting);
    int32_t *order = malloc(((size_t)nodes + 1) * sizeof *order);
    if (!waiting || !order || !reader_rows_build(graph, &rows)) {
        free(waiting), free(order), free(rows.first), free(rows.readers);
        return clrun__graph_fail(graph, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    clrun_status status = CLRUN_OK;
    if (kahn(graph, &rows, waiting, order) < nodes) {
        char text[sizeof graph->last_error];
        describe_cycle(graph, waiting, order, text, sizeof text);
        status = clrun__graph_fail(graph, CLRUN_ERROR_INVALID_GRAPH, "%s", text);
    }
    free(waiting), free(order), free(rows.first), free(rows.readers);
    return status;
}

/* Each node's stored output types are what its op infers from its inputs now. */
static clrun_status validate_types(clrun_graph *graph)
{
    for (int32_t n = 0; n < graph->node_count; n++) {
        const clrun__node *node = &graph->nodes[n];
        if (node->output_count != node->op->outputs || node->input_count < node->op->min_inputs ||
            node->input_count > node->op->max_inputs)
            return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_GRAPH,
                              "node %d (%s) has %d inputs and %d outputs", (int)n,
                              node->op->name, node->input_count, node->output_count);
        clrun_tensor_type *types = calloc((size_t)node->input_count + 2 * (size_t)node->output_count + 1,
                                          sizeof *types);
        if (!types)
            return clrun__graph_fail(graph, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
        clrun__op_call call;
        clrun__node_call(graph, node, types, &call);
        clrun_tensor_type *inferred = types + node->input_count + node->output_count;
        char reason[sizeof graph->last_error] = "";
        clrun_status status = node->op->infer(&call, inferred, reason, sizeof reason);
        int differs = -1;
        for (int o = 0; status == CLRUN_OK && o < node->output_count && differs < 0; o++)
            if (!clrun__type_equal(&inferred[o], &call.outputs[o]))
                differs = o;
        char want[CLRUN__TYPE_TEXT], have[CLRUN__TYPE_TEXT];
        if (differs >= 0) {
            clrun__type_format(&inferred[differs], want, sizeof want);
            clrun__type_format(&call.outputs[differs], have, sizeof have);
        }
        free(types);
        if (status != CLRUN_OK)
            return clrun__graph_fail(graph, status, "%s", reason[0] ? reason : "refused by the op");
        if (differs >= 0)
            return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_GRAPH, "'%s' is %s but %s gives %s",
                              graph->tensors[node->outputs[differs]].name, have, node->op->name,
                              want);
    }
    return CLRUN_OK;
}

clrun_status clrun_graph_validate(clrun_graph *graph)
{
    if (!graph)
        return clrun__graph_fail(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "graph is NULL");
    if (graph->output_count == 0)
        return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_GRAPH, "graph has no outputs");
    int32_t *producers = malloc(((size_t)graph->tensor_count + 1) * sizeof *producers);
    if (!producers)
        return clrun__graph_fail(graph, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (int32_t t = 0; t < graph->tensor_count; t++)
        producers[t] = -1;
    clrun_status status = validate_production(graph, producers);
    if (status == CLRUN_OK)
        status = validate_unproduced(graph, producers);
    free(producers);
    if (status == CLRUN_OK)
        status = validate_acyclic(graph);
    if (status == CLRUN_OK)
        status = validate_types(graph);
    return status;
}
