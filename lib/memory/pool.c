/* The device memory pool: the allocator core over cl_mem chunks, blocks handed out as
 * sub-buffers, one lock for every host thread of the context.
 *
 * Every live block has a record (a slot) with a generation number that the caller's
 * clrun_buffer carries; a stale or foreign clrun_buffer is recognised and refused instead of
 * freeing somebody else's block.
 *
 * Guard mode lays each block out as [red zone | data | red zone], red zones filled with a canary
 * byte; free and clrun_pool_check read them back. OpenCL devices do not bound sub-buffer access
 * (and Oclgrind checks whole buffers only), so this is how a kernel that writes past its block
 * into a neighbour is caught. Freed data is poisoned with 0xFF bytes (NaN as float, -1 as int). */
#include "memory/pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memory/allocator.h"
#include "device/cl.h"
#include "device/context.h"

#define CANARY 0xCBu
#define POISON 0xFFu
#define LABEL_MAX 64

typedef struct block_record {
    bool live;              /* the slot holds a live block */
    uint32_t generation;    /* bumped at every free */
    uint32_t chunk;         /* the block's chunk */
    uint64_t block_offset;  /* where the strategy's block starts (red zone included) */
    uint64_t data_offset;   /* where the sub-buffer starts (after the front red zone) */
    uint64_t front_zone;    /* guard mode: red zone bytes before the data, else 0 */
    uint64_t size;          /* bytes asked for */
    cl_mem mem;             /* the sub-buffer */
    char label[LABEL_MAX];  /* the caller's name for it, or "" */
    clrun__block_owner owner; /* who may pass it to public calls */
    /* The last donation of this slot: a caller's handle of that generation names it. Kept
     * until the slot is donated again, so a donated handle is told apart from a freed one. */
    bool donated;
    uint32_t donated_generation;
    char donated_as[LABEL_MAX];
} block_record;

struct clrun_pool {
    clrun_context *ctx;          /* owner */
    clrun__allocator *allocator; /* policy and strategy */
    cl_mem *chunk_mem;           /* by chunk id; NULL where no chunk */
    uint32_t chunk_capacity;     /* entries in chunk_mem */
    block_record *records;       /* by slot */
    uint32_t record_capacity;    /* entries in records */
    uint32_t *free_slots;        /* stack of unused slot numbers */
    uint32_t free_slot_count;
    uint64_t red_zone;           /* bytes on each side in guard mode, else 0 */
    clrun__pool_observer observer;
    void *observer_user;
    pthread_mutex_t lock;        /* guards everything above */
};

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

static void destroy_pool(struct clrun_pool *pool)
{
    for (uint32_t i = 0; i < pool->record_capacity; i++)
        if (pool->records[i].live)
            clrun__cl.ReleaseMemObject(pool->records[i].mem);
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
    clrun__allocator_config config = {
        .ops = pc.strategy,
        .min_align = pc.alignment,
        .max_chunk = pc.max_chunk,
        .limit = pc.limit,
        .backing = {.user = pool, .reserve = reserve_chunk, .release = release_chunk},
    };
    char err[1024];
    clrun_status status = clrun__allocator_create(&config, &pool->allocator, err, sizeof err);
    if (status == CLRUN_OK && pc.preallocate)
        status = clrun__allocator_preallocate(pool->allocator, config.limit, err, sizeof err);
    if (status != CLRUN_OK) {
        destroy_pool(pool);
        return clrun__fail(ctx, status, "%s", err);
    }
    *out = pool;
    return CLRUN_OK;
}

/* The context's pool, created on first use, once: creation (which may preallocate most of the
 * device) happens under pool_init, apart from ctx->lock, under which failures are recorded. */
static clrun_status get_pool(clrun_context *ctx, struct clrun_pool **out)
{
    if (ctx == NULL)
        return clrun__fail(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "NULL context");
    pthread_mutex_lock(&ctx->lock);
    struct clrun_pool *pool = ctx->pool;
    pthread_mutex_unlock(&ctx->lock);
    if (pool != NULL) {
        *out = pool;
        return CLRUN_OK;
    }
    clrun_status status = CLRUN_OK;
    pthread_mutex_lock(&ctx->pool_init);
    pthread_mutex_lock(&ctx->lock);
    pool = ctx->pool;
    pthread_mutex_unlock(&ctx->lock);
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

/* A slot for a new record; UINT32_MAX when host memory runs out. */
static uint32_t take_slot(struct clrun_pool *pool)
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

static void notify(struct clrun_pool *pool, bool is_alloc, const block_record *r)
{
    if (pool->observer) {
        clrun__pool_event e = {is_alloc, r->chunk, r->data_offset, r->size, r->label};
        pool->observer(&e, pool->observer_user);
    }
}

static cl_int fill(struct clrun_pool *pool, uint32_t chunk, uint64_t offset, uint64_t size, unsigned char byte)
{
    if (size == 0)
        return CL_SUCCESS;
    return clrun__cl.EnqueueFillBuffer(pool->ctx->queue, pool->chunk_mem[chunk], &byte, 1, (size_t)offset,
                                       (size_t)size, 0, NULL, NULL);
}

static clrun_status paint_red_zones(struct clrun_pool *pool, const block_record *r)
{
    cl_int error = fill(pool, r->chunk, r->block_offset, r->front_zone, CANARY);
    if (error == CL_SUCCESS)
        error = fill(pool, r->chunk, r->data_offset + r->size, pool->red_zone, CANARY);
    if (error != CL_SUCCESS)
        return clrun__fail_cl(pool->ctx, error, "clEnqueueFillBuffer", "painting red zones");
    return CLRUN_OK;
}

/* Allocates under pool->lock. */
static clrun_status alloc_locked(struct clrun_pool *pool, uint64_t size, uint64_t alignment,
                                 const char *label, clrun__block_owner owner, clrun_buffer *out)
{
    clrun_context *ctx = pool->ctx;
    char err[1536];
    /* The front zone keeps the data aligned: it is as large as the asked alignment. */
    uint64_t front = pool->red_zone && alignment > pool->red_zone ? alignment : pool->red_zone;
    uint64_t guarded = size + front + pool->red_zone;
    if (guarded < size)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_SIZE, "invalid size %llu bytes", (unsigned long long)size);
    uint32_t slot = take_slot(pool);
    if (slot == UINT32_MAX)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for block records");
    clrun_block block;
    clrun_status status = clrun__allocator_alloc_charged(pool->allocator, guarded, alignment, size, &block,
                                                         err, sizeof err);
    if (status != CLRUN_OK) {
        pool->free_slots[pool->free_slot_count++] = slot;
        if (label && label[0])
            return clrun__fail(ctx, status, "'%s': %s", label, err);
        return clrun__fail(ctx, status, "%s", err);
    }
    block_record *r = &pool->records[slot];
    r->chunk = block.chunk;
    r->block_offset = block.offset;
    r->front_zone = front;
    r->data_offset = block.offset + front;
    r->size = size;
    snprintf(r->label, sizeof r->label, "%s", label ? label : "");
    cl_buffer_region region = {(size_t)r->data_offset, (size_t)size};
    cl_int error = CL_SUCCESS;
    r->mem = clrun__cl.CreateSubBuffer(pool->chunk_mem[block.chunk], CL_MEM_READ_WRITE,
                                       CL_BUFFER_CREATE_TYPE_REGION, &region, &error);
    if (r->mem == NULL)
        status = clrun__fail_cl(ctx, error, "clCreateSubBuffer", "chunk %u, origin %llu, size %llu", block.chunk,
                                (unsigned long long)r->data_offset, (unsigned long long)size);
    else if (pool->red_zone)
        status = paint_red_zones(pool, r); /* keeps clrun__fail_cl's status (out of memory stays so) */
    if (status != CLRUN_OK) {
        if (r->mem)
            clrun__cl.ReleaseMemObject(r->mem);
        r->mem = NULL;
        clrun__allocator_free(pool->allocator, block.chunk, block.offset, size, err, sizeof err);
        pool->free_slots[pool->free_slot_count++] = slot;
        return status;
    }
    r->live = true;
    r->owner = owner;
    notify(pool, true, r);
    if (clrun__log_enabled(CLRUN_LOG_DEBUG)) {
        char bytes[CLRUN__BYTES_TEXT];
        clrun__log(CLRUN_LOG_DEBUG, "alloc '%s': %s at chunk %u offset %llu (slot %u)", r->label,
                   clrun__format_bytes(size, bytes, sizeof bytes), r->chunk,
                   (unsigned long long)r->data_offset, slot);
    }
    *out = (clrun_buffer){r->mem, size, r->chunk, r->data_offset, slot, r->generation};
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
    clrun_status status = get_pool(ctx, &pool);
    if (status != CLRUN_OK)
        return status;
    pthread_mutex_lock(&pool->lock);
    status = alloc_locked(pool, size, alignment, label, owner, out);
    pthread_mutex_unlock(&pool->lock);
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

/* First damaged byte of a red zone, or -1; reads the zone back from the device. */
static clrun_status find_damage(struct clrun_pool *pool, uint32_t chunk, uint64_t offset,
                                uint64_t size, int64_t *damaged)
{
    *damaged = -1;
    if (size == 0)
        return CLRUN_OK;
    unsigned char *bytes = malloc((size_t)size);
    if (bytes == NULL)
        return clrun__fail(pool->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory checking red zones");
    cl_int error = clrun__cl.EnqueueReadBuffer(pool->ctx->queue, pool->chunk_mem[chunk], CL_TRUE, (size_t)offset,
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

static clrun_status check_block(struct clrun_pool *pool, uint32_t slot)
{
    const block_record *r = &pool->records[slot];
    int64_t before, after;
    clrun_status status = find_damage(pool, r->chunk, r->block_offset, r->front_zone, &before);
    if (status == CLRUN_OK)
        status = find_damage(pool, r->chunk, r->data_offset + r->size, pool->red_zone, &after);
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

static bool record_matches(const struct clrun_pool *pool, const clrun_buffer *b)
{
    if (b->slot >= pool->record_capacity)
        return false;
    const block_record *r = &pool->records[b->slot];
    return r->live && r->generation == b->generation && r->mem == b->mem && r->chunk == b->chunk &&
           r->data_offset == b->offset;
}

/* What a handle is to the pool. */
typedef enum handle_state {
    HANDLE_LIVE,     /* a live block: its record is pool->records[b->slot] */
    HANDLE_EMPTY,    /* a zeroed clrun_buffer: never allocated */
    HANDLE_FREED,    /* freed already (a double free, or a stale copy) */
    HANDLE_DONATED,  /* given to an executor as a donated input: the record says as what */
    HANDLE_FOREIGN,  /* no block of this pool: another context's, or made up */
} handle_state;

static handle_state handle_state_of(const struct clrun_pool *pool, const clrun_buffer *b)
{
    if (b->mem == NULL && b->size == 0 && b->slot == 0 && b->generation == 0)
        return HANDLE_EMPTY;
    if (pool == NULL || b->slot >= pool->record_capacity)
        return HANDLE_FOREIGN;
    if (record_matches(pool, b))
        return HANDLE_LIVE;
    const block_record *r = &pool->records[b->slot];
    if (r->donated && r->donated_generation == b->generation)
        return HANDLE_DONATED;
    /* A freed handle keeps its slot and generation (clrun_free clears only its memory); the
     * slot's generation has moved past it since. */
    return b->generation < r->generation ? HANDLE_FREED : HANDLE_FOREIGN;
}

/* CLRUN_OK when b is a live block a caller may use; otherwise the failure, with a message
 * that says what the handle is, prefixed by `what` ("clrun_free"). Under pool->lock. */
static clrun_status check_caller_handle(struct clrun_pool *pool, clrun_context *ctx,
                                        const clrun_buffer *b, const char *what,
                                        clrun_status invalid)
{
    switch (handle_state_of(pool, b)) {
    case HANDLE_LIVE:
        if (pool->records[b->slot].owner == CLRUN__OWNER_CALLER)
            return CLRUN_OK;
        return clrun__fail(ctx, invalid,
                           "%s: block '%s' (%llu bytes) belongs to an executor (a constant, an "
                           "intermediate or an output); only the executor may free or reuse it",
                           what, pool->records[b->slot].label, (unsigned long long)b->size);
    case HANDLE_DONATED:
        return clrun__fail(ctx, CLRUN_ERROR_DONATED,
                           "%s: this buffer (%llu bytes) was donated to a run as %s and belongs to "
                           "the executor now; allocate a new one",
                           what, (unsigned long long)b->size, pool->records[b->slot].donated_as);
    case HANDLE_EMPTY:
        return clrun__fail(ctx, invalid, "%s: an empty clrun_buffer (never allocated, or zeroed)",
                           what);
    case HANDLE_FREED:
        return clrun__fail(ctx, invalid,
                           "%s: a buffer of %llu bytes that was freed already (a double free, or "
                           "a copy of a freed handle)", what, (unsigned long long)b->size);
    case HANDLE_FOREIGN:
        break;
    }
    return clrun__fail(ctx, invalid,
                       "%s: a buffer this context never allocated (%llu bytes at chunk %u offset "
                       "%llu): from another context, or made up", what,
                       (unsigned long long)b->size, b->chunk, (unsigned long long)b->offset);
}

/* The context's pool if it exists yet, else NULL. */
static struct clrun_pool *existing_pool(clrun_context *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    struct clrun_pool *pool = ctx->pool;
    pthread_mutex_unlock(&ctx->lock);
    return pool;
}

/* Frees the live block b under pool->lock. */
static clrun_status free_locked(struct clrun_pool *pool, clrun_buffer *buffer)
{
    block_record *r = &pool->records[buffer->slot];
    clrun_status guard = CLRUN_OK;
    if (pool->red_zone) {
        guard = check_block(pool, buffer->slot);
        fill(pool, r->chunk, r->data_offset, r->size, POISON);
    }
    char err[512];
    clrun_status status = clrun__allocator_free(pool->allocator, r->chunk, r->block_offset, r->size, err, sizeof err);
    if (status != CLRUN_OK)
        return clrun__fail(pool->ctx, status, "%s", err);
    notify(pool, false, r);
    if (clrun__log_enabled(CLRUN_LOG_DEBUG)) {
        char bytes[CLRUN__BYTES_TEXT];
        clrun__log(CLRUN_LOG_DEBUG, "free '%s': %s at chunk %u offset %llu", r->label,
                   clrun__format_bytes(r->size, bytes, sizeof bytes), r->chunk,
                   (unsigned long long)r->data_offset);
    }
    clrun__cl.ReleaseMemObject(r->mem);
    r->live = false;
    r->mem = NULL;
    r->generation++;
    pool->free_slots[pool->free_slot_count++] = buffer->slot;
    /* The handle keeps slot, generation and size, so that a second free says "freed already". */
    buffer->mem = NULL;
    return guard;
}

clrun_status clrun_free(clrun_context *ctx, clrun_buffer *buffer)
{
    if (ctx == NULL || buffer == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT, "clrun_free: NULL argument");
    struct clrun_pool *pool = existing_pool(ctx);
    if (pool == NULL)
        return check_caller_handle(NULL, ctx, buffer, "clrun_free", CLRUN_ERROR_INVALID_FREE);
    pthread_mutex_lock(&pool->lock);
    clrun_status status = check_caller_handle(pool, ctx, buffer, "clrun_free", CLRUN_ERROR_INVALID_FREE);
    if (status == CLRUN_OK)
        status = free_locked(pool, buffer);
    pthread_mutex_unlock(&pool->lock);
    return status;
}

clrun_status clrun__pool_free_owned(clrun_context *ctx, clrun_buffer *buffer)
{
    struct clrun_pool *pool = existing_pool(ctx);
    if (pool == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_FREE, "internal: free of an owned block without a pool");
    pthread_mutex_lock(&pool->lock);
    clrun_status status = record_matches(pool, buffer)
                              ? free_locked(pool, buffer)
                              : clrun__fail(ctx, CLRUN_ERROR_INVALID_FREE,
                                            "internal: free of an owned block that is not live");
    pthread_mutex_unlock(&pool->lock);
    return status;
}

clrun_status clrun__pool_check_caller(clrun_context *ctx, const clrun_buffer *buffer,
                                      const char *what)
{
    if (ctx == NULL || buffer == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT, "%s: NULL argument", what);
    struct clrun_pool *pool = existing_pool(ctx);
    if (pool == NULL)
        return check_caller_handle(NULL, ctx, buffer, what, CLRUN_ERROR_INVALID_ARGUMENT);
    pthread_mutex_lock(&pool->lock);
    clrun_status status = check_caller_handle(pool, ctx, buffer, what, CLRUN_ERROR_INVALID_ARGUMENT);
    pthread_mutex_unlock(&pool->lock);
    return status;
}

/* Re-issues the live block of `from` to the other owner under a new generation, so that the
 * old handle is dead to every call; a donation remembers what it was donated as. */
static clrun_status transfer(clrun_context *ctx, const clrun_buffer *from, clrun__block_owner to,
                             const char *donated_as, clrun_buffer *out)
{
    struct clrun_pool *pool = existing_pool(ctx);
    if (pool == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT, "internal: transfer without a pool");
    pthread_mutex_lock(&pool->lock);
    clrun_status status = CLRUN_OK;
    if (!record_matches(pool, from)) {
        status = clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT,
                             "internal: transfer of a block that is not live");
    } else {
        block_record *r = &pool->records[from->slot];
        if (donated_as) {
            r->donated = true;
            r->donated_generation = r->generation;
            snprintf(r->donated_as, sizeof r->donated_as, "%s", donated_as);
        }
        r->generation++;
        r->owner = to;
        *out = *from;
        out->generation = r->generation;
    }
    pthread_mutex_unlock(&pool->lock);
    return status;
}

clrun_status clrun__pool_adopt(clrun_context *ctx, const clrun_buffer *given, const char *donated_as,
                               clrun_buffer *out)
{
    return transfer(ctx, given, CLRUN__OWNER_EXECUTOR, donated_as, out);
}

clrun_status clrun__pool_hand_over(clrun_context *ctx, const clrun_buffer *owned, clrun_buffer *out)
{
    return transfer(ctx, owned, CLRUN__OWNER_CALLER, NULL, out);
}

clrun_status clrun_pool_trim(clrun_context *ctx, uint64_t *released)
{
    struct clrun_pool *pool;
    clrun_status status = get_pool(ctx, &pool);
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
    clrun_status status = get_pool(ctx, &pool);
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
        notify(pool, false, r);
        clrun__cl.ReleaseMemObject(r->mem);
        r->live = false;
        r->mem = NULL;
        r->generation++;
        pool->free_slots[pool->free_slot_count++] = i;
    }
    clrun__allocator_reset(pool->allocator);
    pthread_mutex_unlock(&pool->lock);
    return CLRUN_OK;
}

clrun_status clrun_pool_check(clrun_context *ctx)
{
    struct clrun_pool *pool;
    clrun_status status = get_pool(ctx, &pool);
    if (status != CLRUN_OK || pool->red_zone == 0)
        return status;
    pthread_mutex_lock(&pool->lock);
    for (uint32_t i = 0; status == CLRUN_OK && i < pool->record_capacity; i++)
        if (pool->records[i].live)
            status = check_block(pool, i);
    pthread_mutex_unlock(&pool->lock);
    return status;
}

clrun_status clrun_memory_stats_get(clrun_context *ctx, clrun_memory_stats *out)
{
    if (ctx == NULL || out == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT, "clrun_memory_stats_get: NULL argument");
    struct clrun_pool *pool;
    clrun_status status = get_pool(ctx, &pool);
    if (status != CLRUN_OK)
        return status;
    pthread_mutex_lock(&pool->lock);
    clrun__allocator_stats(pool->allocator, out);
    pthread_mutex_unlock(&pool->lock);
    return CLRUN_OK;
}

void clrun_memory_reset_peaks(clrun_context *ctx)
{
    struct clrun_pool *pool;
    if (get_pool(ctx, &pool) != CLRUN_OK)
        return;
    pthread_mutex_lock(&pool->lock);
    clrun__allocator_reset_peaks(pool->allocator);
    pthread_mutex_unlock(&pool->lock);
}

clrun_status clrun__pool_observe(clrun_context *ctx, clrun__pool_observer observer, void *user)
{
    struct clrun_pool *pool;
    clrun_status status = get_pool(ctx, &pool);
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
    if (get_pool(ctx, &pool) != CLRUN_OK)
        return NULL;
    pthread_mutex_lock(&pool->lock);
    cl_mem mem = chunk < pool->chunk_capacity ? pool->chunk_mem[chunk] : NULL;
    pthread_mutex_unlock(&pool->lock);
    return mem;
}

bool clrun__pool_is_live(clrun_context *ctx, const clrun_buffer *buffer)
{
    struct clrun_pool *pool = ctx ? existing_pool(ctx) : NULL;
    if (pool == NULL || buffer == NULL)
        return false;
    pthread_mutex_lock(&pool->lock);
    bool live = record_matches(pool, buffer);
    pthread_mutex_unlock(&pool->lock);
    return live;
}
