/* clrun: a pipeline split of an inference graph over several devices of one process.
 *
 * A graph that does not fit one device is cut, in the order its nodes run, into consecutive
 * stages, one per device: each stage's estimated peak (the weights it reads, the tensors it
 * takes from outside, its own activations at their largest) within its device's limit, and of
 * the cuts that meet the limits, the one where the fewest activation bytes cross. Each stage is a
 * graph of its own, prepared by an executor on a context of its device; a run runs the stages in
 * order and moves the activations that cross a cut through host memory. The outputs are the bits
 * one device gives: every stage runs its nodes as the whole graph's executor would.
 *
 * Micro-batches: clrun_pipeline_run_many streams M sets of inputs (each the graph's own batch:
 * the graph's batch is the micro-batch) through the stages, a host thread per stage, so that
 * stage s runs micro-batch i while stage s + 1 runs micro-batch i - 1. Each micro-batch's
 * outputs are the bits a run of it alone on one device gives. */
#ifndef CLRUN_PIPELINE_H
#define CLRUN_PIPELINE_H

#include <stdint.h>

#include <clrun/context.h>
#include <clrun/exec.h>
#include <clrun/graph.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct clrun_pipeline clrun_pipeline;

/* What every stage shares. */
typedef struct clrun_pipeline_options {
    const char *platform;           /* platform selector of every device (as
                                       clrun_context_options.platform); NULL = CLRUN_PLATFORM */
    const char *allocator;          /* each context's allocator or executor mode; NULL =
                                       CLRUN_ALLOCATOR */
    const clrun_exec_options *exec; /* each stage's executor options; NULL: the defaults */
} clrun_pipeline_options;

/* Options with every field "the default". */
void clrun_pipeline_options_init(clrun_pipeline_options *options);

/* Splits `graph` over `device_count` devices and prepares every stage. devices[k] is the index of
 * stage k's device in clrun_device_list's list, as CLRUN_DEVICE's index selects it (with a
 * platform selector, among that platform's devices); a device may appear twice (two contexts). limits (may be NULL) gives each device's pool limit in bytes, which
 * the split holds its stage's estimate to; a limit of 0 takes the context's own
 * (CLRUN_POOL_LIMIT, else the device's memory). The graph must outlive the pipeline.
 * Errors: CLRUN_ERROR_INVALID_ARGUMENT for no devices or a graph with fewer nodes than devices;
 * CLRUN_ERROR_NO_DEVICE for an index no device has (naming the devices there are);
 * CLRUN_ERROR_OUT_OF_MEMORY when no cut meets the limits (with what the graph and its largest
 * node need) or a stage's executor does not fit its device after all (naming the stage); and
 * those of context and executor creation. On failure *out is NULL, nothing is leaked and
 * clrun_last_error(NULL) says why. options may be NULL. */
clrun_status clrun_pipeline_create(const clrun_graph *graph, const unsigned *devices,
                                   const uint64_t *limits, int32_t device_count,
                                   const clrun_pipeline_options *options, clrun_pipeline **out);

/* Frees every stage (executors, stage graphs, contexts) and the outputs. NULL is accepted. */
void clrun_pipeline_destroy(clrun_pipeline *pipeline);

/* Runs the graph once, stage after stage, and waits for it. inputs[i] is host memory of exactly
 * bytes[i] bytes for the graph's i-th input (clrun_graph_inputs order). Each stage copies the
 * inputs and earlier activations it reads to its device, runs, and copies back the activations
 * later stages read and the graph outputs it writes. Runs of one pipeline must not overlap.
 * On failure clrun_last_error(NULL) says why (the stage, the device and its context's message);
 * the outputs of the previous run are then not valid. */
clrun_status clrun_pipeline_run(clrun_pipeline *pipeline, const void *const *inputs,
                                const uint64_t *bytes, int32_t input_count);

/* Streams `micro_batches` (M) sets of inputs through the stages, overlapping them: a host thread
 * per stage (none for M = 1 or one stage: then stage after stage in the calling thread), each
 * stage taking micro-batch i once the stage before it has handed it on. inputs[i] is host memory
 * of M consecutive blocks of the graph's i-th input, input_bytes[i] = M x its size; outputs[o]
 * receives M consecutive blocks of the o-th graph output (clrun_graph_outputs order),
 * output_bytes[o] = M x its size. Block j of every output is what clrun_pipeline_run of block j
 * of every input gives, bit for bit. Activations crossing a cut wait in host hand-off slots, one
 * per micro-batch in flight (as many as stages; clrun_pipeline_run_info_get's handoff_bytes
 * says how much that holds). Runs of one pipeline must not overlap.
 * Errors: CLRUN_ERROR_INVALID_ARGUMENT for M < 1, a NULL array or pointer, or counts other than
 * the graph's; CLRUN_ERROR_INVALID_SIZE for a size other than M x the tensor's. A stage that
 * fails stops the others (each finishes the micro-batch it is running, none starts another), the
 * call returns its status and clrun_last_error(NULL) names the stage, its device and the
 * micro-batch; the outputs are then not valid. Nothing is left running or allocated. After this
 * call clrun_pipeline_read_output has nothing to read (the outputs are the caller's). */
clrun_status clrun_pipeline_run_many(clrun_pipeline *pipeline, int32_t micro_batches,
                                     const void *const *inputs, const uint64_t *input_bytes,
                                     int32_t input_count, void *const *outputs,
                                     const uint64_t *output_bytes, int32_t output_count);

/* Copies the i-th graph output of the last run (clrun_graph_outputs order) to `host` of `bytes`
 * (exactly its size). CLRUN_ERROR_INVALID_ARGUMENT before a run, for an index out of range or a
 * wrong size. */
clrun_status clrun_pipeline_read_output(const clrun_pipeline *pipeline, int32_t i, void *host,
                                        uint64_t bytes);

/* Stages (and so devices) of the pipeline; 0 for NULL. */
int32_t clrun_pipeline_stage_count(const clrun_pipeline *pipeline);

/* One stage and its device, as the split decided and (marked) as the last run went. */
typedef struct clrun_pipeline_stage_info {
    unsigned device;           /* its index in the device list */
    const char *device_name;   /* CL_DEVICE_NAME; points into the pipeline */
    int32_t first_node;        /* nodes [first_node, end_node) of the graph, in the order they */
    int32_t end_node;          /* run (declaration order for a graph built in order) */
    uint64_t limit_bytes;      /* the device's pool limit the split held the stage to (0: none) */
    uint64_t estimate_bytes;   /* the split's estimate of the stage's peak */
    uint64_t weights_bytes;    /* the stage's constants on the device (clrun_exec_stats'
                                  constant_bytes) */
    uint64_t peak_bytes;       /* the most bytes its device's pool held at once since the
                                  pipeline was made: weights, inputs, activations */
    uint64_t bytes_in;         /* last run, per micro-batch: activations of earlier stages
                                  copied to the device */
    uint64_t bytes_out;        /* last run, per micro-batch: activations copied from it for
                                  later stages */
    double wall_ms;            /* last run: the stage's busy time, host wall clock of its
                                  copies and runs summed over the micro-batches (waits not
                                  counted) */
} clrun_pipeline_stage_info;

/* Fills *out for stage `stage`. CLRUN_ERROR_INVALID_ARGUMENT for NULL or a stage out of range. */
clrun_status clrun_pipeline_stage_info_get(const clrun_pipeline *pipeline, int32_t stage,
                                           clrun_pipeline_stage_info *out);

/* The last run as a whole (clrun_pipeline_run: one micro-batch, stage after stage). */
typedef struct clrun_pipeline_run_info {
    int32_t micro_batches;   /* M */
    int32_t slots;           /* hand-off slots: micro-batches whose activations may wait at once */
    int32_t threads;         /* host threads the stages ran on (0: the calling thread) */
    double wall_ms;          /* the run's wall span, first stage start to last stage end */
    double busy_ms;          /* every stage's busy time (stage_info's wall_ms), summed */
    double bubble_fraction;  /* idle share of stage time within the span:
                                1 - busy_ms / (stages x wall_ms); 0 for an empty span */
    uint64_t bytes_moved;    /* per micro-batch: activations copied out of a stage for a later
                                one (the stages' bytes_out summed); as many are copied in */
    uint64_t handoff_bytes;  /* host memory held for activations in flight: slots x the bytes of
                                one micro-batch's crossing activations */
} clrun_pipeline_run_info;

/* Fills *out for the last run, successful or not (zero before any run).
 * CLRUN_ERROR_INVALID_ARGUMENT for NULL. */
clrun_status clrun_pipeline_run_info_get(const clrun_pipeline *pipeline,
                                         clrun_pipeline_run_info *out);

/* The context of stage `stage` (NULL out of range), to read its memory statistics or last error. */
clrun_context *clrun_pipeline_context(const clrun_pipeline *pipeline, int32_t stage);

#ifdef __cplusplus
}
#endif
#endif
