/* Elementwise ops (kernels/elementwise.cl): unary functions, scale, copy, and binary ops with
 * numpy broadcasting. Inputs of identical shapes take a kernel that reads both at the output's
 * index; otherwise the shapes are merged into as few dimensions as possible and one kernel per
 * dtype computes each input's offset from the output's index. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/cl.h"
#include "ops/ops_internal.h"

typedef enum ew_kind {
    EW_UNARY,  /* y = f(x) */
    EW_SCALE,  /* y = alpha * x + beta */
    EW_COPY,   /* y = x, bit for bit */
    EW_BINARY, /* y = a (op) b, broadcast */
} ew_kind;

typedef struct ew_op {
    const char *name;
    ew_kind kind;
    bool i32;  /* also on i32 */
    int code;  /* binary: op code of the broadcasting kernels (OP_* in elementwise.cl) */
} ew_op;

static const clrun__attr_spec scale_attrs[] = {
    {"alpha", CLRUN__WANT_FLOAT, false},
    {"beta", CLRUN__WANT_FLOAT, false},
};

/* ---- infer ------------------------------------------------------------------------------- */

static clrun_status ew_infer(const ew_op *op, const clrun__op_call *call, clrun_tensor_type *out,
                             char *errbuf, size_t errlen)
{
    const clrun__infer_error err = {op->name, errbuf, errlen};
    int inputs = op->kind == EW_BINARY ? 2 : 1;
    clrun_status s = clrun__check_input_count(call, inputs, inputs, &err);
    if (s == CLRUN_OK)
        s = op->kind == EW_SCALE ? clrun__check_attrs(call, scale_attrs, 2, &err)
                                 : clrun__check_attrs(call, NULL, 0, &err);
    for (int i = 0; s == CLRUN_OK && i < inputs; i++)
        s = clrun__check_dtype(call, i, op->i32, &err);
    if (s != CLRUN_OK)
        return s;
    if (op->kind != EW_BINARY) {
        out[0] = call->inputs[0];
        return CLRUN_OK;
    }
    const clrun_tensor_type *a = &call->inputs[0], *b = &call->inputs[1];
    if (a->dtype != b->dtype) {
        char sa[CLRUN__TYPE_STR], sb[CLRUN__TYPE_STR];
        return clrun__refuse(&err, "dtypes differ: a is %s, b is %s", clrun__type_str(a, sa),
                             clrun__type_str(b, sb));
    }
    return clrun__broadcast_shape(a, b, &out[0], &err);
}

/* ---- prepare ----------------------------------------------------------------------------- */

static bool same_shape(const clrun_tensor_type *a, const clrun_tensor_type *b)
{
    if (a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (a->shape[i] != b->shape[i])
            return false;
    return true;
}

/* The shape table of a broadcast: dimensions of 1 dropped, and neighbours merged where both
 * inputs walk them as one (stride of the outer = stride of the inner x its size). */
static size_t broadcast_table(const clrun__op_call *call, uint64_t *meta)
{
    const clrun_tensor_type *out = &call->outputs[0];
    uint64_t sa[CLRUN_MAX_DIMS], sb[CLRUN_MAX_DIMS];
    clrun__broadcast_strides(&call->inputs[0], out, sa);
    clrun__broadcast_strides(&call->inputs[1], out, sb);
    uint64_t dims[CLRUN_MAX_DIMS], ma[CLRUN_MAX_DIMS], mb[CLRUN_MAX_DIMS];
    int rank = 0;
    for (int d = 0; d < out->rank; d++) {
        uint64_t n = (uint64_t)out->shape[d];
        if (n == 1)
            continue;
        if (rank > 0 && ma[rank - 1] == sa[d] * n && mb[rank - 1] == sb[d] * n) {
            dims[rank - 1] *= n;
            ma[rank - 1] = sa[d];
            mb[rank - 1] = sb[d];
            continue;
        }
        dims[rank] = n;
        ma[rank] = sa[d];
        mb[rank] = sb[d];
        rank++;
    }
    if (rank == 0) {
        dims[0] = 1;
        ma[0] = mb[0] = 0;
        rank = 1;
    }
    meta[0] = (uint64_t)rank;
    for (int d = 0; d < rank; d++) {
        meta[1 + d] = dims[d];
        meta[1 + rank + d] = ma[d];
        meta[1 + 2 * rank + d] = mb[d];
    }
    return 1 + 3 * (size_t)rank;
}

static const char *dtype_suffix(clrun_dtype dtype) { return dtype == CLRUN_I32 ? "i32" : "f32"; }

static void kernel_name(const ew_op *op, const clrun__op_call *call, bool broadcast, char *name,
                        size_t size)
{
    const char *suffix = dtype_suffix(call->inputs[0].dtype);
    if (op->kind == EW_COPY)
        snprintf(name, size, "clrun_copy_u32");
    else if (broadcast)
        snprintf(name, size, "clrun_broadcast_%s", suffix);
    else
        snprintf(name, size, "clrun_%s_%s", op->name, suffix);
}

/* The arguments after the buffers, which stay the same for every run. */
static clrun_status set_constant_args(clrun_context *ctx, const ew_op *op,
                                      const clrun__op_call *call, clrun__kernel_state *st,
                                      cl_ulong n)
{
    cl_uint next = st->inputs + 1;
    clrun_status s = clrun__arg(ctx, st->kernel, next++, sizeof n, &n);
    if (s == CLRUN_OK && op->kind == EW_SCALE) {
        cl_float alpha = (cl_float)clrun__attr_float_or(call, "alpha", 1.0);
        cl_float beta = (cl_float)clrun__attr_float_or(call, "beta", 0.0);
        s = clrun__arg(ctx, st->kernel, next++, sizeof alpha, &alpha);
        if (s == CLRUN_OK)
            s = clrun__arg(ctx, st->kernel, next++, sizeof beta, &beta);
    }
    if (s == CLRUN_OK && st->table) {
        cl_int code = op->code;
        s = clrun__arg(ctx, st->kernel, next++, sizeof st->table, &st->table);
        if (s == CLRUN_OK)
            s = clrun__arg(ctx, st->kernel, next++, sizeof code, &code);
    }
    return s;
}

/* The node's state is a clrun__kernel_state: the broadcasting shape table (or none), one
 * dimension over the elements rounded up to the work-group size. */
static clrun_status ew_prepare(const ew_op *op, clrun_context *ctx, const clrun__op_call *call,
                               void **state)
{
    *state = NULL;
    clrun__kernel_state *st = calloc(1, sizeof *st);
    if (st == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "%s: node state", op->name);
    st->inputs = op->kind == EW_BINARY ? 2 : 1;
    st->dims = 1;
    st->what = "elementwise";
    bool broadcast = op->kind == EW_BINARY && !(same_shape(&call->inputs[0], &call->outputs[0]) &&
                                                same_shape(&call->inputs[1], &call->outputs[0]));
    char name[64];
    kernel_name(op, call, broadcast, name, sizeof name);
    uint64_t n = clrun__elements(&call->outputs[0]);
    clrun_status s = clrun__kernel(ctx, name, &st->kernel);
    if (s == CLRUN_OK && broadcast) {
        uint64_t meta[1 + 3 * CLRUN_MAX_DIMS];
        size_t count = broadcast_table(call, meta);
        s = clrun__table_buffer(ctx, meta, count * sizeof meta[0], &st->table);
    }
    if (s == CLRUN_OK)
        s = clrun__local_size(ctx, st->kernel, 256, &st->local[0]);
    if (s == CLRUN_OK)
        s = set_constant_args(ctx, op, call, st, n);
    if (s == CLRUN_OK)
        st->global[0] = clrun__round_up((size_t)n, st->local[0]);
    return clrun__kernel_state_done(st, s, state);
}

/* ---- the table --------------------------------------------------------------------------- */

/* One table entry per op: the three entry points that know which op they serve. */
#define EW_OP(ID, NAME, KIND, I32, CODE)                                                           \
    static const ew_op desc_##ID = {NAME, KIND, I32, CODE};                                        \
    static clrun_status infer_##ID(const clrun__op_call *call, clrun_tensor_type *out, char *err,  \
                                   size_t errlen)                                                  \
    {                                                                                              \
        return ew_infer(&desc_##ID, call, out, err, errlen);                                       \
    }                                                                                              \
    static clrun_status prepare_##ID(clrun_context *ctx, const clrun__op_call *call, void **state) \
    {                                                                                              \
        return ew_prepare(&desc_##ID, ctx, call, state);                                           \
    }                                                                                              \
    static const clrun__op op_##ID = {NAME,         KIND == EW_BINARY ? 2 : 1,                     \
                                      KIND == EW_BINARY ? 2 : 1,                                   \
                                      1,            true,                                          \
                                      infer_##ID,   prepare_##ID,                                  \
                                      clrun__kernel_state_op_enqueue,                              \
                                      clrun__kernel_state_release};

EW_OP(neg, "neg", EW_UNARY, true, 0)
EW_OP(abs, "abs", EW_UNARY, true, 0)
EW_OP(relu, "relu", EW_UNARY, true, 0)
EW_OP(gelu, "gelu", EW_UNARY, false, 0)
EW_OP(gelu_erf, "gelu_erf", EW_UNARY, false, 0)
EW_OP(sigmoid, "sigmoid", EW_UNARY, false, 0)
EW_OP(tanh, "tanh", EW_UNARY, false, 0)
EW_OP(exp, "exp", EW_UNARY, false, 0)
EW_OP(log, "log", EW_UNARY, false, 0)
EW_OP(sqrt, "sqrt", EW_UNARY, false, 0)
EW_OP(rsqrt, "rsqrt", EW_UNARY, false, 0)
EW_OP(copy, "copy", EW_COPY, true, 0)
EW_OP(scale, "scale", EW_SCALE, false, 0)
/* Codes: OP_ADD.. in kernels/elementwise.cl. */
EW_OP(add, "add", EW_BINARY, true, 0)
EW_OP(sub, "sub", EW_BINARY, true, 1)
EW_OP(mul, "mul", EW_BINARY, true, 2)
EW_OP(div, "div", EW_BINARY, false, 3)
EW_OP(maximum, "maximum", EW_BINARY, true, 4)
EW_OP(minimum, "minimum", EW_BINARY, true, 5)

const clrun__op *const clrun__ops_elementwise[] = {
    &op_neg,  &op_abs,  &op_relu,  &op_gelu,  &op_gelu_erf, &op_sigmoid, &op_tanh,
    &op_exp,  &op_log,  &op_sqrt,  &op_rsqrt, &op_copy,     &op_scale,   &op_add,
    &op_sub,  &op_mul,  &op_div,   &op_maximum, &op_minimum, NULL,
};
