/* Guard mode (CLRUN_DEBUG=guard): each block of the strategy's chunks is laid out as
 * [red zone | data | red zone], the zones filled with a canary byte that free and
 * clrun_pool_check read back. OpenCL devices do not bound sub-buffer access (and Oclgrind checks
 * whole buffers only), so this is how a kernel that writes past its block into a neighbour is
 * caught. Freed data is poisoned with 0xFF bytes (NaN as float, -1 as int). Resident regions
 * hold weights, which kernels only read: they have no red zones. */
#include "memory/pool_internal.h"

#include <stdlib.h>

#define CANARY 0xCBu

cl_int clrun__pool_fill(struct clrun_pool *pool, const block_record *r, uint64_t offset, uint64_t size,
                        unsigned char byte)
{
    if (size == 0)
        return CL_SUCCESS;
    return clrun__cl.EnqueueFillBuffer(pool->ctx->queue, clrun__pool_record_chunk(pool, r), &byte, 1,
                                       (size_t)offset, (size_t)size, 0, NULL, NULL);
}

clrun_status clrun__pool_paint_red_zones(struct clrun_pool *pool, const block_record *r)
{
    cl_int error = clrun__pool_fill(pool, r, r->block_offset, r->front_zone, CANARY);
    if (error == CL_SUCCESS)
        error = clrun__pool_fill(pool, r, r->data_offset + r->size, pool->red_zone, CANARY);
    if (error != CL_SUCCESS)
        return clrun__fail_cl(pool->ctx, error, "clEnqueueFillBuffer", "painting red zones");
    return CLRUN_OK;
}

/* First damaged byte of a red zone, or -1; reads the zone back from the device. */
static clrun_status find_damage(struct clrun_pool *pool, cl_mem chunk, uint64_t offset,
                                uint64_t size, int64_t *damaged)
{
    *damaged = -1;
    if (size == 0)
        return CLRUN_OK;
    unsigned char *bytes = malloc((size_t)size);
    if (bytes == NULL)
        return clrun__fail(pool->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory checking red zones");
    cl_int error = clrun__cl.EnqueueReadBuffer(pool->ctx->queue, chunk, CL_TRUE, (size_t)offset,
                                               (size_t)size, bytes, 0, NULL, NULL);
    for (uint64_t i = 0; error == CL_SUCCESS && i < size; i++) {
        if (bytes[i] != CANARY) {
            *damaged = (int64_t)i;
            break;
        }
    }
    free(bytes);
    if (error != CL_SUCCESS)
        return clrun__fail_cl(pool->ctx, error, "clEnqueueReadBuffer", "reading red zones");
    return CLRUN_OK;
}

clrun_status clrun__pool_check_block(struct clrun_pool *pool, uint32_t slot)
{
    const block_record *r = &pool->records[slot];
    int64_t before, after;
    clrun_status status = find_damage(pool, clrun__pool_record_chunk(pool, r), r->block_offset, r->front_zone, &before);
    if (status == CLRUN_OK)
        status = find_damage(pool, clrun__pool_record_chunk(pool, r), r->data_offset + r->size, pool->red_zone, &after);
    if (status != CLRUN_OK || (before < 0 && after < 0))
        return status;
    if (after >= 0)
        return clrun__fail(pool->ctx, CLRUN_ERROR_GUARD,
                           "guard: block '%s' (%llu bytes, chunk %u offset %llu) was overrun: "
                           "byte %lld past its end was written",
                           r->label[0] ? r->label : "(unnamed)", (unsigned long long)r->size, r->chunk,
                           (unsigned long long)r->data_offset, (long long)after);
    return clrun__fail(pool->ctx, CLRUN_ERROR_GUARD,
                       "guard: block '%s' (%llu bytes, chunk %u offset %llu) was underrun: "
                       "byte %lld before its start was written",
                       r->label[0] ? r->label : "(unnamed)", (unsigned long long)r->size, r->chunk,
                       (unsigned long long)r->data_offset, (long long)(r->front_zone - (uint64_t)before));
}

clrun_status clrun_pool_check(clrun_context *ctx)
{
    struct clrun_pool *pool;
    clrun_status status = clrun__pool_get(ctx, &pool);
    if (status != CLRUN_OK || pool->red_zone == 0)
        return status;
    pthread_mutex_lock(&pool->lock);
    for (uint32_t i = 0; status == CLRUN_OK && i < pool->record_capacity; i++)
        if (pool->records[i].live && pool->records[i].region == CLRUN__POOL_NO_REGION)
            status = clrun__pool_check_block(pool, i);
    pthread_mutex_unlock(&pool->lock);
    return status;
}

