/* Recording failures: per-context messages, a per-thread one for calls without a context. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "device/context.h"

static _Thread_local char thread_error[CLRUN__ERROR_MAX];
static _Thread_local char thread_copy[CLRUN__ERROR_MAX];

static void record(clrun_context *ctx, const char *message)
{
    if (ctx == NULL) {
        snprintf(thread_error, sizeof thread_error, "%s", message);
    } else {
        pthread_mutex_lock(&ctx->lock);
        snprintf(ctx->last_error, sizeof ctx->last_error, "%s", message);
        pthread_mutex_unlock(&ctx->lock);
    }
    clrun__log(CLRUN_LOG_ERROR, "%s", message);
}

clrun_status clrun__fail(clrun_context *ctx, clrun_status status, const char *format, ...)
{
    char message[CLRUN__ERROR_MAX];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof message, format, args);
    va_end(args);
    record(ctx, message);
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
    char message[CLRUN__ERROR_MAX];
    snprintf(message, sizeof message, "%s failed: %s (%d)%s%s", what, clrun_cl_error_name(error),
             (int)error, detail[0] ? ": " : "", detail);
    record(ctx, message);
    if (error == CL_MEM_OBJECT_ALLOCATION_FAILURE || error == CL_OUT_OF_RESOURCES)
        return CLRUN_ERROR_OUT_OF_MEMORY;
    if (error == CL_OUT_OF_HOST_MEMORY)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    return CLRUN_ERROR_OPENCL;
}

const char *clrun_last_error(const clrun_context *ctx)
{
    if (ctx == NULL) {
        memcpy(thread_copy, thread_error, sizeof thread_copy);
    } else {
        clrun_context *mutable_ctx = (clrun_context *)ctx; /* the lock is not part of its value */
        pthread_mutex_lock(&mutable_ctx->lock);
        memcpy(thread_copy, ctx->last_error, sizeof thread_copy);
        pthread_mutex_unlock(&mutable_ctx->lock);
    }
    return thread_copy;
}

const char *clrun__format_bytes(uint64_t bytes, char *buf, size_t size)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) {
        snprintf(buf, size, "%llu B", (unsigned long long)bytes);
        return buf;
    }
    double value = (double)bytes;
    size_t unit = 0;
    while (value >= 1024.0 && unit + 1 < sizeof units / sizeof units[0]) {
        value /= 1024.0;
        unit++;
    }
    snprintf(buf, size, "%.2f %s", value, units[unit]);
    return buf;
}
