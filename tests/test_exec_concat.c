/* Concats assembled in place (exec/schedule_concat.c): which concats the schedule picks and
 * where their inputs go, without OpenCL; then on a device, the same bits as the copying run in
 * every executor mode, allocator and queue order, with fusion on and off, and a failing OpenCL
 * call anywhere in a run fails it cleanly. */
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

#include "device/cl.h"
#include "device_test.h"
#include "exec/exec_internal.h"
#include "exec/schedule.h"
#include "graph/graph.h"

static char cache_root[512];

static clrun_graph *parse(const char *text)
{
    clrun_graph *g = NULL;
    char err[512];
    if (clrun_graph_parse(text, strlen(text), "test.graph", &g, err, sizeof err) != CLRUN_OK)
        fail_msg("%s", err);
    return g;
}

static int32_t id(const clrun_graph *g, const char *name)
{
    int32_t t = clrun__graph_find_ident(g, name);
    assert_true(t >= 0);
    return t;
}

/* The schedule of `text` with concats assembled at `alignment`; *g gets the graph. */
static clrun__schedule assembled(const char *text, uint64_t alignment, clrun_graph **g)
{
    *g = parse(text);
    clrun__schedule s;
    char err[256];
    if (clrun__schedule_build_assembling(*g, NULL, alignment, &s, err, sizeof err) != CLRUN_OK)
        fail_msg("%s", err);
    return s;
}

/* a and b (1 KiB each) are made one after the other and read by the concat alone. */
static const char pair_graph[] =
    "graph pair\n"
    "input x: f32[64, 4]\n"
    "node a: f32[64, 4] = relu(x)\n"
    "node b: f32[64, 4] = tanh(x)\n"
    "node c: f32[128, 4] = concat(a, b) axis=0\n"
    "node y: f32[128, 4] = sigmoid(c)\n"
    "output y\n";

/* ---- the schedule, without OpenCL ---------------------------------------------------------- */

static void inputs_are_placed_in_the_output_buffer(void **state)
{
    (void)state;
    clrun_graph *g;
    clrun__schedule s = assembled(pair_graph, 128, &g);
    int32_t a = id(g, "a"), b = id(g, "b"), c = id(g, "c"), y = id(g, "y");
    assert_int_equal(s.assembled, 1);
    assert_int_equal(s.assembled_whole, 1);
    assert_int_equal(s.part_of[a], c);
    assert_int_equal(s.part_of[b], c);
    assert_int_equal(s.part_of[c], c);
    assert_int_equal(s.part_of[y], -1);
    assert_int_equal(s.part_offset[a], 0);
    assert_int_equal(s.part_offset[b], 64 * 4 * sizeof(float));
    int32_t buf = s.buffer_of[c];
    assert_int_equal(s.buffer_of[a], buf);
    assert_int_equal(s.buffer_of[b], buf);
    /* made with a, the first input; y, the concat's last reader, takes it in place */
    assert_int_equal(s.buffers[buf].first, s.producer_step[a]);
    assert_int_equal(s.buffers[buf].bytes, 128 * 4 * sizeof(float));
    assert_int_equal(s.buffers[buf].root, c);
    assert_int_equal(s.buffer_of[y], buf);
    /* x (kept, 1 KiB) and c's 2 KiB: a, b and c never coexist as copies would have them */
    assert_int_equal(s.lower_bound, 3 * 1024);
    clrun__schedule plain;
    char err[256];
    assert_int_equal(clrun__schedule_build(g, true, &plain, err, sizeof err), CLRUN_OK);
    assert_int_equal(plain.assembled, 0);
    assert_null(plain.part_of);
    assert_int_equal(plain.lower_bound, 5 * 1024);
    clrun__schedule_free(&plain);
    clrun__schedule_free(&s);
    clrun_graph_destroy(g);
}

/* Each graph has one concat, c, whose inputs the schedule must copy, and why; `placed` names
 * the inputs written in place all the same (the concat then copies the others), "" none. */
static void inputs_that_cannot_be_placed_are_copied(void **state)
{
    (void)state;
    static const struct {
        const char *why, *placed;
        const char *text;
    } cases[] = {
        {"an input read by another node too", "b",
         "graph g\ninput x: f32[64, 4]\nnode a: f32[64, 4] = relu(x)\n"
         "node b: f32[64, 4] = tanh(x)\nnode c: f32[128, 4] = concat(a, b) axis=0\n"
         "node y: f32[128, 4] = sigmoid(c)\nnode z: f32[64, 4] = neg(a)\noutput y\noutput z\n"},
        {"an input that is a graph output", "b",
         "graph g\ninput x: f32[64, 4]\nnode a: f32[64, 4] = relu(x)\n"
         "node b: f32[64, 4] = tanh(x)\nnode c: f32[128, 4] = concat(a, b) axis=0\n"
         "output c\noutput a\n"},
        {"a graph input", "b",
         "graph g\ninput x: f32[64, 4]\nnode b: f32[64, 4] = tanh(x)\n"
         "node c: f32[128, 4] = concat(x, b) axis=0\noutput c\n"},
        {"an input that is a view of another buffer", "b",
         "graph g\ninput x: f32[64, 4]\nnode a: f32[64, 4] = relu(x)\n"
         "node r: f32[64, 4] = reshape(a) shape=[64, 4]\nnode b: f32[64, 4] = tanh(x)\n"
         "node c: f32[128, 4] = concat(r, b) axis=0\noutput c\n"},
        {"a place off the alignment (48 bytes)", "a",
         "graph g\ninput x: f32[3, 4]\nnode a: f32[3, 4] = relu(x)\n"
         "node b: f32[3, 4] = tanh(x)\nnode c: f32[6, 4] = concat(a, b) axis=0\noutput c\n"},
        {"one input twice", "",
         "graph g\ninput x: f32[64, 4]\nnode a: f32[64, 4] = relu(x)\n"
         "node c: f32[128, 4] = concat(a, a) axis=0\noutput c\n"},
        {"inputs interleaved in the output (rows before the axis)", "",
         "graph g\ninput x: f32[64, 4]\nnode a: f32[64, 4] = relu(x)\n"
         "node b: f32[64, 4] = tanh(x)\nnode c: f32[64, 8] = concat(a, b) axis=1\noutput c\n"},
        /* s would hold the concat's whole 2 KiB through the peak at v1, where only s is
         * alive of the two */
        {"the lower bound would rise", "",
         "graph g\ninput x: f32[64, 4]\nconst w: f32[4, 1024] normal(0, 0.5) seed=1\n"
         "const w2: f32[1024, 4] normal(0, 0.05) seed=2\nconst w3: f32[4, 4] normal(0, 1) seed=3\n"
         "node s: f32[64, 4] = relu(x)\nnode big: f32[64, 1024] = matmul(x, w)\n"
         "node v1: f32[64, 4] = matmul(big, w2)\nnode v: f32[64, 4] = matmul(v1, w3)\n"
         "node c: f32[128, 4] = concat(s, v) axis=0\noutput c\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        clrun_graph *g;
        clrun__schedule s = assembled(cases[i].text, 128, &g);
        const clrun__node *cat = &g->nodes[g->tensors[id(g, "c")].producer];
        if (cases[i].placed[0] == '\0') {
            if (s.assembled != 0)
                fail_msg("assembled in place, with %s", cases[i].why);
            assert_null(s.part_of);
        } else {
            assert_int_equal(s.assembled, 1);
            assert_int_equal(s.assembled_whole, 0);
            for (int k = 0; k < cat->input_count; k++) {
                int32_t t = cat->inputs[k];
                bool want = strcmp(g->tensors[t].name, cases[i].placed) == 0;
                if ((s.part_of[t] == id(g, "c")) != want)
                    fail_msg("with %s, input '%s' is %s", cases[i].why, g->tensors[t].name,
                             want ? "copied" : "placed");
            }
        }
        clrun__schedule_free(&s);
        clrun_graph_destroy(g);
    }
    /* the pair 48 bytes long at a 16-byte alignment: both placed */
    clrun_graph *g;
    clrun__schedule s = assembled(cases[4].text, 16, &g);
    assert_int_equal(s.assembled_whole, 1);
    assert_int_equal(s.part_offset[id(g, "b")], 48);
    clrun__schedule_free(&s);
    clrun_graph_destroy(g);
    /* no alignment: none */
    s = assembled(pair_graph, 0, &g);
    assert_int_equal(s.assembled, 0);
    clrun__schedule_free(&s);
    clrun_graph_destroy(g);
}

/* A concat of a concat: the inner one is assembled, the outer copies it (no nesting) and has
 * its other input written in place. */
static void an_assembled_output_is_not_assembled_again(void **state)
{
    (void)state;
    clrun_graph *g;
    clrun__schedule s = assembled("graph g\ninput x: f32[64, 4]\nnode a: f32[64, 4] = relu(x)\n"
                                  "node b: f32[64, 4] = tanh(x)\n"
                                  "node c: f32[128, 4] = concat(a, b) axis=0\n"
                                  "node d: f32[64, 4] = neg(x)\n"
                                  "node e: f32[192, 4] = concat(c, d) axis=0\noutput e\n",
                                  128, &g);
    assert_int_equal(s.assembled, 2);
    assert_int_equal(s.assembled_whole, 1);
    assert_int_equal(s.part_of[id(g, "c")], id(g, "c"));
    assert_int_equal(s.part_of[id(g, "d")], id(g, "e"));
    assert_int_equal(s.part_offset[id(g, "d")], 128 * 4 * sizeof(float));
    assert_int_equal(s.part_of[id(g, "e")], id(g, "e"));
    clrun__schedule_free(&s);
    clrun_graph_destroy(g);
}

/* ---- on a device --------------------------------------------------------------------------- */

/* Four concats: one of a product, a softmax and a slice (its output read through a view, the
 * view's reader writing in place), one of a layernorm and a sum that ends as a graph output,
 * one with its second input 192 bytes in (off the alignment: copied, the first placed), and
 * one the schedule copies (one input twice). */
static const char device_graph[] =
    "graph fire\n"
    "input x: f32[64, 16]\n"
    "const w: f32[16, 16] normal(0, 0.3) seed=1\n"
    "const gamma: f32[16] uniform(0.5, 1.5) seed=2\n"
    "const beta: f32[16] uniform(-0.5, 0.5) seed=3\n"
    "node a: f32[64, 16] = matmul(x, w)\n"
    "node b: f32[64, 16] = softmax(x)\n"
    "node e: f32[32, 16] = slice(x) axis=0 start=8 end=40\n"
    "node c: f32[160, 16] = concat(a, b, e) axis=0\n"
    "node cv: f32[10, 256] = reshape(c) shape=[10, 256]\n"
    "node y: f32[10, 256] = tanh(cv)\n"
    "node t: f32[16, 64] = transpose(x) perm=[1, 0]\n"
    "node tr: f32[16, 64] = relu(t)\n"
    "node a2: f32[64, 16] = mul(x, x)\n"
    "node n: f32[64, 16] = layernorm(a2, gamma, beta)\n"
    "node x2: f32[64, 16] = add(x, x)\n"
    "node o: f32[128, 16] = concat(n, x2) axis=0\n"
    "node x2b: f32[64, 16] = sub(x, a2)\n"
    "node k: f32[128, 16] = concat(x2b, x2b) axis=0\n"
    "node kk: f32[16, 128] = transpose(k) perm=[1, 0]\n"
    "node p1: f32[3, 16] = slice(a2) axis=0 start=5 end=8\n"
    "node p2: f32[5, 16] = slice(x2b) axis=0 start=0 end=5\n"
    "node p: f32[8, 16] = concat(p1, p2) axis=0\n"
    "node pp: f32[8, 16] = sigmoid(p)\n"
    "output y\n"
    "output o\n"
    "output kk\n"
    "output tr\n"
    "output pp\n";

enum { X = 64 * 16, Y = 10 * 256, O = 128 * 16, KK = 16 * 128, TR = 16 * 64, PP = 8 * 16 };

typedef struct outputs {
    float y[Y], o[O], kk[KK], tr[TR], pp[PP];
} outputs;

static clrun_context *context_for(const char *allocator, bool out_of_order)
{
    clrun_context_options co;
    clrun_context_options_init(&co);
    co.allocator = allocator;
    co.out_of_order = out_of_order ? 1 : -1;
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(&co, &ctx), CLRUN_OK);
    return ctx;
}

/* An executor of g on ctx in `mode`, fusion as in clrun_exec_options (0: the default). */
static clrun_exec *exec_in(clrun_context *ctx, const clrun_graph *g, clrun_exec_mode mode, int fusion)
{
    clrun_exec_options o;
    clrun_exec_options_init(&o);
    o.mode = mode;
    o.fusion = fusion;
    clrun_exec *exec = NULL;
    assert_int_equal(clrun_exec_create(ctx, g, &o, &exec), CLRUN_OK);
    return exec;
}

static clrun_status run_once(clrun_context *ctx, clrun_exec *exec, const float *x, outputs *out)
{
    clrun_buffer in;
    assert_int_equal(clrun_alloc(ctx, X * sizeof(float), &in), CLRUN_OK);
    assert_int_equal(clrun_buffer_write(ctx, &in, x), CLRUN_OK);
    clrun_status s = clrun_exec_run(exec, &in, 1);
    if (s == CLRUN_OK && out) {
        assert_int_equal(clrun_exec_read_output(exec, 0, out->y, sizeof out->y), CLRUN_OK);
        assert_int_equal(clrun_exec_read_output(exec, 1, out->o, sizeof out->o), CLRUN_OK);
        assert_int_equal(clrun_exec_read_output(exec, 2, out->kk, sizeof out->kk), CLRUN_OK);
        assert_int_equal(clrun_exec_read_output(exec, 3, out->tr, sizeof out->tr), CLRUN_OK);
        assert_int_equal(clrun_exec_read_output(exec, 4, out->pp, sizeof out->pp), CLRUN_OK);
    }
    clrun_free(ctx, &in);
    return s;
}

/* Counts the concats' launches of a run: "launch concat: ..." at debug level. */
static void count_concat_launches(clrun_log_level level, const char *message, void *user)
{
    int *count = user;
    if (level == CLRUN_LOG_DEBUG && strncmp(message, "launch concat:", 14) == 0)
        (*count)++;
}

/* A run copies what the copies need and no more: k's two inputs and p's second (naive mode,
 * the plain reference: all nine inputs of the four concats). */
static void only_the_inputs_not_in_place_are_copied(void **state)
{
    (void)state;
    clrun_graph *g = parse(device_graph);
    static float x[X];
    assert_int_equal(clrun_graph_example_input(g, 0, 7, x, sizeof x), CLRUN_OK);
    for (int naive = 0; naive < 2; naive++) {
        clrun_context *ctx = context_for("tlsf", false);
        clrun_exec *exec = exec_in(ctx, g, naive ? CLRUN_EXEC_NAIVE : CLRUN_EXEC_POOLED, 0);
        int launches = 0;
        clrun_log_set_handler(count_concat_launches, &launches);
        clrun_log_set_level(CLRUN_LOG_DEBUG);
        assert_int_equal(run_once(ctx, exec, x, NULL), CLRUN_OK);
        clrun_log_set_level(CLRUN_LOG_NONE);
        clrun_log_set_handler(NULL, NULL);
        assert_int_equal(launches, naive ? 9 : 3);
        clrun_exec_destroy(exec);
        clrun_context_destroy(ctx);
    }
    clrun_graph_destroy(g);
}

static void assembled_concats_give_the_bits_of_copies_in_every_mode(void **state)
{
    (void)state;
    const struct {
        clrun_exec_mode mode;
        const char *allocator;
        bool out_of_order;
    } modes[] = {{CLRUN_EXEC_POOLED, "tlsf", false},  {CLRUN_EXEC_POOLED, "buddy", false},
                 {CLRUN_EXEC_POOLED, "slab", false},  {CLRUN_EXEC_POOLED, "bump", false},
                 {CLRUN_EXEC_PLANNED, "tlsf", false}, {CLRUN_EXEC_POOLED, "tlsf", true},
                 {CLRUN_EXEC_PLANNED, "buddy", true}};
    clrun_graph *g = parse(device_graph);
    static float x[X];
    assert_int_equal(clrun_graph_example_input(g, 0, 7, x, sizeof x), CLRUN_OK);
    static outputs want, got;
    for (int fusion = -1; fusion <= 1; fusion += 2) {
        /* the reference: every tensor its own buffer, the concats copying */
        clrun_context *ctx = context_for("tlsf", false);
        clrun_exec *exec = exec_in(ctx, g, CLRUN_EXEC_NAIVE, fusion);
        clrun_exec_stats plain;
        assert_int_equal(clrun_exec_stats_get(exec, &plain), CLRUN_OK);
        assert_int_equal(plain.assembled_concats, 0);
        assert_int_equal(run_once(ctx, exec, x, &want), CLRUN_OK);
        clrun_exec_destroy(exec);
        clrun_context_destroy(ctx);
        for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
            ctx = context_for(modes[m].allocator, modes[m].out_of_order);
            exec = exec_in(ctx, g, modes[m].mode, fusion);
            clrun_exec_stats st;
            assert_int_equal(clrun_exec_stats_get(exec, &st), CLRUN_OK);
            assert_int_equal(st.assembled_concats, 3); /* c, o and p; k is copied */
            assert_int_equal(st.assembled_in_part, 1); /* p copies p2 */
            assert_int_equal(st.kernels, st.steps - st.views - 2);
            for (int r = 0; r < 2; r++) { /* a second run makes its views again */
                memset(&got, 0, sizeof got);
                assert_int_equal(run_once(ctx, exec, x, &got), CLRUN_OK);
                if (memcmp(&got, &want, sizeof got) != 0)
                    fail_msg("%s/%s%s, fusion %s, run %d: not the bits of the copies",
                             clrun_exec_mode_name(modes[m].mode), modes[m].allocator,
                             modes[m].out_of_order ? " out of order" : "",
                             fusion > 0 ? "on" : "off", r);
            }
            clrun_exec_destroy(exec);
            clrun_memory_stats ms;
            assert_int_equal(clrun_memory_stats_get(ctx, &ms), CLRUN_OK);
            assert_int_equal(ms.in_use, 0);
            clrun_context_destroy(ctx);
        }
    }
    clrun_graph_destroy(g);
}

/* Fail the 1st, 2nd, ... OpenCL call of a run (the views' making among them) until a run
 * completes: each failure is an error that gives back what the run took, and the next run
 * gives the bits of a run that never failed. */
static void every_failing_opencl_call_fails_a_run_cleanly(void **state)
{
    (void)state;
    clrun_graph *g = parse(device_graph);
    static float x[X];
    assert_int_equal(clrun_graph_example_input(g, 0, 7, x, sizeof x), CLRUN_OK);
    static outputs want, got;
    for (int planned = 0; planned < 2; planned++) {
        clrun_context *ctx = context_for("tlsf", false);
        clrun_exec_mode mode = planned ? CLRUN_EXEC_PLANNED : CLRUN_EXEC_POOLED;
        clrun_exec *exec = exec_in(ctx, g, mode, 0);
        assert_int_equal(run_once(ctx, exec, x, &want), CLRUN_OK);
        clrun_buffer in;
        assert_int_equal(clrun_alloc(ctx, sizeof x, &in), CLRUN_OK);
        assert_int_equal(clrun_buffer_write(ctx, &in, x), CLRUN_OK);
        for (long n = 1;; n++) {
            clrun_exec_destroy(exec);
            exec = exec_in(ctx, g, mode, 0);
            clrun_memory_stats idle, after;
            clrun_memory_stats_get(ctx, &idle);
            clrun__cl_fault_arm(n, CL_OUT_OF_RESOURCES, false);
            clrun_status status = clrun_exec_run(exec, &in, 1);
            bool fired = clrun__cl_fault_fired();
            clrun__cl_fault_arm(0, CL_SUCCESS, false);
            if (!fired) {
                assert_int_equal(status, CLRUN_OK);
                assert_true(n > 3);
                break;
            }
            assert_int_not_equal(status, CLRUN_OK);
            assert_non_null(strstr(clrun_last_error(ctx), "CL_OUT_OF_RESOURCES"));
            clrun_memory_stats_get(ctx, &after);
            assert_int_equal(after.in_use, idle.in_use);
            memset(&got, 0, sizeof got);
            assert_int_equal(run_once(ctx, exec, x, &got), CLRUN_OK);
            assert_memory_equal(&got, &want, sizeof got);
        }
        clrun_exec_destroy(exec);
        clrun_free(ctx, &in);
        clrun_context_destroy(ctx);
    }
    clrun_graph_destroy(g);
}

int main(void)
{
    clrun_test_device_environment(cache_root, sizeof cache_root);
    CLRUN_TEST_FILTERS_FROM_ENVIRONMENT();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(inputs_are_placed_in_the_output_buffer),
        cmocka_unit_test(inputs_that_cannot_be_placed_are_copied),
        cmocka_unit_test(an_assembled_output_is_not_assembled_again),
        cmocka_unit_test(assembled_concats_give_the_bits_of_copies_in_every_mode),
        cmocka_unit_test(only_the_inputs_not_in_place_are_copied),
        cmocka_unit_test(every_failing_opencl_call_fails_a_run_cleanly),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    clrun_test_remove_dir(cache_root);
    return failed;
}
