/* Empty tensors (a dimension 0) in ONNX models: known whole at load from their shapes, they are
 * given as constants (clrun_onnx_constant with no data) and fold, so what the device runs is
 * never empty: MatMul with K = 0 is zeros, with M = 0 empty (and Concat drops it), a Slice past
 * the end is empty, reductions over nothing are their identity (ReduceMax's -inf). Run on the device with every
 * allocator and executor mode against what numpy gives. Models are built in C
 * (tests/onnx_builder.h). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <clrun/clrun.h>

#include "device_test.h"
#include "onnx_builder.h"

enum { F32 = 1, I64 = 7 };

static char cache_dir[512];

/* y [2, 3] and h [2, 4], the device inputs. */
static const float y_values[6] = {1, -2, 3.5f, 4, 0.25f, -6};
static const float h_values[8] = {9, 8, 7, 6, -5, -4, -3, -2};

/* Outputs, numpy's values:
 *   z1 = x @ w + y                              x [2, 0], w [0, 3]: K = 0, so y
 *   z2 = concat(past, h, axis 1)                past [2, 0]: h
 *   z3 = x.sum(axis 1)                          zeros [2]
 *   z4 = x.prod(axis 1)                         ones [2]
 *   z5 = concat(e @ h, h, axis 0)               e [0, 2]: M = 0, so h
 *   z6 = concat(h[:, 5:9], y, axis 1)           an empty slice of a device tensor: y
 *   z7 = x.max(axis 1), ONNX's identity         -inf [2] */
static clrun_graph *load_model(void)
{
    onnx_builder b;
    ob_init(&b, 13);
    static const int64_t xd[2] = {2, 0}, wd[2] = {0, 3}, pd[2] = {2, 0}, ed[2] = {0, 2}, yd[2] = {2, 3},
                         hd[2] = {2, 4}, two[1] = {2}, one[1] = {1};
    ob_input(&b, "x", F32, 2, xd, NULL);
    ob_input(&b, "w", F32, 2, wd, NULL);
    ob_input(&b, "past", F32, 2, pd, NULL);
    ob_input(&b, "e", F32, 2, ed, NULL);
    ob_input(&b, "y", F32, 2, yd, NULL);
    ob_input(&b, "h", F32, 2, hd, NULL);
    int64_t axis1 = 1, start = 5, end = 9;
    ob_initializer(&b, "axes", I64, 1, one, &axis1, sizeof axis1);
    ob_initializer(&b, "starts", I64, 1, one, &start, sizeof start);
    ob_initializer(&b, "ends", I64, 1, one, &end, sizeof end);
    ob_node(&b, "MatMul", "mm", "x,w", "xw");
    ob_node(&b, "Add", "add", "xw,y", "z1");
    Onnx__NodeProto *n = ob_node(&b, "Concat", "c2", "past,h", "z2");
    ob_attr_int(&b, n, "axis", 1);
    n = ob_node(&b, "ReduceSum", "rs", "x,axes", "z3");
    ob_attr_int(&b, n, "keepdims", 0);
    n = ob_node(&b, "ReduceProd", "rp", "x", "z4");
    ob_attr_ints(&b, n, "axes", &axis1, 1);
    ob_attr_int(&b, n, "keepdims", 0);
    ob_node(&b, "MatMul", "mm0", "e,h", "eh");
    n = ob_node(&b, "Concat", "c5", "eh,h", "z5");
    ob_attr_int(&b, n, "axis", 0);
    ob_node(&b, "Slice", "sl", "h,starts,ends,axes", "hs");
    n = ob_node(&b, "Concat", "c6", "hs,y", "z6");
    ob_attr_int(&b, n, "axis", 1);
    n = ob_node(&b, "ReduceMax", "rm", "x", "z7");
    ob_attr_ints(&b, n, "axes", &axis1, 1);
    ob_attr_int(&b, n, "keepdims", 0);
    ob_output(&b, "z1", F32, 2, yd);
    ob_output(&b, "z2", F32, 2, hd);
    ob_output(&b, "z3", F32, 1, two);
    ob_output(&b, "z4", F32, 1, two);
    ob_output(&b, "z5", F32, 2, hd);
    ob_output(&b, "z6", F32, 2, yd);
    ob_output(&b, "z7", F32, 1, two);
    clrun_onnx_constant c[4] = {
        {.input = "x", .type = {.dtype = CLRUN_F32, .rank = 2, .shape = {2, 0}}},
        {.input = "w", .type = {.dtype = CLRUN_F32, .rank = 2, .shape = {0, 3}}},
        {.input = "past", .type = {.dtype = CLRUN_F32, .rank = 2, .shape = {2, 0}}},
        {.input = "e", .type = {.dtype = CLRUN_F32, .rank = 2, .shape = {0, 2}}},
    };
    char err[1024];
    clrun_onnx_options o;
    clrun_onnx_options_init(&o);
    o.err = err;
    o.errlen = sizeof err;
    o.constants = c;
    o.constant_count = 4;
    size_t size;
    uint8_t *bytes = ob_pack(&b, &size);
    clrun_graph *g = NULL;
    clrun_status s = clrun_graph_load_onnx_memory(bytes, size, "empty.onnx", &o, &g);
    free(bytes);
    ob_free(&b);
    if (s != CLRUN_OK)
        fail_msg("loading: %s", err);
    return g;
}

static void check(const char *where, const char *what, const float *got, const float *want, int n)
{
    for (int i = 0; i < n; i++)
        if (got[i] != want[i])
            fail_msg("%s: %s element %d is %g, numpy gives %g", where, what, i, (double)got[i], (double)want[i]);
}

static void run_with(const clrun_graph *g, const char *allocator, clrun_exec_mode mode, int fusion)
{
    char where[96];
    snprintf(where, sizeof where, "%s, %s, fusion %s", allocator, clrun_exec_mode_name(mode),
             fusion > 0 ? "on" : "off");
    clrun_context_options co;
    clrun_context_options_init(&co);
    co.allocator = allocator;
    clrun_context *ctx;
    if (clrun_context_create(&co, &ctx) != CLRUN_OK)
        fail_msg("%s: no context: %s", where, clrun_last_error(NULL));
    clrun_exec_options o;
    clrun_exec_options_init(&o);
    o.mode = mode;
    o.fusion = fusion;
    clrun_exec *exec;
    if (clrun_exec_create(ctx, g, &o, &exec) != CLRUN_OK)
        fail_msg("%s: exec_create: %s", where, clrun_last_error(ctx));
    const clrun_tensor_id *ins;
    assert_int_equal(clrun_graph_inputs(g, &ins), 2); /* y, h: the empty ones are constants */
    clrun_buffer buffers[2];
    assert_int_equal(clrun_alloc(ctx, sizeof y_values, &buffers[0]), CLRUN_OK);
    assert_int_equal(clrun_buffer_write(ctx, &buffers[0], y_values), CLRUN_OK);
    assert_int_equal(clrun_alloc(ctx, sizeof h_values, &buffers[1]), CLRUN_OK);
    assert_int_equal(clrun_buffer_write(ctx, &buffers[1], h_values), CLRUN_OK);
    if (clrun_exec_run(exec, buffers, 2) != CLRUN_OK)
        fail_msg("%s: run: %s", where, clrun_last_error(ctx));
    float z1[6], z2[8], z3[2], z4[2], z5[16], z6[6], z7[2];
    static const float zeros[2] = {0, 0}, ones[2] = {1, 1}, lowest[2] = {-INFINITY, -INFINITY};
    assert_int_equal(clrun_exec_read_output(exec, 0, z1, sizeof z1), CLRUN_OK);
    assert_int_equal(clrun_exec_read_output(exec, 1, z2, sizeof z2), CLRUN_OK);
    assert_int_equal(clrun_exec_read_output(exec, 2, z3, sizeof z3), CLRUN_OK);
    assert_int_equal(clrun_exec_read_output(exec, 3, z4, sizeof z4), CLRUN_OK);
    assert_int_equal(clrun_exec_read_output(exec, 4, z5, 8 * sizeof(float)), CLRUN_OK);
    assert_int_equal(clrun_exec_read_output(exec, 5, z6, sizeof z6), CLRUN_OK);
    assert_int_equal(clrun_exec_read_output(exec, 6, z7, sizeof z7), CLRUN_OK);
    check(where, "x @ w + y (K = 0)", z1, y_values, 6);
    check(where, "concat(past, h)", z2, h_values, 8);
    check(where, "x.sum(1)", z3, zeros, 2);
    check(where, "x.prod(1)", z4, ones, 2);
    check(where, "concat(e @ h, h) (M = 0)", z5, h_values, 8);
    check(where, "concat(h[:, 5:9], y)", z6, y_values, 6);
    check(where, "x.max(1)", z7, lowest, 2);
    clrun_exec_destroy(exec);
    assert_int_equal(clrun_free(ctx, &buffers[0]), CLRUN_OK);
    assert_int_equal(clrun_free(ctx, &buffers[1]), CLRUN_OK);
    clrun_context_destroy(ctx);
}

static void empty_operands_fold_in_every_mode(void **state)
{
    (void)state;
    clrun_graph *g = load_model();
    const clrun_tensor_id *outs;
    assert_int_equal(clrun_graph_outputs(g, &outs), 7);
    const clrun_tensor_type *t = clrun_graph_tensor_type(g, outs[4]);
    assert_int_equal(t->rank, 2);
    assert_int_equal(t->shape[0], 2);
    assert_int_equal(t->shape[1], 4);
    static const char *const allocators[] = {"buddy", "tlsf", "slab", "bump"};
    for (size_t k = 0; k < sizeof allocators / sizeof allocators[0]; k++)
        run_with(g, allocators[k], CLRUN_EXEC_POOLED, k % 2 ? 1 : -1);
    run_with(g, "tlsf", CLRUN_EXEC_PLANNED, 1);
    run_with(g, "tlsf", CLRUN_EXEC_NAIVE, -1);
    clrun_graph_destroy(g);
}

/* What still cannot be: an empty value the device would hold (a graph output, an operand of a
 * kernel) is refused by name, nothing half-loaded. */
static void empty_values_on_the_device_are_refused_by_name(void **state)
{
    (void)state;
    onnx_builder b;
    ob_init(&b, 13);
    static const int64_t xd[2] = {3, 0};
    ob_input(&b, "x", F32, 2, xd, NULL);
    ob_node(&b, "Relu", "r", "x", "y");
    ob_output(&b, "y", F32, 2, xd);
    clrun_onnx_constant c = {.input = "x", .type = {.dtype = CLRUN_F32, .rank = 2, .shape = {3, 0}}};
    char err[1024];
    clrun_onnx_options o;
    clrun_onnx_options_init(&o);
    o.err = err;
    o.errlen = sizeof err;
    o.constants = &c;
    o.constant_count = 1;
    size_t size;
    uint8_t *bytes = ob_pack(&b, &size);
    clrun_graph *g = NULL;
    clrun_status s = clrun_graph_load_onnx_memory(bytes, size, "empty.onnx", &o, &g);
    free(bytes);
    ob_free(&b);
    assert_int_equal(s, CLRUN_ERROR_UNSUPPORTED);
    assert_null(g);
    if (strstr(err, "[3, 0] is empty") == NULL)
        fail_msg("refused as \"%s\"", err);
}

int main(void)
{
    clrun_test_device_environment(cache_dir, sizeof cache_dir);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(empty_operands_fold_in_every_mode),
        cmocka_unit_test(empty_values_on_the_device_are_refused_by_name),
    };
    CLRUN_TEST_FILTERS_FROM_ENVIRONMENT();
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    clrun_test_remove_dir(cache_dir);
    return failed;
}
