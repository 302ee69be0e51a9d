/* clrun: the graph builder, validation, and the deterministic fill of constants.
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

#include "device/context.h"

/* ---- dtypes and sizes ---- */

const char *clrun_dtype_name(clrun_dtype dtype)
{
    switch (dtype) {
    case CLRUN_F32: return "f32";
    case CLRUN_I32: return "i32";
    case CLRUN_F16: return "f16";
    }
    return "?";
}

size_t clrun_dtype_size(clrun_dtype dtype)
{
    switch (dtype) {
    case CLRUN_F32: return 4;
    case CLRUN_I32: return 4;
    case CLRUN_F16: return 2;
    }
    return 0;
}

bool clrun__dtype_parse(const char *text, size_t length, clrun_dtype *out)
{
    static const clrun_dtype all[] = {CLRUN_F32, CLRUN_I32, CLRUN_F16};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        const char *name = clrun_dtype_name(all[i]);
        if (strlen(name) == length && memcmp(name, text, length) == 0) {
            *out = all[i];
            return true;
        }
    }
    return false;
}

uint64_t clrun_tensor_elements(const clrun_tensor_type *type)
{
    if (!type || type->rank < 0 || type->rank > CLRUN_MAX_DIMS)
        return 0;
    uint64_t elements = 1;
    for (int d = 0; d < type->rank; d++) {
        if (type->shape[d] < 1)
            return 0;
        uint64_t dim = (uint64_t)type->shape[d];
        if (elements > UINT64_MAX / dim)
            return 0;
        elements *= dim;
    }
    return elements;
}

uint64_t clrun_tensor_bytes(const clrun_tensor_type *type)
{
    uint64_t elements = clrun_tensor_elements(type);
    uint64_t size = type ? clrun_dtype_size(type->dtype) : 0;
    if (elements == 0 || size == 0 || elements > UINT64_MAX / size)
        return 0;
    return elements * size;
}

const char *clrun__type_format(const clrun_tensor_type *type, char *buf, size_t size)
{
    if (size == 0)
        return buf;
    size_t used = (size_t)snprintf(buf, size, "%s[", clrun_dtype_name(type->dtype));
    int rank = type->rank < 0 ? 0 : type->rank > CLRUN_MAX_DIMS ? CLRUN_MAX_DIMS : type->rank;
    for (int d = 0; d < rank && used < size; d++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", d ? ", " : "",
                                 (long long)type->shape[d]);
    if (used < size)
        snprintf(buf + used, size - used, "]");
    return buf;
}

bool clrun__type_equal(const clrun_tensor_type *a, const clrun_tensor_type *b)
{
    if (a->dtype != b->dtype || a->rank != b->rank)
        return false;
    for (int d = 0; d < a->rank && d < CLRUN_MAX_DIMS; d++)
        if (a->shape[d] != b->shape[d])
            return false;
    return true;
}

bool clrun__name_valid(const char *name)
{
    size_t length = strlen(name);
    if (length == 0 || length > CLRUN__GRAPH_NAME_MAX)
        return false;
    if (!(name[0] == '_' || (name[0] >= 'a' && name[0] <= 'z') || (name[0] >= 'A' && name[0] <= 'Z')))
        return false;
    for (size_t i = 1; i < length; i++)
        if (!clrun__name_char(name[i]))
            return false;
    return true;
}

/* ---- the name index ---- */

/* FNV-1a: short names, a handful of collisions at most. */
static uint32_t name_hash(const char *name)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 16777619u;
    return h;
}

int32_t clrun__name_index_find(const clrun__name_index *index, const char *name,
                               clrun__name_of name_of, const void *owner)
{
    if (index->capacity == 0)
        return -1;
    uint32_t mask = index->capacity - 1;
    for (uint32_t slot = name_hash(name) & mask;; slot = (slot + 1) & mask) {
        int32_t entry = index->slots[slot];
        if (entry < 0)
            return -1;
        if (strcmp(name_of(owner, entry), name) == 0)
            return entry;
    }
}

static void name_index_put(clrun__name_index *index, const char *name, int32_t entry)
{
    uint32_t mask = index->capacity - 1;
    uint32_t slot = name_hash(name) & mask;
    while (index->slots[slot] >= 0)
        slot = (slot + 1) & mask;
    index->slots[slot] = entry;
    index->count++;
}

clrun_status clrun__name_index_reserve(clrun__name_index *index, int32_t entries,
                                       clrun__name_of name_of, const void *owner)
{
    /* Kept at most half full, so a probe ends quickly at an empty slot. */
    uint64_t needed = (uint64_t)(entries < 0 ? 0 : entries) * 2;
    if (needed < index->capacity)
        return CLRUN_OK;
    uint32_t capacity = index->capacity ? index->capacity : 16;
    while (capacity <= needed) {
        if (capacity >= (UINT32_C(1) << 30)) /* 2^29 names: far beyond any graph */
            return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        capacity *= 2;
    }
    int32_t *slots = malloc(capacity * sizeof *slots);
    if (!slots)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    for (uint32_t i = 0; i < capacity; i++)
        slots[i] = -1;
    clrun__name_index grown = {slots, capacity, 0};
    for (uint32_t i = 0; i < index->capacity; i++)
        if (index->slots[i] >= 0)
            name_index_put(&grown, name_of(owner, index->slots[i]), index->slots[i]);
    free(index->slots);
    *index = grown;
    return CLRUN_OK;
}

void clrun__name_index_add(clrun__name_index *index, const char *name, int32_t entry)
{
    name_index_put(index, name, entry);
}

void clrun__name_index_free(clrun__name_index *index)
{
    free(index->slots);
    *index = (clrun__name_index){NULL, 0, 0};
}

static const char *tensor_name_of(const void *owner, int32_t entry)
{
    return ((const clrun_graph *)owner)->tensors[entry].name;
}

/* ---- errors ---- */

/* Records the reason on the graph and as this thread's last error; returns status. */
CLRUN__PRINTF(3, 4)
static clrun_status graph_fail(clrun_graph *graph, clrun_status status, const char *format, ...)
{
    char message[sizeof graph->last_error];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof message, format, args);
    va_end(args);
    if (graph)
        memcpy(graph->last_error, message, sizeof message);
    return clrun__fail(NULL, status, "%s", message);
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
        return clrun__fail(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "clrun_graph_create: out is NULL");
    *out = NULL;
    if (name && !clrun__name_valid(name))
        return clrun__fail(NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                           "graph name '%.64s' is not a name (letters, digits, '_' and '.', "
                           "not starting with a digit or '.', at most %d bytes)",
                           name, CLRUN__GRAPH_NAME_MAX);
    clrun_graph *graph = calloc(1, sizeof *graph);
    if (!graph)
        return clrun__fail(NULL, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (name && !(graph->name = copy_string(name))) {
        free(graph);
        return clrun__fail(NULL, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
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
        free(graph->tensors[t].data);
    }
    for (int32_t n = 0; n < graph->node_count; n++) {
        free(graph->nodes[n].inputs);
        free(graph->nodes[n].outputs);
        free_attrs(graph->nodes[n].attrs, graph->nodes[n].attr_count);
    }
    clrun__name_index_free(&graph->names);
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
        return graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT, "tensor name is NULL");
    if (!clrun__name_valid(name))
        return graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT,
                          "'%.64s' is not a name (letters, digits, '_' and '.', not starting "
                          "with a digit or '.', at most %d bytes)",
                          name, CLRUN__GRAPH_NAME_MAX);
    if (clrun_graph_find(graph, name) >= 0)
        return graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT, "'%s' is already defined", name);
    return CLRUN_OK;
}

clrun_status clrun__type_check(const clrun_tensor_type *type, char *err, size_t errlen)
{
    if (type->dtype != CLRUN_F32 && type->dtype != CLRUN_I32 && type->dtype != CLRUN_F16) {
        snprintf(err, errlen, "unknown dtype %d", (int)type->dtype);
        return CLRUN_ERROR_INVALID_ARGUMENT;
    }
    if (type->rank < 0 || type->rank > CLRUN_MAX_DIMS) {
        snprintf(err, errlen, "rank %d is out of range (0 to %d)", type->rank, CLRUN_MAX_DIMS);
        return CLRUN_ERROR_INVALID_ARGUMENT;
    }
    for (int d = 0; d < type->rank; d++)
        if (type->shape[d] < 1) {
            snprintf(err, errlen, "dimension %d is %lld (must be at least 1)", d,
                     (long long)type->shape[d]);
            return CLRUN_ERROR_INVALID_SIZE;
        }
    if (clrun_tensor_bytes(type) == 0) {
        char text[CLRUN__TYPE_TEXT];
        snprintf(err, errlen, "%s is too large (its byte size overflows 64 bits)",
                 clrun__type_format(type, text, sizeof text));
        return CLRUN_ERROR_INVALID_SIZE;
    }
    return CLRUN_OK;
}

static clrun_status check_type(clrun_graph *graph, const clrun_tensor_type *type, const char *name)
{
    if (!type)
        return graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT, "'%s': type is NULL", name);
    char reason[256];
    clrun_status status = clrun__type_check(type, reason, sizeof reason);
    if (status != CLRUN_OK)
        return graph_fail(graph, status, "'%s': %s", name, reason);
    return CLRUN_OK;
}

/* Fill parameters that describe a real distribution for the dtype. */
static clrun_status check_fill(clrun_graph *graph, const char *name, clrun_dtype dtype,
                               clrun_fill fill, double a, double b)
{
    switch (fill) {
    case CLRUN_FILL_ZEROS:
    case CLRUN_FILL_ONES:
        return CLRUN_OK;
    case CLRUN_FILL_UNIFORM:
    case CLRUN_FILL_NORMAL:
        break;
    default:
        return graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT, "'%s': unknown fill %d", name,
                          (int)fill);
    }
    if (!isfinite(a) || !isfinite(b))
        return graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT,
                          "'%s': fill parameters must be finite", name);
    if (fill == CLRUN_FILL_NORMAL) {
        if (dtype == CLRUN_I32)
            return graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT,
                              "'%s': normal fill needs a float dtype, not i32", name);
        if (b < 0)
            return graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT,
                              "'%s': normal(mean, std) needs std >= 0, got %g", name, b);
        return CLRUN_OK;
    }
    if (!(a < b))
        return graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT,
                          "'%s': uniform(a, b) needs a < b, got a=%g b=%g", name, a, b);
    if (dtype == CLRUN_I32 && (a != floor(a) || b != floor(b) || a < (double)INT32_MIN ||
                               b > (double)INT32_MAX + 1.0))
        return graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT,
                          "'%s': uniform bounds of an i32 constant must be integers in "
                          "[-2147483648, 2147483648], got a=%g b=%g",
                          name, a, b);
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
        return graph_fail(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "graph is NULL");
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
        return graph_fail(graph, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    clrun_tensor_id new_id = append_tensor(graph, &tensor);
    graph->inputs[graph->input_count++] = new_id;
    if (id)
        *id = new_id;
    return CLRUN_OK;
}

clrun_status clrun_graph_add_constant(clrun_graph *graph, const char *name,
                                      const clrun_tensor_type *type, const void *data,
                                      clrun_fill fill, double a, double b, uint64_t seed,
                                      clrun_tensor_id *id)
{
    if (!graph)
        return graph_fail(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "graph is NULL");
    clrun_status status = check_new_name(graph, name);
    if (status == CLRUN_OK)
        status = check_type(graph, type, name);
    if (status == CLRUN_OK && !data)
        status = check_fill(graph, name, type->dtype, fill, a, b);
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
        return graph_fail(graph, CLRUN_ERROR_INVALID_SIZE, "'%s': data too large", name);
    if (data && !(tensor.data = malloc((size_t)bytes)))
        return graph_fail(graph, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (!reserve_tensors(graph, 1) || !(tensor.name = copy_string(name))) {
        free(tensor.data);
        return graph_fail(graph, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    if (data)
        memcpy(tensor.data, data, (size_t)bytes);
    clrun_tensor_id new_id = append_tensor(graph, &tensor);
    if (id)
        *id = new_id;
    return CLRUN_OK;
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
        return graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT, "%s: bad attribute array", op);
    for (int i = 0; i < count; i++) {
        const clrun_attr *attr = &attrs[i];
        if (!attr->name || !clrun__name_valid(attr->name))
            return graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT,
                              "%s: attribute %d has no valid name", op, i);
        if (attr_name_taken(attrs, i, attr->name))
            return graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT,
                              "%s: attribute '%s' given twice", op, attr->name);
        if (attr->kind == CLRUN_ATTR_FLOAT && !isfinite(attr->f))
            return graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT,
                              "%s: attribute '%s' is not finite", op, attr->name);
        if (attr->kind == CLRUN_ATTR_INTS && (attr->count < 0 || attr->count > CLRUN_MAX_ATTR_INTS))
            return graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT,
                              "%s: attribute '%s' has %d values (at most %d)", op, attr->name,
                              attr->count, CLRUN_MAX_ATTR_INTS);
        if (attr->kind != CLRUN_ATTR_INT && attr->kind != CLRUN_ATTR_FLOAT &&
            attr->kind != CLRUN_ATTR_INTS)
            return graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT,
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
            return graph_fail(graph, CLRUN_ERROR_INVALID_GRAPH, "%s takes %d input%s, got %d",
                              op->name, op->min_inputs, op->min_inputs == 1 ? "" : "s", count);
        return graph_fail(graph, CLRUN_ERROR_INVALID_GRAPH, "%s takes %d to %d inputs, got %d",
                          op->name, op->min_inputs, op->max_inputs, count);
    }
    if (count > 0 && !inputs)
        return graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT, "%s: inputs is NULL", op->name);
    for (int i = 0; i < count; i++)
        if (inputs[i] < 0 || inputs[i] >= graph->tensor_count)
            return graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT,
                              "%s: input %d is not a tensor of this graph (id %d)", op->name, i,
                              (int)inputs[i]);
    return CLRUN_OK;
}

/* Output names: as many as the op gives, new, and distinct from each other. */
static clrun_status check_output_names(clrun_graph *graph, const clrun__op *op,
                                       const char *const *names, int count)
{
    if (count != op->outputs)
        return graph_fail(graph, CLRUN_ERROR_INVALID_GRAPH, "%s gives %d output%s, %d named",
                          op->name, op->outputs, op->outputs == 1 ? "" : "s", count);
    if (count > 0 && !names)
        return graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT, "%s: output_names is NULL",
                          op->name);
    for (int i = 0; i < count; i++) {
        clrun_status status = check_new_name(graph, names[i]);
        if (status != CLRUN_OK)
            return status;
        for (int j = 0; j < i; j++)
            if (strcmp(names[i], names[j]) == 0)
                return graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT,
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
        return graph_fail(graph, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (int i = 0; i < input_count; i++)
        in_types[i] = graph->tensors[inputs[i]].type;
    memset(out_types, 0, (size_t)op->outputs * sizeof *out_types);
    clrun__op_call call = {in_types, input_count, out_types, op->outputs, attrs, attr_count};
    char reason[sizeof graph->last_error] = "";
    clrun_status status = op->infer(&call, out_types, reason, sizeof reason);
    free(in_types);
    if (status != CLRUN_OK)
        return graph_fail(graph, status, "%s", reason[0] ? reason : "refused by the op");
    for (int o = 0; o < op->outputs; o++)
        if (clrun__type_check(&out_types[o], reason, sizeof reason) != CLRUN_OK)
            return graph_fail(graph, CLRUN_ERROR_INVALID_GRAPH, "%s: output '%s': %s", op->name,
                              names[o], reason);
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
        return graph_fail(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "graph is NULL");
    if (!op_name)
        return graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT, "op is NULL");
    const clrun__op *op = clrun__op_find(op_name);
    if (!op)
        return graph_fail(graph, CLRUN_ERROR_UNKNOWN_KERNEL, "unknown op '%.64s'", op_name);
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
        return graph_fail(graph, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
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
                   : graph_fail(graph, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
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
        return graph_fail(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "graph is NULL");
    if (id < 0 || id >= graph->tensor_count)
        return graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT,
                          "output: %d is not a tensor of this graph", (int)id);
    if (graph->tensors[id].is_output)
        return graph_fail(graph, CLRUN_ERROR_INVALID_ARGUMENT, "'%s' is already an output",
                          graph->tensors[id].name);
    if (!reserve_ids(&graph->outputs, &graph->output_capacity, graph->output_count))
        return graph_fail(graph, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    graph->tensors[id].is_output = true;
    graph->outputs[graph->output_count++] = id;
    return CLRUN_OK;
}

/* ---- validation ---- */

/* Every node's tensor ids exist, and every tensor is produced as its kind says: inputs and
 * constants by nobody, intermediates by exactly the node they name. */
static clrun_status validate_production(clrun_graph *graph, int32_t *producers)
{
    for (int32_t n = 0; n < graph->node_count; n++) {
        const clrun__node *node = &graph->nodes[n];
        const char *op = node->op ? node->op->name : "?";
        if (!node->op)
            return graph_fail(graph, CLRUN_ERROR_UNKNOWN_KERNEL, "node %d has no op", (int)n);
        for (int i = 0; i < node->input_count; i++)
            if (node->inputs[i] < 0 || node->inputs[i] >= graph->tensor_count)
                return graph_fail(graph, CLRUN_ERROR_INVALID_GRAPH,
                                  "node %d (%s) reads tensor %d, which does not exist", (int)n, op,
                                  (int)node->inputs[i]);
        for (int o = 0; o < node->output_count; o++) {
            int32_t t = node->outputs[o];
            if (t < 0 || t >= graph->tensor_count)
                return graph_fail(graph, CLRUN_ERROR_INVALID_GRAPH,
                                  "node %d (%s) writes tensor %d, which does not exist", (int)n,
                                  op, (int)t);
            const clrun__tensor *tensor = &graph->tensors[t];
            if (tensor->kind != CLRUN__TENSOR_INTERMEDIATE)
                return graph_fail(graph, CLRUN_ERROR_INVALID_GRAPH,
                                  "'%s' is produced by node %d (%s) but is a graph %s",
                                  tensor->name, (int)n, op,
                                  tensor->kind == CLRUN__TENSOR_INPUT ? "input" : "constant");
            if (producers[t] >= 0)
                return graph_fail(graph, CLRUN_ERROR_INVALID_GRAPH,
                                  "'%s' is produced twice: by node %d (%s) and node %d (%s)",
                                  tensor->name, (int)producers[t],
                                  graph->nodes[producers[t]].op->name, (int)n, op);
            if (tensor->producer != n)
                return graph_fail(graph, CLRUN_ERROR_INVALID_GRAPH,
                                  "'%s' is written by node %d (%s) but records producer %d",
                                  tensor->name, (int)n, op, (int)tensor->producer);
            producers[t] = n;
        }
    }
    return CLRUN_OK;
}

/* The name of a node that reads tensor t, or NULL. */
static const clrun__node *first_reader(const clrun_graph *graph, int32_t t)
{
    for (int32_t n = 0; n < graph->node_count; n++)
        for (int i = 0; i < graph->nodes[n].input_count; i++)
            if (graph->nodes[n].inputs[i] == t)
                return &graph->nodes[n];
    return NULL;
}

static clrun_status validate_unproduced(clrun_graph *graph, const int32_t *producers)
{
    for (int32_t t = 0; t < graph->tensor_count; t++) {
        const clrun__tensor *tensor = &graph->tensors[t];
        if (tensor->kind != CLRUN__TENSOR_INTERMEDIATE || producers[t] >= 0)
            continue;
        if (tensor->is_output)
            return graph_fail(graph, CLRUN_ERROR_INVALID_GRAPH, "output '%s' is never produced",
                              tensor->name);
        const clrun__node *reader = first_reader(graph, t);
        if (reader)
            return graph_fail(graph, CLRUN_ERROR_INVALID_GRAPH,
                              "'%s' is read by a node (%s) but nobody produces it", tensor->name,
                              reader->op->name);
        return graph_fail(graph, CLRUN_ERROR_INVALID_GRAPH, "'%s' is never produced",
                          tensor->name);
    }
    return CLRUN_OK;
}

/* Who reads each tensor, as compressed rows: readers[first[t] .. first[t + 1]) are the nodes
 * reading tensor t (a node reading t twice appears twice). */
typedef struct reader_rows {
    int32_t *first;   /* tensor_count + 1 offsets */
    int32_t *readers; /* node indices */
} reader_rows;

static bool reader_rows_build(const clrun_graph *graph, reader_rows *rows)
{
    size_t edges = 0;
    for (int32_t n = 0; n < graph->node_count; n++)
        edges += (size_t)graph->nodes[n].input_count;
    rows->first = calloc((size_t)graph->tensor_count + 2, sizeof *rows->first);
    rows->readers = malloc((edges + 1) * sizeof *rows->readers);
    if (!rows->first || !rows->readers)
        return false;
    for (int32_t n = 0; n < graph->node_count; n++)
        for (int i = 0; i < graph->nodes[n].input_count; i++)
            rows->first[graph->nodes[n].inputs[i] + 2]++;
    for (int32_t t = 0; t < graph->tensor_count; t++)
        rows->first[t + 2] += rows->first[t + 1];
    /* first[t + 1] is now the start of t's row; filling advances it to the start of t + 1's. */
    for (int32_t n = 0; n < graph->node_count; n++)
        for (int i = 0; i < graph->nodes[n].input_count; i++)
            rows->readers[rows->first[graph->nodes[n].inputs[i] + 1]++] = n;
    return true;
}

/* Writes "cycle: a -> b -> a" (a is computed from b, b from a) for a cycle among the nodes
 * Kahn's algorithm left waiting. Every waiting node has a waiting producer, so walking back
 * from one must repeat a node; the repeat closes the cycle. */
static void describe_cycle(const clrun_graph *graph, const int32_t *waiting, int32_t *seen_at,
                           char *text, size_t size)
{
    int32_t nodes = graph->node_count, n = 0, steps = 0;
    int32_t *path = malloc(((size_t)nodes + 1) * sizeof *path);
    size_t used = (size_t)snprintf(text, size, "cycle:");
    if (!path)
        return;
    while (n < nodes && waiting[n] <= 0)
        n++;
    for (int32_t m = 0; m < nodes; m++)
        seen_at[m] = -1;
    while (n < nodes && seen_at[n] < 0) {
        seen_at[n] = steps;
        path[steps++] = n;
        const clrun__node *node = &graph->nodes[n];
        int32_t next = nodes;
        for (int i = 0; i < node->input_count && next == nodes; i++) {
            int32_t p = graph->tensors[node->inputs[i]].producer;
            if (p >= 0 && waiting[p] > 0)
                next = p;
        }
        n = next;
    }
    for (int32_t s = n < nodes ? seen_at[n] : steps + 1; s <= steps && used < size; s++) {
        int32_t at = path[s < steps ? s : seen_at[n]];
        used += (size_t)snprintf(text + used, size - used, "%s%s", s > seen_at[n] ? " -> " : " ",
                                 graph->tensors[graph->nodes[at].outputs[0]].name);
    }
    free(path);
}

/* Kahn's algorithm: a node is ready when every input it reads has been produced. Nodes never
 * ready lie on a cycle or after one. */
static clrun_status validate_acyclic(clrun_graph *graph)
{
    int32_t nodes = graph->node_count, head = 0, tail = 0;
    reader_rows rows = {NULL, NULL};
    int32_t *waiting = malloc(((size_t)nodes + 1) * sizeof *waiting);
    int32_t *queue = malloc(((size_t)nodes + 1) * sizeof *queue);
    if (!waiting || !queue || !reader_rows_build(graph, &rows)) {
        free(waiting), free(queue), free(rows.first), free(rows.readers);
        return graph_fail(graph, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    for (int32_t n = 0; n < nodes; n++) {
        waiting[n] = 0;
        for (int i = 0; i < graph->nodes[n].input_count; i++)
            waiting[n] += graph->tensors[graph->nodes[n].inputs[i]].producer >= 0;
        if (waiting[n] == 0)
            queue[tail++] = n;
    }
    while (head < tail) {
        const clrun__node *node = &graph->nodes[queue[head++]];
        for (int o = 0; o < node->output_count; o++) {
            int32_t t = node->outputs[o];
            for (int32_t r = rows.first[t]; r < rows.first[t + 1]; r++)
                if (--waiting[rows.readers[r]] == 0)
                    queue[tail++] = rows.readers[r];
        }
    }
    clrun_status status = CLRUN_OK;
    if (tail < nodes) {
        char text[sizeof graph->last_error];
        describe_cycle(graph, waiting, queue, text, sizeof text);
        status = graph_fail(graph, CLRUN_ERROR_INVALID_GRAPH, "%s", text);
    }
    free(waiting), free(queue), free(rows.first), free(rows.readers);
    return status;
}

/* Each node's stored output types are what its op infers from its inputs now. */
static clrun_status validate_types(clrun_graph *graph)
{
    for (int32_t n = 0; n < graph->node_count; n++) {
        const clrun__node *node = &graph->nodes[n];
        if (node->output_count != node->op->outputs || node->input_count < node->op->min_inputs ||
            node->input_count > node->op->max_inputs)
            return graph_fail(graph, CLRUN_ERROR_INVALID_GRAPH,
                              "node %d (%s) has %d inputs and %d outputs", (int)n,
                              node->op->name, node->input_count, node->output_count);
        clrun_tensor_type *types = calloc((size_t)node->input_count + 2 * (size_t)node->output_count + 1,
                                          sizeof *types);
        if (!types)
            return graph_fail(graph, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
        clrun__op_call call;
        clrun__node_call(graph, node, types, &call);
        clrun_tensor_type *inferred = types + node->input_count + node->output_count;
        char reason[sizeof graph->last_error] = "";
        clrun_status status = node->op->infer(&call, inferred, reason, sizeof reason);
        int differs = -1;
        for (int o = 0; status == CLRUN_OK && o < node->output_count && differs < 0; o++)
            if (!clrun__type_equal(&inferred[o], &call.outputs[o]))
                differs = o;
        char want[CLRUN__TYPE_TEXT], have[CLRUN__TYPE_TEXT];
        if (differs >= 0) {
            clrun__type_format(&inferred[differs], want, sizeof want);
            clrun__type_format(&call.outputs[differs], have, sizeof have);
        }
        free(types);
        if (status != CLRUN_OK)
            return graph_fail(graph, status, "%s", reason[0] ? reason : "refused by the op");
        if (differs >= 0)
            return graph_fail(graph, CLRUN_ERROR_INVALID_GRAPH, "'%s' is %s but %s gives %s",
                              graph->tensors[node->outputs[differs]].name, have, node->op->name,
                              want);
    }
    return CLRUN_OK;
}

clrun_status clrun_graph_validate(clrun_graph *graph)
{
    if (!graph)
        return graph_fail(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "graph is NULL");
    if (graph->output_count == 0)
        return graph_fail(graph, CLRUN_ERROR_INVALID_GRAPH, "graph has no outputs");
    int32_t *producers = malloc(((size_t)graph->tensor_count + 1) * sizeof *producers);
    if (!producers)
        return graph_fail(graph, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (int32_t t = 0; t < graph->tensor_count; t++)
        producers[t] = -1;
    clrun_status status = validate_production(graph, producers);
    if (status == CLRUN_OK)
        status = validate_unproduced(graph, producers);
    free(producers);
    if (status == CLRUN_OK)
        status = validate_acyclic(graph);
    if (status == CLRUN_OK)
        status = validate_types(graph);
    return status;
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

clrun_tensor_id clrun_graph_find(const clrun_graph *graph, const char *name)
{
    if (!graph || !name)
        return -1;
    return clrun__name_index_find(&graph->names, name, tensor_name_of, graph);
}

static const clrun__tensor *tensor_at(const clrun_graph *graph, clrun_tensor_id id)
{
    return graph && id >= 0 && id < graph->tensor_count ? &graph->tensors[id] : NULL;
}

const char *clrun_graph_tensor_name(const clrun_graph *graph, clrun_tensor_id id)
{
    const clrun__tensor *tensor = tensor_at(graph, id);
    return tensor ? tensor->name : NULL;
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
    *call = (clrun__op_call){types, node->input_count, types + node->input_count,
                             node->output_count, node->attrs, node->attr_count};
}

/* ---- deterministic fill ----
 *
 * Draw d of element i of a constant with seed s is 64 random bits from splitmix64's output
 * function applied to a counter: mix(mix(s) + (16 i + d + 1) * golden); uniform takes draw 0,
 * normal draws 0..11. Counter-based, so any element can be
 * computed alone (and in parallel) and the values do not depend on the order of generation.
 * Everything up to the final scaling is integer arithmetic; the scaling is one IEEE multiply and
 * one add in double (each correctly rounded everywhere), then one rounding to the element type.
 * The product goes through a volatile so that no compiler fuses multiply and add into an FMA
 * (GCC does across statements under -ffp-contract=fast, the default outside ISO modes; an FMA
 * rounds once and would change the last bit on machines that have one), and the sum through
 * another so that x87's extended precision cannot round twice differently. No libm call is
 * involved, so every machine gets the same bits. */

#define GOLDEN_GAMMA 0x9E3779B97F4A7C15ull

static uint64_t splitmix_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t element_bits(uint64_t key, uint64_t index, uint64_t draw)
{
    return splitmix_mix(key + (index * 16 + draw + 1) * GOLDEN_GAMMA);
}

/* Uniform in [0, 1) with 24 bits: exact in float and double. */
#define UNIT_BITS 24
#define UNIT_SCALE (1.0 / 16777216.0)

/* The element's value in double, before rounding to the dtype. Normal: Irwin–Hall, the sum of
 * 12 uniforms minus 6 (mean 0, variance 1, tails cut at ±6), summed as integers. */
static double fill_value(const clrun__tensor *tensor, uint64_t key, uint64_t index)
{
    if (tensor->fill == CLRUN_FILL_ZEROS)
        return 0.0;
    if (tensor->fill == CLRUN_FILL_ONES)
        return 1.0;
    if (tensor->fill == CLRUN_FILL_UNIFORM) {
        double unit = (double)(element_bits(key, index, 0) >> (64 - UNIT_BITS)) * UNIT_SCALE;
        double span = tensor->fill_b - tensor->fill_a;
        volatile double scaled = span * unit;
        volatile double value = tensor->fill_a + scaled; /* rounded to double even on x87 */
        return value;
    }
    int64_t sum = 0;
    for (uint64_t draw = 0; draw < 12; draw++)
        sum += (int64_t)(element_bits(key, index, draw) >> (64 - UNIT_BITS));
    double standard = (double)(sum - 6 * (1 << UNIT_BITS)) * UNIT_SCALE;
    volatile double scaled = tensor->fill_b * standard;
    volatile double value = tensor->fill_a + scaled;
    return value;
}

/* Uniform integer in [a, b): the top 32 bits scaled to the range by a 64-bit multiply. */
static int32_t fill_int(const clrun__tensor *tensor, uint64_t key, uint64_t index)
{
    if (tensor->fill != CLRUN_FILL_UNIFORM)
        return tensor->fill == CLRUN_FILL_ONES ? 1 : 0;
    int64_t low = (int64_t)tensor->fill_a, high = (int64_t)tensor->fill_b;
    uint64_t range = (uint64_t)(high - low); /* 1 to 2^32 */
    uint64_t draw = element_bits(key, index, 0) >> 32;
    return (int32_t)(low + (int64_t)((draw * range) >> 32));
}

uint16_t clrun__f32_to_f16(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    uint32_t sign = (bits >> 16) & 0x8000u;
    uint32_t exponent = (bits >> 23) & 0xFFu;
    uint32_t mantissa = bits & 0x7FFFFFu;
    if (exponent == 0xFF) /* inf stays inf; NaN keeps a quiet payload bit */
        return (uint16_t)(sign | 0x7C00u | (mantissa ? 0x200u | (mantissa >> 13) : 0));
    int32_t e = (int32_t)exponent - 127 + 15;
    if (e >= 31)
        return (uint16_t)(sign | 0x7C00u);
    if (e <= 0) {
        if (e < -10)
            return (uint16_t)sign;
        /* Subnormal: shift the mantissa with its implicit bit, round to nearest even. */
        uint32_t full = mantissa | 0x800000u;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t half = full >> shift;
        uint32_t rest = full & ((1u << shift) - 1);
        uint32_t midpoint = 1u << (shift - 1);
        if (rest > midpoint || (rest == midpoint && (half & 1)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = sign | ((uint32_t)e << 10) | (mantissa >> 13);
    uint32_t rest = mantissa & 0x1FFFu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1)))
        half++; /* a carry into the exponent is right, up to inf */
    return (uint16_t)half;
}

void clrun__constant_values(const clrun__tensor *tensor, void *out)
{
    uint64_t elements = clrun_tensor_elements(&tensor->type);
    if (tensor->data) {
        memcpy(out, tensor->data, (size_t)clrun_tensor_bytes(&tensor->type));
        return;
    }
    uint64_t key = splitmix_mix(tensor->seed);
    for (uint64_t i = 0; i < elements; i++) {
        switch (tensor->type.dtype) {
        case CLRUN_I32: {
            int32_t value = fill_int(tensor, key, i);
            memcpy((char *)out + i * 4, &value, 4);
            break;
        }
        case CLRUN_F32: {
            float value = (float)fill_value(tensor, key, i);
            memcpy((char *)out + i * 4, &value, 4);
            break;
        }
        case CLRUN_F16: {
            uint16_t value = clrun__f32_to_f16((float)fill_value(tensor, key, i));
            memcpy((char *)out + i * 2, &value, 2);
            break;
        }
        }
    }
}

/* ---- comparison ---- */

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
        a->attr_count != b->attr_count)
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
