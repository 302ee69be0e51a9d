/* Narrow weights read by the product kernels (clrun_graph_narrow_weights, the attribute
 * "dequant" of matmul and conv2d): the same bits as the weights widened by cast (sub, mul)
 * nodes before the product, in every executor mode, with fusion on and off, on the core and
 * on the kernels that widen into scratch; the run's peak holds no widened weight. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <clrun/clrun.h>

#include "device_test.h"
#include "graph/graph.h"
#include "ops/ops_internal.h"
#include "rng.h"

static char cache_root[512];

static float *random_values(uint64_t n, uint64_t seed)
{
    float *v = malloc(sizeof *v * (size_t)n);
    assert_non_null(v);
    uint64_t rng = seed;
    for (uint64_t i = 0; i < n; i++)
        v[i] = (float)((int)(rng_next(&rng) % 2001) - 1000) / 700.0f;
    return v;
}

static int32_t constant(clrun_graph *g, const char *name, clrun_tensor_type t, uint64_t seed)
{
    float *v = random_values(clrun_tensor_elements(&t), seed);
    int32_t id;
    assert_int_equal(clrun_graph_add_constant(g, name, &t, v, CLRUN_FILL_ZEROS, 0, 0, 0, &id), CLRUN_OK);
    free(v);
    return id;
}

static int32_t node(clrun_graph *g, const char *op, const int32_t *in, int n, const char *out,
                    const clrun_attr *attrs, int attr_count)
{
    int32_t id;
    const char *names[1] = {out};
    if (clrun_graph_add_node(g, op, in, n, names, 1, attrs, attr_count, &id) != CLRUN_OK) {
        fprintf(stderr, "%s: %s\n", out, clrun_graph_last_error(g));
        fail();
    }
    return id;
}

/* Convolutions (3 x 3 padded with a bias and relu, pointwise, grouped with a stride) and
 * products (with a bias and relu; transposed B) over f32 weights. */
static clrun_graph *model(void)
{
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("narrow", &g), CLRUN_OK);
    int32_t x, a;
    clrun_tensor_type xt = {CLRUN_F32, 4, {1, 6, 10, 10}}, at = {CLRUN_F32, 2, {37, 48}};
    assert_int_equal(clrun_graph_add_input(g, "x", &xt, false, &x), CLRUN_OK);
    assert_int_equal(clrun_graph_add_input(g, "a", &at, false, &a), CLRUN_OK);
    int32_t w1 = constant(g, "w1", (clrun_tensor_type){CLRUN_F32, 4, {16, 6, 3, 3}}, 1);
    int32_t b1 = constant(g, "b1", (clrun_tensor_type){CLRUN_F32, 1, {16}}, 2);
    int32_t w2 = constant(g, "w2", (clrun_tensor_type){CLRUN_F32, 4, {20, 16, 1, 1}}, 3);
    int32_t w3 = constant(g, "w3", (clrun_tensor_type){CLRUN_F32, 4, {8, 10, 3, 3}}, 4);
    int32_t wm = constant(g, "wm", (clrun_tensor_type){CLRUN_F32, 2, {48, 1000}}, 5);
    int32_t bm = constant(g, "bm", (clrun_tensor_type){CLRUN_F32, 1, {1000}}, 6);
    int32_t wt = constant(g, "wt", (clrun_tensor_type){CLRUN_F32, 2, {33, 48}}, 7);
    clrun_attr pad = {.name = "pad", .kind = CLRUN_ATTR_INTS, .ints = {1, 1}, .count = 2};
    clrun_attr grouped[2] = {{.name = "groups", .kind = CLRUN_ATTR_INT, .i = 2},
                             {.name = "stride", .kind = CLRUN_ATTR_INTS, .ints = {2, 2}, .count = 2}};
    clrun_attr tb = {.name = "transpose_b", .kind = CLRUN_ATTR_INT, .i = 1};
    int32_t c1 = node(g, "conv2d", (int32_t[]){x, w1, b1}, 3, "c1", &pad, 1);
    int32_t r1 = node(g, "relu", &c1, 1, "r1", NULL, 0);
    int32_t c2 = node(g, "conv2d", (int32_t[]){r1, w2}, 2, "c2", NULL, 0);
    int32_t c3 = node(g, "conv2d", (int32_t[]){c2, w3}, 2, "c3", grouped, 2);
    int32_t m1 = node(g, "matmul", (int32_t[]){a, wm, bm}, 3, "m1", NULL, 0);
    int32_t r2 = node(g, "relu", &m1, 1, "r2", NULL, 0);
    int32_t m2 = node(g, "matmul", (int32_t[]){a, wt}, 2, "m2", &tb, 1);
    clrun_graph_mark_output(g, c3);
    clrun_graph_mark_output(g, r2);
    clrun_graph_mark_output(g, m2);
    return g;
}

typedef struct outcome {
    uint64_t hash[3];
    uint64_t peak, constants;
} outcome;

static uint64_t fnv1a(const unsigned char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* Runs g (inputs from fixed seeds) on a context of `allocator`, fusion on (1) or off (-1),
 * folding at load (the dequantized weights' fold among them) on or off. */
static outcome run_folding(const clrun_graph *g, const char *allocator, int fusion, int fold)
{
    clrun_context_options o;
    clrun_context_options_init(&o);
    o.allocator = allocator;
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(&o, &ctx), CLRUN_OK);
    clrun_exec_options eo;
    clrun_exec_options_init(&eo);
    eo.fusion = fusion;
    eo.fold = fold;
    eo.plan_time_limit_s = 0.05;
    clrun_exec *exec = NULL;
    if (clrun_exec_create(ctx, g, &eo, &exec) != CLRUN_OK) {
        fprintf(stderr, "exec_create (%s): %s\n", allocator, clrun_last_error(ctx));
        fail();
    }
    const clrun_tensor_id *ins, *outs;
    int32_t n_in = clrun_graph_inputs(g, &ins);
    int32_t n_out = clrun_graph_outputs(g, &outs);
    assert_true(n_in <= 4 && n_out == 3);
    clrun_buffer inputs[4];
    for (int32_t i = 0; i < n_in; i++) {
        const clrun_tensor_type *t = clrun_graph_tensor_type(g, ins[i]);
        float *v = random_values(clrun_tensor_elements(t), 100 + (uint64_t)i);
        assert_int_equal(clrun_alloc_ex(ctx, clrun_tensor_bytes(t), 0, "input", &inputs[i]), CLRUN_OK);
        assert_int_equal(clrun_buffer_write(ctx, &inputs[i], v), CLRUN_OK);
        free(v);
    }
    if (clrun_exec_run(exec, inputs, n_in) != CLRUN_OK) {
        fprintf(stderr, "run (%s): %s\n", allocator, clrun_last_error(ctx));
        fail();
    }
    outcome r = {{0}, 0, 0};
    for (int32_t i = 0; i < n_out; i++) {
        uint64_t bytes = clrun_tensor_bytes(clrun_graph_tensor_type(g, outs[i]));
        unsigned char *host = malloc((size_t)bytes);
        assert_non_null(host);
        assert_int_equal(clrun_exec_read_output(exec, i, host, bytes), CLRUN_OK);
        r.hash[i] = fnv1a(host, (size_t)bytes);
        free(host);
    }
    clrun_exec_stats st;
    assert_int_equal(clrun_exec_stats_get(exec, &st), CLRUN_OK);
    r.peak = st.peak_bytes;
    r.constants = st.constant_bytes;
    clrun_exec_destroy(exec);
    for (int32_t i = 0; i < n_in; i++)
        assert_int_equal(clrun_free(ctx, &inputs[i]), CLRUN_OK);
    clrun_context_destroy(ctx);
    return r;
}

static outcome run(const clrun_graph *g, const char *allocator, int fusion)
{
    return run_folding(g, allocator, fusion, 1);
}

/* The widening nodes as they are: the reference bits. */
static outcome run_nodes(const clrun_graph *g, const char *allocator, int fusion)
{
    return run_folding(g, allocator, fusion, -1);
}

static clrun_graph *narrowed(clrun_dtype to, bool by_nodes)
{
    clrun_graph *g = model();
    clrun__narrow_weights_by_nodes = by_nodes;
    clrun_weights_report r;
    clrun_status s = clrun_graph_narrow_weights(g, to, 0, &r);
    clrun__narrow_weights_by_nodes = false;
    assert_int_equal(s, CLRUN_OK);
    assert_int_equal(r.narrowed, 5);
    return g;
}

static void assert_same(const outcome *a, const outcome *b, const char *what)
{
    for (int i = 0; i < 3; i++)
        if (a->hash[i] != b->hash[i]) {
            fprintf(stderr, "%s: output %d differs\n", what, i);
            fail();
        }
}

/* f16, bf16, i8: the kernels' widening gives the bits of the nodes', in every mode, fusion on
 * and off; no node widens a weight; the peak holds no widened weight. */
static void kernels_widen_as_the_nodes_did(void **state)
{
    (void)state;
    static const char *const allocators[] = {"tlsf", "naive", "planned", "buddy"};
    const clrun_dtype widths[] = {CLRUN_F16, CLRUN_BF16, CLRUN_I8};
    clrun_graph *f32 = model();
    for (size_t w = 0; w < 3; w++) {
        clrun_graph *fused = narrowed(widths[w], false), *nodes = narrowed(widths[w], true);
        for (int32_t n = 0; n < fused->node_count; n++)
            assert_string_not_equal(fused->nodes[n].op->name, "cast");
        clrun__ops_kernels = CLRUN__KERNELS_VECTOR; /* the core on every device; the others below */
        outcome reference = run_nodes(nodes, "tlsf", -1);
        /* folding at load gives the widening nodes' products the narrow weights too */
        outcome folded = run(nodes, "tlsf", 1), direct = run(fused, "tlsf", 1);
        assert_same(&folded, &reference, "the nodes folded");
        assert_true(folded.constants == direct.constants && folded.peak == direct.peak);
        /* CLRUN_TEST_ROUNDS: fewer allocators (oclgrind runs one) */
        int count = clrun_test_rounds(4);
        for (size_t a = 0; a < (size_t)(count < 4 ? count : 4); a++)
            for (int fusion = -1; fusion <= 1; fusion += 2) {
                char what[96];
                snprintf(what, sizeof what, "%s, %s, fusion %d", clrun_dtype_name(widths[w]), allocators[a],
                         fusion);
                outcome o = run(fused, allocators[a], fusion), plain = run(f32, allocators[a], fusion);
                assert_same(&o, &reference, what);
                outcome by_nodes = run_nodes(nodes, allocators[a], fusion);
                assert_same(&by_nodes, &reference, what);
                /* no f32 copy of a weight in the run's buffers: the f32 model's peak */
                if (o.peak > plain.peak)
                    fprintf(stderr, "%s: peak %llu, f32 %llu\n", what, (unsigned long long)o.peak, (unsigned long long)plain.peak);
                assert_true(o.peak <= plain.peak);
                if (by_nodes.peak <= o.peak)
                    fprintf(stderr, "%s: peak %llu, by nodes %llu, f32 %llu\n", what, (unsigned long long)o.peak,
                            (unsigned long long)by_nodes.peak, (unsigned long long)plain.peak);
                assert_true(by_nodes.peak > o.peak);
            }
        clrun__ops_kernels = CLRUN__KERNELS_AUTO;
        /* the kernels that read f32 weights (devices with local memory: tiles; one output per
         * item) widen into scratch: the bits of the nodes' widening under the same kernels */
        const clrun__kernel_choice kinds[] = {CLRUN__KERNELS_TILED, CLRUN__KERNELS_SIMPLE};
        for (int k = 0; k < 2; k++) {
            clrun__ops_kernels = kinds[k];
            outcome o = run(fused, "tlsf", 1), by_nodes = run_nodes(nodes, "tlsf", 1);
            clrun__ops_kernels = CLRUN__KERNELS_AUTO;
            assert_same(&o, &by_nodes, k == 0 ? "tiles" : "simple kernels");
        }
        clrun_graph_destroy(fused);
        clrun_graph_destroy(nodes);
    }
    clrun_graph_destroy(f32);
}

/* A u8 weight with a zero point (dequant 2), as an ONNX DequantizeLinear gives it: the bits of
 * cast, sub and mul nodes. */
static void a_zero_point_is_subtracted_as_the_nodes_do(void **state)
{
    (void)state;
    for (int which = 0; which < 2; which++) {
        bool conv = which == 1;
        clrun_graph *g[2];
        for (int form = 0; form < 2; form++) {
            assert_int_equal(clrun_graph_create("zp", &g[form]), CLRUN_OK);
            clrun_graph *d = g[form];
            int32_t x;
            clrun_tensor_type xt = conv ? (clrun_tensor_type){CLRUN_F32, 4, {2, 64, 7, 7}}
                                        : (clrun_tensor_type){CLRUN_F32, 2, {19, 512}};
            clrun_tensor_type qt = conv ? (clrun_tensor_type){CLRUN_U8, 4, {12, 64, 3, 3}}
                                        : (clrun_tensor_type){CLRUN_U8, 2, {512, 12}};
            assert_int_equal(clrun_graph_add_input(d, "x", &xt, false, &x), CLRUN_OK);
            uint64_t n = clrun_tensor_elements(&qt), rng = 9;
            uint8_t *q = malloc((size_t)n);
            assert_non_null(q);
            for (uint64_t i = 0; i < n; i++)
                q[i] = (uint8_t)(rng_next(&rng) % 256);
            float scale[12], zero[12];
            for (int c = 0; c < 12; c++) {
                scale[c] = 0.001f * (float)(c + 3) / 7.0f;
                zero[c] = (float)(100 + 7 * c);
            }
            int32_t qi, si, zi;
            assert_int_equal(clrun_graph_add_constant(d, "q", &qt, q, CLRUN_FILL_ZEROS, 0, 0, 0, &qi), CLRUN_OK);
            free(q);
            clrun_tensor_type ct = {CLRUN_F32, 1, {12}};
            if (form == 1 && conv)
                ct = (clrun_tensor_type){CLRUN_F32, 4, {12, 1, 1, 1}};
            assert_int_equal(clrun_graph_add_constant(d, "s", &ct, scale, CLRUN_FILL_ZEROS, 0, 0, 0, &si), CLRUN_OK);
            assert_int_equal(clrun_graph_add_constant(d, "z", &ct, zero, CLRUN_FILL_ZEROS, 0, 0, 0, &zi), CLRUN_OK);
            const char *op = conv ? "conv2d" : "matmul";
            int32_t y;
            if (form == 0) {
                clrun_attr dq = {.name = "dequant", .kind = CLRUN_ATTR_INT, .i = 2};
                y = node(d, op, (int32_t[]){x, qi, si, zi}, 4, "y", &dq, 1);
            } else {
                clrun_attr to = {.name = "to", .kind = CLRUN_ATTR_INT, .i = CLRUN_F32};
                int32_t f = node(d, "cast", &qi, 1, "qf", &to, 1);
                int32_t c = node(d, "sub", (int32_t[]){f, zi}, 2, "qc", NULL, 0);
                int32_t w = node(d, "mul", (int32_t[]){c, si}, 2, "w", NULL, 0);
                y = node(d, op, (int32_t[]){x, w}, 2, "y", NULL, 0);
            }
            int32_t y2 = node(d, "relu", &y, 1, "y2", NULL, 0), y3 = node(d, "neg", &y, 1, "y3", NULL, 0);
            clrun_graph_mark_output(d, y);
            clrun_graph_mark_output(d, y2);
            clrun_graph_mark_output(d, y3);
        }
        clrun__ops_kernels = CLRUN__KERNELS_VECTOR; /* the core on every device */
        outcome a = run(g[0], "tlsf", 1), b = run_nodes(g[1], "tlsf", 1), c = run(g[0], "planned", -1);
        outcome d = run(g[1], "tlsf", 1); /* the chain folded at load */
        clrun__ops_kernels = CLRUN__KERNELS_AUTO;
        outcome e = run(g[0], "tlsf", 1), f = run_nodes(g[1], "tlsf", 1); /* the device's own */
        assert_same(&e, &f, conv ? "conv2d u8, the device's kernels" : "matmul u8, the device's kernels");
        assert_same(&d, &b, conv ? "conv2d u8, folded" : "matmul u8, folded");
        assert_true(d.constants == a.constants);
        assert_same(&a, &b, conv ? "conv2d u8" : "matmul u8");
        assert_same(&c, &b, conv ? "conv2d u8, planned" : "matmul u8, planned");
        assert_true(a.peak < b.peak); /* no f32 weight among the run's buffers */
        clrun_graph_destroy(g[0]);
        clrun_graph_destroy(g[1]);
    }
}

/* A wrong scale, a missing one, a bad dequant: refused by name. */
static void bad_dequantizing_inputs_are_refused(void **state)
{
    (void)state;
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("bad", &g), CLRUN_OK);
    int32_t x, q, s, y;
    clrun_tensor_type xt = {CLRUN_F32, 2, {3, 4}}, qt = {CLRUN_I8, 2, {4, 5}}, st = {CLRUN_F32, 1, {4}};
    assert_int_equal(clrun_graph_add_input(g, "x", &xt, false, &x), CLRUN_OK);
    assert_int_equal(clrun_graph_add_constant(g, "q", &qt, NULL, CLRUN_FILL_ZEROS, 0, 0, 0, &q), CLRUN_OK);
    assert_int_equal(clrun_graph_add_constant(g, "s", &st, NULL, CLRUN_FILL_ZEROS, 0, 0, 0, &s), CLRUN_OK);
    const char *names[1] = {"y"};
    clrun_attr dq = {.name = "dequant", .kind = CLRUN_ATTR_INT, .i = 1};
    assert_int_not_equal(clrun_graph_add_node(g, "matmul", (int32_t[]){x, q}, 2, names, 1, NULL, 0, &y), CLRUN_OK);
    assert_non_null(strstr(clrun_graph_last_error(g), "take a scale"));
    assert_int_not_equal(clrun_graph_add_node(g, "matmul", (int32_t[]){x, q, s}, 3, names, 1, &dq, 1, &y), CLRUN_OK);
    assert_non_null(strstr(clrun_graph_last_error(g), "expected f32[5]"));
    dq.i = 3;
    assert_int_not_equal(clrun_graph_add_node(g, "matmul", (int32_t[]){x, q, s}, 3, names, 1, &dq, 1, &y), CLRUN_OK);
    assert_non_null(strstr(clrun_graph_last_error(g), "dequant"));
    clrun_graph_destroy(g);
}

int main(void)
{
    clrun_test_device_environment(cache_root, sizeof cache_root);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kernels_widen_as_the_nodes_did),
        cmocka_unit_test(a_zero_point_is_subtracted_as_the_nodes_do),
        cmocka_unit_test(bad_dequantizing_inputs_are_refused),
    };
    CLRUN_TEST_FILTERS_FROM_ENVIRONMENT();
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    clrun_test_remove_dir(cache_root);
    return failed;
}
