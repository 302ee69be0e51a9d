/* clrun train --devices: the global batch split over the devices of this process. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

void clrun_cli_devices_report(const clrun_cli_devices *d, json_object *o)
{
    json_object *list = json_object_new_array(), *rows = json_object_new_array();
    for (int32_t k = 0; k < d->count; k++) {
        json_object_array_add(list, json_object_new_int((int)d->index[k]));
        json_object_array_add(rows, json_object_new_int64(d->rows[k]));
    }
    json_object_object_add(o, "devices", list);
    json_object_object_add(o, "device_batch", rows);
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
    clrun_train_parallel_destroy(d->parallel);
    clrun_graph_destroy(d->graph1);
    memset(d, 0, sizeof *d);
}
