/* The executor: runs a scheduled graph on a context in one of three memory modes.
 *
 * Pooled: each intermediate takes a pool block at the step that writes it and gives it back
 * right after its last reader is enqueued. On an in-order queue that is safe at once: every
 * command that reads the old owner precedes every command of the new owner. On an out-of-order
 * queue the freed block carries a marker event over its readers, and the next node whose output
 * overlaps it waits for that marker (stream-ordered reuse, as cudaMallocAsync does).
 * Naive: one clCreateBuffer per tensor per run, all released when the run ends.
 * Planned: one arena, offsets from the static planner, sub-buffers made once at creation.
 *
 * Creation, in order: the nodes' kernels are prepared; the constants are placed, and the nodes
 * that keep their own packed copy of constant weights make it (exec_constants.c); then the
 * schedule is built with the scratch each node's kernels ask for, so that every mode counts,
 * reuses and plans it like the tensors. */
#include <clrun/exec.h>
#include <clrun/plan.h>

#include <stdlib.h>
#include <string.h>

#include "exec/exec_internal.h"
#include "exec/exec_share.h"

_Static_assert((int)CLRUN_EXEC_POOLED == (int)CLRUN__EXEC_POOLED &&
                   (int)CLRUN_EXEC_NAIVE == (int)CLRUN__EXEC_NAIVE &&
                   (int)CLRUN_EXEC_PLANNED == (int)CLRUN__EXEC_PLANNED,
               "CLRUN_ALLOCATOR's executor modes are clrun_exec_mode values");
_Static_assert(CLRUN__SCRATCH_MAX == CLRUN__SCHEDULE_SCRATCH,
               "the schedule holds as many parts of scratch as a node may ask for");

void clrun_exec_options_init(clrun_exec_options *options)
{
    if (options)
        *options = (clrun_exec_options){.mode = CLRUN_EXEC_CONTEXT, .plan_time_limit_s = 1.0};
}

const char *clrun_exec_mode_name(clrun_exec_mode mode)
{
    switch (mode) {
    case CLRUN_EXEC_CONTEXT: return "context";
    case CLRUN_EXEC_POOLED: return "pooled";
    case CLRUN_EXEC_NAIVE: return "naive";
    case CLRUN_EXEC_PLANNED: return "planned";
    }
    return "unknown";
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

static const char *kind_name(const clrun__tensor *t)
{
    return t->kind == CLRUN__TENSOR_INPUT ? "input" : t->kind == CLRUN__TENSOR_CONSTANT ? "constant" : "tensor";
}

/* Refuses a tensor no device allocation can hold, or weights larger than the pool may reserve,
 * before anything is made on the host or the device (a 32 GiB input was filled on the host for
 * seconds before). */
static clrun_status check_sizes(clrun_exec *e)
{
    const clrun_device_info *d = &e->ctx->info;
    clrun__pool_config pc;
    clrun__context_pool_config(e->ctx, &pc);
    uint64_t weights = 0;
    char type[CLRUN__TYPE_TEXT], bytes[CLRUN__BYTES_TEXT], limit[CLRUN__BYTES_TEXT];
    for (int32_t t = 0; t < e->graph->tensor_count; t++) {
        const clrun__tensor *tensor = &e->graph->tensors[t];
        uint64_t size = clrun_tensor_bytes(&tensor->type);
        if (tensor->kind == CLRUN__TENSOR_CONSTANT)
            weights += size;
        if (size > d->max_alloc)
            return clrun__fail(e->ctx, CLRUN_ERROR_INVALID_SIZE,
                               "%s '%s' is %s (%s): more than the device's largest allocation, %s",
                               kind_name(tensor), clrun__tensor_label(tensor),
                               clrun__type_format(&tensor->type, type, sizeof type),
                               clrun__format_bytes(size, bytes, sizeof bytes),
                               clrun__format_bytes(d->max_alloc, limit, sizeof limit));
    }
    if (weights > pc.limit)
        return clrun__fail(e->ctx, CLRUN_ERROR_OUT_OF_MEMORY,
                           "the constants of graph '%s' need %s, more than the pool may reserve (%s: "
                           "CLRUN_POOL_LIMIT, or CLRUN_MEM_FRACTION of the device's memory)",
                           e->graph->name ? e->graph->name : "", clrun__format_bytes(weights, bytes, sizeof bytes),
                           clrun__format_bytes(pc.limit, limit, sizeof limit));
    return CLRUN_OK;
}

/* The scratch every node's kernels ask for, as the schedule takes it; *out is malloc'd. */
static clrun_status node_scratch(clrun_exec *e, uint64_t **out)
{
    int32_t n = e->graph->node_count;
    uint64_t *scratch = calloc((size_t)n * CLRUN__SCRATCH_MAX + 1, sizeof *scratch);
    *out = scratch;
    if (scratch == NULL)
        return clrun__fail(e->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory preparing nodes");
    for (int32_t i = 0; i < n; i++) {
        const clrun__op_kernels *k = e->kernels[i];
        uint64_t *bytes = scratch + (size_t)i * CLRUN__SCRATCH_MAX;
        int parts = k->scratch ? k->scratch(e->node_states[i], bytes) : 0;
        for (int j = parts < 0 ? 0 : parts; j < CLRUN__SCRATCH_MAX; j++)
            bytes[j] = 0;
    }
    return CLRUN_OK;
}

static clrun_status build_schedules(clrun_exec *e)
{
    char err[512];
    uint64_t *scratch = NULL;
    clrun__schedule reusing;
    clrun_status status = node_scratch(e, &scratch);
    if (status != CLRUN_OK)
        return status;
    /* concats assembled in place only where it runs with reuse: naive is the plain reference */
    uint64_t align = e->options.mode == CLRUN_EXEC_NAIVE ? 0 : e->ctx->info.base_addr_align;
    status = clrun__schedule_build_assembling(e->graph, scratch, align, &reusing, err, sizeof err);
    if (status != CLRUN_OK) {
        free(scratch);
        return clrun__fail(e->ctx, status, "%s", err);
    }
    if (reusing.assembled > 0)
        clrun__log(CLRUN_LOG_DEBUG, "%d concat%s assembled in place (%d of them in part): inputs "
                   "written into the output", (int)reusing.assembled,
                   reusing.assembled == 1 ? "" : "s", (int)(reusing.assembled - reusing.assembled_whole));
    e->lower_bound = reusing.lower_bound;
    e->donations = reusing.donations;
    e->donated_in_place = reusing.donated_in_place;
    if (e->options.mode != CLRUN_EXEC_NAIVE) {
        e->schedule = reusing;
        free(scratch);
        return CLRUN_OK;
    }
    clrun__schedule_free(&reusing);
    status = clrun__schedule_build_with_scratch(e->graph, false, scratch, &e->schedule, err, sizeof err);
    free(scratch);
    return status == CLRUN_OK ? CLRUN_OK : clrun__fail(e->ctx, status, "%s", err);
}

/* The run-time state of every schedule buffer; a constant's is its resident block, so that a
 * view of it reads there. */
static clrun_status make_buffer_states(clrun_exec *e)
{
    e->buffers = calloc((size_t)e->schedule.buffer_count + 1, sizeof *e->buffers);
    e->spans = calloc((size_t)e->schedule.steps + 1, sizeof *e->spans);
    e->step_events = calloc((size_t)e->schedule.steps + 1, sizeof *e->step_events);
    if (clrun__graph_has_guards(e->graph))
        e->guard_values = malloc((size_t)e->graph->tensor_count + 1);
    if (!e->buffers || !e->spans || !e->step_events ||
        (e->guard_values == NULL && clrun__graph_has_guards(e->graph)))
        return clrun__fail(e->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory creating an executor");
    for (int32_t t = 0; t < e->graph->tensor_count; t++)
        if (e->graph->tensors[t].kind == CLRUN__TENSOR_CONSTANT)
            e->buffers[e->schedule.buffer_of[t]].mem = e->constants[t].mem;
    if (e->schedule.part_of &&
        (e->part_views = calloc((size_t)e->graph->tensor_count + 1, sizeof *e->part_views)) == NULL)
        return clrun__fail(e->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory creating an executor");
    return clrun__exec_prepare_loops(e);
}

static void report_unused_donations(clrun_exec *e)
{
    const clrun__schedule *s = &e->schedule;
    e->unused_names = calloc((size_t)s->unused_donated_count + 1, sizeof *e->unused_names);
    for (int32_t i = 0; e->unused_names && i < s->unused_donated_count; i++) {
        e->unused_names[i] = clrun__exec_tensor_name(e, s->unused_donated[i]);
        char why[512];
        clrun__schedule_unused_reason(e->graph, s, s->unused_donated[i], why, sizeof why);
        clrun__log(CLRUN_LOG_WARN,
                   "donated input '%s' could not be used: %s (it is still freed after its last use)",
                   e->unused_names[i], why);
    }
}

clrun_status clrun_exec_create(clrun_context *ctx, const clrun_graph *graph,
                               const clrun_exec_options *options, clrun_exec **out)
{
    if (options && options->memory_budget && ctx && graph && out) {
        *out = NULL;
        return clrun__exec_create_within(ctx, graph, options, out);
    }
    return clrun__exec_create_in_pool(ctx, graph, options, out);
}

clrun_status clrun__exec_create_beside(clrun_context *ctx, const clrun_graph *graph,
                                       const clrun_exec_options *options, const clrun_exec *host,
                                       clrun_exec **out)
{
    if (ctx == NULL || graph == NULL || out == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT, "clrun_exec_create: NULL argument");
    *out = NULL;
    if (clrun_graph_validate((clrun_graph *)graph) != CLRUN_OK)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_GRAPH, "%s", clrun_graph_last_error(graph));
    clrun_exec *e = calloc(1, sizeof *e);
    if (e == NULL || pthread_mutex_init(&e->lock, NULL) != 0) {
        free(e);
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory creating an executor");
    }
    e->ctx = ctx;
    e->graph = graph;
    e->arena_host = host;
    if (options)
        e->options = *options;
    else
        clrun_exec_options_init(&e->options);
    if (e->options.mode == CLRUN_EXEC_CONTEXT)
        e->options.mode = (clrun_exec_mode)ctx->options.allocator.mode;
    clrun_exec_mode mode = e->options.mode;
    double limit = e->options.plan_time_limit_s;
    if (mode < CLRUN_EXEC_POOLED || mode > CLRUN_EXEC_PLANNED || !(limit >= 0 && limit <= 1e9)) {
        free(e);
        if (!(limit >= 0 && limit <= 1e9))
            return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT,
                               "plan_time_limit_s is %g: seconds from 0 (constructions only) to 1e9",
                               limit);
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT, "unknown executor mode %d", (int)mode);
    }
    clrun__context_hold(ctx); /* dropped by clrun_exec_destroy, on failure too */
    clrun_status status = check_sizes(e);
    bool fuse = e->options.fusion ? e->options.fusion > 0 : ctx->options.fusion;
    bool fold = e->options.fold ? e->options.fold > 0 : ctx->options.fold;
    if (status == CLRUN_OK)
        status = clrun__fuse(ctx, graph, fuse, fold, &e->fusion);
    if (status == CLRUN_OK)
        e->graph = e->fusion.graph;
    if (status == CLRUN_OK && (e->groups = calloc((size_t)e->fusion.group_count + 1, sizeof *e->groups)) == NULL)
        status = clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory creating an executor");
    for (int32_t i = 0; status == CLRUN_OK && i < e->fusion.group_count; i++)
        e->groups[i] = (clrun_fused_group){e->fusion.groups[i].name, e->fusion.groups[i].output,
                                           e->fusion.groups[i].nodes};
    if (status == CLRUN_OK)
        status = prepare_nodes(e);
    if (status == CLRUN_OK)
        status = clrun__exec_place_constants(e);
    if (status == CLRUN_OK)
        status = build_schedules(e);
    if (status == CLRUN_OK)
        status = make_buffer_states(e);
    if (status == CLRUN_OK && e->options.mode == CLRUN_EXEC_PLANNED)
        status = clrun__exec_prepare_arena(e);
    if (status != CLRUN_OK) {
        clrun_exec_destroy(e);
        return status;
    }
    report_unused_donations(e);
    *out = e;
    return CLRUN_OK;
}

void clrun__exec_release_outputs(clrun_exec *e)
{
    if (!e->have_outputs)
        return;
    for (int32_t b = 0; b < e->schedule.buffer_count; b++)
        if (e->buffers[b].live)
            clrun__exec_give_back(e, b);
    clrun__exec_release_regions(e);
    clrun__exec_drop_pending(e);
    e->have_outputs = false;
}

void clrun_exec_destroy(clrun_exec *e)
{
    if (e == NULL)
        return;
    if (e->ctx->queue)
        clFinish(e->ctx->queue); /* not counted: teardown must not be made to fail */
    clrun__exec_release_outputs(e);
    for (int32_t i = 0; e->node_states && e->kernels && i < e->graph->node_count; i++)
        if (e->kernels[i])
            e->kernels[i]->release(e->node_states[i]);
    for (int32_t t = 0; e->constants && t < e->graph->tensor_count; t++)
        if (e->constants[t].mem)
            clrun__pool_free_owned(e->ctx, &e->constants[t]);
    for (int32_t i = 0; e->packed && i < e->graph->node_count; i++)
        if (e->packed[i].mem)
            clrun__pool_free_owned(e->ctx, &e->packed[i]);
    clrun__exec_drop_arena(e);
    for (int32_t b = 0; e->buffers && b < e->schedule.buffer_count; b++)
        free(e->buffers[b].events);
    for (int32_t t = 0; e->part_views && t < e->graph->tensor_count; t++)
        if (e->part_views[t])
            clrun__cl.ReleaseMemObject(e->part_views[t]);
    free(e->part_views);
    for (int32_t i = 0; e->step_events && i < e->schedule.steps; i++)
        if (e->step_events[i])
            clrun__cl.ReleaseEvent(e->step_events[i]);
    clrun__schedule_free(&e->schedule);
    free(e->types);
    free(e->calls);
    free(e->node_states);
    free(e->kernels);
    free(e->constants);
    free(e->packed);
    free(e->buffers);
    free(e->unused_names);
    free(e->pending);
    free(e->spans);
    free(e->step_events);
    free(e->guard_values);
    free(e->loops);
    free(e->groups);
    clrun__fusion_free(e->ctx, &e->fusion);
    free(e->recomputed);
    free(e->offloaded);
    clrun__exec_host_release(e);
    clrun__exec_groups_free(e);
    clrun_graph_destroy(e->owned_graph);
    pthread_mutex_destroy(&e->lock);
    clrun_context *ctx = e->ctx;
    free(e);
    clrun__context_drop(ctx); /* last: it may finish a clrun_context_destroy */
}

/* ---- reading ---------------------------------------------------------------------------- */

/* The executor's lock, for calls that take a const executor: it is not part of its value. */
static pthread_mutex_t *lock_of(const clrun_exec *e) { return &((clrun_exec *)e)->lock; }

static clrun_status output_of(const clrun_exec *e, int32_t i, cl_mem *mem, uint64_t *bytes)
{
    if (e == NULL || i < 0 || i >= e->graph->output_count || !e->have_outputs)
        return clrun__fail(e ? e->ctx : NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                           "output %d does not exist (graph has %d output%s%s)", (int)i,
                           e ? (int)e->graph->output_count : 0, e && e->graph->output_count == 1 ? "" : "s",
                           e && !e->have_outputs ? ", no run yet" : "");
    int32_t t = e->graph->outputs[i];
    if (clrun_tensor_empty(&e->graph->tensors[t].type)) { /* no memory, no bytes: still a value */
        if (mem)
            *mem = NULL;
        if (bytes)
            *bytes = 0;
        return CLRUN_OK;
    }
    cl_mem held = clrun__exec_tensor_mem(e, t);
    if (held == NULL)
        return clrun__fail(e->ctx, CLRUN_ERROR_INVALID_ARGUMENT,
                           "output '%s' was taken by clrun_exec_take_output after the last run",
                           clrun__exec_tensor_name(e, t));
    if (mem)
        *mem = held;
    if (bytes)
        *bytes = clrun_tensor_bytes(&e->graph->tensors[t].type);
    return CLRUN_OK;
}

/* A new block of the caller's holding a copy of the output's bytes. */
static clrun_status copy_output(clrun_exec *e, int32_t t, cl_mem from, clrun_buffer *out)
{
    uint64_t bytes = clrun_tensor_bytes(&e->graph->tensors[t].type);
    clrun_status status = clrun_alloc_ex(e->ctx, bytes, 0, clrun__exec_tensor_name(e, t), out);
    if (status != CLRUN_OK)
        return status;
    cl_int error = clrun__cl.EnqueueCopyBuffer(e->ctx->queue, from, out->mem, 0, 0, (size_t)bytes, 0,
                                               NULL, NULL);
    if (error == CL_SUCCESS)
        error = clrun__cl.Finish(e->ctx->queue); /* the copy is complete on any queue */
    if (error != CL_SUCCESS) {
        clrun_free(e->ctx, out);
        memset(out, 0, sizeof *out);
        return clrun__fail_cl(e->ctx, error, "clEnqueueCopyBuffer", "taking output '%s'",
                              clrun__exec_tensor_name(e, t));
    }
    return CLRUN_OK;
}

clrun_status clrun_exec_output(const clrun_exec *e, int32_t i, cl_mem *mem, uint64_t *bytes)
{
    if (e == NULL)
        return output_of(e, i, mem, bytes);
    pthread_mutex_lock(lock_of(e));
    clrun_status status = output_of(e, i, mem, bytes);
    pthread_mutex_unlock(lock_of(e));
    return status;
}

static clrun_status take_output(clrun_exec *e, int32_t i, clrun_buffer *out)
{
    cl_mem mem;
    clrun_status status = output_of(e, i, &mem, NULL);
    if (status != CLRUN_OK)
        return status;
    int32_t t = e->graph->outputs[i];
    if (clrun_tensor_empty(&e->graph->tensors[t].type))
        return CLRUN_OK; /* an empty output: the zero buffer (no memory, 0 bytes) */
    int32_t b = e->schedule.buffer_of[t];
    buffer_state *s = &e->buffers[b];
    /* A pool block is handed over: pooled mode's, and in planned mode a donated input's that
     * the output took over in place (the arena's ranges are copied out). */
    bool pool_block = e->options.mode == CLRUN_EXEC_POOLED ||
                      (e->options.mode == CLRUN_EXEC_PLANNED && e->schedule.buffers[b].is_input &&
                       !s->hosting);
    /* a member of a group of outputs is a view into its group's memory */
    bool grouped = e->out_groups.count > 0 && e->out_groups.group_of[b] >= 0;
    bool own_block = e->graph->tensors[t].kind == CLRUN__TENSOR_INTERMEDIATE && pool_block &&
                     s->live && !grouped;
    if (!own_block)
        return copy_output(e, t, mem, out);
    status = clrun__pool_hand_over(e->ctx, &s->block, out);
    if (status != CLRUN_OK)
        return status;
    clrun__exec_drop_events(s);
    s->live = false;
    s->mem = NULL;
    return CLRUN_OK;
}

clrun_status clrun_exec_take_output(clrun_exec *e, int32_t i, clrun_buffer *out)
{
    if (out == NULL || e == NULL)
        return clrun__fail(e ? e->ctx : NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                           "clrun_exec_take_output: NULL argument");
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&e->lock);
    clrun_status status = take_output(e, i, out);
    pthread_mutex_unlock(&e->lock);
    return status;
}

static clrun_status read_output(clrun_exec *e, int32_t i, void *host, uint64_t bytes)
{
    cl_mem mem;
    uint64_t size;
    clrun_status status = output_of(e, i, &mem, &size);
    if (status != CLRUN_OK)
        return status;
    if (bytes != size || (host == NULL && size > 0))
        return clrun__fail(e->ctx, CLRUN_ERROR_INVALID_ARGUMENT,
                           "output '%s' has %llu bytes, %llu asked (or host is NULL)",
                           clrun__exec_tensor_name(e, e->graph->outputs[i]), (unsigned long long)size,
                           (unsigned long long)bytes);
    if (size == 0)
        return CLRUN_OK; /* an empty output: nothing to read */
    cl_int error = clrun__cl.EnqueueReadBuffer(e->ctx->queue, mem, CL_TRUE, 0, (size_t)size, host, 0, NULL, NULL);
    if (error != CL_SUCCESS)
        return clrun__fail_cl(e->ctx, error, "clEnqueueReadBuffer", "output '%s'", clrun__exec_tensor_name(e, e->graph->outputs[i]));
    return CLRUN_OK;
}

clrun_status clrun_exec_read_output(clrun_exec *e, int32_t i, void *host, uint64_t bytes)
{
    if (e == NULL)
        return output_of(e, i, NULL, NULL);
    pthread_mutex_lock(&e->lock);
    clrun_status status = read_output(e, i, host, bytes);
    pthread_mutex_unlock(&e->lock);
    return status;
}

clrun_status clrun_exec_stats_get(const clrun_exec *e, clrun_exec_stats *out)
{
    if (e == NULL || out == NULL)
        return clrun__fail(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "clrun_exec_stats_get: NULL argument");
    pthread_mutex_lock(lock_of(e));
    *out = e->stats;
    pthread_mutex_unlock(lock_of(e));
    out->mode = clrun_exec_mode_name(e->options.mode);
    out->allocator = e->options.mode == CLRUN_EXEC_POOLED ? e->ctx->options.allocator.strategy->name
                                                          : out->mode;
    out->steps = e->schedule.steps;
    out->graph_nodes = e->fusion.nodes_before ? e->fusion.nodes_before : e->graph->node_count;
    out->kernels = e->schedule.steps - e->schedule.views - e->schedule.assembled_whole;
    out->fused_groups = e->fusion.group_count;
    out->fused_nodes = e->fusion.fused_nodes;
    out->folded_nodes = e->fusion.folded_nodes;
    out->folded_batchnorms = e->fusion.folded_batchnorms;
    out->arena_bytes = e->arena_bytes;
    out->lower_bound_bytes = e->lower_bound;
    out->naive_bytes = e->schedule.naive_bytes;
    out->constant_bytes = e->schedule.constant_bytes;
    out->host_bytes = e->schedule.host_bytes;
    out->offloaded_tensors = e->schedule.host_buffers; /* each offloaded tensor has one */
    out->offloaded_bytes = 2 * e->schedule.host_bytes;
    out->donations = e->options.mode == CLRUN_EXEC_NAIVE ? 0 : e->donations;
    out->donated_in_place = e->options.mode == CLRUN_EXEC_NAIVE ? 0 : e->donated_in_place;
    out->unused_donations = e->schedule.unused_donated_count;
    out->views = e->schedule.views;
    out->assembled_concats = e->schedule.assembled;
    out->assembled_in_part = e->schedule.assembled - e->schedule.assembled_whole;
    return CLRUN_OK;
}

int32_t clrun_exec_unused_donations(const clrun_exec *e, const char *const **names)
{
    if (names)
        *names = e ? e->unused_names : NULL;
    return e && e->unused_names ? e->schedule.unused_donated_count : 0;
}

int32_t clrun_exec_recomputed(const clrun_exec *e, const char *const **names)
{
    if (names)
        *names = e ? e->recomputed : NULL;
    return e && e->recomputed ? e->recomputed_count : 0;
}

int32_t clrun_exec_fused_groups(const clrun_exec *e, const clrun_fused_group **groups)
{
    if (groups)
        *groups = e ? e->groups : NULL;
    return e ? e->fusion.group_count : 0;
}

const char *clrun_exec_span_node(const clrun_exec *e, int32_t step)
{
    if (e == NULL || step < 0 || step >= e->span_count)
        return NULL;
    return e->graph->nodes[e->schedule.order[step]].model_name;
}

int32_t clrun_exec_profile(const clrun_exec *e, const clrun_exec_span **spans)
{
    if (spans)
        *spans = e ? e->spans : NULL;
    if (e == NULL)
        return 0;
    pthread_mutex_lock(lock_of(e));
    int32_t count = e->span_count;
    pthread_mutex_unlock(lock_of(e));
    return count;
}

clrun_status clrun_exec_plan_buffers(const clrun_exec *e, bool with_inputs, clrun_plan_buffer **buffers,
                                     size_t *count, char ***names)
{
    if (names)
        *names = NULL;
    if (e == NULL || buffers == NULL || count == NULL)
        return clrun__fail(e ? e->ctx : NULL, CLRUN_ERROR_INVALID_ARGUMENT, "clrun_exec_plan_buffers: NULL argument");
    char why[256];
    clrun_status s = clrun__schedule_plan_buffers(e->graph, &e->schedule, with_inputs, buffers, count, names,
                                                  why, sizeof why);
    return s == CLRUN_OK ? s : clrun__fail(e->ctx, s, "%s", why);
}

clrun_status clrun_exec_layout(const clrun_exec *e, clrun_exec_buffer_info *out, int32_t capacity,
                               int32_t *count)
{
    if (e == NULL || count == NULL)
        return clrun__fail(e ? e->ctx : NULL, CLRUN_ERROR_INVALID_ARGUMENT, "clrun_exec_layout: NULL argument");
    int32_t n = 0;
    for (int32_t b = 0; b < e->schedule.buffer_count; b++) {
        const clrun__sched_buffer *buf = &e->schedule.buffers[b];
        if (buf->is_constant || buf->is_host || buf->bytes == 0) /* host memory, or empty: not the
                                                                   device's layout */
            continue;
        if (out && n < capacity) {
            bool in_arena = e->arena_views && e->arena_views[b];
            out[n] = (clrun_exec_buffer_info){
                .tensor = clrun__exec_tensor_name(e, buf->root), .bytes = buf->bytes, .first_step = buf->first,
                .last_step = buf->last, .is_input = buf->is_input, .is_output = buf->is_output,
                .is_scratch = buf->is_scratch,
                .offset = in_arena ? e->arena_offsets[b] : CLRUN_NO_OFFSET};
        }
        n++;
    }
    *count = n;
    return CLRUN_OK;
}
