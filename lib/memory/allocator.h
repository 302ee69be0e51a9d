/* The allocator core: a strategy plus the pool's policy, with no OpenCL in it. It decides when
 * to reserve a chunk and how large, enforces the limit, gives back empty chunks on exhaustion and
 * keeps the statistics. What a chunk *is* belongs to the backing: device buffers in lib/memory/pool.c,
 * nothing at all in `clrun replay`'s simulation. Not thread-safe: the pool holds its lock. */
#ifndef CLRUN_LIB_ALLOCATOR_H
#define CLRUN_LIB_ALLOCATOR_H

#include <stddef.h>

#include <clrun/memory_stats.h>
#include <clrun/strategy.h>

/* Where chunks come from. */
typedef struct clrun__backing {
    void *user;
    /* Reserves chunk `chunk` of `size` bytes; on failure writes why into err and returns
     * CLRUN_ERROR_OUT_OF_MEMORY (driver refused) or another status. */
    clrun_status (*reserve)(void *user, uint32_t chunk, uint64_t size, char *err, size_t errlen);
    /* Gives chunk `chunk` back. */
    void (*release)(void *user, uint32_t chunk);
} clrun__backing;

/* What a pool reserves and uses in all, held to one limit: the strategy's chunks and whatever
 * else the pool reserves beside them (a resident region, buffers of their own). The allocator
 * core and the pool share it; the pool's lock guards both. */
typedef struct clrun__account {
    uint64_t limit;         /* most bytes to reserve in all; 0 = no limit */
    uint64_t reserved;      /* bytes reserved from the driver now */
    uint64_t reserved_peak; /* highest reserved since creation or the last peak reset */
    uint64_t in_use;        /* bytes of live blocks, as asked for */
    uint64_t in_use_peak;   /* highest in_use */
} clrun__account;

/* Bytes the limit still allows to reserve (UINT64_MAX without a limit). */
uint64_t clrun__account_room(const clrun__account *a);

/* Counts `reserve` more bytes reserved and `use` more in use; false, with nothing counted, when
 * the reservation would pass the limit. */
bool clrun__account_charge(clrun__account *a, uint64_t reserve, uint64_t use);

/* Counts them back. */
void clrun__account_discharge(clrun__account *a, uint64_t reserve, uint64_t use);

typedef struct clrun__allocator_config {
    const clrun_strategy_ops *ops; /* the strategy */
    uint64_t min_align;             /* device base-address alignment, power of two */
    uint64_t max_chunk;             /* device maximum allocation */
    uint64_t limit;                 /* most bytes to reserve in all; 0 = no limit (without account) */
    clrun__account *account;        /* shared with the pool, its limit used; NULL: one of its own */
    bool previous_growth;           /* the rule before issue 12, max(request, reserved / 2, 1 MiB)
                                     * and no giving back, kept only so that bench_replay measures
                                     * the present rule against it in one run */
    uint64_t min_chunk;             /* smallest chunk worth reserving; 0 = 16 KiB; = max_chunk:
                                     * every chunk that size */
    clrun__backing backing;
} clrun__allocator_config;

typedef struct clrun__allocator clrun__allocator;

/* A new allocator with no chunks. Errors from the strategy's create. */
clrun_status clrun__allocator_create(const clrun__allocator_config *config, clrun__allocator **out,
                                     char *err, size_t errlen);

/* Releases every chunk through the backing, then the strategy. NULL is accepted. */
void clrun__allocator_destroy(clrun__allocator *a);

/* A block for `size` bytes at alignment `align` (0 = min_align), reserving a chunk when the
 * strategy has no room: first a new chunk sized with demand, then, if the limit or the driver
 * refuses, after giving back empty chunks, once more. CLRUN_ERROR_OUT_OF_MEMORY with a message
 * saying what was asked, in use, reserved, the largest free block, the limit and the strategy. */
clrun_status clrun__allocator_alloc(clrun__allocator *a, uint64_t size, uint64_t align,
                                    clrun_block *out, char *err, size_t errlen);

/* The same, counting `charged` bytes (<= size) as in use: the pool in guard mode asks for the
 * red zones too, but only the caller's bytes are in use. */
clrun_status clrun__allocator_alloc_charged(clrun__allocator *a, uint64_t size, uint64_t align,
                                            uint64_t charged, clrun_block *out, char *err,
                                            size_t errlen);

/* Frees the block at (chunk, offset); `size` is what its allocation counted as in use. */
clrun_status clrun__allocator_free(clrun__allocator *a, uint32_t chunk, uint64_t offset,
                                   uint64_t size, char *err, size_t errlen);

/* Gives every empty chunk back; returns the bytes released. */
uint64_t clrun__allocator_trim(clrun__allocator *a);

/* Forgets every live block (the strategy's reset); chunks stay. */
void clrun__allocator_reset(clrun__allocator *a);

/* Reserves chunks until `bytes` are reserved (or the limit); for CLRUN_PREALLOCATE. */
clrun_status clrun__allocator_preallocate(clrun__allocator *a, uint64_t bytes, char *err,
                                          size_t errlen);

/* Statistics; `strategy` points at the strategy's name. in_use, reserved, their peaks and the
 * limit are the account's (everything the pool holds, when it is shared); the rest is the
 * strategy's chunks'. */
void clrun__allocator_stats(const clrun__allocator *a, clrun_memory_stats *out);
void clrun__allocator_reset_peaks(clrun__allocator *a);

/* Size of chunk `chunk` (0 when that id is not reserved). */
uint64_t clrun__allocator_chunk_size(const clrun__allocator *a, uint32_t chunk);

/* Highest chunk id in use + 1. */
uint32_t clrun__allocator_chunk_slots(const clrun__allocator *a);

#endif
