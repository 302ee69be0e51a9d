/* clrun: the time-sweep construction, the planner's first: fast on every input, and sane.
 *
 * The buffers are taken in order of first (larger first on a tie), as an allocator would see
 * them, and each goes into the best-fitting gap (smallest that holds it, then lowest) among
 * the buffers alive at its first moment, or on top of them. Two buffers alive together are
 * then always checked against each other: the one that starts later sees the other alive when
 * it starts. So the plan is valid, though it never looks ahead. The buffers alive are kept
 * sorted by offset in an array: a step is a scan and a memmove of the k alive, O(n k) in all
 * with a small constant, where the lowest-first construction can take O(n k log n) heap looks
 * when thousands are alive at once. The clock is read every 256 buffers; past the deadline,
 * the buffers left are stacked above everything (valid, if poor), so it is bounded too. */
#include "plan/plan_internal.h"

#include <stdlib.h>
#include <string.h>

/* Buffers between clock reads. */
#define SWEEP_CLOCK_EVERY 256

typedef struct live_block {
    uint64_t lo, hi; /* offset, offset + size */
    uint64_t last;   /* when it dies */
} live_block;

/* Drops the blocks dead at t (last <= t), keeping the order. */
static size_t bury(live_block *live, size_t count, uint64_t t)
{
    size_t kept = 0;
    for (size_t i = 0; i < count; i++)
        if (live[i].last > t)
            live[kept++] = live[i];
    return kept;
}

/* The best-fitting aligned offset for `size` among the live blocks (sorted by offset), and
 * where in the array the new block goes. */
static uint64_t best_fit(const live_block *live, size_t count, uint64_t size, uint64_t align,
                         size_t *slot)
{
    uint64_t top = 0, best = 0, waste = UINT64_MAX;
    size_t best_slot = count;
    for (size_t i = 0; i < count; i++) {
        uint64_t start = clrun__plan_align_up(top, align);
        if (live[i].lo > start && live[i].lo - start >= size && live[i].lo - start - size < waste) {
            waste = live[i].lo - start - size;
            best = start;
            best_slot = i;
        }
        if (live[i].hi > top)
            top = live[i].hi;
    }
    if (waste == UINT64_MAX)
        best = clrun__plan_align_up(top, align);
    *slot = best_slot;
    return best;
}

uint64_t clrun__plan_sweep(const clrun_plan_buffer *buffers, size_t n, uint64_t align,
                           double deadline, uint64_t *offsets, bool *cut, clrun_status *status)
{
    *cut = false;
    *status = CLRUN_OK;
    /* by first, larger first on a tie, then by index: two stable passes, the minor key first */
    clrun__plan_key *keys = malloc((n ? n : 1) * sizeof *keys);
    clrun__plan_key *scratch = malloc((n ? n : 1) * sizeof *scratch);
    live_block *live = malloc((n ? n : 1) * sizeof *live);
    if (!keys || !scratch || !live) {
        free(keys);
        free(scratch);
        free(live);
        *status = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        return UINT64_MAX;
    }
    for (size_t i = 0; i < n; i++)
        keys[i] = (clrun__plan_key){UINT64_MAX - buffers[i].size, (uint32_t)i};
    clrun__plan_sort_keys(keys, n, scratch);
    for (size_t i = 0; i < n; i++)
        keys[i].key = buffers[keys[i].index].first;
    clrun__plan_sort_keys(keys, n, scratch);
    free(scratch);
    uint64_t peak = 0, now = 0;
    size_t count = 0, i = 0;
    for (; i < n; i++) {
        if (i % SWEEP_CLOCK_EVERY == SWEEP_CLOCK_EVERY - 1 && clrun__plan_now() > deadline)
            break;
        const clrun_plan_buffer *b = &buffers[keys[i].index];
        if (i == 0 || b->first != now) {
            now = b->first;
            count = bury(live, count, now);
        }
        size_t slot;
        uint64_t at = best_fit(live, count, b->size, align, &slot);
        memmove(live + slot + 1, live + slot, (count - slot) * sizeof *live);
        live[slot] = (live_block){at, at + b->size, b->last};
        count++;
        offsets[keys[i].index] = at;
        if (at + b->size > peak)
            peak = at + b->size;
    }
    /* out of time: the rest on top of everything, one above the other */
    *cut = i < n;
    for (; i < n; i++) {
        uint64_t at = clrun__plan_align_up(peak, align);
        offsets[keys[i].index] = at;
        peak = at + buffers[keys[i].index].size;
    }
    free(keys);
    free(live);
    return peak;
}
