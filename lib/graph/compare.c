/* Comparing graphs: the text format's round trip and the tests rely on it. */
#include "graph/graph.h"

#include <stdio.h>
#include <string.h>

static bool attrs_equal(const clrun_attr *a, const clrun_attr *b)
{
    if (strcmp(a->name, b->name) != 0 || a->kind != b->kind)
        return false;
    switch (a->kind) {
    case CLRUN_ATTR_INT: return a->i == b->i;
    case CLRUN_ATTR_FLOAT: return memcmp(&a->f, &b->f, sizeof a->f) == 0;
    case CLRUN_ATTR_INTS:
        return a->count == b->count &&
               (a->count == 0 || memcmp(a->ints, b->ints, (size_t)a->count * sizeof *a->ints) == 0);
    }
    return false;
}

static bool tensors_equal(const clrun__tensor *a, const clrun__tensor *b)
{
    if (strcmp(a->name, b->name) != 0 || !clrun__type_equal(&a->type, &b->type) ||
        a->kind != b->kind || a->donated != b->donated || a->is_output != b->is_output ||
        a->producer != b->producer || (a->data == NULL) != (b->data == NULL) || a->fill != b->fill ||
        memcmp(&a->fill_a, &b->fill_a, sizeof a->fill_a) != 0 ||
        memcmp(&a->fill_b, &b->fill_b, sizeof a->fill_b) != 0 || a->seed != b->seed)
        return false;
    return !a->data || memcmp(a->data, b->data, (size_t)clrun_tensor_bytes(&a->type)) == 0;
}

static bool nodes_equal(const clrun__node *a, const clrun__node *b)
{
    if (a->op != b->op || a->input_count != b->input_count || a->output_count != b->output_count ||
        a->attr_count != b->attr_count || a->guarded != b->guarded ||
        (a->guarded && (a->guard != b->guard || a->guard_negate != b->guard_negate)))
        return false;
    for (int i = 0; i < a->input_count; i++)
        if (a->inputs[i] != b->inputs[i])
            return false;
    for (int o = 0; o < a->output_count; o++)
        if (a->outputs[o] != b->outputs[o])
            return false;
    for (int k = 0; k < a->attr_count; k++)
        if (!attrs_equal(&a->attrs[k], &b->attrs[k]))
            return false;
    return true;
}

static bool ids_equal(const clrun_tensor_id *a, int32_t a_count, const clrun_tensor_id *b,
                      int32_t b_count)
{
    return a_count == b_count &&
           (a_count == 0 || memcmp(a, b, (size_t)a_count * sizeof *a) == 0);
}

bool clrun__graph_equal(const clrun_graph *a, const clrun_graph *b, char *why, size_t whylen)
{
    const char *reason = NULL;
    int32_t at = -1;
    if ((a->name == NULL) != (b->name == NULL) || (a->name && strcmp(a->name, b->name) != 0))
        reason = "names differ";
    else if (a->tensor_count != b->tensor_count || a->node_count != b->node_count)
        reason = "tensor or node counts differ";
    for (int32_t t = 0; !reason && t < a->tensor_count; t++)
        if (!tensors_equal(&a->tensors[t], &b->tensors[t]))
            reason = "tensor differs", at = t;
    for (int32_t n = 0; !reason && n < a->node_count; n++)
        if (!nodes_equal(&a->nodes[n], &b->nodes[n]))
            reason = "node differs", at = n;
    if (!reason && !ids_equal(a->inputs, a->input_count, b->inputs, b->input_count))
        reason = "input lists differ";
    if (!reason && !ids_equal(a->outputs, a->output_count, b->outputs, b->output_count))
        reason = "output lists differ";
    if (reason && why && whylen) {
        if (at >= 0)
            snprintf(why, whylen, "%s at %d", reason, (int)at);
        else
            snprintf(why, whylen, "%s", reason);
    }
    return reason == NULL;
}
