/* Graph inputs as a caller sees them after the graph is built: changing which are donated, and
 * the deterministic values the CLI feeds them (so bindings can reproduce a CLI run). */
#include "graph/graph.h"
#include "graph/types.h"

#include "core/error.h"

/* True when `id` is one of the graph's inputs. */
static bool is_input(const clrun_graph *graph, clrun_tensor_id id)
{
    return id >= 0 && id < graph->tensor_count && graph->tensors[id].kind == CLRUN__TENSOR_INPUT;
}

clrun_status clrun_graph_set_donated(clrun_graph *graph, clrun_tensor_id id, bool donated)
{
    if (graph == NULL)
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "clrun_graph_set_donated: graph is NULL");
    if (!is_input(graph, id))
        return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT,
                                 "only a graph input can be donated: tensor %d (%s) is not one", (int)id,
                                 id >= 0 && id < graph->tensor_count ? graph->tensors[id].name : "no such tensor");
    graph->tensors[id].donated = donated;
    return CLRUN_OK;
}

clrun_status clrun_graph_example_input(const clrun_graph *graph, int32_t index, uint64_t seed,
                                       void *host, uint64_t bytes)
{
    if (graph == NULL || index < 0 || index >= graph->input_count)
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                                "clrun_graph_example_input: no input %d (the graph has %d)", (int)index,
                                graph ? (int)graph->input_count : 0);
    const clrun__tensor *t = &graph->tensors[graph->inputs[index]];
    uint64_t size = clrun_tensor_bytes(&t->type);
    if ((host == NULL && size > 0) || bytes != size)
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                                "clrun_graph_example_input: input '%s' has %llu bytes, %llu given%s", t->name,
                                (unsigned long long)size, (unsigned long long)bytes, host ? "" : " (NULL)");
    if (clrun_tensor_empty(&t->type))
        return CLRUN_OK; /* an empty input: no values (host may be NULL) */
    clrun_dtype dtype = t->type.dtype;
    bool integral = clrun__dtype_is_int(dtype); /* every width: [0, 16) fits each */
    double low = integral || dtype == CLRUN_BOOL ? 0 : -1;
    double high = integral ? 16 : dtype == CLRUN_BOOL ? 2 : 1;
    return clrun_fill_values(&t->type, CLRUN_FILL_UNIFORM, low, high, seed * 1000003u + (uint64_t)index, host,
                             bytes);
}
