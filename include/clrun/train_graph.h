/* clrun: what a train step is made of: a loss on a model's tensor, the parameters it trains and
 * the optimizer that updates them. Plain values; <clrun/train.h> runs steps with them. */
#ifndef CLRUN_TRAIN_GRAPH_H
#define CLRUN_TRAIN_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include <clrun/graph.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum clrun_loss_kind {
    CLRUN_LOSS_XENT = 0,   /* softmax cross-entropy of logits [..., C] against integer labels [...]
                              (the mean over rows), fused and stable; a label outside [0, C) fails
                              the step naming it */
    CLRUN_LOSS_MSE = 1,    /* mean squared error of predictions against targets of their type */
    CLRUN_LOSS_SCALAR = 2, /* the model computes its loss: a tensor of one float element */
} clrun_loss_kind;

/* "xent", "mse", "scalar". */
const char *clrun_loss_kind_name(clrun_loss_kind kind);

typedef enum clrun_optimizer_kind {
    CLRUN_OPTIMIZER_SGD = 0,   /* PyTorch's SGD: momentum, dampening 0, Nesterov, weight decay */
    CLRUN_OPTIMIZER_ADAM = 1,  /* PyTorch's Adam (weight decay as L2 in the gradient) */
    CLRUN_OPTIMIZER_ADAMW = 2, /* PyTorch's AdamW (decoupled weight decay) */
} clrun_optimizer_kind;

/* "sgd", "adam", "adamw". */
const char *clrun_optimizer_kind_name(clrun_optimizer_kind kind);

typedef struct clrun_optimizer {
    clrun_optimizer_kind kind;
    double lr;           /* learning rate > 0 */
    double momentum;     /* SGD: 0 (none) .. < 1 */
    bool nesterov;       /* SGD: Nesterov momentum (needs momentum > 0) */
    double weight_decay; /* >= 0: SGD and Adam add weight_decay * p to the gradient; AdamW
                            multiplies p by 1 - lr * weight_decay */
    double beta1, beta2; /* Adam, AdamW: in [0, 1) */
    double eps;          /* Adam, AdamW: > 0 */
} clrun_optimizer;

/* PyTorch's defaults for `kind`: lr 0.01 (SGD) or 0.001, momentum 0, betas 0.9 and 0.999,
 * eps 1e-8, weight decay 0 (0.01 for AdamW). */
void clrun_optimizer_init(clrun_optimizer *optimizer, clrun_optimizer_kind kind);

typedef struct clrun_train_graph_options {
    clrun_loss_kind loss;
    const char *loss_tensor;       /* the model tensor the loss reads (logits, predictions) or,
                                      for CLRUN_LOSS_SCALAR, the loss; a model name or identifier */
    clrun_dtype label_dtype;       /* xent: CLRUN_I64 (the default) or CLRUN_I32 */
    const char *const *params;     /* the parameters to train (constants of the model, by name);
                                      NULL: every trainable weight (clrun_graph_trainable) */
    int32_t param_count;
    clrun_optimizer optimizer;
    uint64_t dropout_seed;         /* the model's dropout nodes get their seed from the trainer:
                                      an i64 scalar input that only dropout nodes read is fed
                                      dropout_seed * 1000003 + the step's number, so masks
                                      differ per step and a run repeats from its seed */
    bool no_donation;              /* measuring only: the step does not donate the state, so it
                                      holds the old and the new values at once */
    bool keep_gradients;           /* also output each parameter's gradient (kept to the end of
                                      the step, so it costs memory): for checking them against
                                      another framework; clrun_train_read_gradient reads them */
    const char *remat;             /* a rematerialisation policy for the step (<clrun/remat.h>:
                                      dots_saveable, nothing_saveable, names:T1,T2, sqrt_n,
                                      cuts:K; host_offload: none recomputed, every
                                      activation the backward pass reads copied to host
                                      memory and back; per_tensor: each of them recomputed
                                      or copied, whichever costs less per byte freed at
                                      CLRUN_OFFLOAD_RATE, per_tensor:M the M cheapest
                                      (docs/training.md)), the forward the first part and
                                      the backward the second;
                                      "none": every activation kept; NULL or "": with no
                                      budget binding, the trainer takes dots_saveable or
                                      sqrt_n where that lowers the step's lower bound enough
                                      for little more arithmetic (the rule: docs/training.md),
                                      else none (clrun_train_stats.remat_auto). The step's
                                      results are the same bits under every policy */
    uint64_t memory_budget;        /* the trainer's (clrun_train_create): bytes the trainer
                                      may hold, as its pool counts them: its blocks (state,
                                      feeds), the step's arena and constants and the
                                      evaluation's, the step run in planned mode (unless
                                      clrun_exec_options.mode names another: then the static
                                      planner's estimate of the step's buffers). With no remat
                                      policy given: the step as it is if it fits, else
                                      per_tensor:M, the least M that fits; then
                                      dots_saveable, the shortest cuts:K, then every:K
                                      segments, then nothing_saveable, the first that fits
                                      (host_offload instead where it fits too and moving the
                                      activations costs less than that policy's repeated
                                      arithmetic at CLRUN_OFFLOAD_RATE); with a policy,
                                      that one alone. A budget below the least any rewrite
                                      holds is refused at once with that least.
                                      clrun_train_stats.remat_policy gives the policy taken.
                                      0: the pool's limit, when the step may not fit in what
                                      it leaves (then CLRUN_ERROR_OUT_OF_MEMORY when nothing
                                      does); else no budget */
} clrun_train_graph_options;

/* Cross-entropy on no tensor yet, every trainable weight, Adam with PyTorch's defaults. */
void clrun_train_graph_options_init(clrun_train_graph_options *options);

#ifdef __cplusplus
}
#endif
#endif
