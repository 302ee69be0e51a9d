/* What the pool reserves beside the strategy's chunks, held to the same limit:
 *  - resident regions: a batch of weights packed one after another (each rounded only to the
 *    device alignment) into driver buffers reserved to measure, so that weights never pay a
 *    strategy's rounding (buddy's powers of two, slab's classes) nor its growth slack. A region
 *    goes back to the driver with its last block. Its blocks' chunk ids have the top bit set;
 *  - raw buffers: a driver buffer of its own per request (naive-mode tensors, a planned arena),
 *    only counted, so that CLRUN_POOL_LIMIT is a limit in every executor mode;
 *  - host regions: packed as resident ones, but in host memory the device maps
 *    (CL_MEM_ALLOC_HOST_PTR), the caller's blocks, neither reserved nor in use for the limit:
 *    state offloaded from the device (a trainer under a budget).
 * And the part of an out-of-memory message that says who holds the memory. */
#include "memory/pool_internal.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

#define HOLDERS_SHOWN 5                        /* live blocks named in an out-of-memory message */

/* Counts `reserve` bytes more reserved and `use` more in use; when the limit refuses, gives back
 * the strategy's empty chunks and tries once more. */
static bool charge_with_trim(struct clrun_pool *pool, uint64_t reserve, uint64_t use)
{
    if (clrun__account_charge(&pool->account, reserve, use))
        return true;
    clrun__allocator_trim(pool->allocator);
    return clrun__account_charge(&pool->account, reserve, use);
}

/* "limit L, reserved R, in use U" into buf. */
static const char *account_text(const struct clrun_pool *pool, char *buf, size_t size)
{
    char limit[32], reserved[32], in_use[32];
    snprintf(buf, size, "limit %s, reserved %s, in use %s",
             pool->account.limit ? clrun__format_bytes(pool->account.limit, limit, sizeof limit) : "none",
             clrun__format_bytes(pool->account.reserved, reserved, sizeof reserved),
             clrun__format_bytes(pool->account.in_use, in_use, sizeof in_use));
    return buf;
}

/* ---- resident regions ------------------------------------------------------------------------- */

/* A region entry (reusing an unused one); UINT32_MAX when host memory runs out. */
static uint32_t region_slot(struct clrun_pool *pool)
{
    for (uint32_t i = 0; i < pool->region_count; i++)
        if (pool->regions[i].mem == NULL)
            return i;
    void *regions = pool->regions;
    if (pool->region_count == UINT32_MAX / 2 ||
        !clrun__grow(&regions, &pool->region_capacity, (size_t)pool->region_count + 1, sizeof *pool->regions))
        return UINT32_MAX;
    pool->regions = regions;
    pool->regions[pool->region_count] = (resident_region){0};
    return pool->region_count++;
}

static void region_drop(struct clrun_pool *pool, uint32_t index)
{
    resident_region *g = &pool->regions[index];
    clrun__cl.ReleaseMemObject(g->mem);
    if (g->host) {
        pool->host_bytes -= g->size;
    } else {
        clrun__account_discharge(&pool->account, g->size, 0);
        pool->resident_bytes -= g->size;
    }
    pool->extra_frees++;
    *g = (resident_region){0};
}

void clrun__pool_resident_release(struct clrun_pool *pool, block_record *r)
{
    resident_region *g = &pool->regions[r->region];
    assert(r->region < pool->region_count && g->mem && g->live > 0);
    if (!g->host)
        clrun__account_discharge(&pool->account, 0, r->size);
    pool->extra_block_frees++;
    if (--g->live == 0)
        region_drop(pool, r->region);
}

void clrun__pool_resident_destroy(struct clrun_pool *pool)
{
    for (uint32_t i = 0; i < pool->region_count; i++)
        if (pool->regions[i].mem)
            clrun__cl.ReleaseMemObject(pool->regions[i].mem);
    free(pool->regions);
}

static uint64_t aligned(const struct clrun_pool *pool, uint64_t size)
{
    return (size + pool->alignment - 1) & ~(pool->alignment - 1);
}

/* Reserves region `index` for blocks [first, last) of the batch at their packed offsets. */
static clrun_status region_reserve(struct clrun_pool *pool, uint32_t index, uint64_t bytes, const char *first_label,
                                   size_t blocks, bool host)
{
    clrun_context *ctx = pool->ctx;
    char human[32], account[160];
    if (host) { /* host memory the device maps: not the device's, not held to the limit */
        cl_int error = CL_SUCCESS;
        cl_mem mem = clrun__cl.CreateBuffer(ctx->cl, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR,
                                            (size_t)bytes, NULL, &error);
        if (mem == NULL)
            return clrun__fail_cl(ctx, error, "clCreateBuffer", "host memory of %s for %zu blocks "
                                  "(from '%s')", clrun__format_bytes(bytes, human, sizeof human),
                                  blocks, first_label);
        pool->regions[index] = (resident_region){.mem = mem, .size = bytes, .host = true};
        pool->host_bytes += bytes;
        pool->extra_allocs++;
        return CLRUN_OK;
    }
    if (!charge_with_trim(pool, bytes, 0))
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_MEMORY,
                           "out of memory: a resident region of %s for %zu weights (from '%s') does not "
                           "fit under the pool limit (%s)",
                           clrun__format_bytes(bytes, human, sizeof human), blocks, first_label,
                           account_text(pool, account, sizeof account));
    cl_int error = CL_SUCCESS;
    cl_mem mem = clrun__cl.CreateBuffer(ctx->cl, CL_MEM_READ_WRITE, (size_t)bytes, NULL, &error);
    if (mem == NULL) {
        clrun__account_discharge(&pool->account, bytes, 0);
        return clrun__fail_cl(ctx, error, "clCreateBuffer", "resident region of %s for %zu weights (from '%s')",
                              clrun__format_bytes(bytes, human, sizeof human), blocks, first_label);
    }
    pool->regions[index] = (resident_region){.mem = mem, .size = bytes};
    pool->resident_bytes += bytes;
    pool->extra_allocs++;
    return CLRUN_OK;
}

/* Block `size` at `offset` of region `index` into *out, the executor's. */
static clrun_status region_block(struct clrun_pool *pool, uint32_t index, uint64_t offset, uint64_t size,
                                 const char *label, clrun__block_owner owner, clrun_buffer *out)
{
    uint32_t slot = clrun__pool_take_slot(pool);
    if (slot == UINT32_MAX)
        return clrun__fail(pool->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for block records");
    block_record *r = &pool->records[slot];
    resident_region *g = &pool->regions[index];
    cl_buffer_region range = {(size_t)offset, (size_t)size};
    cl_int error = CL_SUCCESS;
    cl_mem mem = clrun__cl.CreateSubBuffer(g->mem, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &range, &error);
    if (mem == NULL) {
        pool->free_slots[pool->free_slot_count++] = slot;
        return clrun__fail_cl(pool->ctx, error, "clCreateSubBuffer", "resident block '%s' at %llu, %llu bytes",
                              label ? label : "", (unsigned long long)offset, (unsigned long long)size);
    }
    r->chunk = CLRUN__POOL_REGION_BIT | index;
    r->region = index;
    r->block_offset = offset;
    r->data_offset = offset;
    r->front_zone = 0;
    r->held = aligned(pool, size);
    r->size = size;
    r->mem = mem;
    r->wait = NULL;
    snprintf(r->label, sizeof r->label, "%s", label ? label : "");
    g->live++;
    pool->extra_blocks++;
    if (!g->host) /* in use only: the region is reserved */
        clrun__account_charge(&pool->account, 0, size);
    clrun__pool_publish(pool, slot, owner, out);
    return CLRUN_OK;
}

/* Blocks [first, end) of the batch in one region, no larger than the device's maximum
 * allocation; *end gets where the region stops. */
static clrun_status pack_region(struct clrun_pool *pool, const uint64_t *sizes, const char *const *labels,
                                size_t count, size_t first, size_t *end, bool host, clrun_buffer *out)
{
    uint64_t bytes = 0;
    size_t last = first;
    while (last < count && aligned(pool, bytes) + sizes[last] <= pool->max_chunk) {
        bytes = aligned(pool, bytes) + sizes[last]; /* each block starts aligned, the last one ends exactly */
        last++;
    }
    *end = last;
    uint32_t index = region_slot(pool);
    if (index == UINT32_MAX)
        return clrun__fail(pool->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for resident regions");
    const char *first_label = labels && labels[first] ? labels[first] : "";
    clrun_status status = region_reserve(pool, index, bytes, first_label, last - first, host);
    uint64_t offset = 0;
    for (size_t i = first; status == CLRUN_OK && i < last; i++) {
        status = region_block(pool, index, offset, sizes[i], labels ? labels[i] : NULL,
                              host ? CLRUN__OWNER_CALLER : CLRUN__OWNER_EXECUTOR, &out[i]);
        offset = aligned(pool, offset + sizes[i]);
    }
    if (status != CLRUN_OK && pool->regions[index].mem && pool->regions[index].live == 0)
        region_drop(pool, index);
    return status;
}

/* Resident blocks (the executor's) or, with `host`, the caller's in host memory. */
static clrun_status alloc_packed(clrun_context *ctx, const uint64_t *sizes, const char *const *labels,
                                 size_t count, bool host, clrun_buffer *out)
{
    if (ctx == NULL || (count && (sizes == NULL || out == NULL)))
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT, "resident blocks: NULL argument");
    memset(out, 0, count * sizeof *out);
    struct clrun_pool *pool;
    clrun_status status = clrun__pool_get(ctx, &pool);
    if (status != CLRUN_OK)
        return status;
    for (size_t i = 0; i < count; i++) {
        const char *label = labels && labels[i] ? labels[i] : "";
        char human[32];
        if (sizes[i] == 0)
            return clrun__fail(ctx, CLRUN_ERROR_INVALID_SIZE, "invalid size 0 for '%s': clrun does not allocate empty blocks", label);
        if (sizes[i] > pool->max_chunk)
            return clrun__fail(ctx, CLRUN_ERROR_INVALID_SIZE,
                               "invalid size %llu bytes for '%s': above the device's maximum allocation of %s",
                               (unsigned long long)sizes[i], label,
                               clrun__format_bytes(pool->max_chunk, human, sizeof human));
    }
    pthread_mutex_lock(&pool->lock);
    size_t done = 0;
    while (status == CLRUN_OK && done < count)
        status = pack_region(pool, sizes, labels, count, done, &done, host, out);
    if (status != CLRUN_OK) { /* nothing stays: every block of the batch made so far goes */
        for (size_t i = 0; i < count; i++)
            if (out[i].mem)
                clrun__pool_free_locked(pool, &out[i]);
        memset(out, 0, count * sizeof *out);
    }
    pthread_mutex_unlock(&pool->lock);
    return status;
}

clrun_status clrun__pool_alloc_resident(clrun_context *ctx, const uint64_t *sizes, const char *const *labels,
                                        size_t count, clrun_buffer *out)
{
    return alloc_packed(ctx, sizes, labels, count, false, out);
}

clrun_status clrun__pool_alloc_host(clrun_context *ctx, const uint64_t *sizes, const char *const *labels,
                                    size_t count, clrun_buffer *out)
{
    return alloc_packed(ctx, sizes, labels, count, true, out);
}

/* ---- raw buffers ---------------------------------------------------------------------------------- */

clrun_status clrun__pool_create_raw(clrun_context *ctx, uint64_t size, const char *label, cl_mem *out)
{
    *out = NULL;
    struct clrun_pool *pool;
    clrun_status status = clrun__pool_get(ctx, &pool);
    if (status != CLRUN_OK)
        return status;
    char human[32], account[160];
    pthread_mutex_lock(&pool->lock);
    bool charged = charge_with_trim(pool, size, size);
    if (!charged)
        account_text(pool, account, sizeof account);
    pthread_mutex_unlock(&pool->lock);
    if (!charged)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_MEMORY,
                           "out of memory: a buffer of %s for '%s' does not fit under the pool limit (%s)",
                           clrun__format_bytes(size, human, sizeof human), label ? label : "", account);
    cl_int error = CL_SUCCESS;
    cl_mem mem = clrun__cl.CreateBuffer(ctx->cl, CL_MEM_READ_WRITE, (size_t)size, NULL, &error);
    pthread_mutex_lock(&pool->lock);
    if (mem == NULL) {
        clrun__account_discharge(&pool->account, size, size);
    } else {
        pool->raw_bytes += size;
        pool->raw_count++;
        pool->extra_allocs++;
        pool->extra_blocks++;
    }
    pthread_mutex_unlock(&pool->lock);
    if (mem == NULL)
        return clrun__fail_cl(ctx, error, "clCreateBuffer", "buffer of %s for '%s'",
                              clrun__format_bytes(size, human, sizeof human), label ? label : "");
    *out = mem;
    return CLRUN_OK;
}

void clrun__pool_release_raw(clrun_context *ctx, cl_mem mem, uint64_t size)
{
    struct clrun_pool *pool = mem ? clrun__pool_existing(ctx) : NULL;
    if (pool == NULL)
        return;
    clrun__cl.ReleaseMemObject(mem);
    pthread_mutex_lock(&pool->lock);
    clrun__account_discharge(&pool->account, size, size);
    pool->raw_bytes -= size;
    pool->raw_count--;
    pool->extra_frees++;
    pool->extra_block_frees++;
    pthread_mutex_unlock(&pool->lock);
}

/* ---- who holds the memory --------------------------------------------------------------------------- */

void clrun__pool_describe_holders(const struct clrun_pool *pool, char *err, size_t errlen)
{
    const block_record *top[HOLDERS_SHOWN];
    size_t shown = 0;
    for (uint32_t i = 0; i < pool->record_capacity; i++) {
        const block_record *r = &pool->records[i];
        if (!r->live)
            continue;
        size_t at = shown < HOLDERS_SHOWN ? shown++ : HOLDERS_SHOWN;
        if (at == HOLDERS_SHOWN && r->size <= top[HOLDERS_SHOWN - 1]->size)
            continue;
        if (at == HOLDERS_SHOWN)
            at = HOLDERS_SHOWN - 1;
        while (at > 0 && top[at - 1]->size < r->size) {
            top[at] = top[at - 1];
            at--;
        }
        top[at] = r;
    }
    size_t used = strlen(err);
    for (size_t k = 0; k < shown && used < errlen; k++) {
        char human[32];
        const block_record *r = top[k];
        used += (size_t)snprintf(err + used, errlen - used, "%s'%s' %s (%s%s)", k ? ", " : "; largest live blocks: ",
                                 r->label[0] ? r->label : "(unnamed)", clrun__format_bytes(r->size, human, sizeof human),
                                 r->owner == CLRUN__OWNER_EXECUTOR ? "executor" : "caller",
                                 r->region != CLRUN__POOL_NO_REGION ? ", resident" : "");
    }
    clrun_memory_stats s;
    clrun__allocator_stats(pool->allocator, &s);
    char free_bytes[32], resident[32], raw[32];
    if (used < errlen)
        snprintf(err + used, errlen - used,
                 "; free but too fragmented to serve it: %s in the strategy's chunks; resident weights %s, "
                 "own buffers %s",
                 clrun__format_bytes(s.free_bytes, free_bytes, sizeof free_bytes),
                 clrun__format_bytes(pool->resident_bytes, resident, sizeof resident),
                 clrun__format_bytes(pool->raw_bytes, raw, sizeof raw));
}
