/* The graph's insides, shared by the builder (graph.c and its helpers), the text format
 * (graph_read.h, graph_write.c) and the executor (lib/exec/). */
#ifndef CLRUN_LIB_GRAPH_H
#define CLRUN_LIB_GRAPH_H

#include <clrun/graph.h>

#include "graph/op.h"
#include "graph/types.h"

typedef enum clrun__tensor_kind {
    CLRUN__TENSOR_INPUT,        /* given by the caller at run time */
    CLRUN__TENSOR_CONSTANT,     /* weights: resident, never released during runs */
    CLRUN__TENSOR_INTERMEDIATE, /* produced by a node */
} clrun__tensor_kind;

typedef struct clrun__tensor {
    char *name;              /* unique in the graph: the text format's identifier */
    char *model_name;        /* the name in the model it came from (owned), NULL: name */
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
    char *model_name;        /* the model's node it comes from (owned by the graph), or NULL */
    /* Guarded: the node runs only when the one-element bool tensor `guard` is true (false with
     * guard_negate); otherwise the executor skips its kernels, keeping its memory bookkeeping
     * (an If's branches, both planned). */
    bool guarded;
    bool guard_negate;
    int32_t guard;
} clrun__node;

/* An open-addressing hash index from names to entries (small integers: tensor ids, parser
 * statements). The names live with the owner; name_of(owner, entry) reads them. */
typedef struct clrun__name_index {
    int32_t *slots;    /* entry, or -1 for an empty slot */
    uint32_t capacity; /* a power of two, kept above twice count; 0 before the first reserve */
    int32_t count;     /* entries added */
} clrun__name_index;

typedef const char *(*clrun__name_of)(const void *owner, int32_t entry);

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
    int32_t input_capacity;   /* allocated entries of inputs */
    int32_t output_capacity;  /* allocated entries of outputs */
    clrun__name_index names;  /* tensor name -> id */
    clrun__name_index model_names; /* model name -> id (the first tensor given it) */
    char last_error[1024];
};

/* What a person sees for a tensor: its model name, else its name. */
static inline const char *clrun__tensor_label(const clrun__tensor *tensor)
{
    return tensor->model_name ? tensor->model_name : tensor->name;
}

/* Guards node `node` (see clrun__node): refuses a guard that is not a one-element bool tensor
 * produced before the node (or an input or constant). */
clrun_status clrun__graph_set_guard(clrun_graph *graph, int32_t node, clrun_tensor_id guard, bool negate);
/* Whether any node of the graph is guarded. */
bool clrun__graph_has_guards(const clrun_graph *graph);

/* The tensor whose identifier (not model name) is `name`, or -1. */
clrun_tensor_id clrun__graph_find_ident(const clrun_graph *graph, const char *name);

/* Records the reason on the graph (may be NULL) and as this thread's last error; returns
 * status. */
clrun_status clrun__graph_fail(clrun_graph *graph, clrun_status status, const char *format, ...)
    CLRUN__PRINTF(3, 4);

/* clrun_graph_add_constant with the values taken, not copied: `data` (malloc'd, not NULL,
 * clrun_tensor_bytes(type) bytes) becomes the tensor's own, freed with the graph. On failure
 * nothing is taken: the caller still owns data. */
clrun_status clrun__graph_add_constant_owned(clrun_graph *graph, const char *name,
                                            const clrun_tensor_type *type, void *data,
                                            clrun_tensor_id *id);

/* Refuses fill parameters that do not describe a real distribution for the dtype, naming the
 * tensor `name`, through clrun__graph_fail. */
clrun_status clrun__check_fill(clrun_graph *graph, const char *name, clrun_dtype dtype,
                               clrun_fill fill, double a, double b);

/* A topological order of the nodes into order[0..node_count): declaration order when that is
 * one (as for every graph the builder makes), else Kahn's algorithm; O(N + E).
 * CLRUN_ERROR_INVALID_GRAPH for a cycle, CLRUN_ERROR_OUT_OF_HOST_MEMORY. */
clrun_status clrun__graph_order(const clrun_graph *graph, int32_t *order);

/* The op call view of a node (types pointed into a caller array of size >= inputs+outputs). */
void clrun__node_call(const clrun_graph *graph, const clrun__node *node, clrun_tensor_type *types,
                      clrun__op_call *call);

/* Fills `out` (clrun_tensor_bytes of the type) with the constant's values: its data, or its
 * deterministic fill. Same bits on every machine. */
void clrun__constant_values(const clrun__tensor *tensor, void *out);
/* The same for elements [first, first + count) only, so that a large constant can be made in
 * pieces (the fill is counter-based: any element alone). */
void clrun__constant_values_range(const clrun__tensor *tensor, uint64_t first, uint64_t count,
                                  void *out);

/* ---- shared by the builder, the text format and the tools ---- */

/* Longest tensor, attribute or graph name. A name is letters, digits, '_' and '.', starting
 * with a letter or '_': what the text format can write back. */
#define CLRUN__GRAPH_NAME_MAX 255
bool clrun__name_valid(const char *name);
static inline bool clrun__name_char(char c)
{
    return c == '_' || c == '.' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9');
}


/* The name index: find gives the entry or -1; reserve makes room for `entries` in all, so that
 * the adds up to that count cannot fail; add assumes the name is absent. */
int32_t clrun__name_index_find(const clrun__name_index *index, const char *name,
                               clrun__name_of name_of, const void *owner);
clrun_status clrun__name_index_reserve(clrun__name_index *index, int32_t entries,
                                       clrun__name_of name_of, const void *owner);
void clrun__name_index_add(clrun__name_index *index, const char *name, int32_t entry);
void clrun__name_index_free(clrun__name_index *index);


/* True when a and b are the same graph: names, tensors (types, kinds, flags, constant data and
 * fill), nodes (ops, tensor ids, attributes bit for bit), input and output lists. Declaration
 * lines are not compared. Otherwise the first difference goes to why (may be NULL). */
bool clrun__graph_equal(const clrun_graph *a, const clrun_graph *b, char *why, size_t whylen);

/* Attribute constructors for nodes a rewrite adds (the name is not copied: pass literals; a
 * list is cut at CLRUN_MAX_ATTR_INTS). */
clrun_attr clrun__gattr_int(const char *name, int64_t value);
clrun_attr clrun__gattr_float(const char *name, double value);
clrun_attr clrun__gattr_ints(const char *name, const int64_t *values, int count);

/* Moves the nodes added at [first_added, node count), each right before the node
 * anchor[k - first_added] names (an earlier node; those with one anchor keep their order), and
 * renumbers the producers: how a rewrite puts what it adds where it is needed. */
clrun_status clrun__graph_place_added(clrun_graph *graph, int32_t first_added, const int32_t *anchor);

/* Tests: clrun_graph_narrow_weights widens every weight by cast (and mul) nodes before its
 * reader, as it did before matmul's and conv2d's kernels read narrow weights themselves: the
 * bits those kernels must give. false by default. */
extern bool clrun__narrow_weights_by_nodes;

#endif
