/* Speed of the op kernels on the selected device (CLRUN_DEVICE / CLRUN_PLATFORM), each next to
 * a baseline measured in the same run:
 *   add, copy       GB/s      vs clEnqueueCopyBuffer of the same bytes
 *   matmul          GFLOP/s   vs a naive kernel (one output per work-item, no local memory)
 *   conv2d          GFLOP/s   vs clrun's direct convolution kernel on the same layer
 * Times come from the queue's profiling counters: the median over the repetitions, after one
 * warm-up run (which also builds the programs). Not a test: nothing is asserted.
 *
 * Usage: bench_kernels [--quick] [--repeat N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <clrun/clrun.h>

#include "ops/ops.h"

static clrun_context *ctx;
static int repeat = 5;

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

/* Seconds an event's command ran. */
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

static double median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, compare_doubles);
    return t[n / 2];
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

/* Median seconds of one node of `op` over buffers filled with small values. */
static double time_op(const char *name, int inputs, const clrun_tensor_type *in,
                      const clrun_attr *attrs, int attr_count)
{
    const clrun__op *op = clrun__op_find(name);
    clrun_tensor_type out;
    clrun__op_call call = {in, inputs, &out, 1, attrs, attr_count};
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
        buffers[i] = device_buffer(bytes_of(&in[i]), 0.5f);
    double t[64];
    for (int r = -1; r < repeat; r++) {
        cl_event done;
        if (kernels->enqueue(ctx, state, &call, buffers, &result, 0, NULL, &done) != CLRUN_OK)
            die(name);
        double s = event_seconds(done);
        if (r >= 0)
            t[r] = s;
    }
    kernels->release(state);
    for (int i = 0; i < inputs; i++)
        clReleaseMemObject(buffers[i]);
    clReleaseMemObject(result);
    return median(t, repeat);
}

/* Median seconds of `kernel` (arguments set) over global/local. */
static double time_kernel(cl_kernel kernel, cl_uint dims, const size_t *global, const size_t *local,
                          int runs)
{
    double t[64];
    for (int r = -1; r < runs; r++) {
        cl_event done;
        check(clEnqueueNDRangeKernel(clrun_context_queue(ctx), kernel, dims, NULL, global, local, 0,
                                     NULL, &done), "clEnqueueNDRangeKernel");
        double s = event_seconds(done);
        if (r >= 0)
            t[r] = s;
    }
    return median(t, runs);
}

/* ---- bandwidth --------------------------------------------------------------------------- */

static double time_copy_buffer(size_t bytes)
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
    return median(t, repeat);
}

static void bench_bandwidth(int64_t n)
{
    clrun_tensor_type in[2] = {f32(1, &n), f32(1, &n)};
    double add = time_op("add", 2, in, NULL, 0);
    double copy = time_op("copy", 1, in, NULL, 0);
    double base = time_copy_buffer((size_t)n * 4);
    double gb_add = 3.0 * 4 * (double)n / add * 1e-9, gb_copy = 2.0 * 4 * (double)n / copy * 1e-9;
    double gb_base = 2.0 * 4 * (double)n / base * 1e-9;
    printf("%-34s %9.2f GB/s  %8.3f ms\n", "clEnqueueCopyBuffer (baseline)", gb_base, base * 1e3);
    printf("%-34s %9.2f GB/s  %8.3f ms  %5.2fx baseline\n", "copy (kernel)", gb_copy, copy * 1e3,
           gb_copy / gb_base);
    printf("%-34s %9.2f GB/s  %8.3f ms  %5.2fx baseline\n", "add (3 arrays moved)", gb_add,
           add * 1e3, gb_add / gb_base);
}

/* ---- matmul ------------------------------------------------------------------------------ */

static const char naive_source[] =
    "__kernel void naive_matmul(__global const float *a, __global const float *b,\n"
    "                           __global float *c, const uint M, const uint N, const uint K)\n"
    "{\n"
    "    const uint n = get_global_id(0), m = get_global_id(1);\n"
    "    if (m >= M || n >= N)\n"
    "        return;\n"
    "    float acc = 0.0f;\n"
    "    for (uint k = 0; k < K; k++)\n"
    "        acc += a[m * K + k] * b[k * N + n];\n"
    "    c[m * N + n] = acc;\n"
    "}\n";

static double time_naive_matmul(cl_uint M, cl_uint N, cl_uint K)
{
    cl_program program;
    if (clrun_program_build(ctx, "bench_naive_matmul", naive_source, sizeof naive_source - 1,
                            &program) != CLRUN_OK)
        die("naive matmul build");
    cl_int err;
    cl_kernel k = clCreateKernel(program, "naive_matmul", &err);
    check(err, "clCreateKernel");
    cl_mem a = device_buffer((size_t)M * K * 4, 0.5f), b = device_buffer((size_t)K * N * 4, 0.5f);
    cl_mem c = device_buffer((size_t)M * N * 4, 0);
    clSetKernelArg(k, 0, sizeof a, &a);
    clSetKernelArg(k, 1, sizeof b, &b);
    clSetKernelArg(k, 2, sizeof c, &c);
    clSetKernelArg(k, 3, sizeof M, &M);
    clSetKernelArg(k, 4, sizeof N, &N);
    clSetKernelArg(k, 5, sizeof K, &K);
    size_t local[2] = {16, 16};
    size_t global[2] = {(N + 15) / 16 * 16, (M + 15) / 16 * 16};
    double t = time_kernel(k, 2, global, local, repeat < 3 ? repeat : 3);
    clReleaseMemObject(a);
    clReleaseMemObject(b);
    clReleaseMemObject(c);
    clReleaseKernel(k);
    clReleaseProgram(program);
    return t;
}

static void bench_matmul(int64_t M, int64_t N, int64_t K)
{
    const int64_t da[2] = {M, K}, db[2] = {K, N};
    clrun_tensor_type in[2] = {f32(2, da), f32(2, db)};
    double flop = 2.0 * (double)M * (double)N * (double)K;
    double tiled = time_op("matmul", 2, in, NULL, 0);
    double naive = time_naive_matmul((cl_uint)M, (cl_uint)N, (cl_uint)K);
    char label[64];
    snprintf(label, sizeof label, "matmul %lldx%lldx%lld", (long long)M, (long long)N, (long long)K);
    printf("%-34s %9.2f GFLOP/s %7.3f ms  naive %7.2f GFLOP/s  %5.2fx naive\n", label,
           flop / tiled * 1e-9, tiled * 1e3, flop / naive * 1e-9, naive / tiled);
}

/* ---- conv2d ------------------------------------------------------------------------------ */

static double time_direct_conv(int C, int H, int W, int O)
{
    /* The geometry table of kernels/conv.cl: a 3x3 stride-1 pad-1 convolution. */
    const cl_int geo[15] = {C, H, W, O, 3, 3, H, W, 1, 1, 1, 1, 1, 1, 1};
    cl_kernel k;
    if (clrun_kernel_create(ctx, "clrun_conv2d_direct", &k) != CLRUN_OK)
        die("clrun_conv2d_direct");
    cl_int err, has_bias = 0;
    cl_mem g = clCreateBuffer(clrun_context_cl(ctx), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                              sizeof geo, (void *)geo, &err);
    check(err, "clCreateBuffer");
    cl_mem x = device_buffer((size_t)C * H * W * 4, 0.5f), w = device_buffer((size_t)O * C * 9 * 4, 0.5f);
    cl_mem y = device_buffer((size_t)O * H * W * 4, 0);
    clSetKernelArg(k, 0, sizeof x, &x);
    clSetKernelArg(k, 1, sizeof w, &w);
    clSetKernelArg(k, 2, sizeof x, &x);
    clSetKernelArg(k, 3, sizeof y, &y);
    clSetKernelArg(k, 4, sizeof g, &g);
    clSetKernelArg(k, 5, sizeof has_bias, &has_bias);
    size_t local[3] = {64, 1, 1}, global[3] = {((size_t)H * W + 63) / 64 * 64, (size_t)O, 1};
    double t = time_kernel(k, 3, global, local, repeat < 3 ? repeat : 3);
    clReleaseMemObject(x);
    clReleaseMemObject(w);
    clReleaseMemObject(y);
    clReleaseMemObject(g);
    clReleaseKernel(k);
    return t;
}

static void bench_conv(int C, int HW, int O)
{
    const int64_t dx[4] = {1, C, HW, HW}, dw[4] = {O, C, 3, 3}, pads[2] = {1, 1};
    clrun_tensor_type in[2] = {f32(4, dx), f32(4, dw)};
    clrun_attr pad = {"pad", CLRUN_ATTR_INTS, 0, 0, {0}, 2};
    memcpy(pad.ints, pads, sizeof pads);
    double flop = 2.0 * O * HW * HW * C * 9;
    double gemm = time_op("conv2d", 2, in, &pad, 1);
    double direct = time_direct_conv(C, HW, HW, O);
    char label[64];
    snprintf(label, sizeof label, "conv2d 3x3 %dx%dx%d -> %d", HW, HW, C, O);
    printf("%-34s %9.2f GFLOP/s %7.3f ms  direct %6.2f GFLOP/s  %5.2fx direct\n", label,
           flop / gemm * 1e-9, gemm * 1e3, flop / direct * 1e-9, direct / gemm);
}

int main(int argc, char **argv)
{
    bool quick = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = true;
        else if (!strcmp(argv[i], "--repeat") && i + 1 < argc)
            repeat = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--quick] [--repeat N]\n", argv[0]);
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
    printf("# bench_kernels%s, %s; median of %d runs after 1 warm-up, profiling-event times\n",
           quick ? " --quick" : "", date, repeat);
    printf("# device: %s (%s), %s, driver %s, %u compute units, %s\n", d->name, d->platform_name,
           d->version, d->driver_version, d->compute_units, d->type);
    bench_bandwidth(quick ? (1 << 22) : (1 << 24));
    bench_matmul(128, 768, 768);
    bench_matmul(128, 3072, 768);
    if (!quick)
        bench_matmul(1024, 1024, 1024);
    bench_conv(64, 56, 64);
    clrun_context_destroy(ctx);
    return 0;
}
