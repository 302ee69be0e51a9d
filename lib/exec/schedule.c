/* Schedule: topological order, last uses, in-place reuse, buffers and bounds.
 *
 * Reuse rule (the same in every mode, so every mode computes the same values): an output of an
 * alias-safe node takes the buffer of one of the node's inputs when that input's last use is
 * this node, its bytes equal the output's, it is not a graph output, not a constant, and either
 * produced by a node or a graph input the caller donated. Every work-item of an alias-safe
 * kernel reads its element before writing it, so the result is the same bits as with separate
 * buffers. A node's scratch is no tensor's: a buffer of its own per part, alive during the
 * node's step alone, which nothing ever takes in place. */
#include "exec/schedule.h"

#include <clrun/exec.h>

#include "core/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void clrun__schedule_free(clrun__schedule *s)
{
    free(s->order);
    free(s->step_of_node);
    free(s->last_use);
    free(s->producer_step);
    free(s->alias_of);
    free(s->buffer_of);
    free(s->buffers);
    free(s->release_start);
    free(s->release_list);
    free(s->scratch_start);
    free(s->scratch_list);
    free(s->unused_donated);
    free(s->part_of);
    free(s->part_offset);
    memset(s, 0, sizeof *s);
}

/* The tensor whose kind decides what a buffer may become: the first that owned it (a view or
 * an in-place output is its base's buffer). */
static const clrun__tensor *buffer_root(const clrun_graph *g, const clrun__schedule *s, int32_t t)
{
    return &g->tensors[s->buffers[s->buffer_of[t]].root];
}

/* Whether `output` may be written into the buffer of `input`, which this node reads: the
 * buffer's every tensor dies here (a view keeps its base's buffer alive), it is not held to the
 * end (an output), not the caller's (a kept input, or a view of one) and not a constant's, and
 * the sizes agree. */
static bool may_donate(const clrun_graph *g, const clrun__schedule *s, int32_t input, int32_t output,
                       int32_t step, const bool *taken)
{
    const clrun__sched_buffer *b = &s->buffers[s->buffer_of[input]];
    const clrun__tensor *root = buffer_root(g, s, input);
    if (taken[s->buffer_of[input]] || s->last_use[input] != step || b->last != step || b->is_output)
        return false;
    if (root->kind == CLRUN__TENSOR_CONSTANT || (root->kind == CLRUN__TENSOR_INPUT && !root->donated))
        return false;
    return b->bytes == clrun_tensor_bytes(&g->tensors[output].type);
}

/* One past the last input whose buffer the node's output may take (op.h's alias_until). */
static int alias_end(const clrun__node *node)
{
    int until = node->op->alias_until;
    return until > 0 && until < node->input_count ? until : node->input_count;
}

/* A view (reshape: the same elements in the same order) is its input's buffer: no memory of its
 * own, no copy. Its base's buffer lives as long as the view is read. */
static bool is_view(const clrun__node *node, bool reuse)
{
    return reuse && node->op->view && node->input_count == 1 && node->output_count == 1;
}

/* The scratch buffers of `step` (node `node`), one per part of scratch[], listed from
 * scratch_start[step + 1] (which the caller set to scratch_start[step]) on. */
static void add_scratch(const clrun__node *n, int32_t node, int32_t step, const uint64_t *scratch,
                        clrun__schedule *s)
{
    for (int j = 0; scratch && j < CLRUN__SCHEDULE_SCRATCH; j++) {
        uint64_t bytes = scratch[(size_t)node * CLRUN__SCHEDULE_SCRATCH + (size_t)j];
        if (bytes == 0)
            continue;
        s->buffers[s->buffer_count] = (clrun__sched_buffer){
            .bytes = bytes, .first = step, .last = step, .root = n->outputs[0],
            .is_scratch = true, .part = (uint8_t)j};
        s->scratch_list[s->scratch_start[step + 1]++] = s->buffer_count++;
        s->scratch_bytes += bytes;
    }
}

/* Gives every tensor a buffer, sharing the input's where the reuse rule allows, and every part of
 * a node's scratch a buffer of its own. */
static bool assign_buffers(const clrun_graph *g, clrun__schedule *s, bool reuse,
                           const uint64_t *scratch)
{
    int32_t nt = g->tensor_count;
    size_t parts = 0;
    for (int32_t i = 0; scratch && i < g->node_count; i++)
        for (int j = 0; j < CLRUN__SCHEDULE_SCRATCH; j++)
            parts += scratch[(size_t)i * CLRUN__SCHEDULE_SCRATCH + (size_t)j] > 0;
    s->buffers = calloc((size_t)nt + parts + 1, sizeof *s->buffers);
    s->scratch_start = calloc((size_t)s->steps + 2, sizeof *s->scratch_start);
    s->scratch_list = calloc(parts + 1, sizeof *s->scratch_list);
    bool *taken = calloc((size_t)nt + parts + 1, sizeof *taken); /* buffer taken at this step */
    if (s->buffers == NULL || taken == NULL || s->scratch_start == NULL || s->scratch_list == NULL) {
        free(taken);
        return false;
    }
    for (int32_t t = 0; t < nt; t++) {
        const clrun__tensor *tensor = &g->tensors[t];
        if (tensor->kind == CLRUN__TENSOR_INTERMEDIATE) {
            s->buffer_of[t] = -1; /* until its node's step */
            continue;
        }
        clrun__sched_buffer *b = &s->buffers[s->buffer_count];
        /* An input nobody reads is still released (if donated) after the first step. */
        int32_t last = s->last_use[t] < 0 && s->steps > 0 ? 0 : s->last_use[t];
        *b = (clrun__sched_buffer){.bytes = clrun_tensor_bytes(&tensor->type), .first = -1,
                                   .last = last, .root = t,
                                   .is_input = tensor->kind == CLRUN__TENSOR_INPUT,
                                   .is_donated = tensor->kind == CLRUN__TENSOR_INPUT && tensor->donated,
                                   .is_constant = tensor->kind == CLRUN__TENSOR_CONSTANT,
                                   .is_output = tensor->is_output};
        s->buffer_of[t] = s->buffer_count++;
    }
    for (int32_t step = 0; step < s->steps; step++) {
        const clrun__node *node = &g->nodes[s->order[step]];
        for (int o = 0; o < node->output_count; o++) {
            int32_t out = node->outputs[o];
            int32_t whole = s->part_of ? s->part_of[out] : -1;
            if (whole >= 0 && s->buffer_of[whole] < 0) {
                /* a concat assembled in place: its output's buffer, from its first input on */
                s->buffers[s->buffer_count] = (clrun__sched_buffer){
                    .bytes = clrun_tensor_bytes(&g->tensors[whole].type), .first = step,
                    .last = step, .root = whole};
                s->buffer_of[whole] = s->buffer_count++;
            }
            if (whole >= 0)
                s->buffer_of[out] = s->buffer_of[whole];
            else if (is_view(node, reuse)) {
                s->alias_of[out] = node->inputs[0];
                s->buffer_of[out] = s->buffer_of[node->inputs[0]];
                s->views++;
            }
            /* A donated graph input first: it is the caller's explicit request, and an
             * intermediate that dies here is freed anyway. Then the others, in operand order. */
            for (int pass = 0; pass < 2 && whole < 0 && s->buffer_of[out] < 0; pass++)
                for (int k = node->op->alias_from; reuse && node->op->alias_safe && k < alias_end(node); k++) {
                    int32_t in = node->inputs[k];
                    bool donated_input = g->tensors[in].kind == CLRUN__TENSOR_INPUT;
                    if (donated_input == (pass == 0) && may_donate(g, s, in, out, step, taken)) {
                        s->alias_of[out] = in;
                        s->buffer_of[out] = s->buffer_of[in];
                        taken[s->buffer_of[in]] = true;
                        s->donations++;
                        s->donated_in_place += pass == 0;
                        break;
                    }
                }
            clrun__sched_buffer *b;
            if (s->buffer_of[out] < 0) {
                b = &s->buffers[s->buffer_count];
                *b = (clrun__sched_buffer){.bytes = clrun_tensor_bytes(&g->tensors[out].type),
                                           .first = step, .last = step, .root = out,
                                           .is_host = clrun__op_on_host(node->op)};
                s->buffer_of[out] = s->buffer_count++;
            }
            b = &s->buffers[s->buffer_of[out]];
            int32_t last = s->last_use[out] == -2 ? step : s->last_use[out]; /* -2: never read */
            if (last > b->last)
                b->last = last;
            b->is_output = b->is_output || g->tensors[out].is_output;
        }
        for (int k = 0; k < node->input_count; k++)
            taken[s->buffer_of[node->inputs[k]]] = false;
        s->scratch_start[step + 1] = s->scratch_start[step];
        add_scratch(node, s->order[step], step, scratch, s);
    }
    free(taken);
    return true;
}

/* A buffer is released after its last step unless the caller owns it (a non-donated input) or
 * it is resident (constant) or handed back (output). */
static bool build_release_lists(const clrun_graph *g, clrun__schedule *s, bool reuse)
{
    s->release_start = calloc((size_t)s->steps + 2, sizeof *s->release_start);
    s->release_list = calloc((size_t)s->buffer_count + 1, sizeof *s->release_list);
    if (s->release_start == NULL || s->release_list == NULL)
        return false;
    int32_t *counts = calloc((size_t)s->steps + 1, sizeof *counts);
    if (counts == NULL)
        return false;
    for (int32_t b = 0; b < s->buffer_count; b++) {
        const clrun__sched_buffer *buf = &s->buffers[b];
        bool owned_by_caller = buf->is_input && !g->tensors[buf->root].donated;
        if (!buf->is_constant && !buf->is_output && !owned_by_caller && buf->last >= 0 && buf->last < s->steps)
            counts[reuse ? buf->last : s->steps - 1]++;
    }
    for (int32_t st = 0; st < s->steps; st++)
        s->release_start[st + 1] = s->release_start[st] + counts[st];
    memset(counts, 0, (size_t)s->steps * sizeof *counts);
    for (int32_t b = 0; b < s->buffer_count; b++) {
        const clrun__sched_buffer *buf = &s->buffers[b];
        bool owned_by_caller = buf->is_input && !g->tensors[buf->root].donated;
        int32_t when = reuse ? buf->last : s->steps - 1; /* naive: all at the end */
        if (!buf->is_constant && !buf->is_output && !owned_by_caller && buf->last >= 0 && buf->last < s->steps)
            s->release_list[s->release_start[when] + counts[when]++] = b;
    }
    free(counts);
    return true;
}

bool clrun__schedule_alive(const clrun__schedule *s, int32_t b, int32_t step)
{
    const clrun__sched_buffer *buf = &s->buffers[b];
    return buf->first <= step && step <= buf->last;
}

/* A graph input the caller keeps: its buffer stays the caller's for the whole run. */
static bool kept_input(const clrun__sched_buffer *buf) { return buf->is_input && !buf->is_donated; }

/* Live non-constant totals over steps, by a sweep over buffer start/end events. A buffer is
 * live from the step that creates it (step 0 for inputs) through its last reader; an input the
 * caller keeps, through the whole run. */
void clrun__schedule_live(const clrun__schedule *s, int64_t *live)
{
    int32_t steps = s->steps > 0 ? s->steps : 1;
    memset(live, 0, (size_t)steps * sizeof *live);
    for (int32_t b = 0; b < s->buffer_count; b++) {
        const clrun__sched_buffer *buf = &s->buffers[b];
        if (buf->is_constant || buf->is_host) /* resident, or host memory: no device bytes */
            continue;
        int32_t from = buf->first < 0 ? 0 : buf->first;
        int32_t to = buf->last < from ? from : buf->last;
        if (kept_input(buf))
            to = steps - 1; /* the caller holds it through the whole run */
        if (to > steps - 1)
            to = steps - 1;
        live[from] += (int64_t)buf->bytes;
        if (to + 1 < steps)
            live[to + 1] -= (int64_t)buf->bytes;
    }
    for (int32_t st = 1; st < steps; st++)
        live[st] += live[st - 1];
}

/* The largest live total (what any executor must hold at once, so an achievable bound), the
 * constants' and the host buffers' bytes. */
static bool compute_bounds(clrun__schedule *s)
{
    int32_t steps = s->steps > 0 ? s->steps : 1;
    int64_t *live = calloc((size_t)steps + 1, sizeof *live);
    if (live == NULL)
        return false;
    for (int32_t b = 0; b < s->buffer_count; b++) {
        const clrun__sched_buffer *buf = &s->buffers[b];
        if (buf->is_constant) {
            s->constant_bytes += buf->bytes;
        } else if (buf->is_host) {
            s->host_bytes += buf->bytes;
            s->host_buffers++;
        }
    }
    clrun__schedule_live(s, live);
    uint64_t best = 0;
    for (int32_t st = 0; st < steps; st++)
        if ((uint64_t)live[st] > best)
            best = (uint64_t)live[st];
    s->lower_bound = best;
    free(live);
    return true;
}

static void count_naive(const clrun_graph *g, clrun__schedule *s)
{
    for (int32_t t = 0; t < g->tensor_count; t++)
        if (g->tensors[t].kind != CLRUN__TENSOR_CONSTANT &&
            !(g->tensors[t].producer >= 0 && clrun__op_on_host(g->nodes[g->tensors[t].producer].op)))
            s->naive_bytes += clrun_tensor_bytes(&g->tensors[t].type);
    s->naive_bytes += s->scratch_bytes;
}

/* The donated inputs whose buffer no output took: one pass over the tensors marks the taken. */
static bool collect_unused_donations(const clrun_graph *g, clrun__schedule *s)
{
    s->unused_donated = calloc((size_t)g->input_count + 1, sizeof *s->unused_donated);
    bool *taken = calloc((size_t)g->tensor_count + 1, sizeof *taken);
    if (s->unused_donated == NULL || taken == NULL) {
        free(taken);
        return false;
    }
    for (int32_t u = 0; u < g->tensor_count; u++)
        if (s->alias_of[u] >= 0)
            taken[s->alias_of[u]] = true;
    for (int32_t i = 0; i < g->input_count; i++) {
        int32_t t = g->inputs[i];
        if (g->tensors[t].donated && !taken[t])
            s->unused_donated[s->unused_donated_count++] = t;
    }
    free(taken);
    return true;
}

void clrun__schedule_unused_reason(const clrun_graph *g, const clrun__schedule *s, int32_t input,
                                   char *why, size_t size)
{
    const clrun__tensor *in = &g->tensors[input];
    if (!s->reuse) {
        snprintf(why, size, "the naive mode gives every tensor a buffer of its own");
        return;
    }
    if (in->is_output) {
        snprintf(why, size, "it is also a graph output, so its buffer must hold it to the end");
        return;
    }
    if (s->last_use[input] < 0) {
        snprintf(why, size, "no node reads it");
        return;
    }
    const clrun__node *last = &g->nodes[s->order[s->last_use[input]]];
    const char *name = g->tensors[last->outputs[0]].name;
    if (!last->op->alias_safe) {
        snprintf(why, size, "its last reader '%s' (%s) cannot write its output in place", name,
                 last->op->name);
        return;
    }
    uint64_t bytes = clrun_tensor_bytes(&in->type);
    for (int o = 0; o < last->output_count; o++) {
        int32_t out = last->outputs[o];
        if (clrun_tensor_bytes(&g->tensors[out].type) != bytes)
            continue;
        int32_t taker = s->alias_of[out];
        snprintf(why, size, "the output '%s' of its last reader (%s) took the buffer of '%s'",
                 g->tensors[out].name, last->op->name, taker >= 0 ? g->tensors[taker].name : "?");
        return;
    }
    char have[CLRUN__TYPE_TEXT], want[CLRUN__TYPE_TEXT];
    snprintf(why, size, "its last reader '%s' (%s) writes %s, a different size than its %s", name,
             last->op->name, clrun__type_format(&g->tensors[last->outputs[0]].type, have, sizeof have),
             clrun__type_format(&in->type, want, sizeof want));
}

static void compute_last_uses(const clrun_graph *g, clrun__schedule *s)
{
    for (int32_t t = 0; t < g->tensor_count; t++) {
        s->last_use[t] = g->tensors[t].is_output ? s->steps : -2;
        s->producer_step[t] = g->tensors[t].producer >= 0 ? s->step_of_node[g->tensors[t].producer] : -1;
        s->alias_of[t] = -1;
    }
    for (int32_t step = 0; step < s->steps; step++) {
        const clrun__node *node = &g->nodes[s->order[step]];
        for (int k = 0; k < node->input_count; k++) {
            int32_t t = node->inputs[k];
            if (s->last_use[t] < step)
                s->last_use[t] = step;
        }
        /* a guarded node reads its guard before it runs (or is skipped) */
        if (node->guarded && s->last_use[node->guard] < step)
            s->last_use[node->guard] = step;
    }
}

clrun_status clrun__schedule_build(const clrun_graph *g, bool reuse, clrun__schedule *out, char *err,
                                   size_t errlen)
{
    return clrun__schedule_build_with_scratch(g, reuse, NULL, out, err, errlen);
}

static bool node_reads(const clrun__node *node, int32_t t)
{
    for (int i = 0; i < node->input_count; i++)
        if (node->inputs[i] == t)
            return true;
    return false;
}

/* Whether the node reads t at an input its output may take (op.h's alias_from). */
static bool may_write_over(const clrun__node *node, int32_t t)
{
    for (int i = node->op->alias_from; node->op->alias_safe && i < alias_end(node); i++)
        if (node->inputs[i] == t)
            return true;
    return false;
}

/* Whether node, which reads t, could write its first output over t (as large as t). */
static bool could_write_over(const clrun_graph *g, const clrun__node *node, int32_t t)
{
    return may_write_over(node, t) && node->output_count > 0 &&
           clrun_tensor_bytes(&g->tensors[node->outputs[0]].type) == clrun_tensor_bytes(&g->tensors[t].type);
}

/* A node that could write in place of a donated input but is not its last reader (fusion moved
 * a reader after it: a product with its epilogue runs where the epilogue ends) is moved to just
 * after the last reader, when no node in between reads what it writes: donated state (a train
 * step's parameters and moments) is then updated in place instead of held twice. The order
 * stays topological: the moved node's inputs are all produced before its old place. */
static void sink_donated_writers(const clrun_graph *g, int32_t *order, int32_t steps)
{
    for (int32_t i = 0; i < g->input_count; i++) {
        int32_t t = g->inputs[i];
        if (!g->tensors[t].donated)
            continue;
        int32_t last = -1;
        for (int32_t st = 0; st < steps; st++)
            if (node_reads(&g->nodes[order[st]], t))
                last = st;
        if (last < 0 || could_write_over(g, &g->nodes[order[last]], t))
            continue;
        /* the first reader that could write over t and whose outputs nothing before the last
         * reader needs (an earlier one may be a product whose epilogue reads t beside it, its
         * result read by the update that is the writer meant: Adam's L2 decay) */
        for (int32_t writer = 0; writer < last; writer++) {
            const clrun__node *w = &g->nodes[order[writer]];
            if (!node_reads(w, t) || !could_write_over(g, w, t) || w->guarded)
                continue; /* a guarded node keeps its place (an If's branch, a Loop's body) */
            bool needed = false;
            for (int32_t st = writer + 1; st <= last && !needed; st++)
                for (int j = 0; j < w->output_count && !needed; j++)
                    needed = node_reads(&g->nodes[order[st]], w->outputs[j]);
            if (needed)
                continue;
            int32_t moved = order[writer];
            memmove(&order[writer], &order[writer + 1], sizeof *order * (size_t)(last - writer));
            order[last] = moved;
            break;
        }
    }
}

/* The schedule, with the concats that part_of and part_offset (taken: freed with the schedule,
 * on failure too) say are assembled in place, or none (NULL). */
static clrun_status build(const clrun_graph *g, bool reuse, const uint64_t *scratch,
                          int32_t *part_of, uint64_t *part_offset, int32_t assembled,
                          int32_t whole, clrun__schedule *out, char *err, size_t errlen)
{
    clrun__schedule s;
    memset(&s, 0, sizeof s);
    s.steps = g->node_count;
    s.reuse = reuse;
    s.part_of = part_of;
    s.part_offset = part_offset;
    s.assembled = assembled;
    s.assembled_whole = whole;
    size_t nt = (size_t)g->tensor_count + 1, nn = (size_t)g->node_count + 1;
    s.order = calloc(nn, sizeof *s.order);
    s.step_of_node = calloc(nn, sizeof *s.step_of_node);
    s.last_use = calloc(nt, sizeof *s.last_use);
    s.producer_step = calloc(nt, sizeof *s.producer_step);
    s.alias_of = calloc(nt, sizeof *s.alias_of);
    s.buffer_of = calloc(nt, sizeof *s.buffer_of);
    if (!s.order || !s.step_of_node || !s.last_use || !s.producer_step || !s.alias_of || !s.buffer_of) {
        clrun__schedule_free(&s);
        snprintf(err, errlen, "out of host memory scheduling the graph");
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    clrun_status ordered = clrun__graph_order(g, s.order);
    if (ordered != CLRUN_OK) {
        clrun__schedule_free(&s);
        snprintf(err, errlen, ordered == CLRUN_ERROR_INVALID_GRAPH
                                  ? "the graph has a cycle: no schedule exists"
                                  : "out of host memory scheduling the graph");
        return ordered;
    }
    if (reuse)
        sink_donated_writers(g, s.order, s.steps);
    for (int32_t st = 0; st < s.steps; st++)
        s.step_of_node[s.order[st]] = st;
    compute_last_uses(g, &s);
    if (!assign_buffers(g, &s, reuse, scratch) || !build_release_lists(g, &s, reuse) ||
        !collect_unused_donations(g, &s) || !compute_bounds(&s)) {
        clrun__schedule_free(&s);
        snprintf(err, errlen, "out of host memory scheduling the graph");
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    count_naive(g, &s);
    *out = s;
    return CLRUN_OK;
}

clrun_status clrun__schedule_build_with_scratch(const clrun_graph *g, bool reuse,
                                                const uint64_t *scratch, clrun__schedule *out,
                                                char *err, size_t errlen)
{
    return build(g, reuse, scratch, NULL, NULL, 0, 0, out, err, errlen);
}

clrun_status clrun__schedule_build_assembling(const clrun_graph *g, const uint64_t *scratch,
                                              uint64_t alignment, clrun__schedule *out,
                                              char *err, size_t errlen)
{
    clrun__schedule plain;
    clrun_status status = build(g, true, scratch, NULL, NULL, 0, 0, &plain, err, errlen);
    if (status != CLRUN_OK)
        return status;
    int32_t *part_of = NULL, picked = 0, whole = 0;
    uint64_t *part_offset = NULL;
    status = clrun__schedule_pick_concats(g, &plain, alignment, &part_of, &part_offset, &picked,
                                          &whole);
    if (status != CLRUN_OK || picked == 0) {
        if (status == CLRUN_OK) {
            *out = plain;
            return CLRUN_OK;
        }
        clrun__schedule_free(&plain);
        snprintf(err, errlen, "out of host memory scheduling the graph");
        return status;
    }
    clrun__schedule_free(&plain);
    return build(g, true, scratch, part_of, part_offset, picked, whole, out, err, errlen);
}

/* The names of the tensors that own buffers which[0..n), in one block: the pointers, then the
 * strings. NULL when memory runs out. */
static char **buffer_names(const clrun_graph *g, const clrun__schedule *s, const int32_t *which,
                           size_t n)
{
    size_t bytes = (n + 1) * sizeof(char *);
    for (size_t i = 0; i < n; i++)
        bytes += strlen(g->tensors[s->buffers[which[i]].root].name) + 1;
    char **names = malloc(bytes);
    if (names == NULL)
        return NULL;
    char *text = (char *)(names + n + 1);
    for (size_t i = 0; i < n; i++) {
        const char *name = g->tensors[s->buffers[which[i]].root].name;
        size_t length = strlen(name) + 1;
        names[i] = memcpy(text, name, length);
        text += length;
    }
    names[n] = NULL;
    return names;
}

clrun_status clrun_graph_plan_buffers(const clrun_graph *graph, bool with_inputs,
                                      clrun_plan_buffer **buffers, size_t *count, char ***names,
                                      char *err, size_t errlen)
{
    char why[512] = "";
    clrun_status status = CLRUN_ERROR_INVALID_ARGUMENT;
    if (names)
        *names = NULL;
    if (graph == NULL || buffers == NULL || count == NULL) {
        snprintf(why, sizeof why, "clrun_graph_plan_buffers: NULL argument");
    } else if ((status = clrun_graph_validate((clrun_graph *)graph)) != CLRUN_OK) {
        snprintf(why, sizeof why, "%s", clrun_graph_last_error(graph));
    } else {
        clrun__schedule schedule;
        status = clrun__schedule_build(graph, true, &schedule, why, sizeof why);
        if (status == CLRUN_OK) {
            status = clrun__schedule_plan_buffers(graph, &schedule, with_inputs, buffers, count, names,
                                                  why, sizeof why);
            clrun__schedule_free(&schedule);
        }
    }
    if (status != CLRUN_OK) {
        if (err && errlen)
            snprintf(err, errlen, "%s", why);
        clrun__error_set(NULL, status, "%s", why);
    }
    return status;
}

clrun_status clrun__schedule_plan_buffers(const clrun_graph *graph, const clrun__schedule *schedule,
                                          bool with_inputs, clrun_plan_buffer **buffers,
                                          size_t *count, char ***names, char *why, size_t size)
{
    int32_t *which = NULL;
    clrun_status status = clrun__schedule_plan_items(schedule, with_inputs, buffers, &which, count);
    if (status == CLRUN_OK && names && (*names = buffer_names(graph, schedule, which, *count)) == NULL) {
        free(*buffers);
        *buffers = NULL;
        status = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    free(which);
    if (status != CLRUN_OK)
        snprintf(why, size, "out of host memory listing the buffers");
    return status;
}

clrun_status clrun__schedule_plan_items(const clrun__schedule *s, bool with_inputs, clrun_plan_buffer **items_out,
                                        int32_t **which_out, size_t *count)
{
    clrun_plan_buffer *items = calloc((size_t)s->buffer_count + 1, sizeof *items);
    int32_t *which = calloc((size_t)s->buffer_count + 1, sizeof *which);
    if (items == NULL || which == NULL) {
        free(items);
        free(which);
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    size_t n = 0;
    for (int32_t b = 0; b < s->buffer_count; b++) {
        const clrun__sched_buffer *sb = &s->buffers[b];
        if (sb->is_constant || sb->is_host || (sb->first < 0 && !(with_inputs && sb->is_input)) ||
            sb->bytes == 0) /* an empty tensor (a graph input): no memory */
            continue;
        int32_t first = sb->first < 0 ? 0 : sb->first;
        int32_t last = sb->last < first ? first : sb->last;
        if (kept_input(sb))
            last = s->steps; /* kept by the caller through the whole run */
        if (last >= s->steps && s->steps > 0)
            last = s->steps - 1; /* outputs: alive to the end */
        items[n] = (clrun_plan_buffer){sb->bytes, (uint64_t)first, (uint64_t)last + 1};
        which[n++] = b;
    }
    *items_out = items;
    *which_out = which;
    *count = n;
    return CLRUN_OK;
}

/* ---- groups laid out back to back -------------------------------------------------------- */

void clrun__buffer_groups_free(clrun__buffer_groups *g)
{
    free(g->start);
    free(g->member);
    free(g->offset);
    free(g->bytes);
    free(g->group_of);
    memset(g, 0, sizeof *g);
}

/* Whether buffer b may be a group's member: memory the run creates, on the device. */
static bool groupable(const clrun__schedule *s, int32_t b)
{
    if (b < 0 || b >= s->buffer_count)
        return false;
    const clrun__sched_buffer *sb = &s->buffers[b];
    return sb->first >= 0 && !sb->is_input && !sb->is_constant && !sb->is_host &&
           !sb->is_scratch && sb->bytes > 0;
}

clrun_status clrun__buffer_groups_make(const clrun__schedule *s, const int32_t *buffers,
                                       const int32_t *start, int32_t count, uint64_t alignment,
                                       clrun__buffer_groups *out, bool *kept)
{
    memset(out, 0, sizeof *out);
    int32_t total = count > 0 ? start[count] : 0;
    out->start = calloc((size_t)count + 1, sizeof *out->start);
    out->member = calloc((size_t)total + 1, sizeof *out->member);
    out->offset = calloc((size_t)total + 1, sizeof *out->offset);
    out->bytes = calloc((size_t)count + 1, sizeof *out->bytes);
    out->group_of = malloc(((size_t)s->buffer_count + 1) * sizeof *out->group_of);
    if (!out->start || !out->member || !out->offset || !out->bytes || !out->group_of) {
        clrun__buffer_groups_free(out);
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    for (int32_t b = 0; b < s->buffer_count; b++)
        out->group_of[b] = -1;
    if (alignment == 0)
        alignment = 1;
    int32_t n = 0;
    for (int32_t g = 0; g < count; g++) {
        bool ok = start[g + 1] > start[g];
        for (int32_t k = start[g]; ok && k < start[g + 1]; k++) {
            ok = groupable(s, buffers[k]) && out->group_of[buffers[k]] == -1;
            for (int32_t j = start[g]; ok && j < k; j++)
                ok = buffers[j] != buffers[k];
        }
        if (kept)
            kept[g] = ok;
        if (!ok)
            continue;
        uint64_t at = 0;
        out->start[out->count] = n;
        for (int32_t k = start[g]; k < start[g + 1]; k++) {
            at = (at + alignment - 1) / alignment * alignment;
            out->member[n] = buffers[k];
            out->offset[n++] = at;
            out->group_of[buffers[k]] = out->count;
            at += s->buffers[buffers[k]].bytes;
        }
        out->bytes[out->count++] = at;
        out->start[out->count] = n;
    }
    return CLRUN_OK;
}

clrun_status clrun__buffer_groups_items(const clrun__buffer_groups *groups,
                                        const clrun_plan_buffer *items, const int32_t *which,
                                        size_t count, clrun_plan_buffer **out_items,
                                        int32_t **out_which, size_t *out_count)
{
    size_t cap = count + (size_t)groups->count + 1;
    clrun_plan_buffer *it = calloc(cap, sizeof *it);
    int32_t *wh = calloc(cap, sizeof *wh);
    if (!it || !wh) {
        free(it), free(wh);
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    size_t n = 0;
    for (size_t i = 0; i < count; i++) {
        int32_t g = which[i] >= 0 ? groups->group_of[which[i]] : -1;
        if (g < 0) {
            it[n] = items[i];
            wh[n++] = which[i];
            continue;
        }
        size_t at = n; /* the group's item, made at its first member's place */
        for (size_t j = 0; j < n; j++)
            if (wh[j] == -1 - g)
                at = j;
        if (at == n) {
            it[n] = (clrun_plan_buffer){groups->bytes[g], items[i].first, items[i].last};
            wh[n++] = -1 - g;
            continue;
        }
        if (items[i].first < it[at].first)
            it[at].first = items[i].first;
        if (items[i].last > it[at].last)
            it[at].last = items[i].last;
    }
    *out_items = it;
    *out_which = wh;
    *out_count = n;
    return CLRUN_OK;
}
