/* Rematerialisation by the tensor (include/clrun/remat.h has the rewrite by policy): for a
 * caller that chooses the tensors to recompute one by one, by id, as the trainer's budget does
 * when it weighs each activation's recomputation against moving it to host memory
 * (train/train_budget.c). Pure C, no OpenCL. */
#ifndef CLRUN_LIB_GRAD_REMAT_DROP_H
#define CLRUN_LIB_GRAD_REMAT_DROP_H

#include <stdint.h>

#include <clrun/remat.h>

/* clrun_graph_remat keeping every tensor but drop[0..count) (count 0: the graph unchanged).
 * Each of them must be one a policy may drop: written by a first-part node that has no other
 * output, neither a graph output nor an input; CLRUN_ERROR_INVALID_ARGUMENT (the graph
 * unchanged) names the first that is not. Otherwise as clrun_graph_remat. */
clrun_status clrun__graph_remat_drop(clrun_graph *graph, int32_t boundary, const int32_t *drop,
                                     int32_t count, clrun_remat_report *report);

#endif
