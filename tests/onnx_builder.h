/* Small ONNX models built in C for the tests and the loading benchmark: a ModelProto assembled
 * with protobuf-c's generated types and packed to bytes. Everything is allocated from one arena
 * that onnx_builder_free releases. Test code: aborts when out of memory. */
#ifndef CLRUN_TESTS_ONNX_BUILDER_H
#define CLRUN_TESTS_ONNX_BUILDER_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <clrun/onnx.h>

#include "onnx/onnx.pb-c.h"

typedef struct onnx_builder {
    Onnx__ModelProto model;
    Onnx__GraphProto graph;
    void **allocs;
    size_t n_allocs, cap_allocs;
} onnx_builder;

static inline void *ob_alloc(onnx_builder *b, size_t size)
{
    void *p = calloc(1, size ? size : 1);
    if (p == NULL)
        abort();
    if (b->n_allocs == b->cap_allocs) {
        b->cap_allocs = b->cap_allocs ? 2 * b->cap_allocs : 64;
        b->allocs = realloc(b->allocs, b->cap_allocs * sizeof *b->allocs);
        if (b->allocs == NULL)
            abort();
    }
    b->allocs[b->n_allocs++] = p;
    return p;
}

static inline char *ob_str(onnx_builder *b, const char *s)
{
    char *p = ob_alloc(b, strlen(s) + 1);
    memcpy(p, s, strlen(s) + 1);
    return p;
}

/* Appends item to the array *items (count *n), growing it in the arena. */
static inline void ob_push(onnx_builder *b, void ***items, size_t *n, void *item)
{
    void **grown = ob_alloc(b, (*n + 1) * sizeof *grown);
    if (*n)
        memcpy(grown, *items, *n * sizeof *grown);
    grown[(*n)++] = item;
    *items = grown;
}

/* A model of IR version 8 importing `opset` of the default domain (0: none). */
static inline void ob_init(onnx_builder *b, int64_t opset)
{
    memset(b, 0, sizeof *b);
    Onnx__ModelProto m = ONNX__MODEL_PROTO__INIT;
    Onnx__GraphProto g = ONNX__GRAPH_PROTO__INIT;
    b->model = m;
    b->graph = g;
    b->model.has_ir_version = 1;
    b->model.ir_version = 8;
    b->model.graph = &b->graph;
    b->graph.name = ob_str(b, "test");
    if (opset) {
        Onnx__OperatorSetIdProto *o = ob_alloc(b, sizeof *o);
        Onnx__OperatorSetIdProto init = ONNX__OPERATOR_SET_ID_PROTO__INIT;
        *o = init;
        o->domain = ob_str(b, "");
        o->has_version = 1;
        o->version = opset;
        ob_push(b, (void ***)&b->model.opset_import, &b->model.n_opset_import, o);
    }
}

/* A tensor value info: dims[i] >= 0 fixed, -1 the symbolic dim params[i]; rank -1: no shape. */
static inline Onnx__ValueInfoProto *ob_value_info(onnx_builder *b, const char *name, int elem, int rank,
                                                 const int64_t *dims, const char *const *params)
{
    Onnx__ValueInfoProto *v = ob_alloc(b, sizeof *v);
    Onnx__ValueInfoProto vi = ONNX__VALUE_INFO_PROTO__INIT;
    *v = vi;
    v->name = ob_str(b, name);
    Onnx__TypeProto *t = ob_alloc(b, sizeof *t);
    Onnx__TypeProto ti = ONNX__TYPE_PROTO__INIT;
    *t = ti;
    Onnx__TypeProto__Tensor *tt = ob_alloc(b, sizeof *tt);
    Onnx__TypeProto__Tensor tti = ONNX__TYPE_PROTO__TENSOR__INIT;
    *tt = tti;
    tt->has_elem_type = 1;
    tt->elem_type = elem;
    if (rank >= 0) {
        Onnx__TensorShapeProto *sh = ob_alloc(b, sizeof *sh);
        Onnx__TensorShapeProto shi = ONNX__TENSOR_SHAPE_PROTO__INIT;
        *sh = shi;
        for (int d = 0; d < rank; d++) {
            Onnx__TensorShapeProto__Dimension *dim = ob_alloc(b, sizeof *dim);
            Onnx__TensorShapeProto__Dimension di = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
            *dim = di;
            if (dims[d] >= 0) {
                dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
                dim->dim_value = dims[d];
            } else if (params && params[d]) {
                dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
                dim->dim_param = ob_str(b, params[d]);
            }
            ob_push(b, (void ***)&sh->dim, &sh->n_dim, dim);
        }
        tt->shape = sh;
    }
    t->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    t->tensor_type = tt;
    v->type = t;
    return v;
}

static inline void ob_input(onnx_builder *b, const char *name, int elem, int rank, const int64_t *dims,
                            const char *const *params)
{
    ob_push(b, (void ***)&b->graph.input, &b->graph.n_input, ob_value_info(b, name, elem, rank, dims, params));
}

static inline void ob_output(onnx_builder *b, const char *name, int elem, int rank, const int64_t *dims)
{
    ob_push(b, (void ***)&b->graph.output, &b->graph.n_output, ob_value_info(b, name, elem, rank, dims, NULL));
}

/* A tensor with raw little-endian data of `bytes` bytes (NULL: none). */
static inline Onnx__TensorProto *ob_tensor(onnx_builder *b, const char *name, int elem, int rank,
                                           const int64_t *dims, const void *data, size_t bytes)
{
    Onnx__TensorProto *t = ob_alloc(b, sizeof *t);
    Onnx__TensorProto ti = ONNX__TENSOR_PROTO__INIT;
    *t = ti;
    t->name = ob_str(b, name);
    t->has_data_type = 1;
    t->data_type = elem;
    t->n_dims = (size_t)rank;
    t->dims = ob_alloc(b, (size_t)(rank + 1) * sizeof *t->dims);
    if (rank)
        memcpy(t->dims, dims, (size_t)rank * sizeof *dims);
    if (data) {
        t->has_raw_data = 1;
        t->raw_data.len = bytes;
        t->raw_data.data = ob_alloc(b, bytes);
        memcpy(t->raw_data.data, data, bytes);
    }
    return t;
}

static inline Onnx__TensorProto *ob_initializer(onnx_builder *b, const char *name, int elem, int rank,
                                                const int64_t *dims, const void *data, size_t bytes)
{
    Onnx__TensorProto *t = ob_tensor(b, name, elem, rank, dims, data, bytes);
    ob_push(b, (void ***)&b->graph.initializer, &b->graph.n_initializer, t);
    return t;
}

/* A node: inputs and outputs as comma-separated names ("" for an empty optional one). */
static inline Onnx__NodeProto *ob_node(onnx_builder *b, const char *op, const char *name, const char *inputs,
                                       const char *outputs)
{
    Onnx__NodeProto *n = ob_alloc(b, sizeof *n);
    Onnx__NodeProto ni = ONNX__NODE_PROTO__INIT;
    *n = ni;
    n->op_type = ob_str(b, op);
    n->name = ob_str(b, name);
    for (int which = 0; which < 2; which++) {
        const char *list = which ? outputs : inputs;
        while (list && *list) {
            const char *comma = strchr(list, ',');
            size_t len = comma ? (size_t)(comma - list) : strlen(list);
            char *item = ob_alloc(b, len + 1);
            memcpy(item, list, len);
            if (which)
                ob_push(b, (void ***)&n->output, &n->n_output, item);
            else
                ob_push(b, (void ***)&n->input, &n->n_input, item);
            list = comma ? comma + 1 : list + len;
        }
    }
    ob_push(b, (void ***)&b->graph.node, &b->graph.n_node, n);
    return n;
}

static inline Onnx__AttributeProto *ob_attr(onnx_builder *b, Onnx__NodeProto *n, const char *name,
                                            Onnx__AttributeProto__AttributeType type)
{
    Onnx__AttributeProto *a = ob_alloc(b, sizeof *a);
    Onnx__AttributeProto ai = ONNX__ATTRIBUTE_PROTO__INIT;
    *a = ai;
    a->name = ob_str(b, name);
    a->has_type = 1;
    a->type = type;
    ob_push(b, (void ***)&n->attribute, &n->n_attribute, a);
    return a;
}

static inline void ob_attr_int(onnx_builder *b, Onnx__NodeProto *n, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = ob_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = v;
}

static inline void ob_attr_float(onnx_builder *b, Onnx__NodeProto *n, const char *name, float v)
{
    Onnx__AttributeProto *a = ob_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    a->has_f = 1;
    a->f = v;
}

static inline void ob_attr_ints(onnx_builder *b, Onnx__NodeProto *n, const char *name, const int64_t *v,
                                size_t count)
{
    Onnx__AttributeProto *a = ob_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    a->n_ints = count;
    a->ints = ob_alloc(b, (count + 1) * sizeof *v);
    memcpy(a->ints, v, count * sizeof *v);
}

static inline void ob_attr_string(onnx_builder *b, Onnx__NodeProto *n, const char *name, const char *v)
{
    Onnx__AttributeProto *a = ob_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    a->has_s = 1;
    a->s.len = strlen(v);
    a->s.data = (uint8_t *)ob_str(b, v);
}

static inline void ob_attr_tensor(onnx_builder *b, Onnx__NodeProto *n, const char *name, Onnx__TensorProto *t)
{
    Onnx__AttributeProto *a = ob_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    a->t = t;
}

/* The packed model (malloc'ed, freed by the caller). */
static inline uint8_t *ob_pack(onnx_builder *b, size_t *size)
{
    *size = onnx__model_proto__get_packed_size(&b->model);
    uint8_t *out = malloc(*size + 1);
    if (out == NULL)
        abort();
    onnx__model_proto__pack(&b->model, out);
    return out;
}

static inline void ob_free(onnx_builder *b)
{
    for (size_t i = 0; i < b->n_allocs; i++)
        free(b->allocs[i]);
    free(b->allocs);
    memset(b, 0, sizeof *b);
}

/* Marks tensor t as stored in an external file: location, and offset and length when not NULL
 * (ONNX's external_data entries, as text). */
static inline void ob_external(onnx_builder *b, Onnx__TensorProto *t, const char *location,
                               const char *offset, const char *length)
{
    t->has_data_location = 1;
    t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    const char *keys[3] = {"location", "offset", "length"}, *values[3] = {location, offset, length};
    for (int k = 0; k < 3; k++) {
        if (!values[k])
            continue;
        Onnx__StringStringEntryProto *e = ob_alloc(b, sizeof *e);
        Onnx__StringStringEntryProto ei = ONNX__STRING_STRING_ENTRY_PROTO__INIT;
        *e = ei;
        e->key = ob_str(b, keys[k]);
        e->value = ob_str(b, values[k]);
        ob_push(b, (void ***)&t->external_data, &t->n_external_data, e);
    }
}

/* What loading a built model gave: the status, the graph (NULL on failure) and the message. */
typedef struct ob_loaded {
    clrun_status status;
    clrun_graph *graph;
    char err[2048];
} ob_loaded;

/* Loads b's model from memory (as "model.onnx") with options o (NULL: the defaults; its err and
 * errlen are set to the result's). */
static inline ob_loaded ob_load(onnx_builder *b, clrun_onnx_options *o)
{
    ob_loaded r = {0};
    size_t size;
    uint8_t *bytes = ob_pack(b, &size);
    clrun_onnx_options plain;
    if (o == NULL) {
        clrun_onnx_options_init(&plain);
        o = &plain;
    }
    o->err = r.err;
    o->errlen = sizeof r.err;
    r.status = clrun_graph_load_onnx_memory(bytes, size, "model.onnx", o, &r.graph);
    free(bytes);
    return r;
}

#endif
