/* `clrun run`, shared by its files: the arguments, the results of the runs, and the report and
 * trace writers (tools/run_report.c, tools/run_trace.c). */
#ifndef CLRUN_TOOLS_RUN_H
#define CLRUN_TOOLS_RUN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <clrun/clrun.h>

#include "model_io.h"

typedef struct run_args {
    const char *path;
    const char *allocator; /* a strategy, naive or planned; NULL = CLRUN_ALLOCATOR */
    int repeat;
    bool json;
    const char *trace;
    FILE *trace_file;       /* opened before the work */
    uint64_t seed;
    double plan_time_limit; /* < 0: the executor's default */
    clrun_cli_io io;        /* --dim, --shape, --input, --output-dir (tools/model_io.h) */
} run_args;

typedef struct run_result {
    double *times;            /* per repeat, sorted once the runs are done */
    double median;            /* of times */
    clrun_exec_stats stats;   /* of the last run */
    char (*checksums)[17];    /* per output: XXH64 of its bytes, in hexadecimal */
    char (*fused)[160];       /* names of the fused groups ("fused:add+gelu") */
    int32_t fused_count;
} run_result;

/* The report for a person, or (--json) one JSON object, on stdout. */
void clrun_run_print_report(const run_args *a, const clrun_context *ctx, const clrun_graph *g,
                            const run_result *r);
void clrun_run_print_json(const run_args *a, const clrun_context *ctx, const clrun_graph *g,
                          const run_result *r);

/* Opens the trace file before any work, so that an unwritable path fails at once, with the
 * reason; NULL after a message. */
FILE *clrun_run_open_trace(const char *path);

/* Writes the Chrome/Perfetto trace of the executor's last (profiled) run to out (opened by
 * clrun_run_open_trace, closed here); 0 on success, else 1 after a message saying why. */
int clrun_run_write_trace(FILE *out, const char *path, const clrun_exec *exec,
                          const clrun_graph *graph, const clrun_context *ctx);

#endif
