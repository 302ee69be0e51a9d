/* clrun replay: an allocation trace through allocators on a simulated pool (the engine is
 * clrun_replay, lib/memory/replay.c); this file reads the options and the trace and prints. */
#include <errno.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <clrun/clrun.h>
#include <clrun/lifetimes.h>
#include <clrun/replay.h>

#include "cli.h"

#define DEFAULT_MAX_CHUNK (UINT64_C(1) << 30) /* without a device: 1 GiB */
#define DEFAULT_ALIGNMENT 256                 /* without a device */
#define MAX_RESULTS 16

static void print_help(void)
{
    printf("usage: clrun replay --csv TRACE.csv [--allocator NAME] [--chunk-size BYTES]\n"
           "                    [--alignment BYTES] [--scale-to BYTES] [--json]\n\n"
           "Replays an allocation trace through an allocator on a simulated pool (offsets only, no\n"
           "device needed), so that strategies can be compared on real workloads. The trace is the\n"
           "CSV of memory-planner benchmarks, header id,lower,upper,size: each buffer is allocated at\n"
           "moment lower and freed at upper (frees before allocations at equal moments).\n\n"
           "  --csv FILE          the trace ('-' reads standard input)\n"
           "  --allocator NAME    a strategy (");
    for (size_t i = 0; clrun_strategy_at(i); i++)
        printf("%s%s", i ? ", " : "", clrun_strategy_at(i)->name);
    printf("), binned (PyOpenCL's MemoryPool),\n"
           "                      best-fit (coalescing best fit in one unbounded arena, a reference)\n"
           "                      or all (the default): a table of every one\n"
           "  --chunk-size BYTES  every chunk this size (K/M/G suffixes; one large chunk is a\n"
           "                      preallocated arena); default: grown with demand as on a device,\n"
           "                      up to the default device's maximum allocation (CLRUN_PLATFORM/\n"
           "                      CLRUN_DEVICE select it), or 1 GiB without a device\n"
           "  --alignment BYTES   block alignment; default: the device's base-address alignment, or 256\n"
           "  --scale-to BYTES    multiply every size so that the lower bound is BYTES (compares\n"
           "                      traces at one scale)\n"
           "  --json              one JSON object (with 'all': {\"results\": [...]})\n\n"
           "Reported: peak held (live blocks with the allocator's rounding; held minus asked-for is\n"
           "the internal waste), peak reserved (chunk bytes), footprint (largest total over chunks\n"
           "of the end of each chunk's highest live block), the lower bound (largest total of live\n"
           "bytes at any moment), chunks, and nanoseconds per allocation or free.\n"
           "Exit status: 0 success, 2 usage error or malformed trace (FILE:LINE: message), 1 otherwise.\n");
}

/* "buddy|slab|bump|tlsf|binned|best-fit|all" */
static void valid_names(char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; clrun_replay_allocator_name(i) && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s|", clrun_replay_allocator_name(i));
    if (used < size)
        snprintf(buf + used, size - used, "all");
}

/* The default device's maximum allocation and alignment, as a context would choose it; the
 * defaults, and no error, when there is no device. */
static void default_device(uint64_t *max_alloc, uint64_t *alignment, char *note, size_t notelen)
{
    *max_alloc = DEFAULT_MAX_CHUNK;
    *alignment = DEFAULT_ALIGNMENT;
    snprintf(note, notelen, "no device: 1 GiB");
    clrun_device_info *list = NULL;
    size_t count = 0, chosen = 0;
    if (clrun_device_list(&list, &count) != CLRUN_OK)
        return;
    if (clrun_device_select(list, count, getenv("CLRUN_PLATFORM"), getenv("CLRUN_DEVICE"), &chosen) == CLRUN_OK &&
        list[chosen].max_alloc > 0) {
        *max_alloc = list[chosen].max_alloc;
        *alignment = list[chosen].base_addr_align;
        snprintf(note, notelen, "the maximum allocation of device %zu, %s", chosen, list[chosen].name);
    }
    clrun_device_list_free(list);
}

/* ---- output ---- */

static double ratio(uint64_t x, uint64_t lower_bound)
{
    return lower_bound ? (double)x / (double)lower_bound : 0.0;
}

static json_object *result_json(const clrun_replay_result *res, const clrun_replay_options *o, size_t buffers)
{
    json_object *j = json_object_new_object();
    json_object_object_add(j, "allocator", json_object_new_string(res->allocator));
    json_object_object_add(j, "peak_bytes", json_object_new_int64((int64_t)res->peak_held));
    json_object_object_add(j, "internal_waste_bytes", json_object_new_int64((int64_t)res->internal_waste));
    json_object_object_add(j, "reserved_bytes", json_object_new_int64((int64_t)res->reserved));
    json_object_object_add(j, "footprint_bytes", json_object_new_int64((int64_t)res->footprint));
    json_object_object_add(j, "lower_bound_bytes", json_object_new_int64((int64_t)res->lower_bound));
    json_object_object_add(j, "reserved_ratio", json_object_new_double(ratio(res->reserved, res->lower_bound)));
    json_object_object_add(j, "footprint_ratio", json_object_new_double(ratio(res->footprint, res->lower_bound)));
    json_object_object_add(j, "chunks", json_object_new_int64((int64_t)res->chunks));
    json_object_object_add(j, "ns_per_op", json_object_new_double(res->ns_per_op));
    json_object_object_add(j, "buffers", json_object_new_int64((int64_t)buffers));
    json_object_object_add(j, "operations", json_object_new_int64((int64_t)(2 * buffers)));
    json_object_object_add(j, "alignment", json_object_new_int64((int64_t)o->alignment));
    json_object_object_add(j, "max_chunk_bytes", json_object_new_int64((int64_t)o->max_chunk));
    json_object_object_add(j, "fixed_chunk_bytes", json_object_new_int64((int64_t)o->chunk_size));
    return j;
}

/* "12.3 MiB 1.24x" into buf. */
static const char *with_ratio(uint64_t bytes, uint64_t lower_bound, char *buf, size_t size)
{
    char human[32];
    clrun_format_bytes(bytes, human, sizeof human);
    snprintf(buf, size, "%s %5.2fx", human, ratio(bytes, lower_bound));
    return buf;
}

static void print_table(const char *csv, size_t buffers, const clrun_replay_options *o,
                        const clrun_replay_result *results, size_t count, const char *device_note)
{
    char lb[32], align[32], chunk[32];
    uint64_t lower_bound = count ? results[0].lower_bound : 0;
    printf("trace %s: %zu buffers, %zu operations, lower bound %s\n", csv, buffers, 2 * buffers,
           clrun_format_bytes(lower_bound, lb, sizeof lb));
    if (o->chunk_size)
        printf("chunks of %s (--chunk-size), alignment %s\n",
               clrun_format_bytes(o->chunk_size, chunk, sizeof chunk),
               clrun_format_bytes(o->alignment, align, sizeof align));
    else
        printf("chunks grown with demand up to %s (%s), alignment %s\n",
               clrun_format_bytes(o->max_chunk, chunk, sizeof chunk), device_note,
               clrun_format_bytes(o->alignment, align, sizeof align));
    printf("\n%-8s %22s %22s %22s %7s %22s %9s\n", "", "peak held", "reserved", "footprint", "chunks",
           "internal waste", "ns/op");
    for (size_t i = 0; i < count; i++) {
        const clrun_replay_result *res = &results[i];
        char held[48], reserved[48], footprint[48], waste[48], human[32], ns[16] = "-";
        snprintf(waste, sizeof waste, "%s %5.1f%%", clrun_format_bytes(res->internal_waste, human, sizeof human),
                 res->peak_held ? 100.0 * (double)res->internal_waste / (double)res->peak_held : 0.0);
        if (res->ns_per_op > 0.0)
            snprintf(ns, sizeof ns, "%.1f", res->ns_per_op);
        printf("%-8s %22s %22s %22s %7llu %22s %9s\n", res->allocator,
               with_ratio(res->peak_held, lower_bound, held, sizeof held),
               with_ratio(res->reserved, lower_bound, reserved, sizeof reserved),
               with_ratio(res->footprint, lower_bound, footprint, sizeof footprint),
               (unsigned long long)res->chunks, waste, ns);
    }
    printf("\nratios are to the lower bound; internal waste is held minus asked-for at the held peak;\n"
           "binned (PyOpenCL's MemoryPool) makes one buffer per block, so its footprint is the lower bound;\n"
           "best-fit is a reference: coalescing best fit in one unbounded arena, offsets only\n");
}

static void print_json(const char *csv, size_t buffers, bool all, const clrun_replay_options *o,
                       const clrun_replay_result *results, size_t count)
{
    json_object *root;
    if (all) {
        root = json_object_new_object();
        json_object_object_add(root, "trace", json_object_new_string(csv));
        json_object_object_add(root, "buffers", json_object_new_int64((int64_t)buffers));
        json_object_object_add(root, "lower_bound_bytes", json_object_new_int64((int64_t)results[0].lower_bound));
        json_object *list = json_object_new_array();
        for (size_t i = 0; i < count; i++)
            json_object_array_add(list, result_json(&results[i], o, buffers));
        json_object_object_add(root, "results", list);
    } else {
        root = result_json(&results[0], o, buffers);
        json_object_object_add(root, "trace", json_object_new_string(csv));
    }
    printf("%s\n", json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(root);
}

/* ---- the command ---- */

typedef struct replay_cli {
    const char *csv, *allocator;
    uint64_t chunk_size, alignment, scale_to;
    bool json;
} replay_cli;

static bool is_power_of_two(uint64_t x) { return x && !(x & (x - 1)); }

/* 0 when the options are read, else the exit status (help: -1). */
static int parse_options(int argc, char **argv, replay_cli *cli)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            print_help();
            return -1;
        } else if (strcmp(arg, "--json") == 0) {
            cli->json = true;
            continue;
        } else if (strcmp(arg, "--csv") != 0 && strcmp(arg, "--allocator") != 0 && strcmp(arg, "--chunk-size") != 0 &&
                   strcmp(arg, "--alignment") != 0 && strcmp(arg, "--scale-to") != 0) {
            return clrun_cli_usage_error("replay", "unknown option '%s'", arg);
        }
        if (value == NULL)
            return clrun_cli_usage_error("replay", "%s needs a value", arg);
        i++;
        if (strcmp(arg, "--csv") == 0) {
            cli->csv = value;
        } else if (strcmp(arg, "--allocator") == 0) {
            cli->allocator = value;
        } else if (strcmp(arg, "--chunk-size") == 0) {
            if (!clrun_parse_size(value, &cli->chunk_size) || cli->chunk_size == 0)
                return clrun_cli_usage_error("replay", "--chunk-size '%s': expected bytes > 0, with an optional K/M/G suffix", value);
        } else if (strcmp(arg, "--scale-to") == 0) {
            if (!clrun_parse_size(value, &cli->scale_to) || cli->scale_to == 0)
                return clrun_cli_usage_error("replay", "--scale-to '%s': expected bytes > 0, with an optional K/M/G suffix", value);
        } else if (!clrun_parse_size(value, &cli->alignment) || !is_power_of_two(cli->alignment)) {
            return clrun_cli_usage_error("replay", "--alignment '%s': expected a power of two", value);
        }
    }
    if (cli->csv == NULL)
        return clrun_cli_usage_error("replay", "--csv TRACE.csv is required");
    return 0;
}

static int read_trace(const char *csv, clrun_lifetimes *rows)
{
    bool from_stdin = strcmp(csv, "-") == 0;
    FILE *in = from_stdin ? stdin : fopen(csv, "r");
    if (in == NULL) {
        fprintf(stderr, "clrun replay: cannot open %s: %s\n", csv, strerror(errno));
        return 1;
    }
    char err[2048];
    clrun_status status = clrun_lifetimes_read(in, from_stdin ? "<stdin>" : csv, rows, err, sizeof err);
    if (!from_stdin)
        fclose(in);
    if (status != CLRUN_OK) {
        fprintf(stderr, "%s\n", err);
        return status == CLRUN_ERROR_PARSE ? 2 : 1;
    }
    return 0;
}

int clrun_cli_replay(int argc, char **argv)
{
    replay_cli cli = {.allocator = "all"};
    int rc = parse_options(argc, argv, &cli);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    bool all = strcasecmp(cli.allocator, "all") == 0;
    bool known = all;
    for (size_t i = 0; !known && clrun_replay_allocator_name(i); i++)
        known = strcasecmp(cli.allocator, clrun_replay_allocator_name(i)) == 0;
    if (!known) {
        char names[256];
        valid_names(names, sizeof names);
        return clrun_cli_usage_error("replay", "unknown allocator '%s': valid names are %s", cli.allocator, names);
    }

    clrun_lifetimes rows;
    clrun_lifetimes_init(&rows);
    rc = read_trace(cli.csv, &rows);
    if (rc != 0)
        return rc;

    clrun_replay_options o = {.alignment = cli.alignment, .chunk_size = cli.chunk_size, .scale_to = cli.scale_to,
                              .timed = true};
    char device_note[320] = "--chunk-size";
    if (cli.chunk_size == 0 || cli.alignment == 0) {
        uint64_t device_align;
        default_device(&o.max_chunk, &device_align, device_note, sizeof device_note);
        if (o.alignment == 0)
            o.alignment = device_align;
    }
    if (cli.chunk_size)
        o.max_chunk = cli.chunk_size;
    if (cli.chunk_size && cli.chunk_size < o.alignment) {
        clrun_lifetimes_free(&rows);
        return clrun_cli_usage_error("replay", "--chunk-size %llu is smaller than the alignment %llu",
                                     (unsigned long long)cli.chunk_size, (unsigned long long)o.alignment);
    }

    clrun_replay_result results[MAX_RESULTS];
    size_t count = 0;
    char err[2048];
    for (size_t i = 0; rc == 0 && clrun_replay_allocator_name(i) && count < MAX_RESULTS; i++) {
        const char *name = clrun_replay_allocator_name(i);
        if (!all && strcasecmp(cli.allocator, name) != 0)
            continue;
        if (clrun_replay(rows.items, rows.count, name, &o, &results[count++], err, sizeof err) != CLRUN_OK) {
            fprintf(stderr, "clrun replay: %s: %s\n", cli.csv, err);
            rc = 1;
        }
    }
    if (rc == 0 && cli.json)
        print_json(cli.csv, rows.count, all, &o, results, count);
    else if (rc == 0)
        print_table(cli.csv, rows.count, &o, results, count, device_note);
    clrun_lifetimes_free(&rows);
    return rc;
}
