/* clrun run's report: for a person, or one JSON object for a program. */
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

#include "run.h"

static void shape_text(const clrun_tensor_type *t, char *out, size_t size)
{
    size_t used = (size_t)snprintf(out, size, "%s[", clrun_dtype_name(t->dtype));
    for (int d = 0; d < t->rank && used < size; d++)
        used += (size_t)snprintf(out + used, size - used, "%s%lld", d ? "," : "", (long long)t->shape[d]);
    if (used < size)
        snprintf(out + used, size - used, "]");
}

json_object *clrun_run_json_outputs(const clrun_graph *g, const char (*checksums)[17])
{
    json_object *outputs = json_object_new_array();
    const clrun_tensor_id *ids;
    int32_t n = clrun_graph_outputs(g, &ids);
    for (int32_t i = 0; i < n; i++) {
        const clrun_tensor_type *t = clrun_graph_tensor_type(g, ids[i]);
        json_object *out = json_object_new_object();
        json_object_object_add(out, "name", json_object_new_string(clrun_graph_tensor_name(g, ids[i])));
        json_object_object_add(out, "dtype", json_object_new_string(clrun_dtype_name(t->dtype)));
        json_object *shape = json_object_new_array();
        for (int d = 0; d < t->rank; d++)
            json_object_array_add(shape, json_object_new_int64(t->shape[d]));
        json_object_object_add(out, "shape", shape);
        json_object_object_add(out, "checksum", json_object_new_string(checksums[i]));
        json_object_array_add(outputs, out);
    }
    return outputs;
}

void clrun_run_print_json(const run_args *a, const clrun_context *ctx, const clrun_graph *g,
                          const run_result *r)
{
    const clrun_exec_stats *s = &r->stats;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "graph", json_object_new_string(clrun_graph_name(g) ? clrun_graph_name(g) : a->path));
    json_object_object_add(o, "allocator", json_object_new_string(s->allocator));
    json_object_object_add(o, "mode", json_object_new_string(s->mode));
    json_object_object_add(o, "device", json_object_new_string(clrun_context_device(ctx)->name));
    json_object_object_add(o, "nodes", json_object_new_int(s->graph_nodes));
    json_object_object_add(o, "kernels", json_object_new_int(s->kernels));
    json_object_object_add(o, "fused_groups", json_object_new_int(s->fused_groups));
    json_object_object_add(o, "fused_nodes", json_object_new_int(s->fused_nodes));
    json_object_object_add(o, "folded_nodes", json_object_new_int(s->folded_nodes));
    json_object_object_add(o, "folded_batchnorms", json_object_new_int(s->folded_batchnorms));
    json_object *fused = json_object_new_array();
    for (int32_t i = 0; i < r->fused_count; i++) {
        json_object *group = json_object_new_object();
        json_object_object_add(group, "kernel", json_object_new_string(r->fused[i].kernel));
        json_object_object_add(group, "nodes", json_object_new_int(r->fused[i].nodes));
        json_object_object_add(group, "output", json_object_new_string(r->fused[i].output));
        json_object_array_add(fused, group);
    }
    json_object_object_add(o, "fused", fused);
    json_object_object_add(o, "repeat", json_object_new_int(a->repeat));
    json_object *first = json_object_new_object();
    json_object_object_add(first, "load_s", json_object_new_double(r->first_load));
    json_object_object_add(first, "context_s", json_object_new_double(r->first_context));
    json_object_object_add(first, "prepare_s", json_object_new_double(r->first_prepare));
    json_object_object_add(first, "run_s", json_object_new_double(r->first_run));
    json_object_object_add(first, "builds_s", json_object_new_double(r->prepare_builds + r->run_builds));
    json_object_object_add(first, "tune_s", json_object_new_double(r->prepare_tune + r->run_tune));
    json_object_object_add(first, "programs_built", json_object_new_int64((int64_t)r->programs.builds_from_source));
    json_object_object_add(first, "programs_cached", json_object_new_int64((int64_t)r->programs.cache_hits));
    json_object_object_add(o, "first_run", first);
    /* wall_ms is the median of the timed runs (its documented name, kept); min and max too */
    json_object_object_add(o, "wall_ms", json_object_new_double(r->median));
    json_object_object_add(o, "wall_ms_median", json_object_new_double(r->median));
    json_object_object_add(o, "wall_ms_min", json_object_new_double(r->times[0]));
    json_object_object_add(o, "wall_ms_max", json_object_new_double(r->times[a->repeat - 1]));
    json_object_object_add(o, "peak_bytes", json_object_new_int64((int64_t)s->peak_bytes));
    json_object_object_add(o, "reserved_bytes", json_object_new_int64((int64_t)s->reserved_bytes));
    json_object_object_add(o, "lower_bound_bytes", json_object_new_int64((int64_t)s->lower_bound_bytes));
    json_object_object_add(o, "naive_bytes", json_object_new_int64((int64_t)s->naive_bytes));
    json_object_object_add(o, "constant_bytes", json_object_new_int64((int64_t)s->constant_bytes));
    json_object_object_add(o, "driver_allocs", json_object_new_int64((int64_t)s->driver_allocs));
    if (s->budget_bytes) {
        json_object_object_add(o, "memory_budget_bytes", json_object_new_int64((int64_t)s->budget_bytes));
        json_object_object_add(o, "held_bytes", json_object_new_int64((int64_t)s->held_bytes));
        json_object_object_add(o, "recomputed_tensors", json_object_new_int(s->recomputed_tensors));
        json_object_object_add(o, "recomputed_nodes", json_object_new_int(s->recomputed_nodes));
        json_object_object_add(o, "recomputed_bytes", json_object_new_int64((int64_t)s->recomputed_bytes));
        json_object_object_add(o, "recomputed_flops", json_object_new_int64((int64_t)s->recomputed_flops));
        json_object_object_add(o, "offloaded_tensors", json_object_new_int(s->offloaded_tensors));
        json_object_object_add(o, "offloaded_bytes", json_object_new_int64((int64_t)s->offloaded_bytes));
        json_object_object_add(o, "host_bytes", json_object_new_int64((int64_t)s->host_bytes));
    }
    if (a->weights != CLRUN_F32) {
        json_object_object_add(o, "weights", json_object_new_string(a->weights == CLRUN_I8 ? "int8" : clrun_dtype_name(a->weights)));
        json_object_object_add(o, "weights_narrowed", json_object_new_int(r->weights.narrowed));
        json_object_object_add(o, "weights_kept_f32", json_object_new_int(r->weights.kept));
        json_object_object_add(o, "weights_bytes_before", json_object_new_int64((int64_t)r->weights.bytes_before));
        json_object_object_add(o, "weights_bytes_after", json_object_new_int64((int64_t)r->weights.bytes_after));
        json_object_object_add(o, "weights_max_abs_error", json_object_new_double(r->weights_abs_error));
        json_object_object_add(o, "weights_max_rel_error", json_object_new_double(r->weights_rel_error));
    }
    json_object_object_add(o, "donations", json_object_new_int(s->donations));
    json_object_object_add(o, "assembled_concats", json_object_new_int(s->assembled_concats));
    json_object_object_add(o, "assembled_in_part", json_object_new_int(s->assembled_in_part));
    json_object_object_add(o, "donated_in_place", json_object_new_int(s->donated_in_place));
    json_object_object_add(o, "unused_donations", json_object_new_int(s->unused_donations));
    json_object *unused = json_object_new_array();
    for (int32_t i = 0; i < r->unused_count; i++)
        json_object_array_add(unused, json_object_new_string(r->unused[i]));
    json_object_object_add(o, "unused_donated", unused);
    json_object_object_add(o, "outputs", clrun_run_json_outputs(g, (const char(*)[17])r->checksums));
    printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(o);
}

void clrun_run_print_report(const run_args *a, const clrun_context *ctx, const clrun_graph *g,
                            const run_result *r)
{
    const clrun_exec_stats *s = &r->stats;
    char peak[32], reserved[32], bound[32], naive[32], constants[32];
    const clrun_device_info *d = clrun_context_device(ctx);
    printf("graph       %s (%s): %d nodes, %d tensors, weights %s\n", clrun_graph_name(g) ? clrun_graph_name(g) : "",
           a->path, (int)s->graph_nodes, (int)clrun_graph_tensor_count(g),
           clrun_format_bytes(s->constant_bytes, constants, sizeof constants));
    printf("fused       %d group%s, %d node%s -> %d kernel%s\n", (int)s->fused_groups,
           s->fused_groups == 1 ? "" : "s", (int)s->graph_nodes, s->graph_nodes == 1 ? "" : "s",
           (int)s->kernels, s->kernels == 1 ? "" : "s");
    for (int32_t i = 0; i < r->fused_count; i++)
        printf("            %s: %d node%s into one kernel, writing %s\n", r->fused[i].kernel,
               (int)r->fused[i].nodes, r->fused[i].nodes == 1 ? "" : "s", r->fused[i].output);
    if (s->folded_nodes > 0)
        printf("folded      %d node%s at load (CLRUN_FOLD), %d of them batch norm%s into a convolution%s\n",
               (int)s->folded_nodes, s->folded_nodes == 1 ? "" : "s", (int)s->folded_batchnorms,
               s->folded_batchnorms == 1 ? "" : "s",
               s->folded_batchnorms ? " (within 1e-5, not bit-exact)" : "");
    if (a->weights != CLRUN_F32) {
        char before[32], after[32];
        printf("weights     %d stored as %s (%s -> %s), %d kept in f32; outputs against the f32 "
               "run: max error %.3g (%.3g of the largest value)\n",
               (int)r->weights.narrowed, a->weights == CLRUN_I8 ? "int8" : clrun_dtype_name(a->weights),
               clrun_format_bytes(r->weights.bytes_before, before, sizeof before),
               clrun_format_bytes(r->weights.bytes_after, after, sizeof after), (int)r->weights.kept,
               r->weights_abs_error, r->weights_rel_error);
    }
    if (s->budget_bytes) {
        char budget[32], held[32], dropped[32];
        printf("budget      %s: holds %s (weights and arena); %d tensor%s (%s) recomputed after the "
               "peak by %d more node%s, %.3g MFLOP more per run\n",
               clrun_format_bytes(s->budget_bytes, budget, sizeof budget),
               clrun_format_bytes(s->held_bytes, held, sizeof held), (int)s->recomputed_tensors,
               s->recomputed_tensors == 1 ? "" : "s",
               clrun_format_bytes(s->recomputed_bytes, dropped, sizeof dropped),
               (int)s->recomputed_nodes, s->recomputed_nodes == 1 ? "" : "s",
               (double)s->recomputed_flops / 1e6);
        if (s->offloaded_tensors > 0) {
            char host[32], moved[32];
            printf("offloaded   %d tensor%s to host memory (%s there, %s moved per run)\n",
                   (int)s->offloaded_tensors, s->offloaded_tensors == 1 ? "" : "s",
                   clrun_format_bytes(s->host_bytes, host, sizeof host),
                   clrun_format_bytes(s->offloaded_bytes, moved, sizeof moved));
        }
    }
    printf("device      %s (%s)\n", d->name, d->platform_name);
    printf("allocator   %s\n", s->allocator);
    double lo = r->times[0], hi = r->times[a->repeat - 1];
    printf("time        %.3f ms per run (median of %d run%s; min %.3f, max %.3f)\n", r->median, a->repeat,
           a->repeat == 1 ? "" : "s", lo, hi);
    /* The first run's wall time split: the cold start a user feels (issue 26). */
    printf("first run   %.3f s: load %.3f, context %.3f, prepare %.3f, warm-up run %.3f; of these "
           "program builds %.3f (%lu from source, %lu from the binary cache), tuning %.3f%s\n",
           r->first_load + r->first_context + r->first_prepare + r->first_run, r->first_load,
           r->first_context, r->first_prepare, r->first_run, r->prepare_builds + r->run_builds,
           r->programs.builds_from_source, r->programs.cache_hits, r->prepare_tune + r->run_tune,
           strstr(d->platform_name, "Portable Computing Language")
               ? " (POCL compiles each kernel at its first launch, within the warm-up run)" : "");
    printf("peak        %s in use, %s reserved from the driver (%llu driver allocations in the last run)\n",
           clrun_format_bytes(s->peak_bytes, peak, sizeof peak),
           clrun_format_bytes(s->reserved_bytes, reserved, sizeof reserved), (unsigned long long)s->driver_allocs);
    printf("bounds      lower bound %s (peak is %.2fx), naive %s (saving %.1f%%)\n",
           clrun_format_bytes(s->lower_bound_bytes, bound, sizeof bound),
           s->lower_bound_bytes ? (double)s->peak_bytes / (double)s->lower_bound_bytes : 0.0,
           clrun_format_bytes(s->naive_bytes, naive, sizeof naive),
           s->naive_bytes ? 100.0 * (1.0 - (double)s->peak_bytes / (double)s->naive_bytes) : 0.0);
    printf("donations   %d in place", (int)s->donations);
    if (s->assembled_concats > 0)
        printf("; %d concat%s assembled in place (%d of them in part)", (int)s->assembled_concats,
               s->assembled_concats == 1 ? "" : "s", (int)s->assembled_in_part);
    for (int32_t i = 0; i < r->unused_count; i++) /* CLRUN_LOG=warn says why */
        printf("%s'%s'", i ? ", " : "; donated but taken by no output (freed after its last use): ",
               r->unused[i]);
    printf("\n");
    const clrun_tensor_id *ids;
    int32_t n = clrun_graph_outputs(g, &ids);
    for (int32_t i = 0; i < n; i++) {
        char type[128];
        shape_text(clrun_graph_tensor_type(g, ids[i]), type, sizeof type);
        printf("output      %s %s checksum %s\n", clrun_graph_tensor_name(g, ids[i]), type, r->checksums[i]);
    }
}
