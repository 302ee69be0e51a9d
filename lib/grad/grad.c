/* The gradient transform: copy the forward graph, then walk its nodes backwards, handing each
 * the gradients of its outputs and summing what its rule gives for its inputs. Which tensors
 * need a gradient is decided first (forward from the wrt tensors, backward from the loss), so
 * that a rule is asked only for what the loss needs, and an op without a rule is refused before
 * anything runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "grad/grad.h"

static const clrun__grad_rule *const *families(size_t *count)
{
    static const clrun__grad_rule *const list[] = {
        clrun__grad_rules_elementwise, clrun__grad_rules_matmul, clrun__grad_rules_norm,
        clrun__grad_rules_layout,      clrun__grad_rules_conv,   clrun__grad_rules_index,
    };
    *count = sizeof list / sizeof list[0];
    return list;
}

const clrun__grad_rule *clrun__grad_rule_find(const char *name)
{
    size_t count;
    const clrun__grad_rule *const *f = families(&count);
    for (size_t i = 0; name && i < count; i++)
        for (const clrun__grad_rule *r = f[i]; r->op; r++)
            if (strcmp(r->op, name) == 0)
                return r;
    return NULL;
}

static bool is_float(clrun_dtype d)
{
    return d == CLRUN_F32 || d == CLRUN_F64 || d == CLRUN_F16;
}

bool clrun_op_differentiable(const char *name)
{
    if (clrun__grad_rule_find(name))
        return true;
    const clrun__op *op = clrun__op_find(name);
    /* Comparisons, argmax, casts from integers: nothing float flows through them. Ops that
     * cannot say so from their name alone are treated as lacking a rule. */
    return op && (strcmp(name, "argmax") == 0 || strcmp(name, "argmin") == 0 ||
                  strcmp(name, "equal") == 0 || strcmp(name, "less") == 0 ||
                  strcmp(name, "greater") == 0 || strcmp(name, "less_equal") == 0 ||
                  strcmp(name, "greater_equal") == 0 || strcmp(name, "not") == 0 ||
                  strcmp(name, "and") == 0 || strcmp(name, "or") == 0 ||
                  strcmp(name, "xor") == 0);
}

/* Whether gradients may flow from node's output into its input i: the rule says, and an op
 * without a rule lets everything float through (so that it is refused when needed). */
static bool flows(const clrun__node *node, int i)
{
    const clrun__grad_rule *r = clrun__grad_rule_find(node->op->name);
    if (r)
        return (r->differentiable >> i) & 1u;
    return true;
}

void clrun__grad_reach(const clrun_graph *fwd, clrun_tensor_id loss, bool *reached)
{
    for (int32_t t = 0; t < fwd->tensor_count; t++)
        reached[t] = false;
    if (loss < 0 || loss >= fwd->tensor_count)
        return;
    reached[loss] = true;
    for (int32_t n = fwd->node_count - 1; n >= 0; n--) {
        const clrun__node *node = &fwd->nodes[n];
        bool any = false;
        for (int j = 0; j < node->output_count; j++)
            any = any || (reached[node->outputs[j]] &&
                          is_float(fwd->tensors[node->outputs[j]].type.dtype));
        if (!any)
            continue;
        for (int i = 0; i < node->input_count; i++) {
            clrun_tensor_id t = node->inputs[i];
            if (is_float(fwd->tensors[t].type.dtype) && flows(node, i))
                reached[t] = true;
        }
    }
}

clrun_status clrun__grad_copy(const clrun_graph *fwd, clrun_graph *out, const bool *promote,
                              bool donate, char *err, size_t errlen)
{
    int32_t next_node = 0;
    clrun_status s = CLRUN_OK;
    for (int32_t t = 0; t < fwd->tensor_count && s == CLRUN_OK; t++) {
        const clrun__tensor *ft = &fwd->tensors[t];
        clrun_tensor_id id = -1;
        if (ft->kind == CLRUN__TENSOR_INPUT) {
            s = clrun_graph_add_input(out, ft->name, &ft->type, ft->donated, &id);
        } else if (ft->kind == CLRUN__TENSOR_CONSTANT && promote && promote[t]) {
            s = clrun_graph_add_input(out, ft->name, &ft->type, donate, &id);
        } else if (ft->kind == CLRUN__TENSOR_CONSTANT) {
            s = clrun_graph_add_constant(out, ft->name, &ft->type, ft->data, ft->fill, ft->fill_a,
                                         ft->fill_b, ft->seed, &id);
        } else {
            /* The first output of the next node: add that node (graphs are built in dependency
             * order, so its inputs exist, and its outputs take consecutive ids). */
            if (ft->producer != next_node || fwd->nodes[next_node].outputs[0] != t) {
                s = CLRUN_ERROR_INVALID_GRAPH;
                snprintf(err, errlen, "gradient: tensor %s is not in dependency order",
                         clrun__tensor_label(ft));
                break;
            }
            const clrun__node *n = &fwd->nodes[next_node];
            const char *names[16];
            clrun_tensor_id outs[16];
            for (int j = 0; j < n->output_count && j < 16; j++)
                names[j] = fwd->tensors[n->outputs[j]].name;
            s = clrun_graph_add_node(out, n->op->name, n->inputs, n->input_count, names,
                                     n->output_count, n->attrs, n->attr_count, outs);
            if (s == CLRUN_OK && n->model_name)
                s = clrun_graph_set_node_model_name(out, next_node, n->model_name);
            id = s == CLRUN_OK ? outs[0] : -1;
            t += n->output_count - 1;
            next_node++;
        }
        if (s == CLRUN_OK && id != (ft->kind == CLRUN__TENSOR_INTERMEDIATE
                                        ? fwd->nodes[next_node - 1].outputs[0] : t)) {
            s = CLRUN_ERROR_INVALID_GRAPH;
            snprintf(err, errlen, "gradient: tensor %s changed its id in the copy",
                     clrun__tensor_label(ft));
        }
    }
    for (int32_t t = 0; t < fwd->tensor_count && s == CLRUN_OK; t++)
        if (fwd->tensors[t].model_name)
            s = clrun_graph_set_model_name(out, t, fwd->tensors[t].model_name);
    if (s != CLRUN_OK && err && errlen && err[0] == '\0')
        snprintf(err, errlen, "gradient: %s", clrun_graph_last_error(out));
    return s;
}

/* Adds `grad` into the gradient of forward tensor t. */
static clrun_status accumulate(clrun__grad *g, clrun_tensor_id t, clrun_tensor_id grad)
{
    if (grad < 0)
        return clrun__grad_failed(g, CLRUN_ERROR_INVALID_GRAPH, "gradient: lost a gradient");
    const clrun_tensor_type *want = clrun__gfwd_type(g, t);
    const clrun_tensor_type *have = clrun__gtype(g, grad);
    if (have->rank != want->rank || clrun_tensor_elements(have) != clrun_tensor_elements(want))
        grad = clrun__greshape(g, clrun__gunbroadcast(g, grad, want), want);
    if (grad < 0)
        return CLRUN_ERROR_INVALID_GRAPH;
    if (g->grad[t] < 0) {
        g->grad[t] = grad;
        return CLRUN_OK;
    }
    clrun_tensor_id sum = clrun__gemit2(g, "add", g->grad[t], grad);
    if (sum < 0)
        return CLRUN_ERROR_INVALID_GRAPH;
    g->grad[t] = sum;
    return CLRUN_OK;
}

/* The gradient of wrt tensor t is complete: hand it over. */
static clrun_status finish(clrun__grad *g, clrun_tensor_id t)
{
    int32_t i = g->wrt_index[t];
    if (i < 0 || g->finished[i] || g->grad[t] < 0)
        return CLRUN_OK;
    g->finished[i] = true;
    if (g->done == NULL)
        return CLRUN_OK;
    return g->done(g, i, g->grad[t], g->done_user);
}

static clrun_status differentiate(clrun__grad *g, int32_t n)
{
    const clrun__node *node = &g->fwd->nodes[n];
    clrun_tensor_id dy[16];
    bool want[32];
    clrun_tensor_id dx[32];
    bool any_dy = false, any_want = false;
    for (int j = 0; j < node->output_count && j < 16; j++) {
        dy[j] = g->grad[node->outputs[j]];
        any_dy = any_dy || dy[j] >= 0;
    }
    for (int i = 0; i < node->input_count && i < 32; i++) {
        want[i] = g->needed[node->inputs[i]] && flows(node, i);
        any_want = any_want || want[i];
        dx[i] = -1;
    }
    if (!any_dy || !any_want)
        return CLRUN_OK;
    const clrun__grad_rule *rule = clrun__grad_rule_find(node->op->name);
    if (rule == NULL)
        return clrun__grad_failed(g, CLRUN_ERROR_UNSUPPORTED,
                                  "gradient: op '%s' (node writing %s) has no gradient rule",
                                  node->op->name,
                                  clrun__tensor_label(&g->fwd->tensors[node->outputs[0]]));
    g->node = n;
    clrun_status s = rule->rule(g, node, dy, want, dx);
    if (s != CLRUN_OK)
        return s;
    for (int i = 0; i < node->input_count && i < 32; i++)
        if (want[i] && dx[i] >= 0) {
            s = accumulate(g, node->inputs[i], dx[i]);
            if (s != CLRUN_OK)
                return s;
        }
    return CLRUN_OK;
}

/* The node's reads are done: inputs read by no earlier node have their whole gradient. */
static clrun_status count_reads(clrun__grad *g, const clrun__node *node)
{
    for (int i = 0; i < node->input_count; i++) {
        clrun_tensor_id t = node->inputs[i];
        bool seen = false;
        for (int k = 0; k < i; k++)
            seen = seen || node->inputs[k] == t;
        if (seen)
            continue;
        if (--g->pending[t] == 0) {
            clrun_status s = finish(g, t);
            if (s != CLRUN_OK)
                return s;
        }
    }
    return CLRUN_OK;
}

static clrun_status check_loss(const clrun_graph *fwd, clrun_tensor_id loss, char *err,
                               size_t errlen)
{
    if (loss < 0 || loss >= fwd->tensor_count) {
        snprintf(err, errlen, "gradient: the loss is no tensor of graph %s", fwd->name ? fwd->name : "");
        return CLRUN_ERROR_INVALID_ARGUMENT;
    }
    const clrun_tensor_type *t = &fwd->tensors[loss].type;
    if (!is_float(t->dtype) || clrun_tensor_elements(t) != 1) {
        char s[CLRUN__TYPE_TEXT];
        snprintf(err, errlen, "gradient: the loss %s is %s: it must be one float element "
                 "(reduce it to a scalar first)", clrun__tensor_label(&fwd->tensors[loss]),
                 clrun__type_format(t, s, sizeof s));
        return CLRUN_ERROR_INVALID_ARGUMENT;
    }
    return CLRUN_OK;
}

clrun_status clrun__grad_build(const clrun_graph *fwd, clrun_graph *out,
                               const clrun__grad_spec *spec, clrun_tensor_id *grads, bool *unused,
                               char *err, size_t errlen)
{
    char scratch[8];
    if (err == NULL || errlen == 0)
        err = scratch, errlen = sizeof scratch;
    err[0] = '\0';
    if (clrun__graph_has_guards(fwd)) { /* copied without guards, both branches would run */
        snprintf(err, errlen, "gradients of a graph with guarded nodes (an If whose condition is known only "
                 "at run time) are not supported");
        return CLRUN_ERROR_UNSUPPORTED;
    }
    clrun_status s = check_loss(fwd, spec->loss, err, errlen);
    if (s != CLRUN_OK)
        return s;
    int32_t nt = fwd->tensor_count;
    clrun__grad g = {.fwd = fwd, .out = out, .wrt = spec->wrt, .wrt_count = spec->wrt_count,
                     .done = spec->done, .done_user = spec->done_user, .node = -1,
                     .err = err, .errlen = errlen};
    g.grad = malloc(sizeof *g.grad * (size_t)nt);
    g.needed = calloc((size_t)nt, sizeof *g.needed);
    g.pending = calloc((size_t)nt, sizeof *g.pending);
    g.wrt_index = malloc(sizeof *g.wrt_index * (size_t)nt);
    bool *reached = calloc((size_t)nt, sizeof *reached);
    g.finished = calloc((size_t)(spec->wrt_count ? spec->wrt_count : 1), sizeof *g.finished);
    if (!g.finished || !g.grad || !g.needed || !g.pending || !g.wrt_index || !reached) {
        s = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        snprintf(err, errlen, "gradient: out of host memory");
        goto done;
    }
    for (int32_t t = 0; t < nt; t++)
        g.grad[t] = -1, g.wrt_index[t] = -1;
    for (int32_t i = 0; i < spec->wrt_count; i++) {
        clrun_tensor_id t = spec->wrt[i];
        if (t < 0 || t >= nt || fwd->tensors[t].kind == CLRUN__TENSOR_INTERMEDIATE ||
            !is_float(fwd->tensors[t].type.dtype)) {
            s = CLRUN_ERROR_INVALID_ARGUMENT;
            snprintf(err, errlen, "gradient: %s is no float input or constant of the graph",
                     t >= 0 && t < nt ? clrun__tensor_label(&fwd->tensors[t]) : "(bad id)");
            goto done;
        }
        if (g.wrt_index[t] >= 0) {
            s = CLRUN_ERROR_INVALID_ARGUMENT;
            snprintf(err, errlen, "gradient: %s is asked for twice",
                     clrun__tensor_label(&fwd->tensors[t]));
            goto done;
        }
        g.wrt_index[t] = i;
        g.needed[t] = true;
    }
    /* needed: depends on a wrt tensor (forward), and the loss depends on it (backward). */
    for (int32_t n = 0; n < fwd->node_count; n++) {
        const clrun__node *node = &fwd->nodes[n];
        bool any = false;
        for (int i = 0; i < node->input_count; i++)
            any = any || (g.needed[node->inputs[i]] && flows(node, i));
        for (int j = 0; j < node->output_count; j++)
            g.needed[node->outputs[j]] = any && is_float(fwd->tensors[node->outputs[j]].type.dtype);
    }
    clrun__grad_reach(fwd, spec->loss, reached);
    for (int32_t t = 0; t < nt; t++)
        g.needed[t] = g.needed[t] && reached[t];
    /* pending: nodes that read a needed tensor and lead to the loss. */
    for (int32_t n = 0; n < fwd->node_count; n++) {
        const clrun__node *node = &fwd->nodes[n];
        for (int i = 0; i < node->input_count; i++) {
            bool seen = false;
            for (int k = 0; k < i; k++)
                seen = seen || node->inputs[k] == node->inputs[i];
            if (!seen)
                g.pending[node->inputs[i]]++;
        }
    }
    /* Refuse an op without a rule on the loss' path before emitting anything. */
    for (int32_t n = fwd->node_count - 1; n >= 0; n--) {
        const clrun__node *node = &fwd->nodes[n];
        bool out_needed = false, in_needed = false;
        for (int j = 0; j < node->output_count; j++)
            out_needed = out_needed || g.needed[node->outputs[j]];
        for (int i = 0; i < node->input_count; i++)
            in_needed = in_needed || g.needed[node->inputs[i]];
        if (out_needed && in_needed && clrun__grad_rule_find(node->op->name) == NULL) {
            s = CLRUN_ERROR_UNSUPPORTED;
            snprintf(err, errlen, "gradient: op '%s' (node writing %s) has no gradient rule",
                     node->op->name, clrun__tensor_label(&fwd->tensors[node->outputs[0]]));
            goto done;
        }
    }
    /* The loss' own gradient: ones, or the caller's seed. */
    if (g.needed[spec->loss]) {
        clrun_tensor_id seed = spec->seed;
        if (seed < 0) {
            clrun_tensor_type one = fwd->tensors[spec->loss].type;
            char name[64];
            snprintf(name, sizeof name, "grad.seed");
            for (int k = 0; clrun__graph_find_ident(out, name) >= 0; k++)
                snprintf(name, sizeof name, "grad.seed%d", k);
            s = clrun_graph_add_constant(out, name, &one, NULL, CLRUN_FILL_ONES, 0, 0, 0, &seed);
            if (s != CLRUN_OK) {
                snprintf(err, errlen, "gradient: %s", clrun_graph_last_error(out));
                goto done;
            }
        }
        g.grad[spec->loss] = seed;
    }
    for (int32_t n = fwd->node_count - 1; n >= 0 && s == CLRUN_OK; n--) {
        const clrun__node *node = &fwd->nodes[n];
        bool out_needed = false;
        for (int j = 0; j < node->output_count; j++)
            out_needed = out_needed || g.needed[node->outputs[j]];
        if (out_needed)
            s = differentiate(&g, n);
        if (s == CLRUN_OK)
            s = count_reads(&g, node);
    }
    if (s != CLRUN_OK)
        goto done;
    /* What is left: wrt tensors read by no node (the loss itself), or not reached. */
    for (int32_t i = 0; i < spec->wrt_count && s == CLRUN_OK; i++) {
        clrun_tensor_id t = spec->wrt[i];
        bool zero = g.grad[t] < 0;
        if (unused)
            unused[i] = zero;
        if (zero) {
            g.node = -1;
            g.grad[t] = clrun__gzeros(&g, &fwd->tensors[t].type);
            if (g.grad[t] < 0) {
                s = CLRUN_ERROR_INVALID_GRAPH;
                break;
            }
            clrun__log(CLRUN_LOG_WARN, "gradient: the loss %s does not depend on %s: its "
                       "gradient is zeros", clrun__tensor_label(&fwd->tensors[spec->loss]),
                       clrun__tensor_label(&fwd->tensors[t]));
        }
        if (grads)
            grads[i] = g.grad[t];
        if (!g.finished[i] && !zero)
            s = finish(&g, t);
    }
done:
    if (s != CLRUN_OK && err[0] == '\0')
        snprintf(err, errlen, "gradient: %s", clrun_strerror(s));
    free(g.grad);
    free(g.needed);
    free(g.pending);
    free(g.wrt_index);
    free(reached);
    free(g.finished);
    return s;
}

clrun_status clrun_graph_trainable(const clrun_graph *graph, clrun_tensor_id loss,
                                   clrun_tensor_id *ids, int32_t capacity, int32_t *count)
{
    char err[512];
    if (graph == NULL || count == NULL)
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                                "clrun_graph_trainable: NULL graph or count");
    clrun_status s = check_loss(graph, loss, err, sizeof err);
    if (s != CLRUN_OK)
        return clrun__error_set(NULL, s, "%s", err);
    bool *reached = calloc((size_t)graph->tensor_count, sizeof *reached);
    if (reached == NULL)
        return clrun__error_set(NULL, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    clrun__grad_reach(graph, loss, reached);
    int32_t n = 0;
    for (int32_t t = 0; t < graph->tensor_count; t++) {
        const clrun__tensor *ft = &graph->tensors[t];
        if (ft->kind != CLRUN__TENSOR_CONSTANT || ft->type.dtype != CLRUN_F32 ||
            ft->type.rank < 1 || !reached[t])
            continue;
        if (ids && n < capacity)
            ids[n] = t;
        n++;
    }
    free(reached);
    *count = n;
    return CLRUN_OK;
}

clrun_status clrun_graph_gradient(const clrun_graph *graph, clrun_tensor_id loss,
                                  const clrun_tensor_id *wrt, int32_t wrt_count,
                                  clrun_graph **out, int32_t **unused, int32_t *unused_count,
                                  char *err, size_t errlen)
{
    char local[1024];
    if (err == NULL || errlen == 0)
        err = local, errlen = sizeof local;
    err[0] = '\0';
    if (out)
        *out = NULL;
    if (unused)
        *unused = NULL;
    if (unused_count)
        *unused_count = 0;
    if (graph == NULL || out == NULL || (wrt_count > 0 && wrt == NULL) || wrt_count < 0) {
        snprintf(err, errlen, "clrun_graph_gradient: NULL graph or out, or a bad wrt list");
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "%s", err);
    }
    clrun_tensor_id *chosen = NULL;
    bool *zero = NULL;
    clrun_tensor_id *grads = NULL;
    clrun_graph *g = NULL;
    clrun_status s = CLRUN_OK;
    if (wrt_count == 0) {
        s = clrun_graph_trainable(graph, loss, NULL, 0, &wrt_count);
        if (s != CLRUN_OK) {
            snprintf(err, errlen, "%s", clrun__error_get(NULL));
            return s;
        }
        chosen = malloc(sizeof *chosen * (size_t)(wrt_count ? wrt_count : 1));
        if (chosen == NULL)
            goto oom;
        clrun_graph_trainable(graph, loss, chosen, wrt_count, &wrt_count);
        wrt = chosen;
    }
    zero = calloc((size_t)(wrt_count ? wrt_count : 1), sizeof *zero);
    grads = malloc(sizeof *grads * (size_t)(wrt_count ? wrt_count : 1));
    if (zero == NULL || grads == NULL)
        goto oom;
    s = clrun_graph_create(graph->name, &g);
    if (s != CLRUN_OK)
        goto fail;
    s = clrun__grad_copy(graph, g, NULL, false, err, errlen);
    if (s != CLRUN_OK)
        goto fail;
    clrun__grad_spec spec = {.loss = loss, .wrt = wrt, .wrt_count = wrt_count, .seed = -1};
    s = clrun__grad_build(graph, g, &spec, grads, zero, err, errlen);
    if (s != CLRUN_OK)
        goto fail;
    s = clrun_graph_mark_output(g, loss);
    for (int32_t i = 0; i < wrt_count && s == CLRUN_OK; i++) {
        /* The gradient gets its reader's name: copy it under "grad.NAME". */
        char name[CLRUN__GRAPH_NAME_MAX + 1];
        snprintf(name, sizeof name, "grad.%s", graph->tensors[wrt[i]].name);
        clrun_tensor_id named = -1;
        const char *names[1] = {name};
        if (clrun__graph_find_ident(g, name) >= 0 || strlen(graph->tensors[wrt[i]].name) + 5 >
                                                         CLRUN__GRAPH_NAME_MAX)
            names[0] = NULL;
        if (names[0])
            s = clrun_graph_add_node(g, "copy", &grads[i], 1, names, 1, NULL, 0, &named);
        else
            named = grads[i];
        if (s == CLRUN_OK)
            s = clrun_graph_mark_output(g, named);
    }
    if (s != CLRUN_OK) {
        snprintf(err, errlen, "gradient: %s", clrun_graph_last_error(g));
        goto fail;
    }
    if (unused && unused_count) {
        int32_t n = 0;
        for (int32_t i = 0; i < wrt_count; i++)
            n += zero[i];
        if (n > 0) {
            *unused = malloc(sizeof **unused * (size_t)n);
            if (*unused == NULL)
                goto oom;
            n = 0;
            for (int32_t i = 0; i < wrt_count; i++)
                if (zero[i])
                    (*unused)[n++] = i;
            *unused_count = n;
        }
    }
    free(chosen);
    free(zero);
    free(grads);
    *out = g;
    return CLRUN_OK;
oom:
    s = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    snprintf(err, errlen, "gradient: out of host memory");
fail:
    free(chosen);
    free(zero);
    free(grads);
    clrun_graph_destroy(g);
    return clrun__error_set(NULL, s, "%s", err);
}
