/* clrun: ONNX models in. clrun_graph_load_onnx reads a model (protobuf, as every exporter writes
 * it) into a clrun graph: initializers become constants with their real values, inputs with
 * symbolic dimensions are bound by the caller, shape computations (Shape, Gather, Concat,
 * Reshape, ConstantOfShape, Range...) are evaluated at load so they never reach the device, and
 * every other node becomes graph nodes (docs/onnx.md lists the operators and their limits).
 *
 * Tensor names. Every input and output (and every other tensor that is an ONNX value) keeps the
 * model's own name as its model name (clrun_graph_set_model_name): clrun_graph_tensor_name
 * returns "39" or "dense/Relu:0" as the model has it, and clrun_graph_find finds it, as
 * onnxruntime does. Its identifier, what the .graph text format writes
 * (clrun_graph_tensor_ident), is letters, digits, '_' and '.', starting with a letter or '_': an
 * ONNX name that is not one is rewritten: every other character becomes '_', a leading digit or
 * '.' gets a '_' in front, and a name already taken gets ".1", ".2"... appended (in the order the
 * model declares its inputs, then its initializers, then node outputs). clrun_onnx_name does the
 * first two steps. Options name inputs by their ONNX name or their identifier.
 *
 * Errors. A model clrun cannot run is refused as a whole (nothing is returned, nothing leaks),
 * with a message naming the file and, for a node, its index in the model's node list, its name,
 * operator, domain and opset: "model.onnx: node 17 'Conv_12' (Conv, opset 11): auto_pad=VALID
 * with dilations > 1 is not supported". Statuses: CLRUN_ERROR_IO (the file or an external data
 * file cannot be read), CLRUN_ERROR_PARSE (not a well-formed ONNX protobuf), CLRUN_ERROR_INVALID_GRAPH
 * (a well-formed model that is wrong: a value used before it is produced, shapes that do not fit
 * an operator, a dimension left unbound), CLRUN_ERROR_UNSUPPORTED (an operator, attribute value,
 * data type or opset clrun does not run), CLRUN_ERROR_INVALID_ARGUMENT (bad options),
 * CLRUN_ERROR_OUT_OF_HOST_MEMORY. */
#ifndef CLRUN_ONNX_H
#define CLRUN_ONNX_H

#include <stddef.h>
#include <stdint.h>

#include <clrun/graph.h>
#include <clrun/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A value for a symbolic dimension (a dim_param such as "batch" or "sequence"), wherever it
 * appears in the model's inputs. */
typedef struct clrun_onnx_dim {
    const char *name;
    int64_t value; /* >= 1 */
} clrun_onnx_dim;

/* The whole shape of one input, overriding what the model declares: its rank must match, and
 * every dimension the model fixes must agree. It also binds each symbolic dimension it covers,
 * for every input that has it (the shape of a fed array says what 'batch' is), as dims do. */
typedef struct clrun_onnx_shape {
    const char *input; /* the input's ONNX name (or its clrun name) */
    int rank;          /* 0..CLRUN_MAX_DIMS */
    int64_t dims[CLRUN_MAX_DIMS];
} clrun_onnx_shape;

/* A value for an input, known at load: the input becomes a constant (an initializer), so what
 * it decides (a Reshape's shape, a Slice's starts, a Trilu's k) is folded, and it is no longer an
 * input of the graph (onnxruntime's AddInitializer). The type must be the input's, with two
 * conveniences for a caller that does not know it: values given as CLRUN_F64 are converted to
 * the input's element type when each converts exactly (16000 for an int64 sample rate; else
 * CLRUN_ERROR_INVALID_ARGUMENT), and a single value fits an input whose shape is all ones. */
typedef struct clrun_onnx_constant {
    const char *input;         /* the input's ONNX name (or its clrun name) */
    clrun_tensor_type type;
    const void *data;          /* clrun_tensor_bytes(&type) bytes, copied; may be NULL for an
                                  empty type (a dimension 0), whose value is its shape alone */
} clrun_onnx_constant;

/* Bindings must agree: a dimension given twice with two values, or given one value by dims and
 * another by a shape (or by two shapes), is CLRUN_ERROR_INVALID_ARGUMENT naming both. */
typedef struct clrun_onnx_options {
    const clrun_onnx_dim *dims;     /* dim_count entries (may be NULL when 0) */
    int dim_count;
    const clrun_onnx_shape *shapes; /* shape_count entries (may be NULL when 0) */
    int shape_count;
    /* A value for every symbolic or unknown dimension that dims and shapes leave unbound
     * (onnxruntime's free dimension override for all of them at once); 0: such a dimension is
     * an error naming the input and the dimension. */
    int64_t default_dim;
    const clrun_onnx_constant *constants; /* constant_count entries (may be NULL when 0) */
    int constant_count;
    /* Where external data files (data_location = EXTERNAL) are read from; NULL: the folder of
     * the model file (the current folder for clrun_graph_load_onnx_memory). */
    const char *external_data_dir;
    /* The error message also goes here when not NULL (always terminated, cut to errlen). */
    char *err;
    size_t errlen;
} clrun_onnx_options;

/* Options with every field empty: no bindings, unbound dimensions are errors. */
void clrun_onnx_options_init(clrun_onnx_options *options);

/* Reads the ONNX model at `path` into a new graph (*out; NULL on failure). options may be NULL.
 * The graph's inputs are the model's inputs that are not initializers, in the model's order; its
 * outputs are the model's outputs, in order. The message of a failure is in clrun_last_error(NULL)
 * (and options->err). */
clrun_status clrun_graph_load_onnx(const char *path, const clrun_onnx_options *options,
                                   clrun_graph **out);

/* The same from a model in memory (`size` bytes at `data`); `filename` names it in messages
 * (NULL: "<memory>"). */
clrun_status clrun_graph_load_onnx_memory(const void *data, size_t size, const char *filename,
                                          const clrun_onnx_options *options, clrun_graph **out);

/* The clrun form of an ONNX name, before any ".N" that tells apart names that collide (see the
 * top of this header): into buf (size bytes, at most CLRUN_ONNX_NAME_MAX + 2 needed); returns
 * buf. */
#define CLRUN_ONNX_NAME_MAX 255
const char *clrun_onnx_name(const char *onnx_name, char *buf, size_t size);

/* Reads an ONNX TensorProto file (the input_N.pb / output_N.pb of the ONNX test cases) into a
 * type and a malloc'ed buffer of clrun_tensor_bytes(type) bytes (*data, freed by the caller), and
 * the tensor's name into name (may be NULL; "" when it has none). An empty tensor (a dimension
 * of 0) is read: its type has that 0 (clrun_tensor_empty) and *data is NULL; it can be given
 * as a clrun_onnx_constant, or fed to an empty graph input (any buffer: NULL memory, 0 bytes). Data types without a clrun dtype and
 * ranks above CLRUN_MAX_DIMS are refused (CLRUN_ERROR_UNSUPPORTED); the message is in
 * clrun_last_error(NULL) and err (may be NULL). */
clrun_status clrun_onnx_tensor_load(const char *path, clrun_tensor_type *type, void **data,
                                    char *name, size_t name_size, char *err, size_t errlen);

/* Writes the ONNX model at `path` to `out_path` with new values for the f32 initializers named
 * names[0..count): data[k], bytes[k] bytes each (the initializer's size), stored as raw data
 * (an initializer held in an external file is embedded). Everything else is copied as it is. A
 * name that is no initializer of the file is skipped: *written (may be NULL) gets how many were
 * replaced. CLRUN_ERROR_INVALID_ARGUMENT for an initializer of another type or size,
 * CLRUN_ERROR_PARSE for a file that is no model, CLRUN_ERROR_IO when one cannot be read or
 * written (the file is written beside out_path and renamed over it); the message goes to err
 * (may be NULL) and clrun_last_error(NULL). What `clrun train --save-onnx` writes. */
clrun_status clrun_onnx_save_initializers(const char *path, const char *out_path,
                                          const char *const *names, const void *const *data,
                                          const uint64_t *bytes, int32_t count,
                                          int32_t *written, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
