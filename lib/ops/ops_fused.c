/* Kernels of fused nodes (ops/fused.h): the group's kernel from the program lib/fuse/ generated
 * for the graph, which it has built already, so prepare finds it in the context's table of
 * generated programs. One launch per run, inputs then the output as its buffer arguments. */
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
    if (call->output_count != 1 || call->outputs == NULL)
        return clrun__refuse(&e, "a fused node is made by the fusion pass, with its output type");
    outputs[0] = call->outputs[0];
    return CLRUN_OK;
}

static size_t group_for(uint64_t n)
{
    size_t g = 1;
    while (g < 256 && g < n)
        g *= 2;
    return g;
}

static clrun_status fused_prepare(clrun_context *ctx, const clrun__op *op, const clrun__op_call *call,
                                  void **state)
{
    (void)call;
    *state = NULL;
    const clrun__fused_op *f = clrun__fused_of(op);
    if (f == NULL || f->source == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_UNSUPPORTED, "%s: not a fused op with a kernel", op->name);
    clrun__kernel_state *st = calloc(1, sizeof *st);
    if (st == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "%s: node state", op->name);
    st->inputs = (cl_uint)f->input_count;
    st->what = op->name;
    cl_program program = NULL;
    clrun_status s = clrun__program_generated_ex(ctx, "fused", f->source, f->source_length, 0, &program);
    if (s == CLRUN_OK) {
        cl_int err = CL_SUCCESS;
        st->kernel = clrun__cl.CreateKernel(program, f->kernel, &err);
        clrun__program_generated_release(ctx, program); /* the kernel holds the program */
        if (st->kernel == NULL)
            s = clrun__fail_cl(ctx, err, "clCreateKernel", "kernel '%s' of %s", f->kernel, op->name);
    }
    uint64_t n0 = f->launch.n[0];
    if (s == CLRUN_OK)
        s = clrun__local_size(ctx, st->kernel, f->launch.dims == 1 ? 256 : group_for(n0), &st->local[0]);
    if (s == CLRUN_OK) {
        st->dims = f->launch.dims;
        st->global[0] = clrun__round_up((size_t)n0, st->local[0]);
        for (unsigned d = 1; d < st->dims; d++) {
            st->global[d] = (size_t)f->launch.n[d];
            st->local[d] = 1;
        }
    }
    return clrun__kernel_state_done(st, s, state);
}

const clrun__op_kernels clrun__fused_kernels = {
    fused_prepare, clrun__kernel_state_op_enqueue, clrun__kernel_state_release,
};
