/* Hostile attribute and shape values in ONNX models: each either gets a clear refusal that names
 * what is wrong, or the answer ONNX defines (numpy's slicing, np.triu/np.tril, np.clip), on both
 * the device path (x a graph input, run on the OpenCL device) and the host path (x an
 * initializer, folded at load). Extreme values such as INT64_MAX steps, 2^32 block sizes and
 * repeats whose product wraps used to crash (SIGFPE), wrap into wrong results or into wrong
 * refusals; under the sanitizer build (UBSan) any overflow left aborts this test. Models are
 * built in C (tests/onnx_builder.h). */
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
#include "graph/graph.h"
#include "onnx_builder.h"

enum { F32 = 1, F16 = 10, I64 = 7 };

static char cache_root[4096];
static clrun_context *ctx;

typedef ob_loaded loaded;

static loaded load(onnx_builder *b)
{
    return ob_load(b, NULL);
}

/* The model loads with `status` and a message holding `message`; b is freed. */
static void expect_refusal(onnx_builder *b, clrun_status status, const char *message)
{
    loaded r = load(b);
    if (r.status != status || strstr(r.err, message) == NULL)
        fail_msg("expected %s with \"%s\", got %s: %s", clrun_status_name(status), message,
                 clrun_status_name(r.status), r.err);
    assert_null(r.graph);
    ob_free(b);
}

/* Loads b (freed), feeds x (count floats) to its one input when it has one, and compares its
 * one f32 output with want[0..want_count): on the device when anything is left to run, else
 * the constant folded at load. */
static void expect_output(onnx_builder *b, const float *x, size_t count, const float *want, size_t want_count)
{
    loaded r = load(b);
    ob_free(b);
    if (r.status != CLRUN_OK)
        fail_msg("load: %s: %s", clrun_status_name(r.status), r.err);
    const clrun_tensor_id *ins, *outs;
    int32_t n_in = clrun_graph_inputs(r.graph, &ins);
    assert_int_equal(clrun_graph_outputs(r.graph, &outs), 1);
    const clrun_tensor_type *t = clrun_graph_tensor_type(r.graph, outs[0]);
    assert_int_equal(t->dtype, CLRUN_F32);
    uint64_t bytes = clrun_tensor_bytes(t);
    if (bytes != want_count * sizeof(float))
        fail_msg("output has %llu elements, expected %zu", (unsigned long long)(bytes / 4), want_count);
    float *got = malloc((size_t)bytes);
    assert_non_null(got);
    const clrun__tensor *out = &r.graph->tensors[outs[0]];
    if (out->kind == CLRUN__TENSOR_CONSTANT) {
        clrun__constant_values(out, got);
    } else {
        if (ctx == NULL && clrun_context_create(NULL, &ctx) != CLRUN_OK)
            fail_msg("no OpenCL device: %s", clrun_last_error(NULL));
        clrun_exec *exec = NULL;
        if (clrun_exec_create(ctx, r.graph, NULL, &exec) != CLRUN_OK)
            fail_msg("exec_create: %s", clrun_last_error(ctx));
        clrun_buffer in;
        assert_int_equal(n_in, 1);
        assert_int_equal(clrun_tensor_bytes(clrun_graph_tensor_type(r.graph, ins[0])), count * sizeof(float));
        assert_int_equal(clrun_alloc_ex(ctx, count * sizeof(float), 0, "x", &in), CLRUN_OK);
        assert_int_equal(clrun_buffer_write(ctx, &in, x), CLRUN_OK);
        if (clrun_exec_run(exec, &in, 1) != CLRUN_OK)
            fail_msg("run: %s", clrun_last_error(ctx));
        assert_int_equal(clrun_exec_read_output(exec, 0, got, bytes), CLRUN_OK);
        clrun_exec_destroy(exec);
        assert_int_equal(clrun_free(ctx, &in), CLRUN_OK);
    }
    for (size_t i = 0; i < want_count; i++)
        if (!(got[i] == want[i] || (isnan(got[i]) && isnan(want[i]))))
            fail_msg("element %zu is %g, expected %g", i, (double)got[i], (double)want[i]);
    free(got);
    clrun_graph_destroy(r.graph);
}

/* A model with x (f32, dims) as its input (device) or an initializer holding data (host). */
static void with_x(onnx_builder *b, int64_t opset, bool on_host, int rank, const int64_t *dims, const float *data,
                   size_t count)
{
    ob_init(b, opset);
    if (on_host)
        ob_initializer(b, "x", F32, rank, dims, data, count * sizeof(float));
    else
        ob_input(b, "x", F32, rank, dims, NULL);
    ob_output(b, "y", F32, -1, NULL);
}

static void ints(onnx_builder *b, const char *name, const int64_t *v, int64_t count)
{
    ob_initializer(b, name, I64, 1, &count, v, (size_t)count * sizeof *v);
}

static const float ten[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
static const int64_t ten_dims[1] = {10};

/* ---- DepthToSpace, SpaceToDepth ---- */

static void test_depth_to_space_blocksize_whose_square_wraps_is_refused(void **state)
{
    (void)state;
    static const int64_t dims[4] = {1, 4, 2, 2};
    float x[16] = {0};
    for (int host = 0; host < 2; host++)
        for (int to_space = 0; to_space < 2; to_space++) {
            onnx_builder b;
            with_x(&b, 13, host, 4, dims, x, 16);
            Onnx__NodeProto *n = ob_node(&b, to_space ? "DepthToSpace" : "SpaceToDepth", "d", "x", "y");
            ob_attr_int(&b, n, "blocksize", (int64_t)1 << 32); /* its square is 2^64: 0 as int64 */
            expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "attribute 'blocksize' is 4294967296");
        }
}

/* ---- Slice ---- */

static void slice_model(onnx_builder *b, bool host, int64_t start, int64_t end, int64_t step)
{
    static const int64_t axis = 0;
    with_x(b, 13, host, 1, ten_dims, ten, 10);
    ints(b, "starts", &start, 1);
    ints(b, "ends", &end, 1);
    ints(b, "axes", &axis, 1);
    ints(b, "steps", &step, 1);
    ob_node(b, "Slice", "s", "x,starts,ends,axes,steps", "y");
}

/* numpy: x[0:10:2**63-1] == [0], x[0:2**63-1:2**63-1] == [0], x[-1::-(2**63-1)] == [9],
 * x[9::-2**63] == [9], x[2**63-1::-1] == x[::-1]. */
static void test_slice_with_extreme_steps_takes_what_numpy_takes(void **state)
{
    (void)state;
    static const float first[1] = {0}, last[1] = {9}, reversed[10] = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0};
    for (int host = 0; host < 2; host++) {
        onnx_builder b;
        slice_model(&b, host, 0, 10, INT64_MAX);
        expect_output(&b, ten, 10, first, 1);
        slice_model(&b, host, 0, INT64_MAX, INT64_MAX);
        expect_output(&b, ten, 10, first, 1);
        slice_model(&b, host, -1, INT64_MIN, -INT64_MAX);
        expect_output(&b, ten, 10, last, 1);
        slice_model(&b, host, 9, INT64_MIN, INT64_MIN);
        expect_output(&b, ten, 10, last, 1);
        slice_model(&b, host, INT64_MAX, INT64_MIN, -1);
        expect_output(&b, ten, 10, reversed, 10);
    }
}

/* ---- Split, Tile, Pad, Resize: sums and products that wrap ---- */

static void test_split_sizes_whose_sum_wraps_are_refused(void **state)
{
    (void)state;
    /* 4 x 2^62 + 4 wraps to 4, the axis' size */
    static const int64_t split[4] = {(int64_t)1 << 62, (int64_t)1 << 62, (int64_t)1 << 62, ((int64_t)1 << 62) + 4};
    static const int64_t four[1] = {4};
    for (int host = 0; host < 2; host++) {
        onnx_builder b;
        with_x(&b, 13, host, 1, four, ten, 4);
        ints(&b, "split", split, 4);
        ob_node(&b, "Split", "s", "x,split", "a,b,c,d");
        expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "split sizes add up to more than axis 0 of size 4");
    }
}

static void test_tile_repeats_whose_product_wraps_are_refused(void **state)
{
    (void)state;
    static const int64_t four[1] = {4}, repeats[1] = {((int64_t)1 << 62) + 1}; /* 4 x that wraps to 4 */
    for (int host = 0; host < 2; host++) {
        onnx_builder b;
        with_x(&b, 13, host, 1, four, ten, 4);
        ints(&b, "repeats", repeats, 1);
        ob_node(&b, "Tile", "t", "x,repeats", "y");
        expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED, "repeat 0 (4611686018427387905) makes axis 0 of size 4 "
                                                    "larger than 2^63 - 1");
    }
}

static void test_pads_whose_sum_wraps_are_refused(void **state)
{
    (void)state;
    static const int64_t four[1] = {4}, huge[2] = {INT64_MAX, INT64_MAX}, crop[2] = {INT64_MIN, 2};
    for (int host = 0; host < 2; host++) {
        onnx_builder b;
        with_x(&b, 13, host, 1, four, ten, 4);
        ints(&b, "pads", huge, 2);
        ob_node(&b, "Pad", "p", "x,pads", "y");
        expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED, "make axis 0 of size 4 out of the int64 range");
        with_x(&b, 13, host, 1, four, ten, 4);
        ints(&b, "pads", crop, 2);
        ob_node(&b, "Pad", "p", "x,pads", "y");
        expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "remove more than axis 0 of size 4 holds");
    }
}

static void test_resize_scale_past_int64_is_refused(void **state)
{
    (void)state;
    static const int64_t dims[2] = {1, 4}, two = 2;
    static const float scales[2] = {1, 1e30f};
    onnx_builder b;
    with_x(&b, 13, false, 2, dims, ten, 4);
    ob_initializer(&b, "scales", F32, 1, &two, scales, sizeof scales);
    ob_node(&b, "Resize", "r", "x,,scales", "y");
    expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED, "scale 1 (1e+30) makes axis 1 of size 4 larger than 2^63 - 1");
}

static void test_conv_dilation_past_int64_is_refused(void **state)
{
    (void)state;
    static const int64_t xd[4] = {1, 1, 4, 4}, wd[4] = {1, 1, 3, 3}, dil[2] = {INT64_MAX / 2, 1};
    static const float w[9] = {0};
    onnx_builder b;
    with_x(&b, 13, false, 4, xd, ten, 16);
    ob_initializer(&b, "w", F32, 4, wd, w, sizeof w);
    Onnx__NodeProto *n = ob_node(&b, "Conv", "c", "x,w", "y");
    ob_attr_ints(&b, n, "dilations", dil, 2);
    expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED, "kernel 3, dilation 4611686018427387903 and stride 1 of spatial "
                                                "axis 0 are too large");
}

/* ---- Range: integer counts exact beyond 2^53 ---- */

/* np.arange(0, 2**53 + 1, 2**53) == [0, 2**53] (a count through doubles rounds to 1); and
 * np.arange(-2**63, 2**63 - 1, 2**62) == four values, whose steps overflow int64 on the way. */
static void test_integer_range_counts_exactly(void **state)
{
    (void)state;
    static const struct { int64_t start, limit, delta; int count; int64_t want[4]; } cases[] = {
        {0, ((int64_t)1 << 53) + 1, (int64_t)1 << 53, 2, {0, (int64_t)1 << 53}},
        {INT64_MIN, INT64_MAX, (int64_t)1 << 62, 4, {INT64_MIN, -((int64_t)1 << 62), 0, (int64_t)1 << 62}},
        {INT64_MAX, INT64_MIN, INT64_MIN, 2, {INT64_MAX, -1}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        onnx_builder b;
        ob_init(&b, 13);
        ob_initializer(&b, "start", I64, 0, NULL, &cases[c].start, 8);
        ob_initializer(&b, "limit", I64, 0, NULL, &cases[c].limit, 8);
        ob_initializer(&b, "delta", I64, 0, NULL, &cases[c].delta, 8);
        ob_output(&b, "y", I64, -1, NULL);
        ob_node(&b, "Range", "r", "start,limit,delta", "y");
        loaded r = load(&b);
        ob_free(&b);
        if (r.status != CLRUN_OK)
            fail_msg("load: %s", r.err);
        const clrun_tensor_id *outs;
        assert_int_equal(clrun_graph_outputs(r.graph, &outs), 1);
        const clrun__tensor *t = &r.graph->tensors[outs[0]];
        assert_int_equal(t->kind, CLRUN__TENSOR_CONSTANT);
        assert_int_equal(t->type.rank, 1);
        assert_int_equal(t->type.shape[0], cases[c].count);
        int64_t got[4];
        clrun__constant_values(t, got);
        for (int i = 0; i < cases[c].count; i++)
            assert_true(got[i] == cases[c].want[i]);
        clrun_graph_destroy(r.graph);
    }
}

/* ---- a corpus of single-node models with one hostile attribute ---- */

static void test_hostile_attributes_are_refused_by_name(void **state)
{
    (void)state;
    static const struct {
        const char *op;
        int rank;
        int64_t dims[5];
        const char *attr;
        int count; /* 0: an int */
        int64_t values[2];
        clrun_status status;
        const char *message;
    } cases[] = {
        {"MaxPool", 4, {1, 1, 4, 4}, "kernel_shape", 2, {INT64_MAX, INT64_MAX}, CLRUN_ERROR_UNSUPPORTED,
         "kernel 9223372036854775807, dilation 1 and stride 1 of spatial axis 0 are too large"},
        {"Cast", 1, {4}, "to", 0, {((int64_t)1 << 32) + 1}, CLRUN_ERROR_INVALID_GRAPH,
         "attribute 'to' is 4294967297, not a data type"},
        {"EyeLike", 2, {2, 2}, "dtype", 0, {((int64_t)1 << 32) + 1}, CLRUN_ERROR_UNSUPPORTED,
         "EyeLike of data type 4294967297 is not supported"},
        {"SpaceToDepth", 4, {1, 4, 2, 2}, "blocksize", 0, {INT64_MIN}, CLRUN_ERROR_INVALID_GRAPH,
         "attribute 'blocksize' is -9223372036854775808: must be >= 1"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        onnx_builder b;
        with_x(&b, 13, false, cases[c].rank, cases[c].dims, NULL, 0);
        Onnx__NodeProto *n = ob_node(&b, cases[c].op, "n", "x", "y");
        if (cases[c].count)
            ob_attr_ints(&b, n, cases[c].attr, cases[c].values, (size_t)cases[c].count);
        else
            ob_attr_int(&b, n, cases[c].attr, cases[c].values[0]);
        expect_refusal(&b, cases[c].status, cases[c].message);
    }
}

/* ---- Trilu ---- */

static void trilu_model(onnx_builder *b, bool host, int64_t upper, int64_t k)
{
    static const int64_t dims[2] = {3, 3};
    static const float x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    with_x(b, 14, host, 2, dims, x, 9);
    ob_initializer(b, "k", I64, 0, NULL, &k, sizeof k);
    Onnx__NodeProto *n = ob_node(b, "Trilu", "t", "x,k", "y");
    ob_attr_int(b, n, "upper", upper);
}

/* np.triu(x, 2**63-1) is all zeros, np.tril(x, 2**63-1) is x; the reverse for -2**63. */
static void test_trilu_with_extreme_diagonals_keeps_all_or_nothing(void **state)
{
    (void)state;
    static const float x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, zeros[9] = {0};
    onnx_builder b;
    trilu_model(&b, false, 1, INT64_MAX);
    expect_output(&b, x, 9, zeros, 9);
    trilu_model(&b, false, 0, INT64_MAX);
    expect_output(&b, x, 9, x, 9);
    trilu_model(&b, false, 1, INT64_MIN);
    expect_output(&b, x, 9, x, 9);
    trilu_model(&b, false, 0, INT64_MIN);
    expect_output(&b, x, 9, zeros, 9);
}

/* ---- resize through the graph API: a scale that maps past int64 ---- */

/* Output coordinates c map to (c + 0.5) / 1e-300 - 0.5 (half_pixel): far past the axis, so each
 * takes its last element. That coordinate used to be converted to int64 unchecked (undefined; on
 * x86 INT64_MIN, so the first element). */
static void test_resize_coordinate_past_int64_takes_the_edge(void **state)
{
    (void)state;
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("resize", &g), CLRUN_OK);
    clrun_tensor_type t = {.dtype = CLRUN_F32, .rank = 2, .shape = {1, 4}};
    clrun_tensor_id x, y;
    assert_int_equal(clrun_graph_add_input(g, "x", &t, false, &x), CLRUN_OK);
    clrun_attr at[2] = {{.name = "sizes", .kind = CLRUN_ATTR_INTS, .ints = {1, 3}, .count = 2},
                        {.name = "scale1", .kind = CLRUN_ATTR_FLOAT, .f = 1e-300}};
    const char *names[1] = {"y"};
    assert_int_equal(clrun_graph_add_node(g, "resize", &x, 1, names, 1, at, 2, &y), CLRUN_OK);
    assert_int_equal(clrun_graph_mark_output(g, y), CLRUN_OK);
    if (ctx == NULL && clrun_context_create(NULL, &ctx) != CLRUN_OK)
        fail_msg("no OpenCL device: %s", clrun_last_error(NULL));
    clrun_exec *exec = NULL;
    if (clrun_exec_create(ctx, g, NULL, &exec) != CLRUN_OK)
        fail_msg("exec_create: %s", clrun_last_error(ctx));
    static const float in[4] = {1, 2, 3, 4};
    float out[3] = {0};
    clrun_buffer xb;
    assert_int_equal(clrun_alloc_ex(ctx, sizeof in, 0, "x", &xb), CLRUN_OK);
    assert_int_equal(clrun_buffer_write(ctx, &xb, in), CLRUN_OK);
    assert_int_equal(clrun_exec_run(exec, &xb, 1), CLRUN_OK);
    assert_int_equal(clrun_exec_read_output(exec, 0, out, sizeof out), CLRUN_OK);
    for (int i = 0; i < 3; i++)
        assert_true(out[i] == 4);
    clrun_exec_destroy(exec);
    assert_int_equal(clrun_free(ctx, &xb), CLRUN_OK);
    clrun_graph_destroy(g);
}

/* ---- Clip with infinite bounds ---- */

static const float wide[5] = {-1e30f, -2, 0, 3, 1e30f};
static const int64_t five[1] = {5};

static void test_clip_at_infinity_is_valid(void **state)
{
    (void)state;
    static const float lo = -1, hi = INFINITY;
    static const float want[5] = {-1, -1, 0, 3, 1e30f};
    onnx_builder b;
    with_x(&b, 13, false, 1, five, wide, 5);
    ob_initializer(&b, "lo", F32, 0, NULL, &lo, sizeof lo);
    ob_initializer(&b, "hi", F32, 0, NULL, &hi, sizeof hi);
    ob_node(&b, "Clip", "c", "x,lo,hi", "y");
    expect_output(&b, wide, 5, want, 5);
    /* the attribute form of opset 6 */
    static const float want6[5] = {-1e30f, -2, 0, 2, 2};
    with_x(&b, 6, false, 1, five, wide, 5);
    Onnx__NodeProto *n = ob_node(&b, "Clip", "c", "x", "y");
    ob_attr_float(&b, n, "min", -INFINITY);
    ob_attr_float(&b, n, "max", 2);
    expect_output(&b, wide, 5, want6, 5);
    /* a bound on the other side: every element is that infinity */
    static const float all_inf[5] = {INFINITY, INFINITY, INFINITY, INFINITY, INFINITY};
    with_x(&b, 6, false, 1, five, wide, 5);
    n = ob_node(&b, "Clip", "c", "x", "y");
    ob_attr_float(&b, n, "min", INFINITY);
    expect_output(&b, wide, 5, all_inf, 5);
}

static void test_clip_at_nan_is_refused(void **state)
{
    (void)state;
    static const float lo = -1, hi = NAN;
    onnx_builder b;
    with_x(&b, 13, false, 1, five, wide, 5);
    ob_initializer(&b, "lo", F32, 0, NULL, &lo, sizeof lo);
    ob_initializer(&b, "hi", F32, 0, NULL, &hi, sizeof hi);
    ob_node(&b, "Clip", "c", "x,lo,hi", "y");
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "max is NaN");
}

static void test_cast_to_complex64_is_refused_by_the_types_name(void **state)
{
    (void)state;
    onnx_builder b;
    with_x(&b, 13, false, 1, five, wide, 5);
    Onnx__NodeProto *n = ob_node(&b, "Cast", "c", "x", "y");
    ob_attr_int(&b, n, "to", 14);
    expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED, "cast to complex64 is not supported");
}

/* ---- messages that say what is wrong ---- */

static void test_stride_too_large_says_the_range(void **state)
{
    (void)state;
    static const int64_t xd[4] = {1, 1, 4, 4}, wd[4] = {1, 1, 1, 1}, strides[2] = {(int64_t)1 << 32, 1};
    static const float w[1] = {1};
    onnx_builder b;
    with_x(&b, 13, false, 4, xd, ten, 16);
    ob_initializer(&b, "w", F32, 4, wd, w, sizeof w);
    Onnx__NodeProto *n = ob_node(&b, "Conv", "c", "x,w", "y");
    ob_attr_ints(&b, n, "strides", strides, 2);
    expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED, "attribute 'stride' has 4294967296: must be at most 2147483647");
}

/* ConvTranspose's output extent, computed at the importer for its matmul + col2im lowering,
 * wraps no int64: strides and dilations this large are refused, by the window's own check or
 * (where the lowering declines them) by conv_transpose2d's range. */
static void test_conv_transpose_extent_past_int64_is_refused(void **state)
{
    (void)state;
    static const int64_t xd[4] = {1, 1, 4, 4}, wd[4] = {1, 1, 3, 3};
    static const int64_t huge[3][2] = {{INT64_MAX / 2, 1}, {(int64_t)1 << 40, 1}, {INT64_MAX, 1}};
    static const char *const attr[3] = {"dilations", "strides", "strides"};
    static const char *const message[3] = {"dilation 4611686018427387903 and stride 1 of spatial axis 0 are too large",
                                           "attribute 'stride' has 1099511627776: must be at most 2147483647",
                                           "dilation 1 and stride 9223372036854775807 of spatial axis 0 are too large"};
    static const float w[9] = {0};
    for (int k = 0; k < 3; k++) {
        onnx_builder b;
        with_x(&b, 13, false, 4, xd, ten, 16);
        ob_initializer(&b, "w", F32, 4, wd, w, sizeof w);
        Onnx__NodeProto *n = ob_node(&b, "ConvTranspose", "c", "x,w", "y");
        ob_attr_ints(&b, n, attr[k], huge[k], 2);
        expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED, message[k]);
    }
}

static void test_a_shape_too_large_to_fold_is_not_out_of_memory(void **state)
{
    (void)state;
    static const int64_t one = 1, two = 2, shape[2] = {(int64_t)1 << 20, (int64_t)1 << 20};
    static const float x = 1;
    onnx_builder b;
    ob_init(&b, 13);
    ob_initializer(&b, "x", F32, 1, &one, &x, sizeof x);
    ob_initializer(&b, "shape", I64, 1, &two, shape, sizeof shape);
    ob_output(&b, "y", F32, -1, NULL);
    ob_node(&b, "Expand", "e", "x,shape", "y");
    expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED, "a constant of shape [1048576, 1048576] is too large to "
                                                "compute on the host");
}

/* Softmax over a scalar (axis 0, which the axis rule takes for rank 0): the op's type rule
 * refuses it, where the importer first wrote its axis permutation at index -1 (found by
 * fuzz_onnx under UBSan). */
static void test_softmax_of_a_scalar_is_refused(void **state)
{
    (void)state;
    static const float x = 1;
    for (int log = 0; log < 2; log++) {
        onnx_builder b;
        with_x(&b, 13, false, 0, NULL, &x, 1);
        Onnx__NodeProto *n = ob_node(&b, log ? "LogSoftmax" : "Softmax", "s", "x", "y");
        ob_attr_int(&b, n, "axis", 0);
        expect_refusal(&b, CLRUN_ERROR_UNSUPPORTED,
                       log ? "logsoftmax: needs at least 1 dimension, got a scalar"
                           : "softmax: needs at least 1 dimension, got a scalar");
    }
}

static void test_an_axis_of_int64_min_is_out_of_range_not_missing(void **state)
{
    (void)state;
    onnx_builder b;
    with_x(&b, 13, false, 1, five, wide, 5);
    Onnx__NodeProto *n = ob_node(&b, "Concat", "c", "x,x", "y");
    ob_attr_int(&b, n, "axis", INT64_MIN);
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "axis -9223372036854775808 is out of range for rank 1");
}

static void test_a_duplicated_attribute_is_refused_as_such(void **state)
{
    (void)state;
    onnx_builder b;
    with_x(&b, 13, false, 1, five, wide, 5);
    Onnx__NodeProto *n = ob_node(&b, "Concat", "c", "x,x", "y");
    ob_attr_int(&b, n, "axis", 0);
    ob_attr_int(&b, n, "axis", 0);
    expect_refusal(&b, CLRUN_ERROR_INVALID_GRAPH, "attribute 'axis' is given 2 times");
}

static void test_a_domain_without_an_opset_import_is_not_opset_minus_one(void **state)
{
    (void)state;
    onnx_builder b;
    with_x(&b, 13, false, 1, five, wide, 5);
    Onnx__NodeProto *n = ob_node(&b, "Custom", "c", "x", "y");
    n->domain = ob_str(&b, "com.example");
    loaded r = load(&b);
    ob_free(&b);
    assert_int_equal(r.status, CLRUN_ERROR_UNSUPPORTED);
    if (strstr(r.err, "opset -1") || !strstr(r.err, "(Custom, domain com.example, no opset imported)"))
        fail_msg("%s", r.err);
}

int main(void)
{
    clrun_test_device_environment(cache_root, sizeof cache_root);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_depth_to_space_blocksize_whose_square_wraps_is_refused),
        cmocka_unit_test(test_slice_with_extreme_steps_takes_what_numpy_takes),
        cmocka_unit_test(test_split_sizes_whose_sum_wraps_are_refused),
        cmocka_unit_test(test_tile_repeats_whose_product_wraps_are_refused),
        cmocka_unit_test(test_pads_whose_sum_wraps_are_refused),
        cmocka_unit_test(test_resize_scale_past_int64_is_refused),
        cmocka_unit_test(test_conv_dilation_past_int64_is_refused),
        cmocka_unit_test(test_integer_range_counts_exactly),
        cmocka_unit_test(test_hostile_attributes_are_refused_by_name),
        cmocka_unit_test(test_trilu_with_extreme_diagonals_keeps_all_or_nothing),
        cmocka_unit_test(test_resize_coordinate_past_int64_takes_the_edge),
        cmocka_unit_test(test_clip_at_infinity_is_valid),
        cmocka_unit_test(test_clip_at_nan_is_refused),
        cmocka_unit_test(test_cast_to_complex64_is_refused_by_the_types_name),
        cmocka_unit_test(test_stride_too_large_says_the_range),
        cmocka_unit_test(test_conv_transpose_extent_past_int64_is_refused),
        cmocka_unit_test(test_a_shape_too_large_to_fold_is_not_out_of_memory),
        cmocka_unit_test(test_softmax_of_a_scalar_is_refused),
        cmocka_unit_test(test_an_axis_of_int64_min_is_out_of_range_not_missing),
        cmocka_unit_test(test_a_duplicated_attribute_is_refused_as_such),
        cmocka_unit_test(test_a_domain_without_an_opset_import_is_not_opset_minus_one),
    };
    CLRUN_TEST_FILTERS_FROM_ENVIRONMENT();
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    if (ctx)
        clrun_context_destroy(ctx);
    clrun_test_remove_dir(cache_root);
    return failed;
}
