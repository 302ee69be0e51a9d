/* Model graphs with their true layer shapes (see models.h).
 *
 * Every layer goes through the public builder, so each op's type rules check the shapes as the
 * graph grows; the first refusal stops the build and is reported with the layer's name. Weights
 * use the initialisation of the original papers' code: He normal for convolutions (BN folded
 * into the conv bias, zero here), normal(0, 0.02) for transformers with the residual projections
 * of GPT-2 scaled by 1/sqrt(2 * layers), LayerNorm gain ones and bias zeros. Seeds count up from
 * 1 in declaration order, so a model's text is the same on every run. */
#include "models.h"

#include <clrun/context.h>

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *const gen_model_names[] = {"resnet50", "mobilenetv2", "bert-base", "gpt2", NULL};

/* ---- a builder that remembers its first failure ---- */

typedef struct builder {
    clrun_graph *graph;
    clrun_status status; /* first failure; later calls do nothing */
    char err[1024];
    uint64_t seed;       /* for the next random weight */
} builder;

typedef clrun_tensor_id tid;

/* Tensor names are built with printf formats: "layer3.2.conv1.w". */
#define NAME_MAX_LEN 128

static void name_format(char *buf, const char *format, va_list args)
{
    vsnprintf(buf, NAME_MAX_LEN, format, args);
}

static bool failed(builder *b, clrun_status status, const char *what)
{
    if (status == CLRUN_OK)
        return false;
    if (b->status == CLRUN_OK) {
        b->status = status;
        snprintf(b->err, sizeof b->err, "%s: %s", what, clrun_graph_last_error(b->graph));
    }
    return true;
}

static clrun_tensor_type f32(int rank, const int64_t *dims)
{
    clrun_tensor_type type = {CLRUN_F32, rank, {0}};
    for (int d = 0; d < rank; d++)
        type.shape[d] = dims[d];
    return type;
}

#define DIMS(...) (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}

static tid input(builder *b, const char *name, int rank, const int64_t *dims)
{
    tid id = -1;
    clrun_tensor_type type = f32(rank, dims);
    if (b->status == CLRUN_OK)
        failed(b, clrun_graph_add_input(b->graph, name, &type, false, &id), name);
    return id;
}

/* A constant filled by `fill` (normal draws the next seed). */
static tid constant(builder *b, clrun_fill fill, double std, int rank, const int64_t *dims,
                    const char *format, ...)
{
    if (b->status != CLRUN_OK)
        return -1;
    char name[NAME_MAX_LEN];
    va_list args;
    va_start(args, format);
    name_format(name, format, args);
    va_end(args);
    clrun_tensor_type type = f32(rank, dims);
    uint64_t seed = fill == CLRUN_FILL_NORMAL ? b->seed++ : 0;
    tid id = -1;
    failed(b, clrun_graph_add_constant(b->graph, name, &type, NULL, fill, 0.0, std, seed, &id),
           name);
    return id;
}

/* A constant holding one float (broadcast by the binary ops). */
static tid scalar(builder *b, const char *name, float value)
{
    if (b->status != CLRUN_OK)
        return -1;
    clrun_tensor_type type = {CLRUN_F32, 1, {1}};
    tid id = -1;
    failed(b, clrun_graph_add_constant(b->graph, name, &type, &value, CLRUN_FILL_ZEROS, 0, 0, 0,
                                       &id),
           name);
    return id;
}

static clrun_attr attr_int(const char *name, int64_t value)
{
    return (clrun_attr){.name = name, .kind = CLRUN_ATTR_INT, .i = value};
}

static clrun_attr attr_float(const char *name, double value)
{
    return (clrun_attr){.name = name, .kind = CLRUN_ATTR_FLOAT, .f = value};
}

static clrun_attr attr_ints(const char *name, int count, const int64_t *values)
{
    clrun_attr attr = {.name = name, .kind = CLRUN_ATTR_INTS, .count = count};
    for (int k = 0; k < count && k < CLRUN_MAX_ATTR_INTS; k++)
        attr.ints[k] = values[k];
    return attr;
}

static clrun_attr attr_pair(const char *name, int64_t first, int64_t second)
{
    return attr_ints(name, 2, (int64_t[]){first, second});
}

/* One node with one output named by `format`. */
static tid node(builder *b, const char *op, int input_count, const tid *inputs, int attr_count,
                const clrun_attr *attrs, const char *format, ...)
{
    if (b->status != CLRUN_OK)
        return -1;
    char name[NAME_MAX_LEN];
    va_list args;
    va_start(args, format);
    name_format(name, format, args);
    va_end(args);
    const char *names[1] = {name};
    tid id = -1;
    failed(b, clrun_graph_add_node(b->graph, op, inputs, input_count, names, 1, attrs, attr_count,
                                   &id),
           name);
    return id;
}

#define INPUTS(...) (int)(sizeof((tid[]){__VA_ARGS__}) / sizeof(tid)), (tid[]){__VA_ARGS__}
#define ATTRS(...) (int)(sizeof((clrun_attr[]){__VA_ARGS__}) / sizeof(clrun_attr)), (clrun_attr[]){__VA_ARGS__}
#define NO_ATTRS 0, NULL

static const clrun_tensor_type *type_of(builder *b, tid id)
{
    static const clrun_tensor_type none = {CLRUN_F32, 0, {0}};
    const clrun_tensor_type *type = clrun_graph_tensor_type(b->graph, id);
    return type ? type : &none;
}

/* ---- convolutional pieces ---- */

/* conv2d with weights [out, in/groups, k, k] (He normal) and a zero bias (BN folded). */
static tid conv(builder *b, const char *name, tid x, int64_t out_channels, int64_t kernel,
                int64_t stride, int64_t groups)
{
    int64_t in_channels = type_of(b, x)->shape[1];
    int64_t fan_in = in_channels / groups * kernel * kernel;
    tid w = constant(b, CLRUN_FILL_NORMAL, sqrt(2.0 / (double)fan_in),
                     DIMS(out_channels, in_channels / groups, kernel, kernel), "%s.w", name);
    tid bias = constant(b, CLRUN_FILL_ZEROS, 0, DIMS(out_channels), "%s.b", name);
    clrun_attr attrs[3];
    int count = 0;
    if (stride != 1)
        attrs[count++] = attr_pair("stride", stride, stride);
    if (kernel / 2 != 0)
        attrs[count++] = attr_pair("pad", kernel / 2, kernel / 2);
    if (groups != 1)
        attrs[count++] = attr_int("groups", groups);
    return node(b, "conv2d", INPUTS(x, w, bias), count, attrs, "%s", name);
}

static tid relu(builder *b, tid x, const char *name)
{
    return node(b, "relu", INPUTS(x), NO_ATTRS, "%s.relu", name);
}

/* ReLU6 as min(relu(x), 6). */
static tid relu6(builder *b, tid x, tid six, const char *name)
{
    tid r = relu(b, x, name);
    return node(b, "minimum", INPUTS(r, six), NO_ATTRS, "%s.relu6", name);
}

/* Global average pool and the classifier: [N, C, H, W] -> [N, classes]. */
static tid classifier(builder *b, tid x, int64_t classes, double std)
{
    int64_t channels = type_of(b, x)->shape[1];
    tid pooled = node(b, "global_avgpool", INPUTS(x), NO_ATTRS, "pool");
    tid w = constant(b, CLRUN_FILL_NORMAL, std, DIMS(channels, classes), "fc.w");
    tid bias = constant(b, CLRUN_FILL_ZEROS, 0, DIMS(classes), "fc.b");
    return node(b, "matmul", INPUTS(pooled, w, bias), NO_ATTRS, "logits");
}

/* ---- ResNet-50 ---- */

/* Bottleneck v1.5 (torchvision): 1x1 reduce, 3x3 carrying the stride, 1x1 expand x4; a
 * projection shortcut (1x1 with the stride) when the shape changes. */
static tid bottleneck(builder *b, tid x, int stage, int block, int64_t width, int64_t stride)
{
    char name[NAME_MAX_LEN];
    int64_t in_channels = type_of(b, x)->shape[1], out_channels = width * 4;
    snprintf(name, sizeof name, "layer%d.%d.conv1", stage, block);
    tid h = relu(b, conv(b, name, x, width, 1, 1, 1), name);
    snprintf(name, sizeof name, "layer%d.%d.conv2", stage, block);
    h = relu(b, conv(b, name, h, width, 3, stride, 1), name);
    snprintf(name, sizeof name, "layer%d.%d.conv3", stage, block);
    h = conv(b, name, h, out_channels, 1, 1, 1);
    tid shortcut = x;
    if (stride != 1 || in_channels != out_channels) {
        snprintf(name, sizeof name, "layer%d.%d.downsample", stage, block);
        shortcut = conv(b, name, x, out_channels, 1, stride, 1);
    }
    snprintf(name, sizeof name, "layer%d.%d", stage, block);
    tid sum = node(b, "add", INPUTS(h, shortcut), NO_ATTRS, "%s.add", name);
    return relu(b, sum, name);
}

static void build_resnet50(builder *b, int64_t batch)
{
    static const int blocks[4] = {3, 4, 6, 3};
    tid x = input(b, "image", DIMS(batch, 3, 224, 224));
    tid h = relu(b, conv(b, "conv1", x, 64, 7, 2, 1), "conv1");
    h = node(b, "maxpool2d", INPUTS(h),
             ATTRS(attr_pair("kernel", 3, 3), attr_pair("stride", 2, 2), attr_pair("pad", 1, 1)),
             "maxpool");
    for (int stage = 0; stage < 4; stage++)
        for (int block = 0; block < blocks[stage]; block++)
            h = bottleneck(b, h, stage + 1, block, 64 << stage, stage > 0 && block == 0 ? 2 : 1);
    tid logits = classifier(b, h, 1000, sqrt(1.0 / 2048.0));
    if (b->status == CLRUN_OK)
        failed(b, clrun_graph_mark_output(b->graph, logits), "logits");
}

/* ---- MobileNetV2 ---- */

static tid inverted_residual(builder *b, tid x, tid six, int index, int64_t expansion,
                             int64_t out_channels, int64_t stride)
{
    char name[NAME_MAX_LEN];
    int64_t in_channels = type_of(b, x)->shape[1], hidden = in_channels * expansion;
    tid h = x;
    if (expansion != 1) {
        snprintf(name, sizeof name, "features.%d.expand", index);
        h = relu6(b, conv(b, name, h, hidden, 1, 1, 1), six, name);
    }
    snprintf(name, sizeof name, "features.%d.depthwise", index);
    h = relu6(b, conv(b, name, h, hidden, 3, stride, hidden), six, name);
    snprintf(name, sizeof name, "features.%d.project", index);
    h = conv(b, name, h, out_channels, 1, 1, 1); /* linear bottleneck: no activation */
    if (stride == 1 && in_channels == out_channels)
        h = node(b, "add", INPUTS(x, h), NO_ATTRS, "features.%d.add", index);
    return h;
}

static void build_mobilenetv2(builder *b, int64_t batch)
{
    /* expansion t, output channels c, repeats n, first stride s (Sandler et al., table 2) */
    static const int64_t table[7][4] = {{1, 16, 1, 1},  {6, 24, 2, 2},  {6, 32, 3, 2},
                                        {6, 64, 4, 2},  {6, 96, 3, 1},  {6, 160, 3, 2},
                                        {6, 320, 1, 1}};
    tid x = input(b, "image", DIMS(batch, 3, 224, 224));
    tid six = scalar(b, "six", 6.0f);
    tid h = relu6(b, conv(b, "features.0", x, 32, 3, 2, 1), six, "features.0");
    int index = 1;
    for (int row = 0; row < 7; row++)
        for (int64_t i = 0; i < table[row][2]; i++)
            h = inverted_residual(b, h, six, index++, table[row][0], table[row][1],
                                  i == 0 ? table[row][3] : 1);
    h = relu6(b, conv(b, "features.18", h, 1280, 1, 1, 1), six, "features.18");
    tid logits = classifier(b, h, 1000, 0.01);
    if (b->status == CLRUN_OK)
        failed(b, clrun_graph_mark_output(b->graph, logits), "logits");
}

/* ---- transformers ---- */

typedef struct transformer {
    int64_t batch, seq, width, heads, ffn, layers;
    bool causal;
    const char *activation; /* of the feed-forward: "gelu_erf" (BERT) or "gelu" (GPT-2's tanh) */
} transformer;

/* x [rows, in] @ w [in, out] + b, with weights normal(0, std). */
static tid linear(builder *b, tid x, int64_t out, double std, const char *name)
{
    int64_t in = type_of(b, x)->shape[type_of(b, x)->rank - 1];
    tid w = constant(b, CLRUN_FILL_NORMAL, std, DIMS(in, out), "%s.w", name);
    tid bias = constant(b, CLRUN_FILL_ZEROS, 0, DIMS(out), "%s.b", name);
    return node(b, "matmul", INPUTS(x, w, bias), NO_ATTRS, "%s", name);
}

static tid layer_norm(builder *b, tid x, const char *name)
{
    int64_t width = type_of(b, x)->shape[type_of(b, x)->rank - 1];
    tid gain = constant(b, CLRUN_FILL_ONES, 0, DIMS(width), "%s.g", name);
    tid bias = constant(b, CLRUN_FILL_ZEROS, 0, DIMS(width), "%s.b", name);
    return node(b, "layernorm", INPUTS(x, gain, bias), ATTRS(attr_float("eps", 1e-5)), "%s",
                name);
}

/* [batch*seq, width] -> [batch, heads, seq, head_width] */
static tid split_heads(builder *b, const transformer *t, tid x, const char *name)
{
    tid r = node(b, "reshape", INPUTS(x),
                 ATTRS(attr_ints("shape", 4, (int64_t[]){t->batch, t->seq, t->heads,
                                                         t->width / t->heads})),
                 "%s.split", name);
    return node(b, "transpose", INPUTS(r), ATTRS(attr_ints("perm", 4, (int64_t[]){0, 2, 1, 3})),
                "%s.heads", name);
}

/* softmax(q k^T / sqrt(head_width)) v, heads merged back to [batch*seq, width]. */
static tid attention(builder *b, const transformer *t, tid q, tid k, tid v, const char *name)
{
    char part[NAME_MAX_LEN];
    snprintf(part, sizeof part, "%s.q", name);
    tid qh = split_heads(b, t, q, part);
    snprintf(part, sizeof part, "%s.k", name);
    tid kh = split_heads(b, t, k, part);
    snprintf(part, sizeof part, "%s.v", name);
    tid vh = split_heads(b, t, v, part);
    double scale = 1.0 / sqrt((double)(t->width / t->heads));
    tid scores = node(b, "matmul", INPUTS(qh, kh),
                      ATTRS(attr_int("transpose_b", 1), attr_float("alpha", scale)), "%s.scores",
                      name);
    tid probs = t->causal ? node(b, "softmax", INPUTS(scores), ATTRS(attr_int("causal", 1)),
                                 "%s.probs", name)
                          : node(b, "softmax", INPUTS(scores), NO_ATTRS, "%s.probs", name);
    tid context = node(b, "matmul", INPUTS(probs, vh), NO_ATTRS, "%s.context", name);
    tid merged = node(b, "transpose", INPUTS(context),
                      ATTRS(attr_ints("perm", 4, (int64_t[]){0, 2, 1, 3})), "%s.merge", name);
    return node(b, "reshape", INPUTS(merged),
                ATTRS(attr_ints("shape", 2, (int64_t[]){t->batch * t->seq, t->width})),
                "%s.merged", name);
}

static tid feed_forward(builder *b, const transformer *t, tid x, double out_std, const char *name)
{
    char part[NAME_MAX_LEN];
    snprintf(part, sizeof part, "%s.fc", name);
    tid h = linear(b, x, t->ffn, 0.02, part);
    h = node(b, t->activation, INPUTS(h), NO_ATTRS, "%s.gelu", name);
    snprintf(part, sizeof part, "%s.proj", name);
    return linear(b, h, t->width, out_std, part);
}

/* BERT layer, post-LN: LN(x + attn(x)), then LN(h + ffn(h)); separate Q, K, V projections. */
static tid bert_layer(builder *b, const transformer *t, tid x, int layer)
{
    char name[32], part[NAME_MAX_LEN];
    snprintf(name, sizeof name, "layer%d", layer);
    tid qkv[3];
    for (int i = 0; i < 3; i++) {
        snprintf(part, sizeof part, "%s.attn.%c", name, "qkv"[i]);
        qkv[i] = linear(b, x, t->width, 0.02, part);
    }
    snprintf(part, sizeof part, "%s.attn", name);
    tid context = attention(b, t, qkv[0], qkv[1], qkv[2], part);
    snprintf(part, sizeof part, "%s.attn.out", name);
    tid attn = linear(b, context, t->width, 0.02, part);
    tid sum = node(b, "add", INPUTS(x, attn), NO_ATTRS, "%s.attn.add", name);
    snprintf(part, sizeof part, "%s.attn.ln", name);
    tid h = layer_norm(b, sum, part);
    snprintf(part, sizeof part, "%s.ffn", name);
    tid ffn = feed_forward(b, t, h, 0.02, part);
    sum = node(b, "add", INPUTS(h, ffn), NO_ATTRS, "%s.ffn.add", name);
    snprintf(part, sizeof part, "%s.ffn.ln", name);
    return layer_norm(b, sum, part);
}

/* GPT-2 block, pre-LN: x + attn(ln_1(x)), then + mlp(ln_2(.)); one c_attn for Q, K, V. */
static tid gpt2_block(builder *b, const transformer *t, tid x, int layer)
{
    char name[32], part[NAME_MAX_LEN];
    double residual_std = 0.02 / sqrt(2.0 * (double)t->layers);
    snprintf(name, sizeof name, "h%d", layer);
    snprintf(part, sizeof part, "%s.ln_1", name);
    tid h = layer_norm(b, x, part);
    snprintf(part, sizeof part, "%s.attn.c_attn", name);
    tid qkv = linear(b, h, 3 * t->width, 0.02, part);
    tid parts[3];
    for (int i = 0; i < 3; i++)
        parts[i] = node(b, "slice", INPUTS(qkv),
                        ATTRS(attr_int("axis", 1), attr_int("start", i * t->width),
                              attr_int("end", (i + 1) * t->width)),
                        "%s.attn.%c", name, "qkv"[i]);
    snprintf(part, sizeof part, "%s.attn", name);
    tid context = attention(b, t, parts[0], parts[1], parts[2], part);
    snprintf(part, sizeof part, "%s.attn.c_proj", name);
    tid attn = linear(b, context, t->width, residual_std, part);
    tid sum = node(b, "add", INPUTS(x, attn), NO_ATTRS, "%s.attn.add", name);
    snprintf(part, sizeof part, "%s.ln_2", name);
    h = layer_norm(b, sum, part);
    snprintf(part, sizeof part, "%s.mlp", name);
    tid mlp = feed_forward(b, t, h, residual_std, part);
    return node(b, "add", INPUTS(sum, mlp), NO_ATTRS, "%s.mlp.add", name);
}

/* Input: the embeddings already summed (token + position [+ segment]), [batch*seq, width]. */
static void build_bert(builder *b, int64_t batch, int64_t seq, int64_t layers)
{
    transformer t = {batch, seq, 768, 12, 3072, layers, false, "gelu_erf"};
    tid x = input(b, "embeddings", DIMS(batch * seq, t.width));
    tid h = layer_norm(b, x, "embeddings.ln");
    for (int layer = 0; layer < t.layers; layer++)
        h = bert_layer(b, &t, h, layer);
    if (b->status == CLRUN_OK)
        failed(b, clrun_graph_mark_output(b->graph, h), "output");
}

static void build_gpt2(builder *b, int64_t batch, int64_t seq, int64_t layers, bool lm_head)
{
    transformer t = {batch, seq, 768, 12, 3072, layers, true, "gelu"};
    tid x = input(b, "embeddings", DIMS(batch * seq, t.width));
    tid h = x;
    for (int layer = 0; layer < t.layers; layer++)
        h = gpt2_block(b, &t, h, layer);
    h = layer_norm(b, h, "ln_f");
    if (lm_head) {
        /* Tied to the token embedding wte [vocab, width]: logits = h wte^T. */
        tid wte = constant(b, CLRUN_FILL_NORMAL, 0.02, DIMS(50257, t.width), "wte");
        h = node(b, "matmul", INPUTS(h, wte), ATTRS(attr_int("transpose_b", 1)), "logits");
    }
    if (b->status == CLRUN_OK)
        failed(b, clrun_graph_mark_output(b->graph, h), "output");
}

/* ---- entry ---- */

int gen_model_default_seq(const char *model)
{
    if (model && strcmp(model, "bert-base") == 0)
        return 128;
    if (model && strcmp(model, "gpt2") == 0)
        return 1024;
    return 0;
}

static bool known_model(const char *model)
{
    for (int i = 0; gen_model_names[i]; i++)
        if (strcmp(model, gen_model_names[i]) == 0)
            return true;
    return false;
}

clrun_status gen_model(const char *model, const gen_model_options *options, clrun_graph **out,
                       char *err, size_t errlen)
{
    *out = NULL;
    if (!model || !known_model(model)) {
        snprintf(err, errlen, "unknown model '%s' (resnet50, mobilenetv2, bert-base, gpt2)",
                 model ? model : "(null)");
        return CLRUN_ERROR_INVALID_ARGUMENT;
    }
    int64_t seq = options->seq > 0 ? options->seq : gen_model_default_seq(model);
    if (options->batch < 1 || seq < 0) {
        snprintf(err, errlen, "batch and sequence must be at least 1");
        return CLRUN_ERROR_INVALID_ARGUMENT;
    }
    if (options->layers < 0) {
        snprintf(err, errlen, "layers must be at least 1 (0 for the model's 12)");
        return CLRUN_ERROR_INVALID_ARGUMENT;
    }
    int64_t layers = options->layers > 0 ? options->layers : 12;
    char graph_name[64];
    snprintf(graph_name, sizeof graph_name, "%s_b%d", model, options->batch);
    for (char *c = graph_name; *c; c++)
        if (*c == '-')
            *c = '_';
    builder b = {NULL, CLRUN_OK, "", 1};
    clrun_status status = clrun_graph_create(graph_name, &b.graph);
    if (status != CLRUN_OK) {
        snprintf(err, errlen, "%s", clrun_last_error(NULL));
        return status;
    }
    if (strcmp(model, "resnet50") == 0)
        build_resnet50(&b, options->batch);
    else if (strcmp(model, "mobilenetv2") == 0)
        build_mobilenetv2(&b, options->batch);
    else if (strcmp(model, "bert-base") == 0)
        build_bert(&b, options->batch, seq, layers);
    else
        build_gpt2(&b, options->batch, seq, layers, options->lm_head);
    if (b.status == CLRUN_OK && clrun_graph_validate(b.graph) != CLRUN_OK)
        failed(&b, CLRUN_ERROR_INVALID_GRAPH, "validation");
    if (b.status != CLRUN_OK) {
        snprintf(err, errlen, "%s", b.err);
        clrun_graph_destroy(b.graph);
        return b.status;
    }
    *out = b.graph;
    return CLRUN_OK;
}
