/* The matrix-product core: device traits, specialised programs, variants with their one-time
 * tuning (remembered in the cache directory beside the kernel binaries), and B's packing. */
#include "ops/matmul_core.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device/cache.h"
#include "device/cl.h"
#include "device/program.h"
#include "device/subset.h"
#include "memory/pool.h"

int clrun__ops_variant = -1;
_Atomic unsigned long clrun__tune_timings = 0;

/* ---- the device -------------------------------------------------------------------------- */

clrun_status clrun__core_device_of(clrun_context *ctx, clrun__core_device *out)
{
    cl_device_local_mem_type type = CL_LOCAL;
    cl_uint preferred = 0, native = 0;
    cl_int err = clrun__cl.GetDeviceInfo(ctx->device, CL_DEVICE_LOCAL_MEM_TYPE, sizeof type,
                                         &type, NULL);
    if (err == CL_SUCCESS)
        err = clrun__cl.GetDeviceInfo(ctx->device, CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT,
                                      sizeof preferred, &preferred, NULL);
    if (err == CL_SUCCESS)
        err = clrun__cl.GetDeviceInfo(ctx->device, CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT,
                                      sizeof native, &native, NULL);
    if (err != CL_SUCCESS)
        return clrun__fail_cl(ctx, err, "clGetDeviceInfo", "local memory type and vector widths");
    unsigned width = preferred > native ? preferred : native;
    out->vw = width >= 16 ? 16 : width >= 8 ? 8 : 4;
    out->registers = type != CL_LOCAL;
    if (clrun__ops_kernels == CLRUN__KERNELS_VECTOR)
        out->registers = true;
    else if (clrun__ops_kernels != CLRUN__KERNELS_AUTO)
        out->registers = false;
    return CLRUN_OK;
}

/* ---- variants ---------------------------------------------------------------------------- */

static const clrun__core_variant wide[] = {{8, 4, 8}, {8, 4, 1}, {6, 4, 8}, {8, 16, 4}};
/* conv2d's kernel has no panel blocks (sp): wide's second entry would be its first again. */
static const clrun__core_variant wide_conv[] = {{8, 4, 8}, {6, 4, 8}, {8, 16, 4}};
static const clrun__core_variant four[] = {{4, 4, 8}, {2, 4, 8}};
static const clrun__core_variant two[] = {{2, 4, 8}, {1, 4, 8}};
static const clrun__core_variant one[] = {{1, 4, 8}};

const clrun__core_variant *clrun__core_candidates(uint64_t rows, bool conv, size_t *count)
{
#define PICK(list) (*count = sizeof list / sizeof list[0], list)
    if (rows >= 8)
        return conv ? PICK(wide_conv) : PICK(wide);
    if (rows >= 4)
        return PICK(four);
    return rows >= 2 ? PICK(two) : PICK(one);
#undef PICK
}

unsigned clrun__core_group(const clrun_context *ctx)
{
    return clrun__lazy_driver(ctx) && strcmp(ctx->info.type, "CPU") == 0 ? 1u : 4u;
}

static unsigned core_local(const clrun__core_variant *v, unsigned group)
{
    return v->lm < group ? v->lm : group;
}

unsigned clrun__core_steps(const clrun__core_variant *v, unsigned group) { return v->lm / core_local(v, group); }

void clrun__core_row_launch(const clrun__core_variant *v, unsigned group, size_t blocks,
                            size_t *global0, size_t *local0)
{
    *local0 = core_local(v, group);
    *global0 = clrun__round_up(blocks, v->lm) / clrun__core_steps(v, group);
}

/* ---- programs ---------------------------------------------------------------------------- */

static const clrun__kernel_source *embedded(const char *name)
{
    for (size_t i = 0; i < clrun__kernel_source_count; i++)
        if (strcmp(clrun__kernel_sources[i].name, name) == 0)
            return &clrun__kernel_sources[i];
    return NULL;
}

/* Appends text to a growing buffer; false when out of memory (the buffer is then freed). */
typedef struct text {
    char *data;
    size_t length, capacity;
} text;

static bool append(text *t, const char *s, size_t n)
{
    if (t->length + n + 1 > t->capacity) {
        size_t capacity = (t->length + n + 1) * 2;
        char *grown = realloc(t->data, capacity);
        if (grown == NULL) {
            free(t->data);
            t->data = NULL;
            return false;
        }
        t->data = grown;
        t->capacity = capacity;
    }
    memcpy(t->data + t->length, s, n);
    t->length += n;
    t->data[t->length] = '\0';
    return true;
}

static bool appendf(text *t, const char *format, ...) CLRUN__PRINTF(2, 3);
static bool appendf(text *t, const char *format, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, format);
    int n = vsnprintf(buf, sizeof buf, format, ap);
    va_end(ap);
    return n >= 0 && (size_t)n < sizeof buf && append(t, buf, (size_t)n);
}

static bool epilogue_prefix(text *t, const clrun__epilogue *ep)
{
    if (ep == NULL || ep->expression == NULL)
        return true;
    bool ok = true;
    if (ep->helpers)
        ok = append(t, ep->helpers, strlen(ep->helpers)) && append(t, "\n", 1);
    ok = ok && append(t, "#define EPILOGUE_PARAMS", 23);
    clrun__epilogue_slots slots = clrun__epilogue_slots_of(ep);
    for (int j = 0; ok && j < slots.params; j++)
        ok = appendf(t, " , __global const float *x%d", j);
    if (ok && slots.index > 0)
        ok = appendf(t, " , const uint epi");
    ok = ok && append(t, "\n#define CLRUN_EPILOGUE(v, i, c) (", 34) &&
         append(t, ep->expression, strlen(ep->expression)) && append(t, ")\n", 2);
    return ok;
}

static const char body_marker[] = "/* ---- PER-MR BODY ---- */";

/* The VW the head is built with whatever the core's width: its kernels take the panel width
 * as an argument and use no vector, so one program serves every width. */
#define CORE_HEAD_VW 8

/* Which text of an embedded program to build: all of it, or for the core (the file with the
 * PER-MR BODY line) its head alone or the head and the body of one kind. */
typedef enum program_part {
    PART_WHOLE,
    PART_CORE_HEAD,
    PART_CORE_MM,
    PART_CORE_CONV,
    PART_CORE_WGRAD,
} program_part;

/* The program's name in the caches and the log: "matmul_core-mm8-epilogue", "conv". */
static void program_name(const char *source, program_part part, unsigned mr, int path, bool epilogue,
                         int bw, char *name, size_t size)
{
    static const char *const parts[] = {"", "-head", "-mm", "-conv", "-wgrad"};
    static const char *const widths[] = {"", "-f16", "-bf16", "-i8", "-u8"};
    char rows[16] = "";
    if (part >= PART_CORE_MM) /* a conv core reading its weights as they are: "d" */
        snprintf(rows, sizeof rows, "%u%s", mr, path == 2 ? "d" : "");
    snprintf(name, size, "%s%s%s%s%s", source, parts[part], rows, widths[bw], epilogue ? "-epilogue" : "");
}

int clrun__narrow_code(clrun_dtype dtype)
{
    switch (dtype) {
    case CLRUN_F32: return 0;
    case CLRUN_F16: return 1;
    case CLRUN_BF16: return 2;
    case CLRUN_I8: return 3;
    case CLRUN_U8: return 4;
    default: return -1;
    }
}

/* Builds `part` of embedded program `source` after VW and the epilogue; the core's kinds at
 * MR = mr (their kernels named NAME_mr). With `only` (a kernel's name), the whole file's text
 * with every other kernel blanked (clrun__ops_kernel). */
static clrun_status build_program(clrun_context *ctx, const char *source, program_part part, unsigned mr,
                                  int path, unsigned vw, const clrun__epilogue *ep, int bw, const char *only,
                                  cl_program *out)
{
    if (bw < 0 || bw > 4)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT, "program '%s': weight width %d", source, bw);
    if (path < 0 || path > 2 || (path > 0 && part != PART_CORE_CONV))
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT, "program '%s': core path %d", source, path);
    const clrun__kernel_source *src = embedded(source);
    if (src == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_UNKNOWN_KERNEL, "no embedded program named '%s'", source);
    if (ep && (ep->extra_inputs < 0 || ep->extra_inputs > CLRUN__EPILOGUE_MAX_EXTRA ||
               ep->params < 0 || ep->params > CLRUN__EPILOGUE_MAX_EXTRA || ep->index < 0))
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT,
                           "epilogue: %d extra inputs, %d parameters, case %d (at most %d)",
                           ep->extra_inputs, ep->params, ep->index - 1, CLRUN__EPILOGUE_MAX_EXTRA);
    const char *body = part != PART_WHOLE ? strstr(src->text, body_marker) : NULL;
    if (part != PART_WHOLE && body == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_UNKNOWN_KERNEL, "program '%s' has no per-MR body", source);
    text t = {0};
    bool ok = appendf(&t, "#define VW %u\n", vw) && (bw == 0 || appendf(&t, "#define BW %d\n", bw)) &&
              (part < PART_CORE_MM || append(&t, "#define CORE_BODY 1\n", 20)) &&
              epilogue_prefix(&t, ep);
    if (part == PART_WHOLE) {
        ok = ok && append(&t, src->text, src->length);
    } else {
        ok = ok && append(&t, src->text, (size_t)(body - src->text));
        if (part != PART_CORE_HEAD)
            ok = ok &&
                 appendf(&t, "#define MR %u\n#define KSUFFIX(name) name##_%u\n#define CORE_MM %d\n"
                             "#define CORE_CONV %d\n#define CORE_WGRAD %d\n", mr, mr,
                         part == PART_CORE_MM, part == PART_CORE_CONV, part == PART_CORE_WGRAD) &&
                 (path == 0 || appendf(&t, "#define CONV_PATH_DIRECT %d\n", path - 1)) &&
                 append(&t, body, src->length - (size_t)(body - src->text));
    }
    if (!ok)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "program '%s': out of host memory", source);
    char name[65]; /* a program name is at most 64 bytes (lib/device/program.c) */
    program_name(source, part, mr, path, ep && ep->expression, bw, name, sizeof name);
    /* the whole files and the head hold kernels a model mostly does not launch: per kernel
     * where the context builds so (the per-MR bodies are one kernel each) */
    unsigned flags = CLRUN__PROGRAM_KEEP | (part <= PART_CORE_HEAD ? CLRUN__PROGRAM_PER_KERNEL : 0);
    if (only != NULL && part == PART_WHOLE) {
        char *cut = malloc(t.length + 1);
        if (cut != NULL && clrun__kernel_subset(t.data, t.length, only, cut)) {
            cut[t.length] = '\0';
            free(t.data);
            t.data = cut;
            flags = CLRUN__PROGRAM_KEEP; /* one kernel already */
            size_t used = strlen(name);
            snprintf(name + used, sizeof name - used, "-%s", only);
        } else {
            free(cut); /* no such kernel here: the whole text, which says so at kernel creation */
        }
    }
    clrun_status s = clrun__program_generated_ex(ctx, name, t.data, t.length, flags, out);
    free(t.data);
    return s;
}

clrun_status clrun__ops_program(clrun_context *ctx, const char *source, unsigned vw,
                                const clrun__epilogue *ep, cl_program *out)
{
    if (strcmp(source, "matmul_core") == 0) /* the head alone: packing and padding, the panel
                                               width an argument of its kernels: one text */
        return build_program(ctx, source, PART_CORE_HEAD, 0, 0, CORE_HEAD_VW, NULL, 0, NULL, out);
    return build_program(ctx, source, PART_WHOLE, 0, 0, vw, ep, 0, NULL, out);
}

static clrun_status ops_kernel(clrun_context *ctx, const char *source, unsigned vw, const clrun__epilogue *ep,
                               const char *kernel, bool sets_whole, cl_kernel *out)
{
    *out = NULL;
    bool cut = ep != NULL && ep->expression != NULL && !(sets_whole && ep->index > 0) &&
               strcmp(source, "matmul_core") != 0 && clrun__lazy_driver(ctx);
    cl_program program = NULL;
    clrun_status s = cut ? build_program(ctx, source, PART_WHOLE, 0, 0, vw, ep, 0, kernel, &program)
                         : clrun__ops_program(ctx, source, vw, ep, &program);
    if (s == CLRUN_OK)
        s = clrun__program_kernel(ctx, program, kernel, 0, out);
    return s;
}

clrun_status clrun__ops_kernel(clrun_context *ctx, const char *source, unsigned vw,
                               const clrun__epilogue *ep, const char *kernel, cl_kernel *out)
{
    return ops_kernel(ctx, source, vw, ep, kernel, false, out);
}

clrun_status clrun__ops_kernel_of_set(clrun_context *ctx, const char *source, unsigned vw,
                                      const clrun__epilogue *ep, const char *kernel, cl_kernel *out)
{
    return ops_kernel(ctx, source, vw, ep, kernel, true, out);
}

clrun_status clrun__core_kernel(clrun_context *ctx, const clrun__core_source *src, unsigned mr,
                                cl_kernel *out)
{
    return clrun__core_kernel_narrow(ctx, src, mr, 0, out);
}

clrun_status clrun__core_kernel_narrow(clrun_context *ctx, const clrun__core_source *src, unsigned mr,
                                       int bw, cl_kernel *out)
{
    *out = NULL;
    cl_program program = NULL;
    static const program_part parts[] = {PART_CORE_MM, PART_CORE_CONV, PART_CORE_WGRAD};
    static const char *const names[] = {"clrun_mm_core", "clrun_conv_core", "clrun_conv_wgrad_core"};
    clrun_status s = build_program(ctx, "matmul_core", parts[src->kind], mr, src->path, src->vw, src->ep,
                                   bw, NULL, &program);
    if (s == CLRUN_OK)
        s = clrun__program_kernel(ctx, program, names[src->kind], mr, out);
    return s;
}

clrun_status clrun__program_kernel(clrun_context *ctx, cl_program program, const char *name,
                                   unsigned mr, cl_kernel *out)
{
    char full[96];
    if (mr)
        snprintf(full, sizeof full, "%s_%u", name, mr);
    else
        snprintf(full, sizeof full, "%s", name);
    return clrun__program_kernel_create(ctx, program, full, out);
}

clrun__epilogue_slots clrun__epilogue_slots_of(const clrun__epilogue *ep)
{
    if (ep == NULL || ep->expression == NULL)
        return (clrun__epilogue_slots){0, 0, 0};
    if (ep->index <= 0)
        return (clrun__epilogue_slots){ep->extra_inputs, ep->extra_inputs, 0};
    int params = ep->params > ep->extra_inputs ? ep->params : ep->extra_inputs;
    return (clrun__epilogue_slots){ep->extra_inputs, params, ep->index};
}

clrun_status clrun__epilogue_args(clrun_context *ctx, cl_kernel kernel, cl_uint index,
                                  const clrun__epilogue_slots *slots, const cl_mem *extra)
{
    clrun_status s = CLRUN_OK;
    const cl_mem none = NULL; /* a parameter of the set's that this case does not read */
    for (int j = 0; s == CLRUN_OK && j < slots->params; j++)
        s = j < slots->inputs ? clrun__buffer_arg(ctx, kernel, index + (cl_uint)j, extra[j])
                              : clrun__arg(ctx, kernel, index + (cl_uint)j, sizeof none, &none);
    if (s == CLRUN_OK && slots->index > 0) {
        cl_uint epi = (cl_uint)slots->index - 1;
        s = clrun__arg(ctx, kernel, index + (cl_uint)slots->params, sizeof epi, &epi);
    }
    return s;
}

/* ---- tuning ------------------------------------------------------------------------------ */

/* Products below this many flops take the default: a few microseconds either way. */
#define TUNE_MIN_FLOPS 2.0e7
/* Seconds of timed runs per shape at most, over at most TUNE_ROUNDS rounds of the variants. */
#define TUNE_BUDGET 0.5
#define TUNE_ROUNDS 3
#define TUNE_MAX_VARIANTS 8

static double seconds_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The key of a tuning result: the device, its driver, the core's source (a changed kernel is
 * tuned again) and the shape. The version at its start counts changes of the candidate lists,
 * whose indices the results are. */
static void tune_key(const clrun_context *ctx, const char *key, char *out, size_t size)
{
    const clrun__kernel_source *src = embedded("matmul_core");
    unsigned long long source = src ? clrun__hash64(src->text, src->length) : 0;
    snprintf(out, size, "clrun-tune-v2\ndevice=%s\ndriver=%s\nplatform=%s\nsource=%016llx\n%s\n",
             ctx->info.name, ctx->info.driver_version, ctx->info.platform_version, source, key);
}

/* The variant remembered for key, or false. */
static bool remembered(const char *path, const char *key, size_t count, size_t *chosen)
{
    unsigned char *data = NULL;
    size_t size = 0;
    char why[256];
    if (clrun__cache_load(path, key, &data, &size, why, sizeof why) != CLRUN__CACHE_HIT)
        return false;
    char buf[32] = "";
    snprintf(buf, sizeof buf, "%.*s", (int)(size < 31 ? size : 31), (const char *)data);
    free(data);
    char *end;
    unsigned long v = strtoul(buf, &end, 10);
    if (end == buf || v >= count)
        return false;
    *chosen = (size_t)v;
    return true;
}

clrun_status clrun__core_tune(clrun_context *ctx, const char *key, double flops, size_t count,
                              clrun__variant_timer time, void *user, size_t *chosen)
{
    *chosen = 0;
    if (clrun__ops_variant >= 0) {
        *chosen = (size_t)clrun__ops_variant < count ? (size_t)clrun__ops_variant : count - 1;
        return CLRUN_OK;
    }
    if (count < 2 || flops < TUNE_MIN_FLOPS)
        return CLRUN_OK;
    /* A choice remembered by an earlier process is taken whether or not this one tunes; without
     * CLRUN_TUNE=1 nothing is timed (the default variant: a first run does not wait on timing
     * and on compiling every candidate, 9 of EfficientNet-B0's 22 s with empty caches). */
    char dir[CLRUN__PATH_MAX] = "", full_key[1024], path[CLRUN__PATH_MAX + 512];
    bool cached = ctx->options.cache.enabled && clrun__cache_dir(ctx->options.cache_dir, dir, sizeof dir);
    tune_key(ctx, key, full_key, sizeof full_key);
    if (cached) {
        clrun__cache_path(dir, "tune", full_key, path, sizeof path);
        if (remembered(path, full_key, count, chosen))
            return CLRUN_OK;
    }
    if (!ctx->options.tune)
        return CLRUN_OK;
    /* Rounds over every variant, each keeping its fastest: load from other work on a shared
     * machine then falls on every variant alike, where timing each variant once let one
     * disturbed run decide. The budget counts the timed runs, not the first launch of each
     * variant, which compiles it (a cold driver cache costs far more than the timing): so
     * tuning finishes, and is remembered, on the first process. */
    double spent = 0, fastest[TUNE_MAX_VARIANTS] = {0};
    size_t timed = 0, rounds = 0;
    if (count > TUNE_MAX_VARIANTS)
        count = TUNE_MAX_VARIANTS;
    double began = seconds_now();
    for (; rounds < TUNE_ROUNDS && spent <= TUNE_BUDGET; rounds++) {
        for (size_t v = 0; v < count && spent <= TUNE_BUDGET; v++) {
            double t = 0;
            if (rounds == 0)
                clrun__tune_timings++;
            clrun_status s = time(ctx, user, v, &t);
            if (s != CLRUN_OK) {
                clrun__program_stats_add_tune(ctx, seconds_now() - began);
                return s;
            }
            spent += 3 * t;
            fastest[v] = rounds == 0 || t < fastest[v] ? t : fastest[v];
            timed = rounds == 0 ? v + 1 : timed;
        }
    }
    clrun__program_stats_add_tune(ctx, seconds_now() - began);
    double best = fastest[0];
    for (size_t v = 1; v < timed; v++)
        if (fastest[v] < best) {
            best = fastest[v];
            *chosen = v;
        }
    clrun__log(CLRUN_LOG_INFO, "tuned %s: variant %zu (%.3f ms), %zu of %zu timed, %zu round(s)", key,
               *chosen, best * 1e3, timed, count, rounds);
    /* Only a choice among every candidate is remembered: one cut short by the budget (a product
     * slow enough to need over TUNE_BUDGET for its runs) is tried again by the next process. */
    if (cached && timed == count) {
        char value[16], why[256];
        int n = snprintf(value, sizeof value, "%zu", *chosen);
        if (!clrun__cache_store(dir, path, full_key, (const unsigned char *)value, (size_t)n, why,
                                sizeof why))
            clrun__log(CLRUN_LOG_WARN, "%s (tuning result not remembered)", why);
    }
    return CLRUN_OK;
}

clrun_status clrun__time_core_run(clrun_context *ctx, cl_kernel kernel, cl_mem a, cl_mem packed, cl_mem out,
                                  cl_uint extra_at, const clrun__epilogue_slots *extra,
                                  const size_t *global, const size_t *local, double *seconds)
{
    *seconds = 0;
    const cl_mem buffers[3] = {a, packed, a};
    clrun_status s = clrun__buffer_args(ctx, kernel, buffers, 3, out);
    cl_mem stand_in[CLRUN__EPILOGUE_MAX_EXTRA];
    for (int x = 0; x < CLRUN__EPILOGUE_MAX_EXTRA; x++)
        stand_in[x] = out;
    if (s == CLRUN_OK)
        s = clrun__epilogue_args(ctx, kernel, extra_at, extra, stand_in);
    if (s != CLRUN_OK)
        return s;
    for (int run = 0; run < 3; run++) {
        double start = seconds_now();
        cl_int err = clrun__cl.EnqueueNDRangeKernel(ctx->queue, kernel, 3, NULL, global, local, 0,
                                                    NULL, NULL);
        if (err == CL_SUCCESS)
            err = clrun__cl.Finish(ctx->queue);
        if (err != CL_SUCCESS)
            return clrun__fail_cl(ctx, err, "clEnqueueNDRangeKernel", "tuning run, global %zu x %zu x %zu",
                                  global[0], global[1], global[2]);
        double t = seconds_now() - start;
        if (run == 1 || (run == 2 && t < *seconds))
            *seconds = t;
    }
    return CLRUN_OK;
}

clrun_status clrun__tune_buffer(clrun_context *ctx, clrun__tune_buffers *tb, size_t bytes,
                                cl_mem *out)
{
    *out = NULL;
    if (tb->count == CLRUN__TUNE_BUFFERS)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT, "%s: more than %d tuning buffers",
                           tb->what, CLRUN__TUNE_BUFFERS);
    char label[192];
    snprintf(label, sizeof label, "tuning of %s (CLRUN_TUNE=0 skips it)", tb->what);
    cl_mem mem = NULL;
    clrun_status s = clrun__pool_create_raw(ctx, bytes, label, &mem);
    if (s != CLRUN_OK)
        return s;
    tb->mem[tb->count] = mem;
    tb->bytes[tb->count++] = bytes;
    const cl_float half = 0.5f;
    cl_int err = clrun__cl.EnqueueFillBuffer(ctx->queue, mem, &half, sizeof half, 0, bytes, 0,
                                             NULL, NULL);
    if (err != CL_SUCCESS)
        return clrun__fail_cl(ctx, err, "clEnqueueFillBuffer", "tuning buffer of %zu bytes", bytes);
    *out = mem;
    return CLRUN_OK;
}

void clrun__tune_buffers_release(clrun_context *ctx, clrun__tune_buffers *tb)
{
    for (int i = 0; i < tb->count; i++)
        clrun__pool_release_raw(ctx, tb->mem[i], tb->bytes[i]);
    tb->count = 0;
}

/* ---- packing ----------------------------------------------------------------------------- */

uint64_t clrun__packed_elements(uint64_t batches, uint64_t K, uint64_t N, unsigned nr)
{
    return batches * ((N + nr - 1) / nr) * nr * K;
}

/* Makes p's clrun_mm_pack kernel with its fixed arguments and its launch's local size. */
static clrun_status packing_kernel(clrun_context *ctx, clrun__packing *p)
{
    clrun_status s = clrun__program_kernel(ctx, p->program, "clrun_mm_pack", 0, &p->kernel);
    cl_uint n = (cl_uint)p->N, k = (cl_uint)p->K;
    cl_ulong ks = p->b_ks, ns = p->b_ns;
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, p->kernel, 2, sizeof p->table, &p->table);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, p->kernel, 3, sizeof n, &n);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, p->kernel, 4, sizeof k, &k);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, p->kernel, 5, sizeof ks, &ks);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, p->kernel, 6, sizeof ns, &ns);
    cl_uint nr = p->nr;
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, p->kernel, 7, sizeof nr, &nr);
    /* A fixed local size, not the driver's per shape (POCL compiles one kernel per local
     * size): nr is a power of two, so the padded width is a multiple of it. */
    if (s == CLRUN_OK)
        s = clrun__local_size(ctx, p->kernel, p->nr < 32 ? p->nr : 32, &p->local[0]);
    p->global[0] = clrun__round_up((size_t)((p->N + p->nr - 1) / p->nr * p->nr), p->local[0]);
    if (s != CLRUN_OK && p->kernel) {
        clrun__cl.ReleaseKernel(p->kernel);
        p->kernel = NULL;
    }
    return s;
}

clrun_status clrun__packing_prepare(clrun_context *ctx, cl_program program, uint64_t batches,
                                    const uint64_t *offsets, uint64_t K, uint64_t N,
                                    uint64_t b_ks, uint64_t b_ns, unsigned nr, bool constant,
                                    clrun__packing *p)
{
    memset(p, 0, sizeof *p);
    *p = (clrun__packing){.program = program, .batches = batches, .K = K, .N = N, .b_ks = b_ks,
                          .b_ns = b_ns, .nr = nr, .constant = constant};
    p->bytes = clrun__packed_elements(batches, K, N, nr) * 4;
    clrun_status s = clrun__table_buffer(ctx, offsets, (size_t)batches * sizeof *offsets, &p->table);
    if (s == CLRUN_OK && constant) {
        p->offsets = malloc((size_t)batches * sizeof *offsets);
        if (p->offsets == NULL)
            s = clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "packing: %" PRIu64 " batches", batches);
        else
            memcpy(p->offsets, offsets, (size_t)batches * sizeof *offsets);
    }
    p->local[1] = p->local[2] = 1;
    p->global[1] = (size_t)K;
    p->global[2] = (size_t)batches;
    if (s == CLRUN_OK && !constant) /* packed at every enqueue: made now, as the op's kernels */
        s = packing_kernel(ctx, p);
    if (s != CLRUN_OK)
        clrun__packing_release(p);
    return s;
}

uint64_t clrun__packing_constant_bytes(const clrun__packing *p)
{
    return p->constant && p->packed == NULL && p->offsets ? p->bytes : 0;
}

clrun_status clrun__packing_pack_host(clrun_context *ctx, clrun__packing *p, const void *b,
                                      void *host, cl_mem packed)
{
    if (clrun__packing_constant_bytes(p) == 0 || b == NULL || host == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT,
                           "packing: B is not a constant waiting to be packed, or a buffer is missing");
    /* Words, not floats: a copy that keeps every bit, NaN payloads included. */
    const uint32_t *src = b;
    uint32_t *out = host;
    const uint64_t panels = (p->N + p->nr - 1) / p->nr;
    for (uint64_t z = 0; z < p->batches; z++)
        for (uint64_t panel = 0; panel < panels; panel++)
            for (uint64_t k = 0; k < p->K; k++) {
                uint32_t *row = out + ((z * panels + panel) * p->K + k) * p->nr;
                const uint32_t *from = src + p->offsets[z] + k * p->b_ks;
                for (unsigned j = 0; j < p->nr; j++) {
                    uint64_t n = panel * p->nr + j;
                    row[j] = n < p->N ? from[n * p->b_ns] : 0;
                }
            }
    if (packed)
        p->packed = packed;
    return CLRUN_OK;
}

void clrun__packing_narrow(clrun__packing *p, int bw)
{
    static const unsigned sizes[] = {4, 2, 2, 1, 1};
    uint64_t panels = (p->N + p->nr - 1) / p->nr;
    p->bw = bw;
    p->panel_bytes = (bw >= 3 ? 8 * (uint64_t)p->nr : 0) + p->K * p->nr * sizes[bw];
    p->bytes = p->batches * panels * p->panel_bytes;
}

clrun_status clrun__packing_pack_narrow_host(clrun_context *ctx, clrun__packing *p, const void *b,
                                             const float *scale, const float *zero, void *host,
                                             cl_mem packed)
{
    if (clrun__packing_constant_bytes(p) == 0 || p->bw == 0 || b == NULL || host == NULL ||
        (p->bw >= 3 && scale == NULL))
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT,
                           "packing: a narrow B is not a constant waiting to be packed, or a buffer is missing");
    const size_t size = p->bw >= 3 ? 1 : 2;
    const unsigned char *src = b;
    unsigned char *out = host;
    const uint64_t panels = (p->N + p->nr - 1) / p->nr, head = p->bw >= 3 ? 8 * (uint64_t)p->nr : 0;
    for (uint64_t z = 0; z < p->batches; z++)
        for (uint64_t panel = 0; panel < panels; panel++) {
            unsigned char *at = out + (z * panels + panel) * p->panel_bytes;
            for (unsigned j = 0; head && j < p->nr; j++) { /* scales, then zero points */
                uint64_t n = panel * p->nr + j;
                float sv = n < p->N ? scale[z * p->N + n] : 0.0f;
                float zv = n < p->N && zero ? zero[z * p->N + n] : 0.0f;
                memcpy(at + 4 * j, &sv, 4);
                memcpy(at + 4 * (p->nr + j), &zv, 4);
            }
            for (uint64_t k = 0; k < p->K; k++) {
                unsigned char *row = at + head + k * p->nr * size;
                for (unsigned j = 0; j < p->nr; j++) {
                    uint64_t n = panel * p->nr + j;
                    if (n < p->N)
                        memcpy(row + j * size, src + (p->offsets[z] + k * p->b_ks + n * p->b_ns) * size, size);
                    else
                        memset(row + j * size, 0, size);
                }
            }
        }
    if (packed)
        p->packed = packed;
    return CLRUN_OK;
}

clrun_status clrun__widening_prepare(clrun_context *ctx, int bw, uint64_t n, uint64_t inner,
                                     uint64_t channels, bool has_zero, unsigned vw,
                                     clrun__widening *w)
{
    memset(w, 0, sizeof *w);
    if (bw == 0)
        return CLRUN_OK;
    cl_program program = NULL;
    clrun_status s = clrun__ops_program(ctx, "matmul_core", vw, NULL, &program);
    if (s == CLRUN_OK)
        s = clrun__program_kernel(ctx, program, "clrun_widen_weight", 0, &w->kernel);
    cl_int code = bw, zero = has_zero;
    cl_ulong elements = n, in = inner;
    cl_uint ch = (cl_uint)channels;
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, w->kernel, 4, sizeof code, &code);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, w->kernel, 5, sizeof elements, &elements);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, w->kernel, 6, sizeof in, &in);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, w->kernel, 7, sizeof ch, &ch);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, w->kernel, 8, sizeof zero, &zero);
    if (s == CLRUN_OK)
        s = clrun__local_size(ctx, w->kernel, 64, &w->local);
    w->global = clrun__round_up((size_t)n, w->local ? w->local : 1);
    w->bytes = n * 4;
    w->has_scale = bw >= 3;
    if (s != CLRUN_OK)
        clrun__widening_release(w);
    return s;
}

clrun_status clrun__widening_enqueue(clrun_context *ctx, clrun__widening *w, cl_mem q, cl_mem scale,
                                    cl_mem zero, cl_mem into, clrun__chain *chain)
{
    /* absent scale and zero point are never read: q stands in */
    const cl_mem buffers[3] = {q, scale ? scale : q, zero ? zero : q};
    clrun_status s = clrun__buffer_args(ctx, w->kernel, buffers, 3, into);
    size_t global[1] = {w->global}, local[1] = {w->local};
    if (s == CLRUN_OK)
        s = clrun__chain_launch(chain, w->kernel, 1, global, local, "widening of a narrow weight");
    return s;
}

void clrun__widening_release(clrun__widening *w)
{
    if (w->kernel)
        clrun__cl.ReleaseKernel(w->kernel);
    w->kernel = NULL;
}

clrun_status clrun__packing_enqueue(clrun_context *ctx, clrun__packing *p, cl_mem b, cl_mem into,
                                    clrun__chain *chain)
{
    clrun_status s = p->kernel ? CLRUN_OK : packing_kernel(ctx, p);
    if (s == CLRUN_OK)
        s = clrun__buffer_args(ctx, p->kernel, &b, 1, into);
    if (s == CLRUN_OK)
        s = clrun__chain_launch(chain, p->kernel, 3, p->global, p->local, "packing of B");
    return s;
}

void clrun__packing_release(clrun__packing *p)
{
    if (p->kernel)
        clrun__cl.ReleaseKernel(p->kernel);
    if (p->table)
        clrun__cl.ReleaseMemObject(p->table);
    free(p->offsets);
    p->kernel = NULL;
    p->table = NULL;
    p->offsets = NULL;
}

clrun_status clrun__chunking_prepare(clrun_context *ctx, cl_program program, uint64_t N, uint64_t K,
                                     unsigned nr, uint64_t chunk, clrun__chunking *out)
{
    uint64_t panels = (N + nr - 1) / nr;
    *out = (clrun__chunking){.panels = (uint32_t)panels, .nr = nr, .K = K};
    out->chunk = (uint32_t)(chunk < 1 ? 1 : chunk < panels ? chunk : panels);
    clrun_status s = clrun__program_kernel(ctx, program, "clrun_conv_pack_chunk", 0, &out->kernel);
    cl_uint n = (cl_uint)N, k = (cl_uint)K;
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, out->kernel, 2, sizeof n, &n);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, out->kernel, 3, sizeof k, &k);
    cl_uint width = nr;
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, out->kernel, 6, sizeof width, &width);
    if (s == CLRUN_OK)
        s = clrun__local_size(ctx, out->kernel, nr < 32 ? nr : 32, &out->local);
    return s;
}

uint64_t clrun__chunking_bytes(const clrun__chunking *c) { return (uint64_t)c->chunk * c->K * c->nr * 4; }

/* The packing of the chunk that starts at panel p0 of w into scratch; *count: its panels. */
static clrun_status chunk_enqueue(clrun_context *ctx, clrun__chunking *c, cl_mem w, cl_mem scratch,
                                  uint32_t p0, uint32_t *count, clrun__chain *chain)
{
    *count = c->panels - p0 < c->chunk ? c->panels - p0 : c->chunk;
    cl_uint n0 = p0 * c->nr, width = *count * c->nr;
    clrun_status s = clrun__buffer_args(ctx, c->kernel, &w, 1, scratch);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, c->kernel, 4, sizeof n0, &n0);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, c->kernel, 5, sizeof width, &width);
    size_t global[2] = {clrun__round_up(width, c->local), (size_t)c->K}, local[2] = {c->local, 1};
    if (s == CLRUN_OK)
        s = clrun__chain_launch(chain, c->kernel, 2, global, local, "packing of a chunk of B");
    return s;
}

clrun_status clrun__chunking_launch(clrun_context *ctx, clrun__chunking *c, cl_mem w, cl_mem scratch,
                                    cl_kernel kernel, cl_uint panel0_at, cl_uint dims,
                                    const size_t *global, const size_t *local, size_t block,
                                    const char *what, clrun__chain *chain)
{
    clrun_status s = CLRUN_OK;
    for (uint32_t p0 = 0, count; s == CLRUN_OK && p0 < c->panels; p0 += c->chunk) {
        s = chunk_enqueue(ctx, c, w, scratch, p0, &count, chain);
        cl_uint first = p0;
        if (s == CLRUN_OK)
            s = clrun__arg(ctx, kernel, panel0_at, sizeof first, &first);
        size_t chunk_global[3] = {global[0], clrun__round_up(count, block), dims > 2 ? global[2] : 1};
        if (s == CLRUN_OK)
            s = clrun__chain_launch(chain, kernel, dims, chunk_global, local, what);
    }
    return s;
}

void clrun__chunking_release(clrun__chunking *c)
{
    if (c->kernel)
        clrun__cl.ReleaseKernel(c->kernel);
    c->kernel = NULL;
}

/* ---- padding of a convolution's image ------------------------------------------------------ */

bool clrun__conv_padded_extent(const cl_int *geo, const clrun__conv_geometry *g, cl_uint *hp,
                               cl_uint *wp)
{
    bool pad = g->pad[0] || g->pad[1] || g->pad_end[0] || g->pad_end[1];
    if (!pad) {
        *hp = (cl_uint)geo[CLRUN__G_H];
        *wp = (cl_uint)geo[CLRUN__G_W];
        return false;
    }
    *hp = (cl_uint)((geo[CLRUN__G_OH] - 1) * geo[CLRUN__G_SH] + (geo[CLRUN__G_KH] - 1) * geo[CLRUN__G_DH] + 1);
    *wp = (cl_uint)((geo[CLRUN__G_OW] - 1) * geo[CLRUN__G_SW] + (geo[CLRUN__G_KW] - 1) * geo[CLRUN__G_DW] + 1);
    return true;
}

#define CONV_PAD_ELEMENTS 4096

clrun_status clrun__conv_padding_prepare(clrun_context *ctx, cl_program program, cl_mem table,
                                         const cl_int *geo, uint64_t images, cl_uint hp, cl_uint wp,
                                         clrun__conv_padding *out)
{
    uint64_t planes = images * (uint64_t)geo[CLRUN__G_C];
    out->bytes = planes * hp * wp * 4;
    clrun_status s = clrun__program_kernel(ctx, program, "clrun_conv_pad", 0, &out->kernel);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, out->kernel, 2, sizeof table, &table);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, out->kernel, 3, sizeof hp, &hp);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, out->kernel, 4, sizeof wp, &wp);
    /* Work-items of whole rows, about CONV_PAD_ELEMENTS elements each, in groups of one (POCL
     * compiles one kernel per local size, see clrun__core_group) */
    size_t rows = CONV_PAD_ELEMENTS / wp < 1 ? 1 : CONV_PAD_ELEMENTS / wp;
    out->local[0] = out->local[1] = out->local[2] = 1;
    out->global[0] = (hp + rows - 1) / rows;
    out->global[1] = (size_t)planes;
    out->global[2] = 1;
    return s;
}

void clrun__conv_padding_release(clrun__conv_padding *p)
{
    if (p->kernel)
        clrun__cl.ReleaseKernel(p->kernel);
    p->kernel = NULL;
}
