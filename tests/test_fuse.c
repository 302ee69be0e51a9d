/* Elementwise fusion: the planner's rules (pure, no device), and on a real device the sacred
 * invariant: every graph gives the same bits fused and unfused, in every allocator mode, on
 * random fusible DAGs with broadcasting and mixed dtypes, the example graphs and the model
 * generators; fusion holds no more memory than the unfused run and its naive total drops by the
 * bytes of exactly the intermediates it fused away; one program per executor; a kernel that does
 * not build falls back to the unfused kernels; traces and stats name what was fused. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include <clrun/clrun.h>

#include "../examples/models.h"
#include "device/program.h"
#include "device_test.h"
#include "fuse/codegen.h"
#include "fuse/fuse.h"
#include "fuse/group.h"
#include "graph/op.h"
#include "graph/graph.h"
#include "ops/ops_internal.h"
#include "rng.h"

static char cache_root[512];
static uint64_t base_seed;

static int pick(uint64_t *state, int n) { return (int)(rng_next(state) % (uint64_t)n); }

static const char *source_dir(void)
{
    const char *srcdir = getenv("srcdir");
    return srcdir && srcdir[0] ? srcdir : CLRUN_TOP_SRCDIR;
}

/* ---- building graphs --------------------------------------------------------------------- */

static clrun_tensor_type shape_of(clrun_dtype dtype, int rank, const int64_t *dims)
{
    clrun_tensor_type t = {dtype, rank, {0}};
    for (int d = 0; d < rank; d++)
        t.shape[d] = dims[d];
    return t;
}

static int32_t input(clrun_graph *g, const char *name, clrun_tensor_type t)
{
    int32_t id;
    assert_int_equal(clrun_graph_add_input(g, name, &t, false, &id), CLRUN_OK);
    return id;
}

static int32_t constant(clrun_graph *g, const char *name, clrun_tensor_type t, uint64_t seed)
{
    int32_t id;
    assert_int_equal(clrun_graph_add_constant(g, name, &t, NULL, CLRUN_FILL_UNIFORM, -2, 2, seed, &id),
                     CLRUN_OK);
    return id;
}

static int32_t node(clrun_graph *g, const char *op, const char *name, int count, const int32_t *in,
                    const clrun_attr *attrs, int attr_count)
{
    const char *names[] = {name};
    int32_t out = -1;
    if (clrun_graph_add_node(g, op, in, count, names, 1, attrs, attr_count, &out) != CLRUN_OK)
        fail_msg("add %s: %s", op, clrun_graph_last_error(g));
    return out;
}

static int32_t unary(clrun_graph *g, const char *op, const char *name, int32_t x)
{
    return node(g, op, name, 1, &x, NULL, 0);
}

static int32_t binary(clrun_graph *g, const char *op, const char *name, int32_t a, int32_t b)
{
    int32_t in[2] = {a, b};
    return node(g, op, name, 2, in, NULL, 0);
}

/* ---- the planner (pure) ------------------------------------------------------------------ */

static clrun__fuse_plan plan_of(const clrun_graph *g, int max_buffers, const bool *excluded)
{
    clrun__fuse_limits limits = {.max_buffers = max_buffers, .max_steps = 48, .fp64 = true,
                                 .layout = true, .excluded = excluded};
    clrun__fuse_plan plan;
    assert_int_equal(clrun__fuse_plan_groups(g, &limits, &plan), CLRUN_OK);
    return plan;
}

static int group_size(const clrun__fuse_plan *p, int32_t g)
{
    return p->member_start[g + 1] - p->member_start[g];
}

static void a_chain_of_single_use_ops_is_one_group(void **state)
{
    (void)state;
    clrun_graph *g;
    assert_int_equal(clrun_graph_create("chain", &g), CLRUN_OK);
    const int64_t d[2] = {4, 8};
    int32_t x = input(g, "x", shape_of(CLRUN_F32, 2, d)), b = constant(g, "b", shape_of(CLRUN_F32, 1, d + 1), 1);
    int32_t t = binary(g, "add", "t", x, b);
    t = unary(g, "gelu", "u", t);
    t = binary(g, "mul", "v", t, x); /* x read twice: by add and by mul */
    clrun_graph_mark_output(g, t);
    clrun__fuse_plan p = plan_of(g, 32, NULL);
    assert_int_equal(p.group_count, 1);
    assert_int_equal(group_size(&p, 0), 3);
    for (int32_t n = 0; n < 3; n++)
        assert_int_equal(p.group_of[n], 0);
    assert_int_equal(p.members[2], 2); /* the root is last */
    clrun__fuse_plan_free(&p);
    clrun_graph_destroy(g);
}

static void an_intermediate_read_twice_or_an_output_ends_a_group(void **state)
{
    (void)state;
    clrun_graph *g;
    assert_int_equal(clrun_graph_create("fan", &g), CLRUN_OK);
    const int64_t d[1] = {16};
    int32_t x = input(g, "x", shape_of(CLRUN_F32, 1, d));
    int32_t a = unary(g, "relu", "a", x);   /* read by b and c: stays a kernel of its own */
    int32_t b = unary(g, "neg", "b", a);
    int32_t c = unary(g, "exp", "c", a);
    int32_t e = binary(g, "add", "e", b, c); /* takes b and c in */
    int32_t f = unary(g, "abs", "f", e);     /* e is an output: f cannot take it in */
    clrun_graph_mark_output(g, e);
    clrun_graph_mark_output(g, f);
    clrun__fuse_plan p = plan_of(g, 32, NULL);
    assert_int_equal(p.group_count, 1);
    assert_int_equal(p.group_of[0], -1);
    assert_int_equal(p.group_of[1], 0);
    assert_int_equal(p.group_of[2], 0);
    assert_int_equal(p.group_of[3], 0);
    assert_int_equal(p.group_of[4], -1);
    clrun__fuse_plan_free(&p);
    clrun_graph_destroy(g);
}

static void a_smaller_producer_is_not_recomputed_per_element(void **state)
{
    (void)state;
    clrun_graph *g;
    assert_int_equal(clrun_graph_create("bias", &g), CLRUN_OK);
    const int64_t d[3] = {1, 4, 8}, row[1] = {8};
    int32_t x = input(g, "x", shape_of(CLRUN_F32, 2, d + 1)), b = input(g, "b", shape_of(CLRUN_F32, 1, row));
    int32_t s = unary(g, "sigmoid", "s", b);       /* [8]: would be computed 4 times */
    int32_t y = binary(g, "add", "y", x, s);
    int32_t z = node(g, "relu", "z", 1, &y, NULL, 0);
    int32_t one = input(g, "one", shape_of(CLRUN_F32, 3, d));
    int32_t w = binary(g, "mul", "w", z, one);     /* [1, 4, 8]: the same elements as z */
    clrun_graph_mark_output(g, w);
    clrun__fuse_plan p = plan_of(g, 32, NULL);
    assert_int_equal(p.group_count, 1);
    assert_int_equal(p.group_of[0], -1);
    assert_int_equal(group_size(&p, 0), 3);
    clrun__fuse_plan_free(&p);
    clrun_graph_destroy(g);
}

static void groups_stay_within_the_buffer_limit(void **state)
{
    (void)state;
    clrun_graph *g;
    assert_int_equal(clrun_graph_create("wide", &g), CLRUN_OK);
    const int64_t d[1] = {32};
    int32_t acc = input(g, "x0", shape_of(CLRUN_F32, 1, d));
    for (int i = 1; i < 12; i++) {
        char name[16];
        snprintf(name, sizeof name, "x%d", i);
        int32_t x = input(g, name, shape_of(CLRUN_F32, 1, d));
        snprintf(name, sizeof name, "s%d", i);
        acc = binary(g, "add", name, acc, x);
    }
    clrun_graph_mark_output(g, acc);
    for (int limit = 4; limit <= 13; limit += 3) {
        clrun__fuse_plan p = plan_of(g, limit, NULL);
        assert_true(p.group_count >= 1);
        for (int32_t k = 0; k < p.group_count; k++) {
            /* a chain of n adds reads n + 1 tensors */
            assert_true(group_size(&p, k) + 1 + 1 <= limit);
        }
        if (limit == 13)
            assert_int_equal(group_size(&p, 0), 11);
        else
            assert_true(p.group_count >= 2);
        clrun__fuse_plan_free(&p);
    }
    clrun_graph_destroy(g);
}

static void other_ops_and_exclusions_end_groups(void **state)
{
    (void)state;
    clrun_graph *g;
    assert_int_equal(clrun_graph_create("mixed", &g), CLRUN_OK);
    const int64_t d[2] = {8, 8};
    int32_t x = input(g, "x", shape_of(CLRUN_F32, 2, d)), w = constant(g, "w", shape_of(CLRUN_F32, 2, d), 2);
    int32_t a = unary(g, "relu", "a", x);
    int32_t m = binary(g, "matmul", "m", a, w);
    int32_t b = unary(g, "tanh", "b", m);
    int32_t c = unary(g, "neg", "c", b);
    clrun_graph_mark_output(g, c);
    clrun__fuse_plan p = plan_of(g, 32, NULL);
    assert_int_equal(p.group_count, 1);
    assert_int_equal(p.group_of[0], -1); /* relu alone: matmul reads it */
    assert_int_equal(p.group_of[1], -1);
    assert_int_equal(p.group_of[2], 0);
    assert_int_equal(p.group_of[3], 0);
    clrun__fuse_plan_free(&p);
    bool excluded[4] = {false, false, false, true};
    p = plan_of(g, 32, excluded);
    assert_int_equal(p.group_count, 0);
    clrun__fuse_plan_free(&p);
    clrun_graph_destroy(g);
}

static void layout_nodes_lead_groups_as_their_leaves(void **state)
{
    (void)state;
    clrun_graph *g;
    assert_int_equal(clrun_graph_create("moves", &g), CLRUN_OK);
    const int64_t d[2] = {6, 10};
    int32_t x = input(g, "x", shape_of(CLRUN_F32, 2, d));
    clrun_attr perm = {.name = "perm", .kind = CLRUN_ATTR_INTS, .ints = {1, 0}, .count = 2};
    clrun_attr shape = {.name = "shape", .kind = CLRUN_ATTR_INTS, .ints = {60}, .count = 1};
    int32_t t = node(g, "transpose", "t", 1, &x, &perm, 1);  /* 0: read through by relu */
    int32_t r = unary(g, "relu", "r", t);                     /* 1 */
    int32_t u = node(g, "transpose", "u", 1, &r, &perm, 1);  /* 2: cannot take relu in */
    int32_t v = node(g, "reshape", "v", 1, &u, &shape, 1);   /* 3: with u, one kernel: no group */
    int32_t w = node(g, "transpose", "w", 1, &x, &perm, 1);  /* 4 */
    int32_t w2 = node(g, "transpose", "w2", 1, &w, &perm, 1); /* 5: two moves, one copy */
    clrun_graph_mark_output(g, v);
    clrun_graph_mark_output(g, w2);
    clrun__fuse_plan p = plan_of(g, 32, NULL);
    assert_int_equal(p.group_count, 2);
    assert_int_equal(p.group_of[0], p.group_of[1]);
    assert_true(p.group_of[0] >= 0);
    assert_int_equal(p.group_of[2], -1);
    assert_int_equal(p.group_of[3], -1);
    assert_int_equal(p.group_of[4], p.group_of[5]);
    assert_true(p.group_of[4] >= 0 && p.group_of[4] != p.group_of[0]);
    clrun__fuse_plan_free(&p);
    clrun_graph_destroy(g);
}

static void iteration_spaces_ignore_dimensions_of_one(void **state)
{
    (void)state;
    clrun_tensor_type a = {CLRUN_F32, 3, {1, 4, 8}}, b = {CLRUN_F32, 2, {4, 8}},
                      c = {CLRUN_F32, 4, {4, 1, 8, 1}}, d = {CLRUN_F32, 2, {8, 4}},
                      s = {CLRUN_F32, 0, {0}}, one = {CLRUN_F32, 2, {1, 1}};
    assert_true(clrun__same_iteration_space(&a, &b));
    assert_true(clrun__same_iteration_space(&a, &c));
    assert_false(clrun__same_iteration_space(&a, &d));
    assert_true(clrun__same_iteration_space(&s, &one));
    assert_false(clrun__same_iteration_space(&s, &b));
}

/* ---- running ----------------------------------------------------------------------------- */

typedef struct outcome {
    uint64_t hashes[64];     /* per output: FNV-1a of its bytes */
    int outputs;
    clrun_exec_stats stats;
    int groups;
    char group_names[8][160];
    char device_type[16]; /* clrun_device_info.type of the device it ran on */
} outcome;

static uint64_t fnv1a(const unsigned char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* Inputs from a seed: floats in [-2, 2] times input_scale, integers in [-9, 9], bools 0/1. */
static float input_scale = 1.0f;
static void fill_input(clrun_context *ctx, const clrun_graph *g, int32_t t, uint64_t seed, clrun_buffer *out)
{
    const clrun_tensor_type *type = clrun_graph_tensor_type(g, t);
    uint64_t bytes = clrun_tensor_bytes(type), n = clrun_tensor_elements(type);
    unsigned char *host = malloc((size_t)bytes + 8);
    assert_non_null(host);
    uint64_t rng = seed;
    for (uint64_t i = 0; i < n; i++) {
        int64_t r = (int64_t)(rng_next(&rng) % 2001) - 1000;
        switch (type->dtype) {
        case CLRUN_F32: { float v = (float)r / 500.0f * input_scale; memcpy(host + i * 4, &v, 4); break; }
        case CLRUN_F64: { double v = (double)r / 500.0; memcpy(host + i * 8, &v, 8); break; }
        case CLRUN_I32: { int32_t v = (int32_t)(r % 10); memcpy(host + i * 4, &v, 4); break; }
        case CLRUN_I64: { int64_t v = r % 10; memcpy(host + i * 8, &v, 8); break; }
        default: host[i] = (unsigned char)(r & 1); break;
        }
    }
    assert_int_equal(clrun_alloc_ex(ctx, bytes, 0, clrun_graph_tensor_name(g, t), out), CLRUN_OK);
    assert_int_equal(clrun_buffer_write(ctx, out, host), CLRUN_OK);
    free(host);
}

typedef struct how {
    clrun_exec_mode mode;
    const char *allocator;
    bool out_of_order;
    int fusion;
    bool profile;
} how;

/* A context with h's allocator and queue (the environment's options read now), in guard mode:
 * a block freed is poisoned before another run takes it, so that a kernel that left part of
 * its output unwritten cannot read the same values an earlier run on the context left there. */
static clrun_context *context_for(how h)
{
    clrun_context_options o;
    clrun_context_options_init(&o);
    o.allocator = h.allocator;
    o.out_of_order = h.out_of_order ? 1 : -1;
    o.guard = 1;
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(&o, &ctx), CLRUN_OK);
    return ctx;
}

static outcome run_graph_in(clrun_context *ctx, const clrun_graph *g, how h, uint64_t seed);

/* The contexts run_graph keeps, one per allocator and queue, made at their first use and
 * destroyed at the end: a context per run built every program again (from source under
 * oclgrind, which caches none). Each run leaves nothing in the pool (run_graph_in checks). */
static struct {
    const char *allocator;
    bool out_of_order;
    clrun_context *ctx;
} kept_contexts[8];

static clrun_context *kept_context(how h)
{
    size_t k = 0;
    for (; k < sizeof kept_contexts / sizeof kept_contexts[0] && kept_contexts[k].ctx; k++)
        if (strcmp(kept_contexts[k].allocator, h.allocator) == 0 && kept_contexts[k].out_of_order == h.out_of_order)
            return kept_contexts[k].ctx;
    if (k == sizeof kept_contexts / sizeof kept_contexts[0])
        fail_msg("more than %zu kinds of context", k);
    kept_contexts[k].allocator = h.allocator;
    kept_contexts[k].out_of_order = h.out_of_order;
    kept_contexts[k].ctx = context_for(h);
    return kept_contexts[k].ctx;
}

static void destroy_kept_contexts(void)
{
    for (size_t k = 0; k < sizeof kept_contexts / sizeof kept_contexts[0]; k++) {
        clrun_context_destroy(kept_contexts[k].ctx);
        kept_contexts[k].ctx = NULL;
    }
}

/* Runs g once as `how` says, on the context kept for its allocator and queue, and returns the
 * outputs' hashes, its stats and groups. */
static outcome run_graph(const clrun_graph *g, how h, uint64_t seed)
{
    return run_graph_in(kept_context(h), g, h, seed);
}

/* The same on a new context, which reads the environment's options now. */
static outcome run_graph_fresh(const clrun_graph *g, how h, uint64_t seed)
{
    clrun_context *ctx = context_for(h);
    outcome r = run_graph_in(ctx, g, h, seed);
    clrun_context_destroy(ctx);
    return r;
}

/* The same on ctx (made by context_for(h)), which keeps the kernels it built. */
static outcome run_graph_in(clrun_context *ctx, const clrun_graph *g, how h, uint64_t seed)
{
    clrun_exec_options eo;
    clrun_exec_options_init(&eo);
    eo.mode = h.mode;
    eo.fusion = h.fusion;
    eo.profile = h.profile;
    eo.plan_time_limit_s = 0.05;
    clrun_memory_stats before;
    assert_int_equal(clrun_memory_stats_get(ctx, &before), CLRUN_OK);
    clrun_exec *exec = NULL;
    if (clrun_exec_create(ctx, g, &eo, &exec) != CLRUN_OK)
        fail_msg("exec_create: %s", clrun_last_error(ctx));
    const clrun_tensor_id *ins, *outs;
    int32_t n_in = clrun_graph_inputs(g, &ins), n_out = clrun_graph_outputs(g, &outs);
    assert_true(n_in <= 16 && n_out <= 64);
    outcome r = {.outputs = n_out};
    snprintf(r.device_type, sizeof r.device_type, "%s", clrun_context_device(ctx)->type);
    clrun_buffer inputs[16];
    for (int32_t i = 0; i < n_in; i++)
        fill_input(ctx, g, ins[i], seed + (uint64_t)i, &inputs[i]);
    if (clrun_exec_run(exec, inputs, n_in) != CLRUN_OK)
        fail_msg("run: %s", clrun_last_error(ctx));
    for (int32_t i = 0; i < n_out; i++) {
        uint64_t bytes = clrun_tensor_bytes(clrun_graph_tensor_type(g, outs[i]));
        unsigned char *host = malloc((size_t)bytes);
        assert_non_null(host);
        assert_int_equal(clrun_exec_read_output(exec, i, host, bytes), CLRUN_OK);
        r.hashes[i] = fnv1a(host, (size_t)bytes);
        free(host);
    }
    for (int32_t i = 0; i < n_in; i++)
        if (!g->tensors[ins[i]].donated)
            assert_int_equal(clrun_free(ctx, &inputs[i]), CLRUN_OK);
    assert_int_equal(clrun_exec_stats_get(exec, &r.stats), CLRUN_OK);
    const clrun_fused_group *groups;
    r.groups = clrun_exec_fused_groups(exec, &groups);
    for (int i = 0; i < r.groups && i < 8; i++)
        snprintf(r.group_names[i], sizeof r.group_names[i], "%s", groups[i].name);
    clrun_exec_destroy(exec);
    clrun_memory_stats ms;
    assert_int_equal(clrun_memory_stats_get(ctx, &ms), CLRUN_OK);
    assert_int_equal(ms.in_use, before.in_use); /* the run left nothing behind in the pool */
    return r;
}

/* The run a fused one is compared with: pooled on buddy, in order, fusion off. */
static outcome run_unfused(const clrun_graph *g, uint64_t seed)
{
    how off = {CLRUN_EXEC_POOLED, "buddy", false, -1, false};
    return run_graph(g, off, seed);
}

/* Writes g where a failure's reader can rerun it (clrun run FILE). */
static void keep_failing_graph(const clrun_graph *g, char *path, size_t size)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(path, size, "%s/test_fuse_failing.graph", tmp && tmp[0] ? tmp : "/tmp");
    FILE *f = fopen(path, "w");
    if (f == NULL || clrun_graph_write(g, f) != CLRUN_OK)
        snprintf(path, size, "(could not be written)");
    if (f)
        fclose(f);
}

/* Every node of the graph is a kernel, a view, a fold, or in a fused group (one kernel each). */
static void expect_kernel_count(const clrun_exec_stats *fused, const clrun_exec_stats *unfused)
{
    assert_int_equal(unfused->graph_nodes, unfused->kernels + unfused->views + unfused->folded_nodes);
    assert_int_equal(fused->graph_nodes, unfused->graph_nodes);
    assert_int_equal(fused->kernels + fused->views, fused->graph_nodes - fused->folded_nodes -
                                                        fused->fused_nodes + fused->fused_groups);
}

static void expect_same_bits(const clrun_graph *g, const outcome *a, const outcome *b,
                                const char *what, uint64_t seed)
{
    assert_int_equal(a->outputs, b->outputs);
    for (int i = 0; i < a->outputs; i++)
        if (a->hashes[i] != b->hashes[i]) {
            char path[512];
            keep_failing_graph(g, path, sizeof path);
            fail_msg("%s (seed %llu): output %d differs from the unfused run; the graph is %s",
                     what, (unsigned long long)seed, i, path);
        }
}


/* ---- random fusible graphs --------------------------------------------------------------- */

typedef struct dag {
    clrun_graph *graph;
    int32_t tensors[256];
    int count;
    int names;
    int64_t full[3]; /* the biggest shape; every tensor's shape is a sub-shape of it */
} dag;

static int32_t dag_node(dag *r, const char *op, const int32_t *in, int n, const clrun_attr *attrs, int count)
{
    char name[16];
    snprintf(name, sizeof name, "t%d", r->names++);
    int32_t out = node(r->graph, op, name, n, in, attrs, count);
    if (clrun_graph_tensor_type(r->graph, out)->dtype == CLRUN_F32)
        r->tensors[r->count++] = out;
    return out;
}

/* A float tensor, preferring the newest (chains are what fuses). */
static int32_t recent(dag *r, uint64_t *rng)
{
    int back = pick(rng, 3) == 0 ? pick(rng, r->count) : pick(rng, r->count < 3 ? r->count : 3);
    return r->tensors[r->count - 1 - back];
}

/* A random sub-shape of full: each dimension kept, made 1, or dropped from the left. */
static clrun_tensor_type sub_shape(dag *r, uint64_t *rng)
{
    clrun_tensor_type t = {CLRUN_F32, 3, {r->full[0], r->full[1], r->full[2]}};
    for (int d = 0; d < 3; d++)
        if (pick(rng, 3) == 0)
            t.shape[d] = 1;
    int drop = pick(rng, 4);
    if (drop > 0 && drop < 3) {
        t.rank = 3 - drop;
        memmove(t.shape, t.shape + drop, (size_t)t.rank * sizeof t.shape[0]);
    }
    return t;
}

static dag make_dag(uint64_t seed, int nodes)
{
    dag r = {0};
    uint64_t rng = seed;
    assert_int_equal(clrun_graph_create("fusible", &r.graph), CLRUN_OK);
    for (int d = 0; d < 3; d++)
        r.full[d] = 1 + pick(&rng, 9);
    clrun_tensor_type full = {CLRUN_F32, 3, {r.full[0], r.full[1], r.full[2]}};
    r.tensors[r.count++] = input(r.graph, "x", full);
    r.tensors[r.count++] = input(r.graph, "y", sub_shape(&r, &rng));
    r.tensors[r.count++] = constant(r.graph, "c", sub_shape(&r, &rng), seed);
    static const char *const unaries[] = {"relu", "neg", "tanh", "sigmoid", "gelu", "gelu_erf", "abs",
                                          "softsign", "hard_swish", "erf", "sin", "round", "copy"};
    static const char *const binaries[] = {"add", "sub", "mul", "div", "maximum", "minimum", "prelu", "pow"};
    static const char *const compares[] = {"less", "greater", "equal", "greater_equal"};
    for (int n = 0; n < nodes && r.count < 240; n++) {
        int32_t a = recent(&r, &rng);
        int kind = pick(&rng, 10);
        if (kind < 4) {
            dag_node(&r, unaries[pick(&rng, 13)], &a, 1, NULL, 0);
        } else if (kind < 7) {
            int32_t in[2] = {a, r.tensors[pick(&rng, r.count)]};
            if (pick(&rng, 2))
                in[0] = in[1], in[1] = a;
            dag_node(&r, binaries[pick(&rng, 8)], in, 2, NULL, 0);
        } else if (kind == 7) { /* a bool in the middle: where(a < b, a, b) */
            int32_t in[2] = {a, r.tensors[pick(&rng, r.count)]};
            int32_t c = dag_node(&r, compares[pick(&rng, 4)], in, 2, NULL, 0);
            int32_t w[3] = {c, in[pick(&rng, 2)], r.tensors[pick(&rng, r.count)]};
            dag_node(&r, "where", w, 3, NULL, 0);
        } else if (kind == 8) { /* through integers and back */
            clrun_attr to_i32 = {.name = "to", .kind = CLRUN_ATTR_INT, .i = CLRUN_I32};
            clrun_attr to_f32 = {.name = "to", .kind = CLRUN_ATTR_INT, .i = CLRUN_F32};
            clrun_attr sc[2] = {{.name = "alpha", .kind = CLRUN_ATTR_FLOAT, .f = 4.5},
                                {.name = "beta", .kind = CLRUN_ATTR_FLOAT, .f = -0.25}};
            int32_t s = dag_node(&r, "scale", &a, 1, sc, 2);
            int32_t i = dag_node(&r, "cast", &s, 1, &to_i32, 1);
            int32_t j = dag_node(&r, "mul", (int32_t[2]){i, i}, 2, NULL, 0);
            dag_node(&r, "cast", &j, 1, &to_f32, 1);
        } else { /* a kernel fusion stops at */
            dag_node(&r, "softmax", &a, 1, NULL, 0);
        }
    }
    for (int i = 3; i < r.count; i++)
        if (pick(&rng, 6) == 0 || i == r.count - 1)
            assert_int_equal(clrun_graph_mark_output(r.graph, r.tensors[i]), CLRUN_OK);
    assert_int_equal(clrun_graph_validate(r.graph), CLRUN_OK);
    return r;
}

static const how every_mode[] = {
    {CLRUN_EXEC_NAIVE, "buddy", false, 1, false},   {CLRUN_EXEC_POOLED, "buddy", false, 1, false},
    {CLRUN_EXEC_POOLED, "slab", false, 1, false},   {CLRUN_EXEC_POOLED, "bump", false, 1, false},
    {CLRUN_EXEC_PLANNED, "buddy", false, 1, false}, {CLRUN_EXEC_POOLED, "buddy", true, 1, false},
    {CLRUN_EXEC_PLANNED, "slab", true, 1, false},   {CLRUN_EXEC_POOLED, "tlsf", false, 1, false},
    {CLRUN_EXEC_POOLED, "tlsf", true, 1, false},
};
#define MODE_COUNT (sizeof every_mode / sizeof every_mode[0])

/* The modes a test runs its graph in: every_mode[(first + k) % MODE_COUNT] for k below n. All
 * of them; below 3 rounds (the sanitizer build's, and oclgrind's, where each run of a product
 * is minutes of simulation) three, starting three further along at each call, so that the tests
 * together still run every mode. */
typedef struct mode_walk {
    size_t first, n, k;
} mode_walk;

static mode_walk modes_tried(void)
{
    static size_t next;
    if (clrun_test_rounds(3) >= 3)
        return (mode_walk){0, MODE_COUNT, 0};
    mode_walk w = {next, 3, 0};
    next = (next + 3) % MODE_COUNT;
    return w;
}

static void random_fusible_graphs_give_the_same_bits_in_every_mode(void **state)
{
    (void)state;
    int fused = 0, rounds = clrun_test_rounds(10);
    enum { MODES = sizeof every_mode / sizeof every_mode[0] };
    /* a context per mode for every round, as an application keeps one: each builds the kernels
     * of the ops once, not once per graph */
    clrun_context *contexts[MODES];
    for (size_t m = 0; m < MODES; m++)
        contexts[m] = context_for(every_mode[m]);
    for (int k = 0; k < rounds; k++) {
        uint64_t seed = base_seed * 1000 + (uint64_t)k;
        dag r = make_dag(seed, 10 + (int)(seed % 30));
        how reference = {CLRUN_EXEC_NAIVE, "buddy", false, -1, false};
        outcome base = run_graph_in(contexts[0], r.graph, reference, seed);
        assert_int_equal(base.groups, 0);
        for (size_t m = 0; m < MODES; m++) {
            outcome o = run_graph_in(contexts[m], r.graph, every_mode[m], seed);
            char what[96];
            snprintf(what, sizeof what, "%s/%s%s fused", clrun_exec_mode_name(every_mode[m].mode),
                     every_mode[m].allocator, every_mode[m].out_of_order ? " out-of-order" : "");
            expect_same_bits(r.graph, &o, &base, what, seed);
            expect_kernel_count(&o.stats, &base.stats);
            fused += o.groups > 0;
        }
        clrun_graph_destroy(r.graph);
    }
    for (size_t m = 0; m < MODES; m++)
        clrun_context_destroy(contexts[m]);
    assert_true(fused > 0 || rounds < 10); /* the generator makes graphs that fuse (one of a few
                                              rounds may not) */
}

/* ---- example graphs and generated models ------------------------------------------------- */

/* The bytes of the caller's intermediates that the rewrite fused away; *groups gets the groups
 * it made (with none, the executor runs the caller's graph itself). */
static uint64_t fused_away_bytes(const clrun_graph *g, int *groups)
{
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    clrun__fusion f;
    assert_int_equal(clrun__fuse(ctx, g, true, true, &f), CLRUN_OK);
    uint64_t bytes = 0;
    for (int32_t t = 0; t < g->tensor_count; t++) {
        bool kept = false;
        for (int32_t u = 0; u < f.graph->tensor_count && !kept; u++)
            kept = strcmp(f.graph->tensors[u].name, g->tensors[t].name) == 0;
        if (!kept) {
            assert_int_equal(g->tensors[t].kind, CLRUN__TENSOR_INTERMEDIATE);
            assert_false(g->tensors[t].is_output);
            bytes += clrun_tensor_bytes(&g->tensors[t].type);
        }
    }
    assert_int_equal(clrun_graph_validate((clrun_graph *)f.graph), CLRUN_OK);
    *groups = f.group_count;
    if (f.group_count == 0)
        assert_ptr_equal(f.graph, g);
    clrun__fusion_free(ctx, &f);
    clrun_context_destroy(ctx);
    return bytes;
}

/* Fused against unfused, pooled (and planned): same bits, no more peak, and a naive total
 * smaller by exactly the fused-away intermediates. A graph with nothing to fuse runs as it is. */
static void check_model(const clrun_graph *g, const char *what, bool planned_too)
{
    int groups;
    uint64_t away = fused_away_bytes(g, &groups);
    if (groups == 0) {
        fprintf(stderr, "%s: nothing to fuse\n", what);
        return;
    }
    const clrun_exec_mode modes[] = {CLRUN_EXEC_POOLED, CLRUN_EXEC_PLANNED};
    for (int m = 0; m < (planned_too ? 2 : 1); m++) {
        how off = {modes[m], "buddy", false, -1, false}, on = {modes[m], "buddy", false, 1, false};
        outcome a = run_graph(g, off, 11), b = run_graph(g, on, 11);
        expect_same_bits(g, &b, &a, what, 11);
        if (b.stats.peak_bytes > a.stats.peak_bytes)
            fail_msg("%s (%s): fused peak %llu above unfused %llu", what, clrun_exec_mode_name(modes[m]),
                     (unsigned long long)b.stats.peak_bytes, (unsigned long long)a.stats.peak_bytes);
        assert_int_equal(a.stats.naive_bytes - b.stats.naive_bytes, away);
        expect_kernel_count(&b.stats, &a.stats);
        if (m == 0)
            fprintf(stderr, "%s: %d groups, %d nodes -> %d kernels, naive %llu -> %llu bytes\n", what,
                    b.stats.fused_groups, b.stats.graph_nodes, b.stats.kernels,
                    (unsigned long long)a.stats.naive_bytes, (unsigned long long)b.stats.naive_bytes);
    }
}

static void example_graphs_keep_their_bits_and_memory(void **state)
{
    (void)state;
    static const char *const examples[] = {"mlp", "gpt2_block", "resnet_block"};
    for (size_t i = 0; i < sizeof examples / sizeof examples[0]; i++) {
        char path[4200], err[512];
        snprintf(path, sizeof path, "%s/examples/%s.graph", source_dir(), examples[i]);
        clrun_graph *g = NULL;
        if (clrun_graph_load(path, &g, err, sizeof err) != CLRUN_OK)
            fail_msg("%s", err);
        check_model(g, examples[i], true);
        clrun_graph_destroy(g);
    }
}

/* The generators' models at batch 1, sequences shortened to 32 tokens (the layers and their
 * fusion are those of the full models; bench/bench_fusion runs those). Below 3 rounds (the
 * sanitizer build's) the transformers have 2 of their 12 layers, each the same layer. */
static void generated_models_keep_their_bits_and_memory(void **state)
{
    (void)state;
    const int layers = clrun_test_rounds(3) < 3 ? 2 : 0;
    for (const char *const *model = gen_model_names; *model; model++) {
        gen_model_options options = {.batch = 1, .seq = gen_model_default_seq(*model) ? 32 : 0,
                                     .layers = layers};
        clrun_graph *g = NULL;
        char err[512];
        if (gen_model(*model, &options, &g, err, sizeof err) != CLRUN_OK)
            fail_msg("%s: %s", *model, err);
        check_model(g, *model, false);
        clrun_graph_destroy(g);
    }
}

/* ---- building, falling back, naming ------------------------------------------------------ */

/* x [32, 48] -> add(b) -> gelu -> mul(x) -> relu: one group of four, then a softmax. */
static clrun_graph *chain4(void)
{
    clrun_graph *g;
    assert_int_equal(clrun_graph_create("chain4", &g), CLRUN_OK);
    const int64_t d[2] = {32, 48};
    int32_t x = input(g, "x", shape_of(CLRUN_F32, 2, d)), b = constant(g, "b", shape_of(CLRUN_F32, 1, d + 1), 3);
    int32_t t = binary(g, "add", "t", x, b);
    t = unary(g, "gelu", "u", t);
    t = binary(g, "mul", "v", t, x);
    t = unary(g, "relu", "w", t);
    t = unary(g, "softmax", "y", t);
    clrun_graph_mark_output(g, t);
    return g;
}

static void one_program_is_built_per_executor(void **state)
{
    (void)state;
    clrun_graph *g = chain4();
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    clrun_exec_options eo;
    clrun_exec_options_init(&eo);
    eo.fusion = -1;
    clrun_exec *exec = NULL;
    assert_int_equal(clrun_exec_create(ctx, g, &eo, &exec), CLRUN_OK); /* the unfused programs */
    clrun_exec_destroy(exec);
    clrun_program_stats before, after;
    clrun_program_stats_get(ctx, &before);
    eo.fusion = 1;
    assert_int_equal(clrun_exec_create(ctx, g, &eo, &exec), CLRUN_OK);
    clrun_program_stats_get(ctx, &after);
    assert_int_equal((after.builds_from_source + after.cache_hits) -
                         (before.builds_from_source + before.cache_hits), 1);
    clrun_exec_stats s;
    clrun_exec_stats_get(exec, &s);
    assert_int_equal(s.graph_nodes, 5);
    assert_int_equal(s.kernels, 2);
    assert_int_equal(s.fused_groups, 1);
    assert_int_equal(s.fused_nodes, 4);
    const clrun_fused_group *groups;
    assert_int_equal(clrun_exec_fused_groups(exec, &groups), 1);
    assert_string_equal(groups[0].name, "fused:add+gelu+mul+relu");
    assert_string_equal(groups[0].output, "w");
    assert_int_equal(groups[0].nodes, 4);
    clrun_exec_destroy(exec);
    /* A second executor of the same graph finds the program built. */
    clrun_program_stats_get(ctx, &before);
    assert_int_equal(clrun_exec_create(ctx, g, &eo, &exec), CLRUN_OK);
    clrun_exec *second = NULL;
    assert_int_equal(clrun_exec_create(ctx, g, &eo, &second), CLRUN_OK);
    clrun_program_stats_get(ctx, &after);
    assert_true(after.builds_from_source + after.cache_hits - before.builds_from_source - before.cache_hits <= 1);
    clrun_exec_destroy(second);
    clrun_exec_destroy(exec);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

/* Groups whose kernels differ only in their size, or not at all, share one kernel of the
 * program (POCL compiles each kernel that runs: EfficientNet-B0's 49 SiLU groups are one), and
 * run with the same bits as unfused. */
static void groups_of_the_same_text_share_one_kernel(void **state)
{
    (void)state;
    clrun_graph *g;
    assert_int_equal(clrun_graph_create("silus", &g), CLRUN_OK);
    const int64_t big[2] = {4, 8}, small[2] = {3, 5};
    int32_t x1 = input(g, "x1", shape_of(CLRUN_F32, 2, big)), x2 = input(g, "x2", shape_of(CLRUN_F32, 2, small));
    int32_t x3 = input(g, "x3", shape_of(CLRUN_F32, 2, big));
    clrun_graph_mark_output(g, binary(g, "mul", "y1", x1, unary(g, "sigmoid", "s1", x1)));
    clrun_graph_mark_output(g, binary(g, "mul", "y2", x2, unary(g, "sigmoid", "s2", x2)));
    clrun_graph_mark_output(g, binary(g, "add", "y3", x3, unary(g, "relu", "s3", x3)));
    clrun__fuse_plan p = plan_of(g, 32, NULL);
    assert_int_equal(p.group_count, 3);
    clrun__arena arena = {0};
    clrun__fused_op *ops[3];
    for (int32_t k = 0; k < 3; k++) {
        int32_t *inputs = NULL;
        ops[k] = clrun__fuse_describe(&arena, g, &p, k, &inputs);
        assert_non_null(ops[k]);
    }
    char *text = clrun__fuse_program(ops, 3, true, NULL);
    assert_non_null(text);
    int kernels = 0;
    for (const char *at = text; (at = strstr(at, "__kernel void ")) != NULL; at++)
        kernels++;
    assert_int_equal(kernels, 2); /* the two SiLUs (32 and 15 elements) share theirs */
    int silu[2], n = 0;
    for (int k = 0; k < 3; k++)
        if (strstr(ops[k]->name, "sigmoid"))
            silu[n++] = k;
    assert_int_equal(n, 2);
    assert_string_equal(ops[silu[0]]->kernel, ops[silu[1]]->kernel);
    assert_true(ops[silu[0]]->launch.n[0] != ops[silu[1]]->launch.n[0]);
    for (int k = 0; k < 3; k++) /* every op's kernel is defined */
        assert_non_null(strstr(text, ops[k]->kernel));
    free(text);
    clrun__arena_free(&arena);
    clrun__fuse_plan_free(&p);
    check_model(g, "silus", true);
    clrun_graph_destroy(g);
}

static char warning[2048];
static void keep_warning(clrun_log_level level, const char *message, void *user)
{
    (void)user;
    if (level == CLRUN_LOG_WARN && strstr(message, "did not build:"))
        snprintf(warning, sizeof warning, "%s", message);
}

static void a_kernel_that_does_not_build_runs_unfused(void **state)
{
    (void)state;
    clrun_graph *g = chain4();
    /* a second group, which builds: x * 2 -> exp */
    int32_t x = clrun_graph_find(g, "x");
    clrun_attr two[1] = {{.name = "alpha", .kind = CLRUN_ATTR_FLOAT, .f = 2.0}};
    int32_t s = node(g, "scale", "s2", 1, &x, two, 1);
    clrun_graph_mark_output(g, unary(g, "exp", "e2", s));
    how on = {CLRUN_EXEC_POOLED, "buddy", false, 1, false};
    outcome a = run_unfused(g, 5);
    warning[0] = '\0';
    clrun_log_set_handler(keep_warning, NULL);
    clrun_log_set_level(CLRUN_LOG_WARN);
    clrun__fuse_test_poison = "gelu";
    outcome b = run_graph(g, on, 5);
    clrun__fuse_test_poison = NULL;
    clrun_log_set_level(CLRUN_LOG_NONE);
    clrun_log_set_handler(NULL, NULL);
    expect_same_bits(g, &b, &a, "poisoned gelu group", 5);
    assert_int_equal(b.groups, 1);
    assert_string_equal(b.group_names[0], "fused:scale+exp");
    assert_non_null(strstr(warning, "fused:add+gelu+mul+relu"));
    assert_non_null(strstr(warning, "its nodes run unfused"));
    clrun_graph_destroy(g);
}

static void spans_name_fused_kernels_after_their_ops(void **state)
{
    (void)state;
    clrun_graph *g = chain4();
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    clrun_exec_options eo;
    clrun_exec_options_init(&eo);
    eo.profile = true;
    eo.fusion = 1;
    clrun_exec *exec = NULL;
    assert_int_equal(clrun_exec_create(ctx, g, &eo, &exec), CLRUN_OK);
    clrun_buffer x;
    fill_input(ctx, g, clrun_graph_find(g, "x"), 1, &x);
    assert_int_equal(clrun_exec_run(exec, &x, 1), CLRUN_OK);
    const clrun_exec_span *spans;
    assert_int_equal(clrun_exec_profile(exec, &spans), 2);
    assert_string_equal(spans[0].op, "fused:add+gelu+mul+relu");
    assert_string_equal(spans[0].name, "w");
    assert_string_equal(spans[1].op, "softmax");
    clrun_exec_destroy(exec);
    clrun_free(ctx, &x);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

/* The teardown of the test that sets CLRUN_FUSION: unset, even when it failed, so that no
 * context made later reads it. */
static int clear_fusion_environment(void **state)
{
    (void)state;
    unsetenv("CLRUN_FUSION");
    return 0;
}

static void clrun_fusion_0_turns_it_off(void **state)
{
    (void)state;
    clrun_graph *g = chain4();
    setenv("CLRUN_FUSION", "0", 1);
    how context = {CLRUN_EXEC_POOLED, "buddy", false, 0, false}, forced = {CLRUN_EXEC_POOLED, "buddy", false, 1, false};
    outcome a = run_graph_fresh(g, context, 3), b = run_graph_fresh(g, forced, 3);
    setenv("CLRUN_FUSION", "yes", 1);
    outcome c = run_graph_fresh(g, context, 3);
    unsetenv("CLRUN_FUSION");
    assert_int_equal(a.groups, 0);
    assert_int_equal(a.stats.kernels, 5);
    assert_int_equal(b.groups, 1); /* the option overrides the environment */
    assert_int_equal(c.groups, 1);
    expect_same_bits(g, &b, &a, "chain4", 3);
    clrun_graph_destroy(g);
}

/* Chains in every dtype the ops take: integers, bools, f64 where the device has it. */
static void every_dtype_fuses_with_the_same_bits(void **state)
{
    (void)state;
    clrun_device_info *list;
    size_t count, chosen;
    assert_int_equal(clrun_device_list(&list, &count), CLRUN_OK);
    assert_int_equal(clrun_device_select(list, count, NULL, NULL, &chosen), CLRUN_OK);
    bool fp64 = list[chosen].fp64;
    clrun_device_list_free(list);
    const clrun_dtype dtypes[] = {CLRUN_I32, CLRUN_I64, CLRUN_F64};
    for (int k = 0; k < (fp64 ? 3 : 2); k++) {
        clrun_graph *g;
        assert_int_equal(clrun_graph_create("typed", &g), CLRUN_OK);
        const int64_t d[3] = {3, 5, 7};
        clrun_dtype dt = dtypes[k];
        int32_t x = input(g, "x", shape_of(dt, 3, d)), y = input(g, "y", shape_of(dt, 2, d + 1));
        clrun_attr fmod0 = {.name = "fmod", .kind = CLRUN_ATTR_INT, .i = 0};
        clrun_attr lo = {.name = "min", .kind = CLRUN_ATTR_FLOAT, .f = -4};
        int32_t t = binary(g, "mul", "t", x, y);
        t = binary(g, "sub", "t2", t, x);
        int32_t in[2] = {t, y};
        t = node(g, "mod", "t3", 2, in, &fmod0, 1);
        t = node(g, "clip", "t4", 1, &t, &lo, 1);
        int32_t c = binary(g, "less", "c", t, x);
        int32_t nc = unary(g, "not", "nc", c);
        int32_t w[3] = {nc, t, y};
        t = node(g, "where", "w", 3, w, NULL, 0);
        clrun_attr to_bool = {.name = "to", .kind = CLRUN_ATTR_INT, .i = CLRUN_BOOL};
        int32_t bt = node(g, "cast", "b", 1, &t, &to_bool, 1);
        int32_t xo = binary(g, "xor", "xo", bt, nc);
        clrun_graph_mark_output(g, t);
        clrun_graph_mark_output(g, xo);
        outcome a = run_unfused(g, 9);
        for (mode_walk mw = modes_tried(); mw.k < mw.n; mw.k++) {
            outcome b = run_graph(g, every_mode[(mw.first + mw.k) % MODE_COUNT], 9);
            expect_same_bits(g, &b, &a, clrun_dtype_name(dt), 9);
            assert_true(b.groups >= 1);
        }
        clrun_graph_destroy(g);
    }
}

/* ---- epilogues ---------------------------------------------------------------------------- */

static void epilogues_run_in_the_product_kernel_with_the_same_bits(void **state)
{
    (void)state;
    clrun_graph *g;
    assert_int_equal(clrun_graph_create("epilogues", &g), CLRUN_OK);
    /* matmul + bias, then a residual, gelu, a column scale (read at i / 40): one epilogue */
    int32_t x = input(g, "x", shape_of(CLRUN_F32, 2, (int64_t[]){20, 33}));
    int32_t w = constant(g, "w", shape_of(CLRUN_F32, 2, (int64_t[]){33, 40}), 1);
    int32_t b = constant(g, "b", shape_of(CLRUN_F32, 1, (int64_t[]){40}), 2);
    int32_t r = input(g, "r", shape_of(CLRUN_F32, 2, (int64_t[]){20, 40}));
    int32_t col = constant(g, "col", shape_of(CLRUN_F32, 2, (int64_t[]){20, 1}), 3);
    int32_t m = node(g, "matmul", "m", 3, (int32_t[]){x, w, b}, NULL, 0);
    int32_t t = binary(g, "add", "t", m, r);
    t = unary(g, "gelu", "u", t);
    clrun_graph_mark_output(g, binary(g, "mul", "y1", t, col));
    /* conv2d, a per-channel shift (read at c, the channel), relu6: one epilogue */
    int32_t im = input(g, "im", shape_of(CLRUN_F32, 4, (int64_t[]){2, 3, 9, 9}));
    /* 40 channels of 49 positions: full tiles and tiles at both edges on every vector width */
    int32_t k = constant(g, "k", shape_of(CLRUN_F32, 4, (int64_t[]){40, 3, 3, 3}), 4);
    int32_t shift = constant(g, "shift", shape_of(CLRUN_F32, 3, (int64_t[]){40, 1, 1}), 5);
    clrun_attr six = {.name = "max", .kind = CLRUN_ATTR_FLOAT, .f = 6.0};
    int32_t c = node(g, "conv2d", "c", 2, (int32_t[]){im, k}, NULL, 0);
    int32_t cs = binary(g, "add", "cs", c, shift);
    int32_t cr = unary(g, "relu", "cr", cs);
    clrun_graph_mark_output(g, node(g, "clip", "y2", 1, &cr, &six, 1));
    /* conv2d then tanh (clrun's own exp), after the core and after a depthwise conv2d: an
     * epilogue but on a CPU */
    int32_t c3 = node(g, "conv2d", "c3", 2, (int32_t[]){im, k}, NULL, 0);
    clrun_graph_mark_output(g, unary(g, "tanh", "y4", c3));
    int32_t kd = constant(g, "kd", shape_of(CLRUN_F32, 4, (int64_t[]){3, 1, 3, 3}), 6);
    clrun_attr three = {.name = "groups", .kind = CLRUN_ATTR_INT, .i = 3};
    int32_t c4 = node(g, "conv2d", "c4", 2, (int32_t[]){im, kd}, &three, 1);
    clrun_graph_mark_output(g, unary(g, "tanh", "y5", c4));
    /* SiLU, x * sigmoid(x): the group reads the product's output twice, and takes it whole */
    int32_t c5 = node(g, "conv2d", "c5", 2, (int32_t[]){im, k}, NULL, 0);
    clrun_graph_mark_output(g, binary(g, "mul", "y6", c5, unary(g, "sigmoid", "s5", c5)));
    /* a bool input is no float extra: where stays a kernel of its own */
    int32_t cond = input(g, "cond", shape_of(CLRUN_BOOL, 2, (int64_t[]){20, 40}));
    int32_t m2 = node(g, "matmul", "m2", 2, (int32_t[]){x, w}, NULL, 0);
    clrun_graph_mark_output(g, node(g, "where", "y3", 3, (int32_t[]){cond, m2, r}, NULL, 0));
    outcome base = run_unfused(g, 8);
    const how modes[] = {{CLRUN_EXEC_POOLED, "buddy", false, 1, false},
                         {CLRUN_EXEC_PLANNED, "buddy", false, 1, false},
                         {CLRUN_EXEC_NAIVE, "buddy", true, 1, false}};
    clrun__fuse_every_epilogue = true; /* gelu too, which a CPU leaves to its own kernel */
    for (size_t i = 0; i < 3; i++) {
        outcome o = run_graph(g, modes[i], 8);
        expect_same_bits(g, &o, &base, "epilogues", 8);
        assert_int_equal(o.groups, 5);
        assert_string_equal(o.group_names[0], "fused:matmul+add+gelu+mul");
        assert_string_equal(o.group_names[1], "fused:conv2d+add+relu+clip");
        assert_string_equal(o.group_names[2], "fused:conv2d+tanh");
        assert_string_equal(o.group_names[3], "fused:conv2d+tanh");
        assert_string_equal(o.group_names[4], "fused:conv2d+sigmoid+mul");
        assert_int_equal(o.stats.kernels, 7); /* the five epilogues, matmul m2, where */
    }
    clrun__fuse_every_epilogue = false;
    /* By the device's rule: on a CPU the tanh and the SiLU after the core's convolutions are
     * kernels of their own, and the depthwise one, which stores vectors, takes its tanh on them
     * (clrun's own exp over floatN); the matmul's epilogue with gelu and the convolution's
     * arithmetic one stay. Same bits either way. */
    outcome o = run_graph(g, modes[0], 8);
    expect_same_bits(g, &o, &base, "epilogues by the device's rule", 8);
    bool cpu = strcmp(o.device_type, "CPU") == 0;
    assert_int_equal(o.groups, cpu ? 4 : 5);
    assert_string_equal(o.group_names[0], "fused:matmul+add+gelu+mul");
    assert_string_equal(o.group_names[1], "fused:conv2d+add+relu+clip");
    assert_string_equal(o.group_names[2], "fused:conv2d+tanh");
    if (cpu) {
        assert_string_equal(o.group_names[3], "fused:sigmoid+mul");
    } else {
        assert_string_equal(o.group_names[3], "fused:conv2d+tanh");
        assert_string_equal(o.group_names[4], "fused:conv2d+sigmoid+mul");
    }
    /* a CPU: the three epilogues, m2, where, the two core convolutions, a tanh and the SiLU */
    assert_int_equal(o.stats.kernels, cpu ? 9 : 7);
    clrun_graph_destroy(g);
}

/* Counts the programs whose name (in "built program 'NAME'") starts with user's prefix. */
typedef struct built_count {
    const char *prefix;
    int count, whole;
} built_count;

static void count_built(clrun_log_level level, const char *message, void *user)
{
    built_count *b = user;
    const char *at = strstr(message, "built program '");
    if (level != CLRUN_LOG_INFO || at == NULL)
        return;
    at += strlen("built program '");
    if (strncmp(at, b->prefix, strlen(b->prefix)) == 0)
        b->count++;
    if (strncmp(at, "conv-epilogue'", strlen("conv-epilogue'")) == 0)
        b->whole++;
}

/* run_graph_in with the log at `level` going to handler(user). */
static outcome run_logged(clrun_context *ctx, const clrun_graph *g, how h, uint64_t seed, clrun_log_level level,
                          clrun_log_handler handler, void *user)
{
    clrun_log_level was = clrun_log_get_level();
    clrun_log_set_level(level);
    clrun_log_set_handler(handler, user);
    outcome o = run_graph_in(ctx, g, h, seed);
    clrun_log_set_handler(NULL, NULL);
    clrun_log_set_level(was);
    return o;
}

/* run_graph_in with count_built counting the programs built into *count. */
static outcome run_counting_built(clrun_context *ctx, const clrun_graph *g, how h, uint64_t seed,
                                  built_count *count)
{
    return run_logged(ctx, g, h, seed, CLRUN_LOG_INFO, count_built, count);
}

/* Whether ctx's device is a CPU whose driver compiles kernels at their first launch (POCL):
 * where the core runs and the programs counted below are the ones a first run builds. */
static bool compiles_at_launch_on_cpu(clrun_context *ctx)
{
    return clrun__lazy_driver(ctx) && strcmp(clrun_context_device(ctx)->type, "CPU") == 0;
}

/* On a CPU the convolution kernels with vectors along a plane take an epilogue that runs on
 * vectors (relu, hardswish, leaky relu, hard sigmoid, and a residual of the output's shape read
 * as a vector: an add, then a relu and a clip), which they apply to each vector they store: the
 * pointwise kernels (14 x 14 and 16 x 16 here), the depthwise one and a stem's rows; the core
 * keeps every arithmetic epilogue. So every device fuses them all, as with
 * clrun__fuse_every_epilogue. Same bits either way, with the epilogues in one set (POCL) or
 * each its own source. */
static void a_cpu_fuses_the_epilogues_its_lane_stores_take(void **state)
{
    (void)state;
    clrun_graph *g;
    assert_int_equal(clrun_graph_create("lanes", &g), CLRUN_OK);
    int32_t im = input(g, "im", shape_of(CLRUN_F32, 4, (int64_t[]){1, 8, 14, 14}));
    int32_t big = input(g, "big", shape_of(CLRUN_F32, 4, (int64_t[]){1, 8, 16, 16}));
    int32_t r = input(g, "r", shape_of(CLRUN_F32, 4, (int64_t[]){1, 16, 14, 14}));
    int32_t k1 = constant(g, "k1", shape_of(CLRUN_F32, 4, (int64_t[]){16, 8, 1, 1}), 1);
    int32_t k3 = constant(g, "k3", shape_of(CLRUN_F32, 4, (int64_t[]){16, 8, 3, 3}), 2);
    int32_t kd = constant(g, "kd", shape_of(CLRUN_F32, 4, (int64_t[]){8, 1, 3, 3}), 3);
    clrun_attr dw[] = {{.name = "groups", .kind = CLRUN_ATTR_INT, .i = 8},
                       {.name = "pads", .kind = CLRUN_ATTR_INTS, .ints = {1, 1, 1, 1}, .count = 4}};
    int32_t c1 = node(g, "conv2d", "c1", 2, (int32_t[]){im, k1}, NULL, 0); /* 196 positions */
    int32_t c2 = node(g, "conv2d", "c2", 2, (int32_t[]){im, k1}, NULL, 0);
    int32_t c3 = node(g, "conv2d", "c3", 2, (int32_t[]){big, k3}, NULL, 0); /* 72 taps: the core */
    int32_t c4 = node(g, "conv2d", "c4", 2, (int32_t[]){im, k1}, NULL, 0);
    int32_t c5 = node(g, "conv2d", "c5", 2, (int32_t[]){im, k1}, NULL, 0);
    int32_t c6 = node(g, "conv2d", "c6", 2, (int32_t[]){big, k1}, NULL, 0); /* 256 positions */
    int32_t c7 = node(g, "conv2d", "c7", 2, (int32_t[]){im, kd}, dw, 2);
    clrun_graph_mark_output(g, unary(g, "relu", "y1", c1));
    clrun_graph_mark_output(g, unary(g, "hard_swish", "y2", c2));
    clrun_graph_mark_output(g, unary(g, "relu", "y3", c3));
    clrun_graph_mark_output(g, unary(g, "relu", "y4", binary(g, "add", "s4", c4, r)));
    clrun_attr six[] = {{.name = "min", .kind = CLRUN_ATTR_FLOAT, .f = 0.0f},
                        {.name = "max", .kind = CLRUN_ATTR_FLOAT, .f = 6.0f}};
    int32_t a5 = unary(g, "relu", "a5", binary(g, "add", "s5", c5, r));
    clrun_graph_mark_output(g, node(g, "clip", "y5", 1, (int32_t[]){a5}, six, 2));
    clrun_graph_mark_output(g, unary(g, "hard_swish", "y6", c6));
    clrun_attr leak = {.name = "alpha", .kind = CLRUN_ATTR_FLOAT, .f = 0.1f};
    clrun_graph_mark_output(g, node(g, "leaky_relu", "y7", 1, (int32_t[]){c7}, &leak, 1));
    int32_t stem = input(g, "stem", shape_of(CLRUN_F32, 4, (int64_t[]){1, 3, 32, 32}));
    int32_t ks = constant(g, "ks", shape_of(CLRUN_F32, 4, (int64_t[]){8, 3, 3, 3}), 4); /* 27 taps */
    int32_t c8 = node(g, "conv2d", "c8", 2, (int32_t[]){stem, ks}, dw + 1, 1);
    clrun_graph_mark_output(g, unary(g, "relu", "r8", unary(g, "hard_sigmoid", "y8", c8)));
    outcome base = run_unfused(g, 5);
    how mode = {CLRUN_EXEC_POOLED, "buddy", false, 1, false};
    for (int sets = 0; sets <= 2; sets += 2) { /* each its own source, then one set whatever the driver */
        int saved = clrun__epilogue_sets;
        clrun__epilogue_sets = sets;
        outcome o = run_graph(g, mode, 5);
        clrun__epilogue_sets = saved;
        expect_same_bits(g, &o, &base, sets ? "by the device's rule, in a set" : "by the device's rule", 5);
        assert_int_equal(o.groups, 8);
        static const char *const names[8] = {"fused:conv2d+relu", "fused:conv2d+hard_swish", "fused:conv2d+relu",
                                             "fused:conv2d+add+relu", "fused:conv2d+add+relu+clip",
                                             "fused:conv2d+hard_swish", "fused:conv2d+leaky_relu",
                                             "fused:conv2d+hard_sigmoid+relu"};
        for (int k = 0; k < 8; k++)
            assert_string_equal(o.group_names[k], names[k]);
        assert_int_equal(o.stats.kernels, 8);
    }
    /* where kernels compile at launch, the set of the lane kernels (pointwise, depthwise, the
     * stem's rows) is built from the whole file once, not cut per kernel */
    clrun_context *ctx = context_for(mode);
    if (compiles_at_launch_on_cpu(ctx)) {
        built_count cuts = {"conv-epilogue-clrun_conv2d_depthwise", 0, 0};
        outcome o = run_counting_built(ctx, g, mode, 5, &cuts);
        expect_same_bits(g, &o, &base, "in the lane kernels' set", 5);
        assert_int_equal(cuts.count, 0);
        assert_int_equal(cuts.whole, 1);
    }
    clrun_context_destroy(ctx);
    /* the stem on its rows kernel on any device, so that oclgrind (a GPU) checks its vector
     * store too; the depthwise kernels run there already */
    clrun__conv_rows_forced = true;
    outcome rows = run_graph(g, mode, 5);
    clrun__conv_rows_forced = false;
    expect_same_bits(g, &rows, &base, "the stem on its rows kernel", 5);
    clrun__fuse_every_epilogue = true;
    outcome every = run_graph(g, mode, 5);
    clrun__fuse_every_epilogue = false;
    expect_same_bits(g, &every, &base, "every epilogue", 5);
    assert_int_equal(every.groups, 8);
    assert_int_equal(every.stats.kernels, 8);
    clrun_graph_destroy(g);
}

/* clrun's own exp and tanh run on vectors too (kernels/ew_functions.cl's CLRUN_EXP_FUNCTIONS over
 * floatN): a CPU fuses SiLU, sigmoid, tanh, exp and gelu into the convolutions that store
 * vectors, depthwise (a 9 x 9 kernel along the rows, with edges; by channels over a 7 x 7 plane:
 * a block and a rest), the pointwise one of large planes and a stem's rows (both storing from a
 * loop), with the unfused bits. A 3 x 3 depthwise kernel along the rows keeps its SiLU apart
 * (clrun__conv_epilogue_pays), off a CPU it takes it too. The inputs reach past exp's and tanh's
 * clamps (|x| up to 100 before the convolutions), so that the vectors' lanes take every branch
 * of the scalar functions. */
static void a_cpu_fuses_exp_epilogues_on_vector_stores(void **state)
{
    (void)state;
    clrun_graph *g;
    assert_int_equal(clrun_graph_create("exp_lanes", &g), CLRUN_OK);
    int32_t wide = input(g, "wide", shape_of(CLRUN_F32, 4, (int64_t[]){1, 4, 40, 40}));
    int32_t small = input(g, "small", shape_of(CLRUN_F32, 4, (int64_t[]){1, 20, 7, 7}));
    int32_t big = input(g, "big", shape_of(CLRUN_F32, 4, (int64_t[]){1, 8, 16, 16}));
    int32_t stem = input(g, "stem", shape_of(CLRUN_F32, 4, (int64_t[]){1, 3, 32, 32}));
    int32_t k9 = constant(g, "k9", shape_of(CLRUN_F32, 4, (int64_t[]){4, 1, 9, 9}), 1);
    int32_t ks = constant(g, "ks", shape_of(CLRUN_F32, 4, (int64_t[]){20, 1, 3, 3}), 2);
    int32_t k1 = constant(g, "k1", shape_of(CLRUN_F32, 4, (int64_t[]){16, 8, 1, 1}), 3);
    int32_t kst = constant(g, "kst", shape_of(CLRUN_F32, 4, (int64_t[]){8, 3, 3, 3}), 4);
    int32_t k3 = constant(g, "k3", shape_of(CLRUN_F32, 4, (int64_t[]){4, 1, 3, 3}), 5);
    clrun_attr pad1 = {.name = "pads", .kind = CLRUN_ATTR_INTS, .ints = {1, 1, 1, 1}, .count = 4};
    clrun_attr dw9[] = {{.name = "groups", .kind = CLRUN_ATTR_INT, .i = 4},
                        {.name = "pads", .kind = CLRUN_ATTR_INTS, .ints = {4, 4, 4, 4}, .count = 4}};
    clrun_attr dw20[] = {{.name = "groups", .kind = CLRUN_ATTR_INT, .i = 20}, pad1};
    clrun_attr dw4[] = {dw9[0], pad1};
    clrun_attr s2[] = {pad1, {.name = "stride", .kind = CLRUN_ATTR_INTS, .ints = {2, 2}, .count = 2}};
    int32_t c1 = node(g, "conv2d", "c1", 2, (int32_t[]){wide, k9}, dw9, 2);
    clrun_graph_mark_output(g, unary(g, "tanh", "y1", c1));
    int32_t c2 = node(g, "conv2d", "c2", 2, (int32_t[]){small, ks}, dw20, 2);
    clrun_graph_mark_output(g, unary(g, "sigmoid", "y2", c2));
    int32_t c3 = node(g, "conv2d", "c3", 2, (int32_t[]){big, k1}, NULL, 0);
    clrun_graph_mark_output(g, binary(g, "mul", "y3", c3, unary(g, "sigmoid", "s3", c3)));
    int32_t c4 = node(g, "conv2d", "c4", 2, (int32_t[]){big, k1}, NULL, 0);
    clrun_graph_mark_output(g, unary(g, "exp", "y4", c4));
    int32_t c5 = node(g, "conv2d", "c5", 2, (int32_t[]){big, k1}, NULL, 0);
    clrun_graph_mark_output(g, unary(g, "gelu", "y5", c5));
    int32_t c6 = node(g, "conv2d", "c6", 2, (int32_t[]){stem, kst}, s2, 2);
    clrun_graph_mark_output(g, binary(g, "mul", "y6", c6, unary(g, "sigmoid", "s6", c6)));
    int32_t c7 = node(g, "conv2d", "c7", 2, (int32_t[]){wide, k3}, dw4, 2);
    clrun_graph_mark_output(g, binary(g, "mul", "y7", c7, unary(g, "sigmoid", "s7", c7)));
    input_scale = 50.0f;
    outcome base = run_unfused(g, 5);
    how mode = {CLRUN_EXEC_POOLED, "buddy", false, 1, false};
    for (int sets = 0; sets <= 2; sets += 2) { /* each its own source, then one set */
        int saved = clrun__epilogue_sets;
        clrun__epilogue_sets = sets;
        outcome o = run_graph(g, mode, 5);
        clrun__epilogue_sets = saved;
        expect_same_bits(g, &o, &base, sets ? "exp epilogues in a set" : "exp epilogues", 5);
        bool cpu = strcmp(o.device_type, "CPU") == 0;
        static const char *const names[7] = {"fused:conv2d+tanh", "fused:conv2d+sigmoid",
                                             "fused:conv2d+sigmoid+mul", "fused:conv2d+exp",
                                             "fused:conv2d+gelu", "fused:conv2d+sigmoid+mul",
                                             "fused:conv2d+sigmoid+mul"};
        assert_int_equal(o.groups, 7);
        for (int k = 0; k < 6; k++)
            assert_string_equal(o.group_names[k], names[k]);
        assert_string_equal(o.group_names[6], cpu ? "fused:sigmoid+mul" : names[6]);
        assert_int_equal(o.stats.kernels, cpu ? 8 : 7);
    }
    input_scale = 1.0f;
    clrun_graph_destroy(g);
}

/* An epilogue's inputs read as vectors on the lane kernels: a residual of the output's shape
 * (vload at the first output's index) and a per-channel value (one for the whole vector), on the
 * pointwise kernel of large planes, a 3 x 3 depthwise kernel along the rows (with its edges) and
 * a stem's rows, with the bits of the unfused run, alone and in a set. An input that varies
 * along the plane but not as the output does (a [1, 1, H, W] map) has no vector form: a CPU
 * leaves it to a kernel of its own, any other device fuses it. */
static void a_cpu_reads_an_epilogues_inputs_as_vectors(void **state)
{
    (void)state;
    clrun_graph *g;
    assert_int_equal(clrun_graph_create("vector_inputs", &g), CLRUN_OK);
    int32_t big = input(g, "big", shape_of(CLRUN_F32, 4, (int64_t[]){1, 8, 16, 16}));
    int32_t wide = input(g, "wide", shape_of(CLRUN_F32, 4, (int64_t[]){1, 4, 40, 40}));
    int32_t stem = input(g, "stem", shape_of(CLRUN_F32, 4, (int64_t[]){1, 3, 32, 32}));
    int32_t r1 = input(g, "r1", shape_of(CLRUN_F32, 4, (int64_t[]){1, 16, 16, 16}));
    int32_t s1 = input(g, "s1", shape_of(CLRUN_F32, 4, (int64_t[]){1, 16, 1, 1}));
    int32_t r2 = input(g, "r2", shape_of(CLRUN_F32, 4, (int64_t[]){1, 4, 40, 40}));
    int32_t b3 = input(g, "b3", shape_of(CLRUN_F32, 4, (int64_t[]){1, 8, 1, 1}));
    int32_t m4 = input(g, "m4", shape_of(CLRUN_F32, 4, (int64_t[]){1, 1, 16, 16}));
    int32_t k1 = constant(g, "k1", shape_of(CLRUN_F32, 4, (int64_t[]){16, 8, 1, 1}), 1);
    int32_t kd = constant(g, "kd", shape_of(CLRUN_F32, 4, (int64_t[]){4, 1, 3, 3}), 2);
    int32_t ks = constant(g, "ks", shape_of(CLRUN_F32, 4, (int64_t[]){8, 3, 3, 3}), 3);
    clrun_attr pad1 = {.name = "pads", .kind = CLRUN_ATTR_INTS, .ints = {1, 1, 1, 1}, .count = 4};
    clrun_attr dw[] = {{.name = "groups", .kind = CLRUN_ATTR_INT, .i = 4}, pad1};
    clrun_attr s2[] = {pad1, {.name = "stride", .kind = CLRUN_ATTR_INTS, .ints = {2, 2}, .count = 2}};
    int32_t c1 = node(g, "conv2d", "c1", 2, (int32_t[]){big, k1}, NULL, 0);
    clrun_graph_mark_output(g, binary(g, "add", "y1", binary(g, "mul", "m1", c1, s1), r1));
    int32_t c2 = node(g, "conv2d", "c2", 2, (int32_t[]){wide, kd}, dw, 2);
    clrun_graph_mark_output(g, unary(g, "relu", "y2", binary(g, "add", "a2", r2, c2)));
    int32_t c3 = node(g, "conv2d", "c3", 2, (int32_t[]){stem, ks}, s2, 2);
    clrun_graph_mark_output(g, unary(g, "hard_swish", "y3", binary(g, "add", "a3", c3, b3)));
    int32_t c4 = node(g, "conv2d", "c4", 2, (int32_t[]){big, k1}, NULL, 0);
    clrun_graph_mark_output(g, binary(g, "mul", "y4", c4, m4));
    outcome base = run_unfused(g, 9);
    how mode = {CLRUN_EXEC_POOLED, "tlsf", false, 1, false};
    for (int sets = 0; sets <= 2; sets += 2) {
        int saved = clrun__epilogue_sets;
        clrun__epilogue_sets = sets;
        outcome o = run_graph(g, mode, 9);
        clrun__epilogue_sets = saved;
        expect_same_bits(g, &o, &base, sets ? "inputs read as vectors, in a set" : "inputs read as vectors", 9);
        bool cpu = strcmp(o.device_type, "CPU") == 0;
        static const char *const names[4] = {"fused:conv2d+mul+add", "fused:conv2d+add+relu",
                                             "fused:conv2d+add+hard_swish", "fused:conv2d+mul"};
        assert_int_equal(o.groups, cpu ? 3 : 4);
        for (int k = 0; k < (cpu ? 3 : 4); k++)
            assert_string_equal(o.group_names[k], names[k]);
        assert_int_equal(o.stats.kernels, cpu ? 5 : 4);
    }
    clrun_graph_destroy(g);
}

/* The convolutions' epilogues share one source, a case each, and a convolution with none joins
 * as the identity: the core builds once for all of them, where it built once per epilogue and
 * once plain, with the bits of the unfused run either way. Sets are made where the driver
 * compiles at launch (POCL); the test makes them on any driver, so that oclgrind checks their
 * kernels. A set that does not build falls back to each epilogue's own source, fused all the
 * same. */
static void convolution_epilogues_share_one_program_where_kernels_compile_at_launch(void **state)
{
    (void)state;
    clrun_graph *g;
    assert_int_equal(clrun_graph_create("epilogue_set", &g), CLRUN_OK);
    int32_t im = input(g, "im", shape_of(CLRUN_F32, 4, (int64_t[]){2, 8, 12, 12}));
    int32_t r = input(g, "r", shape_of(CLRUN_F32, 4, (int64_t[]){2, 16, 10, 10}));
    int32_t c[5];
    for (int k = 0; k < 5; k++) { /* 72 taps: the core, one variant for all */
        char kn[8], cn[8];
        snprintf(kn, sizeof kn, "k%d", k);
        snprintf(cn, sizeof cn, "c%d", k);
        int32_t w = constant(g, kn, shape_of(CLRUN_F32, 4, (int64_t[]){16, 8, 3, 3}), 10 + (uint64_t)k);
        c[k] = node(g, "conv2d", cn, 2, (int32_t[]){im, w}, NULL, 0);
    }
    clrun_attr six[] = {{.name = "min", .kind = CLRUN_ATTR_FLOAT, .f = 0.0f},
                        {.name = "max", .kind = CLRUN_ATTR_FLOAT, .f = 6.0f}};
    clrun_graph_mark_output(g, unary(g, "relu", "y0", c[0]));
    clrun_graph_mark_output(g, unary(g, "relu", "y1", binary(g, "add", "s1", c[1], r)));
    clrun_graph_mark_output(g, unary(g, "hard_swish", "y2", c[2]));
    clrun_graph_mark_output(g, node(g, "clip", "y3", 1, (int32_t[]){c[3]}, six, 2));
    clrun_graph_mark_output(g, c[4]);
    outcome base = run_unfused(g, 7);
    how fused = {CLRUN_EXEC_POOLED, "tlsf", false, 1, false};
    const char *names[] = {"fused:conv2d+relu", "fused:conv2d+add+relu", "fused:conv2d+hard_swish",
                           "fused:conv2d+clip"};
    unsigned long programs[2] = {0, 0};
    for (int alone = 0; alone < 2; alone++) {
        clrun__epilogue_sets = alone ? 0 : 2; /* sets on any driver: oclgrind checks them too */
        clrun_context *ctx = context_for(fused);
        clrun_program_stats before, after;
        clrun_program_stats_get(ctx, &before);
        outcome o = run_graph_in(ctx, g, fused, 7);
        clrun_program_stats_get(ctx, &after);
        clrun__epilogue_sets = 1;
        programs[alone] = (after.builds_from_source + after.cache_hits) -
                          (before.builds_from_source + before.cache_hits);
        expect_same_bits(g, &o, &base, alone ? "each epilogue alone" : "an epilogue set", 7);
        assert_int_equal(o.groups, 4);
        for (int k = 0; k < 4; k++)
            assert_string_equal(o.group_names[k], names[k]);
        clrun_context_destroy(ctx);
    }
    /* four epilogues and the plain core were five programs of the core, now one */
    assert_int_equal(programs[1] - programs[0], 4);
    clrun__fuse_test_poison = "hard_swish";
    clrun__epilogue_sets = 2;
    how other = fused;
    other.allocator = "buddy";
    outcome fallen = run_graph_fresh(g, other, 7);
    clrun__epilogue_sets = 1;
    clrun__fuse_test_poison = NULL;
    expect_same_bits(g, &fallen, &base, "a set that did not build", 7);
    assert_int_equal(fallen.groups, 4);
    clrun_graph_destroy(g);
}

/* Where kernels compile at launch, an epilogue on one of conv.cl's kernels (a CPU's small planes'
 * pointwise kernel, which a CPU of vectors of 16 takes only when told) builds that kernel alone,
 * not the whole file with it, with the bits of the unfused run. */
static void a_lane_kernel_builds_its_epilogue_alone(void **state)
{
    (void)state;
    clrun_graph *g;
    assert_int_equal(clrun_graph_create("lane_epilogues", &g), CLRUN_OK);
    int32_t im = input(g, "im", shape_of(CLRUN_F32, 4, (int64_t[]){1, 8, 14, 14}));
    int32_t r = input(g, "r", shape_of(CLRUN_F32, 4, (int64_t[]){1, 16, 14, 14}));
    int32_t k1 = constant(g, "k1", shape_of(CLRUN_F32, 4, (int64_t[]){16, 8, 1, 1}), 1);
    int32_t k2 = constant(g, "k2", shape_of(CLRUN_F32, 4, (int64_t[]){16, 8, 1, 1}), 2);
    int32_t k3 = constant(g, "k3", shape_of(CLRUN_F32, 4, (int64_t[]){16, 8, 1, 1}), 3);
    clrun_graph_mark_output(g, unary(g, "relu", "y1", node(g, "conv2d", "c1", 2, (int32_t[]){im, k1}, NULL, 0)));
    int32_t c2 = node(g, "conv2d", "c2", 2, (int32_t[]){im, k2}, NULL, 0);
    clrun_graph_mark_output(g, unary(g, "relu", "y2", binary(g, "add", "s2", c2, r)));
    clrun_graph_mark_output(g, node(g, "conv2d", "y3", 2, (int32_t[]){im, k3}, NULL, 0));
    outcome base = run_unfused(g, 3);
    how fused = {CLRUN_EXEC_POOLED, "slab", false, 1, false};
    clrun_context *ctx = context_for(fused);
    bool lane_kernel = compiles_at_launch_on_cpu(ctx);
    built_count built = {"conv-epilogue-clrun_conv2d_pointwise_small'", 0, 0};
    clrun__conv_pointwise_small = 1;
    outcome o = run_counting_built(ctx, g, fused, 3, &built);
    clrun__conv_pointwise_small = -1;
    expect_same_bits(g, &o, &base, "a lane kernel's epilogues", 3);
    assert_int_equal(o.groups, 2);
    if (lane_kernel) { /* the relu, the add+relu and the plain one: one set, one kernel */
        assert_int_equal(built.count, 1);
        assert_int_equal(built.whole, 0);
    }
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

/* Counts the programs built or loaded whose name starts with user's prefix ("program 'NAME':
 * ... to build or load", at debug level): once per distinct text on a context. */
static void count_programs(clrun_log_level level, const char *message, void *user)
{
    built_count *b = user;
    const char *at = strstr(message, "program '");
    if (level != CLRUN_LOG_DEBUG || at != message || strstr(message, "to build or load") == NULL)
        return;
    at += strlen("program '");
    if (strncmp(at, b->prefix, strlen(b->prefix)) == 0)
        b->count++;
}

/* A context without the binary cache: each program text is built once, whole, as a first
 * run with empty caches builds it (with the cache, a program may be cut per kernel). */
static clrun_context *uncached_context(void)
{
    clrun_context_options o;
    clrun_context_options_init(&o);
    o.allocator = "tlsf";
    o.cache = -1;
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(&o, &ctx), CLRUN_OK);
    return ctx;
}

/* run_graph_in with count_programs counting the programs built or loaded into *count. */
static outcome run_counting(clrun_context *ctx, const clrun_graph *g, how h, uint64_t seed, built_count *count)
{
    return run_logged(ctx, g, h, seed, CLRUN_LOG_DEBUG, count_programs, count);
}

/* Two products of a 1 x 1 plane, 64 -> 40 and 64 -> 16 channels (squeeze-and-excitation's). */
static void add_small_plane_products(clrun_graph *g)
{
    int32_t se = input(g, "se", shape_of(CLRUN_F32, 4, (int64_t[]){1, 64, 1, 1}));
    int32_t wide = constant(g, "wide", shape_of(CLRUN_F32, 4, (int64_t[]){40, 64, 1, 1}), 1);
    int32_t few = constant(g, "few", shape_of(CLRUN_F32, 4, (int64_t[]){16, 64, 1, 1}), 2);
    clrun_graph_mark_output(g, node(g, "conv2d", "y1", 2, (int32_t[]){se, wide}, NULL, 0));
    clrun_graph_mark_output(g, node(g, "conv2d", "y2", 2, (int32_t[]){se, few}, NULL, 0));
}

/* The convolution core at half width (a group of 16 output channels or fewer on a 16-wide
 * device) only where the plane is large: a squeeze-and-excitation product on a 1 x 1 plane runs
 * at the width of the model's other products, so a first run builds and compiles the core once
 * at each MR, not twice; and the core's head (packing, padding) is one program for both
 * widths, its kernels taking the panel width as an argument. The bits of the unfused run. */
static void the_core_takes_half_width_only_on_large_planes(void **state)
{
    (void)state;
    clrun_graph *g;
    assert_int_equal(clrun_graph_create("core_widths", &g), CLRUN_OK);
    add_small_plane_products(g);
    int32_t im = input(g, "im", shape_of(CLRUN_F32, 4, (int64_t[]){1, 32, 16, 16}));
    int32_t head = constant(g, "head", shape_of(CLRUN_F32, 4, (int64_t[]){16, 32, 3, 3}), 3);
    int32_t body = constant(g, "body", shape_of(CLRUN_F32, 4, (int64_t[]){40, 32, 3, 3}), 4);
    clrun_attr pads = {.name = "pads", .kind = CLRUN_ATTR_INTS, .ints = {1, 1, 1, 1}, .count = 4};
    clrun_graph_mark_output(g, node(g, "conv2d", "y3", 2, (int32_t[]){im, head}, &pads, 1));
    clrun_graph_mark_output(g, node(g, "conv2d", "y4", 2, (int32_t[]){im, body}, &pads, 1));
    outcome base = run_unfused(g, 4);
    how fused = {CLRUN_EXEC_POOLED, "tlsf", false, 1, false};
    clrun_context *ctx = uncached_context();
    bool cpu_core = compiles_at_launch_on_cpu(ctx);
    built_count heads = {"matmul_core-head'", 0, 0}, small = {"matmul_core-conv1", 0, 0};
    outcome o = run_counting(ctx, g, fused, 4, &heads);
    outcome again = run_counting(ctx, g, fused, 4, &small); /* the context keeps its programs */
    expect_same_bits(g, &o, &base, "the core at its widths", 4);
    expect_same_bits(g, &again, &base, "the core at its widths, again", 4);
    assert_int_equal(small.count, 0);
    assert_true(heads.count <= 1);
    if (cpu_core) /* a padded 16 x 16 product at each width: one head */
        assert_int_equal(heads.count, 1);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);

    assert_int_equal(clrun_graph_create("se_widths", &g), CLRUN_OK); /* the 1 x 1 planes alone */
    add_small_plane_products(g);
    base = run_unfused(g, 5);
    ctx = uncached_context();
    built_count rows = {"matmul_core-mm1", 0, 0};
    o = run_counting(ctx, g, fused, 5, &rows);
    expect_same_bits(g, &o, &base, "two products of a 1 x 1 plane", 5);
    assert_true(rows.count <= 1); /* matmul's core once, at one width (below) */
    if (cpu_core)
        assert_int_equal(rows.count, 1);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

/* A squeeze-and-excitation block's products (a 1 x 1 kernel over a 1 x 1 plane, with a bias, a
 * relu and a hardsigmoid) and a classifier (a matmul with a hardswish) run on one kernel: the
 * products of a 1 x 1 plane on matmul's core, their epilogues in its set, so that a first run
 * builds the core at one row once, and none of the conv core; over two images too (two rows).
 * The bits of the conv core's run and of the unfused one. */
static void products_of_a_one_by_one_plane_run_on_the_classifier_kernel(void **state)
{
    (void)state;
    for (int64_t images = 1; images <= 2; images++) {
        clrun_graph *g;
        assert_int_equal(clrun_graph_create("se_block", &g), CLRUN_OK);
        int32_t x = input(g, "x", shape_of(CLRUN_F32, 4, (int64_t[]){images, 48, 1, 1}));
        int32_t w1 = constant(g, "w1", shape_of(CLRUN_F32, 4, (int64_t[]){12, 48, 1, 1}), 1);
        int32_t b1 = constant(g, "b1", shape_of(CLRUN_F32, 1, (int64_t[]){12}), 2);
        int32_t w2 = constant(g, "w2", shape_of(CLRUN_F32, 4, (int64_t[]){48, 12, 1, 1}), 3);
        int32_t b2 = constant(g, "b2", shape_of(CLRUN_F32, 1, (int64_t[]){48}), 4);
        int32_t c1 = node(g, "conv2d", "c1", 3, (int32_t[]){x, w1, b1}, NULL, 0);
        int32_t squeeze = unary(g, "relu", "r", c1);
        int32_t c2 = node(g, "conv2d", "c2", 3, (int32_t[]){squeeze, w2, b2}, NULL, 0);
        int32_t gate = unary(g, "hard_sigmoid", "h", c2);
        clrun_graph_mark_output(g, gate);
        clrun_attr shape = {.name = "shape", .kind = CLRUN_ATTR_INTS, .ints = {images, 48}, .count = 2};
        int32_t flat = node(g, "reshape", "flat", 1, (int32_t[]){gate}, &shape, 1);
        int32_t wc = constant(g, "wc", shape_of(CLRUN_F32, 2, (int64_t[]){48, 40}), 5);
        int32_t logits = node(g, "matmul", "fc", 2, (int32_t[]){flat, wc}, NULL, 0);
        clrun_graph_mark_output(g, unary(g, "hard_swish", "y", logits));
        outcome base = run_unfused(g, 7);
        how fused = {CLRUN_EXEC_POOLED, "tlsf", false, 1, false};
        clrun_context *ctx = uncached_context();
        bool cpu_core = compiles_at_launch_on_cpu(ctx);
        built_count conv = {"matmul_core-conv", 0, 0}, mm = {"matmul_core-mm", 0, 0};
        outcome o = run_counting(ctx, g, fused, 7, &conv);
        clrun_context_destroy(ctx);
        ctx = uncached_context();
        outcome again = run_counting(ctx, g, fused, 7, &mm);
        clrun_context_destroy(ctx);
        clrun__conv_product = 0; /* the conv core's run */
        ctx = uncached_context();
        outcome core = run_graph_in(ctx, g, fused, 7);
        clrun_context_destroy(ctx);
        clrun__conv_product = -1;
        expect_same_bits(g, &o, &base, "a squeeze-and-excitation block", 7);
        expect_same_bits(g, &again, &base, "a squeeze-and-excitation block, again", 7);
        expect_same_bits(g, &core, &base, "a squeeze-and-excitation block on the conv core", 7);
        if (cpu_core && images == 1) {
            assert_int_equal(conv.count, 0);
            assert_int_equal(mm.count, 1);
        }
        clrun_graph_destroy(g);
    }
}

/* A reshape whose output takes its input's buffer makes no kernel: the layout program is not
 * built for it (a first run paid 0.1 s for a flatten's program it never launched); one that
 * copies (the naive mode's, each tensor its own buffer) makes its kernel at that first copy. */
static void a_reshape_in_place_builds_no_program(void **state)
{
    (void)state;
    clrun_graph *g;
    assert_int_equal(clrun_graph_create("flatten", &g), CLRUN_OK);
    int32_t x = input(g, "x", shape_of(CLRUN_F32, 4, (int64_t[]){2, 3, 4, 5}));
    clrun_attr shape = {.name = "shape", .kind = CLRUN_ATTR_INTS, .ints = {2, 60}, .count = 2};
    int32_t flat = node(g, "reshape", "flat", 1, (int32_t[]){unary(g, "relu", "r", x)}, &shape, 1);
    clrun_graph_mark_output(g, unary(g, "sigmoid", "y", flat));
    outcome base = run_unfused(g, 6);
    const clrun_exec_mode modes[] = {CLRUN_EXEC_POOLED, CLRUN_EXEC_NAIVE};
    for (int m = 0; m < 2; m++) {
        clrun_context *ctx = uncached_context();
        built_count layout = {"layout'", 0, 0};
        how unfused = {modes[m], "tlsf", false, -1, false};
        outcome o = run_counting(ctx, g, unfused, 6, &layout);
        expect_same_bits(g, &o, &base, m ? "a reshape that copies" : "a reshape in place", 6);
        assert_int_equal(layout.count, m);
        clrun_context_destroy(ctx);
    }
    clrun_graph_destroy(g);
}

/* A residual add written r + conv and one written conv + r are one epilogue program (its
 * operands in a canonical order, lib/fuse/codegen.c), with the bits of the unfused run. */
static void a_residual_add_either_way_is_one_epilogue_program(void **state)
{
    (void)state;
    clrun_graph *g;
    assert_int_equal(clrun_graph_create("residuals", &g), CLRUN_OK);
    int32_t im = input(g, "im", shape_of(CLRUN_F32, 4, (int64_t[]){2, 3, 9, 9}));
    int32_t r = input(g, "r", shape_of(CLRUN_F32, 4, (int64_t[]){2, 16, 7, 7}));
    int32_t k1 = constant(g, "k1", shape_of(CLRUN_F32, 4, (int64_t[]){16, 3, 3, 3}), 1);
    int32_t k2 = constant(g, "k2", shape_of(CLRUN_F32, 4, (int64_t[]){16, 3, 3, 3}), 2);
    int32_t c1 = node(g, "conv2d", "c1", 2, (int32_t[]){im, k1}, NULL, 0);
    int32_t c2 = node(g, "conv2d", "c2", 2, (int32_t[]){im, k2}, NULL, 0);
    clrun_graph_mark_output(g, unary(g, "relu", "y1", binary(g, "add", "a1", c1, r)));
    clrun_graph_mark_output(g, unary(g, "relu", "y2", binary(g, "add", "a2", r, c2)));
    outcome base = run_unfused(g, 5);
    how fused = {CLRUN_EXEC_POOLED, "buddy", false, 1, false};
    clrun_context *ctx = context_for(fused);
    how unfused = fused;
    unfused.fusion = -1;
    outcome plain = run_graph_in(ctx, g, unfused, 5); /* the product's own programs */
    expect_same_bits(g, &plain, &base, "unfused", 5);
    clrun_program_stats before, after;
    clrun_program_stats_get(ctx, &before);
    outcome o = run_graph_in(ctx, g, fused, 5);
    clrun_program_stats_get(ctx, &after);
    expect_same_bits(g, &o, &base, "residual epilogues", 5);
    assert_int_equal(o.groups, 2);
    assert_string_equal(o.group_names[0], "fused:conv2d+add+relu");
    assert_string_equal(o.group_names[1], "fused:conv2d+add+relu");
    assert_int_equal((after.builds_from_source + after.cache_hits) -
                         (before.builds_from_source + before.cache_hits), 1);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

/* Heads cut from one projection: slice, reshape (a view), transpose for each, the three in one
 * kernel with three outputs; a transposed read under an elementwise op; all bit for bit. */
static void moves_and_siblings_fuse_with_the_same_bits(void **state)
{
    (void)state;
    clrun_graph *g;
    assert_int_equal(clrun_graph_create("heads", &g), CLRUN_OK);
    int32_t qkv = input(g, "qkv", shape_of(CLRUN_F32, 2, (int64_t[]){10, 36}));
    const char *names[3][3] = {{"q", "q3", "qh"}, {"k", "k3", "kh"}, {"v", "v3", "vh"}};
    int32_t heads[3];
    for (int h = 0; h < 3; h++) {
        clrun_attr cut[3] = {{.name = "axis", .kind = CLRUN_ATTR_INT, .i = 1},
                             {.name = "start", .kind = CLRUN_ATTR_INT, .i = 12 * h},
                             {.name = "end", .kind = CLRUN_ATTR_INT, .i = 12 * h + 12}};
        clrun_attr shape = {.name = "shape", .kind = CLRUN_ATTR_INTS, .ints = {10, 3, 4}, .count = 3};
        clrun_attr perm = {.name = "perm", .kind = CLRUN_ATTR_INTS, .ints = {1, 0, 2}, .count = 3};
        int32_t sl = node(g, "slice", names[h][0], 1, &qkv, cut, 3);
        int32_t rs = node(g, "reshape", names[h][1], 1, &sl, &shape, 1);
        heads[h] = node(g, "transpose", names[h][2], 1, &rs, &perm, 1);
    }
    clrun_attr tb = {.name = "transpose_b", .kind = CLRUN_ATTR_INT, .i = 1};
    int32_t scores = node(g, "matmul", "scores", 2, (int32_t[]){heads[0], heads[1]}, &tb, 1);
    clrun_graph_mark_output(g, node(g, "matmul", "ctx", 2, (int32_t[]){scores, heads[2]}, NULL, 0));
    /* a transposed read under elementwise ops: add(transpose(a), b) -> exp */
    int32_t a = input(g, "a", shape_of(CLRUN_F32, 2, (int64_t[]){7, 5}));
    int32_t b = input(g, "b", shape_of(CLRUN_F32, 2, (int64_t[]){5, 7}));
    clrun_attr perm = {.name = "perm", .kind = CLRUN_ATTR_INTS, .ints = {1, 0}, .count = 2};
    int32_t at = node(g, "transpose", "at", 1, &a, &perm, 1);
    clrun_graph_mark_output(g, unary(g, "exp", "e", binary(g, "add", "s", at, b)));
    outcome base = run_unfused(g, 6);
    for (mode_walk mw = modes_tried(); mw.k < mw.n; mw.k++) {
        outcome o = run_graph(g, every_mode[(mw.first + mw.k) % MODE_COUNT], 6);
        expect_same_bits(g, &o, &base, "heads", 6);
        assert_int_equal(o.groups, 2);
        assert_string_equal(o.group_names[0],
                            "fused:slice+reshape+transpose, slice+reshape+transpose, slice+reshape+transpose");
        assert_string_equal(o.group_names[1], "fused:transpose+add+exp");
        assert_int_equal(o.stats.kernels, 4); /* the heads, two matmuls, the transposed add */
    }
    clrun_graph_destroy(g);
}

/* At rank 8 (CLRUN_MAX_DIMS): operands that take turns broadcasting (no dimension merges), a
 * transposed read reversing all eight axes and a slice, fused into one kernel with the bits of
 * the unfused run. */
static void rank_eight_chains_fuse_with_the_same_bits(void **state)
{
    (void)state;
    clrun_graph *g;
    assert_int_equal(clrun_graph_create("rank8", &g), CLRUN_OK);
    int32_t x = input(g, "x", shape_of(CLRUN_F32, 8, (int64_t[]){2, 3, 1, 2, 3, 2, 1, 2}));
    int32_t y = input(g, "y", shape_of(CLRUN_F32, 8, (int64_t[]){1, 3, 2, 1, 3, 1, 2, 2}));
    int32_t z = input(g, "z", shape_of(CLRUN_F32, 8, (int64_t[]){2, 2, 2, 3, 2, 2, 3, 2}));
    int32_t w = input(g, "w", shape_of(CLRUN_F32, 8, (int64_t[]){2, 3, 2, 2, 3, 2, 2, 5}));
    clrun_attr perm = {.name = "perm", .kind = CLRUN_ATTR_INTS, .ints = {7, 6, 5, 4, 3, 2, 1, 0},
                       .count = 8};
    clrun_attr cut[3] = {{.name = "axis", .kind = CLRUN_ATTR_INT, .i = 7},
                         {.name = "start", .kind = CLRUN_ATTR_INT, .i = 1},
                         {.name = "end", .kind = CLRUN_ATTR_INT, .i = 3}};
    int32_t t = binary(g, "mul", "t", x, y); /* [2, 3, 2, 2, 3, 2, 2, 2] */
    t = binary(g, "sub", "t2", t, x);
    t = unary(g, "tanh", "t3", t);
    int32_t zt = node(g, "transpose", "zt", 1, &z, &perm, 1);
    int32_t ws = node(g, "slice", "ws", 1, &w, cut, 3);
    t = binary(g, "add", "t4", t, zt);
    t = binary(g, "mul", "t5", t, ws);
    clrun_graph_mark_output(g, unary(g, "exp", "e", t));
    assert_int_equal(clrun_graph_validate(g), CLRUN_OK);
    outcome base = run_unfused(g, 11);
    for (mode_walk mw = modes_tried(); mw.k < mw.n; mw.k++) {
        outcome o = run_graph(g, every_mode[(mw.first + mw.k) % MODE_COUNT], 11);
        expect_same_bits(g, &o, &base, "rank 8", 11);
        assert_int_equal(o.groups, 1);
        assert_int_equal(o.stats.kernels, 1);
    }
    clrun_graph_destroy(g);
}

/* ---- constant folding -------------------------------------------------------------------- */

static void constant_nodes_run_once_into_constants_with_the_same_bits(void **state)
{
    (void)state;
    clrun_graph *g;
    assert_int_equal(clrun_graph_create("folds", &g), CLRUN_OK);
    const int64_t d[2] = {16, 24}, sq[2] = {24, 24};
    int32_t a = constant(g, "a", shape_of(CLRUN_F32, 2, d), 1), b = constant(g, "b", shape_of(CLRUN_F32, 2, sq), 2);
    int32_t m = binary(g, "matmul", "m", a, b);
    int32_t e = unary(g, "gelu_erf", "e", m);          /* folded, and a graph output */
    int32_t s = unary(g, "softmax", "s", e);           /* folded */
    clrun_attr shape = {.name = "shape", .kind = CLRUN_ATTR_INTS, .ints = {24, 16}, .count = 2};
    int32_t r = node(g, "reshape", "r", 1, &s, &shape, 1); /* a view: left alone */
    int32_t x = input(g, "x", shape_of(CLRUN_F32, 2, (int64_t[]){24, 16}));
    int32_t y = binary(g, "add", "y", x, r);
    int32_t z = unary(g, "tanh", "z", y);
    clrun_attr big = {.name = "shape", .kind = CLRUN_ATTR_INTS, .ints = {128, 160}, .count = 2};
    int32_t one = constant(g, "one", shape_of(CLRUN_F32, 1, (int64_t[]){1}), 3);
    int32_t wide = node(g, "expand", "wide", 1, &one, &big, 1); /* 80 KiB from 4 bytes: left alone */
    clrun_graph_mark_output(g, e);
    clrun_graph_mark_output(g, z);
    clrun_graph_mark_output(g, wide);
    outcome base = run_unfused(g, 4);
    for (mode_walk mw = modes_tried(); mw.k < mw.n; mw.k++) {
        outcome o = run_graph(g, every_mode[(mw.first + mw.k) % MODE_COUNT], 4);
        expect_same_bits(g, &o, &base, "folds", 4);
        assert_int_equal(o.stats.folded_nodes, 3);
        assert_int_equal(o.stats.fused_groups, 1);
        assert_int_equal(o.stats.graph_nodes, 7);
        assert_int_equal(o.stats.kernels, 2); /* reshape+add+tanh (the reshape of a constant read
                                                 through), and expand */
        assert_int_equal(o.stats.fused_nodes, 3);
    }
    clrun_graph_destroy(g);
}

/* A narrow weight widened before its product (an int8 weight dequantized, an f16 one cast) stays
 * resident at its own width: folding it would hold 4x (2x) its bytes for the executor's life.
 * The widening goes into the product instead (fold_dequant.c: the product reads the narrow
 * weight, the same bits). A small one without a scale still folds to f32. */
static void a_narrow_weight_is_widened_at_run_time(void **state)
{
    (void)state;
    clrun_graph *g;
    assert_int_equal(clrun_graph_create("narrow_weight", &g), CLRUN_OK);
    const int64_t wd[2] = {128, 384}, sd[2] = {8, 16}; /* folds would add 96 KiB and more */
    int32_t w8 = constant(g, "w8", shape_of(CLRUN_I8, 2, wd), 1);
    int32_t w16 = constant(g, "w16", shape_of(CLRUN_F16, 2, wd), 2);
    int32_t small = constant(g, "small", shape_of(CLRUN_I8, 2, sd), 3);
    clrun_attr to_f32 = {.name = "to", .kind = CLRUN_ATTR_INT, .i = CLRUN_F32};
    int32_t scale = constant(g, "scale", shape_of(CLRUN_F32, 1, (int64_t[]){1}), 4);
    int32_t wide8 = binary(g, "mul", "wide8", node(g, "cast", "cast8", 1, &w8, &to_f32, 1), scale);
    int32_t wide16 = node(g, "cast", "wide16", 1, &w16, &to_f32, 1);
    int32_t wide_small = node(g, "cast", "wide_small", 1, &small, &to_f32, 1); /* folds */
    int32_t x = input(g, "x", shape_of(CLRUN_F32, 2, (int64_t[]){4, 128}));
    int32_t y = binary(g, "add", "y", binary(g, "matmul", "p8", x, wide8), binary(g, "matmul", "p16", x, wide16));
    clrun_graph_mark_output(g, y);
    int32_t x8 = input(g, "x8", shape_of(CLRUN_F32, 2, (int64_t[]){4, 8}));
    clrun_graph_mark_output(g, binary(g, "matmul", "q", x8, wide_small));
    outcome base = run_unfused(g, 6);
    for (mode_walk mw = modes_tried(); mw.k < mw.n; mw.k++) {
        outcome o = run_graph(g, every_mode[(mw.first + mw.k) % MODE_COUNT], 6);
        expect_same_bits(g, &o, &base, "narrow weights", 6);
        assert_int_equal(o.stats.folded_nodes, 3); /* two widenings into products, one constant */
        /* int8 and f16 weights at their widths (in the core's panels: with a scale and a zero
         * point per column), and the folded small weight: never an f32 copy of a large one */
        assert_in_range(o.stats.constant_bytes, 128 * 384 * 3 + 8 * 16 * 4, 128 * 384 * 3 + 384 * 8 + 8 * 16 * 4 + 4096);
    }
    clrun_graph_destroy(g);
}

/* A product of constants large enough for the matmul core, which packs B into scratch when no
 * executor packed it first: the fold runs the node with that scratch (it failed with "kernel
 * argument 1: no buffer" when folding gave the node only its outputs). */
static void a_folded_product_gets_its_scratch(void **state)
{
    (void)state;
    clrun_graph *g;
    assert_int_equal(clrun_graph_create("folded_product", &g), CLRUN_OK);
    int32_t a = constant(g, "a", shape_of(CLRUN_F32, 2, (int64_t[]){64, 80}), 1);
    int32_t b = constant(g, "b", shape_of(CLRUN_F32, 2, (int64_t[]){80, 96}), 2);
    int32_t m = binary(g, "matmul", "m", a, b);
    int32_t x = input(g, "x", shape_of(CLRUN_F32, 2, (int64_t[]){64, 96}));
    clrun_graph_mark_output(g, binary(g, "add", "y", m, x));
    outcome base = run_unfused(g, 5);
    for (mode_walk mw = modes_tried(); mw.k < mw.n; mw.k++) {
        outcome o = run_graph(g, every_mode[(mw.first + mw.k) % MODE_COUNT], 5);
        expect_same_bits(g, &o, &base, "folded product", 5);
        assert_int_equal(o.stats.folded_nodes, 1);
        assert_int_equal(o.stats.kernels, 1);
    }
    clrun_graph_destroy(g);
}

/* conv2d -> batchnorm with constant parameters folds into one conv2d, within 1e-5 relative
 * (`fold`, CLRUN_FOLD); fusion on or off never changes the bits, folded or not. */
static void batch_norm_folds_into_the_convolution_before_it(void **state)
{
    (void)state;
    if (clrun__op_find("batchnorm") == NULL) {
        fprintf(stderr, "note: no batchnorm op in this build: nothing to fold into a convolution\n");
        skip();
    }
    clrun_graph *g;
    assert_int_equal(clrun_graph_create("bn", &g), CLRUN_OK);
    const int64_t xd[4] = {1, 8, 12, 12}, wd[4] = {16, 8, 3, 3}, c[1] = {16};
    int32_t x = input(g, "x", shape_of(CLRUN_F32, 4, xd));
    int32_t w = constant(g, "w", shape_of(CLRUN_F32, 4, wd), 5), b = constant(g, "b", shape_of(CLRUN_F32, 1, c), 6);
    int32_t in[3] = {x, w, b};
    clrun_attr pad = {.name = "pad", .kind = CLRUN_ATTR_INTS, .ints = {1, 1}, .count = 2};
    int32_t y = node(g, "conv2d", "y", 3, in, &pad, 1);
    int32_t var;
    clrun_tensor_type ct = shape_of(CLRUN_F32, 1, c);
    assert_int_equal(clrun_graph_add_constant(g, "var", &ct, NULL, CLRUN_FILL_UNIFORM, 0.5, 2, 7, &var), CLRUN_OK);
    int32_t bn_in[5] = {y, constant(g, "scale", ct, 8), constant(g, "shift", ct, 9), constant(g, "mean", ct, 10), var};
    clrun_attr eps = {.name = "eps", .kind = CLRUN_ATTR_FLOAT, .f = 1e-3};
    int32_t z = node(g, "batchnorm", "z", 5, bn_in, &eps, 1);
    clrun_graph_mark_output(g, unary(g, "relu", "out", z));
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    /* fusion, fold (1 on, -1 off, 0 the environment's); the last run has CLRUN_FOLD=0 */
    enum { RUNS = 5 };
    const int fusion[RUNS] = {1, -1, 1, -1, 1}, fold[RUNS] = {1, 1, -1, -1, 0};
    const int kernels[RUNS] = {1, 2, 3, 3, 3}; /* conv2d (bn in its weights), bn, relu (epilogue) */
    static float got[RUNS][16 * 12 * 12];
    for (int k = 0; k < RUNS; k++) {
        clrun_exec_options eo;
        clrun_exec_options_init(&eo);
        eo.fusion = fusion[k];
        eo.fold = fold[k];
        if (fold[k] == 0)
            setenv("CLRUN_FOLD", "0", 1);
        clrun_context *run_ctx = ctx;
        if (fold[k] == 0) /* the environment is read when a context is made */
            assert_int_equal(clrun_context_create(NULL, &run_ctx), CLRUN_OK);
        unsetenv("CLRUN_FOLD");
        clrun_exec *exec = NULL;
        assert_int_equal(clrun_exec_create(run_ctx, g, &eo, &exec), CLRUN_OK);
        clrun_buffer xb;
        fill_input(run_ctx, g, x, 12, &xb);
        assert_int_equal(clrun_exec_run(exec, &xb, 1), CLRUN_OK);
        assert_int_equal(clrun_exec_read_output(exec, 0, got[k], sizeof got[k]), CLRUN_OK);
        clrun_exec_stats s;
        clrun_exec_stats_get(exec, &s);
        bool folds = fold[k] > 0;
        assert_int_equal(s.folded_batchnorms, folds ? 1 : 0);
        assert_int_equal(s.folded_nodes, folds ? 1 : 0);
        assert_int_equal(s.kernels, kernels[k]);
        clrun_free(run_ctx, &xb);
        clrun_exec_destroy(exec);
        if (run_ctx != ctx)
            clrun_context_destroy(run_ctx);
    }
    /* Fusion is bit-exact with the fold on, and with it off (then bn runs as its own op). */
    assert_memory_equal(got[0], got[1], sizeof got[0]);
    assert_memory_equal(got[2], got[3], sizeof got[2]);
    assert_memory_equal(got[2], got[4], sizeof got[2]);
    /* Relative to the output's magnitude: an element near 0 is the difference of terms of that
     * size, so its own relative error says nothing about the fold. */
    float largest = 0;
    for (size_t i = 0; i < 16 * 12 * 12; i++)
        largest = fabsf(got[3][i]) > largest ? fabsf(got[3][i]) : largest;
    assert_true(largest > 0.1f);
    for (size_t i = 0; i < 16 * 12 * 12; i++)
        if (!(fabsf(got[0][i] - got[3][i]) <= 1e-5f * largest))
            fail_msg("element %zu: folded %.9g, unfolded %.9g (largest %.9g)", i, got[0][i], got[3][i], largest);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

/* ---- set-up ------------------------------------------------------------------------------ */

int main(void)
{
    clrun_test_device_environment(cache_root, sizeof cache_root);
    unsetenv("CLRUN_FUSION");
    unsetenv("CLRUN_FOLD");
    const char *seed = getenv("CLRUN_TEST_SEED");
    base_seed = seed ? strtoull(seed, NULL, 10) : (uint64_t)time(NULL);
    fprintf(stderr, "test_fuse: seed %llu (set CLRUN_TEST_SEED to repeat)\n", (unsigned long long)base_seed);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_chain_of_single_use_ops_is_one_group),
        cmocka_unit_test(an_intermediate_read_twice_or_an_output_ends_a_group),
        cmocka_unit_test(a_smaller_producer_is_not_recomputed_per_element),
        cmocka_unit_test(groups_stay_within_the_buffer_limit),
        cmocka_unit_test(other_ops_and_exclusions_end_groups),
        cmocka_unit_test(layout_nodes_lead_groups_as_their_leaves),
        cmocka_unit_test(iteration_spaces_ignore_dimensions_of_one),
        cmocka_unit_test(random_fusible_graphs_give_the_same_bits_in_every_mode),
        cmocka_unit_test(every_dtype_fuses_with_the_same_bits),
        cmocka_unit_test(one_program_is_built_per_executor),
        cmocka_unit_test(groups_of_the_same_text_share_one_kernel),
        cmocka_unit_test(a_kernel_that_does_not_build_runs_unfused),
        cmocka_unit_test(spans_name_fused_kernels_after_their_ops),
        cmocka_unit_test_teardown(clrun_fusion_0_turns_it_off, clear_fusion_environment),
        cmocka_unit_test(epilogues_run_in_the_product_kernel_with_the_same_bits),
        cmocka_unit_test(a_cpu_fuses_the_epilogues_its_lane_stores_take),
        cmocka_unit_test(a_cpu_fuses_exp_epilogues_on_vector_stores),
        cmocka_unit_test(a_cpu_reads_an_epilogues_inputs_as_vectors),
        cmocka_unit_test(convolution_epilogues_share_one_program_where_kernels_compile_at_launch),
        cmocka_unit_test(a_lane_kernel_builds_its_epilogue_alone),
        cmocka_unit_test(the_core_takes_half_width_only_on_large_planes),
        cmocka_unit_test(products_of_a_one_by_one_plane_run_on_the_classifier_kernel),
        cmocka_unit_test(a_reshape_in_place_builds_no_program),
        cmocka_unit_test(a_residual_add_either_way_is_one_epilogue_program),
        cmocka_unit_test(moves_and_siblings_fuse_with_the_same_bits),
        cmocka_unit_test(rank_eight_chains_fuse_with_the_same_bits),
        cmocka_unit_test(constant_nodes_run_once_into_constants_with_the_same_bits),
        cmocka_unit_test(a_folded_product_gets_its_scratch),
        cmocka_unit_test(a_narrow_weight_is_widened_at_run_time),
        cmocka_unit_test(batch_norm_folds_into_the_convolution_before_it),
        cmocka_unit_test(example_graphs_keep_their_bits_and_memory),
        cmocka_unit_test(generated_models_keep_their_bits_and_memory),
    };
    CLRUN_TEST_FILTERS_FROM_ENVIRONMENT();
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    destroy_kept_contexts();
    clrun_test_remove_dir(cache_root);
    return failed;
}
