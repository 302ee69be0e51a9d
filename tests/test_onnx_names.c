/* An ONNX model's own names in every interface (issue 23, item 1), and symbolic dimensions bound
 * from the shapes a caller feeds (item 2): clrun_graph_tensor_name and clrun_graph_find speak the
 * model's names ("39", "dense/Relu:0"), identifiers stay for the text format, and the options'
 * shapes bind the dim_params they cover, with conflicts refused. No device. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <clrun/clrun.h>

#include "onnx_builder.h"

enum { F32 = 1 };

typedef ob_loaded loaded;

static loaded load_with(onnx_builder *b, clrun_onnx_options *o)
{
    return ob_load(b, o);
}

/* input "input:0" -> Relu "dense/Relu:0" -> Add with itself "39" (outputs "39", "dense/Relu:0",
 * and a JSON string "\"q\"\n"). */
static void build_named(onnx_builder *b)
{
    static const int64_t dims[1] = {3};
    ob_init(b, 13);
    ob_input(b, "input:0", F32, 1, dims, NULL);
    ob_node(b, "Relu", "dense/Relu", "input:0", "dense/Relu:0");
    ob_node(b, "Add", "add_39", "dense/Relu:0,dense/Relu:0", "39");
    ob_node(b, "Neg", "neg", "39", "\"q\"\n");
    ob_output(b, "39", F32, 1, dims);
    ob_output(b, "dense/Relu:0", F32, 1, dims);
    ob_output(b, "\"q\"\n", F32, 1, dims);
}

static void test_inputs_and_outputs_keep_the_models_names(void **state)
{
    (void)state;
    onnx_builder b;
    build_named(&b);
    loaded r = load_with(&b, NULL);
    assert_int_equal(r.status, CLRUN_OK);
    const clrun_tensor_id *ins, *outs;
    assert_int_equal(clrun_graph_inputs(r.graph, &ins), 1);
    assert_string_equal(clrun_graph_tensor_name(r.graph, ins[0]), "input:0");
    assert_int_equal(clrun_graph_outputs(r.graph, &outs), 3);
    assert_string_equal(clrun_graph_tensor_name(r.graph, outs[0]), "39");
    assert_string_equal(clrun_graph_tensor_name(r.graph, outs[1]), "dense/Relu:0");
    assert_string_equal(clrun_graph_tensor_name(r.graph, outs[2]), "\"q\"\n");
    /* identifiers stay what the text format can write */
    assert_string_equal(clrun_graph_tensor_ident(r.graph, ins[0]), "input_0");
    assert_string_equal(clrun_graph_tensor_ident(r.graph, outs[0]), "_39");
    assert_string_equal(clrun_graph_tensor_ident(r.graph, outs[1]), "dense_Relu_0");
    clrun_graph_destroy(r.graph);
    ob_free(&b);
}

static void test_find_takes_the_models_name(void **state)
{
    (void)state;
    onnx_builder b;
    build_named(&b);
    loaded r = load_with(&b, NULL);
    assert_int_equal(r.status, CLRUN_OK);
    const clrun_tensor_id *ins, *outs;
    clrun_graph_inputs(r.graph, &ins);
    clrun_graph_outputs(r.graph, &outs);
    assert_int_equal(clrun_graph_find(r.graph, "39"), outs[0]);
    assert_int_equal(clrun_graph_find(r.graph, "dense/Relu:0"), outs[1]);
    assert_int_equal(clrun_graph_find(r.graph, "input:0"), ins[0]);
    assert_int_equal(clrun_graph_find(r.graph, "\"q\"\n"), outs[2]);
    /* the identifiers still work */
    assert_int_equal(clrun_graph_find(r.graph, "_39"), outs[0]);
    assert_int_equal(clrun_graph_find(r.graph, "nothing"), -1);
    clrun_graph_destroy(r.graph);
    ob_free(&b);
}

/* A model name that is another tensor's identifier finds the tensor the model means. */
static void test_model_name_wins_over_an_identifier(void **state)
{
    (void)state;
    onnx_builder b;
    static const int64_t dims[1] = {2};
    ob_init(&b, 13);
    ob_input(&b, "a/b", F32, 1, dims, NULL);  /* identifier a_b */
    ob_input(&b, "a_b", F32, 1, dims, NULL);  /* identifier a_b.1 */
    ob_node(&b, "Add", "add", "a/b,a_b", "y");
    ob_output(&b, "y", F32, 1, dims);
    loaded r = load_with(&b, NULL);
    assert_int_equal(r.status, CLRUN_OK);
    const clrun_tensor_id *ins;
    clrun_graph_inputs(r.graph, &ins);
    assert_int_equal(clrun_graph_find(r.graph, "a_b"), ins[1]);
    assert_int_equal(clrun_graph_find(r.graph, "a/b"), ins[0]);
    assert_string_equal(clrun_graph_tensor_name(r.graph, ins[1]), "a_b");
    clrun_graph_destroy(r.graph);
    ob_free(&b);
}

/* An output that is also an input: both carry the name, the input is found. */
static void test_an_input_as_output_shares_the_name(void **state)
{
    (void)state;
    onnx_builder b;
    static const int64_t dims[1] = {2};
    ob_init(&b, 13);
    ob_input(&b, "7", F32, 1, dims, NULL);
    ob_output(&b, "7", F32, 1, dims);
    loaded r = load_with(&b, NULL);
    assert_int_equal(r.status, CLRUN_OK);
    const clrun_tensor_id *ins, *outs;
    clrun_graph_inputs(r.graph, &ins);
    clrun_graph_outputs(r.graph, &outs);
    assert_true(ins[0] != outs[0]);
    assert_string_equal(clrun_graph_tensor_name(r.graph, outs[0]), "7");
    assert_int_equal(clrun_graph_find(r.graph, "7"), ins[0]);
    clrun_graph_destroy(r.graph);
    ob_free(&b);
}

/* The builder's API: once per tensor, 1 to CLRUN_GRAPH_MODEL_NAME_MAX bytes; the text format
 * writes identifiers. */
static void test_set_model_name_rules(void **state)
{
    (void)state;
    clrun_graph *g;
    assert_int_equal(clrun_graph_create("g", &g), CLRUN_OK);
    clrun_tensor_type t = {.dtype = CLRUN_F32, .rank = 1, .shape = {2}};
    clrun_tensor_id x, y;
    assert_int_equal(clrun_graph_add_input(g, "x", &t, false, &x), CLRUN_OK);
    assert_int_equal(clrun_graph_add_node(g, "relu", &x, 1, (const char *[]){"y"}, 1, NULL, 0, &y), CLRUN_OK);
    assert_int_equal(clrun_graph_mark_output(g, y), CLRUN_OK);
    assert_int_equal(clrun_graph_set_model_name(g, x, ""), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(clrun_graph_set_model_name(g, 99, "z"), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(clrun_graph_set_model_name(g, y, "out put/0"), CLRUN_OK);
    assert_int_equal(clrun_graph_set_model_name(g, y, "again"), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_string_equal(clrun_graph_tensor_name(g, y), "out put/0");
    assert_string_equal(clrun_graph_tensor_ident(g, y), "y");
    char *text = NULL;
    size_t length = 0;
    FILE *f = open_memstream(&text, &length);
    assert_non_null(f);
    assert_int_equal(clrun_graph_write(g, f), CLRUN_OK);
    fclose(f);
    assert_null(strstr(text, "out put"));
    free(text);
    clrun_graph_destroy(g);
}

/* Graph nodes carry the name of the model's node they come from (traces show it). */
static void test_nodes_keep_the_models_node_names(void **state)
{
    (void)state;
    onnx_builder b;
    build_named(&b);
    loaded r = load_with(&b, NULL);
    assert_int_equal(r.status, CLRUN_OK);
    assert_int_equal(clrun_graph_node_count(r.graph), 3);
    assert_string_equal(clrun_graph_node_model_name(r.graph, 0), "dense/Relu");
    assert_string_equal(clrun_graph_node_model_name(r.graph, 1), "add_39");
    assert_string_equal(clrun_graph_node_model_name(r.graph, 2), "neg");
    assert_null(clrun_graph_node_model_name(r.graph, 3));
    clrun_graph_destroy(r.graph);
    ob_free(&b);
}

/* x [batch, 3] and m [batch]: a shape fed for x binds 'batch' for m too. */
static void build_two_batched(onnx_builder *b)
{
    static const int64_t xd[2] = {-1, 3}, md[1] = {-1}, od[2] = {-1, 3};
    static const char *const xp[2] = {"batch", NULL}, *const mp[1] = {"batch"};
    ob_init(b, 13);
    ob_input(b, "x", F32, 2, xd, xp);
    ob_input(b, "m", F32, 1, md, mp);
    ob_node(b, "Relu", "r", "x", "y");
    ob_node(b, "Relu", "s", "m", "z");
    ob_output(b, "y", F32, 2, od);
    ob_output(b, "z", F32, 1, od);
}

static void test_a_fed_shape_binds_its_dims_everywhere(void **state)
{
    (void)state;
    onnx_builder b;
    build_two_batched(&b);
    clrun_onnx_shape shape = {.input = "x", .rank = 2, .dims = {5, 3}};
    clrun_onnx_options o;
    clrun_onnx_options_init(&o);
    o.shapes = &shape;
    o.shape_count = 1;
    loaded r = load_with(&b, &o);
    assert_int_equal(r.status, CLRUN_OK);
    const clrun_tensor_id *ins;
    clrun_graph_inputs(r.graph, &ins);
    assert_int_equal(clrun_graph_tensor_type(r.graph, ins[1])->shape[0], 5);
    clrun_graph_destroy(r.graph);
    ob_free(&b);
}

static void test_conflicting_bindings_are_refused(void **state)
{
    (void)state;
    onnx_builder b;
    build_two_batched(&b);
    clrun_onnx_dim dims[2] = {{"batch", 2}, {"batch", 3}};
    clrun_onnx_options o;
    clrun_onnx_options_init(&o);
    o.dims = dims;
    o.dim_count = 2;
    loaded r = load_with(&b, &o);
    assert_int_equal(r.status, CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(r.err, "dims bind dimension 'batch' twice, to 2 and to 3"));
    assert_null(r.graph);

    clrun_onnx_shape shapes[2] = {{.input = "x", .rank = 2, .dims = {4, 3}}, {.input = "m", .rank = 1, .dims = {6}}};
    o.dim_count = 1;
    o.shapes = shapes;
    o.shape_count = 1;
    r = load_with(&b, &o);
    assert_int_equal(r.status, CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(r.err, "the shape given for input 'x' has 4 in dimension 0 ('batch'), but dims "
                                  "bind 'batch' to 2"));
    o.dim_count = 0;
    o.shape_count = 2;
    r = load_with(&b, &o);
    assert_int_equal(r.status, CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(r.err, "the shape given for input 'm' has 6 in dimension 0 ('batch'), but the "
                                  "shape given for input 'x' makes 'batch' 4"));
    /* the same value twice is no conflict */
    dims[1].value = 2;
    o.dims = dims;
    o.dim_count = 2;
    o.shape_count = 0;
    r = load_with(&b, &o);
    assert_int_equal(r.status, CLRUN_OK);
    clrun_graph_destroy(r.graph);
    ob_free(&b);
}

/* Library messages name the options, not a program's flags. */
static void test_unbound_message_names_the_options(void **state)
{
    (void)state;
    onnx_builder b;
    build_two_batched(&b);
    loaded r = load_with(&b, NULL);
    assert_int_equal(r.status, CLRUN_ERROR_INVALID_GRAPH);
    assert_non_null(strstr(r.err, "input 'x' dimension 0 ('batch') is not bound"));
    assert_null(strstr(r.err, "--"));
    assert_non_null(strstr(r.err, "dims"));
    ob_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inputs_and_outputs_keep_the_models_names),
        cmocka_unit_test(test_find_takes_the_models_name),
        cmocka_unit_test(test_model_name_wins_over_an_identifier),
        cmocka_unit_test(test_an_input_as_output_shares_the_name),
        cmocka_unit_test(test_set_model_name_rules),
        cmocka_unit_test(test_nodes_keep_the_models_node_names),
        cmocka_unit_test(test_a_fed_shape_binds_its_dims_everywhere),
        cmocka_unit_test(test_conflicting_bindings_are_refused),
        cmocka_unit_test(test_unbound_message_names_the_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
