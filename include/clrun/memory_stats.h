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
    const char *strategy;     /* the strategy's name: "buddy", "slab", "bump", "tlsf" */
    uint64_t in_use;          /* bytes of live blocks, as asked for (resident and raw ones too) */
    uint64_t in_use_peak;     /* highest in_use since creation or the last peak reset */
    uint64_t held;            /* bytes held for live blocks (rounding, red zones; resident, raw) */
    uint64_t reserved;        /* bytes reserved from the driver, everything: what a user pays */
    uint64_t reserved_peak;   /* highest reserved */
    uint64_t alloc_count;     /* successful allocations (resident and raw blocks too) */
    uint64_t free_count;      /* successful frees */
    uint64_t driver_allocs;   /* driver buffers reserved, ever: chunks, resident regions, raw */
    uint64_t driver_frees;    /* and given back */
    uint32_t chunks;          /* chunks of the strategy reserved now */
    uint64_t free_bytes;      /* bytes of the strategy's chunks not covered by live blocks */
    uint64_t largest_free;    /* largest block that would be handed out without growing */
    double fragmentation;     /* 1 - largest_free / free_bytes (0 when nothing is free) */
    uint64_t limit;           /* bytes the pool may reserve (CLRUN_POOL_LIMIT, CLRUN_MEM_FRACTION) */
    uint64_t resident;        /* of reserved: the resident regions of executors' weights and
                               * constants, packed exactly */
    uint64_t raw;             /* of reserved: driver buffers of their own (naive-mode tensors,
                               * planned arenas) */
    uint64_t host;            /* not in reserved: host memory the device maps, holding state
                               * offloaded from it (a trainer's under a memory budget) */
} clrun_memory_stats;

#ifdef __cplusplus
}
#endif
#endif
