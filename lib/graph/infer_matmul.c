/* Type rule of matmul: batched, broadcast over batch dimensions, with transposes, an optional
 * bias over the output's columns, and a scale. */
#include <inttypes.h>

#include "graph/op.h"
#include "graph/op_families.h"
#include "graph/op_geometry.h"
#include "graph/types.h"

static const clrun__attr_spec matmul_attrs[] = {
    {"transpose_a", CLRUN__WANT_INT, false},
    {"transpose_b", CLRUN__WANT_INT, false},
    {"alpha", CLRUN__WANT_FLOAT, false},
    {"dequant", CLRUN__WANT_INT, false},
};

static void batch_type(const clrun_tensor_type *t, clrun_tensor_type *out)
{
    out->dtype = t->dtype;
    out->rank = t->rank - 2;
    for (int i = 0; i < out->rank; i++)
        out->shape[i] = t->shape[i];
}

clrun_status clrun__matmul_dims_of(const clrun__op_call *call, clrun__matmul_dims *d,
                                    const clrun__infer_error *err)
{
    const clrun_tensor_type *a = &call->inputs[0], *b = &call->inputs[1];
    char sa[CLRUN__TYPE_TEXT], sb[CLRUN__TYPE_TEXT];
    d->ta = clrun__attr_int_or(call, "transpose_a", 0) != 0;
    d->tb = clrun__attr_int_or(call, "transpose_b", 0) != 0;
    if (a->rank < 2 || b->rank < 2)
        return clrun__refuse(err, "inputs need at least 2 dimensions: a is %s, b is %s",
                             clrun__type_format(a, sa, sizeof sa), clrun__type_format(b, sb, sizeof sb));
    uint64_t am = (uint64_t)a->shape[a->rank - 2], ak = (uint64_t)a->shape[a->rank - 1];
    uint64_t bk = (uint64_t)b->shape[b->rank - 2], bn = (uint64_t)b->shape[b->rank - 1];
    d->M = d->ta ? ak : am;
    d->K = d->ta ? am : ak;
    d->N = d->tb ? bk : bn;
    uint64_t k2 = d->tb ? bn : bk;
    if (d->K != k2)
        return clrun__refuse(err, "inner dimensions differ: a is %s%s, b is %s%s (%" PRIu64
                             " vs %" PRIu64 ")", clrun__type_format(a, sa, sizeof sa),
                             d->ta ? " transposed" : "", clrun__type_format(b, sb, sizeof sb),
                             d->tb ? " transposed" : "", d->K, k2);
    if (d->M > UINT32_MAX || d->N > UINT32_MAX || d->K > UINT32_MAX)
        return clrun__refuse(err, "a matrix dimension exceeds 2^32 - 1: a is %s, b is %s",
                             clrun__type_format(a, sa, sizeof sa), clrun__type_format(b, sb, sizeof sb));
    batch_type(a, &d->batch_a);
    batch_type(b, &d->batch_b);
    const clrun__infer_error quiet = {err->op, NULL, 0};
    if (clrun__broadcast_shape(&d->batch_a, &d->batch_b, &d->batch, &quiet) != CLRUN_OK)
        return clrun__refuse(err, "batch dimensions do not broadcast: a is %s, b is %s",
                             clrun__type_format(a, sa, sizeof sa), clrun__type_format(b, sb, sizeof sb));
    return CLRUN_OK;
}

int clrun__product_dequant(const clrun__op_call *call, bool *bias)
{
    int64_t dequant = clrun__attr_int_or(call, "dequant", 0);
    int q = dequant >= 0 && dequant <= 2 ? (int)dequant : 0;
    *bias = call->input_count - q == 3;
    return q;
}

clrun_status clrun__product_weight_of(const clrun__op_call *call, int64_t channels, int *dequant,
                                      bool *bias, const clrun__infer_error *err)
{
    int64_t q = clrun__attr_int_or(call, "dequant", 0);
    *dequant = 0;
    *bias = false;
    if (q < 0 || q > 2)
        return clrun__refuse(err, "attribute 'dequant' is %" PRId64 ": 0, 1 (scale) or 2 (scale, "
                             "zero point)", q);
    int own = call->input_count - (int)q;
    if (own < 2 || own > 3)
        return clrun__refuse(err, "%d inputs with dequant %" PRId64 ": expected 2 or 3 before "
                             "the scale%s", call->input_count, q, q == 2 ? " and zero point" : "");
    const clrun_tensor_type *w = &call->inputs[1];
    char sw[CLRUN__TYPE_TEXT];
    bool integer = w->dtype == CLRUN_I8 || w->dtype == CLRUN_U8;
    bool narrow = integer || w->dtype == CLRUN_F16 || w->dtype == CLRUN_BF16;
    if (narrow && (integer != (q > 0)))
        return clrun__refuse(err, "the weight is %s with dequant %" PRId64 ": i8 and u8 weights "
                             "take a scale (dequant 1 or 2), f16 and bf16 none",
                             clrun__type_format(w, sw, sizeof sw), q);
    for (int i = 0; i < call->input_count; i++) {
        if (i == 1 && narrow)
            continue;
        clrun_status s = clrun__check_dtype(call, i, false, err);
        if (s != CLRUN_OK)
            return s;
    }
    for (int i = own; i < call->input_count; i++) {
        const clrun_tensor_type *t = &call->inputs[i];
        if (t->rank != 1 || t->shape[0] != channels)
            return clrun__refuse(err, "the weight's %s is %s: expected f32[%" PRId64 "] (its "
                                 "output channels)", i == own ? "scale" : "zero point",
                                 clrun__type_format(t, sw, sizeof sw), channels);
    }
    *dequant = (int)q;
    *bias = own == 3;
    return CLRUN_OK;
}

static clrun_status check_flags(const clrun__op_call *call, const clrun__infer_error *err)
{
    static const char *const flags[] = {"transpose_a", "transpose_b"};
    for (int i = 0; i < 2; i++) {
        int64_t v = clrun__attr_int_or(call, flags[i], 0);
        if (v != 0 && v != 1)
            return clrun__refuse(err, "attribute '%s' must be 0 or 1, not %" PRId64, flags[i], v);
    }
    return CLRUN_OK;
}

static clrun_status mm_infer(const clrun__op_call *call, clrun_tensor_type *out, char *errbuf,
                             size_t errlen)
{
    const clrun__infer_error err = {"matmul", errbuf, errlen};
    clrun_status s = clrun__check_input_count(call, 2, 5, &err);
    if (s == CLRUN_OK)
        s = clrun__check_attrs(call, matmul_attrs, 4, &err);
    if (s == CLRUN_OK)
        s = check_flags(call, &err);
    for (int i = 0; s == CLRUN_OK && i < call->input_count; i++)
        s = clrun__check_dims(call, i, &err);
    clrun__matmul_dims d;
    if (s == CLRUN_OK)
        s = clrun__matmul_dims_of(call, &d, &err);
    int dequant = 0;
    bool has_bias = false;
    if (s == CLRUN_OK)
        s = clrun__product_weight_of(call, (int64_t)d.N, &dequant, &has_bias, &err);
    if (s != CLRUN_OK)
        return s;
    char sb[CLRUN__TYPE_TEXT];
    if (call->inputs[1].dtype != CLRUN_F32 && call->inputs[1].rank != 2)
        return clrun__refuse(&err, "the weight is %s: a narrow weight is a matrix [K, N] (or [N, K] "
                             "transposed)", clrun__type_format(&call->inputs[1], sb, sizeof sb));
    if (has_bias) {
        const clrun_tensor_type *bias = &call->inputs[2];
        if (bias->rank != 1 || (uint64_t)bias->shape[0] != d.N) {
            return clrun__refuse(&err, "bias is %s: expected f32[%" PRIu64 "] (N)",
                                 clrun__type_format(bias, sb, sizeof sb), d.N);
        }
    }
    out[0] = d.batch;
    out[0].dtype = CLRUN_F32;
    out[0].rank = d.batch.rank + 2;
    out[0].shape[d.batch.rank] = (int64_t)d.M;
    out[0].shape[d.batch.rank + 1] = (int64_t)d.N;
    return CLRUN_OK;
}

static const clrun__op op_matmul = {.name = "matmul", .min_inputs = 2, .max_inputs = 5,
                                    .outputs = 1, .infer = mm_infer};

const clrun__op *const clrun__ops_matmul[] = {&op_matmul, NULL};
