/* Which elementwise nodes run as one kernel: the decision of elementwise fusion, pure C.
 *
 * Layout nodes of one input (transpose, slice, reshape, expand...) may join a group too, as its
 * leaves: chains of them that a group reads through (index arithmetic on its loads), or a
 * group of them alone (one copy for a chain of moves). A group forms when it saves a kernel
 * (two members that are not reshape, which is a view of its input anyway).
 *
 * A group grows from its root, the node whose output leaves the group, by taking in the
 * producer of one of its inputs when that input is read by the group alone (by one node: each
 * inner intermediate has a single consumer), is not a graph output, and has the root's shape up
 * to dimensions of 1 (so every op of the group is computed once per output element, none
 * recomputed), while the group's distinct inputs plus its output stay within max_buffers and its
 * ops within max_steps. Groups are trees of elementwise ops with one output each, which is what
 * XLA's loop fusion makes of single-use producers; merging along a single-use edge cannot make
 * a cycle. Nodes are visited in graph order, producers first, so every group is as large as the
 * limits allow. */
#ifndef CLRUN_LIB_FUSE_GROUP_H
#define CLRUN_LIB_FUSE_GROUP_H

#include <stdbool.h>
#include <stdint.h>

#include "graph/graph.h"

typedef struct clrun__fuse_limits {
    int max_buffers;      /* inputs plus the output of one fused kernel (>= 3) */
    int max_steps;        /* ops in one group */
    bool fp64;            /* the device runs f64: groups may hold f64 ops */
    bool layout;          /* layout ops (transpose, slice, reshape...) may be a group's leaves */
    const bool *excluded; /* per node: never fused (a group that did not build); may be NULL */
} clrun__fuse_limits;

typedef struct clrun__fuse_plan {
    int32_t *group_of;     /* per node: its group, -1 for a node that runs alone */
    int32_t group_count;   /* groups, each of two nodes or more */
    int32_t *members;      /* every group's nodes, group after group, each in graph order, so a
                              group's last node is its root */
    int32_t *member_start; /* group g holds members[member_start[g] .. member_start[g + 1]) */
} clrun__fuse_plan;

/* Plans the groups of a graph (a draft: nodes with op NULL are skipped). On failure (out of
 * memory) *out is empty and CLRUN_ERROR_OUT_OF_HOST_MEMORY is returned. */
clrun_status clrun__fuse_plan_groups(const clrun_graph *graph, const clrun__fuse_limits *limits,
                                     clrun__fuse_plan *out);
void clrun__fuse_plan_free(clrun__fuse_plan *plan);

/* True for the ops that only move the elements of their one input, each output element one
 * input element (graph/layout_geometry.h's views): they may lead a group's reads. */
bool clrun__fuse_is_layout(const clrun__op *op);

/* True when a and b have the same dimensions once those of 1 are dropped: the same elements in
 * the same row-major order. */
bool clrun__same_iteration_space(const clrun_tensor_type *a, const clrun_tensor_type *b);

#endif
