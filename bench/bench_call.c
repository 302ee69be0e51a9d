/* The C side of bench/bench_python.py (not a test): calls a model the way a C program does and
 * reports the median wall time of one call, so the Python binding's overhead is a ratio
 * against it measured in the same run. Public API only, linked against the shared library the
 * binding loads.
 *
 *   bench/bench_call FILE.graph [--calls N] [--inputs host|device] [--mode pooled|planned|naive]
 *
 * One call is what `model(x=...)` does from Python: with host inputs, allocate and upload each
 * input, run, read every output into host memory, free the inputs the model keeps; with device
 * inputs (uploaded once; the graph's donation flags cleared so they can be passed again), run
 * and read the outputs. Inputs are the values `clrun run --seed 1` uses. Prints one JSON line:
 * {"calls": N, "median_us": ..., "min_us": ..., "outside_median_us": ...}, the last the median
 * over calls of the time a call spends outside the executor's own run (the call's time minus
 * clrun_exec_stats.wall_ms), which the kernels' run-to-run noise does not reach. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <clrun/clrun.h>

typedef struct bench {
    clrun_context *ctx;
    clrun_graph *graph;
    clrun_exec *exec;
    int32_t inputs_n, outputs_n;
    void **host_in;    /* per input: its values */
    uint64_t *in_bytes;
    bool *donated;
    clrun_buffer *in;  /* per input: its buffer for the call */
    void **host_out;   /* per output: where it is read to */
    uint64_t *out_bytes;
} bench;

static void die(const char *what, clrun_context *ctx)
{
    fprintf(stderr, "bench_call: %s: %s\n", what, clrun_last_error(ctx));
    exit(1);
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void *checked_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        die("out of host memory", NULL);
    return p;
}

static void prepare(bench *b, const char *path, clrun_exec_mode mode, bool device_inputs)
{
    char err[1024];
    if (clrun_graph_load(path, &b->graph, err, sizeof err) != CLRUN_OK) {
        fprintf(stderr, "bench_call: %s\n", err);
        exit(1);
    }
    const clrun_tensor_id *ins, *outs;
    b->inputs_n = clrun_graph_inputs(b->graph, &ins);
    b->outputs_n = clrun_graph_outputs(b->graph, &outs);
    if (clrun_context_create(NULL, &b->ctx) != CLRUN_OK)
        die("context", NULL);
    b->host_in = checked_malloc((size_t)b->inputs_n * sizeof *b->host_in);
    b->in_bytes = checked_malloc((size_t)b->inputs_n * sizeof *b->in_bytes);
    b->donated = checked_malloc((size_t)b->inputs_n * sizeof *b->donated);
    b->in = checked_malloc(((size_t)b->inputs_n + 1) * sizeof *b->in);
    memset(b->in, 0, ((size_t)b->inputs_n + 1) * sizeof *b->in);
    for (int32_t i = 0; i < b->inputs_n; i++) {
        b->in_bytes[i] = clrun_tensor_bytes(clrun_graph_tensor_type(b->graph, ins[i]));
        b->host_in[i] = checked_malloc((size_t)b->in_bytes[i]);
        if (clrun_graph_example_input(b->graph, i, 1, b->host_in[i], b->in_bytes[i]) != CLRUN_OK)
            die("example input", NULL);
        if (device_inputs)
            clrun_graph_set_donated(b->graph, ins[i], false);
        b->donated[i] = clrun_graph_tensor_donated(b->graph, ins[i]);
        if (device_inputs && (clrun_alloc_ex(b->ctx, b->in_bytes[i], 0, NULL, &b->in[i]) != CLRUN_OK ||
                              clrun_buffer_write(b->ctx, &b->in[i], b->host_in[i]) != CLRUN_OK))
            die("upload", b->ctx);
    }
    b->host_out = checked_malloc((size_t)b->outputs_n * sizeof *b->host_out);
    b->out_bytes = checked_malloc((size_t)b->outputs_n * sizeof *b->out_bytes);
    for (int32_t i = 0; i < b->outputs_n; i++) {
        b->out_bytes[i] = clrun_tensor_bytes(clrun_graph_tensor_type(b->graph, outs[i]));
        b->host_out[i] = checked_malloc((size_t)b->out_bytes[i]);
    }
    clrun_exec_options options = {.mode = mode};
    if (clrun_exec_create(b->ctx, b->graph, &options, &b->exec) != CLRUN_OK)
        die("executor", b->ctx);
}

static void call(bench *b, bool device_inputs)
{
    for (int32_t i = 0; !device_inputs && i < b->inputs_n; i++)
        if (clrun_alloc_ex(b->ctx, b->in_bytes[i], 0, NULL, &b->in[i]) != CLRUN_OK ||
            clrun_buffer_write(b->ctx, &b->in[i], b->host_in[i]) != CLRUN_OK)
            die("upload", b->ctx);
    if (clrun_exec_run(b->exec, b->in, b->inputs_n) != CLRUN_OK)
        die("run", b->ctx);
    for (int32_t i = 0; i < b->outputs_n; i++)
        if (clrun_exec_read_output(b->exec, i, b->host_out[i], b->out_bytes[i]) != CLRUN_OK)
            die("read", b->ctx);
    for (int32_t i = 0; !device_inputs && i < b->inputs_n; i++)
        if (!b->donated[i])
            clrun_free(b->ctx, &b->in[i]);
}

int main(int argc, char **argv)
{
    const char *path = NULL, *mode_name = "pooled";
    int calls = 200;
    bool device_inputs = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--calls") == 0 && i + 1 < argc)
            calls = atoi(argv[++i]);
        else if (strcmp(argv[i], "--inputs") == 0 && i + 1 < argc)
            device_inputs = strcmp(argv[++i], "device") == 0;
        else if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc)
            mode_name = argv[++i];
        else if (argv[i][0] != '-' && path == NULL)
            path = argv[i];
        else {
            fprintf(stderr, "usage: bench_call FILE.graph [--calls N] [--inputs host|device] "
                            "[--mode pooled|planned|naive]\n");
            return 2;
        }
    }
    if (path == NULL || calls < 1)
        return fprintf(stderr, "bench_call: a graph and --calls >= 1, please\n"), 2;
    clrun_exec_mode mode = strcmp(mode_name, "planned") == 0 ? CLRUN_EXEC_PLANNED
                           : strcmp(mode_name, "naive") == 0 ? CLRUN_EXEC_NAIVE
                                                             : CLRUN_EXEC_POOLED;
    bench b = {0};
    prepare(&b, path, mode, device_inputs);
    double *times = checked_malloc((size_t)calls * sizeof *times);
    double *outside = checked_malloc((size_t)calls * sizeof *outside);
    call(&b, device_inputs); /* warm-up */
    for (int i = 0; i < calls; i++) {
        double start = now_us();
        call(&b, device_inputs);
        times[i] = now_us() - start;
        clrun_exec_stats stats;
        clrun_exec_stats_get(b.exec, &stats);
        outside[i] = times[i] - stats.wall_ms * 1e3;
    }
    qsort(times, (size_t)calls, sizeof *times, compare_doubles);
    qsort(outside, (size_t)calls, sizeof *outside, compare_doubles);
    printf("{\"calls\": %d, \"median_us\": %.2f, \"min_us\": %.2f, \"outside_median_us\": %.2f}\n", calls,
           times[calls / 2], times[0], outside[calls / 2]);
    free(times);
    free(outside);
    clrun_exec_destroy(b.exec);
    for (int32_t i = 0; device_inputs && i < b.inputs_n; i++)
        clrun_free(b.ctx, &b.in[i]);
    clrun_context_destroy(b.ctx);
    clrun_graph_destroy(b.graph);
    return 0;
}
