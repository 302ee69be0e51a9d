/* Attributes of the node being imported. Every read marks the attribute, so the driver can refuse
 * a node carrying one that its mapping never looked at: an attribute clrun does not know is a
 * refusal, never silently ignored. Reference attributes (ref_attr_name, for functions) are
 * refused. */
#include <inttypes.h>
#include <string.h>

#include "onnx/import.h"

static const char *type_name(Onnx__AttributeProto__AttributeType t)
{
    switch (t) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT: return "a float";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT: return "an int";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING: return "a string";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: return "a tensor";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH: return "a graph";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS: return "a list of floats";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS: return "a list of ints";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS: return "a list of strings";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS: return "a list of tensors";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS: return "a list of graphs";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR: return "a sparse tensor";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSORS: return "a list of sparse tensors";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO: return "a type";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTOS: return "a list of types";
    default: return "of no type";
    }
}

/* The attribute's type: its type field, or for IR versions before it existed, the field that
 * holds a value. */
static Onnx__AttributeProto__AttributeType attr_type(const Onnx__AttributeProto *a)
{
    if (a->has_type && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED)
        return a->type;
    if (a->has_f) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
    if (a->has_i) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    if (a->has_s) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
    if (a->t) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
    if (a->g) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
    if (a->n_floats) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
    if (a->n_ints) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    if (a->n_strings) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS;
    return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED;
}

/* The first attribute called name; every one of that name is marked read (a second one is
 * refused by the readers, not reported as unknown). */
static const Onnx__AttributeProto *find(const clrun__onode *n, const char *name, int *copies)
{
    const Onnx__AttributeProto *first = NULL;
    *copies = 0;
    for (size_t i = 0; i < n->proto->n_attribute; i++) {
        const Onnx__AttributeProto *a = n->proto->attribute[i];
        if (a->name && strcmp(a->name, name) == 0) {
            n->attr_used[i] = true;
            (*copies)++;
            if (first == NULL)
                first = a;
        }
    }
    return first;
}

const Onnx__AttributeProto *clrun__oattr_find(clrun__imp *im, const clrun__onode *n, const char *name)
{
    (void)im;
    int copies;
    return find(n, name, &copies);
}

void clrun__oattr_ignore(clrun__imp *im, const clrun__onode *n, const char *name)
{
    clrun__oattr_find(im, n, name);
}

/* The attribute called name if present with type `want` (NULL when absent); a refusal for one of
 * another type or a reference. */
static clrun_status lookup(clrun__imp *im, const clrun__onode *n, const char *name,
                           Onnx__AttributeProto__AttributeType want, const Onnx__AttributeProto **out)
{
    int copies;
    const Onnx__AttributeProto *a = find(n, name, &copies);
    *out = NULL;
    if (a == NULL)
        return CLRUN_OK;
    if (copies > 1)
        return clrun__invalid(im, "attribute '%s' is given %d times", name, copies);
    if (a->ref_attr_name && a->ref_attr_name[0])
        return clrun__unsupported(im, "attribute '%s' refers to '%s' of a function", name, a->ref_attr_name);
    Onnx__AttributeProto__AttributeType t = attr_type(a);
    /* An int where a float is wanted is accepted (some exporters write alpha=1 so). */
    if (t != want && !(want == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT &&
                       t == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT) &&
        !(want == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS && t == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED) &&
        !(want == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS && t == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED))
        return clrun__invalid(im, "attribute '%s' is %s, expected %s", name, type_name(t), type_name(want));
    *out = a;
    return CLRUN_OK;
}

clrun_status clrun__oattr_int(clrun__imp *im, const clrun__onode *n, const char *name, int64_t fallback,
                              int64_t *out)
{
    const Onnx__AttributeProto *a;
    clrun_status s = lookup(im, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, &a);
    *out = a ? a->i : fallback;
    return s;
}

clrun_status clrun__oattr_float(clrun__imp *im, const clrun__onode *n, const char *name, double fallback,
                                double *out)
{
    const Onnx__AttributeProto *a;
    clrun_status s = lookup(im, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT, &a);
    *out = a == NULL ? fallback : attr_type(a) == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT ? (double)a->i : a->f;
    return s;
}

clrun_status clrun__oattr_ints(clrun__imp *im, const clrun__onode *n, const char *name, int64_t *out,
                               int max, int *count)
{
    const Onnx__AttributeProto *a;
    clrun_status s = lookup(im, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS, &a);
    *count = -1;
    if (s != CLRUN_OK || a == NULL)
        return s;
    if (a->n_ints > (size_t)max)
        return clrun__unsupported(im, "attribute '%s' has %zu entries (at most %d)", name, a->n_ints, max);
    for (size_t i = 0; i < a->n_ints; i++)
        out[i] = a->ints[i];
    *count = (int)a->n_ints;
    return CLRUN_OK;
}

clrun_status clrun__oattr_floats(clrun__imp *im, const clrun__onode *n, const char *name, double *out,
                                 int max, int *count)
{
    const Onnx__AttributeProto *a;
    clrun_status s = lookup(im, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS, &a);
    *count = -1;
    if (s != CLRUN_OK || a == NULL)
        return s;
    if (a->n_floats > (size_t)max)
        return clrun__unsupported(im, "attribute '%s' has %zu entries (at most %d)", name, a->n_floats, max);
    for (size_t i = 0; i < a->n_floats; i++)
        out[i] = a->floats[i];
    *count = (int)a->n_floats;
    return CLRUN_OK;
}

clrun_status clrun__oattr_string(clrun__imp *im, const clrun__onode *n, const char *name,
                                 const char *fallback, char *buf, size_t size)
{
    const Onnx__AttributeProto *a;
    clrun_status s = lookup(im, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING, &a);
    if (s != CLRUN_OK)
        return s;
    if (a == NULL) {
        snprintf(buf, size, "%s", fallback ? fallback : "");
        return CLRUN_OK;
    }
    if (a->s.len >= size || (a->s.len && memchr(a->s.data, '\0', a->s.len)))
        return clrun__unsupported(im, "attribute '%s' is a string of %zu bytes that clrun does not know",
                                  name, a->s.len);
    if (a->s.len)
        memcpy(buf, a->s.data, a->s.len);
    buf[a->s.len] = '\0';
    return CLRUN_OK;
}

clrun_status clrun__oattr_tensor(clrun__imp *im, const clrun__onode *n, const char *name,
                                 clrun__otensor *out, bool *found)
{
    const Onnx__AttributeProto *a;
    clrun_status s = lookup(im, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR, &a);
    *found = false;
    if (s != CLRUN_OK || a == NULL)
        return s;
    if (a->t == NULL)
        return clrun__invalid(im, "attribute '%s' holds no tensor", name);
    char why[512];
    s = clrun__otensor_decode(a->t, im->dir, out, why, sizeof why);
    if (s != CLRUN_OK)
        return clrun__imp_fail(im, s, "attribute '%s': the tensor %s", name, why);
    *found = true;
    return CLRUN_OK;
}
