/* clrun: data-parallel training over several devices of one process.
 *
 * One trainer (<clrun/train.h>) per device, each on a context of its own and each built at its
 * share of the global batch; a step runs every device's forward and backward pass at once, one
 * host thread per device, and reduces their gradients in host memory: the shares' gradients
 * summed, each weighted by its share of the global batch (its rows / all rows), in a fixed order
 * (device 0, then 1, ...), in double and rounded to float once. Every device then applies the
 * same update to the same gradients, so the parameters stay the same bits on every device (on
 * devices that compute alike: the same kind), and a run is the same bits run after run. By
 * default the gradients are reduced in buckets (clrun_train_options.bucket_start) as soon as
 * every device's backward pass has completed them, while the rest of the passes run.
 *
 * This is the in-process counterpart of `mpirun -np N clrun train` (docs/distributed.md). Not
 * supported: a batch norm's running statistics are each device's own (device 0's are read and
 * saved); devices of different kinds may round differently and drift apart. */
#ifndef CLRUN_TRAIN_PARALLEL_H
#define CLRUN_TRAIN_PARALLEL_H

#include <stdbool.h>
#include <stdint.h>

#include <clrun/train.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct clrun_train_parallel clrun_train_parallel;

typedef struct clrun_train_parallel_options {
    /* Every device's trainer's options (loss, parameters, optimizer, executor), embedded by
     * value: a copy, not a pointer (initialise it with clrun_train_parallel_options_init, which
     * calls clrun_train_options_init on it). Its reduce, bucket_start, bucket_test and
     * split_update must be unset: the parallel step sets its own hooks. bucket_bytes sizes the
     * buckets as for one trainer. */
    clrun_train_options train;
    const char *platform;  /* platform selector of every device; NULL = CLRUN_PLATFORM */
    const char *allocator; /* each context's allocator or executor mode; NULL = CLRUN_ALLOCATOR */
    /* false (the default): reduced in buckets during the backward passes. true: once, after
     * every device's backward pass (clrun_train_options.reduce). The same sums either way. */
    bool after_backward;
} clrun_train_parallel_options;

/* Options with every field "the default" (clrun_train_options_init for train). */
void clrun_train_parallel_options_init(clrun_train_parallel_options *options);

/* Creates a context on each of `count` devices and device k's trainer of models[k], the model at
 * device k's share of the global batch: the first dimension of its first input is the rows it
 * takes (the shares may differ, by a row say, as clrun_train_parallel_share cuts them; the
 * models must otherwise be the same). devices[k] is an index in clrun_device_list's list, as
 * CLRUN_DEVICE selects it (with a platform selector, among that platform's devices); a device
 * listed twice gets two contexts and trains two shares. The models must outlive nothing (each
 * trainer keeps its own graph). When the devices' trainers cut the gradients into different
 * buckets (their schedules differ), the reduction falls back to one after the backward passes.
 * Errors: CLRUN_ERROR_INVALID_ARGUMENT for no devices, a NULL model, hooks already set or a
 * model without an input of rows; CLRUN_ERROR_NO_DEVICE for an index no device has; those of
 * context and trainer creation, naming the device. On failure *out is NULL, nothing is leaked
 * and clrun_last_error(NULL) says why. options may be NULL. */
clrun_status clrun_train_parallel_create(const clrun_graph *const *models, const unsigned *devices,
                                         int32_t count,
                                         const clrun_train_parallel_options *options,
                                         clrun_train_parallel **out);

/* Frees every trainer and context. NULL is accepted. */
void clrun_train_parallel_destroy(clrun_train_parallel *parallel);

/* Share k of a global batch of `batch` rows cut into `count` shares (devices, or MPI ranks):
 * rows [*first, *first + *rows), batch / count rows each, one more on the first batch % count
 * shares. The one split of the batch: clrun_mpi_share and `clrun train` (--devices, mpirun,
 * --deterministic's chunks) and the data-parallel inference of <clrun/run_parallel.h> all cut it
 * here. first or rows may be NULL. Errors:
 * CLRUN_ERROR_INVALID_ARGUMENT for count < 1, k outside [0, count) or batch < count (a share
 * without a row), with clrun_last_error(NULL) saying which; the outputs are then unchanged. */
clrun_status clrun_train_parallel_share(int64_t batch, int32_t count, int32_t k, int64_t *first,
                                        int64_t *rows);

/* Devices (trainers) of the parallel trainer; 0 for NULL. */
int32_t clrun_train_parallel_count(const clrun_train_parallel *parallel);

/* Device k's trainer and context (NULL out of range): for its parameters, evaluation, saving
 * and statistics. Stepping one alone breaks the agreement: step through
 * clrun_train_parallel_step only. */
clrun_train *clrun_train_parallel_trainer(clrun_train_parallel *parallel, int32_t k);
clrun_context *clrun_train_parallel_context(clrun_train_parallel *parallel, int32_t k);

/* Rows of device k's share (the first dimension of its model's first input); 0 out of range. */
int64_t clrun_train_parallel_rows(const clrun_train_parallel *parallel, int32_t k);

/* One data-parallel step: feeds[k] is device k's feeds as clrun_train_step takes them (feed_count
 * of them on every device, at its share's rows). Every device runs its forward and backward pass
 * on a thread of its own (device 0's on the caller's), the gradients are reduced as above, and
 * every device applies the update. results (may be NULL) gets device k's result at results[k] (its
 * loss is the mean over its rows). When a device fails (bad feeds, a failed run), the others stop
 * at the reduction instead of waiting for it and the step fails with the status of the device that
 * failed first, naming it and its message (clrun_last_error(NULL)). A failure before the gradients
 * are reduced (bad feeds, the forward or backward pass) leaves the parameters and optimizer state
 * as before the step on every device, and the parallel trainer may step again; one after it (a
 * device's update) leaves that device behind the others: destroy the parallel trainer, or load a
 * saved state. */
clrun_status clrun_train_parallel_step(clrun_train_parallel *parallel,
                                       const void *const *const *feeds, int32_t feed_count,
                                       clrun_train_step_result *results);

/* A saved train state (clrun_train_save of one of them) loaded into every device's trainer, in
 * device order; errors as clrun_train_load's, naming the device. Not atomic: a failure on device
 * k leaves devices 0..k-1 with the loaded state and the others with their own, so that they
 * disagree; load a state that loads (or destroy the parallel trainer) before stepping again. */
clrun_status clrun_train_parallel_load(clrun_train_parallel *parallel, const char *path);

/* The reduction's figures: steps reduced, buckets per step (0: one reduction after the backward
 * passes), and the wall time from the first device reaching the reduction to the last bucket
 * reduced, over every step and the last one. */
typedef struct clrun_train_parallel_stats {
    uint64_t steps;
    int32_t buckets;
    uint64_t gradient_floats; /* reduced per step */
    double reduce_s, last_reduce_s;
} clrun_train_parallel_stats;

clrun_status clrun_train_parallel_stats_get(const clrun_train_parallel *parallel,
                                            clrun_train_parallel_stats *out);

#ifdef __cplusplus
}
#endif
#endif
