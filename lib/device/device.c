/* Listing devices and choosing one from CLRUN_PLATFORM / CLRUN_DEVICE style selectors. */
#include "device/device.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/cl.h"
#include "device/context.h"

/* clGetDeviceInfo of a string into a fixed field; truncation is harmless for display. */
static cl_int device_string(cl_device_id device, cl_device_info what, char *out, size_t size)
{
    size_t got = 0;
    cl_int err = clrun__cl.GetDeviceInfo(device, what, size - 1, out, &got);
    if (err == CL_INVALID_VALUE) { /* longer than the field: fetch whole, keep the head */
        char *whole = malloc(got + 1);
        if (whole == NULL)
            return CL_OUT_OF_HOST_MEMORY;
        err = clrun__cl.GetDeviceInfo(device, what, got, whole, NULL);
        if (err == CL_SUCCESS)
            snprintf(out, size, "%s", whole);
        free(whole);
        return err;
    }
    out[err == CL_SUCCESS && got < size ? got : 0] = '\0';
    return err;
}

static cl_int platform_string(cl_platform_id platform, cl_platform_info what, char *out, size_t size)
{
    size_t got = 0;
    cl_int err = clrun__cl.GetPlatformInfo(platform, what, size - 1, out, &got);
    out[err == CL_SUCCESS && got < size ? got : 0] = '\0';
    return err == CL_INVALID_VALUE ? CL_SUCCESS : err; /* too long: keep an empty name */
}

static const char *type_name(cl_device_type type)
{
    if (type & CL_DEVICE_TYPE_GPU)
        return "GPU";
    if (type & CL_DEVICE_TYPE_CPU)
        return "CPU";
    if (type & CL_DEVICE_TYPE_ACCELERATOR)
        return "accelerator";
    if (type & CL_DEVICE_TYPE_CUSTOM)
        return "custom";
    return "other";
}

/* CL_DEVICE_MEM_BASE_ADDR_ALIGN is specified in bits, and its minimum is the size of the largest
 * built-in type, long16: 1024 bits. Some drivers have reported bytes instead; a reading below
 * 1024 can only be bytes, so it is taken as bytes. The result is rounded up to a power of two of
 * at least 128 bytes (long16), so a wrong unit can only make it larger, never too small. */
static uint64_t safe_base_align(cl_uint reported)
{
    uint64_t bytes = reported >= 1024 ? reported / 8u : reported;
    uint64_t align = 128;
    while (align < bytes)
        align <<= 1;
    return align;
}

static cl_int fill_device_info(cl_device_id device, clrun_device_info *info)
{
    cl_int err;
    if ((err = device_string(device, CL_DEVICE_NAME, info->name, sizeof info->name)) ||
        (err = device_string(device, CL_DEVICE_VENDOR, info->vendor, sizeof info->vendor)) ||
        (err = device_string(device, CL_DEVICE_VERSION, info->version, sizeof info->version)) ||
        (err = device_string(device, CL_DRIVER_VERSION, info->driver_version, sizeof info->driver_version)) ||
        (err = device_string(device, CL_DEVICE_OPENCL_C_VERSION, info->c_version, sizeof info->c_version)))
        return err;
    if (sscanf(info->version, "OpenCL %u.%u", &info->cl_major, &info->cl_minor) != 2)
        info->cl_major = 1, info->cl_minor = 0;

    cl_device_type type = 0;
    cl_uint align_bits = 0, units = 0;
    cl_ulong max_alloc = 0, global = 0, local = 0;
    size_t work_group = 0;
    cl_command_queue_properties queue = 0;
    if ((err = clrun__cl.GetDeviceInfo(device, CL_DEVICE_TYPE, sizeof type, &type, NULL)) ||
        (err = clrun__cl.GetDeviceInfo(device, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof align_bits, &align_bits, NULL)) ||
        (err = clrun__cl.GetDeviceInfo(device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max_alloc, &max_alloc, NULL)) ||
        (err = clrun__cl.GetDeviceInfo(device, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof global, &global, NULL)) ||
        (err = clrun__cl.GetDeviceInfo(device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof local, &local, NULL)) ||
        (err = clrun__cl.GetDeviceInfo(device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, NULL)) ||
        (err = clrun__cl.GetDeviceInfo(device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof work_group, &work_group, NULL)) ||
        (err = clrun__cl.GetDeviceInfo(device, CL_DEVICE_QUEUE_PROPERTIES, sizeof queue, &queue, NULL)))
        return err;
    info->type = type_name(type);
    info->base_addr_align = safe_base_align(align_bits);
    info->max_alloc = max_alloc;
    info->global_mem = global;
    info->local_mem = local;
    info->compute_units = units;
    info->max_work_group = work_group;
    info->profiling = (queue & CL_QUEUE_PROFILING_ENABLE) != 0;
    info->out_of_order = (queue & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE) != 0;

    char extensions[8192];
    if ((err = device_string(device, CL_DEVICE_EXTENSIONS, extensions, sizeof extensions)))
        return err;
    info->fp16 = strstr(extensions, "cl_khr_fp16") != NULL;
    info->fp64 = strstr(extensions, "cl_khr_fp64") != NULL;
    return CL_SUCCESS;
}

/* Appends the devices of one platform; *count grows. */
static clrun_status enumerate_platform(cl_platform_id platform, unsigned platform_index,
                                       clrun_device_info **list, cl_platform_id **platforms,
                                       cl_device_id **ids, size_t *count)
{
    cl_uint n = 0;
    cl_int err = clrun__cl.GetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, NULL, &n);
    if (err == CL_DEVICE_NOT_FOUND)
        return CLRUN_OK; /* a platform without devices is not an error */
    if (err)
        return clrun__fail_cl(NULL, err, "clGetDeviceIDs", "platform %u", platform_index);
    if (n == 0)
        return CLRUN_OK;
    char platform_name[256], platform_version[256];
    if ((err = platform_string(platform, CL_PLATFORM_NAME, platform_name, sizeof platform_name)) ||
        (err = platform_string(platform, CL_PLATFORM_VERSION, platform_version, sizeof platform_version)))
        return clrun__fail_cl(NULL, err, "clGetPlatformInfo", "platform %u", platform_index);

    clrun_device_info *grown_list = realloc(*list, (*count + n) * sizeof **list);
    if (grown_list)
        *list = grown_list;
    cl_platform_id *grown_platforms = realloc(*platforms, (*count + n) * sizeof **platforms);
    if (grown_platforms)
        *platforms = grown_platforms;
    cl_device_id *grown_ids = realloc(*ids, (*count + n) * sizeof **ids);
    if (grown_ids)
        *ids = grown_ids;
    if (!grown_list || !grown_platforms || !grown_ids)
        return clrun__fail(NULL, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory listing devices");

    if ((err = clrun__cl.GetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, n, *ids + *count, NULL)))
        return clrun__fail_cl(NULL, err, "clGetDeviceIDs", "platform %u", platform_index);
    for (cl_uint i = 0; i < n; i++)
        if ((*ids)[*count + i] == NULL)
            return clrun__fail(NULL, CLRUN_ERROR_OPENCL,
                               "clGetDeviceIDs of platform %u (%s) gave a NULL device %u of %u: "
                               "the driver is broken", platform_index, platform_name, i, n);
    for (cl_uint i = 0; i < n; i++) {
        clrun_device_info *info = &(*list)[*count];
        memset(info, 0, sizeof *info);
        info->platform_index = platform_index;
        info->device_index = (unsigned)*count;
        snprintf(info->platform_name, sizeof info->platform_name, "%s", platform_name);
        snprintf(info->platform_version, sizeof info->platform_version, "%s", platform_version);
        if ((err = fill_device_info((*ids)[*count], info)))
            return clrun__fail_cl(NULL, err, "clGetDeviceInfo", "device %zu", *count);
        (*platforms)[*count] = platform;
        (*count)++;
    }
    return CLRUN_OK;
}

static pthread_mutex_t driver_lock = PTHREAD_MUTEX_INITIALIZER;

void clrun__driver_lock(void) { pthread_mutex_lock(&driver_lock); }

void clrun__driver_unlock(void) { pthread_mutex_unlock(&driver_lock); }

static clrun_status enumerate_locked(clrun_device_info **list_out, cl_platform_id **platforms_out,
                                     cl_device_id **ids_out, size_t *count_out);

clrun_status clrun__device_enumerate(clrun_device_info **list_out, cl_platform_id **platforms_out,
                                     cl_device_id **ids_out, size_t *count_out)
{
    clrun__driver_lock();
    clrun_status status = enumerate_locked(list_out, platforms_out, ids_out, count_out);
    clrun__driver_unlock();
    return status;
}

static clrun_status enumerate_locked(clrun_device_info **list_out, cl_platform_id **platforms_out,
                                     cl_device_id **ids_out, size_t *count_out)
{
    *list_out = NULL;
    *count_out = 0;
    if (platforms_out)
        *platforms_out = NULL;
    if (ids_out)
        *ids_out = NULL;
    cl_uint n = 0;
    cl_int err = clrun__cl.GetPlatformIDs(0, NULL, &n);
    if (err == -1001 /* CL_PLATFORM_NOT_FOUND_KHR, from cl_ext.h */ || (err == CL_SUCCESS && n == 0))
        return clrun__fail(NULL, CLRUN_ERROR_NO_PLATFORM,
                           "no OpenCL platform found: install a driver (on Debian: apt-get install pocl-opencl-icd) "
                           "and check that /etc/OpenCL/vendors or OCL_ICD_VENDORS names it");
    if (err)
        return clrun__fail_cl(NULL, err, "clGetPlatformIDs", "%s", "");
    cl_platform_id *platform_ids = malloc(n * sizeof *platform_ids);
    if (platform_ids == NULL)
        return clrun__fail(NULL, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory listing platforms");
    clrun_status status = CLRUN_OK;
    if ((err = clrun__cl.GetPlatformIDs(n, platform_ids, NULL)))
        status = clrun__fail_cl(NULL, err, "clGetPlatformIDs", "%s", "");
    for (cl_uint p = 0; status == CLRUN_OK && p < n; p++)
        if (platform_ids[p] == NULL)
            status = clrun__fail(NULL, CLRUN_ERROR_OPENCL,
                                 "clGetPlatformIDs gave a NULL platform %u of %u: the ICD loader "
                                 "or a driver is broken", p, n);

    clrun_device_info *list = NULL;
    cl_platform_id *platforms = NULL;
    cl_device_id *ids = NULL;
    size_t count = 0;
    for (cl_uint p = 0; status == CLRUN_OK && p < n; p++)
        status = enumerate_platform(platform_ids[p], p, &list, &platforms, &ids, &count);
    free(platform_ids);
    if (status == CLRUN_OK && count == 0)
        status = clrun__fail(NULL, CLRUN_ERROR_NO_DEVICE, "the OpenCL platforms found have no device");
    if (status != CLRUN_OK) {
        free(list);
        free(platforms);
        free(ids);
        return status;
    }
    *list_out = list;
    *count_out = count;
    if (platforms_out)
        *platforms_out = platforms;
    else
        free(platforms);
    if (ids_out)
        *ids_out = ids;
    else
        free(ids);
    return CLRUN_OK;
}

clrun_status clrun_device_list(clrun_device_info **list, size_t *count)
{
    if (list == NULL || count == NULL)
        return clrun__fail(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "clrun_device_list: NULL argument");
    return clrun__device_enumerate(list, NULL, NULL, count);
}

void clrun_device_list_free(clrun_device_info *list) { free(list); }

static bool is_index(const char *text, unsigned long *value)
{
    if (!isdigit((unsigned char)text[0]))
        return false;
    char *end;
    *value = strtoul(text, &end, 10);
    return *end == '\0';
}

static bool contains_ignoring_case(const char *haystack, const char *needle)
{
    size_t n = strlen(needle);
    for (; *haystack; haystack++) {
        size_t i = 0;
        while (i < n && haystack[i] &&
               tolower((unsigned char)haystack[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (i == n)
            return true;
    }
    return n == 0;
}

static void describe_devices(const clrun_device_info *list, size_t count, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < count && used < size; i++) {
        int w = snprintf(out + used, size - used, "%s%zu: %s [%s] (platform %u: %s)", i ? "; " : "",
                         i, list[i].name, list[i].type, list[i].platform_index, list[i].platform_name);
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

static bool platform_matches(const clrun_device_info *info, const char *platform)
{
    unsigned long index;
    if (platform == NULL || platform[0] == '\0')
        return true;
    if (is_index(platform, &index))
        return info->platform_index == index;
    return contains_ignoring_case(info->platform_name, platform);
}

clrun_status clrun_device_select(const clrun_device_info *list, size_t count, const char *platform,
                                 const char *device, size_t *index)
{
    if (list == NULL || index == NULL)
        return clrun__fail(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "clrun_device_select: NULL argument");
    /* Candidates are the devices of the selected platform, in list order; a device index counts
     * among them. */
    size_t candidates = 0, first_gpu = count, first = count, chosen = count;
    unsigned long wanted_index = 0;
    bool by_index = device && device[0] && is_index(device, &wanted_index);
    for (size_t i = 0; i < count; i++) {
        if (!platform_matches(&list[i], platform))
            continue;
        if (first == count)
            first = i;
        if (first_gpu == count && strcmp(list[i].type, "GPU") == 0)
            first_gpu = i;
        if (chosen == count && device && device[0]) {
            if (by_index ? candidates == wanted_index : contains_ignoring_case(list[i].name, device))
                chosen = i;
        }
        candidates++;
    }
    if (!(device && device[0]))
        chosen = first_gpu < count ? first_gpu : first;
    if (chosen < count) {
        *index = chosen;
        return CLRUN_OK;
    }
    char devices[2048];
    describe_devices(list, count, devices, sizeof devices);
    if (candidates == 0)
        return clrun__fail(NULL, CLRUN_ERROR_NO_DEVICE,
                           "CLRUN_PLATFORM='%s' matches no platform; devices that exist: %s",
                           platform ? platform : "", devices);
    return clrun__fail(NULL, CLRUN_ERROR_NO_DEVICE,
                       "CLRUN_DEVICE='%s' matches no device%s%s%s; devices that exist: %s", device,
                       platform && platform[0] ? " of platform '" : "", platform && platform[0] ? platform : "",
                       platform && platform[0] ? "'" : "", devices);
}
