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
