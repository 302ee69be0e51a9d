/* The OpenCL entry-point table: every counted call first asks whether a fault is due. */
#include "device/cl.h"

#include <stdatomic.h>

static _Atomic long calls_made;      /* counted calls since the last arm */
static _Atomic long fault_at;        /* call number that fails; 0 = none armed */
static _Atomic int fault_persistent; /* keep failing after the first */
static _Atomic int fault_fired;      /* a fault was injected since arming */
static cl_int fault_error = CL_OUT_OF_RESOURCES;

void clrun__cl_fault_arm(long nth, cl_int error, bool persistent)
{
    fault_error = error;
    atomic_store(&calls_made, 0);
    atomic_store(&fault_fired, 0);
    atomic_store(&fault_persistent, persistent ? 1 : 0);
    atomic_store(&fault_at, nth);
}

bool clrun__cl_fault_fired(void) { return atomic_load(&fault_fired) != 0; }

long clrun__cl_call_count(void) { return atomic_load(&calls_made); }

static bool fault_due(void)
{
    long n = atomic_fetch_add(&calls_made, 1) + 1;
    long at = atomic_load(&fault_at);
    if (at <= 0 || n < at || (n > at && !atomic_load(&fault_persistent)))
        return false;
    atomic_store(&fault_fired, 1);
    return true;
}

#define FAIL_STATUS()                                                                              \
    do {                                                                                           \
        if (fault_due())                                                                           \
            return fault_error;                                                                    \
    } while (0)
#define FAIL_OBJECT(errcode)                                                                       \
    do {                                                                                           \
        if (fault_due()) {                                                                         \
            if (errcode)                                                                           \
                *(errcode) = fault_error;                                                          \
            return NULL;                                                                           \
        }                                                                                          \
    } while (0)

static cl_int get_platform_ids(cl_uint n, cl_platform_id *p, cl_uint *np)
{
    FAIL_STATUS();
    return clGetPlatformIDs(n, p, np);
}

static cl_int get_platform_info(cl_platform_id p, cl_platform_info i, size_t s, void *v, size_t *r)
{
    FAIL_STATUS();
    return clGetPlatformInfo(p, i, s, v, r);
}

static cl_int get_device_ids(cl_platform_id p, cl_device_type t, cl_uint n, cl_device_id *d,
                             cl_uint *nd)
{
    FAIL_STATUS();
    return clGetDeviceIDs(p, t, n, d, nd);
}

static cl_int get_device_info(cl_device_id d, cl_device_info i, size_t s, void *v, size_t *r)
{
    FAIL_STATUS();
    return clGetDeviceInfo(d, i, s, v, r);
}

static cl_context create_context(const cl_context_properties *props, cl_uint n,
                                 const cl_device_id *devices,
                                 void(CL_CALLBACK *notify)(const char *, const void *, size_t, void *),
                                 void *user, cl_int *err)
{
    FAIL_OBJECT(err);
    return clCreateContext(props, n, devices, notify, user, err);
}

static cl_command_queue create_command_queue(cl_context c, cl_device_id d,
                                             cl_command_queue_properties p, cl_int *err)
{
    FAIL_OBJECT(err);
    return clCreateCommandQueue(c, d, p, err);
}

static cl_program create_program_with_source(cl_context c, cl_uint n, const char **s,
                                             const size_t *l, cl_int *err)
{
    FAIL_OBJECT(err);
    return clCreateProgramWithSource(c, n, s, l, err);
}

static cl_program create_program_with_binary(cl_context c, cl_uint n, const cl_device_id *d,
                                             const size_t *l, const unsigned char **b,
                                             cl_int *status, cl_int *err)
{
    FAIL_OBJECT(err);
    return clCreateProgramWithBinary(c, n, d, l, b, status, err);
}

static cl_int build_program(cl_program p, cl_uint n, const cl_device_id *d, const char *o,
                            void(CL_CALLBACK *notify)(cl_program, void *), void *user)
{
    FAIL_STATUS();
    return clBuildProgram(p, n, d, o, notify, user);
}

static cl_int get_program_info(cl_program p, cl_program_info i, size_t s, void *v, size_t *r)
{
    FAIL_STATUS();
    return clGetProgramInfo(p, i, s, v, r);
}

static cl_int get_program_build_info(cl_program p, cl_device_id d, cl_program_build_info i,
                                     size_t s, void *v, size_t *r)
{
    FAIL_STATUS();
    return clGetProgramBuildInfo(p, d, i, s, v, r);
}

static cl_kernel create_kernel(cl_program p, const char *name, cl_int *err)
{
    FAIL_OBJECT(err);
    return clCreateKernel(p, name, err);
}

static cl_int set_kernel_arg(cl_kernel k, cl_uint i, size_t s, const void *v)
{
    FAIL_STATUS();
    return clSetKernelArg(k, i, s, v);
}

static cl_int get_kernel_work_group_info(cl_kernel k, cl_device_id d, cl_kernel_work_group_info i,
                                         size_t s, void *v, size_t *r)
{
    FAIL_STATUS();
    return clGetKernelWorkGroupInfo(k, d, i, s, v, r);
}

static cl_int enqueue_nd_range_kernel(cl_command_queue q, cl_kernel k, cl_uint dims,
                                      const size_t *offset, const size_t *global,
                                      const size_t *local, cl_uint nw, const cl_event *w,
                                      cl_event *e)
{
    FAIL_STATUS();
    return clEnqueueNDRangeKernel(q, k, dims, offset, global, local, nw, w, e);
}

static cl_mem create_buffer(cl_context c, cl_mem_flags f, size_t s, void *h, cl_int *err)
{
    FAIL_OBJECT(err);
    return clCreateBuffer(c, f, s, h, err);
}

static cl_mem create_sub_buffer(cl_mem m, cl_mem_flags f, cl_buffer_create_type t, const void *i,
                                cl_int *err)
{
    FAIL_OBJECT(err);
    return clCreateSubBuffer(m, f, t, i, err);
}

static cl_int enqueue_read_buffer(cl_command_queue q, cl_mem m, cl_bool b, size_t o, size_t s,
                                  void *p, cl_uint nw, const cl_event *w, cl_event *e)
{
    FAIL_STATUS();
    return clEnqueueReadBuffer(q, m, b, o, s, p, nw, w, e);
}

static cl_int enqueue_write_buffer(cl_command_queue q, cl_mem m, cl_bool b, size_t o, size_t s,
                                   const void *p, cl_uint nw, const cl_event *w, cl_event *e)
{
    FAIL_STATUS();
    return clEnqueueWriteBuffer(q, m, b, o, s, p, nw, w, e);
}

static cl_int enqueue_fill_buffer(cl_command_queue q, cl_mem m, const void *pat, size_t ps,
                                  size_t o, size_t s, cl_uint nw, const cl_event *w, cl_event *e)
{
    FAIL_STATUS();
    return clEnqueueFillBuffer(q, m, pat, ps, o, s, nw, w, e);
}

static cl_int enqueue_copy_buffer(cl_command_queue q, cl_mem src, cl_mem dst, size_t so, size_t d,
                                  size_t s, cl_uint nw, const cl_event *w, cl_event *e)
{
    FAIL_STATUS();
    return clEnqueueCopyBuffer(q, src, dst, so, d, s, nw, w, e);
}

static void *enqueue_map_buffer(cl_command_queue q, cl_mem m, cl_bool b, cl_map_flags f, size_t o,
                                size_t s, cl_uint nw, const cl_event *w, cl_event *e, cl_int *err)
{
    FAIL_OBJECT(err);
    return clEnqueueMapBuffer(q, m, b, f, o, s, nw, w, e, err);
}

static cl_int enqueue_unmap_mem_object(cl_command_queue q, cl_mem m, void *p, cl_uint nw,
                                       const cl_event *w, cl_event *e)
{
    FAIL_STATUS();
    return clEnqueueUnmapMemObject(q, m, p, nw, w, e);
}

static cl_int enqueue_marker_with_wait_list(cl_command_queue q, cl_uint nw, const cl_event *w,
                                            cl_event *e)
{
    FAIL_STATUS();
    return clEnqueueMarkerWithWaitList(q, nw, w, e);
}

static cl_int finish(cl_command_queue q)
{
    FAIL_STATUS();
    return clFinish(q);
}

static cl_int flush(cl_command_queue q)
{
    FAIL_STATUS();
    return clFlush(q);
}

static cl_int wait_for_events(cl_uint n, const cl_event *e)
{
    FAIL_STATUS();
    return clWaitForEvents(n, e);
}

static cl_int get_event_profiling_info(cl_event e, cl_profiling_info i, size_t s, void *v,
                                       size_t *r)
{
    FAIL_STATUS();
    return clGetEventProfilingInfo(e, i, s, v, r);
}

static cl_int get_event_info(cl_event e, cl_event_info i, size_t s, void *v, size_t *r)
{
    FAIL_STATUS();
    return clGetEventInfo(e, i, s, v, r);
}

static cl_int get_mem_object_info(cl_mem m, cl_mem_info i, size_t s, void *v, size_t *r)
{
    FAIL_STATUS();
    return clGetMemObjectInfo(m, i, s, v, r);
}

cl_int clrun__cl_mem_place(cl_mem mem, cl_mem *root, size_t *offset)
{
    *root = NULL;
    *offset = 0;
    cl_int error = clrun__cl.GetMemObjectInfo(mem, CL_MEM_ASSOCIATED_MEMOBJECT, sizeof *root, root,
                                              NULL);
    if (error == CL_SUCCESS && *root != NULL)
        error = clrun__cl.GetMemObjectInfo(mem, CL_MEM_OFFSET, sizeof *offset, offset, NULL);
    if (*root == NULL)
        *root = mem;
    return error;
}

const clrun__cl_api clrun__cl = {
    .GetPlatformIDs = get_platform_ids,
    .GetPlatformInfo = get_platform_info,
    .GetDeviceIDs = get_device_ids,
    .GetDeviceInfo = get_device_info,
    .CreateContext = create_context,
    .ReleaseContext = clReleaseContext,
    .CreateCommandQueue = create_command_queue,
    .ReleaseCommandQueue = clReleaseCommandQueue,
    .CreateProgramWithSource = create_program_with_source,
    .CreateProgramWithBinary = create_program_with_binary,
    .BuildProgram = build_program,
    .GetProgramInfo = get_program_info,
    .GetProgramBuildInfo = get_program_build_info,
    .ReleaseProgram = clReleaseProgram,
    .CreateKernel = create_kernel,
    .ReleaseKernel = clReleaseKernel,
    .SetKernelArg = set_kernel_arg,
    .GetKernelWorkGroupInfo = get_kernel_work_group_info,
    .EnqueueNDRangeKernel = enqueue_nd_range_kernel,
    .CreateBuffer = create_buffer,
    .CreateSubBuffer = create_sub_buffer,
    .ReleaseMemObject = clReleaseMemObject,
    .RetainMemObject = clRetainMemObject,
    .EnqueueReadBuffer = enqueue_read_buffer,
    .EnqueueWriteBuffer = enqueue_write_buffer,
    .EnqueueFillBuffer = enqueue_fill_buffer,
    .EnqueueCopyBuffer = enqueue_copy_buffer,
    .EnqueueMapBuffer = enqueue_map_buffer,
    .EnqueueUnmapMemObject = enqueue_unmap_mem_object,
    .EnqueueMarkerWithWaitList = enqueue_marker_with_wait_list,
    .Finish = finish,
    .Flush = flush,
    .WaitForEvents = wait_for_events,
    .GetEventProfilingInfo = get_event_profiling_info,
    .GetEventInfo = get_event_info,
    .GetMemObjectInfo = get_mem_object_info,
    .ReleaseEvent = clReleaseEvent,
    .RetainEvent = clRetainEvent,
};
