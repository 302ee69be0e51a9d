/* The rewrites an executor applies to a graph once, at creation: constant folding and batch
 * norms folded into convolutions (fold.h), then elementwise fusion (groups of elementwise ops
 * become one generated kernel each; group.h decides, codegen.h writes them).
 * The generated kernels are built here, in one clBuildProgram per executor (cached on disk,
 * keyed by a hash of their text); a program that does not build is retried group by group, and
 * a group that still does not build runs unfused, with a warning in the log: never a failed
 * run. The rewritten graph borrows names, constants and attributes from the original, which
 * must outlive it. */
#ifndef CLRUN_LIB_FUSE_FUSE_H
#define CLRUN_LIB_FUSE_FUSE_H

#include <CL/cl.h>

#include <clrun/context.h>
#include <clrun/graph.h>

#include "fuse/draft.h"

/* A fused group as the executor reports it (its clrun_fused_group, <clrun/exec.h>, copies
 * these fields: fusion sits below the executor and does not see its header). */
typedef struct clrun__fused_group {
    const char *name;   /* "fused:add+gelu" */
    const char *output; /* the tensor it writes */
    int32_t nodes;      /* nodes of the graph it holds */
} clrun__fused_group;

typedef struct clrun__fusion {
    const clrun_graph *graph;  /* what to run: the rewritten graph, or the original one */
    clrun__arena arena;        /* everything the rewrite made */
    int32_t nodes_before;      /* nodes of the original graph */
    int32_t group_count;       /* fused groups that run */
    int32_t fused_nodes;       /* nodes of the original graph inside them */
    int32_t folded_nodes;      /* nodes evaluated at load into constants (batch norms folded
                                  into convolutions among them) */
    int32_t folded_batchnorms; /* of those, batch norms folded into convolutions */
    clrun__fused_group *groups; /* what each group holds, for clrun_exec_fused_groups */
    cl_program *programs;      /* the built programs of the groups, held until free */
    int32_t program_count;
} clrun__fusion;

/* Rewrites `graph` (validated) for ctx into *out: with `fold`, constant nodes and batch norms
 * after convolutions are folded; with `fuse`, groups of nodes become one kernel each; with
 * neither, *out runs the graph as it is. Errors (out of host memory, a failed OpenCL query) go
 * to ctx. */
clrun_status clrun__fuse(clrun_context *ctx, const clrun_graph *graph, bool fuse, bool fold,
                         clrun__fusion *out);

/* Frees what the rewrite made. Safe on a zeroed or failed fusion. */
void clrun__fusion_free(clrun_context *ctx, clrun__fusion *fusion);

/* Tests only: a group holding an op of this name is generated with a kernel that does not
 * compile, so that the fallback runs. Set from one thread, before creating executors. */
extern const char *clrun__fuse_test_poison;
/* Tests: true takes every epilogue, also those the device's cost rule leaves to their own kernel
 * (math-library calls on a CPU, lib/fuse/epilogue.c), so that their bits are checked on POCL. */
extern bool clrun__fuse_every_epilogue;
/* Tests: false leaves a group that updates donated state to its own kernel, as before such
 * groups joined a product (lib/fuse/epilogue.c), to compare bits and peaks. Default true. */
extern bool clrun__fuse_state_epilogues;
/* Tests: where epilogues share a set (lib/fuse/epilogue.c): 1 (the default) where the driver
 * compiles at launch, 0 nowhere (each its own source, as before sets, to compare bits), 2 on
 * every driver (so that oclgrind checks the sets' kernels). */
extern int clrun__epilogue_sets;

#endif
