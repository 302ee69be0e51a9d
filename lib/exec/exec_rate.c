/* The rate that weighs recomputing against offloading (graph/offload.h), measured on the device
 * when CLRUN_OFFLOAD_RATE is `auto` (its default): a short timed copy between a device buffer
 * and a host-allocated one, both ways, as the offload and reload nodes make, and a short timed
 * product (one matmul node: the kernels a graph's products run). A few milliseconds, once per
 * device per process, remembered in the cache directory beside the tuning results. The rate is
 * what the timings give (clrun__offload_rate_of); where the measurement fails the budget search
 * takes CLRUN__OFFLOAD_RATE_FALLBACK. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/cache.h"
#include "exec/exec_internal.h"
#include "exec/exec_share.h"
#include "graph/offload.h"

enum {
    RATE_N = 256,              /* the product: RATE_N x RATE_N by RATE_N x RATE_N */
    RATE_COPY = 2 << 20,       /* bytes copied each way */
    RATE_ROUNDS = 3,           /* timed runs of each, the fastest kept (after one untimed) */
    RATE_MEMO = 8,             /* devices remembered in this process */
};

/* This process's measurements, by the key's hash. */
static pthread_mutex_t memo_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long memo_key[RATE_MEMO];
static double memo_rate[RATE_MEMO];
static int memo_count;

void clrun__offload_rate_forget(void)
{
    pthread_mutex_lock(&memo_lock);
    memo_count = 0;
    pthread_mutex_unlock(&memo_lock);
}

static void rate_key(const clrun_context *ctx, char *out, size_t size)
{
    snprintf(out, size, "clrun-rate-v1\ndevice=%s\ndriver=%s\nplatform=%s\nproduct=%d\ncopy=%d\n",
             ctx->info.name, ctx->info.driver_version, ctx->info.platform_version, RATE_N,
             RATE_COPY);
}

/* Seconds of the fastest of RATE_ROUNDS runs of `what` (one more first, untimed). */
typedef cl_int (*rate_run)(clrun_context *ctx, void *user);

static cl_int timed(clrun_context *ctx, rate_run what, void *user, double *best)
{
    *best = 0;
    for (int round = 0; round <= RATE_ROUNDS; round++) {
        double start = clrun__now();
        cl_int err = what(ctx, user);
        if (err == CL_SUCCESS)
            err = clrun__cl.Finish(ctx->queue);
        if (err != CL_SUCCESS)
            return err;
        double t = clrun__now() - start;
        if (round == 1 || (round > 1 && t < *best))
            *best = t;
    }
    return CL_SUCCESS;
}

typedef struct rate_copies {
    cl_mem device, host;
} rate_copies;

static cl_int copy_both_ways(clrun_context *ctx, void *user)
{
    const rate_copies *r = user;
    cl_int err = clrun__cl.EnqueueCopyBuffer(ctx->queue, r->device, r->host, 0, 0, RATE_COPY, 0,
                                             NULL, NULL);
    if (err == CL_SUCCESS)
        err = clrun__cl.EnqueueCopyBuffer(ctx->queue, r->host, r->device, 0, 0, RATE_COPY, 0,
                                          NULL, NULL);
    return err;
}

/* Seconds of the fastest of RATE_ROUNDS copies both ways (one more first, untimed). */
static clrun_status time_copies(clrun_context *ctx, double *seconds)
{
    rate_copies r = {0};
    cl_int err = CL_SUCCESS;
    r.device = clrun__cl.CreateBuffer(ctx->cl, CL_MEM_READ_WRITE, RATE_COPY, NULL, &err);
    if (r.device)
        r.host = clrun__cl.CreateBuffer(ctx->cl, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR,
                                        RATE_COPY, NULL, &err);
    if (r.host)
        err = timed(ctx, copy_both_ways, &r, seconds);
    else if (err == CL_SUCCESS)
        err = CL_OUT_OF_RESOURCES;
    if (r.device)
        clrun__cl.ReleaseMemObject(r.device);
    if (r.host)
        clrun__cl.ReleaseMemObject(r.host);
    if (err != CL_SUCCESS)
        return clrun__fail_cl(ctx, err, "clEnqueueCopyBuffer", "measuring the offload rate");
    return CLRUN_OK;
}

/* Seconds of the fastest of RATE_ROUNDS runs of one matmul node (RATE_N square, the kernels a
 * graph's products run), through an executor (one more run first, untimed). */
static clrun_status time_product(clrun_context *ctx, double *seconds)
{
    *seconds = 0;
    clrun_graph *g = NULL;
    clrun_exec *e = NULL;
    clrun_buffer in = {0};
    clrun_tensor_type t = {.dtype = CLRUN_F32, .rank = 2, .shape = {RATE_N, RATE_N}};
    clrun_tensor_id a = -1, b = -1, c = -1;
    const char *names[1] = {"c"};
    clrun_status s = clrun_graph_create("offload_rate", &g);
    if (s == CLRUN_OK)
        s = clrun_graph_add_input(g, "a", &t, false, &a);
    if (s == CLRUN_OK)
        s = clrun_graph_add_constant(g, "b", &t, NULL, CLRUN_FILL_UNIFORM, -1, 1, 1, &b);
    clrun_tensor_id ab[2] = {a, b};
    if (s == CLRUN_OK)
        s = clrun_graph_add_node(g, "matmul", ab, 2, names, 1, NULL, 0, &c);
    if (s == CLRUN_OK)
        s = clrun_graph_mark_output(g, c);
    if (s != CLRUN_OK) {
        s = clrun__fail(ctx, s, "measuring the offload rate: %s",
                        g ? clrun_graph_last_error(g) : "out of host memory");
        clrun_graph_destroy(g);
        return s;
    }
    clrun_exec_options o;
    clrun_exec_options_init(&o);
    o.mode = CLRUN_EXEC_PLANNED;
    o.fusion = -1;
    s = clrun__exec_create_beside(ctx, g, &o, NULL, &e); /* as given: never under a budget */
    float *x = s == CLRUN_OK ? malloc(clrun_tensor_bytes(&t)) : NULL;
    if (s == CLRUN_OK && x == NULL)
        s = clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (s == CLRUN_OK) {
        for (size_t i = 0; i < (size_t)RATE_N * RATE_N; i++)
            x[i] = (float)(i % 7) * 0.25f - 0.75f;
        s = clrun_alloc(ctx, clrun_tensor_bytes(&t), &in);
    }
    if (s == CLRUN_OK)
        s = clrun_buffer_write(ctx, &in, x);
    for (int round = 0; s == CLRUN_OK && round <= RATE_ROUNDS; round++) {
        double start = clrun__now();
        s = clrun_exec_run(e, &in, 1);
        double took = clrun__now() - start;
        if (round == 1 || (round > 1 && took < *seconds))
            *seconds = took;
    }
    free(x);
    if (in.mem)
        clrun_free(ctx, &in);
    clrun_exec_destroy(e);
    clrun_graph_destroy(g);
    return s;
}

/* The measurement itself: *rate, or a failure (the caller falls back). */
static clrun_status measure(clrun_context *ctx, double *rate)
{
    double copy_s = 0, product_s = 0;
    clrun_status s = time_copies(ctx, &copy_s);
    if (s == CLRUN_OK)
        s = time_product(ctx, &product_s);
    if (s != CLRUN_OK)
        return s;
    *rate = clrun__offload_rate_of(2.0 * RATE_N * RATE_N * RATE_N, product_s, 2.0 * RATE_COPY, copy_s);
    if (*rate <= 0)
        return clrun__fail(ctx, CLRUN_ERROR_OPENCL, "measuring the offload rate: no time measured "
                           "(%g s for the product, %g s for the copies)", product_s, copy_s);
    clrun__log(CLRUN_LOG_INFO, "offload rate: a %dx%d product in %.3f ms, %d KiB both ways in %.3f ms",
               RATE_N, RATE_N, product_s * 1e3, RATE_COPY / 1024, copy_s * 1e3);
    return CLRUN_OK;
}

/* The rate remembered in the cache directory under `key`, or false. */
static bool remembered(const char *path, const char *key, double *rate)
{
    unsigned char *data = NULL;
    size_t size = 0;
    char why[256], text[64];
    if (clrun__cache_load(path, key, &data, &size, why, sizeof why) != CLRUN__CACHE_HIT)
        return false;
    snprintf(text, sizeof text, "%.*s", (int)(size < 63 ? size : 63), (const char *)data);
    free(data);
    char *end;
    double v = strtod(text, &end);
    if (end == text || !isfinite(v) || !(v > 0))
        return false;
    *rate = v;
    return true;
}

clrun_status clrun__exec_offload_rate(clrun_context *ctx, double *rate, bool *measured)
{
    *rate = ctx->options.offload_rate;
    if (measured)
        *measured = false;
    if (*rate >= 0)
        return CLRUN_OK; /* CLRUN_OFFLOAD_RATE given */
    char key[1024], dir[CLRUN__PATH_MAX] = "", path[CLRUN__PATH_MAX + 512];
    rate_key(ctx, key, sizeof key);
    unsigned long long hash = clrun__hash64(key, strlen(key));
    pthread_mutex_lock(&memo_lock); /* one measurement at a time, and once per device */
    for (int i = 0; i < memo_count; i++)
        if (memo_key[i] == hash) {
            *rate = memo_rate[i];
            pthread_mutex_unlock(&memo_lock);
            return CLRUN_OK;
        }
    bool cached = ctx->options.cache.enabled && clrun__cache_dir(ctx->options.cache_dir, dir, sizeof dir);
    if (cached)
        clrun__cache_path(dir, "rate", key, path, sizeof path);
    clrun_status s = CLRUN_OK;
    if (!cached || !remembered(path, key, rate)) {
        s = measure(ctx, rate);
        if (s == CLRUN_OK && measured)
            *measured = true;
        if (s == CLRUN_OK && cached) {
            char value[64], why[256];
            int n = snprintf(value, sizeof value, "%.9g", *rate);
            if (!clrun__cache_store(dir, path, key, (const unsigned char *)value, (size_t)n, why,
                                    sizeof why))
                clrun__log(CLRUN_LOG_WARN, "%s (offload rate not remembered)", why);
        }
    }
    if (s == CLRUN_OK) {
        if (memo_count == RATE_MEMO) { /* the oldest goes */
            memmove(memo_key, memo_key + 1, sizeof *memo_key * (RATE_MEMO - 1));
            memmove(memo_rate, memo_rate + 1, sizeof *memo_rate * (RATE_MEMO - 1));
            memo_count--;
        }
        memo_key[memo_count] = hash;
        memo_rate[memo_count++] = *rate;
        clrun__log(CLRUN_LOG_INFO, "offload rate of '%s': %.3g FLOPs per byte moved", ctx->info.name,
                   *rate);
    }
    pthread_mutex_unlock(&memo_lock);
    return s;
}
