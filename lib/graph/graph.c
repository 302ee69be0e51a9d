/* clrun: the graph builder and its readers (validation: validate.c; names: names.c; the fill of
 * constants: fill.c; comparison: compare.c).
 *
 * A graph is three growing arrays (tensors, nodes, the input and output lists) and a hash index
 * of tensor names. Every builder function checks everything and reserves every allocation it
 * will need before it changes anything, so a failure leaves the graph exactly as it was.
 *
 * Nodes reference only tensors that already exist and create new ones, so a graph built here is
 * acyclic and in topological order by construction; clrun_graph_validate still checks the whole
 * structure, because the executor relies on it and tests (and future code) may assemble graphs
 * by other routes. */
#include "graph/graph.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/util.h"

static const char *tensor_name_of(const void *owner, int32_t entry)
{
    return ((const clrun_graph *)owner)->tensors[entry].name;
}

static const char *tensor_model_name_of(const void *owner, int32_t entry)
{
    return ((const clrun_graph *)owner)->tensors[entry].model_name;
}

/* ---- errors ---- */

clrun_status clrun__graph_fail(clrun_graph *graph, clrun_status status, const char *format, ...)
{
    char message[sizeof graph->last_error];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof message, format, args);
    va_end(args);
    if (graph)
        memcpy(graph->last_error, message, sizeof message);
    return clrun__error_set(NULL, status, "%s", message);
}

/* ---- growth ---- */

/* Makes room for `extra` more elements of `size` bytes in *array (count used of *capacity). */
static bool reserve(void **array, int32_t *capacity, int32_t count, int32_t extra, size_t size)
{
    if (extra < 0 || count > INT32_MAX - extra)
        return false;
    int32_t needed = count + extra;
    if (needed <= *capacity)
        return true;
    int64_t grown = *capacity ? (int64_t)*capacity * 2 : 16;
    if (grown < needed)
        grown = needed;
    if (grown > INT32_MAX)
        grown = INT32_MAX;
    if ((uint64_t)grown > SIZE_MAX / size)
        return false;
    void *bigger = realloc(*array, (size_t)grown * size);
    if (!bigger)
        return false;
    *array = bigger;
    *capacity = (int32_t)grown;
    return true;
}

static bool reserve_tensors(clrun_graph *graph, int32_t extra)
{
    void *array = graph->tensors;
    bool ok = reserve(&array, &graph->tensor_capacity, graph->tensor_count, extra,
                      sizeof *graph->tensors);
    graph->tensors = array;
    return ok && clrun__name_index_reserve(&graph->names, graph->tensor_count + extra,
                                           tensor_name_of, graph) == CLRUN_OK;
}

static bool reserve_ids(clrun_tensor_id **ids, int32_t *capacity, int32_t count)
{
    void *array = *ids;
    bool ok = reserve(&array, capacity, count, 1, sizeof **ids);
    *ids = array;
    return ok;
}

static char *copy_string(const char *text)
{
    size_t length = strlen(text) + 1;
    char *copy = malloc(length);
    if (copy)
        memcpy(copy, text, length);
    return copy;
}

/* ---- creation ---- */

clrun_status clrun_graph_create(const char *name, clrun_graph **out)
{
    if (!out)
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "clrun_graph_create: out is NULL");
    *out = NULL;
    if (name && !clrun__name_valid(name))
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                           "graph name '%.64s' is not a name (letters, digits, '_' and '.', "
                           "not starting with a digit or '.', at most %d bytes)",
                           name, CLRUN__GRAPH_NAME_MAX);
    clrun_graph *graph = calloc(1, sizeof *graph);
    if (!graph)
        return clrun__error_set(NULL, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (name && !(graph->name = copy_string(name))) {
        free(graph);
        return clrun__error_set(NULL, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    *out = graph;
    return CLRUN_OK;
}

static void free_attrs(clrun_attr *attrs, int count)
{
    for (int i = 0; attrs && i < count; i++)
        free((char *)attrs[i].name);
    free(attrs);
}

void clrun_graph_destroy(clrun_graph *graph)
{
    if (!graph)
        return;
    for (int32_t t = 0; t < graph->tensor_count; t++) {
        free(graph->tensors[t].name);
        free(graph->tensors[t].model_name);
        free(graph->tensors[t].data);
    }
    for (int32_t n = 0; n < graph->node_count; n++) {
        free(graph->nodes[n].inputs);
        free(graph->nodes[n].outputs);
        free_attrs(graph->nodes[n].attrs, graph->nodes[n].attr_count);
        free(graph->nodes[n].model_name);
    }
    clrun__name_index_free(&graph->names);
    clrun__name_index_free(&graph->model_names);
    free(graph->tensors);
    free(graph->nodes);
    free(graph->inputs);
    free(graph->outputs);
    free(graph->name);
    free(graph);
}

/* ---- builder checks ---- */

/* A new tensor name: valid and not taken. */
static clrun_status check_new_name(clrun_graph *graph, const char *name)
{
    if (!name)
        return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT, "tensor name is NULL");
    if (!clrun__name_valid(name))
        return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT,
                          "'%.64s' is not a name (letters, digits, '_' and '.', not starting "
                          "with a digit or '.', at most %d bytes)",
                          name, CLRUN__GRAPH_NAME_MAX);
    if (clrun__graph_find_ident(graph, name) >= 0)
        return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT, "'%s' is already defined", name);
    return CLRUN_OK;
}

static clrun_status check_type(clrun_graph *graph, const clrun_tensor_type *type, const char *name)
{
    if (!type)
        return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT, "'%s': type is NULL", name);
    char reason[256];
    clrun_status status = clrun__type_check_value(type, reason, sizeof reason);
    if (status != CLRUN_OK)
        return clrun__graph_fail(graph, status, "'%s': %s", name, reason);
    return CLRUN_OK;
}

/* ---- builder ---- */

/* Appends a tensor; the caller reserved room in tensors and names. */
static clrun_tensor_id append_tensor(clrun_graph *graph, const clrun__tensor *tensor)
{
    clrun_tensor_id id = graph->tensor_count++;
    graph->tensors[id] = *tensor;
    clrun__name_index_add(&graph->names, tensor->name, id);
    return id;
}

clrun_status clrun_graph_add_input(clrun_graph *graph, const char *name,
                                   const clrun_tensor_type *type, bool donated,
                                   clrun_tensor_id *id)
{
    if (!graph)
        return clrun__graph_fail(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "graph is NULL");
    clrun_status status = check_new_name(graph, name);
    if (status == CLRUN_OK)
        status = check_type(graph, type, name);
    if (status != CLRUN_OK)
        return status;
    clrun__tensor tensor = {.type = *type, .kind = CLRUN__TENSOR_INPUT, .donated = donated,
                            .producer = -1};
    if (!reserve_tensors(graph, 1) ||
        !reserve_ids(&graph->inputs, &graph->input_capacity, graph->input_count) ||
        !(tensor.name = copy_string(name)))
        return clrun__graph_fail(graph, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    clrun_tensor_id new_id = append_tensor(graph, &tensor);
    graph->inputs[graph->input_count++] = new_id;
    if (id)
        *id = new_id;
    return CLRUN_OK;
}

/* A constant: data copied, or (owned, not NULL) taken as the tensor's own (freed with the graph;
 * on failure the caller keeps it). */
static clrun_status add_constant(clrun_graph *graph, const char *name, const clrun_tensor_type *type,
                                 const void *data, void *owned, clrun_fill fill, double a, double b,
                                 uint64_t seed, clrun_tensor_id *id)
{
    if (owned)
        data = owned;
    if (!graph)
        return clrun__graph_fail(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "graph is NULL");
    clrun_status status = check_new_name(graph, name);
    if (status == CLRUN_OK)
        status = check_type(graph, type, name);
    if (status == CLRUN_OK && !data)
        status = clrun__check_fill(graph, name, type->dtype, fill, a, b);
    if (status != CLRUN_OK)
        return status;
    /* Only what the constant's values depend on is kept, so two graphs that give the same values
     * compare equal and the text format (which writes nothing else) reads back identical. */
    clrun__tensor tensor = {.type = *type, .kind = CLRUN__TENSOR_CONSTANT, .producer = -1,
                            .fill = data ? CLRUN_FILL_ZEROS : fill};
    if (!data && (fill == CLRUN_FILL_UNIFORM || fill == CLRUN_FILL_NORMAL)) {
        tensor.fill_a = a;
        tensor.fill_b = b;
        tensor.seed = seed;
    }
    uint64_t bytes = clrun_tensor_bytes(type);
    if (data && bytes > SIZE_MAX)
        return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_SIZE, "'%s': data too large", name);
    if (data && !owned && !(tensor.data = malloc((size_t)bytes)))
        return clrun__graph_fail(graph, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (!reserve_tensors(graph, 1) || !(tensor.name = copy_string(name))) {
        if (!owned)
            free(tensor.data);
        return clrun__graph_fail(graph, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    if (owned)
        tensor.data = owned;
    else if (data)
        memcpy(tensor.data, data, (size_t)bytes);
    clrun_tensor_id new_id = append_tensor(graph, &tensor);
    if (id)
        *id = new_id;
    return CLRUN_OK;
}

clrun_status clrun_graph_add_constant(clrun_graph *graph, const char *name,
                                      const clrun_tensor_type *type, const void *data,
                                      clrun_fill fill, double a, double b, uint64_t seed,
                                      clrun_tensor_id *id)
{
    return add_constant(graph, name, type, data, NULL, fill, a, b, seed, id);
}

clrun_status clrun__graph_add_constant_owned(clrun_graph *graph, const char *name,
                                            const clrun_tensor_type *type, void *data,
                                            clrun_tensor_id *id)
{
    if (data == NULL)
        return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT, "'%s': no data to take", name ? name : "");
    return add_constant(graph, name, type, NULL, data, CLRUN_FILL_ZEROS, 0, 0, 0, id);
}

static bool attr_name_taken(const clrun_attr *attrs, int count, const char *name)
{
    for (int i = 0; i < count; i++)
        if (strcmp(attrs[i].name, name) == 0)
            return true;
    return false;
}

/* Attributes the text format can write and read back: names, kinds, list lengths, finite floats,
 * each name once. Whether the op accepts them is the op's infer. */
static clrun_status check_attrs(clrun_graph *graph, const char *op, const clrun_attr *attrs,
                                int count)
{
    if (count < 0 || (count > 0 && !attrs))
        return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT, "%s: bad attribute array", op);
    for (int i = 0; i < count; i++) {
        const clrun_attr *attr = &attrs[i];
        if (!attr->name || !clrun__name_valid(attr->name))
            return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT,
                              "%s: attribute %d has no valid name", op, i);
        if (attr_name_taken(attrs, i, attr->name))
            return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT,
                              "%s: attribute '%s' given twice", op, attr->name);
        if (attr->kind == CLRUN_ATTR_FLOAT && !isfinite(attr->f))
            return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT,
                              "%s: attribute '%s' is not finite", op, attr->name);
        if (attr->kind == CLRUN_ATTR_INTS && (attr->count < 0 || attr->count > CLRUN_MAX_ATTR_INTS))
            return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT,
                              "%s: attribute '%s' has %d values (at most %d)", op, attr->name,
                              attr->count, CLRUN_MAX_ATTR_INTS);
        if (attr->kind != CLRUN_ATTR_INT && attr->kind != CLRUN_ATTR_FLOAT &&
            attr->kind != CLRUN_ATTR_INTS)
            return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT,
                              "%s: attribute '%s' has unknown kind %d", op, attr->name,
                              (int)attr->kind);
    }
    return CLRUN_OK;
}

/* Inputs that exist, as many as the op takes. */
static clrun_status check_inputs(clrun_graph *graph, const clrun__op *op,
                                 const clrun_tensor_id *inputs, int count)
{
    if (count < op->min_inputs || count > op->max_inputs) {
        if (op->min_inputs == op->max_inputs)
            return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_GRAPH, "%s takes %d input%s, got %d",
                              op->name, op->min_inputs, op->min_inputs == 1 ? "" : "s", count);
        return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_GRAPH, "%s takes %d to %d inputs, got %d",
                          op->name, op->min_inputs, op->max_inputs, count);
    }
    if (count > 0 && !inputs)
        return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT, "%s: inputs is NULL", op->name);
    for (int i = 0; i < count; i++) {
        if (inputs[i] < 0 || inputs[i] >= graph->tensor_count)
            return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT,
                              "%s: input %d is not a tensor of this graph (id %d)", op->name, i,
                              (int)inputs[i]);
        const clrun__tensor *t = &graph->tensors[inputs[i]];
        if (clrun_tensor_empty(&t->type)) {
            char text[CLRUN__TYPE_TEXT];
            return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_GRAPH,
                                     "%s: input %d '%s' is empty (%s): no node reads an empty tensor",
                                     op->name, i, t->name, clrun__type_format(&t->type, text, sizeof text));
        }
    }
    return CLRUN_OK;
}

/* Output names: as many as the op gives, new, and distinct from each other. */
static clrun_status check_output_names(clrun_graph *graph, const clrun__op *op,
                                       const char *const *names, int count)
{
    if (count != op->outputs)
        return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_GRAPH, "%s gives %d output%s, %d named",
                          op->name, op->outputs, op->outputs == 1 ? "" : "s", count);
    if (count > 0 && !names)
        return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT, "%s: output_names is NULL",
                          op->name);
    for (int i = 0; i < count; i++) {
        clrun_status status = check_new_name(graph, names[i]);
        if (status != CLRUN_OK)
            return status;
        for (int j = 0; j < i; j++)
            if (strcmp(names[i], names[j]) == 0)
                return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT,
                                  "'%s' is named twice among the outputs", names[i]);
    }
    return CLRUN_OK;
}

/* Runs the op's type rules; out_types gets op->outputs entries. */
static clrun_status infer_outputs(clrun_graph *graph, const clrun__op *op,
                                  const clrun_tensor_id *inputs, int input_count,
                                  const char *const *names, const clrun_attr *attrs,
                                  int attr_count, clrun_tensor_type *out_types)
{
    clrun_tensor_type *in_types = calloc((size_t)input_count + 1, sizeof *in_types);
    if (!in_types)
        return clrun__graph_fail(graph, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (int i = 0; i < input_count; i++)
        in_types[i] = graph->tensors[inputs[i]].type;
    memset(out_types, 0, (size_t)op->outputs * sizeof *out_types);
    clrun__op_call call = {in_types, input_count, out_types, op->outputs, attrs, attr_count, 0};
    char reason[sizeof graph->last_error] = "";
    clrun_status status = op->infer(&call, out_types, reason, sizeof reason);
    free(in_types);
    if (status != CLRUN_OK)
        return clrun__graph_fail(graph, status, "%s", reason[0] ? reason : "refused by the op");
    for (int o = 0; o < op->outputs; o++) {
        if (clrun_tensor_empty(&out_types[o])) {
            char text[CLRUN__TYPE_TEXT];
            return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_GRAPH,
                                     "%s: output '%s' would be empty (%s): no node writes an empty tensor",
                                     op->name, names[o], clrun__type_format(&out_types[o], text, sizeof text));
        }
        if (clrun__type_check(&out_types[o], reason, sizeof reason) != CLRUN_OK)
            return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_GRAPH, "%s: output '%s': %s", op->name,
                              names[o], reason);
    }
    return CLRUN_OK;
}

/* A node's own copies of its lists; false (nothing allocated) when out of memory. */
static bool copy_node_lists(clrun__node *node, const clrun_tensor_id *inputs, int input_count,
                            int output_count, const clrun_attr *attrs, int attr_count)
{
    node->inputs = malloc(((size_t)input_count + 1) * sizeof *node->inputs);
    node->outputs = malloc(((size_t)output_count + 1) * sizeof *node->outputs);
    node->attrs = calloc((size_t)attr_count + 1, sizeof *node->attrs);
    bool ok = node->inputs && node->outputs && node->attrs;
    for (int i = 0; ok && i < attr_count; i++) {
        node->attrs[i] = attrs[i];
        ok = (node->attrs[i].name = copy_string(attrs[i].name)) != NULL;
    }
    if (!ok) {
        free(node->inputs);
        free(node->outputs);
        free_attrs(node->attrs, attr_count);
        return false;
    }
    if (input_count)
        memcpy(node->inputs, inputs, (size_t)input_count * sizeof *inputs);
    node->input_count = input_count;
    node->output_count = output_count;
    node->attr_count = attr_count;
    return true;
}

static void free_names(char **names, int count)
{
    for (int i = 0; names && i < count; i++)
        free(names[i]);
    free(names);
}

clrun_status clrun_graph_add_node(clrun_graph *graph, const char *op_name,
                                  const clrun_tensor_id *inputs, int input_count,
                                  const char *const *output_names, int output_count,
                                  const clrun_attr *attrs, int attr_count,
                                  clrun_tensor_id *outputs)
{
    if (!graph)
        return clrun__graph_fail(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "graph is NULL");
    if (!op_name)
        return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT, "op is NULL");
    const clrun__op *op = clrun__op_find(op_name);
    if (!op)
        return clrun__graph_fail(graph, CLRUN_ERROR_UNKNOWN_KERNEL, "unknown op '%.64s'", op_name);
    clrun_status status = check_inputs(graph, op, inputs, input_count);
    if (status == CLRUN_OK)
        status = check_output_names(graph, op, output_names, output_count);
    if (status == CLRUN_OK)
        status = check_attrs(graph, op->name, attrs, attr_count);
    if (status != CLRUN_OK)
        return status;
    clrun_tensor_type *types = calloc((size_t)output_count + 1, sizeof *types);
    char **names = calloc((size_t)output_count + 1, sizeof *names);
    if (!types || !names) {
        free(types);
        free(names);
        return clrun__graph_fail(graph, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    status = infer_outputs(graph, op, inputs, input_count, output_names, attrs, attr_count, types);
    clrun__node node = {.op = op};
    bool ok = status == CLRUN_OK;
    for (int o = 0; ok && o < output_count; o++)
        ok = (names[o] = copy_string(output_names[o])) != NULL;
    void *node_array = graph->nodes;
    ok = ok && reserve(&node_array, &graph->node_capacity, graph->node_count, 1, sizeof node);
    graph->nodes = node_array;
    ok = ok && reserve_tensors(graph, output_count) &&
         copy_node_lists(&node, inputs, input_count, output_count, attrs, attr_count);
    if (!ok) {
        free(types);
        free_names(names, output_count);
        return status != CLRUN_OK
                   ? status
                   : clrun__graph_fail(graph, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    int32_t index = graph->node_count++;
    for (int o = 0; o < output_count; o++) {
        clrun__tensor tensor = {.name = names[o], .type = types[o],
                                .kind = CLRUN__TENSOR_INTERMEDIATE, .producer = index};
        node.outputs[o] = append_tensor(graph, &tensor);
        if (outputs)
            outputs[o] = node.outputs[o];
    }
    graph->nodes[index] = node;
    free(types);
    free(names); /* the strings now belong to the tensors */
    return CLRUN_OK;
}

clrun_status clrun_graph_mark_output(clrun_graph *graph, clrun_tensor_id id)
{
    if (!graph)
        return clrun__graph_fail(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "graph is NULL");
    if (id < 0 || id >= graph->tensor_count)
        return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT,
                          "output: %d is not a tensor of this graph", (int)id);
    if (graph->tensors[id].is_output)
        return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT, "'%s' is already an output",
                          graph->tensors[id].name);
    if (!reserve_ids(&graph->outputs, &graph->output_capacity, graph->output_count))
        return clrun__graph_fail(graph, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    graph->tensors[id].is_output = true;
    graph->outputs[graph->output_count++] = id;
    return CLRUN_OK;
}

/* ---- reading ---- */

const char *clrun_graph_name(const clrun_graph *graph)
{
    return graph ? graph->name : NULL;
}

int32_t clrun_graph_tensor_count(const clrun_graph *graph)
{
    return graph ? graph->tensor_count : 0;
}

int32_t clrun_graph_node_count(const clrun_graph *graph)
{
    return graph ? graph->node_count : 0;
}

clrun_tensor_id clrun__graph_find_ident(const clrun_graph *graph, const char *name)
{
    if (!graph || !name)
        return -1;
    return clrun__name_index_find(&graph->names, name, tensor_name_of, graph);
}

clrun_tensor_id clrun_graph_find(const clrun_graph *graph, const char *name)
{
    if (!graph || !name)
        return -1;
    clrun_tensor_id id = clrun__name_index_find(&graph->model_names, name, tensor_model_name_of, graph);
    return id >= 0 ? id : clrun__graph_find_ident(graph, name);
}

static const clrun__tensor *tensor_at(const clrun_graph *graph, clrun_tensor_id id)
{
    return graph && id >= 0 && id < graph->tensor_count ? &graph->tensors[id] : NULL;
}

const char *clrun_graph_tensor_name(const clrun_graph *graph, clrun_tensor_id id)
{
    const clrun__tensor *tensor = tensor_at(graph, id);
    return tensor ? clrun__tensor_label(tensor) : NULL;
}

const char *clrun_graph_tensor_ident(const clrun_graph *graph, clrun_tensor_id id)
{
    const clrun__tensor *tensor = tensor_at(graph, id);
    return tensor ? tensor->name : NULL;
}

clrun_status clrun_graph_set_node_model_name(clrun_graph *graph, int32_t node, const char *name)
{
    if (!graph)
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "clrun_graph_set_node_model_name: graph is NULL");
    if (node < 0 || node >= graph->node_count)
        return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT, "no node %d", (int)node);
    if (!name || !name[0] || strlen(name) > CLRUN_GRAPH_MODEL_NAME_MAX)
        return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT,
                                 "node %d: a model name has 1 to %d bytes", (int)node, CLRUN_GRAPH_MODEL_NAME_MAX);
    char *copy = copy_string(name);
    if (!copy)
        return clrun__graph_fail(graph, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    free(graph->nodes[node].model_name);
    graph->nodes[node].model_name = copy;
    return CLRUN_OK;
}

clrun_status clrun__graph_set_guard(clrun_graph *graph, int32_t node, clrun_tensor_id guard, bool negate)
{
    if (node < 0 || node >= graph->node_count)
        return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT, "no node %d", (int)node);
    const clrun__tensor *t = tensor_at(graph, guard);
    if (t == NULL)
        return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT, "guard: %d is not a tensor", (int)guard);
    if (t->type.dtype != CLRUN_BOOL || clrun_tensor_elements(&t->type) != 1)
        return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_GRAPH,
                                 "guard '%s' of node %d is not a one-element bool tensor", t->name, (int)node);
    if (t->kind == CLRUN__TENSOR_INTERMEDIATE && t->producer >= node)
        return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_GRAPH,
                                 "guard '%s' of node %d is produced after it", t->name, (int)node);
    graph->nodes[node].guarded = true;
    graph->nodes[node].guard = guard;
    graph->nodes[node].guard_negate = negate;
    return CLRUN_OK;
}

bool clrun__graph_has_guards(const clrun_graph *graph)
{
    for (int32_t n = 0; n < graph->node_count; n++)
        if (graph->nodes[n].guarded)
            return true;
    return false;
}

const char *clrun_graph_node_model_name(const clrun_graph *graph, int32_t node)
{
    return graph && node >= 0 && node < graph->node_count ? graph->nodes[node].model_name : NULL;
}

clrun_status clrun_graph_set_model_name(clrun_graph *graph, clrun_tensor_id id, const char *name)
{
    if (!graph)
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "clrun_graph_set_model_name: graph is NULL");
    clrun__tensor *tensor = id >= 0 && id < graph->tensor_count ? &graph->tensors[id] : NULL;
    if (!tensor)
        return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT, "no tensor has id %d", (int)id);
    if (!name || !name[0] || strlen(name) > CLRUN_GRAPH_MODEL_NAME_MAX)
        return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT,
                                 "'%s': a model name has 1 to %d bytes", tensor->name,
                                 CLRUN_GRAPH_MODEL_NAME_MAX);
    if (tensor->model_name)
        return clrun__graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT,
                                 "'%s' already has the model name '%.200s'", tensor->name,
                                 tensor->model_name);
    char *copy = copy_string(name);
    if (!copy || clrun__name_index_reserve(&graph->model_names, graph->model_names.count + 1,
                                           tensor_model_name_of, graph) != CLRUN_OK) {
        free(copy);
        return clrun__graph_fail(graph, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    /* A name two tensors share (an output that is also an input, an output listed twice) is
     * found as the first tensor given it. */
    bool taken = clrun__name_index_find(&graph->model_names, name, tensor_model_name_of, graph) >= 0;
    tensor->model_name = copy;
    if (!taken)
        clrun__name_index_add(&graph->model_names, copy, id);
    return CLRUN_OK;
}

const clrun_tensor_type *clrun_graph_tensor_type(const clrun_graph *graph, clrun_tensor_id id)
{
    const clrun__tensor *tensor = tensor_at(graph, id);
    return tensor ? &tensor->type : NULL;
}

int32_t clrun_graph_inputs(const clrun_graph *graph, const clrun_tensor_id **ids)
{
    if (ids)
        *ids = graph ? graph->inputs : NULL;
    return graph ? graph->input_count : 0;
}

int32_t clrun_graph_outputs(const clrun_graph *graph, const clrun_tensor_id **ids)
{
    if (ids)
        *ids = graph ? graph->outputs : NULL;
    return graph ? graph->output_count : 0;
}

bool clrun_graph_tensor_donated(const clrun_graph *graph, clrun_tensor_id id)
{
    const clrun__tensor *tensor = tensor_at(graph, id);
    return tensor && tensor->kind == CLRUN__TENSOR_INPUT && tensor->donated;
}

const char *clrun_graph_last_error(const clrun_graph *graph)
{
    return graph ? graph->last_error : "graph is NULL";
}

/* ---- for the executor ---- */

void clrun__node_call(const clrun_graph *graph, const clrun__node *node, clrun_tensor_type *types,
                      clrun__op_call *call)
{
    for (int i = 0; i < node->input_count; i++)
        types[i] = graph->tensors[node->inputs[i]].type;
    for (int o = 0; o < node->output_count; o++)
        types[node->input_count + o] = graph->tensors[node->outputs[o]].type;
    uint64_t constants = 0;
    for (int i = 0; i < node->input_count && i < 64; i++)
        if (graph->tensors[node->inputs[i]].kind == CLRUN__TENSOR_CONSTANT)
            constants |= UINT64_C(1) << i;
    *call = (clrun__op_call){types, node->input_count, types + node->input_count,
                             node->output_count, node->attrs, node->attr_count, constants};
}

clrun_attr clrun__gattr_int(const char *name, int64_t value)
{
    clrun_attr a;
    memset(&a, 0, sizeof a);
    a.name = name;
    a.kind = CLRUN_ATTR_INT;
    a.i = value;
    return a;
}

clrun_attr clrun__gattr_float(const char *name, double value)
{
    clrun_attr a;
    memset(&a, 0, sizeof a);
    a.name = name;
    a.kind = CLRUN_ATTR_FLOAT;
    a.f = value;
    return a;
}

clrun_attr clrun__gattr_ints(const char *name, const int64_t *values, int count)
{
    clrun_attr a;
    memset(&a, 0, sizeof a);
    a.name = name;
    a.kind = CLRUN_ATTR_INTS;
    if (count > CLRUN_MAX_ATTR_INTS)
        count = CLRUN_MAX_ATTR_INTS;
    for (int i = 0; i < count; i++)
        a.ints[i] = values[i];
    a.count = count;
    return a;
}

clrun_status clrun__graph_place_added(clrun_graph *graph, int32_t first_added, const int32_t *anchor)
{
    int32_t total = graph->node_count;
    clrun__node *moved = malloc(sizeof *moved * ((size_t)total + 1));
    if (moved == NULL)
        return clrun__graph_fail(graph, CLRUN_ERROR_OUT_OF_HOST_MEMORY,
                                 "out of host memory ordering %d nodes", (int)total);
    int32_t k = 0;
    for (int32_t n = 0; n < first_added; n++) {
        for (int32_t a = first_added; a < total; a++)
            if (anchor[a - first_added] == n)
                moved[k++] = graph->nodes[a];
        moved[k++] = graph->nodes[n];
    }
    memcpy(graph->nodes, moved, sizeof *moved * (size_t)total);
    free(moved);
    for (int32_t n = 0; n < total; n++)
        for (int o = 0; o < graph->nodes[n].output_count; o++)
            graph->tensors[graph->nodes[n].outputs[o]].producer = n;
    return CLRUN_OK;
}
