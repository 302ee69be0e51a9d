/* The size-class table of strategy "slab" (slab_classes.h). */
#include "slab_classes.h"

/* The fewest pages holding SLAB_MIN_SLOTS slots of `size` bytes, then up to twice that if it
 * cuts the tail to 1/32 of the slab (else the smallest tail fraction found). */
static uint64_t slab_pages(uint64_t size, unsigned page_log)
{
    uint64_t page = UINT64_C(1) << page_log;
    uint64_t min_pages = (SLAB_MIN_SLOTS * size + page - 1) >> page_log;
    uint64_t best = min_pages, best_tail = UINT64_MAX;
    for (uint64_t n = min_pages; n <= 2 * min_pages; n++) {
        uint64_t bytes = n << page_log;
        uint64_t tail = bytes % size;
        if (best_tail == UINT64_MAX || tail * best < best_tail * n) {
            best = n; /* the smallest tail fraction so far */
            best_tail = tail;
        }
        if (tail * 32 <= bytes)
            break;
    }
    return best;
}

void slab_classes_build(slab_classes *c, unsigned granule_log, unsigned page_log, uint64_t max_pages)
{
    uint64_t g = UINT64_C(1) << granule_log;
    uint64_t page = UINT64_C(1) << page_log;
    uint64_t largest = (uint64_t)SLAB_LARGEST_PAGES << page_log;
    c->granule_log = granule_log;
    c->count = 0;
    for (unsigned k = 0; k < SLAB_MAX_CLASSES; k++) {
        uint64_t units = k < 8 ? k + 1 : (uint64_t)(9 + (k - 8) % 8) << ((k - 8) / 8);
        uint64_t size = units * g;
        if (size > largest)
            break;
        if (size > (UINT64_MAX - page) / (2 * SLAB_MIN_SLOTS))
            break; /* a huge min_align: leave such sizes to the large path */
        uint64_t best = slab_pages(size, page_log);
        if (best > max_pages) {
            best = max_pages; /* a small max_chunk: fewer slots per slab */
            if ((best << page_log) < size)
                break; /* not even one slot fits in a chunk: the large path takes over */
        }
        uint64_t slots = (best << page_log) / size;
        if (slots > SLAB_MAX_SLOTS)
            slots = SLAB_MAX_SLOTS;
        uint64_t natural = size & (~size + 1); /* largest power of two dividing the size */
        c->size[k] = size;
        c->pages[k] = best;
        c->slots[k] = (uint32_t)slots;
        c->align_pages[k] = natural > page ? natural >> page_log : 1;
        /* Offset-to-slot division by multiplication is exact for offsets and sizes below
         * 2^32 (Lemire, Kaser and Kurz, "Faster remainder by direct computation", 2019). */
        c->inverse[k] = 0;
#ifdef __SIZEOF_INT128__
        if ((best << page_log) <= UINT32_MAX)
            c->inverse[k] = UINT64_MAX / size + 1;
#endif
        c->count = k + 1;
    }
}
