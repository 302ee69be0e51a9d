/* clrun train --devices: data-parallel training over several devices of this process
 * (<clrun/train_parallel.h>): the global batch split into a share per device, as mpirun's ranks
 * split it, each device's trainer built at its share, one step on all of them at once. */
#ifndef CLRUN_TOOLS_TRAIN_DEVICES_H
#define CLRUN_TOOLS_TRAIN_DEVICES_H

#include <stdbool.h>
#include <stdint.h>

#include <json-c/json.h>

#include <clrun/clrun.h>

#include "det_sum.h"

#define CLRUN_CLI_MAX_DEVICES 16
#define CLRUN_CLI_DEVICE_FEEDS 17 /* cmd_train.c's MAX_DATA + 1: the inputs and the labels */

/* --deterministic: one device's part, its contiguous chunks of every global batch. */
typedef struct clrun_cli_det_device {
    clrun_context *ctx;
    clrun_train *train;            /* split_update: gradients per chunk, then the update */
    clrun_cli_tree tree;           /* the sums of its chunks, as it streamed them */
    int64_t first_chunk, end_chunk;
    /* a step's outcome, from its thread */
    clrun_status status;
    int64_t failed_chunk;          /* the chunk that failed (its index + 1); 0 the update */
    char message[512];
    double loss, correct, rows;    /* its rows' loss sum, correct rows and rows */
    bool apply;                    /* the thread's work: the update, not the chunks */
    struct clrun_cli_devices *d;
    int32_t k;
} clrun_cli_det_device;

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
    /* --deterministic (parallel stays NULL): the global batch cut into chunks of chunk_rows,
     * device k taking chunks [det[k].first_chunk, det[k].end_chunk); the feeds of the whole
     * global batch in batch (filled by the caller), each chunk's rows a slice of them */
    bool deterministic;
    int64_t chunk_rows, chunks;
    clrun_cli_det_device det[CLRUN_CLI_MAX_DEVICES];
    void *batch[CLRUN_CLI_DEVICE_FEEDS];
    size_t row_bytes[CLRUN_CLI_DEVICE_FEEDS];
    uint64_t grad_count;
    float *grads;                           /* the step's gradients: the sum / chunks */
    uint64_t sums;                          /* steps summed */
    double sum_s, last_sum_s;               /* their merge, fold and scaling time */
} clrun_cli_devices;

/* --devices LIST: device numbers separated by commas (one may repeat: two contexts on it). 0, or
 * 2 with the reason printed. */
int clrun_cli_devices_parse(const char *text, clrun_cli_devices *d);

/* The shares of a global batch of `batch` rows (0: the model's batch on every device, set by
 * clrun_cli_devices_model_batch). onnx: whether the model is ONNX (a .graph fixes its batch).
 * 0, or 2 with the reason printed. */
int clrun_cli_devices_split(clrun_cli_devices *d, int64_t batch, bool onnx);

/* --deterministic: the global batch of `batch` rows cut into chunks of chunk_rows (which
 * divides it), each device's contiguous share of the chunks as clrun_cli_share cuts them among
 * ranks (first and rows: their rows). 0, or 2 with the reason printed (fewer chunks than
 * devices). */
int clrun_cli_devices_chunks(clrun_cli_devices *d, int64_t batch, int64_t chunk_rows);

/* Without --batch: every device takes the model's batch `rows`. */
void clrun_cli_devices_model_batch(clrun_cli_devices *d, int64_t rows);

/* The parallel trainer from graphs[0] (and graphs[1] for the shares of fewer rows), with
 * `options` for every device's trainer and bucket_bytes 0 as one reduction after the backward
 * passes; its per-device feed buffers. 0, or an exit status with the reason printed. */
int clrun_cli_devices_create(clrun_cli_devices *d, const clrun_train_options *options,
                             const char *allocator, bool after_backward);

/* --deterministic: a context and a trainer of `model` (its batch the chunk's rows) per device,
 * with `options` (split_update set), their trees, the buffers of the global batch (d->batch).
 * 0, or an exit status with the reason printed. */
int clrun_cli_devices_create_det(clrun_cli_devices *d, const clrun_graph *model,
                                 const clrun_train_options *options, const char *allocator);

/* Device k's trainer and context (either mode); NULL out of range. */
clrun_train *clrun_cli_devices_trainer(clrun_cli_devices *d, int32_t k);
clrun_context *clrun_cli_devices_context(clrun_cli_devices *d, int32_t k);

/* A saved train state loaded into every device's trainer. 0, or with the reason printed the
 * exit status clrun_cli_state_exit gives. */
int clrun_cli_devices_load(clrun_cli_devices *d, const char *path);

/* The exit status for a train state that did not load: 2 when it is malformed or of another
 * model (CLRUN_ERROR_PARSE, CLRUN_ERROR_INVALID_ARGUMENT), 1 when it could not be read. */
int clrun_cli_state_exit(clrun_status status);

/* --deterministic: one step on the global batch in d->batch. Every device runs its chunks'
 * forward and backward passes (clrun_train_gradients) on a host thread of its own (device 0's
 * on the caller's), streaming their gradients through its tree; device 0's tree then takes the
 * others' blocks in chunk order and folds them (as rank 0 does under mpirun), the sum is
 * divided by the chunks, and every device applies the same gradients (clrun_train_apply, on
 * its thread). The sums into *loss, *correct and *rows as clrun_cli_devices_step. 0, or an
 * exit status with the reason printed after `where` (the failing device and chunk named). */
int clrun_cli_devices_det_step(clrun_cli_devices *d, const char *where, double *loss,
                               double *correct, double *rows);

/* Runs one step on the feeds in d->bufs: the sum of the devices' losses times their rows into
 * *loss, their correct rows and rows added. 0, or an exit status with the reason printed after
 * `where`. */
int clrun_cli_devices_step(clrun_cli_devices *d, const char *where, double *loss,
                           double *correct, double *rows);

/* Whether every device's parameters are device 0's, bit for bit (both modes keep them so, on
 * devices that round alike): 1 yes, 0 no (with which device and parameter differ printed as a
 * warning), -1 when they cannot be read (the reason printed). */
int clrun_cli_devices_agree(clrun_cli_devices *d);

/* The JSON report's keys of --devices: devices, device_batch, reduce figures. */
void clrun_cli_devices_report(const clrun_cli_devices *d, json_object *o);

/* agree: clrun_cli_devices_agree's answer, reported as devices_same_params (not when -1). */
void clrun_cli_devices_report_agree(json_object *o, int agree);

/* Frees everything (the trainers and contexts too). */
void clrun_cli_devices_free(clrun_cli_devices *d);

#endif
