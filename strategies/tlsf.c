/* clrun strategy "tlsf": two-level segregated fit, after Masmano, Ripoll, Crespo and Real, "TLSF:
 * a new dynamic memory allocator for real-time systems" (ECRTS 2004), bookkeeping on the host.
 *
 * Algorithm. Sizes are whole granules (g = min_align). Every granule of every chunk belongs to
 * exactly one block, live or free, and the blocks of a chunk are linked in address order (their
 * physical neighbours); free blocks are merged with free neighbours at once. A chunk's free
 * block at its end is its tail (dlmalloc's "top", the wilderness); the other free blocks, the
 * holes, of all chunks sit in segregated lists with two levels of index: the first level is
 * floor(log2(granules)), the second cuts each power of two into 32 equal ranges (below 32
 * granules each size has its own list). One bitmap over the first level and one per first-level
 * entry over the second say which lists are non-empty, so the first non-empty list above a size
 * class is found with two bit scans. The tails have lists of their own, in the same classes.
 *  - alloc of n granules: the best fit (smallest, then lowest address) among the first 8 holes
 *    of n's own list; else the best among the first 4 of the first non-empty list above it,
 *    every hole of which fits (so within 1/32 of the class of the best fit in that list: good
 *    fit); else the rest of n's own list; and only when no hole fits, the smallest tail that
 *    does (wilderness last, as best fit in one unbounded arena places a block on top only when
 *    no hole holds it: the best of its own tail list, else of the first non-empty one above).
 *    OUT_OF_MEMORY means that no free block holds the request. The block is cut at the low end
 *    of the hole or tail; the rest stays free.
 *  - free: the block is found by (chunk, offset) in a hash table of the live blocks and merged
 *    with its free neighbours; next to its chunk's tail (or at the chunk's end) it joins the tail.
 *  - alignment above g: the lists are walked upward from n's own class until a hole holds an
 *    aligned placement, then the tails; the gap before the block becomes a hole of its own.
 * A hole cut at its low end, or grown by a neighbour, keeps its place in its list when its class
 * stays (a tail goes to the head of its list: their order does not matter). An alloc/free pair
 * at the bottom of a tail is O(1) with no list work at all: the free leaves the block as a
 * ghost that the next alloc of its size revives (see clrun__tlsf_settle_ghost in
 * tlsf_blocks.c).
 *
 * Complexity. alloc: O(1) (two bit scans, at most 12 list entries read, one split) from a hole;
 * when it goes to a tail, two more bit scans and the tails of two lists (O(c) over the c chunks
 * at worst, one tail a list as a rule); O(f) over the own list's f holes when neither
 * its first 8 nor any higher list fits (then the pool is about to grow), and O(f) over all holes
 * for an alignment above g. free: O(1) expected (hash lookup, at most two merges). add_chunk:
 * O(1) plus O(c) in the chunk index; remove_chunk: O(c); reset: O(blocks + live blocks). Host
 * memory: 64 bytes per block, live or free, 24 to 48 bytes per live block in the hash table, and
 * 33 KiB of list heads and bitmaps (holes and tails) per allocator.
 *
 * Worst-case waste. Internal: under one granule per block (the size rounded up to g); an
 * alignment gap stays free as a hole. External: good fit, not best fit (a tighter hole past the
 * first 8 of the request's own list is passed over for the next class), and like every
 * allocator that does not move blocks, Robson's M * log2(n) / 2 worst case; `clrun replay`
 * measures the footprint against a best-fit reference (within 3% on the traces and the
 * planner's generated families, one arena, 1 MiB and 1 GiB scales).
 */
#include "tlsf_internal.h"

/* ---- chunks --------------------------------------------------------------------------------- */

/* Gives chunk c's blocks back to the spare nodes (its tail out of the tail lists first, unless
 * every list is about to be cleared). */
static void chunk_drop_blocks(tlsf_state *s, tlsf_chunk *c, bool unlist_tail)
{
    if (c->tail && unlist_tail)
        tail_remove(s, c->tail);
    for (tlsf_block *b = c->first, *next; b; b = next) {
        next = b->next_phys;
        node_drop(s, b);
    }
    c->first = NULL;
}

/* Makes chunk c one free block, its tail (a spare node exists when c->usable > 0). */
static void chunk_make_empty(tlsf_state *s, tlsf_chunk *c)
{
    c->live = 0;
    c->first = NULL;
    c->tail = NULL;
    if (!c->usable)
        return;
    tlsf_block *b = node_take(s);
    *b = (tlsf_block){.offset = 0, .size = c->usable, .chunk = c};
    c->first = b;
    tail_insert(s, b);
}

/* ---- the vtable ----------------------------------------------------------------------------- */

static clrun_status tlsf_create(const clrun_strategy_config *config, void **state)
{
    assert(config && state);
    if (!is_pow2_u64(config->min_align))
        return CLRUN_ERROR_INVALID_ALIGNMENT;
    tlsf_state *s = calloc(1, sizeof *s);
    if (!s)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    s->granule_log = log2_floor_u64(config->min_align);
    s->max_chunk = config->max_chunk;
    *state = s;
    return CLRUN_OK;
}

static void tlsf_destroy(void *state)
{
    tlsf_state *s = state;
    if (!s)
        return;
    for (uint32_t n = 0; n < s->chunks.count; n++)
        free(s->chunks.items[n]);
    chunk_index_release(&s->chunks);
    while (s->slabs) {
        node_slab *next = s->slabs->next;
        free(s->slabs);
        s->slabs = next;
    }
    free(s->live);
    free(s);
}

static uint64_t tlsf_chunk_size(const void *state, uint64_t request, uint64_t align, uint64_t wanted)
{
    (void)align; /* offset 0 of a fresh chunk is aligned to anything */
    const tlsf_state *s = state;
    uint64_t granule = UINT64_C(1) << s->granule_log;
    uint64_t cap = s->max_chunk & ~(granule - 1);
    uint64_t need = round_up_u64(request, granule);
    if (request == 0 || need == 0 || need > cap)
        return 0;
    if (wanted > need) {
        uint64_t w = round_up_u64(wanted, granule);
        need = w == 0 || w > cap ? cap : w;
    }
    return need;
}

static clrun_status tlsf_add_chunk(void *state, uint32_t chunk, uint64_t size)
{
    tlsf_state *s = state;
    settle(s); /* a new tail may fit better */
    if (size == 0 || s->total_bytes > UINT64_MAX - size)
        return CLRUN_ERROR_INVALID_SIZE;
    if (chunk_index_find(&s->chunks, chunk))
        return CLRUN_ERROR_INVALID_ARGUMENT;
    tlsf_chunk *c = calloc(1, sizeof *c);
    if (!c || chunk_index_reserve(&s->chunks) != 0 || !nodes_reserve(s, 1)) {
        free(c);
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    c->id = chunk;
    c->size = size;
    c->usable = size & ~((UINT64_C(1) << s->granule_log) - 1);
    chunk_make_empty(s, c);
    chunk_index_insert(&s->chunks, chunk, c);
    s->total_bytes += size;
    return CLRUN_OK;
}

static clrun_status tlsf_remove_chunk(void *state, uint32_t chunk)
{
    tlsf_state *s = state;
    settle(s);
    tlsf_chunk *c = chunk_index_find(&s->chunks, chunk);
    if (!c)
        return CLRUN_ERROR_INVALID_ARGUMENT;
    if (c->live)
        return CLRUN_ERROR_BUSY;
    /* No live block: the tail covers the whole chunk. */
    assert(c->first == c->tail && (!c->tail || (!c->tail->prev_phys && c->tail->size == c->usable)));
    chunk_drop_blocks(s, c, true);
    s->total_bytes -= c->size;
    chunk_index_erase(&s->chunks, chunk);
    free(c);
    return CLRUN_OK;
}

/* An unknown chunk holds no live block, so it answers true. */
static bool tlsf_chunk_is_empty(const void *state, uint32_t chunk)
{
    const tlsf_chunk *c = chunk_index_find(&((const tlsf_state *)state)->chunks, chunk);
    return !c || c->live == 0;
}

/* The fast path is an alloc that repeats the one just freed (see clrun__tlsf_settle_ghost):
 * the ghost, live again, recorded among the recent live blocks. It calls nothing, so it saves
 * no registers; everything else is one tail call away. */
static clrun_status tlsf_alloc(void *state, uint64_t size, uint64_t align, clrun_block *out)
{
    tlsf_state *s = state;
    assert(size >= 1 && is_pow2_u64(align)); /* checked by the allocator core */
    tlsf_block *g = s->ghost;
    uint64_t granule_mask = (UINT64_C(1) << s->granule_log) - 1;
    /* Rounded up to the granule; a size that wraps around gives 0, which no block has. */
    uint64_t bytes = (size + granule_mask) & ~granule_mask;
    unsigned i = s->nrecent;
    if (!g || g->size != bytes || align > granule_mask + 1 || i == TLSF_RECENT ||
        (s->live_blocks + 1) * 4 > s->live_capacity)
        return clrun__tlsf_alloc_slow(s, bytes, align, out);
    tlsf_chunk *c = g->chunk;
    s->ghost = NULL;
    s->undo_tail = g->next_phys;
    c->live++;
    s->held_bytes += bytes;
    s->live_blocks++;
    /* Field by field, for the reason given in live_insert. */
    s->nrecent = i + 1;
    s->recent[i].offset = g->offset;
    s->recent[i].chunk = c->id;
    s->recent[i].block = g;
    out->chunk = c->id;
    out->offset = g->offset;
    out->size = bytes;
    return CLRUN_OK;
}

/* The fast path frees the block just cut from the bottom of undo_tail, nothing done since: it
 * becomes the ghost (see clrun__tlsf_settle_ghost), and the state is as it was before that
 * alloc. */
static clrun_status tlsf_free(void *state, uint32_t chunk, uint64_t offset)
{
    tlsf_state *s = state;
    tlsf_block *undo_tail = s->undo_tail;
    if (!undo_tail)
        return clrun__tlsf_free_slow(s, chunk, offset);
    unsigned i = s->nrecent - 1; /* the newest: the alloc that set undo_tail recorded it */
    if (s->recent[i].offset != offset || s->recent[i].chunk != chunk)
        return clrun__tlsf_free_slow(s, chunk, offset);
    tlsf_block *b = s->recent[i].block;
    assert(b->next_phys == undo_tail && undo_tail->state == BLOCK_TAIL && !s->ghost);
    recent_drop(s, i);
    s->held_bytes -= b->size;
    b->chunk->live--;
    s->undo_tail = NULL;
    s->ghost = b;
    return CLRUN_OK;
}

static void tlsf_reset(void *state)
{
    tlsf_state *s = state;
    settle(s);
    for (uint32_t n = 0; n < s->chunks.count; n++)
        chunk_drop_blocks(s, s->chunks.items[n], false);
    memset(&s->holes, 0, sizeof s->holes);
    memset(&s->tails, 0, sizeof s->tails);
    for (uint32_t n = 0; n < s->chunks.count; n++)
        chunk_make_empty(s, s->chunks.items[n]); /* the nodes just dropped suffice */
    if (s->live)
        memset(s->live, 0, (size_t)s->live_capacity * sizeof *s->live);
    s->nrecent = 0;
    s->live_blocks = 0;
    s->held_bytes = 0;
}

static void tlsf_stats(const void *state, clrun_strategy_stats *out)
{
    const tlsf_state *s = state;
    uint64_t largest = 0;
    if (s->holes.fl_bitmap) {
        unsigned fl = log2_floor_u64(s->holes.fl_bitmap);
        unsigned sl = 31u - (unsigned)__builtin_clz(s->holes.sl_bitmap[fl]);
        for (const tlsf_block *b = s->holes.heads[fl][sl]; b; b = b->next_free)
            if (b->size > largest)
                largest = b->size;
    }
    for (uint32_t n = 0; n < s->chunks.count; n++) {
        const tlsf_block *t = ((const tlsf_chunk *)s->chunks.items[n])->tail;
        uint64_t size = t ? t->size : 0;
        if (t && s->ghost && s->ghost->next_phys == t)
            size += s->ghost->size; /* the tail's, not yet merged (see clrun__tlsf_settle_ghost) */
        if (size > largest)
            largest = size;
    }
    out->held_bytes = s->held_bytes;
    out->free_bytes = s->total_bytes - s->held_bytes;
    out->largest_free = largest;
    out->live_blocks = s->live_blocks;
    out->chunks = s->chunks.count;
}

const clrun_strategy_ops clrun_strategy_tlsf = {
    .name = "tlsf",
    .description = "two-level segregated good fit with immediate coalescing, O(1) alloc and free",
    .create = tlsf_create,
    .destroy = tlsf_destroy,
    .chunk_size = tlsf_chunk_size,
    .add_chunk = tlsf_add_chunk,
    .remove_chunk = tlsf_remove_chunk,
    .chunk_is_empty = tlsf_chunk_is_empty,
    .alloc = tlsf_alloc,
    .free = tlsf_free,
    .reset = tlsf_reset,
    .stats = tlsf_stats,
};
