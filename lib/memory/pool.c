/* The device memory pool: the allocator core over cl_mem chunks, blocks handed out as
 * sub-buffers, one lock for every host thread of the context.
 *
 * Every live block has a record (a slot) with a generation number that the caller's
 * clrun_buffer carries; a stale or foreign clrun_buffer is recognised and refused instead of
 * freeing somebody else's block (pool_handles.c). Beside the strategy's chunks the pool keeps
 * resident regions for weights and accounts for buffers of their own (pool_resident.c), all
 * held to one limit; guard mode's red zones are in pool_guard.c, and the stream-ordered reuse
 * of out-of-order queues in pool_pending.c. */
#include "memory/pool_internal.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

#define POISON 0xFFu

/* ---- chunks: the allocator core's backing ---------------------------------------------------- */

static clrun_status reserve_chunk(void *user, uint32_t chunk, uint64_t size, char *err, size_t errlen)
{
    struct clrun_pool *pool = user;
    if (chunk >= pool->chunk_capacity) {
        uint32_t capacity = pool->chunk_capacity ? pool->chunk_capacity * 2 : 16;
        while (capacity <= chunk)
            capacity *= 2;
        cl_mem *grown = realloc(pool->chunk_mem, capacity * sizeof *grown);
        if (grown == NULL) {
            snprintf(err, errlen, "out of host memory for the chunk table");
            return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        }
        memset(grown + pool->chunk_capacity, 0, (capacity - pool->chunk_capacity) * sizeof *grown);
        pool->chunk_mem = grown;
        pool->chunk_capacity = capacity;
    }
    cl_int error = CL_SUCCESS;
    cl_mem mem = clrun__cl.CreateBuffer(pool->ctx->cl, CL_MEM_READ_WRITE, (size_t)size, NULL, &error);
    if (mem == NULL) {
        char bytes[32];
        snprintf(err, errlen, "clCreateBuffer of a %s chunk failed: %s (%d)",
                 clrun__format_bytes(size, bytes, sizeof bytes), clrun_cl_error_name(error), (int)error);
        return error == CL_OUT_OF_HOST_MEMORY ? CLRUN_ERROR_OUT_OF_HOST_MEMORY : CLRUN_ERROR_OUT_OF_MEMORY;
    }
    pool->chunk_mem[chunk] = mem;
    if (clrun__log_enabled(CLRUN_LOG_INFO)) {
        char bytes[CLRUN__BYTES_TEXT];
        clrun__log(CLRUN_LOG_INFO, "pool: reserved chunk %u of %s", chunk,
                   clrun__format_bytes(size, bytes, sizeof bytes));
    }
    return CLRUN_OK;
}

static void release_chunk(void *user, uint32_t chunk)
{
    struct clrun_pool *pool = user;
    clrun__cl.ReleaseMemObject(pool->chunk_mem[chunk]);
    pool->chunk_mem[chunk] = NULL;
    clrun__log(CLRUN_LOG_INFO, "pool: released chunk %u", chunk);
}

cl_mem clrun__pool_record_chunk(const struct clrun_pool *pool, const block_record *r)
{
    return r->region == CLRUN__POOL_NO_REGION ? pool->chunk_mem[r->chunk] : pool->regions[r->region].mem;
}

/* ---- the pool of a context -------------------------------------------------------------------- */

static void destroy_pool(struct clrun_pool *pool)
{
    for (uint32_t i = 0; i < pool->record_capacity; i++) {
        if (pool->records[i].live)
            clrun__cl.ReleaseMemObject(pool->records[i].mem);
        if (pool->records[i].wait)
            clrun__cl.ReleaseEvent(pool->records[i].wait);
    }
    clrun__pool_pending_destroy(pool);
    clrun__pool_resident_destroy(pool);
    clrun__allocator_destroy(pool->allocator);
    pthread_mutex_destroy(&pool->lock);
    free(pool->chunk_mem);
    free(pool->records);
    free(pool->free_slots);
    free(pool);
}

void clrun__pool_destroy(struct clrun_pool *pool)
{
    if (pool)
        destroy_pool(pool);
}

static clrun_status create_pool(clrun_context *ctx, struct clrun_pool **out)
{
    struct clrun_pool *pool = calloc(1, sizeof *pool);
    if (pool == NULL || pthread_mutex_init(&pool->lock, NULL) != 0) {
        free(pool);
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory creating the pool");
    }
    pool->ctx = ctx;
    clrun__pool_config pc;
    clrun__context_pool_config(ctx, &pc);
    pool->red_zone = pc.guard ? pc.alignment : 0;
    pool->alignment = pc.alignment;
    pool->max_chunk = pc.max_chunk;
    pool->out_of_order = ctx->out_of_order;
    pool->account.limit = pc.limit;
    clrun__allocator_config config = {
        .ops = pc.strategy,
        .min_align = pc.alignment,
        .max_chunk = pc.max_chunk,
        .account = &pool->account,
        .backing = {.user = pool, .reserve = reserve_chunk, .release = release_chunk},
    };
    char err[1024];
    clrun_status status = clrun__allocator_create(&config, &pool->allocator, err, sizeof err);
    if (status == CLRUN_OK && pc.preallocate)
        status = clrun__allocator_preallocate(pool->allocator, pc.limit, err, sizeof err);
    if (status != CLRUN_OK) {
        destroy_pool(pool);
        return clrun__fail(ctx, status, "%s", err);
    }
    *out = pool;
    return CLRUN_OK;
}

/* Created on first use, once: creation (which may preallocate most of the device) happens under
 * pool_init, apart from ctx->lock, under which failures are recorded. */
clrun_status clrun__pool_get(clrun_context *ctx, struct clrun_pool **out)
{
    if (ctx == NULL)
        return clrun__fail(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "NULL context");
    struct clrun_pool *pool = clrun__pool_existing(ctx);
    if (pool != NULL) {
        *out = pool;
        return CLRUN_OK;
    }
    clrun_status status = CLRUN_OK;
    pthread_mutex_lock(&ctx->pool_init);
    pool = clrun__pool_existing(ctx);
    if (pool == NULL) {
        status = create_pool(ctx, &pool);
        if (status == CLRUN_OK) {
            pthread_mutex_lock(&ctx->lock);
            ctx->pool = pool;
            ctx->pool_destroy = clrun__pool_destroy;
            pthread_mutex_unlock(&ctx->lock);
        }
    }
    pthread_mutex_unlock(&ctx->pool_init);
    *out = pool;
    return status;
}

struct clrun_pool *clrun__pool_existing(clrun_context *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    struct clrun_pool *pool = ctx->pool;
    pthread_mutex_unlock(&ctx->lock);
    return pool;
}

/* ---- records ---------------------------------------------------------------------------------- */

uint32_t clrun__pool_take_slot(struct clrun_pool *pool)
{
    if (pool->free_slot_count == 0) {
        uint32_t capacity = pool->record_capacity ? pool->record_capacity * 2 : 64;
        block_record *records = realloc(pool->records, capacity * sizeof *records);
        if (records == NULL)
            return UINT32_MAX;
        pool->records = records;
        uint32_t *slots = realloc(pool->free_slots, capacity * sizeof *slots);
        if (slots == NULL)
            return UINT32_MAX;
        pool->free_slots = slots;
        memset(records + pool->record_capacity, 0, (capacity - pool->record_capacity) * sizeof *records);
        for (uint32_t i = capacity; i > pool->record_capacity; i--)
            pool->free_slots[pool->free_slot_count++] = i - 1;
        pool->record_capacity = capacity;
    }
    return pool->free_slots[--pool->free_slot_count];
}

void clrun__pool_notify(struct clrun_pool *pool, bool is_alloc, const block_record *r)
{
    if (pool->observer) {
        clrun__pool_event e = {is_alloc, r->chunk, r->data_offset, r->size, r->label};
        pool->observer(&e, pool->observer_user);
    }
}

void clrun__pool_publish(struct clrun_pool *pool, uint32_t slot, clrun__block_owner owner, clrun_buffer *out)
{
    block_record *r = &pool->records[slot];
    assert(!r->live && r->mem != NULL);
    r->live = true;
    r->owner = owner;
    clrun__pool_notify(pool, true, r);
    if (clrun__log_enabled(CLRUN_LOG_DEBUG)) {
        char bytes[CLRUN__BYTES_TEXT];
        clrun__log(CLRUN_LOG_DEBUG, "alloc '%s': %s at chunk %u offset %llu (slot %u)", r->label,
                   clrun__format_bytes(r->size, bytes, sizeof bytes), r->chunk,
                   (unsigned long long)r->data_offset, slot);
    }
    *out = (clrun_buffer){r->mem, r->size, r->chunk, r->data_offset, slot, r->generation};
}

/* ---- blocks in the strategy's chunks ------------------------------------------------------------ */

/* Allocates under pool->lock. */
static clrun_status alloc_locked(struct clrun_pool *pool, uint64_t size, uint64_t alignment,
                                 const char *label, clrun__block_owner owner, clrun_buffer *out)
{
    clrun_context *ctx = pool->ctx;
    char err[2048];
    /* The front zone keeps the data aligned: it is as large as the asked alignment. */
    uint64_t front = pool->red_zone && alignment > pool->red_zone ? alignment : pool->red_zone;
    uint64_t guarded = size + front + pool->red_zone;
    if (guarded < size)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_SIZE, "invalid size %llu bytes", (unsigned long long)size);
    uint32_t slot = clrun__pool_take_slot(pool);
    if (slot == UINT32_MAX)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for block records");
    clrun_block block;
    clrun_status status = clrun__allocator_alloc_charged(pool->allocator, guarded, alignment, size, &block,
                                                         err, sizeof err);
    if (status != CLRUN_OK) {
        pool->free_slots[pool->free_slot_count++] = slot;
        if (status == CLRUN_ERROR_OUT_OF_MEMORY)
            clrun__pool_describe_holders(pool, err, sizeof err);
        if (label && label[0])
            return clrun__fail(ctx, status, "'%s': %s", label, err);
        return clrun__fail(ctx, status, "%s", err);
    }
    block_record *r = &pool->records[slot];
    r->chunk = block.chunk;
    r->region = CLRUN__POOL_NO_REGION;
    r->block_offset = block.offset;
    r->front_zone = front;
    r->data_offset = block.offset + front;
    r->held = block.size;
    r->size = size;
    r->wait = NULL;
    snprintf(r->label, sizeof r->label, "%s", label ? label : "");
    cl_buffer_region region = {(size_t)r->data_offset, (size_t)size};
    cl_int error = CL_SUCCESS;
    r->mem = clrun__cl.CreateSubBuffer(pool->chunk_mem[block.chunk], CL_MEM_READ_WRITE,
                                       CL_BUFFER_CREATE_TYPE_REGION, &region, &error);
    if (r->mem == NULL)
        status = clrun__fail_cl(ctx, error, "clCreateSubBuffer", "chunk %u, origin %llu, size %llu", block.chunk,
                                (unsigned long long)r->data_offset, (unsigned long long)size);
    else if (pool->red_zone)
        status = clrun__pool_paint_red_zones(pool, r); /* keeps clrun__fail_cl's status (out of memory stays so) */
    if (status == CLRUN_OK && pool->out_of_order)
        status = clrun__pool_pending_wait_for(pool, r);
    if (status != CLRUN_OK) {
        if (r->mem)
            clrun__cl.ReleaseMemObject(r->mem);
        r->mem = NULL;
        clrun__allocator_free(pool->allocator, block.chunk, block.offset, size, err, sizeof err);
        pool->free_slots[pool->free_slot_count++] = slot;
        return status;
    }
    clrun__pool_publish(pool, slot, owner, out);
    return CLRUN_OK;
}

static clrun_status alloc_as(clrun_context *ctx, uint64_t size, uint64_t alignment,
                             const char *label, clrun__block_owner owner, clrun_buffer *out)
{
    if (ctx == NULL || out == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT, "clrun_alloc: NULL argument");
    memset(out, 0, sizeof *out);
    if (size == 0)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_SIZE,
                           "invalid size 0%s%s: clrun does not allocate empty blocks",
                           label ? " for " : "", label ? label : "");
    if (alignment & (alignment - 1))
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ALIGNMENT,
                           "invalid alignment %llu: it must be a power of two", (unsigned long long)alignment);
    struct clrun_pool *pool;
    clrun_status status = clrun__pool_get(ctx, &pool);
    if (status != CLRUN_OK)
        return status;
    cl_event wait = NULL;
    pthread_mutex_lock(&pool->lock);
    status = alloc_locked(pool, size, alignment, label, owner, out);
    if (status == CLRUN_OK && owner == CLRUN__OWNER_CALLER) {
        wait = pool->records[out->slot].wait; /* the caller's block is free when handed out */
        pool->records[out->slot].wait = NULL;
    }
    pthread_mutex_unlock(&pool->lock);
    if (wait) {
        cl_int error = clrun__cl.WaitForEvents(1, &wait);
        clrun__cl.ReleaseEvent(wait);
        if (error != CL_SUCCESS) {
            clrun__pool_free_owned(ctx, out);
            memset(out, 0, sizeof *out);
            return clrun__fail_cl(ctx, error, "clWaitForEvents", "waiting for the earlier users of a block");
        }
    }
    return status;
}

clrun_status clrun_alloc_ex(clrun_context *ctx, uint64_t size, uint64_t alignment,
                            const char *label, clrun_buffer *out)
{
    return alloc_as(ctx, size, alignment, label, CLRUN__OWNER_CALLER, out);
}

clrun_status clrun__pool_alloc_owned(clrun_context *ctx, uint64_t size, uint64_t alignment,
                                     const char *label, clrun_buffer *out)
{
    return alloc_as(ctx, size, alignment, label, CLRUN__OWNER_EXECUTOR, out);
}

clrun_status clrun_alloc(clrun_context *ctx, uint64_t size, clrun_buffer *out)
{
    return clrun_alloc_ex(ctx, size, 0, NULL, out);
}

clrun_status clrun__pool_free_locked(struct clrun_pool *pool, clrun_buffer *buffer)
{
    block_record *r = &pool->records[buffer->slot];
    assert(r->live && r->mem == buffer->mem); /* callers matched the record first */
    clrun_status guard = CLRUN_OK;
    bool resident = r->region != CLRUN__POOL_NO_REGION;
    if (pool->red_zone && !resident) {
        guard = clrun__pool_check_block(pool, buffer->slot);
        clrun__pool_fill(pool, r, r->data_offset, r->size, POISON);
    }
    if (resident) {
        clrun__pool_resident_release(pool, r);
    } else {
        char err[512];
        clrun_status status = clrun__allocator_free(pool->allocator, r->chunk, r->block_offset, r->size, err,
                                                    sizeof err);
        if (status != CLRUN_OK)
            return clrun__fail(pool->ctx, status, "%s", err);
    }
    clrun__pool_notify(pool, false, r);
    if (clrun__log_enabled(CLRUN_LOG_DEBUG)) {
        char bytes[CLRUN__BYTES_TEXT];
        clrun__log(CLRUN_LOG_DEBUG, "free '%s': %s at chunk %u offset %llu", r->label,
                   clrun__format_bytes(r->size, bytes, sizeof bytes), r->chunk,
                   (unsigned long long)r->data_offset);
    }
    clrun__cl.ReleaseMemObject(r->mem);
    if (r->wait)
        clrun__cl.ReleaseEvent(r->wait);
    r->wait = NULL;
    r->live = false;
    r->mem = NULL;
    r->generation++;
    pool->free_slots[pool->free_slot_count++] = buffer->slot;
    /* The handle keeps slot, generation and size, so that a second free says "freed already". */
    buffer->mem = NULL;
    return guard;
}

clrun_status clrun__pool_free_owned(clrun_context *ctx, clrun_buffer *buffer)
{
    return clrun__pool_free_owned_after(ctx, buffer, 0, NULL);
}

clrun_status clrun__pool_free_owned_after(clrun_context *ctx, clrun_buffer *buffer, cl_uint event_count,
                                          const cl_event *events)
{
    struct clrun_pool *pool = clrun__pool_existing(ctx);
    if (pool == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_FREE, "internal: free of an owned block without a pool");
    pthread_mutex_lock(&pool->lock);
    clrun_status status = CLRUN_OK;
    if (!clrun__pool_record_matches(pool, buffer))
        status = clrun__fail(ctx, CLRUN_ERROR_INVALID_FREE, "internal: free of an owned block that is not live");
    else if (event_count && pool->out_of_order)
        status = clrun__pool_pending_add(pool, &pool->records[buffer->slot], event_count, events);
    if (status == CLRUN_OK)
        status = clrun__pool_free_locked(pool, buffer);
    pthread_mutex_unlock(&pool->lock);
    return status;
}

clrun_status clrun__pool_take_wait(clrun_context *ctx, const clrun_buffer *buffer, cl_event *out)
{
    *out = NULL;
    struct clrun_pool *pool = clrun__pool_existing(ctx);
    if (pool == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT, "internal: a block without a pool");
    pthread_mutex_lock(&pool->lock);
    clrun_status status = CLRUN_OK;
    if (!clrun__pool_record_matches(pool, buffer)) {
        status = clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT, "internal: the wait of a block that is not live");
    } else {
        *out = pool->records[buffer->slot].wait;
        pool->records[buffer->slot].wait = NULL;
    }
    pthread_mutex_unlock(&pool->lock);
    return status;
}

/* ---- the pool as a whole ------------------------------------------------------------------------ */

clrun_status clrun_pool_trim(clrun_context *ctx, uint64_t *released)
{
    struct clrun_pool *pool;
    clrun_status status = clrun__pool_get(ctx, &pool);
    if (status != CLRUN_OK)
        return status;
    pthread_mutex_lock(&pool->lock);
    uint64_t bytes = clrun__allocator_trim(pool->allocator);
    pthread_mutex_unlock(&pool->lock);
    if (released)
        *released = bytes;
    return CLRUN_OK;
}

clrun_status clrun_pool_reset(clrun_context *ctx)
{
    struct clrun_pool *pool;
    clrun_status status = clrun__pool_get(ctx, &pool);
    if (status != CLRUN_OK)
        return status;
    pthread_mutex_lock(&pool->lock);
    for (uint32_t i = 0; i < pool->record_capacity; i++)
        if (pool->records[i].live && pool->records[i].owner == CLRUN__OWNER_EXECUTOR) {
            pthread_mutex_unlock(&pool->lock);
            return clrun__fail(ctx, CLRUN_ERROR_BUSY,
                               "clrun_pool_reset: block '%s' belongs to an executor; destroy every "
                               "executor of the context before a reset", pool->records[i].label);
        }
    for (uint32_t i = 0; i < pool->record_capacity; i++) {
        block_record *r = &pool->records[i];
        if (!r->live)
            continue;
        clrun__pool_notify(pool, false, r);
        clrun__cl.ReleaseMemObject(r->mem);
        if (r->wait)
            clrun__cl.ReleaseEvent(r->wait);
        r->wait = NULL;
        r->live = false;
        r->mem = NULL;
        r->generation++;
        pool->free_slots[pool->free_slot_count++] = i;
    }
    clrun__allocator_reset(pool->allocator);
    pthread_mutex_unlock(&pool->lock);
    return CLRUN_OK;
}

clrun_status clrun_memory_stats_get(clrun_context *ctx, clrun_memory_stats *out)
{
    if (ctx == NULL || out == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT, "clrun_memory_stats_get: NULL argument");
    struct clrun_pool *pool;
    clrun_status status = clrun__pool_get(ctx, &pool);
    if (status != CLRUN_OK)
        return status;
    pthread_mutex_lock(&pool->lock);
    clrun__allocator_stats(pool->allocator, out);
    out->resident = pool->resident_bytes;
    out->raw = pool->raw_bytes;
    out->host = pool->host_bytes;
    out->driver_allocs += pool->extra_allocs;
    out->driver_frees += pool->extra_frees;
    out->alloc_count += pool->extra_blocks;
    out->free_count += pool->extra_block_frees;
    out->held += pool->resident_bytes + pool->raw_bytes; /* resident regions are packed exactly */
    pthread_mutex_unlock(&pool->lock);
    return CLRUN_OK;
}

void clrun_memory_reset_peaks(clrun_context *ctx)
{
    struct clrun_pool *pool;
    if (ctx == NULL || clrun__pool_get(ctx, &pool) != CLRUN_OK)
        return;
    pthread_mutex_lock(&pool->lock);
    clrun__allocator_reset_peaks(pool->allocator);
    pthread_mutex_unlock(&pool->lock);
}

clrun_status clrun__pool_observe(clrun_context *ctx, clrun__pool_observer observer, void *user)
{
    struct clrun_pool *pool;
    clrun_status status = clrun__pool_get(ctx, &pool);
    if (status != CLRUN_OK)
        return status;
    pthread_mutex_lock(&pool->lock);
    pool->observer = observer;
    pool->observer_user = user;
    pthread_mutex_unlock(&pool->lock);
    return CLRUN_OK;
}

cl_mem clrun__pool_chunk_mem(clrun_context *ctx, uint32_t chunk)
{
    struct clrun_pool *pool;
    if (clrun__pool_get(ctx, &pool) != CLRUN_OK)
        return NULL;
    pthread_mutex_lock(&pool->lock);
    cl_mem mem = chunk < pool->chunk_capacity ? pool->chunk_mem[chunk] : NULL;
    uint32_t region = chunk & ~CLRUN__POOL_REGION_BIT;
    if ((chunk & CLRUN__POOL_REGION_BIT) && region < pool->region_count)
        mem = pool->regions[region].mem; /* a resident or host region's */
    pthread_mutex_unlock(&pool->lock);
    return mem;
}
