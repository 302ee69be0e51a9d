/* Every OpenCL entry point clrun uses, through one table, so that tests can make the Nth call
 * fail (like SQLite's OOM tests) and check that each failure is an error that leaks nothing.
 * Release and retain calls are not counted: they only fail on invalid objects, and a test that
 * made them fail would only prove that a release was skipped. */
#ifndef CLRUN_LIB_CL_H
#define CLRUN_LIB_CL_H

#include <CL/cl.h>
#include <stdbool.h>

typedef struct clrun__cl_api {
    cl_int (*GetPlatformIDs)(cl_uint, cl_platform_id *, cl_uint *);
    cl_int (*GetPlatformInfo)(cl_platform_id, cl_platform_info, size_t, void *, size_t *);
    cl_int (*GetDeviceIDs)(cl_platform_id, cl_device_type, cl_uint, cl_device_id *, cl_uint *);
    cl_int (*GetDeviceInfo)(cl_device_id, cl_device_info, size_t, void *, size_t *);
    cl_context (*CreateContext)(const cl_context_properties *, cl_uint, const cl_device_id *,
                                void(CL_CALLBACK *)(const char *, const void *, size_t, void *),
                                void *, cl_int *);
    cl_int (*ReleaseContext)(cl_context);
    cl_command_queue (*CreateCommandQueue)(cl_context, cl_device_id, cl_command_queue_properties,
                                           cl_int *);
    cl_int (*ReleaseCommandQueue)(cl_command_queue);
    cl_program (*CreateProgramWithSource)(cl_context, cl_uint, const char **, const size_t *,
                                          cl_int *);
    cl_program (*CreateProgramWithBinary)(cl_context, cl_uint, const cl_device_id *,
                                          const size_t *, const unsigned char **, cl_int *,
                                          cl_int *);
    cl_int (*BuildProgram)(cl_program, cl_uint, const cl_device_id *, const char *,
                           void(CL_CALLBACK *)(cl_program, void *), void *);
    cl_int (*GetProgramInfo)(cl_program, cl_program_info, size_t, void *, size_t *);
    cl_int (*GetProgramBuildInfo)(cl_program, cl_device_id, cl_program_build_info, size_t, void *,
                                  size_t *);
    cl_int (*ReleaseProgram)(cl_program);
    cl_kernel (*CreateKernel)(cl_program, const char *, cl_int *);
    cl_int (*ReleaseKernel)(cl_kernel);
    cl_int (*SetKernelArg)(cl_kernel, cl_uint, size_t, const void *);
    cl_int (*GetKernelWorkGroupInfo)(cl_kernel, cl_device_id, cl_kernel_work_group_info, size_t,
                                     void *, size_t *);
    cl_int (*EnqueueNDRangeKernel)(cl_command_queue, cl_kernel, cl_uint, const size_t *,
                                   const size_t *, const size_t *, cl_uint, const cl_event *,
                                   cl_event *);
    cl_mem (*CreateBuffer)(cl_context, cl_mem_flags, size_t, void *, cl_int *);
    cl_mem (*CreateSubBuffer)(cl_mem, cl_mem_flags, cl_buffer_create_type, const void *, cl_int *);
    cl_int (*ReleaseMemObject)(cl_mem);
    cl_int (*RetainMemObject)(cl_mem);
    cl_int (*GetMemObjectInfo)(cl_mem, cl_mem_info, size_t, void *, size_t *);
    cl_int (*EnqueueReadBuffer)(cl_command_queue, cl_mem, cl_bool, size_t, size_t, void *, cl_uint,
                                const cl_event *, cl_event *);
    cl_int (*EnqueueWriteBuffer)(cl_command_queue, cl_mem, cl_bool, size_t, size_t, const void *,
                                 cl_uint, const cl_event *, cl_event *);
    cl_int (*EnqueueFillBuffer)(cl_command_queue, cl_mem, const void *, size_t, size_t, size_t,
                                cl_uint, const cl_event *, cl_event *);
    cl_int (*EnqueueCopyBuffer)(cl_command_queue, cl_mem, cl_mem, size_t, size_t, size_t, cl_uint,
                                const cl_event *, cl_event *);
    void *(*EnqueueMapBuffer)(cl_command_queue, cl_mem, cl_bool, cl_map_flags, size_t, size_t,
                              cl_uint, const cl_event *, cl_event *, cl_int *);
    cl_int (*EnqueueUnmapMemObject)(cl_command_queue, cl_mem, void *, cl_uint, const cl_event *,
                                    cl_event *);
    cl_int (*EnqueueMarkerWithWaitList)(cl_command_queue, cl_uint, const cl_event *, cl_event *);
    cl_int (*Finish)(cl_command_queue);
    cl_int (*Flush)(cl_command_queue);
    cl_int (*WaitForEvents)(cl_uint, const cl_event *);
    cl_int (*GetEventProfilingInfo)(cl_event, cl_profiling_info, size_t, void *, size_t *);
    cl_int (*GetEventInfo)(cl_event, cl_event_info, size_t, void *, size_t *);
    cl_int (*ReleaseEvent)(cl_event);
    cl_int (*RetainEvent)(cl_event);
} clrun__cl_api;

/* The table all library code calls through. */
extern const clrun__cl_api clrun__cl;

/* Where mem's bytes lie: *root its parent buffer (mem itself when it is not a sub-buffer) and
 * *offset its origin there, through the table (so counted). */
cl_int clrun__cl_mem_place(cl_mem mem, cl_mem *root, size_t *offset);

/* Fault injection (tests only; not thread-safe against concurrent arming). After arming, the
 * `nth` counted call (1 = the next one) fails with `error` (or its object-returning form gives
 * NULL and sets errcode_ret). persistent: every later counted call fails too. nth = 0 disarms. */
void clrun__cl_fault_arm(long nth, cl_int error, bool persistent);
/* True when an armed fault has fired since arming. */
bool clrun__cl_fault_fired(void);
/* Counted calls made since the last arm (or since start). */
long clrun__cl_call_count(void);

#endif
