/* clrun strategy "tlsf": blocks split, merged and found (see tlsf.c for the algorithm). */
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

/* ---- blocks --------------------------------------------------------------------------------- */


/* Makes live block b free, merged at once with its free neighbours: a neighbour absorbs it
 * (a hole keeping its list place when its class stays); at the chunk's end it joins the tail or
 * becomes it. */
void clrun__tlsf_block_release(tlsf_state *s, tlsf_block *b)
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

/* Hands out the low `bytes` of hole b (a spare node reserved); the caller records the live
 * block. b keeps what is left above it. */
TLSF_INLINE tlsf_block *hole_take_low(tlsf_state *s, tlsf_block *b, uint64_t bytes)
{
    assert(b->state == BLOCK_HOLE && bytes <= b->size);
    if (b->size == bytes) {
        list_remove(s, b);
        b->state = BLOCK_LIVE;
        b->chunk->live++;
        s->held_bytes += bytes;
        return b;
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
        b->state = BLOCK_LIVE;
        b->chunk->live++;
        s->held_bytes += bytes;
        return b;
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
 * NULL: the best of its own list, else the best of the first non-empty list above, every tail of which fits and is
 * smaller than any further above. */
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

/* The live block for `bytes` at alignment `align` (two spare nodes reserved): found, then cut
 * from the free block that holds it. One function, so that the alloc path pays one call. */
tlsf_block *clrun__tlsf_place(tlsf_state *s, uint64_t bytes, uint64_t align, tlsf_block **undo_tail)
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
