/* Type rules of the integer products: matmul_integer and conv_integer, over u8 and i8 operands
 * less their zero points, summed exactly in i32 (wrapping as onnxruntime's does). */
#include <inttypes.h>

#include "graph/op.h"
#include "graph/op_families.h"
#include "graph/qlinear_geometry.h"
#include "graph/types.h"

/* Input i: an 8-bit integer (u8 or i8) of any legal shape; *is_signed gets which. */
static clrun_status check_8bit(const clrun__op_call *call, int i, const char *what, bool *is_signed,
                               const clrun__infer_error *err)
{
    clrun_status s = clrun__check_dims(call, i, err);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *t = &call->inputs[i];
    char st[CLRUN__TYPE_TEXT];
    if (t->dtype != CLRUN_U8 && t->dtype != CLRUN_I8)
        return clrun__refuse(err, "%s is %s: expected u8 or i8", what, clrun__type_format(t, st, sizeof st));
    *is_signed = t->dtype == CLRUN_I8;
    return CLRUN_OK;
}

/* Zero point input i (when the call has it) of `of`'s dtype: one element (rank 0 or [1]), or
 * with vector_ok a vector of `length` elements (the rows, columns or channels it is per). */
static clrun_status zero_form(const clrun__op_call *call, int i, const char *what, int of,
                              bool vector_ok, uint64_t length, const char *per,
                              clrun__zero_form *form, const clrun__infer_error *err)
{
    *form = CLRUN__ZERO_NONE;
    if (i >= call->input_count)
        return CLRUN_OK;
    clrun_status s = clrun__check_dims(call, i, err);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *z = &call->inputs[i], *t = &call->inputs[of];
    char sz[CLRUN__TYPE_TEXT];
    if (z->dtype != t->dtype)
        return clrun__refuse(err, "%s is %s: expected %s, its operand's dtype", what,
                             clrun__type_format(z, sz, sizeof sz), clrun_dtype_name(t->dtype));
    if (z->rank == 0 || (z->rank == 1 && z->shape[0] == 1)) {
        *form = CLRUN__ZERO_SCALAR;
        return CLRUN_OK;
    }
    if (vector_ok && z->rank == 1 && (uint64_t)z->shape[0] == length) {
        *form = CLRUN__ZERO_VECTOR;
        return CLRUN_OK;
    }
    if (vector_ok)
        return clrun__refuse(err, "%s is %s: expected a scalar or [%" PRIu64 "] (one per %s)", what,
                             clrun__type_format(z, sz, sizeof sz), length, per);
    return clrun__refuse(err, "%s is %s: expected a scalar", what, clrun__type_format(z, sz, sizeof sz));
}

/* ---- matmul_integer ---------------------------------------------------------------------- */

clrun_status clrun__qmatmul_dims_of(const clrun__op_call *call, clrun__qmatmul_dims *q,
                                    const clrun__infer_error *err)
{
    clrun_status s = clrun__check_input_count(call, 2, 4, err);
    if (s == CLRUN_OK)
        s = clrun__check_attrs(call, NULL, 0, err);
    if (s == CLRUN_OK)
        s = check_8bit(call, 0, "a", &q->a_signed, err);
    if (s == CLRUN_OK)
        s = check_8bit(call, 1, "b", &q->b_signed, err);
    if (s == CLRUN_OK)
        s = clrun__matmul_dims_of(call, &q->d, err);
    if (s == CLRUN_OK)
        s = zero_form(call, 2, "a_zero", 0, true, q->d.M, "row of a", &q->a_zero, err);
    if (s == CLRUN_OK)
        s = zero_form(call, 3, "b_zero", 1, true, q->d.N, "column of b", &q->b_zero, err);
    return s;
}

static clrun_status qmm_infer(const clrun__op_call *call, clrun_tensor_type *out, char *errbuf,
                              size_t errlen)
{
    const clrun__infer_error err = {"matmul_integer", errbuf, errlen};
    clrun__qmatmul_dims q;
    clrun_status s = clrun__qmatmul_dims_of(call, &q, &err);
    if (s != CLRUN_OK)
        return s;
    out[0] = q.d.batch;
    out[0].dtype = CLRUN_I32;
    out[0].rank = q.d.batch.rank + 2;
    out[0].shape[q.d.batch.rank] = (int64_t)q.d.M;
    out[0].shape[q.d.batch.rank + 1] = (int64_t)q.d.N;
    return CLRUN_OK;
}

/* ---- conv_integer ------------------------------------------------------------------------ */

static const clrun__attr_spec qconv_attrs[] = {
    {"stride", CLRUN__WANT_INTS, false},
    {"pad", CLRUN__WANT_INTS, false},
    {"pads", CLRUN__WANT_INTS, false},
    {"dilation", CLRUN__WANT_INTS, false},
    {"groups", CLRUN__WANT_INT, false},
};

clrun_status clrun__qconv_geometry_of(const clrun__op_call *call, clrun__qconv_geometry *q,
                                      const clrun__infer_error *err)
{
    clrun_status s = clrun__check_input_count(call, 2, 4, err);
    if (s == CLRUN_OK)
        s = clrun__check_attrs(call, qconv_attrs, 5, err);
    if (s == CLRUN_OK)
        s = check_8bit(call, 0, "x", &q->x_signed, err);
    if (s == CLRUN_OK)
        s = check_8bit(call, 1, "w", &q->w_signed, err);
    if (s != CLRUN_OK)
        return s;
    /* conv2d's geometry over x and w alone (its third input would be a bias). */
    clrun__op_call pair = *call;
    pair.input_count = 2;
    s = clrun__conv_geometry_of(&pair, &q->g, err);
    if (s == CLRUN_OK)
        s = zero_form(call, 2, "x_zero", 0, false, 0, NULL, &q->x_zero, err);
    if (s == CLRUN_OK)
        s = zero_form(call, 3, "w_zero", 1, true, (uint64_t)call->inputs[1].shape[0], "output channel",
                      &q->w_zero, err);
    return s;
}

static clrun_status qconv_infer(const clrun__op_call *call, clrun_tensor_type *out, char *errbuf,
                                size_t errlen)
{
    const clrun__infer_error err = {"conv_integer", errbuf, errlen};
    clrun__qconv_geometry q;
    clrun_status s = clrun__qconv_geometry_of(call, &q, &err);
    if (s != CLRUN_OK)
        return s;
    out[0] = call->inputs[0];
    out[0].dtype = CLRUN_I32;
    out[0].shape[1] = call->inputs[1].shape[0];
    out[0].shape[2] = q.g.oh;
    out[0].shape[3] = q.g.ow;
    return CLRUN_OK;
}

static const clrun__op op_matmul_integer = {.name = "matmul_integer", .min_inputs = 2, .max_inputs = 4,
                                            .outputs = 1, .infer = qmm_infer};
static const clrun__op op_conv_integer = {.name = "conv_integer", .min_inputs = 2, .max_inputs = 4,
                                          .outputs = 1, .infer = qconv_infer};

const clrun__op *const clrun__ops_qlinear[] = {&op_matmul_integer, &op_conv_integer, NULL};
