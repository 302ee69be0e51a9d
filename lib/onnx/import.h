/* The ONNX importer's insides, shared by the driver (import.c), the helpers that build graph
 * nodes (emit.c), the attribute readers (attrs.c), the host evaluator (fold*.c) and the operator
 * mappings (map_*.c).
 *
 * Every ONNX value (graph input, initializer, node output) and every temporary the mappings make
 * is a `value`: a host constant (known at load: initializers, Constant nodes and whatever was
 * folded from them), a device tensor of the graph being built, or absent (an optional input or
 * output left empty). A mapping reads its node's inputs as values and defines its outputs, either
 * by folding (the result is a host constant) or by emitting graph nodes. Host constants become
 * graph constants only when a device node reads them. Pure C: no OpenCL. */
#ifndef CLRUN_LIB_ONNX_IMPORT_H
#define CLRUN_LIB_ONNX_IMPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <clrun/graph.h>
#include <clrun/onnx.h>

#include "core/error.h"
#include "core/log.h"
#include "graph/graph.h"
#include "onnx/onnx.pb-c.h"
#include "onnx/tensor.h"

typedef enum clrun__value_kind {
    CLRUN__VALUE_ABSENT = 0, /* not (yet) defined, or an empty optional name */
    CLRUN__VALUE_CONST,      /* a host tensor */
    CLRUN__VALUE_DEVICE,     /* a tensor of the graph */
} clrun__value_kind;

typedef struct clrun__value {
    const char *onnx_name;   /* NULL for temporaries (points into the model) */
    char *name;              /* clrun name (owned), reserved at load start for ONNX values */
    clrun__value_kind kind;
    clrun__otensor c;        /* CONST: the tensor; DEVICE: elem, rank and dims only */
    clrun_tensor_id id;      /* the graph tensor, -1 until a CONST one is needed on the device */
    bool graph_input;        /* a graph input */
    char *hidden;            /* owned: the unfindable name an unrolled iteration's value takes
                                once its iteration is done (onnx_name then points here) */
    bool capacity_rows;      /* dims[0] is a capacity, the rows used known at run time only
                                (NonMaxSuppression's output): a model may declare fewer */
    int declared_elem;       /* the element type the main graph's value_info declares for this
                                node output (0: none): the node must produce it */
} clrun__value;

/* One node being imported. */
typedef struct clrun__onode {
    const Onnx__NodeProto *proto;
    int index;               /* in the model's node list */
    const char *op;          /* op_type */
    int version;             /* the operator version in force (its since_version) */
    clrun__value **in;       /* n_in entries; NULL for an absent optional input */
    int n_in;
    int32_t *out;            /* n_out value indices, -1 for an empty (unused) output name */
    int n_out;
    bool *attr_used;         /* per attribute of the proto: read by the mapping */
} clrun__onode;

typedef struct clrun__imp {
    const char *filename;    /* for messages */
    const clrun_onnx_options *options;
    char *dir;               /* external data folder (owned; NULL = current folder) */
    const Onnx__ModelProto *model;
    int64_t opset;           /* of the default domain */
    clrun_graph *graph;
    clrun__value **values;   /* each allocated on its own, so pointers to values stay valid */
    int32_t value_count;
    size_t value_capacity;
    clrun__name_index onnx_names;  /* onnx name -> value index (ONNX values only) */
    clrun__name_index clrun_names; /* clrun name -> value index (every value with a name) */
    int32_t temp_counter;
    int32_t collisions;      /* ONNX names whose clrun form was taken (see unique_name) */
    clrun__onode *node;      /* the node being imported, for messages; NULL outside nodes */
    int depth;               /* subgraphs being inlined (If's branch inside a branch...) */
    /* While an If's branch is imported (its condition known only at run time): every graph node
     * emitted runs only when this one-element bool device value is true (false: guard_negate). */
    clrun__value *guard;
    bool guard_negate;
    char message[CLRUN__ERROR_MAX];
} clrun__imp;

/* ---- failures ---- */

/* Records "FILE: message" (outside a node) or "FILE: node I 'NAME' (OP, opset V): message" and
 * returns status. */
clrun_status clrun__imp_fail(clrun__imp *im, clrun_status status, const char *format, ...)
    CLRUN__PRINTF(3, 4);
#define CLRUN__OOM(im) clrun__imp_fail((im), CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory")
/* Refusals of what clrun does not do (CLRUN_ERROR_UNSUPPORTED) and of what is wrong with the model
 * (CLRUN_ERROR_INVALID_GRAPH). */
#define clrun__unsupported(im, ...) clrun__imp_fail((im), CLRUN_ERROR_UNSUPPORTED, __VA_ARGS__)
#define clrun__invalid(im, ...) clrun__imp_fail((im), CLRUN_ERROR_INVALID_GRAPH, __VA_ARGS__)

/* ---- values (values.c) ---- */

/* The value of an ONNX name, or -1. */
int32_t clrun__imp_find(clrun__imp *im, const char *onnx_name);
/* A new ONNX value for a name the model defines; refuses a name defined twice. `what` says
 * which ("an input"). */
clrun_status clrun__imp_declare(clrun__imp *im, const char *onnx_name, const char *what, int32_t *index);
/* Names a temporary at its first emission, after the node's first named output; NULL when out
 * of memory. */
char *clrun__imp_temp_name(clrun__imp *im, const clrun__onode *n, int32_t index);
void clrun__imp_free_values(clrun__imp *im);
/* The node's domain ("" for the default) and the opset the model imports for a domain (-1:
 * none). */
const char *clrun__imp_domain(const Onnx__NodeProto *node);
int64_t clrun__imp_domain_opset(const clrun__imp *im, const char *domain);

/* ---- inputs (inputs.c) ---- */

/* Refuses a dim, shape or constant of the options that names nothing of the model, and
 * bindings that disagree. */
clrun_status clrun__imp_check_options(clrun__imp *im, const Onnx__GraphProto *g);
/* Declares every ONNX value (inputs, initializers decoded, node outputs, whose producing node
 * goes to producer[value] unless producer is NULL) and adds the graph inputs with their bound
 * dimensions. */
clrun_status clrun__imp_declare_all(clrun__imp *im, const Onnx__GraphProto *g, int32_t *producer);
/* Dead folded constants: the readers of every value declared so far (nodes' inputs; a graph
 * output never dies) into *readers (malloc'ed, value_count entries); and, after a node, the
 * host data of the constants made at import (folded, copied) that it read last, freed. */
clrun_status clrun__imp_count_readers(clrun__imp *im, const Onnx__GraphProto *g, int32_t **readers);
void clrun__imp_release_inputs(clrun__imp *im, const Onnx__NodeProto *node, int32_t *readers,
                               int32_t counted);

/* ---- subgraphs (import.c) ---- */

/* At most this many subgraphs inlined one inside another (a model cannot exhaust the stack). */
#define CLRUN__ONNX_MAX_NESTING 16

/* Imports subgraph g (the branch an If takes) where the node being imported stands: its
 * initializers and node outputs become values (a subgraph's names are distinct from those of the
 * scopes it sees, as ONNX requires), its nodes are imported in order. The caller then aliases
 * the node's outputs to g's. */
clrun_status clrun__imp_inline_graph(clrun__imp *im, const Onnx__GraphProto *g);

/* Imports body g once (an iteration of an unrolled Scan or Loop): its inputs are the values
 * inputs[0..g->n_input) under the body's names, its outputs' values go to outputs[0..n_output).
 * Afterwards the iteration's names are hidden, so the next iteration can declare them again. */
clrun_status clrun__imp_inline_body(clrun__imp *im, const Onnx__GraphProto *g, clrun__value *const *inputs,
                                    clrun__value **outputs);

/* ---- values ---- */

/* A new temporary value (no ONNX name); its index, or -1 when out of memory. */
int32_t clrun__imp_new_value(clrun__imp *im, const char *onnx_name);
static inline clrun__value *clrun__imp_value(clrun__imp *im, int32_t index)
{
    return im->values[index];
}

/* Output i of the node (NULL when the model leaves it unnamed: nobody reads it). */
clrun__value *clrun__out(clrun__imp *im, const clrun__onode *n, int i);
/* Defines output i as the host tensor t (taken over: *t is emptied, also on failure). */
clrun_status clrun__define_const(clrun__imp *im, const clrun__onode *n, int i, clrun__otensor *t);
/* Defines output i as the value v (its data copied when constant; an existing device tensor is
 * shared: no node). */
clrun_status clrun__define_alias(clrun__imp *im, const clrun__onode *n, int i, clrun__value *v);
/* v names src's device tensor (the same tensor under a second name, no node). */
void clrun__value_alias_device(clrun__value *v, const clrun__value *src);

/* The value's element type, rank and dims (for both kinds). */
static inline const clrun__otensor *clrun__shape_of(const clrun__value *v) { return &v->c; }
static inline bool clrun__is_const(const clrun__value *v) { return v && v->kind == CLRUN__VALUE_CONST; }

/* ---- emitting graph nodes ---- */

/* The graph tensor of v, adding a constant for a host value that has none yet. */
clrun_status clrun__device_id(clrun__imp *im, clrun__value *v, clrun_tensor_id *id);

/* Adds a graph node running `op` on inputs[0..n_inputs) with attrs; its outputs become out[i]:
 * an output value of the node (out_index[i] >= 0: output out_index[i]) or a new temporary. The
 * values made go to results[i] (may be NULL). A refusal of the graph op (unknown op, types,
 * attributes) is reported as unsupported, naming the graph op. */
clrun_status clrun__emit(clrun__imp *im, const clrun__onode *n, const char *op,
                         clrun__value *const *inputs, int n_inputs, const clrun_attr *attrs,
                         int n_attrs, const int *out_index, int n_outputs, clrun__value **results);
/* One-output forms: into output `out` of the node (>= 0) or a temporary (-1). */
clrun_status clrun__emit1(clrun__imp *im, const clrun__onode *n, const char *op,
                          clrun__value *const *inputs, int n_inputs, const clrun_attr *attrs,
                          int n_attrs, int out, clrun__value **result);

/* A refusal unless inputs 0..count-1 of the node are present. */
clrun_status clrun__need_inputs(clrun__imp *im, const clrun__onode *n, int count);
/* op(a, b) and op(x) without attributes, into output `out` or a temporary (-1, *r). */
clrun_status clrun__emit_binary(clrun__imp *im, const clrun__onode *n, const char *op, clrun__value *a,
                                clrun__value *b, int out, clrun__value **r);
clrun_status clrun__emit_unary(clrun__imp *im, const clrun__onode *n, const char *op, clrun__value *x,
                               int out, clrun__value **r);

/* A temporary host constant made from t (taken over); NULL when out of memory (failure
 * recorded). */
clrun__value *clrun__const_value(clrun__imp *im, clrun__otensor *t);
/* A scalar (rank 0) or one-element constant of an element type. */
clrun__value *clrun__scalar_value(clrun__imp *im, int elem, double value, int rank);

/* Common graph ops in one call each (result into output `out` or a temporary: -1). */
clrun_status clrun__emit_reshape(clrun__imp *im, const clrun__onode *n, clrun__value *x, int rank,
                                 const int64_t *dims, int out, clrun__value **result);
clrun_status clrun__emit_copy(clrun__imp *im, const clrun__onode *n, clrun__value *x, int out,
                              clrun__value **result);
clrun_status clrun__emit_transpose(clrun__imp *im, const clrun__onode *n, clrun__value *x,
                                   const int64_t *perm, int out, clrun__value **result);

/* Attribute builders. */
clrun_attr clrun__mk_int(const char *name, int64_t value);
clrun_attr clrun__mk_float(const char *name, double value);
clrun_attr clrun__mk_ints(const char *name, const int64_t *values, int count);

/* Whether the graph op exists (a mapping may prefer one op and fall back to a composition). */
bool clrun__graph_has_op(const char *op);
/* Whether the graph op exists and its type rule accepts these inputs and attributes: a mapping
 * uses an op's newer attributes (asymmetric pads, an axis) where this build has them, and an
 * exact composition of older ops otherwise. Changes nothing. */
bool clrun__op_accepts(const char *op, clrun__value *const *inputs, int n_inputs, const clrun_attr *attrs,
                       int n_attrs);

/* ---- attributes of the ONNX node (attrs.c) ---- */

/* Each reader marks the attribute as read; the driver refuses a node with an attribute no
 * reader asked for, so that no attribute is silently ignored. A present attribute of the wrong
 * type is an error. */
const Onnx__AttributeProto *clrun__oattr_find(clrun__imp *im, const clrun__onode *n, const char *name);
clrun_status clrun__oattr_int(clrun__imp *im, const clrun__onode *n, const char *name, int64_t fallback,
                             int64_t *out);
clrun_status clrun__oattr_float(clrun__imp *im, const clrun__onode *n, const char *name, double fallback,
                               double *out);
/* A list of ints into out[0..max); *count gets its length, -1 when absent. */
clrun_status clrun__oattr_ints(clrun__imp *im, const clrun__onode *n, const char *name, int64_t *out,
                              int max, int *count);
/* A list of floats; as above. */
clrun_status clrun__oattr_floats(clrun__imp *im, const clrun__onode *n, const char *name, double *out,
                                int max, int *count);
/* A string into buf ("" and false in *present when absent). */
clrun_status clrun__oattr_string(clrun__imp *im, const clrun__onode *n, const char *name,
                                const char *fallback, char *buf, size_t size);
/* Marks an attribute as read without reading it (one whose value does not matter here). */
void clrun__oattr_ignore(clrun__imp *im, const clrun__onode *n, const char *name);
/* A tensor attribute decoded (present: *found true). */
clrun_status clrun__oattr_tensor(clrun__imp *im, const clrun__onode *n, const char *name,
                                clrun__otensor *out, bool *found);

/* ---- constant inputs ---- */

/* Input i must be a host constant (folded at load): NULL and a refusal naming the input
 * otherwise. An absent input gives NULL without failure when optional. */
clrun_status clrun__const_input(clrun__imp *im, const clrun__onode *n, int i, bool optional,
                                const clrun__otensor **out);
/* Input i as a list of integers (a constant int tensor of rank <= 1). *count is -1 when the
 * optional input is absent. */
clrun_status clrun__const_ints(clrun__imp *im, const clrun__onode *n, int i, bool optional,
                               int64_t *out, int max, int *count);
/* Input i as one real number (a constant with one element); *present false when absent. */
clrun_status clrun__const_real(clrun__imp *im, const clrun__onode *n, int i, double *out,
                               bool *present);

/* Axis in [-rank, rank) to [0, rank); a refusal naming `what` otherwise. */
clrun_status clrun__norm_axis(clrun__imp *im, int64_t axis, int rank, const char *what, int *out);

/* ---- the operator table (ops.c) ---- */

/* What a fold function returns when it cannot evaluate this case on the host (a data type it
 * does not compute, a result too large): the driver then runs the mapping instead. Not a
 * clrun_status, and never returned by the importer. */
#define CLRUN__NOT_FOLDED ((clrun_status)1)

typedef clrun_status (*clrun__map_fn)(clrun__imp *im, clrun__onode *n);

typedef struct clrun__onnx_op {
    const char *name;
    int versions[8];       /* since_versions, ascending, 0-terminated */
    clrun__map_fn fold;    /* evaluates on host constants (may be NULL); runs when every input
                              is a host constant; CLRUN_ERROR_UNSUPPORTED from it falls back to
                              map */
    clrun__map_fn map;     /* emits graph nodes (or folds what needs no input data) */
} clrun__onnx_op;

/* The operator of a domain ("" for the default); NULL when clrun does not know it. */
const clrun__onnx_op *clrun__onnx_op_find(const char *domain, const char *name);
/* The newest opset clrun knows of a domain other than the default; 0 when it maps none of the
 * domain's operators. */
int clrun__onnx_domain_newest(const char *domain);
/* The since_version in force at `opset`, 0 when the op is newer than the opset. */
int clrun__onnx_op_version(const clrun__onnx_op *op, int64_t opset);

#endif
