/* clrun: OpenCL programs. The library's own kernels (kernels/ in the source tree) are embedded at
 * build time, built once per context on first use, and cached on disk as binaries
 * (CLRUN_CACHE_DIR; CLRUN_CACHE=0 turns the cache off). */
#ifndef CLRUN_PROGRAM_H
#define CLRUN_PROGRAM_H

#include <stddef.h>

/* clrun's API is OpenCL 1.2: say so before the headers do (they otherwise warn and pick 3.0). */
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include <clrun/context.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A new cl_kernel for one of the library's kernels (e.g. "clrun_smoke_axpy"); its program is
 * built on first use. The caller owns the kernel (clReleaseKernel). CLRUN_ERROR_UNKNOWN_KERNEL
 * for a name no embedded source defines; CLRUN_ERROR_BUILD_FAILED with the build log in
 * clrun_last_error(ctx) when its program does not build. */
clrun_status clrun_kernel_create(clrun_context *ctx, const char *kernel_name, cl_kernel *out);

/* Builds an application's OpenCL C source for the context's device through the same path as the
 * embedded ones (binary cache included). `name` names the program in messages and cache files
 * (letters, digits, '_' and '-'). The caller owns *out (clReleaseProgram). On a build failure:
 * CLRUN_ERROR_BUILD_FAILED and the build log in clrun_last_error(ctx). */
clrun_status clrun_program_build(clrun_context *ctx, const char *name, const char *source,
                                 size_t length, cl_program *out);

/* What the program cache did in this context. */
typedef struct clrun_program_stats {
    unsigned long builds_from_source; /* programs compiled from OpenCL C */
    unsigned long cache_hits;         /* programs loaded from a cached binary */
    unsigned long cache_misses;       /* no entry for the key */
    unsigned long cache_rejected;     /* an entry was corrupt, truncated or for another key */
    unsigned long cache_writes;       /* entries written */
    double build_seconds;             /* wall time in program builds (from source or a cached
                                         binary); a lazy driver (POCL) compiles each kernel at
                                         its first launch, which this does not count */
    double tune_seconds;              /* wall time spent timing kernel variants (CLRUN_TUNE) */
} clrun_program_stats;

/* Fills *out with the context's counters (zeros for a NULL context; nothing for a NULL out). */
void clrun_program_stats_get(clrun_context *ctx, clrun_program_stats *out);

/* The names of the embedded programs (NULL-terminated), e.g. for `clrun info`. */
const char *const *clrun_program_names(void);

#ifdef __cplusplus
}
#endif
#endif
