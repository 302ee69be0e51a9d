/* clrun smoke: builds clrun's smoke program on the chosen device, runs y = a*x + y and compares
 * every element with the same computation in C. Values are small integers, so the result is
 * exact whether or not the device contracts to a fused multiply-add. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <clrun/clrun.h>

#include "cli.h"

#define SMOKE_N (1u << 20)

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int run_axpy(clrun_context *ctx, float *x, float *y, unsigned n, double *ms)
{
    cl_context cl = clrun_context_cl(ctx);
    cl_command_queue queue = clrun_context_queue(ctx);
    cl_kernel kernel = NULL;
    cl_int err = CL_SUCCESS;
    cl_mem dx = NULL, dy = NULL;
    float a = 2.0f;
    int rc = 1;
    if (clrun_kernel_create(ctx, "clrun_smoke_axpy", &kernel) != CLRUN_OK) {
        fprintf(stderr, "clrun smoke: %s\n", clrun_last_error(ctx));
        return 1;
    }
    dx = clCreateBuffer(cl, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, n * sizeof *x, x, &err);
    if (dx)
        dy = clCreateBuffer(cl, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, n * sizeof *y, y, &err);
    if (dy) {
        size_t global = n;
        double start = now_ms();
        if ((err = clSetKernelArg(kernel, 0, sizeof a, &a)) == CL_SUCCESS &&
            (err = clSetKernelArg(kernel, 1, sizeof dx, &dx)) == CL_SUCCESS &&
            (err = clSetKernelArg(kernel, 2, sizeof dy, &dy)) == CL_SUCCESS &&
            (err = clSetKernelArg(kernel, 3, sizeof n, &n)) == CL_SUCCESS &&
            (err = clEnqueueNDRangeKernel(queue, kernel, 1, NULL, &global, NULL, 0, NULL, NULL)) == CL_SUCCESS &&
            (err = clEnqueueReadBuffer(queue, dy, CL_TRUE, 0, n * sizeof *y, y, 0, NULL, NULL)) == CL_SUCCESS)
            rc = 0;
        *ms = now_ms() - start;
    }
    if (rc)
        fprintf(stderr, "clrun smoke: OpenCL call failed: %s (%d)\n", clrun_cl_error_name(err), err);
    if (dy)
        clReleaseMemObject(dy);
    if (dx)
        clReleaseMemObject(dx);
    clReleaseKernel(kernel);
    return rc;
}

int clrun_cli_smoke(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: clrun smoke\n\nRuns y = 2x + y over %u floats on the chosen device and checks\n"
                   "every element against C. Exit status 0 when all match.\n", SMOKE_N);
            return 0;
        }
        return clrun_cli_usage_error("smoke", "unknown option '%s'", argv[i]);
    }
    clrun_context *ctx = NULL;
    if (clrun_context_create(NULL, &ctx) != CLRUN_OK) {
        fprintf(stderr, "clrun smoke: %s\n", clrun_last_error(NULL));
        return 1;
    }
    float *x = malloc(SMOKE_N * sizeof *x), *y = malloc(SMOKE_N * sizeof *y);
    int rc = 1;
    double ms = 0;
    if (x && y) {
        for (unsigned i = 0; i < SMOKE_N; i++) {
            x[i] = (float)(i % 1024);
            y[i] = (float)(i % 7);
        }
        rc = run_axpy(ctx, x, y, SMOKE_N, &ms);
    }
    unsigned mismatches = 0;
    for (unsigned i = 0; rc == 0 && i < SMOKE_N; i++)
        if (y[i] != 2.0f * (float)(i % 1024) + (float)(i % 7))
            mismatches++;
    if (rc == 0) {
        printf("smoke: clrun_smoke_axpy over %u floats on '%s': %s (%u mismatches), %.2f ms\n", SMOKE_N,
               clrun_context_device(ctx)->name, mismatches ? "DIFFERS FROM C" : "matches C", mismatches, ms);
        rc = mismatches ? 1 : 0;
    }
    free(x);
    free(y);
    clrun_context_destroy(ctx);
    return rc;
}
