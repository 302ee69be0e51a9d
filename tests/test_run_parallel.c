/* Tests of data-parallel inference over several devices of one process (clrun/run_parallel.h),
 * on POCL's two CPU devices (POCL_DEVICES="pthread pthread", set here before the first OpenCL
 * call): an MLP and a small convolutional net at a global batch of 32, over 2 devices (16 + 16
 * rows) and 3 shares (11 + 11 + 10 rows on devices 0, 1, 0), give the bits one executor gives at
 * batch 32 on one device, in several allocator modes, fusion on and off; an input without the
 * batch dimension goes whole to every device; bad requests are refused with reasons, and a device
 * that fails mid-run fails the run naming it, without a hang or a leak. Skipped (77) with fewer
 * than two devices. CLRUN_TEST_ROUNDS (low) runs fewer mode cases (the MLP 4, the conv net 2). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <clrun/context.h>
#include <clrun/exec.h>
#include <clrun/graph.h>
#include <clrun/memory.h>
#include <clrun/memory_stats.h>
#include <clrun/run_parallel.h>

#include "../bench/models.h"
#include "device_test.h"
#include "exec/run_parallel_internal.h"

#define BATCH 32

/* The models: bench/models.c's builders at `rows` rows. */
static clrun_graph *model(const char *kind, int64_t rows)
{
    char config[160], err[512];
    if (strcmp(kind, "mlp") == 0)
        snprintf(config, sizeof config, "mlp batch=%lld in=64 hidden=48 depth=2 classes=10",
                 (long long)rows);
    else
        snprintf(config, sizeof config, "resnet18 batch=%lld image=8 width=4 classes=10",
                 (long long)rows);
    clrun_graph *g = bench_build_model(config, err, sizeof err);
    if (g == NULL)
        fail_msg("%s: %s", config, err);
    return g;
}

/* Output 0 of one executor on device 0 at the global batch (default options). */
static void one_device(const clrun_graph *g, const void *x, uint64_t x_bytes, void *y,
                       uint64_t y_bytes)
{
    clrun_context_options co;
    clrun_context_options_init(&co);
    co.device = "0";
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(&co, &ctx), CLRUN_OK);
    clrun_exec *exec = NULL;
    if (clrun_exec_create(ctx, g, NULL, &exec) != CLRUN_OK)
        fail_msg("%s", clrun_last_error(ctx));
    clrun_buffer in;
    assert_int_equal(clrun_alloc(ctx, x_bytes, &in), CLRUN_OK);
    assert_int_equal(clrun_buffer_write(ctx, &in, x), CLRUN_OK);
    if (clrun_exec_run(exec, &in, 1) != CLRUN_OK)
        fail_msg("%s", clrun_last_error(ctx));
    assert_int_equal(clrun_exec_read_output(exec, 0, y, y_bytes), CLRUN_OK);
    clrun_free(ctx, &in);
    clrun_exec_destroy(exec);
    clrun_context_destroy(ctx);
}

typedef struct layout {
    int32_t count;
    unsigned devices[3];
    int64_t rows[3];
} layout;

static const layout layouts[] = {
    {2, {0, 1, 0}, {16, 16, 0}},
    {3, {0, 1, 0}, {11, 11, 10}},
};

/* The mode cases: an allocator (executor mode) and fusion on or off. */
static const struct {
    const char *allocator;
    int fusion;
} modes[] = {
    {"tlsf", 1}, {"planned", -1}, {"naive", 1}, {"buddy", -1},
};

static void same_bits_as_one_device(const char *kind, int full_cases)
{
    clrun_graph *whole = model(kind, BATCH);
    const clrun_tensor_id *ids;
    clrun_graph_inputs(whole, &ids);
    uint64_t x_bytes = clrun_tensor_bytes(clrun_graph_tensor_type(whole, ids[0]));
    clrun_graph_outputs(whole, &ids);
    uint64_t y_bytes = clrun_tensor_bytes(clrun_graph_tensor_type(whole, ids[0]));
    void *x = malloc(x_bytes), *want = malloc(y_bytes), *got = malloc(y_bytes);
    assert_non_null(x);
    assert_non_null(want);
    assert_non_null(got);
    assert_int_equal(clrun_graph_example_input(whole, 0, 5, x, x_bytes), CLRUN_OK);
    one_device(whole, x, x_bytes, want, y_bytes);
    int cases = clrun_test_rounds(full_cases);
    if (cases > full_cases)
        cases = full_cases;
    for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
        const layout *lay = &layouts[l];
        clrun_graph *graphs[3] = {NULL, NULL, NULL};
        const clrun_graph *models[3];
        for (int32_t k = 0; k < lay->count; k++) /* a graph per distinct share, as the CLI */
            models[k] = k > 0 && lay->rows[k] == lay->rows[k - 1]
                            ? models[k - 1]
                            : (graphs[k] = model(kind, lay->rows[k]));
        for (int c = 0; c < cases; c++) {
            clrun_exec_options eo;
            clrun_exec_options_init(&eo);
            eo.fusion = modes[c].fusion;
            eo.plan_time_limit_s = 0; /* planned: the constructions only (seconds otherwise) */
            clrun_run_parallel_options o;
            clrun_run_parallel_options_init(&o);
            o.allocator = modes[c].allocator;
            o.exec = &eo;
            clrun_run_parallel *p = NULL;
            if (clrun_run_parallel_create(models, lay->devices, lay->count, &o, &p) != CLRUN_OK)
                fail_msg("%s", clrun_last_error(NULL));
            assert_int_equal(clrun_run_parallel_count(p), lay->count);
            assert_int_equal(clrun_run_parallel_batch(p), BATCH);
            assert_int_equal(clrun_run_parallel_input_bytes(p, 0), x_bytes);
            assert_int_equal(clrun_run_parallel_output_bytes(p, 0), y_bytes);
            const void *inputs[1] = {x};
            void *outputs[1] = {got};
            for (int run = 0; run < 2; run++) {
                memset(got, 0xff, y_bytes);
                if (clrun_run_parallel_run(p, inputs, &x_bytes, 1, outputs, &y_bytes, 1) !=
                    CLRUN_OK)
                    fail_msg("%s", clrun_last_error(NULL));
                if (memcmp(got, want, y_bytes) != 0)
                    fail_msg("%s over %d shares, %s, fusion %d, run %d: not the bits of one "
                             "device", kind, (int)lay->count, modes[c].allocator,
                             modes[c].fusion, run);
            }
            int64_t first = 0;
            for (int32_t k = 0; k < lay->count; k++) {
                clrun_run_parallel_device_info info;
                assert_int_equal(clrun_run_parallel_device_info_get(p, k, &info), CLRUN_OK);
                assert_int_equal(info.device, lay->devices[k]);
                assert_non_null(info.device_name);
                assert_int_equal(info.first_row, first);
                assert_int_equal(info.rows, lay->rows[k]);
                assert_true(info.weights_bytes > 0);
                assert_true(info.peak_bytes >= info.weights_bytes);
                assert_true(info.wall_ms > 0);
                assert_non_null(clrun_run_parallel_context(p, k));
                assert_non_null(clrun_run_parallel_exec(p, k));
                first += info.rows;
                clrun_exec_stats es;
                assert_int_equal(clrun_exec_stats_get(clrun_run_parallel_exec(p, k), &es),
                                 CLRUN_OK);
                assert_string_equal(es.allocator, modes[c].allocator);
                assert_int_equal(es.fused_groups > 0, modes[c].fusion > 0);
            }
            assert_true(clrun_run_parallel_wall_ms(p) > 0);
            assert_int_equal(clrun_run_parallel_device_info_get(p, lay->count, &(clrun_run_parallel_device_info){0}),
                             CLRUN_ERROR_INVALID_ARGUMENT);
            clrun_run_parallel_destroy(p);
        }
        for (int32_t k = 0; k < lay->count; k++)
            clrun_graph_destroy(graphs[k]);
    }
    free(x);
    free(want);
    free(got);
    clrun_graph_destroy(whole);
}

static void mlp_gives_the_bits_of_one_device(void **state)
{
    (void)state;
    clrun_test_report_fatal_signals();
    same_bits_as_one_device("mlp", 4);
}

static void conv_net_gives_the_bits_of_one_device(void **state)
{
    (void)state;
    clrun_test_report_fatal_signals();
    /* the first two cases (pooled with fusion, planned without): each costs seconds here */
    same_bits_as_one_device("resnet18", 2);
}

/* y[rows, 8] = relu(x + b): x split, b ([8], no batch dimension) whole to every device;
 * with `sum_output`, also s = b + b, an output without the batch dimension. */
static clrun_graph *biased(int64_t rows, bool sum_output, int64_t width)
{
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("biased", &g), CLRUN_OK);
    clrun_tensor_type xt = {CLRUN_F32, 2, {rows, width}}, bt = {CLRUN_F32, 1, {width}};
    clrun_tensor_id x, b, s, y;
    assert_int_equal(clrun_graph_add_input(g, "x", &xt, false, &x), CLRUN_OK);
    assert_int_equal(clrun_graph_add_input(g, "b", &bt, false, &b), CLRUN_OK);
    const char *sn[] = {"s"}, *yn[] = {"y"};
    assert_int_equal(clrun_graph_add_node(g, "add", (clrun_tensor_id[]){x, b}, 2, sn, 1, NULL, 0, &s),
                     CLRUN_OK);
    assert_int_equal(clrun_graph_add_node(g, "relu", &s, 1, yn, 1, NULL, 0, &y), CLRUN_OK);
    assert_int_equal(clrun_graph_mark_output(g, y), CLRUN_OK);
    if (sum_output) {
        const char *tn[] = {"bb"};
        clrun_tensor_id t;
        assert_int_equal(clrun_graph_add_node(g, "add", (clrun_tensor_id[]){b, b}, 2, tn, 1, NULL, 0,
                                              &t),
                         CLRUN_OK);
        assert_int_equal(clrun_graph_mark_output(g, t), CLRUN_OK);
    }
    return g;
}

static void an_input_without_the_batch_goes_to_every_device(void **state)
{
    (void)state;
    clrun_test_report_fatal_signals();
    clrun_graph *g11 = biased(11, false, 8), *g10 = biased(10, false, 8);
    const clrun_graph *models[] = {g11, g11, g10};
    unsigned devices[] = {0, 1, 0};
    clrun_run_parallel *p = NULL;
    if (clrun_run_parallel_create(models, devices, 3, NULL, &p) != CLRUN_OK)
        fail_msg("%s", clrun_last_error(NULL));
    assert_int_equal(clrun_run_parallel_input_bytes(p, 0), 32 * 8 * 4);
    assert_int_equal(clrun_run_parallel_input_bytes(p, 1), 8 * 4);
    assert_int_equal(clrun_run_parallel_input_bytes(p, 2), 0);
    float x[32 * 8], b[8], y[32 * 8];
    for (int i = 0; i < 32 * 8; i++)
        x[i] = (float)(i % 13) - 6.0f;
    for (int i = 0; i < 8; i++)
        b[i] = 0.5f * (float)i - 1.0f;
    const void *inputs[] = {x, b};
    uint64_t in_bytes[] = {sizeof x, sizeof b}, out_bytes[] = {sizeof y};
    void *outputs[] = {y};
    if (clrun_run_parallel_run(p, inputs, in_bytes, 2, outputs, out_bytes, 1) != CLRUN_OK)
        fail_msg("%s", clrun_last_error(NULL));
    for (int i = 0; i < 32 * 8; i++) {
        float s = x[i] + b[i % 8];
        assert_true(y[i] == (s > 0 ? s : 0.0f));
    }
    /* the input without the batch dimension at another size */
    in_bytes[1] = 4 * sizeof b;
    assert_int_equal(clrun_run_parallel_run(p, inputs, in_bytes, 2, outputs, out_bytes, 1),
                     CLRUN_ERROR_INVALID_SIZE);
    assert_non_null(strstr(clrun_last_error(NULL), "input 'b' (without the batch dimension"));
    clrun_run_parallel_destroy(p);
    /* an output without the batch dimension: refused at creation, by name */
    clrun_graph *s16 = biased(16, true, 8);
    const clrun_graph *two[] = {s16, s16};
    assert_int_equal(clrun_run_parallel_create(two, devices, 2, NULL, &p),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_null(p);
    if (strstr(clrun_last_error(NULL), "output 'bb' (f32[8]") == NULL ||
        strstr(clrun_last_error(NULL), "has no batch dimension") == NULL)
        fail_msg("%s", clrun_last_error(NULL));
    clrun_graph_destroy(s16);
    clrun_graph_destroy(g11);
    clrun_graph_destroy(g10);
}

static void bad_requests_are_refused_with_reasons(void **state)
{
    (void)state;
    clrun_test_report_fatal_signals();
    clrun_graph *g16 = biased(16, false, 8), *g15 = biased(15, false, 8);
    clrun_graph *w16 = biased(16, false, 4), *g0 = NULL;
    /* a model whose first input is a scalar: no rows */
    assert_int_equal(clrun_graph_create("scalar", &g0), CLRUN_OK);
    clrun_tensor_type st = {CLRUN_F32, 0, {0}};
    clrun_tensor_id sx, sy;
    const char *syn[] = {"y"};
    assert_int_equal(clrun_graph_add_input(g0, "x", &st, false, &sx), CLRUN_OK);
    assert_int_equal(clrun_graph_add_node(g0, "relu", &sx, 1, syn, 1, NULL, 0, &sy), CLRUN_OK);
    assert_int_equal(clrun_graph_mark_output(g0, sy), CLRUN_OK);
    unsigned devices[] = {0, 1, 0};
    clrun_run_parallel *p = (clrun_run_parallel *)&devices; /* set to NULL on failure */
    const clrun_graph *same[] = {g16, g16};
    assert_int_equal(clrun_run_parallel_create(same, devices, 2, NULL, NULL),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(clrun_run_parallel_create(NULL, devices, 2, NULL, &p),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_null(p);
    assert_int_equal(clrun_run_parallel_create(same, devices, 0, NULL, &p),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clrun_last_error(NULL), "0 devices: at least one is needed"));
    const clrun_graph *missing[] = {g16, NULL};
    assert_int_equal(clrun_run_parallel_create(missing, devices, 2, NULL, &p),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clrun_last_error(NULL), "no model for device 1 (share 1)"));
    /* shares other than the split's: 15 + 16 rows are 16 + 15 by the split */
    const clrun_graph *uneven[] = {g15, g16};
    assert_int_equal(clrun_run_parallel_create(uneven, devices, 2, NULL, &p),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    if (strstr(clrun_last_error(NULL), "device 0 (share 0) takes 15 rows (its first input's first "
                                       "dimension); the split of the global batch of 31 rows over 2 "
                                       "devices gives it 16 (16 + 15)") == NULL)
        fail_msg("%s", clrun_last_error(NULL));
    /* a share without a row */
    const clrun_graph *empty[] = {g16, g0};
    assert_int_equal(clrun_run_parallel_create(empty, devices, 2, NULL, &p),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clrun_last_error(NULL), "device 1 (share 1) has no input of rows"));
    /* models that differ past the rows */
    const clrun_graph *differ[] = {g16, w16};
    assert_int_equal(clrun_run_parallel_create(differ, devices, 2, NULL, &p),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    if (strstr(clrun_last_error(NULL), "input 'x' is f32[16, 4] on device 1 (share 1), f32[16, 8] "
                                       "on device 0 (share 0), past the first dimension") == NULL)
        fail_msg("%s", clrun_last_error(NULL));
    /* a device no one has */
    unsigned nowhere[] = {0, 7};
    assert_int_equal(clrun_run_parallel_create(same, nowhere, 2, NULL, &p), CLRUN_ERROR_NO_DEVICE);
    assert_null(p);
    if (strstr(clrun_last_error(NULL), "run_parallel: the context of device 7 (share 1)") == NULL)
        fail_msg("%s", clrun_last_error(NULL));

    /* bad runs, refused before anything runs */
    if (clrun_run_parallel_create(same, devices, 2, NULL, &p) != CLRUN_OK)
        fail_msg("%s", clrun_last_error(NULL));
    float x[32 * 8] = {0}, b[8] = {0}, y[32 * 8];
    const void *inputs[] = {x, b}, *no_x[] = {NULL, b};
    uint64_t in_bytes[] = {sizeof x, sizeof b}, out_bytes[] = {sizeof y};
    void *outputs[] = {y};
    assert_int_equal(clrun_run_parallel_run(NULL, inputs, in_bytes, 2, outputs, out_bytes, 1),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(clrun_run_parallel_run(p, inputs, in_bytes, 1, outputs, out_bytes, 1),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clrun_last_error(NULL), "1 inputs given, the models have 2"));
    assert_int_equal(clrun_run_parallel_run(p, NULL, in_bytes, 2, outputs, out_bytes, 1),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(clrun_run_parallel_run(p, no_x, in_bytes, 2, outputs, out_bytes, 1),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clrun_last_error(NULL), "input 'x' is NULL"));
    assert_int_equal(clrun_run_parallel_run(p, inputs, in_bytes, 2, outputs, out_bytes, 0),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    uint64_t half[] = {sizeof x / 2, sizeof b};
    assert_int_equal(clrun_run_parallel_run(p, inputs, half, 2, outputs, out_bytes, 1),
                     CLRUN_ERROR_INVALID_SIZE);
    if (strstr(clrun_last_error(NULL), "input 'x' at the global batch needs 32 rows x 32 bytes = "
                                       "1024 bytes, 512 given") == NULL)
        fail_msg("%s", clrun_last_error(NULL));
    uint64_t short_out[] = {sizeof y - 4};
    assert_int_equal(clrun_run_parallel_run(p, inputs, in_bytes, 2, outputs, short_out, 1),
                     CLRUN_ERROR_INVALID_SIZE);
    assert_non_null(strstr(clrun_last_error(NULL), "output 'y' at the global batch"));
    assert_int_equal(clrun_run_parallel_run(p, inputs, in_bytes, 2, outputs, out_bytes, 1), CLRUN_OK);
    clrun_run_parallel_destroy(p);
    clrun_run_parallel_destroy(NULL);
    assert_int_equal(clrun_run_parallel_count(NULL), 0);
    assert_int_equal(clrun_run_parallel_batch(NULL), 0);
    assert_int_equal(clrun_run_parallel_input_bytes(NULL, 0), 0);
    assert_null(clrun_run_parallel_context(NULL, 0));
    clrun_graph_destroy(g16);
    clrun_graph_destroy(g15);
    clrun_graph_destroy(w16);
    clrun_graph_destroy(g0);
}

/* A device that fails mid-run (after its inputs are on the device) fails the run, naming it and
 * its rows; the others finish, nothing hangs, every buffer of the run is given back, and the
 * runner runs again with the right bits. */
static void a_failing_device_fails_the_run_naming_it(void **state)
{
    (void)state;
    clrun_test_report_fatal_signals();
    clrun_graph *g11 = model("mlp", 11), *g10 = model("mlp", 10), *whole = model("mlp", BATCH);
    const clrun_tensor_id *ids;
    clrun_graph_inputs(whole, &ids);
    uint64_t x_bytes = clrun_tensor_bytes(clrun_graph_tensor_type(whole, ids[0]));
    clrun_graph_outputs(whole, &ids);
    uint64_t y_bytes = clrun_tensor_bytes(clrun_graph_tensor_type(whole, ids[0]));
    void *x = malloc(x_bytes), *want = malloc(y_bytes), *got = malloc(y_bytes);
    assert_int_equal(clrun_graph_example_input(whole, 0, 9, x, x_bytes), CLRUN_OK);
    one_device(whole, x, x_bytes, want, y_bytes);
    const clrun_graph *models[] = {g11, g11, g10};
    unsigned devices[] = {0, 1, 0};
    clrun_run_parallel *p = NULL;
    if (clrun_run_parallel_create(models, devices, 3, NULL, &p) != CLRUN_OK)
        fail_msg("%s", clrun_last_error(NULL));
    const void *inputs[] = {x};
    void *outputs[] = {got};
    assert_int_equal(clrun_run_parallel_run(p, inputs, &x_bytes, 1, outputs, &y_bytes, 1), CLRUN_OK);
    uint64_t in_use[3];
    for (int32_t k = 0; k < 3; k++) {
        clrun_memory_stats ms;
        assert_int_equal(clrun_memory_stats_get(clrun_run_parallel_context(p, k), &ms), CLRUN_OK);
        in_use[k] = ms.in_use;
    }
    const char *expect[] = {"run_parallel: device 0 (share 0, rows [0, 11)): injected failure",
                            "run_parallel: device 1 (share 1, rows [11, 22)): injected failure",
                            "run_parallel: device 0 (share 2, rows [22, 32)): injected failure"};
    for (int32_t f = 0; f < 3; f++) {
        clrun__run_parallel_fail_at(p, f);
        assert_int_equal(clrun_run_parallel_run(p, inputs, &x_bytes, 1, outputs, &y_bytes, 1),
                         CLRUN_ERROR_OPENCL);
        if (strcmp(clrun_last_error(NULL), expect[f]) != 0)
            fail_msg("%s", clrun_last_error(NULL));
        for (int32_t k = 0; k < 3; k++) {
            clrun_memory_stats ms;
            assert_int_equal(clrun_memory_stats_get(clrun_run_parallel_context(p, k), &ms),
                             CLRUN_OK);
            assert_int_equal(ms.in_use, in_use[k]);
        }
    }
    clrun__run_parallel_fail_at(p, -1);
    memset(got, 0, y_bytes);
    assert_int_equal(clrun_run_parallel_run(p, inputs, &x_bytes, 1, outputs, &y_bytes, 1), CLRUN_OK);
    assert_memory_equal(got, want, y_bytes);
    clrun_run_parallel_destroy(p);
    free(x);
    free(want);
    free(got);
    clrun_graph_destroy(g11);
    clrun_graph_destroy(g10);
    clrun_graph_destroy(whole);
}

int main(void)
{
    char cache[4096];
    /* Two CPU devices, whatever the caller's environment says: before any OpenCL call. */
    setenv("POCL_DEVICES", "pthread pthread", 1);
    setenv("CLRUN_TUNE", "0", 1);
    clrun_test_device_environment(cache, sizeof cache);
    clrun_device_info *list = NULL;
    size_t count = 0;
    if (clrun_device_list(&list, &count) != CLRUN_OK || count < 2) {
        printf("skip: data-parallel inference needs two devices; there %s %zu (%s)\n",
               count == 1 ? "is" : "are", count, count ? "" : clrun_last_error(NULL));
        clrun_device_list_free(list);
        clrun_test_remove_dir(cache);
        return 77;
    }
    clrun_device_list_free(list);
    CLRUN_TEST_FILTERS_FROM_ENVIRONMENT();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(mlp_gives_the_bits_of_one_device),
        cmocka_unit_test(conv_net_gives_the_bits_of_one_device),
        cmocka_unit_test(an_input_without_the_batch_goes_to_every_device),
        cmocka_unit_test(bad_requests_are_refused_with_reasons),
        cmocka_unit_test(a_failing_device_fails_the_run_naming_it),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    clrun_test_remove_dir(cache);
    return failed;
}
