/* Copies between host memory and pool blocks. */
#include <clrun/exec.h>

#include "device/cl.h"
#include "device/context.h"

static clrun_status check(clrun_context *ctx, const clrun_buffer *buffer, const void *host, const char *what)
{
    if (ctx == NULL || buffer == NULL || host == NULL || buffer->mem == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT, "%s: NULL argument or empty buffer", what);
    return CLRUN_OK;
}

clrun_status clrun_buffer_write(clrun_context *ctx, const clrun_buffer *buffer, const void *host)
{
    clrun_status status = check(ctx, buffer, host, "clrun_buffer_write");
    if (status != CLRUN_OK)
        return status;
    cl_int error = clrun__cl.EnqueueWriteBuffer(ctx->queue, buffer->mem, CL_TRUE, 0, (size_t)buffer->size, host,
                                                0, NULL, NULL);
    if (error != CL_SUCCESS)
        return clrun__fail_cl(ctx, error, "clEnqueueWriteBuffer", "%llu bytes", (unsigned long long)buffer->size);
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
