/* Epilogues (epilogue.c): elementwise groups that alone read a matmul's or conv2d's output run
 * inside its kernel, before its single store. */
#ifndef CLRUN_LIB_FUSE_EPILOGUE_H
#define CLRUN_LIB_FUSE_EPILOGUE_H

#include "fuse/fuse.h"
#include "fuse/group.h"

/* Joins each matmul and conv2d of the draft with the group (of the plan, or a lone elementwise
 * node) that alone reads its output, where that fits; marks the plan's groups it took in taken[]
 * and records each as one of f's groups (f->groups has room for one per node). Errors (host
 * memory) go to ctx; an epilogue that does not build is a warning, and stays unfused. */
clrun_status clrun__fuse_epilogues(clrun_context *ctx, clrun__arena *arena, clrun_graph *draft,
                                   const clrun__fuse_plan *plan, bool *taken, clrun__fusion *f);

#endif
