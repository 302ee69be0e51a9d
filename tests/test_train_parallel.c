/* Data-parallel training over several devices of one process (<clrun/train_parallel.h>) on two
 * POCL devices: the parameters after 108 steps (SGD with momentum) are one trainer's at the same
 * global batch within 1e-6 of each tensor's largest value, whether the batch divides by the devices or not (3 shares of 32 rows:
 * 11, 11, 10, device 0 listed twice); the same bits on every device, and the same with buckets
 * as with one reduction after the backward passes; a device that fails (a label out
 * of range) stops the others with an error naming it, no hang, and the parameters stay as they
 * were; bad arguments are refused. */
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
#include "train/train_parallel_internal.h"

enum { W = 48, C = 4, LAYERS = 3, BATCH = 32, MAX_TENSORS = 16 };

/* Steps before the comparison: the criterion holds after 100 (108); 12 when
 * CLRUN_TEST_ROUNDS is set below 3 (quick runs) and under ThreadSanitizer (CI runs this test
 * under it for races, not values, at many times the cost). */
#if defined(__SANITIZE_THREAD__)
#define CLRUN_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CLRUN_TEST_TSAN 1
#endif
#endif
#ifdef CLRUN_TEST_TSAN
static int steps = 12;
#else
static int steps = 108;
#endif

/* The parameter tensors' elements, in the order params_of concatenates them. */
static size_t tensor_elements[MAX_TENSORS];
static int32_t tensors;

/* x [rows, W] -> LAYERS x tanh(x W + b) -> logits [rows, C]. */
static clrun_graph *model(int64_t rows)
{
    return tanh_mlp("dp", LAYERS, rows, W, C, "logits");
}

static void options(clrun_train_options *o)
{
    clrun_train_options_init(o);
    o->graph.loss = CLRUN_LOSS_XENT;
    o->graph.loss_tensor = "logits";
    clrun_optimizer_init(&o->graph.optimizer, CLRUN_OPTIMIZER_SGD);
    o->graph.optimizer.lr = 0.05; /* with momentum 0.9: steps of 0.5 x the gradient */
    o->graph.optimizer.momentum = 0.9;
    o->bucket_bytes = 4096; /* several buckets: each W x W weight is 9 KiB */
}

/* Step s's global batch: x [BATCH, W] and labels [BATCH] (the labels' dtype: label_size bytes). */
static void batch_of(int s, float *x, void *labels, size_t label_size)
{
    uint64_t z = 0x9E3779B97F4A7C15ull * (uint64_t)(s + 1);
    for (int i = 0; i < BATCH * W; i++) {
        z = z * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(z >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
    }
    for (int r = 0; r < BATCH; r++) {
        int64_t v = (r * 7 + s) % C;
        if (label_size == 8)
            ((int64_t *)labels)[r] = v;
        else
            ((int32_t *)labels)[r] = (int32_t)v;
    }
}

static size_t label_size(clrun_train *t)
{
    clrun_tensor_type lt;
    assert_int_equal(clrun_train_feed_info(t, 1, NULL, &lt), CLRUN_OK);
    return clrun_dtype_size(lt.dtype);
}

/* Every parameter of t, concatenated; *count floats. */
static float *params_of(clrun_train *t, size_t *count)
{
    size_t n = 0;
    for (int32_t i = 0; i < clrun_train_param_count(t); i++) {
        clrun_tensor_type ty;
        assert_int_equal(clrun_train_param_info(t, i, NULL, &ty), CLRUN_OK);
        n += clrun_tensor_elements(&ty);
    }
    float *v = malloc(sizeof *v * n), *at = v;
    assert_non_null(v);
    tensors = clrun_train_param_count(t);
    assert_true(tensors <= MAX_TENSORS);
    for (int32_t i = 0; i < clrun_train_param_count(t); i++) {
        clrun_tensor_type ty;
        clrun_train_param_info(t, i, NULL, &ty);
        tensor_elements[i] = (size_t)clrun_tensor_elements(&ty);
        assert_int_equal(clrun_train_read_param(t, i, at, clrun_tensor_bytes(&ty)), CLRUN_OK);
        at += clrun_tensor_elements(&ty);
    }
    *count = n;
    return v;
}

/* One trainer at the global batch, `steps` steps. */
static float *one_device(size_t *count)
{
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    clrun_graph *g = model(BATCH);
    clrun_train_options o;
    options(&o);
    clrun_train *t = NULL;
    assert_int_equal(clrun_train_create(ctx, g, &o, &t), CLRUN_OK);
    size_t ls = label_size(t);
    float x[BATCH * W];
    int64_t labels[BATCH];
    for (int s = 0; s < steps; s++) {
        batch_of(s, x, labels, ls);
        const void *feeds[] = {x, labels};
        assert_int_equal(clrun_train_step(t, feeds, 2, NULL), CLRUN_OK);
    }
    float *v = params_of(t, count);
    clrun_train_destroy(t);
    clrun_graph_destroy(g);
    clrun_context_destroy(ctx);
    return v;
}

typedef struct parallel_run {
    clrun_train_parallel *p;
    clrun_graph *graphs[4];
    int32_t n;
    size_t label_size;
} parallel_run;

static void parallel_open(parallel_run *r, const unsigned *devices, int32_t n, bool after)
{
    memset(r, 0, sizeof *r);
    r->n = n;
    for (int32_t k = 0; k < n; k++) {
        int64_t rows;
        assert_int_equal(clrun_train_parallel_share(BATCH, n, k, NULL, &rows), CLRUN_OK);
        r->graphs[k] = model(rows);
    }
    clrun_train_parallel_options o;
    clrun_train_parallel_options_init(&o);
    options(&o.train);
    o.after_backward = after;
    clrun_status s = clrun_train_parallel_create((const clrun_graph *const *)r->graphs, devices, n,
                                                 &o, &r->p);
    if (s != CLRUN_OK)
        fprintf(stderr, "%s\n", clrun_last_error(NULL));
    assert_int_equal(s, CLRUN_OK);
    assert_int_equal(clrun_train_parallel_count(r->p), n);
    r->label_size = label_size(clrun_train_parallel_trainer(r->p, 0));
}

static void parallel_close(parallel_run *r)
{
    clrun_train_parallel_destroy(r->p);
    for (int32_t k = 0; k < r->n; k++)
        clrun_graph_destroy(r->graphs[k]);
}

/* Step s on every device, each its share of the global batch; bad_device's labels (when >= 0)
 * out of range. */
static clrun_status parallel_step(parallel_run *r, int s, int32_t bad_device)
{
    float x[BATCH * W];
    int64_t labels[BATCH];
    batch_of(s, x, labels, r->label_size);
    const void *feeds[4][2];
    const void *const *per[4];
    for (int32_t k = 0; k < r->n; k++) {
        int64_t first, rows;
        assert_int_equal(clrun_train_parallel_share(BATCH, r->n, k, &first, &rows), CLRUN_OK);
        assert_int_equal(clrun_train_parallel_rows(r->p, k), rows);
        feeds[k][0] = x + first * W;
        feeds[k][1] = (const char *)labels + (size_t)first * r->label_size;
        per[k] = feeds[k];
    }
    int64_t bad[BATCH];
    if (bad_device >= 0) {
        memcpy(bad, labels, sizeof bad);
        int64_t first;
        assert_int_equal(clrun_train_parallel_share(BATCH, r->n, bad_device, &first, NULL),
                         CLRUN_OK);
        if (r->label_size == 8)
            bad[first] = C + 3;
        else
            ((int32_t *)bad)[first] = C + 3;
        feeds[bad_device][1] = (const char *)bad + (size_t)first * r->label_size;
    }
    clrun_train_step_result res[4];
    clrun_status st = clrun_train_parallel_step(r->p, per, 2, res);
    if (st == CLRUN_OK)
        for (int32_t k = 0; k < r->n; k++)
            assert_int_equal(res[k].step, res[0].step);
    return st;
}

/* Device 0's parameters after `steps` steps; every device's the same bits. */
static float *parallel_params(const unsigned *devices, int32_t n, bool after, size_t *count)
{
    parallel_run r;
    parallel_open(&r, devices, n, after);
    for (int s = 0; s < steps; s++)
        assert_int_equal(parallel_step(&r, s, -1), CLRUN_OK);
    float *v = params_of(clrun_train_parallel_trainer(r.p, 0), count);
    for (int32_t k = 1; k < n; k++) {
        size_t ck;
        float *vk = params_of(clrun_train_parallel_trainer(r.p, k), &ck);
        assert_int_equal(ck, *count);
        assert_memory_equal(vk, v, sizeof *v * ck);
        free(vk);
    }
    clrun_train_parallel_stats st;
    assert_int_equal(clrun_train_parallel_stats_get(r.p, &st), CLRUN_OK);
    assert_int_equal(st.steps, (uint64_t)steps);
    if (!after)
        assert_true(st.buckets >= 2);
    else
        assert_int_equal(st.buckets, 0);
    parallel_close(&r);
    return v;
}

/* a within 1e-6 of b, tensor by tensor, relative to the tensor's largest value in b (as
 * tests/train_digits.py's same_params measures). */
static void assert_close(const float *a, const float *b, size_t n, const char *what)
{
    double worst_rel = 0;
    size_t at = 0;
    for (int32_t t = 0; t < tensors; t++) {
        double largest = 0, worst = 0;
        for (size_t i = at; i < at + tensor_elements[t]; i++) {
            largest = fabs(b[i]) > largest ? fabs(b[i]) : largest;
            worst = fabs((double)a[i] - b[i]) > worst ? fabs((double)a[i] - b[i]) : worst;
        }
        double rel = largest > 0 ? worst / largest : worst;
        worst_rel = rel > worst_rel ? rel : worst_rel;
        at += tensor_elements[t];
    }
    assert_int_equal(at, n);
    printf("%s, %d steps: largest difference %.3g of a tensor's largest value\n", what, steps,
           worst_rel);
    assert_true(worst_rel <= 1e-6);
}

static void devices_train_as_one(void **state)
{
    (void)state;
    clrun_test_report_fatal_signals();
    size_t n1, n2, n3, n3b;
    float *one = one_device(&n1);
    float *two = parallel_params((const unsigned[]){0, 1}, 2, false, &n2);
    assert_int_equal(n2, n1);
    assert_close(two, one, n1, "2 devices (16 + 16 rows) against one");
    float *three = parallel_params((const unsigned[]){0, 1, 0}, 3, false, &n3);
    assert_close(three, one, n1, "3 shares (11 + 11 + 10 rows) against one");
    float *after = parallel_params((const unsigned[]){0, 1}, 2, true, &n3b);
    assert_memory_equal(after, two, sizeof *two * n2); /* buckets or not: the same sums */
    free(one);
    free(two);
    free(three);
    free(after);
}

static void a_failing_device_stops_the_others(void **state)
{
    (void)state;
    clrun_test_report_fatal_signals();
    for (int after = 0; after < 2; after++) {
        parallel_run r;
        parallel_open(&r, (const unsigned[]){0, 1}, 2, after);
        assert_int_equal(parallel_step(&r, 0, -1), CLRUN_OK);
        size_t n, m;
        float *before = params_of(clrun_train_parallel_trainer(r.p, 1), &n);
        assert_int_not_equal(parallel_step(&r, 1, 1), CLRUN_OK);
        const char *e = clrun_last_error(NULL);
        assert_non_null(strstr(e, "device 1 (share 1)"));
        assert_non_null(strstr(e, "label"));
        for (int32_t k = 0; k < 2; k++) { /* nothing changed on either */
            float *now = params_of(clrun_train_parallel_trainer(r.p, k), &m);
            assert_memory_equal(now, before, sizeof *now * n);
            free(now);
        }
        assert_int_equal(parallel_step(&r, 1, -1), CLRUN_OK); /* and it goes on */
        free(before);
        parallel_close(&r);
    }
}

/* Every device's parameters equal to want (n floats). */
static void assert_params_are(parallel_run *r, const float *want, size_t n)
{
    for (int32_t k = 0; k < r->n; k++) {
        size_t m;
        float *now = params_of(clrun_train_parallel_trainer(r->p, k), &m);
        assert_int_equal(m, n);
        assert_memory_equal(now, want, sizeof *now * n);
        free(now);
    }
}

/* A device failing midway through the reduction, after handing in some buckets: the others give
 * up the buckets it never hands in, the ones it did are still summed (by whichever device comes
 * last, into the failed device's buffer too) and drained before its step returns, the step
 * fails naming it, nothing changed anywhere, and the next step goes on. */
static void a_device_failing_mid_reduction_stops_cleanly(void **state)
{
    (void)state;
    clrun_test_report_fatal_signals();
    for (int after = 0; after < 2; after++) {
        parallel_run r;
        parallel_open(&r, (const unsigned[]){0, 1}, 2, after);
        assert_int_equal(parallel_step(&r, 0, -1), CLRUN_OK);
        clrun_train_parallel_stats st;
        assert_int_equal(clrun_train_parallel_stats_get(r.p, &st), CLRUN_OK);
        /* (share, bucket): share 1 after its first bucket, share 0 at its last */
        int32_t cases[2][2] = {{1, after ? 0 : 1}, {0, after ? 0 : st.buckets - 1}};
        if (!after)
            assert_true(st.buckets >= 2);
        for (int c = 0; c < 2; c++) {
            size_t n;
            float *before = params_of(clrun_train_parallel_trainer(r.p, 0), &n);
            clrun__train_parallel_fail_at(r.p, cases[c][0], cases[c][1]);
            assert_int_equal(parallel_step(&r, 1 + c, -1), CLRUN_ERROR_OPENCL);
            const char *e = clrun_last_error(NULL);
            char who[32];
            snprintf(who, sizeof who, "device %d (share %d)", (int)cases[c][0], (int)cases[c][0]);
            assert_non_null(strstr(e, who));
            assert_non_null(strstr(e, "injected failure"));
            assert_params_are(&r, before, n);
            clrun__train_parallel_fail_at(r.p, -1, -1);
            assert_int_equal(parallel_step(&r, 1 + c, -1), CLRUN_OK); /* and it goes on */
            float *next = params_of(clrun_train_parallel_trainer(r.p, 0), &n);
            assert_memory_not_equal(next, before, sizeof *next * n);
            assert_params_are(&r, next, n);
            free(next);
            free(before);
        }
        assert_int_equal(clrun_train_parallel_stats_get(r.p, &st), CLRUN_OK);
        assert_int_equal(st.steps, 3); /* the failed steps are not counted */
        parallel_close(&r);
    }
}

static void bad_arguments_are_refused(void **state)
{
    (void)state;
    clrun_test_report_fatal_signals();
    clrun_train_parallel *p = (clrun_train_parallel *)1;
    clrun_graph *g = model(8);
    const clrun_graph *models[] = {g, g};
    assert_int_equal(clrun_train_parallel_create(models, (const unsigned[]){0}, 0, NULL, &p),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_null(p);
    clrun_train_parallel_options o;
    clrun_train_parallel_options_init(&o);
    options(&o.train);
    o.train.split_update = true;
    assert_int_equal(clrun_train_parallel_create(models, (const unsigned[]){0, 1}, 2, &o, &p),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clrun_last_error(NULL), "split_update"));
    options(&o.train);
    assert_int_equal(clrun_train_parallel_create(models, (const unsigned[]){0, 99}, 2, &o, &p),
                     CLRUN_ERROR_NO_DEVICE);
    assert_non_null(strstr(clrun_last_error(NULL), "device 99"));
    assert_null(p);
    int64_t first, rows;
    assert_int_equal(clrun_train_parallel_share(32, 3, 2, &first, &rows), CLRUN_OK);
    assert_int_equal(first, 22);
    assert_int_equal(rows, 10);
    /* a share without a row, no shares, a share out of range: refused, the outputs untouched */
    assert_int_equal(clrun_train_parallel_share(2, 3, 0, &first, &rows),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clrun_last_error(NULL), "less than a row"));
    assert_int_equal(clrun_train_parallel_share(32, 0, 0, &first, &rows),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(clrun_train_parallel_share(32, 3, 3, &first, &rows),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clrun_last_error(NULL), "out of range"));
    assert_int_equal(clrun_train_parallel_share(32, 3, -1, &first, &rows),
                     CLRUN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(first, 22);
    assert_int_equal(rows, 10);
    clrun_graph_destroy(g);
}

int main(void)
{
    char cache[256];
    clrun_test_device_environment(cache, sizeof cache);
    const char *rounds = getenv("CLRUN_TEST_ROUNDS");
    if (rounds && *rounds && atoi(rounds) < 3)
        steps = 12;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(devices_train_as_one),
        cmocka_unit_test(a_device_failing_mid_reduction_stops_cleanly),
        cmocka_unit_test(a_failing_device_stops_the_others),
        cmocka_unit_test(bad_arguments_are_refused),
    };
    CLRUN_TEST_FILTERS_FROM_ENVIRONMENT();
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    clrun_test_remove_dir(cache);
    return failed;
}
