/* The schedule of a graph, computed before it runs (pure C, no OpenCL): the order of the nodes,
 * each tensor's last use, which outputs take the buffer of a dying input (donation and in-place
 * reuse), the buffers that result (the nodes' scratch among them), and the accounting that
 * every mode is measured against. */
#ifndef CLRUN_LIB_SCHEDULE_H
#define CLRUN_LIB_SCHEDULE_H

#include <clrun/plan.h>

#include "graph/graph.h"

/* Parts of scratch a node may have (ops.h's CLRUN__SCRATCH_MAX; exec.c checks they agree). */
#define CLRUN__SCHEDULE_SCRATCH 2

/* A buffer: the memory of one or more tensors that follow each other in place, or a part of a
 * node's scratch (bytes the node's kernels use during its step alone). */
typedef struct clrun__sched_buffer {
    uint64_t bytes;       /* of every tensor in it */
    int32_t first;        /* step that creates it; -1 for graph inputs and constants */
    int32_t last;         /* last step that reads it; `steps` for graph outputs */
    int32_t root;         /* the first tensor that owns it; for scratch, its node's first output
                             (which names it: "'h1' scratch") */
    bool is_scratch;      /* part `part` of the scratch of step `first` (first == last) */
    uint8_t part;
    bool is_input;        /* holds a graph input (the caller's buffer) */
    bool is_donated;      /* that input is donated: the executor frees it after its last use */
    bool is_constant;     /* holds a constant */
    bool is_output;       /* ends as a graph output */
    bool is_host;         /* written by an `offload` node: host memory of its own, outside the
                             device's accounting (bounds, the planner's items) */
} clrun__sched_buffer;

typedef struct clrun__schedule {
    int32_t steps;            /* nodes, in `order` */
    bool reuse;               /* outputs may take dying inputs' buffers (false: naive) */
    int32_t *order;           /* node index of each step */
    int32_t *step_of_node;    /* inverse of order */
    int32_t *last_use;        /* per tensor: last step that reads it, `steps` for outputs, -2
                                 when nothing reads it */
    int32_t *producer_step;   /* per tensor: the step that writes it, -1 for inputs/constants */
    int32_t *alias_of;        /* per tensor: the input whose buffer it takes, or -1 */
    int32_t *buffer_of;       /* per tensor: index into buffers */
    clrun__sched_buffer *buffers;
    int32_t buffer_count;
    int32_t *release_start;   /* buffers released after step s: release_list[release_start[s] ..
                                 release_start[s + 1]) (steps + 1 entries) */
    int32_t *release_list;
    int32_t *scratch_start;   /* scratch buffers of step s: scratch_list[scratch_start[s] ..
                                 scratch_start[s + 1]), by part (steps + 1 entries) */
    int32_t *scratch_list;
    uint64_t scratch_bytes;   /* of every node's scratch together */
    int32_t donations;        /* outputs that took an input's buffer */
    int32_t donated_in_place; /* of them, outputs that took a donated graph input's */
    int32_t views;            /* outputs that are views of their input's buffer (reshape) */
    /* Concats assembled in place (clrun__schedule_build_assembling): per tensor, the concat
     * output whose buffer it is written into, at part_offset[t] bytes (the output itself for
     * that output, at 0), or -1; NULL (both) when no concat is. */
    int32_t *part_of;
    uint64_t *part_offset;
    int32_t assembled;        /* concats with some inputs written into their output's buffer */
    int32_t assembled_whole;  /* of them, those with every input: they copy nothing, launch
                                 nothing */
    int32_t *unused_donated;  /* graph inputs marked donated whose buffer no output took */
    int32_t unused_donated_count;
    uint64_t lower_bound;     /* largest total of live non-constant buffer bytes at any step
                                 (scratch included) */
    uint64_t naive_bytes;     /* every non-constant tensor and every node's scratch in its own
                                 buffer, all at once */
    uint64_t constant_bytes;  /* resident weights */
    uint64_t host_bytes;      /* of the buffers in host memory (is_host) */
    int32_t host_buffers;     /* their number */
} clrun__schedule;

/* Computes the schedule of a validated graph. reuse false gives every tensor its own buffer,
 * none released before the run ends (the naive baseline). On error, err says why and *out is
 * untouched. */
clrun_status clrun__schedule_build(const clrun_graph *graph, bool reuse, clrun__schedule *out,
                                   char *err, size_t errlen);

/* The same with the nodes' scratch: scratch[node * CLRUN__SCHEDULE_SCRATCH + j] bytes of part j
 * of each node's scratch (0: no such part), or NULL for none. Each part is a buffer of its own,
 * alive during its node's step only. */
clrun_status clrun__schedule_build_with_scratch(const clrun_graph *graph, bool reuse,
                                                const uint64_t *scratch, clrun__schedule *out,
                                                char *err, size_t errlen);

/* The same, with the concats whose inputs can be written straight into their output's buffer
 * assembled in place (schedule_concat.c says which): each such input is made at its place in
 * that buffer, which lives from the first of them on. `alignment`: every place a multiple of
 * it (the device's base address alignment); 0 assembles none. Always with reuse. */
clrun_status clrun__schedule_build_assembling(const clrun_graph *graph, const uint64_t *scratch,
                                              uint64_t alignment, clrun__schedule *out,
                                              char *err, size_t errlen);

/* The concats of a reusing schedule built without them that may be assembled in place, as
 * *part_of and *part_offset (malloc'd, per tensor; NULL when none), their number and how many
 * of them have every input placed (schedule_concat.c). Fails only for want of host memory. */
clrun_status clrun__schedule_pick_concats(const clrun_graph *graph, const clrun__schedule *schedule,
                                          uint64_t alignment, int32_t **part_of,
                                          uint64_t **part_offset, int32_t *picked, int32_t *whole);

/* The bytes of live non-constant device buffers at each step (scratch included; an input the
 * caller keeps over the whole run) into live[0..steps): the profile whose largest entry is the
 * lower bound. */
void clrun__schedule_live(const clrun__schedule *schedule, int64_t *live);

/* The buffers the static planner lays out: every buffer a run creates, alive over
 * [first step, last step + 1), and with `with_inputs` the graph inputs too, alive from 0. *items
 * and *which (the schedule buffer of each item) are malloc'd; *count gets their number. */
clrun_status clrun__schedule_plan_items(const clrun__schedule *schedule, bool with_inputs,
                                        clrun_plan_buffer **items, int32_t **which, size_t *count);

/* The same items as clrun_plan_buffer rows with the names of their tensors (names may be NULL),
 * as clrun_graph_plan_buffers hands them out; the reason of a failure goes to why. */
clrun_status clrun__schedule_plan_buffers(const clrun_graph *graph, const clrun__schedule *schedule,
                                          bool with_inputs, clrun_plan_buffer **buffers,
                                          size_t *count, char ***names, char *why, size_t size);

/* Why the donated graph input `input` is in unused_donated, as a clause ("its last reader 'y'
 * (matmul) cannot write its output in place") into why. */
void clrun__schedule_unused_reason(const clrun_graph *graph, const clrun__schedule *schedule,
                                   int32_t input, char *why, size_t size);

/* Groups of schedule buffers laid out back to back, each member at an offset aligned to the
 * layout's alignment, in the order given: a bucket of gradients that one transfer reads. */
typedef struct clrun__buffer_groups {
    int32_t count;      /* groups */
    int32_t *start;     /* group g's members: member[start[g] .. start[g + 1]) (count + 1) */
    int32_t *member;    /* schedule buffers, in layout order */
    uint64_t *offset;   /* per member: its offset in its group */
    uint64_t *bytes;    /* per group: from its first member's start to its last member's end */
    int32_t *group_of;  /* per schedule buffer: its group, or -1 */
} clrun__buffer_groups;

/* Lays out the groups `buffers[start[g] .. start[g + 1])` of schedule buffers (g < count) at
 * `alignment`. A group is kept only when each of its members is a buffer the run creates (not
 * an input, a constant, host memory or scratch; not empty) and no member is in another kept
 * group or twice in its own; the others are left out (their members in no group), and
 * kept[g] (may be NULL) says which. *out is the caller's to free (clrun__buffer_groups_free);
 * fails only for want of host memory. */
clrun_status clrun__buffer_groups_make(const clrun__schedule *schedule, const int32_t *buffers,
                                       const int32_t *start, int32_t count, uint64_t alignment,
                                       clrun__buffer_groups *out, bool *kept);

void clrun__buffer_groups_free(clrun__buffer_groups *groups);

/* The plan items of clrun__schedule_plan_items with each group's members made one item: its
 * size the group's bytes, alive from its first member's first step to its last member's last.
 * which[i] >= 0 is the schedule buffer of item i as before; -1 - g is group g. The members are
 * then at the group's offset plus their own (clrun__buffer_groups.offset). Arrays malloc'd. */
clrun_status clrun__buffer_groups_items(const clrun__buffer_groups *groups,
                                        const clrun_plan_buffer *items, const int32_t *which,
                                        size_t count, clrun_plan_buffer **out_items,
                                        int32_t **out_which, size_t *out_count);

/* Frees what build allocated. */
void clrun__schedule_free(clrun__schedule *schedule);

/* True when buffer b is alive at step s: created at or before s (inputs and constants from the
 * start) and read at or after s. */
bool clrun__schedule_alive(const clrun__schedule *schedule, int32_t b, int32_t s);

#endif
