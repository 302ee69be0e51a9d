/* Stream-ordered reuse on out-of-order queues, as cudaFreeAsync orders it: a block freed while
 * its commands may still run leaves its byte range here with a marker event over those
 * commands, and every block later cut from any of those bytes, by whichever executor or caller,
 * gets the markers it overlaps as the event its first use must wait for. A range stays until its
 * marker is complete (checked when a new block overlaps it, and when the list grows), so owners
 * that come later still wait for it. On an in-order queue nothing comes here: the queue itself
 * runs every command of an old owner before any command of the next. */
#include "memory/pool_internal.h"

#include <stdlib.h>

#define PRUNE_EVERY 64 /* ranges added between two sweeps for completed markers */

/* A marker is done when the driver says so; a failed query counts as not done (one more wait). */
static bool marker_done(cl_event e)
{
    cl_int status = CL_QUEUED;
    return clrun__cl.GetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL) ==
               CL_SUCCESS &&
           status == CL_COMPLETE;
}

static void drop(struct clrun_pool *pool, size_t i)
{
    clrun__cl.ReleaseEvent(pool->pending[i].done);
    pool->pending[i] = pool->pending[--pool->pending_count];
}

static void prune(struct clrun_pool *pool)
{
    for (size_t i = 0; i < pool->pending_count;)
        if (marker_done(pool->pending[i].done))
            drop(pool, i);
        else
            i++;
}

static bool overlaps(const pending_range *p, cl_mem chunk, uint64_t offset, uint64_t size)
{
    return p->chunk == chunk && p->offset < offset + size && offset < p->offset + p->size;
}

clrun_status clrun__pool_pending_add(struct clrun_pool *pool, const block_record *r, cl_uint count,
                                     const cl_event *events)
{
    if (pool->pending_count && pool->pending_count % PRUNE_EVERY == 0)
        prune(pool);
    void *pending = pool->pending;
    if (!clrun__grow(&pending, &pool->pending_capacity, pool->pending_count + 1, sizeof *pool->pending))
        return clrun__fail(pool->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for pending frees");
    pool->pending = pending;
    cl_event marker = NULL;
    cl_int error = clrun__cl.EnqueueMarkerWithWaitList(pool->ctx->queue, count, events, &marker);
    if (error != CL_SUCCESS)
        return clrun__fail_cl(pool->ctx, error, "clEnqueueMarkerWithWaitList", "ordering the free of '%s'",
                              r->label);
    pool->pending[pool->pending_count++] =
        (pending_range){clrun__pool_record_chunk(pool, r), r->block_offset, r->held, marker};
    return CLRUN_OK;
}

clrun_status clrun__pool_pending_wait_for(struct clrun_pool *pool, block_record *r)
{
    r->wait = NULL;
    cl_mem chunk = clrun__pool_record_chunk(pool, r);
    cl_event stack[8], *waits = stack;
    size_t count = 0, capacity = sizeof stack / sizeof stack[0];
    clrun_status status = CLRUN_OK;
    for (size_t i = 0; i < pool->pending_count;) {
        pending_range *p = &pool->pending[i];
        if (!overlaps(p, chunk, r->block_offset, r->held)) {
            i++;
        } else if (marker_done(p->done)) {
            drop(pool, i);
        } else {
            if (count == capacity) {
                cl_event *grown = malloc(2 * capacity * sizeof *grown);
                if (grown == NULL) {
                    status = clrun__fail(pool->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
                    break;
                }
                for (size_t k = 0; k < count; k++)
                    grown[k] = waits[k];
                if (waits != stack)
                    free(waits);
                waits = grown;
                capacity *= 2;
            }
            waits[count++] = p->done;
            i++;
        }
    }
    if (status == CLRUN_OK && count == 1) {
        clrun__cl.RetainEvent(waits[0]);
        r->wait = waits[0];
    } else if (status == CLRUN_OK && count > 1) {
        cl_int error = clrun__cl.EnqueueMarkerWithWaitList(pool->ctx->queue, (cl_uint)count, waits, &r->wait);
        if (error != CL_SUCCESS)
            status = clrun__fail_cl(pool->ctx, error, "clEnqueueMarkerWithWaitList",
                                    "ordering the reuse of %zu freed ranges", count);
    }
    if (waits != stack)
        free(waits);
    return status;
}

void clrun__pool_pending_destroy(struct clrun_pool *pool)
{
    for (size_t i = 0; i < pool->pending_count; i++)
        clrun__cl.ReleaseEvent(pool->pending[i].done);
    free(pool->pending);
}
