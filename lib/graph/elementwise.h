/* The elementwise family as one table: each op's arity, the dtypes it takes, its result dtype,
 * its numeric attributes, and the OpenCL C expression that computes one element, per class of
 * dtype. The unfused kernels (lib/ops/ops_elementwise.c) and the fused ones (lib/fuse/) are both
 * generated from these expressions by lib/ops/ew_source.c, so a fused kernel computes every op
 * exactly as the unfused kernel does. Pure C: no OpenCL here, only its text.
 *
 * An expression sees its operands as x (unary), a and b (binary), c, a and b (where: c is the
 * bool condition), its attributes as p0 and p1 (of the data dtype T), and these names, which the
 * generator defines for each dtype:
 *   T, UT       the data dtype and, for integers, the unsigned type of the same width
 *   AS_T AS_U   reinterpretation between them (integer arithmetic wraps through UT)
 *   F(c)        a float literal of T: F(0.5) is 0.5f for f32 and 0.5 for f64
 *   ERF ERFC    erf and erfc of T (a vectorisable polynomial for f32)
 *   EXP TANH LOG  exp, tanh and log of T (for f32 kernels/ew_functions.cl's vectorisable ones, for f64
 *               the OpenCL builtins)
 *   CLIP(v, lo, hi)  lo where v < lo, else hi where v > hi, else v (NaN stays NaN)
 *   IDIV IPOW IMOD FMOD  integer division (truncating, b = 0 gives 0), integer power, and
 *               the modulo of ONNX's Mod (third argument: 1 = C's fmod, 0 = Python's)
 * Booleans are uchar 0 or 1. */
#ifndef CLRUN_LIB_GRAPH_ELEMENTWISE_H
#define CLRUN_LIB_GRAPH_ELEMENTWISE_H

#include <stdbool.h>
#include <stddef.h>

#include "graph/op.h"

/* One bit per dtype in a set of dtypes. */
#define CLRUN__DT(dtype) (1u << (unsigned)(dtype))

typedef enum clrun__ew_result {
    CLRUN__EW_SAME = 0, /* the dtype of the data inputs */
    CLRUN__EW_BOOL,     /* bool: comparisons and logic */
    CLRUN__EW_CAST,     /* the dtype that attribute `to` names */
} clrun__ew_result;

/* How an attribute becomes a parameter of an integer dtype (floats take it as it is). */
typedef enum clrun__ew_round {
    CLRUN__EW_TRUNC = 0,
    CLRUN__EW_CEIL,  /* a lower bound: the least integer not below it */
    CLRUN__EW_FLOOR, /* an upper bound */
} clrun__ew_round;

typedef struct clrun__ew_param {
    const char *name;    /* attribute name */
    bool integer;        /* an integer attribute (mod's fmod), else a number */
    double fallback;     /* its value when absent (may be infinite: clip's bounds) */
    clrun__ew_round round;
} clrun__ew_param;

#define CLRUN__EW_MAX_INPUTS 3
#define CLRUN__EW_MAX_PARAMS 2

typedef struct clrun__ew_def {
    const char *name;
    int arity;                /* 1, 2 or 3 */
    bool condition;           /* input 0 is a bool condition, the others data (where) */
    unsigned dtypes;          /* CLRUN__DT bits: the dtypes the data inputs may have */
    clrun__ew_result result;
    int param_count;
    clrun__ew_param params[CLRUN__EW_MAX_PARAMS];
    const char *floats;       /* the expression for f32 and f64 */
    const char *ints;         /* for i32 and i64 */
    const char *bools;        /* for bool */
} clrun__ew_def;

/* The definition of an elementwise op (op->kind is not CLRUN__OP_OTHER), else NULL. */
const clrun__ew_def *clrun__ew_def_of(const clrun__op *op);

/* The expression of def for data dtype `dtype`, NULL when def does not take it. */
const char *clrun__ew_expression(const clrun__ew_def *def, clrun_dtype dtype);

/* The result dtype of a node of def over data dtype `data` (cast: attribute `to`). */
clrun_dtype clrun__ew_result_dtype(const clrun__ew_def *def, const clrun__op_call *call,
                                   clrun_dtype data);

/* The dtype of the data inputs of a node of def (input 1 for where). */
clrun_dtype clrun__ew_data_dtype(const clrun__ew_def *def, const clrun__op_call *call);

/* Parameter i of a node, as the value it has in dtype `data`: the attribute or its default,
 * rounded for integer dtypes and clamped to their range. */
double clrun__ew_param_value(const clrun__ew_def *def, const clrun__op_call *call, int i,
                             clrun_dtype data);

/* What computing one float element of an op costs, from the calls its expression makes: the
 * fusion pass weighs epilogues by it (lib/fuse/epilogue.c). */
typedef enum clrun__ew_cost {
    CLRUN__EW_ARITHMETIC = 0, /* a few instructions: arithmetic, compares, fabs, sqrt, CLIP */
    CLRUN__EW_OWN_MATH,       /* clrun's branch-free EXP, TANH or LOG (kernels/ew_functions.cl) */
    CLRUN__EW_LIBRARY_MATH,   /* the math library (log1p, sin, pow, expm1, ...) or erf's fits */
} clrun__ew_cost;

/* The cost of def's float expression: the dearest call in it (ARITHMETIC without one). */
clrun__ew_cost clrun__ew_float_cost(const clrun__ew_def *def);

/* True for a dtype the elementwise kernels can hold in a register (every dtype but f16). */
bool clrun__ew_dtype_supported(clrun_dtype dtype);

/* The table, for listings and tests: *count entries. */
const clrun__ew_def *clrun__ew_defs(size_t *count);

#endif
