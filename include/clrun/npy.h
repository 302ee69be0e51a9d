/* clrun: numpy's .npy files, for real inputs and outputs (docs/npy.md). Reading takes format
 * versions 1.0, 2.0 and 3.0 with a little-endian (or one-byte) dtype clrun has: '<f4' (f32),
 * '<f8' (f64), '<f2' (f16), '<i4' (i32), '<i8' (i64), '|b1' (bool), in C order; anything else
 * (Fortran order, big-endian, object or structured arrays, other dtypes, empty arrays, more than
 * CLRUN_MAX_DIMS dimensions) is a clear error. Writing makes version 1.0 files numpy reads. */
#ifndef CLRUN_NPY_H
#define CLRUN_NPY_H

#include <stddef.h>

#include <clrun/graph.h>
#include <clrun/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Parses the .npy bytes data[0..size) into a type and a malloc'ed copy of the elements
 * (clrun_tensor_bytes(type) bytes, freed by the caller). `name` names the file in messages (may
 * be NULL). CLRUN_ERROR_PARSE for a malformed file, CLRUN_ERROR_UNSUPPORTED for a variant clrun
 * does not read; the message goes to err (may be NULL) and clrun_last_error(NULL). */
clrun_status clrun_npy_parse(const void *bytes, size_t size, const char *name, clrun_tensor_type *type,
                             void **data, char *err, size_t errlen);

/* Reads and parses a file; CLRUN_ERROR_IO when it cannot be read. */
clrun_status clrun_npy_load(const char *path, clrun_tensor_type *type, void **data, char *err,
                            size_t errlen);

/* Writes a tensor of the type (data: clrun_tensor_bytes(type) bytes) as a .npy file.
 * CLRUN_ERROR_IO when the file cannot be written. */
clrun_status clrun_npy_save(const char *path, const clrun_tensor_type *type, const void *data,
                            char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
