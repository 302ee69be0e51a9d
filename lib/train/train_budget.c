/* The step under a memory budget. The step as it is, prepared, its buffers (after fusion, with
 * every kernel's scratch, the state and the feeds) laid out by the static planner against the
 * budget: the capacity decision, whether any layout fits. If none does: dots_saveable (only the
 * elementwise work after the products repeated); then Chen's segments, the shortest whose step
 * fits (every:K, K from 2 to sqrt(n), a binary search: about log2(sqrt(n)) preparations, which
 * reuse the kernels the first one built); then nothing_saveable. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clrun/exec.h>
#include <clrun/plan.h>

#include "core/error.h"
#include "train/train_internal.h"

/* The planner's verdict on the buffers of `exec` within `budget`: *fits, and *peak the best
 * layout's peak found. */
static clrun_status plan_within(const clrun_exec *exec, uint64_t budget, bool *fits,
                                uint64_t *peak, char *err, size_t errlen)
{
    clrun_plan_buffer *buffers = NULL;
    size_t n = 0;
    clrun_status s = clrun_exec_plan_buffers(exec, true, &buffers, &n, NULL);
    if (s != CLRUN_OK) {
        snprintf(err, errlen, "train: listing the step's buffers: %s", clrun_last_error(NULL));
        return s;
    }
    uint64_t *offsets = malloc((n ? n : 1) * sizeof *offsets);
    if (offsets == NULL) {
        free(buffers);
        snprintf(err, errlen, "train: out of host memory planning the step");
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    clrun_plan_options po = CLRUN_PLAN_OPTIONS_DEFAULT;
    po.time_limit_s = 0.2;
    po.capacity = budget;
    clrun_plan_result r;
    s = clrun_plan_solve(buffers, n, &po, offsets, &r);
    if (s == CLRUN_OK) {
        *fits = r.verdict == CLRUN_PLAN_FITS;
        *peak = r.peak_bytes;
    } else {
        snprintf(err, errlen, "train: planning the step: %s", clrun_last_error(NULL));
    }
    free(offsets);
    free(buffers);
    return s;
}

/* "123 bytes", "45.6 KiB", "7.89 MiB" */
static void human(uint64_t bytes, char *out, size_t size)
{
    if (bytes < 1024)
        snprintf(out, size, "%" PRIu64 " bytes", bytes);
    else if (bytes < 1024 * 1024)
        snprintf(out, size, "%.1f KiB", (double)bytes / 1024.0);
    else
        snprintf(out, size, "%.2f MiB", (double)bytes / (1024.0 * 1024.0));
}

/* Builds and prepares the step under `policy` into t->tg and t->exec; with a budget, *fits says
 * whether the planner fits its buffers in it and *peak is the best layout's peak. A step that does
 * not fit is kept (the caller reads it, then drops it with drop_step). */
static clrun_status try_step(clrun_train *t, const clrun_graph *model,
                             const clrun_train_graph_options *options, const char *policy,
                             bool *fits, uint64_t *peak, char *err, size_t errlen)
{
    clrun_train_graph_options o = *options;
    o.remat = policy;
    *fits = true;
    *peak = 0;
    clrun_status s = clrun__train_graph_build(model, &o, &t->tg, err, errlen);
    if (s != CLRUN_OK)
        return s;
    s = clrun_exec_create(t->ctx, t->tg.graph, &t->options.exec, &t->exec);
    if (s != CLRUN_OK) {
        snprintf(err, errlen, "%s", clrun_last_error(t->ctx));
        clrun__train_graph_free(&t->tg);
        return s;
    }
    if (options->memory_budget &&
        (s = plan_within(t->exec, options->memory_budget, fits, peak, err, errlen)) != CLRUN_OK) {
        clrun_exec_destroy(t->exec);
        t->exec = NULL;
        clrun__train_graph_free(&t->tg);
    }
    return s;
}

static void drop_step(clrun_train *t)
{
    clrun_exec_destroy(t->exec);
    t->exec = NULL;
    clrun__train_graph_free(&t->tg);
}

/* The segment policies every:K between every:2 and sqrt_n's length S: the shortest K whose
 * step fits repeats the fewest tensors (a longer K keeps fewer tensors, so below S the peak
 * falls as K grows): a binary search, each K's step prepared and planned. On success the
 * fitting step is t's and *policy its text (malloc'd); *policy NULL when every:S does not fit
 * either (*best: the least peak seen). */
static clrun_status search(clrun_train *t, const clrun_graph *model,
                           const clrun_train_graph_options *options, int32_t S, char **policy,
                           uint64_t *best, char *err, size_t errlen)
{
    *policy = NULL;
    int32_t lo = 2, hi = S, fitting = 0;
    char text[32];
    while (lo <= hi) {
        int32_t k = fitting == 0 ? hi : lo + (hi - lo) / 2; /* the longest first */
        snprintf(text, sizeof text, "every:%d", (int)k);
        bool fits;
        uint64_t peak;
        clrun_status s = try_step(t, model, options, text, &fits, &peak, err, errlen);
        if (s != CLRUN_OK)
            return s;
        *best = peak < *best ? peak : *best;
        if (fits && k == lo) { /* nothing shorter is left to try: this one */
            t->planned_peak = peak;
            if ((*policy = strdup(text)) != NULL)
                return CLRUN_OK;
            drop_step(t);
            snprintf(err, errlen, "train: out of host memory");
            return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        }
        drop_step(t);
        if (!fits && fitting == 0)
            return CLRUN_OK; /* not even the longest segments */
        if (fits) {
            fitting = k;
            hi = k - 1;
        } else {
            lo = k + 1;
        }
    }
    snprintf(text, sizeof text, "every:%d", (int)fitting);
    bool fits;
    uint64_t peak;
    clrun_status s = try_step(t, model, options, text, &fits, &peak, err, errlen);
    if (s != CLRUN_OK)
        return s;
    if (fits) {
        t->planned_peak = peak;
        if ((*policy = strdup(text)) != NULL)
            return CLRUN_OK;
        drop_step(t);
        snprintf(err, errlen, "train: out of host memory");
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    drop_step(t); /* it fitted before: a planner cut short by its time; the caller goes on */
    return CLRUN_OK;
}

/* Takes the step built for `policy` as t's, which fits. */
static clrun_status keep_step(clrun_train *t, const char *policy, uint64_t peak, char *err,
                              size_t errlen)
{
    t->planned_peak = peak;
    if (policy == NULL || strcmp(policy, "none") == 0)
        return CLRUN_OK;
    if ((t->remat_policy = strdup(policy)) != NULL)
        return CLRUN_OK;
    drop_step(t);
    snprintf(err, errlen, "train: out of host memory");
    return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
}

clrun_status clrun__train_build_step(clrun_train *t, const clrun_graph *model,
                                     const clrun_train_graph_options *options, char *err,
                                     size_t errlen)
{
    const char *given = options->remat && options->remat[0] ? options->remat : NULL;
    bool fits;
    uint64_t peak, best = UINT64_MAX;
    const char *best_policy = given ? given : "none";
    clrun_status s = try_step(t, model, options, given ? given : "none", &fits, &peak, err, errlen);
    if (s != CLRUN_OK)
        return s;
    if (fits)
        return keep_step(t, given, peak, err, errlen);
    best = peak;
    if (!given) {
        /* dots_saveable, the shortest segments that fit, then nothing_saveable */
        int32_t S = (int32_t)ceil(sqrt((double)(t->tg.forward_nodes > 0 ? t->tg.forward_nodes : 1)));
        drop_step(t);
        if ((s = try_step(t, model, options, "dots_saveable", &fits, &peak, err, errlen)) != CLRUN_OK)
            return s;
        if (fits)
            return keep_step(t, "dots_saveable", peak, err, errlen);
        drop_step(t);
        if (peak < best) {
            best = peak;
            best_policy = "dots_saveable";
        }
        char *policy = NULL;
        uint64_t searched = best;
        if (S >= 2 && (s = search(t, model, options, S, &policy, &searched, err, errlen)) != CLRUN_OK)
            return s;
        if (policy != NULL) {
            t->remat_policy = policy;
            return CLRUN_OK;
        }
        if (searched < best) {
            best = searched;
            best_policy = "every:K segments";
        }
        if ((s = try_step(t, model, options, "nothing_saveable", &fits, &peak, err, errlen)) != CLRUN_OK)
            return s;
        if (fits)
            return keep_step(t, "nothing_saveable", peak, err, errlen);
        drop_step(t);
        if (peak < best) {
            best = peak;
            best_policy = "nothing_saveable";
        }
    } else {
        drop_step(t);
    }
    char b1[32], b2[32];
    human(options->memory_budget, b1, sizeof b1);
    human(best, b2, sizeof b2);
    snprintf(err, errlen, "train: the step does not fit a memory budget of %s: at best it needs "
             "%s (remat %s)%s", b1, b2, best_policy,
             given ? "; without --remat the trainer searches" : " whatever is recomputed");
    return CLRUN_ERROR_INVALID_ARGUMENT;
}
