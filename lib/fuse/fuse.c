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
#include "fuse/siblings.h"

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

/* Builds the program of units[0..count); on success every unit's source is it. */
static clrun_status build(clrun_context *ctx, clrun__fusion *f, clrun__fuse_unit *units, int count,
                          cl_program *program)
{
    clrun__fused_op **ops = clrun__arena_alloc(&f->arena, ((size_t)count + 1) * sizeof *ops);
    if (ops == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory generating fused kernels");
    for (int i = 0; i < count; i++)
        ops[i] = units[i].op;
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

/* One program for every unit; when it does not build, one per unit, and units whose own
 * program does not build either are left out (their op's source stays NULL). */
static clrun_status build_all(clrun_context *ctx, clrun__fusion *f, clrun__fuse_unit *units, int count)
{
    cl_program program;
    clrun_status s = build(ctx, f, units, count, &program);
    if (s != CLRUN_ERROR_BUILD_FAILED && s != CLRUN_ERROR_OPENCL)
        return s;
    clrun__log(CLRUN_LOG_WARN, "the %d fused kernels of graph '%s' did not build as one program: "
               "building them one by one", count, f->graph->name ? f->graph->name : "");
    for (int i = 0; i < count; i++) {
        s = build(ctx, f, &units[i], 1, &program);
        if (s == CLRUN_ERROR_BUILD_FAILED || s == CLRUN_ERROR_OPENCL) {
            clrun__log(CLRUN_LOG_WARN, "fused kernel %s (%s) did not build: its nodes run unfused",
                       units[i].op->kernel, units[i].op->name);
            continue;
        }
        if (s != CLRUN_OK)
            return s;
    }
    return CLRUN_OK;
}

/* Replaces the nodes of a unit's groups in the draft by one node of its fused op, in the place
 * of the last root. */
static bool replace_unit(clrun__arena *arena, clrun_graph *draft, const clrun__fuse_plan *plan,
                         const clrun__fuse_unit *u)
{
    for (int k = 0; k < u->group_count; k++)
        for (int32_t m = plan->member_start[u->groups[k]]; m < plan->member_start[u->groups[k] + 1]; m++)
            if (plan->members[m] != u->root)
                clrun__draft_remove_node(draft, plan->members[m]);
    return clrun__draft_set_node_outputs(arena, draft, u->root, &u->op->op, u->inputs,
                                         u->op->input_count, u->outputs, u->op->output_count);
}

static int32_t unit_nodes(const clrun__fuse_plan *plan, const clrun__fuse_unit *u)
{
    int32_t n = 0;
    for (int k = 0; k < u->group_count; k++)
        n += plan->member_start[u->groups[k] + 1] - plan->member_start[u->groups[k]];
    return n;
}

/* The plan's groups (those no epilogue took) as units, then siblings merged. */
static clrun_status describe_units(clrun_context *ctx, clrun__fusion *f, const clrun_graph *draft,
                                   const clrun__fuse_plan *plan, const bool *taken, int max_buffers,
                                   clrun__fuse_unit *units, int *count)
{
    *count = 0;
    for (int32_t g = 0; g < plan->group_count; g++) {
        if (taken[g])
            continue;
        clrun__fuse_unit *u = &units[(*count)++];
        *u = (clrun__fuse_unit){.group_count = 1, .groups = {g}};
        u->root = plan->members[plan->member_start[g + 1] - 1];
        u->outputs[0] = draft->nodes[u->root].outputs[0];
        if ((u->op = clrun__fuse_describe(&f->arena, draft, plan, g, &u->inputs)) == NULL)
            return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory describing fused groups");
    }
    *count = clrun__fuse_merge_siblings(&f->arena, draft, units, *count, max_buffers);
    if (*count < 0)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory merging fused groups");
    return CLRUN_OK;
}

static clrun_status fuse_groups(clrun_context *ctx, clrun__fusion *f, clrun_graph *draft)
{
    clrun__fuse_limits limits = {.max_steps = MAX_STEPS, .fp64 = ctx->info.fp64, .layout = true};
    clrun_status s = buffer_limit(ctx, &limits.max_buffers);
    if (s != CLRUN_OK || limits.max_buffers < 3)
        return s;
    /* Guarded nodes (an If's branches) run or are skipped alone, and a guard's producer keeps its
     * place and its tensor: neither joins a group. */
    if (clrun__graph_has_guards(draft)) {
        bool *excluded = clrun__arena_alloc(&f->arena, (size_t)draft->node_count + 1);
        if (excluded == NULL)
            return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory planning fused groups");
        for (int32_t n = 0; n < draft->node_count; n++) {
            const clrun__node *node = &draft->nodes[n];
            if (node->op == NULL || !node->guarded)
                continue;
            excluded[n] = true;
            int32_t p = draft->tensors[node->guard].producer;
            if (p >= 0)
                excluded[p] = true;
        }
        limits.excluded = excluded;
    }
    clrun__fuse_plan plan;
    s = clrun__fuse_plan_groups(draft, &limits, &plan);
    if (s != CLRUN_OK)
        return clrun__fail(ctx, s, "out of host memory planning fused groups");
    int32_t count = plan.group_count;
    clrun__fuse_unit *units = clrun__arena_alloc(&f->arena, ((size_t)count + 1) * sizeof *units);
    bool *taken = clrun__arena_alloc(&f->arena, (size_t)count + 1);
    f->groups = clrun__arena_alloc(&f->arena, ((size_t)count + (size_t)draft->node_count + 1) * sizeof *f->groups);
    if (!units || !taken || !f->groups) {
        clrun__fuse_plan_free(&plan);
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory describing fused groups");
    }
    s = clrun__fuse_epilogues(ctx, &f->arena, draft, &plan, taken, f);
    int built = 0;
    if (s == CLRUN_OK)
        s = describe_units(ctx, f, draft, &plan, taken, limits.max_buffers, units, &built);
    if (s == CLRUN_OK && built > 0)
        s = build_all(ctx, f, units, built);
    for (int k = 0; s == CLRUN_OK && k < built; k++) {
        const clrun__fuse_unit *u = &units[k];
        if (u->op->source == NULL)
            continue;
        if (!replace_unit(&f->arena, draft, &plan, u)) {
            s = clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory rewriting the graph");
            break;
        }
        int32_t nodes = unit_nodes(&plan, u);
        f->groups[f->group_count++] = (clrun__fused_group){u->op->name, draft->tensors[u->outputs[0]].name, nodes};
        f->fused_nodes += nodes;
    }
    clrun__fuse_plan_free(&plan);
    return s;
}

clrun_status clrun__fuse(clrun_context *ctx, const clrun_graph *graph, bool fuse, bool fold,
                         clrun__fusion *out)
{
    memset(out, 0, sizeof *out);
    out->graph = graph;
    out->nodes_before = graph->node_count;
    if (!fuse && !fold)
        return CLRUN_OK;
    /* room for the folded weights and bias of every batch norm */
    clrun_graph *draft = clrun__draft_begin(&out->arena, graph, 2 * graph->node_count, 0);
    if (draft == NULL) {
        clrun__fusion_free(ctx, out);
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory rewriting graph '%s'",
                           graph->name ? graph->name : "");
    }
    clrun_status s = CLRUN_OK;
    int32_t dequantized = 0;
    if (fold && clrun__fold_dequantize(&out->arena, draft, &dequantized) != CLRUN_OK)
        s = clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory folding dequantized weights");
    if (s == CLRUN_OK && fold) {
        s = clrun__fold_constants(ctx, &out->arena, draft, &out->folded_nodes);
        out->folded_nodes += dequantized;
        if (s == CLRUN_OK && clrun__fold_batchnorm(&out->arena, draft, &out->folded_batchnorms) != CLRUN_OK)
            s = clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory folding batch norms");
        out->folded_nodes += out->folded_batchnorms;
    }
    if (s == CLRUN_OK && fuse)
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
