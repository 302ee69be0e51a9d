/* clrun: the planner's entry points: instance checks, the lower bound, and clrun_plan_solve,
 * which runs the greedy orders (plan_greedy.c), the exact search (plan_exact.c) and the local
 * search (plan_search.c) in turn and keeps the best plan.
 *
 * Why this order: the greedy passes cost O(n log n) each and already hit the lower bound on
 * many real instances, which proves them optimal at once. The exact search only pays off while
 * the instance is small; given the greedy peak as its incumbent it prunes hard. The local search
 * gets whatever time is left, and on large instances it is the only thing that can improve on
 * the greedy plan within a second. */
#define _POSIX_C_SOURCE 200809L

#include "plan/plan_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Share of the time limit after which no further construction starts (without a step limit;
 * with one, every construction runs). */
#define PLAN_BUILD_SHARE 0.5
/* Share of the time limit, and of the step limit, the exact search may use (counted from the
 * start of the call) before the improvement searches. */
#define PLAN_EXACT_SHARE 0.5
/* Share of the improvement time, and of the steps left, given to lowest-first rebuilds; the
 * rest goes to the local search over best-fit orders. */
#ifndef PLAN_LOWEST_FIRST_SHARE
#define PLAN_LOWEST_FIRST_SHARE 0.7
#endif

double clrun__plan_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

clrun_status clrun__plan_compress_time(const clrun_plan_buffer *buffers, size_t n,
                                       uint32_t *from, uint32_t *to, size_t *distinct)
{
    size_t m = 2 * n;
    uint64_t *times = malloc(m * sizeof *times);
    if (!times)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    for (size_t i = 0; i < n; i++) {
        times[2 * i] = buffers[i].first;
        times[2 * i + 1] = buffers[i].last;
    }
    qsort(times, m, sizeof *times, compare_u64);
    size_t count = 0;
    for (size_t i = 0; i < m; i++)
        if (count == 0 || times[count - 1] != times[i])
            times[count++] = times[i];
    for (size_t i = 0; i < n; i++) {
        from[i] = (uint32_t)clrun__plan_lower_bound(times, count, buffers[i].first);
        to[i] = (uint32_t)clrun__plan_lower_bound(times, count, buffers[i].last);
    }
    free(times);
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

typedef struct time_key {
    uint64_t time;  /* first or last */
    uint64_t value; /* aligned size, or buffer index */
} time_key;

static int compare_time(const void *a, const void *b)
{
    const time_key *x = a, *y = b;
    return (x->time > y->time) - (x->time < y->time);
}

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

/* Sweeps the starts in time order; the bound peaks just after some buffer starts. */
static uint64_t sweep_lower_bound(const clrun_plan_buffer *buffers, size_t n, uint64_t align,
                                  time_key *starts, time_key *ends, pad_entry *heap)
{
    for (size_t i = 0; i < n; i++) {
        starts[i] = (time_key){buffers[i].first, i};
        ends[i] = (time_key){buffers[i].last, clrun__plan_align_up(buffers[i].size, align)};
    }
    qsort(starts, n, sizeof *starts, compare_time);
    qsort(ends, n, sizeof *ends, compare_time);

    uint64_t live = 0, best = 0;
    size_t next_end = 0, heap_count = 0;
    for (size_t i = 0; i < n;) {
        uint64_t t = starts[i].time;
        while (next_end < n && ends[next_end].time <= t)
            live -= ends[next_end++].value;
        for (; i < n && starts[i].time == t; i++) {
            const clrun_plan_buffer *b = &buffers[starts[i].value];
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
    }
    return best;
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
    size_t m = n ? n : 1;
    time_key *starts = malloc(m * sizeof *starts);
    time_key *ends = malloc(m * sizeof *ends);
    pad_entry *heap = malloc(m * sizeof *heap);
    if (starts && ends && heap)
        *lower_bound = sweep_lower_bound(buffers, n, align, starts, ends, heap);
    else
        st = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    free(starts);
    free(ends);
    free(heap);
    return st;
}

/* ---- solve ---- */

/* Everything clrun_plan_solve allocates, freed in one place. */
typedef struct solve_state {
    clrun__plan_decoder decoder; /* interval queries over the instance */
    bool decoder_ready;          /* decoder needs freeing */
    clrun__plan_skyline skyline; /* lowest-first construction scratch */
    uint32_t *order;             /* scratch: one greedy order */
    uint32_t *best_order;        /* the best-fit order whose plan is best among the orders */
    uint64_t *trial;             /* scratch offsets of one construction */
    clrun__plan_rank best_rank;  /* the lowest-first ranking whose plan is best among those */
    uint64_t best_best_fit;      /* peak of best_order's plan; UINT64_MAX before any */
    uint64_t best_lowest_first;  /* peak of best_rank's plan; UINT64_MAX before any */
} solve_state;

static void solve_state_free(solve_state *s)
{
    if (s->decoder_ready)
        clrun__plan_decoder_free(&s->decoder);
    clrun__plan_skyline_free(&s->skyline);
    free(s->order);
    free(s->best_order);
    free(s->trial);
}

static clrun_status check_options(const clrun_plan_options *options)
{
    if (isnan(options->time_limit_s) || options->time_limit_s < 0)
        return CLRUN_ERROR_INVALID_ARGUMENT;
    return CLRUN_OK;
}

/* Keeps the plan in s->trial when it beats the best so far. */
static bool keep_if_better(solve_state *s, size_t n, uint64_t peak, const char *method,
                           uint64_t *offsets, clrun_plan_result *result)
{
    result->steps++;
    if (peak >= result->peak_bytes)
        return false;
    result->peak_bytes = peak;
    result->method = method;
    memcpy(offsets, s->trial, n * sizeof *offsets);
    return true;
}

static bool done(const clrun_plan_result *result, double deadline)
{
    return result->peak_bytes == result->lower_bound_bytes || clrun__plan_now() > deadline;
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
    return result->steps + (uint64_t)(share * (double)steps_left(result, until));
}

static bool spent(const clrun_plan_result *result, const budget *b)
{
    return done(result, b->deadline) || steps_left(result, b->max_steps) == 0;
}

/* The constructions in the order they are tried: lowest-first by area first (the best and,
 * on dense instances, the fastest: 0.8 s where best fit takes 2.4 s at 50k buffers with ~500
 * alive at once), then the TFLite baseline, then the rest. */
typedef struct construction {
    bool lowest_first; /* plan_skyline.c, else a best-fit order of plan_greedy.c */
    int which;         /* clrun__plan_rank or clrun_plan_order */
} construction;

static const construction constructions[] = {
    {true, CLRUN__PLAN_RANK_AREA},      {false, CLRUN_PLAN_ORDER_SIZE},
    {true, CLRUN__PLAN_RANK_SIZE},      {false, CLRUN_PLAN_ORDER_SPATIAL},
    {false, CLRUN_PLAN_ORDER_TEMPORAL}, {false, CLRUN_PLAN_ORDER_AREA},
    {true, CLRUN__PLAN_RANK_SPAN},
};

/* Builds one construction's plan into s->trial and returns its peak; remembers the best
 * best-fit order and the best lowest-first ranking for the searches that follow. */
static clrun_status build(solve_state *s, const clrun_plan_buffer *buffers, size_t n,
                          const construction *c, uint64_t *peak, const char **method)
{
    if (c->lowest_first) {
        clrun__plan_skyline_rank(&s->skyline, (clrun__plan_rank)c->which);
        *peak = clrun__plan_skyline_run(&s->skyline, s->skyline.priority, UINT64_MAX, s->trial);
        *method = clrun__plan_rank_name((clrun__plan_rank)c->which);
        if (*peak < s->best_lowest_first) {
            s->best_lowest_first = *peak;
            s->best_rank = (clrun__plan_rank)c->which;
        }
        return CLRUN_OK;
    }
    clrun_status st = clrun__plan_order_fill(buffers, n, (clrun_plan_order)c->which, s->order);
    if (st != CLRUN_OK)
        return st;
    *peak = clrun__plan_decoder_run(&s->decoder, s->order, s->trial);
    *method = clrun_plan_order_name((clrun_plan_order)c->which);
    if (*peak < s->best_best_fit) {
        s->best_best_fit = *peak;
        memcpy(s->best_order, s->order, n * sizeof *s->order);
    }
    return CLRUN_OK;
}

/* Runs the constructions, the first always, the others only before the deadline (one pass
 * over a dense instance of 50k buffers can take a second; INFINITY runs them all). Stops at
 * the lower bound. */
static clrun_status run_constructions(solve_state *s, const clrun_plan_buffer *buffers, size_t n,
                                      double deadline, uint64_t *offsets,
                                      clrun_plan_result *result)
{
    result->peak_bytes = UINT64_MAX;
    s->best_best_fit = s->best_lowest_first = UINT64_MAX;
    for (size_t i = 0; i < sizeof constructions / sizeof constructions[0]; i++) {
        uint64_t peak;
        const char *method;
        clrun_status st = build(s, buffers, n, &constructions[i], &peak, &method);
        if (st != CLRUN_OK)
            return st;
        keep_if_better(s, n, peak, method, offsets, result);
        if (done(result, deadline))
            break;
    }
    return CLRUN_OK;
}

/* The exact search, for small instances; true when it proved the result optimal. */
static clrun_status run_exact(const clrun_plan_buffer *buffers, size_t n, uint64_t align,
                              const budget *b, uint64_t *offsets, clrun_plan_result *result,
                              bool *proven)
{
    uint64_t nodes = 0, peak = result->peak_bytes;
    clrun_status st = clrun__plan_exact(buffers, n, align, result->lower_bound_bytes,
                                        b->deadline, steps_left(result, b->max_steps), &peak,
                                        offsets, proven, &nodes);
    result->steps += nodes;
    if (st == CLRUN_OK && peak < result->peak_bytes) {
        result->peak_bytes = peak;
        result->method = "branch-and-bound";
    }
    return st;
}

/* The improvement searches share what time and steps are left: first the randomised
 * lowest-first rebuilds (from the best ranking; the default one if none was built in time),
 * then the local search over best-fit orders, which on some instances finds what the rebuilds
 * miss. */
static clrun_status run_improvement(solve_state *s, const clrun_plan_options *options,
                                    const budget *b, uint64_t *offsets, clrun_plan_result *result)
{
    double now = clrun__plan_now();
    budget first = {now + PLAN_LOWEST_FIRST_SHARE * (b->deadline - now),
                    steps_share(result, b->max_steps, PLAN_LOWEST_FIRST_SHARE)};
    uint64_t steps = 0, peak = result->peak_bytes;
    clrun__plan_skyline_rank(&s->skyline, s->best_rank);
    clrun__plan_skyline_search(&s->skyline, result->lower_bound_bytes, first.deadline,
                               steps_left(result, first.max_steps), options->seed, &peak,
                               offsets, &steps, s->trial);
    result->steps += steps;
    if (peak < result->peak_bytes) {
        result->peak_bytes = peak;
        result->method = "lowest-first-search";
    }
    if (spent(result, b))
        return CLRUN_OK;
    steps = 0;
    clrun_status st = clrun__plan_local_search(
        &s->decoder, s->best_order, result->lower_bound_bytes, b->deadline,
        steps_left(result, b->max_steps), options->seed, &peak, offsets, &steps);
    result->steps += steps;
    if (st == CLRUN_OK && peak < result->peak_bytes) {
        result->peak_bytes = peak;
        result->method = "local-search";
    }
    return st;
}

static clrun_status solve(solve_state *s, const clrun_plan_buffer *buffers, size_t n,
                          const clrun_plan_options *options, uint64_t align, double start,
                          uint64_t *offsets, clrun_plan_result *result)
{
    clrun_status st = clrun_plan_lower_bound(buffers, n, align, &result->lower_bound_bytes);
    if (st != CLRUN_OK)
        return st;
    s->order = malloc(n * sizeof *s->order);
    s->best_order = malloc(n * sizeof *s->best_order);
    s->trial = malloc(n * sizeof *s->trial);
    if (!s->order || !s->best_order || !s->trial)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    /* The local search starts from best_order even when the deadline came before any best-fit
     * order was built: it must hold a permutation from the start. */
    for (size_t i = 0; i < n; i++)
        s->best_order[i] = (uint32_t)i;
    st = clrun__plan_skyline_init(&s->skyline, buffers, n, align);
    if (st != CLRUN_OK)
        return st;
    st = clrun__plan_decoder_init(&s->decoder, buffers, n, align);
    if (st != CLRUN_OK)
        return st;
    s->decoder_ready = true;

    /* A zero limit asks for the constructions only, all of them. */
    double limit = options->time_limit_s;
    bool step_limited = options->step_limit > 0;
    budget all = {limit > 0 ? start + limit : INFINITY,
                  step_limited ? options->step_limit : UINT64_MAX};
    /* Constructions may use half the time; the searches improve on the best of them more
     * than the slower remaining constructions would. With a step limit they all run, so that
     * the plan does not depend on the machine's speed. */
    double build_deadline =
        limit > 0 && !step_limited ? start + PLAN_BUILD_SHARE * limit : INFINITY;
    st = run_constructions(s, buffers, n, build_deadline, offsets, result);
    if (st != CLRUN_OK || limit == 0 || spent(result, &all))
        return st;
    if (n <= options->exact_max_buffers && n <= 64) {
        bool proven = false;
        /* Half the time and half the steps, both counted from the start. */
        budget exact = {start + PLAN_EXACT_SHARE * limit,
                        step_limited ? (uint64_t)(PLAN_EXACT_SHARE * (double)options->step_limit)
                                     : UINT64_MAX};
        st = run_exact(buffers, n, align, &exact, offsets, result, &proven);
        if (st != CLRUN_OK || proven) {
            result->optimal = proven;
            return st;
        }
    }
    if (spent(result, &all))
        return CLRUN_OK;
    return run_improvement(s, options, &all, offsets, result);
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
    uint64_t align;
    clrun_status st = check_options(options);
    if (st == CLRUN_OK)
        st = clrun__plan_check(buffers, n, options->alignment, &align);
    if (st != CLRUN_OK)
        return st;

    if (n > 0) {
        solve_state s = {0};
        st = solve(&s, buffers, n, options, align, start, offsets, result);
        solve_state_free(&s);
    }
    if (st == CLRUN_OK && result->peak_bytes == result->lower_bound_bytes)
        result->optimal = true;
    result->planner_ms = (clrun__plan_now() - start) * 1e3;
    return st;
}
