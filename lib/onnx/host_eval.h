/* Host evaluation of ONNX operators on host tensors: what the importer folds at load time (shape
 * subgraphs above all: Shape -> Gather -> Unsqueeze -> Concat -> Reshape, ConstantOfShape, Range,
 * arithmetic and comparisons on int64 shapes). Data movement is exact for every element type;
 * arithmetic is done in int64 for integers and in double, then rounded once to the element type,
 * for floats (the correctly rounded result for + - * / and sqrt: what an IEEE device gives).
 * Each returns false when out of memory, over the host tensor limit or over the folding budget
 * (tensor.h; out then empty); the arithmetic ones say CLRUN__FOLD_CANNOT for a result too large
 * to fold, so that the device computes it. */
#ifndef CLRUN_LIB_ONNX_HOST_EVAL_H
#define CLRUN_LIB_ONNX_HOST_EVAL_H

#include <stdbool.h>
#include <stdint.h>

#include "onnx/tensor.h"

/* numpy broadcasting of two shapes; false when they do not broadcast. */
bool clrun__broadcast_dims(int ra, const int64_t *a, int rb, const int64_t *b, int *rank,
                           int64_t *dims);

/* Data movement. */
bool clrun__host_reshape(const clrun__otensor *x, int rank, const int64_t *dims, clrun__otensor *out);
bool clrun__host_transpose(const clrun__otensor *x, const int *perm, clrun__otensor *out);
/* x broadcast (numpy rules, already checked) to rank/dims. */
bool clrun__host_expand(const clrun__otensor *x, int rank, const int64_t *dims, clrun__otensor *out);
/* Per axis: the first index, the step (!= 0) and the count taken (>= 0). */
bool clrun__host_slice(const clrun__otensor *x, const int64_t *start, const int64_t *step,
                       const int64_t *count, clrun__otensor *out);
bool clrun__host_concat(const clrun__otensor *const *xs, int n, int axis, clrun__otensor *out);
/* Indices already normalised to [0, dim). */
bool clrun__host_gather(const clrun__otensor *data, const clrun__otensor *indices, int axis,
                        clrun__otensor *out);
bool clrun__host_cast(const clrun__otensor *x, int elem, clrun__otensor *out);
bool clrun__host_tile(const clrun__otensor *x, const int64_t *repeats, clrun__otensor *out);

/* Elementwise arithmetic. */
typedef enum clrun__host_binop {
    CLRUN__H_ADD, CLRUN__H_SUB, CLRUN__H_MUL, CLRUN__H_DIV, CLRUN__H_MOD, CLRUN__H_FMOD,
    CLRUN__H_MIN, CLRUN__H_MAX, CLRUN__H_POW,
    CLRUN__H_EQUAL, CLRUN__H_LESS, CLRUN__H_GREATER, CLRUN__H_LESS_EQUAL, CLRUN__H_GREATER_EQUAL,
    CLRUN__H_AND, CLRUN__H_OR, CLRUN__H_XOR,
} clrun__host_binop;

typedef enum clrun__host_unop {
    CLRUN__H_NEG, CLRUN__H_ABS, CLRUN__H_SQRT, CLRUN__H_FLOOR, CLRUN__H_CEIL, CLRUN__H_ROUND,
    CLRUN__H_SIGN, CLRUN__H_NOT, CLRUN__H_RELU, CLRUN__H_RECIPROCAL, CLRUN__H_IDENTITY,
} clrun__host_unop;

typedef enum clrun__host_fold_result {
    CLRUN__FOLD_OK,
    CLRUN__FOLD_NO_MEMORY,
    CLRUN__FOLD_CANNOT,     /* an element type or case the host does not evaluate, or a result
                               too large to fold (the folding budget) */
    CLRUN__FOLD_DIV_ZERO,   /* integer division by zero */
} clrun__host_fold_result;

/* The output element type is a's, bool for comparisons and logic. */
clrun__host_fold_result clrun__host_binary(clrun__host_binop op, const clrun__otensor *a,
                                           const clrun__otensor *b, clrun__otensor *out);
clrun__host_fold_result clrun__host_unary(clrun__host_unop op, const clrun__otensor *x,
                                          clrun__otensor *out);
/* cond ? x : y, broadcast. */
bool clrun__host_where(const clrun__otensor *cond, const clrun__otensor *x, const clrun__otensor *y,
                       clrun__otensor *out);

typedef enum clrun__host_reduce_op {
    CLRUN__H_RSUM, CLRUN__H_RPROD, CLRUN__H_RMIN, CLRUN__H_RMAX, CLRUN__H_RMEAN,
} clrun__host_reduce_op;

/* Reduces the axes flagged in reduced[0..rank) (integers and floats; empty reductions give the
 * identity). */
clrun__host_fold_result clrun__host_reduce(clrun__host_reduce_op op, const clrun__otensor *x,
                                           const bool *reduced, bool keepdims, clrun__otensor *out);

#endif
