/* Generating fused kernels: see codegen.h. */
#include "fuse/codegen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ew_source.h"

/* ---- describing a group ------------------------------------------------------------------ */

static void name_group(clrun__fused_op *f)
{
    size_t used = (size_t)snprintf(f->name, sizeof f->name, "fused:");
    for (int s = 0; s < f->step_count; s++) {
        const char *op = f->steps[s].op->name;
        if (used + strlen(op) + 6 >= sizeof f->name) {
            snprintf(f->name + used, sizeof f->name - used, "+...");
            return;
        }
        used += (size_t)snprintf(f->name + used, sizeof f->name - used, "%s%s", s ? "+" : "", op);
    }
}

/* The output may take the buffer of an input of its byte size when every such input is read
 * only at the work-item's own element: when it has the output's element count (inputs of
 * fewer elements are read broadcast, at other elements). */
static bool alias_safe(const clrun_graph *g, const clrun__fused_op *f, const int32_t *inputs)
{
    const clrun_tensor_type *out = &f->steps[f->step_count - 1].type;
    uint64_t bytes = clrun_tensor_bytes(out), elements = clrun_tensor_elements(out);
    for (int i = 0; i < f->input_count; i++) {
        const clrun_tensor_type *t = &g->tensors[inputs[i]].type;
        if (clrun_tensor_bytes(t) == bytes && clrun_tensor_elements(t) != elements)
            return false;
    }
    return true;
}

/* The steps of members[0..count) into f, in order; a tensor from outside becomes one of f's
 * inputs from `first_extra` on (the ones before are an epilogue's base inputs, which its steps
 * cannot read), and tensor v (-1: none) the epilogue's value. */
static bool describe_steps(clrun__arena *arena, const clrun_graph *g, const int32_t *members,
                           int32_t count, int32_t v, int first_extra, clrun__fused_op *f,
                           int32_t *inputs)
{
    f->steps = clrun__arena_alloc(arena, (size_t)count * sizeof *f->steps);
    if (f->steps == NULL)
        return false;
    f->step_count = count;
    for (int32_t s = 0; s < count; s++) {
        const clrun__node *node = &g->nodes[members[s]];
        clrun__fused_step *step = &f->steps[s];
        step->op = node->op;
        step->def = clrun__ew_def_of(node->op);
        step->attrs = node->attrs;
        step->attr_count = node->attr_count;
        step->type = g->tensors[node->outputs[0]].type;
        step->node = members[s];
        for (int k = 0; k < node->input_count; k++) {
            int32_t t = node->inputs[k], p = g->tensors[t].producer;
            step->arg_types[k] = g->tensors[t].type;
            int earlier = -1;
            for (int32_t j = 0; p >= 0 && j < s; j++)
                if (members[j] == p)
                    earlier = j;
            if (earlier >= 0 || t == v) {
                step->args[k] = t == v ? CLRUN__FUSED_ARG_V : earlier;
                continue;
            }
            int at = first_extra;
            while (at < f->input_count && inputs[at] != t)
                at++;
            if (at == f->input_count)
                inputs[f->input_count++] = t;
            step->args[k] = -1 - at;
        }
    }
    return true;
}

clrun__fused_op *clrun__fuse_describe(clrun__arena *arena, const clrun_graph *g,
                                      const clrun__fuse_plan *plan, int32_t group,
                                      int32_t **inputs_out)
{
    int32_t first = plan->member_start[group], count = plan->member_start[group + 1] - first;
    clrun__fused_op *f = clrun__arena_alloc(arena, sizeof *f);
    int32_t *inputs = clrun__arena_alloc(arena, ((size_t)count * CLRUN__EW_MAX_INPUTS + 1) * sizeof *inputs);
    if (f == NULL || inputs == NULL || !describe_steps(arena, g, plan->members + first, count, -1, 0, f, inputs))
        return NULL;
    f->op = (clrun__op){.name = f->name, .min_inputs = f->input_count, .max_inputs = f->input_count,
                        .outputs = 1, .alias_safe = alias_safe(g, f, inputs), .kind = CLRUN__OP_FUSED,
                        .code = group, .infer = clrun__fused_infer};
    snprintf(f->kernel, sizeof f->kernel, "clrun_fused_%d", (int)group);
    name_group(f);
    *inputs_out = inputs;
    return f;
}

clrun__fused_op *clrun__fuse_describe_epilogue(clrun__arena *arena, const clrun_graph *g,
                                               int32_t base, const int32_t *members, int32_t count,
                                               int32_t **inputs_out)
{
    const clrun__node *b = &g->nodes[base];
    clrun__fused_op *f = clrun__arena_alloc(arena, sizeof *f);
    int32_t *inputs = clrun__arena_alloc(arena, ((size_t)count * CLRUN__EW_MAX_INPUTS + (size_t)b->input_count + 1) *
                                                    sizeof *inputs);
    clrun__epilogue_base *e = clrun__arena_alloc(arena, sizeof *e);
    if (f == NULL || inputs == NULL || e == NULL || b->input_count > CLRUN__EPILOGUE_BASE_INPUTS)
        return NULL;
    e->op = b->op;
    e->attrs = b->attrs;
    e->attr_count = b->attr_count;
    e->input_count = b->input_count;
    for (int k = 0; k < b->input_count; k++) {
        inputs[k] = b->inputs[k];
        e->types[k] = g->tensors[b->inputs[k]].type;
    }
    e->types[b->input_count] = g->tensors[b->outputs[0]].type;
    f->input_count = b->input_count;
    f->epilogue = e;
    if (!describe_steps(arena, g, members, count, b->outputs[0], b->input_count, f, inputs))
        return NULL;
    e->extra_inputs = f->input_count - b->input_count;
    f->op = (clrun__op){.name = f->name, .min_inputs = f->input_count, .max_inputs = f->input_count,
                        .outputs = 1, .alias_safe = false, .kind = CLRUN__OP_FUSED, .code = -1,
                        .infer = clrun__fused_infer};
    size_t used = (size_t)snprintf(f->name, sizeof f->name, "fused:%s", b->op->name);
    for (int s = 0; s < f->step_count && used + 8 < sizeof f->name; s++)
        used += (size_t)snprintf(f->name + used, sizeof f->name - used, "+%s", f->steps[s].op->name);
    *inputs_out = inputs;
    return f;
}

/* ---- geometry ---------------------------------------------------------------------------- */

/* A read: input `input` with its strides over the group's merged dimensions. */
typedef struct load {
    int input;
    clrun_dtype dtype;
    uint64_t strides[CLRUN_MAX_DIMS];
} load;

#define MAX_LOADS 128

typedef struct geometry {
    int rank;                           /* merged dimensions, outermost first */
    uint64_t dims[CLRUN_MAX_DIMS];
    uint64_t out_strides[CLRUN_MAX_DIMS];
    load loads[MAX_LOADS];
    int load_count;
    int (*arg_load)[CLRUN__EW_MAX_INPUTS]; /* per step and operand: its load, -1 for a step */
    bool wide;                          /* offsets need 64 bits */
} geometry;

/* The strides of `t` broadcast to `m`, over m's dimensions that are not 1. */
static int squeezed_strides(const clrun_tensor_type *t, const clrun_tensor_type *m, uint64_t *out)
{
    uint64_t full[CLRUN_MAX_DIMS];
    clrun__broadcast_strides(t, m, full);
    int r = 0;
    for (int d = 0; d < m->rank; d++)
        if (m->shape[d] != 1)
            out[r++] = full[d];
    return r;
}

static int find_load(geometry *g, int input, clrun_dtype dtype, const uint64_t *strides, int rank)
{
    for (int i = 0; i < g->load_count; i++)
        if (g->loads[i].input == input && memcmp(g->loads[i].strides, strides, (size_t)rank * sizeof *strides) == 0)
            return i;
    if (g->load_count == MAX_LOADS)
        return -1;
    load *l = &g->loads[g->load_count];
    l->input = input;
    l->dtype = dtype;
    memcpy(l->strides, strides, (size_t)rank * sizeof *strides);
    return g->load_count++;
}

/* Joins neighbouring dimensions that every read and the store walk as one. */
static void merge_dims(geometry *g)
{
    int r = 0;
    for (int d = 0; d < g->rank; d++) {
        bool joins = r > 0;
        uint64_t n = g->dims[d];
        joins = joins && g->out_strides[r - 1] == g->out_strides[d] * n;
        for (int i = 0; joins && i < g->load_count; i++)
            joins = g->loads[i].strides[r - 1] == g->loads[i].strides[d] * n;
        if (joins) {
            g->dims[r - 1] *= n;
            g->out_strides[r - 1] = g->out_strides[d];
            for (int i = 0; i < g->load_count; i++)
                g->loads[i].strides[r - 1] = g->loads[i].strides[d];
            continue;
        }
        g->dims[r] = n;
        g->out_strides[r] = g->out_strides[d];
        for (int i = 0; i < g->load_count; i++)
            g->loads[i].strides[r] = g->loads[i].strides[d];
        r++;
    }
    g->rank = r;
}

static bool build_geometry(const clrun__fused_op *f, geometry *g)
{
    const clrun_tensor_type *out = &f->steps[f->step_count - 1].type;
    g->rank = 0;
    g->load_count = 0;
    for (int d = 0; d < out->rank; d++)
        if (out->shape[d] != 1)
            g->dims[g->rank++] = (uint64_t)out->shape[d];
    uint64_t stride = 1;
    for (int d = g->rank - 1; d >= 0; d--) {
        g->out_strides[d] = stride;
        stride *= g->dims[d];
    }
    uint64_t limit = (uint64_t)1 << 31;
    g->wide = stride >= limit;
    for (int s = 0; s < f->step_count; s++) {
        const clrun__fused_step *step = &f->steps[s];
        for (int k = 0; k < step->def->arity; k++) {
            g->arg_load[s][k] = -1;
            if (step->args[k] >= 0 || step->args[k] == CLRUN__FUSED_ARG_V)
                continue;
            uint64_t strides[CLRUN_MAX_DIMS];
            if (squeezed_strides(&step->arg_types[k], &step->type, strides) != g->rank)
                return false; /* the planner's shape rule was broken */
            g->arg_load[s][k] = find_load(g, -1 - step->args[k], step->arg_types[k].dtype, strides, g->rank);
            if (g->arg_load[s][k] < 0)
                return false;
            g->wide = g->wide || clrun_tensor_elements(&step->arg_types[k]) >= limit;
        }
    }
    merge_dims(g);
    if (g->rank == 0) {
        g->rank = 1;
        g->dims[0] = 1;
        g->out_strides[0] = 0;
        for (int i = 0; i < g->load_count; i++)
            g->loads[i].strides[0] = 0;
    }
    return true;
}

/* ---- emitting ---------------------------------------------------------------------------- */

/* sum of c_k * stride over the merged dimensions (c0 the innermost). */
static void emit_offset(clrun__strbuf *b, const geometry *g, const uint64_t *strides)
{
    const char *suffix = g->wide ? "ul" : "u";
    bool any = false;
    for (int d = g->rank - 1; d >= 0; d--) {
        int c = g->rank - 1 - d;
        if (strides[d] == 0)
            continue;
        if (strides[d] == 1)
            clrun__strbuf_printf(b, "%sc%d", any ? " + " : "", c);
        else
            clrun__strbuf_printf(b, "%sc%d * %llu%s", any ? " + " : "", c,
                                 (unsigned long long)strides[d], suffix);
        any = true;
    }
    if (!any)
        clrun__strbuf_printf(b, "0");
}

static void emit_coordinates(clrun__strbuf *b, const geometry *g, clrun__fused_op *f)
{
    const char *it = g->wide ? "ulong" : "uint", *suffix = g->wide ? "ul" : "u";
    int r = g->rank;
    if (r == 1) {
        f->launch = (clrun__fused_launch){1, {g->dims[0], 1, 1}};
        clrun__strbuf_printf(b, "    const %s c0 = get_global_id(0);\n"
                                "    if (!(WHOLE_GROUP(%llu%s) || c0 < %llu%s))\n        return;\n",
                             it, (unsigned long long)g->dims[0], suffix, (unsigned long long)g->dims[0], suffix);
        return;
    }
    uint64_t outer = 1;
    for (int d = 0; d <= r - 3; d++)
        outer *= g->dims[d];
    f->launch = (clrun__fused_launch){3, {g->dims[r - 1], g->dims[r - 2], outer}};
    clrun__strbuf_printf(b, "    const %s c0 = get_global_id(0);\n    if (c0 >= %llu%s)\n        return;\n"
                            "    const %s c1 = get_global_id(1);\n",
                         it, (unsigned long long)g->dims[r - 1], suffix, it);
    if (r == 3)
        clrun__strbuf_printf(b, "    const %s c2 = get_global_id(2);\n", it);
    if (r > 3) {
        clrun__strbuf_printf(b, "    %s rest = get_global_id(2);\n", it);
        for (int c = 2; c < r - 1; c++)
            clrun__strbuf_printf(b, "    const %s c%d = rest %% %llu%s;\n    rest /= %llu%s;\n", it, c,
                                 (unsigned long long)g->dims[r - 1 - c], suffix,
                                 (unsigned long long)g->dims[r - 1 - c], suffix);
        clrun__strbuf_printf(b, "    const %s c%d = rest;\n", it, r - 1);
    }
}

static clrun__op_call step_call(const clrun__fused_step *step)
{
    return (clrun__op_call){step->arg_types, step->def->arity, &step->type, 1, step->attrs,
                            step->attr_count, 0};
}

static void emit_step(clrun__strbuf *b, const clrun__fused_op *f, const geometry *g, int s)
{
    const clrun__fused_step *step = &f->steps[s];
    clrun__op_call call = step_call(step);
    clrun_dtype data = clrun__ew_data_dtype(step->def, &call);
    char name[64];
    clrun__ew_function_name(step->def, data, step->type.dtype, name, sizeof name);
    clrun__strbuf_printf(b, "    const %s t%d = %s(", clrun__cl_type(step->type.dtype), s, name);
    for (int k = 0; k < step->def->arity; k++) {
        if (step->args[k] >= 0)
            clrun__strbuf_printf(b, "%st%d", k ? ", " : "", step->args[k]);
        else if (step->args[k] == CLRUN__FUSED_ARG_V)
            clrun__strbuf_printf(b, "%sv", k ? ", " : "");
        else
            clrun__strbuf_printf(b, "%sv%d", k ? ", " : "", g->arg_load[s][k]);
    }
    for (int p = 0; p < step->def->param_count; p++) {
        clrun__strbuf_printf(b, ", ");
        clrun__ew_emit_literal(b, data, clrun__ew_param_value(step->def, &call, p, data));
    }
    clrun__strbuf_printf(b, ");\n");
}

static bool emit_kernel(clrun__strbuf *b, clrun__fused_op *f, bool poisoned)
{
    int arg_load[64][CLRUN__EW_MAX_INPUTS];
    geometry *g = calloc(1, sizeof *g);
    if (g == NULL || f->step_count > 64) {
        free(g);
        return false;
    }
    g->arg_load = arg_load;
    if (!build_geometry(f, g)) {
        free(g);
        return false;
    }
    clrun_dtype input_dtype[256];
    for (int i = 0; i < g->load_count; i++)
        input_dtype[g->loads[i].input] = g->loads[i].dtype;
    clrun__strbuf_printf(b, "\n/* %s */\n__kernel void %s(", f->name, f->kernel);
    for (int i = 0; i < f->input_count; i++)
        clrun__strbuf_printf(b, "__global const %s *in%d, ", clrun__cl_type(input_dtype[i]), i);
    const clrun__fused_step *last = &f->steps[f->step_count - 1];
    clrun__strbuf_printf(b, "__global %s *out)\n{\n", clrun__cl_type(last->type.dtype));
    if (poisoned)
        clrun__strbuf_printf(b, "    this does not compile;\n");
    emit_coordinates(b, g, f);
    for (int i = 0; i < g->load_count; i++) {
        clrun__strbuf_printf(b, "    const %s v%d = in%d[", clrun__cl_type(g->loads[i].dtype), i, g->loads[i].input);
        emit_offset(b, g, g->loads[i].strides);
        clrun__strbuf_printf(b, "];\n");
    }
    for (int s = 0; s < f->step_count; s++)
        emit_step(b, f, g, s);
    clrun__strbuf_printf(b, "    out[");
    emit_offset(b, g, g->out_strides);
    clrun__strbuf_printf(b, "] = %s(t%d);\n}\n", clrun__ew_store_function(last->type.dtype),
                         f->step_count - 1);
    free(g);
    return true;
}

/* Emits the element function of a step unless an earlier one had the same name. */
static void emit_function_once(clrun__strbuf *b, const clrun__fused_step *step, char (*done)[64],
                               int *done_count, int max)
{
    clrun__op_call call = step_call(step);
    clrun_dtype data = clrun__ew_data_dtype(step->def, &call);
    char name[64];
    clrun__ew_function_name(step->def, data, step->type.dtype, name, sizeof name);
    for (int i = 0; i < *done_count; i++)
        if (strcmp(done[i], name) == 0)
            return;
    if (*done_count < max)
        memcpy(done[(*done_count)++], name, sizeof name);
    clrun__ew_emit_function(b, step->def, data, step->type.dtype);
}

static bool has_op(const clrun__fused_op *f, const char *op)
{
    for (int s = 0; op && s < f->step_count; s++)
        if (strcmp(f->steps[s].op->name, op) == 0)
            return true;
    return false;
}

char *clrun__fuse_program(clrun__fused_op *const *ops, int count, bool fp64, const char *poison)
{
    enum { MAX_FUNCTIONS = 512 };
    char (*done)[64] = calloc(MAX_FUNCTIONS, sizeof *done);
    if (done == NULL)
        return NULL;
    int done_count = 0;
    clrun__strbuf b = {0};
    clrun__ew_emit_prelude(&b, fp64);
    for (int i = 0; i < count; i++)
        for (int s = 0; s < ops[i]->step_count; s++)
            emit_function_once(&b, &ops[i]->steps[s], done, &done_count, MAX_FUNCTIONS);
    bool ok = true;
    for (int i = 0; ok && i < count; i++)
        ok = emit_kernel(&b, ops[i], has_op(ops[i], poison));
    free(done);
    if (!ok) {
        clrun__strbuf_free(&b);
        return NULL;
    }
    return clrun__strbuf_take(&b);
}

/* ---- epilogues --------------------------------------------------------------------------- */

/* The offset of a load at output index i: i itself where it reads the output's own element,
 * else its coordinates from i by division by literals, times its strides. */
static void emit_epilogue_offset(clrun__strbuf *b, const geometry *g, const uint64_t *strides)
{
    if (memcmp(strides, g->out_strides, (size_t)g->rank * sizeof *strides) == 0) {
        clrun__strbuf_printf(b, "i");
        return;
    }
    bool any = false;
    for (int d = 0; d < g->rank; d++) {
        if (strides[d] == 0)
            continue;
        clrun__strbuf_printf(b, "%s", any ? " + " : "");
        if (d == 0)
            clrun__strbuf_printf(b, "i / %lluul", (unsigned long long)g->out_strides[0]);
        else
            clrun__strbuf_printf(b, "(i / %lluul) %% %lluul", (unsigned long long)g->out_strides[d],
                                 (unsigned long long)g->dims[d]);
        if (strides[d] != 1)
            clrun__strbuf_printf(b, " * %lluul", (unsigned long long)strides[d]);
        any = true;
    }
    if (!any)
        clrun__strbuf_printf(b, "0");
}

bool clrun__fuse_epilogue_source(clrun__arena *arena, clrun__fused_op *f, bool fp64)
{
    clrun__epilogue_base *e = f->epilogue;
    int arg_load[64][CLRUN__EW_MAX_INPUTS];
    geometry *g = calloc(1, sizeof *g);
    char (*done)[64] = calloc(64, sizeof *done);
    bool ok = g && done && f->step_count <= 64;
    if (ok) {
        g->arg_load = arg_load;
        ok = build_geometry(f, g);
    }
    clrun__strbuf b = {0};
    int done_count = 0;
    if (ok) {
        clrun__ew_emit_prelude(&b, fp64);
        for (int s = 0; s < f->step_count; s++)
            emit_function_once(&b, &f->steps[s], done, &done_count, 64);
        clrun__strbuf_printf(&b, "\n/* %s */\nfloat clrun_epilogue_fn(const float v, const ulong i, const uint c",
                             f->name);
        for (int x = 0; x < e->extra_inputs; x++)
            clrun__strbuf_printf(&b, ", __global const float *x%d", x);
        clrun__strbuf_printf(&b, ")\n{\n");
        for (int l = 0; l < g->load_count; l++) {
            clrun__strbuf_printf(&b, "    const float v%d = x%d[", l, g->loads[l].input - e->input_count);
            emit_epilogue_offset(&b, g, g->loads[l].strides);
            clrun__strbuf_printf(&b, "];\n");
        }
        for (int s = 0; s < f->step_count; s++)
            emit_step(&b, f, g, s);
        clrun__strbuf_printf(&b, "    return clrun_canon_f32(t%d);\n}\n", f->step_count - 1);
    }
    free(g);
    free(done);
    char *helpers = ok ? clrun__strbuf_take(&b) : NULL;
    if (!ok)
        clrun__strbuf_free(&b);
    clrun__strbuf expression = {0};
    clrun__strbuf_printf(&expression, "clrun_epilogue_fn(v, (ulong)(i), (uint)(c)");
    for (int x = 0; x < e->extra_inputs; x++)
        clrun__strbuf_printf(&expression, ", x%d", x);
    clrun__strbuf_printf(&expression, ")");
    char *text = clrun__strbuf_take(&expression);
    e->helpers = helpers ? clrun__arena_strdup(arena, helpers) : NULL;
    e->expression = text ? clrun__arena_strdup(arena, text) : NULL;
    free(helpers);
    free(text);
    if (e->helpers == NULL || e->expression == NULL)
        return false;
    return true;
}
