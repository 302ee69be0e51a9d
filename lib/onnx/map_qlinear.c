/* The quantized products: MatMulInteger and ConvInteger on the graph's integer products
 * (matmul_integer, conv_integer: exact, summed in int32), and QLinearMatMul and QLinearConv as
 * those products requantized as onnxruntime does: y = saturate(round(multiplier * acc) + y_zp),
 * with the multiplier a_scale * b_scale / y_scale computed in f32 (per row of a, per column of b
 * or per output channel of w where the scales are vectors), acc converted to f32, and the
 * rounding half to even. QLinearConv adds its int32 bias to acc first. Zero points and scales of
 * other shapes than the specification allows are refused by name. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "onnx/map.h"

/* "[2, 3]" for a value's shape. */
static const char *shape_text(const clrun__value *v, char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < v->c.rank && used < size; d++)
        used += (size_t)snprintf(buf + used, size - used, "%s%" PRId64, d ? ", " : "", v->c.dims[d]);
    if (used < size)
        snprintf(buf + used, size - used, "]");
    return buf;
}

/* Elements of a value. */
static int64_t count_of(const clrun__value *v)
{
    int64_t c = 1;
    for (int d = 0; d < v->c.rank; d++)
        c *= v->c.dims[d];
    return c;
}

/* One element, of any rank. */
static bool is_scalar(const clrun__value *v)
{
    return count_of(v) == 1;
}

/* The forms of a zero point or scale: a scalar, or one value per row of a ([M], or [..., M, 1]
 * with every other dimension 1), per column of b ([N], [..., 1, N]) or per output channel of w
 * ([M] alone). */
typedef enum per { PER_TENSOR, PER_ROW, PER_COLUMN, PER_CHANNEL } per;

static bool is_vector(const clrun__value *v, per p, int64_t length)
{
    int r = v->c.rank, at = p == PER_ROW ? r - 2 : r - 1;
    if (p == PER_TENSOR || length < 1)
        return false;
    if (r == 1)
        return v->c.dims[0] == length;
    if (p == PER_CHANNEL || at < 0 || v->c.dims[at] != length)
        return false;
    for (int d = 0; d < r; d++)
        if (d != at && v->c.dims[d] != 1)
            return false;
    return true;
}

/* Input i, when present, must be a scalar or a vector of `length` elements of the form `p`, of
 * element type `elem` (0: float, for scales). */
static clrun_status check_param(clrun__imp *im, const clrun__onode *n, int i, const char *what, int elem,
                                int64_t length, per p)
{
    static const char *const form[] = {"", "[M] or [..., M, 1] (one per row of a)",
                                       "[N] or [..., 1, N] (one per column of b)",
                                       "[M] (one per output channel)"};
    const clrun__value *v = i < n->n_in ? n->in[i] : NULL;
    if (v == NULL)
        return CLRUN_OK;
    char shape[96], want[32], got[32];
    if (elem == 0 && v->c.elem != CLRUN__ONNX_FLOAT)
        return clrun__unsupported(im, "%s is %s: only float scales are supported", what,
                                  clrun__onnx_elem_name(v->c.elem, got, sizeof got));
    if (elem != 0 && v->c.elem != elem)
        return clrun__invalid(im, "%s is %s: expected %s, the type of its operand", what,
                              clrun__onnx_elem_name(v->c.elem, got, sizeof got),
                              clrun__onnx_elem_name(elem, want, sizeof want));
    if (is_scalar(v) || is_vector(v, p, length))
        return CLRUN_OK;
    if (p != PER_TENSOR)
        return clrun__unsupported(im, "%s has shape %s: supported are a scalar and %s with %s = %" PRId64,
                                  what, shape_text(v, shape, sizeof shape), form[p],
                                  p == PER_COLUMN ? "N" : "M", length);
    return clrun__unsupported(im, "%s has shape %s: supported is a scalar", what,
                              shape_text(v, shape, sizeof shape));
}

/* A checked zero point or scale as a scalar (rank 0) or a vector [L] followed by `ones`
 * dimensions of 1 (to broadcast over columns or pixels). NULL stays NULL. */
static clrun_status flat(clrun__imp *im, clrun__onode *n, clrun__value *v, int ones, clrun__value **r)
{
    *r = v;
    if (v == NULL)
        return CLRUN_OK;
    int64_t dims[3] = {count_of(v), 1, 1};
    int rank = is_scalar(v) ? 0 : 1 + ones;
    bool same = v->c.rank == rank;
    for (int d = 0; same && d < rank; d++)
        same = v->c.dims[d] == dims[d];
    if (same)
        return CLRUN_OK;
    return clrun__mv_reshape(im, n, v, rank, dims, -1, r);
}

/* An 8-bit operand (uint8 or int8). */
static clrun_status check_operand(clrun__imp *im, const clrun__value *v, const char *what)
{
    char got[32];
    if (v->c.elem != CLRUN__ONNX_UINT8 && v->c.elem != CLRUN__ONNX_INT8)
        return clrun__unsupported(im, "%s is %s: supported are uint8 and int8", what,
                                  clrun__onnx_elem_name(v->c.elem, got, sizeof got));
    return CLRUN_OK;
}

/* The inputs of matmul_integer or conv_integer: a, b and the zero points az, bz (NULL: none),
 * flattened (scalars of rank 0, vectors [L]); an absent az before a present bz becomes a zero of
 * a's type. Their count into *count. */
static clrun_status product_inputs(clrun__imp *im, clrun__onode *n, clrun__value *a, clrun__value *b,
                                   clrun__value *az, clrun__value *bz, clrun__value **in, int *count)
{
    in[0] = a, in[1] = b;
    *count = 2;
    if (az == NULL && bz == NULL)
        return CLRUN_OK;
    if (az == NULL && (az = clrun__scalar_value(im, a->c.elem, 0, 0)) == NULL)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    clrun_status s = flat(im, n, az, 0, &in[2]);
    *count = 3;
    if (s == CLRUN_OK && bz != NULL) {
        s = flat(im, n, bz, 0, &in[3]);
        *count = 4;
    }
    return s;
}

/* ---- the products ---- */

/* matmul_integer of a and b (numpy's vectors as MatMul takes them: a row, a column, dropped
 * after), zero points az and bz (NULL: none; checked), into output `out` or a temporary (-1,
 * *r). */
static clrun_status qmatmul(clrun__imp *im, clrun__onode *n, clrun__value *a, clrun__value *b, clrun__value *az,
                            clrun__value *bz, int out, clrun__value **r)
{
    int ra = a->c.rank, rb = b->c.rank;
    int64_t da[2] = {1, a->c.dims[0]}, db[2] = {b->c.dims[0], 1};
    clrun_status s = CLRUN_OK;
    if (ra == 1 && (s = clrun__mv_reshape(im, n, a, 2, da, -1, &a)) != CLRUN_OK)
        return s;
    if (rb == 1 && (s = clrun__mv_reshape(im, n, b, 2, db, -1, &b)) != CLRUN_OK)
        return s;
    clrun__value *in[4], *y;
    int count;
    if ((s = product_inputs(im, n, a, b, az, bz, in, &count)) != CLRUN_OK)
        return s;
    if (ra >= 2 && rb >= 2)
        return clrun__emit1(im, n, "matmul_integer", in, count, NULL, 0, out, r);
    if ((s = clrun__emit1(im, n, "matmul_integer", in, count, NULL, 0, -1, &y)) != CLRUN_OK)
        return s;
    int64_t dims[CLRUN__ONNX_MAX_RANK];
    int rank = 0;
    for (int d = 0; d < y->c.rank; d++)
        if (!((ra == 1 && d == y->c.rank - 2) || (rb == 1 && d == y->c.rank - 1)))
            dims[rank++] = y->c.dims[d];
    return clrun__mv_reshape(im, n, y, rank, dims, out, r);
}

/* The rows of a and the columns of b of a product (1 for a vector). */
static int64_t rows_of(const clrun__value *a)
{
    return a->c.rank >= 2 ? a->c.dims[a->c.rank - 2] : 1;
}

static int64_t columns_of(const clrun__value *b)
{
    return b->c.rank >= 2 ? b->c.dims[b->c.rank - 1] : 1;
}

/* The window of a 2-D ConvInteger or QLinearConv: strides, dilations, pads, auto_pad, group and
 * kernel_shape (checked against w [M, C/group, KH, KW]). */
typedef struct qwindow {
    int64_t stride[2], dilation[2], pads[4], group;
} qwindow;

static clrun_status pair_of(clrun__imp *im, const clrun__onode *n, const char *name, int64_t *out)
{
    int64_t v[8];
    int count;
    clrun_status s = clrun__oattr_ints(im, n, name, v, 8, &count);
    if (s != CLRUN_OK || count < 0)
        return s;
    if (count != 2)
        return clrun__invalid(im, "%s has %d entries for 2 spatial dimensions", name, count);
    for (int i = 0; i < 2; i++)
        if (v[i] < 1)
            return clrun__invalid(im, "%s must be >= 1", name);
    out[0] = v[0], out[1] = v[1];
    return CLRUN_OK;
}

static clrun_status qwindow_of(clrun__imp *im, const clrun__onode *n, const clrun__value *x, const clrun__value *w,
                               qwindow *q)
{
    *q = (qwindow){{1, 1}, {1, 1}, {0, 0, 0, 0}, 1};
    if (x->c.rank != 4 || w->c.rank != 4)
        return clrun__unsupported(im, "x has rank %d and w rank %d: only 2-D convolutions (rank 4) are "
                                  "supported", x->c.rank, w->c.rank);
    int64_t v[8];
    int count;
    char mode[16];
    clrun_status s = pair_of(im, n, "strides", q->stride);
    if (s == CLRUN_OK)
        s = pair_of(im, n, "dilations", q->dilation);
    if (s == CLRUN_OK)
        s = clrun__oattr_int(im, n, "group", 1, &q->group);
    if (s == CLRUN_OK)
        s = clrun__oattr_ints(im, n, "kernel_shape", v, 8, &count);
    if (s == CLRUN_OK && count >= 0 && (count != 2 || v[0] != w->c.dims[2] || v[1] != w->c.dims[3]))
        return clrun__invalid(im, "kernel_shape does not match the weights");
    if (s == CLRUN_OK)
        s = clrun__oattr_string(im, n, "auto_pad", "NOTSET", mode, sizeof mode);
    if (s == CLRUN_OK)
        s = clrun__oattr_ints(im, n, "pads", v, 8, &count);
    if (s != CLRUN_OK)
        return s;
    if (strcmp(mode, "NOTSET") == 0) {
        if (count >= 0 && count != 4)
            return clrun__invalid(im, "pads has %d entries for 2 spatial dimensions", count);
        for (int i = 0; count >= 0 && i < 4; i++)
            if ((q->pads[i] = v[i]) < 0)
                return clrun__invalid(im, "negative pads");
    } else if (strcmp(mode, "SAME_UPPER") == 0 || strcmp(mode, "SAME_LOWER") == 0) {
        for (int i = 0; i < 2; i++) { /* the output is ceil(in / stride); the odd pad at the end (UPPER) */
            int64_t in = x->c.dims[2 + i], o = (in + q->stride[i] - 1) / q->stride[i];
            int64_t total = (o - 1) * q->stride[i] + (w->c.dims[2 + i] - 1) * q->dilation[i] + 1 - in;
            total = total < 0 ? 0 : total;
            q->pads[i] = mode[5] == 'U' ? total / 2 : total - total / 2;
            q->pads[2 + i] = total - q->pads[i];
        }
    } else if (strcmp(mode, "VALID") != 0) {
        return clrun__invalid(im, "auto_pad '%s' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID", mode);
    }
    return CLRUN_OK;
}

/* conv_integer of x and w with zero points xz and wz (NULL: none; checked) into output `out` or
 * a temporary (-1, *r). */
static clrun_status qconv(clrun__imp *im, clrun__onode *n, clrun__value *x, clrun__value *w, clrun__value *xz,
                          clrun__value *wz, int out, clrun__value **r)
{
    qwindow q;
    clrun_status s = qwindow_of(im, n, x, w, &q);
    clrun__value *in[4];
    int count;
    if (s == CLRUN_OK)
        s = product_inputs(im, n, x, w, xz, wz, in, &count);
    if (s != CLRUN_OK)
        return s;
    clrun_attr at[4] = {clrun__mk_ints("stride", q.stride, 2), clrun__mk_ints("pads", q.pads, 4),
                        clrun__mk_ints("dilation", q.dilation, 2), clrun__mk_int("groups", q.group)};
    return clrun__emit1(im, n, "conv_integer", in, count, at, 4, out, r);
}

/* ---- requantization ---- */

/* y = saturate(round(acc * multiplier) + zp) as zp's type (uint8 or int8), into output 0;
 * multiplier is f32, broadcast against acc. */
static clrun_status requantize(clrun__imp *im, clrun__onode *n, clrun__value *acc, clrun__value *multiplier,
                               clrun__value *zp)
{
    clrun_dtype dtype = zp->c.elem == CLRUN__ONNX_INT8 ? CLRUN_I8 : CLRUN_U8;
    clrun_attr to_f32 = clrun__mk_int("to", (int64_t)CLRUN_F32), to_y = clrun__mk_int("to", (int64_t)dtype);
    bool is_signed = dtype == CLRUN_I8;
    clrun_attr range[2] = {clrun__mk_float("min", is_signed ? -128 : 0),
                           clrun__mk_float("max", is_signed ? 127 : 255)};
    clrun__value *v, *z;
    clrun_status s = clrun__emit1(im, n, "cast", &acc, 1, &to_f32, 1, -1, &v);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "mul", v, multiplier, -1, &v);
    if (s == CLRUN_OK)
        s = clrun__emit_unary(im, n, "round", v, -1, &v);
    if (s == CLRUN_OK)
        s = flat(im, n, zp, 0, &z);
    if (s == CLRUN_OK)
        s = clrun__emit1(im, n, "cast", &z, 1, &to_f32, 1, -1, &z);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "add", v, z, -1, &v);
    if (s == CLRUN_OK)
        s = clrun__emit1(im, n, "clip", &v, 1, range, 2, -1, &v);
    return s == CLRUN_OK ? clrun__emit1(im, n, "cast", &v, 1, &to_y, 1, 0, NULL) : s;
}

/* a_scale * b_scale / y_scale in f32 (vectors arranged by the caller to broadcast). */
static clrun_status multiplier_of(clrun__imp *im, clrun__onode *n, clrun__value *sa, clrun__value *sb,
                                  clrun__value *sy, clrun__value **r)
{
    clrun_status s = flat(im, n, sy, 0, &sy);
    if (s == CLRUN_OK)
        s = clrun__emit_binary(im, n, "mul", sa, sb, -1, r);
    return s == CLRUN_OK ? clrun__emit_binary(im, n, "div", *r, sy, -1, r) : s;
}

/* ---- the operators ---- */

clrun_status clrun__map_matmul_integer(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 2);
    if (s == CLRUN_OK)
        s = check_operand(im, n->in[0], "A");
    if (s == CLRUN_OK)
        s = check_operand(im, n->in[1], "B");
    if (s == CLRUN_OK && (n->in[0]->c.rank < 1 || n->in[1]->c.rank < 1))
        return clrun__invalid(im, "the inputs need at least one dimension");
    clrun__value *a = n->in[0], *b = n->in[1];
    if (s == CLRUN_OK)
        s = check_param(im, n, 2, "a_zero_point", a->c.elem, rows_of(a), PER_ROW);
    if (s == CLRUN_OK)
        s = check_param(im, n, 3, "b_zero_point", b->c.elem, columns_of(b), PER_COLUMN);
    if (s != CLRUN_OK)
        return s;
    return qmatmul(im, n, a, b, n->n_in > 2 ? n->in[2] : NULL, n->n_in > 3 ? n->in[3] : NULL, 0, NULL);
}

clrun_status clrun__map_conv_integer(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 2);
    if (s == CLRUN_OK)
        s = check_operand(im, n->in[0], "x");
    if (s == CLRUN_OK)
        s = check_operand(im, n->in[1], "w");
    if (s != CLRUN_OK)
        return s;
    clrun__value *x = n->in[0], *w = n->in[1];
    s = check_param(im, n, 2, "x_zero_point", x->c.elem, 0, PER_TENSOR);
    if (s == CLRUN_OK)
        s = check_param(im, n, 3, "w_zero_point", w->c.elem, w->c.rank >= 1 ? w->c.dims[0] : 0, PER_CHANNEL);
    if (s != CLRUN_OK)
        return s;
    return qconv(im, n, x, w, n->n_in > 2 ? n->in[2] : NULL, n->n_in > 3 ? n->in[3] : NULL, 0, NULL);
}

/* What QLinearMatMul and QLinearConv check: 8 inputs, the operands (0, 3), the scales and zero
 * points of each (1, 2; 4, 5; 6, 7) in the forms p0 and p1 over l0 and l1 values, and the
 * output's (6, 7) scalars. */
static clrun_status check_qlinear(clrun__imp *im, clrun__onode *n, const char *a, const char *b, per p0,
                                  per p1)
{
    clrun_status s = clrun__need_inputs(im, n, 8);
    if (s == CLRUN_OK)
        s = check_operand(im, n->in[0], a);
    if (s == CLRUN_OK)
        s = check_operand(im, n->in[3], b);
    if (s == CLRUN_OK && (n->in[0]->c.rank < 1 || n->in[3]->c.rank < 1))
        return clrun__invalid(im, "the inputs need at least one dimension");
    if (s == CLRUN_OK)
        s = check_operand(im, n->in[7], "y_zero_point");
    if (s != CLRUN_OK)
        return s;
    const clrun__value *va = n->in[0], *vb = n->in[3];
    int64_t l0 = p0 == PER_ROW ? rows_of(va) : 0;
    int64_t l1 = p1 == PER_COLUMN ? columns_of(vb) : vb->c.dims[0];
    char name[4][24];
    snprintf(name[0], sizeof name[0], "%s_scale", a);
    snprintf(name[1], sizeof name[1], "%s_zero_point", a);
    snprintf(name[2], sizeof name[2], "%s_scale", b);
    snprintf(name[3], sizeof name[3], "%s_zero_point", b);
    s = check_param(im, n, 1, name[0], 0, l0, p0);
    if (s == CLRUN_OK)
        s = check_param(im, n, 2, name[1], va->c.elem, l0, p0);
    if (s == CLRUN_OK)
        s = check_param(im, n, 4, name[2], 0, l1, p1);
    if (s == CLRUN_OK)
        s = check_param(im, n, 5, name[3], vb->c.elem, l1, p1);
    if (s == CLRUN_OK)
        s = check_param(im, n, 6, "y_scale", 0, 0, PER_TENSOR);
    if (s == CLRUN_OK)
        s = check_param(im, n, 7, "y_zero_point", n->in[7]->c.elem, 0, PER_TENSOR);
    return s;
}

/* QLinearMatMul: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point. */
clrun_status clrun__map_qlinear_matmul(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = check_qlinear(im, n, "a", "b", PER_ROW, PER_COLUMN);
    if (s != CLRUN_OK)
        return s;
    clrun__value *a = n->in[0], *b = n->in[3], *acc, *sa, *sb, *mult;
    if (a->c.rank == 1 && !is_scalar(n->in[1]))
        return clrun__unsupported(im, "a_scale has shape [%" PRId64 "] for a vector a", n->in[1]->c.dims[0]);
    s = qmatmul(im, n, a, b, n->in[2], n->in[5], -1, &acc);
    if (s == CLRUN_OK) /* per row: [M, 1] against [..., M, N] */
        s = flat(im, n, n->in[1], 1, &sa);
    if (s == CLRUN_OK && b->c.rank == 1 && !is_scalar(n->in[4]))
        return clrun__unsupported(im, "b_scale has shape [%" PRId64 "] for a vector b", n->in[4]->c.dims[0]);
    if (s == CLRUN_OK)
        s = flat(im, n, n->in[4], 0, &sb);
    if (s == CLRUN_OK)
        s = multiplier_of(im, n, sa, sb, n->in[6], &mult);
    return s == CLRUN_OK ? requantize(im, n, acc, mult, n->in[7]) : s;
}

/* QLinearConv: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, and an
 * optional int32 bias B [M] added to the accumulator. */
clrun_status clrun__map_qlinear_conv(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = check_qlinear(im, n, "x", "w", PER_TENSOR, PER_CHANNEL);
    if (s != CLRUN_OK)
        return s;
    clrun__value *x = n->in[0], *w = n->in[3], *bias = n->n_in > 8 ? n->in[8] : NULL, *acc, *sx, *sw, *mult;
    int64_t M = w->c.dims[0];
    char shape[96], got[32];
    if (bias && (bias->c.elem != CLRUN__ONNX_INT32 || bias->c.rank != 1 || bias->c.dims[0] != M))
        return clrun__invalid(im, "B is %s %s: expected int32 [%" PRId64 "] (one per output channel)",
                              clrun__onnx_elem_name(bias->c.elem, got, sizeof got),
                              shape_text(bias, shape, sizeof shape), M);
    s = qconv(im, n, x, w, n->in[2], n->in[5], -1, &acc);
    if (s == CLRUN_OK && bias) {
        clrun__value *bc;
        s = flat(im, n, bias, 2, &bc);
        if (s == CLRUN_OK)
            s = clrun__emit_binary(im, n, "add", acc, bc, -1, &acc);
    }
    if (s == CLRUN_OK)
        s = flat(im, n, n->in[1], 0, &sx);
    if (s == CLRUN_OK) /* per channel: [M, 1, 1] against [N, M, OH, OW] */
        s = flat(im, n, n->in[4], 2, &sw);
    if (s == CLRUN_OK)
        s = multiplier_of(im, n, sx, sw, n->in[6], &mult);
    return s == CLRUN_OK ? requantize(im, n, acc, mult, n->in[7]) : s;
}
