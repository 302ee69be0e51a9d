/* Running a graph: inputs bound (donated ones consumed), each step's outputs given memory, its
 * kernels enqueued behind what they wait for, buffers given back at their last use, profile and
 * statistics collected; a failed run is abandoned without changing what the caller holds. */
#include <clrun/exec.h>

#include <stdlib.h>
#include <string.h>

#include "exec/exec_internal.h"
#include "exec/exec_watch.h"

/* ---- running -------------------------------------------------------------------------------- */

/* The input of graph index i as messages name it. */
static const char *input_name(const clrun_exec *e, int32_t i)
{
    return clrun__exec_tensor_name(e, e->graph->inputs[i]);
}

/* Every input checked before anything changes, so a refused run leaves the executor, its
 * outputs and the caller's buffers as they were: the count, each buffer live and the caller's
 * (a donated one is dead, an executor's is not the caller's), its size, and no buffer given
 * twice where one of the two is donated (an output written in place would change the other).
 * Two kept inputs on one buffer are fine: both are only read. */
static clrun_status check_inputs(clrun_exec *e, const clrun_buffer *inputs, int32_t count)
{
    const clrun_graph *g = e->graph;
    if (count > 0 && inputs == NULL)
        return clrun__fail(e->ctx, CLRUN_ERROR_INVALID_ARGUMENT,
                           "clrun_exec_run: inputs is NULL for graph '%s', which takes %d",
                           g->name ? g->name : "", (int)g->input_count);
    if (count != g->input_count)
        return clrun__fail(e->ctx, CLRUN_ERROR_INVALID_ARGUMENT, "graph '%s' takes %d input%s, %d given",
                           g->name ? g->name : "", (int)g->input_count, g->input_count == 1 ? "" : "s",
                           (int)count);
    for (int32_t i = 0; i < count; i++) {
        int32_t t = g->inputs[i];
        char what[CLRUN__GRAPH_NAME_MAX + 16];
        if (clrun_tensor_empty(&g->tensors[t].type))
            continue; /* an empty input: any buffer (NULL memory, 0 bytes), never read */
        snprintf(what, sizeof what, "input '%s'", input_name(e, i));
        clrun_status status = clrun__pool_check_caller(e->ctx, &inputs[i], what);
        if (status != CLRUN_OK)
            return status;
        uint64_t bytes = clrun_tensor_bytes(&g->tensors[t].type);
        if (inputs[i].size != bytes) {
            char type[CLRUN__TYPE_TEXT], asked[CLRUN__BYTES_TEXT], got[CLRUN__BYTES_TEXT];
            return clrun__fail(e->ctx, CLRUN_ERROR_INVALID_ARGUMENT,
                               "input '%s' needs a buffer of %s (%s), got %s", input_name(e, i),
                               clrun__format_bytes(bytes, asked, sizeof asked),
                               clrun__type_format(&g->tensors[t].type, type, sizeof type),
                               clrun__format_bytes(inputs[i].size, got, sizeof got));
        }
        for (int32_t j = 0; j < i; j++)
            if (inputs[j].slot == inputs[i].slot && inputs[j].generation == inputs[i].generation &&
                (g->tensors[t].donated || g->tensors[g->inputs[j]].donated))
                return clrun__fail(e->ctx, CLRUN_ERROR_INVALID_ARGUMENT,
                                   "inputs '%s' and '%s' are the same buffer, and one of them is "
                                   "donated: give each its own buffer", input_name(e, j),
                                   input_name(e, i));
    }
    return CLRUN_OK;
}

/* Binds checked inputs to their schedule buffers; a donated one is adopted by the executor, so
 * that the caller's handle is dead to every call from here on. */
static clrun_status bind_inputs(clrun_exec *e, const clrun_buffer *inputs, int32_t count, uint64_t *held)
{
    const clrun_graph *g = e->graph;
    for (int32_t i = 0; i < count; i++) {
        int32_t t = g->inputs[i];
        if (clrun_tensor_empty(&g->tensors[t].type))
            continue; /* no memory: nothing to hold */
        buffer_state *s = &e->buffers[e->schedule.buffer_of[t]];
        clrun_buffer block = inputs[i];
        if (g->tensors[t].donated) {
            char as[2 * CLRUN__GRAPH_NAME_MAX + 32];
            snprintf(as, sizeof as, "input '%s' of graph '%s'", input_name(e, i),
                     g->name ? g->name : "");
            clrun_status status = clrun__pool_adopt(e->ctx, &inputs[i], as, &block);
            if (status != CLRUN_OK)
                return status;
        }
        clrun__exec_hold_block(s, &block);
        s->live = true;
        *held += s->block.size;
    }
    return e->options.mode == CLRUN_EXEC_PLANNED ? clrun__exec_bind_regions(e) : CLRUN_OK;
}

/* The buffers node `step` writes: its outputs' (written[0..output_count)), then its scratch. */
static int written_buffers(const clrun_exec *e, int32_t step, const clrun__node *node, int32_t *written)
{
    const clrun__schedule *s = &e->schedule;
    int n = 0;
    for (int o = 0; o < node->output_count; o++)
        written[n++] = s->buffer_of[node->outputs[o]];
    for (int32_t i = s->scratch_start[step]; i < s->scratch_start[step + 1]; i++)
        written[n++] = s->scratch_list[i];
    return n;
}

/* Out-of-order: what node `step` must wait for, given the buffers it writes. Caller frees
 * *list. */
static clrun_status gather_waits(clrun_exec *e, const clrun__node *node, const int32_t *written,
                                 int written_count, cl_event **list, cl_uint *count)
{
    *list = NULL;
    *count = 0;
    if (!e->ctx->out_of_order)
        return CLRUN_OK;
    /* Each written buffer may overlap every pending range; each input brings its users' events,
     * and so does each written buffer (for a new pool block: the earlier owners of its bytes). */
    size_t capacity = (size_t)e->pending_count * (size_t)written_count + 8;
    for (int k = 0; k < node->input_count; k++)
        if (e->graph->tensors[node->inputs[k]].kind != CLRUN__TENSOR_CONSTANT)
            capacity += (size_t)e->buffers[e->schedule.buffer_of[node->inputs[k]]].event_count;
    for (int w = 0; w < written_count; w++)
        capacity += (size_t)e->buffers[written[w]].event_count;
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
    /* Outputs and scratch in ranges freed earlier in this run: the old owner's users. */
    for (int w = 0; w < written_count; w++) {
        const buffer_state *s = &e->buffers[written[w]];
        for (int32_t i = 0; i < s->event_count; i++)
            waits[(*count)++] = s->events[i];
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

/* Whether guarded `node` runs in this run: its guard read back once per run (the queue
 * finished first, so that its writer has run), then remembered. */
static clrun_status guard_passes(clrun_exec *e, const clrun__node *node, bool *runs)
{
    int32_t t = node->guard;
    if (e->guard_values[t] < 0) {
        const clrun__tensor *g = &e->graph->tensors[t];
        bool known = g->kind == CLRUN__TENSOR_CONSTANT || e->buffers[e->schedule.buffer_of[t]].live;
        cl_mem mem = clrun__exec_tensor_mem(e, t);
        if (!known || mem == NULL)
            return clrun__fail(e->ctx, CLRUN_ERROR_INVALID_GRAPH,
                               "node '%s' (%s) is guarded by '%s', which is not computed before it",
                               clrun__exec_tensor_name(e, node->outputs[0]), node->op->name,
                               clrun__exec_tensor_name(e, t));
        cl_int error = clrun__cl.Finish(e->ctx->queue);
        unsigned char value = 0;
        if (error == CL_SUCCESS)
            error = clrun__cl.EnqueueReadBuffer(e->ctx->queue, mem, CL_TRUE, 0, 1, &value, 0, NULL, NULL);
        if (error != CL_SUCCESS)
            return clrun__fail_cl(e->ctx, error, "clEnqueueReadBuffer", "reading the guard '%s'",
                                  clrun__exec_tensor_name(e, t));
        e->guard_values[t] = value != 0;
        clrun__log(CLRUN_LOG_DEBUG, "guard '%s' is %s", clrun__exec_tensor_name(e, t),
                   value ? "true" : "false");
    }
    *runs = (e->guard_values[t] != 0) != node->guard_negate;
    return CLRUN_OK;
}

static clrun_status run_step(clrun_exec *e, int32_t step, uint64_t *held, uint64_t *peak, bool *ran)
{
    const clrun__schedule *s = &e->schedule;
    int32_t node_index = s->order[step];
    const clrun__node *node = &e->graph->nodes[node_index];
    cl_mem in_mems[64], out_mems[16 + CLRUN__SCRATCH_MAX];
    int32_t written[16 + CLRUN__SCRATCH_MAX];
    if (node->input_count > 64 || node->output_count > 16)
        return clrun__fail(e->ctx, CLRUN_ERROR_INVALID_GRAPH,
                           "node '%s' (%s) has %d inputs and %d outputs; the executor takes at most 64 and 16",
                           clrun__exec_tensor_name(e, node->outputs[0]), node->op->name, node->input_count, node->output_count);
    bool arena = e->options.mode == CLRUN_EXEC_PLANNED; /* held all along: counted at bind */
    /* Outputs (unless in place), then the node's scratch, after them in out_mems as the kernels
     * take it. */
    int written_count = written_buffers(e, step, node, written);
    for (int w = 0; w < written_count; w++) {
        int32_t b = written[w];
        bool in_place = w < node->output_count && s->alias_of[node->outputs[w]] >= 0;
        if (!in_place && !e->buffers[b].live) {
            uint64_t added = 0;
            clrun_status status = clrun__exec_take_memory(e, b, &added);
            int32_t whole = clrun__exec_assembled(e, b);
            if (status == CLRUN_OK && whole >= 0) /* its concat's inputs are written there */
                status = clrun__exec_take_parts(e, whole);
            if (status != CLRUN_OK)
                return status;
            if (!arena && !s->buffers[b].is_host)
                *held += added; /* a group's bytes, all at its first member */
        }
        out_mems[w] = w < node->output_count ? clrun__exec_tensor_mem(e, node->outputs[w])
                                             : e->buffers[b].mem;
    }
    if (*held > *peak)
        *peak = *held;
    e->spans[step].bytes_in_use = *held; /* the most this step holds: its outputs and inputs */
    for (int k = 0; k < node->input_count; k++)
        in_mems[k] = clrun__exec_tensor_mem(e, node->inputs[k]);

    /* A node whose guard fails is skipped: its outputs keep their memory (the schedule is the
     * same either way) but nothing is written; only nodes under the same guard read them. */
    bool runs = true;
    clrun_status status = node->guarded ? guard_passes(e, node, &runs) : CLRUN_OK;
    if (status != CLRUN_OK)
        return status;
    *ran = runs;
    clrun__log(CLRUN_LOG_DEBUG, "step %d: '%s' (%s)%s", (int)step,
               clrun__exec_tensor_name(e, node->outputs[0]), node->op->name, runs ? "" : " skipped");
    cl_event *waits = NULL;
    cl_uint wait_count = 0;
    /* in order, with offload copies on their own queue: a copy goes there, and a kernel waits
     * for those in flight whose device buffer it touches (exec_offload.c) */
    bool beside = runs && clrun__exec_overlaps_copies(e);
    bool copy = beside && (strcmp(node->op->name, "offload") == 0 || strcmp(node->op->name, "reload") == 0);
    if (runs && !copy)
        status = beside ? clrun__exec_copy_waits(e, node, written, written_count, &waits, &wait_count)
                        : gather_waits(e, node, written, written_count, &waits, &wait_count);
    if (status != CLRUN_OK)
        return status;
    bool want_event = e->options.profile || e->ctx->out_of_order;
    cl_event done = NULL;
    /* a concat assembled in place: its inputs were written where it would copy them (all of
     * them: nothing to run; some: its kernels copy the others, ops_layout.c) */
    int32_t assembled = s->part_of && s->part_of[node->outputs[0]] == node->outputs[0]
                            ? node->outputs[0] : -1;
    bool whole = assembled >= 0;
    for (int k = 0; whole && k < node->input_count; k++)
        whole = s->part_of[node->inputs[k]] == assembled;
    if (copy) {
        status = clrun__exec_copy_step(e, node, in_mems, out_mems, &done);
    } else if (runs && whole) {
        cl_int error = want_event ? clrun__cl.EnqueueMarkerWithWaitList(e->ctx->queue, wait_count,
                                                                        waits, &done)
                                  : CL_SUCCESS;
        if (error != CL_SUCCESS)
            status = clrun__fail_cl(e->ctx, error, "clEnqueueMarkerWithWaitList",
                                    "the concat '%s', assembled in place",
                                    clrun__exec_tensor_name(e, node->outputs[0]));
    } else if (runs) {
        status = e->kernels[node_index]->enqueue(e->ctx, e->node_states[node_index],
                                                 &e->calls[node_index], in_mems, out_mems, wait_count,
                                                 waits, want_event ? &done : NULL);
    }
    if (assembled >= 0)
        clrun__exec_drop_parts(e, assembled);
    for (cl_uint i = 0; beside && i < wait_count; i++) /* the flights' events, now waited for */
        clrun__cl.ReleaseEvent(waits[i]);
    free(waits);
    if (status != CLRUN_OK)
        return status;
    if (e->ctx->out_of_order && runs) {
        for (int k = 0; k < node->input_count; k++)
            if (e->graph->tensors[node->inputs[k]].kind != CLRUN__TENSOR_CONSTANT &&
                !clrun__exec_add_event(&e->buffers[s->buffer_of[node->inputs[k]]], done))
                status = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        for (int w = 0; w < written_count; w++)
            if (!clrun__exec_add_event(&e->buffers[written[w]], done))
                status = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    if (status == CLRUN_OK && runs && e->loops && clrun__op_is_loop_end(node->op)) {
        status = clrun__exec_loop_before_end(e, step);
        if (status != CLRUN_OK) {
            if (done)
                clrun__cl.ReleaseEvent(done);
            return status;
        }
    }
    if (e->options.profile) {
        if (e->step_events[step]) /* a loop's body runs its steps again */
            clrun__cl.ReleaseEvent(e->step_events[step]);
        e->step_events[step] = done;
    } else if (done) {
        clrun__cl.ReleaseEvent(done);
    }
    if (status != CLRUN_OK)
        return clrun__fail(e->ctx, status, "out of host memory recording events");
    for (int32_t i = s->release_start[step]; i < s->release_start[step + 1]; i++) {
        int32_t b = s->release_list[i];
        if (!e->buffers[b].live || (e->loop_keep >= 0 && s->buffers[b].first <= e->loop_keep))
            continue;
        /* In planned mode only a donated input's own block goes (unless it hosts buffers). */
        if ((!arena || s->buffers[b].is_input) && !e->buffers[b].hosting && !s->buffers[b].is_host)
            *held -= s->buffers[b].bytes;
        if (e->flight_count > 0 && e->options.mode == CLRUN_EXEC_POOLED)
            status = clrun__exec_copy_before_free(e, b);
        if (status == CLRUN_OK)
            status = clrun__exec_give_back(e, b);
        if (status != CLRUN_OK)
            return status;
    }
    e->spans[step].bytes_after = *held;
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
        e->spans[step].name = clrun__exec_tensor_name(e, node->outputs[0]);
        e->spans[step].start_ns = start;
        e->spans[step].end_ns = end;
    }
    for (int32_t step = 0; step < e->schedule.steps; step++) {
        e->spans[step].start_ns = e->spans[step].start_ns >= origin ? e->spans[step].start_ns - origin : 0;
        e->spans[step].end_ns = e->spans[step].end_ns >= origin ? e->spans[step].end_ns - origin : 0;
    }
    e->span_count = e->schedule.steps;
    e->profile_origin = origin;
}

/* After a failed run: give everything of this run back (donated inputs included: they were
 * consumed), so the executor can run again. */
static void abandon_run(clrun_exec *e)
{
    clFinish(e->ctx->queue); /* not counted: cleanup must not be made to fail */
    clrun__exec_copies_finish(e);
    for (int32_t b = 0; b < e->schedule.buffer_count; b++) {
        buffer_state *s = &e->buffers[b];
        bool callers = e->schedule.buffers[b].is_input && !e->graph->tensors[e->schedule.buffers[b].root].donated;
        int32_t whole = clrun__exec_assembled(e, b);
        if (whole >= 0)
            clrun__exec_drop_parts(e, whole);
        if (s->live && !callers)
            clrun__exec_give_back(e, b);
        clrun__exec_drop_events(s);
        s->live = false;
    }
    for (int32_t i = 0; i < e->schedule.steps; i++)
        if (e->step_events[i]) {
            clrun__cl.ReleaseEvent(e->step_events[i]);
            e->step_events[i] = NULL;
        }
    clrun__exec_release_regions(e);
    clrun__exec_drop_pending(e);
}

/* Inputs the caller keeps are not the executor's: forget them once the run is over (keeping
 * the memory of one that is also a graph output, or whose view is, so it can be read back). */
static void unbind_caller_inputs(clrun_exec *e)
{
    for (int32_t i = 0; i < e->graph->input_count; i++) {
        int32_t t = e->graph->inputs[i];
        if (e->graph->tensors[t].donated)
            continue;
        int32_t b = e->schedule.buffer_of[t];
        buffer_state *s = &e->buffers[b];
        clrun__exec_drop_events(s);
        s->live = false;
        if (!e->schedule.buffers[b].is_output) /* the input, or a view of it, is an output */
            s->mem = NULL;
    }
}

/* Figures of a finished run. Pooled figures come from the pool's own statistics, not from the
 * executor's bookkeeping: what was really held and reserved. */
static void record_stats(clrun_exec *e, const clrun_memory_stats *before, uint64_t input_bytes,
                         uint64_t own_peak, double wall)
{
    clrun_memory_stats after;
    clrun_memory_stats_get(e->ctx, &after);
    clrun_exec_stats *st = &e->stats;
    st->wall_ms = wall;
    st->driver_allocs = after.driver_allocs - before->driver_allocs; /* naive buffers included */
    switch (e->options.mode) {
    case CLRUN_EXEC_POOLED:
        st->peak_bytes = after.in_use_peak - before->in_use + input_bytes;
        st->reserved_bytes = after.reserved_peak;
        break;
    case CLRUN_EXEC_NAIVE: /* the pool counts naive buffers and the arena in what it reserves */
        st->peak_bytes = own_peak;
        st->reserved_bytes = after.reserved_peak;
        break;
    case CLRUN_EXEC_PLANNED:
        st->peak_bytes = own_peak; /* the arena and the inputs, as long as each is held */
        st->reserved_bytes = after.reserved_peak;
        break;
    case CLRUN_EXEC_CONTEXT: /* resolved at creation */
        break;
    }
}

static clrun_status run_locked(clrun_exec *e, const clrun_buffer *inputs, int32_t input_count,
                               const clrun__exec_watch *w);

/* Once the run's commands are complete: what the nodes' kernels found wrong in their inputs (an
 * index outside its axis). Every node is asked, so that each forgets what it found; in reverse
 * order, so that the message left is the first failing node's. */
static clrun_status check_nodes(clrun_exec *e)
{
    clrun_status first = CLRUN_OK;
    for (int32_t step = e->schedule.steps; step-- > 0;) {
        int32_t n = e->schedule.order[step];
        const clrun__op_kernels *k = e->kernels[n];
        if (k == NULL || k->check == NULL)
            continue;
        const clrun__node *node = &e->graph->nodes[n];
        clrun_status s = k->check(e->ctx, e->node_states[n], clrun__exec_tensor_name(e, node->outputs[0]));
        if (s != CLRUN_OK)
            first = s;
    }
    return first;
}

clrun_status clrun_exec_run(clrun_exec *e, const clrun_buffer *inputs, int32_t input_count)
{
    if (e == NULL)
        return clrun__fail(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "clrun_exec_run: NULL executor");
    pthread_mutex_lock(&e->lock);
    clrun_status status = run_locked(e, inputs, input_count, NULL);
    pthread_mutex_unlock(&e->lock);
    return status;
}

/* ---- watched runs (exec_watch.h) ------------------------------------------------------------ */

int32_t clrun__exec_output_step(const clrun_exec *e, int32_t i)
{
    if (e == NULL || i < 0 || i >= e->graph->output_count)
        return -1;
    int32_t b = e->schedule.buffer_of[e->graph->outputs[i]], last = -1;
    int32_t written[16 + CLRUN__SCRATCH_MAX];
    for (int32_t step = 0; step < e->schedule.steps; step++) {
        const clrun__node *node = &e->graph->nodes[e->schedule.order[step]];
        if (node->output_count > 16)
            continue; /* refused by the run */
        int n = written_buffers(e, step, node, written);
        for (int w = 0; w < n; w++)
            if (written[w] == b)
                last = step;
    }
    return last;
}

uint64_t clrun__exec_profile_origin(const clrun_exec *e)
{
    return e && e->span_count ? e->profile_origin : 0;
}

clrun_status clrun__exec_run_watched(clrun_exec *e, const clrun_buffer *inputs,
                                     int32_t input_count, const clrun__exec_watch *w)
{
    if (e == NULL || w == NULL || (w->count > 0 && (w->outputs == NULL || w->host == NULL)))
        return clrun__fail(e ? e->ctx : NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                           "clrun__exec_run_watched: NULL argument");
    for (int32_t k = 0; k < w->count; k++)
        if (w->outputs[k] < 0 || w->outputs[k] >= e->graph->output_count)
            return clrun__fail(e->ctx, CLRUN_ERROR_INVALID_ARGUMENT, "output %d does not exist "
                               "(graph has %d)", (int)w->outputs[k], (int)e->graph->output_count);
    pthread_mutex_lock(&e->lock);
    clrun_status status = run_locked(e, inputs, input_count, w);
    pthread_mutex_unlock(&e->lock);
    return status;
}

/* Per watched output k, the group read in one piece with it (every member watched, into host
 * memory laid out as the group is), or -1: gk[k]. Per group, the step after which it is read
 * (its members' last) or -2 when it is not read whole: gstep[g]; and where to: ghost[g]. */
static void plan_group_reads(const clrun_exec *e, const clrun__exec_watch *w, const int32_t *steps,
                             int32_t *gk, int32_t *gstep, char **ghost)
{
    const clrun__buffer_groups *gr = &e->out_groups;
    for (int32_t k = 0; k < w->count; k++)
        gk[k] = -1;
    for (int32_t g = 0; g < gr->count; g++) {
        gstep[g] = -1;
        ghost[g] = NULL;
        if (!w->whole_groups)
            gstep[g] = -2; /* each member read on its own */
        for (int32_t m = gr->start[g]; m < gr->start[g + 1] && gstep[g] != -2; m++) {
            int32_t k = 0;
            while (k < w->count && w->outputs[k] != e->group_outputs[m])
                k++;
            /* the first member (offset 0) is where the group goes; each other one must lie at
             * its offset from there (compared as addresses: no pointer outside the caller's) */
            bool first = m == gr->start[g];
            uintptr_t at = k < w->count ? (uintptr_t)w->host[k] : 0;
            if (at == 0 || (!first && at - gr->offset[m] != (uintptr_t)ghost[g])) {
                gstep[g] = -2;
                break;
            }
            if (first)
                ghost[g] = w->host[k];
            gstep[g] = steps[k] > gstep[g] ? steps[k] : gstep[g];
        }
        for (int32_t m = gr->start[g]; gstep[g] != -2 && m < gr->start[g + 1]; m++)
            for (int32_t k = 0; k < w->count; k++)
                if (w->outputs[k] == e->group_outputs[m])
                    gk[k] = g;
    }
}

/* The watched outputs that step `step` completes (-1: those no step writes), read to host
 * memory behind it, and the groups read whole whose last member it completes: events[k] gets
 * each read's event. */
static clrun_status read_watched(clrun_exec *e, const clrun__exec_watch *w, const int32_t *steps,
                                 const int32_t *gk, const int32_t *gstep, char *const *ghost,
                                 int32_t step, cl_event *events)
{
    bool flush = false;
    for (int32_t k = 0; k < w->count; k++) {
        if (steps[k] != step || gk[k] >= 0)
            continue;
        int32_t t = e->graph->outputs[w->outputs[k]];
        const buffer_state *s = &e->buffers[e->schedule.buffer_of[t]];
        cl_mem mem = clrun__exec_tensor_mem(e, t);
        if (mem == NULL)
            return clrun__fail(e->ctx, CLRUN_ERROR_INVALID_GRAPH, "output '%s' has no memory "
                               "after its last writer", clrun__exec_tensor_name(e, t));
        /* in order: behind everything enqueued; out of order: behind the buffer's users */
        bool ooo = e->ctx->out_of_order && s->event_count > 0;
        cl_int error = clrun__cl.EnqueueReadBuffer(
            e->ctx->queue, mem, CL_FALSE, 0, (size_t)clrun_tensor_bytes(&e->graph->tensors[t].type),
            w->host[k], ooo ? (cl_uint)s->event_count : 0, ooo ? s->events : NULL, &events[k]);
        if (error != CL_SUCCESS)
            return clrun__fail_cl(e->ctx, error, "clEnqueueReadBuffer", "output '%s' during the "
                                  "run", clrun__exec_tensor_name(e, t));
        flush = true;
    }
    for (int32_t g = 0; g < e->out_groups.count; g++) { /* in order only: no events to wait */
        if (gstep[g] != step)
            continue;
        uint64_t offset;
        cl_mem mem = clrun__exec_group_mem(e, g, &offset);
        cl_event read = NULL;
        cl_int error = mem ? clrun__cl.EnqueueReadBuffer(e->ctx->queue, mem, CL_FALSE,
                                                         (size_t)offset,
                                                         (size_t)e->out_groups.bytes[g], ghost[g],
                                                         0, NULL, &read)
                           : CL_INVALID_MEM_OBJECT;
        int32_t first = e->graph->outputs[e->group_outputs[e->out_groups.start[g]]];
        if (error != CL_SUCCESS)
            return clrun__fail_cl(e->ctx, error, "clEnqueueReadBuffer", "outputs from '%s' on, "
                                  "in one piece, during the run",
                                  clrun__exec_tensor_name(e, first));
        bool held = false;
        for (int32_t k = 0; k < w->count; k++)
            if (gk[k] == g) { /* one event, held once per member */
                if (held)
                    clrun__cl.RetainEvent(read);
                events[k] = read;
                held = true;
            }
        flush = true;
    }
    if (flush && !e->ctx->out_of_order && step != e->schedule.steps - 1)
        clrun__cl.Flush(e->ctx->queue); /* what is enqueued so far starts now */
    return CLRUN_OK;
}

static clrun_status run_locked(clrun_exec *e, const clrun_buffer *inputs, int32_t input_count,
                               const clrun__exec_watch *w)
{
    clrun_status status = check_inputs(e, inputs, input_count);
    if (status != CLRUN_OK)
        return status;
    clrun__exec_release_outputs(e);
    clrun_memory_stats before;
    status = clrun_memory_stats_get(e->ctx, &before);
    if (status != CLRUN_OK)
        return status;
    clrun_memory_reset_peaks(e->ctx);
    uint64_t held = 0, peak = 0;
    if (e->guard_values)
        memset(e->guard_values, -1, (size_t)e->graph->tensor_count);
    e->loop_keep = -1;
    double start = (clrun__now() * 1e3);
    status = bind_inputs(e, inputs, input_count, &held);
    uint64_t held_at_start = held;
    if (e->options.mode == CLRUN_EXEC_PLANNED)
        held += e->arena_bytes;
    peak = held;
    int32_t watched = w ? w->count : 0;
    int32_t *own_steps = watched && w->steps == NULL ? malloc(sizeof *own_steps * (size_t)watched) : NULL;
    const int32_t *steps = watched && w->steps ? w->steps : own_steps;
    cl_event *events = watched ? calloc((size_t)watched, sizeof *events) : NULL;
    int32_t groups = watched ? e->out_groups.count : 0;
    int32_t *gk = watched ? calloc((size_t)watched + (size_t)groups + 1, sizeof *gk) : NULL;
    char **ghost = watched ? calloc((size_t)groups + 1, sizeof *ghost) : NULL;
    if (watched && (steps == NULL || events == NULL || gk == NULL || ghost == NULL) &&
        status == CLRUN_OK)
        status = clrun__fail(e->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (int32_t k = 0; own_steps && k < watched && status == CLRUN_OK; k++)
        own_steps[k] = clrun__exec_output_step(e, w->outputs[k]);
    int32_t *gstep = gk ? gk + watched : NULL;
    if (watched && status == CLRUN_OK)
        plan_group_reads(e, w, steps, gk, gstep, ghost);
    if (watched && status == CLRUN_OK)
        status = read_watched(e, w, steps, gk, gstep, ghost, -1, events);
    for (int32_t step = 0; status == CLRUN_OK && step < e->schedule.steps; step++) {
        bool ran = true;
        int32_t done_step = step; /* a loop's step may move `step` (back, or past the body) */
        status = run_step(e, step, &held, &peak, &ran);
        if (watched && status == CLRUN_OK)
            status = read_watched(e, w, steps, gk, gstep, ghost, done_step, events);
        if (status == CLRUN_OK && w && w->wait)
            status = w->wait(w->user, events, false);
        if (status == CLRUN_OK && e->loops && e->loops[step].partner >= 0)
            status = clrun__exec_loop_after(e, &step, ran);
    }
    if (status == CLRUN_OK && w && w->wait) {
        clrun__cl.Flush(e->ctx->queue);
        status = w->wait(w->user, events, true);
    }
    if (watched && status == CLRUN_OK) { /* the reads are the caller's now */
        cl_int error = clrun__cl.WaitForEvents((cl_uint)watched, events);
        if (error != CL_SUCCESS)
            status = clrun__fail_cl(e->ctx, error, "clWaitForEvents", "reading outputs of graph "
                                    "'%s' during its run", e->graph->name);
    }
    if (status != CLRUN_OK && events)
        clrun__cl.Finish(e->ctx->queue); /* no read may land after the run is given up */
    for (int32_t k = 0; events && k < watched; k++)
        if (events[k])
            clrun__cl.ReleaseEvent(events[k]);
    free(own_steps);
    free(events);
    free(gk);
    free(ghost);
    if (status == CLRUN_OK) {
        cl_int error = clrun__cl.Finish(e->ctx->queue);
        if (error != CL_SUCCESS)
            status = clrun__fail_cl(e->ctx, error, "clFinish", "end of run of graph '%s'", e->graph->name);
    }
    if (status == CLRUN_OK)
        status = clrun__exec_copies_finish(e);
    if (status == CLRUN_OK)
        status = check_nodes(e);
    double wall = (clrun__now() * 1e3) - start;
    if (status != CLRUN_OK) {
        abandon_run(e);
        return status;
    }
    clrun__exec_drop_pending(e);
    unbind_caller_inputs(e);
    if (e->options.profile)
        collect_profile(e);
    e->have_outputs = true;

    record_stats(e, &before, held_at_start, peak, wall);
    return CLRUN_OK;
}

