/* Sibling fusion (XLA's multi-output fusion): fused groups over the same iteration space that
 * read a tensor in common become one kernel with an output each, so the tensor they share is
 * read once per element and one launch does the work of several (the query, key and value
 * heads cut from one projection). The merged node takes the place of the last group's root, so
 * every output of the others must be read only after it; their inputs are produced before
 * their own roots already. A group that can write a donated input in place is not merged into
 * a kernel that could not. Pure C. */
#include "fuse/siblings.h"

#include <stdio.h>
#include <string.h>

static bool same_input(const clrun__fused_input *a, int32_t ta, const clrun__fused_input *b, int32_t tb)
{
    if (ta != tb || a->view_count != b->view_count)
        return false;
    for (int v = 0; v < a->view_count; v++)
        if (a->views[v].rank != b->views[v].rank || a->views[v].base != b->views[v].base ||
            memcmp(a->views[v].dims, b->views[v].dims, (size_t)a->views[v].rank * sizeof a->views[v].dims[0]) ||
            memcmp(a->views[v].strides, b->views[v].strides, (size_t)a->views[v].rank * sizeof a->views[v].strides[0]))
            return false;
    return true;
}

static bool shares_a_tensor(const clrun__fuse_unit *a, const clrun__fuse_unit *b)
{
    for (int i = 0; i < a->op->input_count; i++)
        for (int j = 0; j < b->op->input_count; j++)
            if (a->inputs[i] == b->inputs[j])
                return true;
    return false;
}

/* Every output of u is read only after node `after` (or by nobody). */
static bool read_after(const clrun_graph *d, const clrun__fuse_unit *u, int32_t after)
{
    for (int32_t n = 0; n <= after; n++) {
        const clrun__node *node = &d->nodes[n];
        if (node->op == NULL)
            continue;
        for (int k = 0; k < node->input_count; k++)
            for (int o = 0; o < u->op->output_count; o++)
                if (node->inputs[k] == u->outputs[o])
                    return false;
    }
    return true;
}

/* b merged into a (both in the arena already): inputs shared where the same tensor is read the
 * same way, b's steps after a's. False when out of room. */
static bool merge(clrun__arena *arena, clrun__fuse_unit *a, const clrun__fuse_unit *b)
{
    clrun__fused_op *fa = a->op;
    const clrun__fused_op *fb = b->op;
    int inputs = fa->input_count + fb->input_count, steps = fa->step_count + fb->step_count;
    clrun__fused_input *in = clrun__arena_alloc(arena, (size_t)inputs * sizeof *in);
    int32_t *ids = clrun__arena_alloc(arena, (size_t)inputs * sizeof *ids);
    clrun__fused_step *st = clrun__arena_alloc(arena, ((size_t)steps + 1) * sizeof *st);
    if (in == NULL || ids == NULL || st == NULL)
        return false;
    memcpy(in, fa->inputs, (size_t)fa->input_count * sizeof *in);
    memcpy(ids, a->inputs, (size_t)fa->input_count * sizeof *ids);
    int count = fa->input_count, map[512];
    for (int j = 0; j < fb->input_count; j++) {
        map[j] = -1;
        for (int i = 0; i < count && map[j] < 0; i++)
            if (same_input(&in[i], ids[i], &fb->inputs[j], b->inputs[j]))
                map[j] = i;
        if (map[j] < 0) {
            in[count] = fb->inputs[j];
            ids[count] = b->inputs[j];
            map[j] = count++;
        }
    }
    memcpy(st, fa->steps, (size_t)fa->step_count * sizeof *st);
    for (int s = 0; s < fb->step_count; s++) {
        clrun__fused_step step = fb->steps[s];
        for (int k = 0; k < step.def->arity; k++)
            step.args[k] = step.args[k] >= 0 ? step.args[k] + fa->step_count : -1 - map[-1 - step.args[k]];
        st[fa->step_count + s] = step;
    }
    for (int o = 0; o < fb->output_count; o++) {
        int of = fb->output_of[o];
        fa->output_of[fa->output_count] = of >= 0 ? of + fa->step_count : -1 - map[-1 - of];
        fa->output_dtype[fa->output_count] = fb->output_dtype[o];
        a->outputs[fa->output_count++] = b->outputs[o];
    }
    fa->inputs = in;
    fa->input_count = count;
    fa->steps = st;
    fa->step_count = steps;
    a->inputs = ids;
    for (int g = 0; g < b->group_count; g++)
        a->groups[a->group_count++] = b->groups[g];
    a->root = b->root > a->root ? b->root : a->root;
    size_t used = strlen(fa->name);
    snprintf(fa->name + used, sizeof fa->name - used, ", %s", fb->name + strlen("fused:"));
    fa->op.alias_safe = fa->op.alias_safe && fb->op.alias_safe;
    fa->op.min_inputs = fa->op.max_inputs = count;
    fa->op.outputs = fa->output_count;
    return true;
}

/* u reads a donated graph input of its output's size: alone it can write that input in place
 * (a train step's parameter update); merged with a group that is not alias-safe (the reversed
 * weights of a convolution's gradient, read from the same parameter) it could not. */
static bool may_update_donated(const clrun_graph *d, const clrun__fuse_unit *u)
{
    uint64_t bytes = clrun_tensor_bytes(&u->op->output);
    for (int i = 0; i < u->op->input_count; i++) {
        const clrun__tensor *t = &d->tensors[u->inputs[i]];
        if (t->kind == CLRUN__TENSOR_INPUT && t->donated && clrun_tensor_bytes(&t->type) == bytes)
            return true;
    }
    return false;
}

int clrun__fuse_merge_siblings(clrun__arena *arena, const clrun_graph *d, clrun__fuse_unit *units,
                               int count, int max_buffers)
{
    bool *gone = clrun__arena_alloc(arena, (size_t)count + 1);
    if (gone == NULL)
        return -1;
    for (int i = 0; i < count; i++) {
        if (gone[i] || units[i].op->epilogue)
            continue;
        for (int j = i + 1; j < count; j++) {
            clrun__fuse_unit *a = &units[i], *b = &units[j];
            if (gone[j] || b->op->epilogue || a->op->output_count + b->op->output_count > CLRUN__FUSED_MAX_OUTPUTS ||
                a->group_count + b->group_count > CLRUN__FUSED_MAX_OUTPUTS)
                continue;
            if (!clrun__same_iteration_space(&a->op->output, &b->op->output) || !shares_a_tensor(a, b))
                continue;
            if ((may_update_donated(d, a) || may_update_donated(d, b)) &&
                !(a->op->op.alias_safe && b->op->op.alias_safe))
                continue;
            if (a->op->input_count + b->op->input_count + a->op->output_count + b->op->output_count > max_buffers ||
                a->op->input_count + b->op->input_count > 512)
                continue; /* counted without sharing: never over the limit */
            int32_t last = a->root > b->root ? a->root : b->root;
            if (!read_after(d, a->root < b->root ? a : b, last))
                continue;
            if (!merge(arena, a, b))
                return -1;
            gone[j] = true;
        }
    }
    int kept = 0;
    for (int i = 0; i < count; i++)
        if (!gone[i])
            units[kept++] = units[i];
    return kept;
}
