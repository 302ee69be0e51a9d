/* Context creation: options, device choice, OpenCL context and queue. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/cl.h"
#include "device/context.h"
#include "device/device.h"
#include "device/program.h"

#include <clrun/strategy.h>

void clrun_context_options_init(clrun_context_options *options)
{
    if (options)
        memset(options, 0, sizeof *options);
}

/* Explicit API options win over the environment. */
static clrun_status apply_api_options(clrun__options *o, const clrun_context_options *api)
{
    if (api == NULL)
        return CLRUN_OK;
    if (api->platform && strlen(api->platform) >= sizeof o->platform)
        return clrun__fail(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "platform selector too long (%zu bytes, at most %zu)",
                           strlen(api->platform), sizeof o->platform - 1);
    if (api->device && strlen(api->device) >= sizeof o->device)
        return clrun__fail(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "device selector too long (%zu bytes, at most %zu)",
                           strlen(api->device), sizeof o->device - 1);
    if (api->cache_dir && strlen(api->cache_dir) >= sizeof o->cache_dir)
        return clrun__fail(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "cache directory too long (%zu bytes, at most %zu)",
                           strlen(api->cache_dir), sizeof o->cache_dir - 1);
    if (api->platform)
        strcpy(o->platform, api->platform);
    if (api->device)
        strcpy(o->device, api->device);
    if (api->cache_dir)
        strcpy(o->cache_dir, api->cache_dir);
    if (api->allocator && !clrun__allocator_choice_parse(api->allocator, &o->allocator))
        return clrun__fail(NULL, CLRUN_ERROR_UNKNOWN_ALLOCATOR,
                           "unknown allocator '%s': valid names are %s", api->allocator,
                           clrun__allocator_choice_names());
    if (api->out_of_order)
        o->out_of_order = api->out_of_order > 0;
    if (api->guard)
        o->guard = api->guard > 0;
    if (api->cache)
        o->cache = (clrun__cache_mode){api->cache > 0, api->cache > 0};
    if (api->pool_limit)
        o->pool_limit = api->pool_limit;
    return CLRUN_OK;
}

static clrun_status create_queue(clrun_context *ctx)
{
    cl_command_queue_properties props = 0;
    if (ctx->info.profiling)
        props |= CL_QUEUE_PROFILING_ENABLE;
    if (ctx->options.out_of_order && ctx->options.guard) {
        /* Guard mode paints and checks red zones with commands of its own, which only an
         * in-order queue keeps in step with the kernels. */
        clrun__log(CLRUN_LOG_WARN, "guard mode (CLRUN_DEBUG=guard) uses an in-order queue");
    } else if (ctx->options.out_of_order) {
        if (ctx->info.out_of_order)
            props |= CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE;
        else
            clrun__log(CLRUN_LOG_WARN, "device '%s' has no out-of-order queues: using an in-order one",
                       ctx->info.name);
    }
    cl_int err = CL_SUCCESS;
    ctx->queue = clrun__cl.CreateCommandQueue(ctx->cl, ctx->device, props, &err);
    if (ctx->queue == NULL)
        return clrun__fail_cl(NULL, err, "clCreateCommandQueue", "device '%s'", ctx->info.name);
    ctx->out_of_order = (props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE) != 0;
    return CLRUN_OK;
}

static clrun_status open_device(clrun_context *ctx)
{
    clrun_device_info *list = NULL;
    cl_platform_id *platforms = NULL;
    cl_device_id *ids = NULL;
    size_t count = 0, chosen = 0;
    clrun_status status = clrun__device_enumerate(&list, &platforms, &ids, &count);
    if (status == CLRUN_OK)
        status = clrun_device_select(list, count, ctx->options.platform, ctx->options.device, &chosen);
    if (status == CLRUN_OK) {
        ctx->info = list[chosen];
        ctx->platform = platforms[chosen];
        ctx->device = ids[chosen];
    }
    free(list);
    free(platforms);
    free(ids);
    if (status != CLRUN_OK)
        return status;

    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)ctx->platform, 0};
    cl_int err = CL_SUCCESS;
    clrun__driver_lock();
    ctx->cl = clrun__cl.CreateContext(props, 1, &ctx->device, NULL, NULL, &err);
    status = ctx->cl == NULL ? clrun__fail_cl(NULL, err, "clCreateContext", "device '%s'", ctx->info.name)
                             : create_queue(ctx);
    clrun__driver_unlock();
    return status;
}

static void release_context(clrun_context *ctx)
{
    if (ctx->pool)
        ctx->pool_destroy(ctx->pool);
    clrun__programs_destroy(ctx->programs);
    if (ctx->queue)
        clFinish(ctx->queue); /* not counted: teardown must not be made to fail */
    clrun__driver_lock();
    if (ctx->queue)
        clrun__cl.ReleaseCommandQueue(ctx->queue);
    if (ctx->cl)
        clrun__cl.ReleaseContext(ctx->cl);
    clrun__driver_unlock();
    pthread_mutex_destroy(&ctx->lock);
    pthread_mutex_destroy(&ctx->pool_init);
    clrun__error_record_destroy(&ctx->error);
    free(ctx);
}

clrun_status clrun_context_create(const clrun_context_options *api_options, clrun_context **out)
{
    if (out == NULL)
        return clrun__fail(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "clrun_context_create: out is NULL");
    *out = NULL;
    clrun_context *ctx = calloc(1, sizeof *ctx);
    if (ctx == NULL)
        return clrun__fail(NULL, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory creating a context");
    if (clrun__error_record_init(&ctx->error) != 0) {
        free(ctx);
        return clrun__fail(NULL, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "cannot create a mutex");
    }
    if (pthread_mutex_init(&ctx->lock, NULL) != 0) {
        clrun__error_record_destroy(&ctx->error);
        free(ctx);
        return clrun__fail(NULL, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "cannot create a mutex");
    }
    if (pthread_mutex_init(&ctx->pool_init, NULL) != 0) {
        pthread_mutex_destroy(&ctx->lock);
        clrun__error_record_destroy(&ctx->error);
        free(ctx);
        return clrun__fail(NULL, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "cannot create a mutex");
    }
    char err[1024];
    clrun_status status = clrun__options_load(&ctx->options, err, sizeof err);
    if (status != CLRUN_OK)
        clrun__fail(NULL, status, "%s", err);
    if (status == CLRUN_OK)
        status = apply_api_options(&ctx->options, api_options);
    if (status == CLRUN_OK)
        status = open_device(ctx);
    if (status == CLRUN_OK)
        status = clrun__programs_create(ctx, &ctx->programs);
    if (status != CLRUN_OK) {
        release_context(ctx);
        return status;
    }
    clrun__log(CLRUN_LOG_INFO, "device %u: %s (%s, %s), %s queue", ctx->info.device_index,
               ctx->info.name, ctx->info.platform_name, ctx->info.version,
               ctx->out_of_order ? "out-of-order" : "in-order");
    *out = ctx;
    return CLRUN_OK;
}

void clrun_context_destroy(clrun_context *ctx)
{
    if (ctx == NULL)
        return;
    pthread_mutex_lock(&ctx->lock);
    bool held = ctx->executors > 0;
    ctx->destroy_pending = held;
    pthread_mutex_unlock(&ctx->lock);
    if (!held)
        release_context(ctx);
}

clrun_status clrun__context_create_on(unsigned device, const char *platform, const char *allocator,
                                      uint64_t pool_limit, const char *who, const char *part,
                                      clrun_context **out)
{
    char index[32];
    snprintf(index, sizeof index, "%u", device);
    clrun_context_options co;
    clrun_context_options_init(&co);
    co.platform = platform;
    co.allocator = allocator;
    co.device = index;
    co.pool_limit = pool_limit;
    clrun_status st = clrun_context_create(&co, out);
    if (st != CLRUN_OK) {
        char why[CLRUN__ERROR_MAX];
        snprintf(why, sizeof why, "%s", clrun_last_error(NULL));
        st = clrun__error_set(NULL, st, "%s: the context of device %u (%s): %s", who, device, part, why);
    }
    return st;
}

void clrun__context_hold(clrun_context *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    ctx->executors++;
    pthread_mutex_unlock(&ctx->lock);
}

void clrun__context_drop(clrun_context *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    bool last = --ctx->executors == 0 && ctx->destroy_pending;
    pthread_mutex_unlock(&ctx->lock);
    if (last)
        release_context(ctx);
}

void clrun__context_pool_config(const clrun_context *ctx, clrun__pool_config *out)
{
    uint64_t by_fraction = (uint64_t)((double)ctx->info.global_mem * ctx->options.mem_fraction);
    uint64_t limit = ctx->options.pool_limit;
    *out = (clrun__pool_config){
        .strategy = ctx->options.allocator.strategy,
        .alignment = ctx->info.base_addr_align,
        .max_chunk = ctx->info.max_alloc,
        .limit = limit && limit < by_fraction ? limit : by_fraction,
        .preallocate = ctx->options.preallocate,
        .guard = ctx->options.guard,
    };
}

/* The readers take NULL and answer with a neutral value: NULL, or false. */
const clrun_device_info *clrun_context_device(const clrun_context *ctx) { return ctx ? &ctx->info : NULL; }
cl_context clrun_context_cl(const clrun_context *ctx) { return ctx ? ctx->cl : NULL; }
cl_command_queue clrun_context_queue(const clrun_context *ctx) { return ctx ? ctx->queue : NULL; }
cl_device_id clrun_context_cl_device(const clrun_context *ctx) { return ctx ? ctx->device : NULL; }
bool clrun_context_out_of_order(const clrun_context *ctx) { return ctx && ctx->out_of_order; }
