/* Type rules of the row ops (softmax, layernorm) and the reductions. */
#include <inttypes.h>

#include "graph/op.h"
#include "graph/op_families.h"
#include "graph/op_geometry.h"
#include "graph/types.h"

/* ---- softmax ----------------------------------------------------------------------------- */

static const clrun__attr_spec softmax_attrs[] = {{"causal", CLRUN__WANT_INT, false}};

static clrun_status softmax_infer(const clrun__op_call *call, clrun_tensor_type *out, char *errbuf,
                                  size_t errlen)
{
    const clrun__infer_error err = {"softmax", errbuf, errlen};
    clrun_status s = clrun__check_input_count(call, 1, 1, &err);
    if (s == CLRUN_OK)
        s = clrun__check_attrs(call, softmax_attrs, 1, &err);
    if (s == CLRUN_OK)
        s = clrun__check_dtype(call, 0, false, &err);
    if (s != CLRUN_OK)
        return s;
    int64_t causal = clrun__attr_int_or(call, "causal", 0);
    if (causal != 0 && causal != 1)
        return clrun__refuse(&err, "attribute 'causal' must be 0 or 1, not %" PRId64, causal);
    if (call->inputs[0].rank < 1)
        return clrun__refuse(&err, "needs at least 1 dimension, got a scalar");
    out[0] = call->inputs[0];
    return CLRUN_OK;
}

/* ---- layernorm --------------------------------------------------------------------------- */

static const clrun__attr_spec layernorm_attrs[] = {{"eps", CLRUN__WANT_FLOAT, false}};

static clrun_status layernorm_infer(const clrun__op_call *call, clrun_tensor_type *out,
                                    char *errbuf, size_t errlen)
{
    const clrun__infer_error err = {"layernorm", errbuf, errlen};
    clrun_status s = clrun__check_input_count(call, 3, 3, &err);
    if (s == CLRUN_OK)
        s = clrun__check_attrs(call, layernorm_attrs, 1, &err);
    for (int i = 0; s == CLRUN_OK && i < 3; i++)
        s = clrun__check_dtype(call, i, false, &err);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *x = &call->inputs[0];
    if (x->rank < 1)
        return clrun__refuse(&err, "needs at least 1 dimension, got a scalar");
    int64_t D = x->shape[x->rank - 1];
    for (int i = 1; i < 3; i++) {
        const clrun_tensor_type *p = &call->inputs[i];
        if (p->rank != 1 || p->shape[0] != D) {
            char sx[CLRUN__TYPE_TEXT], sp[CLRUN__TYPE_TEXT];
            return clrun__refuse(&err, "%s is %s: expected f32[%" PRId64 "] for x %s",
                                 i == 1 ? "gamma" : "beta", clrun__type_format(p, sp, sizeof sp), D,
                                 clrun__type_format(x, sx, sizeof sx));
        }
    }
    double eps = clrun__attr_float_or(call, "eps", 1e-5);
    if (!(eps >= 0))
        return clrun__refuse(&err, "attribute 'eps' must be >= 0, not %g", eps);
    out[0] = *x;
    return CLRUN_OK;
}

/* ---- reductions -------------------------------------------------------------------------- */

static const clrun__attr_spec reduce_attrs[] = {
    {"axes", CLRUN__WANT_INTS, false},
    {"keepdims", CLRUN__WANT_INT, false},
};

clrun_status clrun__reduced_axes(const clrun__op_call *call, bool *reduced,
                                 const clrun__infer_error *err)
{
    int rank = call->inputs[0].rank;
    int64_t axes[CLRUN_MAX_ATTR_INTS];
    int count = clrun__attr_list(call, "axes", axes, CLRUN_MAX_ATTR_INTS);
    for (int d = 0; d < rank; d++)
        reduced[d] = count == 0;
    for (int i = 0; i < count; i++) {
        int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
        if (a < 0 || a >= rank) {
            char s[CLRUN__TYPE_TEXT];
            return clrun__refuse(err, "axis %" PRId64 " is out of range for %s", axes[i],
                                 clrun__type_format(&call->inputs[0], s, sizeof s));
        }
        if (reduced[a])
            return clrun__refuse(err, "axis %" PRId64 " given twice", axes[i]);
        reduced[a] = true;
    }
    return CLRUN_OK;
}

static clrun_status reduce_infer_as(const char *name, const clrun__op_call *call,
                                    clrun_tensor_type *out, char *errbuf, size_t errlen)
{
    const clrun__infer_error err = {name, errbuf, errlen};
    clrun_status s = clrun__check_input_count(call, 1, 1, &err);
    if (s == CLRUN_OK)
        s = clrun__check_attrs(call, reduce_attrs, 2, &err);
    if (s == CLRUN_OK)
        s = clrun__check_dtype(call, 0, false, &err);
    bool reduced[CLRUN_MAX_DIMS];
    if (s == CLRUN_OK)
        s = clrun__reduced_axes(call, reduced, &err);
    if (s != CLRUN_OK)
        return s;
    int64_t keepdims = clrun__attr_int_or(call, "keepdims", 0);
    if (keepdims != 0 && keepdims != 1)
        return clrun__refuse(&err, "attribute 'keepdims' must be 0 or 1, not %" PRId64, keepdims);
    const clrun_tensor_type *x = &call->inputs[0];
    out[0].dtype = x->dtype;
    out[0].rank = 0;
    for (int d = 0; d < x->rank; d++)
        if (!reduced[d] || keepdims)
            out[0].shape[out[0].rank++] = reduced[d] ? 1 : x->shape[d];
    return CLRUN_OK;
}

/* Reduction codes: REDUCE_* in kernels/norm.cl. */
#define REDUCE_OP(ID, CODE)                                                                        \
    static clrun_status ID##_infer(const clrun__op_call *call, clrun_tensor_type *out, char *err,  \
                                   size_t errlen)                                                  \
    {                                                                                              \
        return reduce_infer_as(#ID, call, out, err, errlen);                                       \
    }                                                                                              \
    static const clrun__op op_##ID = {.name = #ID, .min_inputs = 1, .max_inputs = 1,               \
                                      .outputs = 1, .code = CODE, .infer = ID##_infer};

REDUCE_OP(reduce_sum, 0)
REDUCE_OP(reduce_mean, 1)
REDUCE_OP(reduce_max, 2)

static const clrun__op op_softmax = {.name = "softmax", .min_inputs = 1, .max_inputs = 1,
                                     .outputs = 1, .infer = softmax_infer};
static const clrun__op op_layernorm = {.name = "layernorm", .min_inputs = 3, .max_inputs = 3,
                                       .outputs = 1, .infer = layernorm_infer};

const clrun__op *const clrun__ops_norm[] = {
    &op_softmax, &op_layernorm, &op_reduce_sum, &op_reduce_mean, &op_reduce_max, NULL,
};
