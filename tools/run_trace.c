/* clrun run --trace: the last run as a Chrome/Perfetto trace (ui.perfetto.dev): the process and
 * queue named, a span per kernel, and a counter of the bytes the run holds, which rises to each
 * node's peak when it starts and falls when the buffers it read last are given back, so that the
 * counter's maximum is the run's reported peak. */
#include <errno.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "run.h"

/* The track of host offload's copies (tid 2 is the host's). */
#define TRANSFER_TID 3

static json_object *metadata(const char *what, const char *name)
{
    json_object *event = json_object_new_object();
    json_object_object_add(event, "name", json_object_new_string(what));
    json_object_object_add(event, "ph", json_object_new_string("M"));
    json_object_object_add(event, "pid", json_object_new_int(1));
    json_object_object_add(event, "tid", json_object_new_int(1));
    json_object *args = json_object_new_object();
    json_object_object_add(args, "name", json_object_new_string(name));
    json_object_object_add(event, "args", args);
    return event;
}

static json_object *counter(uint64_t ns, uint64_t bytes)
{
    json_object *event = json_object_new_object();
    json_object_object_add(event, "name", json_object_new_string("bytes in use"));
    json_object_object_add(event, "ph", json_object_new_string("C"));
    json_object_object_add(event, "ts", json_object_new_double((double)ns / 1e3));
    json_object_object_add(event, "pid", json_object_new_int(1));
    json_object *value = json_object_new_object();
    json_object_object_add(value, "bytes", json_object_new_int64((int64_t)bytes));
    json_object_object_add(event, "args", value);
    return event;
}

static json_object *span(const clrun_exec_span *s, const char *node)
{
    json_object *event = json_object_new_object();
    json_object_object_add(event, "name", json_object_new_string(s->op));
    bool again = clrun_remat_copy_of(s->name) > 0;
    /* host offload's copies (a memory budget's): transfers, not kernels */
    bool transfer = strcmp(s->op, "offload") == 0 || strcmp(s->op, "reload") == 0;
    json_object_object_add(event, "cat", json_object_new_string(transfer ? "transfer" : again ? "recompute" : "kernel"));
    json_object_object_add(event, "ph", json_object_new_string("X"));
    json_object_object_add(event, "ts", json_object_new_double((double)s->start_ns / 1e3));
    json_object_object_add(event, "dur", json_object_new_double((double)(s->end_ns - s->start_ns) / 1e3));
    json_object_object_add(event, "pid", json_object_new_int(1));
    /* the copies on a track of their own: with CLRUN_OFFLOAD_OVERLAP they run on a queue of
     * their own, beside the kernels */
    json_object_object_add(event, "tid", json_object_new_int(transfer ? TRANSFER_TID : 1));
    json_object *args = json_object_new_object();
    json_object_object_add(args, "output", json_object_new_string(s->name));
    if (node) /* the model's node (an imported model's) */
        json_object_object_add(args, "node", json_object_new_string(node));
    json_object_object_add(args, "bytes_in_use", json_object_new_int64((int64_t)s->bytes_in_use));
    if (again)
        json_object_object_add(args, "recomputed", json_object_new_boolean(true));
    if (transfer)
        json_object_object_add(args, "direction", json_object_new_string(s->op[0] == 'o' ? "to_host" : "to_device"));
    json_object_object_add(event, "args", args);
    return event;
}

FILE *clrun_run_open_trace(const char *command, const char *path)
{
    FILE *out = fopen(path, "w");
    if (out == NULL)
        fprintf(stderr, "clrun %s: cannot write the trace '%s': %s\n", command, path, strerror(errno));
    return out;
}

int clrun_run_write_trace(FILE *out, const char *command, const char *path,
                          const clrun_exec *exec, const clrun_graph *graph,
                          const clrun_context *ctx)
{
    return clrun_run_write_trace_host(out, command, path, exec, graph, ctx, NULL, 0);
}

int clrun_run_write_trace_host(FILE *out, const char *command, const char *path,
                               const clrun_exec *exec, const clrun_graph *graph,
                               const clrun_context *ctx, const char *host, double host_s)
{
    const clrun_exec_span *spans;
    int32_t n = clrun_exec_profile(exec, &spans);
    clrun_run_host_span span = {host, n > 0 ? (double)spans[n - 1].end_ns / 1e3 : 0.0,
                                host_s * 1e6};
    return clrun_run_write_trace_spans(out, command, path, exec, graph, ctx, &span,
                                       host ? 1 : 0);
}

int clrun_run_write_trace_spans(FILE *out, const char *command, const char *path,
                                const clrun_exec *exec, const clrun_graph *graph,
                                const clrun_context *ctx, const clrun_run_host_span *host,
                                int32_t host_count)
{
    const clrun_exec_span *spans;
    int32_t n = clrun_exec_profile(exec, &spans);
    json_object *events = json_object_new_array();
    char process[512], thread[512];
    snprintf(process, sizeof process, "clrun %s %s", command,
             clrun_graph_name(graph) ? clrun_graph_name(graph) : path);
    snprintf(thread, sizeof thread, "queue of %s", clrun_context_device(ctx)->name);
    json_object_array_add(events, metadata("process_name", process));
    json_object_array_add(events, metadata("thread_name", thread));
    bool transfers = false;
    for (int32_t i = 0; i < n; i++)
        transfers = transfers || strcmp(spans[i].op, "offload") == 0 || strcmp(spans[i].op, "reload") == 0;
    if (transfers) {
        json_object *name = metadata("thread_name", "host copies (offload, reload)");
        json_object_object_add(name, "tid", json_object_new_int(TRANSFER_TID));
        json_object_array_add(events, name);
    }
    for (int32_t i = 0; i < n; i++) {
        json_object_array_add(events, span(&spans[i], clrun_exec_span_node(exec, i)));
        json_object_array_add(events, counter(spans[i].start_ns, spans[i].bytes_in_use));
        json_object_array_add(events, counter(spans[i].end_ns, spans[i].bytes_after));
    }
    if (host_count > 0) {
        json_object *name = metadata("thread_name", "host");
        json_object_object_add(name, "tid", json_object_new_int(2));
        json_object_array_add(events, name);
    }
    for (int32_t i = 0; i < host_count; i++) {
        json_object *event = json_object_new_object();
        json_object_object_add(event, "name", json_object_new_string(host[i].name));
        json_object_object_add(event, "cat", json_object_new_string("collective"));
        json_object_object_add(event, "ph", json_object_new_string("X"));
        json_object_object_add(event, "ts", json_object_new_double(host[i].start_us));
        json_object_object_add(event, "dur", json_object_new_double(host[i].dur_us));
        json_object_object_add(event, "pid", json_object_new_int(1));
        json_object_object_add(event, "tid", json_object_new_int(2));
        json_object_array_add(events, event);
    }
    json_object *root = json_object_new_object();
    json_object_object_add(root, "traceEvents", events);
    json_object_object_add(root, "displayTimeUnit", json_object_new_string("ms"));
    const char *text = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN);
    int rc = fputs(text, out) < 0 || fputc('\n', out) == EOF;
    rc |= fclose(out) != 0;
    if (rc)
        fprintf(stderr, "clrun %s: writing the trace '%s' failed: %s\n", command, path,
                strerror(errno));
    json_object_put(root);
    return rc ? 1 : 0;
}
