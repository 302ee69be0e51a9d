/* clrun: status codes, one table for every code, name and message. */
#ifndef CLRUN_STATUS_H
#define CLRUN_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, message): the single source of every status clrun returns. */
#define CLRUN_STATUS_TABLE(X)                                                                      \
    X(OK, 0, "success")                                                                            \
    X(ERROR_INVALID_ARGUMENT, -1, "invalid argument")                                              \
    X(ERROR_INVALID_OPTION, -2, "invalid value of a CLRUN_* environment variable or option")       \
    X(ERROR_NO_PLATFORM, -3, "no OpenCL platform found")                                           \
    X(ERROR_NO_DEVICE, -4, "no OpenCL device matches the selection")                               \
    X(ERROR_OPENCL, -5, "an OpenCL call failed")                                                   \
    X(ERROR_OUT_OF_MEMORY, -6, "out of device memory in the pool")                                 \
    X(ERROR_OUT_OF_HOST_MEMORY, -7, "out of host memory")                                          \
    X(ERROR_INVALID_SIZE, -8, "invalid size")                                                      \
    X(ERROR_INVALID_ALIGNMENT, -9, "invalid alignment (must be a power of two)")                   \
    X(ERROR_INVALID_FREE, -10, "free of a block that is not live (double or foreign free)")        \
    X(ERROR_BUILD_FAILED, -11, "OpenCL program build failed")                                      \
    X(ERROR_UNKNOWN_KERNEL, -12, "unknown kernel or operation")                                    \
    X(ERROR_UNKNOWN_ALLOCATOR, -13, "unknown allocator strategy")                                  \
    X(ERROR_IO, -14, "input/output error")                                                         \
    X(ERROR_PARSE, -15, "malformed input")                                                         \
    X(ERROR_INVALID_GRAPH, -16, "invalid graph")                                                   \
    X(ERROR_DONATED, -17, "buffer was donated and can no longer be used")                          \
    X(ERROR_GUARD, -18, "guard zone overwritten: a kernel wrote outside its block")                \
    X(ERROR_UNSUPPORTED, -19, "not supported by this device or build")                             \
    X(ERROR_BUSY, -20, "resource still in use")

/* Every function of clrun that can fail returns one of these; CLRUN_OK is 0, errors < 0. */
typedef enum clrun_status {
#define CLRUN__STATUS_ENUM(name, value, msg) CLRUN_##name = value,
    CLRUN_STATUS_TABLE(CLRUN__STATUS_ENUM)
#undef CLRUN__STATUS_ENUM
} clrun_status;

/* A fixed English sentence for a status ("out of device memory in the pool"). Never NULL:
 * an unknown code gives "unknown status". */
const char *clrun_strerror(int status);

/* The symbolic name of a status ("CLRUN_ERROR_OUT_OF_MEMORY"); "CLRUN_UNKNOWN" if unknown. */
const char *clrun_status_name(int status);

/* The symbolic name of an OpenCL error code (-13 gives "CL_MISALIGNED_SUB_BUFFER_OFFSET");
 * "CL_UNKNOWN_ERROR" for a code the table lacks. */
const char *clrun_cl_error_name(int cl_error);

#ifdef __cplusplus
}
#endif
#endif
