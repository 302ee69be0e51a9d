/* clrun: optimisation as a sequence of decisions (plan_decide.c answers each).
 *
 * The peak of a plan is the largest peak of its independent parts (plan_parts.c), so "is there
 * a plan under C?" is asked only of the parts whose kept plan exceeds C, largest first; one
 * part proven unable to fit answers no for the whole. The capacities asked, in rounds: the
 * caller's capacity first (when the kept plan exceeds it), then the lowest capacity not proven
 * infeasible (at first the lower bound: on packing-like instances the optimum), then bisection
 * between it and the kept peak; on parts of thousands of buffers, where a dive is dear and the
 * bound rarely in reach, the first round descends from the kept peak by eighths of the gap
 * instead. A decision that runs out of nodes counts as "no, for now": the bisection goes on
 * above it, and the next round starts again from the proven bound with four times the nodes
 * per decision. Within one decision on one part the search restarts with each static order in
 * turn, the node limit doubling after each full turn, so a bad early choice in one order costs
 * only its limit (after the first turn the orders are perturbed anew each time and every other
 * run chooses fail-first: the run lengths of such searches are heavy-tailed, and new short
 * runs find what one long run of the same search does not); the decisions at the bound and at the capacity, asked every round, get eight
 * decisions' nodes and carry their restarts over from round to round. Every plan found is kept
 * per part, so the kept peak only falls. */
#include "plan/plan_internal.h"

#include <stdlib.h>
#include <string.h>

/* Nodes per decision in the first round: a few dives through the largest part. */
#define COMPLETE_FIRST_NODES(m) (4 * (uint64_t)(m) + 2048)
/* On large parts (CLRUN__PLAN_LARGE_WORK) a dive is costly and the lower bound rarely within
 * reach: the first round gives the bound one dive, then descends from the kept peak in steps
 * of an eighth of the gap, one dive per decision. */
#define COMPLETE_LARGE_FIRST_NODES(m) ((uint64_t)(m) + (uint64_t)(m) / 2 + 256)
#define COMPLETE_LARGE_DECISION_SHARE 0.25
/* Nodes the decisions at the bound and at the capacity get, in decisions of the round. */
#define COMPLETE_BOUND_SHARE 8
/* Node limit of the first restart of a decision, per buffer of the part. */
#define COMPLETE_RESTART_NODES(m) (2 * (uint64_t)(m) + 256)

typedef struct complete {
    const clrun_plan_buffer *buffers;
    uint64_t align;
    clrun__plan_parts *parts;
    clrun__plan_decide **search; /* per part, built when first needed; NULL when not searchable */
    bool *built;                 /* per part: search[q] was attempted */
    int *bound_run;              /* per part: the next restart of its decision at the bound */
    int *capacity_run;           /* per part: the next restart of its decision at the capacity */
    size_t max_part;
    double deadline;
    double until;                /* the current decision stops then (<= deadline) */
    double setup_per_buffer;     /* seconds a part's tables take per buffer, about */
    uint64_t steps, max_steps;   /* nodes so far and the most allowed */
    uint64_t *best, *scratch;
    size_t *order;               /* scratch: parts to decide, largest kept peak first */
} complete;

static void complete_free(complete *c)
{
    if (c->search)
        for (size_t q = 0; q < c->parts->count; q++)
            clrun__plan_decide_free(c->search[q]);
    free(c->search);
    free(c->built);
    free(c->bound_run);
    free(c->capacity_run);
    free(c->order);
}

static bool out_of_budget(const complete *c)
{
    return c->steps >= c->max_steps || clrun__plan_now() > c->until;
}

/* The search of part q, built on first use; NULL when the part cannot be searched. */
static clrun_status part_search(complete *c, size_t q, clrun__plan_decide **out)
{
    if (!c->built[q]) {
        c->built[q] = true;
        size_t m = c->parts->start[q + 1] - c->parts->start[q];
        /* not built when it would end past the deadline (it would be useless then) */
        if (m <= c->max_part &&
            clrun__plan_now() + c->setup_per_buffer * (double)m <= c->deadline) {
            clrun_status st =
                clrun__plan_decide_new(c->buffers, c->parts->member + c->parts->start[q], m,
                                       c->align, c->deadline, &c->search[q]);
            if (st != CLRUN_OK)
                return st;
        }
    }
    *out = c->search[q];
    return CLRUN_OK;
}

/* Which restart sequence a decision continues: the decisions at the lower bound and at the
 * caller's capacity are asked again every round, so each part's restarts there go on where
 * they stopped (longer and longer runs) instead of starting over; a bisection target is new. */
typedef enum target_kind { TARGET_BISECTION, TARGET_BOUND, TARGET_CAPACITY } target_kind;

/* One decision on part q under `capacity` with at most `budget` nodes: restarts over the
 * static orders with doubling limits. A plan found is merged into the kept one. */
static clrun_status decide_part(complete *c, size_t q, uint64_t capacity, uint64_t budget,
                                target_kind kind, clrun__plan_outcome *outcome)
{
    *outcome = CLRUN__PLAN_LIMIT;
    if (c->parts->lower_bound[q] > capacity) {
        *outcome = CLRUN__PLAN_INFEASIBLE;
        return CLRUN_OK;
    }
    clrun__plan_decide *d = NULL;
    clrun_status st = part_search(c, q, &d);
    if (st != CLRUN_OK || !d)
        return st;
    size_t m = c->parts->start[q + 1] - c->parts->start[q];
    int first = 0, *next = kind == TARGET_BOUND      ? &c->bound_run[q]
                         : kind == TARGET_CAPACITY ? &c->capacity_run[q]
                                                   : &first;
    uint64_t spent = 0;
    for (int run = *next; spent < budget && !out_of_budget(c); run++) {
        int doubling = run / CLRUN__PLAN_RANKINGS;
        uint64_t whole = COMPLETE_RESTART_NODES(m) << (doubling > 40 ? 40 : doubling);
        uint64_t limit = whole, left = budget - spent, steps_left = c->max_steps - c->steps;
        if (limit > left)
            limit = left;
        if (limit > steps_left)
            limit = steps_left;
        uint64_t nodes = 0;
        clrun__plan_outcome o =
            clrun__plan_decide_run(d, capacity, run, limit, c->until, c->scratch, &nodes);
        spent += nodes;
        c->steps += nodes;
        if (nodes == whole)
            *next = run + 1; /* a run cut short by the budget is tried again, whole, next time */
        if (o == CLRUN__PLAN_NO_MEMORY)
            return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        if (o == CLRUN__PLAN_FOUND)
            clrun__plan_parts_merge_part(c->parts, c->buffers, q, c->scratch, "complete-search",
                                         c->best);
        if (o != CLRUN__PLAN_LIMIT) {
            *outcome = o;
            return CLRUN_OK;
        }
    }
    return CLRUN_OK;
}

/* Is there a plan under `capacity`? Each part above it is asked, the largest first (the part
 * that decides, usually), the others in time order. */
static clrun_status decide_all(complete *c, uint64_t capacity, uint64_t budget,
                               target_kind kind, clrun__plan_outcome *outcome)
{
    size_t count = 0;
    for (size_t q = 0; q < c->parts->count; q++)
        if (c->parts->best_peak[q] > capacity) {
            c->order[count++] = q;
            if (c->parts->best_peak[q] > c->parts->best_peak[c->order[0]]) {
                c->order[count - 1] = c->order[0];
                c->order[0] = q;
            }
        }
    *outcome = CLRUN__PLAN_FOUND;
    for (size_t i = 0; i < count; i++) {
        clrun__plan_outcome o;
        clrun_status st = decide_part(c, c->order[i], capacity, budget, kind, &o);
        if (st != CLRUN_OK)
            return st;
        if (o != CLRUN__PLAN_FOUND) {
            *outcome = o;
            return CLRUN_OK;
        }
    }
    return CLRUN_OK;
}

/* Rounds of decisions with growing budgets. out->proven_above gets the lowest capacity not
 * proven infeasible, out->verdict the answer for the caller's capacity when one was found. */
static clrun_status bisect(complete *c, uint64_t capacity, uint64_t first_budget, bool large,
                           clrun__plan_complete_result *out)
{
    uint64_t lo = out->proven_above;
    uint64_t hi = clrun__plan_parts_peak(c->parts, NULL);
    bool capacity_open = capacity > 0 && hi > capacity && capacity >= lo;
    for (uint64_t budget = first_budget; lo < hi && !out_of_budget(c); budget *= 4) {
        bool descend = large && budget == first_budget, found = false;
        uint64_t search_lo = lo;
        bool tried_low = false;
        while (search_lo < hi && !out_of_budget(c)) {
            uint64_t target;
            target_kind kind = TARGET_BISECTION;
            if (capacity_open) {
                target = capacity;
                kind = TARGET_CAPACITY;
            } else if (!tried_low) {
                target = search_lo;
                tried_low = true;
                kind = TARGET_BOUND;
            } else if (descend) {
                uint64_t step = (hi - search_lo) / 8;
                target = hi - 1 - step;
            } else {
                target = search_lo + (hi - search_lo) / 2;
            }
            /* the bound gets as many nodes as the bisection after it (about eight decisions): on
             * packing-like instances it is the optimum, and nothing else proves optimality. On
             * large parts, where a node can cost a hundred microseconds, a decision also gets at
             * most a quarter of the time left. */
            clrun__plan_outcome o;
            uint64_t nodes = kind == TARGET_BISECTION ? budget : COMPLETE_BOUND_SHARE * budget;
            double now = clrun__plan_now();
            c->until = large ? now + COMPLETE_LARGE_DECISION_SHARE * (c->deadline - now)
                             : c->deadline;
            clrun_status st = decide_all(c, target, nodes, kind, &o);
            c->until = c->deadline;
            if (st != CLRUN_OK)
                return st;
            if (capacity_open) {
                if (o == CLRUN__PLAN_LIMIT)
                    break; /* undecided: asked again next round, with more nodes */
                capacity_open = false;
                out->verdict = o == CLRUN__PLAN_FOUND ? CLRUN_PLAN_FITS : CLRUN_PLAN_INFEASIBLE;
            }
            if (o == CLRUN__PLAN_FOUND) {
                found = true;
                hi = clrun__plan_parts_peak(c->parts, NULL);
            } else if (o == CLRUN__PLAN_INFEASIBLE) {
                lo = target + 1;
                if (out->verdict == CLRUN_PLAN_INFEASIBLE && target == capacity)
                    break; /* nothing fits the capacity: the caller has its answer */
                if (search_lo < lo)
                    search_lo = lo;
            } else {
                search_lo = target + 1;
            }
        }
        if (out->verdict == CLRUN_PLAN_INFEASIBLE && capacity > 0 && lo > capacity)
            break;
        /* on large parts a round of dives that improved nothing leaves the time to the
         * improvement searches, which do better there */
        if (large && !found && !capacity_open)
            break;
        if (budget > UINT64_MAX / 8)
            break;
    }
    out->proven_above = lo;
    return CLRUN_OK;
}

clrun_status clrun__plan_complete(const clrun_plan_buffer *buffers, size_t n, uint64_t align,
                                  clrun__plan_parts *parts, uint64_t capacity, size_t max_part,
                                  double deadline, uint64_t max_steps, double setup_per_buffer,
                                  uint64_t *best, uint64_t *scratch,
                                  clrun__plan_complete_result *out)
{
    (void)n;
    uint64_t lower_bound = 0, work = 0;
    size_t largest = 0;
    for (size_t q = 0; q < parts->count; q++) {
        if (parts->lower_bound[q] > lower_bound)
            lower_bound = parts->lower_bound[q];
        if (parts->start[q + 1] - parts->start[q] > largest)
            largest = parts->start[q + 1] - parts->start[q];
        if (clrun__plan_parts_work(parts, q) > work)
            work = clrun__plan_parts_work(parts, q);
    }
    if (out->proven_above < lower_bound)
        out->proven_above = lower_bound;
    complete c = {.buffers = buffers, .align = align, .parts = parts, .max_part = max_part,
                  .deadline = deadline, .until = deadline, .setup_per_buffer = setup_per_buffer,
                  .max_steps = max_steps, .best = best, .scratch = scratch};
    size_t count = parts->count ? parts->count : 1;
    c.search = calloc(count, sizeof *c.search);
    c.built = calloc(count, sizeof *c.built);
    c.bound_run = calloc(count, sizeof *c.bound_run);
    c.capacity_run = calloc(count, sizeof *c.capacity_run);
    c.order = malloc(count * sizeof *c.order);
    clrun_status st = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    if (c.search && c.built && c.bound_run && c.capacity_run && c.order)
        st = work > CLRUN__PLAN_LARGE_WORK
                 ? bisect(&c, capacity, COMPLETE_LARGE_FIRST_NODES(largest), true, out)
                 : bisect(&c, capacity, COMPLETE_FIRST_NODES(largest), false, out);
    out->steps += c.steps;
    out->optimal = st == CLRUN_OK && out->proven_above >= clrun__plan_parts_peak(parts, NULL);
    complete_free(&c);
    return st;
}
