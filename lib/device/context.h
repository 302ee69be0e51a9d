/* The context's insides, shared by the library's modules. */
#ifndef CLRUN_LIB_CONTEXT_H
#define CLRUN_LIB_CONTEXT_H

#include <pthread.h>

#include <clrun/context.h>

#include "core/error.h"
#include "core/log.h"
#include "core/options.h"
#include "core/util.h"

struct clrun__programs; /* lib/device/program.c */
struct clrun_pool;      /* lib/memory/pool.c: the area above hangs its pool here */

struct clrun_context {
    clrun_device_info info;          /* facts of the chosen device */
    cl_platform_id platform;         /* its platform */
    cl_device_id device;             /* the device */
    cl_context cl;                   /* OpenCL context over that one device */
    cl_command_queue queue;          /* in-order unless out_of_order */
    bool out_of_order;               /* the queue executes out of order */
    clrun__options options;          /* environment, overridden by the API's options */
    pthread_mutex_t lock;            /* guards the pool pointer, executors and destroy_pending */
    pthread_mutex_t pool_init;       /* held while the pool is created: one pool per context */
    clrun__error_record error;       /* message of the last failure */
    struct clrun__programs *programs; /* built programs, one slot per embedded source */
    struct clrun_pool *pool;         /* created on first allocation by the memory area */
    void (*pool_destroy)(struct clrun_pool *pool); /* set with pool; called at teardown */
    int32_t executors;               /* live executors, which hold the context */
    bool destroy_pending;            /* clrun_context_destroy came while executors lived: the
                                        last one's clrun_exec_destroy finishes it */
};

/* Executors hold their context (clrun_exec_create takes a hold, clrun_exec_destroy drops it), so
 * that destroying the context first is safe: it is released when the last hold is dropped. */
void clrun__context_hold(clrun_context *ctx);
void clrun__context_drop(clrun_context *ctx);

/* A context on device `device` (an index in clrun_device_list's list, as CLRUN_DEVICE takes
 * it; with a platform selector, among that platform's devices) with the allocator and pool limit
 * given (NULL, 0: the environment's), for the parts of a multi-device object: a failure's
 * message reads "<who>: the context of device D (<part>): <why>". */
clrun_status clrun__context_create_on(unsigned device, const char *platform, const char *allocator,
                                      uint64_t pool_limit, const char *who, const char *part,
                                      clrun_context **out);

/* Records a failure: formats the message into ctx's error record (or, ctx NULL, this thread's),
 * logs it at error level, and returns status so callers can `return clrun__fail(...)`. */
clrun_status clrun__fail(clrun_context *ctx, clrun_status status, const char *format, ...)
    CLRUN__PRINTF(3, 4);

/* The same for a failed OpenCL call: "what: CL_NAME (code)" followed by the formatted detail. */
clrun_status clrun__fail_cl(clrun_context *ctx, cl_int error, const char *what, const char *format,
                            ...) CLRUN__PRINTF(4, 5);

/* What the memory pool needs of its context, decided here from the device's facts and the
 * options; the pool reads nothing else of them. */
typedef struct clrun__pool_config {
    const clrun_strategy_ops *strategy; /* CLRUN_ALLOCATOR's, or the default for executor modes */
    uint64_t alignment;   /* sub-buffer origins: CL_DEVICE_MEM_BASE_ADDR_ALIGN in bytes */
    uint64_t max_chunk;   /* CL_DEVICE_MAX_MEM_ALLOC_SIZE */
    uint64_t limit;       /* most bytes to reserve: CLRUN_POOL_LIMIT within CLRUN_MEM_FRACTION */
    bool preallocate;     /* CLRUN_PREALLOCATE */
    bool guard;           /* CLRUN_DEBUG=guard */
} clrun__pool_config;

void clrun__context_pool_config(const clrun_context *ctx, clrun__pool_config *out);

#endif
