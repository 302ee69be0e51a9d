/* Tests of the graph-input functions that bindings use (clrun/graph.h): reading and changing
 * which inputs are donated, and the CLI's deterministic example inputs. Pure: no device. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <clrun/context.h>
#include <clrun/graph.h>


/* y = neg(x) + k, with x f32[3, 5] donated, n i32[7] kept, and a constant k. */
static clrun_graph *two_input_graph(void)
{
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("g", &g), CLRUN_OK);
    clrun_tensor_type f = {CLRUN_F32, 2, {3, 5}}, i = {CLRUN_I32, 1, {7}};
    clrun_tensor_id x, n, k, y, z;
    assert_int_equal(clrun_graph_add_input(g, "x", &f, true, &x), CLRUN_OK);
    assert_int_equal(clrun_graph_add_input(g, "n", &i, false, &n), CLRUN_OK);
    assert_int_equal(clrun_graph_add_constant(g, "k", &f, NULL, CLRUN_FILL_ONES, 0, 0, 0, &k), CLRUN_OK);
    const char *yn[] = {"y"}, *zn[] = {"z"};
    assert_int_equal(clrun_graph_add_node(g, "neg", &x, 1, yn, 1, NULL, 0, &y), CLRUN_OK);
    clrun_tensor_id yk[2] = {y, k};
    assert_int_equal(clrun_graph_add_node(g, "add", yk, 2, zn, 1, NULL, 0, &z), CLRUN_OK);
    assert_int_equal(clrun_graph_mark_output(g, z), CLRUN_OK);
    assert_int_equal(clrun_graph_mark_output(g, n), CLRUN_OK);
    return g;
}

static void donation_flags_read_as_built(void **state)
{
    (void)state;
    clrun_graph *g = two_input_graph();
    assert_true(clrun_graph_tensor_donated(g, clrun_graph_find(g, "x")));
    assert_false(clrun_graph_tensor_donated(g, clrun_graph_find(g, "n")));
    assert_false(clrun_graph_tensor_donated(g, clrun_graph_find(g, "k"))); /* not an input */
    assert_false(clrun_graph_tensor_donated(g, 99));
    assert_false(clrun_graph_tensor_donated(NULL, 0));
    clrun_graph_destroy(g);
}

static void donation_can_be_set_and_cleared_on_inputs(void **state)
{
    (void)state;
    clrun_graph *g = two_input_graph();
    clrun_tensor_id x = clrun_graph_find(g, "x"), n = clrun_graph_find(g, "n");
    assert_int_equal(clrun_graph_set_donated(g, x, false), CLRUN_OK);
    assert_int_equal(clrun_graph_set_donated(g, n, true), CLRUN_OK);
    assert_false(clrun_graph_tensor_donated(g, x));
    assert_true(clrun_graph_tensor_donated(g, n));
    assert_int_equal(clrun_graph_validate(g), CLRUN_OK);
    clrun_graph_destroy(g);
}

static void only_inputs_can_be_donated(void **state)
{
    (void)state;
    clrun_graph *g = two_input_graph();
    clrun_tensor_id k = clrun_graph_find(g, "k"), y = clrun_graph_find(g, "y");
    assert_int_equal(clrun_graph_set_donated(g, k, true), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clrun_graph_last_error(g), "(k) is not one"));
    assert_non_null(strstr(clrun_last_error(NULL), "(k) is not one"));
    assert_int_equal(clrun_graph_set_donated(g, y, true), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(clrun_graph_set_donated(g, -1, true), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clrun_graph_last_error(g), "no such tensor"));
    assert_int_equal(clrun_graph_set_donated(NULL, 0, true), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_false(clrun_graph_tensor_donated(g, k));
    assert_false(clrun_graph_tensor_donated(g, y));
    clrun_graph_destroy(g);
}

/* The example input is clrun_fill_values' uniform fill with seed S*1000003+i over [-1, 1)
 * (floats), [0, 16) (integers) or [0, 2) (bool), bit for bit: what clrun run feeds. */
static void example_inputs_are_the_seeded_uniform_fill(void **state)
{
    (void)state;
    clrun_graph *g = two_input_graph();
    float x[15], want_x[15];
    int32_t n[7], want_n[7];
    clrun_tensor_type f = {CLRUN_F32, 2, {3, 5}}, i = {CLRUN_I32, 1, {7}};
    assert_int_equal(clrun_graph_example_input(g, 0, 5, x, sizeof x), CLRUN_OK);
    assert_int_equal(clrun_graph_example_input(g, 1, 5, n, sizeof n), CLRUN_OK);
    assert_int_equal(clrun_fill_values(&f, CLRUN_FILL_UNIFORM, -1, 1, 5 * 1000003u + 0, want_x, sizeof want_x),
                     CLRUN_OK);
    assert_int_equal(clrun_fill_values(&i, CLRUN_FILL_UNIFORM, 0, 16, 5 * 1000003u + 1, want_n, sizeof want_n),
                     CLRUN_OK);
    assert_memory_equal(x, want_x, sizeof x);
    assert_memory_equal(n, want_n, sizeof n);
    bool varied = false;
    for (int k = 0; k < 15; k++) {
        assert_true(x[k] >= -1.0f && x[k] < 1.0f);
        varied |= x[k] != x[0];
    }
    for (int k = 0; k < 7; k++)
        assert_true(n[k] >= 0 && n[k] < 16);
    assert_true(varied);
    float other[15];
    assert_int_equal(clrun_graph_example_input(g, 0, 6, other, sizeof other), CLRUN_OK);
    assert_memory_not_equal(x, other, sizeof x); /* another seed, other values */
    clrun_graph_destroy(g);
}

static void example_inputs_of_i64_and_bool(void **state)
{
    (void)state;
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("g", &g), CLRUN_OK);
    clrun_tensor_type l = {CLRUN_I64, 1, {64}}, b = {CLRUN_BOOL, 1, {64}};
    clrun_tensor_id li, bi;
    assert_int_equal(clrun_graph_add_input(g, "l", &l, false, &li), CLRUN_OK);
    assert_int_equal(clrun_graph_add_input(g, "b", &b, false, &bi), CLRUN_OK);
    assert_int_equal(clrun_graph_mark_output(g, li), CLRUN_OK);
    int64_t lv[64];
    unsigned char bv[64];
    assert_int_equal(clrun_graph_example_input(g, 0, 1, lv, sizeof lv), CLRUN_OK);
    assert_int_equal(clrun_graph_example_input(g, 1, 1, bv, sizeof bv), CLRUN_OK);
    int ones = 0;
    for (int k = 0; k < 64; k++) {
        assert_true(lv[k] >= 0 && lv[k] < 16);
        assert_true(bv[k] <= 1);
        ones += bv[k];
    }
    assert_true(ones > 0 && ones < 64);
    clrun_graph_destroy(g);
}

static void example_input_refuses_a_wrong_index_or_size(void **state)
{
    (void)state;
    clrun_graph *g = two_input_graph();
    float x[15];
    assert_int_equal(clrun_graph_example_input(g, 2, 1, x, sizeof x), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clrun_last_error(NULL), "no input 2 (the graph has 2)"));
    assert_int_equal(clrun_graph_example_input(g, -1, 1, x, sizeof x), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(clrun_graph_example_input(g, 0, 1, x, sizeof x - 4), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clrun_last_error(NULL), "input 'x' has 60 bytes, 56 given"));
    assert_int_equal(clrun_graph_example_input(g, 0, 1, NULL, sizeof x), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(clrun_graph_example_input(NULL, 0, 1, x, sizeof x), CLRUN_ERROR_INVALID_ARGUMENT);
    clrun_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(donation_flags_read_as_built),
        cmocka_unit_test(donation_can_be_set_and_cleared_on_inputs),
        cmocka_unit_test(only_inputs_can_be_donated),
        cmocka_unit_test(example_inputs_are_the_seeded_uniform_fill),
        cmocka_unit_test(example_inputs_of_i64_and_bool),
        cmocka_unit_test(example_input_refuses_a_wrong_index_or_size),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
