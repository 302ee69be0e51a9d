/* An executor under a memory budget (clrun_exec_options.memory_budget): what it holds, its
 * constants and its arena (planned mode, the default under a budget), must fit the budget. When
 * the graph as given does not, tensors alive across the moment of its peak are dropped there and
 * recomputed right before their next reader (clrun_graph_remat on a copy of the graph, with the
 * peak's node as the boundary), from tensors that are alive there anyway, the graph's inputs and
 * its constants. The dropped set grows from the largest tensor down (a binary search on how many,
 * each candidate prepared and measured: about log2(n) preparations, which reuse the kernels the
 * first built) until the executor fits; the repeated nodes run the same ops on the same values,
 * so the outputs keep their bits. A dropped tensor whose node costs more to run again than its
 * bytes cost to move twice (graph/offload.h: CLRUN_OFFLOAD_RATE) is offloaded instead: copied to
 * host memory after it is written and back before its next reader; when that mix meets no
 * budget, every dropped tensor is offloaded (a copy back holds the tensor alone, a
 * recomputation what it is made from as well). A budget that no such rewrite meets is refused,
 * with the least found and the constants named.
 *
 * The peak may move: with the tensors across the first peak dropped, another moment (a second
 * wide region with a skip of its own) may hold more than the budget. When no count at a cut
 * meets it, the count that held least stays, and a next cut is made the same way where the
 * peak of that trial's executor was (up to MAX_CUTS). Each trial rebuilds
 * the graph from the one given, a fresh copy with the cuts applied in order in place: remat and
 * offload rewrite a graph in place and leave its declaration order one that runs (remat permutes
 * the node array), so a rewritten graph is rewritten again but never copied, and the same
 * cuts give the same tensor ids each time, those the next cut was chosen by. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clrun/exec.h>
#include <clrun/plan.h>
#include <clrun/remat.h>

#include "core/error.h"
#include "core/util.h"
#include "exec/exec_internal.h"
#include "exec/exec_share.h"
#include "grad/grad.h"
#include "graph/graph.h"
#include "graph/offload.h"

/* What a prepared executor holds: its constants, and its arena (planned mode) or the planner's
 * layout of its buffers (the other modes, whose blocks come at run time: an estimate). */
static clrun_status held_by(clrun_exec *e, uint64_t *held)
{
    clrun_exec_stats st;
    clrun_status s = clrun_exec_stats_get(e, &st);
    if (s != CLRUN_OK)
        return s;
    if (e->options.mode == CLRUN_EXEC_PLANNED) {
        *held = st.constant_bytes + st.arena_bytes;
        return CLRUN_OK;
    }
    uint64_t span = 0;
    s = clrun__exec_plan_span(e, false, CLRUN__TRIAL_PLAN_SECONDS, 0, &span);
    if (s == CLRUN_OK)
        *held = st.constant_bytes + span;
    return s;
}

clrun_status clrun__exec_plan_span(const clrun_exec *exec, bool inputs, double seconds,
                                   uint64_t capacity, uint64_t *span)
{
    clrun_plan_buffer *buffers = NULL;
    size_t n = 0;
    clrun_status s = clrun_exec_plan_buffers(exec, inputs, &buffers, &n, NULL);
    if (s != CLRUN_OK)
        return s;
    uint64_t *offsets = malloc((n ? n : 1) * sizeof *offsets);
    if (offsets == NULL) {
        free(buffers);
        return clrun__fail(exec->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory planning %zu buffers", n);
    }
    clrun_plan_options po = CLRUN_PLAN_OPTIONS_DEFAULT;
    po.time_limit_s = seconds;
    po.capacity = capacity;
    clrun_plan_result r;
    s = clrun_plan_solve(buffers, n, &po, offsets, &r);
    if (s == CLRUN_OK)
        *span = r.peak_bytes;
    else
        s = clrun__fail(exec->ctx, s, "planning the executor's buffers: %s", clrun_last_error(NULL));
    free(offsets);
    free(buffers);
    return s;
}

/* The step at which the most bytes are alive (inputs apart), from the layout's buffers; -1 when
 * out of host memory or there is no step. */
static int32_t peak_step(const clrun_exec_buffer_info *info, int32_t n, int32_t steps)
{
    if (steps <= 0)
        return -1;
    int64_t *change = calloc((size_t)steps + 1, sizeof *change); /* live bytes' change at k */
    if (change == NULL)
        return -1;
    for (int32_t i = 0; i < n; i++) {
        if (info[i].is_input)
            continue;
        int32_t first = info[i].first_step < 0 ? 0 : info[i].first_step;
        int32_t last = info[i].last_step < steps ? info[i].last_step : steps - 1;
        if (first > last)
            continue;
        change[first] += (int64_t)info[i].bytes;
        change[last + 1] -= (int64_t)info[i].bytes;
    }
    int32_t best = 0;
    int64_t live = 0, most = -1;
    for (int32_t k = 0; k < steps; k++) {
        live += change[k];
        if (live > most) {
            most = live;
            best = k;
        }
    }
    free(change);
    return best;
}

typedef struct candidate {
    clrun_tensor_id t;
    uint64_t bytes;
    uint64_t flops;    /* what recomputing it repeats: its node's arithmetic and that of the
                          inputs dead at the boundary it needs again (recompute_flops) */
    bool offload_only; /* an output of a node of several: recomputation keeps those */
} candidate;

static int by_bytes(const void *a, const void *b)
{
    const candidate *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes < y->bytes ? 1 : -1;
    return (x->t > y->t) - (x->t < y->t);
}

/* The rewrite's choice on graph g: the boundary (the node after the peak's) and the tensors
 * that cross it, largest first. Only tensors remat may drop: made by a one-output node before
 * the boundary, read at or after it, neither an input, a constant nor an output. */
typedef struct choice {
    int32_t boundary;
    candidate *crossing;
    int32_t count;
    clrun_tensor_id *kept;   /* crossing tensors never dropped: those the peak's node writes */
    int32_t kept_count;
} choice;

/* What recomputing t after the boundary repeats, estimated: its node's arithmetic and, for each
 * input made before the boundary that is dead there (not read at or after it), that input's
 * own, depth first without recursion; an input alive there (or an input of the graph, or a
 * constant) costs nothing. memo[u] (UINT64_MAX: not yet) keeps each tensor's. */
static uint64_t recompute_flops(const clrun_graph *g, int32_t boundary, const int32_t *last,
                                uint64_t *memo, int32_t *stack, clrun_tensor_id t)
{
    int32_t depth = 0;
    stack[depth++] = t;
    while (depth > 0) {
        int32_t top = stack[depth - 1];
        const clrun__node *node = &g->nodes[g->tensors[top].producer];
        uint64_t sum = clrun__offload_node_flops(g, g->tensors[top].producer);
        bool pending = false;
        for (int i = 0; i < node->input_count; i++) {
            int32_t u = node->inputs[i];
            const clrun__tensor *x = &g->tensors[u];
            if (x->kind != CLRUN__TENSOR_INTERMEDIATE || x->producer < 0 || last[u] >= boundary)
                continue; /* alive at the boundary, or never computed */
            if (memo[u] == UINT64_MAX) {
                stack[depth++] = u; /* a DAG: never on the stack already */
                pending = true;
                break;
            }
            sum = sum + memo[u] < sum ? UINT64_MAX - 1 : sum + memo[u];
        }
        if (pending)
            continue;
        memo[top] = sum;
        depth--;
    }
    return memo[t];
}

static clrun_status choose(clrun_exec *e, const clrun_graph *g, choice *c)
{
    int32_t n = 0;
    clrun_status s = clrun_exec_layout(e, NULL, 0, &n);
    clrun_exec_buffer_info *info = s == CLRUN_OK ? calloc((size_t)n + 1, sizeof *info) : NULL;
    if (info == NULL || (s = clrun_exec_layout(e, info, n, &n)) != CLRUN_OK) {
        free(info);
        return s == CLRUN_OK ? CLRUN_ERROR_OUT_OF_HOST_MEMORY : s;
    }
    int32_t peak = peak_step(info, n, e->schedule.steps);
    free(info);
    c->boundary = -1;
    if (peak < 0)
        return e->schedule.steps > 0 ? CLRUN_ERROR_OUT_OF_HOST_MEMORY : CLRUN_OK;
    /* the peak step's node, named by the tensor it writes: the boundary follows it in g */
    const clrun__node *node = &e->graph->nodes[e->schedule.order[peak]];
    clrun_tensor_id peak_out = clrun__graph_find_ident(g, e->graph->tensors[node->outputs[0]].name);
    c->boundary = peak_out >= 0 && g->tensors[peak_out].producer >= 0 ? g->tensors[peak_out].producer + 1 : -1;
    if (c->boundary < 0)
        return CLRUN_OK; /* nothing to cut */
    int32_t *last = malloc(sizeof *last * (size_t)(g->tensor_count + 1));
    uint64_t *memo = malloc(sizeof *memo * (size_t)(g->tensor_count + 1));
    int32_t *stack = malloc(sizeof *stack * (size_t)(g->tensor_count + 1));
    c->crossing = malloc(sizeof *c->crossing * (size_t)(g->tensor_count + 1));
    c->kept = malloc(sizeof *c->kept * (size_t)(g->tensor_count + 1));
    if (last == NULL || memo == NULL || stack == NULL || c->crossing == NULL || c->kept == NULL) {
        free(last);
        free(memo);
        free(stack);
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    for (int32_t t = 0; t < g->tensor_count; t++) {
        last[t] = -1;
        memo[t] = UINT64_MAX;
    }
    for (int32_t k = 0; k < g->node_count; k++)
        for (int i = 0; i < g->nodes[k].input_count; i++)
            last[g->nodes[k].inputs[i]] = k;
    for (int32_t t = 0; t < g->tensor_count; t++) {
        const clrun__tensor *x = &g->tensors[t];
        if (x->kind != CLRUN__TENSOR_INTERMEDIATE || x->is_output || x->producer < 0 ||
            x->producer >= c->boundary || last[t] < c->boundary ||
            clrun__op_on_host(g->nodes[x->producer].op)) /* an earlier cut's host copy */
            continue;
        bool several = g->nodes[x->producer].output_count != 1;
        if (x->producer == c->boundary - 1) { /* written at the peak: dropping it saves nothing */
            if (!several)
                c->kept[c->kept_count++] = t;
        } else {
            c->crossing[c->count++] = (candidate){t, clrun_tensor_bytes(&x->type),
                                                  recompute_flops(g, c->boundary, last, memo, stack, t),
                                                  several};
        }
    }
    free(last);
    free(memo);
    free(stack);
    qsort(c->crossing, (size_t)c->count, sizeof *c->crossing, by_bytes);
    return CLRUN_OK;
}

/* Whether candidate i, when dropped, is offloaded rather than recomputed: where recomputation
 * cannot (a node of several outputs), costs more at `rate`, or `force`. */
static bool offloads(const choice *c, int32_t i, double rate, bool force)
{
    const candidate *x = &c->crossing[i];
    return force || x->offload_only || clrun__offload_prefers(x->flops, x->bytes, rate);
}

/* What the rewrites did, summed over the cuts. */
typedef struct rewrite {
    clrun_remat_report remat;
    clrun__offload_report offload;
} rewrite;

/* One cut: the choice made on the graph the cuts before it left, and how many of its largest
 * crossing tensors are dropped there (force: all of them offloaded). */
typedef struct cut {
    choice c;
    int32_t drop;
    bool force;
} cut;

/* The most cuts tried: each one after the first is made where the peak moved to. */
enum { MAX_CUTS = 4 };

static void cut_free(cut *k)
{
    free(k->c.crossing);
    free(k->c.kept);
    memset(k, 0, sizeof *k);
}

/* Appends ",NAME" (or "NAME" first) to policy at *at; `named` counts them. */
static void name_into(char *policy, size_t length, size_t *at, int32_t *named, const char *name)
{
    int w = snprintf(policy + *at, length - *at, "%s%s", *named ? "," : "", name);
    *at += w > 0 ? (size_t)w : 0;
    ++*named;
}

/* Cut k applied to g in place: its `drop` largest crossing tensors dropped at its boundary,
 * each offloaded to host memory and back or recomputed after the boundary. g is the graph the
 * cuts before it left (the graph k was chosen on, made again the same way: the same ids). The
 * remat policy keeps the crossing tensors not dropped and every host copy made before the
 * boundary (this cut's and the earlier cuts'), so that no copy to host is ever repeated. */
static clrun_status apply_cut(clrun_graph *g, const cut *k, double rate, int32_t lead,
                              rewrite *report)
{
    const choice *c = &k->c;
    /* the offloaded first: their copies keep the boundary's node `offloaded` nodes later */
    int32_t offloaded = 0, recomputed = 0;
    clrun_tensor_id *moved = malloc(sizeof *moved * (size_t)(c->count + 1));
    clrun_status s = moved ? CLRUN_OK : CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    for (int32_t i = 0; s == CLRUN_OK && i < k->drop; i++) {
        if (offloads(c, i, rate, k->force))
            moved[offloaded++] = c->crossing[i].t;
        else
            recomputed++;
    }
    clrun__offload_report off = {0};
    if (s == CLRUN_OK && offloaded > 0)
        s = clrun__graph_offload_lead(g, c->boundary, moved, offloaded, lead, NULL, &off);
    free(moved);
    int32_t boundary = c->boundary + offloaded;
    clrun_remat_report rr = {0};
    char *policy = NULL;
    if (s == CLRUN_OK && recomputed > 0) {
        size_t length = 32;
        for (int32_t i = 0; i < c->kept_count; i++)
            length += strlen(g->tensors[c->kept[i]].name) + 1;
        for (int32_t i = k->drop; i < c->count; i++)
            if (!c->crossing[i].offload_only) /* remat keeps those anyway */
                length += strlen(g->tensors[c->crossing[i].t].name) + 1;
        for (int32_t n = 0; n < boundary; n++)
            if (clrun__op_on_host(g->nodes[n].op))
                length += strlen(g->tensors[g->nodes[n].outputs[0]].name) + 1;
        policy = malloc(length);
        if (policy == NULL)
            s = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        size_t at = 0;
        int32_t named = 0;
        if (policy) {
            int w = snprintf(policy, length, "names:");
            at = w > 0 ? (size_t)w : 0;
        }
        for (int32_t i = 0; policy && i < c->kept_count; i++)
            name_into(policy, length, &at, &named, g->tensors[c->kept[i]].name);
        for (int32_t i = k->drop; policy && i < c->count; i++)
            if (!c->crossing[i].offload_only)
                name_into(policy, length, &at, &named, g->tensors[c->crossing[i].t].name);
        for (int32_t n = 0; policy && n < boundary; n++)
            if (clrun__op_on_host(g->nodes[n].op))
                name_into(policy, length, &at, &named, g->tensors[g->nodes[n].outputs[0]].name);
        if (policy && named == 0) /* every one kept is a several-output node's: kept anyway */
            snprintf(policy, length, "nothing_saveable");
        if (s == CLRUN_OK)
            s = clrun_graph_remat(g, boundary, policy, &rr);
    }
    free(policy);
    if (s == CLRUN_OK) {
        report->remat.dropped += rr.dropped;
        report->remat.repeated_nodes += rr.repeated_nodes;
        report->remat.dropped_bytes += rr.dropped_bytes;
        report->remat.repeated_flops += rr.repeated_flops;
        report->offload.offloaded += off.offloaded;
        report->offload.bytes += off.bytes;
        report->offload.added_before += off.added_before;
    }
    return s;
}

/* A copy of `graph` with cuts[0..count) applied in order, the last one's copies back `lead`
 * nodes early (the earlier cuts' as they were chosen: the boundaries after them are where they
 * were found). */
static clrun_status rewritten(const clrun_graph *graph, const cut *cuts, int count, double rate,
                              int32_t lead, rewrite *report, clrun_graph **out, char *err,
                              size_t errlen)
{
    *out = NULL;
    memset(report, 0, sizeof *report);
    clrun_graph *g = NULL;
    clrun_status s = clrun_graph_create(graph->name, &g);
    if (s == CLRUN_OK)
        s = clrun__grad_copy(graph, g, NULL, false, err, errlen);
    for (int32_t i = 0; s == CLRUN_OK && i < graph->output_count; i++)
        s = clrun_graph_mark_output(g, graph->outputs[i]);
    for (int i = 0; s == CLRUN_OK && i < count; i++)
        s = apply_cut(g, &cuts[i], rate, i == count - 1 ? lead : 0, report);
    if (s == CLRUN_OK)
        s = clrun_graph_validate(g);
    if (s != CLRUN_OK && err[0] == '\0')
        snprintf(err, errlen, "%s", g ? clrun_graph_last_error(g) : "out of host memory");
    if (s != CLRUN_OK) {
        clrun_graph_destroy(g);
        return s;
    }
    *out = g;
    return CLRUN_OK;
}

/* e->offloaded: the tensors of e's own graph that an `offload` node copies out, in order. */
/* How many nodes before its reader a copy back to the device is issued, where the budget
 * allows, when the copies run beside the kernels (CLRUN_OFFLOAD_OVERLAP): the first of these
 * that fits. */
static const int32_t offload_leads[] = {3, 1};

/* The cuts that met the budget, made again with the last cut's copies back a few nodes early:
 * where that still fits, *best_graph and *best_report become it; else they stay. */
static clrun_status early_copies(clrun_context *ctx, const clrun_graph *graph, const cut *cuts,
                                 int count, double rate, const clrun_exec_options *o,
                                 uint64_t budget, clrun_graph **best_graph, rewrite *best_report,
                                 char *err, size_t errlen)
{
    clrun_status s = CLRUN_OK;
    for (size_t i = 0; s == CLRUN_OK && i < sizeof offload_leads / sizeof *offload_leads; i++) {
        clrun_graph *g = NULL;
        rewrite report;
        err[0] = '\0';
        s = rewritten(graph, cuts, count, rate, offload_leads[i], &report, &g, err, errlen);
        clrun_exec *trial = NULL;
        if (s == CLRUN_OK)
            s = clrun__exec_create_beside(ctx, g, o, NULL, &trial);
        uint64_t h = UINT64_MAX;
        if (s == CLRUN_OK)
            s = held_by(trial, &h);
        clrun_exec_destroy(trial);
        if (s != CLRUN_OK && s != CLRUN_ERROR_OUT_OF_HOST_MEMORY) { /* as not fitting */
            s = CLRUN_OK;
        } else if (s == CLRUN_OK && h <= budget) {
            clrun_graph_destroy(*best_graph);
            *best_graph = g;
            *best_report = report;
            return CLRUN_OK;
        }
        clrun_graph_destroy(g);
    }
    return s;
}

static clrun_status offloaded_names(clrun_exec *e)
{
    const clrun_graph *g = e->owned_graph;
    e->offloaded = calloc((size_t)g->node_count + 1, sizeof *e->offloaded);
    if (e->offloaded == NULL)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    for (int32_t k = 0; k < g->node_count; k++)
        if (clrun__op_on_host(g->nodes[k].op))
            e->offloaded[e->offloaded_count++] = clrun__tensor_label(&g->tensors[g->nodes[k].inputs[0]]);
    return CLRUN_OK;
}

/* e->recomputed: the tensors of e's own graph that have a recomputed copy, in id order. */
static clrun_status recomputed_names(clrun_exec *e)
{
    const clrun_graph *g = e->owned_graph;
    e->recomputed = calloc((size_t)g->tensor_count + 1, sizeof *e->recomputed);
    if (e->recomputed == NULL)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    for (int32_t t = 0; t < g->tensor_count; t++) {
        size_t length = clrun_remat_copy_of(g->tensors[t].name);
        char name[CLRUN__GRAPH_NAME_MAX + 1];
        if (length == 0 || length > CLRUN__GRAPH_NAME_MAX)
            continue;
        memcpy(name, g->tensors[t].name, length);
        name[length] = '\0';
        clrun_tensor_id original = clrun__graph_find_ident(g, name);
        if (original >= 0)
            e->recomputed[e->recomputed_count++] = clrun__tensor_label(&g->tensors[original]);
    }
    return CLRUN_OK;
}

clrun_status clrun__exec_create_within(clrun_context *ctx, const clrun_graph *graph,
                                       const clrun_exec_options *options, clrun_exec **out)
{
    clrun_exec_options o = *options;
    uint64_t budget = o.memory_budget;
    o.memory_budget = 0;
    if (o.mode == CLRUN_EXEC_CONTEXT)
        o.mode = CLRUN_EXEC_PLANNED; /* what it holds is then known before it runs */
    double limit = o.plan_time_limit_s;
    clrun_exec *e = NULL;
    clrun_status s = clrun__exec_create_beside(ctx, graph, &o, NULL, &e);
    if (s == CLRUN_ERROR_OUT_OF_MEMORY && o.mode == CLRUN_EXEC_PLANNED) {
        /* its arena is past the pool's limit: measured by the planner's layout instead */
        clrun_exec_options measure = o;
        measure.mode = CLRUN_EXEC_POOLED;
        s = clrun__exec_create_beside(ctx, graph, &measure, NULL, &e);
    }
    uint64_t held = 0;
    if (s == CLRUN_OK)
        s = held_by(e, &held);
    if (s != CLRUN_OK) {
        clrun_exec_destroy(e);
        return s;
    }
    e->stats.budget_bytes = budget;
    e->stats.held_bytes = held;
    if (held <= budget) {
        *out = e;
        return CLRUN_OK;
    }
    clrun_exec_stats first;
    clrun_exec_stats_get(e, &first);
    char b[32], l[32], k[32], g0[32];
    if (clrun__graph_has_guards(graph)) { /* a copy would run the guarded nodes unguarded */
        clrun_exec_destroy(e);
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_MEMORY,
                           "a memory budget of %s is below what the graph holds (%s), and its "
                           "guarded nodes (an If decided at run time, a Loop run at run time) cannot be "
                           "recomputed",
                           clrun__format_bytes(budget, b, sizeof b),
                           clrun__format_bytes(held, g0, sizeof g0));
    }
    cut cuts[MAX_CUTS];
    memset(cuts, 0, sizeof cuts);
    s = choose(e, graph, &cuts[0].c);
    clrun_exec_destroy(e);
    e = NULL;
    if (s != CLRUN_OK) {
        cut_free(&cuts[0]);
        return clrun__fail(ctx, s, "memory budget: out of host memory choosing what to recompute");
    }
    /* cut by cut: at each, a binary search on how many of the largest crossing tensors to drop
     * (the cuts before it as they were left); each trial is gone before the next, so that none
     * holds pool memory another needs. When none meets the budget, the count that held least
     * stays and the next cut is chosen where that graph's peak now is. */
    clrun_exec *best = NULL;
    clrun_graph *best_graph = NULL;
    rewrite best_report = {0};
    uint64_t least = held;
    int32_t best_drop = 0;
    bool best_force = false;
    o.plan_time_limit_s = limit < CLRUN__TRIAL_PLAN_SECONDS ? limit : CLRUN__TRIAL_PLAN_SECONDS;
    char err[1024] = "";
    double rate = CLRUN__OFFLOAD_RATE_FALLBACK;
    if (clrun__exec_offload_rate(ctx, &rate, NULL) != CLRUN_OK) {
        clrun__log(CLRUN_LOG_WARN, "%s: the offload rate taken is %g", clrun_last_error(ctx),
                   CLRUN__OFFLOAD_RATE_FALLBACK);
        rate = CLRUN__OFFLOAD_RATE_FALLBACK;
    }
    int count = 0; /* cuts tried */
    for (int level = 0; level < MAX_CUTS && best_graph == NULL && s == CLRUN_OK; level++) {
        cut *at = &cuts[level];
        if (at->c.boundary < 0 || at->c.count == 0)
            break; /* nothing crosses the peak: no cut there */
        count = level + 1;
        uint64_t least_here = UINT64_MAX;
        int32_t least_drop = 0;
        bool least_force = false;
        /* first each tensor the cheaper way at the device's rate; when that meets no budget and
         * some were recomputed, every one offloaded (a copy back holds only the tensor, where a
         * recomputation may hold what it is made from as well) */
        bool some_recomputed = false;
        for (int32_t i = 0; i < at->c.count; i++)
            some_recomputed = some_recomputed || !offloads(&at->c, i, rate, false);
        for (int pass = 0; pass < 2 && best_graph == NULL && s == CLRUN_OK; pass++) {
            at->force = pass == 1;
            if (at->force && !some_recomputed)
                break;
            int32_t lo = 1, hi = at->c.count;
            while (lo <= hi && s == CLRUN_OK) {
                int32_t mid = lo + (hi - lo) / 2;
                clrun_graph *g = NULL;
                rewrite report;
                err[0] = '\0';
                at->drop = mid;
                s = rewritten(graph, cuts, count, rate, 0, &report, &g, err, sizeof err);
                if (s != CLRUN_OK)
                    break;
                clrun_exec *trial = NULL;
                s = clrun__exec_create_beside(ctx, g, &o, NULL, &trial);
                uint64_t h = 0;
                if (s == CLRUN_OK)
                    s = held_by(trial, &h);
                if (s == CLRUN_ERROR_OUT_OF_MEMORY) { /* too large for the pool: as not fitting */
                    s = CLRUN_OK;
                    h = UINT64_MAX;
                }
                if (s == CLRUN_OK && h < least_here && h > budget && level + 1 < MAX_CUTS) {
                    /* the least so far: where its peak now is, the next cut should none fit */
                    cut_free(&cuts[level + 1]);
                    s = choose(trial, g, &cuts[level + 1].c);
                }
                clrun_exec_destroy(trial);
                if (s != CLRUN_OK) {
                    clrun_graph_destroy(g);
                    break;
                }
                least = h < least ? h : least;
                if (h < least_here) {
                    least_here = h;
                    least_drop = mid;
                    least_force = at->force;
                }
                if (h <= budget) {
                    clrun_graph_destroy(best_graph);
                    best_graph = g;
                    best_report = report;
                    best_drop = mid;
                    best_force = at->force;
                    hi = mid - 1;
                } else {
                    clrun_graph_destroy(g);
                    lo = mid + 1;
                }
            }
        }
        if (best_graph != NULL || s != CLRUN_OK || level + 1 == MAX_CUTS || least_drop == 0)
            break;
        /* none met it: the cut that held least stays, and the next is the one chosen on its
         * graph when it was tried */
        at->drop = least_drop;
        at->force = least_force;
    }
    if (s == CLRUN_OK && best_graph && best_report.offload.offloaded > 0 && clrun__exec_copies_beside(ctx)) {
        /* copies beside the kernels: each copy back issued a few nodes before its reader,
         * where the budget still holds its destination alive from there */
        cuts[count - 1].drop = best_drop;
        cuts[count - 1].force = best_force;
        s = early_copies(ctx, graph, cuts, count, rate, &o, budget, &best_graph, &best_report,
                         err, sizeof err);
    }
    for (int i = 0; i < MAX_CUTS; i++)
        cut_free(&cuts[i]);
    if (s != CLRUN_OK) {
        clrun_graph_destroy(best_graph);
        return clrun__fail(ctx, s, "memory budget: rewriting the graph to recompute or offload failed: %s",
                           err[0] ? err : clrun_last_error(ctx));
    }
    if (best_graph == NULL) {
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_MEMORY,
                           "a memory budget of %s is below what the graph can hold by recomputing "
                           "or offloading what is alive across its peak: at best %s (its constants %s; %s as "
                           "given; %d cut%s tried)",
                           clrun__format_bytes(budget, b, sizeof b), clrun__format_bytes(least, l, sizeof l),
                           clrun__format_bytes(first.constant_bytes, k, sizeof k),
                           clrun__format_bytes(held, g0, sizeof g0), count, count == 1 ? "" : "s");
    }
    /* the trial was planned within the trial's limit: plan again within the caller's */
    uint64_t h = 0;
    for (int attempt = 0; attempt < 2 && (attempt == 0 || h > budget); attempt++) {
        /* the planner's search is anytime: more time never holds more, but a clock is a
         * clock; should it, the trial's limit again */
        clrun_exec_destroy(best);
        best = NULL;
        o.plan_time_limit_s = attempt == 0 ? limit : (limit < CLRUN__TRIAL_PLAN_SECONDS ? limit : CLRUN__TRIAL_PLAN_SECONDS);
        s = clrun__exec_create_beside(ctx, best_graph, &o, NULL, &best);
        if (s == CLRUN_OK)
            s = held_by(best, &h);
        if (s != CLRUN_OK)
            break;
    }
    if (s == CLRUN_OK && h > budget)
        s = clrun__fail(ctx, CLRUN_ERROR_OUT_OF_MEMORY, "memory budget: the plan that met it "
                        "could not be made again within its time limit");
    if (s != CLRUN_OK) {
        clrun_exec_destroy(best);
        clrun_graph_destroy(best_graph);
        return s;
    }
    best->owned_graph = best_graph;
    if ((s = recomputed_names(best)) != CLRUN_OK || (s = offloaded_names(best)) != CLRUN_OK) {
        clrun_exec_destroy(best);
        return clrun__fail(ctx, s, "memory budget: out of host memory");
    }
    best->stats.budget_bytes = budget;
    best->stats.held_bytes = h;
    best->stats.recomputed_tensors = best_report.remat.dropped;
    best->stats.recomputed_nodes = best_report.remat.repeated_nodes;
    best->stats.recomputed_bytes = best_report.remat.dropped_bytes;
    best->stats.recomputed_flops = best_report.remat.repeated_flops;
    best->stats.offloaded_tensors = best_report.offload.offloaded;
    best->stats.offloaded_bytes = 2 * best_report.offload.bytes;
    *out = best;
    return CLRUN_OK;
}

uint64_t clrun__exec_pool_held(clrun_context *ctx, uint64_t *limit)
{
    clrun_memory_stats m;
    *limit = 0;
    if (clrun_memory_stats_get(ctx, &m) != CLRUN_OK)
        return 0;
    uint64_t fixed = m.resident + m.raw;
    *limit = m.limit;
    return m.held > fixed ? m.held : fixed;
}

/* Whether `e`, as given, may hold more than `room`: not when its every tensor in a buffer of
 * its own fits (the common case, no planning), else when what it holds (planned) or its
 * planner's layout is more. */
static bool may_not_fit(clrun_exec *e, uint64_t room)
{
    clrun_exec_stats st;
    uint64_t held = 0;
    if (clrun_exec_stats_get(e, &st) != CLRUN_OK || st.constant_bytes + st.naive_bytes <= room)
        return false;
    return held_by(e, &held) == CLRUN_OK && held > room;
}

clrun_status clrun__exec_create_in_pool(clrun_context *ctx, const clrun_graph *graph,
                                        const clrun_exec_options *options, clrun_exec **out)
{
    uint64_t limit = 0, before = ctx && graph && out ? clrun__exec_pool_held(ctx, &limit) : 0;
    clrun_status s = clrun__exec_create_beside(ctx, graph, options, NULL, out);
    if (limit == 0 || clrun__graph_has_guards(graph))
        return s;
    /* the caller's inputs come from the same pool: each with a page of slack for its block */
    uint64_t inputs = 0;
    for (int32_t i = 0; i < graph->input_count; i++)
        inputs += (clrun_tensor_bytes(&graph->tensors[graph->inputs[i]].type) + 8191) / 4096 * 4096;
    uint64_t room = limit > before + inputs ? limit - before - inputs : 0;
    clrun_exec_options o;
    if (options)
        o = *options;
    else
        clrun_exec_options_init(&o);
    if (o.mode == CLRUN_EXEC_CONTEXT)
        o.mode = (clrun_exec_mode)ctx->options.allocator.mode;
    /* planned mode is refused at creation when its arena is past the limit, and may leave no
     * room for the inputs; the others would fail at run time, so their layout is estimated */
    bool refused = s == CLRUN_ERROR_OUT_OF_MEMORY && o.mode == CLRUN_EXEC_PLANNED;
    if (!refused && !(s == CLRUN_OK && may_not_fit(*out, room)))
        return s;
    char given[1024];
    snprintf(given, sizeof given, "%s", clrun_last_error(ctx));
    clrun_exec_destroy(*out); /* its constants would count against the trials */
    *out = NULL;
    o.memory_budget = room;
    clrun_exec *e = NULL;
    clrun_status within = clrun__exec_create_within(ctx, graph, &o, &e);
    if (within == CLRUN_OK) {
        clrun__log(CLRUN_LOG_INFO, "graph '%s' did not fit the pool's limit as given; %d tensors "
                   "are recomputed to fit it", graph->name ? graph->name : "",
                   (int)e->stats.recomputed_tensors);
        *out = e;
        return CLRUN_OK;
    }
    if (refused) { /* no rewrite fits either: the first refusal, with the least found */
        char why[1024];
        snprintf(why, sizeof why, "%s", clrun_last_error(ctx));
        if (within != CLRUN_ERROR_OUT_OF_MEMORY || strcmp(why, given) == 0)
            return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_MEMORY, "%s", given);
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_MEMORY, "%s (recomputing or offloading does not fit it: %s)",
                           given, why);
    }
    /* the estimate says it does not fit and no rewrite does: as given, to fail at run time,
     * if it does, as it did without a limit's budget */
    o.memory_budget = 0;
    return clrun__exec_create_beside(ctx, graph, &o, NULL, out);
}
