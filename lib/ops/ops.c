/* The op registry and what every op family shares: refusal messages, the attribute schema
 * check, numpy broadcasting, and kernel launches chained by events. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clrun/program.h>

#include "device/cl.h"
#include "ops/ops_internal.h"

/* ---- registry ---------------------------------------------------------------------------- */

static const clrun__op *const *const families[] = {
    clrun__ops_elementwise, clrun__ops_matmul, clrun__ops_norm, clrun__ops_layout, clrun__ops_conv,
};

/* Every family's entries in one flat array, built on first use; 64 is well above the ops
 * docs/ops.md lists (an assert-like clamp keeps a longer list from overflowing). */
#define MAX_OPS 64
static const clrun__op *all_ops[MAX_OPS];
static size_t all_count;
static pthread_once_t all_once = PTHREAD_ONCE_INIT;

static void collect_ops(void)
{
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
        for (const clrun__op *const *op = families[f]; *op && all_count < MAX_OPS; op++)
            all_ops[all_count++] = *op;
}

const clrun__op *const *clrun__op_list(size_t *count)
{
    pthread_once(&all_once, collect_ops);
    *count = all_count;
    return all_ops;
}

const clrun__op *clrun__op_find(const char *name)
{
    size_t count;
    const clrun__op *const *ops = clrun__op_list(&count);
    for (size_t i = 0; name && i < count; i++)
        if (strcmp(ops[i]->name, name) == 0)
            return ops[i];
    return NULL;
}

clrun__kernel_choice clrun__ops_kernels = CLRUN__KERNELS_AUTO;

/* ---- attributes -------------------------------------------------------------------------- */

static const clrun_attr *find_attr(const clrun__op_call *call, const char *name)
{
    for (int i = 0; i < call->attr_count; i++)
        if (call->attrs[i].name && strcmp(call->attrs[i].name, name) == 0)
            return &call->attrs[i];
    return NULL;
}

bool clrun__attr_int(const clrun__op_call *call, const char *name, int64_t *out)
{
    const clrun_attr *a = find_attr(call, name);
    if (a == NULL || a->kind != CLRUN_ATTR_INT)
        return false;
    *out = a->i;
    return true;
}

bool clrun__attr_float(const clrun__op_call *call, const char *name, double *out)
{
    const clrun_attr *a = find_attr(call, name);
    if (a == NULL || a->kind != CLRUN_ATTR_FLOAT)
        return false;
    *out = a->f;
    return true;
}

bool clrun__attr_ints(const clrun__op_call *call, const char *name, const int64_t **out, int *count)
{
    const clrun_attr *a = find_attr(call, name);
    if (a == NULL || a->kind != CLRUN_ATTR_INTS)
        return false;
    *out = a->ints;
    *count = a->count;
    return true;
}

int64_t clrun__attr_int_or(const clrun__op_call *call, const char *name, int64_t fallback)
{
    int64_t v;
    return clrun__attr_int(call, name, &v) ? v : fallback;
}

double clrun__attr_float_or(const clrun__op_call *call, const char *name, double fallback)
{
    const clrun_attr *a = find_attr(call, name);
    if (a == NULL)
        return fallback;
    if (a->kind == CLRUN_ATTR_INT)
        return (double)a->i;
    return a->kind == CLRUN_ATTR_FLOAT ? a->f : fallback;
}

int clrun__attr_list(const clrun__op_call *call, const char *name, int64_t *out, int max)
{
    const clrun_attr *a = find_attr(call, name);
    if (a == NULL)
        return 0;
    if (a->kind == CLRUN_ATTR_INT) {
        out[0] = a->i;
        return 1;
    }
    if (a->kind != CLRUN_ATTR_INTS)
        return 0;
    int n = a->count < max ? a->count : max;
    memcpy(out, a->ints, (size_t)n * sizeof *out);
    return n;
}

static const char *kind_name(clrun__attr_want want)
{
    switch (want) {
    case CLRUN__WANT_INT: return "an integer";
    case CLRUN__WANT_FLOAT: return "a number";
    case CLRUN__WANT_INTS: return "a list of integers";
    }
    return "?";
}

static bool kind_fits(clrun_attr_kind kind, clrun__attr_want want)
{
    switch (want) {
    case CLRUN__WANT_INT: return kind == CLRUN_ATTR_INT;
    case CLRUN__WANT_FLOAT: return kind == CLRUN_ATTR_FLOAT || kind == CLRUN_ATTR_INT;
    case CLRUN__WANT_INTS: return kind == CLRUN_ATTR_INTS || kind == CLRUN_ATTR_INT;
    }
    return false;
}

static const clrun__attr_spec *find_spec(const clrun__attr_spec *specs, int count, const char *name)
{
    for (int i = 0; i < count; i++)
        if (strcmp(specs[i].name, name) == 0)
            return &specs[i];
    return NULL;
}

static void list_names(const clrun__attr_spec *specs, int count, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < count && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? ", " : "", specs[i].name);
    if (count == 0)
        snprintf(buf, size, "none");
}

clrun_status clrun__check_attrs(const clrun__op_call *call, const clrun__attr_spec *specs,
                                int count, const clrun__infer_error *err)
{
    for (int i = 0; i < call->attr_count; i++) {
        const clrun_attr *a = &call->attrs[i];
        const clrun__attr_spec *spec = a->name ? find_spec(specs, count, a->name) : NULL;
        if (spec == NULL) {
            char names[256];
            list_names(specs, count, names, sizeof names);
            return clrun__refuse(err, "unknown attribute '%s' (accepted: %s)",
                                 a->name ? a->name : "(null)", names);
        }
        for (int j = 0; j < i; j++)
            if (strcmp(call->attrs[j].name, a->name) == 0)
                return clrun__refuse(err, "attribute '%s' given twice", a->name);
        if (!kind_fits(a->kind, spec->want))
            return clrun__refuse(err, "attribute '%s' must be %s", a->name, kind_name(spec->want));
        if (a->kind == CLRUN_ATTR_INTS && (a->count < 0 || a->count > CLRUN_MAX_ATTR_INTS))
            return clrun__refuse(err, "attribute '%s' has %d values", a->name, a->count);
    }
    for (int i = 0; i < count; i++)
        if (specs[i].required && find_attr(call, specs[i].name) == NULL)
            return clrun__refuse(err, "missing required attribute '%s'", specs[i].name);
    return CLRUN_OK;
}

/* ---- types and refusals ------------------------------------------------------------------ */

clrun_status clrun__refuse(const clrun__infer_error *err, const char *format, ...)
{
    if (err->buf == NULL || err->size == 0)
        return CLRUN_ERROR_INVALID_GRAPH;
    int n = snprintf(err->buf, err->size, "%s: ", err->op);
    if (n >= 0 && (size_t)n < err->size) {
        va_list ap;
        va_start(ap, format);
        vsnprintf(err->buf + n, err->size - (size_t)n, format, ap);
        va_end(ap);
    }
    return CLRUN_ERROR_INVALID_GRAPH;
}

static const char *dtype_str(clrun_dtype dtype)
{
    switch (dtype) {
    case CLRUN_F32: return "f32";
    case CLRUN_I32: return "i32";
    case CLRUN_F16: return "f16";
    }
    return "?";
}

const char *clrun__type_str(const clrun_tensor_type *type, char *buf)
{
    size_t used = (size_t)snprintf(buf, CLRUN__TYPE_STR, "%s[", dtype_str(type->dtype));
    int rank = type->rank < 0 ? 0 : type->rank > CLRUN_MAX_DIMS ? CLRUN_MAX_DIMS : type->rank;
    for (int i = 0; i < rank && used < CLRUN__TYPE_STR; i++)
        used += (size_t)snprintf(buf + used, CLRUN__TYPE_STR - used, "%s%" PRId64, i ? "," : "",
                                 type->shape[i]);
    if (used < CLRUN__TYPE_STR)
        snprintf(buf + used, CLRUN__TYPE_STR - used, "]");
    return buf;
}

uint64_t clrun__dims_product(const clrun_tensor_type *type, int from, int to)
{
    uint64_t n = 1;
    for (int i = from; i < to; i++)
        n *= (uint64_t)type->shape[i];
    return n;
}

uint64_t clrun__elements(const clrun_tensor_type *type)
{
    return clrun__dims_product(type, 0, type->rank);
}

clrun_status clrun__check_input_count(const clrun__op_call *call, int min, int max,
                                      const clrun__infer_error *err)
{
    if (call->input_count >= min && call->input_count <= max)
        return CLRUN_OK;
    if (min == max)
        return clrun__refuse(err, "takes %d input%s, got %d", min, min == 1 ? "" : "s",
                             call->input_count);
    return clrun__refuse(err, "takes %d to %d inputs, got %d", min, max, call->input_count);
}

clrun_status clrun__check_dtype(const clrun__op_call *call, int i, bool i32_ok,
                                const clrun__infer_error *err)
{
    const clrun_tensor_type *t = &call->inputs[i];
    char s[CLRUN__TYPE_STR];
    if (t->rank < 0 || t->rank > CLRUN_MAX_DIMS)
        return clrun__refuse(err, "input %d has rank %d (at most %d)", i, t->rank, CLRUN_MAX_DIMS);
    for (int d = 0; d < t->rank; d++)
        if (t->shape[d] <= 0)
            return clrun__refuse(err, "input %d is %s: every dimension must be at least 1", i,
                                 clrun__type_str(t, s));
    if (t->dtype == CLRUN_F32 || (i32_ok && t->dtype == CLRUN_I32))
        return CLRUN_OK;
    if (t->dtype == CLRUN_F16)
        return clrun__refuse(err, "input %d is %s: f16 kernels do not exist yet", i,
                             clrun__type_str(t, s));
    return clrun__refuse(err, "input %d is %s: expected f32%s", i, clrun__type_str(t, s),
                         i32_ok ? " or i32" : "");
}

/* ---- broadcasting ------------------------------------------------------------------------ */

clrun_status clrun__broadcast_shape(const clrun_tensor_type *a, const clrun_tensor_type *b,
                                    clrun_tensor_type *out, const clrun__infer_error *err)
{
    int rank = a->rank > b->rank ? a->rank : b->rank;
    out->dtype = a->dtype;
    out->rank = rank;
    for (int i = 0; i < rank; i++) {
        int ia = i - (rank - a->rank), ib = i - (rank - b->rank);
        int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            char sa[CLRUN__TYPE_STR], sb[CLRUN__TYPE_STR];
            return clrun__refuse(err, "shapes do not broadcast: a is %s, b is %s (dimension %d: "
                                 "%" PRId64 " vs %" PRId64 ")", clrun__type_str(a, sa),
                                 clrun__type_str(b, sb), i, da, db);
        }
        out->shape[i] = da == 1 ? db : da;
    }
    return CLRUN_OK;
}

void clrun__broadcast_strides(const clrun_tensor_type *type, const clrun_tensor_type *out,
                              uint64_t *strides)
{
    uint64_t stride = 1;
    for (int i = out->rank - 1; i >= 0; i--) {
        int j = i - (out->rank - type->rank);
        int64_t dim = j >= 0 ? type->shape[j] : 1;
        strides[i] = dim == 1 && out->shape[i] != 1 ? 0 : stride;
        stride *= (uint64_t)dim;
    }
}

/* ---- kernels and launches ---------------------------------------------------------------- */

clrun_status clrun__kernel(clrun_context *ctx, const char *name, cl_kernel *out)
{
    *out = NULL;
    return clrun_kernel_create(ctx, name, out);
}

clrun_status clrun__arg(clrun_context *ctx, cl_kernel kernel, cl_uint index, size_t size,
                        const void *value)
{
    cl_int err = clrun__cl.SetKernelArg(kernel, index, size, value);
    if (err == CL_SUCCESS)
        return CLRUN_OK;
    return clrun__fail_cl(ctx, err, "clSetKernelArg", "argument %u (%zu bytes)", index, size);
}

size_t clrun__round_up(size_t n, size_t multiple)
{
    return (n + multiple - 1) / multiple * multiple;
}

clrun_status clrun__local_size(clrun_context *ctx, cl_kernel kernel, size_t want, size_t *out)
{
    size_t limit = 0;
    cl_int err = clrun__cl.GetKernelWorkGroupInfo(kernel, ctx->device, CL_KERNEL_WORK_GROUP_SIZE,
                                                  sizeof limit, &limit, NULL);
    if (err != CL_SUCCESS)
        return clrun__fail_cl(ctx, err, "clGetKernelWorkGroupInfo", "CL_KERNEL_WORK_GROUP_SIZE");
    if (ctx->info.max_work_group && limit > ctx->info.max_work_group)
        limit = ctx->info.max_work_group;
    size_t n = 1;
    while (n * 2 <= want && n * 2 <= limit)
        n *= 2;
    *out = n;
    return CLRUN_OK;
}

clrun_status clrun__table_buffer(clrun_context *ctx, const void *values, size_t bytes,
                                 cl_mem *out)
{
    cl_int err = CL_SUCCESS;
    *out = clrun__cl.CreateBuffer(ctx->cl, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes,
                                  (void *)values, &err);
    if (*out == NULL)
        return clrun__fail_cl(ctx, err, "clCreateBuffer", "shape table of %zu bytes", bytes);
    return CLRUN_OK;
}

void clrun__chain_begin(clrun__chain *chain, clrun_context *ctx, cl_uint wait_count,
                        const cl_event *wait_list, cl_event *done)
{
    chain->ctx = ctx;
    chain->wait_count = wait_count;
    chain->wait_list = wait_count ? wait_list : NULL;
    chain->last = NULL;
    chain->need_events = ctx->out_of_order || done != NULL;
    chain->done = done;
    if (done)
        *done = NULL;
}

clrun_status clrun__chain_launch(clrun__chain *chain, cl_kernel kernel, cl_uint dims,
                                 const size_t *global, const size_t *local, const char *what)
{
    cl_uint wait_count = chain->wait_count;
    const cl_event *wait_list = chain->wait_list;
    if (chain->last) {
        /* An in-order queue orders the launches anyway; only an out-of-order one needs this. */
        wait_count = chain->ctx->out_of_order ? 1 : 0;
        wait_list = chain->ctx->out_of_order ? &chain->last : NULL;
    }
    cl_event event = NULL;
    cl_int err = clrun__cl.EnqueueNDRangeKernel(chain->ctx->queue, kernel, dims, NULL, global,
                                                local, wait_count, wait_list,
                                                chain->need_events ? &event : NULL);
    if (chain->last)
        clrun__cl.ReleaseEvent(chain->last);
    chain->last = err == CL_SUCCESS ? event : NULL;
    if (err != CL_SUCCESS) {
        if (event)
            clrun__cl.ReleaseEvent(event);
        return clrun__fail_cl(chain->ctx, err, "clEnqueueNDRangeKernel", "%s, global %zu x %zu",
                              what, global[0], dims > 1 ? global[1] : 1);
    }
    return CLRUN_OK;
}

clrun_status clrun__chain_end(clrun__chain *chain)
{
    if (chain->done == NULL) {
        if (chain->last)
            clrun__cl.ReleaseEvent(chain->last);
        chain->last = NULL;
        return CLRUN_OK;
    }
    if (chain->last == NULL) {
        /* Nothing was launched (an empty copy): a marker still stands for the node. */
        cl_int err = clrun__cl.EnqueueMarkerWithWaitList(chain->ctx->queue, chain->wait_count,
                                                         chain->wait_list, chain->done);
        if (err != CL_SUCCESS)
            return clrun__fail_cl(chain->ctx, err, "clEnqueueMarkerWithWaitList", "empty node");
        return CLRUN_OK;
    }
    *chain->done = chain->last;
    chain->last = NULL;
    return CLRUN_OK;
}

void clrun__chain_abort(clrun__chain *chain)
{
    if (chain->last)
        clrun__cl.ReleaseEvent(chain->last);
    chain->last = NULL;
}

clrun_status clrun__launch(clrun_context *ctx, cl_kernel kernel, cl_uint dims,
                           const size_t *global, const size_t *local, cl_uint wait_count,
                           const cl_event *wait_list, cl_event *done, const char *what)
{
    clrun__chain chain;
    clrun__chain_begin(&chain, ctx, wait_count, wait_list, done);
    clrun_status status = clrun__chain_launch(&chain, kernel, dims, global, local, what);
    if (status != CLRUN_OK)
        return status;
    return clrun__chain_end(&chain);
}

clrun_status clrun__buffer_args(clrun_context *ctx, cl_kernel kernel, const cl_mem *buffers,
                                cl_uint count, cl_mem output)
{
    clrun_status s = CLRUN_OK;
    for (cl_uint i = 0; s == CLRUN_OK && i < count; i++)
        s = clrun__arg(ctx, kernel, i, sizeof(cl_mem), &buffers[i]);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, kernel, count, sizeof(cl_mem), &output);
    return s;
}

void clrun__kernel_state_release(void *state)
{
    clrun__kernel_state *ks = state;
    if (ks == NULL)
        return;
    if (ks->kernel)
        clrun__cl.ReleaseKernel(ks->kernel);
    if (ks->table)
        clrun__cl.ReleaseMemObject(ks->table);
    free(state);
}

clrun_status clrun__kernel_state_done(void *st, clrun_status s, void **state)
{
    if (s != CLRUN_OK) {
        clrun__kernel_state_release(st);
        return s;
    }
    *state = st;
    return CLRUN_OK;
}

clrun_status clrun__kernel_state_enqueue(clrun_context *ctx, const clrun__kernel_state *ks,
                                         const cl_mem *buffers, cl_mem output, cl_uint wait_count,
                                         const cl_event *wait_list, cl_event *done)
{
    clrun_status s = clrun__buffer_args(ctx, ks->kernel, buffers, ks->inputs, output);
    if (s != CLRUN_OK)
        return s;
    return clrun__launch(ctx, ks->kernel, ks->dims, ks->global, ks->local, wait_count, wait_list,
                         done, ks->what);
}

clrun_status clrun__kernel_state_op_enqueue(clrun_context *ctx, void *state,
                                            const clrun__op_call *call, const cl_mem *inputs,
                                            const cl_mem *outputs, cl_uint wait_count,
                                            const cl_event *wait_list, cl_event *done)
{
    (void)call;
    return clrun__kernel_state_enqueue(ctx, state, inputs, outputs[0], wait_count, wait_list,
                                       done);
}
