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

#include "plan_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Share of the time limit the exact search may use before the local search takes over. */
#define PLAN_EXACT_SHARE 0.5

double clrun__plan_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
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
    clrun__plan_decoder decoder; /* best-fit decoder over the instance */
    bool decoder_ready;          /* decoder needs freeing */
    uint32_t *order;             /* scratch: one greedy order */
    uint32_t *best_order;        /* the greedy order whose plan is best so far */
    uint64_t *trial;             /* scratch offsets of one greedy pass */
} solve_state;

static void solve_state_free(solve_state *s)
{
    if (s->decoder_ready)
        clrun__plan_decoder_free(&s->decoder);
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

/* Runs the greedy orders; offsets and result get the best, s->best_order its order. The
 * first always runs; the others only before the deadline (a pass over a dense instance of
 * 50k buffers can take a second). */
static clrun_status run_greedy_orders(solve_state *s, const clrun_plan_buffer *buffers, size_t n,
                                      double deadline, uint64_t *offsets,
                                      clrun_plan_result *result)
{
    result->peak_bytes = UINT64_MAX;
    for (int o = 0; o < CLRUN_PLAN_ORDER_COUNT; o++) {
        clrun_status st = clrun__plan_order_fill(buffers, n, (clrun_plan_order)o, s->order);
        if (st != CLRUN_OK)
            return st;
        uint64_t peak = clrun__plan_decoder_run(&s->decoder, s->order, s->trial);
        result->steps++;
        if (peak < result->peak_bytes) {
            result->peak_bytes = peak;
            result->method = clrun_plan_order_name((clrun_plan_order)o);
            memcpy(offsets, s->trial, n * sizeof *offsets);
            memcpy(s->best_order, s->order, n * sizeof *s->order);
        }
        if (peak == result->lower_bound_bytes || clrun__plan_now() > deadline)
            break;
    }
    return CLRUN_OK;
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
    st = clrun__plan_decoder_init(&s->decoder, buffers, n, align);
    if (st != CLRUN_OK)
        return st;
    s->decoder_ready = true;

    /* A zero limit asks for the greedy plans only, all of them. */
    double limit = options->time_limit_s;
    st = run_greedy_orders(s, buffers, n, limit > 0 ? start + limit : INFINITY, offsets, result);
    if (st != CLRUN_OK || result->peak_bytes == result->lower_bound_bytes)
        return st;

    if (n <= options->exact_max_buffers && n <= 64 && limit > 0) {
        bool complete = false;
        uint64_t nodes = 0, peak = result->peak_bytes;
        st = clrun__plan_exact(buffers, n, align, result->lower_bound_bytes,
                               start + PLAN_EXACT_SHARE * limit, &peak, offsets, &complete, &nodes);
        result->steps += nodes;
        if (st != CLRUN_OK)
            return st;
        if (peak < result->peak_bytes) {
            result->peak_bytes = peak;
            result->method = "branch-and-bound";
        }
        if (complete) {
            result->optimal = true;
            return CLRUN_OK;
        }
    }
    if (limit > 0 && result->peak_bytes > result->lower_bound_bytes) {
        uint64_t moves = 0, peak = result->peak_bytes;
        st = clrun__plan_local_search(&s->decoder, s->best_order, result->lower_bound_bytes,
                                      start + limit, options->seed, &peak, offsets, &moves);
        result->steps += moves;
        if (st != CLRUN_OK)
            return st;
        if (peak < result->peak_bytes) {
            result->peak_bytes = peak;
            result->method = "local-search";
        }
    }
    return CLRUN_OK;
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
