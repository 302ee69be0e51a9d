/* Row-wise ops (kernels/norm.cl): softmax, layernorm, and the reductions reduce_sum,
 * reduce_mean, reduce_max (which global_avgpool in ops_conv.c shares). Each launches one
 * work-group per row or output; the group size is a power of two no larger than the row needs. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "device/cl.h"
#include "ops/ops_internal.h"

/* Work-group size limit the kernels' local arrays are sized for (MAX_GROUP in norm.cl). */
#define MAX_GROUP 256

/* Reduction codes of clrun_reduce_f32 (REDUCE_* in norm.cl). */
enum { REDUCE_SUM = 0, REDUCE_MEAN = 1, REDUCE_MAX = 2 };

/* A node's state with `name`'s kernel, one dimension over `rows` rows of `length` elements (a
 * work-group per row); reductions add their shape table. */
static clrun_status row_begin(clrun_context *ctx, const char *name, int inputs, uint64_t rows,
                              uint64_t length, clrun__kernel_state **out)
{
    *out = NULL;
    clrun__kernel_state *st = calloc(1, sizeof *st);
    if (st == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "%s: node state", name);
    st->inputs = (cl_uint)inputs;
    st->dims = 1;
    st->what = "row op";
    clrun_status s = clrun__kernel(ctx, name, &st->kernel);
    if (s == CLRUN_OK)
        s = clrun__local_size(ctx, st->kernel, length < MAX_GROUP ? (size_t)length : MAX_GROUP,
                              &st->local[0]);
    if (s != CLRUN_OK) {
        clrun__kernel_state_release(st);
        return s;
    }
    st->global[0] = (size_t)rows * st->local[0];
    *out = st;
    return CLRUN_OK;
}

/* Sets the arguments after the buffers, in order, from (size, value) pairs. */
static clrun_status row_args(clrun_context *ctx, clrun__kernel_state *st, int count, ...)
{
    va_list ap;
    va_start(ap, count);
    clrun_status s = CLRUN_OK;
    for (int i = 0; i < count && s == CLRUN_OK; i++) {
        size_t size = va_arg(ap, size_t);
        const void *value = va_arg(ap, const void *);
        s = clrun__arg(ctx, st->kernel, st->inputs + 1 + (cl_uint)i, size, value);
    }
    va_end(ap);
    return s;
}

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

static clrun_status softmax_prepare(clrun_context *ctx, const clrun__op_call *call, void **state)
{
    const clrun_tensor_type *x = &call->inputs[0];
    cl_ulong N = (cl_ulong)x->shape[x->rank - 1];
    cl_ulong M = x->rank >= 2 ? (cl_ulong)x->shape[x->rank - 2] : 1;
    cl_int causal = (cl_int)clrun__attr_int_or(call, "causal", 0);
    clrun__kernel_state *st;
    clrun_status s = row_begin(ctx, "clrun_softmax_f32", 1, clrun__elements(x) / N, N, &st);
    if (s != CLRUN_OK)
        return s;
    s = row_args(ctx, st, 3, sizeof N, &N, sizeof M, &M, sizeof causal, &causal);
    return clrun__kernel_state_done(st, s, state);
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
            char sx[CLRUN__TYPE_STR], sp[CLRUN__TYPE_STR];
            return clrun__refuse(&err, "%s is %s: expected f32[%" PRId64 "] for x %s",
                                 i == 1 ? "gamma" : "beta", clrun__type_str(p, sp), D,
                                 clrun__type_str(x, sx));
        }
    }
    double eps = clrun__attr_float_or(call, "eps", 1e-5);
    if (!(eps >= 0))
        return clrun__refuse(&err, "attribute 'eps' must be >= 0, not %g", eps);
    out[0] = *x;
    return CLRUN_OK;
}

static clrun_status layernorm_prepare(clrun_context *ctx, const clrun__op_call *call, void **state)
{
    const clrun_tensor_type *x = &call->inputs[0];
    cl_ulong D = (cl_ulong)x->shape[x->rank - 1];
    cl_float eps = (cl_float)clrun__attr_float_or(call, "eps", 1e-5);
    clrun__kernel_state *st;
    clrun_status s = row_begin(ctx, "clrun_layernorm_f32", 3, clrun__elements(x) / D, D, &st);
    if (s != CLRUN_OK)
        return s;
    s = row_args(ctx, st, 2, sizeof D, &D, sizeof eps, &eps);
    return clrun__kernel_state_done(st, s, state);
}

/* ---- reductions -------------------------------------------------------------------------- */

static const clrun__attr_spec reduce_attrs[] = {
    {"axes", CLRUN__WANT_INTS, false},
    {"keepdims", CLRUN__WANT_INT, false},
};

/* The reduced axes of the call as a mask (no axes, or an empty list: all of them); refuses axes out of range or given twice. */
static clrun_status reduced_axes(const clrun__op_call *call, bool *reduced,
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
            char s[CLRUN__TYPE_STR];
            return clrun__refuse(err, "axis %" PRId64 " is out of range for %s", axes[i],
                                 clrun__type_str(&call->inputs[0], s));
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
        s = reduced_axes(call, reduced, &err);
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

/* Appends the dims of x with reduced[d] == which, merging neighbours that are contiguous, to
 * dims/strides; returns how many. */
static int box(const clrun_tensor_type *x, const bool *reduced, bool which, uint64_t *dims,
               uint64_t *strides)
{
    uint64_t stride[CLRUN_MAX_DIMS], s = 1;
    for (int d = x->rank - 1; d >= 0; d--) {
        stride[d] = s;
        s *= (uint64_t)x->shape[d];
    }
    int n = 0;
    for (int d = 0; d < x->rank; d++) {
        if (reduced[d] != which || x->shape[d] == 1)
            continue;
        if (n > 0 && strides[n - 1] == stride[d] * (uint64_t)x->shape[d]) {
            dims[n - 1] *= (uint64_t)x->shape[d];
            strides[n - 1] = stride[d];
            continue;
        }
        dims[n] = (uint64_t)x->shape[d];
        strides[n] = stride[d];
        n++;
    }
    return n;
}

clrun_status clrun__reduce_prepare(clrun_context *ctx, const clrun_tensor_type *x,
                                   const bool *reduced, int code, void **state)
{
    *state = NULL;
    uint64_t kd[CLRUN_MAX_DIMS], ks[CLRUN_MAX_DIMS], rd[CLRUN_MAX_DIMS], rs[CLRUN_MAX_DIMS];
    int kept = box(x, reduced, false, kd, ks), red = box(x, reduced, true, rd, rs);
    uint64_t count = 1, outputs = 1;
    for (int i = 0; i < red; i++)
        count *= rd[i];
    for (int i = 0; i < kept; i++)
        outputs *= kd[i];
    uint64_t meta[3 + 4 * CLRUN_MAX_DIMS];
    size_t n = 0;
    meta[n++] = (uint64_t)kept;
    meta[n++] = (uint64_t)red;
    meta[n++] = count;
    for (int i = 0; i < kept; i++) meta[n++] = kd[i];
    for (int i = 0; i < kept; i++) meta[n++] = ks[i];
    for (int i = 0; i < red; i++) meta[n++] = rd[i];
    for (int i = 0; i < red; i++) meta[n++] = rs[i];
    clrun__kernel_state *st;
    clrun_status s = row_begin(ctx, "clrun_reduce_f32", 1, outputs, count, &st);
    if (s != CLRUN_OK)
        return s;
    s = clrun__table_buffer(ctx, meta, n * sizeof meta[0], &st->table);
    cl_int op = code;
    if (s == CLRUN_OK)
        s = row_args(ctx, st, 2, sizeof st->table, &st->table, sizeof op, &op);
    return clrun__kernel_state_done(st, s, state);
}

clrun_status clrun__reduce_enqueue(clrun_context *ctx, void *state, const clrun__op_call *call,
                                   const cl_mem *inputs, const cl_mem *outputs, cl_uint wait_count,
                                   const cl_event *wait_list, cl_event *done)
{
    return clrun__kernel_state_op_enqueue(ctx, state, call, inputs, outputs, wait_count, wait_list,
                                          done);
}

void clrun__reduce_release(void *state) { clrun__kernel_state_release(state); }

static clrun_status reduce_prepare_as(int code, clrun_context *ctx, const clrun__op_call *call,
                                      void **state)
{
    bool reduced[CLRUN_MAX_DIMS];
    const clrun__infer_error quiet = {"reduce", NULL, 0};
    if (reduced_axes(call, reduced, &quiet) != CLRUN_OK)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_GRAPH, "reduce: prepare on axes infer refuses");
    return clrun__reduce_prepare(ctx, &call->inputs[0], reduced, code, state);
}

#define REDUCE_OP(ID, CODE)                                                                        \
    static clrun_status ID##_infer(const clrun__op_call *call, clrun_tensor_type *out, char *err,  \
                                   size_t errlen)                                                  \
    {                                                                                              \
        return reduce_infer_as(#ID, call, out, err, errlen);                                       \
    }                                                                                              \
    static clrun_status ID##_prepare(clrun_context *ctx, const clrun__op_call *call, void **state) \
    {                                                                                              \
        return reduce_prepare_as(CODE, ctx, call, state);                                          \
    }                                                                                              \
    static const clrun__op op_##ID = {#ID,         1,           1,          1,          false,     \
                                      ID##_infer,  ID##_prepare,                                   \
                                      clrun__kernel_state_op_enqueue,                              \
                                      clrun__kernel_state_release};

REDUCE_OP(reduce_sum, REDUCE_SUM)
REDUCE_OP(reduce_mean, REDUCE_MEAN)
REDUCE_OP(reduce_max, REDUCE_MAX)

static const clrun__op op_softmax = {"softmax", 1, 1, 1, false, softmax_infer, softmax_prepare,
                                     clrun__kernel_state_op_enqueue, clrun__kernel_state_release};
static const clrun__op op_layernorm = {"layernorm", 3, 3, 1, false, layernorm_infer,
                                       layernorm_prepare, clrun__kernel_state_op_enqueue,
                                       clrun__kernel_state_release};

const clrun__op *const clrun__ops_norm[] = {
    &op_softmax, &op_layernorm, &op_reduce_sum, &op_reduce_mean, &op_reduce_max, NULL,
};
