/* Threads on a real device (POCL in CI, and under ThreadSanitizer): contexts created from many
 * threads at once as the process's first OpenCL work; 2 to 8 threads each driving its own
 * executor on one shared context, on in-order and out-of-order queues, every output equal to a
 * single-threaded run's; and one executor run from several threads at once. */
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <clrun/clrun.h>

#include "device_test.h"
#include "rng.h"

static char cache_root[512];

/* Large enough that POCL runs the nodes of an out-of-order queue concurrently: with 32 x 48 the
 * reuse races of issue 16 stayed hidden. */
#define ROWS 192
#define COLS 256
#define ITERATIONS 12
#define MAX_THREADS 8

/* A small graph with fan-out, reuse and a product: outputs z and y of input x (donated or
 * kept), weights from fixed seeds. Freed pool blocks change hands between nodes and between
 * executors all the time. */
static clrun_graph *make_graph(bool donated)
{
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("threads", &g), CLRUN_OK);
    clrun_tensor_type xt = {CLRUN_F32, 2, {ROWS, COLS}}, wt = {CLRUN_F32, 2, {COLS, COLS}};
    clrun_tensor_id x, w, a, b, c, d, y, z;
    assert_int_equal(clrun_graph_add_input(g, "x", &xt, donated, &x), CLRUN_OK);
    assert_int_equal(clrun_graph_add_constant(g, "w", &wt, NULL, CLRUN_FILL_UNIFORM, -0.5, 0.5, 3, &w),
                     CLRUN_OK);
    const char *na[] = {"a"}, *nb[] = {"b"}, *nc[] = {"c"}, *nd[] = {"d"}, *ny[] = {"y"}, *nz[] = {"z"};
    int32_t xw[2] = {x, w};
    assert_int_equal(clrun_graph_add_node(g, "matmul", xw, 2, na, 1, NULL, 0, &a), CLRUN_OK);
    assert_int_equal(clrun_graph_add_node(g, "tanh", &a, 1, nb, 1, NULL, 0, &b), CLRUN_OK);
    assert_int_equal(clrun_graph_add_node(g, "relu", &a, 1, nc, 1, NULL, 0, &c), CLRUN_OK);
    int32_t bc[2] = {b, c};
    assert_int_equal(clrun_graph_add_node(g, "mul", bc, 2, nd, 1, NULL, 0, &d), CLRUN_OK);
    int32_t dw[2] = {d, w};
    assert_int_equal(clrun_graph_add_node(g, "matmul", dw, 2, ny, 1, NULL, 0, &y), CLRUN_OK);
    assert_int_equal(clrun_graph_add_node(g, "softmax", &y, 1, nz, 1, NULL, 0, &z), CLRUN_OK);
    assert_int_equal(clrun_graph_mark_output(g, z), CLRUN_OK);
    assert_int_equal(clrun_graph_mark_output(g, y), CLRUN_OK);
    return g;
}

static void input_values(uint64_t seed, float *host)
{
    uint64_t state = seed;
    for (int i = 0; i < ROWS * COLS; i++)
        host[i] = (float)((int)(rng_next(&state) % 2001) - 1000) / 1000.0f;
}

typedef struct outputs {
    float z[ROWS * COLS], y[ROWS * COLS];
} outputs;

/* One run of exec on the input of `seed` (a new buffer each time: a donated one is consumed). */
static int run_once(clrun_context *ctx, clrun_exec *exec, uint64_t seed, outputs *out)
{
    float host[ROWS * COLS];
    input_values(seed, host);
    clrun_buffer x;
    if (clrun_alloc(ctx, sizeof host, &x) != CLRUN_OK || clrun_buffer_write(ctx, &x, host) != CLRUN_OK)
        return 1;
    int rc = clrun_exec_run(exec, &x, 1) != CLRUN_OK ||
             clrun_exec_read_output(exec, 0, out->z, sizeof out->z) != CLRUN_OK ||
             clrun_exec_read_output(exec, 1, out->y, sizeof out->y) != CLRUN_OK;
    clrun_free(ctx, &x); /* kept input: ours to free; donated: refused, nothing changes */
    return rc;
}

static outputs expected[ITERATIONS * MAX_THREADS];

/* The reference: every seed once, one thread, its own in-order context. */
static void compute_expected(bool donated)
{
    clrun_context_options o;
    clrun_context_options_init(&o);
    o.out_of_order = -1;
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(&o, &ctx), CLRUN_OK);
    clrun_graph *g = make_graph(donated);
    clrun_exec *exec = NULL;
    assert_int_equal(clrun_exec_create(ctx, g, NULL, &exec), CLRUN_OK);
    for (int i = 0; i < ITERATIONS * MAX_THREADS; i++)
        assert_int_equal(run_once(ctx, exec, 1000 + (uint64_t)i, &expected[i]), 0);
    clrun_exec_destroy(exec);
    clrun_graph_destroy(g);
    clrun_context_destroy(ctx);
}

typedef struct worker {
    clrun_context *ctx;
    const clrun_graph *graph;
    clrun_exec *exec;      /* NULL: make its own */
    int index, threads;
    int wrong, failed;
} worker;

static void *drive(void *arg)
{
    worker *w = arg;
    clrun_exec *exec = w->exec;
    if (exec == NULL && clrun_exec_create(w->ctx, w->graph, NULL, &exec) != CLRUN_OK) {
        w->failed++;
        return NULL;
    }
    for (int it = 0; it < ITERATIONS; it++) {
        int seed = it * w->threads + w->index;
        outputs got;
        if (run_once(w->ctx, exec, 1000 + (uint64_t)seed, &got)) {
            w->failed++;
            continue;
        }
        /* A shared executor's outputs may be the next run's by the time they are read: only
         * an executor of our own gives outputs that must be ours. */
        if (w->exec == NULL && memcmp(&got, &expected[seed], sizeof got) != 0)
            w->wrong++;
    }
    if (w->exec == NULL)
        clrun_exec_destroy(exec);
    return NULL;
}

static void run_threads(bool out_of_order, bool donated, int threads)
{
    clrun_context_options o;
    clrun_context_options_init(&o);
    o.out_of_order = out_of_order ? 1 : -1;
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(&o, &ctx), CLRUN_OK);
    clrun_graph *g = make_graph(donated);
    assert_int_equal(clrun_graph_validate(g), CLRUN_OK); /* once, before threads read it */
    pthread_t ids[MAX_THREADS];
    worker workers[MAX_THREADS];
    for (int t = 0; t < threads; t++) {
        workers[t] = (worker){ctx, g, NULL, t, threads, 0, 0};
        assert_int_equal(pthread_create(&ids[t], NULL, drive, &workers[t]), 0);
    }
    int wrong = 0, failed = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(ids[t], NULL);
        wrong += workers[t].wrong;
        failed += workers[t].failed;
    }
    if (wrong || failed)
        fail_msg("%d threads, %s queue, %s input: %d wrong outputs, %d failed runs (%s)", threads,
                 out_of_order ? "out-of-order" : "in-order", donated ? "donated" : "kept", wrong,
                 failed, clrun_last_error(ctx));
    clrun_memory_stats s;
    assert_int_equal(clrun_memory_stats_get(ctx, &s), CLRUN_OK);
    assert_int_equal(s.in_use, 0); /* every executor gave everything back */
    clrun_graph_destroy(g);
    clrun_context_destroy(ctx);
}

static void executors_on_one_context_in_order(void **state)
{
    (void)state;
    clrun_test_report_fatal_signals();
    for (int donated = 0; donated < 2; donated++) {
        compute_expected(donated);
        for (int threads = 2; threads <= MAX_THREADS; threads *= 2)
            run_threads(false, donated, threads);
    }
}

static void executors_on_one_context_out_of_order(void **state)
{
    (void)state;
    clrun_test_report_fatal_signals();
    for (int donated = 0; donated < 2; donated++) {
        compute_expected(donated);
        for (int threads = 2; threads <= MAX_THREADS; threads *= 2)
            run_threads(true, donated, threads);
    }
}

/* One executor driven by several threads: its calls are serialised, every run succeeds. */
static void one_executor_from_several_threads(void **state)
{
    (void)state;
    clrun_test_report_fatal_signals();
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    clrun_graph *g = make_graph(false);
    clrun_exec *exec = NULL;
    assert_int_equal(clrun_exec_create(ctx, g, NULL, &exec), CLRUN_OK);
    pthread_t ids[4];
    worker workers[4];
    for (int t = 0; t < 4; t++) {
        workers[t] = (worker){ctx, g, exec, t, 4, 0, 0};
        assert_int_equal(pthread_create(&ids[t], NULL, drive, &workers[t]), 0);
    }
    int failed = 0;
    for (int t = 0; t < 4; t++) {
        pthread_join(ids[t], NULL);
        failed += workers[t].failed;
    }
    assert_int_equal(failed, 0);
    clrun_exec_destroy(exec);
    clrun_graph_destroy(g);
    clrun_context_destroy(ctx);
}

/* Contexts from many threads at once, as the first OpenCL work of the process (POCL handed out
 * NULL devices to concurrent first calls). Runs before any other test. */
static void *make_context(void *arg)
{
    clrun_context *ctx = NULL;
    *(clrun_status *)arg = clrun_context_create(NULL, &ctx);
    clrun_context_destroy(ctx);
    return NULL;
}

static void contexts_from_many_threads_at_once(void **state)
{
    (void)state;
    clrun_test_report_fatal_signals();
    pthread_t ids[MAX_THREADS];
    clrun_status status[MAX_THREADS];
    for (int t = 0; t < MAX_THREADS; t++)
        assert_int_equal(pthread_create(&ids[t], NULL, make_context, &status[t]), 0);
    for (int t = 0; t < MAX_THREADS; t++) {
        pthread_join(ids[t], NULL);
        assert_int_equal(status[t], CLRUN_OK);
    }
}

int main(void)
{
    clrun_test_device_environment(cache_root, sizeof cache_root);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(contexts_from_many_threads_at_once),
        cmocka_unit_test(executors_on_one_context_in_order),
        cmocka_unit_test(executors_on_one_context_out_of_order),
        cmocka_unit_test(one_executor_from_several_threads),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    clrun_test_remove_dir(cache_root);
    return failed;
}
