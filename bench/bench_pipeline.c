/* Micro-batches streamed through a pipeline over two devices (issue 28; not a test: nothing is
 * asserted, a mismatch is printed as FAIL, never an exit status). The model: x f32[ROWS, WIDTH]
 * through LAYERS matmuls of WIDTH x WIDTH (a gelu after each but the last), split over two
 * devices each limited to 5/8 of the weights (so that neither holds the model: the split puts
 * half the layers on each). For M = 1, 2, 4, 8 micro-batches (each the graph's batch, inputs of
 * seeds 100 + j), three ways, each timed --repeat times and the median taken:
 *   one device   one executor on device 0 without a limit, the M micro-batches one after another
 *                (inputs written, run, outputs read: what a pipeline stage does too)
 *   sequential   clrun_pipeline_run M times: stage after stage, one device busy at a time
 *   streamed     clrun_pipeline_run_many(M): a thread per stage, stages overlapping
 * Per row: ms per micro-batch of each, the streamed run's ratio to the sequential pipeline and to
 * one device (below 1: faster), the bubble fraction (idle share of stage time within the run's
 * wall span: 1 - busy / (2 x wall)) of the sequential runs (summed over the M runs) and of the
 * streamed run next to the ideal one of two equal stages ((S - 1) / (M + S - 1), S = 2: the
 * fill and drain of the pipeline), each stage's busy ms, the activation bytes moved between the devices per
 * micro-batch and the host bytes the hand-off slots hold; "bits" says whether every streamed
 * micro-batch's output equals one device's, bit for bit.
 * Usage: bench_pipeline [--repeat N] [ROWS WIDTH LAYERS] (default 3; 64 1024 8). POCL_DEVICES
 * defaults to "pthread pthread" (two CPU devices sharing the machine's cores: the overlap can
 * only pay where the cores are not all busy with one stage; on real GPUs each stage has its
 * own). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <clrun/clrun.h>

#include "timing.h"

static int rows = 64, width = 1024, layers = 8;

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void die(const char *what)
{
    fprintf(stderr, "bench_pipeline: %s: %s\n", what, clrun_last_error(NULL));
    exit(1);
}

static clrun_graph *mlp(void)
{
    clrun_graph *g = NULL;
    if (clrun_graph_create("mlp", &g) != CLRUN_OK)
        die("graph");
    clrun_tensor_type xt = {CLRUN_F32, 2, {rows, width}}, wt = {CLRUN_F32, 2, {width, width}};
    clrun_tensor_id h;
    if (clrun_graph_add_input(g, "x", &xt, false, &h) != CLRUN_OK)
        die("graph");
    for (int l = 1; l <= layers; l++) {
        char wn[16], mn[16], an[16];
        snprintf(wn, sizeof wn, "w%d", l);
        snprintf(mn, sizeof mn, l == layers ? "y" : "mm%d", l);
        snprintf(an, sizeof an, "a%d", l);
        clrun_tensor_id w, in[2];
        if (clrun_graph_add_constant(g, wn, &wt, NULL, CLRUN_FILL_NORMAL, 0, 0.03, (uint64_t)l,
                                     &w) != CLRUN_OK)
            die("graph");
        in[0] = h;
        in[1] = w;
        const char *names[] = {mn};
        if (clrun_graph_add_node(g, "matmul", in, 2, names, 1, NULL, 0, &h) != CLRUN_OK)
            die("graph");
        const char *anames[] = {an};
        if (l < layers && clrun_graph_add_node(g, "gelu", &h, 1, anames, 1, NULL, 0, &h) != CLRUN_OK)
            die("graph");
    }
    if (clrun_graph_mark_output(g, h) != CLRUN_OK)
        die("graph");
    return g;
}

int main(int argc, char **argv)
{
    int repeat = 3;
    int first = bench_repeat_arg(argc, argv, &repeat);
    if (argc - first == 3) {
        rows = atoi(argv[first]);
        width = atoi(argv[first + 1]);
        layers = atoi(argv[first + 2]);
    }
    if (repeat < 1 || rows < 1 || width < 1 || layers < 2) {
        fprintf(stderr, "usage: bench_pipeline [--repeat N] [ROWS WIDTH LAYERS]\n");
        return 2;
    }
    setenv("POCL_DEVICES", "pthread pthread", 0);
    enum { MAX_M = 8 };
    const int ms[] = {1, 2, 4, MAX_M};
    size_t block = (size_t)rows * (size_t)width * 4;
    uint64_t weights = (uint64_t)layers * (uint64_t)width * (uint64_t)width * 4;
    clrun_graph *g = mlp();
    char *in = malloc(MAX_M * block), *want = malloc(MAX_M * block), *got = malloc(MAX_M * block);
    if (in == NULL || want == NULL || got == NULL)
        return 1;
    for (int j = 0; j < MAX_M; j++)
        if (clrun_graph_example_input(g, 0, 100 + (uint64_t)j, in + (size_t)j * block, block) !=
            CLRUN_OK)
            die("inputs");

    /* One device, no limit. */
    clrun_context_options co;
    clrun_context_options_init(&co);
    co.device = "0";
    clrun_context *ctx = NULL;
    clrun_exec *exec = NULL;
    if (clrun_context_create(&co, &ctx) != CLRUN_OK || clrun_exec_create(ctx, g, NULL, &exec) != CLRUN_OK)
        die("one device");
    clrun_buffer x;
    if (clrun_alloc(ctx, block, &x) != CLRUN_OK)
        die("one device");
    /* The pipeline: 5/8 of the weights per device. */
    unsigned devices[2] = {0, 1};
    uint64_t limit = weights / 8 * 5;
    uint64_t limits[2] = {limit, limit};
    clrun_pipeline *p = NULL;
    if (clrun_pipeline_create(g, devices, limits, 2, NULL, &p) != CLRUN_OK)
        die("pipeline");
    clrun_pipeline_stage_info s0, s1;
    clrun_pipeline_stage_info_get(p, 0, &s0);
    clrun_pipeline_stage_info_get(p, 1, &s1);
    printf("model: x f32[%d, %d], %d matmuls %dx%d (weights %.1f MiB), micro-batch = the graph's "
           "batch (%d rows)\n",
           rows, width, layers, width, width, (double)weights / 1048576, rows);
    printf("devices: 0 %s, 1 %s; limit %.1f MiB each; stage 0 nodes [%d, %d), stage 1 [%d, %d); "
           "repeat %d (median)\n",
           s0.device_name, s1.device_name, (double)limit / 1048576, (int)s0.first_node,
           (int)s0.end_node, (int)s1.first_node, (int)s1.end_node, repeat);
    printf("%3s %10s %10s %10s %8s %8s %8s %8s %8s %9s %9s %10s %10s %s\n", "M", "one ms/mb",
           "seq ms/mb", "strm ms/mb", "s/seq", "s/one", "bub seq", "bub strm", "ideal", "busy0 ms",
           "busy1 ms", "moved/mb", "handoff", "bits");
    double *t1 = calloc((size_t)repeat, sizeof *t1), *ts = calloc((size_t)repeat, sizeof *ts),
           *tm = calloc((size_t)repeat, sizeof *tm);
    if (t1 == NULL || ts == NULL || tm == NULL)
        return 1;
    const void *one_in[1];
    uint64_t one_bytes[1] = {block};
    /* warm-up of all three */
    if (clrun_buffer_write(ctx, &x, in) != CLRUN_OK || clrun_exec_run(exec, &x, 1) != CLRUN_OK)
        die("one device");
    one_in[0] = in;
    if (clrun_pipeline_run(p, one_in, one_bytes, 1) != CLRUN_OK)
        die("pipeline");
    for (size_t c = 0; c < sizeof ms / sizeof ms[0]; c++) {
        int m = ms[c];
        double seq_busy = 0, seq_wall = 0;
        bool same = true;
        clrun_pipeline_run_info run = {0};
        clrun_pipeline_stage_info b0 = {0}, b1 = {0};
        for (int r = 0; r < repeat; r++) {
            double start = now_ms();
            for (int j = 0; j < m; j++) {
                if (clrun_buffer_write(ctx, &x, in + (size_t)j * block) != CLRUN_OK ||
                    clrun_exec_run(exec, &x, 1) != CLRUN_OK ||
                    clrun_exec_read_output(exec, 0, want + (size_t)j * block, block) != CLRUN_OK)
                    die("one device");
            }
            t1[r] = now_ms() - start;
            start = now_ms();
            seq_busy = 0;
            for (int j = 0; j < m; j++) {
                one_in[0] = in + (size_t)j * block;
                if (clrun_pipeline_run(p, one_in, one_bytes, 1) != CLRUN_OK ||
                    clrun_pipeline_read_output(p, 0, got + (size_t)j * block, block) != CLRUN_OK)
                    die("sequential pipeline");
                clrun_pipeline_run_info_get(p, &run);
                seq_busy += run.busy_ms;
            }
            ts[r] = seq_wall = now_ms() - start;
            const void *ins[1] = {in};
            void *outs[1] = {got};
            uint64_t bytes[1] = {(uint64_t)m * block};
            start = now_ms();
            if (clrun_pipeline_run_many(p, m, ins, bytes, 1, outs, bytes, 1) != CLRUN_OK)
                die("streamed pipeline");
            tm[r] = now_ms() - start;
            same = same && memcmp(got, want, (size_t)m * block) == 0;
            clrun_pipeline_run_info_get(p, &run);
            clrun_pipeline_stage_info_get(p, 0, &b0);
            clrun_pipeline_stage_info_get(p, 1, &b1);
        }
        double one = bench_median(t1, repeat) / m, seq = bench_median(ts, repeat) / m,
               strm = bench_median(tm, repeat) / m;
        printf("%3d %10.2f %10.2f %10.2f %8.2f %8.2f %7.1f%% %7.1f%% %7.1f%% %9.1f %9.1f %9.1fK "
               "%9.1fK %s\n",
               m, one, seq, strm, strm / seq, strm / one,
               seq_wall > 0 ? 100 * (1 - seq_busy / (2 * seq_wall)) : 0, 100 * run.bubble_fraction,
               100.0 / (m + 1),
               b0.wall_ms, b1.wall_ms, (double)run.bytes_moved / 1024,
               (double)run.handoff_bytes / 1024, same ? "PASS" : "FAIL");
    }
    printf("(s/seq, s/one: the streamed run's time per micro-batch over the sequential "
           "pipeline's and one device's; bubble, busy: the last timed run)\n");
    free(t1);
    free(ts);
    free(tm);
    clrun_pipeline_destroy(p);
    clrun_free(ctx, &x);
    clrun_exec_destroy(exec);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
    free(in);
    free(want);
    free(got);
    return 0;
}
