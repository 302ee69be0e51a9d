/* The device memory pool of a context (lib/pool.c): chunks are cl_mem buffers, blocks are
 * sub-buffers, the policy is the allocator core's. */
#ifndef CLRUN_LIB_POOL_H
#define CLRUN_LIB_POOL_H

#include <clrun/memory.h>

struct clrun_pool;

/* Releases every chunk and block of the pool. NULL is accepted. */
void clrun__pool_destroy(struct clrun_pool *pool);

/* One entry of the allocation log: what the pool really did, for tests that check reuse from
 * the outside rather than trusting the executor's claims. */
typedef struct clrun__pool_event {
    bool is_alloc;    /* true: allocation; false: free */
    uint32_t chunk;   /* where */
    uint64_t offset;  /* of the sub-buffer in its chunk */
    uint64_t size;    /* bytes asked for */
    const char *label;/* as given at allocation (valid during the call only) */
} clrun__pool_event;

typedef void (*clrun__pool_observer)(const clrun__pool_event *event, void *user);

/* Installs (or, NULL, removes) the context's pool observer, called under the pool lock. */
clrun_status clrun__pool_observe(clrun_context *ctx, clrun__pool_observer observer, void *user);

/* True when `buffer` is a live block of ctx's pool (not freed, not a stale copy, not foreign). */
bool clrun__pool_is_live(clrun_context *ctx, const clrun_buffer *buffer);

/* The chunk buffer (not a sub-buffer) that holds `buffer`, for guard checks and tests. */
cl_mem clrun__pool_chunk_mem(clrun_context *ctx, uint32_t chunk);

#endif
