/* Misuse of buffer handles, on a real device: every way a caller's clrun_buffer can alias a
 * block that an executor owns (a donated input after its run, an output, a buffer given twice,
 * a stale copy, a reset pool) is a clear error or safe, and none changes an output. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <clrun/clrun.h>

#include "device_test.h"

static char cache_root[512];

#define N 64

static clrun_tensor_type vector_type(void) { return (clrun_tensor_type){CLRUN_F32, 1, {N}}; }

/* y = neg(x), x donated or kept. */
static clrun_graph *neg_graph(bool donated)
{
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("neg", &g), CLRUN_OK);
    clrun_tensor_type t = vector_type();
    clrun_tensor_id x, y;
    const char *ny[] = {"y"};
    assert_int_equal(clrun_graph_add_input(g, "x", &t, donated, &x), CLRUN_OK);
    assert_int_equal(clrun_graph_add_node(g, "neg", &x, 1, ny, 1, NULL, 0, &y), CLRUN_OK);
    assert_int_equal(clrun_graph_mark_output(g, y), CLRUN_OK);
    return g;
}

/* z = add(a, b), either donated. */
static clrun_graph *add_graph(bool a_donated, bool b_donated)
{
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("add", &g), CLRUN_OK);
    clrun_tensor_type t = vector_type();
    clrun_tensor_id in[2], z;
    const char *nz[] = {"z"};
    assert_int_equal(clrun_graph_add_input(g, "a", &t, a_donated, &in[0]), CLRUN_OK);
    assert_int_equal(clrun_graph_add_input(g, "b", &t, b_donated, &in[1]), CLRUN_OK);
    assert_int_equal(clrun_graph_add_node(g, "add", in, 2, nz, 1, NULL, 0, &z), CLRUN_OK);
    assert_int_equal(clrun_graph_mark_output(g, z), CLRUN_OK);
    return g;
}

/* A buffer of N floats holding start, start + 1, ... */
static clrun_buffer counting_buffer(clrun_context *ctx, float start)
{
    float host[N];
    for (int i = 0; i < N; i++)
        host[i] = start + (float)i;
    clrun_buffer b;
    assert_int_equal(clrun_alloc(ctx, sizeof host, &b), CLRUN_OK);
    assert_int_equal(clrun_buffer_write(ctx, &b, host), CLRUN_OK);
    return b;
}

static void assert_output_counts(clrun_exec *exec, float first, float step)
{
    float got[N];
    assert_int_equal(clrun_exec_read_output(exec, 0, got, sizeof got), CLRUN_OK);
    for (int i = 0; i < N; i++)
        assert_true(got[i] == first + step * (float)i);
}

static clrun_context *context(void)
{
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    return ctx;
}

static uint64_t in_use(clrun_context *ctx)
{
    clrun_memory_stats s;
    assert_int_equal(clrun_memory_stats_get(ctx, &s), CLRUN_OK);
    return s.in_use;
}

/* The defect: freeing a donated input after its run returned OK, the next allocation got the
 * output's block and the output read back the new owner's data. */
static void freeing_a_consumed_donated_input_is_refused_and_changes_nothing(void **state)
{
    (void)state;
    clrun_context *ctx = context();
    clrun_graph *g = neg_graph(true);
    clrun_exec *exec = NULL;
    assert_int_equal(clrun_exec_create(ctx, g, NULL, &exec), CLRUN_OK);
    clrun_buffer x = counting_buffer(ctx, 1);
    assert_int_equal(clrun_exec_run(exec, &x, 1), CLRUN_OK);
    uint64_t held = in_use(ctx);
    assert_int_equal(clrun_free(ctx, &x), CLRUN_ERROR_DONATED);
    assert_non_null(strstr(clrun_last_error(ctx), "input 'x' of graph 'neg'"));
    assert_int_equal(in_use(ctx), held);
    clrun_buffer other = counting_buffer(ctx, 12345);
    assert_output_counts(exec, -1, -1); /* y = -x, untouched by the new block */
    float host[N];
    assert_int_equal(clrun_buffer_write(ctx, &x, host), CLRUN_ERROR_DONATED);
    assert_int_equal(clrun_buffer_read(ctx, &x, host), CLRUN_ERROR_DONATED);
    assert_output_counts(exec, -1, -1);
    assert_int_equal(clrun_free(ctx, &other), CLRUN_OK);
    clrun_exec_destroy(exec);
    assert_int_equal(in_use(ctx), 0); /* the executor freed its block once, the right one */
    clrun_graph_destroy(g);
    clrun_context_destroy(ctx);
}

/* A donated buffer is dead to every executor, not only the one that took it. */
static void a_consumed_donated_input_is_refused_by_another_executor(void **state)
{
    (void)state;
    clrun_context *ctx = context();
    clrun_graph *g = neg_graph(true), *h = neg_graph(false);
    clrun_exec *first = NULL, *second = NULL;
    assert_int_equal(clrun_exec_create(ctx, g, NULL, &first), CLRUN_OK);
    assert_int_equal(clrun_exec_create(ctx, h, NULL, &second), CLRUN_OK);
    clrun_buffer x = counting_buffer(ctx, 1);
    assert_int_equal(clrun_exec_run(first, &x, 1), CLRUN_OK);
    assert_int_equal(clrun_exec_run(second, &x, 1), CLRUN_ERROR_DONATED);
    assert_non_null(strstr(clrun_last_error(ctx), "input 'x'"));
    assert_output_counts(first, -1, -1);
    clrun_exec_destroy(first);
    clrun_exec_destroy(second);
    assert_int_equal(in_use(ctx), 0);
    clrun_graph_destroy(g);
    clrun_graph_destroy(h);
    clrun_context_destroy(ctx);
}

static void a_double_free_says_so(void **state)
{
    (void)state;
    clrun_context *ctx = context();
    clrun_buffer b, copy;
    assert_int_equal(clrun_alloc(ctx, 256, &b), CLRUN_OK);
    copy = b;
    assert_int_equal(clrun_free(ctx, &b), CLRUN_OK);
    assert_int_equal(clrun_free(ctx, &b), CLRUN_ERROR_INVALID_FREE);
    assert_non_null(strstr(clrun_last_error(ctx), "freed already"));
    assert_int_equal(clrun_free(ctx, &copy), CLRUN_ERROR_INVALID_FREE); /* a stale copy */
    assert_non_null(strstr(clrun_last_error(ctx), "freed already"));
    float host[64];
    assert_int_equal(clrun_buffer_write(ctx, &copy, host), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clrun_last_error(ctx), "freed already"));
    clrun_buffer empty;
    memset(&empty, 0, sizeof empty);
    assert_int_equal(clrun_free(ctx, &empty), CLRUN_ERROR_INVALID_FREE);
    assert_non_null(strstr(clrun_last_error(ctx), "empty clrun_buffer"));
    clrun_context_destroy(ctx);
}

static void the_same_buffer_twice_is_refused_when_one_is_donated(void **state)
{
    (void)state;
    clrun_context *ctx = context();
    clrun_graph *donating = add_graph(false, true), *keeping = add_graph(false, false);
    clrun_exec *d = NULL, *k = NULL;
    assert_int_equal(clrun_exec_create(ctx, donating, NULL, &d), CLRUN_OK);
    assert_int_equal(clrun_exec_create(ctx, keeping, NULL, &k), CLRUN_OK);
    clrun_buffer x = counting_buffer(ctx, 1);
    clrun_buffer twice[2] = {x, x};
    assert_int_equal(clrun_exec_run(d, twice, 2), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clrun_last_error(ctx), "inputs 'a' and 'b' are the same buffer"));
    float host[N];
    assert_int_equal(clrun_buffer_read(ctx, &x, host), CLRUN_OK); /* nothing was consumed */
    assert_int_equal(clrun_exec_run(k, twice, 2), CLRUN_OK);     /* both kept: read twice */
    assert_output_counts(k, 2, 2);
    clrun_exec_destroy(d);
    clrun_exec_destroy(k);
    assert_int_equal(clrun_free(ctx, &x), CLRUN_OK);
    assert_int_equal(in_use(ctx), 0);
    clrun_graph_destroy(donating);
    clrun_graph_destroy(keeping);
    clrun_context_destroy(ctx);
}

/* A failed call changes nothing: the previous run's outputs stay readable. */
static void a_refused_run_keeps_the_previous_outputs(void **state)
{
    (void)state;
    clrun_context *ctx = context();
    clrun_graph *g = neg_graph(false);
    clrun_exec *exec = NULL;
    assert_int_equal(clrun_exec_create(ctx, g, NULL, &exec), CLRUN_OK);
    clrun_buffer x = counting_buffer(ctx, 1), small;
    assert_int_equal(clrun_exec_run(exec, &x, 1), CLRUN_OK);
    assert_int_equal(clrun_alloc(ctx, 8, &small), CLRUN_OK);
    assert_int_equal(clrun_exec_run(exec, &small, 1), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(clrun_exec_run(exec, NULL, 1), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clrun_last_error(ctx), "inputs is NULL"));
    assert_output_counts(exec, -1, -1);
    clrun_exec_destroy(exec);
    assert_int_equal(clrun_free(ctx, &x), CLRUN_OK);
    assert_int_equal(clrun_free(ctx, &small), CLRUN_OK);
    clrun_graph_destroy(g);
    clrun_context_destroy(ctx);
}

/* An output handed to the caller is the caller's: it can be donated to the next run. */
static void a_taken_output_can_be_donated_to_the_next_run(void **state)
{
    (void)state;
    clrun_context *ctx = context();
    clrun_graph *g = neg_graph(true);
    clrun_exec *exec = NULL;
    assert_int_equal(clrun_exec_create(ctx, g, NULL, &exec), CLRUN_OK);
    clrun_buffer x = counting_buffer(ctx, 1), y;
    assert_int_equal(clrun_exec_run(exec, &x, 1), CLRUN_OK);
    assert_int_equal(clrun_exec_take_output(exec, 0, &y), CLRUN_OK);
    cl_mem mem;
    assert_int_equal(clrun_exec_output(exec, 0, &mem, NULL), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clrun_last_error(ctx), "was taken"));
    assert_int_equal(clrun_exec_run(exec, &y, 1), CLRUN_OK); /* neg(neg(x)) = x */
    assert_output_counts(exec, 1, 1);
    assert_int_equal(clrun_free(ctx, &y), CLRUN_ERROR_DONATED);
    clrun_exec_destroy(exec);
    assert_int_equal(in_use(ctx), 0);
    clrun_graph_destroy(g);
    clrun_context_destroy(ctx);
}

/* In every mode the taken output is a buffer of the caller's with the output's bytes. */
static void a_taken_output_holds_the_output_in_every_mode(void **state)
{
    (void)state;
    static const clrun_exec_mode modes[] = {CLRUN_EXEC_POOLED, CLRUN_EXEC_NAIVE, CLRUN_EXEC_PLANNED};
    clrun_context *ctx = context();
    clrun_graph *g = neg_graph(false);
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        clrun_exec_options o;
        clrun_exec_options_init(&o);
        o.mode = modes[m];
        clrun_exec *exec = NULL;
        assert_int_equal(clrun_exec_create(ctx, g, &o, &exec), CLRUN_OK);
        clrun_buffer x = counting_buffer(ctx, 3), y;
        assert_int_equal(clrun_exec_run(exec, &x, 1), CLRUN_OK);
        assert_int_equal(clrun_exec_take_output(exec, 0, &y), CLRUN_OK);
        clrun_exec_destroy(exec);
        float got[N];
        assert_int_equal(clrun_buffer_read(ctx, &y, got), CLRUN_OK);
        for (int i = 0; i < N; i++)
            assert_true(got[i] == -(3.0f + (float)i));
        assert_int_equal(clrun_free(ctx, &y), CLRUN_OK);
        assert_int_equal(clrun_free(ctx, &x), CLRUN_OK);
    }
    assert_int_equal(in_use(ctx), 0);
    clrun_graph_destroy(g);
    clrun_context_destroy(ctx);
}

/* A reset would pull the weights and outputs from under a live executor. */
static void a_reset_with_a_live_executor_is_refused(void **state)
{
    (void)state;
    clrun_context *ctx = context();
    clrun_graph *g = neg_graph(false);
    clrun_exec *exec = NULL;
    assert_int_equal(clrun_exec_create(ctx, g, NULL, &exec), CLRUN_OK);
    clrun_buffer x = counting_buffer(ctx, 1);
    assert_int_equal(clrun_exec_run(exec, &x, 1), CLRUN_OK);
    assert_int_equal(clrun_pool_reset(ctx), CLRUN_ERROR_BUSY);
    assert_non_null(strstr(clrun_last_error(ctx), "belongs to an executor"));
    assert_output_counts(exec, -1, -1);
    clrun_exec_destroy(exec);
    assert_int_equal(clrun_pool_reset(ctx), CLRUN_OK);
    float host[N];
    assert_int_equal(clrun_buffer_read(ctx, &x, host), CLRUN_ERROR_INVALID_ARGUMENT); /* reset */
    clrun_graph_destroy(g);
    clrun_context_destroy(ctx);
}

/* A view of a kept input is the caller's buffer, read-only: an elementwise op after it writes its
 * output elsewhere, and the view itself costs no memory. */
static void a_view_of_a_kept_input_is_never_written(void **state)
{
    (void)state;
    clrun_context *ctx = context();
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("view", &g), CLRUN_OK);
    clrun_tensor_type t = vector_type();
    clrun_tensor_id x, v, y;
    clrun_attr shape = {.name = "shape", .kind = CLRUN_ATTR_INTS, .ints = {8, 8}, .count = 2};
    const char *nv[] = {"v"}, *ny[] = {"y"};
    assert_int_equal(clrun_graph_add_input(g, "x", &t, false, &x), CLRUN_OK);
    assert_int_equal(clrun_graph_add_node(g, "reshape", &x, 1, nv, 1, &shape, 1, &v), CLRUN_OK);
    assert_int_equal(clrun_graph_add_node(g, "neg", &v, 1, ny, 1, NULL, 0, &y), CLRUN_OK);
    assert_int_equal(clrun_graph_mark_output(g, y), CLRUN_OK);
    clrun_exec *exec = NULL;
    assert_int_equal(clrun_exec_create(ctx, g, NULL, &exec), CLRUN_OK);
    clrun_buffer xb = counting_buffer(ctx, 1);
    assert_int_equal(clrun_exec_run(exec, &xb, 1), CLRUN_OK);
    assert_output_counts(exec, -1, -1);
    float host[N];
    assert_int_equal(clrun_buffer_read(ctx, &xb, host), CLRUN_OK);
    for (int i = 0; i < N; i++)
        assert_true(host[i] == 1.0f + (float)i);
    clrun_exec_stats s;
    assert_int_equal(clrun_exec_stats_get(exec, &s), CLRUN_OK);
    assert_int_equal(s.views, 1);
    assert_int_equal(s.peak_bytes, 2 * N * sizeof(float)); /* x and y; v is x's bytes */
    clrun_exec_destroy(exec);
    assert_int_equal(clrun_free(ctx, &xb), CLRUN_OK);
    clrun_graph_destroy(g);
    clrun_context_destroy(ctx);
}

/* Every public call that takes a handle answers NULL with an error or a neutral value. */
static void public_calls_take_null(void **state)
{
    (void)state;
    assert_null(clrun_context_cl(NULL));
    assert_null(clrun_context_cl_device(NULL));
    assert_null(clrun_context_device(NULL));
    assert_false(clrun_context_out_of_order(NULL));
    assert_null(clrun_context_queue(NULL));
    assert_int_equal(clrun_pool_check(NULL), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(clrun_pool_reset(NULL), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(clrun_pool_trim(NULL, NULL), CLRUN_ERROR_INVALID_ARGUMENT);
    clrun_memory_reset_peaks(NULL);
    const clrun_exec_span *spans = (const clrun_exec_span *)&spans;
    assert_int_equal(clrun_exec_profile(NULL, &spans), 0);
    assert_null(spans);
    const char *const *names = (const char *const *)&names;
    assert_int_equal(clrun_exec_unused_donations(NULL, &names), 0);
    assert_null(names);
    clrun_program_stats stats;
    memset(&stats, 0xff, sizeof stats);
    clrun_program_stats_get(NULL, &stats);
    assert_int_equal(stats.cache_hits, 0);
    clrun_program_stats_get(NULL, NULL);
    clrun_memory_stats ms;
    assert_int_equal(clrun_memory_stats_get(NULL, &ms), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(clrun_exec_run(NULL, NULL, 0), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(clrun_exec_stats_get(NULL, NULL), CLRUN_ERROR_INVALID_ARGUMENT);
    clrun_buffer b;
    assert_int_equal(clrun_exec_take_output(NULL, 0, &b), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(clrun_free(NULL, &b), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(clrun_buffer_read(NULL, &b, &ms), CLRUN_ERROR_INVALID_ARGUMENT);
    clrun_exec_destroy(NULL);
    clrun_context_destroy(NULL);
}

int main(void)
{
    clrun_test_device_environment(cache_root, sizeof cache_root);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(freeing_a_consumed_donated_input_is_refused_and_changes_nothing),
        cmocka_unit_test(a_consumed_donated_input_is_refused_by_another_executor),
        cmocka_unit_test(a_double_free_says_so),
        cmocka_unit_test(the_same_buffer_twice_is_refused_when_one_is_donated),
        cmocka_unit_test(a_refused_run_keeps_the_previous_outputs),
        cmocka_unit_test(a_taken_output_can_be_donated_to_the_next_run),
        cmocka_unit_test(a_taken_output_holds_the_output_in_every_mode),
        cmocka_unit_test(a_reset_with_a_live_executor_is_refused),
        cmocka_unit_test(a_view_of_a_kept_input_is_never_written),
        cmocka_unit_test(public_calls_take_null),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    clrun_test_remove_dir(cache_root);
    return failed;
}
