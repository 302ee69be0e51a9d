/* clrun: data-parallel inference over several devices of one process.
 *
 * One executor (<clrun/exec.h>) per device, each on a context of its own and each prepared for a
 * model at its share of the global batch; a run takes the inputs at the global batch in host
 * memory, cuts them along their first dimension into the shares (clrun_train_parallel_share's
 * split: batch / N rows each, one more on the first batch % N devices), runs every device at
 * once, one host thread per device (device 0's on the caller's), and gathers each output's rows
 * back into the caller's host buffer at the global batch, in row order. Each device computes its
 * rows as one device would, so where the kernels give a row the same bits whatever the batch, the
 * outputs are one device's at the global batch, bit for bit.
 *
 * The batch dimension. Device k's model fixes its rows: the first dimension of its first input.
 * An input whose first dimension is its device's rows on every device is split (each device gets
 * its rows); any other input (a mask, a table, a scalar) must have the same type on every device
 * and goes whole to each of them: the same bytes everywhere. (An input of that kind whose first
 * dimension happens to equal every share is split: give it another shape.) Every output must have
 * its device's rows as its first dimension (the rest of its shape the same on every device),
 * since its shares are concatenated; an output without the batch dimension (a sum over the
 * batch, say) is refused at creation, by name: concatenating it would be wrong.
 *
 * The in-process counterpart of running one process per device; the training one is
 * <clrun/train_parallel.h>. docs/distributed.md describes both. */
#ifndef CLRUN_RUN_PARALLEL_H
#define CLRUN_RUN_PARALLEL_H

#include <stdint.h>

#include <clrun/context.h>
#include <clrun/exec.h>
#include <clrun/graph.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct clrun_run_parallel clrun_run_parallel;

/* What every device shares. */
typedef struct clrun_run_parallel_options {
    const char *platform;           /* platform selector of every device (as
                                       clrun_context_options.platform); NULL = CLRUN_PLATFORM */
    const char *allocator;          /* each context's allocator or executor mode (a strategy,
                                       "naive", "planned"); NULL = CLRUN_ALLOCATOR */
    uint64_t pool_limit;            /* each device's pool limit in bytes; 0: the context's own
                                       (CLRUN_POOL_LIMIT, else the device's memory) */
    const clrun_exec_options *exec; /* each device's executor options (mode, fusion, folding,
                                       memory budget); NULL: the defaults */
} clrun_run_parallel_options;

/* Options with every field "the default". */
void clrun_run_parallel_options_init(clrun_run_parallel_options *options);

/* Creates a context on each of `count` devices and device k's executor of models[k], the model
 * at device k's share of the global batch (its first input's first dimension: the rows it takes).
 * The global batch is the sum of the shares, and each share must be the one
 * clrun_train_parallel_share gives device k of that batch (16 + 16 for 32 rows on two devices;
 * 11 + 11 + 10 on three); the models must otherwise be the same: the same inputs and outputs, in
 * order, with the same names, dtypes and shapes past the first dimension (see the header's
 * comment for inputs and outputs without the batch dimension). devices[k] is an index in
 * clrun_device_list's list, as CLRUN_DEVICE selects it (with a platform selector, among that
 * platform's devices); a device listed twice gets two contexts and runs two shares. Each model
 * must outlive the executor made of it (as clrun_exec_create's graph): keep them until
 * clrun_run_parallel_destroy. The same graph may serve several devices of the same share.
 * Errors: CLRUN_ERROR_INVALID_ARGUMENT for NULL, no devices, a model without an input of rows,
 * models that differ, shares other than the split's, an output without the batch dimension;
 * CLRUN_ERROR_NO_DEVICE for an index no device has; those of context and executor creation,
 * naming the device. On failure *out is NULL, nothing is leaked and clrun_last_error(NULL) says
 * why. options may be NULL. */
clrun_status clrun_run_parallel_create(const clrun_graph *const *models, const unsigned *devices,
                                       int32_t count, const clrun_run_parallel_options *options,
                                       clrun_run_parallel **out);

/* Frees every executor and context. NULL is accepted. */
void clrun_run_parallel_destroy(clrun_run_parallel *parallel);

/* Devices (shares) of the parallel runner; 0 for NULL. */
int32_t clrun_run_parallel_count(const clrun_run_parallel *parallel);

/* The global batch: the rows of every share together; 0 for NULL. */
int64_t clrun_run_parallel_batch(const clrun_run_parallel *parallel);

/* The bytes the caller gives for input i, or receives for output i, at the global batch (a split
 * tensor's rows x the global batch; an input given whole: its bytes); 0 out of range. */
uint64_t clrun_run_parallel_input_bytes(const clrun_run_parallel *parallel, int32_t i);
uint64_t clrun_run_parallel_output_bytes(const clrun_run_parallel *parallel, int32_t i);

/* Runs every device once on its rows and waits for all of them. inputs[i] is host memory of
 * input_bytes[i] = clrun_run_parallel_input_bytes(i) for the models' i-th input
 * (clrun_graph_inputs order), at the global batch; outputs[o] receives output o
 * (clrun_graph_outputs order) at the global batch, output_bytes[o] =
 * clrun_run_parallel_output_bytes(o), device k's rows at rows [first_k, first_k + rows_k). Each
 * device copies its rows of the inputs to its own buffers (allocated from its pool, freed after
 * the run), runs its executor and reads its outputs straight into the caller's rows. Runs of one
 * parallel runner must not overlap. Errors: CLRUN_ERROR_INVALID_ARGUMENT for NULL, counts other
 * than the models'; CLRUN_ERROR_INVALID_SIZE for a size other than the one above; checked before
 * anything runs. A device that fails does not stop the others (each runs its own rows, none
 * waits for another): every device finishes, then the call returns the status of the first
 * failed device in device order, clrun_last_error(NULL) naming it (its index, its share, its
 * rows) and its context's message; the outputs are then not valid (the other devices' rows are
 * written). Nothing is left running, and the input buffers are freed; each executor keeps its
 * outputs until its next run, as clrun_exec_run does. */
clrun_status clrun_run_parallel_run(clrun_run_parallel *parallel, const void *const *inputs,
                                    const uint64_t *input_bytes, int32_t input_count,
                                    void *const *outputs, const uint64_t *output_bytes,
                                    int32_t output_count);

/* One device, as created and as the last run went. */
typedef struct clrun_run_parallel_device_info {
    unsigned device;          /* its index in the device list */
    const char *device_name;  /* CL_DEVICE_NAME; points into the parallel runner */
    int64_t first_row;        /* its rows of the global batch: [first_row, first_row + rows) */
    int64_t rows;
    uint64_t weights_bytes;   /* its executor's constants on the device (clrun_exec_stats'
                                 constant_bytes) */
    uint64_t peak_bytes;      /* the most bytes its pool held at once since creation: weights,
                                 inputs, activations (clrun_memory_stats' in_use_peak) */
    uint64_t run_peak_bytes;  /* last run: its executor's peak of non-constant tensors
                                 (clrun_exec_stats' peak_bytes) */
    double wall_ms;           /* last run: host wall clock of its copies in, run and reads out */
    double run_ms;            /* last run: its executor's run alone (clrun_exec_stats' wall_ms) */
} clrun_run_parallel_device_info;

/* Fills *out for device k (the k-th of `devices` at creation). CLRUN_ERROR_INVALID_ARGUMENT for
 * NULL or k out of range. */
clrun_status clrun_run_parallel_device_info_get(const clrun_run_parallel *parallel, int32_t k,
                                                clrun_run_parallel_device_info *out);

/* The last run's wall span, from the first device's start to the last one's end, in ms (0
 * before any run). */
double clrun_run_parallel_wall_ms(const clrun_run_parallel *parallel);

/* Device k's context and executor (NULL out of range): for its memory statistics, its last
 * error, its executor's statistics. Running the executor alone is allowed between runs of the
 * parallel runner (its outputs are then that run's). */
clrun_context *clrun_run_parallel_context(const clrun_run_parallel *parallel, int32_t k);
clrun_exec *clrun_run_parallel_exec(const clrun_run_parallel *parallel, int32_t k);

#ifdef __cplusplus
}
#endif
#endif
