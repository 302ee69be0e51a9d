/* A client of the installed library, built with nothing but `pkg-config --cflags --libs clrun`
 * (make installcheck does it with -Werror): it allocates from clrun's pool and enqueues a kernel of
 * its own on clrun's queue, which needs the OpenCL loader the public headers hand out. */
#include <stdio.h>
#include <string.h>

#include <clrun/clrun.h>

static const char *source = "__kernel void twice(__global float *x) { x[get_global_id(0)] *= 2.0f; }";

int main(void)
{
    clrun_context *ctx = NULL;
    if (clrun_context_create(NULL, &ctx) != CLRUN_OK) {
        fprintf(stderr, "client: %s\n", clrun_last_error(NULL));
        return 1;
    }
    float host[64];
    for (int i = 0; i < 64; i++)
        host[i] = (float)i;
    clrun_buffer b;
    cl_int err = CL_SUCCESS;
    int rc = 1;
    if (clrun_alloc(ctx, sizeof host, &b) == CLRUN_OK && clrun_buffer_write(ctx, &b, host) == CLRUN_OK) {
        cl_program program = clCreateProgramWithSource(clrun_context_cl(ctx), 1, &source, NULL, &err);
        cl_device_id device = clrun_context_cl_device(ctx);
        if (err == CL_SUCCESS)
            err = clBuildProgram(program, 1, &device, "", NULL, NULL);
        cl_kernel kernel = err == CL_SUCCESS ? clCreateKernel(program, "twice", &err) : NULL;
        size_t global = 64;
        if (err == CL_SUCCESS)
            err = clSetKernelArg(kernel, 0, sizeof b.mem, &b.mem);
        if (err == CL_SUCCESS)
            err = clEnqueueNDRangeKernel(clrun_context_queue(ctx), kernel, 1, NULL, &global, NULL, 0,
                                         NULL, NULL);
        if (err == CL_SUCCESS)
            err = clFinish(clrun_context_queue(ctx));
        if (err == CL_SUCCESS && clrun_buffer_read(ctx, &b, host) == CLRUN_OK) {
            rc = 0;
            for (int i = 0; i < 64; i++)
                if (host[i] != 2.0f * (float)i)
                    rc = 1;
        }
        if (kernel)
            clReleaseKernel(kernel);
        if (program)
            clReleaseProgram(program);
        clrun_free(ctx, &b);
    }
    printf("client: %s (OpenCL status %d)\n", rc == 0 ? "kernel ran on clrun's queue" : "FAILED", (int)err);
    clrun_context_destroy(ctx);
    return rc;
}
