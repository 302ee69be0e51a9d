/* Epilogues: a matmul or conv2d whose output only an elementwise group reads (a bias, an
 * activation, a residual add, a clip: the group the planner made there, or the one node) runs
 * that group inside its own kernel, on each value before its single store (lib/ops/ops.h's
 * epilogue interface), so the product never makes a round trip through memory. The group must
 * cover the product's elements in its order (the same iteration space), end in f32, and read
 * at most CLRUN__EPILOGUE_MAX_EXTRA other tensors, all f32. The groups are chosen first, then
 * each epilogue is built once here (the base op's program with it, or with its set's, below),
 * and one that does not build is left unfused, with a warning.
 *
 * Where the driver compiles kernels at their first launch, the epilogues of one base op are one
 * set (shares_source): one source with a case each, so that its kernels build and compile once
 * for all of them, and its nodes with no epilogue join as the identity case (plain_cases). A
 * conv2d that runs on matmul's kernel (clrun__conv_runs_as_product: a 1 x 1 plane's product)
 * counts as a matmul here: its epilogue joins matmul's set and is judged as a matmul's.
 *
 * The group may read the product's output more than once (SiLU: x * sigmoid(x)) when no node
 * outside it reads it.
 *
 * On a CPU device an epilogue that calls into the math library is left to its own kernel, and
 * after a convolution one built on clrun's own exp and tanh too: there an elementwise kernel
 * runs a vector of work-items, where a product's store computes an element at a time. A
 * matmul's full panels are stored through a loop the compiler vectorizes over their columns,
 * and take the epilogues built on clrun's own exp and tanh (matmul+gelu 0.95-0.98x,
 * matmul+tanh 0.95-1.0x; 1.11-1.16x with the scalar loop) but not erf's and the library's
 * others (gelu_erf measured slower fused). The conv core stores such an epilogue's full panels
 * the same way (kernels/matmul_core.cl), but on POCL that only brings conv2d+SiLU level with the
 * pair (EfficientNet-B0: the same kernel time, its best wall time 1.0-1.03x main's with the 49
 * SiLUs fused), and a depthwise convolution fused measured 1.3-2x the pair: a CPU keeps them
 * apart there. The kernels that store whole vectors (below) run clrun's own exp and tanh on
 * them, all but the 3 x 3 depthwise ones along the rows (clrun__conv_epilogue_pays):
 * EfficientNet-B0 126 kernels instead of 151, 0.95x the time. On a CPU the convolution kernels
 * that run the positions or the channels along the vectors (pointwise, a stem's rows,
 * depthwise) store an epilogue a lane at a time, which costs more than the elementwise pass it
 * saves when the epilogue does real work (hardswish: with it and the relus fused
 * MobileNetV3-small ran 3.2-3.5 ms, 2.6-2.9 without), and on most of them a relu too. So they
 * take one that runs on vectors (clrun__fuse_epilogue_on_vectors: relu, hardswish, hard
 * sigmoid, sigmoid, tanh... over the product's value alone), applied to each stored vector at
 * next to no cost, in a set of their own (FAMILY_CONV_LANES) whose every case has it; the small
 * planes' pointwise kernel also takes a cheap one (cheap_on_lanes: a relu, a clip, a bias or
 * residual add, at most two of them) a lane at a time, which costs it about nothing
 * (clrun__conv_store_of says which kernel runs); the core keeps its arithmetic epilogues. A GPU,
 * whose store is the expensive part, takes every epilogue.
 *
 * A group that reads a donated input of its size (a train step's momentum update, `b = mu*b +
 * g`, g the weight gradient a product computes) must write that input in place, or the state
 * would be held twice. It joins a product whose kernels store each element once, from the one
 * work-item that computed it, after reading the element's extra inputs
 * (clrun__op_epilogue_in_place: matmul), when it reads every input of its size at its own element
 * only and none of them is one of the product's operands: then the fused node may write over
 * that input (alias_from skips the product's operands), and the gradient is never stored at
 * all. The expression is the group's ops in the group's order, built with FP_CONTRACT OFF as the
 * elementwise kernel is: the same bits. Elsewhere such a group stays alone, so that it can
 * write that input in place. */
#include "fuse/epilogue.h"

#include <string.h>

#include "device/context.h"
#include "device/program.h"
#include "fuse/codegen.h"
#include "fuse/fuse.h"
#include "ops/ops.h"

bool clrun__fuse_every_epilogue;
int clrun__epilogue_sets = 1;
bool clrun__fuse_state_epilogues = true;

/* Whether an epilogue of these group members pays on base's kernel on ctx's device (see the top
 * comment). */
static bool pays_on(clrun_context *ctx, const clrun_graph *d, const clrun__node *base,
                    const clrun__op_call *call, const int32_t *members, int32_t count, bool vectors)
{
    if (clrun__fuse_every_epilogue || strcmp(ctx->info.type, "CPU") != 0)
        return true;
    bool conv = strcmp(base->op->name, "conv2d") == 0 && !clrun__conv_runs_as_product(ctx, call);
    bool math_pays = !conv || (vectors && clrun__conv_store_of(ctx, call) != CLRUN__CONV_STORE_ANY);
    for (int32_t k = 0; k < count; k++) {
        const clrun__ew_def *def = clrun__ew_def_of(d->nodes[members[k]].op);
        clrun__ew_cost cost = def ? clrun__ew_float_cost(def) : CLRUN__EW_ARITHMETIC;
        if (cost == CLRUN__EW_LIBRARY_MATH || (cost == CLRUN__EW_OWN_MATH && !math_pays))
            return false;
    }
    return true;
}

/* Whether the group is cheap enough for a convolution kernel that stores a lane at a time (see
 * the top comment): at most two members, each a compare, an add, a multiply or a clip. The
 * activations (a hardswish's x / 6 and clip, a hardsigmoid, the exps) are left out: a hardswish
 * fused into MobileNetV3's 40 -> 240 pointwise layer took it from 30.8 to 44.6 us. */
static bool cheap_on_lanes(const clrun_graph *d, const int32_t *members, int32_t count)
{
    static const char *const cheap[] = {"relu", "leaky_relu", "prelu", "clip", "add",
                                        "sub",  "mul",        "neg",   "maximum", "minimum"};
    if (count > 2)
        return false;
    for (int32_t k = 0; k < count; k++) {
        const char *name = d->nodes[members[k]].op->name;
        bool found = false;
        for (size_t i = 0; i < sizeof cheap / sizeof cheap[0] && !found; i++)
            found = strcmp(name, cheap[i]) == 0;
        if (!found)
            return false;
    }
    return true;
}

/* The node that reads tensor t (reads[t] == 1), or -1. */
static int32_t reader_of(const clrun_graph *d, int32_t t, int32_t after)
{
    for (int32_t n = after + 1; n < d->node_count; n++)
        if (d->nodes[n].op)
            for (int k = 0; k < d->nodes[n].input_count; k++)
                if (d->nodes[n].inputs[k] == t)
                    return n;
    return -1;
}

/* How many times the members read tensor t (a SiLU, x * sigmoid(x), reads it twice). */
static int32_t reads_among(const clrun_graph *d, int32_t t, const int32_t *members, int32_t count)
{
    int32_t reads = 0;
    for (int32_t k = 0; k < count; k++)
        for (int i = 0; i < d->nodes[members[k]].input_count; i++)
            reads += d->nodes[members[k]].inputs[i] == t;
    return reads;
}

/* Whether the fused op may run as an epilogue of its base: types and extra inputs. */
static bool fits(const clrun_graph *d, const clrun__fused_op *f, const int32_t *inputs, int32_t t)
{
    const clrun__epilogue_base *e = f->epilogue;
    const clrun_tensor_type *out = &f->steps[f->step_count - 1].type;
    if (out->dtype != CLRUN_F32 || !clrun__same_iteration_space(out, &d->tensors[t].type))
        return false;
    if (e->extra_inputs > CLRUN__EPILOGUE_MAX_EXTRA)
        return false;
    for (int x = e->input_count; x < f->input_count; x++)
        if (d->tensors[inputs[x]].type.dtype != CLRUN_F32)
            return false;
    for (int s = 0; s < f->step_count; s++)
        for (int k = 0; k < f->steps[s].def->arity; k++)
            if (f->steps[s].args[k] == CLRUN__FUSED_ARG_V && !clrun__type_equal(&f->steps[s].arg_types[k], &d->tensors[t].type))
                return false;
    return true;
}

/* The base op's call, as the executor will make it for the fused node's first inputs. */
static clrun__op_call base_call(const clrun_graph *d, const clrun__epilogue_base *e,
                                const int32_t *inputs)
{
    uint64_t constants = 0;
    for (int k = 0; k < e->input_count; k++)
        if (d->tensors[inputs[k]].kind == CLRUN__TENSOR_CONSTANT)
            constants |= UINT64_C(1) << k;
    return (clrun__op_call){e->types, e->input_count, e->types + e->input_count, 1, e->attrs,
                            e->attr_count, constants};
}

/* Builds the base op's kernels with the epilogue once: the program is then in the context for
 * the executor's own prepare. */
static bool builds(clrun_context *ctx, const clrun_graph *d, const clrun__fused_op *f,
                   const int32_t *inputs)
{
    const clrun__epilogue_base *e = f->epilogue;
    clrun__prepare_epilogue_fn prepare = clrun__op_epilogue_prepare(e->op);
    const clrun__op_kernels *kernels = clrun__op_kernels_find(e->op);
    clrun__op_call call = base_call(d, e, inputs);
    clrun__epilogue ep = {e->expression, e->helpers, e->extra_inputs, e->params, e->index};
    void *state = NULL;
    if (prepare == NULL || kernels == NULL || prepare(ctx, e->op, &call, &ep, &state) != CLRUN_OK) {
        if (e->index > 0)
            clrun__log(CLRUN_LOG_WARN, "the epilogue set of %s did not build (%s): each epilogue of %s "
                       "builds alone", f->name, clrun_last_error(ctx), e->op->name);
        else
            clrun__log(CLRUN_LOG_WARN, "epilogue %s did not build (%s): its nodes run unfused", f->name,
                       clrun_last_error(ctx));
        return false;
    }
    kernels->release(state);
    return true;
}

/* True when the group reads a donated graph input of its output's size: run alone, it writes
 * that input's block in place (a train step's momentum, updated from a gradient a product makes);
 * inside a product's kernel, only where in_place_safe holds. */
static bool updates_donated(const clrun_graph *d, const int32_t *members, int32_t count)
{
    const clrun__node *root = &d->nodes[members[count - 1]];
    uint64_t bytes = clrun_tensor_bytes(&d->tensors[root->outputs[0]].type);
    for (int32_t k = 0; k < count; k++) {
        const clrun__node *n = &d->nodes[members[k]];
        for (int i = 0; i < n->input_count; i++) {
            const clrun__tensor *t = &d->tensors[n->inputs[i]];
            if (t->kind == CLRUN__TENSOR_INPUT && t->donated && clrun_tensor_bytes(&t->type) == bytes)
                return true;
        }
    }
    return false;
}

/* The tensor whose buffer t is: t itself, or the base of the views (reshapes) that made it. */
static int32_t buffer_root(const clrun_graph *d, int32_t t)
{
    for (int32_t n = d->node_count - 1; n >= 0; n--) {
        const clrun__node *node = &d->nodes[n];
        if (node->op && node->op->view && node->output_count == 1 && node->outputs[0] == t &&
            node->input_count == 1)
            t = node->inputs[0];
    }
    return t;
}

/* Where no state is donated, whether an extra input that dies at the epilogue may still lend
 * its block (a ReLU's or tanh's mask after dY W^T in a train step): where the product may
 * write in place and reads a weight fed at run time, as a train step's parameters are. Not
 * after a product of a constant weight (inference), where writing over a residual made
 * BERT-base's matmul+add kernels 14 % slower on POCL and saved nothing the planner did not. */
static bool lends_block(const clrun_graph *d, const clrun__node *base)
{
    return clrun__op_epilogue_in_place(base->op) && base->input_count >= 2 &&
           d->tensors[base->inputs[1]].kind == CLRUN__TENSOR_INPUT;
}

/* Whether the fused node may write its output over an extra input of its byte size (see the
 * top comment): each such input is read at the element written alone (its element count, no
 * moves on the way) and shares no buffer with an operand of the product (not the same tensor,
 * nor views of one). */
static bool in_place_safe(const clrun_graph *d, const clrun__fused_op *f, const int32_t *inputs)
{
    const clrun__epilogue_base *e = f->epilogue;
    uint64_t bytes = clrun_tensor_bytes(&f->output), elements = clrun_tensor_elements(&f->output);
    for (int x = e->input_count; x < f->input_count; x++) {
        const clrun_tensor_type *t = &d->tensors[inputs[x]].type;
        if (clrun_tensor_bytes(t) != bytes)
            continue;
        if (clrun_tensor_elements(t) != elements || f->inputs[x].view_count != 0)
            return false;
        int32_t root = buffer_root(d, inputs[x]);
        for (int k = 0; k < e->input_count; k++)
            if (inputs[k] == inputs[x] || buffer_root(d, inputs[k]) == root)
                return false;
    }
    return true;
}

/* A group chosen to run as an epilogue of node `base` (the first pass), built and fused in the
 * second. */
typedef struct candidate {
    int32_t base, group, count;
    int family;               /* its set's (family_of), -1 for none */
    int32_t single;           /* the one member of a node alone */
    const int32_t *members;   /* the plan's group, else NULL: single */
    clrun__fused_op *op;
    int32_t *inputs;
} candidate;

/* The epilogue sets (shares_source): a matmul's, a convolution's on the CPU core, a
 * convolution's on the small planes' pointwise kernel, which takes only cheap epilogues or
 * those that run on vectors, and a convolution's on the other kernels with vectors along a
 * plane, which take only those that run on vectors: a set of those alone keeps the others'
 * cases out of its kernel (each case copies its store), and defines the vector epilogue only
 * where every case has one (lib/fuse/codegen.h). */
enum { FAMILY_MATMUL, FAMILY_CONV_CORE, FAMILY_CONV_SMALL, FAMILY_CONV_LANES, FAMILIES };

/* The set of an epilogue of `base` under `call` (the base op's call), or -1. */
static int family_of(clrun_context *ctx, const clrun__node *base, const clrun__op_call *call)
{
    if (strcmp(base->op->name, "matmul") == 0)
        return FAMILY_MATMUL;
    if (strcmp(base->op->name, "conv2d") != 0)
        return -1;
    if (clrun__conv_runs_as_product(ctx, call)) /* on matmul's kernel: in its set */
        return FAMILY_MATMUL;
    switch (clrun__conv_store_of(ctx, call)) {
    case CLRUN__CONV_STORE_SMALL: return FAMILY_CONV_SMALL;
    case CLRUN__CONV_STORE_LANES:
    case CLRUN__CONV_STORE_ROWS3: return FAMILY_CONV_LANES;
    default: return FAMILY_CONV_CORE;
    }
}

/* Whether the epilogues of a base op share a set on ctx's device: where the driver compiles
 * each kernel at its first launch (POCL), a product kernel built once per epilogue costs
 * 0.15-0.8 s apiece on a first run (MobileNetV3-small: the convolution core at two widths
 * with four epilogues and without, the pointwise kernel with one and without, the matmul core
 * with one and without), and the set builds each once. The kernels' hot stores run once per
 * case (EPILOGUE_SITE), so the steady state is that of one epilogue (ResNet-18, MobileNetV3,
 * ShuffleNetV2, BERT, GPT within noise). Drivers that compile at build time keep one program
 * per epilogue: nothing is gained there, and their stores are untried with a set. */
static bool shares_source(const clrun_context *ctx)
{
    return clrun__epilogue_sets == 2 || (clrun__epilogue_sets == 1 && clrun__lazy_driver(ctx));
}

/* Where a base op's epilogues share a set, its nodes with none join it as the identity case,
 * where their kernel stores an epilogue at no loss (a CPU's product core, the small planes'
 * pointwise kernel): otherwise a model's first run builds and compiles those kernels twice,
 * with the set and without (MobileNetV3-small: the core at both widths, the pointwise kernel
 * and the matmul core, about 1 s). Only where the set has a case of its own. */
static clrun_status plain_cases(clrun_context *ctx, clrun__arena *arena, const clrun_graph *d,
                                bool *claimed, candidate *chosen, int32_t *chosen_count)
{
    if (!shares_source(ctx))
        return CLRUN_OK;
    bool any[FAMILIES] = {false};
    for (int32_t c = 0; c < *chosen_count; c++)
        if (chosen[c].family >= 0)
            any[chosen[c].family] = true;
    for (int32_t m = 0; m < d->node_count; m++) {
        const clrun__node *base = &d->nodes[m];
        if (claimed[m] || base->op == NULL || base->output_count != 1 || base->guarded ||
            clrun__op_epilogue_prepare(base->op) == NULL || d->tensors[base->outputs[0]].type.dtype != CLRUN_F32 ||
            (strcmp(base->op->name, "conv2d") != 0 && strcmp(base->op->name, "matmul") != 0))
            continue;
        int32_t *inputs = NULL;
        clrun__fused_op *op = clrun__fuse_describe_epilogue(arena, d, m, NULL, 0, &inputs);
        if (op == NULL)
            continue;
        clrun__op_call call = base_call(d, op->epilogue, inputs);
        int family = family_of(ctx, base, &call); /* every family stores the identity at no loss */
        if (family < 0 || !any[family])
            continue;
        if (!clrun__fuse_epilogue_source(arena, op, ctx->info.fp64))
            return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory fusing epilogues");
        claimed[m] = true;
        chosen[(*chosen_count)++] = (candidate){m, -1, 0, family, m, NULL, op, inputs};
    }
    return CLRUN_OK;
}

clrun_status clrun__fuse_epilogues(clrun_context *ctx, clrun__arena *arena, clrun_graph *d,
                                   const clrun__fuse_plan *plan, bool *taken, clrun__fusion *f)
{
    int32_t *reads = clrun__arena_alloc(arena, ((size_t)d->tensor_count + 1) * sizeof *reads);
    bool *claimed = clrun__arena_alloc(arena, ((size_t)d->node_count + 1) * sizeof *claimed);
    candidate *chosen = clrun__arena_alloc(arena, ((size_t)d->node_count + 1) * sizeof *chosen);
    clrun__fused_op **set = clrun__arena_alloc(arena, ((size_t)d->node_count + 1) * sizeof *set);
    if (reads == NULL || claimed == NULL || chosen == NULL || set == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory fusing epilogues");
    memset(claimed, 0, ((size_t)d->node_count + 1) * sizeof *claimed);
    clrun__draft_count_reads(d, reads);
    int32_t chosen_count = 0;
    for (int32_t m = 0; m < d->node_count; m++) {
        const clrun__node *base = &d->nodes[m];
        if (base->op == NULL || base->output_count != 1 || base->guarded ||
            clrun__op_epilogue_prepare(base->op) == NULL)
            continue;
        int32_t t = base->outputs[0];
        if (reads[t] < 1 || d->tensors[t].is_output || d->tensors[t].type.dtype != CLRUN_F32)
            continue;
        int32_t n = reader_of(d, t, m);
        if (n < 0 || claimed[n] || d->nodes[n].guarded || clrun__ew_def_of(d->nodes[n].op) == NULL)
            continue;
        int32_t g = plan->group_of[n], single = n;
        if (g >= 0 && taken[g])
            continue;
        const int32_t *members = g >= 0 ? plan->members + plan->member_start[g] : &single;
        int32_t count = g >= 0 ? plan->member_start[g + 1] - plan->member_start[g] : 1;
        if (reads_among(d, t, members, count) != reads[t])
            continue; /* the product's output is read outside the group too */
        bool donated = updates_donated(d, members, count);
        if (donated && (!clrun__fuse_state_epilogues || !clrun__op_epilogue_in_place(base->op)))
            continue;
        int32_t *inputs = NULL;
        clrun__fused_op *op = clrun__fuse_describe_epilogue(arena, d, m, members, count, &inputs);
        if (op == NULL)
            continue; /* a base with more inputs than an epilogue keeps */
        clrun__op_call base_types = base_call(d, op->epilogue, inputs);
        bool vectors = clrun__fuse_epilogue_on_vectors(op);
        if (!pays_on(ctx, d, base, &base_types, members, count, vectors) || !fits(d, op, inputs, t))
            continue;
        if (strcmp(base->op->name, "conv2d") == 0 && !clrun__fuse_every_epilogue &&
            !clrun__conv_epilogue_pays(ctx, &base_types, cheap_on_lanes(d, members, count), vectors,
                                       clrun__fuse_epilogue_math(op)))
            continue;
        bool in_place = (donated || lends_block(d, base)) && in_place_safe(d, op, inputs);
        if (donated && !in_place)
            continue;
        if (in_place) { /* an extra input that dies here lends its block too (a ReLU's mask) */
            op->op.alias_safe = true;
            op->op.alias_from = op->epilogue->input_count;
        }
        if (!clrun__fuse_epilogue_source(arena, op, ctx->info.fp64))
            return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory fusing epilogues");
        for (int32_t k = 0; k < count; k++)
            claimed[members[k]] = true;
        claimed[m] = true;
        chosen[chosen_count++] = (candidate){m, g, count, family_of(ctx, base, &base_types), n,
                                             g >= 0 ? members : NULL, op, inputs};
    }
    clrun_status s = plain_cases(ctx, arena, d, claimed, chosen, &chosen_count);
    if (s != CLRUN_OK)
        return s;
    /* the epilogues of each family, as one set */
    for (int family = 0; family < FAMILIES; family++) {
        int set_count = 0;
        for (int32_t c = 0; c < chosen_count; c++)
            if (chosen[c].family == family)
                set[set_count++] = chosen[c].op;
        if (set_count > 1 && shares_source(ctx) &&
            !clrun__fuse_epilogue_set_source(arena, set, set_count, ctx->info.fp64, clrun__fuse_test_poison)) {
            for (int k = 0; k < set_count; k++) /* out of memory: each its own source again */
                if (!clrun__fuse_epilogue_source(arena, set[k], ctx->info.fp64))
                    return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory fusing epilogues");
        }
    }
    bool broken[FAMILIES] = {false}; /* a set that did not build */
    for (int32_t c = 0; c < chosen_count; c++) {
        const candidate *k = &chosen[c];
        const int32_t *members = k->members ? k->members : &k->single;
        bool in_set = k->op->epilogue->index > 0, built = false;
        if (in_set && !broken[k->family]) {
            built = builds(ctx, d, k->op, k->inputs);
            broken[k->family] = !built;
        }
        if (in_set && !built && k->count == 0)
            continue; /* a plain case: without the set, the node runs as it is */
        if (!built) { /* alone, or the set's text did not build: its own */
            if (in_set && !clrun__fuse_epilogue_source(arena, k->op, ctx->info.fp64))
                return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory fusing epilogues");
            built = builds(ctx, d, k->op, k->inputs);
        }
        if (!built)
            continue;
        if (k->count == 0) { /* a plain case: the node runs its kernel of the set */
            int32_t output = d->nodes[k->base].outputs[0];
            if (!clrun__draft_set_node(arena, d, k->base, &k->op->op, k->inputs, k->op->input_count,
                                       output, NULL, 0))
                return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory fusing epilogues");
            continue;
        }
        int32_t root = members[k->count - 1], output = d->nodes[root].outputs[0];
        for (int32_t j = 0; j < k->count - 1; j++)
            clrun__draft_remove_node(d, members[j]);
        clrun__draft_remove_node(d, k->base);
        if (!clrun__draft_set_node(arena, d, root, &k->op->op, k->inputs, k->op->input_count, output, NULL, 0))
            return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory fusing epilogues");
        if (k->group >= 0)
            taken[k->group] = true;
        f->groups[f->group_count++] = (clrun__fused_group){k->op->name, d->tensors[output].name, k->count + 1};
        f->fused_nodes += k->count + 1;
    }
    return CLRUN_OK;
}
