/* The models of the training benchmarks (bench_train, bench_remat), built through the graph API
 * with weights from seeds, and their batch. A model's shape is one line, "NAME key=value ...",
 * which the PyTorch sides (bench/bench_train_torch.py, bench/bench_remat_torch.py) read too:
 *
 *   mlp        784-512-512-10, relu
 *   resnet18   ResNet-18's layout (7x7/2 stem, 3x3/2 max pool, 2+2+2+2 basic blocks of width,
 *              2x, 4x, 8x width channels, 1x1/2 projections, global average pool, a fc)
 *   resnet50   ResNet-50's layout (the same stem, 3+4+6+3 bottleneck blocks: 1x1 to width, 3x3
 *              (the stride here, as torchvision's), 1x1 to 4x width; 1x1 projections)
 *   bert*      post-LN encoder layers, exact GELU, softmax attention without mask or dropout;
 *              token and learned position embeddings with a layernorm; an untied head over the
 *              vocabulary, per-token cross-entropy ("bert", "bert_base": the same builder)
 * The ResNets have NO batch norm: convolutions with biases instead (as bench_train's resnet18
 * has always been measured). */
#include "models.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const bench_train_configs[BENCH_TRAIN_MODELS] = {
    "mlp batch=64 in=784 hidden=512 depth=2 classes=10",
    "resnet18 batch=16 image=64 width=64 classes=1000",
    "bert batch=8 seq=64 d=256 heads=4 layers=4 ff=1024 vocab=4096",
};
const char *const bench_train_tiny_configs[BENCH_TRAIN_MODELS] = {
    "mlp batch=8 in=64 hidden=32 depth=2 classes=10",
    "resnet18 batch=2 image=32 width=8 classes=10",
    "bert batch=2 seq=16 d=32 heads=4 layers=2 ff=64 vocab=128",
};
const char *const bench_remat_configs[BENCH_REMAT_MODELS] = {
    "bert_base batch=8 seq=128 d=768 heads=12 layers=12 ff=3072 vocab=8192",
    "resnet50 batch=8 image=128 width=64 classes=1000",
};
/* The same depth (what rematerialisation works on), small widths. */
const char *const bench_remat_tiny_configs[BENCH_REMAT_MODELS] = {
    "bert_base batch=2 seq=16 d=32 heads=4 layers=12 ff=64 vocab=128",
    "resnet50 batch=2 image=32 width=4 classes=10",
};

const char *bench_model_config(const char *name, bool tiny)
{
    const char *const *lists[2] = {tiny ? bench_train_tiny_configs : bench_train_configs,
                                   tiny ? bench_remat_tiny_configs : bench_remat_configs};
    int counts[2] = {BENCH_TRAIN_MODELS, BENCH_REMAT_MODELS};
    size_t n = strlen(name);
    for (int l = 0; l < 2; l++)
        for (int m = 0; m < counts[l]; m++)
            if (strncmp(lists[l][m], name, n) == 0 && lists[l][m][n] == ' ')
                return lists[l][m];
    return NULL;
}

int64_t bench_config_get(const char *config, const char *key)
{
    char pattern[64];
    snprintf(pattern, sizeof pattern, " %s=", key);
    const char *p = strstr(config, pattern);
    if (p == NULL) {
        fprintf(stderr, "bench: no %s in \"%s\"\n", key, config);
        exit(2);
    }
    return strtoll(p + strlen(pattern), NULL, 10);
}

/* Building models through the graph API: a failure is kept and every later call is skipped. */

typedef struct builder {
    clrun_graph *g;
    uint64_t seed;
    int counter;
    bool failed;
    char err[1024];
} builder;

static clrun_attr attr_int(const char *name, int64_t v)
{
    clrun_attr a = {.name = name, .kind = CLRUN_ATTR_INT, .i = v};
    return a;
}

static clrun_attr attr_float(const char *name, double v)
{
    clrun_attr a = {.name = name, .kind = CLRUN_ATTR_FLOAT, .f = v};
    return a;
}

static clrun_attr attr_ints(const char *name, int count, const int64_t *v)
{
    clrun_attr a = {.name = name, .kind = CLRUN_ATTR_INTS, .count = count};
    for (int i = 0; i < count; i++)
        a.ints[i] = v[i];
    return a;
}

static clrun_attr attr_pair(const char *name, int64_t v)
{
    int64_t two[2] = {v, v};
    return attr_ints(name, 2, two);
}

static clrun_tensor_type make_type(clrun_dtype dtype, int rank, const int64_t *shape)
{
    clrun_tensor_type t = {.dtype = dtype, .rank = rank};
    for (int i = 0; i < rank; i++)
        t.shape[i] = shape[i];
    return t;
}

static void builder_fail(builder *b, const char *what)
{
    if (b->failed)
        return;
    b->failed = true;
    snprintf(b->err, sizeof b->err, "%s: %s", what, clrun_graph_last_error(b->g));
}

static clrun_tensor_id b_input(builder *b, const char *name, clrun_dtype dtype, int rank, const int64_t *shape)
{
    clrun_tensor_id id = -1;
    clrun_tensor_type t = make_type(dtype, rank, shape);
    if (!b->failed && clrun_graph_add_input(b->g, name, &t, false, &id) != CLRUN_OK)
        builder_fail(b, name);
    return id;
}

static clrun_tensor_id b_const(builder *b, const char *name, int rank, const int64_t *shape, clrun_fill fill,
                               double lo, double hi)
{
    clrun_tensor_id id = -1;
    clrun_tensor_type t = make_type(CLRUN_F32, rank, shape);
    b->seed++;
    if (!b->failed && clrun_graph_add_constant(b->g, name, &t, NULL, fill, lo, hi, b->seed, &id) != CLRUN_OK)
        builder_fail(b, name);
    return id;
}

/* A node with one output, called `name` (NULL: t<counter>). */
static clrun_tensor_id b_node(builder *b, const char *name, const char *op, const clrun_tensor_id *inputs, int n,
                              const clrun_attr *attrs, int attr_count)
{
    char auto_name[32];
    if (name == NULL) {
        snprintf(auto_name, sizeof auto_name, "t%d", b->counter++);
        name = auto_name;
    }
    clrun_tensor_id id = -1;
    const char *names[1] = {name};
    if (!b->failed && clrun_graph_add_node(b->g, op, inputs, n, names, 1, attrs, attr_count, &id) != CLRUN_OK)
        builder_fail(b, op);
    return id;
}

static clrun_tensor_id b_unary(builder *b, const char *op, clrun_tensor_id x)
{
    return b_node(b, NULL, op, &x, 1, NULL, 0);
}

static clrun_tensor_id b_binary(builder *b, const char *op, clrun_tensor_id x, clrun_tensor_id y)
{
    clrun_tensor_id in[2] = {x, y};
    return b_node(b, NULL, op, in, 2, NULL, 0);
}

/* PyTorch's nn.Linear of `prefix` (weight stored [in, out], clrun's matmul layout; the torch
 * side transposes it), drawn as nn.Linear draws: uniform(+-1/sqrt(in)). */
static clrun_tensor_id b_linear(builder *b, const char *out_name, const char *prefix, clrun_tensor_id x,
                                int64_t in, int64_t out)
{
    char wn[128], bn[128];
    snprintf(wn, sizeof wn, "%s.weight", prefix);
    snprintf(bn, sizeof bn, "%s.bias", prefix);
    double bound = 1.0 / sqrt((double)in);
    clrun_tensor_id w = b_const(b, wn, 2, (int64_t[]){in, out}, CLRUN_FILL_UNIFORM, -bound, bound);
    clrun_tensor_id bias = b_const(b, bn, 1, (int64_t[]){out}, CLRUN_FILL_UNIFORM, -bound, bound);
    clrun_tensor_id in3[3] = {x, w, bias};
    return b_node(b, out_name, "matmul", in3, 3, NULL, 0);
}

/* nn.Conv2d(cin, cout, k, stride, pad) with its bias. */
static clrun_tensor_id b_conv(builder *b, const char *prefix, clrun_tensor_id x, int64_t cin, int64_t cout,
                              int64_t k, int64_t stride, int64_t pad)
{
    char wn[128], bn[128];
    snprintf(wn, sizeof wn, "%s.weight", prefix);
    snprintf(bn, sizeof bn, "%s.bias", prefix);
    double bound = 1.0 / sqrt((double)(cin * k * k));
    clrun_tensor_id w = b_const(b, wn, 4, (int64_t[]){cout, cin, k, k}, CLRUN_FILL_UNIFORM, -bound, bound);
    clrun_tensor_id bias = b_const(b, bn, 1, (int64_t[]){cout}, CLRUN_FILL_UNIFORM, -bound, bound);
    clrun_tensor_id in3[3] = {x, w, bias};
    clrun_attr attrs[2] = {attr_pair("stride", stride), attr_pair("pad", pad)};
    return b_node(b, NULL, "conv2d", in3, 3, attrs, 2);
}

static clrun_tensor_id b_layernorm(builder *b, const char *prefix, clrun_tensor_id x, int64_t d)
{
    char gn[128], bn[128];
    snprintf(gn, sizeof gn, "%s.weight", prefix);
    snprintf(bn, sizeof bn, "%s.bias", prefix);
    clrun_tensor_id gamma = b_const(b, gn, 1, (int64_t[]){d}, CLRUN_FILL_ONES, 0, 0);
    clrun_tensor_id beta = b_const(b, bn, 1, (int64_t[]){d}, CLRUN_FILL_ZEROS, 0, 0);
    clrun_tensor_id in3[3] = {x, gamma, beta};
    clrun_attr eps = attr_float("eps", 1e-5);
    return b_node(b, NULL, "layernorm", in3, 3, &eps, 1);
}

static clrun_tensor_id b_reshape(builder *b, clrun_tensor_id x, int rank, const int64_t *shape)
{
    clrun_attr a = attr_ints("shape", rank, shape);
    return b_node(b, NULL, "reshape", &x, 1, &a, 1);
}

static clrun_tensor_id b_transpose(builder *b, clrun_tensor_id x, int rank, const int64_t *perm)
{
    clrun_attr a = attr_ints("perm", rank, perm);
    return b_node(b, NULL, "transpose", &x, 1, &a, 1);
}

static void build_mlp(builder *b, const char *config)
{
    int64_t batch = bench_config_get(config, "batch"), in = bench_config_get(config, "in");
    int64_t hidden = bench_config_get(config, "hidden"), depth = bench_config_get(config, "depth");
    int64_t classes = bench_config_get(config, "classes");
    clrun_tensor_id h = b_input(b, "x", CLRUN_F32, 2, (int64_t[]){batch, in});
    int64_t width = in;
    for (int64_t i = 0; i < depth; i++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "fc%lld", (long long)i + 1);
        h = b_unary(b, "relu", b_linear(b, NULL, prefix, h, width, hidden));
        width = hidden;
    }
    char prefix[32];
    snprintf(prefix, sizeof prefix, "fc%lld", (long long)depth + 1);
    b_linear(b, "logits", prefix, h, width, classes);
}

static clrun_tensor_id basic_block(builder *b, const char *prefix, clrun_tensor_id x, int64_t cin, int64_t cout,
                                   int64_t stride)
{
    char name[96];
    snprintf(name, sizeof name, "%s.conv1", prefix);
    clrun_tensor_id h = b_unary(b, "relu", b_conv(b, name, x, cin, cout, 3, stride, 1));
    snprintf(name, sizeof name, "%s.conv2", prefix);
    h = b_conv(b, name, h, cout, cout, 3, 1, 1);
    clrun_tensor_id shortcut = x;
    if (stride != 1 || cin != cout) {
        snprintf(name, sizeof name, "%s.downsample", prefix);
        shortcut = b_conv(b, name, x, cin, cout, 1, stride, 0);
    }
    return b_unary(b, "relu", b_binary(b, "add", h, shortcut));
}

static void build_resnet18(builder *b, const char *config)
{
    int64_t batch = bench_config_get(config, "batch"), image = bench_config_get(config, "image");
    int64_t width = bench_config_get(config, "width"), classes = bench_config_get(config, "classes");
    clrun_tensor_id x = b_input(b, "x", CLRUN_F32, 4, (int64_t[]){batch, 3, image, image});
    clrun_tensor_id h = b_unary(b, "relu", b_conv(b, "conv1", x, 3, width, 7, 2, 3));
    clrun_attr pool[3] = {attr_pair("kernel", 3), attr_pair("stride", 2), attr_pair("pad", 1)};
    h = b_node(b, NULL, "maxpool2d", &h, 1, pool, 3);
    int64_t cin = width;
    for (int stage = 0; stage < 4; stage++) {
        int64_t cout = width << stage;
        for (int block = 0; block < 2; block++) {
            char prefix[32];
            snprintf(prefix, sizeof prefix, "layer%d.%d", stage + 1, block);
            h = basic_block(b, prefix, h, cin, cout, stage > 0 && block == 0 ? 2 : 1);
            cin = cout;
        }
    }
    h = b_unary(b, "global_avgpool", h);
    b_linear(b, "logits", "fc", h, cin, classes);
}

/* ResNet-50's bottleneck (torchvision's v1.5: the stride on the 3x3): 1x1 to `mid`, 3x3, 1x1
 * to 4x `mid`, a 1x1 projection where the shape changes. */
static clrun_tensor_id bottleneck_block(builder *b, const char *prefix, clrun_tensor_id x, int64_t cin, int64_t mid,
                                        int64_t stride)
{
    char name[96];
    int64_t cout = 4 * mid;
    snprintf(name, sizeof name, "%s.conv1", prefix);
    clrun_tensor_id h = b_unary(b, "relu", b_conv(b, name, x, cin, mid, 1, 1, 0));
    snprintf(name, sizeof name, "%s.conv2", prefix);
    h = b_unary(b, "relu", b_conv(b, name, h, mid, mid, 3, stride, 1));
    snprintf(name, sizeof name, "%s.conv3", prefix);
    h = b_conv(b, name, h, mid, cout, 1, 1, 0);
    clrun_tensor_id shortcut = x;
    if (stride != 1 || cin != cout) {
        snprintf(name, sizeof name, "%s.downsample", prefix);
        shortcut = b_conv(b, name, x, cin, cout, 1, stride, 0);
    }
    return b_unary(b, "relu", b_binary(b, "add", h, shortcut));
}

static void build_resnet50(builder *b, const char *config)
{
    static const int blocks[4] = {3, 4, 6, 3};
    int64_t batch = bench_config_get(config, "batch"), image = bench_config_get(config, "image");
    int64_t width = bench_config_get(config, "width"), classes = bench_config_get(config, "classes");
    clrun_tensor_id x = b_input(b, "x", CLRUN_F32, 4, (int64_t[]){batch, 3, image, image});
    clrun_tensor_id h = b_unary(b, "relu", b_conv(b, "conv1", x, 3, width, 7, 2, 3));
    clrun_attr pool[3] = {attr_pair("kernel", 3), attr_pair("stride", 2), attr_pair("pad", 1)};
    h = b_node(b, NULL, "maxpool2d", &h, 1, pool, 3);
    int64_t cin = width;
    for (int stage = 0; stage < 4; stage++) {
        int64_t mid = width << stage;
        for (int block = 0; block < blocks[stage]; block++) {
            char prefix[32];
            snprintf(prefix, sizeof prefix, "layer%d.%d", stage + 1, block);
            h = bottleneck_block(b, prefix, h, cin, mid, stage > 0 && block == 0 ? 2 : 1);
            cin = 4 * mid;
        }
    }
    h = b_unary(b, "global_avgpool", h);
    b_linear(b, "logits", "fc", h, cin, classes);
}

static clrun_tensor_id encoder_layer(builder *b, int layer, clrun_tensor_id x, int64_t batch, int64_t seq,
                                     int64_t d, int64_t heads, int64_t ff)
{
    char prefix[64];
    int64_t dh = d / heads;
    snprintf(prefix, sizeof prefix, "layers.%d.qkv", layer);
    clrun_tensor_id qkv = b_linear(b, NULL, prefix, x, d, 3 * d);
    clrun_tensor_id qkv_parts[3];
    for (int i = 0; i < 3; i++) {
        clrun_attr split[3] = {attr_int("axis", 2), attr_int("parts", 3), attr_int("index", i)};
        clrun_tensor_id part = b_node(b, NULL, "split", &qkv, 1, split, 3);
        part = b_reshape(b, part, 4, (int64_t[]){batch, seq, heads, dh});
        qkv_parts[i] = b_transpose(b, part, 4, (int64_t[]){0, 2, 1, 3});
    }
    clrun_attr score_attrs[2] = {attr_int("transpose_b", 1), attr_float("alpha", 1.0 / sqrt((double)dh))};
    clrun_tensor_id qk[2] = {qkv_parts[0], qkv_parts[1]};
    clrun_tensor_id scores = b_node(b, NULL, "matmul", qk, 2, score_attrs, 2);
    clrun_attr axis = attr_int("axis", -1);
    clrun_tensor_id p = b_node(b, NULL, "softmax", &scores, 1, &axis, 1);
    clrun_tensor_id ctx = b_binary(b, "matmul", p, qkv_parts[2]);
    ctx = b_transpose(b, ctx, 4, (int64_t[]){0, 2, 1, 3});
    ctx = b_reshape(b, ctx, 3, (int64_t[]){batch, seq, d});
    snprintf(prefix, sizeof prefix, "layers.%d.proj", layer);
    clrun_tensor_id attn = b_linear(b, NULL, prefix, ctx, d, d);
    snprintf(prefix, sizeof prefix, "layers.%d.ln1", layer);
    clrun_tensor_id h = b_layernorm(b, prefix, b_binary(b, "add", x, attn), d);
    snprintf(prefix, sizeof prefix, "layers.%d.ff1", layer);
    clrun_tensor_id f = b_unary(b, "gelu_erf", b_linear(b, NULL, prefix, h, d, ff));
    snprintf(prefix, sizeof prefix, "layers.%d.ff2", layer);
    f = b_linear(b, NULL, prefix, f, ff, d);
    snprintf(prefix, sizeof prefix, "layers.%d.ln2", layer);
    return b_layernorm(b, prefix, b_binary(b, "add", h, f), d);
}

static void build_bert(builder *b, const char *config)
{
    int64_t batch = bench_config_get(config, "batch"), seq = bench_config_get(config, "seq");
    int64_t d = bench_config_get(config, "d"), heads = bench_config_get(config, "heads");
    int64_t layers = bench_config_get(config, "layers"), ff = bench_config_get(config, "ff");
    int64_t vocab = bench_config_get(config, "vocab");
    clrun_tensor_id ids = b_input(b, "ids", CLRUN_I32, 2, (int64_t[]){batch, seq});
    clrun_tensor_id tok = b_const(b, "tok_emb.weight", 2, (int64_t[]){vocab, d}, CLRUN_FILL_NORMAL, 0.0, 0.02);
    clrun_tensor_id pos = b_const(b, "pos_emb", 2, (int64_t[]){seq, d}, CLRUN_FILL_NORMAL, 0.0, 0.02);
    clrun_tensor_id gather_in[2] = {tok, ids};
    clrun_tensor_id h = b_node(b, NULL, "gather", gather_in, 2, NULL, 0);
    h = b_layernorm(b, "emb_ln", b_binary(b, "add", h, pos), d);
    for (int64_t l = 0; l < layers; l++)
        h = encoder_layer(b, (int)l, h, batch, seq, d, heads, ff);
    b_linear(b, "logits", "head", h, d, vocab);
}

clrun_graph *bench_build_model(const char *config, char *err, size_t errlen)
{
    builder b = {.seed = 0};
    char name[32];
    sscanf(config, "%31s", name);
    if (clrun_graph_create(name, &b.g) != CLRUN_OK) {
        snprintf(err, errlen, "cannot create a graph");
        return NULL;
    }
    if (strcmp(name, "mlp") == 0)
        build_mlp(&b, config);
    else if (strcmp(name, "resnet18") == 0)
        build_resnet18(&b, config);
    else if (strcmp(name, "resnet50") == 0)
        build_resnet50(&b, config);
    else
        build_bert(&b, config);
    clrun_tensor_id logits = clrun_graph_find(b.g, "logits");
    if (!b.failed && clrun_graph_mark_output(b.g, logits) != CLRUN_OK)
        builder_fail(&b, "output");
    if (!b.failed && clrun_graph_validate(b.g) != CLRUN_OK)
        builder_fail(&b, "validate");
    if (b.failed) {
        snprintf(err, errlen, "%s", b.err);
        clrun_graph_destroy(b.g);
        return NULL;
    }
    return b.g;
}

void bench_feeds_free(bench_feeds *f)
{
    for (int32_t i = 0; i < f->count; i++)
        free(f->data[i]);
    f->count = 0;
}

bool bench_make_feeds(clrun_train *t, const char *config, bench_feeds *f, char *err, size_t errlen)
{
    f->count = clrun_train_feed_count(t);
    if (f->count > 8) {
        snprintf(err, errlen, "%d feeds", f->count);
        return false;
    }
    const char *classes_key = strncmp(config, "bert", 4) == 0 ? "vocab" : "classes";
    for (int32_t i = 0; i < f->count; i++) {
        clrun_train_feed_info(t, i, &f->name[i], &f->type[i]);
        uint64_t bytes = clrun_tensor_bytes(&f->type[i]);
        f->data[i] = malloc((size_t)bytes);
        bool is_float = f->type[i].dtype == CLRUN_F32;
        double hi = is_float ? 1.0 : (double)bench_config_get(config, strcmp(f->name[i], "ids") == 0 ? "vocab" : classes_key);
        if (f->data[i] == NULL ||
            clrun_fill_values(&f->type[i], CLRUN_FILL_UNIFORM, is_float ? -1.0 : 0.0, hi, 1000 + (uint64_t)i,
                              f->data[i], bytes) != CLRUN_OK) {
            snprintf(err, errlen, "feed %s: %s", f->name[i], clrun_last_error(NULL));
            return false;
        }
    }
    return true;
}
