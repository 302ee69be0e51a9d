/* Tests of the pipeline split over two devices (clrun/pipeline.h), on POCL's two CPU devices
 * (POCL_DEVICES="pthread pthread", set here before the first OpenCL call): a graph whose weights
 * exceed one device's pool limit runs split over two such devices with the bits one device
 * without a limit gives, also streamed as micro-batches overlapping the stages; bad requests
 * are refused and a stage failing mid-stream stops the stream, with reasons. Skipped (77) with
 * fewer than two devices. */
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
#include "exec/pipeline_internal.h"

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

/* The outputs of one device, device 0, without a limit: out[j] for in[j], j < count. */
static void one_device(const clrun_graph *g, int count, float (*in)[ROWS * D],
                       float (*out)[ROWS * D])
{
    clrun_context_options co;
    clrun_context_options_init(&co);
    co.device = "0";
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(&co, &ctx), CLRUN_OK);
    clrun_exec *exec = NULL;
    assert_int_equal(clrun_exec_create(ctx, g, NULL, &exec), CLRUN_OK);
    clrun_buffer x;
    assert_int_equal(clrun_alloc(ctx, ACT_BYTES, &x), CLRUN_OK);
    for (int j = 0; j < count; j++) {
        assert_int_equal(clrun_buffer_write(ctx, &x, in[j]), CLRUN_OK);
        assert_int_equal(clrun_exec_run(exec, &x, 1), CLRUN_OK);
        assert_int_equal(clrun_exec_read_output(exec, 0, out[j], ACT_BYTES), CLRUN_OK);
    }
    clrun_free(ctx, &x);
    clrun_exec_destroy(exec);
    clrun_context_destroy(ctx);
}

static void split_over_two_devices_gives_the_bits_of_one(void **state)
{
    (void)state;
    clrun_test_report_fatal_signals();
    clrun_graph *g = mlp();
    assert_int_equal(clrun_graph_example_input(g, 0, 7, input, sizeof input), CLRUN_OK);
    static float want[ROWS * D], got[ROWS * D];
    one_device(g, 1, &input, &want);

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
    clrun_test_report_fatal_signals();
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

/* M micro-batches of different inputs, block j of each the seeded example input of seed 100 + j,
 * and one device's output of every block. */
#define MAX_BATCHES 5
static float many_in[MAX_BATCHES][ROWS * D], many_want[MAX_BATCHES][ROWS * D];
static float many_out[MAX_BATCHES][ROWS * D];

static void many_references(const clrun_graph *g, int batches)
{
    for (int j = 0; j < batches; j++)
        assert_int_equal(clrun_graph_example_input(g, 0, 100 + (uint64_t)j, many_in[j],
                                                   sizeof many_in[j]),
                         CLRUN_OK);
    one_device(g, batches, many_in, many_want);
}

static void micro_batches_stream_with_the_bits_of_one_device(void **state)
{
    (void)state;
    clrun_test_report_fatal_signals();
    clrun_graph *g = mlp();
    /* 1 (stage after stage), 3 (more micro-batches than slots, and odd), 5 */
    int counts[] = {1, 3, 5};
    int cases = clrun_test_rounds(3) < 3 ? 2 : 3;
    many_references(g, MAX_BATCHES);
    unsigned devices[2] = {0, 1};
    uint64_t limits[2] = {3 * MIB, 3 * MIB};
    clrun_pipeline *p = NULL;
    if (clrun_pipeline_create(g, devices, limits, 2, NULL, &p) != CLRUN_OK)
        fail_msg("%s", clrun_last_error(NULL));
    for (int c = 0; c < cases; c++) {
        int m = counts[c];
        const void *inputs[1] = {many_in};
        uint64_t in_bytes[1] = {(uint64_t)m * ACT_BYTES};
        void *outputs[1] = {many_out};
        uint64_t out_bytes[1] = {(uint64_t)m * ACT_BYTES};
        memset(many_out, 0, sizeof many_out);
        if (clrun_pipeline_run_many(p, m, inputs, in_bytes, 1, outputs, out_bytes, 1) != CLRUN_OK)
            fail_msg("M = %d: %s", m, clrun_last_error(NULL));
        for (int j = 0; j < m; j++)
            assert_memory_equal(many_out[j], many_want[j], ACT_BYTES);
        for (int j = m; j < MAX_BATCHES; j++) /* nothing written past the M blocks */
            assert_true(many_out[j][0] == 0.0f && many_out[j][ROWS * D - 1] == 0.0f);
        clrun_pipeline_run_info run;
        assert_int_equal(clrun_pipeline_run_info_get(p, &run), CLRUN_OK);
        assert_int_equal(run.micro_batches, m);
        assert_int_equal(run.slots, 2);
        assert_int_equal(run.threads, m == 1 ? 0 : 2);
        assert_int_equal(run.bytes_moved, ACT_BYTES);
        assert_int_equal(run.handoff_bytes, 2 * ACT_BYTES);
        assert_true(run.wall_ms > 0);
        assert_true(run.busy_ms > 0);
        assert_true(run.bubble_fraction >= 0 && run.bubble_fraction < 1);
        double busy = 0;
        for (int k = 0; k < 2; k++) {
            clrun_pipeline_stage_info info;
            assert_int_equal(clrun_pipeline_stage_info_get(p, k, &info), CLRUN_OK);
            assert_true(info.wall_ms > 0);
            /* a stage is busy within the span only */
            assert_true(info.wall_ms <= run.wall_ms * 1.01 + 0.01);
            assert_int_equal(info.bytes_in, k == 1 ? ACT_BYTES : 0);
            assert_int_equal(info.bytes_out, k == 0 ? ACT_BYTES : 0);
            busy += info.wall_ms;
        }
        assert_true(busy == run.busy_ms);
        /* the run's outputs are the caller's */
        float one[ROWS * D];
        assert_int_equal(clrun_pipeline_read_output(p, 0, one, sizeof one),
                         CLRUN_ERROR_INVALID_ARGUMENT);
    }
    /* clrun_pipeline_run after a stream still gives one batch's bits, and its run info. */
    const void *one_in[1] = {many_in[2]};
    uint64_t one_bytes[1] = {ACT_BYTES};
    static float got[ROWS * D];
    assert_int_equal(clrun_pipeline_run(p, one_in, one_bytes, 1), CLRUN_OK);
    assert_int_equal(clrun_pipeline_read_output(p, 0, got, sizeof got), CLRUN_OK);
    assert_memory_equal(got, many_want[2], sizeof got);
    clrun_pipeline_run_info run;
    assert_int_equal(clrun_pipeline_run_info_get(p, &run), CLRUN_OK);
    assert_int_equal(run.micro_batches, 1);
    assert_int_equal(run.threads, 0);
    clrun_pipeline_destroy(p);

    /* One stage: micro-batches one after another, the same bits. */
    assert_int_equal(clrun_pipeline_create(g, devices + 1, NULL, 1, NULL, &p), CLRUN_OK);
    const void *inputs[1] = {many_in};
    uint64_t in_bytes[1] = {3 * ACT_BYTES};
    void *outputs[1] = {many_out};
    memset(many_out, 0, sizeof many_out);
    assert_int_equal(clrun_pipeline_run_many(p, 3, inputs, in_bytes, 1, outputs, in_bytes, 1),
                     CLRUN_OK);
    for (int j = 0; j < 3; j++)
        assert_memory_equal(many_out[j], many_want[j], ACT_BYTES);
    assert_int_equal(clrun_pipeline_run_info_get(p, &run), CLRUN_OK);
    assert_int_equal(run.bytes_moved, 0);
    assert_int_equal(run.handoff_bytes, 0);
    clrun_pipeline_destroy(p);
    clrun_graph_destroy(g);
}

static void a_stream_is_refused_or_stopped_with_reasons(void **state)
{
    (void)state;
    clrun_test_report_fatal_signals();
    clrun_graph *g = mlp();
    many_references(g, 4);
    unsigned devices[2] = {0, 1};
    uint64_t limits[2] = {3 * MIB, 3 * MIB};
    clrun_pipeline *p = NULL;
    assert_int_equal(clrun_pipeline_create(g, devices, limits, 2, NULL, &p), CLRUN_OK);
    const void *inputs[1] = {many_in};
    uint64_t bytes[1] = {4 * ACT_BYTES};
    void *outputs[1] = {many_out};
    assert_int_equal(clrun_pipeline_run_many(p, 0, inputs, bytes, 1, outputs, bytes, 1),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clrun_last_error(NULL), "0 micro-batches"));
    assert_int_equal(clrun_pipeline_run_many(p, -2, inputs, bytes, 1, outputs, bytes, 1),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(clrun_pipeline_run_many(NULL, 4, inputs, bytes, 1, outputs, bytes, 1),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(clrun_pipeline_run_many(p, 4, NULL, bytes, 1, outputs, bytes, 1),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clrun_last_error(NULL), "NULL inputs"));
    assert_int_equal(clrun_pipeline_run_many(p, 4, inputs, bytes, 1, NULL, bytes, 1),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clrun_last_error(NULL), "NULL outputs"));
    const void *null_in[1] = {NULL};
    assert_int_equal(clrun_pipeline_run_many(p, 4, null_in, bytes, 1, outputs, bytes, 1),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clrun_last_error(NULL), "input 'x'"));
    assert_int_equal(clrun_pipeline_run_many(p, 4, inputs, bytes, 0, outputs, bytes, 1),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clrun_last_error(NULL), "0 inputs given, the graph has 1"));
    uint64_t short_bytes[1] = {ACT_BYTES};
    assert_int_equal(clrun_pipeline_run_many(p, 4, inputs, short_bytes, 1, outputs, bytes, 1),
                     CLRUN_ERROR_INVALID_SIZE);
    assert_non_null(strstr(clrun_last_error(NULL), "input 'x' needs 4 x 32768 = 131072 bytes, "
                                                   "32768 given"));
    assert_int_equal(clrun_pipeline_run_many(p, 4, inputs, bytes, 1, outputs, short_bytes, 1),
                     CLRUN_ERROR_INVALID_SIZE);
    assert_non_null(strstr(clrun_last_error(NULL), "output 'y' needs 4 x 32768"));

    /* A stage failing mid-stream stops the other; the error names the stage and the
     * micro-batch. The second stage fails (the first waits for its slot), then the first (the
     * second waits for its input): neither hangs. */
    int32_t fails[][2] = {{1, 2}, {0, 1}, {1, 0}};
    for (int f = 0; f < 3; f++) {
        clrun__pipeline_fail_at(p, fails[f][0], fails[f][1]);
        assert_int_equal(clrun_pipeline_run_many(p, 4, inputs, bytes, 1, outputs, bytes, 1),
                         CLRUN_ERROR_OPENCL);
        char want[96];
        snprintf(want, sizeof want, "stage %d (device %d, nodes [", (int)fails[f][0],
                 (int)fails[f][0]);
        assert_non_null(strstr(clrun_last_error(NULL), want));
        snprintf(want, sizeof want, "micro-batch %d of 4: injected failure", (int)fails[f][1]);
        assert_non_null(strstr(clrun_last_error(NULL), want));
        clrun_pipeline_run_info run;
        assert_int_equal(clrun_pipeline_run_info_get(p, &run), CLRUN_OK);
        assert_int_equal(run.threads, 2);
    }
    /* and the pipeline runs again */
    clrun__pipeline_fail_at(p, -1, -1);
    memset(many_out, 0, sizeof many_out);
    assert_int_equal(clrun_pipeline_run_many(p, 4, inputs, bytes, 1, outputs, bytes, 1), CLRUN_OK);
    for (int j = 0; j < 4; j++)
        assert_memory_equal(many_out[j], many_want[j], ACT_BYTES);
    /* clrun_pipeline_run fails the same way, without a micro-batch to name */
    clrun__pipeline_fail_at(p, 1, 0);
    assert_int_equal(clrun_pipeline_run(p, inputs, short_bytes, 1), CLRUN_ERROR_OPENCL);
    if (strstr(clrun_last_error(NULL), ", 7)): injected failure") == NULL) /* no micro-batch */
        fail_msg("%s", clrun_last_error(NULL));
    assert_int_equal(clrun_pipeline_run_info_get(p, NULL), CLRUN_ERROR_INVALID_ARGUMENT);
    clrun_pipeline_destroy(p);
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
        cmocka_unit_test(micro_batches_stream_with_the_bits_of_one_device),
        cmocka_unit_test(a_stream_is_refused_or_stopped_with_reasons),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    clrun_test_remove_dir(cache);
    return failed;
}
