/* clrun: what the planner's files share (lib/plan/). Not installed. */
#ifndef CLRUN_PLAN_INTERNAL_H
#define CLRUN_PLAN_INTERNAL_H

#include <clrun/plan.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Rounds v up to a multiple of the power of two `align`; the caller knows it cannot overflow
 * (every value rounded is at most the instance's total aligned size). */
static inline uint64_t clrun__plan_align_up(uint64_t v, uint64_t align)
{
    return (v + (align - 1)) & ~(align - 1);
}

/* splitmix64: a small, fast, well-mixed generator; the planner's only source of randomness. */
static inline uint64_t clrun__plan_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

/* Uniform in [0, bound), bound > 0 (the modulo bias is irrelevant at these bounds). */
static inline uint64_t clrun__plan_random_below(uint64_t *state, uint64_t bound)
{
    return clrun__plan_random(state) % bound;
}

/* The number of entries of sorted[0..count) below t: where t is, or would go. */
static inline size_t clrun__plan_lower_bound(const uint64_t *sorted, size_t count, uint64_t t)
{
    size_t lo = 0, hi = count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sorted[mid] < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Compresses time: from[b] and to[b] get the ranks of buffer b's first and last among the
 * instance's distinct times, and *distinct their number. Fails only for host memory. */
clrun_status clrun__plan_compress_time(const clrun_plan_buffer *buffers, size_t n,
                                       uint32_t *from, uint32_t *to, size_t *distinct);

/* Seconds on a monotonic clock. */
double clrun__plan_now(void);

/* Checks an instance: pointers, sizes, intervals, alignment (0 becomes 1, stored in *align),
 * n below 2^32 and the total aligned size within 64 bits. */
clrun_status clrun__plan_check(const clrun_plan_buffer *buffers, size_t n, uint64_t alignment,
                               uint64_t *align);

/* Fills order[0..n) with the buffer indices in the given greedy order. */
clrun_status clrun__plan_order_fill(const clrun_plan_buffer *buffers, size_t n,
                                    clrun_plan_order order, uint32_t *indices);

/* ---- the best-fit decoder: places buffers one at a time (plan_greedy.c) ---- */

/* A placed buffer's bytes, as the gap scan sees them. */
typedef struct clrun__plan_span {
    uint64_t lo; /* offset */
    uint64_t hi; /* offset + size */
} clrun__plan_span;

/* Which buffers are placed and where. Placed buffers are found by a segment tree over the
 * buffers sorted by `first`, each node holding the largest `last` of the placed buffers below
 * it: the buffers overlapping [f, l) are those of rank < (count of first < l) with last > f,
 * and the tree skips every subtree that has none. */
typedef struct clrun__plan_decoder {
    const clrun_plan_buffer *buffers; /* the instance, not owned */
    size_t n;                         /* buffers */
    uint64_t align;                   /* power of two */
    uint64_t *offset;                 /* offset of each placed buffer (by buffer index) */
    uint32_t *by_first;               /* buffer indices sorted by first */
    uint64_t *sorted_first;           /* first of by_first[i], for the binary search */
    uint32_t *rank;                   /* buffer index -> its position in by_first */
    uint64_t *tree;                   /* 2*leaves nodes; leaf = last if placed, else 0 */
    size_t leaves;                    /* power of two >= n */
    clrun__plan_span *spans;          /* scratch for one gap scan, n entries */
} clrun__plan_decoder;

clrun_status clrun__plan_decoder_init(clrun__plan_decoder *d, const clrun_plan_buffer *buffers,
                                      size_t n, uint64_t align);
void clrun__plan_decoder_free(clrun__plan_decoder *d);
/* Unplaces every buffer. */
void clrun__plan_decoder_clear(clrun__plan_decoder *d);
/* The best-fit offset for unplaced buffer b given the placed ones. */
uint64_t clrun__plan_decoder_fit(clrun__plan_decoder *d, uint32_t b);
/* Marks b placed at `offset` / unplaced. */
void clrun__plan_decoder_insert(clrun__plan_decoder *d, uint32_t b, uint64_t offset);
void clrun__plan_decoder_remove(clrun__plan_decoder *d, uint32_t b);
/* Clears, then places order[0..n) one by one; offsets[b] gets each offset. Returns the peak. */
uint64_t clrun__plan_decoder_run(clrun__plan_decoder *d, const uint32_t *order, uint64_t *offsets);

/* ---- lowest-offset-first construction (plan_skyline.c) ---- */

/* Ways to rank buffers that could go at the same lowest offset. */
typedef enum clrun__plan_rank {
    CLRUN__PLAN_RANK_SIZE = 0, /* larger first */
    CLRUN__PLAN_RANK_SPAN,     /* longer-lived first */
    CLRUN__PLAN_RANK_AREA,     /* larger size x lifetime first */
    CLRUN__PLAN_RANK_COUNT
} clrun__plan_rank;

/* The construction's state: the instance on a compressed time axis, and a segment tree that
 * answers "highest end of the placed buffers alive during [from, to)". */
typedef struct clrun__plan_skyline {
    const clrun_plan_buffer *buffers;   /* the instance, not owned */
    size_t n;                           /* buffers */
    uint64_t align;                     /* power of two */
    uint32_t *from, *to;                /* buffer b is alive over moments [from[b], to[b]) */
    size_t leaves;                      /* power of two >= moments */
    uint64_t *whole;                    /* per node: an end raised over the node's whole range */
    uint64_t *below;                    /* per node: highest end anywhere in its range */
    struct clrun__plan_sky_entry *heap; /* candidates by (lowest offset, priority) */
    double *priority;                   /* per buffer: higher goes first on a tie */
    double *trial;                      /* per buffer: perturbed priorities being tried */
} clrun__plan_skyline;

clrun_status clrun__plan_skyline_init(clrun__plan_skyline *s, const clrun_plan_buffer *buffers,
                                      size_t n, uint64_t align);
void clrun__plan_skyline_free(clrun__plan_skyline *s);
/* Fills s->priority for one ranking. */
void clrun__plan_skyline_rank(clrun__plan_skyline *s, clrun__plan_rank rank);
const char *clrun__plan_rank_name(clrun__plan_rank rank);
/* Places every buffer, each time the one that fits lowest (ties: higher priority[] first).
 * Offsets go to offsets[]. Stops early, returning UINT64_MAX, once the peak would exceed
 * `cutoff`. Returns the peak. */
uint64_t clrun__plan_skyline_run(clrun__plan_skyline *s, const double *priority, uint64_t cutoff,
                                 uint64_t *offsets);
/* Randomised rebuilds until the deadline, max_trials rebuilds or the lower bound: priorities
 * of the current plan are perturbed at random and a trial kept when its peak is no worse. On a
 * strictly better plan, offsets and *best_peak are updated. s->priority holds the start;
 * scratch has room for n offsets. *trials gets the rebuilds tried (<= max_trials). */
void clrun__plan_skyline_search(clrun__plan_skyline *s, uint64_t lower_bound, double deadline,
                                uint64_t max_trials, uint64_t seed, uint64_t *best_peak,
                                uint64_t *offsets, uint64_t *trials, uint64_t *scratch);

/* ---- searches (plan_exact.c, plan_search.c) ---- */

/* Branch and bound over canonical plans, for n <= 64. Looks for a plan with peak below
 * *best_peak; when it finds one it writes it to offsets and lowers *best_peak. *complete is set
 * when the search space was exhausted before the deadline and within max_nodes nodes (then
 * *best_peak is optimal). *nodes counts the nodes visited (<= max_nodes). */
clrun_status clrun__plan_exact(const clrun_plan_buffer *buffers, size_t n, uint64_t align,
                               uint64_t lower_bound, double deadline, uint64_t max_nodes,
                               uint64_t *best_peak, uint64_t *offsets, bool *complete,
                               uint64_t *nodes);

/* Iterated local search over greedy orders, starting from `order` (whose plan has peak
 * *best_peak). Until the deadline, max_moves moves or the lower bound, it moves buffers that
 * define the peak earlier (or the buffers under them later) and re-places only the changed
 * suffix, keeping a move when the peak does not grow. When a strictly better plan is found,
 * offsets and *best_peak are updated. *moves counts the moves tried (<= max_moves). The
 * decoder is left cleared. */
clrun_status clrun__plan_local_search(clrun__plan_decoder *d, const uint32_t *order,
                                      uint64_t lower_bound, double deadline, uint64_t max_moves,
                                      uint64_t seed, uint64_t *best_peak, uint64_t *offsets,
                                      uint64_t *moves);

#endif
