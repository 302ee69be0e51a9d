/* bench_plan: quality and speed of the static memory planner.
 *
 * Part 1, quality: for each instance family and size, the peak over the lower bound of the
 * greedy baselines (TFLite greedy by size, XLA's spatial and temporal orders), of the planner
 * without its complete search (search_max_buffers = 0: the constructions and improvement
 * searches alone, which is the planner as it was before the complete search for instances of
 * more than 64 buffers) and of clrun_plan_solve, both within the same time limit, averaged over
 * seeds, with clrun's planner time and how many of its plans were proven optimal.
 * Part 2, hard instances: the perfect and balanced families (optimum = lower bound) and the
 * bumped one (optimum above it) at 150, 300 and 500 buffers, each seed: the generator's known
 * plan (for bumped an upper bound on the optimum, within 1 % of the bound), greedy by size, then
 * clrun_plan_solve at 1 s (peak over the bound, over the optimum where known, over greedy by
 * size, time, proven) and, unless proven at 1 s, at 5 s (the time to the answer when it is
 * proven), with a count of instances proven within 5 s and at the optimum at 1 s.
 * Part 3, growth: how the lower bound, one greedy-by-size pass, the planner's constructions
 * alone (time limit 0) and clrun_plan_solve with the time limit (1 s unless --time-limit) grow
 * with n, beside the most buffers alive at once, for the generated families at 1k to 62k
 * and for chains and wide graphs (all branches alive until one join) at 10k, 30k, 100k: each
 * peak over the lower bound and, for the solve, over greedy by size (never above 1), whether
 * the limit cut constructions short ("cut"), and "late" for a call that took more than its
 * limit plus 10 %. The generated families run at 1k, 10k, 28k and 62k (--quick: 1k, 10k).
 * Part 4, constructions one by one (not run by default: --part 4): for random, perfect and
 * balanced at 10k, 28k, 62k and 100k (--quick: 10k), each seed, the setup of each tool (the
 * bound, the decoder or the interval sets as clrun_plan_solve picks them, lowest-first's tree)
 * and each of the eight constructions of plan.c's table, in its order (on large dense instances
 * clrun_plan_solve runs only greedy-size and the lowest-first ones), with its peak over the
 * bound, in CPU milliseconds of this process (what the time limit spends, less what other
 * processes on the core take: comparable between runs under different loads; the load average
 * is printed) and the total, against issue 29's target of 200 ms at 62k; last, how many
 * instances each construction gave the best peak of, and its CPU time over all of them: the
 * measure of plan.c's portfolio.
 *
 * usage: bench_plan [--seeds K] [--time-limit S] [--quick] [--part 1|2|3|4]
 * (--quick: sizes 100 and 1000 only, growth up to 10k) */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <clrun/plan.h>

#include <clrun/plan_gen.h>

#include "plan/plan_internal.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void cpu_name(char *out, size_t len)
{
    snprintf(out, len, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *colon = strchr(line, ':');
            if (colon) {
                snprintf(out, len, "%s", colon + 2);
                out[strcspn(out, "\n")] = '\0';
            }
            break;
        }
    }
    fclose(f);
}

/* Most buffers alive at one moment (O(n^2) would be too slow at 50k: sweep sorted ends). */
static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static size_t max_alive(const clrun_plan_buffer *b, size_t n)
{
    uint64_t *starts = malloc(n * sizeof *starts), *ends = malloc(n * sizeof *ends);
    if (!starts || !ends) {
        free(starts);
        free(ends);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        starts[i] = b[i].first;
        ends[i] = b[i].last;
    }
    qsort(starts, n, sizeof *starts, compare_u64);
    qsort(ends, n, sizeof *ends, compare_u64);
    size_t alive = 0, best = 0, e = 0;
    for (size_t s = 0; s < n; s++) {
        while (e < n && ends[e] <= starts[s]) {
            e++;
            alive--;
        }
        if (++alive > best)
            best = alive;
    }
    free(starts);
    free(ends);
    return best;
}

/* clrun_plan_solve with the limit and seed, the complete search on or off. */
static int solve(const clrun_plan_buffer *b, size_t n, double time_limit, uint64_t seed,
                 bool complete, uint64_t *offsets, clrun_plan_result *r)
{
    clrun_plan_options opts = CLRUN_PLAN_OPTIONS_DEFAULT;
    opts.time_limit_s = time_limit;
    opts.seed = seed;
    if (!complete)
        opts.search_max_buffers = 0;
    return clrun_plan_solve(b, n, &opts, offsets, r) == CLRUN_OK ? 0 : 1;
}

typedef struct quality_row {
    double greedy[3]; /* summed ratios: size, spatial, temporal */
    double baseline;  /* summed ratio without the complete search */
    double clrun;     /* summed ratio of clrun_plan_solve */
    double ms;        /* summed planner time */
    int optimal;      /* plans proven optimal */
} quality_row;

static int run_quality(clrun_plan_gen_family family, size_t n, int seeds, double time_limit,
                       quality_row *row)
{
    clrun_plan_buffer *b = malloc(n * sizeof *b);
    uint64_t *offsets = malloc(n * sizeof *offsets);
    int rc = 1;
    if (!b || !offsets)
        goto done;
    memset(row, 0, sizeof *row);
    for (int seed = 1; seed <= seeds; seed++) {
        if (clrun_plan_gen(family, n, (uint64_t)seed, b, NULL) != CLRUN_OK)
            goto done;
        uint64_t lb, peak;
        if (clrun_plan_lower_bound(b, n, 1, &lb) != CLRUN_OK)
            goto done;
        const clrun_plan_order orders[3] = {CLRUN_PLAN_ORDER_SIZE, CLRUN_PLAN_ORDER_SPATIAL,
                                            CLRUN_PLAN_ORDER_TEMPORAL};
        for (int o = 0; o < 3; o++) {
            if (clrun_plan_greedy(b, n, 1, orders[o], offsets, &peak) != CLRUN_OK)
                goto done;
            row->greedy[o] += (double)peak / (double)lb;
        }
        clrun_plan_result r;
        if (solve(b, n, time_limit, (uint64_t)seed, false, offsets, &r) != 0)
            goto done;
        row->baseline += (double)r.peak_bytes / (double)r.lower_bound_bytes;
        if (solve(b, n, time_limit, (uint64_t)seed, true, offsets, &r) != 0)
            goto done;
        row->clrun += (double)r.peak_bytes / (double)r.lower_bound_bytes;
        row->ms += r.planner_ms;
        row->optimal += r.optimal;
    }
    rc = 0;
done:
    free(b);
    free(offsets);
    return rc;
}

static int part_quality(int seeds, double time_limit, int quick)
{
    const size_t sizes[] = {100, 1000, 10000};
    size_t size_count = quick ? 2 : 3;
    printf("1. peak / lower bound, mean over seeds 1..%d, time limit %g s (1.000 = optimal)\n",
           seeds, time_limit);
    printf("%-9s %6s %12s %12s %12s %9s %9s %9s %7s\n", "family", "n", "greedy-size",
           "xla-spatial", "xla-temporal", "baseline", "clrun", "clrun ms", "proven");
    for (int f = 0; f <= CLRUN_PLAN_GEN_UNET; f++) {
        for (size_t s = 0; s < size_count; s++) {
            quality_row row;
            if (run_quality((clrun_plan_gen_family)f, sizes[s], seeds, time_limit, &row) != 0)
                return 1;
            printf("%-9s %6zu %12.3f %12.3f %12.3f %9.3f %9.3f %9.1f %5d/%d\n",
                   clrun_plan_gen_family_name((clrun_plan_gen_family)f), sizes[s],
                   row.greedy[0] / seeds, row.greedy[1] / seeds, row.greedy[2] / seeds,
                   row.baseline / seeds, row.clrun / seeds, row.ms / seeds, row.optimal, seeds);
        }
    }
    return 0;
}

/* One hard instance: greedy by size, then clrun_plan_solve at 1 s and, unless that proved its
 * plan optimal, at 5 s. */
static int run_hard(clrun_plan_gen_family family, size_t n, int seed, clrun_plan_buffer *b,
                    uint64_t *offsets, int *proven_5s, int *optimum_1s)
{
    uint64_t known, greedy, plan_peak = 0;
    clrun_plan_result r1, r5;
    if (clrun_plan_gen(family, n, (uint64_t)seed, b, &known) != CLRUN_OK ||
        clrun_plan_gen_plan(family, n, (uint64_t)seed, offsets, &plan_peak) != CLRUN_OK ||
        clrun_plan_greedy(b, n, 1, CLRUN_PLAN_ORDER_SIZE, offsets, &greedy) != CLRUN_OK ||
        solve(b, n, 1.0, (uint64_t)seed, true, offsets, &r1) != 0)
        return 1;
    r5 = r1;
    if (!r1.optimal && solve(b, n, 5.0, (uint64_t)seed, true, offsets, &r5) != 0)
        return 1;
    /* the best peak known: the optimum when one was proven (at 5 s, or the family's) */
    uint64_t best = r5.optimal ? r5.peak_bytes : known ? known : 0;
    *proven_5s += r5.optimal;
    *optimum_1s += best != 0 && r1.peak_bytes == best;
    char vs_best[16];
    snprintf(vs_best, sizeof vs_best, best ? "%.4f" : "-", (double)r1.peak_bytes / (double)best);
    double lb = (double)r1.lower_bound_bytes;
    printf("%-9s %5zu %4d %7.4f %7.4f | %7.4f %8s %7.4f %8.1f %4s | %7.4f %8.1f %6s  %s\n",
           clrun_plan_gen_family_name(family), n, seed, (double)plan_peak / lb, (double)greedy / lb,
           (double)r1.peak_bytes / lb, vs_best, (double)r1.peak_bytes / (double)greedy,
           r1.planner_ms, r1.optimal ? "yes" : "no", (double)r5.peak_bytes / lb, r5.planner_ms,
           r5.optimal ? "yes" : "no", r5.method);
    return 0;
}

static int part_packings(int seeds)
{
    const size_t sizes[] = {150, 300, 500};
    const clrun_plan_gen_family families[] = {CLRUN_PLAN_GEN_PERFECT, CLRUN_PLAN_GEN_BALANCED,
                                              CLRUN_PLAN_GEN_BUMPED};
    printf("\n2. hard instances, each seed: perfect and balanced packings (optimum = lower bound),\n"
           "   bumped (optimum above it, unknown): the generator's known plan (clrun_plan_gen_plan;\n"
           "   for bumped an upper bound on the optimum) and greedy-size over the lower bound; at\n"
           "   1 s the solve's peak over the bound, over the optimum (proven at 5 s, or the\n"
           "   family's), over greedy-size, its time and whether proven; at 5 s (run when 1 s did\n"
           "   not prove it) the same, the time being the time to the answer when proven\n");
    printf("%-9s %5s %4s %7s %7s | %7s %8s %7s %8s %4s | %7s %8s %6s  %s\n", "family", "n",
           "seed", "known", "greedy", "1s /lb", "/optimum", "/greedy", "ms", "prov", "5s /lb", "ms",
           "proven",
           "method");
    int total = 0, proven = 0, optimum = 0;
    for (size_t f = 0; f < 3; f++)
        for (size_t s = 0; s < 3; s++) {
            size_t n = sizes[s];
            clrun_plan_buffer *b = malloc(n * sizeof *b);
            uint64_t *offsets = malloc(n * sizeof *offsets);
            int rc = !b || !offsets;
            for (int seed = 1; seed <= seeds && rc == 0; seed++, total++)
                rc = run_hard(families[f], n, seed, b, offsets, &proven, &optimum);
            free(b);
            free(offsets);
            if (rc != 0)
                return 1;
        }
    printf("proven optimal within 5 s: %d of %d; at the optimum at 1 s: %d of %d\n", proven,
           total, optimum, total);
    return 0;
}

static int run_growth(clrun_plan_gen_family family, size_t n, double time_limit)
{
    clrun_plan_buffer *b = malloc(n * sizeof *b);
    uint64_t *offsets = malloc(n * sizeof *offsets);
    int rc = 1;
    if (!b || !offsets || clrun_plan_gen(family, n, 1, b, NULL) != CLRUN_OK)
        goto done;
    uint64_t lb, peak;
    double t0 = now_s();
    if (clrun_plan_lower_bound(b, n, 1, &lb) != CLRUN_OK)
        goto done;
    double t1 = now_s();
    if (clrun_plan_greedy(b, n, 1, CLRUN_PLAN_ORDER_SIZE, offsets, &peak) != CLRUN_OK)
        goto done;
    double t2 = now_s();
    clrun_plan_result r, built;
    if (solve(b, n, 0, 1, true, offsets, &built) != 0 ||
        solve(b, n, time_limit, 1, true, offsets, &r) != 0)
        goto done;
    printf("%-9s %6zu %6zu %8.2f %9.1f %7.4f %9.1f %7.4f %9.1f %7.4f %7.4f %4s %5s  %s\n",
           clrun_plan_gen_family_name(family), n, max_alive(b, n), (t1 - t0) * 1e3,
           (t2 - t1) * 1e3, (double)peak / (double)lb, built.planner_ms,
           (double)built.peak_bytes / (double)built.lower_bound_bytes, r.planner_ms,
           (double)r.peak_bytes / (double)r.lower_bound_bytes,
           (double)r.peak_bytes / (double)peak, r.cut_short ? "cut" : "-",
           r.planner_ms > 1100 * time_limit ? "late" : "ok", r.method);
    rc = 0;
done:
    free(b);
    free(offsets);
    return rc;
}

static int part_growth(int quick, double time_limit)
{
    printf("\n3. time growth (seed 1): lower bound, one greedy-size pass, clrun_plan_solve with\n"
           "   time limit 0 (every construction, no search: the cost that grows with n) and %g s\n"
           "   (anytime: it uses its limit unless it proves a plan optimal); ratios are peak over\n"
           "   the lower bound, \"/greedy\" the solve's peak over greedy-size's\n", time_limit);
    printf("%-9s %6s %6s %8s %9s %7s %9s %7s %9s %7s %7s %4s %5s  %s\n", "family", "n", "alive",
           "bound ms", "greedy ms", "ratio", "build ms", "ratio", "clrun ms", "ratio", "/greedy",
           "cut", "limit", "method");
    const size_t growth[] = {1000, 10000, 28000, 62000}, shapes[] = {10000, 30000, 100000};
    size_t count = quick ? 2 : 3;
    for (int f = 0; f <= CLRUN_PLAN_GEN_UNET; f++)
        for (size_t s = 0; s < (quick ? 2 : 4); s++)
            if (run_growth((clrun_plan_gen_family)f, growth[s], time_limit) != 0)
                return 1;
    for (int f = CLRUN_PLAN_GEN_CHAIN; f <= CLRUN_PLAN_GEN_WIDE; f++)
        for (size_t s = 0; s < count; s++)
            if (run_growth((clrun_plan_gen_family)f, shapes[s], time_limit) != 0)
                return 1;
    return 0;
}

/* CPU seconds of this process. */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The machine's load averages, for the record ("?" where /proc is not there). */
static void load_average(char *out, size_t len)
{
    snprintf(out, len, "?");
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f)
        return;
    if (fgets(out, (int)len, f))
        out[strcspn(out, "\n")] = '\0';
    fclose(f);
}

/* One construction of clrun_plan_solve's (plan.c's table), timed alone. */
/* Instances each construction gave the best peak of (ties count for each), by plan.c's table. */
#define CONSTRUCTION_COUNT 8
static int construction_wins[CONSTRUCTION_COUNT];
static double construction_ms[CONSTRUCTION_COUNT];

static int time_constructions(clrun_plan_gen_family family, size_t n, uint64_t seed)
{
    clrun_plan_buffer *b = malloc(n * sizeof *b);
    uint64_t *offsets = malloc(n * sizeof *offsets);
    uint32_t *order = malloc(n * sizeof *order);
    clrun__plan_decoder decoder = {0};
    clrun__plan_fit fit = {0};
    clrun__plan_skyline sky = {0};
    bool have_decoder = false, have_fit = false, have_sky = false;
    int rc = 1;
    if (!b || !offsets || !order || clrun_plan_gen(family, n, seed, b, NULL) != CLRUN_OK)
        goto done;
    uint64_t lb;
    uint32_t alive;
    double t = cpu_s(), total = 0;
    if (clrun__plan_bound(b, n, 1, &lb, &alive) != CLRUN_OK)
        goto done;
    bool dense = alive >= CLRUN__PLAN_FIT_DENSE;
    double bound_ms = (cpu_s() - t) * 1e3;
    total += bound_ms;
    t = cpu_s();
    if (dense)
        have_fit = clrun__plan_fit_init(&fit, b, n, 1) == CLRUN_OK;
    else
        have_decoder = clrun__plan_decoder_init(&decoder, b, n, 1) == CLRUN_OK;
    double fit_ms = (cpu_s() - t) * 1e3;
    t = cpu_s();
    have_sky = clrun__plan_skyline_init(&sky, b, n, 1) == CLRUN_OK;
    double sky_ms = (cpu_s() - t) * 1e3;
    if (!have_sky || !(have_fit || have_decoder))
        goto done;
    total += fit_ms + sky_ms;
    printf("%-9s %6zu %6u %4llu  setup: bound %.1f, %s %.1f, lowest-first %.1f ms\n",
           clrun_plan_gen_family_name(family), n, (unsigned)alive, (unsigned long long)seed,
           bound_ms,
           dense ? "interval sets" : "decoder", fit_ms, sky_ms);
    /* plan.c's constructions[], in its order */
    static const struct {
        int kind; /* 0 best fit, 1 lowest-first, 2 time sweep */
        int which;
    } steps[] = {{0, CLRUN_PLAN_ORDER_SIZE},     {1, CLRUN__PLAN_RANK_AREA},
                 {0, CLRUN_PLAN_ORDER_SPATIAL},  {1, CLRUN__PLAN_RANK_SIZE},
                 {0, CLRUN_PLAN_ORDER_TEMPORAL}, {0, CLRUN_PLAN_ORDER_AREA},
                 {1, CLRUN__PLAN_RANK_SPAN},     {2, 0}};
    uint64_t peaks[CONSTRUCTION_COUNT], best = UINT64_MAX;
    for (size_t i = 0; i < CONSTRUCTION_COUNT; i++) {
        uint64_t peak = 0;
        const char *name;
        t = cpu_s();
        if (steps[i].kind == 0) {
            name = clrun_plan_order_name((clrun_plan_order)steps[i].which);
            if (clrun__plan_order_fill(b, n, (clrun_plan_order)steps[i].which, order) !=
                CLRUN_OK)
                goto done;
            if (!dense)
                peak = clrun__plan_decoder_run(&decoder, order, INFINITY, offsets);
            else if (clrun__plan_fit_run(&fit, order, INFINITY, offsets, &peak) != CLRUN_OK)
                goto done;
        } else if (steps[i].kind == 1) {
            name = clrun__plan_rank_name((clrun__plan_rank)steps[i].which);
            clrun__plan_skyline_rank(&sky, (clrun__plan_rank)steps[i].which);
            peak = clrun__plan_skyline_run(&sky, sky.priority, UINT64_MAX, INFINITY, offsets);
        } else {
            bool cut;
            clrun_status st = CLRUN_OK;
            name = "time-sweep";
            peak = clrun__plan_sweep(b, n, 1, INFINITY, offsets, &cut, &st);
            if (st != CLRUN_OK)
                goto done;
        }
        double ms = (cpu_s() - t) * 1e3;
        total += ms;
        construction_ms[i] += ms;
        peaks[i] = peak;
        best = peak < best ? peak : best;
        printf("    %-22s %9.1f ms  %7.4f\n", name, ms, (double)peak / (double)lb);
    }
    for (size_t i = 0; i < CONSTRUCTION_COUNT; i++)
        construction_wins[i] += peaks[i] == best;
    printf("    %-22s %9.1f ms  (target at 62k: 200 ms)\n", "total", total);
    rc = 0;
done:
    if (have_decoder)
        clrun__plan_decoder_free(&decoder);
    if (have_fit)
        clrun__plan_fit_free(&fit);
    if (have_sky)
        clrun__plan_skyline_free(&sky);
    free(b);
    free(offsets);
    free(order);
    return rc;
}

static int part_constructions(int quick, int seeds)
{
    char load[128];
    load_average(load, sizeof load);
    printf("\n4. constructions one by one (seed 1), CPU ms of this process, each with its peak\n"
           "   over the lower bound; load average %s\n", load);
    printf("%-9s %6s %6s %4s\n", "family", "n", "alive", "seed");
    const clrun_plan_gen_family families[] = {CLRUN_PLAN_GEN_RANDOM, CLRUN_PLAN_GEN_PERFECT,
                                              CLRUN_PLAN_GEN_BALANCED};
    const size_t sizes[] = {10000, 28000, 62000, 100000};
    int instances = 0;
    for (size_t s = 0; s < (quick ? 1 : 4); s++)
        for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
            for (int seed = 1; seed <= seeds; seed++, instances++)
                if (time_constructions(families[f], sizes[s], (uint64_t)seed) != 0)
                    return 1;
    static const char *const names[CONSTRUCTION_COUNT] = {
        "greedy-size",  "lowest-first-area", "xla-spatial",           "lowest-first-size",
        "xla-temporal", "greedy-area",       "lowest-first-lifetime", "time-sweep"};
    printf("best peak (ties count for each) in %d instances, and CPU ms in all:\n", instances);
    for (size_t i = 0; i < CONSTRUCTION_COUNT; i++)
        printf("    %-22s %3d  %9.1f ms\n", names[i], construction_wins[i], construction_ms[i]);
    return 0;
}

int main(int argc, char **argv)
{
    int seeds = 3, quick = 0, part = 0;
    double time_limit = 1.0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seeds") == 0 && i + 1 < argc)
            seeds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--time-limit") == 0 && i + 1 < argc)
            time_limit = atof(argv[++i]);
        else if (strcmp(argv[i], "--part") == 0 && i + 1 < argc)
            part = atoi(argv[++i]);
        else if (strcmp(argv[i], "--quick") == 0)
            quick = 1;
        else {
            fprintf(stderr, "usage: bench_plan [--seeds K] [--time-limit S] [--quick] "
                            "[--part 1|2|3|4]\n");
            return 2;
        }
    }
    if (seeds < 1)
        seeds = 1;
    setvbuf(stdout, NULL, _IOLBF, 0); /* rows show up as they are measured */
    char cpu[128];
    cpu_name(cpu, sizeof cpu);
    printf("bench_plan: alignment 1, CPU %s (one thread)\n", cpu);
    printf("families: random (uniform starts, geometric lifetimes, log-uniform sizes), perfect and\n"
           "balanced (guillotine-cut full rectangles: optimum = lower bound), unet (U-Net-like\n"
           "graphs), chain and wide (graph shapes), bumped (balanced, a quarter of the buffers\n"
           "one granule larger: optimum above the bound); baseline: the planner without its\n"
           "complete search (search_max_buffers = 0), in the same run\n\n");
    int rc = 0;
    if (rc == 0 && (part == 0 || part == 1))
        rc = part_quality(seeds, time_limit, quick);
    if (rc == 0 && (part == 0 || part == 2))
        rc = part_packings(seeds);
    if (rc == 0 && (part == 0 || part == 3))
        rc = part_growth(quick, time_limit);
    if (rc == 0 && part == 4)
        rc = part_constructions(quick, seeds);
    if (rc != 0)
        fprintf(stderr, "bench_plan: out of memory\n");
    return rc;
}
