/* An index outside its axis (ONNX Gather and GatherElements) fails the executor's run, naming the
 * node and the first bad position, as onnxruntime does, instead of giving zeros; the next run
 * with good indices is correct; a folded node with bad constant indices fails at creation; the
 * embedding form keeps its padding rule (zeros, no error). Runs on a real device (POCL in CI). */
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

static char cache_root[512];

enum { ROWS = 10, COLS = 3, PICKS = 4 };

/* y = gather(data [ROWS, COLS], idx [PICKS] i64) along `axis` 0 (with the attribute, or the
 * embedding form without it); data is a graph input, idx an input or a constant. */
static clrun_graph *gather_graph(bool with_axis, const int64_t *constant_idx, const char *op)
{
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("gather", &g), CLRUN_OK);
    clrun_tensor_type dt = {CLRUN_F32, 2, {ROWS, COLS}};
    bool elements = strcmp(op, "gather_elements") == 0;
    clrun_tensor_type it = {with_axis ? CLRUN_I64 : CLRUN_I32, elements ? 2 : 1,
                            {PICKS, elements ? COLS : 0}};
    clrun_tensor_id data, idx, y;
    assert_int_equal(clrun_graph_add_input(g, "data", &dt, false, &data), CLRUN_OK);
    if (constant_idx)
        assert_int_equal(clrun_graph_add_constant(g, "idx", &it, constant_idx, CLRUN_FILL_ZEROS, 0, 0, 0, &idx),
                         CLRUN_OK);
    else
        assert_int_equal(clrun_graph_add_input(g, "idx", &it, false, &idx), CLRUN_OK);
    clrun_attr axis = {.name = "axis", .kind = CLRUN_ATTR_INT, .i = 0};
    const char *names[] = {"picked"};
    clrun_tensor_id in[2] = {data, idx};
    assert_int_equal(clrun_graph_add_node(g, op, in, 2, names, 1, with_axis ? &axis : NULL, with_axis ? 1 : 0, &y),
                     CLRUN_OK);
    assert_int_equal(clrun_graph_mark_output(g, y), CLRUN_OK);
    return g;
}

static void upload(clrun_context *ctx, const void *host, uint64_t bytes, clrun_buffer *out)
{
    assert_int_equal(clrun_alloc(ctx, bytes, out), CLRUN_OK);
    assert_int_equal(clrun_buffer_write(ctx, out, host), CLRUN_OK);
}

/* Runs exec on data 0..ROWS*COLS-1 and idx; returns the status, the output in out. */
static clrun_status run(clrun_context *ctx, clrun_exec *exec, const void *idx, uint64_t idx_bytes, float *out)
{
    float data[ROWS * COLS];
    for (int i = 0; i < ROWS * COLS; i++)
        data[i] = (float)i;
    clrun_buffer in[2];
    upload(ctx, data, sizeof data, &in[0]);
    upload(ctx, idx, idx_bytes, &in[1]);
    clrun_status s = clrun_exec_run(exec, in, 2);
    if (s == CLRUN_OK && out)
        assert_int_equal(clrun_exec_read_output(exec, 0, out, PICKS * COLS * sizeof(float)), CLRUN_OK);
    clrun_free(ctx, &in[0]);
    clrun_free(ctx, &in[1]);
    return s;
}

static void a_gather_index_outside_its_axis_fails_the_run_and_names_it(void **state)
{
    (void)state;
    clrun_graph *g = gather_graph(true, NULL, "gather");
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    const char *modes[] = {"pooled", "naive", "planned"};
    const clrun_exec_mode mode[] = {CLRUN_EXEC_POOLED, CLRUN_EXEC_NAIVE, CLRUN_EXEC_PLANNED};
    for (int m = 0; m < 3; m++) {
        clrun_exec_options eo;
        clrun_exec_options_init(&eo);
        eo.mode = mode[m];
        clrun_exec *exec = NULL;
        assert_int_equal(clrun_exec_create(ctx, g, &eo, &exec), CLRUN_OK);
        /* positions 2 and 3 are bad (10 is one past the end, -11 one before the start) */
        const int64_t bad[PICKS] = {1, -10, 10, -11};
        assert_int_equal(run(ctx, exec, bad, sizeof bad, NULL), CLRUN_ERROR_INVALID_ARGUMENT);
        const char *msg = clrun_last_error(ctx);
        if (!strstr(msg, "'picked' (gather)") || !strstr(msg, "position 2") || !strstr(msg, "length 10"))
            fail_msg("%s mode: message '%s'", modes[m], msg);
        float out[PICKS * COLS];
        assert_int_equal(clrun_exec_read_output(exec, 0, out, sizeof out), CLRUN_ERROR_INVALID_ARGUMENT);
        /* the executor forgot the bad index: the next run with good ones is correct */
        const int64_t good[PICKS] = {9, -1, 0, -10};
        assert_int_equal(run(ctx, exec, good, sizeof good, out), CLRUN_OK);
        const int rows[PICKS] = {9, 9, 0, 0};
        for (int p = 0; p < PICKS; p++)
            for (int c = 0; c < COLS; c++)
                assert_true(out[p * COLS + c] == (float)(rows[p] * COLS + c));
        clrun_exec_destroy(exec);
    }
    clrun_memory_stats ms;
    assert_int_equal(clrun_memory_stats_get(ctx, &ms), CLRUN_OK);
    assert_int_equal(ms.in_use, 0); /* the failed runs held nothing back */
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

static void a_gather_elements_index_outside_its_axis_fails_the_run(void **state)
{
    (void)state;
    clrun_graph *g = gather_graph(true, NULL, "gather_elements");
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    clrun_exec *exec = NULL;
    assert_int_equal(clrun_exec_create(ctx, g, NULL, &exec), CLRUN_OK);
    int64_t idx[PICKS * COLS] = {0};
    idx[7] = 12;
    assert_int_equal(run(ctx, exec, idx, sizeof idx, NULL), CLRUN_ERROR_INVALID_ARGUMENT);
    const char *msg = clrun_last_error(ctx);
    if (!strstr(msg, "'picked' (gather_elements)") || !strstr(msg, "position 7"))
        fail_msg("message '%s'", msg);
    idx[7] = -10;
    float out[PICKS * COLS];
    assert_int_equal(run(ctx, exec, idx, sizeof idx, out), CLRUN_OK);
    assert_true(out[7] == (float)(0 * COLS + 7 % COLS));
    clrun_exec_destroy(exec);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

/* With constant indices and constant data the node is folded at creation: it fails there. */
static void a_folded_gather_with_a_bad_constant_index_fails_at_creation(void **state)
{
    (void)state;
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("folded_gather", &g), CLRUN_OK);
    clrun_tensor_type dt = {CLRUN_F32, 1, {ROWS}}, it = {CLRUN_I64, 1, {2}}, xt = {CLRUN_F32, 1, {2}};
    const int64_t idx[2] = {3, 40};
    clrun_tensor_id data, ids, x, y, z;
    assert_int_equal(clrun_graph_add_constant(g, "data", &dt, NULL, CLRUN_FILL_UNIFORM, -1, 1, 5, &data), CLRUN_OK);
    assert_int_equal(clrun_graph_add_constant(g, "idx", &it, idx, CLRUN_FILL_ZEROS, 0, 0, 0, &ids), CLRUN_OK);
    assert_int_equal(clrun_graph_add_input(g, "x", &xt, false, &x), CLRUN_OK);
    clrun_attr axis = {.name = "axis", .kind = CLRUN_ATTR_INT, .i = 0};
    const char *yn[] = {"table_rows"}, *zn[] = {"z"};
    clrun_tensor_id in[2] = {data, ids};
    assert_int_equal(clrun_graph_add_node(g, "gather", in, 2, yn, 1, &axis, 1, &y), CLRUN_OK);
    clrun_tensor_id xy[2] = {x, y};
    assert_int_equal(clrun_graph_add_node(g, "add", xy, 2, zn, 1, NULL, 0, &z), CLRUN_OK);
    assert_int_equal(clrun_graph_mark_output(g, z), CLRUN_OK);
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    clrun_exec *exec = NULL;
    assert_int_equal(clrun_exec_create(ctx, g, NULL, &exec), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_null(exec);
    const char *msg = clrun_last_error(ctx);
    if (!strstr(msg, "'table_rows' (gather)") || !strstr(msg, "position 1"))
        fail_msg("message '%s'", msg);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

/* The embedding form (no axis) keeps its documented rule: an index outside the table gives a
 * row of zeros (a padding index), not an error. */
static void the_embedding_form_gives_zeros_for_an_index_outside_the_table(void **state)
{
    (void)state;
    clrun_graph *g = gather_graph(false, NULL, "gather");
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    clrun_exec *exec = NULL;
    assert_int_equal(clrun_exec_create(ctx, g, NULL, &exec), CLRUN_OK);
    const int32_t idx[PICKS] = {2, -1, 10, 0};
    float out[PICKS * COLS];
    assert_int_equal(run(ctx, exec, idx, sizeof idx, out), CLRUN_OK);
    for (int c = 0; c < COLS; c++) {
        assert_true(out[0 * COLS + c] == (float)(2 * COLS + c));
        assert_true(out[1 * COLS + c] == 0.0f);
        assert_true(out[2 * COLS + c] == 0.0f);
    }
    clrun_exec_destroy(exec);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

int main(void)
{
    clrun_test_device_environment(cache_root, sizeof cache_root);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_gather_index_outside_its_axis_fails_the_run_and_names_it),
        cmocka_unit_test(a_gather_elements_index_outside_its_axis_fails_the_run),
        cmocka_unit_test(a_folded_gather_with_a_bad_constant_index_fails_at_creation),
        cmocka_unit_test(the_embedding_form_gives_zeros_for_an_index_outside_the_table),
    };
    CLRUN_TEST_FILTERS_FROM_ENVIRONMENT();
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    clrun_test_remove_dir(cache_root);
    return failed;
}
