/* Type rules of the row ops (softmax, logsoftmax, layernorm, batchnorm, instancenorm), the
 * reductions and argmax/argmin, with ONNX's semantics (opset 13 and later for the axes), and
 * the cross-entropy of a softmax with its gradient (softmax_xent, softmax_xent_grad). */
#include <inttypes.h>

#include "graph/op.h"
#include "graph/op_families.h"
#include "graph/op_geometry.h"
#include "graph/types.h"

/* The common opening of a type rule: input count, attributes, f32 inputs. */
static clrun_status opening(const clrun__op_call *call, int min, int max,
                            const clrun__attr_spec *specs, int spec_count,
                            const clrun__infer_error *err)
{
    clrun_status s = clrun__check_input_count(call, min, max, err);
    if (s == CLRUN_OK)
        s = clrun__check_attrs(call, specs, spec_count, err);
    for (int i = 0; s == CLRUN_OK && i < call->input_count; i++)
        s = clrun__check_dtype(call, i, false, err);
    if (s == CLRUN_OK && call->inputs[0].rank < 1)
        return clrun__refuse(err, "needs at least 1 dimension, got a scalar");
    return s;
}

static clrun_status flag(const clrun__op_call *call, const char *name, int64_t fallback,
                         const clrun__infer_error *err)
{
    int64_t v = clrun__attr_int_or(call, name, fallback);
    if (v != 0 && v != 1)
        return clrun__refuse(err, "attribute '%s' must be 0 or 1, not %" PRId64, name, v);
    return CLRUN_OK;
}

clrun_status clrun__op_axis(const clrun__op_call *call, int64_t fallback, int *axis,
                            const clrun__infer_error *err)
{
    int rank = call->inputs[0].rank;
    int64_t a = clrun__attr_int_or(call, "axis", fallback);
    int64_t n = a < 0 ? a + rank : a;
    if (n < 0 || n >= rank) {
        char s[CLRUN__TYPE_TEXT];
        return clrun__refuse(err, "axis %" PRId64 " is out of range for %s", a,
                             clrun__type_format(&call->inputs[0], s, sizeof s));
    }
    *axis = (int)n;
    return CLRUN_OK;
}

/* ---- softmax and logsoftmax: over one axis (ONNX opset 13) -------------------------------- */

static const clrun__attr_spec softmax_attrs[] = {
    {"causal", CLRUN__WANT_INT, false},
    {"axis", CLRUN__WANT_INT, false},
};

static clrun_status softmax_infer_as(const char *name, bool causal_ok, const clrun__op_call *call,
                                     clrun_tensor_type *out, char *errbuf, size_t errlen)
{
    const clrun__infer_error err = {name, errbuf, errlen};
    clrun_status s = opening(call, 1, 1, causal_ok ? softmax_attrs : softmax_attrs + 1,
                             causal_ok ? 2 : 1, &err);
    if (s == CLRUN_OK)
        s = flag(call, "causal", 0, &err);
    int axis = 0;
    if (s == CLRUN_OK)
        s = clrun__op_axis(call, -1, &axis, &err);
    if (s != CLRUN_OK)
        return s;
    if (clrun__attr_int_or(call, "causal", 0) && axis != call->inputs[0].rank - 1)
        return clrun__refuse(&err, "causal masks the last axis only, not axis %d", axis);
    out[0] = call->inputs[0];
    return CLRUN_OK;
}

static clrun_status softmax_infer(const clrun__op_call *call, clrun_tensor_type *out, char *err,
                                  size_t errlen)
{
    return softmax_infer_as("softmax", true, call, out, err, errlen);
}

static clrun_status logsoftmax_infer(const clrun__op_call *call, clrun_tensor_type *out,
                                     char *err, size_t errlen)
{
    return softmax_infer_as("logsoftmax", false, call, out, err, errlen);
}

/* ---- softmax_xent, softmax_xent_grad: rows of the last axis, a label per row ------------- */

static const clrun__attr_spec xent_attrs[] = {{"ignore_index", CLRUN__WANT_INT, false}};

/* logits f32 [d0..dk, C] (rank >= 2), labels i32 or i64 [d0..dk], and for the gradient dloss
 * f32 [d0..dk]. */
static clrun_status xent_infer_as(const char *name, int inputs, const clrun__op_call *call,
                                  clrun_tensor_type *out, char *errbuf, size_t errlen)
{
    const clrun__infer_error err = {name, errbuf, errlen};
    clrun_status s = clrun__check_input_count(call, inputs, inputs, &err);
    if (s == CLRUN_OK)
        s = clrun__check_attrs(call, xent_attrs, 1, &err);
    if (s == CLRUN_OK)
        s = clrun__check_dtype(call, 0, false, &err);
    if (s == CLRUN_OK)
        s = clrun__check_dims(call, 1, &err);
    if (s == CLRUN_OK && inputs > 2)
        s = clrun__check_dtype(call, 2, false, &err);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *logits = &call->inputs[0], *labels = &call->inputs[1];
    char sx[CLRUN__TYPE_TEXT], sl[CLRUN__TYPE_TEXT];
    if (logits->rank < 2)
        return clrun__refuse(&err, "logits are %s: expected [..., C], at least 2 dimensions",
                             clrun__type_format(logits, sx, sizeof sx));
    if (labels->dtype != CLRUN_I32 && labels->dtype != CLRUN_I64)
        return clrun__refuse(&err, "labels are %s: expected i32 or i64",
                             clrun__type_format(labels, sl, sizeof sl));
    bool fits = labels->rank == logits->rank - 1;
    for (int d = 0; fits && d < labels->rank; d++)
        fits = labels->shape[d] == logits->shape[d];
    if (!fits)
        return clrun__refuse(&err, "labels %s do not fit logits %s: expected logits' dims but the "
                             "last", clrun__type_format(labels, sl, sizeof sl),
                             clrun__type_format(logits, sx, sizeof sx));
    if (inputs > 2) {
        const clrun_tensor_type *dloss = &call->inputs[2];
        bool same = dloss->rank == labels->rank;
        for (int d = 0; same && d < labels->rank; d++)
            same = dloss->shape[d] == labels->shape[d];
        if (!same)
            return clrun__refuse(&err, "dloss %s does not fit labels %s: expected the same shape",
                                 clrun__type_format(dloss, sx, sizeof sx),
                                 clrun__type_format(labels, sl, sizeof sl));
        out[0] = *logits;
        return CLRUN_OK;
    }
    out[0] = *labels;
    out[0].dtype = CLRUN_F32;
    return CLRUN_OK;
}

static clrun_status softmax_xent_infer(const clrun__op_call *call, clrun_tensor_type *out,
                                       char *err, size_t errlen)
{
    return xent_infer_as("softmax_xent", 2, call, out, err, errlen);
}

static clrun_status softmax_xent_grad_infer(const clrun__op_call *call, clrun_tensor_type *out,
                                            char *err, size_t errlen)
{
    return xent_infer_as("softmax_xent_grad", 3, call, out, err, errlen);
}

/* ---- layernorm: over dims axis..rank-1, gamma and (optional) beta of those dims ----------- */

static const clrun__attr_spec layernorm_attrs[] = {
    {"eps", CLRUN__WANT_FLOAT, false},
    {"axis", CLRUN__WANT_INT, false},
};

static clrun_status eps_attr(const clrun__op_call *call, const clrun__infer_error *err)
{
    double eps = clrun__attr_float_or(call, "eps", 1e-5);
    if (!(eps >= 0))
        return clrun__refuse(err, "attribute 'eps' must be >= 0, not %g", eps);
    return CLRUN_OK;
}

/* A parameter of x's dims [from, rank): 1-D of their product, or exactly those dims. */
static bool fits_dims(const clrun_tensor_type *p, const clrun_tensor_type *x, int from)
{
    uint64_t D = clrun__dims_product(x, from, x->rank);
    if (p->rank == 1 && (uint64_t)p->shape[0] == D)
        return true;
    if (p->rank != x->rank - from)
        return false;
    for (int i = 0; i < p->rank; i++)
        if (p->shape[i] != x->shape[from + i])
            return false;
    return true;
}

static clrun_status layernorm_infer(const clrun__op_call *call, clrun_tensor_type *out,
                                    char *errbuf, size_t errlen)
{
    const clrun__infer_error err = {"layernorm", errbuf, errlen};
    clrun_status s = opening(call, 2, 3, layernorm_attrs, 2, &err);
    int axis = 0;
    if (s == CLRUN_OK)
        s = clrun__op_axis(call, -1, &axis, &err);
    if (s == CLRUN_OK)
        s = eps_attr(call, &err);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *x = &call->inputs[0];
    for (int i = 1; i < call->input_count; i++) {
        const clrun_tensor_type *p = &call->inputs[i];
        if (!fits_dims(p, x, axis)) {
            char sx[CLRUN__TYPE_TEXT], sp[CLRUN__TYPE_TEXT];
            return clrun__refuse(&err, "%s is %s: expected f32[%" PRIu64 "] for x %s",
                                 i == 1 ? "gamma" : "beta", clrun__type_format(p, sp, sizeof sp),
                                 clrun__dims_product(x, axis, x->rank),
                                 clrun__type_format(x, sx, sizeof sx));
        }
    }
    out[0] = *x;
    return CLRUN_OK;
}

/* ---- batchnorm (inference) and instancenorm: per channel (dim 1) of [N, C, ...] ---------- */

static const clrun__attr_spec channel_norm_attrs[] = {{"eps", CLRUN__WANT_FLOAT, false}};

static clrun_status channel_norm_infer_as(const char *name, int inputs, int min_rank,
                                          const clrun__op_call *call, clrun_tensor_type *out,
                                          char *errbuf, size_t errlen)
{
    const clrun__infer_error err = {name, errbuf, errlen};
    clrun_status s = opening(call, inputs, inputs, channel_norm_attrs, 1, &err);
    if (s == CLRUN_OK)
        s = eps_attr(call, &err);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *x = &call->inputs[0];
    char sx[CLRUN__TYPE_TEXT], sp[CLRUN__TYPE_TEXT];
    if (x->rank < min_rank)
        return clrun__refuse(&err, "x is %s: expected [N, C%s]", clrun__type_format(x, sx, sizeof sx),
                             min_rank > 2 ? ", D1, ..." : ", ...");
    for (int i = 1; i < inputs; i++) {
        const clrun_tensor_type *p = &call->inputs[i];
        if (p->rank != 1 || p->shape[0] != x->shape[1])
            return clrun__refuse(&err, "input %d is %s: expected f32[%" PRId64 "] (C) for x %s", i,
                                 clrun__type_format(p, sp, sizeof sp), x->shape[1],
                                 clrun__type_format(x, sx, sizeof sx));
    }
    out[0] = *x;
    return CLRUN_OK;
}

/* x, scale, bias, mean, var. */
static clrun_status batchnorm_infer(const clrun__op_call *call, clrun_tensor_type *out, char *err,
                                    size_t errlen)
{
    return channel_norm_infer_as("batchnorm", 5, 2, call, out, err, errlen);
}

/* x, scale, bias. */
static clrun_status instancenorm_infer(const clrun__op_call *call, clrun_tensor_type *out,
                                       char *err, size_t errlen)
{
    return channel_norm_infer_as("instancenorm", 3, 3, call, out, err, errlen);
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

/* The output of x with the `reduced` dims removed, or kept as 1 with keepdims. */
static void reduced_type(const clrun_tensor_type *x, const bool *reduced, bool keepdims,
                         clrun_dtype dtype, clrun_tensor_type *out)
{
    out->dtype = dtype;
    out->rank = 0;
    for (int d = 0; d < x->rank; d++)
        if (!reduced[d] || keepdims)
            out->shape[out->rank++] = reduced[d] ? 1 : x->shape[d];
}

static clrun_status reduce_infer_as(const char *name, const clrun__op_call *call,
                                    clrun_tensor_type *out, char *errbuf, size_t errlen)
{
    const clrun__infer_error err = {name, errbuf, errlen};
    clrun_status s = clrun__check_input_count(call, 1, 1, &err);
    if (s == CLRUN_OK)
        s = clrun__check_attrs(call, reduce_attrs, 2, &err);
    if (s == CLRUN_OK && call->inputs[0].dtype != CLRUN_F64) /* f64 where the device has fp64 */
        s = clrun__check_dtype(call, 0, false, &err);
    bool reduced[CLRUN_MAX_DIMS];
    if (s == CLRUN_OK)
        s = clrun__reduced_axes(call, reduced, &err);
    if (s == CLRUN_OK)
        s = flag(call, "keepdims", 0, &err);
    if (s != CLRUN_OK)
        return s;
    reduced_type(&call->inputs[0], reduced, clrun__attr_int_or(call, "keepdims", 0) != 0,
                 call->inputs[0].dtype, out);
    return CLRUN_OK;
}

/* Reduction codes: CLRUN__REDUCE_* in lib/ops/ops_internal.h, REDUCE_* in kernels/reduce.cl. */
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
REDUCE_OP(reduce_min, 3)
REDUCE_OP(reduce_prod, 4)
REDUCE_OP(reduce_l2, 5)
REDUCE_OP(reduce_sum_square, 6)

/* ---- argmax, argmin: i64 indices along one axis ------------------------------------------ */

static const clrun__attr_spec arg_attrs[] = {
    {"axis", CLRUN__WANT_INT, false},
    {"keepdims", CLRUN__WANT_INT, false},
    {"select_last_index", CLRUN__WANT_INT, false},
};

static clrun_status arg_infer_as(const char *name, const clrun__op_call *call,
                                 clrun_tensor_type *out, char *errbuf, size_t errlen)
{
    const clrun__infer_error err = {name, errbuf, errlen};
    clrun_status s = opening(call, 1, 1, arg_attrs, 3, &err);
    int axis = 0;
    if (s == CLRUN_OK)
        s = clrun__op_axis(call, 0, &axis, &err);
    if (s == CLRUN_OK)
        s = flag(call, "keepdims", 1, &err);
    if (s == CLRUN_OK)
        s = flag(call, "select_last_index", 0, &err);
    if (s != CLRUN_OK)
        return s;
    bool reduced[CLRUN_MAX_DIMS] = {false};
    reduced[axis] = true;
    reduced_type(&call->inputs[0], reduced, clrun__attr_int_or(call, "keepdims", 1) != 0,
                 CLRUN_I64, out);
    return CLRUN_OK;
}

static clrun_status argmax_infer(const clrun__op_call *call, clrun_tensor_type *out, char *err,
                                 size_t errlen)
{
    return arg_infer_as("argmax", call, out, err, errlen);
}

static clrun_status argmin_infer(const clrun__op_call *call, clrun_tensor_type *out, char *err,
                                 size_t errlen)
{
    return arg_infer_as("argmin", call, out, err, errlen);
}

static const clrun__op op_softmax = {.name = "softmax", .min_inputs = 1, .max_inputs = 1,
                                     .outputs = 1, .infer = softmax_infer};
static const clrun__op op_logsoftmax = {.name = "logsoftmax", .min_inputs = 1, .max_inputs = 1,
                                        .outputs = 1, .code = 1, .infer = logsoftmax_infer};
static const clrun__op op_softmax_xent = {.name = "softmax_xent", .min_inputs = 2,
                                          .max_inputs = 2, .outputs = 1,
                                          .infer = softmax_xent_infer};
/* The gradient may be written over the logits (kernels/norm.cl: each row's work-items read
 * the row's logits, for its maximum and its sum, before any of them writes; then each element
 * is read before it is written, by the work-item that writes it), not over the labels or dloss. */
static const clrun__op op_softmax_xent_grad = {.name = "softmax_xent_grad", .min_inputs = 3,
                                               .max_inputs = 3, .outputs = 1, .code = 1,
                                               .alias_safe = true, .alias_until = 1,
                                               .infer = softmax_xent_grad_infer};
static const clrun__op op_layernorm = {.name = "layernorm", .min_inputs = 2, .max_inputs = 3,
                                       .outputs = 1, .infer = layernorm_infer};
static const clrun__op op_batchnorm = {.name = "batchnorm", .min_inputs = 5, .max_inputs = 5,
                                       .outputs = 1, .alias_safe = true, .infer = batchnorm_infer};
static const clrun__op op_instancenorm = {.name = "instancenorm", .min_inputs = 3,
                                          .max_inputs = 3, .outputs = 1,
                                          .infer = instancenorm_infer};
static const clrun__op op_argmax = {.name = "argmax", .min_inputs = 1, .max_inputs = 1,
                                    .outputs = 1, .code = 0, .infer = argmax_infer};
static const clrun__op op_argmin = {.name = "argmin", .min_inputs = 1, .max_inputs = 1,
                                    .outputs = 1, .code = 1, .infer = argmin_infer};

const clrun__op *const clrun__ops_norm[] = {
    &op_softmax, &op_logsoftmax, &op_softmax_xent, &op_softmax_xent_grad, &op_layernorm,
    &op_batchnorm, &op_instancenorm, &op_reduce_sum, &op_reduce_mean, &op_reduce_max,
    &op_reduce_min, &op_reduce_prod, &op_reduce_l2, &op_reduce_sum_square, &op_argmax,
    &op_argmin, NULL,
};
