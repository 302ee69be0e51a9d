/* clrun: rematerialisation. A rewrite of a graph whose nodes fall into a first part (a forward
 * pass) and a second part that reads its tensors again (a backward pass): a forward tensor the
 * policy does not keep is no longer held from the first part to the second; the nodes that made
 * it are repeated, from tensors that are kept, right before the first node of the second part
 * that reads it (a repeated node repeats the inputs it needs that are not kept either). The
 * repeated nodes run the same ops on the same values, so every output keeps its bits; the peak
 * falls by what the dropped tensors held, for the extra work of the repeated nodes.
 *
 * Policies, as jax.checkpoint names them:
 *   none              every tensor kept: the graph as it is
 *   dots_saveable     keep the outputs of matmul, gemm and conv2d; repeat the rest
 *   nothing_saveable  keep nothing the first part computes; repeat it all, once
 *   names:T1,T2       keep only the tensors named (model names or identifiers)
 *   except:T1,T2      keep every tensor but those named
 *   sqrt_n            Chen et al. (2016): about sqrt(n) segments of the first part's nodes, the
 *                     tensor that ends each segment kept; each of a segment's others is repeated
 *                     once, from the kept end of the segment before, when the second part first
 *                     needs it (or a tensor made from it). The last segment (the one holding the
 *                     last node whose tensor the second part reads) is kept whole: the second
 *                     part starts right after it
 *   every:K           the same with segments of K nodes (every:1 keeps every tensor); fewer
 *                     tensors are repeated with a shorter K, and fewer kept up to K near sqrt(n)
 *   cuts:K, cuts      segments that end at cuts of the first part: tensors that nothing made
 *                     before them is read past (a transformer's residual stream between its
 *                     sublayers, a ResNet block's output; never a tensor a skip connection
 *                     crosses), so that a segment is repeated from its start alone. Each ends at
 *                     the last cut within K nodes of the one before (the first cut after, where
 *                     those K hold none); the last segment read is kept whole, as sqrt_n keeps
 *                     it. cuts: K as sqrt_n's
 * Whatever the policy, graph inputs, constants, graph outputs and the outputs of nodes with more
 * than one output are kept. */
#ifndef CLRUN_REMAT_H
#define CLRUN_REMAT_H

#include <stddef.h>
#include <stdint.h>

#include <clrun/graph.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a rewrite did. */
typedef struct clrun_remat_report {
    int32_t dropped;          /* forward tensors no longer held into the second part */
    int32_t repeated_nodes;   /* nodes added to compute them again */
    uint64_t dropped_bytes;   /* the dropped tensors' bytes (their sum, not a peak), which the
                                 repeated nodes write again */
    uint64_t repeated_flops;  /* the repeated nodes' arithmetic, estimated: two per
                                 multiply-add of a product (matmul, gemm, conv2d), one per
                                 output element of the other ops */
} clrun_remat_report;

/* Rewrites `graph` in place by `policy` (the text above; NULL or "" is "none"): nodes
 * [0, boundary) are the first part, [boundary, node count) the second. Tensor ids, names,
 * inputs and outputs do not change; the repeated nodes are added (their outputs named
 * "NAME.remat", or "NAME.remat2" ... where that is taken) and placed before their first reader in
 * the second part. report (may be NULL) says what was done.
 *
 * CLRUN_ERROR_INVALID_ARGUMENT for an unknown policy, a names: or except: entry that names no
 * tensor, or a
 * boundary outside [0, node count]; the graph is then unchanged. On
 * CLRUN_ERROR_OUT_OF_HOST_MEMORY the graph is left half rewritten, no longer a graph that runs:
 * destroy it. The message is the graph's last error.
 *
 * The repeated nodes' outputs have the highest tensor ids but run before nodes declared earlier:
 * written out (clrun_graph_write) and read back, the graph is the same graph with its tensors
 * numbered in declaration order. */
clrun_status clrun_graph_remat(clrun_graph *graph, int32_t boundary, const char *policy,
                               clrun_remat_report *report);

/* The length of the name a repeated node's output copies when `name` is such an output
 * ("h1.remat" and "h1.remat2" give 2, the length of "h1"); 0 for any other name and for NULL.
 * Traces and reports use it to tell the recomputed tensors. */
size_t clrun_remat_copy_of(const char *name);

#ifdef __cplusplus
}
#endif
#endif
