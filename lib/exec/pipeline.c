/* The pipeline split's acting part: a context and an executor per stage, the stages run in
 * order, activations moved between them through host memory. The cut is graph/split.c's. */
#include <clrun/pipeline.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clrun/memory.h>

#include "core/error.h"
#include "core/options.h"
#include "core/util.h"
#include "graph/graph.h"
#include "graph/split.h"

typedef struct stage {
    clrun_context *ctx;
    clrun_graph *graph;
    clrun_exec *exec;
    unsigned device;
    uint64_t limit;
    clrun__split_stage split;
    int32_t input_count, output_count;
    int32_t *inputs;   /* per stage input: the tensor id in the whole graph */
    int32_t *outputs;  /* per stage output: the same */
    bool *sent;        /* per stage output: a later stage reads it */
    uint64_t bytes_in, bytes_out;
    double wall_ms;
} stage;

struct clrun_pipeline {
    const clrun_graph *graph;
    int32_t count;
    stage *stages;
    void **host;         /* per tensor of the graph: the host copy of a stage output, or NULL */
    const void **source; /* per tensor: where a run finds it (host copies, the caller's inputs) */
    bool ran;
};

void clrun_pipeline_options_init(clrun_pipeline_options *options)
{
    if (options)
        memset(options, 0, sizeof *options);
}

void clrun_pipeline_destroy(clrun_pipeline *p)
{
    if (p == NULL)
        return;
    for (int32_t k = 0; k < p->count; k++) {
        stage *s = &p->stages[k];
        clrun_exec_destroy(s->exec);
        clrun_graph_destroy(s->graph);
        clrun_context_destroy(s->ctx);
        free(s->inputs);
        free(s->outputs);
        free(s->sent);
    }
    if (p->host)
        for (int32_t t = 0; t < clrun_graph_tensor_count(p->graph); t++)
            free(p->host[t]);
    free(p->host);
    free(p->source);
    free(p->stages);
    free(p);
}

/* The message of a stage's context, prefixed with the stage, as this thread's error. */
static clrun_status stage_fail(const stage *s, int32_t k, clrun_status status, const char *what)
{
    char why[CLRUN__ERROR_MAX];
    snprintf(why, sizeof why, "%s", s->ctx ? clrun_last_error(s->ctx) : clrun_last_error(NULL));
    return clrun__error_set(NULL, status, "pipeline: stage %d (device %u, nodes [%d, %d)): %s: %s",
                            (int)k, s->device, (int)s->split.first, (int)s->split.end, what, why);
}

static clrun_status check_devices(const unsigned *devices, int32_t count)
{
    clrun_device_info *list = NULL;
    size_t n = 0;
    clrun_status st = clrun_device_list(&list, &n);
    if (st != CLRUN_OK)
        return st;
    for (int32_t k = 0; k < count; k++) {
        if (devices[k] < n)
            continue;
        char names[2048];
        size_t len = 0;
        for (size_t i = 0; i < n && len < sizeof names - 300; i++)
            len += (size_t)snprintf(names + len, sizeof names - len, "%s%zu: %s", i ? ", " : "",
                                    i, list[i].name);
        st = clrun__error_set(NULL, CLRUN_ERROR_NO_DEVICE,
                              "pipeline: device %u (of stage %d) does not exist: there %s %zu "
                              "(%s)",
                              devices[k], (int)k, n == 1 ? "is" : "are", n, names);
        break;
    }
    clrun_device_list_free(list);
    return st;
}

/* The stage's inputs and outputs as tensors of the whole graph. */
static clrun_status map_stage(const clrun_graph *graph, stage *s)
{
    const clrun_tensor_id *ids;
    s->input_count = clrun_graph_inputs(s->graph, &ids);
    s->inputs = malloc(((size_t)s->input_count + 1) * sizeof *s->inputs);
    if (s->inputs == NULL)
        return clrun__error_set(NULL, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "pipeline: out of host memory");
    for (int32_t i = 0; i < s->input_count; i++)
        s->inputs[i] = clrun__graph_find_ident(graph, clrun_graph_tensor_ident(s->graph, ids[i]));
    s->output_count = clrun_graph_outputs(s->graph, &ids);
    s->outputs = malloc(((size_t)s->output_count + 1) * sizeof *s->outputs);
    s->sent = calloc((size_t)s->output_count + 1, sizeof *s->sent);
    if (s->outputs == NULL || s->sent == NULL)
        return clrun__error_set(NULL, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "pipeline: out of host memory");
    for (int32_t i = 0; i < s->output_count; i++)
        s->outputs[i] = clrun__graph_find_ident(graph, clrun_graph_tensor_ident(s->graph, ids[i]));
    return CLRUN_OK;
}

clrun_status clrun_pipeline_create(const clrun_graph *graph, const unsigned *devices,
                                   const uint64_t *limits, int32_t device_count,
                                   const clrun_pipeline_options *options, clrun_pipeline **out)
{
    if (out)
        *out = NULL;
    if (graph == NULL || out == NULL || (device_count > 0 && devices == NULL))
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "pipeline: NULL argument");
    if (device_count < 1)
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                                "pipeline: %d devices: a pipeline needs at least one",
                                (int)device_count);
    clrun_pipeline_options defaults;
    if (options == NULL) {
        clrun_pipeline_options_init(&defaults);
        options = &defaults;
    }
    /* Without a platform selector the indices are the flat list's: check them first (a selector
     * counts among its platform's devices, which the contexts check). */
    clrun__options env;
    char invalid[CLRUN__ERROR_MAX];
    clrun_status st = clrun__options_load(&env, invalid, sizeof invalid);
    if (st != CLRUN_OK)
        return clrun__error_set(NULL, st, "pipeline: %s", invalid);
    const char *platform = options->platform ? options->platform : env.platform;
    st = platform[0] ? CLRUN_OK : check_devices(devices, device_count);
    if (st != CLRUN_OK)
        return st;
    clrun_pipeline *p = calloc(1, sizeof *p);
    int32_t tensors = clrun_graph_tensor_count(graph);
    uint64_t *budgets = calloc((size_t)device_count, sizeof *budgets);
    if (p == NULL || budgets == NULL ||
        (p->stages = calloc((size_t)device_count, sizeof *p->stages)) == NULL ||
        (p->host = calloc((size_t)tensors + 1, sizeof *p->host)) == NULL ||
        (p->source = calloc((size_t)tensors + 1, sizeof *p->source)) == NULL) {
        free(budgets);
        if (p) {
            free(p->stages);
            free(p->host);
            free(p);
        }
        return clrun__error_set(NULL, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "pipeline: out of host memory");
    }
    p->graph = graph;
    p->count = device_count;
    /* A context per device, its limit the split's budget. */
    for (int32_t k = 0; st == CLRUN_OK && k < device_count; k++) {
        stage *s = &p->stages[k];
        s->device = devices[k];
        char index[32];
        snprintf(index, sizeof index, "%u", devices[k]);
        clrun_context_options co;
        clrun_context_options_init(&co);
        co.platform = options->platform;
        co.allocator = options->allocator;
        co.device = index;
        co.pool_limit = limits ? limits[k] : 0;
        st = clrun_context_create(&co, &s->ctx);
        if (st != CLRUN_OK) {
            char why[CLRUN__ERROR_MAX];
            snprintf(why, sizeof why, "%s", clrun_last_error(NULL));
            st = clrun__error_set(NULL, st, "pipeline: the context of device %u (stage %d): %s",
                                  devices[k], (int)k, why);
            break;
        }
        clrun_memory_stats m;
        st = clrun_memory_stats_get(s->ctx, &m);
        if (st != CLRUN_OK) {
            st = stage_fail(s, k, st, "memory statistics");
            break;
        }
        s->limit = budgets[k] = m.limit;
    }
    clrun__split split = {0};
    if (st == CLRUN_OK)
        st = clrun__split_find(graph, NULL, budgets, device_count, &split, NULL, 0);
    free(budgets);
    for (int32_t k = 0; st == CLRUN_OK && k < device_count; k++) {
        stage *s = &p->stages[k];
        s->split = split.stage[k];
        char name[CLRUN__GRAPH_NAME_MAX + 1];
        snprintf(name, sizeof name, "stage%d", (int)k);
        st = clrun__split_stage_graph(graph, NULL, s->split.first, s->split.end, name, &s->graph,
                                      NULL, 0);
        if (st == CLRUN_OK)
            st = map_stage(graph, s);
        if (st == CLRUN_OK) {
            st = clrun_exec_create(s->ctx, s->graph, options->exec, &s->exec);
            if (st != CLRUN_OK) {
                char a[CLRUN__BYTES_TEXT], b[CLRUN__BYTES_TEXT], what[128];
                snprintf(what, sizeof what, "its executor (estimated %s, limit %s)",
                         clrun__format_bytes(s->split.estimate, a, sizeof a),
                         s->limit ? clrun__format_bytes(s->limit, b, sizeof b) : "none");
                st = stage_fail(s, k, st, what);
            }
        }
    }
    clrun__split_free(&split);
    /* Host copies of every stage output; which of them a later stage reads. */
    for (int32_t k = 0; st == CLRUN_OK && k < device_count; k++) {
        stage *s = &p->stages[k];
        for (int32_t i = 0; st == CLRUN_OK && i < s->output_count; i++) {
            int32_t t = s->outputs[i];
            uint64_t bytes = clrun_tensor_bytes(clrun_graph_tensor_type(graph, t));
            if (p->host[t] == NULL && (p->host[t] = malloc(bytes ? (size_t)bytes : 1)) == NULL)
                st = clrun__error_set(NULL, CLRUN_ERROR_OUT_OF_HOST_MEMORY,
                                      "pipeline: out of host memory for '%s'",
                                      clrun_graph_tensor_name(graph, t));
            for (int32_t j = k + 1; j < device_count; j++)
                for (int32_t x = 0; x < p->stages[j].input_count; x++)
                    s->sent[i] = s->sent[i] || p->stages[j].inputs[x] == t;
        }
    }
    if (st != CLRUN_OK) {
        clrun_pipeline_destroy(p);
        return st;
    }
    *out = p;
    return CLRUN_OK;
}

/* Runs stage k: its inputs to the device, the executor, its outputs back. */
static clrun_status run_stage(clrun_pipeline *p, int32_t k)
{
    stage *s = &p->stages[k];
    double start = clrun__now();
    clrun_buffer *buffers = calloc((size_t)s->input_count + 1, sizeof *buffers);
    if (buffers == NULL)
        return clrun__error_set(NULL, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "pipeline: out of host memory");
    clrun_status st = CLRUN_OK;
    int32_t made = 0;
    s->bytes_in = s->bytes_out = 0;
    for (; st == CLRUN_OK && made < s->input_count; made++) {
        int32_t t = s->inputs[made];
        uint64_t bytes = clrun_tensor_bytes(clrun_graph_tensor_type(p->graph, t));
        st = clrun_alloc(s->ctx, bytes, &buffers[made]);
        if (st != CLRUN_OK) {
            st = stage_fail(s, k, st, "its input buffers");
            break;
        }
        st = clrun_buffer_write(s->ctx, &buffers[made], p->source[t]);
        if (st != CLRUN_OK) {
            made++;
            st = stage_fail(s, k, st, "copying its inputs");
            break;
        }
        if (p->graph->tensors[t].kind == CLRUN__TENSOR_INTERMEDIATE)
            s->bytes_in += bytes;
    }
    if (st == CLRUN_OK) {
        st = clrun_exec_run(s->exec, buffers, s->input_count);
        if (st != CLRUN_OK)
            st = stage_fail(s, k, st, "running");
    }
    for (int32_t i = 0; st == CLRUN_OK && i < s->output_count; i++) {
        int32_t t = s->outputs[i];
        uint64_t bytes = clrun_tensor_bytes(clrun_graph_tensor_type(p->graph, t));
        st = clrun_exec_read_output(s->exec, i, p->host[t], bytes);
        if (st != CLRUN_OK) {
            st = stage_fail(s, k, st, "copying its outputs back");
            break;
        }
        p->source[t] = p->host[t];
        if (s->sent[i])
            s->bytes_out += bytes;
    }
    for (int32_t i = 0; i < made; i++)
        clrun_free(s->ctx, &buffers[i]);
    free(buffers);
    s->wall_ms = (clrun__now() - start) * 1e3;
    return st;
}

clrun_status clrun_pipeline_run(clrun_pipeline *p, const void *const *inputs,
                                const uint64_t *bytes, int32_t input_count)
{
    if (p == NULL || (input_count > 0 && (inputs == NULL || bytes == NULL)))
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "pipeline: NULL argument");
    const clrun_tensor_id *ids;
    int32_t want = clrun_graph_inputs(p->graph, &ids);
    if (input_count != want)
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                                "pipeline: %d inputs given, the graph has %d", (int)input_count,
                                (int)want);
    for (int32_t i = 0; i < want; i++) {
        uint64_t need = clrun_tensor_bytes(clrun_graph_tensor_type(p->graph, ids[i]));
        if (inputs[i] == NULL || bytes[i] != need)
            return clrun__error_set(NULL, CLRUN_ERROR_INVALID_SIZE,
                                    "pipeline: input '%s' needs %llu bytes, %llu given%s",
                                    clrun_graph_tensor_name(p->graph, ids[i]),
                                    (unsigned long long)need, (unsigned long long)bytes[i],
                                    inputs[i] ? "" : " (NULL)");
        p->source[ids[i]] = inputs[i];
    }
    p->ran = false;
    for (int32_t k = 0; k < p->count; k++) {
        clrun_status st = run_stage(p, k);
        if (st != CLRUN_OK)
            return st;
    }
    p->ran = true;
    return CLRUN_OK;
}

clrun_status clrun_pipeline_read_output(const clrun_pipeline *p, int32_t i, void *host,
                                        uint64_t bytes)
{
    if (p == NULL || host == NULL)
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "pipeline: NULL argument");
    const clrun_tensor_id *ids;
    int32_t count = clrun_graph_outputs(p->graph, &ids);
    if (!p->ran)
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                                "pipeline: no outputs: the pipeline has not run (or its last run "
                                "failed)");
    if (i < 0 || i >= count)
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                                "pipeline: output %d of %d", (int)i, (int)count);
    uint64_t need = clrun_tensor_bytes(clrun_graph_tensor_type(p->graph, ids[i]));
    if (bytes != need)
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_SIZE,
                                "pipeline: output '%s' has %llu bytes, %llu asked for",
                                clrun_graph_tensor_name(p->graph, ids[i]),
                                (unsigned long long)need, (unsigned long long)bytes);
    memcpy(host, p->host[ids[i]], (size_t)bytes);
    return CLRUN_OK;
}

int32_t clrun_pipeline_stage_count(const clrun_pipeline *p)
{
    return p ? p->count : 0;
}

clrun_status clrun_pipeline_stage_info_get(const clrun_pipeline *p, int32_t k,
                                           clrun_pipeline_stage_info *out)
{
    if (p == NULL || out == NULL || k < 0 || k >= p->count)
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "pipeline: no stage %d",
                                (int)k);
    const stage *s = &p->stages[k];
    clrun_exec_stats es;
    clrun_memory_stats ms;
    clrun_status st = clrun_exec_stats_get(s->exec, &es);
    if (st == CLRUN_OK)
        st = clrun_memory_stats_get(s->ctx, &ms);
    if (st != CLRUN_OK)
        return stage_fail(s, k, st, "its statistics");
    memset(out, 0, sizeof *out);
    out->device = s->device;
    out->device_name = clrun_context_device(s->ctx)->name;
    out->first_node = s->split.first;
    out->end_node = s->split.end;
    out->limit_bytes = s->limit;
    out->estimate_bytes = s->split.estimate;
    out->weights_bytes = es.constant_bytes;
    out->peak_bytes = ms.in_use_peak;
    out->bytes_in = s->bytes_in;
    out->bytes_out = s->bytes_out;
    out->wall_ms = s->wall_ms;
    return CLRUN_OK;
}

clrun_context *clrun_pipeline_context(const clrun_pipeline *p, int32_t k)
{
    return p && k >= 0 && k < p->count ? p->stages[k].ctx : NULL;
}
