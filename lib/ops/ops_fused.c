/* Kernels of fused nodes (ops/fused.h). A group of elementwise ops is the kernel that lib/fuse/
 * generated and built for the graph, which prepare finds in the context's table of generated
 * programs: one launch, inputs then the output as its buffer arguments. An epilogue group is its
 * base op (matmul, conv2d) prepared with the group as its epilogue and run by the base op's own
 * kernels, the group's extra inputs after the base's. */
#include <stdlib.h>
#include <string.h>

#include "device/cl.h"
#include "device/program.h"
#include "ops/fused.h"
#include "ops/ops_internal.h"

clrun_status clrun__fused_infer(const clrun__op_call *call, clrun_tensor_type *outputs, char *err,
                                size_t errlen)
{
    const clrun__infer_error e = {"fused", err, errlen};
    if (call->output_count < 1 || call->outputs == NULL)
        return clrun__refuse(&e, "a fused node is made by the fusion pass, with its output types");
    for (int o = 0; o < call->output_count; o++)
        outputs[o] = call->outputs[o];
    return CLRUN_OK;
}

/* What a fused node keeps: its generated kernel, or its base op's state. */
typedef struct fused_state {
    clrun__kernel_state ks;                /* a generated kernel (epilogue == NULL) */
    const clrun__epilogue_base *epilogue;
    const clrun__op_kernels *base;         /* the base op's kernels */
    void *base_state;
    clrun__op_call call;                   /* the base op's call */
    clrun_tensor_type types[CLRUN__EPILOGUE_BASE_INPUTS + 1];
} fused_state;

static void fused_release(void *state)
{
    fused_state *st = state;
    if (st == NULL)
        return;
    if (st->epilogue && st->base && st->base_state)
        st->base->release(st->base_state);
    if (st->ks.kernel)
        clrun__cl.ReleaseKernel(st->ks.kernel);
    free(st);
}

static size_t group_for(uint64_t n)
{
    size_t g = 1;
    while (g < 256 && g < n)
        g *= 2;
    return g;
}

static clrun_status prepare_generated(clrun_context *ctx, const clrun__fused_op *f, fused_state *st)
{
    if (f->source == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_UNSUPPORTED, "%s: no kernel was built for it", f->name);
    clrun__kernel_state *ks = &st->ks;
    ks->inputs = (cl_uint)f->input_count;
    ks->what = f->name;
    cl_program program = NULL;
    clrun_status s = clrun__program_generated_ex(ctx, "fused", f->source, f->source_length, 0, &program);
    if (s == CLRUN_OK) {
        cl_int err = CL_SUCCESS;
        ks->kernel = clrun__cl.CreateKernel(program, f->kernel, &err);
        clrun__program_generated_release(ctx, program); /* the kernel holds the program */
        if (ks->kernel == NULL)
            s = clrun__fail_cl(ctx, err, "clCreateKernel", "kernel '%s' of %s", f->kernel, f->name);
    }
    uint64_t n0 = f->launch.n[0];
    if (s == CLRUN_OK && f->launch.dims == 1) { /* the element count, after the buffers */
        cl_uint at = (cl_uint)(f->input_count + f->output_count);
        cl_uint n32 = (cl_uint)n0;
        cl_ulong n64 = n0;
        s = f->launch.wide ? clrun__arg(ctx, ks->kernel, at, sizeof n64, &n64)
                           : clrun__arg(ctx, ks->kernel, at, sizeof n32, &n32);
    }
    if (s == CLRUN_OK)
        s = clrun__local_size(ctx, ks->kernel, f->launch.dims == 1 ? 256 : group_for(n0), &ks->local[0]);
    if (s == CLRUN_OK) {
        ks->dims = f->launch.dims;
        if (ks->dims > 1)
            ks->local[0] = clrun__row_group(ks->local[0], n0);
        ks->global[0] = clrun__round_up((size_t)n0, ks->local[0]);
        for (unsigned d = 1; d < ks->dims; d++) {
            ks->global[d] = (size_t)f->launch.n[d];
            ks->local[d] = 1;
        }
    }
    return s;
}

static clrun_status prepare_epilogue(clrun_context *ctx, const clrun__fused_op *f,
                                     const clrun__op_call *call, fused_state *st)
{
    const clrun__epilogue_base *e = f->epilogue;
    clrun__prepare_epilogue_fn prepare = clrun__op_epilogue_prepare(e->op);
    st->base = clrun__op_kernels_find(e->op);
    if (prepare == NULL || st->base == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_UNSUPPORTED, "%s: %s takes no epilogue", f->name, e->op->name);
    memcpy(st->types, call->inputs, (size_t)e->input_count * sizeof *st->types);
    st->types[e->input_count] = call->outputs[0];
    uint64_t mask = (UINT64_C(1) << e->input_count) - 1;
    st->call = (clrun__op_call){st->types, e->input_count, st->types + e->input_count, 1, e->attrs,
                                e->attr_count, call->constant_inputs & mask};
    clrun__epilogue ep = {e->expression, e->helpers, e->extra_inputs, e->params, e->index};
    return prepare(ctx, e->op, &st->call, &ep, &st->base_state);
}

static clrun_status fused_prepare(clrun_context *ctx, const clrun__op *op, const clrun__op_call *call,
                                  void **state)
{
    *state = NULL;
    const clrun__fused_op *f = clrun__fused_of(op);
    if (f == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_UNSUPPORTED, "%s: not a fused op", op->name);
    fused_state *st = calloc(1, sizeof *st);
    if (st == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "%s: node state", op->name);
    st->epilogue = f->epilogue;
    clrun_status s = f->epilogue ? prepare_epilogue(ctx, f, call, st) : prepare_generated(ctx, f, st);
    if (s != CLRUN_OK) {
        fused_release(st);
        return s;
    }
    *state = st;
    return CLRUN_OK;
}

static clrun_status fused_enqueue(clrun_context *ctx, void *state, const clrun__op_call *call,
                                  const cl_mem *inputs, const cl_mem *outputs, cl_uint wait_count,
                                  const cl_event *wait_list, cl_event *done)
{
    fused_state *st = state;
    if (st->epilogue) /* inputs: the base op's, then the epilogue's extra ones */
        return st->base->enqueue(ctx, st->base_state, &st->call, inputs, outputs, wait_count,
                                 wait_list, done);
    /* the inputs, then every output */
    clrun_status s = CLRUN_OK;
    for (int k = 0; s == CLRUN_OK && k < call->input_count; k++)
        s = clrun__arg(ctx, st->ks.kernel, (cl_uint)k, sizeof inputs[k], &inputs[k]);
    for (int o = 0; s == CLRUN_OK && o < call->output_count; o++)
        s = clrun__arg(ctx, st->ks.kernel, (cl_uint)(call->input_count + o), sizeof outputs[o], &outputs[o]);
    if (s != CLRUN_OK)
        return s;
    return clrun__launch(ctx, st->ks.kernel, st->ks.dims, st->ks.global, st->ks.local, wait_count,
                         wait_list, done, st->ks.what);
}

/* An epilogue group runs as its base op, so the base's scratch and packed weights are the
 * node's: the base's inputs come first in the node's, so its masks and buffers line up. */
static int fused_scratch(const void *state, uint64_t bytes[CLRUN__SCRATCH_MAX])
{
    const fused_state *st = state;
    if (st->epilogue == NULL || st->base->scratch == NULL)
        return 0;
    return st->base->scratch(st->base_state, bytes);
}

static uint64_t fused_packed_bytes(const void *state, uint64_t *replaces)
{
    const fused_state *st = state;
    *replaces = 0;
    if (st->epilogue == NULL || st->base->packed_bytes == NULL)
        return 0;
    return st->base->packed_bytes(st->base_state, replaces);
}

static clrun_status fused_pack(clrun_context *ctx, void *state, const void *const *inputs, void *host,
                               cl_mem packed)
{
    fused_state *st = state;
    if (st->epilogue == NULL || st->base->pack == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT, "a fused node without packed weights was asked to pack");
    return st->base->pack(ctx, st->base_state, inputs, host, packed);
}

const clrun__op_kernels clrun__fused_kernels = {
    .prepare = fused_prepare,
    .enqueue = fused_enqueue,
    .release = fused_release,
    .scratch = fused_scratch,
    .packed_bytes = fused_packed_bytes,
    .pack = fused_pack,
};
