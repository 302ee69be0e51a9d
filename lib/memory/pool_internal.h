/* What the parts of the device pool share (lib/memory/pool*.c): its state, one record per block,
 * and the helpers that run under its lock. Nothing here is for other areas: they use pool.h. */
#ifndef CLRUN_LIB_MEMORY_POOL_INTERNAL_H
#define CLRUN_LIB_MEMORY_POOL_INTERNAL_H

#include <pthread.h>

#include "memory/allocator.h"
#include "memory/pool.h"
#include "device/cl.h"
#include "device/context.h"

#define CLRUN__POOL_LABEL_MAX 64
#define CLRUN__POOL_NO_REGION UINT32_MAX /* block_record.region of a block in a strategy chunk */
#define CLRUN__POOL_REGION_BIT UINT32_C(0x80000000) /* in the chunk ids of resident regions' blocks */

typedef struct block_record {
    bool live;              /* the slot holds a live block */
    uint32_t generation;    /* bumped at every free */
    uint32_t chunk;         /* the block's chunk (a strategy chunk, or its resident region) */
    uint32_t region;        /* resident region index, or CLRUN__POOL_NO_REGION */
    uint64_t block_offset;  /* where the strategy's block starts (red zone included) */
    uint64_t data_offset;   /* where the sub-buffer starts (after the front red zone) */
    uint64_t front_zone;    /* guard mode: red zone bytes before the data, else 0 */
    uint64_t held;          /* bytes the block holds: red zones and rounding included */
    uint64_t size;          /* bytes asked for */
    cl_mem mem;             /* the sub-buffer */
    cl_event wait;          /* out-of-order queues: what the block's first use must wait for (the
                             * earlier owners of its bytes still running), or NULL */
    char label[CLRUN__POOL_LABEL_MAX]; /* the caller's name for it, or "" */
    clrun__block_owner owner; /* who may pass it to public calls */
    /* The last donation of this slot: a caller's handle of that generation names it. Kept
     * until the slot is donated again, so a donated handle is told apart from a freed one. */
    bool donated;
    uint32_t donated_generation;
    char donated_as[CLRUN__POOL_LABEL_MAX];
} block_record;

/* A resident region: one driver buffer reserved to measure for a batch of blocks (weights). */
typedef struct resident_region {
    cl_mem mem;             /* NULL: the entry is unused */
    uint64_t size;          /* bytes */
    uint32_t live;          /* its live blocks; the region goes back to the driver at 0 */
    bool host;              /* in host memory (clrun__pool_alloc_host): not the device's, not
                               counted against the limit */
} resident_region;

/* Bytes freed while commands that use them may still run (out-of-order queues). */
typedef struct pending_range {
    cl_mem chunk;           /* the chunk buffer that holds them */
    uint64_t offset, size;  /* the range in it */
    cl_event done;          /* complete once every command of the old owner is */
} pending_range;

struct clrun_pool {
    clrun_context *ctx;          /* owner */
    clrun__account account;      /* everything reserved and in use, and the limit */
    clrun__allocator *allocator; /* policy and strategy, over the strategy chunks */
    cl_mem *chunk_mem;           /* by chunk id; NULL where no chunk */
    uint32_t chunk_capacity;     /* entries in chunk_mem */
    block_record *records;       /* by slot */
    uint32_t record_capacity;    /* entries in records */
    uint32_t *free_slots;        /* stack of unused slot numbers */
    uint32_t free_slot_count;
    resident_region *regions;    /* resident regions by index */
    uint32_t region_count;       /* entries used or unused in regions */
    size_t region_capacity;
    uint64_t resident_bytes;     /* bytes of resident regions */
    uint64_t raw_bytes;          /* bytes of buffers of their own (clrun__pool_create_raw) */
    uint64_t host_bytes;         /* bytes of host-memory regions (clrun__pool_alloc_host) */
    uint64_t raw_count;          /* and how many */
    pending_range *pending;      /* out-of-order queues: freed ranges still in use */
    size_t pending_count, pending_capacity;
    uint64_t alignment;          /* the device's base-address alignment */
    uint64_t max_chunk;          /* its maximum allocation */
    uint64_t red_zone;           /* bytes on each side in guard mode, else 0 */
    bool out_of_order;           /* the context's queue is out of order */
    uint64_t extra_allocs;       /* resident regions and raw buffers created, ever */
    uint64_t extra_frees;        /* and released */
    uint64_t extra_blocks;       /* resident blocks and raw buffers handed out, ever */
    uint64_t extra_block_frees;  /* and given back */
    clrun__pool_observer observer;
    void *observer_user;
    pthread_mutex_t lock;        /* guards everything above */
};

/* The context's pool, created on first use. */
clrun_status clrun__pool_get(clrun_context *ctx, struct clrun_pool **out);

/* The context's pool if it exists yet, else NULL. */
struct clrun_pool *clrun__pool_existing(clrun_context *ctx);

/* A slot for a new record; UINT32_MAX when host memory runs out. */
uint32_t clrun__pool_take_slot(struct clrun_pool *pool);

/* Makes record r of `slot` (filled, with its sub-buffer) live and tells the observer. */
void clrun__pool_publish(struct clrun_pool *pool, uint32_t slot, clrun__block_owner owner, clrun_buffer *out);

/* Tells the observer. */
void clrun__pool_notify(struct clrun_pool *pool, bool is_alloc, const block_record *r);

/* True when b is the live block of its slot (not a stale copy, not foreign). */
bool clrun__pool_record_matches(const struct clrun_pool *pool, const clrun_buffer *b);

/* Frees the live block of `buffer` under the lock. */
clrun_status clrun__pool_free_locked(struct clrun_pool *pool, clrun_buffer *buffer);

/* Guard mode (pool_guard.c): paints the red zones of a new block; checks a block's zones. */
clrun_status clrun__pool_paint_red_zones(struct clrun_pool *pool, const block_record *r);
clrun_status clrun__pool_check_block(struct clrun_pool *pool, uint32_t slot);
/* Fills `size` bytes of the record's chunk at `offset` with `byte` (poisoning a freed block). */
cl_int clrun__pool_fill(struct clrun_pool *pool, const block_record *r, uint64_t offset, uint64_t size,
                        unsigned char byte);

/* The buffer that holds a record's bytes: its strategy chunk or its resident region. */
cl_mem clrun__pool_record_chunk(const struct clrun_pool *pool, const block_record *r);

/* Resident regions (pool_resident.c): a freed resident block; the region goes back at 0. */
void clrun__pool_resident_release(struct clrun_pool *pool, block_record *r);
/* Releases every region, on destroy. */
void clrun__pool_resident_destroy(struct clrun_pool *pool);

/* Stream-ordered reuse (pool_pending.c): the event the new block r must wait for, from the
 * pending ranges it overlaps (completed ones are dropped); remembers the range of a block freed
 * after `events`; releases everything, on destroy. */
clrun_status clrun__pool_pending_wait_for(struct clrun_pool *pool, block_record *r);
clrun_status clrun__pool_pending_add(struct clrun_pool *pool, const block_record *r, cl_uint count,
                                     const cl_event *events);
void clrun__pool_pending_destroy(struct clrun_pool *pool);

/* Appends, to the out-of-memory message `err`, the largest live blocks with their owners and
 * the free bytes that could not serve the request. */
void clrun__pool_describe_holders(const struct clrun_pool *pool, char *err, size_t errlen);

#endif
