/* clrun: the statistics of a memory pool (clrun_memory_stats_get in memory.h), in a header of
 * their own so that code without OpenCL (the allocator core, trace replay) can fill them. */
#ifndef CLRUN_MEMORY_STATS_H
#define CLRUN_MEMORY_STATS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What the pool holds, as PyTorch's memory_stats and RMM's statistics adaptor report it. */
typedef struct clrun_memory_stats {
    const char *strategy;     /* "buddy", "slab" or "bump" */
    uint64_t in_use;          /* bytes of live blocks, as asked for */
    uint64_t in_use_peak;     /* highest in_use since creation or the last peak reset */
    uint64_t held;            /* bytes the strategy holds for live blocks (rounding, red zones) */
    uint64_t reserved;        /* bytes of chunks reserved from the driver: what a user pays */
    uint64_t reserved_peak;   /* highest reserved */
    uint64_t alloc_count;     /* successful allocations */
    uint64_t free_count;      /* successful frees */
    uint64_t driver_allocs;   /* chunks reserved from the driver, ever */
    uint64_t driver_frees;    /* chunks given back */
    uint32_t chunks;          /* chunks reserved now */
    uint64_t free_bytes;      /* bytes of chunks not covered by live blocks */
    uint64_t largest_free;    /* largest block that would be handed out without growing */
    double fragmentation;     /* 1 - largest_free / free_bytes (0 when nothing is free) */
    uint64_t limit;           /* bytes the pool may reserve (CLRUN_POOL_LIMIT, CLRUN_MEM_FRACTION) */
} clrun_memory_stats;

#ifdef __cplusplus
}
#endif
#endif
