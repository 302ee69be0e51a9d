/* Host offload under a memory budget (graph/offload.h, exec/exec_offload.c): the rewrite
 * itself without OpenCL (where the copies go, who reads what, the schedule keeping the host
 * copy out of the device's accounting, refusals that change nothing, the cost rule); then on a
 * device, a budget met by offloading gives the same bits as the graph as given in every
 * executor mode and allocator strategy, with fusion on and off; a budget that recomputation
 * alone cannot meet (recomputing the skip needs a larger tensor again) is met by offload; and
 * a budget nothing meets is refused with the least, leaving the pool as it was. */
#include <math.h>
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
#include <clrun/remat.h>

#include "core/options.h"
#include "device_test.h"
#include "exec/exec_internal.h"
#include "exec/exec_share.h"

/* The rate these tests restore after setting their own: fixed, never measured (a measured
 * rate depends on the machine's load; the_rate_is_measured_once_and_remembered tests it). */
#define FIXED_RATE "10"
#include "exec/schedule.h"
#include "graph/graph.h"
#include "graph/offload.h"

static char cache_root[512];

enum { ROWS = 64, D = 256 };

/* s is made early and read by the last node: alive across the wide middle, where the peak is. */
/* tests/data/graphs/skip.graph: a skip connection s alive across the wide middle's peak. */
static clrun_graph *load_skip(void)
{
    char path[4096], err[512];
    clrun_graph *g = NULL;
    clrun_test_source_path("tests/data/graphs/skip.graph", path, sizeof path);
    if (clrun_graph_load(path, &g, err, sizeof err) != CLRUN_OK)
        fail_msg("%s", err);
    return g;
}

/* s (1 MiB) is a slice of big (1.5 MiB) and read right after the middle's peak, where h3 is
 * still alive: recomputing it there holds big again beside h3, more than the peak it was to
 * lower; a copy back holds s alone. */
static const char funnel_graph[] =
    "graph funnel\n"
    "input x: f32[64, 16]\n"
    "const wu: f32[16, 6144] normal(0, 0.2) seed=1\n"
    "node big: f32[64, 6144] = matmul(x, wu)\n"
    "node s: f32[64, 4096] = slice(big) axis=1 start=0 end=4096\n"
    "node h1: f32[64, 4096] = gelu(s)\n"
    "node h2: f32[64, 4096] = sigmoid(h1)\n"
    "node h3: f32[64, 4096] = mul(h1, h2)\n"
    "node y: f32[64, 4096] = add(h3, s)\n"
    "output y\n";

/* Two skips across the peak: t = tanh(x) costs one FLOP per element to make again from x,
 * alive anyway; s = relu(m0) costs the matmul again (m0 is dead at the peak). */
static const char two_graph[] =
    "graph two\n"
    "input x: f32[64, 256]\n"
    "const w0: f32[256, 256] normal(0, 0.06) seed=1\n"
    "const w1: f32[256, 1024] normal(0, 0.06) seed=2\n"
    "const w2: f32[1024, 1024] normal(0, 0.03) seed=3\n"
    "const w3: f32[1024, 256] normal(0, 0.03) seed=4\n"
    "node t: f32[64, 256] = tanh(x)\n"
    "node m0: f32[64, 256] = matmul(x, w0)\n"
    "node s: f32[64, 256] = relu(m0)\n"
    "node h1: f32[64, 1024] = matmul(s, w1)\n"
    "node h2: f32[64, 1024] = gelu(h1)\n"
    "node h3: f32[64, 1024] = matmul(h2, w2)\n"
    "node h4: f32[64, 1024] = gelu(h3)\n"
    "node h5: f32[64, 256] = matmul(h4, w3)\n"
    "node y0: f32[64, 256] = add(h5, s)\n"
    "node y: f32[64, 256] = add(y0, t)\n"
    "output y\n";

static clrun_graph *parse(const char *text, size_t length)
{
    clrun_graph *g = NULL;
    char err[512];
    assert_int_equal(clrun_graph_parse(text, length, "test.graph", &g, err, sizeof err), CLRUN_OK);
    return g;
}

/* ---- the rewrite, without OpenCL ----------------------------------------------------------- */

static void the_rewrite_copies_out_after_the_writer_and_back_before_the_reader(void **state)
{
    (void)state;
    clrun_graph *g = load_skip();
    clrun_tensor_id s = clrun__graph_find_ident(g, "s");
    clrun_tensor_id y = clrun__graph_find_ident(g, "y");
    int32_t boundary = g->tensors[y].producer; /* the last node */
    assert_int_equal(boundary, 7);
    clrun__schedule before;
    char err[256];
    assert_int_equal(clrun__schedule_build(g, true, &before, err, sizeof err), CLRUN_OK);
    clrun_tensor_id host = -1;
    clrun__offload_report report;
    assert_int_equal(clrun__graph_offload(g, boundary, &s, 1, &host, &report), CLRUN_OK);
    assert_int_equal(report.offloaded, 1);
    assert_int_equal(report.bytes, ROWS * D * sizeof(float));
    assert_int_equal(report.added_before, 1);
    assert_int_equal(clrun_graph_validate(g), CLRUN_OK);
    assert_int_equal(g->node_count, 10);
    /* s's writer, then the offload; the reload right before y, which reads it instead of s */
    assert_int_equal(g->tensors[s].producer, 1);
    assert_string_equal(g->nodes[2].op->name, "offload");
    assert_int_equal(g->nodes[2].inputs[0], s);
    assert_int_equal(g->nodes[2].outputs[0], host);
    assert_string_equal(g->tensors[host].name, "s.host");
    assert_int_equal(clrun__offload_copy_of("s.host"), 1);
    assert_string_equal(g->nodes[8].op->name, "reload");
    assert_int_equal(g->nodes[8].inputs[0], host);
    clrun_tensor_id back = g->nodes[8].outputs[0];
    assert_string_equal(g->tensors[back].name, "s.reload");
    assert_int_equal(clrun__offload_copy_of("s.reload"), 1);
    assert_int_equal(g->tensors[y].producer, 9);
    assert_true(g->nodes[9].inputs[0] == back || g->nodes[9].inputs[1] == back);
    assert_true(g->nodes[9].inputs[0] != s && g->nodes[9].inputs[1] != s);
    /* the schedule: s dies at h1, its last reader before the boundary, no longer at y; the
     * host copy is out of the device's bytes */
    clrun__schedule after;
    assert_int_equal(clrun__schedule_build(g, true, &after, err, sizeof err), CLRUN_OK);
    assert_int_equal(after.last_use[s], after.step_of_node[3]);
    assert_string_equal(g->tensors[g->nodes[3].outputs[0]].name, "h1");
    assert_true(after.buffers[after.buffer_of[host]].is_host);
    assert_false(after.buffers[after.buffer_of[back]].is_host);
    assert_false(after.buffers[after.buffer_of[s]].is_host);
    assert_int_equal(after.host_buffers, 1);
    assert_int_equal(after.host_bytes, ROWS * D * sizeof(float));
    assert_true(after.lower_bound < before.lower_bound);
    assert_int_equal(after.naive_bytes, before.naive_bytes + ROWS * D * sizeof(float));
    clrun_plan_buffer *items = NULL;
    int32_t *which = NULL;
    size_t n = 0;
    assert_int_equal(clrun__schedule_plan_items(&after, false, &items, &which, &n), CLRUN_OK);
    for (size_t i = 0; i < n; i++)
        assert_false(after.buffers[which[i]].is_host);
    free(items);
    free(which);
    clrun__schedule_free(&before);
    clrun__schedule_free(&after);
    clrun_graph_destroy(g);
}

/* With a lead, the copy back goes that many nodes before its reader, never before the
 * boundary's node: the planner sees its destination alive from there. */
static void a_copy_back_with_a_lead_goes_early_but_after_the_boundary(void **state)
{
    (void)state;
    const int32_t leads[] = {2, 9};
    /* boundary h2 (3): s is read by y (7) after it; the reload before h4 (5) with a lead of
     * 2, before h3 (4, the boundary's next) with one past the boundary */
    const char *before[] = {"h4", "h3"};
    for (int i = 0; i < 2; i++) {
        clrun_graph *g = load_skip();
        clrun_tensor_id s = clrun__graph_find_ident(g, "s");
        assert_int_equal(clrun__graph_offload_lead(g, 3, &s, 1, leads[i], NULL, NULL), CLRUN_OK);
        assert_int_equal(clrun_graph_validate(g), CLRUN_OK);
        int32_t at = -1;
        for (int32_t n = 0; n < g->node_count; n++)
            if (strcmp(g->nodes[n].op->name, "reload") == 0)
                at = n;
        assert_true(at > 0 && at + 1 < g->node_count);
        assert_string_equal(g->tensors[g->nodes[at + 1].outputs[0]].name, before[i]);
        clrun_graph_destroy(g);
    }
}

static void the_rewrite_refuses_what_it_cannot_offload_and_changes_nothing(void **state)
{
    (void)state;
    clrun_graph *g = load_skip();
    int32_t nodes = g->node_count, tensors = g->tensor_count;
    clrun_tensor_id y = clrun__graph_find_ident(g, "y"), x = clrun__graph_find_ident(g, "x");
    clrun_tensor_id h5 = clrun__graph_find_ident(g, "h5"), s = clrun__graph_find_ident(g, "s");
    clrun_tensor_id twice[2] = {s, s};
    assert_int_equal(clrun__graph_offload(g, 7, &y, 1, NULL, NULL), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clrun_graph_last_error(g), "'y'"));
    assert_int_equal(clrun__graph_offload(g, 7, &x, 1, NULL, NULL), CLRUN_ERROR_INVALID_ARGUMENT);
    /* h5 is written at 6 and read at 7: not before a boundary of 3 */
    assert_int_equal(clrun__graph_offload(g, 3, &h5, 1, NULL, NULL), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clrun_graph_last_error(g), "'h5'"));
    assert_int_equal(clrun__graph_offload(g, 7, twice, 2, NULL, NULL), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clrun_graph_last_error(g), "twice"));
    assert_int_equal(clrun__graph_offload(g, 99, &s, 1, NULL, NULL), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(g->node_count, nodes);
    assert_int_equal(g->tensor_count, tensors);
    clrun_graph_destroy(g);
}

static void the_cost_rule_weighs_flops_against_bytes_moved_twice(void **state)
{
    (void)state;
    /* 1000 bytes moved twice at 10 FLOPs per byte: 20000 */
    assert_false(clrun__offload_prefers(20000, 1000, 10.0));
    assert_true(clrun__offload_prefers(20001, 1000, 10.0));
    assert_true(clrun__offload_prefers(1, 1000, 0.0));
    assert_false(clrun__offload_prefers(0, 1000, 0.0));
    /* the rate from timings: 1e9 FLOPs in 0.1 s over 1e8 bytes in 0.1 s */
    assert_true(clrun__offload_rate_of(1e9, 0.1, 1e8, 0.1) == 10.0);
    assert_true(clrun__offload_rate_of(1e9, 0, 1e8, 0.1) == 0);
    assert_true(clrun__offload_rate_of(1e9, 0.1, 1e8, -1) == 0);
    assert_true(clrun__offload_rate_of(1e300, 1e-300, 1, 1) == 0); /* not finite */
    clrun_graph *g = load_skip();
    /* m0 = matmul(x[64,256], w0[256,256]): 2*64*256*256; s = relu: one per element */
    assert_int_equal(clrun__offload_node_flops(g, 0), 2ull * 64 * 256 * 256);
    assert_int_equal(clrun__offload_node_flops(g, 1), 64ull * 256);
    clrun_graph_destroy(g);
    /* the rate is an option like the others: a value that is not a number >= 0 is refused by
     * name, never replaced by the default */
    clrun__options opts;
    char err[512];
    unsetenv("CLRUN_OFFLOAD_RATE"); /* auto: measured on the device */
    assert_int_equal(clrun__options_load(&opts, err, sizeof err), CLRUN_OK);
    assert_true(opts.offload_rate < 0);
    setenv("CLRUN_OFFLOAD_RATE", "Auto", 1);
    assert_int_equal(clrun__options_load(&opts, err, sizeof err), CLRUN_OK);
    assert_true(opts.offload_rate < 0);
    setenv("CLRUN_OFFLOAD_RATE", "2.5", 1);
    assert_int_equal(clrun__options_load(&opts, err, sizeof err), CLRUN_OK);
    assert_true(opts.offload_rate == 2.5);
    const char *bad[] = {"fast", "-1", "nan", "inf", "1e999", "3x"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        setenv("CLRUN_OFFLOAD_RATE", bad[i], 1);
        err[0] = '\0';
        assert_int_equal(clrun__options_load(&opts, err, sizeof err), CLRUN_ERROR_INVALID_OPTION);
        assert_non_null(strstr(err, "CLRUN_OFFLOAD_RATE"));
        assert_non_null(strstr(err, bad[i]));
    }
    setenv("CLRUN_OFFLOAD_RATE", FIXED_RATE, 1);
}

/* ---- on a device --------------------------------------------------------------------------- */

static clrun_exec_options options(clrun_exec_mode mode, int fusion, uint64_t budget)
{
    clrun_exec_options o;
    clrun_exec_options_init(&o);
    o.mode = mode;
    o.fusion = fusion;
    o.memory_budget = budget;
    return o;
}

/* One run of exec on x (`in_bytes`); the output into out (`out_bytes`). */
static void run(clrun_context *ctx, clrun_exec *exec, const float *x, size_t in_bytes, float *out,
                size_t out_bytes)
{
    clrun_buffer in;
    assert_int_equal(clrun_alloc(ctx, in_bytes, &in), CLRUN_OK);
    assert_int_equal(clrun_buffer_write(ctx, &in, x), CLRUN_OK);
    assert_int_equal(clrun_exec_run(exec, &in, 1), CLRUN_OK);
    assert_int_equal(clrun_exec_read_output(exec, 0, out, out_bytes), CLRUN_OK);
    clrun_free(ctx, &in);
}

static uint64_t held_as_given(clrun_context *ctx, const clrun_graph *g, int fusion)
{
    clrun_exec_options o = options(CLRUN_EXEC_PLANNED, fusion, UINT64_MAX);
    clrun_exec *exec = NULL;
    assert_int_equal(clrun_exec_create(ctx, g, &o, &exec), CLRUN_OK);
    clrun_exec_stats st;
    assert_int_equal(clrun_exec_stats_get(exec, &st), CLRUN_OK);
    assert_int_equal(st.offloaded_tensors, 0);
    assert_int_equal(st.host_bytes, 0);
    clrun_exec_destroy(exec);
    return st.held_bytes;
}

static bool named(const char *const *names, int32_t n, const char *name)
{
    for (int32_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return true;
    return false;
}

/* The copies on a second queue beside the kernels (CLRUN_OFFLOAD_OVERLAP=1, the default) and
 * on the kernels' queue in order (0): the same bits, which are those of the run without a
 * budget. */
static void skip_in_every_mode(int overlap)
{
    clrun_context *ctx = NULL;
    setenv("CLRUN_OFFLOAD_RATE", "0", 1); /* moving bytes costs nothing: offload all it drops */
    setenv("CLRUN_OFFLOAD_OVERLAP", overlap ? "1" : "0", 1);
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    setenv("CLRUN_OFFLOAD_RATE", FIXED_RATE, 1); /* read when the context is created */
    unsetenv("CLRUN_OFFLOAD_OVERLAP");
    clrun_graph *g = load_skip();
    static float x[ROWS * D], want[ROWS * D], got[ROWS * D];
    assert_int_equal(clrun_graph_example_input(g, 0, 7, x, sizeof x), CLRUN_OK);
    clrun_exec *plain = NULL;
    clrun_exec_options po = options(CLRUN_EXEC_CONTEXT, 0, 0);
    assert_int_equal(clrun_exec_create(ctx, g, &po, &plain), CLRUN_OK);
    run(ctx, plain, x, sizeof x, want, sizeof want);
    clrun_exec_destroy(plain);
    const clrun_exec_mode modes[] = {CLRUN_EXEC_PLANNED, CLRUN_EXEC_POOLED, CLRUN_EXEC_NAIVE};
    for (int fusion = -1; fusion <= 1; fusion += 2) {
        uint64_t given = held_as_given(ctx, g, fusion);
        for (size_t m = 0; m < sizeof modes / sizeof *modes; m++) {
            clrun_exec_options o = options(modes[m], fusion, given - 1);
            clrun_exec *exec = NULL;
            assert_int_equal(clrun_exec_create(ctx, g, &o, &exec), CLRUN_OK);
            clrun_exec_stats st;
            assert_int_equal(clrun_exec_stats_get(exec, &st), CLRUN_OK);
            assert_true(st.held_bytes <= given - 1);
            assert_true(st.offloaded_tensors >= 1);
            assert_int_equal(st.recomputed_tensors, 0);
            assert_true(st.offloaded_bytes >= 2 * ROWS * D * sizeof(float));
            assert_int_equal(st.host_bytes * 2, st.offloaded_bytes);
            const char *const *names = NULL;
            int32_t n = clrun_exec_offloaded(exec, &names);
            assert_int_equal(n, st.offloaded_tensors);
            assert_true(named(names, n, "s"));
            memset(got, 0, sizeof got);
            run(ctx, exec, x, sizeof x, got, sizeof got);
            assert_memory_equal(got, want, sizeof want);
            memset(got, 0, sizeof got);
            run(ctx, exec, x, sizeof x, got, sizeof got); /* the host copy again */
            assert_memory_equal(got, want, sizeof want);
            assert_int_equal(exec->copy_queue != NULL, overlap); /* the second queue, or not */
            assert_int_equal(exec->flight_count, 0);
            clrun_exec_destroy(exec);
        }
    }
    clrun_graph_destroy(g);
    clrun_context_destroy(ctx);
}

static void an_offloaded_skip_keeps_the_bits_in_every_mode(void **state)
{
    (void)state;
    skip_in_every_mode(1);
    skip_in_every_mode(0);
}

/* A tensor copied back from host memory whose first reader is a view (a reshape into its
 * buffer, which launches nothing): the kernel that reads the view after it waits for the copy
 * too. The copy's event went to the view alone, whose empty chain dropped it where no event was
 * wanted, and the add read the copy's destination before the copy landed (BERT's step under
 * host_offload lost its bits so, from run to run). 8 MiB: the copy is slow beside the add. In
 * planned and pooled modes, fusion off (a view stays a node), each first run against the plain
 * run, several times. */
static const char view_graph[] =
    "graph view_reload\n"
    "input x: f32[1024, 2048]\n"
    "node a: f32[1024, 2048] = tanh(x)\n"
    "node b: f32[1024, 2048] = sigmoid(x)\n"
    "node r: f32[2048, 1024] = reshape(a) shape=[2048, 1024]\n"
    "node rb: f32[2048, 1024] = reshape(b) shape=[2048, 1024]\n"
    "node y: f32[2048, 1024] = add(r, rb)\n"
    "output y\n";

static void a_view_of_a_copy_back_waits_for_it(void **state)
{
    (void)state;
    enum { N = 1024 * 2048 };
    clrun_context *ctx = NULL;
    setenv("CLRUN_OFFLOAD_OVERLAP", "1", 1);
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    unsetenv("CLRUN_OFFLOAD_OVERLAP");
    float *x = malloc(sizeof(float) * N), *want = malloc(sizeof(float) * N), *got = malloc(sizeof(float) * N);
    assert_non_null(x);
    assert_non_null(want);
    assert_non_null(got);
    clrun_graph *plain_graph = parse(view_graph, sizeof view_graph - 1);
    assert_int_equal(clrun_graph_example_input(plain_graph, 0, 5, x, sizeof(float) * N), CLRUN_OK);
    clrun_exec *plain = NULL;
    clrun_exec_options po = options(CLRUN_EXEC_CONTEXT, -1, 0);
    assert_int_equal(clrun_exec_create(ctx, plain_graph, &po, &plain), CLRUN_OK);
    run(ctx, plain, x, sizeof(float) * N, want, sizeof(float) * N);
    clrun_exec_destroy(plain);
    clrun_graph_destroy(plain_graph);
    const clrun_exec_mode modes[] = {CLRUN_EXEC_PLANNED, CLRUN_EXEC_POOLED};
    for (size_t m = 0; m < sizeof modes / sizeof *modes; m++)
        for (int k = 0; k < 3; k++) {
            clrun_graph *g = parse(view_graph, sizeof view_graph - 1);
            clrun_tensor_id a = clrun__graph_find_ident(g, "a");
            clrun_tensor_id r = clrun__graph_find_ident(g, "r");
            int32_t boundary = g->tensors[r].producer;
            assert_int_equal(clrun__graph_offload(g, boundary, &a, 1, NULL, NULL), CLRUN_OK);
            assert_int_equal(clrun_graph_validate(g), CLRUN_OK);
            clrun_exec_options o = options(modes[m], -1, 0);
            clrun_exec *exec = NULL;
            assert_int_equal(clrun_exec_create(ctx, g, &o, &exec), CLRUN_OK);
            clrun_exec_stats st;
            assert_int_equal(clrun_exec_stats_get(exec, &st), CLRUN_OK);
            assert_true(st.views >= 1);
            assert_int_equal(st.host_bytes, sizeof(float) * N);
            memset(got, 0, sizeof(float) * N);
            run(ctx, exec, x, sizeof(float) * N, got, sizeof(float) * N);
            if (memcmp(got, want, sizeof(float) * N) != 0)
                fail_msg("mode %d, try %d: the add read the copy back before it landed", (int)modes[m], k);
            assert_non_null(exec->copy_queue); /* the copies were beside the kernels */
            clrun_exec_destroy(exec);
            clrun_graph_destroy(g);
        }
    free(x);
    free(want);
    free(got);
    clrun_context_destroy(ctx);
}

/* Every allocator strategy of the pooled mode, by the context's options. */
static void an_offloaded_skip_keeps_the_bits_under_every_allocator(void **state)
{
    (void)state;
    /* tlsf and buddy twice: the copies beside the kernels, then in order */
    const char *strategies[] = {"tlsf", "buddy", "slab", "bump", "tlsf", "buddy"};
    static float x[ROWS * D], want[ROWS * D], got[ROWS * D];
    setenv("CLRUN_OFFLOAD_RATE", "0", 1);
    for (size_t i = 0; i < sizeof strategies / sizeof *strategies; i++) {
        clrun_context_options co;
        clrun_context_options_init(&co);
        co.allocator = strategies[i];
        clrun_context *ctx = NULL;
        setenv("CLRUN_OFFLOAD_OVERLAP", i < 4 ? "1" : "0", 1);
        assert_int_equal(clrun_context_create(&co, &ctx), CLRUN_OK);
        unsetenv("CLRUN_OFFLOAD_OVERLAP");
        clrun_graph *g = load_skip();
        assert_int_equal(clrun_graph_example_input(g, 0, 7, x, sizeof x), CLRUN_OK);
        clrun_exec_options po = options(CLRUN_EXEC_POOLED, 0, 0);
        clrun_exec *plain = NULL;
        assert_int_equal(clrun_exec_create(ctx, g, &po, &plain), CLRUN_OK);
        run(ctx, plain, x, sizeof x, want, sizeof want);
        clrun_exec_destroy(plain);
        clrun_exec_options o = options(CLRUN_EXEC_POOLED, 0, held_as_given(ctx, g, 0) - 1);
        clrun_exec *exec = NULL;
        assert_int_equal(clrun_exec_create(ctx, g, &o, &exec), CLRUN_OK);
        clrun_exec_stats st;
        assert_int_equal(clrun_exec_stats_get(exec, &st), CLRUN_OK);
        assert_string_equal(st.allocator, strategies[i]);
        assert_true(st.offloaded_tensors >= 1);
        memset(got, 0, sizeof got);
        run(ctx, exec, x, sizeof x, got, sizeof got);
        assert_memory_equal(got, want, sizeof want);
        clrun_exec_destroy(exec);
        clrun_graph_destroy(g);
        clrun_context_destroy(ctx);
    }
    setenv("CLRUN_OFFLOAD_RATE", FIXED_RATE, 1);
}

static void offload_meets_a_budget_recomputation_cannot(void **state)
{
    (void)state;
    clrun_context *ctx = NULL;
    /* recomputation is all but free at this rate: the search recomputes wherever that fits */
    setenv("CLRUN_OFFLOAD_RATE", "1e12", 1);
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    setenv("CLRUN_OFFLOAD_RATE", FIXED_RATE, 1);
    clrun_graph *g = parse(funnel_graph, sizeof funnel_graph - 1);
    enum { IN = 64 * 16, OUT = 64 * 4096 };
    static float x[IN], want[OUT], got[OUT];
    assert_int_equal(clrun_graph_example_input(g, 0, 3, x, sizeof x), CLRUN_OK);
    clrun_exec_options po = options(CLRUN_EXEC_PLANNED, -1, 0);
    clrun_exec *plain = NULL;
    assert_int_equal(clrun_exec_create(ctx, g, &po, &plain), CLRUN_OK);
    run(ctx, plain, x, sizeof x, want, sizeof want);
    clrun_exec_destroy(plain);
    uint64_t given = held_as_given(ctx, g, -1);
    clrun_exec_options o = options(CLRUN_EXEC_PLANNED, -1, given - 1);
    clrun_exec *exec = NULL;
    assert_int_equal(clrun_exec_create(ctx, g, &o, &exec), CLRUN_OK);
    clrun_exec_stats st;
    assert_int_equal(clrun_exec_stats_get(exec, &st), CLRUN_OK);
    assert_true(st.held_bytes <= given - 1);
    assert_int_equal(st.recomputed_tensors, 0); /* none fitted by recomputing */
    assert_true(st.offloaded_tensors >= 1);
    const char *const *names = NULL;
    int32_t n = clrun_exec_offloaded(exec, &names);
    assert_true(named(names, n, "s"));
    run(ctx, exec, x, sizeof x, got, sizeof got);
    assert_memory_equal(got, want, sizeof want);
    clrun_exec_destroy(exec);
    clrun_graph_destroy(g);
    clrun_context_destroy(ctx);
}

/* At the default rate each dropped tensor takes the cheaper way: t recomputed, s offloaded,
 * in one rewrite, with the same bits. */
static void each_tensor_takes_the_cheaper_way(void **state)
{
    (void)state;
    clrun_context *ctx = NULL;
    setenv("CLRUN_OFFLOAD_RATE", FIXED_RATE, 1);
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    clrun_graph *g = parse(two_graph, sizeof two_graph - 1);
    static float x[ROWS * D], want[ROWS * D], got[ROWS * D];
    assert_int_equal(clrun_graph_example_input(g, 0, 5, x, sizeof x), CLRUN_OK);
    const clrun_exec_mode modes[] = {CLRUN_EXEC_PLANNED, CLRUN_EXEC_POOLED, CLRUN_EXEC_NAIVE};
    clrun_exec_options po = options(CLRUN_EXEC_PLANNED, -1, 0);
    clrun_exec *plain = NULL;
    assert_int_equal(clrun_exec_create(ctx, g, &po, &plain), CLRUN_OK);
    run(ctx, plain, x, sizeof x, want, sizeof want);
    clrun_exec_destroy(plain);
    uint64_t given = held_as_given(ctx, g, -1);
    for (size_t m = 0; m < sizeof modes / sizeof *modes; m++) {
        /* both skips' bytes below what it holds as given */
        clrun_exec_options o = options(modes[m], -1, given - 2 * ROWS * D * sizeof(float));
        clrun_exec *exec = NULL;
        assert_int_equal(clrun_exec_create(ctx, g, &o, &exec), CLRUN_OK);
        clrun_exec_stats st;
        assert_int_equal(clrun_exec_stats_get(exec, &st), CLRUN_OK);
        assert_int_equal(st.recomputed_tensors, 1);
        assert_int_equal(st.offloaded_tensors, 1);
        const char *const *names = NULL;
        assert_int_equal(clrun_exec_recomputed(exec, &names), 1);
        assert_string_equal(names[0], "t");
        assert_int_equal(clrun_exec_offloaded(exec, &names), 1);
        assert_string_equal(names[0], "s");
        memset(got, 0, sizeof got);
        run(ctx, exec, x, sizeof x, got, sizeof got);
        assert_memory_equal(got, want, sizeof want);
        clrun_exec_destroy(exec);
    }
    clrun_graph_destroy(g);
    clrun_context_destroy(ctx);
}

static void a_budget_nothing_meets_is_refused_and_leaks_nothing(void **state)
{
    (void)state;
    clrun_context *ctx = NULL;
    setenv("CLRUN_OFFLOAD_RATE", "0", 1);
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    setenv("CLRUN_OFFLOAD_RATE", FIXED_RATE, 1);
    clrun_graph *g = load_skip();
    clrun_memory_stats before, after;
    assert_int_equal(clrun_memory_stats_get(ctx, &before), CLRUN_OK);
    clrun_exec_options o = options(CLRUN_EXEC_CONTEXT, 0, 64 * 1024);
    clrun_exec *exec = (clrun_exec *)&o; /* must come back NULL */
    assert_int_equal(clrun_exec_create(ctx, g, &o, &exec), CLRUN_ERROR_OUT_OF_MEMORY);
    assert_null(exec);
    const char *why = clrun_last_error(ctx);
    assert_non_null(strstr(why, "recomputing or offloading"));
    assert_non_null(strstr(why, "at best"));
    assert_int_equal(clrun_memory_stats_get(ctx, &after), CLRUN_OK);
    assert_int_equal(after.in_use, before.in_use);
    clrun_graph_destroy(g);
    clrun_context_destroy(ctx);
}

/* CLRUN_OFFLOAD_RATE=auto (the default): measured on the device once, positive and finite,
 * the same for a second context of this process without timing again, and remembered in the
 * cache directory: a process that forgot it reads it back there, the same number. A rate given
 * is taken as it is, nothing timed. */
static void the_rate_is_measured_once_and_remembered(void **state)
{
    (void)state;
    clrun_context *ctx = NULL;
    const char *cache = getenv("CLRUN_CACHE");
    char kept[64];
    snprintf(kept, sizeof kept, "%s", cache ? cache : "");
    setenv("CLRUN_CACHE", "auto", 1); /* this process's cache directory, new and empty */
    unsetenv("CLRUN_OFFLOAD_RATE");
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    setenv("CLRUN_OFFLOAD_RATE", FIXED_RATE, 1);
    clrun__offload_rate_forget();
    double rate = 0, again = 0, back = 0;
    bool measured = false;
    double start = clrun__now();
    assert_int_equal(clrun__exec_offload_rate(ctx, &rate, &measured), CLRUN_OK);
    print_message("offload rate measured: %.3g FLOPs per byte moved, in %.1f ms\n", rate,
                  (clrun__now() - start) * 1e3);
    assert_true(measured);
    assert_true(isfinite(rate) && rate > 0);
    assert_int_equal(clrun__exec_offload_rate(ctx, &again, &measured), CLRUN_OK);
    assert_false(measured);
    assert_true(again == rate);
    clrun_context_destroy(ctx);
    clrun__offload_rate_forget(); /* as a new process: the cache directory's */
    unsetenv("CLRUN_OFFLOAD_RATE");
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    setenv("CLRUN_OFFLOAD_RATE", FIXED_RATE, 1);
    assert_int_equal(clrun__exec_offload_rate(ctx, &back, &measured), CLRUN_OK);
    assert_false(measured);
    assert_true(fabs(back - rate) <= 1e-8 * rate); /* written with 9 digits */
    clrun_context_destroy(ctx);
    if (kept[0])
        setenv("CLRUN_CACHE", kept, 1);
    else
        unsetenv("CLRUN_CACHE");
    setenv("CLRUN_OFFLOAD_RATE", "2.5", 1);
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    setenv("CLRUN_OFFLOAD_RATE", FIXED_RATE, 1);
    assert_int_equal(clrun__exec_offload_rate(ctx, &back, &measured), CLRUN_OK);
    assert_false(measured);
    assert_true(back == 2.5);
    clrun_context_destroy(ctx);
}

int main(void)
{
    setenv("CLRUN_OFFLOAD_RATE", FIXED_RATE, 1);
    clrun_test_device_environment(cache_root, sizeof cache_root);
    CLRUN_TEST_FILTERS_FROM_ENVIRONMENT();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_rewrite_copies_out_after_the_writer_and_back_before_the_reader),
        cmocka_unit_test(a_copy_back_with_a_lead_goes_early_but_after_the_boundary),
        cmocka_unit_test(the_rewrite_refuses_what_it_cannot_offload_and_changes_nothing),
        cmocka_unit_test(the_cost_rule_weighs_flops_against_bytes_moved_twice),
        cmocka_unit_test(an_offloaded_skip_keeps_the_bits_in_every_mode),
        cmocka_unit_test(an_offloaded_skip_keeps_the_bits_under_every_allocator),
        cmocka_unit_test(a_view_of_a_copy_back_waits_for_it),
        cmocka_unit_test(offload_meets_a_budget_recomputation_cannot),
        cmocka_unit_test(each_tensor_takes_the_cheaper_way),
        cmocka_unit_test(a_budget_nothing_meets_is_refused_and_leaks_nothing),
        cmocka_unit_test(the_rate_is_measured_once_and_remembered),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    clrun_test_remove_dir(cache_root);
    return failed;
}
