/* The `binned` replay baseline: PyOpenCL's MemoryPool (src/mempool.hpp, memory_pool::allocate).
 *
 * A request is rounded up to the top of its bin (bins are powers of two split by the 4 leading
 * bits after the top one, PyOpenCL's default leading_bits_in_bin_id = 4), each block is its own
 * driver allocation (one clCreateBuffer of the bin's alloc_size), and a freed block is kept for
 * reuse by a later request of the same bin only, never given back. Every block being its own
 * buffer, its footprint is the lower bound; what it costs is `reserved`.
 *
 * What a block costs the device: its bin's size rounded up to the replay's alignment, the
 * device's base-address alignment (CL_DEVICE_MEM_BASE_ADDR_ALIGN). A driver starts every buffer
 * at an address that is a multiple of it, so no two buffers share an aligned granule, and a
 * 1-byte clCreateBuffer occupies at least one granule of device memory: the same rounding the
 * strategies' sub-buffers pay for their origins. (Real drivers round further, to pages or to
 * their own suballocation granule; the model charges only what OpenCL itself requires.) */
#include "memory/replay_internal.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BINNED_LEADING_BITS 4 /* PyOpenCL MemoryPool's default */
#define BIN_COUNT (64u << BINNED_LEADING_BITS)

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

typedef struct binned_pool {
    uint64_t alignment;          /* the device's base-address alignment, a power of two */
    uint32_t *cached[BIN_COUNT]; /* per bin, a stack of held free blocks (their ids) */
    uint32_t cached_count[BIN_COUNT];
    uint32_t cached_capacity[BIN_COUNT];
    uint32_t blocks;             /* driver allocations made, ever */
    uint64_t reserved;           /* their bytes: never given back */
} binned_pool;

static void binned_release(binned_pool *p)
{
    if (!p)
        return;
    for (uint32_t b = 0; b < BIN_COUNT; b++)
        free(p->cached[b]);
    free(p);
}

/* What one block of `bin` occupies on the device: its alloc_size, aligned (see the top). */
static uint64_t bin_device_size(const binned_pool *p, uint32_t bin)
{
    uint64_t size = bin_alloc_size(bin);
    return size > UINT64_MAX - (p->alignment - 1) ? size : (size + p->alignment - 1) & ~(p->alignment - 1);
}

/* Block id for `size`: a cached one of its bin, else a new driver allocation. */
static void binned_alloc(binned_pool *p, uint64_t size, uint32_t *block, uint64_t *held)
{
    uint32_t bin = bin_number(size);
    *held = bin_device_size(p, bin);
    if (p->cached_count[bin]) {
        *block = p->cached[bin][--p->cached_count[bin]];
        return;
    }
    *block = p->blocks++;
    p->reserved += *held;
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

/* One pass over the trace on fresh pool p; *out gets the memory figures when given. Timed by
 * the caller when `ns` is not NULL (the loop only, not the pool's creation). */
static bool binned_pass(const clrun__replay_trace *t, uint64_t alignment, uint32_t *blocks,
                        clrun_replay_result *out, double *ns)
{
    binned_pool *p = calloc(1, sizeof *p);
    if (p == NULL)
        return false;
    p->alignment = alignment;
    uint64_t held = 0, asked = 0;
    bool ok = true;
    double start = (clrun__now() * 1e9);
    for (size_t i = 0; ok && i < t->event_count; i++) {
        const clrun__replay_event *e = &t->events[i];
        uint64_t size = t->sizes[e->row], h;
        if (!e->alloc) {
            ok = binned_free(p, size, blocks[e->row]);
            held -= bin_device_size(p, bin_number(size));
            asked -= size;
            continue;
        }
        binned_alloc(p, size, &blocks[e->row], &h);
        held += h;
        asked += size;
        if (out && held > out->peak_held) {
            out->peak_held = held;
            out->internal_waste = held - asked;
        }
    }
    if (ns)
        *ns += (clrun__now() * 1e9) - start;
    if (out) {
        out->reserved = p->reserved;
        out->footprint = t->lower_bound; /* every block is its own buffer */
        out->chunks = p->blocks;
    }
    binned_release(p);
    return ok;
}

clrun_status clrun__replay_binned(const clrun__replay_trace *t, uint64_t alignment, bool timed,
                                  clrun_replay_result *out, char *err, size_t errlen)
{
    out->allocator = "binned";
    uint32_t *blocks = calloc(t->count ? t->count : 1, sizeof *blocks);
    bool ok = blocks && binned_pass(t, alignment, blocks, out, NULL);
    double total = 0.0;
    unsigned passes = 0;
    while (ok && timed && total < CLRUN__REPLAY_TIMED_NS_MIN && passes < CLRUN__REPLAY_TIMED_PASSES_MAX) {
        ok = binned_pass(t, alignment, blocks, NULL, &total);
        passes++;
    }
    free(blocks);
    if (!ok) {
        snprintf(err, errlen, "out of host memory");
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    out->ns_per_op = passes && t->event_count ? total / passes / (double)t->event_count : 0.0;
    return CLRUN_OK;
}
