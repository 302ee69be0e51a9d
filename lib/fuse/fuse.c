/* The executor's rewrite: plan the groups, generate their kernels, build them (one program; on
 * failure group by group, and a group that still fails runs unfused), then replace each group by
 * its fused node in a draft of the graph. */
#include "fuse/fuse.h"

#include <stdlib.h>
#include <string.h>

#include "device/cl.h"
#include "device/context.h"
#include "device/program.h"
#include "fuse/codegen.h"
#include "fuse/epilogue.h"
#include "fuse/fold.h"
#include "fuse/group.h"

const char *clrun__fuse_test_poison;

/* XLA and tinygrad cap a fused kernel near 32-64 buffers; every argument is a buffer here. */
#define MAX_BUFFERS 32
#define MAX_STEPS 48

/* Buffers one kernel may take: MAX_BUFFERS, or fewer where CL_DEVICE_MAX_PARAMETER_SIZE says so
 * (a buffer argument is a device pointer, 8 bytes at most). */
static clrun_status buffer_limit(clrun_context *ctx, int *out)
{
    size_t bytes = 0;
    cl_int err = clrun__cl.GetDeviceInfo(ctx->device, CL_DEVICE_MAX_PARAMETER_SIZE, sizeof bytes,
                                         &bytes, NULL);
    if (err != CL_SUCCESS)
        return clrun__fail_cl(ctx, err, "clGetDeviceInfo", "CL_DEVICE_MAX_PARAMETER_SIZE");
    size_t fit = bytes / 8;
    *out = fit < MAX_BUFFERS ? (int)fit : MAX_BUFFERS;
    return CLRUN_OK;
}

/* Keeps a reference to a built program until the fusion is freed. */
static bool hold(clrun__fusion *f, cl_program program)
{
    cl_program *grown = clrun__arena_alloc(&f->arena, ((size_t)f->program_count + 1) * sizeof *grown);
    if (grown == NULL)
        return false;
    if (f->program_count)
        memcpy(grown, f->programs, (size_t)f->program_count * sizeof *grown);
    grown[f->program_count++] = program;
    f->programs = grown;
    return true;
}

/* Builds the program of ops[0..count); on success every op's source is it. */
static clrun_status build(clrun_context *ctx, clrun__fusion *f, clrun__fused_op **ops, int count,
                          cl_program *program)
{
    char *text = clrun__fuse_program(ops, count, ctx->info.fp64, clrun__fuse_test_poison);
    char *kept = text ? clrun__arena_strdup(&f->arena, text) : NULL;
    free(text);
    if (kept == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory generating fused kernels");
    size_t length = strlen(kept);
    clrun_status s = clrun__program_generated_ex(ctx, "fused", kept, length, CLRUN__PROGRAM_QUIET, program);
    if (s != CLRUN_OK)
        return s;
    if (!hold(f, *program)) {
        clrun__program_generated_release(ctx, *program);
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    for (int i = 0; i < count; i++) {
        ops[i]->source = kept;
        ops[i]->source_length = length;
    }
    return CLRUN_OK;
}

/* One program for every group; when it does not build, one per group, and groups whose own
 * program does not build either are left out (ops[g]->source stays NULL). */
static clrun_status build_all(clrun_context *ctx, clrun__fusion *f, clrun__fused_op **ops, int count)
{
    cl_program program;
    clrun_status s = build(ctx, f, ops, count, &program);
    if (s != CLRUN_ERROR_BUILD_FAILED && s != CLRUN_ERROR_OPENCL)
        return s;
    clrun__log(CLRUN_LOG_WARN, "the %d fused kernels of graph '%s' did not build as one program: "
               "building them one by one", count, f->graph->name ? f->graph->name : "");
    for (int i = 0; i < count; i++) {
        s = build(ctx, f, &ops[i], 1, &program);
        if (s == CLRUN_ERROR_BUILD_FAILED || s == CLRUN_ERROR_OPENCL) {
            clrun__log(CLRUN_LOG_WARN, "fused kernel %s (%s, %d nodes) did not build: its nodes run "
                       "unfused", ops[i]->kernel, ops[i]->name, ops[i]->step_count);
            continue;
        }
        if (s != CLRUN_OK)
            return s;
    }
    return CLRUN_OK;
}

/* Replaces group g's nodes in the draft by one node of its fused op. */
static bool replace_group(clrun__arena *arena, clrun_graph *draft, const clrun__fuse_plan *plan,
                          int32_t g, clrun__fused_op *op, const int32_t *inputs)
{
    int32_t first = plan->member_start[g], last = plan->member_start[g + 1] - 1;
    int32_t root = plan->members[last];
    int32_t output = draft->nodes[root].outputs[0];
    for (int32_t m = first; m < last; m++)
        clrun__draft_remove_node(draft, plan->members[m]);
    return clrun__draft_set_node(arena, draft, root, &op->op, inputs, op->input_count, output, NULL, 0);
}

static clrun_status fuse_groups(clrun_context *ctx, clrun__fusion *f, clrun_graph *draft)
{
    clrun__fuse_limits limits = {0, MAX_STEPS, ctx->info.fp64, NULL};
    clrun_status s = buffer_limit(ctx, &limits.max_buffers);
    if (s != CLRUN_OK || limits.max_buffers < 3)
        return s;
    clrun__fuse_plan plan;
    s = clrun__fuse_plan_groups(draft, &limits, &plan);
    if (s != CLRUN_OK)
        return clrun__fail(ctx, s, "out of host memory planning fused groups");
    int32_t count = plan.group_count;
    clrun__fused_op **ops = clrun__arena_alloc(&f->arena, ((size_t)count + 1) * sizeof *ops);
    int32_t **inputs = clrun__arena_alloc(&f->arena, ((size_t)count + 1) * sizeof *inputs);
    bool *taken = clrun__arena_alloc(&f->arena, (size_t)count + 1);
    f->groups = clrun__arena_alloc(&f->arena, ((size_t)count + (size_t)draft->node_count + 1) * sizeof *f->groups);
    s = ops && inputs && taken && f->groups ? CLRUN_OK : CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    if (s != CLRUN_OK) {
        clrun__fuse_plan_free(&plan);
        return clrun__fail(ctx, s, "out of host memory describing fused groups");
    }
    s = clrun__fuse_epilogues(ctx, &f->arena, draft, &plan, taken, f);
    int32_t built = 0; /* the groups left for generated kernels, in ops[0..built) */
    int32_t *group_of_op = clrun__arena_alloc(&f->arena, ((size_t)count + 1) * sizeof *group_of_op);
    if (s == CLRUN_OK && group_of_op == NULL)
        s = clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory describing fused groups");
    for (int32_t g = 0; s == CLRUN_OK && g < count; g++) {
        if (taken[g])
            continue;
        if ((ops[built] = clrun__fuse_describe(&f->arena, draft, &plan, g, &inputs[built])) == NULL)
            s = clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory describing fused groups");
        group_of_op[built++] = g;
    }
    if (s == CLRUN_OK && built > 0)
        s = build_all(ctx, f, ops, built);
    for (int32_t k = 0; s == CLRUN_OK && k < built; k++) {
        int32_t g = group_of_op[k];
        if (ops[k]->source == NULL)
            continue;
        int32_t output = draft->nodes[plan.members[plan.member_start[g + 1] - 1]].outputs[0];
        if (!replace_group(&f->arena, draft, &plan, g, ops[k], inputs[k])) {
            s = clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory rewriting the graph");
            break;
        }
        f->groups[f->group_count++] = (clrun_fused_group){ops[k]->name, draft->tensors[output].name,
                                                          ops[k]->step_count};
        f->fused_nodes += ops[k]->step_count;
    }
    clrun__fuse_plan_free(&plan);
    return s;
}

clrun_status clrun__fuse(clrun_context *ctx, const clrun_graph *graph, bool enabled,
                         clrun__fusion *out)
{
    memset(out, 0, sizeof *out);
    out->graph = graph;
    out->nodes_before = graph->node_count;
    if (!enabled)
        return CLRUN_OK;
    /* room for the folded weights and bias of every batch norm */
    clrun_graph *draft = clrun__draft_begin(&out->arena, graph, 2 * graph->node_count, 0);
    if (draft == NULL) {
        clrun__fusion_free(ctx, out);
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory rewriting graph '%s'",
                           graph->name ? graph->name : "");
    }
    int32_t bn_folded = 0;
    clrun_status s = clrun__fold_constants(ctx, &out->arena, draft, &out->folded_nodes);
    if (s == CLRUN_OK && clrun__fold_batchnorm(&out->arena, draft, &bn_folded) != CLRUN_OK)
        s = clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory folding batch norms");
    out->folded_nodes += bn_folded;
    if (s == CLRUN_OK)
        s = fuse_groups(ctx, out, draft);
    if (s == CLRUN_OK && (out->group_count > 0 || out->folded_nodes > 0)) {
        const clrun_graph *rewritten = clrun__draft_finish(&out->arena, draft);
        if (rewritten == NULL)
            s = clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory rewriting graph '%s'",
                            graph->name ? graph->name : "");
        out->graph = rewritten ? rewritten : graph;
    }
    if (s != CLRUN_OK)
        clrun__fusion_free(ctx, out);
    return s;
}

void clrun__fusion_free(clrun_context *ctx, clrun__fusion *f)
{
    for (int32_t i = 0; i < f->program_count; i++)
        clrun__program_generated_release(ctx, f->programs[i]);
    clrun__arena_free(&f->arena);
    memset(f, 0, sizeof *f);
}
