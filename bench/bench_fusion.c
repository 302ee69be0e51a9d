/* Fusion against no fusion, in the same process, on the same device and inputs: for each graph
 * two executors (fusion on, CLRUN_FUSION=0's off) in one context, a warm-up run of each, then
 * `repeat` rounds that run both, in alternating order, so that a machine's load falls on both
 * alike. Prints per graph the groups and kernels, the median wall time of a run (submit to
 * finish) of each and their ratio fused / unfused, with the spread of the per-round ratios,
 * the best time of each and their ratio (on a shared machine, the runs least disturbed), the
 * median CPU time the process spent per run (every thread, a CPU device's included: what other
 * load on a shared machine inflates least) and its ratio, and whether every output has the same bits both ways.
 * Then what fusion can save, from one profiled unfused run: the device time of its elementwise
 * and layout kernels (what fusion removes) against the rest (products, norms, softmax: what it
 * leaves), and the ratio of the rest to the whole: where fusion removed every one of those
 * kernels for free, the fused run's kernels would take that fraction of the time (fusion also
 * saves each launch's gap on the host, which this does not count). Not a test: nothing is
 * asserted.
 *
 * Usage: bench_fusion [--repeat N] [--dim NAME=SIZE]... [--every-epilogue]
 *                     (FILE.graph | FILE.onnx | MODEL[:BATCH[:SEQ]])...
 *   --every-epilogue takes every epilogue, also those the device's cost rule leaves to their own
 *   kernel (lib/fuse/epilogue.c), to measure that rule.
 *   MODEL is one of examples/models.h's: resnet50, mobilenetv2, bert-base, gpt2 (written with
 *   composite ops: layernorm, gelu_erf, matmul with bias). FILE.onnx is a model as exporters
 *   write it (bench_onnx_load --out writes transformers of BERT's and GPT-2's shapes): each --dim
 *   binds a symbolic dimension, and one left unbound is an error. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>

#include <clrun/clrun.h>

#include "../examples/models.h"
#include "fuse/fuse.h"
#include "fuse/group.h"
#include "graph/elementwise.h"
#include "../tests/rng.h"
#include "timing.h"

#define MAX_DIMS 16
static clrun_onnx_dim dims[MAX_DIMS];
static int dim_count;

static bool ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), m = strlen(tail);
    return n > m && strcmp(s + n - m, tail) == 0;
}

static clrun_graph *load_onnx(const char *path)
{
    char err[2048];
    clrun_onnx_options o;
    clrun_onnx_options_init(&o);
    o.dims = dims;
    o.dim_count = dim_count;
    o.err = err;
    o.errlen = sizeof err;
    clrun_graph *g = NULL;
    if (clrun_graph_load_onnx(path, &o, &g) != CLRUN_OK)
        fprintf(stderr, "bench_fusion: %s\n", err);
    return g;
}

static clrun_graph *load(const char *what)
{
    char err[512];
    clrun_graph *g = NULL;
    if (ends_with(what, ".onnx"))
        return load_onnx(what);
    if (ends_with(what, ".graph")) {
        if (clrun_graph_load(what, &g, err, sizeof err) != CLRUN_OK)
            fprintf(stderr, "bench_fusion: %s\n", err);
        return g;
    }
    char model[64];
    int batch = 1, seq = 0;
    if (sscanf(what, "%63[^:]:%d:%d", model, &batch, &seq) < 1)
        return NULL;
    gen_model_options options = {.batch = batch, .seq = seq};
    if (gen_model(model, &options, &g, err, sizeof err) != CLRUN_OK)
        fprintf(stderr, "bench_fusion: %s: %s\n", what, err);
    return g;
}

/* Seeded inputs, the same for both executors. */
static int make_inputs(clrun_context *ctx, const clrun_graph *g, clrun_buffer *inputs)
{
    const clrun_tensor_id *ids;
    int32_t n = clrun_graph_inputs(g, &ids);
    for (int32_t i = 0; i < n; i++) {
        const clrun_tensor_type *t = clrun_graph_tensor_type(g, ids[i]);
        uint64_t bytes = clrun_tensor_bytes(t);
        unsigned char *host = malloc((size_t)bytes);
        if (host == NULL) {
            for (int32_t k = 0; k < i; k++)
                clrun_free(ctx, &inputs[k]);
            return -1;
        }
        uint64_t state = 1 + (uint64_t)i;
        for (uint64_t k = 0; k + 4 <= bytes; k += 4) {
            float v = (float)((int)(rng_next(&state) % 2001) - 1000) / 1000.0f;
            if (t->dtype == CLRUN_F32)
                memcpy(host + k, &v, 4);
            else
                memset(host + k, 0, 4);
        }
        bool made = clrun_alloc(ctx, bytes, &inputs[i]) == CLRUN_OK;
        if (!made || clrun_buffer_write(ctx, &inputs[i], host) != CLRUN_OK) {
            free(host);
            for (int32_t k = 0; k < i + (made ? 1 : 0); k++)
                clrun_free(ctx, &inputs[k]);
            return -1;
        }
        free(host);
    }
    return (int)n;
}

static double cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* Runs exec once over fresh inputs (a donated input is consumed by the run, so every run gets
 * new ones, written outside the timed run); its wall time in ms, or a negative number, and the
 * CPU time this process spent in the run (every thread: a CPU device's too) in *cpu. */
static double run_once(clrun_context *ctx, clrun_exec *exec, const clrun_graph *g, double *cpu)
{
    clrun_buffer inputs[64];
    int n = make_inputs(ctx, g, inputs);
    if (n < 0) {
        fprintf(stderr, "bench_fusion: inputs: %s\n", clrun_last_error(ctx));
        return -1;
    }
    double ms = -1, cpu0 = cpu_ms();
    clrun_status status = clrun_exec_run(exec, inputs, n);
    *cpu = cpu_ms() - cpu0;
    if (status != CLRUN_OK)
        fprintf(stderr, "bench_fusion: run: %s\n", clrun_last_error(ctx));
    else {
        clrun_exec_stats s;
        clrun_exec_stats_get(exec, &s);
        ms = s.wall_ms;
    }
    const clrun_tensor_id *ids;
    clrun_graph_inputs(g, &ids);
    for (int i = 0; i < n; i++) /* a consumed donated one is the executor's now */
        if (ms < 0 || !clrun_graph_tensor_donated(g, ids[i]))
            clrun_free(ctx, &inputs[i]);
    return ms;
}

/* True when every output of a and b has the same bytes. */
static bool same_outputs(clrun_exec *a, clrun_exec *b, const clrun_graph *g)
{
    const clrun_tensor_id *ids;
    int32_t n = clrun_graph_outputs(g, &ids);
    bool same = true;
    for (int32_t i = 0; same && i < n; i++) {
        uint64_t bytes = clrun_tensor_bytes(clrun_graph_tensor_type(g, ids[i]));
        unsigned char *x = malloc((size_t)bytes), *y = malloc((size_t)bytes);
        same = x && y && clrun_exec_read_output(a, i, x, bytes) == CLRUN_OK &&
               clrun_exec_read_output(b, i, y, bytes) == CLRUN_OK && memcmp(x, y, (size_t)bytes) == 0;
        free(x);
        free(y);
    }
    return same;
}

/* Whether fusion can take a node of this op out of the schedule: elementwise (into a group or an
 * epilogue) or a move of elements (into a group's reads, or a view). */
static bool fusible(const char *op_name)
{
    const clrun__op *op = clrun__op_find(op_name);
    return op && (clrun__ew_def_of(op) || clrun__fuse_is_layout(op));
}

/* One profiled unfused run (after a warm-up): the device time of the kernels fusion can remove
 * and of the others. */
static int fusible_share(clrun_context *ctx, const clrun_graph *g, double *fusible_ms, double *rest_ms)
{
    clrun_exec_options eo;
    clrun_exec_options_init(&eo);
    eo.fusion = -1;
    eo.profile = true;
    clrun_exec *exec = NULL;
    double cpu;
    if (clrun_exec_create(ctx, g, &eo, &exec) != CLRUN_OK) {
        fprintf(stderr, "bench_fusion: the profiled unfused executor: %s\n", clrun_last_error(ctx));
        return 1;
    }
    if (run_once(ctx, exec, g, &cpu) < 0 || run_once(ctx, exec, g, &cpu) < 0) { /* it says why */
        clrun_exec_destroy(exec);
        return 1;
    }
    const clrun_exec_span *spans;
    int32_t n = clrun_exec_profile(exec, &spans);
    *fusible_ms = *rest_ms = 0;
    for (int32_t i = 0; i < n; i++) {
        double ms = (double)(spans[i].end_ns - spans[i].start_ns) * 1e-6;
        *(fusible(spans[i].op) ? fusible_ms : rest_ms) += ms;
    }
    clrun_exec_destroy(exec);
    return n > 0 ? 0 : 1;
}

static int bench(clrun_context *ctx, const char *what, int repeat)
{
    clrun_graph *g = load(what);
    if (g == NULL)
        return 1;
    clrun_exec *exec[2] = {NULL, NULL}; /* fused, unfused */
    int n = clrun_graph_inputs(g, NULL) <= 64 ? 0 : -1;
    for (int k = 0; n >= 0 && k < 2; k++) {
        clrun_exec_options eo;
        clrun_exec_options_init(&eo);
        eo.fusion = k == 0 ? 1 : -1;
        if (clrun_exec_create(ctx, g, &eo, &exec[k]) != CLRUN_OK) {
            fprintf(stderr, "bench_fusion: %s: %s\n", what, clrun_last_error(ctx));
            n = -1;
        }
    }
    double *t[2] = {calloc((size_t)repeat, sizeof(double)), calloc((size_t)repeat, sizeof(double))};
    double *c[2] = {calloc((size_t)repeat, sizeof(double)), calloc((size_t)repeat, sizeof(double))};
    double *ratio = calloc((size_t)repeat, sizeof(double));
    int rc = n < 0 || !t[0] || !t[1] || !c[0] || !c[1] || !ratio;
    for (int k = 0; !rc && k < 2; k++) /* warm-up: kernels compiled at first launch */
        rc = run_once(ctx, exec[k], g, &c[k][0]) < 0;
    bool same = !rc && same_outputs(exec[0], exec[1], g);
    for (int r = 0; !rc && r < repeat; r++) {
        for (int j = 0; !rc && j < 2; j++) {
            int k = (r + j) % 2; /* alternate which runs first */
            t[k][r] = run_once(ctx, exec[k], g, &c[k][r]);
            rc = t[k][r] < 0;
        }
        ratio[r] = rc ? 0 : t[0][r] / t[1][r];
    }
    if (!rc) {
        clrun_exec_stats on, off;
        clrun_exec_stats_get(exec[0], &on);
        clrun_exec_stats_get(exec[1], &off);
        double lo = ratio[0], hi = ratio[0];
        for (int r = 1; r < repeat; r++) {
            lo = ratio[r] < lo ? ratio[r] : lo;
            hi = ratio[r] > hi ? ratio[r] : hi;
        }
        double best[2] = {t[0][0], t[1][0]};
        for (int k = 0; k < 2; k++)
            for (int r = 1; r < repeat; r++)
                best[k] = t[k][r] < best[k] ? t[k][r] : best[k];
        double fused = bench_median(t[0], repeat), unfused = bench_median(t[1], repeat);
        double cpu[2] = {bench_median(c[0], repeat), bench_median(c[1], repeat)};
        printf("%-34s fused: %d groups, %d nodes -> %d kernels\n", what, on.fused_groups, on.graph_nodes, on.kernels);
        printf("%-34s   time %.3f ms fused, %.3f ms unfused (medians of %d): ratio %.3f (per-round %.3f..%.3f, median %.3f)\n",
               "", fused, unfused, repeat, fused / unfused, lo, hi, bench_median(ratio, repeat));
        printf("%-34s   best %.3f ms fused, %.3f ms unfused: ratio %.3f (the runs least disturbed by other load)\n",
               "", best[0], best[1], best[0] / best[1]);
        printf("%-34s   CPU time %.3f ms fused, %.3f ms unfused (medians, every thread): ratio %.3f\n", "",
               cpu[0], cpu[1], cpu[0] / cpu[1]);
        printf("%-34s   peak %llu vs %llu bytes, naive %llu vs %llu bytes, outputs %s\n", "",
               (unsigned long long)on.peak_bytes, (unsigned long long)off.peak_bytes,
               (unsigned long long)on.naive_bytes, (unsigned long long)off.naive_bytes,
               same ? "bit-identical" : "DIFFER");
        double fusible_ms, rest_ms;
        if (fusible_share(ctx, g, &fusible_ms, &rest_ms) == 0)
            printf("%-34s   unfused kernels' device time %.3f ms: elementwise and layout %.3f ms (%.1f%%), the "
                   "rest %.3f ms (ratio %.3f without the first; launch gaps aside)\n",
                   "", fusible_ms + rest_ms, fusible_ms, 100.0 * fusible_ms / (fusible_ms + rest_ms), rest_ms,
                   rest_ms / (fusible_ms + rest_ms));
        fflush(stdout);
    }
    for (int k = 0; k < 2; k++)
        clrun_exec_destroy(exec[k]);
    for (int k = 0; k < 2; k++) {
        free(t[k]);
        free(c[k]);
    }
    free(ratio);
    clrun_graph_destroy(g);
    return rc || !same;
}

/* Reads the --dim NAME=SIZE options from argv[first]; returns the index after them, or -1. */
static int dim_args(int argc, char **argv, int first)
{
    while (first + 1 < argc && strcmp(argv[first], "--dim") == 0) {
        char *arg = argv[first + 1], *eq = strchr(arg, '=');
        long long v = eq ? atoll(eq + 1) : 0;
        if (eq == NULL || eq == arg || v < 1 || dim_count == MAX_DIMS)
            return -1;
        *eq = '\0';
        dims[dim_count++] = (clrun_onnx_dim){arg, v};
        first += 2;
    }
    return first;
}

int main(int argc, char **argv)
{
    int repeat = 10, first = dim_args(argc, argv, bench_repeat_arg(argc, argv, &repeat));
    if (first > 0 && first < argc && strcmp(argv[first], "--every-epilogue") == 0) {
        clrun__fuse_every_epilogue = true;
        first++;
    }
    if (first < 0 || first >= argc || repeat < 1) {
        fprintf(stderr, "usage: bench_fusion [--repeat N] [--dim NAME=SIZE]... [--every-epilogue]\n"
                        "                    (FILE.graph | FILE.onnx | MODEL[:BATCH[:SEQ]])...\n");
        return 2;
    }
    clrun_context *ctx = NULL;
    if (clrun_context_create(NULL, &ctx) != CLRUN_OK) {
        fprintf(stderr, "bench_fusion: %s\n", clrun_last_error(NULL));
        return 1;
    }
    printf("device: %s; wall time per run, fused and unfused executors alternating, %d rounds%s\n",
           clrun_context_device(ctx)->name, repeat, clrun__fuse_every_epilogue ? ", every epilogue taken" : "");
    int rc = 0;
    for (int i = first; i < argc; i++)
        rc |= bench(ctx, argv[i], repeat);
    clrun_context_destroy(ctx);
    return rc;
}
