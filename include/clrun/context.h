/* clrun: devices and contexts. A context is one device, one OpenCL context and queue, its built
 * programs and its memory pool. All functions may be called from several threads at once on one
 * context unless a comment says otherwise. */
#ifndef CLRUN_CONTEXT_H
#define CLRUN_CONTEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* clrun's API is OpenCL 1.2: say so before the headers do (they otherwise warn and pick 3.0). */
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include <clrun/status.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct clrun_context clrun_context;

/* What clrun knows of a device: the facts later parts (pool, executor) depend on. */
typedef struct clrun_device_info {
    unsigned platform_index;   /* position of its platform in the loader's list */
    unsigned device_index;     /* position in the flat list of every device of every platform */
    char platform_name[256];   /* CL_PLATFORM_NAME */
    char platform_version[256];/* CL_PLATFORM_VERSION */
    char name[256];            /* CL_DEVICE_NAME */
    char vendor[256];          /* CL_DEVICE_VENDOR */
    char version[256];         /* CL_DEVICE_VERSION ("OpenCL 3.0 ...") */
    char driver_version[256];  /* CL_DRIVER_VERSION */
    char c_version[256];       /* CL_DEVICE_OPENCL_C_VERSION */
    unsigned cl_major;         /* OpenCL version of the device, parsed from `version` */
    unsigned cl_minor;
    const char *type;          /* "GPU", "CPU", "accelerator", "custom" or "other" */
    uint64_t base_addr_align;  /* bytes a sub-buffer origin must be a multiple of (>= 128) */
    uint64_t max_alloc;        /* CL_DEVICE_MAX_MEM_ALLOC_SIZE, bytes */
    uint64_t global_mem;       /* CL_DEVICE_GLOBAL_MEM_SIZE, bytes */
    uint64_t local_mem;        /* CL_DEVICE_LOCAL_MEM_SIZE, bytes */
    uint32_t compute_units;    /* CL_DEVICE_MAX_COMPUTE_UNITS */
    size_t max_work_group;     /* CL_DEVICE_MAX_WORK_GROUP_SIZE */
    bool profiling;            /* queues can record profiling timestamps */
    bool out_of_order;         /* queues can execute out of order */
    bool fp16;                 /* cl_khr_fp16 */
    bool fp64;                 /* cl_khr_fp64 */
} clrun_device_info;

/* Every device of every platform, in loader order. Free with clrun_device_list_free. A machine
 * without platforms gives CLRUN_ERROR_NO_PLATFORM. On failure *list is NULL and the reason is in
 * clrun_last_error(NULL). */
clrun_status clrun_device_list(clrun_device_info **list, size_t *count);

/* Frees what clrun_device_list gave. NULL is accepted. */
void clrun_device_list_free(clrun_device_info *list);

/* The index in `list` of the device that a context would choose for the platform and device
 * selectors (each NULL or "" for none; an index or a case-insensitive name substring). With no
 * device selector: the first GPU, else the first device. CLRUN_ERROR_NO_DEVICE, with a message
 * listing the devices that exist, when nothing matches. */
clrun_status clrun_device_select(const clrun_device_info *list, size_t count, const char *platform,
                                 const char *device, size_t *index);

/* How to build a context; fields left NULL/0 take their value from the CLRUN_* environment. */
typedef struct clrun_context_options {
    const char *platform;  /* platform selector; NULL = CLRUN_PLATFORM */
    const char *device;    /* device selector; NULL = CLRUN_DEVICE */
    const char *allocator; /* a strategy ("tlsf", "buddy", "slab", "bump") or an executor
                              mode ("naive", "planned"), any case, as CLRUN_ALLOCATOR;
                              NULL = CLRUN_ALLOCATOR */
    int out_of_order;      /* 1 = ask for an out-of-order queue, -1 = in-order, 0 = CLRUN_QUEUE */
    int guard;             /* 1 = guard mode on, -1 = off, 0 = CLRUN_DEBUG */
    int cache;             /* 1 = binary cache on, -1 = off, 0 = CLRUN_CACHE */
    const char *cache_dir; /* NULL = CLRUN_CACHE_DIR or its default */
    uint64_t pool_limit;   /* bytes; 0 = CLRUN_POOL_LIMIT */
} clrun_context_options;

/* Options with every field "from the environment". */
void clrun_context_options_init(clrun_context_options *options);

/* Chooses a device, creates its OpenCL context and an in-order (or, where asked for and the
 * device has it, out-of-order) profiling-enabled queue. options may be NULL. On failure *out is
 * NULL, nothing is leaked and clrun_last_error(NULL) says why. Contexts may be created and
 * destroyed from several threads at once: the driver's discovery and its context and queue
 * set-up and release run one thread at a time in the process (some drivers are not safe there). */
clrun_status clrun_context_create(const clrun_context_options *options, clrun_context **out);

/* Releases everything the context holds (pool, programs, queue). NULL is accepted. Blocks still
 * allocated from the pool are released with it and must not be used afterwards. Executors hold
 * their context: while any is alive the release waits for the last clrun_exec_destroy (the
 * executors keep running, on the blocks they are given), so the two may be destroyed in either
 * order. The caller makes no other call on the context after this one. */
void clrun_context_destroy(clrun_context *ctx);

/* The facts of the context's device (NULL for a NULL context). */
const clrun_device_info *clrun_context_device(const clrun_context *ctx);

/* The underlying OpenCL objects, for applications that enqueue their own work (NULL for a NULL
 * context). */
cl_context clrun_context_cl(const clrun_context *ctx);
cl_command_queue clrun_context_queue(const clrun_context *ctx);
cl_device_id clrun_context_cl_device(const clrun_context *ctx);

/* True when the context's queue executes out of order (false for a NULL context). */
bool clrun_context_out_of_order(const clrun_context *ctx);

/* The message of the last failure on ctx, from whichever thread (with details: the OpenCL
 * error name, sizes, what the pool held), or, with ctx NULL, of the last failure in this thread of a call that had no context
 * (context creation, device listing, parsing). "" when nothing failed. The text is a copy private
 * to the calling thread, valid until its next call of this function. */
const char *clrun_last_error(const clrun_context *ctx);

#ifdef __cplusplus
}
#endif
#endif
