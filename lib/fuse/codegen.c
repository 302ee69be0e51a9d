/* Generating fused kernels: see codegen.h. */
#include "fuse/codegen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ew_source.h"
#include "ops/fused.h"

/* ---- geometry ---------------------------------------------------------------------------- */

/* A read: input `input` with its strides over the group's merged dimensions. */
typedef struct load {
    int input;
    clrun_dtype dtype;
    bool chained;   /* read through the input's chain of moves, at the output's own element */
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
    int output_load[CLRUN__FUSED_MAX_OUTPUTS]; /* an output that stores a load: which */
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

static int find_load(geometry *g, int input, clrun_dtype dtype, bool chained, const uint64_t *strides,
                     int rank)
{
    for (int i = 0; i < g->load_count; i++)
        if (g->loads[i].input == input &&
            (chained || memcmp(g->loads[i].strides, strides, (size_t)rank * sizeof *strides) == 0))
            return i;
    if (g->load_count == MAX_LOADS)
        return -1;
    load *l = &g->loads[g->load_count];
    l->input = input;
    l->dtype = dtype;
    l->chained = chained;
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
        for (int i = 0; joins && i < g->load_count; i++) /* a chained read goes by the index */
            joins = g->loads[i].chained || g->loads[i].strides[r - 1] == g->loads[i].strides[d] * n;
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
    const clrun_tensor_type *out = &f->output;
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
            int input = -1 - step->args[k];
            const clrun__fused_input *in = &f->inputs[input];
            uint64_t strides[CLRUN_MAX_DIMS];
            if (squeezed_strides(&step->arg_types[k], &step->type, strides) != g->rank)
                return false; /* the planner's shape rule was broken */
            if (in->view_count > 0 && memcmp(strides, g->out_strides, (size_t)g->rank * sizeof *strides) != 0)
                return false; /* a chain is read at the output's own element */
            g->arg_load[s][k] = find_load(g, input, in->dtype, in->view_count > 0, strides, g->rank);
            if (g->arg_load[s][k] < 0)
                return false;
            g->wide = g->wide || clrun_tensor_elements(&step->arg_types[k]) >= limit;
        }
    }
    for (int o = 0; o < f->output_count; o++) /* an output of moves alone: its input's chain */
        if (f->output_of[o] < 0) {
            int input = -1 - f->output_of[o];
            g->output_load[o] = find_load(g, input, f->inputs[input].dtype, true, g->out_strides, g->rank);
            if (g->output_load[o] < 0)
                return false;
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

/* The coordinates c0, c1, ... of the element a work-item computes; in whole and inside, the
 * conditions under which a work-group lies wholly inside the first dimension and under which
 * c0 does (see emit_kernel). */
static void emit_coordinates(clrun__strbuf *b, const geometry *g, clrun__fused_op *f, char *whole,
                             char *inside, size_t size)
{
    const char *it = g->wide ? "ulong" : "uint", *suffix = g->wide ? "ul" : "u";
    int r = g->rank;
    clrun__strbuf_printf(b, "    const %s c0 = get_global_id(0);\n", it);
    if (r == 1) { /* the count is the kernel's last argument: groups of any size share it */
        f->launch = (clrun__fused_launch){1, {g->dims[0], 1, 1}, g->wide};
        snprintf(whole, size, "WHOLE_GROUP(n)");
        snprintf(inside, size, "c0 < n");
        return;
    }
    uint64_t outer = 1;
    for (int d = 0; d <= r - 3; d++)
        outer *= g->dims[d];
    f->launch = (clrun__fused_launch){3, {g->dims[r - 1], g->dims[r - 2], outer}, false};
    snprintf(whole, size, "WHOLE_GROUP(%llu%s)", (unsigned long long)g->dims[r - 1], suffix);
    snprintf(inside, size, "c0 < %llu%s", (unsigned long long)g->dims[r - 1], suffix);
    clrun__strbuf_printf(b, "    const %s c1 = get_global_id(1);\n", it);
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

/* Where an operand of a step sorts in an epilogue's canonical order: v, the loads, the steps. */
static int operand_rank(const clrun__fused_step *step, const geometry *g, int s, int k)
{
    if (step->args[k] == CLRUN__FUSED_ARG_V)
        return 0;
    if (step->args[k] >= 0)
        return (1 << 20) + step->args[k];
    return 1 + g->arg_load[s][k];
}

/* With canonical_order (an epilogue), an f32 add or mul takes its operands in a fixed order
 * (the product's value first), so that a residual add written x + conv(y) and one written
 * conv(y) + x are one program text, one build and one compiled kernel (ResNet-18: three
 * epilogue programs became two). The same bits: IEEE addition and multiplication are
 * commutative, to the sign of a zero; only a NaN's payload could follow the order, and an
 * epilogue's result is made canonical (clrun_canon_f32) before its store. */
/* With lanes (8 or 16: an epilogue that runs on vectors, clrun__fuse_epilogue_on_vectors, whose
 * steps read v and each other only) the step over floatN, calling the vector element function. */
static void emit_step(clrun__strbuf *b, const clrun__fused_op *f, const geometry *g, int s,
                      bool canonical_order, int lanes)
{
    const clrun__fused_step *step = &f->steps[s];
    clrun__op_call call = step_call(step);
    clrun_dtype data = clrun__ew_data_dtype(step->def, &call);
    char name[64];
    clrun__ew_function_name(step->def, data, step->type.dtype, name, sizeof name);
    if (lanes)
        clrun__strbuf_printf(b, "    const float%d t%d = %s_v%d(", lanes, s, name, lanes);
    else
        clrun__strbuf_printf(b, "    const %s t%d = %s(", clrun__cl_type(step->type.dtype), s, name);
    int order[CLRUN__EW_MAX_INPUTS] = {0, 1, 2};
    if (canonical_order && step->def->arity == 2 && data == CLRUN_F32 && step->type.dtype == CLRUN_F32 &&
        step->def->param_count == 0 &&
        (strcmp(step->def->name, "add") == 0 || strcmp(step->def->name, "mul") == 0) &&
        operand_rank(step, g, s, 1) < operand_rank(step, g, s, 0)) {
        order[0] = 1;
        order[1] = 0;
    }
    for (int j = 0; j < step->def->arity; j++) {
        int k = order[j];
        if (step->args[k] >= 0)
            clrun__strbuf_printf(b, "%st%d", j ? ", " : "", step->args[k]);
        else if (step->args[k] == CLRUN__FUSED_ARG_V)
            clrun__strbuf_printf(b, "%sv", j ? ", " : "");
        else
            clrun__strbuf_printf(b, "%sv%d", j ? ", " : "", g->arg_load[s][k]);
    }
    for (int p = 0; p < step->def->param_count; p++) {
        clrun__strbuf_printf(b, ", ");
        clrun__ew_emit_literal(b, data, clrun__ew_param_value(step->def, &call, p, data));
    }
    clrun__strbuf_printf(b, ");\n");
}

/* A chained read: the output index o taken back through each view of the input's chain
 * (views[0] first) to an index of the input. */
static void emit_chain(clrun__strbuf *b, const clrun__fused_input *in, int at)
{
    clrun__strbuf_printf(b, "    long l%d = (long)o;\n", at);
    for (int k = 0; k < in->view_count; k++) {
        const clrun__view *v = &in->views[k];
        clrun__strbuf_printf(b, "    {\n        long r = l%d;\n        l%d = %lldL;\n", at, at,
                             (long long)v->base);
        for (int d = v->rank - 1; d >= 0; d--) {
            if (d == 0) {
                clrun__strbuf_printf(b, "        l%d += r * %lldL;\n", at, (long long)v->strides[d]);
                break;
            }
            clrun__strbuf_printf(b, "        l%d += (r %% %lldL) * %lldL;\n        r /= %lldL;\n", at,
                                 (long long)v->dims[d], (long long)v->strides[d], (long long)v->dims[d]);
        }
        clrun__strbuf_printf(b, "    }\n");
    }
}

static bool emit_kernel(clrun__strbuf *out, clrun__fused_op *f, bool poisoned)
{
    clrun__strbuf *b = out;
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
    /* b gets the kernel from its parameter list on: the caller names it */
    clrun__strbuf_printf(b, "(");
    for (int i = 0; i < f->input_count; i++)
        clrun__strbuf_printf(b, "__global const %s *in%d, ", clrun__cl_type(f->inputs[i].dtype), i);
    for (int o = 0; o < f->output_count; o++)
        clrun__strbuf_printf(b, "%s__global %s *out%d", o ? ", " : "", clrun__cl_type(f->output_dtype[o]), o);
    if (g->rank == 1)
        clrun__strbuf_printf(b, ", const %s n", g->wide ? "ulong" : "uint");
    clrun__strbuf_printf(b, ")\n{\n");
    if (poisoned)
        clrun__strbuf_printf(b, "    this does not compile;\n");
    /* The element's work, written twice: under "the work-group lies wholly inside the first
     * dimension" and under "c0 lies inside it". With the two in one test POCL vectorizes the
     * loop over a group's work-items with every load and store masked (SiLU over 401,408
     * elements: 142 us; 109 with whole groups in a branch of their own, whose loop has no mask;
     * lib/ops/ew_source.c's emit_checked_assign does the same). */
    char whole[64], inside[64];
    emit_coordinates(b, g, f, whole, inside, sizeof whole);
    clrun__strbuf work = {0};
    b = &work;
    clrun__strbuf_printf(b, "    const %s o = ", g->wide ? "ulong" : "uint");
    emit_offset(b, g, g->out_strides);
    clrun__strbuf_printf(b, ";\n");
    for (int i = 0; i < g->load_count; i++) {
        const load *l = &g->loads[i];
        if (l->chained)
            emit_chain(b, &f->inputs[l->input], i);
        clrun__strbuf_printf(b, "    const %s v%d = in%d[", clrun__cl_type(l->dtype), i, l->input);
        if (l->chained)
            clrun__strbuf_printf(b, "l%d", i);
        else if (memcmp(l->strides, g->out_strides, (size_t)g->rank * sizeof l->strides[0]) == 0)
            clrun__strbuf_printf(b, "o");
        else
            emit_offset(b, g, l->strides);
        clrun__strbuf_printf(b, "];\n");
    }
    for (int s = 0; s < f->step_count; s++)
        emit_step(b, f, g, s, false, 0);
    for (int o = 0; o < f->output_count; o++) {
        if (f->output_of[o] < 0) /* moves alone keep every bit */
            clrun__strbuf_printf(b, "    out%d[o] = v%d;\n", o, g->output_load[o]);
        else
            clrun__strbuf_printf(b, "    out%d[o] = %s(t%d);\n", o, clrun__ew_store_function(f->output_dtype[o]),
                                 f->output_of[o]);
    }
    b = out;
    bool ok = !work.failed;
    if (ok) {
        clrun__strbuf_printf(b, "    if (%s) {\n%s    } else if (%s) {\n%s    }\n}\n", whole, work.data, inside,
                             work.data);
    }
    clrun__strbuf_free(&work);
    free(g);
    return ok;
}

/* Emits the element function of a step unless an earlier one had the same name. */
static void emit_function_once(clrun__strbuf *b, const clrun__fused_step *step, int lanes, char (*done)[64],
                               int *done_count, int max)
{
    clrun__op_call call = step_call(step);
    clrun_dtype data = clrun__ew_data_dtype(step->def, &call);
    char name[64];
    clrun__ew_function_name(step->def, data, step->type.dtype, name, sizeof name);
    if (lanes) {
        size_t used = strlen(name);
        snprintf(name + used, sizeof name - used, "_v%d", lanes);
    }
    for (int i = 0; i < *done_count; i++)
        if (strcmp(done[i], name) == 0)
            return;
    if (*done_count < max)
        memcpy(done[(*done_count)++], name, sizeof name);
    if (lanes)
        clrun__ew_emit_vector_function(b, step->def, lanes);
    else
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
            emit_function_once(&b, &ops[i]->steps[s], 0, done, &done_count, MAX_FUNCTIONS);
    /* Groups whose kernels are the same text share the first one's kernel: POCL compiles each
     * kernel a program defines that runs (0.1-0.3 s apiece), and mobile networks repeat the
     * same activation at many sizes (EfficientNet-B0: 49 SiLU groups, one kernel). */
    char **bodies = calloc((size_t)count + 1, sizeof *bodies);
    bool ok = bodies != NULL;
    for (int i = 0; ok && i < count; i++) {
        clrun__strbuf body = {0};
        ok = emit_kernel(&body, ops[i], has_op(ops[i], poison)) && !body.failed;
        bodies[i] = ok ? clrun__strbuf_take(&body) : NULL;
        clrun__strbuf_free(&body);
        int same = -1;
        for (int j = 0; ok && j < i && same < 0; j++)
            if (bodies[j] && strcmp(bodies[j], bodies[i]) == 0)
                same = j;
        if (same >= 0) {
            memcpy(ops[i]->kernel, ops[same]->kernel, sizeof ops[i]->kernel);
            free(bodies[i]);
            bodies[i] = NULL; /* its kernel is ops[same]'s */
        } else if (ok) {
            clrun__strbuf_printf(&b, "\n/* %s */\n__kernel void %s", ops[i]->name, ops[i]->kernel);
            clrun__strbuf_append(&b, bodies[i], strlen(bodies[i]));
        }
    }
    for (int i = 0; bodies && i < count; i++)
        free(bodies[i]);
    free(bodies);
    free(done);
    if (!ok) {
        clrun__strbuf_free(&b);
        return NULL;
    }
    return clrun__strbuf_take(&b);
}

/* ---- epilogues --------------------------------------------------------------------------- */

/* The output dimension that the base's c counts along (ops/ops.h: a matmul's column, the last
 * dimension wherever B is a matrix; a convolution's channel, dimension 1), as a merged
 * dimension of g: the one of that extent whose inner dimensions hold exactly the original's
 * inner ones (every merged dimension is a run of original ones, each above 1, so the extents
 * tell). -1 when there is none. */
static int column_dim(const clrun__epilogue_base *e, const geometry *g)
{
    const clrun_tensor_type *out = &e->types[e->input_count];
    int original = -1;
    if (strcmp(e->op->name, "matmul") == 0 && e->input_count >= 2 && e->types[1].rank >= 2)
        original = out->rank - 1;
    else if (strcmp(e->op->name, "conv2d") == 0 && out->rank == 4)
        original = 1;
    if (original < 0 || out->shape[original] < 2)
        return -1;
    uint64_t inner = 1;
    for (int d = original + 1; d < out->rank; d++)
        inner *= (uint64_t)out->shape[d];
    for (int d = 0; d < g->rank; d++)
        if (g->dims[d] == (uint64_t)out->shape[original] && g->out_strides[d] == inner)
            return d;
    return -1;
}

/* How a load with these strides reads at output index i: OFFSET_AT_I, the output's own element;
 * OFFSET_BY_COLUMN, varying along the base's column alone (a bias, a per-channel scale); else
 * OFFSET_OTHER. */
enum { OFFSET_OTHER, OFFSET_AT_I, OFFSET_BY_COLUMN };
static int offset_kind(const geometry *g, const uint64_t *strides, int column)
{
    if (memcmp(strides, g->out_strides, (size_t)g->rank * sizeof *strides) == 0)
        return OFFSET_AT_I;
    bool by_column = column >= 0 && strides[column] != 0;
    for (int d = 0; by_column && d < g->rank; d++)
        by_column = d == column || strides[d] == 0;
    return by_column ? OFFSET_BY_COLUMN : OFFSET_OTHER;
}

/* The offset of a load at output index i: i itself where it reads the output's own element, c
 * (times its stride) where it varies along the base's column alone (a bias: no division, and
 * consecutive along a matmul's store loop), else its coordinates from i by division by
 * literals, times its strides. */
static void emit_epilogue_offset(clrun__strbuf *b, const geometry *g, const uint64_t *strides, int column)
{
    switch (offset_kind(g, strides, column)) {
    case OFFSET_AT_I:
        clrun__strbuf_printf(b, "i");
        return;
    case OFFSET_BY_COLUMN:
        if (strides[column] == 1)
            clrun__strbuf_printf(b, "c");
        else
            clrun__strbuf_printf(b, "(ulong)c * %lluul", (unsigned long long)strides[column]);
        return;
    default:
        break;
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

/* Whether a vector of consecutive outputs of one channel can read load l: at i (its own
 * elements, a residual of the output's shape) or by column (one value for them all). */
static bool vector_load(const geometry *g, const load *l, int column)
{
    return !l->chained && l->dtype == CLRUN_F32 && offset_kind(g, l->strides, column) != OFFSET_OTHER;
}

bool clrun__fuse_epilogue_math(const clrun__fused_op *f)
{
    bool math = false;
    for (int s = 0; s < f->step_count; s++)
        math = math || clrun__ew_float_cost(f->steps[s].def) != CLRUN__EW_ARITHMETIC;
    return math;
}

/* Emits f's epilogue as the function `fn` (v, i, c, x0, ...): its loads, then its steps. */
static bool emit_epilogue_fn(clrun__strbuf *b, const clrun__fused_op *f, const char *fn, bool vectors)
{
    const clrun__epilogue_base *e = f->epilogue;
    int arg_load[64][CLRUN__EW_MAX_INPUTS];
    geometry *g = calloc(1, sizeof *g);
    bool ok = g && f->step_count <= 64;
    if (ok) {
        g->arg_load = arg_load;
        ok = build_geometry(f, g);
    }
    if (ok) {
        clrun__strbuf_printf(b, "\n/* %s */\nCLRUN_INLINE float %s(const float v, const ulong i, const uint c",
                             f->name, fn);
        for (int x = 0; x < e->extra_inputs; x++)
            clrun__strbuf_printf(b, ", __global const float *x%d", x);
        clrun__strbuf_printf(b, ")\n{\n");
        int column = column_dim(e, g);
        for (int l = 0; l < g->load_count; l++) {
            clrun__strbuf_printf(b, "    const float v%d = x%d[", l, g->loads[l].input - e->input_count);
            emit_epilogue_offset(b, g, g->loads[l].strides, column);
            clrun__strbuf_printf(b, "];\n");
        }
        for (int s = 0; s < f->step_count; s++)
            emit_step(b, f, g, s, true, 0);
        if (f->step_count == 0) /* the identity: stored as the base stores it alone */
            clrun__strbuf_printf(b, "    return v;\n}\n");
        else
            clrun__strbuf_printf(b, "    return clrun_canon_f32(t%d);\n}\n", f->step_count - 1);
    }
    /* on vectors, `fn`_v8 and `fn`_v16 (v, i, c, x0, ...): the outputs i .. i + lanes - 1 of
     * channel c, each load a vector of its own elements or c's value, the same steps lane by
     * lane, then the same store */
    for (int lanes = 8; ok && vectors && lanes <= 16; lanes *= 2) {
        clrun__strbuf_printf(b, "CLRUN_INLINE float%d %s_v%d(const float%d v, const ulong i, const uint c",
                             lanes, fn, lanes, lanes);
        for (int x = 0; x < e->extra_inputs; x++)
            clrun__strbuf_printf(b, ", __global const float *x%d", x);
        clrun__strbuf_printf(b, ")\n{\n");
        int column = column_dim(e, g);
        for (int l = 0; l < g->load_count; l++) {
            int x = g->loads[l].input - e->input_count;
            if (offset_kind(g, g->loads[l].strides, column) == OFFSET_AT_I) {
                clrun__strbuf_printf(b, "    const float%d v%d = vload%d(0, x%d + i);\n", lanes, l, lanes, x);
            } else {
                clrun__strbuf_printf(b, "    const float%d v%d = (float%d)(x%d[", lanes, l, lanes, x);
                emit_epilogue_offset(b, g, g->loads[l].strides, column);
                clrun__strbuf_printf(b, "]);\n");
            }
        }
        for (int s = 0; s < f->step_count; s++)
            emit_step(b, f, g, s, true, lanes);
        if (f->step_count == 0)
            clrun__strbuf_printf(b, "    return v;\n}\n");
        else
            clrun__strbuf_printf(b, "    return clrun_canon_f32_v%d(t%d);\n}\n", lanes, f->step_count - 1);
    }
    free(g);
    return ok && !b->failed;
}

bool clrun__fuse_epilogue_on_vectors(const clrun__fused_op *f)
{
    if (f->epilogue == NULL || f->step_count > 64)
        return false;
    for (int s = 0; s < f->step_count; s++) {
        const clrun__fused_step *step = &f->steps[s];
        if (!clrun__ew_on_vectors(step->def) || step->type.dtype != CLRUN_F32)
            return false;
        for (int k = 0; k < step->def->arity; k++)
            if (step->arg_types[k].dtype != CLRUN_F32)
                return false;
    }
    if (f->epilogue->extra_inputs == 0)
        return true;
    int arg_load[64][CLRUN__EW_MAX_INPUTS];
    geometry *g = calloc(1, sizeof *g);
    bool ok = g != NULL;
    if (ok) {
        g->arg_load = arg_load;
        ok = build_geometry(f, g);
    }
    int column = ok ? column_dim(f->epilogue, g) : -1;
    for (int l = 0; ok && l < g->load_count; l++)
        ok = vector_load(g, &g->loads[l], column);
    free(g);
    return ok;
}

/* The element functions of f's steps over float8 and float16, each once (`done` as
 * emit_function_once's). */
static void emit_vector_functions_once(clrun__strbuf *b, const clrun__fused_op *f, char (*done)[64],
                                       int *done_count, int max)
{
    for (int s = 0; s < f->step_count; s++)
        for (int lanes = 8; lanes <= 16; lanes *= 2)
            emit_function_once(b, &f->steps[s], lanes, done, done_count, max);
}

/* The call `fn(v, (ulong)(i), (uint)(c), x0, ..)` with `params` buffers, after `first`. */
static char *epilogue_call(const char *first, const char *fn, int params)
{
    clrun__strbuf b = {0};
    clrun__strbuf_printf(&b, "%s(%sv, (ulong)(i), (uint)(c)", fn, first);
    for (int x = 0; x < params; x++)
        clrun__strbuf_printf(&b, ", x%d", x);
    clrun__strbuf_printf(&b, ")");
    char *text = b.failed ? NULL : clrun__strbuf_take(&b);
    clrun__strbuf_free(&b);
    return text;
}

/* Keeps helpers and the expression in the arena; false when any is missing. */
static bool keep_source(clrun__arena *arena, clrun__epilogue_base *e, char *helpers, char *expression)
{
    e->helpers = helpers ? clrun__arena_strdup(arena, helpers) : NULL;
    e->expression = expression ? clrun__arena_strdup(arena, expression) : NULL;
    free(helpers);
    free(expression);
    return e->helpers != NULL && e->expression != NULL;
}

bool clrun__fuse_epilogue_source(clrun__arena *arena, clrun__fused_op *f, bool fp64)
{
    char (*done)[64] = calloc(64, sizeof *done);
    clrun__strbuf b = {0};
    int done_count = 0;
    bool ok = done != NULL;
    if (ok) {
        clrun__ew_emit_prelude(&b, fp64);
        for (int s = 0; s < f->step_count; s++)
            emit_function_once(&b, &f->steps[s], 0, done, &done_count, 64);
        bool math = clrun__fuse_epilogue_math(f);
        if (math)
            clrun__strbuf_printf(&b, "#define CLRUN_EPILOGUE_MATH 1\n");
        bool vectors = clrun__fuse_epilogue_on_vectors(f); /* the lane kernels' vector stores */
        if (vectors) {
            clrun__ew_emit_vector_helpers(&b, math);
            emit_vector_functions_once(&b, f, done, &done_count, 64);
        }
        ok = emit_epilogue_fn(&b, f, "clrun_epilogue_fn", vectors);
        for (int lanes = 8; ok && vectors && lanes <= 16; lanes *= 2) {
            char fn[32];
            snprintf(fn, sizeof fn, "clrun_epilogue_fn_v%d", lanes);
            char *call = epilogue_call("", fn, f->epilogue->extra_inputs);
            ok = call != NULL;
            clrun__strbuf_printf(&b, "#define CLRUN_EPILOGUE_V%d(v, i, c) %s\n", lanes, call ? call : "");
            free(call);
        }
        ok = ok && !b.failed;
    }
    free(done);
    char *helpers = ok ? clrun__strbuf_take(&b) : NULL;
    clrun__strbuf_free(&b);
    f->epilogue->params = f->epilogue->index = 0;
    return keep_source(arena, f->epilogue, helpers,
                       epilogue_call("", "clrun_epilogue_fn", f->epilogue->extra_inputs));
}

/* "    case K: " for case k of `cases`, the last one "    default: ". */
static void emit_case_label(clrun__strbuf *b, int k, int cases)
{
    if (k + 1 < cases)
        clrun__strbuf_printf(b, "    case %du: ", k);
    else
        clrun__strbuf_printf(b, "    default: ");
}

bool clrun__fuse_epilogue_set_source(clrun__arena *arena, clrun__fused_op **ops, int count, bool fp64,
                                     const char *poison)
{
    enum { MAX_FUNCTIONS = 512 };
    char (*done)[64] = calloc(MAX_FUNCTIONS, sizeof *done);
    /* case_of[i]: op i's case; first[k]: the first op of case k */
    int *case_of = calloc(2 * (size_t)count + 1, sizeof *case_of), *first = case_of ? case_of + count : NULL;
    clrun__strbuf b = {0};
    int done_count = 0, cases = 0, params = 0;
    bool ok = done != NULL && case_of != NULL, math = false;
    /* One case per distinct epilogue: its own source (clrun__fuse_epilogue_source, made
     * first) says which are alike (a relu after convolutions of any shape). */
    for (int i = 0; ok && i < count; i++) {
        int same = -1;
        for (int k = 0; k < cases && same < 0; k++)
            if (strcmp(ops[first[k]]->epilogue->helpers, ops[i]->epilogue->helpers) == 0)
                same = k;
        if (same < 0)
            first[cases] = i, same = cases++;
        case_of[i] = same;
    }
    if (ok && cases < 2) { /* one epilogue: its own source is already the one program */
        free(done);
        free(case_of);
        return true;
    }
    bool vectors = true; /* the lane kernels' vector stores: where every case has one */
    for (int k = 0; k < cases; k++)
        vectors = vectors && clrun__fuse_epilogue_on_vectors(ops[first[k]]);
    for (int i = 0; i < count; i++)
        math = math || clrun__fuse_epilogue_math(ops[i]);
    if (ok) {
        clrun__ew_emit_prelude(&b, fp64);
        if (vectors)
            clrun__ew_emit_vector_helpers(&b, math);
        for (int i = 0; i < count; i++) {
            for (int s = 0; s < ops[i]->step_count; s++)
                emit_function_once(&b, &ops[i]->steps[s], 0, done, &done_count, MAX_FUNCTIONS);
            if (vectors)
                emit_vector_functions_once(&b, ops[i], done, &done_count, MAX_FUNCTIONS);
            int e = ops[i]->epilogue->extra_inputs;
            params = e > params ? e : params;
        }
        if (math)
            clrun__strbuf_printf(&b, "#define CLRUN_EPILOGUE_MATH 1\n");
    }
    for (int k = 0; ok && k < cases; k++) {
        char fn[48];
        snprintf(fn, sizeof fn, "clrun_epilogue_fn_%d", k);
        ok = emit_epilogue_fn(&b, ops[first[k]], fn, vectors);
    }
    /* The dispatch: the case is a kernel argument, alike for every work-item. */
    if (ok) {
        clrun__strbuf_printf(&b, "\nCLRUN_INLINE float clrun_epilogue_any(const uint epi, const float v, "
                                 "const ulong i, const uint c");
        for (int x = 0; x < params; x++)
            clrun__strbuf_printf(&b, ", __global const float *x%d", x);
        clrun__strbuf_printf(&b, ")\n{\n    switch (epi) {\n");
        for (int k = 0; k < cases; k++) {
            char fn[48];
            snprintf(fn, sizeof fn, "clrun_epilogue_fn_%d", k);
            char *call = epilogue_call("", fn, ops[first[k]]->epilogue->extra_inputs);
            ok = ok && call != NULL;
            emit_case_label(&b, k, cases);
            clrun__strbuf_printf(&b, "return %s;\n", call ? call : "");
            free(call);
        }
        clrun__strbuf_printf(&b, "    }\n}\n");
        for (int lanes = 8; vectors && lanes <= 16; lanes *= 2) { /* a case per vector */
            clrun__strbuf_printf(&b, "CLRUN_INLINE float%d clrun_epilogue_any_v%d(const uint epi, const float%d v, "
                                     "const ulong i, const uint c", lanes, lanes, lanes);
            for (int x = 0; x < params; x++)
                clrun__strbuf_printf(&b, ", __global const float *x%d", x);
            clrun__strbuf_printf(&b, ")\n{\n    switch (epi) {\n");
            for (int k = 0; k < cases; k++) {
                char fn[48];
                snprintf(fn, sizeof fn, "clrun_epilogue_fn_%d_v%d", k, lanes);
                char *call = epilogue_call("", fn, ops[first[k]]->epilogue->extra_inputs);
                ok = ok && call != NULL;
                emit_case_label(&b, k, cases);
                clrun__strbuf_printf(&b, "return %s;\n", call ? call : "");
                free(call);
            }
            char fn[32];
            snprintf(fn, sizeof fn, "clrun_epilogue_any_v%d", lanes);
            char *call = epilogue_call("epi, ", fn, params);
            ok = ok && call != NULL;
            clrun__strbuf_printf(&b, "    }\n}\n#define CLRUN_EPILOGUE_V%d(v, i, c) %s\n", lanes, call ? call : "");
            free(call);
        }
        for (int i = 0; i < count; i++)
            if (has_op(ops[i], poison))
                clrun__strbuf_printf(&b, "#error \"an epilogue set poisoned by a test\"\n");
        /* A kernel's hot store runs once per case with the case a constant there (the kernels'
         * EPILOGUE_SITE), so that its loop vectorizes as with one epilogue: the switch inside
         * clrun_epilogue_any folds away. */
        clrun__strbuf_printf(&b, "#define CLRUN_EPILOGUE_SWITCH(...) switch (epi) {");
        for (int k = 0; k < cases; k++) {
            if (k + 1 < cases)
                clrun__strbuf_printf(&b, " case %du:", k);
            else
                clrun__strbuf_printf(&b, " default:");
            clrun__strbuf_printf(&b, " { const uint epi = %du; __VA_ARGS__ } break;", k);
        }
        clrun__strbuf_printf(&b, " }\n");
        ok = ok && !b.failed;
    }
    free(done);
    char *helpers = ok ? clrun__strbuf_take(&b) : NULL;
    clrun__strbuf_free(&b);
    char *expression = ok ? epilogue_call("epi, ", "clrun_epilogue_any", params) : NULL;
    /* every case shares the text kept once (keep_source takes both strings) */
    if (ok && count > 0) {
        ok = keep_source(arena, ops[0]->epilogue, helpers, expression);
    } else {
        ok = false;
        free(helpers);
        free(expression);
    }
    for (int i = 0; ok && i < count; i++) {
        clrun__epilogue_base *e = ops[i]->epilogue;
        e->helpers = ops[0]->epilogue->helpers;
        e->expression = ops[0]->epilogue->expression;
        e->params = params;
        e->index = case_of[i] + 1;
    }
    free(case_of);
    return ok;
}
