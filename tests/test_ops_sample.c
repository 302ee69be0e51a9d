/* grid_sample and roi_align on a real device, built with the graph API and run by an executor,
 * against the plain C references of op_reference.c: every mode, padding and alignment of
 * grid_sample over grids that reach far outside the image, in f32 and (where the device has
 * doubles) f64; roi_align's modes, coordinate conventions, fixed and adaptive sampling over
 * boxes inside, across and outside the image; a batch index outside the batch failing the run
 * with the box named, and the next good run passing; and the type rules' refusals.
 *
 * Tolerance: an output d with reference r (in double) passes when |d - r| <= tol (1 + s), s
 * the sum of the absolute values of the terms that made it: tol 2e-5 in f32 (the coordinates
 * are computed in f32 too), 1e-12 in f64. */
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
#include "rng.h"

static char cache_dir[512];
static clrun_context *ctx;
static bool has_fp64;

static double uniform(uint64_t *state, double lo, double hi)
{
    return lo + (hi - lo) * (double)(rng_next(state) >> 11) / 9007199254740992.0;
}

/* A node of `op` over inputs of these types and host values; runs it twice in an executor
 * (the same bits both times) and returns the output (malloc'd), or NULL with the run's status
 * in *status and its message in err when a run fails. */
static void *run_node(const char *op, int n_in, const clrun_tensor_type *types, void *const *data,
                      const clrun_attr *attrs, int na, clrun_status *status, char *err, size_t errlen)
{
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create(op, &g), CLRUN_OK);
    clrun_tensor_id in[3], out;
    static const char *const names[] = {"a", "b", "c"};
    for (int i = 0; i < n_in; i++)
        assert_int_equal(clrun_graph_add_input(g, names[i], &types[i], false, &in[i]), CLRUN_OK);
    const char *outs[] = {"y"};
    if (clrun_graph_add_node(g, op, in, n_in, outs, 1, attrs, na, &out) != CLRUN_OK)
        fail_msg("%s refused: %s", op, clrun_graph_last_error(g));
    assert_int_equal(clrun_graph_mark_output(g, out), CLRUN_OK);
    uint64_t bytes = ref_elements(clrun_graph_tensor_type(g, out)) *
                     clrun_dtype_size(clrun_graph_tensor_type(g, out)->dtype);
    clrun_exec *exec = NULL;
    if (clrun_exec_create(ctx, g, NULL, &exec) != CLRUN_OK)
        fail_msg("executor: %s", clrun_last_error(ctx));
    clrun_buffer buf[3];
    for (int i = 0; i < n_in; i++) {
        assert_int_equal(clrun_alloc(ctx, ref_elements(&types[i]) * clrun_dtype_size(types[i].dtype),
                                     &buf[i]), CLRUN_OK);
        assert_int_equal(clrun_buffer_write(ctx, &buf[i], data[i]), CLRUN_OK);
    }
    char *result = malloc(bytes), *again = malloc(bytes);
    *status = CLRUN_OK;
    for (int run = 0; run < 2 && *status == CLRUN_OK; run++) {
        *status = clrun_exec_run(exec, buf, n_in);
        if (*status != CLRUN_OK)
            snprintf(err, errlen, "%s", clrun_last_error(ctx));
        else
            assert_int_equal(clrun_exec_read_output(exec, 0, run ? again : result, bytes), CLRUN_OK);
    }
    if (*status == CLRUN_OK && memcmp(result, again, bytes) != 0)
        fail_msg("%s: the second run gives other bits", op);
    free(again);
    if (*status != CLRUN_OK) {
        free(result);
        result = NULL;
    }
    for (int i = 0; i < n_in; i++)
        clrun_free(ctx, &buf[i]);
    clrun_exec_destroy(exec);
    clrun_graph_destroy(g);
    return result;
}

/* Values of dtype f32 or f64 from doubles (malloc'd; the doubles are rounded to f32 in place
 * first, so the reference sees exactly what the device does). */
static void *as_dtype(clrun_dtype dtype, double *v, uint64_t n)
{
    if (dtype == CLRUN_F64) {
        void *p = malloc(n * sizeof(double));
        memcpy(p, v, n * sizeof(double));
        return p;
    }
    float *f = malloc(n * sizeof *f);
    for (uint64_t i = 0; i < n; i++) {
        f[i] = (float)v[i];
        v[i] = f[i];
    }
    return f;
}

static double element(clrun_dtype dtype, const void *p, uint64_t i)
{
    return dtype == CLRUN_F64 ? ((const double *)p)[i] : ((const float *)p)[i];
}

static void compare(const char *what, clrun_dtype dtype, const void *got, const double *ref,
                    const double *scale, uint64_t n)
{
    double tol = dtype == CLRUN_F64 ? 1e-12 : 2e-5;
    for (uint64_t i = 0; i < n; i++) {
        double d = element(dtype, got, i), bound = tol * (1 + scale[i]);
        if (!(fabs(d - ref[i]) <= bound))
            fail_msg("%s: element %llu is %.17g, reference %.17g (allowed %.3g)", what,
                     (unsigned long long)i, d, ref[i], bound);
    }
}

/* ---- grid_sample ------------------------------------------------------------------------- */

/* The grid coordinate nearest mode rounds lands within 1e-3 of a tie, where f32 and the double
 * reference may round apart. */
static bool near_tie(double g, int64_t size, bool align)
{
    double p = align ? (g + 1) / 2 * (double)(size - 1) : ((g + 1) * (double)size - 1) / 2;
    double frac = p - floor(p);
    return fabs(frac - 0.5) < 1e-3;
}

static void check_grid_sample(clrun_dtype dtype, const int64_t *xd, int64_t HO, int64_t WO, int mode,
                              int padding, bool align, double reach, uint64_t seed)
{
    uint64_t state = seed, nx = (uint64_t)(xd[0] * xd[1] * xd[2] * xd[3]);
    uint64_t ng = (uint64_t)(xd[0] * HO * WO * 2), ny = (uint64_t)(xd[0] * xd[1] * HO * WO);
    double *x = malloc(nx * sizeof *x), *grid = malloc(ng * sizeof *grid);
    for (uint64_t i = 0; i < nx; i++)
        x[i] = uniform(&state, -1, 1);
    for (uint64_t i = 0; i < ng; i++) {
        int64_t size = i % 2 ? xd[2] : xd[3];
        do
            grid[i] = (float)uniform(&state, -reach, reach);
        while (mode == 1 && near_tie((float)grid[i], size, align));
    }
    void *data[2] = {as_dtype(dtype, x, nx), as_dtype(dtype, grid, ng)};
    clrun_tensor_type t[2] = {{dtype, 4, {xd[0], xd[1], xd[2], xd[3]}}, {dtype, 4, {xd[0], HO, WO, 2}}};
    clrun_attr a[3] = {attr_int("mode", mode), attr_int("padding_mode", padding),
                       attr_int("align_corners", align)};
    clrun_status status;
    char err[512];
    void *got = run_node("grid_sample", 2, t, data, a, 3, &status, err, sizeof err);
    if (got == NULL)
        fail_msg("grid_sample failed: %s", err);
    double *ref = malloc(ny * sizeof *ref), *scale = malloc(ny * sizeof *scale);
    ref_grid_sample(xd, x, HO, WO, grid, mode, padding, align, ref, scale);
    char what[160];
    snprintf(what, sizeof what, "grid_sample %s x [%lld, %lld, %lld, %lld] mode %d padding %d align %d "
             "seed %llu", dtype == CLRUN_F64 ? "f64" : "f32", (long long)xd[0], (long long)xd[1],
             (long long)xd[2], (long long)xd[3], mode, padding, align, (unsigned long long)seed);
    compare(what, dtype, got, ref, scale, ny);
    free(ref);
    free(scale);
    free(got);
    free(data[0]);
    free(data[1]);
    free(x);
    free(grid);
}

static void grid_sample_matches_the_reference_in_every_mode(void **state)
{
    (void)state;
    static const int64_t shapes[][4] = {{1, 1, 4, 4}, {2, 3, 5, 7}, {1, 2, 1, 6}, {1, 1, 1, 1}};
    uint64_t seed = 100;
    for (int dt = 0; dt < 2; dt++) {
        clrun_dtype dtype = dt ? CLRUN_F64 : CLRUN_F32;
        if (dtype == CLRUN_F64 && !has_fp64)
            continue;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int mode = 0; mode < 3; mode++)
                for (int padding = 0; padding < 3; padding++)
                    for (int align = 0; align < 2; align++) {
                        check_grid_sample(dtype, shapes[s], 3, 5, mode, padding, align, 1.2, seed++);
                        /* far outside: reflections many times over, clamps, zeros */
                        check_grid_sample(dtype, shapes[s], 2, 3, mode, padding, align, 9, seed++);
                    }
    }
}

/* ONNX's test_gridsample: the 4 x 4 ramp at a 6 x 6 grid, bilinear, zeros, exact outputs. */
static void grid_sample_gives_the_onnx_example(void **state)
{
    (void)state;
    float x[16], grid[72];
    for (int i = 0; i < 16; i++)
        x[i] = (float)i;
    static const float steps[6] = {-1.0f, -0.6f, -0.2f, 0.2f, 0.6f, 1.0f};
    for (int r = 0; r < 6; r++)
        for (int c = 0; c < 6; c++)
            grid[(r * 6 + c) * 2] = steps[c], grid[(r * 6 + c) * 2 + 1] = steps[r];
    static const float want[36] = {0.0f, 0.15f, 0.55f, 0.95f, 1.35f, 0.75f, 0.6f, 1.5f, 2.3f, 3.1f,
                                   3.9f, 2.1f, 2.2f, 4.7f, 5.5f, 6.3f, 7.1f, 3.7f, 3.8f, 7.9f,
                                   8.7f, 9.5f, 10.3f, 5.3f, 5.4f, 11.1f, 11.9f, 12.7f, 13.5f, 6.9f,
                                   3.0f, 6.15f, 6.55f, 6.95f, 7.35f, 3.75f};
    clrun_tensor_type t[2] = {shape_type(CLRUN_F32, "1,1,4,4"), shape_type(CLRUN_F32, "1,6,6,2")};
    void *data[2] = {x, grid};
    clrun_status status;
    char err[512];
    float *got = run_node("grid_sample", 2, t, data, NULL, 0, &status, err, sizeof err);
    assert_non_null(got);
    for (int i = 0; i < 36; i++)
        if (fabsf(got[i] - want[i]) > 1e-5f)
            fail_msg("element %d is %.9g, ONNX's %.9g", i, got[i], want[i]);
    free(got);
}

/* ---- roi_align --------------------------------------------------------------------------- */

/* Runs roi_align over random x and boxes whose corners are multiples of 1/8 (so the extents,
 * and the adaptive sample counts, are exact in f32 too); reach: how far past the image the
 * boxes may go. */
static void check_roi_align(clrun_dtype dtype, const int64_t *xd, int64_t R, const ref_roi_params *p,
                            double reach, uint64_t seed)
{
    uint64_t state = seed, nx = (uint64_t)(xd[0] * xd[1] * xd[2] * xd[3]);
    uint64_t ny = (uint64_t)(R * xd[1] * p->OH * p->OW);
    double *x = malloc(nx * sizeof *x), *rois = malloc((size_t)R * 4 * sizeof *rois);
    int64_t *batch = malloc((size_t)R * sizeof *batch);
    for (uint64_t i = 0; i < nx; i++)
        x[i] = uniform(&state, -1, 1);
    double image[2] = {(double)xd[3] / p->spatial_scale, (double)xd[2] / p->spatial_scale};
    for (int64_t r = 0; r < R; r++) {
        for (int k = 0; k < 2; k++) {
            double lo = -reach, hi = image[k] + reach;
            double a = floor(uniform(&state, lo, hi) * 8) / 8, b = floor(uniform(&state, lo, hi) * 8) / 8;
            rois[r * 4 + k] = a < b ? a : b;
            rois[r * 4 + k + 2] = a < b ? b : a;
        }
        batch[r] = (int64_t)(rng_next(&state) % (uint64_t)xd[0]);
    }
    void *data[3] = {as_dtype(dtype, x, nx), as_dtype(dtype, rois, (uint64_t)R * 4), batch};
    clrun_tensor_type t[3] = {{dtype, 4, {xd[0], xd[1], xd[2], xd[3]}}, {dtype, 2, {R, 4}},
                              {CLRUN_I64, 1, {R}}};
    clrun_attr a[6] = {attr_int("mode", p->max), attr_int("output_height", p->OH),
                       attr_int("output_width", p->OW), attr_int("sampling_ratio", p->ratio),
                       attr_float("spatial_scale", p->spatial_scale), attr_int("half_pixel", p->half_pixel)};
    clrun_status status;
    char err[512];
    void *got = run_node("roi_align", 3, t, data, a, 6, &status, err, sizeof err);
    if (got == NULL)
        fail_msg("roi_align failed: %s", err);
    double *ref = malloc(ny * sizeof *ref), *scale = malloc(ny * sizeof *scale);
    ref_roi_align(xd, x, R, rois, batch, p, ref, scale);
    char what[200];
    snprintf(what, sizeof what, "roi_align %s x [%lld, %lld, %lld, %lld] R %lld out %lldx%lld ratio %lld "
             "scale %g half_pixel %d max %d seed %llu", dtype == CLRUN_F64 ? "f64" : "f32",
             (long long)xd[0], (long long)xd[1], (long long)xd[2], (long long)xd[3], (long long)R,
             (long long)p->OH, (long long)p->OW, (long long)p->ratio, p->spatial_scale, p->half_pixel,
             p->max, (unsigned long long)seed);
    compare(what, dtype, got, ref, scale, ny);
    free(ref);
    free(scale);
    free(got);
    free(data[0]);
    free(data[1]);
    free(x);
    free(rois);
    free(batch);
}

static void roi_align_matches_the_reference_in_every_mode(void **state)
{
    (void)state;
    static const int64_t shapes[][4] = {{1, 1, 10, 10}, {3, 2, 7, 9}, {2, 3, 1, 5}};
    static const ref_roi_params params[] = {
        {5, 5, 2, 1.0, false, false}, /* ONNX's test_roialign_aligned_false */
        {5, 5, 2, 1.0, true, false},  /* ..._true */
        {3, 4, 0, 0.5, true, false},  /* adaptive, a feature map at half the scale */
        {2, 2, 0, 1.0, false, true},
        {4, 3, 3, 0.25, true, true},
        {1, 1, 0, 1.0, true, false},
        {7, 7, 1, 2.0, false, false},
    };
    uint64_t seed = 500;
    for (int dt = 0; dt < 2; dt++) {
        clrun_dtype dtype = dt ? CLRUN_F64 : CLRUN_F32;
        if (dtype == CLRUN_F64 && !has_fp64)
            continue;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (size_t k = 0; k < sizeof params / sizeof params[0]; k++) {
                check_roi_align(dtype, shapes[s], 6, &params[k], 0, seed++);
                check_roi_align(dtype, shapes[s], 6, &params[k], 6, seed++); /* past the edges */
            }
    }
}

/* A batch index outside [0, N) fails the run, naming the box; a good run afterwards passes. */
static void roi_align_reports_a_batch_index_outside_the_batch(void **state)
{
    (void)state;
    float x[2 * 4 * 4], rois[3 * 4] = {0, 0, 2, 2, 1, 1, 3, 3, 0, 1, 2, 3};
    for (int i = 0; i < 32; i++)
        x[i] = (float)i;
    clrun_tensor_type t[3] = {shape_type(CLRUN_F32, "2,1,4,4"), shape_type(CLRUN_F32, "3,4"),
                              shape_type(CLRUN_I64, "3")};
    static const int64_t bad_values[][3] = {{0, 2, 1}, {0, 1, -1}};
    static const char *const named[] = {"roi 1 ", "roi 2 "};
    for (int k = 0; k < 2; k++) {
        int64_t batch[3];
        memcpy(batch, bad_values[k], sizeof batch);
        void *data[3] = {x, rois, batch};
        clrun_status status;
        char err[512] = "";
        void *got = run_node("roi_align", 3, t, data, NULL, 0, &status, err, sizeof err);
        assert_null(got);
        assert_int_equal(status, CLRUN_ERROR_INVALID_ARGUMENT);
        if (!strstr(err, named[k]) || !strstr(err, "batch index") || !strstr(err, "batch of 2"))
            fail_msg("the message '%s' does not name %s and the batch", err, named[k]);
    }
    int64_t good[3] = {1, 0, 1};
    void *data[3] = {x, rois, good};
    clrun_status status;
    char err[512];
    float *got = run_node("roi_align", 3, t, data, NULL, 0, &status, err, sizeof err);
    if (got == NULL)
        fail_msg("a good run failed: %s", err);
    free(got);
}

/* ---- refusals ---------------------------------------------------------------------------- */

static void expect_refusal(const char *op, int n_in, const clrun_tensor_type *types,
                           const clrun_attr *attrs, int na, const char *word1, const char *word2)
{
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("refuse", &g), CLRUN_OK);
    clrun_tensor_id in[3], y;
    static const char *const names[] = {"a", "b", "c"};
    for (int i = 0; i < n_in; i++)
        assert_int_equal(clrun_graph_add_input(g, names[i], &types[i], false, &in[i]), CLRUN_OK);
    const char *outs[] = {"y"};
    if (clrun_graph_add_node(g, op, in, n_in, outs, 1, attrs, na, &y) == CLRUN_OK)
        fail_msg("%s accepted what it should refuse (expected '%s')", op, word1);
    const char *why = clrun_graph_last_error(g);
    if (!strstr(why, op) || !strstr(why, word1) || (word2 && !strstr(why, word2)))
        fail_msg("%s: the reason '%s' lacks '%s'%s%s", op, why, word1, word2 ? " or " : "",
                 word2 ? word2 : "");
    clrun_graph_destroy(g);
}

static void type_rules_refuse_what_does_not_fit(void **state)
{
    (void)state;
    clrun_tensor_type g[2] = {shape_type(CLRUN_F32, "1,2,4,4"), shape_type(CLRUN_F32, "1,3,3,2")};
    clrun_attr a = attr_int("mode", 3);
    expect_refusal("grid_sample", 2, g, &a, 1, "'mode' is 3", NULL);
    a = attr_int("padding_mode", 3);
    expect_refusal("grid_sample", 2, g, &a, 1, "'padding_mode' is 3", NULL);
    a = attr_int("align_corners", 2);
    expect_refusal("grid_sample", 2, g, &a, 1, "align_corners", NULL);
    a = attr_int("fancy", 1);
    expect_refusal("grid_sample", 2, g, &a, 1, "fancy", NULL);
    g[1] = shape_type(CLRUN_F32, "1,3,3,3");
    expect_refusal("grid_sample", 2, g, NULL, 0, "grid is f32[1, 3, 3, 3]", "[N, H_out, W_out, 2]");
    g[1] = shape_type(CLRUN_F32, "2,3,3,2");
    expect_refusal("grid_sample", 2, g, NULL, 0, "grid is f32[2, 3, 3, 2]", NULL);
    g[1] = shape_type(CLRUN_F64, "1,3,3,2");
    expect_refusal("grid_sample", 2, g, NULL, 0, "grid is f64[1, 3, 3, 2]", "x's dtype");
    g[0] = shape_type(CLRUN_I32, "1,2,4,4");
    expect_refusal("grid_sample", 2, g, NULL, 0, "x is i32[1, 2, 4, 4]", "f32 or f64");
    g[0] = shape_type(CLRUN_F32, "2,4,4");
    g[1] = shape_type(CLRUN_F32, "2,3,3,2");
    expect_refusal("grid_sample", 2, g, NULL, 0, "x is f32[2, 4, 4]", "[N, C, H, W]");

    clrun_tensor_type r[3] = {shape_type(CLRUN_F32, "1,2,4,4"), shape_type(CLRUN_F32, "3,4"),
                              shape_type(CLRUN_I64, "3")};
    a = attr_int("mode", 2);
    expect_refusal("roi_align", 3, r, &a, 1, "'mode' is 2", NULL);
    a = attr_int("output_height", 0);
    expect_refusal("roi_align", 3, r, &a, 1, "output_height", NULL);
    a = attr_int("sampling_ratio", 2000);
    expect_refusal("roi_align", 3, r, &a, 1, "sampling_ratio", NULL);
    a = attr_float("spatial_scale", INFINITY);
    expect_refusal("roi_align", 3, r, &a, 1, "spatial_scale", "finite");
    r[2] = shape_type(CLRUN_I32, "3");
    expect_refusal("roi_align", 3, r, NULL, 0, "batch_indices is i32[3]", "i64[num_rois]");
    r[2] = shape_type(CLRUN_I64, "2");
    expect_refusal("roi_align", 3, r, NULL, 0, "batch_indices is i64[2]", NULL);
    r[2] = shape_type(CLRUN_I64, "3");
    r[1] = shape_type(CLRUN_F32, "3,5");
    expect_refusal("roi_align", 3, r, NULL, 0, "rois is f32[3, 5]", "[num_rois, 4]");
    r[1] = shape_type(CLRUN_F64, "3,4");
    expect_refusal("roi_align", 3, r, NULL, 0, "rois is f64[3, 4]", "x's dtype");
    expect_refusal("roi_align", 2, r, NULL, 0, "takes 3 inputs", NULL);
}

static int setup(void **state)
{
    (void)state;
    if (clrun_context_create(NULL, &ctx) != CLRUN_OK) {
        fprintf(stderr, "no context: %s\n", clrun_last_error(NULL));
        return -1;
    }
    /* f64 runs where the device has doubles: probe with a one-element grid_sample graph. */
    clrun_graph *g = NULL;
    clrun_tensor_type t[2] = {shape_type(CLRUN_F64, "1,1,1,1"), shape_type(CLRUN_F64, "1,1,1,2")};
    clrun_tensor_id in[2], y;
    const char *outs[] = {"y"};
    clrun_exec *exec = NULL;
    if (clrun_graph_create("probe", &g) == CLRUN_OK &&
        clrun_graph_add_input(g, "x", &t[0], false, &in[0]) == CLRUN_OK &&
        clrun_graph_add_input(g, "g", &t[1], false, &in[1]) == CLRUN_OK &&
        clrun_graph_add_node(g, "grid_sample", in, 2, outs, 1, NULL, 0, &y) == CLRUN_OK &&
        clrun_graph_mark_output(g, y) == CLRUN_OK)
        has_fp64 = clrun_exec_create(ctx, g, NULL, &exec) == CLRUN_OK;
    if (!has_fp64)
        fprintf(stderr, "no f64 on this device: the f64 cases are skipped\n");
    clrun_exec_destroy(exec);
    clrun_graph_destroy(g);
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
        cmocka_unit_test(grid_sample_matches_the_reference_in_every_mode),
        cmocka_unit_test(grid_sample_gives_the_onnx_example),
        cmocka_unit_test(roi_align_matches_the_reference_in_every_mode),
        cmocka_unit_test(roi_align_reports_a_batch_index_outside_the_batch),
        cmocka_unit_test(type_rules_refuse_what_does_not_fit),
    };
    CLRUN_TEST_FILTERS_FROM_ENVIRONMENT();
    int failed = cmocka_run_group_tests(tests, setup, teardown);
    clrun_test_remove_dir(cache_dir);
    return failed;
}
