/* The device memory an executor's kernels need beside the tensors, counted like the tensors:
 * the nodes' scratch (a padded convolution's image, a non-constant B in panels) is in the
 * schedule, the bounds and the plan, reused from node to node; constant weights are resident
 * once, as the packed copy the kernels read, the originals never uploaded; CLRUN_POOL_LIMIT
 * holds all of it. Checked from the outside: the layout, the statistics and the pool's own log. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <clrun/clrun.h>

#include "device_test.h"
#include "memory/pool.h"
#include "ops/ops_internal.h"

static char cache_root[512];

/* The conv2d below: 8 channels of 12 x 12, 3 x 3 kernels, padding 1 (same size out). */
#define C 8
#define S 12
#define IMAGE_BYTES ((uint64_t)C * S * S * 4)
#define PADDED_BYTES ((uint64_t)C * (S + 2) * (S + 2) * 4) /* its scratch: the padded image */

static clrun_tensor_type image(void)
{
    clrun_tensor_type t = {CLRUN_F32, 4, {1, C, S, S}};
    return t;
}

static clrun_tensor_type matrix(int64_t rows, int64_t cols)
{
    clrun_tensor_type t = {CLRUN_F32, 2, {rows, cols}};
    return t;
}

/* x -> conv2d (padded) -> h1 -> ... -> h<convs>, the last an output; weights w1.. constant. */
static clrun_graph *conv_chain(int convs)
{
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("conv_chain", &g), CLRUN_OK);
    clrun_tensor_type x = image(), w = {CLRUN_F32, 4, {C, C, 3, 3}};
    int32_t h;
    assert_int_equal(clrun_graph_add_input(g, "x", &x, false, &h), CLRUN_OK);
    clrun_attr pad = {.name = "pad", .kind = CLRUN_ATTR_INTS, .ints = {1, 1}, .count = 2};
    for (int i = 1; i <= convs; i++) {
        char wname[16], hname[16];
        snprintf(wname, sizeof wname, "w%d", i);
        snprintf(hname, sizeof hname, "h%d", i);
        int32_t wt;
        assert_int_equal(clrun_graph_add_constant(g, wname, &w, NULL, CLRUN_FILL_NORMAL, 0, 0.3,
                                                  (uint64_t)i, &wt), CLRUN_OK);
        int32_t in[2] = {h, wt};
        const char *names[] = {hname};
        assert_int_equal(clrun_graph_add_node(g, "conv2d", in, 2, names, 1, &pad, 1, &h), CLRUN_OK);
    }
    assert_int_equal(clrun_graph_mark_output(g, h), CLRUN_OK);
    assert_int_equal(clrun_graph_validate(g), CLRUN_OK);
    return g;
}

/* a [rows, k] -> matmul b -> p1 -> matmul b -> ... -> p<count>, the last an output, with
 * b [k, cols] an input (cols == k for a chain): a B that is not constant, so every product
 * reads it as it is at every run (no packed copy). */
static clrun_graph *products_by_input_b(int64_t rows, int64_t k, int64_t cols, int count)
{
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("products", &g), CLRUN_OK);
    clrun_tensor_type ta = matrix(rows, k), tb = matrix(k, cols);
    int32_t h, b;
    assert_int_equal(clrun_graph_add_input(g, "a", &ta, false, &h), CLRUN_OK);
    assert_int_equal(clrun_graph_add_input(g, "b", &tb, false, &b), CLRUN_OK);
    for (int i = 1; i <= count; i++) {
        char name[16];
        snprintf(name, sizeof name, "p%d", i);
        const char *names[] = {name};
        int32_t in[2] = {h, b};
        assert_int_equal(clrun_graph_add_node(g, "matmul", in, 2, names, 1, NULL, 0, &h), CLRUN_OK);
    }
    assert_int_equal(clrun_graph_mark_output(g, h), CLRUN_OK);
    return g;
}

static clrun_context *context(const char *allocator, bool out_of_order, uint64_t limit)
{
    clrun_context_options o;
    clrun_context_options_init(&o);
    o.allocator = allocator;
    o.out_of_order = out_of_order ? 1 : -1;
    o.pool_limit = limit;
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(&o, &ctx), CLRUN_OK);
    return ctx;
}

static clrun_exec *executor(clrun_context *ctx, const clrun_graph *g)
{
    clrun_exec *exec = NULL;
    if (clrun_exec_create(ctx, g, NULL, &exec) != CLRUN_OK)
        fail_msg("exec_create: %s", clrun_last_error(ctx));
    return exec;
}

/* A buffer of the caller's for input `name`, filled with small varied values. */
static clrun_buffer input(clrun_context *ctx, const clrun_graph *g, const char *name)
{
    int32_t t = clrun_graph_find(g, name);
    uint64_t bytes = clrun_tensor_bytes(clrun_graph_tensor_type(g, t));
    float *host = malloc((size_t)bytes);
    assert_non_null(host);
    for (uint64_t i = 0; i < bytes / 4; i++)
        host[i] = (float)((int)(i * 7919 % 201) - 100) / 64.0f;
    clrun_buffer b;
    assert_int_equal(clrun_alloc_ex(ctx, bytes, 0, name, &b), CLRUN_OK);
    assert_int_equal(clrun_buffer_write(ctx, &b, host), CLRUN_OK);
    free(host);
    return b;
}

/* Output 0 of the last run, malloc'd. */
static float *output(clrun_exec *exec, uint64_t *bytes)
{
    assert_int_equal(clrun_exec_output(exec, 0, NULL, bytes), CLRUN_OK);
    float *host = malloc((size_t)*bytes);
    assert_non_null(host);
    assert_int_equal(clrun_exec_read_output(exec, 0, host, *bytes), CLRUN_OK);
    return host;
}

/* The layout entries of exec, malloc'd. */
static clrun_exec_buffer_info *layout_of(clrun_exec *exec, int32_t *count)
{
    assert_int_equal(clrun_exec_layout(exec, NULL, 0, count), CLRUN_OK);
    clrun_exec_buffer_info *info = calloc((size_t)*count + 1, sizeof *info);
    assert_non_null(info);
    assert_int_equal(clrun_exec_layout(exec, info, *count, count), CLRUN_OK);
    return info;
}

/* ---- the pool's log ---------------------------------------------------------------------- */

typedef struct logged {
    bool is_alloc;
    uint32_t chunk;
    uint64_t offset, size;
    char label[64];
} logged;

typedef struct pool_log {
    logged events[1024];
    int count;
} pool_log;

static void observe(const clrun__pool_event *e, void *user)
{
    pool_log *log = user;
    if (log->count == 1024)
        return;
    logged *l = &log->events[log->count++];
    *l = (logged){e->is_alloc, e->chunk, e->offset, e->size, ""};
    snprintf(l->label, sizeof l->label, "%s", e->label ? e->label : "");
}

/* The labels of the blocks live at the end of the log (allocated and not freed since). */
static bool live_at_end(const pool_log *log, const char *label)
{
    for (int i = log->count - 1; i >= 0; i--) {
        const logged *e = &log->events[i];
        if (strcmp(e->label, label) != 0)
            continue;
        if (!e->is_alloc)
            return false;
        return true;
    }
    return false;
}

/* ---- scratch ----------------------------------------------------------------------------- */

/* A padded convolution's image copy is a buffer of the schedule, alive at its node's step only:
 * the layout lists it, the lower bound, the naive total and the peak count it, and the planner
 * gives it an offset of its own beside the output it is alive with. */
static void scratch_is_in_the_schedule(void **state)
{
    (void)state;
    clrun__ops_kernels = CLRUN__KERNELS_VECTOR; /* the core, which pads into scratch, anywhere */
    clrun_graph *g = conv_chain(1);
    const char *modes[] = {"tlsf", "planned"};
    for (int m = 0; m < 2; m++) {
        clrun_context *ctx = context(modes[m], false, 0);
        clrun_exec *exec = executor(ctx, g);
        int32_t count;
        clrun_exec_buffer_info *info = layout_of(exec, &count);
        const clrun_exec_buffer_info *scratch = NULL, *h1 = NULL;
        for (int32_t i = 0; i < count; i++) {
            if (info[i].is_scratch)
                scratch = &info[i];
            else if (strcmp(info[i].tensor, "h1") == 0)
                h1 = &info[i];
        }
        assert_non_null(scratch);
        assert_non_null(h1);
        assert_string_equal(scratch->tensor, "h1"); /* named after its node */
        assert_int_equal(scratch->bytes, PADDED_BYTES);
        assert_int_equal(scratch->first_step, 0);
        assert_int_equal(scratch->last_step, 0);
        if (strcmp(modes[m], "planned") == 0) {
            assert_true(scratch->offset != CLRUN_NO_OFFSET);
            assert_true(scratch->offset + scratch->bytes <= h1->offset ||
                        h1->offset + h1->bytes <= scratch->offset); /* both alive at step 0 */
        }
        clrun_buffer x = input(ctx, g, "x");
        assert_int_equal(clrun_exec_run(exec, &x, 1), CLRUN_OK);
        clrun_exec_stats s;
        assert_int_equal(clrun_exec_stats_get(exec, &s), CLRUN_OK);
        /* x (kept by the caller), h1 and the scratch are alive together at the one step. */
        assert_int_equal(s.lower_bound_bytes, 2 * IMAGE_BYTES + PADDED_BYTES);
        assert_int_equal(s.naive_bytes, 2 * IMAGE_BYTES + PADDED_BYTES);
        assert_true(s.peak_bytes >= s.lower_bound_bytes);
        if (strcmp(modes[m], "tlsf") == 0)
            assert_int_equal(s.peak_bytes, s.lower_bound_bytes); /* bytes as asked for */
        free(info);
        clrun_free(ctx, &x);
        clrun_exec_destroy(exec);
        clrun_context_destroy(ctx);
    }
    clrun_graph_destroy(g);
    clrun__ops_kernels = CLRUN__KERNELS_AUTO;
}

/* a [rows, k] (or [k, rows] with ta) times b, stored [k, cols] or, with tb, [cols, k]
 * transposed (a backward dY W^T): b an input, or a constant holding the same values as input()
 * writes. */
static clrun_graph *product_of(int64_t rows, int64_t k, int64_t cols, bool ta, bool tb,
                               bool b_constant)
{
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("product_tb", &g), CLRUN_OK);
    clrun_tensor_type type_a = ta ? matrix(k, rows) : matrix(rows, k);
    clrun_tensor_type type_b = tb ? matrix(cols, k) : matrix(k, cols);
    int32_t in[2], out;
    assert_int_equal(clrun_graph_add_input(g, "a", &type_a, false, &in[0]), CLRUN_OK);
    if (b_constant) {
        float *host = malloc((size_t)(cols * k) * 4);
        assert_non_null(host);
        for (int64_t i = 0; i < cols * k; i++)
            host[i] = (float)((int)(i * 7919 % 201) - 100) / 64.0f;
        assert_int_equal(clrun_graph_add_constant(g, "b", &type_b, host, CLRUN_FILL_ZEROS, 0, 0, 0,
                                                  &in[1]), CLRUN_OK);
        free(host);
    } else {
        assert_int_equal(clrun_graph_add_input(g, "b", &type_b, false, &in[1]), CLRUN_OK);
    }
    clrun_attr attrs[2];
    int count = 0;
    if (tb)
        attrs[count++] = (clrun_attr){.name = "transpose_b", .kind = CLRUN_ATTR_INT, .i = 1};
    if (ta)
        attrs[count++] = (clrun_attr){.name = "transpose_a", .kind = CLRUN_ATTR_INT, .i = 1};
    const char *names[] = {"p"};
    assert_int_equal(clrun_graph_add_node(g, "matmul", in, 2, names, 1, attrs, count, &out),
                     CLRUN_OK);
    assert_int_equal(clrun_graph_mark_output(g, out), CLRUN_OK);
    return g;
}

/* Runs product_of's graph g once on exec (b an input unless constant), gives its output (the
 * caller's, bytes in *bytes), and destroys exec, ctx and g. */
static float *run_product(clrun_context *ctx, clrun_graph *g, clrun_exec *exec, bool constant,
                          uint64_t *bytes)
{
    clrun_buffer inputs[2] = {input(ctx, g, "a")};
    if (!constant)
        inputs[1] = input(ctx, g, "b");
    assert_int_equal(clrun_exec_run(exec, inputs, constant ? 1 : 2), CLRUN_OK);
    float *got = output(exec, bytes);
    for (int i = 0; i < (constant ? 1 : 2); i++)
        clrun_free(ctx, &inputs[i]);
    clrun_exec_destroy(exec);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
    return got;
}

/* A B that is not constant is read as it is, never packed into scratch: row-major or
 * transposed (for at most 64 rows of A: 100 rows pack a transposed B, each block of rows then
 * reading vectors of it), with N whole panels (64: of 32 on POCL with AVX-512, of 16 or 8 elsewhere) or
 * not (41, and 1: a last panel gathered, its columns past N repeating the last), A row-major or
 * transposed; the bits of the same product over the packed constant. */
static void a_non_constant_b_is_read_as_it_is(void **state)
{
    (void)state;
    clrun__ops_kernels = CLRUN__KERNELS_VECTOR;
    static const int64_t widths[] = {64, 41, 1};
    for (int shape = 0; shape < 24; shape++) {
        int ta = shape & 1, tb = (shape >> 1) & 1;
        int64_t cols = widths[(shape >> 2) % 3], rows = shape < 12 ? 13 : 100;
        float *got[2];
        uint64_t bytes[2];
        for (int constant = 0; constant < 2; constant++) {
            clrun_graph *g = product_of(rows, 37, cols, ta, tb, constant);
            clrun_context *ctx = context("tlsf", false, 0);
            clrun_exec *exec = executor(ctx, g);
            int32_t count;
            clrun_exec_buffer_info *info = layout_of(exec, &count);
            bool packed = !constant && tb && rows > 64, scratch = false;
            for (int32_t i = 0; i < count; i++)
                scratch = scratch || info[i].is_scratch;
            if (scratch != packed)
                fail_msg("ta %d, tb %d, M %d, N %d, b constant %d: %s scratch", ta, tb, (int)rows,
                         (int)cols, constant, scratch ? "a" : "no");
            free(info);
            got[constant] = run_product(ctx, g, exec, constant, &bytes[constant]);
        }
        assert_int_equal(bytes[0], (uint64_t)(rows * cols * 4));
        assert_int_equal(bytes[1], bytes[0]);
        if (memcmp(got[0], got[1], (size_t)bytes[0]) != 0)
            fail_msg("ta %d, tb %d, M %d, N %d: B read as it is differs from B packed", ta, tb,
                     (int)rows, (int)cols);
        float nonzero = 0.0f;
        for (int64_t i = 0; i < rows * cols; i++)
            nonzero += got[0][i] * got[0][i];
        assert_true(nonzero > 0.0f);
        free(got[0]);
        free(got[1]);
    }
    clrun__ops_kernels = CLRUN__KERNELS_AUTO;
}

/* A transposed B that is not constant, with more than 64 rows of A, is packed into scratch at
 * every run: whole while its panels take at most clrun__matmul_chunk_bytes (1 MiB), a chunk of
 * panels at a time beyond (a weight under a backward dY W^T, a language model's head), each
 * chunk's product run before the next is packed. Always the same bits as the packed constant:
 * whole, in the default chunks, and in chunks of one panel (the smallest), with a last panel
 * past N (250 columns) and with A's rows past a block's. */
static void a_large_transposed_b_is_packed_in_chunks(void **state)
{
    (void)state;
    clrun__ops_kernels = CLRUN__KERNELS_VECTOR;
    uint64_t default_chunk = clrun__matmul_chunk_bytes;
    static const struct { int64_t rows, depth, cols; uint64_t chunk; } cases[] = {
        {100, 2048, 256, 0}, {77, 300, 250, 0}, {100, 600, 520, 256 << 10}, {100, 600, 520, 1},
        {77, 600, 250, 1}, {130, 700, 250, 64 << 10},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int64_t rows = cases[c].rows, depth = cases[c].depth, cols = cases[c].cols;
        uint64_t whole = (uint64_t)depth * (uint64_t)((cols + 15) / 16 * 16) * 4;
        uint64_t panel = (uint64_t)depth * 32 * 4; /* a panel of at most 32 columns */
        float *got[2];
        uint64_t bytes[2];
        for (int constant = 0; constant < 2; constant++) {
            clrun__matmul_chunk_bytes = cases[c].chunk ? cases[c].chunk : default_chunk;
            clrun_graph *g = product_of(rows, depth, cols, false, true, constant);
            clrun_context *ctx = context("tlsf", false, 0);
            clrun_exec *exec = executor(ctx, g);
            int32_t count;
            clrun_exec_buffer_info *info = layout_of(exec, &count);
            uint64_t scratch = 0;
            for (int32_t i = 0; i < count; i++)
                scratch += info[i].is_scratch ? info[i].bytes : 0;
            /* whole (panels of 16 or 32 columns) where it fits the chunk bytes; else at most
             * the chunk bytes or one panel, and less than the whole */
            uint64_t most = panel > clrun__matmul_chunk_bytes ? panel : clrun__matmul_chunk_bytes;
            bool chunked = whole > clrun__matmul_chunk_bytes;
            if (!constant && !chunked && scratch != whole && scratch != (uint64_t)depth * (uint64_t)((cols + 31) / 32 * 32) * 4)
                fail_msg("case %zu: %" PRIu64 " bytes of scratch, not the whole %" PRIu64, c, scratch, whole);
            if (!constant && chunked && (scratch == 0 || scratch > most || scratch >= whole))
                fail_msg("case %zu: %" PRIu64 " bytes of scratch for chunks of %" PRIu64 " bytes "
                         "(whole %" PRIu64 ")", c, scratch, clrun__matmul_chunk_bytes, whole);
            free(info);
            got[constant] = run_product(ctx, g, exec, constant, &bytes[constant]);
        }
        assert_int_equal(bytes[0], (uint64_t)(rows * cols * 4));
        assert_int_equal(bytes[1], bytes[0]);
        if (memcmp(got[0], got[1], (size_t)bytes[0]) != 0)
            fail_msg("case %zu: B packed in chunks differs from B packed once", c);
        free(got[0]);
        free(got[1]);
    }
    clrun__matmul_chunk_bytes = default_chunk;
    clrun__ops_kernels = CLRUN__KERNELS_AUTO;
}

/* x [2, cin, side, side] -> conv2d w [cout, cin / groups, k, k] (padding k / 2) -> y, w a
 * constant (packed once) or an input. */
static clrun_graph *conv_of(int64_t cin, int64_t cout, int64_t groups, int64_t k, int64_t side,
                            bool constant)
{
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("conv", &g), CLRUN_OK);
    clrun_tensor_type tx = {CLRUN_F32, 4, {2, cin, side, side}};
    clrun_tensor_type tw = {CLRUN_F32, 4, {cout, cin / groups, k, k}};
    int32_t x, w, y;
    assert_int_equal(clrun_graph_add_input(g, "x", &tx, false, &x), CLRUN_OK);
    if (constant) { /* the values input() gives the input */
        int64_t count = clrun_tensor_elements(&tw);
        float *host = malloc((size_t)count * 4);
        assert_non_null(host);
        for (int64_t i = 0; i < count; i++)
            host[i] = (float)((int)(i * 7919 % 201) - 100) / 64.0f;
        assert_int_equal(clrun_graph_add_constant(g, "w", &tw, host, CLRUN_FILL_ZEROS, 0, 0, 0, &w),
                         CLRUN_OK);
        free(host);
    } else {
        assert_int_equal(clrun_graph_add_input(g, "w", &tw, false, &w), CLRUN_OK);
    }
    clrun_attr attrs[2] = {{.name = "pad", .kind = CLRUN_ATTR_INTS, .ints = {k / 2, k / 2}, .count = 2},
                           {.name = "groups", .kind = CLRUN_ATTR_INT, .i = groups}};
    const char *names[] = {"y"};
    int32_t in[2] = {x, w};
    assert_int_equal(clrun_graph_add_node(g, "conv2d", in, 2, names, 1, attrs, 2, &y), CLRUN_OK);
    assert_int_equal(clrun_graph_mark_output(g, y), CLRUN_OK);
    return g;
}

/* A convolution's weights that are not constant, over at most 64 output positions an image:
 * grouped, read as they are (no packed copy); ungrouped, packed a chunk of panels at a time into
 * scratch of at most clrun__conv_chunk_bytes (at least one panel), each chunk's product run
 * before the next is packed. Either way the same bits as the weights packed once as a
 * constant, with the default chunks and with one panel a chunk (several chunks where there are
 * several panels: 100 output channels are at least 4 panels of at most 32). */
static void non_constant_conv_weights_are_packed_in_chunks(void **state)
{
    (void)state;
    clrun__ops_kernels = CLRUN__KERNELS_VECTOR;
    static const struct { int64_t cin, cout, groups, k, side; } shapes[] = {
        {24, 40, 1, 3, 4}, {16, 64, 1, 1, 8}, {12, 21, 3, 3, 5}, {16, 32, 2, 3, 9}, {8, 17, 1, 1, 12},
        {8, 100, 1, 3, 6}, {6, 70, 1, 1, 3},
    };
    uint64_t default_chunk = clrun__conv_chunk_bytes;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int64_t cin = shapes[i].cin, cout = shapes[i].cout, side = shapes[i].side, k = shapes[i].k;
        int64_t groups = shapes[i].groups, kc = cin / groups * k * k;
        bool direct = side * side <= 64 && groups > 1, chunked = side * side <= 64 && groups == 1;
        float *got[3];
        uint64_t bytes[3];
        /* run 0: w constant (packed once); 1: not, default chunks; 2: not, one panel a chunk */
        for (int run = 0; run < 3; run++) {
            bool constant = run == 0;
            clrun__conv_chunk_bytes = run == 2 ? 1 : default_chunk;
            clrun_graph *g = conv_of(cin, cout, groups, k, side, constant);
            clrun_context *ctx = context("tlsf", false, 0);
            clrun_exec *exec = executor(ctx, g);
            int32_t count;
            clrun_exec_buffer_info *info = layout_of(exec, &count);
            /* scratch: the padded image (3 x 3), then the packed weights (or a chunk of them) */
            int parts = 0, expected = (k > 1) + (!constant && !direct);
            uint64_t weights = 0;
            for (int32_t j = 0; j < count; j++) {
                parts += info[j].is_scratch;
                if (info[j].is_scratch && (k == 1 || parts == 2))
                    weights = info[j].bytes;
            }
            if (parts != expected)
                fail_msg("shape %zu, run %d: %d parts of scratch, not %d", i, run, parts, expected);
            if (run == 2 && chunked && (weights > (uint64_t)(32 * kc * 4) ||
                                        (cout >= 64 && weights >= (uint64_t)(cout * kc * 4))))
                fail_msg("shape %zu: one panel a chunk took %" PRIu64 " bytes of scratch", i, weights);
            clrun_buffer inputs[2] = {input(ctx, g, "x")};
            if (!constant)
                inputs[1] = input(ctx, g, "w");
            assert_int_equal(clrun_exec_run(exec, inputs, constant ? 1 : 2), CLRUN_OK);
            got[run] = output(exec, &bytes[run]);
            free(info);
            for (int j = 0; j < (constant ? 1 : 2); j++)
                clrun_free(ctx, &inputs[j]);
            clrun_exec_destroy(exec);
            clrun_context_destroy(ctx);
            clrun_graph_destroy(g);
        }
        for (int run = 1; run < 3; run++) {
            assert_int_equal(bytes[run], bytes[0]);
            if (memcmp(got[run], got[0], (size_t)bytes[0]) != 0)
                fail_msg("shape %zu, run %d: weights read as they are or in chunks differ from "
                         "weights packed", i, run);
        }
        for (int run = 0; run < 3; run++)
            free(got[run]);
    }
    clrun__conv_chunk_bytes = default_chunk;
    clrun__ops_kernels = CLRUN__KERNELS_AUTO;
}

/* x [rows, 16] -> matmul w -> logits [rows, classes] -> softmax_xent_grad(logits, labels,
 * dloss) -> the gradient, an output. */
static clrun_graph *xent_gradient(int64_t rows, int64_t classes)
{
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("xent_grad", &g), CLRUN_OK);
    clrun_tensor_type tx = matrix(rows, 16), tw = matrix(16, classes);
    clrun_tensor_type tl = {CLRUN_I64, 1, {rows}}, td = {CLRUN_F32, 1, {rows}};
    int32_t x, w, labels, dloss, logits, grad;
    assert_int_equal(clrun_graph_add_input(g, "x", &tx, false, &x), CLRUN_OK);
    assert_int_equal(clrun_graph_add_constant(g, "w", &tw, NULL, CLRUN_FILL_NORMAL, 0, 0.5, 3, &w),
                     CLRUN_OK);
    assert_int_equal(clrun_graph_add_input(g, "labels", &tl, false, &labels), CLRUN_OK);
    assert_int_equal(clrun_graph_add_input(g, "dloss", &td, false, &dloss), CLRUN_OK);
    const char *n1[] = {"logits"}, *n2[] = {"grad"};
    int32_t in1[2] = {x, w};
    assert_int_equal(clrun_graph_add_node(g, "matmul", in1, 2, n1, 1, NULL, 0, &logits), CLRUN_OK);
    int32_t in2[3] = {logits, labels, dloss};
    assert_int_equal(clrun_graph_add_node(g, "softmax_xent_grad", in2, 3, n2, 1, NULL, 0, &grad),
                     CLRUN_OK);
    assert_int_equal(clrun_graph_mark_output(g, grad), CLRUN_OK);
    return g;
}

/* The cross-entropy's gradient is written over the logits it reads (they die there): one block
 * of the logits' size, not two, and the bits of the naive mode, where each has its own; 2
 * classes make the gradient as large as the i64 labels, which it must not take. */
static void the_xent_gradient_takes_the_logits_block(void **state)
{
    (void)state;
    enum { ROWS = 24 };
    static const int64_t classes[] = {37, 2};
    for (size_t c = 0; c < sizeof classes / sizeof classes[0]; c++) {
        clrun_graph *g = xent_gradient(ROWS, classes[c]);
        uint64_t grad_bytes = (uint64_t)ROWS * (uint64_t)classes[c] * 4;
        float *got[2];
        for (int naive = 0; naive < 2; naive++) {
            clrun_context *ctx = context("tlsf", false, 0);
            clrun_exec_options o;
            clrun_exec_options_init(&o);
            o.mode = naive ? CLRUN_EXEC_NAIVE : CLRUN_EXEC_CONTEXT;
            clrun_exec *exec = NULL;
            if (clrun_exec_create(ctx, g, &o, &exec) != CLRUN_OK)
                fail_msg("exec_create: %s", clrun_last_error(ctx));
            int32_t count, blocks = 0;
            clrun_exec_buffer_info *info = layout_of(exec, &count);
            for (int32_t i = 0; i < count; i++)
                blocks += !info[i].is_input && !info[i].is_scratch && info[i].bytes == grad_bytes;
            assert_int_equal(blocks, naive ? 2 : 1);
            int64_t labels[ROWS];
            float dloss[ROWS];
            for (int i = 0; i < ROWS; i++) {
                labels[i] = (i * 5) % classes[c];
                dloss[i] = 1.0f / (float)(i + 1);
            }
            clrun_buffer inputs[3] = {input(ctx, g, "x")};
            assert_int_equal(clrun_alloc(ctx, sizeof labels, &inputs[1]), CLRUN_OK);
            assert_int_equal(clrun_buffer_write(ctx, &inputs[1], labels), CLRUN_OK);
            assert_int_equal(clrun_alloc(ctx, sizeof dloss, &inputs[2]), CLRUN_OK);
            assert_int_equal(clrun_buffer_write(ctx, &inputs[2], dloss), CLRUN_OK);
            assert_int_equal(clrun_exec_run(exec, inputs, 3), CLRUN_OK);
            uint64_t bytes;
            got[naive] = output(exec, &bytes);
            assert_int_equal(bytes, grad_bytes);
            /* the labels' input is intact: a second run gives the same gradient */
            assert_int_equal(clrun_exec_run(exec, inputs, 3), CLRUN_OK);
            float *again = output(exec, &bytes);
            assert_memory_equal(again, got[naive], (size_t)grad_bytes);
            free(again);
            free(info);
            for (int i = 0; i < 3; i++)
                clrun_free(ctx, &inputs[i]);
            clrun_exec_destroy(exec);
            clrun_context_destroy(ctx);
        }
        assert_memory_equal(got[0], got[1], (size_t)grad_bytes);
        /* each row sums to 0: (softmax - onehot) * dloss */
        for (int r = 0; r < ROWS; r++) {
            float sum = 0.0f;
            for (int64_t j = 0; j < classes[c]; j++)
                sum += got[0][r * classes[c] + j];
            assert_true(sum > -1e-5f && sum < 1e-5f);
        }
        free(got[0]);
        free(got[1]);
        clrun_graph_destroy(g);
    }
}

/* In a chain of padded convolutions each node's scratch is taken before it runs and given back
 * after it, under every strategy: the pool's log shows every scratch freed before the next is
 * allocated, and the later ones on bytes given back before. The peak holds one scratch, not one
 * per node (each node kept its own buffer for the executor's life before, outside every
 * figure). */
static void padded_convolutions_reuse_one_scratch(void **state)
{
    (void)state;
    clrun__ops_kernels = CLRUN__KERNELS_VECTOR;
    enum { CONVS = 4 };
    clrun_graph *g = conv_chain(CONVS);
    const char *strategies[] = {"tlsf", "buddy", "slab", "bump"};
    for (size_t k = 0; k < sizeof strategies / sizeof strategies[0]; k++) {
        clrun_context *ctx = context(strategies[k], false, 0);
        clrun_exec *exec = executor(ctx, g);
        clrun_buffer x = input(ctx, g, "x");
        pool_log *log = calloc(1, sizeof *log);
        assert_non_null(log);
        assert_int_equal(clrun__pool_observe(ctx, observe, log), CLRUN_OK);
        assert_int_equal(clrun_exec_run(exec, &x, 1), CLRUN_OK);
        clrun__pool_observe(ctx, NULL, NULL);
        int scratch_live = 0, allocations = 0, reused = 0;
        for (int i = 0; i < log->count; i++) {
            const logged *e = &log->events[i];
            bool scratch = strstr(e->label, "' scratch") != NULL;
            if (!scratch)
                continue;
            if (!e->is_alloc) {
                scratch_live--;
                continue;
            }
            char expected[32];
            snprintf(expected, sizeof expected, "'h%d' scratch", ++allocations);
            assert_string_equal(e->label, expected); /* named after its node, in order */
            assert_int_equal(e->size, PADDED_BYTES);
            assert_int_equal(scratch_live, 0); /* the one before was given back */
            scratch_live++;
            for (int j = 0; j < i; j++) { /* on bytes that an earlier buffer gave back? */
                const logged *f = &log->events[j];
                if (!f->is_alloc && f->chunk == e->chunk && f->offset < e->offset + e->size &&
                    e->offset < f->offset + f->size) {
                    reused++;
                    break;
                }
            }
        }
        assert_int_equal(allocations, CONVS);
        assert_int_equal(scratch_live, 0);
        /* From the third node on, the pool has all it needs: each scratch reuses bytes. */
        assert_true(reused >= CONVS - 2);
        clrun_exec_stats s;
        assert_int_equal(clrun_exec_stats_get(exec, &s), CLRUN_OK);
        /* x (the caller's, alive all along), a node's input and output, one scratch. */
        assert_int_equal(s.lower_bound_bytes, 3 * IMAGE_BYTES + PADDED_BYTES);
        assert_int_equal(s.peak_bytes, s.lower_bound_bytes);
        free(log);
        clrun_free(ctx, &x);
        clrun_exec_destroy(exec);
        clrun_context_destroy(ctx);
    }
    clrun_graph_destroy(g);
    clrun__ops_kernels = CLRUN__KERNELS_AUTO;
}

/* Scratch reused from node to node must never change a bit, on an out-of-order queue too,
 * where only the pool's stream-ordered frees keep a node's padding from overwriting the scratch
 * its predecessor still reads: a chain of padded convolutions and a chain of products over a B
 * that is not constant (read as it is: no scratch) give the naive mode's bits under
 * every strategy, planned, in order and out of order. */
static void scratch_reuse_never_changes_a_bit(void **state)
{
    (void)state;
    clrun__ops_kernels = CLRUN__KERNELS_VECTOR;
    clrun_graph *graphs[2] = {conv_chain(4), products_by_input_b(24, 40, 40, 4)};
    const struct {
        const char *allocator;
        bool out_of_order;
    } modes[] = {{"naive", false}, {"tlsf", false}, {"tlsf", true},   {"slab", true},
                 {"buddy", true},  {"bump", true},  {"planned", true}};
    for (int k = 0; k < 2; k++) {
        const clrun_graph *g = graphs[k];
        const clrun_tensor_id *ids;
        int32_t n_in = clrun_graph_inputs(g, &ids);
        float *reference = NULL;
        for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
            clrun_context *ctx = context(modes[m].allocator, modes[m].out_of_order, 0);
            clrun_exec *exec = executor(ctx, g);
            clrun_buffer inputs[2];
            for (int32_t i = 0; i < n_in; i++)
                inputs[i] = input(ctx, g, clrun_graph_tensor_name(g, ids[i]));
            uint64_t bytes = 0;
            for (int run = 0; run < 3; run++) {
                if (clrun_exec_run(exec, inputs, n_in) != CLRUN_OK)
                    fail_msg("%s: run: %s", modes[m].allocator, clrun_last_error(ctx));
                float *got = output(exec, &bytes);
                if (reference == NULL) {
                    reference = got;
                    continue;
                }
                if (memcmp(got, reference, (size_t)bytes) != 0)
                    fail_msg("graph %d, %s%s, run %d: differs from naive", k, modes[m].allocator,
                             modes[m].out_of_order ? " out of order" : "", run + 1);
                free(got);
            }
            for (int32_t i = 0; i < n_in; i++)
                clrun_free(ctx, &inputs[i]);
            clrun_exec_destroy(exec);
            clrun_context_destroy(ctx);
        }
        free(reference);
    }
    clrun_graph_destroy(graphs[0]);
    clrun_graph_destroy(graphs[1]);
    clrun__ops_kernels = CLRUN__KERNELS_AUTO;
}

/* ---- packed weights ---------------------------------------------------------------------- */

/* x [64, 64] -> matmul w1 -> h1 -> matmul w2 -> h2 (the output), w1 and w2 [64, 64] constants
 * (64 columns: a whole number of panels for every vector width, so the packed copies are
 * exactly the weights' size). With `share`, w1 is also A of z = w1 x (a second output), which
 * reads it as it is (and, reading x, is no constant to fold at load). */
#define W_BYTES ((uint64_t)64 * 64 * 4)
static clrun_graph *two_products(bool share)
{
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("two_products", &g), CLRUN_OK);
    clrun_tensor_type tx = matrix(64, 64), tw = matrix(64, 64);
    int32_t x, w1, w2, h1, h2, z;
    assert_int_equal(clrun_graph_add_input(g, "x", &tx, false, &x), CLRUN_OK);
    assert_int_equal(clrun_graph_add_constant(g, "w1", &tw, NULL, CLRUN_FILL_NORMAL, 0, 0.2, 5, &w1),
                     CLRUN_OK);
    assert_int_equal(clrun_graph_add_constant(g, "w2", &tw, NULL, CLRUN_FILL_NORMAL, 0, 0.2, 6, &w2),
                     CLRUN_OK);
    int32_t in1[2] = {x, w1};
    const char *n1[] = {"h1"}, *n2[] = {"h2"}, *nz[] = {"z"};
    assert_int_equal(clrun_graph_add_node(g, "matmul", in1, 2, n1, 1, NULL, 0, &h1), CLRUN_OK);
    int32_t in2[2] = {h1, w2};
    assert_int_equal(clrun_graph_add_node(g, "matmul", in2, 2, n2, 1, NULL, 0, &h2), CLRUN_OK);
    assert_int_equal(clrun_graph_mark_output(g, h2), CLRUN_OK);
    if (share) {
        int32_t in3[2] = {w1, x};
        assert_int_equal(clrun_graph_add_node(g, "matmul", in3, 2, nz, 1, NULL, 0, &z), CLRUN_OK);
        assert_int_equal(clrun_graph_mark_output(g, z), CLRUN_OK);
    }
    assert_int_equal(clrun_graph_validate(g), CLRUN_OK);
    return g;
}

/* Each matmul packs its weights once, when the executor is created, into a resident block of its
 * own (counted: in use and resident, named after the weights); an original that nothing else
 * reads never takes device memory, so the weights are resident once. One that another node reads
 * as it is stays beside its copy. Either way the outputs are the same bits, in every mode, on either
 * queue: no kernel is handed the missing original (the ops refuse a missing buffer, which would
 * fail the run). */
static void packed_weights_replace_the_originals(void **state)
{
    (void)state;
    clrun__ops_kernels = CLRUN__KERNELS_VECTOR;
    clrun_graph *alone = two_products(false), *shared = two_products(true);
    float *reference = NULL;
    uint64_t reference_bytes = 0;
    const struct {
        const char *allocator;
        bool out_of_order;
    } modes[] = {{"tlsf", false}, {"buddy", false}, {"naive", false}, {"planned", false},
                 {"slab", true},  {"planned", true}};
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        for (int variant = 0; variant < 2; variant++) {
            const clrun_graph *g = variant ? shared : alone;
            clrun_context *ctx = context(modes[m].allocator, modes[m].out_of_order, 0);
            pool_log *log = calloc(1, sizeof *log);
            assert_non_null(log);
            assert_int_equal(clrun__pool_observe(ctx, observe, log), CLRUN_OK);
            clrun_exec *exec = executor(ctx, g);
            clrun__pool_observe(ctx, NULL, NULL);
            clrun_memory_stats ms;
            assert_int_equal(clrun_memory_stats_get(ctx, &ms), CLRUN_OK);
            assert_true(live_at_end(log, "w2")); /* the copy, named after what it holds */
            assert_true(live_at_end(log, "w1"));  /* the copy, or the original kept */
            assert_int_equal(live_at_end(log, "w1 packed for 'h1'"), variant == 1);
            assert_int_equal(log->count, variant ? 3 : 2); /* and nothing else, ever */
            uint64_t resident = (variant ? 3 : 2) * W_BYTES;
            assert_int_equal(ms.resident, resident); /* aligned blocks, packed exactly */
            /* The originals' buffers are gone: what else is held is the planned arena. */
            bool planned = strcmp(modes[m].allocator, "planned") == 0;
            assert_true(planned ? ms.raw > 0 : ms.raw == 0);
            assert_int_equal(ms.in_use, resident + ms.raw);
            clrun_buffer x = input(ctx, g, "x");
            for (int run = 0; run < 2; run++)
                if (clrun_exec_run(exec, &x, 1) != CLRUN_OK)
                    fail_msg("%s: run: %s", modes[m].allocator, clrun_last_error(ctx));
            uint64_t bytes;
            float *got = output(exec, &bytes);
            if (reference == NULL) {
                reference = got;
                reference_bytes = bytes;
            } else {
                assert_int_equal(bytes, reference_bytes);
                assert_memory_equal(got, reference, (size_t)bytes);
                free(got);
            }
            free(log);
            clrun_free(ctx, &x);
            clrun_exec_destroy(exec);
            clrun_context_destroy(ctx);
        }
    }
    free(reference);
    clrun_graph_destroy(alone);
    clrun_graph_destroy(shared);
    clrun__ops_kernels = CLRUN__KERNELS_AUTO;
}

/* A constant that a node reads through a view (a reshape of it) is not replaced by the view's
 * reader, so it stays resident for the view to read. */
static void a_constant_read_through_a_view_stays(void **state)
{
    (void)state;
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("viewed", &g), CLRUN_OK);
    clrun_tensor_type tx = matrix(4, 32), tw = {CLRUN_F32, 1, {32 * 32}};
    int32_t x, w, v, y;
    assert_int_equal(clrun_graph_add_input(g, "x", &tx, false, &x), CLRUN_OK);
    assert_int_equal(clrun_graph_add_constant(g, "w", &tw, NULL, CLRUN_FILL_ONES, 0, 0, 1, &w), CLRUN_OK);
    clrun_attr shape = {.name = "shape", .kind = CLRUN_ATTR_INTS, .ints = {32, 32}, .count = 2};
    const char *nv[] = {"v"}, *ny[] = {"y"};
    assert_int_equal(clrun_graph_add_node(g, "reshape", &w, 1, nv, 1, &shape, 1, &v), CLRUN_OK);
    int32_t in[2] = {x, v};
    assert_int_equal(clrun_graph_add_node(g, "matmul", in, 2, ny, 1, NULL, 0, &y), CLRUN_OK);
    assert_int_equal(clrun_graph_mark_output(g, y), CLRUN_OK);
    clrun_context *ctx = context("tlsf", false, 0);
    clrun_exec *exec = executor(ctx, g);
    clrun_memory_stats ms;
    assert_int_equal(clrun_memory_stats_get(ctx, &ms), CLRUN_OK);
    assert_int_equal(ms.in_use, 32 * 32 * 4); /* w itself: the product packs v at every run */
    clrun_buffer xb = input(ctx, g, "x");
    assert_int_equal(clrun_exec_run(exec, &xb, 1), CLRUN_OK);
    uint64_t bytes;
    float *got = output(exec, &bytes);
    for (int r = 0; r < 4; r++) { /* w is all ones: every column is the row's sum */
        float sum = 0;
        for (int k = 0; k < 32; k++)
            sum += (float)((int)((uint64_t)(r * 32 + k) * 7919 % 201) - 100) / 64.0f;
        for (int c = 0; c < 32; c++)
            assert_true(got[r * 32 + c] > sum - 1e-4f && got[r * 32 + c] < sum + 1e-4f);
    }
    free(got);
    clrun_free(ctx, &xb);
    clrun_exec_destroy(exec);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
}

/* ---- the limit --------------------------------------------------------------------------- */

/* A packed copy is larger than its weights where N is not a whole number of panels (33 columns:
 * 40, 48 or 64 in panels of 8, 16 or 32): the limit holds the copy, not the weights. One byte
 * below it, the creation fails with an out-of-memory message naming the weights; at it, it
 * succeeds, with nothing else on the device. */
static void the_limit_covers_packed_weights(void **state)
{
    (void)state;
    clrun__ops_kernels = CLRUN__KERNELS_VECTOR;
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create("narrow", &g), CLRUN_OK);
    clrun_tensor_type tx = matrix(4, 64), tw = matrix(64, 33);
    int32_t x, w, y;
    assert_int_equal(clrun_graph_add_input(g, "x", &tx, false, &x), CLRUN_OK);
    assert_int_equal(clrun_graph_add_constant(g, "w", &tw, NULL, CLRUN_FILL_ONES, 0, 0, 1, &w), CLRUN_OK);
    int32_t in[2] = {x, w};
    const char *ny[] = {"y"};
    assert_int_equal(clrun_graph_add_node(g, "matmul", in, 2, ny, 1, NULL, 0, &y), CLRUN_OK);
    assert_int_equal(clrun_graph_mark_output(g, y), CLRUN_OK);
    clrun_context *ctx = context("tlsf", false, 0);
    clrun_exec *exec = executor(ctx, g);
    clrun_memory_stats ms;
    assert_int_equal(clrun_memory_stats_get(ctx, &ms), CLRUN_OK);
    uint64_t packed = ms.in_use;
    assert_true(packed > 64 * 33 * 4);
    assert_int_equal(ms.reserved, packed);
    clrun_exec_destroy(exec);
    clrun_context_destroy(ctx);

    ctx = context("tlsf", false, packed - 1);
    exec = NULL;
    assert_int_equal(clrun_exec_create(ctx, g, NULL, &exec), CLRUN_ERROR_OUT_OF_MEMORY);
    assert_null(exec);
    assert_non_null(strstr(clrun_last_error(ctx), "'w'"));
    assert_int_equal(clrun_memory_stats_get(ctx, &ms), CLRUN_OK);
    assert_int_equal(ms.in_use, 0); /* nothing stays of the failed creation */
    assert_int_equal(ms.reserved, 0);
    clrun_context_destroy(ctx);
    ctx = context("tlsf", false, packed);
    exec = executor(ctx, g);
    clrun_exec_destroy(exec);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(g);
    clrun__ops_kernels = CLRUN__KERNELS_AUTO;
}

/* Naive mode holds every buffer of a run, scratch included, each a driver buffer of its own: a
 * limit one byte below what a run reserves fails that run when the last buffer, the scratch of
 * the last node, is asked for, naming it; at the limit the run succeeds. */
static void the_limit_covers_scratch_in_naive_mode(void **state)
{
    (void)state;
    clrun__ops_kernels = CLRUN__KERNELS_VECTOR;
    clrun_graph *g = conv_chain(2);
    uint64_t needed = 0;
    for (int attempt = 0; attempt < 3; attempt++) {
        uint64_t limit = attempt == 0 ? 0 : attempt == 1 ? needed - 1 : needed;
        clrun_context *ctx = context("naive", false, limit);
        clrun_buffer x = input(ctx, g, "x");
        clrun_exec *exec = executor(ctx, g);
        clrun_status status = clrun_exec_run(exec, &x, 1);
        if (attempt == 1) {
            assert_int_equal(status, CLRUN_ERROR_OUT_OF_MEMORY);
            assert_non_null(strstr(clrun_last_error(ctx), "'h2' scratch"));
        } else {
            assert_int_equal(status, CLRUN_OK);
            clrun_exec_stats s;
            assert_int_equal(clrun_exec_stats_get(exec, &s), CLRUN_OK);
            assert_int_equal(s.peak_bytes, IMAGE_BYTES + 2 * (IMAGE_BYTES + PADDED_BYTES));
            if (attempt == 0)
                needed = s.reserved_bytes;
            else
                assert_int_equal(s.reserved_bytes, needed);
        }
        clrun_free(ctx, &x);
        clrun_exec_destroy(exec);
        clrun_context_destroy(ctx);
    }
    clrun_graph_destroy(g);
    clrun__ops_kernels = CLRUN__KERNELS_AUTO;
}

int main(void)
{
    clrun_test_device_environment(cache_root, sizeof cache_root);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(scratch_is_in_the_schedule),
        cmocka_unit_test(a_non_constant_b_is_read_as_it_is),
        cmocka_unit_test(a_large_transposed_b_is_packed_in_chunks),
        cmocka_unit_test(non_constant_conv_weights_are_packed_in_chunks),
        cmocka_unit_test(the_xent_gradient_takes_the_logits_block),
        cmocka_unit_test(padded_convolutions_reuse_one_scratch),
        cmocka_unit_test(scratch_reuse_never_changes_a_bit),
        cmocka_unit_test(packed_weights_replace_the_originals),
        cmocka_unit_test(a_constant_read_through_a_view_stays),
        cmocka_unit_test(the_limit_covers_packed_weights),
        cmocka_unit_test(the_limit_covers_scratch_in_naive_mode),
    };
    CLRUN_TEST_FILTERS_FROM_ENVIRONMENT();
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    clrun_test_remove_dir(cache_root);
    return failed;
}
