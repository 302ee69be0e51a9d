/* clrun: gradients. Reverse-mode differentiation as a rewrite of a graph: the result is one
 * graph, built from the same ops as any other (docs/ops.md), that computes a scalar loss and its
 * gradient with respect to chosen tensors. No device is involved; the executor runs the result
 * like any graph, so fusion, the allocators and the planner treat it like any other.
 *
 * Every op the loss depends on through a float tensor needs a gradient rule (docs/training.md
 * lists them); an op without one is refused by name when the gradient is built, never at run
 * time. Gradients flow only through float tensors: indices, labels, masks and seeds get none. */
#ifndef CLRUN_GRAD_H
#define CLRUN_GRAD_H

#include <stdbool.h>
#include <stdint.h>

#include <clrun/graph.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Builds *out: `graph`'s tensors and nodes with the same ids and names, then the nodes of the
 * backward pass. Its outputs: `loss` first, then the gradient of each of
 * wrt[0..wrt_count) in that order, named "grad.NAME" after the tensor's identifier. The
 * original graph's outputs are not outputs of *out.
 *
 * loss: a float tensor of one element (rank 0, or every dimension 1). wrt: float inputs or
 * constants (with wrt_count 0, every trainable weight: clrun_graph_trainable). A tensor in wrt
 * that the loss does not depend on gets a gradient of zeros, and its name goes to the log as a
 * warning and to `unused` (may be NULL: a malloc'd array of wrt indices, *unused_count of them;
 * the caller frees it).
 *
 * On failure *out is NULL and err (may be NULL) and clrun_last_error(NULL) say why:
 * CLRUN_ERROR_INVALID_ARGUMENT for a loss that is not one float element or a wrt entry that is
 * no input or constant or not float, CLRUN_ERROR_UNSUPPORTED naming the op (and its node's
 * output) that has no gradient rule. */
clrun_status clrun_graph_gradient(const clrun_graph *graph, clrun_tensor_id loss,
                                  const clrun_tensor_id *wrt, int32_t wrt_count,
                                  clrun_graph **out, int32_t **unused, int32_t *unused_count,
                                  char *err, size_t errlen);

/* The tensors training updates by default: every f32 constant of rank at least 1 on which
 * `loss` depends through an input that gradients flow through (a matmul's operands, a
 * convolution's weights and bias, a norm's scale and bias; never a gather's indices, a batch
 * norm's running statistics or a shape). Rank-0 constants (an exporter's 0.5 or sqrt(d)) stay
 * constants. With ids NULL, *count gets how many there are; otherwise the first
 * min(capacity, count) go to ids in id order. CLRUN_ERROR_INVALID_ARGUMENT for a bad loss. */
clrun_status clrun_graph_trainable(const clrun_graph *graph, clrun_tensor_id loss,
                                   clrun_tensor_id *ids, int32_t capacity, int32_t *count);

/* True when op `name` has a gradient rule (or takes no gradient: it has no float input). */
bool clrun_op_differentiable(const char *name);

#ifdef __cplusplus
}
#endif
#endif
