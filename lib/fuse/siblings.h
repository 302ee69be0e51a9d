/* Sibling fusion (siblings.c): fused groups that read a tensor in common over the same
 * iteration space become one kernel with several outputs. */
#ifndef CLRUN_LIB_FUSE_SIBLINGS_H
#define CLRUN_LIB_FUSE_SIBLINGS_H

#include "fuse/draft.h"
#include "fuse/group.h"
#include "ops/fused.h"

/* One fused node to be: its op, the draft tensors of its inputs and outputs, the plan's groups
 * it holds, and the node whose place it takes (the last root). */
typedef struct clrun__fuse_unit {
    clrun__fused_op *op;
    int32_t *inputs;
    int32_t outputs[CLRUN__FUSED_MAX_OUTPUTS];
    int32_t groups[CLRUN__FUSED_MAX_OUTPUTS];
    int group_count;
    int32_t root;
} clrun__fuse_unit;

/* Merges units[0..count) where siblings may share a kernel (never epilogues), within
 * max_buffers buffers a kernel; returns how many units are left (compacted in order), or -1
 * when out of memory. */
int clrun__fuse_merge_siblings(clrun__arena *arena, const clrun_graph *draft, clrun__fuse_unit *units,
                               int count, int max_buffers);

#endif
