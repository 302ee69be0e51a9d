/* Memory of real model graphs (not a test). For each .graph given, in one run: the executor's
 * alloc/free sequence (its schedule: last uses, in-place reuse) replayed through every strategy
 * on a simulated pool (the allocator core, offsets only), greedy-by-size, and the static
 * planner, each as peak / lower bound, plus the planner's time.
 *
 * For a strategy two figures: footprint (the largest total over chunks of each chunk's highest
 * live block end: what an arena of its layout would need) and reserved (bytes of chunks reserved
 * under the pool's growth policy, with a 1 GiB maximum chunk: what a user pays).
 *
 *   bench/bench_models [--time-limit S] [--alignment A] FILE.graph...
 *   (make examples writes the model graphs to examples/generated/)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <clrun/clrun.h>
#include <clrun/plan.h>

#include "memory/allocator.h"
#include "graph/graph.h"
#include "exec/schedule.h"

static clrun_status reserve_nothing(void *user, uint32_t chunk, uint64_t size, char *err, size_t errlen)
{
    (void)user, (void)chunk, (void)size, (void)err, (void)errlen;
    return CLRUN_OK;
}

static void release_nothing(void *user, uint32_t chunk) { (void)user, (void)chunk; }

typedef struct live_block {
    clrun_block block;
    uint64_t size;
} live_block;

typedef struct replay_result {
    uint64_t footprint;
    uint64_t reserved;
} replay_result;

/* Sum over chunks of the end of each chunk's highest live block. */
static uint64_t footprint_now(const live_block *live, const bool *is_live, int32_t n)
{
    uint64_t ends[64] = {0};
    for (int32_t b = 0; b < n; b++) {
        if (!is_live[b] || live[b].block.chunk >= 64)
            continue;
        uint64_t end = live[b].block.offset + live[b].block.size;
        if (end > ends[live[b].block.chunk])
            ends[live[b].block.chunk] = end;
    }
    uint64_t total = 0;
    for (int c = 0; c < 64; c++)
        total += ends[c];
    return total;
}

static replay_result replay(const clrun__schedule *s, const clrun_strategy_ops *ops, uint64_t alignment)
{
    /* A 1 GiB chunk limit as on POCL, raised to the largest buffer's power of two where a model
     * has a larger one (GPT-2's logits at batch 8), which a device with a larger maximum
     * allocation could hold. */
    uint64_t max_chunk = (uint64_t)1 << 30;
    for (int32_t b = 0; b < s->buffer_count; b++)
        while (max_chunk < s->buffers[b].bytes)
            max_chunk <<= 1;
    clrun__allocator_config config = {.ops = ops, .min_align = alignment, .max_chunk = max_chunk,
                                      .backing = {NULL, reserve_nothing, release_nothing}};
    clrun__allocator *a = NULL;
    char err[1024];
    if (clrun__allocator_create(&config, &a, err, sizeof err) != CLRUN_OK) {
        fprintf(stderr, "bench_models: %s\n", err);
        exit(1);
    }
    live_block *live = calloc((size_t)s->buffer_count + 1, sizeof *live);
    bool *is_live = calloc((size_t)s->buffer_count + 1, sizeof *is_live);
    replay_result r = {0, 0};
    /* Inputs first, then per step: new buffers, then the releases after it. */
    for (int32_t step = -1; step < s->steps; step++) {
        for (int32_t b = 0; b < s->buffer_count; b++) {
            const clrun__sched_buffer *sb = &s->buffers[b];
            if (sb->is_constant || sb->first != step)
                continue;
            if (clrun__allocator_alloc(a, sb->bytes, 0, &live[b].block, err, sizeof err) != CLRUN_OK) {
                fprintf(stderr, "bench_models: %s\n", err);
                exit(1);
            }
            live[b].size = sb->bytes;
            is_live[b] = true;
        }
        uint64_t f = footprint_now(live, is_live, s->buffer_count);
        if (f > r.footprint)
            r.footprint = f;
        for (int32_t i = step >= 0 ? s->release_start[step] : 0; step >= 0 && i < s->release_start[step + 1]; i++) {
            int32_t b = s->release_list[i];
            clrun__allocator_free(a, live[b].block.chunk, live[b].block.offset, live[b].size, err, sizeof err);
            is_live[b] = false;
        }
    }
    clrun_memory_stats st;
    clrun__allocator_stats(a, &st);
    r.reserved = st.reserved_peak;
    clrun__allocator_destroy(a);
    free(live);
    free(is_live);
    return r;
}

int main(int argc, char **argv)
{
    double time_limit = 1.0;
    uint64_t alignment = 256;
    int first = 1;
    while (first + 1 < argc && argv[first][0] == '-') {
        if (strcmp(argv[first], "--time-limit") == 0)
            time_limit = atof(argv[first + 1]);
        else if (strcmp(argv[first], "--alignment") == 0)
            alignment = strtoull(argv[first + 1], NULL, 10);
        else
            break;
        first += 2;
    }
    if (first >= argc) {
        fprintf(stderr, "usage: bench_models [--time-limit S] [--alignment A] FILE.graph...\n");
        return 2;
    }
    time_t now = time(NULL);
    printf("# bench_models: peak / lower bound; alignment %llu B, planner limit %.1f s, 1 GiB max chunk; %s",
           (unsigned long long)alignment, time_limit, ctime(&now));
    printf("# strategy columns: footprint/bound (reserved/bound); lower bound = largest live total\n");
    printf("%-22s %6s %11s", "graph", "bufs", "bound MiB");
    for (size_t k = 0; clrun_strategy_at(k); k++)
        printf(" %15s", clrun_strategy_at(k)->name);
    printf(" %8s %8s %10s\n", "greedy", "planner", "plan ms");
    for (int f = first; f < argc; f++) {
        char err[2048];
        clrun_graph *g = NULL;
        if (clrun_graph_load(argv[f], &g, err, sizeof err) != CLRUN_OK) {
            fprintf(stderr, "%s\n", err);
            return 2;
        }
        clrun__schedule s;
        if (clrun__schedule_build(g, true, &s, err, sizeof err) != CLRUN_OK) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        clrun_plan_buffer *items;
        int32_t *which;
        size_t n;
        clrun__schedule_plan_items(&s, true, &items, &which, &n);
        uint64_t bound = 0, greedy_peak = 0;
        clrun_plan_lower_bound(items, n, alignment, &bound);
        uint64_t *offsets = calloc(n + 1, sizeof *offsets);
        clrun_plan_greedy(items, n, alignment, CLRUN_PLAN_ORDER_SIZE, offsets, &greedy_peak);
        clrun_plan_options o = CLRUN_PLAN_OPTIONS_DEFAULT;
        o.time_limit_s = time_limit;
        o.alignment = alignment;
        clrun_plan_result pr;
        clrun_plan_solve(items, n, &o, offsets, &pr);
        const char *name = strrchr(argv[f], '/') ? strrchr(argv[f], '/') + 1 : argv[f];
        printf("%-22s %6zu %11.2f", name, n, (double)bound / 1048576.0);
        for (size_t k = 0; clrun_strategy_at(k); k++) {
            replay_result r = replay(&s, clrun_strategy_at(k), alignment);
            char cell[32];
            snprintf(cell, sizeof cell, "%.2f (%.2f)", (double)r.footprint / (double)bound,
                     (double)r.reserved / (double)bound);
            printf(" %15s", cell);
        }
        printf(" %8.3f %8.3f %10.1f\n", (double)greedy_peak / (double)bound, (double)pr.peak_bytes / (double)bound,
               pr.planner_ms);
        free(offsets);
        free(items);
        free(which);
        clrun__schedule_free(&s);
        clrun_graph_destroy(g);
    }
    return 0;
}
