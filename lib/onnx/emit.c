/* Building the graph from values: host constants become graph constants when a device node
 * first reads them, nodes get their outputs named after the ONNX values they define (or as
 * temporaries after the node), and refusals of the graph ops come back as the node's refusal. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "core/util.h"
#include "graph/op.h"
#include "onnx/import.h"
#include "onnx/map.h"


#define MAX_EMIT 64

bool clrun__graph_has_op(const char *op)
{
    return clrun__op_find(op) != NULL;
}

bool clrun__op_accepts(const char *op, clrun__value *const *inputs, int n_inputs, const clrun_attr *attrs,
                       int n_attrs)
{
    const clrun__op *o = clrun__op_find(op);
    clrun_tensor_type types[MAX_EMIT + 8];
    char why[256];
    if (o == NULL || n_inputs > MAX_EMIT || n_inputs < o->min_inputs || n_inputs > o->max_inputs)
        return false;
    for (int i = 0; i < n_attrs; i++) /* what the builder refuses before any type rule sees it */
        if (attrs[i].kind == CLRUN_ATTR_INTS && (attrs[i].count < 0 || attrs[i].count > CLRUN_MAX_ATTR_INTS))
            return false;
    for (int i = 0; i < n_inputs; i++) {
        if (inputs[i]->kind == CLRUN__VALUE_CONST) {
            if (!clrun__otensor_clrun_type(&inputs[i]->c, &types[i], why, sizeof why))
                return false;
            continue;
        }
        memset(&types[i], 0, sizeof types[i]);
        if (!clrun__onnx_elem_dtype(inputs[i]->c.elem, &types[i].dtype))
            return false;
        types[i].rank = inputs[i]->c.rank;
        memcpy(types[i].shape, inputs[i]->c.dims, sizeof types[i].shape);
    }
    clrun__op_call call = {.inputs = types, .input_count = n_inputs, .outputs = types + n_inputs,
                           .output_count = o->outputs, .attrs = attrs, .attr_count = n_attrs};
    if (o->outputs > 8)
        return false;
    return o->infer(&call, types + n_inputs, NULL, 0) == CLRUN_OK;
}

clrun_attr clrun__mk_int(const char *name, int64_t value)
{
    return (clrun_attr){.name = name, .kind = CLRUN_ATTR_INT, .i = value};
}

clrun_attr clrun__mk_float(const char *name, double value)
{
    return (clrun_attr){.name = name, .kind = CLRUN_ATTR_FLOAT, .f = value};
}

clrun_attr clrun__mk_ints(const char *name, const int64_t *values, int count)
{
    clrun_attr a = {.name = name, .kind = CLRUN_ATTR_INTS, .count = count};
    for (int i = 0; i < count && i < CLRUN_MAX_ATTR_INTS; i++)
        a.ints[i] = values[i];
    if (count > CLRUN_MAX_ATTR_INTS)
        a.count = CLRUN_MAX_ATTR_INTS + 1; /* the builder refuses it, by name */
    return a;
}

static void set_device(clrun__value *v, clrun_tensor_id id, const clrun_tensor_type *type)
{
    v->kind = CLRUN__VALUE_DEVICE;
    v->id = id;
    clrun__otensor_free(&v->c);
    v->c.elem = clrun__onnx_dtype_elem(type->dtype);
    v->c.rank = type->rank;
    memcpy(v->c.dims, type->shape, sizeof type->shape);
}

clrun_status clrun__device_id(clrun__imp *im, clrun__value *v, clrun_tensor_id *id)
{
    if (v->id >= 0) {
        *id = v->id;
        return CLRUN_OK;
    }
    if (v->kind != CLRUN__VALUE_CONST)
        return clrun__invalid(im, "internal: value '%s' has no tensor", v->name ? v->name : "?");
    clrun_tensor_type type;
    char why[256];
    if (!clrun__otensor_clrun_type(&v->c, &type, why, sizeof why))
        return clrun__unsupported(im, "constant '%s' cannot go to the device: %s",
                                  v->onnx_name ? v->onnx_name : v->name ? v->name : "(folded)", why);
    if (v->name == NULL) {
        int32_t index = -1;
        for (int32_t i = im->value_count - 1; i >= 0; i--)
            if (im->values[i] == v) {
                index = i;
                break;
            }
        if (index < 0 || clrun__imp_temp_name(im, im->node, index) == NULL)
            return CLRUN__OOM(im);
    }
    /* The weights are most of a model's bytes: the graph takes the value's block rather than a
     * copy of it (the value still reads it, as the graph's, while the import lasts). */
    clrun_status s;
    if (v->c.data && !v->c.graph_owned && clrun_tensor_bytes(&type) > 0) {
        s = clrun__graph_add_constant_owned(im->graph, v->name, &type, v->c.data, &v->id);
        v->c.graph_owned = s == CLRUN_OK;
    } else {
        s = clrun_graph_add_constant(im->graph, v->name, &type, v->c.data, CLRUN_FILL_ZEROS, 0, 0, 0,
                                     &v->id);
    }
    if (s != CLRUN_OK)
        return clrun__imp_fail(im, s == CLRUN_ERROR_INVALID_SIZE ? CLRUN_ERROR_UNSUPPORTED : s,
                               "constant '%s': %s", v->name, clrun_graph_last_error(im->graph));
    *id = v->id;
    return CLRUN_OK;
}


/* Stand for a dimension 0 while an op's own type rule reads the shapes: sizes no real operand
 * has, which broadcast as 0 does (against 1 and themselves only). The rule runs once with each:
 * an output dimension that follows the stand-in is the empty one; one that differs otherwise
 * (derived from it, as 2·n or n + k would be) has no meaning for 0, and the op's own mapping
 * decides. */
#define EMPTY_DIM_A 1000003
#define EMPTY_DIM_B 1000033

/* The op's type rule over the operands' shapes, each 0 replaced by stand_in; types[n_inputs...]
 * receive the outputs. *known false where an operand's type is beyond what the rule reads. */
static clrun_status infer_with_stand_in(const clrun__op *o, clrun__value *const *inputs, int n_inputs,
                                        const clrun_attr *attrs, int n_attrs, int n_outputs, int64_t stand_in,
                                        clrun_tensor_type *types, bool *known, char *why, size_t why_size)
{
    *known = false;
    for (int i = 0; i < n_inputs; i++) {
        memset(&types[i], 0, sizeof types[i]);
        if (!clrun__onnx_elem_dtype(inputs[i]->c.elem, &types[i].dtype) || inputs[i]->c.rank > CLRUN_MAX_DIMS)
            return CLRUN_OK;
        types[i].rank = inputs[i]->c.rank;
        for (int d = 0; d < types[i].rank; d++)
            types[i].shape[d] = inputs[i]->c.dims[d] == 0 ? stand_in : inputs[i]->c.dims[d];
    }
    *known = true;
    clrun__op_call call = {.inputs = types, .input_count = n_inputs, .outputs = types + n_inputs,
                           .output_count = n_outputs, .attrs = attrs, .attr_count = n_attrs};
    return o->infer(&call, types + n_inputs, why, why_size);
}

/* An op with an empty operand. An elementwise op (unary, binary, ternary with numpy
 * broadcasting) gives an empty result of the broadcast shape; another op too where its type rule
 * carries the empty dimension into every output (a matmul's M, a softmax's rows, a reduction
 * over another axis): a result of no data, known at load, which folds on (no node, no kernel).
 * *handled false otherwise: the op's own mapping decides (a value over nothing it computes on
 * the host, or a refusal naming the empty shape). */
static clrun_status empty_result(clrun__imp *im, const clrun__onode *n, const char *op,
                                 clrun__value *const *inputs, int n_inputs, const clrun_attr *attrs, int n_attrs,
                                 const int *out_index, int n_outputs, clrun__value **results, bool *handled)
{
    const clrun__op *o = clrun__op_find(op);
    *handled = false;
    bool elementwise = o->kind == CLRUN__OP_UNARY || o->kind == CLRUN__OP_SCALE || o->kind == CLRUN__OP_COPY ||
                       o->kind == CLRUN__OP_BINARY || o->kind == CLRUN__OP_TERNARY;
    if (o->outputs != n_outputs || n_outputs > 8 || n_inputs > MAX_EMIT)
        return CLRUN_OK;
    clrun_tensor_type types[MAX_EMIT + 8], other[MAX_EMIT + 8];
    char why[256] = "";
    bool known;
    if (infer_with_stand_in(o, inputs, n_inputs, attrs, n_attrs, n_outputs, EMPTY_DIM_A, types, &known, why,
                            sizeof why) != CLRUN_OK) {
        if (!known || !elementwise)
            return CLRUN_OK;
        *handled = true;
        return clrun__invalid(im, "%s of an empty operand: %s", op, why[0] ? why : "the shapes do not fit");
    }
    if (!known || infer_with_stand_in(o, inputs, n_inputs, attrs, n_attrs, n_outputs, EMPTY_DIM_B, other, &known,
                                      why, sizeof why) != CLRUN_OK)
        return CLRUN_OK;
    for (int i = 0; i < n_outputs; i++) {
        const clrun_tensor_type *a = &types[n_inputs + i], *b = &other[n_inputs + i];
        bool carried = false;
        if (a->rank != b->rank)
            return CLRUN_OK;
        for (int d = 0; d < a->rank; d++) {
            bool follows = a->shape[d] == EMPTY_DIM_A && b->shape[d] == EMPTY_DIM_B;
            if (!follows && a->shape[d] != b->shape[d])
                return CLRUN_OK; /* derived from the empty dimension */
            carried = carried || follows;
        }
        if (!carried)
            return CLRUN_OK;
    }
    *handled = true;
    for (int i = 0; i < n_outputs; i++) {
        clrun_tensor_type *t = &types[n_inputs + i];
        int64_t dims[CLRUN_MAX_DIMS];
        for (int d = 0; d < t->rank; d++)
            dims[d] = t->shape[d] == EMPTY_DIM_A ? 0 : t->shape[d];
        int k = out_index ? out_index[i] : -1;
        bool named = n && k >= 0 && k < n->n_out && n->out[k] >= 0;
        clrun__value *r = NULL;
        clrun_status s = clrun__mv_empty(im, (clrun__onode *)n, clrun__onnx_dtype_elem(t->dtype), t->rank, dims,
                                         named ? k : -1, &r);
        if (s != CLRUN_OK)
            return s;
        if (results)
            results[i] = named ? im->values[n->out[k]] : r;
    }
    return CLRUN_OK;
}

clrun_status clrun__emit(clrun__imp *im, const clrun__onode *n, const char *op,
                         clrun__value *const *inputs, int n_inputs, const clrun_attr *attrs,
                         int n_attrs, const int *out_index, int n_outputs, clrun__value **results)
{
    clrun_tensor_id ids[MAX_EMIT], outs[MAX_EMIT];
    const char *names[MAX_EMIT];
    clrun__value *values[MAX_EMIT];
    if (n_inputs > MAX_EMIT || n_outputs > MAX_EMIT || n_outputs < 1)
        return clrun__unsupported(im, "%d inputs and %d outputs for one graph node (at most %d)",
                                  n_inputs, n_outputs, MAX_EMIT);
    if (clrun__op_find(op) == NULL)
        return clrun__unsupported(im, "needs graph op '%s', which this build of clrun does not have", op);
    bool empty_operand = false;
    for (int i = 0; i < n_inputs; i++)
        empty_operand = empty_operand || (inputs[i]->kind == CLRUN__VALUE_CONST && clrun__otensor_count(&inputs[i]->c) == 0);
    if (empty_operand) {
        bool handled;
        clrun_status s = empty_result(im, n, op, inputs, n_inputs, attrs, n_attrs, out_index, n_outputs,
                                      results, &handled);
        if (handled)
            return s;
    }
    for (int i = 0; i < n_inputs; i++) {
        clrun_status s = clrun__device_id(im, inputs[i], &ids[i]);
        if (s != CLRUN_OK)
            return s;
    }
    for (int i = 0; i < n_outputs; i++) {
        int k = out_index ? out_index[i] : -1;
        if (n && k >= 0 && k < n->n_out && n->out[k] >= 0) {
            values[i] = im->values[n->out[k]];
            if (values[i]->kind != CLRUN__VALUE_ABSENT)
                return clrun__invalid(im, "internal: output %d defined twice", k);
        } else {
            int32_t index = clrun__imp_new_value(im, NULL);
            if (index < 0 || clrun__imp_temp_name(im, n, index) == NULL)
                return CLRUN__OOM(im);
            values[i] = im->values[index];
        }
        names[i] = values[i]->name;
    }
    clrun_status s = clrun_graph_add_node(im->graph, op, ids, n_inputs, names, n_outputs, attrs,
                                          n_attrs, outs);
    if (s == CLRUN_ERROR_OUT_OF_HOST_MEMORY)
        return CLRUN__OOM(im);
    if (s != CLRUN_OK)
        return clrun__unsupported(im, "%s", clrun_graph_last_error(im->graph));
    if (im->guard) {
        s = clrun__graph_set_guard(im->graph, im->graph->node_count - 1, im->guard->id, im->guard_negate);
        if (s != CLRUN_OK)
            return clrun__invalid(im, "internal: %s", clrun_graph_last_error(im->graph));
    }
    for (int i = 0; i < n_outputs; i++) {
        set_device(values[i], outs[i], clrun_graph_tensor_type(im->graph, outs[i]));
        if (results)
            results[i] = values[i];
    }
    return CLRUN_OK;
}

clrun_status clrun__emit1(clrun__imp *im, const clrun__onode *n, const char *op,
                          clrun__value *const *inputs, int n_inputs, const clrun_attr *attrs,
                          int n_attrs, int out, clrun__value **result)
{
    clrun__value *r;
    clrun_status s = clrun__emit(im, n, op, inputs, n_inputs, attrs, n_attrs, &out, 1, &r);
    if (s == CLRUN_OK && result)
        *result = r;
    return s;
}

clrun_status clrun__need_inputs(clrun__imp *im, const clrun__onode *n, int count)
{
    for (int i = 0; i < count; i++)
        if (i >= n->n_in || n->in[i] == NULL)
            return clrun__invalid(im, "%s needs input %d", n->op, i);
    return CLRUN_OK;
}

clrun_status clrun__emit_binary(clrun__imp *im, const clrun__onode *n, const char *op, clrun__value *a,
                                clrun__value *b, int out, clrun__value **r)
{
    clrun__value *in[2] = {a, b};
    return clrun__emit1(im, n, op, in, 2, NULL, 0, out, r);
}

clrun_status clrun__emit_unary(clrun__imp *im, const clrun__onode *n, const char *op, clrun__value *x,
                               int out, clrun__value **r)
{
    return clrun__emit1(im, n, op, &x, 1, NULL, 0, out, r);
}

clrun__value *clrun__const_value(clrun__imp *im, clrun__otensor *t)
{
    int32_t index = clrun__imp_new_value(im, NULL);
    if (index < 0) {
        clrun__otensor_free(t);
        CLRUN__OOM(im);
        return NULL;
    }
    clrun__value *v = im->values[index];
    v->kind = CLRUN__VALUE_CONST;
    v->c = *t;
    memset(t, 0, sizeof *t);
    return v;
}

clrun__value *clrun__scalar_value(clrun__imp *im, int elem, double value, int rank)
{
    clrun__otensor t;
    int64_t dims[CLRUN__ONNX_MAX_RANK];
    for (int d = 0; d < rank; d++)
        dims[d] = 1;
    if (!clrun__otensor_alloc(&t, elem, rank, dims)) {
        CLRUN__OOM(im);
        return NULL;
    }
    clrun__otensor_set_real(&t, 0, value);
    return clrun__const_value(im, &t);
}

clrun_status clrun__emit_reshape(clrun__imp *im, const clrun__onode *n, clrun__value *x, int rank,
                                 const int64_t *dims, int out, clrun__value **result)
{
    clrun_attr a = clrun__mk_ints("shape", dims, rank);
    return clrun__emit1(im, n, "reshape", &x, 1, &a, 1, out, result);
}

clrun_status clrun__emit_copy(clrun__imp *im, const clrun__onode *n, clrun__value *x, int out,
                              clrun__value **result)
{
    return clrun__emit1(im, n, "copy", &x, 1, NULL, 0, out, result);
}

clrun_status clrun__emit_transpose(clrun__imp *im, const clrun__onode *n, clrun__value *x,
                                   const int64_t *perm, int out, clrun__value **result)
{
    clrun_attr a = clrun__mk_ints("perm", perm, x->c.rank);
    return clrun__emit1(im, n, "transpose", &x, 1, &a, 1, out, result);
}

clrun_status clrun__define_const(clrun__imp *im, const clrun__onode *n, int i, clrun__otensor *t)
{
    clrun__value *v = clrun__out(im, n, i);
    if (v == NULL) { /* nobody reads it */
        clrun__otensor_free(t);
        return CLRUN_OK;
    }
    if (v->kind != CLRUN__VALUE_ABSENT) {
        clrun__otensor_free(t);
        return clrun__invalid(im, "internal: output %d defined twice", i);
    }
    v->kind = CLRUN__VALUE_CONST;
    v->c = *t;
    memset(t, 0, sizeof *t);
    return CLRUN_OK;
}

clrun_status clrun__define_alias(clrun__imp *im, const clrun__onode *n, int i, clrun__value *src)
{
    clrun__value *v = clrun__out(im, n, i);
    if (v == NULL)
        return CLRUN_OK;
    if (src->kind == CLRUN__VALUE_CONST) {
        clrun__otensor t;
        if (!clrun__otensor_copy(&t, &src->c))
            return CLRUN__OOM(im);
        return clrun__define_const(im, n, i, &t);
    }
    /* A graph output that is such an alias gets its own copy when the outputs are marked. */
    clrun__value_alias_device(v, src);
    return CLRUN_OK;
}

void clrun__value_alias_device(clrun__value *v, const clrun__value *src)
{
    v->kind = CLRUN__VALUE_DEVICE;
    v->id = src->id;
    v->graph_input = src->graph_input;
    v->c.elem = src->c.elem;
    v->c.rank = src->c.rank;
    memcpy(v->c.dims, src->c.dims, sizeof v->c.dims);
}

/* ---- constant inputs ---- */

static const char *input_name(const clrun__onode *n, int i)
{
    return i < (int)n->proto->n_input && n->proto->input[i] ? n->proto->input[i] : "";
}

clrun_status clrun__const_input(clrun__imp *im, const clrun__onode *n, int i, bool optional,
                                const clrun__otensor **out)
{
    *out = NULL;
    clrun__value *v = i < n->n_in ? n->in[i] : NULL;
    if (v == NULL)
        return optional ? CLRUN_OK : clrun__invalid(im, "input %d is missing", i);
    if (v->kind != CLRUN__VALUE_CONST)
        return clrun__unsupported(im, "input %d '%s' must be known at load time (a constant, or "
                                  "computed from constants and shapes only)", i, input_name(n, i));
    *out = &v->c;
    return CLRUN_OK;
}

clrun_status clrun__const_ints(clrun__imp *im, const clrun__onode *n, int i, bool optional,
                               int64_t *out, int max, int *count)
{
    const clrun__otensor *t;
    *count = -1;
    clrun_status s = clrun__const_input(im, n, i, optional, &t);
    if (s != CLRUN_OK || t == NULL)
        return s;
    if (t->rank > 1 || clrun__onnx_elem_is_float(t->elem) || t->elem == CLRUN__ONNX_BOOL)
        return clrun__invalid(im, "input %d '%s' must be a list of integers", i, input_name(n, i));
    uint64_t k = clrun__otensor_count(t);
    if (k > (uint64_t)max)
        return clrun__unsupported(im, "input %d '%s' has %" PRIu64 " entries (at most %d)", i,
                                  input_name(n, i), k, max);
    for (uint64_t j = 0; j < k; j++)
        out[j] = clrun__otensor_get_int(t, j);
    *count = (int)k;
    return CLRUN_OK;
}

clrun_status clrun__const_real(clrun__imp *im, const clrun__onode *n, int i, double *out,
                               bool *present)
{
    const clrun__otensor *t;
    *present = false;
    clrun_status s = clrun__const_input(im, n, i, true, &t);
    if (s != CLRUN_OK || t == NULL)
        return s;
    if (clrun__otensor_count(t) != 1)
        return clrun__invalid(im, "input %d '%s' must hold one value", i, input_name(n, i));
    *out = clrun__otensor_get_real(t, 0);
    *present = true;
    return CLRUN_OK;
}

clrun_status clrun__norm_axis(clrun__imp *im, int64_t axis, int rank, const char *what, int *out)
{
    int64_t lo = rank > 0 ? -rank : -1, hi = rank > 0 ? rank : 1;
    if (axis < lo || axis >= hi)
        return clrun__invalid(im, "%s %" PRId64 " is out of range for rank %d", what, axis, rank);
    *out = (int)(axis < 0 ? axis + (rank > 0 ? rank : 1) : axis);
    return CLRUN_OK;
}

clrun_status clrun__host_result_failed(clrun__imp *im, int elem, int rank, const int64_t *dims)
{
    uint64_t bytes = clrun__onnx_elem_size(elem);
    bool fits = true;
    for (int d = 0; d < rank && fits; d++)
        fits = dims[d] >= 0 && clrun__mul_u64(bytes, (uint64_t)dims[d], &bytes);
    char text[128], limit[CLRUN__BYTES_TEXT];
    if (fits && bytes <= CLRUN__ONNX_MAX_TENSOR_BYTES) {
        if (!clrun__fold_budget_refused())
            return CLRUN__OOM(im);
        /* the host's folding budget (tensor.h): what a model may make the host build at once */
        uint64_t budget = clrun__fold_budget_set(0);
        clrun__fold_budget_set(budget);
        return clrun__unsupported(im, "a constant of shape %s is too large to compute on the host (over "
                                  "the %s that folding may hold at once)",
                                  clrun__onnx_dims_text(rank, dims, text, sizeof text),
                                  clrun__format_bytes(budget ? budget : CLRUN__ONNX_FOLD_BUDGET, limit, sizeof limit));
    }
    return clrun__unsupported(im, "a constant of shape %s is too large to compute on the host (at most %s)",
                              clrun__onnx_dims_text(rank, dims, text, sizeof text),
                              clrun__format_bytes(CLRUN__ONNX_MAX_TENSOR_BYTES, limit, sizeof limit));
}
