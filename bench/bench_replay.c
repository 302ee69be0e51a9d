/* bench_replay: what the allocators reserve on allocation traces, in one run (not a test; bytes
 * only, so the figures are the same on every machine). For each trace given and for the
 * planner's generated families (random, perfect, balanced, unet; 200 and 2000 buffers, seed 1),
 * each scaled so that its lower bound is 1 MiB and then 1 GiB:
 *  A. one preallocated arena (a 64 GiB chunk): footprint over the lower bound of tlsf and of
 *     the best-fit reference (coalescing best fit in one unbounded arena);
 *  B. on-demand growth (1 GiB maximum chunk, as on POCL): reserved over the lower bound of
 *     every strategy, under the present growth rule and the previous one (in brackets), of
 *     PyOpenCL's binned pool, and tlsf's reserved over its own one-arena footprint.
 * Then the count of cases that miss what issue 12 asks: tlsf within 5% of best fit (A), every
 * general-purpose strategy (buddy, slab, tlsf) below binned, tlsf within 1.25x of its arena.
 *
 *   bench/bench_replay [--alignment A] [TRACE.csv...]      (the traces of tests/data/traces, say) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <clrun/lifetimes.h>
#include <clrun/replay.h>
#include <clrun/strategy.h>

#include "memory/replay_internal.h"
#include "plan_gen.h"

#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)
#define MAX_STRATEGIES 8

typedef struct misses {
    unsigned cases, arena, binned, growth;
} misses;

static clrun_replay_result run(const clrun_lifetimes *t, const char *allocator, const clrun_replay_options *o,
                               bool previous)
{
    clrun_replay_result r;
    char err[2048];
    if (clrun__replay_run(t->items, t->count, allocator, o, previous, &r, err, sizeof err) != CLRUN_OK) {
        fprintf(stderr, "bench_replay: %s: %s\n", allocator, err);
        exit(1);
    }
    return r;
}

static double ratio(uint64_t x, uint64_t y) { return y ? (double)x / (double)y : 0.0; }

static bool general_purpose(const char *name) { return strcmp(name, "bump") != 0; }

static void one_case(const char *name, const clrun_lifetimes *t, uint64_t alignment, misses *m)
{
    static const uint64_t scales[] = {MiB, GiB};
    for (int k = 0; k < 2; k++) {
        clrun_replay_options arena = {.alignment = alignment, .scale_to = scales[k], .chunk_size = 64 * GiB};
        clrun_replay_options grown = {.alignment = alignment, .scale_to = scales[k], .max_chunk = GiB};
        clrun_replay_result best = run(t, "best-fit", &arena, false);
        clrun_replay_result one = run(t, "tlsf", &arena, false);
        clrun_replay_result binned = run(t, "binned", &grown, false);
        double arena_ratio = ratio(one.footprint, best.footprint);
        printf("%-22s %5s | %5.2f %5.2f %6.3f%s |", name, k ? "1 GiB" : "1 MiB", ratio(best.footprint, best.lower_bound),
               ratio(one.footprint, one.lower_bound), arena_ratio, arena_ratio > 1.05 ? "!" : " ");
        m->cases++;
        m->arena += arena_ratio > 1.05;
        double tlsf_over_arena = 0.0;
        for (size_t s = 0; clrun_strategy_at(s); s++) {
            const char *strategy = clrun_strategy_at(s)->name;
            clrun_replay_result now = run(t, strategy, &grown, false);
            clrun_replay_result before = run(t, strategy, &grown, true);
            bool miss = general_purpose(strategy) && now.reserved >= binned.reserved;
            m->binned += miss;
            printf(" %5.2f%s(%5.2f)", ratio(now.reserved, now.lower_bound), miss ? "!" : " ",
                   ratio(before.reserved, before.lower_bound));
            if (strcmp(strategy, "tlsf") == 0)
                tlsf_over_arena = ratio(now.reserved, one.footprint);
        }
        m->growth += tlsf_over_arena > 1.25;
        printf(" | %6.2f | %5.2f%s\n", ratio(binned.reserved, binned.lower_bound), tlsf_over_arena,
               tlsf_over_arena > 1.25 ? "!" : "");
    }
}

static clrun_lifetimes read_trace(const char *path)
{
    FILE *in = fopen(path, "r");
    if (in == NULL) {
        fprintf(stderr, "bench_replay: cannot open %s\n", path);
        exit(2);
    }
    clrun_lifetimes rows;
    clrun_lifetimes_init(&rows);
    char err[1024];
    if (clrun_lifetimes_read(in, path, &rows, err, sizeof err) != CLRUN_OK) {
        fprintf(stderr, "%s\n", err);
        exit(2);
    }
    fclose(in);
    return rows;
}

static clrun_lifetimes generated(clrun_plan_gen_family family, size_t n)
{
    clrun_plan_buffer *buffers = calloc(n, sizeof *buffers);
    clrun_lifetimes rows;
    clrun_lifetimes_init(&rows);
    if (buffers == NULL || clrun_plan_gen(family, n, 1, buffers, NULL) != CLRUN_OK) {
        fprintf(stderr, "bench_replay: cannot generate %s:%zu\n", clrun_plan_gen_family_name(family), n);
        exit(1);
    }
    for (size_t i = 0; i < n; i++) {
        clrun_lifetime row = {.id = i, .lower = buffers[i].first, .upper = buffers[i].last, .size = buffers[i].size};
        if (clrun_lifetimes_push(&rows, &row) != CLRUN_OK)
            exit(1);
    }
    free(buffers);
    return rows;
}

int main(int argc, char **argv)
{
    uint64_t alignment = 256;
    int first = 1;
    if (argc > 2 && strcmp(argv[1], "--alignment") == 0) {
        alignment = strtoull(argv[2], NULL, 0);
        first = 3;
    }
    time_t now = time(NULL);
    printf("# bench_replay: bytes reserved on allocation traces; alignment %llu B; %s", (unsigned long long)alignment,
           ctime(&now));
    printf("# A (one 64 GiB arena): footprint / lower bound of best-fit and tlsf, and tlsf / best-fit\n");
    printf("# B (growth, 1 GiB max chunk): reserved / lower bound, present rule (previous rule), binned,\n");
    printf("#   and tlsf reserved / tlsf one-arena footprint; '!' marks a miss of what issue 12 asks\n");
    printf("%-22s %5s | %5s %5s %6s  |", "trace", "scale", "best", "tlsf", "ratio");
    for (size_t s = 0; clrun_strategy_at(s); s++)
        printf(" %13s", clrun_strategy_at(s)->name);
    printf(" | %6s | %5s\n", "binned", "tlsf/A");
    misses m = {0};
    for (int i = first; i < argc; i++) {
        clrun_lifetimes t = read_trace(argv[i]);
        const char *name = strrchr(argv[i], '/') ? strrchr(argv[i], '/') + 1 : argv[i];
        one_case(name, &t, alignment, &m);
        clrun_lifetimes_free(&t);
    }
    static const size_t sizes[] = {200, 2000};
    for (int f = 0; f < CLRUN_PLAN_GEN_COUNT; f++) {
        for (int k = 0; k < 2; k++) {
            clrun_lifetimes t = generated((clrun_plan_gen_family)f, sizes[k]);
            char name[64];
            snprintf(name, sizeof name, "gen %s:%zu", clrun_plan_gen_family_name((clrun_plan_gen_family)f), sizes[k]);
            one_case(name, &t, alignment, &m);
            clrun_lifetimes_free(&t);
        }
    }
    printf("\n# %u cases: tlsf above 1.05x best-fit in %u; a general-purpose strategy at or above binned in %u; "
           "tlsf above 1.25x its arena in %u\n", m.cases, m.arena, m.binned, m.growth);
    return 0;
}
