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
#ifndef CLRUN_BENCH_MODELS_H
#define CLRUN_BENCH_MODELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <clrun/clrun.h>
#include <clrun/train.h>

/* bench_train's models, full and tiny (a few ms a step), in its order. */
#define BENCH_TRAIN_MODELS 3
extern const char *const bench_train_configs[BENCH_TRAIN_MODELS];
extern const char *const bench_train_tiny_configs[BENCH_TRAIN_MODELS];

/* issue 27's models (bench_remat): a 12-layer BERT-base-style encoder and ResNet-50. */
#define BENCH_REMAT_MODELS 2
extern const char *const bench_remat_configs[BENCH_REMAT_MODELS];
extern const char *const bench_remat_tiny_configs[BENCH_REMAT_MODELS];

/* The config of the model called `name` among all of the above (tiny or full); NULL if none. */
const char *bench_model_config(const char *name, bool tiny);

/* The value of `key` in a config; exits the program (status 2) when it has none. */
int64_t bench_config_get(const char *config, const char *key);

/* The model of `config`, its output "logits"; NULL and a message on failure. */
clrun_graph *bench_build_model(const char *config, char *err, size_t errlen);

/* A step's feeds, in clrun_train_feed_info's order. */
typedef struct bench_feeds {
    int32_t count;
    void *data[8];
    clrun_tensor_type type[8];
    const char *name[8];
} bench_feeds;

/* The batch: floats uniform in [-1, 1), token ids in [0, vocab), labels in [0, classes) (the
 * vocabulary for bert), from fixed seeds. */
bool bench_make_feeds(clrun_train *t, const char *config, bench_feeds *f, char *err, size_t errlen);
void bench_feeds_free(bench_feeds *f);

#endif
