/* The gradient transform's insides: the state a backward pass is built in, the helpers every
 * rule emits nodes with, and the rule table. A rule is a pure rewrite: given the gradients of a
 * node's outputs it emits ordinary ops (docs/ops.md) that compute the gradients of its inputs.
 * Pure C: no OpenCL. One file per op family (grad_elementwise.c, grad_matmul.c, ...). */
#ifndef CLRUN_LIB_GRAD_H
#define CLRUN_LIB_GRAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <clrun/grad.h>
#include <clrun/graph.h>

#include "core/log.h"
#include "graph/graph.h"

typedef struct clrun__grad clrun__grad;

/* Called when the gradient of wrt[index] is complete (every node reading it has been
 * differentiated): the train builder emits that parameter's update right there, so that its
 * gradient dies at once instead of living to the end of the backward pass. */
typedef clrun_status (*clrun__grad_done_fn)(clrun__grad *g, int32_t index, clrun_tensor_id grad,
                                            void *user);

struct clrun__grad {
    const clrun_graph *fwd;   /* the forward graph, read only */
    clrun_graph *out;         /* being built: the forward copy, then the backward nodes */
    clrun_tensor_id *grad;    /* per forward tensor: its gradient so far in `out`, or -1 */
    bool *needed;             /* per forward tensor: float, and depends on a wrt tensor */
    int32_t *pending;         /* per forward tensor: readers not yet differentiated */
    const clrun_tensor_id *wrt;
    int32_t wrt_count;
    int32_t *wrt_index;       /* per forward tensor: its index in wrt, or -1 */
    bool *finished;           /* per wrt entry: handed to `done` already */
    clrun__grad_done_fn done;
    void *done_user;
    int32_t node;             /* the forward node being differentiated (for names, messages) */
    uint32_t counter;         /* fresh names */
    char *err;                /* where the first failure's reason goes */
    size_t errlen;
};

/* ---- emitting nodes ---- */

/* Adds node `op` with one output (a fresh name) and returns its id, or -1 with the reason
 * recorded (clrun__grad_failed). Inputs of -1 make it return -1 at once (an earlier failure). */
clrun_tensor_id clrun__gemit(clrun__grad *g, const char *op, const clrun_tensor_id *inputs,
                             int input_count, const clrun_attr *attrs, int attr_count);
/* Shorthands. */
clrun_tensor_id clrun__gemit1(clrun__grad *g, const char *op, clrun_tensor_id x);
clrun_tensor_id clrun__gemit2(clrun__grad *g, const char *op, clrun_tensor_id a, clrun_tensor_id b);
/* alpha * x + beta. */
clrun_tensor_id clrun__gscale(clrun__grad *g, clrun_tensor_id x, double alpha, double beta);
/* A constant of `value` everywhere, of x's dtype and rank 0 (broadcasts against anything). */
clrun_tensor_id clrun__gscalar(clrun__grad *g, clrun_dtype dtype, double value);
/* A zero-filled constant of `type`. */
clrun_tensor_id clrun__gzeros(clrun__grad *g, const clrun_tensor_type *type);
/* x reshaped to `type`'s shape. */
clrun_tensor_id clrun__greshape(clrun__grad *g, clrun_tensor_id x, const clrun_tensor_type *type);
/* x (broadcast to some shape) summed back to `type`: the gradient of numpy broadcasting. The
 * leading dimensions x has beyond type's rank and the dimensions where type has 1 and x more are
 * summed; x itself when the shapes already agree. */
clrun_tensor_id clrun__gunbroadcast(clrun__grad *g, clrun_tensor_id x, const clrun_tensor_type *type);
/* x broadcast (expand) to `type`'s shape. */
clrun_tensor_id clrun__gexpand(clrun__grad *g, clrun_tensor_id x, const clrun_tensor_type *type);

/* Type of a tensor of the graph being built: valid until the next node or constant is added
 * (the graph's tensors move as it grows), so copy it before emitting more. */
const clrun_tensor_type *clrun__gtype(const clrun__grad *g, clrun_tensor_id id);

/* Records the first failure (a printf message) and returns status. */
clrun_status clrun__grad_failed(clrun__grad *g, clrun_status status, const char *format, ...)
    CLRUN__PRINTF(3, 4);

/* ---- rules ---- */

/* A node's gradients: dy[j] the gradient of output j (-1 when none flows into it; a rule treats
 * it as zeros), want[i] whether input i needs one. The rule sets dx[i] (-1: none) for the inputs
 * it wants, emitting nodes through the helpers above. Returns CLRUN_OK or the failure. */
typedef clrun_status (*clrun__grad_rule_fn)(clrun__grad *g, const clrun__node *node,
                                            const clrun_tensor_id *dy, const bool *want,
                                            clrun_tensor_id *dx);

typedef struct clrun__grad_rule {
    const char *op;
    clrun__grad_rule_fn rule;
    /* Bit i set: gradients flow through input i (a float input the op's output depends on
     * smoothly, or piecewise); clear for indices, labels, masks, seeds, running statistics. */
    uint32_t differentiable;
} clrun__grad_rule;

/* The rule of op `name`, or NULL. */
const clrun__grad_rule *clrun__grad_rule_find(const char *name);

/* Each family's rules, ended by an entry with op NULL. */
extern const clrun__grad_rule clrun__grad_rules_elementwise[];
extern const clrun__grad_rule clrun__grad_rules_matmul[];
extern const clrun__grad_rule clrun__grad_rules_norm[];
extern const clrun__grad_rule clrun__grad_rules_layout[];
extern const clrun__grad_rule clrun__grad_rules_conv[];
extern const clrun__grad_rule clrun__grad_rules_index[];

/* Attribute of a forward node (NULL when absent). */
const clrun_attr *clrun__gnode_attr(const clrun__node *node, const char *name);
int64_t clrun__gnode_int(const clrun__node *node, const char *name, int64_t fallback);
double clrun__gnode_float(const clrun__node *node, const char *name, double fallback);

/* The forward tensor a node reads or writes, as a tensor of `out` (same id). */
static inline const clrun_tensor_type *clrun__gfwd_type(const clrun__grad *g, clrun_tensor_id id)
{
    return &g->fwd->tensors[id].type;
}

/* ---- the transform, for the train builder ---- */

/* Options of clrun__grad_build beyond the public call's. */
typedef struct clrun__grad_spec {
    clrun_tensor_id loss;
    const clrun_tensor_id *wrt;   /* forward tensors */
    int32_t wrt_count;
    clrun_tensor_id seed;         /* in `out`: the loss' incoming gradient (a ones constant when
                                     -1) */
    clrun__grad_done_fn done;     /* may be NULL */
    void *done_user;
} clrun__grad_spec;

/* Appends the backward pass of `fwd` to `out`, which must already hold fwd's tensors with the
 * same ids (clrun__grad_copy). grads[i] gets wrt[i]'s gradient in `out` (zeros, and unused[i]
 * true, when the loss does not depend on it). Marks no outputs. */
clrun_status clrun__grad_build(const clrun_graph *fwd, clrun_graph *out,
                               const clrun__grad_spec *spec, clrun_tensor_id *grads, bool *unused,
                               char *err, size_t errlen);

/* Copies fwd's tensors and nodes into the empty graph `out` with the same ids, names and model
 * names; constants with promote[id] set (promote may be NULL) become inputs, donated when
 * `donate`. No outputs are marked. */
clrun_status clrun__grad_copy(const clrun_graph *fwd, clrun_graph *out, const bool *promote,
                              bool donate, char *err, size_t errlen);

/* Per forward tensor: whether the loss depends on it through differentiable inputs (reached[t]),
 * computed backwards from `loss`. reached has tensor_count entries. */
void clrun__grad_reach(const clrun_graph *fwd, clrun_tensor_id loss, bool *reached);

#endif
