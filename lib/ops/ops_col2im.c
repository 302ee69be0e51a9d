/* Kernels of col2im (kernels/col2im.cl): one work-item per output row, which zeroes the row and
 * adds in the columns of every tap that lands on it, (kh, kw) ascending. No atomics: each output
 * is one sum in a fixed order. The geometry is the type rule's (lib/graph/infer_conv.c). */
#include <stdlib.h>
#include <string.h>

#include "device/cl.h"
#include "ops/ops_internal.h"

/* Work-groups of up to 16 rows of one plane, as the pools' gradients use. */
#define ROWS_PER_GROUP 16
/* kernels/col2im.cl's COL2IM_PRIVATE: the most floats of a row clrun_col2im_phases_f32 sums in
 * private memory. */
#define PHASES_PRIVATE 1024

int clrun__col2im_phases = 1;

static clrun_status col2im_prepare(clrun_context *ctx, const clrun__op *op,
                                   const clrun__op_call *call, void **state)
{
    (void)op;
    *state = NULL;
    clrun__col2im_geometry g;
    const clrun__infer_error quiet = {"col2im", NULL, 0};
    if (clrun__col2im_geometry_of(call, &g, &quiet) != CLRUN_OK)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_GRAPH, "col2im: prepare on types infer refuses");
    const cl_int rows = (cl_int)(g.channels * g.kernel[0] * g.kernel[1]);
    const cl_int windows = (cl_int)(g.oh * g.ow);
    /* C, H, W, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw, ck_stride, l_stride: arguments 2.. */
    const cl_int args[15] = {
        (cl_int)g.channels, (cl_int)g.image[0], (cl_int)g.image[1],
        (cl_int)g.kernel[0], (cl_int)g.kernel[1], (cl_int)g.oh, (cl_int)g.ow,
        (cl_int)g.stride[0], (cl_int)g.stride[1], (cl_int)g.pad[0], (cl_int)g.pad[1],
        (cl_int)g.dilation[0], (cl_int)g.dilation[1],
        g.transposed ? 1 : windows, g.transposed ? rows : 1,
    };
    clrun__kernel_state *st = calloc(1, sizeof *st);
    if (st == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "col2im: node state");
    st->inputs = 1;
    st->what = "col2im";
    /* on a CPU the row is summed in private memory (see the kernel), a private array a GPU
     * would keep in slow memory */
    int64_t W = g.image[1], sw = g.stride[1];
    bool phases = (clrun__col2im_phases > 1 || (clrun__col2im_phases == 1 && strcmp(ctx->info.type, "CPU") == 0)) &&
                  sw * ((W + sw - 1) / sw) <= PHASES_PRIVATE;
    clrun_status s = clrun__kernel(ctx, phases ? "clrun_col2im_phases_f32" : "clrun_col2im_f32", &st->kernel);
    for (cl_uint i = 0; s == CLRUN_OK && i < 15; i++)
        s = clrun__arg(ctx, st->kernel, 2 + i, sizeof args[i], &args[i]);
    const size_t H = (size_t)g.image[0];
    if (s == CLRUN_OK)
        s = clrun__local_size(ctx, st->kernel, H < ROWS_PER_GROUP ? H : ROWS_PER_GROUP, &st->local[0]);
    st->dims = 2;
    st->local[1] = 1;
    st->global[0] = clrun__round_up(H, st->local[0]);
    st->global[1] = (size_t)(call->inputs[0].shape[0] * g.channels);
    return clrun__kernel_state_done(st, s, state);
}

static const clrun__op_kernels col2im_kernels = {
    .prepare = col2im_prepare,
    .enqueue = clrun__kernel_state_op_enqueue,
    .release = clrun__kernel_state_release,
};

const clrun__named_kernels clrun__kernels_col2im[] = {
    {"col2im", &col2im_kernels},
    {NULL, NULL},
};
