/* Loops run at run time (graph/infer_loop.c, lib/exec/exec_loop.c), built by hand:
 *
 *   v = loop_carry(x); iter, on = loop_begin(M, go, v)
 *   [guard on] s = add(v, w); c = less(iter_f, limit) ...; r = loop_carry(s)
 *   n = loop_end(iter, on, c_or_on, r, v, w); y = loop_carry(v, n)
 *
 * y = x + M w (the condition passed through) in every executor mode, fusion on or off, with M
 * and go read back in each run; M = 0 or go false gives x; a negative M fails the run, naming
 * the Loop, and gives every byte of the run back (the next run is right again); a loop_end
 * without its loop_begin is refused when the executor is made. A Scan's ops (an ONNX Scan run
 * per iteration):
 *
 *   f = scan_stack(x) [2, L, 3]; r = scan_stack(x) [2, 3, L]; iter, on = loop_begin(M, go)
 *   [guard on] sl = gather(x, iter) (axis 1); d = add(sl, sl)
 *              tf = scan_put(f, d, iter) (axis 1); tr = scan_put(r, d, iter) (axis 2, reverse)
 *   n = loop_end(iter, on, on, x, f, r, tf, tr); yf = loop_carry(f, n); yr = loop_carry(r, n)
 *
 * stack 2 x forward on axis 1 and reversed on axis 2, exactly, in every mode; a slice of the
 * wrong shape is refused naming scan_put. Runs on a real device (POCL in CI). */
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

enum { N = 5 };

static clrun_graph *loop_graph(bool paired)
{
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("looped", &g), CLRUN_OK);
    clrun_tensor_type xt = {CLRUN_F32, 1, {N}}, mt = {CLRUN_I64, 0, {0}}, bt = {CLRUN_BOOL, 0, {0}};
    clrun_tensor_id x, w, m, go, v, begun[2], s, r, n, y;
    assert_int_equal(clrun_graph_add_input(g, "x", &xt, false, &x), CLRUN_OK);
    assert_int_equal(clrun_graph_add_input(g, "w", &xt, false, &w), CLRUN_OK);
    assert_int_equal(clrun_graph_add_input(g, "M", &mt, false, &m), CLRUN_OK);
    assert_int_equal(clrun_graph_add_input(g, "go", &bt, false, &go), CLRUN_OK);
    const char *vn[] = {"v"}, *bn[] = {"iter", "on"}, *sn[] = {"s"}, *rn[] = {"r"}, *nn[] = {"n"}, *yn[] = {"y"};
    assert_int_equal(clrun_graph_add_node(g, "loop_carry", &x, 1, vn, 1, NULL, 0, &v), CLRUN_OK);
    clrun_tensor_id bin[3] = {m, go, v};
    if (paired)
        assert_int_equal(clrun_graph_add_node(g, "loop_begin", bin, 3, bn, 2, NULL, 0, begun), CLRUN_OK);
    clrun_tensor_id sin[2] = {v, w};
    assert_int_equal(clrun_graph_add_node(g, "add", sin, 2, sn, 1, NULL, 0, &s), CLRUN_OK);
    assert_int_equal(clrun_graph_add_node(g, "loop_carry", &s, 1, rn, 1, NULL, 0, &r), CLRUN_OK);
    if (paired) {
        int32_t last = clrun_graph_node_count(g);
        assert_int_equal(clrun__graph_set_guard(g, last - 2, begun[1], false), CLRUN_OK);
        assert_int_equal(clrun__graph_set_guard(g, last - 1, begun[1], false), CLRUN_OK);
    } else { /* a loop_end fed by anything but a loop_begin's outputs */
        begun[0] = m;
        begun[1] = go;
    }
    clrun_tensor_id ein[6] = {begun[0], begun[1], begun[1], r, v, w};
    clrun_attr carried = {.name = "carried", .kind = CLRUN_ATTR_INT, .i = 1};
    assert_int_equal(clrun_graph_add_node(g, "loop_end", ein, 6, nn, 1, &carried, 1, &n), CLRUN_OK);
    clrun_tensor_id yin[2] = {v, n};
    assert_int_equal(clrun_graph_add_node(g, "loop_carry", yin, 2, yn, 1, NULL, 0, &y), CLRUN_OK);
    assert_int_equal(clrun_graph_mark_output(g, y), CLRUN_OK);
    return g;
}

static void upload(clrun_context *ctx, const void *host, uint64_t bytes, clrun_buffer *out)
{
    assert_int_equal(clrun_alloc(ctx, bytes, out), CLRUN_OK);
    assert_int_equal(clrun_buffer_write(ctx, out, host), CLRUN_OK);
}

static clrun_status run(clrun_context *ctx, clrun_exec *exec, int64_t trip, bool go, float *out)
{
    float x[N], w[N];
    for (int i = 0; i < N; i++) {
        x[i] = (float)i - 2.0f;
        w[i] = 0.25f * (float)(i + 1);
    }
    unsigned char g = go;
    clrun_buffer in[4];
    upload(ctx, x, sizeof x, &in[0]);
    upload(ctx, w, sizeof w, &in[1]);
    upload(ctx, &trip, sizeof trip, &in[2]);
    upload(ctx, &g, 1, &in[3]);
    clrun_status s = clrun_exec_run(exec, in, 4);
    if (s == CLRUN_OK)
        assert_int_equal(clrun_exec_read_output(exec, 0, out, sizeof(float) * N), CLRUN_OK);
    for (int i = 0; i < 4; i++)
        clrun_free(ctx, &in[i]);
    return s;
}

static void expect(const float *out, int64_t times)
{
    for (int i = 0; i < N; i++) {
        float want = (float)i - 2.0f;
        for (int64_t t = 0; t < times; t++)
            want += 0.25f * (float)(i + 1);
        if (out[i] != want)
            fail_msg("element %d after %lld iterations: %g, expected %g", i, (long long)times, out[i], want);
    }
}

static void the_body_runs_once_per_iteration_in_every_mode(void **state)
{
    (void)state;
    clrun_graph *g = loop_graph(true);
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    const clrun_exec_mode mode[] = {CLRUN_EXEC_POOLED, CLRUN_EXEC_NAIVE, CLRUN_EXEC_PLANNED};
    for (int m = 0; m < 6; m++) {
        clrun_exec_options eo;
        clrun_exec_options_init(&eo);
        eo.mode = mode[m % 3];
        eo.fusion = m < 3 ? 1 : -1;
        clrun_exec *exec = NULL;
        assert_int_equal(clrun_exec_create(ctx, g, &eo, &exec), CLRUN_OK);
        float out[N];
        assert_int_equal(run(ctx, exec, 7, true, out), CLRUN_OK);
        expect(out, 7);
        assert_int_equal(run(ctx, exec, 0, true, out), CLRUN_OK);
        expect(out, 0);
        assert_int_equal(run(ctx, exec, 3, false, out), CLRUN_OK);
        expect(out, 0);
        clrun_memory_stats before, after;
        assert_int_equal(clrun_memory_stats_get(ctx, &before), CLRUN_OK);
        assert_int_equal(run(ctx, exec, -2, true, out), CLRUN_ERROR_INVALID_ARGUMENT);
        const char *msg = clrun_last_error(ctx);
        if (!strstr(msg, "the trip count 'M' is -2"))
            fail_msg("mode %d: message '%s'", m, msg);
        assert_int_equal(run(ctx, exec, 2, true, out), CLRUN_OK);
        expect(out, 2);
        assert_int_equal(clrun_memory_stats_get(ctx, &after), CLRUN_OK);
        assert_int_equal(after.in_use, before.in_use); /* nothing of the failed run is held */
        clrun_exec_destroy(exec);
    }
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

static void a_loop_end_without_its_begin_is_refused(void **state)
{
    (void)state;
    clrun_graph *g = loop_graph(false);
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    clrun_exec *exec = NULL;
    assert_int_equal(clrun_exec_create(ctx, g, NULL, &exec), CLRUN_ERROR_INVALID_GRAPH);
    assert_null(exec);
    assert_non_null(strstr(clrun_last_error(ctx), "loop_end 'n'"));
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

enum { L = 7 };

static clrun_status scan_graph(clrun_graph **out, int64_t slice_dim)
{
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("scanned", &g), CLRUN_OK);
    *out = g;
    clrun_tensor_type xt = {CLRUN_F32, 3, {2, L, 3}}, mt = {CLRUN_I64, 0, {0}}, bt = {CLRUN_BOOL, 0, {0}};
    clrun_tensor_id x, m, go, f, r, begun[2], sl, d, tf, tr, n, yf, yr;
    assert_int_equal(clrun_graph_add_input(g, "x", &xt, false, &x), CLRUN_OK);
    assert_int_equal(clrun_graph_add_input(g, "M", &mt, false, &m), CLRUN_OK);
    assert_int_equal(clrun_graph_add_input(g, "go", &bt, false, &go), CLRUN_OK);
    const char *fn[] = {"f"}, *rn[] = {"r"}, *bn[] = {"iter", "on"}, *sn[] = {"sl"}, *dn[] = {"d"},
               *tfn[] = {"tf"}, *trn[] = {"tr"}, *nn[] = {"n"}, *yfn[] = {"yf"}, *yrn[] = {"yr"};
    clrun_attr fa[2] = {{.name = "shape", .kind = CLRUN_ATTR_INTS, .ints = {2, L, 3}, .count = 3},
                        {.name = "dtype", .kind = CLRUN_ATTR_INT, .i = CLRUN_F32}};
    clrun_attr ra[2] = {{.name = "shape", .kind = CLRUN_ATTR_INTS, .ints = {2, slice_dim, L}, .count = 3},
                        {.name = "dtype", .kind = CLRUN_ATTR_INT, .i = CLRUN_F32}};
    assert_int_equal(clrun_graph_add_node(g, "scan_stack", &x, 1, fn, 1, fa, 2, &f), CLRUN_OK);
    assert_int_equal(clrun_graph_add_node(g, "scan_stack", &x, 1, rn, 1, ra, 2, &r), CLRUN_OK);
    clrun_tensor_id bin[2] = {m, go};
    assert_int_equal(clrun_graph_add_node(g, "loop_begin", bin, 2, bn, 2, NULL, 0, begun), CLRUN_OK);
    int32_t first = clrun_graph_node_count(g);
    clrun_tensor_id gin[2] = {x, begun[0]};
    clrun_attr axis1 = {.name = "axis", .kind = CLRUN_ATTR_INT, .i = 1};
    assert_int_equal(clrun_graph_add_node(g, "gather", gin, 2, sn, 1, &axis1, 1, &sl), CLRUN_OK);
    clrun_tensor_id ain[2] = {sl, sl};
    assert_int_equal(clrun_graph_add_node(g, "add", ain, 2, dn, 1, NULL, 0, &d), CLRUN_OK);
    clrun_tensor_id pf[3] = {f, d, begun[0]}, pr[3] = {r, d, begun[0]};
    assert_int_equal(clrun_graph_add_node(g, "scan_put", pf, 3, tfn, 1, &axis1, 1, &tf), CLRUN_OK);
    clrun_attr rev[2] = {{.name = "axis", .kind = CLRUN_ATTR_INT, .i = 2},
                         {.name = "reverse", .kind = CLRUN_ATTR_INT, .i = 1}};
    clrun_status s = clrun_graph_add_node(g, "scan_put", pr, 3, trn, 1, rev, 2, &tr);
    if (s != CLRUN_OK)
        return s;
    for (int32_t k = first; k < clrun_graph_node_count(g); k++)
        assert_int_equal(clrun__graph_set_guard(g, k, begun[1], false), CLRUN_OK);
    clrun_tensor_id ein[8] = {begun[0], begun[1], begun[1], x, f, r, tf, tr};
    clrun_attr carried = {.name = "carried", .kind = CLRUN_ATTR_INT, .i = 0};
    assert_int_equal(clrun_graph_add_node(g, "loop_end", ein, 8, nn, 1, &carried, 1, &n), CLRUN_OK);
    clrun_tensor_id yfin[2] = {f, n}, yrin[2] = {r, n};
    assert_int_equal(clrun_graph_add_node(g, "loop_carry", yfin, 2, yfn, 1, NULL, 0, &yf), CLRUN_OK);
    assert_int_equal(clrun_graph_add_node(g, "loop_carry", yrin, 2, yrn, 1, NULL, 0, &yr), CLRUN_OK);
    assert_int_equal(clrun_graph_mark_output(g, yf), CLRUN_OK);
    assert_int_equal(clrun_graph_mark_output(g, yr), CLRUN_OK);
    return CLRUN_OK;
}

static void scan_outputs_are_stacked_per_iteration_in_every_mode(void **state)
{
    (void)state;
    clrun_graph *g = NULL;
    assert_int_equal(scan_graph(&g, 3), CLRUN_OK);
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    float x[2 * L * 3];
    for (int i = 0; i < 2 * L * 3; i++)
        x[i] = 0.125f * (float)(i * 7 % 23) - 1.0f;
    int64_t trip = L;
    unsigned char go = 1;
    const clrun_exec_mode mode[] = {CLRUN_EXEC_POOLED, CLRUN_EXEC_NAIVE, CLRUN_EXEC_PLANNED};
    for (int m = 0; m < 6; m++) {
        clrun_exec_options eo;
        clrun_exec_options_init(&eo);
        eo.mode = mode[m % 3];
        eo.fusion = m < 3 ? 1 : -1;
        clrun_exec *exec = NULL;
        assert_int_equal(clrun_exec_create(ctx, g, &eo, &exec), CLRUN_OK);
        clrun_buffer in[3];
        upload(ctx, x, sizeof x, &in[0]);
        upload(ctx, &trip, sizeof trip, &in[1]);
        upload(ctx, &go, 1, &in[2]);
        for (int round = 0; round < 2; round++) { /* the stacked tensors are made again per run */
            assert_int_equal(clrun_exec_run(exec, in, 3), CLRUN_OK);
            float yf[2 * L * 3], yr[2 * 3 * L];
            assert_int_equal(clrun_exec_read_output(exec, 0, yf, sizeof yf), CLRUN_OK);
            assert_int_equal(clrun_exec_read_output(exec, 1, yr, sizeof yr), CLRUN_OK);
            for (int o = 0; o < 2; o++)
                for (int t = 0; t < L; t++)
                    for (int k = 0; k < 3; k++) {
                        float want = x[(o * L + t) * 3 + k] + x[(o * L + t) * 3 + k];
                        if (yf[(o * L + t) * 3 + k] != want || yr[(o * 3 + k) * L + (L - 1 - t)] != want)
                            fail_msg("mode %d: element (%d, %d, %d): %g and %g, expected %g", m, o, t, k,
                                     yf[(o * L + t) * 3 + k], yr[(o * 3 + k) * L + (L - 1 - t)], want);
                    }
        }
        for (int i = 0; i < 3; i++)
            clrun_free(ctx, &in[i]);
        clrun_exec_destroy(exec);
    }
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

static void a_slice_of_the_wrong_shape_is_refused(void **state)
{
    (void)state;
    clrun_graph *g = NULL;
    assert_int_equal(scan_graph(&g, 4), CLRUN_ERROR_INVALID_GRAPH);
    if (!strstr(clrun_graph_last_error(g), "scan_put: f32[2, 3] is not a slice of f32[2, 4, 7] on axis 2"))
        fail_msg("message '%s'", clrun_graph_last_error(g));
    clrun_graph_destroy(g);
}

/* scan_put writes into its stacked tensor in place, which only the pattern an ONNX Scan's import
 * makes keeps out of every other pass's sight: a stacked tensor another node reads (fusion would
 * move that read past the writes), one that is not scan_stack's, and a token no loop_end reads
 * are refused at creation, naming scan_put. */
static void a_scan_put_outside_its_pattern_is_refused(void **state)
{
    (void)state;
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    clrun_tensor_type yt = {CLRUN_F32, 1, {3}}, at = {CLRUN_F32, 2, {4, 3}}, it = {CLRUN_I64, 1, {1}};
    clrun_attr sa[2] = {{.name = "shape", .kind = CLRUN_ATTR_INTS, .ints = {4, 3}, .count = 2},
                        {.name = "dtype", .kind = CLRUN_ATTR_INT, .i = CLRUN_F32}};
    clrun_attr axis0 = {.name = "axis", .kind = CLRUN_ATTR_INT, .i = 0};
    static const char *const wants[] = {"the stacked tensor 'acc' it writes into is read by 'r' (relu)",
                                        "its input 0 'acc' is not a scan_stack's output",
                                        "no loop_end reads its token"};
    for (int c = 0; c < 3; c++) {
        clrun_graph *g = NULL;
        assert_int_equal(clrun_graph_create("put", &g), CLRUN_OK);
        clrun_tensor_id y, it_id, acc, r, tok;
        assert_int_equal(clrun_graph_add_input(g, "y", &yt, false, &y), CLRUN_OK);
        assert_int_equal(clrun_graph_add_constant(g, "it", &it, NULL, CLRUN_FILL_ZEROS, 0, 0, 0, &it_id),
                         CLRUN_OK);
        const char *an[] = {"acc"}, *rn[] = {"r"}, *tn[] = {"tok"};
        if (c == 1)
            assert_int_equal(clrun_graph_add_input(g, "acc", &at, false, &acc), CLRUN_OK);
        else
            assert_int_equal(clrun_graph_add_node(g, "scan_stack", &y, 1, an, 1, sa, 2, &acc), CLRUN_OK);
        clrun_tensor_id pin[3] = {acc, y, it_id};
        assert_int_equal(clrun_graph_add_node(g, "scan_put", pin, 3, tn, 1, &axis0, 1, &tok), CLRUN_OK);
        assert_int_equal(clrun_graph_mark_output(g, tok), CLRUN_OK);
        if (c == 0) {
            assert_int_equal(clrun_graph_add_node(g, "relu", &acc, 1, rn, 1, NULL, 0, &r), CLRUN_OK);
            assert_int_equal(clrun_graph_mark_output(g, r), CLRUN_OK);
        }
        for (int fusion = -1; fusion <= 1; fusion += 2) {
            clrun_exec_options eo;
            clrun_exec_options_init(&eo);
            eo.fusion = fusion;
            clrun_exec *exec = NULL;
            assert_int_equal(clrun_exec_create(ctx, g, &eo, &exec), CLRUN_ERROR_INVALID_GRAPH);
            assert_null(exec);
            if (!strstr(clrun_last_error(ctx), "scan_put 'tok'") || !strstr(clrun_last_error(ctx), wants[c]))
                fail_msg("case %d, fusion %d: message '%s'", c, fusion, clrun_last_error(ctx));
        }
        clrun_graph_destroy(g);
    }
    clrun_context_destroy(ctx);
}

/* A stacked tensor whose scan_stack reads a constant is not folded into a resident constant (the
 * iterations write into it every run): nothing folds, and every run gives the same stacks. */
static void a_stack_over_a_constant_is_not_folded(void **state)
{
    (void)state;
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("stacked", &g), CLRUN_OK);
    clrun_tensor_type ct = {CLRUN_F32, 1, {3}}, mt = {CLRUN_I64, 0, {0}}, bt = {CLRUN_BOOL, 0, {0}};
    clrun_tensor_id c, m, go, acc, begun[2], d, tok, n, y;
    assert_int_equal(clrun_graph_add_constant(g, "c", &ct, NULL, CLRUN_FILL_UNIFORM, -1, 1, 7, &c), CLRUN_OK);
    assert_int_equal(clrun_graph_add_input(g, "M", &mt, false, &m), CLRUN_OK);
    assert_int_equal(clrun_graph_add_input(g, "go", &bt, false, &go), CLRUN_OK);
    const char *an[] = {"acc"}, *bn[] = {"iter", "on"}, *dn[] = {"d"}, *tn[] = {"tok"}, *nn[] = {"n"},
               *yn[] = {"y"};
    clrun_attr sa[2] = {{.name = "shape", .kind = CLRUN_ATTR_INTS, .ints = {L, 3}, .count = 2},
                        {.name = "dtype", .kind = CLRUN_ATTR_INT, .i = CLRUN_F32}};
    assert_int_equal(clrun_graph_add_node(g, "scan_stack", &c, 1, an, 1, sa, 2, &acc), CLRUN_OK);
    clrun_tensor_id bin[2] = {m, go};
    assert_int_equal(clrun_graph_add_node(g, "loop_begin", bin, 2, bn, 2, NULL, 0, begun), CLRUN_OK);
    int32_t first = clrun_graph_node_count(g);
    clrun_tensor_id ain[2] = {c, c};
    assert_int_equal(clrun_graph_add_node(g, "add", ain, 2, dn, 1, NULL, 0, &d), CLRUN_OK);
    clrun_tensor_id pin[3] = {acc, d, begun[0]};
    clrun_attr axis0 = {.name = "axis", .kind = CLRUN_ATTR_INT, .i = 0};
    assert_int_equal(clrun_graph_add_node(g, "scan_put", pin, 3, tn, 1, &axis0, 1, &tok), CLRUN_OK);
    for (int32_t k = first; k < clrun_graph_node_count(g); k++)
        assert_int_equal(clrun__graph_set_guard(g, k, begun[1], false), CLRUN_OK);
    clrun_tensor_id ein[6] = {begun[0], begun[1], begun[1], c, acc, tok};
    clrun_attr carried = {.name = "carried", .kind = CLRUN_ATTR_INT, .i = 0};
    assert_int_equal(clrun_graph_add_node(g, "loop_end", ein, 6, nn, 1, &carried, 1, &n), CLRUN_OK);
    clrun_tensor_id yin[2] = {acc, n};
    assert_int_equal(clrun_graph_add_node(g, "loop_carry", yin, 2, yn, 1, NULL, 0, &y), CLRUN_OK);
    assert_int_equal(clrun_graph_mark_output(g, y), CLRUN_OK);
    clrun_exec_options eo;
    clrun_exec_options_init(&eo);
    eo.fold = 1;
    clrun_exec *exec = NULL;
    assert_int_equal(clrun_exec_create(ctx, g, &eo, &exec), CLRUN_OK);
    clrun_exec_stats st;
    assert_int_equal(clrun_exec_stats_get(exec, &st), CLRUN_OK);
    assert_int_equal(st.folded_nodes, 0);
    float cv[3];
    clrun__constant_values(&g->tensors[c], cv);
    for (int64_t trip = L; trip >= L - 2; trip -= 2) { /* fewer iterations: the rest stays 0 */
        unsigned char on = 1;
        clrun_buffer in[2];
        upload(ctx, &trip, sizeof trip, &in[0]);
        upload(ctx, &on, 1, &in[1]);
        assert_int_equal(clrun_exec_run(exec, in, 2), CLRUN_OK);
        float out[L * 3];
        assert_int_equal(clrun_exec_read_output(exec, 0, out, sizeof out), CLRUN_OK);
        for (int t = 0; t < L; t++)
            for (int k = 0; k < 3; k++)
                if (out[t * 3 + k] != (t < trip ? cv[k] + cv[k] : 0.0f))
                    fail_msg("%lld iterations: element (%d, %d) is %g", (long long)trip, t, k, out[t * 3 + k]);
        clrun_free(ctx, &in[0]);
        clrun_free(ctx, &in[1]);
    }
    clrun_exec_destroy(exec);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

int main(void)
{
    clrun_test_device_environment(cache_root, sizeof cache_root);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_body_runs_once_per_iteration_in_every_mode),
        cmocka_unit_test(a_loop_end_without_its_begin_is_refused),
        cmocka_unit_test(scan_outputs_are_stacked_per_iteration_in_every_mode),
        cmocka_unit_test(a_slice_of_the_wrong_shape_is_refused),
        cmocka_unit_test(a_scan_put_outside_its_pattern_is_refused),
        cmocka_unit_test(a_stack_over_a_constant_is_not_folded),
    };
    CLRUN_TEST_FILTERS_FROM_ENVIRONMENT();
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    clrun_test_remove_dir(cache_root);
    return failed;
}
