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
 * One heap holds the unplaced buffers, keyed by (the offset each fitted at when last looked
 * at, priority rank). Placements only ever raise a buffer's offset, so a key is a lower bound:
 * the top is looked at again, and placed if its key is exact (nothing fits lower, nor as low
 * with a higher priority), else re-keyed in place. O(n log n) per build plus O(log n) for each
 * time a buffer is found raised: once per placement under it at most, usually a few, but tens
 * per buffer where hundreds are alive at once (then 1 s at 50k buffers).
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
    uint64_t offset; /* its key: the offset it fitted at when last looked at (a lower bound) */
    uint32_t rank;   /* the buffer's place in priority order: lower goes first */
    uint32_t index;  /* the buffer */
} sky_entry;

/* The heap of unplaced buffers: lowest key first, then lowest rank (highest priority). It is
 * 4-ary: half the depth of a binary heap, a node's children in one cache line, and on dense
 * instances the looks at it are half the work. */
static bool goes_before(const sky_entry *a, const sky_entry *b)
{
    if (a->offset != b->offset)
        return a->offset < b->offset;
    return a->rank < b->rank;
}

static void sift_down(sky_entry *heap, size_t count, size_t i)
{
    sky_entry e = heap[i];
    for (;;) {
        size_t first = 4 * i + 1, best = first;
        if (first >= count)
            break;
        size_t last = first + 4 < count ? first + 4 : count;
        for (size_t c = first + 1; c < last; c++)
            if (goes_before(&heap[c], &heap[best]))
                best = c;
        if (!goes_before(&heap[best], &e))
            break;
        heap[i] = heap[best];
        i = best;
    }
    heap[i] = e;
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
    s->order = malloc(m * sizeof *s->order);
    s->keys = malloc(2 * m * sizeof(clrun__plan_key)); /* keys and the sort's scratch */
    clrun_status st = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    if (s->from && s->to && s->heap && s->priority && s->trial && s->order && s->keys)
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
    free(s->order);
    free(s->keys);
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

/* A sort key that puts higher priorities first: the double's bits mapped onto an unsigned
 * order (negatives flipped whole, the rest with the sign bit set), then inverted. -0 counts as
 * 0, so that the two tie as they compare. */
static uint64_t priority_key(double priority)
{
    uint64_t bits;
    if (priority == 0)
        priority = 0;
    memcpy(&bits, &priority, sizeof bits);
    bits = bits >> 63 ? ~bits : bits | (UINT64_C(1) << 63);
    return ~bits;
}

/* s->order gets the buffers by priority, highest first (ties by index: the sort is stable). */
static void rank_by_priority(clrun__plan_skyline *s, const double *priority)
{
    clrun__plan_key *keys = s->keys, *scratch = keys + (s->n ? s->n : 1);
    for (size_t i = 0; i < s->n; i++)
        keys[i] = (clrun__plan_key){priority_key(priority[i]), (uint32_t)i};
    clrun__plan_sort_keys(keys, s->n, scratch);
    for (size_t i = 0; i < s->n; i++)
        s->order[i] = keys[i].index;
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
    size_t n = s->n, count = n, looks = 0;
    sky_entry *heap = s->heap;
    memset(s->whole, 0, 2 * s->leaves * sizeof *s->whole);
    memset(s->below, 0, 2 * s->leaves * sizeof *s->below);
    /* Priorities become ranks (ties by index): one integer compare per heap step. At first
     * everything fits at offset 0; sorted by rank, the heap is a heap already. */
    rank_by_priority(s, priority);
    for (size_t i = 0; i < n; i++)
        heap[i] = (sky_entry){.offset = 0, .rank = (uint32_t)i, .index = s->order[i]};
    uint64_t peak = 0;
    while (count > 0) {
        /* A look is O(log n), but where hundreds are alive at once most looks find their buffer
         * raised again (tens of looks per buffer): the clock bounds that. */
        if (++looks % SKYLINE_CLOCK_EVERY == 0 && clrun__plan_now() > deadline)
            return UINT64_MAX;
        /* The lowest key, and among those the highest priority. Keys are lower bounds that
         * only grow: if this one is exact, no buffer fits lower, nor as low with a higher
         * priority. Otherwise it is raised in place. */
        sky_entry *e = &heap[0];
        uint64_t at = lowest_offset(s, e->index, e->offset);
        if (at > e->offset) {
            e->offset = at;
            sift_down(heap, count, 0);
            continue;
        }
        uint32_t b = e->index;
        heap[0] = heap[--count];
        if (count > 0)
            sift_down(heap, count, 0);
        uint64_t end = at + s->buffers[b].size;
        tree_raise(s, s->from[b], s->to[b], end);
        offsets[b] = at;
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
