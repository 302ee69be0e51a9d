/* clrun run --devices 0,1 --data-parallel: the global batch split over several devices
 * (clrun/run_parallel.h), each running the whole model on its rows; the report gives each
 * device's rows, weights, peak and time, the rows per second, and each output's checksum at the
 * global batch (the one-device run's where the inputs are the same). An ONNX model with an open
 * batch is loaded once per distinct share (at most two), its batch bound to the share; a .graph
 * file fixes its batch, which is then each device's share (the global batch N times it). */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "cli.h"
#include "run.h"

/* The model at `rows` rows where the global graph g has `batch`: every binding of the global
 * batch (a --dim of that value, the first dimension of a --shape, of an --input file's shape, of
 * an input the model has at it) bound to `rows` instead. */
static int load_share(const run_args *a, const clrun_graph *g, int64_t batch, int64_t rows,
                      clrun_graph **out)
{
    clrun_cli_io io = a->io; /* a copy of the bindings; its files are read again for shapes */
    io.host = NULL;
    io.host_count = 0;
    for (int d = 0; d < io.dim_count; d++)
        if (io.dims[d].value == batch)
            io.dims[d].value = rows;
    for (int s = 0; s < io.shape_count; s++)
        if (io.shapes[s].rank >= 1 && io.shapes[s].dims[0] == batch)
            io.shapes[s].dims[0] = rows;
    const clrun_tensor_id *ids;
    int32_t n = clrun_graph_inputs(g, &ids);
    for (int32_t i = 0; i < n; i++) {
        const clrun_tensor_type *t = clrun_graph_tensor_type(g, ids[i]);
        const char *name = clrun_graph_tensor_name(g, ids[i]);
        bool given = false;
        for (int s = 0; s < io.shape_count; s++)
            given = given || strcmp(io.shapes[s].input, name) == 0;
        if (given || t->rank < 1 || t->shape[0] != batch)
            continue;
        if (io.shape_count == CLRUN_CLI_MAX_BINDINGS)
            return clrun_cli_usage_error("run", "--data-parallel: more than %d inputs to bind",
                                         CLRUN_CLI_MAX_BINDINGS);
        clrun_onnx_shape *sh = &io.shapes[io.shape_count++];
        *sh = (clrun_onnx_shape){.input = name, .rank = t->rank};
        memcpy(sh->dims, t->shape, sizeof sh->dims);
        sh->dims[0] = rows;
    }
    int rc = clrun_cli_load_bound("run", a->path, &io, &a->consts, out);
    if (rc != 0)
        fprintf(stderr, "clrun run: --data-parallel: %s at a share of %lld rows (of %lld) did not "
                "load: each device's share needs an ONNX model whose batch is open\n", a->path,
                (long long)rows, (long long)batch);
    return rc;
}

/* The inputs at the global batch: an ONNX model's from the global graph g (its --input files, or
 * its seeded values: the one-device run's); a .graph's (g at one share) share k of the split
 * inputs seeded with seed + k, the others seeded once. NULL after a message. */
static void **make_inputs(const run_args *a, const clrun_graph *g, const clrun_run_parallel *p,
                          bool onnx, uint64_t **bytes_out)
{
    const clrun_tensor_id *ids;
    int32_t n = clrun_graph_inputs(g, &ids);
    void **host = calloc((size_t)n + 1, sizeof *host);
    uint64_t *bytes = calloc((size_t)n + 1, sizeof *bytes);
    bool ok = host && bytes;
    if (!ok)
        fprintf(stderr, "clrun run: %s: out of host memory for the inputs\n", a->path);
    for (int32_t i = 0; ok && i < n; i++) {
        const clrun_tensor_type *t = clrun_graph_tensor_type(g, ids[i]);
        uint64_t one = clrun_tensor_bytes(t);
        bytes[i] = clrun_run_parallel_input_bytes(p, i);
        host[i] = malloc(bytes[i] ? (size_t)bytes[i] : 1);
        const char *name = clrun_graph_tensor_name(g, ids[i]);
        if (host[i] == NULL) {
            fprintf(stderr, "clrun run: %s: out of host memory for input '%s'\n", a->path, name);
            ok = false;
            break;
        }
        const void *given = clrun_cli_io_input(&a->io, i);
        int blocks = !onnx && bytes[i] != one ? (int)clrun_run_parallel_count(p) : 1;
        for (int j = 0; ok && j < blocks; j++) {
            char *block = (char *)host[i] + (size_t)j * (size_t)one;
            if (given)
                memcpy(block, given, (size_t)one);
            else if (clrun_graph_example_input(g, i, a->seed + (uint64_t)j, block, one) != CLRUN_OK) {
                fprintf(stderr, "clrun run: %s: input '%s': %s\n", a->path, name,
                        clrun_last_error(NULL));
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

static clrun_status read_host_output(void *source, int32_t index, void *host, uint64_t bytes)
{
    void *const *outputs = source;
    memcpy(host, outputs[index], (size_t)bytes);
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

static void print_report(const run_args *a, const clrun_graph *g, const clrun_run_parallel *p,
                         const double *times, const char (*sums)[17])
{
    double median = median_ms(times, a->repeat);
    int64_t batch = clrun_run_parallel_batch(p);
    printf("%s: data parallel over %d device%s, global batch %lld, %d run%s: median %.3f ms (min "
           "%.3f, max %.3f), %.0f rows/s\n", a->path, (int)clrun_run_parallel_count(p),
           clrun_run_parallel_count(p) == 1 ? "" : "s",
           (long long)batch, a->repeat, a->repeat == 1 ? "" : "s", median, times[0],
           times[a->repeat - 1], median > 0 ? (double)batch / (median / 1e3) : 0);
    for (int32_t k = 0; k < clrun_run_parallel_count(p); k++) {
        clrun_run_parallel_device_info info;
        if (clrun_run_parallel_device_info_get(p, k, &info) != CLRUN_OK)
            continue;
        char w[32], pk[32];
        printf("  device %u (%s): rows [%lld, %lld), weights %s, peak %s, last run %.3f ms "
               "(executor %.3f ms)\n", info.device, info.device_name, (long long)info.first_row,
               (long long)(info.first_row + info.rows),
               clrun_format_bytes(info.weights_bytes, w, sizeof w),
               clrun_format_bytes(info.peak_bytes, pk, sizeof pk), info.wall_ms, info.run_ms);
    }
    const clrun_tensor_id *ids;
    int32_t outputs_n = clrun_graph_outputs(g, &ids);
    for (int32_t i = 0; i < outputs_n; i++)
        printf("output      %s checksum %s\n", clrun_graph_tensor_name(g, ids[i]), sums[i]);
}

/* One JSON object: graph, repeat, wall_ms and its median, min and max, as `clrun run --json`;
 * data_parallel, batch (the global one), rows_per_s (of the median run), devices (their numbers)
 * and device_batch (their rows), as `clrun train --devices --json`; a "shares" array of each
 * device's report; outputs with their checksums at the global batch. */
static void print_json(const run_args *a, const clrun_graph *g, const clrun_run_parallel *p,
                       const double *times, const char (*sums)[17])
{
    double median = median_ms(times, a->repeat);
    int64_t batch = clrun_run_parallel_batch(p);
    json_object *o = json_object_new_object();
    json_object_object_add(o, "graph", json_object_new_string(clrun_graph_name(g) ? clrun_graph_name(g) : a->path));
    json_object_object_add(o, "data_parallel", json_object_new_boolean(1));
    json_object_object_add(o, "batch", json_object_new_int64(batch));
    json_object_object_add(o, "repeat", json_object_new_int(a->repeat));
    json_object_object_add(o, "wall_ms", json_object_new_double(median));
    json_object_object_add(o, "wall_ms_median", json_object_new_double(median));
    json_object_object_add(o, "wall_ms_min", json_object_new_double(times[0]));
    json_object_object_add(o, "wall_ms_max", json_object_new_double(times[a->repeat - 1]));
    json_object_object_add(o, "rows_per_s",
                           json_object_new_double(median > 0 ? (double)batch / (median / 1e3) : 0));
    json_object *devices = json_object_new_array(), *rows = json_object_new_array();
    json_object *shares = json_object_new_array();
    for (int32_t k = 0; k < clrun_run_parallel_count(p); k++) {
        clrun_run_parallel_device_info info;
        if (clrun_run_parallel_device_info_get(p, k, &info) != CLRUN_OK)
            continue;
        json_object_array_add(devices, json_object_new_int64(info.device));
        json_object_array_add(rows, json_object_new_int64(info.rows));
        json_object *s = json_object_new_object();
        json_object_object_add(s, "device", json_object_new_int64(info.device));
        json_object_object_add(s, "device_name", json_object_new_string(info.device_name));
        json_object_object_add(s, "first_row", json_object_new_int64(info.first_row));
        json_object_object_add(s, "rows", json_object_new_int64(info.rows));
        json_object_object_add(s, "weights_bytes", json_object_new_int64((int64_t)info.weights_bytes));
        json_object_object_add(s, "peak_bytes", json_object_new_int64((int64_t)info.peak_bytes));
        json_object_object_add(s, "run_peak_bytes", json_object_new_int64((int64_t)info.run_peak_bytes));
        json_object_object_add(s, "wall_ms", json_object_new_double(info.wall_ms));
        json_object_object_add(s, "run_ms", json_object_new_double(info.run_ms));
        json_object_array_add(shares, s);
    }
    json_object_object_add(o, "devices", devices);
    json_object_object_add(o, "device_batch", rows);
    json_object_object_add(o, "shares", shares);
    json_object_object_add(o, "outputs", clrun_run_json_outputs(g, sums));
    printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(o);
}

/* The models of every device: an ONNX model's at each distinct share (g itself is at the global
 * batch), a .graph's g on every device. graphs[] gets those made here (to destroy). */
static int device_models(const run_args *a, const clrun_graph *g, bool onnx,
                         const clrun_graph **models, clrun_graph **made)
{
    int n = a->device_count;
    if (!onnx) {
        for (int k = 0; k < n; k++)
            models[k] = g;
        return 0;
    }
    const clrun_tensor_id *ids;
    const clrun_tensor_type *t = clrun_graph_inputs(g, &ids) > 0 ? clrun_graph_tensor_type(g, ids[0]) : NULL;
    if (t == NULL || t->rank < 1) {
        fprintf(stderr, "clrun run: --data-parallel: %s has no input with a batch dimension (its "
                "first input's first dimension)\n", a->path);
        return 2;
    }
    int64_t batch = t->shape[0];
    for (int k = 0; k < n; k++) {
        int64_t rows = 0;
        if (clrun_train_parallel_share(batch, n, k, NULL, &rows) != CLRUN_OK) {
            fprintf(stderr, "clrun run: --data-parallel: %s (the global batch is the first "
                    "dimension of the first input, '%s', as the --input files or --shape bind "
                    "it)\n", clrun_last_error(NULL), clrun_graph_tensor_name(g, ids[0]));
            return 2;
        }
        if (rows == batch) {
            models[k] = g;
            continue;
        }
        for (int j = 0; j < k && models[k] == NULL; j++) {
            const clrun_tensor_id *jids;
            clrun_graph_inputs(models[j], &jids);
            if (clrun_graph_tensor_type(models[j], jids[0])->shape[0] == rows)
                models[k] = models[j];
        }
        if (models[k] != NULL)
            continue;
        int rc = load_share(a, g, batch, rows, &made[k]);
        if (rc != 0)
            return rc;
        models[k] = made[k];
    }
    return 0;
}

int clrun_run_data_parallel(const run_args *a, const clrun_graph *g)
{
    bool onnx = clrun_cli_is_onnx(a->path);
    const clrun_graph *models[CLRUN_RUN_MAX_DEVICES] = {0};
    clrun_graph *made[CLRUN_RUN_MAX_DEVICES] = {0};
    int rc = device_models(a, g, onnx, models, made);
    clrun_run_parallel *p = NULL;
    if (rc == 0) {
        clrun_exec_options eo;
        clrun_exec_options_init(&eo);
        if (a->plan_time_limit >= 0)
            eo.plan_time_limit_s = a->plan_time_limit;
        eo.memory_budget = a->memory_budget;
        clrun_run_parallel_options po;
        clrun_run_parallel_options_init(&po);
        po.allocator = a->allocator;
        po.pool_limit = a->device_limit;
        po.exec = &eo;
        if (clrun_run_parallel_create(models, a->devices, a->device_count, &po, &p) != CLRUN_OK) {
            fprintf(stderr, "clrun run: %s: %s\n", a->path, clrun_last_error(NULL));
            rc = 1;
        }
    }
    const clrun_tensor_id *ids;
    int32_t inputs_n = clrun_graph_inputs(g, &ids);
    int32_t outputs_n = clrun_graph_outputs(g, &ids);
    uint64_t *in_bytes = NULL;
    void **host = rc == 0 ? make_inputs(a, g, p, onnx, &in_bytes) : NULL;
    if (rc == 0 && host == NULL)
        rc = 1;
    void **outputs = calloc((size_t)outputs_n + 1, sizeof *outputs);
    uint64_t *out_bytes = calloc((size_t)outputs_n + 1, sizeof *out_bytes);
    double *times = calloc((size_t)a->repeat + 1, sizeof *times);
    char(*sums)[17] = calloc((size_t)outputs_n + 1, sizeof *sums);
    if (rc == 0 && (outputs == NULL || out_bytes == NULL || times == NULL || sums == NULL))
        rc = 1;
    for (int32_t i = 0; rc == 0 && i < outputs_n; i++) {
        out_bytes[i] = clrun_run_parallel_output_bytes(p, i);
        if ((outputs[i] = malloc(out_bytes[i] ? (size_t)out_bytes[i] : 1)) == NULL)
            rc = 1;
    }
    if (rc == 0 && (outputs == NULL || times == NULL || sums == NULL))
        fprintf(stderr, "clrun run: %s: out of host memory\n", a->path);
    for (int i = -1; rc == 0 && i < a->repeat; i++) { /* i = -1: warm-up */
        if (clrun_run_parallel_run(p, (const void *const *)host, in_bytes, inputs_n, outputs,
                                   out_bytes, outputs_n) != CLRUN_OK) {
            fprintf(stderr, "clrun run: %s: %s\n", a->path, clrun_last_error(NULL));
            rc = 1;
        } else if (i >= 0) {
            times[i] = clrun_run_parallel_wall_ms(p);
        }
    }
    for (int32_t i = 0; rc == 0 && i < outputs_n; i++)
        snprintf(sums[i], sizeof sums[i], "%016llx",
                 (unsigned long long)XXH64(outputs[i], (size_t)out_bytes[i], 0));
    /* the outputs at the global batch: g's types for an ONNX model (a .graph's are a share's) */
    if (rc == 0 && onnx)
        rc = clrun_cli_io_write_outputs_from("run", &a->io, g, read_host_output, outputs);
    else if (rc == 0 && a->io.output_dir)
        fprintf(stderr, "clrun run: --data-parallel: --output-dir takes an ONNX model (a .graph's "
                "outputs are a share's shape)\n");
    if (rc == 0) {
        qsort(times, (size_t)a->repeat, sizeof *times, compare_ms);
        if (a->json)
            print_json(a, g, p, times, sums);
        else
            print_report(a, g, p, times, sums);
    }
    free(sums);
    free(times);
    for (int32_t i = 0; outputs && i < outputs_n; i++)
        free(outputs[i]);
    free(outputs);
    free(out_bytes);
    for (int32_t i = 0; host && i < inputs_n; i++)
        free(host[i]);
    free(host);
    free(in_bytes);
    clrun_run_parallel_destroy(p);
    for (int k = 0; k < a->device_count; k++)
        clrun_graph_destroy(made[k]);
    return rc;
}
