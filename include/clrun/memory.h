/* clrun: device memory from the context's pool.
 *
 * The pool reserves large backing buffers (chunks, each at most CL_DEVICE_MAX_MEM_ALLOC_SIZE)
 * from the driver as demand grows and carves blocks out of them with the context's strategy
 * (CLRUN_ALLOCATOR: tlsf, the default, buddy, slab or bump). Each block is handed out as a
 * cl_mem sub-buffer whose origin is aligned to the device's base-address alignment. A block never straddles chunks and
 * a sub-buffer is never made from a sub-buffer.
 *
 * Sizes: a size of 0 is rejected with CLRUN_ERROR_INVALID_SIZE (OpenCL has no empty buffers,
 * and an empty tensor needs no memory); a size above the device's maximum allocation is
 * CLRUN_ERROR_INVALID_SIZE too, since no chunk could hold it. */
#ifndef CLRUN_MEMORY_H
#define CLRUN_MEMORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* clrun's API is OpenCL 1.2: say so before the headers do (they otherwise warn and pick 3.0). */
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include <clrun/context.h>
#include <clrun/memory_stats.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A block of device memory. A value: copy it freely; free it once. */
typedef struct clrun_buffer {
    cl_mem mem;          /* sub-buffer of exactly `size` bytes; owned by the pool */
    uint64_t size;       /* bytes asked for */
    uint32_t chunk;      /* where it lives (for diagnostics) */
    uint64_t offset;     /* byte offset of `mem` inside its chunk */
    uint32_t slot;       /* private: the pool's record of the block */
    uint32_t generation; /* private: tells a stale copy from the live block */
} clrun_buffer;

/* A block of `size` bytes aligned to the device's base-address alignment. On failure *out is
 * zeroed and clrun_last_error(ctx) says what was asked for and what the pool held. */
clrun_status clrun_alloc(clrun_context *ctx, uint64_t size, clrun_buffer *out);

/* The same with an alignment (a power of two) for the block's offset inside its chunk; values
 * below the device's alignment are raised to it. `label` (may be NULL) names the block in guard
 * reports and in the allocation log. */
clrun_status clrun_alloc_ex(clrun_context *ctx, uint64_t size, uint64_t alignment,
                            const char *label, clrun_buffer *out);

/* Returns a block to the pool, which may hand it out again at once. On an in-order queue (the
 * default) work already enqueued that uses the block stays valid, since whatever a new owner
 * enqueues runs after it. On an out-of-order queue (CLRUN_QUEUE=out-of-order) free a block only
 * once the commands using it are complete (clFinish, or their events). Executors give their
 * blocks back in stream order instead: the pool keeps each block's last commands, and every
 * later owner of those bytes waits for them (an executor's first command that uses them; a
 * clrun_alloc, which hands them out only once they are complete), so executors sharing one
 * context need no such care. CLRUN_ERROR_INVALID_FREE, with nothing changed, for a block that
 * is not live: freed already, from another context, or never allocated. In guard mode,
 * CLRUN_ERROR_GUARD when its red zones were overwritten (the block is still freed). */
clrun_status clrun_free(clrun_context *ctx, clrun_buffer *buffer);

/* Uploads host data into a buffer / downloads it (blocking; exactly buffer->size bytes). */
clrun_status clrun_buffer_write(clrun_context *ctx, const clrun_buffer *buffer, const void *host);
clrun_status clrun_buffer_read(clrun_context *ctx, const clrun_buffer *buffer, void *host);

/* The calls below that take a context refuse a NULL one with CLRUN_ERROR_INVALID_ARGUMENT
 * (clrun_memory_reset_peaks does nothing). */

/* Gives every chunk that holds no live block back to the driver; *released (may be NULL) gets
 * the bytes returned. */
clrun_status clrun_pool_trim(clrun_context *ctx, uint64_t *released);

/* For the bump strategy and per-run scratch: forgets every live block at once and keeps the
 * chunks. Every clrun_buffer of the context becomes invalid. */
clrun_status clrun_pool_reset(clrun_context *ctx);

/* Guard mode (CLRUN_DEBUG=guard): checks every live block's red zones now. CLRUN_ERROR_GUARD
 * naming the first damaged block (label, size, where the damage starts); CLRUN_OK when all are
 * intact or guard mode is off. */
clrun_status clrun_pool_check(clrun_context *ctx);


/* Fills *out (zeros and the strategy's name when nothing was allocated yet). */
clrun_status clrun_memory_stats_get(clrun_context *ctx, clrun_memory_stats *out);

/* Starts in_use_peak and reserved_peak again from the current values. */
void clrun_memory_reset_peaks(clrun_context *ctx);

#ifdef __cplusplus
}
#endif
#endif
