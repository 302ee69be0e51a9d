/* Row ops (kernels/norm.cl): softmax, logsoftmax, layernorm, instancenorm, batchnorm,
 * softmax_xent and its gradient; the reductions (kernels/reduce.cl, which the global pools in
 * ops_conv.c share);
 * argmax and argmin. Rows that are
 * contiguous run one work-item per row with vector loads on devices without real local memory
 * (CPUs), one work-group per row elsewhere; rows along an inner axis run one work-item each. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/cl.h"
#include "ops/matmul_core.h"

/* Work-group size limit the kernels' local arrays are sized for (MAX_GROUP in norm.cl and
 * reduce.cl). */
#define MAX_GROUP 256
/* The work-group of clrun_reduce_rows_sum_f32 (clrun__reduce_prepare): row_begin's largest. */
#define REDUCE_ROWS_GROUP 16

/* Program `source` ("norm", or "reduce": kernels/reduce.cl) for ctx's device (VW its vector
 * width), and whether rows take one work-item (CPUs) rather than one work-group. */
static clrun_status norm_program(clrun_context *ctx, const char *source, cl_program *program, bool *per_item)
{
    clrun__core_device dev;
    clrun_status s = clrun__core_device_of(ctx, &dev);
    if (s == CLRUN_OK)
        s = clrun__ops_program(ctx, source, dev.vw, NULL, program);
    *per_item = dev.registers;
    return s;
}

/* A node state with kernel `name` of the norm program (the reduce program's for a reduction).
 * One dimension: `items` work-items in groups of up to 16 (per_item), or `rows` work-groups of
 * a power-of-two size that the row's `length` fills (a group per row). */
static clrun_status row_begin(clrun_context *ctx, const char *name, int inputs, uint64_t rows,
                              uint64_t length, bool per_item, clrun__kernel_state **out)
{
    *out = NULL;
    cl_program program = NULL;
    bool cpu = false;
    bool reduction = strncmp(name, "clrun_reduce_", strlen("clrun_reduce_")) == 0;
    clrun_status s = norm_program(ctx, reduction ? "reduce" : "norm", &program, &cpu);
    if (s != CLRUN_OK)
        return s;
    clrun__kernel_state *st = calloc(1, sizeof *st);
    if (st == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "%s: node state", name);
    st->inputs = (cl_uint)inputs;
    st->dims = 1;
    st->what = name;
    s = clrun__program_kernel(ctx, program, name, 0, &st->kernel);
    if (s == CLRUN_OK && per_item) {
        size_t local = 1;
        while (local < 16 && rows % (local * 2) == 0)
            local *= 2;
        st->local[0] = local;
        st->global[0] = (size_t)rows;
    } else if (s == CLRUN_OK) {
        s = clrun__local_size(ctx, st->kernel, length < MAX_GROUP ? (size_t)length : MAX_GROUP,
                              &st->local[0]);
        st->global[0] = (size_t)rows * st->local[0];
    }
    if (s != CLRUN_OK) {
        clrun__kernel_state_release(st);
        return s;
    }
    *out = st;
    return CLRUN_OK;
}

/* Sets the arguments after the buffers, in order, from (size, value) pairs. */
static clrun_status row_args(clrun_context *ctx, clrun__kernel_state *st, int count, ...)
{
    va_list ap;
    va_start(ap, count);
    clrun_status s = CLRUN_OK;
    for (int i = 0; i < count && s == CLRUN_OK; i++) {
        size_t size = va_arg(ap, size_t);
        const void *value = va_arg(ap, const void *);
        s = clrun__arg(ctx, st->kernel, st->inputs + 1 + (cl_uint)i, size, value);
    }
    va_end(ap);
    return s;
}

/* Whether this device runs rows one per work-item. */
static clrun_status rows_per_item(clrun_context *ctx, bool *per_item)
{
    clrun__core_device dev;
    clrun_status s = clrun__core_device_of(ctx, &dev);
    *per_item = dev.registers;
    return s;
}

/* [outer, D, inner] of x around `axis`. */
static void around_axis(const clrun_tensor_type *x, int axis, uint64_t *outer, uint64_t *D,
                        uint64_t *inner)
{
    *outer = clrun__dims_product(x, 0, axis);
    *D = (uint64_t)x->shape[axis];
    *inner = clrun__dims_product(x, axis + 1, x->rank);
}

/* ---- softmax, logsoftmax ----------------------------------------------------------------- */

static clrun_status softmax_prepare(clrun_context *ctx, const clrun__op *op,
                                    const clrun__op_call *call, void **state)
{
    const clrun_tensor_type *x = &call->inputs[0];
    int axis = x->rank - 1;
    const clrun__infer_error quiet = {op->name, NULL, 0};
    if (clrun__op_axis(call, -1, &axis, &quiet) != CLRUN_OK)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_GRAPH, "%s: prepare on an axis infer refuses", op->name);
    uint64_t outer, D, inner;
    around_axis(x, axis, &outer, &D, &inner);
    cl_int log_form = op->code == 1;
    cl_ulong n = D;
    clrun__kernel_state *st;
    bool per_item = false;
    clrun_status s = rows_per_item(ctx, &per_item);
    if (s == CLRUN_OK && inner > 1) {
        cl_ulong in = inner;
        s = row_begin(ctx, "clrun_softmax_strided", 1, outer * inner, D, true, &st);
        if (s == CLRUN_OK)
            s = row_args(ctx, st, 3, sizeof n, &n, sizeof in, &in, sizeof log_form, &log_form);
        else
            return s;
        return clrun__kernel_state_done(st, s, state);
    }
    if (s != CLRUN_OK)
        return s;
    cl_ulong M = x->rank >= 2 ? (cl_ulong)x->shape[x->rank - 2] : 1;
    cl_int causal = (cl_int)clrun__attr_int_or(call, "causal", 0);
    s = row_begin(ctx, per_item ? "clrun_softmax_rows" : "clrun_softmax_f32", 1, outer, D,
                  per_item, &st);
    if (s != CLRUN_OK)
        return s;
    s = row_args(ctx, st, 4, sizeof n, &n, sizeof M, &M, sizeof causal, &causal, sizeof log_form,
                 &log_form);
    return clrun__kernel_state_done(st, s, state);
}

/* ---- softmax_xent, softmax_xent_grad ----------------------------------------------------- */

/* bad[0] while no label was outside its row's classes; the kernels lower it to the first bad
 * row, clrun_bad_label_* then copies that row's label into bad[2] (low word) and bad[3]. */
#define NO_BAD_LABEL 0xffffffffu

typedef struct xent_state {
    clrun__kernel_state ks; /* the rows: logits, labels (, dloss), then the output */
    cl_kernel record;       /* clrun_bad_label_*, one work-item after it */
    cl_mem bad;             /* 4 cl_uints: the first bad row, 0, its label's low and high words */
    clrun_tensor_type labels;
    uint64_t classes;
    bool has_ignore;
    int64_t ignore;
} xent_state;

static void xent_release(void *state)
{
    xent_state *st = state;
    if (st == NULL)
        return;
    if (st->record)
        clrun__cl.ReleaseKernel(st->record);
    if (st->bad)
        clrun__cl.ReleaseMemObject(st->bad);
    clrun__kernel_state_release(state);
}

/* The work-group size of the group-per-row kernels: the same for softmax_xent and its gradient
 * (the largest both allow, up to MAX_GROUP and the row's length), so that their sums combine in
 * the same tree and the two agree. */
static clrun_status xent_group_size(clrun_context *ctx, cl_program program, const char *labels,
                                    uint64_t C, size_t *out)
{
    *out = MAX_GROUP;
    clrun_status s = CLRUN_OK;
    for (int grad = 0; grad < 2 && s == CLRUN_OK; grad++) {
        char name[64];
        snprintf(name, sizeof name, "clrun_softmax_xent%s_f32_%s", grad ? "_grad" : "", labels);
        cl_kernel kernel = NULL;
        size_t local = 1;
        s = clrun__program_kernel(ctx, program, name, 0, &kernel);
        if (s == CLRUN_OK)
            s = clrun__local_size(ctx, kernel, C < MAX_GROUP ? (size_t)C : MAX_GROUP, &local);
        if (kernel)
            clrun__cl.ReleaseKernel(kernel);
        if (local < *out)
            *out = local;
    }
    return s;
}

/* op->code: 0 the loss, 1 the gradient. */
static clrun_status xent_prepare(clrun_context *ctx, const clrun__op *op,
                                 const clrun__op_call *call, void **state)
{
    const clrun_tensor_type *logits = &call->inputs[0], *labels = &call->inputs[1];
    bool grad = op->code == 1, per_item = false;
    const char *suffix = labels->dtype == CLRUN_I64 ? "i64" : "i32";
    cl_program program = NULL;
    clrun_status s = norm_program(ctx, "norm", &program, &per_item);
    if (s != CLRUN_OK)
        return s;
    xent_state *st = calloc(1, sizeof *st);
    if (st == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "%s: node state", op->name);
    st->ks.inputs = grad ? 3 : 2;
    st->ks.dims = 1;
    st->ks.what = op->name;
    st->labels = *labels;
    st->classes = (uint64_t)logits->shape[logits->rank - 1];
    st->has_ignore = clrun__attr_int(call, "ignore_index", &st->ignore);
    cl_ulong C = st->classes, rows = clrun_tensor_elements(labels);
    char name[64];
    snprintf(name, sizeof name, "clrun_softmax_xent%s_%s_%s", grad ? "_grad" : "",
             per_item ? "rows" : "f32", suffix);
    s = clrun__program_kernel(ctx, program, name, 0, &st->ks.kernel);
    if (s == CLRUN_OK) {
        snprintf(name, sizeof name, "clrun_bad_label_%s", suffix);
        s = clrun__program_kernel(ctx, program, name, 0, &st->record);
    }
    if (s == CLRUN_OK) {
        const cl_uint none[4] = {NO_BAD_LABEL, 0, 0, 0};
        cl_int err = CL_SUCCESS;
        st->bad = clrun__cl.CreateBuffer(ctx->cl, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                                         sizeof none, (void *)none, &err);
        if (st->bad == NULL)
            s = clrun__fail_cl(ctx, err, "clCreateBuffer", "%s: the words for bad labels",
                               op->name);
    }
    if (s == CLRUN_OK && per_item) {
        size_t local = 1;
        while (local < 16 && rows % (local * 2) == 0)
            local *= 2;
        st->ks.local[0] = local;
        st->ks.global[0] = (size_t)rows;
    } else if (s == CLRUN_OK) {
        s = xent_group_size(ctx, program, suffix, C, &st->ks.local[0]);
        st->ks.global[0] = (size_t)rows * st->ks.local[0];
    }
    cl_int has_ignore = st->has_ignore;
    cl_long ignore = st->ignore;
    const cl_uint at = st->ks.inputs + 1;
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->ks.kernel, at, sizeof C, &C);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->ks.kernel, at + 1, sizeof has_ignore, &has_ignore);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->ks.kernel, at + 2, sizeof ignore, &ignore);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->ks.kernel, at + 3, sizeof st->bad, &st->bad);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->record, 1, sizeof st->bad, &st->bad);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->record, 2, sizeof rows, &rows);
    if (s != CLRUN_OK) {
        xent_release(st);
        return s;
    }
    *state = st;
    return CLRUN_OK;
}

static clrun_status xent_enqueue(clrun_context *ctx, void *state, const clrun__op_call *call,
                                 const cl_mem *inputs, const cl_mem *outputs, cl_uint wait_count,
                                 const cl_event *wait_list, cl_event *done)
{
    (void)call;
    xent_state *st = state;
    clrun_status s = clrun__buffer_args(ctx, st->ks.kernel, inputs, st->ks.inputs, outputs[0]);
    if (s == CLRUN_OK)
        s = clrun__buffer_arg(ctx, st->record, 0, inputs[1]);
    if (s != CLRUN_OK)
        return s;
    clrun__chain chain;
    clrun__chain_begin(&chain, ctx, wait_count, wait_list, done);
    s = clrun__chain_launch(&chain, st->ks.kernel, 1, st->ks.global, st->ks.local, st->ks.what);
    const size_t one = 1;
    if (s == CLRUN_OK)
        s = clrun__chain_launch(&chain, st->record, 1, &one, &one, "the first bad label");
    if (s != CLRUN_OK)
        return s;
    return clrun__chain_end(&chain);
}

/* "[1, 3]": the coordinates of element `at` of `type` into buf. */
static void coordinates(const clrun_tensor_type *type, uint64_t at, char *buf, size_t size)
{
    uint64_t c[CLRUN_MAX_DIMS];
    for (int d = type->rank - 1; d >= 0; d--) {
        c[d] = at % (uint64_t)type->shape[d];
        at /= (uint64_t)type->shape[d];
    }
    size_t used = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < type->rank && used < size; d++)
        used += (size_t)snprintf(buf + used, size - used, "%s%" PRIu64, d ? ", " : "", c[d]);
    if (used < size)
        snprintf(buf + used, size - used, "]");
}

static clrun_status xent_check(clrun_context *ctx, void *state, const char *node)
{
    xent_state *st = state;
    cl_uint bad[4] = {NO_BAD_LABEL, 0, 0, 0};
    cl_int err = clrun__cl.EnqueueReadBuffer(ctx->queue, st->bad, CL_TRUE, 0, sizeof bad, bad, 0,
                                             NULL, NULL);
    if (err != CL_SUCCESS)
        return clrun__fail_cl(ctx, err, "clEnqueueReadBuffer", "%s: the words for bad labels",
                              node);
    if (bad[0] == NO_BAD_LABEL)
        return CLRUN_OK;
    const cl_uint none[4] = {NO_BAD_LABEL, 0, 0, 0};
    err = clrun__cl.EnqueueWriteBuffer(ctx->queue, st->bad, CL_TRUE, 0, sizeof none, none, 0, NULL,
                                       NULL);
    if (err != CL_SUCCESS)
        return clrun__fail_cl(ctx, err, "clEnqueueWriteBuffer", "%s: the words for bad labels",
                              node);
    char type[CLRUN__TYPE_TEXT], where[160], ignore[64] = "";
    clrun__type_format(&st->labels, type, sizeof type);
    if (st->has_ignore)
        snprintf(ignore, sizeof ignore, ", or ignore_index %" PRId64, st->ignore);
    if (bad[0] == NO_BAD_LABEL - 1) /* a row beyond what the word holds */
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT,
                           "node '%s' (%s): a label at position >= %u of labels %s is outside the "
                           "%" PRIu64 " classes (valid: 0 to %" PRIu64 "%s); the run's outputs are "
                           "discarded", node, st->ks.what, (unsigned)bad[0], type, st->classes,
                           st->classes - 1, ignore);
    coordinates(&st->labels, bad[0], where, sizeof where);
    int64_t label = (int64_t)((uint64_t)bad[3] << 32 | bad[2]);
    return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT,
                       "node '%s' (%s): label %" PRId64 " at position %u %s of labels %s is "
                       "outside the %" PRIu64 " classes (valid: 0 to %" PRIu64 "%s); the run's "
                       "outputs are discarded", node, st->ks.what, label, (unsigned)bad[0], where,
                       type, st->classes, st->classes - 1, ignore);
}

/* ---- layernorm, instancenorm ------------------------------------------------------------- */

/* Rows of D normalised; gamma (and beta) per column, or per channel (per_row) for C channels. */
static clrun_status norm_rows_prepare(clrun_context *ctx, uint64_t rows, uint64_t D, float eps,
                                      bool per_row, uint64_t C, bool has_beta, void **state)
{
    bool per_item = false;
    clrun_status s = rows_per_item(ctx, &per_item);
    clrun__kernel_state *st = NULL;
    if (s == CLRUN_OK)
        s = row_begin(ctx, per_item ? "clrun_layernorm_rows" : "clrun_layernorm_f32", 3, rows, D,
                      per_item, &st);
    if (s != CLRUN_OK)
        return s;
    cl_ulong d = D, c = C;
    cl_int row_flag = per_row, beta_flag = has_beta;
    s = row_args(ctx, st, 5, sizeof d, &d, sizeof eps, &eps, sizeof row_flag, &row_flag,
                 sizeof c, &c, sizeof beta_flag, &beta_flag);
    return clrun__kernel_state_done(st, s, state);
}

/* x, gamma[, beta]: without beta, gamma stands in for the buffer the kernel does not read. */
static clrun_status norm_rows_enqueue(clrun_context *ctx, void *state, const clrun__op_call *call,
                                      const cl_mem *inputs, const cl_mem *outputs,
                                      cl_uint wait_count, const cl_event *wait_list, cl_event *done)
{
    const cl_mem buffers[3] = {inputs[0], inputs[1], call->input_count > 2 ? inputs[2] : inputs[1]};
    return clrun__kernel_state_enqueue(ctx, state, buffers, outputs[0], wait_count, wait_list,
                                       done);
}

static clrun_status layernorm_prepare(clrun_context *ctx, const clrun__op *op,
                                      const clrun__op_call *call, void **state)
{
    const clrun_tensor_type *x = &call->inputs[0];
    int axis = x->rank - 1;
    const clrun__infer_error quiet = {op->name, NULL, 0};
    if (clrun__op_axis(call, -1, &axis, &quiet) != CLRUN_OK)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_GRAPH, "layernorm: prepare on an axis infer refuses");
    uint64_t D = clrun__dims_product(x, axis, x->rank);
    float eps = (float)clrun__attr_float_or(call, "eps", 1e-5);
    return norm_rows_prepare(ctx, clrun_tensor_elements(x) / D, D, eps, false, 1,
                             call->input_count > 2, state);
}

static clrun_status instancenorm_prepare(clrun_context *ctx, const clrun__op *op,
                                         const clrun__op_call *call, void **state)
{
    (void)op;
    const clrun_tensor_type *x = &call->inputs[0];
    uint64_t D = clrun__dims_product(x, 2, x->rank);
    float eps = (float)clrun__attr_float_or(call, "eps", 1e-5);
    return norm_rows_prepare(ctx, clrun__dims_product(x, 0, 2), D, eps, true,
                             (uint64_t)x->shape[1], true, state);
}

/* ---- batchnorm --------------------------------------------------------------------------- */

/* Elements of a plane a work-item of clrun_batchnorm normalises on CPUs. */
#define BATCHNORM_BLOCK 4096

static clrun_status batchnorm_prepare(clrun_context *ctx, const clrun__op *op,
                                      const clrun__op_call *call, void **state)
{
    (void)op;
    const clrun_tensor_type *x = &call->inputs[0];
    cl_ulong C = (cl_ulong)x->shape[1], inner = clrun__dims_product(x, 2, x->rank);
    cl_float eps = (cl_float)clrun__attr_float_or(call, "eps", 1e-5);
    clrun__kernel_state *st;
    bool blocks = false;
    clrun_status s = rows_per_item(ctx, &blocks);
    if (s == CLRUN_OK)
        s = row_begin(ctx, "clrun_batchnorm", 5, 1, 1, true, &st);
    if (s != CLRUN_OK)
        return s;
    st->dims = 2;
    st->global[1] = (size_t)clrun__dims_product(x, 0, 2);
    if (blocks) { /* CPUs: blocks of BATCHNORM_BLOCK elements of a plane, a work-item each */
        st->local[0] = st->local[1] = 1;
        st->global[0] = (size_t)((inner + BATCHNORM_BLOCK - 1) / BATCHNORM_BLOCK);
    } else {
        s = clrun__local_size(ctx, st->kernel, inner < 64 ? (size_t)inner : 64, &st->local[0]);
        st->local[1] = 1;
        st->global[0] = clrun__round_up((size_t)inner, st->local[0]);
    }
    if (s == CLRUN_OK)
        s = row_args(ctx, st, 3, sizeof C, &C, sizeof inner, &inner, sizeof eps, &eps);
    return clrun__kernel_state_done(st, s, state);
}

/* ---- reductions -------------------------------------------------------------------------- */

/* Appends the dims of x with reduced[d] == which, merging neighbours that are contiguous, to
 * dims/strides; returns how many. */
static int box(const clrun_tensor_type *x, const bool *reduced, bool which, uint64_t *dims,
               uint64_t *strides)
{
    uint64_t stride[CLRUN_MAX_DIMS], s = 1;
    for (int d = x->rank - 1; d >= 0; d--) {
        stride[d] = s;
        s *= (uint64_t)x->shape[d];
    }
    int n = 0;
    for (int d = 0; d < x->rank; d++) {
        if (reduced[d] != which || x->shape[d] == 1)
            continue;
        if (n > 0 && strides[n - 1] == stride[d] * (uint64_t)x->shape[d]) {
            dims[n - 1] *= (uint64_t)x->shape[d];
            strides[n - 1] = stride[d];
            continue;
        }
        dims[n] = (uint64_t)x->shape[d];
        strides[n] = stride[d];
        n++;
    }
    return n;
}

/* The per-item kernel of reduction `code` (kernels/reduce.cl: one per way of combining). */
static const char *reduce_rows_kernel(int code)
{
    switch (code) {
    case CLRUN__REDUCE_MAX: return "clrun_reduce_rows_max_f32";
    case CLRUN__REDUCE_MIN: return "clrun_reduce_rows_min_f32";
    case CLRUN__REDUCE_PROD: return "clrun_reduce_rows_prod_f32";
    case CLRUN__REDUCE_L2:
    case CLRUN__REDUCE_SUM_SQUARE: return "clrun_reduce_rows_square_f32";
    default: return "clrun_reduce_rows_sum_f32"; /* sum, mean */
    }
}

clrun_status clrun__reduce_prepare(clrun_context *ctx, const clrun_tensor_type *x,
                                   const bool *reduced, int code, void **state)
{
    *state = NULL;
    uint64_t kd[CLRUN_MAX_DIMS], ks[CLRUN_MAX_DIMS], rd[CLRUN_MAX_DIMS], rs[CLRUN_MAX_DIMS];
    int kept = box(x, reduced, false, kd, ks), red = box(x, reduced, true, rd, rs);
    uint64_t count = 1, outputs = 1;
    for (int i = 0; i < red; i++)
        count *= rd[i];
    for (int i = 0; i < kept; i++)
        outputs *= kd[i];
    uint64_t meta[3 + 4 * CLRUN_MAX_DIMS];
    size_t n = 0;
    meta[n++] = (uint64_t)kept;
    meta[n++] = (uint64_t)red;
    meta[n++] = count;
    for (int i = 0; i < kept; i++) meta[n++] = kd[i];
    for (int i = 0; i < kept; i++) meta[n++] = ks[i];
    for (int i = 0; i < red; i++) meta[n++] = rd[i];
    for (int i = 0; i < red; i++) meta[n++] = rs[i];
    if (x->dtype == CLRUN_F64 && !ctx->info.fp64)
        return clrun__fail(ctx, CLRUN_ERROR_UNSUPPORTED,
                           "reduce: f64 needs cl_khr_fp64, which '%s' does not have", ctx->info.name);
    /* On CPUs an f32 reduction over one run (any stride) takes a work-item per output: a
     * work-group per output with a tree in local memory costs POCL a loop per barrier. */
    bool per_item = false;
    clrun_status s = rows_per_item(ctx, &per_item);
    if (s != CLRUN_OK)
        return s;
    per_item = per_item && x->dtype == CLRUN_F32 && red <= 1;
    const char *name = per_item                  ? reduce_rows_kernel(code)
                     : x->dtype == CLRUN_F64 ? "clrun_reduce_f64"
                                             : "clrun_reduce_f32";
    clrun__kernel_state *st;
    s = row_begin(ctx, name, 1, outputs, count, per_item, &st);
    if (s != CLRUN_OK)
        return s;
    if (per_item) {
        /* Groups of REDUCE_ROWS_GROUP whatever the count of outputs, the last group's items
         * past them idle: POCL compiles a kernel once per work-group size, and row_begin's
         * largest power of two dividing the count took MobileNetV3-small's squeeze-and-excite
         * pools (16, 96, 120 channels ...) to two sizes, 0.25 s of compile each on an empty
         * cache. The same work-item per output, so the same bits. */
        st->local[0] = REDUCE_ROWS_GROUP;
        st->global[0] = clrun__round_up((size_t)outputs, REDUCE_ROWS_GROUP);
    }
    s = clrun__table_buffer(ctx, meta, n * sizeof meta[0], &st->table);
    cl_int op = code;
    if (s == CLRUN_OK && per_item)
        s = row_args(ctx, st, 3, sizeof st->table, &st->table, sizeof op, &op, sizeof outputs, &outputs);
    else if (s == CLRUN_OK)
        s = row_args(ctx, st, 2, sizeof st->table, &st->table, sizeof op, &op);
    return clrun__kernel_state_done(st, s, state);
}

clrun_status clrun__reduce_enqueue(clrun_context *ctx, void *state, const clrun__op_call *call,
                                   const cl_mem *inputs, const cl_mem *outputs, cl_uint wait_count,
                                   const cl_event *wait_list, cl_event *done)
{
    return clrun__kernel_state_op_enqueue(ctx, state, call, inputs, outputs, wait_count, wait_list,
                                          done);
}

void clrun__reduce_release(void *state) { clrun__kernel_state_release(state); }

/* The reductions: op->code is the reduction (CLRUN__REDUCE_*). */
static clrun_status reduce_prepare(clrun_context *ctx, const clrun__op *op,
                                   const clrun__op_call *call, void **state)
{
    bool reduced[CLRUN_MAX_DIMS];
    const clrun__infer_error quiet = {"reduce", NULL, 0};
    if (clrun__reduced_axes(call, reduced, &quiet) != CLRUN_OK)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_GRAPH, "reduce: prepare on axes infer refuses");
    return clrun__reduce_prepare(ctx, &call->inputs[0], reduced, op->code, state);
}

/* ---- argmax, argmin ---------------------------------------------------------------------- */

static clrun_status arg_prepare(clrun_context *ctx, const clrun__op *op, const clrun__op_call *call,
                                void **state)
{
    const clrun_tensor_type *x = &call->inputs[0];
    int axis = 0;
    const clrun__infer_error quiet = {op->name, NULL, 0};
    if (clrun__op_axis(call, 0, &axis, &quiet) != CLRUN_OK)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_GRAPH, "%s: prepare on an axis infer refuses", op->name);
    uint64_t outer, D, inner;
    around_axis(x, axis, &outer, &D, &inner);
    clrun__kernel_state *st;
    clrun_status s = row_begin(ctx, "clrun_arg_extreme", 1, outer * inner, D, true, &st);
    if (s != CLRUN_OK)
        return s;
    cl_ulong d = D, in = inner;
    cl_int is_min = op->code == 1, last = (cl_int)clrun__attr_int_or(call, "select_last_index", 0);
    s = row_args(ctx, st, 4, sizeof d, &d, sizeof in, &in, sizeof is_min, &is_min, sizeof last,
                 &last);
    return clrun__kernel_state_done(st, s, state);
}

static const clrun__op_kernels softmax_kernels = {
    .prepare = softmax_prepare,
    .enqueue = clrun__kernel_state_op_enqueue,
    .release = clrun__kernel_state_release,
};
static const clrun__op_kernels xent_kernels = {
    .prepare = xent_prepare,
    .enqueue = xent_enqueue,
    .release = xent_release,
    .check = xent_check,
};
static const clrun__op_kernels layernorm_kernels = {
    .prepare = layernorm_prepare,
    .enqueue = norm_rows_enqueue,
    .release = clrun__kernel_state_release,
};
static const clrun__op_kernels instancenorm_kernels = {
    .prepare = instancenorm_prepare,
    .enqueue = norm_rows_enqueue,
    .release = clrun__kernel_state_release,
};
static const clrun__op_kernels batchnorm_kernels = {
    .prepare = batchnorm_prepare,
    .enqueue = clrun__kernel_state_op_enqueue,
    .release = clrun__kernel_state_release,
};
static const clrun__op_kernels reduce_kernels = {
    .prepare = reduce_prepare,
    .enqueue = clrun__kernel_state_op_enqueue,
    .release = clrun__kernel_state_release,
};
static const clrun__op_kernels arg_kernels = {
    .prepare = arg_prepare,
    .enqueue = clrun__kernel_state_op_enqueue,
    .release = clrun__kernel_state_release,
};

const clrun__named_kernels clrun__kernels_norm[] = {
    {"softmax", &softmax_kernels},        {"logsoftmax", &softmax_kernels},
    {"softmax_xent", &xent_kernels},      {"softmax_xent_grad", &xent_kernels},
    {"layernorm", &layernorm_kernels},    {"instancenorm", &instancenorm_kernels},
    {"batchnorm", &batchnorm_kernels},    {"reduce_sum", &reduce_kernels},
    {"reduce_mean", &reduce_kernels},     {"reduce_max", &reduce_kernels},
    {"reduce_min", &reduce_kernels},      {"reduce_prod", &reduce_kernels},
    {"reduce_l2", &reduce_kernels},       {"reduce_sum_square", &reduce_kernels},
    {"argmax", &arg_kernels},             {"argmin", &arg_kernels},
    {NULL, NULL},
};
