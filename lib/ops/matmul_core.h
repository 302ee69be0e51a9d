/* The matrix-product core that matmul and conv2d share (lib/ops/matmul_core.c): what the device
 * is, the programs specialised per device and epilogue, the variants and their one-time tuning,
 * and the packing of B into panels. */
#ifndef CLRUN_LIB_OPS_MATMUL_CORE_H
#define CLRUN_LIB_OPS_MATMUL_CORE_H

#include "ops/ops_internal.h"

/* What the core needs to know of the device. */
typedef struct clrun__core_device {
    /* CL_DEVICE_LOCAL_MEM_TYPE is CL_GLOBAL (CPUs): local memory is ordinary cache and barriers
     * split kernels into loops, so the register-blocked core of matmul_core.cl runs; otherwise
     * the local-memory tiles of matmul.cl. */
    bool registers;
    unsigned vw; /* floats per vector: the device's preferred (or native) width, 4, 8 or 16 */
} clrun__core_device;

/* The device of ctx, or the kernels the tests force (clrun__ops_kernels). */
clrun_status clrun__core_device_of(clrun_context *ctx, clrun__core_device *out);

/* A variant of the core: MR rows per work-item, LM row blocks per work-group, and (matmul) SP
 * panels per block of work-groups. Every variant sums in the same order, so the choice never
 * changes a bit. */
typedef struct clrun__core_variant {
    unsigned mr, lm, sp;
} clrun__core_variant;

/* The variants worth trying for `rows` output rows: *count of them, the default first. */
const clrun__core_variant *clrun__core_candidates(uint64_t rows, size_t *count);

/* Tests force variant i of the candidates (clamped to the last); -1 (the default) lets the
 * tuner choose. Set before prepare, from one thread. */
extern int clrun__ops_variant;

/* Variants timed by this process so far (benchmarks show that a second process times none);
 * atomic, as executors may be prepared on several threads. */
extern _Atomic unsigned long clrun__tune_timings;

/* The program of embedded source `source` ("matmul_core", "matmul" or "conv") for ctx, with VW
 * = vw and the epilogue ep (NULL: none) defined before the source; "matmul_core" holds every
 * MR of the candidates. Built once per context (lib/device/program.c keeps it). */
clrun_status clrun__ops_program(clrun_context *ctx, const char *source, unsigned vw,
                                const clrun__epilogue *ep, cl_program *out);

/* Kernel `name` of `program`; for the core's kernels the variant's MR is appended ("_8"). */
clrun_status clrun__program_kernel(clrun_context *ctx, cl_program program, const char *name,
                                   unsigned mr, cl_kernel *out);

/* Sets the epilogue's extra buffers (enqueue's inputs[first..first+count)) as arguments from
 * `index` on. */
clrun_status clrun__epilogue_args(clrun_context *ctx, cl_kernel kernel, cl_uint index,
                                  const cl_mem *extra, int count);

/* One-time choice among `count` variants: *chosen is the one remembered for `key` (device and
 * shape) in the cache directory, else the fastest by `time` (seconds per run of variant i),
 * which is then remembered. With CLRUN_TUNE=0, or a product too small to matter (`flops`), the
 * default (0). Bounded: timing stops once the timed runs took TUNE_BUDGET (0.5 s; the first
 * launch of each variant, which compiles it, is not counted), and a choice cut short is not
 * remembered. */
typedef clrun_status (*clrun__variant_timer)(clrun_context *ctx, void *user, size_t variant,
                                             double *seconds);
clrun_status clrun__core_tune(clrun_context *ctx, const char *key, double flops, size_t count,
                              clrun__variant_timer time, void *user, size_t *chosen);

/* Seconds of one launch of `kernel` (arguments set) over global/local: the best of two after a
 * warm-up run (which also compiles it), measured around clFinish. */
clrun_status clrun__time_launch(clrun_context *ctx, cl_kernel kernel, const size_t *global,
                                const size_t *local, double *seconds);

/* A scratch buffer of `bytes` for tuning runs, filled with 0.5f. */
clrun_status clrun__tune_buffer(clrun_context *ctx, size_t bytes, cl_mem *out);

/* Packing B into panels of NR columns (clrun_mm_pack): B is `batches` matrices of K x N, batch
 * z at element offset offsets[z], element (k, n) at k * b_ks + n * b_ns. */
typedef struct clrun__packing {
    cl_kernel kernel;
    cl_mem table;    /* offsets */
    cl_mem packed;   /* batches x panels x K x NR floats */
    size_t global[3];
    bool constant;   /* B is a constant input: packed at the first enqueue only */
    bool packed_once;
} clrun__packing;

/* Elements of the packed form of `batches` K x N matrices. */
uint64_t clrun__packed_elements(uint64_t batches, uint64_t K, uint64_t N, unsigned nr);

clrun_status clrun__packing_prepare(clrun_context *ctx, cl_program program, uint64_t batches,
                                    const uint64_t *offsets, uint64_t K, uint64_t N,
                                    uint64_t b_ks, uint64_t b_ns, unsigned nr, bool constant,
                                    clrun__packing *out);

/* Enqueues the packing of b on the chain, unless a constant B was packed already. */
clrun_status clrun__packing_enqueue(clrun_context *ctx, clrun__packing *p, cl_mem b,
                                    clrun__chain *chain);

void clrun__packing_release(clrun__packing *p);

#endif
