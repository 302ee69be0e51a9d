/* What the device pool holds beside the strategy's chunks, and how it orders reuse, on a real
 * device (POCL in CI): resident regions for weights (packed exactly, under the limit, nothing
 * left after a failure), raw buffers under the limit (naive-mode tensors, planned arenas),
 * stream-ordered frees on out-of-order queues (every later owner of the bytes waits, a caller's
 * block is handed out only once its old commands are done), and the out-of-memory message that
 * names the largest live blocks and their owners. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>
#include <cmocka.h>

#include <clrun/clrun.h>

#include "device/cl.h"
#include "device_test.h"
#include "memory/pool.h"

#define KiB (UINT64_C(1) << 10)
#define MiB (UINT64_C(1) << 20)

static char cache_root[512];

static clrun_context *open_context(const char *allocator, int out_of_order, uint64_t pool_limit)
{
    static const char *const names[] = {"CLRUN_PLATFORM", "CLRUN_DEVICE", "CLRUN_ALLOCATOR", "CLRUN_DEBUG",
                                        "CLRUN_POOL_LIMIT", "CLRUN_PREALLOCATE", "CLRUN_MEM_FRACTION", "CLRUN_QUEUE"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        unsetenv(names[i]);
    clrun_context_options o;
    clrun_context_options_init(&o);
    o.allocator = allocator;
    o.out_of_order = out_of_order;
    o.pool_limit = pool_limit;
    clrun_context *ctx = NULL;
    if (clrun_context_create(&o, &ctx) != CLRUN_OK)
        fail_msg("context: %s", clrun_last_error(NULL));
    return ctx;
}

static clrun_memory_stats stats_of(clrun_context *ctx)
{
    clrun_memory_stats s;
    assert_int_equal(clrun_memory_stats_get(ctx, &s), CLRUN_OK);
    return s;
}

static uint64_t device_alignment(clrun_context *ctx)
{
    const clrun_device_info *info = clrun_context_device(ctx);
    assert_non_null(info);
    return info->base_addr_align;
}

/* ---- resident regions ---- */

static void resident_blocks_are_packed_exactly_and_hold_what_is_written(void **state)
{
    (void)state;
    clrun_test_report_fatal_signals();
    const char *strategies[] = {"buddy", "slab", "tlsf"};
    for (size_t s = 0; s < 3; s++) {
        clrun_context *ctx = open_context(strategies[s], 0, 0);
        uint64_t align = device_alignment(ctx);
        const uint64_t sizes[] = {1000, 3000, 70000, 8};
        const char *labels[] = {"w0", "w1", "w2", "w3"};
        clrun_buffer b[4];
        assert_int_equal(clrun__pool_alloc_resident(ctx, sizes, labels, 4, b), CLRUN_OK);
        uint64_t expect = 0, in_use = 0;
        for (int i = 0; i < 4; i++) {
            expect = (expect + align - 1) / align * align;
            assert_int_equal(b[i].offset, expect); /* one after another, aligned */
            assert_int_equal(b[i].size, sizes[i]);
            expect += sizes[i];
            in_use += sizes[i];
        }
        clrun_memory_stats st = stats_of(ctx);
        assert_int_equal(st.resident, expect); /* the region is exactly what the blocks take */
        assert_int_equal(st.reserved, expect);
        assert_int_equal(st.in_use, in_use);
        assert_int_equal(st.chunks, 0);        /* no strategy chunk */
        for (int i = 0; i < 4; i++) {
            unsigned char *host = malloc(sizes[i]), *back = malloc(sizes[i]);
            assert_non_null(host);
            assert_non_null(back);
            for (uint64_t k = 0; k < sizes[i]; k++)
                host[k] = (unsigned char)(k * 7 + (uint64_t)i);
            assert_int_equal(clrun__buffer_write_owned(ctx, &b[i], host), CLRUN_OK);
            assert_int_equal(clEnqueueReadBuffer(clrun_context_queue(ctx), b[i].mem, CL_TRUE, 0, sizes[i], back, 0,
                                                 NULL, NULL), CL_SUCCESS);
            assert_memory_equal(host, back, sizes[i]);
            free(host);
            free(back);
        }
        /* The caller may not free them; the executor may, and the region goes with the last. */
        assert_int_equal(clrun_free(ctx, &b[0]), CLRUN_ERROR_INVALID_FREE);
        for (int i = 0; i < 4; i++)
            assert_int_equal(clrun__pool_free_owned(ctx, &b[i]), CLRUN_OK);
        st = stats_of(ctx);
        assert_int_equal(st.resident, 0);
        assert_int_equal(st.reserved, 0);
        assert_int_equal(st.in_use, 0);
        assert_int_equal(st.driver_allocs, st.driver_frees);
        clrun_context_destroy(ctx);
    }
}

static void resident_blocks_count_against_the_limit_and_a_refusal_leaves_nothing(void **state)
{
    (void)state;
    clrun_test_report_fatal_signals();
    clrun_context *ctx = open_context("tlsf", 0, MiB);
    const uint64_t sizes[] = {600 * KiB, 600 * KiB};
    const char *labels[] = {"layer.weight", "layer.bias"};
    clrun_buffer b[2];
    assert_int_equal(clrun__pool_alloc_resident(ctx, sizes, labels, 2, b), CLRUN_ERROR_OUT_OF_MEMORY);
    const char *err = clrun_last_error(ctx);
    assert_non_null(strstr(err, "resident region"));
    assert_non_null(strstr(err, "layer.weight"));
    assert_non_null(strstr(err, "limit 1.00 MiB"));
    assert_null(b[0].mem);
    clrun_memory_stats st = stats_of(ctx);
    assert_int_equal(st.reserved + st.in_use + st.resident, 0);
    /* Within the limit it works, beside the strategy's chunks. */
    assert_int_equal(clrun__pool_alloc_resident(ctx, sizes, labels, 1, b), CLRUN_OK);
    clrun_buffer x;
    assert_int_equal(clrun_alloc(ctx, 300 * KiB, &x), CLRUN_OK);
    clrun_buffer y;
    assert_int_equal(clrun_alloc(ctx, 300 * KiB, &y), CLRUN_ERROR_OUT_OF_MEMORY); /* 600 + 304 + 304 */
    assert_int_equal(clrun_free(ctx, &x), CLRUN_OK);
    assert_int_equal(clrun__pool_free_owned(ctx, &b[0]), CLRUN_OK);
    clrun_context_destroy(ctx);
}

static void every_failing_opencl_call_of_a_resident_batch_leaves_nothing(void **state)
{
    (void)state;
    clrun_test_report_fatal_signals();
    clrun_context *ctx = open_context("tlsf", 0, 0);
    const uint64_t sizes[] = {4000, 5000, 6000};
    clrun_buffer b[3];
    for (long nth = 1;; nth++) {
        clrun__cl_fault_arm(nth, CL_OUT_OF_RESOURCES, false);
        clrun_status status = clrun__pool_alloc_resident(ctx, sizes, NULL, 3, b);
        bool fired = clrun__cl_fault_fired();
        clrun__cl_fault_arm(0, CL_SUCCESS, false);
        if (!fired) {
            assert_int_equal(status, CLRUN_OK);
            for (int i = 0; i < 3; i++)
                assert_int_equal(clrun__pool_free_owned(ctx, &b[i]), CLRUN_OK);
            break;
        }
        assert_int_not_equal(status, CLRUN_OK);
        for (int i = 0; i < 3; i++)
            assert_null(b[i].mem);
        clrun_memory_stats st = stats_of(ctx);
        assert_int_equal(st.reserved + st.in_use + st.resident, 0);
        assert_true(nth < 20);
    }
    clrun_context_destroy(ctx);
}

/* ---- raw buffers ---- */

static void raw_buffers_count_against_the_limit(void **state)
{
    (void)state;
    clrun_test_report_fatal_signals();
    clrun_context *ctx = open_context("tlsf", 0, MiB);
    cl_mem a = NULL, b = NULL;
    assert_int_equal(clrun__pool_create_raw(ctx, 600 * KiB, "naive t1", &a), CLRUN_OK);
    assert_non_null(a);
    clrun_memory_stats st = stats_of(ctx);
    assert_int_equal(st.raw, 600 * KiB);
    assert_int_equal(st.reserved, 600 * KiB);
    assert_int_equal(st.in_use, 600 * KiB);
    assert_int_equal(clrun__pool_create_raw(ctx, 600 * KiB, "naive t2", &b), CLRUN_ERROR_OUT_OF_MEMORY);
    assert_null(b);
    assert_non_null(strstr(clrun_last_error(ctx), "naive t2"));
    assert_non_null(strstr(clrun_last_error(ctx), "limit 1.00 MiB"));
    clrun__pool_release_raw(ctx, a, 600 * KiB);
    st = stats_of(ctx);
    assert_int_equal(st.raw + st.reserved + st.in_use, 0);
    clrun_context_destroy(ctx);
}

/* The out-of-memory message counts the bytes outside the strategy's chunks apart: never
 * "reserved 600.00 KiB in 0 chunks". */
static void out_of_memory_says_what_is_reserved_outside_the_chunks(void **state)
{
    (void)state;
    clrun_test_report_fatal_signals();
    clrun_context *ctx = open_context("tlsf", 0, MiB);
    cl_mem a = NULL;
    assert_int_equal(clrun__pool_create_raw(ctx, 600 * KiB, "arena", &a), CLRUN_OK);
    clrun_buffer x;
    assert_int_equal(clrun_alloc(ctx, 600 * KiB, &x), CLRUN_ERROR_OUT_OF_MEMORY);
    const char *err = clrun_last_error(ctx);
    assert_null(strstr(err, "reserved 600.00 KiB in"));
    if (strstr(err, "reserved 600.00 KiB (0 B in 0 chunks of the strategy, 600.00 KiB outside them") == NULL)
        fail_msg("message: %s", err);
    clrun__pool_release_raw(ctx, a, 600 * KiB);
    clrun_context_destroy(ctx);
}

static void a_raw_buffer_under_the_limit_takes_the_room_of_empty_chunks(void **state)
{
    (void)state;
    clrun_test_report_fatal_signals();
    clrun_context *ctx = open_context("slab", 0, MiB);
    clrun_buffer x;
    assert_int_equal(clrun_alloc(ctx, 700 * KiB, &x), CLRUN_OK);
    assert_int_equal(clrun_free(ctx, &x), CLRUN_OK); /* its chunk is empty, still reserved */
    assert_true(stats_of(ctx).reserved >= 700 * KiB);
    cl_mem a = NULL;
    assert_int_equal(clrun__pool_create_raw(ctx, 600 * KiB, "arena", &a), CLRUN_OK);
    assert_int_equal(stats_of(ctx).chunks, 0);
    clrun__pool_release_raw(ctx, a, 600 * KiB);
    clrun_context_destroy(ctx);
}

/* ---- stream-ordered frees (out-of-order queues) ---- */

static cl_int event_status(cl_event e)
{
    cl_int status = CL_QUEUED;
    assert_int_equal(clGetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL), CL_SUCCESS);
    return status;
}

static void a_later_owner_of_bytes_freed_with_pending_users_waits_for_them(void **state)
{
    (void)state;
    clrun_test_report_fatal_signals();
    clrun_context *ctx = open_context("tlsf", 1, 0);
    if (!clrun_context_out_of_order(ctx)) {
        clrun_context_destroy(ctx);
        skip();
    }
    cl_int error;
    cl_event reader = clCreateUserEvent(clrun_context_cl(ctx), &error); /* a command still running */
    assert_int_equal(error, CL_SUCCESS);
    clrun_buffer a, keep, b, elsewhere;
    assert_int_equal(clrun__pool_alloc_owned(ctx, 64 * KiB, 0, "a", &a), CLRUN_OK);
    assert_int_equal(clrun__pool_alloc_owned(ctx, 64 * KiB, 0, "keep", &keep), CLRUN_OK);
    uint32_t chunk = a.chunk;
    uint64_t offset = a.offset;
    assert_int_equal(clrun__pool_free_owned_after(ctx, &a, 1, &reader), CLRUN_OK);
    assert_int_equal(clrun__pool_alloc_owned(ctx, 64 * KiB, 0, "b", &b), CLRUN_OK);
    assert_int_equal(b.chunk, chunk);
    assert_int_equal(b.offset, offset); /* the same bytes */
    cl_event wait = NULL;
    assert_int_equal(clrun__pool_take_wait(ctx, &b, &wait), CLRUN_OK);
    assert_non_null(wait);
    assert_int_not_equal(event_status(wait), CL_COMPLETE);
    cl_event again = NULL;
    assert_int_equal(clrun__pool_take_wait(ctx, &b, &again), CLRUN_OK);
    assert_null(again); /* taken once */
    /* Bytes nobody used are not ordered. */
    assert_int_equal(clrun__pool_alloc_owned(ctx, 64 * KiB, 0, "elsewhere", &elsewhere), CLRUN_OK);
    assert_int_equal(clrun__pool_take_wait(ctx, &elsewhere, &again), CLRUN_OK);
    assert_null(again);
    assert_int_equal(clSetUserEventStatus(reader, CL_COMPLETE), CL_SUCCESS);
    assert_int_equal(clWaitForEvents(1, &wait), CL_SUCCESS);
    clReleaseEvent(wait);
    clReleaseEvent(reader);
    assert_int_equal(clrun__pool_free_owned(ctx, &b), CLRUN_OK);
    assert_int_equal(clrun__pool_free_owned(ctx, &keep), CLRUN_OK);
    assert_int_equal(clrun__pool_free_owned(ctx, &elsewhere), CLRUN_OK);
    clrun_context_destroy(ctx);
}

typedef struct later {
    cl_event event;
    volatile int done;
} later;

static void *complete_later(void *arg)
{
    later *l = arg;
    struct timespec pause = {0, 30 * 1000 * 1000};
    nanosleep(&pause, NULL);
    l->done = 1;
    clSetUserEventStatus(l->event, CL_COMPLETE);
    return NULL;
}

static void a_callers_block_is_handed_out_once_its_earlier_users_are_done(void **state)
{
    (void)state;
    clrun_test_report_fatal_signals();
    clrun_context *ctx = open_context("buddy", 1, 0);
    if (!clrun_context_out_of_order(ctx)) {
        clrun_context_destroy(ctx);
        skip();
    }
    cl_int error;
    later l = {clCreateUserEvent(clrun_context_cl(ctx), &error), 0};
    assert_int_equal(error, CL_SUCCESS);
    clrun_buffer a, b;
    assert_int_equal(clrun__pool_alloc_owned(ctx, 100 * KiB, 0, "a", &a), CLRUN_OK);
    uint64_t offset = a.offset;
    assert_int_equal(clrun__pool_free_owned_after(ctx, &a, 1, &l.event), CLRUN_OK);
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, complete_later, &l), 0);
    assert_int_equal(clrun_alloc(ctx, 100 * KiB, &b), CLRUN_OK);
    assert_int_equal(b.offset, offset);
    assert_int_equal(l.done, 1); /* clrun_alloc returned only after the old user finished */
    assert_int_equal(event_status(l.event), CL_COMPLETE);
    pthread_join(thread, NULL);
    clReleaseEvent(l.event);
    assert_int_equal(clrun_free(ctx, &b), CLRUN_OK);
    clrun_context_destroy(ctx);
}

static void on_an_in_order_queue_a_free_after_events_orders_nothing(void **state)
{
    (void)state;
    clrun_test_report_fatal_signals();
    clrun_context *ctx = open_context("tlsf", -1, 0);
    cl_int error;
    cl_event reader = clCreateUserEvent(clrun_context_cl(ctx), &error);
    assert_int_equal(error, CL_SUCCESS);
    clrun_buffer a, b;
    assert_int_equal(clrun__pool_alloc_owned(ctx, 4096, 0, "a", &a), CLRUN_OK);
    assert_int_equal(clrun__pool_free_owned_after(ctx, &a, 1, &reader), CLRUN_OK);
    assert_int_equal(clrun__pool_alloc_owned(ctx, 4096, 0, "b", &b), CLRUN_OK);
    cl_event wait = NULL;
    assert_int_equal(clrun__pool_take_wait(ctx, &b, &wait), CLRUN_OK);
    assert_null(wait); /* the queue orders it */
    clSetUserEventStatus(reader, CL_COMPLETE);
    clReleaseEvent(reader);
    assert_int_equal(clrun__pool_free_owned(ctx, &b), CLRUN_OK);
    clrun_context_destroy(ctx);
}

/* ---- who holds the memory ---- */

static void out_of_memory_names_the_largest_live_blocks_and_their_owners(void **state)
{
    (void)state;
    clrun_test_report_fatal_signals();
    clrun_context *ctx = open_context("tlsf", 0, MiB);
    clrun_buffer big, small, w;
    const uint64_t wsize = 200 * KiB;
    const char *wlabel = "encoder.weight";
    assert_int_equal(clrun__pool_alloc_resident(ctx, &wsize, &wlabel, 1, &w), CLRUN_OK);
    assert_int_equal(clrun_alloc_ex(ctx, 500 * KiB, 0, "activation", &big), CLRUN_OK);
    assert_int_equal(clrun__pool_alloc_owned(ctx, 10 * KiB, 0, "scratch", &small), CLRUN_OK);
    clrun_buffer x;
    assert_int_equal(clrun_alloc_ex(ctx, 400 * KiB, 0, "logits", &x), CLRUN_ERROR_OUT_OF_MEMORY);
    const char *err = clrun_last_error(ctx);
    const char *a = strstr(err, "'activation' 500.00 KiB (caller)");
    const char *e = strstr(err, "'encoder.weight' 200.00 KiB (executor, resident)");
    const char *s = strstr(err, "'scratch'");
    assert_non_null(strstr(err, "largest live blocks"));
    assert_true(a && e && s && a < e && e < s); /* largest first */
    assert_non_null(strstr(err, "free but too fragmented to serve it"));
    assert_non_null(strstr(err, "logits"));
    assert_int_equal(clrun_free(ctx, &big), CLRUN_OK);
    assert_int_equal(clrun__pool_free_owned(ctx, &small), CLRUN_OK);
    assert_int_equal(clrun__pool_free_owned(ctx, &w), CLRUN_OK);
    clrun_context_destroy(ctx);
}

int main(void)
{
    clrun_test_device_environment(cache_root, sizeof cache_root);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(resident_blocks_are_packed_exactly_and_hold_what_is_written),
        cmocka_unit_test(resident_blocks_count_against_the_limit_and_a_refusal_leaves_nothing),
        cmocka_unit_test(every_failing_opencl_call_of_a_resident_batch_leaves_nothing),
        cmocka_unit_test(raw_buffers_count_against_the_limit),
        cmocka_unit_test(out_of_memory_says_what_is_reserved_outside_the_chunks),
        cmocka_unit_test(a_raw_buffer_under_the_limit_takes_the_room_of_empty_chunks),
        cmocka_unit_test(a_later_owner_of_bytes_freed_with_pending_users_waits_for_them),
        cmocka_unit_test(a_callers_block_is_handed_out_once_its_earlier_users_are_done),
        cmocka_unit_test(on_an_in_order_queue_a_free_after_events_orders_nothing),
        cmocka_unit_test(out_of_memory_names_the_largest_live_blocks_and_their_owners),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    clrun_test_remove_dir(cache_root);
    return failed;
}
