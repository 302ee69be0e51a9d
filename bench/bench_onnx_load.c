/* bench_onnx_load: how long a real-sized ONNX model takes to become a planned graph on the host.
 *
 * The model is built here (tests/onnx_builder.h) the way PyTorch exports a transformer encoder:
 * L layers of attention and MLP with every Reshape's shape computed from Shape -> Gather ->
 * Unsqueeze -> Concat, LayerNorm decomposed into ReduceMean/Sub/Pow/Sqrt/Div, GELU in its tanh
 * form (--gelu erf: BERT's Div/Erf form), a bias Add after every MatMul, and random f32 weights
 * as raw-data initializers. With the defaults (12 layers, width 132, 4 heads, MLP 4x the width)
 * it has about 700 nodes and 10 MB of weights, the yardstick. --width 768 --heads 12
 * --gelu erf is BERT-base's shape (MLP 3072); --gpt2 makes GPT-2's pre-LN decoder instead (a
 * causal mask sliced from a bool buffer and applied with Where, a final LayerNorm). --out writes
 * the model, with symbolic batch and sequence, for bench_fusion or the CLI.
 *
 * Measured per repetition, as this process's CPU time (what the host spends; the wall clock is
 * printed beside it, and is what other load on the machine inflates): the import (clrun_graph_load_onnx_memory:
 * wire check, protobuf-c unpack, initializer decode, folding of the shape subgraphs, mapping,
 * validation), the schedule's buffers (clrun_graph_plan_buffers) and the static planner's
 * constructions (clrun_plan_solve with time limit 0), and, as the baseline measured in the same
 * run, protobuf-c's unpack of the same bytes alone, in CPU time too. Median of the repetitions;
 * nothing asserted.
 *
 * usage: bench_onnx_load [--layers L] [--width D] [--heads H] [--ff F] [--seq S] [--gelu tanh|erf]
 *                        [--gpt2] [--repeat N] [--out MODEL.onnx] */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <clrun/clrun.h>

#include "../tests/onnx_builder.h"
#include "timing.h"

enum { F32 = 1, BOOL = 9, I64 = 7 };

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct gen {
    onnx_builder b;
    int count;
    uint64_t state;
    uint64_t weight_bytes;
} gen;

static const char *fresh(gen *g, const char *stem)
{
    char name[64];
    snprintf(name, sizeof name, "%s_%d", stem, ++g->count);
    return ob_str(&g->b, name);
}

static const char *weight(gen *g, int rank, const int64_t *dims)
{
    uint64_t n = 1;
    for (int d = 0; d < rank; d++)
        n *= (uint64_t)dims[d];
    float *w = malloc(n * sizeof *w);
    for (uint64_t i = 0; i < n; i++) { /* uniform in [-0.05, 0.05) from splitmix64 */
        uint64_t z = (g->state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        w[i] = (float)((double)((z ^ (z >> 31)) >> 11) / 9007199254740992.0 * 0.1 - 0.05);
    }
    const char *name = fresh(g, "w");
    ob_initializer(&g->b, name, F32, rank, dims, w, n * sizeof *w);
    g->weight_bytes += n * sizeof *w;
    free(w);
    return name;
}

static const char *i64s(gen *g, int count, const int64_t *v, bool scalar)
{
    const char *name = fresh(g, "c");
    int64_t dim = count;
    ob_initializer(&g->b, name, I64, scalar ? 0 : 1, &dim, v, (size_t)count * sizeof *v);
    return name;
}

static const char *f32(gen *g, float v)
{
    const char *name = fresh(g, "f");
    ob_initializer(&g->b, name, F32, 0, NULL, &v, sizeof v);
    return name;
}

/* op(inputs...) -> a fresh output name. */
static const char *op(gen *g, const char *type, const char *inputs)
{
    const char *out = fresh(g, type);
    ob_node(&g->b, type, fresh(g, "n"), inputs, out);
    return out;
}

static const char *op2(gen *g, const char *type, const char *a, const char *b)
{
    char in[256];
    snprintf(in, sizeof in, "%s,%s", a, b);
    return op(g, type, in);
}

static Onnx__NodeProto *last(gen *g)
{
    return g->b.graph.node[g->b.graph.n_node - 1];
}

static const char *linear(gen *g, const char *x, int64_t cin, int64_t cout)
{
    int64_t wd[2] = {cin, cout};
    return op2(g, "Add", op2(g, "MatMul", x, weight(g, 2, wd)), weight(g, 1, &cout));
}

static const char *layernorm(gen *g, const char *x, int64_t d)
{
    static const int64_t axes[1] = {-1};
    const char *mean = op(g, "ReduceMean", x);
    ob_attr_ints(&g->b, last(g), "axes", axes, 1);
    const char *c = op2(g, "Sub", x, mean);
    const char *var = op(g, "ReduceMean", op2(g, "Pow", c, f32(g, 2)));
    ob_attr_ints(&g->b, last(g), "axes", axes, 1);
    const char *den = op(g, "Sqrt", op2(g, "Add", var, f32(g, 1e-5f)));
    return op2(g, "Add", op2(g, "Mul", op2(g, "Div", c, den), weight(g, 1, &d)), weight(g, 1, &d));
}

/* Shape(x)[i] as a [1] tensor, as torch.onnx writes x.size(i). */
static const char *dim(gen *g, const char *x, int64_t i)
{
    static const int64_t zero = 0;
    const char *gath = op2(g, "Gather", op(g, "Shape", x), i64s(g, 1, &i, true));
    return op2(g, "Unsqueeze", gath, i64s(g, 1, &zero, false));
}

static const char *concat(gen *g, const char *const *parts, int n)
{
    char in[512] = "";
    for (int i = 0; i < n; i++)
        snprintf(in + strlen(in), sizeof in - strlen(in), "%s%s", i ? "," : "", parts[i]);
    const char *out = op(g, "Concat", in);
    ob_attr_int(&g->b, last(g), "axis", 0);
    return out;
}

/* What the model is: BERT-style by default (post-LN), GPT-2-style with gpt2 (pre-LN blocks, a
 * causal mask sliced from a [1, 1, max_seq, max_seq] bool buffer and applied with Where, a final
 * LayerNorm, as transformers' GPT-2 exports). */
typedef struct shape_options {
    int layers;
    int64_t width, heads, ff;
    bool gelu_erf; /* GELU as x/sqrt(2) -> Erf (BERT's export), else the tanh form (GPT-2's) */
    bool gpt2;
} shape_options;

/* GELU of f as the exporters write it. */
static const char *gelu(gen *g, const char *f, bool erf_form)
{
    if (erf_form) { /* 0.5 x (1 + erf(x / sqrt(2))) */
        const char *e = op(g, "Erf", op2(g, "Div", f, f32(g, 1.4142135381698608f)));
        return op2(g, "Mul", op2(g, "Mul", f, op2(g, "Add", e, f32(g, 1))), f32(g, 0.5f));
    }
    /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
    const char *x3 = op2(g, "Mul", f, op2(g, "Mul", f, f));
    const char *in = op2(g, "Mul", op2(g, "Add", f, op2(g, "Mul", x3, f32(g, 0.044715f))), f32(g, 0.7978845608f));
    const char *e = op(g, "Tanh", in);
    return op2(g, "Mul", op2(g, "Mul", f, op2(g, "Add", e, f32(g, 1))), f32(g, 0.5f));
}

/* The causal mask's bool buffer, [1, 1, max_seq, max_seq], true on and below the diagonal. */
static const char *causal_buffer(gen *g, int64_t max_seq)
{
    int64_t dims[4] = {1, 1, max_seq, max_seq};
    unsigned char *m = malloc((size_t)(max_seq * max_seq));
    for (int64_t i = 0; i < max_seq; i++)
        for (int64_t j = 0; j < max_seq; j++)
            m[i * max_seq + j] = j <= i;
    const char *name = fresh(g, "bias");
    ob_initializer(&g->b, name, BOOL, 4, dims, m, (size_t)(max_seq * max_seq));
    free(m);
    return name;
}

/* Scores s [b, h, seq, seq] with the future masked as GPT-2's export does:
 * Where(bias[:, :, :seq, :seq], s, -10000). */
static const char *causal(gen *g, const char *s, const char *bias, const char *x)
{
    static const int64_t zeros[2] = {0, 0}, axes[2] = {2, 3};
    const char *ns = dim(g, x, 1);
    const char *ends[2] = {ns, ns};
    char in[256];
    snprintf(in, sizeof in, "%s,%s,%s,%s", bias, i64s(g, 2, zeros, false), concat(g, ends, 2), i64s(g, 2, axes, false));
    const char *mask = op(g, "Slice", in);
    snprintf(in, sizeof in, "%s,%s,%s", mask, s, f32(g, -10000.0f));
    return op(g, "Where", in);
}

static const char *attention(gen *g, const char *h, const shape_options *o, const char *bias)
{
    int64_t d = o->width, heads = o->heads, dh = d / heads;
    static const int64_t perm[4] = {0, 2, 1, 3}, perm_k[4] = {0, 2, 3, 1};
    const char *nb = dim(g, h, 0), *ns = dim(g, h, 1);
    const char *split[4] = {nb, ns, i64s(g, 1, &heads, false), i64s(g, 1, &dh, false)};
    const char *shape = concat(g, split, 4);
    const char *q = op(g, "Transpose", op2(g, "Reshape", linear(g, h, d, d), shape));
    ob_attr_ints(&g->b, last(g), "perm", perm, 4);
    const char *k = op(g, "Transpose", op2(g, "Reshape", linear(g, h, d, d), shape));
    ob_attr_ints(&g->b, last(g), "perm", perm_k, 4);
    const char *v = op(g, "Transpose", op2(g, "Reshape", linear(g, h, d, d), shape));
    ob_attr_ints(&g->b, last(g), "perm", perm, 4);
    const char *s = op2(g, "Div", op2(g, "MatMul", q, k), f32(g, sqrtf((float)dh)));
    if (bias)
        s = causal(g, s, bias, h);
    s = op(g, "Softmax", s);
    ob_attr_int(&g->b, last(g), "axis", -1);
    const char *a = op(g, "Transpose", op2(g, "MatMul", s, v));
    ob_attr_ints(&g->b, last(g), "perm", perm, 4);
    const char *merge[3] = {dim(g, h, 0), dim(g, h, 1), i64s(g, 1, &d, false)};
    return linear(g, op2(g, "Reshape", a, concat(g, merge, 3)), d, d);
}

static const char *mlp(gen *g, const char *h, const shape_options *o)
{
    return linear(g, gelu(g, linear(g, h, o->width, o->ff), o->gelu_erf), o->ff, o->width);
}

static void build(gen *g, const shape_options *o)
{
    int64_t d = o->width;
    static const int64_t xdims[3] = {-1, -1, 0};
    int64_t xd[3] = {xdims[0], xdims[1], d};
    static const char *const params[3] = {"batch", "sequence", NULL};
    ob_init(&g->b, 14);
    ob_input(&g->b, "x", F32, 3, xd, params);
    const char *h = "x";
    const char *bias = o->gpt2 ? causal_buffer(g, 1024) : NULL;
    for (int l = 0; l < o->layers; l++) {
        if (o->gpt2) {
            h = op2(g, "Add", h, attention(g, layernorm(g, h, d), o, bias));
            h = op2(g, "Add", h, mlp(g, layernorm(g, h, d), o));
        } else {
            h = layernorm(g, op2(g, "Add", h, attention(g, h, o, NULL)), d);
            h = layernorm(g, op2(g, "Add", h, mlp(g, h, o)), d);
        }
    }
    if (o->gpt2)
        h = layernorm(g, h, d);
    ob_output(&g->b, h, F32, -1, NULL);
}

int main(int argc, char **argv)
{
    int repeat = 7;
    int64_t seq = 128;
    shape_options o = {.layers = 12, .width = 132, .heads = 4};
    const char *out = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--layers") == 0 && i + 1 < argc)
            o.layers = atoi(argv[++i]);
        else if (strcmp(argv[i], "--width") == 0 && i + 1 < argc)
            o.width = atoi(argv[++i]);
        else if (strcmp(argv[i], "--heads") == 0 && i + 1 < argc)
            o.heads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--ff") == 0 && i + 1 < argc)
            o.ff = atoi(argv[++i]);
        else if (strcmp(argv[i], "--seq") == 0 && i + 1 < argc)
            seq = atoi(argv[++i]);
        else if (strcmp(argv[i], "--gelu") == 0 && i + 1 < argc &&
                 (strcmp(argv[i + 1], "erf") == 0 || strcmp(argv[i + 1], "tanh") == 0))
            o.gelu_erf = strcmp(argv[++i], "erf") == 0;
        else if (strcmp(argv[i], "--gpt2") == 0)
            o.gpt2 = true;
        else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc)
            repeat = atoi(argv[++i]);
        else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc)
            out = argv[++i];
        else {
            fprintf(stderr, "usage: bench_onnx_load [--layers L] [--width D] [--heads H] [--ff F] [--seq S]\n"
                            "                       [--gelu tanh|erf] [--gpt2] [--repeat N] [--out MODEL.onnx]\n");
            return 2;
        }
    }
    if (o.ff == 0)
        o.ff = 4 * o.width;
    if (o.layers < 1 || o.heads < 1 || o.width < o.heads || o.width % o.heads || o.ff < 1 || seq < 1 ||
        seq > 1024 || repeat < 1 || repeat > 1000) {
        fprintf(stderr, "bench_onnx_load: layers >= 1, width a multiple of heads, ff >= 1, seq 1..1024, "
                        "repeat 1..1000\n");
        return 2;
    }
    gen g = {.state = 1};
    build(&g, &o);
    size_t size;
    uint8_t *bytes = ob_pack(&g.b, &size);
    size_t onnx_nodes = g.b.graph.n_node;
    if (out) {
        FILE *f = fopen(out, "wb");
        if (!f || fwrite(bytes, 1, size, f) != size || fclose(f)) {
            fprintf(stderr, "bench_onnx_load: cannot write %s\n", out);
            return 1;
        }
    }
    ob_free(&g.b);
    const clrun_onnx_dim dims[2] = {{"batch", 1}, {"sequence", seq}};
    clrun_onnx_options oo;
    clrun_onnx_options_init(&oo);
    oo.dims = dims;
    oo.dim_count = 2;
    char err[2048];
    oo.err = err;
    oo.errlen = sizeof err;
    double *t_unpack = calloc((size_t)repeat, sizeof(double)), *t_load = calloc((size_t)repeat, sizeof(double));
    double *c_load = calloc((size_t)repeat, sizeof(double)), *t_plan = calloc((size_t)repeat, sizeof(double));
    double *c_total = calloc((size_t)repeat, sizeof(double));
    int32_t graph_nodes = 0;
    size_t n_buffers = 0;
    uint64_t peak = 0, bound = 0;
    for (int r = 0; r < repeat; r++) {
        double u0 = cpu_s();
        Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, size, bytes);
        t_unpack[r] = cpu_s() - u0;
        onnx__model_proto__free_unpacked(m, NULL);

        double c0 = cpu_s();
        double w0 = wall_s();
        clrun_graph *graph = NULL;
        if (clrun_graph_load_onnx_memory(bytes, size, "bench.onnx", &oo, &graph) != CLRUN_OK) {
            fprintf(stderr, "bench_onnx_load: %s\n", err);
            return 1;
        }
        double w1 = wall_s(), c1 = cpu_s();
        t_load[r] = w1 - w0;
        c_load[r] = c1 - c0;
        clrun_plan_buffer *buffers = NULL;
        if (clrun_graph_plan_buffers(graph, true, &buffers, &n_buffers, NULL, err, sizeof err) != CLRUN_OK) {
            fprintf(stderr, "bench_onnx_load: %s\n", err);
            return 1;
        }
        uint64_t *offsets = malloc((n_buffers + 1) * sizeof *offsets);
        clrun_plan_options po = CLRUN_PLAN_OPTIONS_DEFAULT;
        po.time_limit_s = 0;
        clrun_plan_result pr;
        if (clrun_plan_solve(buffers, n_buffers, &po, offsets, &pr) != CLRUN_OK) {
            fprintf(stderr, "bench_onnx_load: the planner failed\n");
            return 1;
        }
        t_plan[r] = wall_s() - w1;
        c_total[r] = cpu_s() - c0;
        peak = pr.peak_bytes;
        bound = pr.lower_bound_bytes;
        graph_nodes = clrun_graph_node_count(graph);
        free(offsets);
        free(buffers);
        clrun_graph_destroy(graph);
    }
    double unpack = bench_median(t_unpack, repeat), load = bench_median(t_load, repeat), cload = bench_median(c_load, repeat);
    double plan = bench_median(t_plan, repeat), total = bench_median(c_total, repeat);
    char wb[32], pb[32], lb[32];
    printf("bench_onnx_load: a %d-layer %s of width %" PRId64 ", %" PRId64 " heads, MLP %" PRId64
           ", GELU in %s form, exported-style, batch 1, sequence %" PRId64 "\n",
           o.layers, o.gpt2 ? "GPT-2-style decoder" : "transformer encoder", o.width, o.heads, o.ff,
           o.gelu_erf ? "erf" : "tanh", seq);
    printf("  model          %zu bytes, %zu ONNX nodes, %s of weights in %s\n", size, onnx_nodes,
           clrun_format_bytes(g.weight_bytes, wb, sizeof wb), "raw-data initializers");
    printf("  graph          %d nodes after folding (%zu ONNX nodes folded on the host), %zu buffers\n",
           (int)graph_nodes, onnx_nodes - (size_t)graph_nodes, n_buffers);
    printf("  plan           peak %s, lower bound %s\n", clrun_format_bytes(peak, pb, sizeof pb),
           clrun_format_bytes(bound, lb, sizeof lb));
    printf("  median of %d, host CPU time of this process (wall clock beside, which other load inflates):\n",
           repeat);
    printf("    protobuf-c unpack alone (baseline)   %8.2f ms\n", unpack * 1e3);
    printf("    import (unpack, decode, fold, map)   %8.2f ms  (%.2fx the baseline; wall %.2f ms)\n", cload * 1e3,
           cload / unpack, load * 1e3);
    printf("    schedule buffers + plan              %8.2f ms  (wall)\n", plan * 1e3);
    printf("    load, fold and plan                  %8.2f ms\n", total * 1e3);
    free(bytes);
    free(t_unpack);
    free(t_load);
    free(c_load);
    free(t_plan);
    free(c_total);
    return 0;
}
