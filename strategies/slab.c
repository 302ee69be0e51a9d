/* clrun strategy "slab": size classes carved from slabs, and a page-run allocator beneath.
 *
 * Algorithm. Each chunk is cut into pages of P = max(4 KiB, min_align) bytes (bytes past the
 * last whole page are never handed out). Every page belongs to exactly one run of contiguous
 * pages, which is free, a large block, or a slab:
 *  - Requests up to 8P (32 KiB) take a slot of a size class. Classes are multiples of the
 *    granule g = max(min_align, 16): g, 2g, ..., 8g, then 8 steps per power of two (9g, 10g,
 *    ..., 16g, 18g, 20g, ..., 32g, 36g, ...). A slab is a run of n pages cut into equal slots
 *    of one class, n chosen so that it holds at least 4 slots and its unusable tail is small.
 *    Free slots are bits of a two-level bitmap (at most 4096 slots: one summary word over at
 *    most 64 words), so taking and returning a slot is O(1). Each class keeps a list of partly
 *    used slabs and caches at most one empty slab, so that an alloc/free pair does not build
 *    and tear down a slab each time; any further slab that becomes empty returns to its
 *    chunk's free pages at once.
 *  - Larger requests take a run of whole pages (a "large" block). 8P is where classes stop
 *    paying: above it, rounding to a page wastes at most 1/8 of the request, as a class does.
 *    A small request whose slab cannot be placed (a chunk smaller than the slab) also takes a
 *    run of pages when rounding to pages wastes at most 1/8 of it.
 * The page runs beneath (strategies/page_runs.c) coalesce free runs with their neighbours,
 * search first fit in 64 lists by floor(log2(pages)), and hold back each chunk's most recently
 * freed large run unmerged, as buddy does: a large request of exactly its page count and
 * alignment takes it back in O(1). When no run fits, the held-back runs are merged and the
 * search repeated, then the cached empty slabs are returned and the search repeated again, so
 * an OUT_OF_MEMORY answer may still have merged those (no block and no count changes; only
 * largest_free may grow). Stats count a held run as merged, and reset forgets it.
 *
 * Finding the slab of an offset is O(1): each chunk has a page map (one pointer per page) that
 * names the run at every page of a slab and at the first and last page of other runs, so
 * free(chunk, offset) reads map[offset / P] and checks that the offset is a slot start in use
 * (or the first byte of a large run); anything else is an invalid free.
 *
 * Complexity. Small alloc and free: O(1), plus O(log c) to find the chunk of a free (c chunks),
 * except when a slab is made or returned: then a run allocation and O(n) page-map writes.
 * Large alloc: O(h) over the held-back runs h (at most one per chunk, newest first), then,
 * unless one is taken back, O(r) over the free runs r in the lists searched (first fit); large
 * free: O(1) merges (of the run held before). stats: O(h) plus the largest size list. Host
 * memory: 8 bytes per page of every chunk (1/512 of its size), 80 bytes per run, plus at most
 * 512 bytes of bitmap per slab.
 *
 * Worst-case waste. Internal: above 8g a class wastes less than 1/9 of its size (at most 1/8
 * of the request); below 8g, less than g. A slab's tail is at most 1/32 of it when such an n
 * exists within twice the smallest, else the smallest tail found. A large block wastes less
 * than P, at most 1/8 of the request. External: a slab's free slots serve only its class and
 * one empty slab per class is kept; page runs fragment like any first-fit allocator, with no
 * bound better than Robson's.
 */
#include <clrun/strategy.h>

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "chunk_index.h"
#include "page_runs.h"
#include "slab_classes.h"

#define SLAB_PAGE_MIN (UINT64_C(4) << 10)    /* smallest page: 4 KiB (64 KiB made a 1 MiB
                                              * workload reserve 2-8x: a slab per class) */
#define SLAB_GRANULE_MIN 16u                 /* smallest class, whatever min_align is */

/* The whole state of one slab allocator. */
typedef struct slab_state {
    uint64_t max_chunk;                    /* the largest chunk the pool can add */
    unsigned page_log;                     /* log2 of the page size P */
    unsigned granule_log;                  /* log2 of the granule g, the smallest class */
    uint64_t max_pages;                    /* whole pages in the largest possible chunk */
    slab_classes classes;                  /* the size classes and their slabs' geometry */
    run *partial[SLAB_MAX_CLASSES];        /* partly used slabs of each class */
    run *empty[SLAB_MAX_CLASSES];          /* one cached empty slab of each class (still on
                                            * its partial list), or NULL */
    page_runs runs;                        /* the page runs of every chunk, beneath the slabs */
    chunk_index chunks;                    /* chunk id -> slab_chunk */
    uint64_t total_bytes;                  /* sum of the sizes of all chunks */
    uint64_t held_bytes;                   /* sum of the sizes of live blocks */
    uint64_t live_blocks;                  /* blocks allocated and not freed */
} slab_state;

/* ---- slabs ---------------------------------------------------------------------------------- */

static void partial_push(slab_state *s, run *r)
{
    assert(r->kind == RUN_SLAB && !r->in_partial && r->free_slots > 0);
    r->prev = NULL;
    r->next = s->partial[r->cls];
    if (r->next)
        r->next->prev = r;
    s->partial[r->cls] = r;
    r->in_partial = true;
}

static void partial_unlink(slab_state *s, run *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else
        s->partial[r->cls] = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->in_partial = false;
}

/* Marks every slot of slab r free. */
static void slab_fill_bitmap(run *r)
{
    uint32_t full_words = r->slots / 64, rest = r->slots % 64;
    for (uint32_t w = 0; w < full_words; w++)
        r->words[w] = ~UINT64_C(0);
    if (rest)
        r->words[full_words] = (UINT64_C(1) << rest) - 1;
    uint32_t used_words = full_words + (rest != 0);
    r->summary = used_words == 64 ? ~UINT64_C(0) : (UINT64_C(1) << used_words) - 1;
    r->free_slots = r->slots;
}

/* Gives every cached empty slab back to the free runs; true when there was one. */
static bool release_cached_slabs(slab_state *s, const slab_chunk *only)
{
    bool any = false;
    for (unsigned k = 0; k < s->classes.count; k++) {
        run *r = s->empty[k];
        if (r && (!only || r->chunk == only)) {
            s->empty[k] = NULL;
            if (r->in_partial)
                partial_unlink(s, r);
            clrun__runs_release(&s->runs, r);
            any = true;
        }
    }
    return any;
}

/* The first free run that holds `pages` pages aligned to `align` pages, or NULL. When none does
 * as things are, the held-back runs are merged and then the cached empty slabs returned, each
 * followed by a new search. */
static run *free_run_find_or_merge(slab_state *s, uint64_t pages, uint64_t align, uint64_t *start)
{
    run *fr = clrun__runs_find(&s->runs, pages, align, start);
    if (!fr && clrun__runs_release_held(&s->runs, NULL))
        fr = clrun__runs_find(&s->runs, pages, align, start);
    if (!fr && release_cached_slabs(s, NULL))
        fr = clrun__runs_find(&s->runs, pages, align, start);
    return fr;
}

/* A new empty slab of class `cls`. OUT_OF_MEMORY when no free run holds it. */
static clrun_status slab_new(slab_state *s, unsigned cls, run **out)
{
    uint64_t pages = s->classes.pages[cls], start;
    uint32_t slots = s->classes.slots[cls];
    uint32_t nwords = (slots + 63) / 64;
    run *fr = free_run_find_or_merge(s, pages, s->classes.align_pages[cls], &start);
    if (!fr)
        return CLRUN_ERROR_OUT_OF_MEMORY;
    run *r = malloc(sizeof *r + (size_t)nwords * sizeof r->words[0]);
    run *extra = clrun__runs_node(&s->runs);
    if (!r || !extra) {
        free(r);
        if (extra)
            clrun__runs_node_drop(&s->runs, extra);
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    memset(r, 0, sizeof *r);
    r->nwords = nwords;
    clrun__runs_carve(&s->runs, fr, start, pages, r, extra);
    r->kind = RUN_SLAB;
    r->cls = (uint16_t)cls;
    r->slots = slots;
    slab_fill_bitmap(r);
    for (uint64_t p = r->first; p < r->first + pages; p++)
        r->chunk->map[p] = r;
    *out = r;
    return CLRUN_OK;
}

static clrun_status alloc_small(slab_state *s, unsigned cls, clrun_block *out)
{
    run *r = s->partial[cls];
    if (!r) {
        clrun_status rc = slab_new(s, cls, &r);
        if (rc != CLRUN_OK)
            return rc;
        partial_push(s, r);
    }
    if (s->empty[cls] == r)
        s->empty[cls] = NULL; /* the cached empty slab is in use again */
    assert(r->free_slots > 0 && r->summary != 0); /* a partly used slab has a free slot */
    unsigned w = (unsigned)__builtin_ctzll(r->summary);
    assert(r->words[w] != 0);
    unsigned bit = (unsigned)__builtin_ctzll(r->words[w]);
    r->words[w] &= r->words[w] - 1;
    if (!r->words[w])
        r->summary &= ~(UINT64_C(1) << w);
    if (--r->free_slots == 0)
        partial_unlink(s, r);
    r->chunk->live++;

    uint64_t size = s->classes.size[cls];
    s->held_bytes += size;
    s->live_blocks++;
    out->chunk = r->chunk->id;
    out->offset = (r->first << s->page_log) + ((uint64_t)w * 64 + bit) * size;
    out->size = size;
    return CLRUN_OK;
}

/* Counts large run r (already recorded in its page map) as live and describes it in *out. */
static clrun_status take_large(slab_state *s, run *r, clrun_block *out)
{
    uint64_t bytes = r->pages << s->page_log;
    r->chunk->live++;
    s->held_bytes += bytes;
    s->live_blocks++;
    out->chunk = r->chunk->id;
    out->offset = r->first << s->page_log;
    out->size = bytes;
    return CLRUN_OK;
}

static clrun_status alloc_large(slab_state *s, uint64_t size, uint64_t align, clrun_block *out)
{
    /* A held-back run of exactly this size is taken back as it is; else first fit in the size
     * lists, merging held-back runs and cached empty slabs if nothing fits. */
    uint64_t page = UINT64_C(1) << s->page_log;
    uint64_t bytes = round_up_u64(size, page);
    if (bytes == 0)
        return CLRUN_ERROR_OUT_OF_MEMORY;
    uint64_t pages = bytes >> s->page_log;
    uint64_t align_pages = align > page ? align >> s->page_log : 1;
    for (run *h = s->runs.held; h; h = h->next) {
        if (h->pages == pages && (h->first & (align_pages - 1)) == 0) {
            clrun__runs_held_unlink(&s->runs, h);
            h->kind = RUN_LARGE; /* its page map entries are already in place */
            return take_large(s, h, out);
        }
    }
    uint64_t start;
    run *fr = free_run_find_or_merge(s, pages, align_pages, &start);
    if (!fr)
        return CLRUN_ERROR_OUT_OF_MEMORY;
    run *r = clrun__runs_node(&s->runs), *extra = clrun__runs_node(&s->runs);
    if (!r || !extra) {
        if (r)
            clrun__runs_node_drop(&s->runs, r);
        if (extra)
            clrun__runs_node_drop(&s->runs, extra);
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    clrun__runs_carve(&s->runs, fr, start, pages, r, extra);
    r->kind = RUN_LARGE;
    r->chunk->map[r->first] = r;
    r->chunk->map[r->first + pages - 1] = r;
    return take_large(s, r, out);
}

/* ---- chunks --------------------------------------------------------------------------------- */

static void chunk_free_memory(slab_chunk *c)
{
    free(c->map);
    free(c);
}

/* Recycles every run node of chunk c but the first, which is returned in *keep (NULL when the
 * chunk has no page); the page map is left stale. */
static void chunk_drop_runs(slab_state *s, slab_chunk *c, run **keep)
{
    uint64_t p = 0;
    *keep = NULL;
    while (p < c->pages) {
        run *r = c->map[p];
        p = r->first + r->pages;
        if (!*keep)
            *keep = r;
        else
            clrun__runs_node_drop(&s->runs, r);
    }
}

/* ---- the vtable ----------------------------------------------------------------------------- */

static clrun_status slab_create(const clrun_strategy_config *config, void **state)
{
    assert(config && state);
    if (!is_pow2_u64(config->min_align))
        return CLRUN_ERROR_INVALID_ALIGNMENT;
    slab_state *s = calloc(1, sizeof *s);
    if (!s)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    uint64_t page = config->min_align > SLAB_PAGE_MIN ? config->min_align : SLAB_PAGE_MIN;
    uint64_t granule = config->min_align > SLAB_GRANULE_MIN ? config->min_align : SLAB_GRANULE_MIN;
    s->max_chunk = config->max_chunk;
    s->page_log = log2_floor_u64(page);
    s->granule_log = log2_floor_u64(granule);
    s->max_pages = config->max_chunk >> s->page_log;
    slab_classes_build(&s->classes, s->granule_log, s->page_log, s->max_pages);
    *state = s;
    return CLRUN_OK;
}

static void slab_destroy(void *state)
{
    slab_state *s = state;
    if (!s)
        return;
    for (uint32_t n = 0; n < s->chunks.count; n++) {
        slab_chunk *c = s->chunks.items[n];
        run *keep;
        chunk_drop_runs(s, c, &keep);
        if (keep)
            free(keep);
        chunk_free_memory(c);
    }
    while (s->runs.spare) {
        run *r = s->runs.spare;
        s->runs.spare = r->next;
        free(r);
    }
    chunk_index_release(&s->chunks);
    free(s);
}

static uint64_t slab_chunk_size(const void *state, uint64_t request, uint64_t align,
                                uint64_t wanted)
{
    const slab_state *s = state;
    uint64_t page = UINT64_C(1) << s->page_log;
    uint64_t cap = s->max_pages << s->page_log;
    if (request == 0 || cap == 0)
        return 0;
    uint64_t need;
    int cls = s->classes.count ? slab_class_for(&s->classes, request, align) : -1;
    if (cls >= 0)
        need = s->classes.pages[cls] << s->page_log; /* room for a whole slab */
    else
        need = round_up_u64(request, page);
    if (need == 0 || need > cap)
        return 0;
    if (wanted > need) {
        uint64_t w = round_up_u64(wanted, page);
        need = (w == 0 || w > cap) ? cap : w;
    }
    return need;
}

static clrun_status slab_add_chunk(void *state, uint32_t chunk, uint64_t size)
{
    slab_state *s = state;
    if (size == 0)
        return CLRUN_ERROR_INVALID_SIZE;
    if (chunk_index_find(&s->chunks, chunk))
        return CLRUN_ERROR_INVALID_ARGUMENT;
    if (s->total_bytes > UINT64_MAX - size)
        return CLRUN_ERROR_INVALID_SIZE;
    uint64_t pages = size >> s->page_log;
    if (pages > SIZE_MAX / sizeof(run *))
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    if (chunk_index_reserve(&s->chunks) != 0)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    slab_chunk *c = calloc(1, sizeof *c);
    run *r = pages ? clrun__runs_node(&s->runs) : NULL;
    run **map = pages ? calloc((size_t)pages, sizeof *map) : NULL;
    if (!c || (pages && (!r || !map))) {
        free(c);
        free(map);
        if (r)
            clrun__runs_node_drop(&s->runs, r);
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    c->id = chunk;
    c->size = size;
    c->pages = pages;
    c->map = map;
    if (r) {
        r->chunk = c;
        clrun__runs_set_free(&s->runs, r, 0, pages);
    }
    chunk_index_insert(&s->chunks, chunk, c);
    s->total_bytes += size;
    return CLRUN_OK;
}

static clrun_status slab_remove_chunk(void *state, uint32_t chunk)
{
    slab_state *s = state;
    slab_chunk *c = chunk_index_find(&s->chunks, chunk);
    if (!c)
        return CLRUN_ERROR_INVALID_ARGUMENT;
    if (c->live)
        return CLRUN_ERROR_BUSY;
    release_cached_slabs(s, c);
    clrun__runs_release_held(&s->runs, c);
    if (c->pages) { /* no live block, cached slab or held run: one free run covers the chunk */
        run *r = c->map[0];
        clrun__runs_unlink_free(&s->runs, r);
        clrun__runs_node_drop(&s->runs, r);
    }
    s->total_bytes -= c->size;
    chunk_index_erase(&s->chunks, chunk);
    chunk_free_memory(c);
    return CLRUN_OK;
}

/* An unknown chunk holds no live block, so it answers true. */
static bool slab_chunk_is_empty(const void *state, uint32_t chunk)
{
    const slab_chunk *c = chunk_index_find(&((const slab_state *)state)->chunks, chunk);
    return !c || c->live == 0;
}

static clrun_status slab_alloc(void *state, uint64_t size, uint64_t align, clrun_block *out)
{
    slab_state *s = state;
    assert(size >= 1 && is_pow2_u64(align)); /* checked by the allocator core */
    int cls = s->classes.count ? slab_class_for(&s->classes, size, align) : -1;
    if (cls < 0)
        return alloc_large(s, size, align, out);
    clrun_status rc = alloc_small(s, (unsigned)cls, out);
    /* No room for a new slab (a chunk smaller than a slab, or fragmented): a run of pages does
     * as well when its rounding wastes no more than a class would (1/8 of the request). */
    if (rc == CLRUN_ERROR_OUT_OF_MEMORY) {
        uint64_t page = UINT64_C(1) << s->page_log;
        if ((round_up_u64(size, page) - size) * 8 <= size)
            rc = alloc_large(s, size, align, out);
    }
    return rc;
}

static clrun_status slab_free(void *state, uint32_t chunk, uint64_t offset)
{
    slab_state *s = state;
    slab_chunk *c = chunk_index_find(&s->chunks, chunk);
    if (!c)
        return CLRUN_ERROR_INVALID_FREE;
    uint64_t page = offset >> s->page_log;
    if (page >= c->pages || !c->map[page])
        return CLRUN_ERROR_INVALID_FREE;
    run *r = c->map[page];

    if (r->kind == RUN_LARGE) {
        if (r->first != page || (offset & ((UINT64_C(1) << s->page_log) - 1)))
            return CLRUN_ERROR_INVALID_FREE;
        s->held_bytes -= r->pages << s->page_log;
        s->live_blocks--;
        c->live--;
        /* Hold it back unmerged (merging the one held before): a request of the same size,
         * the common case, then takes it back in O(1). */
        clrun__runs_hold(&s->runs, r);
        return CLRUN_OK;
    }
    if (r->kind != RUN_SLAB)
        return CLRUN_ERROR_INVALID_FREE;

    uint64_t size = s->classes.size[r->cls];
    uint64_t rel = offset - (r->first << s->page_log);
    uint64_t slot = slab_slot_of(&s->classes, r->cls, rel);
    if (slot * size != rel || slot >= r->slots)
        return CLRUN_ERROR_INVALID_FREE;
    uint64_t bit = UINT64_C(1) << (slot % 64);
    uint64_t *word = &r->words[slot / 64];
    if (*word & bit)
        return CLRUN_ERROR_INVALID_FREE; /* already free */

    *word |= bit;
    r->summary |= UINT64_C(1) << (slot / 64);
    r->free_slots++;
    s->held_bytes -= size;
    s->live_blocks--;
    c->live--;
    if (r->free_slots == r->slots && s->empty[r->cls]) {
        /* empty, and its class already caches one: back to the free pages */
        if (r->in_partial)
            partial_unlink(s, r);
        clrun__runs_release(&s->runs, r);
        return CLRUN_OK;
    }
    if (r->free_slots == r->slots)
        s->empty[r->cls] = r; /* the class's cached empty slab; it stays on the partial list */
    if (!r->in_partial)
        partial_push(s, r); /* it was full */
    return CLRUN_OK;
}

static void slab_reset(void *state)
{
    slab_state *s = state;
    for (unsigned k = 0; k < SLAB_MAX_CLASSES; k++) {
        s->partial[k] = NULL;
        s->empty[k] = NULL;
    }
    for (unsigned b = 0; b < SLAB_BINS; b++)
        s->runs.bins[b] = NULL;
    s->runs.bin_mask = 0;
    s->runs.held = NULL;
    for (uint32_t n = 0; n < s->chunks.count; n++) {
        slab_chunk *c = s->chunks.items[n];
        run *keep;
        chunk_drop_runs(s, c, &keep);
        c->live = 0;
        c->held = NULL;
        if (!keep)
            continue;
        memset(c->map, 0, (size_t)c->pages * sizeof *c->map);
        keep->in_partial = false;
        clrun__runs_set_free(&s->runs, keep, 0, c->pages); /* keep may carry a bitmap: harmless when free */
    }
    s->held_bytes = 0;
    s->live_blocks = 0;
}

static void slab_stats(const void *state, clrun_strategy_stats *out)
{
    const slab_state *s = state;
    uint64_t largest = 0;
    if (s->runs.bin_mask) {
        unsigned b = log2_floor_u64(s->runs.bin_mask);
        for (const run *r = s->runs.bins[b]; r; r = r->next)
            if (r->pages > largest)
                largest = r->pages;
    }
    for (const run *h = s->runs.held; h; h = h->next) { /* what alloc would make of it by merging */
        uint64_t pages = clrun__runs_held_merged_pages(h);
        if (pages > largest)
            largest = pages;
    }
    largest <<= s->page_log;
    for (unsigned k = s->classes.count; k-- > 0;) {
        if (s->partial[k] || s->empty[k]) {
            if (s->classes.size[k] > largest)
                largest = s->classes.size[k];
            break;
        }
    }
    out->held_bytes = s->held_bytes;
    out->free_bytes = s->total_bytes - s->held_bytes;
    out->largest_free = largest;
    out->live_blocks = s->live_blocks;
    out->chunks = s->chunks.count;
}

const clrun_strategy_ops clrun_strategy_slab = {
    .name = "slab",
    .description = "size classes (< 1/8 waste above 8 granules) carved from slabs; page runs above 32 KiB",
    .create = slab_create,
    .destroy = slab_destroy,
    .chunk_size = slab_chunk_size,
    .add_chunk = slab_add_chunk,
    .remove_chunk = slab_remove_chunk,
    .chunk_is_empty = slab_chunk_is_empty,
    .alloc = slab_alloc,
    .free = slab_free,
    .reset = slab_reset,
    .stats = slab_stats,
};
