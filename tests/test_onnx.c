/* The ONNX importer without a device: what it builds (constant folding of shape subgraphs,
 * symbolic dims, initializers from every encoding and from external files, names), what it
 * refuses and how it says so, and that malformed bytes are errors (every prefix of a model,
 * deep nesting). Models are built in C (tests/onnx_builder.h). */
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <clrun/clrun.h>

#include "graph/graph.h"
#include "graph/op.h"
#include "graph_reference.h"
#include "onnx_builder.h"
#include "onnx/import.h"

enum { F32 = 1, I64 = 7, I32 = 6, BOOL = 9, F64 = 11, U8 = 2, I8 = 3, STRING = 8 };

typedef ob_loaded loaded;

static loaded load_with(onnx_builder *b, clrun_onnx_options *o)
{
    return ob_load(b, o);
}

static loaded load(onnx_builder *b)
{
    return load_with(b, NULL);
}

static void expect_refusal(onnx_builder *b, clrun_status status, const char *message)
{
    loaded r = load(b);
    if (r.status != status || strstr(r.err, message) == NULL)
        fail_msg("expected %s with \"%s\", got %s: %s", clrun_status_name(status), message,
                 clrun_status_name(r.status), r.err);
    assert_null(r.graph);
    ob_free(b);
}

/* ---- building ---- */

/* x [batch, 3, 4] reshaped by a shape computed from Shape(x): Shape -> Gather -> Unsqueeze ->
 * Concat with a constant -> Reshape. Everything but the reshape folds at load. */
static void build_shape_chain(onnx_builder *b)
{
    static const int64_t dims[3] = {-1, 3, 4}, one = 1, zero = 0, minus_one = -1;
    static const char *const params[3] = {"batch", NULL, NULL};
    ob_init(b, 13);
    ob_input(b, "x", F32, 3, dims, params);
    ob_initializer(b, "idx", I64, 0, NULL, &zero, 8);
    ob_initializer(b, "axes", I64, 1, &one, &zero, 8);
    ob_initializer(b, "rest", I64, 1, &one, &minus_one, 8);
    ob_node(b, "Shape", "shape", "x", "s");
    ob_node(b, "Gather", "first", "s,idx", "n");
    ob_node(b, "Unsqueeze", "unsq", "n,axes", "n1");
    Onnx__NodeProto *c = ob_node(b, "Concat", "cat", "n1,rest", "target");
    ob_attr_int(b, c, "axis", 0);
    ob_node(b, "Reshape", "reshape", "x,target", "y");
    ob_node(b, "Relu", "relu", "y", "z");
    int64_t out[2] = {-1, 12};
    ob_output(b, "z", F32, 2, out);
}

static void test_shape_subgraph_folds_at_load(void **state)
{
    (void)state;
    onnx_builder b;
    build_shape_chain(&b);
    clrun_onnx_dim dim = {"batch", 5};
    clrun_onnx_options o;
    clrun_onnx_options_init(&o);
    o.dims = &dim;
    o.dim_count = 1;
    loaded r = load_with(&b, &o);
    assert_int_equal(r.status, CLRUN_OK);
    /* Only the reshape and the relu reach the graph. */
    assert_int_equal(clrun_graph_node_count(r.graph), 2);
    const clrun_tensor_id *outs;
    assert_int_equal(clrun_graph_outputs(r.graph, &outs), 1);
    const clrun_tensor_type *t = clrun_graph_tensor_type(r.graph, outs[0]);
    assert_int_equal(t->rank, 2);
    assert_int_equal(t->shape[0], 5);
    assert_int_equal(t->shape[1], 12);
    assert_string_equal(clrun_graph_tensor_name(r.graph, outs[0]), "z");
    clrun_graph_destroy(r.graph);
    ob_free(&b);
}

static void test_unbound_dim_names_input_and_dimension(void **state)
{
    (void)state;
    onnx_builder b;
    build_shape_chain(&b);
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "model.onnx: input 'x' dimension 0 ('batch') is not bound");
}

static void test_whole_shape_binds_an_input(void **state)
{
    (void)state;
    onnx_builder b;
    build_shape_chain(&b);
    clrun_onnx_shape shape = {.input = "x", .rank = 3, .dims = {7, 3, 4}};
    clrun_onnx_options o;
    clrun_onnx_options_init(&o);
    o.shapes = &shape;
    o.shape_count = 1;
    loaded r = load_with(&b, &o);
    assert_int_equal(r.status, CLRUN_OK);
    const clrun_tensor_id *ins;
    clrun_graph_inputs(r.graph, &ins);
    assert_int_equal(clrun_graph_tensor_type(r.graph, ins[0])->shape[0], 7);
    clrun_graph_destroy(r.graph);
    /* A shape that contradicts a fixed dim, a wrong rank, and names that match nothing. */
    shape.dims[1] = 9;
    r = load_with(&b, &o);
    assert_int_equal(r.status, CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(r.err, "which the model fixes at 3"));
    shape.dims[1] = 3;
    shape.rank = 2;
    r = load_with(&b, &o);
    assert_int_equal(r.status, CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(r.err, "has 2 dimensions, the model's has 3"));
    shape.rank = 3;
    shape.input = "nope";
    r = load_with(&b, &o);
    assert_int_equal(r.status, CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(r.err, "'nope', which is not an input"));
    clrun_onnx_dim dim = {"bacth", 2};
    clrun_onnx_options_init(&o);
    o.dims = &dim;
    o.dim_count = 1;
    r = load_with(&b, &o);
    assert_int_equal(r.status, CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(r.err, "dimension 'bacth', which no input of the model has"));
    /* default_dim binds whatever is left. */
    clrun_onnx_options_init(&o);
    o.default_dim = 2;
    r = load_with(&b, &o);
    assert_int_equal(r.status, CLRUN_OK);
    clrun_graph_destroy(r.graph);
    ob_free(&b);
}

static void test_initializers_in_every_encoding(void **state)
{
    (void)state;
    onnx_builder b;
    ob_init(&b, 13);
    int64_t two = 2;
    /* typed fields: float_data, int64_data, int32_data (bool), double_data */
    Onnx__TensorProto *f = ob_initializer(&b, "f", F32, 1, &two, NULL, 0);
    float fv[2] = {1.5f, -2.25f};
    f->n_float_data = 2;
    f->float_data = fv;
    Onnx__TensorProto *i = ob_initializer(&b, "i", I64, 1, &two, NULL, 0);
    int64_t iv[2] = {-7, 1ll << 40};
    i->n_int64_data = 2;
    i->int64_data = iv;
    Onnx__TensorProto *bo = ob_initializer(&b, "bo", BOOL, 1, &two, NULL, 0);
    int32_t bv[2] = {1, 0};
    bo->n_int32_data = 2;
    bo->int32_data = bv;
    Onnx__TensorProto *d = ob_initializer(&b, "d", F64, 1, &two, NULL, 0);
    double dv[2] = {0.1, 1e300};
    d->n_double_data = 2;
    d->double_data = dv;
    float raw[2] = {3, 4};
    ob_initializer(&b, "r", F32, 1, &two, raw, sizeof raw);
    ob_output(&b, "f", F32, 1, &two);
    ob_output(&b, "i", I64, 1, &two);
    ob_output(&b, "bo", BOOL, 1, &two);
    ob_output(&b, "d", F64, 1, &two);
    ob_output(&b, "r", F32, 1, &two);
    loaded r = load(&b);
    assert_int_equal(r.status, CLRUN_OK);
    assert_int_equal(clrun_graph_tensor_count(r.graph), 5); /* constants as outputs, no copies */
    const clrun_tensor_id *outs;
    assert_int_equal(clrun_graph_outputs(r.graph, &outs), 5);
    assert_int_equal(clrun_graph_tensor_type(r.graph, outs[1])->dtype, CLRUN_I64);
    assert_int_equal(clrun_graph_tensor_type(r.graph, outs[2])->dtype, CLRUN_BOOL);
    assert_int_equal(clrun_graph_tensor_type(r.graph, outs[3])->dtype, CLRUN_F64);
    clrun_graph_destroy(r.graph);
    /* a raw_data size that does not fit the shape */
    ob_initializer(&b, "bad", F32, 1, &two, raw, 4);
    ob_output(&b, "bad", F32, 1, &two);
    expect_refusal(&b, CLRUN_ERROR_PARSE, "initializer 'bad' has 4 bytes of raw data for 2 elements of float (8 bytes)");
}

/* A model whose initializer w lives in an external file. */
static void build_external(onnx_builder *b, const char *location, const char *offset, const char *length)
{
    static const int64_t dims[1] = {4};
    ob_init(b, 13);
    ob_input(b, "x", F32, 1, dims, NULL);
    Onnx__TensorProto *w = ob_initializer(b, "w", F32, 1, dims, NULL, 0);
    ob_external(b, w, location, offset, length);
    ob_node(b, "Add", "add", "x,w", "y");
    ob_output(b, "y", F32, 1, dims);
}

static void test_external_data_relative_to_the_model(void **state)
{
    (void)state;
    char dir[] = "/tmp/clrun-onnx-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/weights.bin", dir);
    FILE *f = fopen(path, "wb");
    float junk[2] = {99, 99}, w[4] = {1, 2, 3, 4};
    fwrite(junk, 4, 2, f);
    fwrite(w, 4, 4, f);
    fclose(f);
    onnx_builder b;
    build_external(&b, "weights.bin", "8", "16");
    clrun_onnx_options o;
    clrun_onnx_options_init(&o);
    o.external_data_dir = dir;
    loaded r = load_with(&b, &o);
    assert_int_equal(r.status, CLRUN_OK);
    clrun_graph_destroy(r.graph);
    ob_free(&b);
    /* from the model file's folder */
    build_external(&b, "weights.bin", "8", NULL);
    size_t size;
    uint8_t *bytes = ob_pack(&b, &size);
    char model[256];
    snprintf(model, sizeof model, "%s/model.onnx", dir);
    f = fopen(model, "wb");
    fwrite(bytes, 1, size, f);
    fclose(f);
    free(bytes);
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_load_onnx(model, NULL, &g), CLRUN_OK);
    clrun_graph_destroy(g);
    ob_free(&b);
    /* missing file, a path outside the folder, a length that does not fit, a short file */
    build_external(&b, "missing.bin", NULL, NULL);
    o.external_data_dir = dir;
    r = load_with(&b, &o);
    assert_int_equal(r.status, CLRUN_ERROR_IO);
    assert_non_null(strstr(r.err, "initializer 'w' cannot open external data"));
    ob_free(&b);
    build_external(&b, "../weights.bin", NULL, NULL);
    r = load_with(&b, &o);
    assert_int_equal(r.status, CLRUN_ERROR_UNSUPPORTED);
    assert_non_null(strstr(r.err, "not a relative path inside the model's folder"));
    ob_free(&b);
    build_external(&b, "weights.bin", "0", "12");
    r = load_with(&b, &o);
    assert_int_equal(r.status, CLRUN_ERROR_PARSE);
    assert_non_null(strstr(r.err, "length 12 differs from the 16 bytes"));
    ob_free(&b);
    build_external(&b, "weights.bin", "16", NULL);
    r = load_with(&b, &o);
    assert_int_equal(r.status, CLRUN_ERROR_IO);
    assert_non_null(strstr(r.err, "ends before offset 16 + 16 bytes"));
    ob_free(&b);
    unlink(path);
    unlink(model);
    rmdir(dir);
}

/* ---- refusals ---- */

static void build_one_node(onnx_builder *b, int64_t opset, const char *op)
{
    static const int64_t dims[2] = {2, 3};
    ob_init(b, opset);
    ob_input(b, "x", F32, 2, dims, NULL);
    ob_node(b, "Relu", "first", "x", "h");
    ob_node(b, op, "Op_12", "h", "y");
    ob_output(b, "y", F32, 2, dims);
}

static void test_refusals_name_node_op_and_opset(void **state)
{
    (void)state;
    onnx_builder b;
    build_one_node(&b, 13, "FancyOp");
    expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED,
                   "model.onnx: node 1 'Op_12' (FancyOp, opset 13): operator FancyOp is not supported");
    build_one_node(&b, 11, "Relu");
    ob_attr_int(&b, b.graph.node[1], "fancy", 1);
    expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED,
                   "model.onnx: node 1 'Op_12' (Relu, opset 11): attribute 'fancy' is not supported");
    build_one_node(&b, 13, "Relu");
    b.graph.node[1]->domain = ob_str(&b, "com.microsoft");
    expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED,
                   "(Relu, domain com.microsoft, no opset imported): operators of domain 'com.microsoft' are not supported");
    build_one_node(&b, 22, "Relu");
    expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED,
                   "model.onnx: opset 22 of the default domain is newer than clrun knows (up to 21)");
    build_one_node(&b, 13, "HardSwish");
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "(HardSwish, opset 13): operator HardSwish does not exist in opset 13");
    /* a wrong attribute type */
    build_one_node(&b, 13, "LeakyRelu");
    ob_attr_string(&b, b.graph.node[1], "alpha", "big");
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "attribute 'alpha' is a string, expected a float");
}

/* Every operator clrun maps that ONNX's operator sets 18 to 21 list (their since_version in
 * onnx/defs/operator_sets.h) has that version in force at that opset: its mapping then sees the
 * new version and applies it (or refuses), never an older one's semantics. */
static void test_opsets_18_to_21_versions(void **state)
{
    (void)state;
    static const struct { int opset; const char *ops; } sets[] = {
        {18, "Pad Resize Split Col2Im ScatterND ScatterElements ReduceSumSquare ReduceLogSum ReduceLogSumExp "
             "ReduceL1 ReduceL2 ReduceMax ReduceMin ReduceMean ReduceProd GroupNormalization CenterCropPad Mish "
             "BitwiseAnd BitwiseOr BitwiseXor BitwiseNot LpPool OptionalGetElement OptionalHasElement"},
        {19, "Equal AveragePool Cast CastLike Constant DeformConv DequantizeLinear Identity If Loop Pad "
             "QuantizeLinear Resize Reshape Scan Shape Size"},
        {20, "AffineGrid ConstantOfShape DFT Gelu GridSample ImageDecoder IsInf IsNaN ReduceMax ReduceMin "
             "RegexFullMatch StringConcat StringSplit"},
        {21, "Cast CastLike Constant ConstantOfShape DequantizeLinear Flatten GroupNormalization Identity If "
             "Loop Pad QLinearMatMul QuantizeLinear Reshape Scan Shape Size Squeeze Transpose Unsqueeze"},
    };
    int mapped = 0;
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
        char list[512], *save = NULL;
        snprintf(list, sizeof list, "%s", sets[i].ops);
        for (char *op = strtok_r(list, " ", &save); op; op = strtok_r(NULL, " ", &save)) {
            const clrun__onnx_op *o = clrun__onnx_op_find("", op);
            if (o == NULL)
                continue; /* not mapped: refused by name */
            mapped++;
            if (clrun__onnx_op_version(o, sets[i].opset) != sets[i].opset)
                fail_msg("%s: version %d in force at opset %d", op, clrun__onnx_op_version(o, sets[i].opset),
                         sets[i].opset);
        }
    }
    assert_true(mapped >= 60);
    /* and nothing past 21: a 22 model is refused before any operator is looked at */
    assert_int_equal(clrun__onnx_op_version(clrun__onnx_op_find("", "Relu"), 21), 14);
}

static void test_conv_refusals(void **state)
{
    (void)state;
    onnx_builder b;
    static const int64_t x6[6] = {1, 2, 2, 2, 2, 2}, w6[6] = {2, 2, 1, 1, 1, 1};
    float w[4] = {1, 2, 3, 4};
    ob_init(&b, 11);
    ob_input(&b, "x", F32, 6, x6, NULL);
    ob_initializer(&b, "w", F32, 6, w6, w, sizeof w);
    ob_node(&b, "Conv", "Conv_4d", "x,w", "y");
    ob_output(&b, "y", F32, -1, NULL);
    expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED,
                   "model.onnx: node 0 'Conv_4d' (Conv, opset 11): 4-D windows are not supported (1-D, 2-D and 3-D are)");
    /* auto_pad that is not one of the four */
    static const int64_t x4[4] = {1, 2, 4, 4}, w4[4] = {2, 2, 1, 1};
    ob_init(&b, 11);
    ob_input(&b, "x", F32, 4, x4, NULL);
    ob_initializer(&b, "w", F32, 4, w4, w, sizeof w);
    Onnx__NodeProto *n = ob_node(&b, "Conv", "Conv_12", "x,w", "y");
    ob_attr_string(&b, n, "auto_pad", "SOMETIMES");
    ob_output(&b, "y", F32, -1, NULL);
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "(Conv, opset 11): auto_pad 'SOMETIMES' is not");
}

static void test_model_errors(void **state)
{
    (void)state;
    onnx_builder b;
    static const int64_t dims[1] = {3};
    /* a value read before anything produces it */
    ob_init(&b, 13);
    ob_input(&b, "x", F32, 1, dims, NULL);
    ob_node(&b, "Add", "add", "x,ghost", "y");
    ob_output(&b, "y", F32, 1, dims);
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "input 1 'ghost' is produced by no node, input or initializer");
    /* produced twice */
    ob_init(&b, 13);
    ob_input(&b, "x", F32, 1, dims, NULL);
    ob_node(&b, "Relu", "a", "x", "y");
    ob_node(&b, "Relu", "b", "x", "y");
    ob_output(&b, "y", F32, 1, dims);
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "'y' (output 0 of node 1) is defined twice");
    /* a cycle */
    ob_init(&b, 13);
    ob_input(&b, "x", F32, 1, dims, NULL);
    ob_node(&b, "Add", "a", "x,q", "p");
    ob_node(&b, "Relu", "b", "p", "q");
    ob_output(&b, "q", F32, 1, dims);
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "node 0 'a' (Add) is part of a cycle");
    /* an output type that differs from what the model declares */
    ob_init(&b, 13);
    ob_input(&b, "x", F32, 1, dims, NULL);
    ob_node(&b, "Relu", "a", "x", "y");
    static const int64_t wrong[1] = {4};
    ob_output(&b, "y", F32, 1, wrong);
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "output 'y' has shape [3], but the model declares [4]");
    /* an unsupported input type */
    ob_init(&b, 13);
    ob_input(&b, "x", STRING, 1, dims, NULL);
    ob_node(&b, "Identity", "a", "x", "y");
    ob_output(&b, "y", STRING, 1, dims);
    expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED, "input 'x' is string: clrun has no such tensors");
    /* rank 8 (CLRUN_MAX_DIMS) loads; rank 9 is refused, naming the input */
    static const int64_t eight[8] = {2, 1, 3, 1, 2, 1, 2, 1}, nine[9] = {2, 1, 3, 1, 2, 1, 2, 1, 2};
    ob_init(&b, 13);
    ob_input(&b, "x", F32, 8, eight, NULL);
    ob_node(&b, "Relu", "a", "x", "y");
    ob_output(&b, "y", F32, 8, eight);
    loaded r = load(&b);
    if (r.status != CLRUN_OK)
        fail_msg("rank 8: %s", r.err);
    const clrun_tensor_id *outs;
    assert_int_equal(clrun_graph_outputs(r.graph, &outs), 1);
    const clrun_tensor_type *t = clrun_graph_tensor_type(r.graph, outs[0]);
    assert_int_equal(t->rank, 8);
    for (int d = 0; d < 8; d++)
        assert_int_equal(t->shape[d], eight[d]);
    clrun_graph_destroy(r.graph);
    ob_free(&b);
    ob_init(&b, 13);
    ob_input(&b, "x", F32, 9, nine, NULL);
    ob_node(&b, "Relu", "a", "x", "y");
    ob_output(&b, "y", F32, 9, nine);
    expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED, "input 'x' has 9 dimensions (clrun tensors have at most 8)");
}

/* Nodes out of order load in dependency order; a sorted model keeps its order. */
static void test_unsorted_nodes_are_sorted(void **state)
{
    (void)state;
    onnx_builder b;
    static const int64_t dims[1] = {3};
    ob_init(&b, 13);
    ob_input(&b, "x", F32, 1, dims, NULL);
    ob_node(&b, "Neg", "second", "h", "y");
    ob_node(&b, "Relu", "first", "x", "h");
    ob_output(&b, "y", F32, 1, dims);
    loaded r = load(&b);
    assert_int_equal(r.status, CLRUN_OK);
    assert_int_equal(clrun_graph_node_count(r.graph), 2);
    clrun_graph_destroy(r.graph);
    ob_free(&b);
}

static void test_names_become_clrun_names(void **state)
{
    (void)state;
    char buf[300];
    assert_string_equal(clrun_onnx_name("input:0", buf, sizeof buf), "input_0");
    assert_string_equal(clrun_onnx_name("1", buf, sizeof buf), "_1");
    assert_string_equal(clrun_onnx_name("onnx::Add_3", buf, sizeof buf), "onnx__Add_3");
    assert_string_equal(clrun_onnx_name("", buf, sizeof buf), "_");
    onnx_builder b;
    static const int64_t dims[1] = {3};
    ob_init(&b, 13);
    ob_input(&b, "a:b", F32, 1, dims, NULL);
    ob_input(&b, "a;b", F32, 1, dims, NULL);
    ob_node(&b, "Add", "add", "a:b,a;b", "out/0");
    ob_output(&b, "out/0", F32, 1, dims);
    ob_output(&b, "a:b", F32, 1, dims); /* an input as an output: its own copy */
    loaded r = load(&b);
    assert_int_equal(r.status, CLRUN_OK);
    const clrun_tensor_id *ins, *outs;
    assert_int_equal(clrun_graph_inputs(r.graph, &ins), 2);
    assert_string_equal(clrun_graph_tensor_ident(r.graph, ins[0]), "a_b");
    assert_string_equal(clrun_graph_tensor_ident(r.graph, ins[1]), "a_b.1");
    assert_int_equal(clrun_graph_outputs(r.graph, &outs), 2);
    assert_string_equal(clrun_graph_tensor_ident(r.graph, outs[0]), "out_0");
    assert_true(outs[1] != ins[0]);
    clrun_graph_destroy(r.graph);
    ob_free(&b);
}

/* An input fixed at load becomes a constant: what it decides folds. */
static void test_constant_inputs_fold(void **state)
{
    (void)state;
    onnx_builder b;
    static const int64_t xd[2] = {2, 6}, sd[1] = {2}, yd[2] = {3, 4};
    ob_init(&b, 13);
    ob_input(&b, "x", F32, 2, xd, NULL);
    ob_input(&b, "shape", I64, 1, sd, NULL);
    ob_node(&b, "Reshape", "r", "x,shape", "y");
    ob_output(&b, "y", F32, 2, yd);
    loaded r = load(&b);
    assert_int_equal(r.status, CLRUN_ERROR_UNSUPPORTED);
    assert_non_null(strstr(r.err, "input 1 'shape' must be known at load time"));
    int64_t shape[2] = {3, 4};
    clrun_onnx_constant c = {.input = "shape", .type = {.dtype = CLRUN_I64, .rank = 1, .shape = {2}}, .data = shape};
    clrun_onnx_options o;
    clrun_onnx_options_init(&o);
    o.constants = &c;
    o.constant_count = 1;
    r = load_with(&b, &o);
    assert_int_equal(r.status, CLRUN_OK);
    const clrun_tensor_id *ins;
    assert_int_equal(clrun_graph_inputs(r.graph, &ins), 1);
    clrun_graph_destroy(r.graph);
    c.type.dtype = CLRUN_I32;
    r = load_with(&b, &o);
    assert_int_equal(r.status, CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(r.err, "the value given for input 'shape' is int32, the model's input is int64"));
    ob_free(&b);
}

/* An empty input (a dimension 0) is known whole from its shape: given as a constant (data NULL)
 * or fed at run time as a graph input, it folds, so ReduceSum's empty axes reduce over every
 * axis, or over none with noop_with_empty_axes. */
static void test_empty_constant_inputs(void **state)
{
    (void)state;
    static const int64_t xd[2] = {2, 3}, ad[1] = {0}, yd[2] = {1, 1};
    for (int noop = 0; noop < 2; noop++) {
        onnx_builder b;
        ob_init(&b, 13);
        ob_input(&b, "x", F32, 2, xd, NULL);
        ob_input(&b, "axes", I64, 1, ad, NULL);
        Onnx__NodeProto *n = ob_node(&b, "ReduceSum", "r", "x,axes", "y");
        ob_attr_int(&b, n, "noop_with_empty_axes", noop);
        ob_output(&b, "y", F32, 2, noop ? xd : yd);
        loaded r = load(&b);
        if (r.status != CLRUN_OK)
            fail_msg("refused as \"%s\"", r.err);
        const clrun_tensor_id *fed;
        assert_int_equal(clrun_graph_inputs(r.graph, &fed), 2); /* axes stays an input, of 0 bytes */
        assert_true(clrun_tensor_empty(clrun_graph_tensor_type(r.graph, fed[1])));
        assert_int_equal(clrun_graph_tensor_type(r.graph, clrun_graph_find(r.graph, "y"))->shape[0], noop ? 2 : 1);
        clrun_graph_destroy(r.graph);
        clrun_onnx_constant c = {.input = "axes", .type = {.dtype = CLRUN_I64, .rank = 1, .shape = {0}}, .data = NULL};
        clrun_onnx_options o;
        clrun_onnx_options_init(&o);
        o.constants = &c;
        o.constant_count = 1;
        r = load_with(&b, &o);
        assert_int_equal(r.status, CLRUN_OK);
        const clrun_tensor_id *ins, *outs;
        assert_int_equal(clrun_graph_inputs(r.graph, &ins), 1);
        assert_int_equal(clrun_graph_outputs(r.graph, &outs), 1);
        const clrun_tensor_type *t = clrun_graph_tensor_type(r.graph, outs[0]);
        assert_int_equal(t->rank, 2);
        assert_int_equal(t->shape[0], noop ? 2 : 1);
        assert_int_equal(t->shape[1], noop ? 3 : 1);
        clrun_graph_destroy(r.graph);
        /* an empty value of another shape than the model's is still refused */
        c.type.shape[0] = 1;
        int64_t one = 0;
        c.data = &one;
        c.type.rank = 2;
        c.type.shape[1] = 0;
        r = load_with(&b, &o);
        assert_int_equal(r.status, CLRUN_ERROR_INVALID_ARGUMENT);
        assert_non_null(strstr(r.err, "does not have the model's shape"));
        ob_free(&b);
    }
    /* An input of no declared shape: an empty value of a size a tensor may have is taken (and
     * the empty output is an empty constant of the graph), one whose other dimensions overflow
     * is not. */
    onnx_builder b;
    ob_init(&b, 13);
    ob_input(&b, "e", F32, -1, NULL, NULL);
    ob_node(&b, "Identity", "i", "e", "y");
    ob_output(&b, "y", F32, -1, NULL);
    clrun_onnx_constant c = {.input = "e", .type = {.dtype = CLRUN_F32, .rank = 3, .shape = {0, 4, 4}}};
    clrun_onnx_options o;
    clrun_onnx_options_init(&o);
    o.constants = &c;
    o.constant_count = 1;
    loaded r = load_with(&b, &o);
    if (r.status != CLRUN_OK)
        fail_msg("refused as \"%s\"", r.err);
    const clrun_tensor_id *outs;
    assert_int_equal(clrun_graph_outputs(r.graph, &outs), 1);
    const clrun_tensor_type *yt = clrun_graph_tensor_type(r.graph, outs[0]);
    assert_true(clrun_tensor_empty(yt) && yt->rank == 3 && yt->shape[0] == 0 && yt->shape[2] == 4);
    assert_int_equal(clrun_graph_node_count(r.graph), 0);
    clrun_graph_destroy(r.graph);
    c.type.shape[1] = c.type.shape[2] = (int64_t)1 << 62;
    r = load_with(&b, &o);
    assert_int_equal(r.status, CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(r.err, "does not have the model's shape"));
    ob_free(&b);
}

/* ---- malformed bytes ---- */

static void test_every_prefix_is_an_error_or_the_model(void **state)
{
    (void)state;
    onnx_builder b;
    build_shape_chain(&b);
    size_t size;
    uint8_t *bytes = ob_pack(&b, &size);
    clrun_onnx_options o;
    clrun_onnx_options_init(&o);
    o.default_dim = 2;
    char err[512];
    o.err = err;
    o.errlen = sizeof err;
    for (size_t n = 0; n <= size; n++) {
        clrun_graph *g = NULL;
        uint8_t *copy = malloc(n + 1); /* exactly n bytes readable under ASan */
        memcpy(copy, bytes, n);
        clrun_status s = clrun_graph_load_onnx_memory(copy, n, "cut.onnx", &o, &g);
        free(copy);
        if (n == size) {
            assert_int_equal(s, CLRUN_OK);
        } else {
            assert_int_not_equal(s, CLRUN_OK);
            assert_null(g);
            assert_memory_equal(err, "cut.onnx: ", 10);
        }
        clrun_graph_destroy(g);
    }
    free(bytes);
    ob_free(&b);
    /* not protobuf at all, and empty */
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_load_onnx_memory("\xff\xff\xff", 3, "junk.onnx", &o, &g), CLRUN_ERROR_PARSE);
    assert_non_null(strstr(err, "junk.onnx: not an ONNX model"));
    assert_int_equal(clrun_graph_load_onnx_memory("", 0, "empty.onnx", &o, &g), CLRUN_ERROR_INVALID_GRAPH);
    assert_non_null(strstr(err, "the model has no graph"));
}

/* Graphs nested in attributes 1000 deep: refused before the recursive unpacking sees them. */
static void test_deep_nesting_is_refused(void **state)
{
    (void)state;
    /* Innermost first: a GraphProto is (field 1: NodeProto (field 5: AttributeProto (field 6:
     * GraphProto ...))). */
    size_t cap = 1 << 16, len = 0;
    uint8_t *buf = malloc(cap), *tmp = malloc(cap);
    for (int level = 0; level < 1000; level++) {
        /* wrap buf as field `field` of a message, three times: attribute.g, node.attribute, graph.node */
        static const uint8_t fields[3] = {6, 5, 1};
        for (int k = 0; k < 3; k++) {
            size_t n = 0;
            tmp[n++] = (uint8_t)(fields[k] << 3 | 2);
            size_t v = len;
            do {
                tmp[n++] = (uint8_t)((v & 0x7F) | (v > 0x7F ? 0x80 : 0));
                v >>= 7;
            } while (v);
            memcpy(tmp + n, buf, len);
            len += n;
            memcpy(buf, tmp, len);
            assert_true(len + 16 < cap);
        }
    }
    /* model.graph = that graph */
    size_t n = 0;
    tmp[n++] = 7 << 3 | 2;
    size_t v = len;
    do {
        tmp[n++] = (uint8_t)((v & 0x7F) | (v > 0x7F ? 0x80 : 0));
        v >>= 7;
    } while (v);
    memcpy(tmp + n, buf, len);
    clrun_graph *g = NULL;
    char err[256];
    clrun_onnx_options o;
    clrun_onnx_options_init(&o);
    o.err = err;
    o.errlen = sizeof err;
    assert_int_equal(clrun_graph_load_onnx_memory(tmp, n + len, "deep.onnx", &o, &g), CLRUN_ERROR_PARSE);
    assert_non_null(strstr(err, "nested deeper than 100 levels"));
    free(buf);
    free(tmp);
}

/* ---- tensor files ---- */

static void test_tensor_pb_files(void **state)
{
    (void)state;
    onnx_builder b;
    ob_init(&b, 13);
    int64_t dims[2] = {2, 2};
    int32_t values[4] = {1, -2, 3, 4};
    Onnx__TensorProto *t = ob_tensor(&b, "ids", I32, 2, dims, values, sizeof values);
    size_t size = onnx__tensor_proto__get_packed_size(t);
    uint8_t *bytes = malloc(size);
    onnx__tensor_proto__pack(t, bytes);
    char path[] = "/tmp/clrun-tensor-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, bytes, size), (ssize_t)size);
    close(fd);
    clrun_tensor_type type;
    void *data = NULL;
    char name[32], err[256];
    assert_int_equal(clrun_onnx_tensor_load(path, &type, &data, name, sizeof name, err, sizeof err), CLRUN_OK);
    assert_string_equal(name, "ids");
    assert_int_equal(type.dtype, CLRUN_I32);
    assert_int_equal(type.rank, 2);
    assert_memory_equal(data, values, sizeof values);
    free(data);
    /* bfloat16 is bf16, its bits as they are; complex64 has no clrun dtype; a truncated file is
     * malformed */
    t->data_type = 16;
    t->raw_data.len = 8;
    size = onnx__tensor_proto__get_packed_size(t);
    onnx__tensor_proto__pack(t, bytes);
    FILE *f = fopen(path, "wb");
    fwrite(bytes, 1, size, f);
    fclose(f);
    assert_int_equal(clrun_onnx_tensor_load(path, &type, &data, NULL, 0, err, sizeof err), CLRUN_OK);
    assert_int_equal(type.dtype, CLRUN_BF16);
    assert_memory_equal(data, values, 8);
    free(data);
    data = NULL;
    t->data_type = 14;
    t->raw_data.len = 32;
    uint8_t *wide = malloc(onnx__tensor_proto__get_packed_size(t) + 32);
    uint8_t raw32[32] = {0};
    uint8_t *saved = t->raw_data.data;
    t->raw_data.data = raw32;
    size_t wide_size = onnx__tensor_proto__get_packed_size(t);
    onnx__tensor_proto__pack(t, wide);
    t->raw_data.data = saved;
    f = fopen(path, "wb");
    fwrite(wide, 1, wide_size, f);
    fclose(f);
    free(wide);
    assert_int_equal(clrun_onnx_tensor_load(path, &type, &data, NULL, 0, err, sizeof err), CLRUN_ERROR_UNSUPPORTED);
    if (strstr(err, "complex64") == NULL)
        fail_msg("complex64 refused as \"%s\"", err);
    t->data_type = 16;
    t->raw_data.len = 8;
    f = fopen(path, "wb");
    fwrite(bytes, 1, size - 2, f);
    fclose(f);
    assert_int_equal(clrun_onnx_tensor_load(path, &type, &data, NULL, 0, err, sizeof err), CLRUN_ERROR_PARSE);
    assert_null(data);
    /* an empty tensor is read: its shape with the 0, no data */
    int64_t empty_dims[3] = {3, 0, 5};
    Onnx__TensorProto *e = ob_tensor(&b, "e", F32, 3, empty_dims, NULL, 0);
    size = onnx__tensor_proto__get_packed_size(e);
    uint8_t *ebytes = malloc(size + 1);
    onnx__tensor_proto__pack(e, ebytes);
    f = fopen(path, "wb");
    fwrite(ebytes, 1, size, f);
    fclose(f);
    free(ebytes);
    assert_int_equal(clrun_onnx_tensor_load(path, &type, &data, NULL, 0, err, sizeof err), CLRUN_OK);
    assert_int_equal(type.dtype, CLRUN_F32);
    assert_int_equal(type.rank, 3);
    assert_int_equal(type.shape[1], 0);
    assert_int_equal(type.shape[2], 5);
    assert_int_equal(clrun_tensor_elements(&type), 0);
    assert_null(data);
    unlink(path);
    free(bytes);
    ob_free(&b);
}

/* ---- .npy ---- */

static void test_npy_round_trips_every_dtype(void **state)
{
    (void)state;
    static const clrun_dtype dtypes[] = {CLRUN_F32, CLRUN_F64, CLRUN_I32, CLRUN_I64, CLRUN_BOOL, CLRUN_F16};
    char path[] = "/tmp/clrun-npy-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    for (size_t k = 0; k < sizeof dtypes / sizeof dtypes[0]; k++)
        for (int rank = 0; rank <= CLRUN_MAX_DIMS; rank++) {
            clrun_tensor_type t = {.dtype = dtypes[k], .rank = rank};
            for (int d = 0; d < rank; d++)
                t.shape[d] = d + 1;
            uint64_t bytes = clrun_tensor_bytes(&t);
            unsigned char *data = malloc(bytes);
            for (uint64_t i = 0; i < bytes; i++)
                data[i] = dtypes[k] == CLRUN_BOOL ? (unsigned char)(i % 2) : (unsigned char)(i * 37 + k);
            char err[256];
            assert_int_equal(clrun_npy_save(path, &t, data, err, sizeof err), CLRUN_OK);
            clrun_tensor_type back;
            void *read = NULL;
            assert_int_equal(clrun_npy_load(path, &back, &read, err, sizeof err), CLRUN_OK);
            assert_int_equal(back.dtype, t.dtype);
            assert_int_equal(back.rank, t.rank);
            for (int d = 0; d < rank; d++)
                assert_int_equal(back.shape[d], t.shape[d]);
            assert_memory_equal(read, data, bytes);
            /* numpy's rule: the header ends on a 64-byte boundary, with a newline */
            FILE *f = fopen(path, "rb");
            unsigned char head[10];
            assert_int_equal(fread(head, 1, 10, f), 10);
            fclose(f);
            size_t header = (size_t)head[8] | (size_t)head[9] << 8;
            assert_int_equal((10 + header) % 64, 0);
            free(read);
            free(data);
        }
    unlink(path);
}

static clrun_status parse_npy(const char *header, size_t data_bytes, char *err, size_t errlen)
{
    size_t hl = strlen(header);
    size_t size = 10 + hl + data_bytes;
    unsigned char *bytes = calloc(1, size);
    memcpy(bytes, "\x93NUMPY\x01\x00", 8);
    bytes[8] = (unsigned char)(hl & 0xFF);
    bytes[9] = (unsigned char)(hl >> 8);
    memcpy(bytes + 10, header, hl);
    clrun_tensor_type t;
    void *data = NULL;
    clrun_status s = clrun_npy_parse(bytes, size, "x.npy", &t, &data, err, errlen);
    free(data);
    free(bytes);
    return s;
}

static void test_npy_variants_clrun_does_not_read(void **state)
{
    (void)state;
    char err[256];
    assert_int_equal(parse_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n", 24, err, sizeof err), CLRUN_OK);
    assert_int_equal(parse_npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }\n", 24, err, sizeof err),
                     CLRUN_ERROR_UNSUPPORTED);
    assert_non_null(strstr(err, "x.npy: Fortran-order arrays are not supported"));
    assert_int_equal(parse_npy("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }\n", 16, err, sizeof err),
                     CLRUN_ERROR_UNSUPPORTED);
    assert_non_null(strstr(err, "object arrays are not supported"));
    assert_int_equal(parse_npy("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }\n", 8, err, sizeof err),
                     CLRUN_ERROR_UNSUPPORTED);
    assert_non_null(strstr(err, "big-endian"));
    assert_int_equal(parse_npy("{'descr': '<u1', 'fortran_order': False, 'shape': (2,), }\n", 2, err, sizeof err),
                     CLRUN_OK); /* a byte's order is no order: '<' as numpy's '|' */
    assert_int_equal(parse_npy("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }\n", 16, err, sizeof err),
                     CLRUN_ERROR_UNSUPPORTED);
    assert_non_null(strstr(err, "dtype '<c8' is not supported"));
    assert_int_equal(parse_npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }\n", 8, err,
                               sizeof err), CLRUN_ERROR_UNSUPPORTED);
    assert_non_null(strstr(err, "structured arrays"));
    /* an empty array is read (an empty input) */
    assert_int_equal(parse_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }\n", 0, err, sizeof err),
                     CLRUN_OK);
    assert_int_equal(parse_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n", 20, err, sizeof err),
                     CLRUN_ERROR_PARSE);
    assert_non_null(strstr(err, "20 bytes of data for a shape of 24 bytes"));
    assert_int_equal(parse_npy("{'descr': '<f4', 'shape': (2, 3), }\n", 24, err, sizeof err), CLRUN_ERROR_PARSE);
    /* 8 dimensions (CLRUN_MAX_DIMS) are read, 9 are not */
    assert_int_equal(parse_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 1, 3, 1, 1, 2, 1, 1), }\n",
                               48, err, sizeof err), CLRUN_OK);
    assert_int_equal(parse_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 1, 3, 1, 1, 2, 1, 1, 1), }\n",
                               48, err, sizeof err), CLRUN_ERROR_UNSUPPORTED);
    assert_non_null(strstr(err, "more than 8 dimensions"));
    clrun_tensor_type t;
    void *data;
    assert_int_equal(clrun_npy_parse("PK\x03\x04", 4, "x.npz", &t, &data, err, sizeof err), CLRUN_ERROR_PARSE);
    assert_non_null(strstr(err, "not a .npy file"));
}

/* ---- the optimizers of ai.onnx.preview.training ---- */

#define TRAINING "ai.onnx.preview.training"

/* A model importing opset `version` of the training domain only (no default domain). */
static void ob_init_training(onnx_builder *b, int64_t version)
{
    ob_init(b, 0);
    Onnx__OperatorSetIdProto *o = ob_alloc(b, sizeof *o);
    Onnx__OperatorSetIdProto init = ONNX__OPERATOR_SET_ID_PROTO__INIT;
    *o = init;
    o->domain = ob_str(b, TRAINING);
    o->has_version = 1;
    o->version = version;
    ob_push(b, (void ***)&b->model.opset_import, &b->model.n_opset_import, o);
}

/* The two tensors every optimizer test updates: [2, 3] and [4], f64. */
static const int64_t opt_dims[2][2] = {{2, 3}, {4, 0}};
static const int opt_rank[2] = {2, 1};
static const int opt_count[2] = {6, 4};

/* Element k of tensor i of group letter ('X', 'G', 'V', 'H'): H positive. */
static double opt_value(char group, int i, int k)
{
    double v = sin(1.0 + k + 7.0 * i + 13.0 * (group - 'A'));
    return group == 'H' ? 0.25 + fabs(v) : v;
}

/* op(R, T, X0, X1, <groups>0, 1...) -> X0_new, X1_new, <outs>0_new...: R an f64 scalar input, T
 * an int64 scalar input or, when t_const, an initializer of value t. */
static Onnx__NodeProto *build_optimizer(onnx_builder *b, const char *op, const char *groups, const char *outs,
                                        bool t_const, int64_t t)
{
    ob_init_training(b, 1);
    char inputs[256] = "R,T", outputs[256] = "", name[16];
    ob_input(b, "R", F64, 0, NULL, NULL);
    if (t_const)
        ob_initializer(b, "T", I64, 0, NULL, &t, sizeof t);
    else
        ob_input(b, "T", I64, 0, NULL, NULL);
    for (const char *g = groups; *g; g++)
        for (int i = 0; i < 2; i++) {
            snprintf(name, sizeof name, "%c%d", *g, i);
            ob_input(b, name, F64, opt_rank[i], opt_dims[i], NULL);
            snprintf(inputs + strlen(inputs), sizeof inputs - strlen(inputs), ",%s", name);
        }
    for (const char *g = outs; *g; g++)
        for (int i = 0; i < 2; i++) {
            snprintf(name, sizeof name, "%c%d_new", *g, i);
            ob_output(b, name, F64, opt_rank[i], opt_dims[i]);
            snprintf(outputs + strlen(outputs), sizeof outputs - strlen(outputs), "%s%s", outputs[0] ? "," : "",
                     name);
        }
    Onnx__NodeProto *n = ob_node(b, op, "opt", inputs, outputs);
    n->domain = ob_str(b, TRAINING);
    return n;
}

/* The attributes the tests give (as the model stores them: floats). */
static const float opt_norm = 0.01f, opt_eps = 1e-3f, opt_decay = 0.1f, opt_alpha = 0.9f, opt_beta = 0.8f,
                   opt_post = 0.02f;

/* ONNX's pseudo code for one element, in double, with the attributes above. */
static void opt_reference(const char *op, bool nesterov, double r, int64_t t, double x, double g, double v,
                          double h, double *out)
{
    double gr = (double)opt_norm * x + g;
    if (strcmp(op, "Adagrad") == 0) {
        double rate = r / (1 + (double)t * opt_decay), hn = h + gr * gr;
        out[0] = x - rate * gr / (sqrt(hn) + opt_eps);
        out[1] = hn;
    } else if (strcmp(op, "Adam") == 0) {
        double vn = (double)opt_alpha * v + (1 - (double)opt_alpha) * gr;
        double hn = (double)opt_beta * h + (1 - (double)opt_beta) * (gr * gr);
        double rate = t > 0 ? r * sqrt(1 - pow(opt_beta, (double)t)) / (1 - pow(opt_alpha, (double)t)) : r;
        out[0] = (1 - (double)opt_post) * (x - rate * (vn / (sqrt(hn) + opt_eps)));
        out[1] = vn;
        out[2] = hn;
    } else {
        double vn = (double)opt_alpha * v + (t > 0 ? (double)opt_beta : 1.0) * gr;
        out[0] = nesterov ? x - r * (gr + (double)opt_alpha * vn) : x - r * vn;
        out[1] = vn;
    }
}

/* How many of the graph's nodes run `op`. */
static int count_ops(const clrun_graph *g, const char *op)
{
    int k = 0;
    for (int32_t i = 0; i < g->node_count; i++)
        k += strcmp(g->nodes[i].op->name, op) == 0;
    return k;
}

/* Evaluates the loaded optimizer in double (tests/graph_reference.c) at T = t (unless T is a
 * constant) and compares every output with opt_reference. */
static void check_optimizer(const clrun_graph *g, const char *op, bool nesterov, const char *outs, int64_t t)
{
    const double r = 0.05;
    const clrun_tensor_id *ins, *outputs;
    int32_t n_in = clrun_graph_inputs(g, &ins), n_out = clrun_graph_outputs(g, &outputs);
    double data[16][6];
    const double *inputs[16];
    assert_true(n_in <= 16);
    for (int32_t j = 0; j < n_in; j++) {
        const char *name = clrun_graph_tensor_name(g, ins[j]);
        if (strcmp(name, "R") == 0)
            data[j][0] = r;
        else if (strcmp(name, "T") == 0)
            data[j][0] = (double)t;
        else
            for (int k = 0; k < opt_count[name[1] - '0']; k++)
                data[j][k] = opt_value(name[0], name[1] - '0', k);
        inputs[j] = data[j];
    }
    double **values;
    char err[512];
    if (gref_eval(g, inputs, NULL, &values, err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_int_equal(n_out, 2 * (int)strlen(outs));
    for (int32_t j = 0; j < n_out; j++) {
        const char *name = clrun_graph_tensor_name(g, outputs[j]);
        int i = name[1] - '0', which = (int)(strchr(outs, name[0]) - outs);
        assert_string_equal(name + 2, "_new");
        assert_int_equal(j, which * 2 + i); /* outputs in the model's order */
        for (int k = 0; k < opt_count[i]; k++) {
            double expect[3];
            opt_reference(op, nesterov, r, t, opt_value('X', i, k), opt_value('G', i, k), opt_value('V', i, k),
                          opt_value('H', i, k), expect);
            double got = values[outputs[j]][k];
            if (fabs(got - expect[which]) > 1e-12 * fmax(1, fabs(expect[which])))
                fail_msg("%s T=%" PRId64 " %s[%d]: got %.17g, expected %.17g", op, t, name, k, got,
                         expect[which]);
        }
    }
    gref_free(g, values);
}

static void test_optimizers_map_to_elementwise_ops(void **state)
{
    (void)state;
    static const struct {
        const char *op, *groups, *outs, *mode;
    } cases[] = {
        {"Adagrad", "XGH", "XH", NULL},
        {"Adam", "XGVH", "XVH", NULL},
        {"Momentum", "XGV", "XV", "standard"},
        {"Momentum", "XGV", "XV", "nesterov"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int t_const = 0; t_const < 2; t_const++)
            for (int64_t t = 0; t <= 3; t += 3) {
                onnx_builder b;
                Onnx__NodeProto *n = build_optimizer(&b, cases[c].op, cases[c].groups, cases[c].outs,
                                                     t_const, t);
                ob_attr_float(&b, n, "norm_coefficient", opt_norm);
                if (strcmp(cases[c].op, "Adagrad") == 0) {
                    ob_attr_float(&b, n, "decay_factor", opt_decay);
                    ob_attr_float(&b, n, "epsilon", opt_eps);
                } else {
                    ob_attr_float(&b, n, "alpha", opt_alpha);
                    ob_attr_float(&b, n, "beta", opt_beta);
                }
                if (strcmp(cases[c].op, "Adam") == 0) {
                    ob_attr_float(&b, n, "epsilon", opt_eps);
                    ob_attr_float(&b, n, "norm_coefficient_post", opt_post);
                }
                if (cases[c].mode)
                    ob_attr_string(&b, n, "mode", cases[c].mode);
                loaded r = load(&b);
                if (r.status != CLRUN_OK)
                    fail_msg("%s: %s", cases[c].op, r.err);
                const clrun_graph *g = r.graph;
                /* Elementwise ops only; T's test on the device when T comes at run time, folded at
                 * load when it is a constant (then no comparison, no select, no power). */
                int runtime = t_const ? 0 : 1;
                assert_int_equal(count_ops(g, "greater"), strcmp(cases[c].op, "Adagrad") ? runtime : 0);
                assert_int_equal(count_ops(g, "where"), strcmp(cases[c].op, "Adagrad") ? runtime : 0);
                assert_int_equal(count_ops(g, "pow"), strcmp(cases[c].op, "Adam") ? 0 : 2 * runtime);
                assert_int_equal(count_ops(g, "cast"), strcmp(cases[c].op, "Momentum") ? runtime : 0);
                assert_int_equal(count_ops(g, "sqrt"), (strcmp(cases[c].op, "Momentum") ? 2 : 0) +
                                 (strcmp(cases[c].op, "Adam") == 0 && !t_const));
                for (int32_t i = 0; i < g->node_count; i++) {
                    const char *o = g->nodes[i].op->name;
                    if (!strstr(" add sub mul div sqrt pow cast greater where ", o))
                        fail_msg("%s: unexpected graph op %s", cases[c].op, o);
                }
                bool nesterov = cases[c].mode && strcmp(cases[c].mode, "nesterov") == 0;
                if (t_const)
                    check_optimizer(g, cases[c].op, nesterov, cases[c].outs, t);
                else
                    for (int64_t run_t = 0; run_t <= 3; run_t++)
                        check_optimizer(g, cases[c].op, nesterov, cases[c].outs, run_t);
                clrun_graph_destroy(r.graph);
                ob_free(&b);
            }
}

/* R and T of one element but rank 1 are taken as scalars; R of the other float type is cast. */
static void test_optimizer_scalars_of_rank_one(void **state)
{
    (void)state;
    onnx_builder b;
    static const int64_t one[1] = {1}, x[1] = {3};
    ob_init_training(&b, 1);
    ob_input(&b, "R", F32, 1, one, NULL);
    ob_input(&b, "T", I64, 1, one, NULL);
    ob_input(&b, "X", F64, 1, x, NULL);
    ob_input(&b, "G", F64, 1, x, NULL);
    ob_input(&b, "V", F64, 1, x, NULL);
    ob_output(&b, "X_new", F64, 1, x);
    ob_output(&b, "V_new", F64, 1, x);
    Onnx__NodeProto *n = ob_node(&b, "Momentum", "m", "R,T,X,G,V", "X_new,V_new");
    n->domain = ob_str(&b, TRAINING);
    ob_attr_float(&b, n, "alpha", 0.5f);
    ob_attr_float(&b, n, "beta", 0.25f);
    ob_attr_float(&b, n, "norm_coefficient", 0);
    ob_attr_string(&b, n, "mode", "standard");
    loaded r = load(&b);
    if (r.status != CLRUN_OK)
        fail_msg("%s", r.err);
    assert_int_equal(count_ops(r.graph, "reshape"), 2);
    assert_int_equal(count_ops(r.graph, "cast"), 1); /* R to f64 */
    const double rv[1] = {0.5}, tv[1] = {2}, xv[3] = {1, 2, 3}, gv[3] = {4, 0, -4}, vv[3] = {2, 2, 2};
    const double *inputs[5] = {rv, tv, xv, gv, vv};
    double **values;
    char err[512];
    if (gref_eval(r.graph, inputs, NULL, &values, err, sizeof err) != 0)
        fail_msg("%s", err);
    const clrun_tensor_id *outs;
    clrun_graph_outputs(r.graph, &outs);
    for (int k = 0; k < 3; k++) {
        double vn = 0.5 * vv[k] + 0.25 * gv[k];
        assert_true(values[outs[1]][k] == vn);
        assert_true(values[outs[0]][k] == xv[k] - 0.5 * vn);
    }
    gref_free(r.graph, values);
    clrun_graph_destroy(r.graph);
    ob_free(&b);
}

static void test_optimizer_refusals(void **state)
{
    (void)state;
    onnx_builder b;
    /* inputs that do not make R, T and n groups */
    build_optimizer(&b, "Adagrad", "XGH", "XH", false, 0);
    Onnx__NodeProto *n = b.graph.node[0];
    n->n_input--;
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH,
                   "model.onnx: node 0 'opt' (Adagrad, domain " TRAINING ", opset 1): Adagrad takes R, T and n each "
                   "of X, G, H (2 + 3·n inputs, n >= 1): 7 inputs do not make that");
    build_optimizer(&b, "Adam", "XGV", "XV", false, 0);
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "Adam takes R, T and n each of X, G, V, H (2 + 4·n inputs, "
                   "n >= 1): 8 inputs do not make that");
    /* outputs that do not match */
    build_optimizer(&b, "Momentum", "XGV", "X", false, 0);
    ob_attr_float(&b, b.graph.node[0], "alpha", 0.9f);
    ob_attr_float(&b, b.graph.node[0], "beta", 0.9f);
    ob_attr_float(&b, b.graph.node[0], "norm_coefficient", 0);
    ob_attr_string(&b, b.graph.node[0], "mode", "standard");
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "Momentum with n = 2 (from its inputs) has 2·n = 4 outputs, not 2");
    /* a mode that is neither, a required attribute missing */
    build_optimizer(&b, "Momentum", "XGV", "XV", false, 0);
    ob_attr_float(&b, b.graph.node[0], "alpha", 0.9f);
    ob_attr_float(&b, b.graph.node[0], "beta", 0.9f);
    ob_attr_float(&b, b.graph.node[0], "norm_coefficient", 0);
    ob_attr_string(&b, b.graph.node[0], "mode", "heavy_ball");
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH,
                   "(Momentum, domain " TRAINING ", opset 1): mode 'heavy_ball' is not 'standard' or 'nesterov'");
    build_optimizer(&b, "Momentum", "XGV", "XV", false, 0);
    ob_attr_float(&b, b.graph.node[0], "beta", 0.9f);
    ob_attr_float(&b, b.graph.node[0], "norm_coefficient", 0);
    ob_attr_string(&b, b.graph.node[0], "mode", "standard");
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "(Momentum, domain " TRAINING ", opset 1): attribute 'alpha' is required");
    /* an attribute the op does not have */
    build_optimizer(&b, "Adagrad", "XGH", "XH", false, 0);
    ob_attr_float(&b, b.graph.node[0], "alpha", 0.9f);
    expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED, "(Adagrad, domain " TRAINING ", opset 1): attribute 'alpha' is not supported");
    /* a tensor whose partner has another shape; T not int64 */
    build_optimizer(&b, "Adagrad", "XGH", "XH", false, 0);
    b.graph.node[0]->input[5] = ob_str(&b, "G0"); /* H0 [2, 3] in place of G1 [4] */
    b.graph.node[0]->input[4] = ob_str(&b, "G1");
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "input 4 'G1' is double [4], but the tensor it goes with, "
                   "input 2 'X0', is double [2, 3]");
    build_optimizer(&b, "Adagrad", "XGH", "XH", false, 0);
    b.graph.node[0]->input[1] = ob_str(&b, "R");
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "input 1 'R' (T) must be one int64, not double []");
    /* another operator of the domain, another opset of it, another domain */
    build_optimizer(&b, "Gradient", "XGH", "XH", false, 0);
    expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED,
                   "model.onnx: node 0 'opt' (Gradient, domain " TRAINING ", opset 1): operator Gradient is not supported");
    build_optimizer(&b, "Adagrad", "XGH", "XH", false, 0);
    b.model.opset_import[0]->version = 2;
    expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED, "(Adagrad, domain " TRAINING ", opset 2): opset 2 of domain '"
                   TRAINING "' is newer than clrun knows (up to 1)");
    build_optimizer(&b, "Adagrad", "XGH", "XH", false, 0);
    b.model.opset_import[0]->domain = ob_str(&b, "ai.onnx.ml");
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "(Adagrad, domain " TRAINING ", no opset imported): the model "
                   "imports no version of domain '" TRAINING "'");
    /* the default domain's operators need its opset, which this model does not import */
    build_optimizer(&b, "Relu", "X", "X", false, 0);
    b.graph.node[0]->domain = NULL;
    b.graph.node[0]->n_input = 1;
    b.graph.node[0]->input[0] = ob_str(&b, "X0");
    b.graph.node[0]->n_output = 1;
    b.graph.n_output = 1;
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH,
                   "(Relu, no opset imported): the model imports no version of the default operator set");
}

/* ---- scatter, index tuples, TopK, shapes from values ---- */

/* Input x f32 [3, 4] and one node of `op` at `opset` over `inputs` (the others are the
 * caller's to declare), its outputs the graph's. */
static Onnx__NodeProto *build_index_node(onnx_builder *b, int64_t opset, const char *op, const char *inputs,
                                         const char *outputs)
{
    static const int64_t xd[2] = {3, 4};
    ob_init(b, opset);
    ob_input(b, "x", F32, 2, xd, NULL);
    Onnx__NodeProto *n = ob_node(b, op, "node", inputs, outputs);
    for (size_t i = 0; i < n->n_output; i++) /* y, values: x's type; indices, counts...: int64 */
        ob_output(b, n->output[i], strcmp(n->output[i], "y") && strcmp(n->output[i], "values") ? I64 : F32, -1,
                  NULL);
    return n;
}

static void test_scatter_gather_nd_and_topk_map_to_graph_ops(void **state)
{
    (void)state;
    onnx_builder b;
    static const int64_t one[1] = {1}, k2[1] = {2}, id[2] = {2, 1}, ud[2] = {2, 4}, c3[1] = {3};
    /* TopK: top_k_indices, then gather_elements for the values */
    build_index_node(&b, 11, "TopK", "x,K", "values,indices");
    ob_initializer(&b, "K", I64, 1, one, k2, sizeof k2);
    loaded r = load(&b);
    if (r.status != CLRUN_OK)
        fail_msg("%s", r.err);
    assert_int_equal(count_ops(r.graph, "top_k_indices"), 1);
    assert_int_equal(count_ops(r.graph, "gather_elements"), 1);
    clrun_graph_destroy(r.graph);
    ob_free(&b);
    /* ScatterND-16 with reduction add, Scatter-10, GatherND-12 with batch_dims */
    const struct {
        int64_t opset;
        const char *op, *graph_op;
    } cases[] = {{16, "ScatterND", "scatter_nd"}, {10, "Scatter", "scatter_elements"},
                 {16, "ScatterElements", "scatter_elements"}, {12, "GatherND", "gather_nd"}};
    for (int c = 0; c < 4; c++) {
        bool scatter = strcmp(cases[c].graph_op, "gather_nd") != 0;
        Onnx__NodeProto *n = build_index_node(&b, cases[c].opset, cases[c].op, scatter ? "x,i,u" : "x,i", "y");
        ob_input(&b, "i", I64, 2, id, NULL);
        if (scatter)
            ob_input(&b, "u", F32, 2, strcmp(cases[c].op, "ScatterND") == 0 ? ud : id, NULL);
        if (cases[c].opset == 16)
            ob_attr_string(&b, n, "reduction", "add");
        if (cases[c].opset == 12)
            ob_attr_int(&b, n, "batch_dims", 0);
        r = load(&b);
        if (r.status != CLRUN_OK)
            fail_msg("%s: %s", cases[c].op, r.err);
        assert_int_equal(count_ops(r.graph, cases[c].graph_op), 1);
        clrun_graph_destroy(r.graph);
        ob_free(&b);
    }
    /* Compress with a condition known at load: a gather of the rows it keeps */
    const uint8_t keep[3] = {1, 0, 1};
    Onnx__NodeProto *n = build_index_node(&b, 11, "Compress", "x,cond", "y");
    ob_initializer(&b, "cond", BOOL, 1, c3, keep, sizeof keep);
    ob_attr_int(&b, n, "axis", 0);
    r = load(&b);
    if (r.status != CLRUN_OK)
        fail_msg("%s", r.err);
    assert_int_equal(count_ops(r.graph, "gather"), 1);
    clrun_graph_destroy(r.graph);
    ob_free(&b);
}

/* The model loads, every output empty: [d0] or [d0, d1] (d1 < 0: rank 1), and no node runs. */
static void expect_empty_outputs(onnx_builder *b, int outputs, int64_t d0, int64_t d1)
{
    clrun_onnx_options o;
    clrun_onnx_options_init(&o);
    loaded r = load_with(b, &o);
    ob_free(b);
    if (r.status != CLRUN_OK)
        fail_msg("refused as \"%s\"", r.err);
    const clrun_tensor_id *outs;
    assert_int_equal(clrun_graph_outputs(r.graph, &outs), outputs);
    for (int i = 0; i < outputs; i++) {
        const clrun_tensor_type *t = clrun_graph_tensor_type(r.graph, outs[i]);
        assert_true(clrun_tensor_empty(t));
        assert_int_equal(t->rank, d1 < 0 ? 1 : 2);
        assert_int_equal(t->shape[0], d0);
        if (d1 >= 0)
            assert_int_equal(t->shape[1], d1);
    }
    assert_int_equal(clrun_graph_node_count(r.graph), 0);
    clrun_graph_destroy(r.graph);
}

static void test_scatter_topk_and_value_shaped_refusals(void **state)
{
    (void)state;
    onnx_builder b;
    static const int64_t one[1] = {1}, zero[1] = {0}, id[2] = {3, 4}, c3[1] = {3};
    build_index_node(&b, 11, "TopK", "x,K", "values,indices");
    ob_input(&b, "K", I64, 1, one, NULL);
    expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED, "(TopK, opset 11): input 1 'K' must be known at load time");
    build_index_node(&b, 11, "TopK", "x,K", "values,indices");
    ob_initializer(&b, "K", I64, 1, one, zero, sizeof zero);
    expect_empty_outputs(&b, 2, 3, 0); /* k 0: values and indices [3, 0], no kernel */
    Onnx__NodeProto *n = build_index_node(&b, 16, "ScatterElements", "x,i,u", "y");
    ob_input(&b, "i", I64, 2, id, NULL);
    ob_input(&b, "u", F32, 2, id, NULL);
    ob_attr_string(&b, n, "reduction", "max");
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "(ScatterElements, opset 16): reduction 'max' came in opset 18");
    static const int64_t tuples[2] = {3, 1};
    n = build_index_node(&b, 13, "ScatterND", "x,i,u", "y");
    ob_input(&b, "i", I64, 2, tuples, NULL);
    ob_input(&b, "u", F32, 2, id, NULL);
    ob_attr_string(&b, n, "reduction", "add");
    expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED, "(ScatterND, opset 13): attribute 'reduction' is not supported");
    build_index_node(&b, 11, "ScatterElements", "x,i,u", "y");
    ob_input(&b, "i", F32, 2, id, NULL);
    ob_input(&b, "u", F32, 2, id, NULL);
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "indices are float: expected int32 or int64");
    /* shapes that depend on values fed at run time */
    build_index_node(&b, 11, "Compress", "x,cond", "y");
    ob_input(&b, "cond", BOOL, 1, c3, NULL);
    expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED, "input 1 'cond' must be known at load time (a constant, or "
                   "computed from constants and shapes only): the output's shape depends on its values");
    const uint8_t none[3] = {0, 0, 0};
    build_index_node(&b, 11, "Compress", "x,cond", "y");
    ob_initializer(&b, "cond", BOOL, 1, c3, none, sizeof none);
    expect_empty_outputs(&b, 1, 0, -1); /* keeps nothing of the flattened x: [0] */
    build_index_node(&b, 13, "NonZero", "x", "y");
    expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED, "(NonZero, opset 13): input 0 'x' must be known at load time (a "
                   "constant, or computed from constants and shapes only): the outputs' shapes depend on its values");
    build_index_node(&b, 11, "Unique", "x", "y,indices,inverse,counts");
    expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED, "(Unique, opset 11): input 0 'x' must be known at load time");
}

/* ---- Einsum, LRN, GridSample, RoiAlign ---- */

/* A direct einsum in double of explicit equation eq ("ab,bc->ac": letters only) over operands
 * of these dims: every assignment of the labels, the product of the operands' elements added
 * into the output's. */
static void direct_einsum(const char *eq, int operands, const int64_t dims[2][6], const double *const *x,
                          double *out, uint64_t out_count)
{
    int64_t size[128] = {0};
    char labels[32];
    int nl = 0;
    const char *terms[3];
    terms[0] = eq;
    terms[1] = operands > 1 ? strchr(eq, ',') + 1 : NULL;
    terms[2] = strstr(eq, "->") + 2;
    for (int i = 0; i < operands; i++)
        for (int d = 0; isalpha((unsigned char)terms[i][d]); d++) {
            char c = terms[i][d];
            if (size[(int)c] == 0)
                labels[nl++] = c;
            size[(int)c] = dims[i][d];
        }
    memset(out, 0, out_count * sizeof *out);
    int64_t value[128] = {0};
    for (;;) {
        double p = 1;
        for (int i = 0; i < operands; i++) {
            uint64_t at = 0;
            for (int d = 0; isalpha((unsigned char)terms[i][d]); d++)
                at = at * (uint64_t)dims[i][d] + (uint64_t)value[(int)terms[i][d]];
            p *= x[i][at];
        }
        uint64_t at = 0;
        for (int d = 0; isalpha((unsigned char)terms[2][d]); d++)
            at = at * (uint64_t)size[(int)terms[2][d]] + (uint64_t)value[(int)terms[2][d]];
        out[at] += p;
        int k = nl - 1;
        while (k >= 0 && ++value[(int)labels[k]] == size[(int)labels[k]])
            value[(int)labels[k--]] = 0;
        if (k < 0)
            break;
    }
}

/* Loads one Einsum node of `equation` over f32 or f64 operands, evaluates what it became in
 * double (tests/graph_reference.c), and compares with the direct sum of `direct`. */
static void check_einsum(const char *equation, const char *direct, int elem, int operands,
                         const int64_t dims[2][6], const int ranks[2])
{
    onnx_builder b;
    ob_init(&b, 13);
    ob_input(&b, "x0", elem, ranks[0], dims[0], NULL);
    if (operands > 1)
        ob_input(&b, "x1", elem, ranks[1], dims[1], NULL);
    Onnx__NodeProto *n = ob_node(&b, "Einsum", "Einsum_0", operands > 1 ? "x0,x1" : "x0", "y");
    ob_attr_string(&b, n, "equation", equation);
    ob_output(&b, "y", elem, -1, NULL);
    loaded r = load(&b);
    if (r.status != CLRUN_OK)
        fail_msg("Einsum '%s': %s", equation, r.err);
    double data[2][720];
    const double *inputs[2] = {data[0], data[1]};
    for (int i = 0; i < operands; i++) {
        uint64_t count = 1;
        for (int d = 0; d < ranks[i]; d++)
            count *= (uint64_t)dims[i][d];
        for (uint64_t k = 0; k < count; k++)
            data[i][k] = (double)((k * 7 + (uint64_t)i * 3) % 11) - 5;
    }
    const clrun_tensor_id *outs;
    assert_int_equal(clrun_graph_outputs(r.graph, &outs), 1);
    const clrun_tensor_type *ty = clrun_graph_tensor_type(r.graph, outs[0]);
    uint64_t count = 1;
    for (int d = 0; d < ty->rank; d++)
        count *= (uint64_t)ty->shape[d];
    double want[720], **values;
    char err[512];
    if (gref_eval(r.graph, inputs, NULL, &values, err, sizeof err) != 0)
        fail_msg("Einsum '%s': %s", equation, err);
    direct_einsum(direct, operands, dims, inputs, want, count);
    for (uint64_t k = 0; k < count; k++)
        if (values[outs[0]][k] != want[k])
            fail_msg("Einsum '%s' (%s) element %llu: got %g, expected %g", equation,
                     elem == F64 ? "f64" : "f32", (unsigned long long)k, values[outs[0]][k], want[k]);
    /* f32 takes matmul (and reduce_sum); f64, which those refuse, a broadcast mul and cumsum */
    if (operands > 1 && strchr(direct, ',') && strcmp(direct, "ij,ij->ij") != 0)
        assert_int_equal(count_ops(r.graph, "matmul"), elem == F32 ? 1 : 0);
    gref_free(r.graph, values);
    clrun_graph_destroy(r.graph);
    ob_free(&b);
}

static void test_einsum_maps_to_products_and_sums(void **state)
{
    (void)state;
    static const struct {
        const char *equation, *direct;
        int operands, ranks[2];
        int64_t dims[2][6];
    } cases[] = {
        {"ij,jk->ik", "ij,jk->ik", 2, {2, 2}, {{3, 4}, {4, 5}}},
        {"ij,jk", "ij,jk->ik", 2, {2, 2}, {{3, 4}, {4, 5}}}, /* implicit */
        {"bij, bjk -> bik", "bij,bjk->bik", 2, {3, 3}, {{2, 3, 4}, {2, 4, 5}}},
        {"bhqd,bhkd->bhqk", "bhqd,bhkd->bhqk", 2, {4, 4}, {{2, 2, 3, 4}, {2, 2, 5, 4}}},
        {"i,i", "i,i->", 2, {1, 1}, {{5}, {5}}},
        {"i,j->ji", "i,j->ji", 2, {1, 1}, {{3}, {4}}},
        {"ab,ba->a", "ab,ba->a", 2, {2, 2}, {{3, 4}, {4, 3}}},
        {"ij,ij->ij", "ij,ij->ij", 2, {2, 2}, {{3, 4}, {3, 4}}},
        {"iij,j->i", "iij,j->i", 2, {3, 1}, {{3, 3, 2}, {2}}},
        {"ij->ji", "ij->ji", 1, {2, 0}, {{3, 4}}},
        {"ij->i", "ij->i", 1, {2, 0}, {{3, 4}}},
        {"ii->i", "ii->i", 1, {2, 0}, {{4, 4}}},
        {"ii", "ii->", 1, {2, 0}, {{4, 4}}},
        {"...ii->...i", "bii->bi", 1, {3, 0}, {{3, 5, 5}}},
        {"abc->", "abc->", 1, {3, 0}, {{2, 3, 4}}},
        {"Ba,aB", "Ba,aB->", 2, {2, 2}, {{3, 4}, {4, 3}}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int e = 0; e < 2; e++)
            check_einsum(cases[i].equation, cases[i].direct, e ? F64 : F32, cases[i].operands,
                         cases[i].dims, cases[i].ranks);
}

/* LRN evaluated in double against its definition: x / (bias + alpha/size · Σ x²)^beta over the
 * channel window, size 3 (centred) and 4 (one more after). */
static void test_lrn_is_its_definition(void **state)
{
    (void)state;
    static const int64_t dims[4] = {2, 5, 2, 3};
    for (int64_t size = 3; size <= 4; size++) {
        onnx_builder b;
        ob_init(&b, 13);
        ob_input(&b, "x", F32, 4, dims, NULL);
        Onnx__NodeProto *n = ob_node(&b, "LRN", "LRN_0", "x", "y");
        ob_attr_int(&b, n, "size", size);
        ob_attr_float(&b, n, "alpha", 0.5f);
        ob_attr_float(&b, n, "beta", 0.75f);
        ob_attr_float(&b, n, "bias", 2.0f);
        ob_output(&b, "y", F32, 4, dims);
        loaded r = load(&b);
        if (r.status != CLRUN_OK)
            fail_msg("LRN: %s", r.err);
        double x[60], **values;
        for (int i = 0; i < 60; i++)
            x[i] = (double)((i * 13) % 17) / 4 - 2;
        const double *inputs[1] = {x};
        char err[512];
        if (gref_eval(r.graph, inputs, NULL, &values, err, sizeof err) != 0)
            fail_msg("LRN: %s", err);
        const clrun_tensor_id *outs;
        clrun_graph_outputs(r.graph, &outs);
        for (int i = 0; i < 60; i++) {
            int c = (i / 6) % 5, base = i - c * 6;
            double sum = 0;
            for (int k = c - (int)(size - 1) / 2; k <= c + (int)size / 2; k++)
                if (k >= 0 && k < 5)
                    sum += x[base + k * 6] * x[base + k * 6];
            double want = x[i] / pow(2.0 + 0.5 / (double)size * sum, 0.75f);
            if (fabs(values[outs[0]][i] - want) > 1e-12 * fmax(1, fabs(want)))
                fail_msg("LRN size %lld element %d: got %.17g, expected %.17g", (long long)size, i,
                         values[outs[0]][i], want);
        }
        assert_int_equal(count_ops(r.graph, "avgpool2d"), 1);
        gref_free(r.graph, values);
        clrun_graph_destroy(r.graph);
        ob_free(&b);
    }
}

static void test_vision_refusals(void **state)
{
    (void)state;
    onnx_builder b;
    static const int64_t v[1] = {4}, x4[4] = {1, 2, 4, 4}, g4[4] = {1, 3, 3, 2}, x5[5] = {1, 2, 2, 4, 4};
    static const int64_t r2[2] = {3, 4}, b1[1] = {3}, m2[2] = {3, 4};
    /* Einsum: three operands; a summed label broadcast; a malformed equation */
    ob_init(&b, 13);
    ob_input(&b, "a", F32, 1, v, NULL);
    ob_input(&b, "b", F32, 1, v, NULL);
    ob_input(&b, "c", F32, 1, v, NULL);
    ob_attr_string(&b, ob_node(&b, "Einsum", "E", "a,b,c", "y"), "equation", "i,i,i->");
    ob_output(&b, "y", F32, -1, NULL);
    expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED, "(Einsum, opset 13): Einsum of 3 operands is not supported (1 or 2 are)");
    ob_init(&b, 13);
    ob_input(&b, "a", F32, 2, m2, NULL);
    ob_input(&b, "b", F32, 1, (const int64_t[1]){1}, NULL);
    ob_attr_string(&b, ob_node(&b, "Einsum", "E", "a,b", "y"), "equation", "ij,j->i");
    ob_output(&b, "y", F32, -1, NULL);
    expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED, "summed label 'j' has sizes 4 and 1");
    ob_init(&b, 13);
    ob_input(&b, "a", F32, 2, m2, NULL);
    ob_attr_string(&b, ob_node(&b, "Einsum", "E", "a", "y"), "equation", "i2->i");
    ob_output(&b, "y", F32, -1, NULL);
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "the equation has '2', which is not a letter");
    ob_init(&b, 13);
    ob_input(&b, "a", F32, 2, m2, NULL);
    ob_attr_string(&b, ob_node(&b, "Einsum", "E", "a", "y"), "equation", "ijk->i");
    ob_output(&b, "y", F32, -1, NULL);
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "subscript 'ijk' has 3 letters for an operand of rank 2");
    /* LRN without its size */
    ob_init(&b, 13);
    ob_input(&b, "x", F32, 4, x4, NULL);
    ob_node(&b, "LRN", "L", "x", "y");
    ob_output(&b, "y", F32, -1, NULL);
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "(LRN, opset 13): LRN needs a size >= 1");
    /* GridSample: a mode of opset 20; a 5-D input */
    ob_init(&b, 16);
    ob_input(&b, "x", F32, 4, x4, NULL);
    ob_input(&b, "g", F32, 4, g4, NULL);
    ob_attr_string(&b, ob_node(&b, "GridSample", "G", "x,g", "y"), "mode", "linear");
    ob_output(&b, "y", F32, -1, NULL);
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "(GridSample, opset 16): mode 'linear' is not bilinear, nearest or bicubic");
    ob_init(&b, 16);
    ob_input(&b, "x", F32, 5, x5, NULL);
    ob_input(&b, "g", F32, 5, x5, NULL);
    ob_node(&b, "GridSample", "G", "x,g", "y");
    ob_output(&b, "y", F32, -1, NULL);
    expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED, "GridSample of a rank-5 input is not supported (4-D is)");
    ob_init(&b, 15);
    ob_input(&b, "x", F32, 4, x4, NULL);
    ob_input(&b, "g", F32, 4, g4, NULL);
    ob_node(&b, "GridSample", "G", "x,g", "y");
    ob_output(&b, "y", F32, -1, NULL);
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "operator GridSample does not exist in opset 15");
    /* RoiAlign: mode; coordinate_transformation_mode before opset 16 */
    for (int k = 0; k < 3; k++) {
        ob_init(&b, k == 1 ? 10 : 16);
        ob_input(&b, "x", F32, 4, x4, NULL);
        ob_input(&b, "r", F32, 2, r2, NULL);
        ob_input(&b, "i", I64, 1, b1, NULL);
        Onnx__NodeProto *n = ob_node(&b, "RoiAlign", "R", "x,r,i", "y");
        if (k == 0)
            ob_attr_string(&b, n, "mode", "median");
        else
            ob_attr_string(&b, n, "coordinate_transformation_mode", k == 1 ? "half_pixel" : "corner");
        ob_output(&b, "y", F32, -1, NULL);
        expect_refusal(&b, k == 1 ? CLRUN_ERROR_UNSUPPORTED : CLRUN_ERROR_INVALID_GRAPH,
                       k == 0   ? "(RoiAlign, opset 16): mode 'median' is not avg or max"
                       : k == 1 ? "(RoiAlign, opset 10): attribute 'coordinate_transformation_mode' is not supported"
                                : "coordinate_transformation_mode 'corner' is not half_pixel or output_half_pixel");
    }
}

/* Det (3 x 3 and batched 2 x 2) and ReverseSequence through the double graph reference. */
static void test_det_and_reverse_sequence_are_their_definitions(void **state)
{
    (void)state;
    for (int64_t m = 2; m <= 3; m++) {
        onnx_builder b;
        int64_t dims[3] = {2, m, m};
        ob_init(&b, 13);
        ob_input(&b, "x", F64, 3, dims, NULL);
        ob_node(&b, "Det", "D", "x", "y");
        ob_output(&b, "y", F64, 1, dims);
        loaded r = load(&b);
        if (r.status != CLRUN_OK)
            fail_msg("Det: %s", r.err);
        double x[18], **values;
        for (int i = 0; i < 18; i++)
            x[i] = (double)((i * 5) % 7) - 3;
        const double *inputs[1] = {x};
        char err[512];
        if (gref_eval(r.graph, inputs, NULL, &values, err, sizeof err) != 0)
            fail_msg("Det: %s", err);
        const clrun_tensor_id *outs;
        clrun_graph_outputs(r.graph, &outs);
        for (int k = 0; k < 2; k++) {
            const double *a = x + k * m * m;
            double want = m == 2 ? a[0] * a[3] - a[1] * a[2]
                                 : a[0] * (a[4] * a[8] - a[5] * a[7]) - a[1] * (a[3] * a[8] - a[5] * a[6]) +
                                       a[2] * (a[3] * a[7] - a[4] * a[6]);
            if (values[outs[0]][k] != want)
                fail_msg("Det %lldx%lld matrix %d: got %g, expected %g", (long long)m, (long long)m, k,
                         values[outs[0]][k], want);
        }
        gref_free(r.graph, values);
        clrun_graph_destroy(r.graph);
        ob_free(&b);
    }
    /* ReverseSequence, time_axis 1: x [3 batch, 4 time], lengths 4, 0, 2 */
    onnx_builder b;
    static const int64_t xd[2] = {3, 4}, ld[1] = {3};
    ob_init(&b, 13);
    ob_input(&b, "x", F32, 2, xd, NULL);
    ob_input(&b, "l", I64, 1, ld, NULL);
    Onnx__NodeProto *n = ob_node(&b, "ReverseSequence", "R", "x,l", "y");
    ob_attr_int(&b, n, "time_axis", 1);
    ob_attr_int(&b, n, "batch_axis", 0);
    ob_output(&b, "y", F32, 2, xd);
    loaded r = load(&b);
    if (r.status != CLRUN_OK)
        fail_msg("ReverseSequence: %s", r.err);
    double x[12], lens[3] = {4, 0, 2}, **values;
    for (int i = 0; i < 12; i++)
        x[i] = i;
    const double *inputs[2] = {x, lens};
    static const double want[12] = {3, 2, 1, 0, 4, 5, 6, 7, 9, 8, 10, 11};
    char err[512];
    if (gref_eval(r.graph, inputs, NULL, &values, err, sizeof err) != 0)
        fail_msg("ReverseSequence: %s", err);
    const clrun_tensor_id *outs;
    clrun_graph_outputs(r.graph, &outs);
    for (int i = 0; i < 12; i++)
        if (values[outs[0]][i] != want[i])
            fail_msg("ReverseSequence element %d: got %g, expected %g", i, values[outs[0]][i], want[i]);
    gref_free(r.graph, values);
    clrun_graph_destroy(r.graph);
    ob_free(&b);
    /* refused: Det of 4 x 4; axes that are not 0 and 1 */
    static const int64_t d4[2] = {4, 4};
    ob_init(&b, 13);
    ob_input(&b, "x", F32, 2, d4, NULL);
    ob_node(&b, "Det", "D", "x", "y");
    ob_output(&b, "y", F32, -1, NULL);
    expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED, "(Det, opset 13): Det of 4 x 4 matrices is not supported (at most 3 x 3)");
    ob_init(&b, 13);
    ob_input(&b, "x", F32, 2, xd, NULL);
    ob_input(&b, "l", I64, 1, ld, NULL);
    ob_attr_int(&b, ob_node(&b, "ReverseSequence", "R", "x,l", "y"), "time_axis", 1);
    ob_output(&b, "y", F32, -1, NULL);
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "time_axis and batch_axis must be 0 and 1, one each");
}

/* ---- linear quantization ---- */

/* y = OP(x, scale, zero point) with x [2, 3] of element type xt, scale [ns] and zero point [nz]
 * of type zt (nz 0: no zero point), opset `opset`. */
static void build_quant(onnx_builder *b, int64_t opset, const char *op, int xt, int64_t ns, int zt,
                        int64_t nz)
{
    static const int64_t xd[2] = {2, 3};
    static const float scales[4] = {0.5f, 0.25f, 2.0f, 1.0f};
    static const uint8_t zeros[8] = {0};
    ob_init(b, opset);
    ob_input(b, "x", xt, 2, xd, NULL);
    ob_initializer(b, "s", F32, 1, &ns, scales, (size_t)ns * sizeof scales[0]);
    if (nz > 0)
        ob_initializer(b, "z", zt, 1, &nz, zeros, (size_t)nz * (zt == 5 ? 2 : 1));
    Onnx__NodeProto *n = ob_node(b, op, "q", nz > 0 ? "x,s,z" : "x,s", "y");
    if (opset >= 13)
        ob_attr_int(b, n, "axis", 1);
    ob_output(b, "y", strcmp(op, "DequantizeLinear") == 0 ? F32 : nz > 0 ? zt : U8, -1, NULL);
}

static void test_quantization_maps_and_refuses(void **state)
{
    (void)state;
    onnx_builder b;
    /* per axis: a scale and zero point per element of axis 1, both directions */
    build_quant(&b, 13, "DequantizeLinear", U8, 3, U8, 3);
    loaded r = load(&b);
    assert_int_equal(r.status, CLRUN_OK);
    clrun_graph_destroy(r.graph);
    ob_free(&b);
    build_quant(&b, 13, "QuantizeLinear", F32, 3, I8, 3);
    r = load(&b);
    assert_int_equal(r.status, CLRUN_OK);
    clrun_graph_destroy(r.graph);
    ob_free(&b);
    /* refusals name the node and what is wrong */
    build_quant(&b, 13, "DequantizeLinear", U8, 3, U8, 2);
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "(DequantizeLinear, opset 13): the zero point has 2 values, the scale 3");
    build_quant(&b, 13, "QuantizeLinear", F32, 4, U8, 0);
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "the scale has 4 values, the input's axis 1 has 3 elements");
    build_quant(&b, 13, "QuantizeLinear", F32, 1, 5, 1);
    expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED, "the zero point is int16: quantizing to int8 or uint8 is supported");
    build_quant(&b, 13, "DequantizeLinear", F32, 1, F32, 0);
    expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED, "the input is float: int8, uint8 or int32 is dequantized");
    build_quant(&b, 10, "QuantizeLinear", F32, 3, U8, 0);
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "opset 10 takes a scalar scale (per-axis scales came in opset 13)");
    /* an intermediate whose value_info declares another type than its node makes (onnxruntime
     * refuses it too): an int8 zero point makes int8, the model says uint8 */
    build_quant(&b, 13, "QuantizeLinear", F32, 3, I8, 3);
    b.graph.output[0]->name = ob_str(&b, "out");
    ob_node(&b, "Identity", "id", "y", "out");
    ob_push(&b, (void ***)&b.graph.value_info, &b.graph.n_value_info, ob_value_info(&b, "y", U8, -1, NULL, NULL));
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "node 0 'q' (QuantizeLinear, opset 13): output 0 'y' is int8, but "
                   "the model's value_info declares uint8");
}

/* ---- recurrent operators ---- */

static void attr_strings(onnx_builder *b, Onnx__NodeProto *n, const char *name, const char *const *v, size_t count)
{
    Onnx__AttributeProto *a = ob_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS);
    a->n_strings = count;
    a->strings = ob_alloc(b, count * sizeof *a->strings);
    for (size_t i = 0; i < count; i++) {
        a->strings[i].data = (uint8_t *)ob_str(b, v[i]);
        a->strings[i].len = strlen(v[i]);
    }
}

/* One RNN, GRU or LSTM node 'rec_3' of hidden size 4 over x [seq, 2, 3] (seq < 0: the symbolic
 * dim 'seq'), zero weights W and R for `dirs` directions as initializers, outputs y and y_h. */
static Onnx__NodeProto *build_recurrent_dirs(onnx_builder *b, int64_t opset, const char *op, int64_t seq,
                                             const char *inputs, int64_t dirs)
{
    static const float zeros[128];
    int64_t gates = strcmp(op, "LSTM") == 0 ? 4 : strcmp(op, "GRU") == 0 ? 3 : 1;
    const int64_t x[3] = {seq, 2, 3}, w[3] = {dirs, gates * 4, 3}, r[3] = {dirs, gates * 4, 4};
    const char *const params[3] = {"seq", NULL, NULL};
    ob_init(b, opset);
    ob_input(b, "x", F32, 3, x, params);
    ob_initializer(b, "w", F32, 3, w, zeros, (size_t)(dirs * gates * 4 * 3) * sizeof(float));
    ob_initializer(b, "r", F32, 3, r, zeros, (size_t)(dirs * gates * 4 * 4) * sizeof(float));
    Onnx__NodeProto *n = ob_node(b, op, "rec_3", inputs, "y,y_h");
    ob_attr_int(b, n, "hidden_size", 4);
    if (dirs == 2)
        ob_attr_string(b, n, "direction", "bidirectional");
    ob_output(b, "y", F32, -1, NULL);
    ob_output(b, "y_h", F32, -1, NULL);
    return n;
}

static Onnx__NodeProto *build_recurrent(onnx_builder *b, int64_t opset, const char *op, int64_t seq,
                                        const char *inputs)
{
    return build_recurrent_dirs(b, opset, op, seq, inputs, 1);
}

/* Nodes of the graph a recurrent node becomes over `seq` steps. */
static int32_t unrolled_nodes(const char *op, int64_t seq, int64_t dirs)
{
    onnx_builder b;
    build_recurrent_dirs(&b, 14, op, seq, "x,w,r", dirs);
    loaded r = load(&b);
    ob_free(&b);
    if (r.status != CLRUN_OK)
        fail_msg("%s over %" PRId64 " steps: %s", op, seq, r.err);
    const clrun_tensor_id *outs;
    assert_int_equal(clrun_graph_outputs(r.graph, &outs), 2);
    const clrun_tensor_type *y = clrun_graph_tensor_type(r.graph, outs[0]);
    assert_int_equal(y->rank, 4); /* [seq, dirs, batch, hidden] */
    assert_true(y->shape[0] == seq && y->shape[1] == dirs && y->shape[2] == 2 && y->shape[3] == 4);
    int32_t count = clrun_graph_node_count(r.graph);
    clrun_graph_destroy(r.graph);
    return count;
}

/* The sequence is unrolled at load: each step adds the same few nodes per direction, the counts
 * docs/onnx.md gives (GRU without linear_before_reset). */
static void test_recurrent_ops_unroll_a_few_nodes_per_step(void **state)
{
    (void)state;
    static const struct {
        const char *op;
        int32_t per_step;
    } cases[] = {{"RNN", 5}, {"GRU", 19}, {"LSTM", 24}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int32_t step = unrolled_nodes(cases[i].op, 6, 1) - unrolled_nodes(cases[i].op, 5, 1);
        if (step != cases[i].per_step)
            fail_msg("%s: %d nodes per step, expected %d", cases[i].op, step, cases[i].per_step);
        int32_t both = unrolled_nodes(cases[i].op, 6, 2) - unrolled_nodes(cases[i].op, 5, 2);
        assert_int_equal(both, 2 * step);
    }
}

static void test_recurrent_refusals(void **state)
{
    (void)state;
    onnx_builder b;
    /* the sequence length must be known at load: it is the number of steps unrolled */
    build_recurrent(&b, 14, "LSTM", -1, "x,w,r");
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "model.onnx: input 'x' dimension 0 ('seq') is not bound");
    build_recurrent(&b, 14, "LSTM", 16385, "x,w,r");
    expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED,
                   "model.onnx: node 0 'rec_3' (LSTM, opset 14): a sequence of 16385 steps is unrolled into "
                   "too many nodes (at most 16384 steps)");
    Onnx__NodeProto *n = build_recurrent(&b, 14, "GRU", 4, "x,w,r");
    ob_attr_string(&b, n, "direction", "sideways");
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH,
                   "(GRU, opset 14): direction 'sideways' is not forward, reverse or bidirectional");
    n = build_recurrent(&b, 14, "LSTM", 4, "x,w,r");
    static const char *const swish[3] = {"Sigmoid", "Swish", "Tanh"};
    attr_strings(&b, n, "activations", swish, 3);
    expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED, "(LSTM, opset 14): activation 'Swish' is not one of Relu, Tanh");
    n = build_recurrent(&b, 14, "LSTM", 4, "x,w,r");
    attr_strings(&b, n, "activations", swish, 2);
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "(LSTM, opset 14): 2 activations for 1 direction (3 per direction)");
    n = build_recurrent(&b, 14, "RNN", 4, "x,w,r");
    ob_attr_float(&b, n, "clip", 0);
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "(RNN, opset 14): clip 0 is not a positive threshold");
    /* hidden_size disagreeing with the weights */
    n = build_recurrent(&b, 14, "LSTM", 4, "x,w,r");
    n->attribute[0]->i = 5;
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "(LSTM, opset 14): W is [1, 16, 3], expected [1, 20, 3]");
    /* layout is opset 14's */
    n = build_recurrent(&b, 7, "RNN", 4, "x,w,r");
    ob_attr_int(&b, n, "layout", 1);
    expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED, "(RNN, opset 7): attribute 'layout' is not supported");
    /* sequence_lens known at load, longer than the sequence */
    build_recurrent(&b, 14, "GRU", 4, "x,w,r,,lens");
    static const int64_t two[1] = {2};
    static const int32_t lens[2] = {1, 9};
    ob_initializer(&b, "lens", I32, 1, two, lens, sizeof lens);
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "(GRU, opset 14): sequence_lens[1] is 9, outside [0, 4]");
    /* a data type the matmuls do not compute */
    build_recurrent(&b, 14, "RNN", 4, "x,w,r");
    b.graph.input[0]->type->tensor_type->elem_type = F64;
    expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED, "(RNN, opset 14): X is double: clrun runs RNN on float tensors only");
}

/* ---- quantized products ---- */

/* MatMulInteger over an input A and a constant B with a per-column zero point: one
 * matmul_integer, whose weights stay uint8 in the graph; QLinearMatMul requantizes after it. */
static void test_quantized_products_map(void **state)
{
    (void)state;
    onnx_builder b;
    static const int64_t ad[2] = {2, 3}, bd[2] = {3, 4}, zd[1] = {4}, yd[2] = {2, 4};
    static const uint8_t w[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, zb[4] = {1, 2, 3, 4};
    ob_init(&b, 13);
    ob_input(&b, "A", U8, 2, ad, NULL);
    ob_initializer(&b, "B", U8, 2, bd, w, sizeof w);
    ob_initializer(&b, "bz", U8, 1, zd, zb, sizeof zb);
    ob_node(&b, "MatMulInteger", "mmi", "A,B,,bz", "Y");
    ob_output(&b, "Y", I32, 2, yd);
    loaded r = load(&b);
    if (r.status != CLRUN_OK)
        fail_msg("MatMulInteger: %s", r.err);
    assert_int_equal(count_ops(r.graph, "matmul_integer"), 1);
    bool weights_u8 = false;
    for (int32_t i = 0; i < clrun_graph_tensor_count(r.graph); i++) {
        const clrun_tensor_type *t = clrun_graph_tensor_type(r.graph, i);
        weights_u8 |= t->dtype == CLRUN_U8 && t->rank == 2 && t->shape[0] == 3 && t->shape[1] == 4;
    }
    assert_true(weights_u8);
    clrun_graph_destroy(r.graph);
    ob_free(&b);

    static const int64_t one[1] = {1};
    static const float scale = 0.5f;
    static const uint8_t zero = 0;
    ob_init(&b, 13);
    ob_input(&b, "a", U8, 2, ad, NULL);
    ob_initializer(&b, "s", F32, 0, one, &scale, sizeof scale);
    ob_initializer(&b, "z", U8, 0, one, &zero, sizeof zero);
    ob_initializer(&b, "B", U8, 2, bd, w, sizeof w);
    ob_node(&b, "QLinearMatMul", "qmm", "a,s,z,B,s,z,s,z", "y");
    ob_output(&b, "y", U8, 2, yd);
    r = load(&b);
    if (r.status != CLRUN_OK)
        fail_msg("QLinearMatMul: %s", r.err);
    assert_int_equal(count_ops(r.graph, "matmul_integer"), 1);
    assert_int_equal(count_ops(r.graph, "round"), 1);
    assert_int_equal(count_ops(r.graph, "clip"), 1);
    clrun_graph_destroy(r.graph);
    ob_free(&b);
}

/* One quantized node over x (elem, xd) and initializers named in `inputs`. */
static void build_qproduct(onnx_builder *b, const char *op, int elem, int rank, const int64_t *xd, const char *inputs)
{
    static const int64_t d23[2] = {2, 3}, d34[2] = {3, 4}, d2[1] = {2}, d5[1] = {5}, w4[4] = {2, 1, 1, 1};
    static const int64_t w3[3] = {2, 1, 1};
    static const uint8_t bytes[12] = {0};
    static const float f[2] = {1, 1};
    static const double dbl = 1;
    static const int64_t i64[2] = {0, 0};
    ob_init(b, 13);
    ob_input(b, "x", elem, rank, xd, NULL);
    ob_initializer(b, "B", U8, 2, d34, bytes, 12);
    ob_initializer(b, "z23", U8, 2, d23, bytes, 6);
    ob_initializer(b, "z", U8, 0, NULL, bytes, 1);
    ob_initializer(b, "zi8", I8, 0, NULL, bytes, 1);
    ob_initializer(b, "z2", U8, 1, d2, bytes, 2);
    ob_initializer(b, "z5", U8, 1, d5, bytes, 5);
    ob_initializer(b, "s", F32, 0, NULL, f, 4);
    ob_initializer(b, "s2", F32, 1, d2, f, 8);
    ob_initializer(b, "sd", F64, 0, NULL, &dbl, 8);
    ob_initializer(b, "W", U8, 4, w4, bytes, 2);
    ob_initializer(b, "W3", U8, 3, w3, bytes, 2);
    ob_initializer(b, "b64", I64, 1, d2, i64, 16);
    ob_node(b, op, "Q_7", inputs, "y");
    ob_output(b, "y", I32, -1, NULL);
}

static void test_quantized_refusals(void **state)
{
    (void)state;
    onnx_builder b;
    static const int64_t xd[2] = {2, 3}, x4[4] = {1, 1, 3, 3}, x3[3] = {1, 1, 3};
    build_qproduct(&b, "MatMulInteger", U8, 2, xd, "x,B,z23");
    expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED, "node 0 'Q_7' (MatMulInteger, opset 13): a_zero_point has shape "
                   "[2, 3]: supported are a scalar and [M] or [..., M, 1] (one per row of a) with M = 2");
    build_qproduct(&b, "MatMulInteger", U8, 2, xd, "x,B,zi8");
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "a_zero_point is int8: expected uint8, the type of its operand");
    build_qproduct(&b, "MatMulInteger", U8, 2, xd, "x,B,,z5");
    expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED, "b_zero_point has shape [5]: supported are a scalar and [N] or "
                   "[..., 1, N] (one per column of b) with N = 4");
    build_qproduct(&b, "MatMulInteger", F32, 2, xd, "x,B");
    expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED, "A is float: supported are uint8 and int8");
    build_qproduct(&b, "QLinearMatMul", U8, 2, xd, "x,s,z,B,s,z,s2,z");
    expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED, "(QLinearMatMul, opset 13): y_scale has shape [2]: supported is a scalar");
    build_qproduct(&b, "QLinearMatMul", U8, 2, xd, "x,sd,z,B,s,z,s,z");
    expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED, "a_scale is double: only float scales are supported");
    build_qproduct(&b, "QLinearMatMul", U8, 2, xd, "x,s,z,B,s,z,s");
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "QLinearMatMul");
    build_qproduct(&b, "ConvInteger", U8, 3, x3, "x,W3");
    expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED, "(ConvInteger, opset 13): x has rank 3 and w rank 3: only 2-D "
                   "convolutions (rank 4) are supported");
    build_qproduct(&b, "ConvInteger", U8, 4, x4, "x,W,z2");
    expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED, "x_zero_point has shape [2]: supported is a scalar");
    build_qproduct(&b, "ConvInteger", U8, 4, x4, "x,W,z,z5");
    expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED, "w_zero_point has shape [5]: supported are a scalar and [M] (one "
                   "per output channel) with M = 2");
    build_qproduct(&b, "QLinearConv", U8, 4, x4, "x,s,z,W,s2,z2,s,z,b64");
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "(QLinearConv, opset 13): B is int64 [2]: expected int32 [2] (one "
                   "per output channel)");
    build_qproduct(&b, "QLinearConv", U8, 4, x4, "x,s2,z,W,s,z,s,z");
    expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED, "x_scale has shape [2]: supported is a scalar");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shape_subgraph_folds_at_load),
        cmocka_unit_test(test_unbound_dim_names_input_and_dimension),
        cmocka_unit_test(test_whole_shape_binds_an_input),
        cmocka_unit_test(test_initializers_in_every_encoding),
        cmocka_unit_test(test_external_data_relative_to_the_model),
        cmocka_unit_test(test_refusals_name_node_op_and_opset),
        cmocka_unit_test(test_opsets_18_to_21_versions),
        cmocka_unit_test(test_conv_refusals),
        cmocka_unit_test(test_model_errors),
        cmocka_unit_test(test_unsorted_nodes_are_sorted),
        cmocka_unit_test(test_names_become_clrun_names),
        cmocka_unit_test(test_constant_inputs_fold),
        cmocka_unit_test(test_empty_constant_inputs),
        cmocka_unit_test(test_every_prefix_is_an_error_or_the_model),
        cmocka_unit_test(test_deep_nesting_is_refused),
        cmocka_unit_test(test_tensor_pb_files),
        cmocka_unit_test(test_npy_round_trips_every_dtype),
        cmocka_unit_test(test_npy_variants_clrun_does_not_read),
        cmocka_unit_test(test_optimizers_map_to_elementwise_ops),
        cmocka_unit_test(test_optimizer_scalars_of_rank_one),
        cmocka_unit_test(test_optimizer_refusals),
        cmocka_unit_test(test_scatter_gather_nd_and_topk_map_to_graph_ops),
        cmocka_unit_test(test_scatter_topk_and_value_shaped_refusals),
        cmocka_unit_test(test_einsum_maps_to_products_and_sums),
        cmocka_unit_test(test_lrn_is_its_definition),
        cmocka_unit_test(test_vision_refusals),
        cmocka_unit_test(test_det_and_reverse_sequence_are_their_definitions),
        cmocka_unit_test(test_recurrent_ops_unroll_a_few_nodes_per_step),
        cmocka_unit_test(test_recurrent_refusals),
        cmocka_unit_test(test_quantization_maps_and_refuses),
        cmocka_unit_test(test_quantized_products_map),
        cmocka_unit_test(test_quantized_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
