/* Writing the .graph text format: parse(write(g)) is the same graph, values bit for bit. Numbers
 * are written in the C locale (clrun_graph_write switches it, as the reader does). */
#include "graph/graph.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/util.h"

/* ---- writer ---- */

/* The shortest "%.Ng" that reads back to exactly v (v finite). */
static void format_double(double v, char *buf, size_t size)
{
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(buf, size, "%.*g", digits, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

/* The same for a float, read back with strtof. */
static void format_float(float v, char *buf, size_t size)
{
    for (int digits = 1; digits <= 9; digits++) {
        snprintf(buf, size, "%.*g", digits, (double)v);
        if (strtof(buf, NULL) == v)
            return;
    }
}

static void write_type(FILE *out, const clrun_tensor_type *type)
{
    char text[CLRUN__TYPE_TEXT];
    fputs(clrun__type_format(type, text, sizeof text), out);
}

/* Element i of data as a decimal that reads back bit for bit into buf; false when it has none
 * (f16, NaN, infinities). */
static bool decimal_of(clrun_dtype dtype, const unsigned char *data, uint64_t i, char *buf,
                       size_t size)
{
    switch (dtype) {
    case CLRUN_F32: {
        float v;
        memcpy(&v, data + i * 4, 4);
        if (isfinite(v))
            format_float(v, buf, size);
        return isfinite(v);
    }
    case CLRUN_F64: {
        double v;
        memcpy(&v, data + i * 8, 8);
        if (isfinite(v))
            format_double(v, buf, size);
        return isfinite(v);
    }
    case CLRUN_I32: {
        int32_t v;
        memcpy(&v, data + i * 4, 4);
        snprintf(buf, size, "%" PRId32, v);
        return true;
    }
    case CLRUN_I64: {
        int64_t v;
        memcpy(&v, data + i * 8, 8);
        snprintf(buf, size, "%" PRId64, v);
        return true;
    }
    case CLRUN_BOOL:
        snprintf(buf, size, "%u", (unsigned)data[i]);
        return data[i] <= 1;
    case CLRUN_I8: snprintf(buf, size, "%d", (int)(int8_t)data[i]); return true;
    case CLRUN_U8: snprintf(buf, size, "%u", (unsigned)data[i]); return true;
    case CLRUN_I16: {
        int16_t v;
        memcpy(&v, data + i * 2, 2);
        snprintf(buf, size, "%d", (int)v);
        return true;
    }
    case CLRUN_U16: {
        uint16_t v;
        memcpy(&v, data + i * 2, 2);
        snprintf(buf, size, "%u", (unsigned)v);
        return true;
    }
    case CLRUN_U32: {
        uint32_t v;
        memcpy(&v, data + i * 4, 4);
        snprintf(buf, size, "%" PRIu32, v);
        return true;
    }
    case CLRUN_U64: { /* the reader takes decimals up to 2^63 - 1 */
        uint64_t v;
        memcpy(&v, data + i * 8, 8);
        snprintf(buf, size, "%" PRIu64, v);
        return v <= (uint64_t)INT64_MAX;
    }
    case CLRUN_F16:
    case CLRUN_BF16:
        break;
    }
    return false;
}

/* data=[...] when every value has a decimal spelling that reads back bit for bit (integers,
 * finite floats); bits=[0x...] otherwise (f16, NaN, infinities). */
static void write_data(FILE *out, const clrun__tensor *tensor)
{
    clrun_dtype dtype = tensor->type.dtype;
    uint64_t elements = clrun_tensor_elements(&tensor->type);
    size_t size = clrun_dtype_size(dtype);
    const unsigned char *bytes = tensor->data;
    char text[64];
    bool decimal = true;
    for (uint64_t i = 0; decimal && i < elements; i++)
        decimal = decimal_of(dtype, bytes, i, text, sizeof text);
    fputs(decimal ? "data=[" : "bits=[", out);
    for (uint64_t i = 0; i < elements; i++) {
        if (i)
            fputs(", ", out);
        if (decimal) {
            decimal_of(dtype, bytes, i, text, sizeof text);
            fputs(text, out);
            continue;
        }
        uint64_t pattern = 0;
        memcpy(&pattern, bytes + i * size, size); /* little-endian: the low bytes */
        fprintf(out, "0x%0*" PRIx64, (int)(2 * size), pattern);
    }
    fputs("]", out);
}

static void write_fill(FILE *out, const clrun__tensor *tensor)
{
    if (tensor->data) {
        write_data(out, tensor);
        return;
    }
    char a[64], b[64];
    switch (tensor->fill) {
    case CLRUN_FILL_ZEROS: fputs("zeros", out); return;
    case CLRUN_FILL_ONES: fputs("ones", out); return;
    case CLRUN_FILL_UNIFORM:
    case CLRUN_FILL_NORMAL:
        format_double(tensor->fill_a, a, sizeof a);
        format_double(tensor->fill_b, b, sizeof b);
        fprintf(out, "%s(%s, %s) seed=", tensor->fill == CLRUN_FILL_UNIFORM ? "uniform" : "normal",
                a, b);
        /* Seeds above INT64_MAX read back only as hex bit patterns. */
        fprintf(out, tensor->seed > INT64_MAX ? "0x%" PRIx64 : "%" PRIu64, tensor->seed);
        return;
    }
}

static void write_attribute(FILE *out, const clrun_attr *attr)
{
    fprintf(out, " %s=", attr->name);
    if (attr->kind == CLRUN_ATTR_INT) {
        fprintf(out, "%" PRId64, attr->i);
    } else if (attr->kind == CLRUN_ATTR_FLOAT) {
        char text[64];
        format_double(attr->f, text, sizeof text);
        /* A float must not read back as an integer. */
        fprintf(out, "%s%s", text, strpbrk(text, ".eE") ? "" : ".0");
    } else {
        fputs("[", out);
        for (int k = 0; k < attr->count; k++)
            fprintf(out, "%s%" PRId64, k ? ", " : "", attr->ints[k]);
        fputs("]", out);
    }
}

static void write_node(FILE *out, const clrun_graph *graph, const clrun__node *node)
{
    fputs("node ", out);
    for (int o = 0; o < node->output_count; o++) {
        const clrun__tensor *tensor = &graph->tensors[node->outputs[o]];
        fprintf(out, "%s%s: ", o ? ", " : "", tensor->name);
        write_type(out, &tensor->type);
    }
    fprintf(out, " = %s(", node->op->name);
    for (int i = 0; i < node->input_count; i++)
        fprintf(out, "%s%s", i ? ", " : "", graph->tensors[node->inputs[i]].name);
    fputs(")", out);
    for (int k = 0; k < node->attr_count; k++)
        write_attribute(out, &node->attrs[k]);
    fputs("\n", out);
}

/* Declarations in tensor order (the order the builder made them), each node at its first
 * output, so reading back gives every tensor and node the same index, wherever each node's
 * outputs come after every tensor it reads (not so after rematerialisation, whose repeated nodes
 * run early with late ids: read back, they are declared where they run and their tensors are
 * numbered in that order). */
static void write_graph(const clrun_graph *graph, FILE *out)
{
    if (graph->name)
        fprintf(out, "graph %s\n", graph->name);
    for (int32_t t = 0; t < graph->tensor_count; t++) {
        const clrun__tensor *tensor = &graph->tensors[t];
        if (tensor->kind == CLRUN__TENSOR_INPUT) {
            fprintf(out, "input %s: ", tensor->name);
            write_type(out, &tensor->type);
            fputs(tensor->donated ? " donated\n" : "\n", out);
        } else if (tensor->kind == CLRUN__TENSOR_CONSTANT) {
            fprintf(out, "const %s: ", tensor->name);
            write_type(out, &tensor->type);
            fputs(" ", out);
            write_fill(out, tensor);
            fputs("\n", out);
        } else if (tensor->producer >= 0 && tensor->producer < graph->node_count &&
                   graph->nodes[tensor->producer].outputs[0] == t) {
            write_node(out, graph, &graph->nodes[tensor->producer]);
        }
    }
    for (int32_t i = 0; i < graph->output_count; i++)
        fprintf(out, "%s%s", i ? ", " : "output ", graph->tensors[graph->outputs[i]].name);
    if (graph->output_count)
        fputs("\n", out);
}

clrun_status clrun_graph_write(const clrun_graph *graph, FILE *out)
{
    if (!graph || !out)
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "clrun_graph_write: %s is NULL",
                           graph ? "out" : "graph");
    if (clrun__graph_has_guards(graph))
        return clrun__error_set(NULL, CLRUN_ERROR_UNSUPPORTED,
                                "graph '%s' has guarded nodes (an If whose condition is known only at "
                                "run time), which the text format cannot write",
                                graph->name ? graph->name : "");
    clrun__c_numeric scope = clrun__c_numeric_enter();
    write_graph(graph, out);
    clrun__c_numeric_leave(scope);
    if (ferror(out) || fflush(out) != 0)
        return clrun__error_set(NULL, CLRUN_ERROR_IO, "writing the graph failed");
    return CLRUN_OK;
}
