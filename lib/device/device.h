/* Device enumeration shared by clrun_device_list and context creation. */
#ifndef CLRUN_LIB_DEVICE_H
#define CLRUN_LIB_DEVICE_H

#include <clrun/context.h>

/* Like clrun_device_list, also returning the OpenCL ids (parallel to the list); free *ids with
 * free(). */
clrun_status clrun__device_enumerate(clrun_device_info **list, cl_platform_id **platforms,
                                     cl_device_id **ids, size_t *count);

#endif
