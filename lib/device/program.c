/* Building programs: embedded sources are built once per context, through the binary cache. */
#include "device/program.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "device/cache.h"
#include "device/cl.h"
#include "device/context.h"
#include "device/subset.h"

#define CLRUN__PROGRAM_NAME_MAX 64

/* A program built from generated text. */
typedef struct generated_program {
    char *text;                 /* its source (owned), compared in full on lookup */
    size_t length;
    unsigned long long hash;    /* of the text, checked first */
    cl_program program;         /* built, or when deferred only created: the caller's handle */
    cl_program whole;           /* deferred: the whole text built, NULL until a kernel needs it */
    unsigned users;             /* references handed out and not given back */
    bool keep;                  /* kept until the context goes, whatever users says */
    bool deferred;              /* not built: each kernel asked for gets a program of its own */
    char name[CLRUN__PROGRAM_NAME_MAX + 1];
} generated_program;

struct clrun__programs {
    pthread_mutex_t lock;       /* one build at a time; guards built[], generated[] and stats */
    cl_program *built;          /* per embedded source, NULL until first use */
    cl_program *single;         /* per kernel of the embedded sources, when per_kernel: its own
                                   program, NULL until first use */
    size_t *first_kernel;       /* per embedded source, its first kernel's index into single[] */
    bool per_kernel;            /* kernels may be cut out of their files (see cut_ways) */
    generated_program *generated; /* programs of generated source */
    size_t generated_count, generated_capacity;
    clrun_program_stats stats;  /* what the cache did */
    char cache_dir[CLRUN__PATH_MAX]; /* resolved directory; "" when the cache is off */
    bool cache_writes;          /* binaries are written (see clrun__cache_mode) */
    bool second_sight;          /* a binary is written when a program is built from source
                                   after another process did (its marker says so): lazy drivers */
    double budget;              /* CLRUN_CACHE_BUDGET: seconds of second-sight writes allowed to
                                   the process (budget_left) */
    bool wrote;                 /* the last build_timed wrote a second-sight binary */
    bool cache_warned;          /* the unwritable-cache warning was given */
    bool refusal_warned;        /* the refused-entry warning was given */
};

bool clrun__lazy_driver(const clrun_context *ctx)
{
    return strstr(ctx->info.platform_name, "Portable Computing Language") != NULL;
}

clrun_status clrun__programs_create(clrun_context *ctx, struct clrun__programs **out)
{
    size_t kernels = 0;
    for (size_t i = 0; i < clrun__kernel_source_count; i++)
        for (const char *const *k = clrun__kernel_sources[i].kernels; *k; k++)
            kernels++;
    struct clrun__programs *p = calloc(1, sizeof *p);
    cl_program *built = calloc(clrun__kernel_source_count + 1, sizeof *built);
    cl_program *single = calloc(kernels + 1, sizeof *single);
    size_t *first_kernel = calloc(clrun__kernel_source_count + 1, sizeof *first_kernel);
    if (p == NULL || built == NULL || single == NULL || first_kernel == NULL ||
        pthread_mutex_init(&p->lock, NULL) != 0) {
        free(p);
        free(built);
        free(single);
        free(first_kernel);
        return clrun__fail(NULL, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for programs");
    }
    p->built = built;
    p->single = single;
    p->first_kernel = first_kernel;
    for (size_t i = 0, at = 0; i < clrun__kernel_source_count; i++) {
        first_kernel[i] = at;
        for (const char *const *k = clrun__kernel_sources[i].kernels; *k; k++)
            at++;
    }
    if (ctx->options.cache.enabled && !clrun__cache_dir(ctx->options.cache_dir, p->cache_dir, sizeof p->cache_dir)) {
        clrun__log(CLRUN_LOG_WARN, "no cache directory (set CLRUN_CACHE_DIR, XDG_CACHE_HOME or HOME): binary cache off");
        p->cache_dir[0] = '\0';
    }
    char why[1024] = "";
    if (p->cache_dir[0] && clrun__cache_check_dir(p->cache_dir, why, sizeof why) == CLRUN__CACHE_UNTRUSTED) {
        clrun__log(CLRUN_LOG_WARN, "kernel binary cache off: %s (it could hold another user's code)",
                   why[0] ? why : p->cache_dir);
        p->cache_dir[0] = '\0';
    }
    /* POCL compiles programs lazily, kernel by kernel, and keeps what it compiled in its own
     * cache; asking it for a program's binary compiles every kernel of the program first (a
     * generic version of each, 0.4 to 2.8 s apiece), yet loading a binary saves the 0.05 to
     * 0.1 s that POCL's front end spends on a program it has cached. So there, with the cache on,
     * a binary is written only by a process that finds another process's marker for the program
     * (second_sight; a first process with empty caches pays nothing for it), and a kernel file
     * is then cut into a program per kernel launched (per_kernel, see cut_ways), so that the
     * binaries compile only what is launched; a program not cut gets one only when it holds one
     * kernel, and a process stops writing once it spent CLRUN_CACHE_BUDGET on it (budget_left).
     * That budget is 0 by default: a process that builds from source on POCL's warm cache pays
     * about 0.02 s a program (its front end preprocesses the source to find the entry), 0.2 to
     * 0.4 s for a model, where writing the binaries cost each of a model's next several
     * processes 1.2 to 2.4 s for a gain of 0.1 to 0.2 s once they were all written.
     * CLRUN_CACHE=1 writes them all in one process, for those who want that gain. */
    bool lazy_driver = clrun__lazy_driver(ctx);
    p->cache_writes = ctx->options.cache.always || !lazy_driver;
    p->per_kernel = lazy_driver && p->cache_dir[0] != '\0';
    p->second_sight = lazy_driver && !p->cache_writes;
    p->budget = ctx->options.cache_budget;
    *out = p;
    return CLRUN_OK;
}

void clrun__programs_destroy(struct clrun__programs *p)
{
    if (p == NULL)
        return;
    for (size_t i = 0; i < clrun__kernel_source_count; i++)
        if (p->built[i])
            clrun__cl.ReleaseProgram(p->built[i]);
    for (size_t i = 0; i < clrun__kernel_source_count; i++)
        for (size_t k = 0; clrun__kernel_sources[i].kernels[k]; k++)
            if (p->single[p->first_kernel[i] + k])
                clrun__cl.ReleaseProgram(p->single[p->first_kernel[i] + k]);
    free(p->single);
    free(p->first_kernel);
    for (size_t i = 0; i < p->generated_count; i++) {
        clrun__cl.ReleaseProgram(p->generated[i].program);
        if (p->generated[i].whole)
            clrun__cl.ReleaseProgram(p->generated[i].whole);
        free(p->generated[i].text);
    }
    free(p->generated);
    pthread_mutex_destroy(&p->lock);
    free(p->built);
    free(p);
}

static void build_options(const clrun_context *ctx, char *out, size_t size)
{
    /* -cl-std only where the device's OpenCL C is at least 1.2; no fast-math: results must equal
     * the C reference and be the same in every allocator mode. */
    unsigned major = 1, minor = 0;
    sscanf(ctx->info.c_version, "OpenCL C %u.%u", &major, &minor);
    snprintf(out, size, "%s%s", (major > 1 || minor >= 2) ? "-cl-std=CL1.2" : "",
             ctx->info.fp16 ? " -DCLRUN_HAVE_FP16=1" : "");
}

static void cache_key(const clrun_context *ctx, const char *options, const char *source,
                      size_t length, char *out, size_t size)
{
    snprintf(out, size,
             "clrun-cache-v1\nplatform=%s\nplatform-version=%s\ndevice=%s\nvendor=%s\n"
             "device-version=%s\ndriver=%s\noptions=%s\nsource=%016llx\n",
             ctx->info.platform_name, ctx->info.platform_version, ctx->info.name, ctx->info.vendor,
             ctx->info.version, ctx->info.driver_version, options, clrun__hash64(source, length));
}

/* The build log, or an explanation of why there is none; caller frees. */
static char *build_log(clrun_context *ctx, cl_program program)
{
    size_t size = 0;
    if (clrun__cl.GetProgramBuildInfo(program, ctx->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &size) != CL_SUCCESS)
        return NULL;
    char *log = malloc(size + 1);
    if (log == NULL)
        return NULL;
    if (clrun__cl.GetProgramBuildInfo(program, ctx->device, CL_PROGRAM_BUILD_LOG, size, log, NULL) != CL_SUCCESS)
        size = 0;
    log[size] = '\0';
    return log;
}

static clrun_status build_from_source(clrun_context *ctx, const char *name, const char *source,
                                      size_t length, const char *options, bool quiet,
                                      cl_program *out)
{
    cl_int err = CL_SUCCESS;
    cl_program program = clrun__cl.CreateProgramWithSource(ctx->cl, 1, &source, &length, &err);
    if (program == NULL)
        return clrun__fail_cl(ctx, err, "clCreateProgramWithSource", "program '%s'", name);
    err = clrun__cl.BuildProgram(program, 1, &ctx->device, options, NULL, NULL);
    if (err != CL_SUCCESS) {
        char *log = build_log(ctx, program);
        clrun_status status;
        if (quiet) {
            status = err == CL_BUILD_PROGRAM_FAILURE ? CLRUN_ERROR_BUILD_FAILED : CLRUN_ERROR_OPENCL;
            clrun__log(CLRUN_LOG_WARN, "program '%s' failed to build for '%s' (%s):\n%s", name,
                       ctx->info.name, clrun_cl_error_name(err), log ? log : "(no build log)");
        } else if (err == CL_BUILD_PROGRAM_FAILURE) {
            status = clrun__fail(ctx, CLRUN_ERROR_BUILD_FAILED, "program '%s' failed to build for '%s' (%s):\n%s",
                                 name, ctx->info.name, clrun_cl_error_name(err), log ? log : "(no build log)");
        } else {
            status = clrun__fail_cl(ctx, err, "clBuildProgram", "program '%s'", name);
        }
        free(log);
        clrun__cl.ReleaseProgram(program);
        return status;
    }
    *out = program;
    return CLRUN_OK;
}

static cl_program build_from_binary(clrun_context *ctx, const unsigned char *binary, size_t size,
                                    const char *options)
{
    cl_int err = CL_SUCCESS, binary_status = CL_SUCCESS;
    cl_program program = clrun__cl.CreateProgramWithBinary(ctx->cl, 1, &ctx->device, &size,
                                                           &binary, &binary_status, &err);
    if (program == NULL)
        return NULL;
    if (binary_status != CL_SUCCESS ||
        clrun__cl.BuildProgram(program, 1, &ctx->device, options, NULL, NULL) != CL_SUCCESS) {
        clrun__cl.ReleaseProgram(program);
        return NULL;
    }
    return program;
}

/* Writes the program's binary to the cache; a failure is a warning only. */
static void store_binary(struct clrun__programs *p, cl_program program,
                         const char *path, const char *key)
{
    size_t size = 0;
    if (clrun__cl.GetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, NULL) != CL_SUCCESS || size == 0)
        return;
    unsigned char *binary = malloc(size);
    if (binary == NULL)
        return;
    char why[4600];
    if (clrun__cl.GetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof binary, &binary, NULL) == CL_SUCCESS) {
        if (clrun__cache_store(p->cache_dir, path, key, binary, size, why, sizeof why))
            p->stats.cache_writes++;
        else if (!p->cache_warned) {
            p->cache_warned = true; /* once per context: the next builds would say the same */
            clrun__log(CLRUN_LOG_WARN, "%s (kernel binary cache not written; builds go on)", why);
        }
    }
    free(binary);
}

/* The marker beside cache entry `path` ("NAME-HASH.bin" -> "NAME-HASH.seen"); false if too long. */
static bool marker_path(const char *path, char *out, size_t size)
{
    size_t length = strlen(path);
    if (length < 4 || length + 2 >= size)
        return false;
    snprintf(out, size, "%.*s.seen", (int)(length - 4), path);
    return true;
}

/* What this process writes in its markers: its id, its start time (field 22 of /proc/self/stat)
 * and the wall clock when it first asked, in ns: in a container every run may be process 1, and
 * the start time is in clock ticks. Made again in a forked child (the id differs). */
static int process_mark(char *out, size_t size)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static char mark[96];
    static long pid = -1;
    pthread_mutex_lock(&lock);
    if (pid != (long)getpid()) {
        pid = (long)getpid();
        unsigned long long start = 0;
        char line[1024];
        FILE *f = fopen("/proc/self/stat", "r");
        if (f && fgets(line, sizeof line, f)) {
            char *t = strrchr(line, ')'); /* the name may hold spaces; field 3 follows it */
            for (int field = 3; t && field <= 22; field++)
                t = strchr(t + 1, ' ');
            if (t == NULL || sscanf(t, " %llu", &start) != 1) /* t: the space before field 22 */
                start = 0;
        }
        if (f)
            fclose(f);
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        snprintf(mark, sizeof mark, "%ld-%llu-%lld.%09ld", pid, start, (long long)now.tv_sec, (long)now.tv_nsec);
    }
    int length = snprintf(out, size, "%s", mark);
    pthread_mutex_unlock(&lock);
    return length;
}

/* 1 when the program of cache entry `path` was built from source by another process (its
 * marker, a small entry beside it holding the process_mark of the process that wrote it, is there), 0 when by
 * this one, -1 when by none. Another context of the same process does not count: a program
 * built again in one process (tests make many contexts) is no sign of a next process. */
static int marked(const char *path, const char *key)
{
    char marker[CLRUN__PATH_MAX + 520], why[1024], mark[96];
    if (!marker_path(path, marker, sizeof marker))
        return -1;
    int mark_length = process_mark(mark, sizeof mark);
    unsigned char *data = NULL;
    size_t size = 0;
    if (clrun__cache_load(marker, key, &data, &size, why, sizeof why) != CLRUN__CACHE_HIT)
        return -1;
    bool ours = size == (size_t)mark_length && memcmp(data, mark, size) == 0;
    free(data);
    return ours ? 0 : 1;
}

/* Whether another process built the program of `path` from source before (second_sight); when
 * no process did, this one's marker is written. */
static bool seen_before(struct clrun__programs *p, const char *path, const char *key)
{
    int by = marked(path, key);
    if (by >= 0)
        return by == 1;
    char marker[CLRUN__PATH_MAX + 520], why[1024], mark[96];
    int mark_length = process_mark(mark, sizeof mark);
    if (marker_path(path, marker, sizeof marker) &&
        !clrun__cache_store(p->cache_dir, marker, key, (const unsigned char *)mark, (size_t)mark_length,
                            why, sizeof why) &&
        !p->cache_warned) {
        p->cache_warned = true;
        clrun__log(CLRUN_LOG_WARN, "%s (kernel binary cache not written; builds go on)", why);
    }
    return false;
}

/* The wall time this process spent on builds that wrote a second-sight binary (a cut program's
 * build and the compile its binary costs), which CLRUN_CACHE_BUDGET bounds: past it, a process
 * builds as a first process does (whole files, which the driver's own cache serves) and writes
 * nothing more, so that warming the cache up spreads over several processes, each at most the
 * budget and one build slower. Per process: every context of it draws on it. */
static pthread_mutex_t budget_lock = PTHREAD_MUTEX_INITIALIZER;
static double budget_spent;

static bool budget_left(const struct clrun__programs *p)
{
    pthread_mutex_lock(&budget_lock);
    bool left = budget_spent < p->budget;
    pthread_mutex_unlock(&budget_lock);
    return left;
}

static void budget_spend(double seconds)
{
    pthread_mutex_lock(&budget_lock);
    budget_spent += seconds;
    pthread_mutex_unlock(&budget_lock);
}

/* Whether built program `program` has one kernel, as the driver says (after the preprocessor:
 * a text may define several kernels under #if, as matmul_core's per-MR bodies do). */
static bool one_kernel(cl_program program)
{
    size_t kernels = 0;
    return clrun__cl.GetProgramInfo(program, CL_PROGRAM_NUM_KERNELS, sizeof kernels, &kernels, NULL) == CL_SUCCESS &&
           kernels == 1;
}

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* What a build does with the binary cache: each reads an entry that is there. */
typedef enum build_how {
    HOW_DEFAULT, /* on a build from source, writes the binary per cache_writes, else (second_sight)
                    only for a program of one kernel: a binary of more compiles every one of them */
    HOW_MARK,    /* writes a marker only: a whole file on a per_kernel context */
    HOW_WRITE,   /* writes the binary: a cut program that another process needed */
    HOW_LOAD,    /* loads, or gives *out NULL and CLRUN_OK without building */
} build_how;

static clrun_status build_timed(clrun_context *ctx, struct clrun__programs *p, const char *name,
                                const char *source, size_t length, bool quiet, build_how how,
                                cl_program *out);

/* Caller holds p->lock: build_timed with the time it took added to the stats. */
static clrun_status build_how_locked(clrun_context *ctx, struct clrun__programs *p, const char *name,
                                     const char *source, size_t length, bool quiet, build_how how,
                                     cl_program *out)
{
    double start = now_seconds();
    p->wrote = false;
    clrun_status s = build_timed(ctx, p, name, source, length, quiet, how, out);
    double took = now_seconds() - start;
    p->stats.build_seconds += took;
    if (p->wrote)
        budget_spend(took);
    if (*out != NULL || how != HOW_LOAD) /* not a look for an entry that is not there */
        clrun__log(CLRUN_LOG_DEBUG, "program '%s': %.3f s to build or load", name, took);
    return s;
}

static clrun_status build_locked(clrun_context *ctx, struct clrun__programs *p, const char *name,
                                 const char *source, size_t length, bool quiet, cl_program *out)
{
    return build_how_locked(ctx, p, name, source, length, quiet, HOW_DEFAULT, out);
}

static clrun_status build_timed(clrun_context *ctx, struct clrun__programs *p, const char *name,
                                const char *source, size_t length, bool quiet, build_how how,
                                cl_program *out)
{
    *out = NULL;
    char options[256], key[2048], path[CLRUN__PATH_MAX + 512];
    build_options(ctx, options, sizeof options);
    cache_key(ctx, options, source, length, key, sizeof key);
    bool cached = p->cache_dir[0] != '\0';
    if (cached) {
        clrun__cache_path(p->cache_dir, name, key, path, sizeof path);
        unsigned char *binary = NULL;
        size_t size = 0;
        char why[1024];
        clrun__cache_result r = clrun__cache_load(path, key, &binary, &size, why, sizeof why);
        if (r == CLRUN__CACHE_REFUSED && !p->refusal_warned) {
            p->refusal_warned = true; /* once per context */
            clrun__log(CLRUN_LOG_WARN, "kernel binary cache entry not read: %s; rebuilding", why);
        }
        if (r == CLRUN__CACHE_HIT) {
            cl_program program = build_from_binary(ctx, binary, size, options);
            free(binary);
            if (program) {
                p->stats.cache_hits++;
                *out = program;
                return CLRUN_OK;
            }
            r = CLRUN__CACHE_CORRUPT; /* the driver refused it: rebuild and overwrite */
        }
        if (r == CLRUN__CACHE_CORRUPT || r == CLRUN__CACHE_REFUSED) {
            p->stats.cache_rejected++;
            clrun__log(CLRUN_LOG_INFO, "cache entry %s is damaged or stale: rebuilding", path);
        } else if (how != HOW_LOAD) {
            p->stats.cache_misses++;
        }
    }
    if (how == HOW_LOAD)
        return CLRUN_OK;
    clrun_status status = build_from_source(ctx, name, source, length, options, quiet, out);
    if (status != CLRUN_OK)
        return status;
    p->stats.builds_from_source++;
    clrun__log(CLRUN_LOG_INFO, "built program '%s' for '%s'", name, ctx->info.name);
    if (!cached)
        return CLRUN_OK;
    if (how == HOW_MARK)
        (void)seen_before(p, path, key);
    else if (p->cache_writes)
        store_binary(p, *out, path, key);
    else if (how == HOW_WRITE || (p->second_sight && one_kernel(*out) && seen_before(p, path, key) &&
                                  budget_left(p))) {
        store_binary(p, *out, path, key);
        p->wrote = true;
    }
    return CLRUN_OK;
}

static bool valid_program_name(const char *name)
{
    if (name == NULL || name[0] == '\0' || strlen(name) > CLRUN__PROGRAM_NAME_MAX)
        return false;
    for (const char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '_' || *c == '-'))
            return false;
    return true;
}

clrun_status clrun_program_build(clrun_context *ctx, const char *name, const char *source,
                                 size_t length, cl_program *out)
{
    if (ctx == NULL || source == NULL || out == NULL || length == 0)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT, "clrun_program_build: NULL or empty argument");
    if (!valid_program_name(name))
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT,
                           "program name '%s' must be 1-64 letters, digits, '_' or '-'", name ? name : "(null)");
    struct clrun__programs *p = ctx->programs;
    pthread_mutex_lock(&p->lock);
    clrun_status status = build_locked(ctx, p, name, source, length, false, out);
    pthread_mutex_unlock(&p->lock);
    return status;
}

/* ---- programs of generated source ---------------------------------------------------------- */

/* The entry of `text`, built or (deferred) only created: a deferred entry's handle has no
 * executable, so it never stands for a built one nor the other way round. */
static generated_program *find_generated(struct clrun__programs *p, const char *text, size_t length,
                                         unsigned long long hash, bool deferred)
{
    for (size_t i = 0; i < p->generated_count; i++) {
        generated_program *g = &p->generated[i];
        if (g->hash == hash && g->length == length && g->deferred == deferred &&
            memcmp(g->text, text, length) == 0)
            return g;
    }
    return NULL;
}

/* Caller holds p->lock. Builds `text` and records it with one user. */
static clrun_status add_generated(clrun_context *ctx, struct clrun__programs *p, const char *name,
                                  const char *text, size_t length, unsigned long long hash,
                                  unsigned flags, build_how how, cl_program *out)
{
    void *array = p->generated;
    char *copy = malloc(length + 1);
    if (copy == NULL || !clrun__grow(&array, &p->generated_capacity, p->generated_count + 1,
                                     sizeof *p->generated)) {
        free(copy);
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for program '%s'", name);
    }
    p->generated = array;
    memcpy(copy, text, length);
    copy[length] = '\0';
    cl_program program = NULL;
    bool deferred = p->per_kernel && (flags & CLRUN__PROGRAM_PER_KERNEL) != 0;
    clrun_status status = CLRUN_OK;
    if (deferred) { /* created only: clrun__program_kernel_create builds what a kernel needs */
        cl_int err = CL_SUCCESS;
        program = clrun__cl.CreateProgramWithSource(ctx->cl, 1, &text, &length, &err);
        if (program == NULL)
            status = clrun__fail_cl(ctx, err, "clCreateProgramWithSource", "program '%s'", name);
    } else {
        status = build_how_locked(ctx, p, name, text, length, (flags & CLRUN__PROGRAM_QUIET) != 0, how,
                                  &program);
    }
    if (status == CLRUN_OK && program == NULL) { /* HOW_LOAD found no entry */
        free(copy);
        *out = NULL;
        return CLRUN_OK;
    }
    if (status != CLRUN_OK) {
        free(copy);
        return status;
    }
    generated_program *g = &p->generated[p->generated_count++];
    *g = (generated_program){copy, length, hash, program, NULL, 1, (flags & CLRUN__PROGRAM_KEEP) != 0,
                             deferred, ""};
    snprintf(g->name, sizeof g->name, "%s", name);
    *out = program;
    return CLRUN_OK;
}

clrun_status clrun__program_generated_ex(clrun_context *ctx, const char *name, const char *text,
                                         size_t length, unsigned flags, cl_program *out)
{
    *out = NULL;
    if (!valid_program_name(name) || text == NULL || length == 0)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT, "generated program '%s': bad name or empty text",
                           name ? name : "(null)");
    struct clrun__programs *p = ctx->programs;
    unsigned long long hash = clrun__hash64(text, length);
    pthread_mutex_lock(&p->lock);
    clrun_status status = CLRUN_OK;
    bool deferred = p->per_kernel && (flags & CLRUN__PROGRAM_PER_KERNEL) != 0;
    generated_program *g = find_generated(p, text, length, hash, deferred);
    if (g) {
        g->users++;
        g->keep |= (flags & CLRUN__PROGRAM_KEEP) != 0;
        *out = g->program;
    } else {
        status = add_generated(ctx, p, name, text, length, hash, flags, HOW_DEFAULT, out);
    }
    pthread_mutex_unlock(&p->lock);
    return status;
}

clrun_status clrun__program_generated(clrun_context *ctx, const char *name, const char *source,
                                      size_t length, cl_program *out)
{
    return clrun__program_generated_ex(ctx, name, source, length, CLRUN__PROGRAM_KEEP, out);
}

void clrun__program_generated_release(clrun_context *ctx, cl_program program)
{
    if (ctx == NULL || program == NULL)
        return;
    struct clrun__programs *p = ctx->programs;
    pthread_mutex_lock(&p->lock);
    for (size_t i = 0; i < p->generated_count; i++) {
        generated_program *g = &p->generated[i];
        if (g->program != program)
            continue;
        if (g->users > 0)
            g->users--;
        if (g->users == 0 && !g->keep) {
            clrun__cl.ReleaseProgram(g->program);
            if (g->whole)
                clrun__cl.ReleaseProgram(g->whole);
            free(g->text);
            p->generated[i] = p->generated[--p->generated_count];
        }
        break;
    }
    pthread_mutex_unlock(&p->lock);
}

/* Caller holds p->lock: the entry of generated program `program`, or NULL. */
static generated_program *generated_of(struct clrun__programs *p, cl_program program)
{
    for (size_t i = 0; i < p->generated_count; i++)
        if (p->generated[i].program == program)
            return &p->generated[i];
    return NULL;
}

/* Caller holds p->lock. Whether another process built the program of `text` from source (its
 * marker says so). */
static bool built_elsewhere(clrun_context *ctx, struct clrun__programs *p, const char *name,
                            const char *text, size_t length)
{
    char options[256], key[2048], path[CLRUN__PATH_MAX + 512];
    build_options(ctx, options, sizeof options);
    cache_key(ctx, options, text, length, key, sizeof key);
    clrun__cache_path(p->cache_dir, name, key, path, sizeof path);
    return marked(path, key) == 1;
}

/* How a per_kernel context tries to have a kernel's cut program, in order, before it builds
 * the whole file (with HOW_MARK): with CLRUN_CACHE=1 built at once, its binary written; by
 * default loaded if its binary is there, else built and written if another process built the
 * whole file before (second sight) and the process has budget left (budget_left); else not at all, the whole file serving every kernel of
 * it, so that a single process (a first run, a test) builds each file once, as without cuts. */
static int cut_ways(clrun_context *ctx, struct clrun__programs *p, const char *whole_name,
                    const char *whole_text, size_t length, build_how hows[2])
{
    if (p->cache_writes) {
        hows[0] = HOW_DEFAULT;
        return 1;
    }
    hows[0] = HOW_LOAD;
    if (!budget_left(p) || !built_elsewhere(ctx, p, whole_name, whole_text, length))
        return 1;
    hows[1] = HOW_WRITE;
    return 2;
}

/* Caller holds p->lock. The program `name` of `text`, cut out of the file `whole_name` (whose
 * text is `whole_text`), had the ways cut_ways says, in order, into *out (NULL before); NULL
 * after when none had it. */
static void build_cut_locked(clrun_context *ctx, struct clrun__programs *p, const char *whole_name,
                             const char *whole_text, size_t whole_length, const char *name,
                             const char *text, size_t length, cl_program *out)
{
    build_how hows[2];
    int ways = cut_ways(ctx, p, whole_name, whole_text, whole_length, hows);
    for (int w = 0; w < ways && *out == NULL; w++)
        if (build_how_locked(ctx, p, name, text, length, true, hows[w], out) != CLRUN_OK)
            *out = NULL;
}

/* Caller holds p->lock; g is deferred. The program to take kernel `kernel` from: one cut out of
 * g's text for it (a program of generated text of its own, kept) as cut_ways says, else g's
 * whole text built. */
static clrun_status deferred_kernel_program(clrun_context *ctx, struct clrun__programs *p,
                                            generated_program *g, const char *kernel, cl_program *out)
{
    if (g->whole) { /* this context built the whole text: it has every kernel */
        *out = g->whole;
        return CLRUN_OK;
    }
    char *sub = malloc(g->length + 1);
    if (sub == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for program '%s'", g->name);
    size_t length = g->length;
    bool cut = clrun__kernel_subset(g->text, length, kernel, sub);
    if (cut && memcmp(sub, g->text, length) == 0) {
        /* the text holds no other kernel: the whole text is the cut, built as one would be */
        free(sub);
        build_cut_locked(ctx, p, g->name, g->text, g->length, g->name, g->text, g->length, &g->whole);
        if (g->whole) {
            *out = g->whole;
            return CLRUN_OK;
        }
        sub = NULL;
        cut = false;
    }
    if (cut) {
        unsigned long long hash = clrun__hash64(sub, length);
        generated_program *found = find_generated(p, sub, length, hash, false);
        if (found) {
            *out = found->program;
            free(sub);
            return CLRUN_OK;
        }
        char name[2 * CLRUN__PROGRAM_NAME_MAX + 2]; /* "NAME-KERNEL", cut to a program name's length */
        snprintf(name, sizeof name, "%s-%.*s", g->name, CLRUN__PROGRAM_NAME_MAX, kernel);
        name[CLRUN__PROGRAM_NAME_MAX] = '\0';
        for (char *c = name; *c; c++)
            if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-'))
                *c = '_';
        size_t index = (size_t)(g - p->generated); /* add_generated may move the array */
        build_how hows[2];
        int ways = cut_ways(ctx, p, g->name, g->text, g->length, hows);
        for (int w = 0; w < ways; w++) {
            *out = NULL;
            clrun_status status = add_generated(ctx, p, name, sub, length, hash,
                                                CLRUN__PROGRAM_KEEP | CLRUN__PROGRAM_QUIET, hows[w], out);
            g = &p->generated[index];
            if (status == CLRUN_OK && *out) {
                free(sub);
                return CLRUN_OK;
            }
        }
    }
    free(sub);
    clrun_status status = build_how_locked(ctx, p, g->name, g->text, g->length, false, HOW_MARK, &g->whole);
    *out = g->whole;
    return status;
}

clrun_status clrun__program_kernel_create(clrun_context *ctx, cl_program program, const char *kernel,
                                          cl_kernel *out)
{
    *out = NULL;
    struct clrun__programs *p = ctx->programs;
    clrun_status status = CLRUN_OK;
    pthread_mutex_lock(&p->lock);
    generated_program *g = generated_of(p, program);
    if (g && g->deferred)
        status = deferred_kernel_program(ctx, p, g, kernel, &program);
    pthread_mutex_unlock(&p->lock);
    if (status != CLRUN_OK)
        return status;
    cl_int err = CL_SUCCESS;
    *out = clrun__cl.CreateKernel(program, kernel, &err);
    if (*out == NULL)
        return clrun__fail_cl(ctx, err, "clCreateKernel", "kernel '%s'", kernel);
    return CLRUN_OK;
}

static size_t find_source(const char *name)
{
    for (size_t i = 0; i < clrun__kernel_source_count; i++)
        if (strcmp(clrun__kernel_sources[i].name, name) == 0)
            return i;
    return clrun__kernel_source_count;
}

static clrun_status get_program(clrun_context *ctx, size_t index, cl_program *out)
{
    struct clrun__programs *p = ctx->programs;
    const clrun__kernel_source *src = &clrun__kernel_sources[index];
    clrun_status status = CLRUN_OK;
    pthread_mutex_lock(&p->lock);
    /* on a per_kernel context a whole file's binary is never written: it would compile every kernel */
    build_how how = p->per_kernel && !p->cache_writes ? HOW_MARK : HOW_DEFAULT;
    if (p->built[index] == NULL)
        status = build_how_locked(ctx, p, src->name, src->text, src->length, false, how, &p->built[index]);
    *out = p->built[index];
    pthread_mutex_unlock(&p->lock);
    return status;
}

/* The program of kernel `kernel` (the k-th) of embedded source `index`: on a per_kernel
 * context one cut out of the source for it, as cut_ways says; else (or when no cut is had) the
 * source's. */
static clrun_status get_kernel_program(clrun_context *ctx, size_t index, size_t k, cl_program *out)
{
    struct clrun__programs *p = ctx->programs;
    if (!p->per_kernel)
        return get_program(ctx, index, out);
    const clrun__kernel_source *src = &clrun__kernel_sources[index];
    cl_program *slot = &p->single[p->first_kernel[index] + k];
    pthread_mutex_lock(&p->lock);
    if (*slot == NULL && p->built[index] == NULL) {
        char *text = malloc(src->length + 1);
        if (text && clrun__kernel_subset(src->text, src->length, src->kernels[k], text)) {
            char name[160];
            snprintf(name, sizeof name, "%s-%s", src->name, src->kernels[k]);
            build_cut_locked(ctx, p, src->name, src->text, src->length, name, text, src->length, slot);
        }
        free(text);
    }
    *out = *slot;
    pthread_mutex_unlock(&p->lock);
    if (*out == NULL)
        return get_program(ctx, index, out); /* the whole file, as without per_kernel */
    return CLRUN_OK;
}

clrun_status clrun__program_get(clrun_context *ctx, const char *name, cl_program *out)
{
    size_t index = find_source(name);
    if (index == clrun__kernel_source_count)
        return clrun__fail(ctx, CLRUN_ERROR_UNKNOWN_KERNEL, "no embedded program named '%s'", name);
    return get_program(ctx, index, out);
}

clrun_status clrun_kernel_create(clrun_context *ctx, const char *kernel_name, cl_kernel *out)
{
    if (ctx == NULL || kernel_name == NULL || out == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT, "clrun_kernel_create: NULL argument");
    for (size_t i = 0; i < clrun__kernel_source_count; i++) {
        for (const char *const *k = clrun__kernel_sources[i].kernels; *k; k++) {
            if (strcmp(*k, kernel_name) != 0)
                continue;
            cl_program program;
            clrun_status status = get_kernel_program(ctx, i, (size_t)(k - clrun__kernel_sources[i].kernels), &program);
            if (status != CLRUN_OK)
                return status;
            cl_int err = CL_SUCCESS;
            *out = clrun__cl.CreateKernel(program, kernel_name, &err);
            if (*out == NULL)
                return clrun__fail_cl(ctx, err, "clCreateKernel", "kernel '%s'", kernel_name);
            return CLRUN_OK;
        }
    }
    return clrun__fail(ctx, CLRUN_ERROR_UNKNOWN_KERNEL, "no kernel named '%s' in clrun's programs", kernel_name);
}

void clrun_program_stats_get(clrun_context *ctx, clrun_program_stats *out)
{
    if (out == NULL)
        return;
    if (ctx == NULL) {
        memset(out, 0, sizeof *out);
        return;
    }
    pthread_mutex_lock(&ctx->programs->lock);
    *out = ctx->programs->stats;
    pthread_mutex_unlock(&ctx->programs->lock);
}

void clrun__program_stats_add_tune(clrun_context *ctx, double seconds)
{
    pthread_mutex_lock(&ctx->programs->lock);
    ctx->programs->stats.tune_seconds += seconds;
    pthread_mutex_unlock(&ctx->programs->lock);
}

const char *const *clrun_program_names(void) { return clrun__kernel_program_names; }
