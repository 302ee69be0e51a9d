/* clrun_onnx_tensor_load: a TensorProto file (the test cases' input_N.pb and output_N.pb), its
 * external data read from the file's folder under the importer's rules (tensor.c). */
#include <stdlib.h>
#include <string.h>

#include <clrun/onnx.h>

#include "core/error.h"
#include "core/file.h"
#include "onnx/onnx.pb-c.h"
#include "onnx/tensor.h"
#include "onnx/wire.h"

/* Largest TensorProto file read: protobuf's own limit on a message (2 GiB). */
#define MAX_TENSOR_FILE ((uint64_t)1 << 31)

static char *folder_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t len = slash ? (slash == path ? 1 : (size_t)(slash - path)) : 1;
    char *dir = malloc(len + 1);
    if (dir) {
        memcpy(dir, slash ? path : ".", len);
        dir[len] = '\0';
    }
    return dir;
}

clrun_status clrun_onnx_tensor_load(const char *path, clrun_tensor_type *type, void **data,
                                    char *name, size_t name_size, char *err, size_t errlen)
{
    char why[1024], message[1400];
    clrun_status s = CLRUN_OK;
    size_t size = 0;
    void *bytes = NULL;
    Onnx__TensorProto *proto = NULL;
    clrun__otensor t = {0};
    char *dir = NULL;
    if (data)
        *data = NULL;
    if (!path || !type || !data) {
        s = CLRUN_ERROR_INVALID_ARGUMENT;
        snprintf(message, sizeof message, "clrun_onnx_tensor_load: no path, type or data");
        goto done;
    }
    /* A regular file only (never a FIFO or a device, which could block or never end), read up
     * to the size it has. */
    if ((bytes = clrun__file_read(path, MAX_TENSOR_FILE, &size, &s, why, sizeof why)) == NULL) {
        snprintf(message, sizeof message, "%s: %s", path, why);
        goto done;
    }
    if (clrun__onnx_wire_check_tensor(bytes, size) != CLRUN__WIRE_OK ||
        (proto = onnx__tensor_proto__unpack(NULL, size, bytes)) == NULL) {
        s = CLRUN_ERROR_PARSE;
        snprintf(message, sizeof message, "%s: not an ONNX tensor: malformed or truncated protobuf", path);
        goto done;
    }
    if ((dir = folder_of(path)) == NULL) {
        s = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        snprintf(message, sizeof message, "%s: out of host memory", path);
        goto done;
    }
    if ((s = clrun__otensor_decode(proto, dir, &t, why, sizeof why)) != CLRUN_OK) {
        snprintf(message, sizeof message, "%s: the tensor %s", path, why);
        goto done;
    }
    if (!clrun__otensor_host_type(&t, type, why, sizeof why)) {
        s = CLRUN_ERROR_UNSUPPORTED;
        snprintf(message, sizeof message, "%s: %s", path, why);
        goto done;
    }
    if (name && name_size)
        snprintf(name, name_size, "%s", proto->name ? proto->name : "");
    *data = t.data;
    t.data = NULL;
done:
    if (s != CLRUN_OK) {
        clrun__error_set(NULL, s, "%s", message);
        if (err && errlen)
            snprintf(err, errlen, "%s", message);
    }
    clrun__otensor_free(&t);
    if (proto)
        onnx__tensor_proto__free_unpacked(proto, NULL);
    free(bytes);
    free(dir);
    return s;
}
