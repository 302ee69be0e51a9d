/* Tests of graphs (clrun/graph.h): the builder's rules, each validation error, the .graph text
 * format (what it accepts, the exact message of every malformed file under
 * tests/data/graphs/bad, and that writing reads back to the same graph), the deterministic
 * fill of constants, and that every example graph and generated model builds and validates. */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <clrun/context.h>
#include <clrun/graph.h>
#include <clrun/weights.h>

#include "../examples/models.h"
#include "graph/graph.h"

/* ---- helpers ---- */

static clrun_tensor_type type_of(clrun_dtype dtype, int rank, const int64_t *dims)
{
    clrun_tensor_type type = {dtype, rank, {0}};
    for (int d = 0; d < rank && d < CLRUN_MAX_DIMS; d++)
        type.shape[d] = dims[d];
    return type;
}

#define F32(...)                                                                                   \
    type_of(CLRUN_F32, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)),                  \
            (int64_t[]){__VA_ARGS__})

static clrun_graph *new_graph(void)
{
    clrun_graph *graph = NULL;
    assert_int_equal(clrun_graph_create("g", &graph), CLRUN_OK);
    return graph;
}

static clrun_tensor_id add_input(clrun_graph *graph, const char *name, clrun_tensor_type type)
{
    clrun_tensor_id id = -1;
    assert_int_equal(clrun_graph_add_input(graph, name, &type, false, &id), CLRUN_OK);
    return id;
}

static clrun_tensor_id add_unary(clrun_graph *graph, const char *op, clrun_tensor_id x,
                                 const char *name)
{
    clrun_tensor_id id = -1;
    const char *names[1] = {name};
    assert_int_equal(clrun_graph_add_node(graph, op, &x, 1, names, 1, NULL, 0, &id), CLRUN_OK);
    return id;
}

static clrun_tensor_id add_binary(clrun_graph *graph, const char *op, clrun_tensor_id a,
                                  clrun_tensor_id b, const char *name)
{
    clrun_tensor_id id = -1;
    clrun_tensor_id inputs[2] = {a, b};
    const char *names[1] = {name};
    assert_int_equal(clrun_graph_add_node(graph, op, inputs, 2, names, 1, NULL, 0, &id), CLRUN_OK);
    return id;
}

/* The graph's text as written by clrun_graph_write; caller frees. */
static char *write_text(const clrun_graph *graph)
{
    char *text = NULL;
    size_t length = 0;
    FILE *out = open_memstream(&text, &length);
    assert_non_null(out);
    assert_int_equal(clrun_graph_write(graph, out), CLRUN_OK);
    fclose(out);
    return text;
}

static clrun_status parse(const char *text, clrun_graph **out, char *err, size_t errlen)
{
    return clrun_graph_parse(text, strlen(text), "t.graph", out, err, errlen);
}

static clrun_graph *parse_ok(const char *text)
{
    clrun_graph *graph = NULL;
    char err[1024];
    clrun_status status = parse(text, &graph, err, sizeof err);
    if (status != CLRUN_OK)
        fail_msg("parse failed: %s", err);
    return graph;
}

static void assert_parse_error(const char *text, clrun_status status, const char *message)
{
    clrun_graph *graph = NULL;
    char err[1024];
    assert_int_equal(parse(text, &graph, err, sizeof err), status);
    assert_null(graph);
    assert_string_equal(err, message);
    assert_string_equal(clrun_last_error(NULL), message);
}

/* parse(write(graph)) is the same graph. */
static void assert_round_trip(const clrun_graph *graph)
{
    char *text = write_text(graph);
    clrun_graph *again = NULL;
    char err[1024], why[256] = "";
    clrun_status status = clrun_graph_parse(text, strlen(text), "written.graph", &again, err,
                                            sizeof err);
    if (status != CLRUN_OK)
        fail_msg("reading back failed: %s\n%s", err, text);
    if (!clrun__graph_equal(graph, again, why, sizeof why))
        fail_msg("read back differs: %s\n%s", why, text);
    /* Writing again gives the same text. */
    char *text_again = write_text(again);
    assert_string_equal(text, text_again);
    free(text_again);
    clrun_graph_destroy(again);
    free(text);
}

/* Where the source tree is: $srcdir (set by 'make check'), else the configure-time path. */
static const char *source_dir(void)
{
    const char *srcdir = getenv("srcdir");
    return srcdir && srcdir[0] ? srcdir : CLRUN_TOP_SRCDIR;
}

static char *read_whole(const char *path, size_t *length)
{
    FILE *in = fopen(path, "rb");
    if (!in)
        fail_msg("cannot open %s", path);
    char *text = NULL;
    size_t used = 0, capacity = 0;
    for (;;) {
        if (used + 4096 + 1 > capacity) {
            capacity = (used + 4096 + 1) * 2;
            text = realloc(text, capacity);
            assert_non_null(text);
        }
        size_t got = fread(text + used, 1, 4096, in);
        used += got;
        if (got == 0)
            break;
    }
    fclose(in);
    text[used] = '\0';
    *length = used;
    return text;
}

/* The ops docs/ops.md promises. All of them are in the table (test_ops checks it), so a graph
 * that needs one the table lacks fails, naming the op, as a regression. */
static bool documented_op(const char *name)
{
    static const char *const ops[] = {
        "neg", "abs", "relu", "gelu", "gelu_erf", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "copy",
        "scale", "add", "sub", "mul", "div", "maximum", "minimum", "matmul", "softmax",
        "layernorm", "reduce_sum", "reduce_mean", "reduce_max", "transpose", "reshape", "concat",
        "slice", "gather", "conv2d", "maxpool2d", "avgpool2d", "global_avgpool", NULL};
    for (int i = 0; ops[i]; i++)
        if (strcmp(ops[i], name) == 0)
            return true;
    return false;
}

/* Fails, naming the op, when a load of `what` reported an unknown op that docs/ops.md
 * documents: the table has them all, so losing one is a regression, never a reason to skip.
 * Other failures are left to the caller's own check. */
static void fail_on_missing_documented_op(const char *what, clrun_status status, const char *err)
{
    if (status != CLRUN_ERROR_UNKNOWN_KERNEL)
        return;
    const char *at = strstr(err, "unknown op '");
    if (!at)
        return;
    char name[64] = "";
    sscanf(at + strlen("unknown op '"), "%63[a-z0-9_]", name);
    if (documented_op(name))
        fail_msg("%s: documented op '%s' is missing from the op table (%s)", what, name, err);
}

/* ---- dtypes and sizes ---- */

static void dtype_names_and_sizes(void **state)
{
    (void)state;
    assert_string_equal(clrun_dtype_name(CLRUN_F32), "f32");
    assert_string_equal(clrun_dtype_name(CLRUN_I32), "i32");
    assert_string_equal(clrun_dtype_name(CLRUN_F16), "f16");
    assert_int_equal(clrun_dtype_size(CLRUN_F32), 4);
    assert_int_equal(clrun_dtype_size(CLRUN_I32), 4);
    assert_int_equal(clrun_dtype_size(CLRUN_F16), 2);
    assert_string_equal(clrun_dtype_name(CLRUN_I64), "i64");
    assert_string_equal(clrun_dtype_name(CLRUN_BOOL), "bool");
    assert_string_equal(clrun_dtype_name(CLRUN_F64), "f64");
    assert_int_equal(clrun_dtype_size(CLRUN_I64), 8);
    assert_int_equal(clrun_dtype_size(CLRUN_BOOL), 1);
    assert_int_equal(clrun_dtype_size(CLRUN_F64), 8);
    assert_string_equal(clrun_dtype_name(CLRUN_U8), "u8");
    assert_string_equal(clrun_dtype_name(CLRUN_I16), "i16");
    assert_string_equal(clrun_dtype_name(CLRUN_U64), "u64");
    assert_int_equal(clrun_dtype_size(CLRUN_I8), 1);
    assert_int_equal(clrun_dtype_size(CLRUN_U16), 2);
    assert_int_equal(clrun_dtype_size(CLRUN_U32), 4);
    assert_int_equal(clrun_dtype_size(CLRUN_U64), 8);
    assert_int_equal(clrun_dtype_size((clrun_dtype)13), 0);
}

static void elements_and_bytes(void **state)
{
    (void)state;
    clrun_tensor_type scalar = {CLRUN_F16, 0, {0}};
    assert_int_equal(clrun_tensor_elements(&scalar), 1);
    assert_int_equal(clrun_tensor_bytes(&scalar), 2);
    clrun_tensor_type t = F32(8, 784);
    assert_int_equal(clrun_tensor_elements(&t), 8 * 784);
    assert_int_equal(clrun_tensor_bytes(&t), 8 * 784 * 4);
}

static void sizes_that_overflow_are_zero(void **state)
{
    (void)state;
    /* 2^62 elements fit in 64 bits, their 2^64 bytes do not. */
    clrun_tensor_type t = F32(INT64_C(1) << 31, INT64_C(1) << 31);
    assert_int_equal(clrun_tensor_elements(&t), UINT64_C(1) << 62);
    assert_int_equal(clrun_tensor_bytes(&t), 0);
    clrun_tensor_type huge = F32(INT64_C(1) << 40, INT64_C(1) << 40);
    assert_int_equal(clrun_tensor_elements(&huge), 0);
    clrun_tensor_type zero = F32(4, 0);
    assert_int_equal(clrun_tensor_elements(&zero), 0);
    clrun_tensor_type eight = {CLRUN_F32, 8, {2, 1, 3, 1, 2, 1, 3, 5}};
    assert_int_equal(CLRUN_MAX_DIMS, 8);
    assert_int_equal(clrun_tensor_bytes(&eight), 4 * 180);
    clrun_tensor_type bad_rank = {CLRUN_F32, CLRUN_MAX_DIMS + 1, {0}};
    assert_int_equal(clrun_tensor_bytes(&bad_rank), 0);
}

/* ---- builder ---- */

static void builds_a_small_graph_and_reads_it(void **state)
{
    (void)state;
    clrun_graph *graph = new_graph();
    clrun_tensor_id x = add_input(graph, "x", F32(2, 3));
    clrun_tensor_id y = add_unary(graph, "relu", x, "y");
    assert_int_equal(clrun_graph_mark_output(graph, y), CLRUN_OK);
    assert_int_equal(clrun_graph_validate(graph), CLRUN_OK);
    assert_string_equal(clrun_graph_name(graph), "g");
    assert_int_equal(clrun_graph_tensor_count(graph), 2);
    assert_int_equal(clrun_graph_node_count(graph), 1);
    assert_int_equal(clrun_graph_find(graph, "y"), y);
    assert_int_equal(clrun_graph_find(graph, "nope"), -1);
    assert_string_equal(clrun_graph_tensor_name(graph, x), "x");
    assert_null(clrun_graph_tensor_name(graph, 99));
    assert_int_equal(clrun_graph_tensor_type(graph, y)->shape[1], 3);
    const clrun_tensor_id *ids = NULL;
    assert_int_equal(clrun_graph_inputs(graph, &ids), 1);
    assert_int_equal(ids[0], x);
    assert_int_equal(clrun_graph_outputs(graph, &ids), 1);
    assert_int_equal(ids[0], y);
    clrun_graph_destroy(graph);
}

static void finds_names_among_many(void **state)
{
    (void)state;
    clrun_graph *graph = new_graph();
    char name[32];
    for (int i = 0; i < 5000; i++) {
        snprintf(name, sizeof name, "t%d", i);
        add_input(graph, name, F32(1));
    }
    for (int i = 0; i < 5000; i += 7) {
        snprintf(name, sizeof name, "t%d", i);
        assert_int_equal(clrun_graph_find(graph, name), i);
    }
    clrun_graph_destroy(graph);
}

/* A snapshot of what a failed call must not change. */
typedef struct counts {
    int32_t tensors, nodes, inputs, outputs;
} counts;

static counts counts_of(const clrun_graph *graph)
{
    return (counts){clrun_graph_tensor_count(graph), clrun_graph_node_count(graph),
                    clrun_graph_inputs(graph, NULL), clrun_graph_outputs(graph, NULL)};
}

static void assert_unchanged(const clrun_graph *graph, counts before)
{
    counts now = counts_of(graph);
    assert_int_equal(now.tensors, before.tensors);
    assert_int_equal(now.nodes, before.nodes);
    assert_int_equal(now.inputs, before.inputs);
    assert_int_equal(now.outputs, before.outputs);
}

static void refuses_a_name_twice_and_changes_nothing(void **state)
{
    (void)state;
    clrun_graph *graph = new_graph();
    clrun_tensor_id x = add_input(graph, "x", F32(4));
    counts before = counts_of(graph);
    clrun_tensor_type t = F32(4);
    assert_int_equal(clrun_graph_add_input(graph, "x", &t, false, NULL), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_string_equal(clrun_graph_last_error(graph), "'x' is already defined");
    assert_int_equal(clrun_graph_add_constant(graph, "x", &t, NULL, CLRUN_FILL_ZEROS, 0, 0, 0, NULL),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    const char *names[1] = {"x"};
    assert_int_equal(clrun_graph_add_node(graph, "relu", &x, 1, names, 1, NULL, 0, NULL),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_unchanged(graph, before);
    assert_int_equal(clrun_graph_find(graph, "x"), x);
    clrun_graph_destroy(graph);
}

static void refuses_names_the_format_cannot_write(void **state)
{
    (void)state;
    clrun_graph *graph = new_graph();
    clrun_tensor_type t = F32(4);
    static const char *const bad[] = {"", "9lives", ".x", "a b", "a,b", "a-b", "é"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(clrun_graph_add_input(graph, bad[i], &t, false, NULL),
                         CLRUN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(clrun_graph_add_input(graph, NULL, &t, false, NULL), CLRUN_ERROR_INVALID_ARGUMENT);
    char long_name[300];
    memset(long_name, 'a', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    assert_int_equal(clrun_graph_add_input(graph, long_name, &t, false, NULL),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    long_name[255] = '\0';
    assert_int_equal(clrun_graph_add_input(graph, long_name, &t, false, NULL), CLRUN_OK);
    assert_int_equal(clrun_graph_add_input(graph, "_a.b_9", &t, false, NULL), CLRUN_OK);
    clrun_graph *unnamed = NULL;
    assert_int_equal(clrun_graph_create("no good", &unnamed), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_null(unnamed);
    assert_int_equal(clrun_graph_create(NULL, &unnamed), CLRUN_OK);
    assert_null(clrun_graph_name(unnamed));
    clrun_graph_destroy(unnamed);
    clrun_graph_destroy(graph);
}

static void refuses_bad_types(void **state)
{
    (void)state;
    clrun_graph *graph = new_graph();
    clrun_tensor_type negative = F32(4, -1); /* a 0 is an empty input (tests/test_onnx_empty.c) */
    assert_int_equal(clrun_graph_add_input(graph, "a", &negative, false, NULL), CLRUN_ERROR_INVALID_SIZE);
    assert_string_equal(clrun_graph_last_error(graph),
                        "'a': dimension 1 is -1 (must be at least 0; 0 makes the tensor empty)");
    clrun_tensor_type overflow = F32(INT64_C(1) << 31, INT64_C(1) << 31);
    assert_int_equal(clrun_graph_add_input(graph, "a", &overflow, false, NULL),
                     CLRUN_ERROR_INVALID_SIZE);
    assert_string_equal(clrun_graph_last_error(graph),
                        "'a': f32[2147483648, 2147483648] is too large (its byte size overflows 64 bits)");
    clrun_tensor_type rank = {CLRUN_F32, 9, {1, 1, 1, 1, 1, 1, 1, 1}};
    assert_int_equal(clrun_graph_add_input(graph, "a", &rank, false, NULL),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_string_equal(clrun_graph_last_error(graph), "'a': rank 9 is out of range (0 to 8)");
    clrun_tensor_type dtype = {(clrun_dtype)13, 1, {4}};
    assert_int_equal(clrun_graph_add_input(graph, "a", &dtype, false, NULL),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(clrun_graph_add_input(graph, "a", NULL, false, NULL), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(clrun_graph_tensor_count(graph), 0);
    clrun_tensor_type eight = {CLRUN_F32, 8, {2, 1, 3, 1, 2, 1, 3, 1}}; /* CLRUN_MAX_DIMS */
    assert_int_equal(clrun_graph_add_input(graph, "eight", &eight, false, NULL), CLRUN_OK);
    clrun_graph_destroy(graph);
}

static void unknown_op_is_unknown_kernel(void **state)
{
    (void)state;
    clrun_graph *graph = new_graph();
    clrun_tensor_id x = add_input(graph, "x", F32(4));
    counts before = counts_of(graph);
    const char *names[1] = {"y"};
    assert_int_equal(clrun_graph_add_node(graph, "matmull", &x, 1, names, 1, NULL, 0, NULL),
                     CLRUN_ERROR_UNKNOWN_KERNEL);
    assert_string_equal(clrun_graph_last_error(graph), "unknown op 'matmull'");
    assert_unchanged(graph, before);
    clrun_graph_destroy(graph);
}

static void refuses_bad_node_arguments_and_changes_nothing(void **state)
{
    (void)state;
    clrun_graph *graph = new_graph();
    clrun_tensor_id x = add_input(graph, "x", F32(4));
    counts before = counts_of(graph);
    const char *names[2] = {"y", "y"};
    clrun_tensor_id two[2] = {x, x};
    assert_int_equal(clrun_graph_add_node(graph, "relu", two, 2, names, 1, NULL, 0, NULL),
                     CLRUN_ERROR_INVALID_GRAPH);
    assert_string_equal(clrun_graph_last_error(graph), "relu takes 1 input, got 2");
    clrun_tensor_id missing = 42;
    assert_int_equal(clrun_graph_add_node(graph, "relu", &missing, 1, names, 1, NULL, 0, NULL),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_string_equal(clrun_graph_last_error(graph),
                        "relu: input 0 is not a tensor of this graph (id 42)");
    assert_int_equal(clrun_graph_add_node(graph, "relu", &x, 1, names, 2, NULL, 0, NULL),
                     CLRUN_ERROR_INVALID_GRAPH);
    assert_string_equal(clrun_graph_last_error(graph), "relu gives 1 output, 2 named");
    clrun_attr attrs[2] = {{.name = "alpha", .kind = CLRUN_ATTR_FLOAT, .f = 1.0},
                           {.name = "alpha", .kind = CLRUN_ATTR_FLOAT, .f = 2.0}};
    assert_int_equal(clrun_graph_add_node(graph, "scale", &x, 1, names, 1, attrs, 2, NULL),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_string_equal(clrun_graph_last_error(graph), "scale: attribute 'alpha' given twice");
    attrs[0].f = INFINITY;
    assert_int_equal(clrun_graph_add_node(graph, "scale", &x, 1, names, 1, attrs, 1, NULL),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_string_equal(clrun_graph_last_error(graph), "scale: attribute 'alpha' is not finite");
    clrun_attr list = {.name = "perm", .kind = CLRUN_ATTR_INTS, .count = CLRUN_MAX_ATTR_INTS + 1};
    assert_int_equal(clrun_graph_add_node(graph, "transpose", &x, 1, names, 1, &list, 1, NULL),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_unchanged(graph, before);
    clrun_graph_destroy(graph);
}

static void op_refusal_keeps_the_ops_message(void **state)
{
    (void)state;
    clrun_graph *graph = new_graph();
    clrun_tensor_id a = add_input(graph, "a", F32(8, 784));
    clrun_tensor_id b = add_input(graph, "b", F32(512, 10));
    counts before = counts_of(graph);
    clrun_tensor_id inputs[2] = {a, b};
    const char *names[1] = {"c"};
    assert_int_equal(clrun_graph_add_node(graph, "matmul", inputs, 2, names, 1, NULL, 0, NULL),
                     CLRUN_ERROR_INVALID_GRAPH);
    /* The op's own words, whatever they are, start with its name. */
    assert_memory_equal(clrun_graph_last_error(graph), "matmul: ", 8);
    assert_string_equal(clrun_last_error(NULL), clrun_graph_last_error(graph));
    assert_unchanged(graph, before);
    clrun_graph_destroy(graph);
}

static void refuses_an_output_twice(void **state)
{
    (void)state;
    clrun_graph *graph = new_graph();
    clrun_tensor_id x = add_input(graph, "x", F32(4));
    assert_int_equal(clrun_graph_mark_output(graph, x), CLRUN_OK);
    assert_int_equal(clrun_graph_mark_output(graph, x), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_string_equal(clrun_graph_last_error(graph), "'x' is already an output");
    assert_int_equal(clrun_graph_mark_output(graph, 7), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(clrun_graph_outputs(graph, NULL), 1);
    clrun_graph_destroy(graph);
}

static void refuses_fills_that_describe_nothing(void **state)
{
    (void)state;
    clrun_graph *graph = new_graph();
    clrun_tensor_type f = F32(4);
    clrun_tensor_type i = {CLRUN_I32, 1, {4}};
    assert_int_equal(clrun_graph_add_constant(graph, "c", &f, NULL, CLRUN_FILL_UNIFORM, 1, 1, 0, NULL),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_string_equal(clrun_graph_last_error(graph), "'c': uniform(a, b) needs a < b, got a=1 b=1");
    assert_int_equal(clrun_graph_add_constant(graph, "c", &f, NULL, CLRUN_FILL_NORMAL, 0, -1, 0, NULL),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(clrun_graph_add_constant(graph, "c", &f, NULL, CLRUN_FILL_NORMAL, NAN, 1, 0, NULL),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(clrun_graph_add_constant(graph, "c", &i, NULL, CLRUN_FILL_NORMAL, 0, 1, 0, NULL),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_string_equal(clrun_graph_last_error(graph), "'c': normal fill needs a float dtype, not i32");
    assert_int_equal(clrun_graph_add_constant(graph, "c", &i, NULL, CLRUN_FILL_UNIFORM, 0, 2.5, 0, NULL),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(clrun_graph_add_constant(graph, "c", &f, NULL, (clrun_fill)9, 0, 1, 0, NULL),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(clrun_graph_tensor_count(graph), 0);
    /* The full i32 range is a valid uniform range. */
    assert_int_equal(clrun_graph_add_constant(graph, "c", &i, NULL, CLRUN_FILL_UNIFORM,
                                              -2147483648.0, 2147483648.0, 0, NULL),
                     CLRUN_OK);
    clrun_graph_destroy(graph);
}

static void constant_data_is_copied(void **state)
{
    (void)state;
    clrun_graph *graph = new_graph();
    float values[3] = {1.5f, -2.0f, 0.25f};
    clrun_tensor_type t = F32(3);
    clrun_tensor_id c = -1;
    assert_int_equal(clrun_graph_add_constant(graph, "c", &t, values, CLRUN_FILL_NORMAL, 5, 6, 7, &c),
                     CLRUN_OK);
    values[0] = 99.0f;
    float out[3];
    clrun__constant_values(&graph->tensors[c], out);
    assert_true(out[0] == 1.5f && out[1] == -2.0f && out[2] == 0.25f);
    /* Data wins over a fill, and the unused fill parameters are not kept. */
    assert_int_equal(graph->tensors[c].seed, 0);
    assert_true(graph->tensors[c].fill_a == 0 && graph->tensors[c].fill_b == 0);
    clrun_graph_destroy(graph);
}

/* ---- validation ---- */

/* x -> a = relu(x) -> b = neg(a), output b: valid, for the tests below to break. */
static clrun_graph *chain(void)
{
    clrun_graph *graph = new_graph();
    clrun_tensor_id x = add_input(graph, "x", F32(4));
    clrun_tensor_id a = add_unary(graph, "relu", x, "a");
    clrun_tensor_id b = add_unary(graph, "neg", a, "b");
    assert_int_equal(clrun_graph_mark_output(graph, b), CLRUN_OK);
    assert_int_equal(clrun_graph_validate(graph), CLRUN_OK);
    return graph;
}

static void validate_refuses_no_outputs(void **state)
{
    (void)state;
    clrun_graph *graph = new_graph();
    add_unary(graph, "relu", add_input(graph, "x", F32(4)), "y");
    assert_int_equal(clrun_graph_validate(graph), CLRUN_ERROR_INVALID_GRAPH);
    assert_string_equal(clrun_graph_last_error(graph), "graph has no outputs");
    clrun_graph_destroy(graph);
}

static void validate_finds_a_cycle(void **state)
{
    (void)state;
    clrun_graph *graph = chain();
    graph->nodes[0].inputs[0] = clrun_graph_find(graph, "b"); /* a = relu(b), b = neg(a) */
    assert_int_equal(clrun_graph_validate(graph), CLRUN_ERROR_INVALID_GRAPH);
    assert_string_equal(clrun_graph_last_error(graph), "cycle: a -> b -> a");
    clrun_graph_destroy(graph);
}

static void validate_finds_a_tensor_produced_twice(void **state)
{
    (void)state;
    clrun_graph *graph = chain();
    graph->nodes[1].outputs[0] = clrun_graph_find(graph, "a");
    assert_int_equal(clrun_graph_validate(graph), CLRUN_ERROR_INVALID_GRAPH);
    assert_string_equal(clrun_graph_last_error(graph),
                        "'a' is produced twice: by node 0 (relu) and node 1 (neg)");
    clrun_graph_destroy(graph);
}

/* Drops the last node, leaving its output without a producer. */
static void drop_last_node(clrun_graph *graph)
{
    clrun__node *node = &graph->nodes[--graph->node_count];
    free(node->inputs);
    free(node->outputs);
    free(node->attrs);
}

static void validate_finds_an_output_never_produced(void **state)
{
    (void)state;
    clrun_graph *graph = chain();
    drop_last_node(graph);
    assert_int_equal(clrun_graph_validate(graph), CLRUN_ERROR_INVALID_GRAPH);
    assert_string_equal(clrun_graph_last_error(graph), "output 'b' is never produced");
    clrun_graph_destroy(graph);
}

static void validate_finds_a_read_of_a_tensor_nobody_produces(void **state)
{
    (void)state;
    clrun_graph *graph = chain();
    clrun_tensor_id x = clrun_graph_find(graph, "x");
    assert_int_equal(clrun_graph_mark_output(graph, add_unary(graph, "abs", x, "c")), CLRUN_OK);
    /* Move node 0 (a = relu(x)) out: b = neg(a) now reads a tensor nobody writes. */
    graph->nodes[0].outputs[0] = clrun_graph_find(graph, "c");
    graph->tensors[clrun_graph_find(graph, "c")].producer = 0;
    drop_last_node(graph);
    assert_int_equal(clrun_graph_validate(graph), CLRUN_ERROR_INVALID_GRAPH);
    assert_string_equal(clrun_graph_last_error(graph), "'a' is read by a node (neg) but nobody produces it");
    clrun_graph_destroy(graph);
}

static void validate_finds_a_node_reading_an_unknown_tensor(void **state)
{
    (void)state;
    clrun_graph *graph = chain();
    graph->nodes[1].inputs[0] = 77;
    assert_int_equal(clrun_graph_validate(graph), CLRUN_ERROR_INVALID_GRAPH);
    assert_string_equal(clrun_graph_last_error(graph),
                        "node 1 (neg) reads tensor 77, which does not exist");
    clrun_graph_destroy(graph);
}

static void validate_finds_a_stored_type_the_op_does_not_give(void **state)
{
    (void)state;
    clrun_graph *graph = chain();
    graph->tensors[clrun_graph_find(graph, "b")].type.shape[0] = 5;
    assert_int_equal(clrun_graph_validate(graph), CLRUN_ERROR_INVALID_GRAPH);
    assert_string_equal(clrun_graph_last_error(graph), "'b' is f32[5] but neg gives f32[4]");
    clrun_graph_destroy(graph);
}

/* ---- the text format ---- */

static void parses_every_statement(void **state)
{
    (void)state;
    clrun_graph *graph = parse_ok("# comment\n"
                                  "graph mlp\n"
                                  "input x: f32[8, 784] donated\n"
                                  "const w1: f32[784, 512] normal(0, 0.05) seed=1\n"
                                  "const b1: f32[512] zeros\n"
                                  "const idx: i32[4] data=[1, 2, 3, -4]   # trailing comment\n"
                                  "node h1 = matmul(x, w1, b1)\n"
                                  "node a1: f32[8, 512] = relu(h1)\n"
                                  "node y = scale(a1) alpha=0.5 beta=1\n"
                                  "output y\n");
    assert_string_equal(clrun_graph_name(graph), "mlp");
    assert_int_equal(clrun_graph_tensor_count(graph), 7);
    assert_int_equal(clrun_graph_node_count(graph), 3);
    const clrun__tensor *x = &graph->tensors[clrun_graph_find(graph, "x")];
    assert_int_equal(x->kind, CLRUN__TENSOR_INPUT);
    assert_true(x->donated);
    assert_int_equal(x->line, 3);
    const clrun__tensor *w1 = &graph->tensors[clrun_graph_find(graph, "w1")];
    assert_int_equal(w1->fill, CLRUN_FILL_NORMAL);
    assert_true(w1->fill_a == 0.0 && w1->fill_b == 0.05);
    assert_int_equal(w1->seed, 1);
    const clrun__tensor *idx = &graph->tensors[clrun_graph_find(graph, "idx")];
    int32_t values[4];
    clrun__constant_values(idx, values);
    assert_int_equal(values[3], -4);
    const clrun__node *scale = &graph->nodes[2];
    assert_int_equal(scale->line, 9);
    assert_int_equal(scale->attr_count, 2);
    assert_int_equal(scale->attrs[0].kind, CLRUN_ATTR_FLOAT);
    assert_int_equal(scale->attrs[1].kind, CLRUN_ATTR_INT); /* beta=1 is an integer */
    assert_int_equal(clrun_graph_tensor_type(graph, clrun_graph_find(graph, "h1"))->shape[1], 512);
    clrun_graph_destroy(graph);
}

static void accepts_crlf_no_final_newline_and_blank_lines(void **state)
{
    (void)state;
    clrun_graph *graph = parse_ok("\r\n\r\ninput x: f32[4]\r\n  \t\r\nnode y = relu(x)\r\noutput y");
    assert_int_equal(clrun_graph_node_count(graph), 1);
    clrun_graph_destroy(graph);
}

static void uses_names_declared_further_down(void **state)
{
    (void)state;
    clrun_graph *graph = parse_ok("output y\n"
                                  "node y = add(h, b)\n"
                                  "node h = relu(x)\n"
                                  "const b: f32[4] ones\n"
                                  "input x: f32[4]\n");
    /* Built in dependency order: every node after what it reads. */
    assert_int_equal(graph->nodes[0].op, clrun__op_find("relu"));
    assert_int_equal(graph->nodes[1].op, clrun__op_find("add"));
    assert_int_equal(clrun_graph_validate(graph), CLRUN_OK);
    assert_int_equal(graph->tensors[clrun_graph_find(graph, "y")].line, 2);
    assert_round_trip(graph);
    clrun_graph_destroy(graph);
}

static void reads_several_outputs_of_a_node(void **state)
{
    (void)state;
    size_t count = 0;
    const clrun__op *const *ops = clrun__op_list(&count);
    const clrun__op *multi = NULL;
    for (size_t i = 0; i < count && !multi; i++)
        if (ops[i]->outputs > 1 && ops[i]->min_inputs == 1)
            multi = ops[i];
    /* The one skip left on purpose: every op of the table has exactly one output (test_ops's
     * every_documented_op_is_in_the_table asserts it), so there is nothing to read several
     * outputs of until an op with several is added, which makes this test run. */
    if (!multi)
        skip();
    char text[256];
    snprintf(text, sizeof text, "input x: f32[4, 6]\nnode q, k = %s(x)\noutput q, k\n", multi->name);
    clrun_graph *graph = NULL;
    char err[512];
    if (parse(text, &graph, err, sizeof err) != CLRUN_OK)
        fail_msg("op '%s' with %d outputs: %s (give this test the attributes it needs)", multi->name,
                 (int)multi->outputs, err);
    assert_int_equal(graph->nodes[0].output_count, multi->outputs);
    assert_round_trip(graph);
    clrun_graph_destroy(graph);
}

static void checks_annotations(void **state)
{
    (void)state;
    clrun_graph *graph = parse_ok("input x: i32[2, 3]\nnode y: i32[2, 3] = neg(x)\noutput y\n");
    clrun_graph_destroy(graph);
    assert_parse_error("input x: i32[2, 3]\nnode y: f32[2, 3] = neg(x)\noutput y\n",
                       CLRUN_ERROR_INVALID_GRAPH,
                       "t.graph:2:9: 'y' is i32[2, 3] but its annotation says f32[2, 3]");
}

static void reads_scalars_and_every_dtype(void **state)
{
    (void)state;
    clrun_graph *graph = parse_ok("input s: f32[]\n"
                                  "const h: f16[2] data=[1, 0.5]\n"
                                  "const hb: f16[2] bits=[0x3c00, 0x7e00]\n"
                                  "const i: i32[1, 1, 1, 1, 1, 1] uniform(-3, 3) seed=2\n"
                                  "node y = relu(s)\n"
                                  "output y, h, hb, i\n");
    assert_int_equal(clrun_graph_tensor_type(graph, clrun_graph_find(graph, "s"))->rank, 0);
    uint16_t halves[2];
    clrun__constant_values(&graph->tensors[clrun_graph_find(graph, "h")], halves);
    assert_int_equal(halves[0], 0x3c00);
    assert_int_equal(halves[1], 0x3800);
    assert_round_trip(graph);
    clrun_graph_destroy(graph);
}

static void keeps_attribute_kinds_and_bits(void **state)
{
    (void)state;
    clrun_graph *graph = parse_ok("input x: f32[4]\n"
                                  "node y = scale(x) alpha=1.0 beta=0.1\n"
                                  "output y\n");
    assert_int_equal(graph->nodes[0].attrs[0].kind, CLRUN_ATTR_FLOAT);
    assert_true(graph->nodes[0].attrs[1].f == 0.1);
    char *text = write_text(graph);
    assert_non_null(strstr(text, "alpha=1.0 beta=0.1\n"));
    free(text);
    assert_round_trip(graph);
    clrun_graph_destroy(graph);
}

/* i64, bool and f64 data read as values, written back as values (or bit patterns where a value
 * has no decimal spelling), with the same bits. */
static void wide_and_bool_data_round_trip(void **state)
{
    (void)state;
    clrun_graph *graph = parse_ok("const i: i64[3] data=[-9223372036854775808, 0, 4294967296]\n"
                                  "const b: bool[3] data=[1, 0, 1]\n"
                                  "const d: f64[2] data=[0.1, -1e300]\n"
                                  "const n: f64[1] bits=[0x7ff8000000000001]\n"
                                  "output i, b, d, n\n");
    const int64_t *ints = graph->tensors[0].data;
    assert_true(ints[0] == INT64_MIN && ints[1] == 0 && ints[2] == 4294967296LL);
    const unsigned char *bools = graph->tensors[1].data;
    assert_true(bools[0] == 1 && bools[1] == 0 && bools[2] == 1);
    const double *reals = graph->tensors[2].data;
    assert_true(reals[0] == 0.1 && reals[1] == -1e300);
    uint64_t nan_bits;
    memcpy(&nan_bits, graph->tensors[3].data, 8);
    assert_true(nan_bits == 0x7ff8000000000001ull);
    char *text = write_text(graph);
    assert_non_null(strstr(text, "data=[-9223372036854775808, 0, 4294967296]"));
    assert_non_null(strstr(text, "data=[0.1, -1e+300]"));
    assert_non_null(strstr(text, "bits=[0x7ff8000000000001]"));
    free(text);
    assert_round_trip(graph);
    clrun_graph_destroy(graph);
    char err[512];
    assert_int_equal(parse("const b: bool[1] data=[2]\noutput b\n", &graph, err, sizeof err),
                     CLRUN_ERROR_PARSE);
    assert_string_equal(err, "t.graph:1:24: '2' does not fit a bool (0 or 1)");
    assert_int_equal(parse("const b: bool[1] normal(0, 1)\noutput b\n", &graph, err, sizeof err),
                     CLRUN_ERROR_INVALID_GRAPH);
    assert_non_null(strstr(err, "normal fill needs a float dtype, not bool"));
}

static void seeds_above_int64_read_back(void **state)
{
    (void)state;
    clrun_graph *graph = parse_ok("const w: f32[3] uniform(0, 1) seed=0xFFFFFFFFFFFFFFFF\n"
                                  "output w\n");
    assert_true(graph->tensors[0].seed == UINT64_MAX);
    assert_round_trip(graph);
    clrun_graph_destroy(graph);
}

static void writes_the_documented_text(void **state)
{
    (void)state;
    clrun_graph *graph = new_graph();
    clrun_tensor_type t = F32(2, 2);
    clrun_tensor_id x = -1, w = -1, c = -1;
    assert_int_equal(clrun_graph_add_input(graph, "x", &t, true, &x), CLRUN_OK);
    assert_int_equal(clrun_graph_add_constant(graph, "w", &t, NULL, CLRUN_FILL_NORMAL, 0, 0.02, 5, &w),
                     CLRUN_OK);
    float data[4] = {1, -0.5f, 3e-8f, 0};
    assert_int_equal(clrun_graph_add_constant(graph, "c", &t, data, CLRUN_FILL_ZEROS, 0, 0, 0, &c),
                     CLRUN_OK);
    clrun_tensor_id inputs[3] = {x, w};
    const char *names[1] = {"y"};
    clrun_attr attrs[2] = {{.name = "transpose_b", .kind = CLRUN_ATTR_INT, .i = 1},
                           {.name = "alpha", .kind = CLRUN_ATTR_FLOAT, .f = 2}};
    clrun_tensor_id y = -1;
    assert_int_equal(clrun_graph_add_node(graph, "matmul", inputs, 2, names, 1, attrs, 2, &y), CLRUN_OK);
    clrun_tensor_id z = add_binary(graph, "add", y, c, "z");
    assert_int_equal(clrun_graph_mark_output(graph, z), CLRUN_OK);
    assert_int_equal(clrun_graph_mark_output(graph, y), CLRUN_OK);
    char *text = write_text(graph);
    assert_string_equal(text, "graph g\n"
                              "input x: f32[2, 2] donated\n"
                              "const w: f32[2, 2] normal(0, 0.02) seed=5\n"
                              "const c: f32[2, 2] data=[1, -0.5, 3e-08, 0]\n"
                              "node y: f32[2, 2] = matmul(x, w) transpose_b=1 alpha=2.0\n"
                              "node z: f32[2, 2] = add(y, c)\n"
                              "output z, y\n");
    free(text);
    assert_round_trip(graph);
    clrun_graph_destroy(graph);
}

static void writes_bits_for_values_without_decimals(void **state)
{
    (void)state;
    clrun_graph *graph = new_graph();
    clrun_tensor_type t = F32(2);
    float data[2] = {NAN, -INFINITY};
    assert_int_equal(clrun_graph_add_constant(graph, "c", &t, data, CLRUN_FILL_ZEROS, 0, 0, 0, NULL),
                     CLRUN_OK);
    assert_int_equal(clrun_graph_mark_output(graph, 0), CLRUN_OK);
    char *text = write_text(graph);
    assert_string_equal(text, "graph g\nconst c: f32[2] bits=[0x7fc00000, 0xff800000]\noutput c\n");
    free(text);
    assert_round_trip(graph);
    clrun_graph_destroy(graph);
}

static void load_reports_a_missing_file(void **state)
{
    (void)state;
    clrun_graph *graph = NULL;
    char err[512];
    assert_int_equal(clrun_graph_load("/nonexistent/x.graph", &graph, err, sizeof err), CLRUN_ERROR_IO);
    assert_null(graph);
    assert_string_equal(err, "/nonexistent/x.graph: cannot read: No such file or directory");
}

static void small_error_buffers_are_terminated(void **state)
{
    (void)state;
    clrun_graph *graph = NULL;
    char err[8];
    memset(err, 'x', sizeof err);
    assert_int_equal(parse("input x: c64[4]\n", &graph, err, sizeof err), CLRUN_ERROR_PARSE);
    assert_string_equal(err, "t.graph");
    assert_int_equal(parse("input x: c64[4]\n", &graph, NULL, 0), CLRUN_ERROR_PARSE);
}

static void reports_statement_errors_at_their_place(void **state)
{
    (void)state;
    assert_parse_error("node = relu(x)\n", CLRUN_ERROR_PARSE,
                       "t.graph:1:6: expected an output name, found '='");
    assert_parse_error("input x: f32[4]\nnode y = softmax(x) causal=\noutput y\n", CLRUN_ERROR_PARSE,
                       "t.graph:2:28: expected a number or a list, found end of line");
    assert_parse_error("input x: f32[4]\nnode y = relu(x) 3\n", CLRUN_ERROR_PARSE,
                       "t.graph:2:18: expected an attribute or end of line, found '3'");
    assert_parse_error("input x: f32[4\n", CLRUN_ERROR_PARSE,
                       "t.graph:1:15: expected ',' or ']', found end of line");
    assert_parse_error("input x: f32[4]\x01\n", CLRUN_ERROR_PARSE, "t.graph:1:16: unexpected byte 0x01");
    assert_parse_error("const c: f32[2] data=[1, 2, 3]\n", CLRUN_ERROR_PARSE,
                       "t.graph:1:29: more values than the 2 elements of 'c'");
    /* What the builder refuses is the file's fault: an invalid graph (exit status 2), never an
     * invalid argument. */
    assert_parse_error("input x: f32[4]\nnode a = relu(x)\noutput a, a\n", CLRUN_ERROR_INVALID_GRAPH,
                       "t.graph:3:11: 'a' is already an output");
}

/* Every file of tests/data/graphs/bad gives exactly the message of its .expected sibling. */
static void malformed_corpus_gives_the_expected_messages(void **state)
{
    (void)state;
    char dir_path[4096];
    snprintf(dir_path, sizeof dir_path, "%s/tests/data/graphs/bad", source_dir());
    DIR *dir = opendir(dir_path);
    if (!dir)
        fail_msg("cannot open %s", dir_path);
    int cases = 0;
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
        size_t length = strlen(entry->d_name);
        if (length < 7 || strcmp(entry->d_name + length - 6, ".graph") != 0)
            continue;
        char path[4600], expected_path[4600], shown[512];
        snprintf(path, sizeof path, "%s/%s", dir_path, entry->d_name);
        snprintf(expected_path, sizeof expected_path, "%.*s.expected", (int)(strlen(path) - 6), path);
        snprintf(shown, sizeof shown, "tests/data/graphs/bad/%s", entry->d_name);
        size_t text_length = 0, expected_length = 0;
        char *text = read_whole(path, &text_length);
        char *expected = read_whole(expected_path, &expected_length);
        while (expected_length && (expected[expected_length - 1] == '\n' || expected[expected_length - 1] == '\r'))
            expected[--expected_length] = '\0';
        clrun_graph *graph = NULL;
        char err[1024];
        clrun_status status = clrun_graph_parse(text, text_length, shown, &graph, err, sizeof err);
        if (status == CLRUN_OK || strcmp(err, expected) != 0)
            fail_msg("%s:\n  expected: %s\n  got:      %s", shown, expected,
                     status == CLRUN_OK ? "(accepted)" : err);
        assert_null(graph);
        free(text);
        free(expected);
        cases++;
    }
    closedir(dir);
    assert_true(cases >= 25);
}

/* ---- round trips ---- */

static void example_graphs_parse_validate_and_round_trip(void **state)
{
    (void)state;
    static const char *const examples[] = {"mlp", "gpt2_block", "resnet_block"};
    for (size_t i = 0; i < sizeof examples / sizeof examples[0]; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/examples/%s.graph", source_dir(), examples[i]);
        clrun_graph *graph = NULL;
        char err[1024];
        clrun_status status = clrun_graph_load(path, &graph, err, sizeof err);
        fail_on_missing_documented_op(examples[i], status, err);
        if (status != CLRUN_OK)
            fail_msg("%s", err);
        assert_int_equal(clrun_graph_validate(graph), CLRUN_OK);
        assert_string_equal(clrun_graph_name(graph), examples[i]);
        assert_round_trip(graph);
        clrun_graph_destroy(graph);
    }
}

static void generated_models_validate_and_round_trip(void **state)
{
    (void)state;
    for (int m = 0; gen_model_names[m]; m++) {
        for (int batch = 1; batch <= 8; batch += 7) {
            gen_model_options options = {batch, 0, true, 0};
            clrun_graph *graph = NULL;
            char err[1024];
            clrun_status status = gen_model(gen_model_names[m], &options, &graph, err, sizeof err);
            fail_on_missing_documented_op(gen_model_names[m], status, err);
            if (status != CLRUN_OK)
                fail_msg("%s batch %d: %s", gen_model_names[m], batch, err);
            assert_round_trip(graph);
            clrun_graph_destroy(graph);
        }
    }
}

static void generated_models_have_their_true_shapes(void **state)
{
    (void)state;
    gen_model_options options = {8, 0, true, 0};
    clrun_graph *graph = NULL;
    char err[1024];
    clrun_status status = gen_model("resnet50", &options, &graph, err, sizeof err);
    fail_on_missing_documented_op("resnet50", status, err);
    if (status != CLRUN_OK)
        fail_msg("resnet50: %s", err);
    /* 53 convolutions (1 stem, 16 x 3 in the bottlenecks, 4 projections) and the fc. */
    int convs = 0;
    for (int32_t n = 0; n < graph->node_count; n++)
        convs += strcmp(graph->nodes[n].op->name, "conv2d") == 0;
    assert_int_equal(convs, 53);
    const clrun_tensor_type *logits = clrun_graph_tensor_type(graph, clrun_graph_find(graph, "logits"));
    assert_int_equal(logits->shape[0], 8);
    assert_int_equal(logits->shape[1], 1000);
    const clrun_tensor_type *last = clrun_graph_tensor_type(graph, clrun_graph_find(graph, "layer4.2.relu"));
    assert_int_equal(last->shape[1], 2048);
    assert_int_equal(last->shape[2], 7);
    clrun_graph_destroy(graph);

    options = (gen_model_options){1, 0, true, 0};
    status = gen_model("gpt2", &options, &graph, err, sizeof err);
    fail_on_missing_documented_op("gpt2", status, err);
    if (status != CLRUN_OK)
        fail_msg("gpt2: %s", err);
    const clrun_tensor_type *scores = clrun_graph_tensor_type(graph, clrun_graph_find(graph, "h11.attn.scores"));
    clrun_tensor_type want = {CLRUN_F32, 4, {1, 12, 1024, 1024}};
    assert_true(clrun__type_equal(scores, &want));
    const clrun_tensor_type *out = clrun_graph_tensor_type(graph, clrun_graph_find(graph, "logits"));
    assert_int_equal(out->shape[0], 1024);
    assert_int_equal(out->shape[1], 50257);
    clrun_graph_destroy(graph);
}

/* Random graphs over the elementwise ops and matmul: every kind of constant, donated inputs,
 * attributes of every kind, several outputs. */
static uint64_t next_random(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

static clrun_graph *random_graph(uint64_t seed)
{
    clrun_graph *graph = new_graph();
    uint64_t s = seed;
    int64_t n = 1 + (int64_t)next_random(&s) % 5, m = 1 + (int64_t)next_random(&s) % 5;
    clrun_tensor_type t = F32(n, m);
    clrun_tensor_id pool[64];
    int count = 0;
    char name[32];
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "in%d", i);
        assert_int_equal(clrun_graph_add_input(graph, name, &t, next_random(&s) & 1, &pool[count++]), CLRUN_OK);
        snprintf(name, sizeof name, "c%d", i);
        clrun_fill fill = (clrun_fill)(next_random(&s) % 4);
        float data[25];
        for (int k = 0; k < 25; k++)
            data[k] = (float)(int64_t)(next_random(&s) % 2001 - 1000) / 7.0f;
        bool with_data = next_random(&s) % 3 == 0;
        assert_int_equal(clrun_graph_add_constant(graph, name, &t, with_data ? data : NULL, fill,
                                                  -0.3, 0.7, next_random(&s) << 31, &pool[count++]),
                         CLRUN_OK);
    }
    static const char *const unary[] = {"relu", "neg", "abs", "scale"};
    static const char *const binary[] = {"add", "sub", "mul", "maximum", "minimum"};
    int nodes = 1 + (int)(next_random(&s) % 20);
    for (int i = 0; i < nodes && count < 64; i++) {
        snprintf(name, sizeof name, "n%d", i);
        const char *names[1] = {name};
        clrun_tensor_id in[2] = {pool[next_random(&s) % (uint64_t)count],
                                 pool[next_random(&s) % (uint64_t)count]};
        if (next_random(&s) & 1) {
            const char *op = unary[next_random(&s) % 4];
            clrun_attr attr = {.name = "alpha", .kind = CLRUN_ATTR_FLOAT,
                               .f = (double)(int64_t)next_random(&s) / 3e6};
            bool scale = strcmp(op, "scale") == 0;
            assert_int_equal(clrun_graph_add_node(graph, op, in, 1, names, 1, &attr, scale, &pool[count]),
                             CLRUN_OK);
        } else {
            assert_int_equal(clrun_graph_add_node(graph, binary[next_random(&s) % 5], in, 2, names, 1,
                                                  NULL, 0, &pool[count]),
                             CLRUN_OK);
        }
        count++;
    }
    for (int i = count - 1; i >= 0; i -= 1 + (int)(next_random(&s) % 4))
        assert_int_equal(clrun_graph_mark_output(graph, pool[i]), CLRUN_OK);
    assert_int_equal(clrun_graph_validate(graph), CLRUN_OK);
    return graph;
}

static void random_builder_graphs_round_trip(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 300; seed++) {
        clrun_graph *graph = random_graph(seed);
        assert_round_trip(graph);
        clrun_graph_destroy(graph);
    }
}

/* ---- deterministic fill ---- */

static clrun__tensor fill_tensor(clrun_dtype dtype, int64_t elements, clrun_fill fill, double a,
                                 double b, uint64_t seed)
{
    clrun__tensor tensor = {.type = {dtype, 1, {elements}}, .kind = CLRUN__TENSOR_CONSTANT,
                            .producer = -1, .fill = fill, .fill_a = a, .fill_b = b, .seed = seed};
    return tensor;
}

static void fill_gives_known_bits_for_a_fixed_seed(void **state)
{
    (void)state;
    /* Pinned: a change to the generator changes every example graph's weights. */
    uint32_t bits[4];
    clrun__tensor normal = fill_tensor(CLRUN_F32, 4, CLRUN_FILL_NORMAL, 0, 0.02, 1);
    clrun__constant_values(&normal, bits);
    static const uint32_t normal_bits[4] = {0x3b82f8c8, 0xbc0a3b51, 0xbcb0748c, 0x3bfb349c};
    assert_memory_equal(bits, normal_bits, sizeof bits);
    clrun__tensor uniform = fill_tensor(CLRUN_F32, 4, CLRUN_FILL_UNIFORM, -1, 1, 42);
    clrun__constant_values(&uniform, bits);
    static const uint32_t uniform_bits[4] = {0x3e44d9f8, 0xbf5d4eaa, 0xbf1b2af0, 0x3f3a685c};
    assert_memory_equal(bits, uniform_bits, sizeof bits);
    int32_t ints[4];
    clrun__tensor integers = fill_tensor(CLRUN_I32, 4, CLRUN_FILL_UNIFORM, -5, 5, 7);
    clrun__constant_values(&integers, ints);
    static const int32_t int_values[4] = {0, 2, -5, 1};
    assert_memory_equal(ints, int_values, sizeof ints);
    uint16_t halves[4];
    clrun__tensor half = fill_tensor(CLRUN_F16, 4, CLRUN_FILL_NORMAL, 1, 0.5, 3);
    clrun__constant_values(&half, halves);
    static const uint16_t half_bits[4] = {0x3ffa, 0x39f1, 0xb3e7, 0x39cb};
    assert_memory_equal(halves, half_bits, sizeof halves);
}

static void fill_of_an_element_does_not_depend_on_the_size(void **state)
{
    (void)state;
    float small[10], *large = malloc(1000 * sizeof *large);
    assert_non_null(large);
    clrun__tensor a = fill_tensor(CLRUN_F32, 10, CLRUN_FILL_NORMAL, 0, 1, 9);
    clrun__tensor b = fill_tensor(CLRUN_F32, 1000, CLRUN_FILL_NORMAL, 0, 1, 9);
    clrun__constant_values(&a, small);
    clrun__constant_values(&b, large);
    assert_memory_equal(small, large, sizeof small);
    clrun__tensor other_seed = fill_tensor(CLRUN_F32, 10, CLRUN_FILL_NORMAL, 0, 1, 10);
    clrun__constant_values(&other_seed, large);
    assert_memory_not_equal(small, large, sizeof small);
    free(large);
}

static void fill_has_the_asked_distribution(void **state)
{
    (void)state;
    enum { N = 200000 };
    float *values = malloc(N * sizeof *values);
    assert_non_null(values);
    clrun__tensor normal = fill_tensor(CLRUN_F32, N, CLRUN_FILL_NORMAL, 3, 2, 5);
    clrun__constant_values(&normal, values);
    double sum = 0, squares = 0;
    for (int i = 0; i < N; i++) {
        sum += values[i];
        squares += (double)values[i] * values[i];
        assert_true(values[i] >= 3 - 12.0f && values[i] <= 3 + 12.0f);
    }
    double mean = sum / N, std = sqrt(squares / N - mean * mean);
    assert_true(fabs(mean - 3) < 0.02);
    assert_true(fabs(std - 2) < 0.02);
    clrun__tensor uniform = fill_tensor(CLRUN_F32, N, CLRUN_FILL_UNIFORM, -0.5, 0.25, 6);
    clrun__constant_values(&uniform, values);
    sum = 0;
    for (int i = 0; i < N; i++) {
        assert_true(values[i] >= -0.5f && values[i] < 0.25f);
        sum += values[i];
    }
    assert_true(fabs(sum / N + 0.125) < 0.005);
    free(values);
    int32_t ints[1000];
    int seen[4] = {0};
    clrun__tensor integers = fill_tensor(CLRUN_I32, 1000, CLRUN_FILL_UNIFORM, 10, 14, 8);
    clrun__constant_values(&integers, ints);
    for (int i = 0; i < 1000; i++) {
        assert_true(ints[i] >= 10 && ints[i] < 14);
        seen[ints[i] - 10]++;
    }
    for (int k = 0; k < 4; k++)
        assert_true(seen[k] > 200);
    clrun__tensor ones = fill_tensor(CLRUN_I32, 3, CLRUN_FILL_ONES, 0, 0, 0);
    clrun__constant_values(&ones, ints);
    assert_true(ints[0] == 1 && ints[2] == 1);
}

static void converts_floats_to_halves_exactly(void **state)
{
    (void)state;
    assert_int_equal(clrun__f32_to_f16(1.0f), 0x3c00);
    assert_int_equal(clrun__f32_to_f16(-2.0f), 0xc000);
    assert_int_equal(clrun__f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(clrun__f32_to_f16(65520.0f), 0x7c00); /* rounds up to infinity */
    assert_int_equal(clrun__f32_to_f16(1.0f / 16777216.0f), 0x0001); /* smallest subnormal, 2^-24 */
    assert_int_equal(clrun__f32_to_f16(1.0f / 33554432.0f), 0x0000); /* half of it: ties to even */
    assert_int_equal(clrun__f32_to_f16(1.5f / 33554432.0f), 0x0001);
    assert_int_equal(clrun__f32_to_f16(3.0f / 33554432.0f), 0x0002); /* 1.5 x smallest: ties to even */
    assert_int_equal(clrun__f32_to_f16(6.103515625e-05f), 0x0400); /* smallest normal */
    assert_int_equal(clrun__f32_to_f16(1.0f + 1.0f / 2048.0f), 0x3c00); /* tie to even */
    assert_int_equal(clrun__f32_to_f16(1.0f + 3.0f / 2048.0f), 0x3c02);
    assert_int_equal(clrun__f32_to_f16(INFINITY), 0x7c00);
    assert_int_equal(clrun__f32_to_f16(NAN) & 0x7e00, 0x7e00);
    /* And back: every finite half, subnormals included, survives the round trip. */
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00)
            continue;
        assert_int_equal(clrun__f32_to_f16(clrun__f16_to_f32((uint16_t)h)), h);
    }
    assert_true(clrun__f16_to_f32(0x0001) == 1.0f / 16777216.0f);
    assert_true(isinf(clrun__f16_to_f32(0xfc00)) && clrun__f16_to_f32(0xfc00) < 0);
    assert_true(isnan(clrun__f16_to_f32(0x7e00)));
}

/* One element of a dtype from a double: rounding, truncation, clamping; and exactness. */
static void converts_doubles_to_every_dtype(void **state)
{
    (void)state;
    union {
        uint64_t u64;
        int64_t i64;
        uint32_t u32;
        int32_t i32;
        uint16_t u16;
        int16_t i16;
        uint8_t u8;
        int8_t i8;
        float f32;
        double f64;
    } out;
#define ELEMENT(MEMBER, DTYPE, V) (out.u64 = 0, clrun__dtype_from_double(DTYPE, V, &out), out.MEMBER)
    assert_true(ELEMENT(f32, CLRUN_F32, 0.1) == 0.1f);
    assert_true(ELEMENT(f64, CLRUN_F64, 0.1) == 0.1);
    assert_int_equal(ELEMENT(u16, CLRUN_F16, 1.0), 0x3c00);
    assert_int_equal(ELEMENT(u16, CLRUN_BF16, 1.0), 0x3f80);
    assert_int_equal(ELEMENT(u16, CLRUN_BF16, -3.0), 0xc040);
    assert_int_equal(ELEMENT(i32, CLRUN_I32, -2.9), -2);
    assert_int_equal(ELEMENT(i32, CLRUN_I32, 1e10), INT32_MAX);
    assert_int_equal(ELEMENT(i32, CLRUN_I32, NAN), 0);
    assert_true(ELEMENT(i64, CLRUN_I64, 1e19) == INT64_MAX);
    assert_true(ELEMENT(i64, CLRUN_I64, -1e19) == INT64_MIN);
    assert_true(ELEMENT(u64, CLRUN_U64, 1e20) == UINT64_MAX);
    assert_true(ELEMENT(u64, CLRUN_U64, 9223372036854775808.0) == (uint64_t)1 << 63);
    assert_int_equal(ELEMENT(u64, CLRUN_U64, -5), 0);
    assert_int_equal(ELEMENT(i8, CLRUN_I8, -200), -128);
    assert_int_equal(ELEMENT(u8, CLRUN_U8, 300), 255);
    assert_int_equal(ELEMENT(u8, CLRUN_U8, 7.9), 7);
    assert_int_equal(ELEMENT(i16, CLRUN_I16, -32768), -32768);
    assert_int_equal(ELEMENT(u16, CLRUN_U16, 65535), 65535);
    assert_int_equal(ELEMENT(u32, CLRUN_U32, 4294967295.0), 4294967295u);
    assert_int_equal(ELEMENT(u8, CLRUN_BOOL, 0), 0);
    assert_int_equal(ELEMENT(u8, CLRUN_BOOL, -0.5), 1);
    assert_true(out.u64 == 1); /* one byte written, no more */
#undef ELEMENT

    assert_true(clrun__dtype_holds(CLRUN_F64, 0.1) && clrun__dtype_holds(CLRUN_F32, 0.5));
    assert_false(clrun__dtype_holds(CLRUN_F32, 0.1));
    assert_true(clrun__dtype_holds(CLRUN_F32, NAN) && clrun__dtype_holds(CLRUN_F16, INFINITY));
    assert_true(clrun__dtype_holds(CLRUN_F16, 65504.0));
    assert_true(clrun__dtype_holds(CLRUN_BF16, 65536.0 * 65536.0) && clrun__dtype_holds(CLRUN_BF16, 1.0078125));
    assert_false(clrun__dtype_holds(CLRUN_BF16, 1.00390625) || clrun__dtype_holds(CLRUN_BF16, 0.1));
    assert_false(clrun__dtype_holds(CLRUN_F16, 65505.0) || clrun__dtype_holds(CLRUN_F16, 1e-9));
    assert_true(clrun__dtype_holds(CLRUN_I8, -128) && clrun__dtype_holds(CLRUN_U8, 255));
    assert_false(clrun__dtype_holds(CLRUN_I8, 128) || clrun__dtype_holds(CLRUN_U8, -1));
    assert_false(clrun__dtype_holds(CLRUN_I32, 1.5) || clrun__dtype_holds(CLRUN_I32, NAN));
    assert_true(clrun__dtype_holds(CLRUN_I64, -9223372036854775808.0));
    assert_false(clrun__dtype_holds(CLRUN_I64, 9223372036854775808.0));
    assert_true(clrun__dtype_holds(CLRUN_U64, 18446744073709549568.0)); /* 2^64 - 2048 */
    assert_false(clrun__dtype_holds(CLRUN_U64, 18446744073709551616.0));
    assert_true(clrun__dtype_holds(CLRUN_BOOL, 1) && !clrun__dtype_holds(CLRUN_BOOL, 2));
    assert_false(clrun__dtype_holds((clrun_dtype)99, 0));
}

/* Narrow weights: which are narrowed (a product's weight read by nothing else), how (int8 with
 * one scale per output channel, on the axis each product means), and where the widening goes
 * (right before the first reader, so the graph stays in order). */
static void narrows_product_weights_only(void **state)
{
    (void)state;
    clrun_graph *g = new_graph();
    const float w[2 * 3] = {1.0f, -2.0f, 0.5f, /* columns: max 4, 2, 0.5 */
                            -4.0f, 1.0f, 0.25f};
    const float b[3 * 2] = {3.0f, -1.5f, 0.0f, 0.0f, 1.0f, 1.0f}; /* rows: max 3, 0, 1 */
    clrun_tensor_type wt = F32(2, 3), bt = F32(3, 2), xt = F32(4, 2);
    int32_t x, wi, bi, shared, m, m2, gm, y;
    assert_int_equal(clrun_graph_add_input(g, "x", &xt, false, &x), CLRUN_OK);
    assert_int_equal(clrun_graph_add_constant(g, "w", &wt, w, CLRUN_FILL_ZEROS, 0, 0, 0, &wi), CLRUN_OK);
    assert_int_equal(clrun_graph_add_constant(g, "b", &bt, b, CLRUN_FILL_ZEROS, 0, 0, 0, &bi), CLRUN_OK);
    clrun_tensor_type st = F32(4, 3);
    assert_int_equal(clrun_graph_add_constant(g, "shared", &wt, w, CLRUN_FILL_ZEROS, 0, 0, 0, &shared), CLRUN_OK);
    const char *mn[] = {"m"}, *m2n[] = {"m2"}, *gn[] = {"g"}, *yn[] = {"y"};
    assert_int_equal(clrun_graph_add_node(g, "matmul", (int32_t[]){x, wi}, 2, mn, 1, NULL, 0, &m), CLRUN_OK);
    assert_int_equal(clrun_graph_add_node(g, "matmul", (int32_t[]){x, shared}, 2, m2n, 1, NULL, 0, &m2), CLRUN_OK);
    clrun_attr tb = {.name = "transpose_b", .kind = CLRUN_ATTR_INT, .i = 1};
    assert_int_equal(clrun_graph_add_node(g, "matmul", (int32_t[]){x, bi}, 2, gn, 1, &tb, 1, &gm), CLRUN_OK);
    (void)st;
    int32_t sum;
    const char *sn[] = {"sum"};
    assert_int_equal(clrun_graph_add_node(g, "add", (int32_t[]){m, gm}, 2, sn, 1, NULL, 0, &sum), CLRUN_OK);
    assert_int_equal(clrun_graph_add_node(g, "add", (int32_t[]){sum, m2}, 2, yn, 1, NULL, 0, &y), CLRUN_OK);
    int32_t z;
    const char *zn[] = {"z"}; /* shared is read as a weight and otherwise: kept */
    assert_int_equal(clrun_graph_add_node(g, "add", (int32_t[]){shared, shared}, 2, zn, 1, NULL, 0, &z), CLRUN_OK);
    clrun_graph_mark_output(g, y);
    clrun_graph_mark_output(g, z);

    int32_t nodes = clrun_graph_node_count(g);
    clrun_weights_report r;
    assert_int_equal(clrun_graph_narrow_weights(g, CLRUN_F64, 0, &r), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(clrun_graph_node_count(g), nodes);
    assert_int_equal(clrun_graph_narrow_weights(g, CLRUN_I8, 7, &r), CLRUN_OK); /* 6 < 7: none */
    assert_int_equal(r.narrowed, 0);
    assert_int_equal(clrun_graph_narrow_weights(g, CLRUN_I8, 0, &r), CLRUN_OK);
    assert_int_equal(r.narrowed, 2);
    assert_int_equal(r.kept, 1);
    assert_int_equal(r.bytes_before, 2 * 24);
    assert_int_equal(r.bytes_after, 2 * (6 + 12));
    assert_int_equal(clrun_graph_node_count(g), nodes); /* the products read them narrow */
    assert_int_equal(clrun_graph_validate(g), CLRUN_OK);
    for (int32_t n = 0; n < g->node_count; n++) /* in order: every input made before its reader */
        for (int i = 0; i < g->nodes[n].input_count; i++)
            assert_true(g->tensors[g->nodes[n].inputs[i]].producer < n);

    const clrun__tensor *wq = &g->tensors[clrun__graph_find_ident(g, "w.i8")];
    const clrun__tensor *ws = &g->tensors[clrun__graph_find_ident(g, "w.scale")];
    const int8_t wq_expect[6] = {32, -127, 127, -127, 64, 64};
    assert_memory_equal(wq->data, wq_expect, 6);
    assert_int_equal(ws->type.rank, 1);
    assert_true(((float *)ws->data)[0] == 4.0f / 127 && ((float *)ws->data)[2] == 0.5f / 127);
    const clrun__tensor *bq = &g->tensors[clrun__graph_find_ident(g, "b.i8")];
    const clrun__tensor *bs = &g->tensors[clrun__graph_find_ident(g, "b.scale")];
    const int8_t bq_expect[6] = {127, -64, 0, 0, 127, 127}; /* a zero row: scale 1, zeros */
    assert_memory_equal(bq->data, bq_expect, 6);
    assert_int_equal(bs->type.rank, 1); /* [3]: a transposed b has its channels in rows */
    assert_int_equal(bs->type.shape[0], 3);
    assert_true(((float *)bs->data)[1] == 1.0f);
    /* the products read the narrow weights and their scales (dequant 1); the shared one is
     * untouched */
    const clrun__node *mm = &g->nodes[g->tensors[m].producer];
    assert_int_equal(mm->input_count, 3);
    assert_int_equal(mm->inputs[1], clrun__graph_find_ident(g, "w.i8"));
    assert_int_equal(mm->inputs[2], clrun__graph_find_ident(g, "w.scale"));
    assert_string_equal(mm->attrs[mm->attr_count - 1].name, "dequant");
    assert_int_equal(mm->attrs[mm->attr_count - 1].i, 1);
    assert_int_equal(clrun__graph_find_ident(g, "w.widened"), -1);
    assert_int_equal(g->nodes[g->tensors[m2].producer].inputs[1], shared);
    assert_int_equal(clrun__graph_find_ident(g, "shared.i8"), -1);
    clrun_graph_destroy(g);

    /* f16: the same weights at half their bytes, one cast each; a value beyond f16 is kept */
    g = new_graph();
    float big[6] = {1, 2, 3, 4, 5, 70000};
    assert_int_equal(clrun_graph_add_input(g, "x", &xt, false, &x), CLRUN_OK);
    assert_int_equal(clrun_graph_add_constant(g, "w", &wt, w, CLRUN_FILL_ZEROS, 0, 0, 0, &wi), CLRUN_OK);
    assert_int_equal(clrun_graph_add_constant(g, "big", &wt, big, CLRUN_FILL_ZEROS, 0, 0, 0, &bi), CLRUN_OK);
    assert_int_equal(clrun_graph_add_node(g, "matmul", (int32_t[]){x, wi}, 2, mn, 1, NULL, 0, &m), CLRUN_OK);
    assert_int_equal(clrun_graph_add_node(g, "matmul", (int32_t[]){x, bi}, 2, m2n, 1, NULL, 0, &m2), CLRUN_OK);
    assert_int_equal(clrun_graph_add_node(g, "add", (int32_t[]){m, m2}, 2, yn, 1, NULL, 0, &y), CLRUN_OK);
    clrun_graph_mark_output(g, y);
    assert_int_equal(clrun_graph_narrow_weights(g, CLRUN_F16, 0, &r), CLRUN_OK);
    assert_int_equal(r.narrowed, 1);
    assert_int_equal(r.kept, 1);
    assert_int_equal(r.bytes_after, 12);
    const clrun__tensor *wh = &g->tensors[clrun__graph_find_ident(g, "w.f16")];
    assert_int_equal(((uint16_t *)wh->data)[0], 0x3c00);
    assert_int_equal(clrun_graph_validate(g), CLRUN_OK);
    clrun_graph_destroy(g);

    /* bf16: f32's range, so 70000 narrows too (to 70144, the nearest bf16), a cast each */
    g = new_graph();
    assert_int_equal(clrun_graph_add_input(g, "x", &xt, false, &x), CLRUN_OK);
    assert_int_equal(clrun_graph_add_constant(g, "w", &wt, w, CLRUN_FILL_ZEROS, 0, 0, 0, &wi), CLRUN_OK);
    assert_int_equal(clrun_graph_add_constant(g, "big", &wt, big, CLRUN_FILL_ZEROS, 0, 0, 0, &bi), CLRUN_OK);
    assert_int_equal(clrun_graph_add_node(g, "matmul", (int32_t[]){x, wi}, 2, mn, 1, NULL, 0, &m), CLRUN_OK);
    assert_int_equal(clrun_graph_add_node(g, "matmul", (int32_t[]){x, bi}, 2, m2n, 1, NULL, 0, &m2), CLRUN_OK);
    assert_int_equal(clrun_graph_add_node(g, "add", (int32_t[]){m, m2}, 2, yn, 1, NULL, 0, &y), CLRUN_OK);
    clrun_graph_mark_output(g, y);
    assert_int_equal(clrun_graph_narrow_weights(g, CLRUN_BF16, 0, &r), CLRUN_OK);
    assert_int_equal(r.narrowed, 2);
    assert_int_equal(r.kept, 0);
    assert_int_equal(r.bytes_after, 24);
    const clrun__tensor *wb = &g->tensors[clrun__graph_find_ident(g, "big.bf16")];
    assert_int_equal(wb->type.dtype, CLRUN_BF16);
    assert_int_equal(((uint16_t *)wb->data)[0], 0x3f80);
    assert_true(clrun__bf16_to_f32(((uint16_t *)wb->data)[5]) == 70144.0f);
    assert_int_equal(clrun_graph_validate(g), CLRUN_OK);
    clrun_graph_destroy(g);
}

/* bf16 from f32: round to nearest, ties to even, a carry into the exponent up to inf, every NaN
 * as the quiet NaN 0x7fc0; back exactly. */
static void bf16_rounds_to_nearest_even(void **state)
{
    (void)state;
    static const struct { uint32_t f32; uint16_t bf16; } cases[] = {
        {0x3f800000u, 0x3f80}, {0x3f808000u, 0x3f80}, /* a tie, to the even 0x3f80 */
        {0x3f818000u, 0x3f82}, /* a tie, to the even 0x3f82 */
        {0x3f808001u, 0x3f81}, {0x3f807fffu, 0x3f80}, {0xbf80c000u, 0xbf81},
        {0x7f7fffffu, 0x7f80}, /* f32's largest rounds up to inf */
        {0x7f800000u, 0x7f80}, {0xff800000u, 0xff80}, {0x7f800001u, 0x7fc0}, {0xffc12345u, 0x7fc0},
        {0x00000001u, 0x0000}, {0x00008000u, 0x0000}, {0x00018000u, 0x0002}, {0x80000000u, 0x8000},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        float f;
        memcpy(&f, &cases[i].f32, 4);
        uint16_t got = clrun__f32_to_bf16(f);
        if (got != cases[i].bf16)
            fail_msg("bf16 of 0x%08x is 0x%04x, expected 0x%04x", cases[i].f32, got, cases[i].bf16);
        float back = clrun__bf16_to_f32(cases[i].bf16);
        uint32_t bits;
        memcpy(&bits, &back, 4);
        assert_int_equal(bits, (uint32_t)cases[i].bf16 << 16);
    }
    assert_string_equal(clrun_dtype_name(CLRUN_BF16), "bf16");
    assert_int_equal(clrun_dtype_size(CLRUN_BF16), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(dtype_names_and_sizes),
        cmocka_unit_test(bf16_rounds_to_nearest_even),
        cmocka_unit_test(elements_and_bytes),
        cmocka_unit_test(sizes_that_overflow_are_zero),
        cmocka_unit_test(builds_a_small_graph_and_reads_it),
        cmocka_unit_test(finds_names_among_many),
        cmocka_unit_test(refuses_a_name_twice_and_changes_nothing),
        cmocka_unit_test(refuses_names_the_format_cannot_write),
        cmocka_unit_test(refuses_bad_types),
        cmocka_unit_test(unknown_op_is_unknown_kernel),
        cmocka_unit_test(refuses_bad_node_arguments_and_changes_nothing),
        cmocka_unit_test(op_refusal_keeps_the_ops_message),
        cmocka_unit_test(refuses_an_output_twice),
        cmocka_unit_test(refuses_fills_that_describe_nothing),
        cmocka_unit_test(constant_data_is_copied),
        cmocka_unit_test(validate_refuses_no_outputs),
        cmocka_unit_test(validate_finds_a_cycle),
        cmocka_unit_test(validate_finds_a_tensor_produced_twice),
        cmocka_unit_test(validate_finds_an_output_never_produced),
        cmocka_unit_test(validate_finds_a_read_of_a_tensor_nobody_produces),
        cmocka_unit_test(validate_finds_a_node_reading_an_unknown_tensor),
        cmocka_unit_test(validate_finds_a_stored_type_the_op_does_not_give),
        cmocka_unit_test(parses_every_statement),
        cmocka_unit_test(accepts_crlf_no_final_newline_and_blank_lines),
        cmocka_unit_test(uses_names_declared_further_down),
        cmocka_unit_test(reads_several_outputs_of_a_node),
        cmocka_unit_test(checks_annotations),
        cmocka_unit_test(reads_scalars_and_every_dtype),
        cmocka_unit_test(keeps_attribute_kinds_and_bits),
        cmocka_unit_test(wide_and_bool_data_round_trip),
        cmocka_unit_test(seeds_above_int64_read_back),
        cmocka_unit_test(writes_the_documented_text),
        cmocka_unit_test(writes_bits_for_values_without_decimals),
        cmocka_unit_test(load_reports_a_missing_file),
        cmocka_unit_test(small_error_buffers_are_terminated),
        cmocka_unit_test(reports_statement_errors_at_their_place),
        cmocka_unit_test(malformed_corpus_gives_the_expected_messages),
        cmocka_unit_test(example_graphs_parse_validate_and_round_trip),
        cmocka_unit_test(generated_models_validate_and_round_trip),
        cmocka_unit_test(generated_models_have_their_true_shapes),
        cmocka_unit_test(random_builder_graphs_round_trip),
        cmocka_unit_test(fill_gives_known_bits_for_a_fixed_seed),
        cmocka_unit_test(fill_of_an_element_does_not_depend_on_the_size),
        cmocka_unit_test(fill_has_the_asked_distribution),
        cmocka_unit_test(converts_floats_to_halves_exactly),
        cmocka_unit_test(converts_doubles_to_every_dtype),
        cmocka_unit_test(narrows_product_weights_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
