/* Every gradient rule of lib/grad against central finite differences of the double-precision
 * graph reference (tests/graph_reference.h). Each case is a small graph of one op with random
 * shapes (broadcasting, rank 0, odd sizes) and attributes, made scalar as
 * loss = reduce_sum(out * R), R a random constant of out's shape so that every output element
 * counts; clrun_graph_gradient builds its gradient, the executor runs it on POCL in f32, and each
 * gradient must agree with the finite differences in double within 1e-3 of its largest
 * magnitude. Inputs keep away from kinks (relu at 0, ties of maximum, equal maxima in a pool's
 * window), where finite differences have no single answer.
 *
 * Also: a wrt tensor the loss does not reach gets zeros and is listed unused; a loss of more than
 * one element and an op without a rule are refused by name; a gradient graph gives the same bits
 * with fusion on and off and under the tlsf, naive and planned allocators; and every rule of the
 * rule tables has a case here. Seeds are fixed (CLRUN_TEST_SEED changes them);
 * CLRUN_TEST_ROUNDS sets the rounds per op and variant; CLRUN_TEST_VERBOSE=1 prints each op's
 * worst error against its tolerance; the rule cases run unfused unless CLRUN_FUSION is set. */
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

#include "device_test.h"
#include "op_args.h"
#include "grad/grad.h"
#include "graph_case.h"
#include "graph_reference.h"

enum { MAX_INPUTS = 16, MAX_WRT = 16, MAX_OPS = 128 };

/* The finite differences' relative step: h = FD_STEP·max(1, |w|). Their rounding in double is
 * negligible even at 1e-4, and their truncation error (h² against the gradient's curvature)
 * stays far below the tolerance where a gradient curves fast (layernorm over a group of small
 * variance, softmax with a dominant logit), which at 1e-3 it does not always. */
#define FD_STEP 1e-4
#define TOLERANCE 1e-3 /* of a gradient's largest magnitude */
#define FLOOR 1e-6     /* absolute: a gradient of zeros is zeros */

static char cache_root[512];
static uint64_t base_seed = 1;
static clrun_context *ctx;
static clrun_exec_options case_options; /* of the rule cases' executors */
static bool verbose;

/* ---- bookkeeping: the ops whose rules a case checked, and each one's worst error ---------- */

static struct {
    const char *op;
    double worst; /* largest |device - fd| / tolerance seen */
    int cases;
} checked[MAX_OPS];
static int checked_count;

static int checked_index(const char *op)
{
    for (int i = 0; i < checked_count; i++)
        if (strcmp(checked[i].op, op) == 0)
            return i;
    assert_true(checked_count < MAX_OPS);
    checked[checked_count].op = op;
    return checked_count++;
}

/* ---- random numbers ----------------------------------------------------------------------- */


/* The seed of round `round` of variant `k` of test family `family`. */
static uint64_t seed_of(int family, int k, int round)
{
    uint64_t s = base_seed * UINT64_C(1000003) + (uint64_t)family * 7919u + (uint64_t)k * 101u +
                 (uint64_t)round;
    return rng_next(&s);
}

/* ---- attributes --------------------------------------------------------------------------- */

/* ---- input values ------------------------------------------------------------------------- */

/* How an input is filled. Floats: uniform in [lo, hi]; with step > 0 the grid lo + step·k up to
 * hi; with distinct, every element different: a shuffled lo + step·k, k = 0 .. n − 1 (unique
 * maxima). A float within margin of an avoided point, or of a multiple of period, is drawn
 * again: the kinks of the op. Integers and bools: whole numbers in [lo, hi]. */
typedef struct fill_spec {
    double lo, hi, step;
    bool distinct;
    double avoid[4];
    int avoid_count;
    double period;
    double margin;
} fill_spec;

static fill_spec span(double lo, double hi) { return (fill_spec){.lo = lo, .hi = hi}; }

static fill_spec grid(double lo, double hi, double step)
{
    return (fill_spec){.lo = lo, .hi = hi, .step = step};
}

/* n different values step apart, centred on 0. */
static fill_spec distinct(double step) { return (fill_spec){.step = step, .distinct = true}; }

/* f, keeping margin away from `point`. */
static fill_spec away(fill_spec f, double point, double margin)
{
    assert_true(f.avoid_count < 4);
    f.avoid[f.avoid_count++] = point;
    f.margin = margin;
    return f;
}

static bool is_float(clrun_dtype d) { return d == CLRUN_F32 || d == CLRUN_F64; }

static double draw(uint64_t *rng, const fill_spec *f, clrun_dtype dtype)
{
    if (!is_float(dtype))
        return (double)between(rng, (int64_t)f->lo, (int64_t)f->hi);
    for (int tries = 0; tries < 100000; tries++) {
        int64_t steps = f->step > 0 ? (int64_t)floor((f->hi - f->lo) / f->step + 1e-9) : 0;
        double v = f->step > 0 ? f->lo + f->step * (double)between(rng, 0, steps)
                               : uniform(rng, f->lo, f->hi);
        if (dtype == CLRUN_F32)
            v = (float)v;
        bool near = false;
        for (int k = 0; k < f->avoid_count; k++)
            near = near || fabs(v - f->avoid[k]) < f->margin;
        if (f->period > 0)
            near = near || fabs(v - f->period * nearbyint(v / f->period)) < f->margin;
        if (!near)
            return v;
    }
    fail_msg("no value in [%g, %g] away from the kinks", f->lo, f->hi);
    return 0;
}


/* Fills raw (the tensor's bytes) and host (the same values as doubles) by f. */
static void fill(uint64_t *rng, const fill_spec *f, const clrun_tensor_type *t, unsigned char *raw,
                 double *host)
{
    uint64_t n = clrun_tensor_elements(t);
    size_t size = clrun_dtype_size(t->dtype);
    for (uint64_t k = 0; k < n; k++)
        host[k] = f->distinct ? f->step * ((double)k - (double)(n - 1) / 2) : draw(rng, f, t->dtype);
    for (uint64_t k = n; f->distinct && k > 1; k--) {
        uint64_t j = rng_next(rng) % k;
        double s = host[k - 1];
        host[k - 1] = host[j], host[j] = s;
    }
    for (uint64_t k = 0; k < n; k++) {
        assert_true(value_store(t->dtype, host[k], raw + k * size));
        host[k] = value_load(t->dtype, raw + k * size); /* as fed */
    }
}

/* ---- a case: a graph of one op under test, its inputs' fills and what to differentiate ---- */

typedef struct gcase {
    clrun_graph *graph;
    const char *op;   /* the op whose rule the case checks */
    char name[96];
    uint64_t seed;    /* of the shapes, attributes and values */
    uint64_t rng;
    fill_spec fills[MAX_INPUTS]; /* per graph input */
    int inputs;
    int names;        /* tensors made: names them */
    clrun_tensor_id wrt[MAX_WRT];
    int wrt_count;
    uint32_t unused;  /* wrt indices the loss must not reach (bit i) */
} gcase;

static gcase begin(const char *op, const char *variant, uint64_t seed)
{
    gcase c = {.op = op, .seed = seed, .rng = seed};
    snprintf(c.name, sizeof c.name, "%s%s%s", op, variant[0] ? " " : "", variant);
    assert_int_equal(clrun_graph_create("case", &c.graph), CLRUN_OK);
    return c;
}

static void want(gcase *c, clrun_tensor_id id)
{
    assert_true(c->wrt_count < MAX_WRT);
    c->wrt[c->wrt_count++] = id;
}

/* An input filled by f; a float one goes to wrt when `differentiate`. */
static clrun_tensor_id input(gcase *c, clrun_tensor_type t, fill_spec f, bool differentiate)
{
    char name[16];
    snprintf(name, sizeof name, "in%d", c->inputs);
    clrun_tensor_id id;
    assert_true(c->inputs < MAX_INPUTS);
    assert_int_equal(clrun_graph_add_input(c->graph, name, &t, false, &id), CLRUN_OK);
    c->fills[c->inputs++] = f;
    if (differentiate)
        want(c, id);
    return id;
}

/* A constant uniform in [lo, hi] (a weight), in wrt when `differentiate`. */
static clrun_tensor_id constant(gcase *c, clrun_tensor_type t, double lo, double hi, bool differentiate)
{
    char name[16];
    snprintf(name, sizeof name, "k%d", c->names++);
    clrun_tensor_id id;
    assert_int_equal(clrun_graph_add_constant(c->graph, name, &t, NULL, CLRUN_FILL_UNIFORM, lo, hi,
                                              rng_next(&c->rng), &id), CLRUN_OK);
    if (differentiate)
        want(c, id);
    return id;
}

/* A weight: an input or (half the time) a constant, uniform in [lo, hi], differentiated. */
static clrun_tensor_id weight(gcase *c, clrun_tensor_type t, double lo, double hi)
{
    return pick(&c->rng, 2) ? input(c, t, span(lo, hi), true) : constant(c, t, lo, hi, true);
}

static clrun_tensor_id node(gcase *c, const char *op, const clrun_tensor_id *in, int n,
                            const clrun_attr *attrs, int attr_count)
{
    char name[16];
    snprintf(name, sizeof name, "t%d", c->names++);
    const char *names[] = {name};
    clrun_tensor_id out = -1;
    if (clrun_graph_add_node(c->graph, op, in, n, names, 1, attrs, attr_count, &out) != CLRUN_OK)
        fail_msg("%s (seed %llu): %s", c->name, (unsigned long long)c->seed,
                 clrun_graph_last_error(c->graph));
    return out;
}

/* loss = reduce_sum(out * R), R uniform in [-1, 1] of out's type. Returns the loss; *product
 * gets out * R. */
static clrun_tensor_id add_loss(gcase *c, clrun_tensor_id out, clrun_tensor_id *product)
{
    const clrun_tensor_type *t = clrun_graph_tensor_type(c->graph, out);
    char name[16];
    snprintf(name, sizeof name, "R%d", c->names++);
    clrun_tensor_id r;
    assert_int_equal(clrun_graph_add_constant(c->graph, name, t, NULL, CLRUN_FILL_UNIFORM, -1, 1,
                                              rng_next(&c->rng), &r), CLRUN_OK);
    clrun_tensor_id in[2] = {out, r};
    *product = node(c, "mul", in, 2, NULL, 0);
    return node(c, "reduce_sum", product, 1, NULL, 0);
}

/* ---- running a case ----------------------------------------------------------------------- */

typedef struct run {
    clrun_graph *grad;    /* the gradient graph */
    clrun_exec *exec;
    clrun_buffer buffers[MAX_INPUTS];
    int32_t count;        /* of buffers */
    double *host[MAX_INPUTS]; /* the forward graph's inputs as fed, in its input order */
} run;

/* Builds the gradient of the case's loss, fills the inputs and runs it on ctx with options. */
static void run_gradient(gcase *c, clrun_tensor_id loss, clrun_context *on,
                         const clrun_exec_options *options, run *r)
{
    clrun_graph *g = c->graph;
    char err[1024];
    int32_t *unused = NULL, unused_count = -1;
    memset(r, 0, sizeof *r);
    if (clrun_graph_gradient(g, loss, c->wrt, c->wrt_count, &r->grad, &unused, &unused_count, err,
                             sizeof err) != CLRUN_OK)
        fail_msg("%s (seed %llu): %s", c->name, (unsigned long long)c->seed, err);
    uint32_t seen = 0;
    for (int32_t i = 0; i < unused_count; i++)
        seen |= 1u << unused[i];
    free(unused);
    if (seen != c->unused)
        fail_msg("%s (seed %llu): unused wrt 0x%x, expected 0x%x", c->name,
                 (unsigned long long)c->seed, (unsigned)seen, (unsigned)c->unused);
    const clrun_tensor_id *in_ids, *grad_in;
    int32_t nin = clrun_graph_inputs(g, &in_ids);
    assert_int_equal(clrun_graph_inputs(r->grad, &grad_in), nin);
    assert_int_equal(nin, c->inputs);
    unsigned char *raw[MAX_INPUTS];
    for (int32_t i = 0; i < nin; i++) {
        const clrun_tensor_type *t = clrun_graph_tensor_type(g, in_ids[i]);
        uint64_t n = clrun_tensor_elements(t);
        raw[i] = malloc(clrun_tensor_bytes(t) + 1);
        r->host[i] = malloc(n * sizeof(double) + 1);
        assert_non_null(raw[i]);
        assert_non_null(r->host[i]);
        fill(&c->rng, &c->fills[i], t, raw[i], r->host[i]);
    }
    /* the gradient graph's inputs, matched by name */
    for (int32_t k = 0; k < nin; k++) {
        const char *name = clrun_graph_tensor_name(r->grad, grad_in[k]);
        int32_t i = 0;
        while (i < nin && strcmp(clrun_graph_tensor_name(g, in_ids[i]), name) != 0)
            i++;
        assert_true(i < nin);
        uint64_t bytes = clrun_tensor_bytes(clrun_graph_tensor_type(g, in_ids[i]));
        assert_int_equal(clrun_alloc(on, bytes, &r->buffers[k]), CLRUN_OK);
        assert_int_equal(clrun_buffer_write(on, &r->buffers[k], raw[i]), CLRUN_OK);
        r->count++;
    }
    for (int32_t i = 0; i < nin; i++)
        free(raw[i]);
    if (clrun_exec_create(on, r->grad, options, &r->exec) != CLRUN_OK)
        fail_msg("%s (seed %llu): %s", c->name, (unsigned long long)c->seed, clrun_last_error(on));
    if (clrun_exec_run(r->exec, r->buffers, r->count) != CLRUN_OK)
        fail_msg("%s (seed %llu): %s", c->name, (unsigned long long)c->seed, clrun_last_error(on));
}

static void run_free(clrun_context *on, run *r)
{
    clrun_exec_destroy(r->exec);
    for (int32_t k = 0; k < r->count; k++)
        clrun_free(on, &r->buffers[k]);
    for (int k = 0; k < MAX_INPUTS; k++)
        free(r->host[k]);
    clrun_graph_destroy(r->grad);
}

/* Output k of the run as doubles (n elements of dtype). */
static double *read_output(run *r, int k, const clrun_tensor_type *t)
{
    uint64_t n = clrun_tensor_elements(t), bytes = clrun_tensor_bytes(t);
    unsigned char *raw = malloc(bytes + 1);
    double *v = malloc(n * sizeof(double) + 1);
    assert_non_null(raw);
    assert_non_null(v);
    assert_int_equal(clrun_exec_read_output(r->exec, k, raw, bytes), CLRUN_OK);
    for (uint64_t i = 0; i < n; i++)
        v[i] = value_load(t->dtype, raw + i * clrun_dtype_size(t->dtype));
    free(raw);
    return v;
}

/* Makes the case's output scalar, runs its gradient on the device and compares the loss with
 * the reference and each gradient with finite differences; destroys the graph. */
static void check(gcase *c, clrun_tensor_id out)
{
    clrun_tensor_id product, loss = add_loss(c, out, &product);
    clrun_graph *g = c->graph;
    run r;
    run_gradient(c, loss, ctx, &case_options, &r);
    const double *const *host = (const double *const *)r.host;
    char err[512];
    /* the loss: within f32 rounding of the sum of its terms */
    double **ref = NULL;
    if (gref_eval(g, host, NULL, &ref, err, sizeof err) != 0)
        fail_msg("%s (seed %llu): %s", c->name, (unsigned long long)c->seed, err);
    double *got = read_output(&r, 0, clrun_graph_tensor_type(g, loss));
    double terms = 0;
    for (uint64_t k = 0; k < clrun_tensor_elements(clrun_graph_tensor_type(g, product)); k++)
        terms += fabs(ref[product][k]);
    if (!(fabs(got[0] - ref[loss][0]) <= 1e-5 * terms + FLOOR))
        fail_msg("%s (seed %llu): loss %.9g, reference %.9g", c->name, (unsigned long long)c->seed,
                 got[0], ref[loss][0]);
    free(got);
    gref_free(g, ref);
    int at = checked_index(c->op);
    checked[at].cases++;
    for (int w = 0; w < c->wrt_count; w++) {
        const clrun_tensor_type *t = clrun_graph_tensor_type(g, c->wrt[w]);
        uint64_t n = clrun_tensor_elements(t);
        double *device = read_output(&r, 1 + w, t);
        if (c->unused >> w & 1u) {
            for (uint64_t k = 0; k < n; k++)
                if (device[k] != 0)
                    fail_msg("%s: unused wrt %d element %llu is %g, not 0", c->name, w,
                             (unsigned long long)k, device[k]);
            free(device);
            continue;
        }
        double *fd = malloc(n * sizeof(double) + 1);
        assert_non_null(fd);
        if (gref_fd_grad(g, host, loss, c->wrt[w], FD_STEP, fd, err, sizeof err) != 0)
            fail_msg("%s (seed %llu): %s", c->name, (unsigned long long)c->seed, err);
        double scale = 0;
        for (uint64_t k = 0; k < n; k++)
            scale = fmax(scale, fabs(fd[k]));
        double tol = TOLERANCE * scale + FLOOR;
        for (uint64_t k = 0; k < n; k++) {
            double e = fabs(device[k] - fd[k]);
            checked[at].worst = fmax(checked[at].worst, e / tol);
            if (!(e <= tol)) {
                clrun_graph_write(g, stderr); /* the case, to replay */
                fail_msg("%s (seed %llu): gradient of '%s' element %llu of %llu: device %.9g, "
                         "finite differences %.9g (largest magnitude %.3g)", c->name,
                         (unsigned long long)c->seed, clrun_graph_tensor_name(g, c->wrt[w]),
                         (unsigned long long)k, (unsigned long long)n, device[k], fd[k], scale);
            }
        }
        free(fd);
        free(device);
    }
    run_free(ctx, &r);
    clrun_graph_destroy(g);
    c->graph = NULL;
}

/* ---- random shapes ------------------------------------------------------------------------ */


static clrun_tensor_type shape_of(int rank, const int64_t *dims)
{
    clrun_tensor_type t = {CLRUN_F32, rank, {0}};
    for (int d = 0; d < rank; d++)
        t.shape[d] = dims[d];
    return t;
}

/* ---- elementwise -------------------------------------------------------------------------- */

static void unary_rules_match_finite_differences(void **state)
{
    (void)state;
    static const struct {
        const char *op;
        double lo, hi;
        bool kink_at_0;
    } ops[] = {
        {"neg", -3, 3, false},       {"abs", -3, 3, true},         {"relu", -3, 3, true},
        {"leaky_relu", -3, 3, true}, {"elu", -3, 3, true},         {"celu", -3, 3, true},
        {"selu", -3, 3, true},       {"sigmoid", -6, 6, false},    {"tanh", -3, 3, false},
        {"exp", -3, 3, false},       {"log", 0.1, 5, false},       {"sqrt", 0.1, 5, false},
        {"rsqrt", 0.2, 5, false},    {"reciprocal", -4, 4, false}, {"sin", -4, 4, false},
        {"cos", -4, 4, false},       {"erf", -3, 3, false},        {"softplus", -5, 5, false},
        {"softsign", -5, 5, false},  {"gelu", -3, 3, false},       {"gelu_erf", -4, 4, false},
        {"hard_sigmoid", -5, 5, false}, {"hard_swish", -5, 5, false}, {"clip", -3, 3, false},
        {"scale", -3, 3, false},     {"copy", -3, 3, false},       {"floor", -5, 5, false},
        {"ceil", -5, 5, false},      {"round", -5, 5, false},      {"sign", -3, 3, true},
    };
    int rounds = clrun_test_rounds(3);
    for (int k = 0; k < (int)(sizeof ops / sizeof ops[0]); k++)
        for (int round = 0; round < rounds; round++) {
            const char *op = ops[k].op;
            gcase c = begin(op, "", seed_of(0, k, round));
            clrun_tensor_type t = random_type(&c.rng, CLRUN_F32, round == 0 ? 0 : 1, 4, 5);
            fill_spec f = span(ops[k].lo, ops[k].hi);
            if (ops[k].kink_at_0)
                f = away(f, 0, 0.02);
            clrun_attr attrs[2];
            int n = 0;
            if (!strcmp(op, "reciprocal")) {
                f = away(f, 0, 0.25);
            } else if (!strcmp(op, "floor") || !strcmp(op, "ceil") || !strcmp(op, "round")) {
                f.period = 0.5, f.margin = 0.02; /* steps at integers, round's at halves */
            } else if (!strcmp(op, "hard_swish")) {
                f = away(away(f, -3, 0.02), 3, 0.02);
            } else if (!strcmp(op, "hard_sigmoid") || !strcmp(op, "scale")) {
                double alpha = uniform(&c.rng, 0.2, 1) * (pick(&c.rng, 2) ? 1 : -1);
                double beta = pick(&c.rng, 2) ? uniform(&c.rng, -0.5, 0.5) : 0.5;
                attrs[n++] = attr_float("alpha", alpha);
                if (beta != 0.5 || !strcmp(op, "scale"))
                    attrs[n++] = attr_float("beta", beta);
                if (!strcmp(op, "hard_sigmoid"))
                    f = away(away(f, -beta / alpha, 0.02 / fabs(alpha) + 0.02),
                             (1 - beta) / alpha, 0.02 / fabs(alpha) + 0.02);
            } else if (!strcmp(op, "leaky_relu") || !strcmp(op, "elu") || !strcmp(op, "celu")) {
                if (pick(&c.rng, 2))
                    attrs[n++] = attr_float("alpha", uniform(&c.rng, 0.1, 2));
            } else if (!strcmp(op, "selu") && pick(&c.rng, 2)) {
                attrs[n++] = attr_float("alpha", uniform(&c.rng, 0.5, 2));
                attrs[n++] = attr_float("gamma", uniform(&c.rng, 0.5, 2));
            } else if (!strcmp(op, "clip")) {
                int which = round % 4; /* both bounds, min only, max only, neither */
                if (which == 0 || which == 1) {
                    double lo = uniform(&c.rng, -2, 0);
                    attrs[n++] = attr_float("min", lo);
                    f = away(f, lo, 0.02);
                }
                if (which == 0 || which == 2) {
                    double hi = uniform(&c.rng, 0, 2);
                    attrs[n++] = attr_float("max", hi);
                    f = away(f, hi, 0.02);
                }
            }
            clrun_tensor_id x = input(&c, t, f, true);
            check(&c, node(&c, op, &x, 1, attrs, n));
        }
}

/* cast: f32 through f64 and back (both casts' rules), and f32 to f32. */
static void cast_rule_matches_finite_differences(void **state)
{
    (void)state;
    int rounds = clrun_test_rounds(3);
    for (int round = 0; round < rounds; round++) {
        gcase c = begin("cast", round % 2 ? "f32 to f32" : "f32 to f64 to f32", seed_of(1, 0, round));
        clrun_tensor_id x = input(&c, random_type(&c.rng, CLRUN_F32, 0, 3, 5), span(-3, 3), true);
        clrun_attr to64 = attr_int("to", CLRUN_F64), to32 = attr_int("to", CLRUN_F32);
        clrun_tensor_id y = x;
        if (round % 2 == 0) {
            y = node(&c, "cast", &y, 1, &to64, 1);
            clrun_tensor_id in[2] = {y, y};
            y = node(&c, "mul", in, 2, NULL, 0); /* a product in f64 between the casts */
        }
        check(&c, node(&c, "cast", &y, 1, &to32, 1));
    }
}

/* The operand shapes of round `round`: [3, 1, 5] against [4, 5], a rank-0 scalar against a
 * tensor, equal shapes, then random broadcasting (either side). */
static void binary_shapes(gcase *c, int round, clrun_tensor_type *a, clrun_tensor_type *b)
{
    clrun_tensor_type out = random_type(&c->rng, CLRUN_F32, 1, 4, 4);
    switch (round % 4) {
    case 0:
        *a = shape_of(3, (int64_t[]){3, 1, 5});
        *b = shape_of(2, (int64_t[]){4, 5});
        break;
    case 1:
        *a = shape_of(0, NULL);
        *b = out;
        break;
    case 2:
        *a = out;
        *b = out;
        break;
    default:
        *a = broadcastable(&c->rng, &out, CLRUN_F32);
        *b = broadcastable(&c->rng, &out, CLRUN_F32);
        if (pick(&c->rng, 2))
            *a = out;
        break;
    }
    if (pick(&c->rng, 2)) {
        clrun_tensor_type s = *a;
        *a = *b, *b = s;
    }
}

static void binary_rules_broadcast_and_match_finite_differences(void **state)
{
    (void)state;
    static const char *const ops[] = {"add", "sub", "mul", "div", "pow", "maximum", "minimum", "prelu"};
    int rounds = clrun_test_rounds(4);
    for (int k = 0; k < (int)(sizeof ops / sizeof ops[0]); k++)
        for (int round = 0; round < rounds + 1; round++) {
            const char *op = ops[k];
            bool shared = round == rounds; /* the last: op(x, x) */
            gcase c = begin(op, shared ? "of one tensor twice" : "", seed_of(2, k, round));
            fill_spec fa = span(-3, 3), fb = span(-3, 3);
            if (!strcmp(op, "div")) {
                fb = away(span(-2, 2), 0, 0.5);
            } else if (!strcmp(op, "pow")) {
                fa = span(0.2, 3), fb = span(-2, 2);
            } else if (!strcmp(op, "maximum") || !strcmp(op, "minimum")) {
                fa = grid(-3, 3, 0.1), fb = grid(-2.95, 2.95, 0.1); /* never within 0.05 */
            } else if (!strcmp(op, "prelu")) {
                fa = away(fa, 0, 0.02), fb = span(-1, 1.5);
            }
            if (shared) {
                if (!strcmp(op, "maximum") || !strcmp(op, "minimum")) {
                    clrun_graph_destroy(c.graph);
                    continue; /* a tie everywhere */
                }
                if (!strcmp(op, "div"))
                    fa = fb;
                clrun_tensor_id x = input(&c, random_type(&c.rng, CLRUN_F32, 0, 3, 5), fa, true);
                clrun_tensor_id in[2] = {x, x};
                check(&c, node(&c, op, in, 2, NULL, 0));
                continue;
            }
            clrun_tensor_type ta, tb;
            binary_shapes(&c, round, &ta, &tb);
            /* now and then the gradient of one side only */
            int which = round >= 4 ? pick(&c.rng, 3) : 2;
            bool smooth = !strcmp(op, "add") || !strcmp(op, "sub") || !strcmp(op, "mul");
            clrun_tensor_id in[2] = {input(&c, ta, fa, which != 1), -1};
            in[1] = smooth && pick(&c.rng, 2) ? constant(&c, tb, -3, 3, which != 0)
                                             : input(&c, tb, fb, which != 0);
            check(&c, node(&c, op, in, 2, NULL, 0));
        }
}

static void where_rule_broadcasts_and_matches(void **state)
{
    (void)state;
    int rounds = clrun_test_rounds(4);
    for (int round = 0; round < rounds; round++) {
        gcase c = begin("where", "", seed_of(3, 0, round));
        clrun_tensor_type out = random_type(&c.rng, CLRUN_F32, 1, 4, 4);
        clrun_tensor_type cond = broadcastable(&c.rng, &out, CLRUN_BOOL);
        if (round == 0) /* the condition broadcast over a and b of the full shape */
            cond.rank = 1, cond.shape[0] = out.shape[out.rank - 1];
        clrun_tensor_type ta = round == 0 ? out : broadcastable(&c.rng, &out, CLRUN_F32);
        clrun_tensor_type tb = round == 1 ? shape_of(0, NULL) : broadcastable(&c.rng, &out, CLRUN_F32);
        if (round >= 2 && pick(&c.rng, 2))
            ta = out;
        clrun_tensor_id in[3] = {input(&c, cond, span(0, 1), false), input(&c, ta, span(-3, 3), true),
                                 input(&c, tb, span(-3, 3), true)};
        check(&c, node(&c, "where", in, 3, NULL, 0));
    }
}

/* ---- matmul ------------------------------------------------------------------------------- */

static void matmul_rule_matches_with_every_attribute(void **state)
{
    (void)state;
    /* batch shapes of a and b: none; equal; broadcast against each other; a batched over a 2-D
     * b (the flattened weight product); a 2-D a under a batched b */
    static const char *const variants[] = {"2-D", "batched", "broadcast batches",
                                           "batched a, 2-D b", "2-D a, batched b"};
    int rounds = clrun_test_rounds(3);
    for (int v = 0; v < 5; v++)
        for (int round = 0; round < 2 * rounds; round++) {
            gcase c = begin("matmul", variants[v], seed_of(4, v, round));
            int64_t M = between(&c.rng, 1, 7), K = between(&c.rng, 1, 7), N = between(&c.rng, 1, 7);
            bool ta = round % 2, tb = round / 2 % 2;
            if (round >= 4)
                ta = pick(&c.rng, 2), tb = pick(&c.rng, 2);
            clrun_tensor_type a = {CLRUN_F32, 0, {0}}, b = {CLRUN_F32, 0, {0}};
            int64_t b0 = between(&c.rng, 2, 3), b1 = between(&c.rng, 1, 3);
            if (v == 1)
                a = shape_of(2, (int64_t[]){b0, b1}), b = a;
            else if (v == 2)
                a = shape_of(2, (int64_t[]){b0, 1}), b = shape_of(1, (int64_t[]){b1});
            else if (v == 3)
                a = round % 3 ? shape_of(1, (int64_t[]){b0}) : shape_of(2, (int64_t[]){b0, b1});
            else if (v == 4)
                b = shape_of(1, (int64_t[]){b0});
            a.shape[a.rank++] = ta ? K : M, a.shape[a.rank++] = ta ? M : K;
            b.shape[b.rank++] = tb ? N : K, b.shape[b.rank++] = tb ? K : N;
            clrun_tensor_id in[3] = {input(&c, a, span(-1, 1), true), weight(&c, b, -1, 1), -1};
            int n = 2;
            if (pick(&c.rng, 2))
                in[n++] = weight(&c, shape_of(1, (int64_t[]){N}), -1, 1);
            clrun_attr attrs[3];
            int na = 0;
            if (ta || pick(&c.rng, 2))
                attrs[na++] = attr_int("transpose_a", ta);
            if (tb || pick(&c.rng, 2))
                attrs[na++] = attr_int("transpose_b", tb);
            if (pick(&c.rng, 2))
                attrs[na++] = attr_float("alpha", uniform(&c.rng, -2, 2));
            check(&c, node(&c, "matmul", in, n, attrs, na));
        }
}

/* ---- normalisations, reductions, the fused loss ------------------------------------------- */

static void softmax_rules_match_on_every_axis_and_causal(void **state)
{
    (void)state;
    int rounds = clrun_test_rounds(4);
    for (int k = 0; k < 2; k++)
        for (int round = 0; round < 2 * rounds; round++) {
            const char *op = k ? "logsoftmax" : "softmax";
            bool causal = k == 0 && round % 3 == 0;
            gcase c = begin(op, causal ? "causal" : "", seed_of(5, k, round));
            clrun_tensor_type t = random_type(&c.rng, CLRUN_F32, causal ? 2 : 1, 4, 6);
            clrun_tensor_id x = input(&c, t, span(-4, 4), true);
            clrun_attr attrs[2] = {attr_int("axis", causal ? -1 : between(&c.rng, -t.rank, t.rank - 1)),
                                   attr_int("causal", 1)};
            int n = causal ? 2 : round % 4 == 1 ? 0 : 1;
            check(&c, node(&c, op, &x, 1, attrs, n));
        }
}

static void layernorm_rule_matches_on_axes_with_and_without_beta(void **state)
{
    (void)state;
    int rounds = clrun_test_rounds(3);
    for (int round = 0; round < 3 * rounds; round++) {
        gcase c = begin("layernorm", "", seed_of(6, 0, round));
        clrun_tensor_type t = random_type(&c.rng, CLRUN_F32, 2, 4, 5);
        /* A group of a few elements all close together has a tiny variance, where the gradient
         * (of scale 1/sqrt(var + eps)) is too curved for finite differences and loses f32
         * precision on the device: an eps of at least 0.01, or with the default eps (1e-5)
         * groups of 4 elements or more, which are never that close. */
        bool default_eps = pick(&c.rng, 2);
        t.shape[t.rank - 1] = between(&c.rng, default_eps ? 4 : 2, 7);
        /* axis -1, -2, then any (positive or negative) */
        int axis = round % 3 == 0 ? t.rank - 1 : round % 3 == 1 ? t.rank - 2
                                                                : (int)between(&c.rng, 0, t.rank - 1);
        int64_t written = round % 3 < 2 || pick(&c.rng, 2) ? axis - t.rank : axis;
        clrun_tensor_type p = {CLRUN_F32, 1, {1}};
        if (pick(&c.rng, 2)) { /* [D], flattened */
            for (int d = axis; d < t.rank; d++)
                p.shape[0] *= t.shape[d];
        } else {
            p.rank = t.rank - axis;
            for (int d = axis; d < t.rank; d++)
                p.shape[d - axis] = t.shape[d];
        }
        bool beta = round % 2 == 0;
        clrun_tensor_id in[3] = {input(&c, t, span(-3, 3), true), weight(&c, p, 0.5, 2), -1};
        if (beta)
            in[2] = weight(&c, p, -1, 1);
        clrun_attr attrs[2];
        int na = 0;
        if (written != -1 || pick(&c.rng, 2))
            attrs[na++] = attr_int("axis", written);
        if (!default_eps)
            attrs[na++] = attr_float("eps", uniform(&c.rng, 0.01, 0.1));
        check(&c, node(&c, "layernorm", in, beta ? 3 : 2, attrs, na));
    }
}

static void batchnorm_rule_matches_in_inference_form(void **state)
{
    (void)state;
    int rounds = clrun_test_rounds(3);
    for (int round = 0; round < 2 * rounds; round++) {
        gcase c = begin("batchnorm", "", seed_of(7, 0, round));
        clrun_tensor_type t = random_type(&c.rng, CLRUN_F32, 2, 4, 5);
        clrun_tensor_type p = {CLRUN_F32, 1, {t.shape[1]}};
        clrun_tensor_id in[5] = {input(&c, t, span(-3, 3), true), weight(&c, p, 0.5, 2),
                                 weight(&c, p, -1, 1), -1, -1};
        /* the statistics: no gradient flows into them */
        in[3] = pick(&c.rng, 2) ? input(&c, p, span(-1, 1), false) : constant(&c, p, -1, 1, false);
        in[4] = pick(&c.rng, 2) ? input(&c, p, span(0.5, 2), false) : constant(&c, p, 0.5, 2, false);
        clrun_attr eps = attr_float("eps", uniform(&c.rng, 1e-5, 0.1));
        check(&c, node(&c, "batchnorm", in, 5, &eps, pick(&c.rng, 2)));
    }
}

static void reduction_rules_match_on_axes_and_keepdims(void **state)
{
    (void)state;
    static const char *const ops[] = {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min",
                                      "reduce_l2", "reduce_sum_square"};
    int rounds = clrun_test_rounds(4);
    for (int k = 0; k < 6; k++)
        for (int round = 0; round < rounds; round++) {
            gcase c = begin(ops[k], "", seed_of(8, k, round));
            clrun_tensor_type t = random_type(&c.rng, CLRUN_F32, 1, 4, 5);
            bool extreme = k == 2 || k == 3;
            clrun_tensor_id x = input(&c, t, extreme ? distinct(0.05) : span(-2, 2), true);
            int64_t axes[CLRUN_MAX_DIMS];
            int n = 0;
            for (int d = 0; d < t.rank; d++)
                if (pick(&c.rng, 2))
                    axes[n++] = pick(&c.rng, 2) ? d : d - t.rank;
            clrun_attr attrs[2] = {attr_int("keepdims", round % 2), attr_ints("axes", n, axes)};
            /* all axes: the attribute absent or empty */
            check(&c, node(&c, ops[k], &x, 1, attrs, n > 0 || pick(&c.rng, 2) ? 2 : 1));
        }
    for (int k = 0; k < 2; k++)
        for (int round = 0; round < rounds; round++) {
            const char *op = k ? "global_maxpool" : "global_avgpool";
            gcase c = begin(op, "", seed_of(9, k, round));
            clrun_tensor_type x = {CLRUN_F32, 4, {between(&c.rng, 1, 2), between(&c.rng, 1, 3),
                                                  between(&c.rng, 1, 5), between(&c.rng, 1, 5)}};
            clrun_tensor_id in = input(&c, x, k ? distinct(0.05) : span(-3, 3), true);
            check(&c, node(&c, op, &in, 1, NULL, 0));
        }
}

static void softmax_xent_rule_matches_with_labels_and_ignore_index(void **state)
{
    (void)state;
    int rounds = clrun_test_rounds(3);
    for (int round = 0; round < 4 * rounds; round++) {
        gcase c = begin("softmax_xent", "", seed_of(10, 0, round));
        int64_t B = between(&c.rng, 1, 6), T = between(&c.rng, 1, 4), C = between(&c.rng, 2, 7);
        bool rows3 = round % 3 == 2;
        clrun_tensor_type logits = rows3 ? shape_of(3, (int64_t[]){B, T, C}) : shape_of(2, (int64_t[]){B, C});
        clrun_tensor_type labels = rows3 ? shape_of(2, (int64_t[]){B, T}) : shape_of(1, (int64_t[]){B});
        labels.dtype = round % 2 ? CLRUN_I64 : CLRUN_I32;
        /* ignore_index: none, -1 (labels -1 among them), or one of the classes */
        int ignore = round / 2 % 3;
        int64_t ignored = ignore == 1 ? -1 : between(&c.rng, 0, C - 1);
        clrun_tensor_id in[2] = {input(&c, logits, span(-4, 4), true),
                                 input(&c, labels, span(ignore == 1 ? -1 : 0, (double)C - 1), false)};
        clrun_attr a = attr_int("ignore_index", ignored);
        check(&c, node(&c, "softmax_xent", in, 2, &a, ignore ? 1 : 0));
    }
}

/* ---- layout ------------------------------------------------------------------------------- */

static void reshape_transpose_expand_rules_match(void **state)
{
    (void)state;
    int rounds = clrun_test_rounds(4);
    for (int round = 0; round < rounds; round++) {
        gcase c = begin("reshape", "", seed_of(11, 0, round));
        clrun_tensor_type t = random_type(&c.rng, CLRUN_F32, 0, 4, 4);
        int64_t n = (int64_t)clrun_tensor_elements(&t), shape[CLRUN_MAX_DIMS];
        int rank = 0;
        switch (round % 3) {
        case 0: shape[rank++] = pick(&c.rng, 2) ? -1 : n; break;
        case 1: /* the dims reversed */
            for (int d = t.rank - 1; d >= 0; d--)
                shape[rank++] = t.shape[d];
            break;
        default: shape[rank++] = t.rank ? t.shape[0] : 1, shape[rank++] = -1, shape[rank++] = 1; break;
        }
        clrun_tensor_id x = input(&c, t, span(-3, 3), true);
        clrun_attr a = attr_ints("shape", rank, shape);
        check(&c, node(&c, "reshape", &x, 1, &a, 1));
    }
    for (int round = 0; round < rounds; round++) {
        gcase c = begin("transpose", "", seed_of(11, 1, round));
        clrun_tensor_type t = random_type(&c.rng, CLRUN_F32, 1, 5, 4);
        int64_t perm[CLRUN_MAX_DIMS];
        for (int d = 0; d < t.rank; d++)
            perm[d] = d;
        for (int d = t.rank - 1; d > 0; d--) {
            int j = pick(&c.rng, d + 1);
            int64_t s = perm[d];
            perm[d] = perm[j], perm[j] = s;
        }
        clrun_tensor_id x = input(&c, t, span(-3, 3), true);
        clrun_attr a = attr_ints("perm", t.rank, perm);
        check(&c, node(&c, "transpose", &x, 1, &a, 1));
    }
    for (int round = 0; round < rounds; round++) {
        gcase c = begin("expand", "", seed_of(11, 2, round));
        clrun_tensor_type out = random_type(&c.rng, CLRUN_F32, 1, 4, 4);
        clrun_tensor_type x = round == 0 ? shape_of(0, NULL) : broadcastable(&c.rng, &out, CLRUN_F32);
        int64_t shape[CLRUN_MAX_DIMS];
        for (int d = 0; d < out.rank; d++) /* a 1 in shape keeps x's dim */
            shape[d] = d >= out.rank - x.rank && pick(&c.rng, 3) == 0 ? 1 : out.shape[d];
        clrun_tensor_id in = input(&c, x, span(-3, 3), true);
        clrun_attr a = attr_ints("shape", out.rank, shape);
        check(&c, node(&c, "expand", &in, 1, &a, 1));
    }
}

static void slice_split_concat_pad_rules_match(void **state)
{
    (void)state;
    int rounds = clrun_test_rounds(4);
    for (int round = 0; round < rounds; round++) { /* single-axis form */
        gcase c = begin("slice", "axis form", seed_of(12, 0, round));
        clrun_tensor_type t = random_type(&c.rng, CLRUN_F32, 1, 4, 6);
        int axis = (int)between(&c.rng, 0, t.rank - 1);
        int64_t n = t.shape[axis], start = between(&c.rng, 0, n - 1), end = between(&c.rng, start + 1, n);
        clrun_tensor_id x = input(&c, t, span(-3, 3), true);
        clrun_attr a[3] = {attr_int("axis", pick(&c.rng, 2) ? axis : axis - t.rank),
                           attr_int("start", pick(&c.rng, 2) ? start : start - n),
                           attr_int("end", end == n || pick(&c.rng, 2) ? end : end - n)};
        check(&c, node(&c, "slice", &x, 1, a, 3));
    }
    for (int round = 0; round < rounds; round++) { /* ONNX form, step 1: negatives, clamping */
        gcase c = begin("slice", "onnx form", seed_of(12, 1, round));
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
            steps[i] = 1;
            int64_t first = between(&c.rng, 0, dim - 1), last = between(&c.rng, first + 1, dim);
            starts[i] = pick(&c.rng, 4) == 0 ? -1000 : first - dim * pick(&c.rng, 2);
            if (starts[i] == -1000)
                first = 0, last = between(&c.rng, 1, dim);
            ends[i] = pick(&c.rng, 4) == 0 ? (last == dim ? INT64_MAX : last) : last - dim * pick(&c.rng, 2);
            if (ends[i] == 0)
                ends[i] = dim + 5; /* past the end: clamped */
        }
        clrun_tensor_id x = input(&c, t, span(-3, 3), true);
        clrun_attr a[4] = {attr_ints("starts", n, starts), attr_ints("ends", n, ends),
                           attr_ints("axes", n, axes), attr_ints("steps", n, steps)};
        check(&c, node(&c, "slice", &x, 1, a, round % 2 ? 4 : 3));
    }
    for (int round = 0; round < rounds; round++) {
        gcase c = begin("split", "", seed_of(12, 2, round));
        clrun_tensor_type t = random_type(&c.rng, CLRUN_F32, 1, 4, 6);
        int axis = (int)between(&c.rng, 0, t.rank - 1);
        clrun_tensor_id x = input(&c, t, span(-3, 3), true);
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
        clrun_attr a[3] = {attr_int("axis", pick(&c.rng, 2) ? axis : axis - t.rank),
                           attr_ints("split", parts, sizes), attr_int("index", pick(&c.rng, parts))};
        if (round % 2) { /* equal parts */
            int64_t p = dim % 2 == 0 ? 2 : dim % 3 == 0 ? 3 : 1;
            a[1] = attr_int("parts", p);
            a[2] = attr_int("index", pick(&c.rng, (int)p));
        }
        check(&c, node(&c, "split", &x, 1, a, 3));
    }
    for (int round = 0; round < rounds; round++) {
        gcase c = begin("concat", "", seed_of(12, 3, round));
        clrun_tensor_type t = random_type(&c.rng, CLRUN_F32, 1, 4, 4);
        int axis = (int)between(&c.rng, 0, t.rank - 1), n = (int)between(&c.rng, 1, 3);
        clrun_tensor_id in[4];
        for (int i = 0; i < n; i++) {
            clrun_tensor_type ti = t;
            ti.shape[axis] = between(&c.rng, 1, 4);
            in[i] = i == 1 && pick(&c.rng, 2) ? constant(&c, ti, -3, 3, true)
                                              : input(&c, ti, span(-3, 3), true);
        }
        if (round % 2) /* the first input again: its gradient sums both slices */
            in[n++] = in[0];
        clrun_attr a = attr_int("axis", pick(&c.rng, 2) ? axis : axis - t.rank);
        check(&c, node(&c, "concat", in, n, &a, 1));
    }
    for (int round = 0; round < rounds; round++) { /* constant mode */
        gcase c = begin("pad", "", seed_of(12, 4, round));
        clrun_tensor_type t = random_type(&c.rng, CLRUN_F32, 1, 4, 4);
        int64_t pads[2 * CLRUN_MAX_DIMS];
        for (int d = 0; d < t.rank; d++) {
            pads[d] = between(&c.rng, 0, 3);
            pads[t.rank + d] = between(&c.rng, 0, 3);
        }
        clrun_tensor_id x = input(&c, t, span(-3, 3), true);
        clrun_attr a[3] = {attr_ints("pads", 2 * t.rank, pads), attr_float("value", uniform(&c.rng, -2, 2)),
                           attr_int("mode", 0)};
        check(&c, node(&c, "pad", &x, 1, a, 1 + pick(&c.rng, 3)));
    }
}

/* ---- convolution and pooling -------------------------------------------------------------- */

static void conv2d_rule_matches_with_strides_pads_dilation_groups(void **state)
{
    (void)state;
    static const char *const variants[] = {"plain", "stride 2", "asymmetric pads", "dilation 2",
                                           "groups 2", "depthwise", "everything at once",
                                           "few positions"};
    int rounds = clrun_test_rounds(3);
    for (int v = 0; v < 8; v++)
        for (int round = 0; round < rounds; round++) {
            gcase c = begin("conv2d", variants[v], seed_of(13, v, round));
            bool all = v == 6;
            int64_t groups = v == 4 || (all && pick(&c.rng, 2)) ? 2 : 1;
            int64_t Cg = between(&c.rng, 1, 3), Og = between(&c.rng, 1, 3);
            if (v == 5) /* depthwise: one input channel per group, a multiplier of outputs */
                groups = between(&c.rng, 2, 4), Cg = 1, Og = between(&c.rng, 1, 2);
            int64_t N = between(&c.rng, 1, 2), KH = between(&c.rng, 1, 3), KW = between(&c.rng, 1, 3);
            int64_t stride[2] = {1, 1}, dilation[2] = {1, 1}, pads[4] = {0, 0, 0, 0};
            if (v == 1 || (all && pick(&c.rng, 2)))
                stride[0] = 2, stride[1] = between(&c.rng, 1, 2);
            if (v == 3 || (all && pick(&c.rng, 2)))
                dilation[0] = between(&c.rng, 1, 2), dilation[1] = 2;
            if (v == 1) /* sizes the stride does not divide: rows the stride drops */
                KH = 3;
            if (v == 2) /* room for pads that differ on every side */
                KH = 2 + pick(&c.rng, 2), KW = 2 + pick(&c.rng, 2);
            if (v == 2 || all || pick(&c.rng, 3) == 0)
                for (int k = 0; k < 4; k++)
                    pads[k] = between(&c.rng, 0, (k % 2 ? KW - 1 : KH - 1) * dilation[k % 2]);
            if (v == 2 && pads[0] == pads[2])
                pads[2] = pads[0] ? 0 : 1;
            /* the dilated kernel fits the image without padding; odd remainders */
            int64_t H = dilation[0] * (KH - 1) + between(&c.rng, 1, 6);
            int64_t W = dilation[1] * (KW - 1) + between(&c.rng, 1, 6);
            if (v == 7) { /* output channels >= N * OH * OW: the input gradient as one product
                           * over every image's positions, in chunks of images, and col2im */
                N = between(&c.rng, 2, 3), KH = KW = 3, H = between(&c.rng, 1, 2), W = between(&c.rng, 1, 2);
                stride[0] = stride[1] = between(&c.rng, 1, 2);
                for (int k = 0; k < 4; k++)
                    pads[k] = 1;
                int64_t oh = (H + 2 - 3) / stride[0] + 1, ow = (W + 2 - 3) / stride[1] + 1;
                Og = N * oh * ow + between(&c.rng, 0, 2);
            }
            clrun_tensor_type x = {CLRUN_F32, 4, {N, groups * Cg, H, W}};
            clrun_tensor_type w = {CLRUN_F32, 4, {groups * Og, Cg, KH, KW}};
            clrun_tensor_type b = {CLRUN_F32, 1, {groups * Og}};
            clrun_tensor_id in[3] = {input(&c, x, span(-1, 1), true), weight(&c, w, -1, 1), -1};
            int n = 2;
            if (pick(&c.rng, 2))
                in[n++] = weight(&c, b, -1, 1);
            clrun_attr a[4];
            int na = 0;
            if (stride[0] != 1 || stride[1] != 1 || pick(&c.rng, 2))
                a[na++] = attr_ints("stride", 2, stride);
            if (dilation[0] != 1 || dilation[1] != 1)
                a[na++] = attr_ints("dilation", 2, dilation);
            if (groups != 1)
                a[na++] = attr_int("groups", groups);
            if (pads[0] == pads[2] && pads[1] == pads[3] && pick(&c.rng, 2))
                a[na++] = attr_ints("pad", 2, pads); /* both sides alike */
            else if (pads[0] || pads[1] || pads[2] || pads[3] || pick(&c.rng, 2))
                a[na++] = attr_ints("pads", 4, pads);
            check(&c, node(&c, "conv2d", in, n, a, na));
        }
}

static void pool_rules_match_with_ceil_mode_and_padding(void **state)
{
    (void)state;
    /* ceil_mode with padding; count_include_pad (avg) or dilation (max); overlapping windows;
     * anything */
    static const char *const variants[] = {"ceil_mode", "count_include_pad or dilation",
                                           "overlapping windows", "random"};
    int rounds = clrun_test_rounds(3);
    for (int k = 0; k < 2; k++)
        for (int v = 0; v < 4; v++)
            for (int round = 0; round < rounds; round++) {
                bool is_max = k == 0;
                const char *op = is_max ? "maxpool2d" : "avgpool2d";
                gcase c = begin(op, variants[v], seed_of(14, 4 * k + v, round));
                int64_t kernel[2] = {between(&c.rng, 1, 3), between(&c.rng, 1, 3)};
                int64_t stride[2] = {between(&c.rng, 1, 3), between(&c.rng, 1, 3)};
                int64_t dilation[2] = {1, 1};
                if (is_max && (v == 1 || (v == 3 && pick(&c.rng, 2))))
                    dilation[0] = between(&c.rng, 1, 2), dilation[1] = 2;
                if (v == 2)
                    kernel[0] = kernel[1] = 3, stride[0] = 1, stride[1] = 2;
                if (v == 0)
                    kernel[0] = 2 + pick(&c.rng, 2), stride[0] = 2;
                int64_t span_h = dilation[0] * (kernel[0] - 1) + 1;
                int64_t span_w = dilation[1] * (kernel[1] - 1) + 1;
                clrun_tensor_type x = {CLRUN_F32, 4, {between(&c.rng, 1, 2), between(&c.rng, 1, 3),
                                                      span_h + between(&c.rng, 0, 5),
                                                      span_w + between(&c.rng, 0, 5)}};
                int64_t pads[4] = {between(&c.rng, 0, span_h / 2), between(&c.rng, 0, span_w / 2),
                                   between(&c.rng, 0, span_h / 2), between(&c.rng, 0, span_w / 2)};
                if (v == 0 || v == 1) /* some padding to count or not */
                    pads[0] = span_h / 2 > 0 ? span_h / 2 : pads[0];
                bool ceil_mode = v == 0 || (v == 3 && pick(&c.rng, 2));
                clrun_tensor_id in = input(&c, x, is_max ? distinct(0.05) : span(-3, 3), true);
                clrun_attr a[6];
                int na = 0;
                a[na++] = attr_ints("kernel", 2, kernel);
                if (v != 3 || pick(&c.rng, 2))
                    a[na++] = attr_ints("stride", 2, stride);
                if (pads[0] == pads[2] && pads[1] == pads[3] && pick(&c.rng, 2))
                    a[na++] = attr_ints("pad", 2, pads);
                else
                    a[na++] = attr_ints("pads", 4, pads);
                if (ceil_mode || pick(&c.rng, 2))
                    a[na++] = attr_int("ceil_mode", ceil_mode);
                if (is_max && (dilation[0] != 1 || dilation[1] != 1))
                    a[na++] = attr_ints("dilation", 2, dilation);
                if (!is_max && (v == 1 || (v == 3 && pick(&c.rng, 2))))
                    a[na++] = attr_int("count_include_pad", 1);
                check(&c, node(&c, op, &in, 1, a, na));
            }
}

/* ---- indexing and dropout ----------------------------------------------------------------- */

static void gather_rule_matches_in_both_forms(void **state)
{
    (void)state;
    int rounds = clrun_test_rounds(4);
    for (int round = 0; round < rounds; round++) { /* embedding: rows outside [0, V) give zeros */
        gcase c = begin("gather", "embedding form", seed_of(15, 0, round));
        int64_t V = between(&c.rng, 1, 6), D = between(&c.rng, 1, 5);
        clrun_tensor_type table = {CLRUN_F32, 2, {V, D}}, idx = random_type(&c.rng, CLRUN_F32, 0, 3, 4);
        idx.dtype = CLRUN_I32;
        clrun_tensor_id in[2] = {weight(&c, table, -3, 3), -1};
        in[1] = input(&c, idx, span(-2, (double)V + 1), false);
        check(&c, node(&c, "gather", in, 2, NULL, 0));
    }
    for (int round = 0; round < 2 * rounds; round++) { /* axis: negatives from the end */
        gcase c = begin("gather", "axis form", seed_of(15, 1, round));
        clrun_tensor_type data = random_type(&c.rng, CLRUN_F32, 1, 3, 5);
        int axis = (int)between(&c.rng, 0, data.rank - 1);
        int64_t len = data.shape[axis];
        clrun_tensor_type idx = random_type(&c.rng, CLRUN_F32, 0, 2, 4);
        idx.dtype = round % 2 ? CLRUN_I64 : CLRUN_I32;
        clrun_tensor_id in[2] = {input(&c, data, span(-3, 3), true),
                                 input(&c, idx, span((double)-len, (double)len - 1), false)};
        clrun_attr a = attr_int("axis", pick(&c.rng, 2) ? axis : axis - data.rank);
        check(&c, node(&c, "gather", in, 2, &a, 1));
    }
}

/* Dropout with its seed an input: the reference draws the same mask from the same seed. */
static void dropout_rule_matches_at_a_fixed_seed(void **state)
{
    (void)state;
    int rounds = clrun_test_rounds(4);
    for (int round = 0; round < rounds; round++) {
        gcase c = begin("dropout", "", seed_of(16, 0, round));
        clrun_tensor_type seed = {CLRUN_I64, round % 2, {1}};
        clrun_tensor_id in[2] = {input(&c, random_type(&c.rng, CLRUN_F32, 1, 3, 7), span(-3, 3), true),
                                 input(&c, seed, span(0, 1e9), false)};
        clrun_attr a[2] = {attr_float("ratio", uniform(&c.rng, 0.1, 0.9)), attr_int("stream", pick(&c.rng, 4))};
        check(&c, node(&c, "dropout", in, 2, a, round == 0 ? 0 : 2));
    }
}

/* ---- what the transform does besides the rules -------------------------------------------- */

/* A wrt the loss does not reach (an unconnected input, a constant, a batch norm's running mean,
 * which takes no gradient) gets zeros and is listed in `unused`; the others are still right. */
static void an_unreachable_wrt_gets_zeros_and_is_listed_unused(void **state)
{
    (void)state;
    gcase c = begin("batchnorm", "with unreachable wrt", seed_of(17, 0, 0));
    clrun_tensor_type t = {CLRUN_F32, 4, {2, 3, 2, 2}}, p = {CLRUN_F32, 1, {3}};
    clrun_tensor_id in[5] = {input(&c, t, span(-3, 3), true), weight(&c, p, 0.5, 2),
                             weight(&c, p, -1, 1), input(&c, p, span(-1, 1), true),
                             constant(&c, p, 0.5, 2, true)};
    input(&c, t, span(-1, 1), true);              /* read by no node */
    constant(&c, shape_of(0, NULL), 1, 2, true); /* likewise */
    c.unused = 1u << 3 | 1u << 4 | 1u << 5 | 1u << 6;
    check(&c, node(&c, "batchnorm", in, 5, NULL, 0));
}

/* A loss of more than one element, and an op on the loss' path without a rule, are refused by
 * name; nothing is built. */
static void a_wide_loss_and_an_op_without_a_rule_are_refused_by_name(void **state)
{
    (void)state;
    gcase c = begin("refusal", "", 1);
    clrun_tensor_type t = {CLRUN_F32, 2, {2, 3}};
    clrun_tensor_id x = input(&c, t, span(-1, 1), true);
    const char *wide_name[] = {"wide_out"}, *cum_name[] = {"cum_out"}, *loss_name[] = {"loss"};
    clrun_tensor_id wide, cum, loss;
    assert_int_equal(clrun_graph_add_node(c.graph, "tanh", &x, 1, wide_name, 1, NULL, 0, &wide), CLRUN_OK);
    clrun_attr axis = attr_int("axis", 1);
    assert_int_equal(clrun_graph_add_node(c.graph, "cumsum", &wide, 1, cum_name, 1, &axis, 1, &cum),
                     CLRUN_OK);
    assert_int_equal(clrun_graph_add_node(c.graph, "reduce_sum", &cum, 1, loss_name, 1, NULL, 0,
                                          &loss), CLRUN_OK);
    char err[512] = "";
    clrun_graph *out = c.graph; /* sentinels: must be cleared */
    int32_t sentinel = 0, *unused = &sentinel, unused_count = -1;
    assert_int_equal(clrun_graph_gradient(c.graph, wide, &x, 1, &out, &unused, &unused_count, err,
                                          sizeof err), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_null(out);
    assert_null(unused);
    if (!strstr(err, "wide_out") || !strstr(err, "f32[2, 3]") || !strstr(clrun_last_error(NULL), "wide_out"))
        fail_msg("message: %s", err);
    assert_int_equal(clrun_graph_gradient(c.graph, loss, &x, 1, &out, NULL, NULL, err, sizeof err),
                     CLRUN_ERROR_UNSUPPORTED);
    assert_null(out);
    if (!strstr(err, "'cumsum'") || !strstr(err, "cum_out") || !strstr(clrun_last_error(NULL), "cumsum"))
        fail_msg("message: %s", err);
    /* an intermediate as wrt */
    assert_int_equal(clrun_graph_gradient(c.graph, loss, &wide, 1, &out, NULL, NULL, err, sizeof err),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    if (!strstr(err, "wide_out"))
        fail_msg("message: %s", err);
    /* a rule that refuses an attribute form: a slice with a step of 2 (x's columns 0 and 2) */
    clrun_attr s[4] = {attr_ints("starts", 1, (int64_t[]){0}), attr_ints("ends", 1, (int64_t[]){3}),
                       attr_ints("axes", 1, (int64_t[]){1}), attr_ints("steps", 1, (int64_t[]){2})};
    clrun_tensor_id sl = node(&c, "slice", &x, 1, s, 4);
    clrun_tensor_id l2 = node(&c, "reduce_sum", &sl, 1, NULL, 0);
    assert_int_equal(clrun_graph_gradient(c.graph, l2, &x, 1, &out, NULL, NULL, err, sizeof err),
                     CLRUN_ERROR_UNSUPPORTED);
    assert_null(out);
    if (!strstr(err, "slice") || !strstr(err, "step of 2"))
        fail_msg("message: %s", err);
    clrun_graph_destroy(c.graph);
}

/* A small CNN classifier with most rule families: conv, batchnorm, gelu, pooling, layernorm,
 * matmul, softmax_xent, made a mean. Its loss in *loss. */
static gcase classifier(clrun_tensor_id *loss)
{
    gcase c = begin("classifier", "", seed_of(18, 0, 0));
    clrun_tensor_type x = {CLRUN_F32, 4, {4, 3, 9, 9}}, w = {CLRUN_F32, 4, {6, 3, 3, 3}};
    /* conv: [4, 6, 5, 4]; pool: [4, 6, 3, 2] */
    clrun_tensor_type ch = {CLRUN_F32, 1, {6}}, fc = {CLRUN_F32, 2, {36, 5}}, fb = {CLRUN_F32, 1, {5}};
    clrun_tensor_type flat = {CLRUN_F32, 1, {36}}, labels = {CLRUN_I32, 1, {4}};
    clrun_tensor_id in[3] = {input(&c, x, span(-1, 1), true), constant(&c, w, -0.5, 0.5, true),
                             constant(&c, ch, -0.1, 0.1, true)};
    clrun_attr conv[2] = {attr_ints("stride", 2, (int64_t[]){2, 2}),
                          attr_ints("pads", 4, (int64_t[]){1, 0, 1, 1})};
    clrun_tensor_id y = node(&c, "conv2d", in, 3, conv, 2);
    clrun_tensor_id bn[5] = {y, constant(&c, ch, 0.5, 1.5, true), constant(&c, ch, -0.2, 0.2, true),
                             constant(&c, ch, -0.1, 0.1, false), constant(&c, ch, 0.5, 1.5, false)};
    y = node(&c, "batchnorm", bn, 5, NULL, 0);
    y = node(&c, "gelu", &y, 1, NULL, 0);
    clrun_attr pool[2] = {attr_ints("kernel", 2, (int64_t[]){2, 2}), attr_int("ceil_mode", 1)};
    y = node(&c, "maxpool2d", &y, 1, pool, 2);
    y = node(&c, "reshape", &y, 1, (clrun_attr[]){attr_ints("shape", 2, (int64_t[]){4, -1})}, 1);
    clrun_tensor_id ln[3] = {y, constant(&c, flat, 0.5, 1.5, true), constant(&c, flat, -0.2, 0.2, true)};
    y = node(&c, "layernorm", ln, 3, NULL, 0);
    clrun_tensor_id mm[3] = {y, constant(&c, fc, -0.5, 0.5, true), constant(&c, fb, -0.1, 0.1, true)};
    y = node(&c, "matmul", mm, 3, NULL, 0);
    clrun_tensor_id xe[2] = {y, input(&c, labels, span(0, 4), false)};
    y = node(&c, "softmax_xent", xe, 2, NULL, 0);
    *loss = node(&c, "reduce_mean", &y, 1, NULL, 0);
    return c;
}

/* The gradients of one graph, as bytes, with fusion and an allocator. */
static unsigned char *gradient_bytes(const char *allocator, int fusion, size_t *size)
{
    clrun_tensor_id loss;
    gcase c = classifier(&loss);
    clrun_context_options co;
    clrun_context_options_init(&co);
    co.allocator = allocator;
    clrun_context *own = NULL;
    assert_int_equal(clrun_context_create(&co, &own), CLRUN_OK);
    clrun_exec_options eo;
    clrun_exec_options_init(&eo);
    eo.fusion = fusion;
    eo.plan_time_limit_s = 0.05;
    run r;
    run_gradient(&c, loss, own, &eo, &r);
    /* what was asked is what ran: fused groups or none, the allocator */
    clrun_exec_stats st;
    assert_int_equal(clrun_exec_stats_get(r.exec, &st), CLRUN_OK);
    if ((fusion > 0) != (st.fused_groups > 0) || strcmp(st.allocator, allocator) != 0)
        fail_msg("asked %s, fusion %d: ran %s with %d fused groups", allocator, fusion,
                 st.allocator, (int)st.fused_groups);
    const clrun_tensor_id *outs;
    int32_t n = clrun_graph_outputs(r.grad, &outs);
    assert_int_equal(n, 1 + c.wrt_count);
    *size = 0;
    for (int32_t k = 0; k < n; k++)
        *size += clrun_tensor_bytes(clrun_graph_tensor_type(r.grad, outs[k]));
    unsigned char *bytes = malloc(*size), *at = bytes;
    assert_non_null(bytes);
    for (int32_t k = 0; k < n; k++) {
        uint64_t b = clrun_tensor_bytes(clrun_graph_tensor_type(r.grad, outs[k]));
        assert_int_equal(clrun_exec_read_output(r.exec, k, at, b), CLRUN_OK);
        at += b;
    }
    run_free(own, &r);
    clrun_graph_destroy(c.graph);
    clrun_context_destroy(own);
    return bytes;
}

/* The sacred invariant: fusion on or off and every allocator give the same bits. */
/* A strided convolution whose input gradient's columns would exceed what col2im takes for one
 * image (2^31 - 1 elements) still has one: conv_transpose2d's. Built only, no device. */
static void a_huge_strided_convolution_still_has_an_input_gradient(void **state)
{
    (void)state;
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("huge", &g), CLRUN_OK);
    clrun_tensor_type tx = {CLRUN_F32, 4, {1, 256, 1024, 1024}}, tw = {CLRUN_F32, 4, {8, 256, 7, 7}};
    clrun_tensor_id x, w, y, l;
    assert_int_equal(clrun_graph_add_input(g, "x", &tx, false, &x), CLRUN_OK);
    assert_int_equal(clrun_graph_add_input(g, "w", &tw, false, &w), CLRUN_OK);
    const int64_t stride[2] = {2, 2}, pads[4] = {3, 3, 3, 3};
    clrun_attr attrs[2] = {attr_ints("stride", 2, stride), attr_ints("pads", 4, pads)};
    const char *yn[] = {"y"}, *ln[] = {"l"};
    assert_int_equal(clrun_graph_add_node(g, "conv2d", (clrun_tensor_id[]){x, w}, 2, yn, 1, attrs, 2, &y),
                     CLRUN_OK);
    assert_int_equal(clrun_graph_add_node(g, "reduce_sum", &y, 1, ln, 1, NULL, 0, &l), CLRUN_OK);
    clrun_graph *out = NULL;
    char err[512] = "";
    if (clrun_graph_gradient(g, l, &x, 1, &out, NULL, NULL, err, sizeof err) != CLRUN_OK)
        fail_msg("%s", err);
    bool transpose = false;
    for (int32_t n = 0; n < clrun_graph_node_count(out); n++)
        transpose = transpose || strcmp(out->nodes[n].op->name, "conv_transpose2d") == 0;
    assert_true(transpose);
    clrun_graph_destroy(out);
    clrun_graph_destroy(g);
}

static void gradients_are_the_same_bits_with_fusion_and_any_allocator(void **state)
{
    (void)state;
    static const char *const allocators[] = {"tlsf", "naive", "planned"};
    size_t base_size, size;
    unsigned char *base = gradient_bytes("tlsf", 1, &base_size);
    for (int a = 0; a < 3; a++)
        for (int fusion = -1; fusion <= 1; fusion += 2) {
            if (a == 0 && fusion == 1)
                continue;
            unsigned char *other = gradient_bytes(allocators[a], fusion, &size);
            assert_int_equal(size, base_size);
            if (memcmp(base, other, size) != 0)
                fail_msg("%s, fusion %d: different gradients", allocators[a], fusion);
            free(other);
        }
    free(base);
    /* and they are right */
    clrun_tensor_id loss;
    gcase c = classifier(&loss);
    /* check() adds reduce_sum(out * R) to a scalar: still a scalar loss */
    check(&c, loss);
}

/* Every rule of the rule tables was checked by a case above. */
static void every_rule_has_a_case(void **state)
{
    (void)state;
    if (getenv("CLRUN_TEST_FILTER") || getenv("CLRUN_TEST_SKIP"))
        skip(); /* the tests that cover them may not have run */
    static const clrun__grad_rule *const families[] = {
        clrun__grad_rules_elementwise, clrun__grad_rules_matmul, clrun__grad_rules_norm,
        clrun__grad_rules_layout,      clrun__grad_rules_conv,   clrun__grad_rules_index,
    };
    int missing = 0, rules = 0;
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
        for (const clrun__grad_rule *r = families[f]; r->op; r++) {
            rules++;
            bool seen = false;
            for (int i = 0; i < checked_count && !seen; i++)
                seen = strcmp(checked[i].op, r->op) == 0;
            if (!seen) {
                fprintf(stderr, "the rule of '%s' has no case in tests/test_grad.c\n", r->op);
                missing++;
            }
        }
    if (verbose)
        for (int i = 0; i < checked_count; i++)
            fprintf(stderr, "%-18s %3d cases, worst error %.3f of the tolerance\n", checked[i].op,
                    checked[i].cases, checked[i].worst);
    if (missing)
        fail_msg("%d of %d rules without a case", missing, rules);
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
    if (seed_text)
        base_seed = strtoull(seed_text, NULL, 10);
    verbose = getenv("CLRUN_TEST_VERBOSE") && strcmp(getenv("CLRUN_TEST_VERBOSE"), "0") != 0;
    /* The rule cases run unfused unless CLRUN_FUSION says otherwise: fusion would compile a
     * kernel per group of each case (minutes on a cold POCL cache), and gives the same bits,
     * which gradients_are_the_same_bits_with_fusion_and_any_allocator checks. */
    clrun_exec_options_init(&case_options);
    case_options.fusion = getenv("CLRUN_FUSION") ? 0 : -1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(unary_rules_match_finite_differences),
        cmocka_unit_test(cast_rule_matches_finite_differences),
        cmocka_unit_test(binary_rules_broadcast_and_match_finite_differences),
        cmocka_unit_test(where_rule_broadcasts_and_matches),
        cmocka_unit_test(matmul_rule_matches_with_every_attribute),
        cmocka_unit_test(softmax_rules_match_on_every_axis_and_causal),
        cmocka_unit_test(layernorm_rule_matches_on_axes_with_and_without_beta),
        cmocka_unit_test(batchnorm_rule_matches_in_inference_form),
        cmocka_unit_test(reduction_rules_match_on_axes_and_keepdims),
        cmocka_unit_test(softmax_xent_rule_matches_with_labels_and_ignore_index),
        cmocka_unit_test(reshape_transpose_expand_rules_match),
        cmocka_unit_test(slice_split_concat_pad_rules_match),
        cmocka_unit_test(conv2d_rule_matches_with_strides_pads_dilation_groups),
        cmocka_unit_test(pool_rules_match_with_ceil_mode_and_padding),
        cmocka_unit_test(gather_rule_matches_in_both_forms),
        cmocka_unit_test(dropout_rule_matches_at_a_fixed_seed),
        cmocka_unit_test(an_unreachable_wrt_gets_zeros_and_is_listed_unused),
        cmocka_unit_test(a_wide_loss_and_an_op_without_a_rule_are_refused_by_name),
        cmocka_unit_test(a_huge_strided_convolution_still_has_an_input_gradient),
        cmocka_unit_test(gradients_are_the_same_bits_with_fusion_and_any_allocator),
        cmocka_unit_test(every_rule_has_a_case),
    };
    CLRUN_TEST_FILTERS_FROM_ENVIRONMENT();
    int failed = cmocka_run_group_tests(tests, setup, teardown);
    clrun_test_remove_dir(cache_root);
    return failed;
}
