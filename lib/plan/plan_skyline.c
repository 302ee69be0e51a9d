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
 * placed buffers alive then, and free beyond: a buffer's lowest offset is the highest of the
 * skyline (each moment's highest end, rounded up to the alignment) over its lifetime. So the
 * next buffer is, among those alive only within a run of moments at the skyline's lowest
 * height, the best-ranked one. When no unplaced buffer lies within such a run, raising the run
 * to its lower neighbour's height (and merging them) changes no unplaced buffer's lowest
 * offset: each one that meets the run also meets a neighbour. Placing a buffer splits its run
 * in three at most. So a heap of runs keyed by (height, best rank within), a merge-sort tree
 * over the buffers' first moments (each node's buffers sorted by last moment, with a min-tree
 * of their ranks) answering "the best-ranked unplaced buffer within [a, c)" in O(log^2 n), and
 * O(n) runs made in all: O(n log^2 n) per build, however many buffers are alive at once.
 *
 * Sparse instances (fewer than SKYLINE_DENSE alive at once) keep the cheaper constant of a heap
 * of buffers keyed by (the offset each fitted at when last looked at, rank) over a segment
 * tree of the skyline: a key only grows, so the top is placed when still exact, else re-keyed.
 * That looks again at every buffer of a group alive together once per level filled, quadratic
 * in the group: 1 s at 62k buffers with 1225 alive, where the runs take 0.15 s. Both place the
 * same buffer at every step (the lowest offset, then the best rank): the same plans.
 *
 * The search perturbs the priorities of the current plan (a few buffers strongly, or all of
 * them slightly), rebuilds, and keeps the perturbation when the peak does not grow; a rebuild
 * stops as soon as its peak exceeds the current one. */
#include "plan/plan_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* From this many buffers alive at once, the runs and the merge-sort tree (measured at 62k
 * buffers: 4.5x faster at 1225 alive, 2.5x at 862, 1.2x slower at 47, the same plans). */
#ifndef SKYLINE_DENSE
#define SKYLINE_DENSE CLRUN__PLAN_FIT_DENSE
#endif

/* Heap pops between clock reads. */
#define SKYLINE_CLOCK_EVERY 1024

/* Ranks in the heap: the best rank within a run is not known yet (looked up when the run comes
 * to the top), rank r is stored as r + 1, none lies within. */
#define RANK_UNKNOWN 0u
#define RANK_NONE UINT32_MAX

typedef struct clrun__plan_sky_entry {
    uint64_t height;  /* the run's height */
    uint32_t rank;    /* the best rank within, as above */
    uint32_t start;   /* the run's first moment */
    uint32_t version; /* the run's version when pushed: stale once it changed */
} sky_entry;

/* Lowest height first, then the lowest rank (unknown before known, none last). */
static bool goes_before(const sky_entry *a, const sky_entry *b)
{
    if (a->height != b->height)
        return a->height < b->height;
    return a->rank < b->rank;
}

static void heap_push(sky_entry *heap, size_t *count, sky_entry e)
{
    size_t i = (*count)++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!goes_before(&e, &heap[parent]))
            break;
        heap[i] = heap[parent];
        i = parent;
    }
    heap[i] = e;
}

static sky_entry heap_pop(sky_entry *heap, size_t *count)
{
    sky_entry top = heap[0], e = heap[--*count];
    size_t i = 0, n = *count;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && goes_before(&heap[c + 1], &heap[c]))
            c++;
        if (!goes_before(&heap[c], &e))
            break;
        heap[i] = heap[c];
        i = c;
    }
    if (n > 0)
        heap[i] = e;
    return top;
}

typedef struct clrun__plan_sky_wait {
    uint64_t offset; /* its key: the offset it fitted at when last looked at (a lower bound) */
    uint32_t rank;   /* the buffer's place in priority order: lower goes first */
    uint32_t index;  /* the buffer */
} wait_entry;

/* Sparse instances: the heap of unplaced buffers, lowest key first, then lowest rank
 * (highest priority). 4-ary: half the depth of a binary heap, a node's children in one cache
 * line. */
static bool waits_before(const wait_entry *a, const wait_entry *b)
{
    if (a->offset != b->offset)
        return a->offset < b->offset;
    return a->rank < b->rank;
}

static void sift_down(wait_entry *heap, size_t count, size_t i)
{
    wait_entry e = heap[i];
    for (;;) {
        size_t first = 4 * i + 1, best = first;
        if (first >= count)
            break;
        size_t last = first + 4 < count ? first + 4 : count;
        for (size_t c = first + 1; c < last; c++)
            if (waits_before(&heap[c], &heap[best]))
                best = c;
        if (!waits_before(&heap[best], &e))
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

/* The merge-sort tree over first moments: at each level, the buffers sorted by (first moment
 * >> level, last moment, index), so that node j's buffers (first moments [j << level,
 * (j + 1) << level)) lie together, by last moment; node_at tells where each node starts. */
static clrun_status build_tree(clrun__plan_skyline *s)
{
    size_t n = s->n, m = n ? n : 1;
    uint32_t *count = calloc(s->leaves + 1, sizeof *count);
    uint32_t *base = malloc(m * sizeof *base);
    if (!count || !base) {
        free(count);
        free(base);
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    /* by (to, index): a counting sort, stable over the indices */
    for (size_t i = 0; i < n; i++)
        count[s->to[i] + 1]++;
    for (size_t t = 0; t < s->leaves; t++)
        count[t + 1] += count[t];
    for (size_t i = 0; i < n; i++)
        base[count[s->to[i]]++] = (uint32_t)i;
    /* level 0: by first moment, a counting sort; each level above merges pairs of nodes */
    uint32_t *at = s->node_at, *by = s->by_to, *to = s->to_at;
    memset(at, 0, (s->leaves + 1) * sizeof *at);
    for (size_t i = 0; i < n; i++)
        at[s->from[i] + 1]++;
    for (size_t j = 0; j < s->leaves; j++)
        at[j + 1] += at[j];
    memcpy(count, at, s->leaves * sizeof *count);
    for (size_t k = 0; k < n; k++) {
        uint32_t b = base[k];
        size_t p = count[s->from[b]]++;
        by[p] = b;
        to[p] = s->to[b];
        s->place[b * s->levels] = (uint32_t)p;
    }
    for (size_t level = 1; level < s->levels; level++) {
        const uint32_t *below_at = s->node_at + s->node_base[level - 1];
        const uint32_t *below_by = s->by_to + (level - 1) * n;
        const uint32_t *below_to = s->to_at + (level - 1) * n;
        at = s->node_at + s->node_base[level];
        by = s->by_to + level * n;
        to = s->to_at + level * n;
        size_t nodes = s->leaves >> level, p = 0;
        for (size_t j = 0; j < nodes; j++) {
            at[j] = (uint32_t)p;
            size_t x = below_at[2 * j], xe = below_at[2 * j + 1], y = xe, ye = below_at[2 * j + 2];
            while (x < xe || y < ye) {
                bool left = y == ye || (x < xe && (below_to[x] < below_to[y] ||
                                                   (below_to[x] == below_to[y] &&
                                                    below_by[x] < below_by[y])));
                size_t q = left ? x++ : y++;
                by[p] = below_by[q];
                to[p] = below_to[q];
                s->place[below_by[q] * s->levels + level] = (uint32_t)p;
                p++;
            }
        }
        at[nodes] = (uint32_t)p;
    }
    free(count);
    free(base);
    return CLRUN_OK;
}

/* Dense when SKYLINE_DENSE buffers or more are alive at some moment. */
static clrun_status measure_density(clrun__plan_skyline *s)
{
    int32_t *change = calloc(s->leaves + 1, sizeof *change);
    if (!change)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    for (size_t i = 0; i < s->n; i++) {
        change[s->from[i]]++;
        change[s->to[i]]--;
    }
    int32_t alive = 0;
    for (size_t t = 0; t < s->leaves && !s->dense; t++) {
        alive += change[t];
        s->dense = alive >= SKYLINE_DENSE;
    }
    free(change);
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
    s->priority = malloc(m * sizeof *s->priority);
    s->trial = malloc(m * sizeof *s->trial);
    s->order = malloc(m * sizeof *s->order);
    s->rank_of = malloc(m * sizeof *s->rank_of);

    s->keys = malloc(2 * m * sizeof(clrun__plan_key)); /* keys and the sort's scratch */
    clrun_status st = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    if (s->from && s->to && s->priority && s->trial && s->order && s->rank_of && s->keys)
        st = compress_time(s);
    if (st == CLRUN_OK)
        st = measure_density(s);
    if (st == CLRUN_OK && !s->dense) {
        s->whole = malloc(2 * s->leaves * sizeof *s->whole);
        s->below = malloc(2 * s->leaves * sizeof *s->below);
        s->waiting = malloc(m * sizeof *s->waiting);
        if (!s->whole || !s->below || !s->waiting)
            st = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    } else if (st == CLRUN_OK) {
        /* runs made: 3 a placement, 1 a raise (<= 2n + 1); 2 pushes each */
        s->heap_room = 10 * m + 8;
        s->heap = malloc(s->heap_room * sizeof *s->heap);
        size_t levels = 1, nodes = 0;
        while (((size_t)1 << (levels - 1)) < s->leaves)
            levels++;
        s->levels = levels;
        for (size_t level = 0; level < levels; level++) {
            s->node_base[level] = nodes;
            nodes += (s->leaves >> level) + 1;
        }
        s->by_to = malloc(levels * m * sizeof *s->by_to);
        s->to_at = malloc(levels * m * sizeof *s->to_at);
        s->place = malloc(levels * m * sizeof *s->place);
        s->rank_min = malloc(2 * levels * m * sizeof *s->rank_min);
        s->node_at = malloc(nodes * sizeof *s->node_at);
        s->height = malloc((s->leaves + 1) * sizeof *s->height);
        s->run_end = malloc((s->leaves + 1) * sizeof *s->run_end);
        s->run_begin = malloc((s->leaves + 1) * sizeof *s->run_begin);
        s->version = calloc(s->leaves + 1, sizeof *s->version);
        if (!s->heap || !s->by_to || !s->to_at || !s->place || !s->rank_min || !s->node_at ||
            !s->height || !s->run_end || !s->run_begin || !s->version)
            st = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        else
            st = build_tree(s);
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
    free(s->waiting);
    free(s->by_to);
    free(s->to_at);
    free(s->place);
    free(s->rank_min);
    free(s->node_at);
    free(s->height);
    free(s->run_end);
    free(s->run_begin);
    free(s->version);
    free(s->heap);
    free(s->priority);
    free(s->trial);
    free(s->order);
    free(s->rank_of);
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

/* ---- sparse instances: a segment tree of the highest end at each moment ---- */

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

static uint64_t run_sparse(clrun__plan_skyline *s, uint64_t cutoff, double deadline,
                           uint64_t *offsets)
{
    size_t n = s->n, count = n, looks = 0;
    wait_entry *heap = s->waiting;
    memset(s->whole, 0, 2 * s->leaves * sizeof *s->whole);
    memset(s->below, 0, 2 * s->leaves * sizeof *s->below);
    /* At first everything fits at offset 0; sorted by rank, the heap is a heap already. */
    for (size_t i = 0; i < n; i++)
        heap[i] = (wait_entry){.offset = 0, .rank = (uint32_t)i, .index = s->order[i]};
    uint64_t peak = 0;
    while (count > 0) {
        /* A look is O(log n), but where hundreds are alive at once most looks find their buffer
         * raised again (tens of looks per buffer): the clock bounds that. */
        if (++looks % SKYLINE_CLOCK_EVERY == 0 && clrun__plan_now() > deadline)
            return UINT64_MAX;
        /* The lowest key, and among those the highest priority. Keys are lower bounds that
         * only grow: if this one is exact, no buffer fits lower, nor as low with a higher
         * priority. Otherwise it is raised in place. */
        wait_entry *e = &heap[0];
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

/* ---- the merge-sort tree: the best-ranked unplaced buffer within [a, c) ---- */

/* Each node's buffers have a min-tree of their ranks (UINT32_MAX once placed) laid out like an
 * iterative segment tree of 2 * count slots: root 1, leaves count .. 2 * count - 1. */
static void fill_ranks(clrun__plan_skyline *s)
{
    size_t n = s->n;
    for (size_t level = 0; level < s->levels; level++) {
        const uint32_t *at = s->node_at + s->node_base[level];
        const uint32_t *by = s->by_to + level * n;
        uint32_t *tree = s->rank_min + 2 * level * n;
        for (size_t j = 0, nodes = s->leaves >> level; j < nodes; j++) {
            size_t lo = at[j], count = at[j + 1] - lo;
            uint32_t *t = tree + 2 * lo;
            for (size_t i = 0; i < count; i++)
                t[count + i] = s->rank_of[by[lo + i]];
            for (size_t i = count - 1; i >= 1 && count > 1; i--)
                t[i] = t[2 * i] < t[2 * i + 1] ? t[2 * i] : t[2 * i + 1];
        }
    }
}

/* Takes placed buffer b out of the min-trees of every node that holds it. */
static void tree_remove(clrun__plan_skyline *s, uint32_t b)
{
    size_t n = s->n;
    const uint32_t *place = s->place + b * s->levels;
    for (size_t level = 0; level < s->levels; level++) {
        const uint32_t *at = s->node_at + s->node_base[level];
        size_t j = s->from[b] >> level, lo = at[j], count = at[j + 1] - lo;
        uint32_t *t = s->rank_min + 2 * level * n + 2 * lo;
        size_t i = count + (place[level] - lo);
        t[i] = UINT32_MAX;
        for (i >>= 1; i >= 1; i >>= 1) {
            uint32_t v = t[2 * i] < t[2 * i + 1] ? t[2 * i] : t[2 * i + 1];
            if (t[i] == v)
                break;
            t[i] = v;
        }
    }
}

/* Best rank among node j's (at this level) unplaced buffers that end by moment c. */
static uint32_t node_best(const clrun__plan_skyline *s, size_t level, size_t j, uint32_t c)
{
    size_t n = s->n;
    const uint32_t *at = s->node_at + s->node_base[level];
    size_t lo = at[j], hi = at[j + 1];
    if (lo == hi)
        return UINT32_MAX;
    const uint32_t *tos = s->to_at + level * n;
    const uint32_t *t = s->rank_min + 2 * level * n + 2 * lo;
    size_t count = hi - lo, k = count;
    if (tos[hi - 1] > c) {
        size_t l = lo, r = hi; /* how many end by c */
        while (l < r) {
            size_t mid = l + (r - l) / 2;
            if (tos[mid] <= c)
                l = mid + 1;
            else
                r = mid;
        }
        k = l - lo;
    }
    if (k == count)
        return t[1];
    uint32_t best = UINT32_MAX;
    for (size_t a = count, b = count + k; a < b; a >>= 1, b >>= 1) {
        if ((a & 1) && t[a++] < best)
            best = t[a - 1];
        if ((b & 1) && t[--b] < best)
            best = t[b];
    }
    return best;
}

/* Best rank among the unplaced buffers alive only within moments [a, c); UINT32_MAX if none. */
static uint32_t best_within(const clrun__plan_skyline *s, uint32_t a, uint32_t c)
{
    uint32_t best = UINT32_MAX;
    size_t l = a, r = c;
    for (size_t level = 0; l < r; level++, l >>= 1, r >>= 1) {
        if (l & 1) {
            uint32_t v = node_best(s, level, l++, c);
            if (v < best)
                best = v;
        }
        if (r & 1) {
            uint32_t v = node_best(s, level, --r, c);
            if (v < best)
                best = v;
        }
    }
    return best;
}

/* ---- the skyline: runs of moments of equal height ---- */

/* Run a changed (or is new): its older heap entries go stale, and it is pushed to be looked
 * up when it comes to the top. */
static void push_run(clrun__plan_skyline *s, size_t *count, uint32_t a)
{
    s->version[a]++;
    heap_push(s->heap, count, (sky_entry){s->height[a], RANK_UNKNOWN, a, s->version[a]});
}

/* Run [a, c) with no unplaced buffer within goes up to its lower neighbour and joins it (and
 * the other one if as high). */
static void raise_run(clrun__plan_skyline *s, size_t *count, uint32_t a)
{
    uint32_t c = s->run_end[a], start = a, end = c;
    uint64_t to = UINT64_MAX;
    if (a > 0)
        to = s->height[s->run_begin[a]];
    if (c < s->leaves && s->height[c] < to)
        to = s->height[c];
    if (a > 0 && s->height[s->run_begin[a]] == to) {
        start = s->run_begin[a];
        s->version[a]++;
    }
    if (c < s->leaves && s->height[c] == to) {
        end = s->run_end[c];
        s->version[c]++;
    }
    s->height[start] = to;
    s->run_end[start] = end;
    s->run_begin[end] = start;
    push_run(s, count, start);
}

/* Buffer b placed at the bottom (height h) of run [a, c): the run splits into [a, from) at h,
 * [from, to) at the aligned end (joining a neighbour as high) and [to, c) at h. */
static void split_run(clrun__plan_skyline *s, size_t *count, uint32_t a, uint32_t b, uint64_t h,
                      uint64_t top)
{
    uint32_t c = s->run_end[a], x = s->from[b], y = s->to[b], start = x, end = y;
    if (x == a && a > 0 && s->height[s->run_begin[a]] == top) {
        start = s->run_begin[a];
        s->version[a]++;
    }
    if (y == c && c < s->leaves && s->height[c] == top) {
        end = s->run_end[c];
        s->version[c]++;
    }
    if (x > a) {
        s->height[a] = h;
        s->run_end[a] = x;
        s->run_begin[x] = a;
        push_run(s, count, a);
    }
    s->height[start] = top;
    s->run_end[start] = end;
    s->run_begin[end] = start;
    push_run(s, count, start);
    if (y < c) {
        s->height[y] = h;
        s->run_end[y] = c;
        s->run_begin[c] = y;
        push_run(s, count, y);
    }
}

static uint64_t run_dense(clrun__plan_skyline *s, uint64_t cutoff, double deadline,
                          uint64_t *offsets)
{
    size_t n = s->n, left = n, count = 0, pops = 0;
    for (size_t i = 0; i < n; i++)
        s->rank_of[s->order[i]] = (uint32_t)i;
    fill_ranks(s);
    s->height[0] = 0;
    s->run_end[0] = (uint32_t)s->leaves;
    s->run_begin[s->leaves] = 0;
    push_run(s, &count, 0);
    uint64_t peak = 0;
    while (left > 0) {
        if (++pops % SKYLINE_CLOCK_EVERY == 0 && clrun__plan_now() > deadline)
            return UINT64_MAX;
        if (count == 0)
            return UINT64_MAX; /* cannot happen: a run holds every unplaced buffer */
        sky_entry e = heap_pop(s->heap, &count);
        if (e.version != s->version[e.start])
            continue;
        if (e.rank == RANK_UNKNOWN) {
            uint32_t best = best_within(s, e.start, s->run_end[e.start]);
            e.rank = best == UINT32_MAX ? RANK_NONE : best + 1;
            if (count > 0 && goes_before(&s->heap[0], &e)) {
                heap_push(s->heap, &count, e);
                continue;
            }
            /* still the top: taken at once */
        }
        if (e.rank == RANK_NONE) {
            if (e.start == 0 && s->run_end[0] == s->leaves)
                return UINT64_MAX; /* cannot happen: every unplaced buffer lies within */
            raise_run(s, &count, e.start);
            continue;
        }
        /* the lowest run with a buffer within: its best-ranked one goes at its height */
        uint32_t b = s->order[e.rank - 1];
        uint64_t at = e.height, end = at + s->buffers[b].size;
        offsets[b] = at;
        if (end > peak)
            peak = end;
        if (peak > cutoff)
            return UINT64_MAX;
        left--;
        tree_remove(s, b);
        uint64_t top = clrun__plan_align_up(end, s->align);
        if (top == at)
            push_run(s, &count, e.start); /* an empty buffer: only the rank within changes */
        else
            split_run(s, &count, e.start, b, at, top);
    }
    return peak;
}

uint64_t clrun__plan_skyline_run(clrun__plan_skyline *s, const double *priority, uint64_t cutoff,
                                 double deadline, uint64_t *offsets)
{
    /* Priorities become ranks (ties by index): one integer compare per heap step. */
    rank_by_priority(s, priority);
    return s->dense ? run_dense(s, cutoff, deadline, offsets)
                    : run_sparse(s, cutoff, deadline, offsets);
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
