/* clrun: the planner's entry points: instance checks, the lower bound, and clrun_plan_solve,
 * which runs the constructions (plan_greedy.c, plan_skyline.c), the complete search
 * (plan_complete.c over plan_decide.c) and the improvement searches (plan_skyline.c,
 * plan_search.c) in turn, keeping the best placement of each independent part (plan_parts.c).
 *
 * Why this order: the constructions cost O(n log n) each and already hit the lower bound on
 * many real instances, which proves them optimal at once. The complete search proves the
 * optimum of packing-like instances of hundreds of buffers, and of every small part of a large
 * trace; given the constructions' peak as its first bound it asks only below it. The
 * improvement searches get what is left: on parts of thousands of buffers they are what
 * improves on the constructions within a second. */
#define _POSIX_C_SOURCE 200809L

#include "plan/plan_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Share of the time limit after which no further construction starts (without a step limit;
 * with one, every construction runs). */
#define PLAN_BUILD_SHARE 0.5
/* Share of the time left after the constructions, and of the steps left, given to the
 * complete search before the improvement searches. */
#ifndef PLAN_COMPLETE_SHARE
#define PLAN_COMPLETE_SHARE 0.5
#endif
/* The same where a large part (CLRUN__PLAN_LARGE_WORK) is above the bound. */
#define PLAN_LARGE_COMPLETE_SHARE 0.25
/* Share of the improvement time, and of the steps left, given to lowest-first rebuilds; the
 * rest goes to the local search over best-fit orders. */
#ifndef PLAN_LOWEST_FIRST_SHARE
#define PLAN_LOWEST_FIRST_SHARE 0.7
#endif

double (*clrun__plan_test_clock)(void) = NULL;

clrun_status clrun__plan_compress_time(const clrun_plan_buffer *buffers, size_t n,
                                       uint32_t *from, uint32_t *to, size_t *distinct)
{
    /* The firsts and the lasts sorted apart, each key naming its buffer, then merged: every
     * time gets its rank in one walk, without a search per time (which cost more than the
     * sorts: a cache miss per step at 62k buffers). */
    size_t m = n ? n : 1;
    clrun__plan_key *firsts = malloc(m * sizeof *firsts);
    clrun__plan_key *lasts = malloc(m * sizeof *lasts);
    clrun__plan_key *scratch = malloc(m * sizeof *scratch);
    if (!firsts || !lasts || !scratch) {
        free(firsts);
        free(lasts);
        free(scratch);
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    for (size_t i = 0; i < n; i++) {
        firsts[i] = (clrun__plan_key){buffers[i].first, (uint32_t)i};
        lasts[i] = (clrun__plan_key){buffers[i].last, (uint32_t)i};
    }
    clrun__plan_sort_keys(firsts, n, scratch);
    clrun__plan_sort_keys(lasts, n, scratch);
    size_t count = 0, i = 0, j = 0;
    uint64_t previous = 0;
    while (i < n || j < n) {
        bool first = j == n || (i < n && firsts[i].key <= lasts[j].key);
        uint64_t t = first ? firsts[i].key : lasts[j].key;
        if (count == 0 || t != previous)
            count++;
        previous = t;
        if (first)
            from[firsts[i++].index] = (uint32_t)(count - 1);
        else
            to[lasts[j++].index] = (uint32_t)(count - 1);
    }
    free(firsts);
    free(lasts);
    free(scratch);
    *distinct = count;
    return CLRUN_OK;
}

clrun_status clrun__plan_check(const clrun_plan_buffer *buffers, size_t n, uint64_t alignment,
                               uint64_t *align)
{
    uint64_t a = alignment ? alignment : 1;
    if ((a & (a - 1)) != 0)
        return CLRUN_ERROR_INVALID_ALIGNMENT;
    if (n > 0 && !buffers)
        return CLRUN_ERROR_INVALID_ARGUMENT;
    /* Indices are 32-bit inside the planner to halve its memory. */
    if (n >= UINT32_MAX)
        return CLRUN_ERROR_INVALID_ARGUMENT;
    /* The total of aligned sizes bounds every offset + size of every plan the planner makes
     * (and of its lower bound), so checking it once rules out overflow everywhere. */
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        const clrun_plan_buffer *b = &buffers[i];
        if (b->size == 0 || b->last <= b->first)
            return CLRUN_ERROR_INVALID_ARGUMENT;
        if (b->size > UINT64_MAX - (a - 1))
            return CLRUN_ERROR_INVALID_ARGUMENT;
        uint64_t aligned = clrun__plan_align_up(b->size, a);
        if (aligned > UINT64_MAX - total)
            return CLRUN_ERROR_INVALID_ARGUMENT;
        total += aligned;
    }
    *align = a;
    return CLRUN_OK;
}

/* ---- lower bound ---- */

/* A max-heap of paddings; entries of buffers already dead are dropped lazily at the top. */
typedef struct pad_entry {
    uint64_t pad;  /* aligned size - size */
    uint64_t last; /* when the buffer dies */
} pad_entry;

static void heap_push(pad_entry *heap, size_t *count, pad_entry e)
{
    size_t i = (*count)++;
    while (i > 0 && heap[(i - 1) / 2].pad < e.pad) {
        heap[i] = heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    heap[i] = e;
}

static void heap_pop(pad_entry *heap, size_t *count)
{
    pad_entry e = heap[--*count];
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= *count)
            break;
        if (child + 1 < *count && heap[child + 1].pad > heap[child].pad)
            child++;
        if (heap[child].pad <= e.pad)
            break;
        heap[i] = heap[child];
        i = child;
    }
    if (*count > 0)
        heap[i] = e;
}

/* Sweeps the starts in time order; the bound (and the count alive) peaks just after some
 * buffer starts. */
static uint64_t sweep_lower_bound(const clrun_plan_buffer *buffers, size_t n, uint64_t align,
                                  clrun__plan_key *starts, clrun__plan_key *ends,
                                  clrun__plan_key *scratch, pad_entry *heap, uint32_t *max_alive)
{
    for (size_t i = 0; i < n; i++) {
        starts[i] = (clrun__plan_key){buffers[i].first, (uint32_t)i};
        ends[i] = (clrun__plan_key){buffers[i].last, (uint32_t)i};
    }
    clrun__plan_sort_keys(starts, n, scratch);
    clrun__plan_sort_keys(ends, n, scratch);

    uint64_t live = 0, best = 0;
    size_t next_end = 0, heap_count = 0, most = 0;
    for (size_t i = 0; i < n;) {
        uint64_t t = starts[i].key;
        while (next_end < n && ends[next_end].key <= t)
            live -= clrun__plan_align_up(buffers[ends[next_end++].index].size, align);
        for (; i < n && starts[i].key == t; i++) {
            const clrun_plan_buffer *b = &buffers[starts[i].index];
            uint64_t aligned = clrun__plan_align_up(b->size, align);
            live += aligned;
            heap_push(heap, &heap_count, (pad_entry){aligned - b->size, b->last});
        }
        while (heap_count > 0 && heap[0].last <= t)
            heap_pop(heap, &heap_count);
        /* The buffer on top needs only its own size, not its padding: let it be the one with
         * the most padding. */
        uint64_t bound = live - heap[0].pad;
        if (bound > best)
            best = bound;
        if (i - next_end > most)
            most = i - next_end;
    }
    *max_alive = (uint32_t)most;
    return best;
}

clrun_status clrun__plan_bound(const clrun_plan_buffer *buffers, size_t n, uint64_t align,
                               uint64_t *lower_bound, uint32_t *max_alive)
{
    size_t m = n ? n : 1;
    clrun__plan_key *starts = malloc(m * sizeof *starts);
    clrun__plan_key *ends = malloc(m * sizeof *ends);
    clrun__plan_key *scratch = malloc(m * sizeof *scratch);
    pad_entry *heap = malloc(m * sizeof *heap);
    clrun_status st = CLRUN_OK;
    *lower_bound = 0;
    *max_alive = 0;
    if (starts && ends && scratch && heap)
        *lower_bound =
            sweep_lower_bound(buffers, n, align, starts, ends, scratch, heap, max_alive);
    else
        st = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    free(starts);
    free(ends);
    free(scratch);
    free(heap);
    return st;
}

clrun_status clrun_plan_lower_bound(const clrun_plan_buffer *buffers, size_t n, uint64_t alignment,
                                    uint64_t *lower_bound)
{
    uint64_t align;
    clrun_status st = clrun__plan_check(buffers, n, alignment, &align);
    if (st != CLRUN_OK)
        return st;
    if (!lower_bound)
        return CLRUN_ERROR_INVALID_ARGUMENT;
    uint32_t max_alive;
    return clrun__plan_bound(buffers, n, align, lower_bound, &max_alive);
}

/* ---- solve ---- */

/* Everything clrun_plan_solve works with, freed in one place. */
typedef struct solve_state {
    const clrun_plan_buffer *buffers; /* the instance */
    size_t n;
    uint64_t align;
    const clrun_plan_options *options;
    clrun__plan_decoder decoder; /* best fit by sorted scans, and the local search's */
    bool decoder_ready;          /* decoder needs freeing */
    clrun__plan_fit fit;         /* best fit over interval sets, where the instance is dense */
    bool fit_ready;              /* fit needs freeing */
    bool dense;                  /* CLRUN__PLAN_FIT_DENSE or more alive at once: best fit
                                    uses `fit`, not `decoder` (the same plans) */
    bool large;                  /* CLRUN__PLAN_LARGE_N buffers or more: the lowest-first
                                    rankings right after greedy by size, the other orders only
                                    after them, and where dense not at all */
    clrun__plan_skyline skyline; /* lowest-first construction scratch */
    bool skyline_ready;          /* skyline needs freeing */
    clrun__plan_parts parts;     /* independent parts and the best placement of each */
    uint32_t *order;             /* scratch: one greedy order */
    uint32_t *best_order;        /* the best-fit order whose plan is best among the orders */
    uint64_t *trial;             /* scratch offsets of one construction */
    uint64_t *found;             /* the best plan of an improvement search */
    clrun__plan_rank best_rank;  /* the lowest-first ranking whose plan is best among those */
    uint64_t best_best_fit;      /* peak of best_order's plan; UINT64_MAX before any */
    uint64_t best_lowest_first;  /* peak of best_rank's plan; UINT64_MAX before any */
    uint64_t *offsets;           /* the caller's array: the kept plan, part by part */
    clrun_plan_result *result;
    double took[3];              /* by construction_kind: wall seconds the last construction
                                    of the kind took (expected_s); 0 before one ran */
    double setup_s;              /* what the bound and the parts took: a few sorts of the
                                    instance, as the skyline's and the decoder's setup, or a
                                    part's search tables per buffer, will */
} solve_state;

static void solve_state_free(solve_state *s)
{
    if (s->decoder_ready)
        clrun__plan_decoder_free(&s->decoder);
    if (s->fit_ready)
        clrun__plan_fit_free(&s->fit);
    if (s->skyline_ready)
        clrun__plan_skyline_free(&s->skyline);
    clrun__plan_parts_free(&s->parts);
    free(s->order);
    free(s->best_order);
    free(s->trial);
    free(s->found);
}

static clrun_status check_options(const clrun_plan_options *options)
{
    if (isnan(options->time_limit_s) || options->time_limit_s < 0)
        return CLRUN_ERROR_INVALID_ARGUMENT;
    return CLRUN_OK;
}

const char *clrun_plan_verdict_name(clrun_plan_verdict verdict)
{
    switch (verdict) {
    case CLRUN_PLAN_FITS:
        return "fits";
    case CLRUN_PLAN_INFEASIBLE:
        return "infeasible";
    default:
        return "unknown";
    }
}

/* Keeps, part by part, what `plan` does better than the kept plan; refreshes the result. */
static void keep_parts(solve_state *s, const uint64_t *plan, const char *method)
{
    if (clrun__plan_parts_merge(&s->parts, s->buffers, plan, method, s->offsets))
        s->result->peak_bytes = clrun__plan_parts_peak(&s->parts, &s->result->method);
}

static bool at_bound(const solve_state *s)
{
    return s->result->peak_bytes == s->result->lower_bound_bytes;
}

/* What the searches may still do: a deadline and a total of result->steps. */
typedef struct budget {
    double deadline;    /* monotonic seconds; INFINITY for none */
    uint64_t max_steps; /* result->steps may reach this; UINT64_MAX for no limit */
} budget;

/* Steps left before result->steps reaches `until`. */
static uint64_t steps_left(const clrun_plan_result *result, uint64_t until)
{
    return result->steps < until ? until - result->steps : 0;
}

/* The step count `share` of the way from result->steps to `until` (UINT64_MAX stays so). */
static uint64_t steps_share(const clrun_plan_result *result, uint64_t until, double share)
{
    if (until == UINT64_MAX)
        return UINT64_MAX;
    /* all of it exactly: share * left rounds up past 2^64 - 1 where left is near it */
    if (share >= 1.0)
        return until;
    return result->steps + (uint64_t)(share * (double)steps_left(result, until));
}

/* The deadline `share` of the way from now to `deadline` (INFINITY stays so). */
static double time_share(double deadline, double share)
{
    double now = clrun__plan_now();
    return now + share * (deadline - now);
}

static bool spent(const solve_state *s, const budget *b)
{
    return at_bound(s) || clrun__plan_now() > b->deadline ||
           steps_left(s->result, b->max_steps) == 0;
}

/* The constructions in the order they are tried: first the TFLite baseline, greedy by size,
 * which always runs to the end whatever the limit (O(n log T) interval-set merges on dense
 * instances, plan_fit.c), so that the plan returned is never worse than it; then lowest-first
 * by area (the best of the rest on packings), the other orders, and last the time sweep
 * (O(n k), rarely the best).
 *
 * On large instances (CLRUN__PLAN_LARGE_N buffers or more) the three lowest-first rankings come
 * right after greedy by size and start whenever time is left, the other orders and the sweep
 * after them: in `bench_plan --part 4 --seeds 2` (random, perfect and balanced at 10k-100k
 * buffers, 24 instances) a lowest-first ranking gave the best plan of 23, best fit by area of
 * one (random 62k seed 2, 0.3 % below them), XLA's orders only in ties with greedy by size,
 * the sweep never; on chains of 100k buffers lowest-first by lifetime is the one at the bound.
 * Where such an instance is dense (CLRUN__PLAN_FIT_DENSE alive at once) only the first four
 * run: there XLA's two orders and best fit by area cost 2.5-5x a lowest-first ranking each
 * (about 2.3 s of CPU on balanced 62k) and never won, and their time goes to the lowest-first
 * rebuilds, which do improve there. */
typedef enum construction_kind { SWEEP, LOWEST_FIRST, BEST_FIT } construction_kind;

typedef struct construction {
    construction_kind kind; /* plan_sweep.c, plan_skyline.c or a best-fit order (plan_greedy.c) */
    int which;              /* clrun__plan_rank or clrun_plan_order */
} construction;

#define CONSTRUCTION_COUNT 8

static const construction constructions[CONSTRUCTION_COUNT] = {
    {BEST_FIT, CLRUN_PLAN_ORDER_SIZE},     {LOWEST_FIRST, CLRUN__PLAN_RANK_AREA},
    {BEST_FIT, CLRUN_PLAN_ORDER_SPATIAL},  {LOWEST_FIRST, CLRUN__PLAN_RANK_SIZE},
    {BEST_FIT, CLRUN_PLAN_ORDER_TEMPORAL}, {BEST_FIT, CLRUN_PLAN_ORDER_AREA},
    {LOWEST_FIRST, CLRUN__PLAN_RANK_SPAN}, {SWEEP, 0},
};

/* Large instances' order; dense ones stop after the first LARGE_DENSE_COUNT. */
static const construction large_constructions[CONSTRUCTION_COUNT] = {
    {BEST_FIT, CLRUN_PLAN_ORDER_SIZE},     {LOWEST_FIRST, CLRUN__PLAN_RANK_AREA},
    {LOWEST_FIRST, CLRUN__PLAN_RANK_SIZE}, {LOWEST_FIRST, CLRUN__PLAN_RANK_SPAN},
    {BEST_FIT, CLRUN_PLAN_ORDER_AREA},     {BEST_FIT, CLRUN_PLAN_ORDER_SPATIAL},
    {BEST_FIT, CLRUN_PLAN_ORDER_TEMPORAL}, {SWEEP, 0},
};
#define LARGE_DENSE_COUNT 4

/* Builds one construction's plan into s->trial and returns its peak, UINT64_MAX when the
 * deadline cut it short (its plan is dropped); remembers the best best-fit order and the best
 * lowest-first ranking for the searches that follow. */
static clrun_status build(solve_state *s, const construction *c, double deadline,
                          uint64_t *peak, const char **method)
{
    if (c->kind == SWEEP) {
        bool cut;
        clrun_status st;
        *peak = clrun__plan_sweep(s->buffers, s->n, s->align, deadline, s->trial, &cut, &st);
        if (cut)
            *peak = UINT64_MAX;
        *method = "time-sweep";
        return st;
    }
    if (c->kind == LOWEST_FIRST) {
        clrun__plan_skyline_rank(&s->skyline, (clrun__plan_rank)c->which);
        *peak = clrun__plan_skyline_run(&s->skyline, s->skyline.priority, UINT64_MAX, deadline,
                                        s->trial);
        *method = clrun__plan_rank_name((clrun__plan_rank)c->which);
        if (*peak < s->best_lowest_first) {
            s->best_lowest_first = *peak;
            s->best_rank = (clrun__plan_rank)c->which;
        }
        return CLRUN_OK;
    }
    clrun_status st = clrun__plan_order_fill(s->buffers, s->n, (clrun_plan_order)c->which, s->order);
    if (st != CLRUN_OK)
        return st;
    if (s->dense)
        st = clrun__plan_fit_run(&s->fit, s->order, deadline, s->trial, peak);
    else
        *peak = clrun__plan_decoder_run(&s->decoder, s->order, deadline, s->trial);
    if (st != CLRUN_OK)
        return st;
    *method = clrun_plan_order_name((clrun_plan_order)c->which);
    if (*peak < s->best_best_fit) {
        s->best_best_fit = *peak;
        memcpy(s->best_order, s->order, s->n * sizeof *s->order);
    }
    return CLRUN_OK;
}

/* What best fit needs (a sort of the instance each): the decoder, which the local search
 * also uses, and on dense instances the interval sets. */
static clrun_status best_fit_tools(solve_state *s)
{
    clrun_status st = CLRUN_OK;
    if (!s->decoder_ready) {
        st = clrun__plan_decoder_init(&s->decoder, s->buffers, s->n, s->align);
        s->decoder_ready = st == CLRUN_OK;
    }
    if (st == CLRUN_OK && s->dense && !s->fit_ready) {
        st = clrun__plan_fit_init(&s->fit, s->buffers, s->n, s->align);
        s->fit_ready = st == CLRUN_OK;
    }
    return st;
}

static clrun_status skyline_tools(solve_state *s)
{
    if (s->skyline_ready)
        return CLRUN_OK;
    clrun_status st = clrun__plan_skyline_init(&s->skyline, s->buffers, s->n, s->align);
    s->skyline_ready = st == CLRUN_OK;
    return st;
}

static bool tools_ready(const solve_state *s, construction_kind kind)
{
    return kind == SWEEP || (kind == LOWEST_FIRST ? s->skyline_ready : s->decoder_ready);
}

/* What a construction is expected to take, in wall seconds, from those already built:
 * `took[kind]`, the last one of its kind (its tools' setup aside), else a share of greedy by
 * size's (`took[BEST_FIT]`, always known: it runs first), plus `setup` when its tools are not
 * ready. The shares are the most common ratios of `bench_plan --part 4` at 10k-100k (CPU ms,
 * the tools' setup included): a first lowest-first ranking 0.23-0.98x greedy by size on dense
 * instances (0.5 on most), 1.03-1.34x on sparse ones; the sweep 0.13-0.38x. */
#define LOWEST_FIRST_PER_GREEDY_DENSE 0.5
#define LOWEST_FIRST_PER_GREEDY_SPARSE 1.2
#define SWEEP_PER_GREEDY 0.2

static double expected_s(const solve_state *s, const construction *c)
{
    const double *took = s->took;
    if (took[c->kind] > 0)
        return took[c->kind];
    double greedy = took[BEST_FIT];
    if (c->kind == SWEEP)
        return SWEEP_PER_GREEDY * greedy;
    return (s->dense ? LOWEST_FIRST_PER_GREEDY_DENSE : LOWEST_FIRST_PER_GREEDY_SPARSE) * greedy;
}

/* Runs the constructions: the first (greedy by size) always and to the end, the second before
 * `deadline` (unless start_by is -INFINITY: none but the first), the others only before
 * `start_by`, each bounded by `deadline` and started only when it is expected to end before it
 * (expected_s: a construction cut short is dropped, and the setup of its tools, a few sorts,
 * cannot be stopped: started late, it was what made calls end past their limit); stops at the
 * lower bound. A construction not started or not finished for lack of time sets
 * result->cut_short. */
static clrun_status run_constructions(solve_state *s, double start_by, double deadline)
{
    s->best_best_fit = s->best_lowest_first = UINT64_MAX;
    const construction *table = s->large ? large_constructions : constructions;
    size_t count = s->large && s->dense ? LARGE_DENSE_COUNT : CONSTRUCTION_COUNT;
    for (size_t i = 0; i < count; i++) {
        const construction *c = &table[i];
        if (i > 0 && at_bound(s))
            break;
        /* not started when the setup (a sort or two) would end past the limit; the second,
         * lowest-first by area, the best of the rest on packings, starts whenever time is left
         * (on large instances greedy by size alone can take half the limit), and so do the
         * other lowest-first rankings on large instances, the best constructions there */
        bool eager = i == 1 || (s->large && c->kind == LOWEST_FIRST);
        double by = eager && start_by != -INFINITY ? deadline : start_by;
        double now = clrun__plan_now(), setup = tools_ready(s, c->kind) ? 0 : s->setup_s;
        if (i > 0 && (now > by || now + setup + expected_s(s, c) > deadline)) {
            s->result->cut_short = true;
            break;
        }
        uint64_t peak;
        const char *method;
        clrun_status st = c->kind == LOWEST_FIRST ? skyline_tools(s) : best_fit_tools(s);
        double built_from = clrun__plan_now();
        if (st == CLRUN_OK)
            st = build(s, c, i == 0 ? INFINITY : deadline, &peak, &method);
        if (st != CLRUN_OK)
            return st;
        /* greedy by size's setup counts in its time: it is the measure of the others' */
        s->took[c->kind] = clrun__plan_now() - (i == 0 ? now : built_from);
        s->result->steps++;
        if (peak != UINT64_MAX)
            keep_parts(s, s->trial, method);
        else
            s->result->cut_short = true;
    }
    return CLRUN_OK;
}

/* Everything the improvement searches use. */
static clrun_status solve_tools(solve_state *s)
{
    clrun_status st = skyline_tools(s);
    return st == CLRUN_OK ? best_fit_tools(s) : st;
}

/* The most work (buffers x alive at once) among the parts whose kept plan is above the bound. */
static uint64_t largest_open_work(const solve_state *s)
{
    uint64_t largest = 0;
    for (size_t q = 0; q < s->parts.count; q++) {
        uint64_t work = clrun__plan_parts_work(&s->parts, q);
        if (s->parts.best_peak[q] > s->result->lower_bound_bytes && work > largest)
            largest = work;
    }
    return largest;
}

/* The complete search on the parts above the bound; may prove the plan optimal or the
 * capacity out of reach. */
static clrun_status run_complete(solve_state *s, const budget *b, uint64_t *proven_above)
{
    clrun__plan_complete_result cr = {.proven_above = *proven_above,
                                      .verdict = CLRUN_PLAN_UNKNOWN};
    clrun_status st = clrun__plan_complete(
        s->buffers, s->n, s->align, &s->parts, s->options->capacity,
        s->options->search_max_buffers, b->deadline, steps_left(s->result, b->max_steps),
        s->setup_s / (double)s->n, s->offsets, s->trial, &cr);
    s->result->steps += cr.steps;
    s->result->peak_bytes = clrun__plan_parts_peak(&s->parts, &s->result->method);
    *proven_above = cr.proven_above;
    return st;
}

/* The improvement searches share what time and steps are left: first the randomised
 * lowest-first rebuilds (from the best ranking; the default one if none was built in time),
 * then the local search over best-fit orders, which on some instances finds what the rebuilds
 * miss. Their plans are kept part by part. On large instances the rebuilds get it all: on
 * dense ones the local search's first decode of the whole order (by sorted scans) did not end
 * within a second at 62k buffers, so it never made a move, while each rebuild costs about a
 * construction (0.1-0.2 s at 62k) and they improve on the constructions by 5-7 %; on random
 * ones they reach the bound (28k at 1 s, 62k in about 6 s). */
static clrun_status run_improvement(solve_state *s, const budget *b)
{
    clrun_plan_result *result = s->result;
    bool rebuilds_only = s->large;
    double share = rebuilds_only ? 1.0 : PLAN_LOWEST_FIRST_SHARE;
    budget first = {time_share(b->deadline, share), steps_share(result, b->max_steps, share)};
    uint64_t steps = 0, peak = UINT64_MAX;
    clrun__plan_skyline_rank(&s->skyline, s->best_rank);
    clrun__plan_skyline_search(&s->skyline, result->lower_bound_bytes, first.deadline,
                               steps_left(result, first.max_steps), s->options->seed, &peak,
                               s->found, &steps, s->trial);
    result->steps += steps;
    if (peak != UINT64_MAX)
        keep_parts(s, s->found, "lowest-first-search");
    if (rebuilds_only || spent(s, b))
        return CLRUN_OK;
    steps = 0;
    peak = UINT64_MAX;
    clrun_status st = clrun__plan_local_search(
        &s->decoder, s->best_order, result->lower_bound_bytes, b->deadline,
        steps_left(result, b->max_steps), s->options->seed, &peak, s->found, &steps);
    result->steps += steps;
    if (st == CLRUN_OK && peak != UINT64_MAX)
        keep_parts(s, s->found, "local-search");
    return st;
}

static clrun_status solve_init(solve_state *s)
{
    size_t n = s->n;
    s->order = malloc(n * sizeof *s->order);
    s->best_order = malloc(n * sizeof *s->best_order);
    s->trial = malloc(n * sizeof *s->trial);
    s->found = malloc(n * sizeof *s->found);
    if (!s->order || !s->best_order || !s->trial || !s->found)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    /* The local search starts from best_order even when the deadline came before any best-fit
     * order was built: it must hold a permutation from the start. */
    for (size_t i = 0; i < n; i++)
        s->best_order[i] = (uint32_t)i;
    /* The instance's bound is the largest of its parts' (they never meet). */
    clrun_status st = clrun__plan_parts_build(s->buffers, n, s->align, &s->parts);
    for (size_t q = 0; st == CLRUN_OK && q < s->parts.count; q++) {
        if (s->parts.lower_bound[q] > s->result->lower_bound_bytes)
            s->result->lower_bound_bytes = s->parts.lower_bound[q];
        if (s->parts.max_alive[q] >= CLRUN__PLAN_FIT_DENSE)
            s->dense = true;
    }
    s->large = n >= CLRUN__PLAN_LARGE_N;
    return st;
}

static clrun_status solve(solve_state *s, double start)
{
    const clrun_plan_options *options = s->options;
    clrun_plan_result *result = s->result;
    clrun_status st = solve_init(s);
    s->setup_s = clrun__plan_now() - start;
    if (st != CLRUN_OK)
        return st;

    /* A zero limit asks for the constructions only, all of them. */
    double limit = options->time_limit_s;
    bool step_limited = options->step_limit > 0;
    budget all = {limit > 0 ? start + limit : INFINITY,
                  step_limited ? options->step_limit : UINT64_MAX};
    /* Constructions may start during half the time; the searches improve on the best of them
     * more than the slower remaining constructions would. With a step limit they all run (as
     * long as the time allows), so that the plan does not depend on the machine's speed. */
    double start_by = limit > 0 && !step_limited ? start + PLAN_BUILD_SHARE * limit : all.deadline;
    /* Parts alive all at once (a wide graph's branches waiting for their join) are optimal
     * stacked, and would cost the constructions O(n^2): when all are so, nothing else runs. */
    uint64_t capacity = options->capacity, proven_above = result->lower_bound_bytes;
    if (clrun__plan_parts_stack(&s->parts, s->buffers, s->align, s->offsets) == s->parts.count) {
        result->peak_bytes = clrun__plan_parts_peak(&s->parts, &result->method);
        goto verdict;
    }
    /* A capacity below the bound is answered at once: only the first construction runs. */
    if (capacity > 0 && proven_above > capacity)
        start_by = -INFINITY;
    st = run_constructions(s, start_by, all.deadline);
    if (capacity > 0 && proven_above > capacity)
        result->cut_short = false; /* skipped because the answer is known, not for time */
    if (st != CLRUN_OK || (capacity > 0 && proven_above > capacity) || limit == 0 ||
        spent(s, &all))
        goto verdict;
    /* On parts of thousands of buffers a dive is dear and the improvement searches find their
     * gains late: the complete search gets a quarter of the time there, not half. On large
     * instances whose part above the bound is such a part it gets none, unless a capacity is
     * asked (it may prove it out of reach): there it never improved a plan (`bench_plan --part
     * 3`, 10k-100k buffers), and the rebuilds given its time take random 28k from 1.0035x the
     * bound to 1.0000 (proven) at 1 s, and random 62k from 1.0080 to 1.0023 at 3 s. */
    uint64_t open_work = largest_open_work(s);
    bool searched = options->search_max_buffers > 0 &&
                    (!s->large || open_work <= CLRUN__PLAN_LARGE_WORK || capacity > 0);
    if (searched) {
        double share = open_work > CLRUN__PLAN_LARGE_WORK ? PLAN_LARGE_COMPLETE_SHARE
                                                          : PLAN_COMPLETE_SHARE;
        budget complete = {time_share(all.deadline, share),
                           steps_share(result, all.max_steps, share)};
        st = run_complete(s, &complete, &proven_above);
        if (st != CLRUN_OK || proven_above >= result->peak_bytes ||
            (capacity > 0 && proven_above > capacity) || spent(s, &all))
            goto verdict;
    }
    /* the searches' setup is a few sorts, and their first step a lowest-first rebuild, as dear
     * as a construction on large instances, dropped when cut short: not started when they
     * would end past the limit */
    const construction rebuild = {LOWEST_FIRST, CLRUN__PLAN_RANK_AREA};
    if (!spent(s, &all) &&
        clrun__plan_now() + s->setup_s + expected_s(s, &rebuild) <= all.deadline)
        st = solve_tools(s);
    else
        goto verdict;
    if (st == CLRUN_OK && !spent(s, &all))
        st = run_improvement(s, &all);
verdict:
    result->optimal = st == CLRUN_OK && proven_above >= result->peak_bytes;
    if (capacity > 0 && result->peak_bytes > capacity)
        result->verdict = proven_above > capacity ? CLRUN_PLAN_INFEASIBLE : CLRUN_PLAN_UNKNOWN;
    return st;
}

clrun_status clrun_plan_solve(const clrun_plan_buffer *buffers, size_t n,
                              const clrun_plan_options *options, uint64_t *offsets,
                              clrun_plan_result *result)
{
    double start = clrun__plan_now();
    clrun_plan_options defaults = CLRUN_PLAN_OPTIONS_DEFAULT;
    if (!options)
        options = &defaults;
    if (!result || (n > 0 && !offsets))
        return CLRUN_ERROR_INVALID_ARGUMENT;
    memset(result, 0, sizeof *result);
    result->method = "empty";
    result->verdict = CLRUN_PLAN_FITS;
    uint64_t align;
    clrun_status st = check_options(options);
    if (st == CLRUN_OK)
        st = clrun__plan_check(buffers, n, options->alignment, &align);
    if (st != CLRUN_OK)
        return st;

    if (n > 0) {
        solve_state s = {.buffers = buffers, .n = n, .align = align, .options = options,
                         .offsets = offsets, .result = result};
        st = solve(&s, start);
        solve_state_free(&s);
    } else {
        result->optimal = true;
    }
    result->planner_ms = (clrun__plan_now() - start) * 1e3;
    return st;
}
