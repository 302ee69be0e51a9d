/* A dequantized constant weight folded into its product (an ONNX model's QDQ pattern): the chain
 *   w = mul(sub(cast(q), zero), scale)     or     w = mul(cast(q), scale)
 * over a constant q of i8 or u8 (or w = cast(q) of an f16 or bf16 q), read only as the weight of a matmul (a matrix) or a conv2d,
 * with a constant scale (and zero point: a constant, or the cast of one) per tensor or per
 * output channel, becomes that product reading q itself with scale[C] (and zero[C]) as its last
 * inputs and the attribute dequant (lib/graph/op_geometry.h): its kernels widen q as they read it
 * with the same arithmetic as the chain, (f32(q) - zero) * scale, so the bits do not change and
 * q stays resident at its own width, with no f32 copy of the weight at run time. Pure C. */
#include "fuse/fold.h"

#include <stdlib.h>
#include <string.h>

static bool named(const clrun__node *node, const char *op)
{
    return node->op != NULL && !node->guarded && node->output_count == 1 && strcmp(node->op->name, op) == 0;
}

/* The node producing t when t is an intermediate read once (by the chain) and no output. */
static const clrun__node *single(const clrun_graph *d, const int32_t *reads, int32_t t, int32_t *index)
{
    const clrun__tensor *x = &d->tensors[t];
    *index = x->producer;
    if (x->kind != CLRUN__TENSOR_INTERMEDIATE || x->is_output || reads[t] != 1 || x->producer < 0)
        return NULL;
    return &d->nodes[x->producer];
}

/* t itself when a constant, or the constant a reshape (a view: ONNX's per-axis scale, made to
 * broadcast) of t reads; -1 for anything else. */
static int32_t constant_of(const clrun_graph *d, int32_t t)
{
    const clrun__tensor *x = &d->tensors[t];
    if (x->kind == CLRUN__TENSOR_CONSTANT)
        return t;
    if (x->kind != CLRUN__TENSOR_INTERMEDIATE || x->producer < 0)
        return -1;
    const clrun__node *r = &d->nodes[x->producer];
    if (r->op == NULL || r->guarded || strcmp(r->op->name, "reshape") != 0 || r->input_count < 1 ||
        d->tensors[r->inputs[0]].kind != CLRUN__TENSOR_CONSTANT)
        return -1;
    return r->inputs[0];
}

static bool is_constant(const clrun_graph *d, int32_t t, clrun_dtype dtype)
{
    int32_t c = constant_of(d, t);
    return c >= 0 && d->tensors[c].type.dtype == dtype;
}

/* v's values (f32, i8 or u8 constant) as one per channel of w's axis into out[C]: a single value
 * for every channel, or [.., C, ..] with C on w's axis (right-aligned), every other extent 1. */
static bool per_channel(const clrun_graph *d, int32_t t, const clrun_tensor_type *w, int axis, float *out)
{
    const clrun_tensor_type *shape = &d->tensors[t].type;
    const clrun__tensor *v = &d->tensors[constant_of(d, t)];
    int64_t C = w->shape[axis];
    uint64_t n = clrun_tensor_elements(shape);
    int shift = w->rank - shape->rank;
    if (n != 1) {
        if (shift < 0 || (uint64_t)C != n)
            return false;
        for (int k = 0; k < shape->rank; k++)
            if (shape->shape[k] != (k + shift == axis ? C : 1))
                return false;
    }
    size_t size = clrun_dtype_size(v->type.dtype);
    unsigned char *raw = malloc(size * (size_t)n + 4);
    if (raw == NULL)
        return false;
    clrun__constant_values(v, raw);
    for (int64_t c = 0; c < C; c++) {
        uint64_t i = n == 1 ? 0 : (uint64_t)c;
        if (v->type.dtype == CLRUN_F32)
            memcpy(&out[c], raw + 4 * i, 4);
        else if (v->type.dtype == CLRUN_I8)
            out[c] = (float)(int8_t)raw[i];
        else
            out[c] = (float)raw[i];
    }
    free(raw);
    return true;
}

/* Folds the chain before product node p when it is one; false only when out of memory. */
static bool fold_one(clrun__arena *arena, clrun_graph *d, const int32_t *reads, int32_t p, int32_t *folded)
{
    const clrun__node *prod = &d->nodes[p];
    bool conv = strcmp(prod->op->name, "conv2d") == 0;
    if (prod->guarded || prod->input_count < 2 || prod->input_count > 3)
        return true;
    for (int a = 0; a < prod->attr_count; a++)
        if (strcmp(prod->attrs[a].name, "dequant") == 0)
            return true;
    int32_t w = prod->inputs[1], mi, si = -1, ci, zci = -1;
    const clrun_tensor_type *wt = &d->tensors[w].type;
    if (wt->dtype != CLRUN_F32 || (!conv && wt->rank != 2))
        return true;
    const clrun__node *mul = single(d, reads, w, &mi);
    if (mul != NULL && named(mul, "cast") && mul->input_count == 1 &&
        (is_constant(d, mul->inputs[0], CLRUN_F16) || is_constant(d, mul->inputs[0], CLRUN_BF16)) &&
        d->tensors[mul->inputs[0]].kind == CLRUN__TENSOR_CONSTANT) { /* f16, bf16: widened exactly */
        int32_t inputs[3] = {prod->inputs[0], mul->inputs[0], prod->input_count == 3 ? prod->inputs[2] : -1};
        const clrun__op *op = prod->op;
        const clrun_attr *attrs = prod->attrs;
        int attr_count = prod->attr_count, count = prod->input_count;
        int32_t out = prod->outputs[0];
        clrun__draft_remove_node(d, mi);
        (*folded)++;
        return clrun__draft_set_node(arena, d, p, op, inputs, count, out, attrs, attr_count);
    }
    if (mul == NULL || !named(mul, "mul") || mul->input_count != 2)
        return true;
    int side = is_constant(d, mul->inputs[1], CLRUN_F32) ? 1 : is_constant(d, mul->inputs[0], CLRUN_F32) ? 0 : -1;
    if (side < 0)
        return true;
    int32_t scale = mul->inputs[side], t = mul->inputs[1 - side], zero = -1;
    const clrun__node *prev = single(d, reads, t, &si);
    if (prev == NULL)
        return true;
    const clrun__node *cast = prev;
    ci = si;
    if (named(prev, "sub") && prev->input_count == 2) { /* sub(cast(q), zero) */
        zero = prev->inputs[1];
        cast = single(d, reads, prev->inputs[0], &ci);
        if (cast == NULL)
            return true;
        if (!is_constant(d, zero, CLRUN_F32)) {
            const clrun__node *zc = single(d, reads, zero, &zci);
            if (zc == NULL || !named(zc, "cast") || zc->input_count != 1 ||
                !(is_constant(d, zc->inputs[0], CLRUN_I8) || is_constant(d, zc->inputs[0], CLRUN_U8)))
                return true;
            zero = zc->inputs[0];
        }
    } else {
        si = -1;
    }
    if (!named(cast, "cast") || cast->input_count != 1)
        return true;
    int32_t q = cast->inputs[0];
    if (d->tensors[q].kind != CLRUN__TENSOR_CONSTANT || (!is_constant(d, q, CLRUN_I8) && !is_constant(d, q, CLRUN_U8)) ||
        d->tensors[cast->outputs[0]].type.dtype != CLRUN_F32)
        return true;
    bool tb = false;
    for (int a = 0; a < prod->attr_count; a++)
        if (strcmp(prod->attrs[a].name, "transpose_b") == 0)
            tb = prod->attrs[a].i != 0;
    int axis = conv ? 0 : tb ? 0 : 1;
    int64_t C = wt->shape[axis];
    float *sv = clrun__arena_alloc(arena, sizeof *sv * (size_t)C);
    float *zv = zero >= 0 ? clrun__arena_alloc(arena, sizeof *zv * (size_t)C) : NULL;
    if (sv == NULL || (zero >= 0 && zv == NULL))
        return false;
    if (!per_channel(d, scale, wt, axis, sv) || (zero >= 0 && !per_channel(d, zero, wt, axis, zv)))
        return true;
    clrun_tensor_type ct = {CLRUN_F32, 1, {C}};
    int32_t st = clrun__draft_add_derived(arena, d, q, ".scale", &ct, sv);
    int32_t zt = zv && st >= 0 ? clrun__draft_add_derived(arena, d, q, ".zero", &ct, zv) : -1;
    if (st < 0 || (zv && zt < 0))
        return true; /* no room: the chain stays (the same bits) */
    int32_t inputs[5];
    int count = 0;
    for (int k = 0; k < prod->input_count; k++)
        inputs[count++] = k == 1 ? q : prod->inputs[k];
    inputs[count++] = st;
    if (zv)
        inputs[count++] = zt;
    clrun_attr *attrs = clrun__arena_alloc(arena, sizeof *attrs * (size_t)(prod->attr_count + 1));
    if (attrs == NULL)
        return false;
    memcpy(attrs, prod->attrs, sizeof *attrs * (size_t)prod->attr_count);
    attrs[prod->attr_count] = (clrun_attr){.name = "dequant", .kind = CLRUN_ATTR_INT, .i = zv ? 2 : 1};
    const clrun__op *op = prod->op;
    int attr_count = prod->attr_count + 1;
    int32_t out = prod->outputs[0];
    clrun__draft_remove_node(d, mi);
    if (si >= 0)
        clrun__draft_remove_node(d, si);
    clrun__draft_remove_node(d, ci);
    if (zci >= 0)
        clrun__draft_remove_node(d, zci);
    (*folded)++;
    return clrun__draft_set_node(arena, d, p, op, inputs, count, out, attrs, attr_count);
}

clrun_status clrun__fold_dequantize(clrun__arena *arena, clrun_graph *d, int32_t *folded)
{
    *folded = 0;
    int32_t *reads = malloc(((size_t)d->tensor_count + 1) * sizeof *reads);
    if (reads == NULL)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    clrun__draft_count_reads(d, reads);
    int32_t nodes = d->node_count;
    for (int32_t n = 0; n < nodes; n++) {
        const clrun__node *node = &d->nodes[n];
        if (node->op == NULL || (strcmp(node->op->name, "matmul") != 0 && strcmp(node->op->name, "conv2d") != 0))
            continue;
        if (!fold_one(arena, d, reads, n, folded)) {
            free(reads);
            return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        }
    }
    free(reads);
    return CLRUN_OK;
}
