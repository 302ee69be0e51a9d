/* The importer's values and names: the table of ONNX values, clrun names made unique, and the
 * failure messages that name the file and the node. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "onnx/import.h"

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

const char *clrun__imp_domain(const Onnx__NodeProto *node)
{
    const char *d = node->domain ? node->domain : "";
    return strcmp(d, "ai.onnx") == 0 ? "" : d;
}

int64_t clrun__imp_domain_opset(const clrun__imp *im, const char *domain)
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
    const char *domain = clrun__imp_domain(node);
    char opset[96];
    int64_t version = clrun__imp_domain_opset(im, domain);
    if (version < 0 && !domain[0] && im->opset > 0)
        version = im->opset; /* implied by an IR version before 3 */
    if (domain[0] && version < 0)
        snprintf(opset, sizeof opset, "domain %.40s, no opset imported", domain);
    else if (domain[0])
        snprintf(opset, sizeof opset, "domain %.40s, opset %" PRId64, domain, version);
    else if (version < 0)
        snprintf(opset, sizeof opset, "no opset imported");
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

int32_t clrun__imp_find(clrun__imp *im, const char *onnx_name)
{
    return clrun__name_index_find(&im->onnx_names, onnx_name, value_onnx_name_of, im);
}

void clrun__imp_free_values(clrun__imp *im)
{
    for (int32_t i = 0; i < im->value_count; i++) {
        clrun__otensor_free(&im->values[i]->c);
        free(im->values[i]->name);
        free(im->values[i]->hidden);
        free(im->values[i]);
    }
    free(im->values);
    clrun__name_index_free(&im->onnx_names);
    clrun__name_index_free(&im->clrun_names);
}

/* A new ONNX value for a name the model defines; refuses a name defined twice. */
clrun_status clrun__imp_declare(clrun__imp *im, const char *onnx_name, const char *what, int32_t *index)
{
    if (onnx_name == NULL || onnx_name[0] == '\0')
        return clrun__invalid(im, "%s has an empty name", what);
    if (clrun__imp_find(im, onnx_name) >= 0)
        return clrun__invalid(im, "'%s' (%s) is defined twice", onnx_name, what);
    *index = clrun__imp_new_value(im, onnx_name);
    return *index < 0 ? CLRUN__OOM(im) : CLRUN_OK;
}

clrun__value *clrun__out(clrun__imp *im, const clrun__onode *n, int i)
{
    return i < n->n_out && n->out[i] >= 0 ? im->values[n->out[i]] : NULL;
}
