/* clrun: running graphs.
 *
 * An executor is a graph prepared for one context: its schedule (topological order and each
 * tensor's last use), its kernels, and its constants on the device. Each run takes the graph's
 * inputs as clrun_buffers, gives every intermediate a block from the pool at the node that
 * writes it and gives it back right after its last reader is enqueued, lets an output of an
 * elementwise node take the block of an input that dies there (in-place; and for inputs the
 * caller donated, XLA's donate_argnums), and keeps the outputs until the next run. The same
 * graph gives bit-identical outputs in every mode. */
#ifndef CLRUN_EXEC_H
#define CLRUN_EXEC_H

#include <stdbool.h>
#include <stdint.h>

#include <clrun/context.h>
#include <clrun/graph.h>
#include <clrun/memory.h>
#include <clrun/plan.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum clrun_exec_mode {
    CLRUN_EXEC_POOLED = 0,  /* blocks from the context's pool (its strategy: tlsf, buddy, ...) */
    CLRUN_EXEC_NAIVE = 1,   /* one clCreateBuffer per tensor per run, nothing reused: the baseline */
    CLRUN_EXEC_PLANNED = 2, /* one arena laid out ahead by the static planner: no allocator call
                               during a run */
    CLRUN_EXEC_CONTEXT = 3, /* the mode the context's allocator names (its option, else
                               CLRUN_ALLOCATOR): naive, planned, or pooled for a strategy */
} clrun_exec_mode;

/* "pooled", "naive", "planned" ("context" for CLRUN_EXEC_CONTEXT). */
const char *clrun_exec_mode_name(clrun_exec_mode mode);

typedef struct clrun_exec_options {
    clrun_exec_mode mode;        /* clrun_exec_options_init sets CLRUN_EXEC_CONTEXT */
    bool profile;                /* record each node's device start/end (OpenCL profiling) */
    double plan_time_limit_s;    /* planned mode: the planner's budget in seconds, as in
                                    clrun_plan_options (0: the constructions only); 1 after
                                    clrun_exec_options_init */
    int fusion;                  /* 1: fuse groups of elementwise nodes into one kernel each, -1:
                                    run every node alone, 0: as CLRUN_FUSION says (default on).
                                    Bit-exact: outputs are the same bits either way */
    int fold;                    /* 1: fold at creation (nodes of constants run once into
                                    constants; batch norms into the convolution before them),
                                    -1: no folding, 0: as CLRUN_FOLD says (default on). Batch
                                    norm folding changes bits (within 1e-5 of the output's
                                    largest magnitude); constant folding does not */
    uint64_t memory_budget;      /* bytes the executor may hold: its constants and its arena
                                    (planned mode, which a budget takes unless `mode` names
                                    another; there the planner's layout of the run's buffers
                                    is held to it, an estimate). 0: no budget. When the graph
                                    as given holds more, tensors alive across its peak are
                                    recomputed after it from tensors alive there anyway
                                    (clrun_graph_remat: the same bits), the fewest and largest
                                    that make it fit; clrun_exec_stats says what. A budget no
                                    such rewrite meets fails with CLRUN_ERROR_OUT_OF_MEMORY and
                                    the least found. A trainer's executor options give the
                                    trainer's budget (train_graph.h), where none is given there.
                                    Without one, the room the pool's limit leaves (less the
                                    graph's inputs) is the budget where the graph as given does
                                    not fit it and a rewrite does */
} clrun_exec_options;

/* Every option at its default: the context's mode, no profiling, the planner's own budget. */
void clrun_exec_options_init(clrun_exec_options *options);

typedef struct clrun_exec clrun_exec;

/* Prepares `graph` (validated here) for ctx: kernels, constants uploaded (those a node keeps in
 * its kernels' layout uploaded as that packed copy only), schedule (and, in planned mode, the
 * plan and its arena). Every byte of device memory it takes comes from ctx's pool, counted in
 * clrun_memory_stats and held to its limit. The graph must outlive the executor (under a memory
 * budget that rewrites it, the executor runs a copy of its own, with the same ids and names). On failure *out is
 * NULL, nothing is leaked and clrun_last_error(ctx) says why. options may be NULL: the defaults
 * of clrun_exec_options_init. */
clrun_status clrun_exec_create(clrun_context *ctx, const clrun_graph *graph,
                               const clrun_exec_options *options, clrun_exec **out);

/* Frees the executor, its constants and any outputs it still holds. NULL is accepted. No other
 * call on the executor may run meanwhile or after. It may come after clrun_context_destroy of its
 * context, which the last executor's destroy then finishes.
 *
 * Threads: the calls below may come from several threads; they are serialised per executor (a
 * run waits for a run of the same executor in another thread, and the reading calls see one
 * run's results whole). Executors of one context run concurrently. Pointers the reading calls
 * hand out (spans, names, output memory) stay valid until the next run of the executor. */
void clrun_exec_destroy(clrun_exec *exec);

/* Runs the graph once and waits for it. inputs[i] is the buffer of the graph's i-th input
 * (clrun_graph_inputs order), exactly its bytes, allocated from the same context; an empty input
 * (clrun_tensor_empty: a dimension 0) takes any buffer, the zero one (NULL memory, 0 bytes)
 * included, and reads none of it. An input the
 * graph marks donated is consumed: the executor frees it (or hands its block to an output), and
 * passing that buffer again gives CLRUN_ERROR_DONATED naming the input. The outputs of the
 * previous run are released first. */
clrun_status clrun_exec_run(clrun_exec *exec, const clrun_buffer *inputs, int32_t input_count);

/* The i-th output of the last run (clrun_graph_outputs order): its memory and bytes. Valid until
 * the next run or clrun_exec_destroy. An empty output (a dimension 0) has no memory: NULL and 0
 * bytes; clrun_exec_read_output reads 0 bytes of it (host may be NULL) and
 * clrun_exec_take_output gives the zero buffer. */
clrun_status clrun_exec_output(const clrun_exec *exec, int32_t i, cl_mem *mem, uint64_t *bytes);

/* Hands the i-th output of the last run to the caller as a buffer of its own (to keep on the
 * device, free, or pass to a later run, donated or not): the executor's block itself in pooled
 * mode, a device copy in the other modes and for outputs that are inputs or constants. The
 * executor forgets it: clrun_exec_output(i) fails until the next run. */
clrun_status clrun_exec_take_output(clrun_exec *exec, int32_t i, clrun_buffer *out);

/* Copies the i-th output of the last run to host memory of `bytes` (its exact size). */
clrun_status clrun_exec_read_output(clrun_exec *exec, int32_t i, void *host, uint64_t bytes);

/* Accounting of the executor (figures of the last run where marked). */
typedef struct clrun_exec_stats {
    const char *mode;           /* "pooled", "naive", "planned" */
    const char *allocator;      /* strategy name, "naive" or "planned" */
    int32_t steps;              /* nodes run per run */
    uint64_t peak_bytes;        /* last run: most bytes of non-constant tensors held at once */
    uint64_t reserved_bytes;    /* last run: most bytes reserved from the driver (pool chunks,
                                   naive buffers, or the planned arena) */
    uint64_t lower_bound_bytes; /* largest total of live non-constant bytes at any step, the
                                   nodes' scratch included */
    uint64_t naive_bytes;       /* every non-constant tensor and every node's scratch in its
                                   own buffer */
    uint64_t constant_bytes;    /* the graph's constants (weights), as they weigh: resident for
                                   the executor's life, as the kernels' packed copy where one
                                   replaces them (matmul, conv2d on CPUs; a copy rounds N up
                                   to whole panels) */
    uint64_t driver_allocs;     /* last run: driver allocations (chunks or buffers) made */
    int32_t donations;          /* outputs written in place of a dying input, per run (a
                                   donated graph input or an intermediate) */
    int32_t donated_in_place;   /* of them, those written in place of a donated graph input */
    int32_t unused_donations;   /* inputs marked donated that no output could take */
    double wall_ms;             /* last run, host wall clock, submit to finish */
    int32_t views;              /* outputs that are views of their input's buffer (reshape):
                                   no memory, no kernel */
    /* fusion (appended: bindings leave room after the fields they know) */
    int32_t graph_nodes;        /* nodes of the graph as given */
    int32_t kernels;            /* nodes that run a kernel after fusion: steps less views and
                                   concats assembled in place whole */
    int32_t fused_groups;       /* groups of nodes fused into one kernel each */
    int32_t fused_nodes;        /* nodes of the graph inside those groups */
    int32_t folded_nodes;       /* nodes folded away at creation (the `fold` option): nodes whose
                                   inputs are all constants, run once into constants, and
                                   batch norms folded into convolutions (counted again below) */
    /* folding (appended) */
    int32_t folded_batchnorms;  /* batch norms folded into the convolution before them: the one
                                   rewrite that changes bits (`fold` off keeps them) */
    /* planned mode (appended) */
    uint64_t arena_bytes;       /* planned mode: the arena's bytes, laid out and reserved at
                                   creation and held for the executor's life; 0 in the others */
    /* memory budget (appended) */
    uint64_t budget_bytes;      /* the options' memory_budget; 0: none */
    uint64_t held_bytes;        /* under a budget: what is held to it (constants and arena) */
    int32_t recomputed_tensors; /* under a budget: tensors dropped at the peak and recomputed */
    int32_t recomputed_nodes;   /* the nodes added to recompute them */
    uint64_t recomputed_bytes;  /* the dropped tensors' bytes (a sum) */
    uint64_t recomputed_flops;  /* the added nodes' arithmetic per run, estimated as
                                   clrun_remat_report.repeated_flops */
    /* host offload under a budget (appended) */
    int32_t offloaded_tensors;  /* tensors copied to host memory after they are written and
                                   back right before their next reader, instead of held or
                                   recomputed */
    uint64_t offloaded_bytes;   /* bytes each run moves for them: both ways, twice their sum */
    uint64_t host_bytes;        /* the host-allocated buffers that hold them, outside the
                                   device's accounting (constants, arena, pool) */
    /* concats assembled in place (appended) */
    int32_t assembled_concats;  /* concats whose inputs their nodes write straight into the
                                   output's buffer, each at its place: no copy, no kernel (not
                                   in naive mode, the plain reference) */
    int32_t assembled_in_part;  /* of them, those with only some inputs written there (the
                                   others at a place off the device's alignment): the concat
                                   copies the others */
} clrun_exec_stats;

clrun_status clrun_exec_stats_get(const clrun_exec *exec, clrun_exec_stats *out);

/* Under a memory budget that recomputation met: the tensors dropped at the peak and recomputed
 * after it (model names where they have them), in the graph's order; *names points into the
 * executor. 0 (and NULL) otherwise, and for a NULL executor. */
int32_t clrun_exec_recomputed(const clrun_exec *exec, const char *const **names);

/* Under a memory budget that host offload helped meet: the tensors copied to host memory and
 * back (model names where they have them), in the graph's order; *names points into the
 * executor. 0 (and NULL) otherwise, and for a NULL executor. */
int32_t clrun_exec_offloaded(const clrun_exec *exec, const char *const **names);

/* The names of donated inputs no output could take (they are still freed after their last
 * use); *names points into the graph. 0 (and NULL) for a NULL executor. */
int32_t clrun_exec_unused_donations(const clrun_exec *exec, const char *const **names);

/* A group of elementwise nodes that runs as one generated kernel (fusion: CLRUN_FUSION, the
 * `fusion` option). Every op of the group is computed by the same operations as its own kernel
 * would, so fusion never changes a result. */
typedef struct clrun_fused_group {
    const char *name;       /* "fused:add+gelu": its ops in order, also its spans' op */
    const char *output;     /* the tensor it writes */
    int32_t nodes;          /* nodes of the graph it holds */
} clrun_fused_group;

/* The fused groups of the executor (in schedule order); *groups stays valid as long as the
 * executor. 0 with fusion off or nothing to fuse. */
int32_t clrun_exec_fused_groups(const clrun_exec *exec, const clrun_fused_group **groups);

/* One node of the last run, with profiling on. */
typedef struct clrun_exec_span {
    const char *op;          /* "matmul", or for a fused group "fused:add+gelu" */
    const char *name;        /* its first output's name */
    uint64_t start_ns;       /* device clock, relative to the run's first node start */
    uint64_t end_ns;
    uint64_t bytes_in_use;   /* bytes the run holds while the node runs (its inputs and its
                                outputs, and in planned mode the arena): the run's peak is the
                                largest of these */
    uint64_t bytes_after;    /* the same once the buffers the node read last are given back */
} clrun_exec_span;

/* The model's node that span `step` of the last profile ran (clrun_graph_node_model_name: an
 * imported model's node name), NULL when it has none (a fused group, a graph built by hand). */
const char *clrun_exec_span_node(const clrun_exec *exec, int32_t step);

/* The spans of the last run in schedule order; 0 when profiling was off (and for NULL). */
int32_t clrun_exec_profile(const clrun_exec *exec, const clrun_exec_span **spans);

/* The buffers a run of `graph` creates, as the static planner sees them (clrun_plan_buffer,
 * plan.h): the schedule's buffers after in-place reuse, each alive over [first step, last step
 * + 1), and, with `with_inputs`, the graph inputs, alive from step 0 (to the end when the caller
 * keeps them). *buffers is malloc'd (the caller frees it); *count gets their number. names (may
 * be NULL) gets each buffer's name (its first tensor's) in one malloc'd block: free(*names) frees
 * them all. On failure the reason goes to err (may be NULL) and clrun_last_error(NULL). */
clrun_status clrun_graph_plan_buffers(const clrun_graph *graph, bool with_inputs,
                                      clrun_plan_buffer **buffers, size_t *count, char ***names,
                                      char *err, size_t errlen);

/* The buffers a run of the executor creates, as clrun_graph_plan_buffers lists a graph's, but
 * for the graph that runs: after folding and fusion, with every node's scratch (a convolution's
 * padded image, say), as the executor's own planned mode lays them out (at the device's
 * alignment, clrun_device_info.base_addr_align). What `clrun plan MODEL` plans. The executor's
 * schedule in naive mode has no reuse: its buffers are listed as that mode holds them. */
clrun_status clrun_exec_plan_buffers(const clrun_exec *exec, bool with_inputs,
                                     clrun_plan_buffer **buffers, size_t *count, char ***names);

/* One buffer of an executor's memory layout: the memory of a tensor and of those that take it
 * over in place after it, or the scratch of one node (bytes its kernels use during its step
 * alone: a convolution's padded image, say). Constants (resident for the executor's life) are
 * not listed. */
typedef struct clrun_exec_buffer_info {
    const char *tensor;  /* the first tensor that owns it (for scratch: its node's first output);
                            points into the graph */
    uint64_t bytes;
    int32_t first_step;  /* the step that writes it; -1 for a graph input */
    int32_t last_step;   /* the last step that reads it; `steps` when it ends as a graph output */
    bool is_input;       /* holds a graph input (the caller's buffer, or a donated one) */
    bool is_output;      /* ends as a graph output */
    bool is_scratch;     /* a node's scratch: first_step == last_step, its node's step */
    uint64_t offset;     /* planned mode: its byte offset in the arena; CLRUN_NO_OFFSET for inputs
                            and in the other modes, whose blocks come from the pool at run time */
} clrun_exec_buffer_info;

#define CLRUN_NO_OFFSET UINT64_MAX

/* The executor's buffers in schedule order, as the planner sees them: with out NULL, *count gets
 * how many there are; otherwise the first min(capacity, count) go to out and *count gets the
 * total. CLRUN_ERROR_INVALID_ARGUMENT for a NULL exec or count. */
clrun_status clrun_exec_layout(const clrun_exec *exec, clrun_exec_buffer_info *out, int32_t capacity,
                               int32_t *count);

#ifdef __cplusplus
}
#endif
#endif
