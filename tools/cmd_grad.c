/* clrun grad: the gradient of a model's scalar loss as a graph of its own (.graph text): the
 * model's nodes, then the backward pass; outputs the loss and each gradient (grad.NAME). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clrun/clrun.h>

#include "cli.h"
#include "model_io.h"

static void help(void)
{
    printf("usage: clrun grad MODEL --loss TENSOR [--wrt A,B,...] [--out OUT.graph]\n"
           "                  [--dim NAME=V] [--shape INPUT=AxB]\n\n"
           "Writes the gradient of MODEL's scalar loss TENSOR (one float element) as a .graph\n"
           "file (standard output without --out): the model's nodes, then the backward pass;\n"
           "its outputs are the loss, then the gradient of each --wrt tensor (an input or a\n"
           "weight; default: every f32 weight the loss depends on), named grad.NAME. An op on\n"
           "the loss' path without a gradient rule is refused by name (docs/training.md).\n");
    clrun_cli_io_help(false);
}

int clrun_cli_grad(int argc, char **argv)
{
    if (clrun_cli_wants_help(argc, argv)) {
        help();
        return 0;
    }
    const char *path = NULL, *loss = NULL, *wrt_text = NULL, *out_path = NULL;
    clrun_cli_io io;
    memset(&io, 0, sizeof io);
    for (int i = 1; i < argc; i++) {
        bool v = i + 1 < argc;
        int taken;
        if (strcmp(argv[i], "--loss") == 0 && v) {
            loss = argv[++i];
        } else if (strcmp(argv[i], "--wrt") == 0 && v) {
            wrt_text = argv[++i];
        } else if (strcmp(argv[i], "--out") == 0 && v) {
            out_path = argv[++i];
        } else if ((taken = clrun_cli_io_option("grad", argc, argv, &i, &io, false)) != 0) {
            if (taken == 2)
                return 2;
        } else if (argv[i][0] == '-') {
            return clrun_cli_usage_error("grad", "unknown option or missing value: '%s'", argv[i]);
        } else if (path == NULL) {
            path = argv[i];
        } else {
            return clrun_cli_usage_error("grad", "one model only ('%s' is extra)", argv[i]);
        }
    }
    if (path == NULL)
        return clrun_cli_usage_error("grad", "no model given");
    if (loss == NULL)
        return clrun_cli_usage_error("grad", "no --loss given (the model's scalar loss tensor)");
    if (wrt_text && wrt_text[0] == '\0') /* strtok would find no name: every weight, silently */
        return clrun_cli_usage_error("grad", "--wrt names no tensor (leave it out for every weight)");
    clrun_graph *g = NULL, *gg = NULL;
    clrun_tensor_id *wrt = NULL;
    int32_t wrt_count = 0, *unused = NULL, unused_count = 0;
    char *copy = NULL;
    int rc = clrun_cli_load_model("grad", path, &io, &g);
    if (rc != 0)
        goto done;
    clrun_tensor_id loss_id = clrun_graph_find(g, loss);
    if (loss_id < 0) {
        fprintf(stderr, "clrun grad: %s has no tensor '%s'\n", path, loss);
        rc = 2;
        goto done;
    }
    if (wrt_text) {
        copy = strdup(wrt_text);
        wrt = calloc(strlen(wrt_text) + 1, sizeof *wrt);
        if (copy == NULL || wrt == NULL) {
            fprintf(stderr, "clrun grad: out of host memory\n");
            rc = 1;
            goto done;
        }
        for (char *p = strtok(copy, ","); p; p = strtok(NULL, ",")) {
            clrun_tensor_id id = clrun_graph_find(g, p);
            if (id < 0) {
                fprintf(stderr, "clrun grad: %s has no tensor '%s' (--wrt)\n", path, p);
                rc = 2;
                goto done;
            }
            wrt[wrt_count++] = id;
        }
    }
    char err[1024];
    clrun_status s = clrun_graph_gradient(g, loss_id, wrt, wrt_count, &gg, &unused, &unused_count,
                                          err, sizeof err);
    if (s != CLRUN_OK) {
        fprintf(stderr, "clrun grad: %s\n", err);
        rc = s == CLRUN_ERROR_OUT_OF_HOST_MEMORY ? 1 : 2;
        goto done;
    }
    const clrun_tensor_id *outs;
    int32_t n = clrun_graph_outputs(gg, &outs);
    for (int32_t k = 0; k < unused_count; k++) {
        const char *name = clrun_graph_tensor_name(gg, outs[1 + unused[k]]);
        fprintf(stderr, "clrun grad: warning: the loss does not depend on %s: its gradient is "
                "zeros\n", strncmp(name, "grad.", 5) == 0 ? name + 5 : name);
    }
    FILE *out = out_path ? fopen(out_path, "w") : stdout;
    int why = out ? 0 : errno;
    bool ok = out && clrun_graph_write(gg, out) == CLRUN_OK;
    if (out_path && out && fclose(out) != 0) {
        ok = false;
        why = errno;
    }
    if (!ok) {
        fprintf(stderr, "clrun grad: %s: cannot write the graph%s%s\n", out_path ? out_path : "stdout",
                why ? ": " : "", why ? strerror(why) : "");
        rc = 1;
        goto done;
    }
    fprintf(stderr, "clrun grad: %d gradients of %s, %d nodes (the model's %d)\n", n - 1, loss,
            clrun_graph_node_count(gg), clrun_graph_node_count(g));
done:
    free(unused);
    free(wrt);
    free(copy);
    clrun_graph_destroy(gg);
    clrun_graph_destroy(g);
    clrun_cli_io_free(&io);
    return rc;
}
