/* bench_plan: quality and speed of the static memory planner.
 *
 * Part 1, quality: for each instance family and size, the peak over the lower bound of the
 * greedy baselines (TFLite greedy by size, XLA's spatial and temporal orders) and of
 * clrun_plan_solve within its time limit, averaged over seeds, with clrun's planner time and
 * how many of its plans were proven optimal.
 * Part 2, speed: how the lower bound, one greedy pass and clrun_plan_solve with its default
 * 1 s limit grow with n = 1k, 10k, 50k, beside the most buffers alive at once.
 *
 * usage: bench_plan [--seeds K] [--time-limit S] [--quick]
 * (--quick: sizes 100 and 1000 only, and growth up to 10k) */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <clrun/plan.h>

#include "plan_gen.h"

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

typedef struct quality_row {
    double greedy[3]; /* summed ratios: size, spatial, temporal */
    double clrun;     /* summed ratio of clrun_plan_solve */
    double ms;        /* summed planner time */
    int optimal;      /* plans proven optimal */
} quality_row;

static int run_quality(clrun_plan_gen_family family, size_t n, int seeds, double time_limit,
                       quality_row *row)
{
    clrun_plan_buffer *b = malloc(n * sizeof *b);
    uint64_t *offsets = malloc(n * sizeof *offsets);
    if (!b || !offsets)
        goto oom;
    memset(row, 0, sizeof *row);
    for (int seed = 1; seed <= seeds; seed++) {
        if (clrun_plan_gen(family, n, (uint64_t)seed, b, NULL) != CLRUN_OK)
            goto oom;
        uint64_t lb, peak;
        if (clrun_plan_lower_bound(b, n, 1, &lb) != CLRUN_OK)
            goto oom;
        const clrun_plan_order orders[3] = {CLRUN_PLAN_ORDER_SIZE, CLRUN_PLAN_ORDER_SPATIAL,
                                            CLRUN_PLAN_ORDER_TEMPORAL};
        for (int o = 0; o < 3; o++) {
            if (clrun_plan_greedy(b, n, 1, orders[o], offsets, &peak) != CLRUN_OK)
                goto oom;
            row->greedy[o] += (double)peak / (double)lb;
        }
        clrun_plan_options opts = CLRUN_PLAN_OPTIONS_DEFAULT;
        opts.time_limit_s = time_limit;
        opts.seed = (uint64_t)seed;
        clrun_plan_result r;
        if (clrun_plan_solve(b, n, &opts, offsets, &r) != CLRUN_OK)
            goto oom;
        row->clrun += (double)r.peak_bytes / (double)r.lower_bound_bytes;
        row->ms += r.planner_ms;
        row->optimal += r.optimal;
    }
    free(b);
    free(offsets);
    return 0;
oom:
    free(b);
    free(offsets);
    return 1;
}

static int run_growth(clrun_plan_gen_family family, size_t n)
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
    clrun_plan_result r;
    if (clrun_plan_solve(b, n, NULL, offsets, &r) != CLRUN_OK)
        goto done;
    printf("%-9s %7zu %6zu %10.2f %10.2f %8.3f %12.1f %8.3f  %s\n",
           clrun_plan_gen_family_name(family), n, max_alive(b, n), (t1 - t0) * 1e3,
           (t2 - t1) * 1e3, (double)peak / (double)lb, r.planner_ms,
           (double)r.peak_bytes / (double)r.lower_bound_bytes, r.method);
    rc = 0;
done:
    free(b);
    free(offsets);
    return rc;
}

int main(int argc, char **argv)
{
    int seeds = 3;
    double time_limit = 1.0;
    int quick = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seeds") == 0 && i + 1 < argc)
            seeds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--time-limit") == 0 && i + 1 < argc)
            time_limit = atof(argv[++i]);
        else if (strcmp(argv[i], "--quick") == 0)
            quick = 1;
        else {
            fprintf(stderr, "usage: bench_plan [--seeds K] [--time-limit S] [--quick]\n");
            return 2;
        }
    }
    if (seeds < 1)
        seeds = 1;
    setvbuf(stdout, NULL, _IOLBF, 0); /* rows show up as they are measured */
    char cpu[128];
    cpu_name(cpu, sizeof cpu);
    printf("bench_plan: seeds 1..%d, time limit %g s, alignment 1, CPU %s (one thread)\n", seeds,
           time_limit, cpu);
    printf("families: random (uniform starts, geometric lifetimes, log-uniform sizes), perfect and\n"
           "balanced (guillotine-cut full rectangles: optimum = lower bound), unet (U-Net-like graphs)\n\n");

    const size_t sizes[] = {100, 1000, 10000};
    size_t size_count = quick ? 2 : 3;
    printf("peak / lower bound, mean over seeds (1.000 = optimal)\n");
    printf("%-9s %6s %12s %12s %12s %12s %12s %8s\n", "family", "n", "greedy-size", "xla-spatial",
           "xla-temporal", "clrun", "clrun ms", "proven");
    for (int f = 0; f < CLRUN_PLAN_GEN_COUNT; f++) {
        for (size_t s = 0; s < size_count; s++) {
            quality_row row;
            if (run_quality((clrun_plan_gen_family)f, sizes[s], seeds, time_limit, &row) != 0) {
                fprintf(stderr, "bench_plan: out of memory\n");
                return 1;
            }
            printf("%-9s %6zu %12.3f %12.3f %12.3f %12.3f %12.1f %5d/%d\n",
                   clrun_plan_gen_family_name((clrun_plan_gen_family)f), sizes[s],
                   row.greedy[0] / seeds, row.greedy[1] / seeds, row.greedy[2] / seeds,
                   row.clrun / seeds, row.ms / seeds, row.optimal, seeds);
        }
    }

    printf("\ntime growth (seed 1): lower bound, one greedy-size pass, clrun_plan_solve (1 s limit)\n");
    printf("%-9s %7s %6s %10s %10s %8s %12s %8s  %s\n", "family", "n", "alive", "bound ms",
           "greedy ms", "ratio", "clrun ms", "ratio", "method");
    const size_t growth[] = {1000, 10000, 50000};
    size_t growth_count = quick ? 2 : 3;
    for (int f = 0; f < CLRUN_PLAN_GEN_COUNT; f++)
        for (size_t s = 0; s < growth_count; s++)
            if (run_growth((clrun_plan_gen_family)f, growth[s]) != 0) {
                fprintf(stderr, "bench_plan: out of memory\n");
                return 1;
            }
    return 0;
}
