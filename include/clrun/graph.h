/* clrun: kernel graphs. A graph is a DAG of nodes (a kernel of the library with attributes)
 * over typed tensors: graph inputs (optionally donated), constants (weights, resident for the
 * life of the graph, filled from data or deterministically from a seed), intermediates that
 * nodes produce, and outputs. Graphs are built with this API or read from the .graph text
 * format (clrun_graph_parse). */
#ifndef CLRUN_GRAPH_H
#define CLRUN_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <clrun/status.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CLRUN_MAX_DIMS 8

typedef enum clrun_dtype {
    CLRUN_F32 = 0, /* 32-bit IEEE float */
    CLRUN_I32 = 1, /* 32-bit signed integer */
    CLRUN_F16 = 2, /* 16-bit IEEE float: only on devices with cl_khr_fp16 */
    CLRUN_I64 = 3, /* 64-bit signed integer (indices, shapes) */
    CLRUN_BOOL = 4, /* one byte, 0 or 1 (masks, comparisons) */
    CLRUN_F64 = 5, /* 64-bit IEEE float: only on devices with cl_khr_fp64 */
    CLRUN_I8 = 6,   /* 8-bit signed integer */
    CLRUN_U8 = 7,   /* 8-bit unsigned integer */
    CLRUN_I16 = 8,  /* 16-bit signed integer */
    CLRUN_U16 = 9,  /* 16-bit unsigned integer */
    CLRUN_U32 = 10, /* 32-bit unsigned integer */
    CLRUN_U64 = 11, /* 64-bit unsigned integer */
    CLRUN_BF16 = 12, /* bfloat16 (f32's top 16 bits): a storage type, computed in f32; cast and
                        copy take it on any device */
} clrun_dtype;

/* "f32", "i32", "f16", "i64", "bool", "f64", "i8", "u8", "i16", "u16", "u32", "u64", "bf16". */
const char *clrun_dtype_name(clrun_dtype dtype);
/* Bytes per element. */
size_t clrun_dtype_size(clrun_dtype dtype);

/* A tensor's type: element type and shape (rank 0 is a scalar). */
typedef struct clrun_tensor_type {
    clrun_dtype dtype;
    int rank;
    int64_t shape[CLRUN_MAX_DIMS];
} clrun_tensor_type;

/* Elements in a type (1 for rank 0); bytes = elements * dtype size. Both are 0 for a type no
 * tensor may have: unknown dtype, rank outside 0..CLRUN_MAX_DIMS, a dimension below 1, or a count
 * that overflows 64 bits. */
uint64_t clrun_tensor_elements(const clrun_tensor_type *type);
uint64_t clrun_tensor_bytes(const clrun_tensor_type *type);
/* Whether a type is empty: a known dtype, rank 0..CLRUN_MAX_DIMS, every dimension >= 0 and one
 * of them 0 (elements and bytes above are 0 for it too). A graph input, a constant and so a
 * graph output may be empty: such a tensor takes no device memory, a run takes any buffer for it
 * (NULL memory, 0 bytes) and gives it back as 0 bytes. No node reads or writes an empty tensor
 * (the graph builder refuses one by name; the ONNX importer folds an op over one at load or
 * refuses it by name, docs/onnx.md). */
bool clrun_tensor_empty(const clrun_tensor_type *type);

/* How a constant is filled when no data is given: deterministic from its seed, identical on
 * every machine (a counter-based generator, not rand(); see docs/graph-format.md). */
typedef enum clrun_fill {
    CLRUN_FILL_ZEROS = 0,
    CLRUN_FILL_ONES = 1,
    CLRUN_FILL_UNIFORM = 2, /* uniform in [a, b), a < b, before rounding to the dtype; for i32
                               and i64, integers a, b within [-2^31, 2^31] and integer values;
                               for bool, a = 0 and b = 2 */
    CLRUN_FILL_NORMAL = 3,  /* mean a, standard deviation b >= 0 (float dtypes only); tails end
                               at 6 standard deviations */
} clrun_fill;

/* One attribute of a node: an integer, a float, or a list of integers. */
typedef enum clrun_attr_kind { CLRUN_ATTR_INT, CLRUN_ATTR_FLOAT, CLRUN_ATTR_INTS } clrun_attr_kind;

#define CLRUN_MAX_ATTR_INTS 16

typedef struct clrun_attr {
    const char *name;  /* e.g. "axis", "stride" */
    clrun_attr_kind kind;
    int64_t i;         /* CLRUN_ATTR_INT */
    double f;          /* CLRUN_ATTR_FLOAT */
    int64_t ints[CLRUN_MAX_ATTR_INTS]; /* CLRUN_ATTR_INTS */
    int count;         /* entries of ints */
} clrun_attr;

typedef struct clrun_graph clrun_graph;

/* Tensors are named by small integers handed out by the builder. */
typedef int32_t clrun_tensor_id;

/* A new empty graph called `name` (may be NULL; otherwise a name as for tensors). */
clrun_status clrun_graph_create(const char *name, clrun_graph **out);

/* Frees the graph. NULL is accepted. */
void clrun_graph_destroy(clrun_graph *graph);

/* Builder. Every function checks its arguments and, on error, leaves the graph as it was and
 * puts the reason in clrun_graph_last_error() (and clrun_last_error(NULL)). Names are unique
 * within a graph and are what the text format can write: letters, digits, '_' and '.', starting
 * with a letter or '_', at most 255 bytes. */

/* A graph input. donated: the caller gives up the buffer it passes for it, and the executor may
 * reuse it for an output (XLA's donate_argnums). */
clrun_status clrun_graph_add_input(clrun_graph *graph, const char *name,
                                   const clrun_tensor_type *type, bool donated,
                                   clrun_tensor_id *id);

/* A constant from data (copied; `data` holds bytes of the type) or, with data NULL, filled by
 * `fill` with parameters a, b from `seed`. Only what decides the values is kept (a constant
 * from data keeps no fill, zeros and ones keep no parameters or seed), so equal constants
 * compare equal and read back from text identical. */
clrun_status clrun_graph_add_constant(clrun_graph *graph, const char *name,
                                      const clrun_tensor_type *type, const void *data,
                                      clrun_fill fill, double a, double b, uint64_t seed,
                                      clrun_tensor_id *id);

/* A node running operation `op` ("add", "matmul", ...; docs/ops.md) on `inputs` (existing
 * tensors); its outputs, new tensors named by output_names (as many as the op gives), get types
 * inferred from the op; `outputs` (may be NULL) receives their ids. Attributes: names unique,
 * floats finite, at most CLRUN_MAX_ATTR_INTS integers in a list; they are copied.
 * CLRUN_ERROR_UNKNOWN_KERNEL for an op clrun does not have; CLRUN_ERROR_INVALID_GRAPH for
 * shapes, dtypes or attributes the op refuses, with the op's reason ("matmul: ..."). Since
 * nodes only read tensors that exist, a built graph is acyclic and in topological order. */
clrun_status clrun_graph_add_node(clrun_graph *graph, const char *op, const clrun_tensor_id *inputs,
                                  int input_count, const char *const *output_names,
                                  int output_count, const clrun_attr *attrs, int attr_count,
                                  clrun_tensor_id *outputs);

/* Marks a tensor as an output of the graph (once; any kind of tensor). */
clrun_status clrun_graph_mark_output(clrun_graph *graph, clrun_tensor_id id);

/* Checks the whole graph: no outputs, a node reading or writing a tensor that does not exist,
 * a tensor produced twice (or an input or constant produced at all), an output never produced,
 * a node reading a tensor nobody produces, a cycle ("cycle: a -> b -> a", a computed from b),
 * and output types that differ from what the ops infer. The builder cannot make most of these;
 * this guards graphs assembled by other means, and the parser runs it on what it reads.
 * CLRUN_ERROR_INVALID_GRAPH with the reason in clrun_graph_last_error(). */
clrun_status clrun_graph_validate(clrun_graph *graph);

/* Reading. */
const char *clrun_graph_name(const clrun_graph *graph);
int32_t clrun_graph_tensor_count(const clrun_graph *graph);
int32_t clrun_graph_node_count(const clrun_graph *graph);
/* The id of the tensor called `name`: a model name (see clrun_graph_set_model_name) first,
 * else a tensor's identifier; -1 when neither. */
clrun_tensor_id clrun_graph_find(const clrun_graph *graph, const char *name);
/* The name a person sees: the tensor's model name when it has one (an imported model's input
 * or output keeps the model's own name, "39" or "dense/Relu:0"), else its identifier. */
const char *clrun_graph_tensor_name(const clrun_graph *graph, clrun_tensor_id id);
/* The tensor's identifier: the name the builder was given and the text format writes. */
const char *clrun_graph_tensor_ident(const clrun_graph *graph, clrun_tensor_id id);
const clrun_tensor_type *clrun_graph_tensor_type(const clrun_graph *graph, clrun_tensor_id id);
/* The graph's inputs / outputs in declaration order. */
int32_t clrun_graph_inputs(const clrun_graph *graph, const clrun_tensor_id **ids);
int32_t clrun_graph_outputs(const clrun_graph *graph, const clrun_tensor_id **ids);
/* True for an input the graph marks donated (false for any other tensor or id). */
bool clrun_graph_tensor_donated(const clrun_graph *graph, clrun_tensor_id id);

/* Fills `bytes` bytes at out (exactly the type's size) with the values a constant of `type`
 * filled by `fill` with parameters a, b from `seed` has: the same bits on every machine. The
 * parameters are checked as clrun_graph_add_constant checks them (CLRUN_ERROR_INVALID_ARGUMENT,
 * or CLRUN_ERROR_INVALID_SIZE for a type no tensor may have or the wrong byte count, with the
 * reason in clrun_last_error(NULL)). Programs use it to seed inputs reproducibly. */
clrun_status clrun_fill_values(const clrun_tensor_type *type, clrun_fill fill, double a, double b,
                               uint64_t seed, void *out, uint64_t bytes);

/* Marks graph input `id` donated or not, as clrun_graph_add_input's flag does: for a graph read
 * from a file or imported, whose caller decides which buffers it gives up (a binding's
 * `donate=` list). An executor decides its in-place reuse when it is created and reads the flag
 * on every run, so call this only while no executor of the graph exists.
 * CLRUN_ERROR_INVALID_ARGUMENT, with the graph unchanged, when id is not a graph input. */
clrun_status clrun_graph_set_donated(clrun_graph *graph, clrun_tensor_id id, bool donated);

/* Fills `host` (`bytes`: exactly the input's size) with the deterministic values that
 * `clrun run --seed SEED` feeds the graph's input number `index` (clrun_graph_inputs order):
 * clrun_fill_values' uniform fill with seed SEED * 1000003 + index over [-1, 1) for float
 * dtypes, [0, 16) for integers and [0, 2) for bool. So a program or a binding can reproduce a
 * CLI run bit for bit. CLRUN_ERROR_INVALID_ARGUMENT for an index out of range, NULL host or a
 * wrong size, with the reason in clrun_last_error(NULL). */
clrun_status clrun_graph_example_input(const clrun_graph *graph, int32_t index, uint64_t seed,
                                       void *host, uint64_t bytes);

/* Model names. An importer gives a tensor the name the model uses for it when that is no
 * identifier ("39", "dense/Relu:0", any bytes but NUL): clrun_graph_tensor_name returns it and
 * clrun_graph_find finds it, so every interface speaks of the model's names (as onnxruntime
 * does), while the identifier stays what the text format writes (clrun_graph_write writes
 * identifiers only: a model name does not survive the text format). A model name has 1 to
 * CLRUN_GRAPH_MODEL_NAME_MAX bytes and is given once per tensor; two tensors may share one (an
 * output that is also an input), and clrun_graph_find then gives the first tensor given it.
 * CLRUN_ERROR_INVALID_ARGUMENT, with the graph unchanged, otherwise. */
#define CLRUN_GRAPH_MODEL_NAME_MAX 4096
clrun_status clrun_graph_set_model_name(clrun_graph *graph, clrun_tensor_id id, const char *name);
/* The same for node number `node` (declaration order): the model's node it comes from ("Conv_12",
 * "/encoder/layer.0/Add"; several graph nodes may share one), which traces and profiles show.
 * Given again, it replaces the last. clrun_graph_node_model_name: NULL when it has none. */
clrun_status clrun_graph_set_node_model_name(clrun_graph *graph, int32_t node, const char *name);
const char *clrun_graph_node_model_name(const clrun_graph *graph, int32_t node);

/* The message of the last failure on this graph (builder, validation, parser). */
const char *clrun_graph_last_error(const clrun_graph *graph);

/* The .graph text format (docs/graph-format.md). `text` need not be NUL-terminated and may
 * hold any bytes. Nodes may use tensors declared further down: the graph is built in
 * dependency order, then validated. Errors are "FILE:LINE:COL: message" (file as given in
 * `filename`, "<input>" if NULL), returned as CLRUN_ERROR_PARSE (syntax),
 * CLRUN_ERROR_UNKNOWN_KERNEL (an op clrun lacks), CLRUN_ERROR_INVALID_SIZE (a type too large) or
 * CLRUN_ERROR_INVALID_GRAPH (names, cycles, types, refusals of the ops); the message goes to err
 * (may be NULL; always terminated, cut to errlen) and to clrun_last_error(NULL). */
clrun_status clrun_graph_parse(const char *text, size_t length, const char *filename,
                               clrun_graph **out, char *err, size_t errlen);
/* Reads and parses a file; CLRUN_ERROR_IO with "PATH: cannot read: reason" if it cannot. */
clrun_status clrun_graph_load(const char *path, clrun_graph **out, char *err, size_t errlen);
/* Writes the graph in the text format; parse(write(g)) is the same graph, with the same tensor
 * ids and node order. Constants given as data are written value by value, bit-exact: i32 and
 * finite f32 as the shortest decimals that read back, f16 and non-finite f32 as hexadecimal
 * bit patterns. CLRUN_ERROR_IO if the stream fails. */
clrun_status clrun_graph_write(const clrun_graph *graph, FILE *out);

#ifdef __cplusplus
}
#endif
#endif
