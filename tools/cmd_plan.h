/* clrun plan: the static memory planner on the command line. The reporting half is separate so
 * that other front ends (the graph form, `clrun plan FILE.graph`) can feed it their buffers. */
#ifndef CLRUN_TOOLS_CMD_PLAN_H
#define CLRUN_TOOLS_CMD_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <clrun/plan.h>

/* What to do with a list of buffers once it is read. */
struct clrun_cli_plan_args {
    const char *source;         /* where the buffers came from, for reports ("model.csv") */
    bool json;                  /* one JSON object on stdout instead of the human report */
    const char *out_path;       /* --out: the buffers with their offsets as CSV, or NULL */
    const char *svg_path;       /* --svg: the picture, or NULL */
    clrun_plan_options options; /* time limit, alignment, seed */
    const uint64_t *ids;        /* id of each buffer for --out, or NULL for 0..n-1 */
    const char *const *names;   /* name of each buffer for --svg, or NULL */
    /* a model's (FILE.graph, MODEL.onnx): the graph that runs on device */
    char device[256];           /* the device's name; "" for --csv and --gen */
    bool alignment_given;       /* --alignment was given */
    bool as_written;            /* --as-written: the graph as written, no device */
    bool device_alignment;      /* the alignment is the device's (no --alignment) */
    int32_t graph_nodes;        /* nodes of the graph as loaded */
    int32_t kernels;            /* kernels that run after folding and fusion */
    int32_t fused_groups;       /* fused groups among them */
    int32_t folded_nodes;       /* nodes folded at load */
};

/* `clrun plan ...`: returns the exit status (0 ok, 1 failure, 2 usage or malformed input). */
int clrun_cli_plan(int argc, char **argv);

/* Plans the buffers and reports as args says: the human report or JSON on stdout, and the
 * --out and --svg files. Returns 0, 2 when the instance is invalid (message on stderr), or 1
 * when planning or writing a file fails. */
int clrun_cli_plan_report(const clrun_plan_buffer *buffers, size_t n,
                          const struct clrun_cli_plan_args *args);

#endif
