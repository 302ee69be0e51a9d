/* clrun replay: an allocation trace through a strategy on a simulated pool.
 *
 * The trace is the buffer-lifetime CSV of published memory-planner benchmarks (id,lower,upper,
 * size): each buffer is allocated at moment `lower` and freed at `upper`; at equal moments the
 * frees come first, then the allocations, each group in file order. The replay drives the
 * allocator core (lib/memory/allocator.c) with a backing that reserves nothing, so chunk growth, the
 * strategy's rounding and its placement are exactly those of a device pool, offsets only.
 *
 * Measured, per allocator:
 *  - lower bound: the largest total of bytes live at any moment (what any allocator must hold);
 *  - peak held: the largest total of bytes the allocator holds for live blocks, its rounding
 *    included; held minus asked-for at that moment is the internal waste (buddy's powers of two);
 *  - reserved: the largest total of chunk bytes reserved (what a device pool pays);
 *  - footprint: the largest total, over chunks, of the end of each chunk's highest live block
 *    (offset + bytes asked for), i.e. what the pool would need if every chunk could be cut off
 *    after its highest live block;
 *  - ns per operation: further timed passes that make only the allocator's calls, on the same
 *    allocator with its chunks already reserved (the binned pool: from empty).
 *
 * The `binned` baseline is PyOpenCL's MemoryPool: a request is rounded up to the top of its bin
 * (bins are powers of two split by the 4 leading bits after the top one, PyOpenCL's default
 * leading_bits_in_bin_id = 4), each block is its own driver allocation, and a freed block is
 * kept for reuse by a later request of the same bin only, never given back. Every block being
 * its own buffer, its footprint is the lower bound; what it costs is `reserved`. */
#include <errno.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <clrun/clrun.h>
#include <clrun/lifetimes.h>
#include <clrun/strategy.h>

#include "memory/allocator.h"
#include "cli.h"
#include "device/context.h"
#include "core/options.h"

#define DEFAULT_MAX_CHUNK (UINT64_C(1) << 30) /* without a device: 1 GiB */
#define DEFAULT_ALIGNMENT 256                 /* without a device */
#define BINNED_LEADING_BITS 4                 /* PyOpenCL MemoryPool's default */
#define TIMED_NS_MIN 20000000.0               /* repeat the timed pass for at least 20 ms */
#define TIMED_PASSES_MAX 50

static void print_help(void)
{
    printf("usage: clrun replay --csv TRACE.csv [--allocator NAME] [--chunk-size BYTES]\n"
           "                    [--alignment BYTES] [--json]\n\n"
           "Replays an allocation trace through an allocator on a simulated pool (offsets only, no\n"
           "device needed), so that strategies can be compared on real workloads. The trace is the\n"
           "CSV of memory-planner benchmarks, header id,lower,upper,size: each buffer is allocated at\n"
           "moment lower and freed at upper (frees before allocations at equal moments).\n\n"
           "  --csv FILE          the trace ('-' reads standard input)\n"
           "  --allocator NAME    buddy, slab, bump, binned (PyOpenCL's MemoryPool, for comparison)\n"
           "                      or all (the default): a table of every one\n"
           "  --chunk-size BYTES  every chunk this size (K/M/G suffixes); default: grown with demand\n"
           "                      as on a device, up to the default device's maximum allocation\n"
           "                      (CLRUN_PLATFORM/CLRUN_DEVICE select it), or 1 GiB without a device\n"
           "  --alignment BYTES   block alignment; default: the device's base-address alignment, or 256\n"
           "  --json              one JSON object (with 'all': {\"results\": [...]})\n\n"
           "Reported: peak held (live blocks with the allocator's rounding; held minus asked-for is\n"
           "the internal waste), peak reserved (chunk bytes), footprint (largest total over chunks\n"
           "of the end of each chunk's highest live block), the lower bound (largest total of live\n"
           "bytes at any moment), chunks, and nanoseconds per allocation or free.\n"
           "Exit status: 0 success, 2 usage error or malformed trace (FILE:LINE: message), 1 otherwise.\n");
}

/* One allocation or free of the trace, in replay order. */
typedef struct event {
    uint64_t time; /* the moment */
    uint32_t row;  /* index of the buffer in the trace */
    bool alloc;    /* false: free */
} event;

static int event_order(const void *pa, const void *pb)
{
    const event *a = pa, *b = pb;
    if (a->time != b->time)
        return a->time < b->time ? -1 : 1;
    if (a->alloc != b->alloc)
        return a->alloc ? 1 : -1; /* frees first */
    return a->row < b->row ? -1 : a->row > b->row;
}

/* What one allocator did with the trace. */
typedef struct result {
    const char *allocator;  /* its name */
    uint64_t peak_held;     /* largest total held for live blocks, rounding included */
    uint64_t waste_at_peak; /* held minus asked-for at that moment */
    uint64_t reserved;      /* peak bytes of chunks */
    uint64_t footprint;     /* see the top comment */
    uint64_t lower_bound;   /* largest total of live bytes */
    uint64_t chunks;        /* chunks (driver allocations) reserved, ever */
    double ns_per_op;       /* of the timed pass */
} result;

/* The trace and how to replay it. */
typedef struct replay {
    const char *filename;      /* for messages */
    const clrun_lifetimes *rows;
    event *events;             /* 2 per row, sorted */
    size_t event_count;
    uint64_t alignment;        /* min_align of the simulated device */
    uint64_t max_chunk;        /* its maximum allocation */
    uint64_t fixed_chunk;      /* --chunk-size, or 0 */
} replay;

/* ---- footprint bookkeeping: per chunk, a max-heap of live blocks' ends, lazily pruned ---- */

typedef struct heap_item {
    uint64_t end;
    uint32_t row;
} heap_item;

typedef struct chunk_heap {
    heap_item *items;
    size_t count, capacity;
} chunk_heap;

typedef struct footprint_tracker {
    chunk_heap *heaps;  /* by chunk id */
    size_t heap_count;
    const bool *live;   /* by row */
    uint64_t total;     /* sum of the chunks' highest live ends */
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

/* ---- the strategies, through the allocator core ---- */

static clrun_status reserve_nothing(void *user, uint32_t chunk, uint64_t size, char *err, size_t errlen)
{
    (void)chunk, (void)size, (void)err, (void)errlen;
    (*(uint64_t *)user)++;
    return CLRUN_OK;
}

static void release_nothing(void *user, uint32_t chunk) { (void)user, (void)chunk; }

static clrun_status make_allocator(const replay *r, const clrun_allocator_ops *ops, uint64_t *chunks,
                                   clrun__allocator **out, char *err, size_t errlen)
{
    clrun__allocator_config config = {
        .ops = ops,
        .min_align = r->alignment,
        .max_chunk = r->fixed_chunk ? r->fixed_chunk : r->max_chunk,
        .min_chunk = r->fixed_chunk, /* min = max: every chunk that size (0: the core's default) */
        .backing = {.user = chunks, .reserve = reserve_nothing, .release = release_nothing},
    };
    return clrun__allocator_create(&config, out, err, errlen);
}

static double elapsed_ns(const struct timespec *from, const struct timespec *to)
{
    return (double)(to->tv_sec - from->tv_sec) * 1e9 + (double)(to->tv_nsec - from->tv_nsec);
}

/* Only the allocator's calls, for ns per operation, on the allocator of the measuring pass
 * with every block freed again: its chunks are reserved already, so the time is that of the
 * strategy's own work, not of the host bookkeeping of new chunks. */
static int time_strategy(const replay *r, clrun__allocator *a, clrun_block *blocks, double *ns_per_op,
                         char *err, size_t errlen)
{
    double total = 0.0;
    unsigned passes = 0;
    do {
        struct timespec start, stop;
        clock_gettime(CLOCK_MONOTONIC, &start);
        for (size_t i = 0; i < r->event_count; i++) {
            const event *e = &r->events[i];
            const clrun_lifetime *row = &r->rows->items[e->row];
            clrun_status status = e->alloc
                ? clrun__allocator_alloc(a, row->size, 0, &blocks[e->row], err, errlen)
                : clrun__allocator_free(a, blocks[e->row].chunk, blocks[e->row].offset, row->size, err, errlen);
            if (status != CLRUN_OK)
                return 1;
        }
        clock_gettime(CLOCK_MONOTONIC, &stop);
        total += elapsed_ns(&start, &stop);
        passes++;
    } while (total < TIMED_NS_MIN && passes < TIMED_PASSES_MAX);
    *ns_per_op = r->event_count ? total / passes / (double)r->event_count : 0.0;
    return 0;
}

static int replay_strategy(const replay *r, const clrun_allocator_ops *ops, result *out, char *err,
                           size_t errlen)
{
    size_t n = r->rows->count;
    clrun_block *blocks = calloc(n ? n : 1, sizeof *blocks);
    bool *live = calloc(n ? n : 1, sizeof *live);
    footprint_tracker f = {.live = live};
    uint64_t chunks = 0;
    clrun__allocator *a = NULL;
    int rc = 1;
    if (blocks == NULL || live == NULL) {
        snprintf(err, errlen, "out of host memory");
        goto done;
    }
    if (make_allocator(r, ops, &chunks, &a, err, errlen) != CLRUN_OK)
        goto done;
    uint64_t held = 0, asked = 0;
    memset(out, 0, sizeof *out);
    out->allocator = ops->name;
    for (size_t i = 0; i < r->event_count; i++) {
        const event *e = &r->events[i];
        const clrun_lifetime *row = &r->rows->items[e->row];
        clrun_block *b = &blocks[e->row];
        if (e->alloc) {
            char why[1536];
            if (clrun__allocator_alloc(a, row->size, 0, b, why, sizeof why) != CLRUN_OK) {
                snprintf(err, errlen, "%s: buffer %llu (row %u, %llu bytes at moment %llu): %s", r->filename,
                         (unsigned long long)row->id, e->row + 1, (unsigned long long)row->size,
                         (unsigned long long)row->lower, why);
                goto done;
            }
            live[e->row] = true;
            held += b->size;
            asked += row->size;
            if (held > out->peak_held) {
                out->peak_held = held;
                out->waste_at_peak = held - asked;
            }
            if (!footprint_add(&f, b->chunk, b->offset + row->size, e->row)) {
                snprintf(err, errlen, "out of host memory");
                goto done;
            }
        } else {
            if (clrun__allocator_free(a, b->chunk, b->offset, row->size, err, errlen) != CLRUN_OK)
                goto done;
            live[e->row] = false;
            held -= b->size;
            asked -= row->size;
            footprint_remove(&f, b->chunk);
        }
    }
    clrun_memory_stats s;
    clrun__allocator_stats(a, &s);
    out->reserved = s.reserved_peak;
    out->lower_bound = s.in_use_peak;
    out->footprint = f.peak;
    out->chunks = chunks;
    rc = time_strategy(r, a, blocks, &out->ns_per_op, err, errlen);
done:
    clrun__allocator_destroy(a);
    footprint_release(&f);
    free(blocks);
    free(live);
    return rc;
}

/* ---- the binned baseline: PyOpenCL's MemoryPool ---- */

static unsigned bitlog2(uint64_t x)
{
    unsigned l = 0;
    while (x >>= 1)
        l++;
    return l;
}

/* PyOpenCL's bin_number: the exponent, then the BINNED_LEADING_BITS bits after the top one. */
static uint32_t bin_number(uint64_t size)
{
    unsigned l = bitlog2(size);
    uint64_t shifted = l >= BINNED_LEADING_BITS ? size >> (l - BINNED_LEADING_BITS)
                                                : size << (BINNED_LEADING_BITS - l);
    uint64_t chopped = shifted & ((UINT64_C(1) << BINNED_LEADING_BITS) - 1);
    return (uint32_t)(l << BINNED_LEADING_BITS | chopped);
}

/* PyOpenCL's alloc_size: the largest size of the bin, what the driver is asked for. */
static uint64_t bin_alloc_size(uint32_t bin)
{
    unsigned exponent = bin >> BINNED_LEADING_BITS;
    uint64_t mantissa = bin & ((1u << BINNED_LEADING_BITS) - 1);
    uint64_t head = (UINT64_C(1) << BINNED_LEADING_BITS) | mantissa;
    if (exponent >= BINNED_LEADING_BITS) {
        unsigned shift = exponent - BINNED_LEADING_BITS;
        return head << shift | ((UINT64_C(1) << shift) - 1);
    }
    return head >> (BINNED_LEADING_BITS - exponent);
}

#define BIN_COUNT (64u << BINNED_LEADING_BITS)

typedef struct binned_pool {
    uint32_t *cached[BIN_COUNT]; /* per bin, a stack of held free blocks (their ids) */
    uint32_t cached_count[BIN_COUNT];
    uint32_t cached_capacity[BIN_COUNT];
    uint32_t blocks;             /* driver allocations made, ever */
    uint64_t reserved;           /* their bytes: never given back */
} binned_pool;

static void binned_release(binned_pool *p)
{
    for (uint32_t b = 0; b < BIN_COUNT; b++)
        free(p->cached[b]);
    free(p);
}

/* Block id for `size`: a cached one of its bin, else a new driver allocation. */
static bool binned_alloc(binned_pool *p, uint64_t size, uint32_t *block, uint64_t *held)
{
    uint32_t bin = bin_number(size);
    *held = bin_alloc_size(bin);
    if (p->cached_count[bin]) {
        *block = p->cached[bin][--p->cached_count[bin]];
        return true;
    }
    *block = p->blocks++;
    p->reserved += *held;
    return true;
}

static bool binned_free(binned_pool *p, uint64_t size, uint32_t block)
{
    uint32_t bin = bin_number(size);
    if (p->cached_count[bin] == p->cached_capacity[bin]) {
        uint32_t capacity = p->cached_capacity[bin] ? p->cached_capacity[bin] * 2 : 8;
        uint32_t *grown = realloc(p->cached[bin], capacity * sizeof *grown);
        if (grown == NULL)
            return false;
        p->cached[bin] = grown;
        p->cached_capacity[bin] = capacity;
    }
    p->cached[bin][p->cached_count[bin]++] = block;
    return true;
}

static int replay_binned(const replay *r, result *out, char *err, size_t errlen)
{
    size_t n = r->rows->count;
    uint32_t *blocks = calloc(n ? n : 1, sizeof *blocks);
    binned_pool *p = calloc(1, sizeof *p);
    int rc = 1;
    if (blocks == NULL || p == NULL) {
        snprintf(err, errlen, "out of host memory");
        goto done;
    }
    memset(out, 0, sizeof *out);
    out->allocator = "binned";
    uint64_t held = 0, asked = 0, live = 0;
    for (size_t i = 0; i < r->event_count; i++) {
        const event *e = &r->events[i];
        uint64_t size = r->rows->items[e->row].size, h;
        if (e->alloc) {
            binned_alloc(p, size, &blocks[e->row], &h);
            held += h;
            asked += size;
            live += size;
            if (held > out->peak_held) {
                out->peak_held = held;
                out->waste_at_peak = held - asked;
            }
            if (live > out->lower_bound)
                out->lower_bound = live;
        } else {
            if (!binned_free(p, size, blocks[e->row])) {
                snprintf(err, errlen, "out of host memory");
                goto done;
            }
            held -= bin_alloc_size(bin_number(size));
            asked -= size;
            live -= size;
        }
    }
    out->reserved = p->reserved;
    out->footprint = out->lower_bound; /* every block is its own buffer */
    out->chunks = p->blocks;
    binned_release(p);
    p = NULL;

    double total = 0.0;
    unsigned passes = 0;
    do {
        p = calloc(1, sizeof *p);
        if (p == NULL) {
            snprintf(err, errlen, "out of host memory");
            goto done;
        }
        struct timespec start, stop;
        bool ok = true;
        clock_gettime(CLOCK_MONOTONIC, &start);
        for (size_t i = 0; ok && i < r->event_count; i++) {
            const event *e = &r->events[i];
            uint64_t size = r->rows->items[e->row].size, h;
            ok = e->alloc ? binned_alloc(p, size, &blocks[e->row], &h) : binned_free(p, size, blocks[e->row]);
        }
        clock_gettime(CLOCK_MONOTONIC, &stop);
        binned_release(p);
        p = NULL;
        if (!ok) {
            snprintf(err, errlen, "out of host memory");
            goto done;
        }
        total += elapsed_ns(&start, &stop);
        passes++;
    } while (total < TIMED_NS_MIN && passes < TIMED_PASSES_MAX);
    out->ns_per_op = r->event_count ? total / passes / (double)r->event_count : 0.0;
    rc = 0;
done:
    if (p)
        binned_release(p);
    free(blocks);
    return rc;
}

/* ---- output ---- */

static double ratio(uint64_t x, uint64_t lower_bound)
{
    return lower_bound ? (double)x / (double)lower_bound : 0.0;
}

static json_object *result_json(const result *res, const replay *r)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "allocator", json_object_new_string(res->allocator));
    json_object_object_add(o, "peak_bytes", json_object_new_int64((int64_t)res->peak_held));
    json_object_object_add(o, "internal_waste_bytes", json_object_new_int64((int64_t)res->waste_at_peak));
    json_object_object_add(o, "reserved_bytes", json_object_new_int64((int64_t)res->reserved));
    json_object_object_add(o, "footprint_bytes", json_object_new_int64((int64_t)res->footprint));
    json_object_object_add(o, "lower_bound_bytes", json_object_new_int64((int64_t)res->lower_bound));
    json_object_object_add(o, "reserved_ratio", json_object_new_double(ratio(res->reserved, res->lower_bound)));
    json_object_object_add(o, "footprint_ratio", json_object_new_double(ratio(res->footprint, res->lower_bound)));
    json_object_object_add(o, "chunks", json_object_new_int64((int64_t)res->chunks));
    json_object_object_add(o, "ns_per_op", json_object_new_double(res->ns_per_op));
    json_object_object_add(o, "buffers", json_object_new_int64((int64_t)r->rows->count));
    json_object_object_add(o, "operations", json_object_new_int64((int64_t)r->event_count));
    json_object_object_add(o, "alignment", json_object_new_int64((int64_t)r->alignment));
    json_object_object_add(o, "max_chunk_bytes", json_object_new_int64((int64_t)r->max_chunk));
    json_object_object_add(o, "fixed_chunk_bytes", json_object_new_int64((int64_t)r->fixed_chunk));
    return o;
}

/* "12.3 MiB 1.24x" into buf. */
static const char *with_ratio(uint64_t bytes, uint64_t lower_bound, char *buf, size_t size)
{
    char human[32];
    clrun__format_bytes(bytes, human, sizeof human);
    snprintf(buf, size, "%s %5.2fx", human, ratio(bytes, lower_bound));
    return buf;
}

static void print_table(const replay *r, const result *results, size_t count, const char *device_note)
{
    char lb[32], align[32], chunk[32];
    uint64_t lower_bound = count ? results[0].lower_bound : 0;
    printf("trace %s: %zu buffers, %zu operations, lower bound %s\n", r->filename, r->rows->count,
           r->event_count, clrun__format_bytes(lower_bound, lb, sizeof lb));
    if (r->fixed_chunk)
        printf("chunks of %s (--chunk-size), alignment %s\n",
               clrun__format_bytes(r->fixed_chunk, chunk, sizeof chunk),
               clrun__format_bytes(r->alignment, align, sizeof align));
    else
        printf("chunks grown with demand up to %s (%s), alignment %s\n",
               clrun__format_bytes(r->max_chunk, chunk, sizeof chunk), device_note,
               clrun__format_bytes(r->alignment, align, sizeof align));
    printf("\n%-8s %22s %22s %22s %7s %22s %9s\n", "", "peak held", "reserved", "footprint", "chunks",
           "internal waste", "ns/op");
    for (size_t i = 0; i < count; i++) {
        const result *res = &results[i];
        char held[48], reserved[48], footprint[48], waste[48], human[32];
        snprintf(waste, sizeof waste, "%s %5.1f%%", clrun__format_bytes(res->waste_at_peak, human, sizeof human),
                 res->peak_held ? 100.0 * (double)res->waste_at_peak / (double)res->peak_held : 0.0);
        printf("%-8s %22s %22s %22s %7llu %22s %9.1f\n", res->allocator,
               with_ratio(res->peak_held, lower_bound, held, sizeof held),
               with_ratio(res->reserved, lower_bound, reserved, sizeof reserved),
               with_ratio(res->footprint, lower_bound, footprint, sizeof footprint),
               (unsigned long long)res->chunks, waste, res->ns_per_op);
    }
    printf("\nratios are to the lower bound; internal waste is held minus asked-for at the held peak;\n"
           "binned (PyOpenCL's MemoryPool) makes one buffer per block, so its footprint is the lower bound\n");
}

/* ---- the simulated device ---- */

/* The default device's maximum allocation and alignment, as a context would choose it; the
 * defaults, and no error, when there is no device. */
static void default_device(uint64_t *max_alloc, uint64_t *alignment, char *note, size_t notelen)
{
    *max_alloc = DEFAULT_MAX_CHUNK;
    *alignment = DEFAULT_ALIGNMENT;
    snprintf(note, notelen, "no device: 1 GiB");
    clrun_device_info *list = NULL;
    size_t count = 0, chosen = 0;
    if (clrun_device_list(&list, &count) != CLRUN_OK)
        return;
    if (clrun_device_select(list, count, getenv("CLRUN_PLATFORM"), getenv("CLRUN_DEVICE"), &chosen) == CLRUN_OK &&
        list[chosen].max_alloc > 0) {
        *max_alloc = list[chosen].max_alloc;
        *alignment = list[chosen].base_addr_align;
        snprintf(note, notelen, "the maximum allocation of device %zu, %s", chosen, list[chosen].name);
    }
    clrun_device_list_free(list);
}

static bool is_power_of_two(uint64_t x) { return x && !(x & (x - 1)); }

/* "buddy|slab|bump|binned|all" */
static void valid_names(char *buf, size_t size)
{
    snprintf(buf, size, "%s|binned|all", clrun_strategy_names());
}

int clrun_cli_replay(int argc, char **argv)
{
    const char *csv = NULL, *allocator = "all";
    uint64_t chunk_size = 0, alignment = 0;
    int json = 0;
    char names[128];
    valid_names(names, sizeof names);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            print_help();
            return 0;
        } else if (strcmp(arg, "--json") == 0) {
            json = 1;
        } else if (strcmp(arg, "--csv") == 0 || strcmp(arg, "--allocator") == 0 ||
                   strcmp(arg, "--chunk-size") == 0 || strcmp(arg, "--alignment") == 0) {
            if (value == NULL)
                return clrun_cli_usage_error("replay", "%s needs a value", arg);
            i++;
            if (strcmp(arg, "--csv") == 0) {
                csv = value;
            } else if (strcmp(arg, "--allocator") == 0) {
                allocator = value;
            } else if (strcmp(arg, "--chunk-size") == 0) {
                if (!clrun__parse_size(value, &chunk_size) || chunk_size == 0)
                    return clrun_cli_usage_error("replay", "--chunk-size '%s': expected bytes > 0, with an optional K/M/G suffix", value);
            } else if (!clrun__parse_size(value, &alignment) || !is_power_of_two(alignment)) {
                return clrun_cli_usage_error("replay", "--alignment '%s': expected a power of two", value);
            }
        } else {
            return clrun_cli_usage_error("replay", "unknown option '%s'", arg);
        }
    }
    if (csv == NULL)
        return clrun_cli_usage_error("replay", "--csv TRACE.csv is required");
    bool all = strcmp(allocator, "all") == 0, binned = strcmp(allocator, "binned") == 0;
    const clrun_allocator_ops *single = all || binned ? NULL : clrun_strategy_find(allocator);
    if (!all && !binned && single == NULL)
        return clrun_cli_usage_error("replay", "unknown allocator '%s': valid names are %s", allocator, names);

    FILE *in = strcmp(csv, "-") == 0 ? stdin : fopen(csv, "r");
    if (in == NULL) {
        fprintf(stderr, "clrun replay: cannot open %s: %s\n", csv, strerror(errno));
        return 1;
    }
    clrun_lifetimes rows;
    clrun_lifetimes_init(&rows);
    char err[2048];
    clrun_status status = clrun_lifetimes_read(in, strcmp(csv, "-") == 0 ? "<stdin>" : csv, &rows, err, sizeof err);
    if (in != stdin)
        fclose(in);
    if (status != CLRUN_OK) {
        fprintf(stderr, "%s\n", err);
        return status == CLRUN_ERROR_PARSE ? 2 : 1;
    }
    if (rows.count > UINT32_MAX / 2) {
        fprintf(stderr, "clrun replay: %s: too many buffers (%zu)\n", csv, rows.count);
        clrun_lifetimes_free(&rows);
        return 1;
    }

    replay r = {.filename = csv, .rows = &rows, .alignment = alignment, .fixed_chunk = chunk_size};
    char device_note[320] = "--chunk-size";
    if (chunk_size == 0 || alignment == 0) {
        uint64_t device_align;
        default_device(&r.max_chunk, &device_align, device_note, sizeof device_note);
        if (r.alignment == 0)
            r.alignment = device_align;
    }
    if (chunk_size)
        r.max_chunk = chunk_size;
    if (chunk_size && chunk_size < r.alignment) {
        clrun_lifetimes_free(&rows);
        return clrun_cli_usage_error("replay", "--chunk-size %llu is smaller than the alignment %llu",
                                     (unsigned long long)chunk_size, (unsigned long long)r.alignment);
    }

    int rc = 0;
    result results[8];
    size_t result_count = 0;
    r.event_count = 2 * rows.count;
    r.events = malloc((r.event_count ? r.event_count : 1) * sizeof *r.events);
    if (r.events == NULL) {
        fprintf(stderr, "clrun replay: out of host memory\n");
        clrun_lifetimes_free(&rows);
        return 1;
    }
    for (size_t i = 0; i < rows.count; i++) {
        r.events[2 * i] = (event){rows.items[i].lower, (uint32_t)i, true};
        r.events[2 * i + 1] = (event){rows.items[i].upper, (uint32_t)i, false};
    }
    qsort(r.events, r.event_count, sizeof *r.events, event_order);

    const clrun_allocator_ops *const strategies[] = {&clrun_strategy_buddy, &clrun_strategy_slab, &clrun_strategy_bump};
    for (size_t i = 0; rc == 0 && i < sizeof strategies / sizeof strategies[0]; i++)
        if (all || single == strategies[i])
            rc = replay_strategy(&r, strategies[i], &results[result_count++], err, sizeof err);
    if (rc == 0 && (all || binned))
        rc = replay_binned(&r, &results[result_count++], err, sizeof err);

    if (rc != 0) {
        fprintf(stderr, "clrun replay: %s\n", err);
    } else if (json) {
        json_object *root;
        if (all) {
            root = json_object_new_object();
            json_object_object_add(root, "trace", json_object_new_string(csv));
            json_object_object_add(root, "buffers", json_object_new_int64((int64_t)rows.count));
            json_object_object_add(root, "lower_bound_bytes", json_object_new_int64((int64_t)results[0].lower_bound));
            json_object *list = json_object_new_array();
            for (size_t i = 0; i < result_count; i++)
                json_object_array_add(list, result_json(&results[i], &r));
            json_object_object_add(root, "results", list);
        } else {
            root = result_json(&results[0], &r);
            json_object_object_add(root, "trace", json_object_new_string(csv));
        }
        printf("%s\n", json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(root);
    } else {
        print_table(&r, results, result_count, device_note);
    }
    free(r.events);
    clrun_lifetimes_free(&rows);
    return rc;
}
