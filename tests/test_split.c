/* Tests of the pipeline split's decision (lib/graph/split.c): where the cut goes, what each
 * stage is estimated to hold, the stage graphs, and the refusals. Pure: no device. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <clrun/context.h>
#include <clrun/graph.h>

#include "graph/split.h"

#define F32_BYTES(r, c) ((uint64_t)(r) * (c) * 4)

/* x f32[4, 64] through four matmuls by 64x64 weights, a relu after each of the first three:
 * steps mm1 r1 mm2 r2 mm3 r3 mm4; y (mm4) is the output. Every activation is 1 KiB, every
 * weight 16 KiB. With `extra_output`, r1 is an output too. */
static clrun_graph *chain(bool extra_output)
{
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("chain", &g), CLRUN_OK);
    clrun_tensor_type xt = {CLRUN_F32, 2, {4, 64}}, wt = {CLRUN_F32, 2, {64, 64}};
    clrun_tensor_id h;
    assert_int_equal(clrun_graph_add_input(g, "x", &xt, false, &h), CLRUN_OK);
    for (int l = 1; l <= 4; l++) {
        char wn[8], mn[8], rn[8];
        snprintf(wn, sizeof wn, "w%d", l);
        snprintf(mn, sizeof mn, l == 4 ? "y" : "mm%d", l);
        snprintf(rn, sizeof rn, "r%d", l);
        clrun_tensor_id w, in[2];
        assert_int_equal(clrun_graph_add_constant(g, wn, &wt, NULL, CLRUN_FILL_UNIFORM, -1, 1,
                                                  (uint64_t)l, &w),
                         CLRUN_OK);
        in[0] = h;
        in[1] = w;
        const char *names[] = {mn};
        assert_int_equal(clrun_graph_add_node(g, "matmul", in, 2, names, 1, NULL, 0, &h), CLRUN_OK);
        if (l < 4) {
            const char *rnames[] = {rn};
            assert_int_equal(clrun_graph_add_node(g, "relu", &h, 1, rnames, 1, NULL, 0, &h),
                             CLRUN_OK);
            if (l == 1 && extra_output)
                assert_int_equal(clrun_graph_mark_output(g, h), CLRUN_OK);
        }
    }
    assert_int_equal(clrun_graph_mark_output(g, h), CLRUN_OK);
    return g;
}

/* Two weights per stage: 32 KiB of weights, 1 KiB of input, 2 KiB of activations at the peak
 * (a matmul's input and output alive together) = 35 KiB exactly; a byte less fits no cut. */
static void the_cut_meets_the_budgets_where_the_weights_fall(void **state)
{
    (void)state;
    clrun_graph *g = chain(false);
    uint64_t need = 2 * F32_BYTES(64, 64) + F32_BYTES(4, 64) + 2 * F32_BYTES(4, 64);
    uint64_t budgets[2] = {need, need};
    clrun__split split;
    char err[512];
    assert_int_equal(clrun__split_find(g, NULL, budgets, 2, &split, err, sizeof err), CLRUN_OK);
    assert_int_equal(split.stages, 2);
    /* Cutting before r2 or before mm3 both cross 1 KiB: the earliest wins. */
    assert_int_equal(split.stage[0].first, 0);
    assert_int_equal(split.stage[0].end, 3);
    assert_int_equal(split.stage[1].first, 3);
    assert_int_equal(split.stage[1].end, 7);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(split.stage[k].weights, 2 * F32_BYTES(64, 64));
        assert_int_equal(split.stage[k].inputs, F32_BYTES(4, 64));
        assert_int_equal(split.stage[k].activations, 2 * F32_BYTES(4, 64));
        assert_int_equal(split.stage[k].estimate, need);
    }
    assert_int_equal(split.stage[0].bytes_in, 0);
    assert_int_equal(split.stage[0].bytes_out, F32_BYTES(4, 64));
    assert_int_equal(split.stage[1].bytes_in, F32_BYTES(4, 64));
    assert_int_equal(split.stage[1].bytes_out, 0);
    assert_int_equal(split.crossing, F32_BYTES(4, 64));
    clrun__split_free(&split);

    /* A byte less on the second device: no cut. */
    budgets[1] = need - 1;
    memset(&split, 0, sizeof split);
    assert_int_equal(clrun__split_find(g, NULL, budgets, 2, &split, err, sizeof err),
                     CLRUN_ERROR_OUT_OF_MEMORY);
    assert_null(split.stage);
    assert_non_null(strstr(err, "no cut of the 7 steps into 2 consecutive stages"));
    assert_non_null(strstr(err, "35.00 KiB, 35.00 KiB")); /* need - 1 rounds to it */
    assert_non_null(strstr(err, "(64.00 KiB of weights)"));
    /* a matmul alone: 16 KiB of weights, 1 KiB in, 1 KiB out (the first of four equal ones) */
    assert_non_null(strstr(err, "the whole graph needs 67.00 KiB"));
    assert_non_null(strstr(err, "'mm1' (matmul), 18.00 KiB alone"));
    assert_string_equal(clrun_last_error(NULL), err);

    /* No limits: every cut crosses 1 KiB; of those, the one whose larger stage is least (two
     * matmuls each), the earliest of them. */
    uint64_t open[2] = {0, 0};
    assert_int_equal(clrun__split_find(g, NULL, open, 2, &split, err, sizeof err), CLRUN_OK);
    assert_int_equal(split.stage[0].end, 3);
    assert_int_equal(split.crossing, F32_BYTES(4, 64));
    clrun__split_free(&split);

    /* No budgets: one device takes the whole graph. */
    uint64_t none = 0;
    assert_int_equal(clrun__split_find(g, NULL, &none, 1, &split, err, sizeof err), CLRUN_OK);
    assert_int_equal(split.stages, 1);
    assert_int_equal(split.stage[0].end, 7);
    assert_int_equal(split.stage[0].weights, 4 * F32_BYTES(64, 64));
    assert_int_equal(split.crossing, 0);
    clrun__split_free(&split);
    clrun_graph_destroy(g);
}

/* relu(x) 1 KiB -> matmul to 4 KiB -> matmul to 256 B -> relu: without budgets the cut goes
 * where 256 B cross, not 1 or 4 KiB. */
static void the_cut_goes_where_the_fewest_bytes_cross(void **state)
{
    (void)state;
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("narrow", &g), CLRUN_OK);
    clrun_tensor_type xt = {CLRUN_F32, 2, {4, 64}}, bt = {CLRUN_F32, 2, {64, 256}},
                      ct = {CLRUN_F32, 2, {256, 16}};
    clrun_tensor_id x, wb, wc, h, in[2];
    assert_int_equal(clrun_graph_add_input(g, "x", &xt, false, &x), CLRUN_OK);
    assert_int_equal(clrun_graph_add_constant(g, "wb", &bt, NULL, CLRUN_FILL_ONES, 0, 0, 0, &wb), CLRUN_OK);
    assert_int_equal(clrun_graph_add_constant(g, "wc", &ct, NULL, CLRUN_FILL_ONES, 0, 0, 0, &wc), CLRUN_OK);
    const char *n1[] = {"h1"}, *n2[] = {"big"}, *n3[] = {"small"}, *n4[] = {"out"};
    assert_int_equal(clrun_graph_add_node(g, "relu", &x, 1, n1, 1, NULL, 0, &h), CLRUN_OK);
    in[0] = h;
    in[1] = wb;
    assert_int_equal(clrun_graph_add_node(g, "matmul", in, 2, n2, 1, NULL, 0, &h), CLRUN_OK);
    in[0] = h;
    in[1] = wc;
    assert_int_equal(clrun_graph_add_node(g, "matmul", in, 2, n3, 1, NULL, 0, &h), CLRUN_OK);
    assert_int_equal(clrun_graph_add_node(g, "relu", &h, 1, n4, 1, NULL, 0, &h), CLRUN_OK);
    assert_int_equal(clrun_graph_mark_output(g, h), CLRUN_OK);
    uint64_t budgets[2] = {0, 0};
    clrun__split split;
    assert_int_equal(clrun__split_find(g, NULL, budgets, 2, &split, NULL, 0), CLRUN_OK);
    assert_int_equal(split.stage[0].end, 3);
    assert_int_equal(split.crossing, F32_BYTES(4, 16));
    assert_int_equal(split.stage[1].bytes_in, F32_BYTES(4, 16));
    /* Three devices: the other cut is the next narrowest, before the wide matmul (1 KiB). */
    uint64_t three[3] = {0, 0, 0};
    clrun__split_free(&split);
    assert_int_equal(clrun__split_find(g, NULL, three, 3, &split, NULL, 0), CLRUN_OK);
    assert_int_equal(split.stage[0].end, 1);
    assert_int_equal(split.stage[1].end, 3);
    assert_int_equal(split.crossing, F32_BYTES(4, 64) + F32_BYTES(4, 16));
    clrun__split_free(&split);
    clrun_graph_destroy(g);
}

static void bad_requests_are_refused_with_reasons(void **state)
{
    (void)state;
    clrun_graph *g = chain(false);
    clrun__split split;
    memset(&split, 0, sizeof split);
    char err[512];
    uint64_t budgets[8] = {0};
    assert_int_equal(clrun__split_find(g, NULL, budgets, 0, &split, err, sizeof err),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "0 devices"));
    assert_int_equal(clrun__split_find(g, NULL, budgets, 8, &split, err, sizeof err),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "7 nodes, too few for 8 stages"));
    assert_null(split.stage);
    clrun_graph *sub = (clrun_graph *)g;
    assert_int_equal(clrun__split_stage_graph(g, NULL, 3, 3, NULL, &sub, err, sizeof err),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_null(sub);
    clrun_graph_destroy(g);
}

/* The stages of the chain as graphs: the crossing tensor is the second's input and the first's
 * output, under its own name; a graph output written early leaves from its own stage. */
static void stage_graphs_take_and_give_the_crossing_tensors(void **state)
{
    (void)state;
    clrun_graph *g = chain(true);
    clrun_graph *a = NULL, *b = NULL;
    char err[512];
    assert_int_equal(clrun__split_stage_graph(g, NULL, 0, 3, "s0", &a, err, sizeof err), CLRUN_OK);
    assert_int_equal(clrun__split_stage_graph(g, NULL, 3, 7, "s1", &b, err, sizeof err), CLRUN_OK);
    const clrun_tensor_id *ids;
    assert_int_equal(clrun_graph_node_count(a), 3);
    assert_int_equal(clrun_graph_inputs(a, &ids), 1);
    assert_string_equal(clrun_graph_tensor_ident(a, ids[0]), "x");
    assert_int_equal(clrun_graph_outputs(a, &ids), 2);
    assert_string_equal(clrun_graph_tensor_ident(a, ids[0]), "r1");
    assert_string_equal(clrun_graph_tensor_ident(a, ids[1]), "mm2");
    assert_int_equal(clrun_graph_node_count(b), 4);
    assert_int_equal(clrun_graph_inputs(b, &ids), 1);
    assert_string_equal(clrun_graph_tensor_ident(b, ids[0]), "mm2");
    assert_false(clrun_graph_tensor_donated(b, ids[0]));
    assert_int_equal(clrun_graph_outputs(b, &ids), 1);
    assert_string_equal(clrun_graph_tensor_ident(b, ids[0]), "y");
    /* Constants come with their fill: w3 of the stage is w3 of the graph. */
    assert_true(clrun_graph_find(b, "w3") >= 0);
    assert_true(clrun_graph_find(b, "w1") < 0);
    clrun_graph_destroy(a);
    clrun_graph_destroy(b);
    clrun_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_cut_meets_the_budgets_where_the_weights_fall),
        cmocka_unit_test(the_cut_goes_where_the_fewest_bytes_cross),
        cmocka_unit_test(bad_requests_are_refused_with_reasons),
        cmocka_unit_test(stage_graphs_take_and_give_the_crossing_tensors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
