/* col2im on a real device, built with the graph API and run by an executor: against the plain C
 * reference of op_reference.c over fixed and random geometries (stride 1 to 3, asymmetric pads,
 * dilation, odd sizes, windows that miss image elements, both layouts); the transposed layout of
 * the same columns giving the same bits; every output the same bits on a second run; and the
 * type rule's refusals, each naming what is wrong.
 *
 * Tolerance: an output d with reference r (in double) passes when |d - r| <= 1e-6 (|r| + s), s
 * being the sum of the absolute values of the terms that made it (a few per element). */
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
#include "ops/ops_internal.h"
#include "op_reference.h"
#include "rng.h"

static char cache_dir[512];
static clrun_context *ctx;

typedef struct col2im_case {
    int N, C;
    ref_col2im_geometry p;
} col2im_case;

static float *random_floats(uint64_t n, uint64_t *state)
{
    float *x = malloc(n * sizeof *x + 4);
    for (uint64_t i = 0; i < n; i++)
        x[i] = (float)(-1.0 + 2.0 * (double)(rng_next(state) >> 11) / 9007199254740992.0);
    return x;
}

static void case_name(const col2im_case *c, char *buf, size_t size)
{
    const ref_col2im_geometry *p = &c->p;
    snprintf(buf, size, "N %d, C %d, image %dx%d, kernel %dx%d, stride %d,%d, pads %d,%d,%d,%d, "
             "dilation %d,%d, %s", c->N, c->C, p->image[0], p->image[1], p->kernel[0], p->kernel[1],
             p->stride[0], p->stride[1], p->pad[0], p->pad[1], p->pad_end[0], p->pad_end[1],
             p->dilation[0], p->dilation[1], p->transposed ? "transposed" : "[N, CKK, L]");
}

/* The windows along one axis; 0 when none fits. */
static int extent(const ref_col2im_geometry *p, int a)
{
    int room = p->image[a] + p->pad[a] + p->pad_end[a] - p->dilation[a] * (p->kernel[a] - 1) - 1;
    return room < 0 ? 0 : room / p->stride[a] + 1;
}

/* The case's attributes into a (6 entries), the columns' type into *t. */
static void case_attrs(const col2im_case *c, clrun_attr *a, clrun_tensor_type *t)
{
    static int64_t v[5][4]; /* attr_ints keeps the pointer: the graph copies at add_node */
    const ref_col2im_geometry *p = &c->p;
    for (int i = 0; i < 2; i++) {
        v[0][i] = p->image[i], v[1][i] = p->kernel[i], v[2][i] = p->stride[i];
        v[3][i] = p->pad[i], v[3][2 + i] = p->pad_end[i], v[4][i] = p->dilation[i];
    }
    a[0] = attr_ints("image", 2, v[0]);
    a[1] = attr_ints("kernel", 2, v[1]);
    a[2] = attr_ints("stride", 2, v[2]);
    a[3] = attr_ints("pads", 4, v[3]);
    a[4] = attr_ints("dilation", 2, v[4]);
    a[5] = attr_int("transposed", p->transposed);
    int64_t rows = (int64_t)c->C * p->kernel[0] * p->kernel[1], L = (int64_t)extent(p, 0) * extent(p, 1);
    *t = (clrun_tensor_type){CLRUN_F32, 3, {c->N, p->transposed ? L : rows, p->transposed ? rows : L}};
}

/* Runs col2im over cols twice in an executor (the same bits both times); returns the output
 * (malloc'd). */
static float *run_col2im(const col2im_case *c, const float *cols)
{
    clrun_attr a[6];
    clrun_tensor_type tc;
    case_attrs(c, a, &tc);
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("col2im", &g), CLRUN_OK);
    clrun_tensor_id in, out;
    assert_int_equal(clrun_graph_add_input(g, "cols", &tc, false, &in), CLRUN_OK);
    const char *names[] = {"y"};
    if (clrun_graph_add_node(g, "col2im", &in, 1, names, 1, a, 6, &out) != CLRUN_OK)
        fail_msg("col2im refused: %s", clrun_graph_last_error(g));
    assert_int_equal(clrun_graph_mark_output(g, out), CLRUN_OK);
    const clrun_tensor_type *ty = clrun_graph_tensor_type(g, out);
    assert_int_equal(ty->rank, 4);
    assert_true(ty->shape[0] == c->N && ty->shape[1] == c->C && ty->shape[2] == c->p.image[0] &&
                ty->shape[3] == c->p.image[1]);
    uint64_t bytes = ref_elements(ty) * 4;
    clrun_exec *exec = NULL;
    if (clrun_exec_create(ctx, g, NULL, &exec) != CLRUN_OK)
        fail_msg("executor: %s", clrun_last_error(ctx));
    clrun_buffer buf;
    assert_int_equal(clrun_alloc(ctx, ref_elements(&tc) * 4, &buf), CLRUN_OK);
    assert_int_equal(clrun_buffer_write(ctx, &buf, cols), CLRUN_OK);
    float *result = malloc(bytes), *again = malloc(bytes);
    for (int run = 0; run < 2; run++) {
        if (clrun_exec_run(exec, &buf, 1) != CLRUN_OK)
            fail_msg("run: %s", clrun_last_error(ctx));
        assert_int_equal(clrun_exec_read_output(exec, 0, run ? again : result, bytes), CLRUN_OK);
    }
    if (memcmp(result, again, bytes) != 0)
        fail_msg("col2im: the second run gives other bits");
    free(again);
    clrun_free(ctx, &buf);
    clrun_exec_destroy(exec);
    clrun_graph_destroy(g);
    return result;
}

/* One case against the reference; then the same columns in the other layout must give the same
 * bits (the same sums in the same order), and so must the kernel a CPU does not take (the row
 * kernel where the phases kernel runs). */
static void check_case(col2im_case c, uint64_t seed)
{
    char name[256];
    case_name(&c, name, sizeof name);
    clrun_attr a[6];
    clrun_tensor_type tc;
    case_attrs(&c, a, &tc);
    uint64_t state = seed, n = ref_elements(&tc);
    float *cols = random_floats(n, &state);
    float *got = run_col2im(&c, cols);
    uint64_t ny = (uint64_t)c.N * c.C * c.p.image[0] * c.p.image[1];
    double *ref = malloc(ny * sizeof *ref), *scale = malloc(ny * sizeof *scale);
    ref_col2im(&tc, cols, &c.p, ref, scale);
    for (uint64_t i = 0; i < ny; i++) {
        double bound = 1e-6 * (fabs(ref[i]) + scale[i]);
        if (!(fabs((double)got[i] - ref[i]) <= bound))
            fail_msg("col2im, %s, seed %llu: element %llu is %.9g, reference %.9g (allowed %.3g)", name,
                     (unsigned long long)seed, (unsigned long long)i, got[i], ref[i], bound);
    }
    /* the other layout: [N, A, B] -> [N, B, A] */
    int64_t A = tc.shape[1], B = tc.shape[2];
    float *other = malloc(n * sizeof *other + 4);
    for (int64_t b = 0; b < c.N; b++)
        for (int64_t i = 0; i < A; i++)
            for (int64_t j = 0; j < B; j++)
                other[(b * B + j) * A + i] = cols[(b * A + i) * B + j];
    c.p.transposed = !c.p.transposed;
    float *same = run_col2im(&c, other);
    if (memcmp(same, got, ny * sizeof *got) != 0)
        fail_msg("col2im, %s: the other layout gives other bits", name);
    free(same);
    c.p.transposed = !c.p.transposed;
    clrun__col2im_phases = 0;
    float *rows = run_col2im(&c, cols);
    clrun__col2im_phases = 2;
    if (memcmp(rows, got, ny * sizeof *got) != 0)
        fail_msg("col2im, %s: the row kernel and the phases kernel give other bits", name);
    free(rows);
    free(other);
    free(ref);
    free(scale);
    free(got);
    free(cols);
}

static void col2im_matches_the_reference(void **state)
{
    (void)state;
    clrun__col2im_phases = 2; /* the phases kernel on every device (oclgrind's is a GPU) */
    /* N, C, {image, kernel, stride, pad, pad_end, dilation, transposed} */
    static const col2im_case cases[] = {
        {1, 1, {{5, 5}, {2, 2}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, false}},   /* ONNX's test_col2im */
        {2, 3, {{8, 8}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, true}},    /* 3x3, same padding */
        {2, 4, {{8, 8}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, true}},    /* ResNet's strided 3x3 */
        {2, 3, {{7, 9}, {1, 1}, {2, 2}, {0, 0}, {0, 0}, {1, 1}, true}},    /* 1x1 stride 2: gaps */
        {1, 2, {{7, 7}, {7, 7}, {2, 2}, {3, 3}, {3, 3}, {1, 1}, false}},   /* the stem's 7x7 */
        {1, 2, {{9, 11}, {3, 2}, {2, 3}, {1, 0}, {2, 1}, {2, 1}, false}},  /* asymmetric, dilated */
        {3, 1, {{6, 5}, {2, 3}, {3, 1}, {0, 2}, {1, 0}, {1, 2}, true}},
        {1, 5, {{1, 13}, {1, 4}, {1, 3}, {0, 1}, {0, 2}, {1, 3}, false}},  /* a 1-D one */
        {2, 2, {{4, 4}, {2, 2}, {5, 5}, {0, 0}, {1, 1}, {1, 1}, false}},   /* stride > kernel */
        {1, 2, {{12, 12}, {4, 4}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, false}}, /* a U-Net's up-step */
        {1, 1, {{2, 1100}, {1, 3}, {1, 2}, {0, 1}, {0, 1}, {1, 1}, false}}, /* a row past private */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(cases[i], 1000 + i);
    uint64_t rng = 77;
    for (int i = 0; i < 20; i++) {
        col2im_case c;
        memset(&c, 0, sizeof c);
        c.N = 1 + (int)(rng_next(&rng) % 3), c.C = 1 + (int)(rng_next(&rng) % 4);
        for (int a = 0; a < 2; a++) {
            c.p.image[a] = 1 + (int)(rng_next(&rng) % 12);
            c.p.kernel[a] = 1 + (int)(rng_next(&rng) % 4);
            c.p.stride[a] = 1 + (int)(rng_next(&rng) % 3);
            c.p.dilation[a] = 1 + (int)(rng_next(&rng) % 2);
            c.p.pad[a] = (int)(rng_next(&rng) % 3);
            c.p.pad_end[a] = (int)(rng_next(&rng) % 3);
        }
        c.p.transposed = rng_next(&rng) % 2;
        if (extent(&c.p, 0) < 1 || extent(&c.p, 1) < 1)
            continue;
        check_case(c, 2000 + (uint64_t)i);
    }
    clrun__col2im_phases = 1;
}

/* ---- refusals ---------------------------------------------------------------------------- */

/* col2im over cols of type t with these attributes must be refused, with the words in its reason. */
static void expect_refusal(clrun_tensor_type t, const clrun_attr *attrs, int na, const char *word1,
                           const char *word2)
{
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("refuse", &g), CLRUN_OK);
    clrun_tensor_id in, y;
    assert_int_equal(clrun_graph_add_input(g, "cols", &t, false, &in), CLRUN_OK);
    const char *names[] = {"y"};
    if (clrun_graph_add_node(g, "col2im", &in, 1, names, 1, attrs, na, &y) == CLRUN_OK)
        fail_msg("col2im accepted what it should refuse (expected '%s')", word1);
    const char *why = clrun_graph_last_error(g);
    if (!strstr(why, "col2im") || !strstr(why, word1) || (word2 && !strstr(why, word2)))
        fail_msg("col2im: the reason '%s' lacks '%s'%s%s", why, word1, word2 ? " or " : "",
                 word2 ? word2 : "");
    clrun_graph_destroy(g);
}

static void type_rule_refuses_what_does_not_fit(void **state)
{
    (void)state;
    const int64_t image[2] = {5, 5}, k2[2] = {2, 2}, zero[2] = {0, 2}, pads3[3] = {0, 0, 0};
    const int64_t big[2] = {7, 7};
    clrun_attr a[4] = {attr_ints("image", 2, image), attr_ints("kernel", 2, k2)};
    /* ONNX's test_col2im: [1, 5, 5] x [2, 2] -> 4 x 4 windows = 16 */
    const clrun_tensor_type good = {CLRUN_F32, 3, {1, 20, 16}};
    a[2] = attr_int("transposed", 1);
    expect_refusal(good, a, 3, "L is 20", "4 x 4"); /* transposed: [N, L, CKK] */
    expect_refusal(good, a, 1, "kernel", NULL);     /* required */
    expect_refusal(good, a + 1, 1, "image", NULL);
    expect_refusal((clrun_tensor_type){CLRUN_F32, 4, {1, 20, 16, 1}}, a, 2, "f32[1, 20, 16, 1]", "[N, C*KH*KW, L]");
    expect_refusal((clrun_tensor_type){CLRUN_F32, 3, {1, 18, 16}}, a, 2, "18 rows", "2 x 2");
    expect_refusal((clrun_tensor_type){CLRUN_F32, 3, {1, 20, 15}}, a, 2, "L is 15", "4 x 4");
    expect_refusal((clrun_tensor_type){CLRUN_I32, 3, {1, 20, 16}}, a, 2, "i32", NULL);
    a[1] = attr_ints("kernel", 2, big);
    expect_refusal((clrun_tensor_type){CLRUN_F32, 3, {1, 49, 1}}, a, 2, "does not fit", NULL);
    a[1] = attr_ints("kernel", 2, zero);
    expect_refusal(good, a, 2, "'kernel' has 0", NULL);
    a[1] = attr_ints("kernel", 2, k2);
    a[2] = attr_ints("pads", 3, pads3);
    expect_refusal(good, a, 3, "'pads' needs 4 values", NULL);
    a[2] = attr_ints("stride", 2, zero);
    expect_refusal(good, a, 3, "'stride' has 0", NULL);
    a[2] = attr_int("transposed", 2);
    expect_refusal(good, a, 3, "'transposed' must be 0 or 1", NULL);
    a[2] = attr_int("groups", 1);
    expect_refusal(good, a, 3, "groups", NULL);
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
        cmocka_unit_test(col2im_matches_the_reference),
        cmocka_unit_test(type_rule_refuses_what_does_not_fit),
    };
    CLRUN_TEST_FILTERS_FROM_ENVIRONMENT();
    int failed = cmocka_run_group_tests(tests, setup, teardown);
    clrun_test_remove_dir(cache_dir);
    return failed;
}
