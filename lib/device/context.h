/* The context's insides, shared by the library's modules. */
#ifndef CLRUN_LIB_CONTEXT_H
#define CLRUN_LIB_CONTEXT_H

#include <pthread.h>

#include <clrun/context.h>

#include "core/log.h"
#include "core/options.h"

#define CLRUN__ERROR_MAX 4096

struct clrun__programs; /* lib/program.c */
struct clrun_pool;      /* lib/pool.c */

struct clrun_context {
    clrun_device_info info;          /* facts of the chosen device */
    cl_platform_id platform;         /* its platform */
    cl_device_id device;             /* the device */
    cl_context cl;                   /* OpenCL context over that one device */
    cl_command_queue queue;          /* in-order unless out_of_order */
    bool out_of_order;               /* the queue executes out of order */
    clrun__options options;          /* environment, overridden by the API's options */
    pthread_mutex_t lock;            /* guards last_error and the pool pointer */
    pthread_mutex_t pool_init;       /* held while the pool is created: one pool per context */
    char last_error[CLRUN__ERROR_MAX]; /* message of the last failure */
    struct clrun__programs *programs; /* built programs, one slot per embedded source */
    struct clrun_pool *pool;         /* created on first allocation */
};

/* Records a failure: formats the message into ctx's last error (or, ctx NULL, this thread's),
 * logs it at error level, and returns status so callers can `return clrun__fail(...)`. */
clrun_status clrun__fail(clrun_context *ctx, clrun_status status, const char *format, ...)
    CLRUN__PRINTF(3, 4);

/* The same for a failed OpenCL call: "what: CL_NAME (code)" followed by the formatted detail. */
clrun_status clrun__fail_cl(clrun_context *ctx, cl_int error, const char *what, const char *format,
                            ...) CLRUN__PRINTF(4, 5);

/* The pool strategy of the context: CLRUN_ALLOCATOR's when it names one, else "buddy" (the
 * executor modes naive and planned still keep inputs and constants in a pool). */
const char *clrun__context_strategy(const clrun_context *ctx);

/* Human-readable bytes ("1.50 MiB") into buf (at least 32 bytes); returns buf. */
const char *clrun__format_bytes(uint64_t bytes, char *buf, size_t size);

#endif
