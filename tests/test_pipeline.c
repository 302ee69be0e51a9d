/* Tests of the pipeline split over two devices (clrun/pipeline.h), on POCL's two CPU devices
 * (POCL_DEVICES="pthread pthread", set here before the first OpenCL call): a graph whose weights
 * exceed one device's pool limit runs split over two such devices with the bits one device
 * without a limit gives; bad requests are refused with reasons. Skipped (77) with fewer than two
 * devices. */
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
#include <clrun/pipeline.h>

#include "device_test.h"

#define ROWS 16
#define D 512
#define LAYERS 4
#define MIB (1024u * 1024u)
#define WEIGHT_BYTES ((uint64_t)D * D * 4) /* 1 MiB */
#define ACT_BYTES ((uint64_t)ROWS * D * 4)  /* 32 KiB */

/* x f32[16, 512] through four 512x512 matmuls (4 MiB of weights), a gelu after each of the first
 * three. */
static clrun_graph *mlp(void)
{
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("mlp", &g), CLRUN_OK);
    clrun_tensor_type xt = {CLRUN_F32, 2, {ROWS, D}}, wt = {CLRUN_F32, 2, {D, D}};
    clrun_tensor_id h;
    assert_int_equal(clrun_graph_add_input(g, "x", &xt, false, &h), CLRUN_OK);
    for (int l = 1; l <= LAYERS; l++) {
        char wn[8], mn[8], an[8];
        snprintf(wn, sizeof wn, "w%d", l);
        snprintf(mn, sizeof mn, l == LAYERS ? "y" : "mm%d", l);
        snprintf(an, sizeof an, "a%d", l);
        clrun_tensor_id w, in[2];
        assert_int_equal(clrun_graph_add_constant(g, wn, &wt, NULL, CLRUN_FILL_NORMAL, 0, 0.05,
                                                  (uint64_t)l, &w),
                         CLRUN_OK);
        in[0] = h;
        in[1] = w;
        const char *names[] = {mn};
        assert_int_equal(clrun_graph_add_node(g, "matmul", in, 2, names, 1, NULL, 0, &h), CLRUN_OK);
        if (l < LAYERS) {
            const char *anames[] = {an};
            assert_int_equal(clrun_graph_add_node(g, "gelu", &h, 1, anames, 1, NULL, 0, &h),
                             CLRUN_OK);
        }
    }
    assert_int_equal(clrun_graph_mark_output(g, h), CLRUN_OK);
    return g;
}

static float input[ROWS * D];

/* The output of one device, device 0, without a limit. */
static void reference(const clrun_graph *g, float *out)
{
    clrun_context_options co;
    clrun_context_options_init(&co);
    co.device = "0";
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(&co, &ctx), CLRUN_OK);
    clrun_exec *exec = NULL;
    assert_int_equal(clrun_exec_create(ctx, g, NULL, &exec), CLRUN_OK);
    clrun_buffer x;
    assert_int_equal(clrun_alloc(ctx, sizeof input, &x), CLRUN_OK);
    assert_int_equal(clrun_buffer_write(ctx, &x, input), CLRUN_OK);
    assert_int_equal(clrun_exec_run(exec, &x, 1), CLRUN_OK);
    assert_int_equal(clrun_exec_read_output(exec, 0, out, ACT_BYTES), CLRUN_OK);
    clrun_free(ctx, &x);
    clrun_exec_destroy(exec);
    clrun_context_destroy(ctx);
}

static void split_over_two_devices_gives_the_bits_of_one(void **state)
{
    (void)state;
    clrun_graph *g = mlp();
    assert_int_equal(clrun_graph_example_input(g, 0, 7, input, sizeof input), CLRUN_OK);
    static float want[ROWS * D], got[ROWS * D];
    reference(g, want);

    /* One device under a 3 MiB limit cannot hold the 4 MiB of weights. */
    const uint64_t limit = 3 * MIB;
    clrun_context_options co;
    clrun_context_options_init(&co);
    co.device = "0";
    co.pool_limit = limit;
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(&co, &ctx), CLRUN_OK);
    clrun_exec *exec = NULL;
    assert_int_not_equal(clrun_exec_create(ctx, g, NULL, &exec), CLRUN_OK);
    assert_null(exec);
    clrun_context_destroy(ctx);

    /* Two such devices: two matmuls each, 32 KiB across the cut. */
    unsigned devices[2] = {0, 1};
    uint64_t limits[2] = {limit, limit};
    clrun_pipeline *p = NULL;
    if (clrun_pipeline_create(g, devices, limits, 2, NULL, &p) != CLRUN_OK)
        fail_msg("%s", clrun_last_error(NULL));
    assert_int_equal(clrun_pipeline_stage_count(p), 2);
    const void *inputs[1] = {input};
    uint64_t bytes[1] = {sizeof input};
    assert_int_equal(clrun_pipeline_read_output(p, 0, got, sizeof got), CLRUN_ERROR_INVALID_ARGUMENT);
    for (int run = 0; run < 2; run++) {
        memset(got, 0, sizeof got);
        if (clrun_pipeline_run(p, inputs, bytes, 1) != CLRUN_OK)
            fail_msg("%s", clrun_last_error(NULL));
        assert_int_equal(clrun_pipeline_read_output(p, 0, got, sizeof got), CLRUN_OK);
        assert_memory_equal(got, want, sizeof want);
    }
    clrun_pipeline_stage_info info[2];
    for (int k = 0; k < 2; k++) {
        assert_int_equal(clrun_pipeline_stage_info_get(p, k, &info[k]), CLRUN_OK);
        assert_int_equal(info[k].device, (unsigned)k);
        assert_non_null(info[k].device_name);
        assert_int_equal(info[k].limit_bytes, limit);
        assert_true(info[k].estimate_bytes <= limit);
        assert_true(info[k].weights_bytes >= 2 * WEIGHT_BYTES);
        assert_true(info[k].weights_bytes < 3 * WEIGHT_BYTES);
        assert_true(info[k].peak_bytes >= info[k].weights_bytes);
        assert_true(info[k].peak_bytes <= limit);
    }
    assert_int_equal(info[0].first_node, 0);
    assert_int_equal(info[0].end_node, info[1].first_node);
    assert_int_equal(info[1].end_node, clrun_graph_node_count(g));
    assert_int_equal(info[0].bytes_in, 0);
    assert_int_equal(info[0].bytes_out, ACT_BYTES);
    assert_int_equal(info[1].bytes_in, ACT_BYTES);
    assert_int_equal(info[1].bytes_out, 0);
    assert_non_null(clrun_pipeline_context(p, 1));
    assert_null(clrun_pipeline_context(p, 2));
    assert_int_equal(clrun_pipeline_stage_info_get(p, 2, &info[0]), CLRUN_ERROR_INVALID_ARGUMENT);
    clrun_pipeline_destroy(p);

    /* One stage without limits: the same bits too. */
    assert_int_equal(clrun_pipeline_create(g, devices + 1, NULL, 1, NULL, &p), CLRUN_OK);
    memset(got, 0, sizeof got);
    assert_int_equal(clrun_pipeline_run(p, inputs, bytes, 1), CLRUN_OK);
    assert_int_equal(clrun_pipeline_read_output(p, 0, got, sizeof got), CLRUN_OK);
    assert_memory_equal(got, want, sizeof want);
    clrun_pipeline_destroy(p);
    clrun_graph_destroy(g);
}

static void bad_requests_are_refused_with_reasons(void **state)
{
    (void)state;
    clrun_graph *g = mlp();
    unsigned devices[3] = {0, 1, 9};
    uint64_t limits[2] = {3 * MIB, 3 * MIB};
    clrun_pipeline *p = (clrun_pipeline *)g; /* must come back NULL */
    assert_int_equal(clrun_pipeline_create(g, devices, limits, 0, NULL, &p),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_null(p);
    assert_non_null(strstr(clrun_last_error(NULL), "0 devices"));

    assert_int_equal(clrun_pipeline_create(g, devices + 1, NULL, 2, NULL, &p), CLRUN_ERROR_NO_DEVICE);
    assert_null(p);
    assert_non_null(strstr(clrun_last_error(NULL), "device 9 (of stage 1) does not exist"));
    assert_non_null(strstr(clrun_last_error(NULL), "there are"));

    /* 1.5 MiB each: every cut leaves a device two matmuls' weights (or three). */
    limits[0] = limits[1] = 3 * MIB / 2;
    assert_int_equal(clrun_pipeline_create(g, devices, limits, 2, NULL, &p),
                     CLRUN_ERROR_OUT_OF_MEMORY);
    assert_null(p);
    assert_non_null(strstr(clrun_last_error(NULL), "no cut of the 7 steps into 2 consecutive stages"));
    assert_non_null(strstr(clrun_last_error(NULL), "1.50 MiB, 1.50 MiB"));

    /* More devices than nodes. */
    unsigned many[8] = {0, 1, 0, 1, 0, 1, 0, 1};
    assert_int_equal(clrun_pipeline_create(g, many, NULL, 8, NULL, &p), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clrun_last_error(NULL), "too few for 8 stages"));

    /* Runs with the wrong inputs. */
    limits[0] = limits[1] = 3 * MIB;
    assert_int_equal(clrun_pipeline_create(g, devices, limits, 2, NULL, &p), CLRUN_OK);
    const void *inputs[1] = {input};
    uint64_t bytes[1] = {sizeof input - 4};
    assert_int_equal(clrun_pipeline_run(p, inputs, bytes, 0), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clrun_last_error(NULL), "0 inputs given, the graph has 1"));
    assert_int_equal(clrun_pipeline_run(p, inputs, bytes, 1), CLRUN_ERROR_INVALID_SIZE);
    assert_non_null(strstr(clrun_last_error(NULL), "input 'x' needs 32768 bytes, 32764 given"));
    bytes[0] = sizeof input;
    assert_int_equal(clrun_pipeline_run(p, inputs, bytes, 1), CLRUN_OK);
    float small[4];
    assert_int_equal(clrun_pipeline_read_output(p, 0, small, sizeof small), CLRUN_ERROR_INVALID_SIZE);
    assert_int_equal(clrun_pipeline_read_output(p, 1, small, sizeof small),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    clrun_pipeline_destroy(p);
    clrun_pipeline_destroy(NULL);
    clrun_graph_destroy(g);
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
        printf("skip: the pipeline needs two devices; there %s %zu (%s)\n",
               count == 1 ? "is" : "are", count, count ? "" : clrun_last_error(NULL));
        clrun_device_list_free(list);
        clrun_test_remove_dir(cache);
        return 77;
    }
    clrun_device_list_free(list);
    CLRUN_TEST_FILTERS_FROM_ENVIRONMENT();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(split_over_two_devices_gives_the_bits_of_one),
        cmocka_unit_test(bad_requests_are_refused_with_reasons),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    clrun_test_remove_dir(cache);
    return failed;
}
