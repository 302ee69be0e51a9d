/* What the type rules of the integer products (lib/graph/infer_qlinear.c) derive and their
 * kernels (lib/ops/ops_qlinear.c) need too: the product's or the convolution's geometry, the
 * signedness of each 8-bit operand and the form of each zero point. Computed by the code that
 * checks the call, so the kernels can never disagree with infer. */
#ifndef CLRUN_LIB_GRAPH_QLINEAR_GEOMETRY_H
#define CLRUN_LIB_GRAPH_QLINEAR_GEOMETRY_H

#include "graph/op_geometry.h"

/* A zero point: none (0 is subtracted), one value for every element, or one per row of a (per
 * column of b, per output channel of w). The values match the kernels' flags. */
typedef enum clrun__zero_form {
    CLRUN__ZERO_NONE = 0,
    CLRUN__ZERO_SCALAR = 1,
    CLRUN__ZERO_VECTOR = 2,
} clrun__zero_form;

/* matmul_integer: a [..., M, K], b [..., K, N] (u8 or i8), a_zero (scalar or [M]), b_zero (scalar
 * or [N]); the batch dimensions broadcast as matmul's do. */
typedef struct clrun__qmatmul_dims {
    clrun__matmul_dims d;
    bool a_signed, b_signed;
    clrun__zero_form a_zero, b_zero;
} clrun__qmatmul_dims;
clrun_status clrun__qmatmul_dims_of(const clrun__op_call *call, clrun__qmatmul_dims *q,
                                    const clrun__infer_error *err);

/* conv_integer: x [N, C, H, W], w [O, C/groups, KH, KW] (u8 or i8), x_zero (scalar), w_zero
 * (scalar or [O]); conv2d's attributes and geometry. */
typedef struct clrun__qconv_geometry {
    clrun__conv_geometry g;
    bool x_signed, w_signed;
    clrun__zero_form x_zero, w_zero;
} clrun__qconv_geometry;
clrun_status clrun__qconv_geometry_of(const clrun__op_call *call, clrun__qconv_geometry *q,
                                      const clrun__infer_error *err);

#endif
