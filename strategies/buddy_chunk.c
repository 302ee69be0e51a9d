/* clrun strategy "buddy": one chunk's blocks (see strategies/buddy_chunk.h; the algorithm is
 * described at the top of strategies/buddy.c). */
#include "buddy_chunk.h"

#include <stdlib.h>

/* ---- chunks --------------------------------------------------------------------------------- */

/* Makes every atom free, its control bytes all 0 already: the greedy cut into decreasing
 * powers of two. */
void clrun__buddy_chunk_make_empty(buddy_chunk *c)
{
    c->live = 0;
    c->live_atoms = 0;
    c->order_mask = 0;
    c->held_atoms = 0;
    for (unsigned k = 0; k < BUDDY_ORDERS; k++)
        c->head[k] = BUDDY_NIL;
    uint32_t at = 0;
    for (unsigned k = BUDDY_MAX_ATOMS_LOG + 1; k-- > 0;) {
        if (c->atoms & (UINT32_C(1) << k)) {
            list_push(c, at, k);
            at += UINT32_C(1) << k;
        }
    }
}

void clrun__buddy_chunk_destroy(buddy_chunk *c)
{
    if (!c)
        return;
    free(c->link);
    free(c->ctrl);
    free(c);
}

/* A new empty chunk of `size` bytes, or NULL when host memory runs out. */
buddy_chunk *clrun__buddy_chunk_create(uint64_t min_block, uint64_t size)
{
    buddy_chunk *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    unsigned atom_log = log2_floor_u64(min_block);
    unsigned size_log = log2_floor_u64(size); /* size >= 1 here */
    if (size_log >= atom_log + BUDDY_MAX_ATOMS_LOG)
        atom_log = size_log - BUDDY_MAX_ATOMS_LOG;
    c->size = size;
    c->atom_log = atom_log;
    c->atoms = (uint32_t)(size >> atom_log); /* < 2^21 by the choice of atom_log */
    if (c->atoms) {
        c->link = malloc((size_t)c->atoms * sizeof *c->link);
        c->ctrl = calloc(c->atoms, 1); /* fresh pages from the system need no clearing */
        if (!c->link || !c->ctrl) {
            clrun__buddy_chunk_destroy(c);
            return NULL;
        }
    }
    clrun__buddy_chunk_make_empty(c);
    return c;
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
        i &= ~half;
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
        i &= ~half;
        k++;
    }
}

/* ---- pieces: a live block of n atoms at atom i, the aligned blocks [i, i + n) is made of ---- */


/* Lists [i + n, i + 2^k) free, the block of order k at i minus its first n atoms (live), as
 * the aligned blocks it is made of, smallest first. None merges: each one's buddy holds a live
 * atom. */
void clrun__buddy_free_tail(buddy_chunk *c, uint32_t i, uint32_t n, unsigned k)
{
    for (uint32_t q = n; q < (UINT32_C(1) << k);) {
        unsigned b = (unsigned)__builtin_ctz(q);
        list_push(c, i + q, b);
        q += UINT32_C(1) << b;
    }
}

/* Frees the block of n atoms at i whose pieces are the binary form of n (i aligned to the
 * block of order K = ceil(log2 n) that holds it, n not a power of two), with the result of
 * freeing its pieces one by one in address order. The merge climbs from the last piece. At an
 * order where n has a 1 bit above the last piece, the buddy is a piece of the block (below
 * it: free now, never listed); at the others, the bits of 2^K - n, it is the tail's block of
 * that order (above it), merged when it is listed whole. Where the climb stops, the pieces
 * below are listed unmerged, each on its own list, as the piece-by-piece free leaves them;
 * past order K it is an ordinary merge. */
static void free_trimmed(buddy_chunk *c, uint32_t i, uint32_t n, unsigned K)
{
    c->ctrl[i] = 0;
    for (uint32_t tail = (UINT32_C(1) << K) - n; tail; tail &= tail - 1) {
        unsigned t = (unsigned)__builtin_ctz(tail);
        uint32_t half = UINT32_C(1) << t;
        uint32_t at = i + (n & ~((half << 1) - 1)); /* the climbing block, of order t */
        uint32_t buddy = at + half;
        if (buddy + half > c->atoms || c->ctrl[buddy] != (CTRL_FREE | t)) {
            list_push(c, at, t);
            for (uint32_t above = n & ~((half << 1) - 1); above;) {
                unsigned p = log2_floor_u64(above); /* the pieces above it, from i */
                list_push(c, i, p);
                i += UINT32_C(1) << p;
                above &= ~(UINT32_C(1) << p);
            }
            return;
        }
        list_unlink(c, buddy, t);
        c->ctrl[buddy] = 0;
    }
    chunk_merge_free(c, i, K);
}

/* Frees the live (or held) block of n atoms at i for good, merged as if each piece were freed
 * in address order. */
void clrun__buddy_free_block(buddy_chunk *c, uint32_t i, uint32_t n)
{
    unsigned K = order_for(n);
    if (!(i & ((UINT32_C(1) << K) - 1))) { /* the binary form of n */
        if (n == UINT32_C(1) << K)
            chunk_merge_free(c, i, K);
        else
            free_trimmed(c, i, n, K);
        return;
    }
    for (uint32_t q = i, end = i + n; q < end;) { /* placed in a run: piece by piece */
        unsigned b = piece_order(q, end);
        chunk_merge_free(c, q, b);
        q += UINT32_C(1) << b;
    }
}

/* The largest order that merging the held-back block of c would make; changes nothing. A
 * block of one piece merges as any block. A trimmed one (first piece of order k0, in the block
 * of order k0 + 1 at its start) merges whole, as that block, when every block of its tail is
 * free; otherwise its first piece cannot merge and the others stay smaller than it. */
unsigned clrun__buddy_held_merged_order(const buddy_chunk *c)
{
    uint32_t i = c->held_at, n = c->held_atoms;
    unsigned k0 = c->ctrl[i] & CTRL_ORDER, k = k0 + 1;
    if (n == UINT32_C(1) << k0)
        return chunk_merged_order(c, i, k0);
    if (n > UINT32_C(1) << k || (i & ((UINT32_C(1) << k) - 1))) { /* placed in a run: no trimmed shape */
        unsigned largest = 0;
        for (uint32_t at = i, end = i + n; at < end;) {
            unsigned b = piece_order(at, end); /* each piece merges at least to itself */
            if (b > largest)
                largest = b;
            at += UINT32_C(1) << b;
        }
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
void clrun__buddy_flush_held(buddy_chunk *c)
{
    if (c->held_atoms) {
        clrun__buddy_free_block(c, c->held_at, c->held_atoms);
        c->held_atoms = 0;
    }
}

/* ---- runs: a block across free blocks ------------------------------------------------------ */

/* Calls visit(c, run, arg) for every run of c in address order; stops when it returns true. */
bool clrun__buddy_chunk_runs(const buddy_chunk *c, bool (*visit)(const buddy_chunk *, buddy_run, void *), void *arg)
{
    buddy_run run = {0, 0};
    for (uint32_t at = 0; at < c->atoms;) {
        uint8_t ctrl = c->ctrl[at];
        unsigned kind = ctrl & CTRL_KIND;
        uint32_t len = kind == CTRL_FREE ? UINT32_C(1) << (ctrl & CTRL_ORDER) : c->link[at].next;
        assert(kind != 0 && len >= 1); /* blocks tile the chunk */
        if (kind != CTRL_LIVE) {
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
bool clrun__buddy_visit_fit(const buddy_chunk *c, buddy_run run, void *arg)
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

bool clrun__buddy_visit_largest(const buddy_chunk *c, buddy_run run, void *arg)
{
    (void)c;
    uint32_t *largest = arg;
    if (run.len > *largest)
        *largest = run.len;
    return false;
}

/* Makes the piece of order b at atom q, inside free atoms, live (the block's first atom when
 * `head`): the free block that holds it is split down to it, the other halves listed. */
void clrun__buddy_carve_piece(buddy_chunk *c, uint32_t q, unsigned b, bool head)
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
    c->ctrl[q] = (uint8_t)(head ? CTRL_LIVE | b : 0);
}


/* Takes the first free block of order j of chunk c and splits it down to order k. */
uint32_t clrun__buddy_split_from(buddy_chunk *c, unsigned j, unsigned k)
{
    uint32_t i = c->head[j];
    list_unlink(c, i, j);
    while (j > k) { /* keep the lower half, list the upper one */
        j--;
        list_push(c, i + (UINT32_C(1) << j), j);
    }
    return i;
}

