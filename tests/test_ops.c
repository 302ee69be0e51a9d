/* The op table on a real device: every op against the plain C reference of op_reference.c, on
 * random inputs (fixed seeds, printed on failure), odd shapes, broadcasting, batches, transposes;
 * the refusals of infer; and repeated runs giving the same bits.
 *
 * Tolerances. Layout ops, copies and integer ops must match exactly. For float ops an output d
 * with reference r (computed in double) passes when |d - r| <= tol * (|r| + s), where s is the
 * output's scale: the sum of the absolute values of the terms that made it (matmul, conv,
 * reductions, layernorm), the input's magnitude (unary functions, whose device versions may be
 * a few ulp off), or 0 (softmax). tol is 1e-5 for most ops: a few float roundings per term. */
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
#include "node_memory.h"
#include "rng.h"
#include "op_reference.h"
#include "ops/ops.h"
#include "ops/ops_internal.h"
#include "device/program.h"

static char cache_dir[512];
static clrun_context *ctx;          /* in-order queue */
static clrun_context *ooo_ctx;      /* out-of-order queue where the device has one, else NULL */
static uint64_t current_seed;       /* seed of the running test's data, for failure messages */
static const char *current_kernels = "auto"; /* kernel choice forced on matmul and conv2d */

/* Each choice of kernels for matmul and conv2d, so that every kernel runs on the test device. */
static const struct {
    clrun__kernel_choice choice;
    const char *name;
} kernel_choices[] = {
    {CLRUN__KERNELS_TILED, "tiled"},
    {CLRUN__KERNELS_VECTOR, "vector"},
    {CLRUN__KERNELS_SIMPLE, "simple"},
};

/* ---- data -------------------------------------------------------------------------------- */


static float *random_floats(uint64_t n, double lo, double hi, uint64_t seed)
{
    float *x = malloc(n * sizeof *x + 1);
    uint64_t state = seed;
    for (uint64_t i = 0; i < n; i++)
        x[i] = (float)(lo + (hi - lo) * (double)(rng_next(&state) >> 11) / 9007199254740992.0);
    return x;
}

static int32_t *random_ints(uint64_t n, int32_t lo, int32_t hi, uint64_t seed)
{
    int32_t *x = malloc(n * sizeof *x + 1);
    uint64_t state = seed;
    for (uint64_t i = 0; i < n; i++)
        x[i] = (int32_t)(lo + (int64_t)(rng_next(&state) % (uint64_t)((int64_t)hi - lo + 1)));
    return x;
}

/* A type from a dims string: type(CLRUN_F32, "2,3,4"); "" is a scalar. */
static clrun_tensor_type type(clrun_dtype dtype, const char *dims)
{
    return shape_type(dtype, dims);
}

/* ---- running one node -------------------------------------------------------------------- */

typedef struct node {
    const char *op;
    int input_count;
    clrun_tensor_type in[8];
    const void *data[8];
    clrun_attr attrs[8];
    int attr_count;
    clrun_tensor_type out;  /* from infer */
    void *result;           /* the output read back (malloc'd) */
} node;

static size_t bytes_of(const clrun_tensor_type *t) { return (size_t)ref_elements(t) * clrun_dtype_size(t->dtype); }

static clrun__op_call call_of(node *n)
{
    clrun__op_call call = {n->in, n->input_count, &n->out, 1, n->attrs, n->attr_count, 0};
    return call;
}

/* infer's verdict and message. */
static clrun_status infer(node *n, char *err, size_t size)
{
    const clrun__op *op = clrun__op_find(n->op);
    assert_non_null(op);
    clrun__op_call call = call_of(n);
    err[0] = '\0';
    return op->infer(&call, &n->out, err, size);
}

/* Runs the node `runs` times on c; the result of the last run goes to n->result, and every run
 * must give the same bytes as the first. */
static void run_on(clrun_context *c, node *n, int runs)
{
    char err[512];
    clrun_status s = infer(n, err, sizeof err);
    if (s != CLRUN_OK)
        fail_msg("%s refused: %s", n->op, err);
    const clrun__op *op = clrun__op_find(n->op);
    const clrun__op_kernels *kernels = clrun__op_kernels_find(op);
    assert_non_null(kernels);
    clrun__op_call call = call_of(n);
    void *state = NULL;
    s = kernels->prepare(c, op, &call, &state);
    if (s != CLRUN_OK)
        fail_msg("%s prepare: %s", n->op, clrun_last_error(c));
    cl_mem in[8], out;
    cl_int e;
    for (int i = 0; i < n->input_count; i++) {
        in[i] = clCreateBuffer(clrun_context_cl(c), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                               bytes_of(&n->in[i]), (void *)n->data[i], &e);
        assert_int_equal(e, CL_SUCCESS);
    }
    size_t size = bytes_of(&n->out);
    out = clCreateBuffer(clrun_context_cl(c), CL_MEM_READ_WRITE, size, NULL, &e);
    assert_int_equal(e, CL_SUCCESS);
    node_memory memory;
    if (node_memory_make(c, kernels, state, &call, in, &out, &memory) != CL_SUCCESS)
        fail_msg("%s pack or scratch: %s", n->op, clrun_last_error(c));
    n->result = malloc(size);
    void *first = malloc(size);
    for (int r = 0; r < runs; r++) {
        /* Poison the output so a run that writes nothing cannot pass on the last one's data.
         * The node waits for the poison through its wait list (on an out-of-order queue
         * nothing else orders them), and the read waits for the node's event. */
        const cl_uint poison = 0x7fc0dead;
        cl_event poisoned = NULL, done = NULL;
        assert_int_equal(clEnqueueFillBuffer(clrun_context_queue(c), out, &poison, 4, 0, size, 0,
                                             NULL, &poisoned), CL_SUCCESS);
        s = kernels->enqueue(c, state, &call, in, node_memory_outputs(&memory), 1, &poisoned, &done);
        if (s != CLRUN_OK)
            fail_msg("%s enqueue: %s", n->op, clrun_last_error(c));
        assert_non_null(done);
        assert_int_equal(clEnqueueReadBuffer(clrun_context_queue(c), out, CL_TRUE, 0, size,
                                             n->result, 1, &done, NULL), CL_SUCCESS);
        clReleaseEvent(poisoned);
        clReleaseEvent(done);
        if (r == 0)
            memcpy(first, n->result, size);
        else if (memcmp(first, n->result, size) != 0)
            fail_msg("%s: run %d differs from run 1", n->op, r + 1);
    }
    free(first);
    kernels->release(state);
    node_memory_free(c, &memory);
    for (int i = 0; i < n->input_count; i++)
        clReleaseMemObject(in[i]);
    clReleaseMemObject(out);
}

static void run(node *n) { run_on(ctx, n, 1); }

static void node_free(node *n)
{
    free(n->result);
    n->result = NULL;
}

/* ---- comparisons ------------------------------------------------------------------------- */

static void shape_str(const clrun_tensor_type *t, char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < t->rank; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", i ? "," : "", (long long)t->shape[i]);
    snprintf(buf + used, size - used, "]");
}

/* The float result of n against ref, within tol * (|ref| + scale) (scale NULL: 0). */
static void expect_close(const node *n, const double *ref, const double *scale, double tol)
{
    const float *got = n->result;
    char shape[128];
    shape_str(&n->out, shape, sizeof shape);
    for (uint64_t i = 0; i < ref_elements(&n->out); i++) {
        double s = scale ? scale[i] : 0;
        double bound = tol * (fabs(ref[i]) + s);
        if (!(fabs((double)got[i] - ref[i]) <= bound) && !(isnan(ref[i]) && isnan(got[i])))
            fail_msg("%s -> %s (%s kernels), seed %llu: element %llu is %.9g, reference %.9g "
                     "(scale %.3g, allowed %.3g)", n->op, shape, current_kernels,
                     (unsigned long long)current_seed,
                     (unsigned long long)i, got[i], ref[i], s, bound);
    }
}

/* The 32-bit words of n against ref, exactly. */
static void expect_exact(const node *n, const void *ref)
{
    const uint32_t *got = n->result, *want = ref;
    char shape[128];
    shape_str(&n->out, shape, sizeof shape);
    for (uint64_t i = 0; i < ref_elements(&n->out); i++)
        if (got[i] != want[i])
            fail_msg("%s -> %s, seed %llu: element %llu is 0x%08x, reference 0x%08x", n->op, shape,
                     (unsigned long long)current_seed, (unsigned long long)i, got[i], want[i]);
}

static void expect_type(const node *n, const char *dims)
{
    clrun_tensor_type want = type(n->out.dtype, dims);
    char got_s[128], want_s[128];
    shape_str(&n->out, got_s, sizeof got_s);
    shape_str(&want, want_s, sizeof want_s);
    if (strcmp(got_s, want_s) != 0)
        fail_msg("%s: output shape %s, expected %s", n->op, got_s, want_s);
}

/* ---- the registry ------------------------------------------------------------------------ */

/* The ops docs/ops.md documents: every `name` in the first cell of a row of its op table. The
 * document is the source of truth, so a new op is documented or this test fails. */
#define MAX_DOCUMENTED 256
static int documented_ops(char names[][64])
{
    char path[1024];
    snprintf(path, sizeof path, "%s/docs/ops.md", CLRUN_TOP_SRCDIR);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        fail_msg("cannot read %s", path);
    char line[8192];
    int count = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "| `", 3) != 0)
            continue;
        char *end = strchr(line + 1, '|'); /* the first cell ends here */
        for (char *c = line + 1; end && c < end && count < MAX_DOCUMENTED; c++) {
            if (*c != '`')
                continue;
            char *close = strchr(c + 1, '`');
            if (close == NULL || close > end || close - c - 1 >= 64)
                break;
            snprintf(names[count++], 64, "%.*s", (int)(close - c - 1), c + 1);
            c = close;
        }
    }
    fclose(f);
    return count;
}

static void every_documented_op_is_in_the_table(void **state)
{
    (void)state;
    static char names[MAX_DOCUMENTED][64];
    int documented = documented_ops(names);
    size_t count = 0;
    const clrun__op *const *ops = clrun__op_list(&count);
    assert_int_equal(count, (size_t)documented);
    for (int i = 0; i < documented; i++) {
        const clrun__op *op = clrun__op_find(names[i]);
        if (op == NULL)
            fail_msg("op '%s' (docs/ops.md) is missing from the table", names[i]);
        assert_string_equal(op->name, names[i]);
        if (clrun__op_kernels_find(op) == NULL)
            fail_msg("op '%s' has no kernels", names[i]);
    }
    for (size_t i = 0; i < count; i++) {
        bool found = false;
        for (int j = 0; j < documented && !found; j++)
            found = strcmp(names[j], ops[i]->name) == 0;
        if (!found)
            fail_msg("op '%s' is not documented in docs/ops.md", ops[i]->name);
        assert_true(ops[i]->min_inputs >= 1 && ops[i]->min_inputs <= ops[i]->max_inputs);
        assert_true(ops[i]->outputs >= 1);
    }
    assert_null(clrun__op_find("no_such_op"));
}

/* ---- kernel geometry --------------------------------------------------------------------- */

/* The host's geometry indices (lib/ops/ops_internal.h), which the kernels repeat as #defines. */
typedef struct geometry_index {
    const char *name;
    long value;
} geometry_index;

#define GEOMETRY_ENTRY(name) {#name, CLRUN__##name},
static const geometry_index conv_geometry[] = {CLRUN__CONV_GEOMETRY(GEOMETRY_ENTRY)};
static const geometry_index pooling_geometry[] = {CLRUN__POOLING_GEOMETRY(GEOMETRY_ENTRY)};

static const struct {
    const char *prefix;
    const geometry_index *indices;
    size_t count;
} geometry_families[] = {
    {"G_", conv_geometry, sizeof conv_geometry / sizeof conv_geometry[0]},
    {"P_", pooling_geometry, sizeof pooling_geometry / sizeof pooling_geometry[0]},
};

/* Checks the `#define PREFIX... n` lines of one embedded source against family f: each names a
 * host index and has its value, and none is missing or given twice. Returns how many there
 * are (0: the source does not use the family). */
static size_t check_geometry_defines(const clrun__kernel_source *src, size_t f)
{
    const char *prefix = geometry_families[f].prefix;
    const geometry_index *want = geometry_families[f].indices;
    size_t count = geometry_families[f].count, found = 0;
    int seen[32] = {0};
    assert_true(count <= sizeof seen / sizeof seen[0]);
    for (const char *line = src->text; line && *line;) {
        const char *end = strchr(line, '\n');
        char text[256];
        size_t length = end ? (size_t)(end - line) : strlen(line);
        snprintf(text, sizeof text, "%.*s", (int)length, line);
        line = end ? end + 1 : NULL;
        char name[64];
        int used = 0;
        if (sscanf(text, " #define %63[A-Za-z0-9_]%n", name, &used) != 1 ||
            strncmp(name, prefix, strlen(prefix)) != 0)
            continue;
        char *rest;
        long value = strtol(text + used, &rest, 10);
        if (rest == text + used || strspn(rest, " \t") != strlen(rest))
            fail_msg("%s.cl: '%s' is not a plain index", src->name, text);
        size_t i = 0;
        while (i < count && strcmp(want[i].name, name) != 0)
            i++;
        if (i == count)
            fail_msg("%s.cl defines %s, which lib/ops/ops_internal.h does not know", src->name, name);
        if (value != want[i].value)
            fail_msg("%s.cl: %s is %ld, the host's index is %ld", src->name, name, value,
                     want[i].value);
        if (seen[i]++)
            fail_msg("%s.cl defines %s twice", src->name, name);
        found++;
    }
    for (size_t i = 0; found > 0 && i < count; i++)
        if (!seen[i])
            fail_msg("%s.cl does not define %s", src->name, want[i].name);
    return found;
}

static void kernel_geometry_indices_match_the_host(void **state)
{
    (void)state;
    /* The kernels that read a geometry table: conv.cl (both), matmul.cl (conv2d_gemm). */
    static const struct {
        const char *source;
        size_t family;
    } users[] = {{"conv", 0}, {"conv", 1}, {"matmul", 0}};
    size_t checked[sizeof users / sizeof users[0]] = {0};
    for (size_t s = 0; s < clrun__kernel_source_count; s++) {
        for (size_t f = 0; f < sizeof geometry_families / sizeof geometry_families[0]; f++) {
            size_t found = check_geometry_defines(&clrun__kernel_sources[s], f);
            for (size_t u = 0; u < sizeof users / sizeof users[0]; u++)
                if (strcmp(users[u].source, clrun__kernel_sources[s].name) == 0 &&
                    users[u].family == f)
                    checked[u] = found;
        }
    }
    for (size_t u = 0; u < sizeof users / sizeof users[0]; u++)
        if (checked[u] == 0)
            fail_msg("%s.cl defines no %s indices", users[u].source,
                     geometry_families[users[u].family].prefix);
}

/* ---- elementwise ------------------------------------------------------------------------- */

/* gelu and gelu_erf pass at tol 1e-5 with s = |x|, like the other functions: OpenCL allows
 * tanh and erfc 16 ulp, and gelu_erf's kernel does not cancel (erfc, not 1 + erf). The two
 * differ by up to 4.7e-4 (near x = -2.7), 18 times the tolerance there, so neither passes for
 * the other. gelu_erf is last so that the ops before it keep their seeds. */
static const char *const unary_f32_ops[] = {"neg", "abs", "relu", "gelu", "sigmoid", "tanh",
                                            "exp", "log", "sqrt", "rsqrt", "copy", "gelu_erf"};

static void unary_f32_ops_match_reference(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof unary_f32_ops / sizeof unary_f32_ops[0]; k++) {
        const char *name = unary_f32_ops[k];
        bool positive = !strcmp(name, "log") || !strcmp(name, "sqrt") || !strcmp(name, "rsqrt");
        current_seed = 100 + k;
        node n = {.op = name, .input_count = 1, .in = {type(CLRUN_F32, "3,5,67")}};
        uint64_t count = ref_elements(&n.in[0]);
        float *x = random_floats(count, positive ? 0.01 : -6, 6, current_seed);
        n.data[0] = x;
        run(&n);
        expect_type(&n, "3,5,67");
        double *ref = malloc(count * sizeof *ref), *scale = malloc(count * sizeof *scale);
        for (uint64_t i = 0; i < count; i++) {
            ref[i] = ref_unary_f32(name, x[i]);
            scale[i] = fabs(x[i]);
        }
        expect_close(&n, ref, scale, 1e-5);
        free(ref), free(scale), free(x), node_free(&n);
    }
}

static void unary_i32_ops_are_exact_and_wrap(void **state)
{
    (void)state;
    const char *const ops[] = {"neg", "abs", "relu", "copy"};
    for (size_t k = 0; k < 4; k++) {
        current_seed = 200 + k;
        node n = {.op = ops[k], .input_count = 1, .in = {type(CLRUN_I32, "1000")}};
        int32_t *x = random_ints(1000, -100000, 100000, current_seed);
        x[0] = INT32_MIN, x[1] = INT32_MAX, x[2] = 0, x[3] = -1;
        n.data[0] = x;
        run(&n);
        assert_int_equal(n.out.dtype, CLRUN_I32);
        int32_t ref[1000];
        for (int i = 0; i < 1000; i++)
            ref[i] = ref_unary_i32(ops[k], x[i]);
        expect_exact(&n, ref);
        free(x), node_free(&n);
    }
}

static void copy_keeps_every_bit(void **state)
{
    (void)state;
    current_seed = 300;
    node n = {.op = "copy", .input_count = 1, .in = {type(CLRUN_F32, "7,9")}};
    uint32_t words[63];
    uint64_t s = current_seed;
    for (int i = 0; i < 63; i++)
        words[i] = (uint32_t)rng_next(&s);
    words[0] = 0x7fc00001; /* a NaN with payload */
    words[1] = 0x00000001; /* a denormal */
    n.data[0] = words;
    run(&n);
    expect_exact(&n, words);
    node_free(&n);
}

static void scale_is_alpha_x_plus_beta(void **state)
{
    (void)state;
    current_seed = 301;
    node n = {.op = "scale", .input_count = 1, .in = {type(CLRUN_F32, "333")},
              .attrs = {attr_float("alpha", -2.5), attr_int("beta", 3)}, .attr_count = 2};
    float *x = random_floats(333, -10, 10, current_seed);
    n.data[0] = x;
    run(&n);
    double ref[333], scale[333];
    for (int i = 0; i < 333; i++) {
        ref[i] = -2.5 * x[i] + 3;
        scale[i] = 2.5 * fabs(x[i]) + 3;
    }
    expect_close(&n, ref, scale, 1e-6);
    free(x), node_free(&n);
}

static const char *const binary_ops[] = {"add", "sub", "mul", "div", "maximum", "minimum"};

/* Runs every binary op on a (dims_a) and b (dims_b), f32 and i32, against the reference. */
static void check_binary(const char *dims_a, const char *dims_b, const char *dims_out, uint64_t seed)
{
    for (size_t k = 0; k < 6; k++) {
        for (int dt = 0; dt < 2; dt++) {
            clrun_dtype dtype = dt ? CLRUN_I32 : CLRUN_F32;
            if (dtype == CLRUN_I32 && !strcmp(binary_ops[k], "div"))
                continue;
            current_seed = seed + k * 2 + (uint64_t)dt;
            node n = {.op = binary_ops[k], .input_count = 2,
                      .in = {type(dtype, dims_a), type(dtype, dims_b)}};
            uint64_t na = ref_elements(&n.in[0]), nb = ref_elements(&n.in[1]);
            void *a, *b;
            if (dtype == CLRUN_F32) {
                a = random_floats(na, -3, 3, current_seed);
                b = random_floats(nb, 0.5, 3, current_seed + 1000); /* no division by ~0 */
            } else {
                a = random_ints(na, INT32_MIN, INT32_MAX, current_seed);
                b = random_ints(nb, INT32_MIN, INT32_MAX, current_seed + 1000);
            }
            n.data[0] = a, n.data[1] = b;
            run(&n);
            expect_type(&n, dims_out);
            uint64_t count = ref_elements(&n.out);
            if (dtype == CLRUN_F32) {
                double *ref = malloc(count * sizeof *ref);
                ref_binary_f32(binary_ops[k], &n.in[0], a, &n.in[1], b, &n.out, ref);
                expect_close(&n, ref, NULL, 1e-6);
                free(ref);
            } else {
                int32_t *ref = malloc(count * sizeof *ref);
                ref_binary_i32(binary_ops[k], &n.in[0], a, &n.in[1], b, &n.out, ref);
                expect_exact(&n, ref);
                free(ref);
            }
            free(a), free(b), node_free(&n);
        }
    }
}

static void binary_ops_on_equal_shapes(void **state)
{
    (void)state;
    check_binary("3,7,11", "3,7,11", "3,7,11", 400);
}

static void binary_ops_broadcast_a_row(void **state)
{
    (void)state;
    check_binary("2,3,37", "37", "2,3,37", 500);
}

static void binary_ops_broadcast_both_ways(void **state)
{
    (void)state;
    check_binary("4,1,5", "3,1", "4,3,5", 600);
    check_binary("1,6", "5,1", "5,6", 620);
}

static void binary_ops_broadcast_a_scalar(void **state)
{
    (void)state;
    check_binary("", "5,7", "5,7", 700);
    check_binary("2,1,3,1,2,1", "1,4,1,3,1,5", "2,4,3,3,2,5", 720);
}

/* ---- matmul ------------------------------------------------------------------------------ */

typedef struct mm_case {
    const char *a, *b, *out;
    bool ta, tb, bias;
    double alpha;
} mm_case;

static void check_matmul_once(const mm_case *c, uint64_t seed)
{
    current_seed = seed;
    node n = {.op = "matmul", .input_count = c->bias ? 3 : 2,
              .in = {type(CLRUN_F32, c->a), type(CLRUN_F32, c->b)}};
    if (c->ta)
        n.attrs[n.attr_count++] = attr_int("transpose_a", 1);
    if (c->tb)
        n.attrs[n.attr_count++] = attr_int("transpose_b", 1);
    if (c->alpha != 1)
        n.attrs[n.attr_count++] = attr_float("alpha", c->alpha);
    float *a = random_floats(ref_elements(&n.in[0]), -1, 1, seed);
    float *b = random_floats(ref_elements(&n.in[1]), -1, 1, seed + 1);
    float *bias = NULL;
    n.data[0] = a, n.data[1] = b;
    if (c->bias) {
        n.in[2] = type(CLRUN_F32, "");
        n.in[2].rank = 1;
        n.in[2].shape[0] = c->tb ? n.in[1].shape[n.in[1].rank - 2] : n.in[1].shape[n.in[1].rank - 1];
        bias = random_floats((uint64_t)n.in[2].shape[0], -1, 1, seed + 2);
        n.data[2] = bias;
    }
    run(&n);
    expect_type(&n, c->out);
    uint64_t count = ref_elements(&n.out);
    double *ref = malloc(count * sizeof *ref), *scale = malloc(count * sizeof *scale);
    ref_matmul(&n.in[0], a, &n.in[1], b, bias, c->ta, c->tb, c->alpha, &n.out, ref, scale);
    expect_close(&n, ref, scale, 1e-5);
    free(ref), free(scale), free(a), free(b), free(bias), node_free(&n);
}

/* The case with every kernel choice. */
static void check_matmul(const mm_case *c, uint64_t seed)
{
    for (size_t k = 0; k < sizeof kernel_choices / sizeof kernel_choices[0]; k++) {
        clrun__ops_kernels = kernel_choices[k].choice;
        current_kernels = kernel_choices[k].name;
        check_matmul_once(c, seed);
    }
    clrun__ops_kernels = CLRUN__KERNELS_AUTO;
    current_kernels = "auto";
}

static void matmul_odd_sizes(void **state)
{
    (void)state;
    const mm_case cases[] = {
        {"67,131", "131,45", "67,45", false, false, false, 1},
        {"1,1", "1,1", "1,1", false, false, false, 1},
        {"1,300", "300,7", "1,7", false, false, false, 1},
        {"130,17", "17,129", "130,129", false, false, true, 0.5},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_matmul(&cases[i], 800 + i);
}

static void matmul_transposes(void **state)
{
    (void)state;
    const mm_case cases[] = {
        {"37,70", "37,65", "70,65", true, false, false, 1},
        {"70,37", "65,37", "70,65", false, true, true, 1},
        {"37,70", "65,37", "70,65", true, true, false, -2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_matmul(&cases[i], 900 + i);
}

static void matmul_batches_broadcast(void **state)
{
    (void)state;
    const mm_case cases[] = {
        {"3,20,33", "3,33,18", "3,20,18", false, false, false, 1},  /* same batch */
        {"2,5,20,33", "33,70", "2,5,20,70", false, false, true, 1}, /* weights: batch folds into M */
        {"2,5,33,20", "33,70", "2,5,20,70", true, false, false, 1}, /* ... but not transposed */
        {"20,33", "4,33,18", "4,20,18", false, false, false, 1},    /* a broadcast */
        {"2,1,9,16", "3,9,16", "2,3,9,9", false, true, false, 0.125}, /* attention scores */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_matmul(&cases[i], 1000 + i);
}

static void matmul_repeated_runs_are_bit_identical(void **state)
{
    (void)state;
    current_seed = 1100;
    node n = {.op = "matmul", .input_count = 2,
              .in = {type(CLRUN_F32, "96,200"), type(CLRUN_F32, "200,80")}};
    float *a = random_floats(96 * 200, -1, 1, 1100), *b = random_floats(200 * 80, -1, 1, 1101);
    n.data[0] = a, n.data[1] = b;
    run_on(ctx, &n, 3);
    free(a), free(b), node_free(&n);
}

/* ---- softmax, layernorm, reductions ------------------------------------------------------ */

static void check_softmax(const char *dims, bool causal, uint64_t seed, int runs)
{
    current_seed = seed;
    node n = {.op = "softmax", .input_count = 1, .in = {type(CLRUN_F32, dims)}};
    if (causal)
        n.attrs[n.attr_count++] = attr_int("causal", 1);
    uint64_t count = ref_elements(&n.in[0]);
    float *x = random_floats(count, -8, 8, seed);
    n.data[0] = x;
    run_on(ctx, &n, runs);
    expect_type(&n, dims);
    double *ref = malloc(count * sizeof *ref);
    ref_softmax(&n.in[0], x, causal, ref);
    expect_close(&n, ref, NULL, 1e-5);
    free(ref), free(x), node_free(&n);
}

static void softmax_rows_short_and_long(void **state)
{
    (void)state;
    check_softmax("5,37", false, 1200, 1);
    check_softmax("2,3,300", false, 1201, 1);
    check_softmax("1", false, 1202, 1);
}

static void softmax_causal_masks_the_future(void **state)
{
    (void)state;
    check_softmax("2,7,7", true, 1300, 1);
    check_softmax("3,5,9", true, 1301, 1); /* more keys than queries: a cache */
    check_softmax("6,4", true, 1302, 1);   /* more queries than keys: some rows fully masked */
    check_softmax("2,70,90", true, 1303, 1); /* kept lengths 21..90: vector steps and tails */
    clrun__ops_kernels = CLRUN__KERNELS_VECTOR; /* the CPUs' row per work-item, on any device */
    check_softmax("2,70,90", true, 1304, 1);
    check_softmax("6,4", true, 1305, 1);
    clrun__ops_kernels = CLRUN__KERNELS_AUTO;
}

static void softmax_repeated_runs_are_bit_identical(void **state)
{
    (void)state;
    check_softmax("4,1000", false, 1400, 3);
}

static void check_layernorm(const char *dims, double eps, uint64_t seed)
{
    current_seed = seed;
    node n = {.op = "layernorm", .input_count = 3, .in = {type(CLRUN_F32, dims)}};
    int64_t D = n.in[0].shape[n.in[0].rank - 1];
    n.in[1] = n.in[2] = type(CLRUN_F32, "1");
    n.in[1].shape[0] = n.in[2].shape[0] = D;
    if (eps != 1e-5)
        n.attrs[n.attr_count++] = attr_float("eps", eps);
    uint64_t count = ref_elements(&n.in[0]);
    float *x = random_floats(count, -3, 5, seed);
    float *gamma = random_floats((uint64_t)D, 0.5, 2, seed + 1);
    float *beta = random_floats((uint64_t)D, -1, 1, seed + 2);
    n.data[0] = x, n.data[1] = gamma, n.data[2] = beta;
    run(&n);
    expect_type(&n, dims);
    double *ref = malloc(count * sizeof *ref), *scale = malloc(count * sizeof *scale);
    ref_layernorm(&n.in[0], x, gamma, beta, eps, ref, scale);
    expect_close(&n, ref, scale, 1e-5);
    free(ref), free(scale), free(x), free(gamma), free(beta), node_free(&n);
}

static void layernorm_matches_reference(void **state)
{
    (void)state;
    check_layernorm("7,33", 1e-5, 1500);
    check_layernorm("3,4,500", 1e-3, 1501);
    check_layernorm("2,1", 1e-5, 1502); /* one element per row: zero variance */
}

/* Reduces x (dims) over `axes` ("" = attribute absent) and checks against the reference. */
static void check_reduce(const char *op, const char *dims, int axis_count, const int64_t *axes,
                         bool keepdims, const char *out_dims, uint64_t seed)
{
    current_seed = seed;
    node n = {.op = op, .input_count = 1, .in = {type(CLRUN_F32, dims)}};
    if (axis_count)
        n.attrs[n.attr_count++] = attr_ints("axes", axis_count, axes);
    if (keepdims)
        n.attrs[n.attr_count++] = attr_int("keepdims", 1);
    uint64_t count = ref_elements(&n.in[0]);
    float *x = random_floats(count, -2, 3, seed);
    n.data[0] = x;
    run(&n);
    expect_type(&n, out_dims);
    bool reduced[CLRUN_MAX_DIMS];
    for (int d = 0; d < n.in[0].rank; d++)
        reduced[d] = axis_count == 0;
    for (int i = 0; i < axis_count; i++)
        reduced[axes[i] < 0 ? axes[i] + n.in[0].rank : axes[i]] = true;
    double *ref = malloc(count * sizeof *ref), *scale = malloc(count * sizeof *scale);
    ref_reduce(op, &n.in[0], x, reduced, ref, scale);
    expect_close(&n, ref, scale, 1e-5);
    free(ref), free(scale), free(x), node_free(&n);
}

static void reductions_over_chosen_axes(void **state)
{
    (void)state;
    const int64_t last[1] = {-1}, middle[1] = {1}, outer[2] = {0, 2};
    check_reduce("reduce_sum", "4,5,6", 1, middle, false, "4,6", 1600);
    check_reduce("reduce_sum", "4,5,6", 2, outer, false, "5", 1601);
    check_reduce("reduce_mean", "3,1000", 1, last, false, "3", 1602);
    check_reduce("reduce_max", "4,5,6", 1, last, true, "4,5,1", 1603);
    check_reduce("reduce_max", "7,3,2", 2, outer, true, "1,3,1", 1604);
}

static void reductions_default_to_every_axis(void **state)
{
    (void)state;
    check_reduce("reduce_sum", "3,77", 0, NULL, false, "", 1700);
    check_reduce("reduce_mean", "2,3,4", 0, NULL, true, "1,1,1", 1701);
    check_reduce("reduce_max", "5000", 0, NULL, false, "", 1702);
}

/* f64 reductions (where the device has cl_khr_fp64): every op over the middle axis of doubles
 * that are floats' values, against a reference in double; the sums' order differs from the
 * reference's, within a few ulp of f64. */
static void reductions_in_f64(void **state)
{
    (void)state;
    if (!clrun_context_device(ctx)->fp64) {
        print_message("f64 reductions not run: the device has no cl_khr_fp64\n");
        return;
    }
    static const char *const ops[] = {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min",
                                      "reduce_prod", "reduce_l2", "reduce_sum_square"};
    const int64_t middle[1] = {1};
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        current_seed = 1800 + o;
        node n = {.op = ops[o], .input_count = 1, .in = {type(CLRUN_F64, "4,300,3")}};
        n.attrs[n.attr_count++] = attr_ints("axes", 1, middle);
        uint64_t count = ref_elements(&n.in[0]);
        float *x = random_floats(count, o == 4 ? 0.99 : -2, o == 4 ? 1.01 : 3, current_seed);
        double *xd = malloc(count * sizeof *xd);
        for (uint64_t i = 0; i < count; i++)
            xd[i] = x[i];
        n.data[0] = xd;
        run(&n);
        expect_type(&n, "4,3");
        assert_int_equal(n.out.dtype, CLRUN_F64);
        const double *got = n.result;
        for (int a = 0; a < 4; a++)
            for (int c = 0; c < 3; c++) {
                double r = o == 2 ? -INFINITY : o == 3 ? INFINITY : o == 4 ? 1 : 0, scale = 0;
                for (int b = 0; b < 300; b++) {
                    double v = xd[(a * 300 + b) * 3 + c];
                    r = o == 2 ? fmax(r, v) : o == 3 ? fmin(r, v) : o == 4 ? r * v
                        : o >= 5 ? r + v * v : r + v;
                    scale += o >= 5 ? v * v : fabs(v);
                }
                r = o == 1 ? r / 300 : o == 5 ? sqrt(r) : r;
                double g = got[a * 3 + c];
                if (!(fabs(g - r) <= 1e-13 * (fabs(r) + scale)))
                    fail_msg("%s in f64: element (%d, %d) is %.17g, reference %.17g", ops[o], a, c, g, r);
            }
        free(x), free(xd), node_free(&n);
    }
}

/* ---- layout ------------------------------------------------------------------------------ */

static uint32_t *random_words(uint64_t n, uint64_t seed)
{
    uint32_t *x = malloc(n * sizeof *x + 1);
    uint64_t state = seed;
    for (uint64_t i = 0; i < n; i++)
        x[i] = (uint32_t)rng_next(&state);
    return x;
}

static void check_transpose(clrun_dtype dtype, const char *dims, int rank, const int64_t *perm,
                            const char *out_dims, uint64_t seed)
{
    current_seed = seed;
    node n = {.op = "transpose", .input_count = 1, .in = {type(dtype, dims)},
              .attrs = {attr_ints("perm", rank, perm)}, .attr_count = 1};
    uint64_t count = ref_elements(&n.in[0]);
    uint32_t *x = random_words(count, seed), *ref = malloc(count * sizeof *ref);
    n.data[0] = x;
    run(&n);
    expect_type(&n, out_dims);
    int p[CLRUN_MAX_DIMS];
    for (int i = 0; i < rank; i++)
        p[i] = (int)perm[i];
    ref_transpose(&n.in[0], x, p, ref);
    expect_exact(&n, ref);
    free(x), free(ref), node_free(&n);
}

static void transpose_permutes_exactly(void **state)
{
    (void)state;
    const int64_t rotate[3] = {2, 0, 1}, heads[4] = {0, 2, 1, 3}, swap[2] = {1, 0};
    const int64_t reverse[6] = {5, 4, 3, 2, 1, 0}, keep[3] = {0, 1, 2};
    check_transpose(CLRUN_F32, "2,3,4", 3, rotate, "4,2,3", 1800);
    check_transpose(CLRUN_F32, "2,5,3,8", 4, heads, "2,3,5,8", 1801);
    check_transpose(CLRUN_I32, "33,65", 2, swap, "65,33", 1802);
    check_transpose(CLRUN_F32, "2,1,3,2,1,4", 6, reverse, "4,1,2,3,1,2", 1803);
    check_transpose(CLRUN_I32, "3,1,5", 3, keep, "3,1,5", 1804);
}

static void reshape_keeps_the_words(void **state)
{
    (void)state;
    current_seed = 1900;
    const int64_t shape[2] = {4, -1};
    node n = {.op = "reshape", .input_count = 1, .in = {type(CLRUN_I32, "2,3,4")},
              .attrs = {attr_ints("shape", 2, shape)}, .attr_count = 1};
    uint32_t *x = random_words(24, current_seed);
    n.data[0] = x;
    run(&n);
    expect_type(&n, "4,6");
    expect_exact(&n, x);
    free(x), node_free(&n);
}

static void check_concat(clrun_context *c, clrun_dtype dtype, int count, const char *const *dims,
                         int64_t axis, const char *out_dims, uint64_t seed)
{
    current_seed = seed;
    node n = {.op = "concat", .input_count = count, .attrs = {attr_int("axis", axis)},
              .attr_count = 1};
    const uint32_t *inputs[8];
    for (int i = 0; i < count; i++) {
        n.in[i] = type(dtype, dims[i]);
        inputs[i] = random_words(ref_elements(&n.in[i]), seed + (uint64_t)i);
        n.data[i] = inputs[i];
    }
    run_on(c, &n, 2);
    expect_type(&n, out_dims);
    uint32_t *ref = malloc(ref_elements(&n.out) * sizeof *ref);
    ref_concat(count, n.in, inputs, axis < 0 ? (int)axis + n.in[0].rank : (int)axis, ref);
    expect_exact(&n, ref);
    for (int i = 0; i < count; i++)
        free((void *)inputs[i]);
    free(ref), node_free(&n);
}

static void concat_joins_along_any_axis(void **state)
{
    (void)state;
    const char *const middle[3] = {"2,3,4", "2,1,4", "2,5,4"};
    const char *const first[2] = {"1,7", "3,7"};
    const char *const last[4] = {"3,2,1", "3,2,5", "3,2,1", "3,2,2"};
    check_concat(ctx, CLRUN_F32, 3, middle, 1, "2,9,4", 2000);
    check_concat(ctx, CLRUN_I32, 2, first, 0, "4,7", 2001);
    check_concat(ctx, CLRUN_F32, 4, last, -1, "3,2,9", 2002);
}

static void concat_chains_its_launches_on_an_out_of_order_queue(void **state)
{
    (void)state;
    /* Not a missing op: the device has no out-of-order queue (or CLRUN_DEBUG=guard keeps the
     * queue in order), a documented configuration that this test cannot run on. Said aloud so
     * that a skip is never silent. */
    if (ooo_ctx == NULL) {
        print_message("skipped: no out-of-order queue (the device has none, or guard mode)\n");
        skip();
    }
    const char *const last[4] = {"3,2,1", "3,2,5", "3,2,1", "3,2,2"};
    check_concat(ooo_ctx, CLRUN_F32, 4, last, -1, "3,2,9", 2100);
    check_matmul(&(mm_case){"2,5,33,20", "33,70", "2,5,20,70", true, false, true, 1}, 2101);
}

static void check_slice(const char *dims, int64_t axis, int64_t start, int64_t end,
                        const char *out_dims, uint64_t seed)
{
    current_seed = seed;
    node n = {.op = "slice", .input_count = 1, .in = {type(CLRUN_F32, dims)},
              .attrs = {attr_int("axis", axis), attr_int("start", start), attr_int("end", end)},
              .attr_count = 3};
    uint64_t count = ref_elements(&n.in[0]);
    uint32_t *x = random_words(count, seed);
    n.data[0] = x;
    run(&n);
    expect_type(&n, out_dims);
    int rank = n.in[0].rank;
    int a = axis < 0 ? (int)axis + rank : (int)axis;
    int64_t len = n.in[0].shape[a];
    uint32_t *ref = malloc(ref_elements(&n.out) * sizeof *ref);
    ref_slice(&n.in[0], x, a, start < 0 ? start + len : start, end < 0 ? end + len : end, ref);
    expect_exact(&n, ref);
    free(x), free(ref), node_free(&n);
}

static void slice_takes_a_range_of_one_axis(void **state)
{
    (void)state;
    check_slice("3,5,2", 1, 1, 4, "3,3,2", 2200);
    check_slice("3,5,2", -2, -2, 5, "3,2,2", 2201);
    check_slice("6,4", 0, 5, 6, "1,4", 2202);
    check_slice("2,3,1000", 2, 0, 768, "2,3,768", 2203);
}

static void gather_picks_rows_and_zeroes_bad_indices(void **state)
{
    (void)state;
    current_seed = 2300;
    node n = {.op = "gather", .input_count = 2,
              .in = {type(CLRUN_F32, "10,7"), type(CLRUN_I32, "3,4")}};
    uint32_t *table = random_words(70, current_seed);
    int32_t *indices = random_ints(12, 0, 9, current_seed + 1);
    indices[2] = -1, indices[5] = 10, indices[7] = INT32_MIN;
    n.data[0] = table, n.data[1] = indices;
    run(&n);
    expect_type(&n, "3,4,7");
    uint32_t ref[84];
    ref_gather(&n.in[0], table, &n.in[1], indices, ref);
    expect_exact(&n, ref);
    free(table), free(indices), node_free(&n);
}

/* ---- conv2d and pooling ------------------------------------------------------------------ */

typedef struct conv_case {
    const char *x, *w, *out;
    int stride[2], pad[2], dilation[2], groups;
    bool bias;
} conv_case;

static void check_conv_once(const conv_case *c, uint64_t seed)
{
    current_seed = seed;
    node n = {.op = "conv2d", .input_count = c->bias ? 3 : 2,
              .in = {type(CLRUN_F32, c->x), type(CLRUN_F32, c->w)}};
    const int64_t stride[2] = {c->stride[0], c->stride[1]}, pad[2] = {c->pad[0], c->pad[1]};
    const int64_t dilation[2] = {c->dilation[0], c->dilation[1]};
    n.attrs[n.attr_count++] = attr_ints("stride", 2, stride);
    n.attrs[n.attr_count++] = attr_ints("pad", 2, pad);
    n.attrs[n.attr_count++] = attr_ints("dilation", 2, dilation);
    n.attrs[n.attr_count++] = attr_int("groups", c->groups);
    float *x = random_floats(ref_elements(&n.in[0]), -1, 1, seed);
    float *w = random_floats(ref_elements(&n.in[1]), -1, 1, seed + 1);
    float *bias = NULL;
    n.data[0] = x, n.data[1] = w;
    if (c->bias) {
        n.in[2] = type(CLRUN_F32, "1");
        n.in[2].shape[0] = n.in[1].shape[0];
        bias = random_floats((uint64_t)n.in[2].shape[0], -1, 1, seed + 2);
        n.data[2] = bias;
    }
    run(&n);
    expect_type(&n, c->out);
    uint64_t count = ref_elements(&n.out);
    double *ref = malloc(count * sizeof *ref), *scale = malloc(count * sizeof *scale);
    ref_conv ref_c = {{c->stride[0], c->stride[1]}, {c->pad[0], c->pad[1]},
                      {c->dilation[0], c->dilation[1]}, c->groups};
    ref_conv2d(&n.in[0], x, &n.in[1], w, bias, &ref_c, &n.out, ref, scale);
    expect_close(&n, ref, scale, 1e-5);
    free(ref), free(scale), free(x), free(w), free(bias), node_free(&n);
}

/* The case with the tiled product and the direct kernel. */
static void check_conv(const conv_case *c, uint64_t seed)
{
    for (size_t k = 0; k < sizeof kernel_choices / sizeof kernel_choices[0]; k++) {
        if (kernel_choices[k].choice == CLRUN__KERNELS_VECTOR)
            continue; /* no such conv kernel */
        clrun__ops_kernels = kernel_choices[k].choice;
        current_kernels = kernel_choices[k].name;
        check_conv_once(c, seed);
    }
    clrun__ops_kernels = CLRUN__KERNELS_AUTO;
    current_kernels = "auto";
}

static void conv2d_as_tiled_product(void **state)
{
    (void)state;
    const conv_case cases[] = {
        {"1,3,9,11", "16,3,3,3", "1,16,9,11", {1, 1}, {1, 1}, {1, 1}, 1, false},
        {"2,8,10,10", "32,8,3,3", "2,32,5,5", {2, 2}, {1, 1}, {1, 1}, 1, true},
        {"2,16,5,5", "70,16,1,1", "2,70,5,5", {1, 1}, {0, 0}, {1, 1}, 1, true}, /* pointwise */
        {"1,4,6,6", "32,2,1,1", "1,32,6,6", {1, 1}, {0, 0}, {1, 1}, 2, true},   /* 2 groups */
        {"1,3,20,20", "16,3,7,7", "1,16,7,7", {3, 3}, {3, 3}, {1, 1}, 1, false}, /* stem */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_conv(&cases[i], 2400 + i);
}

static void conv2d_direct_depthwise_grouped_dilated(void **state)
{
    (void)state;
    const conv_case cases[] = {
        {"1,12,9,9", "12,1,3,3", "1,12,5,5", {2, 2}, {1, 1}, {1, 1}, 12, true}, /* depthwise */
        {"1,8,7,7", "8,4,3,3", "1,8,7,7", {1, 1}, {2, 2}, {2, 2}, 2, false},
        {"1,2,8,9", "3,2,2,3", "1,3,4,7", {2, 1}, {0, 1}, {1, 2}, 1, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_conv(&cases[i], 2500 + i);
}

static void check_pool(const char *op, const char *dims, const int *kernel, const int *stride,
                       const int *pad, const char *out_dims, uint64_t seed)
{
    current_seed = seed;
    node n = {.op = op, .input_count = 1, .in = {type(CLRUN_F32, dims)}};
    const int64_t k[2] = {kernel[0], kernel[1]};
    n.attrs[n.attr_count++] = attr_ints("kernel", 2, k);
    if (stride) {
        const int64_t s[2] = {stride[0], stride[1]};
        n.attrs[n.attr_count++] = attr_ints("stride", 2, s);
    }
    if (pad) {
        const int64_t p[2] = {pad[0], pad[1]};
        n.attrs[n.attr_count++] = attr_ints("pad", 2, p);
    }
    float *x = random_floats(ref_elements(&n.in[0]), -4, 4, seed);
    n.data[0] = x;
    run(&n);
    expect_type(&n, out_dims);
    uint64_t count = ref_elements(&n.out);
    double *ref = malloc(count * sizeof *ref), *scale = malloc(count * sizeof *scale);
    const int zero[2] = {0, 0};
    ref_pool(!strcmp(op, "maxpool2d"), &n.in[0], x, kernel, stride ? stride : kernel,
             pad ? pad : zero, &n.out, ref);
    for (uint64_t i = 0; i < count; i++)
        scale[i] = 4;
    expect_close(&n, ref, scale, 1e-6);
    free(ref), free(scale), free(x), node_free(&n);
}

static void pools_with_stride_and_padding(void **state)
{
    (void)state;
    const int k3[2] = {3, 3}, s2[2] = {2, 2}, p1[2] = {1, 1}, k2[2] = {2, 2}, k23[2] = {2, 3};
    const int s12[2] = {1, 2}, p01[2] = {0, 1};
    check_pool("maxpool2d", "2,3,9,9", k3, s2, p1, "2,3,5,5", 2600);
    check_pool("maxpool2d", "1,2,8,7", k2, NULL, NULL, "1,2,4,3", 2601);
    check_pool("avgpool2d", "2,3,9,9", k3, s2, p1, "2,3,5,5", 2602);
    check_pool("avgpool2d", "1,2,6,7", k23, s12, p01, "1,2,5,4", 2603);
    /* rows wide enough for the vectors over the inner columns, strides 1, 2 and 3 */
    const int s1[2] = {1, 1}, s3[2] = {3, 3}, p0[2] = {0, 0};
    check_pool("maxpool2d", "1,2,5,75", k3, s2, p1, "1,2,3,38", 2604);
    check_pool("maxpool2d", "1,2,4,40", k3, s1, p1, "1,2,4,40", 2605);
    check_pool("avgpool2d", "1,2,5,75", k3, s2, p1, "1,2,3,38", 2606);
    check_pool("avgpool2d", "1,1,4,70", k3, s3, p0, "1,1,1,23", 2607);
    check_pool("maxpool2d", "1,1,7,70", k3, s3, p0, "1,1,2,23", 2608);
}

/* maxpool's 3 x 3 taps at stride 2 over rows wide enough for the vectors, where the kernel
 * shares each input row's maxima between two output rows: the bits of the taps in order, with
 * NaN (skipped), -inf, +0 against -0 (the first of equal taps kept) and ties among the taps. */
static void max_pool_3x3_at_stride_2_keeps_the_bits_of_its_taps(void **state)
{
    (void)state;
    const int k3[2] = {3, 3}, s2[2] = {2, 2}, p1[2] = {1, 1}, p0[2] = {0, 0};
    const struct {
        const char *dims, *out;
        const int *pad;
    } cases[] = {{"1,3,9,75", "1,3,5,38", p1}, {"2,2,12,80", "2,2,5,39", p0},
                 {"1,1,35,67", "1,1,18,34", p1}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        current_seed = 2620 + c;
        node n = {.op = "maxpool2d", .input_count = 1, .in = {type(CLRUN_F32, cases[c].dims)}};
        const int64_t k[2] = {3, 3}, st[2] = {2, 2}, pd[2] = {cases[c].pad[0], cases[c].pad[1]};
        n.attrs[n.attr_count++] = attr_ints("kernel", 2, k);
        n.attrs[n.attr_count++] = attr_ints("stride", 2, st);
        n.attrs[n.attr_count++] = attr_ints("pad", 2, pd);
        uint64_t count = ref_elements(&n.in[0]);
        /* negative values, and zeros of both signs often enough that a window's largest is
         * mostly a zero among others: which one it keeps shows in the sign */
        float *x = random_floats(count, -4, -1, current_seed);
        uint64_t rng = current_seed;
        for (uint64_t i = 0; i < count; i++) {
            uint64_t r = rng_next(&rng) % 16;
            x[i] = r == 0 ? NAN : r == 1 ? -INFINITY : r == 2 ? 0.0f : r == 3 ? -0.0f
                 : r == 4 ? -1.0f : x[i];
        }
        n.data[0] = x;
        run(&n);
        expect_type(&n, cases[c].out);
        uint64_t outs = ref_elements(&n.out);
        double *ref = malloc(outs * sizeof *ref);
        float *want = malloc(outs * sizeof *want);
        ref_pool(true, &n.in[0], x, k3, s2, cases[c].pad, &n.out, ref);
        for (uint64_t i = 0; i < outs; i++)
            want[i] = (float)ref[i];
        expect_exact(&n, want);
        free(ref), free(want), free(x), node_free(&n);
    }
}

static void global_avgpool_averages_each_plane(void **state)
{
    (void)state;
    current_seed = 2700;
    node n = {.op = "global_avgpool", .input_count = 1, .in = {type(CLRUN_F32, "2,5,7,7")}};
    float *x = random_floats(490, -1, 1, current_seed);
    n.data[0] = x;
    run(&n);
    expect_type(&n, "2,5");
    double ref[10], scale[10];
    const bool over_hw[4] = {false, false, true, true};
    ref_reduce("reduce_mean", &n.in[0], x, over_hw, ref, scale);
    expect_close(&n, ref, scale, 1e-5);
    free(x), node_free(&n);
}

/* ---- refusals ---------------------------------------------------------------------------- */

/* infer must refuse n with a message containing every fragment (NULL-terminated). */
static void expect_refusal(node *n, ...)
{
    char err[512];
    clrun_status s = infer(n, err, sizeof err);
    if (s != CLRUN_ERROR_INVALID_GRAPH)
        fail_msg("%s: expected a refusal, got %d (%s)", n->op, s, err);
    va_list ap;
    va_start(ap, n);
    for (const char *f = va_arg(ap, const char *); f; f = va_arg(ap, const char *))
        if (strstr(err, f) == NULL)
            fail_msg("%s: message \"%s\" lacks \"%s\"", n->op, err, f);
    va_end(ap);
}

static void matmul_refuses_different_inner_dimensions(void **state)
{
    (void)state;
    node n = {.op = "matmul", .input_count = 2,
              .in = {type(CLRUN_F32, "8,784"), type(CLRUN_F32, "512,10")}};
    expect_refusal(&n, "matmul: inner dimensions differ", "f32[8, 784]", "f32[512, 10]", NULL);
}

static void matmul_refuses_a_bias_of_the_wrong_length(void **state)
{
    (void)state;
    node n = {.op = "matmul", .input_count = 3,
              .in = {type(CLRUN_F32, "8,16"), type(CLRUN_F32, "16,10"), type(CLRUN_F32, "8")}};
    expect_refusal(&n, "bias", "f32[8]", "f32[10]", NULL);
}

static void matmul_refuses_batches_that_do_not_broadcast(void **state)
{
    (void)state;
    node n = {.op = "matmul", .input_count = 2,
              .in = {type(CLRUN_F32, "2,8,16"), type(CLRUN_F32, "3,16,10")}};
    expect_refusal(&n, "batch dimensions do not broadcast", "f32[2, 8, 16]", NULL);
}

static void matmul_refuses_a_transpose_flag_other_than_0_or_1(void **state)
{
    (void)state;
    node n = {.op = "matmul", .input_count = 2,
              .in = {type(CLRUN_F32, "8,16"), type(CLRUN_F32, "16,10")},
              .attrs = {attr_int("transpose_a", 2)}, .attr_count = 1};
    expect_refusal(&n, "transpose_a", "0 or 1", NULL);
}

static void matmul_refuses_a_vector(void **state)
{
    (void)state;
    node n = {.op = "matmul", .input_count = 2,
              .in = {type(CLRUN_F32, "16"), type(CLRUN_F32, "16,10")}};
    expect_refusal(&n, "at least 2 dimensions", NULL);
}

static void binary_refuses_shapes_that_do_not_broadcast(void **state)
{
    (void)state;
    node n = {.op = "add", .input_count = 2,
              .in = {type(CLRUN_F32, "4,3"), type(CLRUN_F32, "4")}};
    expect_refusal(&n, "add: shapes do not broadcast", "f32[4, 3]", "f32[4]", NULL);
}

static void binary_refuses_mixed_dtypes(void **state)
{
    (void)state;
    node n = {.op = "mul", .input_count = 2,
              .in = {type(CLRUN_F32, "4"), type(CLRUN_I32, "4")}};
    expect_refusal(&n, "mul: dtypes differ", "i32[4]", NULL);
}

static void float_only_ops_refuse_i32(void **state)
{
    (void)state;
    node n = {.op = "prelu", .input_count = 2,
              .in = {type(CLRUN_I32, "4"), type(CLRUN_I32, "4")}};
    expect_refusal(&n, "prelu", "i32[4]", "expected f32", NULL);
    node g = {.op = "gelu", .input_count = 1, .in = {type(CLRUN_I32, "4")}};
    expect_refusal(&g, "gelu", "expected f32", NULL);
    node e = {.op = "gelu_erf", .input_count = 1, .in = {type(CLRUN_I32, "4")}};
    expect_refusal(&e, "gelu_erf", "expected f32", NULL);
}

static void f16_is_refused_until_it_has_kernels(void **state)
{
    (void)state; /* the elementwise ops take f16; matmul has no f16 kernel */
    node n = {.op = "matmul", .input_count = 2, .in = {type(CLRUN_F16, "4,4"), type(CLRUN_F16, "4,4")}};
    expect_refusal(&n, "matmul", "f16", NULL);
}

static void unknown_attributes_are_refused(void **state)
{
    (void)state;
    node n = {.op = "add", .input_count = 2, .in = {type(CLRUN_F32, "4"), type(CLRUN_F32, "4")},
              .attrs = {attr_int("axis", 1)}, .attr_count = 1};
    expect_refusal(&n, "add: unknown attribute 'axis'", NULL);
    node m = {.op = "matmul", .input_count = 2,
              .in = {type(CLRUN_F32, "4,4"), type(CLRUN_F32, "4,4")},
              .attrs = {attr_int("transpose_c", 1)}, .attr_count = 1};
    expect_refusal(&m, "unknown attribute 'transpose_c'", "transpose_a", NULL);
}

static void attributes_of_the_wrong_kind_are_refused(void **state)
{
    (void)state;
    int64_t list[2] = {1, 2};
    node n = {.op = "scale", .input_count = 1, .in = {type(CLRUN_F32, "4")},
              .attrs = {attr_ints("alpha", 2, list)}, .attr_count = 1};
    expect_refusal(&n, "scale: attribute 'alpha' must be a number", NULL);
}

static void wrong_input_counts_are_refused(void **state)
{
    (void)state;
    node n = {.op = "add", .input_count = 1, .in = {type(CLRUN_F32, "4")}};
    expect_refusal(&n, "add: takes 2 inputs, got 1", NULL);
    node m = {.op = "matmul", .input_count = 1, .in = {type(CLRUN_F32, "4,4")}};
    expect_refusal(&m, "matmul: takes 2 to 5 inputs, got 1", NULL);
}

static void transpose_refuses_a_perm_that_is_not_a_permutation(void **state)
{
    (void)state;
    const int64_t perm[3] = {0, 0, 1};
    node n = {.op = "transpose", .input_count = 1, .in = {type(CLRUN_F32, "2,3,4")},
              .attrs = {attr_ints("perm", 3, perm)}, .attr_count = 1};
    expect_refusal(&n, "transpose: perm is not a permutation", NULL);
    node m = {.op = "transpose", .input_count = 1, .in = {type(CLRUN_F32, "2,3,4")},
              .attrs = {attr_ints("perm", 2, perm)}, .attr_count = 1};
    expect_refusal(&m, "perm has 2 entries", "f32[2, 3, 4]", NULL);
}

static void required_attributes_are_refused_when_missing(void **state)
{
    (void)state;
    node n = {.op = "transpose", .input_count = 1, .in = {type(CLRUN_F32, "2,3")}};
    expect_refusal(&n, "transpose: missing required attribute 'perm'", NULL);
    node c = {.op = "concat", .input_count = 2, .in = {type(CLRUN_F32, "2"), type(CLRUN_F32, "2")}};
    expect_refusal(&c, "concat: missing required attribute 'axis'", NULL);
    node p = {.op = "maxpool2d", .input_count = 1, .in = {type(CLRUN_F32, "1,1,4,4")}};
    expect_refusal(&p, "maxpool2d: missing required attribute 'kernel'", NULL);
}

static void reshape_refuses_a_different_element_count(void **state)
{
    (void)state;
    const int64_t shape[2] = {5, -1};
    node n = {.op = "reshape", .input_count = 1, .in = {type(CLRUN_F32, "2,3,4")},
              .attrs = {attr_ints("shape", 2, shape)}, .attr_count = 1};
    expect_refusal(&n, "reshape: cannot reshape f32[2, 3, 4] (24 elements)", NULL);
}

static void concat_refuses_inputs_that_disagree_off_the_axis(void **state)
{
    (void)state;
    node n = {.op = "concat", .input_count = 2,
              .in = {type(CLRUN_F32, "2,3"), type(CLRUN_F32, "3,3")},
              .attrs = {attr_int("axis", 1)}, .attr_count = 1};
    expect_refusal(&n, "concat: input 1 is f32[3, 3], input 0 is f32[2, 3]", NULL);
    node m = {.op = "concat", .input_count = 2,
              .in = {type(CLRUN_F32, "2,3"), type(CLRUN_F32, "2,3")},
              .attrs = {attr_int("axis", 2)}, .attr_count = 1};
    expect_refusal(&m, "concat: axis 2 is out of range for f32[2, 3]", NULL);
}

static void slice_refuses_a_range_outside_the_axis(void **state)
{
    (void)state;
    node n = {.op = "slice", .input_count = 1, .in = {type(CLRUN_F32, "4,5")},
              .attrs = {attr_int("axis", 1), attr_int("start", 2), attr_int("end", 6)},
              .attr_count = 3};
    expect_refusal(&n, "slice: range [2, 6)", "f32[4, 5]", NULL);
    node e = {.op = "slice", .input_count = 1, .in = {type(CLRUN_F32, "4,5")},
              .attrs = {attr_int("axis", 0), attr_int("start", 3), attr_int("end", 3)},
              .attr_count = 3};
    expect_refusal(&e, "slice: range [3, 3) is empty", NULL);
}

static void gather_refuses_float_indices(void **state)
{
    (void)state;
    node n = {.op = "gather", .input_count = 2,
              .in = {type(CLRUN_F32, "10,4"), type(CLRUN_F32, "3")}};
    expect_refusal(&n, "gather: indices are f32[3]: expected i32", NULL);
}

static void layernorm_refuses_a_gamma_of_the_wrong_length(void **state)
{
    (void)state;
    node n = {.op = "layernorm", .input_count = 3,
              .in = {type(CLRUN_F32, "2,8"), type(CLRUN_F32, "7"), type(CLRUN_F32, "8")}};
    expect_refusal(&n, "layernorm: gamma is f32[7]: expected f32[8]", NULL);
}

static void reductions_refuse_bad_axes(void **state)
{
    (void)state;
    const int64_t out_of_range[1] = {3}, twice[2] = {1, -1};
    node n = {.op = "reduce_sum", .input_count = 1, .in = {type(CLRUN_F32, "2,8")},
              .attrs = {attr_ints("axes", 1, out_of_range)}, .attr_count = 1};
    expect_refusal(&n, "reduce_sum: axis 3 is out of range for f32[2, 8]", NULL);
    node m = {.op = "reduce_max", .input_count = 1, .in = {type(CLRUN_F32, "2,8")},
              .attrs = {attr_ints("axes", 2, twice)}, .attr_count = 1};
    expect_refusal(&m, "reduce_max: axis -1 given twice", NULL);
}

static void softmax_refuses_a_causal_flag_other_than_0_or_1(void **state)
{
    (void)state;
    node n = {.op = "softmax", .input_count = 1, .in = {type(CLRUN_F32, "2,8")},
              .attrs = {attr_int("causal", 3)}, .attr_count = 1};
    expect_refusal(&n, "softmax: attribute 'causal' must be 0 or 1", NULL);
}

static void conv2d_refuses_channels_that_do_not_match_groups(void **state)
{
    (void)state;
    node n = {.op = "conv2d", .input_count = 2,
              .in = {type(CLRUN_F32, "1,6,8,8"), type(CLRUN_F32, "4,3,3,3")},
              .attrs = {attr_int("groups", 4)}, .attr_count = 1};
    expect_refusal(&n, "conv2d: x is f32[1, 6, 8, 8], w is f32[4, 3, 3, 3], groups 4", NULL);
    node m = {.op = "conv2d", .input_count = 2,
              .in = {type(CLRUN_F32, "1,3,8,8"), type(CLRUN_F32, "4,3,3,3")},
              .attrs = {attr_int("stride", 0)}, .attr_count = 1};
    expect_refusal(&m, "conv2d: attribute 'stride' has 0: must be >= 1", NULL);
}

static void conv2d_refuses_a_kernel_larger_than_the_padded_image(void **state)
{
    (void)state;
    node n = {.op = "conv2d", .input_count = 2,
              .in = {type(CLRUN_F32, "1,3,4,4"), type(CLRUN_F32, "4,3,5,5")}};
    expect_refusal(&n, "conv2d: the kernel of w f32[4, 3, 5, 5]", "does not fit", NULL);
}

static void pools_refuse_padding_over_half_the_kernel(void **state)
{
    (void)state;
    const int64_t kernel[2] = {2, 2}, pad[2] = {2, 0};
    node n = {.op = "avgpool2d", .input_count = 1, .in = {type(CLRUN_F32, "1,1,8,8")},
              .attrs = {attr_ints("kernel", 2, kernel), attr_ints("pad", 2, pad)},
              .attr_count = 2};
    expect_refusal(&n, "avgpool2d: pad [2, 0] exceeds half the kernel [2, 2]", NULL);
}

static void images_must_be_four_dimensional(void **state)
{
    (void)state;
    node n = {.op = "global_avgpool", .input_count = 1, .in = {type(CLRUN_F32, "3,8,8")}};
    expect_refusal(&n, "global_avgpool: x is f32[3, 8, 8]: expected [N, C, H, W]", NULL);
}

/* ---- main -------------------------------------------------------------------------------- */

static int setup(void **state)
{
    (void)state;
    if (clrun_context_create(NULL, &ctx) != CLRUN_OK) {
        fprintf(stderr, "no context: %s\n", clrun_last_error(NULL));
        return -1;
    }
    clrun_context_options o;
    clrun_context_options_init(&o);
    o.out_of_order = 1;
    /* A device without out-of-order queues gets an in-order one: failing to create the context
     * at all is an error, not a reason to skip the out-of-order test. */
    if (clrun_context_create(&o, &ooo_ctx) != CLRUN_OK) {
        fprintf(stderr, "no out-of-order context: %s\n", clrun_last_error(NULL));
        clrun_context_destroy(ctx);
        ctx = NULL;
        return -1;
    }
    if (!clrun_context_out_of_order(ooo_ctx)) {
        clrun_context_destroy(ooo_ctx);
        ooo_ctx = NULL;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    clrun_context_destroy(ooo_ctx);
    clrun_context_destroy(ctx);
    return 0;
}

int main(void)
{
    clrun_test_device_environment(cache_dir, sizeof cache_dir);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_documented_op_is_in_the_table),
        cmocka_unit_test(kernel_geometry_indices_match_the_host),
        cmocka_unit_test(unary_f32_ops_match_reference),
        cmocka_unit_test(unary_i32_ops_are_exact_and_wrap),
        cmocka_unit_test(copy_keeps_every_bit),
        cmocka_unit_test(scale_is_alpha_x_plus_beta),
        cmocka_unit_test(binary_ops_on_equal_shapes),
        cmocka_unit_test(binary_ops_broadcast_a_row),
        cmocka_unit_test(binary_ops_broadcast_both_ways),
        cmocka_unit_test(binary_ops_broadcast_a_scalar),
        cmocka_unit_test(matmul_odd_sizes),
        cmocka_unit_test(matmul_transposes),
        cmocka_unit_test(matmul_batches_broadcast),
        cmocka_unit_test(matmul_repeated_runs_are_bit_identical),
        cmocka_unit_test(softmax_rows_short_and_long),
        cmocka_unit_test(softmax_causal_masks_the_future),
        cmocka_unit_test(softmax_repeated_runs_are_bit_identical),
        cmocka_unit_test(layernorm_matches_reference),
        cmocka_unit_test(reductions_over_chosen_axes),
        cmocka_unit_test(reductions_default_to_every_axis),
        cmocka_unit_test(transpose_permutes_exactly),
        cmocka_unit_test(reshape_keeps_the_words),
        cmocka_unit_test(concat_joins_along_any_axis),
        cmocka_unit_test(concat_chains_its_launches_on_an_out_of_order_queue),
        cmocka_unit_test(slice_takes_a_range_of_one_axis),
        cmocka_unit_test(gather_picks_rows_and_zeroes_bad_indices),
        cmocka_unit_test(conv2d_as_tiled_product),
        cmocka_unit_test(conv2d_direct_depthwise_grouped_dilated),
        cmocka_unit_test(pools_with_stride_and_padding),
        cmocka_unit_test(max_pool_3x3_at_stride_2_keeps_the_bits_of_its_taps),
        cmocka_unit_test(global_avgpool_averages_each_plane),
        cmocka_unit_test(matmul_refuses_different_inner_dimensions),
        cmocka_unit_test(matmul_refuses_a_bias_of_the_wrong_length),
        cmocka_unit_test(matmul_refuses_batches_that_do_not_broadcast),
        cmocka_unit_test(matmul_refuses_a_transpose_flag_other_than_0_or_1),
        cmocka_unit_test(matmul_refuses_a_vector),
        cmocka_unit_test(binary_refuses_shapes_that_do_not_broadcast),
        cmocka_unit_test(binary_refuses_mixed_dtypes),
        cmocka_unit_test(float_only_ops_refuse_i32),
        cmocka_unit_test(f16_is_refused_until_it_has_kernels),
        cmocka_unit_test(reductions_in_f64),
        cmocka_unit_test(unknown_attributes_are_refused),
        cmocka_unit_test(attributes_of_the_wrong_kind_are_refused),
        cmocka_unit_test(wrong_input_counts_are_refused),
        cmocka_unit_test(transpose_refuses_a_perm_that_is_not_a_permutation),
        cmocka_unit_test(required_attributes_are_refused_when_missing),
        cmocka_unit_test(reshape_refuses_a_different_element_count),
        cmocka_unit_test(concat_refuses_inputs_that_disagree_off_the_axis),
        cmocka_unit_test(slice_refuses_a_range_outside_the_axis),
        cmocka_unit_test(gather_refuses_float_indices),
        cmocka_unit_test(layernorm_refuses_a_gamma_of_the_wrong_length),
        cmocka_unit_test(reductions_refuse_bad_axes),
        cmocka_unit_test(softmax_refuses_a_causal_flag_other_than_0_or_1),
        cmocka_unit_test(conv2d_refuses_channels_that_do_not_match_groups),
        cmocka_unit_test(conv2d_refuses_a_kernel_larger_than_the_padded_image),
        cmocka_unit_test(pools_refuse_padding_over_half_the_kernel),
        cmocka_unit_test(images_must_be_four_dimensional),
    };
    CLRUN_TEST_FILTERS_FROM_ENVIRONMENT();
    int failed = cmocka_run_group_tests(tests, setup, teardown);
    clrun_test_remove_dir(cache_dir);
    return failed;
}
