/* clrun: decomposition of a planning instance into independent parts.
 *
 * Where no buffer is alive across a moment (every buffer ends at or before it, or starts at or
 * after it), the buffers before and after it never meet: their offsets can be chosen apart, and
 * the peak of a plan is the largest peak of its parts. So the instance is cut at every such
 * moment: sorted by first, a part ends where the largest last seen so far is at most the next
 * first. Each part has its own lower bound (the instance's bound is the largest of them), and
 * the planner keeps, per part, the best placement any method produced, so a plan built from the
 * best part of each construction is never worse than the best construction. O(n log n). */
#include "plan/plan_internal.h"

#include <stdlib.h>
#include <string.h>

void clrun__plan_parts_free(clrun__plan_parts *p)
{
    free(p->max_alive);
    free(p->member);
    free(p->start);
    free(p->part_of);
    free(p->lower_bound);
    free(p->best_peak);
    free(p->method);
    memset(p, 0, sizeof *p);
}

/* Each part's lower bound, computed on a gathered copy of its buffers, and the most buffers
 * alive in it at once. */
static clrun_status part_bounds(clrun__plan_parts *p, const clrun_plan_buffer *buffers,
                                uint64_t align)
{
    size_t largest = 0;
    for (size_t q = 0; q < p->count; q++)
        if (p->start[q + 1] - p->start[q] > largest)
            largest = p->start[q + 1] - p->start[q];
    clrun_plan_buffer *copy = malloc((largest ? largest : 1) * sizeof *copy);
    clrun_status st = copy ? CLRUN_OK : CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    for (size_t q = 0; q < p->count && st == CLRUN_OK; q++) {
        size_t m = p->start[q + 1] - p->start[q];
        for (size_t i = 0; i < m; i++)
            copy[i] = buffers[p->member[p->start[q] + i]];
        st = clrun__plan_bound(copy, m, align, &p->lower_bound[q], &p->max_alive[q]);
    }
    free(copy);
    return st;
}

clrun_status clrun__plan_parts_build(const clrun_plan_buffer *buffers, size_t n, uint64_t align,
                                     clrun__plan_parts *p)
{
    memset(p, 0, sizeof *p);
    size_t m = n ? n : 1;
    p->member = malloc(m * sizeof *p->member);
    p->part_of = malloc(m * sizeof *p->part_of);
    p->start = malloc((m + 1) * sizeof *p->start);
    if (!p->member || !p->part_of || !p->start ||
        clrun__plan_sort_by_first(buffers, n, p->member) != CLRUN_OK) {
        clrun__plan_parts_free(p);
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    uint64_t reach = 0; /* largest last of the current part */
    for (size_t i = 0; i < n; i++) {
        const clrun_plan_buffer *b = &buffers[p->member[i]];
        if (i == 0 || b->first >= reach)
            p->start[p->count++] = i;
        if (i == 0 || b->last > reach)
            reach = b->last;
        p->part_of[p->member[i]] = (uint32_t)(p->count - 1);
    }
    p->start[p->count] = n;
    size_t parts = p->count ? p->count : 1;
    p->lower_bound = calloc(parts, sizeof *p->lower_bound);
    p->max_alive = calloc(parts, sizeof *p->max_alive);
    p->best_peak = malloc(parts * sizeof *p->best_peak);
    p->method = malloc(parts * sizeof *p->method);
    if (!p->lower_bound || !p->max_alive || !p->best_peak || !p->method) {
        clrun__plan_parts_free(p);
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    for (size_t q = 0; q < p->count; q++) {
        p->best_peak[q] = UINT64_MAX;
        p->method[q] = "empty";
    }
    clrun_status st = part_bounds(p, buffers, align);
    if (st != CLRUN_OK)
        clrun__plan_parts_free(p);
    return st;
}

uint64_t clrun__plan_parts_work(const clrun__plan_parts *p, size_t q)
{
    return (uint64_t)(p->start[q + 1] - p->start[q]) * p->max_alive[q];
}

uint64_t clrun__plan_parts_part_peak(const clrun__plan_parts *p, const clrun_plan_buffer *buffers,
                                     size_t q, const uint64_t *offsets)
{
    uint64_t peak = 0;
    for (size_t i = p->start[q]; i < p->start[q + 1]; i++) {
        uint32_t b = p->member[i];
        if (offsets[b] + buffers[b].size > peak)
            peak = offsets[b] + buffers[b].size;
    }
    return peak;
}

bool clrun__plan_parts_merge_part(clrun__plan_parts *p, const clrun_plan_buffer *buffers,
                                  size_t q, const uint64_t *plan, const char *method,
                                  uint64_t *best)
{
    uint64_t peak = clrun__plan_parts_part_peak(p, buffers, q, plan);
    if (peak >= p->best_peak[q])
        return false;
    p->best_peak[q] = peak;
    p->method[q] = method;
    for (size_t i = p->start[q]; i < p->start[q + 1]; i++)
        best[p->member[i]] = plan[p->member[i]];
    return true;
}

bool clrun__plan_parts_merge(clrun__plan_parts *p, const clrun_plan_buffer *buffers,
                             const uint64_t *plan, const char *method, uint64_t *best)
{
    bool improved = false;
    for (size_t q = 0; q < p->count; q++)
        improved |= clrun__plan_parts_merge_part(p, buffers, q, plan, method, best);
    return improved;
}

uint64_t clrun__plan_parts_peak(const clrun__plan_parts *p, const char **method)
{
    uint64_t peak = 0;
    const char *which = "empty";
    for (size_t q = 0; q < p->count; q++)
        if (q == 0 || p->best_peak[q] > peak) {
            peak = p->best_peak[q];
            which = p->method[q];
        }
    if (method)
        *method = which;
    return peak;
}

/* Part q's buffers are all alive at one moment exactly when its lower bound is their aligned
 * total less the largest padding: then stacking them, the most padded one on top, is optimal. */
static bool part_is_one_stack(const clrun__plan_parts *p, const clrun_plan_buffer *buffers,
                              uint64_t align, size_t q, size_t *top)
{
    uint64_t total = 0, pad = 0;
    *top = p->start[q];
    for (size_t i = p->start[q]; i < p->start[q + 1]; i++) {
        const clrun_plan_buffer *b = &buffers[p->member[i]];
        uint64_t aligned = clrun__plan_align_up(b->size, align);
        total += aligned;
        if (aligned - b->size > pad) {
            pad = aligned - b->size;
            *top = i;
        }
    }
    return total - pad == p->lower_bound[q];
}

size_t clrun__plan_parts_stack(clrun__plan_parts *p, const clrun_plan_buffer *buffers,
                               uint64_t align, uint64_t *best)
{
    size_t stacked = 0;
    for (size_t q = 0; q < p->count; q++) {
        size_t top;
        if (!part_is_one_stack(p, buffers, align, q, &top))
            continue;
        uint64_t at = 0;
        for (size_t i = p->start[q]; i < p->start[q + 1]; i++) {
            if (i == top)
                continue;
            best[p->member[i]] = at;
            at += clrun__plan_align_up(buffers[p->member[i]].size, align);
        }
        best[p->member[top]] = at;
        p->best_peak[q] = at + buffers[p->member[top]].size;
        p->method[q] = "stacked";
        stacked++;
    }
    return stacked;
}
