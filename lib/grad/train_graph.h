/* The train step as a graph: a model, a loss on one of its tensors, the gradients of its
 * parameters and the optimizer's update of each, in one graph that the executor runs like any
 * other. Parameters and optimizer state are donated inputs whose updated values are outputs of
 * the same size, so each step writes them in place; each parameter's update is emitted right
 * where its gradient is complete, so that the gradient dies there. Pure C: no OpenCL. */
#ifndef CLRUN_LIB_GRAD_TRAIN_GRAPH_H
#define CLRUN_LIB_GRAD_TRAIN_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include <clrun/graph.h>
#include <clrun/remat.h>
#include <clrun/train_graph.h>

/* What each input of the step graph is. */
typedef enum clrun__slot_role {
    CLRUN__SLOT_DATA,   /* a model input, fed per step */
    CLRUN__SLOT_TARGET, /* the labels (xent) or targets (mse), fed per step */
    CLRUN__SLOT_PARAM,  /* a parameter: donated, updated */
    CLRUN__SLOT_STATE,  /* optimizer state of a parameter: donated, updated, zeros at first */
    CLRUN__SLOT_HYPER,  /* a scalar the runtime computes per step (learning rate, corrections) */
    CLRUN__SLOT_GRAD,   /* split update: a parameter's gradient as reduced by the trainer's hook,
                           read by the apply graph (param: the parameter's slot) */
} clrun__slot_role;

typedef enum clrun__hyper {
    CLRUN__HYPER_LR,         /* lr */
    CLRUN__HYPER_STEP_SIZE,  /* Adam: lr / (1 - beta1^t) */
    CLRUN__HYPER_BC2_SQRT,   /* Adam: sqrt(1 - beta2^t) */
    CLRUN__HYPER_DECAY,      /* AdamW: 1 - lr * weight_decay */
    CLRUN__HYPER_SEED,       /* i64: the step's dropout seed */
    CLRUN__HYPER_COUNT
} clrun__hyper;

typedef struct clrun__train_slot {
    clrun__slot_role role;
    int32_t input_index;  /* position among the step graph's inputs */
    clrun_tensor_id input;
    int32_t output_index; /* PARAM, STATE: position of the updated value among the outputs (with
                             a split update, of the apply graph's for PARAM and for a STATE
                             with a param) */
    int32_t grad_output;  /* PARAM with keep_gradients or a split update: position of its
                             gradient among the step's outputs; else -1 */
    int32_t param;        /* STATE: the slot of its parameter; -1 otherwise */
    clrun__hyper hyper;   /* HYPER */
    char state_kind[16];  /* STATE: "momentum", "exp_avg", "exp_avg_sq" */
} clrun__train_slot;

typedef struct clrun__train_graph {
    clrun_graph *graph;          /* the step */
    clrun_graph *apply;          /* split update: the optimizer's updates, reading each
                                    parameter, its state and its GRAD slot (inputs named as the
                                    step's, which has them all, unread there); else NULL */
    clrun__train_slot *slots;    /* one per input of graph, in input order */
    int32_t slot_count;
    int32_t loss_output;         /* 0 */
    int32_t correct_output;      /* xent: the count of rows whose argmax is the label; else -1 */
    clrun_tensor_id logits;      /* the model tensor the loss reads (in the step graph) */
    int32_t param_count;
    int32_t state_count;
    /* Evaluation: the model and its loss with the parameters as (kept) inputs, no update. Its
     * inputs are tensors of the step graph with the same ids (data, target, parameters). Its
     * outputs: the loss per row (xent: [rows...]) or the loss (others), then for xent the hits
     * per row (f32 1 or 0). */
    clrun_graph *eval;
    bool eval_per_row;
    char **frozen;               /* parameters asked for that the loss does not depend on */
    int32_t frozen_count;
    clrun_remat_report remat;    /* what options->remat did to the step */
    int32_t forward_nodes;       /* the step's nodes [0, forward_nodes) are the forward pass and
                                    the loss (rematerialisation's first part) */
} clrun__train_graph;

/* Builds the step of `model` under `options` into *out (zeroed on failure). The reason of a
 * failure goes to err: a loss tensor that does not exist or has the wrong type, a parameter
 * that is no f32 constant, an op without a gradient rule, no parameter to train. With `split`,
 * the step outputs every gradient (grad_output) instead of updating, its parameters not donated,
 * and out->apply updates them (clrun_train_options.reduce runs between the two). */
clrun_status clrun__train_graph_build(const clrun_graph *model, const clrun_train_graph_options *options,
                                      bool split, clrun__train_graph *out, char *err, size_t errlen);
void clrun__train_graph_free(clrun__train_graph *tg);

#endif
