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
    bool whole_groups;         /* the host of each member of a group (clrun__exec_group_outputs)
                                  lies at its offset in one region of the group's bytes, whose
                                  padding the run may write: each group is read at once */
    clrun__exec_watch_fn wait; /* may be NULL: the reads are complete when the run returns */
    void *user;                /* wait's first argument */
} clrun__exec_watch;

/* Lays the outputs of each group outputs[start[g] .. start[g + 1]) (g < count) out back to back
 * in device memory, in that order, each at an offset aligned to the device's base address
 * alignment: offsets[k] gets output k's offset in its group, bytes[g] the group's bytes (its
 * last member's end). A watched run then reads a whole group with one transfer, behind the
 * last step that completes one of its members, where the watch says so (whole_groups) and every
 * member is watched into host memory laid out alike (host[k] = the group's host start +
 * offsets[k]); read[k] of each member is
 * that one read's event. The group owns its members' buffers: a member's buffer holds the
 * earlier tensors it takes over in place too, so a group holds its bytes from its first
 * member's buffer's first step to the run's end (in pooled and naive modes one block or driver
 * buffer, taken when its first member's buffer is made; in planned mode one buffer of the
 * plan, never in a donated input's block). A group is left out (bytes[g] 0, its outputs where
 * they were) when an output's buffer is not the run's own (a graph input's, or an output
 * that is a view of one), is larger than the output, or is listed twice. No group at all on an out-of-order queue,
 * with loops, or in an arena that is a view of another executor's. Before the first run; a
 * second call replaces the groups. In planned mode the arena is planned again (if that fails,
 * without the groups); a failure leaves the executor without an arena: destroy it. */
clrun_status clrun__exec_group_outputs(clrun_exec *exec, int32_t count, const int32_t *start,
                                       const int32_t *outputs, uint64_t *offsets, uint64_t *bytes);

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
