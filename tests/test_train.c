/* Training on POCL: the gradient of a small MLP against a plain C backward pass in double, the
 * train step against a C reference of PyTorch's SGD and Adam, the state updated in place (the
 * pool does not grow, every donation is used), the same bits under every allocator and with
 * fusion on or off, state files resumed bit for bit, and bad input refused by name. */
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
#include "tanh_mlp.h"

enum { N = 6, D = 5, H = 7, O = 3 };

/* x [N, D] -> relu(x W1 + b1) W2 + b2 -> pred [N, O]; weights filled from seeds. */
static clrun_graph *mlp(void)
{
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("mlp", &g), CLRUN_OK);
    clrun_tensor_type tx = {CLRUN_F32, 2, {N, D}}, tw1 = {CLRUN_F32, 2, {D, H}};
    clrun_tensor_type tb1 = {CLRUN_F32, 1, {H}}, tw2 = {CLRUN_F32, 2, {H, O}}, tb2 = {CLRUN_F32, 1, {O}};
    clrun_tensor_id x, w1, b1, w2, b2, h, a, y;
    assert_int_equal(clrun_graph_add_input(g, "x", &tx, false, &x), CLRUN_OK);
    assert_int_equal(clrun_graph_add_constant(g, "w1", &tw1, NULL, CLRUN_FILL_NORMAL, 0, 0.5, 1, &w1), CLRUN_OK);
    assert_int_equal(clrun_graph_add_constant(g, "b1", &tb1, NULL, CLRUN_FILL_UNIFORM, -0.1, 0.1, 2, &b1), CLRUN_OK);
    assert_int_equal(clrun_graph_add_constant(g, "w2", &tw2, NULL, CLRUN_FILL_NORMAL, 0, 0.5, 3, &w2), CLRUN_OK);
    assert_int_equal(clrun_graph_add_constant(g, "b2", &tb2, NULL, CLRUN_FILL_UNIFORM, -0.1, 0.1, 4, &b2), CLRUN_OK);
    const char *hn[] = {"h"}, *an[] = {"a"}, *yn[] = {"pred"};
    assert_int_equal(clrun_graph_add_node(g, "matmul", (clrun_tensor_id[]){x, w1, b1}, 3, hn, 1, NULL, 0, &h), CLRUN_OK);
    assert_int_equal(clrun_graph_add_node(g, "relu", &h, 1, an, 1, NULL, 0, &a), CLRUN_OK);
    assert_int_equal(clrun_graph_add_node(g, "matmul", (clrun_tensor_id[]){a, w2, b2}, 3, yn, 1, NULL, 0, &y), CLRUN_OK);
    assert_int_equal(clrun_graph_mark_output(g, y), CLRUN_OK);
    return g;
}

static float *values_of(const clrun_graph *g, const char *name)
{
    clrun_tensor_id id = clrun_graph_find(g, name);
    const clrun_tensor_type *t = clrun_graph_tensor_type(g, id);
    float *v = malloc(clrun_tensor_bytes(t));
    assert_non_null(v);
    /* the constants' fills, as clrun_fill_values gives them */
    static const struct { const char *name; clrun_fill fill; double a, b; uint64_t seed; } fills[] = {
        {"w1", CLRUN_FILL_NORMAL, 0, 0.5, 1}, {"b1", CLRUN_FILL_UNIFORM, -0.1, 0.1, 2},
        {"w2", CLRUN_FILL_NORMAL, 0, 0.5, 3}, {"b2", CLRUN_FILL_UNIFORM, -0.1, 0.1, 4}};
    for (size_t i = 0; i < sizeof fills / sizeof fills[0]; i++)
        if (strcmp(fills[i].name, name) == 0)
            assert_int_equal(clrun_fill_values(t, fills[i].fill, fills[i].a, fills[i].b, fills[i].seed, v,
                                               clrun_tensor_bytes(t)), CLRUN_OK);
    return v;
}

/* The model's forward and backward in double: loss = mean((pred - t)^2). Gradients into gw1.. */
static double reference(const float *x, const float *t, const double *w1, const double *b1,
                        const double *w2, const double *b2, double *gw1, double *gb1, double *gw2,
                        double *gb2)
{
    double h[N][H], a[N][H], dp[N][O], da[N][H];
    double loss = 0;
    for (int n = 0; n < N; n++)
        for (int j = 0; j < H; j++) {
            double s = b1[j];
            for (int k = 0; k < D; k++)
                s += (double)x[n * D + k] * w1[k * H + j];
            h[n][j] = s;
            a[n][j] = s > 0 ? s : 0;
        }
    for (int n = 0; n < N; n++)
        for (int o = 0; o < O; o++) {
            double s = b2[o];
            for (int j = 0; j < H; j++)
                s += a[n][j] * w2[j * O + o];
            double e = s - t[n * O + o];
            loss += e * e;
            dp[n][o] = 2 * e / (N * O);
        }
    loss /= N * O;
    if (gw1 == NULL)
        return loss;
    memset(gw1, 0, sizeof(double) * D * H);
    memset(gb1, 0, sizeof(double) * H);
    memset(gw2, 0, sizeof(double) * H * O);
    memset(gb2, 0, sizeof(double) * O);
    for (int n = 0; n < N; n++)
        for (int o = 0; o < O; o++) {
            gb2[o] += dp[n][o];
            for (int j = 0; j < H; j++)
                gw2[j * O + o] += a[n][j] * dp[n][o];
        }
    for (int n = 0; n < N; n++)
        for (int j = 0; j < H; j++) {
            double s = 0;
            for (int o = 0; o < O; o++)
                s += dp[n][o] * w2[j * O + o];
            da[n][j] = h[n][j] > 0 ? s : 0;
            gb1[j] += da[n][j];
            for (int k = 0; k < D; k++)
                gw1[k * H + j] += (double)x[n * D + k] * da[n][j];
        }
    return loss;
}

static void batch(uint64_t seed, float *x, float *t)
{
    clrun_tensor_type tx = {CLRUN_F32, 2, {N, D}}, tt = {CLRUN_F32, 2, {N, O}};
    assert_int_equal(clrun_fill_values(&tx, CLRUN_FILL_UNIFORM, -1, 1, seed, x, sizeof(float) * N * D), CLRUN_OK);
    assert_int_equal(clrun_fill_values(&tt, CLRUN_FILL_UNIFORM, -1, 1, seed + 7, t, sizeof(float) * N * O), CLRUN_OK);
}

static clrun_context *context(const char *allocator)
{
    clrun_context_options o;
    clrun_context_options_init(&o);
    o.allocator = allocator;
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(&o, &ctx), CLRUN_OK);
    return ctx;
}

static double *widen(const float *v, size_t n)
{
    double *d = malloc(sizeof *d * n);
    assert_non_null(d);
    for (size_t i = 0; i < n; i++)
        d[i] = v[i];
    return d;
}

/* The gradient graph's outputs against the C backward pass. */
static void mlp_gradients_match_reference(void **state)
{
    (void)state;
    clrun_graph *g = mlp();
    /* the loss, added by hand: mean((pred - t)^2) */
    clrun_tensor_type tt = {CLRUN_F32, 2, {N, O}};
    clrun_tensor_id t, e, sq, loss, pred = clrun_graph_find(g, "pred");
    assert_int_equal(clrun_graph_add_input(g, "t", &tt, false, &t), CLRUN_OK);
    const char *en[] = {"e"}, *sn[] = {"sq"}, *ln[] = {"loss"};
    assert_int_equal(clrun_graph_add_node(g, "sub", (clrun_tensor_id[]){pred, t}, 2, en, 1, NULL, 0, &e), CLRUN_OK);
    assert_int_equal(clrun_graph_add_node(g, "mul", (clrun_tensor_id[]){e, e}, 2, sn, 1, NULL, 0, &sq), CLRUN_OK);
    assert_int_equal(clrun_graph_add_node(g, "reduce_mean", &sq, 1, ln, 1, NULL, 0, &loss), CLRUN_OK);
    clrun_graph *gg = NULL;
    char err[512];
    assert_int_equal(clrun_graph_gradient(g, loss, NULL, 0, &gg, NULL, NULL, err, sizeof err), CLRUN_OK);
    const clrun_tensor_id *outs;
    assert_int_equal(clrun_graph_outputs(gg, &outs), 5);
    assert_string_equal(clrun_graph_tensor_name(gg, outs[1]), "grad.w1");
    assert_string_equal(clrun_graph_tensor_name(gg, outs[4]), "grad.b2");

    clrun_context *ctx = context(NULL);
    clrun_exec *exec = NULL;
    assert_int_equal(clrun_exec_create(ctx, gg, NULL, &exec), CLRUN_OK);
    float x[N * D], target[N * O];
    batch(11, x, target);
    clrun_buffer in[2];
    assert_int_equal(clrun_alloc(ctx, sizeof x, &in[0]), CLRUN_OK);
    assert_int_equal(clrun_alloc(ctx, sizeof target, &in[1]), CLRUN_OK);
    assert_int_equal(clrun_buffer_write(ctx, &in[0], x), CLRUN_OK);
    assert_int_equal(clrun_buffer_write(ctx, &in[1], target), CLRUN_OK);
    assert_int_equal(clrun_exec_run(exec, in, 2), CLRUN_OK);

    float *w1 = values_of(g, "w1"), *b1 = values_of(g, "b1"), *w2 = values_of(g, "w2"), *b2 = values_of(g, "b2");
    double *dw1 = widen(w1, D * H), *db1 = widen(b1, H), *dw2 = widen(w2, H * O), *db2 = widen(b2, O);
    double gw1[D * H], gb1[H], gw2[H * O], gb2[O];
    double ref_loss = reference(x, target, dw1, db1, dw2, db2, gw1, gb1, gw2, gb2);
    float got_loss;
    assert_int_equal(clrun_exec_read_output(exec, 0, &got_loss, sizeof got_loss), CLRUN_OK);
    assert_true(fabs(got_loss - ref_loss) <= 1e-5 * fabs(ref_loss) + 1e-7);
    const double *refs[4] = {gw1, gb1, gw2, gb2};
    const size_t sizes[4] = {D * H, H, H * O, O};
    for (int k = 0; k < 4; k++) {
        float got[D * H];
        assert_int_equal(clrun_exec_read_output(exec, 1 + k, got, sizeof(float) * sizes[k]), CLRUN_OK);
        double scale = 0;
        for (size_t i = 0; i < sizes[k]; i++)
            scale = fmax(scale, fabs(refs[k][i]));
        for (size_t i = 0; i < sizes[k]; i++)
            if (fabs(got[i] - refs[k][i]) > 1e-5 * scale + 1e-7) {
                fprintf(stderr, "gradient %d element %zu: %g, reference %g\n", k, i, got[i], refs[k][i]);
                fail();
            }
    }
    free(w1), free(b1), free(w2), free(b2), free(dw1), free(db1), free(dw2), free(db2);
    clrun_free(ctx, &in[0]);
    clrun_free(ctx, &in[1]);
    clrun_exec_destroy(exec);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(gg);
    clrun_graph_destroy(g);
}

static clrun_train *trainer_remat(clrun_context *ctx, const clrun_graph *g,
                                  clrun_optimizer_kind kind, int fusion, const char *remat)
{
    clrun_train_options o;
    clrun_train_options_init(&o);
    o.graph.remat = remat;
    o.graph.loss = CLRUN_LOSS_MSE;
    o.graph.loss_tensor = "pred";
    clrun_optimizer_init(&o.graph.optimizer, kind);
    o.graph.optimizer.lr = kind == CLRUN_OPTIMIZER_SGD ? 0.05 : 0.01;
    if (kind == CLRUN_OPTIMIZER_SGD) {
        o.graph.optimizer.momentum = 0.9;
        o.graph.optimizer.nesterov = true;
        o.graph.optimizer.weight_decay = 1e-3;
    }
    o.exec.fusion = fusion;
    o.exec.plan_time_limit_s = 0.05;
    clrun_train *t = NULL;
    if (clrun_train_create(ctx, g, &o, &t) != CLRUN_OK) {
        fprintf(stderr, "train_create: %s\n", clrun_last_error(ctx));
        fail();
    }
    return t;
}

static clrun_train *trainer(clrun_context *ctx, const clrun_graph *g, clrun_optimizer_kind kind,
                            int fusion)
{
    return trainer_remat(ctx, g, kind, fusion, NULL);
}

static double step(clrun_train *t, uint64_t seed)
{
    float x[N * D], target[N * O];
    batch(seed, x, target);
    const void *feeds[2] = {x, target};
    clrun_train_step_result r;
    assert_int_equal(clrun_train_step(t, feeds, 2, &r), CLRUN_OK);
    return r.loss;
}

/* Steps of SGD (Nesterov momentum, weight decay) against the same updates in double. */
static void sgd_steps_follow_the_reference(void **state)
{
    (void)state;
    clrun_graph *g = mlp();
    clrun_context *ctx = context(NULL);
    clrun_train *t = trainer(ctx, g, CLRUN_OPTIMIZER_SGD, 0);
    float *w1 = values_of(g, "w1"), *b1 = values_of(g, "b1"), *w2 = values_of(g, "w2"), *b2 = values_of(g, "b2");
    double *p[4] = {widen(w1, D * H), widen(b1, H), widen(w2, H * O), widen(b2, O)};
    double buf[4][D * H];
    memset(buf, 0, sizeof buf);
    const size_t sizes[4] = {D * H, H, H * O, O};
    for (int s = 0; s < 20; s++) {
        float x[N * D], target[N * O];
        batch(100 + (uint64_t)s, x, target);
        double gr[4][D * H];
        double ref = reference(x, target, p[0], p[1], p[2], p[3], gr[0], gr[1], gr[2], gr[3]);
        double got = step(t, 100 + (uint64_t)s);
        assert_true(fabs(got - ref) <= 1e-4 * fabs(ref) + 1e-6);
        for (int k = 0; k < 4; k++)
            for (size_t i = 0; i < sizes[k]; i++) {
                double d = gr[k][i] + 1e-3 * p[k][i];
                buf[k][i] = 0.9 * buf[k][i] + d;
                p[k][i] -= 0.05 * (d + 0.9 * buf[k][i]);
            }
    }
    assert_int_equal(clrun_train_param_count(t), 4);
    for (int k = 0; k < 4; k++) {
        const char *name;
        clrun_tensor_type type;
        assert_int_equal(clrun_train_param_info(t, k, &name, &type), CLRUN_OK);
        float got[D * H];
        assert_int_equal(clrun_train_read_param(t, k, got, clrun_tensor_bytes(&type)), CLRUN_OK);
        for (size_t i = 0; i < sizes[k]; i++)
            assert_true(fabs(got[i] - p[k][i]) <= 1e-4 * (1 + fabs(p[k][i])));
    }
    for (int k = 0; k < 4; k++)
        free(p[k]);
    free(w1), free(b1), free(w2), free(b2);
    clrun_train_destroy(t);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

/* 100 steps: the pool reserves nothing more after the first, every donation is used, and the
 * loss goes down. */
static void state_is_updated_in_place(void **state)
{
    (void)state;
    clrun_graph *g = mlp();
    clrun_context *ctx = context(NULL);
    clrun_train *t = trainer(ctx, g, CLRUN_OPTIMIZER_ADAM, 0);
    double first = step(t, 1);
    clrun_memory_stats m0;
    assert_int_equal(clrun_memory_stats_get(ctx, &m0), CLRUN_OK);
    double last = first;
    for (int s = 0; s < 100; s++)
        last = step(t, 1); /* the same batch: the loss must fall */
    clrun_memory_stats m1;
    assert_int_equal(clrun_memory_stats_get(ctx, &m1), CLRUN_OK);
    assert_true(m1.reserved <= m0.reserved);
    assert_true(last < 0.5 * first);
    clrun_train_stats st;
    assert_int_equal(clrun_train_stats_get(t, &st), CLRUN_OK);
    if (st.unused_donations != 0) {
        const char *const *names;
        int32_t n = clrun_train_unused_donations(t, &names);
        for (int32_t k = 0; k < n; k++)
            fprintf(stderr, "unused: %s\n", names[k]);
        fprintf(stderr, "unused donations: %d (%d), donations %d\n", st.unused_donations, n, st.donations);
    }
    assert_int_equal(st.unused_donations, 0);
    assert_int_equal(st.params, 4);
    assert_int_equal(st.state_tensors, 8);
    assert_true(st.donations >= 12);
    assert_int_equal(st.donated_in_place, 12); /* every parameter and state tensor, in place */
    assert_int_equal(st.param_bytes, sizeof(float) * (D * H + H + H * O + O));
    assert_int_equal(st.state_bytes, 2 * st.param_bytes);
    assert_int_equal(st.steps, 101);
    clrun_train_destroy(t);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

/* Where the weights outweigh the activations, the step without donation holds the parameters
 * and optimizer state twice; with donation once, and the same bits. */
static void donation_saves_the_state_bytes(void **state)
{
    (void)state;
    static const char text[] =
        "graph wide\n"
        "input x: f32[2, 64]\n"
        "const w1: f32[64, 256] normal(0, 0.1) seed=1\n"
        "const w2: f32[256, 64] normal(0, 0.1) seed=2\n"
        "node h: f32[2, 256] = matmul(x, w1)\n"
        "node a: f32[2, 256] = tanh(h)\n"
        "node pred: f32[2, 64] = matmul(a, w2)\n"
        "output pred\n";
    clrun_graph *g = NULL;
    char err[256];
    assert_int_equal(clrun_graph_parse(text, sizeof text - 1, "wide", &g, err, sizeof err), CLRUN_OK);
    uint64_t peak[2], saved = 0;
    static float params[2][64 * 256];
    for (int off = 0; off < 2; off++) {
        clrun_context *ctx = context(NULL);
        clrun_train_options o;
        clrun_train_options_init(&o);
        o.graph.loss = CLRUN_LOSS_MSE;
        o.graph.loss_tensor = "pred";
        o.graph.no_donation = off == 1;
        clrun_train *t = NULL;
        assert_int_equal(clrun_train_create(ctx, g, &o, &t), CLRUN_OK);
        float x[2 * 64], y[2 * 64];
        for (int i = 0; i < 2 * 64; i++)
            x[i] = (float)((i * 37) % 11) / 11.0f - 0.5f, y[i] = (float)((i * 13) % 7) / 7.0f;
        const void *feeds[2] = {x, y};
        for (int s = 0; s < 3; s++)
            assert_int_equal(clrun_train_step(t, feeds, 2, NULL), CLRUN_OK);
        clrun_train_stats st;
        assert_int_equal(clrun_train_stats_get(t, &st), CLRUN_OK);
        peak[off] = st.peak_bytes;
        saved = st.param_bytes + st.state_bytes;
        assert_int_equal(clrun_train_read_param(t, 0, params[off], sizeof params[off]), CLRUN_OK);
        if (off == 0)
            assert_int_equal(st.unused_donations, 0);
        clrun_train_destroy(t);
        clrun_context_destroy(ctx);
    }
    /* Without donation the old and the new state exist at once; with it, the step holds the
     * state once and its peak is the state plus what the backward pass keeps alive then (the
     * updates run as gradients complete, so that peak is inside the backward pass). */
    uint64_t activations = peak[0] - saved;
    if (peak[1] < 2 * saved || peak[1] - peak[0] < saved - activations || activations > saved / 4) {
        fprintf(stderr, "peak with donation %llu, without %llu, state %llu\n",
                (unsigned long long)peak[0], (unsigned long long)peak[1], (unsigned long long)saved);
        fail();
    }
    assert_memory_equal(params[0], params[1], sizeof params[0]);
    clrun_graph_destroy(g);
}

/* A loss that comes out NaN is an error naming the step. */
static void nan_loss_names_the_step(void **state)
{
    (void)state;
    clrun_graph *g = mlp();
    clrun_context *ctx = context(NULL);
    clrun_train *t = trainer(ctx, g, CLRUN_OPTIMIZER_SGD, 0);
    step(t, 1);
    float x[N * D], target[N * O];
    batch(2, x, target);
    x[3] = NAN;
    const void *feeds[2] = {x, target};
    assert_int_equal(clrun_train_step(t, feeds, 2, NULL), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clrun_last_error(ctx), "step 2 gave a loss of NaN"));
    clrun_train_destroy(t);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

/* The parameters after some steps of model g (NULL: mlp()), as bytes; the step's stats into
 * *stats (may be NULL). */
/* `rounds` steps of trainer t (of g, MSE on its x and pred; round k's batch drawn from seeds
 * xs + k and ts + k), each followed by an evaluation of the same batch with `evaluate`; the
 * losses, in order (step, then evaluation), into losses (may be NULL). */
static void run_rounds(clrun_train *t, const clrun_graph *g, int rounds, uint64_t xs, uint64_t ts,
                       bool evaluate, double *losses)
{
    const clrun_tensor_type *tx = clrun_graph_tensor_type(g, clrun_graph_find(g, "x"));
    const clrun_tensor_type *tp = clrun_graph_tensor_type(g, clrun_graph_find(g, "pred"));
    float *x = malloc(clrun_tensor_bytes(tx)), *target = malloc(clrun_tensor_bytes(tp));
    assert_non_null(x);
    assert_non_null(target);
    int n = 0;
    for (int k = 0; k < rounds; k++) {
        assert_int_equal(clrun_fill_values(tx, CLRUN_FILL_UNIFORM, -1, 1, xs + (uint64_t)k, x,
                                           clrun_tensor_bytes(tx)), CLRUN_OK);
        assert_int_equal(clrun_fill_values(tp, CLRUN_FILL_UNIFORM, -1, 1, ts + (uint64_t)k, target,
                                           clrun_tensor_bytes(tp)), CLRUN_OK);
        const void *feeds[2] = {x, target};
        clrun_train_step_result r;
        assert_int_equal(clrun_train_step(t, feeds, 2, &r), CLRUN_OK);
        if (losses)
            losses[n++] = r.loss;
        clrun_train_eval_result e;
        if (evaluate)
            assert_int_equal(clrun_train_evaluate(t, feeds, 2, -1, &e), CLRUN_OK);
        if (evaluate && losses)
            losses[n++] = e.loss;
    }
    free(x);
    free(target);
}

/* Eight steps of trainer t (of g, MSE on its x and pred), its parameters after them into out,
 * its statistics into stats (may be NULL); the trainer is destroyed. */
static void steps_then_params(clrun_train *t, const clrun_graph *g, float *out,
                              clrun_train_stats *stats)
{
    run_rounds(t, g, 8, 40, 47, false, NULL);
    size_t at = 0;
    for (int k = 0; k < clrun_train_param_count(t); k++) {
        clrun_tensor_type type;
        assert_int_equal(clrun_train_param_info(t, k, NULL, &type), CLRUN_OK);
        assert_int_equal(clrun_train_read_param(t, k, out + at, clrun_tensor_bytes(&type)), CLRUN_OK);
        at += clrun_tensor_elements(&type);
    }
    if (stats)
        assert_int_equal(clrun_train_stats_get(t, stats), CLRUN_OK);
    clrun_train_destroy(t);
}

static void params_after_remat(const clrun_graph *model, const char *allocator, int fusion,
                               clrun_optimizer_kind kind, const char *remat, float *out,
                               clrun_train_stats *stats)
{
    clrun_graph *own = model ? NULL : mlp();
    const clrun_graph *g = model ? model : own;
    clrun_context *ctx = context(allocator);
    steps_then_params(trainer_remat(ctx, g, kind, fusion, remat), g, out, stats);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(own);
}

static void params_after(const char *allocator, int fusion, clrun_optimizer_kind kind, float *out)
{
    params_after_remat(NULL, allocator, fusion, kind, NULL, out, NULL);
}

/* The sacred invariant: every allocator, and fusion on or off, give the same bits, under SGD,
 * Adam and AdamW. */
static void every_allocator_gives_the_same_bits(void **state)
{
    (void)state;
    enum { P = D * H + H + H * O + O };
    static const char *const allocators[] = {"tlsf", "buddy", "slab", "bump", "naive", "planned"};
    /* CLRUN_TEST_ROUNDS below 3: each allocator with that many of the optimizers, rotating, so
     * that every allocator and every optimizer is still tried */
    int rounds = clrun_test_rounds(3);
    for (int kind = 0; kind < 3; kind++) {
        float base[P], other[P];
        params_after("tlsf", -1, (clrun_optimizer_kind)kind, base);
        for (size_t a = 0; a < sizeof allocators / sizeof allocators[0]; a++)
            for (int fusion = -1; fusion <= 1 && ((int)a + kind) % 3 < rounds; fusion += 2) {
                params_after(allocators[a], fusion, (clrun_optimizer_kind)kind, other);
                if (memcmp(base, other, sizeof base) != 0) {
                    fprintf(stderr, "%s, %s, fusion %d: different parameters\n", allocators[a],
                            clrun_optimizer_kind_name((clrun_optimizer_kind)kind), fusion);
                    fail();
                }
            }
    }
}

/* What a reduce hook saw, and what it does: scale the gradients, or fail. */
typedef struct hook_record {
    int calls;
    uint64_t count, last_step;
    float scale;
    bool fail;
    float *seen; /* when not NULL: a copy of the gradients handed over (before scaling) */
    bool no_donation; /* the trainer's (measuring only) */
} hook_record;

static clrun_status hook(void *user, uint64_t step, float *gradients, uint64_t count, char *err,
                         size_t errlen)
{
    hook_record *h = user;
    h->calls++;
    h->count = count;
    h->last_step = step;
    if (h->fail) {
        snprintf(err, errlen, "the peer is gone");
        return CLRUN_ERROR_IO;
    }
    if (h->seen)
        memcpy(h->seen, gradients, sizeof *gradients * count);
    for (uint64_t i = 0; i < count; i++)
        gradients[i] *= h->scale;
    return CLRUN_OK;
}

static clrun_train *trainer_hooked(clrun_context *ctx, const clrun_graph *g, clrun_optimizer_kind kind,
                                   bool plain_sgd, double lr, hook_record *h)
{
    clrun_train_options o;
    clrun_train_options_init(&o);
    o.graph.keep_gradients = h && h->seen;
    o.graph.no_donation = h && h->no_donation;
    o.graph.loss = CLRUN_LOSS_MSE;
    o.graph.loss_tensor = "pred";
    clrun_optimizer_init(&o.graph.optimizer, kind);
    o.graph.optimizer.lr = lr;
    if (kind == CLRUN_OPTIMIZER_SGD && !plain_sgd) { /* as trainer_remat */
        o.graph.optimizer.momentum = 0.9;
        o.graph.optimizer.nesterov = true;
        o.graph.optimizer.weight_decay = 1e-3;
    }
    o.exec.plan_time_limit_s = 0.05;
    if (h) {
        o.reduce = hook;
        o.reduce_user = h;
    }
    clrun_train *t = NULL;
    if (clrun_train_create(ctx, g, &o, &t) != CLRUN_OK) {
        fprintf(stderr, "train_create: %s\n", clrun_last_error(ctx));
        fail();
    }
    return t;
}

/* A reduce hook gets every gradient between the backward pass and the update, in parameter
 * order, and the update uses what it leaves: returned unchanged, the same bits as the fused
 * step under every optimizer (without donation too); doubled under plain SGD, the same bits as
 * twice the learning rate; a failing hook fails the step by its message and changes no
 * parameter, and the trainer steps on. */
static void a_reduce_hook_replaces_the_gradients(void **state)
{
    (void)state;
    enum { P = D * H + H + H * O + O };
    clrun_graph *g = mlp();
    clrun_context *ctx = context("tlsf");
    for (int kind = 0; kind < 3; kind++) {
        double lr = kind == CLRUN_OPTIMIZER_SGD ? 0.05 : 0.01;
        float base[P], other[P];
        clrun_train_stats st;
        steps_then_params(trainer_hooked(ctx, g, (clrun_optimizer_kind)kind, false, lr, NULL), g,
                          base, NULL);
        hook_record h = {.scale = 1.0f};
        steps_then_params(trainer_hooked(ctx, g, (clrun_optimizer_kind)kind, false, lr, &h), g,
                          other, &st);
        assert_int_equal(h.calls, 8);
        assert_int_equal(h.last_step, 8);
        assert_int_equal(h.count, P);
        assert_int_equal(st.unused_donations, 0);
        assert_true(st.donations > 0);
        if (memcmp(base, other, sizeof base) != 0) {
            fprintf(stderr, "%s: an identity hook changes the parameters\n",
                    clrun_optimizer_kind_name((clrun_optimizer_kind)kind));
            fail();
        }
    }
    /* without donation, the same bits too */
    float donated[P], copied[P];
    steps_then_params(trainer_hooked(ctx, g, CLRUN_OPTIMIZER_ADAMW, false, 0.01, NULL), g, donated,
                      NULL);
    hook_record hn = {.scale = 1.0f, .no_donation = true};
    steps_then_params(trainer_hooked(ctx, g, CLRUN_OPTIMIZER_ADAMW, false, 0.01, &hn), g, copied,
                      NULL);
    assert_memory_equal(donated, copied, sizeof donated);
    float twice[P], doubled[P];
    steps_then_params(trainer_hooked(ctx, g, CLRUN_OPTIMIZER_SGD, true, 0.1, NULL), g, twice, NULL);
    hook_record h2 = {.scale = 2.0f};
    steps_then_params(trainer_hooked(ctx, g, CLRUN_OPTIMIZER_SGD, true, 0.05, &h2), g, doubled, NULL);
    assert_memory_equal(twice, doubled, sizeof twice);
    /* the hook's buffer: every parameter's gradient, in parameter order */
    float seen[P], grad[D * H];
    hook_record hs = {.scale = 1.0f, .seen = seen};
    clrun_train *ts = trainer_hooked(ctx, g, CLRUN_OPTIMIZER_ADAM, false, 0.01, &hs);
    run_rounds(ts, g, 1, 3, 4, false, NULL);
    size_t at = 0;
    for (int k = 0; k < clrun_train_param_count(ts); k++) {
        clrun_tensor_type type;
        assert_int_equal(clrun_train_param_info(ts, k, NULL, &type), CLRUN_OK);
        assert_true(clrun_tensor_elements(&type) <= D * H);
        assert_int_equal(clrun_train_read_gradient(ts, k, grad, clrun_tensor_bytes(&type)), CLRUN_OK);
        assert_memory_equal(grad, seen + at, clrun_tensor_bytes(&type));
        at += clrun_tensor_elements(&type);
    }
    assert_int_equal(at, P);
    clrun_train_destroy(ts);
    /* a failing hook */
    hook_record bad = {.scale = 1.0f, .fail = true};
    clrun_train *t = trainer_hooked(ctx, g, CLRUN_OPTIMIZER_ADAM, false, 0.01, &bad);
    float before[D * H], after[D * H], x[N * D], target[N * O];
    assert_int_equal(clrun_train_read_param(t, 0, before, sizeof before), CLRUN_OK);
    batch(5, x, target);
    const void *feeds[2] = {x, target};
    assert_int_equal(clrun_train_step(t, feeds, 2, NULL), CLRUN_ERROR_IO);
    if (strstr(clrun_last_error(ctx), "step 1") == NULL ||
        strstr(clrun_last_error(ctx), "the peer is gone") == NULL) {
        fprintf(stderr, "a failing hook: '%s'\n", clrun_last_error(ctx));
        fail();
    }
    assert_int_equal(clrun_train_read_param(t, 0, after, sizeof after), CLRUN_OK);
    assert_memory_equal(before, after, sizeof before);
    bad.fail = false;
    clrun_train_step_result r;
    assert_int_equal(clrun_train_step(t, feeds, 2, &r), CLRUN_OK);
    assert_int_equal(r.step, 1);
    assert_int_equal(clrun_train_read_param(t, 0, after, sizeof after), CLRUN_OK);
    assert_memory_not_equal(before, after, sizeof before);
    clrun_train_destroy(t);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

/* What a bucketed reduction's hooks saw: each bucket "reduced" (scaled) on its third test, as
 * a non-blocking all-reduce completes some polls later; a start may fail. */
typedef struct bucket_record {
    int32_t next;          /* the bucket expected next in this step */
    bool out_of_order;     /* one came out of turn */
    uint64_t floats;       /* floats handed over in the last step */
    int32_t buckets;       /* buckets started in the last step */
    float *at[64];         /* per bucket: its gradients, and their count */
    uint64_t count[64];
    int polls[64];
    float scale;
    int32_t fail_bucket;   /* this bucket's start fails (-1: none) */
} bucket_record;

static clrun_status bucket_start(void *user, uint64_t step, int32_t bucket, float *gradients,
                                 uint64_t count, char *err, size_t errlen)
{
    bucket_record *r = user;
    (void)step;
    if (bucket == r->fail_bucket) {
        snprintf(err, errlen, "bucket %d refused", (int)bucket);
        return CLRUN_ERROR_IO;
    }
    if (bucket == 0)
        r->next = r->buckets = 0, r->floats = 0;
    if (bucket != r->next++ || bucket >= 64) {
        r->out_of_order = true;
        return CLRUN_OK;
    }
    r->at[bucket] = gradients;
    r->count[bucket] = count;
    r->polls[bucket] = 0;
    r->floats += count;
    r->buckets++;
    return CLRUN_OK;
}

static clrun_status bucket_test(void *user, uint64_t step, int32_t bucket, bool *done, char *err,
                                size_t errlen)
{
    bucket_record *r = user;
    (void)step, (void)err, (void)errlen;
    *done = ++r->polls[bucket] >= 3;
    if (r->polls[bucket] == 3)
        for (uint64_t i = 0; i < r->count[bucket]; i++)
            r->at[bucket][i] *= r->scale;
    return CLRUN_OK;
}

static clrun_train *trainer_bucketed(clrun_context *ctx, const clrun_graph *g, double lr,
                                     bucket_record *r, uint64_t bucket_bytes)
{
    clrun_train_options o;
    clrun_train_options_init(&o);
    o.graph.loss = CLRUN_LOSS_MSE;
    o.graph.loss_tensor = "pred";
    clrun_optimizer_init(&o.graph.optimizer, CLRUN_OPTIMIZER_ADAM);
    o.graph.optimizer.lr = lr;
    o.exec.plan_time_limit_s = 0.05;
    o.exec.profile = true;
    o.bucket_start = bucket_start;
    o.bucket_test = bucket_test;
    o.bucket_bytes = bucket_bytes;
    o.reduce_user = r;
    clrun_train *t = NULL;
    if (clrun_train_create(ctx, g, &o, &t) != CLRUN_OK) {
        fprintf(stderr, "train_create: %s\n", clrun_last_error(ctx));
        fail();
    }
    return t;
}

/* A bucketed reduction: the buckets come in order, as the backward pass completes them (their
 * schedule steps never go down), cover every gradient once, and the updates use what the
 * hooks leave: an identity gives the fused step's parameters bit for bit under Adam, in one
 * bucket or several. With profiling, each bucket's times lie on the step's timeline in order.
 * A start that fails fails the step by its message and changes no parameter; the trainer
 * steps on. bucket_start without bucket_test is refused. */
static void buckets_reduce_as_the_backward_pass_goes(void **state)
{
    (void)state;
    enum { P = D * H + H + H * O + O };
    clrun_graph *g = mlp();
    clrun_context *ctx = context("tlsf");
    float base[P], other[P];
    steps_then_params(trainer_hooked(ctx, g, CLRUN_OPTIMIZER_ADAM, false, 0.01, NULL), g, base,
                      NULL);
    for (int k = 0; k < 2; k++) {
        bucket_record r = {.scale = 1.0f, .fail_bucket = -1};
        clrun_train *t = trainer_bucketed(ctx, g, 0.01, &r, k == 0 ? 1u << 20 : 16);
        const clrun_train_bucket *b;
        int32_t n = clrun_train_buckets(t, &b);
        if (k == 0)
            assert_int_equal(n, 1);
        else
            assert_true(n >= 2 && n <= clrun_train_param_count(t));
        assert_int_equal(clrun_train_gradient_count(t), P);
        run_rounds(t, g, 1, 3, 4, false, NULL);
        assert_false(r.out_of_order);
        assert_int_equal(r.buckets, n);
        /* the hooks get the gradients without the device's alignment padding */
        uint64_t at = 0;
        assert_int_equal(r.floats, P);
        for (int32_t i = 0; i < n; i++) {
            assert_int_equal(b[i].first, at);
            assert_true(b[i].contiguous); /* one device region, one read */
            assert_int_equal(b[i].reads, 1);
            at += b[i].count;
            assert_true(i == 0 || b[i].step >= b[i - 1].step);
            assert_true(b[i].start_ns <= b[i].end_ns);
            assert_true(i == 0 || b[i].start_ns >= b[i - 1].start_ns);
        }
        assert_int_equal(at, P);
        clrun_train_destroy(t);
        bucket_record r2 = {.scale = 1.0f, .fail_bucket = -1};
        steps_then_params(trainer_bucketed(ctx, g, 0.01, &r2, k == 0 ? 1u << 20 : 16), g, other,
                          NULL);
        if (memcmp(base, other, sizeof base) != 0) {
            fprintf(stderr, "identity buckets (%s) change the parameters\n", k ? "16 B" : "1 MiB");
            fail();
        }
    }
    /* the updates read what the hooks leave once done: buckets that halve the gradients give
     * the parameters of a reduce hook that halves them, bit for bit (a read of the stage before
     * bucket_test said done, or of the gradients as computed, would not) */
    hook_record half = {.scale = 0.5f};
    steps_then_params(trainer_hooked(ctx, g, CLRUN_OPTIMIZER_ADAM, false, 0.01, &half), g, base, NULL);
    bucket_record rh = {.scale = 0.5f, .fail_bucket = -1};
    steps_then_params(trainer_bucketed(ctx, g, 0.01, &rh, 16), g, other, NULL);
    if (memcmp(base, other, sizeof base) != 0) {
        fprintf(stderr, "halving buckets differ from a halving reduce hook\n");
        fail();
    }
    /* a failing start */
    bucket_record bad = {.scale = 1.0f, .fail_bucket = 1};
    clrun_train *t = trainer_bucketed(ctx, g, 0.01, &bad, 16);
    float before[D * H], after[D * H], x[N * D], target[N * O];
    assert_int_equal(clrun_train_read_param(t, 0, before, sizeof before), CLRUN_OK);
    batch(5, x, target);
    const void *feeds[2] = {x, target};
    assert_int_equal(clrun_train_step(t, feeds, 2, NULL), CLRUN_ERROR_IO);
    if (strstr(clrun_last_error(ctx), "step 1") == NULL ||
        strstr(clrun_last_error(ctx), "bucket 1 refused") == NULL) {
        fprintf(stderr, "a failing bucket: '%s'\n", clrun_last_error(ctx));
        fail();
    }
    assert_int_equal(clrun_train_read_param(t, 0, after, sizeof after), CLRUN_OK);
    assert_memory_equal(before, after, sizeof before);
    bad.fail_bucket = -1;
    clrun_train_step_result res;
    assert_int_equal(clrun_train_step(t, feeds, 2, &res), CLRUN_OK);
    assert_int_equal(res.step, 1);
    assert_int_equal(clrun_train_read_param(t, 0, after, sizeof after), CLRUN_OK);
    assert_memory_not_equal(before, after, sizeof before);
    clrun_train_destroy(t);
    /* half the hooks */
    clrun_train_options o;
    clrun_train_options_init(&o);
    o.graph.loss = CLRUN_LOSS_MSE;
    o.graph.loss_tensor = "pred";
    o.bucket_start = bucket_start;
    clrun_train *none = NULL;
    assert_int_equal(clrun_train_create(ctx, g, &o, &none), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_null(none);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

/* A bucketed trainer of g under `allocator` ("out-of-order": tlsf on an out-of-order queue,
 * where the device has one, which must fall back to reads per gradient) with identity hooks,
 * gradients read per bucket in one piece or (per_gradient) one by one: its parameters after
 * steps_then_params into out, and whether every bucket of the last step was one device region
 * read at once (*one_read), or, per gradient, read in as many reads as it has gradients,
 * without padding. */
static void params_bucketed(const clrun_graph *g, const char *allocator, int fusion,
                            uint64_t bucket_bytes, bool per_gradient, float *out, bool *one_read)
{
    clrun_context *ctx = NULL;
    bool ooo = strcmp(allocator, "out-of-order") == 0; /* tlsf on an out-of-order queue */
    clrun_context_options co;
    clrun_context_options_init(&co);
    co.allocator = ooo ? "tlsf" : allocator;
    co.out_of_order = ooo ? 1 : -1;
    assert_int_equal(clrun_context_create(&co, &ctx), CLRUN_OK);
    if (ooo && clrun_context_out_of_order(ctx))
        per_gradient = true; /* no groups there: what the bucket reports must say so */
    bucket_record r = {.scale = 1.0f, .fail_bucket = -1};
    clrun_train_options o;
    clrun_train_options_init(&o);
    o.graph.loss = CLRUN_LOSS_MSE;
    o.graph.loss_tensor = "pred";
    clrun_optimizer_init(&o.graph.optimizer, CLRUN_OPTIMIZER_ADAM);
    o.graph.optimizer.lr = 0.01;
    o.exec.fusion = fusion;
    o.exec.plan_time_limit_s = 0.05;
    o.bucket_start = bucket_start;
    o.bucket_test = bucket_test;
    o.bucket_bytes = bucket_bytes;
    o.bucket_per_gradient = per_gradient && !ooo;
    o.reduce_user = &r;
    clrun_train *t = NULL;
    if (clrun_train_create(ctx, g, &o, &t) != CLRUN_OK) {
        fprintf(stderr, "train_create (%s): %s\n", allocator, clrun_last_error(ctx));
        fail();
    }
    run_rounds(t, g, 8, 40, 47, false, NULL); /* as steps_then_params */
    const clrun_train_bucket *b;
    int32_t n = clrun_train_buckets(t, &b);
    assert_true(n >= 1);
    *one_read = true;
    for (int32_t i = 0; i < n; i++) {
        if (per_gradient) {
            assert_false(b[i].contiguous);
            assert_int_equal(b[i].reads, b[i].params);
            assert_int_equal(b[i].padding, 0);
        }
        *one_read = *one_read && b[i].contiguous && b[i].reads == 1;
    }
    size_t at = 0;
    for (int k = 0; k < clrun_train_param_count(t); k++) {
        clrun_tensor_type type;
        assert_int_equal(clrun_train_param_info(t, k, NULL, &type), CLRUN_OK);
        assert_int_equal(clrun_train_read_param(t, k, out + at, clrun_tensor_bytes(&type)),
                         CLRUN_OK);
        at += clrun_tensor_elements(&type);
    }
    clrun_train_destroy(t);
    clrun_context_destroy(ctx);
}

/* Each bucket's gradients laid out in one device region and read with one transfer change no
 * bit: the parameters after the steps equal the per-gradient reads' and the plain fused
 * step's, in every allocator mode (CLRUN_TEST_ROUNDS below 6: the first that many), fusion on
 * and off, buckets of 16 bytes (one per step that completes gradients) or one of them all
 * (fusion on); and every bucket took one read. On an out-of-order queue the buckets fall back
 * to a read per gradient, and the bits are the same. */
static void buckets_in_one_region_keep_the_bits(void **state)
{
    (void)state;
    enum { P = D * H + H + H * O + O };
    static const char *const allocators[] = {"tlsf", "buddy", "slab", "bump", "naive", "planned"};
    clrun_graph *g = mlp();
    size_t modes = (size_t)clrun_test_rounds(6); /* fewer modes when set low */
    modes = modes < 6 ? modes : 6;
    for (size_t a = 0; a < modes; a++)
        for (int fusion = -1; fusion <= 1; fusion += 2) {
            float plain[P], whole[P], each[P], one[P];
            clrun_context *ctx = context(allocators[a]);
            steps_then_params(trainer(ctx, g, CLRUN_OPTIMIZER_ADAM, fusion), g, plain, NULL);
            clrun_context_destroy(ctx);
            bool one_read = false, per = false;
            params_bucketed(g, allocators[a], fusion, 16, false, whole, &one_read);
            if (!one_read) {
                fprintf(stderr, "%s, fusion %d: a bucket took more than one read\n",
                        allocators[a], fusion);
                fail();
            }
            params_bucketed(g, allocators[a], fusion, 16, true, each, &per);
            assert_false(per);
            memcpy(one, whole, sizeof one);
            if (fusion > 0) { /* one bucket of them all */
                params_bucketed(g, allocators[a], fusion, 1u << 20, false, one, &one_read);
                assert_true(one_read);
            }
            if (memcmp(plain, whole, sizeof plain) != 0 || memcmp(plain, each, sizeof plain) != 0 ||
                memcmp(plain, one, sizeof plain) != 0) {
                fprintf(stderr, "%s, fusion %d: the parameters differ (one region per bucket %s, "
                        "per gradient %s, one bucket %s)\n", allocators[a], fusion,
                        memcmp(plain, whole, sizeof plain) ? "differs" : "same",
                        memcmp(plain, each, sizeof plain) ? "differs" : "same",
                        memcmp(plain, one, sizeof plain) ? "differs" : "same");
                fail();
            }
        }
    /* an out-of-order queue: every bucket falls back to a read per gradient, the same bits */
    float plain[P], each[P];
    clrun_context *ctx = context("tlsf");
    steps_then_params(trainer(ctx, g, CLRUN_OPTIMIZER_ADAM, 1), g, plain, NULL);
    clrun_context_destroy(ctx);
    bool one_read = false;
    params_bucketed(g, "out-of-order", 1, 16, false, each, &one_read);
    assert_memory_equal(plain, each, sizeof plain);
    clrun_graph_destroy(g);
}

/* A step split into its parts (split_update, no hook): clrun_train_gradients twice on a batch
 * gives the same gradients and leaves the parameters; their mean (exactly either) applied with
 * clrun_train_apply is the fused step, bit for bit, under Adam for 8 steps. A trainer without
 * the split, or a wrong count of gradients, is refused by name and changes nothing. */
static void the_parts_of_a_split_step_are_the_step(void **state)
{
    (void)state;
    enum { P = D * H + H + H * O + O };
    clrun_graph *g = mlp();
    clrun_context *ctx = context("tlsf");
    float base[P], parts[P];
    steps_then_params(trainer_hooked(ctx, g, CLRUN_OPTIMIZER_ADAM, false, 0.01, NULL), g, base,
                      NULL);
    clrun_train_options o;
    clrun_train_options_init(&o);
    o.graph.loss = CLRUN_LOSS_MSE;
    o.graph.loss_tensor = "pred";
    clrun_optimizer_init(&o.graph.optimizer, CLRUN_OPTIMIZER_ADAM);
    o.graph.optimizer.lr = 0.01;
    o.exec.plan_time_limit_s = 0.05;
    o.split_update = true;
    clrun_train *t = NULL;
    assert_int_equal(clrun_train_create(ctx, g, &o, &t), CLRUN_OK);
    assert_int_equal(clrun_train_gradient_count(t), P);
    const clrun_tensor_type *tx = clrun_graph_tensor_type(g, clrun_graph_find(g, "x"));
    const clrun_tensor_type *tp = clrun_graph_tensor_type(g, clrun_graph_find(g, "pred"));
    float x[N * D], target[N * O], g1[P], g2[P], mean[P], before[P], after[P];
    const void *feeds[2] = {x, target};
    for (int k = 0; k < 8; k++) { /* the batches of steps_then_params */
        assert_int_equal(clrun_fill_values(tx, CLRUN_FILL_UNIFORM, -1, 1, 40 + (uint64_t)k, x,
                                           sizeof x), CLRUN_OK);
        assert_int_equal(clrun_fill_values(tp, CLRUN_FILL_UNIFORM, -1, 1, 47 + (uint64_t)k, target,
                                           sizeof target), CLRUN_OK);
        clrun_train_step_result r;
        assert_int_equal(clrun_train_read_param(t, 0, before, sizeof(float) * D * H), CLRUN_OK);
        assert_int_equal(clrun_train_gradients(t, feeds, 2, g1, P, &r), CLRUN_OK);
        assert_int_equal(r.step, k + 1);
        assert_int_equal(clrun_train_gradients(t, feeds, 2, g2, P, NULL), CLRUN_OK);
        assert_memory_equal(g1, g2, sizeof g1);
        assert_int_equal(clrun_train_read_param(t, 0, after, sizeof(float) * D * H), CLRUN_OK);
        assert_memory_equal(before, after, sizeof(float) * D * H);
        for (int i = 0; i < P; i++)
            mean[i] = (g1[i] + g2[i]) / 2.0f;
        /* a wrong count: refused by name, nothing applied */
        assert_int_equal(clrun_train_apply(t, mean, P - 1), CLRUN_ERROR_INVALID_ARGUMENT);
        assert_non_null(strstr(clrun_last_error(ctx), "gradient values"));
        assert_int_equal(clrun_train_apply(t, mean, P), CLRUN_OK);
    }
    clrun_train_stats st;
    assert_int_equal(clrun_train_stats_get(t, &st), CLRUN_OK);
    assert_int_equal(st.steps, 8);
    size_t at = 0;
    for (int k = 0; k < clrun_train_param_count(t); k++) {
        clrun_tensor_type type;
        assert_int_equal(clrun_train_param_info(t, k, NULL, &type), CLRUN_OK);
        assert_int_equal(clrun_train_read_param(t, k, parts + at, clrun_tensor_bytes(&type)), CLRUN_OK);
        at += clrun_tensor_elements(&type);
    }
    assert_memory_equal(base, parts, sizeof base);
    clrun_train_destroy(t);
    /* a fused step has no parts */
    t = trainer_hooked(ctx, g, CLRUN_OPTIMIZER_ADAM, false, 0.01, NULL);
    assert_int_equal(clrun_train_gradient_count(t), 0);
    assert_int_equal(clrun_train_gradients(t, feeds, 2, g1, P, NULL), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clrun_last_error(ctx), "not split"));
    assert_int_equal(clrun_train_apply(t, g1, P), CLRUN_ERROR_INVALID_ARGUMENT);
    clrun_train_destroy(t);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

/* x [rows, width] through `layers` of matmul (with bias) and tanh, then a matmul to
 * pred [rows, 4]. */
static clrun_graph *deep_mlp_sized(int layers, int64_t rows, int64_t width)
{
    return tanh_mlp("deep", layers, rows, width, 4, "pred");
}

/* The same at [32, 48]. */
static clrun_graph *deep_mlp(int layers)
{
    return deep_mlp_sized(layers, 32, 48);
}

/* Rematerialisation changes no bit: every policy, with fusion on and off, in pooled and planned
 * mode, gives the parameters the step without it gives; recomputing lowers the activation peak
 * of a deep model (sqrt_n), and the report says what was repeated. */
static void every_remat_policy_gives_the_same_bits(void **state)
{
    (void)state;
    enum { LAYERS = 12, P = LAYERS * (48 * 48 + 48) + 48 * 4 };
    static const char *const policies[] = {"dots_saveable", "nothing_saveable", "sqrt_n", "cuts:3",
                                           "names:a3,m7,a9"};
    static const char *const allocators[] = {"tlsf", "planned"};
    clrun_graph *g = deep_mlp(LAYERS);
    float *base = malloc(sizeof(float) * P), *other = malloc(sizeof(float) * P);
    assert_non_null(base);
    assert_non_null(other);
    clrun_train_stats plain, st;
    params_after_remat(g, "tlsf", -1, CLRUN_OPTIMIZER_ADAM, NULL, base, &plain);
    assert_int_equal(plain.remat.repeated_nodes, 0);
    for (size_t p = 0; p < sizeof policies / sizeof policies[0]; p++)
        for (size_t a = 0; a < sizeof allocators / sizeof allocators[0]; a++)
            for (int fusion = -1; fusion <= 1; fusion += 2) {
                params_after_remat(g, allocators[a], fusion, CLRUN_OPTIMIZER_ADAM, policies[p], other, &st);
                if (memcmp(base, other, sizeof(float) * P) != 0) {
                    fprintf(stderr, "remat %s, %s, fusion %d: different parameters\n", policies[p],
                            allocators[a], fusion);
                    fail();
                }
                assert_true(st.remat.dropped > 0);
                assert_true(st.remat.repeated_nodes >= st.remat.dropped);
                if (strcmp(policies[p], "sqrt_n") == 0 && strcmp(allocators[a], "planned") == 0 &&
                    !(st.activation_peak_bytes < plain.activation_peak_bytes)) {
                    fprintf(stderr, "sqrt_n: activation peak %llu, %llu without\n",
                            (unsigned long long)st.activation_peak_bytes,
                            (unsigned long long)plain.activation_peak_bytes);
                    fail();
                }
            }
    free(base);
    free(other);
    /* An unknown policy, or a name the model lacks, is refused by name; nothing is made. */
    clrun_context *ctx = context("tlsf");
    static const char *const bad[] = {"everything", "names:a3,nope"};
    static const char *const why[] = {"unknown policy 'everything'", "'nope'"};
    for (int k = 0; k < 2; k++) {
        clrun_train_options o;
        clrun_train_options_init(&o);
        o.graph.loss = CLRUN_LOSS_MSE;
        o.graph.loss_tensor = "pred";
        o.graph.remat = bad[k];
        clrun_train *t = NULL;
        assert_int_equal(clrun_train_create(ctx, g, &o, &t), CLRUN_ERROR_INVALID_ARGUMENT);
        assert_null(t);
        if (strstr(clrun_last_error(ctx), why[k]) == NULL) {
            fprintf(stderr, "remat %s: '%s'\n", bad[k], clrun_last_error(ctx));
            fail();
        }
    }
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

/* With no policy given and no budget, the step recomputes by itself where that lowers its peak
 * by at least 4 MiB and 5 % for at most 35 % more arithmetic: a 32-layer tanh MLP of 1024 rows
 * (8 MiB of activations; its lower bound falls from 9.3 to 4.3 MiB) takes sqrt_n, reports it
 * as its own choice, holds less, and gives the
 * parameters of the step with every activation kept (remat "none", which turns the choice off),
 * bit for bit, pooled and planned, fusion on and off. The small deep MLP above keeps them all
 * (every_remat_policy_gives_the_same_bits: no policy, nothing repeated). */
static void the_step_chooses_recomputation_where_it_pays(void **state)
{
    (void)state;
    enum { LAYERS = 32, W = 64, P = LAYERS * (W * W + W) + W * 4 };
    clrun_graph *g = deep_mlp_sized(LAYERS, 1024, W);
    float *base = malloc(sizeof(float) * P), *other = malloc(sizeof(float) * P);
    assert_non_null(base);
    assert_non_null(other);
    clrun_train_stats none, st;
    params_after_remat(g, "tlsf", 1, CLRUN_OPTIMIZER_SGD, "none", base, &none);
    assert_false(none.remat_auto);
    assert_int_equal(none.remat.repeated_nodes, 0);
    static const char *const allocators[] = {"tlsf", "planned"};
    for (size_t a = 0; a < 2; a++)
        for (int fusion = -1; fusion <= 1; fusion += 2) {
            params_after_remat(g, allocators[a], fusion, CLRUN_OPTIMIZER_SGD, NULL, other, &st);
            /* (remat_policy is the destroyed trainer's: not read here) */
            if (!st.remat_auto || st.remat.repeated_nodes == 0 ||
                memcmp(base, other, sizeof(float) * P) != 0 ||
                st.lower_bound_bytes + (4u << 20) > none.lower_bound_bytes ||
                (a == 0 && st.peak_bytes >= none.peak_bytes)) {
                fprintf(stderr, "%s, fusion %d: auto %d, %d nodes repeated, lower bound %llu (%llu kept), "
                        "peak %llu (%llu), parameters %s\n", allocators[a], fusion, (int)st.remat_auto,
                        (int)st.remat.repeated_nodes, (unsigned long long)st.lower_bound_bytes,
                        (unsigned long long)none.lower_bound_bytes, (unsigned long long)st.peak_bytes,
                        (unsigned long long)none.peak_bytes,
                        memcmp(base, other, sizeof(float) * P) ? "differ" : "equal");
                fail();
            }
            assert_true(st.remat.dropped > 0);
        }
    free(base);
    free(other);
    clrun_context *ctx = context("tlsf");
    clrun_train *t = trainer_remat(ctx, g, CLRUN_OPTIMIZER_SGD, 1, NULL);
    assert_int_equal(clrun_train_stats_get(t, &st), CLRUN_OK);
    assert_true(st.remat_auto);
    assert_string_equal(st.remat_policy, "sqrt_n");
    clrun_train_destroy(t);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

/* sqrt_n keeps the forward's last segment whole: the last layer's tanh output, which the
 * backward pass reads first, is not repeated (it was, with the chain before it, right as the
 * backward pass started), the earlier segments still are, and the parameters are the bits of
 * the step without recomputation. 11 layers: 26 forward nodes, segments of 6. */
static void sqrt_n_keeps_the_last_segment(void **state)
{
    (void)state;
    enum { LAYERS = 11, P = LAYERS * (48 * 48 + 48) + 48 * 4 };
    clrun_graph *g = deep_mlp(LAYERS);
    float *base = malloc(sizeof(float) * P), *other = malloc(sizeof(float) * P);
    assert_non_null(base);
    assert_non_null(other);
    clrun_train_stats st;
    params_after_remat(g, "tlsf", 1, CLRUN_OPTIMIZER_SGD, "none", base, NULL);
    params_after_remat(g, "tlsf", 1, CLRUN_OPTIMIZER_SGD, "sqrt_n", other, &st);
    assert_memory_equal(base, other, sizeof(float) * P);
    assert_true(st.remat.repeated_nodes > 0);
    clrun_context *ctx = context("tlsf");
    clrun_train *t = trainer_remat(ctx, g, CLRUN_OPTIMIZER_SGD, 1, "sqrt_n");
    const clrun_graph *step = clrun_train_step_graph(t);
    assert_non_null(step);
    assert_true(clrun_graph_find(step, "a0.remat") >= 0); /* the first segment's */
    assert_true(clrun_graph_find(step, "a10.remat") < 0);
    assert_true(clrun_graph_find(step, "pred.remat") < 0);
    clrun_train_destroy(t);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
    free(base);
    free(other);
}

/* x [32, 48] -> `layers` x (h + tanh(h W + b)) -> pred [32, 4]: a residual MLP, whose only cuts
 * are the sums r0, r1, ... (h is read again by the sum after m and a). */
static clrun_graph *residual_mlp(int layers)
{
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("residual", &g), CLRUN_OK);
    clrun_tensor_type tx = {CLRUN_F32, 2, {32, 48}}, tw = {CLRUN_F32, 2, {48, 48}};
    clrun_tensor_type tb = {CLRUN_F32, 1, {48}}, to = {CLRUN_F32, 2, {48, 4}};
    clrun_tensor_id h;
    assert_int_equal(clrun_graph_add_input(g, "x", &tx, false, &h), CLRUN_OK);
    for (int l = 0; l < layers; l++) {
        char wn[16], bn[16], mn[16], an[16], rn[16];
        snprintf(wn, sizeof wn, "w%d", l);
        snprintf(bn, sizeof bn, "b%d", l);
        snprintf(mn, sizeof mn, "m%d", l);
        snprintf(an, sizeof an, "a%d", l);
        snprintf(rn, sizeof rn, "r%d", l);
        clrun_tensor_id w, b, m, a;
        assert_int_equal(clrun_graph_add_constant(g, wn, &tw, NULL, CLRUN_FILL_NORMAL, 0, 0.15,
                                                  10 + (uint64_t)l, &w), CLRUN_OK);
        assert_int_equal(clrun_graph_add_constant(g, bn, &tb, NULL, CLRUN_FILL_UNIFORM, -0.1, 0.1,
                                                  100 + (uint64_t)l, &b), CLRUN_OK);
        const char *mnames[] = {mn}, *anames[] = {an}, *rnames[] = {rn};
        assert_int_equal(clrun_graph_add_node(g, "matmul", (clrun_tensor_id[]){h, w, b}, 3, mnames,
                                              1, NULL, 0, &m), CLRUN_OK);
        assert_int_equal(clrun_graph_add_node(g, "tanh", &m, 1, anames, 1, NULL, 0, &a), CLRUN_OK);
        assert_int_equal(clrun_graph_add_node(g, "add", (clrun_tensor_id[]){h, a}, 2, rnames, 1,
                                              NULL, 0, &h), CLRUN_OK);
    }
    clrun_tensor_id w, y;
    assert_int_equal(clrun_graph_add_constant(g, "wo", &to, NULL, CLRUN_FILL_NORMAL, 0, 0.15, 9, &w),
                     CLRUN_OK);
    assert_int_equal(clrun_graph_add_node(g, "matmul", (clrun_tensor_id[]){h, w}, 2,
                                          (const char *[]){"pred"}, 1, NULL, 0, &y), CLRUN_OK);
    assert_int_equal(clrun_graph_mark_output(g, y), CLRUN_OK);
    return g;
}

/* cuts:K ends its segments at the forward's cuts: on a residual MLP (nodes m, a, r per layer)
 * cuts:7 keeps r1, r3, ... (segments of six nodes, the last cut within seven), repeats the rest
 * (r0, r2, m2 among them), where every:7 keeps m2 and a4, which the skip connection crosses.
 * Both give the parameters of the step without recomputation, bit for bit, pooled and planned,
 * fusion on and off, and cuts:7 holds no more activations than every:7 (planned). */
static void cut_segments_give_the_same_bits(void **state)
{
    (void)state;
    enum { LAYERS = 12, P = LAYERS * (48 * 48 + 48) + 48 * 4 };
    clrun_graph *g = residual_mlp(LAYERS);
    float *base = malloc(sizeof(float) * P), *other = malloc(sizeof(float) * P);
    assert_non_null(base);
    assert_non_null(other);
    clrun_train_stats plain, cuts, every;
    params_after_remat(g, "tlsf", 1, CLRUN_OPTIMIZER_SGD, "none", base, &plain);
    static const char *const allocators[] = {"tlsf", "planned"};
    for (size_t a = 0; a < 2; a++)
        for (int fusion = -1; fusion <= 1; fusion += 2) {
            params_after_remat(g, allocators[a], fusion, CLRUN_OPTIMIZER_SGD, "cuts:7", other, &cuts);
            if (memcmp(base, other, sizeof(float) * P) != 0)
                fail_msg("cuts:7, %s, fusion %d: different parameters", allocators[a], fusion);
            assert_true(cuts.remat.dropped > 0);
        }
    params_after_remat(g, "planned", 1, CLRUN_OPTIMIZER_SGD, "every:7", other, &every);
    assert_memory_equal(base, other, sizeof(float) * P);
    if (cuts.activation_peak_bytes > every.activation_peak_bytes ||
        cuts.activation_peak_bytes >= plain.activation_peak_bytes)
        fail_msg("activation peaks: cuts:7 %llu, every:7 %llu, none %llu",
                 (unsigned long long)cuts.activation_peak_bytes,
                 (unsigned long long)every.activation_peak_bytes,
                 (unsigned long long)plain.activation_peak_bytes);
    clrun_context *ctx = context("tlsf");
    clrun_train *t = trainer_remat(ctx, g, CLRUN_OPTIMIZER_SGD, 1, "cuts:7");
    const clrun_graph *step = clrun_train_step_graph(t);
    assert_true(clrun_graph_find(step, "r1.remat") < 0);
    assert_true(clrun_graph_find(step, "r3.remat") < 0);
    assert_true(clrun_graph_find(step, "r0.remat") >= 0);
    assert_true(clrun_graph_find(step, "r2.remat") >= 0);
    assert_true(clrun_graph_find(step, "m2.remat") >= 0);
    clrun_train_destroy(t);
    t = trainer_remat(ctx, g, CLRUN_OPTIMIZER_SGD, 1, "every:7");
    step = clrun_train_step_graph(t);
    assert_true(clrun_graph_find(step, "m2.remat") < 0);
    assert_true(clrun_graph_find(step, "a4.remat") < 0);
    clrun_train_destroy(t);
    /* a count is required after the colon */
    clrun_train_options o;
    clrun_train_options_init(&o);
    o.graph.loss = CLRUN_LOSS_MSE;
    o.graph.loss_tensor = "pred";
    o.graph.remat = "cuts:0";
    assert_int_equal(clrun_train_create(ctx, g, &o, &t), CLRUN_ERROR_INVALID_ARGUMENT);
    if (strstr(clrun_last_error(ctx), "cuts:K takes a count") == NULL)
        fail_msg("'%s'", clrun_last_error(ctx));
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
    free(base);
    free(other);
}

/* A trainer of the deep MLP under a memory budget (and a policy, may be NULL), or NULL with
 * the refusal's message in why. */
static clrun_train *budget_trainer(clrun_context *ctx, const clrun_graph *g, uint64_t budget,
                                   const char *remat, char *why, size_t size)
{
    clrun_train_options o;
    clrun_train_options_init(&o);
    o.graph.loss = CLRUN_LOSS_MSE;
    o.graph.loss_tensor = "pred";
    o.graph.memory_budget = budget;
    o.graph.remat = remat;
    clrun_train *t = NULL;
    if (clrun_train_create(ctx, g, &o, &t) != CLRUN_OK)
        snprintf(why, size, "%s", clrun_last_error(ctx));
    return t;
}

/* What the trainer of g (MSE on pred) holds under a budget every step fits: the step as it is,
 * planned. */
static uint64_t held_unconstrained(clrun_context *ctx, const clrun_graph *g)
{
    char why[1024] = "";
    clrun_train *t = budget_trainer(ctx, g, UINT64_C(1) << 30, NULL, why, sizeof why);
    if (t == NULL)
        fail_msg("%s", why);
    clrun_train_stats st;
    assert_int_equal(clrun_train_stats_get(t, &st), CLRUN_OK);
    assert_string_equal(st.remat_policy, "none");
    assert_true(st.planned_peak_bytes > 0);
    clrun_train_destroy(t);
    return st.planned_peak_bytes;
}

/* A context (tlsf) created with CLRUN_OFFLOAD_RATE set to rate, the FLOPs a byte moved to host
 * memory and back costs (read when a context is created; the variable is put back after): a
 * budget's choice between recomputing and offloading then does not hang on the rate measured. */
static clrun_context *context_at_rate(const char *rate)
{
    char kept[64] = "";
    const char *was = getenv("CLRUN_OFFLOAD_RATE");
    if (was)
        snprintf(kept, sizeof kept, "%s", was);
    setenv("CLRUN_OFFLOAD_RATE", rate, 1);
    clrun_context *ctx = context("tlsf");
    if (was)
        setenv("CLRUN_OFFLOAD_RATE", kept, 1);
    else
        unsetenv("CLRUN_OFFLOAD_RATE");
    return ctx;
}

/* Under a memory budget the trainer takes the step as it is when it fits, else recomputes the
 * fewest activations that make it fit (the same bits), and refuses a budget nothing meets with
 * the smallest peak it found. */
static void a_memory_budget_chooses_the_policy(void **state)
{
    (void)state;
    enum { LAYERS = 12, P = LAYERS * (48 * 48 + 48) + 48 * 4 };
    clrun_graph *g = deep_mlp(LAYERS);
    /* moving a byte dearer than any recomputation: the budget weighs no host offload (below) */
    clrun_context *ctx = context_at_rate("1e30");
    char why[1024] = "";
    uint64_t full = held_unconstrained(ctx, g);
    clrun_train *t;
    clrun_train_stats st;
    /* just under what keeping everything needs: a policy that repeats work */
    t = budget_trainer(ctx, g, full - 1, NULL, why, sizeof why);
    if (t == NULL)
        fail_msg("a budget of %llu: %s", (unsigned long long)(full - 1), why);
    assert_int_equal(clrun_train_stats_get(t, &st), CLRUN_OK);
    assert_string_not_equal(st.remat_policy, "none");
    assert_true(st.planned_peak_bytes <= full - 1);
    assert_true(st.remat.repeated_nodes > 0);
    char *chosen = strdup(st.remat_policy);
    assert_non_null(chosen);
    float *base = malloc(sizeof(float) * P), *other = malloc(sizeof(float) * P);
    assert_non_null(base);
    assert_non_null(other);
    /* its steps hold no more than it planned, all on the device */
    steps_then_params(t, g, other, &st);
    if (st.host_bytes != 0 || st.peak_bytes > st.planned_peak_bytes)
        fail_msg("%s: peak %llu (%llu in host memory), planned %llu", chosen,
                 (unsigned long long)st.peak_bytes, (unsigned long long)st.host_bytes,
                 (unsigned long long)st.planned_peak_bytes);
    params_after_remat(g, "tlsf", -1, CLRUN_OPTIMIZER_ADAM, NULL, base, NULL);
    params_after_remat(g, "tlsf", -1, CLRUN_OPTIMIZER_ADAM, chosen, other, NULL);
    assert_memory_equal(base, other, sizeof(float) * P);
    /* where sqrt_n fits, no more is recomputed than sqrt_n recomputes */
    clrun_train_stats sq;
    params_after_remat(g, "tlsf", -1, CLRUN_OPTIMIZER_ADAM, "sqrt_n", other, &sq);
    assert_true(st.remat.dropped <= sq.remat.dropped);
    free(base);
    free(other);
    free(chosen);
    /* below what any rewrite holds: refused at once, naming that least and its parts */
    assert_null(budget_trainer(ctx, g, 4096, NULL, why, sizeof why));
    if (strstr(why, "a memory budget of 4.0 KiB is below the least the step can hold whatever "
                    "is recomputed") == NULL || strstr(why, "the largest working set of one node") == NULL)
        fail_msg("'%s'", why);
    /* the policy given, which holds more than the budget on the device: the optimizer state
     * goes to host memory instead, and the parameters are the same bits */
    clrun_train *given = budget_trainer(ctx, g, full - 1, "none", why, sizeof why);
    if (given == NULL)
        fail_msg("none under a budget of %llu: %s", (unsigned long long)(full - 1), why);
    assert_int_equal(clrun_train_stats_get(given, &st), CLRUN_OK);
    assert_string_equal(st.remat_policy, "none");
    assert_true(st.host_bytes > 0 && st.planned_peak_bytes <= full - 1);
    /* what its steps hold on the device is within the budget: peak_bytes counts the state in
     * host memory too (host_bytes), which the budget does not */
    float *params = malloc(sizeof(float) * P);
    assert_non_null(params);
    steps_then_params(given, g, params, &st);
    free(params);
    if (st.peak_bytes - st.host_bytes > st.planned_peak_bytes)
        fail_msg("peak %llu, of which %llu in host memory; planned %llu, budget %llu",
                 (unsigned long long)st.peak_bytes, (unsigned long long)st.host_bytes,
                 (unsigned long long)st.planned_peak_bytes, (unsigned long long)(full - 1));
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

/* Where moving a byte costs next to nothing, a budget near the least any rewrite holds is met
 * by moving the activations to host memory after they are written and back before their
 * backward readers (per_tensor, every activation moved): the budget is met, the bytes moved
 * reported, and the parameters after the steps are those of the step without a budget, bit for
 * bit. Budgets rise by eighths from 4 KiB: those under the least any rewrite holds are refused
 * at once, and the first that fits is near that least (walking down from the unconstrained
 * step's instead prepares some 35 trainers under budgets that move less). */
static void a_budget_recomputation_cannot_meet_offloads_the_activations(void **state)
{
    (void)state;
    enum { LAYERS = 12, P = LAYERS * (48 * 48 + 48) + 48 * 4 };
    clrun_graph *g = deep_mlp(LAYERS);
    clrun_context *ctx = context_at_rate("1e-9");
    char why[1024] = "";
    uint64_t full = held_unconstrained(ctx, g), found = 0;
    for (uint64_t b = 4096; b < full && found == 0; b = b / 8 * 9) {
        clrun_train *t = budget_trainer(ctx, g, b, NULL, why, sizeof why);
        if (t == NULL && strstr(why, "below the least the step can hold") == NULL)
            fail_msg("a budget of %llu refused for another reason: %s", (unsigned long long)b, why);
        if (t == NULL)
            continue;
        clrun_train_stats st;
        assert_int_equal(clrun_train_stats_get(t, &st), CLRUN_OK);
        /* the first budget that fits: most of the activations moved */
        found = b;
        if (strncmp(st.remat_policy, "per_tensor:", 11) != 0 || st.exec.offloaded_tensors < LAYERS / 2)
            fail_msg("a budget of %llu: %s, %d moved", (unsigned long long)b, st.remat_policy,
                     (int)st.exec.offloaded_tensors);
        assert_true(st.planned_peak_bytes <= b);
        assert_int_equal(st.exec.offloaded_bytes, 2 * st.exec.host_bytes);
        assert_int_equal(st.remat.repeated_nodes, 0);
        clrun_train_destroy(t);
    }
    if (found == 0)
        fail_msg("no budget moved the activations (the last refusal: %s)", why);
    float *base = malloc(sizeof(float) * P), *other = malloc(sizeof(float) * P);
    assert_non_null(base);
    assert_non_null(other);
    clrun_train *plain = budget_trainer(ctx, g, 0, NULL, why, sizeof why);
    assert_non_null(plain);
    steps_then_params(plain, g, base, NULL);
    clrun_train *offloaded = budget_trainer(ctx, g, found, NULL, why, sizeof why);
    assert_non_null(offloaded);
    clrun_train_stats st;
    steps_then_params(offloaded, g, other, &st);
    assert_true(st.exec.offloaded_tensors >= LAYERS / 2); /* the policy's text went with it */
    assert_memory_equal(base, other, sizeof(float) * P);
    /* the copies on the kernels' queue, in order (CLRUN_OFFLOAD_OVERLAP=0), rather than on a
     * second queue beside them (the default above): the same bits */
    setenv("CLRUN_OFFLOAD_OVERLAP", "0", 1);
    clrun_context *in_order = context_at_rate("1e-9");
    unsetenv("CLRUN_OFFLOAD_OVERLAP");
    offloaded = budget_trainer(in_order, g, found, NULL, why, sizeof why);
    assert_non_null(offloaded);
    memset(other, 0, sizeof(float) * P);
    steps_then_params(offloaded, g, other, &st);
    assert_true(st.exec.offloaded_tensors >= LAYERS / 2);
    assert_memory_equal(base, other, sizeof(float) * P);
    clrun_context_destroy(in_order);
    free(base);
    free(other);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

/* Under a budget each activation is weighed by the device's rate (CLRUN_OFFLOAD_RATE, read when
 * a context is created): where moving a byte costs next to no arithmetic, the activations freed
 * go to host memory and back (no node repeated, the state still on the device); where it costs
 * more than any recomputation, they are recomputed (nothing moved). Either way the parameters
 * after the steps are those of the unconstrained step, bit for bit.
 * host_offload given as the policy, with no budget, gives them too; a name that only begins
 * like it is refused. */
static void a_budget_weighs_offload_against_recomputation(void **state)
{
    (void)state;
    enum { LAYERS = 12, P = LAYERS * (48 * 48 + 48) + 48 * 4 };
    clrun_graph *g = deep_mlp(LAYERS);
    char why[1024] = "";
    float *base = malloc(sizeof(float) * P), *other = malloc(sizeof(float) * P);
    assert_non_null(base);
    assert_non_null(other);
    clrun_context *ctx = context("tlsf");
    uint64_t full = held_unconstrained(ctx, g);
    clrun_train *t = budget_trainer(ctx, g, 0, NULL, why, sizeof why);
    assert_non_null(t);
    steps_then_params(t, g, base, NULL);
    clrun_context_destroy(ctx);
    static const char *const rates[2] = {"1e-9", "1e30"};
    for (int r = 0; r < 2; r++) {
        ctx = context_at_rate(rates[r]);
        t = budget_trainer(ctx, g, full - 1, NULL, why, sizeof why);
        if (t == NULL)
            fail_msg("rate %s, a budget of %llu: %s", rates[r], (unsigned long long)(full - 1), why);
        clrun_train_stats st;
        assert_int_equal(clrun_train_stats_get(t, &st), CLRUN_OK);
        assert_true(st.planned_peak_bytes <= full - 1);
        assert_int_equal(st.host_bytes, 0);
        if (strncmp(st.remat_policy, "per_tensor:", 11) != 0)
            fail_msg("rate %s: %s", rates[r], st.remat_policy);
        if (r == 0) {
            assert_int_equal(st.remat.repeated_nodes, 0);
            assert_true(st.exec.offloaded_tensors >= 1);
            assert_int_equal(st.exec.offloaded_bytes, 2 * st.exec.host_bytes);
        } else {
            assert_true(st.remat.repeated_nodes > 0);
            assert_int_equal(st.exec.offloaded_tensors, 0);
        }
        memset(other, 0, sizeof(float) * P);
        steps_then_params(t, g, other, &st);
        if (st.peak_bytes > st.planned_peak_bytes)
            fail_msg("rate %s: peak %llu, planned %llu", rates[r], (unsigned long long)st.peak_bytes,
                     (unsigned long long)st.planned_peak_bytes);
        assert_memory_equal(base, other, sizeof(float) * P);
        clrun_context_destroy(ctx);
    }
    ctx = context("tlsf");
    t = budget_trainer(ctx, g, 0, "host_offload", why, sizeof why);
    if (t == NULL)
        fail_msg("host_offload given: %s", why);
    clrun_train_stats st;
    assert_int_equal(clrun_train_stats_get(t, &st), CLRUN_OK);
    assert_string_equal(st.remat_policy, "host_offload");
    memset(other, 0, sizeof(float) * P);
    steps_then_params(t, g, other, &st); /* st.remat_policy went with the trainer */
    assert_true(st.exec.offloaded_tensors >= LAYERS);
    assert_memory_equal(base, other, sizeof(float) * P);
    assert_null(budget_trainer(ctx, g, 0, "host_offload:2", why, sizeof why));
    if (strstr(why, "unknown policy 'host_offload:2'") == NULL)
        fail_msg("'%s'", why);
    clrun_context_destroy(ctx);
    free(base);
    free(other);
    clrun_graph_destroy(g);
}

/* The deep MLP with each layer's activation squared before the next product (a = tanh(m),
 * h = a * a): the backward pass reads both a and h, and h costs a quarter of a FLOP a byte to
 * make again (from a) where a costs some 24 (its product, from the h before). */
static clrun_graph *squared_mlp(int layers)
{
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("squared", &g), CLRUN_OK);
    clrun_tensor_type tx = {CLRUN_F32, 2, {32, 48}}, tw = {CLRUN_F32, 2, {48, 48}};
    clrun_tensor_type tb = {CLRUN_F32, 1, {48}}, to = {CLRUN_F32, 2, {48, 4}};
    clrun_tensor_id h, w, b, m, a;
    assert_int_equal(clrun_graph_add_input(g, "x", &tx, false, &h), CLRUN_OK);
    for (int l = 0; l < layers; l++) {
        char wn[16], bn[16], mn[16], an[16], hn[16];
        snprintf(wn, sizeof wn, "w%d", l);
        snprintf(bn, sizeof bn, "b%d", l);
        snprintf(mn, sizeof mn, "m%d", l);
        snprintf(an, sizeof an, "a%d", l);
        snprintf(hn, sizeof hn, "h%d", l);
        assert_int_equal(clrun_graph_add_constant(g, wn, &tw, NULL, CLRUN_FILL_NORMAL, 0, 0.15,
                                                  10 + (uint64_t)l, &w), CLRUN_OK);
        assert_int_equal(clrun_graph_add_constant(g, bn, &tb, NULL, CLRUN_FILL_UNIFORM, -0.1, 0.1,
                                                  100 + (uint64_t)l, &b), CLRUN_OK);
        const char *mnames[] = {mn}, *anames[] = {an}, *hnames[] = {hn};
        assert_int_equal(clrun_graph_add_node(g, "matmul", (clrun_tensor_id[]){h, w, b}, 3, mnames,
                                              1, NULL, 0, &m), CLRUN_OK);
        assert_int_equal(clrun_graph_add_node(g, "tanh", &m, 1, anames, 1, NULL, 0, &a), CLRUN_OK);
        assert_int_equal(clrun_graph_add_node(g, "mul", (clrun_tensor_id[]){a, a}, 2, hnames, 1,
                                              NULL, 0, &h), CLRUN_OK);
    }
    clrun_tensor_id y;
    assert_int_equal(clrun_graph_add_constant(g, "wo", &to, NULL, CLRUN_FILL_NORMAL, 0, 0.15, 9, &w),
                     CLRUN_OK);
    const char *yn[] = {"pred"};
    assert_int_equal(clrun_graph_add_node(g, "matmul", (clrun_tensor_id[]){h, w}, 2, yn, 1, NULL, 0, &y),
                     CLRUN_OK);
    assert_int_equal(clrun_graph_mark_output(g, y), CLRUN_OK);
    return g;
}

/* per_tensor chooses each activation's way by what freeing a byte of it costs at the device's
 * rate: at 5 FLOPs a byte moved, the squares (a quarter of a FLOP a byte) are recomputed and the
 * tanh outputs (some 24) moved to host memory and back; a square whose tanh output moves is
 * moved too (its repeat would bring that back early). per_tensor:M takes the M cheapest: the
 * squares first, which is what the least budget below the plain step's takes. Every step's
 * parameters are the plain step's bits; a count that is not one is refused by name. */
static void each_activation_goes_its_cheaper_way(void **state)
{
    (void)state;
    enum { LAYERS = 6, P = LAYERS * (48 * 48 + 48) + 48 * 4 };
    clrun_graph *g = squared_mlp(LAYERS);
    clrun_context *ctx = context_at_rate("5");
    char why[1024] = "";
    float *base = malloc(sizeof(float) * P), *other = malloc(sizeof(float) * P);
    assert_non_null(base);
    assert_non_null(other);
    clrun_train *t = budget_trainer(ctx, g, 0, "none", why, sizeof why);
    if (t == NULL)
        fail_msg("%s", why);
    steps_then_params(t, g, base, NULL);
    clrun_train_stats st;
    /* all of them: every tanh output moves, and with it its square */
    t = budget_trainer(ctx, g, 0, "per_tensor", why, sizeof why);
    if (t == NULL)
        fail_msg("per_tensor: %s", why);
    steps_then_params(t, g, other, &st);
    assert_memory_equal(base, other, sizeof(float) * P);
    if (st.remat.dropped != 0 || st.exec.offloaded_tensors < 2 * LAYERS - 1)
        fail_msg("per_tensor: %d recomputed, %d moved", (int)st.remat.dropped,
                 (int)st.exec.offloaded_tensors);
    /* the squares and one tanh output: the squares recomputed, but the one that reads it */
    char mix[32];
    snprintf(mix, sizeof mix, "per_tensor:%d", LAYERS + 1);
    t = budget_trainer(ctx, g, 0, mix, why, sizeof why);
    if (t == NULL)
        fail_msg("%s: %s", mix, why);
    steps_then_params(t, g, other, &st);
    assert_memory_equal(base, other, sizeof(float) * P);
    if (st.remat.dropped != LAYERS - 1 || st.exec.offloaded_tensors != 2)
        fail_msg("%s: %d recomputed, %d moved", mix, (int)st.remat.dropped,
                 (int)st.exec.offloaded_tensors);
    assert_int_equal(st.remat.repeated_nodes, st.remat.dropped); /* a square from its tanh */
    /* the two cheapest: two squares, nothing moved */
    t = budget_trainer(ctx, g, 0, "per_tensor:2", why, sizeof why);
    if (t == NULL)
        fail_msg("per_tensor:2: %s", why);
    steps_then_params(t, g, other, &st);
    assert_memory_equal(base, other, sizeof(float) * P);
    assert_int_equal(st.remat.dropped, 2);
    assert_int_equal(st.exec.offloaded_tensors, 0);
    /* just under the plain step: the fewest, cheapest first */
    uint64_t full = held_unconstrained(ctx, g);
    t = budget_trainer(ctx, g, full - 1, NULL, why, sizeof why);
    if (t == NULL)
        fail_msg("a budget of %llu: %s", (unsigned long long)(full - 1), why);
    assert_int_equal(clrun_train_stats_get(t, &st), CLRUN_OK);
    if (strncmp(st.remat_policy, "per_tensor:", 11) != 0 || st.remat.dropped < 1 ||
        st.exec.offloaded_tensors != 0 || st.planned_peak_bytes > full - 1)
        fail_msg("%s: %d recomputed, %d moved, planned %llu", st.remat_policy,
                 (int)st.remat.dropped, (int)st.exec.offloaded_tensors,
                 (unsigned long long)st.planned_peak_bytes);
    steps_then_params(t, g, other, &st);
    assert_memory_equal(base, other, sizeof(float) * P);
    /* in planned mode and under the pool, fused and not, with SGD too: the plain step's bits
     * (the rate measured here: whatever each tensor's way, the bits do not change) */
    static const char *const allocators[] = {"tlsf", "planned"};
    static const clrun_optimizer_kind kinds[] = {CLRUN_OPTIMIZER_ADAM, CLRUN_OPTIMIZER_SGD};
    for (size_t k = 0; k < 2; k++) {
        params_after_remat(g, "tlsf", -1, kinds[k], NULL, base, NULL);
        for (size_t a = 0; a < 2; a++)
            for (int fusion = -1; fusion <= 1; fusion += 2) {
                memset(other, 0, sizeof(float) * P);
                params_after_remat(g, allocators[a], fusion, kinds[k], mix, other, NULL);
                if (memcmp(base, other, sizeof(float) * P) != 0)
                    fail_msg("%s, %s, fusion %d, optimizer %d: other parameters", mix,
                             allocators[a], fusion, (int)kinds[k]);
            }
    }
    static const char *const bad[] = {"per_tensor:0", "per_tensor:x", "per_tensor:", "per_tensors"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_null(budget_trainer(ctx, g, 0, bad[i], why, sizeof why));
        if (strstr(why, bad[i]) == NULL)
            fail_msg("%s: '%s'", bad[i], why);
    }
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
    free(base);
    free(other);
}

/* Under a budget the step runs in planned mode, its layout fixed when it is prepared, and the
 * evaluation's arena lies in the step's (the pool holds one arena): steps and evaluations in
 * turn give the losses of the trainer without a budget, bit for bit. */
static void a_budget_runs_the_step_planned(void **state)
{
    (void)state;
    enum { ROUNDS = 4 };
    clrun_graph *g = deep_mlp(6);
    clrun_context *ctx = context("tlsf");
    char why[1024] = "";
    clrun_train *t = budget_trainer(ctx, g, UINT64_C(1) << 30, NULL, why, sizeof why);
    if (t == NULL)
        fail_msg("%s", why);
    clrun_train_stats st;
    assert_int_equal(clrun_train_stats_get(t, &st), CLRUN_OK);
    assert_string_equal(st.exec.mode, "planned");
    assert_true(st.exec.arena_bytes > 0 && st.exec.arena_bytes < st.planned_peak_bytes);
    clrun_memory_stats m;
    assert_int_equal(clrun_memory_stats_get(ctx, &m), CLRUN_OK);
    assert_int_equal(m.raw, st.exec.arena_bytes); /* the evaluation's is inside */
    double planned[2 * ROUNDS], plain[2 * ROUNDS];
    run_rounds(t, g, ROUNDS, 60, 70, true, planned);
    clrun_train_destroy(t);
    t = budget_trainer(ctx, g, 0, NULL, why, sizeof why);
    assert_non_null(t);
    assert_int_equal(clrun_train_stats_get(t, &st), CLRUN_OK);
    assert_string_not_equal(st.exec.mode, "planned");
    run_rounds(t, g, ROUNDS, 60, 70, true, plain);
    assert_memory_equal(planned, plain, sizeof planned);
    clrun_train_destroy(t);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

/* A context whose pool's limit is what the deep MLP's step needs less one byte: the trainer
 * fits the step in what the limit leaves (a policy that recomputes), holding what the pool
 * reserves to the byte; its steps run within the limit, and the parameters are those of the
 * unconstrained step, bit for bit. At half, the parameters and optimizer state move to host
 * memory, with the same parameters after the steps. A limit below what any rewrite holds is
 * refused at creation, naming that least. */
static void the_pool_limit_is_a_budget(void **state)
{
    (void)state;
    enum { LAYERS = 12, P = LAYERS * (48 * 48 + 48) + 48 * 4 };
    clrun_graph *g = deep_mlp(LAYERS);
    clrun_context *ctx = context("tlsf");
    uint64_t full = held_unconstrained(ctx, g);
    clrun_train *t;
    clrun_train_stats st;
    clrun_context_destroy(ctx);

    clrun_context_options o;
    clrun_context_options_init(&o);
    o.allocator = "tlsf";
    o.pool_limit = full - 1;
    assert_int_equal(clrun_context_create(&o, &ctx), CLRUN_OK);
    t = trainer_remat(ctx, g, CLRUN_OPTIMIZER_ADAM, -1, NULL);
    assert_int_equal(clrun_train_stats_get(t, &st), CLRUN_OK);
    assert_string_not_equal(st.remat_policy, "none");
    assert_true(st.planned_peak_bytes > 0 && st.planned_peak_bytes <= full - 1);
    clrun_memory_stats m;
    assert_int_equal(clrun_memory_stats_get(ctx, &m), CLRUN_OK);
    assert_int_equal(m.reserved, st.planned_peak_bytes); /* to the byte, as the pool counts */
    float *base = malloc(sizeof(float) * P), *other = malloc(sizeof(float) * P);
    assert_non_null(base);
    assert_non_null(other);
    steps_then_params(t, g, other, &st);
    assert_int_equal(clrun_memory_stats_get(ctx, &m), CLRUN_OK);
    assert_true(m.reserved_peak <= full - 1);
    params_after_remat(g, "tlsf", -1, CLRUN_OPTIMIZER_ADAM, NULL, base, NULL);
    assert_memory_equal(base, other, sizeof(float) * P);
    clrun_context_destroy(ctx);

    /* half: only with the parameters and optimizer state in host memory */
    o.pool_limit = full / 2;
    assert_int_equal(clrun_context_create(&o, &ctx), CLRUN_OK);
    t = trainer_remat(ctx, g, CLRUN_OPTIMIZER_ADAM, -1, NULL);
    assert_int_equal(clrun_train_stats_get(t, &st), CLRUN_OK);
    assert_true(st.host_bytes >= st.state_bytes);
    assert_true(st.planned_peak_bytes <= full / 2);
    assert_int_equal(clrun_memory_stats_get(ctx, &m), CLRUN_OK);
    assert_int_equal(m.reserved, st.planned_peak_bytes);
    assert_int_equal(m.host, st.host_bytes);
    steps_then_params(t, g, other, NULL);
    assert_int_equal(clrun_memory_stats_get(ctx, &m), CLRUN_OK);
    assert_true(m.reserved_peak <= full / 2);
    assert_memory_equal(base, other, sizeof(float) * P);
    free(base);
    free(other);
    clrun_context_destroy(ctx);

    o.pool_limit = 16 << 10;
    assert_int_equal(clrun_context_create(&o, &ctx), CLRUN_OK);
    clrun_train_options to;
    clrun_train_options_init(&to);
    to.graph.loss = CLRUN_LOSS_MSE;
    to.graph.loss_tensor = "pred";
    assert_int_equal(clrun_train_create(ctx, g, &to, &t), CLRUN_ERROR_OUT_OF_MEMORY);
    assert_null(t);
    if (strstr(clrun_last_error(ctx), "the pool's limit of 16.0 KiB") == NULL ||
        strstr(clrun_last_error(ctx), "is below the least the step can hold") == NULL)
        fail_msg("'%s'", clrun_last_error(ctx));
    assert_int_equal(clrun_memory_stats_get(ctx, &m), CLRUN_OK);
    assert_int_equal(m.in_use, 0); /* nothing kept of the refused trainer */
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

/* A saved state resumed gives the same next loss and parameters, bit for bit; a state of another
 * model is refused naming the tensor, and changes nothing. */
static void saved_state_resumes_bit_for_bit(void **state)
{
    (void)state;
    char path[4200];
    snprintf(path, sizeof path, "%s/state.bin", getenv("CLRUN_CACHE_DIR"));
    clrun_graph *g = mlp();
    clrun_context *ctx = context(NULL);
    clrun_train *a = trainer(ctx, g, CLRUN_OPTIMIZER_ADAM, 0);
    for (int s = 0; s < 5; s++)
        step(a, 60 + (uint64_t)s);
    assert_int_equal(clrun_train_save(a, path), CLRUN_OK);
    double next_a = step(a, 99);
    clrun_train *b = trainer(ctx, g, CLRUN_OPTIMIZER_ADAM, 0);
    assert_int_equal(clrun_train_load(b, path), CLRUN_OK);
    double next_b = step(b, 99);
    assert_memory_equal(&next_a, &next_b, sizeof next_a);
    float pa[D * H], pb[D * H];
    assert_int_equal(clrun_train_read_param(a, 0, pa, sizeof pa), CLRUN_OK);
    assert_int_equal(clrun_train_read_param(b, 0, pb, sizeof pb), CLRUN_OK);
    assert_memory_equal(pa, pb, sizeof pa);
    /* another optimizer's state, and a damaged file */
    clrun_train *c = trainer(ctx, g, CLRUN_OPTIMIZER_SGD, 0);
    assert_int_equal(clrun_train_load(c, path), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clrun_last_error(ctx), "optimizer adam"));
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    fseek(f, 40, SEEK_SET);
    fputc(0x5a, f);
    fclose(f);
    assert_int_equal(clrun_train_load(b, path), CLRUN_ERROR_PARSE);
    assert_int_equal(clrun_train_read_param(b, 0, pa, sizeof pa), CLRUN_OK);
    assert_memory_equal(pa, pb, sizeof pa); /* unchanged */
    remove(path);
    clrun_train_destroy(a);
    clrun_train_destroy(b);
    clrun_train_destroy(c);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

static void expect_refusal(const clrun_graph *g, clrun_loss_kind loss, const char *tensor,
                           const char *const *params, int32_t count, const char *says)
{
    clrun_context *ctx = context(NULL);
    clrun_train_options o;
    clrun_train_options_init(&o);
    o.graph.loss = loss;
    o.graph.loss_tensor = tensor;
    o.graph.params = params;
    o.graph.param_count = count;
    clrun_train *t = (clrun_train *)1;
    assert_int_not_equal(clrun_train_create(ctx, g, &o, &t), CLRUN_OK);
    assert_null(t);
    if (strstr(clrun_last_error(ctx), says) == NULL) {
        fprintf(stderr, "expected '%s' in: %s\n", says, clrun_last_error(ctx));
        fail();
    }
    clrun_context_destroy(ctx);
}

static void bad_input_is_refused_by_name(void **state)
{
    (void)state;
    clrun_graph *g = mlp();
    expect_refusal(g, CLRUN_LOSS_SCALAR, "pred", NULL, 0, "pred is f32[6, 3]");
    expect_refusal(g, CLRUN_LOSS_MSE, "nothing", NULL, 0, "no tensor 'nothing'");
    expect_refusal(g, CLRUN_LOSS_MSE, "pred", (const char *const[]){"x"}, 1, "parameter x is no f32 constant");
    expect_refusal(g, CLRUN_LOSS_MSE, "x", NULL, 0, "depends on no weight");
    /* an op without a gradient rule, refused when the step is built */
    clrun_tensor_id pred = clrun_graph_find(g, "pred"), c;
    const char *cn[] = {"cum"};
    clrun_attr axis = {.name = "axis", .kind = CLRUN_ATTR_INT, .i = 1};
    assert_int_equal(clrun_graph_add_node(g, "cumsum", &pred, 1, cn, 1, &axis, 1, &c), CLRUN_OK);
    expect_refusal(g, CLRUN_LOSS_MSE, "cum", NULL, 0, "op 'cumsum' (node writing cum) has no gradient rule");
    clrun_graph_destroy(g);
}

int main(void)
{
    char cache[4096];
    clrun_test_device_environment(cache, sizeof cache);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(mlp_gradients_match_reference),
        cmocka_unit_test(sgd_steps_follow_the_reference),
        cmocka_unit_test(state_is_updated_in_place),
        cmocka_unit_test(every_allocator_gives_the_same_bits),
        cmocka_unit_test(a_reduce_hook_replaces_the_gradients),
        cmocka_unit_test(buckets_reduce_as_the_backward_pass_goes),
        cmocka_unit_test(buckets_in_one_region_keep_the_bits),
        cmocka_unit_test(the_parts_of_a_split_step_are_the_step),
        cmocka_unit_test(every_remat_policy_gives_the_same_bits),
        cmocka_unit_test(the_step_chooses_recomputation_where_it_pays),
        cmocka_unit_test(sqrt_n_keeps_the_last_segment),
        cmocka_unit_test(cut_segments_give_the_same_bits),
        cmocka_unit_test(a_memory_budget_chooses_the_policy),
        cmocka_unit_test(a_budget_recomputation_cannot_meet_offloads_the_activations),
        cmocka_unit_test(a_budget_weighs_offload_against_recomputation),
        cmocka_unit_test(each_activation_goes_its_cheaper_way),
        cmocka_unit_test(a_budget_runs_the_step_planned),
        cmocka_unit_test(the_pool_limit_is_a_budget),
        cmocka_unit_test(saved_state_resumes_bit_for_bit),
        cmocka_unit_test(donation_saves_the_state_bytes),
        cmocka_unit_test(nan_loss_names_the_step),
        cmocka_unit_test(bad_input_is_refused_by_name),
    };
    CLRUN_TEST_FILTERS_FROM_ENVIRONMENT();
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    clrun_test_remove_dir(cache);
    return failed;
}
