/* The executor on a real device: the sacred invariant (reuse never changes results) on random
 * graphs, the memory it really took (from the pool's own allocation log), donation, and bad
 * input. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include <clrun/clrun.h>

#include "device_test.h"
#include "rng.h"
#include "graph/graph.h"
#include "memory/pool.h"
#include "device/cl.h"

static char cache_root[512];
static uint64_t base_seed;


static int pick(uint64_t *state, int n) { return (int)(rng_next(state) % (uint64_t)n); }

/* ---- random graphs ------------------------------------------------------------------------ */

typedef struct random_graph {
    clrun_graph *graph;
    int32_t tensors[256]; /* tensors a node may read */
    int count;
    int names; /* nodes made so far: names their outputs */
    int donated_inputs;
} random_graph;

static clrun_tensor_type matrix(int64_t rows, int64_t cols)
{
    clrun_tensor_type t = {CLRUN_F32, 2, {rows, cols}};
    return t;
}

static int32_t add_node(random_graph *r, const char *op, const int32_t *inputs, int n, const clrun_attr *attrs,
                        int attr_count)
{
    char name[32];
    snprintf(name, sizeof name, "t%d", r->names++);
    const char *names[] = {name};
    int32_t out = -1;
    clrun_status status = clrun_graph_add_node(r->graph, op, inputs, n, names, 1, attrs, attr_count, &out);
    if (status != CLRUN_OK) {
        fprintf(stderr, "add_node %s: %s\n", op, clrun_graph_last_error(r->graph));
        fail();
    }
    r->tensors[r->count++] = out;
    return out;
}

/* A tensor of the graph with `cols` columns, or -1. */
static int32_t find_with_cols(random_graph *r, uint64_t *rng, int64_t rows, int64_t cols)
{
    int start = pick(rng, r->count);
    for (int i = 0; i < r->count; i++) {
        int32_t t = r->tensors[(start + i) % r->count];
        const clrun_tensor_type *type = clrun_graph_tensor_type(r->graph, t);
        if (type->rank == 2 && type->shape[0] == rows && type->shape[1] == cols)
            return t;
    }
    return -1;
}

/* A random DAG over [rows, cols] matrices: elementwise ops with broadcasting, matmuls against
 * seeded weights (changing the width), softmax, layernorm, transposes, concats of tensors only
 * they read (assembled in place where their places align); wide fan-out since every node may
 * read any earlier tensor. Every tensor nobody reads becomes an output. */
static random_graph make_random_graph(uint64_t seed, int nodes)
{
    random_graph r = {0};
    uint64_t rng = seed;
    assert_int_equal(clrun_graph_create("random", &r.graph), CLRUN_OK);
    int64_t rows = 1 + pick(&rng, 24);
    int64_t widths[] = {1 + pick(&rng, 40), 1 + pick(&rng, 40), 8};
    int inputs = 1 + pick(&rng, 3);
    for (int i = 0; i < inputs; i++) {
        char name[16];
        snprintf(name, sizeof name, "in%d", i);
        clrun_tensor_type t = matrix(rows, widths[pick(&rng, 3)]);
        bool donated = pick(&rng, 2) == 0;
        r.donated_inputs += donated;
        assert_int_equal(clrun_graph_add_input(r.graph, name, &t, donated, &r.tensors[r.count++]), CLRUN_OK);
    }
    static const char *const unary[] = {"relu", "neg", "gelu", "tanh", "sigmoid", "copy", "abs"};
    static const char *const binary[] = {"add", "sub", "mul", "maximum", "minimum"};
    for (int n = 0; n < nodes; n++) {
        int32_t a = r.tensors[pick(&rng, r.count)];
        const clrun_tensor_type *ta = clrun_graph_tensor_type(r.graph, a);
        int64_t cols = ta->shape[1];
        int kind = pick(&rng, 9);
        if (kind == 0) {
            add_node(&r, unary[pick(&rng, 7)], &a, 1, NULL, 0);
        } else if (kind == 1) {
            int32_t b = find_with_cols(&r, &rng, rows, cols);
            int32_t in[2] = {a, b >= 0 ? b : a}; /* add(a, a) when no partner has a's shape */
            add_node(&r, binary[pick(&rng, 5)], in, 2, NULL, 0);
        } else if (kind == 2) { /* broadcast a row vector */
            char name[16];
            snprintf(name, sizeof name, "bias%d", n);
            clrun_tensor_type t = {CLRUN_F32, 1, {cols}};
            int32_t bias;
            assert_int_equal(clrun_graph_add_constant(r.graph, name, &t, NULL, CLRUN_FILL_UNIFORM, -1, 1,
                                                      seed + (uint64_t)n, &bias), CLRUN_OK);
            int32_t in[2] = {a, bias};
            add_node(&r, binary[pick(&rng, 3)], in, 2, NULL, 0);
        } else if (kind == 3) { /* matmul to another width */
            char name[16];
            snprintf(name, sizeof name, "w%d", n);
            clrun_tensor_type t = matrix(cols, widths[pick(&rng, 3)]);
            int32_t w;
            assert_int_equal(clrun_graph_add_constant(r.graph, name, &t, NULL, CLRUN_FILL_NORMAL, 0, 0.2,
                                                      seed * 31 + (uint64_t)n, &w), CLRUN_OK);
            int32_t in[2] = {a, w};
            add_node(&r, "matmul", in, 2, NULL, 0);
        } else if (kind == 4) {
            add_node(&r, "softmax", &a, 1, NULL, 0);
        } else if (kind == 5) {
            clrun_attr attrs[2] = {{.name = "alpha", .kind = CLRUN_ATTR_FLOAT, .f = 0.5},
                                   {.name = "beta", .kind = CLRUN_ATTR_FLOAT, .f = 0.25}};
            add_node(&r, "scale", &a, 1, attrs, 2);
        } else if (kind == 7) { /* views: flattened, then back to [rows, cols], or as it is */
            clrun_attr flat = {.name = "shape", .kind = CLRUN_ATTR_INTS, .ints = {rows * cols}, .count = 1};
            clrun_attr back = {.name = "shape", .kind = CLRUN_ATTR_INTS, .ints = {rows, cols}, .count = 2};
            if (pick(&rng, 2)) {
                int32_t v = add_node(&r, "reshape", &a, 1, &flat, 1);
                r.count--; /* [rows * cols]: no later node may pick it */
                add_node(&r, "reshape", &v, 1, &back, 1);
            } else {
                add_node(&r, "reshape", &a, 1, &back, 1);
            }
        } else if (kind == 8) { /* two new tensors read by a concat alone, seen as [rows, 2 cols] */
            int32_t b = find_with_cols(&r, &rng, rows, cols);
            int32_t p = add_node(&r, unary[pick(&rng, 7)], &a, 1, NULL, 0);
            int32_t q = add_node(&r, unary[pick(&rng, 7)], b >= 0 ? &b : &a, 1, NULL, 0);
            r.count -= 2; /* no later node may pick them */
            int32_t in[2] = {p, q};
            clrun_attr axis = {.name = "axis", .kind = CLRUN_ATTR_INT, .i = 0};
            int32_t c = add_node(&r, "concat", in, 2, &axis, 1);
            r.count--; /* [2 rows, cols] */
            clrun_attr wide = {.name = "shape", .kind = CLRUN_ATTR_INTS, .ints = {rows, 2 * cols}, .count = 2};
            add_node(&r, "reshape", &c, 1, &wide, 1);
        } else { /* transpose twice to stay [rows, cols] */
            clrun_attr perm = {.name = "perm", .kind = CLRUN_ATTR_INTS, .ints = {1, 0}, .count = 2};
            int32_t t = add_node(&r, "transpose", &a, 1, &perm, 1);
            r.count--; /* the transposed middle is [cols, rows]: no later node may pick it */
            add_node(&r, "transpose", &t, 1, &perm, 1);
        }
        if (r.count > 240)
            break;
    }
    /* The last tensor and a random fifth of the others become outputs; tensors nobody reads are
     * left dangling on purpose (they die at the step that makes them). */
    for (int i = 0; i < r.count; i++) {
        int32_t t = r.tensors[i];
        bool is_input = strncmp(clrun_graph_tensor_name(r.graph, t), "in", 2) == 0;
        if (!is_input && (pick(&rng, 5) == 0 || i == r.count - 1))
            assert_int_equal(clrun_graph_mark_output(r.graph, t), CLRUN_OK);
    }
    assert_int_equal(clrun_graph_validate(r.graph), CLRUN_OK);
    return r;
}

/* ---- running ------------------------------------------------------------------------------ */

typedef struct logged_block {
    uint32_t chunk;
    uint64_t offset, size;
    bool live;
} logged_block;

typedef struct allocation_log {
    logged_block blocks[4096];
    int count;
    int overlaps; /* live blocks that shared bytes: must stay 0 */
} allocation_log;

static void observe(const clrun__pool_event *e, void *user)
{
    allocation_log *log = user;
    if (!e->is_alloc) {
        for (int i = log->count - 1; i >= 0; i--)
            if (log->blocks[i].live && log->blocks[i].chunk == e->chunk && log->blocks[i].offset == e->offset) {
                log->blocks[i].live = false;
                return;
            }
        log->overlaps += 1000; /* a free of a block the log never saw */
        return;
    }
    for (int i = 0; i < log->count; i++) {
        const logged_block *b = &log->blocks[i];
        if (b->live && b->chunk == e->chunk && b->offset < e->offset + e->size && e->offset < b->offset + b->size)
            log->overlaps++;
    }
    if (log->count < 4096)
        log->blocks[log->count++] = (logged_block){e->chunk, e->offset, e->size, true};
}

typedef struct run_outcome {
    uint64_t *hashes; /* one per output: FNV-1a of its bytes */
    int outputs;
    clrun_exec_stats stats;
    int overlaps;
} run_outcome;

static uint64_t fnv1a(const unsigned char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static void fill_input(clrun_context *ctx, const clrun_graph *g, int32_t t, uint64_t seed, clrun_buffer *out)
{
    uint64_t bytes = clrun_tensor_bytes(clrun_graph_tensor_type(g, t));
    float *host = malloc((size_t)bytes);
    assert_non_null(host);
    uint64_t rng = seed;
    for (uint64_t i = 0; i < bytes / 4; i++)
        host[i] = (float)((int)(rng_next(&rng) % 2001) - 1000) / 500.0f;
    assert_int_equal(clrun_alloc_ex(ctx, bytes, 0, clrun_graph_tensor_name(g, t), out), CLRUN_OK);
    assert_int_equal(clrun_buffer_write(ctx, out, host), CLRUN_OK);
    free(host);
}

/* The memory budget run_mode's executors get (0: none). */
static uint64_t run_budget;

/* Runs g twice under one mode/allocator and returns the outputs' hashes (identical both runs). */
/* A context with the allocator and queue kind given. */
static clrun_context *context_for(const char *allocator, bool out_of_order)
{
    clrun_context_options o;
    clrun_context_options_init(&o);
    o.allocator = allocator;
    o.out_of_order = out_of_order ? 1 : -1;
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(&o, &ctx), CLRUN_OK);
    return ctx;
}

static run_outcome run_mode_in(clrun_context *ctx, const clrun_graph *g, clrun_exec_mode mode,
                               const char *allocator, bool out_of_order, uint64_t seed);

/* Runs g twice in `mode` on a context of its own: the outputs' hashes, the stats, and how many
 * times two live blocks of the pool overlapped. */
static run_outcome run_mode(const clrun_graph *g, clrun_exec_mode mode, const char *allocator, bool out_of_order,
                            uint64_t seed)
{
    clrun_context *ctx = context_for(allocator, out_of_order);
    run_outcome r = run_mode_in(ctx, g, mode, allocator, out_of_order, seed);
    clrun_context_destroy(ctx);
    return r;
}

/* The same on ctx (context_for(allocator, out_of_order)), which keeps the kernels it built. */
static run_outcome run_mode_in(clrun_context *ctx, const clrun_graph *g, clrun_exec_mode mode,
                               const char *allocator, bool out_of_order, uint64_t seed)
{
    allocation_log *log = calloc(1, sizeof *log);
    assert_non_null(log);
    assert_int_equal(clrun__pool_observe(ctx, observe, log), CLRUN_OK);
    clrun_exec_options eo = {.mode = mode, .plan_time_limit_s = 0.05, .memory_budget = run_budget};
    clrun_exec *exec = NULL;
    if (clrun_exec_create(ctx, g, &eo, &exec) != CLRUN_OK) {
        fprintf(stderr, "exec_create (%s/%s%s): %s\n", clrun_exec_mode_name(mode), allocator, out_of_order ? " out-of-order" : "", clrun_last_error(ctx));
        fail();
    }
    const clrun_tensor_id *ins, *outs;
    int32_t n_in = clrun_graph_inputs(g, &ins);
    int32_t n_out = clrun_graph_outputs(g, &outs);
    run_outcome r = {calloc((size_t)n_out + 1, sizeof(uint64_t)), n_out, {0}, 0};
    clrun_buffer inputs[8];
    for (int run = 0; run < 2; run++) {
        /* Donated inputs are consumed by each run, so every run gets fresh inputs. */
        for (int32_t i = 0; i < n_in; i++)
            fill_input(ctx, g, ins[i], seed + (uint64_t)i, &inputs[i]);
        if (clrun_exec_run(exec, inputs, n_in) != CLRUN_OK) {
            fprintf(stderr, "run: %s\n", clrun_last_error(ctx));
            fail();
        }
        for (int32_t i = 0; i < n_out; i++) {
            uint64_t bytes = clrun_tensor_bytes(clrun_graph_tensor_type(g, outs[i]));
            unsigned char *host = malloc((size_t)bytes);
            assert_non_null(host);
            assert_int_equal(clrun_exec_read_output(exec, i, host, bytes), CLRUN_OK);
            uint64_t h = fnv1a(host, (size_t)bytes);
            if (run == 1)
                assert_true(h == r.hashes[i]); /* a second run gives the same bits */
            r.hashes[i] = h;
            free(host);
        }
        for (int32_t i = 0; i < n_in; i++) /* the caller's own inputs are the caller's to free */
            if (!g->tensors[ins[i]].donated)
                assert_int_equal(clrun_free(ctx, &inputs[i]), CLRUN_OK);
    }
    assert_int_equal(clrun_exec_stats_get(exec, &r.stats), CLRUN_OK);
    clrun_exec_destroy(exec);
    clrun__pool_observe(ctx, NULL, NULL);
    r.overlaps = log->overlaps;
    free(log);
    clrun_memory_stats ms;
    assert_int_equal(clrun_memory_stats_get(ctx, &ms), CLRUN_OK);
    assert_int_equal(ms.in_use, 0); /* the runs left nothing behind in the pool */
    return r;
}

/* Every non-constant tensor in its own buffer, each rounded up to the device's alignment. */
static uint64_t padded_naive_bytes(const clrun_graph *g)
{
    clrun_device_info *list;
    size_t count, chosen;
    assert_int_equal(clrun_device_list(&list, &count), CLRUN_OK);
    assert_int_equal(clrun_device_select(list, count, NULL, NULL, &chosen), CLRUN_OK);
    uint64_t align = list[chosen].base_addr_align, total = 0;
    clrun_device_list_free(list);
    for (int32_t t = 0; t < g->tensor_count; t++)
        if (g->tensors[t].kind != CLRUN__TENSOR_CONSTANT)
            total += (clrun_tensor_bytes(&g->tensors[t].type) + align - 1) / align * align;
    return total;
}

static void outputs_are_bit_identical_in_every_mode(void **state)
{
    (void)state;
    const struct {
        clrun_exec_mode mode;
        const char *allocator;
        bool out_of_order;
    } modes[] = {{CLRUN_EXEC_NAIVE, "buddy", false},  {CLRUN_EXEC_POOLED, "buddy", false},
                 {CLRUN_EXEC_POOLED, "slab", false},  {CLRUN_EXEC_POOLED, "bump", false},
                 {CLRUN_EXEC_POOLED, "tlsf", false},  {CLRUN_EXEC_PLANNED, "buddy", false},
                 {CLRUN_EXEC_POOLED, "buddy", true},  {CLRUN_EXEC_POOLED, "slab", true},
                 {CLRUN_EXEC_POOLED, "tlsf", true},   {CLRUN_EXEC_PLANNED, "buddy", true}};
    enum { MODES = sizeof modes / sizeof modes[0] };
    /* a context per mode for every round, as an application keeps one: each builds the kernels
     * of the ops once, not once per graph; modes[0] is the naive reference */
    clrun_context *contexts[MODES];
    for (size_t m = 0; m < MODES; m++)
        contexts[m] = context_for(modes[m].allocator, modes[m].out_of_order);
    for (int g = 0, rounds = clrun_test_rounds(12); g < rounds; g++) {
        uint64_t seed = base_seed + (uint64_t)g;
        random_graph r = make_random_graph(seed, 8 + (int)(seed % 40));
        run_outcome naive = run_mode_in(contexts[0], r.graph, CLRUN_EXEC_NAIVE, "buddy", false, seed);
        for (size_t m = 1; m < MODES; m++) {
            run_outcome o = run_mode_in(contexts[m], r.graph, modes[m].mode, modes[m].allocator,
                                        modes[m].out_of_order, seed);
            if (o.overlaps != 0 || memcmp(o.hashes, naive.hashes, (size_t)naive.outputs * sizeof(uint64_t)) != 0) {
                fprintf(stderr, "seed %llu: mode %s/%s%s differs from naive (overlaps %d)\n",
                        (unsigned long long)seed, clrun_exec_mode_name(modes[m].mode), modes[m].allocator,
                        modes[m].out_of_order ? " out-of-order" : "", o.overlaps);
                fail();
            }
            assert_true(o.stats.peak_bytes >= o.stats.lower_bound_bytes);
            /* Pooled modes count bytes as asked for; the planned arena also holds the padding
             * that aligns each buffer's start, so its bound is the naive total padded alike. */
            uint64_t naive_bound = modes[m].mode == CLRUN_EXEC_PLANNED ? padded_naive_bytes(r.graph)
                                                                       : o.stats.naive_bytes;
            assert_true(o.stats.peak_bytes <= naive_bound);
            free(o.hashes);
        }
        assert_true(naive.stats.peak_bytes == naive.stats.naive_bytes);
        free(naive.hashes);
        clrun_graph_destroy(r.graph);
    }
    for (size_t m = 0; m < MODES; m++)
        clrun_context_destroy(contexts[m]);
}

/* What an executor of g holds under `budget` in `mode` (0 when it is refused), and how many
 * tensors it recomputes to fit. */
static uint64_t held_under(const clrun_graph *g, clrun_exec_mode mode, const char *allocator,
                           bool out_of_order, uint64_t budget, int32_t *recomputed)
{
    clrun_context_options co;
    clrun_context_options_init(&co);
    co.allocator = allocator;
    co.out_of_order = out_of_order ? 1 : -1;
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(&co, &ctx), CLRUN_OK);
    clrun_exec_options eo = {.mode = mode, .plan_time_limit_s = 0.05, .memory_budget = budget};
    clrun_exec *exec = NULL;
    clrun_status s = clrun_exec_create(ctx, g, &eo, &exec);
    clrun_exec_stats st = {0};
    if (s == CLRUN_OK)
        assert_int_equal(clrun_exec_stats_get(exec, &st), CLRUN_OK);
    else
        assert_int_equal(s, CLRUN_ERROR_OUT_OF_MEMORY); /* refused, never another failure */
    clrun_exec_destroy(exec);
    clrun_memory_stats ms;
    assert_int_equal(clrun_memory_stats_get(ctx, &ms), CLRUN_OK);
    assert_int_equal(ms.in_use, 0); /* a refusal leaves nothing behind */
    clrun_context_destroy(ctx);
    *recomputed = st.recomputed_tensors + st.offloaded_tensors; /* dropped either way */
    return s == CLRUN_OK ? st.held_bytes : 0;
}

/* In each mode, a budget one byte below what a random graph holds there: where recomputing or
 * offloading after the peak meets it, the outputs are the bits of the naive run without a
 * budget. */
static void a_memory_budget_keeps_every_output_bit_identical(void **state)
{
    (void)state;
    int fitted = 0;
    struct {
        clrun_exec_mode mode;
        const char *allocator;
        bool out_of_order;
    } modes[] = {{CLRUN_EXEC_PLANNED, "buddy", false}, {CLRUN_EXEC_POOLED, "tlsf", false},
                 {CLRUN_EXEC_PLANNED, "buddy", true}};
    /* the rounds asked for, and more (at most 32) until one graph has a budget to fit: a graph
     * with nothing alive across its peak but the peak node's own tensors has none, and a short
     * run (CLRUN_TEST_ROUNDS) may draw only such graphs */
    for (int g = 0, rounds = clrun_test_rounds(12) / 3; g < rounds || (fitted == 0 && g < rounds + 32); g++) {
        uint64_t seed = base_seed + 100 + (uint64_t)g;
        random_graph r = make_random_graph(seed, 8 + (int)(seed % 40));
        run_outcome naive = run_mode(r.graph, CLRUN_EXEC_NAIVE, "buddy", false, seed);
        for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
            int32_t recomputed = 0;
            uint64_t given = held_under(r.graph, modes[m].mode, modes[m].allocator,
                                        modes[m].out_of_order, UINT64_MAX, &recomputed);
            assert_int_equal(recomputed, 0);
            uint64_t held = held_under(r.graph, modes[m].mode, modes[m].allocator,
                                       modes[m].out_of_order, given - 1, &recomputed);
            if (held == 0)
                continue; /* nothing alive across the peak to recompute: refused */
            assert_true(held <= given - 1 && recomputed > 0);
            fitted++;
            run_budget = given - 1;
            run_outcome o = run_mode(r.graph, modes[m].mode, modes[m].allocator, modes[m].out_of_order, seed);
            run_budget = 0;
            if (o.overlaps != 0 || memcmp(o.hashes, naive.hashes, (size_t)naive.outputs * sizeof(uint64_t)) != 0) {
                fprintf(stderr, "seed %llu: budget %llu, mode %s/%s%s differs from naive (overlaps %d)\n",
                        (unsigned long long)seed, (unsigned long long)(given - 1),
                        clrun_exec_mode_name(modes[m].mode), modes[m].allocator,
                        modes[m].out_of_order ? " out-of-order" : "", o.overlaps);
                fail();
            }
            assert_true(o.stats.recomputed_tensors + o.stats.offloaded_tensors > 0); /* dropped either way */
            free(o.hashes);
        }
        free(naive.hashes);
        clrun_graph_destroy(r.graph);
    }
    assert_true(fitted > 0);
}

/* ---- donation ----------------------------------------------------------------------------- */

static clrun_graph *chain_graph(bool donate)
{
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("chain", &g), CLRUN_OK);
    clrun_tensor_type t = matrix(16, 16);
    int32_t x, a, b;
    assert_int_equal(clrun_graph_add_input(g, "x", &t, donate, &x), CLRUN_OK);
    const char *na[] = {"a"}, *nb[] = {"b"};
    assert_int_equal(clrun_graph_add_node(g, "relu", &x, 1, na, 1, NULL, 0, &a), CLRUN_OK);
    assert_int_equal(clrun_graph_add_node(g, "neg", &a, 1, nb, 1, NULL, 0, &b), CLRUN_OK);
    assert_int_equal(clrun_graph_mark_output(g, b), CLRUN_OK);
    return g;
}

/* g's executor with fusion off: a chain's two nodes stay the two steps a test counts. */
static clrun_exec *unfused_exec(clrun_context *ctx, const clrun_graph *g)
{
    clrun_exec_options unfused;
    clrun_exec_options_init(&unfused);
    unfused.fusion = -1;
    clrun_exec *exec = NULL;
    assert_int_equal(clrun_exec_create(ctx, g, &unfused, &exec), CLRUN_OK);
    return exec;
}

static void donated_input_is_written_in_place_and_unusable_afterwards(void **state)
{
    (void)state;
    clrun_graph *g = chain_graph(true);
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    /* the chain's two nodes are the two donations under test */
    clrun_exec *exec = unfused_exec(ctx, g);
    clrun_buffer x;
    fill_input(ctx, g, clrun_graph_find(g, "x"), 7, &x);
    assert_int_equal(clrun_exec_run(exec, &x, 1), CLRUN_OK);
    clrun_exec_stats s;
    assert_int_equal(clrun_exec_stats_get(exec, &s), CLRUN_OK);
    assert_int_equal(s.donations, 2);       /* a takes x's block, b takes a's */
    assert_int_equal(s.donated_in_place, 1); /* of them, x's: the one donated input */
    assert_int_equal(s.driver_allocs, 0);   /* nothing new was reserved */
    cl_mem out;
    assert_int_equal(clrun_exec_output(exec, 0, &out, NULL), CLRUN_OK);
    assert_ptr_equal(out, x.mem);           /* the output lives in the donated block */
    assert_int_equal(clrun_exec_run(exec, &x, 1), CLRUN_ERROR_DONATED);
    const char *msg = clrun_last_error(ctx);
    assert_non_null(strstr(msg, "input 'x'"));
    assert_non_null(strstr(msg, "donated"));
    /* The block is the executor's now: freeing the caller's old handle is refused by name and
     * changes nothing (it used to free the output's block). */
    assert_int_equal(clrun_free(ctx, &x), CLRUN_ERROR_DONATED);
    assert_non_null(strstr(clrun_last_error(ctx), "input 'x'"));
    clrun_exec_destroy(exec);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

static void kept_input_is_never_written(void **state)
{
    (void)state;
    clrun_graph *g = chain_graph(false);
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    /* the chain's two nodes are the two donations under test */
    clrun_exec *exec = unfused_exec(ctx, g);
    clrun_buffer x;
    fill_input(ctx, g, clrun_graph_find(g, "x"), 9, &x);
    float before[256], after[256];
    assert_int_equal(clrun_buffer_read(ctx, &x, before), CLRUN_OK);
    assert_int_equal(clrun_exec_run(exec, &x, 1), CLRUN_OK);
    assert_int_equal(clrun_exec_run(exec, &x, 1), CLRUN_OK); /* still the caller's: reusable */
    assert_int_equal(clrun_buffer_read(ctx, &x, after), CLRUN_OK);
    assert_memory_equal(before, after, sizeof before);
    clrun_exec_stats s;
    clrun_exec_stats_get(exec, &s);
    assert_int_equal(s.donations, 1); /* b takes a's block; x is not the executor's to reuse */
    assert_int_equal(s.donated_in_place, 0);
    assert_int_equal(clrun_free(ctx, &x), CLRUN_OK);
    clrun_exec_destroy(exec);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

/* y = matmul(x, w) with x donated: no output can take x's block (a product cannot write in
 * place), so the donation goes unused. */
static clrun_graph *donated_product(const char *name, int32_t *x)
{
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create(name, &g), CLRUN_OK);
    clrun_tensor_type t = matrix(4, 8), w = matrix(8, 3);
    int32_t wt, y;
    assert_int_equal(clrun_graph_add_input(g, "x", &t, true, x), CLRUN_OK);
    assert_int_equal(clrun_graph_add_constant(g, "w", &w, NULL, CLRUN_FILL_ONES, 0, 0, 1, &wt), CLRUN_OK);
    int32_t in[2] = {*x, wt};
    const char *ny[] = {"y"};
    assert_int_equal(clrun_graph_add_node(g, "matmul", in, 2, ny, 1, NULL, 0, &y), CLRUN_OK);
    assert_int_equal(clrun_graph_mark_output(g, y), CLRUN_OK);
    return g;
}

static void unusable_donation_is_reported(void **state)
{
    (void)state;
    int32_t x;
    clrun_graph *g = donated_product("unused", &x);
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    clrun_exec *exec = NULL;
    assert_int_equal(clrun_exec_create(ctx, g, NULL, &exec), CLRUN_OK);
    const char *const *names = NULL;
    assert_int_equal(clrun_exec_unused_donations(exec, &names), 1);
    assert_string_equal(names[0], "x");
    clrun_buffer xb;
    fill_input(ctx, g, x, 3, &xb);
    assert_int_equal(clrun_exec_run(exec, &xb, 1), CLRUN_OK);
    assert_int_equal(clrun_free(ctx, &xb), CLRUN_ERROR_DONATED); /* consumed all the same */
    clrun_memory_stats ms;
    clrun_exec_destroy(exec);
    assert_int_equal(clrun_memory_stats_get(ctx, &ms), CLRUN_OK);
    assert_int_equal(ms.in_use, 0); /* nothing leaked: x freed after its last use */
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

/* h + res with res donated: res's block takes the sum whichever operand comes first, though the
 * intermediate a = relu(h) dies at the same node (it used to win when it came first). */
static void donation_does_not_depend_on_operand_order(void **state)
{
    (void)state;
    for (int res_first = 0; res_first < 2; res_first++) {
        clrun_graph *g = NULL;
        assert_int_equal(clrun_graph_create("order", &g), CLRUN_OK);
        clrun_tensor_type t = matrix(4, 8);
        int32_t h, res, a, y;
        assert_int_equal(clrun_graph_add_input(g, "h", &t, false, &h), CLRUN_OK);
        assert_int_equal(clrun_graph_add_input(g, "res", &t, true, &res), CLRUN_OK);
        const char *na[] = {"a"}, *ny[] = {"y"};
        assert_int_equal(clrun_graph_add_node(g, "relu", &h, 1, na, 1, NULL, 0, &a), CLRUN_OK);
        int32_t in[2] = {res_first ? res : a, res_first ? a : res};
        assert_int_equal(clrun_graph_add_node(g, "add", in, 2, ny, 1, NULL, 0, &y), CLRUN_OK);
        assert_int_equal(clrun_graph_mark_output(g, y), CLRUN_OK);
        clrun_context *ctx = NULL;
        assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
        clrun_exec *exec = NULL;
        assert_int_equal(clrun_exec_create(ctx, g, NULL, &exec), CLRUN_OK);
        const char *const *names;
        assert_int_equal(clrun_exec_unused_donations(exec, &names), 0);
        clrun_buffer inputs[2];
        fill_input(ctx, g, h, 1, &inputs[0]);
        fill_input(ctx, g, res, 2, &inputs[1]);
        cl_mem res_mem = inputs[1].mem, out;
        assert_int_equal(clrun_exec_run(exec, inputs, 2), CLRUN_OK);
        assert_int_equal(clrun_exec_output(exec, 0, &out, NULL), CLRUN_OK);
        assert_ptr_equal(out, res_mem);
        clrun_exec_destroy(exec);
        assert_int_equal(clrun_free(ctx, &inputs[0]), CLRUN_OK);
        clrun_context_destroy(ctx);
        clrun_graph_destroy(g);
    }
}

static char logged[2048];
static void keep_log(clrun_log_level level, const char *message, void *user)
{
    (void)user;
    if (level == CLRUN_LOG_WARN)
        snprintf(logged, sizeof logged, "%s", message);
}

/* What CLRUN_LOG=debug promises: every allocation, step and kernel launch. */
typedef struct debug_log {
    int allocs, frees, steps, launches, total;
} debug_log;

static void count_debug(clrun_log_level level, const char *message, void *user)
{
    debug_log *log = user;
    log->total++;
    if (level != CLRUN_LOG_DEBUG)
        return;
    log->allocs += strncmp(message, "alloc '", 7) == 0;
    log->frees += strncmp(message, "free '", 6) == 0;
    log->steps += strncmp(message, "step ", 5) == 0;
    log->launches += strncmp(message, "launch ", 7) == 0;
}

static void debug_logging_shows_every_allocation_and_launch(void **state)
{
    (void)state;
    clrun_graph *g = chain_graph(false);
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    /* the chain's two nodes are the two steps it counts */
    clrun_exec *exec = unfused_exec(ctx, g);
    clrun_buffer x;
    fill_input(ctx, g, clrun_graph_find(g, "x"), 7, &x);
    debug_log quiet = {0}, loud = {0};
    clrun_log_set_handler(count_debug, &quiet);
    clrun_log_set_level(CLRUN_LOG_NONE);
    assert_int_equal(clrun_exec_run(exec, &x, 1), CLRUN_OK);
    clrun_log_set_handler(count_debug, &loud);
    clrun_log_set_level(CLRUN_LOG_DEBUG);
    assert_int_equal(clrun_exec_run(exec, &x, 1), CLRUN_OK);
    clrun_log_set_level(CLRUN_LOG_NONE);
    clrun_log_set_handler(NULL, NULL);
    assert_int_equal(quiet.total, 0);
    assert_int_equal(loud.steps, 2);      /* relu, neg */
    assert_true(loud.launches >= 2);
    assert_true(loud.allocs >= 1 && loud.frees >= 1); /* a's block, and the last outputs' */
    clrun_exec_destroy(exec);
    assert_int_equal(clrun_free(ctx, &x), CLRUN_OK);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

/* The warning says why a donation went unused, not a fixed guess. */
static void unused_donation_says_why(void **state)
{
    (void)state;
    int32_t x;
    clrun_graph *g = donated_product("why", &x);
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    clrun_log_set_level(CLRUN_LOG_WARN);
    clrun_log_set_handler(keep_log, NULL);
    clrun_exec *exec = NULL;
    assert_int_equal(clrun_exec_create(ctx, g, NULL, &exec), CLRUN_OK);
    clrun_log_set_handler(NULL, NULL);
    clrun_log_set_level(CLRUN_LOG_NONE);
    assert_non_null(strstr(logged, "donated input 'x' could not be used: its last reader 'y' "
                                   "(matmul) cannot write its output in place"));
    clrun_exec_destroy(exec);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

/* A kept input is alive for the whole run, so an achievable bound counts it throughout: x, a and
 * the transposed c are live at the last step, and the pooled run reaches the bound. */
static void the_lower_bound_counts_kept_inputs_for_the_whole_run(void **state)
{
    (void)state;
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("kept", &g), CLRUN_OK);
    clrun_tensor_type t = matrix(16, 16);
    int32_t x, a, b, c;
    assert_int_equal(clrun_graph_add_input(g, "x", &t, false, &x), CLRUN_OK);
    const char *na[] = {"a"}, *nb[] = {"b"}, *nc[] = {"c"};
    clrun_attr perm = {.name = "perm", .kind = CLRUN_ATTR_INTS, .ints = {1, 0}, .count = 2};
    assert_int_equal(clrun_graph_add_node(g, "relu", &x, 1, na, 1, NULL, 0, &a), CLRUN_OK);
    assert_int_equal(clrun_graph_add_node(g, "neg", &a, 1, nb, 1, NULL, 0, &b), CLRUN_OK);
    assert_int_equal(clrun_graph_add_node(g, "transpose", &b, 1, nc, 1, &perm, 1, &c), CLRUN_OK);
    assert_int_equal(clrun_graph_mark_output(g, c), CLRUN_OK);
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    clrun_exec *exec = NULL;
    assert_int_equal(clrun_exec_create(ctx, g, NULL, &exec), CLRUN_OK);
    clrun_buffer xb;
    fill_input(ctx, g, x, 4, &xb);
    assert_int_equal(clrun_exec_run(exec, &xb, 1), CLRUN_OK);
    clrun_exec_stats s;
    assert_int_equal(clrun_exec_stats_get(exec, &s), CLRUN_OK);
    assert_int_equal(s.lower_bound_bytes, 3 * 1024);
    assert_int_equal(s.peak_bytes, s.lower_bound_bytes);
    clrun_exec_destroy(exec);
    assert_int_equal(clrun_free(ctx, &xb), CLRUN_OK);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

/* An MLP whose donated input dies at the first product: pooled mode reuses its block for a later
 * layer, and planned mode plans that layer into the same block, so it holds no more (it held the
 * input's bytes more, 1.40x, before). */
static void planned_mode_holds_no_more_than_pooled_with_a_donated_input(void **state)
{
    (void)state;
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("mlp", &g), CLRUN_OK);
    clrun_tensor_type xt = matrix(64, 96), w1t = matrix(96, 64), w2t = matrix(64, 64);
    int32_t x, w1, w2, h1, a1, h2, a2;
    assert_int_equal(clrun_graph_add_input(g, "x", &xt, true, &x), CLRUN_OK);
    assert_int_equal(clrun_graph_add_constant(g, "w1", &w1t, NULL, CLRUN_FILL_UNIFORM, -1, 1, 1, &w1), CLRUN_OK);
    assert_int_equal(clrun_graph_add_constant(g, "w2", &w2t, NULL, CLRUN_FILL_UNIFORM, -1, 1, 2, &w2), CLRUN_OK);
    const char *nh1[] = {"h1"}, *na1[] = {"a1"}, *nh2[] = {"h2"}, *na2[] = {"a2"};
    int32_t m1[2] = {x, w1};
    assert_int_equal(clrun_graph_add_node(g, "matmul", m1, 2, nh1, 1, NULL, 0, &h1), CLRUN_OK);
    assert_int_equal(clrun_graph_add_node(g, "relu", &h1, 1, na1, 1, NULL, 0, &a1), CLRUN_OK);
    int32_t m2[2] = {a1, w2};
    assert_int_equal(clrun_graph_add_node(g, "matmul", m2, 2, nh2, 1, NULL, 0, &h2), CLRUN_OK);
    assert_int_equal(clrun_graph_add_node(g, "relu", &h2, 1, na2, 1, NULL, 0, &a2), CLRUN_OK);
    assert_int_equal(clrun_graph_mark_output(g, a2), CLRUN_OK);
    run_outcome pooled = run_mode(g, CLRUN_EXEC_POOLED, "buddy", false, 3);
    run_outcome planned = run_mode(g, CLRUN_EXEC_PLANNED, "buddy", false, 3);
    run_outcome planned_ooo = run_mode(g, CLRUN_EXEC_PLANNED, "buddy", true, 3);
    assert_true(planned.hashes[0] == pooled.hashes[0] && planned_ooo.hashes[0] == pooled.hashes[0]);
    assert_int_equal(pooled.stats.peak_bytes, pooled.stats.lower_bound_bytes);
    assert_true(planned.stats.peak_bytes <= pooled.stats.peak_bytes);
    free(pooled.hashes);
    free(planned.hashes);
    free(planned_ooo.hashes);
    clrun_graph_destroy(g);
}

static void wrong_inputs_are_refused_by_name(void **state)
{
    (void)state;
    clrun_graph *g = chain_graph(false);
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    clrun_exec *exec = NULL;
    assert_int_equal(clrun_exec_create(ctx, g, NULL, &exec), CLRUN_OK);
    clrun_buffer small;
    assert_int_equal(clrun_alloc(ctx, 100, &small), CLRUN_OK);
    assert_int_equal(clrun_exec_run(exec, &small, 1), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clrun_last_error(ctx), "input 'x' needs a buffer of 1.00 KiB (f32[16, 16]), got 100 B"));
    assert_int_equal(clrun_exec_run(exec, NULL, 0), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(clrun_exec_output(exec, 0, NULL, NULL), CLRUN_ERROR_INVALID_ARGUMENT); /* no run yet */
    clrun_free(ctx, &small);
    clrun_exec_destroy(exec);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

static void every_failing_opencl_call_fails_a_run_cleanly(void **state)
{
    (void)state;
    /* Fail the 1st, 2nd, ... OpenCL call of a run until a run completes without reaching the
     * fault: each failure is an error, gives back everything the run took, and the next run
     * gives the same bits as a run that never failed. */
    clrun_graph *g = chain_graph(false);
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    clrun_exec *exec = NULL;
    assert_int_equal(clrun_exec_create(ctx, g, NULL, &exec), CLRUN_OK);
    clrun_buffer x;
    fill_input(ctx, g, clrun_graph_find(g, "x"), 5, &x);
    float expected[256], got[256];
    assert_int_equal(clrun_exec_run(exec, &x, 1), CLRUN_OK);
    assert_int_equal(clrun_exec_read_output(exec, 0, expected, sizeof expected), CLRUN_OK);
    clrun_memory_stats idle;
    for (long n = 1;; n++) {
        clrun_exec_destroy(exec); /* a fresh executor: outputs of the last run released */
        assert_int_equal(clrun_exec_create(ctx, g, NULL, &exec), CLRUN_OK);
        clrun_memory_stats_get(ctx, &idle);
        clrun__cl_fault_arm(n, CL_OUT_OF_RESOURCES, false);
        clrun_status status = clrun_exec_run(exec, &x, 1);
        bool fired = clrun__cl_fault_fired();
        clrun__cl_fault_arm(0, CL_SUCCESS, false);
        if (!fired) {
            assert_int_equal(status, CLRUN_OK);
            assert_true(n > 3);
            break;
        }
        assert_int_not_equal(status, CLRUN_OK);
        assert_non_null(strstr(clrun_last_error(ctx), "CL_OUT_OF_RESOURCES"));
        clrun_memory_stats after;
        clrun_memory_stats_get(ctx, &after);
        assert_int_equal(after.in_use, idle.in_use); /* the failed run gave back what it took */
        assert_int_equal(clrun_exec_run(exec, &x, 1), CLRUN_OK);
        assert_int_equal(clrun_exec_read_output(exec, 0, got, sizeof got), CLRUN_OK);
        assert_memory_equal(got, expected, sizeof got);
    }
    clrun_exec_destroy(exec);
    clrun_free(ctx, &x);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

int main(void)
{
    clrun_test_device_environment(cache_root, sizeof cache_root);
    const char *seed = getenv("CLRUN_TEST_SEED");
    base_seed = seed ? strtoull(seed, NULL, 10) : (uint64_t)time(NULL);
    fprintf(stderr, "test_exec: seed %llu (set CLRUN_TEST_SEED to repeat)\n", (unsigned long long)base_seed);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(outputs_are_bit_identical_in_every_mode),
        cmocka_unit_test(a_memory_budget_keeps_every_output_bit_identical),
        cmocka_unit_test(donated_input_is_written_in_place_and_unusable_afterwards),
        cmocka_unit_test(kept_input_is_never_written),
        cmocka_unit_test(unusable_donation_is_reported),
        cmocka_unit_test(donation_does_not_depend_on_operand_order),
        cmocka_unit_test(unused_donation_says_why),
        cmocka_unit_test(debug_logging_shows_every_allocation_and_launch),
        cmocka_unit_test(the_lower_bound_counts_kept_inputs_for_the_whole_run),
        cmocka_unit_test(planned_mode_holds_no_more_than_pooled_with_a_donated_input),
        cmocka_unit_test(wrong_inputs_are_refused_by_name),
        cmocka_unit_test(every_failing_opencl_call_fails_a_run_cleanly),
    };
    CLRUN_TEST_FILTERS_FROM_ENVIRONMENT();
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    clrun_test_remove_dir(cache_root);
    return failed;
}
