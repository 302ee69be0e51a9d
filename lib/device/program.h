/* Embedded kernel sources and the per-context table of built programs. */
#ifndef CLRUN_LIB_PROGRAM_H
#define CLRUN_LIB_PROGRAM_H

#include <clrun/program.h>

/* One file of kernels/, embedded by kernels/embed.sh into kernels_embedded.c. */
typedef struct clrun__kernel_source {
    const char *name;            /* the file name without ".cl" */
    const char *text;            /* its OpenCL C source */
    size_t length;               /* strlen(text) */
    const char *const *kernels;  /* the kernel names it defines, NULL-terminated */
} clrun__kernel_source;

extern const clrun__kernel_source clrun__kernel_sources[];
extern const size_t clrun__kernel_source_count;
extern const char *const clrun__kernel_program_names[]; /* the names above, NULL-terminated */

struct clrun__programs;

clrun_status clrun__programs_create(clrun_context *ctx, struct clrun__programs **out);

/* Whether ctx's driver is POCL, which compiles each kernel at its first launch, once per local
 * size (and grid class) it is launched with, and a program's binary only when asked for it. */
bool clrun__lazy_driver(const clrun_context *ctx);
void clrun__programs_destroy(struct clrun__programs *programs);

/* The built program of embedded source `name` (the context keeps ownership). */
clrun_status clrun__program_get(clrun_context *ctx, const char *name, cl_program *out);

/* The program built from generated OpenCL C `source` (kernels specialised by the ops, fused
 * groups), once per context: a second call with the same text gives the same program, through the
 * binary cache like the embedded sources. The context keeps ownership (released with it). `name` names it in
 * messages and cache files, as for clrun_program_build. */
clrun_status clrun__program_generated(clrun_context *ctx, const char *name, const char *source,
                                      size_t length, cl_program *out);

/* How clrun__program_generated_ex keeps and reports a program. */
enum {
    CLRUN__PROGRAM_KEEP = 1,  /* keep it for the life of the context (clrun__program_generated) */
    CLRUN__PROGRAM_QUIET = 2, /* a build failure is only a warning in the log, not the context's
                                 error: the caller has a fallback (a fused group) */
    CLRUN__PROGRAM_PER_KERNEL = 4, /* where the context may cut kernels out (the binary cache on
                                 a lazy driver, see program.c), the program is only created: its
                                 kernels must come from clrun__program_kernel_create, which builds
                                 each in a program cut out of the text for it, or the whole text */
};

/* clrun__program_generated with a reference: *out is the caller's, given back with
 * clrun__program_generated_release; a program no caller holds is released then, unless it was
 * ever asked for with CLRUN__PROGRAM_KEEP (or by clrun__program_generated). Fused groups are
 * built this way, so that an executor's kernels go with it. */
clrun_status clrun__program_generated_ex(clrun_context *ctx, const char *name, const char *text,
                                         size_t length, unsigned flags, cl_program *out);
void clrun__program_generated_release(clrun_context *ctx, cl_program program);

/* Kernel `kernel` of `program`: clCreateKernel, except for a generated program asked for with
 * CLRUN__PROGRAM_PER_KERNEL on a per-kernel context, whose kernel comes from a program of its
 * own (cut out of the text by clrun__kernel_subset, loaded from its binary or built and its
 * binary written, kept) or, in a process that had no other before it, from the whole text
 * built once (as without the flag). */
clrun_status clrun__program_kernel_create(clrun_context *ctx, cl_program program, const char *kernel,
                                          cl_kernel *out);

/* Adds seconds of variant tuning to the context's program stats. */
void clrun__program_stats_add_tune(clrun_context *ctx, double seconds);

#endif
