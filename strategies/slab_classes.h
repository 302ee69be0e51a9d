/* The size classes of strategy "slab" (slab.c): which class a request takes, and the geometry
 * of each class's slabs (pages, slots, alignment), computed once from the granule, the page and
 * the largest chunk. Pure arithmetic over a table; slab.c owns everything that moves. */
#ifndef CLRUN_STRATEGIES_SLAB_CLASSES_H
#define CLRUN_STRATEGIES_SLAB_CLASSES_H

#include <stdint.h>

#include "chunk_index.h"

#define SLAB_LARGEST_PAGES 8u /* classes up to 8 pages; above, page runs */
#define SLAB_MAX_CLASSES 128u /* 8 + 8 per doubling from 8g to 8P: 104 at most */
#define SLAB_MIN_SLOTS 4u     /* a slab holds at least this many slots */
#define SLAB_MAX_SLOTS 4096u  /* 64 bitmap words under one summary word */

typedef struct slab_classes {
    unsigned granule_log;                    /* log2 of the granule g, the smallest class */
    uint32_t count;                          /* classes in use (fewer when chunks are small) */
    uint64_t size[SLAB_MAX_CLASSES];         /* bytes of a slot of each class */
    uint64_t pages[SLAB_MAX_CLASSES];        /* pages of a slab of each class */
    uint32_t slots[SLAB_MAX_CLASSES];        /* slots in a slab of each class */
    uint64_t align_pages[SLAB_MAX_CLASSES];  /* slab start alignment, keeps slots aligned */
    uint64_t inverse[SLAB_MAX_CLASSES];      /* floor(2^64 / size) + 1, or 0: divide instead */
} slab_classes;

/* Fills the table for granule 2^granule_log, pages of 2^page_log bytes and chunks of at most
 * max_pages pages: g, 2g, ..., 8g, then 8 classes per power of two, up to SLAB_LARGEST_PAGES
 * pages. Each slab takes the fewest pages holding SLAB_MIN_SLOTS slots, or up to twice that
 * where it cuts the unusable tail to 1/32. */
void slab_classes_build(slab_classes *c, unsigned granule_log, unsigned page_log, uint64_t max_pages);

/* The class for `size` bytes at alignment `align` (a power of two), or -1 when it takes the
 * large path. O(1) except for an alignment above the granule, which may skip classes. */
static inline int slab_class_for(const slab_classes *c, uint64_t size, uint64_t align)
{
    if (align > size)
        size = align; /* a class that is a multiple of align is at least align */
    if (size > c->size[c->count - 1])
        return -1;
    uint64_t u = (size + (UINT64_C(1) << c->granule_log) - 1) >> c->granule_log;
    unsigned k;
    if (u <= 8) {
        k = (unsigned)u - 1;
    } else {
        unsigned b = log2_floor_u64(u - 1);
        unsigned step_log = b - 3;
        k = 8 * (b - 2) + (unsigned)((u + (UINT64_C(1) << step_log) - 1) >> step_log) - 9;
    }
    while (k < c->count && (c->size[k] & (align - 1)))
        k++; /* a slot offset is a multiple of its class size, so the class must be aligned */
    return k < c->count ? (int)k : -1;
}

/* rel / size[cls], by a multiplication when the class allows it. */
static inline uint64_t slab_slot_of(const slab_classes *c, unsigned cls, uint64_t rel)
{
#ifdef __SIZEOF_INT128__
    if (c->inverse[cls])
        return (uint64_t)(((unsigned __int128)rel * c->inverse[cls]) >> 64);
#endif
    return rel / c->size[cls];
}

#endif
