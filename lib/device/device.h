/* Device enumeration shared by clrun_device_list and context creation. */
#ifndef CLRUN_LIB_DEVICE_H
#define CLRUN_LIB_DEVICE_H

#include <clrun/context.h>

/* Like clrun_device_list, also returning the OpenCL ids (parallel to the list); free *ids with
 * free(). */
clrun_status clrun__device_enumerate(clrun_device_info **list, cl_platform_id **platforms,
                                     cl_device_id **ids, size_t *count);

/* One thread at a time in the process through the driver's set-up and tear-down: discovery,
 * creating and releasing a context and its queue. POCL's first clGetDeviceIDs, called from
 * several threads at once, handed out NULL devices, and its context set-up and release touch
 * process-wide state (one LLVM context shared by every context, counted without a lock in its
 * sources), so they are kept apart too. A leaf lock: nothing else is taken while it is held. */
void clrun__driver_lock(void);
void clrun__driver_unlock(void);

#endif
