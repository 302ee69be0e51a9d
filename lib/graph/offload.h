/* Host offload as a rewrite of a graph (pure C, no OpenCL), the other way than recomputation
 * (include/clrun/remat.h) to free device memory across a moment of peak: a tensor written
 * before a boundary and read again after it is copied to host memory right after it is
 * written (an `offload` node, whose output the executor keeps in a host-allocated buffer
 * outside the device's accounting) and copied back into a new device tensor right before its
 * first reader after the boundary (a `reload` node); the readers after the boundary read the
 * reloaded tensor. The copies move bits, so every output keeps its bits; between them the
 * device holds nothing of the tensor.
 *
 * Which of the two a tensor takes is a cost: recomputing it repeats its node's arithmetic,
 * offloading it moves its bytes twice. clrun__offload_prefers weighs them by the device's
 * rate, given as the FLOPs it computes in the time it moves one byte between device and host
 * (CLRUN_OFFLOAD_RATE, read with the other options: core/options.c; by default `auto`,
 * measured on the device: exec/exec_rate.c). */
#ifndef CLRUN_LIB_GRAPH_OFFLOAD_H
#define CLRUN_LIB_GRAPH_OFFLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph/graph.h"

/* The rate taken where the measurement fails (CLRUN_OFFLOAD_RATE=auto) is conservative: a
 * device that computes about 100 GFLOP/s over a host link of about 10 GB/s. Discrete GPUs are
 * faster at both, and faster at compute by more: they favour offload even more rarely. */
#define CLRUN__OFFLOAD_RATE_FALLBACK 10.0

/* Whether offloading `bytes` (moved twice) costs less than recomputing `flops` at `rate`
 * FLOPs per byte moved. */
bool clrun__offload_prefers(uint64_t flops, uint64_t bytes, double rate);

/* The rate from what a device did: `flops` of a product in compute_s seconds, `bytes` moved
 * between device and host memory in copy_s seconds: the FLOPs it computes in the time it moves
 * one byte. 0 when a figure is not positive or the rate not finite (nothing measured). */
double clrun__offload_rate_of(double flops, double compute_s, double bytes, double copy_s);

/* The arithmetic of one run of node `node`, estimated (clrun_remat_report.repeated_flops sums
 * it over the repeated nodes): two per multiply-add of a product (matmul, gemm: the output's
 * elements times the reduced length; conv2d: times a filter's taps), one per output element
 * otherwise. */
uint64_t clrun__offload_node_flops(const clrun_graph *graph, int32_t node);

/* What an offload rewrite did. */
typedef struct clrun__offload_report {
    int32_t offloaded;   /* tensors copied out and back */
    uint64_t bytes;      /* their bytes (a sum); each run moves twice as many */
    int32_t added_before; /* nodes added before the boundary (the `offload` nodes): the
                             boundary's node moved by as many */
} clrun__offload_report;

/* Rewrites `graph` in place: each of tensors[0..count) (written by a node before `boundary`,
 * read by one at or after it; neither an input, a constant nor an output) is offloaded as the
 * header says; its copies are named "NAME.host" and "NAME.reload" (a digit after where taken).
 * hosts (may be NULL) gets each one's host copy. Tensor ids and names do not change. CLRUN_ERROR_INVALID_ARGUMENT (the graph unchanged) for a
 * tensor that is not one of those, named; CLRUN_ERROR_OUT_OF_HOST_MEMORY leaves the graph half
 * rewritten: destroy it. */
clrun_status clrun__graph_offload(clrun_graph *graph, int32_t boundary, const int32_t *tensors,
                                  int32_t count, clrun_tensor_id *hosts,
                                  clrun__offload_report *report);

/* The same, each copy back placed `lead` nodes before its first reader after the boundary
 * (never before the boundary's node unless that node reads it; 0: right before the reader), so
 * that a copy running beside the kernels (CLRUN_OFFLOAD_OVERLAP) has those nodes' time to land:
 * the copy's destination is alive from there on, which the planner sees. */
clrun_status clrun__graph_offload_lead(clrun_graph *graph, int32_t boundary, const int32_t *tensors,
                                       int32_t count, int32_t lead, clrun_tensor_id *hosts,
                                       clrun__offload_report *report);

/* The tensors an offload at `boundary` may take, in id order, into out (room for the graph's
 * tensor count): intermediates, not outputs, written before the boundary and read at or after
 * it. Returns their number. */
int32_t clrun__offload_crossing(const clrun_graph *graph, int32_t boundary, int32_t *out);

/* The length of the name an offload's tensor copies ("h1.host", "h1.reload2" give 2), 0 for
 * any other name. */
size_t clrun__offload_copy_of(const char *name);

#endif
