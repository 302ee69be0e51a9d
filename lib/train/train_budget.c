/* The step under a memory budget: the one given (clrun_train_graph_options.memory_budget), or,
 * with none, what the pool's limit leaves when the step might not fit in it. Under a budget the
 * step runs in planned mode (unless the executor options name another mode), where what it holds
 * is known before it runs: its arena, its inputs (the state and the feeds, blocks of the pool),
 * its constants, and beside it the evaluation's constants and its arena, which lies inside the
 * step's when that is larger (they take turns). That sum is what the budget holds, exactly as
 * the pool will count it. A budget below the least any rewrite can hold (the
 * inputs, the constants, the evaluation and the largest working set of one step) is refused at
 * once with that least. Otherwise: the step as it is if it fits; else each activation the
 * backward pass reads recomputed or moved to host memory, whichever frees its bytes for less,
 * the fewest that fit, cheapest first (PER_TENSOR, below); else dots_saveable (only the
 * elementwise work after the products repeated); then segments ending at the forward's cuts, the
 * shortest whose step fits (cuts:K, K from 2 to sqrt(n), a binary search: about log2(sqrt(n))
 * preparations, which reuse the kernels the first one built); then Chen's segments wherever they
 * end, the same way (every:K); then nothing_saveable. The first of those three that fits is
 * weighed against moving the activations to host memory and back instead (host_offload, below):
 * where that fits too and its bytes, moved twice, cost less than the policy's repeated
 * arithmetic at the device's rate (CLRUN_OFFLOAD_RATE), it is taken. Where none fits, the optimizer
 * state and then the parameters go to host memory, and the same again; with nothing more to
 * move there, last, the activations the backward pass reads are offloaded to host memory after
 * they are written and brought back before their backward readers (graph/offload.h). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clrun/exec.h>
#include <clrun/memory.h>
#include <clrun/plan.h>

#include "core/error.h"
#include "exec/exec_share.h"
#include "grad/remat_drop.h"
#include "graph/graph.h"
#include "graph/offload.h"
#include "train/train_internal.h"

typedef struct budget {
    uint64_t bytes;    /* what the step and the evaluation may hold */
    bool from_pool;    /* no budget given: the pool's limit less what it held */
    uint64_t limit;    /* from_pool: the pool's limit */
    uint64_t held;     /* from_pool: what the pool held before the trainer */
    bool planned;      /* the step runs in planned mode: the verdict is what it holds */
    uint64_t eval;     /* planned: the evaluation executor's constants (and what else it
                          reserves beside its arena) */
    uint64_t eval_arena; /* planned: the evaluation's arena */
    bool share;        /* the evaluation's arena may lie in the step's (train.c) */
} budget;

/* "123 bytes", "45.6 KiB", "7.89 MiB" */
static void human(uint64_t bytes, char *out, size_t size)
{
    if (bytes < 1024)
        snprintf(out, size, "%" PRIu64 " bytes", bytes);
    else if (bytes < 1024 * 1024)
        snprintf(out, size, "%.1f KiB", (double)bytes / 1024.0);
    else
        snprintf(out, size, "%.2f MiB", (double)bytes / (1024.0 * 1024.0));
}

/* What a prepared step holds: *inputs, the trainer's blocks (the state, the feeds, the
 * hyperparameters: the step's inputs; under the pool's limit as it reserved them, else their
 * bytes); *constants; *arena (planned mode; else 0); and
 * *working, the largest working set of one step: what it writes (outputs and scratch) and the
 * inputs whose last reader it is, which every rewrite of the step holds at once too. */
typedef struct held_bytes {
    uint64_t inputs, constants, arena, working;
} held_bytes;

static clrun_status measure(clrun_train *t, const budget *b, held_bytes *h, char *err,
                            size_t errlen)
{
    clrun_exec_stats st;
    int32_t n = 0;
    clrun_status s = clrun_exec_stats_get(t->exec, &st);
    if (s == CLRUN_OK)
        s = clrun_exec_layout(t->exec, NULL, 0, &n);
    clrun_exec_buffer_info *info = s == CLRUN_OK ? calloc((size_t)n + 1, sizeof *info) : NULL;
    uint64_t *at = info ? calloc((size_t)st.steps + 1, sizeof *at) : NULL;
    if (at == NULL || (s = clrun_exec_layout(t->exec, info, n, &n)) != CLRUN_OK) {
        free(info);
        free(at);
        snprintf(err, errlen, "train: out of host memory measuring the step");
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    *h = (held_bytes){.inputs = b->from_pool ? t->slot_reserved : t->slot_bytes,
                      .constants = st.constant_bytes,
                      .arena = st.arena_bytes};
    for (int32_t i = 0; i < n; i++) {
        const clrun_exec_buffer_info *x = &info[i];
        if (x->is_input)
            continue;
        if (x->first_step >= 0 && x->first_step < st.steps)
            at[x->first_step] += x->bytes;
        if (x->last_step > x->first_step && x->last_step < st.steps)
            at[x->last_step] += x->bytes;
    }
    for (int32_t k = 0; k < st.steps; k++)
        h->working = at[k] > h->working ? at[k] : h->working;
    free(info);
    free(at);
    return CLRUN_OK;
}

/* What the pool of ctx has reserved from the driver. */
static uint64_t reserved(clrun_context *ctx)
{
    clrun_memory_stats m;
    return clrun_memory_stats_get(ctx, &m) == CLRUN_OK ? m.reserved : 0;
}

static void drop_step(clrun_train *t)
{
    clrun_exec_destroy(t->exec);
    t->exec = NULL;
    clrun__train_graph_free(&t->tg);
}

/* The rung after nothing_saveable: no activation recomputed, every one the backward pass
 * reads copied to host memory after it is written and back right before its first backward
 * reader (graph/offload.h); the device then holds of each only what a node works on. */
#define HOST_OFFLOAD "host_offload"

static clrun_status offload_activations(clrun__train_graph *tg, char *err, size_t errlen)
{
    clrun_graph *g = tg->graph;
    int32_t *crossing = malloc(sizeof *crossing * (size_t)(g->tensor_count + 1));
    if (crossing == NULL) {
        snprintf(err, errlen, "train: out of host memory");
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    int32_t n = clrun__offload_crossing(g, tg->forward_nodes, crossing);
    clrun__offload_report report;
    clrun_status s = clrun__graph_offload(g, tg->forward_nodes, crossing, n, NULL, &report);
    if (s == CLRUN_OK)
        s = clrun_graph_validate(g);
    if (s != CLRUN_OK)
        snprintf(err, errlen, "train: offloading the activations: %s", clrun_graph_last_error(g));
    else
        tg->forward_nodes += report.added_before;
    free(crossing);
    return s;
}

/* The device's rate, the FLOPs it computes in the time it moves a byte to host memory
 * (graph/offload.h: CLRUN_OFFLOAD_RATE, measured by default), or the fallback where the
 * measurement fails. */
static double offload_rate(clrun_context *ctx)
{
    double rate = CLRUN__OFFLOAD_RATE_FALLBACK;
    if (clrun__exec_offload_rate(ctx, &rate, NULL) != CLRUN_OK)
        rate = CLRUN__OFFLOAD_RATE_FALLBACK;
    return rate;
}

/* Each activation its own way (PER_TENSOR): the activations the backward pass reads (those an
 * offload at the boundary may take) are ranked by what freeing a byte of each costs, the cheaper
 * of its two ways. Recomputing it repeats its node, and the nodes before that made the inputs the
 * backward pass does not hold (up to REPEAT_MAX of them), their arithmetic
 * (clrun__offload_node_flops); it frees its bytes less those of the inputs the repeat must hold
 * that the backward pass did not (outputs of nodes with others beside them). Moving it to host
 * memory and back costs its bytes twice at the device's rate (CLRUN_OFFLOAD_RATE) and frees them
 * all. "per_tensor:M" treats the M cheapest, each its cheaper way; "per_tensor" all of them.
 * Under a budget the least M that fits is searched: the step frees what it must, cheapest first.
 * Both rewrites move or repeat bits, so the step keeps its bits. */
#define PER_TENSOR "per_tensor"
#define REPEAT_MAX 64

typedef struct way {
    int32_t tensor;
    bool offload;  /* moved to host memory and back; else recomputed */
    double cost;   /* FLOPs (or what the moves cost in FLOPs) per byte freed */
    uint64_t bytes;
} way;

static int cheaper_first(const void *pa, const void *pb)
{
    const way *a = pa, *b = pb;
    if (a->cost != b->cost)
        return a->cost < b->cost ? -1 : 1;
    if (a->bytes != b->bytes)
        return a->bytes > b->bytes ? -1 : 1;
    return (a->tensor > b->tensor) - (a->tensor < b->tensor);
}

/* What repeating x takes, x's node first: the tensors dropped with it (out[0..*count), x
 * first: those its repeat makes again, which the backward pass holds nowhere), their nodes'
 * arithmetic (*flops) and the bytes the repeat holds that nothing held before (*extra). false
 * where it takes more than REPEAT_MAX nodes, where x's node has other outputs, or where it reads
 * an activation recomputed itself (gone[]): the two repeats would run together in the backward
 * pass, holding what each frees. held[]: what the backward pass holds already (the activations
 * it reads; graph inputs, constants and outputs are held anyway); seen[] marks, cleared of what
 * it set before it returns. */
static bool repeat_of(const clrun__train_graph *tg, const bool *held, const bool *gone,
                      bool *seen, int32_t x, int32_t *out, int32_t *count, uint64_t *flops,
                      uint64_t *extra)
{
    const clrun_graph *g = tg->graph;
    int32_t n = 0;
    bool blocked = false;
    *flops = 0;
    *extra = 0;
    out[n++] = x;
    seen[x] = true;
    bool ok = true;
    for (int32_t at = 0; at < n && ok; at++) {
        int32_t p = g->tensors[out[at]].producer;
        *flops += clrun__offload_node_flops(g, p);
        for (int i = 0; i < g->nodes[p].input_count && ok; i++) {
            int32_t u = g->nodes[p].inputs[i];
            if (u >= 0 && held[u] && gone[u])
                blocked = true;
            if (u < 0 || seen[u] || held[u])
                continue;
            const clrun__tensor *in = &g->tensors[u];
            if (in->producer < 0 || in->is_output)
                continue;
            seen[u] = true;
            if (in->producer < tg->forward_nodes && g->nodes[in->producer].output_count == 1)
                ok = n < REPEAT_MAX ? (out[n++] = u, true) : false;
            else
                *extra += clrun_tensor_bytes(&in->type);
        }
    }
    /* clear the marks: x's chain and the held-over inputs of its nodes */
    for (int32_t at = 0; at < n; at++) {
        int32_t p = g->tensors[out[at]].producer;
        for (int i = 0; i < g->nodes[p].input_count; i++)
            if (g->nodes[p].inputs[i] >= 0)
                seen[g->nodes[p].inputs[i]] = false;
        seen[out[at]] = false;
    }
    *count = n;
    return ok && !blocked && g->nodes[g->tensors[x].producer].output_count == 1;
}

/* The ranking above of tg's activations, cheapest per byte first: *out (malloc'd), *count;
 * held[] (tensor count entries, malloc'd) marks them, for repeat_of. */
static clrun_status rank_ways(clrun_context *ctx, const clrun__train_graph *tg, way **out,
                              int32_t *count, bool **held_out, char *err, size_t errlen)
{
    const clrun_graph *g = tg->graph;
    const double moved = 2.0 * offload_rate(ctx); /* per byte, all of them freed */
    size_t n = (size_t)g->tensor_count + 1;
    int32_t *crossing = malloc(sizeof *crossing * n), *chain = malloc(sizeof *chain * REPEAT_MAX);
    bool *held = calloc(n, sizeof *held), *seen = calloc(n, sizeof *seen);
    bool *gone = calloc(n, sizeof *gone);
    way *ways = malloc(sizeof *ways * n);
    if (crossing == NULL || chain == NULL || held == NULL || seen == NULL || gone == NULL ||
        ways == NULL) {
        free(crossing);
        free(chain);
        free(held);
        free(seen);
        free(gone);
        free(ways);
        snprintf(err, errlen, "train: out of host memory");
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    int32_t k = clrun__offload_crossing(g, tg->forward_nodes, crossing);
    for (int32_t i = 0; i < k; i++)
        held[crossing[i]] = true;
    int32_t kept = 0;
    for (int32_t i = 0; i < k; i++) {
        int32_t x = crossing[i], length;
        uint64_t bytes = clrun_tensor_bytes(&g->tensors[x].type), flops, extra;
        double repeated = INFINITY;
        if (bytes == 0)
            continue; /* nothing to free */
        if (repeat_of(tg, held, gone, seen, x, chain, &length, &flops, &extra) && extra < bytes)
            repeated = (double)flops / (double)(bytes - extra);
        ways[kept++] = (way){.tensor = x, .offload = !(repeated <= moved), .bytes = bytes,
                             .cost = repeated <= moved ? repeated : moved};
    }
    k = kept;
    qsort(ways, (size_t)k, sizeof *ways, cheaper_first);
    /* in that order, a repeat that would read one recomputed before it moves instead, and
     * takes its place among the moved */
    for (int32_t i = 0; i < k; i++) {
        int32_t x = ways[i].tensor, length;
        uint64_t flops, extra;
        if (ways[i].offload)
            continue;
        if (repeat_of(tg, held, gone, seen, x, chain, &length, &flops, &extra))
            gone[x] = true;
        else
            ways[i] = (way){.tensor = x, .offload = true, .bytes = ways[i].bytes, .cost = moved};
    }
    qsort(ways, (size_t)k, sizeof *ways, cheaper_first);
    free(crossing);
    free(chain);
    free(seen);
    free(gone);
    *out = ways;
    *count = k;
    *held_out = held;
    return CLRUN_OK;
}

/* How many activations PER_TENSOR ranks in model's step (none rewritten). */
static clrun_status count_ways(clrun_train *t, const clrun_graph *model,
                               const clrun_train_graph_options *options, int32_t *count,
                               char *err, size_t errlen)
{
    clrun_train_graph_options o = *options;
    o.remat = "none";
    clrun__train_graph tg = {.correct_output = -1};
    bool split = t->options.reduce != NULL || t->options.split_update;
    clrun_status s = clrun__train_graph_build(model, &o, split, &tg, err, errlen);
    way *ways = NULL;
    bool *held = NULL;
    if (s == CLRUN_OK)
        s = rank_ways(t->ctx, &tg, &ways, count, &held, err, errlen);
    free(ways);
    free(held);
    clrun__train_graph_free(&tg);
    return s;
}

/* Rewrites tg (built with no policy) by PER_TENSOR, its `take` cheapest activations (all where
 * fewer), in their order: each is recomputed where its ranking says so, its repeat reads no
 * activation freed before it and no repeat chosen before reads it; else it is moved, and the
 * repeats chosen before that read it are moved instead (each would bring it back early, and
 * hold it beside what it frees). Then the repeats are rewritten (each with the tensors its
 * repeat makes again) and the moves. */
static clrun_status per_tensor(clrun_context *ctx, clrun__train_graph *tg, int32_t take,
                               char *err, size_t errlen)
{
    way *ways;
    bool *held;
    int32_t n;
    clrun_status s = rank_ways(ctx, tg, &ways, &n, &held, err, errlen);
    if (s != CLRUN_OK)
        return s;
    if (take > n)
        take = n;
    clrun_graph *g = tg->graph;
    size_t size = (size_t)g->tensor_count + 1;
    int32_t *ids = malloc(sizeof *ids * size), *chain = malloc(sizeof *chain * REPEAT_MAX), k = 0;
    bool *seen = calloc(size, sizeof *seen), *gone = calloc(size, sizeof *gone);
    bool *repeat = calloc((size_t)take + 1, sizeof *repeat), *dropped = calloc(size, sizeof *dropped);
    if (ids == NULL || chain == NULL || seen == NULL || gone == NULL || repeat == NULL ||
        dropped == NULL) {
        s = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        snprintf(err, errlen, "train: out of host memory");
        take = 0;
    }
    int32_t length;
    uint64_t flops, extra;
    for (int32_t i = 0; i < take; i++) {
        int32_t x = ways[i].tensor;
        gone[x] = true;
        /* a repeat chosen before that reads x moves instead; then x cannot be repeated */
        bool read = false;
        for (int32_t j = 0; j < i; j++)
            if (repeat[j] && !repeat_of(tg, held, gone, seen, ways[j].tensor, chain, &length,
                                        &flops, &extra)) {
                repeat[j] = false;
                read = true;
            }
        repeat[i] = !ways[i].offload && !read &&
                    repeat_of(tg, held, gone, seen, x, chain, &length, &flops, &extra);
    }
    for (int32_t i = 0; i < take; i++) {
        if (!repeat[i])
            continue;
        (void)repeat_of(tg, held, gone, seen, ways[i].tensor, chain, &length, &flops, &extra);
        for (int32_t c = 0; c < length; c++)
            if (!dropped[chain[c]]) {
                dropped[chain[c]] = true;
                ids[k++] = chain[c];
            }
    }
    if (s == CLRUN_OK)
        s = clrun__graph_remat_drop(g, tg->forward_nodes, ids, k, &tg->remat);
    k = 0;
    for (int32_t i = 0; s == CLRUN_OK && i < take; i++)
        if (!repeat[i])
            ids[k++] = ways[i].tensor;
    clrun__offload_report report;
    if (s == CLRUN_OK && k > 0 &&
        (s = clrun__graph_offload(g, tg->forward_nodes, ids, k, NULL, &report)) == CLRUN_OK)
        tg->forward_nodes += report.added_before;
    if (s == CLRUN_OK)
        s = clrun_graph_validate(g);
    if (s != CLRUN_OK && s != CLRUN_ERROR_OUT_OF_HOST_MEMORY)
        snprintf(err, errlen, "train: %s: %s", PER_TENSOR, clrun_graph_last_error(g));
    free(ids);
    free(chain);
    free(seen);
    free(gone);
    free(repeat);
    free(dropped);
    free(held);
    free(ways);
    return s;
}

/* policy's count when it is PER_TENSOR (*take; INT32_MAX: all) or "per_tensor:M"; false for
 * another policy. CLRUN_ERROR_INVALID_ARGUMENT for a count that is not one. */
static clrun_status per_tensor_take(const char *policy, bool *is, int32_t *take, char *err,
                                    size_t errlen)
{
    size_t n = strlen(PER_TENSOR);
    *is = strncmp(policy, PER_TENSOR, n) == 0 && (policy[n] == '\0' || policy[n] == ':');
    *take = INT32_MAX;
    if (!*is || policy[n] == '\0')
        return CLRUN_OK;
    char *end;
    long m = strtol(policy + n + 1, &end, 10);
    if (end == policy + n + 1 || *end != '\0' || m < 1 || m > INT32_MAX) {
        snprintf(err, errlen, "train: remat policy '%s': %s:M takes a count M >= 1", policy,
                 PER_TENSOR);
        return CLRUN_ERROR_INVALID_ARGUMENT;
    }
    *take = (int32_t)m;
    return CLRUN_OK;
}

static clrun_status try_step(clrun_train *t, const clrun_graph *model,
                             const clrun_train_graph_options *options, const char *policy,
                             const budget *b, bool *fits, uint64_t *held, char *err, size_t errlen);

/* With t's step the recompute policy `policy`, which fits: the activations to host memory and
 * back instead (HOST_OFFLOAD) where that fits too and costs less, moving its bytes twice against
 * repeating the policy's arithmetic at the device's rate (graph/offload.h: CLRUN_OFFLOAD_RATE,
 * measured by default). A ResNet's skip connections cross every segment, so that a segment
 * policy repeats most of a forward pass to lower its peak; its activations cost far less to
 * move. *offloaded: t's step is HOST_OFFLOAD's now; otherwise it is `policy`'s again (prepared
 * anew: the two are not held at once, under a pool's limit the second would not fit beside the
 * first), or none where that one no longer fits (a planner cut short by its time: the caller
 * goes on). */
static clrun_status weigh_offload(clrun_train *t, const clrun_graph *model,
                                  const clrun_train_graph_options *options, const budget *b,
                                  const char *policy, bool *offloaded, bool *kept, char *err,
                                  size_t errlen)
{
    *offloaded = false;
    *kept = true;
    uint64_t flops = t->tg.remat.repeated_flops;
    double rate = offload_rate(t->ctx);
    /* no activation moves for less than nothing: a policy that repeats no arithmetic stays */
    if (flops == 0 || !clrun__offload_prefers(flops, 1, rate))
        return CLRUN_OK;
    drop_step(t);
    bool fits;
    uint64_t held;
    /* an offloaded step that cannot be prepared (try_step left none) is passed over */
    clrun_status s = try_step(t, model, options, HOST_OFFLOAD, b, &fits, &held, err, errlen);
    clrun_exec_stats st;
    if (s == CLRUN_OK && fits && t->exec != NULL && clrun_exec_stats_get(t->exec, &st) == CLRUN_OK &&
        clrun__offload_prefers(flops, st.host_bytes, rate)) {
        t->planned_peak = held;
        *offloaded = true;
        return CLRUN_OK;
    }
    if (s == CLRUN_OK)
        drop_step(t);
    if ((s = try_step(t, model, options, policy, b, &fits, &held, err, errlen)) != CLRUN_OK)
        return s;
    if (!fits) {
        drop_step(t);
        *kept = false;
        return CLRUN_OK;
    }
    t->planned_peak = held;
    return CLRUN_OK;
}

/* Builds and prepares the step under `policy` into t->tg and t->exec. With a budget, *held is
 * what it holds (planned mode) or the planner's estimate (other modes), and *fits whether that is
 * within the budget; a planned step whose arena the pool's limit refuses does not fit (*held
 * UINT64_MAX, t->exec NULL). A step that does not fit is kept for the caller to drop. */
static clrun_status try_step(clrun_train *t, const clrun_graph *model,
                             const clrun_train_graph_options *options, const char *policy,
                             const budget *b, bool *fits, uint64_t *held, char *err, size_t errlen)
{
    clrun_train_graph_options o = *options;
    bool offload = strcmp(policy, HOST_OFFLOAD) == 0, per;
    int32_t take;
    *fits = true;
    *held = 0;
    clrun_status s = per_tensor_take(policy, &per, &take, err, errlen);
    if (s != CLRUN_OK)
        return s;
    o.remat = offload || per ? "none" : policy;
    bool split = t->options.reduce != NULL || t->options.split_update;
    s = clrun__train_graph_build(model, &o, split, &t->tg, err, errlen);
    if (s != CLRUN_OK)
        return s;
    if (offload)
        s = offload_activations(&t->tg, err, errlen);
    else if (per)
        s = per_tensor(t->ctx, &t->tg, take, err, errlen);
    if (s != CLRUN_OK) {
        clrun__train_graph_free(&t->tg);
        return s;
    }
    uint64_t before = reserved(t->ctx);
    s = clrun__exec_create_beside(t->ctx, t->tg.graph, &t->options.exec, NULL, &t->exec);
    uint64_t after = reserved(t->ctx);
    if (s == CLRUN_ERROR_OUT_OF_MEMORY && b && b->planned) {
        *fits = false;
        *held = UINT64_MAX;
        return CLRUN_OK;
    }
    if (s != CLRUN_OK) {
        snprintf(err, errlen, "%s", clrun_last_error(t->ctx));
        clrun__train_graph_free(&t->tg);
        return s;
    }
    if (b == NULL)
        return CLRUN_OK;
    if (b->planned) {
        held_bytes h;
        /* its arena and resident constants as the pool reserved them */
        if ((s = measure(t, b, &h, err, errlen)) == CLRUN_OK)
            *held = h.inputs + (after > before ? after - before : h.arena + h.constants) +
                    b->eval + (b->share && b->eval_arena <= h.arena ? 0 : b->eval_arena);
    } else {
        /* the planner's layout of every buffer, inputs included: an estimate of what the pooled
         * and naive modes hold, whose blocks come at run time */
        s = clrun__exec_plan_span(t->exec, true, 0.2, b->bytes, held);
        if (s != CLRUN_OK)
            snprintf(err, errlen, "train: %s", clrun_last_error(t->ctx));
    }
    if (s != CLRUN_OK)
        drop_step(t);
    *fits = *held <= b->bytes;
    return s;
}

/* Takes the step built for `policy` as t's, which fits. */
static clrun_status keep_step(clrun_train *t, const char *policy, uint64_t held, char *err,
                              size_t errlen)
{
    t->planned_peak = held;
    if (policy == NULL || strcmp(policy, "none") == 0)
        return CLRUN_OK;
    if ((t->remat_policy = strdup(policy)) != NULL)
        return CLRUN_OK;
    drop_step(t);
    snprintf(err, errlen, "train: out of host memory");
    return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
}

/* The policies KIND:K between K = lowest and S: for the segment policies ("every" or "cuts",
 * from 2 to sqrt_n's length S) the shortest K whose step fits repeats the fewest tensors (a
 * longer K keeps fewer tensors, so below S the peak falls as K grows); for PER_TENSOR (from 1 to
 * every activation) the least K frees the fewest bytes, cheapest first. A binary search, each
 * K's step prepared and measured. On
 * success the fitting step is t's and *policy its text (malloc'd); *policy NULL when KIND:S does
 * not fit either (*best: the least seen). */
static clrun_status search(clrun_train *t, const clrun_graph *model,
                           const clrun_train_graph_options *options, const budget *b,
                           const char *kind, int32_t lowest, int32_t S, char **policy,
                           uint64_t *best, char *err, size_t errlen)
{
    *policy = NULL;
    int32_t lo = lowest, hi = S, fitting = 0;
    char text[32];
    while (lo <= hi) {
        int32_t k = fitting == 0 ? hi : lo + (hi - lo) / 2; /* the longest first */
        snprintf(text, sizeof text, "%s:%d", kind, (int)k);
        bool fits;
        uint64_t held;
        clrun_status s = try_step(t, model, options, text, b, &fits, &held, err, errlen);
        if (s != CLRUN_OK)
            return s;
        *best = held < *best ? held : *best;
        if (fits && k == lo) { /* nothing shorter is left to try: this one */
            t->planned_peak = held;
            if ((*policy = strdup(text)) != NULL)
                return CLRUN_OK;
            drop_step(t);
            snprintf(err, errlen, "train: out of host memory");
            return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        }
        drop_step(t);
        if (!fits && fitting == 0)
            return CLRUN_OK; /* not even the longest segments */
        if (fits) {
            fitting = k;
            hi = k - 1;
        } else {
            lo = k + 1;
        }
    }
    snprintf(text, sizeof text, "%s:%d", kind, (int)fitting);
    bool fits;
    uint64_t held;
    clrun_status s = try_step(t, model, options, text, b, &fits, &held, err, errlen);
    if (s != CLRUN_OK)
        return s;
    if (fits) {
        t->planned_peak = held;
        if ((*policy = strdup(text)) != NULL)
            return CLRUN_OK;
        drop_step(t);
        snprintf(err, errlen, "train: out of host memory");
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    drop_step(t); /* it fitted before: a planner cut short by its time; the caller goes on */
    return CLRUN_OK;
}

/* "a memory budget of 1.00 MiB" or "the pool's limit of 2.00 MiB, less the 12.0 KiB it held" */
static void describe(const budget *b, char *out, size_t size)
{
    char x[32], y[32];
    if (b->from_pool) {
        human(b->limit, x, sizeof x);
        human(b->held, y, sizeof y);
        snprintf(out, size, "the pool's limit of %s (CLRUN_POOL_LIMIT or CLRUN_MEM_FRACTION), less "
                 "the %s it held", x, y);
    } else {
        human(b->bytes, x, sizeof x);
        snprintf(out, size, "a memory budget of %s", x);
    }
}

/* Bytes of the tensors of `g` that are not constants: what its executor holds at most, every
 * tensor in a buffer of its own (scratch aside). */
static uint64_t tensor_bytes(const clrun_graph *g)
{
    uint64_t sum = 0;
    for (int32_t i = 0; i < g->tensor_count; i++)
        if (g->tensors[i].kind != CLRUN__TENSOR_CONSTANT)
            sum += clrun_tensor_bytes(&g->tensors[i].type);
    return sum;
}

/* With no budget given: whether the step might not fit in what the pool's limit leaves beside
 * the `held` bytes it held before the trainer (the step's every tensor in a buffer of its own,
 * its constants and the evaluation's tensors counted), and then that room as the budget. */
static bool pool_budget(clrun_train *t, uint64_t held, budget *b)
{
    clrun_exec_stats st;
    uint64_t limit;
    clrun__exec_pool_held(t->ctx, &limit);
    if (limit == 0 || clrun_exec_stats_get(t->exec, &st) != CLRUN_OK)
        return false;
    b->held = held;
    b->limit = limit;
    uint64_t room = limit > held ? limit - held : 0;
    if (st.naive_bytes + st.constant_bytes + tensor_bytes(t->tg.eval) <= room)
        return false;
    b->bytes = room;
    b->from_pool = true;
    return true;
}

/* The evaluation executor's arena and constants in planned mode (constructions only, as the
 * trainer will create it). */
static clrun_status eval_bytes(clrun_train *t, budget *b, char *err, size_t errlen)
{
    clrun_exec_options o = t->options.exec;
    o.mode = CLRUN_EXEC_PLANNED;
    o.plan_time_limit_s = 0;
    o.profile = false;
    clrun_exec *e = NULL;
    uint64_t before = reserved(t->ctx);
    clrun_status s = clrun__exec_create_beside(t->ctx, t->tg.eval, &o, NULL, &e);
    uint64_t after = reserved(t->ctx);
    clrun_exec_stats st;
    if (s == CLRUN_OK)
        s = clrun_exec_stats_get(e, &st);
    if (s == CLRUN_OK) { /* as the pool reserved them */
        b->eval_arena = st.arena_bytes;
        b->eval = after > before + st.arena_bytes ? after - before - st.arena_bytes : st.constant_bytes;
    }
    if (s == CLRUN_ERROR_OUT_OF_MEMORY) { /* past the pool's limit alone: its least, pooled */
        o.mode = CLRUN_EXEC_POOLED;
        s = clrun__exec_create_beside(t->ctx, t->tg.eval, &o, NULL, &e);
        if (s == CLRUN_OK)
            s = clrun_exec_stats_get(e, &st);
        if (s == CLRUN_OK) {
            b->eval_arena = st.lower_bound_bytes;
            b->eval = st.constant_bytes;
        }
    }
    else
        snprintf(err, errlen, "train: the evaluation of the model, in planned mode: %s",
                 clrun_last_error(t->ctx));
    clrun_exec_destroy(e);
    return s;
}

/* The trainer's blocks (t->buffers), their bytes at the device's alignment (t->slot_bytes:
 * what a budget given counts, whatever the pool held before) and what the pool reserved for
 * them (t->slot_reserved: what its limit counts, chunk rounding included). */
static clrun_status slots(clrun_train *t, char *err, size_t errlen)
{
    uint64_t align = clrun_context_device(t->ctx)->base_addr_align;
    t->slot_bytes = 0;
    for (int32_t i = 0; i < t->tg.slot_count; i++)
        if (!clrun__train_slot_on_host(t, i))
            t->slot_bytes += (clrun__train_slot_bytes(t, i) + align - 1) / align * align;
    clrun_memory_stats m0, m1;
    clrun_status s = clrun_memory_stats_get(t->ctx, &m0);
    if (s == CLRUN_OK)
        s = clrun__train_alloc_slots(t);
    if (s == CLRUN_OK)
        s = clrun_memory_stats_get(t->ctx, &m1);
    if (s == CLRUN_OK)
        t->slot_reserved = m1.reserved > m0.reserved ? m1.reserved - m0.reserved : 0;
    else if (s == CLRUN_ERROR_OUT_OF_HOST_MEMORY)
        snprintf(err, errlen, "train: out of host memory");
    else
        snprintf(err, errlen, "train: the state's and feeds' blocks: %s", clrun_last_error(t->ctx));
    return s;
}

/* The least any rewrite of the step holds: the trainer's blocks, the constants, the largest
 * working set of one node, and the evaluation (its arena within the step's when they share). */
static uint64_t least(const budget *b, const held_bytes *h)
{
    uint64_t fixed = h->inputs + h->constants + b->eval;
    if (b->share)
        return fixed + (h->working > b->eval_arena ? h->working : b->eval_arena);
    return fixed + h->working + b->eval_arena;
}

/* A budget below `least`, refused with what makes it up. */
static clrun_status refuse_floor(const budget *b, const held_bytes *h, bool offloaded, char *err,
                                 size_t errlen)
{
    char what[160], most[32], in[32], k[32], w[32], ev[32];
    uint64_t all = least(b, h);
    describe(b, what, sizeof what);
    human(all, most, sizeof most);
    human(h->inputs, in, sizeof in);
    human(h->constants, k, sizeof k);
    human(h->working, w, sizeof w);
    human(all - h->inputs - h->constants - h->working, ev, sizeof ev);
    snprintf(err, errlen, "train: %s is below the least the step can hold whatever is "
             "recomputed%s: %s (%s %s, constants %s, the largest working set of one node %s, the "
             "evaluation beside it %s)", what,
             offloaded ? " or moved to host memory" : "", most,
             offloaded ? "with the parameters and optimizer state in host memory, the feeds"
                       : "parameters, state and feeds",
             in, k, w, ev);
    return b->from_pool ? CLRUN_ERROR_OUT_OF_MEMORY : CLRUN_ERROR_INVALID_ARGUMENT;
}

/* The trainer's blocks again, the state (and with CLRUN__OFFLOAD_PARAMS the parameters) in
 * host memory: t->offload = level. No step is kept (the slots are read off the step's graph,
 * built for the purpose: every policy's has the same). */
static clrun_status reslot(clrun_train *t, const clrun_graph *model,
                           const clrun_train_graph_options *options, int level, char *err,
                           size_t errlen)
{
    if (t->exec != NULL)
        drop_step(t);
    bool split = t->options.reduce != NULL || t->options.split_update;
    clrun_status s = clrun__train_graph_build(model, options, split, &t->tg, err, errlen);
    if (s != CLRUN_OK)
        return s;
    clrun__train_free_slots(t);
    clrun_pool_trim(t->ctx, NULL); /* their chunks, empty now, go back before the new blocks */
    t->offload = level;
    s = slots(t, err, errlen);
    clrun__train_graph_free(&t->tg);
    return s;
}

/* The step as asked, then (no policy given) dots_saveable, the shortest segments that fit and
 * nothing_saveable, each prepared and held to the budget: *done when one fits (it is t's);
 * otherwise *best and *best_policy the least seen, and no step is left. */
static clrun_status ladder(clrun_train *t, const clrun_graph *model,
                           const clrun_train_graph_options *options, const budget *b,
                           const char *first, const char *given, bool final, bool *done,
                           uint64_t *best, const char **best_policy, char *err, size_t errlen)
{
    bool fits;
    uint64_t held;
    *done = false;
    if (t->exec != NULL)
        drop_step(t);
    clrun_status s = try_step(t, model, options, first, b, &fits, &held, err, errlen);
    if (s != CLRUN_OK)
        return s;
    if (fits) {
        *done = true;
        return keep_step(t, given, held, err, errlen);
    }
    int32_t S = (int32_t)ceil(sqrt((double)(t->tg.forward_nodes > 0 ? t->tg.forward_nodes : 1)));
    drop_step(t);
    if (held < *best) {
        *best = held;
        *best_policy = first;
    }
    if (given)
        return CLRUN_OK;
    /* each activation its own way, the fewest that make the step fit */
    int32_t ways;
    char *mix = NULL;
    uint64_t mixed = *best;
    if ((s = count_ways(t, model, options, &ways, err, errlen)) != CLRUN_OK ||
        (ways > 0 && (s = search(t, model, options, b, PER_TENSOR, 1, ways, &mix, &mixed, err,
                                 errlen)) != CLRUN_OK))
        return s;
    if (mix != NULL) {
        t->remat_policy = mix;
        *done = true;
        return CLRUN_OK;
    }
    if (mixed < *best) {
        *best = mixed;
        *best_policy = PER_TENSOR;
    }
    if ((s = try_step(t, model, options, "dots_saveable", b, &fits, &held, err, errlen)) != CLRUN_OK)
        return s;
    if (fits) {
        *done = true;
        return keep_step(t, "dots_saveable", held, err, errlen);
    }
    drop_step(t);
    if (held < *best) {
        *best = held;
        *best_policy = "dots_saveable";
    }
    /* segments ending at cuts first (they keep the narrowest tensors the rest is made from),
     * then segments of K nodes wherever they end */
    static const char *const kinds[] = {"cuts", "every"};
    for (int k = 0; k < 2; k++) {
        char *policy = NULL;
        uint64_t searched = *best;
        if (S >= 2 &&
            (s = search(t, model, options, b, kinds[k], 2, S, &policy, &searched, err, errlen)) != CLRUN_OK)
            return s;
        if (policy != NULL) {
            bool offloaded, kept;
            s = weigh_offload(t, model, options, b, policy, &offloaded, &kept, err, errlen);
            if (s != CLRUN_OK || offloaded || !kept) {
                free(policy);
                if (s != CLRUN_OK)
                    return s;
                if (offloaded) {
                    *done = true;
                    return keep_step(t, HOST_OFFLOAD, t->planned_peak, err, errlen);
                }
                continue; /* it fitted before: a planner cut short by its time */
            }
            t->remat_policy = policy;
            *done = true;
            return CLRUN_OK;
        }
        if (searched < *best) {
            *best = searched;
            *best_policy = k == 0 ? "cuts:K segments" : "every:K segments";
        }
    }
    if ((s = try_step(t, model, options, "nothing_saveable", b, &fits, &held, err, errlen)) != CLRUN_OK)
        return s;
    if (fits) {
        bool offloaded, kept;
        t->planned_peak = held;
        s = weigh_offload(t, model, options, b, "nothing_saveable", &offloaded, &kept, err, errlen);
        if (s != CLRUN_OK)
            return s;
        if (offloaded || kept) {
            *done = true;
            return keep_step(t, offloaded ? HOST_OFFLOAD : "nothing_saveable", t->planned_peak,
                             err, errlen);
        }
        held = UINT64_MAX; /* it fitted before: a planner cut short by its time */
    } else {
        drop_step(t);
    }
    if (held < *best) {
        *best = held;
        *best_policy = "nothing_saveable";
    }
    /* recomputation met no budget, and no more of the trainer's state can go to host memory
     * (`final`): the activations to host memory and back instead (a recomputed segment holds
     * what it is made from beside it; a copy back, the tensor alone) */
    if (!final)
        return CLRUN_OK;
    if ((s = try_step(t, model, options, HOST_OFFLOAD, b, &fits, &held, err, errlen)) != CLRUN_OK)
        return s;
    if (fits) {
        *done = true;
        return keep_step(t, HOST_OFFLOAD, held, err, errlen);
    }
    drop_step(t);
    if (held < *best) {
        *best = held;
        *best_policy = HOST_OFFLOAD;
    }
    return CLRUN_OK;
}

/* ---- the default: recomputation chosen by the step (no --remat, no budget binding) ----
 * The candidates are prepared beside the step as it is and compared by their lower bound (the
 * live bytes at the fullest step, scratch included, which the pooled modes' peak meets); the
 * one that lowers it most is taken, if it lowers it by at least CLRUN__AUTO_MIN_SAVING bytes and
 * CLRUN__AUTO_MIN_FRACTION of it below the cheaper ones' (candidates go cheapest first), and
 * repeats at most CLRUN__AUTO_MAX_FLOPS of the step's arithmetic (a forward pass is about a
 * third of a step's) (clrun__offload_node_flops, as clrun_remat_report.repeated_flops counts it). A step
 * whose activations are below the saving is left alone without a try. The repeated nodes run
 * the same kernels on the same values: the step's bits do not change. */
#define CLRUN__AUTO_MIN_SAVING (4u << 20)
#define CLRUN__AUTO_MIN_FRACTION 0.05
#define CLRUN__AUTO_MAX_FLOPS 0.35

/* cheapest first: the elementwise work after the products, then Chen's segments (at most about
 * one more forward pass) */
static const char *const auto_candidates[] = {"dots_saveable", "sqrt_n"};

static uint64_t step_flops(const clrun_graph *g)
{
    uint64_t sum = 0;
    for (int32_t n = 0; n < g->node_count; n++)
        sum += clrun__offload_node_flops(g, n);
    return sum;
}

static uint64_t step_lower_bound(const clrun_train *t)
{
    clrun_exec_stats st;
    return clrun_exec_stats_get(t->exec, &st) == CLRUN_OK ? st.lower_bound_bytes : UINT64_MAX;
}

/* With t's step (policy none) prepared: the candidate that meets the rule above becomes t's
 * step and *policy its name; else t's step stays and *policy is NULL. A candidate that cannot
 * be prepared is passed over. */
static clrun_status auto_remat(clrun_train *t, const clrun_graph *model,
                               const clrun_train_graph_options *options, const char **policy,
                               char *err, size_t errlen)
{
    *policy = NULL;
    uint64_t base = step_lower_bound(t);
    if (base == UINT64_MAX || base < t->slot_bytes + CLRUN__AUTO_MIN_SAVING)
        return CLRUN_OK; /* the activations are fewer bytes than the least saving */
    double flops = (double)step_flops(t->tg.graph);
    clrun__train_graph best_tg = t->tg;
    clrun_exec *best_exec = t->exec;
    uint64_t best = base;
    t->tg = (clrun__train_graph){.correct_output = -1};
    t->exec = NULL;
    for (size_t i = 0; i < sizeof auto_candidates / sizeof *auto_candidates; i++) {
        bool fits;
        uint64_t held;
        char why[256];
        if (try_step(t, model, options, auto_candidates[i], NULL, &fits, &held, why, sizeof why) != CLRUN_OK)
            continue; /* try_step left no step */
        uint64_t bound = step_lower_bound(t);
        bool better = bound != UINT64_MAX && bound + CLRUN__AUTO_MIN_SAVING <= best &&
                      (double)(best - bound) >= CLRUN__AUTO_MIN_FRACTION * (double)base &&
                      (double)t->tg.remat.repeated_flops <= CLRUN__AUTO_MAX_FLOPS * flops;
        if (!better) {
            drop_step(t);
            continue;
        }
        clrun_exec_destroy(best_exec);
        clrun__train_graph_free(&best_tg);
        best_tg = t->tg;
        best_exec = t->exec;
        best = bound;
        *policy = auto_candidates[i];
        t->tg = (clrun__train_graph){.correct_output = -1};
        t->exec = NULL;
    }
    t->tg = best_tg;
    t->exec = best_exec;
    (void)err;
    (void)errlen;
    return CLRUN_OK;
}

clrun_status clrun__train_build_step(clrun_train *t, const clrun_graph *model,
                                     const clrun_train_graph_options *options, char *err,
                                     size_t errlen)
{
    const char *given = options->remat && options->remat[0] ? options->remat : NULL;
    const char *first = given ? given : "none";
    budget b = {.bytes = options->memory_budget};
    /* Where a budget or the pool's limit binds, empty chunks are given back first, so that what
     * the trainer's blocks reserve is measured the same whatever the pool held before; otherwise
     * the pool keeps them for the step. */
    uint64_t limit;
    (void)clrun__exec_pool_held(t->ctx, &limit);
    if (b.bytes != 0 || limit != 0)
        clrun_pool_trim(t->ctx, NULL);
    uint64_t before = clrun__exec_pool_held(t->ctx, &limit);
    bool fits;
    uint64_t held, best = UINT64_MAX;
    clrun_exec_mode mode = t->options.exec.mode;
    b.planned = mode == CLRUN_EXEC_CONTEXT || mode == CLRUN_EXEC_PLANNED;
    b.share = b.planned && clrun__train_eval_shares(t);
    /* the step as asked, in the executor's own mode: kept when no budget binds */
    clrun_status s = try_step(t, model, options, first, NULL, &fits, &held, err, errlen);
    if (s == CLRUN_ERROR_OUT_OF_MEMORY && b.bytes == 0 && b.planned) {
        /* a planned arena past the pool's limit: measured in pooled mode, then fitted */
        t->options.exec.mode = CLRUN_EXEC_POOLED;
        clrun_pool_trim(t->ctx, NULL);
        before = clrun__exec_pool_held(t->ctx, &limit);
        s = try_step(t, model, options, first, NULL, &fits, &held, err, errlen);
        if (s == CLRUN_OK && (s = slots(t, err, errlen)) == CLRUN_OK && !pool_budget(t, before, &b)) {
            drop_step(t);
            snprintf(err, errlen, "train: the step's planned arena does not fit the pool's limit");
            return CLRUN_ERROR_OUT_OF_MEMORY;
        }
    } else if (s == CLRUN_OK && (s = slots(t, err, errlen)) == CLRUN_OK && b.bytes == 0 &&
               !pool_budget(t, before, &b)) {
        const char *chosen = given;
        bool split = t->options.reduce != NULL || t->options.split_update;
        if (given == NULL && !split && (s = auto_remat(t, model, options, &chosen, err, errlen)) != CLRUN_OK)
            return s;
        if (chosen != given)
            t->remat_auto = true;
        return keep_step(t, chosen, 0, err, errlen);
    }
    bool on_device = true; /* the trainer's blocks fit on the device */
    if (s == CLRUN_ERROR_OUT_OF_MEMORY && t->exec != NULL) {
        /* the trainer's blocks alone are past the pool's limit: host memory must take some */
        if (b.bytes == 0) {
            b.from_pool = true;
            b.limit = limit;
            b.held = before;
            b.bytes = limit > before ? limit - before : 0;
        }
        clrun__train_free_slots(t);
        t->slot_reserved = t->slot_bytes;
        on_device = false;
        s = CLRUN_OK;
    }
    if (s != CLRUN_OK) {
        if (t->exec != NULL)
            drop_step(t);
        return s;
    }
    held_bytes h0;
    if (b.planned && (s = eval_bytes(t, &b, err, errlen)) != CLRUN_OK) {
        drop_step(t);
        return s;
    }
    if ((s = measure(t, &b, &h0, err, errlen)) != CLRUN_OK) {
        drop_step(t);
        return s;
    }
    if (b.planned) {
        t->options.exec.mode = CLRUN_EXEC_PLANNED;
        if (t->options.exec.plan_time_limit_s > CLRUN__TRIAL_PLAN_SECONDS)
            t->options.exec.plan_time_limit_s = CLRUN__TRIAL_PLAN_SECONDS;
        t->budget_planned = true;
    }
    /* On the device, then the optimizer state in host memory, then the parameters too. */
    held_bytes h = h0;
    bool feasible = false;
    const char *best_policy = first;
    uint64_t movable[CLRUN__OFFLOAD_PARAMS + 1];
    for (int k = 0; k <= CLRUN__OFFLOAD_PARAMS; k++)
        movable[k] = clrun__train_offloadable(t, k);
    int level = 0;
    for (; level <= CLRUN__OFFLOAD_PARAMS; level++) {
        if (level > 0 && movable[level] == movable[level - 1])
            continue; /* nothing more to move */
        h = h0;
        if (level > 0) {
            s = reslot(t, model, options, level, err, errlen);
            if (s == CLRUN_ERROR_OUT_OF_MEMORY) { /* what stays on the device does not fit */
                h.inputs = t->slot_bytes;
                continue;
            }
            if (s != CLRUN_OK)
                return s;
        } else if (!on_device) {
            continue;
        }
        h.inputs = b.from_pool ? t->slot_reserved : t->slot_bytes;
        if (least(&b, &h) > b.bytes)
            continue;
        feasible = true;
        bool done, final = true; /* no later level moves more */
        for (int k = level + 1; k <= CLRUN__OFFLOAD_PARAMS; k++)
            final = final && movable[k] == movable[level];
        s = ladder(t, model, options, &b, first, given, final, &done, &best, &best_policy, err,
                   errlen);
        if (s != CLRUN_OK || done)
            return s;
    }
    if (t->exec != NULL)
        drop_step(t);
    if (!feasible)
        return refuse_floor(&b, &h, level > 1, err, errlen);
    char what[160], need[32];
    describe(&b, what, sizeof what);
    if (best == UINT64_MAX)
        snprintf(need, sizeof need, "a larger arena");
    else
        human(best, need, sizeof need);
    snprintf(err, errlen, "train: the step does not fit %s: at best it needs %s (remat %s)%s", what,
             need, best_policy,
             given ? "; without --remat the trainer searches" : " whatever is recomputed or offloaded");
    return b.from_pool ? CLRUN_ERROR_OUT_OF_MEMORY : CLRUN_ERROR_INVALID_ARGUMENT;
}
