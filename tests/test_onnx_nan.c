/* NaN and signed zeros in the ONNX ops that pick a value (Relu, Max, Min, Clip, LeakyRelu) mean
 * the same wherever the op runs: on the device, fused or unfused, and folded on the host at load
 * when its inputs are constants. The semantics are ONNX's as onnxruntime has them: a NaN operand
 * gives NaN, Relu(-3) is +0 and Relu(-0) -0, of two equal operands Max and Min give the second.
 * Models are built in C (tests/onnx_builder.h). */
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

enum { F32 = 1 };
#define N 6
#define CANONICAL_NAN 0x7fc00000u

static char cache_dir[512];
static clrun_context *ctx;

/* x and y as floats, NaN in x given by its bits (nan_bits). */
static const float x_values[N] = {0.0f /* NaN */, -3.0f, 2.0f, -0.0f, 1.0f, -INFINITY};
static const float y_values[N] = {1.0f, NAN, NAN, 0.0f, 1.0f, 5.0f};

/* What ONNX gives for those, output by output of the device model below. */
enum { OUT_RELU, OUT_MAX, OUT_MIN, OUT_CLIP, OUT_LEAKY, OUT_CHAIN, OUT_COUNT };
static const float expected[OUT_COUNT][N] = {
    [OUT_RELU] = {NAN, 0.0f, 2.0f, -0.0f, 1.0f, 0.0f},
    [OUT_MAX] = {NAN, NAN, NAN, 0.0f, 1.0f, 5.0f},
    [OUT_MIN] = {NAN, NAN, NAN, 0.0f, 1.0f, -INFINITY},
    [OUT_CLIP] = {NAN, -1.0f, 1.0f, -0.0f, 1.0f, -1.0f},
    [OUT_LEAKY] = {NAN, -0.75f, 2.0f, -0.0f, 1.0f, -INFINITY},
    /* LeakyRelu(Min(Max(Relu(y), x), x)): one fused group */
    [OUT_CHAIN] = {NAN, NAN, NAN, -0.0f, 1.0f, -INFINITY},
};

static void fill_x(float *x, uint32_t nan_bits)
{
    memcpy(x, x_values, sizeof x_values);
    memcpy(&x[0], &nan_bits, 4);
}

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* f is what ONNX says: NaN for NaN, else the same value with the same sign. */
static bool onnx_equal(float got, float want)
{
    if (isnan(want))
        return isnan(got);
    return got == want && !signbit(got) == !signbit(want);
}

/* The model: x and y inputs, or (constants) both initializers holding x (NaN bits nan_bits)
 * and y. With constants only Relu, Max and Min are in it: the host folds them all at load. */
static clrun_graph *load_model(bool constants, uint32_t nan_bits)
{
    static const int64_t dims[1] = {N};
    static const float lo = -1.0f, hi = 1.0f;
    onnx_builder b;
    ob_init(&b, 13);
    float x[N];
    fill_x(x, nan_bits);
    if (constants) {
        ob_initializer(&b, "x", F32, 1, dims, x, sizeof x);
        ob_initializer(&b, "y", F32, 1, dims, y_values, sizeof y_values);
    } else {
        ob_input(&b, "x", F32, 1, dims, NULL);
        ob_input(&b, "y", F32, 1, dims, NULL);
    }
    ob_node(&b, "Relu", "relu", "x", "relu");
    ob_node(&b, "Max", "max", "x,y", "max");
    ob_node(&b, "Min", "min", "x,y", "min");
    ob_output(&b, "relu", F32, 1, dims);
    ob_output(&b, "max", F32, 1, dims);
    ob_output(&b, "min", F32, 1, dims);
    if (!constants) {
        ob_initializer(&b, "lo", F32, 0, NULL, &lo, 4);
        ob_initializer(&b, "hi", F32, 0, NULL, &hi, 4);
        ob_node(&b, "Clip", "clip", "x,lo,hi", "clip");
        ob_attr_float(&b, ob_node(&b, "LeakyRelu", "leaky", "x", "leaky"), "alpha", 0.25f);
        ob_node(&b, "Relu", "relu_y", "y", "ry");
        ob_node(&b, "Max", "max_x", "ry,x", "m2");
        ob_node(&b, "Min", "min_x", "m2,x", "m3");
        ob_attr_float(&b, ob_node(&b, "LeakyRelu", "leaky_chain", "m3", "chain"), "alpha", 0.5f);
        ob_output(&b, "clip", F32, 1, dims);
        ob_output(&b, "leaky", F32, 1, dims);
        ob_output(&b, "chain", F32, 1, dims);
    }
    size_t size;
    uint8_t *bytes = ob_pack(&b, &size);
    char err[1024] = "";
    clrun_onnx_options o;
    clrun_onnx_options_init(&o);
    o.err = err;
    o.errlen = sizeof err;
    clrun_graph *g = NULL;
    clrun_status s = clrun_graph_load_onnx_memory(bytes, size, "nan.onnx", &o, &g);
    free(bytes);
    ob_free(&b);
    if (s != CLRUN_OK)
        fail_msg("loading: %s", err);
    return g;
}

/* Runs g (fusion 1 on, -1 off) on x (NaN bits nan_bits) and y, reading every output into
 * out[k][0..N). *fused gets the executor's fused groups. */
static void run_model(const clrun_graph *g, int fusion, uint32_t nan_bits, float out[][N], int *fused)
{
    clrun_exec_options o;
    clrun_exec_options_init(&o);
    o.fusion = fusion;
    clrun_exec *exec;
    if (clrun_exec_create(ctx, g, &o, &exec) != CLRUN_OK)
        fail_msg("exec_create: %s", clrun_last_error(ctx));
    const clrun_tensor_id *ins;
    int32_t n_in = clrun_graph_inputs(g, &ins);
    clrun_buffer buffers[2];
    float x[N];
    fill_x(x, nan_bits);
    for (int32_t i = 0; i < n_in; i++) {
        assert_int_equal(clrun_alloc(ctx, sizeof x, &buffers[i]), CLRUN_OK);
        assert_int_equal(clrun_buffer_write(ctx, &buffers[i], i == 0 ? (const void *)x : y_values), CLRUN_OK);
    }
    if (clrun_exec_run(exec, buffers, n_in) != CLRUN_OK)
        fail_msg("run: %s", clrun_last_error(ctx));
    const clrun_tensor_id *outs;
    int32_t n_out = clrun_graph_outputs(g, &outs);
    for (int32_t k = 0; k < n_out; k++)
        assert_int_equal(clrun_exec_read_output(exec, k, out[k], sizeof out[k]), CLRUN_OK);
    clrun_exec_stats stats;
    assert_int_equal(clrun_exec_stats_get(exec, &stats), CLRUN_OK);
    *fused = stats.fused_groups;
    clrun_exec_destroy(exec);
    for (int32_t i = 0; i < n_in; i++)
        assert_int_equal(clrun_free(ctx, &buffers[i]), CLRUN_OK);
}

static void check_onnx(const char *where, float got[][N], int outputs)
{
    static const char *const names[OUT_COUNT] = {"Relu", "Max", "Min", "Clip", "LeakyRelu", "chain"};
    for (int k = 0; k < outputs; k++)
        for (int i = 0; i < N; i++)
            if (!onnx_equal(got[k][i], expected[k][i]))
                fail_msg("%s: %s element %d is %g (0x%08x), ONNX says %g", where, names[k], i,
                         (double)got[k][i], bits_of(got[k][i]), (double)expected[k][i]);
}

static void device_fused_and_unfused_follow_onnx(void **state)
{
    (void)state;
    clrun_graph *g = load_model(false, CANONICAL_NAN);
    float unfused[OUT_COUNT][N], fused[OUT_COUNT][N];
    int groups_off, groups_on;
    run_model(g, -1, CANONICAL_NAN, unfused, &groups_off);
    run_model(g, 1, CANONICAL_NAN, fused, &groups_on);
    assert_int_equal(groups_off, 0);
    assert_true(groups_on > 0); /* the chain at least is one generated kernel */
    check_onnx("unfused", unfused, OUT_COUNT);
    check_onnx("fused", fused, OUT_COUNT);
    assert_memory_equal(unfused, fused, sizeof fused);
    clrun_graph_destroy(g);
}

/* A NaN of another sign and payload in, the same bits out, fused or not (every float store
 * makes a NaN the default quiet NaN). */
static void fused_and_unfused_keep_the_same_bits_for_any_nan(void **state)
{
    (void)state;
    const uint32_t nans[] = {0xffc00000u, 0x7fa00001u, 0xff800123u};
    clrun_graph *g = load_model(false, CANONICAL_NAN);
    for (size_t k = 0; k < sizeof nans / sizeof nans[0]; k++) {
        float unfused[OUT_COUNT][N], fused[OUT_COUNT][N];
        int groups;
        run_model(g, -1, nans[k], unfused, &groups);
        run_model(g, 1, nans[k], fused, &groups);
        check_onnx("unfused, another NaN", unfused, OUT_COUNT);
        assert_memory_equal(unfused, fused, sizeof fused);
        for (int o = 0; o < OUT_COUNT; o++)
            assert_int_equal(bits_of(fused[o][0]), CANONICAL_NAN);
    }
    clrun_graph_destroy(g);
}

/* Relu, Max and Min of constants fold on the host at load; they give what the device gives. */
static void host_folding_gives_the_device_bits(void **state)
{
    (void)state;
    clrun_graph *folded = load_model(true, CANONICAL_NAN);
    assert_int_equal(clrun_graph_node_count(folded), 0); /* all three folded at load */
    float host[3][N], device[OUT_COUNT][N];
    int groups;
    run_model(folded, -1, CANONICAL_NAN, host, &groups);
    check_onnx("folded on the host", host, 3);
    clrun_graph *g = load_model(false, CANONICAL_NAN);
    run_model(g, -1, CANONICAL_NAN, device, &groups);
    assert_memory_equal(host, device, sizeof host);
    clrun_graph_destroy(folded);
    clrun_graph_destroy(g);
}

static int setup(void **state)
{
    (void)state;
    clrun_context_options o;
    clrun_context_options_init(&o);
    o.allocator = "tlsf";
    if (clrun_context_create(&o, &ctx) != CLRUN_OK) {
        fprintf(stderr, "no context: %s\n", clrun_last_error(NULL));
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    clrun_context_destroy(ctx);
    return 0;
}

int main(void)
{
    clrun_test_device_environment(cache_dir, sizeof cache_dir);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(device_fused_and_unfused_follow_onnx),
        cmocka_unit_test(fused_and_unfused_keep_the_same_bits_for_any_nan),
        cmocka_unit_test(host_folding_gives_the_device_bits),
    };
    CLRUN_TEST_FILTERS_FROM_ENVIRONMENT();
    int failed = cmocka_run_group_tests(tests, setup, teardown);
    clrun_test_remove_dir(cache_dir);
    return failed;
}
