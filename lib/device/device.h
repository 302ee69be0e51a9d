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
 * several threads at once, handed out NULL devices; its context and queue set-up shares global
 * state (the process's one LLVM context, the device's driver threads) that contexts made and
 * released at once from several threads have no reason to race on. Not held while the caller
 * holds a context's lock. */
void clrun__driver_lock(void);
void clrun__driver_unlock(void);

#endif
