/* Tensor types and node attributes written briefly, for the tests that run one op at a time
 * (test_ops, test_ops_layout, test_ops_kernels, test_grad, test_graph_reference). */
#ifndef CLRUN_TESTS_OP_ARGS_H
#define CLRUN_TESTS_OP_ARGS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <clrun/clrun.h>

/* A type from a dims string: shape_type(CLRUN_F32, "2,3,4"); "" is a scalar. */
static inline clrun_tensor_type shape_type(clrun_dtype dtype, const char *dims)
{
    clrun_tensor_type t = {dtype, 0, {0}};
    for (const char *p = dims; *p;) {
        char *end;
        t.shape[t.rank++] = strtoll(p, &end, 10);
        p = *end == ',' ? end + 1 : end;
    }
    return t;
}

static inline clrun_attr attr_int(const char *name, int64_t v)
{
    clrun_attr a = {name, CLRUN_ATTR_INT, v, 0, {0}, 0};
    return a;
}

static inline clrun_attr attr_float(const char *name, double v)
{
    clrun_attr a = {name, CLRUN_ATTR_FLOAT, 0, v, {0}, 0};
    return a;
}

static inline clrun_attr attr_ints(const char *name, int count, const int64_t *v)
{
    clrun_attr a = {name, CLRUN_ATTR_INTS, 0, 0, {0}, count};
    memcpy(a.ints, v, (size_t)count * sizeof *v);
    return a;
}

#endif
