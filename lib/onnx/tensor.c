/* Host tensors: element types, conversions and TensorProto decoding. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/file.h"
#include "core/log.h"
#include "graph/types.h"
#include "onnx/onnx.pb-c.h"
#include "onnx/tensor.h"

typedef struct elem_row {
    int elem;
    const char *name;
    size_t size;
} elem_row;

static const elem_row elem_rows[] = {
    {CLRUN__ONNX_FLOAT, "float", 4},       {CLRUN__ONNX_UINT8, "uint8", 1},
    {CLRUN__ONNX_INT8, "int8", 1},         {CLRUN__ONNX_UINT16, "uint16", 2},
    {CLRUN__ONNX_INT16, "int16", 2},       {CLRUN__ONNX_INT32, "int32", 4},
    {CLRUN__ONNX_INT64, "int64", 8},       {CLRUN__ONNX_STRING, "string", 0},
    {CLRUN__ONNX_BOOL, "bool", 1},         {CLRUN__ONNX_FLOAT16, "float16", 2},
    {CLRUN__ONNX_DOUBLE, "double", 8},     {CLRUN__ONNX_UINT32, "uint32", 4},
    {CLRUN__ONNX_UINT64, "uint64", 8},     {CLRUN__ONNX_COMPLEX64, "complex64", 0},
    {CLRUN__ONNX_COMPLEX128, "complex128", 0}, {CLRUN__ONNX_BFLOAT16, "bfloat16", 2},
    /* no size: clrun reads none of these (a refusal names them) */
    {CLRUN__ONNX_FLOAT8E4M3FN, "float8e4m3fn", 0}, {CLRUN__ONNX_FLOAT8E4M3FNUZ, "float8e4m3fnuz", 0},
    {CLRUN__ONNX_FLOAT8E5M2, "float8e5m2", 0}, {CLRUN__ONNX_FLOAT8E5M2FNUZ, "float8e5m2fnuz", 0},
    {CLRUN__ONNX_UINT4, "uint4", 0}, {CLRUN__ONNX_INT4, "int4", 0},
    {CLRUN__ONNX_FLOAT4E2M1, "float4e2m1", 0},
};

static const elem_row *elem_row_of(int elem)
{
    for (size_t i = 0; i < sizeof elem_rows / sizeof elem_rows[0]; i++)
        if (elem_rows[i].elem == elem)
            return &elem_rows[i];
    return NULL;
}

const char *clrun__onnx_elem_name(int elem, char *buf, size_t size)
{
    const elem_row *row = elem_row_of(elem);
    if (row)
        return row->name;
    snprintf(buf, size, "data type %d", elem);
    return buf;
}

size_t clrun__onnx_elem_size(int elem)
{
    const elem_row *row = elem_row_of(elem);
    return row ? row->size : 0;
}

bool clrun__onnx_elem_dtype(int elem, clrun_dtype *out)
{
    switch (elem) {
    case CLRUN__ONNX_FLOAT: *out = CLRUN_F32; return true;
    case CLRUN__ONNX_INT32: *out = CLRUN_I32; return true;
    case CLRUN__ONNX_INT64: *out = CLRUN_I64; return true;
    case CLRUN__ONNX_BOOL: *out = CLRUN_BOOL; return true;
    case CLRUN__ONNX_DOUBLE: *out = CLRUN_F64; return true;
    case CLRUN__ONNX_FLOAT16: *out = CLRUN_F16; return true;
    case CLRUN__ONNX_INT8: *out = CLRUN_I8; return true;
    case CLRUN__ONNX_UINT8: *out = CLRUN_U8; return true;
    case CLRUN__ONNX_INT16: *out = CLRUN_I16; return true;
    case CLRUN__ONNX_UINT16: *out = CLRUN_U16; return true;
    case CLRUN__ONNX_UINT32: *out = CLRUN_U32; return true;
    case CLRUN__ONNX_UINT64: *out = CLRUN_U64; return true;
    case CLRUN__ONNX_BFLOAT16: *out = CLRUN_BF16; return true;
    default: return false;
    }
}

int clrun__onnx_dtype_elem(clrun_dtype dtype)
{
    switch (dtype) {
    case CLRUN_F32: return CLRUN__ONNX_FLOAT;
    case CLRUN_I32: return CLRUN__ONNX_INT32;
    case CLRUN_I64: return CLRUN__ONNX_INT64;
    case CLRUN_BOOL: return CLRUN__ONNX_BOOL;
    case CLRUN_F64: return CLRUN__ONNX_DOUBLE;
    case CLRUN_F16: return CLRUN__ONNX_FLOAT16;
    case CLRUN_I8: return CLRUN__ONNX_INT8;
    case CLRUN_U8: return CLRUN__ONNX_UINT8;
    case CLRUN_I16: return CLRUN__ONNX_INT16;
    case CLRUN_U16: return CLRUN__ONNX_UINT16;
    case CLRUN_U32: return CLRUN__ONNX_UINT32;
    case CLRUN_BF16: return CLRUN__ONNX_BFLOAT16;
    case CLRUN_U64: return CLRUN__ONNX_UINT64;
    }
    return CLRUN__ONNX_UNDEFINED;
}

bool clrun__onnx_elem_is_float(int elem)
{
    return elem == CLRUN__ONNX_FLOAT || elem == CLRUN__ONNX_DOUBLE ||
           elem == CLRUN__ONNX_FLOAT16 || elem == CLRUN__ONNX_BFLOAT16;
}

/* ---- counts and storage ---- */

/* Product of dims, or UINT64_MAX when it exceeds 2^62 (so callers can refuse it). */
static uint64_t dims_count(int rank, const int64_t *dims)
{
    uint64_t n = 1;
    for (int d = 0; d < rank; d++) {
        if (dims[d] < 0)
            return UINT64_MAX;
        if (dims[d] == 0)
            return 0;
    }
    for (int d = 0; d < rank; d++) {
        if ((uint64_t)dims[d] > ((uint64_t)1 << 62) / n)
            return UINT64_MAX;
        n *= (uint64_t)dims[d];
    }
    return n;
}

uint64_t clrun__otensor_count(const clrun__otensor *t)
{
    return dims_count(t->rank, t->dims);
}

uint64_t clrun__otensor_bytes(const clrun__otensor *t)
{
    return clrun__otensor_count(t) * clrun__onnx_elem_size(t->elem);
}

/* The folding budget of this thread: bytes made and alive, bytes decoded and alive (which raise
 * the budget), the budget itself (0: the default), and why the last allocation failed. */
static _Thread_local uint64_t budget_used, budget_decoded, budget_limit;
static _Thread_local bool budget_refused;

bool clrun__fold_budget_refused(void)
{
    return budget_refused;
}

uint64_t clrun__fold_budget_set(uint64_t bytes)
{
    uint64_t old = budget_limit ? budget_limit : CLRUN__ONNX_FOLD_BUDGET;
    budget_limit = bytes;
    return old;
}

uint64_t clrun__fold_budget_used(void)
{
    return budget_used;
}

/* made: counted in the budget (refused past it); else decoded, raising it. */
static bool alloc_tensor(clrun__otensor *t, int elem, int rank, const int64_t *dims, bool made)
{
    memset(t, 0, sizeof *t);
    size_t size = clrun__onnx_elem_size(elem);
    uint64_t count = rank >= 0 && rank <= CLRUN__ONNX_MAX_RANK ? dims_count(rank, dims) : UINT64_MAX;
    budget_refused = true;
    if (size == 0 || count == UINT64_MAX || count > CLRUN__ONNX_MAX_TENSOR_BYTES / size)
        return false;
    uint64_t bytes = count * size, limit = budget_limit ? budget_limit : CLRUN__ONNX_FOLD_BUDGET;
    if (made && budget_used + bytes > limit + budget_decoded)
        return false;
    budget_refused = false;
    t->elem = elem;
    t->rank = rank;
    if (rank)
        memcpy(t->dims, dims, (size_t)rank * sizeof dims[0]);
    if (count) {
        t->data = calloc((size_t)count, size);
        if (t->data == NULL) {
            memset(t, 0, sizeof *t);
            return false;
        }
    }
    t->counted = made ? (int64_t)bytes : -(int64_t)bytes;
    if (made)
        budget_used += bytes;
    else
        budget_decoded += bytes;
    return true;
}

bool clrun__otensor_alloc(clrun__otensor *t, int elem, int rank, const int64_t *dims)
{
    return alloc_tensor(t, elem, rank, dims, true);
}

void clrun__otensor_free(clrun__otensor *t)
{
    if (t) {
        /* Saturating: a tensor freed on another thread than its own must not wrap the count. */
        uint64_t *count = t->counted > 0 ? &budget_used : &budget_decoded;
        uint64_t bytes = t->counted > 0 ? (uint64_t)t->counted : (uint64_t)0 - (uint64_t)t->counted;
        *count = *count > bytes ? *count - bytes : 0;
        if (!t->graph_owned)
            free(t->data);
        memset(t, 0, sizeof *t);
    }
}

bool clrun__otensor_copy(clrun__otensor *dst, const clrun__otensor *src)
{
    if (!clrun__otensor_alloc(dst, src->elem, src->rank, src->dims))
        return false;
    uint64_t bytes = clrun__otensor_bytes(src);
    if (bytes)
        memcpy(dst->data, src->data, (size_t)bytes);
    return true;
}

/* ---- element access ---- */

static float bf16_to_float(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static uint16_t float_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7FFFFFFF) > 0x7F800000)
        return (uint16_t)((x >> 16) | 0x40);
    x += 0x7FFF + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

int64_t clrun__otensor_get_int(const clrun__otensor *t, uint64_t i)
{
    size_t size = clrun__onnx_elem_size(t->elem);
    const unsigned char *p = (const unsigned char *)t->data + i * size;
    switch (t->elem) {
    case CLRUN__ONNX_UINT8: return *p;
    case CLRUN__ONNX_INT8: return (int8_t)*p;
    case CLRUN__ONNX_BOOL: return *p != 0;
    case CLRUN__ONNX_UINT16: { uint16_t v; memcpy(&v, p, 2); return v; }
    case CLRUN__ONNX_INT16: { int16_t v; memcpy(&v, p, 2); return v; }
    case CLRUN__ONNX_INT32: { int32_t v; memcpy(&v, p, 4); return v; }
    case CLRUN__ONNX_UINT32: { uint32_t v; memcpy(&v, p, 4); return v; }
    case CLRUN__ONNX_INT64: { int64_t v; memcpy(&v, p, 8); return v; }
    case CLRUN__ONNX_UINT64: { uint64_t v; memcpy(&v, p, 8); return (int64_t)v; }
    default: {
        double r = clrun__otensor_get_real(t, i);
        if (isnan(r))
            return 0;
        if (r >= 9.2233720368547758e18)
            return INT64_MAX;
        if (r <= -9.2233720368547758e18)
            return INT64_MIN;
        return (int64_t)r;
    }
    }
}

double clrun__otensor_get_real(const clrun__otensor *t, uint64_t i)
{
    size_t size = clrun__onnx_elem_size(t->elem);
    const unsigned char *p = (const unsigned char *)t->data + i * size;
    switch (t->elem) {
    case CLRUN__ONNX_FLOAT: { float v; memcpy(&v, p, 4); return v; }
    case CLRUN__ONNX_DOUBLE: { double v; memcpy(&v, p, 8); return v; }
    case CLRUN__ONNX_FLOAT16: { uint16_t v; memcpy(&v, p, 2); return clrun__f16_to_f32(v); }
    case CLRUN__ONNX_BFLOAT16: { uint16_t v; memcpy(&v, p, 2); return bf16_to_float(v); }
    case CLRUN__ONNX_UINT64: { uint64_t v; memcpy(&v, p, 8); return (double)v; }
    default: return (double)clrun__otensor_get_int(t, i);
    }
}

/* A double into an integer type as a C cast of an in-range value would; out of range values
 * (undefined in C) saturate instead, NaN becomes 0. */
static int64_t real_to_int(double r)
{
    if (isnan(r))
        return 0;
    if (r >= 9.2233720368547758e18)
        return INT64_MAX;
    if (r <= -9.2233720368547758e18)
        return INT64_MIN;
    return (int64_t)r;
}

void clrun__otensor_set_int(clrun__otensor *t, uint64_t i, int64_t value)
{
    size_t size = clrun__onnx_elem_size(t->elem);
    unsigned char *p = (unsigned char *)t->data + i * size;
    switch (t->elem) {
    case CLRUN__ONNX_UINT8: case CLRUN__ONNX_INT8: *p = (unsigned char)value; break;
    case CLRUN__ONNX_BOOL: *p = value != 0; break;
    case CLRUN__ONNX_UINT16: case CLRUN__ONNX_INT16: { uint16_t v = (uint16_t)value; memcpy(p, &v, 2); break; }
    case CLRUN__ONNX_INT32: case CLRUN__ONNX_UINT32: { uint32_t v = (uint32_t)value; memcpy(p, &v, 4); break; }
    case CLRUN__ONNX_INT64: case CLRUN__ONNX_UINT64: memcpy(p, &value, 8); break;
    default: clrun__otensor_set_real(t, i, (double)value); break;
    }
}

void clrun__otensor_set_real(clrun__otensor *t, uint64_t i, double value)
{
    size_t size = clrun__onnx_elem_size(t->elem);
    unsigned char *p = (unsigned char *)t->data + i * size;
    switch (t->elem) {
    case CLRUN__ONNX_FLOAT: { float v = (float)value; memcpy(p, &v, 4); break; }
    case CLRUN__ONNX_DOUBLE: memcpy(p, &value, 8); break;
    case CLRUN__ONNX_FLOAT16: { uint16_t v = clrun__f32_to_f16((float)value); memcpy(p, &v, 2); break; }
    case CLRUN__ONNX_BFLOAT16: { uint16_t v = float_to_bf16((float)value); memcpy(p, &v, 2); break; }
    case CLRUN__ONNX_BOOL: *p = value != 0; break;
    case CLRUN__ONNX_UINT64: {
        uint64_t v = isnan(value) || value <= 0 ? 0 : value >= 1.8446744073709552e19 ? UINT64_MAX : (uint64_t)value;
        memcpy(p, &v, 8);
        break;
    }
    default: clrun__otensor_set_int(t, i, real_to_int(value)); break;
    }
}

bool clrun__otensor_host_type(const clrun__otensor *t, clrun_tensor_type *out, char *why, size_t whylen)
{
    char name[32];
    memset(out, 0, sizeof *out);
    if (!clrun__onnx_elem_dtype(t->elem, &out->dtype)) {
        snprintf(why, whylen, "clrun has no %s tensors", clrun__onnx_elem_name(t->elem, name, sizeof name));
        return false;
    }
    if (t->rank > CLRUN_MAX_DIMS) {
        snprintf(why, whylen, "rank %d is above clrun's %d dimensions", t->rank, CLRUN_MAX_DIMS);
        return false;
    }
    out->rank = t->rank;
    for (int d = 0; d < t->rank; d++)
        out->shape[d] = t->dims[d];
    return true;
}

bool clrun__otensor_clrun_type(const clrun__otensor *t, clrun_tensor_type *out, char *why,
                               size_t whylen)
{
    if (!clrun__otensor_host_type(t, out, why, whylen))
        return false;
    for (int d = 0; d < t->rank; d++) {
        if (t->dims[d] == 0) {
            char dims[128];
            snprintf(why, whylen, "shape %s is empty (no kernel runs over an empty tensor, and this value over "
                     "nothing is not computed at load)",
                     clrun__onnx_dims_text(t->rank, t->dims, dims, sizeof dims));
            memset(out, 0, sizeof *out);
            return false;
        }
    }
    return true;
}

const char *clrun__onnx_dims_text(int rank, const int64_t *dims, char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < rank && used < size; d++)
        used += (size_t)snprintf(buf + used, size - used, "%s%" PRId64, d ? ", " : "", dims[d]);
    if (used < size)
        snprintf(buf + used, size - used, "]");
    return buf;
}

/* ---- decoding ---- */

CLRUN__PRINTF(4, 5)
static clrun_status fail(char *why, size_t whylen, clrun_status status, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(why, whylen, format, args);
    va_end(args);
    return status;
}

/* The value of key in the external_data entries, or NULL. */
static const char *external_entry(const Onnx__TensorProto *proto, const char *key)
{
    for (size_t i = 0; i < proto->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = proto->external_data[i];
        if (e->key && strcmp(e->key, key) == 0)
            return e->value ? e->value : "";
    }
    return NULL;
}

static bool parse_u64(const char *text, uint64_t *out)
{
    if (text == NULL || *text < '0' || *text > '9')
        return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || *end)
        return false;
    *out = v;
    return true;
}

/* The bytes of external data: location is a relative path inside the model's folder (dir),
 * reached without following a symbolic link, naming a regular file (never a FIFO or a device:
 * the open does not block) that holds offset + bytes bytes. */
static clrun_status read_external(const Onnx__TensorProto *proto, const char *dir, void *data,
                                  uint64_t bytes, char *why, size_t whylen)
{
    const char *location = external_entry(proto, "location");
    const char *offset_text = external_entry(proto, "offset");
    const char *length_text = external_entry(proto, "length");
    uint64_t offset = 0, length = bytes, size = 0;
    char reason[1024];
    if (location == NULL)
        return fail(why, whylen, CLRUN_ERROR_PARSE, "external data without a location");
    if (offset_text && !parse_u64(offset_text, &offset))
        return fail(why, whylen, CLRUN_ERROR_PARSE, "external data offset '%s' is not a number",
                    offset_text);
    if (length_text && !parse_u64(length_text, &length))
        return fail(why, whylen, CLRUN_ERROR_PARSE, "external data length '%s' is not a number",
                    length_text);
    if (length != bytes)
        return fail(why, whylen, CLRUN_ERROR_PARSE,
                    "external data length %" PRIu64 " differs from the %" PRIu64 " bytes of its shape",
                    length, bytes);
    clrun_status status = CLRUN_OK;
    int fd = clrun__file_open_inside(dir, location, &size, &status, reason, sizeof reason);
    if (fd < 0)
        return fail(why, whylen, status, "cannot open external data '%s%s%s': %s", dir ? dir : "",
                    dir ? "/" : "", location, reason);
    if (offset > size || bytes > size - offset)
        status = fail(why, whylen, CLRUN_ERROR_IO,
                      "external data '%s' ends before offset %" PRIu64 " + %" PRIu64 " bytes (it has %" PRIu64 ")",
                      location, offset, bytes, size);
    else if (bytes && (errno = 0, !clrun__file_read_at(fd, data, bytes, offset)))
        status = fail(why, whylen, CLRUN_ERROR_IO, "external data '%s' cannot be read at offset %" PRIu64 ": %s",
                      location, offset, errno ? strerror(errno) : "it ended early");
    close(fd);
    return status;
}

/* The typed field of the tensor's type: its values and count. */
static clrun_status decode_typed(const Onnx__TensorProto *proto, clrun__otensor *t, uint64_t count,
                                 char *why, size_t whylen)
{
    size_t n;
    switch (t->elem) {
    case CLRUN__ONNX_FLOAT: n = proto->n_float_data; break;
    case CLRUN__ONNX_DOUBLE: n = proto->n_double_data; break;
    case CLRUN__ONNX_INT64: n = proto->n_int64_data; break;
    case CLRUN__ONNX_UINT32: case CLRUN__ONNX_UINT64: n = proto->n_uint64_data; break;
    default: n = proto->n_int32_data; break;
    }
    if (n != count)
        return fail(why, whylen, CLRUN_ERROR_PARSE, "has %zu values for %" PRIu64 " elements", n,
                    count);
    for (uint64_t i = 0; i < count; i++) {
        switch (t->elem) {
        case CLRUN__ONNX_FLOAT: memcpy((float *)t->data + i, &proto->float_data[i], 4); break;
        case CLRUN__ONNX_DOUBLE: memcpy((double *)t->data + i, &proto->double_data[i], 8); break;
        case CLRUN__ONNX_INT64: clrun__otensor_set_int(t, i, proto->int64_data[i]); break;
        case CLRUN__ONNX_UINT32: case CLRUN__ONNX_UINT64:
            clrun__otensor_set_int(t, i, (int64_t)proto->uint64_data[i]);
            break;
        case CLRUN__ONNX_FLOAT16: case CLRUN__ONNX_BFLOAT16: {
            uint16_t bits = (uint16_t)proto->int32_data[i]; /* the bit pattern, as onnx.proto says */
            memcpy((uint16_t *)t->data + i, &bits, 2);
            break;
        }
        default: clrun__otensor_set_int(t, i, proto->int32_data[i]); break;
        }
    }
    return CLRUN_OK;
}

static clrun_status decode(const Onnx__TensorProto *proto, const char *dir, clrun__otensor *out,
                           Onnx__TensorProto *take, char *why, size_t whylen);

clrun_status clrun__otensor_decode(const Onnx__TensorProto *proto, const char *dir,
                                   clrun__otensor *out, char *why, size_t whylen)
{
    return decode(proto, dir, out, NULL, why, whylen);
}

clrun_status clrun__otensor_decode_take(Onnx__TensorProto *proto, const char *dir,
                                        clrun__otensor *out, char *why, size_t whylen)
{
    return decode(proto, dir, out, proto, why, whylen);
}

/* `take`, when not NULL, is proto: its raw bytes become the tensor's instead of being copied. */
static clrun_status decode(const Onnx__TensorProto *proto, const char *dir, clrun__otensor *out,
                           Onnx__TensorProto *take, char *why, size_t whylen)
{
    memset(out, 0, sizeof *out);
    char name[32];
    int elem = proto->has_data_type ? proto->data_type : CLRUN__ONNX_UNDEFINED;
    if (elem == CLRUN__ONNX_UNDEFINED)
        return fail(why, whylen, CLRUN_ERROR_PARSE, "has no data type");
    if (clrun__onnx_elem_size(elem) == 0)
        return fail(why, whylen, elem_row_of(elem) ? CLRUN_ERROR_UNSUPPORTED : CLRUN_ERROR_PARSE,
                    "is of %s, which clrun does not read", clrun__onnx_elem_name(elem, name, sizeof name));
    if (proto->n_dims > CLRUN__ONNX_MAX_RANK)
        return fail(why, whylen, CLRUN_ERROR_UNSUPPORTED, "has %zu dimensions (at most %d)",
                    proto->n_dims, CLRUN__ONNX_MAX_RANK);
    for (size_t d = 0; d < proto->n_dims; d++)
        if (proto->dims[d] < 0)
            return fail(why, whylen, CLRUN_ERROR_PARSE, "has dimension %zu of %" PRId64, d,
                        proto->dims[d]);
    if (proto->segment)
        return fail(why, whylen, CLRUN_ERROR_UNSUPPORTED, "is segmented");
    if (!alloc_tensor(out, elem, (int)proto->n_dims, proto->dims, false)) {
        char dims[128];
        return fail(why, whylen, CLRUN_ERROR_INVALID_SIZE, "of shape %s is too large",
                    clrun__onnx_dims_text((int)proto->n_dims, proto->dims, dims, sizeof dims));
    }
    uint64_t count = clrun__otensor_count(out), bytes = clrun__otensor_bytes(out);
    clrun_status status = CLRUN_OK;
    if (proto->has_data_location && proto->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        status = read_external(proto, dir, out->data, bytes, why, whylen);
    } else if (proto->has_raw_data) {
        if (proto->raw_data.len != bytes)
            status = fail(why, whylen, CLRUN_ERROR_PARSE,
                          "has %zu bytes of raw data for %" PRIu64 " elements of %s (%" PRIu64 " bytes)",
                          proto->raw_data.len, count, clrun__onnx_elem_name(elem, name, sizeof name), bytes);
        else if (bytes && take && (uintptr_t)take->raw_data.data % 16 == 0) {
            /* The weights of a model are most of its bytes: protobuf-c's copy (malloc'd, freed
             * with the message) is moved here rather than copied once more. alloc_tensor's
             * block, calloc'd and so never touched, goes back. */
            free(out->data);
            out->data = take->raw_data.data;
            take->raw_data.data = NULL;
            take->raw_data.len = 0;
            take->has_raw_data = 0;
        } else if (bytes)
            memcpy(out->data, proto->raw_data.data, (size_t)bytes);
    } else {
        status = decode_typed(proto, out, count, why, whylen);
    }
    if (status != CLRUN_OK)
        clrun__otensor_free(out);
    return status;
}
