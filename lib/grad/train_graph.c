/* Building the train step graph: the model with its loss, the parameters turned into donated
 * inputs, the backward pass, and each parameter's optimizer update emitted where its gradient
 * is complete. The updates are written with elementwise ops, in PyTorch's order of operations,
 * so that fusion makes each one kernel and the results follow PyTorch's within rounding. */
#include "grad/train_graph.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "grad/grad.h"
#include "grad/train_bn.h"

const char *clrun_loss_kind_name(clrun_loss_kind kind)
{
    switch (kind) {
    case CLRUN_LOSS_XENT: return "xent";
    case CLRUN_LOSS_MSE: return "mse";
    case CLRUN_LOSS_SCALAR: return "scalar";
    }
    return "?";
}

const char *clrun_optimizer_kind_name(clrun_optimizer_kind kind)
{
    switch (kind) {
    case CLRUN_OPTIMIZER_SGD: return "sgd";
    case CLRUN_OPTIMIZER_ADAM: return "adam";
    case CLRUN_OPTIMIZER_ADAMW: return "adamw";
    }
    return "?";
}

void clrun_optimizer_init(clrun_optimizer *o, clrun_optimizer_kind kind)
{
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->lr = kind == CLRUN_OPTIMIZER_SGD ? 0.01 : 0.001;
    o->beta1 = 0.9;
    o->beta2 = 0.999;
    o->eps = 1e-8;
    o->weight_decay = kind == CLRUN_OPTIMIZER_ADAMW ? 0.01 : 0.0;
}

void clrun_train_graph_options_init(clrun_train_graph_options *options)
{
    memset(options, 0, sizeof *options);
    options->loss = CLRUN_LOSS_XENT;
    options->label_dtype = CLRUN_I64;
    clrun_optimizer_init(&options->optimizer, CLRUN_OPTIMIZER_ADAM);
}

/* ---- building ---- */

typedef struct builder {
    const clrun_train_graph_options *options;
    clrun__train_graph *tg;
    clrun_graph *step;
    clrun_tensor_id *param_ids;  /* the parameters, as tensors of the step */
    int32_t param_count;
    clrun_tensor_id hyper[CLRUN__HYPER_COUNT]; /* -1 when the optimizer has no use for it */
    /* Per tensor of the step graph that is an input: its role (sized as the step grows). */
    clrun__train_slot *by_id;
    int32_t by_id_capacity;
    int32_t outputs;             /* outputs marked so far */
    char *err;
    size_t errlen;
    /* Split update (clrun__train_graph_build's split): in the step's builder, the apply
     * graph's (whose `step` is the apply graph); in the apply graph's, the step's. */
    struct builder *apply;
    struct builder *link;
    uint32_t counter;            /* the apply graph's builder: fresh names across updates */
} builder;

static clrun_status failf(builder *b, clrun_status s, const char *format, ...) CLRUN__PRINTF(3, 4);
static clrun_status failf(builder *b, clrun_status s, const char *format, ...)
{
    if (b->err && b->errlen && b->err[0] == '\0') {
        va_list args;
        va_start(args, format);
        vsnprintf(b->err, b->errlen, format, args);
        va_end(args);
    }
    return s;
}

static clrun__train_slot *slot_for(builder *b, clrun_tensor_id id)
{
    if (id >= b->by_id_capacity) {
        int32_t cap = b->by_id_capacity ? b->by_id_capacity : 64;
        while (cap <= id)
            cap *= 2;
        clrun__train_slot *grown = realloc(b->by_id, sizeof *grown * (size_t)cap);
        if (grown == NULL)
            return NULL;
        for (int32_t i = b->by_id_capacity; i < cap; i++) {
            memset(&grown[i], 0, sizeof grown[i]);
            grown[i].role = CLRUN__SLOT_DATA;
            grown[i].output_index = -1;
            grown[i].param = -1;
            grown[i].grad_output = -1;
        }
        b->by_id = grown;
        b->by_id_capacity = cap;
    }
    return &b->by_id[id];
}

static clrun_status mark(builder *b, clrun_tensor_id id, int32_t *index)
{
    clrun_status s = clrun_graph_mark_output(b->step, id);
    if (s != CLRUN_OK)
        return failf(b, s, "train: %s", clrun_graph_last_error(b->step));
    if (index)
        *index = b->outputs;
    b->outputs++;
    return CLRUN_OK;
}

/* A new input of the step called `name` (made unique with a counter), of `type`. */
static clrun_status add_input(builder *b, const char *name, const clrun_tensor_type *type,
                              bool donated, clrun_tensor_id *id)
{
    char unique[CLRUN__GRAPH_NAME_MAX + 1];
    snprintf(unique, sizeof unique, "%s", name);
    for (int k = 1; clrun__graph_find_ident(b->step, unique) >= 0; k++)
        snprintf(unique, sizeof unique, "%.*s.%d", 200, name, k);
    clrun_status s = clrun_graph_add_input(b->step, unique, type, donated, id);
    if (s != CLRUN_OK)
        return failf(b, s, "train: %s", clrun_graph_last_error(b->step));
    return CLRUN_OK;
}

/* An input of the apply graph named exactly as the step's input `twin` (split update). */
static clrun_status add_twin(builder *a, const builder *b, clrun_tensor_id twin, bool donated,
                             clrun_tensor_id *id)
{
    clrun_status s = clrun_graph_add_input(a->step, clrun_graph_tensor_ident(b->step, twin),
                                           clrun_graph_tensor_type(b->step, twin), donated, id);
    if (s != CLRUN_OK)
        return failf(a, s, "train: %s", clrun_graph_last_error(a->step));
    clrun__train_slot *slot = slot_for(a, *id);
    if (slot == NULL)
        return failf(a, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "train: out of host memory");
    slot->input = twin; /* the step's tensor it stands for */
    return CLRUN_OK;
}

static clrun_status add_state(builder *b, int32_t param, const char *kind, clrun_tensor_id *id)
{
    if (b->link) { /* the apply graph: the state is an (unread) input of the step too */
        clrun_tensor_id twin;
        clrun_status s = add_state(b->link, param, kind, &twin);
        return s != CLRUN_OK ? s : add_twin(b, b->link, twin, !b->options->no_donation, id);
    }
    clrun_tensor_id p = b->param_ids[param];
    char name[CLRUN__GRAPH_NAME_MAX + 1];
    snprintf(name, sizeof name, "%.*s.%s", 200, clrun_graph_tensor_ident(b->step, p), kind);
    clrun_status s = add_input(b, name, clrun_graph_tensor_type(b->step, p),
                               !b->options->no_donation && b->apply == NULL, id);
    if (s != CLRUN_OK)
        return s;
    clrun__train_slot *slot = slot_for(b, *id);
    if (slot == NULL)
        return failf(b, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "train: out of host memory");
    slot->role = CLRUN__SLOT_STATE;
    slot->param = param;
    snprintf(slot->state_kind, sizeof slot->state_kind, "%s", kind);
    b->tg->state_count++;
    return CLRUN_OK;
}

static clrun_status mark_state(builder *b, clrun_tensor_id state, clrun_tensor_id next)
{
    if (b->link) /* the apply graph's output, recorded on the step's slot */
        return mark(b, next, &slot_for(b->link, slot_for(b, state)->input)->output_index);
    return mark(b, next, &slot_for(b, state)->output_index);
}

static clrun_status update(clrun__grad *g, int32_t i, clrun_tensor_id grad, void *user);

/* Split update: parameter i's gradient is an output of the step; its update goes into the apply
 * graph, reading the gradient as reduced by the trainer's hook from an input of its own (an
 * input of the step too, unread there, so that every block has one slot). */
static clrun_status update_apply(clrun__grad *g, int32_t i, clrun_tensor_id grad, builder *b)
{
    builder *a = b->apply;
    clrun_tensor_id p = b->param_ids[i], in, twin;
    char name[CLRUN__GRAPH_NAME_MAX + 1];
    snprintf(name, sizeof name, "%.*s.grad", 200, clrun_graph_tensor_ident(b->step, p));
    clrun_status s = mark(b, grad, &slot_for(b, p)->grad_output);
    if (s == CLRUN_OK)
        s = add_input(b, name, clrun_graph_tensor_type(b->step, p), false, &twin);
    if (s != CLRUN_OK)
        return s;
    clrun__train_slot *slot = slot_for(b, twin);
    if (slot == NULL)
        return failf(b, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "train: out of host memory");
    slot->role = CLRUN__SLOT_GRAD;
    slot->param = i; /* until the slots are made: the parameter's index */
    if ((s = add_twin(a, b, twin, false, &in)) != CLRUN_OK)
        return s;
    clrun__grad ga = {.fwd = g->fwd, .out = a->step, .node = -1, .counter = a->counter,
                      .err = g->err, .errlen = g->errlen};
    s = update(&ga, i, in, a);
    a->counter = ga.counter;
    return s;
}

/* A second node computing what grad's producer computes, where that is a weight gradient's
 * product (matmul, conv2d_grad_weight) that nothing else reads; else grad itself. Adam's two
 * state updates each read the gradient: with one product apiece, each runs in its product's
 * epilogue in place over its donated state (lib/fuse/epilogue.c), as SGD's momentum does, and
 * the weight-sized gradient is never stored, for a second pass of the product. The kernels are
 * deterministic: both products give the same bits, fused or not. -1 on failure. */
static clrun_tensor_id second_product(clrun__grad *g, clrun_tensor_id grad)
{
    const clrun__tensor *t = &g->out->tensors[grad];
    if (t->producer < 0 || t->is_output)
        return grad;
    const clrun__node *n = &g->out->nodes[t->producer];
    if (n->output_count != 1 || n->guarded || n->input_count > 3 ||
        (strcmp(n->op->name, "matmul") != 0 && strcmp(n->op->name, "conv2d_grad_weight") != 0))
        return grad;
    for (int32_t k = 0; k < g->out->node_count; k++)
        for (int i = 0; i < g->out->nodes[k].input_count; i++)
            if (g->out->nodes[k].inputs[i] == grad)
                return grad;
    clrun_tensor_id in[3];
    for (int i = 0; i < n->input_count; i++)
        in[i] = n->inputs[i];
    /* the node's attrs are its own allocation: they stay where they are as the graph grows */
    const clrun_attr *attrs = n->attrs;
    int count = n->input_count, attr_count = n->attr_count;
    return clrun__gemit(g, n->op->name, in, count, attrs, attr_count);
}

/* The update of parameter i from its complete gradient: PyTorch's single-tensor SGD, Adam and
 * AdamW, operation by operation. */
static clrun_status update(clrun__grad *g, int32_t i, clrun_tensor_id grad, void *user)
{
    builder *b = user;
    const clrun_optimizer *o = &b->options->optimizer;
    clrun_tensor_id p = b->param_ids[i], gr = grad, next = -1;
    clrun_status s = CLRUN_OK;
    g->node = -1;
    if (b->apply)
        return update_apply(g, i, grad, b);
    if (b->link == NULL && b->options->keep_gradients &&
        (s = mark(b, grad, &slot_for(b, p)->grad_output)) != CLRUN_OK)
        return s;
    if (o->kind == CLRUN_OPTIMIZER_SGD) {
        if (o->weight_decay != 0.0)
            gr = clrun__gemit2(g, "add", gr, clrun__gscale(g, p, o->weight_decay, 0.0));
        if (o->momentum != 0.0) {
            clrun_tensor_id buf;
            if ((s = add_state(b, i, "momentum", &buf)) != CLRUN_OK)
                return s;
            clrun_tensor_id buf1 = clrun__gemit2(g, "add", clrun__gscale(g, buf, o->momentum, 0.0), gr);
            if (buf1 < 0 || (s = mark_state(b, buf, buf1)) != CLRUN_OK)
                return s != CLRUN_OK ? s : CLRUN_ERROR_INVALID_GRAPH;
            gr = o->nesterov ? clrun__gemit2(g, "add", gr, clrun__gscale(g, buf1, o->momentum, 0.0))
                             : buf1;
        }
        next = clrun__gemit2(g, "sub", p, clrun__gemit2(g, "mul", gr, b->hyper[CLRUN__HYPER_LR]));
    } else {
        clrun_tensor_id p1 = p;
        /* the second moment from a product of its own (second_product), found before anything
         * reads the gradient; not with Adam's L2 decay, whose two moments' groups would each
         * read p beside the product and leave p's donation unused */
        bool l2 = o->kind == CLRUN_OPTIMIZER_ADAM && o->weight_decay != 0.0;
        clrun_tensor_id gr2 = b->options->keep_gradients || l2 ? grad : second_product(g, grad);
        if (o->kind == CLRUN_OPTIMIZER_ADAMW && o->weight_decay != 0.0)
            p1 = clrun__gemit2(g, "mul", p, b->hyper[CLRUN__HYPER_DECAY]);
        else if (o->weight_decay != 0.0)
            gr = clrun__gemit2(g, "add", gr, clrun__gscale(g, p, o->weight_decay, 0.0));
        clrun_tensor_id m, v;
        if ((s = add_state(b, i, "exp_avg", &m)) != CLRUN_OK ||
            (s = add_state(b, i, "exp_avg_sq", &v)) != CLRUN_OK)
            return s;
        clrun_tensor_id m1 = clrun__gemit2(g, "add", clrun__gscale(g, m, o->beta1, 0.0),
                                           clrun__gscale(g, gr, 1.0 - o->beta1, 0.0));
        if (gr2 == grad)
            gr2 = gr;
        clrun_tensor_id v1 = clrun__gemit2(g, "add", clrun__gscale(g, v, o->beta2, 0.0),
                                           clrun__gscale(g, clrun__gemit2(g, "mul", gr2, gr2),
                                                         1.0 - o->beta2, 0.0));
        if (m1 < 0 || v1 < 0)
            return CLRUN_ERROR_INVALID_GRAPH;
        if ((s = mark_state(b, m, m1)) != CLRUN_OK || (s = mark_state(b, v, v1)) != CLRUN_OK)
            return s;
        clrun_tensor_id denom = clrun__gscale(
            g, clrun__gemit2(g, "div", clrun__gemit1(g, "sqrt", v1), b->hyper[CLRUN__HYPER_BC2_SQRT]),
            1.0, o->eps);
        clrun_tensor_id step = clrun__gemit2(g, "mul", clrun__gemit2(g, "div", m1, denom),
                                             b->hyper[CLRUN__HYPER_STEP_SIZE]);
        next = clrun__gemit2(g, "sub", p1, step);
    }
    if (next < 0)
        return CLRUN_ERROR_INVALID_GRAPH;
    if (b->link)
        return mark(b, next, &slot_for(b->link, b->link->param_ids[i])->output_index);
    return mark(b, next, &slot_for(b, p)->output_index);
}

static clrun_status check_optimizer(builder *b, const clrun_optimizer *o)
{
    if (o->kind != CLRUN_OPTIMIZER_SGD && o->kind != CLRUN_OPTIMIZER_ADAM &&
        o->kind != CLRUN_OPTIMIZER_ADAMW)
        return failf(b, CLRUN_ERROR_INVALID_ARGUMENT, "train: unknown optimizer %d", (int)o->kind);
    if (!(o->lr > 0.0) || o->lr > 1e6)
        return failf(b, CLRUN_ERROR_INVALID_ARGUMENT, "train: learning rate %g: must be > 0", o->lr);
    if (!(o->weight_decay >= 0.0) || o->weight_decay > 1e6)
        return failf(b, CLRUN_ERROR_INVALID_ARGUMENT, "train: weight decay %g: must be >= 0",
                     o->weight_decay);
    if (o->kind == CLRUN_OPTIMIZER_SGD) {
        if (!(o->momentum >= 0.0 && o->momentum < 1.0))
            return failf(b, CLRUN_ERROR_INVALID_ARGUMENT, "train: momentum %g: must be in [0, 1)",
                         o->momentum);
        if (o->nesterov && o->momentum == 0.0)
            return failf(b, CLRUN_ERROR_INVALID_ARGUMENT, "train: Nesterov momentum needs a "
                         "momentum above 0");
        return CLRUN_OK;
    }
    if (!(o->beta1 >= 0.0 && o->beta1 < 1.0) || !(o->beta2 >= 0.0 && o->beta2 < 1.0))
        return failf(b, CLRUN_ERROR_INVALID_ARGUMENT, "train: betas (%g, %g): each must be in "
                     "[0, 1)", o->beta1, o->beta2);
    if (!(o->eps > 0.0) || o->eps > 1.0)
        return failf(b, CLRUN_ERROR_INVALID_ARGUMENT, "train: eps %g: must be in (0, 1]", o->eps);
    return CLRUN_OK;
}

/* A node of one output named by the builder, for the loss. */
static clrun_tensor_id node(builder *b, clrun_graph *graph, const char *op, const char *name,
                            const clrun_tensor_id *inputs, int count, const clrun_attr *attrs,
                            int attr_count)
{
    char unique[CLRUN__GRAPH_NAME_MAX + 1];
    snprintf(unique, sizeof unique, "%s", name);
    for (int k = 1; clrun__graph_find_ident(graph, unique) >= 0; k++)
        snprintf(unique, sizeof unique, "%s.%d", name, k);
    const char *names[1] = {unique};
    clrun_tensor_id id = -1;
    if (clrun_graph_add_node(graph, op, inputs, count, names, 1, attrs, attr_count, &id) != CLRUN_OK) {
        failf(b, CLRUN_ERROR_INVALID_GRAPH, "train: the loss: %s", clrun_graph_last_error(graph));
        return -1;
    }
    return id;
}

/* Appends the loss (and for xent the count of correct rows) to `graph`, a copy of the model:
 * *target gets the labels' or targets' input (-1 for a scalar loss). */
static clrun_status add_loss(builder *b, clrun_graph *graph, clrun_tensor_id at,
                             clrun_tensor_id *target, clrun_tensor_id *loss, clrun_tensor_id *correct,
                             clrun_tensor_id *rows_out, clrun_tensor_id *hits_out)
{
    *rows_out = -1;
    *hits_out = -1;
    const clrun_train_graph_options *o = b->options;
    /* A copy: the graph's tensors move as inputs and nodes are added. */
    const clrun_tensor_type logits = *clrun_graph_tensor_type(graph, at), *t = &logits;
    char type_text[CLRUN__TYPE_TEXT];
    clrun__type_format(t, type_text, sizeof type_text);
    const char *label = clrun_graph_tensor_name(graph, at);
    *target = -1;
    *correct = -1;
    if (o->loss == CLRUN_LOSS_SCALAR) {
        if (t->dtype != CLRUN_F32 || clrun_tensor_elements(t) != 1)
            return failf(b, CLRUN_ERROR_INVALID_ARGUMENT, "train: the loss %s is %s: a loss must "
                         "be one f32 element (reduce it, or name logits with the xent loss)",
                         label, type_text);
        *loss = at;
        return CLRUN_OK;
    }
    if (t->dtype != CLRUN_F32)
        return failf(b, CLRUN_ERROR_INVALID_ARGUMENT, "train: %s loss on %s, which is %s: it "
                     "needs f32", clrun_loss_kind_name(o->loss), label, type_text);
    clrun_attr all[1] = {clrun__gattr_int("keepdims", 0)};
    if (o->loss == CLRUN_LOSS_MSE) {
        clrun_status s = clrun_graph_add_input(graph, "targets", t, false, target);
        if (s != CLRUN_OK)
            s = clrun_graph_add_input(graph, "train.targets", t, false, target);
        if (s != CLRUN_OK)
            return failf(b, s, "train: %s", clrun_graph_last_error(graph));
        clrun_tensor_id in[2] = {at, *target};
        clrun_tensor_id diff = node(b, graph, "sub", "train.error", in, 2, NULL, 0);
        clrun_tensor_id sq[2] = {diff, diff};
        clrun_tensor_id square = diff < 0 ? -1 : node(b, graph, "mul", "train.square", sq, 2, NULL, 0);
        *loss = square < 0 ? -1 : node(b, graph, "reduce_mean", "loss", &square, 1, all, 1);
        return *loss < 0 ? CLRUN_ERROR_INVALID_GRAPH : CLRUN_OK;
    }
    if (t->rank < 2)
        return failf(b, CLRUN_ERROR_INVALID_ARGUMENT, "train: xent loss on %s, which is %s: "
                     "logits are [..., classes] with at least one row dimension", label, type_text);
    if (o->label_dtype != CLRUN_I64 && o->label_dtype != CLRUN_I32)
        return failf(b, CLRUN_ERROR_INVALID_ARGUMENT, "train: labels must be i32 or i64, not %s",
                     clrun_dtype_name(o->label_dtype));
    clrun_tensor_type lt = {.dtype = o->label_dtype, .rank = t->rank - 1};
    for (int d = 0; d < lt.rank; d++)
        lt.shape[d] = t->shape[d];
    clrun_status s = clrun_graph_add_input(graph, "labels", &lt, false, target);
    if (s != CLRUN_OK)
        s = clrun_graph_add_input(graph, "train.labels", &lt, false, target);
    if (s != CLRUN_OK)
        return failf(b, s, "train: %s", clrun_graph_last_error(graph));
    clrun_tensor_id in[2] = {at, *target};
    clrun_tensor_id rows = node(b, graph, "softmax_xent", "train.xent", in, 2, NULL, 0);
    *loss = rows < 0 ? -1 : node(b, graph, "reduce_mean", "loss", &rows, 1, all, 1);
    if (*loss < 0)
        return CLRUN_ERROR_INVALID_GRAPH;
    clrun_attr am[2] = {clrun__gattr_int("axis", -1), clrun__gattr_int("keepdims", 0)};
    clrun_tensor_id arg = node(b, graph, "argmax", "train.predicted", &at, 1, am, 2);
    clrun_tensor_id labels64 = *target;
    if (o->label_dtype == CLRUN_I32) {
        clrun_attr to = clrun__gattr_int("to", CLRUN_I64);
        labels64 = node(b, graph, "cast", "train.labels64", target, 1, &to, 1);
    }
    clrun_tensor_id eq_in[2] = {arg, labels64};
    clrun_tensor_id eq = arg < 0 || labels64 < 0 ? -1 : node(b, graph, "equal", "train.hit", eq_in, 2, NULL, 0);
    clrun_attr to_f32 = clrun__gattr_int("to", CLRUN_F32);
    clrun_tensor_id hits = eq < 0 ? -1 : node(b, graph, "cast", "train.hits", &eq, 1, &to_f32, 1);
    *correct = hits < 0 ? -1 : node(b, graph, "reduce_sum", "correct", &hits, 1, all, 1);
    *rows_out = rows;
    *hits_out = hits;
    return *correct < 0 ? CLRUN_ERROR_INVALID_GRAPH : CLRUN_OK;
}

/* The parameters: those named, or every trainable weight of the loss. */
static clrun_status choose_params(builder *b, const clrun_graph *lossg, clrun_tensor_id loss,
                                  bool *promote)
{
    const clrun_train_graph_options *o = b->options;
    int32_t n = lossg->tensor_count;
    bool *reached = calloc((size_t)n, sizeof *reached);
    if (reached == NULL)
        return failf(b, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "train: out of host memory");
    clrun__grad_reach(lossg, loss, reached);
    clrun_status s = CLRUN_OK;
    if (o->params == NULL) {
        for (int32_t t = 0; t < n; t++) {
            const clrun__tensor *ft = &lossg->tensors[t];
            promote[t] = ft->kind == CLRUN__TENSOR_CONSTANT && ft->type.dtype == CLRUN_F32 &&
                         ft->type.rank >= 1 && reached[t];
        }
    } else {
        for (int32_t i = 0; i < o->param_count && s == CLRUN_OK; i++) {
            const char *name = o->params[i] ? o->params[i] : "(null)";
            clrun_tensor_id t = o->params[i] ? clrun_graph_find(lossg, name) : -1;
            if (t < 0 || lossg->tensors[t].kind != CLRUN__TENSOR_CONSTANT ||
                lossg->tensors[t].type.dtype != CLRUN_F32) {
                s = failf(b, CLRUN_ERROR_INVALID_ARGUMENT, "train: parameter %s is no f32 "
                          "constant (weight) of the model", name);
                break;
            }
            if (promote[t]) {
                s = failf(b, CLRUN_ERROR_INVALID_ARGUMENT, "train: parameter %s named twice", name);
                break;
            }
            if (!reached[t]) {
                /* PyTorch leaves a parameter without a gradient alone: so does the step. */
                clrun__log(CLRUN_LOG_WARN, "train: the loss does not depend on %s: it stays "
                           "as it is", name);
                char **grown = realloc(b->tg->frozen, sizeof *grown * (size_t)(b->tg->frozen_count + 1));
                char *copy = grown ? strdup(name) : NULL;
                if (grown)
                    b->tg->frozen = grown;
                if (copy == NULL) {
                    s = failf(b, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "train: out of host memory");
                    break;
                }
                b->tg->frozen[b->tg->frozen_count++] = copy;
                continue;
            }
            promote[t] = true;
        }
    }
    free(reached);
    return s;
}

/* The evaluation graph: the model as given with its loss; every constant that is state of the
 * step (a parameter or a running statistic, promote[] of lossg) an input fed from that state. */
static clrun_status build_eval(builder *b, const clrun_graph *model, clrun_tensor_id at,
                               const clrun_graph *lossg, const bool *promote, clrun_tensor_id *map)
{
    clrun__train_graph *out = b->tg;
    clrun__train_bn *none = NULL;
    int32_t none_count = 0;
    clrun_graph *plain = NULL;
    bool *as_input = NULL;
    clrun_status s = clrun_graph_create(model->name, &plain);
    if (s == CLRUN_OK)
        s = clrun__train_copy_model(model, plain, false, map, &none, &none_count, b->err, b->errlen);
    clrun_tensor_id target = -1, loss = -1, correct = -1, rows = -1, hits = -1;
    if (s == CLRUN_OK)
        s = add_loss(b, plain, map[at], &target, &loss, &correct, &rows, &hits);
    if (s == CLRUN_OK && (as_input = calloc((size_t)plain->tensor_count, sizeof *as_input)) == NULL)
        s = failf(b, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "train: out of host memory");
    for (int32_t t = 0; s == CLRUN_OK && t < plain->tensor_count; t++) {
        clrun_tensor_id same = clrun__graph_find_ident(lossg, plain->tensors[t].name);
        as_input[t] = plain->tensors[t].kind == CLRUN__TENSOR_CONSTANT && same >= 0 && promote[same];
    }
    if (s == CLRUN_OK && (s = clrun_graph_create(model->name, &out->eval)) == CLRUN_OK)
        s = clrun__grad_copy(plain, out->eval, as_input, false, b->err, b->errlen);
    out->eval_per_row = rows >= 0;
    if (s == CLRUN_OK && ((s = clrun_graph_mark_output(out->eval, rows >= 0 ? rows : loss)) != CLRUN_OK ||
                          (hits >= 0 && (s = clrun_graph_mark_output(out->eval, hits)) != CLRUN_OK)))
        failf(b, s, "train: %s", clrun_graph_last_error(out->eval));
    free(none);
    free(as_input);
    clrun_graph_destroy(plain);
    return s;
}

static const char *const hyper_names[CLRUN__HYPER_COUNT] = {
    "train.lr", "train.step_size", "train.bc2_sqrt", "train.decay", "train.seed",
};

clrun_status clrun__train_graph_build(const clrun_graph *model,
                                      const clrun_train_graph_options *options, bool split,
                                      clrun__train_graph *out, char *err, size_t errlen)
{
    char scratch[8];
    if (err == NULL || errlen == 0)
        err = scratch, errlen = sizeof scratch;
    err[0] = '\0';
    memset(out, 0, sizeof *out);
    out->correct_output = -1;
    builder b = {.options = options, .tg = out, .err = err, .errlen = errlen};
    builder a = {.options = options, .tg = out, .err = err, .errlen = errlen, .link = &b};
    for (int h = 0; h < CLRUN__HYPER_COUNT; h++)
        b.hyper[h] = a.hyper[h] = -1;
    clrun_graph *lossg = NULL, *fwd = NULL;
    clrun_tensor_id *map = NULL;
    clrun__train_bn *bns = NULL;
    int32_t bn_count = 0;
    bool *promote = NULL;
    clrun_tensor_id *grads = NULL;
    clrun_status s = check_optimizer(&b, &options->optimizer);
    if (s != CLRUN_OK)
        goto fail;
    if (options->loss != CLRUN_LOSS_XENT && options->loss != CLRUN_LOSS_MSE &&
        options->loss != CLRUN_LOSS_SCALAR) {
        s = failf(&b, CLRUN_ERROR_INVALID_ARGUMENT, "train: unknown loss %d", (int)options->loss);
        goto fail;
    }
    clrun_tensor_id at = options->loss_tensor ? clrun_graph_find(model, options->loss_tensor) : -1;
    if (at < 0) {
        s = failf(&b, CLRUN_ERROR_INVALID_ARGUMENT, "train: the model has no tensor '%s' to "
                  "take the loss of", options->loss_tensor ? options->loss_tensor : "(none given)");
        goto fail;
    }
    /* The model (batch norms in training mode) and its loss: what the gradients are taken of. */
    map = malloc(sizeof *map * (size_t)(model->tensor_count ? model->tensor_count : 1));
    if (map == NULL) {
        s = failf(&b, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "train: out of host memory");
        goto fail;
    }
    if ((s = clrun_graph_create(model->name, &lossg)) != CLRUN_OK ||
        (s = clrun__train_copy_model(model, lossg, true, map, &bns, &bn_count, err, errlen)) != CLRUN_OK)
        goto fail;
    clrun_tensor_id target = -1, loss = -1, correct = -1, rows = -1, hits = -1;
    out->logits = map[at];
    if ((s = add_loss(&b, lossg, map[at], &target, &loss, &correct, &rows, &hits)) != CLRUN_OK)
        goto fail;
    promote = calloc((size_t)lossg->tensor_count, sizeof *promote);
    if (promote == NULL) {
        s = failf(&b, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "train: out of host memory");
        goto fail;
    }
    if ((s = choose_params(&b, lossg, loss, promote)) != CLRUN_OK)
        goto fail;
    for (int32_t t = 0; t < lossg->tensor_count; t++)
        b.param_count += promote[t];
    if (b.param_count == 0) {
        s = failf(&b, CLRUN_ERROR_INVALID_ARGUMENT, "train: the loss on %s depends on no weight "
                  "to train (no f32 constant of rank >= 1 reaches it through a gradient)",
                  clrun_graph_tensor_name(model, at));
        goto fail;
    }
    b.param_ids = malloc(sizeof *b.param_ids * (size_t)b.param_count);
    grads = malloc(sizeof *grads * (size_t)b.param_count);
    if (b.param_ids == NULL || grads == NULL) {
        s = failf(&b, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "train: out of host memory");
        goto fail;
    }
    for (int32_t t = 0, i = 0; t < lossg->tensor_count; t++)
        if (promote[t])
            b.param_ids[i++] = t;
    out->param_count = b.param_count;
    /* The running statistics of batch norms are state too: donated inputs, updated. */
    for (int32_t k = 0; k < bn_count; k++)
        promote[bns[k].mean] = promote[bns[k].var] = true;
    /* The forward with the parameters as donated inputs, and the step built on a copy of it
     * (the same ids: the gradient reads the one while it writes the other). */
    if ((s = clrun_graph_create(model->name, &fwd)) != CLRUN_OK ||
        (s = clrun__grad_copy(lossg, fwd, promote, !options->no_donation, err, errlen)) != CLRUN_OK ||
        (s = clrun_graph_create(model->name, &b.step)) != CLRUN_OK ||
        (s = clrun__grad_copy(fwd, b.step, NULL, false, err, errlen)) != CLRUN_OK)
        goto fail;
    /* Evaluation: the model as given (batch norms by their running statistics) and its loss,
     * the parameters and statistics fed from the state, kept. */
    if ((s = build_eval(&b, model, at, lossg, promote, map)) != CLRUN_OK)
        goto fail;
    clrun_graph_destroy(lossg);
    lossg = NULL;
    for (int32_t i = 0; i < b.param_count; i++) {
        clrun__train_slot *slot = slot_for(&b, b.param_ids[i]);
        if (slot == NULL) {
            s = failf(&b, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "train: out of host memory");
            goto fail;
        }
        slot->role = CLRUN__SLOT_PARAM;
    }
    if (split) { /* the step reads the parameters; the apply graph updates them in place */
        b.apply = &a;
        a.param_ids = malloc(sizeof *a.param_ids * (size_t)b.param_count);
        if (a.param_ids == NULL) {
            s = failf(&b, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "train: out of host memory");
            goto fail;
        }
        if ((s = clrun_graph_create(model->name, &a.step)) != CLRUN_OK)
            goto fail;
        for (int32_t i = 0; i < b.param_count && s == CLRUN_OK; i++)
            if ((s = clrun_graph_set_donated(b.step, b.param_ids[i], false)) != CLRUN_OK ||
                (s = add_twin(&a, &b, b.param_ids[i], !options->no_donation,
                              &a.param_ids[i])) != CLRUN_OK)
                goto fail;
    }
    if (target >= 0) {
        clrun__train_slot *slot = slot_for(&b, target);
        if (slot == NULL) {
            s = failf(&b, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "train: out of host memory");
            goto fail;
        }
        slot->role = CLRUN__SLOT_TARGET;
    }
    /* A dropout seed the model takes as an input is the trainer's to feed. */
    for (int32_t t = 0; t < b.step->tensor_count; t++) {
        const clrun__tensor *ft = &b.step->tensors[t];
        if (ft->kind != CLRUN__TENSOR_INPUT || ft->type.dtype != CLRUN_I64 ||
            clrun_tensor_elements(&ft->type) != 1)
            continue;
        bool seed_only = false, other = false;
        for (int32_t n = 0; n < b.step->node_count; n++)
            for (int i = 0; i < b.step->nodes[n].input_count; i++)
                if (b.step->nodes[n].inputs[i] == t) {
                    bool seed = strcmp(b.step->nodes[n].op->name, "dropout") == 0 && i == 1;
                    seed_only = seed_only || seed;
                    other = other || !seed;
                }
        if (!seed_only || other)
            continue;
        clrun__train_slot *slot = slot_for(&b, t);
        if (slot == NULL) {
            s = failf(&b, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "train: out of host memory");
            goto fail;
        }
        slot->role = CLRUN__SLOT_HYPER;
        slot->hyper = CLRUN__HYPER_SEED;
    }
    const clrun_optimizer *o = &options->optimizer;
    bool use[CLRUN__HYPER_COUNT] = {
        [CLRUN__HYPER_LR] = o->kind == CLRUN_OPTIMIZER_SGD,
        [CLRUN__HYPER_STEP_SIZE] = o->kind != CLRUN_OPTIMIZER_SGD,
        [CLRUN__HYPER_BC2_SQRT] = o->kind != CLRUN_OPTIMIZER_SGD,
        [CLRUN__HYPER_DECAY] = o->kind == CLRUN_OPTIMIZER_ADAMW && o->weight_decay != 0.0,
    };
    for (int h = 0; h < CLRUN__HYPER_COUNT; h++) {
        if (!use[h])
            continue;
        clrun_tensor_type scalar = {.dtype = h == CLRUN__HYPER_SEED ? CLRUN_I64 : CLRUN_F32, .rank = 0};
        if ((s = add_input(&b, hyper_names[h], &scalar, false, &b.hyper[h])) != CLRUN_OK)
            goto fail;
        clrun__train_slot *slot = slot_for(&b, b.hyper[h]);
        if (slot == NULL) {
            s = failf(&b, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "train: out of host memory");
            goto fail;
        }
        slot->role = CLRUN__SLOT_HYPER;
        slot->hyper = (clrun__hyper)h;
        if (split && (s = add_twin(&a, &b, b.hyper[h], false, &a.hyper[h])) != CLRUN_OK)
            goto fail;
    }
    if ((s = mark(&b, loss, &out->loss_output)) != CLRUN_OK)
        goto fail;
    for (int32_t k = 0; k < bn_count && s == CLRUN_OK; k++) {
        for (int w = 0; w < 2 && s == CLRUN_OK; w++) {
            clrun_tensor_id stat = w == 0 ? bns[k].mean : bns[k].var;
            clrun__train_slot *slot = slot_for(&b, stat);
            if (slot == NULL) {
                s = failf(&b, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "train: out of host memory");
                break;
            }
            slot->role = CLRUN__SLOT_STATE;
            slot->param = -1;
            snprintf(slot->state_kind, sizeof slot->state_kind, "%s", w == 0 ? "running_mean" : "running_var");
            out->state_count++;
            s = mark(&b, w == 0 ? bns[k].new_mean : bns[k].new_var, &slot_for(&b, stat)->output_index);
        }
    }
    if (s != CLRUN_OK)
        goto fail;
    if (correct >= 0 && (s = mark(&b, correct, &out->correct_output)) != CLRUN_OK)
        goto fail;
    clrun__grad_spec spec = {.loss = loss, .wrt = b.param_ids, .wrt_count = b.param_count,
                             .seed = -1, .done = update, .done_user = &b};
    int32_t forward_nodes = b.step->node_count;
    if ((s = clrun__grad_build(fwd, b.step, &spec, grads, NULL, err, errlen)) != CLRUN_OK)
        goto fail;
    out->forward_nodes = forward_nodes;
    if ((s = clrun_graph_remat(b.step, forward_nodes, options->remat, &out->remat)) != CLRUN_OK) {
        snprintf(err, errlen, "train: %s", clrun_graph_last_error(b.step));
        goto fail;
    }
    /* The slots, in input order. */
    const clrun_tensor_id *inputs;
    int32_t count = clrun_graph_inputs(b.step, &inputs);
    out->slots = calloc((size_t)(count ? count : 1), sizeof *out->slots);
    if (out->slots == NULL) {
        s = failf(&b, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "train: out of host memory");
        goto fail;
    }
    for (int32_t i = 0; i < count; i++) {
        clrun__train_slot *slot = slot_for(&b, inputs[i]);
        if (slot == NULL) {
            s = failf(&b, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "train: out of host memory");
            goto fail;
        }
        out->slots[i] = *slot;
        out->slots[i].input_index = i;
        out->slots[i].input = inputs[i];
        if ((slot->role == CLRUN__SLOT_STATE || slot->role == CLRUN__SLOT_GRAD) && slot->param >= 0) {
            /* param: the parameter's slot, found by its tensor */
            for (int32_t k = 0; k < count; k++)
                if (inputs[k] == b.param_ids[slot->param])
                    out->slots[i].param = k;
        }
    }
    out->slot_count = count;
    out->graph = b.step;
    out->apply = a.step;
    free(a.param_ids);
    free(a.by_id);
    free(b.param_ids);
    free(b.by_id);
    free(grads);
    free(promote);
    free(map);
    free(bns);
    clrun_graph_destroy(fwd);
    return CLRUN_OK;
fail:
    if (err[0] == '\0')
        snprintf(err, errlen, "train: %s", clrun_strerror(s));
    clrun_graph_destroy(b.step);
    clrun_graph_destroy(a.step);
    free(a.param_ids);
    free(a.by_id);
    free(b.param_ids);
    free(b.by_id);
    free(grads);
    free(promote);
    free(map);
    free(bns);
    clrun_graph_destroy(lossg);
    clrun_graph_destroy(fwd);
    clrun__train_graph_free(out);
    return s;
}

void clrun__train_graph_free(clrun__train_graph *tg)
{
    if (tg == NULL)
        return;
    clrun_graph_destroy(tg->graph);
    clrun_graph_destroy(tg->apply);
    clrun_graph_destroy(tg->eval);
    free(tg->slots);
    for (int32_t i = 0; i < tg->frozen_count; i++)
        free(tg->frozen[i]);
    free(tg->frozen);
    memset(tg, 0, sizeof *tg);
    tg->correct_output = -1;
}
