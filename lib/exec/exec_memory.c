/* The memory of each schedule buffer in the executor's three modes: a pool block (pooled), a
 * driver buffer per run (naive), or a view of the planned arena (planned); and, on out-of-order
 * queues, the events that order reuse. */
#include <clrun/exec.h>
#include <clrun/plan.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec_internal.h"

/* ---- events (out-of-order queues) ---------------------------------------------------------- */

bool clrun__exec_add_event(buffer_state *b, cl_event event)
{
    if (event == NULL)
        return true;
    void *events = b->events;
    if (!clrun__grow(&events, &b->event_capacity, (size_t)b->event_count + 1, sizeof *b->events))
        return false;
    b->events = events;
    clrun__cl.RetainEvent(event);
    b->events[b->event_count++] = event;
    return true;
}

void clrun__exec_drop_events(buffer_state *b)
{
    for (int32_t i = 0; i < b->event_count; i++)
        clrun__cl.ReleaseEvent(b->events[i]);
    b->event_count = 0;
}

void clrun__exec_drop_pending(clrun_exec *e)
{
    for (int32_t i = 0; i < e->pending_count; i++)
        clrun__cl.ReleaseEvent(e->pending[i].done);
    e->pending_count = 0;
}

/* ---- memory of one buffer --------------------------------------------------------------------- */

clrun_status clrun__exec_take_memory(clrun_exec *e, int32_t b)
{
    buffer_state *s = &e->buffers[b];
    const clrun__sched_buffer *sb = &e->schedule.buffers[b];
    if (sb->is_host) /* an offloaded tensor: host memory, in every mode */
        return clrun__exec_host_take(e, b);
    if (e->options.mode == CLRUN_EXEC_PLANNED) {
        int32_t host = e->host_of ? e->host_of[b] : -1;
        if (host >= 0) { /* in a donated input's block, bound to this run's block */
            const clrun_buffer *block = &e->buffers[host].block;
            s->mem = e->region_views[b];
            s->range_chunk = block->chunk;
            s->range_offset = block->offset + e->arena_offsets[b];
        } else {
            s->mem = e->arena_views[b];
            s->range_chunk = ARENA;
            s->range_offset = e->arena_offsets[b];
        }
        s->range_size = sb->bytes;
    } else if (e->options.mode == CLRUN_EXEC_NAIVE) {
        /* A driver buffer of its own, but counted by the pool and held to its limit. */
        char label[CLRUN__EXEC_LABEL];
        const char *name = clrun__exec_buffer_label(e, b, label, sizeof label);
        clrun_status status = clrun__pool_create_raw(e->ctx, sb->bytes, name, &s->mem);
        if (status != CLRUN_OK)
            return status;
    } else {
        clrun_buffer block;
        char label[CLRUN__EXEC_LABEL];
        const char *name = clrun__exec_buffer_label(e, b, label, sizeof label);
        clrun_status status = clrun__pool_alloc_owned(e->ctx, sb->bytes, 0, name, &block);
        /* Out of order: the earlier owners of these bytes, from this executor or another, may
         * still run; the writer waits for them (gather_waits takes the buffer's events). */
        cl_event wait = NULL;
        if (status == CLRUN_OK)
            status = clrun__pool_take_wait(e->ctx, &block, &wait);
        if (wait) {
            if (!clrun__exec_add_event(s, wait))
                status = clrun__fail(e->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
            clrun__cl.ReleaseEvent(wait);
        }
        if (status != CLRUN_OK) {
            if (block.mem)
                clrun__pool_free_owned(e->ctx, &block);
            clrun__exec_drop_events(s);
            return status;
        }
        clrun__exec_hold_block(s, &block);
    }
    s->live = true;
    return CLRUN_OK;
}

/* Out-of-order: the marker that says every user of buffer b is done, kept with its range. */
static clrun_status remember_pending(clrun_exec *e, buffer_state *s)
{
    void *pending = e->pending;
    if (!clrun__grow(&pending, &e->pending_capacity, (size_t)e->pending_count + 1,
                     sizeof *e->pending))
        return clrun__fail(e->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for pending frees");
    e->pending = pending;
    cl_event marker = NULL;
    cl_int error = clrun__cl.EnqueueMarkerWithWaitList(e->ctx->queue, (cl_uint)s->event_count,
                                                       s->event_count ? s->events : NULL, &marker);
    if (error != CL_SUCCESS)
        return clrun__fail_cl(e->ctx, error, "clEnqueueMarkerWithWaitList", "ordering a free");
    e->pending[e->pending_count++] = (pending_free){s->range_chunk, s->range_offset, s->range_size, marker};
    return CLRUN_OK;
}

clrun_status clrun__exec_give_back(clrun_exec *e, int32_t b)
{
    buffer_state *s = &e->buffers[b];
    if (!s->live)
        return CLRUN_OK;
    clrun_status status = CLRUN_OK;
    bool is_input = e->schedule.buffers[b].is_input;
    if (e->schedule.buffers[b].is_host) { /* kept for the next run, freed with the executor */
        clrun__exec_drop_events(s);
        s->live = false;
        s->mem = NULL;
        return CLRUN_OK;
    }
    bool to_pool = !s->hosting && (e->options.mode == CLRUN_EXEC_POOLED || is_input);
    /* Out of order: whoever next takes these bytes must wait for every command that used them.
     * A pool block is freed in stream order through the pool, so that every later owner waits,
     * from this executor or another; an arena range or a range in a donated input's block is
     * this executor's alone, and it orders their reuse itself. */
    if (e->ctx->out_of_order && s->event_count && !to_pool)
        status = remember_pending(e, s);
    if (s->hosting) { /* a donated input holding later buffers: its block stays to the end */
        clrun__exec_drop_events(s);
        return status;
    }
    if (e->options.mode == CLRUN_EXEC_NAIVE && !is_input) {
        clrun__pool_release_raw(e->ctx, s->mem, e->schedule.buffers[b].bytes);
    } else if (to_pool) {
        clrun_status freed = clrun__pool_free_owned_after(e->ctx, &s->block, (cl_uint)s->event_count, s->events);
        if (status == CLRUN_OK)
            status = freed;
    }
    clrun__exec_drop_events(s);
    s->live = false;
    s->mem = NULL;
    return status;
}

const char *clrun__exec_buffer_label(const clrun_exec *e, int32_t b, char *buf, size_t size)
{
    const clrun__sched_buffer *sb = &e->schedule.buffers[b];
    const char *name = clrun__exec_tensor_name(e, sb->root);
    if (!sb->is_scratch)
        return name;
    if (sb->part == 0)
        snprintf(buf, size, "'%s' scratch", name);
    else
        snprintf(buf, size, "'%s' scratch %d", name, sb->part + 1);
    return buf;
}
