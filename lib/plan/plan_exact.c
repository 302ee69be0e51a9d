/* clrun: exact branch-and-bound planner for small instances (n <= 64), after MiniMalloc.
 *
 * Canonical plans: take an optimal plan and let every buffer fall to the lowest offset the
 * others allow, until none moves. Sorted by (offset, index), each buffer then sits at the lowest
 * aligned offset that the buffers before it leave free, and offsets never decrease along that
 * order. So it is enough to search sequences in which each step places some unplaced buffer at
 * the lowest offset free of the placed ones, that offset being >= the previous step's (and with
 * a larger index on a tie). Since all placed buffers lie at or below the last offset L, the
 * candidate's offset is simply round_up(max(L, highest end of placed buffers it overlaps)), and
 * it is canonical only when no hole below that fits it.
 *
 * Bound: every unplaced buffer alive at moment t lands at or above max(L, highest end of placed
 * buffers alive at t), stacked; adding their aligned sizes (less the largest padding of any
 * buffer alive at t, since the top one needs only its size) gives a bound per moment. A node is
 * cut when that bound reaches the best peak known. Worst case exponential; the deadline is
 * checked every 1024 nodes, the node limit at every node, and the search then gives up,
 * keeping the best plan found. */
#include "plan/plan_internal.h"

#include <stdlib.h>
#include <string.h>

/* Nodes between clock reads. */
#define EXACT_CLOCK_EVERY 1024

/* The search: static tables of the instance, then the state of the current path. */
typedef struct exact {
    const clrun_plan_buffer *buffers; /* the instance */
    size_t n;                         /* buffers, <= 64 */
    uint64_t align;                   /* power of two */
    size_t moments;                   /* distinct times minus one: moment t is [time t, t+1) */
    uint32_t *from, *to;              /* buffer b is alive over moments [from[b], to[b]) */
    uint64_t *aligned;                /* round_up(size, align) */
    uint64_t *overlap;                /* bit set of the buffers each one overlaps in time */
    uint64_t *max_pad;                /* per moment: largest padding of any buffer alive */

    uint64_t *base;          /* per moment: highest end of the placed buffers alive then */
    uint64_t *unplaced_sum;  /* per moment: aligned bytes of unplaced buffers alive then */
    uint32_t *unplaced_cnt;  /* per moment: how many */
    uint64_t *saved_base;    /* n * moments: `base` before each depth's placement, to undo */
    uint32_t *stack;         /* placement order of the current path */
    uint64_t *offset;        /* offsets along the current path */
    uint64_t *cand_offset;   /* n * n: per depth, the candidates' offsets */
    uint32_t *cand;          /* n * n: per depth, the candidates in the order tried */

    uint64_t lower_bound;    /* global bound: reaching it ends the search */
    uint64_t best;           /* best peak known; only better plans are looked for */
    uint64_t *best_offsets;  /* where a better plan is written */
    double deadline;         /* monotonic seconds */
    uint64_t max_nodes;      /* nodes it may visit */
    uint64_t nodes;          /* nodes visited */
    bool timed_out;          /* gave up at the deadline or the node limit */
    bool found;              /* a plan better than the incumbent was written */
} exact;

static void exact_free(exact *e)
{
    free(e->from);
    free(e->to);
    free(e->aligned);
    free(e->overlap);
    free(e->max_pad);
    free(e->base);
    free(e->unplaced_sum);
    free(e->unplaced_cnt);
    free(e->saved_base);
    free(e->stack);
    free(e->offset);
    free(e->cand_offset);
    free(e->cand);
}

/* Compresses time to moments and fills the static tables and the empty path. */
static clrun_status exact_init(exact *e)
{
    size_t n = e->n, m = 2 * n;
    e->from = malloc(n * sizeof *e->from);
    e->to = malloc(n * sizeof *e->to);
    e->aligned = malloc(n * sizeof *e->aligned);
    e->overlap = calloc(n, sizeof *e->overlap);
    e->max_pad = calloc(m, sizeof *e->max_pad);
    e->base = calloc(m, sizeof *e->base);
    e->unplaced_sum = calloc(m, sizeof *e->unplaced_sum);
    e->unplaced_cnt = calloc(m, sizeof *e->unplaced_cnt);
    e->saved_base = malloc(n * m * sizeof *e->saved_base);
    e->stack = malloc(n * sizeof *e->stack);
    e->offset = malloc(n * sizeof *e->offset);
    e->cand_offset = malloc(n * n * sizeof *e->cand_offset);
    e->cand = malloc(n * n * sizeof *e->cand);
    if (!e->from || !e->to || !e->aligned || !e->overlap || !e->max_pad || !e->base ||
        !e->unplaced_sum || !e->unplaced_cnt || !e->saved_base || !e->stack || !e->offset ||
        !e->cand_offset || !e->cand)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    size_t distinct = 0;
    clrun_status st = clrun__plan_compress_time(e->buffers, n, e->from, e->to, &distinct);
    if (st != CLRUN_OK)
        return st;
    e->moments = distinct - 1;
    for (size_t i = 0; i < n; i++) {
        const clrun_plan_buffer *b = &e->buffers[i];
        e->aligned[i] = clrun__plan_align_up(b->size, e->align);
        for (size_t t = e->from[i]; t < e->to[i]; t++) {
            e->unplaced_sum[t] += e->aligned[i];
            e->unplaced_cnt[t]++;
            if (e->aligned[i] - b->size > e->max_pad[t])
                e->max_pad[t] = e->aligned[i] - b->size;
        }
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            if (i != j && e->from[i] < e->to[j] && e->from[j] < e->to[i])
                e->overlap[i] |= UINT64_C(1) << j;
    return CLRUN_OK;
}

/* The bound of the node whose last placed offset is `floor` and peak so far is `peak`. */
static uint64_t node_bound(const exact *e, uint64_t floor, uint64_t peak)
{
    uint64_t bound = peak;
    for (size_t t = 0; t < e->moments; t++) {
        if (e->unplaced_cnt[t] == 0)
            continue;
        uint64_t base = e->base[t] > floor ? e->base[t] : floor;
        uint64_t b = clrun__plan_align_up(base, e->align) + e->unplaced_sum[t] - e->max_pad[t];
        if (b > bound)
            bound = b;
    }
    return bound;
}

/* Offset at which b would be placed next, or UINT64_MAX when placing it now is not canonical:
 * a hole below the floor would hold it, or its offset ties the floor with a smaller index than
 * the last placed buffer's. The placed buffers are scanned in placement order, which is offset
 * order. */
static uint64_t candidate_offset(const exact *e, size_t depth, uint32_t b, uint64_t floor)
{
    uint64_t top = 0, size = e->buffers[b].size;
    for (size_t i = 0; i < depth; i++) {
        uint32_t p = e->stack[i];
        if (!(e->overlap[b] >> p & 1))
            continue;
        uint64_t start = clrun__plan_align_up(top, e->align);
        if (e->offset[p] > start && e->offset[p] - start >= size)
            return UINT64_MAX; /* falls into a hole */
        uint64_t end = e->offset[p] + e->buffers[p].size;
        if (end > top)
            top = end;
    }
    uint64_t at = clrun__plan_align_up(top, e->align);
    if (at < floor)
        return UINT64_MAX; /* would go below the floor: the order would not be canonical */
    if (depth > 0 && at == floor && b < e->stack[depth - 1])
        return UINT64_MAX; /* same offset as the last: only in index order */
    return at;
}

static void place(exact *e, size_t depth, uint32_t b, uint64_t at)
{
    uint64_t end = at + e->buffers[b].size;
    uint64_t *saved = e->saved_base + depth * (2 * e->n);
    for (size_t t = e->from[b]; t < e->to[b]; t++) {
        saved[t] = e->base[t];
        if (end > e->base[t])
            e->base[t] = end;
        e->unplaced_sum[t] -= e->aligned[b];
        e->unplaced_cnt[t]--;
    }
    e->stack[depth] = b;
    e->offset[b] = at;
}

static void unplace(exact *e, size_t depth, uint32_t b)
{
    const uint64_t *saved = e->saved_base + depth * (2 * e->n);
    for (size_t t = e->from[b]; t < e->to[b]; t++) {
        e->base[t] = saved[t];
        e->unplaced_sum[t] += e->aligned[b];
        e->unplaced_cnt[t]++;
    }
}

/* Gathers the canonical candidates at this depth, lowest offset first, then largest first. */
static size_t gather_candidates(exact *e, size_t depth, uint64_t placed, uint64_t floor)
{
    uint32_t *cand = e->cand + depth * e->n;
    uint64_t *at = e->cand_offset + depth * e->n;
    size_t count = 0;
    for (uint32_t b = 0; b < e->n; b++) {
        if (placed >> b & 1)
            continue;
        uint64_t offset = candidate_offset(e, depth, b, floor);
        if (offset == UINT64_MAX)
            continue;
        /* insertion sort: candidates are few */
        size_t i = count++;
        while (i > 0 && (at[i - 1] > offset ||
                         (at[i - 1] == offset && e->buffers[cand[i - 1]].size < e->buffers[b].size))) {
            at[i] = at[i - 1];
            cand[i] = cand[i - 1];
            i--;
        }
        at[i] = offset;
        cand[i] = b;
    }
    return count;
}

/* Depth-first search below the node with `depth` buffers placed. Returns true to stop. */
static bool search(exact *e, size_t depth, uint64_t placed, uint64_t floor, uint64_t peak)
{
    if (e->nodes == e->max_nodes ||
        (++e->nodes % EXACT_CLOCK_EVERY == 0 && clrun__plan_now() > e->deadline)) {
        e->timed_out = true;
        return true;
    }
    if (depth == e->n) {
        if (peak < e->best) {
            e->best = peak;
            for (size_t i = 0; i < e->n; i++)
                e->best_offsets[i] = e->offset[i];
            e->found = true;
        }
        return e->best <= e->lower_bound;
    }
    size_t count = gather_candidates(e, depth, placed, floor);
    const uint32_t *cand = e->cand + depth * e->n;
    const uint64_t *at = e->cand_offset + depth * e->n;
    for (size_t i = 0; i < count; i++) {
        uint32_t b = cand[i];
        uint64_t end = at[i] + e->buffers[b].size;
        uint64_t child_peak = end > peak ? end : peak;
        if (child_peak >= e->best)
            continue;
        place(e, depth, b, at[i]);
        bool stop = false;
        if (node_bound(e, at[i], child_peak) < e->best)
            stop = search(e, depth + 1, placed | UINT64_C(1) << b, at[i], child_peak);
        unplace(e, depth, b);
        if (stop)
            return true;
    }
    return false;
}

clrun_status clrun__plan_exact(const clrun_plan_buffer *buffers, size_t n, uint64_t align,
                               uint64_t lower_bound, double deadline, uint64_t max_nodes,
                               uint64_t *best_peak, uint64_t *offsets, bool *complete,
                               uint64_t *nodes)
{
    *complete = false;
    if (n == 0 || n > 64)
        return n == 0 ? CLRUN_OK : CLRUN_ERROR_INVALID_ARGUMENT;
    exact e = {.buffers = buffers, .n = n, .align = align, .lower_bound = lower_bound,
               .best = *best_peak, .best_offsets = offsets, .deadline = deadline,
               .max_nodes = max_nodes};
    clrun_status st = exact_init(&e);
    if (st == CLRUN_OK) {
        search(&e, 0, 0, 0, 0);
        *complete = !e.timed_out;
        *best_peak = e.best;
        *nodes = e.nodes;
    }
    exact_free(&e);
    return st;
}
