/* Type rules of the elementwise ops: unary functions, scale, copy, and binary ops with numpy
 * broadcasting. Each keeps its input's type, a binary op the broadcast of both. */
#include "graph/op.h"
#include "graph/op_families.h"
#include "graph/types.h"

static const clrun__attr_spec scale_attrs[] = {
    {"alpha", CLRUN__WANT_FLOAT, false},
    {"beta", CLRUN__WANT_FLOAT, false},
};

static clrun_status ew_infer(const char *name, clrun__op_kind kind, bool i32,
                             const clrun__op_call *call, clrun_tensor_type *out, char *errbuf,
                             size_t errlen)
{
    const clrun__infer_error err = {name, errbuf, errlen};
    int inputs = kind == CLRUN__OP_BINARY ? 2 : 1;
    clrun_status s = clrun__check_input_count(call, inputs, inputs, &err);
    if (s == CLRUN_OK)
        s = kind == CLRUN__OP_SCALE ? clrun__check_attrs(call, scale_attrs, 2, &err)
                                    : clrun__check_attrs(call, NULL, 0, &err);
    for (int i = 0; s == CLRUN_OK && i < inputs; i++)
        s = clrun__check_dtype(call, i, i32, &err);
    if (s != CLRUN_OK)
        return s;
    if (kind != CLRUN__OP_BINARY) {
        out[0] = call->inputs[0];
        return CLRUN_OK;
    }
    const clrun_tensor_type *a = &call->inputs[0], *b = &call->inputs[1];
    if (a->dtype != b->dtype) {
        char sa[CLRUN__TYPE_TEXT], sb[CLRUN__TYPE_TEXT];
        return clrun__refuse(&err, "dtypes differ: a is %s, b is %s",
                             clrun__type_format(a, sa, sizeof sa),
                             clrun__type_format(b, sb, sizeof sb));
    }
    return clrun__broadcast_shape(a, b, &out[0], &err);
}

/* One entry per op. CODE is the binary op code of the broadcasting kernels (OP_* in
 * kernels/elementwise.cl). */
#define EW_OP(ID, KIND, I32, CODE)                                                                 \
    static clrun_status infer_##ID(const clrun__op_call *call, clrun_tensor_type *out, char *err,  \
                                   size_t errlen)                                                  \
    {                                                                                              \
        return ew_infer(#ID, KIND, I32, call, out, err, errlen);                                   \
    }                                                                                              \
    static const clrun__op op_##ID = {.name = #ID,                                                 \
                                      .min_inputs = KIND == CLRUN__OP_BINARY ? 2 : 1,              \
                                      .max_inputs = KIND == CLRUN__OP_BINARY ? 2 : 1,              \
                                      .outputs = 1,                                                \
                                      .alias_safe = true,                                          \
                                      .kind = KIND,                                                \
                                      .code = CODE,                                                \
                                      .infer = infer_##ID};

EW_OP(neg, CLRUN__OP_UNARY, true, 0)
EW_OP(abs, CLRUN__OP_UNARY, true, 0)
EW_OP(relu, CLRUN__OP_UNARY, true, 0)
EW_OP(gelu, CLRUN__OP_UNARY, false, 0)
EW_OP(gelu_erf, CLRUN__OP_UNARY, false, 0)
EW_OP(sigmoid, CLRUN__OP_UNARY, false, 0)
EW_OP(tanh, CLRUN__OP_UNARY, false, 0)
EW_OP(exp, CLRUN__OP_UNARY, false, 0)
EW_OP(log, CLRUN__OP_UNARY, false, 0)
EW_OP(sqrt, CLRUN__OP_UNARY, false, 0)
EW_OP(rsqrt, CLRUN__OP_UNARY, false, 0)
EW_OP(copy, CLRUN__OP_COPY, true, 0)
EW_OP(scale, CLRUN__OP_SCALE, false, 0)
EW_OP(add, CLRUN__OP_BINARY, true, 0)
EW_OP(sub, CLRUN__OP_BINARY, true, 1)
EW_OP(mul, CLRUN__OP_BINARY, true, 2)
EW_OP(div, CLRUN__OP_BINARY, false, 3)
EW_OP(maximum, CLRUN__OP_BINARY, true, 4)
EW_OP(minimum, CLRUN__OP_BINARY, true, 5)

const clrun__op *const clrun__ops_elementwise[] = {
    &op_neg,  &op_abs,  &op_relu,  &op_gelu,    &op_gelu_erf, &op_sigmoid, &op_tanh,
    &op_exp,  &op_log,  &op_sqrt,  &op_rsqrt,   &op_copy,     &op_scale,   &op_add,
    &op_sub,  &op_mul,  &op_div,   &op_maximum, &op_minimum,  NULL,
};
