/* Drafts of rewritten graphs: see draft.h. */
#include "fuse/draft.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *clrun__arena_alloc(clrun__arena *arena, size_t bytes)
{
    if (arena->count == arena->capacity) {
        size_t capacity = arena->capacity ? arena->capacity * 2 : 64;
        void **grown = realloc(arena->blocks, capacity * sizeof *grown);
        if (grown == NULL)
            return NULL;
        arena->blocks = grown;
        arena->capacity = capacity;
    }
    void *block = calloc(1, bytes ? bytes : 1);
    if (block)
        arena->blocks[arena->count++] = block;
    return block;
}

char *clrun__arena_strdup(clrun__arena *arena, const char *text)
{
    size_t length = strlen(text) + 1;
    char *copy = clrun__arena_alloc(arena, length);
    if (copy)
        memcpy(copy, text, length);
    return copy;
}

void clrun__arena_free(clrun__arena *arena)
{
    for (size_t i = 0; i < arena->count; i++)
        free(arena->blocks[i]);
    free(arena->blocks);
    *arena = (clrun__arena){NULL, 0, 0};
}

static int32_t *copy_ids(clrun__arena *arena, const int32_t *ids, int count)
{
    int32_t *copy = clrun__arena_alloc(arena, (size_t)count * sizeof *copy);
    if (copy && count)
        memcpy(copy, ids, (size_t)count * sizeof *copy);
    return copy;
}

clrun_graph *clrun__draft_begin(clrun__arena *arena, const clrun_graph *base, int32_t extra_tensors,
                                int32_t extra_nodes)
{
    clrun_graph *d = clrun__arena_alloc(arena, sizeof *d);
    if (d == NULL)
        return NULL;
    d->name = base->name;
    d->tensor_capacity = base->tensor_count + extra_tensors;
    d->node_capacity = base->node_count + extra_nodes;
    d->tensors = clrun__arena_alloc(arena, (size_t)d->tensor_capacity * sizeof *d->tensors);
    d->nodes = clrun__arena_alloc(arena, (size_t)d->node_capacity * sizeof *d->nodes);
    d->inputs = copy_ids(arena, base->inputs, base->input_count);
    d->outputs = copy_ids(arena, base->outputs, base->output_count);
    if (!d->tensors || !d->nodes || !d->inputs || !d->outputs)
        return NULL;
    d->tensor_count = base->tensor_count;
    d->node_count = base->node_count;
    d->input_count = d->input_capacity = base->input_count;
    d->output_count = d->output_capacity = base->output_count;
    if (base->tensor_count)
        memcpy(d->tensors, base->tensors, (size_t)base->tensor_count * sizeof *d->tensors);
    for (int32_t n = 0; n < base->node_count; n++) {
        d->nodes[n] = base->nodes[n];
        d->nodes[n].inputs = copy_ids(arena, base->nodes[n].inputs, base->nodes[n].input_count);
        d->nodes[n].outputs = copy_ids(arena, base->nodes[n].outputs, base->nodes[n].output_count);
        if (!d->nodes[n].inputs || !d->nodes[n].outputs)
            return NULL;
    }
    return d;
}

void clrun__draft_remove_node(clrun_graph *d, int32_t node)
{
    clrun__node *n = &d->nodes[node];
    for (int o = 0; o < n->output_count; o++)
        if (d->tensors[n->outputs[o]].producer == node)
            d->tensors[n->outputs[o]].producer = -1;
    n->op = NULL;
}

int32_t clrun__draft_add_node(clrun__arena *arena, clrun_graph *d, const clrun__op *op,
                              const int32_t *inputs, int input_count, int32_t output,
                              const clrun_attr *attrs, int attr_count)
{
    if (d->node_count >= d->node_capacity)
        return -1;
    clrun__node *n = &d->nodes[d->node_count];
    *n = (clrun__node){op, copy_ids(arena, inputs, input_count), input_count,
                       copy_ids(arena, &output, 1), 1, (clrun_attr *)attrs, attr_count, 0, NULL,
                       false, false, -1};
    if (n->inputs == NULL || n->outputs == NULL)
        return -1;
    d->tensors[output].producer = d->node_count;
    return d->node_count++;
}

bool clrun__draft_set_node(clrun__arena *arena, clrun_graph *d, int32_t node, const clrun__op *op,
                           const int32_t *inputs, int input_count, int32_t output,
                           const clrun_attr *attrs, int attr_count)
{
    int32_t *in = copy_ids(arena, inputs, input_count), *out = copy_ids(arena, &output, 1);
    if (in == NULL || out == NULL)
        return false;
    clrun__draft_remove_node(d, node);
    d->nodes[node] = (clrun__node){op, in, input_count, out, 1, (clrun_attr *)attrs, attr_count,
                                   d->nodes[node].line, NULL, false, false, -1};
    d->tensors[output].producer = node;
    return true;
}

bool clrun__draft_set_node_outputs(clrun__arena *arena, clrun_graph *d, int32_t node,
                                   const clrun__op *op, const int32_t *inputs, int input_count,
                                   const int32_t *outputs, int output_count)
{
    int32_t *in = copy_ids(arena, inputs, input_count), *out = copy_ids(arena, outputs, output_count);
    if (in == NULL || out == NULL)
        return false;
    clrun__draft_remove_node(d, node);
    d->nodes[node] = (clrun__node){op, in, input_count, out, output_count, NULL, 0, d->nodes[node].line,
                                   NULL, false, false, -1};
    for (int o = 0; o < output_count; o++)
        d->tensors[outputs[o]].producer = node;
    return true;
}

int32_t clrun__draft_add_constant(clrun_graph *d, const char *name, const clrun_tensor_type *type,
                                  void *data)
{
    if (d->tensor_count >= d->tensor_capacity)
        return -1;
    d->tensors[d->tensor_count] = (clrun__tensor){.name = (char *)name, .type = *type,
                                                  .kind = CLRUN__TENSOR_CONSTANT, .producer = -1,
                                                  .data = data};
    return d->tensor_count++;
}

int32_t clrun__draft_add_derived(clrun__arena *arena, clrun_graph *d, int32_t of, const char *suffix,
                                 const clrun_tensor_type *type, void *data)
{
    char name[CLRUN__GRAPH_NAME_MAX + 1];
    snprintf(name, sizeof name, "%.240s%.12s", d->tensors[of].name, suffix);
    char *copy = clrun__arena_strdup(arena, name);
    return copy ? clrun__draft_add_constant(d, copy, type, data) : -1;
}

void clrun__draft_count_reads(const clrun_graph *d, int32_t *counts)
{
    memset(counts, 0, (size_t)d->tensor_count * sizeof *counts);
    for (int32_t n = 0; n < d->node_count; n++)
        if (d->nodes[n].op)
            for (int k = 0; k < d->nodes[n].input_count; k++)
                counts[d->nodes[n].inputs[k]]++;
}

clrun_graph *clrun__draft_finish(clrun__arena *arena, const clrun_graph *d)
{
    int32_t nt = d->tensor_count, nn = d->node_count;
    int32_t *order = clrun__arena_alloc(arena, ((size_t)nn + 1) * sizeof *order);
    int32_t *new_id = clrun__arena_alloc(arena, ((size_t)nt + 1) * sizeof *new_id);
    clrun_graph *g = clrun__arena_alloc(arena, sizeof *g);
    if (!order || !new_id || !g)
        return NULL;
    int32_t live = 0;
    for (int32_t n = 0; n < nn; n++) {
        if (d->nodes[n].op == NULL)
            continue;
        for (int k = 0; k < d->nodes[n].input_count; k++)
            if (d->tensors[d->nodes[n].inputs[k]].producer >= n)
                return NULL; /* passes keep the order topological; a broken one is refused */
        order[live++] = n;
    }
    /* Which tensors stay: inputs, outputs, and everything a live node touches. */
    for (int32_t t = 0; t < nt; t++)
        new_id[t] = -1;
    for (int32_t i = 0; i < d->input_count; i++)
        new_id[d->inputs[i]] = 0;
    for (int32_t i = 0; i < d->output_count; i++)
        new_id[d->outputs[i]] = 0;
    for (int32_t i = 0; i < live; i++) {
        const clrun__node *node = &d->nodes[order[i]];
        for (int k = 0; k < node->input_count; k++)
            new_id[node->inputs[k]] = 0;
        for (int o = 0; o < node->output_count; o++)
            new_id[node->outputs[o]] = 0;
        if (node->guarded)
            new_id[node->guard] = 0;
    }
    int32_t kept = 0;
    for (int32_t t = 0; t < nt; t++)
        if (new_id[t] == 0)
            new_id[t] = kept++;
    *g = (clrun_graph){.name = d->name};
    g->tensors = clrun__arena_alloc(arena, ((size_t)kept + 1) * sizeof *g->tensors);
    g->nodes = clrun__arena_alloc(arena, ((size_t)live + 1) * sizeof *g->nodes);
    g->inputs = clrun__arena_alloc(arena, ((size_t)d->input_count + 1) * sizeof *g->inputs);
    g->outputs = clrun__arena_alloc(arena, ((size_t)d->output_count + 1) * sizeof *g->outputs);
    if (!g->tensors || !g->nodes || !g->inputs || !g->outputs)
        return NULL;
    for (int32_t t = 0; t < nt; t++)
        if (new_id[t] >= 0) {
            g->tensors[new_id[t]] = d->tensors[t];
            g->tensors[new_id[t]].producer = -1;
        }
    for (int32_t i = 0; i < live; i++) {
        const clrun__node *from = &d->nodes[order[i]];
        clrun__node *to = &g->nodes[i];
        *to = *from;
        to->inputs = clrun__arena_alloc(arena, ((size_t)from->input_count + 1) * sizeof *to->inputs);
        to->outputs = clrun__arena_alloc(arena, ((size_t)from->output_count + 1) * sizeof *to->outputs);
        if (!to->inputs || !to->outputs)
            return NULL;
        for (int k = 0; k < from->input_count; k++)
            to->inputs[k] = new_id[from->inputs[k]];
        for (int o = 0; o < from->output_count; o++) {
            to->outputs[o] = new_id[from->outputs[o]];
            g->tensors[to->outputs[o]].producer = i;
        }
        if (from->guarded)
            to->guard = new_id[from->guard];
    }
    for (int32_t i = 0; i < d->input_count; i++)
        g->inputs[i] = new_id[d->inputs[i]];
    for (int32_t i = 0; i < d->output_count; i++)
        g->outputs[i] = new_id[d->outputs[i]];
    g->tensor_count = g->tensor_capacity = kept;
    g->node_count = g->node_capacity = live;
    g->input_count = g->input_capacity = d->input_count;
    g->output_count = g->output_capacity = d->output_count;
    return g;
}
