/* What `clrun run` and `clrun plan` share about models and real data: loading FILE.graph or
 * FILE.onnx by extension with --dim NAME=V and --shape INPUT=AxBxC bound, real inputs from .npy
 * or ONNX TensorProto .pb files (--input NAME=FILE), and outputs written as DIR/NAME.npy
 * (--output-dir DIR). A client of the public API only. */
#ifndef CLRUN_TOOLS_MODEL_IO_H
#define CLRUN_TOOLS_MODEL_IO_H

#include <stdbool.h>
#include <stddef.h>

#include <clrun/clrun.h>

#define CLRUN_CLI_MAX_BINDINGS 64

typedef struct clrun_cli_input_file {
    const char *name; /* as given: the input's ONNX or clrun name */
    const char *path;
} clrun_cli_input_file;

typedef struct clrun_cli_io {
    clrun_onnx_dim dims[CLRUN_CLI_MAX_BINDINGS];
    int dim_count;
    clrun_onnx_shape shapes[CLRUN_CLI_MAX_BINDINGS];
    int shape_count;
    clrun_cli_input_file inputs[CLRUN_CLI_MAX_BINDINGS];
    int input_count;
    const char *output_dir;
    /* After clrun_cli_io_bind: the data of each graph input given a file (graph input order). */
    void **host;
    int32_t host_count;
} clrun_cli_io;

/* Takes argv[*i] when it is --dim, --shape, and (with data) --input or --output-dir, advancing *i
 * past its value. Returns 1 when taken, 0 when the option is not one of these, 2 after a usage
 * message. */
int clrun_cli_io_option(const char *command, int argc, char **argv, int *i, clrun_cli_io *io, bool data);

/* Help lines for these options. */
void clrun_cli_io_help(bool data);

/* True when path ends in ".onnx". */
bool clrun_cli_is_onnx(const char *path);

/* Loads a .graph or .onnx file; on failure prints the message and returns the exit status (1
 * for I/O, 2 for a malformed or refused model), else 0. */
/* ONNX load options from the --dim and --shape bindings, the message going to err. */
void clrun_cli_onnx_options(const clrun_cli_io *io, char *err, size_t errlen, clrun_onnx_options *o);

int clrun_cli_load_model(const char *command, const char *path, const clrun_cli_io *io, clrun_graph **out);

/* Reads every --input file and checks it against the graph input it names (dtype and shape);
 * prints what is wrong and returns 2 (1 for I/O), else 0. */
int clrun_cli_io_bind(const char *command, clrun_cli_io *io, const clrun_graph *g);

/* The data read for graph input `index`, or NULL when it is seeded. */
const void *clrun_cli_io_input(const clrun_cli_io *io, int32_t index);

/* Writes every output of the executor's last run as DIR/NAME.npy; prints failures, returns 1
 * then, else 0. */
int clrun_cli_io_write_outputs(const char *command, const clrun_cli_io *io, clrun_exec *exec,
                               const clrun_graph *g);

/* The same for outputs read by `reader` from `source` (output `index` of the graph into host,
 * `bytes` long): a pipeline's, for one. */
typedef clrun_status (*clrun_cli_output_reader)(void *source, int32_t index, void *host, uint64_t bytes);
int clrun_cli_io_write_outputs_from(const char *command, const clrun_cli_io *io, const clrun_graph *g,
                                    clrun_cli_output_reader reader, void *source);

void clrun_cli_io_free(clrun_cli_io *io);

/* A tensor file by extension: .npy, or .pb (an ONNX TensorProto). */
clrun_status clrun_cli_read_tensor(const char *path, clrun_tensor_type *type, void **data, char *err,
                                   size_t errlen);

/* "f32[1, 3, 224, 224]" */
const char *clrun_cli_type_text(const clrun_tensor_type *t, char *buf, size_t size);

#endif
