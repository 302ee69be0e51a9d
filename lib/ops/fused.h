/* A fused node: elementwise ops that lib/fuse/ joined into one generated kernel. Each fused
 * node of a rewritten graph has its own op (kind CLRUN__OP_FUSED), which carries the group's
 * description and names it after the ops it holds ("fused:add+gelu"), so that traces and
 * messages say what ran. The kernels here only launch what lib/fuse/ generated and built; the
 * rewrite decides. Pure description: no OpenCL. */
#ifndef CLRUN_LIB_OPS_FUSED_H
#define CLRUN_LIB_OPS_FUSED_H

#include <stddef.h>
#include <stdint.h>

#include "graph/elementwise.h"
#include "graph/layout_geometry.h"

/* A step operand that is an epilogue's value v: the matmul's or conv2d's own output. */
#define CLRUN__FUSED_ARG_V (-1000000)

/* One op of the group, computed per output element. */
typedef struct clrun__fused_step {
    const clrun__op *op;           /* an elementwise op */
    const clrun__ew_def *def;      /* its table row */
    const clrun_attr *attrs;       /* its node's attributes (the original graph's) */
    int attr_count;
    /* Operands: >= 0 the value of an earlier step; CLRUN__FUSED_ARG_V the epilogue's value;
     * otherwise < 0, the fused node's input -1 - arg. */
    int args[CLRUN__EW_MAX_INPUTS];
    clrun_tensor_type arg_types[CLRUN__EW_MAX_INPUTS]; /* their types, as the op saw them */
    clrun_tensor_type type;        /* its output type */
    int32_t node;                  /* its node in the graph the group came from */
} clrun__fused_step;

/* What a fused node's input is to its steps: the input itself, or read through a chain of
 * layout nodes (transpose, slice, reshape...) that the group took in: views[0] maps an element
 * of what the steps read to one of the next view's input, and so on to the node's input. */
#define CLRUN__FUSED_MAX_VIEWS 8
#define CLRUN__FUSED_MAX_OUTPUTS 8
typedef struct clrun__fused_input {
    int view_count;
    clrun__view views[CLRUN__FUSED_MAX_VIEWS];
    clrun_tensor_type type;        /* what the steps read: the chain's output, or the input */
    clrun_dtype dtype;             /* the node's input's dtype (the chain keeps it) */
} clrun__fused_input;

/* How the kernel is launched: the NDRange it was generated for. */
typedef struct clrun__fused_launch {
    unsigned dims;                 /* 1: n[0] elements, rounded up; 3: n[0] rounded up x n[1] x n[2] */
    uint64_t n[3];
    bool wide;                     /* dims 1: the kernel's last argument, n[0], is a ulong (else
                                      a uint) */
} clrun__fused_launch;

/* An epilogue group: the steps run inside a matmul's or conv2d's kernel (lib/ops/ops.h's
 * epilogue interface) on each value it computes, before its one store. The fused node's inputs
 * are the base op's, then the steps' extra inputs (x0, x1, ... of the expression). */
#define CLRUN__EPILOGUE_BASE_INPUTS 4
typedef struct clrun__epilogue_base {
    const clrun__op *op;           /* matmul or conv2d */
    const clrun_attr *attrs;       /* its node's attributes */
    int attr_count;
    int input_count;               /* its inputs: the fused node's first ones */
    clrun_tensor_type types[CLRUN__EPILOGUE_BASE_INPUTS + 1]; /* its inputs', then its output's */
    int extra_inputs;              /* the steps' other inputs */
    char *helpers;                 /* OpenCL C before its kernels: the element functions and
                                      clrun_epilogue_fn */
    const char *expression;        /* "clrun_epilogue_fn(v, i, c, x0)" */
    int params, index;             /* a case of an epilogue set (ops.h's clrun__epilogue): its
                                      kernels' buffer parameters and the case + 1; else 0, 0 */
} clrun__epilogue_base;

typedef struct clrun__fused_op {
    clrun__op op;                  /* first, so the op's address is the group's */
    char name[160];                /* op.name: "fused:add+gelu" */
    clrun__fused_step *steps;      /* in order */
    int step_count;
    int input_count;               /* inputs of the fused node */
    clrun__fused_input *inputs;    /* input_count entries */
    clrun_tensor_type output;      /* the first output's type: every output has its elements */
    /* What each output stores: >= 0 the value of that step (a float made canonical, see
     * ew_source.h), < 0 input -1 - k read through its chain, bit for bit (a group of layout
     * nodes alone). Groups that share reads and their iteration space run as one kernel with
     * an output each (sibling fusion). */
    int output_count;
    int output_of[CLRUN__FUSED_MAX_OUTPUTS];
    clrun_dtype output_dtype[CLRUN__FUSED_MAX_OUTPUTS];
    clrun__fused_launch launch;
    char kernel[48];               /* "clrun_fused_3" */
    const char *source;            /* the program that defines it (shared by a graph's groups) */
    size_t source_length;
    clrun__epilogue_base *epilogue; /* an epilogue group, else NULL (then `kernel` runs it) */
} clrun__fused_op;

/* The group behind a fused op, NULL for any other op. */
static inline const clrun__fused_op *clrun__fused_of(const clrun__op *op)
{
    return op && op->kind == CLRUN__OP_FUSED ? (const clrun__fused_op *)(const void *)op : NULL;
}

/* The type rule every fused op has: its output types are fixed by the fusion pass, so it gives
 * back the node's stored ones (and refuses a call without them). */
clrun_status clrun__fused_infer(const clrun__op_call *call, clrun_tensor_type *outputs, char *err,
                                size_t errlen);

#endif
