/* The trainer: the step graph's executor and the train state between steps. The state is a set
 * of pool blocks that each step donates and takes back (clrun_exec_take_output hands the
 * executor's block itself in pooled mode), so that the state never exists twice. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <clrun/train.h>

#include "core/error.h"
#include "device/cl.h"
#include "device/context.h"
#include "graph/graph.h"
#include "exec/exec_share.h"
#include "exec/exec_watch.h"
#include "memory/pool.h"
#include "train/train_internal.h"


void clrun_train_options_init(clrun_train_options *options)
{
    clrun_train_graph_options_init(&options->graph);
    clrun_exec_options_init(&options->exec);
    options->reduce = NULL;
    options->reduce_user = NULL;
    options->split_update = false;
    options->bucket_start = NULL;
    options->bucket_test = NULL;
    options->bucket_bytes = 0;
    options->bucket_per_gradient = false;
}

uint64_t clrun__train_slot_bytes(const clrun_train *t, int32_t i)
{
    return clrun_tensor_bytes(clrun_graph_tensor_type(t->tg.graph, t->tg.slots[i].input));
}

void clrun_train_destroy(clrun_train *t)
{
    if (t == NULL)
        return;
    clrun_exec_destroy(t->eval); /* first: its arena may be a view of the step's */
    clrun_exec_destroy(t->apply);
    clrun_exec_destroy(t->exec);
    free(t->eval_slots);
    free(t->apply_slots);
    free(t->grads);
    free(t->grad_at);
    free(t->buckets);
    free(t->first_param);
    free(t->order_outputs);
    free(t->order_steps);
    free(t->order_host);
    free(t->order_at);
    free(t->order_count);
    free(t->order_land);
    free(t->landing);
    free(t->stage);
    free(t->stage_at);
    free(t->ov_done);
    free(t->ov_start);
    free(t->ov_end);
    clrun__train_free_slots(t);
    free(t->feeds);
    free(t->params);
    clrun__train_graph_free(&t->tg);
    free(t->remat_policy);
    free(t);
}

bool clrun__train_slot_on_host(const clrun_train *t, int32_t i)
{
    clrun__slot_role role = t->tg.slots[i].role;
    return (role == CLRUN__SLOT_STATE && t->offload >= CLRUN__OFFLOAD_STATE) ||
           (role == CLRUN__SLOT_PARAM && t->offload >= CLRUN__OFFLOAD_PARAMS);
}

uint64_t clrun__train_offloadable(const clrun_train *t, int level)
{
    uint64_t bytes = 0;
    for (int32_t i = 0; i < t->tg.slot_count; i++) {
        clrun__slot_role role = t->tg.slots[i].role;
        if ((role == CLRUN__SLOT_STATE && level >= CLRUN__OFFLOAD_STATE) ||
            (role == CLRUN__SLOT_PARAM && level >= CLRUN__OFFLOAD_PARAMS))
            bytes += clrun__train_slot_bytes(t, i);
    }
    return bytes;
}

void clrun__train_free_slots(clrun_train *t)
{
    for (int32_t i = 0; t->buffers && i < t->slot_blocks; i++)
        if (t->held[i])
            clrun_free(t->ctx, &t->buffers[i]);
    free(t->buffers);
    free(t->held);
    t->buffers = NULL;
    t->held = NULL;
    t->slot_blocks = 0;
    t->host_bytes = 0;
}

/* The slots that live in host memory, packed in host regions. */
static clrun_status host_slots(clrun_train *t)
{
    int32_t n = t->tg.slot_count, count = 0;
    uint64_t *sizes = calloc((size_t)n + 1, sizeof *sizes);
    const char **labels = calloc((size_t)n + 1, sizeof *labels);
    clrun_buffer *blocks = calloc((size_t)n + 1, sizeof *blocks);
    clrun_status s = sizes && labels && blocks ? CLRUN_OK : CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    for (int32_t i = 0; s == CLRUN_OK && i < n; i++)
        if (clrun__train_slot_on_host(t, i)) {
            sizes[count] = clrun__train_slot_bytes(t, i);
            labels[count++] = clrun_graph_tensor_ident(t->tg.graph, t->tg.slots[i].input);
        }
    clrun_memory_stats m0, m1;
    if (s == CLRUN_OK && count > 0 && (s = clrun_memory_stats_get(t->ctx, &m0)) == CLRUN_OK &&
        (s = clrun__pool_alloc_host(t->ctx, sizes, labels, (size_t)count, blocks)) == CLRUN_OK &&
        (s = clrun_memory_stats_get(t->ctx, &m1)) == CLRUN_OK)
        t->host_bytes = m1.host - m0.host; /* as the pool packed them */
    for (int32_t i = 0, k = 0; s == CLRUN_OK && i < n; i++)
        if (clrun__train_slot_on_host(t, i)) {
            t->buffers[i] = blocks[k++];
            t->held[i] = true;
        }
    free(sizes);
    free(labels);
    free(blocks);
    return s;
}

clrun_status clrun__train_alloc_slots(clrun_train *t)
{
    int32_t n = t->tg.slot_count;
    t->buffers = calloc((size_t)n + 1, sizeof *t->buffers);
    t->held = calloc((size_t)n + 1, sizeof *t->held);
    if (!t->buffers || !t->held)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    t->slot_blocks = n;
    clrun_status hs = host_slots(t);
    if (hs != CLRUN_OK)
        return hs;
    /* One chunk for them all: a block of their total, given back at once, leaves a chunk that
     * they then fill in turn, instead of a chunk each where the strategy's least chunk is
     * larger than one of them (what the pool reserves is what a pool's limit counts). */
    uint64_t align = clrun_context_device(t->ctx)->base_addr_align, total = 0;
    for (int32_t i = 0; i < n; i++)
        if (!t->held[i])
            total += (clrun__train_slot_bytes(t, i) + align - 1) / align * align;
    clrun_buffer whole;
    if (total > 0 && clrun_alloc_ex(t->ctx, total, 0, "the trainer's blocks", &whole) == CLRUN_OK)
        clrun_free(t->ctx, &whole);
    for (int32_t i = 0; i < n; i++) {
        if (t->held[i])
            continue; /* in host memory */
        clrun_status s = clrun_alloc_ex(t->ctx, clrun__train_slot_bytes(t, i), 0,
                                        clrun_graph_tensor_ident(t->tg.graph, t->tg.slots[i].input),
                                        &t->buffers[i]);
        if (s != CLRUN_OK)
            return s;
        t->held[i] = true;
    }
    return CLRUN_OK;
}

/* A slot's first values (its block is allocated): a parameter's are the model's weights, the
 * state's zeros. */
static clrun_status initial_values(clrun_train *t, const clrun_graph *model, int32_t i)
{
    const clrun__train_slot *slot = &t->tg.slots[i];
    uint64_t bytes = clrun__train_slot_bytes(t, i);
    if (slot->role != CLRUN__SLOT_PARAM && slot->role != CLRUN__SLOT_STATE)
        return CLRUN_OK;
    void *host = calloc(1, (size_t)bytes);
    if (host == NULL)
        return clrun__fail(t->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "train: out of host memory");
    /* A parameter or running statistic starts as the model's constant of its name. */
    clrun_tensor_id source = clrun__graph_find_ident(model, clrun_graph_tensor_ident(t->tg.graph, slot->input));
    if (source >= 0 && model->tensors[source].kind == CLRUN__TENSOR_CONSTANT &&
        (slot->role == CLRUN__SLOT_PARAM || slot->param < 0))
        clrun__constant_values(&model->tensors[source], host);
    clrun_status s = clrun_buffer_write(t->ctx, &t->buffers[i], host);
    free(host);
    return s;
}

/* With a reduce hook: the apply graph's executor, its inputs' slots (by name: the step has
 * them all) and the host buffer of the gradients. */
static clrun_status prepare_apply(clrun_train *t)
{
    const clrun_tensor_id *inputs;
    int32_t count = clrun_graph_inputs(t->tg.apply, &inputs);
    t->apply_slots = calloc((size_t)(count ? count : 1), sizeof *t->apply_slots);
    t->grad_at = calloc((size_t)t->tg.slot_count, sizeof *t->grad_at);
    if (t->apply_slots == NULL || t->grad_at == NULL)
        return clrun__fail(t->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "train: out of host memory");
    /* the gradients lie in grads in the parameters' order; a GRAD slot finds its own by its
     * parameter's slot */
    for (int32_t i = 0; i < t->tg.param_count; i++) {
        t->grad_at[t->params[i]] = t->grad_count;
        t->grad_count += clrun_tensor_elements(
            clrun_graph_tensor_type(t->tg.graph, t->tg.slots[t->params[i]].input));
    }
    t->grads = malloc(sizeof *t->grads * (size_t)(t->grad_count ? t->grad_count : 1));
    if (t->grads == NULL)
        return clrun__fail(t->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "train: out of host memory");
    for (int32_t k = 0; k < count; k++) {
        t->apply_slots[k] = -1;
        const char *ident = clrun_graph_tensor_ident(t->tg.apply, inputs[k]);
        for (int32_t i = 0; i < t->tg.slot_count; i++)
            if (strcmp(clrun_graph_tensor_ident(t->tg.graph, t->tg.slots[i].input), ident) == 0)
                t->apply_slots[k] = i;
        if (t->apply_slots[k] < 0)
            return clrun__fail(t->ctx, CLRUN_ERROR_INVALID_GRAPH, "train: update input %s is no "
                               "input of the step", clrun_graph_tensor_name(t->tg.apply, inputs[k]));
    }
    clrun_exec_options o = t->options.exec;
    o.profile = false;
    return clrun__exec_create_beside(t->ctx, t->tg.apply, &o, NULL, &t->apply);
}

/* A bucketed reduction: the parameters in the order the step completes their gradients (then
 * in parameter order), cut into buckets of at least bucket_bytes; each bucket's gradients laid
 * out back to back in the step's device memory where its executor can (one read a bucket),
 * and in stage as there. Before the evaluation's executor, whose arena may lie in the step's. */
static clrun_status prepare_buckets(clrun_train *t)
{
    int32_t n = t->tg.param_count;
    uint64_t cap = t->options.bucket_bytes ? t->options.bucket_bytes : (uint64_t)1 << 20;
    int32_t *steps = t->order_steps = calloc((size_t)(n ? n : 1), sizeof *steps);
    int32_t *order = calloc((size_t)(n ? n : 1), sizeof *order);
    uint64_t *offsets = calloc((size_t)n + 1, sizeof *offsets);
    uint64_t *group_bytes = calloc((size_t)n + 1, sizeof *group_bytes);
    t->buckets = calloc((size_t)(n ? n : 1), sizeof *t->buckets);
    t->first_param = calloc((size_t)n + 1, sizeof *t->first_param);
    t->order_outputs = calloc((size_t)(n ? n : 1), sizeof *t->order_outputs);
    t->order_host = calloc((size_t)(n ? n : 1), sizeof *t->order_host);
    t->order_at = calloc((size_t)n + 1, sizeof *t->order_at);
    t->order_count = calloc((size_t)n + 1, sizeof *t->order_count);
    t->order_land = calloc((size_t)n + 1, sizeof *t->order_land);
    t->stage_at = calloc((size_t)t->tg.slot_count, sizeof *t->stage_at);
    t->ov_done = calloc((size_t)n + 1, sizeof *t->ov_done);
    t->ov_start = calloc((size_t)n + 1, sizeof *t->ov_start);
    t->ov_end = calloc((size_t)n + 1, sizeof *t->ov_end);
    if (!steps || !order || !offsets || !group_bytes || !t->buckets || !t->first_param ||
        !t->order_outputs || !t->order_host || !t->order_at || !t->order_count || !t->order_land ||
        !t->stage_at ||
        !t->ov_done || !t->ov_start || !t->ov_end) {
        free(order), free(offsets), free(group_bytes);
        return clrun__fail(t->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "train: out of host memory");
    }
    for (int32_t i = 0; i < n; i++) { /* insertion by (step, index): few parameters */
        int32_t step = clrun__exec_output_step(t->exec, t->tg.slots[t->params[i]].grad_output);
        int32_t k = i;
        while (k > 0 && steps[k - 1] > step) {
            steps[k] = steps[k - 1];
            order[k] = order[k - 1];
            k--;
        }
        steps[k] = step;
        order[k] = i;
    }
    int32_t b = 0;
    for (int32_t k = 0; k < n; k++) { /* the cut, by the gradients' own bytes */
        const clrun__train_slot *slot = &t->tg.slots[t->params[order[k]]];
        uint64_t count = clrun_tensor_elements(clrun_graph_tensor_type(t->tg.graph, slot->input));
        clrun_train_bucket *bucket = &t->buckets[b];
        if (bucket->params == 0)
            t->first_param[b] = k;
        t->order_outputs[k] = slot->grad_output;
        bucket->count += count;
        bucket->params++;
        bucket->step = steps[k];
        /* full, and the next gradient comes later (those of one step go together) */
        if (sizeof(float) * bucket->count >= cap && (k + 1 == n || steps[k + 1] > steps[k]))
            b++;
    }
    t->bucket_count = b < n && t->buckets[b].params > 0 ? b + 1 : b;
    t->first_param[t->bucket_count] = n;
    /* one group of the step's outputs per bucket: each bucket one device region; not under a
     * memory budget, whose step was measured and fitted without the groups (a group holds its
     * bytes from its first gradient on, and its padding) */
    bool budget = t->options.graph.memory_budget != 0 || t->budget_planned ||
                  t->offload != CLRUN__OFFLOAD_NONE;
    clrun_status s = t->options.bucket_per_gradient || budget
                         ? CLRUN_OK
                         : clrun__exec_group_outputs(t->exec, t->bucket_count, t->first_param,
                                                     t->order_outputs, offsets, group_bytes);
    /* stage: the buckets' gradients back to back, as bucket_start gets them (the same floats
     * on every process whatever its device's alignment); landing: the contiguous buckets as
     * their device region lies, padding included, which each one read fills */
    uint64_t at = 0, land = 0;
    for (b = 0; s == CLRUN_OK && b < t->bucket_count; b++) {
        clrun_train_bucket *bucket = &t->buckets[b];
        bucket->first = at;
        bucket->contiguous = group_bytes[b] > 0;
        for (int32_t k = t->first_param[b]; k < t->first_param[b + 1]; k++) {
            const clrun__train_slot *slot = &t->tg.slots[t->params[order[k]]];
            t->order_count[k] =
                clrun_tensor_elements(clrun_graph_tensor_type(t->tg.graph, slot->input));
            t->order_at[k] = at;
            t->order_land[k] = bucket->contiguous ? land + offsets[k] / sizeof(float) : UINT64_MAX;
            t->stage_at[t->params[order[k]]] = at;
            at += t->order_count[k];
        }
        if (bucket->contiguous) {
            bucket->padding = group_bytes[b] / sizeof(float) - bucket->count;
            land += group_bytes[b] / sizeof(float);
        }
    }
    free(order), free(offsets), free(group_bytes);
    if (s != CLRUN_OK)
        return s;
    t->stage = calloc((size_t)(at ? at : 1), sizeof *t->stage);
    t->landing = land ? calloc((size_t)land, sizeof *t->landing) : NULL;
    if (t->stage == NULL || (land && t->landing == NULL))
        return clrun__fail(t->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "train: out of host memory");
    for (int32_t k = 0; k < n; k++)
        t->order_host[k] = t->order_land[k] != UINT64_MAX ? (void *)(t->landing + t->order_land[k])
                                                          : (void *)(t->stage + t->order_at[k]);
    return CLRUN_OK;
}

clrun_status clrun_train_create(clrun_context *ctx, const clrun_graph *model,
                                const clrun_train_options *options, clrun_train **out)
{
    if (out)
        *out = NULL;
    if (ctx == NULL || model == NULL || out == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT, "clrun_train_create: NULL context, "
                           "model or out");
    clrun_train *t = calloc(1, sizeof *t);
    if (t == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "train: out of host memory");
    t->ctx = ctx;
    t->label_slot = -1;
    if (options)
        t->options = *options;
    else
        clrun_train_options_init(&t->options);
    if ((t->options.bucket_start == NULL) != (t->options.bucket_test == NULL)) {
        free(t);
        return clrun__fail(ctx, CLRUN_ERROR_INVALID_ARGUMENT, "clrun_train_create: "
                           "bucket_start and bucket_test go together");
    }
    if (t->options.bucket_start) /* the step in two parts, the reduction in buckets */
        t->options.split_update = true;
    /* the executors' budget is the trainer's: it holds the step and the evaluation together */
    if (t->options.graph.memory_budget == 0)
        t->options.graph.memory_budget = t->options.exec.memory_budget;
    t->options.exec.memory_budget = 0;
    char err[1024];
    clrun_status s = clrun_graph_validate((clrun_graph *)model);
    if (s != CLRUN_OK) {
        clrun__fail(ctx, s, "train: %s", clrun_graph_last_error(model));
        goto fail;
    }
    s = clrun__train_build_step(t, model, &t->options.graph, err, sizeof err);
    if (s != CLRUN_OK) {
        clrun__fail(ctx, s, "%s", err);
        goto fail;
    }
    t->options.graph.params = NULL; /* the caller's array and string are not ours to keep */
    t->options.graph.param_count = 0;
    t->options.graph.remat = NULL;
    t->options.graph.loss_tensor = NULL;
    int32_t n = t->tg.slot_count;
    t->feeds = calloc((size_t)n, sizeof *t->feeds);
    t->params = calloc((size_t)n, sizeof *t->params);
    if (!t->feeds || !t->params) {
        s = clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "train: out of host memory");
        goto fail;
    }
    int32_t params = 0;
    for (int32_t i = 0; i < n; i++) {
        const clrun__train_slot *slot = &t->tg.slots[i];
        if (slot->role == CLRUN__SLOT_DATA || slot->role == CLRUN__SLOT_TARGET)
            t->feeds[t->feed_count++] = i;
        if (slot->role == CLRUN__SLOT_PARAM) {
            t->params[params++] = i;
            t->param_bytes += clrun__train_slot_bytes(t, i);
        }
        if (slot->role == CLRUN__SLOT_STATE)
            t->state_bytes += clrun__train_slot_bytes(t, i);
        if (slot->role == CLRUN__SLOT_TARGET && t->options.graph.loss == CLRUN_LOSS_XENT) {
            t->label_slot = i;
            const clrun_tensor_type *logits = clrun_graph_tensor_type(t->tg.graph, t->tg.logits);
            t->classes = logits->shape[logits->rank - 1];
        }
    }
    /* The labels come last among the feeds, after the model's inputs. */
    for (int32_t k = 0; k + 1 < t->feed_count; k++)
        if (t->tg.slots[t->feeds[k]].role == CLRUN__SLOT_TARGET) {
            int32_t target = t->feeds[k];
            memmove(&t->feeds[k], &t->feeds[k + 1], sizeof *t->feeds * (size_t)(t->feed_count - k - 1));
            t->feeds[t->feed_count - 1] = target;
            break;
        }
    if (t->options.bucket_start && (s = prepare_buckets(t)) != CLRUN_OK)
        goto fail;
    const clrun_tensor_id *eval_inputs;
    int32_t eval_count = clrun_graph_inputs(t->tg.eval, &eval_inputs);
    t->eval_slots = calloc((size_t)(eval_count ? eval_count : 1), sizeof *t->eval_slots);
    if (t->eval_slots == NULL) {
        s = clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "train: out of host memory");
        goto fail;
    }
    for (int32_t k = 0; k < eval_count; k++) {
        t->eval_slots[k] = -1;
        const char *ident = clrun_graph_tensor_ident(t->tg.eval, eval_inputs[k]);
        for (int32_t i = 0; i < n; i++)
            if (strcmp(clrun_graph_tensor_ident(t->tg.graph, t->tg.slots[i].input), ident) == 0)
                t->eval_slots[k] = i;
        if (t->eval_slots[k] < 0) {
            s = clrun__fail(ctx, CLRUN_ERROR_INVALID_GRAPH, "train: evaluation input %s is no "
                            "input of the step", clrun_graph_tensor_name(t->tg.eval, eval_inputs[k]));
            goto fail;
        }
    }
    clrun_exec_options eval_options = t->options.exec;
    eval_options.profile = false;
    if (t->budget_planned) { /* as clrun__train_build_step measured it */
        eval_options.mode = CLRUN_EXEC_PLANNED;
        eval_options.plan_time_limit_s = 0;
    }
    s = clrun__exec_create_beside(ctx, t->tg.eval, &eval_options,
                                  t->budget_planned && clrun__train_eval_shares(t) ? t->exec : NULL,
                                  &t->eval);
    if (s != CLRUN_OK || (t->tg.apply && (s = prepare_apply(t)) != CLRUN_OK))
        goto fail;
    for (int32_t i = 0; i < n && s == CLRUN_OK; i++)
        s = initial_values(t, model, i);
    if (s != CLRUN_OK)
        goto fail;
    *out = t;
    return CLRUN_OK;
fail:
    {
        /* Keep the message of the failure past the cleanup's calls. */
        char why[CLRUN__ERROR_MAX];
        snprintf(why, sizeof why, "%s", clrun_last_error(ctx));
        clrun_train_destroy(t);
        return clrun__fail(ctx, s, "%s", why);
    }
}

int32_t clrun_train_feed_count(const clrun_train *t)
{
    return t ? t->feed_count : 0;
}

clrun_status clrun_train_feed_info(const clrun_train *t, int32_t i, const char **name,
                                   clrun_tensor_type *type)
{
    if (t == NULL || i < 0 || i >= t->feed_count)
        return clrun__fail(t ? t->ctx : NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                           "clrun_train_feed_info: no feed %d", i);
    clrun_tensor_id id = t->tg.slots[t->feeds[i]].input;
    if (name)
        *name = clrun_graph_tensor_name(t->tg.graph, id);
    if (type)
        *type = *clrun_graph_tensor_type(t->tg.graph, id);
    return CLRUN_OK;
}

/* Labels outside [0, classes) (ignoring nothing): refused before anything is donated. */
static clrun_status check_labels(clrun_train *t, const void *labels)
{
    const clrun_tensor_type *type = clrun_graph_tensor_type(t->tg.graph, t->tg.slots[t->label_slot].input);
    uint64_t n = clrun_tensor_elements(type);
    for (uint64_t k = 0; k < n; k++) {
        int64_t v;
        if (type->dtype == CLRUN_I32) {
            int32_t w;
            memcpy(&w, (const char *)labels + 4 * k, 4);
            v = w;
        } else {
            memcpy(&v, (const char *)labels + 8 * k, 8);
        }
        if (v < 0 || v >= t->classes)
            return clrun__fail(t->ctx, CLRUN_ERROR_INVALID_ARGUMENT, "train: step %llu: label %lld "
                               "at position %llu is outside [0, %lld) (the logits have %lld "
                               "classes)", (unsigned long long)t->steps + 1, (long long)v,
                               (unsigned long long)k, (long long)t->classes, (long long)t->classes);
    }
    return CLRUN_OK;
}

/* The scalars of step number `step` (1 for the first). */
static clrun_status write_hypers(clrun_train *t, uint64_t step)
{
    const clrun_optimizer *o = &t->options.graph.optimizer;
    for (int32_t i = 0; i < t->tg.slot_count; i++) {
        const clrun__train_slot *slot = &t->tg.slots[i];
        if (slot->role != CLRUN__SLOT_HYPER)
            continue;
        double v = 0.0;
        switch (slot->hyper) {
        case CLRUN__HYPER_LR: v = o->lr; break;
        case CLRUN__HYPER_STEP_SIZE: v = o->lr / (1.0 - pow(o->beta1, (double)step)); break;
        case CLRUN__HYPER_BC2_SQRT: v = sqrt(1.0 - pow(o->beta2, (double)step)); break;
        case CLRUN__HYPER_DECAY: v = 1.0 - o->lr * o->weight_decay; break;
        default: break;
        }
        clrun_status s;
        if (slot->hyper == CLRUN__HYPER_SEED) {
            int64_t seed = (int64_t)(t->options.graph.dropout_seed * 1000003u + step);
            s = clrun_buffer_write(t->ctx, &t->buffers[i], &seed);
        } else {
            float f = (float)v;
            s = clrun_buffer_write(t->ctx, &t->buffers[i], &f);
        }
        if (s != CLRUN_OK)
            return s;
    }
    return CLRUN_OK;
}

/* Checks the feeds (count, labels in range) and uploads them: nothing is donated yet. */
static clrun_status write_feeds(clrun_train *t, const void *const *feeds, int32_t count)
{
    if (t->broken)
        return clrun__fail(t->ctx, CLRUN_ERROR_INVALID_ARGUMENT, "train: step %llu failed and "
                           "its donated state is gone: create the trainer again (or load a "
                           "saved state)", (unsigned long long)t->broken_step);
    if (count != t->feed_count || (count > 0 && feeds == NULL))
        return clrun__fail(t->ctx, CLRUN_ERROR_INVALID_ARGUMENT, "train: a step takes %d feeds, "
                           "%d given", t->feed_count, count);
    for (int32_t k = 0; k < count; k++)
        if (feeds[k] == NULL)
            return clrun__fail(t->ctx, CLRUN_ERROR_INVALID_ARGUMENT, "train: feed %s is NULL",
                               clrun_graph_tensor_name(t->tg.graph, t->tg.slots[t->feeds[k]].input));
    clrun_status s;
    if (t->label_slot >= 0)
        for (int32_t k = 0; k < count; k++)
            if (t->feeds[k] == t->label_slot && (s = check_labels(t, feeds[k])) != CLRUN_OK)
                return s;
    for (int32_t k = 0; k < count; k++)
        if ((s = clrun_buffer_write(t->ctx, &t->buffers[t->feeds[k]], feeds[k])) != CLRUN_OK)
            return s;
    return CLRUN_OK;
}

clrun_status clrun_train_evaluate(clrun_train *t, const void *const *feeds, int32_t count,
                                  int64_t rows, clrun_train_eval_result *result)
{
    if (t == NULL || result == NULL)
        return clrun__fail(t ? t->ctx : NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                           "clrun_train_evaluate: NULL trainer or result");
    const clrun_graph *eg = t->tg.eval;
    const clrun_tensor_id *outs;
    clrun_graph_outputs(eg, &outs);
    const clrun_tensor_type *lt = clrun_graph_tensor_type(eg, outs[0]);
    int64_t batch = t->tg.eval_per_row ? lt->shape[0] : -1;
    if (t->tg.eval_per_row ? (rows < 1 || rows > batch) : rows != -1)
        return clrun__fail(t->ctx, CLRUN_ERROR_INVALID_ARGUMENT, "train: evaluating %lld rows: %s",
                           (long long)rows, t->tg.eval_per_row ? "give 1 to the batch's rows"
                                                              : "this loss is evaluated on whole "
                                                                "batches (rows -1)");
    clrun_status s = write_feeds(t, feeds, count);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_id *inputs;
    int32_t n = clrun_graph_inputs(eg, &inputs);
    clrun_buffer *in = calloc((size_t)(n ? n : 1), sizeof *in);
    if (in == NULL)
        return clrun__fail(t->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "train: out of host memory");
    for (int32_t k = 0; k < n; k++)
        in[k] = t->buffers[t->eval_slots[k]];
    s = clrun_exec_run(t->eval, in, n);
    free(in);
    if (s != CLRUN_OK)
        return s;
    uint64_t elements = clrun_tensor_elements(lt);
    float *values = malloc(sizeof *values * (size_t)elements * 2);
    if (values == NULL)
        return clrun__fail(t->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "train: out of host memory");
    s = clrun_exec_read_output(t->eval, 0, values, sizeof *values * elements);
    if (s == CLRUN_OK && t->tg.eval_per_row)
        s = clrun_exec_read_output(t->eval, 1, values + elements, sizeof *values * elements);
    if (s == CLRUN_OK) {
        /* the first `rows` rows of [batch, ...] */
        uint64_t take = t->tg.eval_per_row ? elements / (uint64_t)batch * (uint64_t)rows : 1;
        double loss = 0.0, hits = 0.0;
        for (uint64_t k = 0; k < take; k++) {
            loss += values[k];
            hits += t->tg.eval_per_row ? values[elements + k] : 0.0;
        }
        result->loss = t->tg.eval_per_row ? loss / (double)take : loss;
        result->correct = t->tg.eval_per_row ? (int64_t)hits : -1;
        result->rows = t->tg.eval_per_row ? (int64_t)take : -1;
    }
    free(values);
    return s;
}

/* Whether a slot belongs to the update part of a split step (with a reduce hook): a parameter,
 * or optimizer state of one; the rest (batch norms' running statistics) is the step's. */
static bool applied(const clrun__train_slot *slot)
{
    return slot->role == CLRUN__SLOT_PARAM || slot->param >= 0;
}

/* A run of the step (or, apply: of the updates) failed: the state it was given is gone. */
static void broken(clrun_train *t, bool apply)
{
    t->broken = true;
    t->broken_step = t->steps + 1;
    for (int32_t i = 0; i < t->tg.slot_count; i++) {
        const clrun__train_slot *slot = &t->tg.slots[i];
        if (slot->role == CLRUN__SLOT_PARAM || slot->role == CLRUN__SLOT_STATE)
            if (!t->apply || apply == applied(slot))
                t->held[i] = false; /* consumed by the failed run */
    }
}

/* The state that `exec` (the step, or with apply the updates) updated, taken back from it. */
static clrun_status take_state(clrun_train *t, clrun_exec *exec, bool apply)
{
    clrun_status s = CLRUN_OK;
    for (int32_t i = 0; i < t->tg.slot_count; i++) {
        const clrun__train_slot *slot = &t->tg.slots[i];
        if (slot->role != CLRUN__SLOT_PARAM && slot->role != CLRUN__SLOT_STATE)
            continue;
        if (t->apply && apply != applied(slot))
            continue; /* the other part's */
        if (t->options.graph.no_donation)
            clrun_free(t->ctx, &t->buffers[i]);
        clrun_status took = clrun_exec_take_output(exec, slot->output_index, &t->buffers[i]);
        if (took != CLRUN_OK) {
            t->held[i] = false;
            t->broken = true;
            t->broken_step = t->steps + 1;
            s = s == CLRUN_OK ? took : s;
        }
    }
    return s;
}

/* A split step's gradients of this run of the first part, to host memory in parameter order. */
static clrun_status read_gradients(clrun_train *t, float *out)
{
    clrun_status s = CLRUN_OK;
    for (int32_t i = 0; i < t->tg.param_count && s == CLRUN_OK; i++) {
        const clrun__train_slot *slot = &t->tg.slots[t->params[i]];
        uint64_t n = clrun_tensor_elements(clrun_graph_tensor_type(t->tg.graph, slot->input));
        s = clrun_exec_read_output(t->exec, slot->grad_output, out + t->grad_at[t->params[i]],
                                   sizeof *out * n);
    }
    return s;
}

/* A split step's second part: the gradients (host memory, parameter order) to their slots, and
 * the updates. */
static clrun_status apply_gradients(clrun_train *t, const float *gradients, const uint64_t *at)
{
    clrun_status s = CLRUN_OK;
    for (int32_t i = 0; i < t->tg.slot_count && s == CLRUN_OK; i++) {
        const clrun__train_slot *slot = &t->tg.slots[i];
        if (slot->role == CLRUN__SLOT_GRAD)
            s = clrun_buffer_write(t->ctx, &t->buffers[i], gradients + at[slot->param]);
    }
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_id *inputs;
    int32_t n = clrun_graph_inputs(t->tg.apply, &inputs);
    clrun_buffer *in = calloc((size_t)(n ? n : 1), sizeof *in);
    if (in == NULL)
        return clrun__fail(t->ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "train: out of host memory");
    for (int32_t k = 0; k < n; k++)
        in[k] = t->buffers[t->apply_slots[k]];
    s = clrun_exec_run(t->apply, in, n);
    free(in);
    if (s != CLRUN_OK) {
        broken(t, true);
        return s;
    }
    return take_state(t, t->apply, true);
}

/* With a reduce hook, after the step: its gradients to the host, the hook, the reduced
 * gradients to their slots, and the updates. */
static clrun_status reduce_and_apply(clrun_train *t)
{
    clrun_status s = read_gradients(t, t->grads);
    if (s != CLRUN_OK || t->options.reduce == NULL)
        return s == CLRUN_OK ? apply_gradients(t, t->grads, t->grad_at) : s;
    char err[512] = "";
    s = t->options.reduce(t->options.reduce_user, t->steps + 1, t->grads, t->grad_count, err,
                          sizeof err);
    if (s != CLRUN_OK)
        return clrun__fail(t->ctx, s, "train: step %llu: reducing the gradients failed: %s",
                           (unsigned long long)(t->steps + 1), err[0] ? err : clrun_strerror(s));
    return apply_gradients(t, t->grads, t->grad_at);
}

static uint64_t host_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Whether every read of bucket b is complete; a failed read is an error. */
static clrun_status bucket_read(clrun_train *t, const cl_event *read, int32_t b, bool *ready)
{
    *ready = true;
    for (int32_t k = t->first_param[b]; k < t->first_param[b + 1] && *ready; k++) {
        if (read[k] == NULL) { /* not enqueued yet */
            *ready = false;
            break;
        }
        cl_int state = CL_QUEUED;
        cl_int error = clrun__cl.GetEventInfo(read[k], CL_EVENT_COMMAND_EXECUTION_STATUS,
                                              sizeof state, &state, NULL);
        if (error == CL_SUCCESS && state < 0)
            error = state;
        if (error != CL_SUCCESS)
            return clrun__fail_cl(t->ctx, error, "clGetEventInfo", "reading the gradients of "
                                  "bucket %d", (int)b);
        *ready = state == CL_COMPLETE;
    }
    return CLRUN_OK;
}

/* A bucketed reduction's failure in this step (the hook's status and err): kept for the step to
 * report once the run is over (so that the step leaves the state as it was, as a failing
 * `reduce` does). No bucket starts after it. */
static void bucket_failed(clrun_train *t, clrun_status s, const char *err)
{
    if (t->bucket_status != CLRUN_OK)
        return; /* the first failure is the one to report */
    t->bucket_status = s;
    snprintf(t->bucket_err, sizeof t->bucket_err, "%s", err[0] ? err : clrun_strerror(s));
}

/* Polls the started buckets not yet done once each (a bucket_test that fails gives its
 * reduction up: done, the failure kept), then moves ov_open past those done. *changed: whether
 * one finished. */
static void bucket_poll(clrun_train *t, bool *changed)
{
    uint64_t step = t->steps + 1;
    char err[512] = "";
    for (int32_t b = t->ov_open; b < t->ov_next; b++) {
        if (t->ov_done[b])
            continue;
        clrun_status s = t->options.bucket_test(t->options.reduce_user, step, b, &t->ov_done[b], err,
                                                sizeof err);
        if (s != CLRUN_OK) {
            bucket_failed(t, s, err);
            t->ov_done[b] = true;
        }
        if (t->ov_done[b]) {
            t->ov_end[b] = host_ns();
            *changed = true;
        }
    }
    while (t->ov_open < t->ov_next && t->ov_done[t->ov_open])
        t->ov_open++;
}

/* Between polls that changed nothing the thread sleeps a little (the device's threads may
 * share its cores), longer the longer nothing changes: from 1 µs, doubling, up to 50 µs. */
static void back_off(long *pause_ns, bool changed)
{
    if (changed) {
        *pause_ns = 1000;
        return;
    }
    struct timespec ts = {0, *pause_ns};
    nanosleep(&ts, NULL);
    *pause_ns = *pause_ns < 32000 ? *pause_ns * 2 : 50000;
}

/* Every started bucket waited for, whatever failed (the run, a read, a hook): nothing may write
 * into stage once the step returns. */
static void bucket_drain(clrun_train *t)
{
    long pause_ns = 1000;
    while (t->ov_open < t->ov_next) {
        bool changed = false;
        bucket_poll(t, &changed);
        back_off(&pause_ns, changed);
    }
}

/* Bucket b's gradients have arrived: how many reads brought them (the distinct events), and
 * those of a bucket read as one device region copied from landing to stage without the
 * padding. */
static void bucket_arrived(clrun_train *t, const cl_event *read, int32_t b)
{
    clrun_train_bucket *bk = &t->buckets[b];
    int32_t first = t->first_param[b], end = t->first_param[b + 1];
    bk->reads = 0;
    for (int32_t k = first; k < end; k++) {
        bool seen = false;
        for (int32_t j = first; j < k && !seen; j++)
            seen = read[j] == read[k];
        bk->reads += !seen;
        if (t->order_land[k] != UINT64_MAX)
            memcpy(t->stage + t->order_at[k], t->landing + t->order_land[k],
                   sizeof *t->stage * (size_t)t->order_count[k]);
    }
}

/* One pass over the buckets: those whose gradients are now in host memory handed to
 * bucket_start, in order, and each started one not yet done polled with bucket_test.
 * *changed: whether a bucket started or finished. */
static clrun_status bucket_pass(clrun_train *t, const cl_event *read, bool *changed)
{
    uint64_t step = t->steps + 1;
    char err[512] = "";
    clrun_status s = CLRUN_OK;
    *changed = false;
    while (t->bucket_status == CLRUN_OK && t->ov_next < t->bucket_count) {
        bool ready;
        if ((s = bucket_read(t, read, t->ov_next, &ready)) != CLRUN_OK)
            return s;
        if (!ready)
            break;
        int32_t b = t->ov_next;
        clrun_train_bucket *bk = &t->buckets[b];
        uint64_t now = host_ns(), end = 0;
        cl_event last = read[t->first_param[b + 1] - 1];
        if (t->options.exec.profile &&
            clrun__cl.GetEventProfilingInfo(last, CL_PROFILING_COMMAND_END, sizeof end, &end,
                                            NULL) == CL_SUCCESS && end && now >= end &&
            now - end < t->ov_seen)
            t->ov_seen = now - end;
        bk->ready_ns = end;
        bucket_arrived(t, read, b);
        t->ov_start[b] = host_ns();
        s = t->options.bucket_start(t->options.reduce_user, step, b, t->stage + bk->first,
                                    bk->count, err, sizeof err);
        if (s != CLRUN_OK) {
            bucket_failed(t, s, err);
            break;
        }
        t->ov_next++;
        *changed = true;
    }
    bucket_poll(t, changed);
    return CLRUN_OK;
}

/* The bucketed reduction, while the step runs (its exec_watch hook): a pass after each node
 * is enqueued; at the end, passes until every bucket started is done (after a failure, those
 * started before it), backing off between passes that change nothing. */
static clrun_status overlap(void *user, const cl_event *read, bool end)
{
    clrun_train *t = user;
    bool changed;
    clrun_status s = bucket_pass(t, read, &changed);
    if (s != CLRUN_OK || !end)
        return s;
    long pause_ns = 1000;
    for (;;) {
        bool more = t->bucket_status == CLRUN_OK ? t->ov_open < t->bucket_count
                                                 : t->ov_open < t->ov_next;
        if (!more)
            break;
        back_off(&pause_ns, changed);
        if ((s = bucket_pass(t, read, &changed)) != CLRUN_OK)
            return s;
    }
    /* the host's times on the device's clock (run_step counts them from the profile's origin) */
    for (int32_t b = 0; b < t->bucket_count; b++) {
        clrun_train_bucket *bk = &t->buckets[b];
        bool known = t->ov_seen != UINT64_MAX && b < t->ov_next;
        bk->start_ns = known && t->ov_start[b] > t->ov_seen ? t->ov_start[b] - t->ov_seen : 0;
        bk->end_ns = known && t->ov_end[b] > t->ov_seen ? t->ov_end[b] - t->ov_seen : 0;
    }
    return CLRUN_OK;
}

/* The step's first part (the whole step without a split): feeds, hyperparameters, the run, and
 * the state it updated taken back. With a bucketed reduction, the run reads the gradients to
 * stage and reduces them as it goes (overlap). */
static clrun_status run_step(clrun_train *t, const void *const *feeds, int32_t count,
                             bool buckets)
{
    clrun_status s = write_feeds(t, feeds, count);
    if (s != CLRUN_OK)
        return s;
    if ((s = write_hypers(t, t->steps + 1)) != CLRUN_OK)
        return s;
    if (buckets) {
        t->bucket_status = CLRUN_OK;
        t->ov_next = t->ov_open = 0;
        t->ov_seen = UINT64_MAX;
        memset(t->ov_done, 0, sizeof *t->ov_done * (size_t)t->bucket_count);
        clrun__exec_watch w = {.count = t->tg.param_count, .outputs = t->order_outputs,
                               .steps = t->order_steps, .host = t->order_host,
                               .whole_groups = t->landing != NULL, .wait = overlap,
                               .user = t};
        s = clrun__exec_run_watched(t->exec, t->buffers, t->tg.slot_count, &w);
        bucket_drain(t); /* after a failed run too */
        uint64_t origin = clrun__exec_profile_origin(t->exec);
        for (int32_t b = 0; s == CLRUN_OK && b < t->bucket_count; b++) {
            clrun_train_bucket *bk = &t->buckets[b];
            bk->ready_ns = bk->ready_ns > origin ? bk->ready_ns - origin : 0;
            bk->start_ns = bk->start_ns > origin ? bk->start_ns - origin : 0;
            bk->end_ns = bk->end_ns > origin ? bk->end_ns - origin : 0;
        }
    } else {
        s = clrun_exec_run(t->exec, t->buffers, t->tg.slot_count);
    }
    if (s != CLRUN_OK) {
        broken(t, false);
        return s;
    }
    /* The updated state: the same blocks, handed back (without donation, new blocks: the old
     * ones are ours to free). */
    return take_state(t, t->exec, false);
}

/* The loss and correct rows of the last run of the step (for step number `step`); a loss that
 * is not finite fails. */
static clrun_status step_result(clrun_train *t, uint64_t step, clrun_train_step_result *result)
{
    float loss = 0.0f, correct = 0.0f;
    clrun_status s = clrun_exec_read_output(t->exec, t->tg.loss_output, &loss, sizeof loss);
    if (s == CLRUN_OK && t->tg.correct_output >= 0)
        s = clrun_exec_read_output(t->exec, t->tg.correct_output, &correct, sizeof correct);
    if (s != CLRUN_OK)
        return s;
    if (result) {
        result->step = step;
        result->loss = loss;
        result->correct = t->tg.correct_output >= 0 ? (int64_t)correct : -1;
        result->rows = -1;
        if (t->label_slot >= 0)
            result->rows = (int64_t)clrun_tensor_elements(
                clrun_graph_tensor_type(t->tg.graph, t->tg.slots[t->label_slot].input));
    }
    if (!isfinite(loss))
        return clrun__fail(t->ctx, CLRUN_ERROR_INVALID_ARGUMENT, "train: step %llu gave a loss of "
                           "%s", (unsigned long long)step, isnan(loss) ? "NaN" : "infinity");
    return CLRUN_OK;
}

clrun_status clrun_train_step(clrun_train *t, const void *const *feeds, int32_t count,
                              clrun_train_step_result *result)
{
    if (t == NULL)
        return clrun__fail(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "clrun_train_step: NULL trainer");
    bool buckets = t->bucket_count > 0;
    clrun_status s = run_step(t, feeds, count, buckets);
    if (s != CLRUN_OK)
        return s;
    if (buckets && t->bucket_status != CLRUN_OK)
        return clrun__fail(t->ctx, t->bucket_status, "train: step %llu: reducing the gradients "
                           "failed: %s", (unsigned long long)(t->steps + 1), t->bucket_err);
    if (buckets)
        s = apply_gradients(t, t->stage, t->stage_at);
    else if (t->apply)
        s = reduce_and_apply(t);
    if (s != CLRUN_OK)
        return s;
    t->steps++;
    return step_result(t, t->steps, result);
}

uint64_t clrun_train_gradient_count(const clrun_train *t)
{
    return t && t->apply ? t->grad_count : 0;
}

/* Whether t runs its step in two parts and count is its gradients' floats; else the error. */
static clrun_status check_split(clrun_train *t, const char *fn, const void *gradients,
                                uint64_t count)
{
    if (t == NULL || gradients == NULL)
        return clrun__fail(t ? t->ctx : NULL, CLRUN_ERROR_INVALID_ARGUMENT, "%s: NULL trainer or "
                           "gradients", fn);
    if (t->apply == NULL)
        return clrun__fail(t->ctx, CLRUN_ERROR_INVALID_ARGUMENT, "%s: the trainer's step is not "
                           "split (clrun_train_options.split_update or reduce)", fn);
    if (count != t->grad_count)
        return clrun__fail(t->ctx, CLRUN_ERROR_INVALID_ARGUMENT, "%s: the parameters have %llu "
                           "gradient values, %llu given", fn, (unsigned long long)t->grad_count,
                           (unsigned long long)count);
    return CLRUN_OK;
}

clrun_status clrun_train_gradients(clrun_train *t, const void *const *feeds, int32_t count,
                                   float *gradients, uint64_t gradient_count,
                                   clrun_train_step_result *result)
{
    clrun_status s = check_split(t, "clrun_train_gradients", gradients, gradient_count);
    if (s == CLRUN_OK)
        s = run_step(t, feeds, count, false);
    if (s == CLRUN_OK)
        s = read_gradients(t, gradients);
    return s == CLRUN_OK ? step_result(t, t->steps + 1, result) : s;
}

clrun_status clrun_train_apply(clrun_train *t, const float *gradients, uint64_t count)
{
    clrun_status s = check_split(t, "clrun_train_apply", gradients, count);
    if (s == CLRUN_OK && t->broken)
        s = clrun__fail(t->ctx, CLRUN_ERROR_INVALID_ARGUMENT, "train: step %llu failed and its "
                        "donated state is gone: create the trainer again (or load a saved "
                        "state)", (unsigned long long)t->broken_step);
    if (s == CLRUN_OK)
        s = write_hypers(t, t->steps + 1);
    if (s == CLRUN_OK)
        s = apply_gradients(t, gradients, t->grad_at);
    if (s == CLRUN_OK)
        t->steps++;
    return s;
}

int32_t clrun_train_param_count(const clrun_train *t)
{
    return t ? t->tg.param_count : 0;
}

clrun_status clrun_train_param_info(const clrun_train *t, int32_t i, const char **name,
                                    clrun_tensor_type *type)
{
    if (t == NULL || i < 0 || i >= t->tg.param_count)
        return clrun__fail(t ? t->ctx : NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                           "clrun_train_param_info: no parameter %d", i);
    clrun_tensor_id id = t->tg.slots[t->params[i]].input;
    if (name)
        *name = clrun_graph_tensor_name(t->tg.graph, id);
    if (type)
        *type = *clrun_graph_tensor_type(t->tg.graph, id);
    return CLRUN_OK;
}

clrun_status clrun_train_read_param(clrun_train *t, int32_t i, void *host, uint64_t bytes)
{
    if (t == NULL || i < 0 || i >= t->tg.param_count || host == NULL)
        return clrun__fail(t ? t->ctx : NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                           "clrun_train_read_param: no parameter %d, or NULL host", i);
    int32_t slot = t->params[i];
    if (bytes != clrun__train_slot_bytes(t, slot))
        return clrun__fail(t->ctx, CLRUN_ERROR_INVALID_ARGUMENT, "train: parameter %s has %llu "
                           "bytes, %llu asked", clrun_graph_tensor_name(t->tg.graph, t->tg.slots[slot].input),
                           (unsigned long long)clrun__train_slot_bytes(t, slot), (unsigned long long)bytes);
    if (!t->held[slot])
        return clrun__fail(t->ctx, CLRUN_ERROR_INVALID_ARGUMENT, "train: the state is gone (step "
                           "%llu failed)", (unsigned long long)t->broken_step);
    return clrun_buffer_read(t->ctx, &t->buffers[slot], host);
}

/* Slot of the model tensor i: parameters, then running statistics; -1 when there is none. */
static int32_t model_tensor_slot(const clrun_train *t, int32_t i)
{
    if (t == NULL || i < 0)
        return -1;
    if (i < t->tg.param_count)
        return t->params[i];
    int32_t k = i - t->tg.param_count;
    for (int32_t s = 0; s < t->tg.slot_count; s++)
        if (t->tg.slots[s].role == CLRUN__SLOT_STATE && t->tg.slots[s].param < 0 && k-- == 0)
            return s;
    return -1;
}

int32_t clrun_train_model_tensor_count(const clrun_train *t)
{
    if (t == NULL)
        return 0;
    int32_t n = t->tg.param_count;
    for (int32_t s = 0; s < t->tg.slot_count; s++)
        n += t->tg.slots[s].role == CLRUN__SLOT_STATE && t->tg.slots[s].param < 0;
    return n;
}

clrun_status clrun_train_model_tensor_info(const clrun_train *t, int32_t i, const char **name,
                                           clrun_tensor_type *type)
{
    int32_t slot = model_tensor_slot(t, i);
    if (slot < 0)
        return clrun__fail(t ? t->ctx : NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                           "clrun_train_model_tensor_info: no model tensor %d", i);
    clrun_tensor_id id = t->tg.slots[slot].input;
    if (name)
        *name = clrun_graph_tensor_name(t->tg.graph, id);
    if (type)
        *type = *clrun_graph_tensor_type(t->tg.graph, id);
    return CLRUN_OK;
}

clrun_status clrun_train_read_model_tensor(clrun_train *t, int32_t i, void *host, uint64_t bytes)
{
    int32_t slot = model_tensor_slot(t, i);
    if (slot < 0 || host == NULL)
        return clrun__fail(t ? t->ctx : NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                           "clrun_train_read_model_tensor: no model tensor %d, or NULL host", i);
    if (bytes != clrun__train_slot_bytes(t, slot))
        return clrun__fail(t->ctx, CLRUN_ERROR_INVALID_ARGUMENT, "train: %s has %llu bytes, %llu "
                           "asked", clrun_graph_tensor_name(t->tg.graph, t->tg.slots[slot].input),
                           (unsigned long long)clrun__train_slot_bytes(t, slot),
                           (unsigned long long)bytes);
    if (!t->held[slot])
        return clrun__fail(t->ctx, CLRUN_ERROR_INVALID_ARGUMENT, "train: the state is gone (step "
                           "%llu failed)", (unsigned long long)t->broken_step);
    return clrun_buffer_read(t->ctx, &t->buffers[slot], host);
}

clrun_status clrun_train_set_lr(clrun_train *t, double lr)
{
    if (t == NULL)
        return clrun__fail(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "clrun_train_set_lr: NULL trainer");
    if (!(lr > 0.0) || lr > 1e6)
        return clrun__fail(t->ctx, CLRUN_ERROR_INVALID_ARGUMENT, "train: learning rate %g: must "
                           "be > 0", lr);
    t->options.graph.optimizer.lr = lr;
    return CLRUN_OK;
}

clrun_status clrun_train_read_gradient(clrun_train *t, int32_t i, void *host, uint64_t bytes)
{
    if (t == NULL || i < 0 || i >= t->tg.param_count || host == NULL)
        return clrun__fail(t ? t->ctx : NULL, CLRUN_ERROR_INVALID_ARGUMENT,
                           "clrun_train_read_gradient: no parameter %d, or NULL host", i);
    const clrun__train_slot *slot = &t->tg.slots[t->params[i]];
    if (slot->grad_output < 0 || !t->options.graph.keep_gradients || t->steps == 0)
        return clrun__fail(t->ctx, CLRUN_ERROR_INVALID_ARGUMENT, "train: no gradient of %s to read "
                           "(%s)", clrun_graph_tensor_name(t->tg.graph, slot->input),
                           slot->grad_output < 0 || !t->options.graph.keep_gradients
                               ? "the trainer keeps none: keep_gradients"
                               : "no step has run");
    return clrun_exec_read_output(t->exec, slot->grad_output, host, bytes);
}

clrun_status clrun_train_stats_get(const clrun_train *t, clrun_train_stats *out)
{
    if (t == NULL || out == NULL)
        return clrun__fail(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "clrun_train_stats_get: NULL");
    memset(out, 0, sizeof *out);
    clrun_status s = clrun_exec_stats_get(t->exec, &out->exec);
    if (s != CLRUN_OK)
        return s;
    out->steps = t->steps;
    out->params = t->tg.param_count;
    out->state_tensors = t->tg.state_count;
    out->param_bytes = t->param_bytes;
    out->state_bytes = t->state_bytes;
    out->peak_bytes = out->exec.peak_bytes;
    uint64_t state = t->param_bytes + t->state_bytes;
    out->activation_peak_bytes = out->peak_bytes > state ? out->peak_bytes - state : 0;
    out->lower_bound_bytes = out->exec.lower_bound_bytes;
    out->donations = out->exec.donations;
    out->donated_in_place = out->exec.donated_in_place;
    out->unused_donations = out->exec.unused_donations;
    clrun_exec_stats apply;
    if (t->apply && clrun_exec_stats_get(t->apply, &apply) == CLRUN_OK) {
        /* with a reduce hook the state is donated to the updates */
        out->donations += apply.donations;
        out->donated_in_place += apply.donated_in_place;
        out->unused_donations += apply.unused_donations;
    }
    out->donated_bytes = out->unused_donations == 0 ? state : 0;
    out->remat = t->tg.remat;
    out->remat_policy = t->remat_policy ? t->remat_policy : "none";
    out->remat_auto = t->remat_auto;
    out->planned_peak_bytes = t->planned_peak;
    out->host_bytes = t->host_bytes;
    return CLRUN_OK;
}

int32_t clrun_train_unused_donations(const clrun_train *t, const char *const **names)
{
    if (names)
        *names = NULL;
    return t ? clrun_exec_unused_donations(t->exec, names) : 0;
}

const clrun_graph *clrun_train_step_graph(const clrun_train *t)
{
    return t ? t->tg.graph : NULL;
}

bool clrun__train_eval_shares(const clrun_train *t)
{
    /* gradients kept are outputs read after the step, maybe after an evaluation */
    return !t->options.graph.keep_gradients && !t->ctx->out_of_order;
}

int32_t clrun_train_buckets(const clrun_train *t, const clrun_train_bucket **buckets)
{
    if (buckets)
        *buckets = t ? t->buckets : NULL;
    return t ? t->bucket_count : 0;
}

const clrun_exec *clrun_train_step_exec(const clrun_train *t)
{
    return t ? t->exec : NULL;
}

int32_t clrun_train_frozen(const clrun_train *t, const char *const **names)
{
    if (names)
        *names = t ? (const char *const *)t->tg.frozen : NULL;
    return t ? t->tg.frozen_count : 0;
}
