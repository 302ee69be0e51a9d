/* What the ops whose indices may fall outside their data share (lib/ops/ops_index.c: gather,
 * gather_elements; lib/ops/ops_scatter.c: scatter_elements, scatter_nd, gather_nd; roi_align
 * shares the word's read, clrun__bad_word_take): a device
 * word their kernels lower, with atomic_min, to the position of the first index outside the
 * data, which the executor reads after the run (the op's `check`) to fail it with the node and
 * the position named. Defined in ops_index.c. */
#ifndef CLRUN_LIB_OPS_INDEX_H
#define CLRUN_LIB_OPS_INDEX_H

#include "ops/ops_internal.h"

/* The word's value while no index is bad. */
#define CLRUN__NO_BAD_INDEX 0xffffffffu

typedef struct clrun__index_state {
    clrun__kernel_state ks; /* first: clrun__kernel_state_op_enqueue takes the state as one */
    cl_mem bad;             /* one cl_uint, CLRUN__NO_BAD_INDEX or the first bad position */
    bool tuples;            /* the positions are those of index tuples (scatter_nd, gather_nd) */
    char range[160];        /* where the indices must fall, for the message: "the axis of
                               length 10 (valid: -10 to 9)" */
} clrun__index_state;

/* A zeroed state of `size` bytes (a struct that begins with a clrun__index_state), its word
 * made and set to CLRUN__NO_BAD_INDEX; ks.inputs gets `inputs`, ks.what the op's name. */
clrun_status clrun__index_state_new(clrun_context *ctx, const clrun__op *op, cl_uint inputs,
                                    size_t size, clrun__index_state **out);
/* Releases the word, then the state as clrun__kernel_state_release does. NULL-safe. */
void clrun__index_state_release(void *state);
/* Hands st to *state, or releases it (with `release`) when s is an error; returns s. */
clrun_status clrun__index_state_done(void *st, void (*release)(void *), clrun_status s,
                                     void **state);
/* Reads the word `bad` into *value; when it holds a position (not CLRUN__NO_BAD_INDEX), sets it
 * back to CLRUN__NO_BAD_INDEX for the next run. `what` names the word in a failure ("bad
 * indices"). */
clrun_status clrun__bad_word_take(clrun_context *ctx, cl_mem bad, const char *node, const char *what,
                                  cl_uint *value);
/* The op's check: reads the word; a bad position fails with CLRUN_ERROR_INVALID_ARGUMENT naming
 * the node and the position (and resets the word for the next run). */
clrun_status clrun__index_check(clrun_context *ctx, void *state, const char *node);

#endif
