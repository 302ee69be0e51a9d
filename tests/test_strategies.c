/* Tests of the allocator strategies (strategies/): each behaviour of the contract in
 * include/clrun/strategy.h, run against every shipped strategy, then a randomized property test
 * per strategy that checks a million operations against a reference model (an interval set).
 *
 * The random seed comes from CLRUN_TEST_SEED, else from the clock; it is printed at the start
 * and with every failure, so `CLRUN_TEST_SEED=<seed> tests/test_strategies` replays a failure.
 * CLRUN_TEST_QUICK=1 runs a tenth of the random operations. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include <clrun/strategy.h>

#include "rng.h"

#define KiB (UINT64_C(1) << 10)
#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)

static uint64_t seed;     /* the seed of this run, printed with failures */
static uint64_t rng;      /* splitmix64 state */
static uint64_t op_index; /* the current operation of a property test, printed with failures */

static uint64_t rand64(void) { return rng_next(&rng); }

/* Uniform in [lo, hi]. */
static uint64_t rand_range(uint64_t lo, uint64_t hi) { return rng_range(&rng, lo, hi); }

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            print_error("check failed: %s at %s:%d (CLRUN_TEST_SEED=%llu, op %llu)\n", #cond,      \
                        __FILE__, __LINE__, (unsigned long long)seed,                              \
                        (unsigned long long)op_index);                                             \
            fail();                                                                                \
        }                                                                                          \
    } while (0)

/* ---- helpers -------------------------------------------------------------------------------- */

static const clrun_strategy_ops *ops_of(void **state)
{
    return *state;
}

static void *make(const clrun_strategy_ops *ops, uint64_t min_align, uint64_t max_chunk)
{
    clrun_strategy_config config = {.min_align = min_align, .max_chunk = max_chunk};
    void *st = NULL;
    assert_int_equal(ops->create(&config, &st), CLRUN_OK);
    assert_non_null(st);
    return st;
}

static clrun_strategy_stats stats_of(const clrun_strategy_ops *ops, void *st)
{
    clrun_strategy_stats s;
    memset(&s, 0, sizeof s);
    ops->stats(st, &s);
    return s;
}

static bool stats_equal(clrun_strategy_stats a, clrun_strategy_stats b)
{
    return a.held_bytes == b.held_bytes && a.free_bytes == b.free_bytes &&
           a.largest_free == b.largest_free && a.live_blocks == b.live_blocks &&
           a.chunks == b.chunks;
}

/* After an OUT_OF_MEMORY answer: slab may have returned its cached empty slabs to the free
 * pages before giving up, which can only make largest_free grow. */
static bool stats_unchanged_by_oom(const clrun_strategy_ops *ops, clrun_strategy_stats a,
                                   clrun_strategy_stats b)
{
    if (strcmp(ops->name, "slab") == 0 && b.largest_free >= a.largest_free)
        a.largest_free = b.largest_free;
    return stats_equal(a, b);
}

/* A strategy with one 16 MiB chunk (id 1) and min_align 256. */
static void *make_with_chunk(const clrun_strategy_ops *ops)
{
    void *st = make(ops, 256, GiB);
    assert_int_equal(ops->add_chunk(st, 1, 16 * MiB), CLRUN_OK);
    return st;
}

/* ---- behaviours shared by every strategy ---------------------------------------------------- */

static void test_create_rejects_min_align_not_power_of_two(void **state)
{
    const clrun_strategy_ops *ops = ops_of(state);
    void *st = NULL;
    clrun_strategy_config bad[] = {{.min_align = 0, .max_chunk = GiB},
                                   {.min_align = 3, .max_chunk = GiB},
                                   {.min_align = 768, .max_chunk = GiB}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(ops->create(&bad[i], &st), CLRUN_ERROR_INVALID_ALIGNMENT);
}

static void test_destroy_accepts_null(void **state)
{
    ops_of(state)->destroy(NULL);
}

static void test_alloc_of_huge_size_is_out_of_memory(void **state)
{
    const clrun_strategy_ops *ops = ops_of(state);
    void *st = make_with_chunk(ops);
    clrun_strategy_stats before = stats_of(ops, st);
    uint64_t huge[] = {SIZE_MAX,           UINT64_MAX,      UINT64_MAX - 255,
                       UINT64_C(1) << 63,  (UINT64_C(1) << 63) + 1, (UINT64_C(1) << 63) - 1,
                       16 * MiB + 1,       32 * MiB};
    clrun_block b;
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        assert_int_equal(ops->alloc(st, huge[i], 1, &b), CLRUN_ERROR_OUT_OF_MEMORY);
        assert_true(stats_unchanged_by_oom(ops, before, stats_of(ops, st)));
        assert_int_equal(ops->alloc(st, huge[i], UINT64_C(1) << 63, &b),
                         CLRUN_ERROR_OUT_OF_MEMORY);
    }
    assert_true(stats_equal(before, stats_of(ops, st)));
    /* Alignment 2^63 inside a 16 MiB chunk: only offset 0 qualifies. */
    clrun_status rc = ops->alloc(st, 1, UINT64_C(1) << 63, &b);
    assert_true(rc == CLRUN_ERROR_OUT_OF_MEMORY || (rc == CLRUN_OK && b.offset == 0));
    ops->destroy(st);
}

static void test_alloc_without_chunks_is_out_of_memory(void **state)
{
    const clrun_strategy_ops *ops = ops_of(state);
    void *st = make(ops, 256, GiB);
    clrun_block b;
    assert_int_equal(ops->alloc(st, 1, 1, &b), CLRUN_ERROR_OUT_OF_MEMORY);
    ops->destroy(st);
}

static void test_alloc_fills_block_inside_its_chunk(void **state)
{
    const clrun_strategy_ops *ops = ops_of(state);
    void *st = make_with_chunk(ops);
    clrun_block b;
    assert_int_equal(ops->alloc(st, 1000, 1, &b), CLRUN_OK);
    assert_int_equal(b.chunk, 1);
    assert_true(b.size >= 1000);
    assert_true(b.offset + b.size <= 16 * MiB);
    assert_int_equal(b.offset % 256, 0);
    clrun_strategy_stats s = stats_of(ops, st);
    assert_int_equal(s.live_blocks, 1);
    assert_int_equal(s.held_bytes, b.size);
    assert_int_equal(s.chunks, 1);
    ops->destroy(st);
}

static void test_alloc_honors_alignment_above_min_align(void **state)
{
    const clrun_strategy_ops *ops = ops_of(state);
    void *st = make_with_chunk(ops);
    clrun_block b;
    /* Allocate small blocks between aligned ones so that a misaligned offset would show. */
    for (uint64_t align = 1; align <= MiB; align *= 2) {
        assert_int_equal(ops->alloc(st, 100, 1, &b), CLRUN_OK);
        assert_int_equal(ops->alloc(st, 300, align, &b), CLRUN_OK);
        assert_int_equal(b.offset % (align > 256 ? align : 256), 0);
        assert_true(b.size >= 300);
    }
    ops->destroy(st);
}

static void test_double_free_is_invalid_and_changes_nothing(void **state)
{
    const clrun_strategy_ops *ops = ops_of(state);
    void *st = make_with_chunk(ops);
    clrun_block a, b;
    assert_int_equal(ops->alloc(st, 4096, 1, &a), CLRUN_OK);
    assert_int_equal(ops->alloc(st, 4096, 1, &b), CLRUN_OK);
    assert_int_equal(ops->free(st, a.chunk, a.offset), CLRUN_OK);
    clrun_strategy_stats before = stats_of(ops, st);
    assert_int_equal(ops->free(st, a.chunk, a.offset), CLRUN_ERROR_INVALID_FREE);
    assert_true(stats_equal(before, stats_of(ops, st)));
    assert_int_equal(ops->free(st, b.chunk, b.offset), CLRUN_OK);
    assert_int_equal(ops->free(st, b.chunk, b.offset), CLRUN_ERROR_INVALID_FREE);
    ops->destroy(st);
}

static void test_free_in_unknown_chunk_is_invalid(void **state)
{
    const clrun_strategy_ops *ops = ops_of(state);
    void *st = make_with_chunk(ops);
    clrun_block b;
    assert_int_equal(ops->alloc(st, 4096, 1, &b), CLRUN_OK);
    clrun_strategy_stats before = stats_of(ops, st);
    assert_int_equal(ops->free(st, 2, b.offset), CLRUN_ERROR_INVALID_FREE);
    assert_int_equal(ops->free(st, UINT32_MAX, b.offset), CLRUN_ERROR_INVALID_FREE);
    assert_true(stats_equal(before, stats_of(ops, st)));
    assert_int_equal(ops->free(st, b.chunk, b.offset), CLRUN_OK);
    ops->destroy(st);
}

static void test_free_of_interior_offset_is_invalid(void **state)
{
    const clrun_strategy_ops *ops = ops_of(state);
    void *st = make_with_chunk(ops);
    uint64_t sizes[] = {300, 5000, 3 * MiB};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        clrun_block b;
        assert_int_equal(ops->alloc(st, sizes[i], 1, &b), CLRUN_OK);
        clrun_strategy_stats before = stats_of(ops, st);
        assert_int_equal(ops->free(st, b.chunk, b.offset + 1), CLRUN_ERROR_INVALID_FREE);
        assert_int_equal(ops->free(st, b.chunk, b.offset + 256), CLRUN_ERROR_INVALID_FREE);
        assert_int_equal(ops->free(st, b.chunk, b.offset + b.size / 2),
                         CLRUN_ERROR_INVALID_FREE);
        assert_true(stats_equal(before, stats_of(ops, st)));
    }
    ops->destroy(st);
}

static void test_free_of_never_allocated_offset_is_invalid(void **state)
{
    const clrun_strategy_ops *ops = ops_of(state);
    void *st = make_with_chunk(ops);
    clrun_block b;
    assert_int_equal(ops->alloc(st, 4096, 1, &b), CLRUN_OK);
    clrun_strategy_stats before = stats_of(ops, st);
    uint64_t bad[] = {8 * MiB, 16 * MiB - 256, 16 * MiB, 64 * MiB, UINT64_MAX,
                      UINT64_MAX - 255};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(ops->free(st, 1, bad[i]), CLRUN_ERROR_INVALID_FREE);
    assert_true(stats_equal(before, stats_of(ops, st)));
    ops->destroy(st);
}

static void test_remove_chunk_with_live_block_is_busy(void **state)
{
    const clrun_strategy_ops *ops = ops_of(state);
    void *st = make_with_chunk(ops);
    clrun_block b;
    assert_int_equal(ops->alloc(st, 4096, 1, &b), CLRUN_OK);
    assert_false(ops->chunk_is_empty(st, 1));
    clrun_strategy_stats before = stats_of(ops, st);
    assert_int_equal(ops->remove_chunk(st, 1), CLRUN_ERROR_BUSY);
    assert_true(stats_equal(before, stats_of(ops, st)));
    assert_int_equal(ops->free(st, b.chunk, b.offset), CLRUN_OK);
    assert_true(ops->chunk_is_empty(st, 1));
    assert_int_equal(ops->remove_chunk(st, 1), CLRUN_OK);
    assert_int_equal(stats_of(ops, st).chunks, 0);
    ops->destroy(st);
}

static void test_remove_unknown_chunk_is_invalid_argument(void **state)
{
    const clrun_strategy_ops *ops = ops_of(state);
    void *st = make_with_chunk(ops);
    assert_int_equal(ops->remove_chunk(st, 2), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(ops->remove_chunk(st, 1), CLRUN_OK);
    assert_int_equal(ops->remove_chunk(st, 1), CLRUN_ERROR_INVALID_ARGUMENT);
    ops->destroy(st);
}

static void test_add_chunk_with_id_in_use_is_invalid_argument(void **state)
{
    const clrun_strategy_ops *ops = ops_of(state);
    void *st = make_with_chunk(ops);
    assert_int_equal(ops->add_chunk(st, 1, 16 * MiB), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(stats_of(ops, st).chunks, 1);
    assert_int_equal(stats_of(ops, st).free_bytes, 16 * MiB);
    ops->destroy(st);
}

static void test_sparse_chunk_ids_are_kept_apart(void **state)
{
    const clrun_strategy_ops *ops = ops_of(state);
    void *st = make(ops, 256, GiB);
    uint32_t ids[] = {UINT32_MAX, 7, 1000000, 0};
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(ops->add_chunk(st, ids[i], MiB), CLRUN_OK);
    clrun_block b[4];
    for (size_t i = 0; i < 4; i++) /* each fills a whole chunk, so all four chunks serve one */
        assert_int_equal(ops->alloc(st, MiB, 1, &b[i]), CLRUN_OK);
    for (size_t i = 0; i < 4; i++)
        for (size_t j = i + 1; j < 4; j++)
            assert_int_not_equal(b[i].chunk, b[j].chunk);
    for (size_t i = 0; i < 4; i++) {
        assert_false(ops->chunk_is_empty(st, b[i].chunk));
        assert_int_equal(ops->free(st, b[i].chunk, b[i].offset), CLRUN_OK);
        assert_true(ops->chunk_is_empty(st, b[i].chunk));
    }
    ops->destroy(st);
}

static void test_reset_empties_every_chunk(void **state)
{
    const clrun_strategy_ops *ops = ops_of(state);
    void *st = make(ops, 256, GiB);
    assert_int_equal(ops->add_chunk(st, 1, 16 * MiB), CLRUN_OK);
    assert_int_equal(ops->add_chunk(st, 2, 16 * MiB), CLRUN_OK);
    clrun_block b;
    for (int i = 0; i < 100; i++)
        assert_int_equal(ops->alloc(st, (uint64_t)(i + 1) * 1000, 1, &b), CLRUN_OK);
    assert_int_equal(ops->alloc(st, 15 * MiB, 1, &b), CLRUN_OK);
    ops->reset(st);
    clrun_strategy_stats s = stats_of(ops, st);
    assert_int_equal(s.live_blocks, 0);
    assert_int_equal(s.held_bytes, 0);
    assert_int_equal(s.free_bytes, 32 * MiB);
    assert_int_equal(s.largest_free, 16 * MiB);
    assert_int_equal(s.chunks, 2);
    assert_true(ops->chunk_is_empty(st, 1));
    assert_true(ops->chunk_is_empty(st, 2));
    assert_int_equal(ops->free(st, b.chunk, b.offset), CLRUN_ERROR_INVALID_FREE);
    assert_int_equal(ops->alloc(st, 16 * MiB, 1, &b), CLRUN_OK); /* whole chunks are back */
    assert_int_equal(ops->alloc(st, 16 * MiB, 1, &b), CLRUN_OK);
    assert_int_equal(ops->remove_chunk(st, 1), CLRUN_ERROR_BUSY);
    ops->destroy(st);
}

/* reset gives every block back, a freed one held back for reuse too (slab's cache, tlsf's ghost):
 * frees of them are refused after it, and the whole chunk is one free block again. */
static void test_reset_forgets_every_block(void **state)
{
    const clrun_strategy_ops *ops = ops_of(state);
    void *st = make_with_chunk(ops);
    clrun_block a, b, whole;
    assert_int_equal(ops->alloc(st, MiB, 1, &a), CLRUN_OK);
    assert_int_equal(ops->alloc(st, 2 * MiB, 1, &b), CLRUN_OK);
    assert_int_equal(ops->free(st, a.chunk, a.offset), CLRUN_OK);
    ops->reset(st);
    assert_int_equal(stats_of(ops, st).largest_free, 16 * MiB);
    assert_int_equal(ops->free(st, a.chunk, a.offset), CLRUN_ERROR_INVALID_FREE);
    assert_int_equal(ops->free(st, b.chunk, b.offset), CLRUN_ERROR_INVALID_FREE);
    assert_int_equal(ops->alloc(st, 16 * MiB, 1, &whole), CLRUN_OK);
    assert_int_equal(whole.offset, 0);
    ops->destroy(st);
}

static void test_chunk_size_holds_the_request_within_max_chunk(void **state)
{
    const clrun_strategy_ops *ops = ops_of(state);
    const uint64_t max_chunk = 3 * GiB + 12345;
    void *probe = make(ops, 512, max_chunk);
    for (int i = 0; i < 300; i++) {
        uint64_t request = rand_range(1, UINT64_C(1) << rand_range(0, 31));
        uint64_t align = UINT64_C(1) << rand_range(0, 16);
        uint64_t wanted = request + rand_range(0, 64 * MiB);
        uint64_t cs = ops->chunk_size(probe, request, align, wanted);
        assert_true(cs >= request);
        assert_true(cs <= max_chunk);
        /* A fresh chunk of that size must serve the request. */
        void *st = make(ops, 512, max_chunk);
        clrun_block b;
        assert_int_equal(ops->add_chunk(st, 9, cs), CLRUN_OK);
        assert_int_equal(ops->alloc(st, request, align, &b), CLRUN_OK);
        assert_int_equal(b.offset % (align > 512 ? align : 512), 0);
        ops->destroy(st);
    }
    ops->destroy(probe);
}

static void test_chunk_size_is_zero_when_request_exceeds_max_chunk(void **state)
{
    const clrun_strategy_ops *ops = ops_of(state);
    void *st = make(ops, 256, 64 * MiB);
    assert_int_equal(ops->chunk_size(st, 64 * MiB + 1, 1, 64 * MiB + 1), 0);
    assert_int_equal(ops->chunk_size(st, UINT64_MAX, 1, UINT64_MAX), 0);
    assert_int_equal(ops->chunk_size(st, UINT64_C(1) << 63, 1, UINT64_C(1) << 63), 0);
    assert_true(ops->chunk_size(st, 64 * MiB, 1, UINT64_MAX) == 64 * MiB);
    ops->destroy(st);
}

/* ---- the reference model and the property test ---------------------------------------------- */

#define MODEL_MAX_CHUNKS 48

typedef struct interval {
    uint64_t offset, size;
} interval;

/* A chunk as the model sees it: its size and its live blocks, sorted by offset. */
typedef struct mchunk {
    uint32_t id;
    uint64_t size;
    interval *iv;
    size_t n, cap;
} mchunk;

typedef struct mlive {
    uint32_t chunk;
    uint64_t offset, size;
} mlive;

typedef struct model {
    const clrun_strategy_ops *ops;
    void *st;
    uint64_t min_align;
    uint64_t reserve_limit;          /* the model pool never reserves more than this */
    mchunk chunks[MODEL_MAX_CHUNKS];
    uint32_t nchunks;
    uint32_t next_id;                /* ids grow with random gaps: sparse */
    mlive *live;
    size_t nlive, cap;
    uint64_t total, held;
    uint64_t chunks_added, chunks_removed, ooms, drains, resets; /* for the summary line */
} model;

static mchunk *model_chunk(model *m, uint32_t id)
{
    for (uint32_t i = 0; i < m->nchunks; i++)
        if (m->chunks[i].id == id)
            return &m->chunks[i];
    return NULL;
}

/* Position of the first interval with offset >= `offset`. */
static size_t interval_lower_bound(const mchunk *c, uint64_t offset)
{
    size_t lo = 0, hi = c->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->iv[mid].offset < offset)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Adds a block to the model, checking that it overlaps no live block. */
static void model_insert(model *m, mchunk *c, uint64_t offset, uint64_t size)
{
    size_t at = interval_lower_bound(c, offset);
    CHECK(at == c->n || c->iv[at].offset >= offset + size);
    CHECK(at == 0 || c->iv[at - 1].offset + c->iv[at - 1].size <= offset);
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 64;
        c->iv = realloc(c->iv, c->cap * sizeof *c->iv);
        assert_non_null(c->iv);
    }
    memmove(c->iv + at + 1, c->iv + at, (c->n - at) * sizeof *c->iv);
    c->iv[at] = (interval){offset, size};
    c->n++;
    if (m->nlive == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 1024;
        m->live = realloc(m->live, m->cap * sizeof *m->live);
        assert_non_null(m->live);
    }
    m->live[m->nlive++] = (mlive){c->id, offset, size};
    m->held += size;
}

/* Drops live block i from the model (swap with the last). */
static void model_remove(model *m, size_t i)
{
    mlive b = m->live[i];
    mchunk *c = model_chunk(m, b.chunk);
    size_t at = interval_lower_bound(c, b.offset);
    CHECK(at < c->n && c->iv[at].offset == b.offset);
    memmove(c->iv + at, c->iv + at + 1, (c->n - at - 1) * sizeof *c->iv);
    c->n--;
    m->live[i] = m->live[--m->nlive];
    m->held -= b.size;
}

/* Bytes the strategy can still hand out, as the model predicts it. Buddy and slab: every byte
 * no live block covers. Bump: only the bytes above each chunk's highest live block. */
static uint64_t model_free_bytes(const model *m)
{
    if (strcmp(m->ops->name, "bump") != 0)
        return m->total - m->held;
    uint64_t free_bytes = 0;
    for (uint32_t i = 0; i < m->nchunks; i++) {
        const mchunk *c = &m->chunks[i];
        uint64_t top = c->n ? c->iv[c->n - 1].offset + c->iv[c->n - 1].size : 0;
        free_bytes += c->size - top;
    }
    return free_bytes;
}

/* Whether strategy `name` is exact: its largest_free is the largest gap between live blocks, and
 * it answers OUT_OF_MEMORY only when no gap holds the request (tlsf; buddy and slab have
 * structure that can leave a gap unusable, bump never reuses gaps below its top). */
static bool model_is_exact(const model *m)
{
    return strcmp(m->ops->name, "tlsf") == 0;
}

/* Whether some gap between live blocks (or a chunk's ends) holds `size` bytes at an offset that
 * is a multiple of `align`; *largest (may be NULL) gets the largest gap. */
static bool model_gap_fits(const model *m, uint64_t size, uint64_t align, uint64_t *largest)
{
    bool fits = false;
    uint64_t best = 0;
    for (uint32_t i = 0; i < m->nchunks; i++) {
        const mchunk *c = &m->chunks[i];
        uint64_t usable = c->size / m->min_align * m->min_align;
        for (size_t k = 0; k <= c->n; k++) {
            uint64_t from = k ? c->iv[k - 1].offset + c->iv[k - 1].size : 0;
            uint64_t to = k < c->n ? c->iv[k].offset : usable;
            if (to - from > best)
                best = to - from;
            uint64_t at = (from + align - 1) / align * align;
            if (at >= from && at <= to && to - at >= size)
                fits = true;
        }
    }
    if (largest)
        *largest = best;
    return fits;
}

static void model_check_stats(const model *m)
{
    clrun_strategy_stats s = stats_of(m->ops, m->st);
    CHECK(s.live_blocks == m->nlive);
    CHECK(s.held_bytes == m->held);
    CHECK(s.chunks == m->nchunks);
    CHECK(s.free_bytes == model_free_bytes(m));
    CHECK(s.largest_free <= s.free_bytes);
    if (model_is_exact(m)) {
        uint64_t largest;
        model_gap_fits(m, 1, 1, &largest);
        CHECK(s.largest_free == largest);
    }
}

/* A request size: mostly small, some near powers of two, a few large. */
static uint64_t random_size(void)
{
    uint64_t r = rand64() % 100;
    if (r < 45)
        return rand_range(1, 1024);
    if (r < 70)
        return rand_range(1025, 64 * KiB);
    if (r < 85) {
        uint64_t p = UINT64_C(1) << rand_range(0, 22);
        uint64_t s = p + rand_range(0, 2) - 1;
        return s ? s : 1;
    }
    if (r < 97)
        return rand_range(64 * KiB, 2 * MiB);
    return rand_range(2 * MiB, 32 * MiB);
}

static uint64_t random_align(void)
{
    return rand64() % 100 < 60 ? 1 : UINT64_C(1) << rand_range(0, 16);
}

/* Adds a chunk for a failed request, growing like the pool does; false when at the limit. */
static bool model_grow(model *m, uint64_t size, uint64_t align)
{
    uint64_t wanted = size;
    if (m->total / 2 > wanted)
        wanted = m->total / 2;
    if (MiB > wanted)
        wanted = MiB;
    uint64_t cs = m->ops->chunk_size(m->st, size, align, wanted);
    CHECK(cs >= size);
    if (m->nchunks == MODEL_MAX_CHUNKS || m->total + cs > m->reserve_limit)
        return false;
    uint32_t id = m->next_id;
    m->next_id += 1 + (uint32_t)rand_range(0, 1000);
    CHECK(m->ops->add_chunk(m->st, id, cs) == CLRUN_OK);
    m->chunks[m->nchunks++] = (mchunk){.id = id, .size = cs};
    m->total += cs;
    m->chunks_added++;
    return true;
}

static void model_alloc(model *m)
{
    uint64_t size = random_size(), align = random_align();
    clrun_strategy_stats before = stats_of(m->ops, m->st);
    clrun_block b;
    clrun_status rc = m->ops->alloc(m->st, size, align, &b);
    if (rc == CLRUN_ERROR_OUT_OF_MEMORY) {
        CHECK(stats_unchanged_by_oom(m->ops, before, stats_of(m->ops, m->st)));
        uint64_t rounded = (size + m->min_align - 1) / m->min_align * m->min_align;
        CHECK(!model_is_exact(m) || rounded < size ||
              !model_gap_fits(m, rounded, align > m->min_align ? align : m->min_align, NULL));
        m->ooms++;
        if (!model_grow(m, size, align))
            return;
        rc = m->ops->alloc(m->st, size, align, &b); /* a fresh chunk from chunk_size() fits */
    }
    CHECK(rc == CLRUN_OK);
    mchunk *c = model_chunk(m, b.chunk);
    uint64_t need_align = align > m->min_align ? align : m->min_align;
    CHECK(c != NULL);
    CHECK(b.size >= size);
    CHECK(b.offset % need_align == 0);
    CHECK(b.offset <= c->size && b.size <= c->size - b.offset);
    model_insert(m, c, b.offset, b.size);
    CHECK(!m->ops->chunk_is_empty(m->st, b.chunk));
}

static void model_free(model *m, size_t i)
{
    mlive b = m->live[i];
    CHECK(m->ops->free(m->st, b.chunk, b.offset) == CLRUN_OK);
    model_remove(m, i);
    CHECK(m->ops->chunk_is_empty(m->st, b.chunk) == (model_chunk(m, b.chunk)->n == 0));
}

/* A free that must be refused with nothing changed: a double free, an interior offset, an
 * unknown chunk, or an offset past the end. */
static void model_bad_free(model *m)
{
    if (!m->nlive)
        return;
    mlive b = m->live[rand64() % m->nlive];
    clrun_strategy_stats before = stats_of(m->ops, m->st);
    uint32_t chunk = b.chunk;
    uint64_t offset = b.offset;
    switch (rand64() % 4) {
    case 0: /* interior: inside a live block, so no other block starts there */
        if (b.size < 2)
            return;
        offset += rand_range(1, b.size - 1);
        break;
    case 1:
        chunk = m->next_id; /* never added */
        break;
    case 2:
        offset = model_chunk(m, chunk)->size + rand_range(0, 1) * 4096;
        break;
    default: /* double free: free it properly, then once more */
        for (size_t j = 0; j < m->nlive; j++) {
            if (m->live[j].chunk == b.chunk && m->live[j].offset == b.offset) {
                model_free(m, j);
                break;
            }
        }
        before = stats_of(m->ops, m->st);
        break;
    }
    CHECK(m->ops->free(m->st, chunk, offset) == CLRUN_ERROR_INVALID_FREE);
    CHECK(stats_equal(before, stats_of(m->ops, m->st)));
}

/* A chunk with live blocks refuses removal, with nothing changed. */
static void model_busy_remove(model *m)
{
    for (uint32_t i = 0; i < m->nchunks; i++) {
        if (m->chunks[i].n) {
            clrun_strategy_stats before = stats_of(m->ops, m->st);
            CHECK(m->ops->remove_chunk(m->st, m->chunks[i].id) == CLRUN_ERROR_BUSY);
            CHECK(stats_equal(before, stats_of(m->ops, m->st)));
            return;
        }
    }
}

/* Checks the pool is empty: every chunk empty, nothing held, buddy and tlsf fully coalesced. */
static void model_check_empty(model *m)
{
    clrun_strategy_stats s = stats_of(m->ops, m->st);
    uint64_t largest_chunk = 0;
    for (uint32_t i = 0; i < m->nchunks; i++) {
        CHECK(m->ops->chunk_is_empty(m->st, m->chunks[i].id));
        if (m->chunks[i].size > largest_chunk)
            largest_chunk = m->chunks[i].size;
    }
    CHECK(s.live_blocks == 0);
    CHECK(s.held_bytes == 0);
    CHECK(s.free_bytes == m->total);
    if (strcmp(m->ops->name, "slab") != 0) /* slab may keep empty slabs cached */
        CHECK(s.largest_free == largest_chunk);
}

/* Removes about half of the (empty) chunks. */
static void model_shrink(model *m)
{
    for (uint32_t i = 0; i < m->nchunks;) {
        if (rand64() % 2) {
            i++;
            continue;
        }
        CHECK(m->ops->remove_chunk(m->st, m->chunks[i].id) == CLRUN_OK);
        m->total -= m->chunks[i].size;
        free(m->chunks[i].iv);
        m->chunks[i] = m->chunks[--m->nchunks];
        m->chunks_removed++;
    }
}

static void model_drain(model *m)
{
    while (m->nlive)
        model_free(m, rand64() % m->nlive);
    model_check_empty(m);
    model_shrink(m);
    model_check_stats(m);
    m->drains++;
}

static void model_reset(model *m)
{
    m->ops->reset(m->st);
    for (uint32_t i = 0; i < m->nchunks; i++)
        m->chunks[i].n = 0;
    m->nlive = 0;
    m->held = 0;
    model_check_empty(m);
    model_shrink(m);
    model_check_stats(m);
    m->resets++;
}

static uint64_t env_u64(const char *name, uint64_t fallback)
{
    const char *v = getenv(name);
    return v && *v ? strtoull(v, NULL, 0) : fallback;
}

static void test_random_operations_match_reference_model(void **state)
{
    const uint64_t ops_total = env_u64("CLRUN_TEST_QUICK", 0) ? 100000 : 1000000;
    const size_t target_live = 400;
    model m;
    memset(&m, 0, sizeof m);
    m.ops = ops_of(state);
    rng = seed ^ (uint64_t)(uintptr_t)m.ops->name[0]; /* each strategy its own stream */
    /* Mostly a device-like 256 B; sometimes byte-aligned or above the slab page. */
    static const uint64_t min_aligns[] = {256, 256, 1, 16, 4096, 128 * KiB};
    m.min_align = min_aligns[rand64() % 6];
    m.reserve_limit = 384 * MiB; /* tight enough that the pool fills and allocations fail */
    m.next_id = 1;
    m.st = make(m.ops, m.min_align, 128 * MiB);

    for (op_index = 0; op_index < ops_total; op_index++) {
        uint64_t r = rand64() % 100000;
        if (r < 3) {
            model_drain(&m);
        } else if (r < 4) {
            model_reset(&m);
        } else if (r < 150) {
            model_bad_free(&m);
        } else if (r < 160) {
            model_busy_remove(&m);
        } else {
            /* Keep the live set near its target; favour the newest block half of the time so
             * that stack-like lifetimes (what bump reclaims) are common. */
            bool grow = m.nlive < target_live ? rand64() % 100 < 60 : rand64() % 100 < 40;
            if (grow || !m.nlive)
                model_alloc(&m);
            else
                model_free(&m, rand64() % 2 ? m.nlive - 1 : rand64() % m.nlive);
        }
        model_check_stats(&m);
    }
    model_drain(&m);
    print_message("[   INFO   ] %s: min_align %llu, %llu ops, %llu chunks added, %llu removed, %llu OOM, %llu "
                  "drains, %llu resets\n",
                  m.ops->name, (unsigned long long)m.min_align, (unsigned long long)ops_total,
                  (unsigned long long)m.chunks_added, (unsigned long long)m.chunks_removed,
                  (unsigned long long)m.ooms, (unsigned long long)m.drains,
                  (unsigned long long)m.resets);
    for (uint32_t i = 0; i < m.nchunks; i++)
        free(m.chunks[i].iv);
    free(m.live);
    m.ops->destroy(m.st);
}

/* ---- buddy ---------------------------------------------------------------------------------- */

static uint64_t pow2_ceil(uint64_t x)
{
    uint64_t p = 1;
    while (p < x)
        p <<= 1;
    return p;
}

static void test_buddy_chunk_size_is_the_request_rounded_to_the_atom(void **state)
{
    (void)state;
    void *st = make(&clrun_strategy_buddy, 256, 3 * GiB);
    for (uint64_t request = 1; request < 3 * GiB; request = request * 3 + 1) {
        uint64_t cs = clrun_strategy_buddy.chunk_size(st, request, 1, request);
        uint64_t atom = request < 256 * MiB ? 256 : pow2_ceil(request) >> 20; /* < 2^21 atoms */
        assert_true(cs >= request && cs <= 3 * GiB && cs - request < atom + 256);
        assert_int_equal(cs % 256, 0);
    }
    assert_int_equal(clrun_strategy_buddy.chunk_size(st, 3 * GiB + 1, 1, 3 * GiB + 1), 0);
    assert_int_equal(clrun_strategy_buddy.chunk_size(st, MiB, 1, 4 * GiB), 3 * GiB);
    assert_int_equal(clrun_strategy_buddy.chunk_size(st, 100, 4096, 100), 4096); /* the alignment */
    clrun_strategy_buddy.destroy(st);
}

static void test_buddy_block_is_trimmed_to_the_atom_and_aligned_to_its_power_of_two(void **state)
{
    (void)state;
    const clrun_strategy_ops *ops = &clrun_strategy_buddy;
    void *st = make_with_chunk(ops);
    for (uint64_t size = 1; size <= MiB; size = size * 3 + 7) {
        clrun_block b;
        assert_int_equal(ops->alloc(st, size, 1, &b), CLRUN_OK);
        assert_int_equal(b.size, (size + 255) / 256 * 256);
        assert_int_equal(b.offset % pow2_ceil(b.size), 0);
    }
    ops->destroy(st);
}

static void test_buddy_trimmed_tail_serves_other_requests_and_merges_back(void **state)
{
    (void)state;
    const clrun_strategy_ops *ops = &clrun_strategy_buddy;
    void *st = make(ops, 256, GiB);
    assert_int_equal(ops->add_chunk(st, 1, 8 * 256), CLRUN_OK);
    clrun_block a, b, c, d;
    assert_int_equal(ops->alloc(st, 5 * 256 - 10, 1, &a), CLRUN_OK); /* 5 of 8 atoms: 4 + 1 */
    assert_int_equal(a.offset, 0);
    assert_int_equal(a.size, 5 * 256);
    assert_int_equal(stats_of(ops, st).free_bytes, 3 * 256);
    assert_int_equal(stats_of(ops, st).largest_free, 3 * 256); /* the tail: one run of 1 + 2 atoms */
    assert_int_equal(ops->alloc(st, 2 * 256, 1, &b), CLRUN_OK);
    assert_int_equal(b.offset, 6 * 256);
    assert_int_equal(ops->alloc(st, 1, 1, &c), CLRUN_OK);
    assert_int_equal(c.offset, 5 * 256);
    assert_int_equal(ops->alloc(st, 1, 1, &d), CLRUN_ERROR_OUT_OF_MEMORY);
    /* The second piece of a is no block of its own. */
    assert_int_equal(ops->free(st, 1, 4 * 256), CLRUN_ERROR_INVALID_FREE);
    assert_int_equal(ops->free(st, 1, b.offset), CLRUN_OK);
    assert_int_equal(ops->free(st, 1, a.offset), CLRUN_OK);
    assert_int_equal(ops->free(st, 1, a.offset), CLRUN_ERROR_INVALID_FREE); /* freed already */
    assert_int_equal(stats_of(ops, st).largest_free, 5 * 256); /* the run below c, which splits the upper half */
    assert_int_equal(ops->free(st, 1, c.offset), CLRUN_OK);
    assert_int_equal(stats_of(ops, st).largest_free, 8 * 256);
    assert_int_equal(ops->alloc(st, 8 * 256, 1, &d), CLRUN_OK); /* merged back whole */
    assert_int_equal(d.offset, 0);
    ops->destroy(st);
}

/* A trimmed block freed while a block of its tail is live: the pieces that cannot merge are
 * free blocks of their own, each one served whole, and none is a block to free. */
static void test_buddy_trimmed_block_freed_beside_its_live_tail_leaves_its_pieces_free(void **state)
{
    (void)state;
    const clrun_strategy_ops *ops = &clrun_strategy_buddy;
    void *st = make(ops, 256, GiB);
    assert_int_equal(ops->add_chunk(st, 3, 16 * 256), CLRUN_OK);
    clrun_block a, b, c, x, y, z;
    assert_int_equal(ops->alloc(st, 11 * 256, 1, &a), CLRUN_OK); /* 8 + 2 + 1; tail 1 + 4 */
    assert_int_equal(a.offset, 0);
    assert_int_equal(ops->alloc(st, 1, 1, &b), CLRUN_OK);
    assert_int_equal(b.offset, 11 * 256); /* the tail's atom */
    assert_int_equal(ops->alloc(st, 4 * 256, 1, &c), CLRUN_OK);
    assert_int_equal(c.offset, 12 * 256);
    assert_int_equal(ops->free(st, 3, 8 * 256), CLRUN_ERROR_INVALID_FREE); /* a piece of a */
    assert_int_equal(ops->free(st, 3, a.offset), CLRUN_OK);
    assert_int_equal(ops->free(st, 3, c.offset), CLRUN_OK); /* a merges now, as far as b lets it */
    assert_int_equal(stats_of(ops, st).free_bytes, 15 * 256);
    assert_int_equal(stats_of(ops, st).largest_free, 11 * 256); /* the run below b */
    assert_int_equal(ops->alloc(st, 2 * 256, 1, &x), CLRUN_OK);
    assert_int_equal(x.offset, 8 * 256); /* a's second piece, a block of its own */
    assert_int_equal(ops->alloc(st, 8 * 256, 1, &y), CLRUN_OK);
    assert_int_equal(y.offset, 0);
    assert_int_equal(ops->alloc(st, 1, 1, &z), CLRUN_OK);
    assert_int_equal(z.offset, 10 * 256);
    clrun_block all[] = {x, y, z, b};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        assert_int_equal(ops->free(st, 3, all[i].offset), CLRUN_OK);
    assert_int_equal(stats_of(ops, st).largest_free, 16 * 256);
    assert_int_equal(ops->alloc(st, 16 * 256, 1, &a), CLRUN_OK); /* merged back whole */
    assert_int_equal(a.offset, 0);
    ops->destroy(st);
}

/* Chunk ids on both sides of the table buddy finds small ids in, and ids past its end. */
static void test_buddy_chunk_ids_below_and_above_its_id_table(void **state)
{
    (void)state;
    const clrun_strategy_ops *ops = &clrun_strategy_buddy;
    void *st = make(ops, 256, GiB);
    const uint32_t ids[] = {65535, 65536, 40, 70000, 1};
    clrun_block b[5];
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(ops->add_chunk(st, ids[i], 4 * KiB), CLRUN_OK);
        assert_int_equal(ops->add_chunk(st, ids[i], 4 * KiB), CLRUN_ERROR_INVALID_ARGUMENT);
    }
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(ops->alloc(st, 4 * KiB, 1, &b[i]), CLRUN_OK);
        assert_false(ops->chunk_is_empty(st, b[i].chunk));
    }
    const uint32_t absent[] = {0, 2, 39, 41, 65534, 65537, 69999, 70001};
    for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++)
        assert_int_equal(ops->free(st, absent[i], 0), CLRUN_ERROR_INVALID_FREE);
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(ops->free(st, b[i].chunk, b[i].offset), CLRUN_OK);
        assert_int_equal(ops->remove_chunk(st, b[i].chunk), CLRUN_OK);
        assert_int_equal(ops->free(st, b[i].chunk, b[i].offset), CLRUN_ERROR_INVALID_FREE);
    }
    assert_int_equal(stats_of(ops, st).chunks, 0);
    ops->destroy(st);
}

static void test_buddy_coalesces_fully_when_empty(void **state)
{
    (void)state;
    const clrun_strategy_ops *ops = &clrun_strategy_buddy;
    void *st = make_with_chunk(ops);
    clrun_block b[64];
    for (int i = 0; i < 64; i++)
        assert_int_equal(ops->alloc(st, 256 * KiB, 1, &b[i]), CLRUN_OK);
    assert_int_equal(stats_of(ops, st).largest_free, 0);
    for (int i = 0; i < 64; i += 2) /* every other block: nothing can merge yet */
        assert_int_equal(ops->free(st, b[i].chunk, b[i].offset), CLRUN_OK);
    assert_int_equal(stats_of(ops, st).largest_free, 256 * KiB);
    for (int i = 1; i < 64; i += 2)
        assert_int_equal(ops->free(st, b[i].chunk, b[i].offset), CLRUN_OK);
    assert_int_equal(stats_of(ops, st).largest_free, 16 * MiB);
    ops->destroy(st);
}

static void test_buddy_chunk_not_power_of_two_is_cut_in_powers_of_two(void **state)
{
    (void)state;
    const clrun_strategy_ops *ops = &clrun_strategy_buddy;
    void *st = make(ops, 256, GiB);
    assert_int_equal(ops->add_chunk(st, 1, 12 * MiB + 100), CLRUN_OK);
    assert_int_equal(stats_of(ops, st).largest_free, 12 * MiB); /* empty: all of it */
    clrun_block a, b, c;
    assert_int_equal(ops->alloc(st, 8 * MiB, 1, &a), CLRUN_OK);
    assert_int_equal(ops->alloc(st, 4 * MiB, 1, &b), CLRUN_OK);
    assert_int_equal(a.offset, 0);
    assert_int_equal(b.offset, 8 * MiB);
    assert_int_equal(ops->alloc(st, 256, 1, &c), CLRUN_ERROR_OUT_OF_MEMORY); /* 100 B tail */
    assert_int_equal(ops->free(st, 1, a.offset), CLRUN_OK);
    assert_int_equal(stats_of(ops, st).largest_free, 8 * MiB); /* the top blocks never merge */
    assert_int_equal(ops->alloc(st, 9 * MiB, 1, &c), CLRUN_ERROR_OUT_OF_MEMORY);
    assert_int_equal(ops->free(st, 1, b.offset), CLRUN_OK);
    assert_int_equal(stats_of(ops, st).largest_free, 12 * MiB);
    ops->destroy(st);
}

static void test_buddy_empty_chunk_takes_a_request_larger_than_its_top_block(void **state)
{
    (void)state;
    const clrun_strategy_ops *ops = &clrun_strategy_buddy;
    void *st = make(ops, 256, GiB);
    assert_int_equal(ops->add_chunk(st, 1, 12 * MiB), CLRUN_OK); /* 8 + 4 */
    clrun_block a, b, c;
    assert_int_equal(ops->alloc(st, 11 * MiB + 1, 1, &a), CLRUN_OK); /* 8 + 2 + 1 + an atom */
    assert_int_equal(a.offset, 0);
    assert_int_equal(a.size, 11 * MiB + 256);
    assert_int_equal(stats_of(ops, st).free_bytes, MiB - 256);
    assert_int_equal(ops->free(st, 1, 8 * MiB), CLRUN_ERROR_INVALID_FREE); /* a piece of a */
    assert_int_equal(ops->alloc(st, 512 * KiB, 1, &b), CLRUN_OK);        /* from its tail */
    assert_true(b.offset >= 11 * MiB + 256 && b.offset + b.size <= 12 * MiB);
    assert_int_equal(ops->free(st, 1, a.offset), CLRUN_OK);
    assert_int_equal(ops->alloc(st, 11 * MiB + 512 * KiB + 1, 1, &c), CLRUN_ERROR_OUT_OF_MEMORY); /* b */
    assert_int_equal(ops->alloc(st, 11 * MiB + 512 * KiB, 1, &c), CLRUN_OK); /* the run below b */
    assert_int_equal(c.offset, 0);
    assert_int_equal(ops->free(st, 1, 11 * MiB), CLRUN_ERROR_INVALID_FREE); /* a piece of c */
    assert_int_equal(ops->free(st, 1, c.offset), CLRUN_OK);
    assert_int_equal(ops->free(st, 1, b.offset), CLRUN_OK);
    assert_int_equal(stats_of(ops, st).largest_free, 12 * MiB);
    assert_int_equal(ops->alloc(st, 12 * MiB, 1, &c), CLRUN_OK);
    assert_int_equal(c.offset, 0);
    assert_int_equal(ops->free(st, 1, c.offset), CLRUN_OK);
    ops->destroy(st);
}

/* ---- slab ----------------------------------------------------------------------------------- */

static void test_slab_small_classes_waste_at_most_an_eighth(void **state)
{
    (void)state;
    const clrun_strategy_ops *ops = &clrun_strategy_slab;
    void *st = make(ops, 16, GiB);
    assert_int_equal(ops->add_chunk(st, 1, 256 * MiB), CLRUN_OK);
    for (uint64_t size = 128; size <= 4 * MiB; size += 1 + size / 61) {
        clrun_block b;
        assert_int_equal(ops->alloc(st, size, 1, &b), CLRUN_OK);
        assert_true(b.size >= size);
        assert_true(b.size - size <= size / 8);
        assert_int_equal(ops->free(st, b.chunk, b.offset), CLRUN_OK);
    }
    ops->destroy(st);
}

static void test_slab_empty_slabs_return_to_the_chunk(void **state)
{
    (void)state;
    const clrun_strategy_ops *ops = &clrun_strategy_slab;
    void *st = make_with_chunk(ops);
    static clrun_block b[20000];
    size_t n = 0;
    uint64_t sizes[] = {256, 1000, 4096, 20000, 100000};
    for (size_t i = 0; i < 20000; i++)
        if (ops->alloc(st, sizes[i % 5], 1, &b[n]) == CLRUN_OK)
            n++;
    assert_true(n > 100);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(ops->free(st, b[i].chunk, b[i].offset), CLRUN_OK);
    clrun_block whole;
    assert_int_equal(ops->alloc(st, 16 * MiB, 1, &whole), CLRUN_OK);
    assert_int_equal(whole.offset, 0);
    ops->destroy(st);
}

static void test_slab_large_request_shares_the_chunks(void **state)
{
    (void)state;
    const clrun_strategy_ops *ops = &clrun_strategy_slab;
    void *st = make_with_chunk(ops);
    clrun_block small, large;
    assert_int_equal(ops->alloc(st, 300, 1, &small), CLRUN_OK);
    assert_int_equal(ops->alloc(st, 5 * MiB, 4 * MiB, &large), CLRUN_OK);
    assert_int_equal(large.chunk, 1);
    assert_int_equal(large.offset % (4 * MiB), 0);
    assert_true(large.size >= 5 * MiB && large.size < 5 * MiB + MiB / 8);
    ops->destroy(st);
}

static void test_slab_freed_large_block_is_taken_back_by_the_same_size(void **state)
{
    (void)state;
    const clrun_strategy_ops *ops = &clrun_strategy_slab;
    void *st = make_with_chunk(ops);
    clrun_block a, b;
    assert_int_equal(ops->alloc(st, MiB, 1, &a), CLRUN_OK);
    assert_int_equal(ops->free(st, a.chunk, a.offset), CLRUN_OK);
    assert_int_equal(ops->alloc(st, MiB, 1, &b), CLRUN_OK);
    assert_int_equal(b.chunk, a.chunk);
    assert_int_equal(b.offset, a.offset);
    assert_int_equal(b.size, a.size);
    ops->destroy(st);
}

static void test_slab_freed_large_block_counts_as_merged(void **state)
{
    (void)state;
    const clrun_strategy_ops *ops = &clrun_strategy_slab;
    void *st = make_with_chunk(ops);
    clrun_block a, b, c, whole;
    assert_int_equal(ops->alloc(st, MiB, 1, &a), CLRUN_OK);
    assert_int_equal(ops->alloc(st, MiB, 1, &b), CLRUN_OK);
    assert_int_equal(ops->alloc(st, MiB, 1, &c), CLRUN_OK);
    assert_int_equal(ops->free(st, a.chunk, a.offset), CLRUN_OK);
    assert_int_equal(ops->free(st, c.chunk, c.offset), CLRUN_OK); /* merges with the tail */
    assert_int_equal(stats_of(ops, st).largest_free, 14 * MiB);
    assert_int_equal(ops->free(st, b.chunk, b.offset), CLRUN_OK);
    assert_true(ops->chunk_is_empty(st, 1));
    clrun_strategy_stats s = stats_of(ops, st);
    assert_int_equal(s.largest_free, 16 * MiB);
    assert_int_equal(s.free_bytes, 16 * MiB);
    assert_int_equal(s.held_bytes, 0);
    assert_int_equal(s.live_blocks, 0);
    assert_int_equal(ops->free(st, b.chunk, b.offset), CLRUN_ERROR_INVALID_FREE); /* double */
    assert_int_equal(ops->alloc(st, 16 * MiB, 1, &whole), CLRUN_OK); /* needs the merge */
    assert_int_equal(whole.offset, 0);
    assert_int_equal(ops->free(st, whole.chunk, whole.offset), CLRUN_OK);
    assert_int_equal(ops->remove_chunk(st, 1), CLRUN_OK);
    assert_int_equal(stats_of(ops, st).free_bytes, 0);
    ops->destroy(st);
}

/* ---- bump ----------------------------------------------------------------------------------- */

static void test_bump_lifo_frees_lower_the_top(void **state)
{
    (void)state;
    const clrun_strategy_ops *ops = &clrun_strategy_bump;
    void *st = make_with_chunk(ops);
    clrun_block a, b, c, d;
    assert_int_equal(ops->alloc(st, 1000, 1, &a), CLRUN_OK);
    assert_int_equal(ops->alloc(st, 1000, 1, &b), CLRUN_OK);
    assert_int_equal(ops->alloc(st, 1000, 1, &c), CLRUN_OK);
    assert_int_equal(ops->free(st, c.chunk, c.offset), CLRUN_OK);
    assert_int_equal(ops->free(st, b.chunk, b.offset), CLRUN_OK);
    assert_int_equal(ops->alloc(st, 1000, 1, &d), CLRUN_OK);
    assert_int_equal(d.offset, b.offset);
    ops->destroy(st);
}

static void test_bump_inner_free_is_held_until_the_blocks_above_go(void **state)
{
    (void)state;
    const clrun_strategy_ops *ops = &clrun_strategy_bump;
    void *st = make_with_chunk(ops);
    clrun_block a, b, c;
    assert_int_equal(ops->alloc(st, 1 * MiB, 1, &a), CLRUN_OK);
    assert_int_equal(ops->alloc(st, 1 * MiB, 1, &b), CLRUN_OK);
    assert_int_equal(ops->alloc(st, 1 * MiB, 1, &c), CLRUN_OK);
    assert_int_equal(ops->free(st, a.chunk, a.offset), CLRUN_OK);
    assert_int_equal(ops->free(st, b.chunk, b.offset), CLRUN_OK);
    clrun_strategy_stats s = stats_of(ops, st);
    assert_int_equal(s.held_bytes, 1 * MiB);
    assert_int_equal(s.free_bytes, 13 * MiB); /* a and b are stranded below c */
    assert_int_equal(ops->free(st, c.chunk, c.offset), CLRUN_OK);
    s = stats_of(ops, st);
    assert_int_equal(s.free_bytes, 16 * MiB); /* c popped, and a and b under it */
    assert_true(ops->chunk_is_empty(st, 1));
    ops->destroy(st);
}

/* ---- tlsf ----------------------------------------------------------------------------------- */

static void test_tlsf_blocks_are_the_request_rounded_to_the_granule(void **state)
{
    (void)state;
    const clrun_strategy_ops *ops = &clrun_strategy_tlsf;
    void *st = make_with_chunk(ops);
    uint64_t used = 0;
    for (uint64_t size = 1; size <= 4 * MiB; size = size * 3 + 1) {
        clrun_block b;
        assert_int_equal(ops->alloc(st, size, 1, &b), CLRUN_OK);
        assert_int_equal(b.size, (size + 255) / 256 * 256);
        assert_int_equal(b.offset, used); /* packed from the bottom of the chunk, no gaps */
        used += b.size;
    }
    assert_int_equal(stats_of(ops, st).held_bytes, used);
    ops->destroy(st);
}

static void test_tlsf_coalesces_fully_when_empty(void **state)
{
    (void)state;
    const clrun_strategy_ops *ops = &clrun_strategy_tlsf;
    void *st = make_with_chunk(ops);
    clrun_block b[300];
    for (int i = 0; i < 300; i++)
        assert_int_equal(ops->alloc(st, rand_range(1, 40 * KiB), 1, &b[i]), CLRUN_OK);
    for (int i = 0; i < 300; i += 2) /* every other block: holes that cannot merge yet */
        assert_int_equal(ops->free(st, b[i].chunk, b[i].offset), CLRUN_OK);
    assert_true(stats_of(ops, st).largest_free < 16 * MiB);
    for (int i = 299; i > 0; i -= 2)
        assert_int_equal(ops->free(st, b[i].chunk, b[i].offset), CLRUN_OK);
    clrun_strategy_stats s = stats_of(ops, st);
    assert_int_equal(s.largest_free, 16 * MiB);
    assert_int_equal(s.free_bytes, 16 * MiB);
    clrun_block whole;
    assert_int_equal(ops->alloc(st, 16 * MiB, 1, &whole), CLRUN_OK);
    assert_int_equal(whole.offset, 0);
    ops->destroy(st);
}

/* Holes of 64, 20 and 40 KiB between live blocks: a 17 KiB request takes the 20 KiB hole and a
 * 33 KiB one the 40 KiB hole, not the chunk's free tail nor a larger hole. */
static void test_tlsf_takes_the_tightest_hole_before_the_free_tail(void **state)
{
    (void)state;
    const clrun_strategy_ops *ops = &clrun_strategy_tlsf;
    void *st = make_with_chunk(ops);
    const uint64_t hole_sizes[] = {64 * KiB, 20 * KiB, 40 * KiB};
    clrun_block hole[3], wall[3], b;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(ops->alloc(st, hole_sizes[i], 1, &hole[i]), CLRUN_OK);
        assert_int_equal(ops->alloc(st, 4 * KiB, 1, &wall[i]), CLRUN_OK);
    }
    for (int i = 0; i < 3; i++)
        assert_int_equal(ops->free(st, hole[i].chunk, hole[i].offset), CLRUN_OK);
    assert_int_equal(ops->alloc(st, 17 * KiB, 1, &b), CLRUN_OK);
    assert_int_equal(b.offset, hole[1].offset);
    assert_int_equal(ops->alloc(st, 33 * KiB, 1, &b), CLRUN_OK);
    assert_int_equal(b.offset, hole[2].offset);
    assert_int_equal(ops->alloc(st, 64 * KiB, 1, &b), CLRUN_OK);
    assert_int_equal(b.offset, hole[0].offset);
    assert_int_equal(ops->alloc(st, 1 * KiB, 1, &b), CLRUN_OK); /* the 3 KiB left of the 20 KiB hole */
    assert_int_equal(b.offset, hole[1].offset + 17 * KiB);
    ops->destroy(st);
}

static void test_tlsf_fits_across_chunks(void **state)
{
    (void)state;
    const clrun_strategy_ops *ops = &clrun_strategy_tlsf;
    void *st = make(ops, 256, GiB);
    assert_int_equal(ops->add_chunk(st, 3, 8 * MiB), CLRUN_OK);
    assert_int_equal(ops->add_chunk(st, 5, 1 * MiB), CLRUN_OK);
    clrun_block b;
    assert_int_equal(ops->alloc(st, MiB, 1, &b), CLRUN_OK); /* fills chunk 5 exactly */
    assert_int_equal(b.chunk, 5);
    assert_int_equal(ops->alloc(st, 7 * MiB, 1, &b), CLRUN_OK);
    assert_int_equal(b.chunk, 3);
    assert_int_equal(ops->alloc(st, 2 * MiB, 1, &b), CLRUN_ERROR_OUT_OF_MEMORY);
    ops->destroy(st);
}

static void test_tlsf_a_hole_is_taken_by_the_next_request_of_its_size(void **state)
{
    (void)state;
    const clrun_strategy_ops *ops = &clrun_strategy_tlsf;
    void *st = make_with_chunk(ops);
    clrun_block a, b, c;
    assert_int_equal(ops->alloc(st, 5000, 1, &a), CLRUN_OK);
    assert_int_equal(ops->alloc(st, 5000, 1, &b), CLRUN_OK);
    assert_int_equal(ops->free(st, a.chunk, a.offset), CLRUN_OK);
    assert_int_equal(ops->alloc(st, 5000, 1, &c), CLRUN_OK);
    assert_int_equal(c.offset, a.offset);
    /* b joins the chunk's free tail at once. */
    assert_int_equal(ops->free(st, b.chunk, b.offset), CLRUN_OK);
    assert_int_equal(stats_of(ops, st).largest_free, 16 * MiB - c.size);
    assert_int_equal(ops->free(st, b.chunk, b.offset), CLRUN_ERROR_INVALID_FREE);
    ops->destroy(st);
}

/* Wilderness last: a request that a hole holds goes there, even when the chunk's free tail is
 * a tighter fit, as best fit in one unbounded arena places it. */
static void test_tlsf_the_free_tail_is_cut_only_when_no_hole_fits(void **state)
{
    (void)state;
    const clrun_strategy_ops *ops = &clrun_strategy_tlsf;
    void *st = make_with_chunk(ops);
    clrun_block hole, wall, fill, b;
    assert_int_equal(ops->alloc(st, MiB, 1, &hole), CLRUN_OK);
    assert_int_equal(ops->alloc(st, 4 * KiB, 1, &wall), CLRUN_OK);
    assert_int_equal(ops->alloc(st, 15 * MiB - 4 * KiB - 100 * KiB, 1, &fill), CLRUN_OK);
    assert_int_equal(ops->free(st, hole.chunk, hole.offset), CLRUN_OK); /* a 1 MiB hole, a 100 KiB tail */
    assert_int_equal(ops->alloc(st, 50 * KiB, 1, &b), CLRUN_OK);
    assert_int_equal(b.offset, hole.offset);
    assert_int_equal(ops->alloc(st, MiB - 50 * KiB, 1, &b), CLRUN_OK); /* the rest of the hole */
    assert_int_equal(b.offset, hole.offset + 50 * KiB);
    assert_int_equal(ops->alloc(st, 100 * KiB, 1, &b), CLRUN_OK); /* now the tail */
    assert_int_equal(b.offset, 16 * MiB - 100 * KiB);
    assert_int_equal(ops->alloc(st, 1, 1, &b), CLRUN_ERROR_OUT_OF_MEMORY);
    ops->destroy(st);
}

static void test_tlsf_alignment_gap_stays_free(void **state)
{
    (void)state;
    const clrun_strategy_ops *ops = &clrun_strategy_tlsf;
    void *st = make_with_chunk(ops);
    clrun_block small, aligned, gap;
    assert_int_equal(ops->alloc(st, 1000, 1, &small), CLRUN_OK);
    assert_int_equal(ops->alloc(st, 3000, MiB, &aligned), CLRUN_OK);
    assert_int_equal(aligned.offset, MiB);
    assert_int_equal(aligned.size, 3072);
    assert_int_equal(ops->alloc(st, MiB - 1024, 1, &gap), CLRUN_OK); /* exactly the gap */
    assert_int_equal(gap.offset, 1024);
    clrun_strategy_stats s = stats_of(ops, st);
    assert_int_equal(s.free_bytes, 16 * MiB - s.held_bytes);
    assert_int_equal(s.largest_free, 15 * MiB - 3072);
    ops->destroy(st);
}

/* ---- registry ------------------------------------------------------------------------------- */

static void test_registry_finds_each_strategy_by_name(void **state)
{
    (void)state;
    assert_ptr_equal(clrun_strategy_find("buddy"), &clrun_strategy_buddy);
    assert_ptr_equal(clrun_strategy_find("slab"), &clrun_strategy_slab);
    assert_ptr_equal(clrun_strategy_find("bump"), &clrun_strategy_bump);
    assert_ptr_equal(clrun_strategy_find("tlsf"), &clrun_strategy_tlsf);
    assert_string_equal(clrun_strategy_names(), "buddy|slab|bump|tlsf");
    /* Names match in any case, as device names do. */
    assert_ptr_equal(clrun_strategy_find("Buddy"), &clrun_strategy_buddy);
    assert_ptr_equal(clrun_strategy_find("SLAB"), &clrun_strategy_slab);
}

/* Every list of names comes from the one table. */
static void test_registry_lists_every_strategy_once(void **state)
{
    (void)state;
    char joined[256] = "";
    for (size_t i = 0; i < clrun_strategy_count(); i++) {
        const clrun_strategy_ops *ops = clrun_strategy_at(i);
        assert_ptr_equal(clrun_strategy_find(ops->name), ops);
        snprintf(joined + strlen(joined), sizeof joined - strlen(joined), "%s%s", i ? "|" : "",
                 ops->name);
    }
    assert_null(clrun_strategy_at(clrun_strategy_count()));
    assert_string_equal(joined, clrun_strategy_names());
    assert_ptr_equal(clrun_strategy_default(), &clrun_strategy_tlsf); /* chosen by measurement */
}

static void test_registry_rejects_unknown_names(void **state)
{
    (void)state;
    assert_null(clrun_strategy_find("budy"));
    assert_null(clrun_strategy_find(""));
    assert_null(clrun_strategy_find(NULL));
}

/* ---- main ----------------------------------------------------------------------------------- */

#define SHARED_TESTS(ops)                                                                          \
    {"create_rejects_min_align_not_power_of_two", test_create_rejects_min_align_not_power_of_two, \
     NULL, NULL, (void *)&ops},                                                                    \
    {"destroy_accepts_null", test_destroy_accepts_null, NULL, NULL, (void *)&ops},                \
    {"alloc_of_huge_size_is_out_of_memory", test_alloc_of_huge_size_is_out_of_memory, NULL,     \
     NULL, (void *)&ops},                                                                          \
    {"alloc_without_chunks_is_out_of_memory", test_alloc_without_chunks_is_out_of_memory, NULL, \
     NULL, (void *)&ops},                                                                          \
    {"alloc_fills_block_inside_its_chunk", test_alloc_fills_block_inside_its_chunk, NULL, NULL,  \
     (void *)&ops},                                                                                \
    {"alloc_honors_alignment_above_min_align", test_alloc_honors_alignment_above_min_align,      \
     NULL, NULL, (void *)&ops},                                                                    \
    {"double_free_is_invalid_and_changes_nothing",                                                \
     test_double_free_is_invalid_and_changes_nothing, NULL, NULL, (void *)&ops},                  \
    {"free_in_unknown_chunk_is_invalid", test_free_in_unknown_chunk_is_invalid, NULL, NULL,      \
     (void *)&ops},                                                                                \
    {"free_of_interior_offset_is_invalid", test_free_of_interior_offset_is_invalid, NULL, NULL,  \
     (void *)&ops},                                                                                \
    {"free_of_never_allocated_offset_is_invalid", test_free_of_never_allocated_offset_is_invalid,\
     NULL, NULL, (void *)&ops},                                                                    \
    {"remove_chunk_with_live_block_is_busy", test_remove_chunk_with_live_block_is_busy, NULL,   \
     NULL, (void *)&ops},                                                                          \
    {"remove_unknown_chunk_is_invalid_argument", test_remove_unknown_chunk_is_invalid_argument,  \
     NULL, NULL, (void *)&ops},                                                                    \
    {"add_chunk_with_id_in_use_is_invalid_argument",                                              \
     test_add_chunk_with_id_in_use_is_invalid_argument, NULL, NULL, (void *)&ops},                \
    {"sparse_chunk_ids_are_kept_apart", test_sparse_chunk_ids_are_kept_apart, NULL, NULL,        \
     (void *)&ops},                                                                                \
    {"reset_empties_every_chunk", test_reset_empties_every_chunk, NULL, NULL, (void *)&ops},     \
    {"reset_forgets_every_block", test_reset_forgets_every_block, NULL, NULL, (void *)&ops},     \
    {"chunk_size_holds_the_request_within_max_chunk",                                             \
     test_chunk_size_holds_the_request_within_max_chunk, NULL, NULL, (void *)&ops},               \
    {"chunk_size_is_zero_when_request_exceeds_max_chunk",                                         \
     test_chunk_size_is_zero_when_request_exceeds_max_chunk, NULL, NULL, (void *)&ops},           \
    {"random_operations_match_reference_model", test_random_operations_match_reference_model,    \
     NULL, NULL, (void *)&ops}

int main(void)
{
    seed = env_u64("CLRUN_TEST_SEED", 0);
    if (!seed) {
        struct timespec ts;
        timespec_get(&ts, TIME_UTC);
        seed = (uint64_t)ts.tv_sec * UINT64_C(1000000007) + (uint64_t)ts.tv_nsec;
    }
    printf("test_strategies: CLRUN_TEST_SEED=%llu\n", (unsigned long long)seed);
    rng = seed;

    const struct CMUnitTest buddy[] = {
        SHARED_TESTS(clrun_strategy_buddy),
        cmocka_unit_test(test_buddy_chunk_size_is_the_request_rounded_to_the_atom),
        cmocka_unit_test(test_buddy_block_is_trimmed_to_the_atom_and_aligned_to_its_power_of_two),
        cmocka_unit_test(test_buddy_trimmed_tail_serves_other_requests_and_merges_back),
        cmocka_unit_test(test_buddy_trimmed_block_freed_beside_its_live_tail_leaves_its_pieces_free),
        cmocka_unit_test(test_buddy_chunk_ids_below_and_above_its_id_table),
        cmocka_unit_test(test_buddy_coalesces_fully_when_empty),
        cmocka_unit_test(test_buddy_chunk_not_power_of_two_is_cut_in_powers_of_two),
        cmocka_unit_test(test_buddy_empty_chunk_takes_a_request_larger_than_its_top_block),
    };
    const struct CMUnitTest slab[] = {
        SHARED_TESTS(clrun_strategy_slab),
        cmocka_unit_test(test_slab_small_classes_waste_at_most_an_eighth),
        cmocka_unit_test(test_slab_empty_slabs_return_to_the_chunk),
        cmocka_unit_test(test_slab_large_request_shares_the_chunks),
        cmocka_unit_test(test_slab_freed_large_block_is_taken_back_by_the_same_size),
        cmocka_unit_test(test_slab_freed_large_block_counts_as_merged),
    };
    const struct CMUnitTest bump[] = {
        SHARED_TESTS(clrun_strategy_bump),
        cmocka_unit_test(test_bump_lifo_frees_lower_the_top),
        cmocka_unit_test(test_bump_inner_free_is_held_until_the_blocks_above_go),
    };
    const struct CMUnitTest tlsf[] = {
        SHARED_TESTS(clrun_strategy_tlsf),
        cmocka_unit_test(test_tlsf_blocks_are_the_request_rounded_to_the_granule),
        cmocka_unit_test(test_tlsf_coalesces_fully_when_empty),
        cmocka_unit_test(test_tlsf_takes_the_tightest_hole_before_the_free_tail),
        cmocka_unit_test(test_tlsf_fits_across_chunks),
        cmocka_unit_test(test_tlsf_a_hole_is_taken_by_the_next_request_of_its_size),
        cmocka_unit_test(test_tlsf_the_free_tail_is_cut_only_when_no_hole_fits),
        cmocka_unit_test(test_tlsf_alignment_gap_stays_free),
    };
    const struct CMUnitTest registry[] = {
        cmocka_unit_test(test_registry_finds_each_strategy_by_name),
        cmocka_unit_test(test_registry_lists_every_strategy_once),
        cmocka_unit_test(test_registry_rejects_unknown_names),
    };
    int failed = 0;
    failed += cmocka_run_group_tests_name("buddy", buddy, NULL, NULL);
    failed += cmocka_run_group_tests_name("slab", slab, NULL, NULL);
    failed += cmocka_run_group_tests_name("bump", bump, NULL, NULL);
    failed += cmocka_run_group_tests_name("tlsf", tlsf, NULL, NULL);
    failed += cmocka_run_group_tests_name("registry", registry, NULL, NULL);
    if (failed)
        printf("test_strategies: %d failed; replay with CLRUN_TEST_SEED=%llu\n", failed,
               (unsigned long long)seed);
    return failed ? 1 : 0;
}
