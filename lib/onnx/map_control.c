/* Control flow: If, when its condition is known at load (a constant, or folded from inputs the
 * caller fixed with the `constants` option): the branch it takes is imported in its place, the
 * other never looked at, so the device sees no control flow. With a condition known only at run
 * time both branches are imported, every graph node of each guarded by the condition (the
 * executor reads it back once and skips the nodes of the branch not taken), and each output is
 * where(condition, then's, else's): both branches are planned, the memory is the same whichever
 * runs, and a skipped branch's garbage is never selected. */
#include <stdlib.h>
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

static const char *value_label(const clrun__value *v)
{
    return v->onnx_name ? v->onnx_name : v->name;
}

/* "float[2, 3]" */
static void describe(const clrun__otensor *t, char *buf, size_t size)
{
    char elem[32];
    clrun__onnx_elem_name(t->elem, elem, sizeof elem);
    size_t at = (size_t)snprintf(buf, size, "%s[", elem);
    for (int d = 0; d < t->rank && at < size; d++)
        at += (size_t)snprintf(buf + at, size - at, "%s%lld", d ? ", " : "", (long long)t->dims[d]);
    if (at < size)
        snprintf(buf + at, size - at, "]");
}

/* Imports a branch under guard (g, negate); its outputs' values into outs[0..n_out). */
static clrun_status guarded_branch(clrun__imp *im, clrun__onode *n, const Onnx__GraphProto *branch,
                                   const char *what, clrun__value *g, bool negate, clrun__value **outs)
{
    if ((int)branch->n_output != n->n_out)
        return clrun__invalid(im, "If has %d outputs, but its %s has %zu", n->n_out, what, branch->n_output);
    clrun__value *saved = im->guard;
    bool saved_negate = im->guard_negate;
    im->guard = g;
    im->guard_negate = negate;
    clrun_status s = clrun__imp_inline_graph(im, branch);
    im->guard = saved;
    im->guard_negate = saved_negate;
    im->node = n;
    for (int i = 0; s == CLRUN_OK && i < n->n_out; i++) {
        const char *name = branch->output[i]->name ? branch->output[i]->name : "";
        int32_t v = clrun__imp_find(im, name);
        if (v < 0 || im->values[v]->kind == CLRUN__VALUE_ABSENT)
            return clrun__invalid(im, "output %d '%s' of the %s is produced by no node or initializer it "
                                  "sees", i, name, what);
        outs[i] = im->values[v];
    }
    return s;
}

/* The If inside a guarded branch: its branches' guards are the outer guard and the condition
 * (then), the outer guard and not the condition (else), computed by unguarded nodes, so that
 * they are false (never garbage) when the outer branch is skipped. */
static clrun_status nested_guards(clrun__imp *im, clrun__onode *n, clrun__value *cond, clrun__value **then_g,
                                  clrun__value **else_g)
{
    clrun__value *outer = im->guard, *not_cond = NULL;
    bool negate = im->guard_negate;
    im->guard = NULL;
    clrun_status s = CLRUN_OK;
    if (negate)
        s = clrun__emit_unary(im, n, "not", outer, -1, &outer);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "and", outer, cond, -1, then_g);
    if (s == CLRUN_OK)
        s = clrun__emit_unary(im, n, "not", cond, -1, &not_cond);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "and", outer, not_cond, -1, else_g);
    return s;
}

static clrun_status run_time_if(clrun__imp *im, clrun__onode *n, const Onnx__GraphProto *then_branch,
                                const Onnx__GraphProto *else_branch)
{
    clrun__value *cond = n->in[0];
    if (cond->c.elem != CLRUN__ONNX_BOOL)
        return clrun__invalid(im, "If's condition '%s' is not a bool tensor", value_label(cond));
    if (clrun__otensor_count(&cond->c) != 1)
        return clrun__invalid(im, "If's condition '%s' has %llu elements, not one", value_label(cond),
                              (unsigned long long)clrun__otensor_count(&cond->c));
    clrun__value *saved = im->guard;
    bool saved_negate = im->guard_negate;
    clrun__value *scalar = cond, *then_g = cond, *else_g = cond;
    clrun_status s = CLRUN_OK;
    if (cond->c.rank != 0) /* where's condition: no rank added to the outputs */
        s = clrun__emit_reshape(im, n, cond, 0, NULL, -1, &scalar);
    if (s == CLRUN_OK && saved)
        s = nested_guards(im, n, scalar, &then_g, &else_g);
    im->guard = saved;
    im->guard_negate = saved_negate;
    if (s != CLRUN_OK)
        return s;
    clrun__value **outs = calloc(2 * (size_t)n->n_out + 1, sizeof *outs);
    if (outs == NULL)
        return CLRUN__OOM(im);
    s = guarded_branch(im, n, then_branch, "then_branch", then_g, false, outs);
    if (s == CLRUN_OK)
        s = guarded_branch(im, n, else_branch, "else_branch", else_g, saved == NULL, outs + n->n_out);
    for (int i = 0; s == CLRUN_OK && i < n->n_out; i++) {
        const clrun__otensor *a = &outs[i]->c, *b = &outs[n->n_out + i]->c;
        bool same = a->elem == b->elem && a->rank == b->rank;
        for (int d = 0; same && d < a->rank; d++)
            same = a->dims[d] == b->dims[d];
        if (!same) {
            char ta[160], tb[160];
            describe(a, ta, sizeof ta);
            describe(b, tb, sizeof tb);
            s = clrun__unsupported(im, "If's output %d: the then_branch gives '%s' %s, the else_branch "
                                   "'%s' %s; with a condition known only at run time ('%s') both "
                                   "branches must give the same type and shape",
                                   i, value_label(outs[i]), ta, value_label(outs[n->n_out + i]), tb,
                                   value_label(cond));
            break;
        }
        if (n->out[i] < 0)
            continue;
        clrun__value *in[3] = {scalar, outs[i], outs[n->n_out + i]};
        s = clrun__emit1(im, n, "where", in, 3, NULL, 0, i, NULL);
    }
    free(outs);
    return s;
}

clrun_status clrun__map_if(clrun__imp *im, clrun__onode *n)
{
    const Onnx__GraphProto *then_branch = branch(n, "then_branch"), *else_branch = branch(n, "else_branch");
    if (then_branch == NULL || else_branch == NULL)
        return clrun__invalid(im, "If needs the graph attributes then_branch and else_branch");
    if (n->n_in != 1 || n->in[0] == NULL)
        return clrun__invalid(im, "If takes one input, its condition");
    if (!clrun__is_const(n->in[0]))
        return run_time_if(im, n, then_branch, else_branch);
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
