/* Running one node outside an executor (the op tests, bench_kernels): what an executor gives a
 * node beside its tensors (lib/ops/ops.h), made here with plain driver buffers. After prepare
 * and once the inputs hold their values, node_memory_make packs the constant inputs as an
 * executor does when it is created (on the host, from the values they have then: so a constant
 * B is packed once) and makes the node's scratch (clrun__node_run); node_memory_outputs gives
 * enqueue's outputs: the node's outputs, then its scratch. */
#ifndef CLRUN_TESTS_NODE_MEMORY_H
#define CLRUN_TESTS_NODE_MEMORY_H

#include <stdlib.h>
#include <string.h>

#include <clrun/clrun.h>

#include "ops/ops.h"

typedef struct node_memory {
    cl_mem packed;        /* the node's packed constants, or NULL */
    clrun__node_run run;  /* its outputs, then its scratch (counted by the pool) */
} node_memory;

/* CL_SUCCESS, or the first error (CL_INVALID_OPERATION when pack or the scratch fails). */
static inline cl_int node_memory_make(clrun_context *ctx, const clrun__op_kernels *kernels,
                                      void *state, const clrun__op_call *call,
                                      const cl_mem *inputs, const cl_mem *outputs, node_memory *m)
{
    memset(m, 0, sizeof *m);
    cl_int err = CL_SUCCESS;
    uint64_t replaces = 0;
    uint64_t packed = kernels->packed_bytes ? kernels->packed_bytes(state, &replaces) : 0;
    if (packed) {
        /* The values of the inputs it packs, read back, as an executor has them on the host. */
        void *values[64] = {0};
        void *host = malloc((size_t)packed);
        for (int i = 0; err == CL_SUCCESS && i < call->input_count && i < 64; i++) {
            if (!((replaces >> i) & 1))
                continue;
            size_t bytes = (size_t)clrun_tensor_bytes(&call->inputs[i]);
            values[i] = malloc(bytes);
            err = values[i] ? clEnqueueReadBuffer(clrun_context_queue(ctx), inputs[i], CL_TRUE, 0,
                                                  bytes, values[i], 0, NULL, NULL)
                            : CL_OUT_OF_HOST_MEMORY;
        }
        if (err == CL_SUCCESS)
            m->packed = clCreateBuffer(clrun_context_cl(ctx), CL_MEM_READ_WRITE, (size_t)packed,
                                       NULL, &err);
        if (err == CL_SUCCESS && kernels->pack(ctx, state, (const void *const *)values, host,
                                               m->packed) != CLRUN_OK)
            err = CL_INVALID_OPERATION;
        if (err == CL_SUCCESS)
            err = clEnqueueWriteBuffer(clrun_context_queue(ctx), m->packed, CL_TRUE, 0,
                                       (size_t)packed, host, 0, NULL, NULL);
        for (int i = 0; i < 64; i++)
            free(values[i]);
        free(host);
        if (err != CL_SUCCESS)
            return err;
    }
    if (clrun__node_run_begin(ctx, kernels, state, outputs, call->output_count, &m->run) != CLRUN_OK)
        return CL_INVALID_OPERATION;
    return CL_SUCCESS;
}

/* enqueue's outputs: the node's, then its scratch. */
static inline const cl_mem *node_memory_outputs(const node_memory *m)
{
    return m->run.outputs;
}

/* After the node's state is released and its commands are complete. */
static inline void node_memory_free(clrun_context *ctx, node_memory *m)
{
    if (m->packed)
        clReleaseMemObject(m->packed);
    clrun__node_run_end(ctx, &m->run);
    memset(m, 0, sizeof *m);
}

#endif
