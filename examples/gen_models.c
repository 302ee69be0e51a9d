/* gen_models: writes a model graph in the .graph text format.
 *
 *   gen_models [--seq N] [--no-lm-head] MODEL BATCH [OUT.graph]
 *
 * MODEL is resnet50, mobilenetv2 (224x224 images), bert-base (sequence 128) or gpt2 (GPT-2
 * small, sequence 1024). The transformers take their embeddings already summed as the graph
 * input, [BATCH*SEQ, 768]; --seq changes the sequence. Without OUT the graph goes to stdout.
 * 'make examples' writes every model at batch 1 and 8 into examples/generated/. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models.h"

static int usage(FILE *to)
{
    fprintf(to, "usage: gen_models [--seq N] [--no-lm-head] MODEL BATCH [OUT.graph]\n"
                "models:");
    for (int i = 0; gen_model_names[i]; i++)
        fprintf(to, " %s", gen_model_names[i]);
    fprintf(to, "\n");
    return to == stdout ? 0 : 2;
}

/* A positive int from text, or 0. */
static int positive(const char *text)
{
    char *end = NULL;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno || end == text || *end || value < 1 || value > 1 << 20)
        return 0;
    return (int)value;
}

int main(int argc, char **argv)
{
    gen_model_options options = {0, 0, true, 0};
    const char *args[3] = {NULL, NULL, NULL};
    int arg_count = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return usage(stdout);
        if (strcmp(argv[i], "--seq") == 0 && i + 1 < argc) {
            if (!(options.seq = positive(argv[++i]))) {
                fprintf(stderr, "gen_models: --seq needs a positive integer, not '%s'\n", argv[i]);
                return 2;
            }
        } else if (strcmp(argv[i], "--no-lm-head") == 0) {
            options.lm_head = false;
        } else if (argv[i][0] == '-' || arg_count == 3) {
            return usage(stderr);
        } else {
            args[arg_count++] = argv[i];
        }
    }
    if (arg_count < 2)
        return usage(stderr);
    if (!(options.batch = positive(args[1]))) {
        fprintf(stderr, "gen_models: BATCH must be a positive integer, not '%s'\n", args[1]);
        return 2;
    }
    clrun_graph *graph = NULL;
    char err[1024];
    if (gen_model(args[0], &options, &graph, err, sizeof err) != CLRUN_OK) {
        fprintf(stderr, "gen_models: %s\n", err);
        return 1;
    }
    FILE *out = args[2] ? fopen(args[2], "w") : stdout;
    if (!out) {
        fprintf(stderr, "gen_models: cannot write %s: %s\n", args[2], strerror(errno));
        clrun_graph_destroy(graph);
        return 1;
    }
    clrun_status status = clrun_graph_write(graph, out);
    if (args[2] && fclose(out) != 0)
        status = CLRUN_ERROR_IO;
    clrun_graph_destroy(graph);
    if (status != CLRUN_OK) {
        fprintf(stderr, "gen_models: writing %s failed\n", args[2] ? args[2] : "stdout");
        return 1;
    }
    return 0;
}
