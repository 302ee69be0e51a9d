/* The `best-fit` replay reference: coalescing best fit in one unbounded arena, offsets only.
 *
 * Sizes are rounded up to the alignment. A request takes the smallest hole that holds it (the
 * lowest such hole on ties), cut at its low end; when no hole does, it goes on top of the arena.
 * A freed block merges with the holes beside it, and with the free space above the top, so the
 * top is always the end of the highest live block; the footprint is the highest end of a block
 * as asked for (offset + size), as the strategies' is.
 * A reference, not an allocator: holes are an array sorted by offset and each request scans
 * them all, O(holes). */
#include "memory/replay_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct hole {
    uint64_t offset, size;
} hole;

typedef struct arena {
    hole *holes;     /* free ranges below the top, sorted by offset, never touching each other */
    size_t count, capacity;
    uint64_t top;    /* end of the highest live block */
} arena;

/* Position of the first hole at or after `offset`. */
static size_t hole_lower_bound(const arena *a, uint64_t offset)
{
    size_t lo = 0, hi = a->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a->holes[mid].offset < offset)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static uint64_t arena_alloc(arena *a, uint64_t bytes)
{
    size_t best = a->count;
    for (size_t i = 0; i < a->count; i++)
        if (a->holes[i].size >= bytes && (best == a->count || a->holes[i].size < a->holes[best].size))
            best = i;
    if (best == a->count) {
        uint64_t offset = a->top;
        a->top += bytes;
        return offset;
    }
    hole *h = &a->holes[best];
    uint64_t offset = h->offset;
    h->offset += bytes;
    h->size -= bytes;
    if (h->size == 0) {
        memmove(h, h + 1, (a->count - best - 1) * sizeof *h);
        a->count--;
    }
    return offset;
}

static bool arena_free(arena *a, uint64_t offset, uint64_t bytes)
{
    size_t at = hole_lower_bound(a, offset);
    bool joins_prev = at > 0 && a->holes[at - 1].offset + a->holes[at - 1].size == offset;
    bool joins_next = at < a->count && offset + bytes == a->holes[at].offset;
    if (offset + bytes == a->top) { /* the top comes down, past the hole below if it touches */
        a->top = joins_prev ? a->holes[--a->count].offset : offset;
        return true;
    }
    if (joins_prev && joins_next) {
        a->holes[at - 1].size += bytes + a->holes[at].size;
        memmove(&a->holes[at], &a->holes[at + 1], (a->count - at - 1) * sizeof *a->holes);
        a->count--;
    } else if (joins_prev) {
        a->holes[at - 1].size += bytes;
    } else if (joins_next) {
        a->holes[at].offset = offset;
        a->holes[at].size += bytes;
    } else {
        if (a->count == a->capacity) {
            size_t capacity = a->capacity ? a->capacity * 2 : 64;
            hole *grown = realloc(a->holes, capacity * sizeof *grown);
            if (grown == NULL)
                return false;
            a->holes = grown;
            a->capacity = capacity;
        }
        memmove(&a->holes[at + 1], &a->holes[at], (a->count - at) * sizeof *a->holes);
        a->holes[at] = (hole){offset, bytes};
        a->count++;
    }
    return true;
}

clrun_status clrun__replay_best_fit(const clrun__replay_trace *t, uint64_t alignment,
                                    clrun_replay_result *out, char *err, size_t errlen)
{
    out->allocator = "best-fit";
    uint64_t *offsets = calloc(t->count ? t->count : 1, sizeof *offsets);
    arena a = {0};
    uint64_t held = 0, asked = 0, peak_top = 0;
    bool ok = offsets != NULL;
    for (size_t i = 0; ok && i < t->event_count; i++) {
        const clrun__replay_event *e = &t->events[i];
        uint64_t size = t->sizes[e->row];
        uint64_t bytes = (size + alignment - 1) & ~(alignment - 1);
        if (bytes < size) {
            free(offsets);
            free(a.holes);
            snprintf(err, errlen, "buffer %llu (row %u): %llu bytes overflow the alignment",
                     (unsigned long long)t->rows[e->row].id, e->row + 1, (unsigned long long)size);
            return CLRUN_ERROR_OUT_OF_MEMORY;
        }
        if (!e->alloc) {
            ok = arena_free(&a, offsets[e->row], bytes);
            held -= bytes;
            asked -= size;
            continue;
        }
        offsets[e->row] = arena_alloc(&a, bytes);
        held += bytes;
        asked += size;
        if (held > out->peak_held) {
            out->peak_held = held;
            out->internal_waste = held - asked;
        }
        if (offsets[e->row] + size > out->footprint) /* the highest live end, as for strategies */
            out->footprint = offsets[e->row] + size;
        if (a.top > peak_top)
            peak_top = a.top;
    }
    free(offsets);
    free(a.holes);
    if (!ok) {
        snprintf(err, errlen, "out of host memory");
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    out->reserved = peak_top; /* one arena, as large as its top ever was */
    out->chunks = t->count ? 1 : 0;
    return CLRUN_OK;
}
