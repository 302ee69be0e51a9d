/* A pre-check of ONNX protobuf bytes: well-formed at the wire level and nested at most
 * CLRUN__ONNX_MAX_DEPTH messages deep along the fields that can recurse (wire.c says why). */
#ifndef CLRUN_LIB_ONNX_WIRE_H
#define CLRUN_LIB_ONNX_WIRE_H

#include <stdbool.h>
#include <stddef.h>

#define CLRUN__ONNX_MAX_DEPTH 100

typedef enum clrun__wire_result {
    CLRUN__WIRE_OK = 0,
    CLRUN__WIRE_MALFORMED, /* a bad varint, a length past the end, an unknown wire type */
    CLRUN__WIRE_TOO_DEEP,  /* nested deeper than CLRUN__ONNX_MAX_DEPTH */
} clrun__wire_result;

/* A ModelProto. */
clrun__wire_result clrun__onnx_wire_check(const void *data, size_t size);
/* A TensorProto (which cannot recurse: only the wire format is checked). */
clrun__wire_result clrun__onnx_wire_check_tensor(const void *data, size_t size);

#endif
