/* The device memory pool of a context (lib/memory/pool.c): chunks are cl_mem buffers, blocks are
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

/* Who may pass a block to the public calls (clrun_free, clrun_buffer_read/write, inputs of a
 * run): the caller's blocks, not an executor's. */
typedef enum clrun__block_owner {
    CLRUN__OWNER_CALLER = 0,   /* clrun_alloc's */
    CLRUN__OWNER_EXECUTOR = 1, /* constants, intermediates, outputs, adopted donated inputs */
} clrun__block_owner;

/* A block owned by an executor: clrun_free and clrun_pool_reset refuse it. */
clrun_status clrun__pool_alloc_owned(clrun_context *ctx, uint64_t size, uint64_t alignment,
                                     const char *label, clrun_buffer *out);
/* Frees a live block of any owner (the executor's own). */
clrun_status clrun__pool_free_owned(clrun_context *ctx, clrun_buffer *buffer);

/* Stream-ordered free, as cudaFreeAsync: frees a live block of any owner whose last commands
 * (its writer and readers, `events`) may still be running on an out-of-order queue. The pool
 * keeps the range with a marker over `events`, and every later owner of any of those bytes
 * waits for it, whoever allocates them: a block from clrun_alloc is handed out only once the
 * marker is complete (the call waits on the host); a block of an executor carries the marker,
 * which the executor takes with clrun__pool_take_wait and puts in the wait list of the first
 * command that uses the block. On an in-order queue (or with no events) this is
 * clrun__pool_free_owned: the queue orders reuse by itself. */
clrun_status clrun__pool_free_owned_after(clrun_context *ctx, clrun_buffer *buffer, cl_uint event_count,
                                          const cl_event *events);

/* The event that the first command using the executor's block `buffer` must wait for (the
 * earlier owners of its bytes, still running), or NULL: the caller owns it (release it) and the
 * block carries it no more. Only on out-of-order queues is it ever non-NULL. */
clrun_status clrun__pool_take_wait(clrun_context *ctx, const clrun_buffer *buffer, cl_event *out);

/* Weights and constants, apart from the strategy: `count` blocks of sizes[i] bytes (labels may be
 * NULL) packed one after another, each rounded only to the device alignment, in resident regions
 * (driver buffers) reserved to measure for this batch, so that a model reserves about its
 * weights whatever the strategy. The blocks are the executor's (clrun__pool_free_owned frees
 * them; a region goes back to the driver with its last block) and count against the pool's
 * limit. On failure nothing stays allocated and *out is zeroed. */
clrun_status clrun__pool_alloc_resident(clrun_context *ctx, const uint64_t *sizes, const char *const *labels,
                                        size_t count, clrun_buffer *out);

/* As clrun__pool_alloc_resident, but the caller's blocks (clrun_free frees them, a run takes
 * them as inputs and may adopt them) in host memory the device maps (CL_MEM_ALLOC_HOST_PTR):
 * kernels read and write them where they are (on a discrete device, across the bus). They are
 * not the device's: neither reserved nor in use, not held to the limit; the statistics count them
 * in `host`. */
clrun_status clrun__pool_alloc_host(clrun_context *ctx, const uint64_t *sizes, const char *const *labels,
                                    size_t count, clrun_buffer *out);
/* A driver buffer of its own of `size` bytes, counted in the pool's reserved bytes and held to
 * its limit (empty chunks of the pool are given back first when the limit would refuse it):
 * the executor's naive-mode buffers and planned arena. `label` names it in the out-of-memory
 * message. Release it with clrun__pool_release_raw. */
clrun_status clrun__pool_create_raw(clrun_context *ctx, uint64_t size, const char *label, cl_mem *out);
void clrun__pool_release_raw(clrun_context *ctx, cl_mem mem, uint64_t size);

/* A donated input taken by an executor: the caller's block, live, re-issued as the executor's
 * under a new generation into *out, so that the caller's handle is dead to every call, which
 * then fails with CLRUN_ERROR_DONATED naming `donated_as` ("input 'x'"). */
clrun_status clrun__pool_adopt(clrun_context *ctx, const clrun_buffer *given, const char *donated_as,
                               clrun_buffer *out);
/* The reverse: an executor's live block handed to the caller under a new generation. */
clrun_status clrun__pool_hand_over(clrun_context *ctx, const clrun_buffer *owned, clrun_buffer *out);

/* CLRUN_OK when `buffer` is a live block of ctx's pool that the caller owns; otherwise the
 * reason, prefixed by `what`: CLRUN_ERROR_DONATED for a donated one, else
 * CLRUN_ERROR_INVALID_ARGUMENT (freed already, an executor's, another context's, empty). */
clrun_status clrun__pool_check_caller(clrun_context *ctx, const clrun_buffer *buffer,
                                      const char *what);

/* clrun_buffer_write without the ownership check, for the executor's own blocks; and the same
 * for `bytes` bytes at `offset` in the block (blocking: host may be reused at once). */
clrun_status clrun__buffer_write_owned(clrun_context *ctx, const clrun_buffer *buffer,
                                       const void *host);
clrun_status clrun__buffer_write_range(clrun_context *ctx, const clrun_buffer *buffer,
                                       uint64_t offset, uint64_t bytes, const void *host);

/* The executor's block `buffer` mapped for writing all of it (its earlier bytes dropped, never
 * read back): *host receives where to write its buffer->size bytes, until
 * clrun__buffer_unmap_written. On a device over host memory (POCL's CPU devices) the block's
 * own memory, so that what is laid out there needs no staging copy and no write. */
clrun_status clrun__buffer_map_write(clrun_context *ctx, const clrun_buffer *buffer, void **host);
/* Ends that mapping; the bytes written are the block's once it returns CLRUN_OK. */
clrun_status clrun__buffer_unmap_written(clrun_context *ctx, const clrun_buffer *buffer, void *host);

/* True when `buffer` is a live block of ctx's pool (not freed, not a stale copy, not foreign). */
bool clrun__pool_is_live(clrun_context *ctx, const clrun_buffer *buffer);

/* The chunk buffer (not a sub-buffer) that holds a block of chunk id `chunk`: a strategy chunk,
 * or a resident or host region (guard checks, views into a donated block, tests). */
cl_mem clrun__pool_chunk_mem(clrun_context *ctx, uint32_t chunk);

#endif
