/* Planned mode: memory laid out before the first run. The buffers a run creates get offsets from
 * the static planner in one arena, made once with a sub-buffer per buffer. A donated input is
 * the caller's block, outside the arena, but it is free after its last reader: buffers born
 * after that which fit in it are planned into it instead (a region per donated input), so that
 * planned mode holds no more than the pooled modes, which reuse that block too. Region views are
 * made per run, since each run's donated block is another. */
#include <clrun/plan.h>

#include <stdlib.h>
#include <string.h>

#include "exec/exec_internal.h"

/* Items of a plan with the schedule buffer each stands for. */
typedef struct plan_items {
    clrun_plan_buffer *items;
    int32_t *which;
    size_t count;
} plan_items;

/* Insertion sort of idx[0..n) by the items' sizes, largest first (n is small: one graph's
 * buffers born after one input dies). */
static void sort_by_size(size_t *idx, size_t n, const clrun_plan_buffer *items)
{
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && items[idx[j - 1]].size < items[idx[j]].size; j--) {
            size_t t = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = t;
        }
}

/* Peak of the plan of items idx[0..n) (constructions only), offsets into out. */
static clrun_status plan_subset(const plan_items *all, const size_t *idx, size_t n,
                                uint64_t alignment, clrun_plan_buffer *scratch, uint64_t *out,
                                uint64_t *peak)
{
    for (size_t i = 0; i < n; i++)
        scratch[i] = all->items[idx[i]];
    clrun_plan_options options = CLRUN_PLAN_OPTIONS_DEFAULT;
    options.time_limit_s = 0;
    options.alignment = alignment;
    clrun_plan_result result;
    clrun_status status = clrun_plan_solve(scratch, n, &options, out, &result);
    *peak = result.peak_bytes;
    return status;
}

/* Fills donated input `host` (its block free from step `free_from`) with what fits of the
 * unplaced items born then or later, largest first. */
static clrun_status fill_region(clrun_exec *e, const plan_items *all, int32_t host,
                                bool *placed, size_t *idx, clrun_plan_buffer *scratch,
                                uint64_t *offsets)
{
    const clrun__sched_buffer *hb = &e->schedule.buffers[host];
    uint64_t free_from = (uint64_t)hb->last + 1, alignment = e->ctx->info.base_addr_align;
    size_t candidates = 0, chosen = 0;
    for (size_t i = 0; i < all->count; i++)
        if (!placed[i] && all->which[i] >= 0 && all->items[i].first >= free_from &&
            all->items[i].size <= hb->bytes) /* a group goes to the arena, in one piece */
            idx[candidates++] = i;
    sort_by_size(idx, candidates, all->items);
    for (size_t c = 0; c < candidates; c++) {
        size_t keep = idx[c];
        idx[c] = idx[chosen];
        idx[chosen] = keep;
        uint64_t peak;
        clrun_status status = plan_subset(all, idx, chosen + 1, alignment, scratch, offsets, &peak);
        if (status != CLRUN_OK)
            return status;
        if (peak <= hb->bytes)
            chosen++;
    }
    if (chosen == 0)
        return CLRUN_OK;
    uint64_t peak;
    clrun_status status = plan_subset(all, idx, chosen, alignment, scratch, offsets, &peak);
    for (size_t i = 0; status == CLRUN_OK && i < chosen; i++) {
        int32_t b = all->which[idx[i]];
        placed[idx[i]] = true;
        e->host_of[b] = host;
        e->arena_offsets[b] = offsets[i];
    }
    return status;
}

/* Every donated input that is not a graph output (whose block must hold it to the end) hosts
 * what fits after its last reader. */
static clrun_status plan_regions(clrun_exec *e, const plan_items *all, bool *placed)
{
    size_t *idx = calloc(all->count + 1, sizeof *idx);
    clrun_plan_buffer *scratch = calloc(all->count + 1, sizeof *scratch);
    uint64_t *offsets = calloc(all->count + 1, sizeof *offsets);
    clrun_status status = idx && scratch && offsets ? CLRUN_OK : CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    for (int32_t h = 0; status == CLRUN_OK && h < e->schedule.buffer_count; h++) {
        const clrun__sched_buffer *hb = &e->schedule.buffers[h];
        if (hb->is_donated && !hb->is_output && hb->last < e->schedule.steps)
            status = fill_region(e, all, h, placed, idx, scratch, offsets);
    }
    free(idx);
    free(scratch);
    free(offsets);
    return status;
}

/* The arena's plan of every item no region took; offsets go to e->arena_offsets. */
/* The most bytes the arena may take: the device's largest allocation, and what the pool's limit
 * leaves beside the blocks it holds now (resident weights, raw buffers, live blocks; the empty
 * chunks it would give back first are not counted). Lenient where the statistics are: the
 * arena's own allocation is still held to the limit. */
static uint64_t arena_budget(clrun_exec *e, uint64_t *held_now)
{
    clrun_memory_stats m;
    uint64_t budget = e->ctx->info.max_alloc;
    *held_now = 0;
    if (clrun_memory_stats_get(e->ctx, &m) != CLRUN_OK || m.limit == 0)
        return budget;
    uint64_t fixed = m.resident + m.raw;
    *held_now = m.held > fixed ? m.held : fixed;
    uint64_t left = m.limit > *held_now ? m.limit - *held_now : 0;
    return left < budget ? left : budget;
}

/* The planner's verdict against the budget as the executor's error: a proof that no plan
 * fits, or limits that came first. */
static clrun_status refuse_plan(clrun_exec *e, const clrun_plan_result *r, uint64_t budget,
                                uint64_t held_now, size_t n)
{
    char need[CLRUN__BYTES_TEXT], bound[CLRUN__BYTES_TEXT], may[CLRUN__BYTES_TEXT],
        held[CLRUN__BYTES_TEXT];
    clrun__format_bytes(r->peak_bytes, need, sizeof need);
    clrun__format_bytes(r->lower_bound_bytes, bound, sizeof bound);
    clrun__format_bytes(budget, may, sizeof may);
    clrun__format_bytes(held_now, held, sizeof held);
    const char *graph = e->graph->name ? e->graph->name : "";
    if (r->verdict == CLRUN_PLAN_INFEASIBLE && r->lower_bound_bytes > budget)
        return clrun__fail(e->ctx, CLRUN_ERROR_OUT_OF_MEMORY,
                           "no plan of graph '%s' fits the %s its arena may take (the device's "
                           "largest allocation, or the pool's limit less the %s it holds): its "
                           "%zu buffers need at least %s (the lower bound)",
                           graph, may, held, n, bound);
    if (r->verdict == CLRUN_PLAN_INFEASIBLE)
        return clrun__fail(e->ctx, CLRUN_ERROR_OUT_OF_MEMORY,
                           "no plan of graph '%s' fits the %s its arena may take (the device's "
                           "largest allocation, or the pool's limit less the %s it holds), as the "
                           "complete search proved for its %zu buffers; the lower bound is %s, the "
                           "best plan found needs %s",
                           graph, may, held, n, bound, need);
    return clrun__fail(e->ctx, CLRUN_ERROR_OUT_OF_MEMORY,
                       "the best plan of graph '%s' found in %.3g s needs %s, more than the %s its "
                       "arena may take (the pool's limit less the %s it holds, or the device's "
                       "largest allocation); the lower bound is %s, so a plan may fit: try a longer "
                       "plan_time_limit_s (an executor option), or a pooled mode",
                       graph, e->options.plan_time_limit_s, need, may, held, bound);
}

static clrun_status plan_arena(clrun_exec *e, const plan_items *all, const bool *placed)
{
    clrun_plan_buffer *items = calloc(all->count + 1, sizeof *items);
    uint64_t *offsets = calloc(all->count + 1, sizeof *offsets);
    int32_t *which = calloc(all->count + 1, sizeof *which);
    if (!items || !offsets || !which) {
        free(items), free(offsets), free(which);
        return clrun__fail(e->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory planning");
    }
    size_t n = 0;
    for (size_t i = 0; i < all->count; i++)
        if (!placed[i]) {
            items[n] = all->items[i];
            which[n++] = all->which[i];
        }
    uint64_t held_now = 0;
    clrun_plan_options options = CLRUN_PLAN_OPTIONS_DEFAULT;
    options.alignment = e->ctx->info.base_addr_align;
    options.time_limit_s = e->options.plan_time_limit_s;
    options.capacity = arena_budget(e, &held_now);
    if (e->arena_host && e->arena_host->arena_bytes > options.capacity)
        options.capacity = e->arena_host->arena_bytes; /* it may lie in the host's */
    clrun_plan_result result = {0};
    clrun_status status = n > 0 ? clrun_plan_solve(items, n, &options, offsets, &result) : CLRUN_OK;
    if (status != CLRUN_OK)
        clrun__fail(e->ctx, status, "planner failed on %zu buffers (alignment %llu): %s", n,
                    (unsigned long long)options.alignment, clrun_strerror(status));
    else if (n > 0 && result.verdict != CLRUN_PLAN_FITS)
        status = refuse_plan(e, &result, options.capacity, held_now, n);
    for (size_t i = 0; status == CLRUN_OK && i < n; i++) {
        if (which[i] >= 0) {
            e->arena_offsets[which[i]] = offsets[i];
            continue;
        }
        int32_t g = -1 - which[i]; /* a group: its members at their offsets in it */
        e->group_offsets[g] = offsets[i];
        for (int32_t m = e->out_groups.start[g]; m < e->out_groups.start[g + 1]; m++)
            e->arena_offsets[e->out_groups.member[m]] = offsets[i] + e->out_groups.offset[m];
    }
    e->arena_bytes = status == CLRUN_OK ? result.peak_bytes : 0;
    free(items), free(offsets), free(which);
    return status;
}

/* The arena and one sub-buffer per buffer in it. */
static clrun_status make_arena(clrun_exec *e)
{
    char bytes[CLRUN__BYTES_TEXT], most[CLRUN__BYTES_TEXT];
    clrun__format_bytes(e->arena_bytes, bytes, sizeof bytes);
    if (e->arena_bytes > e->ctx->info.max_alloc)
        return clrun__fail(e->ctx, CLRUN_ERROR_OUT_OF_MEMORY,
                           "the planned arena of graph '%s' needs %s, more than the device's largest "
                           "allocation, %s", e->graph->name ? e->graph->name : "", bytes,
                           clrun__format_bytes(e->ctx->info.max_alloc, most, sizeof most));
    if (e->arena_bytes == 0)
        return CLRUN_OK;
    cl_int error = CL_SUCCESS;
    const clrun_exec *host = e->arena_host;
    cl_mem parent = NULL;
    if (host && host->arena && e->arena_bytes <= host->arena_bytes && !e->ctx->out_of_order) {
        /* views into the arena of an executor that never runs at the same time (a view of a
         * view is no OpenCL buffer: the views are the host arena's own) */
        e->arena_shared = true;
        parent = host->arena;
    } else {
        /* A driver buffer of its own, counted by the pool and held to its limit. */
        clrun_status status = clrun__pool_create_raw(e->ctx, e->arena_bytes, "the planned arena",
                                                     &e->arena);
        if (status != CLRUN_OK)
            return status;
        parent = e->arena;
    }
    for (int32_t b = 0; b < e->schedule.buffer_count; b++) {
        const clrun__sched_buffer *sb = &e->schedule.buffers[b];
        bool created = !sb->is_constant && !sb->is_input && sb->first >= 0;
        if (!created || e->host_of[b] >= 0)
            continue;
        cl_buffer_region region = {(size_t)e->arena_offsets[b], (size_t)sb->bytes};
        e->arena_views[b] = clrun__cl.CreateSubBuffer(parent, CL_MEM_READ_WRITE,
                                                      CL_BUFFER_CREATE_TYPE_REGION, &region, &error);
        if (e->arena_views[b] == NULL)
            return clrun__fail_cl(e->ctx, error, "clCreateSubBuffer", "arena view at %llu",
                                  (unsigned long long)e->arena_offsets[b]);
    }
    return CLRUN_OK;
}

clrun_status clrun__exec_prepare_arena(clrun_exec *e)
{
    size_t slots = (size_t)e->schedule.buffer_count + 1;
    e->arena_views = calloc(slots, sizeof *e->arena_views);
    e->arena_offsets = calloc(slots, sizeof *e->arena_offsets);
    e->host_of = malloc(slots * sizeof *e->host_of);
    e->region_views = calloc(slots, sizeof *e->region_views);
    e->group_offsets = calloc((size_t)e->out_groups.count + 1, sizeof *e->group_offsets);
    plan_items all = {NULL, NULL, 0};
    clrun_status status = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    if (e->arena_views && e->arena_offsets && e->host_of && e->region_views && e->group_offsets)
        status = clrun__schedule_plan_items(&e->schedule, false, &all.items, &all.which, &all.count);
    if (status == CLRUN_OK && e->out_groups.count > 0) { /* each group one item */
        plan_items grouped = {NULL, NULL, 0};
        status = clrun__buffer_groups_items(&e->out_groups, all.items, all.which, all.count,
                                            &grouped.items, &grouped.which, &grouped.count);
        free(all.items), free(all.which);
        all = grouped;
    }
    bool *placed = status == CLRUN_OK ? calloc(all.count + 1, sizeof *placed) : NULL;
    if (placed == NULL) {
        free(all.items), free(all.which);
        return clrun__fail(e->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory planning");
    }
    for (size_t b = 0; b < slots; b++)
        e->host_of[b] = -1;
    status = plan_regions(e, &all, placed);
    if (status != CLRUN_OK)
        clrun__fail(e->ctx, status, "out of host memory planning the donated inputs' blocks");
    if (status == CLRUN_OK)
        status = plan_arena(e, &all, placed);
    if (status == CLRUN_OK)
        status = make_arena(e);
    free(placed);
    free(all.items);
    free(all.which);
    return status;
}

void clrun__exec_drop_arena(clrun_exec *e)
{
    for (int32_t b = 0; e->arena_views && b < e->schedule.buffer_count; b++)
        if (e->arena_views[b])
            clrun__cl.ReleaseMemObject(e->arena_views[b]);
    if (e->arena) /* a shared arena has none of its own */
        clrun__pool_release_raw(e->ctx, e->arena, e->arena_bytes);
    e->arena = NULL;
    e->arena_bytes = 0;
    e->arena_shared = false;
    free(e->arena_views);
    free(e->arena_offsets);
    free(e->host_of);
    free(e->region_views);
    free(e->group_offsets);
    e->arena_views = e->region_views = NULL;
    e->arena_offsets = e->group_offsets = NULL;
    e->host_of = NULL;
}

clrun_status clrun__exec_bind_regions(clrun_exec *e)
{
    for (int32_t b = 0; e->host_of && b < e->schedule.buffer_count; b++) {
        int32_t host = e->host_of[b];
        if (host < 0)
            continue;
        buffer_state *h = &e->buffers[host];
        h->hosting = true;
        cl_mem chunk = clrun__pool_chunk_mem(e->ctx, h->block.chunk);
        cl_buffer_region region = {(size_t)(h->block.offset + e->arena_offsets[b]),
                                   (size_t)e->schedule.buffers[b].bytes};
        cl_int error = CL_INVALID_MEM_OBJECT;
        e->region_views[b] = chunk ? clrun__cl.CreateSubBuffer(chunk, CL_MEM_READ_WRITE,
                                                               CL_BUFFER_CREATE_TYPE_REGION,
                                                               &region, &error)
                                   : NULL;
        char label[CLRUN__EXEC_LABEL];
        if (e->region_views[b] == NULL)
            return clrun__fail_cl(e->ctx, error, "clCreateSubBuffer",
                                  "a view into donated input '%s' for %s%s%s",
                                  clrun__exec_tensor_name(e, e->schedule.buffers[host].root),
                                  e->schedule.buffers[b].is_scratch ? "" : "'",
                                  clrun__exec_buffer_label(e, b, label, sizeof label),
                                  e->schedule.buffers[b].is_scratch ? "" : "'");
    }
    return CLRUN_OK;
}

void clrun__exec_release_regions(clrun_exec *e)
{
    for (int32_t b = 0; e->host_of && b < e->schedule.buffer_count; b++) {
        if (e->region_views[b]) {
            clrun__cl.ReleaseMemObject(e->region_views[b]);
            e->region_views[b] = NULL;
        }
        int32_t host = e->host_of[b];
        if (host >= 0 && e->buffers[host].hosting) {
            e->buffers[host].hosting = false;
            clrun__exec_give_back(e, host);
        }
    }
}
