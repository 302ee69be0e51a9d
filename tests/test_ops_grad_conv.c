/* The gradients of convolution and pooling (conv2d_grad_weight, maxpool2d_grad, avgpool2d_grad)
 * on a real device, built with the graph API and run by an executor: against the plain C
 * references of op_reference.c over random shapes (strides, asymmetric pads, dilation, groups,
 * depthwise, odd sizes, ceil_mode, count_include_pad both ways); conv2d_grad_weight against the
 * conv2d op itself through the identity sum(dy * conv2d(x, w)) = sum(dw * w); maxpool2d_grad's
 * routing of ties, NaN and windows of -inf as PyTorch's; every output the same bits on a second
 * run; and the type rules' refusals, each naming what is wrong.
 *
 * Tolerance: an output d with reference r (in double) passes when |d - r| <= tol (|r| + s), s
 * being the sum of the absolute values of the terms that made it; tol is 1e-5 for
 * conv2d_grad_weight (long float sums) and 1e-6 for the pools (a few terms each). */
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
#include "op_args.h"
#include "op_reference.h"
#include "ops/ops_internal.h"
#include "rng.h"

static char cache_dir[512];
static clrun_context *ctx;
static clrun_exec_mode exec_mode = CLRUN_EXEC_CONTEXT; /* how graph_run's executors allocate */

static float *random_floats(uint64_t n, double lo, double hi, uint64_t *state)
{
    float *x = malloc(n * sizeof *x + 4);
    for (uint64_t i = 0; i < n; i++)
        x[i] = (float)(lo + (hi - lo) * (double)(rng_next(state) >> 11) / 9007199254740992.0);
    return x;
}

/* Small integers as floats: many ties in every window. */
static float *random_small(uint64_t n, int range, uint64_t *state)
{
    float *x = malloc(n * sizeof *x + 4);
    for (uint64_t i = 0; i < n; i++)
        x[i] = (float)(int)(rng_next(state) % (uint64_t)range);
    return x;
}

static clrun_tensor_type nchw(int64_t n, int64_t c, int64_t h, int64_t w)
{
    clrun_tensor_type t = {CLRUN_F32, 4, {n, c, h, w}};
    return t;
}

/* ---- graphs ------------------------------------------------------------------------------ */

/* A graph being built, with the host data of its inputs in declaration order. */
typedef struct test_graph {
    clrun_graph *g;
    int inputs;
    const float *data[4];
    clrun_tensor_type types[4];
} test_graph;

static void graph_begin(test_graph *t)
{
    memset(t, 0, sizeof *t);
    assert_int_equal(clrun_graph_create("grad", &t->g), CLRUN_OK);
}

static clrun_tensor_id graph_input(test_graph *t, const char *name, clrun_tensor_type type,
                                   const float *data)
{
    clrun_tensor_id id;
    assert_int_equal(clrun_graph_add_input(t->g, name, &type, false, &id), CLRUN_OK);
    t->data[t->inputs] = data;
    t->types[t->inputs++] = type;
    return id;
}

/* Adds node `op` with one output called `name`, marked as a graph output; fails the test on a
 * refusal. */
static clrun_tensor_id graph_node(test_graph *t, const char *op, const char *name,
                                  const clrun_tensor_id *in, int n, const clrun_attr *attrs, int na)
{
    clrun_tensor_id out;
    const char *names[] = {name};
    if (clrun_graph_add_node(t->g, op, in, n, names, 1, attrs, na, &out) != CLRUN_OK)
        fail_msg("%s refused: %s", op, clrun_graph_last_error(t->g));
    assert_int_equal(clrun_graph_mark_output(t->g, out), CLRUN_OK);
    return out;
}

/* The output type of `op` over inputs of these types, from a graph of its own; false (and the
 * reason in why) when the op refuses them. */
static bool infer_type(const char *op, const clrun_tensor_type *types, int n, const clrun_attr *attrs,
                       int na, clrun_tensor_type *out, char *why, size_t size)
{
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("infer", &g), CLRUN_OK);
    clrun_tensor_id in[4], y;
    for (int i = 0; i < n; i++) {
        char name[8];
        snprintf(name, sizeof name, "in%d", i);
        assert_int_equal(clrun_graph_add_input(g, name, &types[i], false, &in[i]), CLRUN_OK);
    }
    const char *names[] = {"y"};
    bool ok = clrun_graph_add_node(g, op, in, n, names, 1, attrs, na, &y) == CLRUN_OK;
    if (ok)
        *out = *clrun_graph_tensor_type(g, y);
    else if (why)
        snprintf(why, size, "%s", clrun_graph_last_error(g));
    clrun_graph_destroy(g);
    return ok;
}

/* Runs the graph twice on its inputs in an executor of exec_mode; out[i] gets output i
 * (malloc'd), and the second run must give the same bits as the first. Destroys the graph. */
static void graph_run(test_graph *t, float **out)
{
    clrun_exec *exec = NULL;
    clrun_exec_options options;
    clrun_exec_options_init(&options);
    options.mode = exec_mode;
    if (clrun_exec_create(ctx, t->g, &options, &exec) != CLRUN_OK)
        fail_msg("executor: %s", clrun_last_error(ctx));
    clrun_buffer in[4];
    for (int i = 0; i < t->inputs; i++) {
        uint64_t bytes = ref_elements(&t->types[i]) * 4;
        assert_int_equal(clrun_alloc(ctx, bytes, &in[i]), CLRUN_OK);
        assert_int_equal(clrun_buffer_write(ctx, &in[i], t->data[i]), CLRUN_OK);
    }
    const clrun_tensor_id *outputs;
    int count = clrun_graph_outputs(t->g, &outputs);
    for (int run = 0; run < 2; run++) {
        if (clrun_exec_run(exec, in, t->inputs) != CLRUN_OK)
            fail_msg("run: %s", clrun_last_error(ctx));
        for (int i = 0; i < count; i++) {
            uint64_t bytes = ref_elements(clrun_graph_tensor_type(t->g, outputs[i])) * 4;
            float *host = malloc(bytes);
            assert_int_equal(clrun_exec_read_output(exec, i, host, bytes), CLRUN_OK);
            if (run == 0) {
                out[i] = host;
                continue;
            }
            if (memcmp(host, out[i], bytes) != 0)
                fail_msg("output %d: the second run gives other bits", i);
            free(host);
        }
    }
    for (int i = 0; i < t->inputs; i++)
        clrun_free(ctx, &in[i]);
    clrun_exec_destroy(exec);
    clrun_graph_destroy(t->g);
}

static void expect_close(const char *what, const float *got, const double *ref, const double *scale,
                         uint64_t n, double tol)
{
    for (uint64_t i = 0; i < n; i++) {
        double bound = tol * (fabs(ref[i]) + scale[i]);
        if (!(fabs((double)got[i] - ref[i]) <= bound) && !(isnan(ref[i]) && isnan(got[i])))
            fail_msg("%s: element %llu is %.9g, reference %.9g (allowed %.3g)", what,
                     (unsigned long long)i, got[i], ref[i], bound);
    }
}

/* ---- conv2d_grad_weight ------------------------------------------------------------------ */

typedef struct conv_case {
    int N, C, H, W, O, KH, KW;
    int stride[2], pads[4], dilation[2], groups; /* pads: top, left, bottom, right */
} conv_case;

static void conv_case_name(const conv_case *c, char *buf, size_t size)
{
    snprintf(buf, size, "x [%d, %d, %d, %d], O %d, kernel %dx%d, stride %d,%d, pads %d,%d,%d,%d, "
             "dilation %d,%d, groups %d", c->N, c->C, c->H, c->W, c->O, c->KH, c->KW, c->stride[0],
             c->stride[1], c->pads[0], c->pads[1], c->pads[2], c->pads[3], c->dilation[0],
             c->dilation[1], c->groups);
}

/* conv2d's attributes of the case; with_kernel adds "kernel" (conv2d_grad_weight's). */
static int conv_attrs(const conv_case *c, bool with_kernel, clrun_attr *a)
{
    const int64_t stride[2] = {c->stride[0], c->stride[1]}, dilation[2] = {c->dilation[0], c->dilation[1]};
    const int64_t pads[4] = {c->pads[0], c->pads[1], c->pads[2], c->pads[3]}, kernel[2] = {c->KH, c->KW};
    int n = 0;
    a[n++] = attr_ints("stride", 2, stride);
    a[n++] = attr_ints("pads", 4, pads);
    a[n++] = attr_ints("dilation", 2, dilation);
    a[n++] = attr_int("groups", c->groups);
    if (with_kernel)
        a[n++] = attr_ints("kernel", 2, kernel);
    return n;
}

/* Runs conv2d(x, w) and conv2d_grad_weight(x, dy) in one graph: dw against the reference, and
 * sum(dy * y) against sum(dw * w). False when conv2d refuses the case (it does not fit). */
static bool check_conv_case(const conv_case *c, uint64_t seed)
{
    char name[256];
    conv_case_name(c, name, sizeof name);
    clrun_attr attrs[6];
    int na = conv_attrs(c, false, attrs);
    const clrun_tensor_type tx = nchw(c->N, c->C, c->H, c->W);
    const clrun_tensor_type tw = nchw(c->O, c->C / c->groups, c->KH, c->KW);
    const clrun_tensor_type forward[2] = {tx, tw};
    clrun_tensor_type ty;
    if (!infer_type("conv2d", forward, 2, attrs, na, &ty, NULL, 0))
        return false;
    uint64_t state = seed;
    float *x = random_floats(ref_elements(&tx), -1, 1, &state);
    float *w = random_floats(ref_elements(&tw), -1, 1, &state);
    float *dy = random_floats(ref_elements(&ty), -1, 1, &state);
    test_graph t;
    graph_begin(&t);
    clrun_tensor_id in[3] = {graph_input(&t, "x", tx, x), graph_input(&t, "w", tw, w),
                             graph_input(&t, "dy", ty, dy)};
    graph_node(&t, "conv2d", "y", in, 2, attrs, na);
    na = conv_attrs(c, true, attrs);
    const clrun_tensor_id grad_in[2] = {in[0], in[2]};
    graph_node(&t, "conv2d_grad_weight", "dw", grad_in, 2, attrs, na);
    float *out[2];
    graph_run(&t, out);

    uint64_t nw = ref_elements(&tw), ny = ref_elements(&ty);
    double *ref = malloc(nw * sizeof *ref), *scale = malloc(nw * sizeof *scale);
    const ref_conv rc = {{c->stride[0], c->stride[1]}, {c->pads[0], c->pads[1]},
                         {c->dilation[0], c->dilation[1]}, c->groups};
    ref_conv2d_grad_weight(&tx, x, &ty, dy, &rc, &tw, ref, scale);
    char what[320];
    snprintf(what, sizeof what, "conv2d_grad_weight, %s, seed %llu", name, (unsigned long long)seed);
    expect_close(what, out[1], ref, scale, nw, 1e-5);
    /* conv2d is linear in w: sum(dy * conv2d(x, w)) = sum(dw * w). Both sides are sums of the
     * products dy x w; each of the device's results is within 1e-5 of its scale, so the two
     * differ by at most 2e-5 of the sum of |dy x w|. */
    double lhs = 0, rhs = 0, total = 0;
    for (uint64_t i = 0; i < ny; i++)
        lhs += (double)dy[i] * out[0][i];
    for (uint64_t i = 0; i < nw; i++) {
        rhs += (double)out[1][i] * w[i];
        total += fabs((double)w[i]) * scale[i];
    }
    if (!(fabs(lhs - rhs) <= 2e-5 * total + 1e-30))
        fail_msg("%s: sum(dy * conv2d(x, w)) is %.9g, sum(dw * w) %.9g (allowed %.3g)", what, lhs,
                 rhs, 2e-5 * total);
    free(out[0]);
    free(out[1]);
    free(ref);
    free(scale);
    free(x);
    free(w);
    free(dy);
    return true;
}

/* The fixed and random cases of conv2d_grad_weight, on the kernels `choice` forces. */
static void conv2d_grad_weight_cases(clrun__kernel_choice choice)
{
    clrun__ops_kernels = choice;
    /* N, C, H, W, O, KH, KW, stride, pads (top, left, bottom, right), dilation, groups */
    static const conv_case cases[] = {
        {2, 4, 9, 21, 6, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},   /* rows of 8 and a rest */
        {1, 3, 17, 35, 4, 3, 3, {2, 2}, {0, 1, 1, 0}, {1, 1}, 1},  /* stride 2, asymmetric pads */
        {2, 4, 11, 30, 4, 3, 2, {1, 1}, {2, 1, 0, 2}, {2, 2}, 2},  /* dilation 2, groups 2 */
        {2, 8, 13, 27, 8, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 8},  /* depthwise */
        {1, 6, 15, 33, 6, 5, 5, {2, 2}, {2, 2, 2, 2}, {1, 1}, 6},  /* depthwise 5x5, stride 2 */
        {1, 2, 10, 44, 3, 2, 3, {3, 3}, {0, 2, 1, 0}, {1, 2}, 1},  /* stride 3 */
        {3, 5, 7, 7, 2, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},    /* 1x1 */
        {1, 4, 3, 5, 4, 4, 4, {1, 2}, {2, 1, 2, 1}, {1, 1}, 2},    /* kernel beyond the image */
        {2, 1, 1, 1, 1, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},    /* one pixel, all padding */
        /* wide enough for the core's panels (8 output channels per group and more) */
        {2, 16, 9, 13, 24, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1}, /* a panel and a part */
        {3, 8, 12, 11, 16, 3, 3, {2, 2}, {1, 1, 0, 0}, {1, 1}, 2}, /* groups of 8, stride 2 */
        {2, 5, 7, 9, 40, 1, 1, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1},   /* 1x1 stride 2 projection */
        {2, 3, 20, 19, 16, 7, 7, {2, 2}, {3, 3, 3, 3}, {1, 1}, 1}, /* a 7x7/2 stem */
        {1, 9, 10, 10, 33, 3, 2, {1, 2}, {2, 0, 1, 1}, {2, 1}, 1}, /* dilation, odd taps */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (!check_conv_case(&cases[i], 100 + i)) {
            char name[256];
            conv_case_name(&cases[i], name, sizeof name);
            fail_msg("conv2d refuses the fixed case %s", name);
        }
    uint64_t rng = 77;
    int rounds = clrun_test_rounds(40), done = 0;
    for (int r = 0; done < rounds && r < 50 * rounds; r++) {
        conv_case c;
        int kind = (int)rng_range(&rng, 0, 3); /* groups 1, 2, depthwise, or wide */
        c.groups = kind == 0 || kind == 3 ? 1 : kind == 1 ? 2 : (int)rng_range(&rng, 1, 6);
        c.C = c.groups * (kind == 2 ? 1 : (int)rng_range(&rng, 1, 3));
        c.O = kind == 2 ? c.C : c.groups * (int)rng_range(&rng, 1, kind == 3 ? 40 : 3);
        c.N = (int)rng_range(&rng, 1, 3);
        c.KH = (int)rng_range(&rng, 1, 4), c.KW = (int)rng_range(&rng, 1, 4);
        for (int a = 0; a < 2; a++) {
            c.stride[a] = (int)rng_range(&rng, 1, 3);
            c.dilation[a] = (int)rng_range(&rng, 1, 2);
        }
        for (int a = 0; a < 4; a++)
            c.pads[a] = (int)rng_range(&rng, 0, 2);
        c.H = (int)rng_range(&rng, 1, 16), c.W = (int)rng_range(&rng, 1, 40);
        done += check_conv_case(&c, 1000 + (uint64_t)r);
    }
    clrun__ops_kernels = CLRUN__KERNELS_AUTO;
    assert_int_equal(done, rounds);
}

/* The register-blocked core (CPUs; forced here on any device) and the per-weight kernel (other
 * devices, and groups narrower than the core's panels). */
static void conv2d_grad_weight_on_the_core_matches_the_reference_and_conv2d(void **state)
{
    (void)state;
    conv2d_grad_weight_cases(CLRUN__KERNELS_VECTOR);
}

static void conv2d_grad_weight_per_weight_matches_the_reference_and_conv2d(void **state)
{
    (void)state;
    conv2d_grad_weight_cases(CLRUN__KERNELS_SIMPLE);
}

/* ---- the pools --------------------------------------------------------------------------- */

typedef struct pool_case {
    int N, C, H, W, KH, KW;
    int stride[2], pads[4], dilation[2]; /* pads: top, left, bottom, right */
    bool ceil_mode, include_pad;
} pool_case;

static void pool_case_name(const pool_case *c, char *buf, size_t size)
{
    snprintf(buf, size, "x [%d, %d, %d, %d], kernel %dx%d, stride %d,%d, pads %d,%d,%d,%d, "
             "dilation %d,%d, ceil_mode %d, count_include_pad %d", c->N, c->C, c->H, c->W, c->KH,
             c->KW, c->stride[0], c->stride[1], c->pads[0], c->pads[1], c->pads[2], c->pads[3],
             c->dilation[0], c->dilation[1], c->ceil_mode, c->include_pad);
}

/* The forward pool's attributes of the case (max: dilation; avg: count_include_pad); grad adds
 * avgpool2d_grad's "size". */
static int pool_attrs(const pool_case *c, bool max, bool grad, clrun_attr *a)
{
    const int64_t kernel[2] = {c->KH, c->KW}, stride[2] = {c->stride[0], c->stride[1]};
    const int64_t pads[4] = {c->pads[0], c->pads[1], c->pads[2], c->pads[3]};
    const int64_t dilation[2] = {c->dilation[0], c->dilation[1]}, size[2] = {c->H, c->W};
    int n = 0;
    a[n++] = attr_ints("kernel", 2, kernel);
    a[n++] = attr_ints("stride", 2, stride);
    a[n++] = attr_ints("pads", 4, pads);
    a[n++] = attr_int("ceil_mode", c->ceil_mode);
    if (max)
        a[n++] = attr_ints("dilation", 2, dilation);
    else
        a[n++] = attr_int("count_include_pad", c->include_pad);
    if (grad && !max)
        a[n++] = attr_ints("size", 2, size);
    return n;
}

/* Runs maxpool2d_grad or avgpool2d_grad of the case on x (max only) and dy and checks dx against
 * the reference; dx_out (may be NULL) receives dx. False when the forward pool refuses the case. */
static bool check_pool_case(const pool_case *c, bool max, const float *x_given, uint64_t seed,
                            float **dx_out)
{
    char name[256];
    pool_case_name(c, name, sizeof name);
    clrun_attr attrs[8];
    int na = pool_attrs(c, max, false, attrs);
    const clrun_tensor_type tx = nchw(c->N, c->C, c->H, c->W);
    clrun_tensor_type ty;
    if (!infer_type(max ? "maxpool2d" : "avgpool2d", &tx, 1, attrs, na, &ty, NULL, 0))
        return false;
    uint64_t state = seed, nx = ref_elements(&tx);
    float *x = x_given ? NULL : max && seed % 2 ? random_small(nx, 4, &state) : random_floats(nx, -1, 1, &state);
    const float *xs = x_given ? x_given : x;
    float *dy = random_floats(ref_elements(&ty), -1, 1, &state);
    test_graph t;
    graph_begin(&t);
    clrun_tensor_id in[2];
    int n = 0;
    if (max)
        in[n++] = graph_input(&t, "x", tx, xs);
    in[n++] = graph_input(&t, "dy", ty, dy);
    na = pool_attrs(c, max, true, attrs);
    const char *op = max ? "maxpool2d_grad" : "avgpool2d_grad";
    graph_node(&t, op, "dx", in, n, attrs, na);
    float *out[1];
    graph_run(&t, out);
    double *ref = malloc(nx * sizeof *ref), *scale = malloc(nx * sizeof *scale);
    const ref_pool_window p = {{c->KH, c->KW}, {c->stride[0], c->stride[1]}, {c->pads[0], c->pads[1]},
                               {c->pads[2], c->pads[3]}, {c->dilation[0], c->dilation[1]},
                               c->include_pad};
    ref_pool_grad(max, &tx, xs, &ty, dy, &p, ref, scale);
    char what[320];
    snprintf(what, sizeof what, "%s, %s, seed %llu", op, name, (unsigned long long)seed);
    expect_close(what, out[0], ref, scale, nx, 1e-6);
    if (dx_out)
        *dx_out = out[0];
    else
        free(out[0]);
    free(ref);
    free(scale);
    free(x);
    free(dy);
    return true;
}

/* N, C, H, W, KH, KW, stride, pads (top, left, bottom, right), dilation, ceil_mode,
 * count_include_pad: what both pools run (avgpool2d takes no dilation: those rows are max's). */
static const pool_case pool_cases[] = {
    {2, 3, 8, 8, 2, 2, {2, 2}, {0, 0, 0, 0}, {1, 1}, false, false},
    {1, 2, 7, 9, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}, false, true},   /* overlapping, padded */
    {1, 2, 7, 9, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}, true, true},    /* ceil_mode */
    {2, 2, 6, 11, 3, 2, {2, 3}, {1, 0, 0, 1}, {1, 1}, true, false},  /* asymmetric, ceil_mode */
    {1, 3, 5, 5, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, false, true},   /* stride 1: 9 windows each */
    {1, 1, 10, 13, 4, 3, {3, 2}, {2, 1, 1, 0}, {1, 1}, true, true},  /* window past the pad */
    {1, 2, 9, 9, 2, 2, {3, 3}, {0, 0, 0, 0}, {1, 1}, false, false},  /* gaps no window covers */
};

static void maxpool2d_grad_matches_the_reference(void **state)
{
    (void)state;
    static const pool_case dilated[] = {
        {1, 2, 11, 12, 3, 2, {1, 2}, {2, 1, 1, 0}, {2, 2}, false, false},
        {2, 1, 9, 10, 2, 3, {2, 1}, {1, 2, 1, 2}, {2, 2}, true, false},
    };
    /* the routing is the node's scratch: in every kind of executor memory */
    static const clrun_exec_mode modes[] = {CLRUN_EXEC_POOLED, CLRUN_EXEC_NAIVE, CLRUN_EXEC_PLANNED};
    for (size_t i = 0; i < sizeof pool_cases / sizeof pool_cases[0]; i++)
        for (uint64_t s = 0; s < 2; s++) { /* odd seeds: small integers, many ties */
            exec_mode = modes[(2 * i + s) % 3];
            assert_true(check_pool_case(&pool_cases[i], true, NULL, 200 + 2 * i + s, NULL));
        }
    exec_mode = CLRUN_EXEC_CONTEXT;
    for (size_t i = 0; i < sizeof dilated / sizeof dilated[0]; i++)
        assert_true(check_pool_case(&dilated[i], true, NULL, 300 + i, NULL));
    uint64_t rng = 78;
    int rounds = clrun_test_rounds(40), done = 0;
    for (int r = 0; done < rounds && r < 50 * rounds; r++) {
        pool_case c = {.N = (int)rng_range(&rng, 1, 2), .C = (int)rng_range(&rng, 1, 3)};
        c.KH = (int)rng_range(&rng, 1, 4), c.KW = (int)rng_range(&rng, 1, 4);
        for (int a = 0; a < 2; a++) {
            int k = a ? c.KW : c.KH;
            c.stride[a] = (int)rng_range(&rng, 1, 3);
            c.dilation[a] = (int)rng_range(&rng, 1, 2);
            int half = (c.dilation[a] * (k - 1) + 1) / 2;
            c.pads[a] = (int)rng_range(&rng, 0, (uint64_t)half);
            c.pads[a + 2] = (int)rng_range(&rng, 0, (uint64_t)half);
        }
        c.ceil_mode = rng_next(&rng) % 2;
        c.H = (int)rng_range(&rng, 1, 14), c.W = (int)rng_range(&rng, 1, 14);
        done += check_pool_case(&c, true, NULL, 2000 + (uint64_t)r, NULL);
    }
    assert_int_equal(done, rounds);
}

static void avgpool2d_grad_matches_the_reference(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof pool_cases / sizeof pool_cases[0]; i++)
        for (int include = 0; include < 2; include++) {
            pool_case c = pool_cases[i];
            c.include_pad = include;
            assert_true(check_pool_case(&c, false, NULL, 400 + 2 * i + (uint64_t)include, NULL));
        }
    uint64_t rng = 79;
    int rounds = clrun_test_rounds(40), done = 0;
    for (int r = 0; done < rounds && r < 50 * rounds; r++) {
        pool_case c = {.N = (int)rng_range(&rng, 1, 2), .C = (int)rng_range(&rng, 1, 3),
                       .dilation = {1, 1}};
        c.KH = (int)rng_range(&rng, 1, 4), c.KW = (int)rng_range(&rng, 1, 4);
        for (int a = 0; a < 2; a++) {
            c.stride[a] = (int)rng_range(&rng, 1, 3);
            int half = (a ? c.KW : c.KH) / 2;
            c.pads[a] = (int)rng_range(&rng, 0, (uint64_t)half);
            c.pads[a + 2] = (int)rng_range(&rng, 0, (uint64_t)half);
        }
        c.ceil_mode = rng_next(&rng) % 2;
        c.include_pad = rng_next(&rng) % 2;
        c.H = (int)rng_range(&rng, 1, 14), c.W = (int)rng_range(&rng, 1, 14);
        done += check_pool_case(&c, false, NULL, 3000 + (uint64_t)r, NULL);
    }
    assert_int_equal(done, rounds);
}

/* Each window of a 2x2 pool with stride 2 over one 4x4 plane routes its dy to one tap: the first
 * of equal maxima, the last NaN (PyTorch's `val > max || isnan(val)` replaces a NaN by a later
 * NaN only), a NaN before a larger value, and the first tap of a window of -inf. dy is
 * 1, 2, 3, 4 by window, so dx shows which tap took it. */
static void maxpool2d_grad_routes_ties_nan_and_infinity_as_pytorch(void **state)
{
    (void)state;
    const float inf = INFINITY, nan = NAN;
    const float x[16] = {
        5, 5, nan, 1,       /* window 0: tie -> (0, 0); window 1: NaN, 1, NaN, 2 -> (1, 2) */
        5, 5, nan, 2,
        -inf, -inf, nan, 7, /* window 2: all -inf -> (2, 0); window 3: NaN, 7, 3, 9 -> (2, 2) */
        -inf, -inf, 3, 9,
    };
    const float want[16] = {1, 0, 0, 0, 0, 0, 2, 0, 3, 0, 4, 0, 0, 0, 0, 0};
    const pool_case c = {1, 1, 4, 4, 2, 2, {2, 2}, {0, 0, 0, 0}, {1, 1}, false, false};
    /* check_pool_case draws dy at random: give it this x and check against want by hand too */
    float *dx = NULL;
    assert_true(check_pool_case(&c, true, x, 5, &dx));
    uint64_t s = 5;
    float *dy = random_floats(4, -1, 1, &s); /* the dy check_pool_case drew */
    for (int i = 0; i < 16; i++) {
        float expect = want[i] == 0 ? 0.0f : dy[(int)want[i] - 1];
        if (dx[i] != expect)
            fail_msg("dx[%d] is %.9g, expected %.9g", i, dx[i], expect);
    }
    free(dy);
    free(dx);
    /* NaN and -inf scattered over overlapping windows, against the reference */
    const pool_case overlap = {2, 2, 9, 10, 3, 3, {1, 2}, {1, 1, 0, 1}, {1, 1}, true, false};
    uint64_t state_x = 6;
    float *xs = random_small(2 * 2 * 9 * 10, 3, &state_x);
    for (int i = 0; i < 2 * 2 * 9 * 10; i += 7)
        xs[i] = i % 3 ? nan : -inf;
    assert_true(check_pool_case(&overlap, true, xs, 7, NULL));
    free(xs);
}

/* ---- refusals ---------------------------------------------------------------------------- */

/* The op over inputs of these types must be refused, with every one of the words in its reason. */
static void expect_refusal(const char *op, const clrun_tensor_type *types, int n, const clrun_attr *attrs,
                           int na, const char *word1, const char *word2)
{
    clrun_tensor_type out;
    char why[512] = "";
    if (infer_type(op, types, n, attrs, na, &out, why, sizeof why))
        fail_msg("%s accepted what it should refuse (expected '%s')", op, word1);
    if (!strstr(why, op) || !strstr(why, word1) || (word2 && !strstr(why, word2)))
        fail_msg("%s: the reason '%s' lacks '%s'%s%s", op, why, word1, word2 ? " or " : "",
                 word2 ? word2 : "");
}

static void type_rules_refuse_what_does_not_match_the_forward_op(void **state)
{
    (void)state;
    const int64_t k3[2] = {3, 3}, k2[2] = {2, 2}, pad1[2] = {1, 1}, size[2] = {8, 8}, s2[2] = {2, 2};
    const clrun_attr kernel = attr_ints("kernel", 2, k3), pad = attr_ints("pad", 2, pad1);
    const clrun_attr groups2 = attr_int("groups", 2);
    clrun_tensor_type in[2] = {nchw(2, 4, 8, 8), nchw(2, 6, 8, 8)};
    clrun_attr a[4] = {kernel, pad, groups2};
    clrun_tensor_type out;
    /* accepted: conv2d's output [2, 6, 8, 8] for a 3x3 kernel with pad 1, groups 2 -> [6, 2, 3, 3] */
    assert_true(infer_type("conv2d_grad_weight", in, 2, a, 3, &out, NULL, 0));
    assert_int_equal(out.rank, 4);
    assert_true(out.shape[0] == 6 && out.shape[1] == 2 && out.shape[2] == 3 && out.shape[3] == 3);
    /* dy of the wrong extent: conv2d's output is 8x8, not 7x8 */
    in[1] = nchw(2, 6, 7, 8);
    expect_refusal("conv2d_grad_weight", in, 2, a, 3, "dy is f32[2, 6, 7, 8]", "[2, 6, 8, 8]");
    /* O (5) or C (3) not divisible by groups 2 */
    in[1] = nchw(2, 5, 8, 8);
    expect_refusal("conv2d_grad_weight", in, 2, a, 3, "5 channels (O)", "groups 2");
    in[0] = nchw(2, 3, 8, 8), in[1] = nchw(2, 6, 8, 8);
    expect_refusal("conv2d_grad_weight", in, 2, a, 3, "3 channels", "groups 2");
    /* another batch; no kernel; conv_transpose2d's attribute */
    in[0] = nchw(1, 4, 8, 8);
    expect_refusal("conv2d_grad_weight", in, 2, a, 3, "dy is f32[2, 6, 8, 8]", NULL);
    in[0] = nchw(2, 4, 8, 8);
    expect_refusal("conv2d_grad_weight", in, 2, a + 1, 2, "kernel", NULL);
    a[3] = attr_ints("output_padding", 2, pad1);
    expect_refusal("conv2d_grad_weight", in, 2, a, 4, "output_padding", NULL);

    /* maxpool2d_grad: 2x2, stride 2 over 8x8 gives 4x4 (5x5 with ceil_mode only when it is odd) */
    clrun_attr p[4] = {attr_ints("kernel", 2, k2), attr_ints("stride", 2, s2)};
    in[0] = nchw(1, 3, 8, 8), in[1] = nchw(1, 3, 4, 4);
    assert_true(infer_type("maxpool2d_grad", in, 2, p, 2, &out, NULL, 0));
    assert_true(out.shape[1] == 3 && out.shape[2] == 8 && out.shape[3] == 8);
    in[1] = nchw(1, 3, 4, 5);
    expect_refusal("maxpool2d_grad", in, 2, p, 2, "dy is f32[1, 3, 4, 5]", "[1, 3, 4, 4]");
    in[1] = nchw(1, 2, 4, 4);
    expect_refusal("maxpool2d_grad", in, 2, p, 2, "dy is f32[1, 2, 4, 4]", NULL);
    in[1] = nchw(1, 3, 4, 4);
    p[2] = attr_int("count_include_pad", 1);
    expect_refusal("maxpool2d_grad", in, 2, p, 3, "count_include_pad", NULL);

    /* avgpool2d_grad: the image's size is required; ceil_mode's extent from 7x7 is 4x4, not 3x3 */
    clrun_attr q[4] = {attr_ints("kernel", 2, k2), attr_ints("stride", 2, s2), attr_ints("size", 2, size)};
    in[0] = nchw(1, 3, 4, 4);
    assert_true(infer_type("avgpool2d_grad", in, 1, q, 3, &out, NULL, 0));
    assert_true(out.shape[0] == 1 && out.shape[1] == 3 && out.shape[2] == 8 && out.shape[3] == 8);
    expect_refusal("avgpool2d_grad", in, 1, q, 2, "size", NULL);
    const int64_t seven[2] = {7, 7};
    q[2] = attr_ints("size", 2, seven);
    q[3] = attr_int("ceil_mode", 1);
    in[0] = nchw(1, 3, 3, 3);
    expect_refusal("avgpool2d_grad", in, 1, q, 4, "dy is f32[1, 3, 3, 3]", "[1, 3, 4, 4]");
    q[3] = attr_ints("dilation", 2, s2);
    expect_refusal("avgpool2d_grad", in, 1, q, 4, "dilation", NULL);
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
        cmocka_unit_test(conv2d_grad_weight_on_the_core_matches_the_reference_and_conv2d),
        cmocka_unit_test(conv2d_grad_weight_per_weight_matches_the_reference_and_conv2d),
        cmocka_unit_test(maxpool2d_grad_matches_the_reference),
        cmocka_unit_test(avgpool2d_grad_matches_the_reference),
        cmocka_unit_test(maxpool2d_grad_routes_ties_nan_and_infinity_as_pytorch),
        cmocka_unit_test(type_rules_refuse_what_does_not_match_the_forward_op),
    };
    CLRUN_TEST_FILTERS_FROM_ENVIRONMENT();
    int failed = cmocka_run_group_tests(tests, setup, teardown);
    clrun_test_remove_dir(cache_dir);
    return failed;
}
