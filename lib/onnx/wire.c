/* A check of a model's nesting depth before protobuf-c sees it. protobuf-c unpacks nested
 * messages by recursion without a limit, and ONNX messages nest without bound (a graph holds
 * nodes, whose attributes hold graphs...), so a small hostile file could exhaust the stack. This
 * walks the wire format along the fields that can recurse, refusing more than
 * CLRUN__ONNX_MAX_DEPTH levels (Google's protobuf stops at 100 too), and rejects wire-level
 * damage on the way (bad varints, lengths past the end). Everything else is left to protobuf-c. */
#include <stddef.h>
#include <stdint.h>

#include "onnx/wire.h"

/* The messages on the recursive paths of onnx.proto. */
typedef enum msg {
    M_NONE = 0, M_MODEL, M_GRAPH, M_NODE, M_ATTRIBUTE, M_VALUE_INFO, M_TYPE, M_TYPE_SEQUENCE,
    M_TYPE_MAP, M_TYPE_OPTIONAL, M_TRAINING, M_FUNCTION,
} msg;

/* The message type of field `field` of message m, M_NONE for fields that cannot recurse. */
static msg child(msg m, uint64_t field)
{
    switch (m) {
    case M_MODEL: return field == 7 ? M_GRAPH : field == 20 ? M_TRAINING : field == 25 ? M_FUNCTION : M_NONE;
    case M_GRAPH: return field == 1 ? M_NODE : (field == 11 || field == 12 || field == 13) ? M_VALUE_INFO : M_NONE;
    case M_NODE: return field == 5 ? M_ATTRIBUTE : M_NONE;
    case M_ATTRIBUTE:
        return (field == 6 || field == 11) ? M_GRAPH : (field == 14 || field == 15) ? M_TYPE : M_NONE;
    case M_VALUE_INFO: return field == 2 ? M_TYPE : M_NONE;
    case M_TYPE: return field == 4 ? M_TYPE_SEQUENCE : field == 5 ? M_TYPE_MAP : field == 9 ? M_TYPE_OPTIONAL : M_NONE;
    case M_TYPE_SEQUENCE: case M_TYPE_OPTIONAL: return field == 1 ? M_TYPE : M_NONE;
    case M_TYPE_MAP: return field == 2 ? M_TYPE : M_NONE;
    case M_TRAINING: return (field == 1 || field == 2) ? M_GRAPH : M_NONE;
    case M_FUNCTION: return field == 7 ? M_NODE : M_NONE;
    case M_NONE: break;
    }
    return M_NONE;
}

static bool varint(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*p >= end)
            return false;
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

static clrun__wire_result walk(const uint8_t *p, const uint8_t *end, msg m, int depth)
{
    if (depth > CLRUN__ONNX_MAX_DEPTH)
        return CLRUN__WIRE_TOO_DEEP;
    while (p < end) {
        uint64_t key, value;
        if (!varint(&p, end, &key))
            return CLRUN__WIRE_MALFORMED;
        uint64_t field = key >> 3;
        switch (key & 7) {
        case 0:
            if (!varint(&p, end, &value))
                return CLRUN__WIRE_MALFORMED;
            break;
        case 1:
            if (end - p < 8)
                return CLRUN__WIRE_MALFORMED;
            p += 8;
            break;
        case 5:
            if (end - p < 4)
                return CLRUN__WIRE_MALFORMED;
            p += 4;
            break;
        case 2: {
            if (!varint(&p, end, &value) || value > (uint64_t)(end - p))
                return CLRUN__WIRE_MALFORMED;
            msg sub = child(m, field);
            if (sub != M_NONE) {
                clrun__wire_result r = walk(p, p + value, sub, depth + 1);
                if (r != CLRUN__WIRE_OK)
                    return r;
            }
            p += value;
            break;
        }
        default: /* groups (3, 4) are not in onnx.proto; 6 and 7 do not exist */
            return CLRUN__WIRE_MALFORMED;
        }
        if (field == 0)
            return CLRUN__WIRE_MALFORMED;
    }
    return CLRUN__WIRE_OK;
}

clrun__wire_result clrun__onnx_wire_check(const void *data, size_t size)
{
    const uint8_t *p = data;
    return walk(p, p + size, M_MODEL, 1);
}

clrun__wire_result clrun__onnx_wire_check_tensor(const void *data, size_t size)
{
    const uint8_t *p = data;
    return walk(p, p + size, M_NONE, 1);
}
