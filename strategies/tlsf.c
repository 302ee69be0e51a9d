/* clrun strategy "tlsf": two-level segregated fit, after Masmano, Ripoll, Crespo and Real, "TLSF:
 * a new dynamic memory allocator for real-time systems" (ECRTS 2004), bookkeeping on the host.
 *
 * Algorithm. Sizes are whole granules (g = min_align). Every granule of every chunk belongs to
 * exactly one block, free or live, and the blocks of a chunk are linked in address order (their
 * physical neighbours). The free blocks of all chunks sit in segregated lists with two levels of
 * index: the first level is floor(log2(granules)), the second cuts each power of two into 32
 * equal ranges (below 32 granules each size has its own list). One bitmap over the first level
 * and one per first-level entry over the second say which lists are non-empty, so the first
 * non-empty list at or above a size class is found with two bit scans.
 *  - alloc of n granules: the smallest fitting block among the first 8 of n's own list; else the
 *    smallest among the first 8 of the first non-empty list above it, every block of which fits
 *    (so the block chosen is at most 1/32 larger than the smallest class that could hold n:
 *    good fit); else the rest of n's own list, so that OUT_OF_MEMORY means that no free block
 *    holds the request. The block is split: n granules at its low end are handed out, the rest
 *    is listed as a free block. A chunk's free tail is one block of a high class, so it is cut
 *    only when no lower hole fits (wilderness last).
 *  - free: the block is found by (chunk, offset) in a hash table of the live blocks, merged at
 *    once with its free physical neighbours and listed; an empty chunk is one free block.
 *  - alignment above g: the lists are walked upward from n's own class until a block holds an
 *    aligned placement; the gap before it becomes a free block of its own.
 * The most recently freed block is held back unmerged: an alloc of exactly its size (and an
 * alignment it satisfies) takes it back in O(1); any other alloc, or the next free, merges it
 * first. Stats count it as merged, so nothing observable differs from merging at once.
 *
 * Complexity. alloc: O(1) (two bit scans, at most 16 list entries read, one split), except when
 * neither the first 8 entries of the own list nor any higher list fits: then O(f) over the own
 * list (only when the pool is about to grow), and O(f) over the free blocks f for an alignment
 * above g. free: O(1) expected (hash lookup, at most two merges). add_chunk: O(1) plus O(c) in
 * the chunk index; remove_chunk: O(c); reset: O(blocks + live blocks). Host memory: 72 bytes per
 * block, free or live, plus 24 to 48 bytes per live block in the hash table.
 *
 * Worst-case waste. Internal: under one granule per block (the size rounded up to g), plus the
 * alignment gap, which stays free. External: a request is served from its own class when one of
 * the first 8 blocks there fits, else from the next non-empty class, whose smallest block read
 * is at most 1/32 of a class above the request's own class; that is good fit, not best fit,
 * and like every non-moving allocator it has Robson's M * log2(n) / 2 worst case. `clrun
 * replay` measures its footprint against a best-fit reference.
 */
#include <clrun/strategy.h>

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "chunk_index.h"

#define TLSF_SLI 5u                         /* log2 of the second-level lists per power of two */
#define TLSF_SL_COUNT (1u << TLSF_SLI)      /* 32 */
#define TLSF_FL_COUNT 64u                   /* first-level entries (60 used at most) */
#define TLSF_SCAN 8u                        /* list entries read for a good fit */
#define TLSF_NODES_PER_SLAB 255u            /* block nodes allocated together */
#define TLSF_LIVE_MIN 64u                   /* smallest live hash table */

enum block_state { BLOCK_FREE, BLOCK_LIVE, BLOCK_HELD };

typedef struct tlsf_chunk tlsf_chunk;

/* A block: a range of granules of one chunk. */
typedef struct tlsf_block {
    uint64_t offset;                /* of its first byte in the chunk */
    uint64_t size;                  /* bytes, a multiple of the granule */
    tlsf_chunk *chunk;              /* where it lies */
    struct tlsf_block *prev_phys;   /* the block just below it, NULL at the chunk's start */
    struct tlsf_block *next_phys;   /* the block just above it, NULL at the chunk's end */
    struct tlsf_block *prev_free;   /* free: previous in its list; spare: unused */
    struct tlsf_block *next_free;   /* free: next in its list; spare: next spare node */
    uint8_t state;                  /* enum block_state */
} tlsf_block;

/* One chunk. */
struct tlsf_chunk {
    uint32_t id;                    /* the pool's id for it */
    uint64_t size;                  /* bytes the pool gave us */
    uint64_t usable;                /* size rounded down to the granule: what blocks cover */
    uint64_t live;                  /* live blocks inside */
    tlsf_block *first;              /* the block at offset 0, NULL when usable is 0 */
};

/* A slot of the live-block hash table (open addressing, linear probing). */
typedef struct live_slot {
    uint64_t offset;                /* the block's offset */
    uint32_t chunk;                 /* its chunk's id */
    tlsf_block *block;              /* NULL: the slot is empty */
} live_slot;

/* Block nodes are allocated in slabs, linked for destroy. */
typedef struct node_slab {
    struct node_slab *next;
    tlsf_block nodes[TLSF_NODES_PER_SLAB];
} node_slab;

/* The whole state of one TLSF allocator. */
typedef struct tlsf_state {
    unsigned granule_log;                       /* log2 of the granule (min_align) */
    uint64_t max_chunk;                         /* the largest chunk the pool can add */
    uint64_t fl_bitmap;                         /* bit f set: some list of first level f is not empty */
    uint32_t sl_bitmap[TLSF_FL_COUNT];          /* bit s of entry f set: lists[f][s] is not empty */
    tlsf_block *lists[TLSF_FL_COUNT][TLSF_SL_COUNT]; /* free blocks by class, newest first */
    tlsf_block *held;                           /* the held-back freed block, or NULL */
    live_slot *live;                            /* live blocks by (chunk, offset) */
    uint64_t live_capacity;                     /* slots in live (a power of two, or 0) */
    uint64_t live_blocks;                       /* blocks allocated and not freed */
    tlsf_block *spare;                          /* unused nodes, linked by next_free */
    uint32_t nspare;                            /* nodes on spare */
    node_slab *slabs;                           /* every node slab, for destroy */
    chunk_index chunks;                         /* chunk id -> tlsf_chunk */
    uint64_t total_bytes;                       /* sum of the sizes of all chunks */
    uint64_t held_bytes;                        /* sum of the sizes of live blocks */
} tlsf_state;

/* ---- size classes --------------------------------------------------------------------------- */

/* The list of free blocks of `granules` (>= 1) granules. */
static void class_of(uint64_t granules, unsigned *fl, unsigned *sl)
{
    assert(granules >= 1);
    if (granules < TLSF_SL_COUNT) {
        *fl = 0;
        *sl = (unsigned)granules;
        return;
    }
    unsigned top = log2_floor_u64(granules);
    *fl = top - TLSF_SLI + 1;
    *sl = (unsigned)(granules >> (top - TLSF_SLI)) - TLSF_SL_COUNT;
}

/* The first non-empty list strictly above class (fl, sl); false when there is none. */
static bool class_above(const tlsf_state *s, unsigned *fl, unsigned *sl)
{
    uint32_t sl_map = *sl + 1 < TLSF_SL_COUNT ? s->sl_bitmap[*fl] & (~UINT32_C(0) << (*sl + 1)) : 0;
    if (!sl_map) {
        uint64_t fl_map = *fl + 1 < TLSF_FL_COUNT ? s->fl_bitmap & (~UINT64_C(0) << (*fl + 1)) : 0;
        if (!fl_map)
            return false;
        *fl = (unsigned)__builtin_ctzll(fl_map);
        sl_map = s->sl_bitmap[*fl];
        assert(sl_map);
    }
    *sl = (unsigned)__builtin_ctz(sl_map);
    return true;
}

/* ---- free lists ----------------------------------------------------------------------------- */

static void list_insert(tlsf_state *s, tlsf_block *b)
{
    unsigned fl, sl;
    class_of(b->size >> s->granule_log, &fl, &sl);
    /* Free blocks are always merged with their free neighbours. */
    assert(!b->prev_phys || b->prev_phys->state != BLOCK_FREE);
    assert(!b->next_phys || b->next_phys->state != BLOCK_FREE);
    b->state = BLOCK_FREE;
    b->prev_free = NULL;
    b->next_free = s->lists[fl][sl];
    if (b->next_free)
        b->next_free->prev_free = b;
    s->lists[fl][sl] = b;
    s->sl_bitmap[fl] |= UINT32_C(1) << sl;
    s->fl_bitmap |= UINT64_C(1) << fl;
}

static void list_remove(tlsf_state *s, tlsf_block *b)
{
    assert(b->state == BLOCK_FREE);
    unsigned fl, sl;
    class_of(b->size >> s->granule_log, &fl, &sl);
    if (b->prev_free)
        b->prev_free->next_free = b->next_free;
    else
        s->lists[fl][sl] = b->next_free;
    if (b->next_free)
        b->next_free->prev_free = b->prev_free;
    if (!s->lists[fl][sl]) {
        s->sl_bitmap[fl] &= ~(UINT32_C(1) << sl);
        if (!s->sl_bitmap[fl])
            s->fl_bitmap &= ~(UINT64_C(1) << fl);
    }
}

/* ---- block nodes ---------------------------------------------------------------------------- */

/* Makes sure `count` spare nodes exist; false when host memory runs out (nothing changed). */
static bool nodes_reserve(tlsf_state *s, uint32_t count)
{
    if (s->nspare >= count)
        return true;
    node_slab *slab = malloc(sizeof *slab);
    if (!slab)
        return false;
    slab->next = s->slabs;
    s->slabs = slab;
    for (uint32_t i = 0; i < TLSF_NODES_PER_SLAB; i++) {
        slab->nodes[i].next_free = s->spare;
        s->spare = &slab->nodes[i];
    }
    s->nspare += TLSF_NODES_PER_SLAB;
    return true;
}

/* A spare node (nodes_reserve made sure there is one). */
static tlsf_block *node_take(tlsf_state *s)
{
    assert(s->spare && s->nspare);
    tlsf_block *b = s->spare;
    s->spare = b->next_free;
    s->nspare--;
    return b;
}

static void node_drop(tlsf_state *s, tlsf_block *b)
{
    b->next_free = s->spare;
    s->spare = b;
    s->nspare++;
}

/* ---- live blocks by (chunk, offset) --------------------------------------------------------- */

static uint64_t live_hash(const tlsf_state *s, uint32_t chunk, uint64_t offset)
{
    uint64_t key = (offset >> s->granule_log) ^ ((uint64_t)chunk << 40) ^ ((uint64_t)chunk >> 24);
    return (key * UINT64_C(0x9E3779B97F4A7C15)) >> 20; /* Fibonacci hashing; masked by the caller */
}

static void live_place(live_slot *slots, uint64_t mask, const tlsf_state *s, tlsf_block *b)
{
    uint64_t i = live_hash(s, b->chunk->id, b->offset) & mask;
    while (slots[i].block)
        i = (i + 1) & mask;
    slots[i] = (live_slot){b->offset, b->chunk->id, b};
}

/* Makes room for one more live block (load at most 1/2); false when host memory runs out. */
static bool live_reserve(tlsf_state *s)
{
    if ((s->live_blocks + 1) * 2 <= s->live_capacity)
        return true;
    uint64_t capacity = s->live_capacity ? s->live_capacity * 2 : TLSF_LIVE_MIN;
    if (capacity > SIZE_MAX / sizeof(live_slot))
        return false;
    live_slot *slots = calloc((size_t)capacity, sizeof *slots);
    if (!slots)
        return false;
    for (uint64_t i = 0; i < s->live_capacity; i++)
        if (s->live[i].block)
            live_place(slots, capacity - 1, s, s->live[i].block);
    free(s->live);
    s->live = slots;
    s->live_capacity = capacity;
    return true;
}

/* Records live block b (live_reserve made room). */
static void live_insert(tlsf_state *s, tlsf_block *b)
{
    assert((s->live_blocks + 1) * 2 <= s->live_capacity);
    live_place(s->live, s->live_capacity - 1, s, b);
    s->live_blocks++;
}

/* Removes and returns the live block at (chunk, offset), or NULL when there is none. Deletion
 * shifts the following entries back, so no tombstones accumulate. */
static tlsf_block *live_take(tlsf_state *s, uint32_t chunk, uint64_t offset)
{
    if (!s->live_capacity)
        return NULL;
    uint64_t mask = s->live_capacity - 1;
    uint64_t i = live_hash(s, chunk, offset) & mask;
    while (s->live[i].block && (s->live[i].offset != offset || s->live[i].chunk != chunk))
        i = (i + 1) & mask;
    tlsf_block *found = s->live[i].block;
    if (!found)
        return NULL;
    uint64_t hole = i;
    for (uint64_t j = (i + 1) & mask; s->live[j].block; j = (j + 1) & mask) {
        uint64_t home = live_hash(s, s->live[j].chunk, s->live[j].offset) & mask;
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

/* ---- blocks --------------------------------------------------------------------------------- */

/* Makes block b (not listed, not live) free: merged with its free neighbours, then listed. */
static void block_release(tlsf_state *s, tlsf_block *b)
{
    tlsf_block *prev = b->prev_phys, *next = b->next_phys;
    if (prev && prev->state == BLOCK_FREE) {
        list_remove(s, prev);
        prev->size += b->size;
        prev->next_phys = next;
        if (next)
            next->prev_phys = prev;
        node_drop(s, b);
        b = prev;
    }
    if (next && next->state == BLOCK_FREE) {
        list_remove(s, next);
        b->size += next->size;
        b->next_phys = next->next_phys;
        if (b->next_phys)
            b->next_phys->prev_phys = b;
        node_drop(s, next);
    }
    b->state = BLOCK_FREE;
    list_insert(s, b);
}

/* Merges the held-back block, if any. */
static void held_flush(tlsf_state *s)
{
    if (s->held) {
        tlsf_block *b = s->held;
        s->held = NULL;
        block_release(s, b);
    }
}

/* Bytes the held-back block would have once merged with its free neighbours. */
static uint64_t held_merged_size(const tlsf_block *b)
{
    uint64_t size = b->size;
    if (b->prev_phys && b->prev_phys->state == BLOCK_FREE)
        size += b->prev_phys->size;
    if (b->next_phys && b->next_phys->state == BLOCK_FREE)
        size += b->next_phys->size;
    return size;
}

/* A new node for [offset, offset + size) of b's chunk, linked into the physical order just
 * above b (or just below it), not listed. */
static tlsf_block *block_split_off(tlsf_state *s, tlsf_block *b, uint64_t offset, uint64_t size, bool above)
{
    tlsf_block *n = node_take(s);
    n->offset = offset;
    n->size = size;
    n->chunk = b->chunk;
    if (above) {
        n->prev_phys = b;
        n->next_phys = b->next_phys;
        if (n->next_phys)
            n->next_phys->prev_phys = n;
        b->next_phys = n;
    } else {
        n->next_phys = b;
        n->prev_phys = b->prev_phys;
        if (n->prev_phys)
            n->prev_phys->next_phys = n;
        else
            b->chunk->first = n;
        b->prev_phys = n;
    }
    return n;
}

/* Hands out `bytes` at offset `at` of free block b (two spare nodes and live room reserved): the
 * gap below and the rest above become free blocks. */
static void block_take(tlsf_state *s, tlsf_block *b, uint64_t at, uint64_t bytes, clrun_block *out)
{
    assert(b->state == BLOCK_FREE && at >= b->offset && at - b->offset + bytes <= b->size);
    list_remove(s, b);
    if (at > b->offset) {
        tlsf_block *gap = block_split_off(s, b, b->offset, at - b->offset, false);
        b->size -= at - b->offset;
        b->offset = at;
        b->state = BLOCK_LIVE; /* so that the gap's neighbour check sees a non-free block */
        list_insert(s, gap);
    }
    if (b->size > bytes) {
        tlsf_block *rest = block_split_off(s, b, b->offset + bytes, b->size - bytes, true);
        b->size = bytes;
        b->state = BLOCK_LIVE;
        list_insert(s, rest);
    }
    b->state = BLOCK_LIVE;
    b->chunk->live++;
    s->held_bytes += bytes;
    live_insert(s, b);
    out->chunk = b->chunk->id;
    out->offset = b->offset;
    out->size = bytes;
}

/* The smallest block of at least `bytes` among the first `limit` of list `head` (limit 0: all). */
static tlsf_block *list_best(tlsf_block *head, uint64_t bytes, uint32_t limit, bool *truncated)
{
    tlsf_block *best = NULL;
    uint32_t seen = 0;
    *truncated = false;
    for (tlsf_block *b = head; b; b = b->next_free) {
        if (limit && seen++ == limit) {
            *truncated = true;
            break;
        }
        if (b->size >= bytes && (!best || b->size < best->size)) {
            best = b;
            if (b->size == bytes)
                break;
        }
    }
    return best;
}

/* A free block of at least `bytes` (good fit), or NULL when none exists. */
static tlsf_block *find_fit(tlsf_state *s, uint64_t bytes)
{
    unsigned fl, sl;
    class_of(bytes >> s->granule_log, &fl, &sl);
    bool truncated, unused;
    tlsf_block *b = list_best(s->lists[fl][sl], bytes, TLSF_SCAN, &truncated);
    if (b)
        return b;
    unsigned up_fl = fl, up_sl = sl;
    if (class_above(s, &up_fl, &up_sl))
        return list_best(s->lists[up_fl][up_sl], bytes, TLSF_SCAN, &unused);
    return truncated ? list_best(s->lists[fl][sl], bytes, 0, &unused) : NULL;
}

/* Where `bytes` aligned to `align` would start in free block b; false when it does not fit. */
static bool aligned_fit(const tlsf_block *b, uint64_t bytes, uint64_t align, uint64_t *at)
{
    uint64_t start = b->offset ? round_up_u64(b->offset, align) : 0;
    if (b->offset && start == 0)
        return false; /* overflow */
    uint64_t end = b->offset + b->size;
    if (start > end || end - start < bytes)
        return false;
    *at = start;
    return true;
}

/* A free block with room for `bytes` aligned to `align` (> granule), walking the lists upward
 * from the request's own class; NULL when none exists. */
static tlsf_block *find_aligned(tlsf_state *s, uint64_t bytes, uint64_t align, uint64_t *at)
{
    unsigned fl, sl;
    class_of(bytes >> s->granule_log, &fl, &sl);
    for (;;) {
        for (tlsf_block *b = s->lists[fl][sl]; b; b = b->next_free)
            if (aligned_fit(b, bytes, align, at))
                return b;
        if (!class_above(s, &fl, &sl))
            return NULL;
    }
}

/* ---- chunks --------------------------------------------------------------------------------- */

/* Gives chunk c's blocks back to the spare nodes. */
static void chunk_drop_blocks(tlsf_state *s, tlsf_chunk *c)
{
    for (tlsf_block *b = c->first, *next; b; b = next) {
        next = b->next_phys;
        node_drop(s, b);
    }
    c->first = NULL;
}

/* Makes chunk c one free block (a spare node exists when c->usable > 0). */
static void chunk_make_empty(tlsf_state *s, tlsf_chunk *c)
{
    c->live = 0;
    c->first = NULL;
    if (!c->usable)
        return;
    tlsf_block *b = node_take(s);
    *b = (tlsf_block){.offset = 0, .size = c->usable, .chunk = c};
    c->first = b;
    list_insert(s, b);
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
    tlsf_chunk *c = chunk_index_find(&s->chunks, chunk);
    if (!c)
        return CLRUN_ERROR_INVALID_ARGUMENT;
    if (c->live)
        return CLRUN_ERROR_BUSY;
    if (s->held && s->held->chunk == c)
        held_flush(s);
    if (c->first) { /* no live block: one free block covers the chunk */
        assert(c->first->state == BLOCK_FREE && !c->first->next_phys && c->first->size == c->usable);
        list_remove(s, c->first);
        chunk_drop_blocks(s, c);
    }
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

static clrun_status tlsf_alloc(void *state, uint64_t size, uint64_t align, clrun_block *out)
{
    tlsf_state *s = state;
    assert(size >= 1 && is_pow2_u64(align)); /* checked by the allocator core */
    uint64_t granule = UINT64_C(1) << s->granule_log;
    uint64_t bytes = round_up_u64(size, granule);
    if (bytes == 0)
        return CLRUN_ERROR_OUT_OF_MEMORY;
    if (align < granule)
        align = granule;
    if (!live_reserve(s) || !nodes_reserve(s, 2))
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    tlsf_block *b = s->held;
    if (b && b->size == bytes && (b->offset & (align - 1)) == 0) { /* taken back as it is */
        s->held = NULL;
        b->state = BLOCK_LIVE;
        b->chunk->live++;
        s->held_bytes += bytes;
        live_insert(s, b);
        *out = (clrun_block){.chunk = b->chunk->id, .offset = b->offset, .size = bytes};
        return CLRUN_OK;
    }
    held_flush(s);
    uint64_t at = 0;
    if (align == granule) {
        b = find_fit(s, bytes);
        if (b)
            at = b->offset;
    } else {
        b = find_aligned(s, bytes, align, &at);
    }
    if (!b)
        return CLRUN_ERROR_OUT_OF_MEMORY;
    block_take(s, b, at, bytes, out);
    return CLRUN_OK;
}

static clrun_status tlsf_free(void *state, uint32_t chunk, uint64_t offset)
{
    tlsf_state *s = state;
    tlsf_block *b = live_take(s, chunk, offset);
    if (!b)
        return CLRUN_ERROR_INVALID_FREE;
    s->held_bytes -= b->size;
    b->chunk->live--;
    held_flush(s);
    b->state = BLOCK_HELD; /* merged by the next free or by an alloc of another size */
    s->held = b;
    return CLRUN_OK;
}

static void tlsf_reset(void *state)
{
    tlsf_state *s = state;
    s->held = NULL;
    for (uint32_t n = 0; n < s->chunks.count; n++)
        chunk_drop_blocks(s, s->chunks.items[n]);
    memset(s->lists, 0, sizeof s->lists);
    memset(s->sl_bitmap, 0, sizeof s->sl_bitmap);
    s->fl_bitmap = 0;
    for (uint32_t n = 0; n < s->chunks.count; n++)
        chunk_make_empty(s, s->chunks.items[n]); /* the nodes just dropped suffice */
    if (s->live)
        memset(s->live, 0, (size_t)s->live_capacity * sizeof *s->live);
    s->live_blocks = 0;
    s->held_bytes = 0;
}

static void tlsf_stats(const void *state, clrun_strategy_stats *out)
{
    const tlsf_state *s = state;
    uint64_t largest = 0;
    if (s->fl_bitmap) {
        unsigned fl = log2_floor_u64(s->fl_bitmap);
        unsigned sl = 31u - (unsigned)__builtin_clz(s->sl_bitmap[fl]);
        for (const tlsf_block *b = s->lists[fl][sl]; b; b = b->next_free)
            if (b->size > largest)
                largest = b->size;
    }
    if (s->held && held_merged_size(s->held) > largest)
        largest = held_merged_size(s->held);
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
