/* The graph's insides, shared by the builder (lib/graph.c), the text format (lib/graph_io.c)
 * and the executor (lib/schedule.c, lib/exec.c). */
#ifndef CLRUN_LIB_GRAPH_H
#define CLRUN_LIB_GRAPH_H

#include <clrun/graph.h>

#include "ops.h"

typedef enum clrun__tensor_kind {
    CLRUN__TENSOR_INPUT,        /* given by the caller at run time */
    CLRUN__TENSOR_CONSTANT,     /* weights: resident, never released during runs */
    CLRUN__TENSOR_INTERMEDIATE, /* produced by a node */
} clrun__tensor_kind;

typedef struct clrun__tensor {
    char *name;              /* unique in the graph */
    clrun_tensor_type type;
    clrun__tensor_kind kind;
    bool donated;            /* input only: the caller gives its buffer up */
    bool is_output;          /* marked as a graph output */
    int32_t producer;        /* node index, -1 for inputs and constants */
    void *data;              /* constant with explicit data (owned), else NULL */
    clrun_fill fill;         /* constant without data: how to fill it */
    double fill_a, fill_b;   /* fill parameters */
    uint64_t seed;           /* fill seed */
    int line;                /* where it was declared in a .graph file; 0 from the API */
} clrun__tensor;

typedef struct clrun__node {
    const clrun__op *op;
    int32_t *inputs;         /* tensor ids */
    int input_count;
    int32_t *outputs;        /* tensor ids */
    int output_count;
    clrun_attr *attrs;       /* names owned by the node */
    int attr_count;
    int line;                /* where it was declared in a .graph file; 0 from the API */
} clrun__node;

struct clrun_graph {
    char *name;
    clrun__tensor *tensors;
    int32_t tensor_count;
    int32_t tensor_capacity;
    clrun__node *nodes;
    int32_t node_count;
    int32_t node_capacity;
    clrun_tensor_id *inputs;  /* graph inputs in declaration order */
    int32_t input_count;
    clrun_tensor_id *outputs; /* graph outputs in marking order */
    int32_t output_count;
    char last_error[1024];
};

/* The op call view of a node (types pointed into a caller array of size >= inputs+outputs). */
void clrun__node_call(const clrun_graph *graph, const clrun__node *node, clrun_tensor_type *types,
                      clrun__op_call *call);

/* Fills `out` (clrun_tensor_bytes of the type) with the constant's values: its data, or its
 * deterministic fill. Same bits on every machine. */
void clrun__constant_values(const clrun__tensor *tensor, void *out);

#endif
