/* Data-parallel training over several devices of one process: a trainer per device, a host
 * thread per device during a step, and the gradients reduced in host memory through the
 * trainers' own reduction hooks (buckets, or one reduction after the backward pass). The last
 * device to hand in a bucket sums it, in device order, into every device's buffer; the others
 * poll (bucket_test) or wait (reduce) until it is done, or until a device reports a failure. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clrun/train_parallel.h>

#include "core/error.h"
#include "core/share.h"
#include "core/util.h"
#include "device/context.h"
#include "graph/types.h"
#include "train/train_parallel_internal.h"

/* One bucket of the step under way (a reduction after the backward pass is bucket 0). */
typedef struct bucket_state {
    int32_t arrived;  /* devices that handed it in */
    int state;        /* 0 open, 1 being summed, 2 done */
} bucket_state;

typedef struct device_slot {
    struct clrun_train_parallel *p;
    int32_t k;
    unsigned device;              /* its index in clrun_device_list's list */
    clrun_context *ctx;
    clrun_train *train;
    int64_t rows;
    double weight;                /* rows / all rows */
    float **grads;                /* per bucket: this device's buffer (the step under way) */
    /* the step's arguments and outcome, for its thread */
    const void *const *feeds;
    int32_t feed_count;
    clrun_train_step_result result;
    clrun_status status;
    char message[CLRUN__ERROR_MAX];
} device_slot;

struct clrun_train_parallel {
    int32_t count;
    device_slot *dev;
    int32_t buckets;              /* per step; 0: one reduction after the backward pass */
    uint64_t floats;              /* gradient floats */
    uint64_t *bucket_count;       /* per bucket (or [0]: all) */
    bucket_state *b;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int32_t failed;               /* first device that failed, + 1; 0 none */
    bool timing;                  /* the step's first hand-in seen */
    double first_s, last_s;
    uint64_t steps;
    double reduce_s, last_reduce_s;
    int32_t fail_k, fail_bucket;  /* clrun__train_parallel_fail_at; -1 none */
};

void clrun_train_parallel_options_init(clrun_train_parallel_options *options)
{
    clrun_train_options_init(&options->train);
    options->platform = NULL;
    options->allocator = NULL;
    options->after_backward = false;
}

clrun_status clrun_train_parallel_share(int64_t batch, int32_t count, int32_t k, int64_t *first,
                                        int64_t *rows)
{
    return clrun__batch_share(batch, count, k, first, rows);
}

/* Sums bucket b of every device in device order (double, rounded once) into each device's
 * buffer. Called with the lock released, by the one device that set the bucket's state to 1. */
static void sum_bucket(clrun_train_parallel *p, int32_t b)
{
    uint64_t n = p->bucket_count[b];
    for (uint64_t i = 0; i < n; i++) {
        double s = 0;
        for (int32_t k = 0; k < p->count; k++)
            s += p->dev[k].weight * (double)p->dev[k].grads[b][i];
        float f = (float)s;
        for (int32_t k = 0; k < p->count; k++)
            p->dev[k].grads[b][i] = f;
    }
}

/* The reduction given up because device p->failed - 1 failed: its status (set before p->failed,
 * under the lock), for this device's step to stop with. */
static clrun_status failed_error(clrun_train_parallel *p, char *err, size_t errlen)
{
    /* with the lock held */
    const device_slot *f = &p->dev[p->failed - 1];
    snprintf(err, errlen, "the gradient reduction stopped: device %u (share %d) failed",
             f->device, (int)f->k);
    return f->status != CLRUN_OK ? f->status : CLRUN_ERROR_BUSY;
}

/* Device slot d hands in bucket b; the last one in sums it. */
static clrun_status hand_in(device_slot *d, int32_t b, float *gradients, uint64_t count,
                            char *err, size_t errlen)
{
    clrun_train_parallel *p = d->p;
    pthread_mutex_lock(&p->lock);
    if (!p->timing) {
        p->timing = true;
        p->first_s = clrun__now();
    }
    if (b < 0 || b >= (p->buckets ? p->buckets : 1) || count != p->bucket_count[b]) {
        pthread_mutex_unlock(&p->lock);
        snprintf(err, errlen, "device %u (share %d) handed in bucket %d of %llu floats: not the "
                 "layout of share 0", d->device, (int)d->k, (int)b, (unsigned long long)count);
        return CLRUN_ERROR_INVALID_ARGUMENT;
    }
    if (p->failed) {
        clrun_status s = failed_error(p, err, errlen);
        pthread_mutex_unlock(&p->lock);
        return s;
    }
    if (d->k == p->fail_k && b == p->fail_bucket) {
        pthread_mutex_unlock(&p->lock);
        snprintf(err, errlen, "injected failure at bucket %d", (int)b);
        return CLRUN_ERROR_OPENCL;
    }
    d->grads[b] = gradients;
    bool last = ++p->b[b].arrived == p->count;
    if (last)
        p->b[b].state = 1;
    pthread_mutex_unlock(&p->lock);
    if (last) {
        sum_bucket(p, b);
        pthread_mutex_lock(&p->lock);
        p->b[b].state = 2;
        p->last_s = clrun__now();
        pthread_cond_broadcast(&p->cond);
        pthread_mutex_unlock(&p->lock);
    }
    return CLRUN_OK;
}

static clrun_status bucket_start(void *user, uint64_t step, int32_t bucket, float *gradients,
                                 uint64_t count, char *err, size_t errlen)
{
    (void)step;
    return hand_in(user, bucket, gradients, count, err, errlen);
}

static clrun_status bucket_test(void *user, uint64_t step, int32_t bucket, bool *done, char *err,
                                size_t errlen)
{
    (void)step;
    device_slot *d = user;
    clrun_train_parallel *p = d->p;
    clrun_status s = CLRUN_OK;
    pthread_mutex_lock(&p->lock);
    *done = p->b[bucket].state == 2;
    /* a failure gives up a bucket that nobody sums (one being summed is waited for: it writes
     * into this device's buffer) */
    if (!*done && p->failed && p->b[bucket].state == 0)
        s = failed_error(p, err, errlen);
    pthread_mutex_unlock(&p->lock);
    return s;
}

static clrun_status reduce(void *user, uint64_t step, float *gradients, uint64_t count, char *err,
                           size_t errlen)
{
    (void)step;
    device_slot *d = user;
    clrun_train_parallel *p = d->p;
    clrun_status s = hand_in(d, 0, gradients, count, err, errlen);
    if (s != CLRUN_OK)
        return s;
    pthread_mutex_lock(&p->lock);
    while (p->b[0].state != 2 && !(p->failed && p->b[0].state == 0))
        pthread_cond_wait(&p->cond, &p->lock);
    if (p->b[0].state != 2)
        s = failed_error(p, err, errlen);
    pthread_mutex_unlock(&p->lock);
    return s;
}

void clrun_train_parallel_destroy(clrun_train_parallel *p)
{
    if (p == NULL)
        return;
    for (int32_t k = 0; p->dev && k < p->count; k++) {
        clrun_train_destroy(p->dev[k].train);
        clrun_context_destroy(p->dev[k].ctx);
        free(p->dev[k].grads);
    }
    free(p->dev);
    free(p->bucket_count);
    free(p->b);
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

/* Device k's trainer with the parallel hooks, buckets or not. */
static clrun_status make_trainer(clrun_train_parallel *p, const clrun_graph *model,
                                 const clrun_train_parallel_options *o, bool buckets, int32_t k)
{
    device_slot *d = &p->dev[k];
    clrun_train_options to = o->train;
    if (buckets) {
        to.bucket_start = bucket_start;
        to.bucket_test = bucket_test;
    } else {
        to.reduce = reduce;
    }
    to.reduce_user = d;
    clrun_status st = clrun_train_create(d->ctx, model, &to, &d->train);
    if (st != CLRUN_OK) {
        char why[CLRUN__ERROR_MAX];
        snprintf(why, sizeof why, "%s", clrun_last_error(d->ctx));
        return clrun__error_set(NULL, st, "train_parallel: device %u (share %d): %s", d->device,
                                (int)k, why);
    }
    return CLRUN_OK;
}

/* The bucket layout of device 0; false when another device's differs. */
static bool same_buckets(clrun_train_parallel *p)
{
    const clrun_train_bucket *b0;
    int32_t n0 = clrun_train_buckets(p->dev[0].train, &b0);
    for (int32_t k = 1; k < p->count; k++) {
        const clrun_train_bucket *bk;
        if (clrun_train_buckets(p->dev[k].train, &bk) != n0)
            return false;
        for (int32_t i = 0; i < n0; i++)
            if (bk[i].first != b0[i].first || bk[i].count != b0[i].count)
                return false;
    }
    return true;
}

/* Device k's trainer trains what device 0's does: the same gradient count and parameters of the
 * same types (checked before the bucket layouts, which differ whenever these do). */
static clrun_status same_model(clrun_train_parallel *p, int32_t k)
{
    const clrun_train *t0 = p->dev[0].train, *tk = p->dev[k].train;
    unsigned d0 = p->dev[0].device, dk = p->dev[k].device;
    uint64_t g0 = clrun_train_gradient_count(t0), gk = clrun_train_gradient_count(tk);
    if (gk != g0)
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                                "train_parallel: device %u (share %d) trains %llu gradient floats, "
                                "device %u (share 0) %llu: the models differ", dk, (int)k,
                                (unsigned long long)gk, d0, (unsigned long long)g0);
    int32_t n0 = clrun_train_param_count(t0), nk = clrun_train_param_count(tk);
    if (nk != n0)
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                                "train_parallel: device %u (share %d) trains %d parameters, device "
                                "%u (share 0) %d: the models differ", dk, (int)k, (int)nk, d0,
                                (int)n0);
    for (int32_t i = 0; i < n0; i++) {
        const char *name0, *namek;
        clrun_tensor_type a, b;
        if (clrun_train_param_info(t0, i, &name0, &a) != CLRUN_OK ||
            clrun_train_param_info(tk, i, &namek, &b) != CLRUN_OK)
            return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                                    "train_parallel: parameter %d unreadable", (int)i);
        if (!clrun__type_equal(&a, &b))
            return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                                    "train_parallel: parameter %d ('%s') of device %u (share %d) "
                                    "differs in type or shape from device %u's (share 0): the "
                                    "models differ", (int)i, namek ? namek : "?", dk, (int)k, d0);
    }
    return CLRUN_OK;
}

static clrun_status make_trainers(clrun_train_parallel *p, const clrun_graph *const *models,
                                  const clrun_train_parallel_options *o)
{
    bool buckets = !o->after_backward;
    for (int attempt = 0; attempt < 2; attempt++) {
        for (int32_t k = 0; k < p->count; k++) {
            clrun_status st = make_trainer(p, models[k], o, buckets, k);
            if (st == CLRUN_OK && k > 0)
                st = same_model(p, k);
            if (st != CLRUN_OK)
                return st;
        }
        if (!buckets || same_buckets(p))
            break;
        for (int32_t k = 0; k < p->count; k++) { /* one reduction after the passes instead */
            clrun_train_destroy(p->dev[k].train);
            p->dev[k].train = NULL;
        }
        buckets = false;
    }
    const clrun_train_bucket *b;
    p->buckets = buckets ? clrun_train_buckets(p->dev[0].train, &b) : 0;
    p->floats = clrun_train_gradient_count(p->dev[0].train);
    int32_t n = p->buckets ? p->buckets : 1;
    p->bucket_count = calloc((size_t)n, sizeof *p->bucket_count);
    p->b = calloc((size_t)n, sizeof *p->b);
    if (p->bucket_count == NULL || p->b == NULL)
        return clrun__error_set(NULL, CLRUN_ERROR_OUT_OF_HOST_MEMORY,
                                "train_parallel: out of host memory");
    for (int32_t i = 0; i < n; i++)
        p->bucket_count[i] = p->buckets ? b[i].count : p->floats;
    for (int32_t k = 0; k < p->count; k++) {
        if ((p->dev[k].grads = calloc((size_t)n, sizeof *p->dev[k].grads)) == NULL)
            return clrun__error_set(NULL, CLRUN_ERROR_OUT_OF_HOST_MEMORY,
                                    "train_parallel: out of host memory");
    }
    return CLRUN_OK;
}

clrun_status clrun_train_parallel_create(const clrun_graph *const *models, const unsigned *devices,
                                         int32_t count,
                                         const clrun_train_parallel_options *options,
                                         clrun_train_parallel **out)
{
    if (out)
        *out = NULL;
    if (out == NULL || (count > 0 && (models == NULL || devices == NULL)))
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "train_parallel: NULL argument");
    if (count < 1)
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                                "train_parallel: %d devices: at least one is needed", (int)count);
    clrun_train_parallel_options defaults;
    if (options == NULL) {
        clrun_train_parallel_options_init(&defaults);
        options = &defaults;
    }
    const clrun_train_options *to = &options->train;
    if (to->reduce || to->bucket_start || to->bucket_test || to->split_update)
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                                "train_parallel: the train options' reduce, bucket hooks and "
                                "split_update must be unset (the parallel step sets its own)");
    int64_t all = 0;
    for (int32_t k = 0; k < count; k++) {
        const clrun_tensor_id *ids;
        if (models[k] == NULL)
            return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                                    "train_parallel: no model for device %u (share %d)",
                                    devices[k], (int)k);
        const clrun_tensor_type *t = clrun_graph_inputs(models[k], &ids) > 0
                                         ? clrun_graph_tensor_type(models[k], ids[0]) : NULL;
        if (t == NULL || t->rank < 1 || t->shape[0] < 1)
            return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                                    "train_parallel: the model of device %u (share %d) has no "
                                    "input of rows (a first dimension: its share of the batch)",
                                    devices[k], (int)k);
        all += t->shape[0];
    }
    clrun_train_parallel *p = calloc(1, sizeof *p);
    if (p == NULL)
        return clrun__error_set(NULL, CLRUN_ERROR_OUT_OF_HOST_MEMORY,
                                "train_parallel: out of host memory");
    if (pthread_mutex_init(&p->lock, NULL) != 0) {
        free(p);
        return clrun__error_set(NULL, CLRUN_ERROR_OUT_OF_HOST_MEMORY,
                                "train_parallel: cannot make a lock");
    }
    if (pthread_cond_init(&p->cond, NULL) != 0) {
        pthread_mutex_destroy(&p->lock);
        free(p);
        return clrun__error_set(NULL, CLRUN_ERROR_OUT_OF_HOST_MEMORY,
                                "train_parallel: cannot make a condition variable");
    }
    p->count = count;
    p->fail_k = p->fail_bucket = -1;
    p->dev = calloc((size_t)count, sizeof *p->dev);
    clrun_status st = p->dev ? CLRUN_OK
                             : clrun__error_set(NULL, CLRUN_ERROR_OUT_OF_HOST_MEMORY,
                                                "train_parallel: out of host memory");
    for (int32_t k = 0; st == CLRUN_OK && k < count; k++) {
        device_slot *d = &p->dev[k];
        const clrun_tensor_id *ids;
        clrun_graph_inputs(models[k], &ids);
        d->p = p;
        d->k = k;
        d->device = devices[k];
        d->rows = clrun_graph_tensor_type(models[k], ids[0])->shape[0];
        d->weight = (double)d->rows / (double)all;
        char part[32];
        snprintf(part, sizeof part, "share %d", (int)k);
        st = clrun__context_create_on(devices[k], options->platform, options->allocator, 0,
                                      "train_parallel", part, &d->ctx);
    }
    if (st == CLRUN_OK)
        st = make_trainers(p, models, options);
    if (st != CLRUN_OK) {
        clrun_train_parallel_destroy(p);
        return st;
    }
    *out = p;
    return CLRUN_OK;
}

int32_t clrun_train_parallel_count(const clrun_train_parallel *p)
{
    return p ? p->count : 0;
}

clrun_train *clrun_train_parallel_trainer(clrun_train_parallel *p, int32_t k)
{
    return p && k >= 0 && k < p->count ? p->dev[k].train : NULL;
}

clrun_context *clrun_train_parallel_context(clrun_train_parallel *p, int32_t k)
{
    return p && k >= 0 && k < p->count ? p->dev[k].ctx : NULL;
}

int64_t clrun_train_parallel_rows(const clrun_train_parallel *p, int32_t k)
{
    return p && k >= 0 && k < p->count ? p->dev[k].rows : 0;
}

/* One device's step; a failure is reported to the others at once, so that none waits for it. */
static void *device_step(void *arg)
{
    device_slot *d = arg;
    clrun_train_parallel *p = d->p;
    d->status = clrun_train_step(d->train, d->feeds, d->feed_count, &d->result);
    if (d->status != CLRUN_OK) {
        snprintf(d->message, sizeof d->message, "%s", clrun_last_error(d->ctx));
        pthread_mutex_lock(&p->lock);
        if (!p->failed)
            p->failed = d->k + 1;
        pthread_cond_broadcast(&p->cond);
        pthread_mutex_unlock(&p->lock);
    }
    return NULL;
}

clrun_status clrun_train_parallel_step(clrun_train_parallel *p, const void *const *const *feeds,
                                       int32_t feed_count, clrun_train_step_result *results)
{
    if (p == NULL || feeds == NULL)
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "train_parallel: NULL argument");
    int32_t n = p->buckets ? p->buckets : 1;
    memset(p->b, 0, sizeof *p->b * (size_t)n);
    p->failed = 0;
    p->timing = false;
    p->first_s = p->last_s = 0;
    pthread_t *threads = calloc((size_t)p->count, sizeof *threads);
    if (threads == NULL)
        return clrun__error_set(NULL, CLRUN_ERROR_OUT_OF_HOST_MEMORY,
                                "train_parallel: out of host memory");
    int32_t started = 0;
    int32_t spawn_failed = 0; /* the share whose thread did not start; 0 none */
    for (int32_t k = 0; k < p->count; k++) {
        device_slot *d = &p->dev[k];
        d->feeds = feeds[k];
        d->feed_count = feed_count;
        d->status = CLRUN_OK;
        d->message[0] = '\0';
        memset(&d->result, 0, sizeof d->result);
    }
    for (int32_t k = 1; k < p->count; k++) {
        if (pthread_create(&threads[k], NULL, device_step, &p->dev[k]) != 0) {
            /* the threads started stop at the reduction */
            pthread_mutex_lock(&p->lock);
            p->dev[k].status = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
            if (!p->failed)
                p->failed = k + 1;
            pthread_cond_broadcast(&p->cond);
            pthread_mutex_unlock(&p->lock);
            spawn_failed = k;
            break;
        }
        started = k;
    }
    if (!spawn_failed)
        device_step(&p->dev[0]);
    for (int32_t k = 1; k <= started; k++)
        pthread_join(threads[k], NULL);
    free(threads);
    if (spawn_failed)
        return clrun__error_set(NULL, CLRUN_ERROR_OUT_OF_HOST_MEMORY,
                                "train_parallel: cannot start the thread of device %u (share %d)",
                                p->dev[spawn_failed].device, (int)spawn_failed);
    if (p->failed) {
        device_slot *d = &p->dev[p->failed - 1];
        return clrun__error_set(NULL, d->status, "train_parallel: device %u (share %d): %s",
                                d->device, (int)d->k, d->message);
    }
    if (results)
        for (int32_t k = 0; k < p->count; k++)
            results[k] = p->dev[k].result;
    p->steps++;
    p->last_reduce_s = p->last_s > p->first_s ? p->last_s - p->first_s : 0;
    p->reduce_s += p->last_reduce_s;
    return CLRUN_OK;
}

void clrun__train_parallel_fail_at(clrun_train_parallel *p, int32_t k, int32_t bucket)
{
    if (p) {
        p->fail_k = k;
        p->fail_bucket = bucket;
    }
}

clrun_status clrun_train_parallel_load(clrun_train_parallel *p, const char *path)
{
    if (p == NULL || path == NULL)
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "train_parallel: NULL argument");
    for (int32_t k = 0; k < p->count; k++) {
        clrun_status st = clrun_train_load(p->dev[k].train, path);
        if (st != CLRUN_OK) {
            char why[CLRUN__ERROR_MAX];
            snprintf(why, sizeof why, "%s", clrun_last_error(p->dev[k].ctx));
            return clrun__error_set(NULL, st, "train_parallel: device %u (share %d): %s",
                                    p->dev[k].device, (int)k, why);
        }
    }
    return CLRUN_OK;
}

clrun_status clrun_train_parallel_stats_get(const clrun_train_parallel *p,
                                            clrun_train_parallel_stats *out)
{
    if (p == NULL || out == NULL)
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "train_parallel: NULL argument");
    out->steps = p->steps;
    out->buckets = p->buckets;
    out->gradient_floats = p->floats;
    out->reduce_s = p->reduce_s;
    out->last_reduce_s = p->last_reduce_s;
    return CLRUN_OK;
}
