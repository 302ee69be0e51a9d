/* clrun: what the planner's files share (lib/plan/). Not installed. */
#ifndef CLRUN_PLAN_INTERNAL_H
#define CLRUN_PLAN_INTERNAL_H

#include <clrun/plan.h>

#include "core/util.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Rounds v up to a multiple of the power of two `align`; the caller knows it cannot overflow
 * (every value rounded is at most the instance's total aligned size). */
static inline uint64_t clrun__plan_align_up(uint64_t v, uint64_t align)
{
    return (v + (align - 1)) & ~(align - 1);
}

/* The planner's only source of randomness: splitmix64 (core/util.h). */
static inline uint64_t clrun__plan_random(uint64_t *state) { return clrun__splitmix64(state); }

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

/* clrun_plan_lower_bound on a checked instance (align a power of two), with the most buffers
 * alive at once in *max_alive: one sweep, two sorts. */
clrun_status clrun__plan_bound(const clrun_plan_buffer *buffers, size_t n, uint64_t align,
                               uint64_t *lower_bound, uint32_t *max_alive);

/* Tests only: when set, the clock the planner reads (seconds) in place of the monotonic one,
 * so that a test can make time pass with the work done (each reading one tick) and check the
 * time limit's rules deterministically. The library never sets it. */
extern double (*clrun__plan_test_clock)(void);

/* Seconds on the monotonic clock (or the test's). */
static inline double clrun__plan_now(void)
{
    return clrun__plan_test_clock ? clrun__plan_test_clock() : clrun__now();
}

/* Checks an instance: pointers, sizes, intervals, alignment (0 becomes 1, stored in *align),
 * n below 2^32 and the total aligned size within 64 bits. */
clrun_status clrun__plan_check(const clrun_plan_buffer *buffers, size_t n, uint64_t alignment,
                               uint64_t *align);

/* A sort key and the buffer it belongs to. */
typedef struct clrun__plan_key {
    uint64_t key;
    uint32_t index;
} clrun__plan_key;

/* Sorts keys[0..n) by key, stably (equal keys keep their order), in O(n) passes of 11 bits
 * (those where every key has the same digit are skipped); scratch has room for n keys. What
 * the constructions' orders and sweeps sort: qsort's callbacks cost as much as a best-fit pass
 * on sparse instances. */
void clrun__plan_sort_keys(clrun__plan_key *keys, size_t n, clrun__plan_key *scratch);

/* Fills order[0..n) with the buffer indices in the given greedy order. */
clrun_status clrun__plan_order_fill(const clrun_plan_buffer *buffers, size_t n,
                                    clrun_plan_order order, uint32_t *indices);

/* Fills indices[0..n) with the buffer indices sorted by first, ties by index: the order the
 * decoder's segment tree and the part decomposition both sweep time in (plan_greedy.c). */
clrun_status clrun__plan_sort_by_first(const clrun_plan_buffer *buffers, size_t n,
                                       uint32_t *indices);

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
    uint64_t work;                    /* spans gathered since the clock was last read */
} clrun__plan_decoder;

/* Spans a decoder gathers between clock reads: a few milliseconds of gap scans. */
#define CLRUN__PLAN_DECODER_CLOCK_WORK 65536

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
/* Clears, then places order[0..n) one by one; offsets[b] gets each offset. Returns the peak,
 * or UINT64_MAX when the deadline came first. */
uint64_t clrun__plan_decoder_run(clrun__plan_decoder *d, const uint32_t *order, double deadline,
                                 uint64_t *offsets);
/* True when enough gap scans were done since the last look at the clock and it is past the
 * deadline (each scan costs in proportion to the buffers it meets, which can be thousands). */
bool clrun__plan_decoder_late(clrun__plan_decoder *d, double deadline);

/* Sorts spans by lo (an inlined quicksort: several times qsort's speed on the gap scans). */
void clrun__plan_sort_spans(clrun__plan_span *spans, size_t count);

/* ---- best fit over interval sets: the fixed-order constructions (plan_fit.c) ---- */

/* Disjoint, non-touching byte intervals sorted by offset: the union of some placed buffers. */
typedef struct clrun__plan_span_set {
    clrun__plan_span *v; /* len intervals, room for cap */
    uint32_t len, cap;
} clrun__plan_span_set;

/* Best fit with the placed bytes kept as unions in a segment tree over the compressed time
 * axis: a placement touches O(log T) sets, each a few intervals once the arena fills, where
 * the decoder scans and sorts every placed buffer alive with it. Insert-only (see plan_fit.c);
 * the plans are the decoder's, to the byte. */
typedef struct clrun__plan_fit {
    const clrun_plan_buffer *buffers; /* the instance, not owned */
    size_t n;                         /* buffers */
    uint64_t align;                   /* power of two */
    uint32_t *from, *to;              /* buffer b is alive over moments [from[b], to[b]) */
    size_t leaves;                    /* power of two >= moments */
    clrun__plan_span_set *whole;      /* per node: bytes of buffers alive over all of it */
    clrun__plan_span_set *under;      /* per node: bytes of buffers alive somewhere in it */
    clrun__plan_span *gather;         /* scratch: the regions one query has left */
    clrun__plan_span *spare;          /* scratch: what a cut leaves of them; the two swap */
    size_t gather_cap;                /* room in gather and in spare */
    uint64_t work;                    /* intervals gathered since the clock was last read */
} clrun__plan_fit;

clrun_status clrun__plan_fit_init(clrun__plan_fit *f, const clrun_plan_buffer *buffers, size_t n,
                                  uint64_t align);
void clrun__plan_fit_free(clrun__plan_fit *f);
/* Unplaces every buffer (the sets keep their memory). */
void clrun__plan_fit_clear(clrun__plan_fit *f);
/* The best-fit offset for unplaced buffer b given the placed ones. */
clrun_status clrun__plan_fit_offset(clrun__plan_fit *f, uint32_t b, uint64_t *offset);
/* Marks b placed at `offset`. */
clrun_status clrun__plan_fit_insert(clrun__plan_fit *f, uint32_t b, uint64_t offset);
/* Clears, then places order[0..n) one by one into offsets[]; *peak gets the peak, or
 * UINT64_MAX when the deadline came first (INFINITY: never). Fails only for host memory. */
clrun_status clrun__plan_fit_run(clrun__plan_fit *f, const uint32_t *order, double deadline,
                                 uint64_t *offsets, uint64_t *peak);

/* From this many buffers alive at once the interval sets beat the decoder's sorted scan
 * (measured: 2.5x faster at 900 alive, 1.5x slower at 50, the same plans). */
#define CLRUN__PLAN_FIT_DENSE 128

/* From this many buffers (the whole instance's) the lowest-first rankings come right after
 * greedy by size, a dense instance runs only those four constructions, and the improvement
 * time all goes to the lowest-first rebuilds (plan.c, "The constructions" and
 * run_improvement). */
#define CLRUN__PLAN_LARGE_N 10000

/* ---- lowest-offset-first construction (plan_skyline.c) ---- */

/* Ways to rank buffers that could go at the same lowest offset. */
typedef enum clrun__plan_rank {
    CLRUN__PLAN_RANK_SIZE = 0, /* larger first */
    CLRUN__PLAN_RANK_SPAN,     /* longer-lived first */
    CLRUN__PLAN_RANK_AREA,     /* larger size x lifetime first */
    CLRUN__PLAN_RANK_COUNT
} clrun__plan_rank;

/* The construction's state: the instance on a compressed time axis; the skyline as runs of
 * moments of equal height; and a merge-sort tree over the buffers' first moments that answers
 * "the best-ranked unplaced buffer alive only within [a, c)" (plan_skyline.c). */
typedef struct clrun__plan_skyline {
    const clrun_plan_buffer *buffers; /* the instance, not owned */
    size_t n;                         /* buffers */
    uint64_t align;                   /* power of two */
    uint32_t *from, *to;              /* buffer b is alive over moments [from[b], to[b]) */
    size_t leaves;                    /* power of two >= moments */
    bool dense;                       /* CLRUN__PLAN_FIT_DENSE alive at once somewhere */
    /* sparse instances: a segment tree of each moment's highest end, a heap of the buffers */
    uint64_t *whole;                    /* per node: an end raised over the node's whole range */
    uint64_t *below;                    /* per node: highest end anywhere in its range */
    struct clrun__plan_sky_wait *waiting; /* by (lowest offset when last looked, priority) */
    /* dense ones: runs of the skyline, and the buffers by first and last moment */
    size_t levels;                    /* of the merge-sort tree: log2(leaves) + 1 */
    uint32_t *by_to;    /* per level: the buffers by (from >> level, to, index) */
    uint32_t *to_at;    /* per level: to[] of those */
    uint32_t *place;    /* per buffer and level: where it lies in by_to */
    uint32_t *rank_min; /* per level and node: a min-tree of the ranks of its unplaced buffers */
    uint32_t *node_at;  /* per level: where node j's buffers start (leaves >> level) + 1 */
    size_t node_base[40];               /* where each level's node_at starts */
    uint64_t *height;                   /* per run start: its height (aligned) */
    uint32_t *run_end, *run_begin;      /* per run start: its end; per run end: its start */
    uint32_t *version;                  /* per run start: bumped whenever the run changes */
    struct clrun__plan_sky_entry *heap; /* runs by (height, best rank inside) */
    size_t heap_room;
    double *priority;  /* per buffer: higher goes first on a tie */
    double *trial;     /* per buffer: perturbed priorities being tried */
    uint32_t *order;   /* scratch: buffers by priority, highest first */
    uint32_t *rank_of; /* scratch: the inverse of order */
    clrun__plan_key *keys; /* scratch for sorting them: 2n keys */
} clrun__plan_skyline;

clrun_status clrun__plan_skyline_init(clrun__plan_skyline *s, const clrun_plan_buffer *buffers,
                                      size_t n, uint64_t align);
void clrun__plan_skyline_free(clrun__plan_skyline *s);
/* Fills s->priority for one ranking. */
void clrun__plan_skyline_rank(clrun__plan_skyline *s, clrun__plan_rank rank);
const char *clrun__plan_rank_name(clrun__plan_rank rank);
/* Places every buffer, each time the one that fits lowest (ties: higher priority[] first).
 * Offsets go to offsets[]. Stops early, returning UINT64_MAX, once the peak would exceed
 * `cutoff`, or at the deadline (read every 1024 heap looks). Returns the peak. */
uint64_t clrun__plan_skyline_run(clrun__plan_skyline *s, const double *priority, uint64_t cutoff,
                                 double deadline, uint64_t *offsets);

/* ---- the time-sweep construction (plan_sweep.c) ---- */

/* Places the buffers in order of first (larger first on a tie), each at the best-fitting gap
 * among those alive at its first moment, or on top; O(n k) for k alive at once. Past the
 * deadline (read every 256 buffers) the rest are stacked above everything and *cut is set.
 * Returns the peak; UINT64_MAX with *status set when host memory runs out. */
uint64_t clrun__plan_sweep(const clrun_plan_buffer *buffers, size_t n, uint64_t align,
                           double deadline, uint64_t *offsets, bool *cut, clrun_status *status);

/* Randomised rebuilds until the deadline, max_trials rebuilds or the lower bound: priorities
 * of the current plan are perturbed at random and a trial kept when its peak is no worse. On a
 * strictly better plan, offsets and *best_peak are updated. s->priority holds the start;
 * scratch has room for n offsets. *trials gets the rebuilds tried (<= max_trials). */
void clrun__plan_skyline_search(clrun__plan_skyline *s, uint64_t lower_bound, double deadline,
                                uint64_t max_trials, uint64_t seed, uint64_t *best_peak,
                                uint64_t *offsets, uint64_t *trials, uint64_t *scratch);

/* ---- independent parts (plan_parts.c) ---- */

/* The instance cut where no buffer is alive across a moment, and the best placement of each
 * part found so far. Parts are numbered in time order. */
typedef struct clrun__plan_parts {
    size_t count;          /* parts (0 for an empty instance) */
    uint32_t *member;      /* buffer indices, grouped by part, sorted by first within each */
    size_t *start;         /* part q is member[start[q] .. start[q + 1]) */
    uint32_t *part_of;     /* buffer -> its part */
    uint64_t *lower_bound; /* per part: clrun_plan_lower_bound of its buffers */
    uint32_t *max_alive;   /* per part: the most of its buffers alive at once */
    uint64_t *best_peak;   /* per part: peak of the best placement kept; UINT64_MAX before any */
    const char **method;   /* per part: what produced it */
} clrun__plan_parts;

clrun_status clrun__plan_parts_build(const clrun_plan_buffer *buffers, size_t n, uint64_t align,
                                     clrun__plan_parts *parts);
void clrun__plan_parts_free(clrun__plan_parts *parts);
/* Buffers times the most alive at once in part q: what one dive of the complete search costs
 * it, about (each placement updates the buffers alive with it). */
uint64_t clrun__plan_parts_work(const clrun__plan_parts *parts, size_t q);
/* Peak of part q in a plan. */
uint64_t clrun__plan_parts_part_peak(const clrun__plan_parts *parts,
                                     const clrun_plan_buffer *buffers, size_t q,
                                     const uint64_t *offsets);
/* Copies part q of `plan` into best[] when its peak beats the part's best kept; true if so. */
bool clrun__plan_parts_merge_part(clrun__plan_parts *parts, const clrun_plan_buffer *buffers,
                                  size_t q, const uint64_t *plan, const char *method,
                                  uint64_t *best);
/* Copies into best[] each part of `plan` whose peak beats the part's best kept; true when one
 * did. */
bool clrun__plan_parts_merge(clrun__plan_parts *parts, const clrun_plan_buffer *buffers,
                             const uint64_t *plan, const char *method, uint64_t *best);
/* Stacks, into best[], every part whose buffers are all alive at one moment (optimal for it:
 * its peak is its lower bound) and keeps that; returns how many parts were. */
size_t clrun__plan_parts_stack(clrun__plan_parts *parts, const clrun_plan_buffer *buffers,
                               uint64_t align, uint64_t *best);
/* Peak of the plan of kept parts (the largest best_peak), and *method (may be NULL) the method
 * of the part that defines it. */
uint64_t clrun__plan_parts_peak(const clrun__plan_parts *parts, const char **method);

/* ---- the complete search (plan_decide.c, plan_complete.c) ---- */

/* Parts whose work (clrun__plan_parts_work: buffers x most alive at once) exceeds this are
 * "large" for the complete search: a dive there costs enough (thousands of buffers, hundreds
 * alive with each) that it descends from the best peak in a few dives rather than bisecting
 * from the bound, and gets a quarter of the time, not half. A chain of 100k buffers is not
 * large (two alive at once); a packing of 10k with 300 alive is. */
#define CLRUN__PLAN_LARGE_WORK 1000000

/* Static orders the decision search breaks ties with; restarts cycle through them, then
 * through perturbed copies of them (plan_decide_tables.c). */
#define CLRUN__PLAN_RANKINGS 9

/* How a decision ended. */
typedef enum clrun__plan_outcome {
    CLRUN__PLAN_FOUND = 0,  /* a plan under the capacity was written */
    CLRUN__PLAN_INFEASIBLE, /* the search space was exhausted: none exists */
    CLRUN__PLAN_LIMIT,      /* the node limit or the deadline came first */
    CLRUN__PLAN_NO_MEMORY   /* host memory ran out */
} clrun__plan_outcome;

/* The decision search over one part (opaque). */
typedef struct clrun__plan_decide clrun__plan_decide;

/* Builds the search tables for the m buffers buffers[member[0..m)] (member must outlive the
 * search). *out is left NULL, with CLRUN_OK, when the part is too dense to search (more than
 * 4M overlapping pairs or 8M buffer-moments) or the deadline comes while building. */
clrun_status clrun__plan_decide_new(const clrun_plan_buffer *buffers, const uint32_t *member,
                                    size_t m, uint64_t align, double deadline,
                                    clrun__plan_decide **out);
void clrun__plan_decide_free(clrun__plan_decide *d);
/* Searches for offsets of the part with every end at or below `capacity`, ties broken by the
 * static order `ranking` % CLRUN__PLAN_RANKINGS (perturbed, deterministically in `ranking`,
 * from the second turn of the orders on; odd rankings choose candidates fail-first), visiting
 * at most max_nodes nodes (placements) and stopping at the deadline (read every 64 nodes). On FOUND, offsets[member[i]] are written (and nothing else).
 * *nodes gets the nodes visited. */
clrun__plan_outcome clrun__plan_decide_run(clrun__plan_decide *d, uint64_t capacity, int ranking,
                                           uint64_t max_nodes, double deadline,
                                           uint64_t *offsets, uint64_t *nodes);

/* What the optimisation by decisions did (plan_complete.c). */
typedef struct clrun__plan_complete_result {
    bool optimal;             /* the kept plan's peak is proven optimal */
    uint64_t proven_above;    /* every plan's peak is at least this (>= the lower bound) */
    clrun_plan_verdict verdict; /* against the capacity, when one was given */
    uint64_t steps;           /* nodes visited */
} clrun__plan_complete_result;

/* Minimises the peak of the kept plan (parts->best_peak, offsets in best[]) by a sequence of
 * decisions: first the capacity (when nonzero and the kept plan exceeds it), then the lower
 * bound, then bisection between the lowest capacity not proven infeasible and the kept peak,
 * each decision trying, on every part whose kept peak exceeds it, the static orders in turn
 * with doubling node limits (restarts), and each round of bisection given four times the
 * nodes of the last. Parts of more than max_part buffers are not searched, nor those whose
 * tables (about setup_per_buffer seconds a buffer) would not be built by the deadline. Stops
 * at the deadline, after max_steps nodes, or once the peak is proven optimal (or the capacity
 * proven out of reach). scratch has room for n offsets. */
clrun_status clrun__plan_complete(const clrun_plan_buffer *buffers, size_t n, uint64_t align,
                                  clrun__plan_parts *parts, uint64_t capacity, size_t max_part,
                                  double deadline, uint64_t max_steps, double setup_per_buffer,
                                  uint64_t *best, uint64_t *scratch,
                                  clrun__plan_complete_result *out);

/* ---- improvement searches (plan_search.c) ---- */

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
