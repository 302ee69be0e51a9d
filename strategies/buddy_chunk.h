/* clrun strategy "buddy": one chunk's blocks, what its two files share (strategies/buddy.c:
 * the state, best fit over chunks and the vtable; strategies/buddy_chunk.c: a chunk's free
 * lists, splitting, trimming, merging, the held-back block and runs of free blocks). The
 * algorithm, its complexity and its waste are described at the top of buddy.c. */
#ifndef CLRUN_STRATEGIES_BUDDY_CHUNK_H
#define CLRUN_STRATEGIES_BUDDY_CHUNK_H

#include <assert.h>
#include <stdbool.h>
#include <stdint.h>

#include "chunk_index.h"

#define BUDDY_MAX_ATOMS_LOG 20u       /* fewer than 2^(this+1) atoms per chunk (host memory) */
#define BUDDY_ORDERS 64u              /* orders 0..63; real chunks use at most 0..20 */
#define BUDDY_NIL UINT32_MAX          /* end of a free list */
#define CTRL_LIVE 0x80u               /* control byte: a live block starts at this atom */
#define CTRL_FREE 0x40u               /* control byte: a free block starts at this atom */
#define CTRL_HELD (CTRL_LIVE | CTRL_FREE) /* control byte: the chunk's held-back free block */
#define CTRL_KIND CTRL_HELD           /* the bits above the order */
#define CTRL_ORDER 0x1fu              /* control byte: the block's (or first piece's) order, <= 20 */

/* The links of the block that starts at an atom, side by side so that a list operation
 * touches one cache line per block. */
typedef struct buddy_link {
    uint32_t next;  /* a free block: the next one in its list (or BUDDY_NIL); a live (or held)
                     * block: its atoms */
    uint32_t prev;  /* a free block: the one before it in its list (or BUDDY_NIL) */
} buddy_link;

/* One chunk. */
typedef struct buddy_chunk {
    uint64_t size;                /* bytes the pool gave us */
    unsigned atom_log;            /* log2 of this chunk's atom (smallest block) in bytes */
    uint32_t atoms;               /* whole atoms in the chunk (< 2^21) */
    uint64_t live;                /* live blocks inside */
    uint32_t live_atoms;          /* atoms of those blocks (a run search needs as many free) */
    uint64_t order_mask;          /* bit k set: free list k is not empty */
    uint32_t held_atoms;          /* atoms of the freed block held back unmerged, 0 if none */
    uint32_t held_at;             /* its first atom */
    uint32_t head[BUDDY_ORDERS];  /* first free block of each order (atom index) or BUDDY_NIL */
    buddy_link *link;             /* link[i]: block i's free-list neighbours, or its atoms */
    uint8_t *ctrl;                /* ctrl[i]: CTRL_LIVE, CTRL_FREE or CTRL_HELD | order at a
                                   * block's first atom (a live block: of its first piece), 0
                                   * anywhere else */
} buddy_chunk;

/* ---- free lists and sizes ------------------------------------------------------------------ */

static inline void list_push(buddy_chunk *c, uint32_t i, unsigned k)
{
    /* A block of order k starts at a multiple of 2^k atoms and lies inside the chunk. */
    assert(!(i & ((UINT32_C(1) << k) - 1)) && i + (UINT32_C(1) << k) <= c->atoms);
    uint32_t first = c->head[k];
    c->link[i].next = first;
    c->link[i].prev = BUDDY_NIL;
    if (first != BUDDY_NIL)
        c->link[first].prev = i;
    c->head[k] = i;
    c->order_mask |= UINT64_C(1) << k;
    c->ctrl[i] = (uint8_t)(CTRL_FREE | k);
}

/* Takes free block i of order k off its list; its control byte is left to the caller. */
static inline void list_unlink(buddy_chunk *c, uint32_t i, unsigned k)
{
    assert(c->ctrl[i] == (CTRL_FREE | k)); /* listed on list k */
    uint32_t n = c->link[i].next, p = c->link[i].prev;
    if (p != BUDDY_NIL)
        c->link[p].next = n;
    else if ((c->head[k] = n) == BUDDY_NIL)
        c->order_mask &= ~(UINT64_C(1) << k);
    if (n != BUDDY_NIL)
        c->link[n].prev = p;
}

/* The atoms a request of `need` (>= 1) bytes takes in a chunk of atoms of 2^atom_log bytes. */
static inline uint64_t atoms_for(uint64_t need, unsigned atom_log)
{
    return ((need - 1) >> atom_log) + 1;
}

/* The order of the smallest block of at least `atoms` (>= 1) atoms. */
static inline unsigned order_for(uint64_t atoms)
{
    return atoms <= 1 ? 0 : log2_floor_u64(atoms - 1) + 1;
}

/* The smallest order >= k with a free block in chunk c, or -1. */
static inline int chunk_free_order_from(const buddy_chunk *c, unsigned k)
{
    uint64_t m = c->order_mask >> k;
    return m ? (int)k + __builtin_ctzll(m) : -1;
}

/* The order of the piece at atom q of a block that ends at atom `end` (> q): the largest
 * aligned block that starts at q and fits. */
static inline unsigned piece_order(uint32_t q, uint32_t end)
{
    unsigned b = log2_floor_u64(end - q);
    if (q && (unsigned)__builtin_ctz(q) < b)
        b = (unsigned)__builtin_ctz(q);
    return b;
}

/* A run of free atoms of chunk c: maximal, in address order, over free blocks and the
 * held-back block (free in all but form). */
typedef struct buddy_run {
    uint32_t at;   /* its first atom */
    uint32_t len;  /* its atoms */
} buddy_run;

/* What a search for a run asks and finds: the smallest run with room for `atoms` at a multiple
 * of `align` atoms (the lowest on ties). */
typedef struct run_search {
    uint32_t atoms, align;  /* asked */
    bool found;
    uint32_t at, len;       /* where the block would start, and its run's length */
} run_search;

/* ---- a chunk ------------------------------------------------------------------------------- */

/* Makes every atom free, its control bytes all 0 already: the greedy cut into decreasing
 * powers of two. */
void clrun__buddy_chunk_make_empty(buddy_chunk *c);

/* Frees chunk c's host memory (NULL: nothing). */
void clrun__buddy_chunk_destroy(buddy_chunk *c);

/* A new empty chunk of `size` bytes, or NULL when host memory runs out. */
buddy_chunk *clrun__buddy_chunk_create(uint64_t min_block, uint64_t size);

/* Lists [i + n, i + 2^k) free, the block of order k at i minus its first n atoms (live), as
 * the aligned blocks it is made of, smallest first. None merges: each one's buddy holds a live
 * atom. */
void clrun__buddy_free_tail(buddy_chunk *c, uint32_t i, uint32_t n, unsigned k);

/* Frees the live (or held) block of n atoms at i for good, merged as if each piece were freed
 * in address order. */
void clrun__buddy_free_block(buddy_chunk *c, uint32_t i, uint32_t n);

/* The largest order that merging the held-back block of c would make; changes nothing. A
 * block of one piece merges as any block. A trimmed one (first piece of order k0, in the block
 * of order k0 + 1 at its start) merges whole, as that block, when every block of its tail is
 * free; otherwise its first piece cannot merge and the others stay smaller than it. */
unsigned clrun__buddy_held_merged_order(const buddy_chunk *c);

/* Merges the held-back block of chunk c, if any. */
void clrun__buddy_flush_held(buddy_chunk *c);

/* Calls visit(c, run, arg) for every run of c in address order; stops when it returns true. */
bool clrun__buddy_chunk_runs(const buddy_chunk *c, bool (*visit)(const buddy_chunk *, buddy_run, void *),
                             void *arg);

/* Visitors of clrun__buddy_chunk_runs: the smallest run that fits a run_search (arg), and the
 * length of the largest run (arg: a uint32_t, raised). */
bool clrun__buddy_visit_fit(const buddy_chunk *c, buddy_run run, void *arg);
bool clrun__buddy_visit_largest(const buddy_chunk *c, buddy_run run, void *arg);

/* Makes the piece of order b at atom q, inside free atoms, live (the block's first atom when
 * `head`): the free block that holds it is split down to it, the other halves listed. */
void clrun__buddy_carve_piece(buddy_chunk *c, uint32_t q, unsigned b, bool head);

/* Takes the first free block of order j of chunk c and splits it down to order k. */
uint32_t clrun__buddy_split_from(buddy_chunk *c, unsigned j, unsigned k);

#endif
