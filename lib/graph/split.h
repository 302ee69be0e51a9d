/* Pipeline split (pure C, no OpenCL): cutting a graph's schedule into consecutive stages, one per
 * device, each within its device's byte budget, where the fewest bytes cross the cuts; and each
 * stage as a graph of its own, whose inputs are the tensors that cross into it. */
#ifndef CLRUN_LIB_GRAPH_SPLIT_H
#define CLRUN_LIB_GRAPH_SPLIT_H

#include <stddef.h>
#include <stdint.h>

#include "graph/graph.h"

/* One stage: steps [first, end) of the order. The estimate is what the stage holds at its peak
 * by the schedule's live ranges: every constant its steps read (weights), every tensor it reads
 * from outside (graph inputs, earlier stages' activations: held through the whole stage), and
 * the largest total of its own tensors alive at one step (alive from the step that writes them
 * to their last reader, in this stage or later, or to the end for graph outputs). No in-place
 * reuse is assumed and no scratch is counted: an estimate, as the executor's budget is. */
typedef struct clrun__split_stage {
    int32_t first;
    int32_t end;
    uint64_t weights;
    uint64_t inputs;      /* read from outside: graph inputs and activations of earlier stages */
    uint64_t activations; /* the peak of its own tensors */
    uint64_t estimate;    /* weights + inputs + activations */
    uint64_t bytes_in;    /* activations of earlier stages it reads (moved in per run) */
    uint64_t bytes_out;   /* activations it writes that later stages read (moved out per run) */
} clrun__split_stage;

typedef struct clrun__split {
    int32_t stages;
    clrun__split_stage *stage; /* malloc'd, `stages` entries */
    uint64_t crossing;         /* sum over the cuts of the activation bytes crossing each */
} clrun__split;

/* Cuts the graph's nodes, in `order` (a topological order of every node, as the executor's
 * schedule runs them; NULL: the graph's own, clrun__graph_order), into exactly `devices`
 * non-empty consecutive stages, stage k's estimate within budgets[k] (0: no limit), minimising
 * the bytes crossing the cuts (activations written before a cut and read after it); of cuts that
 * cross as few, those whose largest stage estimate is least, then the earliest.
 * CLRUN_ERROR_INVALID_ARGUMENT for no devices or fewer nodes than devices;
 * CLRUN_ERROR_OUT_OF_MEMORY, saying what the whole graph and its largest step need, when no cut
 * fits; the reason goes to err (may be NULL) and clrun_last_error(NULL). *out is untouched on
 * failure. */
clrun_status clrun__split_find(const clrun_graph *graph, const int32_t *order,
                               const uint64_t *budgets, int32_t devices, clrun__split *out,
                               char *err, size_t errlen);

/* Frees what clrun__split_find allocated (a zeroed split is accepted). */
void clrun__split_free(clrun__split *split);

/* The graph of steps [first, end) of `order` (NULL: the graph's own), named `name` (may be NULL):
 * its inputs are the tensors its nodes read that none of them writes (graph inputs and earlier
 * activations; never donated), in id order; its constants those its nodes read; its outputs the
 * tensors it writes that are graph outputs or read by a later step, in id order, and, when it
 * ends the order, the graph outputs that are inputs or constants. Tensors keep their
 * identifiers and model names, nodes their attributes, guards and model names. On failure *out
 * is NULL and err says why. */
clrun_status clrun__split_stage_graph(const clrun_graph *graph, const int32_t *order, int32_t first,
                                      int32_t end, const char *name, clrun_graph **out, char *err,
                                      size_t errlen);

#endif
