/* clrun strategy "tlsf": what its two files share (strategies/tlsf.c: the state, the chunks,
 * the vtable and its fast paths; strategies/tlsf_blocks.c: the slow paths, with the live blocks
 * by offset and the blocks split, merged and found, in one file so that they pay no calls). The
 * algorithm is described at the top of tlsf.c. */
#ifndef CLRUN_STRATEGIES_TLSF_INTERNAL_H
#define CLRUN_STRATEGIES_TLSF_INTERNAL_H

#include <clrun/strategy.h>

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "chunk_index.h"

#define TLSF_SLI 5u                         /* log2 of the second-level lists per power of two */
#define TLSF_SL_COUNT (1u << TLSF_SLI)      /* 32 */
#define TLSF_FL_COUNT 64u                   /* first-level entries (60 used at most) */
#define TLSF_SCAN 8u                        /* holes read in the request's own list */
#define TLSF_SCAN_ABOVE 4u                  /* holes read in the first list above it */
#define TLSF_NODES_PER_SLAB 255u            /* block nodes allocated together */
#define TLSF_LIVE_MIN 64u                   /* smallest live hash table */
#define TLSF_RECENT 8u                      /* newest live blocks kept out of the hash table */

/* LIVE: handed out; HOLE: free, listed; TAIL: free, at its chunk's end, in no list. */
enum block_state { BLOCK_LIVE, BLOCK_HOLE, BLOCK_TAIL };

typedef struct tlsf_chunk tlsf_chunk;

/* A block: a range of granules of one chunk. 64 bytes, and a node slab aligned to 64, so that
 * every node lies in one cache line. */
typedef struct tlsf_block {
    uint64_t offset;                /* of its first byte in the chunk */
    uint64_t size;                  /* bytes, a multiple of the granule */
    struct tlsf_block *prev_phys;   /* the block just below it, NULL at the chunk's start */
    struct tlsf_block *next_phys;   /* the block just above it, NULL at the chunk's end */
    tlsf_chunk *chunk;              /* where it lies */
    struct tlsf_block **free_link;  /* free: the link that points at it (its list's head or
                                     * the next_free of the block before it), so that taking it
                                     * out of its list is the same wherever it stands */
    struct tlsf_block *next_free;   /* free: next in its list; spare node: next spare */
    uint8_t state;                  /* enum block_state */
    uint8_t fl, sl;                 /* free: the class of its list */
} tlsf_block;

/* One chunk. */
struct tlsf_chunk {
    uint32_t id;                    /* the pool's id for it */
    uint64_t size;                  /* bytes the pool gave us */
    uint64_t usable;                /* size rounded down to the granule: what blocks cover */
    uint64_t live;                  /* live blocks inside */
    tlsf_block *first;              /* the block at offset 0, NULL when usable is 0 */
    tlsf_block *tail;               /* the free block at its end, NULL when that one is live */
};

/* A slot of the live-block hash table (open addressing, linear probing). */
typedef struct live_slot {
    uint64_t offset;                /* the block's offset */
    uint32_t chunk;                 /* its chunk's id */
    uint32_t hash;                  /* live_hash of both: its top bits are the home slot */
    tlsf_block *block;              /* NULL: the slot is empty */
} live_slot;

/* Block nodes are allocated in slabs, linked for destroy. */
typedef struct node_slab {
    tlsf_block nodes[TLSF_NODES_PER_SLAB];
    struct node_slab *next;
} node_slab;

#define TLSF_LINE 64u                       /* a cache line: the alignment of node slabs */
_Static_assert(sizeof(tlsf_block) == TLSF_LINE, "a block node fills one cache line");

/* Free blocks by size class (see class_of), each list newest first, with the two bitmaps that
 * say which lists are not empty. */
typedef struct tlsf_lists {
    uint64_t fl_bitmap;                         /* bit f set: some list of first level f is not empty */
    uint32_t sl_bitmap[TLSF_FL_COUNT];          /* bit s of entry f set: heads[f][s] is not empty */
    tlsf_block *heads[TLSF_FL_COUNT][TLSF_SL_COUNT];
    tlsf_block **sink;                          /* see link_push */
} tlsf_lists;

/* The whole state of one TLSF allocator. */
typedef struct tlsf_state {
    unsigned granule_log;                       /* log2 of the granule (min_align) */
    uint64_t max_chunk;                         /* the largest chunk the pool can add */
    tlsf_lists holes;                           /* the holes: where allocs look first */
    tlsf_lists tails;                           /* the tails, by the classes of the holes, so
                                                 * that the smallest that fits is found without
                                                 * reading every chunk */
    live_slot *live;                            /* live blocks by (chunk, offset), but the recent */
    live_slot recent[TLSF_RECENT];              /* [0, nrecent): the newest live blocks, not in
                                                 * live, oldest first (the newest is the last) */
    unsigned nrecent;                           /* entries in recent */
    tlsf_block *undo_tail;                      /* the tail the newest was cut from, nothing done since */
    tlsf_block *ghost;                          /* that block once freed, nothing done since
                                                 * (see clrun__tlsf_settle_ghost) */
    uint64_t live_capacity;                     /* slots in live (a power of two, or 0) */
    unsigned live_shift;                        /* 32 - log2(live_capacity): see live_home */
    uint64_t live_blocks;                       /* blocks allocated and not freed */
    tlsf_block *spare;                          /* unused nodes, linked by next_free */
    uint32_t nspare;                            /* nodes on spare */
    node_slab *slabs;                           /* every node slab, for destroy */
    chunk_index chunks;                         /* chunk id -> tlsf_chunk */
    uint64_t total_bytes;                       /* sum of the sizes of all chunks */
    uint64_t held_bytes;                        /* sum of the sizes of live blocks */
} tlsf_state;

/* The helpers below sit on every alloc and free path, most of them several times over: inlined
 * always, whatever the compiler's size heuristics say, so the paths pay no calls for them. */
#define TLSF_INLINE static inline __attribute__((always_inline))

/* ---- size classes --------------------------------------------------------------------------- */

/* The list of free blocks of `granules` (>= 1) granules. */
TLSF_INLINE void class_of(uint64_t granules, unsigned *fl, unsigned *sl)
{
    assert(granules >= 1);
    /* Without a branch, small and large sizes alternating at random in real workloads: below
     * TLSF_SL_COUNT granules, t is TLSF_SLI - 1 and the class is (0, granules). */
    unsigned t = log2_floor_u64(granules | (TLSF_SL_COUNT - 1));
    unsigned f = t - (TLSF_SLI - 1), large = f != 0;
    *fl = f;
    *sl = (unsigned)(granules >> (f - large)) - (large << TLSF_SLI);
}

/* The first non-empty list of `l` strictly above class (fl, sl); false when there is none. */
TLSF_INLINE bool class_above(const tlsf_lists *l, unsigned *fl, unsigned *sl)
{
    uint32_t sl_map = *sl + 1 < TLSF_SL_COUNT ? l->sl_bitmap[*fl] & (~UINT32_C(0) << (*sl + 1)) : 0;
    if (!sl_map) {
        uint64_t fl_map = *fl + 1 < TLSF_FL_COUNT ? l->fl_bitmap & (~UINT64_C(0) << (*fl + 1)) : 0;
        if (!fl_map)
            return false;
        *fl = (unsigned)__builtin_ctzll(fl_map);
        sl_map = l->sl_bitmap[*fl];
        assert(sl_map);
    }
    *sl = (unsigned)__builtin_ctz(sl_map);
    return true;
}

/* ---- free lists ----------------------------------------------------------------------------- */

/* Links free block b at the head of the list whose head is *head. The free_link of the block
 * after it is written to *sink when there is no such block: a store to a dummy costs less than
 * the branch that would skip it, whose outcome follows the workload's sizes and is mispredicted
 * as often (the same in link_remove). */
TLSF_INLINE void link_push(tlsf_block **head, tlsf_block *b, tlsf_block ***sink)
{
    tlsf_block *n = *head;
    b->next_free = n;
    b->free_link = head;
    *(n ? &n->free_link : sink) = &b->next_free;
    *head = b;
}

/* Unlinks free block b from its list. */
TLSF_INLINE void link_remove(tlsf_block *b, tlsf_block ***sink)
{
    tlsf_block *n = b->next_free, **link = b->free_link;
    *link = n;
    *(n ? &n->free_link : sink) = link;
}

/* Whether free block b is alone in the list whose head is *head. */
TLSF_INLINE bool link_alone(tlsf_block *const *head, const tlsf_block *b)
{
    return b->free_link == head && !b->next_free;
}

/* Puts free block b at the head of list (fl, sl) of `l`, its class. */
TLSF_INLINE void lists_push(tlsf_lists *l, tlsf_block *b, unsigned fl, unsigned sl)
{
    b->fl = (uint8_t)fl;
    b->sl = (uint8_t)sl;
    link_push(&l->heads[fl][sl], b, &l->sink);
    l->sl_bitmap[fl] |= UINT32_C(1) << sl;
    l->fl_bitmap |= UINT64_C(1) << fl;
}

/* Takes free block b out of its list of `l`. */
TLSF_INLINE void lists_unlink(tlsf_lists *l, tlsf_block *b)
{
    unsigned fl = b->fl, sl = b->sl;
    uint32_t empty = link_alone(&l->heads[fl][sl], b);
    link_remove(b, &l->sink);
    /* Without branches, for the reason given at link_push. */
    uint32_t sl_map = l->sl_bitmap[fl] & ~(empty << sl);
    l->sl_bitmap[fl] = sl_map;
    l->fl_bitmap &= ~((uint64_t)(sl_map == 0) << fl);
}

/* Gives free block b of `l` a new range; it keeps its place in its list when its class stays. */
TLSF_INLINE void lists_resize(tlsf_state *s, tlsf_lists *l, tlsf_block *b, uint64_t offset, uint64_t size)
{
    unsigned fl, sl;
    class_of(size >> s->granule_log, &fl, &sl);
    b->offset = offset;
    b->size = size;
    if (fl == b->fl && sl == b->sl)
        return;
    lists_unlink(l, b);
    lists_push(l, b, fl, sl);
}

/* Lists hole b in class (fl, sl), its class. */
TLSF_INLINE void list_insert_at(tlsf_state *s, tlsf_block *b, unsigned fl, unsigned sl)
{
    /* Free blocks are always merged with their free neighbours, and a hole is never last. */
    assert(!b->prev_phys || b->prev_phys->state == BLOCK_LIVE);
    assert(b->next_phys && b->next_phys->state == BLOCK_LIVE);
    b->state = BLOCK_HOLE;
    lists_push(&s->holes, b, fl, sl);
}

TLSF_INLINE void list_insert(tlsf_state *s, tlsf_block *b)
{
    unsigned fl, sl;
    class_of(b->size >> s->granule_log, &fl, &sl);
    list_insert_at(s, b, fl, sl);
}

TLSF_INLINE void list_remove(tlsf_state *s, tlsf_block *b)
{
    assert(b->state == BLOCK_HOLE);
    lists_unlink(&s->holes, b);
}

/* Gives hole b a new range; it keeps its place in its list when its class stays. */
TLSF_INLINE void list_resize(tlsf_state *s, tlsf_block *b, uint64_t offset, uint64_t size)
{
    assert(b->state == BLOCK_HOLE);
    lists_resize(s, &s->holes, b, offset, size);
}

/* ---- tails ---------------------------------------------------------------------------------- */

/* Tails have lists of their own, in the classes of the holes: there are few of them (one a
 * chunk at most), so a list seldom holds more than one, and the smallest tail that fits is
 * found with the bit scans of the holes' search, reading one or two tails. Their sizes change
 * with nearly every alloc and free at the top of a chunk, and so most often their class, even
 * in classes of a power of two: a finer class costs little more. */

/* Makes free block b, the last of its chunk and in no list, the chunk's tail. */
TLSF_INLINE void tail_insert(tlsf_state *s, tlsf_block *b)
{
    unsigned fl, sl;
    assert(!b->next_phys && (!b->prev_phys || b->prev_phys->state == BLOCK_LIVE));
    b->state = BLOCK_TAIL;
    b->chunk->tail = b;
    class_of(b->size >> s->granule_log, &fl, &sl);
    lists_push(&s->tails, b, fl, sl);
}

/* Block b is no longer its chunk's tail (it is about to be live, a hole or gone). */
TLSF_INLINE void tail_remove(tlsf_state *s, tlsf_block *b)
{
    assert(b->state == BLOCK_TAIL && b->chunk->tail == b);
    lists_unlink(&s->tails, b);
    b->chunk->tail = NULL;
}

/* Gives tail b a new range, still up to its chunk's end. It moves to the head of the list of its
 * class even when that class stays: a tail's class changes on most resizes but not all, at
 * random, so a test costs more than the move, and the order of a tail list does not matter
 * (tail_best reads every tail of a list). */
TLSF_INLINE void tail_resize(tlsf_state *s, tlsf_block *b, uint64_t offset, uint64_t size)
{
    assert(b->state == BLOCK_TAIL && offset + size == b->chunk->usable);
    unsigned fl, sl;
    class_of(size >> s->granule_log, &fl, &sl);
    b->offset = offset;
    b->size = size;
    lists_unlink(&s->tails, b);
    lists_push(&s->tails, b, fl, sl);
}

/* ---- block nodes ---------------------------------------------------------------------------- */

/* Adds a slab of spare nodes; false when host memory runs out (nothing changed). */
bool clrun__tlsf_nodes_grow(tlsf_state *s);

/* Makes sure `count` (<= TLSF_NODES_PER_SLAB) spare nodes exist; false when host memory runs
 * out (nothing changed). */
TLSF_INLINE bool nodes_reserve(tlsf_state *s, uint32_t count)
{
    return s->nspare >= count || clrun__tlsf_nodes_grow(s);
}

/* A spare node (nodes_reserve made sure there is one). */
TLSF_INLINE tlsf_block *node_take(tlsf_state *s)
{
    assert(s->spare && s->nspare);
    tlsf_block *b = s->spare;
    s->spare = b->next_free;
    s->nspare--;
    return b;
}

TLSF_INLINE void node_drop(tlsf_state *s, tlsf_block *b)
{
    b->next_free = s->spare;
    s->spare = b;
    s->nspare++;
}

/* ---- blocks --------------------------------------------------------------------------------- */

/* Unlinks block b from its chunk's physical order and recycles its node. */
TLSF_INLINE void clrun__tlsf_block_unlink(tlsf_state *s, tlsf_block *b)
{
    if (b->prev_phys)
        b->prev_phys->next_phys = b->next_phys;
    else
        b->chunk->first = b->next_phys;
    if (b->next_phys)
        b->next_phys->prev_phys = b->prev_phys;
    node_drop(s, b);
}

/* ---- the slow paths (tlsf_blocks.c) -------------------------------------------------------- */

/* Merges the ghost into the tail above it (see tlsf_blocks.c). */
void clrun__tlsf_settle_ghost(tlsf_state *s);

/* What every call but the fast paths does first: the last alloc can no longer be undone, and
 * the ghost, if any, is merged. */
TLSF_INLINE void settle(tlsf_state *s)
{
    s->undo_tail = NULL;
    if (s->ghost)
        clrun__tlsf_settle_ghost(s);
}

/* Entry `from` of recent moves to entry `to`, field by field (see live_insert). */
TLSF_INLINE void recent_move(tlsf_state *s, unsigned to, unsigned from)
{
    s->recent[to].offset = s->recent[from].offset;
    s->recent[to].chunk = s->recent[from].chunk;
    s->recent[to].block = s->recent[from].block;
}

/* Drops entry i of recent; the newer ones move down, so that recent stays oldest first. A block
 * freed soon is one of the newest (a temporary, or the one before an activation), so a search
 * from the newest stops after one or two entries, in a pattern that repeats with the workload's
 * steps, and this moves one entry or none. */
TLSF_INLINE void recent_drop(tlsf_state *s, unsigned i)
{
    unsigned n = --s->nrecent;
    for (; i < n; i++)
        recent_move(s, i, i + 1);
    s->live_blocks--;
}

/* The alloc of `bytes` (the size rounded up to the granule; 0 when that wrapped around) at
 * alignment `align` that the fast path of tlsf_alloc did not serve. */
clrun_status clrun__tlsf_alloc_slow(tlsf_state *s, uint64_t bytes, uint64_t align, clrun_block *out);

/* The free of the live block at (chunk, offset) that the fast path of tlsf_free did not serve. */
clrun_status clrun__tlsf_free_slow(tlsf_state *s, uint32_t chunk, uint64_t offset);

#endif
