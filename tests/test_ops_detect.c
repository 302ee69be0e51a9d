/* non_max_suppression and maxpool2d_indices on a real device, built with the graph API and run
 * by an executor, against plain C references written here the way onnxruntime computes them:
 * NMS by sorting each class's candidates (descending score, equal scores by index) and keeping
 * greedily, in f32; the pool by scanning each window for the first strictly greater tap. Every
 * box convention, score thresholds, counts that limit and that do not, equal scores, identical
 * and degenerate boxes; pools with pads, strides, dilations, ceil_mode, both storage orders,
 * ties and NaN; a second run giving the same bits; and the type rules' refusals. */
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
#include "rng.h"

static char cache_dir[512];
static clrun_context *ctx;

static float uniform(uint64_t *state, float lo, float hi)
{
    return lo + (hi - lo) * (float)((double)(rng_next(state) >> 11) / 9007199254740992.0);
}

/* A node of `op` over inputs of these types and host values, run twice by an executor (the
 * same bits both times); its output (malloc'd) and the output's type into *type. */
static void *run_node(const char *op, int n_in, const clrun_tensor_type *types, void *const *data,
                      const clrun_attr *attrs, int na, clrun_tensor_type *type)
{
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create(op, &g), CLRUN_OK);
    clrun_tensor_id in[2], out;
    static const char *const names[] = {"a", "b"};
    for (int i = 0; i < n_in; i++)
        assert_int_equal(clrun_graph_add_input(g, names[i], &types[i], false, &in[i]), CLRUN_OK);
    const char *outs[] = {"y"};
    if (clrun_graph_add_node(g, op, in, n_in, outs, 1, attrs, na, &out) != CLRUN_OK)
        fail_msg("%s refused: %s", op, clrun_graph_last_error(g));
    assert_int_equal(clrun_graph_mark_output(g, out), CLRUN_OK);
    *type = *clrun_graph_tensor_type(g, out);
    uint64_t bytes = clrun_tensor_bytes(type);
    clrun_exec *exec = NULL;
    if (clrun_exec_create(ctx, g, NULL, &exec) != CLRUN_OK)
        fail_msg("executor: %s", clrun_last_error(ctx));
    clrun_buffer buf[2];
    for (int i = 0; i < n_in; i++) {
        assert_int_equal(clrun_alloc(ctx, clrun_tensor_bytes(&types[i]), &buf[i]), CLRUN_OK);
        assert_int_equal(clrun_buffer_write(ctx, &buf[i], data[i]), CLRUN_OK);
    }
    char *result = malloc(bytes), *again = malloc(bytes);
    for (int run = 0; run < 2; run++) {
        if (clrun_exec_run(exec, buf, n_in) != CLRUN_OK)
            fail_msg("%s: run failed: %s", op, clrun_last_error(ctx));
        assert_int_equal(clrun_exec_read_output(exec, 0, run ? again : result, bytes), CLRUN_OK);
    }
    if (memcmp(result, again, bytes) != 0)
        fail_msg("%s: the second run gives other bits", op);
    free(again);
    for (int i = 0; i < n_in; i++)
        clrun_free(ctx, &buf[i]);
    clrun_exec_destroy(exec);
    clrun_graph_destroy(g);
    return result;
}

/* ---- non_max_suppression ----------------------------------------------------------------- */

/* [y0, x0, y1, x1] of a box in either convention. */
static void box_extent(const float *b, bool center, float e[4])
{
    if (center) {
        float hw = b[2] / 2.0f, hh = b[3] / 2.0f;
        e[0] = b[1] - hh, e[1] = b[0] - hw, e[2] = b[1] + hh, e[3] = b[0] + hw;
    } else {
        e[0] = fminf(b[0], b[2]), e[1] = fminf(b[1], b[3]), e[2] = fmaxf(b[0], b[2]), e[3] = fmaxf(b[1], b[3]);
    }
}

static bool ref_suppresses(const float *a, const float *b, bool center, float threshold)
{
    float ea[4], eb[4];
    box_extent(a, center, ea);
    box_extent(b, center, eb);
    volatile float w = fminf(ea[3], eb[3]) - fmaxf(ea[1], eb[1]);
    volatile float h = fminf(ea[2], eb[2]) - fmaxf(ea[0], eb[0]);
    if (w <= 0 || h <= 0)
        return false;
    volatile float inter = w * h;
    volatile float area_a = (ea[3] - ea[1]) * (ea[2] - ea[0]), area_b = (eb[3] - eb[1]) * (eb[2] - eb[0]);
    volatile float sum = area_a + area_b;
    volatile float uni = sum - inter;
    if (inter <= 0 || area_a <= 0 || area_b <= 0 || uni <= 0)
        return false;
    volatile float iou = inter / uni;
    return iou > threshold;
}

static const float *sort_scores;

static int by_score(const void *pa, const void *pb)
{
    int a = *(const int *)pa, b = *(const int *)pb;
    if (sort_scores[a] != sort_scores[b])
        return sort_scores[a] > sort_scores[b] ? -1 : 1;
    return a < b ? -1 : a > b;
}

typedef struct nms_case {
    int B, C, N, max_output;
    float iou;
    bool has_score;
    float score;
    bool center;
} nms_case;

/* The kept triples into rows (capacity B C min(max, N) rows of 3); returns their number. */
static int ref_nms(const nms_case *c, const float *boxes, const float *scores, int64_t *rows)
{
    int count = 0, *order = malloc((size_t)c->N * sizeof *order), *kept = malloc((size_t)c->N * sizeof *kept);
    for (int b = 0; b < c->B; b++)
        for (int k = 0; k < c->C; k++) {
            const float *s = scores + ((size_t)b * c->C + k) * c->N;
            const float *bx = boxes + (size_t)b * c->N * 4;
            int candidates = 0, n_kept = 0;
            for (int i = 0; i < c->N; i++)
                if (!isnan(s[i]) && (!c->has_score || s[i] > c->score))
                    order[candidates++] = i;
            sort_scores = s;
            qsort(order, (size_t)candidates, sizeof *order, by_score);
            for (int j = 0; j < candidates && n_kept < c->max_output; j++) {
                bool keep = true;
                for (int q = 0; q < n_kept && keep; q++)
                    keep = !ref_suppresses(bx + 4 * kept[q], bx + 4 * order[j], c->center, c->iou);
                if (keep) {
                    kept[n_kept++] = order[j];
                    rows[3 * count] = b, rows[3 * count + 1] = k, rows[3 * count + 2] = order[j];
                    count++;
                }
            }
        }
    free(order);
    free(kept);
    return count;
}

static void check_nms(const nms_case *c, float *boxes, float *scores)
{
    char dims[64];
    snprintf(dims, sizeof dims, "%d,%d,4", c->B, c->N);
    clrun_tensor_type types[2] = {shape_type(CLRUN_F32, dims), {0}};
    snprintf(dims, sizeof dims, "%d,%d,%d", c->B, c->C, c->N);
    types[1] = shape_type(CLRUN_F32, dims);
    clrun_attr at[4] = {attr_int("max_output", c->max_output), attr_float("iou_threshold", c->iou),
                        attr_int("center_point_box", c->center), attr_float("score_threshold", c->score)};
    void *data[2] = {boxes, scores};
    clrun_tensor_type type;
    int64_t *got = run_node("non_max_suppression", 2, types, data, at, c->has_score ? 4 : 3, &type);
    int per_class = c->max_output < c->N ? c->max_output : c->N;
    int64_t capacity = (int64_t)c->B * c->C * per_class;
    assert_int_equal(type.dtype, CLRUN_I64);
    assert_int_equal(type.rank, 2);
    assert_int_equal(type.shape[0], capacity);
    assert_int_equal(type.shape[1], 3);
    int64_t *want = malloc((size_t)capacity * 3 * sizeof *want);
    int count = ref_nms(c, boxes, scores, want);
    for (int64_t i = (int64_t)count * 3; i < capacity * 3; i++)
        want[i] = -1;
    for (int64_t i = 0; i < capacity * 3; i++)
        if (got[i] != want[i])
            fail_msg("B %d C %d N %d max %d iou %g score %s%g center %d: row %lld column %lld is %lld, "
                     "expected %lld (%d kept)", c->B, c->C, c->N, c->max_output, (double)c->iou,
                     c->has_score ? "" : "none ", (double)c->score, c->center, (long long)(i / 3),
                     (long long)(i % 3), (long long)got[i], (long long)want[i], count);
    free(got);
    free(want);
}

static void random_case(const nms_case *c, uint64_t seed)
{
    uint64_t state = seed;
    float *boxes = malloc((size_t)c->B * c->N * 4 * sizeof *boxes);
    float *scores = malloc((size_t)c->B * c->C * c->N * sizeof *scores);
    for (int i = 0; i < c->B * c->N; i++) {
        float x = uniform(&state, 0, 20), y = uniform(&state, 0, 20);
        float w = uniform(&state, 1, 6), h = uniform(&state, 1, 6);
        float *b = boxes + 4 * i;
        if (c->center)
            b[0] = x, b[1] = y, b[2] = w, b[3] = h;
        else if (i % 3 == 0) /* corners the other way round */
            b[0] = y + h, b[1] = x + w, b[2] = y, b[3] = x;
        else
            b[0] = y, b[1] = x, b[2] = y + h, b[3] = x + w;
    }
    for (int i = 0; i < c->B * c->C * c->N; i++)
        scores[i] = i % 7 == 0 ? 0.5f : uniform(&state, 0, 1); /* some equal scores */
    check_nms(c, boxes, scores);
    free(boxes);
    free(scores);
}

static void nms_matches_the_reference(void **state)
{
    (void)state;
    const nms_case cases[] = {
        {1, 1, 10, 10, 0.5f, false, 0, false},
        {2, 3, 40, 5, 0.3f, false, 0, false},
        {2, 3, 40, 40, 0.4f, true, 0.3f, false},
        {3, 2, 25, 1, 0.5f, false, 0, true},
        {1, 4, 60, 100, 0.2f, true, 0.6f, true},
        {2, 1, 33, 7, 0.0f, false, 0, false},
        {1, 2, 50, 50, 1.0f, false, 0, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        random_case(&cases[i], 1000 + i);
}

/* Boxes that share everything, boxes of no area, NaN scores: identical boxes suppress all but
 * the first (lowest index of equal scores); a box of no area suppresses nothing and is never
 * suppressed; NaN is never kept. */
static void nms_handles_identical_degenerate_and_nan(void **state)
{
    (void)state;
    float boxes[6 * 4] = {0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 2, 2, 2, 5, 0, 0, 1, 1, 3, 3, 4, 4};
    float scores[6] = {0.9f, 0.9f, 0.9f, 0.95f, NAN, 0.1f};
    nms_case c = {1, 1, 6, 6, 0.5f, false, 0, false};
    check_nms(&c, boxes, scores);
    int64_t rows[18];
    assert_int_equal(ref_nms(&c, boxes, scores, rows), 3); /* the reference agrees with ORT */
    assert_int_equal(rows[2], 3);
    assert_int_equal(rows[5], 0);
    assert_int_equal(rows[8], 5);
}

/* ---- maxpool2d_indices ------------------------------------------------------------------- */

typedef struct pool_case {
    int64_t N, C, H, W, kernel[2], stride[2], pads[4], dilation[2];
    int ceil_mode, storage_order;
} pool_case;

static int64_t extent(int64_t in, int64_t pb, int64_t pe, int64_t k, int64_t d, int64_t s, int ceil_mode)
{
    int64_t room = in + pb + pe - d * (k - 1) - 1;
    int64_t n = (ceil_mode ? (room + s - 1) / s : room / s) + 1;
    if (ceil_mode && (n - 1) * s >= in + pb)
        n--;
    return n;
}

static void check_pool(const pool_case *c, uint64_t seed)
{
    uint64_t state = seed, count = (uint64_t)(c->N * c->C * c->H * c->W);
    float *x = malloc(count * sizeof *x);
    for (uint64_t i = 0; i < count; i++)
        x[i] = i % 11 == 3 ? NAN : (float)(int)uniform(&state, -4, 4); /* ties and NaN */
    char dims[64];
    snprintf(dims, sizeof dims, "%lld,%lld,%lld,%lld", (long long)c->N, (long long)c->C, (long long)c->H,
             (long long)c->W);
    clrun_tensor_type t = shape_type(CLRUN_F32, dims), type;
    clrun_attr at[6] = {attr_ints("kernel", 2, c->kernel), attr_ints("stride", 2, c->stride),
                        attr_ints("pads", 4, c->pads), attr_ints("dilation", 2, c->dilation),
                        attr_int("ceil_mode", c->ceil_mode), attr_int("storage_order", c->storage_order)};
    void *data[1] = {x};
    int64_t *got = run_node("maxpool2d_indices", 1, &t, data, at, 6, &type);
    int64_t OH = extent(c->H, c->pads[0], c->pads[2], c->kernel[0], c->dilation[0], c->stride[0], c->ceil_mode);
    int64_t OW = extent(c->W, c->pads[1], c->pads[3], c->kernel[1], c->dilation[1], c->stride[1], c->ceil_mode);
    assert_int_equal(type.dtype, CLRUN_I64);
    assert_int_equal(type.shape[2], OH);
    assert_int_equal(type.shape[3], OW);
    for (int64_t p = 0; p < c->N * c->C; p++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                const float *plane = x + p * c->H * c->W;
                int64_t bh = -1, bw = -1;
                float best = -INFINITY;
                for (int64_t kh = 0; kh < c->kernel[0]; kh++)
                    for (int64_t kw = 0; kw < c->kernel[1]; kw++) {
                        int64_t h = oh * c->stride[0] - c->pads[0] + kh * c->dilation[0];
                        int64_t w = ow * c->stride[1] - c->pads[1] + kw * c->dilation[1];
                        if (h < 0 || h >= c->H || w < 0 || w >= c->W)
                            continue;
                        float v = plane[h * c->W + w];
                        if (bh < 0 || v > best) {
                            bh = h, bw = w;
                            best = isnan(v) ? -INFINITY : v;
                        }
                    }
                int64_t want = p * c->H * c->W + (c->storage_order ? bw * c->H + bh : bh * c->W + bw);
                int64_t at_out = (p * OH + oh) * OW + ow;
                if (got[at_out] != want)
                    fail_msg("plane %lld window (%lld, %lld): index %lld, expected %lld", (long long)p,
                             (long long)oh, (long long)ow, (long long)got[at_out], (long long)want);
            }
    free(got);
    free(x);
}

static void maxpool2d_indices_match_the_reference(void **state)
{
    (void)state;
    const pool_case cases[] = {
        {2, 3, 8, 7, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 0, 0},
        {1, 2, 9, 6, {3, 3}, {1, 2}, {1, 1, 1, 1}, {1, 1}, 0, 1},
        {1, 1, 10, 11, {3, 2}, {2, 3}, {1, 0, 0, 1}, {2, 2}, 1, 0},
        {2, 2, 5, 5, {2, 3}, {2, 2}, {1, 1, 0, 1}, {1, 1}, 1, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_pool(&cases[i], 2000 + i);
}

/* ---- type rules -------------------------------------------------------------------------- */

static void expect_refusal(const char *op, int n_in, const clrun_tensor_type *types,
                           const clrun_attr *attrs, int na, const char *word)
{
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("refuse", &g), CLRUN_OK);
    clrun_tensor_id in[2], y;
    static const char *const names[] = {"a", "b"};
    for (int i = 0; i < n_in; i++)
        assert_int_equal(clrun_graph_add_input(g, names[i], &types[i], false, &in[i]), CLRUN_OK);
    const char *outs[] = {"y"};
    if (clrun_graph_add_node(g, op, in, n_in, outs, 1, attrs, na, &y) == CLRUN_OK)
        fail_msg("%s accepted what it should refuse (expected '%s')", op, word);
    const char *why = clrun_graph_last_error(g);
    if (!strstr(why, op) || !strstr(why, word))
        fail_msg("%s: the reason '%s' lacks '%s'", op, why, word);
    clrun_graph_destroy(g);
}

static void type_rules_refuse_what_does_not_fit(void **state)
{
    (void)state;
    clrun_tensor_type t[2] = {shape_type(CLRUN_F32, "1,6,4"), shape_type(CLRUN_F32, "1,2,5")};
    clrun_attr a[2] = {attr_int("max_output", 3), attr_int("center_point_box", 2)};
    expect_refusal("non_max_suppression", 2, t, a, 1, "boxes are f32[1, 6, 4] and scores f32[1, 2, 5]");
    t[1] = shape_type(CLRUN_F32, "1,2,6");
    expect_refusal("non_max_suppression", 2, t, a, 2, "'center_point_box' is 2");
    a[0] = attr_int("max_output", 0);
    expect_refusal("non_max_suppression", 2, t, a, 1, "'max_output' is 0");
    expect_refusal("non_max_suppression", 2, t, NULL, 0, "max_output");
    t[0] = shape_type(CLRUN_I32, "1,6,4");
    a[0] = attr_int("max_output", 3);
    expect_refusal("non_max_suppression", 2, t, a, 1, "expected f32");
    clrun_tensor_type x = shape_type(CLRUN_F32, "1,1,4,4");
    int64_t k[2] = {2, 2};
    clrun_attr p[2] = {attr_ints("kernel", 2, k), attr_int("storage_order", 2)};
    expect_refusal("maxpool2d_indices", 1, &x, p, 2, "'storage_order' is 2");
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
        cmocka_unit_test(nms_matches_the_reference),
        cmocka_unit_test(nms_handles_identical_degenerate_and_nan),
        cmocka_unit_test(maxpool2d_indices_match_the_reference),
        cmocka_unit_test(type_rules_refuse_what_does_not_fit),
    };
    CLRUN_TEST_FILTERS_FROM_ENVIRONMENT();
    int failed = cmocka_run_group_tests(tests, setup, teardown);
    clrun_test_remove_dir(cache_dir);
    return failed;
}
