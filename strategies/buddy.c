/* clrun strategy "buddy": a binary buddy allocator over each chunk, bookkeeping on the host.
 *
 * Algorithm. A chunk is cut into "atoms", its smallest block (a power of two >= min_align and
 * >= 256 bytes). A block of order k is 2^k atoms long and starts at a multiple of 2^k atoms, so
 * a block of 2^k atoms is aligned to its own size within the chunk. Allocation takes the
 * smallest free block of sufficient order and splits it in halves, putting the unused upper
 * halves on the free lists; freeing merges a block with its buddy (the block at index ^ 2^k)
 * for as long as that buddy is free and whole, so an empty chunk is always fully coalesced.
 * A request with an alignment larger than its size takes a block of the alignment's size.
 *
 * Trimming (as Linux's alloc_pages_exact). A request of n atoms, not a power of two, takes the
 * block of 2^k atoms that holds it and gives the unused tail back at once: the live block is
 * the binary form of n laid out from the block's start, largest piece first (n = 5: 4 + 1),
 * and the tail is the aligned blocks that make up the rest (5 of 8: 1 + 2), listed free. The
 * tail's blocks cannot merge while the block lives (each one's buddy holds a live piece). So a
 * block wastes less than an atom, not up to half of itself. The pieces are implicit: a live
 * block records only its first atom's control byte and its atom count (in its free-list link,
 * unused while it is live); its pieces are the aligned blocks that [i, i + n) is made of,
 * largest first from each position. Freeing merges as if every piece were freed in address order, but
 * in one pass from the last piece up (see free_trimmed): the pieces before the last one could
 * never merge on their own (each one's buddy holds the next piece), so they are listed only if
 * the merge stops below them, and a tail all free comes back as the whole block at once.
 *
 * Chunks of any size. A chunk need not be a power of two of atoms: it is cut greedily into
 * decreasing powers of two (12 atoms = 8 + 4). A request larger than a chunk's largest free
 * block still fits an empty chunk as large as it: it takes the chunk's top blocks whole from
 * offset 0, the same binary form, trimming the last one it needs. So chunk_size answers the
 * request (or what the pool wants) rounded up to the atom, not to a power of two. When no
 * block is large enough, the smallest run of free blocks side by side takes the request.
 *
 * Each chunk holds back its most recently freed block unmerged (the previous one is merged
 * then): a request of that size, or up to an eighth smaller, takes it back in O(1), so an
 * alloc/free pair does not split and merge all the way down and up each time. The held block
 * is merged whenever that would let a request succeed, and stats and chunk emptiness count it
 * as merged, so nothing observable differs from merging at once: an empty chunk still gives
 * its largest block.
 *
 * The buddy of each of a chunk's top blocks lies past the end of the chunk, so they never merge
 * with each other and the buddy rule needs no special case beyond "the buddy must lie inside
 * the chunk". Bytes past the last whole atom are never handed out.
 *
 * Bookkeeping, as in SQLite's mem5.c but kept on the host because device memory cannot hold
 * it: per chunk, one control byte per atom (at a block's first atom: free, live or held, and
 * an order; 0 anywhere else), doubly linked free lists per order whose links (two uint32
 * side by side) are an array indexed by atom, and a bit mask of the orders whose free list is not empty.
 * To bound that host memory a chunk has fewer than 2^21 atoms: a chunk of 2^20 minimum blocks
 * or more gets a larger atom (a 1 GiB chunk gets 1 KiB atoms). Host cost: 9 bytes per atom,
 * so under 18 MiB per chunk and at most 9/256 of the chunk's size. Chunks are found by id in
 * a table for ids below 65536 (a pointer per id up to the largest), else by binary search.
 *
 * Complexity. alloc: O(c + log n) for c chunks (one mask test per chunk picks the chunk with
 * the smallest sufficient free block) and n atoms (splits and trimming); free: O(1) to find
 * the chunk (O(log c) past the id table) plus O(log n) merges. A block placed across a run is O(n) to place (a walk over
 * the chunk's blocks) and O(log^2 n) to free. add_chunk and reset: O(n) (clearing the control
 * bytes).
 *
 * Worst-case waste. Internal: under one atom per block (trimming); a chunk wastes under one
 * atom at its end. External: by Robson's bound, a buddy heap needs
 * up to M * (1 + log2(n)) / 2 bytes to never fail on requests of at most n atoms with M bytes
 * live; in practice fragmentation stays well below that.
 */
#include <clrun/strategy.h>

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "buddy_chunk.h"

#define BUDDY_MIN_BLOCK 256u          /* smallest atom, whatever min_align is */
#define BUDDY_ID_MAP 65536u          /* chunk ids below this are found by direct lookup */
#define HELD_SLACK 8u                 /* the held-back block serves a request up to 1/8 smaller */

/* The whole state of one buddy allocator. */
typedef struct buddy_state {
    uint64_t min_block;           /* smallest atom: max(min_align, BUDDY_MIN_BLOCK) */
    uint64_t max_chunk;           /* the largest chunk the pool can add */
    chunk_index chunks;           /* chunk id -> buddy_chunk */
    buddy_chunk **by_id;          /* by_id[id]: chunk id (< by_id_len) or NULL, for the free path */
    uint32_t by_id_len;           /* entries of by_id */
    uint64_t total_bytes;         /* sum of the sizes of all chunks */
    uint64_t held_bytes;          /* sum of the sizes of live blocks */
    uint64_t live_blocks;         /* blocks allocated and not freed */
} buddy_state;

/* The record of chunk `id`, or NULL. Pools number chunks with small integers, so a table
 * indexed by id answers at once; larger ids take the index's binary search. */
static buddy_chunk *find_chunk(const buddy_state *s, uint32_t id)
{
    if (id < s->by_id_len)
        return s->by_id[id];
    return id < BUDDY_ID_MAP ? NULL : chunk_index_find(&s->chunks, id);
}

/* Makes room in by_id for chunk `id`; false when host memory runs out (nothing changed). */
static bool reserve_id(buddy_state *s, uint32_t id)
{
    if (id < s->by_id_len || id >= BUDDY_ID_MAP)
        return true;
    uint32_t len = s->by_id_len ? s->by_id_len : 16;
    while (len <= id)
        len *= 2;
    buddy_chunk **grown = realloc(s->by_id, (size_t)len * sizeof *grown);
    if (!grown)
        return false;
    memset(grown + s->by_id_len, 0, (size_t)(len - s->by_id_len) * sizeof *grown);
    s->by_id = grown;
    s->by_id_len = len;
    return true;
}

/* ---- the vtable ----------------------------------------------------------------------------- */

static clrun_status buddy_create(const clrun_strategy_config *config, void **state)
{
    assert(config && state);
    if (!is_pow2_u64(config->min_align))
        return CLRUN_ERROR_INVALID_ALIGNMENT;
    buddy_state *s = calloc(1, sizeof *s);
    if (!s)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    s->min_block = config->min_align > BUDDY_MIN_BLOCK ? config->min_align : BUDDY_MIN_BLOCK;
    s->max_chunk = config->max_chunk;
    *state = s;
    return CLRUN_OK;
}

static void buddy_destroy(void *state)
{
    buddy_state *s = state;
    if (!s)
        return;
    for (uint32_t i = 0; i < s->chunks.count; i++)
        clrun__buddy_chunk_destroy(s->chunks.items[i]);
    chunk_index_release(&s->chunks);
    free(s->by_id);
    free(s);
}

/* The log2 of the atom of a chunk of `size` bytes (clrun__buddy_chunk_create's choice). */
static unsigned atom_log_for(const buddy_state *s, uint64_t size)
{
    unsigned atom_log = log2_floor_u64(s->min_block);
    unsigned size_log = log2_floor_u64(size);
    return size_log >= atom_log + BUDDY_MAX_ATOMS_LOG ? size_log - BUDDY_MAX_ATOMS_LOG : atom_log;
}

/* Any size fits an empty chunk as large as it (see "Chunks of any size"): the request, or what
 * the pool wants, rounded up to the chunk's atom so that no byte of it goes unused. */
static uint64_t buddy_chunk_size(const void *state, uint64_t request, uint64_t align,
                                 uint64_t wanted)
{
    const buddy_state *s = state;
    if (request == 0 || s->max_chunk < s->min_block)
        return 0;
    uint64_t cap = s->max_chunk & ~((UINT64_C(1) << atom_log_for(s, s->max_chunk)) - 1);
    uint64_t need = request;
    if (align > need)
        need = align; /* offset 0 of a fresh chunk is aligned to anything, but keep the block whole */
    if (s->min_block > need)
        need = s->min_block;
    if (need > cap)
        return 0;
    uint64_t size = wanted > need ? wanted : need;
    if (size >= cap)
        return cap;
    size = round_up_u64(size, UINT64_C(1) << atom_log_for(s, size));
    return size < cap ? size : cap;
}

static clrun_status buddy_add_chunk(void *state, uint32_t chunk, uint64_t size)
{
    buddy_state *s = state;
    if (size == 0)
        return CLRUN_ERROR_INVALID_SIZE;
    if (chunk_index_find(&s->chunks, chunk))
        return CLRUN_ERROR_INVALID_ARGUMENT;
    if (s->total_bytes > UINT64_MAX - size)
        return CLRUN_ERROR_INVALID_SIZE;
    if (chunk_index_reserve(&s->chunks) != 0 || !reserve_id(s, chunk))
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    buddy_chunk *c = clrun__buddy_chunk_create(s->min_block, size);
    if (!c)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    chunk_index_insert(&s->chunks, chunk, c);
    if (chunk < s->by_id_len)
        s->by_id[chunk] = c;
    s->total_bytes += size;
    return CLRUN_OK;
}

static clrun_status buddy_remove_chunk(void *state, uint32_t chunk)
{
    buddy_state *s = state;
    buddy_chunk *c = chunk_index_find(&s->chunks, chunk);
    if (!c)
        return CLRUN_ERROR_INVALID_ARGUMENT;
    if (c->live)
        return CLRUN_ERROR_BUSY;
    s->total_bytes -= c->size;
    chunk_index_erase(&s->chunks, chunk);
    if (chunk < s->by_id_len)
        s->by_id[chunk] = NULL;
    clrun__buddy_chunk_destroy(c);
    return CLRUN_OK;
}

/* An unknown chunk holds no live block, so it answers true. */
static bool buddy_chunk_is_empty(const void *state, uint32_t chunk)
{
    const buddy_chunk *c = chunk_index_find(&((const buddy_state *)state)->chunks, chunk);
    return !c || c->live == 0;
}

/* Counts a live block of `atoms` at atom i of chunk number n (its index in s->chunks), its
 * first atom marked, and describes it in *out. */
static inline void count_block(buddy_state *s, uint32_t n, uint32_t i, uint32_t atoms, clrun_block *out)
{
    assert(n < s->chunks.count);
    buddy_chunk *c = s->chunks.items[n];
    uint64_t bytes = (uint64_t)atoms << c->atom_log;
    c->link[i].next = atoms;
    c->live++;
    c->live_atoms += atoms;
    s->held_bytes += bytes;
    s->live_blocks++;
    out->chunk = s->chunks.ids[n];
    out->offset = (uint64_t)i << c->atom_log;
    out->size = bytes;
}

/* Hands out the first `atoms` of free block i of order k = order_for(atoms) (already off its
 * list) of chunk number n, giving the rest back trimmed. */
static void take_block(buddy_state *s, uint32_t n, uint32_t i, unsigned k, uint32_t atoms, clrun_block *out)
{
    buddy_chunk *c = s->chunks.items[n];
    c->ctrl[i] = (uint8_t)(CTRL_LIVE | log2_floor_u64(atoms));
    clrun__buddy_free_tail(c, i, atoms, k);
    count_block(s, n, i, atoms, out);
}

/* Hands out `atoms` at atom `at` of chunk number n, all of them free (the held-back block
 * merged first): the aligned pieces that make up [at, at + atoms), each carved out of its
 * free block. */
static void take_run(buddy_state *s, uint32_t n, uint32_t at, uint32_t atoms, clrun_block *out)
{
    buddy_chunk *c = s->chunks.items[n];
    clrun__buddy_flush_held(c);
    for (uint32_t q = at, end = at + atoms; q < end;) {
        unsigned b = piece_order(q, end);
        clrun__buddy_carve_piece(c, q, b, q == at);
        q += UINT32_C(1) << b;
    }
    count_block(s, n, at, atoms, out);
}

/* buddy_alloc when no free block holds `need` bytes at `align` as things are: a held-back
 * block merged, or a run of free blocks. */
static clrun_status alloc_merging(buddy_state *s, uint64_t need, uint64_t align, clrun_block *out)
{
    /* Merging a held-back block may make room. Merge only where it
     * does, so that an OUT_OF_MEMORY answer leaves everything as it was. */
    for (uint32_t n = 0; n < s->chunks.count; n++) {
        buddy_chunk *c = s->chunks.items[n];
        uint64_t a = atoms_for(need, c->atom_log);
        if (a > c->atoms || !c->held_atoms || clrun__buddy_held_merged_order(c) < order_for(a))
            continue;
        clrun__buddy_flush_held(c);
        int j = chunk_free_order_from(c, order_for(a));
        assert(j >= 0);
        take_block(s, n, clrun__buddy_split_from(c, (unsigned)j, order_for(a)), order_for(a), (uint32_t)a, out);
        return CLRUN_OK;
    }

    /* No block is large enough, but a run of free blocks side by side may be: the smallest. */
    uint32_t best_run = BUDDY_NIL;
    run_search found = {0};
    for (uint32_t n = 0; n < s->chunks.count; n++) {
        buddy_chunk *c = s->chunks.items[n];
        uint64_t a = atoms_for(need, c->atom_log);
        if (a > c->atoms - c->live_atoms)
            continue; /* not even that many atoms free: no walk */
        uint64_t align_atoms = align >> c->atom_log;
        run_search q = {.atoms = (uint32_t)a, .align = align_atoms > 1 ? (uint32_t)align_atoms : 1};
        clrun__buddy_chunk_runs(c, clrun__buddy_visit_fit, &q);
        if (q.found && (best_run == BUDDY_NIL || ((uint64_t)q.len << c->atom_log) <
                                                     ((uint64_t)found.len << ((buddy_chunk *)s->chunks.items[best_run])->atom_log))) {
            best_run = n;
            found = q;
        }
    }
    if (best_run == BUDDY_NIL)
        return CLRUN_ERROR_OUT_OF_MEMORY;
    take_run(s, best_run, found.at, found.atoms, out);
    return CLRUN_OK;
}

static clrun_status buddy_alloc(void *state, uint64_t size, uint64_t align, clrun_block *out)
{
    buddy_state *s = state;
    assert(size >= 1 && is_pow2_u64(align)); /* checked by the allocator core */
    uint64_t need = size > align ? size : align; /* blocks are aligned to their size */
    if (need > (UINT64_C(1) << 63))
        return CLRUN_ERROR_OUT_OF_MEMORY;
    unsigned ideal_log = need > s->min_block ? log2_floor_u64(need - 1) + 1 : log2_floor_u64(s->min_block);

    /* Best fit over chunks: the smallest free block that holds the request; a held-back block
     * of the right size is taken back as it is. What the request takes in a chunk depends only
     * on the chunk's atom, which nearly all chunks share: worked out once per atom. */
    uint32_t best = BUDDY_NIL;
    unsigned best_log = UINT32_MAX;
    bool best_held = false;
    unsigned atom_log = UINT32_MAX;
    uint64_t atoms = 0, slack = 0, align_mask = 0;
    unsigned k = 0;
    for (uint32_t n = 0, count = s->chunks.count; n < count; n++) {
        const buddy_chunk *c = s->chunks.items[n];
        if (c->atom_log != atom_log) {
            atom_log = c->atom_log;
            atoms = atoms_for(need, atom_log);
            k = order_for(atoms);
            slack = atoms / HELD_SLACK;
            uint64_t align_atoms = align >> atom_log; /* a block placed in a run may start anywhere */
            align_mask = align_atoms > 1 ? align_atoms - 1 : 0;
        }
        unsigned block_log;
        bool held = (uint64_t)c->held_atoms - atoms <= slack && !(c->held_at & align_mask); /* none: wraps */
        if (held) {
            block_log = atom_log + k;
        } else {
            uint64_t m = c->order_mask >> k; /* none past the chunk's own atoms */
            if (!m)
                continue;
            block_log = atom_log + k + (unsigned)__builtin_ctzll(m);
        }
        if (block_log < best_log) {
            best = n;
            best_held = held;
            best_log = block_log;
            if (block_log == ideal_log)
                break; /* no chunk can offer a smaller block */
        }
    }
    if (best != BUDDY_NIL) {
        buddy_chunk *c = s->chunks.items[best];
        if (best_held) { /* only its first atom changes */
            c->ctrl[c->held_at] ^= CTRL_FREE;
            count_block(s, best, c->held_at, c->held_atoms, out);
            c->held_atoms = 0;
        } else {
            uint32_t a = (uint32_t)atoms_for(need, c->atom_log);
            unsigned order = order_for(a);
            uint32_t i = clrun__buddy_split_from(c, best_log - c->atom_log, order);
            take_block(s, best, i, order, a, out);
        }
        return CLRUN_OK;
    }

    return alloc_merging(s, need, align, out);
}

static clrun_status buddy_free(void *state, uint32_t chunk, uint64_t offset)
{
    buddy_state *s = state;
    buddy_chunk *c = find_chunk(s, chunk);
    if (!c)
        return CLRUN_ERROR_INVALID_FREE;
    if (offset & ((UINT64_C(1) << c->atom_log) - 1))
        return CLRUN_ERROR_INVALID_FREE;
    uint64_t at = offset >> c->atom_log;
    if (at >= c->atoms || (c->ctrl[at] & CTRL_KIND) != CTRL_LIVE)
        return CLRUN_ERROR_INVALID_FREE;

    uint32_t i = (uint32_t)at;
    uint32_t atoms = c->link[i].next;
    uint64_t bytes = (uint64_t)atoms << c->atom_log;
    assert(c->live > 0 && s->live_blocks > 0 && s->held_bytes >= bytes);
    s->held_bytes -= bytes;
    s->live_blocks--;
    c->live--;
    c->live_atoms -= atoms;
    /* Hold this block back unmerged and merge the one held before: a request of the same
     * size, the common case, then takes it back in O(1) instead of splitting again. */
    if (c->held_atoms)
        clrun__buddy_free_block(c, c->held_at, c->held_atoms);
    c->held_at = i;
    c->held_atoms = atoms;
    c->ctrl[i] |= CTRL_FREE;
    return CLRUN_OK;
}

static void buddy_reset(void *state)
{
    buddy_state *s = state;
    for (uint32_t n = 0; n < s->chunks.count; n++) {
        buddy_chunk *c = s->chunks.items[n];
        if (c->atoms)
            memset(c->ctrl, 0, c->atoms);
        clrun__buddy_chunk_make_empty(c);
    }
    s->held_bytes = 0;
    s->live_blocks = 0;
}

static void buddy_stats(const void *state, clrun_strategy_stats *out)
{
    const buddy_state *s = state;
    uint64_t largest = 0;
    for (uint32_t n = 0; n < s->chunks.count; n++) {
        const buddy_chunk *c = s->chunks.items[n];
        if (!c->live) { /* an empty chunk gives all of it, as one run */
            uint64_t whole = (uint64_t)c->atoms << c->atom_log;
            if (whole > largest)
                largest = whole;
            continue;
        }
        if (((uint64_t)(c->atoms - c->live_atoms) << c->atom_log) <= largest)
            continue; /* every run of it is smaller: no walk */
        uint32_t run = 0;
        clrun__buddy_chunk_runs(c, clrun__buddy_visit_largest, &run);
        if (((uint64_t)run << c->atom_log) > largest)
            largest = (uint64_t)run << c->atom_log;
        unsigned top = 0;
        bool any = false;
        if (c->order_mask) {
            top = log2_floor_u64(c->order_mask);
            any = true;
        }
        if (c->held_atoms) { /* what alloc would make of it by merging */
            unsigned m = clrun__buddy_held_merged_order(c);
            if (!any || m > top)
                top = m;
            any = true;
        }
        if (any && (UINT64_C(1) << (c->atom_log + top)) > largest)
            largest = UINT64_C(1) << (c->atom_log + top);
    }
    out->held_bytes = s->held_bytes;
    out->free_bytes = s->total_bytes - s->held_bytes;
    out->largest_free = largest;
    out->live_blocks = s->live_blocks;
    out->chunks = s->chunks.count;
}

const clrun_strategy_ops clrun_strategy_buddy = {
    .name = "buddy",
    .description = "power-of-two buddy blocks per chunk, split on alloc and merged on free",
    .create = buddy_create,
    .destroy = buddy_destroy,
    .chunk_size = buddy_chunk_size,
    .add_chunk = buddy_add_chunk,
    .remove_chunk = buddy_remove_chunk,
    .chunk_is_empty = buddy_chunk_is_empty,
    .alloc = buddy_alloc,
    .free = buddy_free,
    .reset = buddy_reset,
    .stats = buddy_stats,
};
