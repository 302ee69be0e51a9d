/* clrun strategies: the page-run allocator beneath slab (strategies/slab.c). Every page of a
 * chunk belongs to exactly one run of contiguous pages: free, one large block, a slab, or a
 * freed large block held back unmerged. Free runs are coalesced with their neighbours when a run
 * is returned (boundary tags: the chunk's page map names the run at its first and last page, at
 * every page of a slab) and are kept in 64 lists by floor(log2(pages)); a search is first fit
 * from the smallest list that can hold the request. Each chunk holds back its most recently
 * freed large run, so that a large alloc/free pair of one size is O(1).
 *
 * Complexity: find O(r) over the free runs r of the lists searched; carve, release and the
 * held-back runs O(1) (a slab's release writes its n pages' map entries, O(n)). */
#ifndef CLRUN_STRATEGIES_PAGE_RUNS_H
#define CLRUN_STRATEGIES_PAGE_RUNS_H

#include <stdbool.h>
#include <stdint.h>

#define SLAB_BINS 64u                        /* free-run lists by floor(log2(pages)) */
#define SLAB_SPARE_MAX 256u                  /* plain run nodes kept for reuse */

enum run_kind { RUN_FREE, RUN_LARGE, RUN_SLAB, RUN_HELD };

typedef struct slab_chunk slab_chunk;

/* A run of pages: free, one large block, a slab, or a freed large block held back unmerged. */
typedef struct run {
    slab_chunk *chunk;   /* the chunk it lies in */
    uint64_t first;      /* its first page */
    uint64_t pages;      /* its length in pages */
    struct run *next;    /* free: next in its size list; slab: next partly used slab; held:
                          * next held-back run */
    struct run *prev;    /* the previous one in the same list */
    uint8_t kind;        /* enum run_kind */
    bool in_partial;     /* slab: on its class's list of partly used slabs */
    uint16_t cls;        /* slab: its size class */
    uint32_t nwords;     /* bitmap words allocated with this node (0: a plain node) */
    uint32_t slots;      /* slab: slots it holds */
    uint32_t free_slots; /* slab: slots not in use */
    uint64_t summary;    /* slab: bit w set when words[w] has a free slot */
    uint64_t words[];    /* slab: bit i of the bitmap set when slot i is free */
} run;

/* One chunk. */
struct slab_chunk {
    uint32_t id;         /* the pool's id for it */
    uint64_t size;       /* bytes the pool gave us */
    uint64_t pages;      /* whole pages in it */
    uint64_t live;       /* live blocks inside */
    run *held;           /* its held-back freed large run (kind RUN_HELD), or NULL */
    run **map;           /* map[p]: the run at page p (every page of a slab; first and last
                          * page of other runs; NULL elsewhere) */
};

/* The free runs, held-back runs and spare nodes of every chunk of one slab allocator. */
typedef struct page_runs {
    run *bins[SLAB_BINS];                  /* free runs by floor(log2(pages)) */
    uint64_t bin_mask;                     /* bit b set: bins[b] is not empty */
    run *held;                             /* held-back runs of every chunk, newest first */
    run *spare;                            /* plain run nodes kept for reuse (linked by next) */
    uint32_t nspare;                       /* nodes on spare */
} page_runs;

/* A node without a bitmap, or NULL when host memory runs out; recycles a node. */
run *clrun__runs_node(page_runs *s);
void clrun__runs_node_drop(page_runs *s, run *r);

/* Records r (its chunk set) as free over [first, first + pages): boundary tags and its list. */
void clrun__runs_set_free(page_runs *s, run *r, uint64_t first, uint64_t pages);
/* Takes free run r off its list (its boundary tags stay). */
void clrun__runs_unlink_free(page_runs *s, run *r);

/* The first free run that holds `pages` pages aligned to `align` pages, or NULL; *start gets
 * where the block would begin. */
run *clrun__runs_find(const page_runs *s, uint64_t pages, uint64_t align, uint64_t *start);

/* Cuts [start, start + pages) out of free run r and gives it to `to` (which gets chunk, first
 * and pages); what is left of r on either side stays free. r itself and `extra` (a plain node)
 * become those leftovers; whichever is not needed is recycled. */
void clrun__runs_carve(page_runs *s, run *r, uint64_t start, uint64_t pages, run *to, run *extra);

/* Returns the pages of run r (a large block or an empty slab) to the free runs, merging with
 * free neighbours. Reuses r as the free run's node, so it never needs host memory. */
void clrun__runs_release(page_runs *s, run *r);

/* Holds back large run r, just freed, unmerged; the run its chunk held before is merged. */
void clrun__runs_hold(page_runs *s, run *r);
/* Takes held run r off the held list (to reuse it as it is). */
void clrun__runs_held_unlink(page_runs *s, run *r);
/* Merges the held-back runs (of chunk `only`, or of all chunks when NULL); true when there was
 * one. */
bool clrun__runs_release_held(page_runs *s, const slab_chunk *only);
/* Pages of held run r once merged with its free neighbours, as a release would make it. */
uint64_t clrun__runs_held_merged_pages(const run *r);

#endif
