/* Rewriting a graph without touching it: a draft is an editable copy of a graph whose every
 * allocation lives in one arena, freed at once with the rewritten graph. Tensors are shallow
 * copies (names, constant data and attributes stay the original graph's, which must outlive the
 * draft); passes mark nodes removed, turn tensors into constants, add tensors and nodes; finish
 * drops what nothing uses and renumbers. Pure C: no OpenCL. */
#ifndef CLRUN_LIB_FUSE_DRAFT_H
#define CLRUN_LIB_FUSE_DRAFT_H

#include <stdbool.h>
#include <stddef.h>

#include "graph/graph.h"

typedef struct clrun__arena {
    void **blocks;   /* every allocation, freed together */
    size_t count;
    size_t capacity;
} clrun__arena;

/* Zeroed memory that lives until clrun__arena_free; NULL when out of memory. */
void *clrun__arena_alloc(clrun__arena *arena, size_t bytes);
char *clrun__arena_strdup(clrun__arena *arena, const char *text);
void clrun__arena_free(clrun__arena *arena);

/* A draft: a clrun_graph in the arena with room for `extra_tensors` and `extra_nodes` more
 * (tensor_capacity, node_capacity). A removed node has op NULL. */
clrun_graph *clrun__draft_begin(clrun__arena *arena, const clrun_graph *base, int32_t extra_tensors,
                                int32_t extra_nodes);

/* Node i computes nothing any more; its outputs have no producer until another node takes
 * them. */
void clrun__draft_remove_node(clrun_graph *draft, int32_t node);

/* A new node (op, inputs, one output) appended (after every node: passes that need it earlier
 * replace a node in place instead); -1 without room. The arrays are copied. */
int32_t clrun__draft_add_node(clrun__arena *arena, clrun_graph *draft, const clrun__op *op,
                              const int32_t *inputs, int input_count, int32_t output,
                              const clrun_attr *attrs, int attr_count);

/* Node `node` becomes op over inputs with one output (its other outputs lose their producer);
 * false when out of memory. The arrays are copied. */
bool clrun__draft_set_node(clrun__arena *arena, clrun_graph *draft, int32_t node, const clrun__op *op,
                           const int32_t *inputs, int input_count, int32_t output,
                           const clrun_attr *attrs, int attr_count);

/* The same with several outputs (outputs[0..output_count)). */
bool clrun__draft_set_node_outputs(clrun__arena *arena, clrun_graph *draft, int32_t node,
                                   const clrun__op *op, const int32_t *inputs, int input_count,
                                   const int32_t *outputs, int output_count);

/* A new constant tensor of `type` holding `data` (arena memory, or the caller's for the life of
 * the draft); -1 without room. */
int32_t clrun__draft_add_constant(clrun_graph *draft, const char *name, const clrun_tensor_type *type,
                                  void *data);

/* The same, named after tensor `of` with `suffix` ("w.scale" for "w" and ".scale"); -1 without
 * room in the draft or in the arena. */
int32_t clrun__draft_add_derived(clrun__arena *arena, clrun_graph *draft, int32_t of, const char *suffix,
                                 const clrun_tensor_type *type, void *data);

/* Consumers: for each tensor, the number of inputs of live nodes that read it. `counts` has
 * tensor_count entries. */
void clrun__draft_count_reads(const clrun_graph *draft, int32_t *counts);

/* The finished graph: live nodes in the draft's order, which passes keep topological (a node
 * placed before a producer of its inputs makes this fail), and the tensors that are graph
 * inputs, outputs or read or written by a live node, renumbered. NULL when out of memory. */
clrun_graph *clrun__draft_finish(clrun__arena *arena, const clrun_graph *draft);

#endif
