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

/* Work-items per group of every variant on ctx's device (`group` below): 4, or 1 on POCL's CPU
 * device. A variant's LM row blocks per group beyond it are steps of a loop in the kernel
 * (clrun__core_steps): POCL compiles a kernel once for each local size it is launched with, so
 * one local size compiles each kernel once, where LM as the local size compiled it once per LM.
 * On POCL's CPU device the group is one work-item: its work-group function is then the
 * kernel's body with no loop over work-items around it, which compiles in about three quarters
 * of the time (a convolution core at MR 8 0.50-0.55 s against 0.67-0.75 s at its first launch;
 * README.md, cold start). A group covers the same LM blocks either way, on one thread, one
 * work-item taking them in order where four took every fourth; each output is one work-item's
 * fma chain either way: the same bits. */
unsigned clrun__core_group(const clrun_context *ctx);

/* The loop steps of variant v's work-items in groups of `group`: LM / group, at least 1 (the
 * kernels' `steps` argument). */
unsigned clrun__core_steps(const clrun__core_variant *v, unsigned group);

/* Variant v's local and global size along dim 0 for `blocks` row blocks, in groups of `group`. */
void clrun__core_row_launch(const clrun__core_variant *v, unsigned group, size_t blocks,
                            size_t *global0, size_t *local0);

/* The variants worth trying for `rows` output rows of a matmul or (conv) a conv2d, whose
 * kernel has no SP: *count of them, the default first, no two alike for the kernel. */
const clrun__core_variant *clrun__core_candidates(uint64_t rows, bool conv, size_t *count);

/* Tests force variant i of the candidates (clamped to the last); -1 (the default) lets the
 * tuner choose. Set before prepare, from one thread. */
extern int clrun__ops_variant;

/* Variants timed by this process so far (benchmarks show that a second process times none);
 * atomic, as executors may be prepared on several threads. */
extern _Atomic unsigned long clrun__tune_timings;

/* The program of embedded source `source` ("matmul", "conv" or "norm") for ctx, with VW = vw
 * and the epilogue ep (NULL: none) defined before the source; for "matmul_core", its head
 * alone (packing and padding, no epilogue, the same program whatever vw: its kernels take the
 * panel width as an argument): its products come from clrun__core_kernel. Built
 * once per context (lib/device/program.c keeps it). */
clrun_status clrun__ops_program(clrun_context *ctx, const char *source, unsigned vw,
                                const clrun__epilogue *ep, cl_program *out);

/* Kernel `kernel` of clrun__ops_program(ctx, source, vw, ep). With an epilogue, where the driver
 * compiles at launch, from a program of that kernel alone (the file's other kernels blanked,
 * lib/device/subset.c): such a program serves the one kernel that takes the epilogue there,
 * and POCL's front end over a whole file costs 0.4-0.6 s (conv.cl) against 0.1-0.2 for one
 * kernel's. */
clrun_status clrun__ops_kernel(clrun_context *ctx, const char *source, unsigned vw,
                               const clrun__epilogue *ep, const char *kernel, cl_kernel *out);

/* clrun__ops_kernel for a kernel whose epilogue set serves several kernels of the file (conv.cl's
 * kernels with vectors along a plane: depthwise paths, pointwise, a stem's rows, whose set is
 * one of their own, lib/fuse/epilogue.c): a case of a set is built from the whole file, once for
 * all of them, where cutting each kernel's program cost 0.17 s apiece (MobileNetV3-small: three
 * lane kernels); a single epilogue is cut as clrun__ops_kernel cuts it. */
clrun_status clrun__ops_kernel_of_set(clrun_context *ctx, const char *source, unsigned vw,
                                      const clrun__epilogue *ep, const char *kernel, cl_kernel *out);

/* The core's kinds of product: matmul, conv2d, and conv2d's weight gradient. */
typedef enum clrun__core_kind {
    CLRUN__CORE_MM,
    CLRUN__CORE_CONV,
    CLRUN__CORE_WGRAD,
} clrun__core_kind;

/* Where a node's product kernels come from: the core of one kind, for the device's VW and the
 * node's epilogue (NULL: none; the weight gradient takes none). */
typedef struct clrun__core_source {
    clrun__core_kind kind;
    unsigned vw;
    const clrun__epilogue *ep;
    /* The conv core's weights, fixed when it is built: 0 packed or read as they are by its
     * `direct` argument, all four loops over the taps compiled; 1 packed, 2 as they are, two
     * loops compiled (pointwise or not, chosen in the kernel: a model whose core runs both
     * builds one program). Inference packs every weight. */
    int path;
} clrun__core_source;

/* The kernels' code of a weight's dtype: 0 f32, 1 f16, 2 bf16, 3 i8, 4 u8; -1 for another. */
int clrun__narrow_code(clrun_dtype dtype);

/* The core's kernel at MR = mr for src ("clrun_mm_core_8", "clrun_conv_core_8",
 * "clrun_conv_wgrad_core_8"), from a program of that one body, built on the first request in
 * the context and kept: a cold process compiles only the variants it runs (each body costs POCL
 * about a quarter of a second to build). */
clrun_status clrun__core_kernel(clrun_context *ctx, const clrun__core_source *src, unsigned mr,
                                cl_kernel *out);
/* The same over a packed B of width bw (clrun__narrow_code; matmul and conv2d only). */
clrun_status clrun__core_kernel_narrow(clrun_context *ctx, const clrun__core_source *src, unsigned mr,
                                       int bw, cl_kernel *out);

/* Kernel `name` of `program`; for the core's kernels the variant's MR is appended ("_8"). */
clrun_status clrun__program_kernel(clrun_context *ctx, cl_program program, const char *name,
                                   unsigned mr, cl_kernel *out);

/* Sets the epilogue's arguments from `index` on (ops.h's clrun__epilogue_slots): the extra
 * buffers (enqueue's inputs after the node's own), then for a case of a set null buffers up to
 * its parameters, and the case. */
clrun_status clrun__epilogue_args(clrun_context *ctx, cl_kernel kernel, cl_uint index,
                                  const clrun__epilogue_slots *slots, const cl_mem *extra);

/* One-time choice among `count` variants: *chosen is the one remembered for `key` (device and
 * shape) in the cache directory, else the fastest by `time` (seconds per run of variant i),
 * which is then remembered. With CLRUN_TUNE=0, or a product too small to matter (`flops`), the
 * default (0). The variants are timed in up to 3 rounds, each keeping its fastest run, so that
 * a shared machine's load falls on all alike. Bounded: timing stops once the timed runs took
 * TUNE_BUDGET (0.5 s; the first launch of each variant, which compiles it, is not counted), and
 * a choice cut short before every variant was timed once is not remembered. */
typedef clrun_status (*clrun__variant_timer)(clrun_context *ctx, void *user, size_t variant,
                                             double *seconds);
clrun_status clrun__core_tune(clrun_context *ctx, const char *key, double flops, size_t count,
                              clrun__variant_timer time, void *user, size_t *chosen);

/* Seconds of one run of a core variant's `kernel` (its own arguments set) over global/local on
 * tuning buffers: a, the packed b, a again in place of the bias, then out, which also stands in
 * for the epilogue's `extra` buffers from argument `extra_at` (they read at most its extent). The
 * best of two after a warm-up run (which also compiles it), measured around clFinish. */
clrun_status clrun__time_core_run(clrun_context *ctx, cl_kernel kernel, cl_mem a, cl_mem packed, cl_mem out,
                                  cl_uint extra_at, const clrun__epilogue_slots *extra,
                                  const size_t *global, const size_t *local, double *seconds);

/* The buffers of one tuning (inputs and an output of one batch entry, filled with 0.5f): driver
 * buffers counted by the context's pool and held to its limit (clrun__pool_create_raw), given
 * back when the tuning ends. */
#define CLRUN__TUNE_BUFFERS 4
typedef struct clrun__tune_buffers {
    const char *what;                    /* names the tuning in an out-of-memory message */
    cl_mem mem[CLRUN__TUNE_BUFFERS];
    uint64_t bytes[CLRUN__TUNE_BUFFERS];
    int count;
} clrun__tune_buffers;

/* One more buffer of `bytes` into *out, filled with 0.5f. */
clrun_status clrun__tune_buffer(clrun_context *ctx, clrun__tune_buffers *tb, size_t bytes,
                                cl_mem *out);
/* Gives every buffer back (once the runs that use them are complete: the tuner finishes
 * each). */
void clrun__tune_buffers_release(clrun_context *ctx, clrun__tune_buffers *tb);

/* Packing B into panels of NR columns: B is `batches` matrices of K x N, batch z at element
 * offset offsets[z], element (k, n) at k * b_ks + n * b_ns; the packed form is
 * bp[z][n / NR][k][n % NR], columns past N zero. A constant B is packed once, on the host, when
 * the executor is created, into a buffer the executor holds (clrun__packing_pack_host, then
 * clrun__packing_use); any other B at every enqueue on the device, into the node's scratch
 * (clrun_mm_pack, clrun__packing_enqueue). Both lay out the same bits. */
typedef struct clrun__packing {
    cl_program program;  /* the core's head, the context's: clrun_mm_pack's program */
    cl_kernel kernel;    /* clrun_mm_pack, made at the first clrun__packing_enqueue: on POCL,
                            with the cache on, the head is then built only where a B is packed
                            on the device (an executor packs constant weights on the host) */
    cl_mem table;        /* its source offsets */
    size_t global[3], local[3];
    uint64_t batches, K, N, b_ks, b_ns;
    unsigned nr;
    uint64_t *offsets;   /* the source offsets on the host (a constant B), or NULL */
    uint64_t bytes;      /* of the packed form */
    bool constant;       /* B is a constant input: it may be packed once */
    cl_mem packed;       /* the packed constant B (the executor's), or NULL: B is packed into
                            scratch at every enqueue */
    int bw;              /* a narrow B (clrun__packing_narrow), else 0 */
    uint64_t panel_bytes; /* narrow: one panel's bytes (its scales, zero points and values) */
} clrun__packing;

/* Elements of the packed form of `batches` K x N matrices. */
uint64_t clrun__packed_elements(uint64_t batches, uint64_t K, uint64_t N, unsigned nr);

clrun_status clrun__packing_prepare(clrun_context *ctx, cl_program program, uint64_t batches,
                                    const uint64_t *offsets, uint64_t K, uint64_t N,
                                    uint64_t b_ks, uint64_t b_ns, unsigned nr, bool constant,
                                    clrun__packing *out);

/* The bytes a constant B packed once takes (0 when B is not constant): the ops' packed_bytes. */
uint64_t clrun__packing_constant_bytes(const clrun__packing *p);

/* Packs the constant B's values `b` (host memory) into `host` (clrun__packing_constant_bytes
 * bytes), bit for bit as clrun_mm_pack does, and remembers `packed`, the device buffer the
 * caller uploads `host` into: enqueues read it from then on. With `packed` NULL it only lays
 * the copy out (to compare it with another), remembering nothing. */
clrun_status clrun__packing_pack_host(clrun_context *ctx, clrun__packing *p, const void *b,
                                      void *host, cl_mem packed);

/* Makes a prepared constant packing narrow (bw: clrun__narrow_code, not 0): panels of NR
 * columns as matmul_core.cl's NARROW_PANEL reads them, for i8 and u8 each headed by its NR
 * scales and NR zero points. Only the executor's packing on the host exists for it. */
void clrun__packing_narrow(clrun__packing *p, int bw);

/* The narrow packing's pack_host: b's values as stored (f16, bf16, i8 or u8), and for i8 and
 * u8 scale[batches * N] and zero[batches * N] (NULL: zeros), column n of batch z at z * N + n. */
clrun_status clrun__packing_pack_narrow_host(clrun_context *ctx, clrun__packing *p, const void *b,
                                             const float *scale, const float *zero, void *host,
                                             cl_mem packed);

/* A narrow weight widened into f32 on the device (clrun_widen_weight) for the kernels that read
 * f32 weights: elements n, output channel c = i / inner % channels. */
typedef struct clrun__widening {
    cl_kernel kernel; /* NULL: the weight is f32 */
    size_t global, local;
    uint64_t bytes;   /* of the widened weight (f32): the node's scratch */
    bool has_scale;
} clrun__widening;
clrun_status clrun__widening_prepare(clrun_context *ctx, int bw, uint64_t n, uint64_t inner,
                                     uint64_t channels, bool has_zero, unsigned vw,
                                     clrun__widening *w);
/* Enqueues the widening of q (scale, zero: NULL where absent) into `into` on the chain. */
clrun_status clrun__widening_enqueue(clrun_context *ctx, clrun__widening *w, cl_mem q, cl_mem scale,
                                    cl_mem zero, cl_mem into, clrun__chain *chain);
void clrun__widening_release(clrun__widening *w);

/* Enqueues the packing of b into `into` (scratch of p->bytes) on the chain: for a B not packed
 * once. */
clrun_status clrun__packing_enqueue(clrun_context *ctx, clrun__packing *p, cl_mem b, cl_mem into,
                                    clrun__chain *chain);

/* Releases the kernel, the tables (not the packed B: the executor's). */
void clrun__packing_release(clrun__packing *p);

/* A B that changes between runs, stored as w [N, K] (B[k, n] = w[n * K + k]: a convolution's
 * weights, a product's transposed weight), packed into scratch a chunk of panels at a time
 * (clrun_conv_pack_chunk), each chunk's product run before the next chunk is packed: a packed
 * copy's speed at a chunk's memory. The product's kernel takes the chunk's first panel
 * (its panel0) and runs over the chunk's panels alone. */
typedef struct clrun__chunking {
    cl_kernel kernel; /* clrun_conv_pack_chunk; NULL: B is not packed in chunks */
    uint32_t panels;  /* B's panels of nr columns */
    uint32_t chunk;   /* the panels of a chunk (the last one may hold fewer) */
    unsigned nr;
    uint64_t K;
    size_t local;     /* the packing's local size along dim 0 */
} clrun__chunking;

/* Chunks of `chunk` panels (at least 1, at most all) of a K x N B, from program's head. */
clrun_status clrun__chunking_prepare(clrun_context *ctx, cl_program program, uint64_t N, uint64_t K,
                                     unsigned nr, uint64_t chunk, clrun__chunking *out);

/* The bytes of scratch a chunk takes. */
uint64_t clrun__chunking_bytes(const clrun__chunking *c);

/* Enqueues the whole product on the chain, a chunk at a time: the chunk's packing from w into
 * scratch, then `kernel` (its other arguments set) with argument panel0_at the chunk's first
 * panel, over global with global[1] the chunk's panels rounded up to `block` (the kernel's
 * work-groups are taken in blocks of that many panels; those past B's end do nothing). */
clrun_status clrun__chunking_launch(clrun_context *ctx, clrun__chunking *c, cl_mem w, cl_mem scratch,
                                    cl_kernel kernel, cl_uint panel0_at, cl_uint dims,
                                    const size_t *global, const size_t *local, size_t block,
                                    const char *what, clrun__chain *chain);

void clrun__chunking_release(clrun__chunking *c);

/* The image conv2d's core and its weight gradient read: x itself when the convolution has no
 * padding (false; HP x WP = H x W), else a copy with its padding as zeros (true), HP x WP =
 * what the windows reach. geo is the kernels' table (CLRUN__G_*). */
bool clrun__conv_padded_extent(const cl_int *geo, const clrun__conv_geometry *g, cl_uint *hp,
                               cl_uint *wp);

/* The copy of a padded convolution's image (clrun_conv_pad of the core's head `program`, which
 * reads the geometry `table`): `bytes` of scratch, [N, C, HP, WP], launched over global/local
 * with x and the copy as its buffer arguments. */
typedef struct clrun__conv_padding {
    cl_kernel kernel; /* NULL: no padding */
    uint64_t bytes;
    size_t global[3], local[3];
} clrun__conv_padding;

clrun_status clrun__conv_padding_prepare(clrun_context *ctx, cl_program program, cl_mem table,
                                         const cl_int *geo, uint64_t images, cl_uint hp, cl_uint wp,
                                         clrun__conv_padding *out);
void clrun__conv_padding_release(clrun__conv_padding *p);

#endif
