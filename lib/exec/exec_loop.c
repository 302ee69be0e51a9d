/* Loops run at run time (graph/infer_loop.c): the steps between a `loop_begin` and its
 * `loop_end` run once per iteration. At loop_begin the trip count M and the condition are read
 * back (once per run of the loop); at loop_end the body's condition is read back, each carried
 * result is copied into the buffer the body reads, and the run goes back to the step after
 * loop_begin while an iteration is left. The buffers made inside the body are taken and given
 * back in every iteration like any other (the same offsets in planned mode: its memory reused
 * across iterations); those from before the loop that the body reads are loop_end's inputs, and
 * are kept while it goes back. On an in-order queue an iteration waits for the previous one only
 * where the body's condition is read back (not when it passes the incoming one through). */
#include <stdlib.h>
#include <string.h>

#include "exec/exec_internal.h"

/* The most iterations one run of a Loop may make. */
#define MAX_ITERATIONS ((int64_t)1 << 20)

static const char *loop_label(const clrun_exec *e, const clrun__node *node)
{
    return node->model_name ? node->model_name : clrun__exec_tensor_name(e, node->outputs[0]);
}

/* Only the body runs again: a node of the graph outside it, scheduled between the loop's steps,
 * would run once per iteration over inputs whose memory the schedule may have handed on. A body
 * node is guarded by what the body computes (the loop's flag, an If's condition inside it) or
 * reads what the loop's loop_begin or another body node writes. */
static clrun_status body_only(clrun_exec *e, int32_t begin, int32_t end)
{
    const clrun__schedule *s = &e->schedule;
    bool *inside = calloc((size_t)e->graph->tensor_count + 1, sizeof *inside);
    if (inside == NULL)
        return clrun__fail(e->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory creating an executor");
    const clrun__node *first = &e->graph->nodes[s->order[begin]];
    for (int k = 0; k < first->output_count; k++)
        inside[first->outputs[k]] = true;
    clrun_status status = CLRUN_OK;
    for (int32_t step = begin + 1; step < end && status == CLRUN_OK; step++) {
        const clrun__node *node = &e->graph->nodes[s->order[step]];
        bool body = node->guarded && inside[node->guard];
        for (int k = 0; k < node->input_count && !body; k++)
            body = inside[node->inputs[k]];
        for (int k = 0; k < node->output_count && body; k++)
            inside[node->outputs[k]] = true;
        if (!body)
            status = clrun__fail(e->ctx, CLRUN_ERROR_INVALID_GRAPH, "loop_end '%s': node '%s', which is "
                                 "not in the loop's body, is scheduled inside it",
                                 clrun__exec_tensor_name(e, e->graph->nodes[s->order[end]].outputs[0]),
                                 clrun__exec_tensor_name(e, node->outputs[0]));
    }
    free(inside);
    return status;
}

static bool op_named(const clrun__node *node, const char *name)
{
    return node->op && strcmp(node->op->name, name) == 0;
}

/* scan_put writes its input 0 in place, which no other pass knows of (not fusion, not the
 * schedule's reuse of memory): it runs only where nothing else can see the writes, as an ONNX
 * Scan's import makes it. Its stacked tensor comes from scan_stack, is no graph output, and is
 * read only by scan_puts (as their input 0), loop_end and loop_carry; its token is read by a
 * loop_end, so that the writes are a loop's body. Anything else is refused by name. */
static clrun_status scan_puts_checked(clrun_exec *e)
{
    const clrun_graph *g = e->graph;
    for (int32_t n = 0; n < g->node_count; n++) {
        const clrun__node *put = &g->nodes[n];
        if (!op_named(put, "scan_put"))
            continue;
        int32_t acc = put->inputs[0], p = g->tensors[acc].producer;
        const char *name = clrun__exec_tensor_name(e, put->outputs[0]);
        const char *acc_name = clrun__exec_tensor_name(e, acc);
        if (p < 0 || !op_named(&g->nodes[p], "scan_stack"))
            return clrun__fail(e->ctx, CLRUN_ERROR_INVALID_GRAPH, "scan_put '%s': its input 0 '%s' is not a "
                               "scan_stack's output (scan_put writes into it)", name, acc_name);
        for (int32_t k = 0; k < g->output_count; k++)
            if (g->outputs[k] == acc)
                return clrun__fail(e->ctx, CLRUN_ERROR_INVALID_GRAPH, "scan_put '%s': the stacked tensor '%s' "
                                   "it writes into is a graph output (read it through loop_carry)", name,
                                   acc_name);
        bool token_read = false;
        for (int32_t m = 0; m < g->node_count; m++) {
            const clrun__node *reader = &g->nodes[m];
            bool end = clrun__op_is_loop_end(reader->op);
            for (int k = 0; k < reader->input_count; k++) {
                token_read = token_read || (end && reader->inputs[k] == put->outputs[0]);
                if (reader->inputs[k] != acc || end || op_named(reader, "loop_carry") ||
                    (k == 0 && op_named(reader, "scan_put")))
                    continue;
                return clrun__fail(e->ctx, CLRUN_ERROR_INVALID_GRAPH, "scan_put '%s': the stacked tensor '%s' "
                                   "it writes into is read by '%s' (%s): only scan_put, loop_end and "
                                   "loop_carry may read it", name, acc_name,
                                   clrun__exec_tensor_name(e, reader->outputs[0]),
                                   reader->op ? reader->op->name : "?");
            }
        }
        if (!token_read)
            return clrun__fail(e->ctx, CLRUN_ERROR_INVALID_GRAPH, "scan_put '%s': no loop_end reads its token, "
                               "so its writes are no loop's body", name);
    }
    return CLRUN_OK;
}

clrun_status clrun__exec_prepare_loops(clrun_exec *e)
{
    clrun_status checked = scan_puts_checked(e);
    if (checked != CLRUN_OK)
        return checked;
    const clrun__schedule *s = &e->schedule;
    e->loop_keep = -1;
    bool any = false;
    for (int32_t n = 0; n < e->graph->node_count && !any; n++)
        any = clrun__op_is_loop_end(e->graph->nodes[n].op);
    if (!any)
        return CLRUN_OK;
    e->loops = calloc((size_t)s->steps + 1, sizeof *e->loops);
    if (e->loops == NULL)
        return clrun__fail(e->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory creating an executor");
    for (int32_t step = 0; step < s->steps; step++)
        e->loops[step].partner = -1;
    for (int32_t step = 0; step < s->steps; step++) {
        const clrun__node *end = &e->graph->nodes[s->order[step]];
        if (!clrun__op_is_loop_end(end->op))
            continue;
        int32_t p = e->graph->tensors[end->inputs[0]].producer;
        int32_t begin = p >= 0 ? s->step_of_node[p] : -1;
        if (begin < 0 || begin >= step || !clrun__op_is_loop_begin(e->graph->nodes[p].op) ||
            end->inputs[1] != e->graph->nodes[p].outputs[1] || e->loops[begin].partner >= 0)
            return clrun__fail(e->ctx, CLRUN_ERROR_INVALID_GRAPH, "loop_end '%s': its inputs 0 and 1 are not "
                               "the outputs of a loop_begin of its own before it",
                               clrun__exec_tensor_name(e, end->outputs[0]));
        e->loops[begin].partner = step;
        e->loops[step].partner = begin;
        clrun_status st = body_only(e, begin, step);
        if (st != CLRUN_OK)
            return st;
    }
    for (int32_t step = 0; step < s->steps; step++)
        if (clrun__op_is_loop_begin(e->graph->nodes[s->order[step]].op) && e->loops[step].partner < 0)
            return clrun__fail(e->ctx, CLRUN_ERROR_INVALID_GRAPH, "loop_begin '%s' has no loop_end",
                               clrun__exec_tensor_name(e, e->graph->nodes[s->order[step]].outputs[0]));
    return CLRUN_OK;
}

static clrun_status read_back(clrun_exec *e, int32_t t, void *host, size_t bytes, const char *what,
                              const clrun__node *node)
{
    cl_mem mem = clrun__exec_tensor_mem(e, t);
    if (mem == NULL)
        return clrun__fail(e->ctx, CLRUN_ERROR_INVALID_GRAPH, "Loop '%s': its %s '%s' has no memory",
                           loop_label(e, node), what, clrun__exec_tensor_name(e, t));
    /* a blocking read on an in-order queue waits for the kernels before it; an out-of-order
     * queue's kernels carry no events to wait on */
    cl_int error = e->ctx->out_of_order ? clrun__cl.Finish(e->ctx->queue) : CL_SUCCESS;
    if (error == CL_SUCCESS)
        error = clrun__cl.EnqueueReadBuffer(e->ctx->queue, mem, CL_TRUE, 0, bytes, host, 0, NULL, NULL);
    if (error != CL_SUCCESS)
        return clrun__fail_cl(e->ctx, error, "clEnqueueReadBuffer", "reading the %s '%s' of Loop '%s'", what,
                              clrun__exec_tensor_name(e, t), loop_label(e, node));
    return CLRUN_OK;
}

static clrun_status write_to(clrun_exec *e, int32_t t, const void *host, size_t bytes, const clrun__node *node)
{
    cl_mem mem = clrun__exec_tensor_mem(e, t);
    cl_int error = mem ? clrun__cl.EnqueueWriteBuffer(e->ctx->queue, mem, CL_TRUE, 0, bytes, host, 0, NULL, NULL)
                       : CL_INVALID_MEM_OBJECT;
    if (error != CL_SUCCESS)
        return clrun__fail_cl(e->ctx, error, "clEnqueueWriteBuffer", "writing '%s' of Loop '%s'",
                              clrun__exec_tensor_name(e, t), loop_label(e, node));
    return CLRUN_OK;
}

/* Fills tensor t with the pattern (copied when enqueued: nothing waits for it on an in-order
 * queue; an out-of-order one is finished, as nothing records the fill's event). */
static clrun_status fill(clrun_exec *e, int32_t t, const void *pattern, size_t bytes, const clrun__node *node)
{
    cl_mem mem = clrun__exec_tensor_mem(e, t);
    cl_int error = mem ? clrun__cl.EnqueueFillBuffer(e->ctx->queue, mem, pattern, bytes, 0, bytes, 0, NULL, NULL)
                       : CL_INVALID_MEM_OBJECT;
    if (error == CL_SUCCESS && e->ctx->out_of_order)
        error = clrun__cl.Finish(e->ctx->queue);
    if (error != CL_SUCCESS)
        return clrun__fail_cl(e->ctx, error, "clEnqueueFillBuffer", "writing '%s' of Loop '%s'",
                              clrun__exec_tensor_name(e, t), loop_label(e, node));
    return CLRUN_OK;
}

/* The next iteration's number into the first output of loop_begin (at step `at`), true into its
 * second (the body's guard, known without reading it back). The guards the body computes are read
 * again; those from before the loop (an enclosing If's) keep their values. */
static clrun_status start_iteration(clrun_exec *e, int32_t at, int64_t number)
{
    const clrun__schedule *s = &e->schedule;
    const clrun__node *begin = &e->graph->nodes[s->order[at]];
    unsigned char yes = 1;
    clrun_status status = fill(e, begin->outputs[0], &number, sizeof number, begin);
    if (status == CLRUN_OK)
        status = fill(e, begin->outputs[1], &yes, 1, begin);
    if (status == CLRUN_OK && e->guard_values) {
        for (int32_t step = at + 1; step < e->loops[at].partner; step++) {
            const clrun__node *n = &e->graph->nodes[s->order[step]];
            for (int k = 0; k < n->output_count; k++)
                e->guard_values[n->outputs[k]] = -1;
        }
        e->guard_values[begin->outputs[1]] = 1;
    }
    return status;
}

clrun_status clrun__exec_loop_before_end(clrun_exec *e, int32_t step)
{
    const clrun__schedule *s = &e->schedule;
    const clrun__node *end = &e->graph->nodes[s->order[step]];
    clrun__loop_state *l = &e->loops[e->loops[step].partner];
    const clrun__node *begin = &e->graph->nodes[s->order[e->loops[step].partner]];
    l->again = false;
    if (!l->running) /* no iteration ran: the carried buffers hold the initial values */
        return CLRUN_OK;
    /* the body's condition passed through (the same tensor as the incoming one) is true: no
     * reading back, and no waiting for the iteration */
    unsigned char go = 1;
    clrun_status status = CLRUN_OK;
    if (end->inputs[2] != end->inputs[1]) {
        status = read_back(e, end->inputs[2], &go, 1, "condition", begin);
    } else if (e->ctx->out_of_order) { /* the copies below wait for the body's kernels */
        cl_int error = clrun__cl.Finish(e->ctx->queue);
        if (error != CL_SUCCESS)
            status = clrun__fail_cl(e->ctx, error, "clFinish", "Loop '%s'", loop_label(e, begin));
    }
    int64_t nc = 0;
    for (int a = 0; a < end->attr_count; a++)
        if (strcmp(end->attrs[a].name, "carried") == 0)
            nc = end->attrs[a].i;
    for (int64_t k = 0; status == CLRUN_OK && k < nc; k++) {
        int32_t from = end->inputs[3 + k], to = end->inputs[3 + nc + k];
        cl_mem a = clrun__exec_tensor_mem(e, from), b = clrun__exec_tensor_mem(e, to);
        if (a == b)
            continue;
        size_t bytes = (size_t)clrun_tensor_bytes(&e->graph->tensors[to].type);
        cl_int error = a && b ? clrun__cl.EnqueueCopyBuffer(e->ctx->queue, a, b, 0, 0, bytes, 0, NULL, NULL)
                              : CL_INVALID_MEM_OBJECT;
        if (error != CL_SUCCESS)
            status = clrun__fail_cl(e->ctx, error, "clEnqueueCopyBuffer", "carrying '%s' of Loop '%s'",
                                    clrun__exec_tensor_name(e, to), loop_label(e, begin));
    }
    if (status == CLRUN_OK && e->ctx->out_of_order) { /* the copies carry no event */
        cl_int error = clrun__cl.Finish(e->ctx->queue);
        if (error != CL_SUCCESS)
            status = clrun__fail_cl(e->ctx, error, "clFinish", "Loop '%s'", loop_label(e, begin));
    }
    if (status != CLRUN_OK)
        return status;
    l->count++;
    l->again = go && l->count < l->trip;
    if (l->again && l->count >= MAX_ITERATIONS)
        return clrun__fail(e->ctx, CLRUN_ERROR_INVALID_ARGUMENT, "Loop '%s' ran %lld iterations without its "
                           "condition ending it (trip count %lld): clrun runs at most %lld",
                           loop_label(e, begin), (long long)l->count, (long long)l->trip,
                           (long long)MAX_ITERATIONS);
    if (l->again) /* what the body reads from before the loop stays */
        e->loop_keep = e->loops[step].partner;
    return CLRUN_OK;
}

clrun_status clrun__exec_loop_after(clrun_exec *e, int32_t *step, bool ran)
{
    const clrun__schedule *s = &e->schedule;
    int32_t at = *step;
    const clrun__node *node = &e->graph->nodes[s->order[at]];
    e->loop_keep = -1;
    if (clrun__op_is_loop_begin(node->op)) {
        clrun__loop_state *l = &e->loops[at];
        l->running = false;
        l->count = 0;
        l->trip = 0;
        if (!ran) { /* a skipped branch: nor is the body run */
            *step = l->partner - 1;
            return CLRUN_OK;
        }
        int64_t trip = 0;
        unsigned char go = 0;
        clrun_status status = read_back(e, node->inputs[0], &trip, sizeof trip, "trip count", node);
        if (status == CLRUN_OK)
            status = read_back(e, node->inputs[1], &go, 1, "condition", node);
        if (status != CLRUN_OK)
            return status;
        /* the body passes its condition through: only the trip count can end the loop (a body
         * that computes one may end it earlier, else it fails on reaching the most) */
        const clrun__node *end = &e->graph->nodes[s->order[l->partner]];
        bool passes_through = end->inputs[2] == end->inputs[1];
        if (trip < 0)
            return clrun__fail(e->ctx, CLRUN_ERROR_INVALID_ARGUMENT, "Loop '%s': the trip count '%s' is %lld "
                               "at run time; it must be 0 or more", loop_label(e, node),
                               clrun__exec_tensor_name(e, node->inputs[0]), (long long)trip);
        if (trip > MAX_ITERATIONS && go && passes_through)
            return clrun__fail(e->ctx, CLRUN_ERROR_INVALID_ARGUMENT, "Loop '%s': the trip count '%s' is %lld "
                               "at run time and nothing in the body ends it earlier; clrun runs at most "
                               "%lld iterations", loop_label(e, node),
                               clrun__exec_tensor_name(e, node->inputs[0]), (long long)trip,
                               (long long)MAX_ITERATIONS);
        l->trip = trip;
        l->running = go && trip > 0;
        if (!l->running) {
            *step = l->partner - 1; /* straight to loop_end: no iteration */
            return CLRUN_OK;
        }
        return start_iteration(e, at, 0);
    }
    if (!clrun__op_is_loop_end(node->op) || !ran)
        return CLRUN_OK;
    clrun__loop_state *l = &e->loops[e->loops[at].partner];
    if (l->again) {
        l->again = false;
        *step = e->loops[at].partner; /* the caller goes on at the step after it */
        return start_iteration(e, e->loops[at].partner, l->count);
    }
    l->running = false;
    return write_to(e, node->outputs[0], &l->count, sizeof l->count, node);
}
