/* The op registry and what every type rule shares: attribute lookups and the schema check,
 * refusal messages, dtype checks and numpy broadcasting. Pure C: no OpenCL. */
#include "graph/op.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/op_families.h"
#include "graph/types.h"

/* ---- registry ---------------------------------------------------------------------------- */

static const clrun__op *const *const families[] = {
    clrun__ops_elementwise, clrun__ops_matmul, clrun__ops_norm, clrun__ops_layout, clrun__ops_conv,
    clrun__ops_index,       clrun__ops_resize,
    clrun__ops_scatter,
    clrun__ops_sample,
    clrun__ops_qlinear,
    clrun__ops_detect,
    clrun__ops_transfer,
    clrun__ops_loop,
};

/* Every family's entries in one flat array, built on first use. No allocation, so that a
 * registry can never come up empty; the bound is far above the ops there are, and
 * tests/test_ops.c checks that the registry holds exactly the ops docs/ops.md documents, so a
 * family that outgrew it could not go unnoticed. */
#define MAX_OPS 512
static const clrun__op *all_ops[MAX_OPS];
static size_t all_count;
static pthread_once_t all_once = PTHREAD_ONCE_INIT;

static void collect_ops(void)
{
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
        for (const clrun__op *const *op = families[f]; *op && all_count < MAX_OPS; op++)
            all_ops[all_count++] = *op;
}

const clrun__op *const *clrun__op_list(size_t *count)
{
    pthread_once(&all_once, collect_ops);
    *count = all_count;
    return all_ops;
}

const clrun__op *clrun__op_find(const char *name)
{
    size_t count;
    const clrun__op *const *ops = clrun__op_list(&count);
    for (size_t i = 0; name && i < count; i++)
        if (strcmp(ops[i]->name, name) == 0)
            return ops[i];
    return NULL;
}

/* ---- attributes -------------------------------------------------------------------------- */

static const clrun_attr *find_attr(const clrun__op_call *call, const char *name)
{
    for (int i = 0; i < call->attr_count; i++)
        if (call->attrs[i].name && strcmp(call->attrs[i].name, name) == 0)
            return &call->attrs[i];
    return NULL;
}

bool clrun__attr_int(const clrun__op_call *call, const char *name, int64_t *out)
{
    const clrun_attr *a = find_attr(call, name);
    if (a == NULL || a->kind != CLRUN_ATTR_INT)
        return false;
    *out = a->i;
    return true;
}

bool clrun__attr_float(const clrun__op_call *call, const char *name, double *out)
{
    const clrun_attr *a = find_attr(call, name);
    if (a == NULL || a->kind != CLRUN_ATTR_FLOAT)
        return false;
    *out = a->f;
    return true;
}

bool clrun__attr_ints(const clrun__op_call *call, const char *name, const int64_t **out, int *count)
{
    const clrun_attr *a = find_attr(call, name);
    if (a == NULL || a->kind != CLRUN_ATTR_INTS)
        return false;
    *out = a->ints;
    *count = a->count;
    return true;
}

int64_t clrun__attr_int_or(const clrun__op_call *call, const char *name, int64_t fallback)
{
    int64_t v;
    return clrun__attr_int(call, name, &v) ? v : fallback;
}

double clrun__attr_float_or(const clrun__op_call *call, const char *name, double fallback)
{
    const clrun_attr *a = find_attr(call, name);
    if (a == NULL)
        return fallback;
    if (a->kind == CLRUN_ATTR_INT)
        return (double)a->i;
    return a->kind == CLRUN_ATTR_FLOAT ? a->f : fallback;
}

int clrun__attr_list(const clrun__op_call *call, const char *name, int64_t *out, int max)
{
    const clrun_attr *a = find_attr(call, name);
    if (a == NULL)
        return 0;
    if (a->kind == CLRUN_ATTR_INT) {
        out[0] = a->i;
        return 1;
    }
    if (a->kind != CLRUN_ATTR_INTS)
        return 0;
    int n = a->count < max ? a->count : max;
    memcpy(out, a->ints, (size_t)n * sizeof *out);
    return n;
}

static const char *kind_name(clrun__attr_want want)
{
    switch (want) {
    case CLRUN__WANT_INT: return "an integer";
    case CLRUN__WANT_FLOAT: return "a number";
    case CLRUN__WANT_INTS: return "a list of integers";
    }
    return "?";
}

static bool kind_fits(clrun_attr_kind kind, clrun__attr_want want)
{
    switch (want) {
    case CLRUN__WANT_INT: return kind == CLRUN_ATTR_INT;
    case CLRUN__WANT_FLOAT: return kind == CLRUN_ATTR_FLOAT || kind == CLRUN_ATTR_INT;
    case CLRUN__WANT_INTS: return kind == CLRUN_ATTR_INTS || kind == CLRUN_ATTR_INT;
    }
    return false;
}

static const clrun__attr_spec *find_spec(const clrun__attr_spec *specs, int count, const char *name)
{
    for (int i = 0; i < count; i++)
        if (strcmp(specs[i].name, name) == 0)
            return &specs[i];
    return NULL;
}

static void list_names(const clrun__attr_spec *specs, int count, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < count && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? ", " : "", specs[i].name);
    if (count == 0)
        snprintf(buf, size, "none");
}

clrun_status clrun__check_attrs(const clrun__op_call *call, const clrun__attr_spec *specs,
                                int count, const clrun__infer_error *err)
{
    for (int i = 0; i < call->attr_count; i++) {
        const clrun_attr *a = &call->attrs[i];
        const clrun__attr_spec *spec = a->name ? find_spec(specs, count, a->name) : NULL;
        if (spec == NULL) {
            char names[256];
            list_names(specs, count, names, sizeof names);
            return clrun__refuse(err, "unknown attribute '%s' (accepted: %s)",
                                 a->name ? a->name : "(null)", names);
        }
        for (int j = 0; j < i; j++)
            if (strcmp(call->attrs[j].name, a->name) == 0)
                return clrun__refuse(err, "attribute '%s' given twice", a->name);
        if (!kind_fits(a->kind, spec->want))
            return clrun__refuse(err, "attribute '%s' must be %s", a->name, kind_name(spec->want));
        if (a->kind == CLRUN_ATTR_INTS && (a->count < 0 || a->count > CLRUN_MAX_ATTR_INTS))
            return clrun__refuse(err, "attribute '%s' has %d values", a->name, a->count);
    }
    for (int i = 0; i < count; i++)
        if (specs[i].required && find_attr(call, specs[i].name) == NULL)
            return clrun__refuse(err, "missing required attribute '%s'", specs[i].name);
    return CLRUN_OK;
}

/* ---- types and refusals ------------------------------------------------------------------ */

clrun_status clrun__refuse(const clrun__infer_error *err, const char *format, ...)
{
    if (err->buf == NULL || err->size == 0)
        return CLRUN_ERROR_INVALID_GRAPH;
    int n = snprintf(err->buf, err->size, "%s: ", err->op);
    if (n >= 0 && (size_t)n < err->size) {
        va_list ap;
        va_start(ap, format);
        vsnprintf(err->buf + n, err->size - (size_t)n, format, ap);
        va_end(ap);
    }
    return CLRUN_ERROR_INVALID_GRAPH;
}

clrun_status clrun__check_input_count(const clrun__op_call *call, int min, int max,
                                      const clrun__infer_error *err)
{
    if (call->input_count >= min && call->input_count <= max)
        return CLRUN_OK;
    if (min == max)
        return clrun__refuse(err, "takes %d input%s, got %d", min, min == 1 ? "" : "s",
                             call->input_count);
    return clrun__refuse(err, "takes %d to %d inputs, got %d", min, max, call->input_count);
}

clrun_status clrun__check_dims(const clrun__op_call *call, int i, const clrun__infer_error *err)
{
    const clrun_tensor_type *t = &call->inputs[i];
    char s[CLRUN__TYPE_TEXT];
    if (t->rank < 0 || t->rank > CLRUN_MAX_DIMS)
        return clrun__refuse(err, "input %d has rank %d (at most %d)", i, t->rank, CLRUN_MAX_DIMS);
    for (int d = 0; d < t->rank; d++)
        if (t->shape[d] <= 0)
            return clrun__refuse(err, "input %d is %s: every dimension must be at least 1", i,
                                 clrun__type_format(t, s, sizeof s));
    return CLRUN_OK;
}

clrun_status clrun__check_dtype(const clrun__op_call *call, int i, bool i32_ok,
                                const clrun__infer_error *err)
{
    clrun_status st = clrun__check_dims(call, i, err);
    if (st != CLRUN_OK)
        return st;
    const clrun_tensor_type *t = &call->inputs[i];
    char s[CLRUN__TYPE_TEXT];
    if (t->dtype == CLRUN_F32 || (i32_ok && t->dtype == CLRUN_I32))
        return CLRUN_OK;
    if (t->dtype == CLRUN_F16)
        return clrun__refuse(err, "input %d is %s: f16 kernels do not exist yet", i,
                             clrun__type_format(t, s, sizeof s));
    return clrun__refuse(err, "input %d is %s: expected f32%s", i, clrun__type_format(t, s, sizeof s),
                         i32_ok ? " or i32" : "");
}

/* ---- broadcasting ------------------------------------------------------------------------ */

clrun_status clrun__broadcast_shape(const clrun_tensor_type *a, const clrun_tensor_type *b,
                                    clrun_tensor_type *out, const clrun__infer_error *err)
{
    int rank = a->rank > b->rank ? a->rank : b->rank;
    out->dtype = a->dtype;
    out->rank = rank;
    for (int i = 0; i < rank; i++) {
        int ia = i - (rank - a->rank), ib = i - (rank - b->rank);
        int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            char sa[CLRUN__TYPE_TEXT], sb[CLRUN__TYPE_TEXT];
            return clrun__refuse(err, "shapes do not broadcast: a is %s, b is %s (dimension %d: "
                                 "%" PRId64 " vs %" PRId64 ")", clrun__type_format(a, sa, sizeof sa),
                                 clrun__type_format(b, sb, sizeof sb), i, da, db);
        }
        out->shape[i] = da == 1 ? db : da;
    }
    return CLRUN_OK;
}

void clrun__broadcast_strides(const clrun_tensor_type *type, const clrun_tensor_type *out,
                              uint64_t *strides)
{
    uint64_t stride = 1;
    for (int i = out->rank - 1; i >= 0; i--) {
        int j = i - (out->rank - type->rank);
        int64_t dim = j >= 0 ? type->shape[j] : 1;
        strides[i] = dim == 1 && out->shape[i] != 1 ? 0 : stride;
        stride *= (uint64_t)dim;
    }
}
