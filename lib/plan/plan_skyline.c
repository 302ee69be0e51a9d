/* clrun: lowest-offset-first construction and its randomised search.
 *
 * Best fit in a fixed order (plan_greedy.c) decides each buffer's place once, early, for big
 * buffers. This construction instead builds the plan bottom-up, like MiniMalloc's canonical
 * solutions: at every step the unplaced buffer that fits lowest goes next, at that offset; ties
 * go to the higher priority (size, lifetime or area). The arena fills from offset 0 upwards,
 * which on packing-like instances beats every best-fit order by a wide margin.
 *
 * Offsets placed this way never decrease, and no unplaced buffer fits below the last one
 * placed (L): each was looked at and found to fit no lower. Every placed buffer starts at or
 * below L, so above L the arena over a buffer's lifetime is taken up to the highest end of the
 * placed buffers alive then, and free beyond. Hence a buffer's lowest offset is
 * round_up(max(L, highest end over its lifetime)): a range-max query. A segment tree over the
 * compressed time axis answers it and takes each placement as a range "raise to" update, both
 * in O(log n), with no gap scan at all.
 *
 * Two heaps hold the unplaced buffers: those that may fit at the floor L, by priority, and
 * those that fit only higher, by the offset they fitted at when last looked at. Placements only
 * ever raise that offset, so it is a lower bound, checked again when the buffer comes up. When
 * nothing fits at the floor, the floor rises to the lowest raised buffer. O(n log n) per build
 * plus O(log n) for each buffer found raised by a placement (at most its k overlapping
 * placements, usually few).
 *
 * The search perturbs the priorities of the current plan (a few buffers strongly, or all of
 * them slightly), rebuilds, and keeps the perturbation when the peak does not grow; a rebuild
 * stops as soon as its peak exceeds the current one. */
#include "plan/plan_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Heap looks between clock reads. */
#define SKYLINE_CLOCK_EVERY 1024

typedef struct clrun__plan_sky_entry {
    uint64_t offset; /* raised heap: the offset the buffer fitted at when last looked at */
    double priority; /* floor heap: higher first */
    uint32_t index;  /* the buffer */
} sky_entry;

/* Two heaps share this code: the "raised" heap of buffers that fit only above the floor,
 * lowest offset first, and the "floor" heap of buffers that may fit at the floor, highest
 * priority first. */
static bool goes_before(const sky_entry *a, const sky_entry *b, bool by_priority)
{
    if (!by_priority && a->offset != b->offset)
        return a->offset < b->offset;
    if (a->priority != b->priority)
        return a->priority > b->priority;
    return a->index < b->index;
}

static void sift_down(sky_entry *heap, size_t count, size_t i, bool by_priority)
{
    sky_entry e = heap[i];
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= count)
            break;
        if (child + 1 < count && goes_before(&heap[child + 1], &heap[child], by_priority))
            child++;
        if (!goes_before(&heap[child], &e, by_priority))
            break;
        heap[i] = heap[child];
        i = child;
    }
    heap[i] = e;
}

static void heap_push(sky_entry *heap, size_t *count, sky_entry e, bool by_priority)
{
    size_t i = (*count)++;
    while (i > 0 && goes_before(&e, &heap[(i - 1) / 2], by_priority)) {
        heap[i] = heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    heap[i] = e;
}

static sky_entry heap_pop(sky_entry *heap, size_t *count, bool by_priority)
{
    sky_entry top = heap[0];
    heap[0] = heap[--*count];
    if (*count > 0)
        sift_down(heap, *count, 0, by_priority);
    return top;
}

/* Maps every first and last onto its rank among the distinct times; one leaf per moment. */
static clrun_status compress_time(clrun__plan_skyline *s)
{
    size_t distinct = 0;
    clrun_status st = clrun__plan_compress_time(s->buffers, s->n, s->from, s->to, &distinct);
    if (st != CLRUN_OK)
        return st;
    s->leaves = 1;
    while (s->leaves < distinct)
        s->leaves *= 2;
    return CLRUN_OK;
}

clrun_status clrun__plan_skyline_init(clrun__plan_skyline *s, const clrun_plan_buffer *buffers,
                                      size_t n, uint64_t align)
{
    memset(s, 0, sizeof *s);
    s->buffers = buffers;
    s->n = n;
    s->align = align;
    size_t m = n ? n : 1;
    s->from = malloc(m * sizeof *s->from);
    s->to = malloc(m * sizeof *s->to);
    s->heap = malloc(2 * m * sizeof *s->heap); /* the floor heap, then the raised heap */
    s->priority = malloc(m * sizeof *s->priority);
    s->trial = malloc(m * sizeof *s->trial);
    clrun_status st = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    if (s->from && s->to && s->heap && s->priority && s->trial)
        st = compress_time(s);
    if (st == CLRUN_OK) {
        s->whole = malloc(2 * s->leaves * sizeof *s->whole);
        s->below = malloc(2 * s->leaves * sizeof *s->below);
        if (!s->whole || !s->below)
            st = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    if (st != CLRUN_OK)
        clrun__plan_skyline_free(s);
    return st;
}

void clrun__plan_skyline_free(clrun__plan_skyline *s)
{
    free(s->from);
    free(s->to);
    free(s->whole);
    free(s->below);
    free(s->heap);
    free(s->priority);
    free(s->trial);
    memset(s, 0, sizeof *s);
}

void clrun__plan_skyline_rank(clrun__plan_skyline *s, clrun__plan_rank rank)
{
    for (size_t i = 0; i < s->n; i++) {
        double size = (double)s->buffers[i].size;
        double span = (double)(s->buffers[i].last - s->buffers[i].first);
        switch (rank) {
        case CLRUN__PLAN_RANK_SIZE:
            s->priority[i] = size * (1 + span * 1e-12); /* lifetime breaks ties */
            break;
        case CLRUN__PLAN_RANK_SPAN:
            s->priority[i] = span * (1 + size * 1e-24);
            break;
        default:
            s->priority[i] = size * span;
            break;
        }
    }
}

/* ---- the segment tree: raise [lo, hi) to at least v; highest value over [lo, hi) ---- */

const char *clrun__plan_rank_name(clrun__plan_rank rank)
{
    switch (rank) {
    case CLRUN__PLAN_RANK_SIZE:
        return "lowest-first-size";
    case CLRUN__PLAN_RANK_SPAN:
        return "lowest-first-lifetime";
    default:
        return "lowest-first-area";
    }
}

/* ---- the segment tree: raise [lo, hi) to at least v; highest value over [lo, hi) ---- */

/* Iterative, bottom-up: the nodes that tile [lo, hi) get the raise in `whole` (and `below`);
 * every other node whose range meets [lo, hi) is an ancestor of the first or last leaf, and
 * gets it in `below` on the way up. */
static void tree_raise(clrun__plan_skyline *s, size_t lo, size_t hi, uint64_t v)
{
    size_t l = lo + s->leaves, r = hi + s->leaves;
    for (size_t a = l, b = r; a < b; a >>= 1, b >>= 1) {
        if (a & 1) {
            if (v > s->whole[a])
                s->whole[a] = v;
            if (v > s->below[a])
                s->below[a] = v;
            a++;
        }
        if (b & 1) {
            b--;
            if (v > s->whole[b])
                s->whole[b] = v;
            if (v > s->below[b])
                s->below[b] = v;
        }
    }
    for (size_t a = l >> 1; a >= 1; a >>= 1)
        if (v > s->below[a])
            s->below[a] = v;
    for (size_t b = (r - 1) >> 1; b >= 1; b >>= 1)
        if (v > s->below[b])
            s->below[b] = v;
}

/* Highest value over [lo, hi): `below` of the tiling nodes, and `whole` of their ancestors
 * (all on the paths up from the first and last leaf). */
static uint64_t tree_max(const clrun__plan_skyline *s, size_t lo, size_t hi)
{
    uint64_t best = 0;
    size_t l = lo + s->leaves, r = hi + s->leaves;
    for (size_t a = l, b = r; a < b; a >>= 1, b >>= 1) {
        if (a & 1) {
            if (s->below[a] > best)
                best = s->below[a];
            a++;
        }
        if (b & 1) {
            b--;
            if (s->below[b] > best)
                best = s->below[b];
        }
    }
    for (size_t a = l >> 1; a >= 1; a >>= 1)
        if (s->whole[a] > best)
            best = s->whole[a];
    for (size_t b = (r - 1) >> 1; b >= 1; b >>= 1)
        if (s->whole[b] > best)
            best = s->whole[b];
    return best;
}

/* The lowest offset for b at or above the floor. */
static uint64_t lowest_offset(const clrun__plan_skyline *s, uint32_t b, uint64_t floor)
{
    uint64_t top = tree_max(s, s->from[b], s->to[b]);
    return clrun__plan_align_up(top > floor ? top : floor, s->align);
}

uint64_t clrun__plan_skyline_run(clrun__plan_skyline *s, const double *priority, uint64_t cutoff,
                                 double deadline, uint64_t *offsets)
{
    size_t n = s->n, at_floor = n, raised = 0, looks = 0;
    sky_entry *floor_heap = s->heap, *raised_heap = s->heap + n;
    memset(s->whole, 0, 2 * s->leaves * sizeof *s->whole);
    memset(s->below, 0, 2 * s->leaves * sizeof *s->below);
    /* At first everything fits at offset 0, the floor. */
    for (size_t i = 0; i < n; i++)
        floor_heap[i] = (sky_entry){.offset = 0, .priority = priority[i], .index = (uint32_t)i};
    for (size_t i = n / 2; i-- > 0;)
        sift_down(floor_heap, at_floor, i, true);
    uint64_t peak = 0, floor = 0;
    while (at_floor > 0 || raised > 0) {
        /* A look is O(log n), but when many buffers are alive at once most looks find their
         * buffer raised again (O(n^2) looks in all): the clock bounds that. */
        if (++looks % SKYLINE_CLOCK_EVERY == 0 && clrun__plan_now() > deadline)
            return UINT64_MAX;
        if (at_floor == 0) {
            /* Nothing fits at the floor: raise it to the lowest raised buffer, checking its
             * key first (keys are lower bounds), and let every buffer keyed that low try. */
            sky_entry e = heap_pop(raised_heap, &raised, false);
            uint64_t at = lowest_offset(s, e.index, floor);
            if (at > e.offset) {
                e.offset = at;
                heap_push(raised_heap, &raised, e, false);
                continue;
            }
            floor = at;
            heap_push(floor_heap, &at_floor, e, true);
            /* the others keyed this low: those still fitting join the floor heap, the rest go
             * back with their true offset (no round trip through the floor heap) */
            while (raised > 0 && raised_heap[0].offset <= floor) {
                sky_entry r = heap_pop(raised_heap, &raised, false);
                uint64_t at_r = lowest_offset(s, r.index, floor);
                if (at_r > floor) {
                    r.offset = at_r;
                    heap_push(raised_heap, &raised, r, false);
                } else {
                    heap_push(floor_heap, &at_floor, r, true);
                }
                looks++;
            }
            continue;
        }
        sky_entry e = heap_pop(floor_heap, &at_floor, true);
        uint64_t at = lowest_offset(s, e.index, floor);
        if (at > floor) {
            e.offset = at; /* a placement since covered the floor over its lifetime */
            heap_push(raised_heap, &raised, e, false);
            continue;
        }
        uint64_t end = at + s->buffers[e.index].size;
        tree_raise(s, s->from[e.index], s->to[e.index], end);
        offsets[e.index] = at;
        if (end > peak)
            peak = end;
        if (peak > cutoff)
            return UINT64_MAX;
    }
    return peak;
}

/* A factor spread log-uniformly over [1/spread, spread]. */
static double random_factor(uint64_t *rng, double spread)
{
    double u = (double)(clrun__plan_random(rng) >> 11) * (1.0 / 9007199254740992.0);
    return exp((2 * u - 1) * log(spread));
}

/* Perturbs the current priorities into s->trial. */
static void perturb(clrun__plan_skyline *s, size_t n, uint64_t *rng)
{
    memcpy(s->trial, s->priority, n * sizeof *s->trial);
    if (clrun__plan_random_below(rng, 4) == 0) {
        for (size_t i = 0; i < n; i++)
            s->trial[i] *= random_factor(rng, 1.3);
        return;
    }
    size_t touched = 1 + (size_t)clrun__plan_random_below(rng, n < 8 ? n : 8);
    for (size_t k = 0; k < touched; k++) {
        size_t i = (size_t)clrun__plan_random_below(rng, n);
        s->trial[i] *= random_factor(rng, 4.0);
    }
}

void clrun__plan_skyline_search(clrun__plan_skyline *s, uint64_t lower_bound, double deadline,
                                uint64_t max_trials, uint64_t seed, uint64_t *best_peak,
                                uint64_t *offsets, uint64_t *trials, uint64_t *scratch)
{
    size_t n = s->n;
    uint64_t rng = seed ^ 0x5851F42D4C957F2Du;
    *trials = 0;
    uint64_t current = clrun__plan_skyline_run(s, s->priority, UINT64_MAX, deadline, scratch);
    if (current == UINT64_MAX)
        return; /* the deadline came during the first rebuild */
    if (current < *best_peak) {
        *best_peak = current;
        memcpy(offsets, scratch, n * sizeof *offsets);
    }
    while (current > lower_bound && *trials < max_trials && clrun__plan_now() < deadline) {
        (*trials)++;
        perturb(s, n, &rng);
        uint64_t peak = clrun__plan_skyline_run(s, s->trial, current, deadline, scratch);
        if (peak == UINT64_MAX)
            continue;
        double *keep = s->priority;
        s->priority = s->trial;
        s->trial = keep;
        current = peak;
        if (peak < *best_peak) {
            *best_peak = peak;
            memcpy(offsets, scratch, n * sizeof *offsets);
        }
    }
}
