/* clrun strategy "bump": a monotonic offset per chunk, for arenas and stack-like lifetimes.
 *
 * Algorithm. Each chunk has a top: every byte at or above it is free. A block is carved at the
 * top (aligned up) of the chunk that served the previous allocation, else of the first chunk
 * with room at its tail. Freeing the block nearest the top lowers the top to the end of the
 * highest block still live (freed blocks below it are dropped too), so memory returns under
 * LIFO lifetimes and a chunk whose blocks are all freed is empty again with top 0. Freeing any
 * other block only marks it dead: its bytes stay stranded below the top until the blocks
 * above it go, or until reset.
 *
 * To catch double and foreign frees, each chunk keeps its blocks (live and dead) in an array
 * sorted by offset, which allocation appends to since offsets only grow; free finds a block by
 * binary search. The top entry of that array is always live.
 *
 * Complexity. alloc: O(1) when the previous chunk has room, else O(c) for c chunks; free:
 * O(log c + log b) for b blocks in the chunk, plus the dead entries popped (each popped once).
 * Host memory: 24 bytes per block below the top.
 *
 * Worst-case waste. Sizes are rounded up to min_align, and alignment padding below a block
 * is stranded. Without LIFO order the waste is unbounded until reset: one long-lived block at
 * the top pins everything below it.
 *
 * Stats. held_bytes is the sum of live block sizes; free_bytes is what can still be handed
 * out, the bytes above each chunk's top. The rest of the chunk bytes (padding, dead blocks
 * below a live one) are neither: held_bytes + free_bytes <= total chunk bytes, with equality
 * when no block is live.
 */
#include <clrun/strategy.h>

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "chunk_index.h"

/* One block below a chunk's top. */
typedef struct bump_entry {
    uint64_t offset; /* where the block starts */
    uint64_t size;   /* its size (the request rounded up to min_align) */
    bool dead;       /* freed, but a live block above it keeps its bytes */
} bump_entry;

/* One chunk. */
typedef struct bump_chunk {
    uint64_t size;        /* bytes the pool gave us */
    uint64_t top;         /* bytes below are used or stranded; bytes above are free */
    uint64_t live;        /* live blocks inside */
    uint32_t count;       /* entries[0..count): blocks below top, by increasing offset */
    uint32_t cap;         /* room in entries[] */
    bump_entry *entries;  /* the blocks, live and dead; the last one is always live */
} bump_chunk;

/* The whole state of one bump allocator. */
typedef struct bump_state {
    uint64_t min_align;   /* every offset and size is a multiple of it */
    uint64_t max_chunk;   /* the largest chunk the pool can add */
    chunk_index chunks;   /* chunk id -> bump_chunk */
    bool has_recent;      /* recent names a chunk that still exists */
    uint32_t recent;      /* the chunk that served the last allocation: tried first */
    uint64_t total_bytes; /* sum of the sizes of all chunks */
    uint64_t held_bytes;  /* sum of the sizes of live blocks */
    uint64_t live_blocks; /* blocks allocated and not freed */
} bump_state;

/* ---- chunks --------------------------------------------------------------------------------- */

/* Index of the entry starting at `offset`, or -1. */
static int64_t entry_find(const bump_chunk *c, uint64_t offset)
{
    uint32_t lo = 0, hi = c->count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (c->entries[mid].offset < offset)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < c->count && c->entries[lo].offset == offset ? (int64_t)lo : -1;
}

/* Room for one more entry; false when host memory runs out (nothing changed). */
static bool entry_reserve(bump_chunk *c)
{
    if (c->count < c->cap)
        return true;
    if (c->cap > UINT32_MAX / 2)
        return false;
    uint32_t cap = c->cap ? c->cap * 2 : 16;
    bump_entry *e = realloc(c->entries, (size_t)cap * sizeof *e);
    if (!e)
        return false;
    c->entries = e;
    c->cap = cap;
    return true;
}

/* Where a block of `size` bytes aligned to `align` would start in chunk c; false if no room. */
static bool chunk_fits(const bump_chunk *c, uint64_t size, uint64_t align, uint64_t *offset)
{
    uint64_t start = round_up_u64(c->top, align);
    if (start == 0 && c->top != 0)
        return false; /* overflow */
    if (start > c->size || size > c->size - start)
        return false;
    *offset = start;
    return true;
}

/* Lowers the top after the last entry was freed: drop it and every dead entry under it. */
static void chunk_pop(bump_chunk *c)
{
    assert(c->count > 0);
    c->count--;
    while (c->count && c->entries[c->count - 1].dead)
        c->count--;
    c->top = c->count ? c->entries[c->count - 1].offset + c->entries[c->count - 1].size : 0;
    assert(c->top <= c->size); /* and the top entry, if any, is live */
}

/* ---- the vtable ----------------------------------------------------------------------------- */

static clrun_status bump_create(const clrun_strategy_config *config, void **state)
{
    assert(config && state);
    if (!is_pow2_u64(config->min_align))
        return CLRUN_ERROR_INVALID_ALIGNMENT;
    bump_state *s = calloc(1, sizeof *s);
    if (!s)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    s->min_align = config->min_align;
    s->max_chunk = config->max_chunk;
    *state = s;
    return CLRUN_OK;
}

static void bump_destroy(void *state)
{
    bump_state *s = state;
    if (!s)
        return;
    for (uint32_t i = 0; i < s->chunks.count; i++) {
        bump_chunk *c = s->chunks.items[i];
        free(c->entries);
        free(c);
    }
    chunk_index_release(&s->chunks);
    free(s);
}

static uint64_t bump_chunk_size(const void *state, uint64_t request, uint64_t align,
                                uint64_t wanted)
{
    const bump_state *s = state;
    (void)align; /* offset 0 of a fresh chunk is aligned to anything */
    uint64_t cap = s->max_chunk & ~(s->min_align - 1);
    uint64_t size = round_up_u64(request, s->min_align);
    if (request == 0 || size == 0 || size > cap)
        return 0;
    if (wanted > size) {
        uint64_t w = round_up_u64(wanted, s->min_align);
        size = (w == 0 || w > cap) ? cap : w;
    }
    return size;
}

static clrun_status bump_add_chunk(void *state, uint32_t chunk, uint64_t size)
{
    bump_state *s = state;
    if (size == 0)
        return CLRUN_ERROR_INVALID_SIZE;
    if (chunk_index_find(&s->chunks, chunk))
        return CLRUN_ERROR_INVALID_ARGUMENT;
    if (s->total_bytes > UINT64_MAX - size)
        return CLRUN_ERROR_INVALID_SIZE;
    if (chunk_index_reserve(&s->chunks) != 0)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    bump_chunk *c = calloc(1, sizeof *c);
    if (!c)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    c->size = size;
    chunk_index_insert(&s->chunks, chunk, c);
    s->total_bytes += size;
    return CLRUN_OK;
}

static clrun_status bump_remove_chunk(void *state, uint32_t chunk)
{
    bump_state *s = state;
    bump_chunk *c = chunk_index_find(&s->chunks, chunk);
    if (!c)
        return CLRUN_ERROR_INVALID_ARGUMENT;
    if (c->live)
        return CLRUN_ERROR_BUSY;
    if (s->has_recent && s->recent == chunk)
        s->has_recent = false;
    s->total_bytes -= c->size;
    chunk_index_erase(&s->chunks, chunk);
    free(c->entries);
    free(c);
    return CLRUN_OK;
}

/* An unknown chunk holds no live block, so it answers true. */
static bool bump_chunk_is_empty(const void *state, uint32_t chunk)
{
    const bump_chunk *c = chunk_index_find(&((const bump_state *)state)->chunks, chunk);
    return !c || c->live == 0;
}

static clrun_status bump_alloc(void *state, uint64_t size, uint64_t align, clrun_block *out)
{
    bump_state *s = state;
    assert(size >= 1 && is_pow2_u64(align)); /* checked by the allocator core */
    if (align < s->min_align)
        align = s->min_align;
    uint64_t bsize = round_up_u64(size, s->min_align);
    if (bsize == 0)
        return CLRUN_ERROR_OUT_OF_MEMORY;

    bump_chunk *c = NULL;
    uint32_t id = 0;
    uint64_t offset = 0;
    if (s->has_recent) {
        c = chunk_index_find(&s->chunks, s->recent);
        id = s->recent;
        if (!chunk_fits(c, bsize, align, &offset))
            c = NULL;
    }
    for (uint32_t n = 0; !c && n < s->chunks.count; n++) {
        if (chunk_fits(s->chunks.items[n], bsize, align, &offset)) {
            c = s->chunks.items[n];
            id = s->chunks.ids[n];
        }
    }
    if (!c)
        return CLRUN_ERROR_OUT_OF_MEMORY;
    if (!entry_reserve(c))
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;

    /* Offsets only grow below the top: the entries stay sorted and the newest is the top. */
    assert(c->count == 0 || c->entries[c->count - 1].offset + c->entries[c->count - 1].size <= offset);
    c->entries[c->count++] = (bump_entry){.offset = offset, .size = bsize, .dead = false};
    c->top = offset + bsize;
    c->live++;
    s->has_recent = true;
    s->recent = id;
    s->held_bytes += bsize;
    s->live_blocks++;
    out->chunk = id;
    out->offset = offset;
    out->size = bsize;
    return CLRUN_OK;
}

static clrun_status bump_free(void *state, uint32_t chunk, uint64_t offset)
{
    bump_state *s = state;
    bump_chunk *c = chunk_index_find(&s->chunks, chunk);
    if (!c)
        return CLRUN_ERROR_INVALID_FREE;
    /* LIFO frees, what bump is for, hit the last entry: skip the search for them. */
    int64_t at = c->count && c->entries[c->count - 1].offset == offset ? (int64_t)c->count - 1
                                                                        : entry_find(c, offset);
    if (at < 0 || c->entries[at].dead)
        return CLRUN_ERROR_INVALID_FREE;

    s->held_bytes -= c->entries[at].size;
    s->live_blocks--;
    c->live--;
    if ((uint32_t)at == c->count - 1)
        chunk_pop(c);
    else
        c->entries[at].dead = true;
    return CLRUN_OK;
}

static void bump_reset(void *state)
{
    bump_state *s = state;
    for (uint32_t n = 0; n < s->chunks.count; n++) {
        bump_chunk *c = s->chunks.items[n];
        c->count = 0;
        c->top = 0;
        c->live = 0;
    }
    s->held_bytes = 0;
    s->live_blocks = 0;
}

static void bump_stats(const void *state, clrun_strategy_stats *out)
{
    const bump_state *s = state;
    uint64_t free_bytes = 0, largest = 0;
    for (uint32_t n = 0; n < s->chunks.count; n++) {
        const bump_chunk *c = s->chunks.items[n];
        uint64_t tail = c->size - c->top;
        free_bytes += tail;
        tail &= ~(s->min_align - 1); /* top is a multiple of min_align */
        if (tail > largest)
            largest = tail;
    }
    out->held_bytes = s->held_bytes;
    out->free_bytes = free_bytes;
    out->largest_free = largest;
    out->live_blocks = s->live_blocks;
    out->chunks = s->chunks.count;
}

const clrun_strategy_ops clrun_strategy_bump = {
    .name = "bump",
    .description = "monotonic offset per chunk; frees return memory in LIFO order or at reset",
    .create = bump_create,
    .destroy = bump_destroy,
    .chunk_size = bump_chunk_size,
    .add_chunk = bump_add_chunk,
    .remove_chunk = bump_remove_chunk,
    .chunk_is_empty = bump_chunk_is_empty,
    .alloc = bump_alloc,
    .free = bump_free,
    .reset = bump_reset,
    .stats = bump_stats,
};
