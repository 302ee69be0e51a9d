/* Recording failures of calls on a context: its error record, or this thread's without one;
 * OpenCL errors by their CL_* names. */
#include <stdarg.h>
#include <stdio.h>

#include "device/context.h"

static clrun__error_record *record_of(clrun_context *ctx) { return ctx ? &ctx->error : NULL; }

clrun_status clrun__fail(clrun_context *ctx, clrun_status status, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    clrun__error_vset(record_of(ctx), status, format, args);
    va_end(args);
    return status;
}

clrun_status clrun__fail_cl(clrun_context *ctx, cl_int error, const char *what, const char *format,
                            ...)
{
    char detail[CLRUN__ERROR_MAX / 2];
    va_list args;
    va_start(args, format);
    vsnprintf(detail, sizeof detail, format, args);
    va_end(args);
    clrun_status status = CLRUN_ERROR_OPENCL;
    if (error == CL_MEM_OBJECT_ALLOCATION_FAILURE || error == CL_OUT_OF_RESOURCES)
        status = CLRUN_ERROR_OUT_OF_MEMORY;
    else if (error == CL_OUT_OF_HOST_MEMORY)
        status = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    return clrun__error_set(record_of(ctx), status, "%s failed: %s (%d)%s%s", what,
                            clrun_cl_error_name(error), (int)error, detail[0] ? ": " : "", detail);
}

const char *clrun_last_error(const clrun_context *ctx)
{
    /* The record's lock is not part of the context's value. */
    return clrun__error_get(record_of((clrun_context *)ctx));
}
