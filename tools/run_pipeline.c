/* clrun run --devices 0,1: the graph split into a pipeline over several devices
 * (clrun/pipeline.h), one stage per device; the report gives each device's nodes, weights,
 * peak and bytes moved, and each output's checksum (the one-device run's). With
 * --micro-batches M, M micro-batches stream through the stages, overlapping them, and the report
 * adds the time per micro-batch, each stage's busy time and the bubble fraction. */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "cli.h"
#include "run.h"

/* Each input, `blocks` consecutive blocks of it: its --input file in every block, else block j
 * the seeded values (seed + j) of a one-device run. NULL after saying why on stderr. */
static void **make_inputs(const run_args *a, const clrun_graph *g, int blocks, uint64_t **bytes_out)
{
    const clrun_tensor_id *ids;
    int32_t n = clrun_graph_inputs(g, &ids);
    void **host = calloc((size_t)n + 1, sizeof *host);
    uint64_t *bytes = calloc((size_t)n + 1, sizeof *bytes);
    bool ok = host && bytes;
    if (!ok)
        fprintf(stderr, "clrun run: %s: out of host memory for the inputs\n", a->path);
    for (int32_t i = 0; ok && i < n; i++) {
        uint64_t one = clrun_tensor_bytes(clrun_graph_tensor_type(g, ids[i]));
        bytes[i] = one * (uint64_t)blocks;
        host[i] = malloc(bytes[i] ? (size_t)bytes[i] : 1);
        const void *given = clrun_cli_io_input(&a->io, i);
        const char *name = clrun_graph_tensor_name(g, ids[i]);
        if (host[i] == NULL) {
            fprintf(stderr, "clrun run: %s: out of host memory for input '%s'\n", a->path, name);
            ok = false;
        }
        for (int j = 0; ok && j < blocks; j++) {
            char *block = (char *)host[i] + (size_t)j * (size_t)one;
            if (given) {
                memcpy(block, given, (size_t)one);
            } else if (clrun_graph_example_input(g, i, a->seed + (uint64_t)j, block, one) != CLRUN_OK) {
                fprintf(stderr, "clrun run: %s: input '%s': %s\n", a->path, name, clrun_last_error(NULL));
                ok = false;
            }
        }
    }
    if (!ok) {
        for (int32_t i = 0; host && i < n; i++)
            free(host[i]);
        free(host);
        free(bytes);
        return NULL;
    }
    *bytes_out = bytes;
    return host;
}

/* Where the outputs are read from: the pipeline after clrun_pipeline_run, else block 0 of the
 * streamed run's output arrays. */
typedef struct run_outputs {
    clrun_pipeline *p;
    void **streamed; /* per output: M blocks; NULL for plain runs */
} run_outputs;

static clrun_status read_pipeline_output(void *source, int32_t index, void *host, uint64_t bytes)
{
    const run_outputs *o = source;
    if (o->streamed == NULL)
        return clrun_pipeline_read_output(o->p, index, host, bytes);
    memcpy(host, o->streamed[index], (size_t)bytes);
    return CLRUN_OK;
}

static int compare_ms(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double median_ms(const double *sorted, int n)
{
    return n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

static void print_report(const run_args *a, const clrun_graph *g, const clrun_pipeline *p, const double *times,
                         const char (*sums)[17])
{
    printf("%s: pipeline over %d devices, %d run%s: median %.3f ms (min %.3f, max %.3f)\n", a->path,
           (int)a->device_count, a->repeat, a->repeat == 1 ? "" : "s", median_ms(times, a->repeat), times[0],
           times[a->repeat - 1]);
    clrun_pipeline_run_info run;
    if (a->micro_batches && clrun_pipeline_run_info_get(p, &run) == CLRUN_OK) {
        char held[32], moved[32];
        char threads[32] = "the calling thread"; /* 0 threads: the stages ran on it */
        if (run.threads > 0)
            snprintf(threads, sizeof threads, "%d thread%s", (int)run.threads, run.threads == 1 ? "" : "s");
        printf("  %d micro-batches per run on %s: %.3f ms per micro-batch (median run), "
               "last run %.3f ms, stages busy %.3f ms, bubble %.1f%%, moved %s per micro-batch, "
               "hand-off slots hold %s\n",
               (int)run.micro_batches, threads,
               median_ms(times, a->repeat) / run.micro_batches, run.wall_ms, run.busy_ms,
               run.bubble_fraction * 100, clrun_format_bytes(run.bytes_moved, moved, sizeof moved),
               clrun_format_bytes(run.handoff_bytes, held, sizeof held));
    }
    for (int32_t k = 0; k < clrun_pipeline_stage_count(p); k++) {
        clrun_pipeline_stage_info info;
        if (clrun_pipeline_stage_info_get(p, k, &info) != CLRUN_OK)
            continue;
        char w[32], pk[32], lim[32], in[32], out[32], busy[48] = "";
        if (a->micro_batches)
            snprintf(busy, sizeof busy, ", busy %.3f ms", info.wall_ms);
        printf("  device %u (%s): nodes [%d, %d), weights %s, peak %s of %s, moved in %s, out %s%s\n", info.device,
               info.device_name, (int)info.first_node, (int)info.end_node,
               clrun_format_bytes(info.weights_bytes, w, sizeof w), clrun_format_bytes(info.peak_bytes, pk, sizeof pk),
               info.limit_bytes ? clrun_format_bytes(info.limit_bytes, lim, sizeof lim) : "no limit",
               clrun_format_bytes(info.bytes_in, in, sizeof in), clrun_format_bytes(info.bytes_out, out, sizeof out),
               busy);
    }
    const clrun_tensor_id *ids;
    int32_t outputs_n = clrun_graph_outputs(g, &ids);
    for (int32_t i = 0; i < outputs_n; i++)
        printf("output      %s checksum %s%s\n", clrun_graph_tensor_name(g, ids[i]), sums[i],
               a->micro_batches ? " (micro-batch 0)" : "");
}

/* One JSON object: the keys of `clrun run --json` that apply (graph, repeat, wall_ms and its
 * median, min and max, outputs), stage_peak_bytes (the largest stage's pool peak: weights,
 * inputs and activations, where run's peak_bytes counts activations only), the bytes moved
 * between stages per run (per micro-batch), and a "stages" array of each stage's report. With
 * --micro-batches: micro_batches, wall_ms_per_micro_batch (of the median run), bubble_fraction,
 * busy_ms and handoff_bytes of the last run, and each stage's busy_ms. */
static void print_json(const run_args *a, const clrun_graph *g, const clrun_pipeline *p, const double *times,
                       const char (*sums)[17])
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "graph", json_object_new_string(clrun_graph_name(g) ? clrun_graph_name(g) : a->path));
    json_object_object_add(o, "devices", json_object_new_int(a->device_count));
    json_object_object_add(o, "repeat", json_object_new_int(a->repeat));
    json_object_object_add(o, "wall_ms", json_object_new_double(median_ms(times, a->repeat)));
    json_object_object_add(o, "wall_ms_median", json_object_new_double(median_ms(times, a->repeat)));
    json_object_object_add(o, "wall_ms_min", json_object_new_double(times[0]));
    json_object_object_add(o, "wall_ms_max", json_object_new_double(times[a->repeat - 1]));
    json_object *stages = json_object_new_array();
    uint64_t peak = 0, moved = 0;
    for (int32_t k = 0; k < clrun_pipeline_stage_count(p); k++) {
        clrun_pipeline_stage_info info;
        if (clrun_pipeline_stage_info_get(p, k, &info) != CLRUN_OK)
            continue;
        json_object *st = json_object_new_object();
        json_object_object_add(st, "device", json_object_new_int64(info.device));
        json_object_object_add(st, "device_name", json_object_new_string(info.device_name));
        json_object_object_add(st, "first_node", json_object_new_int64(info.first_node));
        json_object_object_add(st, "end_node", json_object_new_int64(info.end_node));
        json_object_object_add(st, "weights_bytes", json_object_new_int64((int64_t)info.weights_bytes));
        json_object_object_add(st, "peak_bytes", json_object_new_int64((int64_t)info.peak_bytes));
        json_object_object_add(st, "limit_bytes", json_object_new_int64((int64_t)info.limit_bytes));
        json_object_object_add(st, "bytes_in", json_object_new_int64((int64_t)info.bytes_in));
        json_object_object_add(st, "bytes_out", json_object_new_int64((int64_t)info.bytes_out));
        json_object_object_add(st, "wall_ms", json_object_new_double(info.wall_ms));
        if (a->micro_batches)
            json_object_object_add(st, "busy_ms", json_object_new_double(info.wall_ms));
        json_object_array_add(stages, st);
        peak = info.peak_bytes > peak ? info.peak_bytes : peak;
        moved += info.bytes_out;
    }
    json_object_object_add(o, "stage_peak_bytes", json_object_new_int64((int64_t)peak));
    json_object_object_add(o, "bytes_moved", json_object_new_int64((int64_t)moved));
    json_object_object_add(o, "stages", stages);
    clrun_pipeline_run_info run;
    if (a->micro_batches && clrun_pipeline_run_info_get(p, &run) == CLRUN_OK) {
        json_object_object_add(o, "micro_batches", json_object_new_int(run.micro_batches));
        json_object_object_add(o, "wall_ms_per_micro_batch",
                               json_object_new_double(median_ms(times, a->repeat) / run.micro_batches));
        json_object_object_add(o, "threads", json_object_new_int(run.threads));
        json_object_object_add(o, "busy_ms", json_object_new_double(run.busy_ms));
        json_object_object_add(o, "bubble_fraction", json_object_new_double(run.bubble_fraction));
        json_object_object_add(o, "handoff_bytes", json_object_new_int64((int64_t)run.handoff_bytes));
    }
    json_object_object_add(o, "outputs", clrun_run_json_outputs(g, sums));
    printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(o);
}

int clrun_run_pipeline(const run_args *a, const clrun_graph *g)
{
    clrun_exec_options eo;
    clrun_exec_options_init(&eo);
    if (a->plan_time_limit >= 0)
        eo.plan_time_limit_s = a->plan_time_limit;
    eo.memory_budget = a->memory_budget;
    clrun_pipeline_options po;
    clrun_pipeline_options_init(&po);
    po.allocator = a->allocator;
    po.exec = &eo;
    uint64_t limits[CLRUN_RUN_MAX_DEVICES];
    for (int k = 0; k < a->device_count; k++)
        limits[k] = a->device_limit;
    clrun_pipeline *p = NULL;
    if (clrun_pipeline_create(g, a->devices, limits, a->device_count, &po, &p) != CLRUN_OK) {
        fprintf(stderr, "clrun run: %s: %s\n", a->path, clrun_last_error(NULL));
        return 1;
    }
    const clrun_tensor_id *ids;
    int32_t inputs_n = clrun_graph_inputs(g, &ids);
    uint64_t *bytes = NULL;
    int blocks = a->micro_batches ? a->micro_batches : 1;
    void **host = make_inputs(a, g, blocks, &bytes);
    if (host == NULL) {
        clrun_pipeline_destroy(p);
        return 1;
    }
    int rc = 0;
    /* Streamed: M blocks of every output. */
    int32_t outputs_n = clrun_graph_outputs(g, &ids);
    void **streamed = a->micro_batches ? calloc((size_t)outputs_n + 1, sizeof *streamed) : NULL;
    uint64_t *out_bytes = a->micro_batches ? calloc((size_t)outputs_n + 1, sizeof *out_bytes) : NULL;
    if (a->micro_batches && (streamed == NULL || out_bytes == NULL))
        rc = 1;
    for (int32_t i = 0; rc == 0 && streamed && i < outputs_n; i++) {
        out_bytes[i] = clrun_tensor_bytes(clrun_graph_tensor_type(g, ids[i])) * (uint64_t)blocks;
        if ((streamed[i] = malloc(out_bytes[i] ? (size_t)out_bytes[i] : 1)) == NULL)
            rc = 1;
    }
    if (rc)
        fprintf(stderr, "clrun run: %s: out of host memory for the outputs\n", a->path);
    clrun_graph_inputs(g, &ids);
    double *times = calloc((size_t)a->repeat + 1, sizeof *times);
    if (times == NULL) {
        fprintf(stderr, "clrun run: %s: out of host memory\n", a->path);
        rc = 1;
    }
    for (int i = -1; rc == 0 && i < a->repeat; i++) { /* i = -1: warm-up */
        clrun_status st =
            streamed ? clrun_pipeline_run_many(p, blocks, (const void *const *)host, bytes, inputs_n,
                                               streamed, out_bytes, outputs_n)
                     : clrun_pipeline_run(p, (const void *const *)host, bytes, inputs_n);
        if (st != CLRUN_OK) {
            fprintf(stderr, "clrun run: %s: %s\n", a->path, clrun_last_error(NULL));
            rc = 1;
        }
        double ms = 0;
        clrun_pipeline_run_info run;
        if (rc == 0 && clrun_pipeline_run_info_get(p, &run) == CLRUN_OK)
            ms = run.wall_ms;
        if (i >= 0)
            times[i] = ms;
    }
    clrun_graph_outputs(g, &ids);
    run_outputs reader = {p, streamed};
    char(*sums)[17] = rc == 0 ? calloc((size_t)outputs_n + 1, sizeof *sums) : NULL;
    if (rc == 0 && sums == NULL) {
        fprintf(stderr, "clrun run: %s: out of host memory\n", a->path);
        rc = 1;
    }
    for (int32_t i = 0; rc == 0 && i < outputs_n; i++) {
        uint64_t n = clrun_tensor_bytes(clrun_graph_tensor_type(g, ids[i]));
        void *data = malloc(n ? (size_t)n : 1);
        if (data == NULL || read_pipeline_output(&reader, i, data, n) != CLRUN_OK) {
            fprintf(stderr, "clrun run: %s: output '%s': %s\n", a->path, clrun_graph_tensor_name(g, ids[i]),
                    data ? clrun_last_error(NULL) : "out of host memory");
            rc = 1;
        } else {
            snprintf(sums[i], sizeof sums[i], "%016llx", (unsigned long long)XXH64(data, (size_t)n, 0));
        }
        free(data);
    }
    if (rc == 0)
        rc = clrun_cli_io_write_outputs_from("run", &a->io, g, read_pipeline_output, &reader);
    if (rc == 0) {
        qsort(times, (size_t)a->repeat, sizeof *times, compare_ms);
        if (a->json)
            print_json(a, g, p, times, sums);
        else
            print_report(a, g, p, times, sums);
    }
    free(sums);
    free(times);
    for (int32_t i = 0; streamed && i < outputs_n; i++)
        free(streamed[i]);
    free(streamed);
    free(out_bytes);
    for (int32_t i = 0; i < inputs_n; i++)
        free(host[i]);
    free(host);
    free(bytes);
    clrun_pipeline_destroy(p);
    return rc;
}
