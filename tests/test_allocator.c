/* Tests of the allocator core (lib/memory/allocator.c) with no device: a fake backing records
 * every chunk it is asked for and can refuse, so the pool's policy is checked on its own: chunk
 * sizes (the request or a floor of a 64th or a 16th of what is reserved, empty chunks merged into
 * the new one, the device maximum, buddy's atoms), the limit, asking again for just the
 * request when the device refuses, the out-of-memory message, statistics and peaks, invalid
 * requests, and that destroy gives every chunk back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "memory/allocator.h"

#define KiB (UINT64_C(1) << 10)
#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)
#define MAX_CHUNKS 256

/* A device that is only bookkeeping. */
typedef struct fake_backing {
    uint64_t size[MAX_CHUNKS];     /* by chunk id; 0 = not reserved */
    uint64_t history[MAX_CHUNKS];  /* sizes granted, in order */
    unsigned granted;              /* entries in history */
    unsigned reserve_calls;        /* every call, refused ones included */
    unsigned release_calls;
    uint64_t held;                 /* bytes reserved now */
    uint64_t capacity;             /* device memory: refuse beyond it; 0 = unlimited */
    unsigned refuse_from;          /* refuse this call (1-based) and every later one; 0 = never */
    clrun_status refusal;          /* what a refusal returns (default: out of memory) */
} fake_backing;

static clrun_status fake_reserve(void *user, uint32_t chunk, uint64_t size, char *err, size_t errlen)
{
    fake_backing *b = user;
    b->reserve_calls++;
    assert_true(chunk < MAX_CHUNKS);
    assert_int_equal(b->size[chunk], 0); /* the core never reuses a live id */
    if ((b->refuse_from && b->reserve_calls >= b->refuse_from) || (b->capacity && b->held + size > b->capacity)) {
        snprintf(err, errlen, "fake device refused %llu bytes", (unsigned long long)size);
        return b->refusal ? b->refusal : CLRUN_ERROR_OUT_OF_MEMORY;
    }
    b->size[chunk] = size;
    b->held += size;
    b->history[b->granted++] = size;
    return CLRUN_OK;
}

static void fake_release(void *user, uint32_t chunk)
{
    fake_backing *b = user;
    assert_true(chunk < MAX_CHUNKS);
    assert_true(b->size[chunk] != 0); /* never a chunk that is not reserved */
    b->held -= b->size[chunk];
    b->size[chunk] = 0;
    b->release_calls++;
}

static clrun__allocator_config config_for(const clrun_strategy_ops *ops, fake_backing *b)
{
    return (clrun__allocator_config){
        .ops = ops,
        .min_align = 256,
        .max_chunk = GiB,
        .backing = {.user = b, .reserve = fake_reserve, .release = fake_release},
    };
}

static clrun__allocator *make(const clrun__allocator_config *config)
{
    clrun__allocator *a = NULL;
    char err[256];
    assert_int_equal(clrun__allocator_create(config, &a, err, sizeof err), CLRUN_OK);
    assert_non_null(a);
    return a;
}

static clrun_status alloc(clrun__allocator *a, uint64_t size, clrun_block *out)
{
    char err[1536];
    return clrun__allocator_alloc(a, size, 0, out, err, sizeof err);
}

static void release(clrun__allocator *a, const clrun_block *b, uint64_t size)
{
    char err[256];
    assert_int_equal(clrun__allocator_free(a, b->chunk, b->offset, size, err, sizeof err), CLRUN_OK);
}

static const clrun_strategy_ops *const all_strategies[] = {&clrun_strategy_buddy, &clrun_strategy_slab,
                                                            &clrun_strategy_bump, &clrun_strategy_tlsf};
#define STRATEGY_COUNT (sizeof all_strategies / sizeof all_strategies[0])

/* ---- growth ---- */

static void a_small_request_reserves_a_small_chunk(void **state)
{
    (void)state;
    for (size_t s = 0; s < STRATEGY_COUNT; s++) {
        fake_backing b = {0};
        clrun__allocator_config c = config_for(all_strategies[s], &b);
        clrun__allocator *a = make(&c);
        clrun_block block;
        assert_int_equal(alloc(a, 1000, &block), CLRUN_OK);
        assert_int_equal(b.granted, 1);
        assert_int_equal(b.history[0], 16 * KiB); /* the 16 KiB minimum chunk */
        clrun__allocator_destroy(a);
    }
}

static void a_request_above_the_minimum_chunk_gets_a_chunk_that_holds_it(void **state)
{
    (void)state;
    for (size_t s = 0; s < STRATEGY_COUNT; s++) {
        fake_backing b = {0};
        clrun__allocator_config c = config_for(all_strategies[s], &b);
        clrun__allocator *a = make(&c);
        clrun_block block;
        assert_int_equal(alloc(a, 5 * MiB + 3, &block), CLRUN_OK);
        assert_int_equal(b.granted, 1);
        assert_true(b.history[0] >= 5 * MiB + 3);
        assert_true(b.history[0] <= 2 * (5 * MiB + 3)); /* no more than buddy's rounding */
        if (all_strategies[s] != &clrun_strategy_buddy)
            assert_true(b.history[0] <= 5 * MiB + 16 * KiB); /* the others round to 16 KiB */
        clrun__allocator_destroy(a);
    }
}

static void a_full_pool_grows_by_at_least_a_64th_of_what_is_reserved(void **state)
{
    (void)state;
    fake_backing b = {0};
    clrun__allocator_config c = config_for(&clrun_strategy_bump, &b);
    clrun__allocator *a = make(&c);
    clrun_block x;
    assert_int_equal(alloc(a, 8 * MiB, &x), CLRUN_OK);      /* 8 */
    assert_int_equal(alloc(a, 8 * MiB, &x), CLRUN_OK);      /* max(8, 8/64) = 8 */
    assert_int_equal(alloc(a, 9 * MiB, &x), CLRUN_OK);      /* max(9, 16/64) = 9: just the request */
    assert_int_equal(alloc(a, 100 * KiB, &x), CLRUN_OK);    /* nothing free: max(100 KiB, 25/64 MiB) */
    assert_int_equal(alloc(a, 30 * KiB + 1, &x), CLRUN_OK); /* fits beside it: no chunk */
    assert_int_equal(b.granted, 4);
    assert_int_equal(b.history[0], 8 * MiB);
    assert_int_equal(b.history[1], 8 * MiB);
    assert_int_equal(b.history[2], 9 * MiB);
    assert_int_equal(b.history[3], 25 * MiB / 64);
    clrun__allocator_destroy(a);
}

static void a_pool_holding_free_fragments_grows_by_at_least_a_16th(void **state)
{
    (void)state;
    fake_backing b = {0};
    clrun__allocator_config c = config_for(&clrun_strategy_bump, &b);
    c.min_chunk = MiB;
    clrun__allocator *a = make(&c);
    clrun_block x;
    for (int i = 0; i < 20; i++)
        assert_int_equal(alloc(a, MiB, &x), CLRUN_OK);     /* full each time: 1 MiB chunks */
    assert_int_equal(alloc(a, 512 * KiB, &x), CLRUN_OK);   /* the 1 MiB minimum: 512 KiB free */
    assert_int_equal(b.granted, 21);
    assert_int_equal(b.history[20], MiB);
    assert_int_equal(alloc(a, 600 * KiB, &x), CLRUN_OK);   /* 512 KiB free > 21/64 MiB: not full */
    assert_int_equal(b.granted, 22);
    assert_int_equal(b.history[21], 21 * MiB / 16);
    clrun__allocator_destroy(a);
}

/* A workload that only grows reserves about what it holds: a 64th and a granule above, at most. */
static void reserved_stays_close_to_what_is_held(void **state)
{
    (void)state;
    const clrun_strategy_ops *exact[] = {&clrun_strategy_bump, &clrun_strategy_tlsf};
    for (size_t s = 0; s < 2; s++) {
        fake_backing b = {0};
        clrun__allocator_config c = config_for(exact[s], &b);
        clrun__allocator *a = make(&c);
        clrun_block x;
        for (uint64_t size = 1000; size < 4 * MiB; size = size * 11 / 10)
            assert_int_equal(alloc(a, size, &x), CLRUN_OK);
        clrun_memory_stats st;
        clrun__allocator_stats(a, &st);
        assert_true(st.reserved_peak <= st.in_use_peak + st.in_use_peak / 64 + 64 * KiB);
        clrun__allocator_destroy(a);
    }
}

/* Empty chunks too small for a request are given back and their bytes merged into the new one. */
static void empty_chunks_are_given_back_and_merged_into_the_new_chunk(void **state)
{
    (void)state;
    for (size_t s = 0; s < STRATEGY_COUNT; s++) {
        fake_backing b = {0};
        clrun__allocator_config c = config_for(all_strategies[s], &b);
        clrun__allocator *a = make(&c);
        clrun_block x[3];
        assert_int_equal(alloc(a, 100 * KiB, &x[0]), CLRUN_OK);
        assert_int_equal(alloc(a, 200 * KiB, &x[1]), CLRUN_OK);
        assert_int_equal(alloc(a, 400 * KiB, &x[2]), CLRUN_OK);
        uint64_t reserved = b.held;
        assert_true(b.granted >= 2);
        release(a, &x[0], 100 * KiB);
        release(a, &x[1], 200 * KiB);
        release(a, &x[2], 400 * KiB);
        clrun_block big;
        assert_int_equal(alloc(a, 600 * KiB, &big), CLRUN_OK);
        clrun_memory_stats st;
        clrun__allocator_stats(a, &st);
        assert_int_equal(st.chunks, 1);                   /* every empty chunk went back */
        assert_int_equal(b.release_calls, b.granted - 1);
        assert_true(b.held >= reserved);                  /* their bytes are in the new chunk */
        assert_true(b.held <= 2 * reserved);
        clrun__allocator_destroy(a);
    }
}

static void buddy_chunks_are_what_was_asked_rounded_to_the_atom(void **state)
{
    (void)state;
    fake_backing b = {0};
    clrun__allocator_config c = config_for(&clrun_strategy_buddy, &b);
    c.min_chunk = 3 * MiB; /* not a power of two: buddy keeps it (its blocks trim) */
    clrun__allocator *a = make(&c);
    static const uint64_t sizes[] = {1000, 3 * MiB, 5 * MiB + 1, 700 * KiB, 12 * MiB, 33 * MiB, 100};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        clrun_block x;
        assert_int_equal(alloc(a, sizes[i], &x), CLRUN_OK);
    }
    assert_true(b.granted >= 4);
    assert_int_equal(b.history[0], 3 * MiB);
    for (unsigned i = 0; i < b.granted; i++)
        assert_int_equal(b.history[i] % 256, 0);
    clrun_memory_stats st;
    clrun__allocator_stats(a, &st);
    assert_true(st.reserved_peak <= 3 * MiB + 3 * MiB + 5 * MiB + 512 + 12 * MiB + 33 * MiB); /* no doubling */
    clrun__allocator_destroy(a);
}

static void no_chunk_is_larger_than_the_device_maximum(void **state)
{
    (void)state;
    for (size_t s = 0; s < STRATEGY_COUNT; s++) {
        fake_backing b = {0};
        clrun__allocator_config c = config_for(all_strategies[s], &b);
        c.max_chunk = 4 * MiB;
        clrun__allocator *a = make(&c);
        for (int i = 0; i < 40; i++) { /* 60 MiB: half of reserved soon exceeds the maximum */
            clrun_block x;
            assert_int_equal(alloc(a, 3 * MiB / 2, &x), CLRUN_OK);
        }
        assert_true(b.granted >= 15);
        for (unsigned i = 0; i < b.granted; i++)
            assert_true(b.history[i] <= 4 * MiB);
        clrun__allocator_destroy(a);
    }
}

static void a_ten_mib_workload_does_not_reserve_a_gib(void **state)
{
    (void)state;
    for (size_t s = 0; s < STRATEGY_COUNT; s++) {
        fake_backing b = {0};
        clrun__allocator_config c = config_for(all_strategies[s], &b);
        clrun__allocator *a = make(&c);
        /* Rounds of varied sizes, about 10 MiB live at the top of each, all freed again. */
        uint64_t sizes[64];
        clrun_block blocks[64];
        for (int round = 0; round < 8; round++) {
            uint64_t live = 0;
            int n = 0;
            for (uint64_t sz = 3000 + (uint64_t)round * 777; live + sz <= 10 * MiB && n < 64; sz = sz * 13 / 10) {
                assert_int_equal(alloc(a, sz, &blocks[n]), CLRUN_OK);
                sizes[n++] = sz;
                live += sz;
            }
            for (int i = n; i-- > 0;)
                release(a, &blocks[i], sizes[i]);
        }
        clrun_memory_stats st;
        clrun__allocator_stats(a, &st);
        assert_true(st.in_use_peak > 8 * MiB);
        assert_true(st.reserved_peak <= 48 * MiB); /* measured: 16-32 MiB; 1 GiB is the bug */
        clrun__allocator_destroy(a);
    }
}

/* ---- the limit ---- */

static void the_limit_is_never_exceeded_and_then_out_of_memory(void **state)
{
    (void)state;
    for (size_t s = 0; s < STRATEGY_COUNT; s++) {
        fake_backing b = {0};
        clrun__allocator_config c = config_for(all_strategies[s], &b);
        c.limit = 5 * MiB;
        clrun__allocator *a = make(&c);
        clrun_block x;
        clrun_status status;
        int n = 0;
        while ((status = alloc(a, 300 * KiB, &x)) == CLRUN_OK) {
            assert_true(b.held <= 5 * MiB);
            assert_true(++n < 1000);
        }
        assert_int_equal(status, CLRUN_ERROR_OUT_OF_MEMORY);
        assert_true(n >= 10); /* most of the 5 MiB was usable */
        assert_true(b.held <= 5 * MiB);
        clrun__allocator_destroy(a);
    }
}

static void the_last_chunk_shrinks_to_what_the_limit_leaves(void **state)
{
    (void)state;
    fake_backing b = {0};
    clrun__allocator_config c = config_for(&clrun_strategy_bump, &b);
    c.limit = MiB + 12 * KiB;
    clrun__allocator *a = make(&c);
    clrun_block x;
    assert_int_equal(alloc(a, MiB, &x), CLRUN_OK);
    assert_int_equal(alloc(a, 10 * KiB, &x), CLRUN_OK);
    assert_int_equal(b.granted, 2);
    assert_int_equal(b.history[1], 12 * KiB); /* not the 16 KiB minimum chunk */
    clrun__allocator_destroy(a);
}

/* ---- exhaustion: ask again for just the request, once ---- */

static void when_the_device_refuses_it_asks_again_for_just_the_request(void **state)
{
    (void)state;
    for (size_t s = 0; s < STRATEGY_COUNT; s++) {
        fake_backing b = {0};
        clrun__allocator_config c = config_for(all_strategies[s], &b);
        clrun__allocator *a = make(&c);
        clrun_block x, y;
        assert_int_equal(alloc(a, 32 * MiB, &x), CLRUN_OK); /* stays live */
        b.capacity = b.held + 200 * KiB;                    /* room for the request, not for 32/64 MiB */
        unsigned calls = b.reserve_calls;
        assert_int_equal(alloc(a, 100 * KiB, &y), CLRUN_OK);
        assert_int_equal(b.reserve_calls, calls + 2);       /* refused, then granted */
        assert_true(b.history[b.granted - 1] < 256 * KiB);
        assert_int_equal(b.release_calls, 0);
        clrun__allocator_destroy(a);
    }
}

static void it_retries_only_once(void **state)
{
    (void)state;
    fake_backing b = {0};
    clrun__allocator_config c = config_for(&clrun_strategy_buddy, &b);
    clrun__allocator *a = make(&c);
    clrun_block x;
    assert_int_equal(alloc(a, 1000, &x), CLRUN_OK);
    release(a, &x, 1000);
    b.refuse_from = b.reserve_calls + 1; /* the device refuses everything from now on */
    assert_int_equal(alloc(a, 2 * MiB, &x), CLRUN_ERROR_OUT_OF_MEMORY);
    assert_int_equal(b.reserve_calls, 3); /* the first chunk, one attempt, one retry */
    assert_int_equal(b.release_calls, 1);
    clrun__allocator_destroy(a);
}

static void a_refusal_leaves_the_allocator_usable(void **state)
{
    (void)state;
    for (size_t s = 0; s < STRATEGY_COUNT; s++) {
        fake_backing b = {.refuse_from = 1};
        clrun__allocator_config c = config_for(all_strategies[s], &b);
        clrun__allocator *a = make(&c);
        clrun_block x;
        assert_int_equal(alloc(a, 1000, &x), CLRUN_ERROR_OUT_OF_MEMORY);
        clrun_memory_stats st;
        clrun__allocator_stats(a, &st);
        assert_int_equal(st.in_use, 0);
        assert_int_equal(st.alloc_count, 0);
        assert_int_equal(st.reserved, 0);
        b.refuse_from = 0;
        assert_int_equal(alloc(a, 1000, &x), CLRUN_OK);
        release(a, &x, 1000);
        clrun__allocator_stats(a, &st);
        assert_int_equal(st.alloc_count, 1);
        assert_int_equal(st.free_count, 1);
        assert_int_equal(st.in_use, 0);
        clrun__allocator_destroy(a);
        assert_int_equal(b.held, 0);
    }
}

static void a_backing_error_other_than_out_of_memory_is_returned_with_its_message(void **state)
{
    (void)state;
    fake_backing b = {.refuse_from = 1, .refusal = CLRUN_ERROR_OUT_OF_HOST_MEMORY};
    clrun__allocator_config c = config_for(&clrun_strategy_slab, &b);
    clrun__allocator *a = make(&c);
    clrun_block x;
    char err[1536] = "";
    assert_int_equal(clrun__allocator_alloc(a, 1000, 0, &x, err, sizeof err), CLRUN_ERROR_OUT_OF_HOST_MEMORY);
    assert_non_null(strstr(err, "fake device refused"));
    clrun__allocator_destroy(a);
}

/* ---- the out-of-memory message ---- */

static void out_of_memory_says_what_was_asked_in_use_reserved_largest_free_limit_and_strategy(void **state)
{
    (void)state;
    fake_backing b = {0};
    clrun__allocator_config c = config_for(&clrun_strategy_bump, &b);
    c.limit = 2 * MiB;
    clrun__allocator *a = make(&c);
    clrun_block x;
    assert_int_equal(alloc(a, 3 * MiB / 2, &x), CLRUN_OK);
    char err[1536] = "";
    assert_int_equal(clrun__allocator_alloc(a, MiB, 0, &x, err, sizeof err), CLRUN_ERROR_OUT_OF_MEMORY);
    assert_non_null(strstr(err, "asked for 1.00 MiB"));
    assert_non_null(strstr(err, "in use 1.50 MiB"));
    assert_non_null(strstr(err, "reserved 1.50 MiB"));
    assert_non_null(strstr(err, "largest free block 0 B"));
    assert_non_null(strstr(err, "leaves 512.00 KiB")); /* why no chunk could be added */
    assert_non_null(strstr(err, "limit 2.00 MiB"));
    assert_non_null(strstr(err, "strategy 'bump'"));
    clrun__allocator_destroy(a);
}

/* A strategy that takes chunks but never has room: the core grows once and must still explain. */
static clrun_status never_create(const clrun_strategy_config *c, void **s) { (void)c; *s = NULL; return CLRUN_OK; }
static void never_destroy(void *s) { (void)s; }
static uint64_t never_chunk_size(const void *s, uint64_t request, uint64_t align, uint64_t wanted)
{
    (void)s, (void)align;
    return wanted > request ? wanted : request;
}
static clrun_status never_add(void *s, uint32_t chunk, uint64_t size) { (void)s, (void)chunk, (void)size; return CLRUN_OK; }
static clrun_status never_remove(void *s, uint32_t chunk) { (void)s, (void)chunk; return CLRUN_OK; }
static bool never_empty(const void *s, uint32_t chunk) { (void)s, (void)chunk; return false; }
static clrun_status never_alloc(void *s, uint64_t size, uint64_t align, clrun_block *out)
{
    (void)s, (void)size, (void)align, (void)out;
    return CLRUN_ERROR_OUT_OF_MEMORY;
}
static clrun_status never_free(void *s, uint32_t chunk, uint64_t offset) { (void)s, (void)chunk, (void)offset; return CLRUN_ERROR_INVALID_FREE; }
static void never_reset(void *s) { (void)s; }
static void never_stats(const void *s, clrun_strategy_stats *out) { (void)s; memset(out, 0, sizeof *out); }
static const clrun_strategy_ops never_room = {
    "never", "has no room even in a new chunk", never_create, never_destroy, never_chunk_size, never_add,
    never_remove, never_empty, never_alloc, never_free, never_reset, never_stats,
};

static void out_of_memory_after_growing_still_gives_a_defined_message(void **state)
{
    (void)state;
    fake_backing b = {0};
    clrun__allocator_config c = config_for(&never_room, &b);
    clrun__allocator *a = make(&c);
    clrun_block x;
    char err[1536];
    memset(err, 'Z', sizeof err); /* what an uninitialised reason would leave */
    err[sizeof err - 1] = '\0';
    assert_int_equal(clrun__allocator_alloc(a, 1000, 0, &x, err, sizeof err), CLRUN_ERROR_OUT_OF_MEMORY);
    assert_non_null(strstr(err, "strategy 'never'"));
    assert_non_null(strstr(err, "no room in the new chunk")); /* not an uninitialised reason */
    assert_null(strchr(err, 'Z'));
    clrun__allocator_destroy(a);
}

/* ---- statistics ---- */

static void statistics_count_bytes_blocks_and_peaks(void **state)
{
    (void)state;
    for (size_t s = 0; s < STRATEGY_COUNT; s++) {
        fake_backing b = {0};
        clrun__allocator_config c = config_for(all_strategies[s], &b);
        clrun__allocator *a = make(&c);
        clrun_block x, y, z;
        assert_int_equal(alloc(a, 1000, &x), CLRUN_OK);
        assert_int_equal(alloc(a, 3000, &y), CLRUN_OK);
        release(a, &x, 1000);
        assert_int_equal(alloc(a, 500, &z), CLRUN_OK);
        clrun_memory_stats st;
        clrun__allocator_stats(a, &st);
        assert_string_equal(st.strategy, all_strategies[s]->name);
        assert_int_equal(st.in_use, 3500);
        assert_int_equal(st.in_use_peak, 4000);
        assert_int_equal(st.alloc_count, 3);
        assert_int_equal(st.free_count, 1);
        assert_true(st.held >= 3500);
        assert_int_equal(st.reserved, b.held);
        assert_int_equal(st.reserved_peak, b.held);
        assert_int_equal(st.chunks, 1);
        assert_int_equal(st.driver_allocs, 1);
        assert_int_equal(st.driver_frees, 0);
        assert_true(st.free_bytes + st.held <= st.reserved);
        assert_true(st.largest_free <= st.free_bytes);
        assert_true(st.fragmentation >= 0.0 && st.fragmentation < 1.0);
        assert_int_equal(st.limit, 0);
        clrun__allocator_destroy(a);
    }
}

static void resetting_peaks_starts_them_from_the_current_values(void **state)
{
    (void)state;
    fake_backing b = {0};
    clrun__allocator_config c = config_for(&clrun_strategy_buddy, &b);
    clrun__allocator *a = make(&c);
    clrun_block x, y;
    assert_int_equal(alloc(a, 4 * MiB, &x), CLRUN_OK);
    assert_int_equal(alloc(a, 1000, &y), CLRUN_OK);
    release(a, &x, 4 * MiB);
    assert_true(clrun__allocator_trim(a) > 0);
    clrun_memory_stats st;
    clrun__allocator_stats(a, &st);
    assert_int_equal(st.in_use_peak, 4 * MiB + 1000);
    assert_true(st.reserved_peak > st.reserved);
    clrun__allocator_reset_peaks(a);
    clrun__allocator_stats(a, &st);
    assert_int_equal(st.in_use_peak, 1000);
    assert_int_equal(st.reserved_peak, st.reserved);
    clrun__allocator_destroy(a);
}

static void trim_gives_back_only_empty_chunks(void **state)
{
    (void)state;
    for (size_t s = 0; s < STRATEGY_COUNT; s++) {
        fake_backing b = {0};
        clrun__allocator_config c = config_for(all_strategies[s], &b);
        clrun__allocator *a = make(&c);
        clrun_block x, y;
        assert_int_equal(alloc(a, 3 * MiB, &x), CLRUN_OK);
        assert_int_equal(alloc(a, 3 * MiB, &y), CLRUN_OK); /* does not fit beside x: a second chunk */
        assert_int_equal(b.granted, 2);
        release(a, &y, 3 * MiB);
        uint64_t second = b.size[y.chunk];
        assert_int_equal(clrun__allocator_trim(a), second);
        assert_int_equal(b.size[y.chunk], 0);
        assert_true(b.size[x.chunk] != 0);
        assert_int_equal(clrun__allocator_trim(a), 0);
        clrun_memory_stats st;
        clrun__allocator_stats(a, &st);
        assert_int_equal(st.reserved, b.held);
        assert_int_equal(st.chunks, 1);
        clrun__allocator_destroy(a);
    }
}

static void preallocate_reserves_up_to_the_target_in_device_sized_chunks(void **state)
{
    (void)state;
    for (size_t s = 0; s < STRATEGY_COUNT; s++) {
        fake_backing b = {0};
        clrun__allocator_config c = config_for(all_strategies[s], &b);
        c.max_chunk = 4 * MiB;
        c.limit = 10 * MiB;
        clrun__allocator *a = make(&c);
        char err[512];
        assert_int_equal(clrun__allocator_preallocate(a, 10 * MiB, err, sizeof err), CLRUN_OK);
        assert_true(b.held <= 10 * MiB);
        assert_true(b.held >= 8 * MiB);
        for (unsigned i = 0; i < b.granted; i++)
            assert_true(b.history[i] <= 4 * MiB);
        unsigned granted = b.granted;
        clrun_block x;
        assert_int_equal(alloc(a, MiB, &x), CLRUN_OK); /* served from what is reserved */
        assert_int_equal(b.granted, granted);
        clrun__allocator_destroy(a);
        assert_int_equal(b.held, 0);
    }
}

/* ---- invalid requests ---- */

static void size_zero_is_an_invalid_size(void **state)
{
    (void)state;
    fake_backing b = {0};
    clrun__allocator_config c = config_for(&clrun_strategy_buddy, &b);
    clrun__allocator *a = make(&c);
    clrun_block x;
    char err[512] = "";
    assert_int_equal(clrun__allocator_alloc(a, 0, 0, &x, err, sizeof err), CLRUN_ERROR_INVALID_SIZE);
    assert_non_null(strstr(err, "size 0"));
    assert_int_equal(b.reserve_calls, 0);
    clrun__allocator_destroy(a);
}

static void a_size_above_the_device_maximum_is_an_invalid_size(void **state)
{
    (void)state;
    static const uint64_t sizes[] = {GiB + 1, UINT64_MAX, (uint64_t)SIZE_MAX};
    for (size_t s = 0; s < STRATEGY_COUNT; s++) {
        fake_backing b = {0};
        clrun__allocator_config c = config_for(all_strategies[s], &b);
        clrun__allocator *a = make(&c);
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            clrun_block x;
            char err[512] = "";
            assert_int_equal(clrun__allocator_alloc(a, sizes[i], 0, &x, err, sizeof err), CLRUN_ERROR_INVALID_SIZE);
            assert_non_null(strstr(err, "maximum allocation"));
        }
        assert_int_equal(b.reserve_calls, 0);
        clrun__allocator_destroy(a);
    }
}

static void an_alignment_that_is_not_a_power_of_two_is_invalid(void **state)
{
    (void)state;
    fake_backing b = {0};
    clrun__allocator_config c = config_for(&clrun_strategy_slab, &b);
    clrun__allocator *a = make(&c);
    clrun_block x;
    char err[512] = "";
    assert_int_equal(clrun__allocator_alloc(a, 100, 3 * 256, &x, err, sizeof err), CLRUN_ERROR_INVALID_ALIGNMENT);
    assert_int_equal(clrun__allocator_alloc(a, 100, 2 * GiB, &x, err, sizeof err), CLRUN_ERROR_INVALID_ALIGNMENT);
    assert_non_null(strstr(err, "alignment"));
    clrun__allocator_destroy(a);
}

static void a_large_alignment_is_honoured(void **state)
{
    (void)state;
    for (size_t s = 0; s < STRATEGY_COUNT; s++) {
        fake_backing b = {0};
        clrun__allocator_config c = config_for(all_strategies[s], &b);
        clrun__allocator *a = make(&c);
        for (int i = 0; i < 8; i++) {
            clrun_block x;
            char err[1536];
            uint64_t align = i % 2 ? 64 * KiB : 4 * KiB;
            assert_int_equal(clrun__allocator_alloc(a, 1000 + (uint64_t)i * 100, align, &x, err, sizeof err), CLRUN_OK);
            assert_int_equal(x.offset % align, 0);
        }
        clrun__allocator_destroy(a);
    }
}

static void an_invalid_configuration_is_refused(void **state)
{
    (void)state;
    fake_backing b = {0};
    clrun__allocator_config c = config_for(&clrun_strategy_buddy, &b);
    c.min_align = 384;
    clrun__allocator *a = (clrun__allocator *)&a;
    char err[256] = "";
    assert_int_equal(clrun__allocator_create(&c, &a, err, sizeof err), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_null(a);
    assert_non_null(strstr(err, "384"));
}

/* ---- destroy ---- */

static void destroy_gives_every_chunk_back(void **state)
{
    (void)state;
    for (size_t s = 0; s < STRATEGY_COUNT; s++) {
        fake_backing b = {0};
        clrun__allocator_config c = config_for(all_strategies[s], &b);
        c.max_chunk = 2 * MiB;
        clrun__allocator *a = make(&c);
        for (int i = 0; i < 20; i++) { /* live blocks in several chunks */
            clrun_block x;
            assert_int_equal(alloc(a, 300 * KiB + (uint64_t)i * 1000, &x), CLRUN_OK);
        }
        assert_true(b.granted >= 3);
        clrun__allocator_destroy(a);
        assert_int_equal(b.release_calls, b.granted);
        assert_int_equal(b.held, 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_small_request_reserves_a_small_chunk),
        cmocka_unit_test(a_request_above_the_minimum_chunk_gets_a_chunk_that_holds_it),
        cmocka_unit_test(a_full_pool_grows_by_at_least_a_64th_of_what_is_reserved),
        cmocka_unit_test(a_pool_holding_free_fragments_grows_by_at_least_a_16th),
        cmocka_unit_test(reserved_stays_close_to_what_is_held),
        cmocka_unit_test(empty_chunks_are_given_back_and_merged_into_the_new_chunk),
        cmocka_unit_test(buddy_chunks_are_what_was_asked_rounded_to_the_atom),
        cmocka_unit_test(no_chunk_is_larger_than_the_device_maximum),
        cmocka_unit_test(a_ten_mib_workload_does_not_reserve_a_gib),
        cmocka_unit_test(the_limit_is_never_exceeded_and_then_out_of_memory),
        cmocka_unit_test(the_last_chunk_shrinks_to_what_the_limit_leaves),
        cmocka_unit_test(when_the_device_refuses_it_asks_again_for_just_the_request),
        cmocka_unit_test(it_retries_only_once),
        cmocka_unit_test(a_refusal_leaves_the_allocator_usable),
        cmocka_unit_test(a_backing_error_other_than_out_of_memory_is_returned_with_its_message),
        cmocka_unit_test(out_of_memory_says_what_was_asked_in_use_reserved_largest_free_limit_and_strategy),
        cmocka_unit_test(out_of_memory_after_growing_still_gives_a_defined_message),
        cmocka_unit_test(statistics_count_bytes_blocks_and_peaks),
        cmocka_unit_test(resetting_peaks_starts_them_from_the_current_values),
        cmocka_unit_test(trim_gives_back_only_empty_chunks),
        cmocka_unit_test(preallocate_reserves_up_to_the_target_in_device_sized_chunks),
        cmocka_unit_test(size_zero_is_an_invalid_size),
        cmocka_unit_test(a_size_above_the_device_maximum_is_an_invalid_size),
        cmocka_unit_test(an_alignment_that_is_not_a_power_of_two_is_invalid),
        cmocka_unit_test(a_large_alignment_is_honoured),
        cmocka_unit_test(an_invalid_configuration_is_refused),
        cmocka_unit_test(destroy_gives_every_chunk_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
