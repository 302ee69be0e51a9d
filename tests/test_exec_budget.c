/* An executor under a memory budget (clrun_exec_options.memory_budget): a graph whose skip
 * tensor is alive across its peak fits a budget below what it holds as given by recomputing that
 * tensor after the peak, and gives the same bits in every executor mode, with fusion on and off;
 * a budget above what it holds changes nothing; a budget no rewrite meets is refused with the
 * least found, leaving nothing allocated. Runs on a real device (POCL in CI). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <clrun/clrun.h>

#include "device_test.h"
#include "exec/exec_internal.h"

/* The rate these tests restore after setting their own: fixed, never measured (a measured
 * rate depends on the machine's load; test_exec_offload.c tests the measurement). */
#define FIXED_RATE "10"

static char cache_root[512];

enum { ROWS = 64, D = 256, WIDE = 1024 };

/* s is made early and read by the last node: alive across the wide middle, where the peak is. */
/* tests/data/graphs/skip.graph: a skip connection s alive across the wide middle's peak. */
#define SKIP_GRAPH "tests/data/graphs/skip.graph"

typedef struct fixture {
    clrun_context *ctx;
    clrun_graph *g;
    float x[ROWS * D];
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    char err[512];
    /* recomputing all but free: the fixture's context recomputes s, never offloads it
     * (test_exec_offload.c); the rate is read when a context is created */
    setenv("CLRUN_OFFLOAD_RATE", "1e30", 1);
    clrun_status s = f ? clrun_context_create(NULL, &f->ctx) : CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    setenv("CLRUN_OFFLOAD_RATE", FIXED_RATE, 1);
    char path[4096];
    clrun_test_source_path(SKIP_GRAPH, path, sizeof path);
    if (f == NULL || s != CLRUN_OK || clrun_graph_load(path, &f->g, err, sizeof err) != CLRUN_OK)
        return -1;
    assert_int_equal(clrun_graph_example_input(f->g, 0, 7, f->x, sizeof f->x), CLRUN_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    clrun_graph_destroy(f->g);
    clrun_context_destroy(f->ctx);
    free(f);
    return 0;
}

static clrun_exec_options options(clrun_exec_mode mode, int fusion, uint64_t budget)
{
    clrun_exec_options o;
    clrun_exec_options_init(&o);
    o.mode = mode;
    o.fusion = fusion;
    o.memory_budget = budget;
    return o;
}

/* One run of exec on the fixture's x; y into out. */
static void run(fixture *f, clrun_exec *exec, float *out)
{
    clrun_buffer in;
    assert_int_equal(clrun_alloc(f->ctx, sizeof f->x, &in), CLRUN_OK);
    assert_int_equal(clrun_buffer_write(f->ctx, &in, f->x), CLRUN_OK);
    assert_int_equal(clrun_exec_run(exec, &in, 1), CLRUN_OK);
    assert_int_equal(clrun_exec_read_output(exec, 0, out, ROWS * D * sizeof *out), CLRUN_OK);
    clrun_free(f->ctx, &in);
}

/* What the graph holds as given, in planned mode (a budget no graph reaches measures it). */
static uint64_t held_as_given(fixture *f, int fusion)
{
    clrun_exec_options o = options(CLRUN_EXEC_PLANNED, fusion, UINT64_MAX);
    clrun_exec *exec = NULL;
    assert_int_equal(clrun_exec_create(f->ctx, f->g, &o, &exec), CLRUN_OK);
    clrun_exec_stats st;
    assert_int_equal(clrun_exec_stats_get(exec, &st), CLRUN_OK);
    assert_int_equal(st.recomputed_tensors, 0);
    assert_int_equal(st.held_bytes, st.constant_bytes + st.arena_bytes);
    clrun_exec_destroy(exec);
    return st.held_bytes;
}

static void a_budget_below_the_peak_recomputes_the_skip_with_the_same_bits(void **state)
{
    fixture *f = *state;
    static float want[ROWS * D], got[ROWS * D];
    clrun_exec *plain = NULL;
    assert_int_equal(clrun_exec_create(f->ctx, f->g, NULL, &plain), CLRUN_OK);
    run(f, plain, want);
    clrun_exec_destroy(plain);
    const clrun_exec_mode modes[] = {CLRUN_EXEC_PLANNED, CLRUN_EXEC_POOLED, CLRUN_EXEC_NAIVE};
    for (int fusion = -1; fusion <= 1; fusion += 2) {
        uint64_t given = held_as_given(f, fusion);
        for (size_t m = 0; m < sizeof modes / sizeof *modes; m++) {
            clrun_exec_options o = options(modes[m], fusion, given - 1);
            clrun_exec *exec = NULL;
            assert_int_equal(clrun_exec_create(f->ctx, f->g, &o, &exec), CLRUN_OK);
            clrun_exec_stats st;
            assert_int_equal(clrun_exec_stats_get(exec, &st), CLRUN_OK);
            assert_int_equal(st.budget_bytes, given - 1);
            assert_true(st.held_bytes <= given - 1);
            assert_true(st.recomputed_tensors >= 1);
            assert_true(st.recomputed_nodes >= st.recomputed_tensors);
            assert_true(st.recomputed_bytes >= ROWS * D * sizeof(float)); /* s at least */
            assert_true(st.recomputed_flops > 0);
            const char *const *names = NULL;
            int32_t n = clrun_exec_recomputed(exec, &names);
            assert_int_equal(n, st.recomputed_tensors);
            bool skip = false; /* s, the skip, is among them */
            for (int32_t i = 0; i < n; i++)
                skip = skip || strcmp(names[i], "s") == 0;
            assert_true(skip);
            memset(got, 0, sizeof got);
            run(f, exec, got);
            run(f, exec, got); /* twice: the arena's reuse keeps the bits */
            assert_memory_equal(got, want, sizeof want);
            if (modes[m] == CLRUN_EXEC_PLANNED) /* what it holds is its weights and arena */
                assert_int_equal(st.held_bytes, st.constant_bytes + st.arena_bytes);
            clrun_exec_destroy(exec);
        }
    }
}

static void a_budget_above_what_it_holds_changes_nothing(void **state)
{
    fixture *f = *state;
    uint64_t given = held_as_given(f, 0);
    clrun_exec_options o = options(CLRUN_EXEC_PLANNED, 0, given);
    clrun_exec *exec = NULL;
    assert_int_equal(clrun_exec_create(f->ctx, f->g, &o, &exec), CLRUN_OK);
    clrun_exec_stats st;
    assert_int_equal(clrun_exec_stats_get(exec, &st), CLRUN_OK);
    assert_int_equal(st.recomputed_tensors, 0);
    assert_int_equal(st.recomputed_nodes, 0);
    assert_int_equal(clrun_exec_recomputed(exec, NULL), 0);
    assert_int_equal(st.held_bytes, given);
    clrun_exec_destroy(exec);
}

static void a_budget_nothing_meets_is_refused_with_the_least(void **state)
{
    fixture *f = *state;
    clrun_memory_stats before, after;
    assert_int_equal(clrun_memory_stats_get(f->ctx, &before), CLRUN_OK);
    clrun_exec_options o = options(CLRUN_EXEC_CONTEXT, 0, 64 * 1024);
    clrun_exec *exec = (clrun_exec *)&o; /* must come back NULL */
    assert_int_equal(clrun_exec_create(f->ctx, f->g, &o, &exec), CLRUN_ERROR_OUT_OF_MEMORY);
    assert_null(exec);
    const char *why = clrun_last_error(f->ctx);
    assert_non_null(strstr(why, "memory budget of 64.00 KiB"));
    assert_non_null(strstr(why, "at best"));
    assert_non_null(strstr(why, "its constants"));
    assert_int_equal(clrun_memory_stats_get(f->ctx, &after), CLRUN_OK);
    assert_int_equal(after.in_use, before.in_use);
}

/* A context whose pool's limit is `limit` (tuning off: its own buffers would meet it first). */
static clrun_context *limited_context(uint64_t limit, const char *allocator)
{
    setenv("CLRUN_TUNE", "0", 1);
    clrun_context_options co;
    clrun_context_options_init(&co);
    co.pool_limit = limit;
    co.allocator = allocator;
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(&co, &ctx), CLRUN_OK);
    return ctx;
}

/* Without a budget, the pool's limit is one where the graph as given (and its input) does not
 * fit it: planned and pooled, the skip is recomputed or offloaded and the bits stay; a limit no rewrite meets keeps the
 * failure it had (planned: at creation, with the least found; pooled: at run time). */
static void the_pools_limit_is_a_budget_where_the_graph_does_not_fit(void **state)
{
    fixture *f = *state;
    static float want[ROWS * D], got[ROWS * D];
    clrun_exec *plain = NULL;
    assert_int_equal(clrun_exec_create(f->ctx, f->g, NULL, &plain), CLRUN_OK);
    run(f, plain, want);
    clrun_exec_destroy(plain);
    uint64_t given = held_as_given(f, 0);
    const char *allocators[] = {"planned", "tlsf"};
    for (size_t a = 0; a < 2; a++) {
        clrun_context *ctx = limited_context(given + 8192, allocators[a]); /* x beside */
        fixture g = *f;
        g.ctx = ctx;
        clrun_exec_options o = options(CLRUN_EXEC_CONTEXT, 0, 0);
        clrun_exec *exec = NULL;
        if (clrun_exec_create(ctx, f->g, &o, &exec) != CLRUN_OK)
            fail_msg("%s: %s", allocators[a], clrun_last_error(ctx));
        clrun_exec_stats st;
        assert_int_equal(clrun_exec_stats_get(exec, &st), CLRUN_OK);
        assert_true(st.budget_bytes < given && st.held_bytes <= st.budget_bytes);
        assert_true(st.recomputed_tensors + st.offloaded_tensors >= 1); /* s, either way */
        memset(got, 0, sizeof got);
        run(&g, exec, got);
        assert_memory_equal(got, want, sizeof want);
        clrun_exec_destroy(exec);
        clrun_memory_stats m;
        assert_int_equal(clrun_memory_stats_get(ctx, &m), CLRUN_OK);
        assert_int_equal(m.in_use, 0);
        clrun_context_destroy(ctx);
    }
    /* far below (the weights and 128 KiB): as without the rewrite, with what recomputing
     * reaches said */
    const uint64_t weights = (256 * 256 + 256 * 1024 + 1024 * 1024 + 1024 * 256) * sizeof(float);
    clrun_context *ctx = limited_context(weights + 128 * 1024, "planned");
    clrun_exec *exec = NULL;
    assert_int_equal(clrun_exec_create(ctx, f->g, NULL, &exec), CLRUN_ERROR_OUT_OF_MEMORY);
    assert_null(exec);
    const char *why = clrun_last_error(ctx);
    assert_non_null(strstr(why, "recomputing or offloading does not fit it"));
    assert_non_null(strstr(why, "at best"));
    clrun_context_destroy(ctx);
    ctx = limited_context(weights + 128 * 1024, "tlsf");
    assert_int_equal(clrun_exec_create(ctx, f->g, NULL, &exec), CLRUN_OK);
    clrun_buffer in;
    assert_int_equal(clrun_alloc(ctx, sizeof f->x, &in), CLRUN_OK);
    assert_int_equal(clrun_exec_run(exec, &in, 1), CLRUN_ERROR_OUT_OF_MEMORY);
    clrun_free(ctx, &in);
    clrun_exec_destroy(exec);
    clrun_context_destroy(ctx);
    unsetenv("CLRUN_TUNE");
}

/* ---- a second cut: tests/data/graphs/two_skips.graph ------------------------------------- */

#define TWO_SKIPS_GRAPH "tests/data/graphs/two_skips.graph"

/* The options of these tests: the planner's search short (a trial's is 0.25 s, the final plan
 * the caller's), which the small graph does not need, to keep the tests fast. */
static clrun_exec_options quick(clrun_exec_mode mode, int fusion, uint64_t budget)
{
    clrun_exec_options o = options(mode, fusion, budget);
    o.plan_time_limit_s = 0.05;
    return o;
}

static clrun_graph *load_two_skips(void)
{
    char path[4096], err[512];
    clrun_test_source_path(TWO_SKIPS_GRAPH, path, sizeof path);
    clrun_graph *g = NULL;
    if (clrun_graph_load(path, &g, err, sizeof err) != CLRUN_OK)
        fail_msg("%s: %s", path, err);
    return g;
}

/* One run of g's executor on x, y into out. */
static void run_on(clrun_context *ctx, clrun_exec *exec, const float *x, float *out)
{
    clrun_buffer in;
    assert_int_equal(clrun_alloc(ctx, ROWS * D * sizeof *x, &in), CLRUN_OK);
    assert_int_equal(clrun_buffer_write(ctx, &in, x), CLRUN_OK);
    assert_int_equal(clrun_exec_run(exec, &in, 1), CLRUN_OK);
    assert_int_equal(clrun_exec_read_output(exec, 0, out, ROWS * D * sizeof *out), CLRUN_OK);
    clrun_free(ctx, &in);
}

static uint64_t held_by_graph(clrun_context *ctx, const clrun_graph *g, int fusion)
{
    clrun_exec_options o = quick(CLRUN_EXEC_PLANNED, fusion, UINT64_MAX);
    clrun_exec *exec = NULL;
    assert_int_equal(clrun_exec_create(ctx, g, &o, &exec), CLRUN_OK);
    clrun_exec_stats st;
    assert_int_equal(clrun_exec_stats_get(exec, &st), CLRUN_OK);
    clrun_exec_destroy(exec);
    return st.held_bytes;
}

static bool names_have(const char *const *names, int32_t n, const char *name)
{
    for (int32_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return true;
    return false;
}

/* Two regions as wide, a skip across each: dropping s at the first region's peak leaves the
 * second's as high, so a budget below what the graph holds needs t dropped too, at a second
 * cut (t is made after the first peak: no cut there can drop it). Every mode, fusion off and
 * on, twice in a row: the bits of the run without a budget. */
static void a_second_cut_meets_a_budget_where_the_peak_moves(void **state)
{
    fixture *f = *state; /* its context recomputes */
    clrun_graph *g = load_two_skips();
    static float x[ROWS * D], want[ROWS * D], got[ROWS * D];
    assert_int_equal(clrun_graph_example_input(g, 0, 7, x, sizeof x), CLRUN_OK);
    clrun_exec *plain = NULL;
    assert_int_equal(clrun_exec_create(f->ctx, g, NULL, &plain), CLRUN_OK);
    run_on(f->ctx, plain, x, want);
    clrun_exec_destroy(plain);
    const clrun_exec_mode modes[] = {CLRUN_EXEC_PLANNED, CLRUN_EXEC_POOLED, CLRUN_EXEC_NAIVE};
    for (int fusion = -1; fusion <= 1; fusion += 2) {
        uint64_t given = held_by_graph(f->ctx, g, fusion);
        /* fewer rounds: fused, the planned mode alone */
        size_t count = fusion > 0 && clrun_test_rounds(3) < 3 ? 1 : sizeof modes / sizeof *modes;
        for (size_t m = 0; m < count; m++) {
            clrun_exec_options o = quick(modes[m], fusion, given - 1);
            clrun_exec *exec = NULL;
            if (clrun_exec_create(f->ctx, g, &o, &exec) != CLRUN_OK)
                fail_msg("fusion %d, mode %d: %s", fusion, (int)modes[m], clrun_last_error(f->ctx));
            clrun_exec_stats st;
            assert_int_equal(clrun_exec_stats_get(exec, &st), CLRUN_OK);
            assert_true(st.held_bytes <= given - 1);
            const char *const *names = NULL;
            int32_t n = clrun_exec_recomputed(exec, &names);
            assert_int_equal(n, st.recomputed_tensors);
            if (fusion < 0) { /* unfused, the regions are alike: both skips dropped */
                assert_true(names_have(names, n, "s"));
                assert_true(names_have(names, n, "t"));
                assert_true(st.recomputed_bytes >= 2 * ROWS * D * sizeof(float));
            }
            for (int twice = 0; twice < 2; twice++) {
                memset(got, 0, sizeof got);
                run_on(f->ctx, exec, x, got);
                assert_memory_equal(got, want, sizeof want);
            }
            clrun_exec_destroy(exec);
        }
    }
    /* above what it holds: nothing changes */
    uint64_t given = held_by_graph(f->ctx, g, -1);
    clrun_exec_options o = quick(CLRUN_EXEC_PLANNED, -1, given);
    clrun_exec *exec = NULL;
    assert_int_equal(clrun_exec_create(f->ctx, g, &o, &exec), CLRUN_OK);
    clrun_exec_stats st;
    assert_int_equal(clrun_exec_stats_get(exec, &st), CLRUN_OK);
    assert_int_equal(st.recomputed_tensors + st.offloaded_tensors, 0);
    assert_int_equal(st.held_bytes, given);
    clrun_exec_destroy(exec);
    /* one nothing meets: refused with the least, after more than one cut, nothing held */
    clrun_memory_stats before, after;
    assert_int_equal(clrun_memory_stats_get(f->ctx, &before), CLRUN_OK);
    o = quick(CLRUN_EXEC_CONTEXT, -1, 64 * 1024);
    exec = (clrun_exec *)&o;
    assert_int_equal(clrun_exec_create(f->ctx, g, &o, &exec), CLRUN_ERROR_OUT_OF_MEMORY);
    assert_null(exec);
    const char *why = clrun_last_error(f->ctx);
    assert_non_null(strstr(why, "memory budget of 64.00 KiB"));
    assert_non_null(strstr(why, "at best"));
    assert_null(strstr(why, "1 cut tried"));
    assert_non_null(strstr(why, "cuts tried"));
    assert_int_equal(clrun_memory_stats_get(f->ctx, &after), CLRUN_OK);
    assert_int_equal(after.in_use, before.in_use);
    clrun_graph_destroy(g);
}

/* The pooled mode under tlsf and buddy, recomputing (rate 1e30) and offloading (rate 0) at
 * both cuts: the bits of the run without a budget (CLRUN_TEST_ROUNDS below 3: two of the four). */
static void a_second_cut_keeps_the_bits_under_each_allocator(void **state)
{
    (void)state;
    const char *strategies[] = {"tlsf", "buddy"};
    const char *rates[] = {"1e30", "0"};
    static float x[ROWS * D], want[ROWS * D], got[ROWS * D];
    bool all = clrun_test_rounds(3) >= 3; /* fewer rounds: tlsf recomputing, buddy offloading */
    for (size_t r = 0; r < 2; r++) {
        for (size_t i = 0; i < 2; i++) {
            if (!all && i != r)
                continue;
            clrun_context_options co;
            clrun_context_options_init(&co);
            co.allocator = strategies[i];
            clrun_context *ctx = NULL;
            setenv("CLRUN_OFFLOAD_RATE", rates[r], 1);
            assert_int_equal(clrun_context_create(&co, &ctx), CLRUN_OK);
            setenv("CLRUN_OFFLOAD_RATE", FIXED_RATE, 1);
            clrun_graph *g = load_two_skips();
            assert_int_equal(clrun_graph_example_input(g, 0, 7, x, sizeof x), CLRUN_OK);
            clrun_exec_options po = quick(CLRUN_EXEC_POOLED, -1, 0);
            clrun_exec *plain = NULL;
            assert_int_equal(clrun_exec_create(ctx, g, &po, &plain), CLRUN_OK);
            run_on(ctx, plain, x, want);
            clrun_exec_destroy(plain);
            clrun_exec_options o = quick(CLRUN_EXEC_POOLED, -1, held_by_graph(ctx, g, -1) - 1);
            clrun_exec *exec = NULL;
            if (clrun_exec_create(ctx, g, &o, &exec) != CLRUN_OK)
                fail_msg("%s, rate %s: %s", strategies[i], rates[r], clrun_last_error(ctx));
            clrun_exec_stats st;
            assert_int_equal(clrun_exec_stats_get(exec, &st), CLRUN_OK);
            assert_string_equal(st.allocator, strategies[i]);
            const char *const *names = NULL;
            int32_t n = r == 0 ? clrun_exec_recomputed(exec, &names) : clrun_exec_offloaded(exec, &names);
            assert_true(names_have(names, n, "s"));
            assert_true(names_have(names, n, "t"));
            for (int twice = 0; twice < 2; twice++) {
                memset(got, 0, sizeof got);
                run_on(ctx, exec, x, got);
                assert_memory_equal(got, want, sizeof want);
            }
            clrun_exec_destroy(exec);
            clrun_memory_stats m;
            assert_int_equal(clrun_memory_stats_get(ctx, &m), CLRUN_OK);
            assert_int_equal(m.in_use, 0);
            clrun_graph_destroy(g);
            clrun_context_destroy(ctx);
        }
    }
}

/* Both skips offloaded (rate 0) at the two cuts, the copies on a second queue beside the
 * kernels (CLRUN_OFFLOAD_OVERLAP, the default) and on the kernels' queue in order: the bits of
 * the run without a budget, twice in a row, planned and pooled (tlsf), fusion off (each
 * executor's search prepares several trials: the naive mode, fusion and the other allocators
 * are in test_exec_offload.c, on a graph of one cut, and the trainer in test_train.c). Beside,
 * the planned executor's copy back of the second cut is issued early, where the budget allows
 * (the planner sees the longer life), and its copy queue exists; in order, none. With
 * CLRUN_TEST_ROUNDS below 3, the planned mode alone. */
static void offloaded_copies_beside_the_kernels_keep_the_bits(void **state)
{
    (void)state;
    static float x[ROWS * D], want[ROWS * D], got[ROWS * D];
    bool all = clrun_test_rounds(3) >= 3;
    typedef struct variant {
        clrun_exec_mode mode;
        int fusion;
    } variant;
    const variant variants[] = {{CLRUN_EXEC_PLANNED, -1}, {CLRUN_EXEC_POOLED, -1}};
    for (int overlap = 1; overlap >= 0; overlap--) {
        clrun_context *ctx = NULL;
        setenv("CLRUN_OFFLOAD_RATE", "0", 1);
        setenv("CLRUN_OFFLOAD_OVERLAP", overlap ? "1" : "0", 1);
        assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
        setenv("CLRUN_OFFLOAD_RATE", FIXED_RATE, 1);
        unsetenv("CLRUN_OFFLOAD_OVERLAP");
        clrun_graph *g = load_two_skips();
        assert_int_equal(clrun_graph_example_input(g, 0, 7, x, sizeof x), CLRUN_OK);
        clrun_exec *plain = NULL;
        assert_int_equal(clrun_exec_create(ctx, g, NULL, &plain), CLRUN_OK);
        run_on(ctx, plain, x, want);
        clrun_exec_destroy(plain);
        for (size_t v = 0; v < (all ? 2u : 1u); v++) {
            uint64_t given = held_by_graph(ctx, g, variants[v].fusion);
            clrun_exec_options o = quick(variants[v].mode, variants[v].fusion, given - 1);
            clrun_exec *exec = NULL;
            if (clrun_exec_create(ctx, g, &o, &exec) != CLRUN_OK)
                fail_msg("overlap %d, variant %zu: %s", overlap, v, clrun_last_error(ctx));
            clrun_exec_stats st;
            assert_int_equal(clrun_exec_stats_get(exec, &st), CLRUN_OK);
            assert_true(st.held_bytes <= given - 1);
            assert_int_equal(st.recomputed_tensors, 0);
            const char *const *names = NULL;
            int32_t n = clrun_exec_offloaded(exec, &names);
            if (n < 1 || !names_have(names, n, "s"))
                fail_msg("overlap %d, variant %zu: %d offloaded", overlap, v, (int)n);
            for (int twice = 0; twice < 2; twice++) {
                memset(got, 0, sizeof got);
                run_on(ctx, exec, x, got);
                assert_memory_equal(got, want, sizeof want);
            }
            /* the copies took the second queue, or did not */
            assert_int_equal(exec->copy_queue != NULL, overlap);
            assert_int_equal(exec->flight_count, 0);
            if (overlap && v == 0) {
                /* some copy back issued before the node right ahead of its reader */
                const clrun_graph *run = exec->graph;
                bool early = false;
                for (int32_t k = 0; k + 1 < run->node_count; k++)
                    if (strcmp(run->nodes[k].op->name, "reload") == 0) {
                        clrun_tensor_id back = run->nodes[k].outputs[0];
                        const clrun__node *next = &run->nodes[k + 1];
                        bool reads = false;
                        for (int j = 0; j < next->input_count; j++)
                            reads = reads || next->inputs[j] == back;
                        early = early || !reads;
                    }
                assert_true(early);
            }
            clrun_exec_destroy(exec);
        }
        clrun_memory_stats mem;
        assert_int_equal(clrun_memory_stats_get(ctx, &mem), CLRUN_OK);
        assert_int_equal(mem.in_use, 0);
        clrun_graph_destroy(g);
        clrun_context_destroy(ctx);
    }
}

int main(void)
{
    setenv("CLRUN_OFFLOAD_RATE", FIXED_RATE, 1);
    clrun_test_device_environment(cache_root, sizeof cache_root);
    CLRUN_TEST_FILTERS_FROM_ENVIRONMENT();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_budget_below_the_peak_recomputes_the_skip_with_the_same_bits),
        cmocka_unit_test(a_budget_above_what_it_holds_changes_nothing),
        cmocka_unit_test(a_budget_nothing_meets_is_refused_with_the_least),
        cmocka_unit_test(the_pools_limit_is_a_budget_where_the_graph_does_not_fit),
        cmocka_unit_test(a_second_cut_meets_a_budget_where_the_peak_moves),
        cmocka_unit_test(a_second_cut_keeps_the_bits_under_each_allocator),
        cmocka_unit_test(offloaded_copies_beside_the_kernels_keep_the_bits),
    };
    int failed = cmocka_run_group_tests(tests, setup, teardown);
    clrun_test_remove_dir(cache_root);
    return failed;
}
