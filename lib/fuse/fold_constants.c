/* Constant folding at load: a node whose inputs are all constants is run once, here, with the
 * op's own kernels on the executor's device, and its outputs become constants holding what it
 * computed. The device computes them, not the host, so they are the bits the node would have
 * given at every run. Nodes are visited in graph order, so what one fold makes feeds the next.
 *
 * Left alone: views (reshape, which costs nothing at run time and would make a copy of its
 * constant), fused nodes, and nodes whose outputs outgrow their inputs: a constant stays
 * resident for the executor's life, an intermediate only while it is needed. A fold may add
 * half its inputs' bytes, at least FOLD_SMALL and at most FOLD_GROWTH: an expand of a scalar to
 * a large tensor is cheaper to recompute, and a narrow weight (int8 or f16, dequantized or cast
 * to f32 before its product) stays resident at its own width, widened at each run (before a
 * matmul or conv2d, by that product's kernels: fold_dequant.c). */
#include "fuse/fold.h"

#include <clrun/context.h>

#include <stdlib.h>
#include <string.h>

#include "device/cl.h"
#include "device/context.h"
#include "ops/ops.h"

#define FOLD_GROWTH ((uint64_t)1 << 20)
#define FOLD_SMALL ((uint64_t)64 << 10)

static bool foldable(const clrun_graph *d, const clrun__node *node)
{
    if (node->op == NULL || node->guarded || node->op->kind == CLRUN__OP_FUSED ||
        strcmp(node->op->name, "reshape") == 0 || strncmp(node->op->name, "loop_", 5) == 0 ||
        strncmp(node->op->name, "scan_", 5) == 0)
        return false; /* a guarded node runs only when its guard says so: never at creation; a
                         loop op's output is a buffer the executor writes between iterations,
                         and so is a scan op's (scan_put writes into scan_stack's every run) */
    if (node->input_count == 0 || clrun__op_kernels_find(node->op) == NULL)
        return false;
    /* a product over a narrow weight reads it only from the copy an executor packs */
    if ((strcmp(node->op->name, "matmul") == 0 || strcmp(node->op->name, "conv2d") == 0) &&
        node->input_count >= 2 && d->tensors[node->inputs[1]].type.dtype != CLRUN_F32)
        return false;
    uint64_t in = 0, out = 0;
    for (int k = 0; k < node->input_count; k++) {
        const clrun__tensor *t = &d->tensors[node->inputs[k]];
        if (t->kind != CLRUN__TENSOR_CONSTANT)
            return false;
        in += clrun_tensor_bytes(&t->type);
    }
    for (int o = 0; o < node->output_count; o++)
        out += clrun_tensor_bytes(&d->tensors[node->outputs[o]].type);
    uint64_t room = in / 2 < FOLD_SMALL ? FOLD_SMALL : in / 2 > FOLD_GROWTH ? FOLD_GROWTH : in / 2;
    return out <= in + room;
}

typedef struct evaluation {
    cl_mem inputs[64];
    cl_mem outputs[16];
    clrun_tensor_type types[80];
    void *state;
    const clrun__op_kernels *kernels;
} evaluation;

static void evaluation_release(evaluation *ev, int inputs, int outputs)
{
    if (ev->kernels && ev->state)
        ev->kernels->release(ev->state);
    for (int k = 0; k < inputs; k++)
        if (ev->inputs[k])
            clrun__cl.ReleaseMemObject(ev->inputs[k]);
    for (int o = 0; o < outputs; o++)
        if (ev->outputs[o])
            clrun__cl.ReleaseMemObject(ev->outputs[o]);
}

static clrun_status device_buffer(clrun_context *ctx, uint64_t bytes, void *host, cl_mem *out)
{
    cl_int err = CL_SUCCESS;
    cl_mem_flags flags = host ? CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR : CL_MEM_READ_WRITE;
    *out = clrun__cl.CreateBuffer(ctx->cl, flags, (size_t)bytes, host, &err);
    if (*out == NULL)
        return clrun__fail_cl(ctx, err, "clCreateBuffer", "%llu bytes for constant folding",
                              (unsigned long long)bytes);
    return CLRUN_OK;
}

/* Runs node n once and makes its outputs constants (their values in arena memory). */
static clrun_status fold_node(clrun_context *ctx, clrun__arena *arena, clrun_graph *d, int32_t n)
{
    clrun__node *node = &d->nodes[n];
    if (node->input_count > 64 || node->output_count > 16)
        return CLRUN_OK; /* the executor refuses such a node with its own message */
    evaluation ev;
    memset(&ev, 0, sizeof ev);
    clrun__op_call call;
    clrun__node_call(d, node, ev.types, &call);
    ev.kernels = clrun__op_kernels_find(node->op);
    clrun_status s = CLRUN_OK;
    for (int k = 0; s == CLRUN_OK && k < node->input_count; k++) {
        const clrun__tensor *t = &d->tensors[node->inputs[k]];
        uint64_t bytes = clrun_tensor_bytes(&t->type);
        void *host = malloc((size_t)bytes);
        if (host == NULL)
            return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory folding '%s'", t->name);
        clrun__constant_values(t, host);
        s = device_buffer(ctx, bytes, host, &ev.inputs[k]);
        free(host);
    }
    for (int o = 0; s == CLRUN_OK && o < node->output_count; o++)
        s = device_buffer(ctx, clrun_tensor_bytes(&call.outputs[o]), NULL, &ev.outputs[o]);
    if (s == CLRUN_OK)
        s = ev.kernels->prepare(ctx, node->op, &call, &ev.state);
    cl_event done = NULL; /* the reads wait for it: the queue may run out of order */
    clrun__node_run run; /* the outputs, then the scratch the node's kernels ask for */
    if (s == CLRUN_OK)
        s = clrun__node_run_begin(ctx, ev.kernels, ev.state, ev.outputs, node->output_count, &run);
    bool running = s == CLRUN_OK;
    if (s == CLRUN_OK)
        s = ev.kernels->enqueue(ctx, ev.state, &call, ev.inputs, run.outputs, 0, NULL, &done);
    void *values[16] = {NULL};
    for (int o = 0; s == CLRUN_OK && o < node->output_count; o++) {
        uint64_t bytes = clrun_tensor_bytes(&call.outputs[o]);
        values[o] = clrun__arena_alloc(arena, (size_t)bytes);
        if (values[o] == NULL) {
            s = clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory folding a node");
            break;
        }
        cl_int err = clrun__cl.EnqueueReadBuffer(ctx->queue, ev.outputs[o], CL_TRUE, 0, (size_t)bytes,
                                                 values[o], 1, &done, NULL);
        if (err != CL_SUCCESS)
            s = clrun__fail_cl(ctx, err, "clEnqueueReadBuffer", "folding node '%s' (%s)",
                               d->tensors[node->outputs[o]].name, node->op->name);
    }
    if (s == CLRUN_OK && ev.kernels->check) /* an index outside its axis fails at load */
        s = ev.kernels->check(ctx, ev.state, d->tensors[node->outputs[0]].name);
    if (s != CLRUN_OK)
        clFinish(ctx->queue); /* not counted: cleanup must not be made to fail */
    if (running) /* the blocking reads (or the finish) saw the node's commands complete */
        clrun__node_run_end(ctx, &run);
    if (done)
        clrun__cl.ReleaseEvent(done);
    evaluation_release(&ev, node->input_count, node->output_count);
    if (s != CLRUN_OK)
        return s;
    for (int o = 0; o < node->output_count; o++) {
        clrun__tensor *t = &d->tensors[node->outputs[o]];
        t->kind = CLRUN__TENSOR_CONSTANT;
        t->data = values[o];
        t->fill = CLRUN_FILL_ZEROS;
        t->fill_a = t->fill_b = 0;
        t->seed = 0;
    }
    clrun__draft_remove_node(d, n);
    return CLRUN_OK;
}

clrun_status clrun__fold_constants(clrun_context *ctx, clrun__arena *arena, clrun_graph *draft,
                                   int32_t *folded)
{
    *folded = 0;
    for (int32_t n = 0; n < draft->node_count; n++) {
        if (!foldable(draft, &draft->nodes[n]))
            continue;
        clrun_status s = fold_node(ctx, arena, draft, n);
        if (s != CLRUN_OK)
            return s;
        (*folded)++;
    }
    return CLRUN_OK;
}
