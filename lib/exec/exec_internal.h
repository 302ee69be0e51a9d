/* The executor's insides, shared by its files: creation and accessors (exec.c), constants and
 * the nodes' packed copies (exec_constants.c), the memory of each buffer in every mode
 * (exec_memory.c, exec_planned.c), and runs (exec_run.c). */
#ifndef CLRUN_LIB_EXEC_INTERNAL_H
#define CLRUN_LIB_EXEC_INTERNAL_H

#include <clrun/exec.h>

#include "core/util.h"
#include "device/cl.h"
#include "device/context.h"
#include "fuse/fuse.h"
#include "graph/graph.h"
#include "memory/pool.h"
#include "ops/ops.h"
#include "exec/schedule.h"

/* The planned arena in pending-free ranges (pool chunks have small ids). */
#define ARENA UINT32_MAX

/* A freed block whose readers may still run (out-of-order queues only). */
typedef struct pending_free {
    uint32_t chunk;
    uint64_t offset;
    uint64_t size;
    cl_event done; /* all of the old owner's readers and its writer have finished */
} pending_free;

/* An offload copy in flight on the copy queue (in-order queues, CLRUN_OFFLOAD_OVERLAP): the
 * device buffer it reads (an offload's source) or writes (a reload's destination) and that
 * buffer's bytes, until a command on the kernels' queue has waited for it (exec_offload.c). */
typedef struct copy_flight {
    int32_t buffer;       /* the schedule buffer on the device */
    uint32_t chunk;       /* its range when the copy was enqueued (as buffer_state's) */
    uint64_t offset;
    uint64_t size;
    bool writes;          /* a reload: its readers wait too, not only whoever writes there */
    cl_event done;
} copy_flight;

/* Run-time state of a Loop run at run time, per loop_begin step (exec_loop.c). */
typedef struct clrun__loop_state {
    int32_t partner;      /* loop_begin: its loop_end's step, and the reverse; -1 elsewhere */
    int64_t trip;         /* loop_begin: M read back in this run */
    int64_t count;        /* loop_begin: iterations done */
    bool running;         /* loop_begin: an iteration is under way */
    bool again;           /* loop_begin: loop_end decided to run another */
} clrun__loop_state;

/* Run-time state of one schedule buffer. */
typedef struct buffer_state {
    clrun_buffer block;   /* pooled (and inputs): the pool block */
    cl_mem mem;           /* what kernels get: block.mem, a naive buffer or an arena view */
    uint32_t range_chunk; /* where its bytes are, for ordering reuse: a pool chunk, or ARENA */
    uint64_t range_offset;
    uint64_t range_size;
    bool live;            /* holds memory in this run */
    bool hosting;         /* planned: a donated input whose block holds later buffers */
    cl_event *events;     /* out-of-order: writer and readers so far in this run */
    int32_t event_count;
    size_t event_capacity;
} buffer_state;

/* Run-time state of a group of outputs laid out back to back (clrun__exec_group_outputs), in
 * the pooled and naive modes: one block (or driver buffer) for them all, taken when its first
 * member is made and given back with its last; the members are views into it. */
typedef struct group_state {
    clrun_buffer block;   /* pooled: the pool block */
    cl_mem raw;           /* naive: the driver buffer */
    int32_t live;         /* members holding memory in it */
} group_state;

struct clrun_exec {
    pthread_mutex_t lock;          /* one call at a time: a run and the reading of its results */
    clrun_context *ctx;
    const clrun_graph *graph;      /* what runs: the caller's graph as fusion rewrote it */
    clrun__fusion fusion;          /* the rewrite (lib/fuse/) and what it made */
    clrun_fused_group *groups;     /* fusion's groups as clrun_exec_fused_groups reports them */
    clrun_exec_options options;
    clrun__schedule schedule;      /* what runs: with reuse, or without (naive) */
    uint64_t lower_bound;          /* always from the reusing schedule */
    int32_t donations;             /* per run, from the reusing schedule */
    int32_t donated_in_place;      /* of them, donated graph inputs taken */
    clrun_tensor_type *types;      /* per node: input then output types (op calls point here) */
    clrun__op_call *calls;         /* per node */
    const clrun__op_kernels **kernels; /* per node: what runs its op */
    void **node_states;            /* per node: what the kernels' prepare made */
    clrun_buffer *constants;       /* per tensor: a constant's resident block; empty for the
                                      others, and for a constant packed away (every node that
                                      reads it has a packed copy) */
    clrun_buffer *packed;          /* per node: its packed copy of constant inputs, or empty */
    buffer_state *buffers;         /* per schedule buffer */
    cl_mem arena;                  /* planned mode */
    cl_mem *arena_views;           /* planned mode: per schedule buffer, NULL outside the arena */
    uint64_t *arena_offsets;       /* planned mode: per schedule buffer, its offset in the arena, or
                                      in its host's block */
    uint64_t arena_bytes;
    const clrun_exec *arena_host;  /* planned mode: whose arena this one's lies in when it fits
                                      (clrun__exec_create_beside), or NULL */
    bool arena_shared;             /* the views are arena_host's arena's (arena stays NULL) */
    int32_t *host_of;              /* planned mode: per schedule buffer, the donated input whose
                                      block holds it after that input's last use, or -1 */
    cl_mem *region_views;          /* planned mode: per run, the views into hosts' blocks */
    bool have_outputs;             /* outputs of the last run are held */
    const char **unused_names;     /* donated inputs no output could take */
    pending_free *pending;         /* out-of-order queues */
    int32_t pending_count;
    size_t pending_capacity;
    clrun_exec_span *spans;        /* per step, with profiling */
    cl_event *step_events;         /* per step, with profiling */
    int32_t span_count;
    uint64_t profile_origin;       /* the device clock of the last profile's first start */
    signed char *guard_values;     /* per tensor, in this run: a guard read back (0 or 1), or -1
                                      not yet; NULL when no node is guarded */
    clrun__loop_state *loops;      /* per step, when the graph has loop_begin/loop_end; else NULL */
    int32_t loop_keep;             /* while a loop_end goes back: buffers made at or before this
                                      step are not given back after it; -1 otherwise */
    clrun_exec_stats stats;
    clrun_graph *owned_graph;      /* under a memory budget: the rewritten graph that runs */
    const char **recomputed;       /* under a memory budget: the tensors recomputed (labels in
                                      owned_graph), or NULL */
    int32_t recomputed_count;
    const char **offloaded;        /* under a memory budget: the tensors offloaded to host memory
                                      (labels in owned_graph), or NULL */
    int32_t offloaded_count;
    cl_mem *host_mems;             /* per schedule buffer: an offloaded tensor's host buffer
                                      (is_host), made at first use, or NULL (exec_offload.c) */
    cl_command_queue copy_queue;   /* the offload copies' queue, beside the kernels' in-order
                                      one, made at the first copy; NULL: none (exec_offload.c) */
    copy_flight *flights;          /* the copies on it that no kernel has waited for yet */
    int32_t flight_count;
    size_t flight_capacity;
    clrun__buffer_groups out_groups; /* outputs laid out back to back (clrun__exec_group_outputs);
                                      count 0: none */
    int32_t *group_outputs;        /* per member of out_groups: the graph output it is */
    group_state *group_states;     /* per group: pooled and naive modes */
    uint64_t *group_offsets;       /* per group: planned mode, its offset in the arena */
    cl_mem *member_views;          /* per schedule buffer: pooled and naive, a member's view */
    cl_mem *part_views;            /* per tensor: an input of a concat assembled in place
                                      (schedule.part_of), its view at its place in the output's
                                      buffer from that buffer's taking to the concat's step, else
                                      NULL; the array NULL when no concat is */
};

/* clrun_exec_create under options->memory_budget (exec_budget.c). */
clrun_status clrun__exec_create_within(clrun_context *ctx, const clrun_graph *graph,
                                       const clrun_exec_options *options, clrun_exec **out);

/* clrun_exec_create without a budget: the graph as given, unless it does not fit what the
 * pool's limit leaves (CLRUN_POOL_LIMIT or CLRUN_MEM_FRACTION, less what the pool held before
 * and the graph's inputs, which the caller allocates there) and recomputation makes it fit
 * there; then that room is its budget (exec_budget.c). */
clrun_status clrun__exec_create_in_pool(clrun_context *ctx, const clrun_graph *graph,
                                        const clrun_exec_options *options, clrun_exec **out);

static inline const char *clrun__exec_tensor_name(const clrun_exec *e, int32_t t)
{
    return clrun__tensor_label(&e->graph->tensors[t]);
}

/* Buffer s now holds pool block `block`: its memory and its bytes' range. */
static inline void clrun__exec_hold_block(buffer_state *s, const clrun_buffer *block)
{
    s->block = *block;
    s->mem = block->mem;
    s->range_chunk = block->chunk;
    s->range_offset = block->offset;
    s->range_size = block->size;
}

/* What names buffer b in messages and pool labels: its first tensor's name, or "'h1' scratch"
 * (and "'h1' scratch 2" for a second part) for the scratch of the node that writes h1. */
const char *clrun__exec_buffer_label(const clrun_exec *e, int32_t b, char *buf, size_t size);
#define CLRUN__EXEC_LABEL (CLRUN__GRAPH_NAME_MAX + 16)

/* The memory kernels get for tensor t in this run (NULL for a constant packed away). */
static inline cl_mem clrun__exec_tensor_mem(const clrun_exec *e, int32_t t)
{
    if (e->graph->tensors[t].kind == CLRUN__TENSOR_CONSTANT)
        return e->constants[t].mem;
    if (e->part_views && e->part_views[t])
        return e->part_views[t];
    return e->buffers[e->schedule.buffer_of[t]].mem;
}

/* The concat output whose buffer b is, when that concat is assembled in place, else -1. */
static inline int32_t clrun__exec_assembled(const clrun_exec *e, int32_t b)
{
    int32_t root = e->schedule.buffers[b].root;
    return e->schedule.part_of && e->schedule.part_of[root] == root ? root : -1;
}

/* ---- events (out-of-order queues): exec_memory.c ---- */

/* Adds `event` (retained; NULL is a no-op) to the buffer's events; false when out of memory. */
bool clrun__exec_add_event(buffer_state *b, cl_event event);
/* Releases the buffer's events. */
void clrun__exec_drop_events(buffer_state *b);
/* Releases every pending free's event. */
void clrun__exec_drop_pending(clrun_exec *e);

/* ---- memory of buffers: exec_memory.c ---- */

/* Gives buffer b memory for this run in the executor's mode; *added gets the bytes this took
 * from the pool or the driver (b's, a whole group's for its first member, 0 for the others). */
clrun_status clrun__exec_take_memory(clrun_exec *e, int32_t b, uint64_t *added);
/* The memory that holds group g in this run, and where in it the group starts. */
cl_mem clrun__exec_group_mem(const clrun_exec *e, int32_t g, uint64_t *offset);
/* Frees the groups' arrays (clrun_exec_destroy). */
void clrun__exec_groups_free(clrun_exec *e);
/* The views of the inputs of the concat `whole` that are assembled in place, in its buffer,
 * which was just taken (part_views); none is left made on failure. */
clrun_status clrun__exec_take_parts(clrun_exec *e, int32_t whole);
/* Releases those views (after the concat's step, or an abandoned run). */
void clrun__exec_drop_parts(clrun_exec *e, int32_t whole);
/* Gives buffer b's memory back after its last use (ordered behind its readers on out-of-order
 * queues). */
clrun_status clrun__exec_give_back(clrun_exec *e, int32_t b);
/* ---- host memory of offloaded tensors: exec_offload.c ---- */

/* Gives host buffer b (is_host) its host-allocated memory, made at its first use. */
clrun_status clrun__exec_host_take(clrun_exec *e, int32_t b);
/* Frees every host buffer and the copy queue (clrun_exec_destroy). */
void clrun__exec_host_release(clrun_exec *e);
/* Whether the context would put offload copies on a queue of their own: CLRUN_OFFLOAD_OVERLAP,
 * an in-order queue and no guard mode. */
bool clrun__exec_copies_beside(const clrun_context *ctx);
/* Whether this run's offload copies go on the copy queue: it has some, the context would
 * (clrun__exec_copies_beside), and no loop runs at run time. */
bool clrun__exec_overlaps_copies(const clrun_exec *e);
/* Enqueues offload or reload `node` on the copy queue: behind everything enqueued so far on
 * the kernels' queue (the source's writer, the destination's earlier users), remembered as in
 * flight; *done gets its event (retained for the caller). */
clrun_status clrun__exec_copy_step(clrun_exec *e, const clrun__node *node, const cl_mem *in_mems,
                                   const cl_mem *out_mems, cl_event *done);
/* The copies in flight that a kernel reading `node`'s inputs and writing `written` must wait
 * for: a reload's destination read or written, an offload's source written over (in place, or
 * its bytes taken again). They leave the flight list: the kernels' queue is in order, so what
 * comes after that kernel waits for them too. *list (owned events, caller releases each and
 * frees it) and *count. */
clrun_status clrun__exec_copy_waits(clrun_exec *e, const clrun__node *node, const int32_t *written,
                                    int written_count, cl_event **list, cl_uint *count);
/* Buffer b's memory goes back to the pool (pooled mode): the kernels' queue waits for an
 * offload still reading it first, so that no later owner of the block, from this executor or
 * another, writes it under the copy. */
clrun_status clrun__exec_copy_before_free(clrun_exec *e, int32_t b);
/* End of a run (or an abandoned one): the copy queue finished, the flights forgotten. */
clrun_status clrun__exec_copies_finish(clrun_exec *e);

/* ---- the offload rate: exec_rate.c ---- */

/* clrun__exec_offload_rate: exec/exec_share.h (the trainer's budget weighs by it too). */
/* Forgets this process's measurements (tests: the next call reads the cache or measures). */
void clrun__offload_rate_forget(void);

/* ---- constants: exec_constants.c ---- */

/* Uploads the constants into resident blocks and lets the nodes that pack make their copies
 * (e->packed); a constant that every reader replaces by its copy stays resident only while it
 * is packed. After prepare, before the schedule. */
clrun_status clrun__exec_place_constants(clrun_exec *e);
/* ---- planned mode: exec_planned.c ---- */

/* The plan: buffers that fit a donated input's block after its last use go there, the others
 * to one arena with a sub-buffer per buffer. */
clrun_status clrun__exec_prepare_arena(clrun_exec *e);
/* Views into the blocks of this run's donated inputs, once they are bound. */
clrun_status clrun__exec_bind_regions(clrun_exec *e);
/* Gives back the hosting donated inputs and their views (end of outputs, or a failed run). */
void clrun__exec_release_regions(clrun_exec *e);
/* Frees the arena, its views and the plan's arrays (to plan again, or at destruction). */
void clrun__exec_drop_arena(clrun_exec *e);

/* ---- loops run at run time: exec_loop.c ---- */

/* Pairs every loop_begin step with its loop_end's (e->loops; NULL without loops). */
clrun_status clrun__exec_prepare_loops(clrun_exec *e);
/* Before loop_end at `step` gives its inputs back: reads the body's condition, copies the
 * carried results into the buffers the body reads, decides whether another iteration runs. */
clrun_status clrun__exec_loop_before_end(clrun_exec *e, int32_t step);
/* After loop_begin or loop_end at *step (ran: not skipped by a guard): reads M and the
 * condition, or goes back; *step becomes the step before the next to run. */
clrun_status clrun__exec_loop_after(clrun_exec *e, int32_t *step, bool ran);

/* ---- exec.c ---- */

/* Frees the outputs of the last run, if any. */
void clrun__exec_release_outputs(clrun_exec *e);

#endif
