/* Tests of the trace replay (lib/memory/replay*.c, include/clrun/replay.h), no device needed:
 * the lower bound and the frees-first order, the best-fit reference's placements, the binned
 * baseline's bins and reuse, a strategy through the allocator core, scaling, the errors; then
 * what must hold of tlsf on every trace of tests/data/traces (bytes, never time): in one arena
 * within 5% of the best-fit reference, and with on-demand growth less than the binned pool and
 * at most 1.25x its own one-arena footprint, at 1 MiB and 1 GiB scales. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <clrun/lifetimes.h>
#include <clrun/replay.h>
#include <clrun/strategy.h>

#define KiB (UINT64_C(1) << 10)
#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)

static clrun_replay_result replay(const clrun_lifetime *rows, size_t n, const char *allocator,
                                  const clrun_replay_options *o)
{
    clrun_replay_result r;
    char err[2048];
    if (clrun_replay(rows, n, allocator, o, &r, err, sizeof err) != CLRUN_OK)
        fail_msg("%s: %s", allocator, err);
    return r;
}

/* ---- the engine ---- */

static void the_lower_bound_counts_frees_before_allocations_at_a_moment(void **state)
{
    (void)state;
    /* 1000 over [0,2), 3000 over [1,3), 2000 over [2,4): at moment 2 the first is freed first. */
    const clrun_lifetime rows[] = {{0, 0, 2, 1000, 0}, {1, 1, 3, 3000, 0}, {2, 2, 4, 2000, 0}};
    clrun_replay_result r = replay(rows, 3, "best-fit", NULL);
    assert_int_equal(r.lower_bound, 5000);
    assert_string_equal(r.allocator, "best-fit");
}

static void best_fit_takes_the_smallest_hole_then_the_lowest(void **state)
{
    (void)state;
    clrun_replay_options o = {.alignment = 256};
    /* Holes of 1024 (at 0) and 512 (at 1280) between live walls; a 512 request at moment 2
     * takes the 512 hole, not the larger one nor the top, and a 1024 one then the other: the
     * top stays at the second wall's end, 2048. */
    const clrun_lifetime rows[] = {
        {0, 0, 2, 1024, 0}, /* hole A, freed at 2 */
        {1, 0, 9, 256, 0},  /* wall */
        {2, 0, 2, 512, 0},  /* hole B, freed at 2 */
        {3, 0, 9, 256, 0},  /* wall: top at 2048 */
        {4, 2, 9, 512, 0},  /* fits B exactly */
        {5, 3, 9, 1024, 0}, /* fits A exactly */
    };
    clrun_replay_result r = replay(rows, 6, "best-fit", &o);
    assert_int_equal(r.footprint, 2048);
    assert_int_equal(r.reserved, 2048);
    assert_int_equal(r.chunks, 1);
    assert_int_equal(r.ns_per_op, 0.0);
}

static void best_fit_rounds_to_the_alignment_and_reports_the_waste(void **state)
{
    (void)state;
    clrun_replay_options o = {.alignment = 256};
    const clrun_lifetime rows[] = {{0, 0, 1, 1000, 0}, {1, 0, 1, 10, 0}};
    clrun_replay_result r = replay(rows, 2, "best-fit", &o);
    assert_int_equal(r.peak_held, 1024 + 256);
    assert_int_equal(r.internal_waste, 1024 + 256 - 1010);
    assert_int_equal(r.footprint, 1024 + 10); /* the second block's end as asked for */
}

static void binned_rounds_to_its_bin_and_reuses_only_that_bin(void **state)
{
    (void)state;
    /* 1000 is in the bin topped by 1023; 1010 shares it; 2000 does not. */
    const clrun_lifetime rows[] = {{0, 0, 1, 1000, 0}, {1, 1, 2, 1010, 0}, {2, 2, 3, 2000, 0}};
    clrun_replay_result r = replay(rows, 3, "binned", NULL);
    assert_int_equal(r.chunks, 2);                 /* the second one reused the first block */
    assert_int_equal(r.reserved, 1024 + 2048);     /* never given back; each aligned to 256 */
    assert_int_equal(r.footprint, r.lower_bound);  /* each block is its own buffer */
}

static void a_strategy_replays_through_the_allocator_core(void **state)
{
    (void)state;
    clrun_replay_options o = {.alignment = 256, .chunk_size = MiB};
    const clrun_lifetime rows[] = {{0, 0, 2, 1000, 0}, {1, 1, 3, 3000, 0}, {2, 2, 4, 2000, 0}};
    clrun_replay_result r = replay(rows, 3, "TLSF", &o); /* any case */
    assert_string_equal(r.allocator, "tlsf");
    assert_int_equal(r.chunks, 1);
    assert_int_equal(r.reserved, MiB);
    assert_int_equal(r.peak_held, 3072 + 2048);       /* moment 2: 3000 and 2000, rounded */
    assert_int_equal(r.footprint, 4096 + 2000);      /* 2000 does not fit 1000's hole: on top */
    o.timed = true;
    assert_true(replay(rows, 3, "buddy", &o).ns_per_op > 0.0);
}

static void scaling_sets_the_lower_bound(void **state)
{
    (void)state;
    const clrun_lifetime rows[] = {{0, 0, 2, 1000, 0}, {1, 1, 3, 3000, 0}, {2, 5, 6, 1, 0}};
    clrun_replay_options o = {.scale_to = GiB};
    clrun_replay_result r = replay(rows, 3, "best-fit", &o);
    assert_int_equal(r.lower_bound, GiB);
    o.scale_to = 100; /* 1 byte stays at least 1 */
    r = replay(rows, 3, "best-fit", &o);
    assert_true(r.lower_bound >= 99 && r.lower_bound <= 101);
}

static void every_allocator_is_named_in_order(void **state)
{
    (void)state;
    size_t i = 0;
    for (; clrun_strategy_at(i); i++)
        assert_string_equal(clrun_replay_allocator_name(i), clrun_strategy_at(i)->name);
    assert_string_equal(clrun_replay_allocator_name(i), "binned");
    assert_string_equal(clrun_replay_allocator_name(i + 1), "best-fit");
    assert_null(clrun_replay_allocator_name(i + 2));
}

static void errors_say_what_is_wrong(void **state)
{
    (void)state;
    const clrun_lifetime rows[] = {{7, 0, 1, 4096, 0}};
    clrun_replay_result r;
    char err[2048];
    assert_int_equal(clrun_replay(rows, 1, "firstfit", NULL, &r, err, sizeof err), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "unknown allocator 'firstfit'"));
    clrun_replay_options o = {.alignment = 3};
    assert_int_equal(clrun_replay(rows, 1, "tlsf", &o, &r, err, sizeof err), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "power of two"));
    o = (clrun_replay_options){.alignment = 256, .chunk_size = 128};
    assert_int_equal(clrun_replay(rows, 1, "tlsf", &o, &r, err, sizeof err), CLRUN_ERROR_INVALID_ARGUMENT);
    o.chunk_size = 2048; /* the buffer does not fit a chunk: named */
    for (size_t i = 0; clrun_strategy_at(i); i++) {
        assert_int_equal(clrun_replay(rows, 1, clrun_strategy_at(i)->name, &o, &r, err, sizeof err),
                         CLRUN_ERROR_INVALID_SIZE);
        assert_non_null(strstr(err, "buffer 7 (row 1, 4096 bytes at moment 0)"));
    }
    assert_int_equal(clrun_replay(rows, 1, NULL, NULL, &r, err, sizeof err), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(clrun_replay(NULL, 0, "tlsf", NULL, &r, NULL, 0), CLRUN_OK); /* an empty trace */
    assert_int_equal(r.lower_bound, 0);
}

/* ---- what must hold of tlsf on the traces ---- */

static clrun_lifetimes load(const char *name)
{
    const char *srcdir = getenv("srcdir");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/traces/%s", srcdir && srcdir[0] ? srcdir : ".", name);
    FILE *in = fopen(path, "r");
    if (!in)
        fail_msg("cannot open %s", path);
    clrun_lifetimes rows;
    clrun_lifetimes_init(&rows);
    char err[1024];
    if (clrun_lifetimes_read(in, path, &rows, err, sizeof err) != CLRUN_OK)
        fail_msg("%s", err);
    fclose(in);
    return rows;
}

static void tlsf_meets_its_bounds_on_every_trace_at_both_scales(void **state)
{
    (void)state;
    static const char *const traces[] = {"tiny.csv", "growing.csv", "random.csv", "resnet50_infer.csv",
                                         "resnet50_train.csv"};
    static const uint64_t scales[] = {MiB, GiB};
    for (size_t t = 0; t < sizeof traces / sizeof traces[0]; t++) {
        clrun_lifetimes rows = load(traces[t]);
        for (size_t k = 0; k < 2; k++) {
            clrun_replay_options arena = {.alignment = 256, .scale_to = scales[k], .chunk_size = 64 * GiB};
            clrun_replay_options grown = {.alignment = 256, .scale_to = scales[k]};
            clrun_replay_result best = replay(rows.items, rows.count, "best-fit", &arena);
            clrun_replay_result one = replay(rows.items, rows.count, "tlsf", &arena);
            clrun_replay_result tlsf = replay(rows.items, rows.count, "tlsf", &grown);
            clrun_replay_result binned = replay(rows.items, rows.count, "binned", &grown);
            print_message("[   INFO   ] %s at %s: arena tlsf/best-fit %.3f; grown tlsf %.2fx, binned %.2fx, "
                          "tlsf/arena %.2f\n", traces[t], k ? "1 GiB" : "1 MiB",
                          (double)one.footprint / (double)best.footprint,
                          (double)tlsf.reserved / (double)tlsf.lower_bound,
                          (double)binned.reserved / (double)binned.lower_bound,
                          (double)tlsf.reserved / (double)one.footprint);
            assert_true(one.footprint * 100 <= best.footprint * 105);
            assert_true(tlsf.reserved < binned.reserved);
            assert_true(tlsf.reserved * 100 <= one.footprint * 125);
        }
        clrun_lifetimes_free(&rows);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_lower_bound_counts_frees_before_allocations_at_a_moment),
        cmocka_unit_test(best_fit_takes_the_smallest_hole_then_the_lowest),
        cmocka_unit_test(best_fit_rounds_to_the_alignment_and_reports_the_waste),
        cmocka_unit_test(binned_rounds_to_its_bin_and_reuses_only_that_bin),
        cmocka_unit_test(a_strategy_replays_through_the_allocator_core),
        cmocka_unit_test(scaling_sets_the_lower_bound),
        cmocka_unit_test(every_allocator_is_named_in_order),
        cmocka_unit_test(errors_say_what_is_wrong),
        cmocka_unit_test(tlsf_meets_its_bounds_on_every_trace_at_both_scales),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
