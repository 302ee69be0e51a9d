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
};

/* The bytes of slot i's tensor. */
uint64_t clrun__train_slot_bytes(const clrun_train *t, int32_t i);

#endif
