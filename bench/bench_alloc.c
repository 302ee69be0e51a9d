/* bench_alloc: the cost of the allocator strategies, with glibc malloc/free measured in the
 * same run as the baseline. Not a test: it prints a table and always exits 0 unless a strategy
 * misbehaves.
 *
 * Workloads (each one a trace generated once from the seed, so every allocator replays the
 * same operations):
 *  - fixed N: alloc+free pairs of N bytes (256 B, 4 KiB, 1 MiB) in a tight loop, the
 *    strategies with one chunk already added;
 *  - mixed: random sizes (mostly small, some large), random frees, a steady live set;
 *  - tensor: a training-step-like trace: per layer a long-lived activation kept until the
 *    backward pass plus stack-like temporaries, sizes drawn from a few dozen tensor shapes.
 * Strategies start with no chunk and add chunks on demand the way the pool does: empty chunks
 * are given back, then a new chunk is chunk_size(request, align, wanted) with wanted the request
 * when it is at least the floor, else the floor, max(16 KiB, reserved / 64 when the strategy's
 * free bytes are under a 64th of it, else reserved / 16), and at least the bytes given back;
 * at most 1 GiB.
 * Time: CLOCK_MONOTONIC around the whole replay, reported as ns per alloc+free pair: the median
 * of REPEATS rounds, each round running malloc and then every strategy once (interleaved, so
 * that a slow spell of a shared machine falls on one round's allocators alike); the ratio (x)
 * is the median over the rounds of the strategy's time over malloc's in the same round.
 * Memory (mixed workload, a separate untimed replay): peak held bytes and peak chunk bytes over
 * the peak of requested bytes live.
 *
 * Usage: bench_alloc [seed]    (CLRUN_BENCH_QUICK=1 runs a tenth of the operations) */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <clrun/strategy.h>

#include "../tests/rng.h"

#define KiB (UINT64_C(1) << 10)
#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)

#define REPEATS 7
#define MIN_ALIGN 256
#define MAX_CHUNK GiB
#define MAX_BENCH_CHUNKS 4096 /* chunk ids a replay may use */

/* One step of a trace: allocate into a slot, or free the slot. */
typedef struct trace_op {
    uint32_t slot;  /* which live block */
    uint32_t alloc; /* 1: allocate `size` bytes into slot; 0: free slot */
    uint64_t size;  /* bytes requested */
} trace_op;

typedef struct trace {
    const char *name;
    trace_op *ops;
    size_t n, cap;
    uint32_t slots; /* slots used (the largest live set) */
    uint64_t allocs;
} trace;

static uint64_t rng;

static uint64_t rand64(void) { return rng_next(&rng); }

static uint64_t rand_range(uint64_t lo, uint64_t hi) { return rng_range(&rng, lo, hi); }

static void die(const char *what)
{
    fprintf(stderr, "bench_alloc: %s\n", what);
    exit(1);
}

static void trace_push(trace *t, uint32_t slot, int alloc, uint64_t size)
{
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 4096;
        t->ops = realloc(t->ops, t->cap * sizeof *t->ops);
        if (!t->ops)
            die("out of host memory");
    }
    t->ops[t->n++] = (trace_op){.slot = slot, .alloc = (uint32_t)alloc, .size = size};
    if (slot + 1 > t->slots)
        t->slots = slot + 1;
    t->allocs += alloc != 0;
}

/* ---- traces --------------------------------------------------------------------------------- */

static uint64_t mixed_size(void)
{
    uint64_t r = rand64() % 100;
    if (r < 50)
        return rand_range(1, 1024);
    if (r < 80)
        return rand_range(1025, 64 * KiB);
    if (r < 92) {
        uint64_t p = UINT64_C(1) << rand_range(4, 20);
        return p + rand_range(0, 2) - 1;
    }
    return rand_range(64 * KiB, 4 * MiB);
}

/* Random sizes and random frees around a steady live set of `live` blocks. */
static trace trace_mixed(size_t allocs, uint32_t live)
{
    trace t = {.name = "mixed"};
    uint32_t *free_slots = malloc(live * 2 * sizeof *free_slots);
    uint32_t *used = malloc(live * 2 * sizeof *used);
    if (!free_slots || !used)
        die("out of host memory");
    uint32_t nfree = 0, nused = 0;
    for (uint32_t i = live * 2; i-- > 0;)
        free_slots[nfree++] = i;
    while (t.allocs < allocs) {
        bool grow = nused < live ? rand64() % 100 < 60 : rand64() % 100 < 40;
        if ((grow && nfree) || !nused) {
            uint32_t slot = free_slots[--nfree];
            used[nused++] = slot;
            trace_push(&t, slot, 1, mixed_size());
        } else {
            uint32_t i = (uint32_t)(rand64() % nused);
            uint32_t slot = used[i];
            used[i] = used[--nused];
            free_slots[nfree++] = slot;
            trace_push(&t, slot, 0, 0);
        }
    }
    while (nused)
        trace_push(&t, used[--nused], 0, 0);
    free(free_slots);
    free(used);
    return t;
}

/* Training steps of a `layers`-deep network: forward keeps one activation per layer and uses
 * stack-like temporaries; backward frees the activations in reverse, with its own temporaries.
 * Sizes are batch x width x 4 bytes for a few dozen widths. */
static trace trace_tensor(size_t steps, uint32_t layers)
{
    static const uint64_t widths[] = {64,   96,   128,  192,  256,  384,  512,  768,  1024,
                                      1536, 2048, 3072, 4096, 5120, 8192, 11008, 16384, 32000};
    static const uint64_t batches[] = {1, 2, 8, 32};
    const size_t nwidths = sizeof widths / sizeof widths[0];
    trace t = {.name = "tensor"};
    uint64_t *layer_size = malloc(layers * sizeof *layer_size);
    if (!layer_size)
        die("out of host memory");
    uint64_t batch = batches[rand64() % 4];
    for (uint32_t l = 0; l < layers; l++)
        layer_size[l] = batch * widths[rand64() % nwidths] * 4;
    const uint32_t tmp = layers; /* temporaries use slots above the activations */
    for (size_t s = 0; s < steps; s++) {
        for (uint32_t l = 0; l < layers; l++) {
            uint32_t depth = (uint32_t)rand_range(1, 4);
            for (uint32_t d = 0; d < depth; d++)
                trace_push(&t, tmp + d, 1, batch * widths[rand64() % nwidths] * 4);
            trace_push(&t, l, 1, layer_size[l]);
            for (uint32_t d = depth; d-- > 0;)
                trace_push(&t, tmp + d, 0, 0);
        }
        for (uint32_t l = layers; l-- > 0;) {
            uint32_t depth = (uint32_t)rand_range(1, 3);
            for (uint32_t d = 0; d < depth; d++)
                trace_push(&t, tmp + d, 1, layer_size[l] * (d + 1));
            for (uint32_t d = depth; d-- > 0;)
                trace_push(&t, tmp + d, 0, 0);
            trace_push(&t, l, 0, 0);
        }
    }
    free(layer_size);
    return t;
}

/* ---- replay --------------------------------------------------------------------------------- */

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void *volatile sink; /* keeps the compiler from pairing malloc with free away */

/* ns per alloc+free pair of glibc malloc/free over the trace. */
static double replay_malloc(const trace *t, void **slots)
{
    double start = now_ns();
    for (size_t i = 0; i < t->n; i++) {
        const trace_op *o = &t->ops[i];
        if (o->alloc) {
            slots[o->slot] = malloc(o->size);
            if (!slots[o->slot])
                die("malloc failed");
            sink = slots[o->slot];
        } else {
            free(slots[o->slot]);
        }
    }
    return (now_ns() - start) / (double)t->allocs;
}

/* What the memory replay measures. */
typedef struct mem_peaks {
    uint64_t requested; /* peak of requested bytes live */
    uint64_t held;      /* peak of held bytes (block sizes) live */
    uint64_t chunks;    /* peak of chunk bytes reserved */
} mem_peaks;

/* Replays the trace on a fresh strategy, adding chunks like the pool; ns per pair. Fills
 * *peaks when asked (that replay is slower and is not timed). */
static double replay_strategy(const clrun_strategy_ops *ops, const trace *t, clrun_block *slots,
                              uint64_t *requested, mem_peaks *peaks)
{
    clrun_strategy_config config = {.min_align = MIN_ALIGN, .max_chunk = MAX_CHUNK};
    void *st;
    if (ops->create(&config, &st) != CLRUN_OK)
        die("create failed");
    uint64_t reserved = 0, held = 0, live_requested = 0;
    uint32_t next_chunk = 0;
    static uint64_t chunk_bytes[MAX_BENCH_CHUNKS]; /* by chunk id; 0: given back */
    memset(chunk_bytes, 0, sizeof chunk_bytes);
    double start = now_ns();
    for (size_t i = 0; i < t->n; i++) {
        const trace_op *o = &t->ops[i];
        if (!o->alloc) {
            if (ops->free(st, slots[o->slot].chunk, slots[o->slot].offset) != CLRUN_OK)
                die("free failed");
            if (peaks) {
                held -= slots[o->slot].size;
                live_requested -= requested[o->slot];
            }
            continue;
        }
        clrun_status rc = ops->alloc(st, o->size, 1, &slots[o->slot]);
        if (rc == CLRUN_ERROR_OUT_OF_MEMORY) {
            /* The pool's growth rule (lib/memory/allocator.c): empty chunks back, then one chunk
             * of the request or the floor, whichever is larger, and at least what was given back. */
            uint64_t given_back = 0;
            for (uint32_t c = 0; c < next_chunk; c++) {
                if (chunk_bytes[c] && ops->chunk_is_empty(st, c) && ops->remove_chunk(st, c) == CLRUN_OK) {
                    given_back += chunk_bytes[c];
                    reserved -= chunk_bytes[c];
                    chunk_bytes[c] = 0;
                }
            }
            clrun_strategy_stats ss;
            ops->stats(st, &ss);
            uint64_t floor = reserved / (ss.free_bytes <= reserved / 64 ? 64 : 16);
            if (floor < 16 * KiB)
                floor = 16 * KiB;
            uint64_t wanted = o->size >= floor ? o->size : floor;
            if (given_back > wanted)
                wanted = given_back;
            uint64_t cs = ops->chunk_size(st, o->size, 1, wanted);
            if (cs == 0 || next_chunk == MAX_BENCH_CHUNKS || ops->add_chunk(st, next_chunk, cs) != CLRUN_OK)
                die("add_chunk failed");
            chunk_bytes[next_chunk++] = cs;
            reserved += cs;
            rc = ops->alloc(st, o->size, 1, &slots[o->slot]);
        }
        if (rc != CLRUN_OK)
            die("alloc failed after adding a chunk");
        if (peaks) {
            requested[o->slot] = o->size;
            held += slots[o->slot].size;
            live_requested += o->size;
            if (held > peaks->held)
                peaks->held = held;
            if (live_requested > peaks->requested)
                peaks->requested = live_requested;
            if (reserved > peaks->chunks)
                peaks->chunks = reserved;
        }
    }
    double ns = (now_ns() - start) / (double)t->allocs;
    ops->destroy(st);
    return ns;
}

/* ns per pair of `pairs` alloc+free pairs of `size` bytes, in a tight loop: malloc. */
static double pairs_malloc(uint64_t size, size_t pairs)
{
    double start = now_ns();
    for (size_t i = 0; i < pairs; i++) {
        void *p = malloc(size);
        if (!p)
            die("malloc failed");
        sink = p;
        free(p);
    }
    return (now_ns() - start) / (double)pairs;
}

/* The same for a strategy, with one chunk already added (as a warm pool has). */
static double pairs_strategy(const clrun_strategy_ops *ops, uint64_t size, size_t pairs)
{
    clrun_strategy_config config = {.min_align = MIN_ALIGN, .max_chunk = MAX_CHUNK};
    void *st;
    if (ops->create(&config, &st) != CLRUN_OK)
        die("create failed");
    uint64_t cs = ops->chunk_size(st, size, 1, 64 * MiB);
    if (cs == 0 || ops->add_chunk(st, 0, cs) != CLRUN_OK)
        die("add_chunk failed");
    clrun_block b;
    double start = now_ns();
    for (size_t i = 0; i < pairs; i++) {
        if (ops->alloc(st, size, 1, &b) != CLRUN_OK || ops->free(st, b.chunk, b.offset) != CLRUN_OK)
            die("alloc or free failed");
    }
    double ns = (now_ns() - start) / (double)pairs;
    ops->destroy(st);
    return ns;
}

/* One run of a workload, ns per pair; strategy NULL means malloc. A workload is a trace, or,
 * for fixed sizes (fixed_size != 0), a tight alloc+free loop. */
static double run_ns(const clrun_strategy_ops *ops, const trace *t, uint64_t fixed_size,
                     size_t pairs, void **ptrs, clrun_block *blocks)
{
    if (fixed_size)
        return ops ? pairs_strategy(ops, fixed_size, pairs) : pairs_malloc(fixed_size, pairs);
    return ops ? replay_strategy(ops, t, blocks, NULL, NULL) : replay_malloc(t, ptrs);
}

static double median_of(double *v, size_t n)
{
    qsort(v, n, sizeof v[0], cmp_double);
    return v[n / 2];
}

static const clrun_strategy_ops *const strategies[] = {&clrun_strategy_buddy, &clrun_strategy_slab,
                                                        &clrun_strategy_bump, &clrun_strategy_tlsf};
enum { NSTRAT = sizeof strategies / sizeof strategies[0] };

/* REPEATS rounds of a workload, each running malloc and then every strategy once, so that a
 * slow spell of a shared machine falls on the allocators of one round alike. ns[a] is the
 * median time of allocator a (0 malloc, 1.. the strategies), ratio[a] the median over the
 * rounds of its time over malloc's in the same round. */
static void measure_workload(const trace *t, uint64_t fixed_size, size_t pairs,
                             double ns[1 + NSTRAT], double ratio[1 + NSTRAT])
{
    double runs[1 + NSTRAT][REPEATS], ratios[1 + NSTRAT][REPEATS];
    void **ptrs = calloc(t->slots + 1, sizeof *ptrs);
    clrun_block *blocks = calloc(t->slots + 1, sizeof *blocks);
    if (!ptrs || !blocks)
        die("out of host memory");
    for (int r = 0; r < REPEATS; r++) {
        for (int a = 0; a <= NSTRAT; a++) {
            runs[a][r] = run_ns(a ? strategies[a - 1] : NULL, t, fixed_size, pairs, ptrs, blocks);
            ratios[a][r] = runs[a][r] / runs[0][r];
        }
    }
    free(ptrs);
    free(blocks);
    for (int a = 0; a <= NSTRAT; a++) {
        ns[a] = median_of(runs[a], REPEATS);
        ratio[a] = median_of(ratios[a], REPEATS);
    }
}

static void cpu_model(char *out, size_t len)
{
    snprintf(out, len, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *colon = strchr(line, ':');
            if (colon) {
                colon += 1 + (colon[1] == ' ');
                colon[strcspn(colon, "\n")] = '\0';
                snprintf(out, len, "%s", colon);
            }
            break;
        }
    }
    fclose(f);
}

int main(int argc, char **argv)
{
    uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 0) : 42;
    const char *quick_env = getenv("CLRUN_BENCH_QUICK");
    size_t scale = quick_env && *quick_env && *quick_env != '0' ? 10 : 1;
    const size_t pairs = 1000000 / scale, mixed_allocs = 1000000 / scale;
    const size_t tensor_steps = 2000 / scale;
    const uint32_t mixed_live = 1000, tensor_layers = 48;
    rng = seed;
    trace traces[] = {
        {.name = "fixed 256 B"},
        {.name = "fixed 4 KiB"},
        {.name = "fixed 1 MiB"},
        trace_mixed(mixed_allocs, mixed_live),
        trace_tensor(tensor_steps, tensor_layers),
    };
    const uint64_t fixed_sizes[] = {256, 4 * KiB, MiB, 0, 0};
    const size_t ntraces = sizeof traces / sizeof traces[0];

    char cpu[256], date[64];
    cpu_model(cpu, sizeof cpu);
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S UTC", gmtime(&now));
    printf("# bench_alloc: clrun strategies vs glibc malloc/free, measured in the same run\n");
    printf("# date %s; cpu %s; seed %llu; median of %d interleaved rounds; min_align %d, max_chunk 1 GiB\n",
           date, cpu, (unsigned long long)seed, REPEATS, MIN_ALIGN);
    printf("# fixed: %zu pairs each (tight loop); mixed: %zu allocs, ~%u live; tensor: %zu steps x %u "
           "layers (%llu allocs)\n",
           pairs, mixed_allocs, mixed_live, tensor_steps, tensor_layers,
           (unsigned long long)traces[4].allocs);
    printf("# ns per alloc+free pair; (x) = median of the rounds' ratios to malloc, lower is better\n\n");
    printf("%-12s %10s", "workload", "malloc");
    for (int s = 0; s < NSTRAT; s++)
        printf(" %10s %7s", strategies[s]->name, "(x)");
    printf("\n");
    for (size_t w = 0; w < ntraces; w++) {
        double ns[1 + NSTRAT], ratio[1 + NSTRAT];
        measure_workload(&traces[w], fixed_sizes[w], pairs, ns, ratio);
        printf("%-12s %10.1f", traces[w].name, ns[0]);
        for (int s = 0; s < NSTRAT; s++)
            printf(" %10.1f %7.2f", ns[1 + s], ratio[1 + s]);
        printf("\n");
    }

    const trace *mixed = &traces[3];
    clrun_block *blocks = calloc(mixed->slots, sizeof *blocks);
    uint64_t *requested = calloc(mixed->slots, sizeof *requested);
    if (!blocks || !requested)
        die("out of host memory");
    printf("\n# memory, mixed workload: peaks over the peak of requested bytes live\n");
    printf("%-12s %14s %10s %10s\n", "strategy", "peak req MiB", "held/req", "chunks/req");
    for (int s = 0; s < NSTRAT; s++) {
        mem_peaks p = {0, 0, 0};
        replay_strategy(strategies[s], mixed, blocks, requested, &p);
        printf("%-12s %14.1f %10.2f %10.2f\n", strategies[s]->name,
               (double)p.requested / (double)MiB, (double)p.held / (double)p.requested,
               (double)p.chunks / (double)p.requested);
    }
    free(blocks);
    free(requested);
    for (size_t w = 0; w < ntraces; w++)
        free(traces[w].ops);
    return 0;
}
