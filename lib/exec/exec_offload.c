/* The host memory of offloaded tensors (graph/offload.h): a buffer the schedule marks is_host
 * (an `offload` node's output) gets a driver buffer of its own allocated in host memory
 * (CL_MEM_ALLOC_HOST_PTR), outside the pool and the planned arena, so that it counts against
 * no device budget. It is made at its first use and kept, and freed with the executor; every
 * allocator mode (planned, pooled, naive) takes it the same way. */
#include <stdlib.h>

#include "exec/exec_internal.h"

/* Out-of-order queues order reuse by ranges; a host buffer's range is its own: this chunk,
 * offset its buffer index. */
#define HOST_RANGE (UINT32_MAX - 1)

clrun_status clrun__exec_host_take(clrun_exec *e, int32_t b)
{
    buffer_state *s = &e->buffers[b];
    if (e->host_mems == NULL) {
        e->host_mems = calloc((size_t)e->schedule.buffer_count + 1, sizeof *e->host_mems);
        if (e->host_mems == NULL)
            return clrun__fail(e->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    if (e->host_mems[b] == NULL) {
        cl_int error = CL_SUCCESS;
        uint64_t bytes = e->schedule.buffers[b].bytes;
        e->host_mems[b] = clrun__cl.CreateBuffer(e->ctx->cl, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR,
                                                 (size_t)(bytes ? bytes : 1), NULL, &error);
        if (e->host_mems[b] == NULL)
            return clrun__fail_cl(e->ctx, error == CL_SUCCESS ? CL_OUT_OF_HOST_MEMORY : error,
                                  "clCreateBuffer", "host memory of %llu bytes for offloaded '%s'",
                                  (unsigned long long)bytes,
                                  clrun__exec_tensor_name(e, e->schedule.buffers[b].root));
    }
    s->mem = e->host_mems[b];
    s->range_chunk = HOST_RANGE;
    s->range_offset = (uint64_t)b;
    s->range_size = 1;
    s->live = true;
    return CLRUN_OK;
}

void clrun__exec_host_release(clrun_exec *e)
{
    if (e->copy_queue) {
        clFinish(e->copy_queue); /* not counted: teardown must not be made to fail */
        clrun__cl.ReleaseCommandQueue(e->copy_queue);
        e->copy_queue = NULL;
    }
    for (int32_t i = 0; i < e->flight_count; i++)
        clrun__cl.ReleaseEvent(e->flights[i].done);
    free(e->flights);
    e->flights = NULL;
    e->flight_count = 0;
    for (int32_t b = 0; e->host_mems && b < e->schedule.buffer_count; b++)
        if (e->host_mems[b])
            clrun__cl.ReleaseMemObject(e->host_mems[b]);
    free(e->host_mems);
    e->host_mems = NULL;
}

int32_t clrun_exec_offloaded(const clrun_exec *e, const char *const **names)
{
    if (names)
        *names = e ? e->offloaded : NULL;
    return e && e->offloaded ? e->offloaded_count : 0;
}

/* ---- the copies on a second queue ----------------------------------------------------------
 * With an in-order queue the kernels run one after the other, and so would the copies between
 * them. On a queue of their own (in order too: a tensor's copy back comes after its copy out)
 * they run beside the kernels: each starts behind a marker on the kernels' queue, which
 * completes once everything enqueued before it has (the source's writer; the earlier users of
 * the destination's bytes), and the kernels wait on a copy's event only where they touch its
 * device buffer: a reload's readers, and whoever writes over an offload's source. */

bool clrun__exec_copies_beside(const clrun_context *ctx)
{
    return ctx->options.offload_overlap && !ctx->out_of_order && !ctx->options.guard;
}

bool clrun__exec_overlaps_copies(const clrun_exec *e)
{
    return e->schedule.host_buffers > 0 && clrun__exec_copies_beside(e->ctx) && e->loops == NULL;
}

static clrun_status make_copy_queue(clrun_exec *e)
{
    if (e->copy_queue)
        return CLRUN_OK;
    cl_command_queue_properties props = e->ctx->info.profiling ? CL_QUEUE_PROFILING_ENABLE : 0;
    cl_int err = CL_SUCCESS;
    e->copy_queue = clrun__cl.CreateCommandQueue(e->ctx->cl, e->ctx->device, props, &err);
    if (e->copy_queue == NULL)
        return clrun__fail_cl(e->ctx, err, "clCreateCommandQueue", "the queue of host copies on '%s'",
                              e->ctx->info.name);
    return CLRUN_OK;
}

clrun_status clrun__exec_copy_step(clrun_exec *e, const clrun__node *node, const cl_mem *in_mems,
                                   const cl_mem *out_mems, cl_event *done)
{
    *done = NULL;
    bool reload = !clrun__op_on_host(node->op);
    int32_t b = e->schedule.buffer_of[reload ? node->outputs[0] : node->inputs[0]];
    uint64_t bytes = clrun_tensor_bytes(&e->graph->tensors[node->inputs[0]].type);
    void *grown = e->flights;
    if (!clrun__grow(&grown, &e->flight_capacity, (size_t)e->flight_count + 1, sizeof *e->flights))
        return clrun__fail(e->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    e->flights = grown;
    clrun_status s = make_copy_queue(e);
    if (s != CLRUN_OK)
        return s;
    cl_event marker = NULL, copy = NULL;
    cl_int err = clrun__cl.EnqueueMarkerWithWaitList(e->ctx->queue, 0, NULL, &marker);
    if (err == CL_SUCCESS) /* a command of one queue waited on by another's: flushed first */
        err = clrun__cl.Flush(e->ctx->queue);
    if (err != CL_SUCCESS) {
        if (marker)
            clrun__cl.ReleaseEvent(marker);
        return clrun__fail_cl(e->ctx, err, "clEnqueueMarkerWithWaitList", "ordering a host copy");
    }
    err = clrun__cl.EnqueueCopyBuffer(e->copy_queue, in_mems[0], out_mems[0], 0, 0, (size_t)bytes,
                                      1, &marker, &copy);
    clrun__cl.ReleaseEvent(marker);
    if (err == CL_SUCCESS)
        err = clrun__cl.Flush(e->copy_queue);
    if (err != CL_SUCCESS) {
        if (copy)
            clrun__cl.ReleaseEvent(copy);
        return clrun__fail_cl(e->ctx, err, "clEnqueueCopyBuffer", "a host transfer of %llu bytes "
                              "('%s')", (unsigned long long)bytes,
                              clrun__exec_tensor_name(e, node->outputs[0]));
    }
    const buffer_state *st = &e->buffers[b];
    e->flights[e->flight_count++] = (copy_flight){b, st->range_chunk, st->range_offset,
                                                  st->range_size, reload, copy};
    clrun__cl.RetainEvent(copy);
    *done = copy;
    return CLRUN_OK;
}

/* Whether a kernel writing buffer b must wait for flight f. */
static bool written_under(const clrun_exec *e, const copy_flight *f, int32_t b)
{
    if (f->buffer == b)
        return true;
    const buffer_state *s = &e->buffers[b];
    /* naive buffers are the driver's own, which keeps one alive while a copy uses it */
    return e->options.mode != CLRUN_EXEC_NAIVE && f->chunk == s->range_chunk && f->size > 0 &&
           s->range_size > 0 && f->offset < s->range_offset + s->range_size &&
           s->range_offset < f->offset + f->size;
}

clrun_status clrun__exec_copy_waits(clrun_exec *e, const clrun__node *node, const int32_t *written,
                                    int written_count, cl_event **list, cl_uint *count)
{
    *list = NULL;
    *count = 0;
    if (e->flight_count == 0)
        return CLRUN_OK;
    cl_event *waits = malloc(sizeof *waits * (size_t)e->flight_count);
    if (waits == NULL)
        return clrun__fail(e->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    int32_t kept = 0;
    for (int32_t i = 0; i < e->flight_count; i++) {
        const copy_flight *f = &e->flights[i];
        bool wait = false;
        for (int k = 0; f->writes && !wait && k < node->input_count; k++)
            wait = e->graph->tensors[node->inputs[k]].kind != CLRUN__TENSOR_CONSTANT &&
                   e->schedule.buffer_of[node->inputs[k]] == f->buffer;
        for (int w = 0; !wait && w < written_count; w++)
            wait = written_under(e, f, written[w]);
        if (wait)
            waits[(*count)++] = f->done;
        else
            e->flights[kept++] = *f;
    }
    e->flight_count = kept;
    if (*count == 0) {
        free(waits);
        return CLRUN_OK;
    }
    *list = waits;
    return CLRUN_OK;
}

clrun_status clrun__exec_copy_before_free(clrun_exec *e, int32_t b)
{
    int32_t kept = 0, n = 0;
    cl_event waits[8];
    clrun_status status = CLRUN_OK;
    for (int32_t i = 0; i < e->flight_count; i++) {
        copy_flight *f = &e->flights[i];
        if (f->buffer != b) {
            e->flights[kept++] = *f;
            continue;
        }
        if (n == 8) { /* a buffer has one copy out per run: never more than a few */
            cl_int err = clrun__cl.EnqueueMarkerWithWaitList(e->ctx->queue, (cl_uint)n, waits, NULL);
            if (err != CL_SUCCESS && status == CLRUN_OK)
                status = clrun__fail_cl(e->ctx, err, "clEnqueueMarkerWithWaitList", "ordering a free");
            for (int32_t k = 0; k < n; k++)
                clrun__cl.ReleaseEvent(waits[k]);
            n = 0;
        }
        waits[n++] = f->done;
    }
    e->flight_count = kept;
    if (n > 0) { /* an in-order queue: what comes after the marker waits for it */
        cl_int err = clrun__cl.EnqueueMarkerWithWaitList(e->ctx->queue, (cl_uint)n, waits, NULL);
        if (err != CL_SUCCESS && status == CLRUN_OK)
            status = clrun__fail_cl(e->ctx, err, "clEnqueueMarkerWithWaitList", "ordering a free");
        for (int32_t k = 0; k < n; k++)
            clrun__cl.ReleaseEvent(waits[k]);
    }
    return status;
}

clrun_status clrun__exec_copies_finish(clrun_exec *e)
{
    cl_int err = e->copy_queue ? clrun__cl.Finish(e->copy_queue) : CL_SUCCESS;
    for (int32_t i = 0; i < e->flight_count; i++)
        clrun__cl.ReleaseEvent(e->flights[i].done);
    e->flight_count = 0;
    if (err != CL_SUCCESS)
        return clrun__fail_cl(e->ctx, err, "clFinish", "the queue of host copies");
    return CLRUN_OK;
}
