/* The importer's inputs: each graph input's dimensions from the model and the caller's bindings
 * (the options' dims, shapes and the constants that fix an input), the checks that every binding names
 * something of the model, and the declaration of every ONNX value with its initializer decoded. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/types.h"
#include "onnx/import.h"

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

/* The model's declared shape of graph input `info`, NULL when it has none. */
static const Onnx__TensorShapeProto *declared_shape(const Onnx__ValueInfoProto *info)
{
    const Onnx__TypeProto *tp = info ? info->type : NULL;
    return tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && tp->tensor_type
               ? tp->tensor_type->shape : NULL;
}

static const char *dim_param(const Onnx__TensorShapeProto *shape, int d)
{
    const Onnx__TensorShapeProto__Dimension *dim = shape->dim[d];
    return dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && dim->dim_param &&
                   dim->dim_param[0] ? dim->dim_param : NULL;
}

/* The model's graph input named `name` (its ONNX name or clrun form), or NULL. */
static const Onnx__ValueInfoProto *input_named(const Onnx__GraphProto *g, const char *name)
{
    char mapped[CLRUN_ONNX_NAME_MAX + 2];
    for (size_t k = 0; name && k < g->n_input; k++) {
        const char *in = g->input[k]->name ? g->input[k]->name : "";
        if (strcmp(in, name) == 0 || strcmp(clrun_onnx_name(in, mapped, sizeof mapped), name) == 0)
            return g->input[k];
    }
    return NULL;
}

/* A symbolic dimension bound by a shape the caller gives for an input that has it (a shape
 * binds every dim_param it covers, for every input: a fed batch of 3 makes 'batch' 3). The
 * first such shape's value, and its input, or false. */
static bool shape_binds(const clrun__imp *im, const char *param, int64_t *value, const char **input)
{
    const clrun_onnx_options *o = im->options;
    for (int i = 0; o && i < o->shape_count; i++) {
        const Onnx__TensorShapeProto *shape = declared_shape(input_named(im->model->graph, o->shapes[i].input));
        if (shape == NULL || (int)shape->n_dim != o->shapes[i].rank)
            continue;
        for (int d = 0; d < o->shapes[i].rank; d++) {
            const char *p = dim_param(shape, d);
            if (p && strcmp(p, param) == 0) {
                *value = o->shapes[i].dims[d];
                *input = o->shapes[i].input;
                return true;
            }
        }
    }
    return false;
}

/* Bindings that disagree: a dimension given twice with two values, a shape that gives a
 * dimension another value than dims, two shapes that give one dimension two values. */
static clrun_status check_conflicts(clrun__imp *im)
{
    const clrun_onnx_options *o = im->options;
    for (int i = 0; o && i < o->dim_count; i++)
        for (int j = 0; j < i; j++)
            if (o->dims[i].name && o->dims[j].name && strcmp(o->dims[i].name, o->dims[j].name) == 0 &&
                o->dims[i].value != o->dims[j].value)
                return clrun__imp_fail(im, CLRUN_ERROR_INVALID_ARGUMENT,
                                       "dims bind dimension '%s' twice, to %" PRId64 " and to %" PRId64,
                                       o->dims[i].name, o->dims[j].value, o->dims[i].value);
    for (int i = 0; o && i < o->shape_count; i++) {
        const Onnx__TensorShapeProto *shape = declared_shape(input_named(im->model->graph, o->shapes[i].input));
        if (shape == NULL || (int)shape->n_dim != o->shapes[i].rank)
            continue;
        for (int d = 0; d < o->shapes[i].rank; d++) {
            const char *p = dim_param(shape, d), *other;
            int64_t want = o->shapes[i].dims[d], bound;
            if (p && dim_option(im, p, &bound) && bound != want)
                return clrun__imp_fail(im, CLRUN_ERROR_INVALID_ARGUMENT,
                                       "the shape given for input '%s' has %" PRId64 " in dimension %d "
                                       "('%s'), but dims bind '%s' to %" PRId64, o->shapes[i].input, want,
                                       d, p, p, bound);
            if (p && shape_binds(im, p, &bound, &other) && bound != want)
                return clrun__imp_fail(im, CLRUN_ERROR_INVALID_ARGUMENT,
                                       "the shape given for input '%s' has %" PRId64 " in dimension %d "
                                       "('%s'), but the shape given for input '%s' makes '%s' %" PRId64,
                                       o->shapes[i].input, want, d, p, other, p, bound);
        }
    }
    return CLRUN_OK;
}

/* The dimensions of input v from the model and the caller's shapes and dims. */
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
        return clrun__invalid(im, "input '%s' has no shape in the model: give its shape (the "
                              "options' shapes)", v->onnx_name);
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
        } else if (!fixed && !(param && dim_option(im, param, &value)) &&
                   !(param && shape_binds(im, param, &value, &(const char *){NULL}))) {
            if (im->options && im->options->default_dim > 0)
                value = im->options->default_dim;
            else if (param)
                return clrun__invalid(im, "input '%s' dimension %d ('%s') is not bound: give '%s' a "
                                      "value (the options' dims) or the input's shape (shapes)",
                                      v->onnx_name, d, param, param);
            else
                return clrun__invalid(im, "input '%s' dimension %d has no size in the model: give the "
                                      "input's shape (the options' shapes)", v->onnx_name, d);
        }
        if (value < 0)
            return clrun__imp_fail(im, CLRUN_ERROR_INVALID_ARGUMENT,
                                   "input '%s' dimension %d is bound to %" PRId64, v->onnx_name, d, value);
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
    if (clrun_tensor_empty(&type)) {
        /* An empty input is known whole from its shape: the graph keeps it as an input (fed any
         * buffer of 0 bytes), and the model's nodes read it as the constant it is, folding. */
        v->id = -1;
        if (!clrun__otensor_alloc(&v->c, elem, type.rank, type.shape))
            return CLRUN__OOM(im);
        v->kind = CLRUN__VALUE_CONST;
        return CLRUN_OK;
    }
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

/* Element i of f64 values as `dtype` into out; false when it does not convert exactly. */
static bool convert_exactly(double x, clrun_dtype dtype, void *out, uint64_t i)
{
    if (!clrun__dtype_holds(dtype, x))
        return false;
    clrun__dtype_from_double(dtype, x, (char *)out + i * clrun_dtype_size(dtype));
    return true;
}

/* A type of a known dtype and rank whose dimensions are all >= 0, one of them 0, and the others
 * a shape a tensor may have (their bytes within 64 bits: [0, 2^62, 2^62] is refused). */
static bool is_empty_type(const clrun_tensor_type *t)
{
    if (clrun_dtype_size(t->dtype) == 0 || t->rank < 1 || t->rank > CLRUN_MAX_DIMS)
        return false;
    bool zero = false;
    clrun_tensor_type rest = *t;
    for (int d = 0; d < t->rank; d++) {
        if (t->shape[d] < 0)
            return false;
        zero = zero || t->shape[d] == 0;
        rest.shape[d] = t->shape[d] == 0 ? 1 : t->shape[d];
    }
    return zero && clrun_tensor_bytes(&rest) != 0;
}

/* An input the caller fixed: a constant of the model's element type (or f64 values that convert
 * exactly to it), with a shape the model's allows (one value fits a shape of ones). */
static clrun_status add_input_constant(clrun__imp *im, const Onnx__ValueInfoProto *info, int32_t index,
                                       const clrun_onnx_constant *fixed)
{
    clrun__value *v = im->values[index];
    const Onnx__TypeProto *tp = info->type;
    int elem = clrun__onnx_dtype_elem(fixed->type.dtype);
    char a[32], b[32];
    bool typed = tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && tp->tensor_type &&
                 tp->tensor_type->has_elem_type;
    clrun_dtype model_dtype = fixed->type.dtype;
    bool convert = typed && tp->tensor_type->elem_type != elem && fixed->type.dtype == CLRUN_F64 &&
                   clrun__onnx_elem_dtype(tp->tensor_type->elem_type, &model_dtype);
    if (typed && tp->tensor_type->elem_type != elem && !convert)
        return clrun__imp_fail(im, CLRUN_ERROR_INVALID_ARGUMENT, "the value given for input '%s' is %s, the "
                               "model's input is %s", v->onnx_name, clrun__onnx_elem_name(elem, a, sizeof a),
                               clrun__onnx_elem_name(tp->tensor_type->elem_type, b, sizeof b));
    const Onnx__TensorShapeProto *shape = tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE &&
                                                  tp->tensor_type ? tp->tensor_type->shape : NULL;
    clrun_tensor_type type = fixed->type;
    bool ones = shape && clrun_tensor_elements(&type) == 1 && (int)shape->n_dim <= CLRUN_MAX_DIMS;
    for (size_t d = 0; ones && d < shape->n_dim; d++)
        ones = shape->dim[d]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
               shape->dim[d]->dim_value == 1;
    if (ones) { /* 16000 for an input of shape [1] */
        type.rank = (int)shape->n_dim;
        for (int d = 0; d < type.rank; d++)
            type.shape[d] = 1;
    }
    bool fits = !shape || (int)shape->n_dim == type.rank;
    for (size_t d = 0; fits && shape && d < shape->n_dim; d++)
        fits = shape->dim[d]->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ||
               shape->dim[d]->dim_value == type.shape[d];
    uint64_t bytes = clrun_tensor_bytes(&type);
    bool empty = bytes == 0 && is_empty_type(&type); /* known whole: its shape, no data */
    if (!fits || (bytes == 0 && !empty) || (fixed->data == NULL && !empty))
        return clrun__imp_fail(im, CLRUN_ERROR_INVALID_ARGUMENT, "the value given for input '%s' does not "
                               "have the model's shape", v->onnx_name);
    int model_elem = convert ? tp->tensor_type->elem_type : elem;
    if (!clrun__otensor_alloc(&v->c, model_elem, type.rank, type.shape))
        return CLRUN__OOM(im);
    if (!convert) {
        if (bytes)
            memcpy(v->c.data, fixed->data, (size_t)bytes);
    } else {
        uint64_t n = clrun_tensor_elements(&type);
        for (uint64_t i = 0; i < n; i++)
            if (!convert_exactly(((const double *)fixed->data)[i], model_dtype, v->c.data, i))
                return clrun__imp_fail(im, CLRUN_ERROR_INVALID_ARGUMENT, "the value given for input '%s' "
                                       "(%.17g) is no %s", v->onnx_name, ((const double *)fixed->data)[i],
                                       clrun__onnx_elem_name(model_elem, a, sizeof a));
    }
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

/* Every shape, dim and constant must name something of the model: a typo is an error, not
 * a no-op; and bindings must agree. */
clrun_status clrun__imp_check_options(clrun__imp *im, const Onnx__GraphProto *g)
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
    return check_conflicts(im);
}

/* Reserves a value (and clrun name) for every ONNX name: inputs, initializers, node outputs. An
 * input that is also an initializer is the initializer (a constant with a default, as exporters
 * before IR 4 wrote every weight). */
clrun_status clrun__imp_declare_all(clrun__imp *im, const Onnx__GraphProto *g, int32_t *producer)
{
    clrun_status s = CLRUN_OK;
    for (size_t i = 0; s == CLRUN_OK && i < g->n_initializer; i++) {
        int32_t index;
        s = clrun__imp_declare(im, g->initializer[i]->name, "an initializer", &index);
        if (s == CLRUN_OK) {
            char why[512];
            clrun__value *v = im->values[index];
            /* The main graph (producer given) is declared once: its initializers' bytes are
             * moved out of the message; a loop body's are copied, once per iteration. */
            clrun_status d = producer ? clrun__otensor_decode_take(g->initializer[i], im->dir, &v->c, why, sizeof why)
                                      : clrun__otensor_decode(g->initializer[i], im->dir, &v->c, why, sizeof why);
            if (d != CLRUN_OK)
                return clrun__imp_fail(im, d, "initializer '%s' %s", v->onnx_name, why);
            v->kind = CLRUN__VALUE_CONST;
        }
    }
    if (s == CLRUN_OK && g->n_sparse_initializer)
        return clrun__unsupported(im, "sparse initializers are not supported");
    for (size_t i = 0; s == CLRUN_OK && i < g->n_input; i++) {
        const char *name = g->input[i]->name;
        int32_t index = name ? clrun__imp_find(im, name) : -1;
        if (index >= 0 && im->values[index]->kind == CLRUN__VALUE_CONST) {
            /* An initializer listed as an input: a default the caller may replace. */
            const clrun_onnx_constant *fixed = constant_option(im, im->values[index]);
            if (fixed) {
                clrun__otensor_free(&im->values[index]->c);
                s = add_input_constant(im, g->input[i], index, fixed);
            }
            continue;
        }
        s = clrun__imp_declare(im, name, "an input", &index);
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
            s = clrun__imp_declare(im, name, what, &index);
            if (s == CLRUN_OK && producer)
                producer[index] = (int32_t)i;
        }
    }
    return s;
}

/* The values of the scopes it sees that a subgraph of node reads (an If's branches): never dead,
 * since the count cannot tell when the subgraph runs. */
static void count_captured(clrun__imp *im, const Onnx__NodeProto *node, int32_t *count, int depth)
{
    for (size_t a = 0; depth < CLRUN__ONNX_MAX_NESTING && a < node->n_attribute; a++) {
        const Onnx__AttributeProto *attr = node->attribute[a];
        for (size_t k = 0; k <= attr->n_graphs; k++) {
            const Onnx__GraphProto *sub = k < attr->n_graphs ? attr->graphs[k] : attr->g;
            for (size_t i = 0; sub && i < sub->n_node; i++) {
                for (size_t j = 0; j < sub->node[i]->n_input; j++) {
                    const char *name = sub->node[i]->input[j];
                    int32_t v = name && name[0] ? clrun__imp_find(im, name) : -1;
                    if (v >= 0)
                        count[v] = INT32_MAX;
                }
                count_captured(im, sub->node[i], count, depth + 1);
            }
            for (size_t i = 0; sub && i < sub->n_output; i++) { /* a branch may return them */
                int32_t v = sub->output[i]->name ? clrun__imp_find(im, sub->output[i]->name) : -1;
                if (v >= 0)
                    count[v] = INT32_MAX;
            }
        }
    }
}

clrun_status clrun__imp_count_readers(clrun__imp *im, const Onnx__GraphProto *g, int32_t **readers)
{
    int32_t *count = calloc((size_t)im->value_count + 1, sizeof *count);
    *readers = count;
    if (count == NULL)
        return CLRUN__OOM(im);
    for (size_t i = 0; i < g->n_node; i++)
        for (size_t k = 0; k < g->node[i]->n_input; k++) {
            const char *name = g->node[i]->input[k];
            int32_t v = name && name[0] ? clrun__imp_find(im, name) : -1;
            if (v >= 0 && count[v] < INT32_MAX)
                count[v]++;
        }
    for (size_t i = 0; i < g->n_node; i++)
        count_captured(im, g->node[i], count, 0);
    for (size_t i = 0; i < g->n_output; i++) { /* read when the outputs are marked: never dead */
        int32_t v = g->output[i]->name ? clrun__imp_find(im, g->output[i]->name) : -1;
        if (v >= 0)
            count[v] = INT32_MAX;
    }
    return CLRUN_OK;
}

void clrun__imp_release_inputs(clrun__imp *im, const Onnx__NodeProto *node, int32_t *readers,
                               int32_t counted)
{
    for (size_t k = 0; k < node->n_input; k++) {
        const char *name = node->input[k];
        int32_t index = name && name[0] ? clrun__imp_find(im, name) : -1;
        if (index < 0 || index >= counted || readers[index] == INT32_MAX || readers[index] == 0 ||
            --readers[index] > 0)
            continue;
        clrun__value *v = im->values[index];
        /* Made at import (folded, copied): its bytes count in the folding budget. A decoded
         * initializer stays, as the bytes the model brings. */
        if (v->kind == CLRUN__VALUE_CONST && v->c.counted > 0) {
            clrun__otensor_free(&v->c);
            v->kind = CLRUN__VALUE_ABSENT;
        }
    }
}
