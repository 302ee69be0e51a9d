/* Pipeline split: the cut (a dynamic programme over the cut points) and the stage graphs. */
#include "graph/split.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/util.h"

#define NONE UINT64_MAX

/* What the cut needs of every tensor and step, in one allocation's worth of arrays. */
typedef struct facts {
    int32_t steps, tensors;
    const int32_t *order;
    int32_t *step_of;   /* per tensor: the step writing it, -1 for inputs and constants */
    int32_t *end;       /* per intermediate: the last step it is alive at (steps: to the end) */
    int32_t *last_read; /* per tensor: the last step reading it, -1 when none */
    int32_t *mark;      /* per tensor: scratch marks */
    int32_t scans;      /* scans made: each marks with its own number */
    uint64_t *level;    /* steps + 1: the difference array of a stage's own tensors */
    uint64_t *outgo;    /* steps + 2: the difference array of what a stage sends on */
    clrun__split_stage *row; /* steps + 1: every stage from one start */
    int32_t *order_own; /* the graph's order when none was given */
} facts;

static void facts_free(facts *f)
{
    free(f->step_of);
    free(f->end);
    free(f->last_read);
    free(f->mark);
    free(f->level);
    free(f->outgo);
    free(f->row);
    free(f->order_own);
}

static uint64_t tensor_bytes(const clrun_graph *graph, int32_t t)
{
    return clrun_tensor_bytes(&graph->tensors[t].type);
}

/* Calls visit(t) for every tensor node `n` reads: its inputs and its guard. */
#define FOR_EACH_READ(graph, n, t, body)                                                           \
    do {                                                                                           \
        const clrun__node *node_ = &(graph)->nodes[n];                                             \
        for (int i_ = 0; i_ <= node_->input_count; i_++) {                                         \
            int32_t t;                                                                             \
            if (i_ < node_->input_count)                                                           \
                t = node_->inputs[i_];                                                             \
            else if (node_->guarded)                                                               \
                t = node_->guard;                                                                  \
            else                                                                                   \
                break;                                                                             \
            body                                                                                   \
        }                                                                                          \
    } while (0)

static clrun_status facts_build(const clrun_graph *graph, const int32_t *order, facts *f, char *err,
                                size_t errlen)
{
    memset(f, 0, sizeof *f);
    f->steps = graph->node_count;
    f->tensors = graph->tensor_count;
    size_t tn = (size_t)f->tensors + 1, sn = (size_t)f->steps + 2;
    f->step_of = malloc(tn * sizeof *f->step_of);
    f->end = malloc(tn * sizeof *f->end);
    f->last_read = malloc(tn * sizeof *f->last_read);
    f->mark = malloc(tn * sizeof *f->mark);
    f->level = malloc(sn * sizeof *f->level);
    f->outgo = malloc(sn * sizeof *f->outgo);
    f->row = malloc(sn * sizeof *f->row);
    if (order == NULL)
        f->order_own = malloc(sn * sizeof *f->order_own);
    if (!f->step_of || !f->end || !f->last_read || !f->mark || !f->level || !f->outgo || !f->row ||
        (order == NULL && !f->order_own)) {
        facts_free(f);
        return clrun__error_report(err, errlen, CLRUN_ERROR_OUT_OF_HOST_MEMORY,
                                   "split: out of host memory");
    }
    if (order == NULL) {
        clrun_status st = clrun__graph_order(graph, f->order_own);
        if (st != CLRUN_OK) {
            char why[CLRUN__ERROR_MAX];
            snprintf(why, sizeof why, "%s", clrun__error_get(NULL));
            facts_free(f);
            return clrun__error_report(err, errlen, st, "split: %s", why);
        }
        order = f->order_own;
    }
    f->order = order;
    for (int32_t i = 0; i < f->tensors; i++) {
        f->step_of[i] = -1;
        f->last_read[i] = -1;
        f->mark[i] = -1;
        f->end[i] = -1;
    }
    for (int32_t s = 0; s < f->steps; s++) {
        int32_t n = order[s];
        if (n < 0 || n >= f->steps) {
            facts_free(f);
            return clrun__error_report(err, errlen, CLRUN_ERROR_INVALID_ARGUMENT,
                                       "split: step %d names node %d of %d", (int)s, (int)n, (int)f->steps);
        }
        const clrun__node *node = &graph->nodes[n];
        for (int o = 0; o < node->output_count; o++)
            f->step_of[node->outputs[o]] = s;
        FOR_EACH_READ(graph, n, r, { f->last_read[r] = s; });
    }
    /* A graph output that is an input or a constant leaves from the last stage. */
    for (int32_t i = 0; i < graph->output_count; i++) {
        int32_t o = graph->outputs[i];
        if (graph->tensors[o].kind != CLRUN__TENSOR_INTERMEDIATE && f->steps > 0)
            f->last_read[o] = f->steps - 1;
    }
    for (int32_t i = 0; i < f->tensors; i++) {
        if (graph->tensors[i].kind != CLRUN__TENSOR_INTERMEDIATE)
            continue;
        int32_t p = f->step_of[i];
        f->end[i] = graph->tensors[i].is_output ? f->steps
                                                : (f->last_read[i] > p ? f->last_read[i] : p);
    }
    return CLRUN_OK;
}

/* Every stage that starts at step a: f->row[b] for b in (a, steps] is stage [a, b). */
static void scan(const clrun_graph *graph, facts *f, int32_t a)
{
    int32_t n = f->steps;
    memset(f->level + a, 0, (size_t)(n + 2 - a) * sizeof *f->level);
    memset(f->outgo + a, 0, (size_t)(n + 2 - a) * sizeof *f->outgo);
    for (int32_t t = 0; t < f->tensors; t++) {
        int32_t p = f->step_of[t];
        if (graph->tensors[t].kind != CLRUN__TENSOR_INTERMEDIATE || p < a)
            continue;
        uint64_t bytes = tensor_bytes(graph, t);
        f->level[p] += bytes;
        f->level[f->end[t] + 1] -= bytes;
        if (f->last_read[t] > p) { /* sent on from b = p + 1 to b = last_read */
            f->outgo[p + 1] += bytes;
            f->outgo[f->last_read[t] + 1] -= bytes;
        }
    }
    uint64_t live = 0, peak = 0, weights = 0, inputs = 0, in = 0, out = 0;
    int32_t id = f->scans++;
    for (int32_t b = a + 1; b <= n; b++) {
        int32_t s = b - 1;
        live += f->level[s];
        if (live > peak)
            peak = live;
        out += f->outgo[b];
        FOR_EACH_READ(graph, f->order[s], r, {
            if (f->mark[r] != id) {
                f->mark[r] = id;
                uint64_t bytes = tensor_bytes(graph, r);
                if (graph->tensors[r].kind == CLRUN__TENSOR_CONSTANT)
                    weights += bytes;
                else if (f->step_of[r] < a) {
                    inputs += bytes;
                    if (graph->tensors[r].kind == CLRUN__TENSOR_INTERMEDIATE)
                        in += bytes;
                }
            }
        });
        if (b == n)
            for (int32_t i = 0; i < graph->output_count; i++) {
                int32_t o = graph->outputs[i];
                if (graph->tensors[o].kind == CLRUN__TENSOR_INTERMEDIATE || f->mark[o] == id)
                    continue;
                f->mark[o] = id;
                if (graph->tensors[o].kind == CLRUN__TENSOR_CONSTANT)
                    weights += tensor_bytes(graph, o);
                else
                    inputs += tensor_bytes(graph, o);
            }
        clrun__split_stage *st = &f->row[b];
        st->first = a;
        st->end = b;
        st->weights = weights;
        st->inputs = inputs;
        st->activations = peak;
        st->estimate = weights + inputs + peak;
        st->bytes_in = in;
        st->bytes_out = out;
    }
}

/* Why no cut fits: what the whole graph and its largest step alone need. */
static clrun_status no_fit(const clrun_graph *graph, facts *f, const uint64_t *budgets,
                           int32_t devices, char *err, size_t errlen)
{
    char text[1024], a[CLRUN__BYTES_TEXT], b[CLRUN__BYTES_TEXT], c[CLRUN__BYTES_TEXT];
    size_t len = 0;
    for (int32_t k = 0; k < devices && len < 512; k++) {
        if (budgets[k])
            clrun__format_bytes(budgets[k], a, sizeof a);
        len += (size_t)snprintf(text + len, sizeof text - len, "%s%s", k ? ", " : "",
                                budgets[k] ? a : "no limit");
    }
    scan(graph, f, 0);
    clrun__split_stage whole = f->row[f->steps];
    uint64_t largest = 0;
    int32_t at = 0;
    for (int32_t s = 0; s < f->steps; s++) {
        scan(graph, f, s);
        if (f->row[s + 1].estimate > largest) {
            largest = f->row[s + 1].estimate;
            at = s;
        }
    }
    const clrun__node *node = &graph->nodes[f->order[at]];
    const char *label = node->output_count ? clrun__tensor_label(&graph->tensors[node->outputs[0]])
                                           : "?";
    clrun__format_bytes(whole.estimate, a, sizeof a);
    clrun__format_bytes(whole.weights, b, sizeof b);
    clrun__format_bytes(largest, c, sizeof c);
    return clrun__error_report(err, errlen, CLRUN_ERROR_OUT_OF_MEMORY,
                               "split: no cut of the %d steps into %d consecutive stages fits the budgets (%s): "
                               "the whole graph needs %s by the schedule's estimate (%s of weights), its "
                               "largest step, '%s' (%s), %s alone",
                               (int)f->steps, (int)devices, text, a, b, label, node->op->name, c);
}

clrun_status clrun__split_find(const clrun_graph *graph, const int32_t *order,
                               const uint64_t *budgets, int32_t devices, clrun__split *out,
                               char *err, size_t errlen)
{
    if (graph == NULL || out == NULL || (devices > 0 && budgets == NULL))
        return clrun__error_report(err, errlen, CLRUN_ERROR_INVALID_ARGUMENT,
                                   "split: NULL argument");
    if (devices < 1)
        return clrun__error_report(err, errlen, CLRUN_ERROR_INVALID_ARGUMENT,
                                   "split: %d devices: a split needs at least one", (int)devices);
    if (graph->node_count < devices)
        return clrun__error_report(err, errlen, CLRUN_ERROR_INVALID_ARGUMENT,
                                   "split: the graph has %d nodes, too few for %d stages (one per device)",
                                   (int)graph->node_count, (int)devices);
    facts f;
    clrun_status st = facts_build(graph, order, &f, err, errlen);
    if (st != CLRUN_OK)
        return st;
    int32_t n = f.steps, K = devices;
    size_t cells = (size_t)(K + 1) * (size_t)(n + 1);
    uint64_t *best = malloc(cells * sizeof *best);
    int32_t *from = malloc(cells * sizeof *from);
    uint64_t *worst = malloc(cells * sizeof *worst); /* the largest stage estimate on the way */
    uint64_t *cross = calloc((size_t)n + 2, sizeof *cross);
    clrun__split_stage *stages = calloc((size_t)K, sizeof *stages);
    if (!best || !from || !worst || !cross || !stages) {
        st = clrun__error_report(err, errlen, CLRUN_ERROR_OUT_OF_HOST_MEMORY,
                                 "split: out of host memory");
        goto done;
    }
    /* cross[c]: activation bytes written before step c and read at or after it. */
    for (int32_t t = 0; t < f.tensors; t++) {
        int32_t p = f.step_of[t];
        if (graph->tensors[t].kind != CLRUN__TENSOR_INTERMEDIATE || f.last_read[t] <= p)
            continue;
        cross[p + 1] += tensor_bytes(graph, t);
        cross[f.last_read[t] + 1] -= tensor_bytes(graph, t);
    }
    for (int32_t c = 1; c <= n; c++)
        cross[c] += cross[c - 1];
    for (size_t i = 0; i < cells; i++) {
        best[i] = NONE;
        worst[i] = NONE;
        from[i] = -1;
    }
#define CELL(k, b) ((size_t)(k) * (size_t)(n + 1) + (size_t)(b))
    best[CELL(0, 0)] = 0;
    worst[CELL(0, 0)] = 0;
    for (int32_t a = 0; a < n; a++) {
        bool open = false;
        for (int32_t k = 0; k < K; k++)
            open = open || best[CELL(k, a)] != NONE;
        if (!open)
            continue;
        scan(graph, &f, a);
        for (int32_t k = 0; k < K; k++) {
            if (best[CELL(k, a)] == NONE)
                continue;
            uint64_t cost = best[CELL(k, a)] + (a > 0 ? cross[a] : 0);
            for (int32_t b = a + 1; b <= n - (K - k - 1); b++) {
                if (budgets[k] && f.row[b].estimate > budgets[k])
                    continue;
                uint64_t largest = f.row[b].estimate > worst[CELL(k, a)] ? f.row[b].estimate
                                                                          : worst[CELL(k, a)];
                if (cost < best[CELL(k + 1, b)] ||
                    (cost == best[CELL(k + 1, b)] && largest < worst[CELL(k + 1, b)])) {
                    best[CELL(k + 1, b)] = cost;
                    worst[CELL(k + 1, b)] = largest;
                    from[CELL(k + 1, b)] = a;
                }
            }
        }
    }
    if (best[CELL(K, n)] == NONE) {
        st = no_fit(graph, &f, budgets, devices, err, errlen);
    } else {
        int32_t b = n;
        for (int32_t k = K; k > 0; k--) {
            int32_t a = from[CELL(k, b)];
            scan(graph, &f, a);
            stages[k - 1] = f.row[b];
            b = a;
        }
        out->stages = K;
        out->stage = stages;
        out->crossing = best[CELL(K, n)];
        stages = NULL;
    }
#undef CELL
done:
    free(best);
    free(worst);
    free(from);
    free(cross);
    free(stages);
    facts_free(&f);
    return st;
}

void clrun__split_free(clrun__split *split)
{
    if (split == NULL)
        return;
    free(split->stage);
    memset(split, 0, sizeof *split);
}

/* Adds tensor t of `graph` to `sub` as an input (or the constant it is), once. */
static clrun_status carry(const clrun_graph *graph, clrun_graph *sub, int32_t t, int32_t *map)
{
    if (map[t] >= 0)
        return CLRUN_OK;
    const clrun__tensor *x = &graph->tensors[t];
    clrun_status st;
    if (x->kind == CLRUN__TENSOR_CONSTANT)
        st = clrun_graph_add_constant(sub, x->name, &x->type, x->data, x->fill, x->fill_a,
                                      x->fill_b, x->seed, &map[t]);
    else
        st = clrun_graph_add_input(sub, x->name, &x->type, false, &map[t]);
    if (st == CLRUN_OK && x->model_name)
        st = clrun_graph_set_model_name(sub, map[t], x->model_name);
    return st;
}

clrun_status clrun__split_stage_graph(const clrun_graph *graph, const int32_t *order, int32_t first,
                                      int32_t end, const char *name, clrun_graph **out, char *err,
                                      size_t errlen)
{
    if (out)
        *out = NULL;
    if (graph == NULL || out == NULL || first < 0 || end <= first || end > graph->node_count)
        return clrun__error_report(err, errlen, CLRUN_ERROR_INVALID_ARGUMENT,
                                   "split: no stage [%d, %d) in a graph of %d nodes", (int)first, (int)end,
                                   graph ? (int)graph->node_count : 0);
    facts f;
    clrun_status st = facts_build(graph, order, &f, err, errlen);
    if (st != CLRUN_OK)
        return st;
    int32_t *map = f.mark; /* tensor ids in the stage graph, -1: not there */
    clrun_graph *sub = NULL;
    st = clrun_graph_create(name, &sub);
    /* Inputs and constants, in id order: f.end marks what the stage reads from outside. */
    for (int32_t t = 0; t < f.tensors; t++)
        f.end[t] = 0;
    for (int32_t s = first; s < end; s++)
        FOR_EACH_READ(graph, f.order[s], r, {
            if (f.step_of[r] < first)
                f.end[r] = 1;
        });
    for (int32_t t = 0; st == CLRUN_OK && t < f.tensors; t++) {
        bool read = f.end[t] == 1;
        if (end == f.steps && graph->tensors[t].is_output &&
            graph->tensors[t].kind != CLRUN__TENSOR_INTERMEDIATE)
            read = true;
        if (read)
            st = carry(graph, sub, t, map);
    }
    for (int32_t s = first; st == CLRUN_OK && s < end; s++) {
        int32_t n = f.order[s];
        const clrun__node *node = &graph->nodes[n];
        int32_t inputs[64], outputs[64];
        const char *names[64];
        if (node->input_count > 64 || node->output_count > 64) {
            st = clrun__error_set(NULL, CLRUN_ERROR_INVALID_GRAPH,
                                  "node %d (%s) has more than 64 inputs or outputs", (int)n,
                                  node->op->name);
            break;
        }
        for (int i = 0; i < node->input_count; i++)
            inputs[i] = map[node->inputs[i]];
        for (int o = 0; o < node->output_count; o++)
            names[o] = graph->tensors[node->outputs[o]].name;
        st = clrun_graph_add_node(sub, node->op->name, inputs, node->input_count, names,
                                  node->output_count, node->attrs, node->attr_count, outputs);
        int32_t index = sub ? sub->node_count - 1 : -1;
        for (int o = 0; st == CLRUN_OK && o < node->output_count; o++) {
            const clrun__tensor *x = &graph->tensors[node->outputs[o]];
            map[node->outputs[o]] = outputs[o];
            if (x->model_name)
                st = clrun_graph_set_model_name(sub, outputs[o], x->model_name);
        }
        if (st == CLRUN_OK && node->guarded)
            st = clrun__graph_set_guard(sub, index, map[node->guard], node->guard_negate);
        if (st == CLRUN_OK && node->model_name)
            st = clrun_graph_set_node_model_name(sub, index, node->model_name);
    }
    /* Outputs, in id order. */
    for (int32_t t = 0; st == CLRUN_OK && t < f.tensors; t++) {
        const clrun__tensor *x = &graph->tensors[t];
        bool mine = f.step_of[t] >= first && f.step_of[t] < end;
        bool leaves = mine && (x->is_output || f.last_read[t] >= end);
        if (!mine && x->kind != CLRUN__TENSOR_INTERMEDIATE && x->is_output && end == f.steps)
            leaves = true;
        if (leaves)
            st = clrun_graph_mark_output(sub, map[t]);
    }
    if (st == CLRUN_OK)
        st = clrun_graph_validate(sub);
    if (st != CLRUN_OK) {
        char why[CLRUN__ERROR_MAX];
        snprintf(why, sizeof why, "%s", clrun__error_get(NULL));
        clrun__error_report(err, errlen, st,
                            "split: the stage of steps [%d, %d): %s", (int)first, (int)end, why);
        clrun_graph_destroy(sub);
        facts_free(&f);
        return st;
    }
    facts_free(&f);
    *out = sub;
    return CLRUN_OK;
}
