/* Executor benchmark (not a test). For each graph given on the command line, in one run:
 *  (a) the executor against a hand-written loop of the same kernels enqueued over buffers
 *      preallocated once (one per tensor): the executor's overhead ratio;
 *  (b) every allocator mode against naive (one clCreateBuffer per tensor per run): time ratio
 *      and peak-bytes ratio, and peak against the lower bound.
 * Times are medians of --repeat runs after a warm-up; ratios are what to read, since the
 * machines are shared and noisy.
 *
 *   bench/bench_exec [--repeat N] FILE.graph...
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <clrun/clrun.h>

#include "device/cl.h"
#include "device/context.h"
#include "graph/graph.h"
#include "ops/ops.h"
#include "exec/schedule.h"
#include "../tests/node_memory.h"

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, compare_doubles);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void die(const char *what, clrun_context *ctx)
{
    fprintf(stderr, "bench_exec: %s: %s\n", what, clrun_last_error(ctx));
    exit(1);
}

/* Fills every input with seeded values (same as clrun run's inputs). */
static void make_inputs(clrun_context *ctx, const clrun_graph *g, clrun_buffer *inputs)
{
    for (int32_t i = 0; i < g->input_count; i++) {
        clrun__tensor t = g->tensors[g->inputs[i]];
        t.data = NULL;
        t.fill = CLRUN_FILL_UNIFORM;
        t.fill_a = t.type.dtype == CLRUN_I32 ? 0 : -1;
        t.fill_b = t.type.dtype == CLRUN_I32 ? 16 : 1;
        t.seed = 1000003u + (uint64_t)i;
        uint64_t bytes = clrun_tensor_bytes(&t.type);
        void *host = malloc((size_t)bytes);
        clrun__constant_values(&t, host);
        if (clrun_alloc(ctx, bytes, &inputs[i]) != CLRUN_OK || clrun_buffer_write(ctx, &inputs[i], host) != CLRUN_OK)
            die("input", ctx);
        free(host);
    }
}

/* (a) The same kernels, enqueued in schedule order over one preallocated buffer per tensor. */
static double raw_loop_ms(clrun_context *ctx, const clrun_graph *g, int repeat)
{
    char err[256];
    clrun__schedule s;
    if (clrun__schedule_build(g, false, &s, err, sizeof err) != CLRUN_OK) {
        fprintf(stderr, "bench_exec: %s\n", err);
        exit(1);
    }
    cl_mem *mem = calloc((size_t)g->tensor_count, sizeof *mem);
    clrun_tensor_type *types = calloc(64, sizeof *types);
    clrun__op_call *calls = calloc((size_t)g->node_count, sizeof *calls);
    clrun_tensor_type **type_store = calloc((size_t)g->node_count, sizeof *type_store);
    void **states = calloc((size_t)g->node_count, sizeof *states);
    node_memory *memory = calloc((size_t)g->node_count + 1, sizeof *memory);
    free(types);
    for (int32_t t = 0; t < g->tensor_count; t++) {
        cl_int e;
        mem[t] = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE, (size_t)clrun_tensor_bytes(&g->tensors[t].type), NULL, &e);
        if (mem[t] == NULL)
            die("raw buffer", ctx);
        if (g->tensors[t].kind != CLRUN__TENSOR_INTERMEDIATE) {
            void *host = malloc((size_t)clrun_tensor_bytes(&g->tensors[t].type));
            clrun__tensor copy = g->tensors[t];
            if (copy.kind == CLRUN__TENSOR_INPUT)
                copy.fill = CLRUN_FILL_UNIFORM, copy.fill_a = -1, copy.fill_b = 1, copy.data = NULL;
            clrun__constant_values(&copy, host);
            clEnqueueWriteBuffer(ctx->queue, mem[t], CL_TRUE, 0, (size_t)clrun_tensor_bytes(&copy.type), host, 0,
                                 NULL, NULL);
            free(host);
        }
    }
    for (int32_t i = 0; i < g->node_count; i++) {
        const clrun__node *node = &g->nodes[i];
        type_store[i] = calloc((size_t)(node->input_count + node->output_count), sizeof **type_store);
        clrun__node_call(g, node, type_store[i], &calls[i]);
        const clrun__op_kernels *kernels = clrun__op_kernels_find(node->op);
        if (kernels->prepare(ctx, node->op, &calls[i], &states[i]) != CLRUN_OK)
            die("prepare", ctx);
        cl_mem in[64], out[16];
        for (int k = 0; k < node->input_count && k < 64; k++)
            in[k] = mem[node->inputs[k]];
        for (int o = 0; o < node->output_count && o < 16; o++)
            out[o] = mem[node->outputs[o]];
        /* Weights packed once and scratch of its own per node, made once like the buffers. */
        if (node_memory_make(ctx, kernels, states[i], &calls[i], in, out, &memory[i]) != CL_SUCCESS)
            die("pack or scratch", ctx);
    }
    double *times = calloc((size_t)repeat + 1, sizeof *times);
    for (int r = -1; r < repeat; r++) {
        double start = now_ms();
        for (int32_t step = 0; step < s.steps; step++) {
            int32_t n = s.order[step];
            const clrun__node *node = &g->nodes[n];
            cl_mem in[64];
            for (int k = 0; k < node->input_count; k++)
                in[k] = mem[node->inputs[k]];
            const cl_mem *outs = node_memory_outputs(&memory[n]);
            if (clrun__op_kernels_find(node->op)->enqueue(ctx, states[n], &calls[n], in, outs, 0, NULL,
                                                        NULL) != CLRUN_OK)
                die("enqueue", ctx);
        }
        clFinish(ctx->queue);
        if (r >= 0)
            times[r] = now_ms() - start;
    }
    double ms = median(times, repeat);
    for (int32_t i = 0; i < g->node_count; i++) {
        clrun__op_kernels_find(g->nodes[i].op)->release(states[i]);
        node_memory_free(ctx, &memory[i]);
        free(type_store[i]);
    }
    for (int32_t t = 0; t < g->tensor_count; t++)
        clReleaseMemObject(mem[t]);
    free(times);
    free(states);
    free(memory);
    free(type_store);
    free(calls);
    free(mem);
    clrun__schedule_free(&s);
    return ms;
}

#define MAX_MODES 16

typedef struct mode_result {
    const char *name;
    double ms;
    clrun_exec_stats stats;
} mode_result;

static mode_result run_mode(const clrun_graph *g, const char *name, clrun_exec_mode mode, const char *allocator,
                            int repeat)
{
    clrun_context_options o;
    clrun_context_options_init(&o);
    o.allocator = allocator;
    clrun_context *ctx = NULL;
    if (clrun_context_create(&o, &ctx) != CLRUN_OK)
        die("context", NULL);
    clrun_exec_options eo;
    clrun_exec_options_init(&eo);
    eo.mode = mode;
    clrun_exec *exec = NULL;
    if (clrun_exec_create(ctx, g, &eo, &exec) != CLRUN_OK)
        die("executor", ctx);
    clrun_buffer *inputs = calloc((size_t)g->input_count + 1, sizeof *inputs);
    double *times = calloc((size_t)repeat + 1, sizeof *times);
    mode_result r = {name, 0, {0}};
    for (int i = -1; i < repeat; i++) {
        make_inputs(ctx, g, inputs); /* donated inputs are consumed: fresh ones every run */
        if (clrun_exec_run(exec, inputs, g->input_count) != CLRUN_OK)
            die("run", ctx);
        clrun_exec_stats_get(exec, &r.stats);
        if (i >= 0)
            times[i] = r.stats.wall_ms;
        for (int32_t k = 0; k < g->input_count; k++)
            if (!g->tensors[g->inputs[k]].donated)
                clrun_free(ctx, &inputs[k]);
    }
    r.ms = median(times, repeat);
    clrun_exec_destroy(exec);
    clrun_context_destroy(ctx);
    free(inputs);
    free(times);
    return r;
}

int main(int argc, char **argv)
{
    int repeat = 10, first = 1;
    if (argc > 2 && strcmp(argv[1], "--repeat") == 0) {
        repeat = atoi(argv[2]);
        first = 3;
    }
    if (first >= argc || repeat < 1) {
        fprintf(stderr, "usage: bench_exec [--repeat N] FILE.graph...\n");
        return 2;
    }
    clrun_context *probe = NULL;
    if (clrun_context_create(NULL, &probe) != CLRUN_OK)
        die("context", NULL);
    time_t now = time(NULL);
    printf("# bench_exec: median of %d runs after one warm-up, on %s (%s), %s", repeat,
           clrun_context_device(probe)->name, clrun_context_device(probe)->platform_name, ctime(&now));
    printf("# raw = the graph's kernels, unfused, enqueued over buffers preallocated once; the modes\n"
           "# fuse unless CLRUN_FUSION=0 (set it to compare like with like); ratios < 1 are faster\n");
    for (int f = first; f < argc; f++) {
        char err[2048];
        clrun_graph *g = NULL;
        if (clrun_graph_load(argv[f], &g, err, sizeof err) != CLRUN_OK) {
            fprintf(stderr, "%s\n", err);
            return 2;
        }
        double raw = raw_loop_ms(probe, g, repeat);
        /* naive, every strategy of the registry pooled, planned */
        mode_result modes[MAX_MODES];
        size_t mode_count = 0;
        modes[mode_count++] = run_mode(g, "naive", CLRUN_EXEC_NAIVE, NULL, repeat);
        for (size_t k = 0; k < clrun_strategy_count() && mode_count < MAX_MODES - 1; k++) {
            const char *strategy = clrun_strategy_at(k)->name;
            modes[mode_count++] = run_mode(g, strategy, CLRUN_EXEC_POOLED, strategy, repeat);
        }
        modes[mode_count++] = run_mode(g, "planned", CLRUN_EXEC_PLANNED, NULL, repeat);
        const mode_result *naive = &modes[0];
        printf("\n%s: %d nodes, lower bound %.2f MiB, naive %.2f MiB, raw loop %.3f ms\n", argv[f],
               (int)g->node_count, (double)naive->stats.lower_bound_bytes / 1048576.0,
               (double)naive->stats.naive_bytes / 1048576.0, raw);
        printf("%-8s %10s %8s %8s %12s %10s %10s %12s\n", "mode", "ms/run", "vs raw", "vs naive", "peak MiB",
               "vs naive", "vs bound", "reserved MiB");
        for (size_t m = 0; m < mode_count; m++) {
            const mode_result *r = &modes[m];
            printf("%-8s %10.3f %8.3f %8.3f %12.2f %10.3f %10.3f %12.2f\n", r->name, r->ms, r->ms / raw,
                   r->ms / naive->ms, (double)r->stats.peak_bytes / 1048576.0,
                   (double)r->stats.peak_bytes / (double)naive->stats.peak_bytes,
                   (double)r->stats.peak_bytes / (double)r->stats.lower_bound_bytes,
                   (double)r->stats.reserved_bytes / 1048576.0);
        }
        clrun_graph_destroy(g);
    }
    clrun_context_destroy(probe);
    return 0;
}
