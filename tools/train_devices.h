/* clrun train --devices: data-parallel training over several devices of this process
 * (<clrun/train_parallel.h>): the global batch split into a share per device, as mpirun's ranks
 * split it, each device's trainer built at its share, one step on all of them at once. */
#ifndef CLRUN_TOOLS_TRAIN_DEVICES_H
#define CLRUN_TOOLS_TRAIN_DEVICES_H

#include <stdbool.h>
#include <stdint.h>

#include <json-c/json.h>

#include <clrun/clrun.h>

#define CLRUN_CLI_MAX_DEVICES 16
#define CLRUN_CLI_DEVICE_FEEDS 17 /* cmd_train.c's MAX_DATA + 1: the inputs and the labels */

typedef struct clrun_cli_devices {
    int32_t count;                          /* 0: not asked for */
    unsigned index[CLRUN_CLI_MAX_DEVICES];  /* as clrun info numbers them */
    int64_t first[CLRUN_CLI_MAX_DEVICES];   /* each share: rows [first, first + rows) of a batch */
    int64_t rows[CLRUN_CLI_MAX_DEVICES];
    int64_t global_batch;
    const clrun_graph *graphs[2];           /* the model at the first share's rows (the
                                               caller's), and at the last's when they differ
                                               (graph1, owned) */
    clrun_graph *graph1;
    clrun_train_parallel *parallel;
    int32_t feeds;
    void *bufs[CLRUN_CLI_MAX_DEVICES][CLRUN_CLI_DEVICE_FEEDS];
} clrun_cli_devices;

/* --devices LIST: device numbers separated by commas (one may repeat: two contexts on it). 0, or
 * 2 with the reason printed. */
int clrun_cli_devices_parse(const char *text, clrun_cli_devices *d);

/* The shares of a global batch of `batch` rows (0: the model's batch on every device, set by
 * clrun_cli_devices_model_batch). onnx: whether the model is ONNX (a .graph fixes its batch).
 * 0, or 2 with the reason printed. */
int clrun_cli_devices_split(clrun_cli_devices *d, int64_t batch, bool onnx);

/* Without --batch: every device takes the model's batch `rows`. */
void clrun_cli_devices_model_batch(clrun_cli_devices *d, int64_t rows);

/* The parallel trainer from graphs[0] (and graphs[1] for the shares of fewer rows), with
 * `options` for every device's trainer and bucket_bytes 0 as one reduction after the backward
 * passes; its per-device feed buffers. 0, or an exit status with the reason printed. */
int clrun_cli_devices_create(clrun_cli_devices *d, const clrun_train_options *options,
                             const char *allocator, bool after_backward);

/* Runs one step on the feeds in d->bufs: the sum of the devices' losses times their rows into
 * *loss, their correct rows and rows added. 0, or an exit status with the reason printed after
 * `where`. */
int clrun_cli_devices_step(clrun_cli_devices *d, const char *where, double *loss,
                           double *correct, double *rows);

/* The JSON report's keys of --devices: devices, device_batch, reduce figures. */
void clrun_cli_devices_report(const clrun_cli_devices *d, json_object *o);

/* Frees everything (the trainers and contexts too). */
void clrun_cli_devices_free(clrun_cli_devices *d);

#endif
