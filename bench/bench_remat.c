/* Train steps at memory budgets (issue 27; not a test: nothing is asserted, a floor missed is
 * printed, never an exit status). For each model, clrun trainers (<clrun/train.h>) of the same
 * model, weights and batch (bench/models.c), one after another on one context, each made,
 * stepped and destroyed before the next:
 *   none              the unconstrained step: every activation kept
 *   dots_saveable, sqrt_n, cuts, nothing_saveable, per_tensor
 *                     the step under that rematerialisation policy (<clrun/remat.h>; cuts:
 *                     sqrt_n's segments ended at the forward's cuts; per_tensor: every
 *                     activation the backward pass reads recomputed or moved to host memory,
 *                     whichever costs less at CLRUN_OFFLOAD_RATE, docs/training.md)
 *   budget B (P%)     clrun_train_graph_options.memory_budget = B: the trainer chooses the step
 *                     (<clrun/train_graph.h>: the step as it is if the static planner fits it in
 *                     B, else the policies it tries in turn), B from 100% of the unconstrained
 *                     step's planned peak down by --step percent while at least the smallest
 *                     planned peak of the rows above; then that peak; then lower ones, until the
 *                     trainer refuses: the refusal's message (its minimum) is printed.
 *   pool limit B (50%) a context of its own whose pool may reserve half of what the
 *                     unconstrained trainer holds, a trainer given no budget: the pool's limit
 *                     is the budget (issue 27: "CLRUN_POOL_LIMIT set to half ... the step runs").
 * The policy rows are made with a budget of 1 PiB (which every step fits) so that the planner
 * gives their planned peak too. A row's step: two steps whose losses (before their update, and
 * after one) must equal the unconstrained step's bit for bit (PASS/FAIL), then --repeat timed
 * steps: the median wall time of clrun_train_step (the feeds' upload and the loss's read back
 * included). A budget row whose chosen policy has a row above runs the same graph as that row:
 * its time is that row's, marked "=", unless --retime times it again; its peak and losses are its
 * own. Other choices (every:K, cuts:K, except:T1,... shown as the count of tensors), and a step
 * whose state the budget moved to host memory, are timed.
 * Per row: the step's median time and its ratio to the unconstrained step's; the device peak
 * (clrun_train_stats' peak_bytes, the most bytes held at once in the last step: parameters,
 * optimizer state, feeds and activations, less host_bytes: the state a budget moved to host
 * memory, which the kernels read where it lies and the budget does not count) and the host
 * bytes (that state, and the host buffers of activations offloaded to host memory: outside the
 * pool, so neither peak counts them; clrun_exec_stats.host_bytes), activation_peak_bytes
 * (peak_bytes less the parameters and state, wherever they lie) in MiB, the activation peak as a fraction of the unconstrained step's, the planned peak
 * (planned_peak_bytes: what a budget is held to, the device's bytes; the device peak is at most
 * that less the evaluation's constants), and the policy's report: activations dropped, nodes
 * repeated and their arithmetic (repeated_flops, in GFLOP: a forward pass is nothing_saveable's,
 * a step about three times that). Floors of issue 27, per row:
 *   act/3        the activation peak at most 1/3 of the unconstrained step's, at no more than
 *                1.25x its step time (PASS or MISS)
 *   recompute    budget rows: where sqrt_n fits the budget (its planned peak <= B), the chosen
 *                policy repeats no more nodes than sqrt_n does (PASS or MISS; n/a where sqrt_n
 *                does not fit)
 *
 *   bert_base  12 post-LN encoder layers, d 768, 12 heads, feed-forward 3072 (exact GELU),
 *              sequence 128, batch 8, vocabulary 8192 (token and position embeddings, an untied
 *              head, per-token cross-entropy)
 *   resnet50   ResNet-50's layout (7x7/2 stem, 3x3/2 max pool, 3+4+6+3 bottleneck blocks of 64,
 *              128, 256, 512 (x4) channels, global average pool, 1000-way fc) at 128x128, batch
 *              8, WITHOUT batch norm (as bench_train's resnet18): convolutions with biases
 *   resnet18, bert, mlp   bench_train's models, selectable by name
 * The optimizer: SGD with momentum 0.9, lr 0.01 (--optimizer adam: PyTorch's defaults).
 *
 * PyTorch: after each model's rows, bench/bench_remat_torch.py (run by PY with T threads:
 * torch.set_num_threads, OMP_NUM_THREADS, OPENBLAS_NUM_THREADS; T the device's compute units)
 * prints the same model's step time, peak and activation peak without checkpointing and under
 * torch.utils.checkpoint.checkpoint_sequential at the segment count clrun's sqrt_n uses (about
 * the square root of the forward's nodes, capped at the modules the model is a sequence of: that
 * file says how); without torch a line says so and the rest runs.
 *
 * Usage: bench/bench_remat [--repeat N] [--step PCT] [--tiny] [--retime] [--pool-limit-only] [--budget MIB]
 *                          [--policy P]...
 *                          [--optimizer sgd|adam]
 *                          [--fusion on|off] [--threads T] [--python PY] [--no-torch] [MODEL]...
 *   MODEL: bert_base, resnet50 (default both), resnet18, bert, mlp.
 *   --tiny: small widths of the same models (the same depth), a few ms a step, for trying it.
 *   --no-torch: no PyTorch lines.
 *   --pool-limit-only: the unconstrained row and the pool limit's row alone.
 *   --policy P: the unconstrained row and P's row alone (up to 8 of them; no budget rows): any
 *              policy clrun_train_graph_options.remat takes, host_offload included (every
 *              activation the backward pass reads copied to host memory and back; the line
 *              after its row gives their host bytes and the bytes moved per step).
 *   --budget MIB: the unconstrained row and one budget row at MIB MiB alone (no policy rows:
 *              the recompute floor is not checked).
 *   Defaults: --repeat 5 --step 10, T the device's compute units, PY /usr/bin/python3.
 * Run by hand after `make bench`, e.g. bench/bench_remat --tiny, or bench/bench_remat (the full
 * models take minutes a row on a CPU device). */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <clrun/clrun.h>
#include <clrun/train.h>

#include "models.h"
#include "timing.h"

#ifndef BENCH_SRCDIR
#define BENCH_SRCDIR "."
#endif

#define MIB (1024.0 * 1024.0)
/* A budget every step fits: the policy rows get a planned peak without being held to anything. */
#define NO_LIMIT ((uint64_t)1 << 50)

typedef struct options {
    int repeat, step_pct, fusion, threads;
    double budget_mib; /* --budget: the unconstrained row and this budget's alone; 0: all */
    bool tiny, retime, no_torch, pool_only;
    const char *given[8]; /* --policy: the unconstrained row and these policies' rows alone */
    int given_count;
    clrun_optimizer_kind optimizer;
    const char *python;
} options;

/* One trainer's figures. */
typedef struct row {
    bool ok;
    char err[1024];
    char policy[4096]; /* the policy the step was built with (clrun_train_stats.remat_policy) */
    char label[64];    /* that policy for the table (policy_label) */
    double ms;         /* median step time */
    bool timed;        /* ms measured for this row (not taken from its policy's row) */
    uint64_t peak, act_peak, planned; /* peak: the device's */
    uint64_t host;                    /* state in host memory, then activations offloaded */
    uint64_t host_act;                /* of it, the offloaded activations' host buffers */
    uint64_t moved;                   /* bytes those activations move per step, both ways */
    int32_t offloaded;                /* those activations */
    clrun_remat_report remat;
    double loss0, loss1;
} row;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The policies that have rows of their own. */
static const char *const policies[] = {"none", "dots_saveable", "sqrt_n", "cuts", "nothing_saveable",
                                       "per_tensor"};
#define POLICIES 6

static int policy_index(const char *policy)
{
    for (int k = 0; k < POLICIES; k++)
        if (strcmp(policy, policies[k]) == 0)
            return k;
    return -1;
}

/* A policy for a row's label: "except:" and "names:" lists as their length. */
static void policy_label(const char *policy, char *out, size_t size)
{
    if (strncmp(policy, "except:", 7) == 0 || strncmp(policy, "names:", 6) == 0) {
        int n = 1;
        for (const char *c = policy; *c; c++)
            n += *c == ',';
        snprintf(out, size, "%.*s%d tensors", (int)(strchr(policy, ':') - policy + 1), policy, n);
    } else {
        snprintf(out, size, "%s", policy);
    }
}

/* A trainer of `model` under `policy` (NULL: the trainer's choice) and `budget`: two steps, then
 * --repeat timed ones, unless `reuse` and the step's policy is one of those with a row of their
 * own (the same graph: its time is that row's; --retime times it all the same). */
static void run_row(clrun_context *ctx, const clrun_graph *model, const char *config, const options *o,
                    const char *policy, uint64_t budget, bool reuse, row *r)
{
    memset(r, 0, sizeof *r);
    r->ms = NAN;
    clrun_train_options to;
    clrun_train_options_init(&to);
    to.graph.loss = CLRUN_LOSS_XENT;
    to.graph.loss_tensor = "logits";
    clrun_optimizer_init(&to.graph.optimizer, o->optimizer);
    if (o->optimizer == CLRUN_OPTIMIZER_SGD)
        to.graph.optimizer.momentum = 0.9;
    to.graph.remat = policy;
    to.graph.memory_budget = budget;
    to.exec.fusion = o->fusion;
    clrun_train *t = NULL;
    if (clrun_train_create(ctx, model, &to, &t) != CLRUN_OK) {
        snprintf(r->err, sizeof r->err, "%s", clrun_last_error(ctx));
        return;
    }
    clrun_train_stats st;
    int timed = o->repeat;
    if (reuse && !o->retime && clrun_train_stats_get(t, &st) == CLRUN_OK && policy_index(st.remat_policy) >= 0 &&
        st.host_bytes == 0) /* the state in host memory: another step */
        timed = 0;
    bench_feeds f = {0};
    const void *ptrs[8];
    double *ms = calloc(timed > 0 ? (size_t)timed : 1, sizeof *ms);
    clrun_train_step_result r0 = {0}, r1 = {0};
    if (ms == NULL || !bench_make_feeds(t, config, &f, r->err, sizeof r->err)) {
        if (ms == NULL)
            snprintf(r->err, sizeof r->err, "out of host memory");
        goto done;
    }
    for (int32_t i = 0; i < f.count; i++)
        ptrs[i] = f.data[i];
    if (clrun_train_step(t, ptrs, f.count, &r0) != CLRUN_OK || clrun_train_step(t, ptrs, f.count, &r1) != CLRUN_OK)
        goto step_failed;
    for (int k = 0; k < timed; k++) {
        double t0 = now_ms();
        if (clrun_train_step(t, ptrs, f.count, NULL) != CLRUN_OK)
            goto step_failed;
        ms[k] = now_ms() - t0;
    }
    if (clrun_train_stats_get(t, &st) != CLRUN_OK)
        goto step_failed;
    r->ok = true;
    snprintf(r->policy, sizeof r->policy, "%s", st.remat_policy);
    policy_label(st.remat_policy, r->label, sizeof r->label);
    r->timed = timed > 0;
    r->ms = timed > 0 ? bench_median(ms, timed) : NAN;
    /* the host buffers of offloaded activations lie outside the pool, so peak_bytes and the
     * activation peak do not count them: the host column does */
    r->host_act = st.exec.host_bytes;
    r->moved = st.exec.offloaded_bytes;
    r->offloaded = st.exec.offloaded_tensors;
    r->host = st.host_bytes + st.exec.host_bytes;
    r->peak = st.peak_bytes > st.host_bytes ? st.peak_bytes - st.host_bytes : 0;
    r->act_peak = st.activation_peak_bytes;
    r->planned = st.planned_peak_bytes;
    r->remat = st.remat;
    r->loss0 = r0.loss;
    r->loss1 = r1.loss;
    goto done;
step_failed:
    snprintf(r->err, sizeof r->err, "the step fails: %s", clrun_last_error(ctx));
done:
    free(ms);
    bench_feeds_free(&f);
    clrun_train_destroy(t);
}

static bool same_bits(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

/* Issue 27's floor: activations at most 1/3 of the unconstrained step's, at <= 1.25x its time. */
static bool meets_floor(const row *r, const row *base)
{
    return r->ok && (double)r->act_peak <= (double)base->act_peak / 3.0 && r->ms / base->ms <= 1.25;
}

static void print_row(const char *label, const row *r, const row *base, const char *recompute)
{
    if (!r->ok) {
        printf("%-36s %s\n", label, r->err);
        return;
    }
    double time_ratio = r->ms / base->ms;
    double act_frac = base->act_peak ? (double)r->act_peak / (double)base->act_peak : NAN;
    bool bits = same_bits(r->loss0, base->loss0) && same_bits(r->loss1, base->loss1);
    const char *floor = r == base ? "-" : meets_floor(r, base) ? "PASS" : "MISS";
    printf("%-36s %9.2f%s %6.2fx %9.2f %8.2f %9.2f %6.3f %9.2f %6d %6d %8.2f  %.9g %.9g %-4s %-5s %s\n", label, r->ms,
           r->timed ? " " : "=", time_ratio, (double)r->peak / MIB, (double)r->host / MIB,
           (double)r->act_peak / MIB, act_frac,
           (double)r->planned / MIB, r->remat.dropped, r->remat.repeated_nodes,
           (double)r->remat.repeated_flops / 1e9, r->loss0, r->loss1,
           bits ? "PASS" : "FAIL", floor, recompute);
    fflush(stdout);
}

/* A refusal's "needs at least X (remat P) ...", or the whole message. */
static const char *refusal_minimum(const char *err)
{
    static char text[1100];
    static const char *const leads[] = {"at best it needs ", "can hold whatever is recomputed: "};
    for (int k = 0; k < 2; k++) {
        const char *p = strstr(err, leads[k]);
        if (p) {
            snprintf(text, sizeof text, "needs at least %s", p + strlen(leads[k]));
            return text;
        }
    }
    snprintf(text, sizeof text, "%s", err);
    return text;
}

/* bench/bench_remat_torch.py's lines for `config`, indented; a line saying why when it cannot
 * run. */
static void torch_rows(const options *o, const char *config, int segments)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "OMP_NUM_THREADS=%d OPENBLAS_NUM_THREADS=%d MKL_NUM_THREADS=%d '%s' '%s/bench/bench_remat_torch.py' "
             "--threads %d --repeat %d --segments %d --optimizer %s %s 2>&1",
             o->threads, o->threads, o->threads, o->python, BENCH_SRCDIR, o->threads, o->repeat, segments,
             clrun_optimizer_kind_name(o->optimizer), config);
    fflush(stdout);
    FILE *p = popen(cmd, "r");
    if (p == NULL) {
        printf("  PyTorch: not run (%s)\n", strerror(errno));
        return;
    }
    char line[4096];
    while (fgets(line, sizeof line, p))
        printf("  %s", line);
    int status = pclose(p);
    if (status != 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 3))
        printf("  PyTorch: %s ended with status %d\n", o->python, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    fflush(stdout);
}

static void bench_model(clrun_context *ctx, const options *o, const char *config)
{
    char name[32], err[1024];
    sscanf(config, "%31s", name);
    clrun_graph *model = bench_build_model(config, err, sizeof err);
    if (model == NULL) {
        printf("%s: cannot build the model: %s\n", name, err);
        return;
    }
    printf("\n## %s\n", config);
    /* by_policy[0]: the unconstrained step, given a budget every step fits so that the planner
     * gives its planned peak too (the reference of the budgets); the others as it. */
    row by_policy[POLICIES];
    const row *base = &by_policy[0];
    uint64_t min_planned = UINT64_MAX;
    char met[32][96];
    int met_count = 0;
    for (int k = 0; k < POLICIES; k++) {
        if ((o->pool_only || o->budget_mib > 0 || o->given_count > 0) && k > 0) {
            memset(&by_policy[k], 0, sizeof by_policy[k]);
            continue;
        }
        run_row(ctx, model, config, o, k ? policies[k] : NULL, NO_LIMIT, false, &by_policy[k]);
        if (k == 0 && !base->ok) {
            printf("%s: the unconstrained step: %s\n", name, base->err);
            clrun_graph_destroy(model);
            return;
        }
        print_row(policies[k], &by_policy[k], base, "");
        if (by_policy[k].ok && by_policy[k].planned < min_planned)
            min_planned = by_policy[k].planned;
        if (k > 0 && meets_floor(&by_policy[k], base))
            snprintf(met[met_count++], sizeof met[0], "%s", policies[k]);
    }
    const row *sqrt_n = &by_policy[2];
    for (int k = 0; k < o->given_count; k++) { /* --policy: those rows alone */
        row r;
        run_row(ctx, model, config, o, o->given[k], NO_LIMIT, false, &r);
        char label[64];
        policy_label(o->given[k], label, sizeof label);
        print_row(label, &r, base, "n/a (--policy)");
        if (meets_floor(&r, base) && met_count < 32)
            snprintf(met[met_count++], sizeof met[0], "%s", label);
        if (r.ok && r.moved > 0)
            printf("%-36s %d activations (%.2f MiB) offloaded to host memory, %.2f MiB moved per step\n", "",
                   (int)r.offloaded, (double)r.host_act / MIB, (double)r.moved / MIB);
    }

    /* Budgets: 100%, 100 - step, ... while at least the smallest planned peak of the rows above;
     * that peak; then the next below it, and lower ones while the trainer finds a step that fits
     * (it may: its search is not only these policies), down to half that peak at the end. */
    if (o->budget_mib > 0) { /* --budget: that row alone */
        uint64_t budget = (uint64_t)(o->budget_mib * MIB);
        char label[160];
        snprintf(label, sizeof label, "budget %.2f MiB (%d%%) -> ", (double)budget / MIB,
                 (int)lround(100.0 * (double)budget / (double)base->planned));
        row r;
        /* timed whatever it takes: the policy rows it could share a time with are not run */
        run_row(ctx, model, config, o, NULL, budget, false, &r);
        if (!r.ok) {
            printf("%-36s refused: %s\n", label, refusal_minimum(r.err));
        } else {
            size_t len = strlen(label);
            snprintf(label + len, sizeof label - len, "%s", r.label);
            print_row(label, &r, base, "n/a (--budget)");
            if (meets_floor(&r, base) && met_count < 32)
                snprintf(met[met_count++], sizeof met[0], "%s", label);
        }
        fflush(stdout);
    }
    bool done_min = false;
    for (int pct = 100; !o->pool_only && o->budget_mib <= 0 && o->given_count == 0; pct -= o->step_pct) {
        uint64_t budget = (uint64_t)((double)base->planned * (pct > 0 ? pct : 0) / 100.0);
        bool last = false;
        char label[160];
        if (budget < min_planned && !done_min) {
            budget = min_planned;
            done_min = true;
            pct += o->step_pct; /* this step's budget comes next */
            snprintf(label, sizeof label, "budget %.2f MiB (min) -> ", (double)budget / MIB);
        } else {
            if (pct <= 0) {
                budget = min_planned / 2;
                last = true;
            }
            snprintf(label, sizeof label, "budget %.2f MiB (%d%%) -> ", (double)budget / MIB,
                     (int)lround(100.0 * (double)budget / (double)base->planned));
        }
        row r;
        run_row(ctx, model, config, o, NULL, budget, true, &r);
        if (!r.ok) {
            printf("%-36s refused: %s\n", label, refusal_minimum(r.err));
            fflush(stdout);
            break;
        }
        int chosen = policy_index(r.policy);
        if (!r.timed && chosen >= 0)
            r.ms = by_policy[chosen].ms;
        char recompute[64] = "n/a (sqrt_n does not fit)";
        if (sqrt_n->ok && sqrt_n->planned <= budget)
            snprintf(recompute, sizeof recompute, "%s (%d <= %d)",
                     r.remat.repeated_nodes <= sqrt_n->remat.repeated_nodes ? "PASS" : "MISS", r.remat.repeated_nodes,
                     sqrt_n->remat.repeated_nodes);
        size_t len = strlen(label);
        snprintf(label + len, sizeof label - len, "%s", r.label);
        print_row(label, &r, base, recompute);
        if (meets_floor(&r, base) && met_count < 32)
            snprintf(met[met_count++], sizeof met[0], "%s", label);
        if (last)
            break;
    }
    /* The pool's limit as the budget: a context whose pool may reserve half of what the
     * unconstrained trainer holds, a trainer given no budget. */
    clrun_context_options co;
    clrun_context_options_init(&co);
    co.pool_limit = base->planned / 2;
    clrun_context *half = NULL;
    char label[160];
    snprintf(label, sizeof label, "pool limit %.2f MiB (50%%) -> ", (double)co.pool_limit / MIB);
    if (o->budget_mib > 0 || o->given_count > 0) {
        /* --budget, --policy: no pool limit row */
    } else if (clrun_context_create(&co, &half) != CLRUN_OK) {
        printf("%-36s no context: %s\n", label, clrun_last_error(NULL));
    } else {
        row r;
        run_row(half, model, config, o, NULL, 0, true, &r);
        if (!r.ok) {
            printf("%-36s refused: %s\n", label, refusal_minimum(r.err));
        } else {
            int chosen = policy_index(r.policy);
            if (!r.timed && chosen >= 0)
                r.ms = by_policy[chosen].ms;
            size_t len = strlen(label);
            snprintf(label + len, sizeof label - len, "%s", r.label);
            print_row(label, &r, base, "");
        }
        fflush(stdout);
        clrun_context_destroy(half);
    }
    printf("issue 27's floor (activations <= 1/3 of the unconstrained step's at <= 1.25x its time): ");
    if (met_count == 0)
        printf("met by no row\n");
    else {
        printf("met by");
        for (int k = 0; k < met_count; k++)
            printf("%s %s", k ? ";" : "", met[k]);
        printf("\n");
    }
    if (!o->no_torch) {
        /* sqrt_n's segment count (lib/grad/remat.c: segments of ceil(sqrt(n)) of the forward's n
         * nodes), n the model's nodes (the step's forward adds the loss's few) */
        int n = clrun_graph_node_count(model), length = (int)ceil(sqrt((double)n));
        int segments = (n + length - 1) / length;
        torch_rows(o, config, segments);
    }
    clrun_graph_destroy(model);
}

int main(int argc, char **argv)
{
    options o = {.repeat = 5, .step_pct = 10, .optimizer = CLRUN_OPTIMIZER_SGD, .python = "/usr/bin/python3"};
    int first = 1;
    while (first < argc && argv[first][0] == '-') {
        const char *a = argv[first];
        const char *v = first + 1 < argc ? argv[first + 1] : NULL;
        if (strcmp(a, "--repeat") == 0 && v)
            o.repeat = atoi(v), first += 2;
        else if (strcmp(a, "--step") == 0 && v)
            o.step_pct = atoi(v), first += 2;
        else if (strcmp(a, "--threads") == 0 && v)
            o.threads = atoi(v), first += 2;
        else if (strcmp(a, "--python") == 0 && v)
            o.python = v, first += 2;
        else if (strcmp(a, "--fusion") == 0 && v)
            o.fusion = strcmp(v, "off") == 0 ? -1 : 1, first += 2;
        else if (strcmp(a, "--optimizer") == 0 && v && (strcmp(v, "sgd") == 0 || strcmp(v, "adam") == 0))
            o.optimizer = strcmp(v, "sgd") == 0 ? CLRUN_OPTIMIZER_SGD : CLRUN_OPTIMIZER_ADAM, first += 2;
        else if (strcmp(a, "--tiny") == 0)
            o.tiny = true, first++;
        else if (strcmp(a, "--retime") == 0)
            o.retime = true, first++;
        else if (strcmp(a, "--budget") == 0 && v)
            o.budget_mib = atof(v), first += 2;
        else if (strcmp(a, "--policy") == 0 && v && o.given_count < 8)
            o.given[o.given_count++] = v, first += 2;
        else if (strcmp(a, "--pool-limit-only") == 0)
            o.pool_only = true, first++;
        else if (strcmp(a, "--no-torch") == 0)
            o.no_torch = true, first++;
        else {
            fprintf(stderr, "usage: bench_remat [--repeat N] [--step PCT] [--tiny] [--retime] [--pool-limit-only] [--budget MIB] "
                            "[--policy P]... [--optimizer sgd|adam] [--fusion on|off] [--python PY] [--no-torch] [MODEL]...\n");
            return 2;
        }
    }
    if (o.repeat < 1 || o.step_pct < 1 || o.step_pct > 99) {
        fprintf(stderr, "bench_remat: --repeat takes a number >= 1, --step a percentage in [1, 99]\n");
        return 2;
    }
    const char *configs[16];
    int count = 0;
    if (first >= argc)
        for (int m = 0; m < BENCH_REMAT_MODELS; m++)
            configs[count++] = o.tiny ? bench_remat_tiny_configs[m] : bench_remat_configs[m];
    for (int a = first; a < argc && count < 16; a++) {
        configs[count] = bench_model_config(argv[a], o.tiny);
        if (configs[count++] == NULL) {
            fprintf(stderr, "bench_remat: no model %s (bert_base, resnet50, resnet18, bert, mlp)\n", argv[a]);
            return 2;
        }
    }
    clrun_context *ctx = NULL;
    if (clrun_context_create(NULL, &ctx) != CLRUN_OK) {
        fprintf(stderr, "bench_remat: %s\n", clrun_last_error(NULL));
        return 1;
    }
    const clrun_device_info *dev = clrun_context_device(ctx);
    if (o.threads <= 0)
        o.threads = (int)dev->compute_units;
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
    printf("# bench_remat: train steps (forward, xent loss, backward, update) under rematerialisation policies and "
           "memory budgets; %s; load %.2f %.2f %.2f\n", date, load[0], load[1], load[2]);
    printf("# clrun on %s (%u compute units), fusion %s; %s; %s shapes; ResNets without batch norm\n", dev->name,
           dev->compute_units, o.fusion < 0 ? "off" : o.fusion > 0 ? "on" : "as CLRUN_FUSION says (default on)",
           o.optimizer == CLRUN_OPTIMIZER_SGD ? "sgd, momentum 0.9, lr 0.01" : "adam, PyTorch's defaults",
           o.tiny ? "tiny" : "full");
    printf("# ms: median of %d steps after 2 (\"=\": the policy row's step, the same graph, not timed again); "
           "peak: clrun_train_stats peak_bytes less host_bytes (the device's); host: host_bytes (the state a budget "
           "moved to host memory, not counted by it) and the host buffers of offloaded activations (not counted in "
           "peak or act); act: activation_peak_bytes; act/base: act over the "
           "unconstrained step's; planned: the static planner's peak on the device (what a budget holds); GFLOP: the "
           "repeated nodes' arithmetic (nothing_saveable's: a forward pass)\n", o.repeat);
    printf("# bits: the losses of steps 1 and 2 equal the unconstrained step's bit for bit; act/3: activations <= 1/3 "
           "of the unconstrained step's at <= 1.25x its time; recompute: no more repeated nodes than sqrt_n where "
           "sqrt_n fits the budget\n");
    printf("%-36s %10s %7s %9s %8s %9s %6s %9s %6s %6s %8s  %-21s %-4s %-5s %s\n", "policy / budget -> chosen", "ms",
           "time", "peak MiB", "host MiB", "act MiB", "act/b", "planned", "drop", "nodes", "GFLOP", "loss 1, 2", "bits",
           "act/3", "recompute");
    for (int m = 0; m < count; m++)
        bench_model(ctx, &o, configs[m]);
    clrun_context_destroy(ctx);
    return 0;
}
