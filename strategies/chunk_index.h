/* clrun strategies: a map from chunk id to a strategy's per-chunk record.
 *
 * Chunk ids are small integers chosen by the pool and may be sparse, so each strategy keeps its
 * chunks in an array sorted by id: lookup is a binary search, O(log c) for c chunks; insertion
 * and removal move the tail, O(c). Chunks are added and removed rarely (a pool has tens of them)
 * while lookups happen on every free, so this is the right trade.
 *
 * Growth is split from insertion so that a strategy can reserve room first and then change its
 * own state knowing that nothing else can fail (host memory failures leave state unchanged).
 * Header-only and file-static: each strategy file includes it and gets its own copy. */
#ifndef CLRUN_STRATEGIES_CHUNK_INDEX_H
#define CLRUN_STRATEGIES_CHUNK_INDEX_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct chunk_index {
    uint32_t count;  /* chunks present */
    uint32_t cap;    /* room in ids[] and items[] */
    uint32_t *ids;   /* chunk ids, strictly increasing */
    void **items;    /* items[i]: the strategy's record of chunk ids[i] */
} chunk_index;

/* Position of the first id >= `id` (count when none). */
static inline uint32_t chunk_index_lower_bound(const chunk_index *ix, uint32_t id)
{
    uint32_t lo = 0, hi = ix->count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (ix->ids[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The record of chunk `id`, or NULL when no such chunk was added. */
static inline void *chunk_index_find(const chunk_index *ix, uint32_t id)
{
    uint32_t at = chunk_index_lower_bound(ix, id);
    return at < ix->count && ix->ids[at] == id ? ix->items[at] : NULL;
}

/* Makes room for one more chunk; 0 on success, -1 when host memory runs out (nothing changed). */
static inline int chunk_index_reserve(chunk_index *ix)
{
    if (ix->count < ix->cap)
        return 0;
    if (ix->cap > UINT32_MAX / 2)
        return -1;
    uint32_t cap = ix->cap ? ix->cap * 2 : 8;
    uint32_t *ids = malloc((size_t)cap * sizeof *ids);
    void **items = malloc((size_t)cap * sizeof *items);
    if (!ids || !items) {
        free(ids);
        free(items);
        return -1;
    }
    if (ix->count) {
        memcpy(ids, ix->ids, (size_t)ix->count * sizeof *ids);
        memcpy(items, ix->items, (size_t)ix->count * sizeof *items);
    }
    free(ix->ids);
    free(ix->items);
    ix->ids = ids;
    ix->items = items;
    ix->cap = cap;
    return 0;
}

/* Inserts chunk `id` (absent) after chunk_index_reserve() succeeded; cannot fail. */
static inline void chunk_index_insert(chunk_index *ix, uint32_t id, void *item)
{
    uint32_t at = chunk_index_lower_bound(ix, id);
    uint32_t tail = ix->count - at;
    memmove(ix->ids + at + 1, ix->ids + at, (size_t)tail * sizeof *ix->ids);
    memmove(ix->items + at + 1, ix->items + at, (size_t)tail * sizeof *ix->items);
    ix->ids[at] = id;
    ix->items[at] = item;
    ix->count++;
}

/* Drops chunk `id` (present). */
static inline void chunk_index_erase(chunk_index *ix, uint32_t id)
{
    uint32_t at = chunk_index_lower_bound(ix, id);
    uint32_t tail = ix->count - at - 1;
    memmove(ix->ids + at, ix->ids + at + 1, (size_t)tail * sizeof *ix->ids);
    memmove(ix->items + at, ix->items + at + 1, (size_t)tail * sizeof *ix->items);
    ix->count--;
}

/* Frees the arrays (not the records). */
static inline void chunk_index_release(chunk_index *ix)
{
    free(ix->ids);
    free(ix->items);
    memset(ix, 0, sizeof *ix);
}

/* Power-of-two helpers shared by the strategies. x must be nonzero for the log functions. */
static inline unsigned log2_floor_u64(uint64_t x)
{
    return 63u - (unsigned)__builtin_clzll(x);
}

static inline int is_pow2_u64(uint64_t x)
{
    return x && !(x & (x - 1));
}

/* Smallest power of two >= x, or 0 when that exceeds 2^63 (x == 0 gives 1). */
static inline uint64_t pow2_ceil_u64(uint64_t x)
{
    if (x <= 1)
        return 1;
    if (x > (UINT64_C(1) << 63))
        return 0;
    return UINT64_C(1) << (log2_floor_u64(x - 1) + 1);
}

/* x rounded up to a multiple of the power of two a, or 0 on overflow (x == 0 gives 0). */
static inline uint64_t round_up_u64(uint64_t x, uint64_t a)
{
    if (x > UINT64_MAX - (a - 1))
        return 0;
    return (x + a - 1) & ~(a - 1);
}

#endif
