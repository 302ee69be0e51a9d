/* clrun: the allocator strategy vtable.
 *
 * A strategy is a pure offset manager: it is told about chunks (ranges of bytes [0, size) that
 * the pool reserved from the driver, named by a small integer id) and hands out blocks inside
 * them. It knows nothing of OpenCL, holds no lock (the pool serialises calls) and never grows the
 * pool on its own: when no chunk has room it answers CLRUN_ERROR_OUT_OF_MEMORY and the pool
 * decides whether to add a chunk and retry. Each strategy lives in one file of strategies/ and
 * exports one const table of this type. */
#ifndef CLRUN_STRATEGY_H
#define CLRUN_STRATEGY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <clrun/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Where a block lives. */
typedef struct clrun_block {
    uint32_t chunk;  /* id of the chunk that holds the block */
    uint64_t offset; /* byte offset of the block inside the chunk */
    uint64_t size;   /* bytes the strategy holds for it (>= the request: rounding included) */
} clrun_block;

/* Fixed at creation. */
typedef struct clrun_strategy_config {
    uint64_t min_align; /* power of two >= 1; every offset handed out is a multiple of it */
    uint64_t max_chunk; /* the largest chunk the pool can ever add (device max allocation) */
} clrun_strategy_config;

/* What a strategy reports of itself; the pool adds counts, peaks and reserved bytes. */
typedef struct clrun_strategy_stats {
    uint64_t held_bytes;    /* bytes covered by live blocks, rounding and padding included */
    uint64_t free_bytes;    /* bytes of all chunks that no live block covers */
    uint64_t largest_free;  /* largest block (alignment min_align) that alloc would give now */
    uint64_t live_blocks;   /* blocks allocated and not yet freed */
    uint32_t chunks;        /* chunks currently added */
} clrun_strategy_stats;

typedef struct clrun_strategy_ops {
    const char *name;        /* "buddy", "slab", "bump", "tlsf": what CLRUN_ALLOCATOR names */
    const char *description; /* one line for `clrun info` and error messages */

    /* New empty state (no chunks). CLRUN_ERROR_INVALID_ALIGNMENT for a min_align that is not a
     * power of two, CLRUN_ERROR_OUT_OF_HOST_MEMORY when host memory runs out. */
    clrun_status (*create)(const clrun_strategy_config *config, void **state);
    /* Frees the state; live blocks are forgotten. NULL is accepted. */
    void (*destroy)(void *state);

    /* The chunk size to reserve so that a request of `request` bytes at alignment `align` fits,
     * given that the pool would like `wanted` (>= request) bytes. The answer is <= max_chunk and
     * >= request, or 0 when no chunk this strategy can use would hold the request. Buddy answers
     * a power of two; others may round to their granule. */
    uint64_t (*chunk_size)(const void *state, uint64_t request, uint64_t align, uint64_t wanted);
    /* Makes chunk `chunk` (an id not in use) of `size` bytes available. */
    clrun_status (*add_chunk)(void *state, uint32_t chunk, uint64_t size);
    /* Forgets an empty chunk; CLRUN_ERROR_BUSY when a live block is inside it,
     * CLRUN_ERROR_INVALID_ARGUMENT for an unknown id. */
    clrun_status (*remove_chunk)(void *state, uint32_t chunk);
    /* True when the chunk holds no live block (strategy-internal caches such as empty slabs do
     * not count as live). */
    bool (*chunk_is_empty)(const void *state, uint32_t chunk);

    /* A block of at least `size` bytes whose offset is a multiple of max(align, min_align).
     * Preconditions, checked once by the allocator core and only asserted by the strategies
     * (in builds without NDEBUG): size >= 1 and `align` a power of two. CLRUN_ERROR_OUT_OF_MEMORY
     * when no chunk has room (a size no chunk could hold included): nothing observable is
     * changed then; CLRUN_ERROR_OUT_OF_HOST_MEMORY when the bookkeeping cannot grow. */
    clrun_status (*alloc)(void *state, uint64_t size, uint64_t align, clrun_block *out);
    /* Returns the block that starts at (chunk, offset). CLRUN_ERROR_INVALID_FREE, with nothing
     * changed, when no live block starts there (double free, foreign or interior pointer). */
    clrun_status (*free)(void *state, uint32_t chunk, uint64_t offset);
    /* Forgets every live block at once; chunks stay. */
    void (*reset)(void *state);
    /* Fills *out. */
    void (*stats)(const void *state, clrun_strategy_stats *out);
} clrun_strategy_ops;

/* The strategies shipped with clrun. */
extern const clrun_strategy_ops clrun_strategy_buddy;
extern const clrun_strategy_ops clrun_strategy_slab;
extern const clrun_strategy_ops clrun_strategy_bump;
extern const clrun_strategy_ops clrun_strategy_tlsf;

/* The strategy called `name` ("buddy", "slab", "bump", "tlsf"; any case), or NULL. */
const clrun_strategy_ops *clrun_strategy_find(const char *name);

/* The shipped strategies: how many, and the i-th (NULL past the end), in the order
 * clrun_strategy_names() lists them. */
size_t clrun_strategy_count(void);
const clrun_strategy_ops *clrun_strategy_at(size_t i);

/* The strategy a pool uses when none is named. */
const clrun_strategy_ops *clrun_strategy_default(void);

/* The names of every shipped strategy separated by '|' ("buddy|slab|bump|tlsf"), for messages. */
const char *clrun_strategy_names(void);

#ifdef __cplusplus
}
#endif
#endif
