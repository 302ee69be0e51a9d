/* Describing a planned group as a fused op (ops/fused.h): its elementwise members become steps,
 * its layout members the chains its inputs are read through, and the op gets its name and
 * alias safety. Pure C. */
#include <stdio.h>
#include <string.h>

#include "fuse/codegen.h"

static void name_group(clrun__fused_op *f, const clrun_graph *g, const int32_t *members,
                       int32_t count, const char *base)
{
    size_t used = (size_t)snprintf(f->name, sizeof f->name, "fused:%s", base ? base : "");
    for (int32_t m = 0; m < count; m++) {
        const char *op = g->nodes[members[m]].op->name;
        if (used + strlen(op) + 6 >= sizeof f->name) {
            snprintf(f->name + used, sizeof f->name - used, "+...");
            return;
        }
        bool first = m == 0 && base == NULL;
        used += (size_t)snprintf(f->name + used, sizeof f->name - used, "%s%s", first ? "" : "+", op);
    }
}

/* The output may take the buffer of an input of its byte size when every such input is read
 * only at the work-item's own element: when it has the output's element count and no chain of
 * moves (inputs of fewer elements are read broadcast, at other elements). */
static bool identity_views(const clrun__fused_input *in)
{
    for (int v = 0; v < in->view_count; v++) {
        const clrun__view *w = &in->views[v];
        if (w->rank != 1 || w->strides[0] != 1 || w->base != 0)
            return false;
    }
    return true;
}

/* (A chain of reshapes is such a read too: its view is the identity.) */
static bool alias_safe(const clrun_graph *g, const clrun__fused_op *f, const int32_t *inputs)
{
    uint64_t bytes = clrun_tensor_bytes(&f->output), elements = clrun_tensor_elements(&f->output);
    for (int i = 0; i < f->input_count; i++) {
        const clrun_tensor_type *t = &g->tensors[inputs[i]].type;
        if (clrun_tensor_bytes(t) == bytes &&
            (clrun_tensor_elements(t) != elements || !identity_views(&f->inputs[i])))
            return false;
    }
    return true;
}

static int member_index(const int32_t *members, int32_t count, int32_t node)
{
    for (int32_t m = 0; node >= 0 && m < count; m++)
        if (members[m] == node)
            return m;
    return -1;
}

/* What a describe is building. */
typedef struct builder {
    const clrun_graph *g;
    const int32_t *members;
    int32_t count;
    int *step_of;          /* per member: its step, -1 for a layout member */
    int32_t *keys;         /* per input: the tensor the steps read (a chain's end, or the input) */
    int first_extra;       /* inputs before it are an epilogue base's: never shared */
} builder;

/* The chain from tensor t, made by a layout member, back to the tensor outside the group it
 * moves; returns that tensor, or -1 when the chain is too long. */
static int32_t chain_of(const builder *b, int32_t t, clrun__fused_input *in)
{
    in->view_count = 0;
    in->type = b->g->tensors[t].type;
    for (;;) {
        int32_t p = b->g->tensors[t].producer;
        int m = member_index(b->members, b->count, p);
        if (m < 0 || b->step_of[m] >= 0)
            break;
        if (in->view_count == CLRUN__FUSED_MAX_VIEWS)
            return -1;
        const clrun__node *node = &b->g->nodes[p];
        clrun_tensor_type types[2];
        clrun__op_call call;
        clrun__node_call(b->g, node, types, &call);
        if (!clrun__view_of(node->op->name, &call, &in->views[in->view_count++]))
            return -1;
        t = node->inputs[0];
    }
    in->dtype = b->g->tensors[t].type.dtype;
    return t;
}

/* The input the steps read tensor t through (one per distinct t), adding it; -1 on failure. */
static int input_for(builder *b, clrun__fused_op *f, int32_t t, int32_t *inputs)
{
    for (int k = b->first_extra; k < f->input_count; k++)
        if (b->keys[k] == t)
            return k;
    clrun__fused_input *in = &f->inputs[f->input_count];
    int32_t source = chain_of(b, t, in);
    if (source < 0)
        return -1;
    b->keys[f->input_count] = t;
    inputs[f->input_count] = source;
    return f->input_count++;
}

/* The steps and inputs of the members into f; tensor v (-1: none) is an epilogue's value. */
static bool describe_members(clrun__arena *arena, builder *b, int32_t v, clrun__fused_op *f,
                             int32_t *inputs)
{
    int steps = 0;
    for (int32_t m = 0; m < b->count; m++) {
        bool layout = clrun__ew_def_of(b->g->nodes[b->members[m]].op) == NULL;
        b->step_of[m] = layout ? -1 : steps;
        steps += !layout;
    }
    f->steps = clrun__arena_alloc(arena, ((size_t)steps + 1) * sizeof *f->steps);
    if (f->steps == NULL)
        return false;
    for (int32_t m = 0; m < b->count; m++) {
        if (b->step_of[m] < 0)
            continue;
        const clrun__node *node = &b->g->nodes[b->members[m]];
        clrun__fused_step *step = &f->steps[f->step_count++];
        *step = (clrun__fused_step){.op = node->op, .def = clrun__ew_def_of(node->op), .attrs = node->attrs,
                                    .attr_count = node->attr_count,
                                    .type = b->g->tensors[node->outputs[0]].type, .node = b->members[m]};
        for (int k = 0; k < node->input_count; k++) {
            int32_t t = node->inputs[k];
            int p = member_index(b->members, b->count, b->g->tensors[t].producer);
            step->arg_types[k] = b->g->tensors[t].type;
            if (t == v) {
                step->args[k] = CLRUN__FUSED_ARG_V;
            } else if (p >= 0 && b->step_of[p] >= 0) {
                step->args[k] = b->step_of[p];
            } else {
                int at = input_for(b, f, t, inputs);
                if (at < 0)
                    return false;
                step->args[k] = -1 - at;
            }
        }
    }
    int32_t root = b->members[b->count - 1];
    f->output = b->g->tensors[b->g->nodes[root].outputs[0]].type;
    f->output_count = 1;
    f->output_dtype[0] = f->output.dtype;
    f->output_of[0] = f->step_count - 1;
    if (f->step_count > 0)
        return true;
    /* A group of moves alone: its output is the chain through every member. */
    f->output_of[0] = -1;
    return input_for(b, f, b->g->nodes[root].outputs[0], inputs) == 0;
}

/* Room for what a describe of `count` members reading through `base_inputs` makes. */
static bool start(clrun__arena *arena, builder *b, clrun__fused_op **f, int32_t **inputs, int extra)
{
    size_t slots = (size_t)b->count * CLRUN__EW_MAX_INPUTS + (size_t)extra + 2;
    *f = clrun__arena_alloc(arena, sizeof **f);
    *inputs = clrun__arena_alloc(arena, slots * sizeof **inputs);
    b->keys = clrun__arena_alloc(arena, slots * sizeof *b->keys);
    b->step_of = clrun__arena_alloc(arena, ((size_t)b->count + 1) * sizeof *b->step_of);
    if (*f == NULL || *inputs == NULL || b->keys == NULL || b->step_of == NULL)
        return false;
    (*f)->inputs = clrun__arena_alloc(arena, slots * sizeof *(*f)->inputs);
    return (*f)->inputs != NULL;
}

clrun__fused_op *clrun__fuse_describe(clrun__arena *arena, const clrun_graph *g,
                                      const clrun__fuse_plan *plan, int32_t group,
                                      int32_t **inputs_out)
{
    int32_t first = plan->member_start[group];
    builder b = {g, plan->members + first, plan->member_start[group + 1] - first, NULL, NULL, 0};
    clrun__fused_op *f;
    int32_t *inputs;
    if (!start(arena, &b, &f, &inputs, 0) || !describe_members(arena, &b, -1, f, inputs))
        return NULL;
    f->op = (clrun__op){.name = f->name, .min_inputs = f->input_count, .max_inputs = f->input_count,
                        .outputs = 1, .alias_safe = alias_safe(g, f, inputs), .kind = CLRUN__OP_FUSED,
                        .code = group, .infer = clrun__fused_infer};
    snprintf(f->kernel, sizeof f->kernel, "clrun_fused_%d", (int)group);
    name_group(f, g, b.members, b.count, NULL);
    *inputs_out = inputs;
    return f;
}

clrun__fused_op *clrun__fuse_describe_epilogue(clrun__arena *arena, const clrun_graph *g,
                                               int32_t base, const int32_t *members, int32_t count,
                                               int32_t **inputs_out)
{
    const clrun__node *n = &g->nodes[base];
    builder b = {g, members, count, NULL, NULL, n->input_count};
    clrun__fused_op *f;
    int32_t *inputs;
    clrun__epilogue_base *e = clrun__arena_alloc(arena, sizeof *e);
    if (e == NULL || n->input_count > CLRUN__EPILOGUE_BASE_INPUTS || !start(arena, &b, &f, &inputs, n->input_count))
        return NULL;
    *e = (clrun__epilogue_base){.op = n->op, .attrs = n->attrs, .attr_count = n->attr_count,
                                .input_count = n->input_count};
    for (int k = 0; k < n->input_count; k++) {
        inputs[k] = b.keys[k] = n->inputs[k];
        e->types[k] = g->tensors[n->inputs[k]].type;
        f->inputs[k] = (clrun__fused_input){.type = e->types[k], .dtype = e->types[k].dtype};
    }
    e->types[n->input_count] = g->tensors[n->outputs[0]].type;
    f->input_count = n->input_count;
    f->epilogue = e;
    if (count == 0) { /* the identity: base's value as it is (an epilogue set's plain case) */
        f->output = g->tensors[n->outputs[0]].type;
        f->output_count = 1;
        f->output_dtype[0] = f->output.dtype;
        f->output_of[0] = 0; /* not a chain of moves: an epilogue's output is its function's */
    } else if (!describe_members(arena, &b, n->outputs[0], f, inputs) || f->step_count != count) {
        return NULL; /* an epilogue takes elementwise nodes only */
    }
    e->extra_inputs = f->input_count - n->input_count;
    f->op = (clrun__op){.name = f->name, .min_inputs = f->input_count, .max_inputs = f->input_count,
                        .outputs = 1, .alias_safe = false, .kind = CLRUN__OP_FUSED, .code = -1,
                        .infer = clrun__fused_infer};
    name_group(f, g, members, count, n->op->name);
    *inputs_out = inputs;
    return f;
}
