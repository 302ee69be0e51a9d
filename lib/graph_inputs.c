/* Graph inputs as a caller sees them after the graph is built: which ones are donated, and the
 * deterministic values the CLI feeds them (so bindings can reproduce a CLI run). */
#include <stdio.h>

#include "context.h"
#include "graph.h"

/* The position of input `id` in the graph's input list, or -1 when it is not an input. */
static int32_t input_position(const clrun_graph *graph, clrun_tensor_id id)
{
    for (int32_t i = 0; graph && i < graph->input_count; i++)
        if (graph->inputs[i] == id)
            return i;
    return -1;
}

bool clrun_graph_input_donated(const clrun_graph *graph, clrun_tensor_id id)
{
    return input_position(graph, id) >= 0 && graph->tensors[id].donated;
}

clrun_status clrun_graph_set_donated(clrun_graph *graph, clrun_tensor_id id, bool donated)
{
    if (graph == NULL)
        return clrun__fail(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "clrun_graph_set_donated: graph is NULL");
    if (input_position(graph, id) < 0) {
        snprintf(graph->last_error, sizeof graph->last_error,
                 "only a graph input can be donated: tensor %d (%s) is not one", (int)id,
                 id >= 0 && id < graph->tensor_count ? graph->tensors[id].name : "no such tensor");
        return clrun__fail(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "%s", graph->last_error);
    }
    graph->tensors[id].donated = donated;
    return CLRUN_OK;
}

clrun_status clrun_graph_example_input(const clrun_graph *graph, int32_t index, uint64_t seed,
                                       void *host, uint64_t bytes)
{
    if (graph == NULL || index < 0 || index >= graph->input_count)
        return clrun__fail(NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                           "clrun_graph_example_input: no input %d (the graph has %d)", (int)index,
                           graph ? (int)graph->input_count : 0);
    clrun__tensor t = graph->tensors[graph->inputs[index]];
    uint64_t size = clrun_tensor_bytes(&t.type);
    if (host == NULL || bytes != size)
        return clrun__fail(NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                           "clrun_graph_example_input: input '%s' has %llu bytes, %llu given%s", t.name,
                           (unsigned long long)size, (unsigned long long)bytes, host ? "" : " (NULL)");
    t.data = NULL;
    t.fill = CLRUN_FILL_UNIFORM;
    t.fill_a = t.type.dtype == CLRUN_I32 ? 0 : -1;
    t.fill_b = t.type.dtype == CLRUN_I32 ? 16 : 1;
    t.seed = seed * 1000003u + (uint64_t)index;
    clrun__constant_values(&t, host);
    return CLRUN_OK;
}
