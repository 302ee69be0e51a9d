/* The memory of each schedule buffer in the executor's three modes: a pool block (pooled), a
 * driver buffer per run (naive), or a view of the planned arena (planned); and, on out-of-order
 * queues, the events that order reuse. */
#include <clrun/exec.h>
#include <clrun/plan.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec_internal.h"
#include "exec/exec_watch.h"

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

/* ---- groups of outputs laid out back to back ----------------------------------------------- */

void clrun__exec_groups_free(clrun_exec *e)
{
    clrun__buffer_groups_free(&e->out_groups);
    free(e->group_outputs);
    free(e->group_states);
    free(e->member_views);
    e->group_outputs = NULL;
    e->group_states = NULL;
    e->member_views = NULL;
}

cl_mem clrun__exec_group_mem(const clrun_exec *e, int32_t g, uint64_t *offset)
{
    *offset = 0;
    if (e->options.mode == CLRUN_EXEC_PLANNED) {
        *offset = e->group_offsets[g];
        return e->arena;
    }
    const group_state *gs = &e->group_states[g];
    if (gs->live == 0)
        return NULL;
    return e->options.mode == CLRUN_EXEC_NAIVE ? gs->raw : gs->block.mem;
}

/* Pooled and naive modes: member b of group g gets a view into the group's memory, taken for
 * the group by its first member. */
static clrun_status take_grouped(clrun_exec *e, int32_t b, int32_t g, uint64_t *added)
{
    buffer_state *s = &e->buffers[b];
    group_state *gs = &e->group_states[g];
    const clrun__buffer_groups *gr = &e->out_groups;
    bool naive = e->options.mode == CLRUN_EXEC_NAIVE;
    char label[CLRUN__EXEC_LABEL];
    const char *name = clrun__exec_buffer_label(e, gr->member[gr->start[g]], label, sizeof label);
    if (gs->live == 0) {
        clrun_status status =
            naive ? clrun__pool_create_raw(e->ctx, gr->bytes[g], name, &gs->raw)
                  : clrun__pool_alloc_owned(e->ctx, gr->bytes[g], 0, name, &gs->block);
        if (status != CLRUN_OK)
            return status;
        *added = gr->bytes[g];
    }
    uint64_t offset = 0;
    for (int32_t m = gr->start[g]; m < gr->start[g + 1]; m++)
        if (gr->member[m] == b)
            offset = gr->offset[m];
    cl_mem parent = naive ? gs->raw : clrun__pool_chunk_mem(e->ctx, gs->block.chunk);
    uint64_t base = naive ? 0 : gs->block.offset;
    cl_buffer_region region = {(size_t)(base + offset), (size_t)e->schedule.buffers[b].bytes};
    cl_int error = CL_INVALID_MEM_OBJECT;
    cl_mem view = parent ? clrun__cl.CreateSubBuffer(parent, CL_MEM_READ_WRITE,
                                                     CL_BUFFER_CREATE_TYPE_REGION, &region, &error)
                         : NULL;
    if (view == NULL) {
        if (gs->live == 0) {
            if (naive)
                clrun__pool_release_raw(e->ctx, gs->raw, gr->bytes[g]);
            else
                clrun__pool_free_owned(e->ctx, &gs->block);
            gs->raw = NULL;
            *added = 0;
        }
        return clrun__fail_cl(e->ctx, error, "clCreateSubBuffer", "a view of %s in its group",
                              clrun__exec_buffer_label(e, b, label, sizeof label));
    }
    gs->live++;
    e->member_views[b] = view;
    s->mem = view;
    s->range_chunk = naive ? ARENA : gs->block.chunk;
    s->range_offset = base + offset;
    s->range_size = e->schedule.buffers[b].bytes;
    s->live = true;
    return CLRUN_OK;
}

/* A member's view released; its group's memory with the last one (the pool's status: its
 * guard reports a write past the group's end there). */
static clrun_status give_back_grouped(clrun_exec *e, int32_t b, int32_t g)
{
    buffer_state *s = &e->buffers[b];
    group_state *gs = &e->group_states[g];
    if (e->member_views[b])
        clrun__cl.ReleaseMemObject(e->member_views[b]);
    e->member_views[b] = NULL;
    clrun__exec_drop_events(s);
    s->live = false;
    s->mem = NULL;
    if (--gs->live > 0)
        return CLRUN_OK;
    clrun_status status = CLRUN_OK;
    if (e->options.mode == CLRUN_EXEC_NAIVE)
        clrun__pool_release_raw(e->ctx, gs->raw, e->out_groups.bytes[g]);
    else
        status = clrun__pool_free_owned(e->ctx, &gs->block);
    gs->raw = NULL;
    return status;
}

/* Whether output i may be in a group at all: the executor runs in order, with no loop. */
static bool groups_possible(const clrun_exec *e)
{
    return !e->ctx->out_of_order && e->loops == NULL && !e->arena_shared && !e->have_outputs;
}

clrun_status clrun__exec_group_outputs(clrun_exec *e, int32_t count, const int32_t *start,
                                       const int32_t *outputs, uint64_t *offsets, uint64_t *bytes)
{
    if (e == NULL || count < 0 || (count > 0 && (!start || !outputs || !offsets || !bytes)))
        return clrun__fail(e ? e->ctx : NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                           "clrun__exec_group_outputs: NULL argument");
    for (int32_t g = 0; g < count; g++)
        if (start[0] != 0 || start[g + 1] < start[g])
            return clrun__fail(e->ctx, CLRUN_ERROR_INVALID_ARGUMENT, "clrun__exec_group_outputs: "
                               "group %d's outputs do not follow the previous group's", (int)g);
    int32_t total = count > 0 ? start[count] : 0;
    for (int32_t g = 0; g < count; g++)
        bytes[g] = 0;
    for (int32_t k = 0; k < total; k++) {
        if (outputs[k] < 0 || outputs[k] >= e->graph->output_count)
            return clrun__fail(e->ctx, CLRUN_ERROR_INVALID_ARGUMENT, "output %d does not exist "
                               "(graph has %d)", (int)outputs[k], (int)e->graph->output_count);
        offsets[k] = 0;
    }
    pthread_mutex_lock(&e->lock);
    clrun__exec_groups_free(e);
    int32_t *buffers = calloc((size_t)total + 1, sizeof *buffers);
    bool *kept = calloc((size_t)count + 1, sizeof *kept);
    clrun_status status = buffers && kept ? CLRUN_OK : CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    for (int32_t k = 0; status == CLRUN_OK && k < total; k++) {
        int32_t t = e->graph->outputs[outputs[k]];
        int32_t b = e->schedule.buffer_of[t];
        /* the output must be its buffer's whole: a buffer larger than it is another's too */
        bool whole = clrun_tensor_bytes(&e->graph->tensors[t].type) == e->schedule.buffers[b].bytes;
        buffers[k] = whole && groups_possible(e) ? b : -1;
    }
    if (status == CLRUN_OK)
        status = clrun__buffer_groups_make(&e->schedule, buffers, start, count,
                                           e->ctx->info.base_addr_align, &e->out_groups, kept);
    int32_t groups = e->out_groups.count;
    if (status == CLRUN_OK && groups > 0) {
        e->group_outputs = calloc((size_t)total + 1, sizeof *e->group_outputs);
        e->group_states = calloc((size_t)groups + 1, sizeof *e->group_states);
        e->member_views = calloc((size_t)e->schedule.buffer_count + 1, sizeof *e->member_views);
        if (!e->group_outputs || !e->group_states || !e->member_views)
            status = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    for (int32_t g = 0, kg = 0; status == CLRUN_OK && g < count; g++) {
        if (!kept[g])
            continue;
        for (int32_t k = start[g], m = e->out_groups.start[kg]; k < start[g + 1]; k++, m++) {
            offsets[k] = e->out_groups.offset[m];
            e->group_outputs[m] = outputs[k];
        }
        bytes[g] = e->out_groups.bytes[kg++];
    }
    if (status != CLRUN_OK)
        status = clrun__fail(e->ctx, status, "out of host memory grouping outputs");
    if (status == CLRUN_OK && groups > 0 && e->options.mode == CLRUN_EXEC_PLANNED) {
        /* the arena again, each group one buffer in it; if that fails, without the groups */
        clrun__exec_drop_arena(e);
        status = clrun__exec_prepare_arena(e);
        if (status != CLRUN_OK) {
            clrun__exec_drop_arena(e);
            clrun__exec_groups_free(e);
            for (int32_t g = 0; g < count; g++)
                bytes[g] = 0;
            for (int32_t k = 0; k < total; k++)
                offsets[k] = 0;
            status = clrun__exec_prepare_arena(e);
        }
    }
    if (status != CLRUN_OK)
        clrun__exec_groups_free(e);
    free(buffers);
    free(kept);
    pthread_mutex_unlock(&e->lock);
    return status;
}

/* ---- concats assembled in place ----------------------------------------------------------- */

void clrun__exec_drop_parts(clrun_exec *e, int32_t whole)
{
    const clrun__node *cat = &e->graph->nodes[e->graph->tensors[whole].producer];
    for (int k = 0; e->part_views && k < cat->input_count; k++) {
        cl_mem *view = &e->part_views[cat->inputs[k]];
        if (*view)
            clrun__cl.ReleaseMemObject(*view);
        *view = NULL;
    }
}

clrun_status clrun__exec_take_parts(clrun_exec *e, int32_t whole)
{
    /* a view cannot be made of a view: the buffer's own parent, at the buffer's offset in it */
    cl_mem parent = NULL;
    size_t base = 0;
    cl_int error = clrun__cl_mem_place(e->buffers[e->schedule.buffer_of[whole]].mem, &parent, &base);
    if (error != CL_SUCCESS)
        return clrun__fail_cl(e->ctx, error, "clGetMemObjectInfo", "where '%s' lies",
                              clrun__exec_tensor_name(e, whole));
    const clrun__node *cat = &e->graph->nodes[e->graph->tensors[whole].producer];
    for (int k = 0; k < cat->input_count; k++) {
        int32_t t = cat->inputs[k];
        if (e->schedule.part_of[t] != whole)
            continue; /* copied by the concat, from a buffer of its own */
        cl_buffer_region region = {base + (size_t)e->schedule.part_offset[t],
                                   (size_t)clrun_tensor_bytes(&e->graph->tensors[t].type)};
        e->part_views[t] = clrun__cl.CreateSubBuffer(parent, CL_MEM_READ_WRITE,
                                                     CL_BUFFER_CREATE_TYPE_REGION, &region, &error);
        if (e->part_views[t] == NULL) {
            clrun__exec_drop_parts(e, whole);
            return clrun__fail_cl(e->ctx, error, "clCreateSubBuffer",
                                  "a view of '%s' in '%s', which it is concatenated into",
                                  clrun__exec_tensor_name(e, t), clrun__exec_tensor_name(e, whole));
        }
    }
    return CLRUN_OK;
}

clrun_status clrun__exec_take_memory(clrun_exec *e, int32_t b, uint64_t *added)
{
    buffer_state *s = &e->buffers[b];
    const clrun__sched_buffer *sb = &e->schedule.buffers[b];
    *added = 0;
    if (sb->is_host) /* an offloaded tensor: host memory, in every mode */
        return clrun__exec_host_take(e, b);
    int32_t group = e->out_groups.count > 0 ? e->out_groups.group_of[b] : -1;
    if (group >= 0 && e->options.mode != CLRUN_EXEC_PLANNED)
        return take_grouped(e, b, group, added);
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
        *added = sb->bytes;
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
        *added = sb->bytes;
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
    int32_t group = e->out_groups.count > 0 ? e->out_groups.group_of[b] : -1;
    if (group >= 0 && e->options.mode != CLRUN_EXEC_PLANNED)
        return give_back_grouped(e, b, group);
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
