/* The trainer's insides, shared by the step (train.c) and the state files (train_state.c). */
#ifndef CLRUN_LIB_TRAIN_INTERNAL_H
#define CLRUN_LIB_TRAIN_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <clrun/train.h>

#include "grad/train_graph.h"

struct clrun_train {
    clrun_context *ctx;
    clrun_train_options options;
    clrun__train_graph tg;
    clrun_exec *exec;
    clrun_exec *eval;            /* the model and loss alone, parameters kept */
    clrun_exec *apply;           /* with a reduce hook: the optimizer's updates (tg.apply) */
    int32_t *apply_slots;        /* per input of tg.apply: its slot */
    float *grads;                /* with a reduce hook: the gradients handed to it */
    uint64_t grad_count;         /* their floats */
    uint64_t *grad_at;           /* per slot: where its parameter's gradient lies in grads */
    int32_t *eval_slots;         /* per input of the eval graph: its slot */
    clrun_buffer *buffers;       /* per slot: the feed's, hyper's or state's block */
    bool *held;                  /* per slot: buffers[i] is live */
    int32_t *feeds;              /* feed i: its slot */
    int32_t feed_count;
    int32_t *params;             /* parameter i: its slot */
    uint64_t steps;
    int64_t classes;             /* xent: the logits' last dimension */
    int32_t label_slot;          /* xent: the labels' slot, else -1 */
    bool broken;                 /* a failed step consumed the state */
    uint64_t broken_step;
    uint64_t param_bytes, state_bytes;
    char *remat_policy;          /* the step's policy (a copy), or NULL: none */
    bool remat_auto;             /* remat_policy chosen by the step (no policy given, no budget) */
    uint64_t planned_peak;       /* under a budget: what the chosen step holds (with the
                                    evaluation, in planned mode), or the planner's estimate */
    int32_t slot_blocks;         /* entries of buffers and held */
    int offload;                 /* what lives in host memory: CLRUN__OFFLOAD_* */
    uint64_t host_bytes;         /* the bytes of the slots there */
    uint64_t slot_bytes;         /* the slots' blocks' bytes at the device's alignment */
    uint64_t slot_reserved;      /* what the pool reserved for them */
    bool budget_planned;         /* under a budget in planned mode: the evaluation is too */
    /* a bucketed reduction (options.bucket_start): the gradients in host memory in the order
     * the backward pass completes them, cut into buckets */
    int32_t bucket_count;
    clrun_train_bucket *buckets;  /* per bucket; first_param[b] its first in the order */
    int32_t *first_param;         /* per bucket, and one past the last: into order */
    int32_t *order_outputs;       /* per parameter in that order: its gradient's step output */
    int32_t *order_steps;         /* and the schedule step that completes it (the run's reads) */
    void **order_host;            /* per parameter in that order: where it is read to (stage, or
                                     landing for a bucket that is one device region) */
    uint64_t *order_at;           /* and its first float in stage, and its floats */
    uint64_t *order_count;
    uint64_t *order_land;         /* and its first float in landing (UINT64_MAX: read to stage) */
    float *stage;                 /* the gradients in that order (grad_count floats) */
    float *landing;               /* the buckets that are one device region, as they lie there
                                     (alignment padding included): one read each */
    uint64_t *stage_at;           /* per slot, as grad_at: where its parameter's lies in stage */
    clrun_status bucket_status;   /* the last step's hooks failed so (else CLRUN_OK) */
    char bucket_err[512];         /* and said why */
    int32_t ov_next, ov_open;     /* this step: the next bucket to start, the first not done */
    bool *ov_done;                /* per bucket: its reduction is done */
    uint64_t *ov_start, *ov_end;  /* per bucket: host clock (ns) of its start and end */
    uint64_t ov_seen;             /* the least host - device clock gap seen at a bucket's read */
};

/* Builds the step of `model` into t->tg and prepares it (t->exec, on t->ctx with
 * t->options.exec), under options->memory_budget when it is not 0 (train_graph.h says how the
 * rematerialisation policy is then chosen), else as options says. Sets t->remat_policy and
 * t->planned_peak. A budget nothing meets is refused (CLRUN_ERROR_INVALID_ARGUMENT) with the
 * smallest peak found in err; every failure's reason goes to err. */
clrun_status clrun__train_build_step(clrun_train *t, const clrun_graph *model,
                                     const clrun_train_graph_options *options, char *err,
                                     size_t errlen);

/* What a trainer under a budget moves to host memory (kernels use it there): nothing, the
 * optimizer state (and batch norms' running statistics), or the parameters too. */
enum { CLRUN__OFFLOAD_NONE = 0, CLRUN__OFFLOAD_STATE = 1, CLRUN__OFFLOAD_PARAMS = 2 };

/* Whether slot i lives in host memory at t->offload. */
bool clrun__train_slot_on_host(const clrun_train *t, int32_t i);

/* The bytes of the slots that `level` puts in host memory. */
uint64_t clrun__train_offloadable(const clrun_train *t, int level);

/* Frees the slots' blocks and their arrays (for clrun__train_alloc_slots again). */
void clrun__train_free_slots(clrun_train *t);

/* Allocates a block per slot of t->tg (t->buffers, t->held): their values come later; those of
 * clrun__train_slot_on_host in host memory (t->host_bytes).
 * CLRUN_ERROR_OUT_OF_HOST_MEMORY, or the pool's error (its message is the context's). */
clrun_status clrun__train_alloc_slots(clrun_train *t);

/* Whether the evaluation's planned arena may lie in the step's: they take turns on an in-order
 * queue, and no output of the step is read after an evaluation (no kept gradients). */
bool clrun__train_eval_shares(const clrun_train *t);

/* The bytes of slot i's tensor. */
uint64_t clrun__train_slot_bytes(const clrun_train *t, int32_t i);

#endif
