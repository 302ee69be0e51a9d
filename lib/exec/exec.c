/* The executor: runs a scheduled graph on a context in one of three memory modes.
 *
 * Pooled: each intermediate takes a pool block at the step that writes it and gives it back
 * right after its last reader is enqueued. On an in-order queue that is safe at once: every
 * command that reads the old owner precedes every command of the new owner. On an out-of-order
 * queue the freed block carries a marker event over its readers, and the next node whose output
 * overlaps it waits for that marker (stream-ordered reuse, as cudaMallocAsync does).
 * Naive: one clCreateBuffer per tensor per run, all released when the run ends.
 * Planned: one arena, offsets from the static planner, sub-buffers made once at creation. */
#include <clrun/exec.h>
#include <clrun/plan.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* Run-time state of one schedule buffer. */
typedef struct buffer_state {
    clrun_buffer block;   /* pooled (and inputs): the pool block */
    cl_mem mem;           /* what kernels get: block.mem, a naive buffer or an arena view */
    uint32_t range_chunk; /* where its bytes are, for ordering reuse: a pool chunk, or ARENA */
    uint64_t range_offset;
    uint64_t range_size;
    bool live;            /* holds memory in this run */
    cl_event *events;     /* out-of-order: writer and readers so far in this run */
    int32_t event_count;
    int32_t event_capacity;
} buffer_state;

struct clrun_exec {
    clrun_context *ctx;
    const clrun_graph *graph;      /* what runs: the caller's graph as fusion rewrote it */
    clrun__fusion fusion;          /* the rewrite (lib/fuse/) and what it made */
    clrun_exec_options options;
    clrun__schedule schedule;      /* what runs: with reuse, or without (naive) */
    uint64_t lower_bound;          /* always from the reusing schedule */
    int32_t donations;             /* per run, from the reusing schedule */
    clrun_tensor_type *types;      /* per node: input then output types (op calls point here) */
    clrun__op_call *calls;         /* per node */
    const clrun__op_kernels **kernels; /* per node: what runs its op */
    void **node_states;            /* per node: what the kernels' prepare made */
    clrun_buffer *constants;       /* per tensor (only constants set) */
    buffer_state *buffers;         /* per schedule buffer */
    cl_mem arena;                  /* planned mode */
    cl_mem *arena_views;           /* planned mode: per schedule buffer, NULL outside the arena */
    uint64_t *arena_offsets;       /* planned mode: per schedule buffer, its offset in the arena */
    uint64_t arena_bytes;
    bool have_outputs;             /* outputs of the last run are held */
    struct { uint32_t slot, generation; int32_t tensor; } *consumed; /* donated inputs taken */
    int32_t consumed_count, consumed_capacity;
    const char **unused_names;     /* donated inputs no output could take */
    pending_free *pending;         /* out-of-order queues */
    int32_t pending_count, pending_capacity;
    clrun_exec_span *spans;        /* per step, with profiling */
    cl_event *step_events;         /* per step, with profiling */
    int32_t span_count;
    clrun_exec_stats stats;
};

const char *clrun_exec_mode_name(clrun_exec_mode mode)
{
    switch (mode) {
    case CLRUN_EXEC_POOLED: return "pooled";
    case CLRUN_EXEC_NAIVE: return "naive";
    case CLRUN_EXEC_PLANNED: return "planned";
    }
    return "unknown";
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static const char *tensor_name(const clrun_exec *e, int32_t t) { return e->graph->tensors[t].name; }

/* ---- events (out-of-order queues) ---------------------------------------------------------- */

static bool add_event(buffer_state *b, cl_event event)
{
    if (event == NULL)
        return true;
    if (b->event_count == b->event_capacity) {
        int32_t capacity = b->event_capacity ? b->event_capacity * 2 : 4;
        cl_event *grown = realloc(b->events, (size_t)capacity * sizeof *grown);
        if (grown == NULL)
            return false;
        b->events = grown;
        b->event_capacity = capacity;
    }
    clrun__cl.RetainEvent(event);
    b->events[b->event_count++] = event;
    return true;
}

static void drop_events(buffer_state *b)
{
    for (int32_t i = 0; i < b->event_count; i++)
        clrun__cl.ReleaseEvent(b->events[i]);
    b->event_count = 0;
}

static void drop_pending(clrun_exec *e)
{
    for (int32_t i = 0; i < e->pending_count; i++)
        clrun__cl.ReleaseEvent(e->pending[i].done);
    e->pending_count = 0;
}

/* ---- memory of one buffer --------------------------------------------------------------------- */

static clrun_status take_memory(clrun_exec *e, int32_t b, uint64_t *driver_allocs)
{
    buffer_state *s = &e->buffers[b];
    const clrun__sched_buffer *sb = &e->schedule.buffers[b];
    if (e->options.mode == CLRUN_EXEC_PLANNED) {
        s->mem = e->arena_views[b];
        s->range_chunk = ARENA;
        s->range_offset = e->arena_offsets[b];
        s->range_size = sb->bytes;
    } else if (e->options.mode == CLRUN_EXEC_NAIVE) {
        cl_int error = CL_SUCCESS;
        s->mem = clrun__cl.CreateBuffer(e->ctx->cl, CL_MEM_READ_WRITE, (size_t)sb->bytes, NULL, &error);
        if (s->mem == NULL)
            return clrun__fail_cl(e->ctx, error, "clCreateBuffer", "naive buffer of %llu bytes for '%s'",
                                  (unsigned long long)sb->bytes, tensor_name(e, sb->root));
        (*driver_allocs)++;
    } else {
        clrun_status status = clrun_alloc_ex(e->ctx, sb->bytes, 0, tensor_name(e, sb->root), &s->block);
        if (status != CLRUN_OK)
            return status;
        s->mem = s->block.mem;
        s->range_chunk = s->block.chunk;
        s->range_offset = s->block.offset;
        s->range_size = s->block.size;
    }
    s->live = true;
    return CLRUN_OK;
}

/* Out-of-order: the marker that says every user of buffer b is done, kept with its range. */
static clrun_status remember_pending(clrun_exec *e, buffer_state *s)
{
    if (e->pending_count == e->pending_capacity) {
        int32_t capacity = e->pending_capacity ? e->pending_capacity * 2 : 16;
        pending_free *grown = realloc(e->pending, (size_t)capacity * sizeof *grown);
        if (grown == NULL)
            return clrun__fail(e->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for pending frees");
        e->pending = grown;
        e->pending_capacity = capacity;
    }
    cl_event marker = NULL;
    cl_int error = clrun__cl.EnqueueMarkerWithWaitList(e->ctx->queue, (cl_uint)s->event_count,
                                                       s->event_count ? s->events : NULL, &marker);
    if (error != CL_SUCCESS)
        return clrun__fail_cl(e->ctx, error, "clEnqueueMarkerWithWaitList", "ordering a free");
    e->pending[e->pending_count++] = (pending_free){s->range_chunk, s->range_offset, s->range_size, marker};
    return CLRUN_OK;
}

static clrun_status give_back(clrun_exec *e, int32_t b)
{
    buffer_state *s = &e->buffers[b];
    if (!s->live)
        return CLRUN_OK;
    clrun_status status = CLRUN_OK;
    /* Out of order: whoever next takes these bytes (a pool block or an arena range) must wait
     * for every command that used them. */
    if (e->ctx->out_of_order && s->event_count)
        status = remember_pending(e, s);
    bool is_input = e->schedule.buffers[b].is_input;
    if (e->options.mode == CLRUN_EXEC_NAIVE && !is_input) {
        clrun__cl.ReleaseMemObject(s->mem);
    } else if (e->options.mode == CLRUN_EXEC_POOLED || is_input) {
        clrun_status freed = clrun_free(e->ctx, &s->block);
        if (status == CLRUN_OK)
            status = freed;
    }
    drop_events(s);
    s->live = false;
    s->mem = NULL;
    return status;
}

/* ---- creation ----------------------------------------------------------------------------- */

static clrun_status prepare_nodes(clrun_exec *e)
{
    const clrun_graph *g = e->graph;
    int32_t n = g->node_count;
    size_t type_total = 0;
    for (int32_t i = 0; i < n; i++)
        type_total += (size_t)g->nodes[i].input_count + (size_t)g->nodes[i].output_count;
    e->types = calloc(type_total + 1, sizeof *e->types);
    e->calls = calloc((size_t)n + 1, sizeof *e->calls);
    e->node_states = calloc((size_t)n + 1, sizeof *e->node_states);
    e->kernels = calloc((size_t)n + 1, sizeof *e->kernels);
    if (!e->types || !e->calls || !e->node_states || !e->kernels)
        return clrun__fail(e->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory preparing nodes");
    size_t used = 0;
    for (int32_t i = 0; i < n; i++) {
        const clrun__node *node = &g->nodes[i];
        clrun__node_call(g, node, e->types + used, &e->calls[i]);
        used += (size_t)node->input_count + (size_t)node->output_count;
        e->kernels[i] = clrun__op_kernels_find(node->op);
        if (e->kernels[i] == NULL)
            return clrun__fail(e->ctx, CLRUN_ERROR_UNSUPPORTED, "node %d (%s): no kernel runs this op",
                               (int)i, node->op->name);
        clrun_status status = e->kernels[i]->prepare(e->ctx, node->op, &e->calls[i],
                                                     &e->node_states[i]);
        if (status != CLRUN_OK)
            return status;
    }
    return CLRUN_OK;
}

static clrun_status upload_constants(clrun_exec *e)
{
    const clrun_graph *g = e->graph;
    e->constants = calloc((size_t)g->tensor_count + 1, sizeof *e->constants);
    if (e->constants == NULL)
        return clrun__fail(e->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for constants");
    for (int32_t t = 0; t < g->tensor_count; t++) {
        const clrun__tensor *tensor = &g->tensors[t];
        if (tensor->kind != CLRUN__TENSOR_CONSTANT)
            continue;
        uint64_t bytes = clrun_tensor_bytes(&tensor->type);
        void *host = malloc((size_t)bytes);
        if (host == NULL)
            return clrun__fail(e->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY,
                               "out of host memory filling constant '%s' (%llu bytes)", tensor->name,
                               (unsigned long long)bytes);
        clrun__constant_values(tensor, host);
        clrun_status status = clrun_alloc_ex(e->ctx, bytes, 0, tensor->name, &e->constants[t]);
        if (status == CLRUN_OK)
            status = clrun_buffer_write(e->ctx, &e->constants[t], host);
        free(host);
        if (status != CLRUN_OK)
            return status;
    }
    return CLRUN_OK;
}

/* Planned mode: the intermediates and outputs (buffers the run creates) laid out in one arena. */
static clrun_status prepare_arena(clrun_exec *e)
{
    clrun_plan_buffer *items = NULL;
    int32_t *which = NULL;
    size_t n = 0;
    uint64_t *offsets = NULL;
    clrun_status status = clrun__schedule_plan_items(&e->schedule, false, &items, &which, &n);
    if (status == CLRUN_OK) {
        offsets = calloc(n + 1, sizeof *offsets);
        e->arena_views = calloc((size_t)e->schedule.buffer_count + 1, sizeof *e->arena_views);
    }
    if (status != CLRUN_OK || !offsets || !e->arena_views)
        status = clrun__fail(e->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory planning");
    clrun_plan_result result;
    clrun_plan_options options = CLRUN_PLAN_OPTIONS_DEFAULT;
    options.alignment = e->ctx->info.base_addr_align;
    if (e->options.plan_time_limit_s > 0)
        options.time_limit_s = e->options.plan_time_limit_s;
    if (status == CLRUN_OK && n > 0) {
        status = clrun_plan_solve(items, n, &options, offsets, &result);
        if (status != CLRUN_OK)
            clrun__fail(e->ctx, status, "planner failed on %zu buffers (alignment %llu): %s", n,
                        (unsigned long long)options.alignment, clrun_strerror(status));
    }
    e->arena_bytes = n > 0 && status == CLRUN_OK ? result.peak_bytes : 0;
    if (status == CLRUN_OK && e->arena_bytes > e->ctx->info.max_alloc)
        status = clrun__fail(e->ctx, CLRUN_ERROR_OUT_OF_MEMORY,
                             "planned arena of %llu bytes exceeds the device's maximum allocation of %llu bytes",
                             (unsigned long long)e->arena_bytes, (unsigned long long)e->ctx->info.max_alloc);
    if (status == CLRUN_OK && e->arena_bytes > 0) {
        cl_int error = CL_SUCCESS;
        e->arena = clrun__cl.CreateBuffer(e->ctx->cl, CL_MEM_READ_WRITE, (size_t)e->arena_bytes, NULL, &error);
        if (e->arena == NULL)
            status = clrun__fail_cl(e->ctx, error, "clCreateBuffer", "planned arena of %llu bytes",
                                    (unsigned long long)e->arena_bytes);
    }
    e->arena_offsets = calloc((size_t)e->schedule.buffer_count + 1, sizeof *e->arena_offsets);
    if (status == CLRUN_OK && e->arena_offsets == NULL)
        status = clrun__fail(e->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory planning");
    for (size_t i = 0; status == CLRUN_OK && i < n; i++) {
        e->arena_offsets[which[i]] = offsets[i];
        cl_buffer_region region = {(size_t)offsets[i], (size_t)items[i].size};
        cl_int error = CL_SUCCESS;
        e->arena_views[which[i]] = clrun__cl.CreateSubBuffer(e->arena, CL_MEM_READ_WRITE,
                                                             CL_BUFFER_CREATE_TYPE_REGION, &region, &error);
        if (e->arena_views[which[i]] == NULL)
            status = clrun__fail_cl(e->ctx, error, "clCreateSubBuffer", "arena view at %llu",
                                    (unsigned long long)offsets[i]);
    }
    free(items);
    free(which);
    free(offsets);
    return status;
}

static clrun_status build_schedules(clrun_exec *e)
{
    char err[512];
    clrun__schedule reusing;
    clrun_status status = clrun__schedule_build(e->graph, true, &reusing, err, sizeof err);
    if (status != CLRUN_OK)
        return clrun__fail(e->ctx, status, "%s", err);
    e->lower_bound = reusing.lower_bound;
    e->donations = reusing.donations;
    if (e->options.mode != CLRUN_EXEC_NAIVE) {
        e->schedule = reusing;
        return CLRUN_OK;
    }
    clrun__schedule_free(&reusing);
    status = clrun__schedule_build(e->graph, false, &e->schedule, err, sizeof err);
    return status == CLRUN_OK ? CLRUN_OK : clrun__fail(e->ctx, status, "%s", err);
}

static void report_unused_donations(clrun_exec *e)
{
    const clrun__schedule *s = &e->schedule;
    e->unused_names = calloc((size_t)s->unused_donated_count + 1, sizeof *e->unused_names);
    for (int32_t i = 0; e->unused_names && i < s->unused_donated_count; i++) {
        e->unused_names[i] = tensor_name(e, s->unused_donated[i]);
        clrun__log(CLRUN_LOG_WARN,
                   "donated input '%s' could not be used: no alias-safe node of the same size reads it last "
                   "(it is still freed after its last use)", e->unused_names[i]);
    }
}

clrun_status clrun_exec_create(clrun_context *ctx, const clrun_graph *graph,
                               const clrun_exec_options *options, clrun_exec **out)
{
    if (ctx == NULL || graph == NULL || out == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT, "clrun_exec_create: NULL argument");
    *out = NULL;
    if (clrun_graph_validate((clrun_graph *)graph) != CLRUN_OK)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_GRAPH, "%s", clrun_graph_last_error(graph));
    clrun_exec *e = calloc(1, sizeof *e);
    if (e == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory creating an executor");
    e->ctx = ctx;
    e->graph = graph;
    if (options)
        e->options = *options;
    else if (strcmp(ctx->options.allocator, "naive") == 0)
        e->options.mode = CLRUN_EXEC_NAIVE;
    else if (strcmp(ctx->options.allocator, "planned") == 0)
        e->options.mode = CLRUN_EXEC_PLANNED;
    if (e->options.mode > CLRUN_EXEC_PLANNED) {
        free(e);
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT, "unknown executor mode %d", (int)options->mode);
    }
    bool fuse = e->options.fusion ? e->options.fusion > 0 : ctx->options.fusion;
    clrun_status status = clrun__fuse(ctx, graph, fuse, &e->fusion);
    if (status == CLRUN_OK)
        e->graph = e->fusion.graph;
    if (status == CLRUN_OK)
        status = build_schedules(e);
    if (status == CLRUN_OK) {
        e->buffers = calloc((size_t)e->schedule.buffer_count + 1, sizeof *e->buffers);
        e->spans = calloc((size_t)e->schedule.steps + 1, sizeof *e->spans);
        e->step_events = calloc((size_t)e->schedule.steps + 1, sizeof *e->step_events);
        if (!e->buffers || !e->spans || !e->step_events)
            status = clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory creating an executor");
    }
    if (status == CLRUN_OK)
        status = prepare_nodes(e);
    if (status == CLRUN_OK)
        status = upload_constants(e);
    if (status == CLRUN_OK && e->options.mode == CLRUN_EXEC_PLANNED)
        status = prepare_arena(e);
    if (status != CLRUN_OK) {
        clrun_exec_destroy(e);
        return status;
    }
    report_unused_donations(e);
    *out = e;
    return CLRUN_OK;
}

static void release_outputs(clrun_exec *e)
{
    if (!e->have_outputs)
        return;
    for (int32_t b = 0; b < e->schedule.buffer_count; b++)
        if (e->buffers[b].live)
            give_back(e, b);
    drop_pending(e);
    e->have_outputs = false;
}

void clrun_exec_destroy(clrun_exec *e)
{
    if (e == NULL)
        return;
    if (e->ctx->queue)
        clFinish(e->ctx->queue); /* not counted: teardown must not be made to fail */
    release_outputs(e);
    for (int32_t i = 0; e->node_states && e->kernels && i < e->graph->node_count; i++)
        if (e->kernels[i])
            e->kernels[i]->release(e->node_states[i]);
    for (int32_t t = 0; e->constants && t < e->graph->tensor_count; t++)
        if (e->constants[t].mem)
            clrun_free(e->ctx, &e->constants[t]);
    for (int32_t b = 0; e->arena_views && b < e->schedule.buffer_count; b++)
        if (e->arena_views[b])
            clrun__cl.ReleaseMemObject(e->arena_views[b]);
    if (e->arena)
        clrun__cl.ReleaseMemObject(e->arena);
    for (int32_t b = 0; e->buffers && b < e->schedule.buffer_count; b++)
        free(e->buffers[b].events);
    for (int32_t i = 0; e->step_events && i < e->schedule.steps; i++)
        if (e->step_events[i])
            clrun__cl.ReleaseEvent(e->step_events[i]);
    clrun__schedule_free(&e->schedule);
    free(e->types);
    free(e->calls);
    free(e->node_states);
    free(e->kernels);
    free(e->constants);
    free(e->buffers);
    free(e->arena_views);
    free(e->arena_offsets);
    free(e->consumed);
    free(e->unused_names);
    free(e->pending);
    free(e->spans);
    free(e->step_events);
    clrun__fusion_free(e->ctx, &e->fusion);
    free(e);
}

/* ---- running -------------------------------------------------------------------------------- */

static bool was_consumed(const clrun_exec *e, const clrun_buffer *b, int32_t *tensor)
{
    for (int32_t i = 0; i < e->consumed_count; i++)
        if (e->consumed[i].slot == b->slot && e->consumed[i].generation == b->generation) {
            *tensor = e->consumed[i].tensor;
            return true;
        }
    return false;
}

static clrun_status remember_consumed(clrun_exec *e, const clrun_buffer *b, int32_t tensor)
{
    /* One record per pool slot: a newer consumption of the same slot replaces the older (whose
     * generation can never be live again), so the table stays as small as the pool's. */
    for (int32_t i = 0; i < e->consumed_count; i++)
        if (e->consumed[i].slot == b->slot) {
            e->consumed[i].generation = b->generation;
            e->consumed[i].tensor = tensor;
            return CLRUN_OK;
        }
    if (e->consumed_count == e->consumed_capacity) {
        int32_t capacity = e->consumed_capacity ? e->consumed_capacity * 2 : 8;
        void *grown = realloc(e->consumed, (size_t)capacity * sizeof *e->consumed);
        if (grown == NULL)
            return clrun__fail(e->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
        e->consumed = grown;
        e->consumed_capacity = capacity;
    }
    e->consumed[e->consumed_count].slot = b->slot;
    e->consumed[e->consumed_count].generation = b->generation;
    e->consumed[e->consumed_count++].tensor = tensor;
    return CLRUN_OK;
}

static clrun_status bind_inputs(clrun_exec *e, const clrun_buffer *inputs, int32_t count, uint64_t *held)
{
    const clrun_graph *g = e->graph;
    if (count != g->input_count || (count > 0 && inputs == NULL))
        return clrun__fail(e->ctx, CLRUN_ERROR_INVALID_ARGUMENT, "graph '%s' takes %d inputs, %d given",
                           g->name ? g->name : "", (int)g->input_count, (int)count);
    for (int32_t i = 0; i < count; i++) {
        int32_t t = g->inputs[i], earlier;
        uint64_t bytes = clrun_tensor_bytes(&g->tensors[t].type);
        if (was_consumed(e, &inputs[i], &earlier))
            return clrun__fail(e->ctx, CLRUN_ERROR_DONATED,
                               "input '%s': its buffer was donated to an earlier run (as input '%s') and "
                               "has been deleted; allocate a new one", tensor_name(e, t), tensor_name(e, earlier));
        if (inputs[i].mem == NULL || inputs[i].size != bytes)
            return clrun__fail(e->ctx, CLRUN_ERROR_INVALID_ARGUMENT,
                               "input '%s' needs a buffer of %llu bytes (%s), got %llu", tensor_name(e, t),
                               (unsigned long long)bytes, clrun_dtype_name(g->tensors[t].type.dtype),
                               (unsigned long long)inputs[i].size);
        if (!clrun__pool_is_live(e->ctx, &inputs[i]))
            return clrun__fail(e->ctx, CLRUN_ERROR_INVALID_ARGUMENT,
                               "input '%s': the buffer is not live in this context (freed already, or "
                               "allocated from another context)", tensor_name(e, t));
    }
    for (int32_t i = 0; i < count; i++) {
        int32_t t = g->inputs[i];
        buffer_state *s = &e->buffers[e->schedule.buffer_of[t]];
        s->block = inputs[i];
        s->mem = inputs[i].mem;
        s->range_chunk = inputs[i].chunk;
        s->range_offset = inputs[i].offset;
        s->range_size = inputs[i].size;
        s->live = true;
        *held += inputs[i].size;
        if (g->tensors[t].donated && remember_consumed(e, &inputs[i], t) != CLRUN_OK)
            return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    return CLRUN_OK;
}

/* The memory of tensor t in this run. */
static cl_mem tensor_mem(const clrun_exec *e, int32_t t)
{
    if (e->graph->tensors[t].kind == CLRUN__TENSOR_CONSTANT)
        return e->constants[t].mem;
    return e->buffers[e->schedule.buffer_of[t]].mem;
}

/* Out-of-order: what node `step` must wait for. Caller frees *list. */
static clrun_status gather_waits(clrun_exec *e, const clrun__node *node, cl_event **list, cl_uint *count)
{
    *list = NULL;
    *count = 0;
    if (!e->ctx->out_of_order)
        return CLRUN_OK;
    /* Each output may overlap every pending range; each input brings its users' events. */
    size_t capacity = (size_t)e->pending_count * (size_t)node->output_count + 8;
    for (int k = 0; k < node->input_count; k++)
        if (e->graph->tensors[node->inputs[k]].kind != CLRUN__TENSOR_CONSTANT)
            capacity += (size_t)e->buffers[e->schedule.buffer_of[node->inputs[k]]].event_count;
    cl_event *waits = malloc(capacity * sizeof *waits);
    if (waits == NULL)
        return clrun__fail(e->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    /* Inputs: their writer (and, for an input this node overwrites in place, its other readers:
     * all of them are in the buffer's event list). */
    for (int k = 0; k < node->input_count; k++) {
        if (e->graph->tensors[node->inputs[k]].kind == CLRUN__TENSOR_CONSTANT)
            continue;
        const buffer_state *s = &e->buffers[e->schedule.buffer_of[node->inputs[k]]];
        for (int32_t i = 0; i < s->event_count; i++)
            waits[(*count)++] = s->events[i];
    }
    /* Outputs in blocks freed earlier in this run: the old owner's users. */
    for (int o = 0; o < node->output_count; o++) {
        const buffer_state *s = &e->buffers[e->schedule.buffer_of[node->outputs[o]]];
        for (int32_t i = 0; i < e->pending_count; i++) {
            const pending_free *p = &e->pending[i];
            if (p->chunk == s->range_chunk && p->offset < s->range_offset + s->range_size &&
                s->range_offset < p->offset + p->size)
                waits[(*count)++] = p->done;
        }
    }
    *list = waits;
    return CLRUN_OK;
}

static clrun_status run_step(clrun_exec *e, int32_t step, uint64_t *held, uint64_t *peak, uint64_t *driver_allocs)
{
    const clrun__schedule *s = &e->schedule;
    int32_t node_index = s->order[step];
    const clrun__node *node = &e->graph->nodes[node_index];
    cl_mem in_mems[64], out_mems[16];
    if (node->input_count > 64 || node->output_count > 16)
        return clrun__fail(e->ctx, CLRUN_ERROR_INVALID_GRAPH,
                           "node '%s' (%s) has %d inputs and %d outputs; the executor takes at most 64 and 16",
                           tensor_name(e, node->outputs[0]), node->op->name, node->input_count, node->output_count);
    for (int o = 0; o < node->output_count; o++) {
        int32_t b = s->buffer_of[node->outputs[o]];
        if (s->alias_of[node->outputs[o]] < 0 && !e->buffers[b].live) {
            clrun_status status = take_memory(e, b, driver_allocs);
            if (status != CLRUN_OK)
                return status;
            *held += s->buffers[b].bytes;
        }
        out_mems[o] = e->buffers[b].mem;
    }
    if (*held > *peak)
        *peak = *held;
    for (int k = 0; k < node->input_count; k++)
        in_mems[k] = tensor_mem(e, node->inputs[k]);

    cl_event *waits;
    cl_uint wait_count;
    clrun_status status = gather_waits(e, node, &waits, &wait_count);
    if (status != CLRUN_OK)
        return status;
    bool want_event = e->options.profile || e->ctx->out_of_order;
    cl_event done = NULL;
    status = e->kernels[node_index]->enqueue(e->ctx, e->node_states[node_index],
                                             &e->calls[node_index], in_mems, out_mems, wait_count,
                                             waits, want_event ? &done : NULL);
    free(waits);
    if (status != CLRUN_OK)
        return status;
    if (e->ctx->out_of_order) {
        for (int k = 0; k < node->input_count; k++)
            if (e->graph->tensors[node->inputs[k]].kind != CLRUN__TENSOR_CONSTANT &&
                !add_event(&e->buffers[s->buffer_of[node->inputs[k]]], done))
                status = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        for (int o = 0; o < node->output_count; o++)
            if (!add_event(&e->buffers[s->buffer_of[node->outputs[o]]], done))
                status = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    if (e->options.profile) {
        e->step_events[step] = done;
    } else if (done) {
        clrun__cl.ReleaseEvent(done);
    }
    if (status != CLRUN_OK)
        return clrun__fail(e->ctx, status, "out of host memory recording events");
    for (int32_t i = s->release_start[step]; i < s->release_start[step + 1]; i++) {
        int32_t b = s->release_list[i];
        if (!e->buffers[b].live)
            continue;
        *held -= s->buffers[b].bytes;
        status = give_back(e, b);
        if (status != CLRUN_OK)
            return status;
    }
    e->spans[step].bytes_in_use = *held;
    return CLRUN_OK;
}

static void collect_profile(clrun_exec *e)
{
    uint64_t origin = 0;
    e->span_count = 0;
    for (int32_t step = 0; step < e->schedule.steps; step++) {
        cl_event ev = e->step_events[step];
        const clrun__node *node = &e->graph->nodes[e->schedule.order[step]];
        cl_ulong start = 0, end = 0;
        if (ev) {
            clrun__cl.GetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof start, &start, NULL);
            clrun__cl.GetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof end, &end, NULL);
            clrun__cl.ReleaseEvent(ev);
            e->step_events[step] = NULL;
        }
        if (step == 0 || (start && start < origin))
            origin = start;
        e->spans[step].op = node->op->name;
        e->spans[step].name = tensor_name(e, node->outputs[0]);
        e->spans[step].start_ns = start;
        e->spans[step].end_ns = end;
    }
    for (int32_t step = 0; step < e->schedule.steps; step++) {
        e->spans[step].start_ns = e->spans[step].start_ns >= origin ? e->spans[step].start_ns - origin : 0;
        e->spans[step].end_ns = e->spans[step].end_ns >= origin ? e->spans[step].end_ns - origin : 0;
    }
    e->span_count = e->schedule.steps;
}

/* After a failed run: give everything of this run back (donated inputs included: they were
 * consumed), so the executor can run again. */
static void abandon_run(clrun_exec *e)
{
    clFinish(e->ctx->queue); /* not counted: cleanup must not be made to fail */
    for (int32_t b = 0; b < e->schedule.buffer_count; b++) {
        buffer_state *s = &e->buffers[b];
        bool callers = e->schedule.buffers[b].is_input && !e->graph->tensors[e->schedule.buffers[b].root].donated;
        if (s->live && !callers)
            give_back(e, b);
        drop_events(s);
        s->live = false;
    }
    for (int32_t i = 0; i < e->schedule.steps; i++)
        if (e->step_events[i]) {
            clrun__cl.ReleaseEvent(e->step_events[i]);
            e->step_events[i] = NULL;
        }
    drop_pending(e);
}

/* Inputs the caller keeps are not the executor's: forget them once the run is over (keeping
 * the memory of one that is also a graph output, so it can be read back). */
static void unbind_caller_inputs(clrun_exec *e)
{
    for (int32_t i = 0; i < e->graph->input_count; i++) {
        int32_t t = e->graph->inputs[i];
        if (e->graph->tensors[t].donated)
            continue;
        buffer_state *s = &e->buffers[e->schedule.buffer_of[t]];
        drop_events(s);
        s->live = false;
        if (!e->graph->tensors[t].is_output)
            s->mem = NULL;
    }
}

/* Figures of a finished run. Pooled figures come from the pool's own statistics, not from the
 * executor's bookkeeping: what was really held and reserved. */
static void record_stats(clrun_exec *e, const clrun_memory_stats *before, uint64_t input_bytes,
                         uint64_t own_peak, uint64_t naive_allocs, double wall)
{
    clrun_memory_stats after;
    clrun_memory_stats_get(e->ctx, &after);
    clrun_exec_stats *st = &e->stats;
    st->wall_ms = wall;
    st->driver_allocs = after.driver_allocs - before->driver_allocs + naive_allocs;
    switch (e->options.mode) {
    case CLRUN_EXEC_POOLED:
        st->peak_bytes = after.in_use_peak - before->in_use + input_bytes;
        st->reserved_bytes = after.reserved_peak;
        break;
    case CLRUN_EXEC_NAIVE:
        st->peak_bytes = own_peak;
        st->reserved_bytes = after.reserved_peak + (own_peak - input_bytes);
        break;
    case CLRUN_EXEC_PLANNED:
        st->peak_bytes = e->arena_bytes + input_bytes;
        st->reserved_bytes = after.reserved_peak + e->arena_bytes;
        break;
    }
}

clrun_status clrun_exec_run(clrun_exec *e, const clrun_buffer *inputs, int32_t input_count)
{
    if (e == NULL)
        return clrun__fail(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "clrun_exec_run: NULL executor");
    release_outputs(e);
    clrun_memory_stats before;
    clrun_status status = clrun_memory_stats_get(e->ctx, &before);
    if (status != CLRUN_OK)
        return status;
    clrun_memory_reset_peaks(e->ctx);
    uint64_t held = 0, peak = 0, driver_allocs = 0;
    double start = now_ms();
    status = bind_inputs(e, inputs, input_count, &held);
    uint64_t held_at_start = held;
    peak = held;
    for (int32_t step = 0; status == CLRUN_OK && step < e->schedule.steps; step++)
        status = run_step(e, step, &held, &peak, &driver_allocs);
    if (status == CLRUN_OK) {
        cl_int error = clrun__cl.Finish(e->ctx->queue);
        if (error != CL_SUCCESS)
            status = clrun__fail_cl(e->ctx, error, "clFinish", "end of run of graph '%s'", e->graph->name);
    }
    double wall = now_ms() - start;
    if (status != CLRUN_OK) {
        abandon_run(e);
        return status;
    }
    drop_pending(e);
    unbind_caller_inputs(e);
    if (e->options.profile)
        collect_profile(e);
    e->have_outputs = true;

    record_stats(e, &before, held_at_start, peak, driver_allocs, wall);
    return CLRUN_OK;
}

clrun_status clrun_exec_output(const clrun_exec *e, int32_t i, cl_mem *mem, uint64_t *bytes)
{
    if (e == NULL || i < 0 || i >= e->graph->output_count || !e->have_outputs)
        return clrun__fail(e ? e->ctx : NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                           "output %d does not exist (graph has %d outputs%s)", (int)i,
                           e ? (int)e->graph->output_count : 0, e && !e->have_outputs ? ", no run yet" : "");
    int32_t t = e->graph->outputs[i];
    if (mem)
        *mem = tensor_mem(e, t);
    if (bytes)
        *bytes = clrun_tensor_bytes(&e->graph->tensors[t].type);
    return CLRUN_OK;
}

clrun_status clrun_exec_read_output(clrun_exec *e, int32_t i, void *host, uint64_t bytes)
{
    cl_mem mem;
    uint64_t size;
    clrun_status status = clrun_exec_output(e, i, &mem, &size);
    if (status != CLRUN_OK)
        return status;
    if (bytes != size || host == NULL)
        return clrun__fail(e->ctx, CLRUN_ERROR_INVALID_ARGUMENT, "output '%s' has %llu bytes, %llu asked",
                           tensor_name(e, e->graph->outputs[i]), (unsigned long long)size, (unsigned long long)bytes);
    cl_int error = clrun__cl.EnqueueReadBuffer(e->ctx->queue, mem, CL_TRUE, 0, (size_t)size, host, 0, NULL, NULL);
    if (error != CL_SUCCESS)
        return clrun__fail_cl(e->ctx, error, "clEnqueueReadBuffer", "output '%s'", tensor_name(e, e->graph->outputs[i]));
    return CLRUN_OK;
}

clrun_status clrun_exec_stats_get(const clrun_exec *e, clrun_exec_stats *out)
{
    if (e == NULL || out == NULL)
        return clrun__fail(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "clrun_exec_stats_get: NULL argument");
    *out = e->stats;
    out->mode = clrun_exec_mode_name(e->options.mode);
    out->allocator = e->options.mode == CLRUN_EXEC_POOLED ? clrun__context_strategy(e->ctx) : out->mode;
    out->steps = e->schedule.steps;
    out->graph_nodes = e->fusion.nodes_before;
    out->kernels = e->schedule.steps;
    out->fused_groups = e->fusion.group_count;
    out->fused_nodes = e->fusion.fused_nodes;
    out->lower_bound_bytes = e->lower_bound;
    out->naive_bytes = e->schedule.naive_bytes;
    out->constant_bytes = e->schedule.constant_bytes;
    out->donations = e->options.mode == CLRUN_EXEC_NAIVE ? 0 : e->donations;
    out->unused_donations = e->schedule.unused_donated_count;
    return CLRUN_OK;
}

int32_t clrun_exec_unused_donations(const clrun_exec *e, const char *const **names)
{
    if (names)
        *names = e->unused_names;
    return e->unused_names ? e->schedule.unused_donated_count : 0;
}

int32_t clrun_exec_fused_groups(const clrun_exec *e, const clrun_fused_group **groups)
{
    if (groups)
        *groups = e ? e->fusion.groups : NULL;
    return e ? e->fusion.group_count : 0;
}

int32_t clrun_exec_profile(const clrun_exec *e, const clrun_exec_span **spans)
{
    if (spans)
        *spans = e->spans;
    return e->span_count;
}
