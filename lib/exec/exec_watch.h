/* A run that reads chosen outputs to host memory as soon as the last node writing each has
 * run, and lets the caller work on the host while the rest of the run is on the device: the
 * trainer's bucketed gradient reduction overlaps the backward pass so (train.c). */
#ifndef CLRUN_LIB_EXEC_WATCH_H
#define CLRUN_LIB_EXEC_WATCH_H

#include <stdbool.h>
#include <stdint.h>

#include <clrun/exec.h>

/* Called on the run's thread after each node is enqueued (with its reads), end false: a quick
 * look, for work that may start early; and once everything is enqueued, end true, before
 * the run's end is waited for. read[k] is the event of watched output k's read (complete: its
 * bytes are in host memory), NULL while it is not enqueued. A status other than CLRUN_OK
 * fails the run (the hook's message stands). */
typedef clrun_status (*clrun__exec_watch_fn)(void *user, const cl_event *read, bool end);

typedef struct clrun__exec_watch {
    int32_t count;             /* outputs watched */
    const int32_t *outputs;    /* their indices (clrun_graph_outputs order), each once */
    const int32_t *steps;      /* per watched output: clrun__exec_output_step's answer, which
                                  the caller computed once; NULL: the run computes them */
    void *const *host;         /* per watched output: where it is read to (its exact bytes) */
    clrun__exec_watch_fn wait; /* may be NULL: the reads are complete when the run returns */
    void *user;                /* wait's first argument */
} clrun__exec_watch;

/* The schedule step after which output i is complete (the last that writes its buffer), or
 * -1 when no step does (an input or a constant: complete at the start). */
int32_t clrun__exec_output_step(const clrun_exec *exec, int32_t i);

/* clrun_exec_run, with the reads and the hook of `watch`; the reads' events are released
 * before it returns. */
clrun_status clrun__exec_run_watched(clrun_exec *exec, const clrun_buffer *inputs,
                                     int32_t input_count, const clrun__exec_watch *watch);

/* With profiling: the device clock (ns) of the last run's first node start, from which its
 * spans count (clrun_exec_profile); 0 without. */
uint64_t clrun__exec_profile_origin(const clrun_exec *exec);

#endif
