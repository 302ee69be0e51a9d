/* Control flow: If, when its condition is known at load (a constant, or folded from inputs the
 * caller fixed with the `constants` option): the branch it takes is imported in its place, the
 * other never looked at, so the device sees no control flow. With a condition known only at run
 * time both branches are imported, every graph node of each guarded by the condition (the
 * executor reads it back once and skips the nodes of the branch not taken), and each output is
 * where(condition, then's, else's): both branches are planned, the memory is the same whichever
 * runs, and a skipped branch's garbage is never selected. */
#include <stdlib.h>
#include <string.h>

#include "core/options.h"
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
    size_t at = (size_t)snprintf(buf, size, "%s[", clrun__onnx_elem_name(t->elem, elem, sizeof elem));
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

/* ---- Scan and Loop, unrolled at load ---- */

/* At most this many body imports per Scan or Loop node (each iteration is a copy of the body). */
#define MAX_ITERATIONS 4096
/* Inputs of one graph node emitted (emit.c's MAX_EMIT). */
#define MAX_EMIT_INPUTS 64

/* xs[0..count) joined on axis into output `out` (or a temporary), in pieces of at most 64. */
static clrun_status join(clrun__imp *im, clrun__onode *n, clrun__value **xs, int count, int axis, int out,
                         clrun__value **r)
{
    while (count > 64) {
        int k = 0;
        for (int i = 0; i < count; i += 64) {
            int m = count - i < 64 ? count - i : 64;
            clrun_status s = m == 1 ? clrun__mv_same(im, n, xs[i], -1, &xs[k])
                                    : clrun__mv_concat(im, n, xs + i, m, axis, -1, &xs[k]);
            if (s != CLRUN_OK)
                return s;
            k++;
        }
        count = k;
    }
    return count == 1 ? clrun__mv_same(im, n, xs[0], out, r) : clrun__mv_concat(im, n, xs, count, axis, out, r);
}

/* x with a dimension of 1 inserted at axis. */
static clrun_status unsqueeze(clrun__imp *im, clrun__onode *n, clrun__value *x, int axis, clrun__value **r)
{
    int64_t dims[CLRUN__ONNX_MAX_RANK];
    if (x->c.rank + 1 > CLRUN__ONNX_MAX_RANK)
        return clrun__unsupported(im, "a scan output of rank %d (at most %d)", x->c.rank + 1, CLRUN__ONNX_MAX_RANK);
    for (int d = 0, k = 0; d <= x->c.rank; d++)
        dims[d] = d == axis ? 1 : x->c.dims[k++];
    return clrun__mv_reshape(im, n, x, x->c.rank + 1, dims, -1, r);
}

/* Element `index` of x along axis, without that axis. */
static clrun_status take(clrun__imp *im, clrun__onode *n, clrun__value *x, int axis, int64_t index,
                         clrun__value **r)
{
    clrun__value *piece;
    clrun_status s = clrun__mv_slice(im, n, x, axis, index, 1, -1, &piece);
    int64_t dims[CLRUN__ONNX_MAX_RANK];
    for (int d = 0, k = 0; s == CLRUN_OK && d < x->c.rank; d++)
        if (d != axis)
            dims[k++] = x->c.dims[d];
    return s == CLRUN_OK ? clrun__mv_reshape(im, n, piece, x->c.rank - 1, dims, -1, r) : s;
}

/* One Scan without batch (opset 9's form): states[0..ns) and scans[0..nm) in; finals[0..ns) and
 * stacked outputs ys[0..nk) out. Axes already normalised. */
typedef struct scan_form {
    int ns, nm, nk;
    int in_axis[64], in_dir[64], out_axis[64], out_dir[64];
} scan_form;

static clrun_status scan_run_time(clrun__imp *im, clrun__onode *n, const Onnx__GraphProto *body,
                                  const scan_form *f, int64_t length, clrun__value **states,
                                  clrun__value *const *scans, clrun__value **finals, clrun__value **ys);

/* Whether a Scan of `length` steps over body runs per iteration (scan_run_time) rather than
 * unrolled: when its steps times its body's nodes (with the slicing and stacking each unrolled
 * step adds) exceed CLRUN_SCAN_UNROLL (default 256), or it has more steps than unrolling
 * allows. Deterministic: the model and the variable decide. */
static clrun_status scan_per_iteration(clrun__imp *im, const Onnx__GraphProto *body, const scan_form *f,
                                       int64_t length, bool *out)
{
    clrun__options options;
    char err[256];
    if (clrun__options_load(&options, err, sizeof err) != CLRUN_OK)
        return clrun__invalid(im, "%s", err);
    double nodes = (double)length * (double)(body->n_node + 2 * (size_t)f->nm + (size_t)f->nk);
    *out = length > MAX_ITERATIONS || nodes > options.scan_unroll;
    return CLRUN_OK;
}

static clrun_status scan_unrolled(clrun__imp *im, clrun__onode *n, const Onnx__GraphProto *body,
                                  const scan_form *f, clrun__value **states, clrun__value *const *scans,
                                  clrun__value **finals, clrun__value **ys, bool run_time)
{
    int64_t length = scans[0]->c.dims[f->in_axis[0]];
    for (int j = 1; j < f->nm; j++)
        if (scans[j]->c.dims[f->in_axis[j]] != length)
            return clrun__invalid(im, "scan inputs 0 and %d have %lld and %lld steps", j, (long long)length,
                                  (long long)scans[j]->c.dims[f->in_axis[j]]);
    if ((int)body->n_input != f->ns + f->nm || (int)body->n_output != f->ns + f->nk)
        return clrun__invalid(im, "the body takes %zu inputs and gives %zu outputs; the Scan has %d states, "
                              "%d scan inputs and %d scan outputs", body->n_input, body->n_output, f->ns,
                              f->nm, f->nk);
    if (length < 1)
        return clrun__unsupported(im, "a Scan of %lld steps (at least 1)", (long long)length);
    if (run_time)
        return scan_run_time(im, n, body, f, length, states, scans, finals, ys);
    if (length > MAX_ITERATIONS)
        return clrun__unsupported(im, "a Scan of %lld steps (clrun unrolls Scan at load: 1 to %d)",
                                  (long long)length, MAX_ITERATIONS);
    size_t width = (size_t)(f->ns + f->nm + f->nk) + 1;
    clrun__value **in = calloc(width, sizeof *in), **out = calloc(width, sizeof *out);
    clrun__value **steps = calloc((size_t)f->nk * (size_t)length + 1, sizeof *steps);
    clrun_status s = in && out && steps ? CLRUN_OK : CLRUN__OOM(im);
    for (int i = 0; s == CLRUN_OK && i < f->ns; i++)
        in[i] = states[i];
    for (int64_t t = 0; s == CLRUN_OK && t < length; t++) {
        for (int j = 0; s == CLRUN_OK && j < f->nm; j++)
            s = take(im, n, scans[j], f->in_axis[j], f->in_dir[j] ? length - 1 - t : t, &in[f->ns + j]);
        if (s == CLRUN_OK)
            s = clrun__imp_inline_body(im, body, in, out);
        for (int i = 0; s == CLRUN_OK && i < f->ns; i++)
            in[i] = out[i];
        for (int k = 0; s == CLRUN_OK && k < f->nk; k++) {
            if (out[f->ns + k]->c.rank + 1 > 1 && f->out_axis[k] > out[f->ns + k]->c.rank)
                s = clrun__invalid(im, "scan output %d's axis %d is outside rank %d", k, f->out_axis[k],
                                   out[f->ns + k]->c.rank + 1);
            int64_t slot = f->out_dir[k] ? length - 1 - t : t;
            if (s == CLRUN_OK)
                s = unsqueeze(im, n, out[f->ns + k], f->out_axis[k], &steps[(int64_t)k * length + slot]);
        }
    }
    for (int i = 0; s == CLRUN_OK && i < f->ns; i++)
        finals[i] = in[i];
    for (int k = 0; s == CLRUN_OK && k < f->nk; k++)
        s = join(im, n, steps + (int64_t)k * length, (int)length, f->out_axis[k], -1, &ys[k]);
    free(in);
    free(out);
    free(steps);
    return s;
}

/* A list attribute of at most `count` entries into out (default `fallback` each), checked. */
static clrun_status list_attr(clrun__imp *im, clrun__onode *n, const char *name, int count, int fallback,
                              int *out)
{
    int64_t values[64];
    int got = -1;
    clrun_status s = clrun__oattr_ints(im, n, name, values, 64, &got);
    if (s != CLRUN_OK)
        return s;
    if (got >= 0 && got != count)
        return clrun__invalid(im, "%s has %d entries, not %d", name, got, count);
    for (int i = 0; i < count; i++)
        out[i] = got >= 0 ? (int)values[i] : fallback;
    return CLRUN_OK;
}

clrun_status clrun__map_scan(clrun__imp *im, clrun__onode *n)
{
    const Onnx__GraphProto *body = branch(n, "body");
    if (body == NULL)
        return clrun__invalid(im, "Scan needs the graph attribute body");
    int64_t nm64;
    clrun_status s = clrun__oattr_int(im, n, "num_scan_inputs", -1, &nm64);
    if (s != CLRUN_OK)
        return s;
    bool batched = n->version < 9; /* opset 8: sequence_lens first, a batch axis on everything */
    int first = batched ? 1 : 0;
    scan_form f = {0};
    f.nm = (int)nm64;
    f.ns = n->n_in - first - f.nm;
    f.nk = n->n_out - f.ns;
    if (nm64 < 1 || nm64 > 64 || f.ns < 0 || f.nk < 0 || f.ns > 64 || f.nk > 64)
        return clrun__invalid(im, "num_scan_inputs %lld does not fit %d inputs and %d outputs (at most 64 "
                              "each)", (long long)nm64, n->n_in, n->n_out);
    if (batched && n->in[0] != NULL)
        return clrun__unsupported(im, "Scan's sequence_lens is not supported (every sequence runs its full "
                                  "length)");
    for (int i = first; i < n->n_in; i++)
        if (n->in[i] == NULL)
            return clrun__invalid(im, "input %d is empty", i);
    if (batched) {
        s = list_attr(im, n, "directions", f.nm, 0, f.in_dir);
        for (int j = 0; j < f.nm; j++)
            f.in_axis[j] = 0;
    } else {
        s = list_attr(im, n, "scan_input_directions", f.nm, 0, f.in_dir);
        if (s == CLRUN_OK)
            s = list_attr(im, n, "scan_output_directions", f.nk, 0, f.out_dir);
        if (s == CLRUN_OK)
            s = list_attr(im, n, "scan_input_axes", f.nm, 0, f.in_axis);
        if (s == CLRUN_OK)
            s = list_attr(im, n, "scan_output_axes", f.nk, 0, f.out_axis);
    }
    for (int j = 0; s == CLRUN_OK && j < f.nm; j++) {
        int rank = n->in[first + f.ns + j]->c.rank - (batched ? 1 : 0);
        s = clrun__norm_axis(im, f.in_axis[j], rank, "scan_input_axes", &f.in_axis[j]);
    }
    if (s != CLRUN_OK)
        return s;
    /* output axes need the body's output ranks: normalised after the first iteration would be
     * late, so only non-negative ones are taken as they are; negative ones count from the rank
     * of the stacked output, which the body's declared output gives */
    for (int k = 0; k < f.nk; k++)
        if (f.out_axis[k] < 0) {
            const Onnx__ValueInfoProto *vi = body->output[f.ns + k];
            const Onnx__TypeProto *tp = vi->type;
            if (!tp || !tp->tensor_type || !tp->tensor_type->shape)
                return clrun__unsupported(im, "a negative scan_output_axes entry needs the body's output %d "
                                          "to declare its rank", f.ns + k);
            f.out_axis[k] += (int)tp->tensor_type->shape->n_dim + 1;
            if (f.out_axis[k] < 0)
                return clrun__invalid(im, "scan_output_axes entry %d is outside the output's rank", k);
        }
    clrun__value *states[64], *scans[64], *finals[64], *ys[64];
    bool run_time = false; /* opset 8's batched form is always unrolled */
    int64_t steps = n->in[first + f.ns]->c.dims[f.in_axis[0] + (batched ? 1 : 0)];
    if (!batched)
        s = scan_per_iteration(im, body, &f, steps, &run_time);
    if (s != CLRUN_OK)
        return s;
    int64_t batch = batched ? n->in[first]->c.dims[0] : 1;
    for (int i = 0; batched && i < f.ns + f.nm; i++)
        if (n->in[first + i]->c.rank < 1 || n->in[first + i]->c.dims[0] != batch)
            return clrun__invalid(im, "input %d has no batch axis of %lld", first + i, (long long)batch);
    if (batch < 1 || batch > MAX_ITERATIONS)
        return clrun__unsupported(im, "a Scan over a batch of %lld", (long long)batch);
    clrun__value **per_batch = calloc((size_t)(f.ns + f.nk) * (size_t)batch + 1, sizeof *per_batch);
    if (per_batch == NULL)
        return CLRUN__OOM(im);
    for (int64_t b = 0; s == CLRUN_OK && b < batch; b++) {
        for (int i = 0; s == CLRUN_OK && i < f.ns + f.nm; i++) {
            clrun__value *x = n->in[first + i], **to = i < f.ns ? &states[i] : &scans[i - f.ns];
            s = batched ? take(im, n, x, 0, b, to) : clrun__mv_same(im, n, x, -1, to);
        }
        if (s == CLRUN_OK)
            s = scan_unrolled(im, n, body, &f, states, scans, finals, ys, run_time);
        for (int i = 0; s == CLRUN_OK && i < f.ns + f.nk; i++) {
            clrun__value *v = i < f.ns ? finals[i] : ys[i - f.ns];
            if (batched)
                s = unsqueeze(im, n, v, 0, &v);
            per_batch[(int64_t)i * batch + b] = v;
        }
    }
    for (int i = 0; s == CLRUN_OK && i < f.ns + f.nk; i++)
        if (n->out[i] >= 0)
            s = join(im, n, per_batch + (int64_t)i * batch, (int)batch, 0, i, NULL);
    free(per_batch);
    return s;
}

/* ---- Loop run at run time ---- */

/* Whether name is in names[0..count). */
static bool listed(char **names, size_t count, const char *name)
{
    for (size_t i = 0; i < count; i++)
        if (strcmp(names[i], name) == 0)
            return true;
    return false;
}

/* One pass over the body: data[0..return) gets the names that depend on data, that is, the
 * carried inputs marked in carried[] and a device value of the scopes the body sees, through
 * the body's nodes (a node with a subgraph counts as depending on data); local[] is room for
 * the body's own names. */
static size_t data_pass(clrun__imp *im, const Onnx__GraphProto *body, const bool *carried, char **data,
                        char **local)
{
    size_t count = 0, local_count = 0;
    for (size_t i = 0; i < body->n_input; i++) {
        if (body->input[i]->name == NULL)
            continue;
        local[local_count++] = body->input[i]->name;
        if (carried[i])
            data[count++] = body->input[i]->name;
    }
    for (size_t i = 0; i < body->n_initializer; i++)
        if (body->initializer[i]->name)
            local[local_count++] = body->initializer[i]->name;
    for (size_t i = 0; i < body->n_node; i++) {
        const Onnx__NodeProto *node = body->node[i];
        bool uses = false;
        for (size_t a = 0; a < node->n_attribute && !uses; a++)
            uses = node->attribute[a]->g != NULL || node->attribute[a]->n_graphs > 0;
        for (size_t k = 0; k < node->n_input && !uses; k++) {
            const char *name = node->input[k];
            if (name == NULL || name[0] == '\0')
                continue;
            if (listed(data, count, name)) {
                uses = true;
            } else if (!listed(local, local_count, name)) { /* outer scope */
                int32_t v = clrun__imp_find(im, name);
                uses = v >= 0 && im->values[v]->kind == CLRUN__VALUE_DEVICE;
            }
        }
        for (size_t k = 0; k < node->n_output; k++) {
            if (node->output[k] == NULL || node->output[k][0] == '\0')
                continue;
            local[local_count++] = node->output[k];
            if (uses)
                data[count++] = node->output[k];
        }
    }
    return count;
}

/* Whether the body's condition (output 0) depends on data: on a carried value whose initial
 * value is a device tensor (a constant one folds while unrolled) or whose result in the body
 * depends on data, or on a device value of the scopes the body sees. The iteration number and
 * the incoming condition are not data: an unrolled body folds them. */
static clrun_status body_cond_uses_data(clrun__imp *im, const clrun__onode *n, const Onnx__GraphProto *body,
                                        bool *result)
{
    *result = false;
    if (body->n_output < 1 || body->output[0]->name == NULL)
        return CLRUN_OK;
    size_t cap = body->n_input + body->n_initializer + 1;
    for (size_t i = 0; i < body->n_node; i++)
        cap += body->node[i]->n_output;
    char **data = malloc(cap * sizeof *data), **local = malloc(cap * sizeof *local);
    bool *carried = calloc(body->n_input + 1, sizeof *carried);
    if (data == NULL || local == NULL || carried == NULL) {
        free(data);
        free(local);
        free(carried);
        return CLRUN__OOM(im);
    }
    for (size_t i = 2; i < body->n_input; i++)
        carried[i] = (int)i < n->n_in && !clrun__is_const(n->in[i]);
    size_t count = 0;
    for (bool again = true; again;) { /* a carried value becomes data at most once */
        again = false;
        count = data_pass(im, body, carried, data, local);
        for (size_t i = 2; i < body->n_input && i - 1 < body->n_output; i++)
            if (!carried[i] && body->output[i - 1]->name && listed(data, count, body->output[i - 1]->name))
                carried[i] = again = true;
    }
    *result = listed(data, count, body->output[0]->name);
    free(data);
    free(local);
    free(carried);
    return CLRUN_OK;
}

/* The value that names device tensor t (the first made), or NULL. */
static clrun__value *value_of_tensor(clrun__imp *im, clrun_tensor_id t)
{
    for (int32_t i = 0; i < im->value_count; i++)
        if (im->values[i]->kind == CLRUN__VALUE_DEVICE && im->values[i]->id == t)
            return im->values[i];
    return NULL;
}

static bool same_type(const clrun__otensor *a, const clrun__otensor *b)
{
    bool same = a->elem == b->elem && a->rank == b->rank;
    for (int d = 0; same && d < a->rank; d++)
        same = a->dims[d] == b->dims[d];
    return same;
}

/* The body's tensors from before it (first_node on are its nodes) that it reads: inputs of
 * loop_end, so that they live over every iteration. Constants are resident anyway. */
static clrun_status outer_reads(clrun__imp *im, int32_t first_node, clrun__value **ins, int *count, int max)
{
    const clrun_graph *g = im->graph;
    for (int32_t n = first_node; n < g->node_count; n++) {
        const clrun__node *node = &g->nodes[n];
        for (int k = 0; k <= node->input_count; k++) {
            int32_t t = k < node->input_count ? node->inputs[k] : node->guarded ? node->guard : -1;
            if (t < 0 || g->tensors[t].kind == CLRUN__TENSOR_CONSTANT ||
                (g->tensors[t].producer >= first_node))
                continue;
            bool seen = false;
            for (int i = 0; i < *count && !seen; i++)
                seen = ins[i]->id == t;
            if (seen)
                continue;
            if (*count == max)
                return clrun__unsupported(im, "the body reads more than %d values from outside it (a Loop "
                                          "run at run time)", max - 3);
            clrun__value *v = value_of_tensor(im, t);
            if (v == NULL)
                return clrun__invalid(im, "internal: tensor '%s' read by the body has no value",
                                      g->tensors[t].name);
            ins[(*count)++] = v;
        }
    }
    return CLRUN_OK;
}

/* The stacked type of the body's scan output k (declared by the body: the output tensors are
 * made before the body is imported), its element type and shape with the Scan's length
 * inserted at its axis, into *out. */
static clrun_status stacked_type(clrun__imp *im, const Onnx__GraphProto *body, const scan_form *f, int k,
                                 int64_t length, clrun__otensor *out)
{
    const Onnx__ValueInfoProto *vi = body->output[f->ns + k];
    const char *name = vi->name ? vi->name : "";
    const Onnx__TypeProto *tp = vi->type;
    const Onnx__TensorShapeProto *shape = tp && tp->tensor_type ? tp->tensor_type->shape : NULL;
    clrun_dtype dtype;
    bool known = shape && tp->tensor_type->has_elem_type &&
                 clrun__onnx_elem_dtype(tp->tensor_type->elem_type, &dtype) && shape->n_dim + 1 <= CLRUN__ONNX_MAX_RANK;
    for (size_t d = 0; known && d < shape->n_dim; d++)
        known = shape->dim[d]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
                shape->dim[d]->dim_value > 0;
    if (!known)
        return clrun__unsupported(im, "a Scan of %lld steps runs per iteration (CLRUN_SCAN_UNROLL), which needs "
                                  "the body's scan output %d '%s' to declare its element type and every "
                                  "dimension", (long long)length, k, name);
    int rank = (int)shape->n_dim;
    if (f->out_axis[k] > rank)
        return clrun__invalid(im, "scan output %d's axis %d is outside rank %d", k, f->out_axis[k], rank + 1);
    memset(out, 0, sizeof *out);
    out->elem = tp->tensor_type->elem_type;
    out->rank = rank + 1;
    for (int d = 0, j = 0; d <= rank; d++)
        out->dims[d] = d == f->out_axis[k] ? length : shape->dim[j++]->dim_value;
    return CLRUN_OK;
}

/* A Scan run per iteration (more steps than unrolling allows, or than CLRUN_SCAN_UNROLL wants
 * unrolled): a Loop of `length` iterations over the body imported once. Each scan input's slice
 * is a gather at the iteration number (at -1 - the number, from the end, when reversed); the
 * states are carried as a Loop's values; each scan output goes into slice t (length-1-t when
 * reversed) of its stacked tensor, made once before the loop (scan_stack) and written in place
 * (scan_put), then copied out after it. The body's buffers are taken and given back per
 * iteration like a Loop's (the same offsets in planned mode). */
static clrun_status scan_run_time(clrun__imp *im, clrun__onode *n, const Onnx__GraphProto *body,
                                  const scan_form *f, int64_t length, clrun__value **states,
                                  clrun__value *const *scans, clrun__value **finals, clrun__value **ys)
{
    int ns = f->ns, nm = f->nm, nk = f->nk;
    if (2 * ns + 3 + nk > MAX_EMIT_INPUTS)
        return clrun__unsupported(im, "a Scan run per iteration carries at most %d states and scan outputs "
                                  "together (2 per state), not %d states and %d scan outputs",
                                  MAX_EMIT_INPUTS - 3, ns, nk);
    clrun__otensor full[64];
    clrun_status s = CLRUN_OK;
    for (int k = 0; s == CLRUN_OK && k < nk; k++)
        s = stacked_type(im, body, f, k, length, &full[k]);
    if (s != CLRUN_OK)
        return s;
    clrun__value *trip = clrun__scalar_value(im, CLRUN__ONNX_INT64, (double)length, 0);
    clrun__value *cond = clrun__scalar_value(im, CLRUN__ONNX_BOOL, 1, 0);
    clrun__value *minus_one = clrun__scalar_value(im, CLRUN__ONNX_INT64, -1, 0);
    if (trip == NULL || cond == NULL || minus_one == NULL)
        return CLRUN__OOM(im);
    clrun__value *ins[MAX_EMIT_INPUTS], *begun[2], *count = NULL, *acc[64], *token[64];
    clrun__value **in = calloc((size_t)(ns + nm) + 1, sizeof *in), **out = calloc((size_t)(ns + nk) + 1, sizeof *out);
    s = in && out ? CLRUN_OK : CLRUN__OOM(im);
    for (int i = 0; s == CLRUN_OK && i < ns; i++)
        s = clrun__emit1(im, n, "loop_carry", &states[i], 1, NULL, 0, -1, &in[i]);
    for (int k = 0; s == CLRUN_OK && k < nk; k++) {
        clrun_dtype dtype = CLRUN_F32;
        clrun__onnx_elem_dtype(full[k].elem, &dtype);
        clrun_attr attrs[2] = {clrun__mk_ints("shape", full[k].dims, full[k].rank),
                               clrun__mk_int("dtype", (int64_t)dtype)};
        clrun__value *anchor = scans[0];
        s = clrun__emit1(im, n, "scan_stack", &anchor, 1, attrs, 2, -1, &acc[k]);
    }
    ins[0] = trip;
    ins[1] = cond;
    for (int i = 0; i < ns; i++)
        ins[2 + i] = in[i];
    int none[2] = {-1, -1};
    if (s == CLRUN_OK)
        s = clrun__emit(im, n, "loop_begin", ins, 2 + ns, NULL, 0, none, 2, begun);
    clrun__value *saved = im->guard;
    bool saved_negate = im->guard_negate;
    int32_t first_node = im->graph->node_count;
    if (s == CLRUN_OK) {
        im->guard = begun[1]; /* true while the body runs: keeps its nodes apart (never fused) */
        im->guard_negate = false;
    }
    clrun__value *from_end = NULL;
    for (int j = 0; s == CLRUN_OK && j < nm; j++) {
        if (f->in_dir[j] && from_end == NULL)
            s = clrun__emit_binary(im, n, "sub", minus_one, begun[0], -1, &from_end);
        clrun__value *pair[2] = {scans[j], f->in_dir[j] ? from_end : begun[0]};
        clrun_attr axis = clrun__mk_int("axis", f->in_axis[j]);
        if (s == CLRUN_OK)
            s = clrun__emit1(im, n, "gather", pair, 2, &axis, 1, -1, &in[ns + j]);
    }
    if (s == CLRUN_OK) {
        s = clrun__imp_inline_body(im, body, in, out);
        im->node = n;
    }
    for (int i = 0; s == CLRUN_OK && i < ns; i++) {
        if (!same_type(&out[i]->c, &in[i]->c)) {
            char ta[160], tb[160];
            describe(&in[i]->c, ta, sizeof ta);
            describe(&out[i]->c, tb, sizeof tb);
            s = clrun__unsupported(im, "state %d comes in as %s and the body gives '%s' %s; in a Scan run per "
                                   "iteration states keep their type and shape", i, ta, value_label(out[i]), tb);
            break;
        }
        s = clrun__emit1(im, n, "loop_carry", &out[i], 1, NULL, 0, -1, &ins[3 + i]);
    }
    for (int k = 0; s == CLRUN_OK && k < nk; k++) {
        clrun__value *y = out[ns + k];
        bool fits = y->c.elem == full[k].elem && y->c.rank + 1 == full[k].rank;
        for (int d = 0, j = 0; fits && d < full[k].rank; d++)
            if (d != f->out_axis[k])
                fits = y->c.dims[j++] == full[k].dims[d];
        if (!fits) {
            char ta[160], tb[160];
            describe(&y->c, ta, sizeof ta);
            describe(&full[k], tb, sizeof tb);
            s = clrun__unsupported(im, "the body's scan output %d '%s' is %s, which is not a slice of the %s "
                                   "its declared type gives", k, value_label(y), ta, tb);
            break;
        }
        clrun__value *put[3] = {acc[k], y, begun[0]};
        clrun_attr attrs[2] = {clrun__mk_int("axis", f->out_axis[k]), clrun__mk_int("reverse", f->out_dir[k] != 0)};
        s = clrun__emit1(im, n, "scan_put", put, 3, attrs, 2, -1, &token[k]);
    }
    im->guard = saved;
    im->guard_negate = saved_negate;
    int count_in = 3 + 2 * ns;
    if (s == CLRUN_OK) {
        ins[0] = begun[0];
        ins[1] = begun[1];
        ins[2] = begun[1]; /* the condition passes through: the trip count ends the loop */
        for (int i = 0; i < ns; i++)
            ins[3 + ns + i] = in[i];
        s = outer_reads(im, first_node, ins, &count_in, MAX_EMIT_INPUTS - nk);
    }
    for (int k = 0; s == CLRUN_OK && k < nk; k++)
        ins[count_in++] = token[k];
    clrun_attr carried = clrun__mk_int("carried", ns);
    if (s == CLRUN_OK)
        s = clrun__emit1(im, n, "loop_end", ins, count_in, &carried, 1, -1, &count);
    for (int i = 0; s == CLRUN_OK && i < ns; i++) {
        clrun__value *pair[2] = {in[i], count};
        s = clrun__emit1(im, n, "loop_carry", pair, 2, NULL, 0, -1, &finals[i]);
    }
    for (int k = 0; s == CLRUN_OK && k < nk; k++) {
        clrun__value *pair[2] = {acc[k], count};
        s = clrun__emit1(im, n, "loop_carry", pair, 2, NULL, 0, -1, &ys[k]);
    }
    free(in);
    free(out);
    return s;
}

/* A Loop whose trip count or condition is known only at run time (or whose body computes its
 * condition from data): the body imported once between loop_begin and loop_end, which the
 * executor runs once per iteration (graph/infer_loop.c). Carried values keep their type and
 * shape; scan outputs are refused (their length would be known only at run time). */
static clrun_status run_time_loop(clrun__imp *im, clrun__onode *n, const Onnx__GraphProto *body, int nc)
{
    clrun__value *trip = n->in[0], *cond = n->in[1];
    if (trip && (trip->c.elem != CLRUN__ONNX_INT64 || clrun__otensor_count(&trip->c) != 1))
        return clrun__invalid(im, "Loop's trip count '%s' is not one int64 element", value_label(trip));
    if (cond && (cond->c.elem != CLRUN__ONNX_BOOL || clrun__otensor_count(&cond->c) != 1))
        return clrun__invalid(im, "Loop's condition '%s' is not one bool element", value_label(cond));
    if (2 * nc + 3 > MAX_EMIT_INPUTS)
        return clrun__unsupported(im, "a Loop run at run time carries at most %d values, not %d",
                                  (MAX_EMIT_INPUTS - 3) / 2, nc);
    if (trip == NULL && (trip = clrun__scalar_value(im, CLRUN__ONNX_INT64, 4.0e18, 0)) == NULL)
        return CLRUN__OOM(im);
    if (cond == NULL && (cond = clrun__scalar_value(im, CLRUN__ONNX_BOOL, 1, 0)) == NULL)
        return CLRUN__OOM(im);
    clrun__value *ins[MAX_EMIT_INPUTS], *begun[2], *count = NULL;
    clrun__value **in = calloc((size_t)nc + 3, sizeof *in), **out = calloc((size_t)nc + 2, sizeof *out);
    clrun_status s = in && out ? CLRUN_OK : CLRUN__OOM(im);
    for (int k = 0; s == CLRUN_OK && k < nc; k++)
        s = clrun__emit1(im, n, "loop_carry", &n->in[2 + k], 1, NULL, 0, -1, &in[2 + k]);
    ins[0] = trip;
    ins[1] = cond;
    for (int k = 0; k < nc; k++)
        ins[2 + k] = in[2 + k];
    int none[2] = {-1, -1};
    if (s == CLRUN_OK)
        s = clrun__emit(im, n, "loop_begin", ins, 2 + nc, NULL, 0, none, 2, begun);
    clrun__value *saved = im->guard;
    bool saved_negate = im->guard_negate;
    int32_t first_node = im->graph->node_count;
    if (s == CLRUN_OK) {
        in[0] = begun[0];
        in[1] = begun[1];
        im->guard = begun[1]; /* true while the body runs: keeps its nodes apart (never fused) */
        im->guard_negate = false;
        s = clrun__imp_inline_body(im, body, in, out);
        im->node = n;
    }
    for (int k = 0; s == CLRUN_OK && k < nc; k++) {
        if (!same_type(&out[1 + k]->c, &in[2 + k]->c)) {
            char ta[160], tb[160];
            describe(&in[2 + k]->c, ta, sizeof ta);
            describe(&out[1 + k]->c, tb, sizeof tb);
            s = clrun__unsupported(im, "loop-carried value %d comes in as %s and the body gives '%s' %s; in a "
                                   "Loop run at run time carried values keep their type and shape", k, ta,
                                   value_label(out[1 + k]), tb);
            break;
        }
        s = clrun__emit1(im, n, "loop_carry", &out[1 + k], 1, NULL, 0, -1, &ins[3 + k]);
    }
    im->guard = saved;
    im->guard_negate = saved_negate;
    if (s == CLRUN_OK && (out[0]->c.elem != CLRUN__ONNX_BOOL || clrun__otensor_count(&out[0]->c) != 1))
        s = clrun__invalid(im, "the body's condition '%s' is not one bool element", value_label(out[0]));
    int count_in = 3 + 2 * nc;
    if (s == CLRUN_OK) {
        ins[0] = begun[0];
        ins[1] = begun[1];
        /* a condition the body leaves true is the incoming one: the executor reads none back */
        bool always = clrun__is_const(out[0]) && clrun__otensor_get_int(&out[0]->c, 0) != 0;
        ins[2] = always ? begun[1] : out[0];
        for (int k = 0; k < nc; k++)
            ins[3 + nc + k] = in[2 + k];
        s = outer_reads(im, first_node, ins, &count_in, MAX_EMIT_INPUTS);
    }
    clrun_attr carried = clrun__mk_int("carried", nc);
    if (s == CLRUN_OK)
        s = clrun__emit1(im, n, "loop_end", ins, count_in, &carried, 1, -1, &count);
    for (int k = 0; s == CLRUN_OK && k < nc; k++) {
        if (n->out[k] < 0)
            continue;
        clrun__value *pair[2] = {in[2 + k], count};
        s = clrun__emit1(im, n, "loop_carry", pair, 2, NULL, 0, k, NULL);
    }
    free(in);
    free(out);
    return s;
}

/* Scan output `out` of a Loop that runs no iteration: empty on the axis of the iterations, each
 * entry of the type and shape the body declares for it (as onnxruntime does: no iteration gives
 * one), each dimension needed. */
static clrun_status empty_scan(clrun__imp *im, clrun__onode *n, const Onnx__ValueInfoProto *info, int out)
{
    const Onnx__TypeProto *tp = info->type;
    const Onnx__TypeProto__Tensor *tt =
        tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ? tp->tensor_type : NULL;
    bool known = tt && tt->has_elem_type && clrun__onnx_elem_size(tt->elem_type) > 0 && tt->shape &&
                 tt->shape->n_dim < CLRUN__ONNX_MAX_RANK;
    int64_t dims[CLRUN__ONNX_MAX_RANK] = {0};
    for (size_t d = 0; known && d < tt->shape->n_dim; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
        known = dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && dim->dim_value >= 0;
        dims[1 + d] = known ? dim->dim_value : 0;
    }
    if (!known)
        return clrun__unsupported(im, "a Loop that runs no iteration has its scan output '%s' empty, of a "
                                  "shape no iteration gives: the body must declare that output's element type "
                                  "and every dimension", info->name ? info->name : "");
    return clrun__mv_empty(im, n, tt->elem_type, 1 + (int)tt->shape->n_dim, dims, out, NULL);
}

clrun_status clrun__map_loop(clrun__imp *im, clrun__onode *n)
{
    const Onnx__GraphProto *body = branch(n, "body");
    if (body == NULL)
        return clrun__invalid(im, "Loop needs the graph attribute body");
    if (n->n_in < 2)
        return clrun__invalid(im, "Loop takes at least two inputs, M and cond (either may be empty)");
    clrun__value *trip = n->in[0], *cond = n->in[1];
    if (trip == NULL && cond == NULL)
        return clrun__unsupported(im, "Loop without M and cond runs forever");
    int nc = n->n_in - 2, nk = n->n_out - nc;
    if (nk < 0 || (int)body->n_input != nc + 2 || (int)body->n_output != nc + 1 + nk)
        return clrun__invalid(im, "the body takes %zu inputs and gives %zu outputs; the Loop has %d carried "
                              "values and %d scan outputs", body->n_input, body->n_output, nc, nk);
    for (int i = 2; i < n->n_in; i++)
        if (n->in[i] == NULL)
            return clrun__invalid(im, "input %d is empty", i);
    bool data_cond = false;
    clrun_status s = body_cond_uses_data(im, n, body, &data_cond);
    if (s != CLRUN_OK)
        return s;
    bool run_time = (trip && !clrun__is_const(trip)) || (cond && !clrun__is_const(cond)) || data_cond;
    if (run_time && nk > 0) {
        if (trip && !clrun__is_const(trip))
            return clrun__unsupported(im, "input 0 (the trip count) '%s' must be known at load time in a Loop "
                                      "with scan outputs (they stack one entry per iteration): fix it with "
                                      "the `constants` load option", value_label(trip));
        if (cond && !clrun__is_const(cond))
            return clrun__unsupported(im, "input 1 (the initial condition) '%s' must be known at load time in "
                                      "a Loop with scan outputs (they stack one entry per iteration): fix it "
                                      "with the `constants` load option", value_label(cond));
        return clrun__unsupported(im, "a Loop with scan outputs whose body computes its condition from data "
                                  "('%s'): the number of entries would be known only at run time",
                                  body->output[0]->name ? body->output[0]->name : "");
    }
    if (run_time)
        return run_time_loop(im, n, body, nc);
    if ((trip && clrun__otensor_count(&trip->c) != 1) || (cond && clrun__otensor_count(&cond->c) != 1))
        return clrun__invalid(im, "Loop's M and cond have one element each");
    int64_t max_trip = trip ? clrun__otensor_get_int(&trip->c, 0) : INT64_MAX;
    bool go = cond ? clrun__otensor_get_int(&cond->c, 0) != 0 : true;
    size_t width = (size_t)(nc + nk) + 3;
    clrun__value **in = calloc(width, sizeof *in), **out = calloc(width, sizeof *out);
    clrun__value **steps = calloc((size_t)nk * MAX_ITERATIONS + 1, sizeof *steps);
    s = in && out && steps ? CLRUN_OK : CLRUN__OOM(im);
    for (int i = 0; s == CLRUN_OK && i < nc; i++)
        in[2 + i] = n->in[2 + i];
    int64_t t = 0;
    for (; s == CLRUN_OK && go && t < max_trip; t++) {
        if (t == MAX_ITERATIONS) {
            s = clrun__unsupported(im, "a Loop of more than %d iterations (clrun unrolls Loop at load)",
                                   MAX_ITERATIONS);
            break;
        }
        in[0] = clrun__scalar_value(im, CLRUN__ONNX_INT64, (double)t, 0);
        in[1] = clrun__scalar_value(im, CLRUN__ONNX_BOOL, 1, 0);
        if (in[0] == NULL || in[1] == NULL) {
            s = CLRUN__OOM(im);
            break;
        }
        s = clrun__imp_inline_body(im, body, in, out);
        if (s != CLRUN_OK)
            break;
        if (!clrun__is_const(out[0])) {
            s = clrun__unsupported(im, "Loop whose condition the body computes at run time ('%s') is not "
                                   "supported (clrun unrolls Loop at load)", value_label(out[0]));
            break;
        }
        go = clrun__otensor_get_int(&out[0]->c, 0) != 0;
        for (int i = 0; i < nc; i++)
            in[2 + i] = out[1 + i];
        for (int k = 0; s == CLRUN_OK && k < nk; k++)
            s = unsqueeze(im, n, out[1 + nc + k], 0, &steps[(int64_t)k * MAX_ITERATIONS + t]);
    }
    for (int k = 0; s == CLRUN_OK && t == 0 && k < nk; k++)
        if (n->out[nc + k] >= 0)
            s = empty_scan(im, n, body->output[1 + nc + k], nc + k);
    for (int i = 0; s == CLRUN_OK && i < nc; i++)
        if (n->out[i] >= 0)
            s = clrun__mv_same(im, n, in[2 + i], i, NULL);
    for (int k = 0; s == CLRUN_OK && t > 0 && k < nk; k++)
        if (n->out[nc + k] >= 0)
            s = join(im, n, steps + (int64_t)k * MAX_ITERATIONS, (int)t, 0, nc + k, NULL);
    free(in);
    free(out);
    free(steps);
    return s;
}
