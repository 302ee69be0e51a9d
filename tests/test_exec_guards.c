/* Guarded nodes (an ONNX If whose condition is known only at run time): the executor reads the
 * guard back once per run and skips the nodes whose guard fails, so a skipped gather with an
 * index outside its axis does not fail the run, while the same gather taken does; the output is
 * where(c, then, else) and the same in every executor mode, fusion on or off. The graph checks
 * what it is given as a guard, and the text format refuses a guarded graph. Runs on a real
 * device (POCL in CI). */
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

static char cache_root[512];

enum { ROWS = 10, COLS = 3, PICKS = 4 };

/* y = where(c, gather(data, idx_then) [guard c], gather(data, idx_else) [guard not c]);
 * data f32[ROWS, COLS], idx_* i64[PICKS], c bool[1]: all inputs. Then-branch gather is node 0,
 * else node 1. */
static clrun_graph *guarded_graph(void)
{
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("guarded", &g), CLRUN_OK);
    clrun_tensor_type dt = {CLRUN_F32, 2, {ROWS, COLS}}, it = {CLRUN_I64, 1, {PICKS}}, ct = {CLRUN_BOOL, 1, {1}};
    clrun_tensor_id data, idx_then, idx_else, c, picked[2], y;
    assert_int_equal(clrun_graph_add_input(g, "data", &dt, false, &data), CLRUN_OK);
    assert_int_equal(clrun_graph_add_input(g, "idx_then", &it, false, &idx_then), CLRUN_OK);
    assert_int_equal(clrun_graph_add_input(g, "idx_else", &it, false, &idx_else), CLRUN_OK);
    assert_int_equal(clrun_graph_add_input(g, "c", &ct, false, &c), CLRUN_OK);
    clrun_attr axis = {.name = "axis", .kind = CLRUN_ATTR_INT, .i = 0};
    const char *names[2][1] = {{"picked_then"}, {"picked_else"}};
    clrun_tensor_id in[2][2] = {{data, idx_then}, {data, idx_else}};
    for (int b = 0; b < 2; b++) {
        assert_int_equal(clrun_graph_add_node(g, "gather", in[b], 2, names[b], 1, &axis, 1, &picked[b]), CLRUN_OK);
        assert_int_equal(clrun__graph_set_guard(g, b, c, b == 1), CLRUN_OK);
    }
    const char *yname[] = {"y"};
    clrun_tensor_id win[3] = {c, picked[0], picked[1]};
    assert_int_equal(clrun_graph_add_node(g, "where", win, 3, yname, 1, NULL, 0, &y), CLRUN_OK);
    assert_int_equal(clrun_graph_mark_output(g, y), CLRUN_OK);
    return g;
}

static void upload(clrun_context *ctx, const void *host, uint64_t bytes, clrun_buffer *out)
{
    assert_int_equal(clrun_alloc(ctx, bytes, out), CLRUN_OK);
    assert_int_equal(clrun_buffer_write(ctx, out, host), CLRUN_OK);
}

/* One run with data 0..ROWS*COLS-1; the output into out when it succeeds. */
static clrun_status run(clrun_context *ctx, clrun_exec *exec, const int64_t *idx_then, const int64_t *idx_else,
                        bool c, float *out)
{
    float data[ROWS * COLS];
    for (int i = 0; i < ROWS * COLS; i++)
        data[i] = (float)i;
    unsigned char cond = c;
    clrun_buffer in[4];
    upload(ctx, data, sizeof data, &in[0]);
    upload(ctx, idx_then, PICKS * sizeof *idx_then, &in[1]);
    upload(ctx, idx_else, PICKS * sizeof *idx_else, &in[2]);
    upload(ctx, &cond, 1, &in[3]);
    clrun_status s = clrun_exec_run(exec, in, 4);
    if (s == CLRUN_OK)
        assert_int_equal(clrun_exec_read_output(exec, 0, out, PICKS * COLS * sizeof(float)), CLRUN_OK);
    for (int i = 0; i < 4; i++)
        clrun_free(ctx, &in[i]);
    return s;
}

static void expect_rows(const float *out, const int64_t *idx)
{
    for (int p = 0; p < PICKS; p++)
        for (int c = 0; c < COLS; c++)
            assert_true(out[p * COLS + c] == (float)(idx[p] * COLS + c));
}

static void the_branch_not_taken_is_skipped_and_cannot_fail_the_run(void **state)
{
    (void)state;
    clrun_graph *g = guarded_graph();
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    const char *modes[] = {"pooled", "naive", "planned"};
    const clrun_exec_mode mode[] = {CLRUN_EXEC_POOLED, CLRUN_EXEC_NAIVE, CLRUN_EXEC_PLANNED};
    const int64_t good[PICKS] = {9, 0, 3, 5}, other[PICKS] = {1, 2, 7, 8}, bad[PICKS] = {1, 10, 0, 0};
    for (int m = 0; m < 6; m++) {
        clrun_exec_options eo;
        clrun_exec_options_init(&eo);
        eo.mode = mode[m % 3];
        eo.fusion = m < 3 ? 1 : -1;
        clrun_exec *exec = NULL;
        assert_int_equal(clrun_exec_create(ctx, g, &eo, &exec), CLRUN_OK);
        float out[PICKS * COLS];
        /* then taken: the else gather's bad index is never looked at */
        assert_int_equal(run(ctx, exec, good, bad, true, out), CLRUN_OK);
        expect_rows(out, good);
        /* else taken: the then gather's bad index neither */
        assert_int_equal(run(ctx, exec, bad, other, false, out), CLRUN_OK);
        expect_rows(out, other);
        /* a bad index in the branch taken fails the run, naming its node */
        assert_int_equal(run(ctx, exec, bad, other, true, out), CLRUN_ERROR_INVALID_ARGUMENT);
        const char *msg = clrun_last_error(ctx);
        if (!strstr(msg, "'picked_then' (gather)"))
            fail_msg("%s mode: message '%s'", modes[m % 3], msg);
        /* and the next run is right again: the guard is read afresh each run */
        assert_int_equal(run(ctx, exec, good, other, false, out), CLRUN_OK);
        expect_rows(out, other);
        assert_int_equal(run(ctx, exec, good, other, true, out), CLRUN_OK);
        expect_rows(out, good);
        clrun_exec_destroy(exec);
    }
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

static void guards_are_checked_and_the_text_format_refuses_them(void **state)
{
    (void)state;
    clrun_graph *g = guarded_graph();
    /* not bool, not one element, produced after the node */
    assert_int_equal(clrun__graph_set_guard(g, 0, clrun_graph_find(g, "data"), false), CLRUN_ERROR_INVALID_GRAPH);
    assert_int_equal(clrun__graph_set_guard(g, 0, clrun_graph_find(g, "picked_else"), false), CLRUN_ERROR_INVALID_GRAPH);
    assert_int_equal(clrun__graph_set_guard(g, 5, clrun_graph_find(g, "c"), false), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_true(clrun__graph_has_guards(g));
    FILE *out = tmpfile();
    assert_non_null(out);
    assert_int_equal(clrun_graph_write(g, out), CLRUN_ERROR_UNSUPPORTED);
    fclose(out);
    clrun_graph_destroy(g);
}

/* A memory budget the guarded graph does not meet as given is refused, never met by a copy
 * that would run both branches unguarded; one it meets changes nothing. */
static void a_budget_is_not_met_by_dropping_guards(void **state)
{
    (void)state;
    clrun_graph *g = guarded_graph();
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    clrun_exec_options o;
    clrun_exec_options_init(&o);
    o.memory_budget = 1;
    clrun_exec *exec = NULL;
    assert_int_equal(clrun_exec_create(ctx, g, &o, &exec), CLRUN_ERROR_OUT_OF_MEMORY);
    assert_null(exec);
    assert_non_null(strstr(clrun_last_error(ctx), "guarded nodes"));
    o.memory_budget = UINT64_MAX;
    assert_int_equal(clrun_exec_create(ctx, g, &o, &exec), CLRUN_OK);
    int64_t good[PICKS] = {0, 1, 2, 3}, other[PICKS] = {99, 99, 99, 99};
    float out[PICKS * COLS];
    assert_int_equal(run(ctx, exec, good, other, true, out), CLRUN_OK);
    expect_rows(out, good);
    clrun_exec_destroy(exec);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

int main(void)
{
    clrun_test_device_environment(cache_root, sizeof cache_root);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_branch_not_taken_is_skipped_and_cannot_fail_the_run),
        cmocka_unit_test(guards_are_checked_and_the_text_format_refuses_them),
        cmocka_unit_test(a_budget_is_not_met_by_dropping_guards),
    };
    CLRUN_TEST_FILTERS_FROM_ENVIRONMENT();
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    clrun_test_remove_dir(cache_root);
    return failed;
}
