/* clrun strategy "tlsf": the slow paths of alloc and free, with the live blocks by offset and
 * the blocks split, merged and found (see tlsf.c for the algorithm). */
#include "tlsf_internal.h"

/* Adds a slab of spare nodes; false when host memory runs out (nothing changed). */
bool clrun__tlsf_nodes_grow(tlsf_state *s)
{
    size_t bytes = (sizeof(node_slab) + TLSF_LINE - 1) / TLSF_LINE * TLSF_LINE;
    node_slab *slab = aligned_alloc(TLSF_LINE, bytes); /* each node in one line */
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
 * hashing at all; a full recent sends its oldest to the table. */
static void live_insert(tlsf_state *s, tlsf_block *b)
{
    assert((s->live_blocks + 1) * 4 <= s->live_capacity);
    unsigned i = s->nrecent;
    if (i == TLSF_RECENT) { /* the oldest goes to the table */
        recent_evict(s, 0);
        for (unsigned j = 0; j + 1 < TLSF_RECENT; j++)
            recent_move(s, j, j + 1);
        i--;
    }
    s->nrecent = i + 1;
    /* Field by field: a wide store here would stall the free that reads it next (no store
     * forwarding from a vector store to a narrower load). */
    s->recent[i].offset = b->offset;
    s->recent[i].chunk = b->chunk->id;
    s->recent[i].block = b;
    s->live_blocks++;
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
void clrun__tlsf_settle_ghost(tlsf_state *s)
{
    tlsf_block *g = s->ghost, *tail = g->next_phys;
    assert(tail && tail->state == BLOCK_TAIL && (!g->prev_phys || g->prev_phys->state == BLOCK_LIVE));
    tail_resize(s, tail, g->offset, tail->size + g->size);
    s->ghost = NULL;
    clrun__tlsf_block_unlink(s, g);
}

/* ---- blocks --------------------------------------------------------------------------------- */


/* Makes live block b free, merged at once with its free neighbours: a neighbour absorbs it
 * (a hole keeping its list place when its class stays); at the chunk's end it joins the tail or
 * becomes it. */
static void block_release(tlsf_state *s, tlsf_block *b)
{
    tlsf_block *prev = b->prev_phys, *next = b->next_phys;
    if (prev && prev->state == BLOCK_HOLE) { /* the hole below absorbs b */
        uint64_t size = prev->size + b->size;
        clrun__tlsf_block_unlink(s, b);
        if (!next || next->state == BLOCK_TAIL) { /* and then joins the tail, or becomes it */
            list_remove(s, prev);
            if (next) {
                tail_resize(s, next, prev->offset, next->size + size);
                clrun__tlsf_block_unlink(s, prev);
            } else {
                prev->size = size;
                tail_insert(s, prev);
            }
        } else if (next->state == BLOCK_HOLE) {
            size += next->size;
            list_remove(s, next);
            clrun__tlsf_block_unlink(s, next);
            list_resize(s, prev, prev->offset, size);
        } else {
            list_resize(s, prev, prev->offset, size);
        }
    } else if (!next) {
        tail_insert(s, b);
    } else if (next->state == BLOCK_TAIL) {
        tail_resize(s, next, b->offset, next->size + b->size);
        clrun__tlsf_block_unlink(s, b);
    } else if (next->state == BLOCK_HOLE) {
        uint64_t offset = b->offset, size = b->size + next->size;
        clrun__tlsf_block_unlink(s, b);
        list_resize(s, next, offset, size);
    } else {
        list_insert(s, b);
    }
}

/* A new node for [offset, offset + size) of b's chunk, linked into the physical order just
 * above b (or just below it), live until the caller says otherwise. */
TLSF_INLINE tlsf_block *block_split_off(tlsf_state *s, tlsf_block *b, uint64_t offset, uint64_t size, bool above)
{
    tlsf_block *n = node_take(s);
    n->offset = offset;
    n->size = size;
    n->chunk = b->chunk;
    n->state = BLOCK_LIVE;
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

/* A new live node for the low `bytes` of free block b, linked just below it (a spare node
 * reserved); b keeps the rest, its range for the caller to set. */
TLSF_INLINE tlsf_block *block_split_low(tlsf_state *s, tlsf_block *b, uint64_t bytes)
{
    tlsf_block *n = node_take(s), *prev = b->prev_phys;
    tlsf_chunk *c = b->chunk;
    n->offset = b->offset;
    n->size = bytes;
    n->chunk = c;
    n->state = BLOCK_LIVE;
    n->next_phys = b;
    n->prev_phys = prev;
    *(prev ? &prev->next_phys : &c->first) = n; /* no branch: b starts a chunk at random */
    b->prev_phys = n;
    c->live++;
    s->held_bytes += bytes;
    return n;
}

/* Free block b, out of its list, handed out whole. */
TLSF_INLINE tlsf_block *block_take_whole(tlsf_state *s, tlsf_block *b)
{
    b->state = BLOCK_LIVE;
    b->chunk->live++;
    s->held_bytes += b->size;
    return b;
}

/* Hands out the low `bytes` of hole b (a spare node reserved); the caller records the live
 * block. b keeps what is left above it. */
TLSF_INLINE tlsf_block *hole_take_low(tlsf_state *s, tlsf_block *b, uint64_t bytes)
{
    assert(b->state == BLOCK_HOLE && bytes <= b->size);
    if (b->size == bytes) {
        list_remove(s, b);
        return block_take_whole(s, b);
    }
    tlsf_block *live = block_split_low(s, b, bytes);
    list_resize(s, b, b->offset + bytes, b->size - bytes);
    return live;
}

/* The same for tail b, which stays the tail when anything is left of it. */
TLSF_INLINE tlsf_block *tail_take_low(tlsf_state *s, tlsf_block *b, uint64_t bytes)
{
    assert(b->state == BLOCK_TAIL && bytes <= b->size);
    if (b->size == bytes) {
        tail_remove(s, b);
        return block_take_whole(s, b);
    }
    tlsf_block *live = block_split_low(s, b, bytes);
    tail_resize(s, b, b->offset + bytes, b->size - bytes);
    return live;
}

/* Hands out `bytes` at offset `at` of free block b, a hole or a tail (two spare nodes reserved);
 * the caller records the live block. b's node keeps what is left below the block, or else what
 * is left above it; a tail cut at its low end stays the tail. */
static tlsf_block *block_take(tlsf_state *s, tlsf_block *b, uint64_t at, uint64_t bytes)
{
    assert(b->state != BLOCK_LIVE && at >= b->offset && at - b->offset + bytes <= b->size);
    tlsf_chunk *c = b->chunk;
    uint64_t below = at - b->offset, above = b->size - below - bytes;
    bool tail = b->state == BLOCK_TAIL;
    tlsf_block *live;
    if (!below && !above) {
        if (tail)
            tail_remove(s, b);
        else
            list_remove(s, b);
        live = b;
    } else if (!below) {
        live = block_split_off(s, b, at, bytes, false);
        if (tail)
            tail_resize(s, b, at + bytes, above);
        else
            list_resize(s, b, at + bytes, above);
    } else {
        if (tail)
            tail_remove(s, b);
        live = block_split_off(s, b, at, bytes, true);
        if (above) {
            tlsf_block *rest = block_split_off(s, live, at + bytes, above, true);
            if (tail)
                tail_insert(s, rest);
            else
                list_insert(s, rest);
        }
        if (tail) {
            b->size = below;
            list_insert(s, b);
        } else {
            list_resize(s, b, b->offset, below);
        }
    }
    live->state = BLOCK_LIVE;
    c->live++;
    s->held_bytes += bytes;
    return live;
}

/* Whether free block a is a better fit than b (NULL): smaller, or as large and lower (the lower
 * chunk id, then the lower offset), as address-ordered best fit chooses. */
static bool better_fit(const tlsf_block *a, const tlsf_block *b)
{
    if (!b || a->size != b->size)
        return !b || a->size < b->size;
    if (a->chunk != b->chunk)
        return a->chunk->id < b->chunk->id;
    return a->offset < b->offset;
}

/* The best fit for `bytes` among the first `limit` holes of list `head` (limit 0: all). */
TLSF_INLINE tlsf_block *list_best(tlsf_block *head, uint64_t bytes, uint32_t limit, bool *truncated)
{
    tlsf_block *best = NULL;
    uint32_t seen = 0;
    *truncated = false;
    for (tlsf_block *b = head; b; b = b->next_free) {
        if (limit && seen++ == limit) {
            *truncated = true;
            break;
        }
        if (b->size >= bytes && better_fit(b, best))
            best = b;
    }
    return best;
}

/* Whether tail a is a better fit than tail b (NULL): smaller, or as large and in the chunk of
 * the lower id. */
static bool better_tail(const tlsf_block *a, const tlsf_block *b)
{
    if (!b || a->size != b->size)
        return !b || a->size < b->size;
    return a->chunk->id < b->chunk->id;
}

/* The smallest tail of at least `bytes`, of class (fl, sl) (the lowest chunk id on ties), or
 * NULL: the best of its own list, else the best of the first non-empty list above, every tail
 * of which fits and is smaller than any further above. */
TLSF_INLINE tlsf_block *tail_best(const tlsf_state *s, uint64_t bytes, unsigned fl, unsigned sl)
{
    tlsf_block *best = NULL;
    for (tlsf_block *t = s->tails.heads[fl][sl]; t; t = t->next_free)
        if (t->size >= bytes && better_tail(t, best))
            best = t;
    if (best || !class_above(&s->tails, &fl, &sl))
        return best;
    for (tlsf_block *t = s->tails.heads[fl][sl]; t; t = t->next_free)
        if (better_tail(t, best))
            best = t;
    return best;
}

/* A hole of at least `bytes`, of class (fl, sl) (good fit), or NULL. */
TLSF_INLINE tlsf_block *find_hole(tlsf_state *s, uint64_t bytes, unsigned fl, unsigned sl)
{
    bool truncated = false, unused;
    tlsf_block *b = s->holes.heads[fl][sl];
    if (b && (b = list_best(b, bytes, TLSF_SCAN, &truncated)) != NULL)
        return b;
    unsigned up_fl = fl, up_sl = sl;
    if (class_above(&s->holes, &up_fl, &up_sl))
        return list_best(s->holes.heads[up_fl][up_sl], bytes, TLSF_SCAN_ABOVE, &unused);
    if (truncated)
        return list_best(s->holes.heads[fl][sl], bytes, 0, &unused);
    return NULL;
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

/* A free block with room for `bytes` aligned to `align` (> granule): the first hole that has it,
 * walking the lists upward from the request's own class, else the smallest tail; NULL when no
 * free block has it. */
__attribute__((noinline)) static tlsf_block *find_aligned(tlsf_state *s, uint64_t bytes, uint64_t align,
                                                          uint64_t *at)
{
    unsigned fl, sl;
    class_of(bytes >> s->granule_log, &fl, &sl);
    do {
        for (tlsf_block *b = s->holes.heads[fl][sl]; b; b = b->next_free)
            if (aligned_fit(b, bytes, align, at))
                return b;
    } while (class_above(&s->holes, &fl, &sl));
    tlsf_block *best = NULL;
    uint64_t best_at = 0;
    for (uint32_t n = 0; n < s->chunks.count; n++) {
        tlsf_block *t = ((tlsf_chunk *)s->chunks.items[n])->tail;
        uint64_t t_at;
        if (t && aligned_fit(t, bytes, align, &t_at) && (!best || t->size < best->size)) {
            best = t;
            best_at = t_at;
        }
    }
    *at = best_at;
    return best;
}

/* The live block for `bytes` (a multiple of the granule) at alignment `align` (a power of two),
 * two spare nodes reserved: the good fit among the holes, else the smallest tail, cut at the
 * low end of the free block (above the granule, at its first aligned place, the gap before it
 * staying a hole); the caller records it. NULL, nothing changed, when no free block holds it.
 * *undo_tail: the tail it was cut from the bottom of when that tail stays, else NULL. */
static tlsf_block *place(tlsf_state *s, uint64_t bytes, uint64_t align, tlsf_block **undo_tail)
{
    tlsf_block *b;
    if (align <= (UINT64_C(1) << s->granule_log)) { /* the good fit among the holes, else a tail */
        unsigned fl, sl;
        class_of(bytes >> s->granule_log, &fl, &sl);
        if ((b = find_hole(s, bytes, fl, sl)) != NULL) {
            *undo_tail = NULL;
            return hole_take_low(s, b, bytes);
        }
        if (!(b = tail_best(s, bytes, fl, sl)))
            return NULL;
        *undo_tail = b->size > bytes ? b : NULL;
        return tail_take_low(s, b, bytes);
    }
    uint64_t at;
    if (!(b = find_aligned(s, bytes, align, &at)))
        return NULL;
    *undo_tail = b->state == BLOCK_TAIL && at == b->offset && b->size > bytes ? b : NULL;
    return block_take(s, b, at, bytes);
}

/* ---- the slow paths -------------------------------------------------------------------------- */

/* The alloc path but its fast path (see tlsf_alloc in tlsf.c): the ghost settled, room made,
 * then a search and a cut, all in one function so that it pays no calls. */
clrun_status clrun__tlsf_alloc_slow(tlsf_state *s, uint64_t bytes, uint64_t align, clrun_block *out)
{
    if (bytes == 0) /* the size wrapped around when rounded up */
        return CLRUN_ERROR_OUT_OF_MEMORY;
    settle(s);
    if (!live_reserve(s) || !nodes_reserve(s, 2))
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    tlsf_block *undo_tail;
    tlsf_block *live = place(s, bytes, align, &undo_tail);
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

/* The free path but its fast path (see tlsf_free in tlsf.c): the ghost settled, a lookup,
 * then merges. */
clrun_status clrun__tlsf_free_slow(tlsf_state *s, uint32_t chunk, uint64_t offset)
{
    settle(s);
    tlsf_block *b = live_take(s, chunk, offset);
    if (!b)
        return CLRUN_ERROR_INVALID_FREE;
    s->held_bytes -= b->size;
    b->chunk->live--;
    block_release(s, b);
    return CLRUN_OK;
}
