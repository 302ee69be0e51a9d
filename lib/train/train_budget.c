/* The step under a memory budget: each candidate rematerialisation policy, from the cheapest
 * (none: every activation kept) to the one that keeps least, is built and prepared, and the
 * buffers its executor creates (after fusion, with every node's scratch, the state and the feeds)
 * are laid out by the static planner against the budget: the capacity decision, whether any
 * layout fits. The first that fits is the step. */
#include <inttypes.h>
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

clrun_status clrun__train_build_step(clrun_train *t, const clrun_graph *model,
                                     const clrun_train_graph_options *options, char *err,
                                     size_t errlen)
{
    static const char *const ladder[] = {"none", "dots_saveable", "sqrt_n", "nothing_saveable"};
    const char *given = options->remat && options->remat[0] ? options->remat : NULL;
    const char *const *candidates = given ? &given : ladder;
    size_t count = given ? 1 : (options->memory_budget ? sizeof ladder / sizeof ladder[0] : 1);
    uint64_t best = UINT64_MAX;
    const char *best_policy = NULL;
    for (size_t k = 0; k < count; k++) {
        clrun_train_graph_options o = *options;
        o.remat = candidates[k];
        clrun_status s = clrun__train_graph_build(model, &o, &t->tg, err, errlen);
        if (s != CLRUN_OK)
            return s;
        s = clrun_exec_create(t->ctx, t->tg.graph, &t->options.exec, &t->exec);
        if (s != CLRUN_OK) {
            snprintf(err, errlen, "%s", clrun_last_error(t->ctx));
            clrun__train_graph_free(&t->tg);
            return s;
        }
        bool fits = true;
        uint64_t peak = 0;
        if (options->memory_budget)
            s = plan_within(t->exec, options->memory_budget, &fits, &peak, err, errlen);
        if (s == CLRUN_OK && fits) {
            t->planned_peak = peak;
            if (strcmp(candidates[k], "none") == 0)
                return CLRUN_OK;
            if ((t->remat_policy = strdup(candidates[k])) != NULL)
                return CLRUN_OK;
            snprintf(err, errlen, "train: out of host memory");
            s = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        }
        clrun_exec_destroy(t->exec);
        t->exec = NULL;
        clrun__train_graph_free(&t->tg);
        if (s != CLRUN_OK)
            return s;
        if (peak < best) {
            best = peak;
            best_policy = candidates[k];
        }
    }
    char b1[32], b2[32];
    human(options->memory_budget, b1, sizeof b1);
    human(best, b2, sizeof b2);
    snprintf(err, errlen, "train: the step does not fit a memory budget of %s: at best it needs "
             "%s (remat %s)%s", b1, b2, best_policy,
             given ? "; without --remat every policy is tried" : " under every policy");
    return CLRUN_ERROR_INVALID_ARGUMENT;
}
