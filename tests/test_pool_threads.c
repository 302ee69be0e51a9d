/* Four host threads share one context's pool (POCL in CI, also under ThreadSanitizer): each
 * allocates blocks of random sizes, has a kernel fill them, frees them in random order and reads
 * every block back before freeing it, so a block handed to two threads at once, or a lost free,
 * shows as wrong contents or wrong statistics. cmocka's asserts are not thread-safe: a worker
 * records its first failure as text and the main thread asserts on it. */
#include <pthread.h>
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
#include "rng.h"

#define THREADS 4
#define OPERATIONS 160   /* per thread */
#define LIVE_MAX 12      /* blocks a thread holds at most */
#define WORDS_MAX 16384  /* 64 KiB blocks at most */

static char cache_root[512];

typedef struct worker {
    clrun_context *ctx;
    unsigned id;
    uint64_t rng;           /* splitmix64 state */
    uint64_t allocs, frees; /* successful */
    char failure[512];      /* first failure, "" when none */
} worker;

typedef struct live_block {
    clrun_buffer buffer;
    cl_uint value; /* what the kernel wrote: value + i at word i */
    cl_uint words;
} live_block;

static bool failed(worker *w, const char *what, int status)
{
    if (w->failure[0] == '\0')
        snprintf(w->failure, sizeof w->failure, "thread %u: %s: %d (%s)", w->id, what, status,
                 clrun_last_error(w->ctx));
    return false;
}

static bool fill(worker *w, cl_kernel k, live_block *b)
{
    cl_int e = clSetKernelArg(k, 0, sizeof b->buffer.mem, &b->buffer.mem);
    if (e == CL_SUCCESS)
        e = clSetKernelArg(k, 1, sizeof b->value, &b->value);
    if (e == CL_SUCCESS)
        e = clSetKernelArg(k, 2, sizeof b->words, &b->words);
    /* One work-group size for every launch: POCL compiles a variant per local size. */
    size_t local = 64, global = (b->words + local - 1) / local * local;
    if (e == CL_SUCCESS)
        e = clEnqueueNDRangeKernel(clrun_context_queue(w->ctx), k, 1, NULL, &global, &local, 0, NULL, NULL);
    return e == CL_SUCCESS || failed(w, "fill kernel", e);
}

static bool verify(worker *w, const live_block *b, cl_uint *host)
{
    cl_int e = clEnqueueReadBuffer(clrun_context_queue(w->ctx), b->buffer.mem, CL_TRUE, 0, (size_t)b->words * 4, host,
                                   0, NULL, NULL);
    if (e != CL_SUCCESS)
        return failed(w, "read back", e);
    for (cl_uint i = 0; i < b->words; i++) {
        if (host[i] != b->value + i) {
            snprintf(w->failure, sizeof w->failure,
                     "thread %u: block of %u words at chunk %u offset %llu: word %u is %#x, expected %#x", w->id,
                     b->words, b->buffer.chunk, (unsigned long long)b->buffer.offset, i, host[i], b->value + i);
            return false;
        }
    }
    return true;
}

static bool release(worker *w, live_block *b, cl_uint *host)
{
    if (!verify(w, b, host))
        return false;
    clrun_status st = clrun_free(w->ctx, &b->buffer);
    if (st != CLRUN_OK)
        return failed(w, "clrun_free", st);
    w->frees++;
    return true;
}

static void *work(void *arg)
{
    worker *w = arg;
    cl_kernel k = NULL;
    cl_uint *host = malloc(WORDS_MAX * sizeof *host);
    live_block live[LIVE_MAX];
    unsigned count = 0;
    clrun_status st = clrun_kernel_create(w->ctx, "clrun_smoke_fill_u32", &k); /* one per thread */
    if (st != CLRUN_OK || host == NULL) {
        failed(w, "kernel or host memory", st);
        goto done;
    }
    for (unsigned op = 0; op < OPERATIONS; op++) {
        uint64_t r = rng_next(&w->rng);
        if (count < LIVE_MAX && (count == 0 || r % 3 != 0)) {
            live_block *b = &live[count];
            b->words = 1 + (cl_uint)((r >> 8) % (r % 4 == 0 ? WORDS_MAX : 600));
            b->value = (w->id << 28) | (op << 12);
            char label[32];
            snprintf(label, sizeof label, "t%u-op%u", w->id, op);
            st = clrun_alloc_ex(w->ctx, (uint64_t)b->words * 4, 0, label, &b->buffer);
            if (st != CLRUN_OK) {
                failed(w, "clrun_alloc", st);
                goto done;
            }
            w->allocs++;
            count++;
            if (!fill(w, k, b))
                goto done;
        } else {
            unsigned victim = (unsigned)((r >> 16) % count);
            if (!release(w, &live[victim], host))
                goto done;
            live[victim] = live[--count];
        }
    }
done:
    while (count > 0 && w->failure[0] == '\0' && release(w, &live[count - 1], host))
        count--;
    if (k)
        clReleaseKernel(k);
    free(host);
    return NULL;
}

static void four_threads_allocate_write_verify_and_free_through_one_context(void **state)
{
    (void)state;
    clrun_test_report_fatal_signals();
    unsetenv("CLRUN_ALLOCATOR");
    for (int s = 0; s < 3; s++) {
        static const char *const strategies[] = {"buddy", "slab", "bump"};
        clrun_context_options o;
        clrun_context_options_init(&o);
        o.allocator = strategies[s];
        o.guard = s == 0 ? 1 : -1; /* guard mode's device reads and fills under the lock too */
        clrun_context *ctx = NULL;
        assert_int_equal(clrun_context_create(&o, &ctx), CLRUN_OK);
        worker w[THREADS];
        pthread_t threads[THREADS];
        for (unsigned i = 0; i < THREADS; i++) {
            memset(&w[i], 0, sizeof w[i]);
            w[i].ctx = ctx;
            w[i].id = i;
            w[i].rng = (uint64_t)(i + 1) * 7919u + (uint64_t)s;
            assert_int_equal(pthread_create(&threads[i], NULL, work, &w[i]), 0);
        }
        uint64_t allocs = 0, frees = 0;
        for (unsigned i = 0; i < THREADS; i++) {
            assert_int_equal(pthread_join(threads[i], NULL), 0);
            if (w[i].failure[0])
                fail_msg("%s: %s", strategies[s], w[i].failure);
            allocs += w[i].allocs;
            frees += w[i].frees;
        }
        clrun_memory_stats st;
        assert_int_equal(clrun_memory_stats_get(ctx, &st), CLRUN_OK);
        assert_true(allocs > THREADS * OPERATIONS / 3);
        assert_int_equal(allocs, frees);
        assert_int_equal(st.alloc_count, allocs);
        assert_int_equal(st.free_count, frees);
        assert_int_equal(st.in_use, 0);
        assert_true(st.in_use_peak > 0);
        assert_int_equal(clrun_pool_check(ctx), CLRUN_OK);
        clrun_context_destroy(ctx);
    }
}

int main(void)
{
    clrun_test_device_environment(cache_root, sizeof cache_root);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(four_threads_allocate_write_verify_and_free_through_one_context),
    };
    int failed_tests = cmocka_run_group_tests(tests, NULL, NULL);
    clrun_test_remove_dir(cache_root);
    return failed_tests;
}
