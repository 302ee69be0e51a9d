/* clrun run: loads a .graph, runs it under one allocator mode and reports time, memory and a
 * checksum per output, for a person or (--json) for a program; --trace writes a Chrome/Perfetto
 * trace with one span per kernel and a counter of bytes in use. A client of the public API. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <xxhash.h>

#include "cli.h"
#include "progress.h"
#include "run.h"

static void print_help(void)
{
    printf("usage: clrun run (FILE.graph | MODEL.onnx) [--allocator NAME] [--repeat N]\n"
           "                 [--json] [--trace OUT.json] [--seed S] [--time-limit S]\n"
           "                 [--dim NAME=V] [--shape IN=AxB] [--input NAME=FILE] [--const NAME=V]\n"
           "                 [--output-dir DIR] [--weights f16|bf16|int8] [--memory-budget SIZE]\n"
           "                 [--devices I,J,... [--device-limit SIZE] [--micro-batches M]\n"
           "                  [--data-parallel]]\n\n"
           "Runs the graph N times (default 5, after one warm-up run) on the device clrun chooses\n"
           "(CLRUN_DEVICE) and reports the median time per run, peak bytes in use, bytes reserved\n"
           "from the driver, the lower bound, the naive total and the saving, donations, and an\n"
           "XXH64 checksum of each output. Inputs are filled from --seed (default 1), so the\n"
           "checksums of a graph are the same in every allocator mode, and with fusion on or off\n"
           "(CLRUN_FUSION=0 runs every node as its own kernel; the report lists each fused kernel with\n"
           "its ops, its node count and the tensor it writes). An --input file's shape binds the\n"
           "model's symbolic dimensions it covers.\n\n"
           "  --allocator  a pool strategy (%s), naive (one buffer per tensor) or\n"
           "               planned (one arena from the static planner); default CLRUN_ALLOCATOR\n"
           "  --json       one JSON object instead of the report (wall_ms: the median, with\n"
           "               wall_ms_min and wall_ms_max)\n"
           "  --trace F    Chrome/Perfetto trace of the last run (open in ui.perfetto.dev)\n"
           "  --strict-donation  a donated input that no output can take is an error (exit 1)\n"
           "               before any run, not a line of the report\n"
           "  --time-limit planner budget in seconds for --allocator planned (default 1; 0 runs\n"
           "               the constructions only, as in clrun plan)\n"
           "  --weights W  store the weights of matmul and the convolutions as f16, bf16 or int8\n"
           "               (one scale per output channel), widened to f32 at each run; the report\n"
           "               gives their bytes before and after and the largest error of the\n"
           "               outputs against the f32 run (made first, with the same inputs)\n"
           "  --memory-budget SIZE  what the executor may hold (its weights and its arena, in\n"
           "               planned mode unless --allocator names another): tensors alive across\n"
           "               the peak are recomputed after it until it fits (the same outputs, bit\n"
           "               for bit); a budget nothing meets fails with the least found\n"
           "  --micro-batches M  with --devices: stream M micro-batches (each the graph's own\n"
           "               batch, inputs of seed S + j, or every one the --input files) through\n"
           "               the stages, overlapping them; reports time per micro-batch, each\n"
           "               stage's busy time and the bubble fraction; checksums and --output-dir\n"
           "               are micro-batch 0's\n"
           "  --devices I,J,...  a pipeline over these devices (one stage each, cut where the\n"
           "               fewest bytes cross, each within --device-limit); with --data-parallel\n"
           "               the batch is split over them instead: each device runs the whole model\n"
           "               on its share of the rows (the first dimension of the first input: the\n"
           "               global batch, as an --input file binds an ONNX model's open batch;\n"
           "               B / N rows each, one more on the first B %% N devices; a .graph file's\n"
           "               batch is each device's share, the global batch N times it, share k\n"
           "               seeded S + k); outputs and checksums at the global batch, the bits of\n"
           "               one device; --device-limit is each device's pool limit\n",
           clrun_strategy_names());
    clrun_cli_io_help(true);
    clrun_cli_const_help();
}

static int parse_args(int argc, char **argv, run_args *a)
{
    *a = (run_args){.repeat = 5, .seed = 1, .plan_time_limit = -1, .weights = CLRUN_F32};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        bool has_value = i + 1 < argc;
        int taken;
        if (strcmp(arg, "--json") == 0) {
            a->json = true;
        } else if (strcmp(arg, "--strict-donation") == 0) {
            a->strict_donation = true;
        } else if (strcmp(arg, "--allocator") == 0 && has_value) {
            a->allocator = argv[++i];
        } else if (strcmp(arg, "--weights") == 0 && has_value) {
            const char *w = argv[++i];
            if (strcmp(w, "f16") == 0)
                a->weights = CLRUN_F16;
            else if (strcmp(w, "bf16") == 0)
                a->weights = CLRUN_BF16;
            else if (strcmp(w, "int8") == 0 || strcmp(w, "i8") == 0)
                a->weights = CLRUN_I8;
            else
                return clrun_cli_usage_error("run", "--weights takes f16, bf16 or int8, not '%s'", w);
        } else if (strcmp(arg, "--memory-budget") == 0 && has_value) {
            if (!clrun_parse_size(argv[++i], &a->memory_budget) || a->memory_budget == 0)
                return clrun_cli_usage_error("run", "--memory-budget takes a size > 0 (bytes, or "
                                             "with K, M, G), not '%s'", argv[i]);
        } else if (strcmp(arg, "--devices") == 0 && has_value) {
            a->device_count = clrun_cli_parse_devices(argv[++i], a->devices, CLRUN_RUN_MAX_DEVICES);
            if (a->device_count < 1)
                return clrun_cli_usage_error("run", "--devices takes device indices separated by "
                                             "commas (0,1), at most %d, not '%s'",
                                             CLRUN_RUN_MAX_DEVICES, argv[i]);
        } else if (strcmp(arg, "--data-parallel") == 0) {
            a->data_parallel = true;
        } else if (strcmp(arg, "--micro-batches") == 0 && has_value) {
            char *end;
            long n = strtol(argv[++i], &end, 10);
            if (end == argv[i] || *end || n < 1 || n > 4096)
                return clrun_cli_usage_error("run", "--micro-batches takes a count from 1 to 4096, "
                                             "not '%s'", argv[i]);
            a->micro_batches = (int)n;
        } else if (strcmp(arg, "--device-limit") == 0 && has_value) {
            if (!clrun_parse_size(argv[++i], &a->device_limit) || a->device_limit == 0)
                return clrun_cli_usage_error("run", "--device-limit takes a size > 0 (bytes, or "
                                             "with K, M, G), not '%s'", argv[i]);
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
            if (!clrun_cli_parse_u64(argv[++i], &seed))
                return clrun_cli_usage_error("run", "--seed takes an integer from 0 to 2^64 - 1, not '%s'",
                                             argv[i]);
            a->seed = seed;
        } else if (strcmp(arg, "--time-limit") == 0 && has_value) {
            char *end;
            a->plan_time_limit = strtod(argv[++i], &end);
            if (end == argv[i] || *end || !(a->plan_time_limit >= 0) || a->plan_time_limit > 1e9)
                return clrun_cli_usage_error("run", "--time-limit takes seconds >= 0, not '%s'",
                                             argv[i]);
        } else if ((taken = clrun_cli_io_option("run", argc, argv, &i, &a->io, true)) != 0) {
            if (taken == 2)
                return 2;
        } else if ((taken = clrun_cli_const_option("run", argc, argv, &i, &a->consts)) != 0) {
            if (taken < 0)
                return -taken;
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
    if (a->device_limit && a->device_count == 0)
        return clrun_cli_usage_error("run", "--device-limit goes with --devices");
    if (a->micro_batches && a->device_count == 0)
        return clrun_cli_usage_error("run", "--micro-batches goes with --devices");
    if (a->data_parallel && a->device_count == 0)
        return clrun_cli_usage_error("run", "--data-parallel goes with --devices (the devices to "
                                     "split the batch over)");
    if (a->data_parallel && a->micro_batches)
        return clrun_cli_usage_error("run", "--micro-batches streams a pipeline: not with "
                                     "--data-parallel");
    if (a->data_parallel && !clrun_cli_is_onnx(a->path) && (a->io.input_count || a->io.output_dir))
        return clrun_cli_usage_error("run", "--data-parallel with a .graph file (its batch is each "
                                     "device's share) takes no --input or --output-dir: give an "
                                     "ONNX model whose batch is open");
    if (a->device_count && (a->trace || a->weights != CLRUN_F32 || a->strict_donation))
        return clrun_cli_usage_error("run", "--devices does not take --trace, --weights or --strict-donation yet");
    if (a->allocator && !clrun_allocator_valid(a->allocator))
        return clrun_cli_usage_error("run", "unknown allocator '%s': valid names are %s",
                                     a->allocator, clrun_allocator_names());
    return 0;
}

/* Why making an input failed, when the failure is the tool's own (not the library's). */
static char input_error[512];

/* Fills an input with clrun_graph_example_input's values (seeded, uniform in [-1, 1) for
 * floats, [0, 16) for ints, [0, 2) for bools), which programs and the Python binding use to
 * reproduce a run; or with its --input file's. */
static clrun_status make_input(clrun_context *ctx, const clrun_graph *g, int32_t index, uint64_t seed,
                               const clrun_cli_io *io, clrun_buffer *out)
{
    const clrun_tensor_id *ids;
    clrun_graph_inputs(g, &ids);
    const clrun_tensor_type *type = clrun_graph_tensor_type(g, ids[index]);
    if (clrun_tensor_empty(type)) {
        memset(out, 0, sizeof *out); /* an empty input: no memory, 0 bytes */
        return CLRUN_OK;
    }
    uint64_t bytes = clrun_tensor_bytes(type);
    void *host = malloc((size_t)bytes);
    if (host == NULL) {
        char text[32];
        snprintf(input_error, sizeof input_error, "out of host memory for input '%s' (%s)",
                 clrun_graph_tensor_name(g, ids[index]), clrun_format_bytes(bytes, text, sizeof text));
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    const void *given = clrun_cli_io_input(io, index);
    clrun_status status = given ? (memcpy(host, given, (size_t)bytes), CLRUN_OK)
                                : clrun_graph_example_input(g, index, seed, host, bytes);
    if (status != CLRUN_OK)
        snprintf(input_error, sizeof input_error, "input '%s': %s", clrun_graph_tensor_name(g, ids[index]),
                 clrun_last_error(NULL));
    if (status == CLRUN_OK)
        status = clrun_alloc_ex(ctx, bytes, 0, clrun_graph_tensor_name(g, ids[index]), out);
    if (status == CLRUN_OK)
        status = clrun_buffer_write(ctx, out, host);
    free(host);
    return status;
}

/* Inputs for one run; donated ones are consumed by it, so they are made anew each time. */
static clrun_status prepare_inputs(clrun_context *ctx, const clrun_graph *g, uint64_t seed,
                                   const clrun_cli_io *io, clrun_buffer *inputs, bool first)
{
    const clrun_tensor_id *ids;
    int32_t n = clrun_graph_inputs(g, &ids);
    for (int32_t i = 0; i < n; i++) {
        if (!first && !clrun_graph_tensor_donated(g, ids[i]))
            continue;
        clrun_status status = make_input(ctx, g, i, seed, io, &inputs[i]);
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
        if (!clrun_graph_tensor_donated(g, ids[i]) && inputs[i].mem)
            clrun_free(ctx, &inputs[i]);
}

static double seconds_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
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
        void *host = malloc((size_t)bytes + 1); /* + 1: an empty output has 0 bytes */
        if (host == NULL)
            return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        clrun_status status = clrun_exec_read_output(exec, i, host, bytes);
        if (status == CLRUN_OK)
            snprintf(sums[i], 17, "%016llx", (unsigned long long)XXH64(host, (size_t)bytes, 0));
        free(host);
        if (status != CLRUN_OK)
            return status;
    }
    return CLRUN_OK;
}

/* The float outputs of one run of g (the f32 weights), into refs[i] (NULL for the others). */
static clrun_status reference_outputs(run_args *a, clrun_context *ctx, const clrun_graph *g,
                                      float **refs)
{
    const clrun_tensor_id *ids;
    int32_t inputs_n = clrun_graph_inputs(g, &ids);
    clrun_buffer *inputs = calloc((size_t)inputs_n + 1, sizeof *inputs);
    clrun_exec *exec = NULL;
    clrun_status status = inputs ? clrun_exec_create(ctx, g, NULL, &exec) : CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    if (status == CLRUN_OK)
        status = prepare_inputs(ctx, g, a->seed, &a->io, inputs, true);
    if (status == CLRUN_OK)
        status = clrun_exec_run(exec, inputs, inputs_n);
    int32_t outputs_n = clrun_graph_outputs(g, &ids);
    for (int32_t i = 0; status == CLRUN_OK && i < outputs_n; i++) {
        const clrun_tensor_type *type = clrun_graph_tensor_type(g, ids[i]);
        if (type->dtype != CLRUN_F32)
            continue;
        uint64_t bytes = clrun_tensor_bytes(type);
        refs[i] = malloc((size_t)bytes + 1);
        status = refs[i] ? clrun_exec_read_output(exec, i, refs[i], bytes) : CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    clrun_exec_destroy(exec);
    if (inputs)
        free_kept_inputs(ctx, g, inputs); /* donated ones were consumed by the run */
    free(inputs);
    return status;
}

/* The outputs' largest errors against refs (the f32 run's). */
static clrun_status weights_error(clrun_exec *exec, const clrun_graph *g, float *const *refs,
                                  run_result *r)
{
    const clrun_tensor_id *ids;
    int32_t outputs_n = clrun_graph_outputs(g, &ids);
    for (int32_t i = 0; i < outputs_n; i++) {
        if (refs[i] == NULL)
            continue;
        uint64_t bytes = clrun_tensor_bytes(clrun_graph_tensor_type(g, ids[i])), n = bytes / 4;
        float *got = malloc((size_t)bytes + 1);
        clrun_status status = got ? clrun_exec_read_output(exec, i, got, bytes) : CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        double worst = 0, top = 0;
        for (uint64_t k = 0; status == CLRUN_OK && k < n; k++) {
            double e = fabs((double)got[k] - refs[i][k]);
            if (!(e <= worst)) /* NaN counts as the worst */
                worst = e;
            if (fabs(refs[i][k]) > top)
                top = fabs(refs[i][k]);
        }
        free(got);
        if (status != CLRUN_OK)
            return status;
        if (!(worst <= r->weights_abs_error))
            r->weights_abs_error = worst;
        double rel = top > 0 ? worst / top : worst;
        if (!(rel <= r->weights_rel_error))
            r->weights_rel_error = rel;
    }
    return CLRUN_OK;
}

/* Warm-up, then `repeat` timed runs; fills r. */
static int run_graph(run_args *a, clrun_context *ctx, clrun_graph *g, float *const *refs,
                     run_result *r)
{
    clrun_exec_options options;
    clrun_exec_options_init(&options);
    options.profile = a->trace != NULL;
    if (a->plan_time_limit >= 0)
        options.plan_time_limit_s = a->plan_time_limit;
    options.memory_budget = a->memory_budget;
    /* A budget runs in planned mode unless --allocator names another: the context's mode is not
     * enough, as a budget takes planned mode over it. */
    if (a->memory_budget && a->allocator)
        options.mode = strcmp(a->allocator, "naive") == 0     ? CLRUN_EXEC_NAIVE
                       : strcmp(a->allocator, "planned") == 0 ? CLRUN_EXEC_PLANNED
                                                              : CLRUN_EXEC_POOLED;
    const clrun_tensor_id *ids;
    int32_t inputs_n = clrun_graph_inputs(g, &ids);
    clrun_buffer *inputs = calloc((size_t)inputs_n + 1, sizeof *inputs);
    clrun_exec *exec = NULL;
    char what[300];
    snprintf(what, sizeof what, "clrun run %s", a->path);
    clrun_progress *progress = clrun_progress_start(what, !a->json);
    clrun_progress_phase(progress, "compiling kernels, uploading weights, planning");
    clrun_program_stats before, after;
    clrun_program_stats_get(ctx, &before);
    double start = seconds_now();
    clrun_status status = inputs ? clrun_exec_create(ctx, g, &options, &exec) : CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    r->first_prepare = seconds_now() - start;
    clrun_program_stats_get(ctx, &after);
    r->prepare_builds = after.build_seconds - before.build_seconds;
    r->prepare_tune = after.tune_seconds - before.tune_seconds;
    const char *const *unused_names = NULL;
    if (status == CLRUN_OK && a->strict_donation && clrun_exec_unused_donations(exec, &unused_names) > 0) {
        snprintf(input_error, sizeof input_error, "--strict-donation: input '%s' is donated, but no output "
                 "can take its memory (CLRUN_LOG=warn says why)", unused_names[0]);
        status = CLRUN_ERROR_INVALID_ARGUMENT;
    }
    for (int i = -1; status == CLRUN_OK && i < a->repeat; i++) { /* i = -1: warm-up */
        char phase[64];
        if (i < 0)
            snprintf(phase, sizeof phase, "warm-up run");
        else
            snprintf(phase, sizeof phase, "run %d of %d", i + 1, a->repeat);
        clrun_progress_phase(progress, phase);
        status = prepare_inputs(ctx, g, a->seed, &a->io, inputs, i == -1);
        start = seconds_now();
        if (status == CLRUN_OK)
            status = clrun_exec_run(exec, inputs, inputs_n);
        if (i < 0) {
            r->first_run = seconds_now() - start;
            clrun_program_stats_get(ctx, &r->programs);
            r->run_builds = r->programs.build_seconds - after.build_seconds;
            r->run_tune = r->programs.tune_seconds - after.tune_seconds;
        }
        if (status == CLRUN_OK && i >= 0) {
            clrun_exec_stats_get(exec, &r->stats);
            r->times[i] = r->stats.wall_ms;
        }
    }
    if (status == CLRUN_OK)
        status = checksum_outputs(exec, g, r->checksums);
    if (status == CLRUN_OK && refs)
        status = weights_error(exec, g, refs, r);
    const clrun_fused_group *groups = NULL;
    int32_t fused = status == CLRUN_OK ? clrun_exec_fused_groups(exec, &groups) : 0;
    r->fused = calloc((size_t)fused + 1, sizeof *r->fused);
    for (int32_t i = 0; r->fused && i < fused; i++) {
        snprintf(r->fused[i].kernel, sizeof r->fused[i].kernel, "%s", groups[i].name);
        snprintf(r->fused[i].output, sizeof r->fused[i].output, "%s", groups[i].output ? groups[i].output : "");
        r->fused[i].nodes = groups[i].nodes;
    }
    r->fused_count = r->fused ? fused : 0;
    const char *const *unused = NULL;
    int32_t unused_count = status == CLRUN_OK ? clrun_exec_unused_donations(exec, &unused) : 0;
    r->unused = calloc((size_t)unused_count + 1, sizeof *r->unused);
    for (int32_t i = 0; r->unused && i < unused_count; i++)
        snprintf(r->unused[i], sizeof r->unused[i], "%s", unused[i]);
    r->unused_count = r->unused ? unused_count : 0;
    clrun_progress_stop(progress);
    int rc = 0;
    if (status != CLRUN_OK) {
        fprintf(stderr, "clrun run: %s: %s\n", a->path,
                input_error[0] ? input_error : clrun_last_error(ctx));
        rc = 1;
    } else if (a->trace) {
        rc = clrun_run_write_trace(a->trace_file, "run", a->trace, exec, g, ctx);
        a->trace_file = NULL;
    }
    if (rc == 0)
        rc = clrun_cli_io_write_outputs("run", &a->io, exec, g);
    clrun_exec_destroy(exec);
    if (inputs)
        free_kept_inputs(ctx, g, inputs);
    free(inputs);
    return rc;
}

/* --weights: the f32 run's outputs first (*refs), then the weights narrowed in g. */
static int narrow_weights(run_args *a, clrun_context *ctx, clrun_graph *g, run_result *r, float ***refs)
{
    if (a->weights == CLRUN_F32)
        return 0;
    const clrun_tensor_id *ids;
    int32_t outputs_n = clrun_graph_outputs(g, &ids);
    *refs = calloc((size_t)outputs_n + 1, sizeof **refs);
    clrun_status status = *refs ? reference_outputs(a, ctx, g, *refs) : CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    if (status != CLRUN_OK) {
        fprintf(stderr, "clrun run: %s: the f32 run for --weights: %s\n", a->path,
                input_error[0] ? input_error : clrun_last_error(ctx));
        return 1;
    }
    /* weights of fewer than 1024 elements (biases, small layers) are not worth a kernel */
    if (clrun_graph_narrow_weights(g, a->weights, 1024, &r->weights) != CLRUN_OK) {
        fprintf(stderr, "clrun run: %s: --weights: %s\n", a->path, clrun_graph_last_error(g));
        return 1;
    }
    return 0;
}

int clrun_cli_run(int argc, char **argv)
{
    if (clrun_cli_wants_help(argc, argv)) {
        print_help();
        return 0;
    }
    run_args a;
    int rc = parse_args(argc, argv, &a);
    /* A bad --output-dir fails before the work, not after it. */
    if (rc == 0)
        rc = clrun_cli_prepare_output_dir("run", a.io.output_dir);
    clrun_graph *g = NULL;
    double start = seconds_now();
    if (rc == 0)
        rc = clrun_cli_load_bound("run", a.path, &a.io, &a.consts, &g);
    double loaded = seconds_now() - start;
    if (!a.data_parallel) /* --data-parallel loads the model again at each share */
        clrun_cli_consts_free(&a.consts);
    if (rc) {
        clrun_cli_consts_free(&a.consts);
        return rc;
    }
    if ((rc = clrun_cli_check_output_files("run", &a.io, g)) != 0 ||
        (rc = clrun_cli_io_bind("run", &a.io, g)) != 0) {
        clrun_cli_consts_free(&a.consts);
        clrun_cli_io_free(&a.io);
        clrun_graph_destroy(g);
        return rc;
    }
    if (a.data_parallel) {
        rc = clrun_run_data_parallel(&a, g);
        clrun_cli_consts_free(&a.consts);
        clrun_cli_io_free(&a.io);
        clrun_graph_destroy(g);
        return rc;
    }
    if (a.device_count) {
        rc = clrun_run_pipeline(&a, g);
        clrun_cli_io_free(&a.io);
        clrun_graph_destroy(g);
        return rc;
    }
    if (a.trace && (a.trace_file = clrun_run_open_trace("run", a.trace)) == NULL) {
        clrun_graph_destroy(g);
        clrun_cli_io_free(&a.io);
        return 1;
    }
    clrun_context_options copt;
    clrun_context_options_init(&copt);
    copt.allocator = a.allocator;
    clrun_context *ctx = NULL;
    start = seconds_now();
    if (clrun_context_create(&copt, &ctx) != CLRUN_OK) {
        fprintf(stderr, "clrun run: %s\n", clrun_last_error(NULL));
        if (a.trace_file)
            fclose(a.trace_file);
        clrun_graph_destroy(g);
        clrun_cli_io_free(&a.io);
        return 1;
    }
    const clrun_tensor_id *ids;
    int32_t outputs_n = clrun_graph_outputs(g, &ids);
    float **refs = NULL;
    run_result r = {.times = calloc((size_t)a.repeat, sizeof(double)),
                    .checksums = calloc((size_t)outputs_n + 1, sizeof *r.checksums),
                    .first_load = loaded, .first_context = seconds_now() - start};
    if (r.times == NULL || r.checksums == NULL) {
        fprintf(stderr, "clrun run: out of host memory\n");
        rc = 1;
    } else {
        rc = narrow_weights(&a, ctx, g, &r, &refs);
        if (rc == 0)
            rc = run_graph(&a, ctx, g, refs, &r);
    }
    if (rc == 0) {
        qsort(r.times, (size_t)a.repeat, sizeof *r.times, compare_doubles);
        r.median = a.repeat % 2 ? r.times[a.repeat / 2]
                                : (r.times[a.repeat / 2 - 1] + r.times[a.repeat / 2]) / 2;
        if (a.json)
            clrun_run_print_json(&a, ctx, g, &r);
        else
            clrun_run_print_report(&a, ctx, g, &r);
    }
    for (int32_t i = 0; refs && i < outputs_n; i++)
        free(refs[i]);
    free(refs);
    free(r.times);
    free(r.checksums);
    free(r.fused);
    free(r.unused);
    if (a.trace_file) /* the run failed before the trace was written */
        fclose(a.trace_file);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
    clrun_cli_io_free(&a.io);
    return rc;
}
