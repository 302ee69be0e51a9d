/* clrun: allocation traces replayed through an allocator on a simulated pool, offsets only, no
 * device needed, so that allocators can be compared on real workloads (`clrun replay`).
 *
 * A trace is a list of buffers in the lifetime format (<clrun/lifetimes.h>): each buffer is
 * allocated at moment `lower` and freed at `upper`; at equal moments the frees come first, then
 * the allocations, each group in row order. Sizes are rounded up to the alignment as a device
 * pool rounds them.
 *
 * Allocators: every shipped strategy (clrun_strategy_find's names) through the allocator core,
 * so that chunk growth, rounding and placement are exactly those of a device pool; "binned",
 * PyOpenCL's MemoryPool (each request rounded up to the top of its bin, with 16 bins per power
 * of two, each block its own driver allocation occupying its size rounded up to the alignment,
 * as a driver's buffers start at multiples of the base-address alignment, a freed block kept
 * for a later request of the same bin, never given back); and "best-fit", a reference simulator of coalescing best fit in
 * one unbounded arena (the smallest hole that holds the request, the lowest such hole on ties,
 * else the top of the arena), what XLA's BFC allocator approaches within one region. */
#ifndef CLRUN_REPLAY_H
#define CLRUN_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <clrun/lifetimes.h>
#include <clrun/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The simulated device and what to measure. */
typedef struct clrun_replay_options {
    uint64_t alignment;  /* base-address alignment, a power of two; 0: 256 */
    uint64_t max_chunk;  /* the device's maximum allocation; 0: 1 GiB */
    uint64_t chunk_size; /* every chunk exactly this size (one large chunk: a preallocated
                          * arena), or 0: chunks grown with demand, as a device pool grows */
    uint64_t scale_to;   /* 0: sizes as given; else every size multiplied by scale_to over the
                          * trace's lower bound (at least 1 byte), to compare traces at a scale */
    bool timed;          /* also time further passes of the allocator's calls alone */
} clrun_replay_options;

/* What one allocator did with a trace. Ratios are taken to lower_bound. */
typedef struct clrun_replay_result {
    const char *allocator;   /* its name, as clrun_replay_allocator_name gives it */
    uint64_t lower_bound;    /* largest total of bytes live at any moment: what any allocator
                              * must hold (after scaling) */
    uint64_t peak_held;      /* largest total the allocator held for live blocks, its rounding
                              * included */
    uint64_t internal_waste; /* held minus asked-for at that moment */
    uint64_t reserved;       /* largest total of chunk bytes reserved: what a device pool pays */
    uint64_t footprint;      /* largest total, over chunks, of the end of each chunk's highest
                              * live block: what the pool would need if each chunk could be cut
                              * off after its highest live block (best-fit: its arena's top) */
    uint64_t chunks;         /* chunks (driver allocations) reserved, ever */
    double ns_per_op;        /* mean of the timed passes per allocation or free; 0 untimed or
                              * for best-fit, which is a reference, not an allocator */
} clrun_replay_result;

/* Replays `count` rows (their lower, upper and size; ids only name rows in messages) through
 * `allocator` (a name clrun_replay_allocator_name gives, case-insensitive). options may be NULL
 * for the defaults. CLRUN_ERROR_INVALID_ARGUMENT for an unknown allocator, an alignment that is
 * not a power of two or a chunk size below it; CLRUN_ERROR_INVALID_SIZE for a buffer larger than
 * a fixed chunk or the maximum allocation, naming the buffer ("buffer ID (row N, S bytes at
 * moment M): ..."); CLRUN_ERROR_OUT_OF_HOST_MEMORY. On failure `err` (may be NULL) says why. */
clrun_status clrun_replay(const clrun_lifetime *rows, size_t count, const char *allocator,
                          const clrun_replay_options *options, clrun_replay_result *out,
                          char *err, size_t errlen);

/* The i-th allocator clrun_replay takes: the strategies in registry order, then "binned" and
 * "best-fit"; NULL past the last. */
const char *clrun_replay_allocator_name(size_t i);

#ifdef __cplusplus
}
#endif
#endif
