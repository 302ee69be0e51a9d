/* `clrun run`, shared by its files: the arguments, the results of the runs, and the report and
 * trace writers (tools/run_report.c, tools/run_trace.c). */
#ifndef CLRUN_TOOLS_RUN_H
#define CLRUN_TOOLS_RUN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <clrun/clrun.h>

#include "model_bind.h"
#include "model_io.h"

#define CLRUN_RUN_MAX_DEVICES 64

typedef struct run_args {
    const char *path;
    const char *allocator; /* a strategy, naive or planned; NULL = CLRUN_ALLOCATOR */
    int repeat;
    bool json;
    bool strict_donation;   /* --strict-donation: an unused donation is an error */
    const char *trace;
    FILE *trace_file;       /* opened before the work */
    uint64_t seed;
    double plan_time_limit; /* < 0: the executor's default */
    clrun_cli_io io;        /* --dim, --shape, --input, --output-dir (tools/model_io.h) */
    clrun_cli_consts consts; /* --const (tools/model_bind.h) */
    clrun_dtype weights;    /* --weights: CLRUN_F16, CLRUN_BF16 or CLRUN_I8; CLRUN_F32 leaves them */
    uint64_t memory_budget; /* --memory-budget: bytes; 0: none */
    unsigned devices[CLRUN_RUN_MAX_DEVICES]; /* --devices: a pipeline over these */
    int device_count;       /* 0: one device, no pipeline */
    uint64_t device_limit;  /* --device-limit: each device's pool limit; 0: its own */
    int micro_batches;      /* --micro-batches: streamed through the pipeline; 0: plain runs */
    bool data_parallel;     /* --data-parallel: the batch split over the --devices instead */
} run_args;

/* One fused group, copied from the executor before it goes. */
typedef struct run_fused {
    char kernel[160];         /* "fused:add+gelu": its ops in order */
    char output[256];         /* the tensor it writes */
    int32_t nodes;            /* nodes of the graph it holds */
} run_fused;

typedef struct run_result {
    double *times;            /* per repeat, sorted once the runs are done */
    double median;            /* of times (min: times[0], max: times[repeat - 1]) */
    clrun_exec_stats stats;   /* of the last run */
    char (*checksums)[17];    /* per output: XXH64 of its bytes, in hexadecimal */
    run_fused *fused;         /* the fused groups, in schedule order */
    int32_t fused_count;
    char (*unused)[256];      /* the donated inputs no output could take */
    int32_t unused_count;
    clrun_weights_report weights; /* --weights: what was narrowed */
    double weights_abs_error; /* --weights: the largest |narrow - f32| over the float outputs */
    double weights_rel_error; /* ... and that over the largest |f32| of its output */
    /* How the first run's time split, in seconds of wall time: reading and importing the model,
     * creating the context, creating the executor (builds, uploads, planning), the warm-up run
     * (a lazy driver compiles each kernel at its first launch; tuning), and within the last
     * two the program builds and the variant tuning. */
    double first_load, first_context, first_prepare, first_run;
    double prepare_builds, prepare_tune, run_builds, run_tune;
    clrun_program_stats programs; /* the context's program counters after the warm-up run */
} run_result;

/* The report for a person, or (--json) one JSON object, on stdout. */
void clrun_run_print_report(const run_args *a, const clrun_context *ctx, const clrun_graph *g,
                            const run_result *r);
void clrun_run_print_json(const run_args *a, const clrun_context *ctx, const clrun_graph *g,
                          const run_result *r);

/* The "outputs" array of a --json report: each graph output's name, dtype, shape and
 * checksum (checksums[i], hexadecimal). */
struct json_object;
struct json_object *clrun_run_json_outputs(const clrun_graph *g, const char (*checksums)[17]);

/* Opens the trace file before any work, so that an unwritable path fails at once, with the
 * reason; NULL after a message that names `command` ("run", "train"). */
FILE *clrun_run_open_trace(const char *command, const char *path);

/* Writes the Chrome/Perfetto trace of the executor's last (profiled) run to out (opened by
 * clrun_run_open_trace, closed here): a span per kernel, of category "recompute" (and args
 * "recomputed": true) for a node that rematerialisation repeated, else "kernel"; 0 on
 * success, else 1 after a message saying why. */
int clrun_run_write_trace(FILE *out, const char *command, const char *path,
                          const clrun_exec *exec, const clrun_graph *graph,
                          const clrun_context *ctx);

/* The same, with a span of host work after the last kernel (`host` names it, of category
 * "collective", on a track of its own, "host"): it starts where the last kernel ends (the
 * host's clock is not the queue's: its start is placed, its duration measured) and lasts
 * host_s seconds. host NULL: clrun_run_write_trace. */
int clrun_run_write_trace_host(FILE *out, const char *command, const char *path,
                               const clrun_exec *exec, const clrun_graph *graph,
                               const clrun_context *ctx, const char *host, double host_s);

/* A span of host work placed on the trace's timeline (microseconds from the first kernel's
 * start), of category "collective", on the track "host". */
typedef struct clrun_run_host_span {
    const char *name;
    double start_us, dur_us;
} clrun_run_host_span;

/* clrun_run_write_trace with `count` host spans (clrun_run_write_trace_host places one). */
int clrun_run_write_trace_spans(FILE *out, const char *command, const char *path,
                                const clrun_exec *exec, const clrun_graph *graph,
                                const clrun_context *ctx, const clrun_run_host_span *spans,
                                int32_t count);


/* clrun run --devices: the graph as a pipeline over a->devices (tools/run_pipeline.c); prints
 * each device's report and the outputs' checksums; 0, else 1 after a message. */
int clrun_run_pipeline(const run_args *a, const clrun_graph *g);

/* clrun run --devices --data-parallel: the global batch split over a->devices, the whole model on
 * each (tools/run_data_parallel.c); g is the model as loaded (an ONNX model at the global batch,
 * reloaded per share; a .graph at each device's share); prints each device's rows and the
 * outputs' checksums at the global batch; 0, else 1 (2 for a model it cannot split) after a
 * message. */
int clrun_run_data_parallel(const run_args *a, const clrun_graph *g);

#endif
