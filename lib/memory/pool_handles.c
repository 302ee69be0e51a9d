/* Handles of the pool's blocks: what a clrun_buffer is to the pool (live, freed, donated,
 * another context's), who may pass it to the public calls, and moving a block between the
 * caller and an executor under a new generation, so that the old handle is dead to every call. */
#include "memory/pool_internal.h"

#include <stdio.h>
#include <string.h>

bool clrun__pool_record_matches(const struct clrun_pool *pool, const clrun_buffer *b)
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
    if (clrun__pool_record_matches(pool, b))
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

clrun_status clrun_free(clrun_context *ctx, clrun_buffer *buffer)
{
    if (ctx == NULL || buffer == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT, "clrun_free: NULL argument");
    struct clrun_pool *pool = clrun__pool_existing(ctx);
    if (pool == NULL)
        return check_caller_handle(NULL, ctx, buffer, "clrun_free", CLRUN_ERROR_INVALID_FREE);
    pthread_mutex_lock(&pool->lock);
    clrun_status status = check_caller_handle(pool, ctx, buffer, "clrun_free", CLRUN_ERROR_INVALID_FREE);
    if (status == CLRUN_OK)
        status = clrun__pool_free_locked(pool, buffer);
    pthread_mutex_unlock(&pool->lock);
    return status;
}

clrun_status clrun__pool_check_caller(clrun_context *ctx, const clrun_buffer *buffer,
                                      const char *what)
{
    if (ctx == NULL || buffer == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT, "%s: NULL argument", what);
    struct clrun_pool *pool = clrun__pool_existing(ctx);
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
    struct clrun_pool *pool = clrun__pool_existing(ctx);
    if (pool == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT, "internal: transfer without a pool");
    pthread_mutex_lock(&pool->lock);
    clrun_status status = CLRUN_OK;
    if (!clrun__pool_record_matches(pool, from)) {
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

bool clrun__pool_is_live(clrun_context *ctx, const clrun_buffer *buffer)
{
    struct clrun_pool *pool = ctx ? clrun__pool_existing(ctx) : NULL;
    if (pool == NULL || buffer == NULL)
        return false;
    pthread_mutex_lock(&pool->lock);
    bool live = clrun__pool_record_matches(pool, buffer);
    pthread_mutex_unlock(&pool->lock);
    return live;
}
