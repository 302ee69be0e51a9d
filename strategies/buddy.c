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
 * tail's blocks cannot merge while the block lives (each one's buddy holds a live piece); the
 * free releases every piece, and they merge back with the tail as any freed blocks do. So a
 * block wastes less than an atom, not up to half of itself. The first piece's control byte
 * says live; the others say CTRL_PART, which no free accepts, and they follow the first
 * contiguously (no other block's piece can follow a block), so a free finds them by walking.
 *
 * Chunks of any size. A chunk need not be a power of two of atoms: it is cut greedily into
 * decreasing powers of two (12 atoms = 8 + 4). A request larger than a chunk's largest free
 * block still fits an empty chunk as large as it: it takes the chunk's top blocks whole from
 * offset 0, the same binary form, trimming the last one it needs. So chunk_size answers the
 * request (or what the pool wants) rounded up to the atom, not to a power of two.
 *
 * Each chunk holds back its most recently freed block unmerged (the previous one is merged
 * then): a request of that exact order takes it back in O(1), so an alloc/free pair does not
 * split and merge all the way down and up each time. The held block is merged whenever that
 * would let a request succeed, and stats and chunk emptiness count it as merged, so nothing
 * observable differs from merging at once: an empty chunk still gives its largest block.
 *
 * The buddy of each of a chunk's top blocks lies past the end of the chunk, so they never merge
 * with each other and the buddy rule needs no special case beyond "the buddy must lie inside
 * the chunk". Bytes past the last whole atom are never handed out.
 *
 * Bookkeeping, as in SQLite's mem5.c but kept on the host because device memory cannot hold
 * it: per chunk, one control byte per atom (at a block's first atom: free, live or a further
 * piece of a live block, and its order; 0 inside a block), doubly linked free lists per order whose links are two uint32
 * arrays indexed by atom, and a bit mask of the orders whose free list is not empty.
 * To bound that host memory a chunk has fewer than 2^21 atoms: a chunk of 2^20 minimum blocks
 * or more gets a larger atom (a 1 GiB chunk gets 1 KiB atoms). Host cost: 9 bytes per atom,
 * so under 18 MiB per chunk and at most 9/256 of the chunk's size.
 *
 * Complexity. alloc: O(c + log n) for c chunks (one mask test per chunk picks the chunk with
 * the smallest sufficient free block) and n atoms (splits, pieces and trimming); free: O(log c)
 * to find the chunk plus O(log^2 n) merges (at most log n pieces, each merging up to log n
 * times). add_chunk and reset: O(n) (clearing the control bytes).
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

#include "chunk_index.h"

#define BUDDY_MIN_BLOCK 256u          /* smallest atom, whatever min_align is */
#define BUDDY_MAX_ATOMS_LOG 20u       /* fewer than 2^(this+1) atoms per chunk (host memory) */
#define BUDDY_ORDERS 64u              /* orders 0..63; real chunks use at most 0..20 */
#define BUDDY_NIL UINT32_MAX          /* end of a free list */
#define HELD_SLACK 8u                 /* the held-back block serves a request up to 1/8 smaller */
#define CTRL_LIVE 0x80u               /* control byte: a live block starts at this atom */
#define CTRL_FREE 0x40u               /* control byte: a free block starts at this atom */
#define CTRL_HELD (CTRL_LIVE | CTRL_FREE) /* control byte: the chunk's held-back free block */
#define CTRL_PART 0x20u               /* control byte: a further piece of the live block before it */
#define CTRL_KIND (CTRL_HELD | CTRL_PART) /* the bits above the order */
#define CTRL_ORDER 0x1fu              /* control byte: the block's (or piece's) order, <= 21 */

/* One chunk. */
typedef struct buddy_chunk {
    uint64_t size;                /* bytes the pool gave us */
    unsigned atom_log;            /* log2 of this chunk's atom (smallest block) in bytes */
    uint32_t atoms;               /* whole atoms in the chunk (< 2^21) */
    uint64_t live;                /* live blocks inside */
    uint32_t live_atoms;          /* atoms of those blocks (a run search needs as many free) */
    uint64_t order_mask;          /* bit k set: free list k is not empty */
    bool held;                    /* a freed block is held back, not merged yet */
    uint32_t held_at;             /* its first atom */
    unsigned held_order;          /* the order of its first piece */
    uint32_t held_atoms;          /* its atoms, all pieces */
    uint32_t head[BUDDY_ORDERS];  /* first free block of each order (atom index) or BUDDY_NIL */
    uint32_t *next;               /* next[i]: the free block after block i in its list */
    uint32_t *prev;               /* prev[i]: the free block before block i in its list */
    uint8_t *ctrl;                /* ctrl[i]: CTRL_LIVE, CTRL_FREE, CTRL_HELD or CTRL_PART | order
                                   * at a block's (or piece's) first atom, 0 inside one */
} buddy_chunk;

/* The whole state of one buddy allocator. */
typedef struct buddy_state {
    uint64_t min_block;           /* smallest atom: max(min_align, BUDDY_MIN_BLOCK) */
    uint64_t max_chunk;           /* the largest chunk the pool can add */
    chunk_index chunks;           /* chunk id -> buddy_chunk */
    uint64_t total_bytes;         /* sum of the sizes of all chunks */
    uint64_t held_bytes;          /* sum of the sizes of live blocks */
    uint64_t live_blocks;         /* blocks allocated and not freed */
} buddy_state;

/* ---- free lists ----------------------------------------------------------------------------- */

static void list_push(buddy_chunk *c, uint32_t i, unsigned k)
{
    /* A block of order k starts at a multiple of 2^k atoms and lies inside the chunk. */
    assert(k < BUDDY_ORDERS && (i & ((UINT32_C(1) << k) - 1)) == 0 && (uint64_t)i + (UINT64_C(1) << k) <= c->atoms);
    uint32_t first = c->head[k];
    c->next[i] = first;
    c->prev[i] = BUDDY_NIL;
    if (first != BUDDY_NIL)
        c->prev[first] = i;
    c->head[k] = i;
    c->order_mask |= UINT64_C(1) << k;
    c->ctrl[i] = (uint8_t)(CTRL_FREE | k);
}

static void list_unlink(buddy_chunk *c, uint32_t i, unsigned k)
{
    assert(c->ctrl[i] == (CTRL_FREE | k) && (c->order_mask >> k & 1)); /* listed on list k */
    uint32_t n = c->next[i], p = c->prev[i];
    if (p != BUDDY_NIL)
        c->next[p] = n;
    else
        c->head[k] = n;
    if (n != BUDDY_NIL)
        c->prev[n] = p;
    if (c->head[k] == BUDDY_NIL)
        c->order_mask &= ~(UINT64_C(1) << k);
}

/* ---- chunks --------------------------------------------------------------------------------- */

/* Makes every atom free: the greedy cut into decreasing powers of two. */
static void chunk_make_empty(buddy_chunk *c)
{
    c->live = 0;
    c->live_atoms = 0;
    c->order_mask = 0;
    c->held = false;
    for (unsigned k = 0; k < BUDDY_ORDERS; k++)
        c->head[k] = BUDDY_NIL;
    if (!c->atoms)
        return;
    memset(c->ctrl, 0, c->atoms);
    uint32_t at = 0;
    for (unsigned k = BUDDY_MAX_ATOMS_LOG + 1; k-- > 0;) {
        if (c->atoms & (UINT32_C(1) << k)) {
            list_push(c, at, k);
            at += UINT32_C(1) << k;
        }
    }
}

static void chunk_destroy(buddy_chunk *c)
{
    if (!c)
        return;
    free(c->next);
    free(c->prev);
    free(c->ctrl);
    free(c);
}

/* A new empty chunk of `size` bytes, or NULL when host memory runs out. */
static buddy_chunk *chunk_create(const buddy_state *s, uint64_t size)
{
    buddy_chunk *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    unsigned atom_log = log2_floor_u64(s->min_block);
    unsigned size_log = log2_floor_u64(size); /* size >= 1 here */
    if (size_log >= atom_log + BUDDY_MAX_ATOMS_LOG)
        atom_log = size_log - BUDDY_MAX_ATOMS_LOG;
    c->size = size;
    c->atom_log = atom_log;
    c->atoms = (uint32_t)(size >> atom_log); /* < 2^21 by the choice of atom_log */
    if (c->atoms) {
        c->next = malloc((size_t)c->atoms * sizeof *c->next);
        c->prev = malloc((size_t)c->atoms * sizeof *c->prev);
        c->ctrl = malloc(c->atoms);
        if (!c->next || !c->prev || !c->ctrl) {
            chunk_destroy(c);
            return NULL;
        }
    }
    chunk_make_empty(c);
    return c;
}

/* The order of the smallest block of chunk c that holds `need` bytes, or -1 if none could. */
static int chunk_order_for(const buddy_chunk *c, uint64_t need)
{
    uint64_t usable = (uint64_t)c->atoms << c->atom_log;
    if (need > usable)
        return -1;
    if (need <= (UINT64_C(1) << c->atom_log))
        return 0;
    return (int)(log2_floor_u64(need - 1) + 1 - c->atom_log);
}

/* The atoms a request of `need` (>= 1) bytes takes in chunk c. */
static uint64_t chunk_atoms_for(const buddy_chunk *c, uint64_t need)
{
    return ((need - 1) >> c->atom_log) + 1;
}

/* The smallest order >= k with a free block in chunk c, or -1. */
static int chunk_free_order_from(const buddy_chunk *c, int k)
{
    uint64_t m = c->order_mask >> k;
    return m ? k + __builtin_ctzll(m) : -1;
}

/* Frees block i of order k for good: merges it with its buddy while that buddy is free,
 * whole and inside the chunk, then lists the result. */
static void chunk_merge_free(buddy_chunk *c, uint32_t i, unsigned k)
{
    c->ctrl[i] = 0;
    for (;;) {
        uint32_t half = UINT32_C(1) << k;
        uint32_t buddy = i ^ half;
        if ((uint64_t)buddy + half > c->atoms || c->ctrl[buddy] != (CTRL_FREE | k))
            break;
        list_unlink(c, buddy, k);
        c->ctrl[buddy] = 0;
        if (buddy < i)
            i = buddy;
        k++;
    }
    list_push(c, i, k);
}

/* The order block i of order k would reach if merged now; changes nothing. Since every listed
 * block is already merged as far as it goes, only the held-back block can grow this way. */
static unsigned chunk_merged_order(const buddy_chunk *c, uint32_t i, unsigned k)
{
    for (;;) {
        uint32_t half = UINT32_C(1) << k;
        uint32_t buddy = i ^ half;
        if ((uint64_t)buddy + half > c->atoms || c->ctrl[buddy] != (CTRL_FREE | k))
            return k;
        if (buddy < i)
            i = buddy;
        k++;
    }
}

/* ---- pieces: a live block of n atoms as the binary form of n -------------------------------- */

/* Marks [i, i + n) live as the binary form of n, largest piece first: the first piece
 * CTRL_LIVE when `head` (else CTRL_PART, continuing a block that starts below i), the others
 * CTRL_PART. */
static void mark_pieces(buddy_chunk *c, uint32_t i, uint32_t n, bool head)
{
    for (unsigned b = log2_floor_u64(n) + 1; b-- > 0;) {
        if (!(n >> b & 1))
            continue;
        c->ctrl[i] = (uint8_t)((head ? CTRL_LIVE : CTRL_PART) | b);
        head = false;
        i += UINT32_C(1) << b;
    }
}

/* Lists [i + n, i + 2^k) free, the block of order k at i minus its first n atoms (live), as
 * the aligned blocks it is made of, smallest first. None merges: each one's buddy holds a live
 * atom. */
static void free_tail(buddy_chunk *c, uint32_t i, uint32_t n, unsigned k)
{
    for (uint32_t q = n; q < (UINT32_C(1) << k);) {
        unsigned b = (unsigned)__builtin_ctz(q);
        list_push(c, i + q, b);
        q += UINT32_C(1) << b;
    }
}

/* The atoms of the block whose first piece, of order k, starts at i: the CTRL_PART pieces
 * that follow it belong to it (a piece only ever follows the pieces of its own block). */
static uint32_t block_atoms(const buddy_chunk *c, uint32_t i, unsigned k)
{
    uint32_t n = UINT32_C(1) << k, at = i + n;
    while (at < c->atoms && (c->ctrl[at] & CTRL_KIND) == CTRL_PART) {
        uint32_t len = UINT32_C(1) << (c->ctrl[at] & CTRL_ORDER);
        n += len;
        at += len;
    }
    return n;
}

/* Frees every piece of the block at i (first piece of order k) for good, each merged. */
static void free_pieces(buddy_chunk *c, uint32_t i, unsigned k)
{
    uint32_t end = i + block_atoms(c, i, k);
    while (i < end) {
        unsigned b = c->ctrl[i] & CTRL_ORDER; /* merging a piece leaves the next one marked */
        uint32_t next = i + (UINT32_C(1) << b);
        chunk_merge_free(c, i, b);
        i = next;
    }
}

/* The largest order that merging the held-back block of c would make; changes nothing. A
 * block of one piece merges as any block. A trimmed one (first piece of order k0, in the block
 * of order k0 + 1 at its start) merges whole, as that block, when every block of its tail is
 * free; otherwise its first piece cannot merge and the others stay smaller than it. */
static unsigned held_merged_order(const buddy_chunk *c)
{
    uint32_t i = c->held_at, n = c->held_atoms;
    unsigned k0 = c->held_order, k = k0 + 1;
    if (n == UINT32_C(1) << k0)
        return chunk_merged_order(c, i, k0);
    if (n > UINT32_C(1) << k || (i & ((UINT32_C(1) << k) - 1))) { /* placed in a run: no trimmed shape */
        unsigned largest = 0;
        for (uint32_t at = i; at < i + n; at += UINT32_C(1) << (c->ctrl[at] & CTRL_ORDER))
            if ((c->ctrl[at] & CTRL_ORDER) > largest)
                largest = c->ctrl[at] & CTRL_ORDER; /* each piece merges at least to itself */
        return largest;
    }
    if ((uint64_t)i + (UINT64_C(1) << k) > c->atoms)
        return k0; /* it spans the chunk's top blocks: its first one never merges */
    for (uint32_t q = n; q < (UINT32_C(1) << k);) {
        unsigned b = (unsigned)__builtin_ctz(q);
        if (c->ctrl[i + q] != (CTRL_FREE | b))
            return k0;
        q += UINT32_C(1) << b;
    }
    return chunk_merged_order(c, i, k);
}

/* Merges the held-back block of chunk c, if any. */
static void chunk_flush_held(buddy_chunk *c)
{
    if (c->held) {
        c->held = false;
        free_pieces(c, c->held_at, c->held_order);
    }
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
        chunk_destroy(s->chunks.items[i]);
    chunk_index_release(&s->chunks);
    free(s);
}

/* The log2 of the atom of a chunk of `size` bytes (chunk_create's choice). */
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
    if (chunk_index_reserve(&s->chunks) != 0)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    buddy_chunk *c = chunk_create(s, size);
    if (!c)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    chunk_index_insert(&s->chunks, chunk, c);
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
    chunk_destroy(c);
    return CLRUN_OK;
}

/* An unknown chunk holds no live block, so it answers true. */
static bool buddy_chunk_is_empty(const void *state, uint32_t chunk)
{
    const buddy_chunk *c = chunk_index_find(&((const buddy_state *)state)->chunks, chunk);
    return !c || c->live == 0;
}

/* Counts a live block of `atoms` at atom i of chunk number n (its index in s->chunks), its
 * pieces already marked, and describes it in *out. */
static void count_block(buddy_state *s, uint32_t n, uint32_t i, uint32_t atoms, clrun_block *out)
{
    assert(n < s->chunks.count);
    buddy_chunk *c = s->chunks.items[n];
    uint64_t bytes = (uint64_t)atoms << c->atom_log;
    c->live++;
    c->live_atoms += atoms;
    s->held_bytes += bytes;
    s->live_blocks++;
    out->chunk = s->chunks.ids[n];
    out->offset = (uint64_t)i << c->atom_log;
    out->size = bytes;
}

/* Hands out the first `atoms` of free block i of order k (already off its list) of chunk
 * number n, giving the rest back trimmed. */
static void take_block(buddy_state *s, uint32_t n, uint32_t i, unsigned k, uint32_t atoms, clrun_block *out)
{
    buddy_chunk *c = s->chunks.items[n];
    assert(atoms >= 1 && atoms <= UINT32_C(1) << k && (k == 0 || atoms > UINT32_C(1) << (k - 1)));
    mark_pieces(c, i, atoms, true);
    free_tail(c, i, atoms, k);
    count_block(s, n, i, atoms, out);
}

/* ---- runs: a block across free blocks ------------------------------------------------------ */

/* A run of free atoms of chunk c: maximal, in address order, over free blocks and the
 * held-back block (free in all but form). */
typedef struct buddy_run {
    uint32_t at;   /* its first atom */
    uint32_t len;  /* its atoms */
} buddy_run;

/* Calls visit(c, run, arg) for every run of c in address order; stops when it returns true. */
static bool chunk_runs(const buddy_chunk *c, bool (*visit)(const buddy_chunk *, buddy_run, void *), void *arg)
{
    buddy_run run = {0, 0};
    bool in_held = false; /* the pieces that follow belong to the held-back block */
    for (uint32_t at = 0; at < c->atoms;) {
        uint8_t ctrl = c->ctrl[at];
        uint32_t len = UINT32_C(1) << (ctrl & CTRL_ORDER);
        unsigned kind = ctrl & CTRL_KIND;
        if (kind != CTRL_PART)
            in_held = kind == CTRL_HELD;
        if (kind == CTRL_FREE || in_held) {
            if (!run.len)
                run.at = at;
            run.len += len;
        } else if (run.len) {
            if (visit(c, run, arg))
                return true;
            run.len = 0;
        }
        at += len;
    }
    return run.len && visit(c, run, arg);
}

/* What a search for a run asks and finds: the smallest run with room for `atoms` at a multiple
 * of `align` atoms (the lowest on ties). */
typedef struct run_search {
    uint32_t atoms, align;  /* asked */
    bool found;
    uint32_t at, len;       /* where the block would start, and its run's length */
} run_search;

static bool visit_fit(const buddy_chunk *c, buddy_run run, void *arg)
{
    (void)c;
    run_search *q = arg;
    uint32_t at = (run.at + q->align - 1) & ~(q->align - 1);
    if (at < run.at || at - run.at >= run.len || run.len - (at - run.at) < q->atoms)
        return false;
    if (!q->found || run.len < q->len) {
        q->found = true;
        q->at = at;
        q->len = run.len;
    }
    return run.len == q->atoms; /* nothing fits tighter */
}

static bool visit_largest(const buddy_chunk *c, buddy_run run, void *arg)
{
    (void)c;
    uint32_t *largest = arg;
    if (run.len > *largest)
        *largest = run.len;
    return false;
}

/* Makes the piece of order b at atom q, inside free atoms, live (CTRL_LIVE when `head`, else
 * CTRL_PART): the free block that holds it is split down to it, the other halves listed. */
static void carve_piece(buddy_chunk *c, uint32_t q, unsigned b, bool head)
{
    unsigned j = b;
    uint32_t start = q;
    for (;; j++) {
        start = q & ~((UINT32_C(1) << j) - 1);
        if (c->ctrl[start] == (CTRL_FREE | j))
            break;
        assert(j < BUDDY_MAX_ATOMS_LOG + 1); /* the atoms are free: some block holds them */
    }
    list_unlink(c, start, j);
    while (j > b) { /* keep the half with q, list the other one */
        j--;
        uint32_t half = UINT32_C(1) << j;
        if (q & half) {
            list_push(c, start, j);
            start += half;
        } else {
            list_push(c, start + half, j);
        }
    }
    c->ctrl[q] = (uint8_t)((head ? CTRL_LIVE : CTRL_PART) | b);
}

/* Hands out `atoms` at atom `at` of chunk number n, all of them free (the held-back block
 * merged first): the aligned pieces that make up [at, at + atoms), each carved out of its
 * free block. */
static void take_run(buddy_state *s, uint32_t n, uint32_t at, uint32_t atoms, clrun_block *out)
{
    buddy_chunk *c = s->chunks.items[n];
    chunk_flush_held(c);
    uint32_t end = at + atoms;
    for (uint32_t q = at; q < end;) {
        unsigned b = log2_floor_u64(end - q);
        if (q && (unsigned)__builtin_ctz(q) < b)
            b = (unsigned)__builtin_ctz(q);
        carve_piece(c, q, b, q == at);
        q += UINT32_C(1) << b;
    }
    count_block(s, n, at, atoms, out);
}

/* Takes the first free block of order j of chunk c and splits it down to order k. */
static uint32_t split_from(buddy_chunk *c, unsigned j, unsigned k)
{
    uint32_t i = c->head[j];
    list_unlink(c, i, j);
    while (j > k) { /* keep the lower half, list the upper one */
        j--;
        list_push(c, i + (UINT32_C(1) << j), j);
    }
    return i;
}

static clrun_status buddy_alloc(void *state, uint64_t size, uint64_t align, clrun_block *out)
{
    buddy_state *s = state;
    assert(size >= 1 && is_pow2_u64(align)); /* checked by the allocator core */
    uint64_t need = size > align ? size : align; /* blocks are aligned to their size */
    if (need > (UINT64_C(1) << 63))
        return CLRUN_ERROR_OUT_OF_MEMORY;
    uint64_t ideal = pow2_ceil_u64(need > s->min_block ? need : s->min_block);
    unsigned ideal_log = log2_floor_u64(ideal);

    /* Best fit over chunks: the smallest free block that holds the request; a held-back block
     * of exactly the right order is taken back as it is. */
    uint32_t best = BUDDY_NIL;
    int best_k = -1, best_j = -1;
    bool best_held = false;
    unsigned best_log = 0;
    for (uint32_t n = 0; n < s->chunks.count; n++) {
        const buddy_chunk *c = s->chunks.items[n];
        int k = chunk_order_for(c, need);
        if (k < 0)
            continue;
        uint64_t align_atoms = align >> c->atom_log; /* a block placed in a run may start anywhere */
        uint64_t atoms = chunk_atoms_for(c, need);
        bool held = c->held && c->held_atoms >= atoms && c->held_atoms - atoms <= atoms / HELD_SLACK &&
                    (align_atoms <= 1 || (c->held_at & (align_atoms - 1)) == 0);
        int j = held ? k : chunk_free_order_from(c, k);
        if (j < 0)
            continue;
        unsigned block_log = c->atom_log + (unsigned)j;
        if (best == BUDDY_NIL || block_log < best_log) {
            best = n;
            best_k = k;
            best_j = j;
            best_held = held;
            best_log = block_log;
            if (block_log == ideal_log)
                break; /* no chunk can offer a smaller block */
        }
    }
    if (best != BUDDY_NIL) {
        buddy_chunk *c = s->chunks.items[best];
        if (best_held) { /* its pieces are still marked: only the first one changes */
            c->held = false;
            c->ctrl[c->held_at] = (uint8_t)(CTRL_LIVE | c->held_order);
            count_block(s, best, c->held_at, c->held_atoms, out);
        } else {
            uint32_t i = split_from(c, (unsigned)best_j, (unsigned)best_k);
            take_block(s, best, i, (unsigned)best_k, (uint32_t)chunk_atoms_for(c, need), out);
        }
        return CLRUN_OK;
    }

    /* Nothing fits as things are; merging a held-back block may make room. Merge only where it
     * does, so that an OUT_OF_MEMORY answer leaves everything as it was. */
    for (uint32_t n = 0; n < s->chunks.count; n++) {
        buddy_chunk *c = s->chunks.items[n];
        int k = chunk_order_for(c, need);
        if (k < 0 || !c->held || held_merged_order(c) < (unsigned)k)
            continue;
        chunk_flush_held(c);
        int j = chunk_free_order_from(c, k);
        assert(j >= k);
        take_block(s, n, split_from(c, (unsigned)j, (unsigned)k), (unsigned)k, (uint32_t)chunk_atoms_for(c, need),
                   out);
        return CLRUN_OK;
    }

    /* No block is large enough, but a run of free blocks side by side may be: the smallest. */
    uint32_t best_run = BUDDY_NIL;
    run_search found = {0};
    for (uint32_t n = 0; n < s->chunks.count; n++) {
        buddy_chunk *c = s->chunks.items[n];
        if (chunk_order_for(c, need) < 0 || c->atoms - c->live_atoms < chunk_atoms_for(c, need))
            continue; /* not even that many atoms free: no walk */
        uint64_t align_atoms = align >> c->atom_log;
        run_search q = {.atoms = (uint32_t)chunk_atoms_for(c, need), .align = align_atoms > 1 ? (uint32_t)align_atoms : 1};
        chunk_runs(c, visit_fit, &q);
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

static clrun_status buddy_free(void *state, uint32_t chunk, uint64_t offset)
{
    buddy_state *s = state;
    buddy_chunk *c = chunk_index_find(&s->chunks, chunk);
    if (!c)
        return CLRUN_ERROR_INVALID_FREE;
    if (offset & ((UINT64_C(1) << c->atom_log) - 1))
        return CLRUN_ERROR_INVALID_FREE;
    uint64_t at = offset >> c->atom_log;
    if (at >= c->atoms || (c->ctrl[at] & CTRL_HELD) != CTRL_LIVE)
        return CLRUN_ERROR_INVALID_FREE;

    uint32_t i = (uint32_t)at;
    unsigned k = c->ctrl[i] & CTRL_ORDER;
    uint32_t atoms = block_atoms(c, i, k);
    uint64_t bytes = (uint64_t)atoms << c->atom_log;
    assert(c->live > 0 && s->live_blocks > 0 && s->held_bytes >= bytes);
    s->held_bytes -= bytes;
    s->live_blocks--;
    c->live--;
    c->live_atoms -= atoms;
    /* Hold this block back unmerged and merge the one held before: a request of the same
     * size, the common case, then takes it back in O(1) instead of splitting again. */
    chunk_flush_held(c);
    c->held = true;
    c->held_at = i;
    c->held_order = k;
    c->held_atoms = atoms;
    c->ctrl[i] = (uint8_t)(CTRL_HELD | k);
    return CLRUN_OK;
}

static void buddy_reset(void *state)
{
    buddy_state *s = state;
    for (uint32_t n = 0; n < s->chunks.count; n++)
        chunk_make_empty(s->chunks.items[n]);
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
        uint32_t run = 0;
        chunk_runs(c, visit_largest, &run);
        if (((uint64_t)run << c->atom_log) > largest)
            largest = (uint64_t)run << c->atom_log;
        unsigned top = 0;
        bool any = false;
        if (c->order_mask) {
            top = log2_floor_u64(c->order_mask);
            any = true;
        }
        if (c->held) { /* what alloc would make of it by merging */
            unsigned m = held_merged_order(c);
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

const clrun_allocator_ops clrun_strategy_buddy = {
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
