/* A double-precision host evaluator of whole clrun graphs, for the tests: the gradient tests
 * take central finite differences of it, and tests/test_graph_reference.c holds it to the
 * device. Every op is written from docs/ops.md as plain loops over the output's elements,
 * without the library's helpers (only its graph structure and constant fills), so that it
 * checks the library independently.
 *
 * Every tensor is held as doubles: floats (f32, f16, f64) are never rounded to their dtype, so a
 * chain of f32 ops is evaluated as real arithmetic; integers are exact up to 2^53 and wrap to
 * their dtype as docs/ops.md says; bools are 0 or 1. */
#ifndef CLRUN_TESTS_GRAPH_REFERENCE_H
#define CLRUN_TESTS_GRAPH_REFERENCE_H

#include <stddef.h>

#include <clrun/graph.h>

/* Evaluates every tensor of `graph` in double on the host. inputs[i]: the values of the graph's
 * i-th input (clrun_graph_inputs order; integer and bool tensors as doubles too). overrides (may
 * be NULL): per tensor id, NULL or values replacing that tensor (an input or a constant: used for
 * finite differences on weights). On success *values gets one malloc'd array per tensor id
 * (clrun_graph_tensor_count entries, each clrun_tensor_elements long); free with gref_free.
 * Returns 0, or -1 with a message in err naming the node and op it cannot evaluate (an op the
 * reference does not know, an index outside its axis, a label outside its classes). */
int gref_eval(const clrun_graph *graph, const double *const *inputs, const double *const *overrides,
              double ***values, char *err, size_t errlen);
void gref_free(const clrun_graph *graph, double **values);

/* Central finite differences of the scalar tensor `loss` (one element) with respect to every
 * element of the float tensor `wrt` (an input or a constant): grad[k] = (L(w + h e_k) -
 * L(w - h e_k)) / 2h, with h relative (h = step * max(1, |w_k|)); 2h is taken as the difference
 * of the two perturbed values as doubles, so its rounding does not enter the quotient. Each
 * perturbation re-evaluates only the nodes between wrt and loss. grad has wrt's element count.
 * Returns 0 or -1 with err. */
int gref_fd_grad(const clrun_graph *graph, const double *const *inputs, clrun_tensor_id loss,
                 clrun_tensor_id wrt, double step, double *grad, char *err, size_t errlen);

#endif
