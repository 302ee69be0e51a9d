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
 * class is found with two bit scans.
 *  - alloc of n granules: the best fit (smallest, then lowest address) among the first 8 holes
 *    of n's own list; else the best among the first 4 of the first non-empty list above it,
 *    every hole of which fits (so within 1/32 of the class of the best fit in that list: good
 *    fit); else the rest of n's own list; and only when no hole fits, the smallest tail that
 *    does (wilderness last, as best fit in one unbounded arena places a block on top only when
 *    no hole holds it). OUT_OF_MEMORY means that no free block holds the request. The block is
 *    cut at the low end of the hole or tail; the rest stays free.
 *  - free: the block is found by (chunk, offset) in a hash table of the live blocks and merged
 *    with its free neighbours; next to its chunk's tail (or at the chunk's end) it joins the tail.
 *  - alignment above g: the lists are walked upward from n's own class until a hole holds an
 *    aligned placement, then the tails; the gap before the block becomes a hole of its own.
 * A hole cut at its low end, or grown by a neighbour, keeps its place in its list when its class
 * stays; a tail is in no list, so cutting a block off it or giving one back is list-free: an
 * alloc/free pair at the top of a chunk is O(1) with no list work at all.
 *
 * Complexity. alloc: O(1) (two bit scans, at most 12 list entries read, one split) from a hole;
 * O(c) over the c chunks when it goes to a tail; O(f) over the own list's f holes when neither
 * its first 8 nor any higher list fits (then the pool is about to grow), and O(f) over all holes
 * for an alignment above g. free: O(1) expected (hash lookup, at most two merges). add_chunk:
 * O(1) plus O(c) in the chunk index; remove_chunk: O(c); reset: O(blocks + live blocks). Host
 * memory: 72 bytes per block, live or free, and 24 to 48 bytes per live block in the hash table.
 *
 * Worst-case waste. Internal: under one granule per block (the size rounded up to g); an
 * alignment gap stays free as a hole. External: good fit, not best fit (a tighter hole past the
 * first 8 of the request's own list is passed over for the next class), and like every
 * allocator that does not move blocks, Robson's M * log2(n) / 2 worst case; `clrun replay`
 * measures the footprint against a best-fit reference (within 3% on the traces and the
 * planner's generated families, one arena, 1 MiB and 1 GiB scales).
 */
#include "tlsf_internal.h"

/* ---- live blocks by (chunk, offset) --------------------------------------------------------- */

/* Fibonacci hashing: the high half of the product, whose top bits are a slot (see live_home).
 * Every bit of the key reaches them, the chunk id too; the low bits of the product would drop
 * the chunk id altogether, and blocks at one offset of different chunks would collide. */
static uint32_t live_hash(const tlsf_state *s, uint32_t chunk, uint64_t offset)
{
    uint64_t key = (offset >> s->granule_log) ^ ((uint64_t)chunk << 40) ^ ((uint64_t)chunk >> 24);
    return (uint32_t)((key * UINT64_C(0x9E3779B97F4A7C15)) >> 32);
}

/* The home slot of `hash` in a table of 2^(32 - shift) slots: its top bits. */
static inline uint64_t live_home(uint32_t hash, unsigned shift) { return hash >> shift; }

static void live_place(live_slot *slots, uint64_t mask, unsigned shift, live_slot entry)
{
    uint64_t i = live_home(entry.hash, shift);
    while (slots[i].block)
        i = (i + 1) & mask;
    slots[i] = entry;
}

/* Doubles the live table; false when host memory runs out (nothing changed). */
__attribute__((noinline)) static bool live_grow(tlsf_state *s)
{
    uint64_t capacity = s->live_capacity ? s->live_capacity * 2 : TLSF_LIVE_MIN;
    if (capacity > (UINT64_C(1) << 31) || capacity > SIZE_MAX / sizeof(live_slot))
        return false;
    live_slot *slots = calloc((size_t)capacity, sizeof *slots);
    if (!slots)
        return false;
    unsigned shift = 32 - log2_floor_u64(capacity);
    for (uint64_t i = 0; i < s->live_capacity; i++)
        if (s->live[i].block)
            live_place(slots, capacity - 1, shift, s->live[i]);
    free(s->live);
    s->live = slots;
    s->live_capacity = capacity;
    s->live_shift = shift;
    return true;
}

/* Makes room for one more live block (load at most 1/4, so probes stay short); false when host
 * memory runs out. */
static inline bool live_reserve(tlsf_state *s)
{
    return (s->live_blocks + 1) * 4 <= s->live_capacity || live_grow(s);
}

/* Moves entry i of recent into the hash table. */
static void recent_evict(tlsf_state *s, unsigned i)
{
    live_slot e = s->recent[i];
    e.hash = live_hash(s, e.chunk, e.offset);
    live_place(s->live, s->live_capacity - 1, s->live_shift, e);
}

/* Records live block b (live_reserve made room). The newest live blocks wait outside the hash
 * table, so one freed within the next few allocs (a temporary, a scratch buffer) costs no
 * hashing at all; a full recent sends its entries to the table in turn. */
static void live_insert(tlsf_state *s, tlsf_block *b)
{
    assert((s->live_blocks + 1) * 4 <= s->live_capacity);
    unsigned i = s->nrecent;
    if (i < TLSF_RECENT) {
        s->nrecent++;
    } else {
        i = s->evict;
        s->evict = (i + 1) % TLSF_RECENT;
        recent_evict(s, i);
    }
    /* Field by field: a wide store here would stall the free that reads it next (no store
     * forwarding from a vector store to a narrower load). */
    s->recent[i].offset = b->offset;
    s->recent[i].chunk = b->chunk->id;
    s->recent[i].block = b;
    s->newest = i;
    s->live_blocks++;
}

/* Drops entry i of recent (the last entry takes its place). */
static void recent_drop(tlsf_state *s, unsigned i)
{
    if (i != --s->nrecent)
        s->recent[i] = s->recent[s->nrecent];
    s->live_blocks--;
}

/* Removes and returns the live block at (chunk, offset), or NULL when there is none. Deletion
 * from the hash table shifts the following entries back, so no tombstones accumulate. */
static tlsf_block *live_take(tlsf_state *s, uint32_t chunk, uint64_t offset)
{
    for (unsigned i = s->nrecent; i-- > 0;) { /* newest first: temporaries die young */
        if (s->recent[i].offset == offset && s->recent[i].chunk == chunk) {
            tlsf_block *r = s->recent[i].block;
            recent_drop(s, i);
            return r;
        }
    }
    if (!s->live_capacity)
        return NULL;
    uint64_t mask = s->live_capacity - 1;
    uint64_t i = live_home(live_hash(s, chunk, offset), s->live_shift);
    while (s->live[i].block && (s->live[i].offset != offset || s->live[i].chunk != chunk))
        i = (i + 1) & mask;
    tlsf_block *found = s->live[i].block;
    if (!found)
        return NULL;
    uint64_t hole = i;
    for (uint64_t j = (i + 1) & mask; s->live[j].block; j = (j + 1) & mask) {
        uint64_t home = live_home(s->live[j].hash, s->live_shift);
        /* Entry j may fill the hole unless its home lies cyclically in (hole, j]. */
        bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
        if (!stays) {
            s->live[hole] = s->live[j];
            hole = j;
        }
    }
    s->live[hole].block = NULL;
    s->live_blocks--;
    assert(found->state == BLOCK_LIVE);
    return found;
}

/* An alloc cut from the bottom of a tail and freed before anything else happens (a scratch
 * buffer, a tight loop) leaves the state exactly as it was before the alloc, so an alloc of the
 * same size next makes the same choice: that block again. So the free does not merge it at
 * once: the block stays a node of its own, linked below the tail, a ghost that is free in all
 * but form (counted free in held_bytes, its chunk's live and live_blocks; its bytes belong to
 * the tail above it, whose node is not yet grown over it), and an alloc of its size revives it
 * with no list or link work at all. Every other call settles it first: the tail takes it in, as
 * the free would have done. Only tlsf_stats, which may not change the state, reads a ghost's
 * tail as grown over it. */
__attribute__((noinline)) static void settle_ghost(tlsf_state *s)
{
    tlsf_block *g = s->ghost, *tail = g->next_phys;
    assert(tail && tail->state == BLOCK_TAIL && (!g->prev_phys || g->prev_phys->state == BLOCK_LIVE));
    tail_resize(s, tail, g->offset, tail->size + g->size);
    s->ghost = NULL;
    clrun__tlsf_block_unlink(s, g);
}

static inline void settle(tlsf_state *s)
{
    s->undo_tail = NULL;
    if (s->ghost)
        settle_ghost(s);
}

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

/* Everything but the fast path: the ghost settled, room made, then a search and a cut. Kept out
 * of line so that the fast path saves no registers for it. */
__attribute__((noinline)) static clrun_status alloc_slow(tlsf_state *s, uint64_t bytes, uint64_t align,
                                                         clrun_block *out)
{
    if (bytes == 0) /* the size wrapped around when rounded up */
        return CLRUN_ERROR_OUT_OF_MEMORY;
    settle(s);
    if (!live_reserve(s) || !nodes_reserve(s, 2))
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    tlsf_block *undo_tail;
    tlsf_block *live = clrun__tlsf_place(s, bytes, align, &undo_tail);
    if (!live)
        return CLRUN_ERROR_OUT_OF_MEMORY;
    live_insert(s, live);
    /* Field by field, for the reason given in live_insert. */
    out->chunk = live->chunk->id;
    out->offset = live->offset;
    out->size = bytes;
    s->undo_tail = undo_tail;
    return CLRUN_OK;
}

/* The fast path is an alloc that repeats the one just freed (see settle): the ghost, live
 * again, recorded among the recent live blocks. It calls nothing, so it saves no registers;
 * everything else is one tail call away. */
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
        return alloc_slow(s, bytes, align, out);
    tlsf_chunk *c = g->chunk;
    s->ghost = NULL;
    s->undo_tail = g->next_phys;
    c->live++;
    s->held_bytes += bytes;
    s->live_blocks++;
    /* Field by field, for the reason given in live_insert. */
    s->nrecent = i + 1;
    s->newest = i;
    s->recent[i].offset = g->offset;
    s->recent[i].chunk = c->id;
    s->recent[i].block = g;
    out->chunk = c->id;
    out->offset = g->offset;
    out->size = bytes;
    return CLRUN_OK;
}

/* Everything but the fast path: the ghost settled, a lookup, then merges. */
__attribute__((noinline)) static clrun_status free_slow(tlsf_state *s, uint32_t chunk, uint64_t offset)
{
    settle(s);
    tlsf_block *b = live_take(s, chunk, offset);
    if (!b)
        return CLRUN_ERROR_INVALID_FREE;
    s->held_bytes -= b->size;
    b->chunk->live--;
    clrun__tlsf_block_release(s, b);
    return CLRUN_OK;
}

/* The fast path frees the block just cut from the bottom of undo_tail, nothing done since: it
 * becomes the ghost (see settle), and the state is as it was before that alloc. */
static clrun_status tlsf_free(void *state, uint32_t chunk, uint64_t offset)
{
    tlsf_state *s = state;
    tlsf_block *undo_tail = s->undo_tail;
    unsigned i = s->newest;
    if (!undo_tail || s->recent[i].offset != offset || s->recent[i].chunk != chunk)
        return free_slow(s, chunk, offset);
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
    s->evict = 0;
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
            size += s->ghost->size; /* the ghost is the tail's, not yet merged (see settle) */
        if (size > largest)
            largest = size;
    }
    out->held_bytes = s->held_bytes;
    out->free_bytes = s->total_bytes - s->held_bytes;
    out->largest_free = largest;
    out->live_blocks = s->live_blocks;
    out->chunks = s->chunks.count;
}

const clrun_allocator_ops clrun_strategy_tlsf = {
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
