/* Model graphs with their true layer shapes, built through the clrun graph API: ResNet-50,
 * MobileNetV2, BERT-base and GPT-2 small. Weights are seeded fills, never data. Used by
 * examples/gen_models and by tests/test_graph (which checks every model builds, validates and
 * reads back from its text). */
#ifndef CLRUN_EXAMPLES_MODELS_H
#define CLRUN_EXAMPLES_MODELS_H

#include <clrun/graph.h>

typedef struct gen_model_options {
    int batch;    /* images or sequences per run, >= 1 */
    int seq;      /* tokens per sequence (bert-base, gpt2); 0 picks the model's default */
    bool lm_head; /* gpt2: end with the 768 x 50257 language-model head (tied to wte) */
    int layers;   /* bert-base, gpt2: transformer layers; 0 gives the model's 12 (a test's
                   * shorter model has the same layer, fewer times) */
} gen_model_options;

/* The models gen_model knows, NULL-terminated: "resnet50", "mobilenetv2", "bert-base", "gpt2". */
extern const char *const gen_model_names[];

/* The default sequence of a model (128 for bert-base, 1024 for gpt2), 0 for image models. */
int gen_model_default_seq(const char *model);

/* Builds `model` into *out (validated). On failure *out is NULL and err says why. */
clrun_status gen_model(const char *model, const gen_model_options *options, clrun_graph **out,
                       char *err, size_t errlen);

#endif
