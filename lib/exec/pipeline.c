/* The pipeline split's acting part: a context and an executor per stage, the stages run in
 * order, activations moved between them through host memory; micro-batches streamed through
 * the stages on a host thread per stage, handed on through a ring of host slots. The cut is
 * graph/split.c's. */
#include <clrun/pipeline.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clrun/memory.h>

#include "core/error.h"
#include "core/options.h"
#include "core/util.h"
#include "device/context.h"
#include "graph/graph.h"
#include "graph/split.h"
#include "exec/pipeline_internal.h"

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
    uint64_t bytes_in, bytes_out; /* per micro-batch */
    double wall_ms;               /* busy, summed over the micro-batches */
} stage;

struct clrun_pipeline {
    const clrun_graph *graph;
    int32_t count;
    int32_t tensors;
    stage *stages;
    /* Hand-off slots: micro-batch i's stage outputs wait in slot i % slots. host[r * tensors + t]
     * is slot r's copy of tensor t: slot 0 holds every stage output (the outputs of
     * clrun_pipeline_run), the others only those a later stage reads. */
    int32_t slots;
    void **host;
    uint64_t handoff_bytes;  /* one slot's crossing activations */
    int32_t *input_index;    /* per tensor: its index among the graph inputs, or -1 */
    int32_t *output_index;   /* per tensor: its index among the graph outputs, or -1 */
    bool ran;
    clrun_pipeline_run_info last;
    /* The run in progress: the caller's arrays, and under `lock` each stage's finished count. */
    int32_t micro_batches;
    const void *const *in;
    void *const *out;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int32_t *done;
    bool failed;
    clrun_status status;
    char why[CLRUN__ERROR_MAX];
    int32_t fail_stage, fail_batch; /* clrun__pipeline_fail_at */
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
    for (int32_t k = 0; p->stages && k < p->count; k++) {
        stage *s = &p->stages[k];
        clrun_exec_destroy(s->exec);
        clrun_graph_destroy(s->graph);
        clrun_context_destroy(s->ctx);
        free(s->inputs);
        free(s->outputs);
        free(s->sent);
    }
    if (p->host)
        for (int64_t t = 0; t < (int64_t)p->slots * p->tensors; t++)
            free(p->host[t]);
    free(p->host);
    free(p->input_index);
    free(p->output_index);
    free(p->done);
    free(p->stages);
    pthread_cond_destroy(&p->changed);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

/* The message of a stage's context, prefixed with the stage (and the micro-batch, where a run
 * has several), as this thread's error. */
static clrun_status stage_fail_at(const stage *s, int32_t k, int32_t batch, int32_t batches,
                                  clrun_status status, const char *what)
{
    char why[CLRUN__ERROR_MAX], at[64] = "";
    snprintf(why, sizeof why, "%s", s->ctx ? clrun_last_error(s->ctx) : clrun_last_error(NULL));
    if (batches > 1)
        snprintf(at, sizeof at, ", micro-batch %d of %d", (int)batch, (int)batches);
    return clrun__error_set(NULL, status,
                            "pipeline: stage %d (device %u, nodes [%d, %d))%s: %s: %s", (int)k,
                            s->device, (int)s->split.first, (int)s->split.end, at, what, why);
}

static clrun_status stage_fail(const stage *s, int32_t k, clrun_status status, const char *what)
{
    return stage_fail_at(s, k, 0, 1, status, what);
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
    if (p == NULL || budgets == NULL) {
        free(budgets);
        free(p);
        return clrun__error_set(NULL, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "pipeline: out of host memory");
    }
    if (pthread_mutex_init(&p->lock, NULL) != 0) {
        free(budgets);
        free(p);
        return clrun__error_set(NULL, CLRUN_ERROR_OUT_OF_HOST_MEMORY,
                                "pipeline: cannot make a mutex");
    }
    if (pthread_cond_init(&p->changed, NULL) != 0) {
        pthread_mutex_destroy(&p->lock);
        free(budgets);
        free(p);
        return clrun__error_set(NULL, CLRUN_ERROR_OUT_OF_HOST_MEMORY,
                                "pipeline: cannot make a condition variable");
    }
    p->graph = graph;
    p->count = device_count;
    p->tensors = tensors;
    p->slots = device_count;
    p->fail_stage = p->fail_batch = -1;
    if ((p->stages = calloc((size_t)device_count, sizeof *p->stages)) == NULL ||
        (p->host = calloc((size_t)p->slots * (size_t)tensors + 1, sizeof *p->host)) == NULL ||
        (p->input_index = malloc(((size_t)tensors + 1) * sizeof *p->input_index)) == NULL ||
        (p->output_index = malloc(((size_t)tensors + 1) * sizeof *p->output_index)) == NULL ||
        (p->done = calloc((size_t)device_count, sizeof *p->done)) == NULL) {
        free(budgets);
        clrun_pipeline_destroy(p);
        return clrun__error_set(NULL, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "pipeline: out of host memory");
    }
    const clrun_tensor_id *ids;
    for (int32_t t = 0; t < tensors; t++)
        p->input_index[t] = p->output_index[t] = -1;
    for (int32_t i = 0, n = clrun_graph_inputs(graph, &ids); i < n; i++)
        p->input_index[ids[i]] = i;
    for (int32_t i = 0, n = clrun_graph_outputs(graph, &ids); i < n; i++)
        p->output_index[ids[i]] = i;
    /* A context per device, its limit the split's budget. */
    for (int32_t k = 0; st == CLRUN_OK && k < device_count; k++) {
        stage *s = &p->stages[k];
        s->device = devices[k];
        char part[32];
        snprintf(part, sizeof part, "stage %d", (int)k);
        st = clrun__context_create_on(devices[k], options->platform, options->allocator,
                                      limits ? limits[k] : 0, "pipeline", part, &s->ctx);
        if (st != CLRUN_OK)
            break;
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
    /* Which stage outputs a later stage reads; host copies of every stage output in slot 0, of
     * those read later in every slot. */
    for (int32_t k = 0; st == CLRUN_OK && k < device_count; k++) {
        stage *s = &p->stages[k];
        for (int32_t i = 0; st == CLRUN_OK && i < s->output_count; i++) {
            int32_t t = s->outputs[i];
            uint64_t bytes = clrun_tensor_bytes(clrun_graph_tensor_type(graph, t));
            for (int32_t j = k + 1; j < device_count; j++)
                for (int32_t x = 0; x < p->stages[j].input_count; x++)
                    s->sent[i] = s->sent[i] || p->stages[j].inputs[x] == t;
            if (s->sent[i])
                p->handoff_bytes += bytes;
            for (int32_t r = 0; r < (s->sent[i] ? p->slots : 1); r++) {
                void **h = &p->host[(size_t)r * (size_t)tensors + (size_t)t];
                if (*h == NULL && (*h = malloc(bytes ? (size_t)bytes : 1)) == NULL) {
                    st = clrun__error_set(NULL, CLRUN_ERROR_OUT_OF_HOST_MEMORY,
                                          "pipeline: out of host memory for '%s'",
                                          clrun_graph_tensor_name(graph, t));
                    break;
                }
            }
        }
    }
    if (st != CLRUN_OK) {
        clrun_pipeline_destroy(p);
        return st;
    }
    *out = p;
    return CLRUN_OK;
}

/* Where micro-batch `batch` finds tensor t, a stage input: the caller's block of a graph input,
 * else the hand-off slot a stage before wrote it to. */
static const void *source_of(const clrun_pipeline *p, int32_t t, int32_t batch)
{
    int32_t i = p->input_index[t];
    if (i >= 0) {
        uint64_t bytes = clrun_tensor_bytes(clrun_graph_tensor_type(p->graph, t));
        return (const char *)p->in[i] + (size_t)batch * (size_t)bytes;
    }
    return p->host[(size_t)(batch % p->slots) * (size_t)p->tensors + (size_t)t];
}

/* Runs stage k on micro-batch `batch`: its inputs to the device, the executor, its outputs back
 * (those later stages read to the batch's slot, the graph's to the caller's block, or to slot 0
 * for clrun_pipeline_run). Adds its wall time to the stage's busy time. */
static clrun_status run_stage(clrun_pipeline *p, int32_t k, int32_t batch)
{
    stage *s = &p->stages[k];
    double start = clrun__now();
    int32_t batches = p->micro_batches;
    clrun_buffer *buffers = calloc((size_t)s->input_count + 1, sizeof *buffers);
    if (buffers == NULL)
        return clrun__error_set(NULL, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "pipeline: out of host memory");
    clrun_status st = CLRUN_OK;
    int32_t made = 0;
    uint64_t bytes_in = 0, bytes_out = 0;
    if (k == p->fail_stage && batch == p->fail_batch) {
        char at[64] = "";
        if (batches > 1)
            snprintf(at, sizeof at, ", micro-batch %d of %d", (int)batch, (int)batches);
        st = clrun__error_set(NULL, CLRUN_ERROR_OPENCL,
                              "pipeline: stage %d (device %u, nodes [%d, %d))%s: injected failure",
                              (int)k, s->device, (int)s->split.first, (int)s->split.end, at);
    }
    for (; st == CLRUN_OK && made < s->input_count; made++) {
        int32_t t = s->inputs[made];
        uint64_t bytes = clrun_tensor_bytes(clrun_graph_tensor_type(p->graph, t));
        st = clrun_alloc(s->ctx, bytes, &buffers[made]);
        if (st != CLRUN_OK) {
            st = stage_fail_at(s, k, batch, batches, st, "its input buffers");
            break;
        }
        st = clrun_buffer_write(s->ctx, &buffers[made], source_of(p, t, batch));
        if (st != CLRUN_OK) {
            made++;
            st = stage_fail_at(s, k, batch, batches, st, "copying its inputs");
            break;
        }
        if (p->graph->tensors[t].kind == CLRUN__TENSOR_INTERMEDIATE)
            bytes_in += bytes;
    }
    if (st == CLRUN_OK) {
        st = clrun_exec_run(s->exec, buffers, s->input_count);
        if (st != CLRUN_OK)
            st = stage_fail_at(s, k, batch, batches, st, "running");
    }
    for (int32_t i = 0; st == CLRUN_OK && i < s->output_count; i++) {
        int32_t t = s->outputs[i];
        uint64_t bytes = clrun_tensor_bytes(clrun_graph_tensor_type(p->graph, t));
        int32_t o = p->output_index[t];
        void *mine = p->out && o >= 0 ? (char *)p->out[o] + (size_t)batch * (size_t)bytes : NULL;
        void *slot = p->host[(size_t)(batch % p->slots) * (size_t)p->tensors + (size_t)t];
        st = clrun_exec_read_output(s->exec, i, s->sent[i] || mine == NULL ? slot : mine, bytes);
        if (st != CLRUN_OK) {
            st = stage_fail_at(s, k, batch, batches, st, "copying its outputs back");
            break;
        }
        if (s->sent[i] && mine)
            memcpy(mine, slot, (size_t)bytes);
        if (s->sent[i])
            bytes_out += bytes;
    }
    for (int32_t i = 0; i < made; i++)
        clrun_free(s->ctx, &buffers[i]);
    free(buffers);
    s->bytes_in = bytes_in;
    s->bytes_out = bytes_out;
    s->wall_ms += (clrun__now() - start) * 1e3;
    return st;
}

/* Whether stage k may start micro-batch i (under the lock): the stage before it has handed i on,
 * and for the first stage, i's slot is free (the last stage has finished i - slots, and so have
 * all the others, each having waited for the one before it). */
static bool ready(const clrun_pipeline *p, int32_t k, int32_t i)
{
    if (k > 0)
        return p->done[k - 1] > i;
    return i < p->slots || p->done[p->count - 1] > i - p->slots;
}

typedef struct worker {
    clrun_pipeline *p;
    int32_t k;
} worker;

/* One stage's thread: every micro-batch in turn, each once it is ready; stops at the first
 * failure anywhere, recording its own (the first) with its message. */
static void *stage_thread(void *arg)
{
    const worker *w = arg;
    clrun_pipeline *p = w->p;
    for (int32_t i = 0; i < p->micro_batches; i++) {
        pthread_mutex_lock(&p->lock);
        while (!p->failed && !ready(p, w->k, i))
            pthread_cond_wait(&p->changed, &p->lock);
        bool stop = p->failed;
        pthread_mutex_unlock(&p->lock);
        if (stop)
            break;
        clrun_status st = run_stage(p, w->k, i);
        pthread_mutex_lock(&p->lock);
        if (st != CLRUN_OK && !p->failed) {
            p->failed = true;
            p->status = st;
            snprintf(p->why, sizeof p->why, "%s", clrun_last_error(NULL));
        }
        if (st == CLRUN_OK)
            p->done[w->k] = i + 1;
        pthread_cond_broadcast(&p->changed);
        pthread_mutex_unlock(&p->lock);
        if (st != CLRUN_OK)
            break;
    }
    return NULL;
}

/* Streams p->micro_batches through the stages (inputs and outputs set by the caller): on a
 * thread per stage where there are several stages and micro-batches, else in order here.
 * Fills p->last. */
static clrun_status stream(clrun_pipeline *p)
{
    for (int32_t k = 0; k < p->count; k++) {
        p->stages[k].wall_ms = 0;
        p->stages[k].bytes_in = p->stages[k].bytes_out = 0;
        p->done[k] = 0;
    }
    p->failed = false;
    p->status = CLRUN_OK;
    p->why[0] = '\0';
    memset(&p->last, 0, sizeof p->last);
    p->last.micro_batches = p->micro_batches;
    p->last.slots = p->slots;
    p->last.handoff_bytes = (uint64_t)p->slots * p->handoff_bytes;
    clrun_status st = CLRUN_OK;
    double start = clrun__now();
    if (p->count == 1 || p->micro_batches == 1) {
        for (int32_t i = 0; st == CLRUN_OK && i < p->micro_batches; i++)
            for (int32_t k = 0; st == CLRUN_OK && k < p->count; k++)
                st = run_stage(p, k, i);
    } else {
        pthread_t *threads = calloc((size_t)p->count, sizeof *threads);
        worker *workers = calloc((size_t)p->count, sizeof *workers);
        int32_t started = 0;
        if (threads == NULL || workers == NULL) {
            free(threads);
            free(workers);
            return clrun__error_set(NULL, CLRUN_ERROR_OUT_OF_HOST_MEMORY,
                                    "pipeline: out of host memory");
        }
        for (; started < p->count; started++) {
            workers[started].p = p;
            workers[started].k = started;
            if (pthread_create(&threads[started], NULL, stage_thread, &workers[started]) != 0) {
                pthread_mutex_lock(&p->lock);
                if (!p->failed) {
                    p->failed = true;
                    p->status = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
                    snprintf(p->why, sizeof p->why,
                             "pipeline: cannot start the thread of stage %d", (int)started);
                }
                pthread_cond_broadcast(&p->changed);
                pthread_mutex_unlock(&p->lock);
                break;
            }
        }
        for (int32_t k = 0; k < started; k++)
            pthread_join(threads[k], NULL);
        free(threads);
        free(workers);
        p->last.threads = started;
        if (p->failed)
            st = clrun__error_set(NULL, p->status, "%s", p->why);
    }
    p->last.wall_ms = (clrun__now() - start) * 1e3;
    for (int32_t k = 0; k < p->count; k++) {
        p->last.busy_ms += p->stages[k].wall_ms;
        p->last.bytes_moved += p->stages[k].bytes_out;
    }
    if (p->last.wall_ms > 0) {
        double bubble = 1 - p->last.busy_ms / ((double)p->count * p->last.wall_ms);
        p->last.bubble_fraction = bubble < 0 ? 0 : bubble;
    }
    return st;
}

/* The inputs (or outputs) of a run: count as the graph's, every pointer given, each of
 * `batches` x the tensor's bytes. */
static clrun_status check_io(const clrun_pipeline *p, bool outputs, int32_t batches,
                             const void *const *data, const uint64_t *bytes, int32_t count)
{
    const char *what = outputs ? "output" : "input";
    const clrun_tensor_id *ids;
    int32_t want = outputs ? clrun_graph_outputs(p->graph, &ids) : clrun_graph_inputs(p->graph, &ids);
    if (count != want)
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                                "pipeline: %d %ss given, the graph has %d", (int)count, what,
                                (int)want);
    if (want > 0 && (data == NULL || bytes == NULL))
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                                "pipeline: NULL %ss (or their sizes)", what);
    for (int32_t i = 0; i < want; i++) {
        const char *name = clrun_graph_tensor_name(p->graph, ids[i]);
        uint64_t one = clrun_tensor_bytes(clrun_graph_tensor_type(p->graph, ids[i]));
        if (one != 0 && (uint64_t)batches > UINT64_MAX / one)
            return clrun__error_set(NULL, CLRUN_ERROR_INVALID_SIZE,
                                    "pipeline: %d micro-batches of %s '%s' (%llu bytes each) exceed "
                                    "2^64 bytes", (int)batches, what, name, (unsigned long long)one);
        if (data[i] == NULL)
            return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "pipeline: %s '%s' is NULL",
                                    what, name);
        if (bytes[i] == one * (uint64_t)batches)
            continue;
        if (batches == 1)
            return clrun__error_set(NULL, CLRUN_ERROR_INVALID_SIZE,
                                    "pipeline: %s '%s' needs %llu bytes, %llu given", what, name,
                                    (unsigned long long)one, (unsigned long long)bytes[i]);
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_SIZE,
                                "pipeline: %s '%s' needs %d x %llu = %llu bytes, %llu given",
                                what, name, (int)batches, (unsigned long long)one,
                                (unsigned long long)(one * (uint64_t)batches),
                                (unsigned long long)bytes[i]);
    }
    return CLRUN_OK;
}

clrun_status clrun_pipeline_run(clrun_pipeline *p, const void *const *inputs,
                                const uint64_t *bytes, int32_t input_count)
{
    if (p == NULL || (input_count > 0 && (inputs == NULL || bytes == NULL)))
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "pipeline: NULL argument");
    clrun_status st = check_io(p, false, 1, inputs, bytes, input_count);
    if (st != CLRUN_OK)
        return st;
    p->ran = false;
    p->micro_batches = 1;
    p->in = inputs;
    p->out = NULL;
    st = stream(p);
    p->in = NULL;
    p->ran = st == CLRUN_OK;
    return st;
}

clrun_status clrun_pipeline_run_many(clrun_pipeline *p, int32_t micro_batches,
                                     const void *const *inputs, const uint64_t *input_bytes,
                                     int32_t input_count, void *const *outputs,
                                     const uint64_t *output_bytes, int32_t output_count)
{
    if (p == NULL)
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "pipeline: NULL argument");
    if (micro_batches < 1)
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                                "pipeline: %d micro-batches: a run needs at least one",
                                (int)micro_batches);
    clrun_status st = check_io(p, false, micro_batches, inputs, input_bytes, input_count);
    if (st == CLRUN_OK)
        st = check_io(p, true, micro_batches, (const void *const *)outputs, output_bytes,
                      output_count);
    if (st != CLRUN_OK)
        return st;
    p->ran = false;
    p->micro_batches = micro_batches;
    p->in = inputs;
    p->out = outputs;
    st = stream(p);
    p->in = NULL;
    p->out = NULL;
    return st;
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
                                "failed, or was clrun_pipeline_run_many's, whose outputs are "
                                "the caller's)");
    if (i < 0 || i >= count)
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                                "pipeline: output %d of %d", (int)i, (int)count);
    uint64_t need = clrun_tensor_bytes(clrun_graph_tensor_type(p->graph, ids[i]));
    if (bytes != need)
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_SIZE,
                                "pipeline: output '%s' has %llu bytes, %llu asked for",
                                clrun_graph_tensor_name(p->graph, ids[i]),
                                (unsigned long long)need, (unsigned long long)bytes);
    memcpy(host, p->host[ids[i]], (size_t)bytes); /* slot 0 */
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

clrun_status clrun_pipeline_run_info_get(const clrun_pipeline *p, clrun_pipeline_run_info *out)
{
    if (p == NULL || out == NULL)
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "pipeline: NULL argument");
    *out = p->last;
    return CLRUN_OK;
}

void clrun__pipeline_fail_at(clrun_pipeline *p, int32_t k, int32_t micro_batch)
{
    if (p) {
        p->fail_stage = k;
        p->fail_batch = micro_batch;
    }
}

clrun_context *clrun_pipeline_context(const clrun_pipeline *p, int32_t k)
{
    return p && k >= 0 && k < p->count ? p->stages[k].ctx : NULL;
}
