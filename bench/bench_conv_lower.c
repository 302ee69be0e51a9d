/* Transposed convolutions and a wide Conv1d, each two ways in the same process, on the same
 * device and inputs: two executors in one context, a warm-up run of each, then `repeat` rounds
 * that run both in alternating order, so that a machine's load falls on both alike. Prints per
 * model the median wall time of a run (submit to finish) of each, their ratio, and the best of
 * each. Not a test: nothing is asserted.
 *
 *   decoder   DBNet's head: ConvTranspose 2x2/2 256 -> 64 (bias) at 40x40, then 64 -> 64 to
 *             160x160: conv_transpose2d (what ONNX ConvTranspose ran before) against the
 *             lowering ONNX import now emits (lib/graph/conv_lower.c: matmul + col2im + add)
 *   unet-up   a U-Net up-sampling: ConvTranspose 3x3/2, pads 1, output padding 1, 128 -> 64 at
 *             40x40 -> 80x80, the same two ways
 *   stft      an STFT-like front-end: Conv1d of 1 channel, kernel 400, stride 160, 512 outputs
 *             over 16000 samples (as ONNX maps it: conv2d of height 1) against the same product
 *             as one matmul of the 98 frames [98, 400] by the weights [400, 512] (the rate
 *             conv2d's core reaches on that product)
 *
 * --onnx DIR writes the decoder as ONNX (DBNet's probability head: Conv 3x3 256 -> 64, Relu,
 * ConvTranspose 2x2/2 64 -> 64 with bias, Relu, ConvTranspose 2x2/2 64 -> 1, Sigmoid, at 40x40
 * -> 160x160) and the STFT front-end (Conv of [1, 1, 16000] by [512, 1, 400], stride 160, then
 * Abs) as DIR/dbnet_head.onnx and DIR/stft.onnx, the files `clrun run` and bench/ort_time.js
 * (onnxruntime) both time; then runs nothing else.
 *
 * Usage: bench_conv_lower [--repeat N] [--onnx DIR] [MODEL...] */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clrun/clrun.h>

#include "graph/conv_lower.h"
#include "timing.h"
#include "../tests/onnx_builder.h"

static void die(const char *what, const char *why)
{
    fprintf(stderr, "bench_conv_lower: %s: %s\n", what, why ? why : "");
    exit(1);
}

static clrun_tensor_type f32(int rank, const int64_t *dims)
{
    clrun_tensor_type t = {CLRUN_F32, rank, {0}};
    memcpy(t.shape, dims, (size_t)rank * sizeof *dims);
    return t;
}

static clrun_attr ints_attr(const char *name, const int64_t *v, int count)
{
    clrun_attr a;
    memset(&a, 0, sizeof a);
    a.name = name;
    a.kind = CLRUN_ATTR_INTS;
    a.count = count;
    memcpy(a.ints, v, (size_t)count * sizeof *v);
    return a;
}

static int32_t graph_emit(void *self, const char *op, const int32_t *inputs, int count,
                          const clrun_attr *attrs, int attr_count)
{
    static unsigned made;
    char name[32];
    snprintf(name, sizeof name, "t%u", made++);
    const char *names[1] = {name};
    clrun_tensor_id out;
    if (clrun_graph_add_node(self, op, inputs, count, names, 1, attrs, attr_count, &out) != CLRUN_OK)
        die(op, clrun_graph_last_error(self));
    return out;
}

static clrun_tensor_id weights(clrun_graph *g, int rank, const int64_t *dims, uint64_t seed)
{
    clrun_tensor_type t = f32(rank, dims);
    clrun_tensor_id id;
    char name[32];
    snprintf(name, sizeof name, "w%llu", (unsigned long long)seed);
    if (clrun_graph_add_constant(g, name, &t, NULL, CLRUN_FILL_NORMAL, 0, 0.05, seed, &id) != CLRUN_OK)
        die("constant", clrun_graph_last_error(g));
    return id;
}

typedef struct transpose_layer {
    int64_t C, O, k, stride, pad, out_pad;
    bool bias;
    int64_t groups;
} transpose_layer;

/* One transposed convolution of x [N, C, H, W]: conv_transpose2d, or (lowered) the product and
 * col2im the ONNX import emits, the bias added per channel. */
static clrun_tensor_id transpose(clrun_graph *g, clrun_tensor_id x, const transpose_layer *l, bool lowered,
                                 uint64_t seed)
{
    const clrun_tensor_type *tx = clrun_graph_tensor_type(g, x);
    int64_t groups = l->groups > 1 ? l->groups : 1;
    int64_t dw[4] = {l->C, l->O / groups, l->k, l->k}, db[1] = {l->O};
    clrun_tensor_id w = weights(g, 4, dw, seed), b = l->bias ? weights(g, 1, db, seed + 1) : -1;
    clrun__conv_geometry geo = {.stride = {l->stride, l->stride}, .pad = {l->pad, l->pad},
                                .pad_end = {l->pad, l->pad}, .dilation = {1, 1}, .groups = groups,
                                .output_padding = {l->out_pad, l->out_pad}};
    geo.oh = l->stride * (tx->shape[2] - 1) + l->k + l->out_pad - 2 * l->pad;
    geo.ow = l->stride * (tx->shape[3] - 1) + l->k + l->out_pad - 2 * l->pad;
    if (!lowered) {
        int64_t stride[2] = {l->stride, l->stride}, pad[2] = {l->pad, l->pad};
        int64_t op[2] = {l->out_pad, l->out_pad};
        clrun_attr attrs[4] = {ints_attr("stride", stride, 2), ints_attr("pad", pad, 2),
                               ints_attr("output_padding", op, 2), {.name = "groups", .kind = CLRUN_ATTR_INT, .i = groups}};
        clrun_tensor_id in[3] = {x, w, b};
        return graph_emit(g, "conv_transpose2d", in, l->bias ? 3 : 2, attrs, 4);
    }
    clrun_tensor_type tw = f32(4, dw);
    const clrun__emitter e = {g, graph_emit};
    clrun_tensor_id y = clrun__lower_conv_transpose(&e, tx, &tw, &geo, x, w);
    if (y < 0)
        die("lowering", "refused");
    if (!l->bias)
        return y;
    int64_t b3[3] = {l->O, 1, 1};
    clrun_attr shape = ints_attr("shape", b3, 3);
    clrun_tensor_id bias3 = graph_emit(g, "reshape", &b, 1, &shape, 1), in[2] = {y, bias3};
    return graph_emit(g, "add", in, 2, NULL, 0);
}

static clrun_graph *transposes(const int64_t *x_dims, const transpose_layer *layers, int count, bool lowered)
{
    clrun_graph *g;
    clrun_tensor_id x = -1;
    clrun_tensor_type tx = f32(4, x_dims);
    if (clrun_graph_create(lowered ? "lowered" : "direct", &g) != CLRUN_OK ||
        clrun_graph_add_input(g, "x", &tx, false, &x) != CLRUN_OK)
        die("graph", NULL);
    for (int i = 0; i < count; i++)
        x = transpose(g, x, &layers[i], lowered, 10 + 2 * (uint64_t)i);
    if (clrun_graph_mark_output(g, x) != CLRUN_OK || clrun_graph_validate(g) != CLRUN_OK)
        die("graph", clrun_graph_last_error(g));
    return g;
}

/* The STFT-like Conv1d as conv2d of height 1, or (product) its frames by the weights. */
static clrun_graph *stft(bool product)
{
    clrun_graph *g;
    clrun_tensor_id x = -1;
    int64_t dx[4] = {1, 1, 1, 16000}, frames[2] = {98, 400}, dw[4] = {512, 1, 1, 400}, w2[2] = {400, 512};
    clrun_tensor_type tx = product ? f32(2, frames) : f32(4, dx);
    if (clrun_graph_create(product ? "product" : "conv2d", &g) != CLRUN_OK ||
        clrun_graph_add_input(g, "x", &tx, false, &x) != CLRUN_OK)
        die("graph", NULL);
    clrun_tensor_id in[2] = {x, product ? weights(g, 2, w2, 3) : weights(g, 4, dw, 3)}, y;
    int64_t stride[2] = {1, 160};
    clrun_attr a = ints_attr("stride", stride, 2);
    y = graph_emit(g, product ? "matmul" : "conv2d", in, 2, &a, product ? 0 : 1);
    if (clrun_graph_mark_output(g, y) != CLRUN_OK || clrun_graph_validate(g) != CLRUN_OK)
        die("graph", clrun_graph_last_error(g));
    return g;
}

/* One run of exec on input `in`; its wall time in ms. */
static double run_once(clrun_context *ctx, clrun_exec *exec, clrun_buffer *in)
{
    if (clrun_exec_run(exec, in, 1) != CLRUN_OK)
        die("run", clrun_last_error(ctx));
    clrun_exec_stats s;
    clrun_exec_stats_get(exec, &s);
    return s.wall_ms;
}

static void compare(clrun_context *ctx, const char *name, clrun_graph *a, clrun_graph *b, const char *what,
                    int repeat)
{
    clrun_graph *g[2] = {a, b};
    clrun_exec *exec[2];
    clrun_buffer in[2];
    for (int k = 0; k < 2; k++) {
        clrun_exec_options o;
        clrun_exec_options_init(&o);
        const clrun_tensor_id *ids;
        clrun_graph_inputs(g[k], &ids);
        const clrun_tensor_type *t = clrun_graph_tensor_type(g[k], ids[0]);
        uint64_t bytes = clrun_tensor_elements(t) * 4;
        void *host = malloc(bytes);
        if (host == NULL || clrun_graph_example_input(g[k], 0, 1, host, bytes) != CLRUN_OK ||
            clrun_alloc(ctx, bytes, &in[k]) != CLRUN_OK || clrun_buffer_write(ctx, &in[k], host) != CLRUN_OK ||
            clrun_exec_create(ctx, g[k], &o, &exec[k]) != CLRUN_OK)
            die(name, clrun_last_error(ctx));
        free(host);
        run_once(ctx, exec[k], &in[k]); /* warm-up: builds, packs, tunes */
    }
    double t[2][64];
    for (int r = 0; r < repeat; r++)
        for (int j = 0; j < 2; j++) {
            int k = (r + j) % 2; /* alternating order */
            t[k][r] = run_once(ctx, exec[k], &in[k]);
        }
    double best[2];
    for (int k = 0; k < 2; k++) {
        best[k] = t[k][0];
        for (int r = 1; r < repeat; r++)
            best[k] = t[k][r] < best[k] ? t[k][r] : best[k];
    }
    double m0 = bench_median(t[0], repeat), m1 = bench_median(t[1], repeat);
    printf("%-9s %-26s %9.3f ms %9.3f ms  %7.1fx   best %9.3f %9.3f ms\n", name, what, m0, m1, m0 / m1,
           best[0], best[1]);
    fflush(stdout);
    for (int k = 0; k < 2; k++) {
        clrun_exec_destroy(exec[k]);
        clrun_free(ctx, &in[k]);
        clrun_graph_destroy(g[k]);
    }
}

/* ---- the ONNX models ---------------------------------------------------------------------- */

static void *normal_floats(onnx_builder *b, size_t n, uint64_t seed)
{
    clrun_tensor_type t = {CLRUN_F32, 1, {(int64_t)n}};
    void *p = ob_alloc(b, n * 4);
    if (clrun_fill_values(&t, CLRUN_FILL_NORMAL, 0, 0.05, seed, p, n * 4) != CLRUN_OK)
        die("fill", NULL);
    return p;
}

static void write_model(onnx_builder *b, const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    size_t size;
    uint8_t *bytes = ob_pack(b, &size);
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(bytes, 1, size, f) != size || fclose(f) != 0)
        die(path, "cannot write");
    free(bytes);
    ob_free(b);
    printf("wrote %s\n", path);
}

static void write_onnx(const char *dir)
{
    enum { F = 1 };
    onnx_builder b;
    ob_init(&b, 13);
    const int64_t dx[4] = {1, 256, 40, 40}, dy[4] = {1, 1, 160, 160}, w0[4] = {64, 256, 3, 3};
    const int64_t w1[4] = {64, 64, 2, 2}, w2[4] = {64, 1, 2, 2}, c64[1] = {64}, c1[1] = {1};
    const int64_t pads[4] = {1, 1, 1, 1}, strides[2] = {2, 2};
    ob_input(&b, "x", F, 4, dx, NULL);
    ob_initializer(&b, "W0", F, 4, w0, normal_floats(&b, 64 * 256 * 9, 1), 64 * 256 * 9 * 4);
    ob_initializer(&b, "W1", F, 4, w1, normal_floats(&b, 64 * 64 * 4, 2), 64 * 64 * 4 * 4);
    ob_initializer(&b, "B1", F, 1, c64, normal_floats(&b, 64, 3), 64 * 4);
    ob_initializer(&b, "W2", F, 4, w2, normal_floats(&b, 64 * 4, 4), 64 * 4 * 4);
    ob_initializer(&b, "B2", F, 1, c1, normal_floats(&b, 1, 5), 4);
    ob_attr_ints(&b, ob_node(&b, "Conv", "conv", "x,W0", "h0"), "pads", pads, 4);
    ob_node(&b, "Relu", "relu0", "h0", "a0");
    ob_attr_ints(&b, ob_node(&b, "ConvTranspose", "up1", "a0,W1,B1", "h1"), "strides", strides, 2);
    ob_node(&b, "Relu", "relu1", "h1", "a1");
    ob_attr_ints(&b, ob_node(&b, "ConvTranspose", "up2", "a1,W2,B2", "h2"), "strides", strides, 2);
    ob_node(&b, "Sigmoid", "sigmoid", "h2", "y");
    ob_output(&b, "y", F, 4, dy);
    write_model(&b, dir, "dbnet_head.onnx");
    ob_init(&b, 13);
    const int64_t sx[3] = {1, 1, 16000}, sw[3] = {512, 1, 400}, sy[3] = {1, 512, 98}, stride[1] = {160};
    ob_input(&b, "x", F, 3, sx, NULL);
    ob_initializer(&b, "W", F, 3, sw, normal_floats(&b, 512 * 400, 6), 512 * 400 * 4);
    ob_attr_ints(&b, ob_node(&b, "Conv", "frames", "x,W", "c"), "strides", stride, 1);
    ob_node(&b, "Abs", "magnitude", "c", "y");
    ob_output(&b, "y", F, 3, sy);
    write_model(&b, dir, "stft.onnx");
}

static bool wanted(int argc, char **argv, int first, const char *name)
{
    if (first >= argc)
        return true;
    for (int i = first; i < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return true;
    return false;
}

int main(int argc, char **argv)
{
    int repeat = 7;
    int first = bench_repeat_arg(argc, argv, &repeat);
    if (first + 1 < argc && strcmp(argv[first], "--onnx") == 0) {
        write_onnx(argv[first + 1]);
        return 0;
    }
    if (repeat < 1 || repeat > 64)
        repeat = 7;
    clrun_context *ctx;
    if (clrun_context_create(NULL, &ctx) != CLRUN_OK) {
        fprintf(stderr, "bench_conv_lower: %s\n", clrun_last_error(NULL));
        return 1;
    }
    printf("# bench_conv_lower: median of %d alternating rounds after a warm-up; device: %s\n", repeat,
           clrun_context_device(ctx)->name);
    printf("%-9s %-26s %12s %12s %8s\n", "model", "first / second", "first", "second", "ratio");
    fflush(stdout);
    if (wanted(argc, argv, first, "decoder")) {
        const int64_t x[4] = {1, 256, 40, 40};
        const transpose_layer layers[2] = {{256, 64, 2, 2, 0, 0, true, 1}, {64, 64, 2, 2, 0, 0, false, 1}};
        compare(ctx, "decoder", transposes(x, layers, 2, false), transposes(x, layers, 2, true),
                "conv_transpose2d / lowered", repeat);
    }
    if (wanted(argc, argv, first, "unet-up")) {
        const int64_t x[4] = {1, 128, 40, 40};
        const transpose_layer layer = {128, 64, 3, 2, 1, 1, true, 1};
        compare(ctx, "unet-up", transposes(x, &layer, 1, false), transposes(x, &layer, 1, true),
                "conv_transpose2d / lowered", repeat);
    }
    if (wanted(argc, argv, first, "grouped")) {
        const int64_t x[4] = {1, 128, 40, 40};
        const transpose_layer layer = {128, 64, 4, 2, 1, 0, false, 4};
        compare(ctx, "grouped", transposes(x, &layer, 1, false), transposes(x, &layer, 1, true),
                "conv_transpose2d / lowered", repeat);
    }
    if (wanted(argc, argv, first, "depthwise")) {
        const int64_t x[4] = {1, 64, 40, 40};
        const transpose_layer layer = {64, 64, 3, 2, 1, 1, false, 64};
        compare(ctx, "depthwise", transposes(x, &layer, 1, false), transposes(x, &layer, 1, true),
                "conv_transpose2d / lowered", repeat);
    }
    if (wanted(argc, argv, first, "stft"))
        compare(ctx, "stft", stft(false), stft(true), "conv2d / matmul of frames", repeat);
    clrun_context_destroy(ctx);
    return 0;
}
