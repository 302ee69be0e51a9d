/* Speed of the op kernels on the selected device (CLRUN_DEVICE / CLRUN_PLATFORM), each next to
 * a baseline measured in the same run:
 *   copy                 GB/s      vs clEnqueueCopyBuffer of the same bytes (the copy bandwidth)
 *   matmul               GFLOP/s   vs the host BLAS: numpy (/usr/bin/python3) a @ b in float32
 *                                  on the same shapes; weights (B) are constant inputs
 *   conv2d               GFLOP/s   vs im2col + the host BLAS (numpy), im2col included
 *   depthwise, softmax,  GB/s      (bytes read once + written once) vs clEnqueueCopyBuffer of
 *   layernorm                      the input's bytes in the same run (the copy bandwidth at that
 *                                  size: small tensors stay in cache), and vs the large copy
 *   first call           s         a new shape in a fresh process with empty kernel caches
 *                                  (clrun's and POCL's): compile + tuning + run, vs the same
 *                                  for a one-line kernel (the driver's floor); then a second
 *                                  process on the same caches, which must time no variant
 * Device times come from the queue's profiling counters: the best of the repetitions, after one
 * warm-up run (which also builds, packs and tunes). numpy's are the best of as many runs after a
 * warm-up, from time.perf_counter. The best, not the median: on a shared machine it is the run
 * least disturbed by other work, for both sides alike. Where /usr/bin/python3 or numpy is missing the BLAS
 * columns say so. Not a test: nothing is asserted.
 *
 * Usage: bench_kernels [--quick] [--repeat N] [--no-blas] [--variant V] [--only WORDS]
 *   --variant V: every product runs candidate V of lib/ops/matmul_core.c's list for its rows,
 *   untuned (to compare the variants; by default the tuner chooses).
 *   --only WORDS: the copy baseline and the lines whose label contains WORDS ("softmax",
 *   "3x3/2", "gelu", "tanh"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <clrun/clrun.h>

#include "ops/matmul_core.h"
#include "ops/ops.h"
#include "../tests/node_memory.h"

static clrun_context *ctx;
static int repeat = 5;
static bool use_blas = true;
static const char *only; /* --only: the labels to run */

static bool wanted(const char *label) { return only == NULL || strstr(label, only) != NULL; }

static void die(const char *what)
{
    fprintf(stderr, "bench_kernels: %s: %s\n", what, clrun_last_error(ctx));
    exit(1);
}

static void check(cl_int err, const char *what)
{
    if (err != CL_SUCCESS) {
        fprintf(stderr, "bench_kernels: %s: %s (%d)\n", what, clrun_cl_error_name(err), err);
        exit(1);
    }
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double event_seconds(cl_event event)
{
    cl_ulong start = 0, end = 0;
    check(clWaitForEvents(1, &event), "clWaitForEvents");
    check(clGetEventProfilingInfo(event, CL_PROFILING_COMMAND_START, sizeof start, &start, NULL),
          "profiling start");
    check(clGetEventProfilingInfo(event, CL_PROFILING_COMMAND_END, sizeof end, &end, NULL),
          "profiling end");
    clReleaseEvent(event);
    return (double)(end - start) * 1e-9;
}

/* The best of n times: on a machine shared with other work (the 2-core CI and developer
 * machines are), the fastest run is the one least disturbed; numpy's baseline is taken the
 * same way. */
static double best_of(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, compare_doubles);
    return t[0];
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static cl_mem device_buffer(size_t bytes, float value)
{
    cl_int err;
    cl_mem m = clCreateBuffer(clrun_context_cl(ctx), CL_MEM_READ_WRITE, bytes, NULL, &err);
    check(err, "clCreateBuffer");
    check(clEnqueueFillBuffer(clrun_context_queue(ctx), m, &value, sizeof value, 0, bytes, 0, NULL,
                              NULL), "clEnqueueFillBuffer");
    return m;
}

static clrun_tensor_type f32(int rank, const int64_t *dims)
{
    clrun_tensor_type t = {CLRUN_F32, rank, {0}};
    memcpy(t.shape, dims, (size_t)rank * sizeof *dims);
    return t;
}

static size_t bytes_of(const clrun_tensor_type *t)
{
    size_t n = 4;
    for (int i = 0; i < t->rank; i++)
        n *= (size_t)t->shape[i];
    return n;
}

/* Median seconds of one node of `op` over buffers filled with small values; inputs in the
 * `constant` mask are constants (weights: packed once, before the runs, as an executor does). */
static double time_op(const char *name, int inputs, const clrun_tensor_type *in,
                      const clrun_attr *attrs, int attr_count, uint64_t constant)
{
    const clrun__op *op = clrun__op_find(name);
    clrun_tensor_type out;
    clrun__op_call call = {in, inputs, &out, 1, attrs, attr_count, constant};
    char err[512];
    if (op == NULL || op->infer(&call, &out, err, sizeof err) != CLRUN_OK) {
        fprintf(stderr, "bench_kernels: %s: %s\n", name, err);
        exit(1);
    }
    const clrun__op_kernels *kernels = clrun__op_kernels_find(op);
    void *state;
    if (kernels == NULL || kernels->prepare(ctx, op, &call, &state) != CLRUN_OK)
        die(name);
    cl_mem buffers[8], result = device_buffer(bytes_of(&out), 0);
    for (int i = 0; i < inputs; i++)
        buffers[i] = device_buffer(bytes_of(&in[i]), i == 4 ? 1.0f : 0.5f);
    node_memory memory; /* constants packed as an executor packs them, scratch */
    if (node_memory_make(ctx, kernels, state, &call, buffers, &result, &memory) != CL_SUCCESS)
        die(name);
    double t[64];
    for (int r = -1; r < repeat; r++) {
        cl_event done;
        if (kernels->enqueue(ctx, state, &call, buffers, node_memory_outputs(&memory), 0,
                             NULL, &done) != CLRUN_OK)
            die(name);
        double s = event_seconds(done);
        if (r >= 0)
            t[r] = s;
    }
    kernels->release(state);
    node_memory_free(ctx, &memory);
    for (int i = 0; i < inputs; i++)
        clReleaseMemObject(buffers[i]);
    clReleaseMemObject(result);
    return best_of(t, repeat);
}

/* ---- the host BLAS through numpy --------------------------------------------------------- */

/* Runs a numpy script under /usr/bin/python3 and reads one number per line into out; returns
 * how many. OpenBLAS cannot name some recent CPUs (it falls back to a generic core, several
 * times slower): where the CPU has AVX-512 and OPENBLAS_CORETYPE is unset, SkylakeX is named, so
 * that the baseline is the BLAS at its best. */
static int numpy_times(const char *script, double *out, int max)
{
    if (!use_blas)
        return 0;
    char path[] = "/tmp/clrun-bench-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return 0;
    FILE *f = fdopen(fd, "w");
    fputs(script, f);
    fclose(f);
    char command[512];
    snprintf(command, sizeof command,
             "%s /usr/bin/python3 %s %d 2>/dev/null",
             getenv("OPENBLAS_CORETYPE") == NULL && system("grep -q avx512f /proc/cpuinfo") == 0
                 ? "OPENBLAS_CORETYPE=SkylakeX" : "",
             path, repeat);
    FILE *p = popen(command, "r");
    int n = 0;
    while (p && n < max && fscanf(p, "%lf", &out[n]) == 1)
        n++;
    if (p)
        pclose(p);
    unlink(path);
    return n;
}

static const char numpy_prelude[] =
    "import sys, time\n"
    "import numpy as np\n"
    "runs = int(sys.argv[1])\n"
    "def med(f):\n"
    "    f()\n"
    "    t = []\n"
    "    for _ in range(runs):\n"
    "        s = time.perf_counter(); f(); t.append(time.perf_counter() - s)\n"
    "    return min(t)\n";

/* The BLAS library numpy has loaded after a product (from /proc/self/maps, where the link is
 * resolved), into out; "" when unknown. Debian's numpy goes through the libblas.so.3
 * alternative: OpenBLAS's when installed (.../openblas-pthread/libblas.so.3), else the
 * unoptimised reference BLAS (.../blas/libblas.so.3), which would make every ratio look far
 * better. */
static void numpy_blas_library(char *out, size_t size)
{
    out[0] = '\0';
    FILE *p = popen("/usr/bin/python3 -c \"import numpy as np; a = np.ones((64, 64), np.float32); a @ a; "
                    "print(next((l.split()[-1] for l in open('/proc/self/maps') "
                    "if l.rsplit('/', 1)[-1].startswith(('libblas', 'libcblas', 'libmkl_rt'))), ''))\" 2>/dev/null",
                    "r");
    if (p == NULL)
        return;
    if (fgets(out, (int)size, p) == NULL)
        out[0] = '\0';
    out[strcspn(out, "\n")] = '\0';
    pclose(p);
}

static void print_blas_version(void)
{
    double v[1];
    if (!use_blas) {
        printf("# host BLAS: not measured (--no-blas)\n");
        return;
    }
    if (numpy_times("import numpy\nprint(numpy.__version__.replace('.', ' ', 1).split()[0])\n", v, 1) != 1) {
        printf("# host BLAS: not available (/usr/bin/python3 with numpy not found): no BLAS columns\n");
        return;
    }
    char library[512];
    numpy_blas_library(library, sizeof library);
    printf("# host BLAS: numpy under /usr/bin/python3 with %s%s\n", library[0] ? library : "an unknown BLAS",
           getenv("OPENBLAS_CORETYPE") ? "" : ", OPENBLAS_CORETYPE=SkylakeX where the CPU has AVX-512");
    if (strstr(library, "openblas") == NULL && strstr(library, "mkl") == NULL &&
        strstr(library, "blis") == NULL)
        printf("# WARNING: that is not a tuned BLAS (the reference BLAS runs at a few GFLOP/s): the "
               "BLAS ratios are meaningless; install libopenblas0-pthread\n");
}

/* ---- bandwidth --------------------------------------------------------------------------- */

static double copy_gbs;

static void bench_bandwidth(int64_t n)
{
    cl_mem a = device_buffer((size_t)n * 4, 1), b = device_buffer((size_t)n * 4, 0);
    double t[64];
    for (int r = -1; r < repeat; r++) {
        cl_event done;
        check(clEnqueueCopyBuffer(clrun_context_queue(ctx), a, b, 0, 0, (size_t)n * 4, 0, NULL, &done),
              "clEnqueueCopyBuffer");
        double s = event_seconds(done);
        if (r >= 0)
            t[r] = s;
    }
    clReleaseMemObject(a);
    clReleaseMemObject(b);
    double base = best_of(t, repeat);
    clrun_tensor_type in[1] = {f32(1, &n)};
    double copy = time_op("copy", 1, in, NULL, 0, 0);
    copy_gbs = 8.0 * (double)n / base * 1e-9;
    double gb_copy = 8.0 * (double)n / copy * 1e-9;
    printf("%-40s %8.2f GB/s  %8.3f ms\n", "clEnqueueCopyBuffer (the copy bandwidth)", copy_gbs, base * 1e3);
    printf("%-40s %8.2f GB/s  %8.3f ms  %5.2fx copy\n", "copy (kernel)", gb_copy, copy * 1e3,
           gb_copy / copy_gbs);
}

/* ---- matmul ------------------------------------------------------------------------------ */

typedef struct mm_shape {
    int64_t M, K, N;
    const char *what;
} mm_shape;

static const mm_shape mm_shapes[] = {
    {128, 768, 768, "attention out"},  {128, 768, 2304, "QKV"},
    {128, 768, 3072, "MLP up"},        {128, 3072, 768, "MLP down"},
    {1024, 768, 3072, "MLP up, 1024"}, {1024, 3072, 768, "MLP down, 1024"},
    {1024, 1024, 1024, "square"},
};
#define MM_COUNT (sizeof mm_shapes / sizeof mm_shapes[0])

static void bench_matmul(bool quick)
{
    char script[4096];
    size_t used = (size_t)snprintf(script, sizeof script, "%s", numpy_prelude);
    for (size_t i = 0; i < MM_COUNT; i++)
        used += (size_t)snprintf(script + used, sizeof script - used,
                                 "a = np.random.rand(%lld, %lld).astype(np.float32); "
                                 "b = np.random.rand(%lld, %lld).astype(np.float32)\n"
                                 "print(med(lambda: a @ b))\n",
                                 (long long)mm_shapes[i].M, (long long)mm_shapes[i].K,
                                 (long long)mm_shapes[i].K, (long long)mm_shapes[i].N);
    double blas[MM_COUNT];
    int have = numpy_times(script, blas, (int)MM_COUNT);
    double rates[MM_COUNT], best = 0, worst_ratio = 1e9;
    size_t count = quick ? 4 : MM_COUNT;
    for (size_t i = 0; i < count; i++) {
        const mm_shape *s = &mm_shapes[i];
        const int64_t da[2] = {s->M, s->K}, db[2] = {s->K, s->N};
        clrun_tensor_type in[2] = {f32(2, da), f32(2, db)};
        double flop = 2.0 * (double)s->M * (double)s->N * (double)s->K;
        double t = time_op("matmul", 2, in, NULL, 0, 2);
        rates[i] = flop / t * 1e-9;
        best = rates[i] > best ? rates[i] : best;
        char label[64];
        snprintf(label, sizeof label, "matmul %lldx%lldx%lld (%s)", (long long)s->M, (long long)s->K,
                 (long long)s->N, s->what);
        if ((int)i < have) {
            double b = flop / blas[i] * 1e-9;
            worst_ratio = rates[i] / b < worst_ratio ? rates[i] / b : worst_ratio;
            printf("%-40s %8.1f GFLOP/s %7.3f ms  BLAS %6.1f GFLOP/s  %5.2fx BLAS\n", label, rates[i],
                   t * 1e3, b, rates[i] / b);
        } else {
            printf("%-40s %8.1f GFLOP/s %7.3f ms\n", label, rates[i], t * 1e3);
        }
    }
    double slowest = best;
    for (size_t i = 0; i < count; i++)
        slowest = rates[i] < slowest ? rates[i] : slowest;
    printf("%-40s slowest shape %.2fx the best; ", "matmul summary", slowest / best);
    if (have)
        printf("lowest ratio to BLAS %.2fx\n", worst_ratio);
    else
        printf("no BLAS baseline\n");
}

/* ---- conv2d ------------------------------------------------------------------------------ */

typedef struct conv_shape {
    int C, HW, O, k, stride, pad;
    const char *what;
} conv_shape;

static const conv_shape conv_shapes[] = {
    {64, 56, 64, 3, 1, 1, "3x3 64->64 at 56"},   {256, 56, 64, 1, 1, 0, "1x1 256->64 at 56"},
    {3, 224, 64, 7, 2, 3, "7x7/2 stem"},         {128, 28, 128, 3, 1, 1, "3x3 128->128 at 28"},
    {512, 7, 512, 3, 1, 1, "3x3 512->512 at 7"},
};
#define CONV_COUNT (sizeof conv_shapes / sizeof conv_shapes[0])

static const char im2col_script[] =
    "def im2col_gemm(x, w, k, s, p):\n"
    "    C, H, W = x.shape\n"
    "    xp = np.pad(x, ((0, 0), (p, p), (p, p)))\n"
    "    OH = (H + 2 * p - k) // s + 1; OW = (W + 2 * p - k) // s + 1\n"
    "    st = xp.strides\n"
    "    cols = np.lib.stride_tricks.as_strided(xp, (C, k, k, OH, OW),\n"
    "        (st[0], st[1], st[2], st[1] * s, st[2] * s)).reshape(C * k * k, OH * OW)\n"
    "    return w @ cols\n";

static void bench_conv(void)
{
    char script[4096];
    size_t used = (size_t)snprintf(script, sizeof script, "%s%s", numpy_prelude, im2col_script);
    for (size_t i = 0; i < CONV_COUNT; i++) {
        const conv_shape *c = &conv_shapes[i];
        used += (size_t)snprintf(script + used, sizeof script - used,
                                 "x = np.random.rand(%d, %d, %d).astype(np.float32); "
                                 "w = np.random.rand(%d, %d).astype(np.float32)\n"
                                 "print(med(lambda: im2col_gemm(x, w, %d, %d, %d)))\n",
                                 c->C, c->HW, c->HW, c->O, c->C * c->k * c->k, c->k, c->stride, c->pad);
    }
    double blas[CONV_COUNT];
    int have = numpy_times(script, blas, (int)CONV_COUNT);
    for (size_t i = 0; i < CONV_COUNT; i++) {
        const conv_shape *c = &conv_shapes[i];
        const int64_t dx[4] = {1, c->C, c->HW, c->HW}, dw[4] = {c->O, c->C, c->k, c->k};
        const int64_t pads[2] = {c->pad, c->pad}, strides[2] = {c->stride, c->stride};
        clrun_tensor_type in[2] = {f32(4, dx), f32(4, dw)};
        clrun_attr attrs[2] = {{"pad", CLRUN_ATTR_INTS, 0, 0, {0}, 2},
                               {"stride", CLRUN_ATTR_INTS, 0, 0, {0}, 2}};
        memcpy(attrs[0].ints, pads, sizeof pads);
        memcpy(attrs[1].ints, strides, sizeof strides);
        int OH = (c->HW + 2 * c->pad - c->k) / c->stride + 1;
        double flop = 2.0 * c->O * OH * OH * c->C * c->k * c->k;
        double t = time_op("conv2d", 2, in, attrs, 2, 2);
        char label[64];
        snprintf(label, sizeof label, "conv2d %s", c->what);
        if ((int)i < have) {
            double b = flop / blas[i] * 1e-9;
            printf("%-40s %8.1f GFLOP/s %7.3f ms  im2col+BLAS %6.1f GFLOP/s  %5.2fx\n", label,
                   flop / t * 1e-9, t * 1e3, b, flop / t * 1e-9 / b);
        } else {
            printf("%-40s %8.1f GFLOP/s %7.3f ms\n", label, flop / t * 1e-9, t * 1e3);
        }
    }
}

/* ---- depthwise and row ops against the copy bandwidth ------------------------------------ */

/* Seconds of clEnqueueCopyBuffer of `bytes`: the copy bandwidth at an op's own size (a small
 * tensor stays in cache, where a large copy goes to memory). */
static double time_copy(size_t bytes)
{
    cl_mem a = device_buffer(bytes, 1), b = device_buffer(bytes, 0);
    double t[64];
    for (int r = -1; r < repeat; r++) {
        cl_event done;
        check(clEnqueueCopyBuffer(clrun_context_queue(ctx), a, b, 0, 0, bytes, 0, NULL, &done),
              "clEnqueueCopyBuffer");
        double s = event_seconds(done);
        if (r >= 0)
            t[r] = s;
    }
    clReleaseMemObject(a);
    clReleaseMemObject(b);
    return best_of(t, repeat);
}

/* An op that reads `in_bytes` and writes `out_bytes` in t seconds, against a copy of in_bytes
 * (read and written once) in the same run, and against the large copy of bench_bandwidth (the
 * memory bandwidth, which is what an op of a size that does not fit in cache can reach). */
static void print_bandwidth(const char *label, double in_bytes, double out_bytes, double t)
{
    double gbs = (in_bytes + out_bytes) / t * 1e-9;
    double copy = 2 * in_bytes / time_copy((size_t)in_bytes) * 1e-9;
    printf("%-40s %8.2f GB/s  %8.3f ms  copy same size %6.2f GB/s: %5.2fx, large copy: %5.2fx\n",
           label, gbs, t * 1e3, copy, gbs / copy, gbs / copy_gbs);
}

static void bench_depthwise(int C, int HW, int stride)
{
    const int64_t dx[4] = {1, C, HW, HW}, dw[4] = {C, 1, 3, 3};
    const int64_t pads[2] = {1, 1}, strides[2] = {stride, stride};
    clrun_tensor_type in[2] = {f32(4, dx), f32(4, dw)};
    clrun_attr attrs[3] = {{"pad", CLRUN_ATTR_INTS, 0, 0, {0}, 2},
                           {"stride", CLRUN_ATTR_INTS, 0, 0, {0}, 2},
                           {"groups", CLRUN_ATTR_INT, C, 0, {0}, 0}};
    memcpy(attrs[0].ints, pads, sizeof pads);
    memcpy(attrs[1].ints, strides, sizeof strides);
    int OH = (HW - 1) / stride + 1;
    char label[64];
    snprintf(label, sizeof label, "depthwise 3x3/%d %dx%dx%d", stride, C, HW, HW);
    if (!wanted(label))
        return;
    double t = time_op("conv2d", 2, in, attrs, 3, 2);
    print_bandwidth(label, 4.0 * C * HW * HW, 4.0 * C * OH * OH, t);
}

typedef struct row_case {
    const char *label, *op;
    int64_t rows, length;
    int inputs; /* layernorm: x, gamma, beta (constants) */
} row_case;

static const row_case row_cases[] = {
    {"softmax [1536, 128] (BERT scores)", "softmax", 1536, 128, 1},
    {"softmax [1024, 768]", "softmax", 1024, 768, 1},
    {"layernorm [128, 768]", "layernorm", 128, 768, 3},
    {"layernorm [1024, 768]", "layernorm", 1024, 768, 3},
    {"softmax [64, 65536] (16 MiB)", "softmax", 64, 65536, 1},
};

static void bench_rows(void)
{
    for (size_t i = 0; i < sizeof row_cases / sizeof row_cases[0]; i++) {
        const row_case *r = &row_cases[i];
        if (!wanted(r->label))
            continue;
        const int64_t dims[2] = {r->rows, r->length};
        clrun_tensor_type in[3] = {f32(2, dims), f32(1, &dims[1]), f32(1, &dims[1])};
        double bytes = 4.0 * (double)r->rows * (double)r->length;
        print_bandwidth(r->label, bytes, bytes,
                        time_op(r->op, r->inputs, in, NULL, 0, r->inputs == 3 ? 6 : 0));
    }
}

/* gelu_erf (erf by a polynomial fit) against gelu (tanh) on the same tensor: the cost of erf. */
static void bench_gelu(int64_t n)
{
    if (!wanted("gelu"))
        return;
    clrun_tensor_type in[1] = {f32(1, &n)};
    double tanh_form = time_op("gelu", 1, in, NULL, 0, 0);
    double erf_form = time_op("gelu_erf", 1, in, NULL, 0, 0);
    char label[64];
    snprintf(label, sizeof label, "gelu [%lld]", (long long)n);
    print_bandwidth(label, 4.0 * (double)n, 4.0 * (double)n, tanh_form);
    snprintf(label, sizeof label, "gelu_erf [%lld]", (long long)n);
    printf("%-40s %8.2f GB/s  %8.3f ms  %5.2fx the time of gelu\n", label,
           8.0 * (double)n / erf_form * 1e-9, erf_form * 1e3, erf_form / tanh_form);
}

/* Unary ops whose element goes through exp (exp, sigmoid, tanh) against the copy bandwidth. */
static void bench_exp_family(int64_t n)
{
    static const char *const ops[] = {"exp", "sigmoid", "tanh"};
    clrun_tensor_type in[1] = {f32(1, &n)};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        char label[64];
        snprintf(label, sizeof label, "%s [%lld]", ops[i], (long long)n);
        if (wanted(label))
            print_bandwidth(label, 4.0 * (double)n, 4.0 * (double)n,
                            time_op(ops[i], 1, in, NULL, 0, 0));
    }
}

/* ---- the first call of a new shape ------------------------------------------------------- */

/* The driver's own floor, in the same kind of child: a one-line kernel built from source and
 * run once. On POCL most of it is loading and linking its kernel library into the first
 * program a process builds, which no kernel of ours can avoid. */
static int floor_child(void)
{
    static const char source[] = "__kernel void one(__global float *x) { x[get_global_id(0)] = 1.0f; }\n";
    cl_program program = NULL;
    cl_kernel kernel = NULL;
    cl_mem x = device_buffer(4096, 0);
    clrun_status s = clrun_program_build(ctx, "floor", source, sizeof source - 1, &program);
    cl_int err = s == CLRUN_OK ? CL_SUCCESS : CL_BUILD_PROGRAM_FAILURE;
    if (err == CL_SUCCESS)
        kernel = clCreateKernel(program, "one", &err);
    if (err == CL_SUCCESS)
        err = clSetKernelArg(kernel, 0, sizeof x, &x);
    size_t global = 1024;
    if (err == CL_SUCCESS)
        err = clEnqueueNDRangeKernel(clrun_context_queue(ctx), kernel, 1, NULL, &global, NULL, 0, NULL, NULL);
    if (err == CL_SUCCESS)
        err = clFinish(clrun_context_queue(ctx));
    if (kernel)
        clReleaseKernel(kernel);
    if (program)
        clReleaseProgram(program);
    clReleaseMemObject(x);
    return err == CL_SUCCESS ? 0 : 1;
}

/* In a child process: context, prepare (compile + tuning) and one run of a matmul no cache has
 * seen (or, with `floor`, the one-line kernel), timed from before the context to the end of
 * the run. */
static int first_call_child(bool floor)
{
    double start = now_s();
    if (clrun_context_create(NULL, &ctx) != CLRUN_OK) {
        fprintf(stderr, "bench_kernels: %s\n", clrun_last_error(NULL));
        return 1;
    }
    if (floor) {
        int r = floor_child();
        printf("%.3f 0\n", now_s() - start);
        clrun_context_destroy(ctx);
        return r;
    }
    const int64_t da[2] = {192, 768}, db[2] = {768, 3072};
    clrun_tensor_type in[2] = {f32(2, da), f32(2, db)};
    repeat = 1;
    time_op("matmul", 2, in, NULL, 0, 2);
    printf("%.3f %lu\n", now_s() - start, clrun__tune_timings);
    clrun_context_destroy(ctx);
    return 0;
}

static void bench_first_call(const char *self)
{
    char dir[] = "/tmp/clrun-bench-cache-XXXXXX";
    if (mkdtemp(dir) == NULL)
        return;
    char command[1024];
    for (int process = 0; process < 3; process++) {
        /* The floor first, in caches of its own: it warms nothing the matmul uses. */
        snprintf(command, sizeof command,
                 "CLRUN_CACHE_DIR=%s/%s POCL_CACHE_DIR=%s/%s-pocl %s --first-call-child%s", dir,
                 process ? "clrun" : "floor", dir, process ? "clrun" : "floor", self,
                 process ? "" : " floor");
        FILE *p = popen(command, "r");
        double seconds = 0;
        unsigned long timed = 0;
        if (p == NULL || fscanf(p, "%lf %lu", &seconds, &timed) != 2) {
            printf("first call: the child process failed\n");
            if (p)
                pclose(p);
            break;
        }
        pclose(p);
        static const char *const what[] = {"one-line kernel, cold caches (the floor)",
                                           "first call, cold caches (192x768x3072)",
                                           "same shape, second process"};
        if (process == 0)
            printf("%-40s %8.3f s\n", what[0], seconds);
        else
            printf("%-40s %8.3f s   variants timed: %lu\n", what[process], seconds, timed);
    }
    snprintf(command, sizeof command, "rm -rf '%s'", dir);
    if (system(command) != 0)
        fprintf(stderr, "bench_kernels: could not remove %s\n", dir);
}

int main(int argc, char **argv)
{
    bool quick = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = true;
        else if (!strcmp(argv[i], "--no-blas"))
            use_blas = false;
        else if (!strcmp(argv[i], "--first-call-child"))
            return first_call_child(i + 1 < argc && !strcmp(argv[i + 1], "floor"));
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = argv[++i];
        else if (!strcmp(argv[i], "--repeat") && i + 1 < argc)
            repeat = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--variant") && i + 1 < argc)
            clrun__ops_variant = atoi(argv[++i]); /* every product takes this candidate */
        else {
            fprintf(stderr,
                    "usage: %s [--quick] [--repeat N] [--no-blas] [--variant V] [--only WORDS]\n",
                    argv[0]);
            return 2;
        }
    }
    if (repeat < 1 || repeat > 64)
        repeat = 5;
    if (clrun_context_create(NULL, &ctx) != CLRUN_OK) {
        fprintf(stderr, "bench_kernels: %s\n", clrun_last_error(NULL));
        return 1;
    }
    const clrun_device_info *d = clrun_context_device(ctx);
    time_t now = time(NULL);
    char date[64];
    strftime(date, sizeof date, "%Y-%m-%d %H:%M", localtime(&now));
    printf("# bench_kernels%s, %s; best of %d runs after 1 warm-up (device: profiling events)\n",
           quick ? " --quick" : "", date, repeat);
    printf("# device: %s (%s), %s, driver %s, %u compute units, %s\n", d->name, d->platform_name,
           d->version, d->driver_version, d->compute_units, d->type);
    print_blas_version();
    bench_bandwidth(quick ? (1 << 22) : (1 << 24));
    if (wanted("matmul"))
        bench_matmul(quick);
    if (wanted("conv2d"))
        bench_conv();
    bench_depthwise(144, 56, 1);
    bench_depthwise(96, 112, 2);
    bench_rows();
    bench_gelu(quick ? (1 << 20) : (1 << 22));
    bench_exp_family(quick ? (1 << 20) : (1 << 22));
    clrun_context_destroy(ctx);
    if (!quick && only == NULL)
        bench_first_call(argv[0]);
    return 0;
}
