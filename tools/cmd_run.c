/* clrun run: loads a .graph, runs it under one allocator mode and reports time, memory and a
 * checksum per output, for a person or (--json) for a program; --trace writes a Chrome/Perfetto
 * trace with one span per kernel and a counter of bytes in use. */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clrun/clrun.h>

#include "device/cache.h"
#include "cli.h"
#include "device/context.h"
#include "graph/graph.h"
#include "core/options.h"

typedef struct run_args {
    const char *path;
    const char *allocator; /* buddy|slab|bump|naive|planned, NULL = CLRUN_ALLOCATOR */
    int repeat;
    bool json;
    const char *trace;
    uint64_t seed;
    double plan_time_limit;
} run_args;

typedef struct run_result {
    double *times;            /* per repeat */
    clrun_exec_stats stats;   /* of the last run */
    char (*checksums)[17];    /* per output */
} run_result;

static void print_help(void)
{
    printf("usage: clrun run FILE.graph [--allocator buddy|slab|bump|naive|planned] [--repeat N]\n"
           "                 [--json] [--trace OUT.json] [--seed S] [--time-limit S]\n\n"
           "Runs the graph N times (default 5, after one warm-up run) on the device clrun chooses\n"
           "(CLRUN_DEVICE) and reports the median time per run, peak bytes in use, bytes reserved\n"
           "from the driver, the lower bound, the naive total and the saving, donations, and an\n"
           "XXH64 checksum of each output. Inputs are filled from --seed (default 1), so the\n"
           "checksums of a graph are the same in every allocator mode.\n\n"
           "  --allocator  pool strategy (buddy, slab, bump), naive (one buffer per tensor) or\n"
           "               planned (one arena from the static planner); default CLRUN_ALLOCATOR\n"
           "  --json       one JSON object instead of the report\n"
           "  --trace F    Chrome/Perfetto trace of the last run (open in ui.perfetto.dev)\n"
           "  --time-limit planner budget in seconds for --allocator planned (default 1)\n");
}

static int parse_args(int argc, char **argv, run_args *a)
{
    *a = (run_args){.repeat = 5, .seed = 1};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        bool has_value = i + 1 < argc;
        if (strcmp(arg, "--json") == 0) {
            a->json = true;
        } else if (strcmp(arg, "--allocator") == 0 && has_value) {
            a->allocator = argv[++i];
        } else if (strcmp(arg, "--trace") == 0 && has_value) {
            a->trace = argv[++i];
        } else if (strcmp(arg, "--repeat") == 0 && has_value) {
            char *end;
            long n = strtol(argv[++i], &end, 10);
            if (*end || n < 1 || n > 100000)
                return clrun_cli_usage_error("run", "--repeat takes a count from 1 to 100000, not '%s'", argv[i]);
            a->repeat = (int)n;
        } else if (strcmp(arg, "--seed") == 0 && has_value) {
            uint64_t seed;
            if (!clrun__parse_size(argv[++i], &seed))
                return clrun_cli_usage_error("run", "--seed takes a non-negative integer, not '%s'", argv[i]);
            a->seed = seed;
        } else if (strcmp(arg, "--time-limit") == 0 && has_value) {
            char *end;
            a->plan_time_limit = strtod(argv[++i], &end);
            if (*end || !(a->plan_time_limit > 0))
                return clrun_cli_usage_error("run", "--time-limit takes seconds > 0, not '%s'", argv[i]);
        } else if (arg[0] == '-') {
            return clrun_cli_usage_error("run", "unknown option or missing value: '%s'", arg);
        } else if (a->path == NULL) {
            a->path = arg;
        } else {
            return clrun_cli_usage_error("run", "one graph file only ('%s' is extra)", arg);
        }
    }
    if (a->path == NULL)
        return clrun_cli_usage_error("run", "no graph file given");
    if (a->allocator && strcmp(a->allocator, "naive") && strcmp(a->allocator, "planned") &&
        clrun_strategy_find(a->allocator) == NULL)
        return clrun_cli_usage_error("run", "unknown allocator '%s': valid names are %s|naive|planned",
                                     a->allocator, clrun_strategy_names());
    return 0;
}

/* Fills an input like a seeded constant: uniform in [-1, 1) for floats, [0, 16) for ints. */
static clrun_status make_input(clrun_context *ctx, const clrun_graph *g, int32_t index, uint64_t seed,
                               clrun_buffer *out)
{
    clrun_tensor_id id;
    const clrun_tensor_id *ids;
    clrun_graph_inputs(g, &ids);
    id = ids[index];
    clrun__tensor t = g->tensors[id];
    t.data = NULL;
    t.fill = CLRUN_FILL_UNIFORM;
    t.fill_a = t.type.dtype == CLRUN_I32 ? 0 : -1;
    t.fill_b = t.type.dtype == CLRUN_I32 ? 16 : 1;
    t.seed = seed * 1000003u + (uint64_t)index;
    uint64_t bytes = clrun_tensor_bytes(&t.type);
    void *host = malloc((size_t)bytes);
    if (host == NULL)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    clrun__constant_values(&t, host);
    clrun_status status = clrun_alloc_ex(ctx, bytes, 0, t.name, out);
    if (status == CLRUN_OK)
        status = clrun_buffer_write(ctx, out, host);
    free(host);
    return status;
}

/* Inputs for one run; donated ones are consumed by it, so they are made anew each time. */
static clrun_status prepare_inputs(clrun_context *ctx, const clrun_graph *g, uint64_t seed, clrun_buffer *inputs,
                                   bool first)
{
    const clrun_tensor_id *ids;
    int32_t n = clrun_graph_inputs(g, &ids);
    for (int32_t i = 0; i < n; i++) {
        if (!first && !g->tensors[ids[i]].donated)
            continue;
        clrun_status status = make_input(ctx, g, i, seed, &inputs[i]);
        if (status != CLRUN_OK)
            return status;
    }
    return CLRUN_OK;
}

static void free_kept_inputs(clrun_context *ctx, const clrun_graph *g, clrun_buffer *inputs)
{
    const clrun_tensor_id *ids;
    int32_t n = clrun_graph_inputs(g, &ids);
    for (int32_t i = 0; i < n; i++)
        if (!g->tensors[ids[i]].donated && inputs[i].mem)
            clrun_free(ctx, &inputs[i]);
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static clrun_status checksum_outputs(clrun_exec *exec, const clrun_graph *g, char (*sums)[17])
{
    const clrun_tensor_id *ids;
    int32_t n = clrun_graph_outputs(g, &ids);
    for (int32_t i = 0; i < n; i++) {
        uint64_t bytes = clrun_tensor_bytes(clrun_graph_tensor_type(g, ids[i]));
        void *host = malloc((size_t)bytes);
        if (host == NULL)
            return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        clrun_status status = clrun_exec_read_output(exec, i, host, bytes);
        if (status == CLRUN_OK)
            snprintf(sums[i], 17, "%016llx", clrun__hash64(host, (size_t)bytes));
        free(host);
        if (status != CLRUN_OK)
            return status;
    }
    return CLRUN_OK;
}

static void shape_text(const clrun_tensor_type *t, char *out, size_t size)
{
    size_t used = (size_t)snprintf(out, size, "%s[", clrun_dtype_name(t->dtype));
    for (int d = 0; d < t->rank && used < size; d++)
        used += (size_t)snprintf(out + used, size - used, "%s%lld", d ? "," : "", (long long)t->shape[d]);
    if (used < size)
        snprintf(out + used, size - used, "]");
}

static int write_trace(const char *path, const clrun_exec *exec)
{
    const clrun_exec_span *spans;
    int32_t n = clrun_exec_profile(exec, &spans);
    json_object *events = json_object_new_array();
    for (int32_t i = 0; i < n; i++) {
        json_object *span = json_object_new_object();
        json_object_object_add(span, "name", json_object_new_string(spans[i].op));
        json_object_object_add(span, "cat", json_object_new_string("kernel"));
        json_object_object_add(span, "ph", json_object_new_string("X"));
        json_object_object_add(span, "ts", json_object_new_double((double)spans[i].start_ns / 1e3));
        json_object_object_add(span, "dur", json_object_new_double((double)(spans[i].end_ns - spans[i].start_ns) / 1e3));
        json_object_object_add(span, "pid", json_object_new_int(1));
        json_object_object_add(span, "tid", json_object_new_int(1));
        json_object *args = json_object_new_object();
        json_object_object_add(args, "output", json_object_new_string(spans[i].name));
        json_object_object_add(span, "args", args);
        json_object_array_add(events, span);

        json_object *counter = json_object_new_object();
        json_object_object_add(counter, "name", json_object_new_string("bytes in use"));
        json_object_object_add(counter, "ph", json_object_new_string("C"));
        json_object_object_add(counter, "ts", json_object_new_double((double)spans[i].start_ns / 1e3));
        json_object_object_add(counter, "pid", json_object_new_int(1));
        json_object *value = json_object_new_object();
        json_object_object_add(value, "bytes", json_object_new_int64((int64_t)spans[i].bytes_in_use));
        json_object_object_add(counter, "args", value);
        json_object_array_add(events, counter);
    }
    json_object *root = json_object_new_object();
    json_object_object_add(root, "traceEvents", events);
    json_object_object_add(root, "displayTimeUnit", json_object_new_string("ms"));
    int rc = json_object_to_file_ext(path, root, JSON_C_TO_STRING_PLAIN) == 0 ? 0 : 1;
    if (rc)
        fprintf(stderr, "clrun run: cannot write trace '%s'\n", path);
    json_object_put(root);
    return rc;
}

static void print_json(const run_args *a, const clrun_context *ctx, const clrun_graph *g, const run_result *r,
                       double median)
{
    const clrun_exec_stats *s = &r->stats;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "graph", json_object_new_string(clrun_graph_name(g) ? clrun_graph_name(g) : a->path));
    json_object_object_add(o, "allocator", json_object_new_string(s->allocator));
    json_object_object_add(o, "mode", json_object_new_string(s->mode));
    json_object_object_add(o, "device", json_object_new_string(clrun_context_device(ctx)->name));
    json_object_object_add(o, "nodes", json_object_new_int(s->steps));
    json_object_object_add(o, "repeat", json_object_new_int(a->repeat));
    json_object_object_add(o, "wall_ms", json_object_new_double(median));
    json_object_object_add(o, "peak_bytes", json_object_new_int64((int64_t)s->peak_bytes));
    json_object_object_add(o, "reserved_bytes", json_object_new_int64((int64_t)s->reserved_bytes));
    json_object_object_add(o, "lower_bound_bytes", json_object_new_int64((int64_t)s->lower_bound_bytes));
    json_object_object_add(o, "naive_bytes", json_object_new_int64((int64_t)s->naive_bytes));
    json_object_object_add(o, "constant_bytes", json_object_new_int64((int64_t)s->constant_bytes));
    json_object_object_add(o, "driver_allocs", json_object_new_int64((int64_t)s->driver_allocs));
    json_object_object_add(o, "donations", json_object_new_int(s->donations));
    json_object_object_add(o, "unused_donations", json_object_new_int(s->unused_donations));
    json_object *outputs = json_object_new_array();
    const clrun_tensor_id *ids;
    int32_t n = clrun_graph_outputs(g, &ids);
    for (int32_t i = 0; i < n; i++) {
        const clrun_tensor_type *t = clrun_graph_tensor_type(g, ids[i]);
        json_object *out = json_object_new_object();
        json_object_object_add(out, "name", json_object_new_string(clrun_graph_tensor_name(g, ids[i])));
        json_object_object_add(out, "dtype", json_object_new_string(clrun_dtype_name(t->dtype)));
        json_object *shape = json_object_new_array();
        for (int d = 0; d < t->rank; d++)
            json_object_array_add(shape, json_object_new_int64(t->shape[d]));
        json_object_object_add(out, "shape", shape);
        json_object_object_add(out, "checksum", json_object_new_string(r->checksums[i]));
        json_object_array_add(outputs, out);
    }
    json_object_object_add(o, "outputs", outputs);
    printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(o);
}

static void print_report(const run_args *a, const clrun_context *ctx, const clrun_graph *g, const run_result *r,
                         double median)
{
    const clrun_exec_stats *s = &r->stats;
    char peak[32], reserved[32], bound[32], naive[32], constants[32];
    const clrun_device_info *d = clrun_context_device(ctx);
    printf("graph       %s (%s): %d nodes, %d tensors, weights %s\n", clrun_graph_name(g) ? clrun_graph_name(g) : "",
           a->path, (int)s->steps, (int)clrun_graph_tensor_count(g),
           clrun__format_bytes(s->constant_bytes, constants, sizeof constants));
    printf("device      %s (%s)\n", d->name, d->platform_name);
    printf("allocator   %s\n", s->allocator);
    double lo = r->times[0], hi = r->times[a->repeat - 1];
    printf("time        %.3f ms per run (median of %d; min %.3f, max %.3f)\n", median, a->repeat, lo, hi);
    printf("peak        %s in use, %s reserved from the driver (%llu driver allocations in the last run)\n",
           clrun__format_bytes(s->peak_bytes, peak, sizeof peak),
           clrun__format_bytes(s->reserved_bytes, reserved, sizeof reserved), (unsigned long long)s->driver_allocs);
    printf("bounds      lower bound %s (peak is %.2fx), naive %s (saving %.1f%%)\n",
           clrun__format_bytes(s->lower_bound_bytes, bound, sizeof bound),
           s->lower_bound_bytes ? (double)s->peak_bytes / (double)s->lower_bound_bytes : 0.0,
           clrun__format_bytes(s->naive_bytes, naive, sizeof naive),
           s->naive_bytes ? 100.0 * (1.0 - (double)s->peak_bytes / (double)s->naive_bytes) : 0.0);
    printf("donations   %d in place%s\n", (int)s->donations,
           s->unused_donations ? ", some donated inputs unused (see CLRUN_LOG=warn)" : "");
    const clrun_tensor_id *ids;
    int32_t n = clrun_graph_outputs(g, &ids);
    for (int32_t i = 0; i < n; i++) {
        char type[128];
        shape_text(clrun_graph_tensor_type(g, ids[i]), type, sizeof type);
        printf("output      %s %s checksum %s\n", clrun_graph_tensor_name(g, ids[i]), type, r->checksums[i]);
    }
}

/* Warm-up, then `repeat` timed runs; fills r. */
static int run_graph(const run_args *a, clrun_context *ctx, clrun_graph *g, run_result *r)
{
    clrun_exec_options options = {.mode = CLRUN_EXEC_POOLED, .profile = a->trace != NULL,
                                  .plan_time_limit_s = a->plan_time_limit};
    const char *mode = a->allocator ? a->allocator : ctx->options.allocator; /* CLRUN_ALLOCATOR */
    if (strcmp(mode, "naive") == 0)
        options.mode = CLRUN_EXEC_NAIVE;
    else if (strcmp(mode, "planned") == 0)
        options.mode = CLRUN_EXEC_PLANNED;
    const clrun_tensor_id *ids;
    int32_t inputs_n = clrun_graph_inputs(g, &ids);
    clrun_buffer *inputs = calloc((size_t)inputs_n + 1, sizeof *inputs);
    clrun_exec *exec = NULL;
    clrun_status status = inputs ? clrun_exec_create(ctx, g, &options, &exec) : CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    for (int i = -1; status == CLRUN_OK && i < a->repeat; i++) { /* i = -1: warm-up */
        status = prepare_inputs(ctx, g, a->seed, inputs, i == -1);
        if (status == CLRUN_OK)
            status = clrun_exec_run(exec, inputs, inputs_n);
        if (status == CLRUN_OK && i >= 0) {
            clrun_exec_stats_get(exec, &r->stats);
            r->times[i] = r->stats.wall_ms;
        }
    }
    if (status == CLRUN_OK)
        status = checksum_outputs(exec, g, r->checksums);
    int rc = 0;
    if (status != CLRUN_OK) {
        fprintf(stderr, "clrun run: %s: %s\n", a->path, clrun_last_error(ctx));
        rc = 1;
    } else if (a->trace) {
        rc = write_trace(a->trace, exec);
    }
    clrun_exec_destroy(exec);
    if (inputs)
        free_kept_inputs(ctx, g, inputs);
    free(inputs);
    return rc;
}

int clrun_cli_run(int argc, char **argv)
{
    if (clrun_cli_wants_help(argc, argv)) {
        print_help();
        return 0;
    }
    run_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc;
    char err[2048];
    clrun_graph *g = NULL;
    clrun_status status = clrun_graph_load(a.path, &g, err, sizeof err);
    if (status != CLRUN_OK) {
        fprintf(stderr, "%s\n", err);
        return status == CLRUN_ERROR_IO ? 1 : 2;
    }
    clrun_context_options copt;
    clrun_context_options_init(&copt);
    if (a.allocator && clrun_strategy_find(a.allocator))
        copt.allocator = a.allocator;
    clrun_context *ctx = NULL;
    if (clrun_context_create(&copt, &ctx) != CLRUN_OK) {
        fprintf(stderr, "clrun run: %s\n", clrun_last_error(NULL));
        clrun_graph_destroy(g);
        return 1;
    }
    const clrun_tensor_id *ids;
    int32_t outputs_n = clrun_graph_outputs(g, &ids);
    run_result r = {.times = calloc((size_t)a.repeat, sizeof(double)),
                    .checksums = calloc((size_t)outputs_n + 1, sizeof *r.checksums)};
    if (r.times == NULL || r.checksums == NULL) {
        fprintf(stderr, "clrun run: out of host memory\n");
        rc = 1;
    } else {
        rc = run_graph(&a, ctx, g, &r);
    }
    if (rc == 0) {
        qsort(r.times, (size_t)a.repeat, sizeof *r.times, compare_doubles);
        double median = a.repeat % 2 ? r.times[a.repeat / 2]
                                     : (r.times[a.repeat / 2 - 1] + r.times[a.repeat / 2]) / 2;
        if (a.json)
            print_json(&a, ctx, g, &r, median);
        else
            print_report(&a, ctx, g, &r, median);
    }
    free(r.times);
    free(r.checksums);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
    return rc;
}
