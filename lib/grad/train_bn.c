/* Training mode and evaluation mode of a model. Batch norm in training mode: a copy of the model in which every batchnorm node normalises by
 * its batch's statistics (mean and biased variance over every dimension but the channel), written
 * with reductions and elementwise ops that the gradient rules differentiate, and which computes
 * the running statistics' update as PyTorch does (momentum 0.1, the unbiased variance). The
 * running statistics become train state: read, updated, written back in place. In evaluation
 * mode dropout is the identity. */
#include "grad/train_bn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grad/grad.h"

#define BN_MOMENTUM 0.1

typedef struct copier {
    clrun_graph *out;
    char *err;
    size_t errlen;
    uint32_t counter;
} copier;

static clrun_tensor_id emit(copier *c, const char *op, const clrun_tensor_id *in, int n,
                            const clrun_attr *attrs, int attr_count, const char *name)
{
    char fresh[64];
    if (name == NULL) {
        do
            snprintf(fresh, sizeof fresh, "bn.%u", (unsigned)c->counter++);
        while (clrun__graph_find_ident(c->out, fresh) >= 0);
        name = fresh;
    }
    for (int i = 0; i < n; i++)
        if (in[i] < 0)
            return -1;
    const char *names[1] = {name};
    clrun_tensor_id id = -1;
    if (clrun_graph_add_node(c->out, op, in, n, names, 1, attrs, attr_count, &id) != CLRUN_OK) {
        if (c->err[0] == '\0')
            snprintf(c->err, c->errlen, "train: batch norm in training mode: %s",
                     clrun_graph_last_error(c->out));
        return -1;
    }
    return id;
}

static clrun_tensor_id scale(copier *c, clrun_tensor_id x, double alpha, double beta)
{
    clrun_attr a[2] = {clrun__gattr_float("alpha", alpha), clrun__gattr_float("beta", beta)};
    return emit(c, "scale", &x, 1, a, 2, NULL);
}

static clrun_tensor_id binary(copier *c, const char *op, clrun_tensor_id a, clrun_tensor_id b,
                              const char *name)
{
    clrun_tensor_id in[2] = {a, b};
    return emit(c, op, in, 2, NULL, 0, name);
}

static clrun_tensor_id reshape(copier *c, clrun_tensor_id x, const int64_t *shape, int rank)
{
    clrun_attr a = clrun__gattr_ints("shape", shape, rank);
    return emit(c, "reshape", &x, 1, &a, 1, NULL);
}

/* The batch norm node n of the model, with its inputs already mapped, in training mode. */
static clrun_status batchnorm(copier *c, const clrun_graph *model, const clrun__node *n,
                              const clrun_tensor_id *in, clrun__train_bn *bn)
{
    const clrun_tensor_type *tx = &model->tensors[n->inputs[0]].type;
    double eps = clrun__gnode_float(n, "eps", 1e-5);
    int64_t axes[CLRUN_MAX_DIMS], per_channel[CLRUN_MAX_DIMS], channels = tx->shape[1];
    int count = 0;
    uint64_t elements = 1;
    for (int d = 0; d < tx->rank; d++) {
        per_channel[d] = d == 1 ? channels : 1;
        if (d != 1) {
            axes[count++] = d;
            elements *= (uint64_t)tx->shape[d];
        }
    }
    clrun_attr keep[2] = {clrun__gattr_ints("axes", axes, count), clrun__gattr_int("keepdims", 1)};
    clrun_tensor_id x = in[0];
    clrun_tensor_id mean = emit(c, "reduce_mean", &x, 1, keep, 2, NULL);
    clrun_tensor_id xc = binary(c, "sub", x, mean, NULL);
    clrun_tensor_id sq = binary(c, "mul", xc, xc, NULL);
    clrun_tensor_id var = emit(c, "reduce_mean", &sq, 1, keep, 2, NULL);
    clrun_tensor_id rstd = emit(c, "rsqrt", (clrun_tensor_id[]){scale(c, var, 1.0, eps)}, 1, NULL, 0, NULL);
    clrun_tensor_id gamma = reshape(c, in[1], per_channel, tx->rank);
    clrun_tensor_id beta = reshape(c, in[2], per_channel, tx->rank);
    clrun_tensor_id normed = binary(c, "mul", xc, rstd, NULL);
    clrun_tensor_id y = binary(c, "add", binary(c, "mul", normed, gamma, NULL), beta,
                               model->tensors[n->outputs[0]].name);
    /* running = (1 - momentum) running + momentum batch; the variance unbiased */
    int64_t flat[1] = {channels};
    double unbias = elements > 1 ? (double)elements / (double)(elements - 1) : 1.0;
    clrun_tensor_id m1 = binary(c, "add", scale(c, in[3], 1.0 - BN_MOMENTUM, 0.0),
                                scale(c, reshape(c, mean, flat, 1), BN_MOMENTUM, 0.0), NULL);
    clrun_tensor_id v1 = binary(c, "add", scale(c, in[4], 1.0 - BN_MOMENTUM, 0.0),
                                scale(c, reshape(c, var, flat, 1), BN_MOMENTUM * unbias, 0.0), NULL);
    if (y < 0 || m1 < 0 || v1 < 0)
        return CLRUN_ERROR_INVALID_GRAPH;
    bn->output = y;
    bn->mean = in[3];
    bn->var = in[4];
    bn->new_mean = m1;
    bn->new_var = v1;
    return CLRUN_OK;
}

clrun_status clrun__train_copy_model(const clrun_graph *model, clrun_graph *out, bool training,
                                     clrun_tensor_id *map, clrun__train_bn **bns, int32_t *bn_count,
                                     char *err, size_t errlen)
{
    copier c = {.out = out, .err = err, .errlen = errlen};
    *bns = NULL;
    *bn_count = 0;
    if (clrun__graph_has_guards(model)) { /* copied without guards, both branches would run */
        snprintf(err, errlen, "training a graph with guarded nodes (an If whose condition is known only at "
                 "run time) is not supported");
        return CLRUN_ERROR_UNSUPPORTED;
    }
    clrun_status s = CLRUN_OK;
    int32_t next = 0;
    for (int32_t t = 0; t < model->tensor_count && s == CLRUN_OK; t++) {
        const clrun__tensor *ft = &model->tensors[t];
        if (ft->kind == CLRUN__TENSOR_INPUT) {
            s = clrun_graph_add_input(out, ft->name, &ft->type, ft->donated, &map[t]);
        } else if (ft->kind == CLRUN__TENSOR_CONSTANT) {
            s = clrun_graph_add_constant(out, ft->name, &ft->type, ft->data, ft->fill, ft->fill_a,
                                         ft->fill_b, ft->seed, &map[t]);
        } else {
            if (ft->producer != next || model->nodes[next].outputs[0] != t) {
                snprintf(err, errlen, "train: tensor %s is not in dependency order",
                         clrun__tensor_label(ft));
                return CLRUN_ERROR_INVALID_GRAPH;
            }
            const clrun__node *n = &model->nodes[next++];
            clrun_tensor_id in[32];
            for (int i = 0; i < n->input_count && i < 32; i++)
                in[i] = map[n->inputs[i]];
            if (!training && strcmp(n->op->name, "dropout") == 0) {
                /* evaluation: dropout is the identity (PyTorch's eval mode) */
                map[t] = emit(&c, "copy", in, 1, NULL, 0, model->tensors[n->outputs[0]].name);
                s = map[t] < 0 ? CLRUN_ERROR_INVALID_GRAPH : CLRUN_OK;
            } else if (training && strcmp(n->op->name, "batchnorm") == 0) {
                clrun__train_bn *grown = realloc(*bns, sizeof **bns * (size_t)(*bn_count + 1));
                if (grown == NULL) {
                    snprintf(err, errlen, "train: out of host memory");
                    return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
                }
                *bns = grown;
                s = batchnorm(&c, model, n, in, &grown[*bn_count]);
                if (s == CLRUN_OK)
                    map[t] = grown[(*bn_count)++].output;
            } else {
                const char *names[16];
                clrun_tensor_id outs[16];
                for (int j = 0; j < n->output_count && j < 16; j++)
                    names[j] = model->tensors[n->outputs[j]].name;
                s = clrun_graph_add_node(out, n->op->name, in, n->input_count, names,
                                         n->output_count, n->attrs, n->attr_count, outs);
                for (int j = 0; s == CLRUN_OK && j < n->output_count; j++)
                    map[n->outputs[j]] = outs[j];
                if (s == CLRUN_OK && n->model_name)
                    s = clrun_graph_set_node_model_name(out, clrun_graph_node_count(out) - 1,
                                                        n->model_name);
            }
            t += n->output_count - 1;
        }
    }
    for (int32_t t = 0; t < model->tensor_count && s == CLRUN_OK; t++)
        if (model->tensors[t].model_name)
            s = clrun_graph_set_model_name(out, map[t], model->tensors[t].model_name);
    if (s != CLRUN_OK && err[0] == '\0')
        snprintf(err, errlen, "train: %s", clrun_graph_last_error(out));
    if (s != CLRUN_OK) {
        free(*bns);
        *bns = NULL;
        *bn_count = 0;
    }
    return s;
}
