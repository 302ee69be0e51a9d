/* clrun: a pipeline split of an inference graph over several devices of one process.
 *
 * A graph that does not fit one device is cut, in the order its nodes run, into consecutive
 * stages, one per device: each stage's estimated peak (the weights it reads, the tensors it
 * takes from outside, its own activations at their largest) within its device's limit, and of
 * the cuts that meet the limits, the one where the fewest activation bytes cross. Each stage is a
 * graph of its own, prepared by an executor on a context of its device; a run runs the stages in
 * order and moves the activations that cross a cut through host memory. The outputs are the bits
 * one device gives: every stage runs its nodes as the whole graph's executor would.
 * Not yet: stages of several micro-batches overlapping (a run is one batch, stage after stage). */
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
    uint64_t bytes_in;         /* last run: activations of earlier stages copied to the device */
    uint64_t bytes_out;        /* last run: activations copied from it for later stages */
    double wall_ms;            /* last run: the stage's host wall clock, copies included */
} clrun_pipeline_stage_info;

/* Fills *out for stage `stage`. CLRUN_ERROR_INVALID_ARGUMENT for NULL or a stage out of range. */
clrun_status clrun_pipeline_stage_info_get(const clrun_pipeline *pipeline, int32_t stage,
                                           clrun_pipeline_stage_info *out);

/* The context of stage `stage` (NULL out of range), to read its memory statistics or last error. */
clrun_context *clrun_pipeline_context(const clrun_pipeline *pipeline, int32_t stage);

#ifdef __cplusplus
}
#endif
#endif
