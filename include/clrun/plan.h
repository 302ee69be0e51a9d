/* clrun: the static memory planner.
 *
 * Every buffer of a kernel graph has a known lifetime before the graph runs, so all of them can
 * be laid out in one arena ahead of time. This is offline dynamic storage allocation: given
 * buffers alive over [first, last) with a size, choose offsets (multiples of an alignment) so
 * that no two buffers alive at the same moment overlap in [offset, offset + size), and the peak
 * (the largest offset + size) is as small as possible. The problem is NP-hard; the planner
 * combines the greedy best-fit heuristics of production compilers with an exact search on small
 * instances and a time-limited improvement search on large ones, and always reports a lower
 * bound beside its answer so the quality of every plan is known.
 *
 * Pure C, no OpenCL: the functions allocate only host memory, never print, never abort. */
#ifndef CLRUN_PLAN_H
#define CLRUN_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <clrun/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------ */
/* Instances and plans                                                                          */
/* ------------------------------------------------------------------------------------------ */

/* One buffer: `size` bytes (> 0) alive over the half-open interval [first, last), last > first.
 * Two buffers conflict when their intervals intersect; [0,2) and [2,4) do not. */
typedef struct clrun_plan_buffer {
    uint64_t size;  /* bytes */
    uint64_t first; /* first moment alive */
    uint64_t last;  /* first moment dead again */
} clrun_plan_buffer;

/* Orders in which the greedy planner places buffers (each at its best-fitting gap). */
typedef enum clrun_plan_order {
    /* TFLite GPU delegate's greedy-by-size: size descending, then first ascending. */
    CLRUN_PLAN_ORDER_SIZE = 0,
    /* XLA GlobalDecreasingSizeBestFitHeap, spatial order: size descending, then lifetime
     * (last - first) descending. */
    CLRUN_PLAN_ORDER_SPATIAL,
    /* XLA GlobalDecreasingSizeBestFitHeap, temporal order: lifetime descending, then size
     * descending. */
    CLRUN_PLAN_ORDER_TEMPORAL,
    /* Area (size * lifetime) descending: the footprint in the space-time picture. */
    CLRUN_PLAN_ORDER_AREA,
    CLRUN_PLAN_ORDER_COUNT /* number of orders; not an order */
} clrun_plan_order;

/* How clrun_plan_solve may work. Start from CLRUN_PLAN_OPTIONS_DEFAULT. */
typedef struct clrun_plan_options {
    double time_limit_s;          /* wall-clock budget, >= 0: the call returns within it plus a
                                     few milliseconds (the clock is read inside every
                                     construction, table build and search; a construction cut
                                     short by it is dropped), except that the first
                                     construction, greedy by size, always runs to the end, so
                                     that the plan is never worse than it (clrun_plan_result.
                                     cut_short says when the limit stopped the others). 0 runs
                                     every construction to the end, with no search and no time
                                     bound. Returns early once a plan is proven optimal. On
                                     instances of 10,000 buffers or more the three lowest-first
                                     rankings come right after greedy by size, and where 128 or
                                     more are alive at once they are the only others (the other
                                     orders and the time sweep never gave the best plan there). */
    uint64_t alignment;           /* every offset is a multiple of it; a power of two, 0 means 1 */
    uint64_t seed;                /* seeds the randomised search: same seed, same instance and
                                     same work done gives the same plan */
    size_t search_max_buffers;    /* run the complete search on the independent parts of at most
                                     this many buffers; 0 disables it */
    uint64_t step_limit;          /* stop the searches after this many steps (the `steps` the
                                     result reports: constructions, complete-search nodes, and
                                     the rebuilds and moves tried); 0 = no limit. With a step
                                     limit every construction runs (unless the time limit
                                     comes first), the complete search may take half the steps
                                     left and the improvement searches the rest, so with a
                                     time limit too long to be reached the plan depends only
                                     on the instance, the options and the seed: the same on
                                     any machine. Whichever limit comes first stops a search.
                                     On instances of 10,000 buffers or more the constructions
                                     are those time_limit_s says, the complete search runs
                                     only on parts of few buffers (or when a capacity is
                                     asked), and the lowest-first rebuilds take every step
                                     left: the local search over best-fit orders never runs. */
    uint64_t capacity;            /* bytes the arena may take; 0 = no budget. With a budget the
                                     planner still minimises the peak, but answers first
                                     whether any plan fits (clrun_plan_result.verdict): at once
                                     when the lower bound exceeds it (one construction runs,
                                     for the plan returned); otherwise, when the constructions
                                     exceed it, the complete search is asked about this
                                     capacity before any other, and the call returns as soon
                                     as that is proven impossible. With time_limit_s 0 there
                                     is no search: above the constructions' peak the verdict is
                                     then CLRUN_PLAN_UNKNOWN. */
} clrun_plan_options;

/* One second, no step limit, byte alignment, seed 1, the complete search on every part, no
 * capacity. */
#define CLRUN_PLAN_OPTIONS_DEFAULT                                                                 \
    ((clrun_plan_options){.time_limit_s = 1.0,                                                     \
                          .alignment = 1,                                                          \
                          .seed = 1,                                                               \
                          .search_max_buffers = SIZE_MAX,                                          \
                          .step_limit = 0,                                                         \
                          .capacity = 0})

/* Whether the plan fits clrun_plan_options.capacity. */
typedef enum clrun_plan_verdict {
    CLRUN_PLAN_FITS = 0,   /* the plan returned fits (always so without a capacity) */
    CLRUN_PLAN_INFEASIBLE, /* proven: no plan fits; the plan returned is the best found */
    CLRUN_PLAN_UNKNOWN     /* the limits came before a plan that fits or a proof that none does;
                              the plan returned is the best found, above the capacity */
} clrun_plan_verdict;

/* What clrun_plan_solve found. */
typedef struct clrun_plan_result {
    uint64_t peak_bytes;        /* max over buffers of offset + size: the arena size needed */
    uint64_t lower_bound_bytes; /* clrun_plan_lower_bound: no plan can have a smaller peak */
    bool optimal;               /* proven: peak == lower bound, or the complete search proved
                                   that no plan has a smaller peak */
    double planner_ms;          /* wall-clock time spent in the call */
    const char *method;         /* static name of what produced the plan (of the independent
                                   part that defines the peak, when parts come from different
                                   methods): a best-fit order ("greedy-size",
                                   "xla-spatial", "xla-temporal", "greedy-area"), a
                                   lowest-first construction ("lowest-first-size",
                                   "lowest-first-area", "lowest-first-lifetime"),
                                   "time-sweep", "complete-search", "lowest-first-search",
                                   "local-search", "stacked" (buffers all alive at once,
                                   stacked: optimal), or "empty" */
    uint64_t steps;             /* effort: constructions built, plus search nodes, rebuilds and
                                   moves tried */
    clrun_plan_verdict verdict; /* against options.capacity; CLRUN_PLAN_FITS without one */
    bool cut_short;             /* the time limit came before every construction had run to
                                   its end: some were not started or were dropped unfinished.
                                   The plan is then the best of those that finished, greedy
                                   by size always among them (it ignores the limit). False
                                   when the constructions stopped early at the lower bound. */
} clrun_plan_result;

/* The name of a verdict: "fits", "infeasible", "unknown" ("unknown" out of range too). */
const char *clrun_plan_verdict_name(clrun_plan_verdict verdict);

/* ------------------------------------------------------------------------------------------ */
/* Planning                                                                                     */
/* ------------------------------------------------------------------------------------------ */

/* The lower bound of every plan: the largest, over all moments, of the bytes that must be
 * stacked at once. With alignment A each buffer below the top one takes its size rounded up to
 * A, so at a moment with live set S the bound is sum(round_up(size, A)) - max(padding) over S;
 * with A = 1 that is the plain total of live bytes. O(n log n).
 * CLRUN_ERROR_INVALID_ARGUMENT for an invalid instance (see clrun_plan_solve),
 * CLRUN_ERROR_INVALID_ALIGNMENT for an alignment that is not a power of two (0 means 1),
 * CLRUN_ERROR_OUT_OF_HOST_MEMORY when memory runs out. */
clrun_status clrun_plan_lower_bound(const clrun_plan_buffer *buffers, size_t n, uint64_t alignment,
                                    uint64_t *lower_bound);

/* A baseline: places the buffers one by one in `order`, each at the smallest gap between
 * already placed, time-overlapping buffers that fits it (best fit; ties to the lower offset),
 * or on top of them when no gap fits. Fills offsets[0..n) and *peak. Where few buffers are
 * alive at once, an interval tree over the lifetimes finds the k overlapping ones: O(n (log n
 * + k log k)). Where many are, a segment tree over time keeps the union of the placed bytes per
 * node, and a placement cuts the gaps that fit it out of O(log n) such unions, never looking at
 * the buffers one by one (0.7 s at 50k buffers with 900 alive at once, where the scan takes
 * 1.8 s). The plans are the same. Errors as clrun_plan_lower_bound, plus
 * CLRUN_ERROR_INVALID_ARGUMENT for an unknown order. */
clrun_status clrun_plan_greedy(const clrun_plan_buffer *buffers, size_t n, uint64_t alignment,
                               clrun_plan_order order, uint64_t *offsets, uint64_t *peak);

/* The planner. The instance is cut where no buffer is alive across a moment; each independent
 * part keeps the best placement any method gives it, and a part whose buffers are all alive at
 * one moment (a wide graph's branches waiting for their join) is stacked at once (optimal). In
 * turn, while time (and steps, with a step limit) remain:
 *  1. constructions: first greedy by size (clrun_plan_greedy with CLRUN_PLAN_ORDER_SIZE),
 *     always to the end whatever the limits, so that the plan returned is never worse than
 *     it; then "lowest first": the plan is built from offset 0 up, each step placing the
 *     buffer that fits lowest (ties: largest size, area or lifetime), found with a segment
 *     tree over time in O(log n) per look, the other best-fit orders, and the time sweep
 *     (buffers in order of first, each into the best gap among those alive then). The others
 *     start only during the first half of the time limit, and are dropped when it cuts them
 *     short (result.cut_short);
 *  2. the complete search, on every part of at most search_max_buffers buffers whose plan is
 *     above the lower bound: optimisation as a sequence of decisions ("does everything fit
 *     under C?": the capacity, the lower bound, then bisection up to the best peak), each a
 *     depth-first search over canonical plans (MiniMalloc's: buffers placed in offset order,
 *     each as low as the others allow, lowest candidate first, pruned where some moment
 *     cannot stack its unplaced buffers under C, or an unplaced buffer would fit wholly
 *     below the lowest candidate; restarts through nine tie-break orders, MiniMalloc's three
 *     among them, then perturbed copies of them chosen by the restart's number, every other
 *     restart choosing first the candidate that covers the fullest moment, with doubling node
 *     limits: deterministic for a given step limit).
 *     It proves optimality when no plan fits under the best peak less one; given half the
 *     time and steps left;
 *  3. improvement: randomised rebuilds of the best lowest-first plan with perturbed priorities,
 *     then an iterated local search that moves the buffers defining the peak earlier in the
 *     best best-fit order; a change is kept when the peak does not grow.
 * It stops as soon as a plan reaches the lower bound. Anytime: the best plan so far is what is
 * returned, always a valid plan. Fills offsets[0..n) and *result (both may be written even on
 * error). `options` may be NULL for CLRUN_PLAN_OPTIONS_DEFAULT.
 *
 * With options.capacity (a budget such as the device's memory): result.verdict is
 * CLRUN_PLAN_FITS when the plan returned fits, CLRUN_PLAN_INFEASIBLE when no plan can (the
 * lower bound exceeds it, or the complete search proved it), CLRUN_PLAN_UNKNOWN when the
 * limits ran out first; the status is CLRUN_OK in all three cases. For instance:
 *
 *     clrun_plan_options o = CLRUN_PLAN_OPTIONS_DEFAULT;
 *     o.alignment = base_addr_align;
 *     o.capacity = budget;                  // e.g. the device memory the arena may take
 *     st = clrun_plan_solve(items, n, &o, offsets, &r);
 *     if (st == CLRUN_OK && r.verdict == CLRUN_PLAN_INFEASIBLE)
 *         ... no plan fits: at least r.lower_bound_bytes are alive at once, or the search
 *             proved that even that much is not enough ...
 *     else if (st == CLRUN_OK && r.verdict == CLRUN_PLAN_UNKNOWN)
 *         ... none found within the limit: the best needs r.peak_bytes ...
 *
 * CLRUN_ERROR_INVALID_ARGUMENT: NULL buffers/offsets/result with n > 0, n >= 2^32, a buffer
 * with size 0 or last <= first, a negative or NaN time limit, or an instance whose total
 * aligned size does not fit in 64 bits (so no offset can overflow).
 * CLRUN_ERROR_INVALID_ALIGNMENT: alignment not a power of two.
 * CLRUN_ERROR_OUT_OF_HOST_MEMORY: nothing is leaked. */
clrun_status clrun_plan_solve(const clrun_plan_buffer *buffers, size_t n,
                              const clrun_plan_options *options, uint64_t *offsets,
                              clrun_plan_result *result);

/* The name of an order ("greedy-size", "xla-spatial", "xla-temporal", "greedy-area");
 * "unknown" for a value out of range. */
const char *clrun_plan_order_name(clrun_plan_order order);

/* ------------------------------------------------------------------------------------------ */
/* Picture                                                                                      */
/* ------------------------------------------------------------------------------------------ */

/* Writes the plan as an SVG picture: time across, offset up, one rectangle per buffer, the
 * lower bound as a dashed line, the peak marked, axes in human units and a title with the
 * totals. `title` may be NULL ("memory plan"). For large plans, rectangles smaller than a
 * fraction of a pixel are left out (the picture says how many) so the file stays small.
 * CLRUN_ERROR_INVALID_ARGUMENT for NULL arguments with n > 0, CLRUN_ERROR_IO when the stream
 * reports an error, CLRUN_ERROR_OUT_OF_HOST_MEMORY when memory runs out. */
clrun_status clrun_plan_write_svg(FILE *out, const clrun_plan_buffer *buffers, size_t n,
                                  const uint64_t *offsets, uint64_t lower_bound,
                                  const char *title);

/* The same, with each buffer's name (names[i], or "buffer i" where names or names[i] is NULL)
 * in its tooltip. */
clrun_status clrun_plan_write_svg_named(FILE *out, const clrun_plan_buffer *buffers,
                                        const char *const *names, size_t n,
                                        const uint64_t *offsets, uint64_t lower_bound,
                                        const char *title);

#ifdef __cplusplus
}
#endif
#endif
