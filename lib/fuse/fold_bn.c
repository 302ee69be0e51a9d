/* Batch normalization folded into the convolution before it (inference): for output channel o,
 *   k[o] = scale[o] / sqrt(var[o] + eps)
 *   w'[o, ...] = w[o, ...] k[o]        b'[o] = (b[o] - mean[o]) k[o] + bias[o]   (b = 0 if absent)
 * so conv2d(x, w', b') is batchnorm(conv2d(x, w, b)) in one kernel and one pass over memory.
 * Computed in double on the host and rounded once to f32: the one rewrite that reorders
 * floating-point work (documented in docs/ops.md, checked within 1e-5 relative). Pure C. */
#include "fuse/fold.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The f32 values of constant t (malloc'd). */
static float *values_of(const clrun__tensor *t)
{
    float *v = malloc((size_t)clrun_tensor_bytes(&t->type) + 4);
    if (v)
        clrun__constant_values(t, v);
    return v;
}

static bool f32_constant(const clrun_graph *d, int32_t t)
{
    return d->tensors[t].kind == CLRUN__TENSOR_CONSTANT && d->tensors[t].type.dtype == CLRUN_F32;
}

/* The conv2d node whose output batchnorm node `n` reads alone, when everything folds; else -1. */
static int32_t foldable_conv(const clrun_graph *d, const int32_t *reads, int32_t n)
{
    const clrun__node *bn = &d->nodes[n];
    if (bn->input_count != 5 || bn->guarded)
        return -1;
    int32_t y = bn->inputs[0], c = d->tensors[y].producer;
    if (c < 0 || reads[y] != 1 || d->tensors[y].is_output || d->tensors[y].type.dtype != CLRUN_F32)
        return -1;
    const clrun__node *conv = &d->nodes[c];
    if (conv->op == NULL || strcmp(conv->op->name, "conv2d") != 0 || conv->output_count != 1 || conv->guarded)
        return -1;
    if (conv->input_count < 2 || conv->input_count > 3 || !f32_constant(d, conv->inputs[1]) ||
        (conv->input_count == 3 && !f32_constant(d, conv->inputs[2])))
        return -1;
    for (int k = 1; k < 5; k++)
        if (!f32_constant(d, bn->inputs[k]))
            return -1;
    return c;
}

/* The folded weights and bias of conv node c and batchnorm node n, as new constants. */
static bool fold_pair(clrun__arena *arena, clrun_graph *d, int32_t c, int32_t n)
{
    const clrun__node *conv = &d->nodes[c], *bn = &d->nodes[n];
    const clrun__tensor *w = &d->tensors[conv->inputs[1]];
    int64_t O = w->type.shape[0];
    uint64_t per_channel = clrun_tensor_elements(&w->type) / (uint64_t)O;
    clrun__op_call call = {NULL, 0, NULL, 0, bn->attrs, bn->attr_count, 0};
    double eps = clrun__attr_float_or(&call, "eps", 1e-5);
    float *wv = values_of(w), *bv = conv->input_count == 3 ? values_of(&d->tensors[conv->inputs[2]]) : NULL;
    float *p[4];
    for (int k = 0; k < 4; k++)
        p[k] = values_of(&d->tensors[bn->inputs[k + 1]]); /* scale, bias, mean, var */
    float *nw = clrun__arena_alloc(arena, (size_t)clrun_tensor_bytes(&w->type));
    float *nb = clrun__arena_alloc(arena, (size_t)O * sizeof *nb);
    bool ok = wv && (bv || conv->input_count == 2) && p[0] && p[1] && p[2] && p[3] && nw && nb;
    for (int64_t o = 0; ok && o < O; o++) {
        double k = (double)p[0][o] / sqrt((double)p[3][o] + eps);
        for (uint64_t i = 0; i < per_channel; i++)
            nw[(uint64_t)o * per_channel + i] = (float)((double)wv[(uint64_t)o * per_channel + i] * k);
        nb[o] = (float)(((bv ? (double)bv[o] : 0.0) - (double)p[2][o]) * k + (double)p[1][o]);
    }
    free(wv);
    free(bv);
    for (int k = 0; k < 4; k++)
        free(p[k]);
    if (!ok)
        return false;
    int32_t out = bn->outputs[0];
    clrun_tensor_type bias_type = {CLRUN_F32, 1, {O}};
    int32_t wt = clrun__draft_add_derived(arena, d, out, ".folded_w", &w->type, nw);
    int32_t bt = wt < 0 ? -1 : clrun__draft_add_derived(arena, d, out, ".folded_b", &bias_type, nb);
    if (wt < 0 || bt < 0)
        return false;
    int32_t inputs[3] = {conv->inputs[0], wt, bt};
    const clrun__op *op = conv->op;
    const clrun_attr *attrs = conv->attrs;
    int attr_count = conv->attr_count;
    clrun__draft_remove_node(d, n);
    return clrun__draft_set_node(arena, d, c, op, inputs, 3, out, attrs, attr_count);
}

clrun_status clrun__fold_batchnorm(clrun__arena *arena, clrun_graph *d, int32_t *folded)
{
    *folded = 0;
    const clrun__op *batchnorm = clrun__op_find("batchnorm");
    if (batchnorm == NULL)
        return CLRUN_OK;
    int32_t *reads = malloc(((size_t)d->tensor_count + 1) * sizeof *reads);
    if (reads == NULL)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    clrun__draft_count_reads(d, reads);
    for (int32_t n = 0; n < d->node_count; n++) {
        if (d->nodes[n].op != batchnorm)
            continue;
        int32_t c = foldable_conv(d, reads, n);
        if (c < 0)
            continue;
        if (!fold_pair(arena, d, c, n)) {
            free(reads);
            return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        }
        (*folded)++;
    }
    free(reads);
    return CLRUN_OK;
}
