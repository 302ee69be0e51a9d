/* ONNX ConvTranspose on a real device: models built in C (tests/onnx_builder.h), run fused and
 * unfused, against the plain C reference of op_reference.c (double loops) over 1-D and 2-D
 * shapes of odd sizes, strides 1 to 3, asymmetric pads, output padding, output_shape, auto_pad,
 * dilation, bias, batches of two, groups. They lower to a matmul (one per group) and col2im
 * (lib/graph/conv_lower.c), which each case checks in the graph; an output padding of the
 * stride or more keeps conv_transpose2d.
 *
 * Tolerance: an output d with reference r (in double) passes when |d - r| <= 1e-5 (|r| + s) +
 * 1e-6, s being the sum of the absolute values of the terms that made it. */
#include <math.h>
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
#include "onnx_builder.h"
#include "op_reference.h"
#include "rng.h"

enum { F32 = 1 };

static char cache_dir[512];
static clrun_context *ctx;

typedef struct ct_case {
    const char *what;
    int spatial;                 /* 1 or 2 */
    int64_t N, C, O, in[2], k[2];
    int64_t stride[2], pads[4];  /* ONNX's pads: begins, then ends */
    int64_t dilation[2], out_pad[2], group;
    int64_t out_shape[2];        /* output_shape when out_shape[0] > 0 */
    const char *auto_pad;        /* NULL: NOTSET */
    bool bias;
    bool lowered;                /* matmul + col2im expected, else conv_transpose2d */
    int64_t out[2];              /* the output extent ONNX gives */
} ct_case;

static const ct_case cases[] = {
    {"3x3/2, asymmetric pads, output padding, bias", 2, 2, 3, 5, {5, 7}, {3, 3}, {2, 2},
     {1, 0, 0, 2}, {1, 1}, {1, 1}, 1, {0, 0}, NULL, true, true, {11, 14}},
    {"2x3, strides 3 and 2, dilation 2, output padding 2 and 1", 2, 1, 4, 3, {4, 5}, {2, 3},
     {3, 2}, {0, 1, 1, 0}, {2, 2}, {2, 1}, 1, {0, 0}, NULL, false, true, {13, 13}},
    {"2x2/2, DBNet's head", 2, 2, 8, 4, {6, 6}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, {0, 0},
     1, {0, 0}, NULL, true, true, {12, 12}},
    {"5x5/1, pads 2", 2, 1, 3, 2, {7, 5}, {5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}, {0, 0}, 1,
     {0, 0}, NULL, true, true, {7, 5}},
    {"1-D, kernel 5, stride 3, output padding 1, bias", 1, 2, 3, 4, {11, 0}, {5, 0}, {3, 0},
     {2, 1, 0, 0}, {1, 0}, {1, 0}, 1, {0, 0}, NULL, true, true, {33, 0}},
    {"output_shape past the full output", 2, 1, 2, 3, {4, 5}, {3, 3}, {3, 2}, {0, 0, 0, 0},
     {1, 1}, {0, 0}, 1, {13, 12}, NULL, true, true, {13, 12}},
    {"SAME_UPPER, stride 2", 2, 1, 3, 2, {5, 4}, {3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, {0, 0},
     1, {0, 0}, "SAME_UPPER", false, true, {10, 8}},
    {"two groups", 2, 2, 4, 6, {5, 3}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, {1, 0}, 2, {0, 0},
     NULL, true, true, {10, 5}},
    {"depthwise 3x3/3, 1-D", 1, 1, 5, 5, {9, 0}, {3, 0}, {3, 0}, {1, 0, 0, 0}, {1, 0}, {2, 0}, 5,
     {0, 0}, NULL, true, true, {28, 0}},
    {"two groups, output padding past the stride: conv_transpose2d", 2, 1, 4, 2, {3, 4}, {3, 3},
     {1, 1}, {0, 0, 0, 0}, {2, 2}, {1, 1}, 2, {0, 0}, NULL, true, false, {8, 9}},
    {"output padding past the stride: conv_transpose2d", 2, 1, 3, 2, {4, 4}, {3, 3}, {1, 1},
     {0, 0, 0, 0}, {2, 2}, {1, 0}, 1, {0, 0}, NULL, false, false, {9, 8}},
};
#define CASES (sizeof cases / sizeof cases[0])

static float *random_floats(int64_t n, uint64_t *state)
{
    float *x = malloc((size_t)n * sizeof *x + 4);
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)(-1.0 + 2.0 * (double)(rng_next(state) >> 11) / 9007199254740992.0);
    return x;
}

/* The case's model: input x, initializers W (and B), one ConvTranspose node into y. */
static clrun_graph *load_case(const ct_case *c, const float *w, const float *bias)
{
    int sp = c->spatial, rank = sp + 2;
    int64_t dx[4] = {c->N, c->C, c->in[0], c->in[1]}, dw[4] = {c->C, c->O / c->group, c->k[0], c->k[1]};
    int64_t dy[4] = {c->N, c->O, c->out[0], c->out[1]}, db[1] = {c->O};
    const int64_t *pads = c->pads; /* 1-D: [begin, end] */
    onnx_builder b;
    ob_init(&b, 13);
    ob_input(&b, "x", F32, rank, dx, NULL);
    int64_t wn = dw[0] * dw[1] * dw[2] * (sp == 2 ? dw[3] : 1);
    ob_initializer(&b, "W", F32, rank, dw, w, (size_t)wn * 4);
    if (c->bias)
        ob_initializer(&b, "B", F32, 1, db, bias, (size_t)c->O * 4);
    Onnx__NodeProto *n = ob_node(&b, "ConvTranspose", "ct", c->bias ? "x,W,B" : "x,W", "y");
    ob_attr_ints(&b, n, "strides", c->stride, sp);
    ob_attr_ints(&b, n, "dilations", c->dilation, sp);
    if (c->out_pad[0] || c->out_pad[1])
        ob_attr_ints(&b, n, "output_padding", c->out_pad, sp);
    if (c->out_shape[0] > 0)
        ob_attr_ints(&b, n, "output_shape", c->out_shape, sp);
    else if (c->auto_pad)
        ob_attr_string(&b, n, "auto_pad", c->auto_pad);
    else
        ob_attr_ints(&b, n, "pads", pads, (size_t)(2 * sp));
    if (c->group != 1)
        ob_attr_int(&b, n, "group", c->group);
    ob_output(&b, "y", F32, rank, dy);
    ob_loaded r = ob_load(&b, NULL);
    ob_free(&b);
    if (r.status != CLRUN_OK)
        fail_msg("%s: loading: %s", c->what, r.err);
    return r.graph;
}

static int count_op(const clrun_graph *g, const char *op)
{
    int k = 0;
    for (int32_t i = 0; i < g->node_count; i++)
        k += strcmp(g->nodes[i].op->name, op) == 0;
    return k;
}

/* Runs g (fusion 1 on, -1 off) on x; the output into y. */
static void run(const clrun_graph *g, int fusion, const float *x, size_t x_bytes, float *y, size_t y_bytes)
{
    clrun_exec_options o;
    clrun_exec_options_init(&o);
    o.fusion = fusion;
    clrun_exec *exec;
    if (clrun_exec_create(ctx, g, &o, &exec) != CLRUN_OK)
        fail_msg("exec_create: %s", clrun_last_error(ctx));
    clrun_buffer in;
    assert_int_equal(clrun_alloc(ctx, x_bytes, &in), CLRUN_OK);
    assert_int_equal(clrun_buffer_write(ctx, &in, x), CLRUN_OK);
    if (clrun_exec_run(exec, &in, 1) != CLRUN_OK)
        fail_msg("run: %s", clrun_last_error(ctx));
    assert_int_equal(clrun_exec_read_output(exec, 0, y, y_bytes), CLRUN_OK);
    clrun_exec_destroy(exec);
    assert_int_equal(clrun_free(ctx, &in), CLRUN_OK);
}

static void check_case(const ct_case *c, uint64_t *state)
{
    int sp = c->spatial;
    /* the reference's 2-D view: 1-D is height 1 */
    int64_t H = sp == 2 ? c->in[0] : 1, W = sp == 2 ? c->in[1] : c->in[0];
    int64_t KH = sp == 2 ? c->k[0] : 1, KW = sp == 2 ? c->k[1] : c->k[0];
    int64_t OH = sp == 2 ? c->out[0] : 1, OW = sp == 2 ? c->out[1] : c->out[0];
    clrun_tensor_type tx = {CLRUN_F32, 4, {c->N, c->C, H, W}};
    clrun_tensor_type tw = {CLRUN_F32, 4, {c->C, c->O / c->group, KH, KW}};
    clrun_tensor_type ty = {CLRUN_F32, 4, {c->N, c->O, OH, OW}};
    int64_t xn = clrun_tensor_elements(&tx), wn = clrun_tensor_elements(&tw), yn = clrun_tensor_elements(&ty);
    float *x = random_floats(xn, state), *w = random_floats(wn, state), *bias = random_floats(c->O, state);
    clrun_graph *g = load_case(c, w, bias);
    const clrun_tensor_id *outs;
    clrun_graph_outputs(g, &outs);
    const clrun_tensor_type *got_type = clrun_graph_tensor_type(g, outs[0]);
    assert_int_equal(got_type->rank, sp + 2);
    for (int i = 0; i < sp; i++)
        if (got_type->shape[2 + i] != c->out[i])
            fail_msg("%s: output axis %d is %lld, ONNX gives %lld", c->what, i,
                     (long long)got_type->shape[2 + i], (long long)c->out[i]);
    int direct = count_op(g, "conv_transpose2d"), col2im = count_op(g, "col2im"), mm = count_op(g, "matmul");
    if (c->lowered ? direct != 0 || col2im != 1 || mm != 1 : direct != 1)
        fail_msg("%s: %d conv_transpose2d, %d col2im, %d matmul nodes, expected it %s", c->what, direct,
                 col2im, mm, c->lowered ? "lowered" : "direct");
    /* the pads the reference takes: ONNX's own, or what output_shape and auto_pad leave (the
     * begins: the total padding's floor half, the larger half first unless SAME_UPPER) */
    ref_conv conv = {{1, 1}, {0, 0}, {1, 1}, (int)c->group};
    for (int i = 0; i < sp; i++) {
        int a = sp == 2 ? i : 1;
        conv.stride[a] = (int)c->stride[i];
        conv.dilation[a] = (int)c->dilation[i];
        int64_t full = c->stride[i] * (c->in[i] - 1) + c->out_pad[i] + c->dilation[i] * (c->k[i] - 1) + 1;
        int64_t total = full - c->out[i];
        if (c->out_shape[0] > 0)
            conv.pad[a] = (int)(total < 0 ? 0 : total - total / 2);
        else if (c->auto_pad)
            conv.pad[a] = (int)(total / 2);
        else
            conv.pad[a] = (int)c->pads[i];
    }
    double *want = malloc((size_t)yn * sizeof *want), *scale = malloc((size_t)yn * sizeof *scale);
    ref_conv_transpose2d(&tx, x, &tw, w, c->bias ? bias : NULL, &conv, &ty, want, scale);
    float *y = malloc((size_t)yn * sizeof *y), *y_unfused = malloc((size_t)yn * sizeof *y);
    run(g, 1, x, (size_t)xn * 4, y, (size_t)yn * 4);
    run(g, -1, x, (size_t)xn * 4, y_unfused, (size_t)yn * 4);
    for (int64_t i = 0; i < yn; i++) {
        double tol = 1e-5 * (fabs(want[i]) + scale[i]) + 1e-6;
        if (fabs(y[i] - want[i]) > tol || fabs(y_unfused[i] - want[i]) > tol)
            fail_msg("%s: element %lld is %g (unfused %g), the reference %g", c->what, (long long)i,
                     (double)y[i], (double)y_unfused[i], want[i]);
    }
    free(x), free(w), free(bias), free(want), free(scale), free(y), free(y_unfused);
    clrun_graph_destroy(g);
}

static void conv_transpose_matches_the_reference(void **state)
{
    (void)state;
    uint64_t rng = 26;
    for (size_t i = 0; i < CASES; i++)
        check_case(&cases[i], &rng);
}

static int setup(void **state)
{
    (void)state;
    if (clrun_context_create(NULL, &ctx) != CLRUN_OK) {
        fprintf(stderr, "no context: %s\n", clrun_last_error(NULL));
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    clrun_context_destroy(ctx);
    return 0;
}

int main(void)
{
    clrun_test_device_environment(cache_dir, sizeof cache_dir);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(conv_transpose_matches_the_reference),
    };
    CLRUN_TEST_FILTERS_FROM_ENVIRONMENT();
    int failed = cmocka_run_group_tests(tests, setup, teardown);
    clrun_test_remove_dir(cache_dir);
    return failed;
}
