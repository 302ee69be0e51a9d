/* clrun plan: plans a list of buffer lifetimes ahead of time and reports how close to the lower
 * bound the plan is. Input from a lifetime CSV (--csv) or a generator (--gen), output as a
 * human report or JSON, plus an optional planned CSV and SVG picture. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clrun/clrun.h>

#include "cli.h"
#include "cmd_plan.h"
#include "model_bind.h"
#include "model_io.h"
#include <clrun/plan_gen.h>

/* Generated instances are capped so that a typo cannot ask for terabytes. */
#define PLAN_GEN_MAX (UINT64_C(1) << 26)

static void print_help(void)
{
    printf("usage: clrun plan (FILE.graph | MODEL.onnx [--dim NAME=V] [--shape IN=AxB] [--const NAME=V]) [options]\n"
           "       clrun plan --csv FILE.csv [options]\n"
           "       clrun plan --gen FAMILY:N[:SEED] [options]\n"
           "       clrun plan MODEL --budget SIZE [--loss KIND:TENSOR [clrun train's options]]\n\n"
           "Lays out buffers whose lifetimes are known ahead of time in one arena, so that no two\n"
           "buffers alive at once overlap, and reports the arena's peak beside the lower bound\n"
           "(the most bytes alive at any one moment). The plan is proven optimal when the peak\n"
           "equals the bound or an exhaustive search finished.\n\n"
           "  FILE.graph, MODEL.onnx  a model: the buffers of the graph that runs, as an executor\n"
           "                     on the default device schedules them (after folding and fusion,\n"
           "                     every node's scratch included, inputs from step 0, in-place reuse\n"
           "                     applied, constants left out), at the device's alignment; what\n"
           "                     `clrun run --allocator planned` lays out. CLRUN_* as for run\n"
           "  --csv FILE         buffers as CSV: header id,lower,upper,size, one buffer per line,\n"
           "                     alive over [lower, upper), size in bytes\n"
           "  --gen FAMILY:N[:SEED]  generated buffers: random, perfect, balanced, unet, chain\n"
           "                     or wide\n"
           "  --as-written       a model's graph as written, without a device: no folding, no\n"
           "                     fusion, no scratch, alignment 1 unless --alignment says (what\n"
           "                     runs may need more)\n"
           "  --json             one JSON object instead of the report\n"
           "  --out FILE         write the buffers with an offset column (CSV)\n"
           "  --svg FILE         write the plan as a picture\n"
           "  --time-limit S     search time in seconds (default 1; 0: greedy only)\n"
           "  --alignment BYTES  offsets are multiples of it (power of two; K/M/G suffixes;\n"
           "                     default: the device's for a model, 1 otherwise)\n"
           "  --seed N           seed of the randomised search (default 1)\n"
           "  --step-limit N     stop the searches after N steps: the same plan on any machine\n"
           "                     (0, the default: no limit but the time)\n"
           "  --capacity BYTES   does a plan fit in BYTES (K/M/G suffixes)? The report ends with\n"
           "                     the answer: a plan that fits, 'infeasible: proven' (no plan can:\n"
           "                     the lower bound or the complete search shows it), or 'unknown'\n"
           "                     (the time ran out first). Exit status 0 only when it fits;\n"
           "                     --out and --svg are written only then\n"
           "  --budget SIZE      a train step of MODEL under a memory budget (with --loss): the\n"
           "                     remat policy taken, the tensors recomputed, their bytes and\n"
           "                     extra arithmetic, what the trainer holds; nothing is trained\n"
           "                     (clrun train --memory-budget SIZE --plan). Without --loss: what\n"
           "                     an executor of MODEL holds as given and under the budget, and the\n"
           "                     tensors it recomputes to fit (clrun run --memory-budget); nothing\n"
           "                     runs\n");
    clrun_cli_io_help(false);
    clrun_cli_const_help();
}

/* ---- reporting ---- */

static int write_out_csv(const char *path, const clrun_plan_buffer *buffers, size_t n,
                         const uint64_t *offsets, const uint64_t *ids)
{
    FILE *out = fopen(path, "w");
    if (!out) {
        fprintf(stderr, "clrun plan: %s: %s\n", path, strerror(errno));
        return 1;
    }
    clrun_status st = CLRUN_OK;
    if (fputs("id,lower,upper,size,offset\n", out) < 0)
        st = CLRUN_ERROR_IO;
    for (size_t i = 0; i < n && st == CLRUN_OK; i++) {
        clrun_lifetime row = {.id = ids ? ids[i] : i, .lower = buffers[i].first,
                              .upper = buffers[i].last, .size = buffers[i].size,
                              .offset = offsets[i]};
        if (fprintf(out, "%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 "\n", row.id,
                    row.lower, row.upper, row.size, row.offset) < 0)
            st = CLRUN_ERROR_IO;
    }
    if (fclose(out) != 0 || st != CLRUN_OK) {
        fprintf(stderr, "clrun plan: %s: write failed\n", path);
        return 1;
    }
    return 0;
}

static int write_svg(const struct clrun_cli_plan_args *args, const clrun_plan_buffer *buffers,
                     size_t n, const uint64_t *offsets, const clrun_plan_result *r)
{
    FILE *out = fopen(args->svg_path, "w");
    if (!out) {
        fprintf(stderr, "clrun plan: %s: %s\n", args->svg_path, strerror(errno));
        return 1;
    }
    char title[512];
    snprintf(title, sizeof title, "clrun plan: %s (%s%s)", args->source, r->method,
             r->optimal ? ", optimal" : "");
    clrun_status st = clrun_plan_write_svg_named(out, buffers, args->names, n, offsets,
                                                 r->lower_bound_bytes, title);
    if (fclose(out) != 0 || st != CLRUN_OK) {
        fprintf(stderr, "clrun plan: %s: %s\n", args->svg_path, clrun_strerror(st ? st : CLRUN_ERROR_IO));
        return 1;
    }
    return 0;
}

static double ratio_of(const clrun_plan_result *r)
{
    return r->lower_bound_bytes ? (double)r->peak_bytes / (double)r->lower_bound_bytes : 1.0;
}

static void print_json(const struct clrun_cli_plan_args *args, size_t n, const clrun_plan_result *r)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "source", json_object_new_string(args->source));
    json_object_object_add(o, "buffers", json_object_new_int64((int64_t)n));
    json_object_object_add(o, "peak_bytes", json_object_new_int64((int64_t)(r->peak_bytes)));
    json_object_object_add(o, "lower_bound_bytes", json_object_new_int64((int64_t)(r->lower_bound_bytes)));
    json_object_object_add(o, "ratio", json_object_new_double(ratio_of(r)));
    json_object_object_add(o, "optimal", json_object_new_boolean(r->optimal));
    json_object_object_add(o, "method", json_object_new_string(r->method));
    json_object_object_add(o, "cut_short", json_object_new_boolean(r->cut_short));
    json_object_object_add(o, "planner_ms", json_object_new_double(r->planner_ms));
    json_object_object_add(o, "search_steps", json_object_new_int64((int64_t)(r->steps)));
    json_object_object_add(o, "alignment", json_object_new_int64((int64_t)(args->options.alignment ? args->options.alignment : 1)));
    json_object_object_add(o, "time_limit_s", json_object_new_double(args->options.time_limit_s));
    if (args->device[0]) {
        json_object *run = json_object_new_object();
        json_object_object_add(run, "device", json_object_new_string(args->device));
        json_object_object_add(run, "device_alignment", json_object_new_boolean(args->device_alignment));
        json_object_object_add(run, "graph_nodes", json_object_new_int(args->graph_nodes));
        json_object_object_add(run, "kernels", json_object_new_int(args->kernels));
        json_object_object_add(run, "fused_groups", json_object_new_int(args->fused_groups));
        json_object_object_add(run, "folded_nodes", json_object_new_int(args->folded_nodes));
        json_object_object_add(o, "runs_as", run);
    }
    if (args->options.capacity > 0) {
        json_object_object_add(o, "capacity_bytes", json_object_new_int64((int64_t)args->options.capacity));
        json_object_object_add(o, "verdict", json_object_new_string(clrun_plan_verdict_name(r->verdict)));
    }
    printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(o);
}

static void print_human(const struct clrun_cli_plan_args *args, size_t n, const clrun_plan_result *r)
{
    char peak[32], bound[32];
    clrun_format_bytes(r->peak_bytes, peak, sizeof peak);
    clrun_format_bytes(r->lower_bound_bytes, bound, sizeof bound);
    printf("plan of %s\n", args->source);
    printf("  buffers       %zu\n", n);
    printf("  peak          %s (%" PRIu64 " B)\n", peak, r->peak_bytes);
    printf("  lower bound   %s (%" PRIu64 " B)\n", bound, r->lower_bound_bytes);
    printf("  ratio         %.4f (peak / lower bound)\n", ratio_of(r));
    printf("  optimal       %s\n", r->optimal ? "yes (proven)" : "not proven");
    printf("  method        %s%s\n", r->method,
           r->cut_short ? " (the time limit cut the other constructions short)" : "");
    printf("  planner time  %.1f ms (%" PRIu64 " search steps, limit %g s)\n", r->planner_ms,
           r->steps, args->options.time_limit_s);
    if (args->device[0]) {
        printf("  runs as       %d kernels for %d nodes (%d fused groups, %d folded) on %s\n",
               args->kernels, args->graph_nodes, args->fused_groups, args->folded_nodes, args->device);
        printf("  alignment     %" PRIu64 " B%s\n", args->options.alignment,
               args->device_alignment ? " (the device's)" : "");
    }
    if (args->options.capacity > 0) {
        char capacity[32];
        clrun_format_bytes(args->options.capacity, capacity, sizeof capacity);
        printf("  capacity      %s (%" PRIu64 " B): %s\n", capacity, args->options.capacity,
               r->verdict == CLRUN_PLAN_FITS         ? "the plan fits"
               : r->verdict == CLRUN_PLAN_INFEASIBLE ? "infeasible: proven"
                                                     : "unknown (no plan fits yet, nor a proof "
                                                       "that none does)");
    }
}

int clrun_cli_plan_report(const clrun_plan_buffer *buffers, size_t n,
                          const struct clrun_cli_plan_args *args)
{
    uint64_t *offsets = malloc((n ? n : 1) * sizeof *offsets);
    if (!offsets) {
        fprintf(stderr, "clrun plan: %s\n", clrun_strerror(CLRUN_ERROR_OUT_OF_HOST_MEMORY));
        return 1;
    }
    clrun_plan_result r;
    clrun_status st = clrun_plan_solve(buffers, n, &args->options, offsets, &r);
    int rc = 0;
    if (st == CLRUN_ERROR_INVALID_ARGUMENT || st == CLRUN_ERROR_INVALID_ALIGNMENT) {
        /* The CSV reader has checked each buffer, so what is left is the total overflowing. */
        fprintf(stderr, "clrun plan: %s: %s (sizes whose aligned total exceeds 64 bits?)\n",
                args->source, clrun_strerror(st));
        rc = 2;
    } else if (st != CLRUN_OK) {
        fprintf(stderr, "clrun plan: %s: %s\n", args->source, clrun_strerror(st));
        rc = 1;
    } else {
        if (args->json)
            print_json(args, n, &r);
        else
            print_human(args, n, &r);
        bool fits = r.verdict == CLRUN_PLAN_FITS;
        if (!fits) {
            rc = 1;
            if (args->out_path || args->svg_path)
                fprintf(stderr, "clrun plan: %s: no plan within the capacity: --out and --svg not "
                                "written\n", args->source);
        }
        if (fits && args->out_path && write_out_csv(args->out_path, buffers, n, offsets, args->ids) != 0)
            rc = 1;
        if (fits && args->svg_path && write_svg(args, buffers, n, offsets, &r) != 0)
            rc = 1;
    }
    free(offsets);
    return rc;
}

/* ---- input ---- */

/* Reads the CSV into buffers and ids; returns an exit status. */
static int load_csv(const char *path, clrun_plan_buffer **buffers, uint64_t **ids, size_t *n)
{
    FILE *in = fopen(path, "r");
    if (!in) {
        fprintf(stderr, "clrun plan: %s: %s\n", path, strerror(errno));
        return errno == ENOENT ? 2 : 1;
    }
    clrun_lifetimes list = {0};
    char err[512];
    clrun_status st = clrun_lifetimes_read(in, path, &list, err, sizeof err);
    fclose(in);
    if (st != CLRUN_OK) {
        fprintf(stderr, "%s\n", err);
        return st == CLRUN_ERROR_PARSE ? 2 : 1;
    }
    size_t count = list.count;
    *buffers = malloc((count ? count : 1) * sizeof **buffers);
    *ids = malloc((count ? count : 1) * sizeof **ids);
    if (!*buffers || !*ids) {
        clrun_lifetimes_free(&list);
        fprintf(stderr, "clrun plan: %s\n", clrun_strerror(CLRUN_ERROR_OUT_OF_HOST_MEMORY));
        return 1;
    }
    for (size_t i = 0; i < count; i++) {
        const clrun_lifetime *row = &list.items[i];
        (*buffers)[i] = (clrun_plan_buffer){.size = row->size, .first = row->lower, .last = row->upper};
        (*ids)[i] = row->id;
    }
    *n = count;
    clrun_lifetimes_free(&list);
    return 0;
}

/* FAMILY:N[:SEED] into buffers; returns an exit status. */
static int load_generated(const char *spec, clrun_plan_buffer **buffers, size_t *n)
{
    char family_name[32];
    const char *colon = strchr(spec, ':');
    size_t len = colon ? (size_t)(colon - spec) : 0;
    if (!colon || len == 0 || len >= sizeof family_name)
        return clrun_cli_usage_error("plan", "--gen wants FAMILY:N[:SEED], not '%s'", spec);
    memcpy(family_name, spec, len);
    family_name[len] = '\0';
    int family = -1;
    for (int f = 0; f < CLRUN_PLAN_GEN_COUNT; f++)
        if (strcmp(family_name, clrun_plan_gen_family_name((clrun_plan_gen_family)f)) == 0)
            family = f;
    if (family < 0)
        return clrun_cli_usage_error("plan", "unknown family '%s' (random, perfect, balanced, unet, chain, wide)",
                                     family_name);
    char count_text[32];
    const char *seed_text = strchr(colon + 1, ':');
    size_t count_len = seed_text ? (size_t)(seed_text - colon - 1) : strlen(colon + 1);
    uint64_t count, seed = 1;
    if (count_len >= sizeof count_text)
        return clrun_cli_usage_error("plan", "--gen: bad count in '%s'", spec);
    memcpy(count_text, colon + 1, count_len);
    count_text[count_len] = '\0';
    if (!clrun_cli_parse_u64(count_text, &count) || count > PLAN_GEN_MAX ||
        (seed_text && !clrun_cli_parse_u64(seed_text + 1, &seed)))
        return clrun_cli_usage_error("plan", "--gen: bad count or seed in '%s'", spec);
    *buffers = malloc((count ? count : 1) * sizeof **buffers);
    if (!*buffers) {
        fprintf(stderr, "clrun plan: %s\n", clrun_strerror(CLRUN_ERROR_OUT_OF_HOST_MEMORY));
        return 1;
    }
    clrun_status st = clrun_plan_gen((clrun_plan_gen_family)family, (size_t)count, seed, *buffers, NULL);
    if (st != CLRUN_OK) {
        fprintf(stderr, "clrun plan: %s\n", clrun_strerror(st));
        return 1;
    }
    *n = (size_t)count;
    return 0;
}

/* A model's buffers as a run lays them out: an executor for the default device (CLRUN_* as for
 * `clrun run`) folds and fuses the graph, its schedule (last uses, in-place reuse, every node's
 * scratch) turned into lifetimes; offsets at the device's alignment unless --alignment says. */
static int load_graph(const char *path, clrun_cli_io *io, const clrun_cli_consts *consts,
                      struct clrun_cli_plan_args *args,
                      clrun_plan_buffer **buffers, size_t *n, char ***names)
{
    clrun_graph *graph = NULL;
    int rc = clrun_cli_load_bound("plan", path, io, consts, &graph);
    if (rc)
        return rc;
    if (args->as_written) { /* no device: the graph as written, unfolded, unfused, no scratch */
        char err[2048];
        clrun_status status = clrun_graph_plan_buffers(graph, true, buffers, n, names, err, sizeof err);
        clrun_graph_destroy(graph);
        if (status != CLRUN_OK) {
            fprintf(stderr, "clrun plan: %s: %s\n", path, err);
            return 1;
        }
        return 0;
    }
    clrun_context *ctx = NULL;
    clrun_exec *exec = NULL;
    clrun_exec_options options;
    clrun_exec_options_init(&options);
    options.mode = CLRUN_EXEC_POOLED; /* the schedule planned mode lays out, without planning it */
    clrun_status status = clrun_context_create(NULL, &ctx);
    if (status == CLRUN_OK)
        status = clrun_exec_create(ctx, graph, &options, &exec);
    if (status == CLRUN_OK)
        status = clrun_exec_plan_buffers(exec, true, buffers, n, names);
    if (status == CLRUN_OK) {
        clrun_exec_stats stats;
        clrun_exec_stats_get(exec, &stats);
        args->kernels = stats.kernels;
        args->graph_nodes = stats.graph_nodes;
        args->fused_groups = stats.fused_groups;
        args->folded_nodes = stats.folded_nodes;
        if (!args->alignment_given) {
            args->options.alignment = clrun_context_device(ctx)->base_addr_align;
            args->device_alignment = true;
        }
        snprintf(args->device, sizeof args->device, "%s", clrun_context_device(ctx)->name);
    } else {
        fprintf(stderr, "clrun plan: %s: %s\n", path, clrun_last_error(ctx));
        rc = 1;
    }
    clrun_exec_destroy(exec);
    clrun_context_destroy(ctx);
    clrun_graph_destroy(graph);
    return rc;
}

/* ---- arguments ---- */

typedef struct plan_cli {
    struct clrun_cli_plan_args args;
    const char *csv;  /* --csv */
    const char *gen;  /* --gen */
    const char *graph; /* FILE.graph or MODEL.onnx */
    clrun_cli_io io;   /* --dim, --shape */
    clrun_cli_consts consts; /* --const */
} plan_cli;

/* The value of option argv[*i], advancing past it; NULL (after a usage message) when missing. */
static const char *option_value(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) {
        clrun_cli_usage_error("plan", "%s needs a value", argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

/* Returns -1 when all is well, else the exit status. */
static int parse_arguments(int argc, char **argv, plan_cli *cli)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int taken;
        if (strcmp(a, "--json") == 0) {
            cli->args.json = true;
        } else if (strcmp(a, "--as-written") == 0) {
            cli->args.as_written = true;
        } else if (strcmp(a, "--csv") == 0 || strcmp(a, "--gen") == 0 || strcmp(a, "--out") == 0 ||
                   strcmp(a, "--svg") == 0) {
            if (!(v = option_value(argc, argv, &i)))
                return 2;
            const char **slot = a[2] == 'c' ? &cli->csv : a[2] == 'g' ? &cli->gen
                              : a[2] == 'o' ? &cli->args.out_path : &cli->args.svg_path;
            *slot = v;
        } else if (strcmp(a, "--time-limit") == 0) {
            if (!(v = option_value(argc, argv, &i)))
                return 2;
            char *end;
            double s = strtod(v, &end);
            if (end == v || *end || !isfinite(s) || s < 0)
                return clrun_cli_usage_error("plan", "--time-limit wants seconds >= 0, not '%s'", v);
            cli->args.options.time_limit_s = s;
        } else if (strcmp(a, "--alignment") == 0) {
            if (!(v = option_value(argc, argv, &i)))
                return 2;
            uint64_t align;
            if (!clrun_parse_size(v, &align) || align == 0 || (align & (align - 1)))
                return clrun_cli_usage_error("plan", "--alignment wants a power of two, not '%s'", v);
            cli->args.options.alignment = align;
            cli->args.alignment_given = true;
        } else if (strcmp(a, "--capacity") == 0) {
            if (!(v = option_value(argc, argv, &i)))
                return 2;
            uint64_t capacity;
            if (!clrun_parse_size(v, &capacity) || capacity == 0)
                return clrun_cli_usage_error("plan", "--capacity wants a size in bytes > 0, not '%s'", v);
            cli->args.options.capacity = capacity;
        } else if (strcmp(a, "--step-limit") == 0) {
            if (!(v = option_value(argc, argv, &i)))
                return 2;
            if (!clrun_cli_parse_u64(v, &cli->args.options.step_limit))
                return clrun_cli_usage_error("plan", "--step-limit wants an unsigned integer, not '%s'", v);
        } else if (strcmp(a, "--seed") == 0) {
            if (!(v = option_value(argc, argv, &i)))
                return 2;
            if (!clrun_cli_parse_u64(v, &cli->args.options.seed))
                return clrun_cli_usage_error("plan", "--seed wants an unsigned integer, not '%s'", v);
        } else if ((taken = clrun_cli_io_option("plan", argc, argv, &i, &cli->io, false)) != 0) {
            if (taken == 2)
                return 2;
        } else if ((taken = clrun_cli_const_option("plan", argc, argv, &i, &cli->consts)) != 0) {
            if (taken < 0)
                return -taken;
        } else if (a[0] != '-' && cli->graph == NULL) {
            cli->graph = a;
        } else {
            return clrun_cli_usage_error("plan", "unknown argument '%s'", a);
        }
    }
    if ((cli->csv != NULL) + (cli->gen != NULL) + (cli->graph != NULL) != 1)
        return clrun_cli_usage_error("plan", "give exactly one of FILE.graph, --csv FILE and --gen FAMILY:N");
    return -1;
}

/* What an executor of graph holds under `budget` (UINT64_MAX: as given): its statistics and the
 * tensors it recomputes, as one line. */
static clrun_status held_under(clrun_context *ctx, const clrun_graph *graph, uint64_t budget,
                               clrun_exec_stats *stats, char *recomputed, size_t size,
                               char *offloaded, size_t offloaded_size)
{
    clrun_exec_options options;
    clrun_exec_options_init(&options);
    options.memory_budget = budget;
    clrun_exec *exec = NULL;
    clrun_status status = clrun_exec_create(ctx, graph, &options, &exec);
    if (status == CLRUN_OK)
        status = clrun_exec_stats_get(exec, stats);
    size_t at = 0;
    recomputed[0] = '\0';
    const char *const *names = NULL;
    int32_t n = status == CLRUN_OK ? clrun_exec_recomputed(exec, &names) : 0;
    for (int32_t i = 0; i < n && at < size; i++)
        at += (size_t)snprintf(recomputed + at, size - at, "%s%s", i ? ", " : "", names[i]);
    at = 0;
    offloaded[0] = '\0';
    n = status == CLRUN_OK ? clrun_exec_offloaded(exec, &names) : 0;
    for (int32_t i = 0; i < n && at < offloaded_size; i++)
        at += (size_t)snprintf(offloaded + at, offloaded_size - at, "%s%s", i ? ", " : "", names[i]);
    clrun_exec_destroy(exec);
    return status;
}

/* `clrun plan MODEL --budget SIZE` (no --loss): what an executor of the model holds under a
 * memory budget, and what it recomputes to fit, without running it. */
static int plan_inference_budget(int argc, char **argv)
{
    clrun_cli_io io = {0};
    clrun_cli_consts consts = {0};
    const char *path = NULL;
    uint64_t budget = 0;
    int rc = -1;
    for (int i = 1; i < argc && rc < 0; i++) {
        int taken;
        if (strcmp(argv[i], "--budget") == 0) {
            if (i + 1 >= argc || !clrun_parse_size(argv[++i], &budget) || budget == 0)
                rc = clrun_cli_usage_error("plan", "--budget wants a size in bytes > 0 (K/M/G)");
        } else if ((taken = clrun_cli_io_option("plan", argc, argv, &i, &io, false)) != 0) {
            if (taken == 2)
                rc = 2;
        } else if ((taken = clrun_cli_const_option("plan", argc, argv, &i, &consts)) != 0) {
            if (taken < 0)
                rc = -taken;
        } else if (argv[i][0] != '-' && path == NULL) {
            path = argv[i];
        } else {
            rc = clrun_cli_usage_error("plan", "--budget without --loss takes a model, --dim, "
                                       "--shape and --const, not '%s'", argv[i]);
        }
    }
    if (rc < 0 && path == NULL)
        rc = clrun_cli_usage_error("plan", "--budget: give the model");
    clrun_graph *graph = NULL;
    if (rc < 0)
        rc = clrun_cli_load_bound("plan", path, &io, &consts, &graph);
    clrun_cli_consts_free(&consts);
    if (rc > 0 || (rc == 0 && graph == NULL))
        return rc ? rc : 1;
    clrun_context *ctx = NULL;
    clrun_status status = clrun_context_create(NULL, &ctx);
    clrun_exec_stats given = {0}, fitted = {0};
    char names[1024], moved[1024], none[8], none2[8];
    if (status == CLRUN_OK)
        status = held_under(ctx, graph, UINT64_MAX, &given, none, sizeof none, none2, sizeof none2);
    char b[32], h[32], w[32], a[32], d[32];
    if (status == CLRUN_OK) {
        printf("model       %s on %s\n", path, clrun_context_device(ctx)->name);
        printf("as given    holds %s: weights %s, arena %s (planned mode)\n",
               clrun_format_bytes(given.held_bytes, h, sizeof h),
               clrun_format_bytes(given.constant_bytes, w, sizeof w),
               clrun_format_bytes(given.arena_bytes, a, sizeof a));
        status = held_under(ctx, graph, budget, &fitted, names, sizeof names, moved, sizeof moved);
    }
    if (status == CLRUN_OK) {
        printf("budget      %s: holds %s", clrun_format_bytes(budget, b, sizeof b),
               clrun_format_bytes(fitted.held_bytes, h, sizeof h));
        if (fitted.recomputed_tensors == 0)
            printf(", nothing recomputed\n");
        else
            printf("; %d tensor%s (%s) recomputed after the peak by %d more node%s, %.3g MFLOP "
                   "more per run\nrecomputed  %s\n", (int)fitted.recomputed_tensors,
                   fitted.recomputed_tensors == 1 ? "" : "s",
                   clrun_format_bytes(fitted.recomputed_bytes, d, sizeof d),
                   (int)fitted.recomputed_nodes, fitted.recomputed_nodes == 1 ? "" : "s",
                   (double)fitted.recomputed_flops / 1e6, names);
        if (fitted.offloaded_tensors > 0) {
            char m[32], k[32];
            printf("offloaded   %d tensor%s to host memory (%s there, %s moved per run): %s\n",
                   (int)fitted.offloaded_tensors, fitted.offloaded_tensors == 1 ? "" : "s",
                   clrun_format_bytes(fitted.host_bytes, k, sizeof k),
                   clrun_format_bytes(fitted.offloaded_bytes, m, sizeof m), moved);
        }
    } else {
        fprintf(stderr, "clrun plan: %s: %s\n", path, clrun_last_error(ctx));
    }
    clrun_context_destroy(ctx);
    clrun_graph_destroy(graph);
    return status == CLRUN_OK ? 0 : 1;
}

/* `clrun plan MODEL --budget SIZE --loss KIND:T ...`: the train step's decisions under the
 * budget, without training (`clrun train MODEL --memory-budget SIZE --plan ...`). */
static int plan_train_step(int argc, char **argv)
{
    bool loss = false;
    for (int i = 1; i < argc; i++)
        loss = loss || strcmp(argv[i], "--loss") == 0;
    if (!loss)
        return plan_inference_budget(argc, argv);
    char **args = calloc((size_t)argc + 2, sizeof *args);
    if (args == NULL) {
        fprintf(stderr, "clrun plan: %s\n", clrun_strerror(CLRUN_ERROR_OUT_OF_HOST_MEMORY));
        return 1;
    }
    static char train[] = "train", budget[] = "--memory-budget", plan[] = "--plan";
    args[0] = train;
    for (int i = 1; i < argc; i++)
        args[i] = strcmp(argv[i], "--budget") == 0 ? budget : argv[i];
    args[argc] = plan;
    int rc = clrun_cli_train(argc + 1, args);
    free(args);
    return rc;
}

int clrun_cli_plan(int argc, char **argv)
{
    if (clrun_cli_wants_help(argc, argv)) {
        print_help();
        return 0;
    }
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--budget") == 0)
            return plan_train_step(argc, argv);
    plan_cli cli = {.args = {.options = CLRUN_PLAN_OPTIONS_DEFAULT}};
    int rc = parse_arguments(argc, argv, &cli);
    if (rc >= 0) {
        clrun_cli_consts_free(&cli.consts);
        return rc;
    }
    clrun_plan_buffer *buffers = NULL;
    uint64_t *ids = NULL;
    char **names = NULL;
    size_t n = 0;
    if (cli.graph) {
        cli.args.source = cli.graph;
        rc = load_graph(cli.graph, &cli.io, &cli.consts, &cli.args, &buffers, &n, &names);
        cli.args.names = (const char *const *)names;
    } else if (cli.csv) {
        cli.args.source = cli.csv;
        rc = load_csv(cli.csv, &buffers, &ids, &n);
    } else {
        cli.args.source = cli.gen;
        rc = load_generated(cli.gen, &buffers, &n);
    }
    clrun_cli_consts_free(&cli.consts);
    if (rc == 0) {
        cli.args.ids = ids;
        rc = clrun_cli_plan_report(buffers, n, &cli.args);
    }
    free(buffers);
    free(ids);
    free(names);
    return rc;
}
