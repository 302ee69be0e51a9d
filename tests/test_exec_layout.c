/* Tests of clrun_exec_layout (clrun/exec.h): an executor's buffers as the planner sees them, with
 * the arena offsets of planned mode. Runs on a real device (POCL in CI). */
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

/* x (kept) -> a = relu(x) -> b = matmul(a, w) -> c = neg(b) -> d = add(c, a); output d. */
static clrun_graph *small_graph(void)
{
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("layout", &g), CLRUN_OK);
    clrun_tensor_type t = {CLRUN_F32, 2, {16, 16}};
    clrun_tensor_id x, w, a, b, c, d;
    assert_int_equal(clrun_graph_add_input(g, "x", &t, false, &x), CLRUN_OK);
    assert_int_equal(clrun_graph_add_constant(g, "w", &t, NULL, CLRUN_FILL_UNIFORM, -1, 1, 3, &w), CLRUN_OK);
    const char *an[] = {"a"}, *bn[] = {"b"}, *cn[] = {"c"}, *dn[] = {"d"};
    assert_int_equal(clrun_graph_add_node(g, "relu", &x, 1, an, 1, NULL, 0, &a), CLRUN_OK);
    clrun_tensor_id aw[2] = {a, w};
    assert_int_equal(clrun_graph_add_node(g, "matmul", aw, 2, bn, 1, NULL, 0, &b), CLRUN_OK);
    assert_int_equal(clrun_graph_add_node(g, "neg", &b, 1, cn, 1, NULL, 0, &c), CLRUN_OK);
    clrun_tensor_id ca[2] = {c, a};
    assert_int_equal(clrun_graph_add_node(g, "add", ca, 2, dn, 1, NULL, 0, &d), CLRUN_OK);
    assert_int_equal(clrun_graph_mark_output(g, d), CLRUN_OK);
    return g;
}

static clrun_exec_buffer_info *layout_of(clrun_exec *exec, int32_t *count)
{
    assert_int_equal(clrun_exec_layout(exec, NULL, 0, count), CLRUN_OK);
    clrun_exec_buffer_info *info = calloc((size_t)*count + 1, sizeof *info);
    assert_non_null(info);
    int32_t again = 0;
    assert_int_equal(clrun_exec_layout(exec, info, *count, &again), CLRUN_OK);
    assert_int_equal(again, *count);
    return info;
}

static const clrun_exec_buffer_info *find(const clrun_exec_buffer_info *info, int32_t n, const char *tensor)
{
    for (int32_t i = 0; i < n; i++)
        if (strcmp(info[i].tensor, tensor) == 0)
            return &info[i];
    return NULL;
}

static void planned_layout_has_disjoint_offsets_for_overlapping_lifetimes(void **state)
{
    (void)state;
    clrun_graph *g = small_graph();
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    /* unfused, so that every tensor of the graph is laid out */
    clrun_exec_options o = {.mode = CLRUN_EXEC_PLANNED, .plan_time_limit_s = 0.1, .fusion = -1};
    clrun_exec *exec = NULL;
    assert_int_equal(clrun_exec_create(ctx, g, &o, &exec), CLRUN_OK);
    int32_t n;
    clrun_exec_buffer_info *info = layout_of(exec, &n);
    assert_null(find(info, n, "w")); /* constants are resident, not laid out */
    const clrun_exec_buffer_info *x = find(info, n, "x"), *a = find(info, n, "a"), *b = find(info, n, "b");
    assert_non_null(x);
    assert_non_null(a);
    assert_non_null(b);
    assert_true(x->is_input);
    assert_int_equal(x->first_step, -1);
    assert_true(x->offset == CLRUN_NO_OFFSET); /* the caller's buffer */
    assert_int_equal(a->first_step, 0);
    assert_int_equal(a->bytes, 16 * 16 * 4);
    bool has_output = false;
    for (int32_t i = 0; i < n; i++) {
        has_output |= info[i].is_output;
        if (info[i].is_input)
            continue;
        assert_true(info[i].offset != CLRUN_NO_OFFSET);
        for (int32_t j = 0; j < i; j++) {
            if (info[j].is_input)
                continue;
            bool same_time = info[i].first_step <= info[j].last_step && info[j].first_step <= info[i].last_step;
            bool same_bytes = info[i].offset < info[j].offset + info[j].bytes &&
                              info[j].offset < info[i].offset + info[i].bytes;
            assert_false(same_time && same_bytes);
        }
    }
    assert_true(has_output);
    free(info);
    clrun_exec_destroy(exec);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

static void pooled_layout_has_lifetimes_but_no_offsets(void **state)
{
    (void)state;
    clrun_graph *g = small_graph();
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    clrun_exec_options o = {.mode = CLRUN_EXEC_POOLED, .fusion = -1};
    clrun_exec *exec = NULL;
    assert_int_equal(clrun_exec_create(ctx, g, &o, &exec), CLRUN_OK);
    int32_t n;
    clrun_exec_buffer_info *info = layout_of(exec, &n);
    for (int32_t i = 0; i < n; i++) {
        assert_true(info[i].offset == CLRUN_NO_OFFSET);
        assert_true(info[i].last_step >= info[i].first_step);
        assert_true(info[i].bytes > 0);
    }
    /* A short buffer takes what fits and still reports the total. */
    clrun_exec_buffer_info one;
    int32_t total = 0;
    assert_int_equal(clrun_exec_layout(exec, &one, 1, &total), CLRUN_OK);
    assert_int_equal(total, n);
    assert_string_equal(one.tensor, info[0].tensor);
    assert_int_equal(clrun_exec_layout(exec, NULL, 0, NULL), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(clrun_exec_layout(NULL, NULL, 0, &total), CLRUN_ERROR_INVALID_ARGUMENT);
    free(info);
    clrun_exec_destroy(exec);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

/* x (kept, 256 KiB) -> a = neg(x), b = neg(a), c = matmul(a, b): a, b and c are alive at once (a matmul
 * writes no input in place), so
 * no arena is smaller than 768 KiB (and the matmul's scratch). */
static clrun_graph *three_alive_graph(void)
{
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("three", &g), CLRUN_OK);
    clrun_tensor_type t = {CLRUN_F32, 2, {256, 256}};
    clrun_tensor_id x, a, b, c;
    assert_int_equal(clrun_graph_add_input(g, "x", &t, false, &x), CLRUN_OK);
    const char *an[] = {"a"}, *bn[] = {"b"}, *cn[] = {"c"};
    assert_int_equal(clrun_graph_add_node(g, "neg", &x, 1, an, 1, NULL, 0, &a), CLRUN_OK);
    assert_int_equal(clrun_graph_add_node(g, "neg", &a, 1, bn, 1, NULL, 0, &b), CLRUN_OK);
    clrun_tensor_id ab[2] = {a, b};
    assert_int_equal(clrun_graph_add_node(g, "matmul", ab, 2, cn, 1, NULL, 0, &c), CLRUN_OK);
    assert_int_equal(clrun_graph_mark_output(g, c), CLRUN_OK);
    return g;
}

static clrun_context *limited_context(uint64_t limit)
{
    clrun_context_options co;
    clrun_context_options_init(&co);
    co.pool_limit = limit;
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(&co, &ctx), CLRUN_OK);
    return ctx;
}

/* The pool's limit is the planner's capacity: below the lower bound the executor is refused at
 * creation with the bound in the message, leaving nothing held; above it, it runs. */
static void planned_mode_plans_within_the_pool_limit(void **state)
{
    (void)state;
    setenv("CLRUN_TUNE", "0", 1); /* tuning's own buffers would meet the limit first */
    clrun_graph *g = three_alive_graph();
    clrun_exec_options o = {.mode = CLRUN_EXEC_PLANNED, .plan_time_limit_s = 0.1, .fusion = -1};
    clrun_context *ctx = limited_context(512 * 1024);
    clrun_exec *exec = NULL;
    assert_int_equal(clrun_exec_create(ctx, g, &o, &exec), CLRUN_ERROR_OUT_OF_MEMORY);
    assert_null(exec);
    const char *why = clrun_last_error(ctx);
    assert_non_null(strstr(why, "no plan of graph 'three' fits the 512.00 KiB"));
    assert_non_null(strstr(why, "(the lower bound)")); /* 768 KiB and the matmul's scratch */
    clrun_memory_stats m;
    assert_int_equal(clrun_memory_stats_get(ctx, &m), CLRUN_OK);
    assert_int_equal(m.in_use, 0);
    assert_int_equal(m.reserved, 0);
    clrun_context_destroy(ctx);

    ctx = limited_context(2 * 1024 * 1024);
    assert_int_equal(clrun_exec_create(ctx, g, &o, &exec), CLRUN_OK);
    clrun_exec_stats st;
    assert_int_equal(clrun_exec_stats_get(exec, &st), CLRUN_OK);
    assert_true(st.peak_bytes <= 2 * 1024 * 1024);
    clrun_exec_destroy(exec);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
    unsetenv("CLRUN_TUNE");
}

int main(void)
{
    clrun_test_device_environment(cache_root, sizeof cache_root);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(planned_layout_has_disjoint_offsets_for_overlapping_lifetimes),
        cmocka_unit_test(pooled_layout_has_lifetimes_but_no_offsets),
        cmocka_unit_test(planned_mode_plans_within_the_pool_limit),
    };
    CLRUN_TEST_FILTERS_FROM_ENVIRONMENT();
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    clrun_test_remove_dir(cache_root);
    return failed;
}
