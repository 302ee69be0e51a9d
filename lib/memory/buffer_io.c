/* Copies between host memory and the caller's pool blocks. */
#include <clrun/memory.h>

#include "device/cl.h"
#include "device/context.h"
#include "memory/pool.h"

/* Only a live block of the caller's: a stale copy would hand a released cl_mem to the driver,
 * or write into the block's next owner. */
static clrun_status check(clrun_context *ctx, const clrun_buffer *buffer, const void *host, const char *what)
{
    if (ctx == NULL || buffer == NULL || host == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT, "%s: NULL argument", what);
    return clrun__pool_check_caller(ctx, buffer, what);
}

clrun_status clrun_buffer_write(clrun_context *ctx, const clrun_buffer *buffer, const void *host)
{
    clrun_status status = check(ctx, buffer, host, "clrun_buffer_write");
    return status == CLRUN_OK ? clrun__buffer_write_owned(ctx, buffer, host) : status;
}

clrun_status clrun__buffer_write_owned(clrun_context *ctx, const clrun_buffer *buffer,
                                       const void *host)
{
    return clrun__buffer_write_range(ctx, buffer, 0, buffer->size, host);
}

clrun_status clrun__buffer_write_range(clrun_context *ctx, const clrun_buffer *buffer,
                                       uint64_t offset, uint64_t bytes, const void *host)
{
    /* An executor's block may still carry the earlier owners of its bytes (out-of-order queues):
     * the write waits for them. A caller's block never does: clrun_alloc waited already. */
    cl_event wait = NULL;
    clrun_status status = clrun__pool_take_wait(ctx, buffer, &wait);
    if (status != CLRUN_OK)
        return status;
    cl_int error = clrun__cl.EnqueueWriteBuffer(ctx->queue, buffer->mem, CL_TRUE, (size_t)offset,
                                                (size_t)bytes, host, wait ? 1 : 0, wait ? &wait : NULL, NULL);
    if (wait)
        clrun__cl.ReleaseEvent(wait);
    if (error != CL_SUCCESS)
        return clrun__fail_cl(ctx, error, "clEnqueueWriteBuffer", "%llu bytes at %llu",
                              (unsigned long long)bytes, (unsigned long long)offset);
    return CLRUN_OK;
}

clrun_status clrun__buffer_map_write(clrun_context *ctx, const clrun_buffer *buffer, void **host)
{
    *host = NULL;
    cl_event wait = NULL;
    clrun_status status = clrun__pool_take_wait(ctx, buffer, &wait);
    if (status != CLRUN_OK)
        return status;
    cl_int error = CL_SUCCESS;
    void *mapped = clrun__cl.EnqueueMapBuffer(ctx->queue, buffer->mem, CL_TRUE, CL_MAP_WRITE_INVALIDATE_REGION,
                                              0, (size_t)buffer->size, wait ? 1 : 0, wait ? &wait : NULL,
                                              NULL, &error);
    if (wait)
        clrun__cl.ReleaseEvent(wait);
    if (mapped == NULL || error != CL_SUCCESS)
        return clrun__fail_cl(ctx, error != CL_SUCCESS ? error : CL_MAP_FAILURE, "clEnqueueMapBuffer",
                              "%llu bytes to write", (unsigned long long)buffer->size);
    *host = mapped;
    return CLRUN_OK;
}

clrun_status clrun__buffer_unmap_written(clrun_context *ctx, const clrun_buffer *buffer, void *host)
{
    cl_event done = NULL;
    cl_int error = clrun__cl.EnqueueUnmapMemObject(ctx->queue, buffer->mem, host, 0, NULL, &done);
    if (error == CL_SUCCESS)
        error = clrun__cl.WaitForEvents(1, &done);
    if (done)
        clrun__cl.ReleaseEvent(done);
    if (error != CL_SUCCESS)
        return clrun__fail_cl(ctx, error, "clEnqueueUnmapMemObject", "%llu bytes written",
                              (unsigned long long)buffer->size);
    return CLRUN_OK;
}

clrun_status clrun_buffer_read(clrun_context *ctx, const clrun_buffer *buffer, void *host)
{
    clrun_status status = check(ctx, buffer, host, "clrun_buffer_read");
    if (status != CLRUN_OK)
        return status;
    cl_int error = clrun__cl.EnqueueReadBuffer(ctx->queue, buffer->mem, CL_TRUE, 0, (size_t)buffer->size, host,
                                               0, NULL, NULL);
    if (error != CL_SUCCESS)
        return clrun__fail_cl(ctx, error, "clEnqueueReadBuffer", "%llu bytes", (unsigned long long)buffer->size);
    return CLRUN_OK;
}
