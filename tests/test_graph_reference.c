/* The double-precision graph reference (tests/graph_reference.h) against the device: every op it
 * supports, alone with random shapes and attributes, and a few chains (an MLP with softmax, a
 * small CNN, layernorm into gelu), run by the executor on POCL and compared within 1e-4 of each
 * output's largest magnitude (integers and bools exactly); its finite differences against
 * gradients known in closed form; and its refusals (an op it does not know, a bad index). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include <clrun/clrun.h>

#include "device_test.h"
#include "op_args.h"
#include "graph/op.h"
#include "graph_case.h"
#include "graph_reference.h"

static char cache_root[512];
static uint64_t base_seed;
static clrun_context *ctx;

/* Ops compared on the device so far (every_supported_op_was_compared checks the list). */
static const char *covered[256];
static int covered_count;

static void cover(const char *op)
{
    for (int i = 0; i < covered_count; i++)
        if (strcmp(covered[i], op) == 0)
            return;
    if (covered_count < 256)
        covered[covered_count++] = op;
}


/* ---- attributes -------------------------------------------------------------------------- */

/* ---- a case: a graph with the value ranges of its inputs --------------------------------- */

typedef struct input_range {
    double lo, hi;
    double step; /* > 0: multiples of step from lo (ties for comparisons and argmax, halves
                    for round); integers always step 1 */
} input_range;

typedef struct gcase {
    clrun_graph *graph;
    char name[96];
    uint64_t seed;          /* of the shapes, attributes and input values */
    uint64_t rng;
    input_range ranges[32]; /* per graph input */
    int inputs;
    int names;              /* tensors made: names them */
} gcase;

static gcase begin(const char *name, uint64_t seed)
{
    gcase c = {.seed = seed, .rng = seed};
    snprintf(c.name, sizeof c.name, "%s", name);
    assert_int_equal(clrun_graph_create("case", &c.graph), CLRUN_OK);
    return c;
}

static int32_t input_ranged(gcase *c, clrun_tensor_type t, double lo, double hi, double step)
{
    char name[16];
    snprintf(name, sizeof name, "in%d", c->inputs);
    int32_t id;
    assert_int_equal(clrun_graph_add_input(c->graph, name, &t, false, &id), CLRUN_OK);
    c->ranges[c->inputs++] = (input_range){lo, hi, step};
    return id;
}

static int32_t input(gcase *c, clrun_tensor_type t, double lo, double hi)
{
    return input_ranged(c, t, lo, hi, t.dtype != CLRUN_F32 && t.dtype != CLRUN_F64 ? 1 : 0);
}

static int32_t constant(gcase *c, clrun_tensor_type t, clrun_fill fill, double a, double b)
{
    char name[16];
    snprintf(name, sizeof name, "k%d", c->names++);
    int32_t id;
    assert_int_equal(clrun_graph_add_constant(c->graph, name, &t, NULL, fill, a, b, rng_next(&c->rng), &id),
                     CLRUN_OK);
    return id;
}

static int32_t node(gcase *c, const char *op, const int32_t *in, int n, const clrun_attr *attrs,
                    int attr_count)
{
    char name[16];
    snprintf(name, sizeof name, "t%d", c->names++);
    const char *names[] = {name};
    int32_t out = -1;
    if (clrun_graph_add_node(c->graph, op, in, n, names, 1, attrs, attr_count, &out) != CLRUN_OK)
        fail_msg("%s (seed %llu): %s", c->name, (unsigned long long)c->seed,
                 clrun_graph_last_error(c->graph));
    cover(op);
    return out;
}

static void output(gcase *c, int32_t t) { assert_int_equal(clrun_graph_mark_output(c->graph, t), CLRUN_OK); }

/* One node of one op, its output the graph's. */
static void single(gcase *c, const char *op, const int32_t *in, int n, const clrun_attr *attrs,
                   int attr_count)
{
    output(c, node(c, op, in, n, attrs, attr_count));
}

/* ---- running a case ---------------------------------------------------------------------- */


/* Runs the case's graph on the device and through the reference, compares every output, and
 * destroys the graph. */
static void check(gcase *c)
{
    clrun_graph *g = c->graph;
    assert_int_equal(clrun_graph_validate(g), CLRUN_OK);
    const clrun_tensor_id *in_ids, *out_ids;
    int32_t nin = clrun_graph_inputs(g, &in_ids), nout = clrun_graph_outputs(g, &out_ids);
    double *host[32] = {0};
    clrun_buffer buffers[32];
    for (int32_t i = 0; i < nin; i++) {
        const clrun_tensor_type *t = clrun_graph_tensor_type(g, in_ids[i]);
        uint64_t n = clrun_tensor_elements(t), bytes = clrun_tensor_bytes(t);
        unsigned char *raw = malloc(bytes);
        host[i] = malloc(n * sizeof(double));
        assert_non_null(raw);
        assert_non_null(host[i]);
        input_range r = c->ranges[i];
        for (uint64_t k = 0; k < n; k++) {
            double v = r.step > 0 ? r.lo + r.step * (double)between(&c->rng, 0, (int64_t)((r.hi - r.lo) / r.step))
                                  : uniform(&c->rng, r.lo, r.hi);
            assert_true(value_store(t->dtype, v, raw + k * clrun_dtype_size(t->dtype)));
            host[i][k] = value_load(t->dtype, raw + k * clrun_dtype_size(t->dtype)); /* as fed */
        }
        assert_int_equal(clrun_alloc(ctx, bytes, &buffers[i]), CLRUN_OK);
        assert_int_equal(clrun_buffer_write(ctx, &buffers[i], raw), CLRUN_OK);
        free(raw);
    }
    clrun_exec *exec = NULL;
    if (clrun_exec_create(ctx, g, NULL, &exec) != CLRUN_OK)
        fail_msg("%s (seed %llu): %s", c->name, (unsigned long long)c->seed, clrun_last_error(ctx));
    if (clrun_exec_run(exec, buffers, nin) != CLRUN_OK)
        fail_msg("%s (seed %llu): %s", c->name, (unsigned long long)c->seed, clrun_last_error(ctx));
    double **ref = NULL;
    char err[512];
    if (gref_eval(g, (const double *const *)host, NULL, &ref, err, sizeof err) != 0)
        fail_msg("%s (seed %llu): %s", c->name, (unsigned long long)c->seed, err);
    for (int32_t o = 0; o < nout; o++) {
        const clrun_tensor_type *t = clrun_graph_tensor_type(g, out_ids[o]);
        uint64_t n = clrun_tensor_elements(t), bytes = clrun_tensor_bytes(t);
        unsigned char *raw = malloc(bytes);
        assert_non_null(raw);
        assert_int_equal(clrun_exec_read_output(exec, o, raw, bytes), CLRUN_OK);
        const double *r = ref[out_ids[o]];
        double magnitude = 0;
        for (uint64_t k = 0; k < n; k++)
            magnitude = isfinite(r[k]) ? fmax(magnitude, fabs(r[k])) : magnitude;
        bool exact = t->dtype != CLRUN_F32 && t->dtype != CLRUN_F64;
        for (uint64_t k = 0; k < n; k++) {
            double d = value_load(t->dtype, raw + k * clrun_dtype_size(t->dtype));
            /* infinities and NaN where the reference has them, else within the tolerance */
            bool ok = exact || !isfinite(r[k]) ? d == r[k] || (isnan(d) && isnan(r[k]))
                                               : fabs(d - r[k]) <= 1e-4 * magnitude;
            if (!ok)
                fail_msg("%s (seed %llu): output '%s' element %llu: device %.9g, reference %.9g "
                         "(largest magnitude %.3g)", c->name, (unsigned long long)c->seed,
                         clrun_graph_tensor_name(g, out_ids[o]), (unsigned long long)k, d, r[k],
                         magnitude);
        }
        free(raw);
    }
    gref_free(g, ref);
    clrun_exec_destroy(exec);
    for (int32_t i = 0; i < nin; i++) {
        clrun_free(ctx, &buffers[i]);
        free(host[i]);
    }
    clrun_graph_destroy(g);
    c->graph = NULL;
}

/* ---- random shapes ----------------------------------------------------------------------- */


static uint64_t seed_of(int op, int round) { return base_seed * 1000003u + (uint64_t)op * 101u + (uint64_t)round; }

/* ---- elementwise ------------------------------------------------------------------------- */

typedef struct unary_spec {
    const char *op;
    double lo, hi;
} unary_spec;

static void unary_float_ops_match(void **state)
{
    (void)state;
    static const unary_spec ops[] = {
        {"neg", -3, 3}, {"abs", -3, 3}, {"relu", -3, 3}, {"sign", -3, 3}, {"gelu", -3, 3},
        {"gelu_erf", -4, 4}, {"sigmoid", -6, 6}, {"tanh", -3, 3}, {"exp", -3, 3},
        {"log", 0.05, 5}, {"sqrt", 0.05, 5}, {"rsqrt", 0.1, 5}, {"reciprocal", 0.25, 4},
        {"sin", -4, 4}, {"cos", -4, 4}, {"erf", -3, 3}, {"softplus", -5, 5}, {"softsign", -5, 5},
        {"hard_sigmoid", -5, 5}, {"hard_swish", -5, 5}, {"leaky_relu", -3, 3}, {"elu", -3, 3},
        {"celu", -3, 3}, {"selu", -3, 3}, {"clip", -3, 3}, {"scale", -3, 3}, {"copy", -3, 3},
        {"floor", -5, 5}, {"ceil", -5, 5}, {"round", -5, 5},
    };
    for (int k = 0; k < (int)(sizeof ops / sizeof ops[0]); k++)
        for (int round = 0; round < 2; round++) {
            char name[64];
            snprintf(name, sizeof name, "unary %s", ops[k].op);
            gcase c = begin(name, seed_of(k, round));
            /* at least 4 elements: the largest output is not near a zero where an f32 result
             * loses relative precision (gelu's 1 + tanh near x = -3) */
            clrun_tensor_type t = random_type(&c.rng, CLRUN_F32, 1, 4, 5);
            t.shape[t.rank - 1] = t.shape[t.rank - 1] < 4 ? 4 : t.shape[t.rank - 1];
            bool halves = !strcmp(ops[k].op, "round") || !strcmp(ops[k].op, "floor") ||
                          !strcmp(ops[k].op, "ceil"); /* ties: round goes half to even */
            int32_t x = input_ranged(&c, t, ops[k].lo, ops[k].hi, halves ? 0.5 : 0);
            clrun_attr attrs[2];
            int n = 0;
            const char *op = ops[k].op;
            if (!strcmp(op, "hard_sigmoid") || !strcmp(op, "scale")) {
                attrs[n++] = attr_float("alpha", uniform(&c.rng, -1, 1));
                if (pick(&c.rng, 2))
                    attrs[n++] = attr_float("beta", uniform(&c.rng, -0.5, 0.5));
            } else if (!strcmp(op, "leaky_relu") || !strcmp(op, "elu") || !strcmp(op, "celu")) {
                if (pick(&c.rng, 2))
                    attrs[n++] = attr_float("alpha", uniform(&c.rng, 0.1, 2));
            } else if (!strcmp(op, "selu") && pick(&c.rng, 2)) {
                attrs[n++] = attr_float("alpha", uniform(&c.rng, 0.5, 2));
                attrs[n++] = attr_float("gamma", uniform(&c.rng, 0.5, 2));
            } else if (!strcmp(op, "clip")) {
                if (pick(&c.rng, 3))
                    attrs[n++] = attr_float("min", uniform(&c.rng, -2, 0));
                if (pick(&c.rng, 3))
                    attrs[n++] = attr_float("max", uniform(&c.rng, 0, 2));
            }
            single(&c, op, &x, 1, attrs, n);
            check(&c);
        }
}

static void integer_and_bool_unary_ops_match(void **state)
{
    (void)state;
    static const char *const ops[] = {"neg", "abs", "relu", "sign", "clip", "copy"};
    static const clrun_dtype dtypes[] = {CLRUN_I32, CLRUN_I64};
    for (int k = 0; k < 6; k++)
        for (int d = 0; d < 2; d++) {
            gcase c = begin(ops[k], seed_of(k, d));
            int32_t x = input(&c, random_type(&c.rng, dtypes[d], 1, 3, 5), -50, 50);
            clrun_attr attrs[2] = {attr_float("min", -20.5), attr_float("max", 30.5)};
            single(&c, ops[k], &x, 1, attrs, !strcmp(ops[k], "clip") ? 2 : 0);
            check(&c);
        }
    gcase c = begin("not", seed_of(7, 0));
    int32_t x = input(&c, random_type(&c.rng, CLRUN_BOOL, 1, 3, 5), 0, 1);
    single(&c, "not", &x, 1, NULL, 0);
    check(&c);
}

static void cast_matches(void **state)
{
    (void)state;
    static const struct { clrun_dtype from, to; double lo, hi; } casts[] = {
        {CLRUN_F32, CLRUN_I32, -100, 100}, {CLRUN_F32, CLRUN_I64, -100, 100},
        {CLRUN_F32, CLRUN_BOOL, -1, 1},    {CLRUN_I32, CLRUN_F32, -1000, 1000},
        {CLRUN_I32, CLRUN_I64, -1000, 1000}, {CLRUN_I64, CLRUN_I32, -1e10, 1e10},
        {CLRUN_BOOL, CLRUN_F32, 0, 1},     {CLRUN_BOOL, CLRUN_I32, 0, 1},
        {CLRUN_I32, CLRUN_BOOL, -2, 2},    {CLRUN_F32, CLRUN_F32, -3, 3},
    };
    for (int k = 0; k < (int)(sizeof casts / sizeof casts[0]); k++) {
        gcase c = begin("cast", seed_of(k, 0));
        int32_t x = input(&c, random_type(&c.rng, casts[k].from, 0, 3, 6), casts[k].lo, casts[k].hi);
        clrun_attr to = attr_int("to", casts[k].to);
        single(&c, "cast", &x, 1, &to, 1);
        check(&c);
    }
}

typedef struct binary_spec {
    const char *op;
    clrun_dtype dtype;
    double alo, ahi, blo, bhi;
    bool integral;
} binary_spec;

static void binary_ops_broadcast_and_match(void **state)
{
    (void)state;
    static const binary_spec ops[] = {
        {"add", CLRUN_F32, -3, 3, -3, 3, false},   {"sub", CLRUN_F32, -3, 3, -3, 3, false},
        {"mul", CLRUN_F32, -3, 3, -3, 3, false},   {"div", CLRUN_F32, -3, 3, 0.5, 2, false},
        {"pow", CLRUN_F32, 0.2, 3, -2, 2, false},  {"maximum", CLRUN_F32, -3, 3, -3, 3, false},
        {"minimum", CLRUN_F32, -3, 3, -3, 3, false}, {"prelu", CLRUN_F32, -3, 3, 0, 1, false},
        {"mod", CLRUN_F32, -5, 5, 0.5, 2, false},
        {"add", CLRUN_I32, -100, 100, -100, 100, true}, {"sub", CLRUN_I64, -100, 100, -100, 100, true},
        {"mul", CLRUN_I32, -100, 100, -100, 100, true}, {"div", CLRUN_I32, -50, 50, -4, 4, true},
        {"pow", CLRUN_I32, -3, 3, -1, 5, true},   {"maximum", CLRUN_I64, -9, 9, -9, 9, true},
        {"minimum", CLRUN_I32, -9, 9, -9, 9, true}, {"mod", CLRUN_I32, -20, 20, -4, 4, true},
        {"equal", CLRUN_F32, -2, 2, -2, 2, true}, {"less", CLRUN_F32, -2, 2, -2, 2, true},
        {"greater", CLRUN_I32, -2, 2, -2, 2, true}, {"less_equal", CLRUN_F32, -2, 2, -2, 2, true},
        {"greater_equal", CLRUN_I64, -2, 2, -2, 2, true}, {"equal", CLRUN_BOOL, 0, 1, 0, 1, true},
        {"and", CLRUN_BOOL, 0, 1, 0, 1, true},    {"or", CLRUN_BOOL, 0, 1, 0, 1, true},
        {"xor", CLRUN_BOOL, 0, 1, 0, 1, true},
    };
    for (int k = 0; k < (int)(sizeof ops / sizeof ops[0]); k++)
        for (int round = 0; round < 3; round++) {
            char name[64];
            snprintf(name, sizeof name, "binary %s %s", ops[k].op, clrun_dtype_name(ops[k].dtype));
            gcase c = begin(name, seed_of(k, round));
            clrun_tensor_type out = random_type(&c.rng, ops[k].dtype, 0, 4, 4);
            if (round == 0) /* one large enough to meet every case of the op */
                out = (clrun_tensor_type){ops[k].dtype, 2, {between(&c.rng, 5, 8), between(&c.rng, 5, 8)}};
            clrun_tensor_type ta = round == 0 ? out : broadcastable(&c.rng, &out, ops[k].dtype);
            clrun_tensor_type tb = broadcastable(&c.rng, &out, ops[k].dtype);
            int32_t in[2] = {input_ranged(&c, ta, ops[k].alo, ops[k].ahi, ops[k].integral ? 1 : 0),
                             input_ranged(&c, tb, ops[k].blo, ops[k].bhi, ops[k].integral ? 1 : 0)};
            clrun_attr fmod_attr = attr_int("fmod", round == 1);
            single(&c, ops[k].op, in, 2, &fmod_attr, !strcmp(ops[k].op, "mod"));
            check(&c);
        }
}

static void where_broadcasts_its_three_inputs(void **state)
{
    (void)state;
    for (int round = 0; round < 3; round++) {
        gcase c = begin("where", seed_of(0, round));
        clrun_tensor_type out = random_type(&c.rng, CLRUN_F32, 1, 4, 4);
        int32_t in[3] = {input(&c, broadcastable(&c.rng, &out, CLRUN_BOOL), 0, 1),
                         input(&c, broadcastable(&c.rng, &out, CLRUN_F32), -3, 3),
                         input(&c, broadcastable(&c.rng, &out, CLRUN_F32), -3, 3)};
        single(&c, "where", in, 3, NULL, 0);
        check(&c);
    }
}

/* ---- matmul ------------------------------------------------------------------------------ */

static void matmul_matches_with_transposes_bias_and_batches(void **state)
{
    (void)state;
    for (int round = 0; round < 8; round++) {
        gcase c = begin("matmul", seed_of(0, round));
        int64_t M = between(&c.rng, 1, 9), K = between(&c.rng, 1, 12), N = between(&c.rng, 1, 9);
        bool ta = pick(&c.rng, 2), tb = pick(&c.rng, 2);
        clrun_tensor_type batch = random_type(&c.rng, CLRUN_F32, 0, 2, 3);
        clrun_tensor_type a = broadcastable(&c.rng, &batch, CLRUN_F32);
        clrun_tensor_type b = broadcastable(&c.rng, &batch, CLRUN_F32);
        a.shape[a.rank++] = ta ? K : M, a.shape[a.rank++] = ta ? M : K;
        b.shape[b.rank++] = tb ? N : K, b.shape[b.rank++] = tb ? K : N;
        int32_t in[3] = {input(&c, a, -1, 1), -1, -1};
        in[1] = pick(&c.rng, 2) ? input(&c, b, -1, 1) : constant(&c, b, CLRUN_FILL_NORMAL, 0, 0.5);
        int n = 2;
        if (pick(&c.rng, 2)) {
            clrun_tensor_type bias = {CLRUN_F32, 1, {N}};
            in[n++] = input(&c, bias, -1, 1);
        }
        clrun_attr attrs[3] = {attr_int("transpose_a", ta), attr_int("transpose_b", tb),
                               attr_float("alpha", uniform(&c.rng, -2, 2))};
        single(&c, "matmul", in, n, attrs, pick(&c.rng, 2) ? 3 : 2);
        check(&c);
    }
}

/* ---- rows -------------------------------------------------------------------------------- */

static void softmax_and_logsoftmax_match_on_every_axis(void **state)
{
    (void)state;
    for (int round = 0; round < 8; round++) {
        gcase c = begin(round % 2 ? "logsoftmax" : "softmax", seed_of(0, round));
        clrun_tensor_type t = random_type(&c.rng, CLRUN_F32, 1, 4, 6);
        int32_t x = input(&c, t, -4, 4);
        int64_t axis = between(&c.rng, -t.rank, t.rank - 1);
        bool causal = round % 4 == 0; /* softmax only */
        clrun_attr attrs[2] = {attr_int("axis", causal ? -1 : axis), attr_int("causal", 1)};
        single(&c, round % 2 ? "logsoftmax" : "softmax", &x, 1, attrs, causal ? 2 : 1);
        check(&c);
    }
}

static void layernorm_batchnorm_instancenorm_match(void **state)
{
    (void)state;
    for (int round = 0; round < 6; round++) {
        gcase c = begin("layernorm", seed_of(0, round));
        clrun_tensor_type t = random_type(&c.rng, CLRUN_F32, 1, 4, 6);
        int axis = (int)between(&c.rng, 0, t.rank - 1);
        clrun_tensor_type p = {CLRUN_F32, 1, {1}};
        if (pick(&c.rng, 2)) {
            for (int d = axis; d < t.rank; d++)
                p.shape[0] *= t.shape[d];
        } else {
            p.rank = t.rank - axis;
            for (int d = axis; d < t.rank; d++)
                p.shape[d - axis] = t.shape[d];
        }
        int32_t in[3] = {input(&c, t, -3, 3), input(&c, p, 0.5, 2), input(&c, p, -1, 1)};
        clrun_attr attrs[2] = {attr_int("axis", pick(&c.rng, 2) ? axis : axis - t.rank),
                               attr_float("eps", uniform(&c.rng, 1e-5, 0.1))};
        single(&c, "layernorm", in, pick(&c.rng, 2) ? 3 : 2, attrs, 2);
        check(&c);
    }
    for (int round = 0; round < 4; round++) {
        bool instance = round % 2;
        gcase c = begin(instance ? "instancenorm" : "batchnorm", seed_of(1, round));
        clrun_tensor_type t = random_type(&c.rng, CLRUN_F32, instance ? 3 : 2, 4, 5);
        clrun_tensor_type p = {CLRUN_F32, 1, {t.shape[1]}};
        int32_t in[5] = {input(&c, t, -3, 3), input(&c, p, 0.5, 2), input(&c, p, -1, 1),
                         input(&c, p, -1, 1), input(&c, p, 0.5, 2)};
        clrun_attr eps = attr_float("eps", uniform(&c.rng, 1e-5, 0.1));
        single(&c, instance ? "instancenorm" : "batchnorm", in, instance ? 3 : 5, &eps, 1);
        check(&c);
    }
}

/* ---- reductions -------------------------------------------------------------------------- */

static void reductions_and_argmax_match(void **state)
{
    (void)state;
    static const char *const ops[] = {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min",
                                      "reduce_prod", "reduce_l2", "reduce_sum_square"};
    for (int k = 0; k < 7; k++)
        for (int round = 0; round < 3; round++) {
            gcase c = begin(ops[k], seed_of(k, round));
            clrun_tensor_type t = random_type(&c.rng, CLRUN_F32, 1, 4, 5);
            int32_t x = input(&c, t, !strcmp(ops[k], "reduce_prod") ? 0.6 : -2, 1.5);
            int64_t axes[CLRUN_MAX_DIMS];
            int n = 0;
            for (int d = 0; d < t.rank; d++)
                if (pick(&c.rng, 2))
                    axes[n++] = pick(&c.rng, 2) ? d : d - t.rank;
            clrun_attr attrs[2] = {attr_int("keepdims", pick(&c.rng, 2)), attr_ints("axes", n, axes)};
            single(&c, ops[k], &x, 1, attrs, n > 0 || pick(&c.rng, 2) ? 2 : 1);
            check(&c);
        }
    for (int round = 0; round < 10; round++) {
        const char *op = round % 2 ? "argmin" : "argmax";
        gcase c = begin(op, seed_of(8, round));
        clrun_tensor_type t = random_type(&c.rng, CLRUN_F32, 1, 4, 5);
        int32_t x = input_ranged(&c, t, -1, 1, 1); /* ties: select_last_index matters */
        clrun_attr attrs[3] = {attr_int("axis", between(&c.rng, -t.rank, t.rank - 1)),
                               attr_int("keepdims", pick(&c.rng, 2)),
                               attr_int("select_last_index", round / 2 % 2)};
        single(&c, op, &x, 1, attrs, 3);
        check(&c);
    }
}

/* ---- layout ------------------------------------------------------------------------------ */

static void transpose_reshape_concat_match(void **state)
{
    (void)state;
    for (int round = 0; round < 4; round++) {
        gcase c = begin("transpose", seed_of(0, round));
        clrun_tensor_type t = random_type(&c.rng, CLRUN_F32, 1, 5, 4);
        int64_t perm[CLRUN_MAX_DIMS];
        for (int d = 0; d < t.rank; d++)
            perm[d] = d;
        for (int d = t.rank - 1; d > 0; d--) {
            int j = pick(&c.rng, d + 1);
            int64_t s = perm[d];
            perm[d] = perm[j], perm[j] = s;
        }
        int32_t x = input(&c, t, -3, 3);
        clrun_attr a = attr_ints("perm", t.rank, perm);
        /* a reshape of the result too, so the view is read by a node */
        int32_t y = node(&c, "transpose", &x, 1, &a, 1);
        int64_t flat = (int64_t)clrun_tensor_elements(&t);
        int64_t shape[2] = {pick(&c.rng, 2) ? -1 : flat, 1};
        clrun_attr r = attr_ints("shape", 2, shape);
        output(&c, y);
        int32_t z = node(&c, "reshape", &y, 1, &r, 1);
        single(&c, "neg", &z, 1, NULL, 0);
        check(&c);
    }
    for (int round = 0; round < 4; round++) {
        gcase c = begin("concat", seed_of(1, round));
        clrun_tensor_type t = random_type(&c.rng, round % 2 ? CLRUN_I32 : CLRUN_F32, 1, 4, 4);
        int axis = (int)between(&c.rng, 0, t.rank - 1), n = (int)between(&c.rng, 1, 3);
        int32_t in[3];
        for (int i = 0; i < n; i++) {
            clrun_tensor_type ti = t;
            ti.shape[axis] = between(&c.rng, 1, 4);
            in[i] = input(&c, ti, -9, 9);
        }
        clrun_attr a = attr_int("axis", pick(&c.rng, 2) ? axis : axis - t.rank);
        single(&c, "concat", in, n, &a, 1);
        check(&c);
    }
}

static void slice_split_gather_match(void **state)
{
    (void)state;
    for (int round = 0; round < 4; round++) { /* single-axis form */
        gcase c = begin("slice axis", seed_of(0, round));
        clrun_tensor_type t = random_type(&c.rng, CLRUN_F32, 1, 4, 6);
        int axis = (int)between(&c.rng, 0, t.rank - 1);
        int64_t n = t.shape[axis], start = between(&c.rng, 0, n - 1), end = between(&c.rng, start + 1, n);
        int32_t x = input(&c, t, -3, 3);
        clrun_attr a[3] = {attr_int("axis", axis), attr_int("start", pick(&c.rng, 2) ? start : start - n),
                           attr_int("end", end == n && pick(&c.rng, 2) ? n : end - n * pick(&c.rng, 2))};
        if (a[2].i == 0)
            a[2].i = n;
        single(&c, "slice", &x, 1, a, 3);
        check(&c);
    }
    for (int round = 0; round < 8; round++) { /* ONNX form: steps of either sign, clamping */
        gcase c = begin("slice onnx", seed_of(1, round));
        clrun_tensor_type t = random_type(&c.rng, CLRUN_F32, 1, 4, 6);
        int n = (int)between(&c.rng, 1, t.rank);
        int64_t starts[CLRUN_MAX_DIMS], ends[CLRUN_MAX_DIMS], axes[CLRUN_MAX_DIMS], steps[CLRUN_MAX_DIMS];
        int order[CLRUN_MAX_DIMS];
        for (int d = 0; d < t.rank; d++)
            order[d] = d;
        for (int d = t.rank - 1; d > 0; d--) {
            int j = pick(&c.rng, d + 1), s = order[d];
            order[d] = order[j], order[j] = s;
        }
        for (int i = 0; i < n; i++) {
            int64_t dim = t.shape[order[i]];
            axes[i] = pick(&c.rng, 2) ? order[i] : order[i] - t.rank;
            steps[i] = between(&c.rng, 1, 3) * (pick(&c.rng, 2) ? 1 : -1);
            /* at least one element: a first inside the axis, an end past it in the step's way */
            int64_t first = between(&c.rng, 0, dim - 1);
            starts[i] = pick(&c.rng, 4) == 0 ? (steps[i] > 0 ? -1000 : 1000) : first - dim * pick(&c.rng, 2);
            int64_t s = starts[i] < 0 ? (starts[i] + dim < 0 ? 0 : starts[i] + dim) : starts[i];
            if (s > dim - 1)
                s = dim - 1;
            ends[i] = steps[i] > 0 ? between(&c.rng, s + 1, dim + 2) : between(&c.rng, -dim - 3, s - 1 - dim);
            if (pick(&c.rng, 4) == 0)
                ends[i] = steps[i] > 0 ? INT64_MAX : INT64_MIN;
        }
        int32_t x = input(&c, t, -3, 3);
        clrun_attr a[4] = {attr_ints("starts", n, starts), attr_ints("ends", n, ends),
                           attr_ints("axes", n, axes), attr_ints("steps", n, steps)};
        single(&c, "slice", &x, 1, a, 4);
        check(&c);
    }
    for (int round = 0; round < 4; round++) {
        gcase c = begin("split", seed_of(2, round));
        clrun_tensor_type t = random_type(&c.rng, CLRUN_F32, 1, 4, 6);
        int axis = (int)between(&c.rng, 0, t.rank - 1);
        int32_t x = input(&c, t, -3, 3);
        int64_t dim = t.shape[axis], sizes[CLRUN_MAX_ATTR_INTS];
        int parts = 0;
        for (int64_t left = dim; left > 0 && parts < CLRUN_MAX_ATTR_INTS - 1; parts++) {
            sizes[parts] = between(&c.rng, 1, left);
            left -= sizes[parts];
        }
        int64_t used = 0;
        for (int i = 0; i < parts; i++)
            used += sizes[i];
        if (used < dim)
            sizes[parts++] = dim - used;
        clrun_attr a[3] = {attr_int("axis", axis), attr_ints("split", parts, sizes),
                           attr_int("index", pick(&c.rng, parts))};
        if (round % 2) { /* equal parts */
            int64_t p = dim % 2 == 0 ? 2 : 1;
            a[1] = attr_int("parts", p);
            a[2] = attr_int("index", pick(&c.rng, (int)p));
        }
        single(&c, "split", &x, 1, a, 3);
        check(&c);
    }
    for (int round = 0; round < 4; round++) { /* embedding form: zeros outside [0, V) */
        gcase c = begin("gather embedding", seed_of(3, round));
        int64_t V = between(&c.rng, 1, 6), D = between(&c.rng, 1, 5);
        clrun_tensor_type table = {CLRUN_F32, 2, {V, D}};
        int32_t in[2] = {input(&c, table, -3, 3),
                         input(&c, random_type(&c.rng, CLRUN_I32, 0, 3, 4), -2, (double)V + 1)};
        single(&c, "gather", in, 2, NULL, 0);
        check(&c);
    }
    for (int round = 0; round < 4; round++) { /* axis form: negatives from the end */
        gcase c = begin("gather axis", seed_of(4, round));
        clrun_tensor_type data = random_type(&c.rng, CLRUN_F32, 1, 3, 5);
        int axis = (int)between(&c.rng, 0, data.rank - 1);
        int64_t len = data.shape[axis];
        clrun_tensor_type idx = random_type(&c.rng, round % 2 ? CLRUN_I64 : CLRUN_I32, 0, 2, 3);
        int32_t in[2] = {input(&c, data, -3, 3), input(&c, idx, (double)-len, (double)len - 1)};
        clrun_attr a = attr_int("axis", pick(&c.rng, 2) ? axis : axis - data.rank);
        single(&c, "gather", in, 2, &a, 1);
        check(&c);
    }
    for (int round = 0; round < 3; round++) {
        gcase c = begin("gather_elements", seed_of(5, round));
        clrun_tensor_type data = random_type(&c.rng, CLRUN_F32, 1, 3, 5);
        int axis = (int)between(&c.rng, 0, data.rank - 1);
        clrun_tensor_type idx = data;
        idx.dtype = CLRUN_I64;
        for (int d = 0; d < data.rank; d++)
            idx.shape[d] = d == axis ? between(&c.rng, 1, 5) : between(&c.rng, 1, data.shape[d]);
        int32_t in[2] = {input(&c, data, -3, 3),
                         input(&c, idx, (double)-data.shape[axis], (double)data.shape[axis] - 1)};
        clrun_attr a = attr_int("axis", axis);
        single(&c, "gather_elements", in, 2, &a, 1);
        check(&c);
    }
}

static void expand_tile_pad_trilu_cumsum_match(void **state)
{
    (void)state;
    for (int round = 0; round < 4; round++) {
        gcase c = begin("expand", seed_of(0, round));
        clrun_tensor_type out = random_type(&c.rng, CLRUN_F32, 1, 4, 4);
        clrun_tensor_type x = broadcastable(&c.rng, &out, CLRUN_F32);
        int64_t shape[CLRUN_MAX_DIMS];
        for (int d = 0; d < out.rank; d++) /* a 1 in shape keeps x's dim */
            shape[d] = d >= out.rank - x.rank && pick(&c.rng, 3) == 0 ? 1 : out.shape[d];
        int32_t in = input(&c, x, -3, 3);
        clrun_attr a = attr_ints("shape", out.rank, shape);
        single(&c, "expand", &in, 1, &a, 1);
        check(&c);
    }
    for (int round = 0; round < 3; round++) {
        gcase c = begin("tile", seed_of(1, round));
        clrun_tensor_type t = random_type(&c.rng, CLRUN_F32, 1, 4, 3);
        int64_t repeats[CLRUN_MAX_DIMS];
        for (int d = 0; d < t.rank; d++)
            repeats[d] = between(&c.rng, 1, 3);
        int32_t x = input(&c, t, -3, 3);
        clrun_attr a = attr_ints("repeats", t.rank, repeats);
        single(&c, "tile", &x, 1, &a, 1);
        check(&c);
    }
    for (int round = 0; round < 6; round++) { /* constant, reflect, edge; negative pads crop */
        gcase c = begin("pad", seed_of(2, round));
        clrun_tensor_type t = random_type(&c.rng, CLRUN_F32, 1, 4, 4);
        int64_t pads[2 * CLRUN_MAX_DIMS];
        for (int d = 0; d < t.rank; d++) {
            pads[d] = between(&c.rng, -1, 3);
            pads[t.rank + d] = between(&c.rng, -1, 3);
            if (t.shape[d] + pads[d] + pads[t.rank + d] < 1)
                pads[d] = pads[t.rank + d] = 0;
        }
        int32_t x = input(&c, t, -3, 3);
        clrun_attr a[3] = {attr_ints("pads", 2 * t.rank, pads), attr_int("mode", round % 3),
                           attr_float("value", uniform(&c.rng, -2, 2))};
        single(&c, "pad", &x, 1, a, round % 3 ? 2 : 3);
        check(&c);
    }
    for (int round = 0; round < 3; round++) {
        gcase c = begin("trilu", seed_of(3, round));
        clrun_tensor_type t = random_type(&c.rng, CLRUN_F32, 2, 4, 5);
        int32_t x = input(&c, t, -3, 3);
        clrun_attr a[2] = {attr_int("upper", pick(&c.rng, 2)), attr_int("k", between(&c.rng, -3, 3))};
        single(&c, "trilu", &x, 1, a, 2);
        check(&c);
    }
    for (int round = 0; round < 4; round++) {
        gcase c = begin("cumsum", seed_of(4, round));
        clrun_tensor_type t = random_type(&c.rng, round % 2 ? CLRUN_I32 : CLRUN_F32, 1, 3, 6);
        int32_t x = input(&c, t, -9, 9);
        clrun_attr a[3] = {attr_int("axis", between(&c.rng, -t.rank, t.rank - 1)),
                           attr_int("exclusive", pick(&c.rng, 2)), attr_int("reverse", pick(&c.rng, 2))};
        single(&c, "cumsum", &x, 1, a, 3);
        check(&c);
    }
}

/* ---- convolution and pooling ------------------------------------------------------------- */

static void conv2d_and_conv_transpose2d_match(void **state)
{
    (void)state;
    for (int round = 0; round < 10; round++) {
        bool transpose = round % 2;
        gcase c = begin(transpose ? "conv_transpose2d" : "conv2d", seed_of(0, round));
        int64_t groups = between(&c.rng, 1, 2), Cg = between(&c.rng, 1, 3), Og = between(&c.rng, 1, 3);
        int64_t N = between(&c.rng, 1, 2), KH = between(&c.rng, 1, 3), KW = between(&c.rng, 1, 3);
        int64_t stride[2] = {between(&c.rng, 1, 2), between(&c.rng, 1, 2)};
        int64_t dilation[2] = {between(&c.rng, 1, 2), between(&c.rng, 1, 2)};
        /* the dilated kernel fits the image without padding */
        int64_t H = dilation[0] * (KH - 1) + between(&c.rng, 1, 5);
        int64_t W = dilation[1] * (KW - 1) + between(&c.rng, 1, 5);
        int64_t pads[4] = {between(&c.rng, 0, KH - 1), between(&c.rng, 0, KW - 1),
                           between(&c.rng, 0, KH - 1), between(&c.rng, 0, KW - 1)};
        clrun_tensor_type x = {CLRUN_F32, 4, {N, groups * Cg, H, W}};
        clrun_tensor_type w = transpose ? (clrun_tensor_type){CLRUN_F32, 4, {groups * Cg, Og, KH, KW}}
                                        : (clrun_tensor_type){CLRUN_F32, 4, {groups * Og, Cg, KH, KW}};
        clrun_tensor_type b = {CLRUN_F32, 1, {groups * Og}};
        int32_t in[3] = {input(&c, x, -1, 1), -1, input(&c, b, -1, 1)};
        in[1] = pick(&c.rng, 2) ? input(&c, w, -1, 1) : constant(&c, w, CLRUN_FILL_UNIFORM, -1, 1);
        clrun_attr a[5] = {attr_ints("stride", 2, stride), attr_ints("dilation", 2, dilation),
                           attr_int("groups", groups), attr_ints("pads", 4, pads),
                           attr_ints("output_padding", 2, (int64_t[]){0, 0})};
        if (pick(&c.rng, 2))
            a[3] = attr_ints("pad", 2, pads); /* both sides alike */
        int na = 4;
        if (transpose && (stride[0] > 1 || dilation[0] > 1) && pick(&c.rng, 2)) {
            a[4].ints[0] = 1;
            na = 5;
        }
        single(&c, transpose ? "conv_transpose2d" : "conv2d", in, pick(&c.rng, 2) ? 3 : 2, a, na);
        check(&c);
    }
}

static void pools_match(void **state)
{
    (void)state;
    for (int round = 0; round < 10; round++) {
        bool is_max = round % 2 == 0;
        gcase c = begin(is_max ? "maxpool2d" : "avgpool2d", seed_of(0, round));
        int64_t kernel[2] = {between(&c.rng, 1, 3), between(&c.rng, 1, 3)};
        int64_t stride[2] = {between(&c.rng, 1, 3), between(&c.rng, 1, 3)};
        int64_t dilation[2] = {is_max ? between(&c.rng, 1, 2) : 1, is_max ? between(&c.rng, 1, 2) : 1};
        int64_t span[2] = {dilation[0] * (kernel[0] - 1) + 1, dilation[1] * (kernel[1] - 1) + 1};
        /* the dilated window fits the image without padding */
        clrun_tensor_type x = {CLRUN_F32, 4, {between(&c.rng, 1, 2), between(&c.rng, 1, 3),
                                              span[0] + between(&c.rng, 0, 4), span[1] + between(&c.rng, 0, 4)}};
        int64_t pads[4] = {between(&c.rng, 0, span[0] / 2), between(&c.rng, 0, span[1] / 2),
                           between(&c.rng, 0, span[0] / 2), between(&c.rng, 0, span[1] / 2)};
        int32_t in = input(&c, x, -3, 3);
        clrun_attr a[6] = {attr_ints("kernel", 2, kernel), attr_ints("stride", 2, stride),
                           attr_ints("pads", 4, pads), attr_int("ceil_mode", pick(&c.rng, 2)),
                           is_max ? attr_ints("dilation", 2, dilation)
                                  : attr_int("count_include_pad", pick(&c.rng, 2))};
        single(&c, is_max ? "maxpool2d" : "avgpool2d", &in, 1, a, 5);
        check(&c);
    }
    for (int round = 0; round < 2; round++) {
        gcase c = begin(round ? "global_maxpool" : "global_avgpool", seed_of(1, round));
        clrun_tensor_type x = {CLRUN_F32, 4, {2, 3, between(&c.rng, 1, 6), between(&c.rng, 1, 6)}};
        int32_t in = input(&c, x, -3, 3);
        single(&c, round ? "global_maxpool" : "global_avgpool", &in, 1, NULL, 0);
        check(&c);
    }
}

/* ---- ops being added: compared once the registry has them -------------------------------- */

static void softmax_xent_matches(void **state)
{
    (void)state;
    if (clrun__op_find("softmax_xent") == NULL)
        skip();
    for (int round = 0; round < 4; round++) {
        gcase c = begin("softmax_xent", seed_of(0, round));
        int64_t B = between(&c.rng, 1, 6), C = between(&c.rng, 2, 7);
        clrun_tensor_type logits = {CLRUN_F32, 2, {B, C}}, labels = {round % 2 ? CLRUN_I64 : CLRUN_I32, 1, {B}};
        bool ignore = round >= 2;
        int32_t in[2] = {input(&c, logits, -4, 4), input(&c, labels, ignore ? -1 : 0, (double)C - 1)};
        clrun_attr a = attr_int("ignore_index", -1);
        single(&c, "softmax_xent", in, 2, &a, ignore);
        check(&c);
    }
}

static void dropout_matches(void **state)
{
    (void)state;
    if (clrun__op_find("dropout") == NULL)
        skip();
    for (int round = 0; round < 4; round++) {
        gcase c = begin("dropout", seed_of(0, round));
        clrun_tensor_type seed = {CLRUN_I64, round % 2, {1}};
        int32_t in[2] = {input(&c, random_type(&c.rng, CLRUN_F32, 1, 3, 7), -3, 3),
                         input(&c, seed, 0, 1e9)};
        clrun_attr a[2] = {attr_float("ratio", uniform(&c.rng, 0.1, 0.9)), attr_int("stream", pick(&c.rng, 4))};
        single(&c, "dropout", in, 2, a, round == 0 ? 0 : 2);
        check(&c);
    }
}

/* ---- chains ------------------------------------------------------------------------------ */

static void chains_match(void **state)
{
    (void)state;
    { /* MLP: matmul + bias, relu, matmul + bias, softmax */
        gcase c = begin("mlp", seed_of(0, 0));
        clrun_tensor_type x = {CLRUN_F32, 2, {6, 16}}, w1 = {CLRUN_F32, 2, {16, 32}};
        clrun_tensor_type b1 = {CLRUN_F32, 1, {32}}, w2 = {CLRUN_F32, 2, {32, 10}}, b2 = {CLRUN_F32, 1, {10}};
        int32_t in1[3] = {input(&c, x, -1, 1), constant(&c, w1, CLRUN_FILL_NORMAL, 0, 0.3),
                          constant(&c, b1, CLRUN_FILL_UNIFORM, -0.1, 0.1)};
        int32_t h = node(&c, "matmul", in1, 3, NULL, 0);
        h = node(&c, "relu", &h, 1, NULL, 0);
        int32_t in2[2] = {h, constant(&c, w2, CLRUN_FILL_NORMAL, 0, 0.3)};
        int32_t z = node(&c, "matmul", in2, 2, NULL, 0);
        int32_t in3[2] = {z, constant(&c, b2, CLRUN_FILL_UNIFORM, -0.1, 0.1)};
        z = node(&c, "add", in3, 2, NULL, 0);
        single(&c, "softmax", &z, 1, NULL, 0);
        check(&c);
    }
    { /* conv -> relu -> maxpool -> global_avgpool -> matmul */
        gcase c = begin("cnn", seed_of(1, 0));
        clrun_tensor_type x = {CLRUN_F32, 4, {2, 3, 8, 8}}, w = {CLRUN_F32, 4, {6, 3, 3, 3}};
        clrun_tensor_type b = {CLRUN_F32, 1, {6}}, fc = {CLRUN_F32, 2, {6, 4}};
        int32_t in[3] = {input(&c, x, -1, 1), constant(&c, w, CLRUN_FILL_NORMAL, 0, 0.3),
                         constant(&c, b, CLRUN_FILL_UNIFORM, -0.1, 0.1)};
        clrun_attr pad = attr_int("pad", 1), kernel = attr_int("kernel", 2);
        int32_t y = node(&c, "conv2d", in, 3, &pad, 1);
        y = node(&c, "relu", &y, 1, NULL, 0);
        y = node(&c, "maxpool2d", &y, 1, &kernel, 1);
        y = node(&c, "global_avgpool", &y, 1, NULL, 0);
        int32_t mm[2] = {y, constant(&c, fc, CLRUN_FILL_NORMAL, 0, 0.5)};
        single(&c, "matmul", mm, 2, NULL, 0);
        check(&c);
    }
    { /* layernorm -> gelu */
        gcase c = begin("layernorm gelu", seed_of(2, 0));
        clrun_tensor_type x = {CLRUN_F32, 3, {2, 5, 24}}, p = {CLRUN_F32, 1, {24}};
        int32_t in[3] = {input(&c, x, -3, 3), constant(&c, p, CLRUN_FILL_UNIFORM, 0.5, 1.5),
                         constant(&c, p, CLRUN_FILL_UNIFORM, -0.5, 0.5)};
        int32_t y = node(&c, "layernorm", in, 3, NULL, 0);
        single(&c, "gelu", &y, 1, NULL, 0);
        check(&c);
    }
}

/* Every op the reference supports that the registry has was compared on the device above. */
static void every_supported_op_was_compared(void **state)
{
    (void)state;
    if (getenv("CLRUN_TEST_FILTER") || getenv("CLRUN_TEST_SKIP"))
        skip(); /* the tests that cover them may not have run */
    static const char *const supported[] = {
        "neg", "abs", "relu", "sign", "gelu", "gelu_erf", "sigmoid", "tanh", "exp", "log", "sqrt",
        "rsqrt", "reciprocal", "sin", "cos", "erf", "softplus", "softsign", "hard_sigmoid",
        "hard_swish", "leaky_relu", "elu", "celu", "selu", "clip", "scale", "copy", "cast", "not",
        "floor", "ceil", "round", "add", "sub", "mul", "div", "pow", "maximum", "minimum", "prelu",
        "mod", "equal", "less", "greater", "less_equal", "greater_equal", "and", "or", "xor",
        "where", "matmul", "softmax", "logsoftmax", "layernorm", "batchnorm", "instancenorm",
        "reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod", "reduce_l2",
        "reduce_sum_square", "argmax", "argmin", "transpose", "reshape", "concat", "slice",
        "split", "gather", "gather_elements", "expand", "tile", "pad", "trilu", "cumsum",
        "conv2d", "conv_transpose2d", "maxpool2d", "avgpool2d", "global_avgpool",
        "global_maxpool", "softmax_xent", "dropout",
    };
    for (size_t k = 0; k < sizeof supported / sizeof supported[0]; k++) {
        if (clrun__op_find(supported[k]) == NULL)
            continue;
        bool seen = false;
        for (int i = 0; i < covered_count && !seen; i++)
            seen = strcmp(covered[i], supported[k]) == 0;
        if (!seen)
            fail_msg("op %s was never compared with the device", supported[k]);
    }
}

/* ---- refusals ---------------------------------------------------------------------------- */

static void an_op_it_does_not_know_is_refused_by_name(void **state)
{
    (void)state;
    gcase c = begin("unknown", 1);
    clrun_tensor_type t = {CLRUN_F32, 4, {1, 4, 2, 2}};
    int32_t x = input(&c, t, -1, 1);
    clrun_attr b = attr_int("blocksize", 2);
    int32_t y = node(&c, "depth_to_space", &x, 1, &b, 1);
    output(&c, y);
    double values[16] = {0};
    const double *inputs[1] = {values};
    double *sentinel[1] = {NULL};
    double **out = sentinel; /* must be cleared */
    char err[256] = "";
    assert_int_equal(gref_eval(c.graph, inputs, NULL, &out, err, sizeof err), -1);
    assert_null(out);
    if (!strstr(err, "depth_to_space") || !strstr(err, "node 0"))
        fail_msg("message: %s", err);
    clrun_graph_destroy(c.graph);
}

static void a_gather_index_outside_its_axis_is_refused(void **state)
{
    (void)state;
    gcase c = begin("bad index", 1);
    clrun_tensor_type data = {CLRUN_F32, 1, {4}}, idx = {CLRUN_I64, 1, {2}};
    int32_t in[2] = {input(&c, data, -1, 1), input(&c, idx, 0, 0)};
    clrun_attr a = attr_int("axis", 0);
    output(&c, node(&c, "gather", in, 2, &a, 1));
    const double d[4] = {1, 2, 3, 4}, good[2] = {-4, 3}, bad[2] = {1, 4};
    const double *inputs[2] = {d, good};
    double **out = NULL;
    char err[256] = "";
    assert_int_equal(gref_eval(c.graph, inputs, NULL, &out, err, sizeof err), 0);
    assert_true(out[2][0] == 1 && out[2][1] == 4);
    gref_free(c.graph, out);
    inputs[1] = bad;
    assert_int_equal(gref_eval(c.graph, inputs, NULL, &out, err, sizeof err), -1);
    if (!strstr(err, "gather") || !strstr(err, "index 4"))
        fail_msg("message: %s", err);
    clrun_graph_destroy(c.graph);
}

/* ---- finite differences ------------------------------------------------------------------ */

static void fd_of_a_sum_of_squares_is_twice_x(void **state)
{
    (void)state;
    gcase c = begin("fd square", 5);
    clrun_tensor_type t = {CLRUN_F32, 2, {3, 4}};
    int32_t x = input(&c, t, -1, 1);
    int32_t in[2] = {x, x};
    int32_t sq = node(&c, "mul", in, 2, NULL, 0);
    int32_t loss = node(&c, "reduce_sum", &sq, 1, NULL, 0);
    output(&c, loss);
    double xs[12], grad[12];
    for (int i = 0; i < 12; i++)
        xs[i] = uniform(&c.rng, -3, 3);
    const double *inputs[1] = {xs};
    char err[256];
    assert_int_equal(gref_fd_grad(c.graph, inputs, loss, x, 1e-5, grad, err, sizeof err), 0);
    for (int i = 0; i < 12; i++)
        if (fabs(grad[i] - 2 * xs[i]) > 1e-6)
            fail_msg("element %d: %.12g, expected %.12g", i, grad[i], 2 * xs[i]);
    clrun_graph_destroy(c.graph);
}

static void fd_of_a_summed_matmul_wrt_its_weights_is_column_sums(void **state)
{
    (void)state;
    gcase c = begin("fd matmul", 6);
    enum { M = 5, K = 4, N = 3 };
    clrun_tensor_type tx = {CLRUN_F32, 2, {M, K}}, tw = {CLRUN_F32, 2, {K, N}};
    int32_t in[2] = {input(&c, tx, -1, 1), constant(&c, tw, CLRUN_FILL_NORMAL, 0, 1)};
    int32_t y = node(&c, "matmul", in, 2, NULL, 0);
    int32_t loss = node(&c, "reduce_sum", &y, 1, NULL, 0);
    output(&c, loss);
    double xs[M * K], grad[K * N];
    for (int i = 0; i < M * K; i++)
        xs[i] = uniform(&c.rng, -2, 2);
    const double *inputs[1] = {xs};
    char err[256];
    assert_int_equal(gref_fd_grad(c.graph, inputs, loss, in[1], 1e-6, grad, err, sizeof err), 0);
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++) {
            double sum = 0; /* d/dw[k, n] of sum(x w) = sum over m of x[m, k] */
            for (int m = 0; m < M; m++)
                sum += xs[m * K + k];
            if (fabs(grad[k * N + n] - sum) > 1e-6)
                fail_msg("w[%d, %d]: %.12g, expected %.12g", k, n, grad[k * N + n], sum);
        }
    /* and the overrides move the loss as the weights say: doubling w doubles it */
    double **base = NULL, **twice = NULL;
    assert_int_equal(gref_eval(c.graph, inputs, NULL, &base, err, sizeof err), 0);
    double w2[K * N];
    for (int i = 0; i < K * N; i++)
        w2[i] = 2 * base[in[1]][i];
    const double *overrides[8] = {0};
    overrides[in[1]] = w2;
    assert_int_equal(gref_eval(c.graph, inputs, overrides, &twice, err, sizeof err), 0);
    assert_true(fabs(twice[loss][0] - 2 * base[loss][0]) <= 1e-12 * (1 + fabs(base[loss][0])));
    gref_free(c.graph, base);
    gref_free(c.graph, twice);
    clrun_graph_destroy(c.graph);
}

static void fd_through_a_chain_matches_the_chain_rule(void **state)
{
    (void)state;
    /* loss = mean(sigmoid(x * w)): d/dw[j] = mean over i of sigmoid'(x[i, j] w[j]) x[i, j] */
    gcase c = begin("fd chain", 7);
    enum { R = 4, C = 5 };
    clrun_tensor_type tx = {CLRUN_F32, 2, {R, C}}, tw = {CLRUN_F32, 1, {C}};
    int32_t in[2] = {input(&c, tx, -1, 1), input(&c, tw, -1, 1)};
    int32_t y = node(&c, "mul", in, 2, NULL, 0);
    y = node(&c, "sigmoid", &y, 1, NULL, 0);
    int32_t loss = node(&c, "reduce_mean", &y, 1, NULL, 0);
    output(&c, loss);
    double xs[R * C], ws[C], grad[C];
    for (int i = 0; i < R * C; i++)
        xs[i] = uniform(&c.rng, -2, 2);
    for (int j = 0; j < C; j++)
        ws[j] = uniform(&c.rng, -2, 2);
    const double *inputs[2] = {xs, ws};
    char err[256];
    assert_int_equal(gref_fd_grad(c.graph, inputs, loss, in[1], 1e-5, grad, err, sizeof err), 0);
    for (int j = 0; j < C; j++) {
        double expected = 0;
        for (int i = 0; i < R; i++) {
            double s = 1 / (1 + exp(-xs[i * C + j] * ws[j]));
            expected += s * (1 - s) * xs[i * C + j] / (R * C);
        }
        if (fabs(grad[j] - expected) > 1e-6)
            fail_msg("w[%d]: %.12g, expected %.12g", j, grad[j], expected);
    }
    /* a loss that is not a scalar, and an intermediate wrt, are refused */
    assert_int_equal(gref_fd_grad(c.graph, inputs, y, in[1], 1e-5, grad, err, sizeof err), -1);
    assert_non_null(strstr(err, "scalar"));
    assert_int_equal(gref_fd_grad(c.graph, inputs, loss, y, 1e-5, grad, err, sizeof err), -1);
    clrun_graph_destroy(c.graph);
}

static int setup(void **state)
{
    (void)state;
    return clrun_context_create(NULL, &ctx) == CLRUN_OK ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    clrun_context_destroy(ctx);
    return 0;
}

int main(void)
{
    clrun_test_device_environment(cache_root, sizeof cache_root);
    setenv("CLRUN_TUNE", "0", 0); /* no timing of matmul variants: the values are what count */
    const char *seed_text = getenv("CLRUN_TEST_SEED");
    base_seed = seed_text ? strtoull(seed_text, NULL, 10) : (uint64_t)time(NULL);
    fprintf(stderr, "test_graph_reference: seed %llu (set CLRUN_TEST_SEED to repeat)\n", (unsigned long long)base_seed);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(unary_float_ops_match),
        cmocka_unit_test(integer_and_bool_unary_ops_match),
        cmocka_unit_test(cast_matches),
        cmocka_unit_test(binary_ops_broadcast_and_match),
        cmocka_unit_test(where_broadcasts_its_three_inputs),
        cmocka_unit_test(matmul_matches_with_transposes_bias_and_batches),
        cmocka_unit_test(softmax_and_logsoftmax_match_on_every_axis),
        cmocka_unit_test(layernorm_batchnorm_instancenorm_match),
        cmocka_unit_test(reductions_and_argmax_match),
        cmocka_unit_test(transpose_reshape_concat_match),
        cmocka_unit_test(slice_split_gather_match),
        cmocka_unit_test(expand_tile_pad_trilu_cumsum_match),
        cmocka_unit_test(conv2d_and_conv_transpose2d_match),
        cmocka_unit_test(pools_match),
        cmocka_unit_test(softmax_xent_matches),
        cmocka_unit_test(dropout_matches),
        cmocka_unit_test(chains_match),
        cmocka_unit_test(every_supported_op_was_compared),
        cmocka_unit_test(an_op_it_does_not_know_is_refused_by_name),
        cmocka_unit_test(a_gather_index_outside_its_axis_is_refused),
        cmocka_unit_test(fd_of_a_sum_of_squares_is_twice_x),
        cmocka_unit_test(fd_of_a_summed_matmul_wrt_its_weights_is_column_sums),
        cmocka_unit_test(fd_through_a_chain_matches_the_chain_rule),
    };
    CLRUN_TEST_FILTERS_FROM_ENVIRONMENT();
    int failed = cmocka_run_group_tests(tests, setup, teardown);
    clrun_test_remove_dir(cache_root);
    return failed;
}
