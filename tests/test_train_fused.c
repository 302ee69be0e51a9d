/* The optimizer's update inside the weight gradient's product (lib/fuse/epilogue.c): a group
 * that updates donated state (SGD's `p -= lr*g`, momentum's `b = mu*b + g`) runs as the matmul's
 * epilogue and writes the state in place, so the weight gradient is never stored. Checked here:
 * over several steps, on an MLP and two small CNNs (conv2d_grad_weight takes such an epilogue
 * too, on its core's product and on its kernel of one work-item per weight), with SGD, SGD with
 * momentum, Adam and AdamW (each moment from a product of its own, in its epilogue), the
 * losses, parameters and optimizer state (the saved state file, byte for byte) are the same
 * with the update fused into the product, with it left to its own kernel, and with fusion off,
 * in several allocator modes (the naive one holding every tensor apart, so that the blocks the
 * others share, a mask written over by the epilogue that reads it, the logits' gradient over
 * the logits, give their bits too); every donation is
 * used; and no weight gradient is alive at the step's peak, which falls by about the largest
 * weight gradient's bytes. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <clrun/clrun.h>

#include "device_test.h"
#include "fuse/fuse.h"

/* Wide layers and a small batch: the weight gradients (w2's 256 KiB) outweigh the activations,
 * so the step's peak is where a weight gradient is alive. */
static const char mlp_text[] =
    "graph wide_mlp\n"
    "input x: f32[4, 64]\n"
    "const w1: f32[64, 256] uniform(-0.125, 0.125) seed=1\n"
    "const b1: f32[256] uniform(-0.125, 0.125) seed=2\n"
    "const w2: f32[256, 256] uniform(-0.0625, 0.0625) seed=3\n"
    "const b2: f32[256] uniform(-0.0625, 0.0625) seed=4\n"
    "const w3: f32[256, 10] uniform(-0.0625, 0.0625) seed=5\n"
    "const b3: f32[10] uniform(-0.0625, 0.0625) seed=6\n"
    "node h1: f32[4, 256] = matmul(x, w1, b1)\n"
    "node a1: f32[4, 256] = relu(h1)\n"
    "node h2: f32[4, 256] = matmul(a1, w2, b2)\n"
    "node a2: f32[4, 256] = tanh(h2)\n"
    "node pred: f32[4, 10] = matmul(a2, w3, b3)\n"
    "output pred\n";

/* The same layers with the weights as the products' left operand (features by batch): the CPU
 * core packs a product's right operand into scratch as large as the weight each time it runs,
 * which would otherwise be the step's peak, not the gradient. */
static const char column_mlp_text[] =
    "graph column_mlp\n"
    "input x: f32[64, 4]\n"
    "const w1: f32[256, 64] uniform(-0.125, 0.125) seed=1\n"
    "const w2: f32[256, 256] uniform(-0.0625, 0.0625) seed=3\n"
    "const w3: f32[10, 256] uniform(-0.0625, 0.0625) seed=5\n"
    "node h1: f32[256, 4] = matmul(w1, x)\n"
    "node a1: f32[256, 4] = relu(h1)\n"
    "node h2: f32[256, 4] = matmul(w2, a1)\n"
    "node a2: f32[256, 4] = tanh(h2)\n"
    "node pred: f32[10, 4] = matmul(w3, a2)\n"
    "output pred\n";

static const char cnn_text[] =
    "graph small_cnn\n"
    "input x: f32[4, 2, 8, 8]\n"
    "const k1: f32[8, 2, 3, 3] uniform(-0.3, 0.3) seed=1\n"
    "const c1: f32[8] uniform(-0.3, 0.3) seed=2\n"
    "const w: f32[128, 10] uniform(-0.08, 0.08) seed=3\n"
    "const b: f32[10] uniform(-0.08, 0.08) seed=4\n"
    "node y1: f32[4, 8, 8, 8] = conv2d(x, k1, c1) pad=1 stride=1\n"
    "node r1: f32[4, 8, 8, 8] = relu(y1)\n"
    "node p1: f32[4, 8, 4, 4] = maxpool2d(r1) kernel=2\n"
    "node f: f32[4, 128] = reshape(p1) shape=[4, 128]\n"
    "node pred: f32[4, 10] = matmul(f, w, b)\n"
    "output pred\n";

/* Wide enough that the weight gradient runs on the core's product (the small CNN's takes the
 * kernel of one work-item per weight), over 36 positions (weights read as they are). */
static const char wide_cnn_text[] =
    "graph wide_cnn\n"
    "input x: f32[4, 8, 6, 6]\n"
    "const k1: f32[16, 8, 3, 3] uniform(-0.2, 0.2) seed=1\n"
    "const c1: f32[16] uniform(-0.2, 0.2) seed=2\n"
    "const w: f32[576, 10] uniform(-0.05, 0.05) seed=3\n"
    "node y1: f32[4, 16, 6, 6] = conv2d(x, k1, c1) pad=1 stride=1\n"
    "node r1: f32[4, 16, 6, 6] = relu(y1)\n"
    "node f: f32[4, 576] = reshape(r1) shape=[4, 576]\n"
    "node pred: f32[4, 10] = matmul(f, w)\n"
    "output pred\n";

static clrun_graph *parse(const char *text)
{
    clrun_graph *g = NULL;
    char err[256];
    if (clrun_graph_parse(text, strlen(text), "test", &g, err, sizeof err) != CLRUN_OK) {
        fprintf(stderr, "parse: %s\n", err);
        fail();
    }
    return g;
}

/* Adam with weight decay (L2 in the gradient: one product for both moments, its epilogue
 * reading the parameter beside the gradient) and AdamW (decoupled decay) */
typedef enum optimizer { PLAIN_SGD, MOMENTUM, ADAM, ADAM_DECAY, ADAMW } optimizer;

/* What a run gives: the losses of its steps, then the saved state file's bytes. */
typedef struct outcome {
    double losses[6];
    unsigned char *state;
    long state_bytes;
    uint64_t peak, activation_peak, largest_gradient;
} outcome;

/* `steps` (at most 6) steps of a trainer of the model in `text`, into *out. */
/* The loss: mean squared error against a target, or (set by one test) softmax cross-entropy
 * over labels, whose gradient is written over the logits. */
static bool xent_loss;

/* One context per allocator mode, made at its first use and kept to the end: a context per run
 * would load every program of the step again from the disk cache. In guard mode, so that a
 * block freed by one run is poisoned before the next takes it: a kernel that left part of its
 * output unwritten would otherwise read the same values an earlier run left there. Each run
 * destroys its trainer and checks that the pool holds no more than before it. */
static const char *const context_allocators[] = {"tlsf", "naive", "planned", "bump"};
static clrun_context *contexts[sizeof context_allocators / sizeof context_allocators[0]];

static clrun_context *context_for(const char *allocator)
{
    for (size_t k = 0; k < sizeof contexts / sizeof contexts[0]; k++) {
        if (strcmp(context_allocators[k], allocator) != 0)
            continue;
        if (contexts[k] == NULL) {
            clrun_context_options co;
            clrun_context_options_init(&co);
            co.allocator = allocator;
            co.guard = 1;
            assert_int_equal(clrun_context_create(&co, &contexts[k]), CLRUN_OK);
        }
        return contexts[k];
    }
    fail_msg("no context for allocator %s", allocator);
    return NULL;
}

static void destroy_contexts(void)
{
    for (size_t k = 0; k < sizeof contexts / sizeof contexts[0]; k++) {
        clrun_context_destroy(contexts[k]);
        contexts[k] = NULL;
    }
}

static void run(const char *text, optimizer opt, const char *allocator, int fusion,
                bool state_epilogues, int steps, outcome *out)
{
    memset(out->losses, 0, sizeof out->losses);
    clrun_graph *g = parse(text);
    clrun_context *ctx = context_for(allocator);
    clrun_memory_stats before;
    assert_int_equal(clrun_memory_stats_get(ctx, &before), CLRUN_OK);
    clrun_train_options o;
    clrun_train_options_init(&o);
    o.graph.loss = xent_loss ? CLRUN_LOSS_XENT : CLRUN_LOSS_MSE;
    o.graph.loss_tensor = "pred";
    bool adam = opt >= ADAM;
    clrun_optimizer_init(&o.graph.optimizer, opt == ADAMW ? CLRUN_OPTIMIZER_ADAMW
                                             : adam     ? CLRUN_OPTIMIZER_ADAM
                                                        : CLRUN_OPTIMIZER_SGD);
    o.graph.optimizer.lr = adam ? 0.01 : 0.05;
    if (opt == ADAM_DECAY || opt == ADAMW)
        o.graph.optimizer.weight_decay = 0.01;
    if (opt == MOMENTUM)
        o.graph.optimizer.momentum = 0.9;
    o.exec.fusion = fusion;
    o.exec.plan_time_limit_s = 0.05;
    clrun__fuse_state_epilogues = state_epilogues;
    clrun_train *t = NULL;
    if (clrun_train_create(ctx, g, &o, &t) != CLRUN_OK) {
        fprintf(stderr, "train_create: %s\n", clrun_last_error(ctx));
        fail();
    }
    clrun__fuse_state_epilogues = true;
    const clrun_tensor_type *tx = clrun_graph_tensor_type(g, clrun_graph_find(g, "x"));
    const clrun_tensor_type *tp = clrun_graph_tensor_type(g, clrun_graph_find(g, "pred"));
    float *x = malloc(clrun_tensor_bytes(tx)), *target = malloc(clrun_tensor_bytes(tp));
    assert_non_null(x);
    assert_non_null(target);
    for (int k = 0; k < steps; k++) {
        assert_int_equal(clrun_fill_values(tx, CLRUN_FILL_UNIFORM, -1, 1, 10 + (uint64_t)k, x,
                                           clrun_tensor_bytes(tx)), CLRUN_OK);
        assert_int_equal(clrun_fill_values(tp, CLRUN_FILL_UNIFORM, -1, 1, 20 + (uint64_t)k, target,
                                           clrun_tensor_bytes(tp)), CLRUN_OK);
        int64_t labels[64];
        for (int64_t i = 0; i < tp->shape[0] && i < 64; i++)
            labels[i] = (i * 7 + k * 3) % tp->shape[1];
        const void *feeds[2] = {x, xent_loss ? (const void *)labels : target};
        clrun_train_step_result r;
        assert_int_equal(clrun_train_step(t, feeds, 2, &r), CLRUN_OK);
        out->losses[k] = r.loss;
    }
    free(x);
    free(target);
    const char *const *unused = NULL;
    int32_t unused_count = clrun_train_unused_donations(t, &unused);
    bool naive = strcmp(allocator, "naive") == 0; /* a buffer per tensor: nothing in place */
    for (int32_t k = 0; !naive && k < unused_count; k++)
        fprintf(stderr, "%s, fusion %d, optimizer %d: %s held twice\n", allocator, fusion, (int)opt,
                unused[k]);
    if (!naive)
        assert_int_equal(unused_count, 0);
    clrun_train_stats st;
    assert_int_equal(clrun_train_stats_get(t, &st), CLRUN_OK);
    out->peak = st.peak_bytes;
    out->activation_peak = st.activation_peak_bytes;
    out->largest_gradient = 0;
    for (int k = 0; k < clrun_train_param_count(t); k++) {
        clrun_tensor_type type;
        assert_int_equal(clrun_train_param_info(t, k, NULL, &type), CLRUN_OK);
        if (clrun_tensor_bytes(&type) > out->largest_gradient)
            out->largest_gradient = clrun_tensor_bytes(&type);
    }
    char path[] = "/tmp/clrun_train_fused_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(clrun_train_save(t, path), CLRUN_OK);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    out->state_bytes = ftell(f);
    rewind(f);
    out->state = malloc((size_t)out->state_bytes);
    assert_non_null(out->state);
    assert_int_equal(fread(out->state, 1, (size_t)out->state_bytes, f), (size_t)out->state_bytes);
    fclose(f);
    remove(path);
    clrun_train_destroy(t);
    clrun_memory_stats m;
    assert_int_equal(clrun_memory_stats_get(ctx, &m), CLRUN_OK);
    assert_int_equal(m.in_use, before.in_use);
    clrun_graph_destroy(g);
}

static void same(const outcome *a, const outcome *b, const char *what)
{
    if (memcmp(a->losses, b->losses, sizeof a->losses) != 0 || a->state_bytes != b->state_bytes ||
        memcmp(a->state, b->state, (size_t)a->state_bytes) != 0) {
        fprintf(stderr, "%s: different losses or state\n", what);
        fail();
    }
}

/* Fused into the product, left alone, fusion off: the same bits, in every mode tried. With
 * CLRUN_TEST_ROUNDS below the four allocator modes (the sanitizer build's), each optimizer tries
 * that many modes, starting one further along for each optimizer, and one of the three ways, one
 * further along too: over the five optimizers every mode and every way is still tried. */
static void check_model(const char *text, const char *model)
{
    const char *const *allocators = context_allocators;
    static const char *const names[] = {"sgd", "momentum", "adam", "adam with decay", "adamw"};
    const size_t modes = sizeof context_allocators / sizeof context_allocators[0];
    const size_t rounds = (size_t)clrun_test_rounds((int)modes), tried = rounds < modes ? rounds : modes;
    for (int opt = PLAIN_SGD; opt <= ADAMW; opt++) {
        outcome base;
        run(text, (optimizer)opt, "tlsf", 1, true, 6, &base);
        for (size_t a = 0; a < tried; a++) {
            static const struct { int fusion; bool state_epilogues; } ways[] = {
                {1, true}, {1, false}, {-1, true}};
            const size_t all_ways = sizeof ways / sizeof ways[0];
            /* the first way tried on tlsf is not the base run itself */
            const size_t first = tried < modes ? ((size_t)opt + a + 1) % all_ways : 0;
            const size_t ways_tried = tried < modes ? 1 : all_ways;
            for (size_t k = 0; k < ways_tried; k++) {
                const size_t w = (first + k) % all_ways;
                outcome other;
                const char *allocator = allocators[(a + (tried < modes ? (size_t)opt : 0)) % modes];
                run(text, (optimizer)opt, allocator, ways[w].fusion, ways[w].state_epilogues, 6, &other);
                char what[128];
                snprintf(what, sizeof what, "%s, %s, %s, fusion %d, state epilogues %d", model,
                         names[opt], allocator, ways[w].fusion, ways[w].state_epilogues);
                same(&base, &other, what);
                free(other.state);
            }
        }
        free(base.state);
    }
}

static void mlp_same_bits_fused_or_not(void **state)
{
    (void)state;
    check_model(mlp_text, "mlp");
}

/* With cross-entropy, the logits' gradient written over the logits: the same bits too. */
static void mlp_xent_same_bits_fused_or_not(void **state)
{
    (void)state;
    xent_loss = true;
    check_model(mlp_text, "mlp, xent");
    xent_loss = false;
}

static void column_mlp_same_bits_fused_or_not(void **state)
{
    (void)state;
    check_model(column_mlp_text, "column mlp");
}

static void cnn_same_bits_fused_or_not(void **state)
{
    (void)state;
    check_model(cnn_text, "cnn");
}

static void wide_cnn_same_bits_fused_or_not(void **state)
{
    (void)state;
    check_model(wide_cnn_text, "wide cnn");
}

/* SGD, with momentum or without, and Adam: no weight gradient is stored (two steps: the peak is
 * the last step's), on the column MLP and on the wide MLP (whose dY w2^T reads w2 as it is, with
 * no packed copy of its size). Plain SGD's peak falls by nearly the largest one (w2's). Adam's
 * two moments each take a product of their own (lib/grad/train_graph.c's second_product). */
static void the_peak_falls_by_the_gradient(void **state)
{
    (void)state;
    static const char *const names[] = {"sgd", "momentum", "adam", "adam with decay", "adamw"};
    for (int c = 0; c < 5; c++) {
        optimizer opt = c == 1 ? MOMENTUM : c == 3 ? ADAM : c == 4 ? ADAMW : PLAIN_SGD;
        const char *text = c == 2 ? mlp_text : column_mlp_text;
        outcome fused, alone;
        run(text, opt, "tlsf", 1, true, 2, &fused);
        run(text, opt, "tlsf", 1, false, 2, &alone);
        same(&fused, &alone, "peak check");
        fprintf(stderr, "%s, %s: peak %llu fused, %llu alone; largest gradient %llu\n",
                c == 2 ? "mlp" : "column mlp", names[opt],
                (unsigned long long)fused.peak,
                (unsigned long long)alone.peak, (unsigned long long)fused.largest_gradient);
        /* alone, a weight gradient is alive at the peak beside the state; fused, never */
        assert_true(alone.activation_peak >= alone.largest_gradient);
        assert_true(fused.activation_peak < fused.largest_gradient);
        /* the fused step's peak moves to where activations are alive (46 KiB with momentum),
         * more than at the unfused gradient's moment: the fall is a little less than the
         * gradient (4 KiB less with plain SGD, where the backward pass writes its masks' and
         * logits' gradients over them) */
        if (opt == PLAIN_SGD)
            assert_true(fused.peak + fused.largest_gradient * 15 / 16 <= alone.peak);
        else
            assert_true(fused.peak + fused.largest_gradient * 3 / 4 <= alone.peak);
        free(fused.state);
        free(alone.state);
    }
}

int main(void)
{
    char cache[4096];
    clrun_test_device_environment(cache, sizeof cache);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(mlp_same_bits_fused_or_not),
        cmocka_unit_test(mlp_xent_same_bits_fused_or_not),
        cmocka_unit_test(column_mlp_same_bits_fused_or_not),
        cmocka_unit_test(cnn_same_bits_fused_or_not),
        cmocka_unit_test(wide_cnn_same_bits_fused_or_not),
        cmocka_unit_test(the_peak_falls_by_the_gradient),
    };
    CLRUN_TEST_FILTERS_FROM_ENVIRONMENT();
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    destroy_contexts();
    clrun_test_remove_dir(cache);
    return failed;
}
