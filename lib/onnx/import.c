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
#include "onnx/import.h"
#include "onnx/wire.h"

/* The newest opset whose operator semantics this importer knows. */
#define NEWEST_OPSET 17

void clrun_onnx_options_init(clrun_onnx_options *options)
{
    if (options)
        memset(options, 0, sizeof *options);
}

const char *clrun_onnx_name(const char *onnx_name, char *buf, size_t size)
{
    if (size == 0)
        return buf;
    size_t used = 0, limit = size - 1 < 240 ? size - 1 : 240; /* room for ".N" after it */
    const char *p = onnx_name ? onnx_name : "";
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_') && used < limit)
        buf[used++] = '_';
    for (; *p && used < limit; p++)
        buf[used++] = clrun__name_char(*p) ? *p : '_';
    buf[used] = '\0';
    return buf;
}

/* ---- failures ---- */

static const char *domain_text(const Onnx__NodeProto *node)
{
    const char *d = node->domain ? node->domain : "";
    return strcmp(d, "ai.onnx") == 0 ? "" : d;
}

static int64_t domain_opset(const clrun__imp *im, const char *domain)
{
    for (size_t i = 0; i < im->model->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = im->model->opset_import[i];
        const char *d = o->domain ? o->domain : "";
        if (strcmp(d, "ai.onnx") == 0)
            d = "";
        if (strcmp(d, domain) == 0)
            return o->has_version ? o->version : 1;
    }
    return -1;
}

clrun_status clrun__imp_fail(clrun__imp *im, clrun_status status, const char *format, ...)
{
    char text[CLRUN__ERROR_MAX - 512];
    va_list args;
    va_start(args, format);
    vsnprintf(text, sizeof text, format, args);
    va_end(args);
    if (im->node == NULL) {
        snprintf(im->message, sizeof im->message, "%s: %s", im->filename, text);
        return status;
    }
    const Onnx__NodeProto *node = im->node->proto;
    const char *domain = domain_text(node);
    char opset[96];
    int64_t version = domain_opset(im, domain);
    if (domain[0])
        snprintf(opset, sizeof opset, "domain %.40s, opset %" PRId64, domain, version);
    else
        snprintf(opset, sizeof opset, "opset %" PRId64, version);
    snprintf(im->message, sizeof im->message, "%s: node %d '%.200s' (%.100s, %s): %s", im->filename,
             im->node->index, node->name ? node->name : "", node->op_type ? node->op_type : "",
             opset, text);
    return status;
}

/* ---- values and names ---- */

static const char *value_name_of(const void *owner, int32_t entry)
{
    return ((const clrun__imp *)owner)->values[entry]->name;
}

static const char *value_onnx_name_of(const void *owner, int32_t entry)
{
    return ((const clrun__imp *)owner)->values[entry]->onnx_name;
}

/* A clrun name not taken yet, from base: base, else base.1, base.2, ... The search for a free
 * suffix starts at the count of names with a suffix so far, so that many ONNX names that map to
 * one clrun name cost one probe each, not one per earlier collision. (owned) */
static char *unique_name(clrun__imp *im, const char *base)
{
    char name[CLRUN__GRAPH_NAME_MAX + 1];
    snprintf(name, sizeof name, "%s", base);
    for (int32_t k = 1; clrun__name_index_find(&im->clrun_names, name, value_name_of, im) >= 0; k++) {
        if (k == 1)
            k = ++im->collisions;
        snprintf(name, sizeof name, "%.240s.%" PRId32, base, k);
    }
    size_t len = strlen(name) + 1;
    char *copy = malloc(len);
    if (copy)
        memcpy(copy, name, len);
    return copy;
}

int32_t clrun__imp_new_value(clrun__imp *im, const char *onnx_name)
{
    if (!clrun__grow((void **)&im->values, &im->value_capacity, (size_t)im->value_count + 1,
                     sizeof *im->values) ||
        clrun__name_index_reserve(&im->clrun_names, im->value_count + 1, value_name_of, im) != CLRUN_OK ||
        clrun__name_index_reserve(&im->onnx_names, im->value_count + 1, value_onnx_name_of, im) != CLRUN_OK)
        return -1;
    clrun__value *v = calloc(1, sizeof *v);
    if (v == NULL)
        return -1;
    v->id = -1;
    v->onnx_name = onnx_name;
    if (onnx_name) {
        char base[CLRUN_ONNX_NAME_MAX + 2];
        v->name = unique_name(im, clrun_onnx_name(onnx_name, base, sizeof base));
        if (v->name == NULL) {
            free(v);
            return -1;
        }
    }
    int32_t index = im->value_count++;
    im->values[index] = v;
    if (onnx_name) {
        clrun__name_index_add(&im->clrun_names, v->name, index);
        clrun__name_index_add(&im->onnx_names, onnx_name, index);
    }
    return index;
}

/* Names a temporary (at its first emission): after the node's first named output. */
char *clrun__imp_temp_name(clrun__imp *im, const clrun__onode *n, int32_t index);
char *clrun__imp_temp_name(clrun__imp *im, const clrun__onode *n, int32_t index)
{
    char base[CLRUN__GRAPH_NAME_MAX + 1];
    const char *stem = "tmp";
    for (int i = 0; n && i < n->n_out; i++)
        if (n->out[i] >= 0) {
            stem = im->values[n->out[i]]->name;
            break;
        }
    snprintf(base, sizeof base, "%.200s.t%" PRId32, stem, ++im->temp_counter);
    char *name = unique_name(im, base);
    if (name && clrun__name_index_reserve(&im->clrun_names, im->value_count + 1, value_name_of, im) == CLRUN_OK) {
        im->values[index]->name = name;
        clrun__name_index_add(&im->clrun_names, name, index);
        return name;
    }
    free(name);
    return NULL;
}

static int32_t find_onnx(clrun__imp *im, const char *onnx_name)
{
    return clrun__name_index_find(&im->onnx_names, onnx_name, value_onnx_name_of, im);
}

static void free_values(clrun__imp *im)
{
    for (int32_t i = 0; i < im->value_count; i++) {
        clrun__otensor_free(&im->values[i]->c);
        free(im->values[i]->name);
        free(im->values[i]);
    }
    free(im->values);
    clrun__name_index_free(&im->onnx_names);
    clrun__name_index_free(&im->clrun_names);
}

/* A new ONNX value for a name the model defines; refuses a name defined twice. */
static clrun_status declare(clrun__imp *im, const char *onnx_name, const char *what, int32_t *index)
{
    if (onnx_name == NULL || onnx_name[0] == '\0')
        return clrun__invalid(im, "%s has an empty name", what);
    if (find_onnx(im, onnx_name) >= 0)
        return clrun__invalid(im, "'%s' (%s) is defined twice", onnx_name, what);
    *index = clrun__imp_new_value(im, onnx_name);
    return *index < 0 ? CLRUN__OOM(im) : CLRUN_OK;
}

/* ---- inputs ---- */

static const clrun_onnx_shape *shape_option(clrun__imp *im, const clrun__value *v)
{
    for (int i = 0; im->options && i < im->options->shape_count; i++) {
        const char *name = im->options->shapes[i].input;
        if (name && (strcmp(name, v->onnx_name) == 0 || strcmp(name, v->name) == 0))
            return &im->options->shapes[i];
    }
    return NULL;
}

static bool dim_option(clrun__imp *im, const char *param, int64_t *value)
{
    for (int i = 0; im->options && i < im->options->dim_count; i++)
        if (im->options->dims[i].name && strcmp(im->options->dims[i].name, param) == 0) {
            *value = im->options->dims[i].value;
            return true;
        }
    return false;
}

/* The dimensions of input v from the model, the caller's --shape and --dim. */
static clrun_status bind_dims(clrun__imp *im, clrun__value *v, const Onnx__TensorShapeProto *shape,
                              clrun_tensor_type *type)
{
    const clrun_onnx_shape *given = shape_option(im, v);
    int model_rank = shape ? (int)shape->n_dim : -1;
    if (given) {
        if (given->rank < 0 || given->rank > CLRUN_MAX_DIMS)
            return clrun__imp_fail(im, CLRUN_ERROR_INVALID_ARGUMENT, "the shape given for input '%s' has rank %d",
                                   v->onnx_name, given->rank);
        if (model_rank >= 0 && given->rank != model_rank)
            return clrun__imp_fail(im, CLRUN_ERROR_INVALID_ARGUMENT,
                                   "the shape given for input '%s' has %d dimensions, the model's has %d",
                                   v->onnx_name, given->rank, model_rank);
    } else if (model_rank < 0) {
        return clrun__invalid(im, "input '%s' has no shape in the model: give it (--shape %s=D0xD1...)",
                              v->onnx_name, v->onnx_name);
    }
    int rank = given ? given->rank : model_rank;
    if (rank > CLRUN_MAX_DIMS)
        return clrun__unsupported(im, "input '%s' has %d dimensions (clrun tensors have at most %d)",
                                  v->onnx_name, rank, CLRUN_MAX_DIMS);
    type->rank = rank;
    for (int d = 0; d < rank; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = shape ? shape->dim[d] : NULL;
        bool fixed = dim && dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        const char *param = dim && dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                                    dim->dim_param && dim->dim_param[0] ? dim->dim_param : NULL;
        int64_t value = fixed ? dim->dim_value : 0;
        if (fixed && value < 0)
            return clrun__invalid(im, "input '%s' dimension %d is %" PRId64, v->onnx_name, d, value);
        if (given) {
            if (fixed && given->dims[d] != value)
                return clrun__imp_fail(im, CLRUN_ERROR_INVALID_ARGUMENT,
                                       "the shape given for input '%s' has %" PRId64 " in dimension %d, "
                                       "which the model fixes at %" PRId64, v->onnx_name, given->dims[d], d, value);
            value = given->dims[d];
        } else if (!fixed && !(param && dim_option(im, param, &value))) {
            if (im->options && im->options->default_dim > 0)
                value = im->options->default_dim;
            else if (param)
                return clrun__invalid(im, "input '%s' dimension %d ('%s') is not bound: give --dim %s=N "
                                      "or --shape %s=...", v->onnx_name, d, param, param, v->onnx_name);
            else
                return clrun__invalid(im, "input '%s' dimension %d has no size in the model: give "
                                      "--shape %s=...", v->onnx_name, d, v->onnx_name);
        }
        if (value < 1)
            return value == 0 ? clrun__unsupported(im, "input '%s' dimension %d is 0 (clrun tensors "
                                                   "have no empty dimensions)", v->onnx_name, d)
                              : clrun__imp_fail(im, CLRUN_ERROR_INVALID_ARGUMENT,
                                                "input '%s' dimension %d is bound to %" PRId64,
                                                v->onnx_name, d, value);
        type->shape[d] = value;
    }
    return CLRUN_OK;
}

static clrun_status add_input(clrun__imp *im, const Onnx__ValueInfoProto *info, int32_t index)
{
    clrun__value *v = im->values[index];
    const Onnx__TypeProto *tp = info->type;
    char elem_name[32];
    if (tp == NULL || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || tp->tensor_type == NULL)
        return tp == NULL ? clrun__invalid(im, "input '%s' has no type", v->onnx_name)
                          : clrun__unsupported(im, "input '%s' is not a tensor (sequences, maps and "
                                               "optionals are not supported)", v->onnx_name);
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    int elem = tt->has_elem_type ? tt->elem_type : CLRUN__ONNX_UNDEFINED;
    clrun_tensor_type type = {0};
    if (!clrun__onnx_elem_dtype(elem, &type.dtype))
        return clrun__unsupported(im, "input '%s' is %s: clrun has no such tensors", v->onnx_name,
                                  clrun__onnx_elem_name(elem, elem_name, sizeof elem_name));
    clrun_status s = bind_dims(im, v, tt->shape, &type);
    if (s != CLRUN_OK)
        return s;
    s = clrun_graph_add_input(im->graph, v->name, &type, false, &v->id);
    if (s != CLRUN_OK)
        return clrun__imp_fail(im, s, "input '%s': %s", v->onnx_name, clrun_graph_last_error(im->graph));
    v->kind = CLRUN__VALUE_DEVICE;
    v->graph_input = true;
    v->c.elem = elem;
    v->c.rank = type.rank;
    memcpy(v->c.dims, type.shape, sizeof type.shape);
    return CLRUN_OK;
}

static const clrun_onnx_constant *constant_option(clrun__imp *im, const clrun__value *v)
{
    for (int i = 0; im->options && i < im->options->constant_count; i++) {
        const char *name = im->options->constants[i].input;
        if (name && (strcmp(name, v->onnx_name) == 0 || strcmp(name, v->name) == 0))
            return &im->options->constants[i];
    }
    return NULL;
}

/* An input the caller fixed: a constant of the model's element type, with a shape the model's
 * allows. */
static clrun_status add_input_constant(clrun__imp *im, const Onnx__ValueInfoProto *info, int32_t index,
                                       const clrun_onnx_constant *fixed)
{
    clrun__value *v = im->values[index];
    const Onnx__TypeProto *tp = info->type;
    int elem = clrun__onnx_dtype_elem(fixed->type.dtype);
    char a[32], b[32];
    if (tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && tp->tensor_type &&
        tp->tensor_type->has_elem_type && tp->tensor_type->elem_type != elem)
        return clrun__imp_fail(im, CLRUN_ERROR_INVALID_ARGUMENT, "the value given for input '%s' is %s, the "
                               "model's input is %s", v->onnx_name, clrun__onnx_elem_name(elem, a, sizeof a),
                               clrun__onnx_elem_name(tp->tensor_type->elem_type, b, sizeof b));
    const Onnx__TensorShapeProto *shape = tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE &&
                                                  tp->tensor_type ? tp->tensor_type->shape : NULL;
    bool fits = !shape || (int)shape->n_dim == fixed->type.rank;
    for (size_t d = 0; fits && shape && d < shape->n_dim; d++)
        fits = shape->dim[d]->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ||
               shape->dim[d]->dim_value == fixed->type.shape[d];
    uint64_t bytes = clrun_tensor_bytes(&fixed->type);
    if (!fits || bytes == 0 || (fixed->data == NULL))
        return clrun__imp_fail(im, CLRUN_ERROR_INVALID_ARGUMENT, "the value given for input '%s' does not "
                               "have the model's shape", v->onnx_name);
    if (!clrun__otensor_alloc(&v->c, elem, fixed->type.rank, fixed->type.shape))
        return CLRUN__OOM(im);
    memcpy(v->c.data, fixed->data, (size_t)bytes);
    v->kind = CLRUN__VALUE_CONST;
    return CLRUN_OK;
}

/* True when `name` is the ONNX name of a graph input, or its clrun form. */
static bool names_input(const Onnx__GraphProto *g, const char *name)
{
    char mapped[CLRUN_ONNX_NAME_MAX + 2];
    for (size_t k = 0; name && k < g->n_input; k++) {
        const char *in = g->input[k]->name ? g->input[k]->name : "";
        if (strcmp(in, name) == 0 || strcmp(clrun_onnx_name(in, mapped, sizeof mapped), name) == 0)
            return true;
    }
    return false;
}

/* Every --shape, --dim and constant must name something of the model: a typo is an error, not
 * a no-op. */
static clrun_status check_options_used(clrun__imp *im, const Onnx__GraphProto *g)
{
    const clrun_onnx_options *o = im->options;
    for (int i = 0; o && i < o->shape_count; i++)
        if (!names_input(g, o->shapes[i].input))
            return clrun__imp_fail(im, CLRUN_ERROR_INVALID_ARGUMENT,
                                   "a shape is given for '%s', which is not an input of the model",
                                   o->shapes[i].input ? o->shapes[i].input : "");
    for (int i = 0; o && i < o->constant_count; i++)
        if (!names_input(g, o->constants[i].input))
            return clrun__imp_fail(im, CLRUN_ERROR_INVALID_ARGUMENT,
                                   "a value is given for '%s', which is not an input of the model",
                                   o->constants[i].input ? o->constants[i].input : "");
    for (int i = 0; o && i < o->dim_count; i++) {
        const char *name = o->dims[i].name ? o->dims[i].name : "";
        bool found = false;
        for (size_t k = 0; k < g->n_input && !found; k++) {
            const Onnx__TypeProto *tp = g->input[k]->type;
            if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type ||
                !tp->tensor_type->shape)
                continue;
            const Onnx__TensorShapeProto *shape = tp->tensor_type->shape;
            for (size_t d = 0; d < shape->n_dim && !found; d++)
                found = shape->dim[d]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                        shape->dim[d]->dim_param && strcmp(shape->dim[d]->dim_param, name) == 0;
        }
        if (!found)
            return clrun__imp_fail(im, CLRUN_ERROR_INVALID_ARGUMENT,
                                   "a value is given for dimension '%s', which no input of the model has", name);
        if (o->dims[i].value < 1)
            return clrun__imp_fail(im, CLRUN_ERROR_INVALID_ARGUMENT,
                                   "dimension '%s' is bound to %" PRId64 " (dimensions are >= 1)", name,
                                   o->dims[i].value);
    }
    return CLRUN_OK;
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
                int32_t v = name && name[0] ? find_onnx(im, name) : -1;
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

clrun__value *clrun__out(clrun__imp *im, const clrun__onode *n, int i)
{
    return i < n->n_out && n->out[i] >= 0 ? im->values[n->out[i]] : NULL;
}

static clrun_status import_node(clrun__imp *im, const Onnx__NodeProto *node, int index)
{
    clrun__onode n = {.proto = node, .index = index, .op = node->op_type ? node->op_type : ""};
    im->node = &n;
    const char *domain = domain_text(node);
    if (domain[0]) {
        im->node = &n;
        return clrun__unsupported(im, "operators of domain '%s' are not supported", domain);
    }
    const clrun__onnx_op *op = clrun__onnx_op_find(n.op);
    if (op == NULL)
        return clrun__unsupported(im, "operator %s is not supported", n.op[0] ? n.op : "''");
    n.version = clrun__onnx_op_version(op, im->opset);
    if (n.version == 0)
        return clrun__invalid(im, "operator %s does not exist in opset %" PRId64, n.op, im->opset);
    clrun_status s = CLRUN_OK;
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
        int32_t v = find_onnx(im, name);
        if (v < 0 || im->values[v]->kind == CLRUN__VALUE_ABSENT)
            s = clrun__invalid(im, "input %d '%s' is produced by no node, input or initializer", i, name);
        else
            n.in[i] = im->values[v];
        all_const = all_const && s == CLRUN_OK && n.in[i]->kind == CLRUN__VALUE_CONST;
    }
    for (int i = 0; s == CLRUN_OK && i < n.n_out; i++) {
        const char *name = node->output[i];
        n.out[i] = name && name[0] ? find_onnx(im, name) : -1;
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
    free(n.in);
    free(n.out);
    free(n.attr_used);
    im->node = NULL;
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
                 dim->dim_value != v->c.dims[d];
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
               strcmp(clrun_graph_tensor_name(im->graph, v->id), v->name) == 0;
    for (int32_t k = 0; k < n_marked && own; k++)
        own = marked[k] != v->id;
    clrun_status s = CLRUN_OK;
    if (own) {
        id = v->id;
    } else if (v->kind == CLRUN__VALUE_CONST && v->id < 0 &&
               clrun_graph_find(im->graph, v->name) < 0) {
        /* A folded output: the constant itself, under its name. */
        s = clrun__device_id(im, v, &id);
    } else {
        clrun_tensor_id src;
        s = clrun__device_id(im, v, &src);
        const char *name = v->name;
        char other[CLRUN__GRAPH_NAME_MAX + 1];
        for (int k = 0; s == CLRUN_OK && clrun_graph_find(im->graph, name) >= 0; k++) {
            snprintf(other, sizeof other, "%.240s.out%d", v->name, k);
            name = other;
        }
        if (s == CLRUN_OK)
            s = clrun_graph_add_node(im->graph, "copy", &src, 1, &name, 1, NULL, 0, &id);
        if (s != CLRUN_OK && s != CLRUN_ERROR_OUT_OF_HOST_MEMORY && im->message[0] == '\0')
            return clrun__unsupported(im, "output '%s': %s", v->onnx_name, clrun_graph_last_error(im->graph));
    }
    if (s == CLRUN_OK && (s = clrun_graph_mark_output(im->graph, id)) != CLRUN_OK)
        return clrun__imp_fail(im, s, "output '%s': %s", v->onnx_name, clrun_graph_last_error(im->graph));
    return s == CLRUN_ERROR_OUT_OF_HOST_MEMORY ? CLRUN__OOM(im) : s;
}

static clrun_status add_outputs(clrun__imp *im, const Onnx__GraphProto *g)
{
    if (g->n_output == 0)
        return clrun__invalid(im, "the graph has no outputs");
    for (size_t i = 0; i < g->n_output; i++) {
        const char *name = g->output[i]->name;
        int32_t index = name ? find_onnx(im, name) : -1;
        if (index < 0 || im->values[index]->kind == CLRUN__VALUE_ABSENT)
            return clrun__invalid(im, "output '%s' is produced by no node, input or initializer",
                                  name ? name : "");
        clrun__value *v = im->values[index];
        clrun_status s = check_declared(im, g->output[i], v);
        if (s == CLRUN_OK && v->kind == CLRUN__VALUE_CONST) {
            char why[256];
            clrun_tensor_type type;
            if (!clrun__otensor_clrun_type(&v->c, &type, why, sizeof why))
                return clrun__unsupported(im, "output '%s' (a constant): %s", name, why);
        }
        if (s == CLRUN_OK)
            s = add_output(im, v);
        if (s != CLRUN_OK)
            return s;
    }
    return CLRUN_OK;
}

/* ---- the model ---- */

static clrun_status read_opset(clrun__imp *im)
{
    const Onnx__ModelProto *m = im->model;
    int64_t v = domain_opset(im, "");
    if (v < 0) {
        if (m->n_opset_import || (m->has_ir_version && m->ir_version >= 3))
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

/* Reserves a value (and clrun name) for every ONNX name: inputs, initializers, node outputs. An
 * input that is also an initializer is the initializer (a constant with a default, as exporters
 * before IR 4 wrote every weight). */
static clrun_status declare_all(clrun__imp *im, const Onnx__GraphProto *g, int32_t *producer)
{
    clrun_status s = CLRUN_OK;
    for (size_t i = 0; s == CLRUN_OK && i < g->n_initializer; i++) {
        int32_t index;
        s = declare(im, g->initializer[i]->name, "an initializer", &index);
        if (s == CLRUN_OK) {
            char why[512];
            clrun__value *v = im->values[index];
            clrun_status d = clrun__otensor_decode(g->initializer[i], im->dir, &v->c, why, sizeof why);
            if (d != CLRUN_OK)
                return clrun__imp_fail(im, d, "initializer '%s' %s", v->onnx_name, why);
            v->kind = CLRUN__VALUE_CONST;
        }
    }
    if (s == CLRUN_OK && g->n_sparse_initializer)
        return clrun__unsupported(im, "sparse initializers are not supported");
    for (size_t i = 0; s == CLRUN_OK && i < g->n_input; i++) {
        const char *name = g->input[i]->name;
        int32_t index = name ? find_onnx(im, name) : -1;
        if (index >= 0 && im->values[index]->kind == CLRUN__VALUE_CONST) {
            /* An initializer listed as an input: a default the caller may replace. */
            const clrun_onnx_constant *fixed = constant_option(im, im->values[index]);
            if (fixed) {
                clrun__otensor_free(&im->values[index]->c);
                s = add_input_constant(im, g->input[i], index, fixed);
            }
            continue;
        }
        s = declare(im, name, "an input", &index);
        const clrun_onnx_constant *fixed = s == CLRUN_OK ? constant_option(im, im->values[index]) : NULL;
        if (fixed)
            s = add_input_constant(im, g->input[i], index, fixed);
        else if (s == CLRUN_OK)
            s = add_input(im, g->input[i], index);
    }
    for (size_t i = 0; s == CLRUN_OK && i < g->n_node; i++) {
        const Onnx__NodeProto *node = g->node[i];
        for (size_t k = 0; s == CLRUN_OK && k < node->n_output; k++) {
            const char *name = node->output[k];
            if (name == NULL || name[0] == '\0')
                continue;
            int32_t index;
            char what[64];
            snprintf(what, sizeof what, "output %zu of node %zu", k, i);
            s = declare(im, name, what, &index);
            if (s == CLRUN_OK)
                producer[index] = (int32_t)i;
        }
    }
    return s;
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
        s = check_options_used(im, g);
    if (s == CLRUN_OK)
        s = declare_all(im, g, producer);
    if (s == CLRUN_OK)
        s = node_order(im, g, producer, order);
    for (size_t i = 0; s == CLRUN_OK && i < g->n_node; i++)
        s = import_node(im, g->node[order[i]], (int)order[i]);
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
    free_values(im);
    free(im->dir);
    return s;
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
    Onnx__ModelProto *model = onnx__model_proto__unpack(NULL, size, data);
    if (model == NULL)
        return finish(&im, clrun__imp_fail(&im, CLRUN_ERROR_PARSE, "not an ONNX model: malformed protobuf"), out);
    im.model = model;
    s = import_graph(&im);
    s = finish(&im, s, out);
    onnx__model_proto__free_unpacked(model, NULL);
    return s;
}

/* The whole file into memory; NULL with the reason in why. */
void *clrun__onnx_read_file(const char *path, size_t *size, char *why, size_t whylen);
void *clrun__onnx_read_file(const char *path, size_t *size, char *why, size_t whylen)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(why, whylen, "%s: cannot read: %s", path, strerror(errno));
        return NULL;
    }
    size_t capacity = 1 << 16, used = 0;
    unsigned char *buf = malloc(capacity);
    while (buf) {
        used += fread(buf + used, 1, capacity - used, f);
        if (used < capacity)
            break;
        unsigned char *grown = capacity < ((size_t)1 << 40) ? realloc(buf, capacity * 2) : NULL;
        if (grown == NULL) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = grown;
        capacity *= 2;
    }
    if (buf && ferror(f)) {
        snprintf(why, whylen, "%s: cannot read: %s", path, strerror(errno));
        free(buf);
        fclose(f);
        return NULL;
    }
    fclose(f);
    if (buf == NULL)
        snprintf(why, whylen, "%s: out of host memory", path);
    *size = used;
    return buf;
}

clrun_status clrun_graph_load_onnx(const char *path, const clrun_onnx_options *options, clrun_graph **out)
{
    if (out)
        *out = NULL;
    char why[1024];
    size_t size = 0;
    void *data = path && out ? clrun__onnx_read_file(path, &size, why, sizeof why) : NULL;
    if (data == NULL) {
        if (!path || !out)
            snprintf(why, sizeof why, "clrun_graph_load_onnx: no path or no place for the graph");
        clrun_status s = !path || !out ? CLRUN_ERROR_INVALID_ARGUMENT
                                       : strstr(why, "out of host memory") ? CLRUN_ERROR_OUT_OF_HOST_MEMORY
                                                                           : CLRUN_ERROR_IO;
        clrun__error_set(NULL, s, "%s", why);
        if (options && options->err && options->errlen)
            snprintf(options->err, options->errlen, "%s", why);
        return s;
    }
    clrun_status s = clrun_graph_load_onnx_memory(data, size, path, options, out);
    free(data);
    return s;
}
