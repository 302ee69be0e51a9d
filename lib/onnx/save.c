/* Writing a model back with new initializer values: the model file is read, the named f32
 * initializers get the given bytes (as raw_data, so external data becomes embedded), and
 * everything else is packed back as it was. What `clrun train --save-onnx` writes. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clrun/onnx.h>

#include "core/error.h"
#include "core/file.h"
#include "onnx/onnx.pb-c.h"

#define ONNX_FLOAT 1

/* What an initializer held before it was given new bytes, to put back before the free. */
typedef struct saved_field {
    Onnx__TensorProto *tensor;
    ProtobufCBinaryData raw;
    protobuf_c_boolean has_raw;
    size_t n_float;
    size_t n_external;
    protobuf_c_boolean has_location;
} saved_field;

/* An ONNX name and a name clrun gave (the model's own, or its clrun form: "1.bias" is
 * "_1.bias" where the model name was not kept). */
static bool same_name(const char *onnx_name, const char *name)
{
    if (strcmp(onnx_name, name) == 0)
        return true;
    char buf[CLRUN_ONNX_NAME_MAX + 2];
    return strcmp(clrun_onnx_name(onnx_name, buf, sizeof buf), name) == 0;
}

/* Finds the Identity node whose output is `name` and whose input is an initializer; takes the
 * node out of the graph (*node, for the caller to free) and appends a new f32 initializer called
 * `name` of the source's dims (*added; its raw data is set by the caller). *added NULL: none. */
static clrun_status detach_identity(Onnx__GraphProto *g, const char *name, Onnx__TensorProto **added,
                                    Onnx__NodeProto **node)
{
    *added = NULL;
    *node = NULL;
    for (size_t i = 0; i < g->n_node; i++) {
        Onnx__NodeProto *n = g->node[i];
        if (!n->op_type || strcmp(n->op_type, "Identity") != 0 || n->n_output != 1 ||
            n->n_input != 1 || !n->output[0] || !same_name(n->output[0], name))
            continue;
        Onnx__TensorProto *source = NULL;
        for (size_t j = 0; j < g->n_initializer && source == NULL; j++)
            if (g->initializer[j]->name && strcmp(g->initializer[j]->name, n->input[0]) == 0)
                source = g->initializer[j];
        if (source == NULL)
            return CLRUN_OK;
        Onnx__TensorProto *t = malloc(sizeof *t);
        Onnx__TensorProto **grown = realloc(g->initializer, sizeof *grown * (g->n_initializer + 1));
        if (grown)
            g->initializer = grown;
        char *copy = t && grown ? strdup(n->output[0]) : NULL;
        int64_t *dims = copy ? malloc(sizeof *dims * (source->n_dims ? source->n_dims : 1)) : NULL;
        if (dims == NULL) {
            free(t);
            free(copy);
            return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        }
        onnx__tensor_proto__init(t);
        memcpy(dims, source->dims, sizeof *dims * source->n_dims);
        t->name = copy;
        t->dims = dims;
        t->n_dims = source->n_dims;
        t->has_data_type = 1;
        t->data_type = source->data_type;
        g->initializer[g->n_initializer++] = t;
        memmove(&g->node[i], &g->node[i + 1], sizeof *g->node * (g->n_node - i - 1));
        g->n_node--;
        *added = t;
        *node = n;
        return CLRUN_OK;
    }
    return CLRUN_OK;
}

clrun_status clrun_onnx_save_initializers(const char *path, const char *out_path,
                                          const char *const *names, const void *const *data,
                                          const uint64_t *bytes, int32_t count,
                                          int32_t *written, char *err, size_t errlen)
{
    if (written)
        *written = 0;
    if (path == NULL || out_path == NULL || count < 0 || (count > 0 && (!names || !data || !bytes)))
        return clrun__error_report(err, errlen, CLRUN_ERROR_INVALID_ARGUMENT,
                                   "clrun_onnx_save_initializers: NULL path or a bad list");
    char why[512];
    clrun_status s = CLRUN_OK;
    size_t size = 0;
    void *file = clrun__file_read(path, (uint64_t)1 << 31, &size, &s, why, sizeof why);
    if (file == NULL)
        return clrun__error_report(err, errlen, s, "%s: %s", path, why);
    Onnx__ModelProto *model = onnx__model_proto__unpack(NULL, size, file);
    free(file);
    if (model == NULL || model->graph == NULL) {
        if (model)
            onnx__model_proto__free_unpacked(model, NULL);
        return clrun__error_report(err, errlen, CLRUN_ERROR_PARSE, "%s: not an ONNX model", path);
    }
    Onnx__GraphProto *g = model->graph;
    saved_field *saved = calloc((size_t)(count ? count : 1), sizeof *saved);
    Onnx__TensorProto **added = calloc((size_t)(count ? count : 1), sizeof *added);
    Onnx__NodeProto **removed = calloc((size_t)(count ? count : 1), sizeof *removed);
    int32_t replaced = 0, added_count = 0;
    if (saved == NULL || added == NULL || removed == NULL)
        s = clrun__error_report(err, errlen, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (int32_t k = 0; s == CLRUN_OK && k < count; k++) {
        Onnx__TensorProto *t = NULL;
        for (size_t i = 0; i < g->n_initializer && t == NULL; i++)
            if (g->initializer[i]->name && same_name(g->initializer[i]->name, names[k]))
                t = g->initializer[i];
        if (t == NULL) {
            /* An exporter that stored two equal initial values once (PyTorch gives a batch
             * norm's running variance as Identity(weight) while both are ones) left no
             * initializer of this name: it becomes one, in place of the Identity node. */
            s = detach_identity(g, names[k], &added[added_count], &removed[added_count]);
            if (s == CLRUN_ERROR_OUT_OF_HOST_MEMORY)
                clrun__error_report(err, errlen, s, "out of host memory");
            if (s != CLRUN_OK || added[added_count] == NULL) {
                s = s == CLRUN_ERROR_OUT_OF_HOST_MEMORY ? s : CLRUN_OK;
                continue;
            }
            t = added[added_count++];
        }
        uint64_t elements = 1;
        for (size_t d = 0; d < t->n_dims; d++)
            elements *= t->dims[d] > 0 ? (uint64_t)t->dims[d] : 0;
        if (!t->has_data_type || t->data_type != ONNX_FLOAT || elements * 4 != bytes[k]) {
            s = clrun__error_report(err, errlen, CLRUN_ERROR_INVALID_ARGUMENT, "%s: initializer '%s' is not "
                      "f32 of %llu bytes, as the value to write is", path, names[k],
                      (unsigned long long)bytes[k]);
            break;
        }
        saved_field *f = &saved[replaced++];
        *f = (saved_field){t, t->raw_data, t->has_raw_data, t->n_float_data, t->n_external_data,
                           t->has_data_location};
        t->raw_data.data = (uint8_t *)data[k];
        t->raw_data.len = (size_t)bytes[k];
        t->has_raw_data = 1;
        t->n_float_data = 0;
        t->n_external_data = 0;
        t->has_data_location = 0;
    }
    uint8_t *packed = NULL;
    size_t packed_size = 0;
    if (s == CLRUN_OK) {
        packed_size = onnx__model_proto__get_packed_size(model);
        packed = malloc(packed_size ? packed_size : 1);
        if (packed == NULL)
            s = clrun__error_report(err, errlen, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory packing %s",
                                    out_path);
        else
            onnx__model_proto__pack(model, packed);
    }
    for (int32_t k = 0; k < replaced; k++) {
        saved_field *f = &saved[k];
        f->tensor->raw_data = f->raw;
        f->tensor->has_raw_data = f->has_raw;
        f->tensor->n_float_data = f->n_float;
        f->tensor->n_external_data = f->n_external;
        f->tensor->has_data_location = f->has_location;
    }
    /* Ours are not protobuf-c's to free: take them out first. */
    g->n_initializer -= (size_t)added_count;
    for (int32_t k = 0; k < added_count; k++) {
        free(added[k]->name);
        free(added[k]->dims);
        free(added[k]);
        onnx__node_proto__free_unpacked(removed[k], NULL);
    }
    onnx__model_proto__free_unpacked(model, NULL);
    free(saved);
    free(added);
    free(removed);
    if (s == CLRUN_OK) {
        /* Beside the target, then renamed over it: never half a model. */
        size_t len = strlen(out_path);
        char *tmp = malloc(len + 8);
        FILE *w = tmp ? (snprintf(tmp, len + 8, "%s.part", out_path), fopen(tmp, "wb")) : NULL;
        bool ok = w && fwrite(packed, 1, packed_size, w) == packed_size;
        if (w && fclose(w) != 0)
            ok = false;
        if (ok && rename(tmp, out_path) != 0)
            ok = false;
        if (!ok) {
            if (tmp)
                remove(tmp);
            s = clrun__error_report(err, errlen, CLRUN_ERROR_IO,
                                    "%s: cannot write the model", out_path);
        }
        free(tmp);
    }
    free(packed);
    if (s == CLRUN_OK && written)
        *written = replaced;
    return s;
}
