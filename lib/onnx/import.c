/* clrun_graph_load_onnx: the driver of the ONNX importer.
 *
 * The bytes are checked at the wire level (wire.c) and unpacked by protobuf-c (code generated at
 * build time from Debian's onnx.proto). Then, in order: the opset of the default domain; a clrun
 * name for every ONNX value (inputs, initializers, node outputs), so temporaries never take one;
 * initializers decoded as host constants; inputs with every dimension bound; the nodes in
 * topological order, each folded on the host when all its inputs are host constants and its
 * operator can be evaluated there, else mapped onto graph nodes (map_*.c); the outputs, checked
 * against the types the model declares. Any failure destroys the half-built graph: a model is
 * loaded whole or not at all. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "core/file.h"
#include "onnx/import.h"
#include "onnx/wire.h"

/* The newest opset whose operator semantics this importer knows. */
#define NEWEST_OPSET 21

void clrun_onnx_options_init(clrun_onnx_options *options)
{
    if (options)
        memset(options, 0, sizeof *options);
}

/* ---- nodes ---- */

/* The nodes in an order where every value is produced before it is read: the model's order when
 * it is already topological (as ONNX requires), else Kahn's algorithm, taking the lowest index
 * that is ready each time (stable), in O((nodes + edges) log nodes). */
static clrun_status node_order(clrun__imp *im, const Onnx__GraphProto *g, int32_t *producer,
                               size_t *order)
{
    size_t n = g->n_node, edges = 0, done = 0;
    for (size_t i = 0; i < n; i++)
        edges += g->node[i]->n_input;
    size_t *waiting = calloc(n + 1, sizeof *waiting);    /* inputs not yet produced, per node */
    size_t *start = calloc(n + 2, sizeof *start);        /* readers of node i: reader[start[i]..] */
    size_t *reader = malloc((edges + 1) * sizeof *reader);
    size_t *heap = malloc((n + 1) * sizeof *heap), heap_n = 0;
    clrun_status s = waiting && start && reader && heap ? CLRUN_OK : CLRUN__OOM(im);
    /* The producer of each input that a node produces (self-reads are cycles, kept). */
    for (int pass = 0; s == CLRUN_OK && pass < 2; pass++) {
        for (size_t i = 0; i < n; i++) {
            const Onnx__NodeProto *node = g->node[i];
            for (size_t k = 0; k < node->n_input; k++) {
                const char *name = node->input[k];
                int32_t v = name && name[0] ? clrun__imp_find(im, name) : -1;
                if (v < 0 || producer[v] < 0)
                    continue;
                size_t p = (size_t)producer[v];
                if (pass == 0) {
                    start[p + 1]++;
                    waiting[i]++;
                } else {
                    reader[start[p]++] = i;
                }
            }
        }
        if (pass == 0)
            for (size_t i = 0; i < n; i++)
                start[i + 1] += start[i];
    }
    /* start[p] now ends node p's readers; they begin at the previous node's end. */
    for (size_t i = 0; s == CLRUN_OK && i < n; i++)
        if (waiting[i] == 0)
            heap[heap_n++] = i; /* ascending: already a heap */
    while (s == CLRUN_OK && heap_n) {
        size_t top = heap[0];
        heap[0] = heap[--heap_n];
        for (size_t j = 0;;) { /* sift down */
            size_t l = 2 * j + 1, m = j;
            if (l < heap_n && heap[l] < heap[m]) m = l;
            if (l + 1 < heap_n && heap[l + 1] < heap[m]) m = l + 1;
            if (m == j) break;
            size_t t = heap[j]; heap[j] = heap[m]; heap[m] = t;
            j = m;
        }
        order[done++] = top;
        for (size_t e = top ? start[top - 1] : 0; e < start[top]; e++) {
            size_t r = reader[e];
            if (--waiting[r] == 0) { /* sift up */
                size_t j = heap_n++;
                heap[j] = r;
                while (j && heap[(j - 1) / 2] > heap[j]) {
                    size_t t = heap[j]; heap[j] = heap[(j - 1) / 2]; heap[(j - 1) / 2] = t;
                    j = (j - 1) / 2;
                }
            }
        }
    }
    for (size_t i = 0; s == CLRUN_OK && done < n && i < n; i++)
        if (waiting[i]) {
            s = clrun__invalid(im, "node %zu '%s' (%s) is part of a cycle", i,
                               g->node[i]->name ? g->node[i]->name : "",
                               g->node[i]->op_type ? g->node[i]->op_type : "");
            break;
        }
    free(waiting);
    free(start);
    free(reader);
    free(heap);
    return s;
}
static clrun_status import_node(clrun__imp *im, const Onnx__NodeProto *node, int index)
{
    clrun__onode n = {.proto = node, .index = index, .op = node->op_type ? node->op_type : ""};
    im->node = &n;
    const char *domain = clrun__imp_domain(node);
    int64_t opset = im->opset;
    if (domain[0]) { /* a domain clrun maps operators of, at an opset it knows */
        int newest = clrun__onnx_domain_newest(domain);
        if (newest == 0)
            return clrun__unsupported(im, "operators of domain '%s' are not supported", domain);
        opset = clrun__imp_domain_opset(im, domain);
        if (opset < 1)
            return clrun__invalid(im, "the model imports no version of domain '%s'", domain);
        if (opset > newest)
            return clrun__unsupported(im, "opset %" PRId64 " of domain '%s' is newer than clrun knows "
                                      "(up to %d)", opset, domain, newest);
    } else if (opset < 1) {
        return clrun__invalid(im, "the model imports no version of the default operator set");
    }
    const clrun__onnx_op *op = clrun__onnx_op_find(domain, n.op);
    if (op == NULL)
        return clrun__unsupported(im, "operator %s is not supported", n.op[0] ? n.op : "''");
    n.version = clrun__onnx_op_version(op, opset);
    if (n.version == 0)
        return clrun__invalid(im, "operator %s does not exist in opset %" PRId64, n.op, opset);
    clrun_status s = CLRUN_OK;
    int32_t first_node = clrun_graph_node_count(im->graph); /* the graph nodes it becomes */
    n.n_in = (int)node->n_input;
    n.n_out = (int)node->n_output;
    if (node->n_input > 1024 || node->n_output > 1024 || node->n_attribute > 1024)
        return clrun__unsupported(im, "the node has %zu inputs, %zu outputs and %zu attributes (at most "
                                  "1024 each)", node->n_input, node->n_output, node->n_attribute);
    n.in = calloc((size_t)n.n_in + 1, sizeof *n.in);
    n.out = calloc((size_t)n.n_out + 1, sizeof *n.out);
    n.attr_used = calloc(node->n_attribute + 1, sizeof *n.attr_used);
    if (!n.in || !n.out || !n.attr_used)
        s = CLRUN__OOM(im);
    bool all_const = true;
    for (int i = 0; s == CLRUN_OK && i < n.n_in; i++) {
        const char *name = node->input[i];
        if (name == NULL || name[0] == '\0')
            continue;
        int32_t v = clrun__imp_find(im, name);
        if (v < 0 || im->values[v]->kind == CLRUN__VALUE_ABSENT)
            s = clrun__invalid(im, "input %d '%s' is produced by no node, input or initializer", i, name);
        else
            n.in[i] = im->values[v];
        all_const = all_const && s == CLRUN_OK && n.in[i]->kind == CLRUN__VALUE_CONST;
    }
    for (int i = 0; s == CLRUN_OK && i < n.n_out; i++) {
        const char *name = node->output[i];
        n.out[i] = name && name[0] ? clrun__imp_find(im, name) : -1;
    }
    if (s == CLRUN_OK && op->fold && all_const) {
        s = op->fold(im, &n);
        if (s == CLRUN__NOT_FOLDED) {
            memset(n.attr_used, 0, node->n_attribute * sizeof *n.attr_used);
            for (int i = 0; i < n.n_out; i++)
                if (n.out[i] >= 0) {
                    clrun__value *v = im->values[n.out[i]];
                    clrun__otensor_free(&v->c);
                    v->kind = CLRUN__VALUE_ABSENT;
                }
            s = op->map(im, &n);
        }
    } else if (s == CLRUN_OK) {
        s = op->map(im, &n);
    }
    for (size_t a = 0; s == CLRUN_OK && a < node->n_attribute; a++)
        if (!n.attr_used[a])
            s = clrun__unsupported(im, "attribute '%s' is not supported",
                                   node->attribute[a]->name ? node->attribute[a]->name : "");
    for (int i = 0; s == CLRUN_OK && i < n.n_out; i++)
        if (n.out[i] >= 0 && im->values[n.out[i]]->kind == CLRUN__VALUE_ABSENT)
            s = clrun__unsupported(im, "output %d '%s' is not supported", i, node->output[i]);
    for (int i = 0; s == CLRUN_OK && i < n.n_out; i++) { /* as onnxruntime, a type the model declares */
        const clrun__value *v = n.out[i] >= 0 ? im->values[n.out[i]] : NULL;
        char a[32], b[32];
        if (v && v->declared_elem != 0 && v->c.elem != v->declared_elem)
            s = clrun__invalid(im, "output %d '%s' is %s, but the model's value_info declares %s", i,
                               node->output[i], clrun__onnx_elem_name(v->c.elem, a, sizeof a),
                               clrun__onnx_elem_name(v->declared_elem, b, sizeof b));
    }
    /* Traces and profiles show the model's node names. */
    for (int32_t k = first_node; s == CLRUN_OK && node->name && node->name[0] &&
                                 k < clrun_graph_node_count(im->graph); k++)
        if (clrun_graph_set_node_model_name(im->graph, k, node->name) != CLRUN_OK)
            s = CLRUN__OOM(im);
    free(n.in);
    free(n.out);
    free(n.attr_used);
    im->node = NULL;
    return s;
}

/* ---- subgraphs ---- */

clrun_status clrun__imp_inline_graph(clrun__imp *im, const Onnx__GraphProto *g)
{
    if (g->n_input)
        return clrun__unsupported(im, "a subgraph with inputs (%zu) is not supported", g->n_input);
    if (im->depth >= CLRUN__ONNX_MAX_NESTING)
        return clrun__unsupported(im, "subgraphs nested more than %d deep are not supported",
                                  CLRUN__ONNX_MAX_NESTING);
    clrun__onode *outer = im->node;
    im->depth++;
    clrun_status s = clrun__imp_declare_all(im, g, NULL);
    for (size_t i = 0; s == CLRUN_OK && i < g->n_node; i++)
        s = import_node(im, g->node[i], (int)i);
    im->depth--;
    im->node = outer; /* a failure's message, already written, names the subgraph's node */
    return s;
}

clrun_status clrun__imp_inline_body(clrun__imp *im, const Onnx__GraphProto *g, clrun__value *const *inputs,
                                    clrun__value **outputs)
{
    if (im->depth >= CLRUN__ONNX_MAX_NESTING)
        return clrun__unsupported(im, "subgraphs nested more than %d deep are not supported",
                                  CLRUN__ONNX_MAX_NESTING);
    clrun__onode *outer = im->node;
    int32_t first = im->value_count;
    clrun_status s = CLRUN_OK;
    for (size_t i = 0; s == CLRUN_OK && i < g->n_input; i++) {
        int32_t index;
        s = clrun__imp_declare(im, g->input[i]->name, "a body input", &index);
        clrun__value *v = s == CLRUN_OK ? im->values[index] : NULL, *src = inputs[i];
        if (v && src->kind == CLRUN__VALUE_CONST) {
            if (!clrun__otensor_copy(&v->c, &src->c))
                s = CLRUN__OOM(im);
            v->kind = CLRUN__VALUE_CONST;
        } else if (v) { /* the same device tensor under the body's name */
            clrun__value_alias_device(v, src);
        }
    }
    Onnx__GraphProto body = *g; /* its inputs are declared above, not as graph inputs */
    body.n_input = 0;
    im->depth++;
    if (s == CLRUN_OK)
        s = clrun__imp_declare_all(im, &body, NULL);
    for (size_t i = 0; s == CLRUN_OK && i < g->n_node; i++)
        s = import_node(im, g->node[i], (int)i);
    im->depth--;
    im->node = outer;
    for (size_t i = 0; s == CLRUN_OK && i < g->n_output; i++) {
        const char *name = g->output[i]->name ? g->output[i]->name : "";
        int32_t v = clrun__imp_find(im, name);
        if (v < 0 || im->values[v]->kind == CLRUN__VALUE_ABSENT)
            return clrun__invalid(im, "output %zu '%s' of the body is produced by no node or initializer it "
                                  "sees", i, name);
        outputs[i] = im->values[v];
    }
    /* The next iteration declares the same names: this one's are no longer found by them. Each
     * takes a name no model can look up ("\1" and its unique clrun name), so that the name index
     * stays spread out however many iterations there are. */
    for (int32_t v = first; s == CLRUN_OK && v < im->value_count; v++) {
        clrun__value *value = im->values[v];
        if (value->onnx_name == NULL || value->hidden)
            continue;
        size_t len = strlen(value->name) + 2;
        value->hidden = malloc(len);
        if (value->hidden == NULL)
            return CLRUN__OOM(im);
        value->hidden[0] = '\1';
        memcpy(value->hidden + 1, value->name, len - 1);
        value->onnx_name = value->hidden;
    }
    return s;
}

/* ---- outputs ---- */

static clrun_status check_declared(clrun__imp *im, const Onnx__ValueInfoProto *info, const clrun__value *v)
{
    const Onnx__TypeProto *tp = info->type;
    if (tp == NULL || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || tp->tensor_type == NULL)
        return tp == NULL || tp->value_case == ONNX__TYPE_PROTO__VALUE__NOT_SET
                   ? CLRUN_OK
                   : clrun__unsupported(im, "output '%s' is not a tensor", v->onnx_name);
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    char a[32], b[32], da[160], db[160];
    if (tt->has_elem_type && tt->elem_type != CLRUN__ONNX_UNDEFINED && tt->elem_type != v->c.elem)
        return clrun__invalid(im, "output '%s' is %s, but the model declares %s", v->onnx_name,
                              clrun__onnx_elem_name(v->c.elem, a, sizeof a),
                              clrun__onnx_elem_name(tt->elem_type, b, sizeof b));
    if (tt->shape == NULL)
        return CLRUN_OK;
    bool differ = (int)tt->shape->n_dim != v->c.rank;
    for (size_t d = 0; !differ && d < tt->shape->n_dim; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
        differ = dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
                 dim->dim_value != v->c.dims[d] &&
                 !(d == 0 && v->capacity_rows && dim->dim_value >= 0 && dim->dim_value < v->c.dims[0]);
    }
    if (!differ)
        return CLRUN_OK;
    int64_t declared[CLRUN__ONNX_MAX_RANK] = {0};
    for (size_t d = 0; d < tt->shape->n_dim && d < CLRUN__ONNX_MAX_RANK; d++)
        declared[d] = tt->shape->dim[d]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE
                          ? tt->shape->dim[d]->dim_value : -1;
    return clrun__invalid(im, "output '%s' has shape %s, but the model declares %s (-1: symbolic)",
                          v->onnx_name, clrun__onnx_dims_text(v->c.rank, v->c.dims, da, sizeof da),
                          clrun__onnx_dims_text((int)(tt->shape->n_dim < CLRUN__ONNX_MAX_RANK ? tt->shape->n_dim
                                                                                              : CLRUN__ONNX_MAX_RANK),
                                                declared, db, sizeof db));
}

/* The model's own name on graph tensor id (once: a tensor named already keeps its name). */
static clrun_status give_model_name(clrun__imp *im, clrun_tensor_id id, const char *onnx_name)
{
    if (im->graph->tensors[id].model_name)
        return CLRUN_OK;
    clrun_status s = clrun_graph_set_model_name(im->graph, id, onnx_name);
    return s == CLRUN_OK || s == CLRUN_ERROR_OUT_OF_HOST_MEMORY
               ? s : clrun__imp_fail(im, s, "'%.200s': %s", onnx_name, clrun_graph_last_error(im->graph));
}

/* Every graph input keeps the model's name, before the outputs, so that a name an input and
 * an output share finds the input. */
static clrun_status name_inputs(clrun__imp *im)
{
    clrun_status s = CLRUN_OK;
    for (int32_t i = 0; s == CLRUN_OK && i < im->value_count; i++) {
        const clrun__value *v = im->values[i];
        /* an empty input is a constant to the nodes (id -1): its graph input is found by name */
        clrun_tensor_id id = v->id >= 0 || !v->graph_input || !v->name ? v->id
                                                                        : clrun__graph_find_ident(im->graph, v->name);
        if (v->graph_input && v->onnx_name && id >= 0)
            s = give_model_name(im, id, v->onnx_name);
    }
    return s;
}

/* The other tensors that are ONNX values under their own name keep the model's name when it is
 * no identifier, so that messages and traces speak of "/layer.0/Add_output_0". */
static clrun_status name_intermediates(clrun__imp *im)
{
    clrun_status s = CLRUN_OK;
    for (int32_t i = 0; s == CLRUN_OK && i < im->value_count; i++) {
        const clrun__value *v = im->values[i];
        if (v->onnx_name && v->id >= 0 && v->kind != CLRUN__VALUE_ABSENT &&
            strcmp(v->onnx_name, v->name) != 0 &&
            strcmp(clrun_graph_tensor_ident(im->graph, v->id), v->name) == 0)
            s = give_model_name(im, v->id, v->onnx_name);
    }
    return s;
}

/* name, or where a graph tensor already has it, "name.outK" for the first K none has (in other,
 * which the result may point to). */
static const char *free_output_name(clrun__imp *im, const char *name, char other[CLRUN__GRAPH_NAME_MAX + 1])
{
    const char *free_name = name;
    for (int k = 0; clrun__graph_find_ident(im->graph, free_name) >= 0; k++) {
        snprintf(other, CLRUN__GRAPH_NAME_MAX + 1, "%.240s.out%d", name, k);
        free_name = other;
    }
    return free_name;
}

/* A graph output of the ONNX output value v, named as v: v's own tensor when it is a node's
 * output under v's name and not yet an output; otherwise (an alias of another value, a graph
 * input, a constant, an output listed twice) a copy under v's name, so that every output is its
 * own tensor and carries the model's name. */
static clrun_status add_output(clrun__imp *im, clrun__value *v)
{
    clrun_tensor_id id;
    const clrun_tensor_id *marked;
    int32_t n_marked = clrun_graph_outputs(im->graph, &marked);
    bool own = v->kind == CLRUN__VALUE_DEVICE && !v->graph_input &&
               strcmp(clrun_graph_tensor_ident(im->graph, v->id), v->name) == 0;
    for (int32_t k = 0; k < n_marked && own; k++)
        own = marked[k] != v->id;
    clrun_status s = CLRUN_OK;
    clrun_tensor_type empty;
    char why[256];
    if (v->kind == CLRUN__VALUE_CONST && clrun__otensor_host_type(&v->c, &empty, why, sizeof why) &&
        clrun_tensor_empty(&empty)) {
        /* An empty output: a constant of its shape and no data, which takes no memory and that
         * no kernel writes (a graph input or another output of the same value gets its own). */
        char other[CLRUN__GRAPH_NAME_MAX + 1];
        const char *name = free_output_name(im, v->name, other);
        s = clrun_graph_add_constant(im->graph, name, &empty, NULL, CLRUN_FILL_ZEROS, 0, 0, 0, &id);
        if (s != CLRUN_OK && s != CLRUN_ERROR_OUT_OF_HOST_MEMORY)
            return clrun__imp_fail(im, s, "output '%s': %s", v->onnx_name, clrun_graph_last_error(im->graph));
    } else if (own) {
        id = v->id;
    } else if (v->kind == CLRUN__VALUE_CONST && v->id < 0 &&
               clrun__graph_find_ident(im->graph, v->name) < 0) {
        /* A folded output: the constant itself, under its name. */
        s = clrun__device_id(im, v, &id);
    } else {
        clrun_tensor_id src;
        s = clrun__device_id(im, v, &src);
        char other[CLRUN__GRAPH_NAME_MAX + 1];
        const char *name = free_output_name(im, v->name, other);
        if (s == CLRUN_OK)
            s = clrun_graph_add_node(im->graph, "copy", &src, 1, &name, 1, NULL, 0, &id);
        if (s != CLRUN_OK && s != CLRUN_ERROR_OUT_OF_HOST_MEMORY && im->message[0] == '\0')
            return clrun__unsupported(im, "output '%s': %s", v->onnx_name, clrun_graph_last_error(im->graph));
    }
    if (s == CLRUN_OK && (s = clrun_graph_mark_output(im->graph, id)) != CLRUN_OK)
        return clrun__imp_fail(im, s, "output '%s': %s", v->onnx_name, clrun_graph_last_error(im->graph));
    if (s == CLRUN_OK)
        s = give_model_name(im, id, v->onnx_name);
    return s == CLRUN_ERROR_OUT_OF_HOST_MEMORY ? CLRUN__OOM(im) : s;
}

static clrun_status add_outputs(clrun__imp *im, const Onnx__GraphProto *g)
{
    if (g->n_output == 0)
        return clrun__invalid(im, "the graph has no outputs");
    clrun_status named = name_inputs(im);
    if (named != CLRUN_OK)
        return named == CLRUN_ERROR_OUT_OF_HOST_MEMORY ? CLRUN__OOM(im) : named;
    for (size_t i = 0; i < g->n_output; i++) {
        const char *name = g->output[i]->name;
        int32_t index = name ? clrun__imp_find(im, name) : -1;
        if (index < 0 || im->values[index]->kind == CLRUN__VALUE_ABSENT)
            return clrun__invalid(im, "output '%s' is produced by no node, input or initializer",
                                  name ? name : "");
        clrun__value *v = im->values[index];
        clrun_status s = check_declared(im, g->output[i], v);
        if (s == CLRUN_OK && v->kind == CLRUN__VALUE_CONST) {
            char why[256];
            clrun_tensor_type type;
            if (!clrun__otensor_host_type(&v->c, &type, why, sizeof why) ||
                (!clrun_tensor_empty(&type) && !clrun__otensor_clrun_type(&v->c, &type, why, sizeof why)))
                return clrun__unsupported(im, "output '%s' (a constant): %s", name, why);
        }
        if (s == CLRUN_OK)
            s = add_output(im, v);
        if (s != CLRUN_OK)
            return s;
    }
    clrun_status s = name_intermediates(im);
    return s == CLRUN_ERROR_OUT_OF_HOST_MEMORY ? CLRUN__OOM(im) : s;
}

/* ---- the model ---- */

static clrun_status read_opset(clrun__imp *im)
{
    const Onnx__ModelProto *m = im->model;
    int64_t v = clrun__imp_domain_opset(im, "");
    if (v < 0 && m->n_opset_import)
        return CLRUN_OK; /* only other domains: a node of the default one is refused */
    if (v < 0) {
        if (m->has_ir_version && m->ir_version >= 3)
            return clrun__invalid(im, "the model imports no version of the default operator set");
        v = 1; /* IR versions before 3 imply opset 1 */
    }
    if (v < 1)
        return clrun__invalid(im, "the model imports opset %" PRId64 " of the default domain", v);
    if (v > NEWEST_OPSET)
        return clrun__unsupported(im, "opset %" PRId64 " of the default domain is newer than clrun "
                                  "knows (up to %d)", v, NEWEST_OPSET);
    im->opset = v;
    return CLRUN_OK;
}
/* The element types g's value_info declares for the values its nodes produce, each checked when
 * its node is imported. Value infos of inputs, initializers or unknown names are left alone. */
static void note_declared(clrun__imp *im, const Onnx__GraphProto *g)
{
    for (size_t i = 0; i < g->n_value_info; i++) {
        const Onnx__ValueInfoProto *info = g->value_info[i];
        const Onnx__TypeProto *tp = info ? info->type : NULL;
        if (info == NULL || info->name == NULL || tp == NULL ||
            tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || tp->tensor_type == NULL ||
            !tp->tensor_type->has_elem_type || tp->tensor_type->elem_type == CLRUN__ONNX_UNDEFINED)
            continue;
        int32_t v = clrun__imp_find(im, info->name);
        if (v >= 0 && !im->values[v]->graph_input && im->values[v]->kind == CLRUN__VALUE_ABSENT)
            im->values[v]->declared_elem = tp->tensor_type->elem_type;
    }
}

static clrun_status import_graph(clrun__imp *im)
{
    const Onnx__GraphProto *g = im->model->graph;
    if (g == NULL)
        return clrun__invalid(im, "the model has no graph");
    clrun_status s = read_opset(im);
    char gname[CLRUN_ONNX_NAME_MAX + 2];
    if (s == CLRUN_OK) {
        s = clrun_graph_create(g->name && g->name[0] ? clrun_onnx_name(g->name, gname, sizeof gname) : NULL,
                               &im->graph);
        if (s != CLRUN_OK)
            return CLRUN__OOM(im);
    }
    size_t names = g->n_input + g->n_initializer;
    for (size_t i = 0; i < g->n_node; i++)
        names += g->node[i]->n_output;
    int32_t *producer = s == CLRUN_OK ? malloc((names + 1) * sizeof *producer) : NULL;
    size_t *order = s == CLRUN_OK ? malloc((g->n_node + 1) * sizeof *order) : NULL;
    if (s == CLRUN_OK && (!producer || !order))
        s = CLRUN__OOM(im);
    for (size_t i = 0; s == CLRUN_OK && i < names + 1; i++)
        producer[i] = -1;
    if (s == CLRUN_OK)
        s = clrun__imp_check_options(im, g);
    if (s == CLRUN_OK)
        s = clrun__imp_declare_all(im, g, producer);
    if (s == CLRUN_OK)
        note_declared(im, g);
    if (s == CLRUN_OK)
        s = node_order(im, g, producer, order);
    int32_t *readers = NULL, counted = im->value_count;
    if (s == CLRUN_OK)
        s = clrun__imp_count_readers(im, g, &readers);
    for (size_t i = 0; s == CLRUN_OK && i < g->n_node; i++)
        if ((s = import_node(im, g->node[order[i]], (int)order[i])) == CLRUN_OK)
            clrun__imp_release_inputs(im, g->node[order[i]], readers, counted);
    free(readers);
    if (s == CLRUN_OK)
        s = add_outputs(im, g);
    if (s == CLRUN_OK && clrun_graph_validate(im->graph) != CLRUN_OK)
        s = clrun__invalid(im, "%s", clrun_graph_last_error(im->graph));
    free(producer);
    free(order);
    return s;
}

static char *folder_of(const char *path)
{
    const char *slash = path ? strrchr(path, '/') : NULL;
    if (slash == NULL)
        return NULL;
    size_t len = slash == path ? 1 : (size_t)(slash - path);
    char *dir = malloc(len + 1);
    if (dir) {
        memcpy(dir, path, len);
        dir[len] = '\0';
    }
    return dir;
}

static clrun_status finish(clrun__imp *im, clrun_status s, clrun_graph **out)
{
    if (s == CLRUN_OK) {
        *out = im->graph;
    } else {
        clrun_graph_destroy(im->graph);
        clrun__error_set(NULL, s, "%s", im->message);
        if (im->options && im->options->err && im->options->errlen)
            snprintf(im->options->err, im->options->errlen, "%s", im->message);
    }
    clrun__imp_free_values(im);
    free(im->dir);
    return s;
}

/* protobuf-c's allocations while it parses a model: most of the bytes are the weights' raw data,
 * each copied once into a block of its own that the tensors then take (and free with free()),
 * so large blocks come in huge pages (clrun__alloc_filled_whole): a few faults instead of one
 * per 4 KiB page copied. */
static void *unpack_alloc(void *data, size_t size)
{
    (void)data;
    return clrun__alloc_filled_whole(size);
}

static void unpack_free(void *data, void *block)
{
    (void)data;
    free(block);
}

clrun_status clrun_graph_load_onnx_memory(const void *data, size_t size, const char *filename,
                                          const clrun_onnx_options *options, clrun_graph **out)
{
    clrun__imp im = {.filename = filename ? filename : "<memory>", .options = options};
    clrun_status s = CLRUN_OK;
    if (out)
        *out = NULL;
    if (out == NULL || (data == NULL && size))
        return finish(&im, clrun__imp_fail(&im, CLRUN_ERROR_INVALID_ARGUMENT, "no model or no place for the graph"), out);
    if (options && options->external_data_dir) {
        size_t len = strlen(options->external_data_dir) + 1;
        im.dir = malloc(len);
        if (im.dir == NULL)
            return finish(&im, CLRUN__OOM(&im), out);
        memcpy(im.dir, options->external_data_dir, len);
    } else if (filename) {
        im.dir = folder_of(filename);
    }
    switch (clrun__onnx_wire_check(data, size)) {
    case CLRUN__WIRE_OK: break;
    case CLRUN__WIRE_MALFORMED:
        return finish(&im, clrun__imp_fail(&im, CLRUN_ERROR_PARSE, "not an ONNX model: malformed or truncated protobuf"), out);
    case CLRUN__WIRE_TOO_DEEP:
        return finish(&im, clrun__imp_fail(&im, CLRUN_ERROR_PARSE, "messages nested deeper than %d levels",
                                           CLRUN__ONNX_MAX_DEPTH), out);
    }
    ProtobufCAllocator weights = {.alloc = unpack_alloc, .free = unpack_free};
    Onnx__ModelProto *model = onnx__model_proto__unpack(&weights, size, data);
    if (model == NULL)
        return finish(&im, clrun__imp_fail(&im, CLRUN_ERROR_PARSE, "not an ONNX model: malformed protobuf"), out);
    im.model = model;
    s = import_graph(&im);
    s = finish(&im, s, out);
    onnx__model_proto__free_unpacked(model, &weights);
    return s;
}

clrun_status clrun_graph_load_onnx(const char *path, const clrun_onnx_options *options, clrun_graph **out)
{
    if (out)
        *out = NULL;
    char why[1024];
    size_t size = 0;
    /* A model is one protobuf message: at most 2 GiB (its weights beyond that are external
     * data). A regular file only: a FIFO or a device is refused, never waited on. */
    clrun_status read_status = CLRUN_ERROR_INVALID_ARGUMENT;
    char reason[768] = "";
    bool mapped = false; /* mapped, not read: no copy of the weights, no fresh pages */
    void *data = path && out ? clrun__file_map(path, (uint64_t)1 << 31, &size, &mapped, &read_status, reason,
                                               sizeof reason)
                             : NULL;
    if (data == NULL) {
        snprintf(why, sizeof why, "%s: %s", path ? path : "", reason);
        if (!path || !out)
            snprintf(why, sizeof why, "clrun_graph_load_onnx: no path or no place for the graph");
        clrun__error_set(NULL, read_status, "%s", why);
        if (options && options->err && options->errlen)
            snprintf(options->err, options->errlen, "%s", why);
        return read_status;
    }
    clrun_status s = clrun_graph_load_onnx_memory(data, size, path, options, out);
    clrun__file_unmap(data, size, mapped);
    return s;
}
