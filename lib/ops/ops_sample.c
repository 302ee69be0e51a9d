/* Kernels of the sampling ops (kernels/sample.cl): grid_sample and roi_align, one launch each,
 * one work-item per output element, f32 or (where the device has cl_khr_fp64) f64. roi_align
 * reads a batch index per box from the data: one outside the batch lowers a device word that
 * `check` reads after the run, so the executor reports the box instead of a read out of
 * bounds. */
#include <stdlib.h>

#include "device/cl.h"
#include "graph/op_geometry.h"
#include "ops/ops_data.h"
#include "ops/ops_index.h"
#include "ops/ops_internal.h"

/* One constant kernel argument: its index, size and value. */
typedef struct arg {
    cl_uint index;
    size_t size;
    const void *value;
} arg;

static clrun_status set_args(clrun_context *ctx, cl_kernel kernel, const arg *args, int count)
{
    clrun_status s = CLRUN_OK;
    for (int i = 0; i < count && s == CLRUN_OK; i++)
        s = clrun__arg(ctx, kernel, args[i].index, args[i].size, args[i].value);
    return s;
}

/* Refuses f64 on a device without doubles (the kernels are not built there). */
static clrun_status check_fp64(clrun_context *ctx, const clrun__op *op, clrun_dtype dtype)
{
    if (dtype == CLRUN_F64 && !ctx->info.fp64)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT,
                           "%s: f64 needs a device with cl_khr_fp64, and %s has none", op->name,
                           ctx->info.name);
    return CLRUN_OK;
}

/* ---- grid_sample ------------------------------------------------------------------------- */

static clrun_status grid_sample_prepare(clrun_context *ctx, const clrun__op *op,
                                        const clrun__op_call *call, void **state)
{
    const clrun_tensor_type *x = &call->inputs[0], *g = &call->inputs[1];
    clrun_status s = check_fp64(ctx, op, x->dtype);
    if (s != CLRUN_OK)
        return s;
    clrun__kernel_state *st = calloc(1, sizeof *st);
    if (st == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "%s: node state", op->name);
    st->inputs = 2;
    st->what = op->name;
    cl_ulong n = clrun_tensor_elements(&call->outputs[0]);
    cl_uint C = (cl_uint)x->shape[1], H = (cl_uint)x->shape[2], W = (cl_uint)x->shape[3];
    cl_uint HO = (cl_uint)g->shape[1], WO = (cl_uint)g->shape[2];
    cl_int mode = (cl_int)clrun__attr_int_or(call, "mode", 0);
    cl_int padding = (cl_int)clrun__attr_int_or(call, "padding_mode", 0);
    cl_int align = (cl_int)clrun__attr_int_or(call, "align_corners", 0);
    const arg args[] = {{3, sizeof n, &n},       {4, sizeof C, &C},         {5, sizeof H, &H},
                        {6, sizeof W, &W},       {7, sizeof HO, &HO},       {8, sizeof WO, &WO},
                        {9, sizeof mode, &mode}, {10, sizeof padding, &padding},
                        {11, sizeof align, &align}};
    s = clrun__kernel(ctx, x->dtype == CLRUN_F64 ? "clrun_grid_sample_f64" : "clrun_grid_sample_f32",
                      &st->kernel);
    if (s == CLRUN_OK)
        s = set_args(ctx, st->kernel, args, (int)(sizeof args / sizeof args[0]));
    if (s == CLRUN_OK)
        s = clrun__flat_launch(ctx, st, n);
    return clrun__kernel_state_done(st, s, state);
}

/* ---- roi_align --------------------------------------------------------------------------- */

#define NO_BAD_BOX CLRUN__NO_BAD_INDEX

/* The launch, and the device word the kernel lowers to the position of a box whose batch index
 * is outside [0, N) (NO_BAD_BOX while there is none). */
typedef struct roi_state {
    clrun__kernel_state ks; /* first: clrun__kernel_state_op_enqueue takes the state as one */
    cl_mem bad;
    int64_t batch;          /* N */
} roi_state;

static void roi_release(void *state)
{
    roi_state *st = state;
    if (st && st->bad)
        clrun__cl.ReleaseMemObject(st->bad);
    clrun__kernel_state_release(state);
}

static clrun_status roi_check(clrun_context *ctx, void *state, const char *node)
{
    roi_state *st = state;
    cl_uint bad;
    clrun_status s = clrun__bad_word_take(ctx, st->bad, node, "bad boxes", &bad);
    if (s != CLRUN_OK || bad == NO_BAD_BOX)
        return s;
    return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT,
                       "node '%s' (roi_align): the batch index of roi %s%u is outside the batch of "
                       "%lld (valid: 0 to %lld); the run's outputs are discarded",
                       node, bad == NO_BAD_BOX - 1 ? ">= " : "", (unsigned)bad,
                       (long long)st->batch, (long long)st->batch - 1);
}

static clrun_status roi_align_prepare(clrun_context *ctx, const clrun__op *op,
                                      const clrun__op_call *call, void **state)
{
    const clrun_tensor_type *x = &call->inputs[0], *y = &call->outputs[0];
    clrun_status s = check_fp64(ctx, op, x->dtype);
    if (s != CLRUN_OK)
        return s;
    roi_state *st = calloc(1, sizeof *st);
    if (st == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "%s: node state", op->name);
    st->ks.inputs = 3;
    st->ks.what = op->name;
    st->batch = x->shape[0];
    const cl_uint none = NO_BAD_BOX;
    cl_int err = CL_SUCCESS;
    st->bad = clrun__cl.CreateBuffer(ctx->cl, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof none,
                                     (void *)&none, &err);
    if (st->bad == NULL) {
        free(st);
        return clrun__fail_cl(ctx, err, "clCreateBuffer", "%s: the word for bad boxes", op->name);
    }
    cl_ulong n = clrun_tensor_elements(y);
    cl_uint N = (cl_uint)x->shape[0], C = (cl_uint)x->shape[1], H = (cl_uint)x->shape[2];
    cl_uint W = (cl_uint)x->shape[3], OH = (cl_uint)y->shape[2], OW = (cl_uint)y->shape[3];
    cl_int ratio = (cl_int)clrun__attr_int_or(call, "sampling_ratio", 0);
    cl_int half = (cl_int)clrun__attr_int_or(call, "half_pixel", 1);
    cl_int mode = (cl_int)clrun__attr_int_or(call, "mode", 0);
    cl_int most = CLRUN__ROI_MAX_SAMPLES;
    double scale = clrun__attr_float_or(call, "spatial_scale", 1.0);
    cl_float scale32 = (cl_float)scale;
    bool f64 = x->dtype == CLRUN_F64;
    const arg args[] = {{4, sizeof n, &n},           {5, sizeof N, &N},
                        {6, sizeof C, &C},           {7, sizeof H, &H},
                        {8, sizeof W, &W},           {9, sizeof OH, &OH},
                        {10, sizeof OW, &OW},        {11, sizeof ratio, &ratio},
                        {12, f64 ? sizeof scale : sizeof scale32, f64 ? (void *)&scale : (void *)&scale32},
                        {13, sizeof half, &half},    {14, sizeof mode, &mode},
                        {15, sizeof most, &most},    {16, sizeof st->bad, &st->bad}};
    s = clrun__kernel(ctx, f64 ? "clrun_roi_align_f64" : "clrun_roi_align_f32", &st->ks.kernel);
    if (s == CLRUN_OK)
        s = set_args(ctx, st->ks.kernel, args, (int)(sizeof args / sizeof args[0]));
    if (s == CLRUN_OK)
        s = clrun__flat_launch(ctx, &st->ks, n);
    if (s != CLRUN_OK) {
        roi_release(st);
        return s;
    }
    *state = st;
    return CLRUN_OK;
}

static const clrun__op_kernels grid_sample_kernels = {
    .prepare = grid_sample_prepare,
    .enqueue = clrun__kernel_state_op_enqueue,
    .release = clrun__kernel_state_release,
};
static const clrun__op_kernels roi_align_kernels = {
    .prepare = roi_align_prepare,
    .enqueue = clrun__kernel_state_op_enqueue,
    .release = roi_release,
    .check = roi_check,
};

const clrun__named_kernels clrun__kernels_sample[] = {
    {"grid_sample", &grid_sample_kernels},
    {"roi_align", &roi_align_kernels},
    {NULL, NULL},
};
