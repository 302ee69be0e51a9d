/* clrun train --devices: the global batch split over the devices of this process; with
 * --deterministic, its chunks split over them and summed through det_sum.c's tree. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "train_devices.h"

int clrun_cli_devices_parse(const char *text, clrun_cli_devices *d)
{
    memset(d, 0, sizeof *d);
    d->count = clrun_cli_parse_devices(text, d->index, CLRUN_CLI_MAX_DEVICES);
    if (d->count < 1) {
        d->count = 0;
        return clrun_cli_usage_error("train", "--devices takes device numbers separated by "
                                     "commas (as clrun info lists them), at most %d, not '%s'",
                                     CLRUN_CLI_MAX_DEVICES, text);
    }
    return 0;
}

int clrun_cli_devices_split(clrun_cli_devices *d, int64_t batch, bool onnx)
{
    if (batch == 0)
        return 0;
    if (!onnx) {
        fprintf(stderr, "clrun train: --devices with --batch needs an ONNX model with an open "
                "batch (each device binds its share of it): a .graph file fixes its shapes "
                "(leave out --batch for the model's batch on every device)\n");
        return 2;
    }
    if (batch < d->count) {
        fprintf(stderr, "clrun train: --batch %" PRId64 " is less than a row for each of the %d "
                "devices\n", batch, (int)d->count);
        return 2;
    }
    d->global_batch = batch;
    for (int32_t k = 0; k < d->count; k++)
        (void)clrun_train_parallel_share(batch, d->count, k, &d->first[k], &d->rows[k]);
    return 0;
}

int clrun_cli_devices_chunks(clrun_cli_devices *d, int64_t batch, int64_t chunk_rows)
{
    int64_t chunks = batch / chunk_rows;
    if (chunks < d->count) {
        fprintf(stderr, "clrun train: --deterministic: --batch %" PRId64 " in chunks of %" PRId64
                " rows (--chunk) makes %" PRId64 " chunks, fewer than the %d devices\n", batch,
                chunk_rows, chunks, (int)d->count);
        return 2;
    }
    d->deterministic = true;
    d->chunk_rows = chunk_rows;
    d->chunks = chunks;
    d->global_batch = batch;
    for (int32_t k = 0; k < d->count; k++) {
        clrun_cli_det_device *w = &d->det[k];
        (void)clrun_cli_share(chunks, d->count, k, &w->first_chunk, &w->end_chunk);
        d->first[k] = w->first_chunk * chunk_rows;
        d->rows[k] = (w->end_chunk - w->first_chunk) * chunk_rows;
    }
    return 0;
}

void clrun_cli_devices_model_batch(clrun_cli_devices *d, int64_t rows)
{
    d->global_batch = rows * d->count;
    for (int32_t k = 0; k < d->count; k++) {
        d->first[k] = rows * k;
        d->rows[k] = rows;
    }
}

int clrun_cli_devices_create(clrun_cli_devices *d, const clrun_train_options *options,
                             const char *allocator, bool after_backward)
{
    clrun_train_parallel_options po;
    clrun_train_parallel_options_init(&po);
    po.train = *options;
    po.allocator = allocator;
    po.after_backward = after_backward;
    const clrun_graph *models[CLRUN_CLI_MAX_DEVICES];
    for (int32_t k = 0; k < d->count; k++)
        models[k] = d->rows[k] == d->rows[0] || d->graphs[1] == NULL ? d->graphs[0] : d->graphs[1];
    if (clrun_train_parallel_create(models, d->index, d->count, &po, &d->parallel) != CLRUN_OK) {
        fprintf(stderr, "clrun train: --devices: %s\n", clrun_last_error(NULL));
        return 2;
    }
    d->feeds = clrun_train_feed_count(clrun_train_parallel_trainer(d->parallel, 0));
    if (d->feeds > CLRUN_CLI_DEVICE_FEEDS) {
        fprintf(stderr, "clrun train: --devices: the model takes %d feeds, at most %d here\n",
                (int)d->feeds, CLRUN_CLI_DEVICE_FEEDS);
        return 2;
    }
    for (int32_t k = 0; k < d->count; k++)
        for (int32_t i = 0; i < d->feeds; i++) {
            clrun_tensor_type ft;
            clrun_train_feed_info(clrun_train_parallel_trainer(d->parallel, k), i, NULL, &ft);
            if ((d->bufs[k][i] = malloc((size_t)clrun_tensor_bytes(&ft) + 1)) == NULL) {
                fprintf(stderr, "clrun train: out of host memory\n");
                return 1;
            }
        }
    return 0;
}

int clrun_cli_devices_create_det(clrun_cli_devices *d, const clrun_graph *model,
                                 const clrun_train_options *options, const char *allocator)
{
    for (int32_t k = 0; k < d->count; k++) {
        clrun_cli_det_device *w = &d->det[k];
        w->d = d;
        w->k = k;
        char index[32];
        snprintf(index, sizeof index, "%u", d->index[k]);
        clrun_context_options co;
        clrun_context_options_init(&co);
        co.allocator = allocator;
        co.device = index;
        if (clrun_context_create(&co, &w->ctx) != CLRUN_OK) {
            fprintf(stderr, "clrun train: --devices: device %u (share %d): %s\n", d->index[k],
                    (int)k, clrun_last_error(NULL));
            return 2;
        }
        if (clrun_train_create(w->ctx, model, options, &w->train) != CLRUN_OK) {
            fprintf(stderr, "clrun train: --devices: device %u (share %d): %s\n", d->index[k],
                    (int)k, clrun_last_error(w->ctx));
            return 2;
        }
    }
    clrun_train *t0 = d->det[0].train;
    d->grad_count = clrun_train_gradient_count(t0);
    d->feeds = clrun_train_feed_count(t0);
    if (d->feeds > CLRUN_CLI_DEVICE_FEEDS) {
        fprintf(stderr, "clrun train: --devices: the model takes %d feeds, at most %d here\n",
                (int)d->feeds, CLRUN_CLI_DEVICE_FEEDS);
        return 2;
    }
    for (int32_t k = 0; k < d->count; k++)
        if (!clrun_cli_tree_init(&d->det[k].tree, d->grad_count))
            goto oom;
    for (int32_t i = 0; i < d->feeds; i++) {
        clrun_tensor_type ft;
        clrun_train_feed_info(t0, i, NULL, &ft);
        d->row_bytes[i] = (size_t)(clrun_tensor_bytes(&ft) / (uint64_t)d->chunk_rows);
        if ((d->batch[i] = malloc(d->row_bytes[i] * (size_t)d->global_batch + 1)) == NULL)
            goto oom;
    }
    if ((d->grads = malloc(sizeof *d->grads * (size_t)(d->grad_count ? d->grad_count : 1))) == NULL)
        goto oom;
    return 0;
oom:
    fprintf(stderr, "clrun train: out of host memory\n");
    return 1;
}

clrun_train *clrun_cli_devices_trainer(clrun_cli_devices *d, int32_t k)
{
    if (k < 0 || k >= d->count)
        return NULL;
    return d->deterministic ? d->det[k].train : clrun_train_parallel_trainer(d->parallel, k);
}

clrun_context *clrun_cli_devices_context(clrun_cli_devices *d, int32_t k)
{
    if (k < 0 || k >= d->count)
        return NULL;
    return d->deterministic ? d->det[k].ctx : clrun_train_parallel_context(d->parallel, k);
}

int clrun_cli_state_exit(clrun_status status)
{
    return status == CLRUN_ERROR_PARSE || status == CLRUN_ERROR_INVALID_ARGUMENT ? 2 : 1;
}

int clrun_cli_devices_load(clrun_cli_devices *d, const char *path)
{
    clrun_status s;
    if (!d->deterministic) {
        if ((s = clrun_train_parallel_load(d->parallel, path)) == CLRUN_OK)
            return 0;
        fprintf(stderr, "clrun train: %s\n", clrun_last_error(NULL));
        return clrun_cli_state_exit(s);
    }
    for (int32_t k = 0; k < d->count; k++)
        if ((s = clrun_train_load(d->det[k].train, path)) != CLRUN_OK) {
            fprintf(stderr, "clrun train: device %u (share %d): %s\n", d->index[k], (int)k,
                    clrun_last_error(d->det[k].ctx));
            return clrun_cli_state_exit(s);
        }
    return 0;
}

/* One device's part of a --deterministic step: its chunks' gradients through its tree, or (apply)
 * the update with the summed gradients. */
static void *det_work(void *arg)
{
    clrun_cli_det_device *w = arg;
    clrun_cli_devices *d = w->d;
    w->status = CLRUN_OK;
    w->failed_chunk = 0;
    if (w->apply) {
        w->status = clrun_train_apply(w->train, d->grads, d->grad_count);
        if (w->status != CLRUN_OK)
            snprintf(w->message, sizeof w->message, "the update: %s", clrun_last_error(w->ctx));
        return NULL;
    }
    w->loss = w->correct = w->rows = 0;
    clrun_cli_tree_reset(&w->tree);
    for (int64_t c = w->first_chunk; c < w->end_chunk; c++) {
        const void *feeds[CLRUN_CLI_DEVICE_FEEDS];
        for (int32_t i = 0; i < d->feeds; i++)
            feeds[i] = (const char *)d->batch[i] + (size_t)(c * d->chunk_rows) * d->row_bytes[i];
        float *g = clrun_cli_tree_next(&w->tree);
        clrun_train_step_result r;
        w->status = g ? clrun_train_gradients(w->train, feeds, d->feeds, g, d->grad_count, &r)
                      : CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        bool oom = g == NULL;
        if (w->status == CLRUN_OK && !clrun_cli_tree_push(&w->tree, c, 0)) {
            w->status = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
            oom = true;
        }
        if (w->status != CLRUN_OK) {
            w->failed_chunk = c + 1;
            snprintf(w->message, sizeof w->message, "%s",
                     oom ? "out of host memory" : clrun_last_error(w->ctx));
            return NULL;
        }
        w->loss += r.loss * (double)d->chunk_rows;
        if (r.correct >= 0) {
            w->correct += (double)r.correct;
            w->rows += (double)r.rows;
        }
    }
    return NULL;
}

/* det_work on every device at once, a thread per device (device 0's, and any whose thread does
 * not start, on the caller's); the first failing device's reason printed. 0, or an exit status. */
static int det_run(clrun_cli_devices *d, bool apply, const char *where)
{
    pthread_t threads[CLRUN_CLI_MAX_DEVICES];
    bool started[CLRUN_CLI_MAX_DEVICES] = {false};
    for (int32_t k = 0; k < d->count; k++)
        d->det[k].apply = apply;
    for (int32_t k = 1; k < d->count; k++)
        started[k] = pthread_create(&threads[k], NULL, det_work, &d->det[k]) == 0;
    for (int32_t k = 0; k < d->count; k++)
        if (!started[k])
            det_work(&d->det[k]);
    for (int32_t k = 1; k < d->count; k++)
        if (started[k])
            pthread_join(threads[k], NULL);
    for (int32_t k = 0; k < d->count; k++) {
        const clrun_cli_det_device *w = &d->det[k];
        if (w->status == CLRUN_OK)
            continue;
        if (w->failed_chunk > 0)
            fprintf(stderr, "clrun train: %s, chunk %" PRId64 " (device %u, share %d): %s\n",
                    where, w->failed_chunk, d->index[k], (int)k, w->message);
        else
            fprintf(stderr, "clrun train: %s: device %u (share %d): %s\n", where, d->index[k],
                    (int)k, w->message);
        return w->status == CLRUN_ERROR_INVALID_ARGUMENT ? 2 : 1;
    }
    return 0;
}

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int clrun_cli_devices_det_step(clrun_cli_devices *d, const char *where, double *loss,
                               double *correct, double *rows)
{
    int rc = det_run(d, false, where);
    if (rc != 0)
        return rc;
    double start = seconds();
    /* device 0's blocks, then each next device's in chunk order: the root's merges */
    clrun_cli_tree *root = &d->det[0].tree;
    for (int32_t k = 1; k < d->count; k++)
        if (!clrun_cli_tree_merge(root, &d->det[k].tree)) {
            fprintf(stderr, "clrun train: %s: out of host memory for the sums of the chunks\n",
                    where);
            return 1;
        }
    const float *sum = clrun_cli_tree_fold(root);
    clrun_cli_tree_mean(sum, d->grad_count, d->chunks, d->grads);
    d->last_sum_s = seconds() - start;
    d->sum_s += d->last_sum_s;
    d->sums++;
    if ((rc = det_run(d, true, where)) != 0)
        return rc;
    for (int32_t k = 0; k < d->count; k++) {
        *loss += d->det[k].loss;
        *correct += d->det[k].correct;
        *rows += d->det[k].rows;
    }
    return 0;
}

int clrun_cli_devices_step(clrun_cli_devices *d, const char *where, double *loss,
                           double *correct, double *rows)
{
    const void *const *feeds[CLRUN_CLI_MAX_DEVICES];
    clrun_train_step_result r[CLRUN_CLI_MAX_DEVICES];
    for (int32_t k = 0; k < d->count; k++)
        feeds[k] = (const void *const *)d->bufs[k];
    clrun_status s = clrun_train_parallel_step(d->parallel, feeds, d->feeds, r);
    if (s != CLRUN_OK) {
        fprintf(stderr, "clrun train: %s: %s\n", where, clrun_last_error(NULL));
        return s == CLRUN_ERROR_INVALID_ARGUMENT ? 2 : 1;
    }
    for (int32_t k = 0; k < d->count; k++) {
        *loss += r[k].loss * (double)d->rows[k];
        if (r[k].correct >= 0) {
            *correct += (double)r[k].correct;
            *rows += (double)r[k].rows;
        }
    }
    return 0;
}

int clrun_cli_devices_agree(clrun_cli_devices *d)
{
    clrun_train *t0 = clrun_cli_devices_trainer(d, 0);
    int32_t n = clrun_train_param_count(t0);
    for (int32_t i = 0; i < n; i++) {
        const char *name;
        clrun_tensor_type ty;
        if (clrun_train_param_info(t0, i, &name, &ty) != CLRUN_OK)
            return -1;
        uint64_t bytes = clrun_tensor_bytes(&ty);
        char *a = malloc((size_t)bytes + 1), *b = malloc((size_t)bytes + 1);
        int same = a && b ? 1 : -1;
        if (same < 0)
            fprintf(stderr, "clrun train: out of host memory\n");
        if (same > 0 && clrun_train_read_param(t0, i, a, bytes) != CLRUN_OK) {
            fprintf(stderr, "clrun train: device %u: %s\n", d->index[0],
                    clrun_last_error(clrun_cli_devices_context(d, 0)));
            same = -1;
        }
        for (int32_t k = 1; same > 0 && k < d->count; k++) {
            if (clrun_train_read_param(clrun_cli_devices_trainer(d, k), i, b, bytes) != CLRUN_OK) {
                fprintf(stderr, "clrun train: device %u (share %d): %s\n", d->index[k], (int)k,
                        clrun_last_error(clrun_cli_devices_context(d, k)));
                same = -1;
            } else if (memcmp(a, b, (size_t)bytes) != 0) {
                fprintf(stderr, "clrun train: warning: --devices: device %u (share %d) ends with "
                        "other values of '%s' than device %u (devices that round otherwise?); "
                        "device %u's are saved\n", d->index[k], (int)k, name ? name : "?",
                        d->index[0], d->index[0]);
                same = 0;
            }
        }
        free(a);
        free(b);
        if (same <= 0)
            return same;
    }
    return 1;
}

void clrun_cli_devices_report_agree(json_object *o, int agree)
{
    if (agree >= 0)
        json_object_object_add(o, "devices_same_params", json_object_new_boolean(agree > 0));
}

void clrun_cli_devices_report(const clrun_cli_devices *d, json_object *o)
{
    json_object *list = json_object_new_array(), *rows = json_object_new_array();
    for (int32_t k = 0; k < d->count; k++) {
        json_object_array_add(list, json_object_new_int((int)d->index[k]));
        json_object_array_add(rows, json_object_new_int64(d->rows[k]));
    }
    json_object_object_add(o, "devices", list);
    json_object_object_add(o, "device_batch", rows);
    if (d->deterministic) {
        json_object *chunks = json_object_new_array();
        for (int32_t k = 0; k < d->count; k++)
            json_object_array_add(chunks, json_object_new_int64(d->det[k].end_chunk -
                                                                d->det[k].first_chunk));
        json_object_object_add(o, "device_chunks", chunks);
        if (d->sums > 0) { /* the host's merge of the devices' sums, the fold and the scaling */
            json_object_object_add(o, "reduce_ms_per_step",
                                   json_object_new_double(1e3 * d->sum_s / (double)d->sums));
            json_object_object_add(o, "reduce_ms_last", json_object_new_double(1e3 * d->last_sum_s));
        }
        return;
    }
    clrun_train_parallel_stats st;
    if (clrun_train_parallel_stats_get(d->parallel, &st) == CLRUN_OK && st.steps > 0) {
        json_object_object_add(o, "reduce_ms_per_step",
                               json_object_new_double(1e3 * st.reduce_s / (double)st.steps));
        json_object_object_add(o, "reduce_ms_last", json_object_new_double(1e3 * st.last_reduce_s));
        json_object_object_add(o, "reduce_bytes_per_step",
                               json_object_new_int64((int64_t)(sizeof(float) * st.gradient_floats)));
        json_object_object_add(o, "buckets", json_object_new_int(st.buckets));
    }
}

void clrun_cli_devices_free(clrun_cli_devices *d)
{
    for (int32_t k = 0; k < d->count; k++)
        for (int32_t i = 0; i < CLRUN_CLI_DEVICE_FEEDS; i++)
            free(d->bufs[k][i]);
    for (int32_t k = 0; k < d->count; k++) {
        clrun_train_destroy(d->det[k].train);
        clrun_context_destroy(d->det[k].ctx);
        clrun_cli_tree_free(&d->det[k].tree);
    }
    for (int32_t i = 0; i < CLRUN_CLI_DEVICE_FEEDS; i++)
        free(d->batch[i]);
    free(d->grads);
    clrun_train_parallel_destroy(d->parallel);
    clrun_graph_destroy(d->graph1);
    memset(d, 0, sizeof *d);
}
