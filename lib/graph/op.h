/* What an op *is*, apart from how a device runs it: its name, arity, whether its output may
 * take an input's buffer, and its type rule (infer). The graph validates nodes with these, the
 * schedule reads alias safety, importers and rewrites check types, all without OpenCL; the
 * kernels that run each op live in lib/ops/ and are found by the op's name. */
#ifndef CLRUN_LIB_GRAPH_OP_H
#define CLRUN_LIB_GRAPH_OP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <clrun/graph.h>
#include <clrun/status.h>

#include "core/log.h" /* CLRUN__PRINTF */

/* What an op sees of one node: its input and output types and its attributes. */
typedef struct clrun__op_call {
    const clrun_tensor_type *inputs;  /* input_count entries */
    int input_count;
    const clrun_tensor_type *outputs; /* output_count entries (filled by infer) */
    int output_count;
    const clrun_attr *attrs;          /* attr_count entries */
    int attr_count;
    /* Bit i set: input i is a constant of the graph (its bytes never change while an executor
     * holds it), so kernels may transform it once (matmul packs constant weights at the first
     * run). 0 when unknown. */
    uint64_t constant_inputs;
} clrun__op_call;

/* The shape of an op's work, for passes that treat ops by kind (the kernels read it too). */
typedef enum clrun__op_kind {
    CLRUN__OP_OTHER = 0, /* anything else */
    CLRUN__OP_UNARY,     /* y = f(x), elementwise */
    CLRUN__OP_SCALE,     /* y = alpha * x + beta */
    CLRUN__OP_COPY,      /* y = x, bit for bit */
    CLRUN__OP_BINARY,    /* y = a (op) b, numpy broadcasting */
    CLRUN__OP_TERNARY,   /* y = f(c, a, b), numpy broadcasting (where) */
    CLRUN__OP_FUSED,     /* elementwise ops joined into one kernel by lib/fuse/ (ops/fused.h) */
} clrun__op_kind;

typedef struct clrun__op {
    const char *name;      /* as written in .graph files: "add", "matmul", ... */
    int min_inputs;        /* inputs accepted: min_inputs..max_inputs */
    int max_inputs;
    int outputs;           /* outputs produced (fixed per op) */
    /* Output 0 may be written into the buffer of an input of the same byte size: every work-item
     * reads all it needs of its element before writing it (elementwise ops). Matmul is not. */
    bool alias_safe;
    /* With alias_safe: the first input whose buffer output 0 may take. The inputs before it are
     * read at other elements than the one written (a product's operands under an epilogue that
     * updates donated state, lib/fuse/epilogue.c); 0 for every op the graph layer defines. */
    int alias_from;
    /* With alias_safe, when > 0: only the inputs before this one (from alias_from on); the
     * others are read by work-items other than the one writing over them (softmax_xent_grad's
     * labels and dloss: a row's group reads them all). 0: every input from alias_from on. */
    int alias_until;
    /* Output 0 is input 0's elements in the same order under another shape (reshape): the
     * schedule makes it a view of the input's buffer, with no memory and no copy. */
    bool view;
    clrun__op_kind kind;
    int code;              /* family-specific: the binary op or reduction the kernels compute */
    /* Checks input types and attributes (unknown attribute names are errors too) and fills
     * outputs[0..outputs-1]. On refusal: CLRUN_ERROR_INVALID_GRAPH and a reason in err that names
     * what is wrong ("matmul: inner dimensions differ: a is f32[8, 784], b is f32[512, 10] (784
     * vs 512)"). */
    clrun_status (*infer)(const clrun__op_call *call, clrun_tensor_type *outputs, char *err,
                          size_t errlen);
} clrun__op;

/* The op called `name`, or NULL. */
const clrun__op *clrun__op_find(const char *name);

/* Whether `op` writes its output into host memory (`offload`, graph/offload.h): the schedule
 * keeps such a tensor out of device memory, and the executor gives it a host-allocated buffer
 * of its own. */
bool clrun__op_on_host(const clrun__op *op);
/* Whether `op` is `loop_begin` or `loop_end`, the bounds of a Loop's body that the executor
 * runs once per iteration (graph/infer_loop.c). */
bool clrun__op_is_loop_begin(const clrun__op *op);
bool clrun__op_is_loop_end(const clrun__op *op);

/* Every op, for listings and tests: *count entries. */
const clrun__op *const *clrun__op_list(size_t *count);

/* ---- attributes ---- */

/* Attribute lookups: true and *out set when present with the right kind; false when absent.
 * An attribute of the wrong kind is absent. */
bool clrun__attr_int(const clrun__op_call *call, const char *name, int64_t *out);
bool clrun__attr_float(const clrun__op_call *call, const char *name, double *out);
/* Integer list; *count gets its length. */
bool clrun__attr_ints(const clrun__op_call *call, const char *name, const int64_t **out, int *count);

/* Attribute values with defaults, for attributes clrun__check_attrs has accepted. */
int64_t clrun__attr_int_or(const clrun__op_call *call, const char *name, int64_t fallback);
double clrun__attr_float_or(const clrun__op_call *call, const char *name, double fallback);
/* A list attribute into out[0..max-1]; a single integer is a list of one. Returns its length
 * (0 when absent). */
int clrun__attr_list(const clrun__op_call *call, const char *name, int64_t *out, int max);

/* ---- what type rules share ---- */

/* Where an op's refusal goes: the op's name (prefix of every message) and the caller's buffer
 * (NULL for a quiet check). */
typedef struct clrun__infer_error {
    const char *op;
    char *buf;
    size_t size;
} clrun__infer_error;

/* Writes "OP: message" into err and returns CLRUN_ERROR_INVALID_GRAPH. */
clrun_status clrun__refuse(const clrun__infer_error *err, const char *format, ...)
    CLRUN__PRINTF(2, 3);

/* One attribute an op accepts. */
typedef enum clrun__attr_want {
    CLRUN__WANT_INT,   /* an integer */
    CLRUN__WANT_FLOAT, /* a float; an integer is accepted too */
    CLRUN__WANT_INTS,  /* a list of integers; a single integer is accepted as a list of one */
} clrun__attr_want;

typedef struct clrun__attr_spec {
    const char *name;
    clrun__attr_want want;
    bool required;
} clrun__attr_spec;

/* Refuses attributes not in specs[0..count-1], given twice, of the wrong kind, or missing when
 * required. */
clrun_status clrun__check_attrs(const clrun__op_call *call, const clrun__attr_spec *specs,
                                int count, const clrun__infer_error *err);

/* Refuses an input count outside [min, max]. */
clrun_status clrun__check_input_count(const clrun__op_call *call, int min, int max,
                                      const clrun__infer_error *err);

/* Refuses input i unless its type can exist: rank 0..CLRUN_MAX_DIMS, every dim >= 1. The
 * dtype checks of every op family start with it, so the messages agree. */
clrun_status clrun__check_dims(const clrun__op_call *call, int i, const clrun__infer_error *err);

/* Refuses input i as clrun__check_dims does, then unless its dtype is f32, or (i32_ok) i32.
 * f16 gets its own message. */
clrun_status clrun__check_dtype(const clrun__op_call *call, int i, bool i32_ok,
                                const clrun__infer_error *err);

/* numpy broadcasting of a and b into *out (dtype of a). Refuses incompatible shapes. */
clrun_status clrun__broadcast_shape(const clrun_tensor_type *a, const clrun_tensor_type *b,
                                    clrun_tensor_type *out, const clrun__infer_error *err);

/* Row-major element strides of `type`, broadcast against the output shape `out` (rank >= the
 * type's): the type's dims align to the right, and a dim of 1 against a larger one gets stride 0.
 * strides has out->rank entries. */
void clrun__broadcast_strides(const clrun_tensor_type *type, const clrun_tensor_type *out,
                              uint64_t *strides);

#endif
