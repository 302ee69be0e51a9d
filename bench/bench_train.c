/* One train step of clrun against PyTorch (CPU), on the same machine in the same run (not a
 * test: nothing is asserted, a floor missed is printed, never an exit status). For each model
 * and optimizer (SGD with momentum 0.9, lr 0.01; Adam with PyTorch's defaults): a clrun trainer
 * (<clrun/train.h>) of a model built here through the graph API, weights from seeds, and the
 * same architecture in PyTorch, in a child process (bench/bench_train_torch.py, spoken to over
 * pipes) with torch.set_num_threads(T) and OMP_NUM_THREADS = OPENBLAS_NUM_THREADS = T, T the
 * device's compute units (the threads POCL runs kernels on). A step is forward, loss (softmax
 * cross-entropy, the mean over rows), backward and the optimizer's update, on one fixed batch:
 * clrun_train_step (the feeds' upload and the loss's read back included) against
 * zero_grad(set_to_none=True), forward, loss, backward, step and loss.item().
 *
 *   mlp       784-512-512-10, relu, batch 64
 *   resnet18  ResNet-18's layout (7x7/2 stem, 3x3/2 max pool, 2+2+2+2 basic blocks of 64, 128,
 *             256, 512 channels, 1x1/2 projections, global average pool, 1000-way fc) at 64x64,
 *             batch 16, WITHOUT batch norm (both sides alike; batch norm in training mode
 *             is tested against PyTorch in tests/python/test_train.py), convolutions with
 *             biases instead
 *   bert      4 post-LN encoder layers, d 256, 4 heads, feed-forward 1024 with exact GELU,
 *             softmax attention without mask or dropout; token (vocabulary 4096) and learned
 *             position embeddings with a layernorm; per-token cross-entropy over the vocabulary
 *             (an untied 256 x 4096 head); sequence 64, batch 8
 *
 * Per model and optimizer: first a check that both compute the same thing: the clrun trainer's
 * initial parameters and the batch go to PyTorch through .npy files, and both print the loss of
 * their first two steps (before any update, and after one). Then two warm-up steps each, then
 * `rounds` rounds of `repeat` steps each side, the side that goes first alternating, so that the
 * machine's load falls on both alike, 250 ms apart (so that threads of one side that spin idle
 * after its round, as OpenBLAS's do for about 0.1 s, do not slow the other's; the bench prints
 * how many cores each process burnt while the other ran): the median step time of each side,
 * their ratio, and the
 * median CPU time of the step (every thread of the process: what other load on a shared
 * machine inflates least). Memory:
 *   clrun      clrun_train_stats' peak_bytes: the most bytes of pool blocks held at once during
 *              the last step, the parameters, the optimizer state and the feeds included (what
 *              donation keeps single). "no donation": the same step graph (a copy of
 *              clrun_train_step_graph read back from its text) with every input's donated flag
 *              cleared (clrun_graph_set_donated), run by its own executor on buffers the
 *              caller keeps: the updated parameters and moments then need blocks of their own.
 *   PyTorch    the bytes of the tensors alive when the step starts (parameters, optimizer
 *              state, the batch; gradients are None after zero_grad) plus the highest running
 *              sum of the allocation and free events torch.profiler records for the step
 *              (profile_memory=True; a separate step from the timed ones). It counts every
 *              tensor and oneDNN buffer PyTorch's CPU allocator hands out; it does not count
 *              OpenBLAS's own per-thread buffers (allocated once, not per step), malloc's
 *              overhead or Python objects. The child also reports the process's RSS rise
 *              during a step (VmHWM after resetting it through /proc/self/clear_refs, less
 *              VmRSS before), which includes malloc's retained memory, as a cross-check.
 * The floors of the issue are printed per model and optimizer: clrun's peak <= 0.7x PyTorch's,
 * clrun's step time <= 1.5x PyTorch's, PASS or MISS.
 *
 * Usage: bench/bench_train [--repeat N] [--rounds R] [--threads T] [--tiny] [--fusion on|off]
 *                          [--remat POLICY] [--python PY] [--no-torch] [--profile] [--live]
 *                          [MODEL[:OPTIMIZER]]...
 *   MODEL: mlp, resnet18, bert (default all three); OPTIMIZER: sgd or adam (default both).
 *   --tiny: small shapes of the same models (a few ms a step), for trying the bench out.
 *   --profile: also one profiled run of the step graph (undonated), its device time per op.
 *   --live: the step where the step's buffers hold the most, and the largest alive there.
 *   --remat POLICY: clrun's step recomputes activations (<clrun/remat.h>; the same results);
 *            without it the trainer chooses (docs/training.md), --remat none keeps them all.
 *   Each model and optimizer gets a context of its own.
 *   Defaults: --repeat 3 --rounds 5, T the device's compute units, PY /usr/bin/python3.
 * The figures in README.md ("Measured", Training) came from `make bench` then
 *   bench/bench_train --repeat 3 --rounds 5 --profile
 * on a 2-core machine, POCL on both cores. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <clrun/clrun.h>
#include <clrun/npy.h>
#include <clrun/train.h>

#include "models.h"
#include "timing.h"

#ifndef BENCH_SRCDIR
#define BENCH_SRCDIR "."
#endif

#define MIB (1024.0 * 1024.0)

/* ---------------------------------------------------------------------------------------- */
/* The PyTorch child: one command a line, one answer a line ("ok ..." or "error ..."). */

typedef struct torch_child {
    pid_t pid;
    FILE *to, *from;
    bool alive;
    char line[65536];
} torch_child;

static void torch_start(torch_child *c, const char *python, int threads)
{
    int down[2], up[2];
    memset(c, 0, sizeof *c);
    if (pipe(down) != 0 || pipe(up) != 0) {
        perror("bench_train: pipe");
        return;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        perror("bench_train: fork");
        return;
    }
    if (pid == 0) {
        char n[16];
        snprintf(n, sizeof n, "%d", threads);
        setenv("OMP_NUM_THREADS", n, 1);
        setenv("OPENBLAS_NUM_THREADS", n, 1);
        setenv("MKL_NUM_THREADS", n, 1);
        dup2(down[0], 0);
        dup2(up[1], 1);
        close(down[0]), close(down[1]), close(up[0]), close(up[1]);
        execl(python, python, BENCH_SRCDIR "/bench/bench_train_torch.py", "--serve", "--threads", n,
              (char *)NULL);
        fprintf(stderr, "bench_train: cannot run %s: %s\n", python, strerror(errno));
        _exit(127);
    }
    close(down[0]);
    close(up[1]);
    c->pid = pid;
    c->to = fdopen(down[1], "w");
    c->from = fdopen(up[0], "r");
    c->alive = c->to && c->from;
}

/* Sends a command and reads its answer into c->line; false (with the answer or the reason in
 * c->line) unless it starts with "ok". */
static bool torch_ask(torch_child *c, const char *fmt, ...)
{
    if (!c->alive) {
        snprintf(c->line, sizeof c->line, "no PyTorch process");
        return false;
    }
    va_list ap;
    va_start(ap, fmt);
    vfprintf(c->to, fmt, ap);
    va_end(ap);
    fputc('\n', c->to);
    fflush(c->to);
    if (fgets(c->line, sizeof c->line, c->from) == NULL) {
        c->alive = false;
        snprintf(c->line, sizeof c->line, "the PyTorch process ended (its stderr says why)");
        return false;
    }
    c->line[strcspn(c->line, "\n")] = 0;
    return strncmp(c->line, "ok", 2) == 0;
}

static void torch_stop(torch_child *c)
{
    if (c->to)
        fclose(c->to);
    if (c->from)
        fclose(c->from);
    if (c->pid > 0)
        waitpid(c->pid, NULL, 0);
}

/* The value of " key=" in an answer (NAN when absent). */
static double answer_get(const char *line, const char *key)
{
    char pattern[64];
    snprintf(pattern, sizeof pattern, " %s=", key);
    const char *p = strstr(line, pattern);
    return p ? strtod(p + strlen(pattern), NULL) : NAN;
}

/* ---------------------------------------------------------------------------------------- */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static double cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void pause_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The trainer's parameters and the batch as .npy files in dir (parameter NAME: NAME.npy; feed
 * i: feed<i>.npy), for the torch side's loss check. */
static bool write_check_files(clrun_train *t, const bench_feeds *f, const char *dir, char *err, size_t errlen)
{
    char path[4096];
    for (int32_t i = 0; i < clrun_train_param_count(t); i++) {
        const char *name;
        clrun_tensor_type type;
        clrun_train_param_info(t, i, &name, &type);
        uint64_t bytes = clrun_tensor_bytes(&type);
        void *host = malloc((size_t)bytes);
        snprintf(path, sizeof path, "%s/%s.npy", dir, name);
        bool ok = host && clrun_train_read_param(t, i, host, bytes) == CLRUN_OK &&
                  clrun_npy_save(path, &type, host, err, errlen) == CLRUN_OK;
        free(host);
        if (!ok)
            return false;
    }
    for (int32_t i = 0; i < f->count; i++) {
        snprintf(path, sizeof path, "%s/feed%d.npy", dir, i);
        if (clrun_npy_save(path, &f->type[i], f->data[i], err, errlen) != CLRUN_OK)
            return false;
    }
    return true;
}

static void remove_dir(const char *dir)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "bench_train: could not remove %s\n", dir);
}

/* The step graph with no input donated, run by its own executor on buffers the caller keeps:
 * its peak (and reserved) bytes on the second run. */
typedef struct op_time {
    const char *op;
    double ms;
} op_time;

static int compare_op_times(const void *a, const void *b)
{
    double x = ((const op_time *)a)->ms, y = ((const op_time *)b)->ms;
    return (x < y) - (x > y);
}

/* The device time of the profiled run's ops, summed per op, the largest first: one line. */
static void print_profile(const clrun_exec *e)
{
    const clrun_exec_span *spans;
    int32_t n = clrun_exec_profile(e, &spans);
    op_time *ops = calloc(n > 0 ? (size_t)n : 1, sizeof *ops);
    int32_t count = 0;
    double total = 0;
    for (int32_t i = 0; ops && i < n; i++) {
        double ms = (double)(spans[i].end_ns - spans[i].start_ns) / 1e6;
        total += ms;
        /* A fused group by its first op: "fused:conv2d+relu" counts as "fused:conv2d+" */
        size_t key = strncmp(spans[i].op, "fused:", 6) == 0 ? 6 + strcspn(spans[i].op + 6, "+,") : strlen(spans[i].op);
        int32_t k = 0;
        while (k < count && !(strlen(ops[k].op) == key && strncmp(ops[k].op, spans[i].op, key) == 0))
            k++;
        if (k == count) {
            char *name = malloc(key + 1);
            if (name == NULL)
                break;
            memcpy(name, spans[i].op, key);
            name[key] = 0;
            ops[count++] = (op_time){name, 0.0};
        }
        ops[k].ms += ms;
    }
    if (ops)
        qsort(ops, (size_t)count, sizeof *ops, compare_op_times);
    printf("  clrun profile (device ms of one step, %.1f in all):", total);
    for (int32_t k = 0; k < count && k < 8; k++)
        printf(" %s%s %.1f%s", ops[k].op, strncmp(ops[k].op, "fused:", 6) == 0 ? "+" : "", ops[k].ms,
               k + 1 < count && k < 7 ? "," : "\n");
    for (int32_t k = 0; k < count; k++)
        free((char *)ops[k].op);
    free(ops);
}

static bool undonated_peak(clrun_context *ctx, const clrun_train *t, const clrun_exec_options *options,
                           bool profile, uint64_t *peak, char *err, size_t errlen)
{
    char *text = NULL;
    size_t length = 0;
    FILE *f = open_memstream(&text, &length);
    if (f == NULL || clrun_graph_write(clrun_train_step_graph(t), f) != CLRUN_OK) {
        snprintf(err, errlen, "cannot write the step graph");
        if (f)
            fclose(f);
        free(text);
        return false;
    }
    fclose(f);
    clrun_graph *g = NULL;
    clrun_status s = clrun_graph_parse(text, length, "step", &g, err, errlen);
    free(text);
    if (s != CLRUN_OK)
        return false;
    const clrun_tensor_id *inputs;
    int32_t n = clrun_graph_inputs(g, &inputs);
    for (int32_t i = 0; i < n; i++)
        clrun_graph_set_donated(g, inputs[i], false);
    clrun_exec *e = NULL;
    clrun_buffer *buffers = calloc(n > 0 ? (size_t)n : 1, sizeof *buffers);
    clrun_exec_options eo = *options;
    eo.profile = profile;
    bool ok = buffers && clrun_exec_create(ctx, g, &eo, &e) == CLRUN_OK;
    int32_t made = 0;
    for (; ok && made < n; made++) {
        uint64_t bytes = clrun_tensor_bytes(clrun_graph_tensor_type(g, inputs[made]));
        void *zeros = calloc(1, (size_t)bytes); /* labels 0, a zero state: any values do */
        ok = zeros && clrun_alloc(ctx, bytes, &buffers[made]) == CLRUN_OK &&
             clrun_buffer_write(ctx, &buffers[made], zeros) == CLRUN_OK;
        free(zeros);
    }
    clrun_exec_stats st;
    for (int run = 0; ok && run < 2; run++)
        ok = clrun_exec_run(e, buffers, n) == CLRUN_OK;
    if (ok && clrun_exec_stats_get(e, &st) == CLRUN_OK) {
        *peak = st.peak_bytes;
        if (profile)
            print_profile(e);
    }
    else
        snprintf(err, errlen, "%s", clrun_last_error(ctx));
    clrun_exec_destroy(e);
    for (int32_t i = 0; i < made && buffers; i++)
        if (buffers[i].mem)
            clrun_free(ctx, &buffers[i]);
    free(buffers);
    clrun_graph_destroy(g);
    return ok;
}

typedef struct options {
    int repeat, rounds, threads, fusion;
    bool tiny, no_torch, profile, live;
    const char *python;
    const char *remat; /* clrun's step's rematerialisation policy, or NULL */
} options;

/* --live: the step at which the step's buffers (inputs apart) hold the most, from the executor's
 * layout, and the largest buffers alive there: where the activation peak lies. */
static void print_live(const clrun_train *t)
{
    const clrun_exec *e = clrun_train_step_exec(t);
    int32_t n = 0;
    if (e == NULL || clrun_exec_layout(e, NULL, 0, &n) != CLRUN_OK || n <= 0)
        return;
    clrun_exec_buffer_info *info = calloc((size_t)n, sizeof *info);
    if (info == NULL || clrun_exec_layout(e, info, n, &n) != CLRUN_OK) {
        free(info);
        return;
    }
    int32_t steps = 0;
    for (int32_t i = 0; i < n; i++)
        if (info[i].first_step + 1 > steps)
            steps = info[i].first_step + 1;
    int32_t best = -1;
    uint64_t most = 0;
    for (int32_t k = 0; k < steps; k++) {
        uint64_t live = 0;
        for (int32_t i = 0; i < n; i++)
            if (!info[i].is_input && info[i].first_step <= k && info[i].last_step >= k)
                live += info[i].bytes;
        if (live > most)
            most = live, best = k;
    }
    const char *at = "?";
    for (int32_t i = 0; i < n; i++)
        if (info[i].first_step == best && !info[i].is_scratch)
            at = info[i].tensor;
    printf("  live: %.2f MiB of buffers alive at step %d of %d (writing %s):\n", (double)most / MIB, best, steps, at);
    for (int shown = 0; shown < 16; shown++) {
        int32_t pick = -1;
        for (int32_t i = 0; i < n; i++)
            if (!info[i].is_input && info[i].first_step <= best && info[i].last_step >= best &&
                info[i].bytes > 0 && (pick < 0 || info[i].bytes > info[pick].bytes))
                pick = i;
        if (pick < 0)
            break;
        printf("    %8.3f MiB  %-40s steps %d..%d%s\n", (double)info[pick].bytes / MIB, info[pick].tensor,
               info[pick].first_step, info[pick].last_step, info[pick].is_scratch ? " scratch" : "");
        info[pick].bytes = 0;
    }
    free(info);
}

static const char *floor_word(double ratio, double floor)
{
    return isnan(ratio) ? "n/a" : ratio <= floor ? "PASS" : "MISS";
}

static void bench_one(clrun_context *ctx, torch_child *torch, const options *o, const char *config,
                      clrun_optimizer_kind kind)
{
    char err[4096];
    char model_name[32];
    sscanf(config, "%31s", model_name);
    const char *opt_name = clrun_optimizer_kind_name(kind);
    char label[64];
    snprintf(label, sizeof label, "%s/%s", model_name, opt_name);
    clrun_graph *model = bench_build_model(config, err, sizeof err);
    if (model == NULL) {
        printf("%-16s clrun cannot build the model: %s\n", label, err);
        return;
    }
    clrun_train_options to;
    clrun_train_options_init(&to);
    to.graph.loss = CLRUN_LOSS_XENT;
    to.graph.loss_tensor = "logits";
    clrun_optimizer_init(&to.graph.optimizer, kind);
    if (kind == CLRUN_OPTIMIZER_SGD)
        to.graph.optimizer.momentum = 0.9;
    to.exec.fusion = o->fusion;
    to.graph.remat = o->remat;
    clrun_train *t = NULL;
    if (clrun_train_create(ctx, model, &to, &t) != CLRUN_OK) {
        printf("%-16s clrun cannot train it: %s\n", label, clrun_last_error(ctx));
        clrun_graph_destroy(model);
        return;
    }
    clrun_graph_destroy(model); /* the trainer keeps its own graph */
    bench_feeds f = {0};
    if (!bench_make_feeds(t, config, &f, err, sizeof err)) {
        printf("%-16s feeds: %s\n", label, err);
        clrun_train_destroy(t);
        return;
    }
    uint64_t param_elements = 0;
    for (int32_t i = 0; i < clrun_train_param_count(t); i++) {
        clrun_tensor_type type;
        clrun_train_param_info(t, i, NULL, &type);
        param_elements += clrun_tensor_elements(&type);
    }

    /* The torch side's model and the loss check. */
    bool have_torch = !o->no_torch && torch_ask(torch, "build %s %s", opt_name, config);
    char torch_note[512] = "";
    if (!o->no_torch && !have_torch)
        snprintf(torch_note, sizeof torch_note, "PyTorch: %.400s", torch->line);
    if (have_torch && (uint64_t)answer_get(torch->line, "params") != param_elements)
        snprintf(torch_note, sizeof torch_note, "PyTorch's model has %.0f parameters, clrun's %llu",
                 answer_get(torch->line, "params"), (unsigned long long)param_elements);
    char dir[] = "/tmp/bench_train.XXXXXX";
    bool check_files = have_torch && mkdtemp(dir) != NULL && write_check_files(t, &f, dir, err, sizeof err);
    const void *feed_ptrs[8];
    for (int32_t i = 0; i < f.count; i++)
        feed_ptrs[i] = f.data[i];
    clrun_train_step_result r0 = {0}, r1 = {0};
    if (clrun_train_step(t, feed_ptrs, f.count, &r0) != CLRUN_OK ||
        clrun_train_step(t, feed_ptrs, f.count, &r1) != CLRUN_OK) {
        printf("%-16s clrun's step fails: %s\n", label, clrun_last_error(ctx));
        goto done;
    }
    double torch_l0 = NAN, torch_l1 = NAN;
    if (check_files && torch_ask(torch, "check %s", dir)) {
        torch_l0 = answer_get(torch->line, "loss0");
        torch_l1 = answer_get(torch->line, "loss1");
    }
    if (have_torch)
        remove_dir(dir);

    /* Warm-up, then alternating rounds. */
    int steps = o->rounds * o->repeat;
    double *clrun_ms = calloc((size_t)steps, sizeof *clrun_ms), *clrun_cpu = calloc((size_t)steps, sizeof *clrun_cpu);
    double *torch_ms = calloc((size_t)steps, sizeof *torch_ms), *torch_cpu = calloc((size_t)steps, sizeof *torch_cpu);
    bool torch_ok = have_torch && torch_ask(torch, "time 2");
    /* What each process burns while the other one runs (threads spinning idle, say). */
    double torch_end = 0, torch_gap_ms = 0, torch_round_ms = 0, clrun_idle_cpu = 0, torch_idle_cpu = 0;
    for (int w = 0; w < 2; w++)
        if (clrun_train_step(t, feed_ptrs, f.count, NULL) != CLRUN_OK) {
            printf("%-16s clrun's step fails: %s\n", label, clrun_last_error(ctx));
            goto done_timing;
        }
    for (int round = 0; round < o->rounds; round++) {
        for (int side = 0; side < 2; side++) {
            pause_ms(250); /* the other side's threads done spinning (OpenBLAS's spin about 0.1 s
                              after a call): each side starts on a quiet machine */
            if ((side == 0) == (round % 2 == 0)) {
                for (int k = 0; k < o->repeat; k++) {
                    double c0 = cpu_ms(), t0 = now_ms();
                    if (clrun_train_step(t, feed_ptrs, f.count, NULL) != CLRUN_OK) {
                        printf("%-16s clrun's step fails: %s\n", label, clrun_last_error(ctx));
                        goto done_timing;
                    }
                    clrun_ms[round * o->repeat + k] = now_ms() - t0;
                    clrun_cpu[round * o->repeat + k] = cpu_ms() - c0;
                }
            } else if (torch_ok) {
                double c0 = cpu_ms(), t0 = now_ms();
                if (torch_end > 0)
                    torch_gap_ms += t0 - torch_end;
                torch_ok = torch_ask(torch, "time %d", o->repeat);
                torch_end = now_ms();
                torch_round_ms += torch_end - t0;
                clrun_idle_cpu += cpu_ms() - c0;
                torch_idle_cpu += round > 0 ? answer_get(torch->line, "idle_cpu") : 0.0;
                /* "ok ms=a,b,c cpu=a,b,c" */
                const char *ms = strstr(torch->line, " ms="), *cpu = strstr(torch->line, " cpu=");
                ms = ms ? ms + 4 : NULL;
                cpu = cpu ? cpu + 5 : NULL;
                for (int k = 0; torch_ok && ms && cpu && k < o->repeat; k++) {
                    char *end;
                    torch_ms[round * o->repeat + k] = strtod(ms, &end);
                    ms = end + (*end == ',');
                    torch_cpu[round * o->repeat + k] = strtod(cpu, &end);
                    cpu = end + (*end == ',');
                }
                if (!torch_ok)
                    snprintf(torch_note, sizeof torch_note, "PyTorch: %.400s", torch->line);
            }
        }
    }
    clrun_train_stats st;
    clrun_train_stats_get(t, &st);
    uint64_t undonated = 0;
    char undonated_err[1024] = "";
    if (!undonated_peak(ctx, t, &to.exec, false, &undonated, undonated_err, sizeof undonated_err))
        undonated = 0;
    double tpeak = NAN, tbase = NAN, trss = NAN;
    if (torch_ok && torch_ask(torch, "mem")) {
        tpeak = answer_get(torch->line, "peak");
        tbase = answer_get(torch->line, "base");
        trss = answer_get(torch->line, "rss_rise");
    }

    double cm = bench_median(clrun_ms, steps), cc = bench_median(clrun_cpu, steps);
    double tm = torch_ok ? bench_median(torch_ms, steps) : NAN, tc = torch_ok ? bench_median(torch_cpu, steps) : NAN;
    double time_ratio = cm / tm;
    double mem_ratio = (double)st.peak_bytes / tpeak;
    printf("%-16s %7.2fM %9.2f %9.2f %6.2fx %-4s %9.1f %9.1f %9.1f %6.2fx %-4s\n", label,
           (double)param_elements / 1e6, cm, tm, time_ratio, floor_word(time_ratio, 1.5),
           (double)st.peak_bytes / MIB, undonated ? (double)undonated / MIB : NAN, tpeak / MIB, mem_ratio,
           floor_word(mem_ratio, 0.7));
    printf("  clrun: %.1f ms CPU/step; peak = params %.1f + state %.1f + the rest %.1f MiB (lower bound %.1f, "
           "reserved %.1f); %d donations, %d unused; ", cc, (double)st.param_bytes / MIB, (double)st.state_bytes / MIB,
           (double)st.activation_peak_bytes / MIB, (double)st.lower_bound_bytes / MIB,
           (double)st.exec.reserved_bytes / MIB, st.donations, st.unused_donations);
    if (st.remat.repeated_nodes)
        printf("remat %s%s: %d activations (%.1f MiB) recomputed by %d nodes, %.3f GFLOP; ", st.remat_policy,
               st.remat_auto ? " (chosen by the step)" : "",
               st.remat.dropped, (double)st.remat.dropped_bytes / MIB, st.remat.repeated_nodes,
               (double)st.remat.repeated_flops / 1e9);
    if (undonated)
        printf("no donation %.1f MiB (+%.1f; params+state %.1f)\n", (double)undonated / MIB,
               ((double)undonated - (double)st.peak_bytes) / MIB, (double)(st.param_bytes + st.state_bytes) / MIB);
    else
        printf("no donation: n/a (%s)\n", undonated_err);
    if (torch_ok) {
        printf("  torch: %.1f ms CPU/step; peak = live at the start %.1f (params, state, batch) + step %.1f MiB; "
               "RSS rise over a step %.1f MiB\n", tc, tbase / MIB, (tpeak - tbase) / MIB, trss / MIB);
        printf("  idle: clrun's process used %.2f cores while PyTorch ran, PyTorch's %.2f while clrun ran\n",
               clrun_idle_cpu / torch_round_ms, torch_gap_ms > 0 ? torch_idle_cpu / torch_gap_ms : NAN);
    }
    double rel0 = fabs(r0.loss - torch_l0) / fabs(torch_l0), rel1 = fabs(r1.loss - torch_l1) / fabs(torch_l1);
    printf("  loss step 1, step 2: clrun %.6f %.6f, torch %.6f %.6f (relative difference %.1e %.1e)%s\n",
           r0.loss, r1.loss, torch_l0, torch_l1, rel0, rel1,
           isnan(rel0) ? "" : rel0 < 1e-4 && rel1 < 1e-3 ? "" : " DIFFERS");
    if (torch_note[0])
        printf("  %s\n", torch_note);
    if (o->live)
        print_live(t);
    if (o->profile && !undonated_peak(ctx, t, &to.exec, true, &undonated, undonated_err, sizeof undonated_err))
        printf("  clrun profile: n/a (%s)\n", undonated_err);
    fflush(stdout);
done_timing:
    free(clrun_ms), free(clrun_cpu), free(torch_ms), free(torch_cpu);
done:
    bench_feeds_free(&f);
    clrun_train_destroy(t);
}

int main(int argc, char **argv)
{
    options o = {.repeat = 3, .rounds = 5, .threads = 0, .fusion = 0, .python = "/usr/bin/python3"};
    int first = 1;
    while (first < argc && argv[first][0] == '-') {
        const char *a = argv[first];
        const char *v = first + 1 < argc ? argv[first + 1] : NULL;
        if (strcmp(a, "--repeat") == 0 && v)
            o.repeat = atoi(v), first += 2;
        else if (strcmp(a, "--rounds") == 0 && v)
            o.rounds = atoi(v), first += 2;
        else if (strcmp(a, "--threads") == 0 && v)
            o.threads = atoi(v), first += 2;
        else if (strcmp(a, "--python") == 0 && v)
            o.python = v, first += 2;
        else if (strcmp(a, "--fusion") == 0 && v)
            o.fusion = strcmp(v, "off") == 0 ? -1 : 1, first += 2;
        else if (strcmp(a, "--remat") == 0 && v)
            o.remat = v, first += 2;
        else if (strcmp(a, "--tiny") == 0)
            o.tiny = true, first++;
        else if (strcmp(a, "--no-torch") == 0)
            o.no_torch = true, first++;
        else if (strcmp(a, "--profile") == 0)
            o.profile = true, first++;
        else if (strcmp(a, "--live") == 0)
            o.live = true, first++;
        else {
            fprintf(stderr, "usage: bench_train [--repeat N] [--rounds R] [--threads T] [--tiny] "
                            "[--fusion on|off] [--remat POLICY] [--python PY] [--no-torch] [--profile] [--live] "
                            "[MODEL[:OPTIMIZER]]...\n");
            return 2;
        }
    }
    if (o.repeat < 1 || o.rounds < 1) {
        fprintf(stderr, "bench_train: --repeat and --rounds take numbers >= 1\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    clrun_context *ctx = NULL;
    if (clrun_context_create(NULL, &ctx) != CLRUN_OK) {
        fprintf(stderr, "bench_train: %s\n", clrun_last_error(NULL));
        return 1;
    }
    const clrun_device_info *dev = clrun_context_device(ctx);
    if (o.threads <= 0)
        o.threads = (int)dev->compute_units;
    torch_child torch = {0};
    char torch_version[256] = "not run";
    if (!o.no_torch) {
        torch_start(&torch, o.python, o.threads);
        if (torch_ask(&torch, "hello"))
            snprintf(torch_version, sizeof torch_version, "%.200s", torch.line + 3);
        else
            snprintf(torch_version, sizeof torch_version, "n/a (%.200s)", torch.line);
    }
    const char *const *configs = o.tiny ? bench_train_tiny_configs : bench_train_configs;
    double load[3] = {0, 0, 0};
    FILE *la = fopen("/proc/loadavg", "r");
    if (la) {
        if (fscanf(la, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3)
            load[0] = load[1] = load[2] = 0;
        fclose(la);
    }
    time_t now = time(NULL);
    char date[64];
    strftime(date, sizeof date, "%Y-%m-%d %H:%M", localtime(&now));
    printf("# bench_train: one train step (forward, xent loss, backward, update), clrun against PyTorch; %s; "
           "load %.2f %.2f %.2f\n", date, load[0], load[1], load[2]);
    printf("# clrun on %s (%u compute units), fusion %s; PyTorch %s, %d threads (torch.set_num_threads, "
           "OMP_NUM_THREADS, OPENBLAS_NUM_THREADS)\n", dev->name, dev->compute_units,
           o.fusion < 0 ? "off" : o.fusion > 0 ? "on" : "as CLRUN_FUSION says (default on)", torch_version,
           o.threads);
    printf("# median of %d rounds x %d steps each side, alternating, after 2 warm-up steps; %s shapes; "
           "sgd: momentum 0.9, lr 0.01; adam: PyTorch's defaults\n", o.rounds, o.repeat, o.tiny ? "tiny" : "full");
    printf("# peak: clrun_train_stats peak_bytes (and with no input donated); torch: live tensors at the step's "
           "start + the peak of torch.profiler's allocation events over the step\n");
    printf("# floors: time <= 1.5x PyTorch's, peak <= 0.7x PyTorch's; clrun's activations recomputed: %s\n",
           o.remat ? o.remat : "as the step chooses (--remat none: none)");
    printf("%-16s %8s %9s %9s %7s %-4s %9s %9s %9s %7s %-4s\n", "model/optimizer", "params", "clrun ms", "torch ms",
           "ratio", "time", "clrun MiB", "nodonate", "torch MiB", "ratio", "peak");
    for (int m = 0; m < BENCH_TRAIN_MODELS; m++) {
        char name[32];
        sscanf(configs[m], "%31s", name);
        for (int k = 0; k < 2; k++) {
            clrun_optimizer_kind kind = k == 0 ? CLRUN_OPTIMIZER_SGD : CLRUN_OPTIMIZER_ADAM;
            bool wanted = first >= argc;
            for (int a = first; a < argc; a++) {
                char label[64];
                snprintf(label, sizeof label, "%s:%s", name, clrun_optimizer_kind_name(kind));
                wanted = wanted || strcmp(argv[a], name) == 0 || strcmp(argv[a], label) == 0;
            }
            if (!wanted)
                continue;
            /* A context of its own: the pool's figures (reserved) are this model's alone. */
            clrun_context *model_ctx = NULL;
            if (clrun_context_create(NULL, &model_ctx) != CLRUN_OK) {
                fprintf(stderr, "bench_train: %s\n", clrun_last_error(NULL));
                return 1;
            }
            bench_one(model_ctx, &torch, &o, configs[m], kind);
            clrun_context_destroy(model_ctx);
        }
    }
    if (!o.no_torch) {
        torch_ask(&torch, "quit");
        torch_stop(&torch);
    }
    clrun_context_destroy(ctx);
    return 0;
}
