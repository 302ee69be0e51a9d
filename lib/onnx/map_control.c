/* Control flow: If, when its condition is known at load (a constant, or folded from inputs the
 * caller fixed with the `constants` option): the branch it takes is imported in its place, the
 * other never looked at, so the device sees no control flow. A condition known only at run time
 * is refused, naming what would decide it. */
#include <string.h>

#include "onnx/map.h"

/* The attribute `name` of n as a graph, marked used; NULL when absent or not a graph. */
static const Onnx__GraphProto *branch(clrun__onode *n, const char *name)
{
    const Onnx__NodeProto *node = n->proto;
    for (size_t a = 0; a < node->n_attribute; a++) {
        const Onnx__AttributeProto *attr = node->attribute[a];
        if (attr->name && strcmp(attr->name, name) == 0 && attr->g &&
            attr->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH) {
            n->attr_used[a] = true;
            return attr->g;
        }
    }
    return NULL;
}

clrun_status clrun__map_if(clrun__imp *im, clrun__onode *n)
{
    const Onnx__GraphProto *then_branch = branch(n, "then_branch"), *else_branch = branch(n, "else_branch");
    if (then_branch == NULL || else_branch == NULL)
        return clrun__invalid(im, "If needs the graph attributes then_branch and else_branch");
    if (n->n_in != 1 || n->in[0] == NULL)
        return clrun__invalid(im, "If takes one input, its condition");
    if (!clrun__is_const(n->in[0]))
        return clrun__unsupported(im, "If with a condition known only at run time is not supported: its "
                                  "condition '%s' must be known at load (fix the inputs it depends on with "
                                  "the `constants` load option)",
                                  n->in[0]->onnx_name ? n->in[0]->onnx_name : n->in[0]->name);
    if (clrun__otensor_count(&n->in[0]->c) != 1)
        return clrun__invalid(im, "If's condition '%s' has %llu elements, not one",
                              n->in[0]->onnx_name ? n->in[0]->onnx_name : n->in[0]->name,
                              (unsigned long long)clrun__otensor_count(&n->in[0]->c));
    const Onnx__GraphProto *taken = clrun__otensor_get_int(&n->in[0]->c, 0) ? then_branch : else_branch;
    if ((int)taken->n_output != n->n_out)
        return clrun__invalid(im, "If has %d outputs, but its %s has %zu", n->n_out,
                              taken == then_branch ? "then_branch" : "else_branch", taken->n_output);
    clrun_status s = clrun__imp_inline_graph(im, taken);
    for (int i = 0; s == CLRUN_OK && i < n->n_out; i++) {
        const char *name = taken->output[i]->name ? taken->output[i]->name : "";
        int32_t v = clrun__imp_find(im, name);
        if (v < 0 || im->values[v]->kind == CLRUN__VALUE_ABSENT)
            return clrun__invalid(im, "output %d '%s' of the branch taken is produced by no node or "
                                  "initializer it sees", i, name);
        s = clrun__define_alias(im, n, i, im->values[v]);
    }
    return s;
}
