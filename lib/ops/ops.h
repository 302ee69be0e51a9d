/* The operations a graph node can run: each is a table entry with its type rules and the
 * kernels that do the work. The executor knows ops only through this table. */
#ifndef CLRUN_LIB_OPS_H
#define CLRUN_LIB_OPS_H

#include <CL/cl.h>

#include <clrun/context.h>
#include <clrun/graph.h>

/* What an op sees of one node: its input and output types and its attributes. */
typedef struct clrun__op_call {
    const clrun_tensor_type *inputs;  /* input_count entries */
    int input_count;
    const clrun_tensor_type *outputs; /* output_count entries (filled by infer) */
    int output_count;
    const clrun_attr *attrs;          /* attr_count entries */
    int attr_count;
} clrun__op_call;

typedef struct clrun__op {
    const char *name;      /* as written in .graph files: "add", "matmul", ... */
    int min_inputs;        /* inputs accepted: min_inputs..max_inputs */
    int max_inputs;
    int outputs;           /* outputs produced (fixed per op) */
    /* Output 0 may be written into the buffer of an input of the same byte size: every work-item
     * reads all it needs of its element before writing it (elementwise ops). Matmul is not. */
    bool alias_safe;
    /* Checks input types and attributes (unknown attribute names are errors too) and fills
     * outputs[0..outputs-1]. On refusal: CLRUN_ERROR_INVALID_GRAPH and a reason in err that names
     * what is wrong ("matmul: inner dimensions differ: [8,784] x [512,10]"). */
    clrun_status (*infer)(const clrun__op_call *call, clrun_tensor_type *outputs, char *err,
                          size_t errlen);
    /* Creates what one node needs on the device (kernels, with every argument that does not
     * change between runs already set) into *state. Errors via clrun__fail on ctx. */
    clrun_status (*prepare)(clrun_context *ctx, const clrun__op_call *call, void **state);
    /* Enqueues the node on ctx's queue over the given buffers (inputs[i], outputs[j] are
     * cl_mem sub-buffers of exactly the tensors' bytes), waiting for wait_list and, when done is
     * not NULL, returning an event for the node's last command. May be called many times. */
    clrun_status (*enqueue)(clrun_context *ctx, void *state, const clrun__op_call *call,
                            const cl_mem *inputs, const cl_mem *outputs, cl_uint wait_count,
                            const cl_event *wait_list, cl_event *done);
    /* Frees what prepare made. NULL is accepted. */
    void (*release)(void *state);
} clrun__op;

/* The op called `name`, or NULL. */
const clrun__op *clrun__op_find(const char *name);

/* Every op, for listings and tests: *count entries. */
const clrun__op *const *clrun__op_list(size_t *count);

/* Attribute lookups: true and *out set when present with the right kind; false when absent.
 * An attribute of the wrong kind is absent. */
bool clrun__attr_int(const clrun__op_call *call, const char *name, int64_t *out);
bool clrun__attr_float(const clrun__op_call *call, const char *name, double *out);
/* Integer list; *count gets its length. */
bool clrun__attr_ints(const clrun__op_call *call, const char *name, const int64_t **out, int *count);

#endif
