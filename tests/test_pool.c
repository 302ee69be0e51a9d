/* The device memory pool (lib/memory/pool.c) on a real device (POCL in CI): blocks of every strategy
 * written by a kernel and read back, edge cases of sizes, frees and alignment, every failing
 * OpenCL call of a pool workload (as SQLite's OOM tests), guard mode, out-of-memory messages,
 * chunk growth, trim, preallocation and statistics. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include <clrun/clrun.h>

#include "device/cl.h"
#include "device_test.h"
#include "memory/pool.h"

#define KiB (UINT64_C(1) << 10)
#define MiB (UINT64_C(1) << 20)

static char cache_root[512];
static const char *const strategies[] = {"buddy", "slab", "bump", "tlsf"};

static void clear_environment(void)
{
    static const char *const names[] = {"CLRUN_PLATFORM", "CLRUN_DEVICE", "CLRUN_ALLOCATOR", "CLRUN_DEBUG",
                                        "CLRUN_POOL_LIMIT", "CLRUN_PREALLOCATE", "CLRUN_MEM_FRACTION"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        unsetenv(names[i]);
}

/* A context with `allocator` (NULL: the default), guard mode on or off, and a pool limit. */
static clrun_context *open_context(const char *allocator, bool guard, uint64_t pool_limit)
{
    clear_environment();
    clrun_context_options o;
    clrun_context_options_init(&o);
    o.allocator = allocator;
    o.guard = guard ? 1 : -1;
    o.pool_limit = pool_limit;
    clrun_context *ctx = NULL;
    clrun_status status = clrun_context_create(&o, &ctx);
    if (status != CLRUN_OK)
        fail_msg("context: %s", clrun_last_error(NULL));
    return ctx;
}

/* clrun_smoke_fill_u32(out, value, n): out[i] = value + i for i < n, on the context's queue. */
static void fill(clrun_context *ctx, cl_kernel k, cl_mem out, cl_uint value, cl_uint n)
{
    /* One work-group size for every launch (POCL compiles a variant per local size); the kernel
     * ignores work-items past n. */
    size_t local = 64, global = (n + local - 1) / local * local;
    assert_int_equal(clSetKernelArg(k, 0, sizeof out, &out), CL_SUCCESS);
    assert_int_equal(clSetKernelArg(k, 1, sizeof value, &value), CL_SUCCESS);
    assert_int_equal(clSetKernelArg(k, 2, sizeof n, &n), CL_SUCCESS);
    assert_int_equal(clEnqueueNDRangeKernel(clrun_context_queue(ctx), k, 1, NULL, &global, &local, 0, NULL, NULL),
                     CL_SUCCESS);
}

static cl_uint *read_back(clrun_context *ctx, cl_mem mem, size_t bytes)
{
    cl_uint *host = malloc(bytes);
    assert_non_null(host);
    assert_int_equal(clEnqueueReadBuffer(clrun_context_queue(ctx), mem, CL_TRUE, 0, bytes, host, 0, NULL, NULL),
                     CL_SUCCESS);
    return host;
}

static clrun_memory_stats stats_of(clrun_context *ctx)
{
    clrun_memory_stats s;
    assert_int_equal(clrun_memory_stats_get(ctx, &s), CLRUN_OK);
    return s;
}

/* ---- blocks hold what kernels write ---- */

static void blocks_of_every_strategy_hold_what_a_kernel_wrote_and_neighbours_are_untouched(void **state)
{
    (void)state;
    enum { BLOCKS = 48 };
    for (size_t s = 0; s < sizeof strategies / sizeof strategies[0]; s++) {
        clrun_context *ctx = open_context(strategies[s], false, 0);
        cl_kernel k = NULL;
        assert_int_equal(clrun_kernel_create(ctx, "clrun_smoke_fill_u32", &k), CLRUN_OK);
        clrun_buffer b[BLOCKS];
        cl_uint n[BLOCKS];
        for (unsigned i = 0; i < BLOCKS; i++) {
            /* 4 B to ~1.2 MiB, most not a multiple of the alignment; neighbours share chunks */
            n[i] = 1 + (i * 7919u) % (i % 5 == 4 ? 300000u : 5000u);
            assert_int_equal(clrun_alloc(ctx, (uint64_t)n[i] * 4, &b[i]), CLRUN_OK);
            assert_int_equal(b[i].size, (uint64_t)n[i] * 4);
        }
        for (unsigned i = 0; i < BLOCKS; i += 2) /* free every other block and reuse the room */
            assert_int_equal(clrun_free(ctx, &b[i]), CLRUN_OK);
        for (unsigned i = 0; i < BLOCKS; i += 2)
            assert_int_equal(clrun_alloc(ctx, (uint64_t)n[i] * 4, &b[i]), CLRUN_OK);
        for (unsigned i = 0; i < BLOCKS; i++)
            fill(ctx, k, b[i].mem, (i + 1) * 0x01000000u, n[i]);
        for (unsigned i = 0; i < BLOCKS; i++) {
            cl_uint *host = read_back(ctx, b[i].mem, (size_t)n[i] * 4);
            for (cl_uint j = 0; j < n[i]; j++)
                if (host[j] != (i + 1) * 0x01000000u + j)
                    fail_msg("%s: block %u word %u is %#x", strategies[s], i, j, host[j]);
            free(host);
        }
        for (unsigned i = 0; i < BLOCKS; i++)
            assert_int_equal(clrun_free(ctx, &b[i]), CLRUN_OK);
        assert_int_equal(stats_of(ctx).in_use, 0);
        clReleaseKernel(k);
        clrun_context_destroy(ctx);
    }
}

/* ---- sizes ---- */

/* Host blocks (a trainer's offloaded state): the caller's, in host memory the device maps,
 * outside the pool's limit and its reserved bytes; written and read back like any block, handed
 * to a donation's views through their region, freed by clrun_free. */
static void host_blocks_are_the_callers_outside_the_limit(void **state)
{
    (void)state;
    clrun_context *ctx = open_context("tlsf", false, 64 << 10);
    const uint64_t sizes[2] = {48 << 10, 40 << 10};
    const char *const labels[2] = {"m", "v"};
    clrun_buffer blocks[2];
    assert_int_equal(clrun__pool_alloc_host(ctx, sizes, labels, 2, blocks), CLRUN_OK);
    clrun_memory_stats m;
    assert_int_equal(clrun_memory_stats_get(ctx, &m), CLRUN_OK);
    assert_true(m.host >= sizes[0] + sizes[1]);
    assert_int_equal(m.reserved, 0);
    assert_int_equal(m.in_use, 0);
    assert_non_null(clrun__pool_chunk_mem(ctx, blocks[1].chunk));
    float *out = malloc(sizes[1]), *back = malloc(sizes[1]);
    assert_non_null(out);
    assert_non_null(back);
    for (size_t i = 0; i < sizes[1] / sizeof *out; i++)
        out[i] = (float)i * 0.5f;
    assert_int_equal(clrun_buffer_write(ctx, &blocks[1], out), CLRUN_OK);
    assert_int_equal(clrun_buffer_read(ctx, &blocks[1], back), CLRUN_OK);
    assert_memory_equal(out, back, sizes[1]);
    /* the device's blocks are still held to the limit beside them */
    clrun_buffer b;
    assert_int_equal(clrun_alloc(ctx, 32 << 10, &b), CLRUN_OK);
    assert_int_equal(clrun_free(ctx, &b), CLRUN_OK);
    for (int k = 0; k < 2; k++)
        assert_int_equal(clrun_free(ctx, &blocks[k]), CLRUN_OK);
    assert_int_equal(clrun_memory_stats_get(ctx, &m), CLRUN_OK);
    assert_int_equal(m.host, 0);
    free(out);
    free(back);
    clrun_context_destroy(ctx);
}

static void size_zero_is_an_invalid_size(void **state)
{
    (void)state;
    clrun_context *ctx = open_context(NULL, false, 0);
    clrun_buffer b;
    memset(&b, 0x5A, sizeof b);
    assert_int_equal(clrun_alloc_ex(ctx, 0, 0, "empty", &b), CLRUN_ERROR_INVALID_SIZE);
    assert_null(b.mem); /* zeroed on failure */
    assert_non_null(strstr(clrun_last_error(ctx), "size 0"));
    assert_non_null(strstr(clrun_last_error(ctx), "empty"));
    clrun_context_destroy(ctx);
}

static void a_size_above_the_device_maximum_is_an_invalid_size(void **state)
{
    (void)state;
    for (int guard = 0; guard < 2; guard++) {
        clrun_context *ctx = open_context(NULL, guard, 0);
        clrun_buffer b;
        uint64_t max = clrun_context_device(ctx)->max_alloc;
        assert_int_equal(clrun_alloc(ctx, max + 1, &b), CLRUN_ERROR_INVALID_SIZE);
        assert_non_null(strstr(clrun_last_error(ctx), "maximum allocation"));
        assert_int_equal(stats_of(ctx).reserved, 0); /* nothing was reserved for it */
        clrun_context_destroy(ctx);
    }
}

static void size_max_is_an_invalid_size(void **state)
{
    (void)state;
    for (int guard = 0; guard < 2; guard++) { /* guard mode adds red zones: must not wrap */
        clrun_context *ctx = open_context(NULL, guard, 0);
        clrun_buffer b;
        assert_int_equal(clrun_alloc(ctx, SIZE_MAX, &b), CLRUN_ERROR_INVALID_SIZE);
        assert_int_equal(clrun_alloc(ctx, UINT64_MAX, &b), CLRUN_ERROR_INVALID_SIZE);
        assert_true(strlen(clrun_last_error(ctx)) > 0);
        assert_int_equal(stats_of(ctx).reserved, 0);
        clrun_context_destroy(ctx);
    }
}

/* ---- frees ---- */

static void a_double_free_is_an_error_and_changes_nothing(void **state)
{
    (void)state;
    clrun_context *ctx = open_context(NULL, false, 0);
    clrun_buffer a, b;
    assert_int_equal(clrun_alloc(ctx, 1000, &a), CLRUN_OK);
    assert_int_equal(clrun_alloc(ctx, 1000, &b), CLRUN_OK);
    clrun_buffer copy = a;
    assert_int_equal(clrun_free(ctx, &a), CLRUN_OK);
    assert_null(a.mem); /* zeroed by the free */
    clrun_memory_stats before = stats_of(ctx);
    assert_int_equal(clrun_free(ctx, &copy), CLRUN_ERROR_INVALID_FREE);
    assert_non_null(strstr(clrun_last_error(ctx), "freed already"));
    assert_int_equal(clrun_free(ctx, &a), CLRUN_ERROR_INVALID_FREE); /* the zeroed original too */
    clrun_memory_stats after = stats_of(ctx);
    assert_int_equal(after.in_use, before.in_use);
    assert_int_equal(after.free_count, before.free_count);
    assert_int_equal(clrun_free(ctx, &b), CLRUN_OK);
    clrun_context_destroy(ctx);
}

static void a_free_of_a_block_from_another_context_is_refused(void **state)
{
    (void)state;
    clrun_context *one = open_context(NULL, false, 0);
    clrun_context *two = open_context(NULL, false, 0);
    clrun_buffer a, b;
    assert_int_equal(clrun_alloc(one, 4096, &a), CLRUN_OK);
    assert_int_equal(clrun_alloc(two, 4096, &b), CLRUN_OK); /* same slot, generation and offset */
    assert_int_equal(a.slot, b.slot);
    assert_int_equal(a.generation, b.generation);
    clrun_buffer foreign = a;
    assert_int_equal(clrun_free(two, &foreign), CLRUN_ERROR_INVALID_FREE);
    assert_non_null(strstr(clrun_last_error(two), "another context"));
    assert_int_equal(stats_of(two).in_use, 4096); /* two's block is still there */
    assert_int_equal(clrun_free(two, &b), CLRUN_OK);
    assert_int_equal(clrun_free(one, &a), CLRUN_OK);
    clrun_context_destroy(two);
    clrun_context_destroy(one);
}

static void a_stale_copy_whose_slot_was_reused_is_refused(void **state)
{
    (void)state;
    clrun_context *ctx = open_context(NULL, false, 0);
    clrun_buffer a, b;
    assert_int_equal(clrun_alloc(ctx, 1000, &a), CLRUN_OK);
    clrun_buffer stale = a;
    assert_int_equal(clrun_free(ctx, &a), CLRUN_OK);
    assert_int_equal(clrun_alloc(ctx, 1000, &b), CLRUN_OK);
    assert_int_equal(b.slot, stale.slot);     /* the slot was reused... */
    assert_int_equal(b.offset, stale.offset); /* ...for the very same place */
    assert_int_equal(clrun_free(ctx, &stale), CLRUN_ERROR_INVALID_FREE);
    assert_int_equal(stats_of(ctx).in_use, 1000);
    assert_int_equal(clrun_free(ctx, &b), CLRUN_OK); /* the live block is unharmed */
    clrun_context_destroy(ctx);
}

/* ---- alignment ---- */

static void an_alignment_larger_than_the_device_is_honoured(void **state)
{
    (void)state;
    for (size_t s = 0; s < sizeof strategies / sizeof strategies[0]; s++) {
        clrun_context *ctx = open_context(strategies[s], false, 0);
        uint64_t align = 64 * KiB;
        assert_true(align > clrun_context_device(ctx)->base_addr_align);
        clrun_buffer b[6];
        for (int i = 0; i < 6; i++) {
            assert_int_equal(clrun_alloc(ctx, 100 + (uint64_t)i * 3000, &b[i]), CLRUN_OK); /* misalign the next */
            assert_int_equal(clrun_free(ctx, &b[i]), CLRUN_OK);
            assert_int_equal(clrun_alloc(ctx, 100, &b[i]), CLRUN_OK);
            clrun_buffer big;
            assert_int_equal(clrun_alloc_ex(ctx, 5000, align, "aligned", &big), CLRUN_OK);
            assert_int_equal(big.offset % align, 0);
            assert_int_equal(clrun_free(ctx, &big), CLRUN_OK);
        }
        for (int i = 0; i < 6; i++)
            assert_int_equal(clrun_free(ctx, &b[i]), CLRUN_OK);
        clrun_context_destroy(ctx);
    }
}

static void guard_mode_honours_an_alignment_larger_than_the_device(void **state)
{
    (void)state;
    clrun_context *ctx = open_context(NULL, true, 0);
    uint64_t align = 64 * KiB;
    clrun_buffer b;
    assert_int_equal(clrun_alloc_ex(ctx, 5000, align, "aligned", &b), CLRUN_OK);
    uint64_t offset = b.offset;
    assert_int_equal(clrun_free(ctx, &b), CLRUN_OK);
    clrun_context_destroy(ctx); /* before any failure, so that nothing leaks */
    if (offset % align != 0)
        fail_msg("guard mode: offset %llu is not a multiple of the asked alignment %llu (the front red zone "
                 "shifts the data off the aligned block start)",
                 (unsigned long long)offset, (unsigned long long)align);
}

static void guard_mode_counts_in_use_as_asked_for(void **state)
{
    (void)state;
    clrun_context *ctx = open_context(NULL, true, 0);
    clrun_buffer b;
    assert_int_equal(clrun_alloc(ctx, 1000, &b), CLRUN_OK);
    clrun_memory_stats st = stats_of(ctx);
    uint64_t red_zones = 2 * clrun_context_device(ctx)->base_addr_align;
    assert_int_equal(clrun_free(ctx, &b), CLRUN_OK);
    clrun_context_destroy(ctx); /* before any failure, so that nothing leaks */
    assert_true(st.held >= 1000 + red_zones); /* red zones are held... */
    if (st.in_use != 1000 || st.in_use_peak != 1000) /* ...but not in use */
        fail_msg("guard mode: in_use %llu, in_use_peak %llu for a block of 1000 bytes (red zones counted as in use)",
                 (unsigned long long)st.in_use, (unsigned long long)st.in_use_peak);
}

static void a_non_power_of_two_alignment_is_invalid(void **state)
{
    (void)state;
    clrun_context *ctx = open_context(NULL, false, 0);
    clrun_buffer b;
    assert_int_equal(clrun_alloc_ex(ctx, 100, 3000, NULL, &b), CLRUN_ERROR_INVALID_ALIGNMENT);
    assert_non_null(strstr(clrun_last_error(ctx), "3000"));
    clrun_context_destroy(ctx);
}

/* ---- fault injection ---- */

enum { WORK_BLOCKS = 10 };

/* An allocation workload that grows the pool, frees, trims and grows again. Steps that fail are
 * skipped; each failure must carry the OpenCL error's name. Returns how many steps failed. */
static int pool_workload(clrun_context *ctx, clrun_buffer *b)
{
    static const uint64_t sizes[WORK_BLOCKS] = {1000, 300 * KiB, 2 * MiB, 5 * MiB, 64,
                                                3 * MiB, 200, 700 * KiB, 9 * MiB, 4096};
    int failed = 0;
    for (int i = 0; i < WORK_BLOCKS; i++) {
        char label[16];
        snprintf(label, sizeof label, "w%d", i);
        clrun_status st = clrun_alloc_ex(ctx, sizes[i], 0, label, &b[i]);
        if (st != CLRUN_OK) {
            assert_null(b[i].mem);
            assert_non_null(strstr(clrun_last_error(ctx), "CL_"));
            failed++;
        }
        if (i == 5) { /* free some, trim, grow again */
            for (int j = 1; j < 5; j += 2) {
                if (b[j].mem && clrun_free(ctx, &b[j]) != CLRUN_OK) {
                    assert_non_null(strstr(clrun_last_error(ctx), "CL_"));
                    failed++;
                }
            }
            assert_int_equal(clrun_pool_trim(ctx, NULL), CLRUN_OK);
        }
    }
    for (int i = 0; i < WORK_BLOCKS; i += 3) {
        if (b[i].mem && clrun_free(ctx, &b[i]) != CLRUN_OK) {
            assert_non_null(strstr(clrun_last_error(ctx), "CL_"));
            failed++;
        }
    }
    return failed;
}

static cl_uint context_references(clrun_context *ctx)
{
    cl_uint count = 0;
    assert_int_equal(clGetContextInfo(clrun_context_cl(ctx), CL_CONTEXT_REFERENCE_COUNT, sizeof count, &count, NULL),
                     CL_SUCCESS);
    return count;
}

/* The context's reference count once the driver has dropped what finished commands held (POCL
 * releases a command's buffers shortly after clFinish returns), waiting for `want`. The wait
 * is capped at 60 s only so that a real leak fails instead of hanging: a slow machine just
 * waits longer, and a settled count returns at once. */
static cl_uint settled_context_references(clrun_context *ctx, cl_uint want)
{
    cl_uint count = context_references(ctx);
    for (int i = 0; i < 6000 && count != want; i++) {
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
        count = context_references(ctx);
    }
    return count;
}

static void every_failing_opencl_call_of_a_pool_workload(bool guard)
{
    long n;
    int failures = 0;
    for (n = 1;; n++) {
        clrun_context *ctx = open_context(NULL, guard, 0);
        cl_uint references = context_references(ctx);
        clrun_buffer b[WORK_BLOCKS];
        memset(b, 0, sizeof b);
        clrun__cl_fault_arm(n, n % 2 ? CL_MEM_OBJECT_ALLOCATION_FAILURE : CL_OUT_OF_RESOURCES, false);
        int failed = pool_workload(ctx, b);
        bool fired = clrun__cl_fault_fired();
        clrun__cl_fault_arm(0, CL_SUCCESS, false);
        failures += failed;
        if (!fired)
            assert_int_equal(failed, 0);
        /* The pool is still usable and its books match what is live. */
        uint64_t live = 0, live_blocks = 0;
        for (int i = 0; i < WORK_BLOCKS; i++) {
            live += b[i].mem ? b[i].size : 0;
            live_blocks += b[i].mem != NULL;
        }
        clrun_memory_stats s = stats_of(ctx);
        assert_int_equal(s.in_use, live);
        assert_int_equal(s.alloc_count - s.free_count, live_blocks);
        clrun_buffer extra;
        assert_int_equal(clrun_alloc(ctx, 12345, &extra), CLRUN_OK);
        assert_int_equal(clrun_free(ctx, &extra), CLRUN_OK);
        for (int i = 0; i < WORK_BLOCKS; i++)
            if (b[i].mem)
                assert_int_equal(clrun_free(ctx, &b[i]), CLRUN_OK);
        s = stats_of(ctx);
        assert_int_equal(s.in_use, 0);
        assert_int_equal(s.alloc_count, s.free_count);
        /* Nothing of OpenCL leaked: every chunk and sub-buffer released. */
        assert_int_equal(clrun_pool_trim(ctx, NULL), CLRUN_OK);
        assert_int_equal(clFinish(clrun_context_queue(ctx)), CL_SUCCESS);
        assert_int_equal(stats_of(ctx).reserved, 0);
        assert_int_equal(settled_context_references(ctx, references), references);
        clrun_context_destroy(ctx);
        if (!fired)
            break;
    }
    assert_true(n > 12);             /* the workload really goes through the table */
    assert_true(failures >= n / 3); /* and most faults surface as errors */
}

static void every_failing_opencl_call_of_a_pool_workload_is_an_error_that_leaks_nothing(void **state)
{
    (void)state;
    every_failing_opencl_call_of_a_pool_workload(false);
}

static void every_failing_opencl_call_in_guard_mode_is_an_error_that_leaks_nothing(void **state)
{
    (void)state;
    every_failing_opencl_call_of_a_pool_workload(true);
}

/* ---- guard mode ---- */

static void guard_mode_catches_a_kernel_writing_one_element_past_its_block(void **state)
{
    (void)state;
    clrun_context *ctx = open_context(NULL, true, 0);
    cl_kernel k = NULL;
    assert_int_equal(clrun_kernel_create(ctx, "clrun_smoke_fill_u32", &k), CLRUN_OK);
    enum { N = 1000 };
    clrun_buffer intact, victim;
    assert_int_equal(clrun_alloc_ex(ctx, N * 4, 0, "intact", &intact), CLRUN_OK);
    assert_int_equal(clrun_alloc_ex(ctx, N * 4, 0, "victim", &victim), CLRUN_OK);
    fill(ctx, k, intact.mem, 1, N);
    assert_int_equal(clrun_pool_check(ctx), CLRUN_OK); /* a kernel that stays inside passes */
    /* OpenCL does not bound a sub-buffer (POCL does not): element N lands in the red zone. */
    fill(ctx, k, victim.mem, 7, N + 1);
    assert_int_equal(clFinish(clrun_context_queue(ctx)), CL_SUCCESS);
    assert_int_equal(clrun_pool_check(ctx), CLRUN_ERROR_GUARD);
    const char *msg = clrun_last_error(ctx);
    assert_non_null(strstr(msg, "'victim'"));
    assert_non_null(strstr(msg, "overrun"));
    assert_int_equal(clrun_free(ctx, &intact), CLRUN_OK);
    assert_int_equal(clrun_free(ctx, &victim), CLRUN_ERROR_GUARD);
    msg = clrun_last_error(ctx);
    assert_non_null(strstr(msg, "'victim'"));
    assert_non_null(strstr(msg, "overrun"));
    assert_int_equal(stats_of(ctx).in_use, 0); /* the damaged block is freed all the same */
    assert_null(victim.mem);
    clReleaseKernel(k);
    clrun_context_destroy(ctx);
}

static void guard_mode_poisons_freed_memory(void **state)
{
    (void)state;
    clrun_context *ctx = open_context(NULL, true, 0);
    cl_kernel k = NULL;
    assert_int_equal(clrun_kernel_create(ctx, "clrun_smoke_fill_u32", &k), CLRUN_OK);
    enum { N = 512 };
    clrun_buffer b, keep;
    assert_int_equal(clrun_alloc(ctx, N * 4, &b), CLRUN_OK);
    assert_int_equal(clrun_alloc(ctx, 64, &keep), CLRUN_OK); /* keeps the chunk */
    fill(ctx, k, b.mem, 0, N);
    uint32_t chunk = b.chunk;
    uint64_t offset = b.offset;
    assert_int_equal(clrun_free(ctx, &b), CLRUN_OK);
    cl_uint host[N];
    assert_int_equal(clEnqueueReadBuffer(clrun_context_queue(ctx), clrun__pool_chunk_mem(ctx, chunk), CL_TRUE,
                                         (size_t)offset, sizeof host, host, 0, NULL, NULL),
                     CL_SUCCESS);
    for (unsigned i = 0; i < N; i++)
        assert_int_equal(host[i], 0xFFFFFFFFu);
    assert_int_equal(clrun_free(ctx, &keep), CLRUN_OK);
    clReleaseKernel(k);
    clrun_context_destroy(ctx);
}

/* ---- out of memory ---- */

static void out_of_memory_says_what_was_asked_in_use_reserved_largest_free_limit_and_strategy(void **state)
{
    (void)state;
    clrun_context *ctx = open_context("slab", false, 4 * MiB);
    clrun_buffer a, b;
    assert_int_equal(clrun_alloc(ctx, 3 * MiB, &a), CLRUN_OK);
    assert_int_equal(clrun_alloc(ctx, 2 * MiB, &b), CLRUN_ERROR_OUT_OF_MEMORY);
    const char *msg = clrun_last_error(ctx);
    assert_non_null(strstr(msg, "asked for 2.00 MiB"));
    assert_non_null(strstr(msg, "in use 3.00 MiB"));
    assert_non_null(strstr(msg, "reserved "));
    assert_non_null(strstr(msg, "largest free block "));
    assert_non_null(strstr(msg, "limit 4.00 MiB"));
    assert_non_null(strstr(msg, "'slab'"));
    assert_null(b.mem);
    assert_int_equal(clrun_free(ctx, &a), CLRUN_OK);
    clrun_context_destroy(ctx);
}

static void the_pool_limit_comes_from_the_environment_too(void **state)
{
    (void)state;
    clear_environment();
    setenv("CLRUN_POOL_LIMIT", "2M", 1);
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    unsetenv("CLRUN_POOL_LIMIT");
    clrun_buffer b;
    assert_int_equal(clrun_alloc(ctx, 3 * MiB, &b), CLRUN_ERROR_OUT_OF_MEMORY);
    assert_non_null(strstr(clrun_last_error(ctx), "limit 2.00 MiB"));
    assert_int_equal(stats_of(ctx).limit, 2 * MiB);
    clrun_context_destroy(ctx);
}

/* ---- growth, trim, preallocation, statistics ---- */

static void a_ten_mib_workload_does_not_reserve_a_gib(void **state)
{
    (void)state;
    for (size_t s = 0; s < sizeof strategies / sizeof strategies[0]; s++) {
        clrun_context *ctx = open_context(strategies[s], false, 0);
        clrun_buffer b[40];
        uint64_t live = 0;
        int n = 0;
        for (uint64_t size = 1000; n < 40 && live + size <= 10 * MiB; size = size * 5 / 4) {
            assert_int_equal(clrun_alloc(ctx, size, &b[n++]), CLRUN_OK);
            live += size;
        }
        clrun_memory_stats st = stats_of(ctx);
        assert_true(st.in_use > 8 * MiB);
        assert_true(st.chunks >= 2);                 /* grown with demand... */
        assert_true(st.reserved_peak <= 40 * MiB);   /* ...not to the device maximum */
        for (int i = 0; i < n; i++)
            assert_int_equal(clrun_free(ctx, &b[i]), CLRUN_OK);
        clrun_context_destroy(ctx);
    }
}

static void chunks_grow_with_demand(void **state)
{
    (void)state;
    clrun_context *ctx = open_context("bump", false, 0);
    clrun_buffer a, b, c;
    assert_int_equal(clrun_alloc(ctx, 1000, &a), CLRUN_OK);
    assert_int_equal(stats_of(ctx).reserved, 16 * KiB); /* the request rounded up to 16 KiB */
    assert_int_equal(clrun_alloc(ctx, 6 * MiB, &b), CLRUN_OK);
    assert_int_equal(stats_of(ctx).reserved, 6 * MiB + 16 * KiB); /* what was missing */
    assert_int_equal(clrun_alloc(ctx, 100, &c), CLRUN_OK); /* the 16 KiB chunk still has room */
    assert_int_equal(stats_of(ctx).chunks, 2);
    assert_int_not_equal(a.chunk, b.chunk);
    assert_int_equal(clrun_free(ctx, &c), CLRUN_OK);
    assert_int_equal(clrun_free(ctx, &b), CLRUN_OK);
    assert_int_equal(clrun_free(ctx, &a), CLRUN_OK);
    clrun_context_destroy(ctx);
}

static void trim_gives_empty_chunks_back_to_the_driver(void **state)
{
    (void)state;
    for (size_t s = 0; s < sizeof strategies / sizeof strategies[0]; s++) {
        clrun_context *ctx = open_context(strategies[s], false, 0);
        clrun_buffer keep, big;
        assert_int_equal(clrun_alloc(ctx, 1000, &keep), CLRUN_OK);
        assert_int_equal(clrun_alloc(ctx, 6 * MiB, &big), CLRUN_OK);
        clrun_memory_stats before = stats_of(ctx);
        assert_int_equal(before.chunks, 2);
        uint32_t big_chunk = big.chunk;
        assert_int_not_equal(big_chunk, keep.chunk);
        assert_int_equal(clrun_free(ctx, &big), CLRUN_OK);
        uint64_t released = 0;
        assert_int_equal(clrun_pool_trim(ctx, &released), CLRUN_OK);
        clrun_memory_stats after = stats_of(ctx);
        assert_true(released >= 6 * MiB);
        assert_int_equal(after.reserved, before.reserved - released);
        assert_int_equal(after.chunks, 1);
        assert_int_equal(after.driver_frees, 1);
        assert_null(clrun__pool_chunk_mem(ctx, big_chunk));
        assert_non_null(clrun__pool_chunk_mem(ctx, keep.chunk));
        assert_int_equal(clrun_free(ctx, &keep), CLRUN_OK);
        assert_int_equal(clrun_pool_trim(ctx, &released), CLRUN_OK);
        assert_int_equal(stats_of(ctx).reserved, 0);
        clrun_context_destroy(ctx);
    }
}

static void preallocate_reserves_the_limit_up_front(void **state)
{
    (void)state;
    clear_environment();
    setenv("CLRUN_PREALLOCATE", "1", 1);
    setenv("CLRUN_POOL_LIMIT", "8M", 1);
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    clear_environment();
    clrun_memory_stats st = stats_of(ctx);
    assert_int_equal(st.reserved, 8 * MiB);
    assert_int_equal(st.in_use, 0);
    clrun_buffer b;
    assert_int_equal(clrun_alloc(ctx, 3 * MiB, &b), CLRUN_OK);
    assert_int_equal(stats_of(ctx).driver_allocs, st.driver_allocs); /* no new chunk */
    assert_int_equal(clrun_free(ctx, &b), CLRUN_OK);
    clrun_context_destroy(ctx);
}

static void statistics_follow_allocations_and_peaks_reset(void **state)
{
    (void)state;
    clrun_context *ctx = open_context("buddy", false, 0);
    clrun_memory_stats st = stats_of(ctx);
    assert_string_equal(st.strategy, "buddy");
    assert_int_equal(st.in_use + st.reserved + st.alloc_count, 0);
    clrun_buffer a, b, c;
    assert_int_equal(clrun_alloc(ctx, 3000, &a), CLRUN_OK);
    assert_int_equal(clrun_alloc(ctx, 100 * KiB, &b), CLRUN_OK);
    assert_int_equal(clrun_free(ctx, &a), CLRUN_OK);
    assert_int_equal(clrun_alloc(ctx, 5000, &c), CLRUN_OK);
    st = stats_of(ctx);
    assert_int_equal(st.in_use, 100 * KiB + 5000);
    assert_int_equal(st.in_use_peak, 100 * KiB + 5000);
    assert_true(st.held >= st.in_use);
    assert_int_equal(st.alloc_count, 3);
    assert_int_equal(st.free_count, 1);
    assert_int_equal(st.driver_allocs, st.chunks);
    assert_true(st.reserved >= st.held && st.reserved <= 256 * KiB); /* about what it holds */
    assert_int_equal(st.free_bytes, st.reserved - st.held);
    assert_true(st.largest_free > 0 && st.largest_free <= st.free_bytes);
    assert_true(st.fragmentation >= 0.0 && st.fragmentation < 1.0);
    assert_int_equal(clrun_free(ctx, &b), CLRUN_OK);
    clrun_memory_reset_peaks(ctx);
    st = stats_of(ctx);
    assert_int_equal(st.in_use_peak, 5000);
    assert_int_equal(st.reserved_peak, st.reserved);
    assert_int_equal(clrun_free(ctx, &c), CLRUN_OK);
    clrun_context_destroy(ctx);
}

static void reset_forgets_every_block_and_keeps_the_chunks(void **state)
{
    (void)state;
    clrun_context *ctx = open_context("bump", false, 0);
    clrun_buffer a, b;
    assert_int_equal(clrun_alloc(ctx, 1000, &a), CLRUN_OK);
    assert_int_equal(clrun_alloc(ctx, 2000, &b), CLRUN_OK);
    uint64_t reserved = stats_of(ctx).reserved;
    assert_int_equal(clrun_pool_reset(ctx), CLRUN_OK);
    assert_int_equal(stats_of(ctx).in_use, 0);
    assert_int_equal(stats_of(ctx).reserved, reserved);
    assert_int_equal(clrun_free(ctx, &a), CLRUN_ERROR_INVALID_FREE);
    clrun_buffer c;
    assert_int_equal(clrun_alloc(ctx, 1000, &c), CLRUN_OK);
    assert_int_equal(c.offset, 0); /* bump starts over */
    assert_int_equal(clrun_free(ctx, &c), CLRUN_OK);
    clrun_context_destroy(ctx);
}

int main(void)
{
    clrun_test_device_environment(cache_root, sizeof cache_root);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(blocks_of_every_strategy_hold_what_a_kernel_wrote_and_neighbours_are_untouched),
        cmocka_unit_test(size_zero_is_an_invalid_size),
        cmocka_unit_test(a_size_above_the_device_maximum_is_an_invalid_size),
        cmocka_unit_test(size_max_is_an_invalid_size),
        cmocka_unit_test(a_double_free_is_an_error_and_changes_nothing),
        cmocka_unit_test(a_free_of_a_block_from_another_context_is_refused),
        cmocka_unit_test(a_stale_copy_whose_slot_was_reused_is_refused),
        cmocka_unit_test(an_alignment_larger_than_the_device_is_honoured),
        cmocka_unit_test(guard_mode_honours_an_alignment_larger_than_the_device),
        cmocka_unit_test(guard_mode_counts_in_use_as_asked_for),
        cmocka_unit_test(a_non_power_of_two_alignment_is_invalid),
        cmocka_unit_test(every_failing_opencl_call_of_a_pool_workload_is_an_error_that_leaks_nothing),
        cmocka_unit_test(every_failing_opencl_call_in_guard_mode_is_an_error_that_leaks_nothing),
        cmocka_unit_test(guard_mode_catches_a_kernel_writing_one_element_past_its_block),
        cmocka_unit_test(guard_mode_poisons_freed_memory),
        cmocka_unit_test(out_of_memory_says_what_was_asked_in_use_reserved_largest_free_limit_and_strategy),
        cmocka_unit_test(the_pool_limit_comes_from_the_environment_too),
        cmocka_unit_test(a_ten_mib_workload_does_not_reserve_a_gib),
        cmocka_unit_test(chunks_grow_with_demand),
        cmocka_unit_test(trim_gives_empty_chunks_back_to_the_driver),
        cmocka_unit_test(preallocate_reserves_the_limit_up_front),
        cmocka_unit_test(statistics_follow_allocations_and_peaks_reset),
        cmocka_unit_test(reset_forgets_every_block_and_keeps_the_chunks),
        cmocka_unit_test(host_blocks_are_the_callers_outside_the_limit),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    clrun_test_remove_dir(cache_root);
    return failed;
}
