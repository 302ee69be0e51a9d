/* Trace replay: a trace through a strategy on a simulated pool (include/clrun/replay.h).
 *
 * The strategies run under the allocator core (lib/memory/allocator.c) with a backing that
 * reserves nothing, so chunk growth, the strategy's rounding and its placement are exactly those
 * of a device pool. Measured per allocator:
 *  - peak held and the internal waste at that peak, from the blocks the strategy hands out;
 *  - reserved: the core's peak of chunk bytes;
 *  - footprint: per chunk, a max-heap of the ends of its live blocks (lazily pruned on free)
 *    gives the chunk's highest live end; their sum's peak is the footprint;
 *  - ns per operation (timed): further passes that make only the allocator's calls, on the same
 *    allocator with its chunks already reserved, so the time is the strategy's own work. */
#include "memory/replay_internal.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <clrun/strategy.h>

#include "memory/allocator.h"

#define DEFAULT_ALIGNMENT 256
#define DEFAULT_MAX_CHUNK (UINT64_C(1) << 30)

/* ---- the trace in replay order ---------------------------------------------------------------- */

static int event_order(const void *pa, const void *pb)
{
    const clrun__replay_event *a = pa, *b = pb;
    if (a->time != b->time)
        return a->time < b->time ? -1 : 1;
    if (a->alloc != b->alloc)
        return a->alloc ? 1 : -1; /* frees first */
    return a->row < b->row ? -1 : a->row > b->row;
}

static uint64_t live_peak(const clrun__replay_trace *t)
{
    uint64_t live = 0, peak = 0;
    for (size_t i = 0; i < t->event_count; i++) {
        const clrun__replay_event *e = &t->events[i];
        if (e->alloc) {
            live += t->sizes[e->row];
            if (live > peak)
                peak = live;
        } else {
            live -= t->sizes[e->row];
        }
    }
    return peak;
}

/* Multiplies every size by target / lower bound (at least 1 byte). */
static void scale_sizes(clrun__replay_trace *t, uint64_t target)
{
    if (target == 0 || t->lower_bound == 0)
        return;
    double factor = (double)target / (double)t->lower_bound;
    for (size_t i = 0; i < t->count; i++) {
        double scaled = (double)t->sizes[i] * factor + 0.5;
        t->sizes[i] = scaled < 1.0 ? 1 : scaled >= 18446744073709549568.0 ? UINT64_MAX / 2 : (uint64_t)scaled;
    }
    t->lower_bound = live_peak(t);
}

static void trace_release(clrun__replay_trace *t)
{
    free(t->sizes);
    free(t->events);
    memset(t, 0, sizeof *t);
}

static clrun_status trace_prepare(const clrun_lifetime *rows, size_t count, uint64_t scale_to,
                                  clrun__replay_trace *t, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    if (count > UINT32_MAX / 2) {
        snprintf(err, errlen, "too many buffers (%zu)", count);
        return CLRUN_ERROR_INVALID_ARGUMENT;
    }
    t->rows = rows;
    t->count = count;
    t->event_count = 2 * count;
    t->sizes = malloc((count ? count : 1) * sizeof *t->sizes);
    t->events = malloc((t->event_count ? t->event_count : 1) * sizeof *t->events);
    if (!t->sizes || !t->events) {
        trace_release(t);
        snprintf(err, errlen, "out of host memory for a trace of %zu buffers", count);
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    for (size_t i = 0; i < count; i++) {
        t->sizes[i] = rows[i].size;
        t->events[2 * i] = (clrun__replay_event){rows[i].lower, (uint32_t)i, true};
        t->events[2 * i + 1] = (clrun__replay_event){rows[i].upper, (uint32_t)i, false};
    }
    qsort(t->events, t->event_count, sizeof *t->events, event_order);
    t->lower_bound = live_peak(t);
    scale_sizes(t, scale_to);
    return CLRUN_OK;
}

/* ---- footprint: per chunk, a max-heap of live blocks' ends, lazily pruned ------------------------ */

typedef struct heap_item {
    uint64_t end;
    uint32_t row;
} heap_item;

typedef struct chunk_heap {
    heap_item *items;
    size_t count, capacity;
} chunk_heap;

typedef struct footprint_tracker {
    chunk_heap *heaps; /* by chunk id */
    size_t heap_count;
    const bool *live;  /* by row */
    uint64_t total;    /* sum of the chunks' highest live ends */
    uint64_t peak;
} footprint_tracker;

static uint64_t heap_top(const chunk_heap *h) { return h->count ? h->items[0].end : 0; }

static bool heap_push(chunk_heap *h, heap_item item)
{
    if (h->count == h->capacity) {
        size_t capacity = h->capacity ? h->capacity * 2 : 16;
        heap_item *grown = realloc(h->items, capacity * sizeof *grown);
        if (grown == NULL)
            return false;
        h->items = grown;
        h->capacity = capacity;
    }
    size_t i = h->count++;
    while (i > 0 && h->items[(i - 1) / 2].end < item.end) {
        h->items[i] = h->items[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->items[i] = item;
    return true;
}

static void heap_pop(chunk_heap *h)
{
    heap_item last = h->items[--h->count];
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= h->count)
            break;
        if (child + 1 < h->count && h->items[child + 1].end > h->items[child].end)
            child++;
        if (h->items[child].end <= last.end)
            break;
        h->items[i] = h->items[child];
        i = child;
    }
    if (h->count)
        h->items[i] = last;
}

static bool footprint_add(footprint_tracker *f, uint32_t chunk, uint64_t end, uint32_t row)
{
    if (chunk >= f->heap_count) {
        size_t count = f->heap_count ? f->heap_count : 8;
        while (count <= chunk)
            count *= 2;
        chunk_heap *grown = realloc(f->heaps, count * sizeof *grown);
        if (grown == NULL)
            return false;
        memset(grown + f->heap_count, 0, (count - f->heap_count) * sizeof *grown);
        f->heaps = grown;
        f->heap_count = count;
    }
    chunk_heap *h = &f->heaps[chunk];
    uint64_t before = heap_top(h);
    if (!heap_push(h, (heap_item){end, row}))
        return false;
    f->total += heap_top(h) - before;
    if (f->total > f->peak)
        f->peak = f->total;
    return true;
}

/* After row's block in `chunk` was freed (f->live[row] already false). */
static void footprint_remove(footprint_tracker *f, uint32_t chunk)
{
    chunk_heap *h = &f->heaps[chunk];
    uint64_t before = heap_top(h);
    while (h->count && !f->live[h->items[0].row])
        heap_pop(h);
    f->total -= before - heap_top(h);
}

static void footprint_release(footprint_tracker *f)
{
    for (size_t i = 0; i < f->heap_count; i++)
        free(f->heaps[i].items);
    free(f->heaps);
}

/* ---- the strategies, through the allocator core ------------------------------------------------- */

static clrun_status reserve_nothing(void *user, uint32_t chunk, uint64_t size, char *err, size_t errlen)
{
    (void)chunk, (void)size, (void)err, (void)errlen;
    (*(uint64_t *)user)++;
    return CLRUN_OK;
}

static void release_nothing(void *user, uint32_t chunk) { (void)user, (void)chunk; }

/* Only the allocator's calls, on the allocator of the measuring pass with every block freed
 * again: its chunks are reserved already. */
static clrun_status time_strategy(const clrun__replay_trace *t, clrun__allocator *a, clrun_block *blocks,
                                  double *ns_per_op, char *err, size_t errlen)
{
    double total = 0.0;
    unsigned passes = 0;
    do {
        double start = (clrun__now() * 1e9);
        for (size_t i = 0; i < t->event_count; i++) {
            const clrun__replay_event *e = &t->events[i];
            uint64_t size = t->sizes[e->row];
            clrun_status status = e->alloc
                ? clrun__allocator_alloc(a, size, 0, &blocks[e->row], err, errlen)
                : clrun__allocator_free(a, blocks[e->row].chunk, blocks[e->row].offset, size, err, errlen);
            if (status != CLRUN_OK)
                return status;
        }
        total += (clrun__now() * 1e9) - start;
        passes++;
    } while (total < CLRUN__REPLAY_TIMED_NS_MIN && passes < CLRUN__REPLAY_TIMED_PASSES_MAX);
    *ns_per_op = t->event_count ? total / passes / (double)t->event_count : 0.0;
    return CLRUN_OK;
}

static clrun_status replay_strategy(const clrun__replay_trace *t, const clrun_strategy_ops *ops,
                                    const clrun_replay_options *o, bool previous_growth,
                                    clrun_replay_result *out, char *err, size_t errlen)
{
    size_t n = t->count;
    clrun_block *blocks = calloc(n ? n : 1, sizeof *blocks);
    bool *live = calloc(n ? n : 1, sizeof *live);
    footprint_tracker f = {.live = live};
    uint64_t chunks = 0, held = 0, asked = 0;
    clrun__allocator *a = NULL;
    clrun_status status = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    if (blocks == NULL || live == NULL) {
        snprintf(err, errlen, "out of host memory");
        goto done;
    }
    clrun__allocator_config config = {
        .ops = ops,
        .min_align = o->alignment,
        .max_chunk = o->chunk_size ? o->chunk_size : o->max_chunk,
        .min_chunk = o->chunk_size, /* min = max: every chunk that size (0: the core's default) */
        .previous_growth = previous_growth,
        .backing = {.user = &chunks, .reserve = reserve_nothing, .release = release_nothing},
    };
    status = clrun__allocator_create(&config, &a, err, errlen);
    if (status != CLRUN_OK)
        goto done;
    out->allocator = ops->name;
    for (size_t i = 0; i < t->event_count; i++) {
        const clrun__replay_event *e = &t->events[i];
        uint64_t size = t->sizes[e->row];
        clrun_block *b = &blocks[e->row];
        if (e->alloc) {
            char why[1536];
            if (o->chunk_size && size > o->chunk_size) { /* the chunk size given, not the device's */
                status = CLRUN_ERROR_INVALID_SIZE;
                snprintf(why, sizeof why, "larger than the chunk size of %llu bytes asked for; a "
                         "block never spans two chunks", (unsigned long long)o->chunk_size);
            } else {
                status = clrun__allocator_alloc(a, size, 0, b, why, sizeof why);
            }
            if (status != CLRUN_OK) {
                const clrun_lifetime *row = &t->rows[e->row];
                snprintf(err, errlen, "buffer %llu (row %u, %llu bytes at moment %llu): %s",
                         (unsigned long long)row->id, e->row + 1, (unsigned long long)size,
                         (unsigned long long)row->lower, why);
                goto done;
            }
            live[e->row] = true;
            held += b->size;
            asked += size;
            if (held > out->peak_held) {
                out->peak_held = held;
                out->internal_waste = held - asked;
            }
            if (!footprint_add(&f, b->chunk, b->offset + size, e->row)) {
                status = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
                snprintf(err, errlen, "out of host memory");
                goto done;
            }
        } else {
            status = clrun__allocator_free(a, b->chunk, b->offset, size, err, errlen);
            if (status != CLRUN_OK)
                goto done;
            live[e->row] = false;
            held -= b->size;
            asked -= size;
            footprint_remove(&f, b->chunk);
        }
    }
    clrun_memory_stats s;
    clrun__allocator_stats(a, &s);
    out->reserved = s.reserved_peak;
    out->footprint = f.peak;
    out->chunks = chunks;
    status = o->timed ? time_strategy(t, a, blocks, &out->ns_per_op, err, errlen) : CLRUN_OK;
done:
    clrun__allocator_destroy(a);
    footprint_release(&f);
    free(blocks);
    free(live);
    return status;
}

/* ---- the public calls --------------------------------------------------------------------------- */

static const char *const baselines[] = {"binned", "best-fit"};

const char *clrun_replay_allocator_name(size_t i)
{
    const clrun_strategy_ops *ops = clrun_strategy_at(i);
    if (ops)
        return ops->name;
    for (size_t k = 0; clrun_strategy_at(k); k++)
        i--;
    return i < sizeof baselines / sizeof baselines[0] ? baselines[i] : NULL;
}


clrun_status clrun_replay(const clrun_lifetime *rows, size_t count, const char *allocator,
                          const clrun_replay_options *options, clrun_replay_result *out,
                          char *err, size_t errlen)
{
    return clrun__replay_run(rows, count, allocator, options, false, out, err, errlen);
}

clrun_status clrun__replay_run(const clrun_lifetime *rows, size_t count, const char *allocator,
                               const clrun_replay_options *options, bool previous_growth,
                               clrun_replay_result *out, char *err, size_t errlen)
{
    char ignored[8];
    if (err == NULL || errlen == 0) {
        err = ignored;
        errlen = sizeof ignored;
    }
    if (out == NULL || allocator == NULL || (count > 0 && rows == NULL)) {
        snprintf(err, errlen, "clrun_replay: NULL argument");
        return CLRUN_ERROR_INVALID_ARGUMENT;
    }
    memset(out, 0, sizeof *out);
    clrun_replay_options o = {0};
    if (options)
        o = *options;
    if (o.alignment == 0)
        o.alignment = DEFAULT_ALIGNMENT;
    if (o.max_chunk == 0)
        o.max_chunk = DEFAULT_MAX_CHUNK;
    if (!clrun__is_power_of_two(o.alignment)) {
        snprintf(err, errlen, "alignment %llu is not a power of two", (unsigned long long)o.alignment);
        return CLRUN_ERROR_INVALID_ARGUMENT;
    }
    if (o.chunk_size && o.chunk_size < o.alignment) {
        snprintf(err, errlen, "chunk size %llu is smaller than the alignment %llu",
                 (unsigned long long)o.chunk_size, (unsigned long long)o.alignment);
        return CLRUN_ERROR_INVALID_ARGUMENT;
    }
    const clrun_strategy_ops *ops = NULL;
    const char *baseline = NULL;
    for (size_t i = 0; !ops && !baseline && clrun_replay_allocator_name(i); i++) {
        if (strcasecmp(allocator, clrun_replay_allocator_name(i)) != 0)
            continue;
        ops = clrun_strategy_at(i);
        if (!ops)
            baseline = clrun_replay_allocator_name(i);
    }
    if (!ops && !baseline) {
        snprintf(err, errlen, "unknown allocator '%s'", allocator);
        return CLRUN_ERROR_INVALID_ARGUMENT;
    }
    clrun__replay_trace t;
    clrun_status status = trace_prepare(rows, count, o.scale_to, &t, err, errlen);
    if (status != CLRUN_OK)
        return status;
    if (ops)
        status = replay_strategy(&t, ops, &o, previous_growth, out, err, errlen);
    else if (strcmp(baseline, "binned") == 0)
        status = clrun__replay_binned(&t, o.alignment, o.timed, out, err, errlen);
    else
        status = clrun__replay_best_fit(&t, o.alignment, out, err, errlen);
    out->lower_bound = t.lower_bound;
    trace_release(&t);
    if (status != CLRUN_OK) {
        const char *name = out->allocator;
        memset(out, 0, sizeof *out);
        out->allocator = name;
    }
    return status;
}
