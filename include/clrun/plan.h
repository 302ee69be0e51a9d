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
    double time_limit_s;          /* wall-clock budget, >= 0. 0 runs every construction and
                                     no search. Otherwise the first construction always runs
                                     (all of them with a step_limit), the others and the
                                     searches only while time remains; the clock is read
                                     between steps, so the call may overrun by one
                                     construction (0.2 s for 50k buffers with ~30 alive at
                                     once, 0.8 s for the first and up to 2.4 s for another with
                                     ~500 alive at once). Returns early once a plan is proven
                                     optimal. */
    uint64_t alignment;           /* every offset is a multiple of it; a power of two, 0 means 1 */
    uint64_t seed;                /* seeds the randomised search: same seed, same instance and
                                     same work done gives the same plan */
    size_t exact_max_buffers;     /* run the exact branch-and-bound search only when n <= this;
                                     0 disables it */
    uint64_t step_limit;          /* stop the searches after this many search steps (the
                                     `steps` the result reports: search nodes plus moves and
                                     rebuilds tried, the constructions counted too); 0 = no
                                     limit. With a step limit every construction runs, the
                                     exact search may take the steps up to half the limit and
                                     the improvement searches the rest, so with a time limit
                                     too long to be reached the plan depends only on the
                                     instance, the options and the seed: the same on any
                                     machine. Whichever limit comes first stops a search. */
} clrun_plan_options;

/* One second, no step limit, byte alignment, seed 1, exact search up to 64 buffers. */
#define CLRUN_PLAN_OPTIONS_DEFAULT                                                                 \
    ((clrun_plan_options){.time_limit_s = 1.0,                                                     \
                          .alignment = 1,                                                          \
                          .seed = 1,                                                               \
                          .exact_max_buffers = 64,                                                 \
                          .step_limit = 0})

/* What clrun_plan_solve found. */
typedef struct clrun_plan_result {
    uint64_t peak_bytes;        /* max over buffers of offset + size: the arena size needed */
    uint64_t lower_bound_bytes; /* clrun_plan_lower_bound: no plan can have a smaller peak */
    bool optimal;               /* proven: peak == lower bound, or the exact search finished */
    double planner_ms;          /* wall-clock time spent in the call */
    const char *method;         /* static name of what produced the plan: a best-fit order
                                   ("greedy-size", "xla-spatial", "xla-temporal",
                                   "greedy-area"), a lowest-first construction
                                   ("lowest-first-size", "lowest-first-area",
                                   "lowest-first-lifetime"), "branch-and-bound",
                                   "lowest-first-search", "local-search", or "empty" */
    uint64_t steps;             /* effort: constructions built, plus search nodes, rebuilds and
                                   moves tried */
} clrun_plan_result;

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
 * or on top of them when no gap fits. Fills offsets[0..n) and *peak. An interval tree over the
 * lifetimes keeps each step proportional to the number of overlapping buffers: O(n (log n + k
 * log k)) for k buffers alive at once. Errors as clrun_plan_lower_bound, plus
 * CLRUN_ERROR_INVALID_ARGUMENT for an unknown order. */
clrun_status clrun_plan_greedy(const clrun_plan_buffer *buffers, size_t n, uint64_t alignment,
                               clrun_plan_order order, uint64_t *offsets, uint64_t *peak);

/* The planner. In turn, while time (and steps, with a step limit) remain:
 *  1. constructions: the best-fit orders above, and "lowest first": the plan is built from
 *     offset 0 up, each step placing the buffer that fits lowest (ties: largest size, area or
 *     lifetime), found with a segment tree over time in O(log n) per look;
 *  2. for n <= exact_max_buffers (at most 64): exact branch and bound over canonical plans
 *     (buffers placed in non-decreasing offset order, each as low as the buffers below allow;
 *     pruned by a per-moment lower bound), given half the time limit and half the steps;
 *  3. improvement: randomised rebuilds of the best lowest-first plan with perturbed priorities,
 *     then an iterated local search that moves the buffers defining the peak earlier in the
 *     best best-fit order; a change is kept when the peak does not grow.
 * It stops as soon as a plan reaches the lower bound. Anytime: the best plan so far is what is
 * returned. Fills offsets[0..n) and *result (both may be written even on error). `options`
 * may be NULL for CLRUN_PLAN_OPTIONS_DEFAULT.
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
